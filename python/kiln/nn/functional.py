"""kiln.nn.functional: torch.nn.functional names backed by kiln's C++ ops."""
from .. import _C

linear = _C.linear
bilinear = _C.bilinear
layer_norm = _C.layer_norm
rms_norm = _C.rms_norm
dropout = _C.dropout

relu = _C.relu
relu6 = _C.relu6
leaky_relu = _C.leaky_relu
elu = _C.elu
selu = _C.selu
celu = _C.celu
gelu = _C.gelu
silu = _C.silu
mish = _C.mish
softplus = _C.softplus
softsign = _C.softsign
hardtanh = _C.hardtanh
hardsigmoid = _C.hardsigmoid
hardswish = _C.hardswish
logsigmoid = _C.logsigmoid
threshold = _C.threshold
sigmoid = _C.sigmoid
tanh = _C.tanh


def softmax(input, dim=None, dtype=None):
    return _C.softmax(input, dim, dtype)


def log_softmax(input, dim=None, dtype=None):
    return _C.log_softmax(input, dim, dtype)


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
conv_transpose1d = _C.conv_transpose1d
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


max_pool1d_with_indices = _C.max_pool1d_with_indices
max_pool2d_with_indices = _C.max_pool2d_with_indices


def adaptive_avg_pool1d(input, output_size):
    return _C.adaptive_avg_pool1d(input, output_size)


def adaptive_avg_pool2d(input, output_size):
    """output_size: int or pair; a None entry keeps that input size."""
    if isinstance(output_size, (tuple, list)) and any(v is None for v in output_size):
        sizes = input.shape[-len(output_size):] if input.dim() >= len(output_size) else [None] * len(output_size)
        output_size = tuple(s if v is None else v for v, s in zip(output_size, sizes))
    return _C.adaptive_avg_pool2d(input, output_size)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                antialias=False):
    """modes 'nearest' (torch's floor rule), 'linear' (3-D input) and 'bilinear' (4-D input)."""
    return _C._interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)
