"""kiln.autograd.Function: custom differentiable operations with Python forward/backward."""
from .. import _C
from .._C import Tensor
from .grad_mode import no_grad


class FunctionCtx:
    """The `ctx` passed to forward and backward."""

    def __init__(self):
        self._to_save = ()
        self._saved = None
        self._non_differentiable = ()
        self._dirty = ()
        self.needs_input_grad = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward can only save variables, but argument "
                                f"{tensors.index(t)} is of type {type(t).__name__}")
        self._to_save = tensors

    @property
    def saved_tensors(self):
        if self._saved is None:
            return tuple(self._to_save)  # inside forward, or when no graph was recorded
        return tuple(self._saved)

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable = tensors

    def mark_dirty(self, *tensors):
        self._dirty = tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class Function:
    """Subclass with static forward(ctx, *args) and backward(ctx, *grad_outputs); call .apply()."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        tensor_pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        inputs = [args[i] for i in tensor_pos]
        record = _C.is_grad_enabled() and any(t.requires_grad for t in inputs)
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        with no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        if not record:
            return out
        single = not isinstance(out, tuple)
        outs = [out] if single else list(out)
        nargs, name = len(args), cls.__name__
        is_tensor_arg = [isinstance(a, Tensor) for a in args]

        # keeps no tensor (inputs, outputs) alive: the node holds this callback, the outputs the node
        def backward_cb(saved, grads):
            ctx._saved = saved
            try:
                res = cls.backward(ctx, *grads)
            finally:
                ctx._saved = None
            if not isinstance(res, tuple):
                res = (res,)
            if len(res) > nargs and all(r is None for r in res[nargs:]):
                res = res[:nargs]
            if len(res) != nargs:
                raise RuntimeError(f"function {name}Backward returned an incorrect number of "
                                   f"gradients (expected {nargs}, got {len(res)})")
            for i, r in enumerate(res):
                if r is not None and not is_tensor_arg[i]:
                    raise RuntimeError(f"function {name}Backward returned a gradient different "
                                       f"than None at position {i + 1}, but the corresponding forward "
                                       "input was not a Variable")
            return [res[i] for i in tensor_pos]

        result = _C._function_record(name + "Backward", inputs, outs, list(ctx._to_save),
                                     list(ctx._non_differentiable), list(ctx._dirty),
                                     ctx.materialize_grads, backward_cb)
        ctx._to_save, ctx._non_differentiable, ctx._dirty = (), (), ()
        return result[0] if single else tuple(result)


def once_differentiable(fn):
    return fn
