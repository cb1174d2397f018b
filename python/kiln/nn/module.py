"""nn.Module: the Python base class of every kiln model (torch.nn.Module's behaviour).

Parameters, buffers and submodules live in ordered dicts; layers implemented in C++ (kiln._C.nn) are
wrapped by _CppModule, which shares their parameter tensors, so optimisers, load_state_dict and
.to(dtype) act on the very tensors the C++ forward uses."""
from collections import OrderedDict, namedtuple
import functools
import inspect
import itertools

from .. import _C
from .._C import Tensor
from .parameter import Parameter, Buffer
from ._tracked import _TrackedDict, _state_epoch
from ..autograd.grad_mode import no_grad as _C_no_grad
from ..autograd.function import Function

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class _IncompatibleKeys(_IncompatibleKeys):  # noqa: F811
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class RemovableHandle:
    _ids = itertools.count()

    def __init__(self, hooks_dict):
        self.hooks_dict = hooks_dict
        self.id = next(RemovableHandle._ids)

    def remove(self):
        self.hooks_dict.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


def _honour_device(init):
    """Wraps a kiln layer's __init__(..., device=None, ...): its parameters and buffers are made, then
    moved to `device` (on "meta" they keep their shapes and dtypes and hold no data)."""
    sig = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        device = kwargs.get("device")
        if device is None and args:
            device = sig.bind_partial(self, *args, **kwargs).arguments.get("device")
        if device is not None and _C.device(device).type != "cpu":
            self.to(device)
    return __init__


class Module:
    """Base class for all neural network modules; subclass it and define forward()."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None and cls.__module__.startswith("kiln.nn") and \
                "device" in inspect.signature(init).parameters:
            cls.__init__ = _honour_device(init)

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() takes no arguments")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = _TrackedDict()
        d["_buffers"] = _TrackedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = _TrackedDict()
        d["_forward_pre_hooks"] = _TrackedDict()
        d["_forward_hooks"] = _TrackedDict()
        d["_forward_hooks_with_kwargs"] = set()
        d["_forward_pre_hooks_with_kwargs"] = set()
        d["_backward_hooks"] = _TrackedDict()
        d["_backward_pre_hooks"] = _TrackedDict()

    def __setstate__(self, state):
        # (a module pickled before its dicts were _TrackedDicts gets them now)
        self.__dict__.update(state)
        for k in ("_parameters", "_buffers", "_modules", "_forward_pre_hooks", "_forward_hooks",
                  "_backward_hooks", "_backward_pre_hooks"):
            v = self.__dict__.get(k)
            if v is not None and type(v) is not _TrackedDict:
                self.__dict__[k] = _TrackedDict(v)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        bw = (self.__dict__.get("_backward_hooks") or self.__dict__.get("_backward_pre_hooks")) and \
            _C.is_grad_enabled()
        if not self._forward_pre_hooks and not self._forward_hooks and not bw:
            return self.forward(*args, **kwargs)
        if bw:
            return self._call_with_backward_hooks(args, kwargs)
        return self._call_hooked(args, kwargs)

    def _call_with_backward_hooks(self, args, kwargs):
        state = _BackwardHookState(self, len(args))
        args = state.wrap_inputs(args)
        return state.wrap_outputs(self._call_hooked(args, kwargs))

    def _call_hooked(self, args, kwargs):
        for hid, hook in list(self._forward_pre_hooks.items()):
            if hid in self._forward_pre_hooks_with_kwargs:
                r = hook(self, args, kwargs)
                if r is not None:
                    args, kwargs = r
            else:
                r = hook(self, args)
                if r is not None:
                    args = r if isinstance(r, tuple) else (r,)
        out = self.forward(*args, **kwargs)
        for hid, hook in list(self._forward_hooks.items()):
            r = hook(self, args, kwargs, out) if hid in self._forward_hooks_with_kwargs else hook(self, args, out)
            if r is not None:
                out = r
        return out

    # ---- registration ---------------------------------------------------------------------------
    def _check_name(self, name, kind):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f"{kind} name can't contain \".\"")
        if name == "":
            raise KeyError(f"{kind} name can't be empty string \"\"")

    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if name == "training":
            _state_epoch[0] += 1

        def remove_from(*dicts):
            for dd in dicts:
                if name in dd:
                    del dd[name]

        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(d, self._buffers, self._modules)
            self._non_persistent_buffers_set.discard(name)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            modules = d.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                remove_from(d, self._parameters, self._buffers)
                self._non_persistent_buffers_set.discard(name)
                modules[name] = value
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                    "(torch.nn.Module or None expected)")
                modules[name] = value
            else:
                buffers = d.get("_buffers")
                if isinstance(value, Buffer) or (buffers is not None and name in buffers):
                    if value is not None and not isinstance(value, Tensor):
                        raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                        "(torch.Tensor or None expected)")
                    persistent = getattr(value, "persistent", name not in self._non_persistent_buffers_set)
                    if isinstance(value, Buffer):
                        value = Tensor(value)
                    self.register_buffer(name, value, persistent)
                else:
                    object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            dd = d.get(key)
            if dd is not None and name in dd:
                return dd[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for key in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(key, {}):
                del self.__dict__[key][name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(self._parameters) | set(self._buffers) | set(self._modules))

    # ---- iteration ------------------------------------------------------------------------------
    def _named_members(self, get, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mprefix, mod in mods:
            for k, v in get(mod):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (mprefix + ("." if mprefix else "") + k, v)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self):
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if id(self) in memo and remove_duplicate:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def get_submodule(self, target):
        mod = self
        if target == "":
            return mod
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter `{name}`")
        return mod._parameters[name]

    # ---- modes and conversion --------------------------------------------------------------------
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    g = p.grad.detach()
                    g.zero_()
                    p.grad = g

    def _apply(self, fn):
        for m in self.children():
            m._apply(fn)
        with _C_no_grad():
            for key, p in self._parameters.items():
                if p is None:
                    continue
                new = fn(p.detach())
                if new is not p:
                    p.data = new  # in place: the tensor keeps its identity (and its C++ twin sees it)
                if p.grad is not None:
                    g = fn(p.grad)
                    p.grad = None
                    p.grad = g
            for key, b in self._buffers.items():
                if b is not None:
                    new = fn(b)
                    if new is not b:
                        b.data = new
        return self

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs):
        """to(device=None, dtype=None, non_blocking=False), to(dtype), to(tensor): as torch."""
        dtype, device = kwargs.get("dtype"), kwargs.get("device")
        memory_format = kwargs.get("memory_format")
        for a in args:
            if isinstance(a, _C.dtype):
                dtype = a
            elif isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, (str, _C.device)) or (isinstance(a, int) and not isinstance(a, bool)):
                device = a
        if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired "
                            f"dtype={dtype}")
        if device is not None:
            device = _C.device(device)

        def convert(t):
            if dtype is not None and (t.is_floating_point() or t.is_complex()) and t.dtype != dtype:
                t = t.to(dtype)
            if device is not None and t.device.type != device.type:
                t = t.to(device)
            if memory_format is not None and t.dim() in (4, 5):
                t = t.to(memory_format=memory_format)
            return t
        if dtype is None and device is None and memory_format is None:
            return self
        return self._apply(convert)

    def to_empty(self, *, device, recurse=True):
        """Moves parameters and buffers to `device` without copying their values (torch's to_empty)."""
        device = _C.device(device)
        return self._apply(lambda t: _C.empty_like(t, device=device))

    def float(self):
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self):
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self):
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self):
        return self._apply(lambda t: t.bfloat16() if t.is_floating_point() else t)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to(_C.device("cuda") if device is None else device)

    # ---- state dict -----------------------------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def load_state_dict(self, state_dict, strict=True, assign=False):
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        for prefix, m in list(self.named_modules()):  # lazy modules take their shapes from the checkpoint
            hook = getattr(m, "_lazy_load_hook", None)
            if hook is not None and type(m).__name__.startswith("Lazy"):
                hook(state_dict, prefix + "." if prefix else "")
        missing, unexpected, errors = [], [], []
        own = self.state_dict(keep_vars=True)
        for key, target in own.items():
            if key not in state_dict:
                missing.append(key)
                continue
            src = state_dict[key]
            if not isinstance(src, Tensor):
                errors.append(f'While copying the parameter named "{key}", expected torch.Tensor or Tensor-like '
                              f"object from checkpoint but received {type(src)}")
                continue
            if tuple(src.shape) != tuple(target.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape {_size(src.shape)} from "
                              f"checkpoint, the shape in current model is {_size(target.shape)}.")
                continue
            with _C_no_grad():
                if assign:
                    target.data = src.detach().to(target.dtype)
                else:
                    target.copy_(src)
        for key in state_dict.keys():
            if key not in own:
                unexpected.append(key)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # ---- hooks ----------------------------------------------------------------------------------
    @staticmethod
    def _add_hook(hooks, hook, prepend, with_kwargs=None):
        h = RemovableHandle(hooks)
        hooks[h.id] = hook
        if with_kwargs is not None:
            with_kwargs.add(h.id)
        if prepend:
            hooks.move_to_end(h.id, last=False)
        return h

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        return self._add_hook(self._forward_pre_hooks, hook, prepend,
                              self._forward_pre_hooks_with_kwargs if with_kwargs else None)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) -> new grad_output or None, before the module's gradients are computed."""
        return self._add_hook(self.__dict__.setdefault("_backward_pre_hooks", _TrackedDict()), hook, prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) -> new grad_input or None, once the gradients with respect
        to the module's positional inputs are computed (None for inputs that are not tensors needing one)."""
        return self._add_hook(self.__dict__.setdefault("_backward_hooks", _TrackedDict()), hook, prepend)

    def register_backward_hook(self, hook):
        raise RuntimeError("register_backward_hook is deprecated in torch and not in kiln; use "
                           "register_full_backward_hook")

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        return self._add_hook(self._forward_hooks, hook, prepend,
                              self._forward_hooks_with_kwargs if with_kwargs else None)

    # ---- repr -----------------------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({k}): " + _addindent(repr(m), 2) for k, m in self._modules.items()]
        lines = extra_lines + child_lines
        s = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                s += extra_lines[0]
            else:
                s += "\n  " + "\n  ".join(lines) + "\n"
        return s + ")"


def _size(shape):
    return "torch.Size([" + ", ".join(str(s) for s in shape) + "])"


class _BackwardHookState:
    """torch's BackwardHook: identity autograd Functions around a call's tensor inputs and outputs; the
    outputs' backward sees grad_output (pre-hooks may replace it), the inputs' backward sees grad_input
    and runs the full backward hooks (which may replace it)."""

    def __init__(self, module, n_inputs):
        self.module, self.n_inputs = module, n_inputs
        self.input_index = None
        self.grad_outputs = None

    @staticmethod
    def _pack(index, values, n):
        out = [None] * n
        for i, v in zip(index, values):
            out[i] = v
        return tuple(out)

    def wrap_inputs(self, args):
        index = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        if not index:
            return args
        self.input_index = index
        wrapped = _HookIdentity.apply(self._input_backward, *[args[i] for i in index])
        args = list(args)
        for i, t in zip(index, wrapped):
            args[i] = t
        return tuple(args)

    def _check(self, res, expected, what):
        if not isinstance(res, (tuple, list)) or len(res) != len(expected):
            raise RuntimeError(f"Backward hook returned an invalid number of {what} gradients: expected "
                               f"{len(expected)} but got {len(res) if isinstance(res, (tuple, list)) else 1}")
        return tuple(res)

    def _input_backward(self, grads):
        grad_inputs = self._pack(self.input_index, grads, self.n_inputs)
        for hook in list(self.module._backward_hooks.values()):
            res = hook(self.module, grad_inputs, self.grad_outputs)
            if res is not None:
                grad_inputs = self._check(res, grad_inputs, "grad_input")
        return tuple(grad_inputs[i] for i in self.input_index)

    def wrap_outputs(self, out):
        single = isinstance(out, Tensor)
        outs = (out,) if single else out
        if not isinstance(outs, tuple):
            return out
        index = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
        if not index:
            return out
        self.output_index, self.n_outputs = index, len(outs)
        wrapped = _HookIdentity.apply(self._output_backward, *[outs[i] for i in index])
        outs = list(outs)
        for i, t in zip(index, wrapped):
            outs[i] = t
        return outs[0] if single else tuple(outs)

    def _output_backward(self, grads):
        grad_outputs = self._pack(self.output_index, grads, self.n_outputs)
        for hook in list(self.module.__dict__.get("_backward_pre_hooks", {}).values()):
            res = hook(self.module, grad_outputs)
            if res is not None:
                grad_outputs = self._check(res, grad_outputs, "grad_output")
        self.grad_outputs = grad_outputs
        if self.input_index is None and self.module._backward_hooks:  # no input needs a gradient: run now
            import warnings
            warnings.warn("Full backward hook is firing when gradients are computed with respect to module "
                          "outputs since no inputs require gradients. See https://docs.pytorch.org/docs/main/"
                          "generated/torch.nn.Module.html#torch.nn.Module.register_full_backward_hook for more "
                          "details.", stacklevel=2)
            none = (None,) * self.n_inputs
            for hook in list(self.module._backward_hooks.values()):
                res = hook(self.module, none, grad_outputs)
                if res is not None and not all(r is None for r in res):
                    raise RuntimeError("Backward hook for Modules where no input requires gradient should "
                                       "always return None or None for all gradients.")
        return tuple(grad_outputs[i] for i in self.output_index)


class _HookIdentity(Function):
    """Identity on the tensors; its backward hands their gradients to `callback` (module backward hooks)."""

    @staticmethod
    def forward(ctx, callback, *tensors):
        ctx.callback = callback
        return tuple(t.view_as(t) for t in tensors)

    @staticmethod
    def backward(ctx, *grads):
        return (None,) + tuple(ctx.callback(grads))


class _CppModule(Module):
    """A Module whose computation is a kiln._C.nn layer; parameters and buffers are the C++ tensors.

    Each subclass's constructor arguments are kept (`_init_args`), so copy.deepcopy builds a fresh layer
    with them and copies the state in: parameters (values, requires_grad, gradients), buffers, the
    training flag and any other attribute."""

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        init = cls.__dict__.get("__init__")
        if init is None:
            return

        @functools.wraps(init)
        def recording_init(self, *args, **kwargs):
            if "_init_args" not in self.__dict__:  # the most derived class's arguments
                self.__dict__["_init_args"] = (args, kwargs)
            init(self, *args, **kwargs)

        cls.__init__ = recording_init

    def _init_args_or_raise(self, what):
        if "_init_args" not in self.__dict__:
            raise TypeError(f"cannot {what} {self._get_name()}: it is a part of a C++ layer; {what} the layer "
                            "that contains it")
        return self.__dict__["_init_args"]

    def _state(self):
        """What a fresh layer built from the same arguments needs to become this one."""
        params = [(p, p.requires_grad, p.grad) for _, p in self.named_parameters(remove_duplicate=False)]
        buffers = [b for _, b in self.named_buffers(remove_duplicate=False)]
        training = [m.training for m in self.modules()]
        return params, buffers, training

    def _load_state(self, state, extra, memo=None):
        import copy
        params, buffers, training = state
        with _C_no_grad():
            for (p, rg, g), (_, q) in zip(params, self.named_parameters(remove_duplicate=False)):
                q.copy_(p)
                q.requires_grad_(rg)
                if g is not None:
                    q.grad = copy.deepcopy(g, memo) if memo is not None else g
                if memo is not None:
                    memo[id(p)] = q
            for b, (_, c) in zip(buffers, self.named_buffers(remove_duplicate=False)):
                if b is not None and c is not None:
                    c.copy_(b)
                    if memo is not None:
                        memo[id(b)] = c
        for t, m in zip(training, self.modules()):
            m.training = t
            if isinstance(m, _CppModule):
                m._cpp.train(t)
        for k, v in extra.items():
            if k not in self.__dict__:
                self.__dict__[k] = copy.deepcopy(v, memo) if memo is not None else v

    def __deepcopy__(self, memo):
        import copy
        if id(self) in memo:
            return memo[id(self)]
        args, kwargs = copy.deepcopy(self._init_args_or_raise("deepcopy"), memo)
        new = type(self)(*args, **kwargs)
        memo[id(self)] = new
        new._load_state(self._state(), self.__dict__, memo)
        return new

    def __reduce_ex__(self, proto):
        """pickle (and kiln.save of a whole model): the class, its constructor arguments and the state."""
        args, kwargs = self._init_args_or_raise("pickle")
        extra = {k: v for k, v in self.__dict__.items() if k not in _CPP_OWN}
        return (_rebuild_cpp_module, (type(self), args, kwargs), (self._state(), extra))

    def __setstate__(self, st):
        self._load_state(st[0], st[1])

    def _bind(self, cpp):
        self.__dict__["_cpp"] = cpp
        for name, t in cpp._own_parameters():
            self._parameters[name] = Parameter._wrap(t) if t is not None else None
        for name, t, persistent in cpp._own_buffers():
            self._buffers[name] = t
            if not persistent:
                self._non_persistent_buffers_set.add(name)
        for name, child in cpp._children():
            self._modules[name] = _wrap_cpp(child)

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        cpp = self.__dict__.get("_cpp")
        if cpp is None:
            return
        if name in self._parameters:
            cpp._set_parameter(name, self._parameters[name])
        elif name in self._buffers:
            cpp._set_buffer(name, self._buffers[name], name not in self._non_persistent_buffers_set)

    def train(self, mode=True):
        super().train(mode)
        self._cpp.train(mode)
        return self

    def extra_repr(self):
        return self._cpp.extra_repr()

    def forward(self, *args):
        return self._cpp.forward(*args)


# attributes a constructor makes (not carried by pickle: the rebuilt layer has its own)
_CPP_OWN = {"_cpp", "_parameters", "_buffers", "_modules", "_non_persistent_buffers_set", "_init_args", "_get_name"}


def _rebuild_cpp_module(cls, args, kwargs):
    return cls(*args, **kwargs)


def _wrap_cpp(cpp):
    m = _CppModule.__new__(_CppModule)
    Module.__init__(m)
    m._bind(cpp)
    m.__dict__["_get_name"] = cpp._name
    return m
