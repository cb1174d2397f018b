"""Gradients of the indexing and scatter-style ops (index.cpp, scatter.cpp), against torch."""
import pytest
import torch

import kiln
from grad_shape_helpers import compare_grads, compare_gradgrads, kgradcheck, kleaf, leaf, rand


def noncontig(*shape, seed=0):
    return leaf(rand(*reversed(shape), seed=seed).permute(*reversed(range(len(shape)))))


I = torch.tensor  # index tensors stay int64 (no grad)


# ---- gather-style: index_select, gather, index, masked_select, take, take_along_dim ------------------
def test_index_select():
    x = noncontig(4, 3)
    compare_grads(lambda L, x, i: L.index_select(x, 0, i), x, I([3, 0, 3, 3]))
    compare_grads(lambda L, x, i: L.index_select(x, -1, i), x, I([2, 2]))
    compare_grads(lambda L, x, i: L.index_select(x, 0, i), x, I([], dtype=torch.int64))
    compare_grads(lambda L, x, i: L.index_select(x, 0, i), leaf(rand()), I([0]))


def test_gather():
    x = noncontig(3, 4)
    compare_grads(lambda L, x, i: L.gather(x, 1, i), x, I([[0, 0, 3], [1, 2, 1], [3, 3, 3]]))
    compare_grads(lambda L, x, i: L.gather(x, -2, i), x, I([[2, 2, 0, 1]]))
    compare_grads(lambda L, x, i: L.gather(x, 0, i), leaf(rand()), I(0))


def test_advanced_index():
    x = leaf(rand(4, 3))
    compare_grads(lambda L, x: x[L.tensor([0, 3, 0])], x)
    compare_grads(lambda L, x: x[L.tensor([[1, 1], [2, 1]]), L.tensor([0, 0])], x)
    compare_grads(lambda L, x: x[:, L.tensor([2, 2, 0])], x)
    compare_grads(lambda L, x: x[x > 0], x)
    compare_grads(lambda L, x: x[L.tensor([True, False, True, True])], noncontig(4, 3))


def test_index_put():
    x, v = leaf(rand(4, 3, seed=1)), leaf(rand(3, seed=2))
    idx = I([0, 2, 0])
    compare_grads(lambda L, x, v, i: L.index_put(x, (i,), v[:, None].expand(3, 3), accumulate=True), x, v, idx)
    compare_grads(lambda L, x, v, i: L.index_put(x, (i,), v), x, v, idx[:2])
    compare_grads(lambda L, x, v, i: L.index_put(x * 1, (i, i), v, accumulate=True), x, v, idx)


def test_index_put_mask_one_element_value():
    x, v = leaf(rand(4, 3, seed=1)), leaf(rand(1, seed=2))
    compare_grads(lambda L, x, v, m: L.index_put(x, (m,), v), x, v, rand(4, 3, seed=3) > 0)


def test_setitem_non_leaf():
    x, v = leaf(rand(4, 3, seed=1)), leaf(rand(2, 3, seed=2))

    def f(L, x, v):
        y = x * 2
        y[L.tensor([1, 3])] = v
        return y
    compare_grads(f, x, v)


def test_masked_select():
    x = noncontig(3, 4)
    m = rand(3, 4, seed=5) > 0
    compare_grads(lambda L, x, m: L.masked_select(x, m), x, m)
    compare_grads(lambda L, x, m: L.masked_select(x, m), x, m[0])  # broadcast mask
    compare_grads(lambda L, x, m: L.masked_select(x, m), leaf(rand(4)), m)  # broadcast input


def test_take():
    x = noncontig(3, 4)
    compare_grads(lambda L, x, i: L.take(x, i), x, I([[0, -1, 5], [5, 5, 11]]))
    compare_grads(lambda L, x, i: L.take(x, i), x, I(7))
    compare_grads(lambda L, x, i: L.take(x, i), x, I([], dtype=torch.int64))


def test_take_along_dim():
    x = leaf(rand(3, 4))
    compare_grads(lambda L, x, i: L.take_along_dim(x, i, 1), x, I([[0, 3, 3], [1, 1, 0], [2, 2, 2]]))
    compare_grads(lambda L, x, i: L.take_along_dim(x, i, 0), x, I([[2, 0, 0, 2]]))
    compare_grads(lambda L, x, i: L.take_along_dim(x, i, -1), leaf(rand(1, 4)), I([[0, 1], [3, 3]]))
    compare_grads(lambda L, x, i: L.take_along_dim(x, i), x, I([11, 0, 0]))
    compare_grads(lambda L, x: L.take_along_dim(x, L.argsort(x, 1), 1), x)


# ---- scatter family -----------------------------------------------------------------------------------
def test_scatter():
    x, s = noncontig(3, 4, seed=1), leaf(rand(2, 3, seed=2))
    idx = I([[0, 3, 1], [2, 0, 3]])  # no duplicates: which duplicate wins is unspecified
    compare_grads(lambda L, x, i, s: L.scatter(x, 1, i, s), x, idx, s)
    compare_grads(lambda L, x, i: L.scatter(x, -1, i, 2.5), x, idx)
    compare_grads(lambda L, x, i, s: L.scatter(x, 0, i, s), x, I([[0, 2, 1]]), s[:1])
    compare_grads(lambda L, x, i, s: L.scatter(x, 0, i, s), leaf(rand()), I(0), leaf(rand()))


def test_scatter_src_larger_than_index():
    # torch refuses to backward here; the gradient of the unread src elements is zero
    x, s = leaf(rand(3, 4, seed=1)), leaf(rand(3, 4, seed=2))
    idx = I([[1, 0], [3, 2]])
    ks = kleaf(s)
    y = kiln.scatter(kleaf(x), 1, kiln.tensor(idx.tolist()), ks)
    g = rand(3, 4, seed=3)
    gs, = kiln.autograd.grad([y], [ks], [kiln.tensor(g.tolist(), dtype=kiln.float64)])
    ts = s[:2, :2].detach().requires_grad_()
    tgs, = torch.autograd.grad(torch.scatter(x, 1, idx, ts), ts, g)
    expect = torch.zeros(3, 4, dtype=torch.float64)
    expect[:2, :2] = tgs
    assert torch.equal(torch.tensor(gs.tolist(), dtype=torch.float64), expect)


def test_scatter_add():
    x, s = noncontig(3, 4, seed=1), leaf(rand(3, 3, seed=2))
    idx = I([[0, 0, 0], [1, 3, 1], [2, 2, 0]])  # duplicates accumulate
    compare_grads(lambda L, x, i, s: L.scatter_add(x, 1, i, s), x, idx, s)
    compare_grads(lambda L, x, i, s: L.scatter_add(x, 0, i, s), x, I([[2, 2, 2], [0, 2, 1]]), leaf(rand(2, 3)))
    compare_grads(lambda L, x, i, s: L.scatter_add(x, 0, i, s), x, I([[]], dtype=torch.int64).reshape(0, 3),
                  leaf(rand(0, 3)))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    x, s = noncontig(3, 4, seed=1), leaf(rand(3, 3, seed=2))
    idx = I([[0, 0, 2], [1, 3, 1], [3, 3, 3]])
    compare_grads(lambda L, x, i, s: L.scatter_reduce(x, 1, i, s, reduce, include_self=include_self), x, idx, s,
                  msg=reduce)
    compare_grads(lambda L, x, i, s: L.scatter_reduce(x, -2, i, s, reduce, include_self=include_self), x,
                  I([[2, 2, 0, 0]]), leaf(rand(1, 4, seed=3)), msg=reduce)


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_prod_zeros(include_self):
    x = leaf(torch.tensor([[1.5, 0.0, 2.0, -1.0]], dtype=torch.float64))
    s = leaf(torch.tensor([[0.0, 3.0, 0.0, 0.0, 2.0, -0.5]], dtype=torch.float64))
    idx = I([[0, 0, 1, 2, 2, 3]])  # one zero at 0, a zero joining self's zero at 1, two zeros at 2
    compare_grads(lambda L, x, i, s: L.scatter_reduce(x, 1, i, s, "prod", include_self=include_self), x, idx, s)


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_scatter_reduce_ties(reduce):
    x = leaf(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
    s = leaf(torch.tensor([1.0, 3.0, 3.0, 2.0, 0.5], dtype=torch.float64))
    idx = I([0, 2, 2, 1, 1])
    for inc in (True, False):
        compare_grads(lambda L, x, i, s: L.scatter_reduce(x, 0, i, s, reduce, include_self=inc), x, idx, s)


def test_scatter_inplace_on_non_leaf():
    x, s = leaf(rand(3, 4, seed=1)), leaf(rand(3, 2, seed=2))
    idx = I([[0, 3], [1, 1], [2, 0]])

    def f(L, x, i, s):
        y = x * 3
        y.scatter_add_(1, i, s)
        y.scatter_reduce_(1, i, s * s, "amax")
        return y
    compare_grads(f, x, idx, s)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_scatter_legacy_reduce_has_no_derivative():
    x, s = leaf(rand(3, 4, seed=1)), leaf(rand(3, 2, seed=2))
    idx = I([[0, 3], [1, 1], [2, 0]])
    for L, xx, ss, ii in ((torch, x, s, idx), (kiln, kleaf(x), kleaf(s), kiln.tensor(idx.tolist()))):
        y = L.scatter(xx, 1, ii, ss, reduce="multiply")
        with pytest.raises(RuntimeError):
            L.autograd.grad([y.sum()], [xx])


def test_index_add():
    x, s = noncontig(4, 3, seed=1), leaf(rand(4, 3, seed=2))
    compare_grads(lambda L, x, i, s: L.index_add(x, 0, i, s), x, I([3, 0, 3, 3]), s)
    compare_grads(lambda L, x, i, s: L.index_add(x, -1, i, s, alpha=-2.5), x, I([2, 0, 2]), noncontig(4, 3, seed=3))
    compare_grads(lambda L, x, i, s: L.index_add(x, 0, i, s), leaf(rand(3)), I([1, 1]), leaf(rand(2)))
    compare_grads(lambda L, x, i, s: L.index_add(x, 0, i, s), leaf(rand()), I([0]), leaf(rand()))
    compare_grads(lambda L, x, i, s: L.index_add(x, 1, i, s), x, I([], dtype=torch.int64), leaf(rand(4, 0)))


def test_complex_grads():
    def c(*shape, seed=0):
        return leaf(torch.complex(rand(*shape, seed=seed), rand(*shape, seed=seed + 50)))
    x, s = c(4, 3, seed=1), c(2, 3, seed=2)
    compare_grads(lambda L, x, s: L.index_add(x, 0, L.tensor([1, 1]), s, alpha=2 - 1j), x, s)
    compare_grads(lambda L, x, s: L.scatter_add(x, 0, L.tensor([[0, 3, 3], [3, 3, 0]]), s), x, s)
    compare_grads(lambda L, x, s: L.masked_scatter(x, x.real > 0, L.cat([s.reshape(-1)] * 2)), x, s)
    compare_grads(lambda L, x: L.take(x, L.tensor([1, 1, 5])), x)
    compare_grads(lambda L, x, s: L.index_copy(x, 1, L.tensor([2, 0]), s), x, c(4, 2, seed=3))


def test_scatter_reduce_complex_is_refused():
    x = leaf(torch.complex(rand(3, seed=1), rand(3, seed=2)))
    s = leaf(torch.complex(rand(2, seed=3), rand(2, seed=4)))
    kx, ks = kleaf(x), kleaf(s)
    with pytest.raises(RuntimeError):  # torch: at the forward; kiln: at the backward
        torch.autograd.grad(torch.scatter_reduce(x, 0, I([0, 0]), s, "sum").abs().sum(), x)
    with pytest.raises(RuntimeError):
        kiln.autograd.grad(kiln.scatter_reduce(kx, 0, kiln.tensor([0, 0]), ks, "sum").abs().sum(), kx)


def test_index_copy():
    x, s = noncontig(4, 3, seed=1), leaf(rand(2, 3, seed=2))
    compare_grads(lambda L, x, i, s: L.index_copy(x, 0, i, s), x, I([3, 1]), s)
    compare_grads(lambda L, x, i, s: L.index_copy(x, -1, i, s), x, I([2, 0, 1]), leaf(rand(4, 3)))
    compare_grads(lambda L, x, i, s: L.index_copy(x, 0, i, s), leaf(rand()), I([0]), leaf(rand()))


def test_index_fill():
    x = noncontig(4, 3)
    compare_grads(lambda L, x, i: L.index_fill(x, 0, i, 2.0), x, I([3, 1, 3]))
    compare_grads(lambda L, x, i: L.index_fill(x, -1, i, -1.0), x, I([-1]))
    compare_grads(lambda L, x, i: L.index_fill(x, 1, i, 0.5), x, I([], dtype=torch.int64))


def test_masked_scatter():
    x, s = noncontig(3, 4, seed=1), leaf(rand(14, seed=2))
    m = rand(3, 4, seed=5) > 0
    compare_grads(lambda L, x, m, s: L.masked_scatter(x, m, s), x, m, s)
    compare_grads(lambda L, x, m, s: L.masked_scatter(x, m, s), x, m[1], s.reshape(2, 7))  # broadcast mask
    compare_grads(lambda L, x, m, s: L.masked_scatter(x, m, s), leaf(rand(4)), m, s)  # broadcast self


def test_put():
    x, s = noncontig(3, 4, seed=1), leaf(rand(2, 2, seed=2))
    idx = I([[0, -1], [5, 5]])
    compare_grads(lambda L, x, i, s: L.put(x, i, s, accumulate=True), x, idx, s)
    compare_grads(lambda L, x, i, s: L.put(x, i, s), x, I([[0, -1], [5, 7]]), s)
    compare_grads(lambda L, x, i, s: L.put(x, i, s), x, I([], dtype=torch.int64), leaf(rand(0)))


def test_inplace_variants():
    x, s = leaf(rand(4, 3, seed=1)), leaf(rand(2, 3, seed=2))

    def f(L, x, s):
        y = x * 1.5
        y.index_add_(0, L.tensor([1, 1]), s)
        y.index_copy_(0, L.tensor([0, 3]), s * 2)
        y.index_fill_(1, L.tensor([2]), 0.25)
        y.put_(L.tensor([0, 4]), s[0, :2], accumulate=True)
        y.masked_scatter_(y > 0.5, s.reshape(-1))
        return y
    compare_grads(f, x, s)


# ---- gradcheck / gradgradcheck ------------------------------------------------------------------------
def test_gradcheck_index_ops():
    x, s = leaf(rand(3, 2, seed=1)), leaf(rand(2, 2, seed=2))
    i = I([2, 0])
    kgradcheck(lambda L, x, i, s: L.index_add(x, 0, i, s, alpha=2.0), x, i, s, gradgrad=True)
    kgradcheck(lambda L, x, i, s: L.index_copy(x, 0, i, s), x, i, s, gradgrad=True)
    kgradcheck(lambda L, x, i, s: L.scatter_add(x, 0, i, s), x, I([[2, 0], [2, 2]]), s, gradgrad=True)
    kgradcheck(lambda L, x, i, s: L.scatter_reduce(x, 0, i, s, "mean", include_self=False), x,
               I([[2, 0], [2, 2]]), s, gradgrad=True)
    kgradcheck(lambda L, x, i, s: L.scatter_reduce(x, 0, i, s, "prod"), x, I([[2, 0], [2, 2]]), s)
    kgradcheck(lambda L, x, i: L.take(x, i), x, I([5, 0, 5]), gradgrad=True)
    kgradcheck(lambda L, x, m, s: L.masked_scatter(x, m, s), x, rand(3, 2, seed=4) > 0, leaf(rand(6)),
               gradgrad=True)
    kgradcheck(lambda L, x, i: L.gather(x, 1, i), x, I([[1, 1], [0, 1], [0, 0]]), gradgrad=True)


def test_double_backward_vs_torch():
    x, s = leaf(rand(3, 4, seed=1)), leaf(rand(3, 3, seed=2))
    idx = I([[0, 0, 2], [1, 3, 1], [3, 3, 3]])
    compare_gradgrads(lambda L, x, i, s: L.scatter_add(x * x, 1, i, s * s), x, idx, s)
    compare_gradgrads(lambda L, x, i, s: L.scatter_reduce(x * x, 1, i, s * s, "mean"), x, idx, s)
    compare_gradgrads(lambda L, x, i: L.gather(x * x, 1, i), x, idx)
    compare_gradgrads(lambda L, x, i: L.index_select(x * x, 1, i), x, I([3, 3, 0]))
