"""Layers computed by kiln's C++ modules (kiln/nn/*.cpp), with torch.nn's constructor signatures."""
from collections import namedtuple as _namedtuple

from .. import _C
from .module import _CppModule

_cnn = _C._nn


def _dtype(dtype):
    return dtype


class Linear(_CppModule):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self._bind(_cnn.Linear(in_features, out_features, bias, dtype))
        self.in_features, self.out_features = in_features, out_features

    def reset_parameters(self):
        self._cpp.reset_parameters()


class MixtureOfExperts(_CppModule):
    """A mixture-of-experts feed-forward layer (kiln/nn/moe.h): router, top-k, tokens sorted by expert,
    two grouped matrix multiplies with a SiLU between, weighted sum back per token."""
    def __init__(self, dim, hidden, num_experts, top_k=2, device=None, dtype=None):
        super().__init__()
        self._bind(_cnn.MixtureOfExperts(dim, hidden, num_experts, top_k, dtype))
        self.dim, self.hidden, self.num_experts, self.top_k = dim, hidden, num_experts, top_k

    def reset_parameters(self):
        self._cpp.reset_parameters()


_ASMoutput = _namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(_CppModule):
    """torch.nn.AdaptiveLogSoftmaxWithLoss (kiln/nn/adaptive.h): a head Linear over the shortlist's
    classes and one entry per tail cluster; each cluster two bias-free Linears. forward returns
    (output, loss) as torch's _ASMoutput."""
    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                             "order, where each value is between 1 and n_classes-1")
        for i in range(len(cutoffs)):  # (torch's hidden sizes, and its errors for a zero / NaN div_value)
            int(in_features // (div_value ** (i + 1)))
        self._bind(_cnn.AdaptiveLogSoftmaxWithLoss(in_features, n_classes, [int(c) for c in cutoffs],
                                                   float(div_value), head_bias, dtype))
        # head and tail as torch's classes over the same C++ layers: head.out_features, tail[i], `for i2h,
        # h2o in tail`
        from .containers import ModuleList, Sequential

        def linear(child):
            lin = Linear.__new__(Linear)
            _CppModule.__init__(lin)
            lin._bind(child._cpp)
            lin.out_features, lin.in_features = tuple(lin.weight.shape)
            return lin
        self._modules["head"] = linear(self._modules["head"])
        self._modules["tail"] = ModuleList([Sequential(*[linear(c) for c in seq._modules.values()])
                                            for seq in self._modules["tail"]._modules.values()])
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters

    def forward(self, input_, target_):
        return _ASMoutput(*self._cpp.forward(input_, target_))

    def log_prob(self, input):
        return self._cpp.log_prob(input)

    def predict(self, input):
        return self._cpp.predict(input)

    def reset_parameters(self):
        self._cpp.reset_parameters()


class Float8Linear(_CppModule):
    """nn.Linear with its product in float8 (kiln/nn/float8.h): input and weight quantised per row,
    multiplied by _scaled_mm; a float32 (or dtype) master weight for training, freeze() for a float8
    weight with per-row scales."""
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None, float8_dtype=None):
        super().__init__()
        self._bind(_cnn.Float8Linear(in_features, out_features, bias, dtype, float8_dtype))
        self.in_features, self.out_features = in_features, out_features

    def reset_parameters(self):
        self._cpp.reset_parameters()

    def freeze(self):
        self._cpp.freeze()
        self._bind(self._cpp)  # the weight is gone, weight_f8 and weight_scale are buffers now
        return self

    @property
    def frozen(self):
        return self._cpp.frozen


class Bilinear(_CppModule):
    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self._bind(_cnn.Bilinear(in1_features, in2_features, out_features, bias, dtype))
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features

    def reset_parameters(self):
        self._cpp.reset_parameters()


class Identity(_CppModule):
    def __init__(self, *args, **kwargs):
        super().__init__()
        self._bind(_cnn.Identity())

    def forward(self, input):
        return input


class Flatten(_CppModule):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self._bind(_cnn.Flatten(start_dim, end_dim))
        self.start_dim, self.end_dim = start_dim, end_dim


class PixelShuffle(_CppModule):
    def __init__(self, upscale_factor):
        super().__init__()
        self._bind(_cnn.PixelShuffle(upscale_factor))
        self.upscale_factor = upscale_factor


class PixelUnshuffle(_CppModule):
    def __init__(self, downscale_factor):
        super().__init__()
        self._bind(_cnn.PixelUnshuffle(downscale_factor))
        self.downscale_factor = downscale_factor


class Softmax2d(_CppModule):
    def __init__(self):
        super().__init__()
        self._bind(_cnn.Softmax2d())


class CosineSimilarity(_CppModule):
    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self._bind(_cnn.CosineSimilarity(dim, eps))
        self.dim, self.eps = dim, eps


class PairwiseDistance(_CppModule):
    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self._bind(_cnn.PairwiseDistance(p, eps, keepdim))
        self.norm, self.eps, self.keepdim = p, eps, keepdim


class PReLU(_CppModule):
    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self._bind(_cnn.PReLU(num_parameters, init, dtype))
        self.num_parameters, self.init = num_parameters, init

    def reset_parameters(self):
        self._cpp.reset_parameters()


class Unflatten(_CppModule):
    def __init__(self, dim, unflattened_size):
        super().__init__()
        self._bind(_cnn.Unflatten(dim, tuple(unflattened_size)))
        self.dim, self.unflattened_size = dim, unflattened_size


class Embedding(_CppModule):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None):
        super().__init__()
        self._bind(_cnn.Embedding(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type,
                                  scale_grad_by_freq, sparse, dtype))
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = self._cpp.padding_idx
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is not None:
            from .parameter import Parameter
            self.weight = Parameter(_weight, requires_grad=not _freeze)
        elif _freeze:
            self.weight.requires_grad_(False)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False):
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional, got shape "
                                 f"{tuple(embeddings.shape)}")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings, _freeze=freeze)

    def reset_parameters(self):
        self._cpp.reset_parameters()


class LayerNorm(_CppModule):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self._bind(_cnn.LayerNorm(ns, eps, elementwise_affine, bias, dtype))
        self.normalized_shape, self.eps, self.elementwise_affine = ns, eps, elementwise_affine

    def reset_parameters(self):
        self._cpp.reset_parameters()


class RMSNorm(_CppModule):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self._bind(_cnn.RMSNorm(ns, eps, elementwise_affine, dtype))
        self.normalized_shape, self.eps, self.elementwise_affine = ns, eps, elementwise_affine

    def reset_parameters(self):
        self._cpp.reset_parameters()


class Dropout(_CppModule):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self._bind(_cnn.Dropout(p, inplace))
        self.p, self.inplace = p, inplace


def _activation(name, params=(), defaults=(), has_inplace=False, approximate=False):
    """Builds the Python class of an activation module backed by kiln::nn::make_activation."""
    def __init__(self, *args, **kwargs):
        _CppModule.__init__(self)
        names = list(params) + (["inplace"] if has_inplace else []) + (["approximate"] if approximate else [])
        vals = dict(zip(names, list(defaults) + ([False] if has_inplace else []) + (["none"] if approximate else [])))
        if len(args) > len(names):
            raise TypeError(f"{name}() takes at most {len(names)} arguments")
        for k, v in zip(names, args):
            vals[k] = v
        for k, v in kwargs.items():
            if k not in vals:
                raise TypeError(f"{name}.__init__() got an unexpected keyword argument '{k}'")
            vals[k] = v
        for k, v in vals.items():
            object.__setattr__(self, k, v)
        nums = []
        for k in params:
            if vals[k] is None:
                raise TypeError(f"{name}: {k} must be given")
            nums.append(float(vals[k]))
        self._bind(_cnn.make_activation(name, nums, bool(vals.get("inplace", False)), vals.get("approximate", "none")))

    return type(name, (_CppModule,), {"__init__": __init__, "__module__": __name__})


ReLU = _activation("ReLU", has_inplace=True)
ReLU6 = _activation("ReLU6", has_inplace=True)
LeakyReLU = _activation("LeakyReLU", ["negative_slope"], [0.01], has_inplace=True)
ELU = _activation("ELU", ["alpha"], [1.0], has_inplace=True)
CELU = _activation("CELU", ["alpha"], [1.0], has_inplace=True)
SELU = _activation("SELU", has_inplace=True)
GELU = _activation("GELU", approximate=True)
SiLU = _activation("SiLU", has_inplace=True)
Mish = _activation("Mish", has_inplace=True)
Softplus = _activation("Softplus", ["beta", "threshold"], [1.0, 20.0])
Softsign = _activation("Softsign")
Hardtanh = _activation("Hardtanh", ["min_val", "max_val"], [-1.0, 1.0], has_inplace=True)
Hardsigmoid = _activation("Hardsigmoid", has_inplace=True)
Hardswish = _activation("Hardswish", has_inplace=True)
LogSigmoid = _activation("LogSigmoid")
Sigmoid = _activation("Sigmoid")
Tanh = _activation("Tanh")
Threshold = _activation("Threshold", ["threshold", "value"], [None, None], has_inplace=True)
Softmax = _activation("Softmax", ["dim"], [None])
LogSoftmax = _activation("LogSoftmax", ["dim"], [None])
Softmin = _activation("Softmin", ["dim"], [None])
Hardshrink = _activation("Hardshrink", ["lambd"], [0.5])
Softshrink = _activation("Softshrink", ["lambd"], [0.5])
Tanhshrink = _activation("Tanhshrink")
GLU = _activation("GLU", ["dim"], [-1])


# ---- channel-wise dropout and the padding modules (kiln::nn::Dropout1d ... and kiln::nn::Pad in C++) ----
from . import functional as _F  # noqa: E402
from .module import Module as _Module  # noqa: E402


class _DropoutNd(_Module):
    _fn = None

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"

    def forward(self, input):
        return type(self)._fn(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    _fn = staticmethod(_F.dropout1d)


class Dropout2d(_DropoutNd):
    _fn = staticmethod(_F.dropout2d)


class Dropout3d(_DropoutNd):
    _fn = staticmethod(_F.dropout3d)


def _ntuple(padding, n):
    if isinstance(padding, int):
        return (padding,) * n
    return tuple(padding)


class _PadNd(_Module):
    _dims, _mode = 1, "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, 2 * self._dims)

    def forward(self, input):
        if self._mode == "circular" and input.dim() not in (self._dims + 1, self._dims + 2):
            raise ValueError(f"expected {self._dims + 1}D or {self._dims + 2}D input (got {input.dim()}D input)")
        return _F.pad(input, self.padding, self._mode, 0.0 if self._mode == "constant" else None)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return _F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


def _pad_class(name, dims, mode, base=_PadNd):
    return type(name, (base,), {"_dims": dims, "_mode": mode, "__module__": __name__})


ZeroPad1d, ZeroPad2d, ZeroPad3d = (_pad_class(f"ZeroPad{d}d", d, "constant") for d in (1, 2, 3))
ReflectionPad1d, ReflectionPad2d, ReflectionPad3d = (_pad_class(f"ReflectionPad{d}d", d, "reflect") for d in (1, 2, 3))
ReplicationPad1d, ReplicationPad2d, ReplicationPad3d = (_pad_class(f"ReplicationPad{d}d", d, "replicate")
                                                        for d in (1, 2, 3))
CircularPad1d, CircularPad2d, CircularPad3d = (_pad_class(f"CircularPad{d}d", d, "circular") for d in (1, 2, 3))
ConstantPad1d, ConstantPad2d, ConstantPad3d = (_pad_class(f"ConstantPad{d}d", d, "constant", _ConstantPadNd)
                                               for d in (1, 2, 3))


# ---- alpha dropout, RReLU, LPPool, MaxUnpool, ChannelShuffle, the Upsampling modules (kiln::nn's C++
# classes of the same names; here modules over kiln.nn.functional) ----
class AlphaDropout(_DropoutNd):
    _fn = staticmethod(_F.alpha_dropout)


class FeatureAlphaDropout(_DropoutNd):
    _fn = staticmethod(_F.feature_alpha_dropout)


class RReLU(_Module):
    __constants__ = ["lower", "upper", "inplace"]

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return _F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


class _LPPoolNd(_Module):
    __constants__ = ["norm_type", "kernel_size", "stride", "ceil_mode"]
    _fn = None

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def forward(self, input):
        return type(self)._fn(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    _fn = staticmethod(_F.lp_pool1d)


class LPPool2d(_LPPoolNd):
    _fn = staticmethod(_F.lp_pool2d)


class LPPool3d(_LPPoolNd):
    _fn = staticmethod(_F.lp_pool3d)


class _MaxUnpoolNd(_Module):
    _dims, _fn = 1, None

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, self._dims)
        self.stride = _ntuple(stride if stride is not None else kernel_size, self._dims)
        self.padding = _ntuple(padding, self._dims)

    def forward(self, input, indices, output_size=None):
        return type(self)._fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    _dims, _fn = 1, staticmethod(_F.max_unpool1d)


class MaxUnpool2d(_MaxUnpoolNd):
    _dims, _fn = 2, staticmethod(_F.max_unpool2d)


class MaxUnpool3d(_MaxUnpoolNd):
    _dims, _fn = 3, staticmethod(_F.max_unpool3d)


class _FractionalMaxPoolNd(_Module):
    _dims = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        name = type(self).__name__
        self.kernel_size = _ntuple(kernel_size, self._dims)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        def tup(v):
            return None if v is None else tuple(v) if isinstance(v, (tuple, list)) else (v,) * self._dims
        self.output_size, self.output_ratio = tup(output_size), tup(output_ratio)
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None:
            if not all(0 < r < 1 for r in self.output_ratio):
                raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        return _F._fractional_max_pool(self._dims, input, self.kernel_size, self.output_size, self.output_ratio,
                                       self.return_indices, self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    _dims = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    _dims = 3


class ChannelShuffle(_Module):
    __constants__ = ["groups"]

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return _F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


from .norm_conv import Upsample as _Upsample  # noqa: E402


class UpsamplingNearest2d(_Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(_Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
