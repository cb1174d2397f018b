"""kiln._scaled_mm and kiln.nn.functional.scaled_mm beyond the op database (op_db_lowp.py compares
them with torch 2.13): values pinned against a float64 sum of the same float8 inputs (torch's CPU
emulation sums in an ISA-dependent order), saturation of float8 outputs, the matrix-vector shapes,
F.scaled_mm's recipes and errors, and the derivative torch does not have (tensor-wise and row-wise,
bias, scale_result, a float8 training step with a float32 master weight), against the same
arithmetic in float64 written with plain torch ops."""
import numpy as np
import pytest
import torch

import kiln
import kiln.nn.functional as KF
import torch.nn.functional as TF
from helpers import kiln_threads, to_kiln, to_torch

E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2


@pytest.fixture(autouse=True)
def _seeded():
    """Every test draws the same inputs on every run (scales, upstream gradients, bias)."""
    torch.manual_seed(0)
    kiln.manual_seed(0)
KD = {E4: kiln.float8_e4m3fn, E5: kiln.float8_e5m2, torch.bfloat16: kiln.bfloat16, torch.float16: kiln.float16,
      torch.float32: kiln.float32, None: None}


def f8(shape, dtype, seed, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(dtype)


def reference(a, b, sa, sb, bias=None):
    """The exact product of the float8 values, scaled, in float64."""
    r = (a.double() @ b.double()) * sa.double() * sb.double()
    return r if bias is None else r + bias.double()


def assert_one_rounding(got, ref, out_dtype, k):
    """got (kiln, in out_dtype) is ref rounded to out_dtype, up to the float32 sum's error: within one
    unit in the last place of out_dtype at ref (float32 outputs: K * 2^-24 of the summed magnitudes)."""
    g = to_torch(got).double()
    if out_dtype == torch.float32:
        tol = (k + 3) * 2.0 ** -24 * ref.abs().max().item() + 1e-30  # the sum, two scalings, the bias
        assert (g - ref).abs().max().item() <= tol
        return
    lo = ref.to(out_dtype).double()
    eps = {E4: 2.0 ** -3, E5: 2.0 ** -2, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}[out_dtype]
    tiny = {E4: 2.0 ** -9, E5: 2.0 ** -16, torch.bfloat16: 1e-38, torch.float16: 2.0 ** -24}[out_dtype]
    bound = 2 * eps * ref.abs() + tiny + k * 2.0 ** -24 * ref.abs().max()
    ok = ((g - ref).abs() <= bound) | (g == lo)
    assert bool(ok.all()), f"max error {(g - ref).abs().max().item()} for {out_dtype}"


@pytest.mark.parametrize("da,db", [(E4, E4), (E4, E5), (E5, E4), (E5, E5)])
@pytest.mark.parametrize("rowwise", [False, True])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32, E4])
def test_values_against_float64(da, db, rowwise, out_dtype):
    for m, k, n in ((1, 300, 40), (40, 300, 1), (67, 513, 45), (3, 1, 2)):
        a, b = f8((m, k), da, 1), f8((n, k), db, 2).t()  # mat2 column-major, as F.linear gives it
        if rowwise:
            sa, sb = torch.rand(m, 1) + 0.5, torch.rand(1, n) + 0.5
        else:
            sa, sb = torch.tensor(0.75), torch.tensor(1.5)
        got = kiln._scaled_mm(to_kiln(a), to_kiln(b), to_kiln(sa), to_kiln(sb), out_dtype=KD[out_dtype])
        assert got.dtype == KD[out_dtype] and tuple(got.shape) == (m, n)
        assert_one_rounding(got, reference(a, b, sa, sb), out_dtype, k)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("m,k,n", [(300, 256, 200), (300, 16384, 300), (64, 256, 300), (200, 256, 64),
                                   (60, 1024, 50), (3, 256, 300), (300, 256, 2), (2, 16, 2), (5, 0, 7)])
def test_epilogue_on_every_split(threads, m, k, n):
    """The scales, bias and scale_result reach every row once, whichever way the product splits C:
    B shared between the threads (from 8 micro-rows a thread: 224 rows on the AVX-512 tables, fewer on
    the others), with several column blocks of B (K = 16384), row parts, column parts, the
    matrix-vector and tiny-product paths (the epilogue after them), K = 0."""
    a, b = f8((m, k), E4, 3), f8((n, k), E5, 4).t()
    sa, sb = torch.rand(m, 1) + 0.5, torch.rand(1, n) + 0.5
    bias, sr = torch.randn(n).to(torch.bfloat16), torch.tensor(1.25)
    ref = reference(a, b, sa, sb, bias.float())
    with kiln_threads(threads):
        got = kiln._scaled_mm(to_kiln(a), to_kiln(b), to_kiln(sa), to_kiln(sb), bias=to_kiln(bias),
                              out_dtype=kiln.bfloat16)
        assert_one_rounding(got, ref, torch.bfloat16, k)
        got8 = kiln._scaled_mm(to_kiln(a), to_kiln(b), to_kiln(sa), to_kiln(sb), scale_result=to_kiln(sr),
                               out_dtype=kiln.float8_e4m3fn)
        assert_one_rounding(got8, reference(a, b, sa, sb) / 1.25, E4, k)
        got32 = kiln._scaled_mm(to_kiln(a), to_kiln(b), to_kiln(sa), to_kiln(sb), out_dtype=kiln.float32)
        assert_one_rounding(got32, reference(a, b, sa, sb), torch.float32, k)


def test_saturation_and_overflow():
    # 896 overflows e4m3fn: kiln saturates to its largest finite value, 448, as torch's float8 conversion
    # does (and torch's _scaled_mm where it emulates the product; on AVX512-FP16 CPUs torch's oneDNN path
    # gives NaN instead, so the reference is torch's float32 product converted by torch); 1e6 in e5m2 is inf
    a = torch.tensor([[448.0, 448.0]]).to(E4)
    b = torch.tensor([[1.0], [1.0]]).to(E4)
    one = torch.tensor(1.0)
    for od in (E4, E5):
        t = torch._scaled_mm(a, b, one, one, out_dtype=torch.float32).to(od)
        k = kiln._scaled_mm(to_kiln(a), to_kiln(b), to_kiln(one), to_kiln(one), out_dtype=KD[od])
        assert to_torch(k).view(torch.uint8).item() == t.view(torch.uint8).item()
    assert to_torch(kiln._scaled_mm(to_kiln(a), to_kiln(b), to_kiln(one), to_kiln(one), out_dtype=kiln.float8_e4m3fn)).float().item() == 448.0
    big = kiln._scaled_mm(to_kiln(a), to_kiln(b), to_kiln(torch.tensor(1000.0)), to_kiln(one), out_dtype=kiln.float8_e5m2)
    assert to_torch(big).float().item() == float("inf")


def test_nan_propagates():
    a = f8((4, 8), E4, 3)
    a[1, 2] = torch.tensor(float("nan")).to(E4)
    b = f8((8, 5), E4, 4)
    one = torch.tensor(1.0)
    got = to_torch(kiln._scaled_mm(to_kiln(a), to_kiln(b), to_kiln(one), to_kiln(one), out_dtype=kiln.float32))
    assert torch.isnan(got[1]).all() and not torch.isnan(got[[0, 2, 3]]).any()


@pytest.mark.parametrize("da,db", [(E4, E4), (E4, E5), (E5, E4), (E5, E5)])
@pytest.mark.parametrize("m", [1, 2, 4])
def test_decode_rows_with_nan_and_inf(da, db, m):
    """The decode shapes (up to four rows against a column-major mat2, K >= 64: the 64-lane kernels,
    decision 77) with NaN and inf among the weights and an inf in a row: NaN, inf and finite outputs
    where torch has them, the finite ones within the float32 sum's error of torch's."""
    k, n = 300, 24
    a, w = f8((m, k), da, 5), f8((n, k), db, 6)
    w[3, 150] = torch.tensor(float("nan")).to(db)
    w[7, 0] = torch.tensor(448.0 if db == E4 else float("inf")).to(db)  # (e4m3fn has no inf)
    if da == E5:  # (the last row: with one row, every output inf or NaN)
        a[m - 1, 40] = torch.tensor(float("-inf")).to(da)
    b = w.t()
    sa, sb = torch.rand(m, 1) + 0.5, torch.rand(1, n) + 0.5
    want = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.float32)
    got = to_torch(kiln._scaled_mm(to_kiln(a), to_kiln(b), to_kiln(sa), to_kiln(sb), out_dtype=kiln.float32))
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    assert torch.isnan(got[:, 3]).all()
    fin = torch.isfinite(want)
    assert torch.equal(got[~fin & ~torch.isnan(want)], want[~fin & ~torch.isnan(want)])  # the infs, signs included
    assert torch.allclose(got[fin], want[fin], rtol=k * 2.0 ** -22, atol=1e-6)


def test_functional_enums_and_recipes():
    assert [(e.name, int(e)) for e in KF.ScalingType] == [(e.name, int(e.value)) for e in
                                                            TF.ScalingType.__members__.values()]
    assert [(e.name, int(e)) for e in KF.SwizzleType] == [(e.name, int(e.value)) for e in
                                                            TF.SwizzleType.__members__.values()]
    a, b = f8((9, 33), E4, 5), f8((7, 33), E5, 6).t()
    sa, sb = torch.rand(9, 1) + 0.5, torch.rand(1, 7) + 0.5
    one = torch.tensor(2.0)
    K, T = KF.ScalingType, TF.ScalingType
    cases = [((sa, T.RowWise, sb, T.RowWise), (sa, K.RowWise, sb, K.RowWise), {}),
             ((one, T.TensorWise, one, T.TensorWise), (one, K.TensorWise, one, K.TensorWise), {"output_dtype": None}),
             (([one], [T.TensorWise], [one], [T.TensorWise]), ([one], [K.TensorWise], [one], [K.TensorWise]),
              {"output_dtype": torch.float32})]
    for targs, kargs, kw in cases:
        t = TF.scaled_mm(a, b, *targs, **kw)
        kkw = {k: KD[v] for k, v in kw.items()}
        k = KF.scaled_mm(to_kiln(a), to_kiln(b), *[to_kiln(x) if isinstance(x, torch.Tensor) else
                                                   [to_kiln(y) if isinstance(y, torch.Tensor) else y for y in x]
                                                   if isinstance(x, list) else x for x in kargs], **kkw)
        assert str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        assert_one_rounding(k, reference(a, b, targs[0] if not isinstance(targs[0], list) else targs[0][0],
                                         targs[2] if not isinstance(targs[2], list) else targs[2][0]),
                            t.dtype, 33)
    # the errors torch raises: block-wise recipes (ValueError), a row-wise recipe with scalar scales
    # (IndexError), a tensor-wise recipe with row-wise scales (ValueError)
    for targs, kargs, exc in (((one, T.BlockWise1x32, one, T.TensorWise), (one, K.BlockWise1x32, one, K.TensorWise),
                               ValueError),
                              ((one, T.RowWise, one, T.RowWise), (one, K.RowWise, one, K.RowWise), IndexError),
                              ((sa, T.TensorWise, sb, T.TensorWise), (sa, K.TensorWise, sb, K.TensorWise), ValueError)):
        with pytest.raises(exc):
            TF.scaled_mm(a, b, *targs)
        with pytest.raises(exc):
            KF.scaled_mm(to_kiln(a), to_kiln(b), *[to_kiln(x) if isinstance(x, torch.Tensor) else x for x in kargs])


def test_functional_and_op_errors_as_torch():
    """F.scaled_mm's and _scaled_mm's refusals with torch's classes and messages: swizzles (refused when
    both are given and one swizzles), operands that are not matrices or do not multiply, a bias of
    the wrong size, integer recipes, row-wise scales whose second stride is not 1 (a size-1 dim's
    too), one-element scales of rank 3 given to _scaled_mm (F.scaled_mm takes them); and F.scaled_mm's
    zeros for K = 0 where _scaled_mm adds the bias."""
    a, b = f8((4, 16), E4, 1), f8((8, 16), E4, 2).t()
    one = torch.tensor(1.0)
    K, T = KF.ScalingType, TF.ScalingType
    KS, TS = KF.SwizzleType, TF.SwizzleType

    def both(tfn, kfn, exc, match):
        with pytest.raises(exc, match=match):
            tfn(torch, TF, T, TS)
        with pytest.raises(exc, match=match) as e:
            kfn(kiln, KF, K, KS)
        assert type(e.value) is exc

    def same(fn):  # fn(module, F, ScalingType, SwizzleType, convert) runs in both
        t = fn(torch, TF, T, TS, lambda x: x)
        k = fn(kiln, KF, K, KS, to_kiln)
        assert tuple(k.shape) == tuple(t.shape) and str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        assert torch.equal(to_torch(k).float(), t.float())

    def tw(m, F, S, Z, x, y, **kw):
        return F.scaled_mm(x, y, m.tensor(1.0), S.TensorWise, m.tensor(1.0), S.TensorWise, **kw)
    ka, kb = to_kiln(a), to_kiln(b)
    for sw_a, sw_b in (("SWIZZLE_32_4_4", "SWIZZLE_32_4_4"), ("NO_SWIZZLE", "SWIZZLE_32_4_4"),
                       ("SWIZZLE_32_4_4", "NO_SWIZZLE")):
        both(lambda m, F, S, Z: tw(m, F, S, Z, a, b, swizzle_a=getattr(Z, sw_a), swizzle_b=getattr(Z, sw_b)),
             lambda m, F, S, Z: tw(m, F, S, Z, ka, kb, swizzle_a=getattr(Z, sw_a), swizzle_b=getattr(Z, sw_b)),
             ValueError, "CPU does not support swizzle")
    for sw_a, sw_b in (("SWIZZLE_32_4_4", None), (None, "SWIZZLE_32_4_4"), ("NO_SWIZZLE", "NO_SWIZZLE")):
        same(lambda m, F, S, Z, c: tw(m, F, S, Z, c(a), c(b), swizzle_a=sw_a and getattr(Z, sw_a),
                                       swizzle_b=sw_b and getattr(Z, sw_b)))
    a12 = f8((4, 12), E4, 3)
    for x, y, kx, ky, match in ((a12, b, to_kiln(a12), kb, r"mat_a and mat_b shapes cannot be multiplied \(4x12 and 16x8\)"),
                                (a.reshape(2, 2, 16), b, ka.reshape(2, 2, 16), kb, "mat_a must be a matrix"),
                                (a[0], b, ka[0], kb, "mat_a must be a matrix"),
                                (a, b.reshape(2, 8, 8), ka, kb.reshape(2, 8, 8), "mat_b must be a matrix")):
        both(lambda m, F, S, Z: tw(m, F, S, Z, x, y), lambda m, F, S, Z: tw(m, F, S, Z, kx, ky), ValueError, match)
    both(lambda m, F, S, Z: tw(m, F, S, Z, a, b, bias=m.zeros(7, dtype=m.bfloat16)),
         lambda m, F, S, Z: tw(m, F, S, Z, ka, kb, bias=m.zeros(7, dtype=m.bfloat16)), ValueError,
         "Bias must be size 8 but got 7")
    both(lambda m, F, S, Z: F.scaled_mm(a, b, one, 0, one, 0), lambda m, F, S, Z: F.scaled_mm(ka, kb, kiln.tensor(1.0), 0,
         kiln.tensor(1.0), 0), AttributeError, "'int' object has no attribute 'value'")
    # row-wise scales: the second stride must be 1, even for a dimension of size 1
    both(lambda m, F, S, Z: m._scaled_mm(a, b, m.ones(1, 4).t(), m.ones(1, 8), out_dtype=m.bfloat16),
         lambda m, F, S, Z: m._scaled_mm(ka, kb, m.ones(1, 4).t(), m.ones(1, 8), out_dtype=m.bfloat16), ValueError,
         r"expected scale_a.stride\(1\) to be 1, but got 4")
    b1 = f8((1, 16), E4, 4).t()
    kb1 = to_kiln(b1)
    both(lambda m, F, S, Z: m._scaled_mm(a, b1, m.ones(4, 1), m.ones(1, 2)[:, ::2], out_dtype=m.bfloat16),
         lambda m, F, S, Z: m._scaled_mm(ka, kb1, m.ones(4, 1), m.ones(1, 2)[:, ::2], out_dtype=m.bfloat16),
         ValueError, r"expected scale_b.stride\(1\) to be 1, but got 2")
    both(lambda m, F, S, Z: m._scaled_mm(a, b, m.ones(1, 1, 1), m.ones(1, 1, 1), out_dtype=m.bfloat16),
         lambda m, F, S, Z: m._scaled_mm(ka, kb, m.ones(1, 1, 1), m.ones(1, 1, 1), out_dtype=m.bfloat16),
         RuntimeError, "t\\(\\) expects a tensor with <= 2 dimensions, but self is 3D")
    same(lambda m, F, S, Z, c: F.scaled_mm(c(a), c(b), m.ones(1, 1, 1), S.TensorWise, m.ones(1, 1, 1), S.TensorWise))
    # K = 0: F.scaled_mm gives zeros (bias or not), _scaled_mm the bias
    a0, b0 = a[:, :0], b[:0]
    for recipe in ("TensorWise", "RowWise"):
        def f(m, F, S, Z, c, recipe=recipe):
            sa, sb = (m.tensor(1.0), m.tensor(1.0)) if recipe == "TensorWise" else (m.ones(4, 1), m.ones(1, 8))
            return F.scaled_mm(c(a0), c(b0), sa, getattr(S, recipe), sb, getattr(S, recipe),
                               bias=m.ones(8, dtype=m.bfloat16))
        same(f)
    same(lambda m, F, S, Z, c: F.scaled_mm(c(a0), c(b0), m.tensor(1.0), S.TensorWise, m.tensor(1.0), S.TensorWise,
                                           output_dtype=None))
    same(lambda m, F, S, Z, c: m._scaled_mm(c(a0), c(b0), m.tensor(1.0), m.tensor(1.0),
                                            bias=m.ones(8, dtype=m.bfloat16), out_dtype=m.bfloat16))


def _grads_f64(a, b, sa, sb, bias, inv_sr, g):
    A, B = a.double().requires_grad_(), b.double().requires_grad_()
    bb = bias.double().requires_grad_() if bias is not None else None
    out = (A @ B) * sa.double() * sb.double()
    if bb is not None:
        out = out + bb
    (out * inv_sr * g.double()).sum().backward()
    return A.grad, B.grad, (bb.grad if bb is not None else None)


@pytest.mark.parametrize("rowwise", [False, True])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16, E4])
def test_backward_against_float64(rowwise, out_dtype):
    m, k, n = 13, 40, 9
    a, b = f8((m, k), E4, 7), f8((k, n), E5, 8)
    sa, sb = (torch.rand(m, 1) + 0.5, torch.rand(1, n) + 0.5) if rowwise else (torch.tensor(0.5), torch.tensor(2.0))
    bias = torch.randn(n)
    sr = torch.tensor(4.0)
    ka, kb = to_kiln(a).requires_grad_(), to_kiln(b).requires_grad_()
    kbias = to_kiln(bias).requires_grad_()
    out = kiln._scaled_mm(ka, kb, to_kiln(sa), to_kiln(sb), bias=kbias, scale_result=to_kiln(sr),
                          out_dtype=KD[out_dtype])
    g = torch.randn(m, n)
    (out.float() * to_kiln(g)).sum().backward()
    inv = 0.25 if out_dtype == E4 else 1.0  # scale_result divides explicit float8 outputs only
    da, db, dbias = _grads_f64(a, b, sa, sb, bias, inv, g)
    hp = kiln.float32 if out_dtype in (torch.float32, E4) else kiln.bfloat16
    assert ka.grad.dtype == hp and kb.grad.dtype == hp and kbias.grad.dtype == kiln.float32
    rtol = 1e-5 if hp == kiln.float32 else 2.0 ** -7
    for got, want in ((ka.grad, da), (kb.grad, db), (kbias.grad, dbias)):
        assert torch.allclose(to_torch(got).double(), want, rtol=rtol, atol=rtol * want.abs().max().item())


def test_float8_training_step_with_master_weight():
    """y = x W^T with W kept in float32 and multiplied in float8 (per-row scales from amax): the
    gradient reaches W through the quantisation (the cast passes it straight through) in float32."""
    torch.manual_seed(0)
    x, w = torch.randn(8, 32), torch.randn(16, 32)
    kx, kw = to_kiln(x), to_kiln(w).requires_grad_()
    sw = kiln.amax(kw.detach().abs(), 1, keepdim=True) / 448.0   # (16, 1) per output row
    sx = kiln.amax(kx.abs(), 1, keepdim=True) / 448.0            # (8, 1) per input row
    w8 = (kw / sw).to(kiln.float8_e4m3fn)
    x8 = (kx / sx).to(kiln.float8_e4m3fn)
    y = kiln._scaled_mm(x8, w8.t(), sx, sw.t().contiguous(), out_dtype=kiln.float32)
    y.sum().backward()
    assert kw.grad.dtype == kiln.float32
    # d/dW_jk of sum_ij sx_i sw_j sum_k x8_ik (W_jk / sw_j): sum_i sx_i x8_ik, for every row j
    x8f = to_torch(x8.to(kiln.float32)).double()
    want = (x8f * to_torch(sx).double()).sum(0).expand(16, 32)
    assert torch.allclose(to_torch(kw.grad).double(), want, rtol=1e-5, atol=1e-5)
    # and the forward is the float32 product up to float8 rounding
    assert torch.allclose(to_torch(y), x @ w.t(), rtol=0.15, atol=0.15 * (x @ w.t()).abs().max().item())


def test_meta_and_empty():
    a, b = kiln.empty(5, 7, dtype=kiln.float8_e5m2, device="meta"), kiln.empty(7, 3, dtype=kiln.float8_e4m3fn,
                                                                                   device="meta")
    s = kiln.empty((), device="meta")
    out = kiln._scaled_mm(a, b, s, s)
    assert out.device.type == "meta" and out.dtype == kiln.float8_e5m2 and tuple(out.shape) == (5, 3)
    z = kiln._scaled_mm(kiln.zeros(4, 0, dtype=kiln.float8_e4m3fn), kiln.zeros(0, 3, dtype=kiln.float8_e4m3fn),
                        kiln.tensor(1.0), kiln.tensor(1.0), bias=kiln.ones(3), out_dtype=kiln.float32)
    assert np.array_equal(z.numpy(), np.ones((4, 3), np.float32))


# ---- float8 helpers and Float8Linear (kiln/nn/float8.h) ----------------------------------------------
def _torch_quantize(x, dtype, rowwise):
    fmax = 448.0 if dtype == E4 else 57344.0
    a = x.abs().float()
    amax = a.amax(-1, keepdim=True) if rowwise else a.amax()
    scale = amax.clamp(min=1e-12) / torch.tensor(fmax)
    return (x / scale).clamp(-fmax, fmax).to(dtype), scale


@pytest.mark.parametrize("dtype", [E4, E5])
@pytest.mark.parametrize("rowwise", [False, True])
@pytest.mark.parametrize("src", [torch.float32, torch.bfloat16])
def test_quantize_float8_matches_plain_ops(dtype, rowwise, src):
    x = (torch.randn(6, 33) * 7).to(src)
    x[2] = 0  # an all-zero row quantises to zeros
    q, s = KF.quantize_float8(to_kiln(x), KD[dtype], rowwise=rowwise)
    tq, ts = _torch_quantize(x, dtype, rowwise)
    assert tuple(s.shape) == tuple(ts.shape) and s.dtype == kiln.float32
    assert torch.equal(to_torch(s), ts)
    assert torch.equal(to_torch(q).view(torch.uint8), tq.view(torch.uint8))
    back = to_torch(KF.dequantize_float8(q, s)).double()
    assert torch.allclose(back, x.double(), rtol={E4: 2.0 ** -3, E5: 2.0 ** -2}[dtype], atol=1e-6 * x.abs().max().item())
    with pytest.raises(TypeError):
        KF.quantize_float8(to_kiln(x), kiln.bfloat16)


@pytest.mark.parametrize("f8", [None, kiln.float8_e5m2])
def test_float8_linear_forward_backward_and_freeze(f8):
    kiln.manual_seed(3)
    m = kiln.nn.Float8Linear(24, 10, float8_dtype=f8)
    x = kiln.randn(2, 3, 24, requires_grad=True)
    y = m(x)
    assert tuple(y.shape) == (2, 3, 10) and y.dtype == kiln.float32
    # the same product from the quantised values, in float64
    fd = E5 if f8 is not None else E4
    xq, sx = _torch_quantize(to_torch(x.detach()).reshape(6, 24), fd, True)
    wq, sw = _torch_quantize(to_torch(m.weight.detach()), fd, True)
    xs, ws = xq.double() * sx.double(), wq.double() * sw.double()
    want = (xs @ ws.t() + to_torch(m.bias.detach()).double()).reshape(2, 3, 10)
    assert torch.allclose(to_torch(y.detach()).double(), want, rtol=1e-5, atol=1e-5)
    # gradients pass through the quantisation: dW = G^T (xq sx), dx = G (wq sw), db = sum G
    g = torch.randn(2, 3, 10)
    (y * to_kiln(g)).sum().backward()
    G = g.reshape(6, 10).double()
    assert torch.allclose(to_torch(m.weight.grad).double(), G.t() @ xs, rtol=1e-5, atol=1e-5)
    assert torch.allclose(to_torch(x.grad).double().reshape(6, 24), G @ ws, rtol=1e-5, atol=1e-5)
    assert torch.allclose(to_torch(m.bias.grad).double(), G.sum(0), rtol=1e-5, atol=1e-5)
    # frozen: float8 weight with per-row scales, no master copy, the same outputs bit for bit
    m.freeze()
    assert m.frozen and m.weight is None
    sd = m.state_dict()
    assert sorted(sd) == ["bias", "weight_f8", "weight_scale"]
    assert sd["weight_f8"].dtype == (f8 or kiln.float8_e4m3fn) and tuple(sd["weight_scale"].shape) == (10, 1)
    with kiln.no_grad():
        assert torch.equal(to_torch(m(x.detach())), to_torch(y.detach()))
    assert "frozen" in repr(m)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.bfloat16, kiln.float16])
@pytest.mark.parametrize("shape", [(24,), (1, 24), (3, 1, 24), (4, 24)])
def test_float8_linear_decode_shapes(dtype, shape):
    """A frozen Float8Linear on the decode shapes (K), (1, K), (B, 1, K) and up to four rows, in
    float32, bfloat16 and float16: each row quantised with its own scale, the product against the
    float8 weight and its per-row scales, against the same arithmetic in float64 (rounded to the
    layer's dtype at the end)."""
    kiln.manual_seed(5)
    m = kiln.nn.Float8Linear(24, 10, dtype=dtype)
    m.freeze()
    x = kiln.randn(*shape).to(dtype)
    with kiln.no_grad():
        y = m(x)
    assert tuple(y.shape) == shape[:-1] + (10,) and y.dtype == dtype
    xq, sx = _torch_quantize(to_torch(x).float().reshape(-1, 24), E4, True)
    sd = m.state_dict()
    ws = to_torch(sd["weight_f8"]).double() * to_torch(sd["weight_scale"]).double()
    want = ((xq.double() * sx.double()) @ ws.t() + to_torch(sd["bias"]).double()).reshape(shape[:-1] + (10,))
    tol = 1e-5 if dtype == kiln.float32 else 1e-2
    assert torch.allclose(to_torch(y).double(), want, rtol=tol, atol=tol)
