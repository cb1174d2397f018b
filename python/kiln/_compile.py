"""kiln.compile: torch.compile's drop-in, built on graph capture (kiln.Graph; issue 17).

There is no code generation (torch's Inductor): compiling means capturing the call once per distinct
input signature and replaying it after. The signature is every tensor argument's shape, dtype, device
and requires_grad (through lists, tuples and dicts), every other argument's value, the grad mode and,
for a module, its training flag; a module's state is checked at every call too (which tensors its
parameters and buffers are, their memory and requires_grad, every submodule's training flag), and a
change captures again. The capture is the first call (its outputs are returned, its side effects
happen once). A hit copies the arguments into the captured inputs, replays, copies back into any
argument the call changes in place, and returns copies of the outputs (a replay overwrites them; a
caller's earlier results must not change).

In grad mode a call is captured as a graphed callable (kiln.make_graphed_callables): forward and
backward are each a graph, and the result's backward replays the backward graph, so a training
step's forward and backward both replay (a function that calls backward and an optimiser itself is
captured whole, as kiln.graph would). A call made while the previous call's backward is still
pending (two forwards before one backward) runs eagerly, as replaying would overwrite what that
backward reads; so does a call while another thread replays the same signature.

A call that cannot be captured (a host read such as item() or a data-dependent branch, an op whose
output size depends on data, a tensor that requires grad read from outside the call with a history of
its own, an in-place change to an argument that requires grad, a module with hooks) runs eagerly and
says why once; what the failed capture changed in the default generator and the module's buffers is
put back first. With fullgraph=True it raises instead. Python state a call reads other than tensors
(an attribute, a global number) is frozen into the capture, as the values a capture records are.
Both modes ("default", "reduce-overhead") capture; dynamic shapes are recaptured per shape, up to
recompile_limit signatures (then eager, with one warning).
"""
import functools
import threading
import warnings

from . import _C
from ._tree import rebuild, tensors_in
from .nn._tracked import _module_state_epoch

_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _flatten(obj, out):
    return tensors_in(obj, out)


class _Entry:
    __slots__ = ("graph", "gc", "static_in", "out", "out_tensors", "state", "epoch", "guard", "written", "lock")


def _signature(obj):
    """The part of a call's signature an argument gives: a tensor's shape, dtype, device and
    requires_grad (not its identity), walked through lists, tuples and dicts; any other value
    itself (hash() raises TypeError for an unhashable one)."""
    if isinstance(obj, _C.Tensor):
        return ("T", tuple(obj.shape), str(obj.dtype), str(obj.device), obj.requires_grad)
    if isinstance(obj, (list, tuple)):
        return (type(obj), tuple(_signature(x) for x in obj))
    if isinstance(obj, dict):
        return (type(obj), tuple((k, _signature(v)) for k, v in obj.items()))
    hash(obj)
    return (type(obj), obj)


def _aliasing(flat):
    """Which tensor arguments are the same memory (None when none are): part of the signature, and
    kept in the captured copies (a call writing through one of them is seen through the other)."""
    if len(flat) < 2:
        return None
    ptrs = [t.data_ptr() if t.numel() else -1 - i for i, t in enumerate(flat)]
    if len(set(ptrs)) == len(ptrs):
        return None
    return tuple(ptrs.index(p) for p in ptrs)


class _Compiled:
    def __init__(self, fn, fullgraph, recompile_limit):
        self._fn = fn
        self._fullgraph = fullgraph
        self._limit = recompile_limit
        self._cache = {}
        self._eager_keys = set()
        self._said = set()
        self._is_module = isinstance(fn, _C_Module())
        functools.update_wrapper(self, fn if not self._is_module else type(fn).forward, updated=())

    def _say(self, why):
        if why not in self._said:
            self._said.add(why)
            warnings.warn(f"kiln.compile: running {getattr(self._fn, '__name__', type(self._fn).__name__)} "
                          f"eagerly: {why}", UserWarning, stacklevel=3)

    def _key(self, args, kwargs, flat):
        """The call's signature, and whether it is captured with its backward: whenever grad mode is
        on (a function may read parameters that require grad from its closure)."""
        from . import is_grad_enabled
        grad = is_grad_enabled()
        return (grad, getattr(self._fn, "training", None), _signature(args), _signature(kwargs),
                _aliasing(flat)), grad

    def _module_state(self):
        """What a replay of a module depends on besides the arguments: which tensors its parameters
        and buffers are and every submodule's training flag (their memory and requires_grad: the
        entry's guard). None: a module has hooks, which a replay would not run. Returns (state,
        tensors)."""
        if not self._is_module:
            return (), []
        parts, tensors = [], []
        for m in self._fn.modules():
            d = m.__dict__
            if d.get("_forward_hooks") or d.get("_forward_pre_hooks") or d.get("_backward_hooks") or \
                    d.get("_backward_pre_hooks"):
                return None, None
            parts.append((id(m), m.training))  # which module sits where, and its mode
            for t in list(d["_parameters"].values()) + list(d["_buffers"].values()):
                parts.append(None if t is None else id(t))
                if t is not None:
                    tensors.append(t)
        return tuple(parts), tensors

    def _fresh(self, entry):
        """Whether the entry still fits the module: the state is looked at again only when some
        module's parameters, buffers, submodules, hooks or modes changed (the state epoch); the
        tensors' memory and requires_grad every call (one C++ call)."""
        if not self._is_module:
            return True
        epoch = _module_state_epoch()
        if epoch != entry.epoch:
            state, _ = self._module_state()
            if state != entry.state:
                return False
            entry.epoch = epoch
        return entry.guard.check()

    def _eager(self, why, args, kwargs):
        self._say(why)
        return self._fn(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        kwargs = dict(sorted(kwargs.items()))  # one order for the key, the flattening and the call
        flat = _flatten((args, kwargs), [])
        try:
            key, needs_grad = self._key(args, kwargs, flat)
        except TypeError:
            return self._eager("an argument is not hashable, so calls cannot be told apart", args, kwargs)
        if key in self._eager_keys:
            return self._fn(*args, **kwargs)
        entry = self._cache.get(key)
        if entry is not None and not self._fresh(entry):  # a parameter, buffer or mode changed
            del self._cache[key]
            entry = None
        if entry is None:
            state, tensors = self._module_state()
            if state is None:
                return self._eager("the module has hooks, which a replay would not run", args, kwargs)
            if len(self._cache) >= self._limit:
                return self._eager(f"recompile_limit ({self._limit}) signatures were captured already", args,
                                   kwargs)
            return self._capture(key, state, tensors, args, kwargs, flat, needs_grad)
        if not entry.lock.acquire(blocking=False):  # another thread replays it now: its memory is busy
            return self._fn(*args, **kwargs)
        try:
            if entry.graph is None and entry.gc.backward_pending:
                return self._eager("the previous call's backward has not run yet (a replay would overwrite what "
                                   "it reads)", args, kwargs)
            try:
                outs = self._replay(entry, flat)
            except RuntimeError as e:
                if "given other memory" not in str(e) and "no longer has the memory" not in str(e):
                    raise
                # a tensor the call reads (a function's closure: no module guard) has new memory
                del self._cache[key]
                return self._capture(key, *self._module_state(), args, kwargs, flat, needs_grad)
            self._write_back(entry, flat)
            return rebuild(entry.out, iter([t.clone() for t in outs]))
        finally:
            entry.lock.release()

    @staticmethod
    def _replay(entry, flat):
        """The outputs of a replay on these arguments (the entry's static memory)."""
        if entry.graph is None:  # a graphed callable: it copies the arguments in and links autograd
            return entry.gc(flat)
        for dst, src in zip(entry.static_in, flat):
            dst.copy_(src)
        entry.graph.replay()
        return entry.out_tensors

    @staticmethod
    def _write_back(entry, flat):
        """Arguments the call changes in place get the replay's values, as eager changes them."""
        if entry.written:
            from . import no_grad
            with no_grad():
                for i in entry.written:
                    flat[i].copy_(entry.static_in[i])

    def _saved_state(self):
        """The default generator's state and the module's buffers: what a capture that fails part way
        through has changed, put back before the call runs eagerly."""
        from . import get_rng_state, no_grad
        buffers = list(self._fn.buffers()) if self._is_module else []
        with no_grad():
            return get_rng_state(), buffers, [b.clone() for b in buffers]

    def _restore(self, saved):
        from . import no_grad, set_rng_state
        rng, buffers, values = saved
        set_rng_state(rng)
        with no_grad():
            for b, v in zip(buffers, values):
                b.copy_(v)

    def _capture(self, key, state, tensors, args, kwargs, flat, with_backward):
        """Captures this call; the capture is the call (its outputs are returned, its side effects
        happen once). The capture is lenient: a host read or a data-dependent size does not stop
        the call, it only makes the recording unusable, so a call that cannot be captured has
        still run once, eagerly, and its result is returned (only where its outputs would hang off
        the capture's copies of arguments that require grad is it run again, from the state before
        it). In grad mode, a forward whose outputs require grad gets its backward captured too (a
        graphed callable); a call that runs backward() itself (a whole training step) is a plain
        graph, as kiln.graph records a step."""
        from . import no_grad
        alias = _aliasing(flat)
        with no_grad():
            static = []
            for i, t in enumerate(flat):
                if alias is not None and alias[i] != i and flat[alias[i]].shape == t.shape and \
                        flat[alias[i]].stride() == t.stride():
                    static.append(static[alias[i]])  # the same tensor twice: one captured copy
                else:
                    static.append(t.detach().clone().requires_grad_(t.requires_grad) if with_backward
                                  else t.detach().clone())
        versions = [t._version for t in static]
        saved = self._saved_state() if with_backward and any(t.requires_grad for t in flat) else None
        pool = _C.graph_pool_handle()
        g = _C.Graph()
        seq0, runs0 = _C._next_sequence_nr(), _C._engine_runs()
        s_args, s_kwargs = rebuild((args, kwargs), iter(static))
        g.capture_begin(pool, _lenient=not self._fullgraph)  # fullgraph: raise where the rule breaks
        try:
            out = self._fn(*s_args, **s_kwargs)
        except BaseException:
            try:
                g.capture_end()
            except RuntimeError:
                pass
            g.reset()
            raise  # the call itself raised, as it would eagerly (or a rule broke under fullgraph=True)
        failure = None
        try:
            g.capture_end()
        except RuntimeError as e:
            failure = str(e).splitlines()[0]
        written = [i for i, (t, v) in enumerate(zip(static, versions)) if t._version != v]
        if failure is None and with_backward and any(flat[i].requires_grad for i in written):
            failure = "it changes an argument that requires grad in place"
        out_flat = _flatten(out, [])
        own_step = _C._engine_runs() != runs0
        entry = _Entry()
        entry.state, entry.static_in, entry.written, entry.out = state, static, written, out
        entry.epoch, entry.guard = _module_state_epoch(), _C._TensorGuard(tensors)
        if failure is None and with_backward and not own_step and any(t.requires_grad for t in out_flat):
            try:
                entry.gc = _C._graphed_from_capture(g, static, out_flat, seq0, runs0, pool)
                entry.graph = None
            except (RuntimeError, TypeError) as e:
                failure = str(e).splitlines()[0]
        elif failure is None:
            entry.graph, entry.gc, entry.out_tensors = g, None, out_flat
        if failure is not None:
            if self._fullgraph:
                raise RuntimeError(f"kiln.compile(fullgraph=True): the call cannot be captured ({failure})")
            self._eager_keys.add(key)
            self._say(f"the call cannot be captured ({failure})")
            if saved is not None and not own_step:
                # the outputs hang off the copies of arguments that require grad: run it again from
                # the state before the capture
                self._restore(saved)
                return self._fn(*args, **kwargs)
            self._write_back(entry, flat)
            return out  # the call ran once, on arguments equal to the caller's
        entry.lock = threading.Lock()
        self._cache[key] = entry
        outs = entry.gc._first_call(flat) if entry.graph is None else out_flat
        self._write_back(entry, flat)
        return rebuild(out, iter([t.clone() for t in outs]))

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
