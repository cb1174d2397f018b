"""Linear-algebra benchmarks for `make bench` (issue 9): the factorizations and solvers at n = 8, 64,
256 (and 1024 in the full run) in float32, float64 and complex64, and the batched tiny-matrix cases
(10000, 8, 8) and (100000, 4, 4) of inv, det and solve. Both libraries get the same matrices: well
conditioned (A + n I), Hermitian positive definite for cholesky and eigh."""
import numpy as np
import torch

import kiln

DT = {"f32": (np.float32, kiln.float32, torch.float32), "f64": (np.float64, kiln.float64, torch.float64),
      "c64": (np.complex64, kiln.complex64, torch.complex64)}


def _pair(shape, tag, kind, seed=0):
    rng = np.random.default_rng(seed)
    npd, kd, td = DT[tag]
    a = rng.standard_normal(shape)
    if tag == "c64":
        a = a + 1j * rng.standard_normal(shape)
    n = shape[-1]
    if kind == "spd":
        a = a @ np.conj(np.swapaxes(a, -1, -2)) / n + np.eye(n)
    elif kind == "square":
        a = a + n * np.eye(n)
    a = np.ascontiguousarray(a.astype(npd))
    return kiln.from_numpy(a.copy()), torch.from_numpy(a.copy())


def _case(Case, name, shape, tag, kind, kfn, tfn, flops, rhs=None):
    def setup():
        ka, ta = _pair(shape, tag, kind)
        if rhs is None:
            return (lambda: kfn(ka)), (lambda: tfn(ta))
        kb, tb = _pair(shape[:-1] + (rhs,), tag, "plain", seed=1)
        return (lambda: kfn(ka, kb)), (lambda: tfn(ta, tb))
    return Case(name, setup, flops, "GFLOP/s")


def linalg_cases(Case, quick):
    cases = []
    sizes = [8, 64, 256] if quick else [8, 64, 256, 1024]
    tags = ["f32"] if quick else ["f32", "f64", "c64"]
    ops = [  # name, kind, kiln fn, torch fn, flops(n), rhs columns
        ("solve", "square", kiln.linalg.solve, torch.linalg.solve, lambda n: 2 / 3 * n ** 3 + 2 * n * n, 1),
        ("inv", "square", kiln.linalg.inv, torch.linalg.inv, lambda n: 2 * n ** 3, None),
        ("lu_factor", "square", kiln.linalg.lu_factor, torch.linalg.lu_factor, lambda n: 2 / 3 * n ** 3, None),
        ("cholesky", "spd", kiln.linalg.cholesky, torch.linalg.cholesky, lambda n: n ** 3 / 3, None),
        ("qr", "plain", kiln.linalg.qr, torch.linalg.qr, lambda n: 4 / 3 * n ** 3, None),
        ("eigh", "spd", kiln.linalg.eigh, torch.linalg.eigh, lambda n: 9 * n ** 3, None),
        ("svd", "plain", kiln.linalg.svd, torch.linalg.svd, lambda n: 22 * n ** 3, None),
        ("lstsq", "plain", kiln.linalg.lstsq, torch.linalg.lstsq, lambda n: 4 / 3 * n ** 3, 1),
    ]
    for tag in tags:
        for name, kind, kf, tf, fl, rhs in ops:
            for n in sizes:
                cases.append(_case(Case, f"linalg.{name} {tag} {n}x{n}", (n, n), tag, kind, kf, tf, fl(n), rhs))
    for batch, n in ((10000, 8), (100000, 4)):
        for name, kf, tf, rhs in (("inv", kiln.linalg.inv, torch.linalg.inv, None),
                                  ("det", kiln.linalg.det, torch.linalg.det, None),
                                  ("solve", kiln.linalg.solve, torch.linalg.solve, 1)):
            fl = batch * (2 * n ** 3 if name == "inv" else 2 / 3 * n ** 3)
            cases.append(_case(Case, f"linalg.{name} f32 ({batch}, {n}, {n})", (batch, n, n), "f32", "square", kf, tf,
                               fl, rhs))
    return cases
