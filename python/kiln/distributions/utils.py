"""torch.distributions.utils: the argument helpers of kiln.distributions (protocol glue; the
distributions' computation is C++, kiln/distributions)."""
from functools import update_wrapper
from numbers import Number

import kiln

__all__ = ["broadcast_all", "logits_to_probs", "probs_to_logits", "clamp_probs", "lazy_property",
           "euler_constant"]

euler_constant = 0.57721566490153286060


def _is_tensor_like(v):
    return isinstance(v, kiln.Tensor) or hasattr(v, "__kiln_function__") or hasattr(v, "__torch_function__")


def broadcast_all(*values):
    """Numbers become tensors (the first tensor's dtype, else the default dtype); all broadcast."""
    if not all(_is_tensor_like(v) or isinstance(v, Number) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, kiln.Tensor or objects "
                         "implementing __kiln_function__.")
    if not all(_is_tensor_like(v) for v in values):
        options = dict(dtype=kiln.get_default_dtype())
        for v in values:
            if isinstance(v, kiln.Tensor):
                options = dict(dtype=v.dtype, device=v.device)
                break
        values = [v if _is_tensor_like(v) else kiln.tensor(v, **options) for v in values]
    return kiln.broadcast_tensors(*values)


def clamp_probs(probs):
    eps = kiln.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    if is_binary:
        return kiln.sigmoid(logits)
    return kiln.nn.functional.softmax(logits, dim=-1)


def probs_to_logits(probs, is_binary=False):
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return kiln.log(ps_clamped) - kiln.log1p(-ps_clamped)
    return kiln.log(ps_clamped)


class lazy_property:
    """A property computed on first access and then stored on the instance (torch's)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with kiln.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value
