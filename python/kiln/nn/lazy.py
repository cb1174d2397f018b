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
        return Parameter(_C.empty(list(shape), dtype=dtype or self._lazy_dtype), self.requires_grad)

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
        return _C.empty(list(shape), dtype=dtype or self._lazy_dtype)

    def __reduce_ex__(self, protocol):
        return (type(self), (False, None, self._lazy_dtype, self.persistent))

    def __deepcopy__(self, memo):
        memo[id(self)] = new = type(self)(False, None, self._lazy_dtype, self.persistent)
        return new


_KEEP = ("training", "_forward_pre_hooks", "_forward_hooks", "_forward_hooks_with_kwargs",
         "_forward_pre_hooks_with_kwargs", "_backward_hooks", "_backward_pre_hooks")


class LazyModuleMixin:
    cls_to_become = None

    def has_uninitialized_params(self):
        return any(isinstance(t, UninitializedTensorMixin)
                   for t in list(self._parameters.values()) + list(self._buffers.values()))

    def _become(self, size):
        """Builds the layer with `size` as its inferred first argument and turns self into it."""
        real = self._build(size)
        keep = {k: self.__dict__[k] for k in _KEEP if k in self.__dict__}
        self.__dict__.clear()
        self.__dict__.update(real.__dict__)
        self.__dict__.update(keep)
        self.__class__ = type(real)
        self.train(self.training)

    def initialize_parameters(self, input):
        self._become(self._infer(input))

    def forward(self, input, *args, **kwargs):
        # (the first call, whatever has_uninitialized_params says: a lazy norm without affine weights or
        # running statistics has no placeholders, and torch then leaves num_features at 0; kiln infers it)
        self.initialize_parameters(input)
        return self.forward(input, *args, **kwargs)  # (now the layer's own forward)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        if self.has_uninitialized_params():
            size = self._size_from_state(state_dict)
            if size is not None:
                self._become(size)
                return self.load_state_dict(state_dict, strict, assign)
        return Module.load_state_dict(self, state_dict, strict, assign)


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

    def _build(self, in_features):
        from .layers import Linear
        return Linear(in_features, self.out_features, self._bias, dtype=self._dtype)

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

    def _build(self, in_channels):
        real = getattr(norm_conv, name[4:])
        return real(in_channels, self.out_channels, dtype=self._dtype, **self._args)

    def extra_repr(self):
        return f"0, {self.out_channels}, kernel_size={self._args['kernel_size']}, stride={self._args['stride']}"
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

    def _build(self, num_features):
        real = getattr(norm_conv, name[4:])
        return real(num_features, self.eps, self.momentum, self.affine, self.track_running_stats, dtype=self._dtype)

    def extra_repr(self):
        return (f"0, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
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
