"""kiln.utils.checkpoint: activation checkpointing (torch.utils.checkpoint). A checkpointed function
keeps none of its intermediate tensors; backward recomputes them, with the random-number state and
autocast state forward had. use_reentrant=False (recommended) records forward's graph as usual with
saved-tensor hooks that keep only a slot per saved tensor, and fills the slots by re-running the
function the first time backward needs one; use_reentrant=True wraps the function in an autograd
Function that reruns it in its backward."""
import contextlib
import warnings

from .. import _C
from ..autograd import Function
from ..autograd.graph import saved_tensors_hooks

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "noop_context_fn"]


class CheckpointError(RuntimeError):
    pass


def noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


def _tensor():
    from .. import Tensor
    return Tensor


def _autocast_state():
    return _C._is_autocast_enabled("cpu"), _C._get_autocast_dtype("cpu"), _C.is_autocast_cache_enabled()


@contextlib.contextmanager
def _replay(rng_state, autocast_state):
    """The forward's random-number and autocast state, for the recomputation only."""
    from .. import autocast, get_rng_state, set_rng_state
    now = get_rng_state() if rng_state is not None else None
    if rng_state is not None:
        set_rng_state(rng_state)
    on, dtype, cache = autocast_state
    try:
        with autocast("cpu", dtype=dtype, enabled=on, cache_enabled=cache):
            yield
    finally:
        if now is not None:
            set_rng_state(now)


class _CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        from .. import get_rng_state
        ctx.run_function = run_function
        ctx.rng_state = get_rng_state() if preserve_rng_state else None
        ctx.autocast_state = _autocast_state()
        T = _tensor()
        ctx.inputs, ctx.tensor_indices, tensors = [], [], []
        for i, a in enumerate(args):
            if isinstance(a, T):
                tensors.append(a)
                ctx.tensor_indices.append(i)
                ctx.inputs.append(None)
            else:
                ctx.inputs.append(a)
        ctx.save_for_backward(*tensors)
        from .. import no_grad
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        from .. import autograd, enable_grad
        T = _tensor()
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            d = t.detach()
            d.requires_grad_(t.requires_grad)
            inputs[i] = d
        with _replay(ctx.rng_state, ctx.autocast_state), enable_grad():
            outputs = ctx.run_function(*inputs)
        if isinstance(outputs, T):
            outputs = (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads) if isinstance(o, T) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(inp.grad if isinstance(inp, T) else None for inp in inputs)


class _Frame:
    """One non-reentrant checkpoint: the slots of forward's saved tensors and how to refill them."""

    def __init__(self, fn, args, kwargs, rng_state, autocast_state, context_fn, determinism_check):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.rng_state, self.autocast_state = rng_state, autocast_state
        self.context_fn, self.determinism_check = context_fn, determinism_check
        self.meta = []          # (shape, dtype) of each tensor forward saved, for the determinism check
        self.recomputed = None  # slot -> tensor, filled by the first unpack

    def pack(self, t):
        self.meta.append((tuple(t.shape), t.dtype))
        return len(self.meta) - 1

    def unpack(self, slot):
        if self.recomputed is None:
            self._recompute()
        return self.recomputed[slot]

    def _recompute(self):
        from .. import enable_grad
        got = []

        def keep(t):
            got.append(t.detach())
            return len(got) - 1
        _, recompute_ctx = self.context_fn()
        with _replay(self.rng_state, self.autocast_state), enable_grad(), recompute_ctx, \
                saved_tensors_hooks(keep, lambda i: got[i]):
            self.fn(*self.args, **self.kwargs)
        if self.determinism_check == "default":
            meta = [(tuple(t.shape), t.dtype) for t in got]
            if meta[:len(self.meta)] != self.meta:
                raise CheckpointError(
                    "torch.utils.checkpoint: Recomputed values for the following tensors have different metadata "
                    f"than during the forward pass: forward saved {self.meta}, recomputation saved {meta}")
        if len(got) < len(self.meta):
            raise CheckpointError(
                "torch.utils.checkpoint: A different number of tensors was saved during the original forward "
                f"and recomputation.\nNumber of tensors saved during forward: {len(self.meta)}\n"
                f"Number of tensors saved during recomputation: {len(got)}")
        self.recomputed = got


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn, determinism_check="default",
               debug=False, preserve_rng_state=True, early_stop=True, **kwargs):
    """torch.utils.checkpoint.checkpoint: function(*args, **kwargs) without keeping its activations."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting in PyTorch "
            "2.9, calling checkpoint without use_reentrant will raise an exception. use_reentrant=False is "
            "recommended, but if you need to preserve the current default behavior, you can pass "
            "use_reentrant=True. Refer to docs for more details on the differences between the two variants.")
        use_reentrant = True
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got {determinism_check}")
    if use_reentrant:
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
        return _CheckpointFunction.apply(function, preserve_rng_state, *args)
    from .. import get_rng_state
    frame = _Frame(function, args, kwargs, get_rng_state() if preserve_rng_state else None, _autocast_state(),
                   context_fn, determinism_check)
    forward_ctx, _ = context_fn()
    with saved_tensors_hooks(frame.pack, frame.unpack), forward_ctx:
        return function(*args, **kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Runs a Sequential (or a list of modules) in `segments` checkpointed chunks; the last runs as is."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be passed "
            "explicitly. In version 2.9 we will raise an exception if use_reentrant is not passed. "
            "use_reentrant=False is recommended, but if you need to preserve the current default behavior, "
            "you can pass use_reentrant=True. Refer to docs for more details on the differences between the "
            "two variants.")
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    from ..nn import Sequential
    if isinstance(functions, Sequential):
        functions = list(functions.children())

    def run(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
