"""kiln.compile: torch.compile's drop-in, built on graph capture (kiln.Graph; issue 17).

There is no code generation (torch's Inductor): compiling means capturing the call once per distinct
input signature and replaying it after. The signature is every tensor argument's shape, dtype, device
and requires_grad, every other argument's value, the grad mode and, for a module, its training flag.
A hit copies the arguments into the captured inputs, replays, and returns copies of the outputs (a
replay overwrites them; a caller's earlier results must not change).

A call that needs autograd through its result (grad mode on and an argument or parameter that
requires grad) is captured as a graphed callable (kiln.make_graphed_callables): forward and backward
are each a graph, and the result's backward replays the backward graph, so a training step's forward
and backward both replay. Capturing runs the call once more than eager would; the default generator's
state and a module's buffers are put back afterwards, so the numbers drawn and the running statistics
are those of eager. A call made while the previous call's backward is still pending (two forwards
before one backward) runs eagerly, as replaying would overwrite what that backward reads.

A call that cannot be captured (a host read such as item() or a data-dependent branch, an op whose
output size depends on data, a tensor that requires grad read from outside the call with a history of
its own) runs eagerly and says why once; with fullgraph=True it raises instead. Both modes
("default", "reduce-overhead") capture; dynamic shapes are recaptured per shape, up to
recompile_limit signatures (then eager, with one warning).
"""
import functools
import warnings

from . import _C
from ._tree import tensors_in
from .graphs import graph as _graph

_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _flatten(obj, out):
    return tensors_in(obj, out)


def _rebuild(obj, it):
    if isinstance(obj, _C.Tensor):
        return next(it)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_rebuild(x, it) for x in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_rebuild(x, it) for x in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _rebuild(v, it)) for k, v in obj.items())
    return obj


class _Entry:
    __slots__ = ("graph", "gc", "static_in", "out", "out_tensors")


class _Compiled:
    def __init__(self, fn, fullgraph, recompile_limit):
        self._fn = fn
        self._fullgraph = fullgraph
        self._limit = recompile_limit
        self._cache = {}
        self._eager_keys = set()
        self._said = set()
        functools.update_wrapper(self, fn if not isinstance(fn, _C_Module()) else type(fn).forward,
                                 updated=())

    def _say(self, why):
        if why not in self._said:
            self._said.add(why)
            warnings.warn(f"kiln.compile: running {getattr(self._fn, '__name__', type(self._fn).__name__)} "
                          f"eagerly: {why}", UserWarning, stacklevel=3)

    def _key(self, args, kwargs):
        """The call's signature, and whether it is captured with its backward: whenever grad mode is
        on (a function may read parameters that require grad from its closure)."""
        from . import is_grad_enabled
        grad = is_grad_enabled()
        parts = [grad, getattr(self._fn, "training", None)]
        for a in list(args) + [kwargs[k] for k in sorted(kwargs)]:
            if isinstance(a, _C.Tensor):
                parts.append(("T", tuple(a.shape), str(a.dtype), str(a.device), a.requires_grad))
            else:
                hash(a)  # TypeError for an unhashable argument: the caller runs eagerly
                parts.append((type(a), a))
        parts.append(tuple(sorted(kwargs)))
        return tuple(parts), grad

    def __call__(self, *args, **kwargs):
        try:
            key, needs_grad = self._key(args, kwargs)
        except TypeError:
            self._say("an argument is not hashable, so calls cannot be told apart")
            return self._fn(*args, **kwargs)
        if key in self._eager_keys:
            return self._fn(*args, **kwargs)
        entry = self._cache.get(key)
        if entry is None:
            if len(self._cache) >= self._limit:
                self._say(f"recompile_limit ({self._limit}) signatures were captured already")
                return self._fn(*args, **kwargs)
            return self._capture_graphed(key, args, kwargs) if needs_grad else self._capture(key, args, kwargs)
        if entry.graph is None:  # a graphed callable (forward and backward)
            return self._call_graphed(key, entry, args, kwargs)
        for dst, src in zip(entry.static_in, _flatten((args, kwargs), [])):
            dst.copy_(src)
        entry.graph.replay()
        return _rebuild(entry.out, iter([t.clone() for t in entry.out_tensors]))

    def _call_graphed(self, key, entry, args, kwargs):
        if entry.gc.backward_pending:
            self._say("the previous call's backward has not run yet (a replay would overwrite what it reads)")
            return self._fn(*args, **kwargs)
        try:
            outs = entry.gc(_flatten((args, kwargs), []))
        except RuntimeError as e:
            if "no longer has the memory" not in str(e):
                raise
            del self._cache[key]  # a parameter was replaced: capture again
            return self._capture_graphed(key, args, kwargs)
        return _rebuild(entry.out, iter([t.clone() for t in outs]))

    def _capture_graphed(self, key, args, kwargs):
        from . import get_rng_state, no_grad, set_rng_state
        flat = _flatten((args, kwargs), [])
        with no_grad():
            samples = [t.detach().clone().requires_grad_(t.requires_grad) for t in flat]
        structure = (args, kwargs)
        spec = [None]

        def fn(tensors):
            a, k = _rebuild(structure, iter(tensors))
            out = self._fn(*a, **k)
            spec[0] = out
            return _flatten(out, [])
        rng = get_rng_state()
        buffers = list(self._fn.buffers()) if isinstance(self._fn, _C_Module()) else []
        with no_grad():
            saved = [b.clone() for b in buffers]
        try:
            gc = _C._make_graphed_callables([fn], [samples], 0, True, None)[0]
        except (RuntimeError, TypeError) as e:
            if self._fullgraph:
                raise
            self._eager_keys.add(key)
            self._say(f"the call cannot be captured ({str(e).splitlines()[0]})")
            return self._fn(*args, **kwargs)
        finally:  # the capture ran the call: eager's numbers and statistics come next
            set_rng_state(rng)
            with no_grad():
                for b, v in zip(buffers, saved):
                    b.copy_(v)
        entry = _Entry()
        entry.graph, entry.gc, entry.out = None, gc, spec[0]
        self._cache[key] = entry
        return self._call_graphed(key, entry, args, kwargs)

    def _capture(self, key, args, kwargs):
        from . import no_grad
        with no_grad():
            static = _rebuild((args, kwargs), iter([t.detach().clone() for t in _flatten((args, kwargs), [])]))
        s_args, s_kwargs = static
        g = _C.Graph()
        try:
            with _graph(g):
                out = self._fn(*s_args, **s_kwargs)
        except RuntimeError as e:
            if self._fullgraph:
                raise
            self._eager_keys.add(key)
            self._say(f"the call cannot be captured ({str(e).splitlines()[0]})")
            return self._fn(*args, **kwargs)
        entry = _Entry()
        entry.graph, entry.static_in, entry.out = g, _flatten(static, []), out
        entry.out_tensors = _flatten(out, [])
        self._cache[key] = entry
        return _rebuild(out, iter([t.clone() for t in entry.out_tensors]))

    def __getattr__(self, name):  # a compiled module still answers as the module
        return getattr(self.__dict__["_fn"], name)

    @property
    def _orig_mod(self):
        return self._fn


def _C_Module():
    from .nn import Module
    return Module


def compile(model=None, *, fullgraph=False, dynamic=None, backend=None, mode=None, options=None, disable=False,
            recompile_limit=None, **_ignored):
    """Captures `model` (a function or a kiln.nn.Module) per input signature and replays it; see the
    module's docstring. `backend` and `options` are accepted for torch's signature; kiln has one
    compiler, the graph capture."""
    if mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: default, reduce-overhead, max-autotune, "
                           "max-autotune-no-cudagraphs")
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                 options=options, disable=disable, recompile_limit=recompile_limit)
    if not callable(model):
        raise RuntimeError("kiln.compile expects a callable (a function or a kiln.nn.Module)")
    if disable:
        return model
    return _Compiled(model, fullgraph, 8 if recompile_limit is None else int(recompile_limit))
