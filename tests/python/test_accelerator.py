"""kiln.accelerator (issue 18): torch.accelerator's module, and 2.15's explanation of why no
accelerator is usable. Each case is simulated with a stub CUDA driver library built here (its
answers set by environment variables) and, for the build's own answer, with the CPU build itself."""
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import kiln

_C = kiln._C

STUB = r"""
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
static int env_int(const char* n, int d) { const char* v = getenv(n); return v ? atoi(v) : d; }
/* STUB_DEVICES: "name:major.minor;name:major.minor" */
static int parse(int i, char* name, int len, int* major, int* minor) {
  const char* v = getenv("STUB_DEVICES"); if (!v || !*v) return 0;
  char buf[1024]; strncpy(buf, v, sizeof buf - 1); buf[sizeof buf - 1] = 0;
  int k = 0; char* save = 0;
  for (char* t = strtok_r(buf, ";", &save); t; t = strtok_r(0, ";", &save), ++k) {
    if (k != i) continue;
    char* c = strrchr(t, ':'); if (!c) return 0; *c = 0;
    if (name) { strncpy(name, t, len - 1); name[len - 1] = 0; }
    if (major) *major = atoi(c + 1);
    if (minor) { char* d = strchr(c + 1, '.'); *minor = d ? atoi(d + 1) : 0; }
    return 1;
  }
  return 0;
}
static int count(void) { int n = 0; while (parse(n, 0, 0, 0, 0)) ++n; return n; }
static int visible_none(void) {
  const char* v = getenv("CUDA_VISIBLE_DEVICES");
  return v && (!*v || atoi(v) < 0);
}
int cuDriverGetVersion(int* v) { *v = env_int("STUB_DRIVER_VERSION", 12040); return 0; }
int cuInit(unsigned f) {
  (void)f;
  int rc = env_int("STUB_INIT_RESULT", 0);
  if (rc) return rc;
  return (visible_none() || count() == 0) ? 100 : 0;
}
int cuDeviceGetCount(int* n) { *n = visible_none() ? 0 : count(); return 0; }
int cuDeviceGet(int* d, int i) { if (i >= count()) return 101; *d = i; return 0; }
int cuDeviceGetName(char* name, int len, int d) { return parse(d, name, len, 0, 0) ? 0 : 101; }
int cuDeviceGetAttribute(int* out, int attr, int d) {
  int major = 0, minor = 0;
  if (!parse(d, 0, 0, &major, &minor)) return 101;
  *out = attr == 75 ? major : attr == 76 ? minor : 0;
  return 0;
}
int cuGetErrorName(int rc, const char** s) { *s = rc == 999 ? "CUDA_ERROR_UNKNOWN" : "CUDA_ERROR_OTHER"; return 0; }
"""


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    d = tmp_path_factory.mktemp("cudastub")
    src = d / "stub.c"
    src.write_text(STUB)
    lib = d / "libcuda.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)], check=True)
    return str(lib)


def diagnose(monkeypatch, lib, runtime=12040, devices="NVIDIA H200:9.0", driver=12040, init=None, visible=None,
             min_cc=70):
    monkeypatch.setenv("STUB_DEVICES", devices)
    monkeypatch.setenv("STUB_DRIVER_VERSION", str(driver))
    if init is None:
        monkeypatch.delenv("STUB_INIT_RESULT", raising=False)
    else:
        monkeypatch.setenv("STUB_INIT_RESULT", str(init))
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    return _C._accelerator_diagnose(runtime, lib, min_cc)


def test_usable_gpu(monkeypatch, stub):
    d = diagnose(monkeypatch, stub, devices="NVIDIA H200:9.0;NVIDIA A100-SXM4-80GB:8.0")
    assert d["available"] and d["device_count"] == 2 and d["reason"] == ""
    assert d["driver_version"] == 12040
    assert d["devices"] == ["NVIDIA H200 (compute capability 9.0)", "NVIDIA A100-SXM4-80GB (compute capability 8.0)"]


def test_built_without_cuda_says_so_and_what_a_cuda_build_would_find(monkeypatch, stub):
    d = diagnose(monkeypatch, stub, runtime=0)
    assert not d["available"] and d["device_count"] == 0
    assert d["reason"] == ("kiln was built without CUDA (a CPU-only build); this machine has the CUDA driver 12.4 "
                           "and 1 GPU (NVIDIA H200 (compute capability 9.0)), which a CUDA build of kiln would use")
    d = _C._accelerator_diagnose(0, "/nonexistent/libcuda.so.1", 70)
    assert d["reason"] == "kiln was built without CUDA (a CPU-only build)"


def test_driver_missing(monkeypatch, tmp_path):
    d = _C._accelerator_diagnose(12040, str(tmp_path / "libcuda.so.1"), 70)
    assert not d["available"]
    assert d["reason"].startswith(f"the CUDA driver is missing: {tmp_path / 'libcuda.so.1'} could not be loaded (")
    assert d["reason"].endswith("); install the NVIDIA driver")


def test_not_a_driver(tmp_path):
    lib = tmp_path / "libnot.so"
    (tmp_path / "n.c").write_text("int something(void) { return 0; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "n.c")], check=True)
    d = _C._accelerator_diagnose(12040, str(lib), 70)
    assert d["reason"] == f"{lib} is not a usable CUDA driver (it lacks the driver API's entry points)"


def test_driver_too_old_names_both_versions(monkeypatch, stub):
    d = diagnose(monkeypatch, stub, runtime=12080, driver=11040)
    assert not d["available"]
    assert d["reason"] == ("the CUDA driver is too old: it supports CUDA up to 11.4, and kiln was built with the "
                           "CUDA 12.8 runtime; install a driver for CUDA 12.8 or newer")


@pytest.mark.parametrize("visible", ["", "-1", "-1,0"])
def test_no_device_visible(monkeypatch, stub, visible):
    d = diagnose(monkeypatch, stub, visible=visible)
    assert not d["available"] and d["device_count"] == 0
    assert d["reason"] == (f"no GPU is visible: CUDA_VISIBLE_DEVICES='{visible}' hides every device from the "
                           "CUDA driver 12.4")


def test_driver_without_gpu(monkeypatch, stub):
    d = diagnose(monkeypatch, stub, devices="")
    assert d["reason"] == "the CUDA driver 12.4 is installed but finds no GPU"


def test_init_failure_is_named(monkeypatch, stub):
    d = diagnose(monkeypatch, stub, init=999)
    assert d["reason"] == "the CUDA driver 12.4 failed to start: cuInit returned 999 (CUDA_ERROR_UNKNOWN)"


def test_compute_capability_below_minimum_names_the_gpu(monkeypatch, stub):
    d = diagnose(monkeypatch, stub, devices="NVIDIA GeForce GTX 750 Ti:5.0")
    assert not d["available"]
    assert d["devices"] == ["NVIDIA GeForce GTX 750 Ti (compute capability 5.0)"]
    assert d["reason"] == ("GPU 0 (NVIDIA GeForce GTX 750 Ti) has compute capability 5.0, below the minimum 7.0 "
                           "that kiln's CUDA kernels are built for")
    # one old GPU beside a supported one: the supported one is used
    d = diagnose(monkeypatch, stub, devices="NVIDIA GeForce GTX 750 Ti:5.0;NVIDIA L4:8.9")
    assert d["available"] and d["device_count"] == 1


def run_py(code, env):
    e = dict(os.environ)
    e["PYTHONPATH"] = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    e.update(env)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_device_cuda_error_explains(stub):
    # the CPU build's public path: the probe reads KILN_CUDA_DRIVER_LIBRARY (here the stub)
    out = run_py("""
        import kiln
        try:
            kiln.zeros(2, device="cuda")
        except AssertionError as e:
            print(e)
        print(kiln.accelerator.explain())""", {"KILN_CUDA_DRIVER_LIBRARY": stub, "STUB_DEVICES": "NVIDIA H200:9.0"})
    err, explained = out.strip().splitlines()
    assert "kiln cannot place a tensor on device 'cuda': kiln was built without CUDA (a CPU-only build); this " \
           "machine has the CUDA driver 12.4 and 1 GPU (NVIDIA H200" in err
    assert explained.startswith("kiln was built without CUDA (a CPU-only build); this machine has")


# --- the module's API against torch.accelerator on this CPU-only machine -----------------------------

def test_api_without_accelerator_matches_torch():
    A, T = kiln.accelerator, torch.accelerator
    assert A.current_accelerator() is None and T.current_accelerator() is None
    assert A.current_accelerator(check_available=True) is None
    assert A.is_available() is T.is_available() is False
    assert A.device_count() == T.device_count() == 0
    assert kiln.cuda.is_available() is torch.cuda.is_available() is False
    assert kiln.cuda.device_count() == torch.cuda.device_count() == 0
    assert kiln.cuda.is_built() is False
    calls = [("current_device_index", ()), ("synchronize", ()), ("set_device_index", (0,)), ("current_stream", ()),
             ("empty_cache", ()), ("memory_allocated", ()), ("memory_stats", ()), ("max_memory_allocated", ()),
             ("get_memory_info", ()), ("get_device_capability", ()), ("reset_peak_memory_stats", ()),
             ("memory_reserved", ()), ("max_memory_reserved", ()), ("reset_accumulated_memory_stats", ()),
             ("empty_host_cache", ())]
    for name, args in calls:
        with pytest.raises(RuntimeError) as want:
            getattr(T, name)(*args)
        with pytest.raises(RuntimeError) as got:
            getattr(A, name)(*args)
        w = str(want.value).rstrip(".")
        assert str(got.value).startswith(w + ": kiln was built without CUDA"), (name, str(got.value))
    for mod in (A, T):
        with mod.device_index(None):
            pass
        with pytest.raises(RuntimeError):
            with mod.device_index(0):
                pass
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError):
            A.current_device_idx()
    assert [str(x.message) for x in w] == ["Use `current_device_index` instead."]
    assert {n for n in dir(T) if not n.startswith("_") and callable(getattr(T, n))} - set(dir(A)) <= {
        "Any", "Graph", "deprecated", "torch", "cache", "graphs", "memory"}


def test_device_cuda_error_class_matches_torch():
    with pytest.raises(AssertionError):
        torch.zeros(2, device="cuda")
    with pytest.raises(AssertionError, match="kiln was built without CUDA"):
        kiln.zeros(2, device="cuda")
    with pytest.raises(AssertionError, match="kiln was built without CUDA"):
        kiln.ones(2).cuda()
