"""Matrix-multiply benchmarks for `make bench` (issue 10): square matmul in float32, float16 and
bfloat16 at 64, 256 and 1024 (and 2048 in the full run), and the decode shapes (one row against a
4096 x 4096 matrix). Rows in float16 / bfloat16 also note kiln's rate as a multiple of kiln's own
float32 rate on the same shape, measured in the same run (the issue's targets are stated that way).
float16 in torch has no fast CPU path without AVX512-FP16: its 2048 case is a single long call."""
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
    for tag in ("f32", "bf16"):
        cases.append(_case(Case, f"matmul {tag} (1x4096)(4096x4096)", [(1, 4096), (4096, 4096)], tag,
                           2.0 * 4096 * 4096))
    return cases
