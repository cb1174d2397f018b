"""Matrix-multiply benchmarks for `make bench` (issue 10): square matmul in float32, float16 and
bfloat16 at 64, 256 and 1024 (and 2048 in the full run); float8 _scaled_mm, tensor-wise and row-wise,
to bfloat16; _grouped_mm in bfloat16 for 8 and 64 experts (4096 tokens, K = 1024, N = 2816); and the
decode shapes: F.linear of one row against 4096 x 4096 and 14336 x 4096 weights (and of four rows,
and two in bfloat16, against the larger), whose rate is the weight bytes read per second, noted
against a copy's bandwidth in the same run, and one row on float8 weights with per-row scales
(_scaled_mm, as Float8Linear runs it; torch runs the same call). Rows in float16 / bfloat16 / float8 also note kiln's rate
as a multiple of kiln's own float32 (float8: bfloat16) rate on the same shape, measured in the same run
(the issue's targets are stated that way). float16 in torch has no fast CPU path without AVX512-FP16:
its 2048 case is a single long call."""
import statistics
import time

import numpy as np
import torch

import kiln

DT = {"f32": (kiln.float32, torch.float32), "f16": (kiln.float16, torch.float16),
      "bf16": (kiln.bfloat16, torch.bfloat16)}


def _operands(shapes, tag, seed=0):
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    kd, td = DT[tag]
    return [kiln.from_numpy(a.copy()).to(kd) for a in arrs], [torch.from_numpy(a.copy()).to(td) for a in arrs]


def _kiln_seconds(fn, repeats=5):
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _vs_f32(shapes, tag):
    """A note: kiln's time on float32 operands of the same shapes / its time on `tag` operands."""
    def note():
        (k32, _), (kt, _) = _operands(shapes, "f32"), _operands(shapes, tag)
        f32 = _kiln_seconds(lambda: kiln.matmul(*k32))
        low = _kiln_seconds(lambda: kiln.matmul(*kt))
        return f"{f32 / low:.2f}x kiln f32"
    return note


def _f8(n, rowwise):
    """float8 operands (mat2 column-major, as F.linear's weight gives it) and their scales."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    ta, tb = torch.from_numpy(a).to(torch.float8_e4m3fn), torch.from_numpy(b).to(torch.float8_e4m3fn).t()
    ka, kb = kiln.from_numpy(a).to(kiln.float8_e4m3fn), kiln.from_numpy(b).to(kiln.float8_e4m3fn).t()
    if rowwise:
        sa, sb = np.full((n, 1), 0.5, np.float32), np.full((1, n), 2.0, np.float32)
    else:
        sa, sb = np.array(0.5, np.float32), np.array(2.0, np.float32)
    return (ka, kb, kiln.from_numpy(sa.copy()), kiln.from_numpy(sb.copy())), \
        (ta, tb, torch.from_numpy(sa.copy()), torch.from_numpy(sb.copy()))


def _scaled_case(Case, n, rowwise):
    def setup():
        k, t = _f8(n, rowwise)
        return (lambda: kiln._scaled_mm(*k, out_dtype=kiln.bfloat16)), \
            (lambda: torch._scaled_mm(*t, out_dtype=torch.bfloat16))

    def note():
        k, _ = _f8(n, rowwise)
        (kb16, _) = _operands([(n, n), (n, n)], "bf16")
        f8 = _kiln_seconds(lambda: kiln._scaled_mm(*k, out_dtype=kiln.bfloat16))
        b16 = _kiln_seconds(lambda: kiln.matmul(*kb16))
        return f"{b16 / f8:.2f}x kiln bf16"
    kind = "row-wise" if rowwise else "tensor-wise"
    return Case(f"_scaled_mm fp8 {kind} {n}x{n}x{n} -> bf16", setup, 2.0 * n ** 3, "GFLOP/s", note=note)


def _grouped_case(Case, experts, tokens=4096, k=1024, n=2816):
    def setup():
        rng = np.random.default_rng(0)
        a = rng.standard_normal((tokens, k), dtype=np.float32)
        b = rng.standard_normal((experts, k, n), dtype=np.float32)
        offs = (np.arange(1, experts + 1) * (tokens // experts)).astype(np.int32)
        ka, kb, ko = kiln.from_numpy(a).to(kiln.bfloat16), kiln.from_numpy(b).to(kiln.bfloat16), kiln.from_numpy(offs)
        ta, tb, to = torch.from_numpy(a).to(torch.bfloat16), torch.from_numpy(b).to(torch.bfloat16), torch.from_numpy(offs)
        return (lambda: kiln._grouped_mm(ka, kb, offs=ko)), (lambda: torch._grouped_mm(ta, tb, offs=to))
    return Case(f"_grouped_mm bf16 {experts} experts ({tokens}x{k})x({experts}x{k}x{n})", setup,
                2.0 * tokens * k * n, "GFLOP/s")


_COPY_BYTES = 64 << 20


def _cold_seconds(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _rate_and_copy(fn, nbytes, rounds=11):
    """fn's bandwidth and a copy's (read + write of 64 MiB, kiln's clone), timed alternately in
    the same rounds: this VM's memory rate drifts, and a copy timed once earlier moved the ratio
    by up to 2x. Each call is timed once, right after the other's (no warm-up call): the copy
    leaves none of fn's weight in the caches, as in a model's decode step, whose weights are read
    once per token (timed after a warm-up call, a 16 MiB weight sat partly in Zen 3's L3 and read
    at up to 1.3x its cold rate). GB/s from the medians."""
    big = kiln.ones(_COPY_BYTES, dtype=kiln.uint8)
    fn(), big.clone()
    t_fn, t_copy = [], []
    for _ in range(rounds):
        t_fn.append(_cold_seconds(fn))
        t_copy.append(_cold_seconds(lambda: big.clone()))
    return nbytes / statistics.median(t_fn) / 1e9, 2 * _COPY_BYTES / statistics.median(t_copy) / 1e9


def _decode_case(Case, tag, n, k, rows=1):
    kd, td = DT[tag]

    def setup():
        rng = np.random.default_rng(0)
        w, x, b = (rng.standard_normal(s, dtype=np.float32) for s in ((n, k), (rows, k), (n,)))
        kw, kx, kb = (kiln.from_numpy(v).to(kd) for v in (w, x, b))
        tw, tx, tb = (torch.from_numpy(v).to(td) for v in (w, x, b))
        return (lambda: kiln.nn.functional.linear(kx, kw, kb)), (lambda: torch.nn.functional.linear(tx, tw, tb))
    nbytes = n * k * (4 if tag == "f32" else 2)

    def note():
        kw = kiln.randn(n, k).to(kd)  # written memory (an untouched empty() reads the zero page)
        kx, kb = kiln.randn(rows, k).to(kd), kiln.randn(n).to(kd)
        rate, copy = _rate_and_copy(lambda: kiln.nn.functional.linear(kx, kw, kb), nbytes)
        return f"{rate / copy:.0%} of copy ({rate:.1f} / {copy:.1f} GB/s, timed alternately)"
    return Case(f"decode linear {tag} ({rows}x{k}) W ({n}x{k}) + bias", setup, nbytes, "GB/s", note=note)


def _decode_f8_case(Case, n, k, rows=1):
    """A decode step on float8 weights with per-row scales (Float8Linear's frozen product): the
    activations' rows quantised to float8 with their own scales, then _scaled_mm row-wise to bfloat16
    with the bias; torch runs the same _scaled_mm call. GB/s of the weight's bytes (one byte a weight)."""
    def operands(m, dt, f8):
        rng = np.random.default_rng(0)
        w, x = rng.standard_normal((n, k), dtype=np.float32), rng.standard_normal((rows, k), dtype=np.float32)
        b = rng.standard_normal((n,), dtype=np.float32)
        sw = np.abs(w).max(1, keepdims=True) / 448
        sx = np.abs(x).max(1, keepdims=True) / 448
        wq = m.from_numpy(w / sw).to(f8)
        xq = m.from_numpy(x / sx).to(f8)
        return (xq, wq.t(), m.from_numpy(sx.astype(np.float32)), m.from_numpy(sw.T.copy().astype(np.float32)),
                m.from_numpy(b).to(dt))

    def setup():
        ka, kb, ksa, ksb, kbias = operands(kiln, kiln.bfloat16, kiln.float8_e4m3fn)
        ta, tb, tsa, tsb, tbias = operands(torch, torch.bfloat16, torch.float8_e4m3fn)
        return (lambda: kiln._scaled_mm(ka, kb, ksa, ksb, bias=kbias, out_dtype=kiln.bfloat16)), \
            (lambda: torch._scaled_mm(ta, tb, tsa, tsb, bias=tbias, out_dtype=torch.bfloat16))
    nbytes = n * k

    def note():
        ka, kb, ksa, ksb, kbias = operands(kiln, kiln.bfloat16, kiln.float8_e4m3fn)
        rate, copy = _rate_and_copy(lambda: kiln._scaled_mm(ka, kb, ksa, ksb, bias=kbias, out_dtype=kiln.bfloat16),
                                    nbytes)
        return f"{rate / copy:.0%} of copy ({rate:.1f} / {copy:.1f} GB/s, timed alternately)"
    return Case(f"decode _scaled_mm fp8 row-wise ({rows}x{k}) W ({n}x{k}) + bias -> bf16", setup, nbytes, "GB/s",
                note=note)


def _case(Case, name, shapes, tag, flops):
    def setup():
        ks, ts = _operands(shapes, tag)
        return (lambda: kiln.matmul(*ks)), (lambda: torch.matmul(*ts))
    return Case(name, setup, flops, "GFLOP/s", note=None if tag == "f32" else _vs_f32(shapes, tag))


def gemm_cases(Case, quick):
    cases = []
    for tag in ("f32", "f16", "bf16"):
        for n in ([64, 256, 1024] if quick else [64, 256, 1024, 2048]):
            cases.append(_case(Case, f"matmul {tag} {n}x{n}x{n}", [(n, n), (n, n)], tag, 2.0 * n ** 3))
    for n in ([256, 1024] if quick else [256, 1024, 2048]):
        for rowwise in (False, True):
            cases.append(_scaled_case(Case, n, rowwise))
    for experts in (8, 64):
        cases.append(_grouped_case(Case, experts))
    for tag in ("f32", "bf16", "f16"):
        for n in ((4096,) if quick else (4096, 14336)):
            cases.append(_decode_case(Case, tag, n, 4096))
        if tag == "bf16":
            cases.append(_decode_case(Case, tag, 14336, 4096, rows=2))  # two decode steps at once
        cases.append(_decode_case(Case, tag, 14336, 4096, rows=4))  # four decode steps at once
    for n in ((4096,) if quick else (4096, 14336)):
        cases.append(_decode_f8_case(Case, n, 4096))
    cases.append(_decode_f8_case(Case, 14336, 4096, rows=4))  # four decode steps at once
    return cases
