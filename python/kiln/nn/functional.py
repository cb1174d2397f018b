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
