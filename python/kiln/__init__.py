"""kiln: a small, fast deep-learning framework with torch-shaped names."""
import builtins as _builtins
import warnings as _warnings

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
               ("arccosh", "acosh"), ("arcsinh", "asinh"), ("arctanh", "atanh"), ("arctan2", "atan2"),
               ("negative", "neg"), ("multiply", "mul"), ("divide", "div"), ("subtract", "sub"),
               ("greater", "gt"), ("greater_equal", "ge"), ("less", "lt"), ("less_equal", "le"),
               ("not_equal", "ne"), ("fix", "trunc")]:
    setattr(Tensor, _n, getattr(Tensor, _t))
    if hasattr(Tensor, _t + "_"):  # and the in-place form (torch's x.arccos_(), x.multiply_(y), ...)
        setattr(Tensor, _n + "_", getattr(Tensor, _t + "_"))
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


# torch's tensor predicates and small utilities
def is_nonzero(input):
    return input.is_nonzero()


def is_same_size(input, other):
    return input.is_same_size(other)


def is_signed(input):
    return input.is_signed()


def is_floating_point(input):
    return input.is_floating_point()


def is_complex(input):
    return input.is_complex()


def resolve_conj(input):
    return input  # (kiln's conj materialises: no tensor carries a pending conjugation)


def resolve_neg(input):
    return input  # (nor a pending negation)


def unravel_index(indices, shape):
    """The coordinates of flat indices in `shape` (an int or a sequence), a tuple of int64 tensors."""
    if not isinstance(indices, Tensor):
        raise AttributeError(f"'{type(indices).__name__}' object has no attribute 'is_complex'")
    if isinstance(shape, _builtins.int):
        shape = (shape,)
    elif not isinstance(shape, (tuple, list, Size)):
        raise TypeError(f"expected 'shape' to be int or sequence of ints, but got {type(shape)}")
    for d in shape:
        if isinstance(d, _builtins.bool) or not isinstance(d, _builtins.int):
            raise TypeError(f"expected 'shape' sequence to only contain ints, but got {type(d)}")
    return tuple(_C.unravel_index(indices, list(shape)))


def empty_strided(size, stride, *, dtype=None, device=None, requires_grad=False, **_ignored):
    """An uninitialised tensor with the given strides (its storage spans what they reach)."""
    size, stride = tuple(size), tuple(stride)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} vs {len(stride)}")
    span = 1 if _builtins.all(s > 0 for s in size) else 0
    for n, st in zip(size, stride):
        if n == 0:
            span = 0
        elif st < 0:
            raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: "
                               f"{list(stride)}")
        else:
            span += (n - 1) * st if span else 0
    base = empty(span, dtype=dtype, device=device)
    t = base.as_strided(size, stride)
    return t.requires_grad_() if requires_grad else t


def randint_like(input, low=None, high=None, *, dtype=None, generator=None, requires_grad=False, **_ignored):
    """torch.randint_like(input, high) or (input, low, high): input's shape and (dense) strides, its dtype
    unless given; the bounds are checked against the dtype as random_ checks them."""
    if high is None:
        if low is None:
            raise TypeError("randint_like() missing 1 required positional arguments: \"high\"")
        low, high = 0, low
    shape, stride = tuple(input.shape), tuple(input.stride())
    n = input.numel()
    dense = n > 0 and _builtins.all(st > 0 for st in stride) and \
        1 + _builtins.sum((d - 1) * st for d, st in zip(shape, stride)) == n
    dt = dtype if dtype is not None else input.dtype
    t = empty_strided(shape, stride, dtype=dt) if dense else empty(shape, dtype=dt)
    t.random_(low, high, generator=generator)
    return t.requires_grad_() if requires_grad else t


def cond(pred, true_fn, false_fn, operands=()):
    """torch.cond run eagerly: true_fn(*operands) if pred else false_fn(*operands); pred a bool or a
    one-element tensor."""
    if isinstance(pred, Tensor):
        if pred.numel() != 1:
            raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got {pred}.")
        pred = _builtins.bool(pred.item())
    elif not isinstance(pred, (_builtins.bool, _builtins.int, _builtins.float)):
        raise RuntimeError(f"Expected pred to be bool or tensor, but got {pred}.")
    if not callable(true_fn) or not callable(false_fn):
        raise RuntimeError("Expect both branches to be callable.")
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError(f"Expect operands to be a tuple of possibly nested dict/list/tuple that only "
                           f"consists of tensor leaves, but got {operands}.")
    return true_fn(*operands) if pred else false_fn(*operands)


_chain_matmul_warned = False


def chain_matmul(*matrices, out=None):
    """Deprecated in torch: linalg.multi_dot of two-dimensional matrices (warns once)."""
    global _chain_matmul_warned
    if not _chain_matmul_warned:
        _chain_matmul_warned = True
        _warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                       "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than "
                       "multiple parameters.", stacklevel=2)
    if len(matrices) == 0:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        if m.dim() != 2:
            raise RuntimeError(f"Tensor dimension is {m.dim()}, expected 2 instead.")
    r = matrices[0].clone() if len(matrices) == 1 else linalg.multi_dot(list(matrices))
    if out is None:
        return r
    if tuple(out.shape) != tuple(r.shape):
        out.resize_(r.shape)
    return out.copy_(r)


# Tensor methods torch has that are aliases or predicates here
def _is_nonzero(self):
    n = self.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return _builtins.bool(self.item() != 0)


def _is_signed(self):
    # torch: every dtype but the unsigned integers, bool and float8_e8m0fnu
    return str(self.dtype).split(".")[-1] not in ("uint8", "uint16", "uint32", "uint64", "bool", "float8_e8m0fnu")


def _dtype_by_name(name):
    return globals()[name]


# dtypes pickle and copy as themselves (by name), as torch's do: a layer built with dtype= pickles
dtype.__reduce__ = lambda self: (_dtype_by_name, (str(self).split(".")[-1],))
dtype.__copy__ = lambda self: self
dtype.__deepcopy__ = lambda self, memo: self

Tensor.is_nonzero = _is_nonzero
Tensor.is_same_size = lambda self, other: tuple(self.shape) == tuple(other.shape)
Tensor.is_signed = _is_signed
Tensor.type_as = lambda self, other: self.to(other.dtype)
Tensor.resolve_conj = lambda self: self
Tensor.resolve_neg = lambda self: self
Tensor.is_conj = lambda self: False
Tensor.is_neg = lambda self: False
Tensor.isreal = lambda self: _C.isreal(self)
Tensor.unsafe_chunk = lambda self, chunks, dim=0: self.chunk(chunks, dim)
def _unsafe_split(self, split_size, dim=0):
    if isinstance(split_size, _builtins.bool) or not isinstance(split_size, _builtins.int):
        raise TypeError(f"unsafe_split(): argument 'split_size' must be int, not {type(split_size).__name__}")
    return self.split(split_size, dim)


Tensor.unsafe_split = _unsafe_split
Tensor.unsafe_split_with_sizes = lambda self, split_sizes, dim=0: self.split_with_sizes(split_sizes, dim)
Tensor.new_empty_strided = lambda self, size, stride, *, dtype=None, device=None, requires_grad=False, **kw: \
    empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype, requires_grad=requires_grad)


# stft / istft (kiln/ops/stft.cpp) with torch's once-per-process warnings
_stft_warned = set()


def _warn_once(key, message):
    if key not in _stft_warned:
        _stft_warned.add(key)
        _warnings.warn(message, UserWarning, stacklevel=3)


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
         normalized=False, onesided=None, return_complex=None, align_to_window=None):
    if window is None:
        _warn_once("stft-window", "A window was not provided. A rectangular window will be applied,which is known to "
                   "cause spectral leakage. Other windows such as torch.hann_window or torch.hamming_window are "
                   "recommended to reduce spectral leakage.To suppress this warning and use a rectangular window, "
                   "explicitly set `window=torch.ones(n_fft, device=<device>)`.")
    if return_complex is False:
        _warn_once("stft-real", "stft with return_complex=False is deprecated. In a future pytorch release, stft will "
                   "return complex tensors for all inputs, and return_complex=False will raise an error.\nNote: you "
                   "can still call torch.view_as_real on the complex output to recover the old return format.")
    return _C.stft(input, n_fft, hop_length, win_length, window, center, pad_mode, normalized, onesided,
                   return_complex, align_to_window)


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,
          onesided=None, length=None, return_complex=False):
    if window is None:
        _warn_once("istft-window", "A window was not provided. A rectangular window will be applied.Please provide "
                   "the same window used by stft to make the inversion lossless.To suppress this warning and use a "
                   "rectangular window, explicitly set `window=torch.ones(n_fft, device=<device>)`.")
    if length is not None and input.dim() in (2, 3):
        hop = hop_length if hop_length is not None else n_fft // 4
        out_len = n_fft + hop * (input.shape[-1] - 1)
        if (n_fft // 2 if center else 0) + length > out_len:
            _warn_once("istft-length", "The length of signal is shorter than the length parameter. Result is being "
                       "padded with zeros in the tail. Please check your center and hop_length settings")
    return _C.istft(input, n_fft, hop_length, win_length, window, center, normalized, onesided, length,
                    return_complex)


Tensor.stft = stft
Tensor.istft = istft


from . import hub  # noqa: E402,F401
from ._compat_functions import *  # noqa: E402,F401,F403
from ._lowrank import svd_lowrank, pca_lowrank  # noqa: E402,F401
from .func import vmap  # noqa: E402,F401

_tensor_protocol.wrap_methods()  # last: every Tensor method is in place

# Two OpenMP runtimes in one process (say libgomp and Intel's libiomp5, through another library)
# run two thread pools on the same CPUs: warn once (RuntimeWarning). set_num_threads checks again.
_C._check_openmp_runtimes()
