"""pytest plugin for runs with guard_malloc.so preloaded (make test-guard): while a test runs, every
heap block of at least GM_TEST_MIN bytes (default 16) ends at an unmapped page; between tests only
blocks of GM_MIN bytes and more do (the interpreter's imports would otherwise need more mappings than
the kernel allows)."""
import ctypes
import os

_lib = ctypes.CDLL(None)
if not hasattr(_lib, "gm_set_min"):
    raise RuntimeError("guard_malloc_plugin: guard_malloc.so is not preloaded (LD_PRELOAD)")
_lib.gm_set_min.argtypes = [ctypes.c_size_t]
_during = int(os.environ.get("GM_TEST_MIN", "16"))
_between = int(os.environ.get("GM_MIN", "65536"))


def pytest_runtest_call(item):
    _lib.gm_set_min(_during)


def pytest_runtest_teardown(item):
    _lib.gm_set_min(_between)
