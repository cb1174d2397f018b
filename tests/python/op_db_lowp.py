"""op_db entries of the low-precision products (issue 10): torch._scaled_mm over both float8 formats as
self's dtype, every pairing with mat2's, tensor-wise and row-wise scales, each output dtype, bias,
scale_result, odd and empty sizes, row- and column-major mat2, a strided self. torch emulates the
product with float32 GEMMs whose summation order depends on its ISA, so values are compared within one
unit in the last place of the output dtype (kiln's own values are pinned against a float64 sum in
test_scaled_mm.py, where the derivative, which torch lacks, is tested too)."""
import torch

from op_db import S, T, entry, FLOAT8

# one unit in the last place of each output dtype, relative, plus a little for values near zero
ULP = {torch.float8_e4m3fn: (2.0 ** -3, 2.0 ** -6), torch.float8_e5m2: (2.0 ** -2, 2.0 ** -14),
       torch.bfloat16: (2.0 ** -7, 1e-3), torch.float16: (2.0 ** -10, 1e-3), torch.float32: (1e-5, 1e-4)}


def _scales(m, n, rowwise, seed):
    if not rowwise:
        return T((), "float32", 0.25, 2.0, seed=seed), T((1,), "float32", 0.25, 2.0, seed=seed + 1)
    return T((m, 1), "float32", 0.25, 2.0, seed=seed), T((1, n), "float32", 0.25, 2.0, seed=seed + 1)


def _scaled_mm_samples(dtype, grad):
    other = {"float8_e4m3fn": "float8_e5m2", "float8_e5m2": "float8_e4m3fn"}[dtype]
    out = []
    shapes = [(1, 1, 1), (3, 17, 5), (17, 64, 3), (33, 1000, 17), (5, 0, 3), (0, 7, 3)]
    out_dtypes = [None, torch.bfloat16, torch.float16, torch.float32, torch.float8_e4m3fn, torch.float8_e5m2]
    for i, (m, k, n) in enumerate(shapes):
        for rowwise in (False, True):
            b_dtype = dtype if i % 2 == 0 else other
            od = out_dtypes[(i + rowwise) % len(out_dtypes)]
            a = T((m, k), dtype, -3.0, 3.0, seed=i)
            b = T((n, k), b_dtype, -3.0, 3.0, seed=i + 10).t() if rowwise else T((k, n), b_dtype, -3.0, 3.0, seed=i + 10)
            sa, sb = _scales(m, n, rowwise, seed=i + 20)
            kw = {} if od is None else {"out_dtype": od}
            s = S(a, b, sa, sb, desc=f"{m}x{k}x{n} {'rowwise' if rowwise else 'tensorwise'} {b_dtype} out={od}", **kw)
            s.tol = ULP[od or getattr(torch, dtype)]
            out.append(s)
    a, b = T((9, 40), dtype, -2.0, 2.0, seed=30), T((40, 6), dtype, -2.0, 2.0, seed=31)
    sa, sb = _scales(9, 6, True, seed=32)
    for bias_dtype, od in ((torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16), (torch.float32, None)):
        s = S(a, b, sa, sb, bias=T((6,), "float32", -1.0, 1.0, seed=33).to(bias_dtype),
              desc=f"bias {bias_dtype} out={od}", **({} if od is None else {"out_dtype": od}))
        s.tol = ULP[od or getattr(torch, dtype)]
        out.append(s)
    for od in (torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16):  # scale_result: explicit float8 outputs only
        s = S(a, b, sa, sb, scale_result=torch.tensor(4.0), out_dtype=od, desc=f"scale_result out={od}")
        s.tol = ULP[od]
        out.append(s)
    s = S(T((20, 9), dtype, -2.0, 2.0, seed=34)[::2, 1:], b[:8], sa[:10].contiguous(), sb, out_dtype=torch.float32,
          desc="strided self")
    s.tol = ULP[torch.float32]
    out.append(s)
    # torch's errors: the scaling configuration (ValueError), shapes, bias and scale_result (RuntimeError)
    out += [S(a, b, T((9,), "float32", seed=1), T((6,), "float32", seed=2), desc="error 1-d scales"),
            S(a, b, sa, T((), "float32", seed=2), desc="error mixed scalings"),
            S(a, b, sa.double(), sb, desc="error float64 scale"),
            S(a.float(), b, T((), "float32"), T((), "float32"), desc="error float32 self"),
            S(a, b[:30], T((), "float32"), T((), "float32"), desc="error shapes"),
            S(a.unsqueeze(0), b, T((), "float32"), T((), "float32"), desc="error 3-d self"),
            S(a, b, T((), "float32"), T((), "float32"), bias=T((5,), "float32"), desc="error bias size"),
            S(a, b, T((), "float32"), T((), "float32"), scale_result=torch.ones(2), desc="error scale_result")]
    return out


FLOAT8_OUT = (torch.float8_e4m3fn, torch.float8_e5m2)


def _scaled_mm_reference(a, b, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False):
    """torch._scaled_mm where its answer does not depend on the CPU. On CPUs with AVX512-FP16 (Sapphire
    Rapids) torch 2.13 runs oneDNN's float8 GEMM, which returns uninitialised memory when K = 0 and NaN
    where a float8 output overflows (torch's own float8 conversion saturates); elsewhere it emulates the
    product in float32 and converts with `.to`. The reference is that emulation on every machine: torch's
    checks, errors and output dtype come from the call itself, the values from torch's float32 product
    (zero when K = 0) and torch's conversion. kiln's choice is pinned in test_scaled_mm.py."""
    r = torch._scaled_mm(a, b, scale_a, scale_b, bias=bias, scale_result=scale_result, out_dtype=out_dtype,
                         use_fast_accum=use_fast_accum)
    k = a.shape[1]
    if k > 0 and r.dtype not in FLOAT8_OUT:
        return r
    f = torch._scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.float32) if k > 0 else \
        torch.zeros(a.shape[0], b.shape[1])
    if bias is not None:
        f = f + bias.float()
    if scale_result is not None and out_dtype in FLOAT8_OUT:
        f = f * (1.0 / scale_result)
    return f.to(r.dtype)


LOWP_OPS = [
    entry("_scaled_mm", _scaled_mm_samples, dtypes=FLOAT8, supports_grad=False, method=False, supports_out=True,
          torch_fn=_scaled_mm_reference),
]


# ---- _grouped_mm: torch's four layouts with strides torch's CPU kernel takes (multiples of 16 bytes;
# kiln's other strides, bias, rows past offs[-1] and the derivative are in test_grouped_mm.py)
def _offs(*ends):
    return torch.tensor(ends, dtype=torch.int32)


def _grouped_mm_samples(dtype, grad):
    r = lambda *shape, seed: T(shape, dtype, -2.0, 2.0, seed=seed)  # noqa: E731
    out = [S(r(40, 24, seed=1), r(3, 24, 16, seed=2), offs=_offs(8, 8, 40), desc="2Dx3D empty group"),
           S(r(40, 24, seed=3), r(3, 16, 24, seed=4).transpose(1, 2), offs=_offs(13, 30, 40), desc="2Dx3D mat2 col-major"),
           S(r(3, 9, 32, seed=5), r(32, 40, seed=6), offs=_offs(16, 16, 40), desc="3Dx2D"),
           S(r(3, 9, 32, seed=7), r(40, 32, seed=8).t(), offs=_offs(8, 24, 40), desc="3Dx2D mat2 col-major"),
           S(r(9, 48, seed=9), r(48, 16, seed=10), offs=_offs(16, 16, 48), desc="2Dx2D empty K group"),
           S(r(3, 9, 24, seed=11), r(3, 24, 16, seed=12), desc="3Dx3D"),
           S(r(0, 24, seed=13), r(2, 24, 16, seed=14), offs=_offs(0, 0), desc="2Dx3D no tokens"),
           S(r(200, 64, seed=15), r(4, 64, 72, seed=16), offs=_offs(50, 100, 170, 200), desc="2Dx3D larger")]
    out += [S(r(40, 24, seed=1), r(3, 24, 16, seed=2), desc="error no offs"),
            S(r(3, 9, 24, seed=11), r(3, 24, 16, seed=12), offs=_offs(1, 2, 3), desc="error 3Dx3D offs"),
            S(r(40, 24, seed=1), r(3, 24, 16, seed=2), offs=_offs(8, 8, 40).long(), desc="error int64 offs"),
            S(r(40, 24, seed=1), r(2, 24, 16, seed=2), offs=_offs(8, 8, 40), desc="error group count"),
            S(r(40, 24, seed=1), r(3, 16, 16, seed=2), offs=_offs(8, 8, 40), desc="error K"),
            S(r(40, 24, seed=1).unsqueeze(0).unsqueeze(0), r(3, 24, 16, seed=2), offs=_offs(8, 8, 40),
              desc="error 4-d"),
            S(r(40, 24, seed=1), r(3, 24, 16, seed=2), offs=_offs(8, 8, 40), out_dtype=torch.float64,
              desc="error out_dtype")]
    return out


LOWP_OPS.append(entry("_grouped_mm", _grouped_mm_samples, dtypes=("float32", "bfloat16", "float16"),
                      supports_grad=False, method=False, tol={"float32": (1e-5, 1e-4), "bfloat16": (2.0 ** -7, 1e-2),
                                                              "float16": (2.0 ** -10, 1e-3)}))


# ---- _fused_baddbmm: beta * self + alpha * (batch1 @ batch2), rounded once, for bfloat16 / float16
# (the table op under addmm / baddbmm / addbmm / F.linear with a bias); torch's baddbmm is the same
# arithmetic. The one rounding and the derivative are tested in test_matmul.py.
def _fused_baddbmm_samples(dtype, grad):
    r = lambda *shape, seed: T(shape, dtype, -2.0, 2.0, seed=seed)  # noqa: E731
    out = [S(r(2, 5, 7, seed=1), r(2, 5, 33, seed=2), r(2, 33, 7, seed=3), 1, 1, desc="beta 1 alpha 1"),
           S(r(1, 17, 3, seed=4), r(1, 17, 64, seed=5), r(1, 64, 3, seed=6), 0.5, 2, desc="beta 0.5 alpha 2"),
           S(r(1, 1, 300, seed=7), r(1, 1, 1000, seed=8), r(1, 300, 1000, seed=9).transpose(1, 2), 1, 1,
             desc="one row, W^T"),
           S(r(3, 4, 6, seed=10), r(3, 4, 0, seed=11), r(3, 0, 6, seed=12), 2, 1, desc="K = 0"),
           S(r(2, 0, 6, seed=13), r(2, 0, 5, seed=14), r(2, 5, 6, seed=15), 1, 1, desc="empty M"),
           S(r(1, 6, 1, seed=16).expand(2, 6, 9), r(2, 6, 17, seed=17), r(2, 17, 9, seed=18), 1, 1,
             desc="broadcast self"),
           S(r(1, 3, 4, seed=19) * float("nan"), r(1, 3, 5, seed=20), r(1, 5, 4, seed=21), 0, 3, desc="beta 0 ignores nan")]
    return out


LOWP_OPS.append(entry("_fused_baddbmm", _fused_baddbmm_samples, dtypes=("bfloat16", "float16"), supports_grad=False,
                      method=False, torch_fn=lambda c, a, b, beta, alpha: torch.baddbmm(c, a, b, beta=beta, alpha=alpha),
                      tol={"bfloat16": (2.0 ** -7, 1e-2), "float16": (2.0 ** -10, 1e-3)}))
