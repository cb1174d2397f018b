"""kiln.nn.functional: torch.nn.functional names backed by kiln's C++ ops."""
import warnings as _warnings

from .. import _C

linear = _C.linear
bilinear = _C.bilinear
layer_norm = _C.layer_norm
rms_norm = _C.rms_norm
dropout = _C.dropout

gelu = _C.gelu
softplus = _C.softplus
softsign = _C.softsign
hardshrink = _C.hardshrink
softshrink = _C.softshrink
tanhshrink = _C.tanhshrink
glu = _C.glu
logsigmoid = _C.logsigmoid
sigmoid = _C.sigmoid
tanh = _C.tanh
normalize = _C.normalize
cosine_similarity = _C.cosine_similarity
pairwise_distance = _C.pairwise_distance
pdist = _C.pdist
pixel_shuffle = _C.pixel_shuffle
pixel_unshuffle = _C.pixel_unshuffle
prelu = _C.prelu
local_response_norm = _C.local_response_norm


# ---- activations with torch's `inplace` argument and in-place forms ------------------------------------
def _in_place(input, result):
    """Writes an activation's result into input (torch's relu_ / elu_ / ...). The activation ran on a
    copy, so what its gradient saved is not the tensor overwritten here."""
    return input.copy_(result)


def relu(input, inplace=False):
    return input.relu_() if inplace else _C.relu(input)


def relu_(input):
    return input.relu_()


def relu6(input, inplace=False):
    return _in_place(input, _C.relu6(input.clone())) if inplace else _C.relu6(input)


def elu(input, alpha=1.0, inplace=False):
    return elu_(input, alpha) if inplace else _C.elu(input, alpha)


def elu_(input, alpha=1.0):
    return _in_place(input, _C.elu(input.clone(), alpha))


def selu(input, inplace=False):
    return selu_(input) if inplace else _C.selu(input)


def selu_(input):
    return _in_place(input, _C.selu(input.clone()))


def celu(input, alpha=1.0, inplace=False):
    return celu_(input, alpha) if inplace else _C.celu(input, alpha)


def celu_(input, alpha=1.0):
    return _in_place(input, _C.celu(input.clone(), alpha))


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return leaky_relu_(input, negative_slope) if inplace else _C.leaky_relu(input, negative_slope)


def leaky_relu_(input, negative_slope=0.01):
    return _in_place(input, _C.leaky_relu(input.clone(), negative_slope))


def silu(input, inplace=False):
    return _in_place(input, _C.silu(input.clone())) if inplace else _C.silu(input)


def mish(input, inplace=False):
    return _in_place(input, _C.mish(input.clone())) if inplace else _C.mish(input)


def hardsigmoid(input, inplace=False):
    return _in_place(input, _C.hardsigmoid(input.clone())) if inplace else _C.hardsigmoid(input)


def hardswish(input, inplace=False):
    return _in_place(input, _C.hardswish(input.clone())) if inplace else _C.hardswish(input)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:  # torch.nn.functional.hardtanh's check
        raise ValueError(f"min_val cannot be greater than max_val, got min_val={min_val} and max_val={max_val}")
    return hardtanh_(input, min_val, max_val) if inplace else _C.hardtanh(input, min_val, max_val)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return _in_place(input, _C.hardtanh(input.clone(), min_val, max_val))


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    return rrelu_(input, lower, upper, training) if inplace else _C.rrelu(input, lower, upper, training)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return _in_place(input, _C.rrelu(input.clone(), lower, upper, training, generator=generator))


def threshold_(input, threshold, value):
    return input.masked_fill_(input <= threshold, value)


channel_shuffle = _C.channel_shuffle
native_channel_shuffle = _C.native_channel_shuffle


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: dropped values take SELU's negative saturation and an affine map keeps
    the mean and variance."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    r = _C.alpha_dropout(input, p, training)
    return input.copy_(r) if inplace and r is not input else r


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout of whole channels of (N, C, *)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    r = _C.feature_alpha_dropout(input, p, training)
    return input.copy_(r) if inplace and r is not input else r


def threshold(input, threshold, value, inplace=False):
    """torch.nn.functional.threshold: value where input <= threshold; inplace=True writes input (torch's
    threshold_, with its gradient: zero where the value was written)."""
    if inplace:
        return input.masked_fill_(input <= threshold, value)
    return _C.threshold(input, threshold, value)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    return _C.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def softmax(input, dim=None, dtype=None):
    return _C.softmax(input, dim, dtype)


def log_softmax(input, dim=None, dtype=None):
    return _C.log_softmax(input, dim, dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """torch.nn.functional.softmin: softmax of -input."""
    return _C.softmax(-input, dim, dtype)


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _feature_dropout(input, p, training, inplace, unbatched=False):
    result = _C.feature_dropout(input.unsqueeze(0) if unbatched else input, p, training)
    if unbatched:
        result = result.squeeze(0)
    if inplace and result is not input:
        return input.copy_(result)
    return result


def dropout1d(input, p=0.5, training=True, inplace=False):
    """torch.nn.functional.dropout1d: whole channels of (N, C, L) or (C, L) zeroed while training."""
    _check_p(p)
    d = input.dim()
    if d not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {d}D input. Note that dropout1d "
                           "exists to provide channel-wise dropout on inputs with 1 spatial dimension, a channel "
                           "dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _feature_dropout(input, p, training, inplace, unbatched=d == 2)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """torch.nn.functional.dropout2d: whole channels of (N, C, H, W) zeroed while training; a 3-D input is
    read as (N, C, L) (torch's rule, with its warning)."""
    _check_p(p)
    d = input.dim()
    if d not in (3, 4):
        _warnings.warn(f"dropout2d: Received a {d}-D input to dropout2d, which is deprecated and will result in an "
                       "error in a future release. To retain the behavior and silence this warning, please use "
                       "dropout instead. Note that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                       "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D "
                       "inputs).")
    if d == 3:
        _warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                       "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                       "This behavior will change in a future release to interpret the input as one without a batch "
                       "dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please "
                       "switch to using dropout1d instead.")
    return _feature_dropout(input, p, training, inplace)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """torch.nn.functional.dropout3d: whole channels of (N, C, D, H, W) or (C, D, H, W) zeroed while training."""
    _check_p(p)
    d = input.dim()
    if d not in (4, 5):
        _warnings.warn(f"dropout3d: Received a {d}-D input to dropout3d, which is deprecated and will result in an "
                       "error in a future release. To retain the behavior and silence this warning, please use "
                       "dropout instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                       "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D "
                       "inputs).")
    return _feature_dropout(input, p, training, inplace, unbatched=d != 5)  # (torch's: every rank but 5)


def pad(input, pad, mode="constant", value=None):
    """torch.nn.functional.pad: modes constant (any number of dims, negative pads crop), reflect,
    replicate and circular (the last 1-3 dims of a (batched) input)."""
    return _C._pad(input, pad, mode, value)


def one_hot(tensor, num_classes=-1):
    return _C._one_hot(tensor, num_classes)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """torch.nn.functional.embedding; max_norm renormalises the referenced rows of weight in place."""
    if padding_idx is not None:
        if padding_idx > 0:
            if padding_idx >= weight.size(0):
                raise AssertionError("Padding_idx must be within num_embeddings")
        elif padding_idx < 0:
            if padding_idx < -weight.size(0):
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = weight.size(0) + padding_idx
    else:
        padding_idx = -1
    if max_norm is not None:
        input = input.contiguous()
        _C.embedding_renorm_(weight, input, max_norm, norm_type)
    return _C.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)


# ---- convolution, pooling, upsampling (kiln/ops/conv.cpp, pool.cpp, upsample.cpp) ----------------------
# torch.nn.functional's signatures; the work, argument checks and torch's error types are in C++.
conv1d = _C.conv1d
conv2d = _C.conv2d
conv3d = _C.conv3d
conv_transpose1d = _C.conv_transpose1d
conv_transpose2d = _C.conv_transpose2d
conv_transpose3d = _C.conv_transpose3d
avg_pool1d = _C.avg_pool1d
avg_pool2d = _C.avg_pool2d


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        return _C.max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return _C.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        return _C.max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return _C.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        return _C.max_pool3d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return _C.max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode)


max_pool1d_with_indices = _C.max_pool1d_with_indices
max_pool2d_with_indices = _C.max_pool2d_with_indices
max_pool3d_with_indices = _C.max_pool3d_with_indices
avg_pool3d = _C.avg_pool3d


def adaptive_avg_pool1d(input, output_size):
    return _C.adaptive_avg_pool1d(input, output_size)


def _keep_none(input, output_size):
    """A None entry of output_size keeps that input size."""
    if isinstance(output_size, (tuple, list)) and any(v is None for v in output_size):
        sizes = input.shape[-len(output_size):] if input.dim() >= len(output_size) else [None] * len(output_size)
        output_size = tuple(s if v is None else v for v, s in zip(output_size, sizes))
    return output_size


def adaptive_avg_pool2d(input, output_size):
    return _C.adaptive_avg_pool2d(input, _keep_none(input, output_size))


def adaptive_avg_pool3d(input, output_size):
    return _C.adaptive_avg_pool3d(input, _keep_none(input, output_size))


def adaptive_max_pool1d(input, output_size, return_indices=False):
    r = _C.adaptive_max_pool1d(input, output_size)
    return r if return_indices else r[0]


def adaptive_max_pool2d(input, output_size, return_indices=False):
    r = _C.adaptive_max_pool2d(input, _keep_none(input, output_size))
    return r if return_indices else r[0]


def adaptive_max_pool3d(input, output_size, return_indices=False):
    r = _C.adaptive_max_pool3d(input, _keep_none(input, output_size))
    return r if return_indices else r[0]


adaptive_max_pool1d_with_indices = _C.adaptive_max_pool1d
adaptive_max_pool2d_with_indices = _C.adaptive_max_pool2d


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p)^(1/p); norm_type inf / -inf: the max / min of |x|."""
    if norm_type == 0:  # (torch's 1.0 / norm_type)
        raise ZeroDivisionError("float division by zero")
    return _C._lp_pool(1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    if norm_type == 0:  # (torch's 1.0 / norm_type)
        raise ZeroDivisionError("float division by zero")
    return _C._lp_pool(2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    if norm_type == 0:  # (torch's 1.0 / norm_type)
        raise ZeroDivisionError("float division by zero")
    return _C._lp_pool(3, input, norm_type, kernel_size, stride, ceil_mode)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Places each value at its max_pool1d index in a zero output (output_size: the default or within a
    stride of it)."""
    return _C._max_unpool(1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _C._max_unpool(2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _C._max_unpool(3, input, indices, kernel_size, stride, padding, output_size)


def _fractional_max_pool(nd, input, kernel_size, output_size, output_ratio, return_indices, _random_samples):
    name = f"fractional_max_pool{nd}d"
    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an output_ratio")

    def tup(v):
        return tuple(v) if isinstance(v, (tuple, list)) else (v,) * nd
    if output_size is None:
        # (torch's functional form fails on a single ratio; kiln takes it for every dimension, as the
        # module does)
        ratio = tup(output_ratio)
        output_size = [int(input.size(-nd + d) * ratio[d]) for d in range(nd)]
    out, indices = _C._fractional_max_pool(nd, input, list(tup(kernel_size)), list(tup(output_size)),
                                            _random_samples)
    return (out, indices) if return_indices else out


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """Max over pseudo-random windows (one sample per plane and dimension, _random_samples (N, C, 2) in
    [0, 1) in input's dtype, drawn when not given) to output_size, or output_ratio times the input's size."""
    return _fractional_max_pool(2, input, kernel_size, output_size, output_ratio, return_indices,
                                _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    return _fractional_max_pool(3, input, kernel_size, output_size, output_ratio, return_indices,
                                _random_samples)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    return _fractional_max_pool(2, input, kernel_size, output_size, output_ratio, True, _random_samples)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    return _fractional_max_pool(3, input, kernel_size, output_size, output_ratio, True, _random_samples)
adaptive_max_pool3d_with_indices = _C.adaptive_max_pool3d


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    return _C._unfold(input, kernel_size, dilation, padding, stride)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    return _C._fold(input, output_size, kernel_size, dilation, padding, stride)


_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                  "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                  "grid_sample for details.")


def affine_grid(theta, size, align_corners=None):
    if align_corners is None:
        _warnings.warn(_ALIGN_WARNING)
        align_corners = False
    return _C._nn.affine_grid(theta, list(size), align_corners)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    if align_corners is None:
        _warnings.warn(_ALIGN_WARNING)
        align_corners = False
    return _C._nn.grid_sample(input, grid, mode, padding_mode, align_corners)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    if eps != 1e-10:
        _warnings.warn("`eps` parameter is deprecated and has no effect.")
    return _C._nn.gumbel_softmax(logits, float(tau), hard, dim)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                antialias=False):
    """modes 'nearest' (torch's floor rule), 'linear' (3-D input) and 'bilinear' (4-D input)."""
    return _C._interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    _warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    _warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                   stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    _warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                   stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---- losses (kiln/nn/loss.h, bound in python/src/bind_loss.cpp) ---------------------------------------
# The work and torch's argument checks are in C++; here only torch's signatures: the legacy
# size_average / reduce arguments and the warnings torch's Python layer emits.


def _legacy_reduction(size_average, reduce, emit_warning=True):
    """torch's _Reduction.legacy_get_string."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if size_average and reduce:
        ret = "mean"
    elif reduce:
        ret = "sum"
    else:
        ret = "none"
    if emit_warning:
        _warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{ret}' instead.",
                       stacklevel=3)
    return ret


def _reduction(size_average, reduce, reduction):
    if size_average is not None or reduce is not None:
        return _legacy_reduction(size_average, reduce)
    if reduction == "elementwise_mean":
        _warnings.warn("reduction='elementwise_mean' is deprecated. Please use reduction='mean' instead.",
                       stacklevel=3)
        return "mean"
    return reduction


def _warn_broadcast(input, target):
    if tuple(target.shape) != tuple(input.shape):
        _warnings.warn(f"Using a target size ({tuple(target.shape)}) that is different to the input size "
                       f"({tuple(input.shape)}). This will likely lead to incorrect results due to broadcasting. "
                       "Please ensure they have the same size.", stacklevel=3)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    return _C._cross_entropy(input, target, weight, ignore_index, _reduction(size_average, reduce, reduction),
                             label_smoothing)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    return _C._nll_loss(input, target, weight, ignore_index, _reduction(size_average, reduce, reduction))


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _warn_broadcast(input, target)
    return _C._mse_loss(input, target, _reduction(size_average, reduce, reduction), weight)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _warn_broadcast(input, target)
    return _C._l1_loss(input, target, _reduction(size_average, reduce, reduction), weight)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    _warn_broadcast(input, target)
    return _C._smooth_l1_loss(input, target, _reduction(size_average, reduce, reduction), beta)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    _warn_broadcast(input, target)
    return _C._huber_loss(input, target, reduction, delta, weight)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    return _C._binary_cross_entropy(input, target, weight, _reduction(size_average, reduce, reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    return _C._binary_cross_entropy_with_logits(input, target, weight, _reduction(size_average, reduce, reduction),
                                                pos_weight)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    elif reduction == "mean":
        _warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                       "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                       "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                       stacklevel=2)
    return _C._kl_div(input, target, reduction, log_target)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    return _C._cosine_embedding_loss(input1, input2, target, margin, _reduction(size_average, reduce, reduction))


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    return _C._margin_ranking_loss(input1, input2, target, margin, _reduction(size_average, reduce, reduction))


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    return _C._poisson_nll_loss(input, target, log_input, full, eps, _reduction(size_average, reduce, reduction))


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """var: a tensor (input's shape, input's shape without its last dim, or one size differing by a 1)
    or a non-negative number."""
    return _C._gaussian_nll_loss(input, target, var, full, eps, reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    return _C._hinge_embedding_loss(input, target, margin, _reduction(size_average, reduce, reduction))


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    return _C._soft_margin_loss(input, target, _reduction(size_average, reduce, reduction))


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    return _C._multilabel_soft_margin_loss(input, target, weight, _reduction(size_average, reduce, reduction))


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    return _C._multi_margin_loss(input, target, p, margin, weight, _reduction(size_average, reduce, reduction))


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    return _C._multilabel_margin_loss(input, target, _reduction(size_average, reduce, reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    return _C._triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                   _reduction(size_average, reduce, reduction))


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0,
                                      swap=False, reduction="mean"):
    """distance_function(x1, x2) -> Tensor of distances; None: pairwise_distance."""
    return _C._triplet_margin_with_distance_loss(anchor, positive, negative, distance_function, margin, swap,
                                                 reduction)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """input_lengths / target_lengths: integer tensors or tuples of ints."""
    return _C._ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity)


# ---- attention ------------------------------------------------------------------------------------
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(Q K^T * scale + mask) V with kiln's fused, memory-efficient CPU kernel (and backward)."""
    return _C.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale=scale,
                                           enable_gqa=enable_gqa)


# ---- normalisation / bags / attention (kiln/nn/norm_layers.cpp, attention.cpp) ----------------------
batch_norm = _C.batch_norm


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    if num_groups == 0 and input.dim() >= 2:  # torch's class: its Python front end divides by num_groups
        raise ZeroDivisionError(f"[group_norm] integer division or modulo by zero: num_groups=0 for input of shape "
                                f"{tuple(input.shape)}")
    return _C.group_norm(input, num_groups, weight, bias, eps)


embedding_bag = _C.embedding_bag
multi_head_attention_forward = _C.multi_head_attention_forward


# ---- scaled float8 matrix products (kiln/ops/scaled_mm.cpp) -----------------------------------------
import enum as _enum  # noqa: E402


class ScalingType(_enum.IntEnum):
    """How a float8 operand's scales are laid out (torch.nn.functional.ScalingType). The CPU takes
    TensorWise (one float32 scale) and RowWise (one per row of A, one per column of B)."""
    TensorWise = 0
    RowWise = 1
    BlockWise1x16 = 2
    BlockWise1x32 = 3
    BlockWise1x128 = 4
    BlockWise128x128 = 5


class SwizzleType(_enum.IntEnum):
    """The order of a scale tensor's elements (torch.nn.functional.SwizzleType); the CPU reads scales
    in plain order whatever is given, as torch's CPU path does."""
    NO_SWIZZLE = 0
    SWIZZLE_32_4_4 = 1


def _scaling_error(mat_a, mat_b, scale_a, scale_b):
    m = mat_a.shape[0] if mat_a.dim() > 0 else 1
    n = mat_b.shape[1] if mat_b.dim() > 1 else 1
    return ValueError(
        "Invalid scaling configuration.\n- For TensorWise scaling, a and b should be float8, scales should be "
        "float and singletons.\n- For RowWise scaling, a and b should be float8, scales should be float, scale_a "
        f"should be ({m}, 1) and scale_b should be (1, {n}), and both should be contiguous.\nGot "
        f"mat_a.dtype()={mat_a.dtype}, scale_a.size()={list(getattr(scale_a, 'shape', []))}, "
        f"mat_b.dtype()={mat_b.dtype} and scale_b.size()={list(getattr(scale_b, 'shape', []))}")


def scaled_mm(mat_a, mat_b, scale_a, scale_recipe_a, scale_b, scale_recipe_b, swizzle_a=None, swizzle_b=None,
              bias=None, output_dtype=_C.bfloat16, contraction_dim=(), use_fast_accum=False):
    """mat_a @ mat_b for float8 operands with their scales (torch.nn.functional.scaled_mm): TensorWise
    or RowWise recipes, on kiln._scaled_mm (differentiable in mat_a, mat_b and bias). The checks and
    the call are C++'s kiln::nn::functional::scaled_mm; here only torch's one-element lists and enums
    are unwrapped."""
    def one(x):
        if isinstance(x, (list, tuple)):
            if len(x) != 1:
                raise _scaling_error(mat_a, mat_b, scale_a, scale_b)
            return x[0]
        return x

    def recipe(r):
        r = one(r)
        if not isinstance(r, ScalingType):  # torch reads the enum's .value
            raise AttributeError(f"'{type(r).__name__}' object has no attribute 'value'")
        return int(r)
    def swizzle(z):
        z = one(z)
        if z is not None and not isinstance(z, SwizzleType):
            raise AttributeError(f"'{type(z).__name__}' object has no attribute 'value'")
        return None if z is None else int(z)
    scale_a, scale_b = one(scale_a), one(scale_b)
    recipe_a, recipe_b = recipe(scale_recipe_a), recipe(scale_recipe_b)
    return _C._nn.scaled_mm(mat_a, mat_b, scale_a, recipe_a, scale_b, recipe_b, swizzle(swizzle_a), swizzle(swizzle_b),
                            bias, output_dtype, list(contraction_dim), use_fast_accum)


def grouped_mm(mat_a, mat_b, *, offs=None, bias=None, out_dtype=None):
    """The grouped matrix multiply of mixture-of-experts layers (torch.nn.functional.grouped_mm):
    torch's four layouts with int32 cumulative end offsets; any strides, bias (G, N) (3D x 2D: (N,)),
    zeros past offs[-1]; differentiable in mat_a, mat_b and bias."""
    return _C._grouped_mm(mat_a, mat_b, offs=offs, bias=bias, out_dtype=out_dtype)


# float8 quantisation (kiln/nn/float8.h): (q, scale) with q = x / scale in float8 and scale = amax / the
# format's largest value, per tensor or per row (rowwise=True: scale (..., 1)); and q * scale back.
quantize_float8 = _C._nn.quantize_float8
dequantize_float8 = _C._nn.dequantize_float8
