"""Gradients of the reductions, scans and softmax (kiln/ops/reduce.cpp + reduce_grad.cpp) against torch:
dims / keepdim variants, strided and 0-dim inputs, ties, zeros in products, complex128, kiln's gradcheck
and gradgradcheck, and the composites built on them (var, std, norms, logsumexp)."""
import pytest
import torch

import kiln
from grad_conformance import compare_grads, domain, kiln_gradcheck
from helpers import to_kiln


def _x(shape, low=-2.0, high=2.0, seed=0, dtype=torch.float64):
    return domain(shape, low, high, seed=seed, dtype=dtype)


def _inputs(dtype=torch.float64, low=-2.0, high=2.0):
    return [("contig", _x((2, 3, 4), low, high, 1, dtype)),
            ("permuted", _x((4, 2, 3), low, high, 2, dtype).permute(1, 2, 0)),
            ("sliced", _x((4, 3, 8), low, high, 3, dtype)[::2, :, 1::2])]


DIMS = [None, 0, -1, (0, 2), (2, 0, 1)]

# (id, fn(m, x, dim, keepdim), complex128 supported by torch autograd, input range)
MULTI_DIM = [
    ("sum", lambda m, x, d, k: m.sum(x) if d is None else m.sum(x, d, keepdim=k), True),
    ("mean", lambda m, x, d, k: m.mean(x) if d is None else m.mean(x, d, keepdim=k), True),
    ("nansum", lambda m, x, d, k: m.nansum(x) if d is None else m.nansum(x, d, keepdim=k), False),
    ("amax", lambda m, x, d, k: m.amax(x) if d is None else m.amax(x, d, keepdim=k), False),
    ("amin", lambda m, x, d, k: m.amin(x) if d is None else m.amin(x, d, keepdim=k), False),
    ("norm_l1", lambda m, x, d, k: m.linalg.vector_norm(x, 1, d, k), True),
    ("norm_l2sq", lambda m, x, d, k: m.linalg.vector_norm(x, 2, d, k) ** 2, True),
    ("vector_norm2", lambda m, x, d, k: m.linalg.vector_norm(x, 2, d, k), True),
    ("vector_norm3", lambda m, x, d, k: m.linalg.vector_norm(x, 3, d, k), True),
    ("vector_norm_inf", lambda m, x, d, k: m.linalg.vector_norm(x, float("inf"), d, k), True),
    ("logsumexp", lambda m, x, d, k: m.logsumexp(x, tuple(range(x.dim())) if d is None else d, keepdim=k), False),
    ("var", lambda m, x, d, k: m.var(x) if d is None else m.var(x, d, keepdim=k), True),
    ("std", lambda m, x, d, k: m.std(x) if d is None else m.std(x, d, correction=0, keepdim=k), True),
    ("nanmean", lambda m, x, d, k: m.nanmean(x) if d is None else m.nanmean(x, d, keepdim=k), False),
]
MULTI_IDS = [r[0] for r in MULTI_DIM]


@pytest.mark.parametrize("name,fn,cplx", MULTI_DIM, ids=MULTI_IDS)
def test_reduction_grad_vs_torch(name, fn, cplx):
    for label, x in _inputs():
        for d in DIMS:
            for keep in ((False,) if d is None else (False, True)):
                compare_grads(lambda m, x: fn(m, x, d, keep), x, msg=f"{name} {label} dim={d} keep={keep}")
    if name not in ("var", "std"):  # one element: no degrees of freedom (see test_std_norm_at_zero)
        compare_grads(lambda m, x: fn(m, x, None, False), _x((), seed=4), msg=f"{name} 0-dim")
        compare_grads(lambda m, x: fn(m, x, 0, True), _x((), seed=4), msg=f"{name} 0-dim dim=0")
    if cplx:
        for label, z in _inputs(torch.complex128)[:2]:
            compare_grads(lambda m, z: fn(m, z, (0, 2), False), z, msg=f"{name} complex {label}")
            compare_grads(lambda m, z: fn(m, z, None, False), z, msg=f"{name} complex {label} all")


@pytest.mark.parametrize("name,fn,cplx", MULTI_DIM, ids=MULTI_IDS)
def test_reduction_gradcheck(name, fn, cplx):
    x = _x((2, 3), seed=5)
    kiln_gradcheck(lambda m, x: fn(m, x, None, False), x)
    kiln_gradcheck(lambda m, x: fn(m, x, 1, True), x)
    if cplx and name != "vector_norm_inf":
        kiln_gradcheck(lambda m, z: fn(m, z, 0, False), _x((2, 2), seed=6, dtype=torch.complex128))


def test_reduction_ties():
    x = torch.tensor([[1.0, 3.0, 3.0, -2.0], [2.0, 2.0, 2.0, 2.0], [-1.0, 0.0, -1.0, 5.0]], dtype=torch.float64)
    for name in ["amax", "amin", "vector_norm_inf"]:
        fn = MULTI_DIM[MULTI_IDS.index(name)][1]
        for d in (None, 0, 1, (0, 1)):
            compare_grads(lambda m, x: fn(m, x, d, False), x, msg=f"{name} dim={d}")
    compare_grads(lambda m, x: m.max(x), x)  # all-reduce max/min share the gradient among ties
    compare_grads(lambda m, x: m.min(x), x)
    compare_grads(lambda m, x: m.aminmax(x, dim=1), x)
    compare_grads(lambda m, x: x.max() + x.min(), x)


def test_norms_at_zero_and_special_values():
    x = torch.tensor([[0.0, 0.0, 0.0], [1.0, -2.0, 0.0]], dtype=torch.float64)
    compare_grads(lambda m, x: m.linalg.vector_norm(x, 1, 1), x)  # sgn(0) = 0
    compare_grads(lambda m, x: m.linalg.vector_norm(x, float("inf"), 1), x)
    compare_grads(lambda m, x: m.linalg.vector_norm(x[1], 2), x)
    y = torch.tensor([[1.0, float("nan"), 2.0], [float("inf"), 1.0, 0.0]], dtype=torch.float64)
    compare_grads(lambda m, x: m.nansum(x, 1), y)
    compare_grads(lambda m, x: m.nanmean(x), y)
    compare_grads(lambda m, x: m.sum(x, 0), y)
    compare_grads(lambda m, x: m.amax(x, 1), y)


def test_std_norm_at_zero():
    x = torch.tensor([[1.5, 1.5, 1.5], [0.0, 0.0, 0.0]], dtype=torch.float64)
    compare_grads(lambda m, x: m.std(x, 1), x)
    compare_grads(lambda m, x: m.linalg.vector_norm(x, 2, 1), x)


def test_sum_mean_dtype_and_empty():
    x = _x((3, 4), seed=7, dtype=torch.float32)
    compare_grads(lambda m, x: m.sum(x, 1, dtype=m.float64), x)
    compare_grads(lambda m, x: m.mean(x, dtype=m.float64), x)
    compare_grads(lambda m, x: m.prod(x, 0, dtype=m.float64), x)
    compare_grads(lambda m, x: m.cumsum(x, 1, dtype=m.float64), x)
    compare_grads(lambda m, x: m.softmax(x, 0, dtype=m.float64), x)
    e = torch.zeros(0, 3, dtype=torch.float64)
    for fn in [lambda m, x: m.sum(x, 0), lambda m, x: m.sum(x), lambda m, x: m.prod(x, 0),
               lambda m, x: m.prod(x), lambda m, x: m.cumsum(x, 0), lambda m, x: m.cumprod(x, 0),
               lambda m, x: m.softmax(x, 1), lambda m, x: m.amax(x, 1), lambda m, x: m.mean(x, 1)]:
        compare_grads(fn, e)


# ---- prod: zeros in the input ------------------------------------------------------------------------
PROD_INPUTS = [
    ("no-zero", torch.tensor([[1.5, -0.5, 2.0], [0.7, 1.2, -1.1]], dtype=torch.float64)),
    ("one-zero", torch.tensor([[1.5, 0.0, 2.0], [0.7, 1.2, -1.1]], dtype=torch.float64)),
    ("two-zeros", torch.tensor([[0.0, 0.0, 2.0], [0.7, 1.2, -1.1]], dtype=torch.float64)),
    ("zero-per-row", torch.tensor([[0.0, 0.5, 2.0], [0.7, 0.0, 0.0]], dtype=torch.float64)),
]


@pytest.mark.parametrize("label,x", PROD_INPUTS, ids=[p[0] for p in PROD_INPUTS])
def test_prod_grad(label, x):
    for fn in [lambda m, x: m.prod(x), lambda m, x: m.prod(x, 0), lambda m, x: m.prod(x, 1, keepdim=True),
               lambda m, x: m.prod(x, -1), lambda m, x: m.prod(x.t(), 0), lambda m, x: m.prod(x[:, ::2], 1)]:
        compare_grads(fn, x, msg=label)
        compare_grads(fn, x, double=True, msg=f"{label} double")
    z = x.to(torch.complex128) * torch.tensor([1 + 1j, 0.5 - 2j, -1j], dtype=torch.complex128)
    compare_grads(lambda m, z: m.prod(z, 1), z, msg=f"{label} complex")
    compare_grads(lambda m, z: m.prod(z), z, msg=f"{label} complex all")
    kiln_gradcheck(lambda m, x: m.prod(x, 1), x, second=True)
    kiln_gradcheck(lambda m, x: m.prod(x), x, second=True)


def test_prod_0dim_and_single():
    compare_grads(lambda m, x: m.prod(x), _x((), seed=1))
    compare_grads(lambda m, x: m.prod(x, 0), _x((), seed=1))
    compare_grads(lambda m, x: m.prod(x, 1), _x((3, 1), seed=2))
    compare_grads(lambda m, x: m.prod(x, 1), torch.zeros(3, 1, dtype=torch.float64))


# ---- scans -------------------------------------------------------------------------------------------
SCANS = [
    ("cumsum", lambda m, x, d: m.cumsum(x, d), True),
    ("cumprod", lambda m, x, d: m.cumprod(x, d), True),
    ("logcumsumexp", lambda m, x, d: m.logcumsumexp(x, d), False),
    ("cummax", lambda m, x, d: m.cummax(x, d), False),
    ("cummin", lambda m, x, d: m.cummin(x, d), False),
    ("softmax", lambda m, x, d: m.softmax(x, d), False),
    ("log_softmax", lambda m, x, d: m.log_softmax(x, d), False),
]
SCAN_IDS = [s[0] for s in SCANS]


@pytest.mark.parametrize("name,fn,cplx", SCANS, ids=SCAN_IDS)
def test_scan_grad_vs_torch(name, fn, cplx):
    for label, x in _inputs():
        for d in (0, 1, -1):
            compare_grads(lambda m, x: fn(m, x, d), x, msg=f"{name} {label} dim={d}")
    compare_grads(lambda m, x: fn(m, x, 0), _x((), seed=4), msg=f"{name} 0-dim")
    compare_grads(lambda m, x: fn(m, x, -1), _x((3, 1), seed=5), msg=f"{name} length 1")
    if cplx:
        z = _x((3, 4), seed=6, dtype=torch.complex128)
        compare_grads(lambda m, z: fn(m, z, 1), z, msg=f"{name} complex")


@pytest.mark.parametrize("name,fn,cplx", SCANS, ids=SCAN_IDS)
def test_scan_gradcheck(name, fn, cplx):
    x = _x((2, 4), seed=7)
    kiln_gradcheck(lambda m, x: fn(m, x, 1), x)
    kiln_gradcheck(lambda m, x: fn(m, x, 0), x, second=name in ("cumsum", "cumprod", "logcumsumexp",
                                                                 "softmax", "log_softmax"))
    compare_grads(lambda m, x: fn(m, x, 1), x, double=True, msg=name)
    if cplx:
        kiln_gradcheck(lambda m, z: fn(m, z, 1), _x((2, 3), seed=8, dtype=torch.complex128))


CUMPROD_ZEROS = torch.tensor([[1.5, 0.0, 2.0, -0.5, 3.0],    # one zero
                              [0.0, 2.0, 0.0, 1.5, -1.0],    # two zeros
                              [0.5, 2.0, -1.0, 1.5, 0.0],    # zero at the end
                              [0.0, 0.0, 0.0, 1.0, 2.0],     # leading zeros
                              [1.0, 2.0, 0.5, -1.0, 2.5]],   # none
                             dtype=torch.float64)


def test_cumprod_with_zeros():
    x = CUMPROD_ZEROS
    compare_grads(lambda m, x: m.cumprod(x, 1), x)
    compare_grads(lambda m, x: m.cumprod(x, 0), x)
    compare_grads(lambda m, x: m.cumprod(x.t(), 0), x)
    compare_grads(lambda m, x: m.cumprod(x, 1), x, double=True)  # exact O(n^2) form under create_graph
    compare_grads(lambda m, x: m.cumprod(x, 0), x, double=True)
    z = x.to(torch.complex128) * (0.5 + 1j)
    compare_grads(lambda m, z: m.cumprod(z, 1), z)
    compare_grads(lambda m, z: m.cumprod(z, 1), z, double=True)
    for row in range(4):
        kiln_gradcheck(lambda m, x: m.cumprod(x, 0), x[row, :4].clone(), second=True)


def test_logcumsumexp_special_values():
    x = torch.tensor([[-float("inf"), 0.5, 1.0, -float("inf")], [800.0, 1.0, 800.0, -3.0],
                      [-1.0, -1.0, -1.0, -1.0]], dtype=torch.float64)
    compare_grads(lambda m, x: m.logcumsumexp(x, 1), x[1:])
    compare_grads(lambda m, x: m.logcumsumexp(x, 1), x[:1, 1:])
    # zero gradients in places (log|g| = -inf) must not leak NaN
    gx = to_kiln(_x((2, 4), seed=9)).requires_grad_()
    y = kiln.logcumsumexp(gx, 1)
    go = kiln.tensor([[0.0, 1.0, 0.0, -2.0], [0.0, 0.0, 0.0, 0.0]], dtype=kiln.float64)
    tx = _x((2, 4), seed=9).requires_grad_()
    tg = torch.autograd.grad(torch.logcumsumexp(tx, 1), tx, torch.tensor(go.numpy()))[0]
    kg = kiln.autograd.grad(y, gx, go)[0]
    assert torch.allclose(torch.tensor(kg.numpy()), tg, rtol=1e-10, atol=1e-12)


def test_cummax_cummin_ties():
    x = torch.tensor([[1.0, 1.0, 0.5, 2.0, 2.0], [3.0, -1.0, 3.0, 3.0, 0.0]], dtype=torch.float64)
    compare_grads(lambda m, x: m.cummax(x, 1), x)
    compare_grads(lambda m, x: m.cummin(x, 1), x)
    compare_grads(lambda m, x: m.cummax(x, 0), x.t())


def test_max_min_dim():
    x = _x((3, 4, 2), seed=10)
    for d in (0, 1, -1):
        for keep in (False, True):
            compare_grads(lambda m, x: m.max(x, d, keepdim=keep), x)
            compare_grads(lambda m, x: m.min(x, d, keepdim=keep)[0], x.permute(2, 0, 1))
    ties = torch.tensor([[2.0, 2.0, 1.0], [0.0, -1.0, -1.0]], dtype=torch.float64)
    compare_grads(lambda m, x: m.max(x, 1), ties)  # the gradient goes to the reported index
    compare_grads(lambda m, x: m.min(x, 1), ties)
    compare_grads(lambda m, x: m.max(x, 0), _x((), seed=11))
    kiln_gradcheck(lambda m, x: m.max(x, 1)[0], _x((2, 3), seed=12), second=True)


def test_softmax_family():
    x = _x((2, 3, 4), -3, 3, seed=13)
    for d in (0, 1, 2, -1):
        compare_grads(lambda m, x: m.softmax(x, d), x)
        compare_grads(lambda m, x: m.log_softmax(x, d), x.permute(2, 1, 0))
    compare_grads(lambda m, x: m.nn.functional.softmax(x, dim=1) if m is torch else m.softmax(x, 1), x)
    y = torch.tensor([[0.0, -float("inf"), 1.0], [-float("inf"), 2.0, 2.0]], dtype=torch.float64)
    compare_grads(lambda m, x: m.softmax(x, 1), y)
    compare_grads(lambda m, x: m.log_softmax(x, 1), y)
    kiln_gradcheck(lambda m, x: m.softmax(x, 1), _x((2, 3), seed=14), second=True)
    kiln_gradcheck(lambda m, x: m.log_softmax(x, 0), _x((2, 3), seed=15), second=True)


def test_softmax_float32():
    x = _x((4, 6), -4, 4, seed=16, dtype=torch.float32)
    for fn in [lambda m, x: m.softmax(x, 1), lambda m, x: m.log_softmax(x, 0), lambda m, x: m.logsumexp(x, 1),
               lambda m, x: m.cumsum(x, 1), lambda m, x: m.mean(x, 0), lambda m, x: m.amax(x, 1)]:
        compare_grads(fn, x, rtol=1e-5, atol=1e-5)


# ---- second derivatives: one representative per family ------------------------------------------------
GRADGRAD = [
    ("sum", lambda m, x: m.sum(x * x, 1)),
    ("mean", lambda m, x: m.mean(x.exp(), (0, 1))),
    ("amax", lambda m, x: m.amax(x * x, 1)),
    ("norm2", lambda m, x: m.linalg.vector_norm(x, 2, 1)),
    ("norm_l1", lambda m, x: m.linalg.vector_norm(x * x, 1)),
    ("nansum", lambda m, x: m.nansum(x.sin(), 0)),
    ("var", lambda m, x: m.var(x, 1)),
    ("logsumexp", lambda m, x: m.logsumexp(x, 1)),
    ("cummax", lambda m, x: m.cummax(x * x, 1)[0]),
    ("cumsum", lambda m, x: m.cumsum(x * x, 0)),
]


@pytest.mark.parametrize("name,fn", GRADGRAD, ids=[g[0] for g in GRADGRAD])
def test_reduction_gradgradcheck(name, fn):
    kiln_gradcheck(fn, _x((2, 3), seed=17), second=True)
    compare_grads(fn, _x((3, 4), seed=18), double=True, msg=name)


# ---- errors ------------------------------------------------------------------------------------------
def test_integer_reductions_are_not_differentiable():
    x = to_kiln(_x((3,), seed=1)).requires_grad_()
    assert not kiln.argmax(x).requires_grad and not kiln.all(x > 0).requires_grad
    assert not kiln.max(x, 0)[1].requires_grad
    with pytest.raises(RuntimeError):
        kiln.autograd.grad(kiln.argmax(x), x)
    t = _x((3,), seed=1).requires_grad_()
    with pytest.raises(RuntimeError):
        torch.autograd.grad(torch.argmax(t), t)
