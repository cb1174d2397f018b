"""kiln: a small, fast deep-learning framework with torch-shaped names."""
import builtins as _builtins

from . import _C
from ._C import *  # noqa: F401,F403
from ._C import Tensor, dtype, _weight_norm  # noqa: F401

# torch.linalg's, torch.fft's and torch.special's functions live in their namespaces only, as torch's do
for _n in [_n for _n in dir(_C) if _n.startswith(("linalg_", "fft_", "special_"))]:
    del globals()[_n]

from . import _tensor_protocol  # noqa: E402
_tensor_protocol.install(globals())
from ._finfo import finfo, iinfo  # noqa: E402,F401
from ._C import (use_deterministic_algorithms, are_deterministic_algorithms_enabled,  # noqa: E402,F401
                 is_deterministic_algorithms_warn_only_enabled)
from . import autograd  # noqa: E402,F401
from .autograd import (no_grad, enable_grad, set_grad_enabled, inference_mode,  # noqa: E402,F401
                       is_grad_enabled, is_inference_mode_enabled)
from . import nn  # noqa: E402,F401
from . import linalg  # noqa: E402,F401
from . import fft  # noqa: E402,F401
from . import special  # noqa: E402,F401
from . import func  # noqa: E402,F401
from . import distributions  # noqa: E402,F401
from . import io  # noqa: E402,F401
from . import utils  # noqa: E402,F401
from . import ops  # noqa: E402,F401
from . import optim  # noqa: E402,F401
from . import export  # noqa: E402,F401
from . import onnx  # noqa: E402,F401  (imports the onnx package only when used)
from . import distributed  # noqa: E402,F401
from .serialization import save, load  # noqa: E402,F401
from . import amp  # noqa: E402,F401
from . import testing  # noqa: E402,F401
from . import backends  # noqa: E402,F401
from . import accelerator  # noqa: E402,F401
from . import cuda  # noqa: E402,F401
from . import cpu  # noqa: E402,F401
from ._stream import stream, StreamContext  # noqa: E402,F401
from .graphs import graph, graph_pool_handle, make_graphed_callables  # noqa: E402,F401
from ._compile import compile  # noqa: E402,F401
from .amp import autocast  # noqa: E402,F401
from .amp.autocast_mode import (is_autocast_enabled, set_autocast_enabled, get_autocast_dtype,  # noqa: E402,F401
                                set_autocast_dtype)
from .io import save_file, load_file, safe_open, load_metadata, save_model, load_model  # noqa: E402,F401

__version__ = "0.1.0"

_scaled_mm = _C._scaled_mm  # torch._scaled_mm (float8 products with scales); also kiln.nn.functional.scaled_mm
_grouped_mm = _C._grouped_mm  # torch._grouped_mm (mixture-of-experts products); also kiln.nn.functional.grouped_mm
_fused_baddbmm = _C._fused_baddbmm  # beta * self + alpha * (batch1 @ batch2) rounded once (bfloat16 / float16)
# the samplers kiln.distributions stands on (kiln/ops/random_dist.h), torch's private names
_standard_gamma, _standard_gamma_grad, _sample_dirichlet = _C._standard_gamma, _C._standard_gamma_grad, _C._sample_dirichlet

# torch aliases
absolute = _C.abs
arccos, arcsin, arctan, arctan2 = _C.acos, _C.asin, _C.atan, _C.atan2
arccosh, arcsinh, arctanh = _C.acosh, _C.asinh, _C.atanh
negative = _C.neg
multiply = _C.mul
divide = _C.div
subtract = _C.sub
greater, greater_equal, less, less_equal = _C.gt, _C.ge, _C.lt, _C.le
not_equal = _C.ne
fix = _C.trunc
for _n, _t in [("absolute", "abs"), ("arccos", "acos"), ("arcsin", "asin"), ("arctan", "atan"),
               ("negative", "neg"), ("multiply", "mul"), ("divide", "div"), ("subtract", "sub"),
               ("greater", "gt"), ("greater_equal", "ge"), ("less", "lt"), ("less_equal", "le"),
               ("not_equal", "ne"), ("fix", "trunc")]:
    setattr(Tensor, _n, getattr(Tensor, _t))
del _n, _t


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(t):
    return t.numel()




# out= for the functions whose C++ binding does not take it: the result is computed, checked with
# torch's rule (the result dtype must be castable to out's; for those of _OUT_EXACT_DTYPE, torch's
# nonzero, norm and tensordot, it must be out's), out is resized when its shape differs, and the
# values are copied in. The ops bound from their schemas (kiln._C._Op) take out= natively.
_OUT_FUNCS = ["nonzero", "norm", "tensordot"]
_OUT_EXACT_DTYPE = {"nonzero", "norm", "tensordot"}


def _write_out(name, result, out):
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"{name}(): argument 'out' must be a tuple of {len(result)} Tensors")
        written = [_write_out(name, r, o) for r, o in zip(result, out)]
        return type(result)(*written) if hasattr(result, "_fields") else tuple(written)
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if name in _OUT_EXACT_DTYPE and result.dtype != out.dtype:
        raise RuntimeError(f"[{name}] Expected out tensor to have dtype {result.dtype}, but got {out.dtype} instead")
    if not _C.can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"[{name}] result type {result.dtype} can't be cast to the desired output type "
                           f"{out.dtype}")
    if tuple(out.shape) != tuple(result.shape):
        out.resize_(result.shape)
    out.copy_(result)
    return out




def _with_out(name):
    fn = getattr(_C, name)

    def wrapper(*args, out=None, **kwargs):
        if out is not None and _C.is_grad_enabled() and _builtins.any(
                isinstance(a, Tensor) and a.requires_grad for a in args + tuple(kwargs.values())):
            raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                               "differentiation, but one of the arguments requires grad.")
        result = fn(*args, **kwargs)
        return result if out is None else _write_out(name, result, out)

    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = fn.__doc__
    return wrapper


for _n in _OUT_FUNCS:
    if hasattr(_C, _n) and not isinstance(getattr(_C, _n), _C._Op):  # an op made from its schema takes out=
        globals()[_n] = _with_out(_n)
del _n

Tensor.__module__ = "kiln"
from ._memory_format import (memory_format, contiguous_format, preserve_format, channels_last,  # noqa: E402,F401
                             channels_last_3d, clone)
from . import _memory_format  # noqa: E402
_memory_format._install(Tensor)


# In-place methods return the tensor they were called on, the same Python object (torch's
# `x.add_(1) is x`); the hand-written C++ methods return a new handle on the same tensor (those made
# from a schema, kiln._C._Op, return the object already).
def _returns_self(fn):
    def method(self, *args, **kwargs):
        fn(self, *args, **kwargs)
        return self

    method.__name__ = method.__qualname__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


for _n in [n for n in dir(Tensor) if n.endswith("_") and not n.startswith("_")]:
    if not isinstance(Tensor.__dict__.get(_n), _C._Op):
        setattr(Tensor, _n, _returns_self(getattr(Tensor, _n)))
del _n


# requires_grad= for the factory functions
def _with_requires_grad(fn):
    def wrapper(*args, requires_grad=False, **kwargs):
        t = fn(*args, **kwargs)
        return t.requires_grad_() if requires_grad else t

    wrapper.__name__ = wrapper.__qualname__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


for _n in ["tensor"]:
    if _n in globals():
        globals()[_n] = _with_requires_grad(globals()[_n])
del _n


# torch.functional's varargs front ends over the ops that take a tensor list
def block_diag(*tensors):
    return _C.block_diag(list(tensors))


def cartesian_prod(*tensors):
    return _C.cartesian_prod(list(tensors))


def _atleast(op):
    def fn(*tensors):
        """torch's atleast_Nd: one tensor gives one tensor; several (or a list / tuple of them) a tuple."""
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            tensors = tuple(tensors[0])
        elif len(tensors) == 1:
            return op(tensors[0])
        return tuple(op(t) for t in tensors)
    fn.__name__ = fn.__qualname__ = op.__name__
    return fn


atleast_1d, atleast_2d, atleast_3d = _atleast(_C.atleast_1d), _atleast(_C.atleast_2d), _atleast(_C.atleast_3d)


# torch's top-level in-place forms of i0 and sinc
def i0_(input):
    return input.i0_()


def sinc_(input):
    return input.sinc_()


# torch's top-level loss ops: the functions of kiln.nn.functional, with torch's integer reduction
# (0 'none', 1 'mean', 2 'sum'). Its schemas say reduction=Mean, but its Python argument parser reads
# that default as 0: a call without one is unreduced, which is what torch 2.13 returns and kiln follows.
def _reduction_name(reduction, op):
    """torch's integer reduction: 1 'mean', 2 'sum', any other int 'none' (its kernels test for Mean and Sum)."""
    if isinstance(reduction, _builtins.bool) or not isinstance(reduction, _builtins.int):
        raise TypeError(f"{op}(): argument 'reduction' must be int, not {type(reduction).__name__}")
    return {1: "mean", 2: "sum"}.get(reduction, "none")


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=0):
    red = _reduction_name(reduction, "binary_cross_entropy_with_logits")
    return _C._binary_cross_entropy_with_logits(input, target, weight, red, pos_weight)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    red = _reduction_name(reduction, "cosine_embedding_loss")
    return _C._cosine_embedding_loss(input1, input2, target, margin, red)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    red = _reduction_name(reduction, "margin_ranking_loss")
    return _C._margin_ranking_loss(input1, input2, target, margin, red)


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    return _C._hinge_embedding_loss(input, target, margin, _reduction_name(reduction, "hinge_embedding_loss"))


def kl_div(input, target, reduction=0, *, log_target=False):
    return _C._kl_div(input, target, _reduction_name(reduction, "kl_div"), log_target)


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    red = _reduction_name(reduction, "poisson_nll_loss")
    return _C._poisson_nll_loss(input, target, log_input, full, eps, red)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, reduction=0):
    # (the op: no margin check, which torch makes in F.triplet_margin_loss and the module only)
    _reduction_name(reduction, "triplet_margin_loss")
    return _C._triplet_margin_loss_op(anchor, positive, negative, margin, p, eps, swap, reduction)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0, zero_infinity=False):
    red = _reduction_name(reduction, "ctc_loss")
    return _C._ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, red,
                        zero_infinity)


# torch's top-level in-place activations (kiln.nn.functional's)
def relu_(input):
    return input.relu_()


def celu_(input, alpha=1.0):
    return nn.functional.celu_(input, alpha)


def selu_(input):
    return nn.functional.selu_(input)


def threshold_(input, threshold, value):
    return nn.functional.threshold_(input, threshold, value)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return nn.functional.rrelu_(input, lower, upper, training, generator)


from . import hub  # noqa: E402,F401

_tensor_protocol.wrap_methods()  # last: every Tensor method is in place

# Two OpenMP runtimes in one process (say libgomp and Intel's libiomp5, through another library)
# run two thread pools on the same CPUs: warn once (RuntimeWarning). set_num_threads checks again.
_C._check_openmp_runtimes()
