"""addr, diagonal/select/slice_scatter, index_reduce, narrow_copy, sum_to_size, fill_diagonal_, unravel_index,
combinations, empty_strided, randint_like, cond, chain_matmul, and torch's alias / predicate methods, against
torch 2.13."""
import warnings

import numpy as np
import pytest
import torch

import kiln
from helpers import assert_same as _check, same_with_grad as same, seeded_randn as rnd
from helpers import to_kiln as _k, to_kiln_tree as _conv


def test_addr_like_torch():
    m, a, b = rnd(3, 4), rnd(3, seed=1), rnd(4, seed=2)
    same(lambda L, m, a, b: L.addr(m, a, b), m, a, b, grad=(0, 1, 2))
    same(lambda L, m, a, b: L.addr(m, a, b, beta=0.5, alpha=-2), m, a, b, grad=(0, 1, 2))
    same(lambda L, m, a, b: m.addr(a, b, beta=2), m, a, b)
    same(lambda L, m, a, b: L.addr(m, a, b), rnd(4), a, b, grad=(0,))  # self broadcasts
    same(lambda L, m, a, b: L.addr(m, a, b, beta=0), torch.full((3, 4), float("nan")), a, b)  # NaN ignored
    same(lambda L, m, a, b: L.addr(m, a, b), m, a.double(), b)
    same(lambda L, m, a, b: L.addr(m, a, b), m.long(), a.long(), b.long())
    same(lambda L, m, a, b: L.addr(m, a, b, beta=0.5), m.long(), a.long(), b.long())
    same(lambda L, m, a, b: L.addr(m, a, b, alpha=0.5), m.long(), a.long(), b.long())
    for beta, alpha in [(True, True), (False, True), (True, False), (2, 3)]:
        same(lambda L, m, a, b: L.addr(m, a, b, beta=beta, alpha=alpha), m > 0, a > 0, b > 0)
    same(lambda L, m, a, b: L.addr(m, a, b), m, a[None], b)
    same(lambda L, m, a, b: L.addr(m, a, b, beta=0.5), m > 0, a > 0, b > 0)  # bool: integral rules
    mc, ac, bc = m.to(torch.complex64), a.to(torch.complex64), b.to(torch.complex64)
    for beta, alpha in [(1 + 2j, 1), (2j, 1 + 1j), (0j, 1j)]:
        same(lambda L, m, a, b: L.addr(m, a, b, beta=beta, alpha=alpha), mc, ac, bc)
    same(lambda L, m, a, b: L.addr(m, a, b, alpha=1j), m, a, b)  # a complex scalar on float tensors
    same(lambda L, m, a, b: L.addr(m, a, b, alpha=2 + 0j, beta=0j), m, a, b)  # no imaginary part: accepted
    same(lambda L, m, a, b: L.addr(m, a, b, beta=True), m, a, b)  # bool scalars: bool results only
    same(lambda L, m, a, b: L.addr(m, a, b, alpha=True), m.long(), a.long(), b.long())
    same(lambda L, m, a, b: L.addr(m, a, b), rnd(2, 4), a, b)

    def inplace(L, m, a, b):
        r = m.clone()
        assert r.addr_(a, b, alpha=3) is r
        return r
    same(inplace, m, a, b)
    same(inplace, m.long(), a, b)  # float result into int64: RuntimeError


@pytest.mark.parametrize("case", [
    ("diagonal_scatter", (4, 5), (4,), dict(offset=1)),
    ("diagonal_scatter", (4, 5), (3,), dict(offset=-1)),
    ("diagonal_scatter", (2, 3, 3), (2, 3), dict(dim1=1, dim2=2)),
    ("select_scatter", (4, 5), (5,), dict(dim=0, index=2)),
    ("select_scatter", (4, 5), (4,), dict(dim=1, index=-1)),
    ("slice_scatter", (6, 4), (2, 4), dict(start=2, end=4)),
    ("slice_scatter", (6, 4), (6, 2), dict(dim=1, step=2)),
    ("slice_scatter", (6, 4), (6, 4), dict()),
    ("slice_scatter", (6, 4), (3, 4), dict(start=-3)),
])
def test_scatter_views_like_torch(case):
    name, xs, ss, kw = case
    x, s = rnd(*xs), rnd(*ss, seed=1)
    same(lambda L, x, s: getattr(L, name)(x, s, **kw), x, s, grad=(0, 1))
    same(lambda L, x, s: getattr(x, name)(s, **kw), x, s)
    same(lambda L, x, s: getattr(L, name)(x, s, **kw), x, s.double())  # src cast into self's dtype
    bad = rnd(*(d + 1 for d in ss), seed=2)
    same(lambda L, x, s: getattr(L, name)(x, s, **kw), x, bad)  # size mismatch


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_like_torch(reduce, include_self):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: "index_reduce() is in beta"
        x, src = rnd(5, 3), rnd(4, 3, seed=1)
        idx = torch.tensor([0, 4, 0, 2])
        same(lambda L, x, i, s: L.index_reduce(x, 0, i, s, reduce, include_self=include_self), x, idx, src)
        same(lambda L, x, i, s: x.index_reduce(1, i, s, reduce, include_self=include_self), rnd(3, 5), idx,
             rnd(3, 4, seed=1))
        same(lambda L, x, i, s: L.index_reduce(x, 0, i, s, reduce), x, idx.int(), src)

        def inplace(L, x, i, s):
            r = x.clone()
            assert r.index_reduce_(0, i, s, reduce, include_self=include_self) is r
            return r
        same(inplace, x, idx, src)
        same(lambda L, x, i, s: L.index_reduce(x, 0, i, s, reduce), x.long(), idx, src.long())


def test_index_reduce_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x, src = rnd(5, 3), rnd(4, 3, seed=1)
        f = lambda L, x, i, s, r="amax": L.index_reduce(x, 0, i, s, r)  # noqa: E731
        same(f, x, torch.tensor([0, 4, 0, 2]), src, "sum")
        same(f, x, torch.tensor([0, 5, 0, 2]), src)
        same(f, x, torch.tensor([-1, 0, 0, 2]), src)
        same(f, x, torch.tensor([0, 4, 0]), src)
        same(f, x, torch.tensor([0.0, 4, 0, 2]), src)
        same(lambda L, x, i, s: L.index_reduce(x, 1, i, s, "prod"), rnd(3, 5), torch.tensor([0, 1, 2]), rnd(3))
        same(lambda L, x, i, s: L.index_reduce(x, 0, i, s, "prod"), rnd(3), torch.tensor([1]), torch.tensor(5.0))
        same(lambda L, x, i, s: L.index_reduce(x, 0, i, s, "prod"), torch.tensor(2.0), torch.tensor([0]),
             torch.tensor([3.0]))
        same(lambda L, x, i, s: L.index_reduce(x, 0, i, s, "prod"), rnd(3, 4), torch.tensor([1, 2]), rnd(2, 3))
        same(f, x, torch.tensor([0, 4, 0, 2]), src.double())


def test_narrow_copy_sum_to_size():
    x = rnd(4, 5)
    same(lambda L, x: L.narrow_copy(x, 1, 1, 3), x)
    same(lambda L, x: x.narrow_copy(0, 2, 2), x)
    same(lambda L, x: L.narrow_copy(x, 1, 4, 3), x)
    y = kiln.narrow_copy(_k(x), 1, 0, 2)
    assert y.is_contiguous()
    y.add_(1)
    np.testing.assert_array_equal(_k(x).numpy(), x.numpy())  # a copy
    z = rnd(2, 3, 4)
    for size in [(3, 4), (1, 4), (3, 1), (1, 1), (2, 1, 4), (2, 3, 4), (4,), ()]:
        same(lambda L, z: z.sum_to_size(size), z, grad=(0,))
        same(lambda L, z: z.sum_to_size(*size), z) if size else None
    same(lambda L, z: z.sum_to_size((2, 4)), z)
    same(lambda L, x, s: L.slice_scatter(x, s, step=0), rnd(4, 4), rnd(4, 4))
    same(lambda L, z: z.sum_to_size((5, 2, 3, 4)), z)


def test_fill_diagonal_like_torch():
    for shape, wrap in [((3, 5), False), ((5, 3), False), ((7, 3), True), ((7, 3), False), ((8, 2), True),
                        ((4, 4), True), ((3, 3, 3), False), ((2, 2, 2, 2), False)]:
        def f(L, x):
            r = x.clone()
            assert r.fill_diagonal_(2.5, wrap=wrap) is r
            return r
        same(f, torch.zeros(shape))
    same(lambda L, x: x.clone().fill_diagonal_(1), torch.zeros(3, 4, 5))
    same(lambda L, x: x.clone().fill_diagonal_(1), torch.zeros(3))
    same(lambda L, x: x.t().clone().t().fill_diagonal_(7), torch.zeros(3, 4))  # a strided matrix
    k = _k(torch.zeros(4, 6))
    k[:, 1:4].fill_diagonal_(5)  # a view: written through to k
    t = torch.zeros(4, 6)
    t[:, 1:4].fill_diagonal_(5)
    _check(k, t)


def test_unravel_index_like_torch():
    for idx, shape in [(torch.tensor([4, 1, 5]), (2, 3)), (torch.tensor(5), (2, 3)), (torch.tensor([3]).int(), 4),
                       (torch.tensor([[7, 0], [23, 11]]), (2, 3, 4)), (torch.tensor([-1, -6]), (2, 3)),
                       (torch.tensor([6]), (2, 3)), (torch.tensor([0, 0]), ()), (torch.tensor(5), torch.Size([6]))]:
        want = torch.unravel_index(idx, shape)
        got = kiln.unravel_index(_k(idx), tuple(shape) if isinstance(shape, torch.Size) else shape)
        _check(got, want)
    for idx, shape in [(torch.tensor(1.0), (2, 3)), (torch.tensor(True), (2,)), (torch.tensor(1), (2, -3)),
                       (torch.tensor(1), "ab"), (torch.tensor(1), (2.0, 3))]:
        with pytest.raises(Exception) as e:
            torch.unravel_index(idx, shape)
        with pytest.raises(type(e.value)):
            kiln.unravel_index(_k(idx), shape)


def test_combinations_like_torch():
    x = torch.tensor([3.0, 1.0, 4.0, 1.5])
    for r in range(0, 6):
        for rep in (False, True):
            same(lambda L, x: L.combinations(x, r, with_replacement=rep), x)
    same(lambda L, x: L.combinations(x), torch.arange(0))
    same(lambda L, x: L.combinations(x), torch.arange(1))
    same(lambda L, x: L.combinations(x, 2), torch.arange(5), grad=())
    same(lambda L, x: L.combinations(x, 2), x, grad=(0,))
    same(lambda L, x: L.combinations(x), torch.ones(2, 2))
    c = kiln.combinations(_k(x), 1)  # a copy, as torch's
    c.add_(1)
    assert _k(x).tolist() == x.tolist()
    same(lambda L, x: L.combinations(x, -1), x)


def test_aliases_and_predicates():
    x = torch.tensor([0.25, 0.5, 0.75])
    for name in ["arccosh", "arcsinh", "arctanh"]:
        same(lambda L, x: getattr(x + 1 if name == "arccosh" else x, name)(), x)
    same(lambda L, x: x.arctan2(x + 1), x)
    for name, args in [("arccos_", ()), ("arcsin_", ()), ("arctan_", ()), ("absolute_", ()), ("negative_", ()),
                       ("multiply_", (2.0,)), ("divide_", (2.0,)), ("subtract_", (1.0,)), ("fix_", ()),
                       ("arcsinh_", ()), ("arctanh_", ()), ("arctan2_", (torch.tensor(2.0),))]:
        def f(L, x):
            r = x.clone()
            assert getattr(r, name)(*_conv(args) if L is kiln else args) is r
            return r
        same(f, x)
    for name in ["greater_", "greater_equal_", "less_", "less_equal_", "not_equal_"]:
        same(lambda L, x: getattr(x.clone(), name)(0.5), x)
    for lib, T in ((torch, x), (kiln, _k(x))):
        assert lib.is_nonzero(T[1:2]) and not lib.is_nonzero(T[:1] * 0)
        assert T[:1].is_nonzero()
        with pytest.raises(RuntimeError):
            T.is_nonzero()
        with pytest.raises(RuntimeError):
            T[:0].is_nonzero()
        assert lib.is_same_size(T, T * 2) and not T.is_same_size(T[:2])
        assert lib.is_signed(T) and T.is_signed() and not T.to(lib.uint8).is_signed() and not (T > 0).is_signed()
        assert T.to(lib.float8_e4m3fn).is_signed() and T.to(lib.float8_e5m2).is_signed()
        assert lib.is_floating_point(T) and not lib.is_complex(T)
        assert lib.resolve_conj(T) is T and lib.resolve_neg(T) is T
        assert T.resolve_conj() is T and not T.is_conj() and not T.is_neg()
        assert T.type_as(T.to(lib.float64)).dtype == lib.float64
        assert [tuple(c.shape) for c in T.unsafe_chunk(2)] == [(2,), (1,)]
        assert [tuple(c.shape) for c in T.unsafe_split(2)] == [(2,), (1,)]
        assert [tuple(c.shape) for c in T.unsafe_split_with_sizes([1, 2])] == [(1,), (2,)]
        assert T.isreal().all()


def test_empty_strided_randint_like_cond_chain_matmul():
    for size, stride in [((2, 3), (1, 2)), ((2, 3), (3, 1)), ((0, 3), (3, 1)), ((), ()), ((4,), (0,))]:
        for lib in (torch, kiln):
            t = lib.empty_strided(size, stride, dtype=lib.float64)
            assert tuple(t.shape) == size and tuple(t.stride()) == stride and t.dtype == lib.float64
        k = _k(torch.ones(1)).new_empty_strided(size, stride)
        assert tuple(k.shape) == size and tuple(k.stride()) == stride
    with pytest.raises(RuntimeError):
        kiln.empty_strided((2, 3), (1,))
    x = _k(torch.zeros(50, 40, dtype=torch.int32))
    r = kiln.randint_like(x, 10)
    assert r.dtype == kiln.int32 and tuple(r.shape) == (50, 40) and r.min().item() >= 0 and r.max().item() == 9
    r = kiln.randint_like(x, -3, 3, dtype=kiln.int64)
    assert r.dtype == kiln.int64 and r.min().item() == -3 and r.max().item() == 2
    assert kiln.randint_like(_k(torch.zeros(3)), 5).dtype == kiln.float32
    want = torch.randint_like(torch.zeros(3, 4).t(), 5).stride()
    assert kiln.randint_like(_k(torch.zeros(3, 4)).t(), 5).stride() == want  # the input's dense strides
    for dt, high in ((torch.bool, 5), (torch.uint8, 300)):  # bounds past the dtype: torch's random_ error
        with pytest.raises(RuntimeError):
            torch.randint_like(torch.zeros(3, dtype=dt), high)
        with pytest.raises(RuntimeError):
            kiln.randint_like(_k(torch.zeros(3, dtype=dt)), high)
    assert kiln.cond(1.0, lambda: 1, lambda: 0, ()) == 1
    with pytest.raises(TypeError):
        _k(torch.zeros(4)).unsafe_split([1, 3])
    a = _k(torch.tensor([1.0, 2.0]))
    assert kiln.cond(a.sum() > 0, lambda v: v * 2, lambda v: v * 3, (a,)).tolist() == [2.0, 4.0]
    assert kiln.cond(False, lambda v: v * 2, lambda v: v * 3, (a,)).tolist() == [3.0, 6.0]
    with pytest.raises(RuntimeError):
        kiln.cond(a > 0, lambda v: v, lambda v: v, (a,))
    m = [rnd(3, 4), rnd(4, 5, seed=1), rnd(5, 2, seed=2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check(kiln.chain_matmul(*_conv(m)), torch.chain_matmul(*m), 1e-5, 1e-5)
        _check(kiln.chain_matmul(_k(m[0])), torch.chain_matmul(m[0]))
    with pytest.raises(RuntimeError):
        kiln.chain_matmul(_k(rnd(3)))
    with pytest.raises(RuntimeError):
        kiln.chain_matmul(_k(rnd(3)), _k(rnd(3, 4)))
    o = kiln.zeros(1)
    assert kiln.chain_matmul(*_conv(m), out=o) is o and tuple(o.shape) == (3, 2)
    with pytest.raises(TypeError):
        kiln.randint_like(x)


# ---- histogram -------------------------------------------------------------------------------------------
def _hist(L, x, *args, **kw):
    r = L.histogram(x, *args, **kw)
    assert type(r).__name__ == "histogram" and r.hist is r[0] and r.bin_edges is r[1]
    return r


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_histogram_like_torch(dtype):
    x = torch.tensor([1.0, 2, 1, 2.5, 4, 4, 0.3, 3.999, 2.0000001], dtype=dtype)
    w = rnd(9, seed=3, dtype=dtype).abs()
    for args, kw in [((3,), {}), ((7,), {}), ((1,), {}), ((4,), {"range": (0.0, 3.0)}), ((4,), {"range": (2.0, 2.0)}),
                     ((3,), {"weight": w}), ((3,), {"weight": w, "density": True}), ((5,), {"density": True}),
                     ((torch.tensor([0.0, 1, 2, 4], dtype=dtype),), {}),
                     ((torch.tensor([0.0, 1, 2, 4], dtype=dtype),), {"weight": w, "density": True}),
                     ((torch.tensor([1.5, 2.5], dtype=dtype),), {})]:
        same(lambda L, x: tuple(_hist(L, x, *_conv(args) if L is kiln else args,
                                      **({k: _conv(v) for k, v in kw.items()} if L is kiln else kw))), x)
    same(lambda L, x: tuple(x.histogram(4)), x)
    same(lambda L, x: tuple(L.histogram(x, 3)), x.reshape(3, 3))
    same(lambda L, x: tuple(L.histogram(x, 3)), torch.tensor([], dtype=dtype))
    same(lambda L, x: tuple(L.histogram(x, 2)), torch.tensor([2.0, 2.0], dtype=dtype))
    same(lambda L, x: tuple(L.histogram(x, 2, range=(0.0, 4.0))), torch.tensor([float("nan"), 1, 5], dtype=dtype))
    # 100 bins over random data: the linear edges and the last, closed bin as torch's
    y = rnd(5000, seed=7, dtype=dtype)
    same(lambda L, x: tuple(L.histogram(x)), y)


def test_histogram_is_not_differentiable():
    for lib in (torch, kiln):
        x = lib.ones(5, requires_grad=True) if lib is torch else kiln.ones(5).requires_grad_(True)
        h = lib.histogram(x, 3).hist
        assert h.requires_grad
        with pytest.raises(RuntimeError, match="derivative for aten::histogram is not implemented"):
            h.sum().backward()


def test_histogram_errors():
    x = torch.tensor([1.0, 2, 3])
    for args, kw in [((x.long(), 3), {}), ((x.half(), 3), {}), ((x, 0), {}), ((x, 3), {"range": (3.0, 1.0)}),
                     ((torch.tensor([float("nan"), 1.0]), 2), {}), ((torch.tensor([float("inf"), 1.0]), 2), {}),
                     ((x, torch.tensor([1.0, 2]).double()), {}), ((x, torch.tensor([])), {}),
                     ((x, torch.tensor([[1.0, 2]])), {}), ((x, torch.tensor([2.0])), {}),
                     ((x, 2), {"weight": torch.ones(2)}), ((x, 2), {"weight": torch.ones(3).double()})]:
        with pytest.raises(Exception) as e:
            torch.histogram(*args, **kw)
        with pytest.raises(type(e.value)):
            kiln.histogram(*_conv(args), **{k: _conv(v) for k, v in kw.items()})
