"""kiln.graph: capture a sequence of ops once, replay it without dispatch (torch.cuda.graph's API on
the CPU; issue 17). kiln.Graph is C++ (kiln/dispatch/graph.h); this is the context manager.

    g = kiln.Graph()
    static_in = kiln.zeros(1, 256)
    with kiln.graph(g):
        static_out = model(static_in)
    static_in.copy_(x); g.replay(); static_out  # the result for x

No warm-up is needed (kiln's first calls allocate nothing a replay depends on). Rules (RuntimeError
during capture): no item()/tolist()/data-dependent branch, no op whose output size depends on data.
"""
from . import _C

Graph = _C.Graph
graph_pool_handle = _C.graph_pool_handle


class graph:
    """Captures the ops run in the block into `kiln_graph`. `pool` (from graph_pool_handle() or
    another graph's pool()) makes graphs share their intermediates' arena: replay them one at a time.
    `stream` makes a stream current during the capture (kernels run on the caller while capturing)."""

    def __init__(self, kiln_graph, pool=None, stream=None, capture_error_mode="global"):
        if pool is not None and not isinstance(pool, _C._GraphPool):
            raise TypeError(f"graph(pool=...): expected kiln.graph_pool_handle() or Graph.pool(), got "
                            f"{type(pool).__name__}")
        self.pool = pool
        if capture_error_mode not in ("global", "thread_local", "relaxed"):
            raise ValueError(f"capture_error_mode must be 'global', 'thread_local' or 'relaxed', got "
                             f"{capture_error_mode!r}")
        self.graph = kiln_graph
        self.stream = stream

    def __enter__(self):
        self._ctx = None
        if self.stream is not None:
            from ._stream import stream as _stream_ctx
            self._ctx = _stream_ctx(self.stream)
            self._ctx.__enter__()
        self.graph.capture_begin(self.pool)

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.graph.capture_end()
            else:
                try:
                    self.graph.capture_end()
                except RuntimeError:
                    pass
                self.graph.reset()
        finally:
            if self._ctx is not None:
                self._ctx.__exit__(None, None, None)
        return False


def make_graphed_callables(callables, sample_args, num_warmup_iters=3, allow_unused_input=False, pool=None):
    """torch.cuda.make_graphed_callables on the CPU: each callable's forward and backward are
    captured as graphs (kiln/autograd/graphed.h) and the result replays them behind one autograd
    node. `callables` is a function or module, or a tuple of them with a tuple of sample-argument
    tuples; a module comes back with its forward replaced (used while its training flag is what it
    was at capture), a function as a new function. Call it with arguments of the samples' shapes and
    dtypes, in the same order and nesting; its outputs are overwritten by the next call, and each
    call's backward must run before the next forward (else it raises). The backward differentiates
    the arguments that require grad and every parameter the forward read (found in its autograd
    graph, so a tensor a function closes over gets its gradient too)."""
    from .nn import Module
    from ._tree import rebuild, tensors_in
    if _C._is_autocast_enabled("cpu") and _C.is_autocast_cache_enabled():
        raise RuntimeError("make_graphed_callables does not support the autocast caching. Please set "
                           "`cache_enabled=False`.")
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables, sample_args = (callables,), (sample_args,)
    if not isinstance(sample_args, tuple) or len(sample_args) != len(callables):
        raise ValueError(f"make_graphed_callables: expected a tuple of {len(callables)} sample-argument tuples, "
                         f"got {type(sample_args).__name__}")
    if pool is not None and not isinstance(pool, _C._GraphPool):
        raise TypeError(f"make_graphed_callables(pool=...): expected kiln.graph_pool_handle(), got "
                        f"{type(pool).__name__}")
    flat_samples, fns, out_specs = [], [], []
    for c, args in zip(callables, sample_args):
        if not callable(c):
            raise TypeError(f"make_graphed_callables: {type(c).__name__} is not callable")
        if isinstance(c, Module):
            if c._backward_hooks or c._forward_hooks or c._forward_pre_hooks:
                raise AssertionError("Modules must not have hooks registered at the time they are passed. However, "
                                     "registering hooks on modules after passing them through "
                                     "make_graphed_callables is allowed.")
            if not all(b.requires_grad is False for b in c.buffers()):
                raise AssertionError("In any :class:`~torch.nn.Module` passed to :func:`~make_graphed_callables`, "
                                     "only parameters may be trainable. All buffers must have "
                                     "``requires_grad=False``.")
        if not isinstance(args, tuple):
            args = (args,)
        flat = tensors_in(args)
        if len(flat) != _count_leaves(args):
            raise AssertionError("In the beta API, sample_args for each callable must contain only Tensors. Other "
                                 "types are not allowed.")
        flat_samples.append(flat)
        spec = [None]

        def fn(tensors, c=c, args=args, spec=spec):
            out = c(*rebuild(args, iter(tensors)))
            spec[0] = out
            return tensors_in(out)
        fns.append(fn)
        out_specs.append(spec)
    made = _C._make_graphed_callables(fns, flat_samples, int(num_warmup_iters), bool(allow_unused_input), pool)
    result = []
    for c, gc, spec in zip(callables, made, out_specs):
        graphed = _graphed_function(gc, spec[0], c)
        if isinstance(c, Module):
            orig_fwd, training = c.forward, c.training
            params = tuple(c.parameters())

            def new_fwd(*user_args, _c=c, _g=graphed, _orig=orig_fwd, _training=training, _params=params,
                        **user_kwargs):
                if _c.training == _training:
                    now = tuple(_c.parameters())
                    if len(now) != len(_params) or any(a is not b for a, b in zip(now, _params)):
                        raise RuntimeError("graphed callable: a parameter of the module was added, removed or "
                                           "replaced since make_graphed_callables captured it (the graphs read "
                                           "the old one): make the graphed callable again")
                    return _g(*user_args, **user_kwargs)
                return _orig(*user_args, **user_kwargs)
            new_fwd._graphed_callable = gc
            c.forward = new_fwd
            result.append(c)
        else:
            result.append(graphed)
    return result[0] if just_one else tuple(result)


def _count_leaves(obj):
    if isinstance(obj, (list, tuple)):
        return sum(_count_leaves(x) for x in obj)
    if isinstance(obj, dict):
        return sum(_count_leaves(x) for x in obj.values())
    return 1


def _graphed_function(gc, out_spec, c):
    from ._tree import rebuild, tensors_in

    def graphed(*user_args, **user_kwargs):
        if user_kwargs:
            raise TypeError(f"a graphed callable takes its arguments as positional tensors, as its sample_args; "
                            f"got keyword arguments {sorted(user_kwargs)}")
        return rebuild(out_spec, iter(gc(tensors_in(user_args))))
    graphed.__name__ = getattr(c, "__name__", type(c).__name__)
    graphed.__doc__ = getattr(c, "__doc__", None)
    graphed._graphed_callable = gc
    return graphed
