"""Normalisation, EmbeddingBag, convolution, pooling and upsampling modules computed by kiln's C++
layers (kiln/nn/norm_layers.cpp, kiln/nn/conv_layers.cpp), with torch.nn's constructor signatures."""
from .. import _C
from .module import _CppModule

_cnn = _C._nn

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
           "LocalResponseNorm", "EmbeddingBag", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
           "AdaptiveMaxPool3d", "Fold", "Unfold", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
           "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
           "Upsample"]


def _cpp_attr(name):
    """A Python attribute that reads and writes the C++ layer's field (hyper-parameters used in forward)."""
    return property(lambda self: getattr(self._cpp, name), lambda self, v: setattr(self._cpp, name, v))


# ---- normalisation ----------------------------------------------------------------------------------
class _NormBase(_CppModule):
    """torch's _NormBase over a C++ layer (BatchNorm, InstanceNorm): `_impl` builds it."""
    _impl = None
    eps = _cpp_attr("eps")
    momentum = _cpp_attr("momentum")

    def _init_norm(self, num_features, eps, momentum, affine, track_running_stats, bias, dtype):
        super().__init__()
        self._bind(self._impl(num_features, eps, momentum, affine, track_running_stats, bias, dtype))
        self.num_features, self.affine, self.track_running_stats = num_features, affine, track_running_stats

    def reset_running_stats(self):
        self._cpp.reset_running_stats()

    def reset_parameters(self):
        self._cpp.reset_parameters()


class _BatchNorm(_NormBase):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        self._init_norm(num_features, eps, momentum, affine, track_running_stats, bias, dtype)


class BatchNorm1d(_BatchNorm):
    _impl = _cnn.BatchNorm1d


class BatchNorm2d(_BatchNorm):
    _impl = _cnn.BatchNorm2d


class BatchNorm3d(_BatchNorm):
    _impl = _cnn.BatchNorm3d


class _InstanceNorm(_NormBase):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None, *, bias=True):
        self._init_norm(num_features, eps, momentum, affine, track_running_stats, bias, dtype)

    def forward(self, input):
        feature_dim = input.dim() - {"InstanceNorm1d": 1, "InstanceNorm2d": 2, "InstanceNorm3d": 3}[type(self)._cls] - 1
        if input.dim() > feature_dim and input.size(feature_dim) != self.num_features and not self.affine:
            import warnings
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You can silence this "
                          "warning by not passing in num_features, which is not used because affine=False")
        return self._cpp.forward(input)


class InstanceNorm1d(_InstanceNorm):
    _impl, _cls = _cnn.InstanceNorm1d, "InstanceNorm1d"


class InstanceNorm2d(_InstanceNorm):
    _impl, _cls = _cnn.InstanceNorm2d, "InstanceNorm2d"


class InstanceNorm3d(_InstanceNorm):
    _impl, _cls = _cnn.InstanceNorm3d, "InstanceNorm3d"


class LocalResponseNorm(_CppModule):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self._bind(_cnn.LocalResponseNorm(size, alpha, beta, k))
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k


class GroupNorm(_CppModule):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        self._bind(_cnn.GroupNorm(num_groups, num_channels, eps, affine, bias, dtype))
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine

    def reset_parameters(self):
        self._cpp.reset_parameters()


class EmbeddingBag(_CppModule):
    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None, device=None,
                 dtype=None):
        super().__init__()
        self._bind(_cnn.EmbeddingBag(num_embeddings, embedding_dim, max_norm, norm_type, scale_grad_by_freq, mode,
                                     sparse, include_last_offset, padding_idx, dtype))
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, scale_grad_by_freq
        self.mode, self.sparse, self.include_last_offset = mode, sparse, include_last_offset
        self.padding_idx = self._cpp.padding_idx
        if _weight is not None:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")
            from .parameter import Parameter
            self.weight = Parameter(_weight)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                        mode="mean", sparse=False, include_last_offset=False, padding_idx=None):
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings,
                  include_last_offset, padding_idx)
        bag.weight.requires_grad_(not freeze)
        return bag

    def forward(self, input, offsets=None, per_sample_weights=None):
        return self._cpp.forward(input, offsets, per_sample_weights)

    def reset_parameters(self):
        self._cpp.reset_parameters()


# ---- convolution --------------------------------------------------------------------------------------
class _ConvNd(_CppModule):
    def _setup(self, cpp, in_channels, out_channels, groups, padding_mode, transposed):
        self._bind(cpp)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = tuple(cpp.kernel_size), tuple(cpp.stride)
        self.padding = cpp.padding_str or tuple(cpp.padding_values)
        self.dilation, self.output_padding = tuple(cpp.dilation), tuple(cpp.output_padding)
        self.transposed, self.padding_mode = transposed, padding_mode

    def reset_parameters(self):
        self._cpp.reset_parameters()


def _conv_class(name, cpp_name):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        _ConvNd.__init__(self)
        self._setup(getattr(_cnn, cpp_name)(in_channels, out_channels, kernel_size, stride, padding, dilation,
                                            groups, bias, padding_mode, dtype),
                    in_channels, out_channels, groups, padding_mode, False)
    return type(name, (_ConvNd,), {"__init__": __init__, "__module__": __name__})


def _conv_transpose_class(name):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        _ConvNd.__init__(self)
        self._setup(getattr(_cnn, name)(in_channels, out_channels, kernel_size, stride, padding, output_padding,
                                        groups, bias, dilation, padding_mode, dtype),
                    in_channels, out_channels, groups, padding_mode, True)

    def forward(self, input, output_size=None):
        return self._cpp.forward(input, None if output_size is None else tuple(output_size))
    return type(name, (_ConvNd,), {"__init__": __init__, "forward": forward, "__module__": __name__})


Conv1d = _conv_class("Conv1d", "Conv1d")
Conv2d = _conv_class("Conv2d", "Conv2d")
Conv3d = _conv_class("Conv3d", "Conv3d")
ConvTranspose1d = _conv_transpose_class("ConvTranspose1d")
ConvTranspose2d = _conv_transpose_class("ConvTranspose2d")
ConvTranspose3d = _conv_transpose_class("ConvTranspose3d")


# ---- pooling and upsampling -----------------------------------------------------------------------------
class _MaxPoolNd(_CppModule):
    _impl = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self._bind(self._impl(kernel_size, stride, padding, dilation, return_indices, ceil_mode))
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode


class MaxPool1d(_MaxPoolNd):
    _impl = _cnn.MaxPool1d


class MaxPool2d(_MaxPoolNd):
    _impl = _cnn.MaxPool2d


class MaxPool3d(_MaxPoolNd):
    _impl = _cnn.MaxPool3d


def _single(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


class AvgPool1d(_CppModule):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        self._bind(_cnn.AvgPool1d(kernel_size, stride, padding, ceil_mode, count_include_pad))
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding, self.ceil_mode, self.count_include_pad = _single(padding), ceil_mode, count_include_pad


class _AvgPoolNd(_CppModule):
    _impl = None

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self._bind(self._impl(kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override))
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad
        self.divisor_override = divisor_override


class AvgPool2d(_AvgPoolNd):
    _impl = _cnn.AvgPool2d


class AvgPool3d(_AvgPoolNd):
    _impl = _cnn.AvgPool3d


class AdaptiveAvgPool1d(_CppModule):
    def __init__(self, output_size):
        super().__init__()
        self._bind(_cnn.AdaptiveAvgPool1d(output_size))
        self.output_size = output_size


class _AdaptivePoolNd(_CppModule):
    _impl = None

    def __init__(self, output_size, *args):
        super().__init__()
        self._bind(self._impl(output_size, *args))
        self.output_size = output_size


class AdaptiveAvgPool2d(_AdaptivePoolNd):
    _impl = _cnn.AdaptiveAvgPool2d


class AdaptiveAvgPool3d(_AdaptivePoolNd):
    _impl = _cnn.AdaptiveAvgPool3d


class _AdaptiveMaxPoolNd(_AdaptivePoolNd):
    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size, return_indices)
        self.return_indices = return_indices


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    _impl = _cnn.AdaptiveMaxPool1d


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    _impl = _cnn.AdaptiveMaxPool2d


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    _impl = _cnn.AdaptiveMaxPool3d


class Unfold(_CppModule):
    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self._bind(_cnn.Unfold(kernel_size, dilation, padding, stride))
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride


class Fold(_CppModule):
    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self._bind(_cnn.Fold(output_size, kernel_size, dilation, padding, stride))
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride


class Upsample(_CppModule):
    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self._bind(_cnn.Upsample(size, scale_factor, mode, align_corners, recompute_scale_factor))
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode, self.align_corners, self.recompute_scale_factor = mode, align_corners, recompute_scale_factor
