"""torch functions that are thin over kiln's ops: the functional forms of the in-place methods
(torch.abs_(x) is x.abs_()), the *_copy forms of the view ops (a contiguous copy, as torch's),
and small utilities (nonzero_static, constant_pad_nd, fill, asarray, frombuffer, gradient, the
default device and float32 matmul precision)."""
import builtins as _builtins
import numbers as _numbers

from importlib import import_module as _import_module

from ._C import Tensor

_k = _import_module(__package__)  # the kiln package (still loading here: its names are read at call time)

__all__ = []


def _export(fn, name=None):
    name = name or fn.__name__
    fn.__name__ = fn.__qualname__ = name
    globals()[name] = fn
    __all__.append(name)
    return fn


# ---- torch.<op>_(input, ...): the in-place method ------------------------------------------------
_INPLACE = ("abs_ acos_ acosh_ arccos_ arccosh_ arcsin_ arcsinh_ arctan_ arctanh_ asin_ asinh_ atan_ atanh_ ceil_ "
            "clamp_ clamp_max_ clamp_min_ clip_ conj_physical_ cos_ cosh_ deg2rad_ detach_ erf_ erfc_ exp2_ exp_ "
            "expm1_ fill_ fix_ floor_ frac_ gcd_ index_put_ lcm_ ldexp_ log10_ log1p_ log2_ log_ logit_ nan_to_num_ "
            "neg_ negative_ rad2deg_ reciprocal_ round_ rsqrt_ sigmoid_ sin_ sinh_ sqrt_ square_ tan_ tanh_ "
            "trunc_ xlogy_ zero_").split()


def _inplace(name):
    def fn(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    return fn


for _n in _INPLACE:
    _export(_inplace(_n), _n)


def _addmv_(input, mat, vec, *, beta=1, alpha=1):
    return input.addmv_(mat, vec, beta=beta, alpha=alpha)


_export(_addmv_, "addmv_")


# ---- torch.<view>_copy: the view's values in a new contiguous tensor -----------------------------
def _fresh(t):
    return t.clone(memory_format=_k.contiguous_format)


def _copy_op(name, view):
    def fn(input, *args, out=None, **kwargs):
        r = view(input, *args, **kwargs)
        if isinstance(r, (list, tuple)):
            if out is not None:
                raise TypeError(f"{name}(): out= is not supported here; use the returned tensors")
            return tuple(_fresh(t) for t in r)
        r = _fresh(r)
        if out is None:
            return r
        if out.dtype != r.dtype:
            raise RuntimeError(f"Expected out tensor to have dtype {r.dtype}, but got {out.dtype} instead")
        if tuple(out.shape) != tuple(r.shape):
            out.resize_(r.shape)
        return out.copy_(r)
    return fn


def _slice(input, dim=0, start=None, end=None, step=1):
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    index = [slice(None)] * input.dim()
    index[dim] = slice(start, end, step)
    return input[tuple(index)]


_VIEWS = {
    "alias_copy": lambda x: x,
    "as_strided_copy": lambda x, size, stride, storage_offset=None: x.as_strided(size, stride, storage_offset),
    "detach_copy": lambda x: x.detach(),
    "diagonal_copy": lambda x, offset=0, dim1=0, dim2=1: x.diagonal(offset, dim1, dim2),
    "expand_copy": lambda x, size, *, implicit=False: x.expand(size),
    "permute_copy": lambda x, dims: x.permute(dims),
    "select_copy": lambda x, dim, index: x.select(dim, index),
    "slice_copy": _slice,
    "split_copy": lambda x, split_size, dim=0: x.split(split_size, dim),
    "split_with_sizes_copy": lambda x, split_sizes, dim=0: x.split_with_sizes(split_sizes, dim),
    "squeeze_copy": lambda x, dim=None: x.squeeze() if dim is None else x.squeeze(dim),
    "t_copy": lambda x: x.t(),
    "transpose_copy": lambda x, dim0, dim1: x.transpose(dim0, dim1),
    "unbind_copy": lambda x, dim=0: x.unbind(dim),
    "unfold_copy": lambda x, dimension, size, step: x.unfold(dimension, size, step),
    "unsqueeze_copy": lambda x, dim: x.unsqueeze(dim),
    "view_as_complex_copy": lambda x: _k.view_as_complex(x),
    "view_as_real_copy": lambda x: _k.view_as_real(x),
    "view_copy": lambda x, size: x.view(size),
}
for _n, _v in _VIEWS.items():
    _export(_copy_op(_n, _v), _n)


# ---- small utilities -----------------------------------------------------------------------------
@_export
def detach(input):
    return input.detach()


def _empty_like_strided(t):
    """empty_like with torch's rule: a dense, non-overlapping input's strides kept (any permutation)."""
    order = sorted(range(t.dim()), key=lambda d: (t.stride(d), t.shape[d]))
    expect, dense = 1, True
    for d in order:
        if t.shape[d] != 1 and t.stride(d) != expect:
            dense = False
            break
        expect *= t.shape[d]
    if dense and t.numel() > 0:
        return _k.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype)
    return _k.empty_like(t)


@_export
def fill(input, value):
    """torch.fill: a new tensor like input (its strides too), every element value (a number or a
    0-dim tensor, whose gradient it carries)."""
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} "
                               "dimensions.")
        return _empty_like_strided(input).copy_(value.to(input.dtype).expand(input.shape))
    return _empty_like_strided(input).fill_(value)


@_export
def constant_pad_nd(input, pad, value=0):
    from .nn import functional as F
    return F.pad(input, list(pad), mode="constant", value=value)


@_export
def nonzero_static(input, *, size, fill_value=-1):
    """The first `size` rows of nonzero(input), padded with fill_value: (size, input.dim()) int64."""
    if isinstance(size, _builtins.bool) or not isinstance(size, _numbers.Integral) or size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    if isinstance(fill_value, _builtins.bool) or not isinstance(fill_value, _numbers.Integral):
        raise TypeError(f"nonzero_static(): argument 'fill_value' must be int, not {type(fill_value).__name__}")
    nz = _k.nonzero(input)
    n = nz.shape[0]
    if n >= size:
        return nz[:size].clone()
    pad = _k.full([size - n, input.dim()], fill_value, dtype=nz.dtype)
    return _k.cat([nz, pad], 0)


@_export
def is_conj(input):
    return input.is_conj()


@_export
def is_neg(input):
    return input.is_neg()


@_export
def is_inference(input):
    return input.is_inference() if hasattr(input, "is_inference") else False


@_export
def get_device(input):
    return -1  # (CPU tensors)


_default_device = None


@_export
def get_default_device():
    return _k.device("cpu")


@_export
def set_default_device(device):
    """kiln's only device is the CPU: None or a CPU device is accepted (RuntimeError otherwise)."""
    global _default_device
    if device is not None and str(device).split(":")[0] != "cpu":
        raise RuntimeError(f"set_default_device: kiln has no {str(device)!r} device (kiln runs on the CPU)")
    _default_device = device


_matmul_precision = "highest"


@_export
def get_float32_matmul_precision():
    return _matmul_precision


@_export
def set_float32_matmul_precision(precision):
    """Kept and reported back as torch does; kiln's float32 products are always computed in float32
    (the "highest" precision) whatever is set."""
    global _matmul_precision
    if precision not in ("highest", "high", "medium"):  # (torch warns and keeps the value it had)
        import warnings
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
                      "setFloat32MatmulPrecision call has no effect.", UserWarning, stacklevel=2)
        return
    _matmul_precision = precision


@_export
def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """torch.asarray: a tensor from obj, sharing its memory where it can (a tensor, a NumPy array, a
    buffer) unless copy=True; copy=False raises where sharing is impossible (a dtype change)."""
    import numpy as np
    if isinstance(obj, Tensor):
        t = obj
        if dtype is not None and dtype != t.dtype:
            if copy is False:
                raise ValueError(f"can't alias tensor with dtype '{_dtype_tag(t.dtype)}' into dtype "
                                 f"'{_dtype_tag(dtype)}'.")
            t = t.to(dtype)
        elif copy:
            t = t.clone()
    elif isinstance(obj, np.ndarray):
        t = _k.from_numpy(obj) if obj.dtype.kind in "biufc" and not copy else _k.from_numpy(np.array(obj, copy=True))
        if dtype is not None and dtype != t.dtype:
            if copy is False:
                raise ValueError(f"can't alias tensor with dtype '{_dtype_tag(t.dtype)}' into dtype "
                                 f"'{_dtype_tag(dtype)}'.")
            t = t.to(dtype)
    elif isinstance(obj, (bytes, bytearray, memoryview)):  # (the buffer's bytes, in dtype or the default)
        t = frombuffer(obj, dtype=dtype if dtype is not None else _k.get_default_dtype())
        if copy:
            t = t.clone()
    else:
        if copy is False:
            raise ValueError("can't alias arbitrary sequence into a tensor.")
        t = _k.tensor(obj, dtype=dtype)
    if requires_grad:
        t.requires_grad_()  # (the input itself when nothing was copied, as torch: its graph stays)
    return t


def _dtype_tag(dt):
    names = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
             "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
             "complex64": "ComplexFloat", "complex128": "ComplexDouble"}
    s = str(dt).split(".")[-1]
    return names.get(s, s)


_readonly_warned = False


@_export
def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor over a Python buffer's bytes (no copy: writes show through both ways), torch's
    checks and ValueErrors."""
    import numpy as np
    mv = memoryview(buffer).cast("B")
    length = mv.nbytes
    elsize = _k.empty([0], dtype=dtype).element_size()
    if length <= 0 or count == 0:
        raise ValueError(f"both buffer length ({length}) and count ({count}) must not be 0")
    if offset < 0 or offset >= length:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than buffer length "
                         f"({length} bytes) minus 1")
    if count < 0:
        if (length - offset) % elsize != 0:
            raise ValueError(f"buffer length ({length - offset} bytes) after offset ({offset} bytes) must be a "
                             f"multiple of element size ({elsize})")
        count = (length - offset) // elsize
    elif offset + count * elsize > length:
        raise ValueError(f"requested buffer length ({count} * {elsize} bytes) after offset ({offset} bytes) must "
                         f"not be greater than actual buffer length ({length} bytes)")
    raw = np.frombuffer(mv, dtype=np.uint8, count=count * elsize, offset=offset)
    import warnings
    global _readonly_warned
    if mv.readonly and not _readonly_warned:
        _readonly_warned = True
        warnings.warn("The given buffer is not writable, and PyTorch does not support non-writable tensors. This "
                      "means you can write to the underlying (supposedly non-writable) buffer using the tensor. You "
                      "may want to copy the buffer to protect its data or make it writable before converting it to "
                      "a tensor. This type of warning will be suppressed for the rest of this program.",
                      UserWarning, stacklevel=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = _k.from_numpy(raw).view(dtype)
    if requires_grad:
        t.requires_grad_()
    return t


@_export
def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """torch.gradient: the derivative along each dimension by second-order central differences in the
    interior and first- or second-order one-sided ones at the edges; spacing a number, a list of numbers
    or a list of coordinate tensors (one per dimension)."""
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    nd = input.dim()
    if dim is None:
        dims = list(range(nd))
    else:
        dims = [dim] if isinstance(dim, _numbers.Integral) else list(dim)
        dims = [d + nd if d < 0 else d for d in dims]
        seen = set()
        for d in dims:
            if d in seen:
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
            seen.add(d)
    scalar = isinstance(spacing, _numbers.Number) or (isinstance(spacing, Tensor) and spacing.dim() == 0)
    if scalar:
        spacing = [spacing] * len(dims)
    else:
        spacing = list(spacing)
        if len(spacing) != len(dims):
            if dim is None:
                raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or a list of length "
                                   f"equal to 'self.dim() = {nd}', since dim argument was not given, but got a list "
                                   f"of length {len(spacing)}")
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
                               f"arguments to have the same length, but got a spacing argument of length "
                               f"{len(spacing)} and a dim argument of length {len(dims)}.")
    if not scalar:
        for h in spacing:
            if isinstance(h, Tensor) and h.dim() != 1:
                raise RuntimeError(f"torch.gradient expected each element of spacing to have one dimension, but got "
                                   f"an element with {h.dim()} dimensions!")
    if input.dtype == _k.uint8:
        raise RuntimeError("torch.gradient does not support uint8 input.")
    if input.dtype == _k.bool:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                           "`logical_xor()` operator instead.")
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
    x = input  # (differences in its own dtype, as torch: integers stay exact until the division)
    out = []
    for d, h in zip(dims, spacing):
        n = x.shape[d]
        f = lambda a, b: x.narrow(d, a, b - a)  # noqa: E731  (elements [a, b) along d)
        if isinstance(h, Tensor) and h.dim() == 1:
            if h.shape[0] != n:
                raise RuntimeError(f"torch.gradient expected each tensor to be on the same device and to have the "
                                   f"same length as the dimension {d} of the input ({n}), but got {h.shape[0]}")
            # (the coefficients in the coordinates' dtype, as torch computes them)
            shape = [1] * nd
            shape[d] = -1
            dx = h[1:] - h[:-1]
            hl, hr = dx[:-1], dx[1:]
            a = (-hr / (hl * (hl + hr))).reshape(shape)
            b = ((hr - hl) / (hl * hr)).reshape(shape)
            c = (hl / (hr * (hl + hr))).reshape(shape)
            inner = a * f(0, n - 2) + b * f(1, n - 1) + c * f(2, n)
            if edge_order == 1:
                first = (f(1, 2) - f(0, 1)) / dx[0]
                last = (f(n - 1, n) - f(n - 2, n - 1)) / dx[-1]
            else:
                d1, d2 = dx[0], dx[1]
                first = -(2 * d1 + d2) / (d1 * (d1 + d2)) * f(0, 1) + (d1 + d2) / (d1 * d2) * f(1, 2) - \
                    d1 / (d2 * (d1 + d2)) * f(2, 3)
                d1, d2 = dx[-2], dx[-1]
                last = d2 / (d1 * (d1 + d2)) * f(n - 3, n - 2) - (d2 + d1) / (d1 * d2) * f(n - 2, n - 1) + \
                    (2 * d2 + d1) / (d2 * (d1 + d2)) * f(n - 1, n)
        else:
            h = h.item() if isinstance(h, Tensor) else h
            inner = (f(2, n) - f(0, n - 2)) / (2 * h)
            if edge_order == 1:
                first = (f(1, 2) - f(0, 1)) / h
                last = (f(n - 1, n) - f(n - 2, n - 1)) / h
            else:
                first = (-1.5 * f(0, 1) + 2 * f(1, 2) - 0.5 * f(2, 3)) / h
                last = (0.5 * f(n - 3, n - 2) - 2 * f(n - 2, n - 1) + 1.5 * f(n - 1, n)) / h
        out.append(_k.cat([first, inner, last], d))
    return tuple(out)
