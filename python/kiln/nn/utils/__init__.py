"""kiln.nn.utils: gradient clipping and parameter/vector conversion."""
import math

from ... import _C
from ..._C import Tensor
from ...linalg import vector_norm as _vector_norm


def _params(parameters):
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales gradients in place so their total norm is at most max_norm; returns the total norm."""
    grads = [p.grad for p in _params(parameters) if p.grad is not None]
    norm_type = float(norm_type)
    if not grads:
        return _C.tensor(0.0)
    with _no_grad():
        if math.isinf(norm_type):
            norms = [g.detach().abs().max() for g in grads]
            total = norms[0] if len(norms) == 1 else _C.stack(norms).max()
        else:
            norms = [_vector_norm(g.detach(), norm_type) for g in grads]
            total = _vector_norm(_C.stack(norms), norm_type)
        if error_if_nonfinite and (bool(total.isnan()) or bool(total.isinf())):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is "
                               "non-finite, so it cannot be clipped. To disable this error and scale the "
                               "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
        coef = _C.clamp(_C.true_divide(_C.tensor(float(max_norm), dtype=total.dtype), total + 1e-6), None, 1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype))
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    clip_value = float(clip_value)
    with _no_grad():
        for p in _params(parameters):
            if p.grad is not None:
                p.grad.clamp_(-clip_value, clip_value)


def parameters_to_vector(parameters):
    return _C.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    offset = 0
    with _no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[offset:offset + n].view_as(p) if hasattr(vec, "view_as") else vec[offset:offset + n].reshape(p.shape))
            offset += n


class _no_grad:
    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(False)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)
