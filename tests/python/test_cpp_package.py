"""The C++ library installs and a CMake project links it with find_package(kiln)."""
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not found")
def test_find_package_consumer(tmp_path):
    build = ROOT / "build"
    if not (build / "CMakeCache.txt").exists():
        pytest.skip("build the project first (make build)")
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", str(build), "--prefix", str(prefix)], check=True, capture_output=True)
    assert (prefix / "include" / "kiln" / "kiln.h").exists()
    # the installed library names no distribution's OpenBLAS folder: the system's libopenblas.so.0 serves
    libs = sorted(prefix.rglob("libkiln.so*"))
    assert libs
    dyn = subprocess.run(["readelf", "-d", str(libs[0])], check=True, capture_output=True, text=True).stdout
    paths = [line for line in dyn.splitlines() if "RUNPATH" in line or "RPATH" in line]
    assert "libopenblas.so.0" in dyn and not any("openblas" in line for line in paths), paths
    ex = tmp_path / "ex"
    subprocess.run(["cmake", "-S", str(ROOT / "examples" / "cpp"), "-B", str(ex), "-G", "Ninja",
                    f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(ex)], check=True, capture_output=True)
    out = subprocess.run([str(ex / "quickstart")], check=True, capture_output=True, text=True).stdout
    assert "tensor([" in out
    assert "kiln.bfloat16 4" in out
    assert "[mm] mat1 and mat2 shapes cannot be multiplied (4x3 and 4x3)" in out
    # export from C++, then the installed kiln-run on the archive it wrote
    archive = tmp_path / "tagger.kiln"
    out = subprocess.run([str(ex / "export_lstm"), str(archive)], check=True, capture_output=True, text=True).stdout
    assert "batch 4, seq  257" in out and "max |runtime - eager| = 0" in out
    info = subprocess.run([str(prefix / "bin" / "kiln-run"), str(archive), "--info"], check=True, capture_output=True,
                          text=True).stdout
    assert "lstm_layer" in info and "seq: VR[1, 4096]" in info
    # the DDP example against the installed libkiln_distributed, under mpirun
    import kiln
    if kiln.distributed.is_available() and shutil.which("mpirun"):
        import os
        assert (ex / "ddp").exists(), "the installed package lacks kiln::kiln_distributed"
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1",
                   OMPI_MCA_btl_base_warn_component_unused="0")
        out = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", "--mca", "btl", "self,tcp", "--mca",
                              "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo", str(ex / "ddp")],
                             check=True, capture_output=True, text=True, env=env, timeout=120).stdout
        assert "rank 1 of 2: max |DDP - single process on the full batch|" in out
