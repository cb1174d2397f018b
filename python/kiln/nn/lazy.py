"""torch.nn's lazy modules: LazyLinear, LazyConv{1,2,3}d, LazyConvTranspose{1,2,3}d,
LazyBatchNorm{1,2,3}d and LazyInstanceNorm{1,2,3}d, with UninitializedParameter / UninitializedBuffer.

Until its first call the module holds uninitialized placeholders; the first call reads the input
size torch reads (in_features = input.shape[-1]; in_channels = input.shape[1], or shape[0] for an
unbatched convolution input; num_features = input.shape[1]), builds the kiln layer with those sizes
and the module's other arguments (its parameters initialised as that layer's constructor does) and
becomes it (its class is then Linear, Conv2d, ...), hooks and training mode kept. load_state_dict
before the first call builds the layer from the checkpoint's shapes, then loads it (torch keeps the
Lazy class until the first call; kiln changes it at the load)."""
from .. import _C
from .module import Module
from .parameter import Parameter, Buffer

_UNINIT_SHAPE = ("Can't access the shape of an uninitialized parameter or buffer. This error usually happens in "
                 "`load_state_dict` when trying to load an uninitialized parameter into an initialized one. Call "
                 "`forward` to initialize the parameters before accessing their attributes.")


class UninitializedTensorMixin:
    """A placeholder with no shape yet (materialize gives it one)."""

    @property
    def shape(self):
        raise RuntimeError(_UNINIT_SHAPE)

    def size(self, dim=None):
        raise RuntimeError(_UNINIT_SHAPE)

    def numel(self):
        raise RuntimeError(_UNINIT_SHAPE)

    def __repr__(self):
        return f"<{type(self).__name__}>"

    __str__ = __repr__


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    cls_to_become = Parameter

    def __init__(self, requires_grad=True, device=None, dtype=None):
        super().__init__(_C.empty([0], dtype=dtype), requires_grad)
        self._lazy_dtype = dtype

    def materialize(self, shape, device=None, dtype=None):
        """Gives this placeholder its shape, in place: it becomes a Parameter (uninitialised values)."""
        self.data = _C.empty(list(shape), dtype=dtype or self.dtype)
        self.__class__ = self.cls_to_become

    def __reduce_ex__(self, protocol):  # (copies and pickles stay placeholders)
        return (type(self), (self.requires_grad, None, self._lazy_dtype))

    def __deepcopy__(self, memo):
        memo[id(self)] = new = type(self)(self.requires_grad, None, self._lazy_dtype)
        return new


class UninitializedBuffer(UninitializedTensorMixin, Buffer):
    cls_to_become = Buffer

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        super().__init__(_C.empty([0], dtype=dtype), persistent)
        self._lazy_dtype = dtype

    def materialize(self, shape, device=None, dtype=None):
        self.data = _C.empty(list(shape), dtype=dtype or self.dtype)
        self.__class__ = self.cls_to_become

    def __reduce_ex__(self, protocol):
        return (type(self), (False, None, self._lazy_dtype, self.persistent))

    def __deepcopy__(self, memo):
        memo[id(self)] = new = type(self)(False, None, self._lazy_dtype, self.persistent)
        return new


_KEEP = ("training", "_forward_pre_hooks", "_forward_hooks", "_forward_hooks_with_kwargs",
         "_forward_pre_hooks_with_kwargs", "_backward_hooks", "_backward_pre_hooks")


_LAZY_OWN = ("_args", "_dtype", "_bias")


class LazyModuleMixin:
    cls_to_become = None

    def has_uninitialized_params(self):
        return any(isinstance(t, UninitializedTensorMixin)
                   for t in list(self._parameters.values()) + list(self._buffers.values()))

    def _build_dtype(self):
        """The placeholders' dtype (a .double() / .to() before the first call changes it), else the argument."""
        for t in list(self._parameters.values()) + list(self._buffers.values()):
            if isinstance(t, UninitializedTensorMixin):
                return t.dtype
        return self._dtype

    def _become(self, size):
        """Builds the layer with `size` as its inferred first argument and turns self into it: its
        attributes, hooks and training mode kept, and its parameter objects too (an optimiser made
        before the first call trains the layer), filled in place with the layer's initial values."""
        placeholders = {k: v for k, v in self._parameters.items() if isinstance(v, UninitializedParameter)}
        real = self._build(size, self._build_dtype())
        d = {k: v for k, v in self.__dict__.items() if k not in _LAZY_OWN}
        keep = {k: d[k] for k in _KEEP if k in d}
        d.update(real.__dict__)
        d.update(keep)
        self.__dict__.clear()
        self.__dict__.update(d)
        self.__class__ = type(real)
        for name, ph in placeholders.items():
            rp = self._parameters.get(name)
            if rp is None:
                continue
            ph.data = rp.detach()
            ph.__class__ = Parameter
            setattr(self, name, ph)  # (the C++ layer computes with this tensor from now on)
        self.train(self.training)

    def initialize_parameters(self, input):
        self._become(self._infer(input))

    def __call__(self, *args, **kwargs):
        # (before the hooks, as torch's pre-hook registered first: they see the built layer)
        if args:
            self.initialize_parameters(args[0])
            return type(self).__call__(self, *args, **kwargs)
        return Module.__call__(self, *args, **kwargs)

    def forward(self, input, *args, **kwargs):
        # (the first call, whatever has_uninitialized_params says: a lazy norm without affine weights or
        # running statistics has no placeholders, and torch then leaves num_features at 0; kiln infers it)
        self.initialize_parameters(input)
        return self.forward(input, *args, **kwargs)  # (now the layer's own forward)

    def _lazy_load_hook(self, state_dict, prefix):
        """Module.load_state_dict calls this (self or any submodule) before loading: the layer is built
        from the checkpoint's shapes."""
        own = {k[len(prefix):]: v for k, v in state_dict.items() if k.startswith(prefix)}
        size = self._size_from_state(own)
        if size is not None:
            self._become(size)


def _placeholders(module, params, buffers, dtype):
    for name in params:
        module.register_parameter(name, UninitializedParameter(dtype=dtype))
    for name in buffers:
        if name == "num_batches_tracked":
            module.register_buffer(name, _C.tensor(0))
        else:
            module.register_buffer(name, UninitializedBuffer(dtype=dtype))


class LazyLinear(LazyModuleMixin, Module):
    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features, self._bias, self._dtype = 0, out_features, bias, dtype
        _placeholders(self, ["weight", "bias"] if bias else ["weight"], [], dtype)
        if not bias:
            self.register_parameter("bias", None)

    def _infer(self, input):
        return input.shape[-1]

    def _size_from_state(self, sd):
        w = sd.get("weight")
        return None if w is None else w.shape[1]

    def _build(self, in_features, dtype):
        from .layers import Linear
        return Linear(in_features, self.out_features, self._bias, dtype=dtype)

    def reset_parameters(self):
        pass  # (nothing to reset before the first call; after it the module is a Linear)

    def extra_repr(self):
        return f"in_features=0, out_features={self.out_features}, bias={self._bias}"


def _lazy_conv(name, n, transposed):
    from . import norm_conv

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, *rest, device=None, dtype=None, **kw):
        Module.__init__(self)
        names = (["output_padding", "groups", "bias", "dilation", "padding_mode"] if transposed
                 else ["dilation", "groups", "bias", "padding_mode"])
        args = dict(zip(names, rest))
        for k, v in kw.items():
            if k not in names:
                raise TypeError(f"{name}.__init__() got an unexpected keyword argument '{k}'")
            args[k] = v
        self.in_channels, self.out_channels = 0, out_channels
        self._args = dict(kernel_size=kernel_size, stride=stride, padding=padding, **args)
        self._dtype = dtype
        _placeholders(self, ["weight", "bias"] if args.get("bias", True) else ["weight"], [], dtype)
        if not args.get("bias", True):
            self.register_parameter("bias", None)

    def _infer(self, input):
        return input.shape[0] if input.dim() == n + 1 else input.shape[1]

    def _size_from_state(self, sd):
        w = sd.get("weight")
        if w is None:
            return None
        groups = self._args.get("groups", 1)
        return w.shape[0] if transposed else w.shape[1] * groups

    def _build(self, in_channels, dtype):
        real = getattr(norm_conv, name[4:])
        return real(in_channels, self.out_channels, dtype=dtype, **self._args)

    def extra_repr(self):  # (as the layer prints, in_channels 0)
        a = self._args

        def t(v):
            return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n
        r = f"0, {self.out_channels}, kernel_size={t(a['kernel_size'])}, stride={t(a['stride'])}"
        pad = a.get("padding", 0)
        if isinstance(pad, str):
            r += f", padding={pad}"
        elif t(pad) != (0,) * n:
            r += f", padding={t(pad)}"
        if t(a.get("dilation", 1)) != (1,) * n:
            r += f", dilation={t(a['dilation'])}"
        if transposed and t(a.get("output_padding", 0)) != (0,) * n:
            r += f", output_padding={t(a['output_padding'])}"
        if a.get("groups", 1) != 1:
            r += f", groups={a['groups']}"
        if not a.get("bias", True):
            r += ", bias=False"
        if a.get("padding_mode", "zeros") != "zeros":
            r += f", padding_mode={a['padding_mode']}"
        return r
    return type(name, (LazyModuleMixin, Module), {"__init__": __init__, "_infer": _infer,
                                                   "_size_from_state": _size_from_state, "_build": _build,
                                                   "extra_repr": extra_repr, "__module__": __name__})


def _lazy_norm(name, affine_default, track_default):
    from . import norm_conv

    def __init__(self, eps=1e-5, momentum=0.1, affine=affine_default, track_running_stats=track_default,
                 device=None, dtype=None):
        Module.__init__(self)
        self.num_features = 0
        self.eps, self.momentum, self.affine, self.track_running_stats = eps, momentum, affine, track_running_stats
        self._dtype = dtype
        _placeholders(self, ["weight", "bias"] if affine else [],
                      ["running_mean", "running_var", "num_batches_tracked"] if track_running_stats else [], dtype)

    def _infer(self, input):
        return input.shape[1]

    def _size_from_state(self, sd):
        for k in ("weight", "running_mean"):
            if sd.get(k) is not None:
                return sd[k].shape[0]
        return None

    def _build(self, num_features, dtype):
        real = getattr(norm_conv, name[4:])
        return real(num_features, self.eps, self.momentum, self.affine, self.track_running_stats, dtype=dtype)

    def extra_repr(self):
        return (f"0, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, bias={self.affine}, "
                f"track_running_stats={self.track_running_stats}")

    return type(name, (LazyModuleMixin, Module), {"__init__": __init__, "_infer": _infer,
                                                   "_size_from_state": _size_from_state, "_build": _build,
                                                   "extra_repr": extra_repr, "__module__": __name__})


LazyConv1d = _lazy_conv("LazyConv1d", 1, False)
LazyConv2d = _lazy_conv("LazyConv2d", 2, False)
LazyConv3d = _lazy_conv("LazyConv3d", 3, False)
LazyConvTranspose1d = _lazy_conv("LazyConvTranspose1d", 1, True)
LazyConvTranspose2d = _lazy_conv("LazyConvTranspose2d", 2, True)
LazyConvTranspose3d = _lazy_conv("LazyConvTranspose3d", 3, True)
LazyBatchNorm1d = _lazy_norm("LazyBatchNorm1d", True, True)
LazyBatchNorm2d = _lazy_norm("LazyBatchNorm2d", True, True)
LazyBatchNorm3d = _lazy_norm("LazyBatchNorm3d", True, True)
LazyInstanceNorm1d = _lazy_norm("LazyInstanceNorm1d", True, True)  # (torch: both True, unlike InstanceNorm)
LazyInstanceNorm2d = _lazy_norm("LazyInstanceNorm2d", True, True)  # (torch: both True, unlike InstanceNorm)
LazyInstanceNorm3d = _lazy_norm("LazyInstanceNorm3d", True, True)  # (torch: both True, unlike InstanceNorm)

__all__ = ["UninitializedParameter", "UninitializedBuffer", "LazyModuleMixin", "LazyLinear", "LazyConv1d",
           "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
           "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
           "LazyInstanceNorm3d"]
