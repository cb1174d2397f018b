"""torch.autocast for kiln: a context manager and decorator over kiln/amp's thread state."""
import functools
import warnings

from .. import _C

_DEVICE_TYPES = ("cpu", "cuda")


def is_autocast_available(device_type):
    """Whether autocast can run on `device_type` (kiln: the CPU)."""
    return device_type == "cpu"


def is_autocast_enabled(device_type="cuda"):
    return _C._is_autocast_enabled(device_type)


def set_autocast_enabled(device_type, enabled=None):
    if enabled is None:  # torch's one-argument form: CUDA
        device_type, enabled = "cuda", device_type
    _C._set_autocast_enabled(device_type, bool(enabled))


def get_autocast_dtype(device_type):
    return _C._get_autocast_dtype(device_type)


def set_autocast_dtype(device_type, dtype):
    _C._set_autocast_dtype(device_type, dtype)


class autocast:
    """torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None): ops in the region
    run in the precision torch's CPU op lists give them (docs/porting-from-torch.md)."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if device_type not in _DEVICE_TYPES:
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        self.device = device_type
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        self._cache_enabled = _C.is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        from .. import bfloat16, float16
        self._dtype_ok = device_type != "cpu" or self.fast_dtype in (bfloat16, float16)
        if enabled and not self._dtype_ok:
            warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                          "CPU Autocast only supports dtype of torch.bfloat16, torch.float16 currently.")
            enabled = False
        if device_type == "cuda" and enabled:
            warnings.warn("User provided device_type of 'cuda', but CUDA is not available. Disabling")
            enabled = False
        self._enabled = bool(enabled)

    def __enter__(self):
        self.prev_cache_enabled = _C.is_autocast_cache_enabled()
        self.prev = is_autocast_enabled(self.device)
        self.prev_fastdtype = get_autocast_dtype(self.device)
        set_autocast_enabled(self.device, self._enabled)
        if self._dtype_ok:
            set_autocast_dtype(self.device, self.fast_dtype)
        _C.autocast_increment_nesting()
        _C.set_autocast_cache_enabled(self._cache_enabled)

    def __exit__(self, exc_type, exc_val, exc_tb):
        if _C.autocast_decrement_nesting() == 0:
            _C.clear_autocast_cache()
        set_autocast_enabled(self.device, self.prev)
        set_autocast_dtype(self.device, self.prev_fastdtype)
        _C.set_autocast_cache_enabled(self.prev_cache_enabled)
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return decorate_autocast


def _cast(value, device_type, dtype):
    from .. import Tensor, float64
    if isinstance(value, Tensor):
        eligible = value.is_floating_point() and value.dtype != float64 and value.device.type == device_type
        return value.to(dtype) if eligible else value
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, dict):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    return value


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator for a custom autograd Function's forward: with cast_inputs, floating inputs are cast
    to it and forward runs with autocast off; without, forward runs under the caller's autocast and
    custom_bwd replays that state in backward."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        args[0]._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            args[0]._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        on = is_autocast_enabled(device_type)
        args[0]._fwd_used_autocast = False
        if not on:
            return fwd(*args, **kwargs)
        with autocast(device_type=device_type, enabled=False):
            return fwd(*_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorator for a custom autograd Function's backward: runs it under forward's autocast state."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        with autocast(device_type=device_type, enabled=args[0]._fwd_used_autocast, dtype=args[0]._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd
