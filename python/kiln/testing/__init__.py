"""kiln.testing.assert_close: torch.testing.assert_close for kiln tensors, Python numbers and nested
sequences / mappings of them, with torch's default tolerances, checks and messages."""
import collections.abc
import math

from .. import _C
from .._C import Tensor

__all__ = ["assert_close"]

# torch's default (rtol, atol) per dtype; integral and bool dtypes compare exactly
_TOL = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
        "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7),
        "float8_e4m3fn": (0.125, 1e-5), "float8_e5m2": (0.25, 1e-5)}
_NUMBER_DTYPE = {bool: "bool", int: "int64", float: "float64", complex: "complex128"}


def _name(dt):
    return str(dt).split(".")[-1]


def _tol(*dtypes):
    rt = [_TOL.get(d, (0.0, 0.0)) for d in dtypes]
    return max(r for r, _ in rt), max(a for _, a in rt)


def _fail(exc, msg, custom, path):
    if path:
        msg += f"\n\nThe failure occurred for item {''.join(path)}"
    if callable(custom):
        msg = custom(msg)
    elif custom is not None:
        msg = custom
    raise exc(msg)


def _idx(flat, shape):
    idx = []
    for s in reversed(shape):
        idx.append(flat % s if s else 0)
        flat = flat // s if s else 0
    return tuple(reversed(idx))


def _compare_tensors(a, e, rtol, atol, equal_nan, check_dtype, check_stride, custom, path):
    if tuple(a.shape) != tuple(e.shape):
        _fail(AssertionError, f"The values for attribute 'shape' do not match: {a.shape} != {e.shape}.", custom, path)
    if a.device != e.device:
        _fail(AssertionError, f"The values for attribute 'device' do not match: {a.device} != {e.device}.", custom, path)
    if check_dtype and a.dtype != e.dtype:
        _fail(AssertionError, f"The values for attribute 'dtype' do not match: {a.dtype} != {e.dtype}.", custom, path)
    if check_stride and a.stride() != e.stride():
        _fail(AssertionError, f"The values for attribute 'stride()' do not match: {a.stride()} != {e.stride()}.",
              custom, path)
    if rtol is None:
        rtol, atol = _tol(_name(a.dtype), _name(e.dtype))
    if a.dtype != e.dtype:
        common = _C.promote_types(a.dtype, e.dtype)
        a, e = a.to(common), e.to(common)
    a, e = a.detach(), e.detach()
    if a.dtype == _C.bool:
        ok = a == e
    elif a.dtype.is_floating_point or a.dtype.is_complex:
        ok = _C.isclose(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
    else:  # integers: exact unless tolerances were given
        ok = _C.isclose(a.to(_C.float64), e.to(_C.float64), rtol=rtol, atol=atol)
    if bool(ok.all()):
        return
    total, bad = ok.numel(), int((~ok).sum())
    exact = rtol == 0 and atol == 0
    cmp = a.to(_C.float64) if not (a.dtype.is_complex) else a
    ref = e.to(_C.float64) if not (e.dtype.is_complex) else e
    diff = (cmp - ref).abs()
    rel = diff / ref.abs()
    flat_d, flat_r = diff.reshape(-1), rel.reshape(-1)
    flat_d = _C.nan_to_num(flat_d, nan=0.0) if not equal_nan else flat_d
    i_d = int(flat_d.argmax())
    i_r = int(_C.nan_to_num(flat_r, nan=0.0, posinf=math.inf).argmax())
    vd, vr = flat_d[i_d].item(), flat_r[i_r].item()
    if not (a.dtype.is_floating_point or a.dtype.is_complex or a.dtype == _C.bool):
        vd = int(vd) if math.isfinite(vd) else vd
    where_d = f" at index {_idx(i_d, tuple(a.shape))}" if a.dim() else ""
    where_r = f" at index {_idx(i_r, tuple(a.shape))}" if a.dim() else ""
    kind = "equal" if exact else "close"
    msg = (f"Tensor-likes are not {kind}!\n\nMismatched elements: {bad} / {total} ({bad / total * 100:.1f}%)\n"
           f"Greatest absolute difference: {vd}{where_d}" + ("" if exact else f" (up to {atol} allowed)") + "\n"
           f"Greatest relative difference: {vr}{where_r}" + ("" if exact else f" (up to {rtol} allowed)"))
    _fail(AssertionError, msg, custom, path)


def _compare_numbers(a, e, rtol, atol, equal_nan, check_dtype, custom, path):
    if check_dtype and type(a) is not type(e):
        _fail(AssertionError, f"The (d)types do not match: {type(a)} != {type(e)}.", custom, path)
    if isinstance(a, bool) and isinstance(e, bool):
        if a != e:
            _fail(AssertionError, f"Booleans mismatch: {a} is not {e}", custom, path)
        return
    if rtol is None:
        rtol, atol = _tol(_NUMBER_DTYPE[type(a)], _NUMBER_DTYPE[type(e)])
    if a == e or (equal_nan and a != a and e != e):
        return
    diff = abs(a - e)
    if math.isfinite(diff) and diff <= atol + rtol * abs(e):
        return
    rel = diff / abs(e) if e != 0 else math.inf
    kind = "equal" if rtol == 0 and atol == 0 else "close"
    msg = (f"Scalars are not {kind}!\n\nExpected {e} but got {a}.\nAbsolute difference: {diff}"
           + ("" if kind == "equal" else f" (up to {atol} allowed)") + f"\nRelative difference: {rel}"
           + ("" if kind == "equal" else f" (up to {rtol} allowed)"))
    _fail(AssertionError, msg, custom, path)


def _is_number(x):
    return isinstance(x, (int, float, complex)) and not isinstance(x, Tensor)


def _walk(a, e, kw, path):
    if isinstance(a, Tensor) and isinstance(e, Tensor):
        if not kw["allow_subclasses"] and type(a) is not type(e):
            _fail(TypeError, f"No comparison pair was able to handle inputs of type {type(a)} and {type(e)}.",
                  kw["msg"], path)
        return _compare_tensors(a, e, kw["rtol"], kw["atol"], kw["equal_nan"], kw["check_dtype"],
                                kw["check_stride"], kw["msg"], path)
    if _is_number(a) and _is_number(e):
        return _compare_numbers(a, e, kw["rtol"], kw["atol"], kw["equal_nan"], kw["check_dtype"], kw["msg"], path)
    seq = collections.abc.Sequence
    if isinstance(a, seq) and isinstance(e, seq) and not isinstance(a, str) and not isinstance(e, str):
        if len(a) != len(e):
            _fail(AssertionError, f"The length of the sequences mismatch: {len(a)} != {len(e)}", kw["msg"], path)
        for i, (x, y) in enumerate(zip(a, e)):
            _walk(x, y, kw, path + [f"[{i}]"])
        return
    mapping = collections.abc.Mapping
    if isinstance(a, mapping) and isinstance(e, mapping):
        ka, ke = set(a.keys()), set(e.keys())
        if ka != ke:
            _fail(AssertionError, f"The keys of the mappings do not match:\nMissing keys in the actual mapping: "
                  f"{sorted(map(repr, ke - ka))}\nExtra keys in the actual mapping: {sorted(map(repr, ka - ke))}",
                  kw["msg"], path)
        for k in e:
            _walk(a[k], e[k], kw, path + [f"[{k!r}]"])
        return
    if a is None and e is None:
        return
    _fail(TypeError, f"No comparison pair was able to handle inputs of type {type(a)} and {type(e)}.", kw["msg"], path)


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False,
                 check_device=True, check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """Raises AssertionError unless actual and expected are close: |actual - expected| <= atol + rtol *
    |expected| elementwise, after checking shape, device, dtype (check_dtype) and strides (check_stride);
    rtol / atol default to torch's values for the dtypes (exact for integers and bool)."""
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                         f"{'rtol' if rtol is None else 'atol'}.")
    _walk(actual, expected, dict(allow_subclasses=allow_subclasses, rtol=rtol, atol=atol, equal_nan=equal_nan,
                                 check_dtype=check_dtype, check_stride=check_stride, msg=msg), [])
