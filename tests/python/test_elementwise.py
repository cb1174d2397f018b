"""Elementwise ops vs torch: every dtype, contiguous/transposed/sliced/expanded, 0-dim, empty,
NaN/inf/-0.0. Where torch raises for a dtype, kiln must raise the same exception type."""
import math

import pytest
import torch

import kiln
from helpers import ALL_DTYPES, check, layouts, make, tdt, to_kiln, to_torch, assert_same

UNARY = ["neg", "abs", "sign", "sgn", "reciprocal", "sqrt", "rsqrt", "square", "exp", "exp2", "expm1",
         "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
         "tanh", "asinh", "acosh", "atanh", "sigmoid", "erf", "erfc", "erfinv", "lgamma", "digamma",
         "floor", "ceil", "trunc", "frac", "bitwise_not", "logical_not", "isnan", "isinf", "isfinite",
         "isposinf", "isneginf", "signbit", "relu", "angle", "conj_physical", "round"]
ACTIVATIONS = ["relu6", "silu", "mish", "softsign", "hardsigmoid", "hardswish", "logsigmoid", "selu",
               "celu", "elu", "gelu", "softplus", "hardtanh", "leaky_relu"]
DOMAIN = {  # ops whose inputs should stay inside the real domain
    "asin": (-1, 1), "acos": (-1, 1), "atanh": (-0.99, 0.99), "erfinv": (-0.999, 0.999),
    "acosh": (1, 6), "log": (0.01, 10), "log2": (0.01, 10), "log10": (0.01, 10), "log1p": (-0.9, 10),
    "sqrt": (0, 10), "rsqrt": (0.01, 10), "digamma": (0.1, 10), "lgamma": (0.1, 10),
}
LOOSE = {"tan": 1e-4, "lgamma": 1e-4, "digamma": 1e-4, "erfinv": 1e-5, "mish": 1e-5, "acosh": 1e-5,
         "tanh": 1e-5, "sinh": 1e-5, "cosh": 1e-5, "expm1": 1e-5, "asinh": 1e-5, "atanh": 1e-5,
         "sigmoid": 1e-5, "exp2": 1e-5, "logsigmoid": 1e-5, "gelu": 1e-5, "silu": 1e-5, "selu": 1e-5,
         "elu": 1e-5, "celu": 1e-5, "softplus": 1e-5}


def _fn(name):
    if name in ACTIVATIONS and not hasattr(torch, name):
        return lambda m, x: getattr(m.nn.functional, name)(x)
    return lambda m, x: getattr(m, name)(x)


def _rtol(name, dtype):
    if dtype in ("float32", "complex64") and name in LOOSE:
        return LOOSE[name]
    if dtype in ("float64", "complex128") and name in LOOSE:
        return 1e-9
    return None


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", UNARY + ACTIVATIONS)
def test_unary(name, dtype):
    lo, hi = DOMAIN.get(name, (-4.0, 4.0))
    fn = _fn(name)
    for label, x in layouts((5, 7), dtype, low=lo, high=hi):
        check(fn, x, rtol=_rtol(name, dtype), msg=f"{name} {dtype} {label}")
    check(fn, make((), dtype, low=lo, high=hi), rtol=_rtol(name, dtype), msg=f"{name} {dtype} 0-dim")
    check(fn, make((0, 3), dtype), msg=f"{name} {dtype} empty")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("name", UNARY + ACTIVATIONS)
def test_unary_special_values(name, dtype):
    if name in ("lgamma", "digamma"):  # pole behaviour checked separately
        pytest.skip("poles")
    x = make((4, 8), dtype, special=True)
    check(_fn(name), x, rtol=_rtol(name, dtype), msg=f"{name} {dtype} special", ref="float64")


@pytest.mark.parametrize("name", ["exp", "sqrt", "neg", "sigmoid", "floor", "abs", "relu"])
def test_unary_inplace_and_out(name):
    x = make((3, 4), "float32", low=0.1, high=3)
    k = to_kiln(x)
    kv = k[:, 1:]  # in-place on a strided view writes through to the base
    getattr(kv, name + "_")()
    getattr(x[:, 1:], name + "_")()
    assert_same(k, x)
    out_k = kiln.empty(3, 4)
    r = getattr(kiln, name)(to_kiln(x), out=out_k)
    assert r is out_k or r.data_ptr() == out_k.data_ptr()
    assert_same(out_k, getattr(torch, name)(x))


def test_lgamma_digamma_poles():
    x = torch.tensor([0.0, -0.0, -1.0, -2.0, -2.5, 1.0, 2.0, 1e-8, 100.0, float("inf"), float("-inf"), float("nan")],
                     dtype=torch.float64)
    for name in ("lgamma", "digamma"):
        check(lambda m, t: getattr(m, name)(t), x, rtol=1e-9, msg=name)


@pytest.mark.parametrize("kw", [{"negative_slope": 0.2}, {}])
def test_leaky_relu_args(kw):
    check(lambda m, x: m.nn.functional.leaky_relu(x, **kw), make((4, 5), "float32"))


@pytest.mark.parametrize("approx", ["none", "tanh"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "float64"])
def test_gelu(approx, dtype):
    # float64 reference: torch's float32/bfloat16 GELU is oneDNN's, whose answer depends on the ISA it
    # picks (AVX-512: NaN for +inf and 17% off at x = -5; AVX2: inf and 4% off)
    check(lambda m, x: m.nn.functional.gelu(x, approximate=approx), make((64,), dtype, special=True), rtol=1e-5,
          ref="float64")


@pytest.mark.parametrize("approx", ["none", "tanh"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32", "float64"])
def test_gelu_special_values_pinned(approx, dtype):
    # kiln's choice: +inf -> +inf (the limit, as torch's float64 and scalar code; its oneDNN AVX-512
    # kernel gives NaN), -inf -> NaN (-inf * 0, as every torch path), NaN -> NaN, +-0 -> +-0
    vals = [float("inf"), float("-inf"), float("nan"), 0.0, -0.0]
    for n in (5, 40):  # the vector path with a tail, and full vectors
        x = kiln.tensor((vals * 8)[:n], dtype=getattr(kiln, dtype))
        for layout in (x, x.repeat_interleave(2)[::2]):  # contiguous and strided (scalar) paths
            y = to_torch(kiln.nn.functional.gelu(layout, approximate=approx)).double()[:5]
            assert y[0].item() == float("inf") and y[1].isnan() and y[2].isnan(), (approx, dtype, y)
            assert y[3].item() == 0.0 and not y[3].signbit() and y[4].item() == 0.0 and y[4].signbit()


@pytest.mark.parametrize("approx", ["none", "tanh"])
def test_gelu_accuracy(approx):
    """kiln's float32 GELU against the exact value (float64 through erfc / the sigmoid form, which do not
    cancel) on a dense grid, vector and scalar paths: relative error <= 2e-5 wherever the result is a
    normal float above 2^-120 (<= 4e-6 for |x| <= 6), absolute <= 2^-120 below that (the tanh form is 0
    once exp(-2u) overflows). torch's float32 GELU is off by 4-100% for x in [-6, -3] (1 + erf(x)
    cancels there)."""
    x = torch.linspace(-14, 14, 280001, dtype=torch.float32)
    xd = x.double()
    if approx == "none":
        exact = 0.5 * xd * torch.erfc(-xd / math.sqrt(2))
    else:
        exact = xd / (1 + torch.exp(-2 * math.sqrt(2 / math.pi) * (xd + 0.044715 * xd ** 3)))
    kx = to_kiln(x)
    for label, got in (("contiguous", kiln.nn.functional.gelu(kx, approximate=approx)),
                       ("strided", kiln.nn.functional.gelu(kx.repeat_interleave(2)[::2], approximate=approx))):
        err = (to_torch(got).double() - exact).abs()
        normal = exact.abs() >= 2.0 ** -120
        rel = err[normal] / exact[normal].abs()
        assert rel.max() <= 2e-5, (label, rel.max().item(), x[normal][rel.argmax()].item())
        mid = xd[normal].abs() <= 6
        assert rel[mid].max() <= 4e-6, (label, rel[mid].max().item())
        assert err[~normal].max() <= 2.0 ** -120, (label, err[~normal].max().item())


def test_parametrised_activations():
    x = make((6, 6), "float32", low=-30, high=30)
    check(lambda m, t: m.nn.functional.softplus(t, beta=2.0, threshold=5.0), x, rtol=1e-5)
    check(lambda m, t: m.nn.functional.hardtanh(t, -2.0, 3.0), x)
    check(lambda m, t: m.nn.functional.elu(t, alpha=0.5), x, rtol=1e-5)
    check(lambda m, t: m.nn.functional.celu(t, alpha=2.0), x, rtol=1e-5)
    check(lambda m, t: m.nn.functional.threshold(t, 0.5, -7.0), x)
    check(lambda m, t: m.logit(t), make((20,), "float32", low=0.01, high=0.99), rtol=1e-5)
    check(lambda m, t: m.logit(t, eps=0.1), make((20,), "float32", low=-1, high=2), rtol=1e-5)


@pytest.mark.parametrize("decimals", [0, 1, 2, -1, -2])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_round_decimals(decimals, dtype):
    x = make((50,), dtype, low=-500, high=500)
    check(lambda m, t: m.round(t, decimals=decimals), x, msg=f"round {decimals}")


# ---- binary --------------------------------------------------------------------------------------
BINARY = ["add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow",
          "atan2", "maximum", "minimum", "fmax", "fmin", "hypot", "copysign", "nextafter",
          "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
          "logical_and", "logical_or", "logical_xor", "eq", "ne", "lt", "le", "gt", "ge", "xlogy"]
NONZERO_RHS = {"floor_divide", "remainder", "fmod", "div"}


def _bin_inputs(name, dtype, shape_a, shape_b, seed=0):
    a = make(shape_a, dtype, seed=seed)
    lo = 1 if name in NONZERO_RHS and dtype not in ("bool",) else -5
    if name in ("bitwise_left_shift", "bitwise_right_shift"):
        b = make(shape_b, dtype, low=0, high=6, seed=seed + 1)
    elif name == "pow":
        a = make(shape_a, dtype, low=0, high=3, seed=seed)
        b = make(shape_b, dtype, low=0, high=3, seed=seed + 1)
    else:
        b = make(shape_b, dtype, low=lo, high=5, seed=seed + 1)
    return a, b


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", BINARY)
def test_binary(name, dtype):
    fn = lambda m, x, y: getattr(m, name)(x, y)  # noqa: E731
    rtol = 1e-5 if name in ("pow", "atan2", "hypot", "xlogy") and dtype in ("float32", "complex64") else None
    for sa, sb in [((4, 5), (4, 5)), ((4, 1), (1, 5)), ((3, 4, 5), (5,)), ((), (4,)), ((0, 3), (3,))]:
        a, b = _bin_inputs(name, dtype, sa, sb)
        check(fn, a, b, rtol=rtol, msg=f"{name} {dtype} {sa} {sb}")
    a, b = _bin_inputs(name, dtype, (6, 5), (5, 6))
    check(fn, a[::2], b.t()[::2], rtol=rtol, msg=f"{name} {dtype} strided")


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow",
                                  "maximum", "eq", "lt", "ge", "bitwise_and", "atan2"])
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int32", "int64", "uint32", "float16",
                                   "bfloat16", "float32", "float64", "complex64"])
@pytest.mark.parametrize("scalar", [3, -2, 2.5, True, 0.5j, 300])
def test_binary_python_scalars(name, dtype, scalar):
    if dtype in ("float16", "bfloat16") and isinstance(scalar, complex):
        pytest.skip("torch promotes float16 + complex to complex32, a dtype kiln does not have")
    a, _ = _bin_inputs(name, dtype, (3, 4), (1,))
    check(lambda m, x: getattr(m, name)(x, scalar), a, rtol=1e-5, msg=f"{name} {dtype} {scalar!r}")
    check(lambda m, x: getattr(m, name)(scalar, x) if name not in ("maximum",) else x, a, rtol=1e-5,
          msg=f"{name} {scalar!r} {dtype} reversed")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("scalar", [0.0123456789, 1001, -7.3, "f32", "f64"])
def test_reduced_float_times_inexact_scalar_bit_for_bit(dtype, scalar):
    """torch reads a second-operand scalar of mul and true division in float32 (not rounded to the
    tensor's dtype first), rounds it for add and sub, and computes `s / x` as x.reciprocal() * s."""
    x = (torch.randn(2000, generator=torch.Generator().manual_seed(0)) * 7).to(dtype)
    if scalar == "f32":
        ts = torch.tensor(0.0123456789)
    elif scalar == "f64":
        ts = torch.tensor(0.3, dtype=torch.float64)
    else:
        ts = scalar
    ks = to_kiln(ts) if isinstance(ts, torch.Tensor) else ts
    kx = to_kiln(x)
    for op in (lambda a, b: a * b, lambda a, b: b * a, lambda a, b: a / b, lambda a, b: b / a,
               lambda a, b: a + b, lambda a, b: b - a):
        t, k = op(x, ts), to_torch(op(kx, ks))
        assert k.dtype == t.dtype
        assert torch.equal(k.view(torch.int16), t.view(torch.int16))


PAIRS = [("uint8", "int8"), ("int32", "float16"), ("bool", "int16"), ("float16", "bfloat16"),
         ("int64", "float32"), ("float32", "complex64"), ("float64", "complex64"), ("uint8", "bool"),
         ("uint16", "float32"), ("uint32", "int32"), ("uint64", "int64"), ("float8_e4m3fn", "float32"),
         ("int8", "uint16")]


@pytest.mark.parametrize("da,db", PAIRS)
@pytest.mark.parametrize("name", ["add", "mul", "div", "eq", "lt", "maximum"])
def test_binary_mixed_dtypes(name, da, db):
    fn = lambda m, x, y: getattr(m, name)(x, y)  # noqa: E731
    a, b = make((3, 4), da), make((3, 4), db, low=1, high=5)
    check(fn, a, b, msg=f"{name} {da} {db}")
    check(fn, a, make((), db, low=1, high=5), msg=f"{name} {da} 0-dim {db}")
    check(fn, make((), da), b, msg=f"{name} 0-dim {da} {db}")


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64", "int8", "int64"])
@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge"])
@pytest.mark.parametrize("scalar", [-1, 0, 200, 70000, 2**40])
def test_unsigned_comparisons(name, dtype, scalar):
    a = make((10,), dtype, low=0, high=255)
    check(lambda m, x: getattr(m, name)(x, scalar), a, msg=f"{name} {dtype} {scalar}")


@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64", "uint8"])
def test_div_rounding_modes(mode, dtype):
    a = make((40,), dtype, low=-20, high=20, seed=1)
    b = make((40,), dtype, low=1, high=7, seed=2)
    b = b * torch.where(torch.arange(40) % 3 == 0, -1, 1).to(b.dtype) if dtype != "uint8" else b
    check(lambda m, x, y: m.div(x, y, rounding_mode=mode), a, b, msg=f"div {mode} {dtype}")


def test_integer_division_by_zero_raises():
    a, b = torch.tensor([1, 2, 3]), torch.tensor([1, 0, 2])
    check(lambda m, x, y: m.floor_divide(x, y), a, b)
    check(lambda m, x, y: m.remainder(x, y), a, b)


def test_float_division_special():
    a = torch.tensor([1.0, -1.0, 0.0, float("inf"), float("nan"), 5.0, -7.5, 7.5])
    b = torch.tensor([0.0, 0.0, 0.0, 2.0, 1.0, -0.0, 2.0, -2.0])
    for name in ("div", "floor_divide", "remainder", "fmod"):
        check(lambda m, x, y: getattr(m, name)(x, y), a, b, msg=name)


def test_add_alpha():
    a, b = make((3, 4), "float32"), make((3, 4), "float32", seed=3)
    check(lambda m, x, y: m.add(x, y, alpha=2.5), a, b)
    check(lambda m, x, y: m.sub(x, y, alpha=-3), a, b)
    ai, bi = make((3, 4), "int64"), make((3, 4), "int64", seed=3)
    check(lambda m, x, y: m.add(x, y, alpha=3), ai, bi)
    check(lambda m, x, y: m.add(x, y, alpha=2.5), ai, bi)  # error for integral tensors


def test_bool_subtraction_and_negation_raise():
    a = torch.tensor([True, False])
    check(lambda m, x: m.sub(x, x), a)
    check(lambda m, x: m.neg(x), a)
    check(lambda m, x: -x, a)


def test_broadcast_mismatch_raises():
    check(lambda m, x, y: m.add(x, y), make((3, 4), "float32"), make((5,), "float32"))


@pytest.mark.parametrize("dtype", ["float32", "int64", "bfloat16", "complex64", "bool"])
def test_inplace_binary_and_cast_errors(dtype):
    a, b = make((3, 4), dtype), make((4,), dtype, seed=4)
    ka, kb = to_kiln(a), to_kiln(b)
    try:
        a.mul_(b)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            ka.mul_(kb)
        return
    ka.mul_(kb)
    assert_same(ka, a)
    # result type float can't be written into an integer tensor in place
    ai = make((3,), "int64")
    with pytest.raises(RuntimeError):
        ai.add_(torch.tensor([0.5, 0.5, 0.5]))
    with pytest.raises(RuntimeError):
        to_kiln(ai).add_(kiln.tensor([0.5, 0.5, 0.5]))


def test_operators():
    a, b = make((3, 4), "float32"), make((3, 4), "float32", low=1, seed=5)
    for op in ["+", "-", "*", "/", "//", "%", "**", "<", "<=", ">", ">=", "==", "!="]:
        f = eval(f"lambda m, x, y: x {op} y")  # noqa: S307
        check(f, a, b.abs() + 0.5 if op == "**" else b, rtol=1e-5, msg=op)
    ai, bi = make((3, 4), "int32"), make((3, 4), "int32", low=0, high=4, seed=6)
    for op in ["&", "|", "^", "<<", ">>"]:
        check(eval(f"lambda m, x, y: x {op} y"), ai, bi, msg=op)  # noqa: S307
    check(lambda m, x: ~x, ai)
    check(lambda m, x: -x, a)
    check(lambda m, x: abs(x), a)
    check(lambda m, x: 2 - x, a)
    check(lambda m, x: 2 ** x, a)
    check(lambda m, x: 1 / x, b)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "bfloat16"])
def test_clamp(dtype):
    x = make((5, 6), dtype, special=True)
    check(lambda m, t: m.clamp(t, -1, 2), x)
    check(lambda m, t: m.clamp(t, min=0.5), x)
    check(lambda m, t: m.clamp(t, max=-0.5), x)
    check(lambda m, t: m.clip(t, -1, 1), x)
    lo, hi = make((5, 1), dtype, low=-3, high=0), make((1, 6), dtype, low=0, high=3)
    check(lambda m, t, a, b: m.clamp(t, a, b), x, lo, hi)
    check(lambda m, t: m.clamp(t), x)  # error: neither bound


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool", "complex64", "bfloat16"])
def test_where(dtype):
    c = make((4, 5), "bool")
    a, b = make((4, 5), dtype), make((1, 5), dtype, seed=9)
    check(lambda m, cc, x, y: m.where(cc, x, y), c, a, b)
    check(lambda m, cc, x: m.where(cc, x, 0.5), c, a)
    check(lambda m, cc, x, y: m.where(cc, x, y), c.int(), a, b)  # condition must be bool


def test_lerp_addcmul_addcdiv():
    a, b, w = make((4, 5), "float32"), make((4, 5), "float32", seed=1), make((4, 5), "float32", low=0, high=1, seed=2)
    check(lambda m, x, y, z: m.lerp(x, y, z), a, b, w)
    check(lambda m, x, y: m.lerp(x, y, 0.3), a, b)
    check(lambda m, x, y, z: m.addcmul(x, y, z, value=0.5), a, b, w)
    check(lambda m, x, y, z: m.addcdiv(x, y, z + 1, value=2), a, b, w)


def test_isclose_allclose_equal():
    a = torch.tensor([1.0, 2.0, float("nan"), float("inf"), 1e-9])
    b = torch.tensor([1.0 + 1e-6, 2.1, float("nan"), float("inf"), 0.0])
    check(lambda m, x, y: m.isclose(x, y), a, b)
    check(lambda m, x, y: m.isclose(x, y, equal_nan=True), a, b)
    check(lambda m, x, y: m.allclose(x, y, rtol=0.1, equal_nan=True), a, b)
    check(lambda m, x, y: m.equal(x, y), a, a)
    check(lambda m, x, y: m.isclose(x, y), torch.tensor([1, 2, 3]), torch.tensor([1, 2, 4]))


def test_nan_to_num():
    for dtype in ("float16", "bfloat16", "float32", "float64"):
        x = make((4, 8), dtype, special=True)
        check(lambda m, t: m.nan_to_num(t), x)
        check(lambda m, t: m.nan_to_num(t, nan=1.0, posinf=2.0, neginf=-3.0), x)


def test_complex_helpers():
    re, im = make((3, 4), "float32"), make((3, 4), "float32", seed=2)
    check(lambda m, a, b: m.complex(a, b), re, im)
    check(lambda m, a, b: m.polar(a.abs(), b), re, im, rtol=1e-5)
    z = make((3, 4), "complex64")
    check(lambda m, t: m.view_as_real(t), z)
    check(lambda m, t: m.real(t), z)
    check(lambda m, t: m.imag(t), z)
    check(lambda m, t: m.conj(t).resolve_conj() if m is torch else m.conj(t), z)
    check(lambda m, t: m.view_as_complex(t), make((3, 2), "float32"))
    check(lambda m, t: m.angle(t), z)


# ---- bfloat16 / float16 lookup tables -------------------------------------------------------------
_LUT_FNS = {
    "exp": kiln.exp, "expm1": kiln.expm1, "log": kiln.log, "log1p": kiln.log1p, "tanh": kiln.tanh,
    "sigmoid": kiln.sigmoid, "erf": kiln.erf, "sin": kiln.sin, "cos": kiln.cos,
    "gelu": kiln.nn.functional.gelu, "gelu_tanh": lambda t: kiln.nn.functional.gelu(t, approximate="tanh"),
    "silu": kiln.nn.functional.silu,
}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(_LUT_FNS))
def test_half_lookup_tables_equal_the_vector_path(name, dtype):
    """Long contiguous bfloat16 / float16 runs of the vectorised unary ops read a 65536-entry table of
    the vector path's results: every code (NaN payloads, infinities, subnormals included) must give the
    bits that runs too short for the table (2047 elements, the vector path) give. (test_isa runs this
    on the lower tables too.)"""
    import numpy as np
    fn = _LUT_FNS[name]
    codes = np.arange(65536, dtype=np.uint16)
    x = kiln.from_numpy(codes.view(np.int16).copy()).view(getattr(kiln, dtype))
    whole = fn(x).view(kiln.int16).numpy()          # one run of 65536: the table
    # (parts of 2047: the vector path's full vectors and its tail, a second copy of the function)
    parts = np.concatenate([fn(x[i:i + 2047].clone()).view(kiln.int16).numpy() for i in range(0, 65536, 2047)])
    assert np.array_equal(whole, parts), np.nonzero(whole != parts)[0][:10]
    # and torch's values where both are finite (bfloat16: torch computes in float32 and rounds once)
    tx = torch.from_numpy(codes.view(np.int16).copy()).view(getattr(torch, dtype))
    tfn = {"gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
           "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh")}.get(name) or getattr(torch, name)
    want = tfn(tx).float()
    got = torch.from_numpy(whole).view(getattr(torch, dtype)).float()
    # (finite inputs: torch's bfloat16 GELU of +inf is NaN on some CPUs, kiln's is +inf)
    xin = torch.isfinite(tx.float())
    assert torch.equal(torch.isnan(got[xin]), torch.isnan(want[xin]))
    fin = torch.isfinite(want) & torch.isfinite(got)
    torch.testing.assert_close(got[fin], want[fin], rtol=2 ** -7 if dtype == "bfloat16" else 2 ** -9, atol=1e-6)
