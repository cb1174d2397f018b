"""Gradients of the sorting / selection ops (sort.cpp, search.cpp), against torch."""
import pytest
import torch

import kiln
from grad_shape_helpers import compare_grads, compare_gradgrads, kgradcheck, kleaf, leaf, rand


def noncontig(*shape, seed=0):
    return leaf(rand(*reversed(shape), seed=seed).permute(*reversed(range(len(shape)))))


NAN = float("nan")

SELECT_CASES = [
    ("sort", lambda L, x: L.sort(x)[0], "nc"),
    ("sort_dim0_desc", lambda L, x: L.sort(x, 0, descending=True), "nc"),
    ("sort_stable_neg", lambda L, x: L.sort(x, dim=-2, stable=True)[0], (3, 2, 2)),
    ("sort_0dim", lambda L, x: L.sort(x)[0], ()),
    ("sort_empty", lambda L, x: L.sort(x, 1)[0], (3, 0)),
    ("msort", lambda L, x: L.msort(x), "nc"),
    ("topk", lambda L, x: L.topk(x, 2)[0], "nc"),
    ("topk_smallest_dim0", lambda L, x: L.topk(x, 3, 0, largest=False), (4, 3)),
    ("topk_unsorted", lambda L, x: L.topk(x, 2, -1, sorted=False)[0], (3, 5)),
    ("topk_k0", lambda L, x: L.topk(x, 0)[0], (3, 4)),
    ("kthvalue", lambda L, x: L.kthvalue(x, 2)[0], "nc"),
    ("kthvalue_keepdim", lambda L, x: L.kthvalue(x, 3, 0, keepdim=True)[0], (4, 3)),
    ("kthvalue_0dim", lambda L, x: L.kthvalue(x, 1)[0], ()),
    ("median_dim", lambda L, x: L.median(x, 1)[0], "nc"),
    ("median_dim_keepdim", lambda L, x: L.median(x, -2, keepdim=True)[0], (4, 3)),
    ("nanmedian_dim", lambda L, x: L.nanmedian(x, 0)[0], "nc"),
    ("median", lambda L, x: L.median(x), "nc"),
    ("nanmedian", lambda L, x: L.nanmedian(x), (5,)),
    ("max_dim", lambda L, x: L.max(x, 1)[0], "nc"),
    ("min_dim_keepdim", lambda L, x: L.min(x, 0, keepdim=True)[0], "nc"),
    ("cummax", lambda L, x: L.cummax(x, 1)[0], "nc"),
]


def _input(spec, seed=0):
    return noncontig(3, 4, seed=seed) if spec == "nc" else leaf(rand(*spec, seed=seed))


@pytest.mark.parametrize("name,fn,spec", SELECT_CASES, ids=[c[0] for c in SELECT_CASES])
def test_selection_grads(name, fn, spec):
    compare_grads(fn, _input(spec), msg=name)


def test_median_ties_share_gradient():
    x = leaf(torch.tensor([3.0, 1.0, 2.0, 2.0, 5.0, 2.0], dtype=torch.float64))
    compare_grads(lambda L, x: L.median(x), x)
    compare_grads(lambda L, x: L.nanmedian(x), x)
    compare_grads(lambda L, x: L.median(x.reshape(2, 3)), x)


def test_median_with_nan():
    x = leaf(torch.tensor([[3.0, NAN, 2.0, 1.0], [NAN, 4.0, NAN, 0.5]], dtype=torch.float64))
    compare_grads(lambda L, x: L.median(x), x)
    compare_grads(lambda L, x: L.nanmedian(x), x)
    compare_grads(lambda L, x: L.median(x, 1)[0], x)
    compare_grads(lambda L, x: L.nanmedian(x, 1)[0], x)
    compare_grads(lambda L, x: L.sort(x, 1)[0], x)


def test_sort_ties_follow_torch_order():
    x = leaf(torch.tensor([[1.0, 2.0, 1.0, 2.0, 0.5], [3.0, 3.0, 3.0, 1.0, 1.0]], dtype=torch.float64))
    compare_grads(lambda L, x: L.sort(x, 1)[0], x)
    compare_grads(lambda L, x: L.sort(x, 1, descending=True)[0], x)
    compare_grads(lambda L, x: L.sort(x, dim=1, stable=True)[0], x)
    compare_grads(lambda L, x: L.topk(x, 2)[0], x)
    compare_grads(lambda L, x: L.kthvalue(x, 2, 1)[0], x)


def test_mode():
    x = leaf(torch.tensor([[1.0, 2.0, 2.0, 3.0], [0.5, 0.5, 4.0, 4.0], [7.0, 6.0, 5.0, 6.0]], dtype=torch.float64))
    compare_grads(lambda L, x: L.mode(x, 1)[0], x)
    compare_grads(lambda L, x: L.mode(x.t(), 0, keepdim=True)[0], x)


def test_sort_indices_modified_inplace():
    # the indices are saved for backward: changing them in place must be detected
    for L, x in ((torch, rand(3, 4).requires_grad_()), (kiln, kleaf(rand(3, 4).requires_grad_()))):
        v, i = L.sort(x * 1, 1)
        i.add_(0)
        with pytest.raises(RuntimeError):
            v.sum().backward()


def test_argsort_and_histc_are_not_differentiable():
    x = rand(3, 4).requires_grad_()
    kx = kleaf(x)
    assert not torch.argsort(x).requires_grad and not kiln.argsort(kx).requires_grad
    # histc's counts are constants in torch: nothing flows back through them
    compare_grads(lambda L, x: L.histc(x, 4, -2, 2) * 0 + x.sum(), leaf(rand(6)))


def test_unique_has_no_derivative():
    x = rand(5).requires_grad_()
    kx = kleaf(x)
    for L, xx in ((torch, x), (kiln, kx)):
        with pytest.raises(NotImplementedError):
            L.autograd.grad([L.unique(xx).sum()], [xx])


# ---- quantile ---------------------------------------------------------------------------------------------
INTERP = ["linear", "lower", "higher", "nearest", "midpoint"]


@pytest.mark.parametrize("interp", INTERP)
@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
def test_quantile(fn, interp):
    x = noncontig(3, 5)
    q = leaf(torch.tensor([0.0, 0.3, 0.5, 1.0], dtype=torch.float64))
    f = lambda L, x, q, **kw: getattr(L, fn)(x, q, interpolation=interp, **kw)  # noqa: E731
    compare_grads(lambda L, x, q: f(L, x, q), x, q, msg="flat")
    compare_grads(lambda L, x, q: f(L, x, q, dim=1), x, q, msg="dim")
    compare_grads(lambda L, x, q: f(L, x, q, dim=0, keepdim=True), x, q, msg="keepdim")
    compare_grads(lambda L, x, q: f(L, x, q[1], dim=-1), x, q, msg="0-dim q")
    compare_grads(lambda L, x, q: f(L, x, q[2], keepdim=True), x, q, msg="flat keepdim")
    compare_grads(lambda L, x: getattr(L, fn)(x, 0.7, dim=1, interpolation=interp), x, msg="float q")


@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
def test_quantile_nan(fn):
    x = leaf(torch.tensor([[1.0, NAN, 3.0, 0.5], [2.0, 1.5, -1.0, 4.0], [NAN, NAN, NAN, NAN]], dtype=torch.float64))
    q = leaf(torch.tensor([0.25, 0.6], dtype=torch.float64))
    for interp in INTERP:
        compare_grads(lambda L, x, q: getattr(L, fn)(x, q, dim=1, interpolation=interp), x, q, msg=interp)
    compare_grads(lambda L, x, q: getattr(L, fn)(x[:2], q), x, q)


def test_quantile_0dim_input():
    x = leaf(rand())
    q = leaf(torch.tensor(0.4, dtype=torch.float64))
    compare_grads(lambda L, x, q: L.quantile(x, q), x, q)
    compare_grads(lambda L, x, q: L.quantile(x, q, dim=0, keepdim=True), x, q)


# ---- gradcheck / gradgradcheck ----------------------------------------------------------------------------
def test_gradcheck_selection():
    x = leaf(rand(2, 3))
    kgradcheck(lambda L, x: L.sort(x, 1)[0], x, gradgrad=True)
    kgradcheck(lambda L, x: L.topk(x, 2, 0)[0], x, gradgrad=True)
    kgradcheck(lambda L, x: L.kthvalue(x, 2, 1)[0], x)
    kgradcheck(lambda L, x: L.median(x, 0)[0], x)
    kgradcheck(lambda L, x: L.median(x), x, gradgrad=True)
    kgradcheck(lambda L, x, q: L.quantile(x, q, dim=1), x, leaf(torch.tensor([0.2, 0.9], dtype=torch.float64)),
               gradgrad=True)
    kgradcheck(lambda L, x: L.nanquantile(x, 0.35, interpolation="midpoint"), x)


def test_double_backward_vs_torch():
    x = leaf(rand(3, 4))
    q = leaf(torch.tensor([0.2, 0.65], dtype=torch.float64))
    compare_gradgrads(lambda L, x: L.sort(x * x, 1)[0], x)
    compare_gradgrads(lambda L, x: L.topk(x * x, 2)[0] * x[:, :2], x)
    compare_gradgrads(lambda L, x, q: L.quantile(x * x, q * q, dim=0), x, q)
