"""kiln.fft vs torch.fft. Compared: the values, dtypes and shapes of every transform (fft, ifft, fft2,
ifft2, fftn, ifftn, rfft, irfft, rfft2, irfft2, rfftn, irfftn, hfft, ihfft, hfft2, ihfft2, hfftn, ihfftn)
for float32 / float64 / complex64 / complex128 / integer / bool inputs (integers and bools become
float32 / complex64), over power-of-two, prime and composite lengths, zero padding and trimming (n, s,
s with -1 entries), the dim / s forms (negative, out of order, subsets, a plain int), each norm,
transposed / sliced / expanded / batched inputs, the c2r conventions (default length 2*(m-1), odd
lengths, the last listed dim is the halved one, non-Hermitian input); fftfreq / rfftfreq (n, d, dtype,
requires_grad) and fftshift / ifftshift; out=; the gradients of real losses for real and complex
float64 inputs; and torch's exception classes. The two libraries use different FFT algorithms, so
values agree within round-off (relative to the largest output), never bit for bit."""
import numpy as np
import pytest
import torch

import kiln
from kiln import fft as kfft
from helpers import dname, kdt, kiln_threads, make, to_kiln, to_torch

FFT = {torch: torch.fft, kiln: kfft}
C2C = ["fft", "ifft"]
R2C = ["rfft", "ihfft"]          # real in, half-spectrum out
C2R = ["irfft", "hfft"]          # half-spectrum in, real out (length 2*(m-1) by default)
ONE_D = C2C + R2C + C2R
TWO_D = ["fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2"]
N_D = ["fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn"]
ALL = ONE_D + TWO_D + N_D
REAL_ONLY = {"rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn"}  # torch: complex input raises
NORMS = [None, "backward", "ortho", "forward"]
DTYPES = ["float32", "float64", "complex64", "complex128", "int64", "int32", "uint8", "bool"]
SIZES = [1, 2, 7, 8, 12, 13, 16, 30, 97, 128, 1000]


# ---- helpers ---------------------------------------------------------------------------------------------
def rand(shape, dtype="float64", seed=0):
    if dtype in ("float32", "float64", "complex64", "complex128"):
        return make(shape, dtype, low=-1.0, high=1.0, seed=seed)
    return make(shape, dtype, low=-5, high=5, seed=seed)


def cplx(dtype):
    """The complex dtype of the same precision (the input a c2c / c2r transform normally gets)."""
    return {"float32": "complex64", "float64": "complex128"}.get(dtype, dtype)


def close(k, t, msg=""):
    """kiln result k vs torch result t: type, dtype and shape exactly; values within FFT round-off
    (rtol, and an atol scaled by the largest finite output, for single / double precision)."""
    assert isinstance(k, kiln.Tensor), f"{msg}: kiln returned {type(k)}"
    assert dname(k.dtype) == dname(t.dtype), f"{msg}: dtype {k.dtype} != torch {t.dtype}"
    assert tuple(k.shape) == tuple(t.shape), f"{msg}: shape {tuple(k.shape)} != torch {tuple(t.shape)}"
    t = t.detach()
    got = to_torch(k.detach())
    if not (t.is_floating_point() or t.is_complex()):
        assert torch.equal(got, t), f"{msg}: values differ\nkiln  {got}\ntorch {t}"
        return
    fin = t[torch.isfinite(t)]
    scale = max(1.0, fin.abs().max().item()) if fin.numel() else 1.0
    rtol, atol = {"float32": (1e-5, 1e-5), "complex64": (1e-5, 1e-5), "float64": (1e-10, 1e-12),
                  "complex128": (1e-10, 1e-12), "float16": (2e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5)}[dname(t.dtype)]
    torch.testing.assert_close(got, t, rtol=rtol, atol=atol * scale, equal_nan=True, msg=msg or None)


def _k(args):
    # resolve_conj: torch's ifft / ihfft of real input return lazily conjugated views
    return [to_kiln(a.resolve_conj()) if isinstance(a, torch.Tensor) else a for a in args]


def _kkw(kw):
    return {n: (kdt(dname(v)) if isinstance(v, torch.dtype) else to_kiln(v) if isinstance(v, torch.Tensor) else v)
            for n, v in kw.items()}


def cmp(name, *args, msg="", **kw):
    """torch.fft.<name> on torch tensors vs kiln.fft.<name> on their kiln copies (same layout)."""
    t = getattr(torch.fft, name)(*args, **kw)
    k = getattr(kfft, name)(*_k(args), **_kkw(kw))
    close(k, t, f"{name}({kw}) {msg}")
    return k, t


def err(exc, name, *args, **kw):
    """torch.fft.<name> and kiln.fft.<name> both raise exc (torch's class)."""
    with pytest.raises(exc):
        getattr(torch.fft, name)(*args, **kw)
    with pytest.raises(exc):
        getattr(kfft, name)(*_k(args), **_kkw(kw))


def input_for(name, shape, prec="float64", seed=0):
    """A natural input: real for the real-input transforms, complex for the others."""
    return rand(shape, prec if name in REAL_ONLY else cplx(prec), seed)


# ---- dtypes ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ALL)
def test_dtypes(name, dtype):
    # torch: float32 -> complex64 / float32, float64 -> complex128 / float64, ints and bool -> the
    # default dtype (complex64 / float32); the real-input transforms reject complex input
    x = rand((3, 5, 8), dtype)
    if name in REAL_ONLY and dtype.startswith("complex"):
        err(RuntimeError, name, x)
        return
    cmp(name, x, msg=dtype)


@pytest.mark.parametrize("name", ["fft", "irfft", "rfftn", "hfft2"])
def test_every_integer_dtype_promotes_to_default(name):
    for dt in ("int8", "int16", "uint16", "uint32", "uint64"):
        cmp(name, rand((2, 6), dt), msg=dt)


# ---- sizes -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", ONE_D)
def test_1d_sizes(name, n):
    for prec in ("float32", "float64"):
        if name in C2R:
            # explicit odd / even output length n from n//2+1 bins, and the default 2*(m-1) from m = n bins
            cmp(name, rand((2, n // 2 + 1), cplx(prec)), n=n, msg=prec)
            if n > 1:
                cmp(name, rand((2, n), cplx(prec), seed=1), msg=prec)
        else:
            cmp(name, input_for(name, (2, n), prec), msg=prec)
            if name in C2C:
                cmp(name, rand((2, n), prec, seed=1), msg=f"real {prec}")


@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (12, 30), (8, 16), (97, 3), (2, 3, 5), (4, 1, 9)])
def test_nd_sizes(shape):
    for name in TWO_D + N_D:
        # a last dim of 1 bin gives a c2r transform 2*(1-1) = 0 points by default: ask for 1 instead
        kw = dict(s=shape[-2:]) if name in ("irfft2", "hfft2", "irfftn", "hfftn") and shape[-1] == 1 else {}
        for prec in ("float32", "float64"):
            cmp(name, input_for(name, shape, prec), msg=prec, **kw)


@pytest.mark.parametrize("name", ONE_D)
def test_1d_n_pads_and_trims(name):
    # c2c / r2c: n < len trims, n > len zero-pads; c2r: the first n//2+1 bins are used, padded with zeros
    x = input_for(name, (3, 6 if name in C2R else 10))
    for n in (1, 3, 4, 9, 10, 11, 16, 25):
        cmp(name, x, n=n)
        cmp(name, x, n=n, norm="forward")
        cmp(name, x, n=n, dim=0)  # along a non-last dim of length 3


# ---- norm ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ALL)
def test_norm(name, norm):
    # the scale is 1/n, 1/sqrt(n) or 1 of the *signal* length after padding / trimming (for c2r: the output)
    cmp(name, input_for(name, (3, 6, 5), "float32"), norm=norm, msg="float32")
    x = input_for(name, (3, 6, 5), "float64")
    cmp(name, x, norm=norm)
    if name in ONE_D:
        cmp(name, x, n=7, norm=norm)
        cmp(name, x, n=4, norm=norm)
    else:
        cmp(name, x, s=(4, 7), norm=norm)
        cmp(name, x, s=(9, 2), dim=(0, 2), norm=norm)


@pytest.mark.parametrize("name", ALL)
def test_invalid_norm(name):
    x = input_for(name, (4, 6))
    for bad in ("bad", "", "Backward", "FORWARD"):
        err(RuntimeError, name, x, norm=bad)


# ---- s and dim -------------------------------------------------------------------------------------------
ND_CASES = [dict(), dict(dim=(0,)), dict(dim=(-1,)), dict(dim=(1,)), dict(dim=(2, 0)), dict(dim=(-1, -3)),
            dict(dim=(0, 1, 2)), dict(dim=(1, -1)), dict(dim=(2, 1, 0)), dict(s=(5, 7)), dict(s=(3,)),
            dict(s=(4, -1), dim=(0, 2)), dict(s=(-1, -1)), dict(s=(-1, 9), dim=(1, 2)), dict(s=(3, 8), dim=(-1, 0)),
            dict(s=(2, 5, 9)), dict(s=(6, 2, 3), dim=(1, 2, 0))]
TWO_D_CASES = [dict(), dict(dim=(0, 2)), dict(dim=(2, 0)), dict(dim=(-3, -1)), dict(dim=(1, 0)), dict(s=(4, 9)),
               dict(s=(-1, 5)), dict(s=(3, 4), dim=(1, 0)), dict(s=(6, 7), dim=(0, -1)), dict(s=(-1, -1))]


@pytest.mark.parametrize("name", N_D)
def test_nd_s_and_dim(name):
    # for the r2c / c2r forms the *last* dim listed is the halved one (dim=(2, 0) halves dim 0)
    x = input_for(name, (4, 5, 6))
    for kw in ND_CASES:
        cmp(name, x, **kw)
    cmp(name, input_for(name, (4, 5, 6), "float32"), dim=(2, 0), s=(3, 7))


@pytest.mark.parametrize("name", N_D)
def test_nd_plain_int_s_and_dim(name):
    # torch's argument parser takes a plain int where s / dim are int lists
    x = input_for(name, (4, 5, 6))
    cmp(name, x, dim=1)
    cmp(name, x, s=7, dim=0)


@pytest.mark.parametrize("name", TWO_D)
def test_2d_s_and_dim(name):
    x = input_for(name, (4, 5, 6))
    for kw in TWO_D_CASES:
        cmp(name, x, **kw)


def test_fftn_no_dims_is_a_complex_copy():
    # fftn / ifftn with dim=() (or of a 0-dim tensor) transform nothing and return the input as complex
    for name in ("fftn", "ifftn"):
        cmp(name, rand((2, 3)), dim=())
        cmp(name, rand((2, 3), "complex64"), s=[], dim=[])
        cmp(name, rand((2, 3), "int64"), dim=())
        cmp(name, torch.tensor(1.5))
        cmp(name, torch.tensor(2 - 1j, dtype=torch.complex128))
    for name in ("rfftn", "irfftn", "hfftn", "ihfftn"):   # "must transform at least one axis"
        err(RuntimeError, name, rand((2, 3)), dim=())
        err(RuntimeError, name, torch.tensor(1.5))


# ---- layouts and batches ---------------------------------------------------------------------------------
def _layouts(name, prec):
    def r(shape, seed):
        return input_for(name, shape, prec, seed)
    return [("transposed", r((10, 6), 0).t()),
            ("step-sliced", r((6, 20), 1)[..., ::2]),
            ("offset-sliced", r((12, 11), 2)[::2, 1:]),
            ("expanded", r((1, 10), 3).expand(6, 10)),
            ("permuted", r((5, 10, 6), 4).permute(2, 0, 1)),
            ("offset-step-sliced", r((6, 30), 5)[1:, 3:23:2])]


@pytest.mark.parametrize("name", ALL)
def test_non_contiguous(name):
    for prec in ("float32", "float64"):
        for label, x in _layouts(name, prec):
            cmp(name, x, msg=f"{label} {prec}")
        x = input_for(name, (7, 6), prec, seed=6)
        if name in ONE_D:
            cmp(name, x, dim=0, msg=f"dim 0 {prec}")
            cmp(name, x.t(), dim=0, n=8, msg=f"transposed dim 0 {prec}")
        else:
            cmp(name, x.t(), dim=(1, 0), msg=f"transposed dims (1, 0) {prec}")


@pytest.mark.parametrize("name", ALL)
def test_batch_dims(name):
    x = input_for(name, (2, 3, 4, 9))
    if name in ONE_D:
        for dim in (-1, 2, 1, 0):
            cmp(name, x, dim=dim)
    else:
        for dim in ((-2, -1), (0, 3), (3, 1), (1, 2)):
            cmp(name, x, dim=dim)
    cmp(name, x[:, :, ::2], msg="strided batch")


# ---- c2r conventions -------------------------------------------------------------------------------------
def test_c2r_lengths_and_hermitian_conventions():
    x = rand((2, 5), "complex128")
    for name in C2R:
        cmp(name, x)            # default: 2*(5-1) = 8
        cmp(name, x, n=9)       # odd: uses all 5 bins, no Nyquist bin
        cmp(name, x, n=7)       # odd, trims to 4 bins
        cmp(name, x, n=1)
        cmp(name, rand((2, 5), "float64"))   # real input is taken as complex
    # not Hermitian: imaginary DC and Nyquist bins (what torch does with them is the reference)
    h = torch.tensor([1 + 3j, 2 - 1j, -0.5 + 0.25j, 4 - 2j], dtype=torch.complex128)
    for name in C2R:
        for n in (None, 6, 7, 5, 4, 3):
            cmp(name, h, n=n)
    # 2-d / n-d: the non-last dims are full complex transforms, non-Hermitian there too
    y = rand((4, 3, 5), "complex128", seed=2)
    for name in ("irfft2", "hfft2", "irfftn", "hfftn"):
        cmp(name, y)
        cmp(name, y, s=(4, 9))
        cmp(name, y, dim=(2, 0))        # dim 0 is halved: output length 2*(4-1)
        cmp(name, y, dim=(2, 0), s=(5, 7))
        cmp(name, y.to(torch.complex64), s=(-1, -1))
    # round trips, compared to torch's (both are ~ the input)
    r = rand((3, 9), "float64", seed=3)
    for fwd, inv in (("rfft", "irfft"), ("ihfft", "hfft")):
        spec = getattr(torch.fft, fwd)(r)
        for n in (9, 8, None):
            cmp(inv, spec, n=n, msg=f"{inv}({fwd})")
    cmp("irfftn", torch.fft.rfftn(rand((4, 6, 7), "float32")), s=(4, 6, 7), msg="irfftn(rfftn)")
    cmp("hfftn", torch.fft.ihfftn(rand((4, 6, 7), "float64")), s=(4, 6, 7), msg="hfftn(ihfftn)")


# ---- 0-dim and empty -------------------------------------------------------------------------------------
def test_zero_dim_and_empty():
    s = torch.tensor(1.5)
    for name in ONE_D:
        err(IndexError, name, s)                      # "Dimension specified as -1 but tensor has no dimensions"
    for name in TWO_D:
        err(IndexError, name, s)
    e = torch.empty(0)
    for name in ONE_D:
        err(RuntimeError, name, e if name not in C2R else e.to(torch.complex64))  # 0 (or -2) data points
    err(RuntimeError, "fftn", torch.empty(0, 3))
    err(RuntimeError, "rfft2", torch.empty(3, 0))
    # zero padding an empty signal gives zeros
    cmp("fft", e, n=4)
    cmp("rfft", e, n=4)
    cmp("irfft", e.to(torch.complex64), n=4)
    cmp("fftn", torch.empty(0, 3), s=(2, 3))


# ---- errors ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ONE_D)
def test_bad_n(name):
    x = input_for(name, (6,))
    for n in (0, -1, -2):
        err(RuntimeError, name, x, n=n)              # "Invalid number of data points"


@pytest.mark.parametrize("name", TWO_D + N_D)
def test_bad_s(name):
    x = input_for(name, (4, 6))
    for s in ((0, 6), (4, 0), (-2, 6), (4, -3)):
        err(RuntimeError, name, x, s=s)
    err(RuntimeError, name, x, s=(3,), dim=(0, 1))    # s and dim of different lengths
    err(RuntimeError, name, x, s=(3, 4, 5), dim=(0, 1))
    if name in N_D:
        err(RuntimeError, name, x, s=(3, 4, 5))       # s longer than the input's dims
    else:
        err(RuntimeError, name, x, s=(3,))            # fft2's default dim is (-2, -1)
    err(RuntimeError, name, x, dim=(0, 0))            # "FFT dims must be unique"
    err(RuntimeError, name, x, dim=(1, -1))


@pytest.mark.parametrize("name", ALL)
def test_dim_out_of_range(name):
    x = input_for(name, (3, 4, 5))
    if name in ONE_D:
        for d in (3, -4, 10):
            err(IndexError, name, x, dim=d)
        err(IndexError, name, input_for(name, (5,)), dim=1)
        err(IndexError, name, input_for(name, (5,)), dim=-2)
    else:
        for d in ((0, 3), (-4, 1), (5,) if name in N_D else (5, 0)):
            err(IndexError, name, x, dim=d)
    if name in TWO_D:
        err(IndexError, name, input_for(name, (5,)))  # default dims (-2, -1) on a 1-d input


def test_c2r_output_length_below_one():
    one = rand((3, 1), "complex64")
    for name in C2R:
        err(RuntimeError, name, one)                  # 2*(1-1) = 0 points
        err(RuntimeError, name, one, n=0)
        cmp(name, one, n=1)
        cmp(name, one, n=2)
    for name in ("irfft2", "hfft2", "irfftn", "hfftn"):
        err(RuntimeError, name, one)
        err(RuntimeError, name, one, s=(3, 0))
        cmp(name, one, s=(3, 1))


def test_complex_input_to_real_transforms():
    x = rand((4, 6), "complex64")
    for name in sorted(REAL_ONLY):
        err(RuntimeError, name, x)
        err(RuntimeError, name, x.to(torch.complex128), norm="ortho")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_unsupported_on_cpu(dtype):
    # torch 2.13 on CPU: "Unsupported dtype Half / BFloat16" (RuntimeError) for every transform
    x = make((4, 8), dtype, low=-1, high=1)
    for name in ALL:
        err(RuntimeError, name, x)
    err(RuntimeError, "fft", x, n=6)


# ---- fftfreq / rfftfreq ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["fftfreq", "rfftfreq"])
def test_freq(name):
    for n in (1, 2, 5, 8, 11, 64):
        for d in (1.0, 0.5, 2.5, -1.0, 3):
            cmp(name, n, d, msg=f"n={n} d={d}")
            cmp(name, n, d=d, dtype=torch.float64, msg=f"n={n} d={d}")
        cmp(name, n)
        for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            cmp(name, n, 0.1, dtype=dt)
    cmp(name, 0)                     # fftfreq(0): empty; rfftfreq(0): [nan] (0/0)
    cmp(name, 6, 0.0)                # d = 0: nan at 0, +-inf elsewhere
    for dt, rg in ((None, True), (torch.float64, True), (torch.float32, False)):
        kw = dict(requires_grad=rg) if dt is None else dict(dtype=dt, requires_grad=rg)
        t = getattr(torch.fft, name)(7, **kw)
        k = getattr(kfft, name)(7, **_kkw(kw))
        close(k, t, f"{name} {kw}")
        assert k.requires_grad == t.requires_grad and k.is_leaf == t.is_leaf, kw


def test_freq_errors():
    for name in ("fftfreq", "rfftfreq"):
        err(RuntimeError, name, 5, dtype=torch.int64)     # "requires a floating point or complex dtype"
        err(RuntimeError, name, 5, dtype=torch.int32)
        # complex passes fftfreq's check, then arange has no complex kernel: torch raises
        # NotImplementedError, a subclass of RuntimeError
        err(RuntimeError, name, 5, dtype=torch.complex64)
    err(RuntimeError, "fftfreq", -1)                       # negative dimension


# ---- fftshift / ifftshift --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["fftshift", "ifftshift"])
def test_shift(name):
    dims = {(5,): [0, -1, (0,)], (6,): [0, -1, [-1]], (1,): [0], (0, 3): [0, -1, (1, 0), (1, 1)],
            (3, 4, 5): [0, -1, (0, 2), [-1, 0], (1,), (1, 1), (2, 0, 1)], (4, 6): [1, (0, 1), (-2,)]}
    for shape, ds in dims.items():
        for dtype in ("float64", "complex64", "int64", "bool"):
            x = rand(shape, dtype)
            cmp(name, x, msg=dtype)                            # dim=None: every dim
            for dim in ds:
                cmp(name, x, dim=dim, msg=dtype)
    x = rand((6, 7), "complex128")
    cmp(name, x.t(), msg="transposed")
    cmp(name, x[:, ::2], dim=1, msg="strided")
    cmp(name, rand((4, 6, 8), "float32")[::2, 1:, ::3], dim=(0, 2), msg="sliced")


def test_shift_errors():
    for name in ("fftshift", "ifftshift"):
        err(RuntimeError, name, torch.tensor(1.0))           # 0-dim: roll with no shifts
        err(RuntimeError, name, rand((3,)), dim=())
        err(IndexError, name, torch.tensor(1.0), dim=0)
        err(IndexError, name, rand((5,)), dim=1)
        err(IndexError, name, rand((2, 5)), dim=(0, -3))


# ---- out= ------------------------------------------------------------------------------------------------
def test_out():
    x = rand((3, 8), "float32")
    for name, kw, odt, shape in (("fft", {}, "complex64", (3, 8)), ("rfft", dict(n=10), "complex64", (3, 6)),
                                 ("irfft", {}, "float32", (3, 14)), ("fftn", dict(dim=(1, 0)), "complex64", (3, 8)),
                                 ("ihfft2", {}, "complex64", (3, 5))):
        for oshape in (shape, (0,)):                          # exact, and resized from empty
            to = torch.zeros(oshape, dtype=getattr(torch, odt))
            ko = kiln.empty(oshape, dtype=kdt(odt))
            tr = getattr(torch.fft, name)(x, **kw, out=to)
            kr = getattr(kfft, name)(to_kiln(x), **kw, out=ko)
            assert kr is ko or kr.data_ptr() == ko.data_ptr(), name
            assert tr is to
            close(ko, to, f"{name} out {oshape}")
    for name, odt in (("fft", torch.float32), ("rfft", torch.float32), ("irfft", torch.complex64)):
        err(RuntimeError, name, x, out=torch.zeros(8, dtype=odt))  # complex / real output required
    xg = rand((3, 8), "float64")
    with pytest.raises(RuntimeError):                          # out= does not support autograd
        torch.fft.fft(xg.clone().requires_grad_(), out=torch.zeros(3, 8, dtype=torch.complex128))
    with pytest.raises(RuntimeError):
        kfft.fft(to_kiln(xg).requires_grad_(), out=kiln.empty((3, 8), dtype=kiln.complex128))
    to, ko = torch.empty(0), kiln.empty((0,), dtype=kiln.float32)
    torch.fft.fftfreq(6, 0.5, out=to)
    kfft.fftfreq(6, 0.5, out=ko)
    close(ko, to, "fftfreq out")


# ---- autograd --------------------------------------------------------------------------------------------
GRAD_CASES = {
    "fft": [dict(), dict(n=12), dict(n=5), dict(n=7, dim=0)],
    "ifft": [dict(), dict(n=12), dict(n=5), dict(n=2, dim=0)],
    "rfft": [dict(), dict(n=12), dict(n=5), dict(n=7, dim=0)],
    "ihfft": [dict(), dict(n=11), dict(n=5), dict(n=4, dim=0)],
    # input (3, 5): default 8 points; n=13 pads (7 bins > 5); n=5 trims (3 bins); 9 odd, exact; 7 odd, trims
    "irfft": [dict(), dict(n=13), dict(n=5), dict(n=9), dict(n=7), dict(n=8, dim=0)],
    "hfft": [dict(), dict(n=13), dict(n=5), dict(n=9), dict(n=7), dict(n=3, dim=0)],
    "fftn": [dict(), dict(s=(5, 6)), dict(s=(2, 3), dim=(0, 2)), dict(dim=(2, 0))],
    "rfftn": [dict(), dict(s=(5, 7)), dict(s=(2, 3), dim=(2, 0)), dict(dim=(1,))],
    # input (3, 4, 5): last dim 5 bins; s=(5, 9) odd exact, (2, 12) pads, (3, 4) on dims (2, 0) trims
    "irfftn": [dict(), dict(s=(5, 9)), dict(s=(2, 12)), dict(s=(3, 4), dim=(2, 0)), dict(s=(-1, 7))],
}
GRAD_SHAPE = {"fft": (3, 8), "ifft": (3, 8), "rfft": (3, 8), "ihfft": (3, 8), "irfft": (3, 5), "hfft": (3, 5),
              "fftn": (3, 4, 5), "rfftn": (3, 4, 5), "irfftn": (3, 4, 5)}


def _grad(lib, name, x, kw, w1, w2):
    """d/dx of sum(Re(y) w1) + sum(Im(y) w2) (complex y) or sum(y w1) (real y), y = fft.<name>(x, **kw)."""
    conv = (lambda a: a) if lib is torch else to_kiln
    xi = conv(x).detach().clone().requires_grad_()
    y = getattr(FFT[lib], name)(xi, **kw)
    if w2 is None:
        loss = (y * conv(w1)).sum()
    else:
        loss = (y.real * conv(w1)).sum() + (y.imag * conv(w2)).sum()
    (g,) = lib.autograd.grad(loss, xi)
    return y, g


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_grad(name, norm):
    kinds = ["float64"] if name in REAL_ONLY else ["float64", "complex128"]
    for kind in kinds:
        x = rand(GRAD_SHAPE[name], kind, seed=1)
        for kw in GRAD_CASES[name]:
            kw = dict(kw, norm=norm)
            y = getattr(torch.fft, name)(x, **kw)
            w1 = rand(tuple(y.shape), "float64", seed=2)
            w2 = rand(tuple(y.shape), "float64", seed=3) if y.is_complex() else None
            _, tg = _grad(torch, name, x, kw, w1, w2)
            ky, kg = _grad(kiln, name, x, kw, w1, w2)
            assert ky.requires_grad, f"{name} {kind} {kw}: output does not require grad"
            close(kg, tg, f"{name} {kind} {kw} gradient")


# ---- real transforms of even length as complex ones of half the length -----------------------------
# (fft.cpp's half_r2c / half_c2r: even lengths >= 8 along a unit-stride real side; the rest takes
# FFTW's r2c / c2r.) Lengths around the threshold and the middle bin, rows from batch dims and from
# other transformed dims, strided and offset spectra, the halved dim not innermost, both precisions.
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [6, 8, 10, 14, 64, 4096, 4098])
def test_even_real_lengths(n, dtype):
    x = rand((3, n), dtype, seed=n)
    cmp("rfft", x)
    cmp("irfft", torch.fft.rfft(x), n=n)
    cmp("irfft", torch.fft.rfft(x), n=n - 1)                     # odd output: FFTW's c2r
    cmp("rfft", x[:, 1:n - 1], msg="rows at an odd offset")      # read as complex from a 4-byte boundary
    cmp("rfft", rand((2, 2 * n + 1), dtype)[:, 1:n + 1], msg="rows an odd stride apart")  # FFTW's r2c
    spec = torch.fft.rfft(rand((4, n), dtype, seed=1))
    cmp("irfft", spec[::2], n=n, msg="every other row")
    cmp("irfft", torch.fft.rfft(rand((n, 2), dtype)[:, 0]), n=n, msg="strided spectrum")
    cmp("rfft", rand((n, 3), dtype), dim=0)                      # halved dim not innermost
    cmp("irfft", torch.fft.rfft(rand((n, 3), dtype), dim=0), n=n, dim=0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_even_real_nd(dtype):
    x = rand((2, 6, 16), dtype, seed=5)
    for dim in [(1, 2), (0, 2), (2, 1), (0, 1, 2), (2, 0)]:
        cmp("rfftn", x, dim=dim)
        spec = torch.fft.rfftn(x, dim=dim)
        cmp("irfftn", spec, s=[x.shape[d] for d in dim], dim=dim)
    cmp("rfft2", x[:, ::2, :])
    cmp("irfft2", torch.fft.rfft2(x)[:, :, :5], s=(6, 8))


# n-dim transforms: the dims other than the last (the halved one of a real transform) run 16 columns
# at a time through a transposed scratch block (fft.cpp's column_blocks): columns past one block and
# a partial last block, three dims, a transformed dim of size 1, columns a stride apart (the copies
# element by element), and enough blocks to split between four threads; complex ones too, and one
# dim along a contiguous batch dim's columns. (Dims of 3 points keep FFTW's plans.)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nd_column_blocks(dtype):
    x = rand((3, 20, 70), dtype, seed=11)
    for dim in [(1, 2), (0, 1, 2), (2, 1), (0, 2)]:
        cmp("rfftn", x, dim=dim)
        cmp("irfftn", torch.fft.rfftn(x, dim=dim), s=[x.shape[d] for d in dim], dim=dim)
    x3 = rand((16, 18, 40), dtype, seed=17)  # three dims, two in column blocks
    cmp("rfftn", x3)
    cmp("irfftn", torch.fft.rfftn(x3), s=(16, 18, 40))
    xt = x.transpose(1, 2)  # the halved dim (1) contiguous in the input, its bins 20 apart in the output
    cmp("rfftn", xt, dim=(2, 1), msg="bins a stride apart")
    cmp("irfftn", torch.fft.rfftn(xt, dim=(2, 1)), s=(20, 70), dim=(2, 1), msg="bins a stride apart")
    cdt = "complex64" if dtype == "float32" else "complex128"
    z = rand((3, 20, 70), cdt, seed=13)
    for dim in [(1, 2), (0, 1, 2), (0, 2)]:
        cmp("fftn", z, dim=dim)
        cmp("ifftn", z, dim=dim)
    cmp("fftn", rand((16, 18, 40), cdt, seed=18))
    cmp("fftn", rand((20, 1, 70), cdt, seed=16), dim=(0, 1, 2), msg="a transformed dim of size 1")
    cmp("fft", z, dim=1)  # fft.cpp's columns_c2c
    cmp("fft", z.transpose(1, 2), dim=2, msg="no batch dim contiguous on both sides: FFTW's plan")
    with kiln_threads(4):
        big = rand((8, 128, 130), dtype, seed=12)
        cmp("rfft2", big)
        cmp("irfft2", torch.fft.rfft2(big), s=(128, 130))
        cmp("fft2", rand((8, 128, 130), cdt, seed=14))
        cmp("ifft", rand((8, 128, 130), cdt, seed=15), dim=1)


# One-dim complex transforms of contiguous rows (n >= 16) run row by row on kept plans, one per
# alignment of the rows: rows at an 8-byte offset (complex64), both directions, many rows (split
# between threads) and one.
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_rows_of_complex_transforms(dtype):
    x = rand((40, 66), dtype, seed=9)
    for name in ("fft", "ifft"):
        cmp(name, x[:, 1:65], msg="rows at an odd offset")
        cmp(name, x[:, :64])
        cmp(name, x[:1, 2:18], msg="one row of 16")
        cmp(name, x[:, 1:65], norm="ortho")


def test_c2r_op_needs_half_the_points():
    """_fft_c2r of n points reads n // 2 + 1 values: fewer is a RuntimeError (torch: an internal
    assert, also a RuntimeError), not a read past the input."""
    f = kiln.ops.aten._fft_c2r if hasattr(kiln.ops, "aten") else kiln.ops._fft_c2r
    x = kiln.from_numpy(np.ones(2, dtype=np.complex64))
    with pytest.raises(RuntimeError, match="needs 51 values"):
        f(x, [0], 0, 100)
    with pytest.raises(RuntimeError):
        torch._fft_c2r(torch.ones(2, dtype=torch.complex64), [0], 0, 100)
    assert f(kiln.from_numpy(np.ones(51, dtype=np.complex64)), [0], 0, 100).shape == (100,)
