"""kiln: a small, fast deep-learning framework with torch-shaped names."""
from . import _C
from ._C import *  # noqa: F401,F403
from ._C import Tensor, dtype  # noqa: F401

from . import nn  # noqa: E402,F401
from . import linalg  # noqa: E402,F401

__version__ = "0.1.0"

# torch aliases
absolute = _C.abs
arccos, arcsin, arctan, arctan2 = _C.acos, _C.asin, _C.atan, _C.atan2
arccosh, arcsinh, arctanh = _C.acosh, _C.asinh, _C.atanh
negative = _C.neg
multiply = _C.mul
divide = _C.div
subtract = _C.sub
greater, greater_equal, less, less_equal = _C.gt, _C.ge, _C.lt, _C.le
not_equal = _C.ne
fix = _C.trunc
clip = _C.clamp
for _n, _t in [("absolute", "abs"), ("arccos", "acos"), ("arcsin", "asin"), ("arctan", "atan"),
               ("negative", "neg"), ("multiply", "mul"), ("divide", "div"), ("subtract", "sub"),
               ("greater", "gt"), ("greater_equal", "ge"), ("less", "lt"), ("less_equal", "le"),
               ("not_equal", "ne"), ("fix", "trunc")]:
    setattr(Tensor, _n, getattr(Tensor, _t))
del _n, _t


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(t):
    return t.numel()


def swapaxes(t, a, b):
    return _C.transpose(t, a, b)


Tensor.__module__ = "kiln"
