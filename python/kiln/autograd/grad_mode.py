"""Grad-mode context managers and decorators: no_grad, enable_grad, set_grad_enabled, inference_mode."""
import functools

from .. import _C


class _DecoratorContextManager:
    """A context manager that also works as a decorator (a fresh instance per call)."""

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper

    def clone(self):
        return self.__class__()


class no_grad(_DecoratorContextManager):
    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(False)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)


class enable_grad(_DecoratorContextManager):
    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(True)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)


class set_grad_enabled(_DecoratorContextManager):
    """Sets grad mode immediately (as a function) and restores it when used as a context manager."""

    def __init__(self, mode):
        self.prev = _C.is_grad_enabled()
        self.mode = bool(mode)
        _C._set_grad_enabled(self.mode)

    def __call__(self, fn):
        _C._set_grad_enabled(self.prev)  # as a decorator: the mode applies inside fn only
        return super().__call__(fn)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)

    def clone(self):
        return self.__class__(self.mode)


class inference_mode(_DecoratorContextManager):
    def __init__(self, mode=True):
        self.mode = mode

    def __new__(cls, mode=True):
        if callable(mode):  # used as @inference_mode without parentheses
            return cls()(mode)
        return super().__new__(cls)

    def __enter__(self):
        self.prev_grad = _C.is_grad_enabled()
        if self.mode:
            _C._set_grad_enabled(False)
        self.prev = _C._set_inference_mode(self.mode)

    def __exit__(self, *exc):
        _C._set_inference_mode(self.prev)
        _C._set_grad_enabled(self.prev_grad)

    def clone(self):
        return self.__class__(self.mode)


class set_detect_anomaly:
    """Anomaly detection on/off; as a context manager it restores the previous setting."""

    def __init__(self, mode, check_nan=True):
        self.prev = _C.is_anomaly_enabled()
        _C._set_anomaly_enabled(bool(mode))

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _C._set_anomaly_enabled(self.prev)


class detect_anomaly(_DecoratorContextManager):
    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self.prev = _C.is_anomaly_enabled()
        _C._set_anomaly_enabled(True)

    def __exit__(self, *exc):
        _C._set_anomaly_enabled(self.prev)
