"""kiln.nn.functional: torch.nn.functional names backed by kiln's C++ ops."""
from .. import _C

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
