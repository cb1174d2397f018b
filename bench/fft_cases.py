"""FFT benchmarks for `make bench` (issue 16): kiln.fft (FFTW, ESTIMATE plans) against torch.fft (MKL
/ pocketfft) on the same data: batched 1-d complex and real transforms at power-of-two and awkward
sizes, and 2-d real and complex transforms. Rates count the usual 5 n log2 n flops per complex transform
(2.5 n log2 n for real ones)."""
import math

import numpy as np
import torch

import kiln


def _pair(shape, complex_):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype(np.float32)
    if complex_:
        a = (a + 1j * rng.standard_normal(shape).astype(np.float32)).astype(np.complex64)
    return kiln.from_numpy(a.copy()), torch.from_numpy(a.copy())


def fft_cases(Case, quick):
    cases = []
    specs = [("fft c64", (256, 1024), True, "fft", -1), ("fft c64", (64, 1000), True, "fft", -1),
             ("rfft f32", (256, 4096), False, "rfft", -1), ("irfft c64", (256, 2049), True, "irfft", -1),
             ("rfft2 f32", (16, 256, 256), False, "rfft2", None), ("fft2 c64", (16, 256, 256), True, "fft2", None)]
    if quick:
        specs = specs[:1] + specs[2:3] + specs[4:]
    for name, shape, cplx, fn, dim in specs:
        n = shape[-1] if fn != "irfft" else 2 * (shape[-1] - 1)
        if fn in ("rfft2", "fft2"):
            n = shape[-1] * shape[-2]
        batch = math.prod(shape) // (shape[-1] if fn not in ("rfft2", "fft2") else shape[-1] * shape[-2])
        flops = (5 if fn in ("fft", "fft2") else 2.5) * n * math.log2(n) * batch

        def setup(shape=shape, cplx=cplx, fn=fn):
            k, t = _pair(shape, cplx)
            kf, tf = getattr(kiln.fft, fn), getattr(torch.fft, fn)
            return (lambda: kf(k)), (lambda: tf(t))
        cases.append(Case(f"{name} {'x'.join(map(str, shape))}", setup, flops, "GFLOP/s"))
    return cases
