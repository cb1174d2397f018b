"""Thread counts as a container user expects (issue 18): the default is the CPUs the process may use
(affinity mask, capped by the cgroup's CPU quota), KILN_NUM_THREADS / OMP_NUM_THREADS are honoured,
set/get_num_interop_threads follow torch's rules, and a second OpenMP runtime in the process is
reported once. The cgroup limit is tested through its reader on fake cgroup trees (creating a real
cgroup needs privileges this machine's test user does not have); the affinity mask with a real one."""
import glob
import os
import subprocess
import sys
import textwrap

import pytest

import kiln

_C = kiln._C
REPO_PY = os.path.join(os.path.dirname(__file__), "..", "..", "python")


def run_py(code, env=None, check=True):
    e = dict(os.environ)
    for k in ("KILN_NUM_THREADS", "OMP_NUM_THREADS"):
        e.pop(k, None)
    e["PYTHONPATH"] = os.path.abspath(REPO_PY) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e, capture_output=True, text=True,
                       timeout=120)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def write(root, rel, text):
    p = os.path.join(root, rel.lstrip("/"))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(text)


# --- the cgroup reader ------------------------------------------------------------------------

def test_cpu_max_v2_nested_takes_the_smallest_quota_of_the_ancestors(tmp_path):
    r = str(tmp_path)
    write(r, "/proc/self/cgroup", "0::/kubepods/pod1/ctr\n")
    write(r, "/sys/fs/cgroup/kubepods/cpu.max", "max 100000\n")
    write(r, "/sys/fs/cgroup/kubepods/pod1/cpu.max", "250000 100000\n")
    write(r, "/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "max 100000\n")
    assert _C._cgroup_cpu_limit(r) == pytest.approx(2.5)
    write(r, "/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "50000 100000\n")
    assert _C._cgroup_cpu_limit(r) == pytest.approx(0.5)


def test_cpu_max_v2_container_namespace_reads_its_mount(tmp_path):
    # inside a cgroup namespace the path may be "/" or a host path absent from the container's mount
    r = str(tmp_path)
    write(r, "/proc/self/cgroup", "0::/\n")
    write(r, "/sys/fs/cgroup/cpu.max", "300000 100000\n")
    assert _C._cgroup_cpu_limit(r) == pytest.approx(3.0)
    write(r, "/proc/self/cgroup", "0::/system.slice/docker-abc.scope\n")
    assert _C._cgroup_cpu_limit(r) == pytest.approx(3.0)
    write(r, "/sys/fs/cgroup/cpu.max", "max 100000\n")
    assert _C._cgroup_cpu_limit(r) is None


def test_cfs_quota_v1(tmp_path):
    r = str(tmp_path)
    write(r, "/proc/self/cgroup", "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n")
    write(r, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n")
    write(r, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n")
    write(r, "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "150000\n")
    write(r, "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n")
    assert _C._cgroup_cpu_limit(r) == pytest.approx(1.5)
    write(r, "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n")
    assert _C._cgroup_cpu_limit(r) is None


def test_no_cgroup_files_no_limit(tmp_path):
    assert _C._cgroup_cpu_limit(str(tmp_path)) is None
    write(str(tmp_path), "/proc/self/cgroup", "garbage\n0::/x\n")
    assert _C._cgroup_cpu_limit(str(tmp_path)) is None


@pytest.mark.parametrize("affinity,quota,want", [(8, 2.5, 2), (8, 0.5, 1), (2, None, 2), (2, 16.0, 2),
                                                 (64, 4.0, 4), (1, None, 1), (0, None, 1)])
def test_threads_from_affinity_and_quota(affinity, quota, want):
    assert _C._threads_for(affinity, quota) == want


@pytest.mark.parametrize("text,want", [("4", 4), ("4,2", 4), (" 3", 3), ("0", 0), ("-2", 0), ("two", 0),
                                       ("4x", 0), ("", 0)])
def test_thread_env_parsing(text, want):
    assert _C._parse_thread_env(text) == want


# --- the default, in fresh processes -----------------------------------------------------------

def test_default_is_the_affinity_mask():
    cpus = sorted(os.sched_getaffinity(0))
    r = run_py(f"""
        import os; os.sched_setaffinity(0, {{{cpus[0]}}})
        import kiln; print(kiln.get_num_threads(), kiln.get_num_interop_threads())""")
    assert r.stdout.split() == ["1", "1"]
    r = run_py("import kiln; print(kiln.get_num_threads())")
    assert int(r.stdout) == min(len(cpus), _C._threads_for(len(cpus), _C._cgroup_cpu_limit("")))


def test_env_variables_are_honoured():
    assert run_py("import kiln; print(kiln.get_num_threads())", {"OMP_NUM_THREADS": "3"}).stdout.strip() == "3"
    assert run_py("import kiln; print(kiln.get_num_threads())", {"OMP_NUM_THREADS": "5,2"}).stdout.strip() == "5"
    r = run_py("import kiln; print(kiln.get_num_threads())", {"OMP_NUM_THREADS": "3", "KILN_NUM_THREADS": "4"})
    assert r.stdout.strip() == "4"


def test_bad_env_value_warns_and_falls_back():
    r = run_py("""
        import warnings, os
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import kiln
            n = kiln.get_num_threads()
        # the value ignored: the CPUs this process may use, as without the variable
        assert n == kiln._C._threads_for(len(os.sched_getaffinity(0)), kiln._C._cgroup_cpu_limit("")), n
        print([str(x.message) for x in w if x.category is RuntimeWarning])""", {"KILN_NUM_THREADS": "lots"})
    assert "KILN_NUM_THREADS='lots' is not a positive integer" in r.stdout


# --- interop threads: torch's rules -------------------------------------------------------------

def test_interop_threads_like_torch():
    code = """
        import {m} as t
        out = []
        for a in (0, 2, 3):
            try:
                t.set_num_interop_threads(a); out.append("ok")
            except RuntimeError as e:
                out.append(str(e).splitlines()[0])
        out.append(t.get_num_interop_threads())
        try:
            t.set_num_interop_threads("a")
        except RuntimeError as e:
            out.append(str(e).splitlines()[0])
        print(repr(out))"""
    want = eval(run_py(code.format(m="torch")).stdout)
    got = eval(run_py(code.format(m="kiln")).stdout)
    assert len(got) == len(want) == 5
    assert got[1] == "ok" and got[3] == want[3] == 2
    for g, w in zip(got, want):
        assert str(w) in str(g), (g, w)


# --- a second OpenMP runtime ---------------------------------------------------------------------

def test_openmp_runtime_kinds():
    k = _C._openmp_runtime_kind
    assert k("/usr/lib/x86_64-linux-gnu/libgomp.so.1") == "libgomp"
    assert k("/site-packages/torch/lib/libgomp-a34b3233.so.1") == "libgomp"
    assert k("/opt/intel/lib/libiomp5.so") == "libiomp5"
    assert k("/usr/lib/llvm-19/lib/libomp.so.5") == "libomp"
    assert k("/usr/lib/llvm-19/lib/libomp-19.so.5") == "libomp"
    for other in ("/usr/lib/libompitrace.so.40", "/usr/lib/llvm-19/lib/libomptarget.so", "libgompx.so", "libc.so.6"):
        assert k(other) == ""


def _llvm_openmp():
    """The libomp that clang-19 (the sanitizer build's compiler) links, else the newest installed."""
    found = glob.glob("/usr/lib/llvm-19/lib/libomp.so.5") or sorted(
        glob.glob("/usr/lib/llvm-*/lib/libomp.so.5"), key=lambda p: int(p.split("llvm-")[1].split("/")[0]))[-1:] \
        or glob.glob("/usr/lib/x86_64-linux-gnu/libomp.so.5")
    assert found, "LLVM's OpenMP runtime (libomp-19-dev, installed by make build) is missing"
    return found[0]


def test_one_runtime_no_warning():
    r = run_py("""
        import warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import kiln
            kiln.set_num_threads(1)
        print(len(kiln._C._openmp_runtimes()), len([x for x in w if "OpenMP" in str(x.message)]))""")
    assert r.stdout.split() == ["1", "0"]


def test_second_runtime_warns_once():
    lib = _llvm_openmp()  # (loaded locally: kiln and OpenBLAS keep libgomp, this one has its own pool)
    r = run_py(f"""
        import ctypes, warnings
        ctypes.CDLL({lib!r}, mode=ctypes.RTLD_LOCAL)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import kiln
            kiln.set_num_threads(1)
            kiln.set_num_threads(2)
        msgs = [str(x.message) for x in w if x.category is RuntimeWarning and "OpenMP" in str(x.message)]
        print(len(msgs)); print(msgs[0])""")
    n, msg = r.stdout.split("\n", 1)
    assert n == "1"
    assert "2 OpenMP runtimes are loaded" in msg and "libgomp" in msg and "libomp" in msg


@pytest.mark.parametrize("how", ["global", "preload"])
def test_runtime_standing_in_for_libgomp_is_one(how):
    """LLVM's runtime first in the global scope (loaded RTLD_GLOBAL before kiln, or LD_PRELOAD, as
    the sanitizer build's tests run): kiln, OpenBLAS and torch all bind libgomp's entry points to it,
    so libgomp, loaded beside it, runs nothing: one runtime, no warning."""
    lib = _llvm_openmp()
    load = f"import ctypes; ctypes.CDLL({lib!r}, mode=ctypes.RTLD_GLOBAL)" if how == "global" else ""
    r = run_py(f"""
        {load}
        import warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import torch, kiln
            kiln.set_num_threads(2)
            assert float((kiln.ones(1 << 20) * 2).sum()) == 2 << 20
        rts = kiln._C._openmp_runtimes()
        print(len(rts), rts[0].rsplit("/", 1)[-1].split(".")[0], len([x for x in w if "OpenMP" in str(x.message)]))""",
               env={"LD_PRELOAD": lib} if how == "preload" else None)
    assert r.stdout.split() == ["1", "libomp", "0"], r.stdout + r.stderr
