"""Shared helpers: move tensors between torch and kiln without changing bits or layout, compare."""
import contextlib
import importlib.util
import math
import pathlib

import numpy as np
import pytest
import torch

import kiln

ALL_DTYPES = [
    "bool", "uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
    "float8_e4m3fn", "float8_e5m2",
]
FLOAT_DTYPES = ["float16", "bfloat16", "float32", "float64"]
INT_DTYPES = ["uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
COMPLEX_DTYPES = ["complex64", "complex128"]

# numpy has no bfloat16 / float8: move their bits through an integer view of the same width
_BITS = {"bfloat16": "int16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8",
         "uint16": "int16", "uint32": "int32", "uint64": "int64"}


@contextlib.contextmanager
def kiln_threads(n):
    """kiln on n threads inside the block, the previous count after it."""
    before = kiln.get_num_threads()
    kiln.set_num_threads(n)
    try:
        yield
    finally:
        kiln.set_num_threads(before)


def tdt(name):
    return getattr(torch, name)


def kdt(name):
    return getattr(kiln, name)


def dname(dt):
    return str(dt).split(".")[-1]


def _contig_to_kiln(t):
    name = dname(t.dtype)
    if name in _BITS:
        arr = t.view(tdt(_BITS[name])).numpy()
        return kiln.from_numpy(arr.copy()).view(kdt(name))
    return kiln.from_numpy(t.numpy().copy())


def to_kiln(t):
    """A kiln tensor with the same values, shape, strides and storage offset as torch tensor t."""
    if t.is_contiguous() and t.storage_offset() == 0:
        return _contig_to_kiln(t.contiguous())
    n = t.untyped_storage().nbytes() // t.element_size()
    base = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (n,), (1,))
    kb = _contig_to_kiln(base.clone())
    return kiln.as_strided(kb, tuple(t.shape), tuple(t.stride()), t.storage_offset())


def to_torch(k):
    name = dname(k.dtype)
    k = k.detach().contiguous()
    if name in _BITS:
        arr = k.view(kdt(_BITS[name])).numpy().copy()
        return torch.from_numpy(arr).view(tdt(name))
    return torch.from_numpy(k.numpy().copy())


TOL = {  # (rtol, atol) per dtype, torch.testing's defaults
    "float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7),
    "float8_e4m3fn": (0.125, 1e-3), "float8_e5m2": (0.25, 1e-3),
}


def assert_same(kres, tres, rtol=None, atol=None, exact=False, check_stride=False, msg=""):
    """kiln result vs torch result: type, shape, dtype, values (NaN == NaN)."""
    if isinstance(tres, (tuple, list)):
        assert isinstance(kres, (tuple, list)), f"{msg}: expected a sequence, got {type(kres)}"
        assert len(kres) == len(tres), msg
        for a, b in zip(kres, tres):
            assert_same(a, b, rtol, atol, exact, check_stride, msg)
        return
    if isinstance(tres, torch.Tensor):
        assert isinstance(kres, kiln.Tensor), f"{msg}: expected a Tensor, got {type(kres)}"
        assert dname(kres.dtype) == dname(tres.dtype), f"{msg}: dtype {kres.dtype} != {tres.dtype}"
        assert tuple(kres.shape) == tuple(tres.shape), f"{msg}: shape {tuple(kres.shape)} != {tuple(tres.shape)}"
        got = to_torch(kres)
        name = dname(tres.dtype)
        if name.startswith("float8"):
            got, tres = got.float(), tres.float()
            name = "float8"
        if exact or name not in TOL and name != "float8":
            if tres.dtype.is_floating_point or tres.dtype.is_complex:
                torch.testing.assert_close(got, tres, rtol=0, atol=0, equal_nan=True, msg=msg or None)
            else:
                assert torch.equal(got, tres), f"{msg}: values differ\nkiln  {got}\ntorch {tres}"
            return
        r, a = TOL.get(dname(kres.dtype), (0.125, 1e-3))
        torch.testing.assert_close(got, tres, rtol=rtol if rtol is not None else r,
                                   atol=atol if atol is not None else a, equal_nan=True,
                                   check_dtype=False, msg=msg or None)
        return
    if isinstance(tres, float) and math.isnan(tres):
        assert math.isnan(kres), msg
        return
    assert kres == tres or (isinstance(tres, float) and abs(kres - tres) <= 1e-6 * max(1, abs(tres))), \
        f"{msg}: {kres!r} != {tres!r}"


def run_both(fn, targs, kargs, tkw=None, kkw=None):
    """Runs fn(torch, ...) and fn(kiln, ...). Returns (kres, tres, texc, kexc)."""
    tkw, kkw = tkw or {}, kkw or {}
    texc = kexc = tres = kres = None
    try:
        tres = fn(torch, *targs, **tkw)
    except Exception as e:  # noqa: BLE001
        texc = e
    try:
        kres = fn(kiln, *kargs, **kkw)
    except Exception as e:  # noqa: BLE001
        kexc = e
    return kres, tres, texc, kexc


def _f64(a):
    return a.double() if isinstance(a, torch.Tensor) and a.dtype.is_floating_point else a


def reference_f64(fn, *targs, like=None, **tkw):
    """fn's result computed by torch in float64 on the same values, then rounded to the dtype of `like`
    (torch's own result): an answer that does not depend on which kernels torch picks on this CPU
    (its vector float32 kernels differ between ISAs in special values and in the last ulps)."""
    res = fn(torch, *[_f64(a) for a in targs], **tkw)
    if isinstance(like, (tuple, list)):
        return type(like)(r.to(t.dtype) if isinstance(t, torch.Tensor) else r for r, t in zip(res, like))
    return res.to(like.dtype) if isinstance(like, torch.Tensor) else res


def check(fn, *targs, rtol=None, atol=None, exact=False, msg="", ref=None, **tkw):
    """Runs fn on torch inputs and on their kiln copies; results or exception types must agree.
    ref="float64": kiln's values are compared with reference_f64 (torch in float64) instead of torch's
    result in the input dtype, for ops whose torch answer depends on torch's ISA; dtypes, shapes and
    exceptions still come from torch's own call."""
    kargs = [to_kiln(a) if isinstance(a, torch.Tensor) else
             ([to_kiln(x) for x in a] if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor) else a)
             for a in targs]
    kkw = {k: (kdt(dname(v)) if isinstance(v, torch.dtype) else v) for k, v in tkw.items()}
    kres, tres, texc, kexc = run_both(fn, targs, kargs, tkw, kkw)
    if texc is not None:
        assert kexc is not None, f"{msg}: torch raised {type(texc).__name__}({texc}) but kiln returned {kres}"
        assert isinstance(kexc, type(texc)) or (isinstance(texc, RuntimeError) and isinstance(kexc, RuntimeError)), \
            f"{msg}: torch raised {type(texc).__name__}({texc}), kiln raised {type(kexc).__name__}({kexc})"
        return None
    if kexc is not None:
        raise AssertionError(f"{msg}: kiln raised {type(kexc).__name__}: {kexc}; torch gave {tres}") from kexc
    if ref == "float64":
        tres = reference_f64(fn, *targs, like=tres, **tkw)
    else:
        assert ref is None, f"unknown reference {ref!r}"
    assert_same(kres, tres, rtol, atol, exact, msg=msg)
    return kres


def make(shape, dtype, low=-5.0, high=5.0, seed=0, special=False):
    """Deterministic torch tensor of a dtype; `special` sprinkles NaN, ±inf, -0.0 and extremes."""
    g = torch.Generator().manual_seed(seed)
    name = dname(dtype) if isinstance(dtype, torch.dtype) else dtype
    dt = tdt(name)
    if name == "bool":
        return torch.rand(shape, generator=g) > 0.5
    if name in INT_DTYPES:
        info = torch.iinfo(dt)
        lo, hi = max(int(low), info.min), min(int(high), info.max)
        if name in ("uint16", "uint32", "uint64"):
            return torch.randint(max(lo, 0), max(hi, 1) + 1, shape, generator=g, dtype=torch.int64).to(dt)
        return torch.randint(lo, hi + 1, shape, generator=g, dtype=torch.int64).to(dt)
    if name in COMPLEX_DTYPES:
        re = torch.empty(shape, dtype=torch.float64).uniform_(low, high, generator=g)
        im = torch.empty(shape, dtype=torch.float64).uniform_(low, high, generator=g)
        return torch.complex(re, im).to(dt)
    x = torch.empty(shape, dtype=torch.float64).uniform_(low, high, generator=g)
    if special and x.numel() >= 8:
        flat = x.view(-1)
        vals = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1e-30, -1e30, 0.5]
        for i, v in enumerate(vals):
            flat[(i * 7) % flat.numel()] = v
    return x.to(dt)


def layouts(shape, dtype, **kw):
    """(label, tensor) for contiguous, transposed, step-sliced and expanded layouts of a 2-D shape."""
    r, c = shape
    out = [("contig", make((r, c), dtype, **kw))]
    out.append(("transposed", make((c, r), dtype, **kw).t()))
    out.append(("sliced", make((r * 2, c + 1), dtype, **kw)[::2, 1:]))
    out.append(("expanded", make((1, c), dtype, **kw).expand(r, c)))
    return out


def load_quickstart():
    """examples/quickstart.py as a module (its model and loss, for tests that run them)."""
    root = pathlib.Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("quickstart", root / "examples" / "quickstart.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def to_kiln_tree(x):
    """kiln copies of every torch tensor (same values, strides, offset; requires_grad kept) and dtype in a
    nested argument (lists, tuples, dicts)."""
    if isinstance(x, torch.Tensor):
        k = to_kiln(x.detach())
        return k.requires_grad_() if x.requires_grad else k
    if isinstance(x, torch.dtype):
        return kdt(dname(x))
    if isinstance(x, list):
        return [to_kiln_tree(v) for v in x]
    if isinstance(x, tuple):
        return tuple(to_kiln_tree(v) for v in x)
    if isinstance(x, dict):
        return {k: to_kiln_tree(v) for k, v in x.items()}
    return x


def same_with_grad(fn, *args, grad=(), rtol=2e-5, atol=2e-6, **kw):
    """fn(lib, *args, **kw) for torch and for kiln copies of the tensor arguments: the results (and the
    gradients of the positional tensors whose indices are in `grad`, under a ramp of upstream
    gradients) are compared, or the exception classes when torch raises."""
    targs = [a.detach().clone().requires_grad_(i in grad) if isinstance(a, torch.Tensor) else a
             for i, a in enumerate(args)]
    kargs = [to_kiln_tree(a.detach()) if isinstance(a, torch.Tensor) else to_kiln_tree(a) for a in args]
    for i in grad:
        kargs[i].requires_grad_(True)
    try:
        want = fn(torch, *targs, **kw)
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e)):
            fn(kiln, *kargs, **kw)
        return
    got = fn(kiln, *kargs, **kw)
    assert_same(got, want, rtol, atol)
    if grad:
        g = torch.linspace(-1, 2, want.numel()).reshape(want.shape).to(want.dtype)
        want.backward(g)
        got.backward(to_kiln(g))
        for i in grad:
            assert_same(kargs[i].grad, targs[i].grad, rtol, atol)


def seeded_randn(*shape, dtype=torch.float32, seed=0):
    """Normal draws from a fixed seed (drawn in float64, then cast)."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)
