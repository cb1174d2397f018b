"""kiln.nn.utils: gradient clipping and parameter/vector conversion (the C++ kiln::nn::utils)."""
from ... import _C
from ..._C import Tensor

_u = _C._nn.utils


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales gradients in place so their total norm is at most max_norm; returns the total norm."""
    ps = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return _u.clip_grad_norm_(ps, float(max_norm), float(norm_type), error_if_nonfinite)


def clip_grad_value_(parameters, clip_value, foreach=None):
    ps = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    _u.clip_grad_value_(ps, float(clip_value))


def parameters_to_vector(parameters):
    return _u.parameters_to_vector(list(parameters))


def vector_to_parameters(vec, parameters):
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    _u.vector_to_parameters(vec, list(parameters))
from . import rnn  # noqa: E402,F401
from . import parametrize  # noqa: E402,F401
from . import parametrizations  # noqa: E402,F401
