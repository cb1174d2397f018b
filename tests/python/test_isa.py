"""The portable (SSE2) kernels selected with KILN_CPU_ISA=base give the same results as torch too:
run-time ISA selection must not change semantics on older CPUs."""
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).parent


@pytest.mark.parametrize("isa", ["base"])
def test_kernels_on_lower_isa(isa):
    import kiln
    pkg_root = str(pathlib.Path(kiln.__file__).resolve().parents[1])
    env = dict(os.environ, KILN_CPU_ISA=isa, PYTHONPATH=pkg_root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = "import kiln; assert kiln.cpu_isa() == %r, kiln.cpu_isa()" % isa
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    k = "exp or gelu or sigmoid or tanh or add or mul or div or pow or softmax or sum or amax or matmul"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:xdist", "-p", "no:cacheprovider",
                        str(HERE / "test_elementwise.py"), str(HERE / "test_reduce.py"), str(HERE / "test_matmul.py"),
                        "-k", f"({k}) and (float32 or bfloat16 or float16 or int64)"],
                       env=env, capture_output=True, text=True, cwd=HERE)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
