"""kiln.special vs torch.special (torch 2.13 is the oracle: every kiln result is compared with torch's on the
same data, never with kiln itself).

Compared:
- every unary function (the Bessel / Airy family, i0 / i0e / i1 / i1e, ndtr / ndtri / log_ndtr, erfcx, entr,
  sinc, digamma / psi / gammaln, and the aliases erf, erfc, erfinv, expit, exp2, expm1, log1p, logit, round)
  in float32 and float64 over a wide domain per function (negative, around 0, moderate, large |x|, near the
  poles and zeros), at nan / +-inf / +-0 and at the poles, for integer and bool inputs (promoted to float32),
  float16 / bfloat16 (values where torch has a kernel, NotImplementedError where it has none), complex
  inputs (NotImplementedError, values for sinc / expit / exp2 / expm1 / log1p), 0-dim, empty and
  transposed / sliced / expanded inputs, and the keyword argument names (`x` for airy_ai,
  scaled_modified_bessel_k0 / k1, spherical_bessel_j0 and the polynomials, `input` elsewhere);
- the binary functions xlog1py, xlogy, zeta, gammainc, gammaincc: values on broadcast grids, a grid of
  special values in both arguments, the dtype promotion table, Python numbers as either argument (gammainc /
  gammaincc take none), broadcasting, 0-dim, empty and strided operands;
- multigammaln (p = 1..5, inputs below (p-1)/2: torch 2.13 does not raise there), polygamma (n = 0..4);
- the twelve orthogonal polynomials with Python-int, Python-float and tensor n (n = -1, 0, 1, 2, 5, 7, 10,
  30 and n of another shape), Python-number x, the x = +-1 / 0 special cases, nan x, hermite's n limit;
- logsumexp, softmax, log_softmax, round(decimals=), logit(eps=);
- the top-level aliases kiln.i0 / sinc / igamma / igammac / mvlgamma, the Tensor methods and their in-place
  forms (i0_, sinc_, igamma_, igammac_, mvlgamma_, kiln.i0_, kiln.sinc_), out=;
- float64 gradients of sum(f(x) * w): against torch's where torch has the derivative; against central
  finite differences of torch's function for the Bessel functions, whose derivative kiln implements and
  torch does not; the same exception class as torch where the derivative is missing (RuntimeError for
  airy_ai and the polynomials, which torch marks non-differentiable; NotImplementedError for zeta's x and
  gammainc / gammaincc's a).

Tolerances: rtol=1e-5 / atol=1e-6 (float32) and rtol=1e-9 / atol=1e-12 (float64); kiln computes in double,
torch with single / double Cephes-style kernels. The few loosenings (LOOSE, _POLY_F32, _TRIGAMMA) are
places where torch itself is off; each was measured offline against mpmath at 40 digits and scipy.
"""
import pytest
import torch

import kiln
from helpers import dname, tdt, to_kiln_tree, to_torch

NAN, INF = float("nan"), float("inf")
SPECIAL = [NAN, INF, -INF, 0.0, -0.0]


def sp(lib):
    """The special namespace of a library (looked up at call time)."""
    return lib.special


def lin(a, b, n):
    return torch.linspace(a, b, n, dtype=torch.float64).tolist()


# ---- comparison helpers ----------------------------------------------------------------------------------
F32 = (1e-5, 1e-6)
F64 = (1e-9, 1e-12)
BASE_TOL = {"float32": F32, "float64": F64, "complex64": F32, "complex128": F64,
            # one to two units in the last place of the half formats: torch rounds a float32 answer, kiln a
            # double one
            "float16": (2e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5)}

# Loosenings, per function and result dtype: (rtol, atol). torch's kernels are off by more than the default
# tolerance there (measured against mpmath / scipy on the domains below):
LOOSE = {
    # torch's airy_ai is off by up to 2.8e-6 absolute just left of its asymptotic branch (x in [-2.5, -2.09]),
    # in float32 and float64 alike; elsewhere it is accurate
    "airy_ai": {"float32": (1e-5, 5e-6), "float64": (1e-9, 5e-6)},
    # torch's j0 / j1 / y0 / y1 switch to an asymptotic form at x = 5 whose float64 coefficients leave up to
    # 3.3e-7 (j0, j1), 1.7e-7 (y0) and 8e-7 (y1) absolute error on [5, 7]; all four are bounded by 1 there
    # (except y near 0, where the relative error is small), so an absolute tolerance is the right scale
    "bessel_j0": {"float64": (1e-9, 5e-7)},
    "bessel_j1": {"float64": (1e-9, 5e-7)},
    "bessel_y0": {"float64": (1e-9, 5e-7)},
    "bessel_y1": {"float32": (1e-5, 2e-6), "float64": (1e-9, 2e-6)},
    # torch's igamma / igammac use a short uniform asymptotic expansion for large a near x ~ a: up to 3e-10
    # absolute error (a = 50, x = 50); the results are probabilities in [0, 1]
    "gammainc": {"float64": (1e-9, 1e-9)},
    "gammaincc": {"float64": (1e-9, 1e-9)},
    # torch's float16 / bfloat16 ndtr forms (1 + erf(x / sqrt 2)) / 2 in the half format: its error is
    # absolute, up to half an ulp of 1 (1.2e-4 float16, 9.8e-4 bfloat16 at x = -3), and ndtr(-4) = 0
    "ndtr": {"float16": (2e-3, 2.5e-4), "bfloat16": (1.6e-2, 2e-3)},
}
# torch evaluates the Chebyshev polynomials as cos(n acos x) / sin((n+1) acos x) / sin(acos x) in the input
# precision for larger n: in float32 that is up to 2.2e-6 absolute off at n = 30 (n * eps32 scale)
_POLY_F32 = (1e-5, 5e-6)
# torch's trigamma (polygamma(1, .), digamma's derivative) uses a short asymptotic series: 5e-10 relative
_TRIGAMMA = (1e-8, 1e-12)


def tol(name, dtype):
    dtype = dtype if isinstance(dtype, str) else dname(dtype)
    return LOOSE.get(name, {}).get(dtype, BASE_TOL.get(dtype, F64))


kin = to_kiln_tree  # torch tensors (in lists, tuples, dicts) -> kiln copies; dtypes -> kiln


def close(k, t, rtol, atol, msg=""):
    """kiln result vs torch result: kiln.Tensor, dtype and shape exactly; values within rtol / atol with
    NaN == NaN and infinities equal."""
    assert isinstance(k, kiln.Tensor), f"{msg}: expected a kiln.Tensor, got {type(k)}"
    assert dname(k.dtype) == dname(t.dtype), f"{msg}: dtype {k.dtype} != torch {t.dtype}"
    assert tuple(k.shape) == tuple(t.shape), f"{msg}: shape {tuple(k.shape)} != torch {tuple(t.shape)}"
    got, t = to_torch(k.detach()), t.detach()
    if not (t.dtype.is_floating_point or t.dtype.is_complex):
        assert torch.equal(got, t), f"{msg}: values differ\nkiln  {got}\ntorch {t}"
        return
    if t.dtype in (torch.float16, torch.bfloat16):
        got, t = got.float(), t.float()
    torch.testing.assert_close(got, t, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{msg}\n{m}")


def cmp(fn, *args, name=None, tols=None, msg="", **kw):
    """fn(torch, *args, **kw) vs fn(kiln, *kiln copies): the same exception class, or the same result (the
    tolerance of `name` for the result's dtype unless `tols` is given)."""
    texc = kexc = None
    try:
        t = fn(torch, *args, **kw)
    except Exception as e:  # noqa: BLE001
        texc = e
    try:
        k = fn(kiln, *kin(args), **{n: kin(v) for n, v in kw.items()})
    except Exception as e:  # noqa: BLE001
        kexc = e
    if texc is not None:
        assert kexc is not None, f"{msg}: torch raised {type(texc).__name__}({texc}), kiln returned {k}"
        assert isinstance(kexc, type(texc)), \
            f"{msg}: torch raised {type(texc).__name__}({texc}), kiln raised {type(kexc).__name__}({kexc})"
        return None, None
    if kexc is not None:
        raise AssertionError(f"{msg}: kiln raised {type(kexc).__name__}: {kexc}; torch gave {t}") from kexc
    r, a = tols if tols is not None else tol(name, t.dtype)
    close(k, t, r, a, msg)
    return k, t


def err(exc, fn, *args, **kw):
    """torch raises exactly exc, and kiln raises exc too."""
    with pytest.raises(exc) as te:
        fn(torch, *args, **kw)
    assert type(te.value) is exc, f"torch raised {type(te.value).__name__}, the test expects {exc.__name__}"
    with pytest.raises(exc):
        fn(kiln, *kin(args), **{n: kin(v) for n, v in kw.items()})


def call(name):
    """lib -> lib.special.<name>(...)"""
    return lambda lib, *a, **kw: getattr(sp(lib), name)(*a, **kw)


def T(values, dtype="float64"):
    return torch.tensor(values, dtype=tdt(dtype) if isinstance(dtype, str) else dtype)


# ---- unary functions and their domains -------------------------------------------------------------------
BESSEL = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
          "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
          "scaled_modified_bessel_k1", "spherical_bessel_j0"]
NEW_UNARY = ["i0", "i0e", "i1", "i1e", "ndtr", "ndtri", "log_ndtr", "erfcx", "entr", "sinc", "digamma", "psi",
             "gammaln"]
ALIAS_UNARY = ["erf", "erfc", "erfinv", "expit", "exp2", "expm1", "log1p", "logit", "round"]
UNARY = BESSEL + NEW_UNARY + ALIAS_UNARY

_J = lin(-30, 30, 121) + [-1000.25, -100.5, 100.5, 1000.25, 1e-3, 1e-8]                 # j0, j1: all x
_Y = lin(0.05, 30, 100) + [100.5, 1000.25, 1e-3, 1e-8, -1.0, -5.5]                      # y0, y1: x > 0
# i0, i1; +-700 overflow float32 (inf). Not 88.7 < x < 91.9: torch's float32 kernels form exp(x) first and
# overflow to inf there, where the float32 answer (5e37 at 90) is finite
_I = lin(-50, 50, 101) + [-700.0, 700.0, 1e-3, 1e-8, 85.0, 88.0]
_K = lin(0.01, 50, 101) + [100.0, 700.0, 1e-3, 1e-8, -1.0, -5.5]                        # k0, k1: x > 0
_IE = lin(-50, 50, 101) + [-1e5, -1000.0, -700.0, 700.0, 1000.0, 1e5, 1e-3]               # exp-scaled
DOMAIN = {
    "airy_ai": lin(-10, 10, 81) + [-50.3, -100.7, -200.1, 20.0, 50.0, 100.0, 1e-3],
    "bessel_j0": _J, "bessel_j1": _J, "bessel_y0": _Y, "bessel_y1": _Y,
    "modified_bessel_i0": _I, "modified_bessel_i1": _I, "i0": _I, "i1": _I,
    "modified_bessel_k0": _K, "modified_bessel_k1": _K,
    "scaled_modified_bessel_k0": _K + [1000.0, 1e5], "scaled_modified_bessel_k1": _K + [1000.0, 1e5],
    "spherical_bessel_j0": lin(-30, 30, 121) + [-1000.25, 1000.25, 1e-3, 1e-8],
    "i0e": _IE, "i1e": _IE,
    "ndtr": lin(-40, 10, 101) + [-1000.0, 40.0],
    "log_ndtr": lin(-40, 10, 101) + [-1000.0, -100.0, 20.0, 40.0],
    "ndtri": [i / 100 for i in range(1, 100)] + [1e-300, 1e-100, 1e-10, 1 - 1e-10, 1 - 2 ** -53, -0.5, 1.5],
    "erfcx": lin(-25, 30, 111) + [100.0, 1000.0, 1e5, 1e300, -30.0],
    "entr": lin(-1, 10, 111) + [1e-30, 1e-300, 100.0, 1e30],
    "sinc": lin(-10, 10, 161) + [1e-8, -1e-8, 100.5, 1000.25],           # the integers are sinc's zeros
    "digamma": lin(-9.95, 10, 200) + [1e-8, 100.0, 1000.0, -0.5, 1.4616321449683622],  # ... its root
    "gammaln": lin(-9.95, 100, 200) + [1e-8, 1000.0, 1e30, 1.0, 2.0, -0.5, 1e306],  # 1, 2: its zeros
    "erf": lin(-6, 6, 61) + [1e-10],
    "erfc": lin(-6, 30, 73),
    "erfinv": lin(-1, 1, 81) + [-0.999999, 0.999999, 1e-10, -1.5, 1.5],
    "expit": lin(-100, 100, 81) + [1e-10],
    "exp2": lin(-140, 140, 57) + [1e-10, 0.5],
    "expm1": lin(-50, 50, 101) + [1e-10, -1e-10, 100.0],
    "log1p": lin(-0.99, 10, 100) + [1e-10, -1e-10, -2.0, 1e30],
    "logit": lin(0, 1, 41) + [-0.5, 1.5, 1e-10],
    "round": lin(-5, 5, 41) + [0.49999999999999994, 2.5, 3.5, -2.5, 1e300, 123456.5],  # ties to even
}
DOMAIN["psi"] = DOMAIN["digamma"]
# poles and edges on top of nan / +-inf / +-0
POLES = {
    "bessel_y0": [-1.0], "bessel_y1": [-1.0], "modified_bessel_k0": [-1.0], "modified_bessel_k1": [-1.0],
    "scaled_modified_bessel_k0": [-1.0], "scaled_modified_bessel_k1": [-1.0],
    "ndtri": [1.0, -1.0, 2.0], "entr": [-1.0, 1.0], "sinc": [1.0, -3.0],
    "digamma": [-1.0, -2.0, -10.0, 1.0], "psi": [-1.0, -2.0, -10.0, 1.0], "gammaln": [-1.0, -2.0, 1.0, 2.0],
    "erfinv": [1.0, -1.0, 2.0], "logit": [1.0, -1.0, 2.0], "log1p": [-1.0, -2.0],
}
# the functions whose torch kernels accept complex input (the others raise NotImplementedError)
COMPLEX_OK = {"sinc", "expit", "exp2", "expm1", "log1p"}
# float16 / bfloat16: torch has kernels for these; the others raise NotImplementedError
HALF_OK = {"i0", "i0e", "i1", "i1e", "ndtr", "entr", "sinc", "digamma", "psi", "gammaln"} | set(ALIAS_UNARY)
X_KW = {"airy_ai", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0"}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_values(name, dtype):
    x = T(DOMAIN[name], dtype)
    cmp(call(name), x, name=name, msg=f"{name} {dtype}")


@pytest.mark.parametrize("name", UNARY)
def test_unary_special_values(name):
    # torch's conventions, e.g. i0(+-inf) = nan, airy_ai(+-inf) = nan, bessel_j0(+-inf) = nan,
    # spherical_bessel_j0(+-inf) = 0, sinc(+-inf) = nan, digamma(-0.0) = +inf, digamma(-inf) = nan,
    # entr(+-inf) = -inf, log_ndtr(inf) = -0.0, erfcx(-inf) = inf, k0(inf) = 0, k0(-inf) = nan
    for dtype in ("float32", "float64"):
        x = T(SPECIAL + POLES.get(name, []), dtype)
        cmp(call(name), x, name=name, msg=f"{name} {dtype}")


@pytest.mark.parametrize("name", UNARY)
def test_unary_integer_and_bool_inputs(name):
    # integers and bools promote to the default dtype (float32); round has no integer kernel in torch.special
    # (NotImplementedError, unlike torch.round)
    for dtype in ("int64", "int32", "int16", "int8"):
        cmp(call(name), T(list(range(-3, 4)), dtype), name=name, msg=f"{name} {dtype}")
    cmp(call(name), T(list(range(0, 7)), "uint8"), name=name, msg=f"{name} uint8")
    cmp(call(name), T([True, False, True], "bool"), name=name, msg=f"{name} bool")
    cmp(call(name), T(5, "int64"), name=name, msg=f"{name} 0-dim int64")


def _half_domain(name):
    if name in ("ndtri", "logit"):
        return lin(0.02, 0.98, 25) + [0.5]
    if name == "erfinv":
        return lin(-0.98, 0.98, 25)
    if name == "entr":
        return lin(0, 4, 33)
    if name == "log1p":
        return lin(-0.9, 4, 33)
    if name in ("digamma", "psi", "gammaln"):
        return lin(-3.9, 4.1, 33)
    if name in ("modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
                "scaled_modified_bessel_k1", "bessel_y0", "bessel_y1"):
        return lin(0.1, 4, 33)
    return lin(-4, 4, 33)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_half_inputs(name, dtype):
    x = T(_half_domain(name), dtype)
    if name not in HALF_OK:
        err(NotImplementedError, call(name), x)
        return
    cmp(call(name), x, name=name, msg=f"{name} {dtype}")
    cmp(call(name), T(SPECIAL, dtype), name=name, msg=f"{name} {dtype} special")


@pytest.mark.parametrize("name", UNARY)
def test_unary_complex_inputs(name):
    for dtype in ("complex64", "complex128"):
        z = T([0.5 + 0.3j, -1.2 + 2j, 0j, 3 - 1j, -0.25 - 0.75j], dtype)
        if name in COMPLEX_OK:
            cmp(call(name), z, name=name, msg=f"{name} {dtype}")
        else:
            err(NotImplementedError, call(name), z)


@pytest.mark.parametrize("name", UNARY)
def test_unary_layouts(name):
    dom = DOMAIN[name]
    base = T([dom[(7 * i) % len(dom)] for i in range(48)])
    m = base.reshape(6, 8)
    cases = {"0-dim": m[2, 3], "empty": torch.empty(0, dtype=torch.float64),
             "empty 3-d": torch.empty(2, 0, 3, dtype=torch.float64), "transposed": m.t(),
             "sliced": m[::2, 1:], "expanded": m[:1].expand(4, 8),
             "permuted 3-d": base.reshape(2, 3, 8).permute(2, 0, 1)}
    for label, x in cases.items():
        cmp(call(name), x, name=name, msg=f"{name} {label}")
    cmp(call(name), m.t().float(), name=name, msg=f"{name} transposed float32")


@pytest.mark.parametrize("name", UNARY)
def test_unary_keyword_names(name):
    # torch's schema names the argument `x` for airy_ai, the scaled k's and spherical_bessel_j0, `input`
    # for the others (which also take `x`, torch's numpy-style alias of `input`)
    x = T(DOMAIN[name][:9])
    if name in X_KW:
        cmp(call(name), name=name, x=x)
        err(TypeError, call(name), input=x)
    else:
        cmp(call(name), name=name, input=x)


# ---- binary functions ------------------------------------------------------------------------------------
BINARY = ["xlog1py", "xlogy", "zeta", "gammainc", "gammaincc"]
_GAMMA_GRID = ([0.1, 0.5, 1.0, 2.5, 10.0, 50.0, 200.0, 1e3],
               [0.0, 0.01, 0.5, 1.0, 3.0, 10.0, 45.0, 50.0, 60.0, 250.0, 1e3, 1e4, -1.0])
GRID = {
    "xlog1py": ([-2.0, -0.5, 0.0, 0.5, 3.0, 1e3], [-1.0, -0.999, -0.5, 0.0, 1e-10, 0.5, 2.0, 1e10, -2.0]),
    "xlogy": ([-2.0, -0.5, 0.0, 0.5, 3.0, 1e3], [0.0, 1e-10, 0.5, 1.0, 2.0, 1e10, -1.0]),
    # q < 0: finite for integer x, nan for non-integer x, inf at the non-positive integers; x < 1: nan
    "zeta": ([1.0001, 1.5, 2.0, 3.5, 10.0, 50.0, 0.5, 3.0, 1.0, -2.0],
             [0.1, 0.5, 1.0, 2.5, 10.0, 100.0, 1e3, -1.5, -2.0, -2.5]),
    "gammainc": _GAMMA_GRID, "gammaincc": _GAMMA_GRID,
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", BINARY)
def test_binary_values(name, dtype):
    a, b = GRID[name]
    A, B = T(a, dtype).reshape(-1, 1), T(b, dtype)
    cmp(call(name), A, B, name=name, msg=f"{name} {dtype} grid")           # (len(a), len(b)) broadcast
    cmp(call(name), B.reshape(-1, 1), A.reshape(-1), name=name, msg=f"{name} {dtype} swapped")


@pytest.mark.parametrize("name", BINARY)
def test_binary_special_values(name):
    # every pair of nan, +-inf, +-0, 1, -1, 2.5, -2 in the two arguments; torch's conventions include
    # xlog1py(0, y) = 0 for any non-nan y (also y = -1 and y < -1), xlog1py(inf, 0) = nan, xlogy(0, 0) = 0,
    # zeta(1, q) = inf (even q = nan), zeta(x, q <= 0 integer) = inf (even x = nan), zeta(inf, 1) = 1,
    # zeta(2, inf) = nan, gammainc(0, x > 0) = 1, gammainc(0, 0) = nan, gammainc(nan, inf) = 1,
    # gammainc(nan, 0) = 0, gammainc(inf, nan) = 0, gammainc(a, x < 0) = nan
    sv = SPECIAL + [1.0, -1.0, 2.5, -2.0]
    for dtype in ("float32", "float64"):
        a, b = T(sv, dtype).reshape(-1, 1), T(sv, dtype)
        cmp(call(name), a, b, name=name, msg=f"{name} {dtype}")


BIN_DTYPES = ["int64", "int32", "bool", "float16", "bfloat16", "float32", "float64"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_dtypes(name):
    # result dtype = the promoted dtype, integers / bools -> float32; torch has no float16 / bfloat16 zeta
    # kernel (NotImplementedError unless the other operand promotes it to float32), no integer igamma kernel
    # (int x int -> NotImplementedError), and no complex kernel for any of them
    a_vals, b_vals = [1, 2, 3, 2], [2, 1, 3, 4]
    for da in BIN_DTYPES + ["complex64"]:
        for db in BIN_DTYPES:
            a, b = T(a_vals, da), T(b_vals, db)
            cmp(call(name), a, b, name=name, msg=f"{name}({da}, {db})")
            if da == "complex64":
                cmp(call(name), b, a, name=name, msg=f"{name}({db}, {da})")


@pytest.mark.parametrize("name", ["xlog1py", "xlogy", "zeta"])
def test_binary_python_numbers(name):
    # a Python number on either side takes the tensor's dtype (float32 for an integer tensor);
    # two numbers: TypeError
    f32, f64, i64, f16 = T([1.0, 2.0, 3.5], "float32"), T([1.5, 2.0, 7.0]), T([1, 2, 3], "int64"), \
        T([1.0, 2.0, 3.5], "float16")
    for x, y in [(f32, 2), (f32, 2.5), (2, f32), (2.5, f32), (i64, 2), (i64, 2.5), (2, i64), (2.5, i64),
                 (f64, 3), (0.5, f64), (f64, -1.0), (0.0, f64)]:
        cmp(call(name), x, y, name=name, msg=f"{name}({type(x).__name__}, {type(y).__name__})")
    cmp(call(name), f16, 2, name=name, msg=f"{name}(float16, int)")
    err(TypeError, call(name), 2.0, 3.0)


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_gammainc_rejects_python_numbers(name):
    x = T([1.0, 2.0])
    for a, b in [(x, 2), (x, 2.5), (2, x), (2.5, x), (2.0, 3.0)]:
        err(TypeError, call(name), a, b)


@pytest.mark.parametrize("name", BINARY)
def test_binary_broadcast_and_layouts(name):
    a, b = GRID[name]
    A = T([a[i % len(a)] for i in range(12)]).reshape(3, 4)
    B = T([b[i % len(b)] for i in range(12)]).reshape(4, 3)
    f = call(name)
    cmp(f, A, B.t(), name=name, msg="transposed other")
    cmp(f, A.t(), B, name=name, msg="transposed input")
    cmp(f, A[:, ::2], B.t()[:, 1::2], name=name, msg="step-sliced")
    cmp(f, A[:1].expand(5, 4), B.t()[0], name=name, msg="expanded")
    cmp(f, A.reshape(3, 1, 4), B.t()[:2].reshape(2, 1, 1, 4), name=name, msg="4-d broadcast")
    cmp(f, A[1, 2], B.t(), name=name, msg="0-dim input")
    cmp(f, A, B[0, 0], name=name, msg="0-dim other")
    cmp(f, A[0, 0], B[1, 1], name=name, msg="both 0-dim")
    cmp(f, torch.empty(0, 1, dtype=torch.float64), B[0], name=name, msg="empty")
    # a 0-dim float64 does not promote a float32 tensor (torch's type promotion): float32 result
    cmp(f, A[0, 0], B.t().float(), name=name, msg="0-dim float64 with float32")
    cmp(f, A.float(), B.t()[0, 0], name=name, msg="float32 with 0-dim float64")
    err(RuntimeError, f, T([1.0, 2.0, 3.0]), T([1.0, 2.0, 3.0, 4.0]))


@pytest.mark.parametrize("name", BINARY)
def test_binary_keyword_names(name):
    a, b = GRID[name]
    cmp(call(name), name=name, input=T(a[:4]), other=T(b[:4]))


# ---- multigammaln / polygamma ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("p", [1, 2, 3, 4, 5])
def test_multigammaln_values(p, dtype):
    lo = (p - 1) / 2
    x = T([lo + v for v in lin(0.01, 30, 40)] + [lo + 1e-6, 100.0, 1e4], dtype)
    cmp(call("multigammaln"), x, p, name="multigammaln", msg=f"p={p} {dtype}")
    # torch 2.13 does not check x > (p-1)/2: below it the result is the plain sum of lgamma terms
    # (inf at their poles), and nan / inf propagate
    below = T([lo, lo - 0.3, 0.1, -2.5, -1.0, 0.0] + SPECIAL, dtype)
    cmp(call("multigammaln"), below, p, name="multigammaln", msg=f"p={p} {dtype} below (p-1)/2")


def test_multigammaln_forms_and_errors():
    f = call("multigammaln")
    x = T([[2.5, 3.0, 7.25], [4.0, 1.75, 10.0]])
    cmp(f, x.t(), 3, name="multigammaln", msg="transposed")
    cmp(f, x[1, 1], 2, name="multigammaln", msg="0-dim")
    cmp(f, torch.empty(0, 3, dtype=torch.float64), 2, name="multigammaln", msg="empty")
    cmp(f, name="multigammaln", input=x, p=2)
    cmp(f, T([3, 4, 7], "int64"), 2, name="multigammaln", msg="int64 -> float32")
    for dtype in ("float16", "bfloat16"):
        cmp(f, T([2.5, 3.0, 7.25, 1.5], dtype), 2, name="multigammaln", msg=dtype)
    for p in (0, -1):
        err(RuntimeError, f, x, p)           # "p has to be greater than or equal to 1"
    err(TypeError, f, x, 2.0)                 # p is an int
    err(NotImplementedError, f, T([2.5 + 0j, 3.0], "complex64"), 2)


POLYGAMMA_X = lin(-4.95, 10, 60) + [0.1, 1e-3, 100.0, 1e3, 1.4616321449683622]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_polygamma_values(n, dtype):
    tols = _TRIGAMMA if n == 1 and dtype == "float64" else None
    cmp(call("polygamma"), n, T(POLYGAMMA_X, dtype), name="polygamma", tols=tols, msg=f"n={n} {dtype}")
    # special values; for n >= 2 also the negative integers (+-inf there: polygamma(n, x) is
    # (-1)^(n+1) n! zeta(n+1, x) and zeta is inf at the non-positive integers), for n = 0 the nan there.
    # (trigamma at a negative integer is pi^2 / sin(pi x)^2 with sin(pi x) rounded: a huge finite number
    # that depends on the formula, not compared.) polygamma(1, inf) = 0, polygamma(n >= 2, inf) = nan.
    sv = SPECIAL + ([-1.0, -2.0, -7.0] if n != 1 else [])
    cmp(call("polygamma"), n, T(sv, dtype), name="polygamma", msg=f"n={n} {dtype} special")


def test_polygamma_forms_and_errors():
    f = call("polygamma")
    x = T([[0.5, 1.5, 7.25], [4.0, -1.75, 10.0]])
    cmp(f, 2, x.t(), name="polygamma", msg="transposed")
    cmp(f, 1, x[0, 1], name="polygamma", msg="0-dim")
    cmp(f, 3, torch.empty(0, dtype=torch.float64), name="polygamma", msg="empty")
    cmp(f, name="polygamma", tols=_TRIGAMMA, n=1, input=x)
    cmp(f, 1, T([1, 2, 3], "int64"), name="polygamma", msg="int64 -> float32")
    cmp(f, 2, T([True, False], "bool"), name="polygamma", msg="bool -> float32")
    for dtype in ("float16", "bfloat16"):
        for n in (0, 1, 2):
            cmp(f, n, T([0.5, 1.0, 2.0, 3.5], dtype), name="polygamma", msg=f"n={n} {dtype}")
    err(RuntimeError, f, -1, x)                # "polygamma(n, x) does not support negative n."
    err(NotImplementedError, f, 2, T([1.0 + 1j], "complex64"))


# ---- orthogonal polynomials ------------------------------------------------------------------------------
POLY = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
        "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
        "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
        "laguerre_polynomial_l", "legendre_polynomial_p"]
NS = [-1, 0, 1, 2, 5, 7, 10, 30]
_g = torch.Generator().manual_seed(0)
_RAND11 = (torch.rand(12, generator=_g, dtype=torch.float64) * 2 - 1).tolist()
_RAND01 = torch.rand(11, generator=_g, dtype=torch.float64).tolist()
POLY_X = [-1.0, 1.0, 0.0, 0.5, 2.0, -3.0, -0.5] + _RAND11
SHIFTED_X = [0.0, 1.0, 0.5, 0.25, -0.5, 1.5, 2.0, -1.0] + _RAND01


def poly_x(name):
    return SHIFTED_X if name.startswith("shifted") else POLY_X


def poly_tol(dtype):
    return _POLY_F32 if dname(dtype) == "float32" else BASE_TOL[dname(dtype)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", POLY)
def test_polynomial_values(name, dtype):
    # n < 0 gives 0; |x| = 1 (0 and 1 for the shifted ones) are special-cased to the exact values
    f, tols = call(name), poly_tol(tdt(dtype))
    x = T(poly_x(name), dtype)
    for n in NS:
        cmp(f, x, n, tols=tols, msg=f"{name} {dtype} n={n}")
    # tensor n of another shape: (len(x), 1) against (len(NS),); float n of the same dtype, and int64 n
    cmp(f, x.reshape(-1, 1), T(NS, dtype), tols=tols, msg=f"{name} {dtype} tensor n")
    cmp(f, x.reshape(-1, 1), T(NS, "int64"), tols=tols, msg=f"{name} {dtype} int64 n")
    cmp(f, x[:6].reshape(1, 6, 1), T(NS, dtype).reshape(2, 1, 4), tols=tols, msg=f"{name} {dtype} 3-d broadcast")


@pytest.mark.parametrize("name", POLY)
def test_polynomial_n_forms(name):
    f, x = call(name), T(poly_x(name)[:10])
    # a Python float n and a fractional tensor n are truncated toward zero (2.9 -> 2, -1.5 -> -1 -> 0)
    cmp(f, x, 2.9, tols=F64, msg="n=2.9")
    cmp(f, x, 7.5, tols=F64, msg="n=7.5")
    cmp(f, x.reshape(-1, 1), T([2.5, -1.5, 3.99, 0.2, 10.7]), tols=F64, msg="fractional tensor n")
    cmp(f, x, T(5, "int64"), tols=F64, msg="0-dim int64 n")
    cmp(f, x[3], T([0, 1, 2, 5, 30]), tols=F64, msg="0-dim x")
    cmp(f, torch.empty(0, 1, dtype=torch.float64), T([1.0, 2.0]), tols=F64, msg="empty")
    cmp(f, x.reshape(2, 5).t(), 7, tols=F64, msg="transposed x")
    cmp(f, x.reshape(2, 5)[:, ::2], T([[3.0], [10.0]]), tols=F64, msg="sliced x")
    cmp(f, x.reshape(2, 5).t(), T([[1.0, 2.0], [5.0, 7.0]]).t()[:1].expand(5, 2), tols=F64, msg="expanded n")
    cmp(f, name=name, tols=F64, x=x, n=5)                   # torch's argument names: x, n
    err(TypeError, f, input=x, n=5)
    err(RuntimeError, f, T([1.0, 2.0, 3.0]), T([1.0, 2.0, 3.0, 4.0]))
    err(TypeError, f, 0.5, 3)                                # no tensor at all


@pytest.mark.parametrize("name", POLY)
def test_polynomial_python_number_x(name):
    f = call(name)
    for x in (0.5, 2, -1, 0, 1, 0.25, -3.0):
        cmp(f, x, T(NS, "float64"), tols=F64, msg=f"x={x!r} float64 n")
        cmp(f, x, T(NS, "float32"), tols=_POLY_F32, msg=f"x={x!r} float32 n")
        cmp(f, x, T(NS, "int64"), tols=_POLY_F32, msg=f"x={x!r} int64 n -> float32")


# the polynomials whose torch recurrence defines its result for nan x at every n; the others stop their
# recurrence as soon as it reaches nan and return an uninitialised variable for n >= 2 (garbage: 4.6e-41,
# 0, ...), so nan x is only compared for n <= 1 there
_NAN_SAFE = {"chebyshev_polynomial_t", "hermite_polynomial_h", "hermite_polynomial_he"}


@pytest.mark.parametrize("name", POLY)
def test_polynomial_nan_x(name):
    # nan x: 0 for n < 0, 1 for n = 0 (no recurrence is run), nan otherwise
    for dtype in ("float32", "float64"):
        x = T([NAN, 0.5], dtype)
        for n in (NS if name in _NAN_SAFE else [-1, 0, 1]):
            cmp(call(name), x, n, tols=poly_tol(tdt(dtype)), msg=f"{dtype} n={n}")


@pytest.mark.parametrize("name", POLY)
def test_polynomial_dtypes(name):
    # integer / bool x and n promote to float32; no float16 / bfloat16 kernel (NotImplementedError unless the
    # other operand promotes to float32); no complex kernel
    f = call(name)
    xv, nv = [1, 0, 2, 3], [2, 1, 3, 5]
    for dx in BIN_DTYPES + ["complex64"]:
        for dn in BIN_DTYPES:
            cmp(f, T(xv, dx), T(nv, dn), tols=_POLY_F32 if dx != "float64" and dn != "float64" else F64,
                msg=f"{name}(x {dx}, n {dn})")
        cmp(f, T(xv, dx), 3, tols=_POLY_F32, msg=f"{name}(x {dx}, n=3)")


@pytest.mark.parametrize("name", ["hermite_polynomial_h", "hermite_polynomial_he"])
def test_hermite_degree_limit(name):
    # torch returns nan above n = 128 (float32) / 512 (float64) instead of running the recurrence
    f = call(name)
    cmp(f, T([0.3, -0.7, 1.1], "float32"), 129, tols=F32, msg="float32 n=129")
    cmp(f, T([0.3, -0.7, 1.1], "float64"), 513, tols=F64, msg="float64 n=513")
    cmp(f, T([0.3, -0.7, 0.05], "float64"), 100, tols=F64, msg="float64 n=100")
    cmp(f, T([0.3], "float64").reshape(1, 1), T([100.0, 512.0, 513.0, 1000.0]).reshape(1, 4)[:, 2:], tols=F64,
        msg="float64 tensor n past the limit")


# ---- aliases, methods, in-place forms --------------------------------------------------------------------
def test_top_level_aliases():
    x = T(lin(-4, 4, 17))
    a, xx = T([0.5, 1.0, 2.5, 10.0]).reshape(-1, 1), T([0.0, 0.5, 1.0, 3.0, 12.0])
    cmp(lambda lib, v: lib.i0(v), x, name="i0")
    cmp(lambda lib, v: lib.i0(v), x.float(), name="i0")
    cmp(lambda lib, v: lib.i0(v), T([1, 2, 3], "int64"), name="i0")
    cmp(lambda lib, v: lib.sinc(v), x, name="sinc")
    cmp(lambda lib, u, v: lib.igamma(u, v), a, xx, name="gammainc")
    cmp(lambda lib, u, v: lib.igammac(u, v), a, xx, name="gammaincc")
    cmp(lambda lib, v: lib.mvlgamma(v, 3), x.abs() + 1.2, name="multigammaln")
    cmp(lambda lib, v: lib.mvlgamma(v, p=2), x.abs() + 0.6, name="multigammaln")
    err(RuntimeError, lambda lib, v: lib.mvlgamma(v, 0), x)


def test_tensor_methods():
    x = T(lin(-4, 4, 17))
    a, xx = T([0.5, 1.0, 2.5, 10.0]).reshape(-1, 1), T([0.0, 0.5, 1.0, 3.0, 12.0])
    cmp(lambda lib, v: v.i0(), x, name="i0")
    cmp(lambda lib, v: v.sinc(), x.float(), name="sinc")
    cmp(lambda lib, u, v: u.igamma(v), a, xx, name="gammainc")
    cmp(lambda lib, u, v: u.igammac(v), a, xx, name="gammaincc")
    cmp(lambda lib, v: v.mvlgamma(2), x.abs() + 0.6, name="multigammaln")
    cmp(lambda lib, v: v.mvlgamma(p=1), x.abs() + 0.1, name="multigammaln")
    err(RuntimeError, lambda lib, v: v.mvlgamma(0), x)


def _inplace(method, *others, top_level=False):
    """lib, x -> (x.<method>_(*others) or lib.<method>_(x, ...)); checks that the result is x itself."""
    def fn(lib, x, *o):
        y = x.clone()
        r = getattr(lib, method)(y, *o) if top_level else getattr(y, method)(*o)
        assert r is y, f"{lib.__name__}: {method} did not return self"
        return y
    return fn


def test_inplace_forms():
    x = T(lin(-4, 4, 17))
    a, xx = T([0.5, 1.0, 2.5, 10.0]), T([0.0, 0.5, 1.0, 3.0])
    cmp(_inplace("i0_"), x, name="i0")
    cmp(_inplace("i0_"), x.float(), name="i0")
    cmp(_inplace("sinc_"), x, name="sinc")
    cmp(_inplace("i0_", top_level=True), x, name="i0")
    cmp(_inplace("sinc_", top_level=True), x, name="sinc")
    cmp(_inplace("igamma_"), a, xx, name="gammainc")
    cmp(_inplace("igammac_"), a, xx, name="gammaincc")
    cmp(_inplace("igamma_"), a, xx[2], name="gammainc")                         # broadcast other
    cmp(_inplace("igamma_"), a.float(), xx, name="gammainc")                    # float64 other into float32
    cmp(_inplace("igammac_"), a.float(), T([1, 2, 3, 4], "int64"), name="gammaincc")
    cmp(_inplace("mvlgamma_"), x.abs() + 1.2, 3, name="multigammaln")
    # the result cannot be written into an integer tensor; nor broadcast past self's shape; nor p < 1
    i = T([1, 2, 3], "int64")
    for m in ("i0_", "sinc_"):
        err(RuntimeError, _inplace(m), i)
    err(RuntimeError, _inplace("igamma_"), i, T([1.0, 2.0, 3.0]))
    err(RuntimeError, _inplace("mvlgamma_"), i, 1)
    err(RuntimeError, _inplace("mvlgamma_"), x.abs() + 2, 0)
    err(RuntimeError, _inplace("igamma_"), a, torch.ones(2, 4, dtype=torch.float64))


# ---- the functions that already had another name ---------------------------------------------------------
def test_logsumexp_softmax_log_softmax():
    x = T(lin(-5, 7, 24)).reshape(2, 3, 4)
    ls = call("logsumexp")
    for dim in (0, -1, (0, 2), [1, 2]):
        for keepdim in (False, True):
            cmp(ls, x, dim, keepdim=keepdim, tols=F64, msg=f"logsumexp dim={dim} keepdim={keepdim}")
    cmp(ls, x.float().transpose(0, 2), 1, tols=F32, msg="logsumexp float32 strided")
    cmp(ls, T([[1, 2], [3, 4]], "int64"), 1, tols=F32, msg="logsumexp int64 -> float32")
    cmp(ls, T([[-INF, -INF], [INF, 1.0], [NAN, 0.0]]), 1, tols=F64, msg="logsumexp special")
    err(TypeError, ls, x)                                      # dim is required
    for name in ("softmax", "log_softmax"):
        f = call(name)
        for dim in (0, 1, -1):
            cmp(f, x, dim, tols=F64, msg=f"{name} dim={dim}")
        cmp(f, x.float(), 2, dtype=torch.float64, tols=F64, msg=f"{name} dtype=float64")
        cmp(f, T([1, 2, 3], "int64"), 0, dtype=torch.float32, tols=F32, msg=f"{name} int64 dtype=float32")
        err(NotImplementedError, f, T([1, 2, 3], "int64"), 0)
        err(TypeError, f, x)                                   # dim is required


def test_round_decimals_and_logit_eps():
    x = T([1.2345, -2.5551, 0.125, 1234.5, -2555.1, 2.5, -0.5, NAN, INF])
    for d in (0, 1, 2, -2):
        cmp(call("round"), x, decimals=d, tols=F64, msg=f"round decimals={d}")
    p = T([0.0, 1e-8, 0.3, 0.5, 0.9, 1.0, -0.5, 1.5, NAN])
    # eps clamps x to [eps, 1 - eps]; torch checks no range: eps > 0.5 swaps the bounds, eps < 0 does nothing
    for eps in (None, 1e-6, 0.1, 0.6, -1.0):
        cmp(call("logit"), p, eps=eps, tols=F64, msg=f"logit eps={eps}")
        cmp(call("logit"), p.float(), eps=eps, tols=F32, msg=f"logit float32 eps={eps}")


# ---- out= ------------------------------------------------------------------------------------------------
def _with_out(name, out_dtype, out_shape, *args):
    def fn(lib, *a):
        o = lib.zeros(out_shape, dtype=getattr(lib, out_dtype))
        r = getattr(sp(lib), name)(*a, out=o)
        assert r is o, f"{lib.__name__}.special.{name}(out=) did not return out"
        return o
    return fn


def test_out_unary_and_binary():
    x = T(lin(-30, 30, 13))
    cmp(_with_out("i0e", "float64", (13,)), x, name="i0e", msg="i0e out")
    cmp(_with_out("i0e", "float64", (0,)), x, name="i0e", msg="i0e empty out is resized")
    cmp(_with_out("i0e", "float32", (13,)), x, name="i0e", msg="float64 result into a float32 out")
    cmp(_with_out("bessel_j0", "float64", (13,)), x, name="bessel_j0", msg="bessel_j0 out")
    err(RuntimeError, _with_out("i0e", "int64", (13,)), x)     # Double can't be cast to Long
    a, b = T([0.5, 1.5, 2.0]), T([[1.0], [2.0]])
    cmp(_with_out("xlog1py", "float64", (2, 3)), a, b, name="xlog1py", msg="xlog1py out, broadcast")
    cmp(_with_out("xlog1py", "float64", (0,)), a, b, name="xlog1py", msg="xlog1py empty out is resized")
    cmp(_with_out("zeta", "float32", (2, 3)), a + 1, b, name="zeta", msg="zeta float64 into float32 out")
    cmp(_with_out("chebyshev_polynomial_t", "float64", (3,)), a, 3, tols=F64, msg="polynomial out")
    err(RuntimeError, _with_out("xlog1py", "int64", (2, 3)), a, b)


# ---- gradients -------------------------------------------------------------------------------------------
GRAD_POINTS = {
    "i0": [-3.0, -0.5, 0.0, 0.7, 2.0, 10.0], "i0e": [-3.0, -0.5, 0.0, 0.7, 2.0, 10.0, 300.0],
    "i1": [-3.0, -0.5, 0.0, 0.7, 2.0, 10.0], "i1e": [-3.0, -0.5, 0.0, 0.7, 2.0, 10.0, 300.0],
    "ndtr": [-5.0, -1.0, 0.0, 0.5, 3.0], "ndtri": [0.01, 0.3, 0.5, 0.8, 0.999],
    "log_ndtr": [-30.0, -5.0, -1.0, 0.0, 2.0, 8.0], "erfcx": [-3.0, -0.5, 0.0, 1.0, 10.0, 100.0],
    "sinc": [-2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 3.7], "entr": [0.01, 0.3, 1.0, 2.5, 10.0],
    "digamma": [-2.5, -0.5, 0.3, 1.0, 4.0, 50.0], "psi": [-2.5, -0.5, 0.3, 1.0, 4.0, 50.0],
    "gammaln": [-2.5, -0.5, 0.3, 1.0, 4.0, 50.0], "erf": [-2.0, -0.3, 0.0, 1.0, 3.0],
    "erfc": [-2.0, -0.3, 0.0, 1.0, 3.0], "erfinv": [-0.9, -0.3, 0.0, 0.5, 0.99],
    "expit": [-20.0, -1.0, 0.0, 2.0, 30.0], "exp2": [-5.0, 0.0, 1.5, 10.0], "expm1": [-5.0, -1e-3, 0.0, 1.0, 5.0],
    "log1p": [-0.9, -1e-3, 0.0, 1.0, 100.0], "logit": [0.01, 0.3, 0.5, 0.9], "round": [-1.5, -0.3, 0.7, 2.5],
}


def grads(lib, fn, inputs, differentiable):
    """fn's output and the gradients of sum(out * w) with respect to inputs[i] for i in differentiable."""
    args, leaves = [], []
    for i, a in enumerate(inputs):
        if isinstance(a, torch.Tensor):
            v = a.detach() if lib is torch else kin(a.detach())    # same strides in both (expanded too)
            if i in differentiable:
                v.requires_grad_()
                leaves.append(v)
            args.append(v)
        else:
            args.append(a)
    out = fn(lib, *args)
    g = torch.Generator().manual_seed(11)
    w = torch.empty(tuple(out.shape), dtype=torch.float64).uniform_(-1, 1, generator=g)
    (out * (w if lib is torch else kin(w))).sum().backward()
    return out.detach(), [x.grad for x in leaves]


def check_grads(fn, *inputs, differentiable=(0,), tols=F64, msg=""):
    kout, kg = grads(kiln, fn, inputs, differentiable)
    tout, tg = grads(torch, fn, inputs, differentiable)
    close(kout, tout, *tols, msg=f"{msg} value")
    for i, (a, b) in enumerate(zip(kg, tg)):
        assert b is not None
        assert a is not None, f"{msg}: kiln gave no gradient for input {differentiable[i]}"
        close(a, b, *tols, msg=f"{msg} grad of input {differentiable[i]}")


@pytest.mark.parametrize("name", list(GRAD_POINTS))
def test_grad_unary(name):
    tols = _TRIGAMMA if name in ("digamma", "psi") else F64      # d digamma = trigamma
    check_grads(call(name), T(GRAD_POINTS[name]), tols=tols, msg=name)
    check_grads(call(name), T(GRAD_POINTS[name]).reshape(1, -1).expand(2, -1), tols=tols, msg=f"{name} expanded")


def test_grad_binary():
    x, y = T([-2.0, 0.0, 0.5, 3.0]).reshape(-1, 1), T([-0.5, 0.5, 2.0, 10.0])
    check_grads(call("xlog1py"), x, y, differentiable=(0, 1), msg="xlog1py")
    check_grads(call("xlogy"), x, y + 1, differentiable=(0, 1), msg="xlogy")
    check_grads(call("xlog1py"), x, 2.5, msg="xlog1py(tensor, number)")
    check_grads(call("xlog1py"), 2.5, y, differentiable=(1,), msg="xlog1py(number, tensor)")
    s, q = T([1.5, 2.0, 3.5]).reshape(-1, 1), T([0.3, 1.0, 2.5, 10.0])
    check_grads(call("zeta"), s, q, differentiable=(1,), msg="zeta wrt q")
    check_grads(call("zeta"), 2.0, q, differentiable=(1,), msg="zeta(number, q)")
    a, xx = T([0.5, 1.0, 2.5, 10.0]).reshape(-1, 1), T([0.1, 0.5, 1.0, 3.0, 12.0])
    for name in ("gammainc", "gammaincc"):
        check_grads(call(name), a, xx, differentiable=(1,), msg=f"{name} wrt x")
    check_grads(lambda lib, u, v: lib.igamma(u, v), a, xx, differentiable=(1,), msg="igamma wrt x")
    check_grads(lambda lib, u, v: u.igammac(v), a, xx, differentiable=(1,), msg="igammac wrt x")


@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_grad_multigammaln(p):
    x = T([(p - 1) / 2 + v for v in (0.2, 0.9, 2.5, 7.0, 30.0)])
    check_grads(lambda lib, v: sp(lib).multigammaln(v, p), x, msg=f"multigammaln p={p}")
    check_grads(lambda lib, v: lib.mvlgamma(v, p), x, msg=f"mvlgamma p={p}")


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_grad_polygamma(n):
    # d polygamma(n, .) = polygamma(n + 1, .): trigamma's accuracy when n = 0
    x = T([-2.5, -0.5, 0.3, 1.0, 4.0, 50.0])
    check_grads(lambda lib, v: sp(lib).polygamma(n, v), x, tols=_TRIGAMMA if n in (0, 1) else F64,
                msg=f"polygamma n={n}")


# The derivatives kiln has and torch lacks (torch marks these functions non-differentiable): kiln's
# gradient against central differences (h = 1e-6) of torch's float64 function. Central differences carry
# ~eps|f|/h = 2e-10 absolute round-off for |f| <~ 1 and h^2 |f'''| / 6 truncation, hence rtol 1e-6 and a
# small atol 1e-8 (for points where the derivative is near 0). The points avoid 0 and the poles, and
# x in [4.5, 10] for j0 / j1 / y0 / y1, where torch's function (its asymptotic branch from x = 5) is smooth
# only to ~1e-1 in the derivative.
_JPTS = [0.3, 0.9, 1.7, 2.6, 3.3, 4.2, 11.3, 14.7, 19.1, 23.9, 31.4, 38.2]
FD_POINTS = {
    "bessel_j0": [-v for v in _JPTS[::2]] + _JPTS, "bessel_j1": [-v for v in _JPTS[1::2]] + _JPTS,
    "bessel_y0": _JPTS, "bessel_y1": _JPTS,
    "modified_bessel_i0": [-12.5, -3.3, -0.9, -0.3, 0.3, 0.9, 1.7, 3.3, 7.1, 12.5],
    "modified_bessel_i1": [-12.5, -3.3, -0.9, -0.3, 0.3, 0.9, 1.7, 3.3, 7.1, 12.5],
    "modified_bessel_k0": [0.05, 0.3, 0.9, 1.7, 3.3, 7.1, 12.5, 30.0],
    "modified_bessel_k1": [0.05, 0.3, 0.9, 1.7, 3.3, 7.1, 12.5, 30.0],
    "scaled_modified_bessel_k0": [0.05, 0.3, 0.9, 1.7, 3.3, 7.1, 12.5, 30.0, 100.0, 700.0],
    "scaled_modified_bessel_k1": [0.05, 0.3, 0.9, 1.7, 3.3, 7.1, 12.5, 30.0, 100.0, 700.0],
    "spherical_bessel_j0": [-20.3, -5.1, -0.9, -0.3, 0.3, 0.9, 1.7, 3.3, 7.1, 12.5, 40.2],
}


@pytest.mark.parametrize("name", list(FD_POINTS))
def test_grad_bessel_against_finite_differences(name):
    x = T(FD_POINTS[name])
    f = getattr(torch.special, name)
    assert not f(x.clone().requires_grad_()).requires_grad   # torch: non-differentiable
    h = 1e-6
    fd = (f(x + h) - f(x - h)) / (2 * h)
    w = torch.linspace(-1.0, 1.5, x.numel(), dtype=torch.float64)
    kx = kin(x).requires_grad_()
    ky = getattr(sp(kiln), name)(kx)
    close(ky, f(x), *tol(name, "float64"), msg=f"{name} value")
    (ky * kin(w)).sum().backward()
    assert kx.grad is not None, f"kiln gave no gradient for {name}"
    close(kx.grad, fd * w, 1e-6, 1e-8, msg=f"{name} grad vs central differences of torch's {name}")


NON_DIFFERENTIABLE = ["airy_ai"] + POLY


@pytest.mark.parametrize("name", NON_DIFFERENTIABLE)
def test_grad_non_differentiable(name):
    # torch marks airy_ai and the polynomials non-differentiable: the output does not require grad, and
    # backward raises RuntimeError ("element 0 of tensors does not require grad and does not have a grad_fn")
    def run(lib, x, *rest):
        y = getattr(sp(lib), name)(x, *rest)
        assert not y.requires_grad, f"{lib.__name__}: {name}'s output requires grad"
        y.sum().backward()
    x = T([0.3, 0.7, 1.5]).requires_grad_()
    if name == "airy_ai":
        err(RuntimeError, run, x)
        return
    err(RuntimeError, run, x, 3)
    err(RuntimeError, run, x, T(3.0))
    err(RuntimeError, run, x.detach(), T([1.0, 2.0, 3.0]).requires_grad_())     # n requiring grad
    err(RuntimeError, run, x, T([1.0, 2.0, 3.0]).requires_grad_())


def _not_implemented_cases():
    u, v = T([1.5, 2.0, 3.5]), T([0.5, 1.0, 2.5])
    g = lambda t: t.clone().requires_grad_()  # noqa: E731
    return {
        "zeta x": (lambda lib, a, b: sp(lib).zeta(a, b), (g(u), v)),
        "zeta both": (lambda lib, a, b: sp(lib).zeta(a, b), (g(u), g(v))),
        "zeta(x, number)": (lambda lib, a: sp(lib).zeta(a, 2.0), (g(u),)),
        "gammainc a": (lambda lib, a, b: sp(lib).gammainc(a, b), (g(u), v)),
        "gammaincc a": (lambda lib, a, b: sp(lib).gammaincc(a, b), (g(u), v)),
        "gammainc both": (lambda lib, a, b: sp(lib).gammainc(a, b), (g(u), g(v))),
        "igamma a": (lambda lib, a, b: lib.igamma(a, b), (g(u), v)),
        "igammac a": (lambda lib, a, b: a.igammac(b), (g(u), v)),
    }


@pytest.mark.parametrize("case", list(_not_implemented_cases()))
def test_grad_not_implemented(case):
    # torch computes these outputs with requires_grad=True, then backward raises NotImplementedError
    # ("the derivative for 'zeta' / 'igamma: input' / 'igammac: input' is not implemented")
    fn, args = _not_implemented_cases()[case]

    def run(lib, *a):
        y = fn(lib, *a)
        assert y.requires_grad, f"{lib.__name__}: {case}: the output should require grad"
        y.sum().backward()
    err(NotImplementedError, run, *args)
