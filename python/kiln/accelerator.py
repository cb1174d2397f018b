"""kiln.accelerator: torch.accelerator's module, with the explanation torch 2.15 added.

When no accelerator is usable, every function that needs one raises torch's RuntimeError, and the
message says why, in words (`explain()` gives the same sentence): built without CUDA; CUDA driver
missing; driver too old for the CUDA runtime kiln was built with (both versions named); no device
visible (CUDA_VISIBLE_DEVICES); GPU compute capability below kiln's minimum (the GPU named). The probe
is kiln/core/accelerator.cpp: it dlopens the driver library, so the CPU build links nothing of CUDA.
This build has no CUDA backend yet (issue 19): is_available() is False and device_count() 0.
"""
import warnings as _warnings

from . import _C

__all__ = ["current_accelerator", "current_device_index", "current_device_idx", "current_stream",
           "device_count", "device_index", "empty_cache", "empty_host_cache", "explain",
           "get_device_capability", "get_memory_info", "is_available", "max_memory_allocated",
           "max_memory_reserved", "memory_allocated", "memory_reserved", "memory_stats",
           "reset_accumulated_memory_stats", "reset_peak_memory_stats", "set_device_idx",
           "set_device_index", "set_stream", "synchronize"]


def is_available():
    return _C._accelerator_is_available()


def device_count():
    return _C._accelerator_device_count()


def explain():
    """Why no accelerator is usable (a sentence), or which one is."""
    return _C._accelerator_explain()


def current_accelerator(check_available=False):
    # torch returns the accelerator kiln was built for even when unusable, unless check_available;
    # a CPU build has none
    if _C._accelerator_built_cuda_version() == 0:
        return None
    if check_available and not is_available():
        return None
    return _C.device("cuda")


def _unavailable():
    return RuntimeError("Cannot access accelerator device when none is available: " + explain())


def _require():
    if not is_available():
        raise _unavailable()
    # a CUDA build reaches here; its backend (issue 19) supplies the device functions
    raise RuntimeError("kiln's CUDA backend is not part of this build")


def current_device_index():
    _require()


def current_device_idx():
    _warnings.warn("Use `current_device_index` instead.", FutureWarning, stacklevel=2)
    return current_device_index()


def set_device_index(device, /):
    _require()


def set_device_idx(device, /):
    _warnings.warn("Use `set_device_index` instead.", FutureWarning, stacklevel=2)
    return set_device_index(device)


def synchronize(device=None, /):
    _require()


def current_stream(device=None, /):
    _require()


def set_stream(stream):
    _require()


class device_index:
    """Context manager that makes `device` current (None: nothing changes), as torch's."""

    def __init__(self, device, /):
        self.idx = device

    def __enter__(self):
        if self.idx is not None:
            _require()
        return self

    def __exit__(self, *exc):
        return False


def _memory(name):
    def fn(device_index=None, /):
        _require()
    fn.__name__ = fn.__qualname__ = name
    return fn


empty_cache = _memory("empty_cache")
empty_host_cache = _memory("empty_host_cache")
get_device_capability = _memory("get_device_capability")
get_memory_info = _memory("get_memory_info")
max_memory_allocated = _memory("max_memory_allocated")
max_memory_reserved = _memory("max_memory_reserved")
memory_allocated = _memory("memory_allocated")
memory_reserved = _memory("memory_reserved")
memory_stats = _memory("memory_stats")
reset_accumulated_memory_stats = _memory("reset_accumulated_memory_stats")
reset_peak_memory_stats = _memory("reset_peak_memory_stats")
