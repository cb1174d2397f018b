"""kiln.autograd: reverse-mode automatic differentiation (the engine is C++; see kiln/autograd)."""
from .. import _C
from .._C import is_grad_enabled, is_inference_mode_enabled  # noqa: F401
from .._C import Tensor
from .function import Function, FunctionCtx, once_differentiable  # noqa: F401
from .grad_mode import (no_grad, enable_grad, set_grad_enabled, inference_mode,  # noqa: F401
                        set_detect_anomaly, detect_anomaly)
from .gradcheck import gradcheck, gradgradcheck, GradcheckError  # noqa: F401
from . import graph  # noqa: F401


def _tensors(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        return [x]
    return list(x)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates gradients of `tensors` into the leaves' .grad (torch.autograd.backward)."""
    tensors = _tensors(tensors)
    grads = _tensors(grad_tensors)
    if inputs is not None:
        inputs = _tensors(inputs)
        if len(inputs) == 0:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    _C._backward(tensors, grads, retain_graph, create_graph, inputs)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of `outputs` with respect to `inputs`, returned as a tuple (torch.autograd.grad)."""
    single = isinstance(inputs, Tensor)
    outs = _tensors(outputs)
    ins = _tensors(inputs)
    gos = _tensors(grad_outputs)
    if allow_unused is None:
        allow_unused = materialize_grads
    res = _C._grad(outs, ins, gos, retain_graph, create_graph, allow_unused)
    if materialize_grads:
        res = tuple(r if r is not None else _C.zeros_like(i) for r, i in zip(res, ins))
    return res


class _RemovableHandle:
    def __init__(self, tensor, hook_id):
        self._tensor, self.id = tensor, hook_id

    def remove(self):
        if self._tensor is not None:
            self._tensor._remove_hook(self.id)
            self._tensor = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _tensor_backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    backward(self, gradient, retain_graph, create_graph, inputs)


def _register_hook(self, hook):
    return _RemovableHandle(self, self._register_hook(hook))


def _register_post_accumulate_grad_hook(self, hook):
    return _RemovableHandle(self, self._register_post_accumulate_grad_hook(hook))


Tensor.backward = _tensor_backward
Tensor.register_hook = _register_hook
Tensor.register_post_accumulate_grad_hook = _register_post_accumulate_grad_hook

from . import functional  # noqa: E402,F401  (last: it uses grad)
