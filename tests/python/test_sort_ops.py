"""Sorting, selection and searching ops against torch on the same data.

Values and indices are compared exactly (ties included: kiln follows torch's CPU algorithms), except
quantile's linear/midpoint interpolation, which is compared to a few ulps. Error cases check that kiln
raises exactly the exception type torch raises.
"""
import math

import pytest
import torch

import kiln

nan = float("nan")
inf = float("inf")

ALL_REAL = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16,
            torch.uint32, torch.uint64, torch.float16, torch.bfloat16, torch.float32, torch.float64]
# torch's AT_ALL_TYPES + Half + BFloat16: what topk/kthvalue/median/searchsorted support on CPU
SELECT = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
SHAPES = [(), (0,), (1,), (9,), (4, 7), (3, 5, 6), (0, 3), (3, 0)]
LAYOUTS = ["contiguous", "transposed", "strided"]
UNSIGNED = {torch.uint8, torch.uint16, torch.uint32, torch.uint64}


def ids(v):
    return str(v).replace("torch.", "")


# ---- conversion and comparison ----------------------------------------------------------------------

def K(t):
    """A kiln copy of a torch tensor (same values, contiguous)."""
    return kiln.from_dlpack(t.detach().contiguous().clone())


def T(k):
    return torch.from_dlpack(k).clone()


def check(k, t, exact=True, rtol=None, atol=None):
    if isinstance(t, torch.Tensor):
        assert isinstance(k, kiln.Tensor), type(k)
        kt = T(k)
        assert kt.dtype == t.dtype, (kt.dtype, t.dtype)
        assert kt.shape == t.shape, (kt.shape, t.shape)
        if exact:
            torch.testing.assert_close(kt, t, rtol=0, atol=0, equal_nan=True)
        else:
            torch.testing.assert_close(kt, t, rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert isinstance(k, tuple), type(k)
        assert len(k) == len(t)
        for a, b in zip(k, t):
            check(a, b, exact, rtol, atol)


def check_vi(k, t):
    """A (values, indices) named result."""
    assert k.values is k[0] and k.indices is k[1]
    check(k.values, t.values)
    check(k.indices, t.indices)


def same_error(fk, ft):
    """kiln raises exactly the exception type torch raises."""
    with pytest.raises(Exception) as et:
        ft()
    with pytest.raises(Exception) as ek:
        fk()
    assert type(ek.value) is type(et.value), (type(ek.value), type(et.value), str(ek.value), str(et.value))


# ---- data -------------------------------------------------------------------------------------------

def make(shape, dtype, seed=0, nan_frac=0.0, lo=-3, hi=4, special=False):
    """Small value range, so there are many ties; optional NaN / inf / -0.0 for floats."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        t = torch.randint(lo, hi, shape, generator=g).to(torch.float64) / 2
        if t.numel():
            if nan_frac:
                t[torch.rand(shape, generator=g) < nan_frac] = nan
            if special:
                flat = t.view(-1)
                for i, v in enumerate([inf, -inf, -0.0, 0.0]):
                    if i < flat.numel():
                        flat[(i * 7) % flat.numel()] = v
        return t.to(dtype)
    t = torch.randint(0 if dtype in UNSIGNED else lo, hi, shape, generator=g)
    return t.to(dtype)


def layout_pair(shape, dtype, layout, **kw):
    """The same logical tensor in torch and kiln, with the requested memory layout in both."""
    if layout == "contiguous" or len(shape) < 2:
        if layout == "strided" and len(shape) == 1:
            base = make((shape[0] * 2,), dtype, **kw)
            return base[::2], K(base)[::2]
        t = make(shape, dtype, **kw)
        return t, K(t)
    if layout == "transposed":
        perm = list(range(len(shape)))[::-1]
        base = make(tuple(shape[p] for p in perm), dtype, **kw)
        return base.permute(perm), K(base).permute(perm)
    base = make(shape[:-1] + (shape[-1] * 2,), dtype, **kw)
    return base[..., ::2], K(base)[..., ::2]


def dims_of(shape):
    n = len(shape)
    return [0, -1] if n == 0 else list(range(-n, n))


def nan_kw(dtype):
    return {"nan_frac": 0.2, "special": True} if dtype.is_floating_point else {}


# ==== sort / argsort / msort =========================================================================

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES, ids=ids)
@pytest.mark.parametrize("dtype", ALL_REAL, ids=ids)
def test_sort(dtype, shape, layout):
    t, k = layout_pair(shape, dtype, layout, **nan_kw(dtype))
    for dim in dims_of(shape):
        for desc in (False, True):
            check_vi(kiln.sort(k, dim, desc), torch.sort(t, dim, desc))
            check_vi(k.sort(dim=dim, descending=desc, stable=True), t.sort(dim=dim, descending=desc, stable=True))
            check(kiln.argsort(k, dim, desc), torch.argsort(t, dim, desc))
            check(k.argsort(dim=dim, descending=desc, stable=True), t.argsort(dim=dim, descending=desc, stable=True))


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.float16, torch.bool], ids=ids)
def test_sort_stable_with_many_ties(dtype):
    g = torch.Generator().manual_seed(3)
    t = torch.randint(0, 3, (3000,), generator=g).to(dtype)
    if dtype.is_floating_point:
        t[::17] = nan
        t[::23] = -0.0
    k = K(t)
    for desc in (False, True):
        check_vi(kiln.sort(k, descending=desc, stable=True), torch.sort(t, descending=desc, stable=True))
        check(kiln.argsort(k, descending=desc, stable=True), torch.argsort(t, descending=desc, stable=True))
        # stable=False: torch's introsort order, reproduced exactly
        check_vi(kiln.sort(k, descending=desc), torch.sort(t, descending=desc))
    ks = T(kiln.sort(k, stable=True).indices)
    tv = t[ks]
    assert all((tv[i] != tv[i + 1]) or (ks[i] < ks[i + 1]) for i in range(0, len(ks) - 1, 7))


def test_sort_nan_is_largest():
    t = torch.tensor([3.0, nan, 1.0, inf, -inf, nan, -0.0, 0.0])
    for desc in (False, True):
        check_vi(kiln.sort(K(t), descending=desc), torch.sort(t, descending=desc))


@pytest.mark.parametrize("shape,dim", [((3000, 40), -1), ((40, 3000), 0), ((64, 50, 33), 1)], ids=ids)
def test_sort_many_rows(shape, dim):
    t = make(shape, torch.float32, seed=5, lo=-50, hi=50, nan_frac=0.01)
    k = K(t)
    for desc in (False, True):
        check_vi(kiln.sort(k, dim, desc), torch.sort(t, dim, desc))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
                                   torch.float32], ids=ids)
@pytest.mark.parametrize("n", [32767, 32768, 50000])
def test_sort_long_1d(dtype, n):
    # torch radix-sorts (stably) 1-D integer tensors from 32768 elements on, ascending only
    t = make((n,), dtype, seed=n, lo=-3, hi=3)
    k = K(t)
    for desc in (False, True):
        check_vi(kiln.sort(k, descending=desc), torch.sort(t, descending=desc))
    check(kiln.argsort(k[::2]), torch.argsort(t[::2]))


def test_sort_expanded_input():
    t = torch.tensor([[2.0], [1.0]]).expand(2, 5)
    k = K(torch.tensor([[2.0], [1.0]])).expand(2, 5)
    for dim in (0, 1):
        check_vi(kiln.sort(k, dim), torch.sort(t, dim))


@pytest.mark.parametrize("dtype", [torch.int32, torch.float64, torch.bool], ids=ids)
def test_msort(dtype):
    t = make((6, 4), dtype, **nan_kw(dtype))
    k = K(t)
    check(kiln._C.msort(k), torch.msort(t))
    check(k.msort(), t.msort())
    check(kiln._C.msort(K(torch.tensor(2.0))), torch.msort(torch.tensor(2.0)))


def test_msort_module_function():
    t = torch.tensor([[3, 1], [2, 4]])
    check(kiln.msort(K(t)), torch.msort(t))


def test_sort_errors():
    c = torch.tensor([1 + 1j, 2j])
    x = torch.tensor([[1.0, 2.0]])
    same_error(lambda: kiln.sort(K(c)), lambda: torch.sort(c))
    same_error(lambda: kiln.argsort(K(c)), lambda: torch.argsort(c))
    same_error(lambda: kiln.sort(K(x), 2), lambda: torch.sort(x, 2))
    same_error(lambda: kiln.sort(K(x), -3), lambda: torch.sort(x, -3))
    same_error(lambda: kiln.sort(K(torch.tensor(1.0)), 1), lambda: torch.sort(torch.tensor(1.0), 1))
    f8t = torch.tensor([1.0, 0.0]).to(torch.float8_e4m3fn)
    f8k = kiln.tensor([1.0, 0.0]).to(kiln.float8_e4m3fn)
    same_error(lambda: kiln.sort(f8k), lambda: torch.sort(f8t))


# ==== topk ===========================================================================================

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES, ids=ids)
@pytest.mark.parametrize("dtype", SELECT, ids=ids)
def test_topk(dtype, shape, layout):
    t, k = layout_pair(shape, dtype, layout, **nan_kw(dtype))
    for dim in dims_of(shape):
        n = t.shape[dim] if t.dim() else 1
        for kk in sorted({0, min(1, n), n // 2, n}):
            for largest in (True, False):
                for srt in (True, False):
                    check_vi(kiln.topk(k, kk, dim, largest, srt), torch.topk(t, kk, dim, largest, srt))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16], ids=ids)
@pytest.mark.parametrize("n,kk", [(1000, 5), (1000, 15), (1000, 16), (1000, 400), (300, 300), (64, 1)])
def test_topk_long_rows_ties(dtype, n, kk):
    # k * 64 <= n takes torch's partial_sort path, otherwise nth_element (+ sort of the first k - 1)
    t = make((7, n), dtype, seed=n + kk, lo=-20, hi=20, **({"nan_frac": 0.02} if dtype.is_floating_point else {}))
    k = K(t)
    for largest in (True, False):
        for srt in (True, False):
            check_vi(kiln.topk(k, kk, 1, largest, srt), torch.topk(t, kk, 1, largest, srt))
            k0 = min(kk, 7)
            check_vi(k.topk(k0, dim=0, largest=largest, sorted=srt), t.topk(k0, dim=0, largest=largest, sorted=srt))


def test_topk_many_rows():
    t = make((2000, 60), torch.float32, seed=11, lo=-9, hi=9, nan_frac=0.01)
    k = K(t)
    check_vi(kiln.topk(k, 7), torch.topk(t, 7))
    check_vi(kiln.topk(k, 30, 0, False), torch.topk(t, 30, 0, False))


def test_topk_errors():
    x = torch.tensor([3.0, 1.0, 2.0])
    same_error(lambda: kiln.topk(K(x), 4), lambda: torch.topk(x, 4))
    same_error(lambda: kiln.topk(K(x), -1), lambda: torch.topk(x, -1))
    same_error(lambda: kiln.topk(K(x), 1, 1), lambda: torch.topk(x, 1, 1))
    same_error(lambda: kiln.topk(K(torch.tensor(5.0)), 2), lambda: torch.topk(torch.tensor(5.0), 2))
    same_error(lambda: kiln.topk(K(torch.zeros(3, 0)), 1, 1), lambda: torch.topk(torch.zeros(3, 0), 1, 1))
    b = torch.tensor([True, False])
    same_error(lambda: kiln.topk(K(b), 1), lambda: torch.topk(b, 1))
    c = torch.tensor([1j, 2j])
    same_error(lambda: kiln.topk(K(c), 1), lambda: torch.topk(c, 1))
    u = torch.tensor([1, 2], dtype=torch.uint16)
    same_error(lambda: kiln.topk(K(u), 1), lambda: torch.topk(u, 1))
    same_error(lambda: kiln.topk(K(x), 1.5), lambda: torch.topk(x, 1.5))


# ==== kthvalue =======================================================================================

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [s for s in SHAPES if s != (0,)], ids=ids)
@pytest.mark.parametrize("dtype", SELECT, ids=ids)
def test_kthvalue(dtype, shape, layout):
    t, k = layout_pair(shape, dtype, layout, **nan_kw(dtype))
    for dim in dims_of(shape):
        n = t.shape[dim] if t.dim() else 1
        if n == 0:
            continue
        for kk in sorted({1, (n + 1) // 2, n}):
            for keepdim in (False, True):
                check_vi(kiln.kthvalue(k, kk, dim, keepdim), torch.kthvalue(t, kk, dim, keepdim))
    if t.dim() and t.shape[-1]:
        check_vi(k.kthvalue(1), t.kthvalue(1))


@pytest.mark.parametrize("dtype", [torch.float64, torch.int16], ids=ids)
def test_kthvalue_long_rows(dtype):
    t = make((20, 513), dtype, seed=2, lo=-30, hi=30, **({"nan_frac": 0.03} if dtype.is_floating_point else {}))
    k = K(t)
    for kk in (1, 2, 100, 257, 512, 513):
        check_vi(kiln.kthvalue(k, kk), torch.kthvalue(t, kk))
    check_vi(kiln.kthvalue(k, 7, 0, True), torch.kthvalue(t, 7, 0, True))


def test_kthvalue_errors():
    x = torch.tensor([[3.0, 1.0, 2.0]])
    same_error(lambda: kiln.kthvalue(K(x), 0), lambda: torch.kthvalue(x, 0))
    same_error(lambda: kiln.kthvalue(K(x), 4), lambda: torch.kthvalue(x, 4))
    same_error(lambda: kiln.kthvalue(K(x), 2, 0), lambda: torch.kthvalue(x, 2, 0))
    same_error(lambda: kiln.kthvalue(K(x), 1, 2), lambda: torch.kthvalue(x, 1, 2))
    e = torch.zeros(0, 3)
    same_error(lambda: kiln.kthvalue(K(e), 1, 0), lambda: torch.kthvalue(e, 1, 0))
    check_vi(kiln.kthvalue(K(e), 1, 1), torch.kthvalue(e, 1, 1))
    same_error(lambda: kiln.kthvalue(K(torch.tensor(1.0)), 2), lambda: torch.kthvalue(torch.tensor(1.0), 2))
    for bad in (torch.tensor([True]), torch.tensor([1], dtype=torch.uint32), torch.tensor([1j])):
        same_error(lambda: kiln.kthvalue(K(bad), 1), lambda: torch.kthvalue(bad, 1))


# ==== median / nanmedian =============================================================================

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES, ids=ids)
@pytest.mark.parametrize("dtype", SELECT, ids=ids)
@pytest.mark.parametrize("fn", ["median", "nanmedian"])
def test_median(fn, dtype, shape, layout):
    for nan_frac in ((0.0, 0.2, 0.7) if dtype.is_floating_point else (0.0,)):
        t, k = layout_pair(shape, dtype, layout, nan_frac=nan_frac) if dtype.is_floating_point \
            else layout_pair(shape, dtype, layout)
        kf, tf = getattr(kiln, fn), getattr(torch, fn)
        check(kf(k), tf(t))
        check(getattr(k, fn)(), getattr(t, fn)())
        for dim in dims_of(shape):
            if t.dim() and t.shape[dim] == 0:
                same_error(lambda: kf(k, dim), lambda: tf(t, dim))
                continue
            for keepdim in (False, True):
                check_vi(kf(k, dim, keepdim), tf(t, dim, keepdim))
                check_vi(getattr(k, fn)(dim=dim, keepdim=keepdim), getattr(t, fn)(dim=dim, keepdim=keepdim))


@pytest.mark.parametrize("fn", ["median", "nanmedian"])
def test_median_ties_and_all_nan(fn):
    kf, tf = getattr(kiln, fn), getattr(torch, fn)
    for t in [torch.full((40,), nan), torch.full((5, 33), 2.0), torch.tensor([2, 2, 2, 2, 2]),
              torch.tensor([[nan, nan], [1.0, nan]]), torch.tensor([3, 1, 2, 4]),
              make((50, 101), torch.float32, seed=9, nan_frac=0.5), make((300, 40), torch.int64, seed=4)]:
        check(kf(K(t)), tf(t))
        for dim in range(t.dim()):
            check_vi(kf(K(t), dim), tf(t, dim))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8, torch.float16,
                                   torch.float32], ids=ids)
def test_median_empty(dtype):
    t = torch.tensor([], dtype=dtype)
    check(kiln.median(K(t)), torch.median(t))
    check(kiln.nanmedian(K(t)), torch.nanmedian(t))


def test_median_errors():
    for bad in (torch.tensor([True, False]), torch.tensor([1, 2], dtype=torch.uint16), torch.tensor([1j])):
        same_error(lambda: kiln.median(K(bad)), lambda: torch.median(bad))
        same_error(lambda: kiln.median(K(bad), 0), lambda: torch.median(bad, 0))
        same_error(lambda: kiln.nanmedian(K(bad)), lambda: torch.nanmedian(bad))
    x = torch.zeros(2, 3)
    same_error(lambda: kiln.median(K(x), 2), lambda: torch.median(x, 2))
    same_error(lambda: kiln.median(K(x), keepdim=True), lambda: torch.median(x, keepdim=True))


# ==== mode ===========================================================================================

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES, ids=ids)
@pytest.mark.parametrize("dtype", SELECT + [torch.bool], ids=ids)
def test_mode(dtype, shape, layout):
    t, k = layout_pair(shape, dtype, layout, **nan_kw(dtype))
    for dim in dims_of(shape):
        if t.dim() and t.shape[dim] == 0:
            same_error(lambda: kiln.mode(k, dim), lambda: torch.mode(t, dim))
            continue
        for keepdim in (False, True):
            check_vi(kiln.mode(k, dim, keepdim), torch.mode(t, dim, keepdim))
    if t.numel():
        check_vi(k.mode(), t.mode())


def test_mode_ties_long_rows():
    for t in [torch.tensor([3, 1, 2, 3, 1, 5]), torch.tensor([[3, 1, 2, 3, 1, 5], [1, 1, 1, 2, 2, 2]]),
              torch.tensor([nan, nan, 1.0, 1.0]), torch.tensor([0.0, -0.0, -0.0]),
              make((30, 200), torch.int32, seed=1, lo=-5, hi=5), make((200, 30), torch.float16, seed=2, nan_frac=0.1)]:
        for dim in range(t.dim()):
            check_vi(kiln.mode(K(t), dim), torch.mode(t, dim))


def test_mode_errors():
    for bad in (torch.tensor([1, 2], dtype=torch.uint64), torch.tensor([1j])):
        same_error(lambda: kiln.mode(K(bad)), lambda: torch.mode(bad))
    same_error(lambda: kiln.mode(K(torch.zeros(2)), 1), lambda: torch.mode(torch.zeros(2), 1))


# ==== quantile / nanquantile =========================================================================

INTERPS = ["linear", "lower", "higher", "midpoint", "nearest"]


def check_q(k, t, interp):
    if interp in ("linear", "midpoint"):
        tol = 1e-6 if t.dtype == torch.float32 else 1e-12
        check(k, t, exact=False, rtol=tol, atol=tol)
    else:
        check(k, t)


@pytest.mark.parametrize("interp", INTERPS)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("shape", [(), (1,), (9,), (4, 7), (3, 5, 6)], ids=ids)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=ids)
@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
def test_quantile(fn, dtype, shape, layout, interp):
    t, k = layout_pair(shape, dtype, layout, lo=-40, hi=40, nan_frac=0.15)
    kf, tf = getattr(kiln, fn), getattr(torch, fn)
    qs = [0.0, 0.3, 0.5, 1.0, torch.tensor(0.25, dtype=dtype), torch.tensor([0.0, 0.125, 0.375, 0.5, 0.9, 1.0],
                                                                            dtype=dtype)]
    for q in qs:
        qk = K(q) if isinstance(q, torch.Tensor) else q
        for dim in [None] + dims_of(shape):
            for keepdim in (False, True):
                check_q(kf(k, qk, dim, keepdim, interpolation=interp), tf(t, q, dim, keepdim, interpolation=interp),
                        interp)
    check_q(getattr(k, fn)(0.4, interpolation=interp), getattr(t, fn)(0.4, interpolation=interp), interp)


def test_quantile_special_values():
    for t in [torch.tensor([inf, inf]), torch.tensor([1.0, inf]), torch.tensor([-inf, 1.0, 2.0]),
              torch.tensor([nan, nan]), torch.tensor([1.0, 2.0, 4.0]), torch.tensor([1.0, 2.0, 4.0, 5.0, 6.0]),
              make((40, 33), torch.float64, seed=3, nan_frac=0.3)]:
        q = torch.tensor([0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 1.0], dtype=t.dtype)
        for interp in INTERPS:
            for fn in ("quantile", "nanquantile"):
                check_q(getattr(kiln, fn)(K(t), K(q), -1, interpolation=interp),
                        getattr(torch, fn)(t, q, -1, interpolation=interp), interp)


def test_quantile_errors():
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    k = K(x)
    same_error(lambda: kiln.quantile(k, 1.5), lambda: torch.quantile(x, 1.5))
    same_error(lambda: kiln.quantile(k, -0.1), lambda: torch.quantile(x, -0.1))
    same_error(lambda: kiln.quantile(k, nan), lambda: torch.quantile(x, nan))
    same_error(lambda: kiln.nanquantile(k, 2.0), lambda: torch.nanquantile(x, 2.0))
    q = torch.tensor([0.5, 1.5])
    same_error(lambda: kiln.quantile(k, K(q)), lambda: torch.quantile(x, q))
    q = torch.tensor([[0.5]])
    same_error(lambda: kiln.quantile(k, K(q)), lambda: torch.quantile(x, q))
    q = torch.tensor([0.5], dtype=torch.float64)
    same_error(lambda: kiln.quantile(k, K(q)), lambda: torch.quantile(x, q))
    for bad in (torch.tensor([1, 2]), torch.tensor([1.0, 2.0], dtype=torch.float16)):
        same_error(lambda: kiln.quantile(K(bad), 0.5), lambda: torch.quantile(bad, 0.5))
    e = torch.zeros(0, 3)
    same_error(lambda: kiln.quantile(K(e), 0.5), lambda: torch.quantile(e, 0.5))
    same_error(lambda: kiln.quantile(K(e), 0.5, dim=1), lambda: torch.quantile(e, 0.5, dim=1))
    same_error(lambda: kiln.quantile(k, 0.5, interpolation="foo"), lambda: torch.quantile(x, 0.5, interpolation="foo"))
    same_error(lambda: kiln.quantile(k, 0.5, dim=2), lambda: torch.quantile(x, 0.5, dim=2))
    same_error(lambda: kiln.quantile(k, [0.5]), lambda: torch.quantile(x, [0.5]))


# ==== unique / unique_consecutive ====================================================================

def unique_kw():
    for inv in (False, True):
        for cnt in (False, True):
            yield {"return_inverse": inv, "return_counts": cnt}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES + [(40, 3)], ids=ids)
@pytest.mark.parametrize("dtype", ALL_REAL, ids=ids)
def test_unique(dtype, shape, layout):
    t, k = layout_pair(shape, dtype, layout, **nan_kw(dtype))
    for kw in unique_kw():
        for srt in (True, False):
            check(kiln.unique(k, sorted=srt, **kw), torch.unique(t, sorted=srt, **kw))
        check(k.unique(**kw), t.unique(**kw))
        check(kiln.unique_consecutive(k, **kw), torch.unique_consecutive(t, **kw))
        check(k.unique_consecutive(**kw), t.unique_consecutive(**kw))


@pytest.mark.parametrize("dtype", ALL_REAL, ids=ids)
@pytest.mark.parametrize("shape", [(1,), (9,), (6, 2), (2, 6), (5, 2, 3), (7, 1)], ids=ids)
def test_unique_dim(dtype, shape):
    # few distinct values, so rows/columns repeat
    t = make(shape, dtype, lo=0, hi=2)
    k = K(t)
    for dim in dims_of(shape):
        for kw in unique_kw():
            check(kiln.unique(k, dim=dim, **kw), torch.unique(t, dim=dim, **kw))
            check(kiln.unique_consecutive(k, dim=dim, **kw), torch.unique_consecutive(t, dim=dim, **kw))
        check(k.unique(dim=dim, return_inverse=True), t.unique(dim=dim, return_inverse=True))


def test_unique_special_values():
    full = {"return_inverse": True, "return_counts": True}
    for t in [torch.tensor([3.0, nan, 1.0, 3.0, nan, 2.0, 1.0]), torch.tensor([0.0, -0.0, -0.0, 0.0]),
              torch.tensor([-0.0, 0.0]), torch.tensor([nan, 1, nan], dtype=torch.half),
              torch.tensor([1, 1, 2, 2, 3, 1, 1, 2]), torch.tensor([1, nan, nan, 2]), torch.tensor(5)]:
        check(kiln.unique(K(t), **full), torch.unique(t, **full))
        check(kiln.unique_consecutive(K(t), **full), torch.unique_consecutive(t, **full))
    t = torch.tensor([[nan, 1.0], [nan, 1.0], [0.0, 1.0]])
    check(kiln.unique(K(t), dim=0, **full), torch.unique(t, dim=0, **full))
    check(kiln.unique_consecutive(K(t), dim=0, **full), torch.unique_consecutive(t, dim=0, **full))
    t = torch.tensor([[1, 1], [1, 1], [2, 2], [1, 1]])
    check(kiln.unique_consecutive(K(t), dim=0, **full), torch.unique_consecutive(t, dim=0, **full))
    big = make((20000,), torch.int64, seed=8, lo=-500, hi=500)
    check(kiln.unique(K(big), **full), torch.unique(big, **full))
    rows = make((3000, 4), torch.float32, seed=8, lo=0, hi=3)
    check(kiln.unique(K(rows), dim=0, **full), torch.unique(rows, dim=0, **full))


def test_unique_empty_dims():
    full = {"return_inverse": True, "return_counts": True}
    e = torch.zeros(0, 3)
    for fn in ("unique", "unique_consecutive"):
        kf, tf = getattr(kiln, fn), getattr(torch, fn)
        check(kf(K(e), dim=0, **full), tf(e, dim=0, **full))
        same_error(lambda: kf(K(e), dim=1), lambda: tf(e, dim=1))
        same_error(lambda: kf(K(torch.zeros(3, 0)), dim=0), lambda: tf(torch.zeros(3, 0), dim=0))
        same_error(lambda: kf(K(torch.zeros(0, 0)), dim=0), lambda: tf(torch.zeros(0, 0), dim=0))
        same_error(lambda: kf(K(torch.tensor(3)), dim=0), lambda: tf(torch.tensor(3), dim=0))
        same_error(lambda: kf(K(torch.zeros(2, 3)), dim=2), lambda: tf(torch.zeros(2, 3), dim=2))
        c = torch.tensor([1j, 1j])
        same_error(lambda: kf(K(c)), lambda: tf(c))
        same_error(lambda: kf(K(c), dim=0), lambda: tf(c, dim=0))


# ==== searchsorted / bucketize =======================================================================

@pytest.mark.parametrize("dtype", SELECT, ids=ids)
@pytest.mark.parametrize("vshape", [(), (0,), (5,), (3, 4), (2, 3, 2)], ids=ids)
def test_searchsorted_1d(dtype, vshape):
    bd = torch.sort(make((11,), dtype, seed=1, lo=-4, hi=5, **({"nan_frac": 0.1} if dtype.is_floating_point else {})))[0]
    v = make(vshape, dtype, seed=2, lo=-6, hi=7, **nan_kw(dtype))
    for right in (False, True):
        for out_int32 in (False, True):
            check(kiln.searchsorted(K(bd), K(v), right=right, out_int32=out_int32),
                  torch.searchsorted(bd, v, right=right, out_int32=out_int32))
            check(kiln.bucketize(K(v), K(bd), right=right, out_int32=out_int32),
                  torch.bucketize(v, bd, right=right, out_int32=out_int32))
        side = "right" if right else "left"
        check(kiln.searchsorted(K(bd), K(v), side=side), torch.searchsorted(bd, v, side=side))
    if v.dim() >= 2:  # a transposed values tensor
        check(kiln.searchsorted(K(bd), K(v).transpose(0, 1)), torch.searchsorted(bd, v.transpose(0, 1)))


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.bfloat16], ids=ids)
def test_searchsorted_nd(dtype):
    bd = torch.sort(make((2, 3, 9), dtype, seed=4, lo=-5, hi=5), dim=-1)[0]
    v = make((2, 3, 4), dtype, seed=5, lo=-7, hi=7)
    for right in (False, True):
        check(kiln.searchsorted(K(bd), K(v), right=right), torch.searchsorted(bd, v, right=right))
    bdt = bd.transpose(0, 1).contiguous().transpose(0, 1)
    kbd = K(bd.transpose(0, 1)).transpose(0, 1)
    check(kiln.searchsorted(kbd, K(v)), torch.searchsorted(bdt, v))
    empty_rows = torch.zeros(2, 0, dtype=dtype)
    check(kiln.searchsorted(K(empty_rows), K(v[0, :2])), torch.searchsorted(empty_rows, v[0, :2]))


def test_searchsorted_sorter_scalars_promotion():
    seq = torch.tensor([3.0, 1.0, 2.0, 2.0, 5.0])
    srt = torch.argsort(seq)
    v = torch.tensor([2.5, 0.0, 2.0, 9.0, nan])
    for right in (False, True):
        check(kiln.searchsorted(K(seq), K(v), right=right, sorter=K(srt)),
              torch.searchsorted(seq, v, right=right, sorter=srt))
    seq2 = torch.tensor([[3, 1, 2], [9, 7, 8]])
    srt2 = torch.argsort(seq2, dim=1)
    v2 = torch.tensor([[2, 3], [7, 10]])
    check(kiln.searchsorted(K(seq2), K(v2), sorter=K(srt2)), torch.searchsorted(seq2, v2, sorter=srt2))
    b = torch.tensor([1.0, 2.0, 2.0, 3.0])
    for s in (2.0, 2, 0, 10.5, True):
        check(kiln.searchsorted(K(b), s), torch.searchsorted(b, s))
        check(kiln.searchsorted(K(b), s, right=True), torch.searchsorted(b, s, right=True))
        check(kiln.bucketize(s, K(b)), torch.bucketize(s, b))
    ib = torch.tensor([1, 2, 3])
    for vals in (torch.tensor([1.5, 2.0]), torch.tensor([True, False]), torch.tensor(2.5, dtype=torch.float64)):
        check(kiln.searchsorted(K(ib), K(vals)), torch.searchsorted(ib, vals))
        check(kiln.bucketize(K(vals), K(ib), right=True), torch.bucketize(vals, ib, right=True))
    check(kiln.searchsorted(K(ib), 2.5), torch.searchsorted(ib, 2.5))
    check(kiln.bucketize(2.5, K(ib)), torch.bucketize(2.5, ib))
    check(kiln.searchsorted(K(b), K(torch.tensor([1, 2]))), torch.searchsorted(b, torch.tensor([1, 2])))
    f64 = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    check(kiln.searchsorted(K(f64), K(torch.tensor([1.5, 2.0]))), torch.searchsorted(f64, torch.tensor([1.5, 2.0])))


def test_searchsorted_large_parallel():
    bd = torch.sort(make((1000,), torch.float32, seed=1, lo=-100, hi=100))[0]
    v = make((300, 200), torch.float32, seed=3, lo=-120, hi=120)
    check(kiln.searchsorted(K(bd), K(v)), torch.searchsorted(bd, v))
    check(kiln.bucketize(K(v), K(bd), right=True), torch.bucketize(v, bd, right=True))


def test_searchsorted_errors():
    b = torch.tensor([1.0, 2.0, 3.0])
    v = torch.tensor([1.5])
    kb, kv = K(b), K(v)
    same_error(lambda: kiln.searchsorted(kb, kv, side="rght"), lambda: torch.searchsorted(b, v, side="rght"))
    same_error(lambda: kiln.searchsorted(kb, kv, right=True, side="left"),
               lambda: torch.searchsorted(b, v, right=True, side="left"))
    check(kiln.searchsorted(kb, kv, right=False, side="right"), torch.searchsorted(b, v, right=False, side="right"))
    b0 = torch.tensor(1.0)
    same_error(lambda: kiln.searchsorted(K(b0), kv), lambda: torch.searchsorted(b0, v))
    b2 = torch.tensor([[1, 3, 5], [2, 4, 6]])
    for vv in (torch.tensor([[3, 6], [1, 4], [1, 1]]), torch.tensor([3, 6])):
        same_error(lambda: kiln.searchsorted(K(b2), K(vv)), lambda: torch.searchsorted(b2, vv))
    same_error(lambda: kiln.searchsorted(K(b2), 3), lambda: torch.searchsorted(b2, 3))
    s_bad = torch.tensor([1, 2, 5])
    same_error(lambda: kiln.searchsorted(kb, kv, sorter=K(s_bad)), lambda: torch.searchsorted(b, v, sorter=s_bad))
    s_short = torch.tensor([1, 2])
    same_error(lambda: kiln.searchsorted(kb, kv, sorter=K(s_short)), lambda: torch.searchsorted(b, v, sorter=s_short))
    s_i32 = torch.tensor([0, 1, 2], dtype=torch.int32)
    same_error(lambda: kiln.searchsorted(kb, kv, sorter=K(s_i32)), lambda: torch.searchsorted(b, v, sorter=s_i32))
    for bad in (torch.tensor([1j]), torch.tensor([True]), torch.tensor([1], dtype=torch.uint16)):
        same_error(lambda: kiln.searchsorted(K(bad), K(bad)), lambda: torch.searchsorted(bad, bad))
    for bd in (torch.zeros(2, 2), torch.tensor(1.0)):
        same_error(lambda: kiln.bucketize(kv, K(bd)), lambda: torch.bucketize(v, bd))
    same_error(lambda: kiln.searchsorted(kb, "x"), lambda: torch.searchsorted(b, "x"))


# ==== histc ==========================================================================================

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(), (0,), (1,), (50,), (8, 9), (3, 4, 5)], ids=ids)
@pytest.mark.parametrize("dtype", FLOATS, ids=ids)
def test_histc(dtype, shape, layout):
    t, k = layout_pair(shape, dtype, layout, lo=-20, hi=21)
    for bins in (1, 3, 7, 100):
        check(kiln.histc(k, bins), torch.histc(t, bins))
        check(kiln.histc(k, bins, -4, 3.5), torch.histc(t, bins, -4, 3.5))
        check(kiln.histc(k, bins=bins, min=2, max=2), torch.histc(t, bins=bins, min=2, max=2))
    check(k.histc(5, 0, 1), t.histc(5, 0, 1))


# torch accumulates float16 / bfloat16 histograms in that dtype: counts stop growing at these values.
SATURATES = {torch.float16: 2048, torch.bfloat16: 256}


def test_histc_exact_counts_in_reduced_floats():
    t = torch.rand(100000, generator=torch.Generator().manual_seed(0))
    for dtype in (torch.float16, torch.bfloat16):
        h = T(kiln.histc(K(t.to(dtype)), 4, 0, 1))
        assert h.dtype == dtype
        assert abs(h.double().sum().item() - 100000) < 400  # exact counts, rounded to the dtype


def test_histc_values():
    for t in [torch.tensor([1.0, 2.0, 1.0, 4.0, 2.5, 5.0]), torch.tensor([0.1, 0.3, 0.7, 1.0, 0.5]),
              torch.tensor([2.0, 2.0]), torch.arange(12.0).reshape(3, 4).t(),
              torch.linspace(-1, 1, 1001), torch.rand(100000, generator=torch.Generator().manual_seed(0))]:
        for dtype in FLOATS:
            td = t.to(dtype)
            kd = K(td)
            for bins in (3, 10, 64):
                for rng in ((0, 0), (0.25, 0.75)):
                    ref = torch.histc(td, bins, *rng)
                    if ref.max() >= SATURATES.get(dtype, math.inf):
                        continue  # torch counts in the reduced dtype itself; kiln counts exactly
                    check(kiln.histc(kd, bins, *rng), ref)
    t = torch.tensor([1.0, nan, inf, -inf, 2.0, 3.0])
    check(kiln.histc(K(t), 4, 0, 3), torch.histc(t, 4, 0, 3))


def test_histc_errors():
    x = torch.tensor([1.0, 2.0])
    same_error(lambda: kiln.histc(K(x), 0), lambda: torch.histc(x, 0))
    same_error(lambda: kiln.histc(K(x), -1), lambda: torch.histc(x, -1))
    same_error(lambda: kiln.histc(K(x), 4, 3, 0), lambda: torch.histc(x, 4, 3, 0))
    same_error(lambda: kiln.histc(K(x), 4, nan, 3), lambda: torch.histc(x, 4, nan, 3))
    same_error(lambda: kiln.histc(K(x), 4, 0, inf), lambda: torch.histc(x, 4, 0, inf))
    xn = torch.tensor([1.0, nan])
    same_error(lambda: kiln.histc(K(xn), 4), lambda: torch.histc(xn, 4))
    xi = torch.tensor([1.0, inf])
    same_error(lambda: kiln.histc(K(xi), 4), lambda: torch.histc(xi, 4))
    for bad in (torch.tensor([1, 2]), torch.tensor([1, 2], dtype=torch.uint8), torch.tensor([True])):
        same_error(lambda: kiln.histc(K(bad), 4), lambda: torch.histc(bad, 4))
        same_error(lambda: kiln.histc(K(bad), 4, 0, 3), lambda: torch.histc(bad, 4, 0, 3))


# ==== bincount =======================================================================================

@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64], ids=ids)
def test_bincount(dtype):
    t = make((40,), dtype, seed=6, lo=0, hi=9)
    k = K(t)
    for minlength in (0, 5, 20):
        check(kiln.bincount(k, minlength=minlength), torch.bincount(t, minlength=minlength))
        check(k.bincount(minlength=minlength), t.bincount(minlength=minlength))
    for wdt in (torch.float32, torch.float64, torch.int64, torch.float16, torch.bool):
        w = make((40,), wdt, seed=7, lo=-5, hi=5)
        check(kiln.bincount(k, K(w)), torch.bincount(t, w))
        check(kiln.bincount(k, weights=K(w), minlength=12), torch.bincount(t, weights=w, minlength=12))
    strided = make((80,), dtype, seed=1, lo=0, hi=6)
    check(kiln.bincount(K(strided)[::2]), torch.bincount(strided[::2]))


def test_bincount_edge_cases():
    e = torch.tensor([], dtype=torch.int64)
    check(kiln.bincount(K(e)), torch.bincount(e))
    check(kiln.bincount(K(e), minlength=3), torch.bincount(e, minlength=3))
    check(kiln.bincount(K(e), K(torch.tensor([])), minlength=3), torch.bincount(e, torch.tensor([]), minlength=3))
    big = make((100000,), torch.int64, seed=2, lo=0, hi=1000)
    w = torch.rand(100000, generator=torch.Generator().manual_seed(1))
    check(kiln.bincount(K(big)), torch.bincount(big))
    check(kiln.bincount(K(big), K(w)), torch.bincount(big, w))


def test_bincount_errors():
    x = torch.tensor([1, 3, 3, 0])
    same_error(lambda: kiln.bincount(K(x), minlength=-1), lambda: torch.bincount(x, minlength=-1))
    for bad in (torch.tensor([1, -3]), torch.tensor([[1, 3]]), torch.tensor(3)):
        same_error(lambda: kiln.bincount(K(bad)), lambda: torch.bincount(bad))
    for bad in (torch.tensor([1.0, 3.0]), torch.tensor([True]), torch.tensor([1, 3], dtype=torch.uint16),
                torch.tensor([], dtype=torch.float32)):
        same_error(lambda: kiln.bincount(K(bad)), lambda: torch.bincount(bad))
    for w in (torch.tensor([1.0, 1.0]), torch.ones(1, 4)):
        same_error(lambda: kiln.bincount(K(x), K(w)), lambda: torch.bincount(x, w))


# ==== misc ===========================================================================================

def test_named_results_unpack():
    t = torch.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 5.0]])
    k = K(t)
    for fn, args in [("sort", ()), ("topk", (2,)), ("kthvalue", (2,)), ("median", (1,)), ("nanmedian", (1,)),
                     ("mode", (1,))]:
        r = getattr(kiln, fn)(k, *args)
        values, indices = r
        assert type(r).__name__ == fn
        assert r._fields == ("values", "indices")
        check(values, getattr(torch, fn)(t, *args).values)
        check(indices, getattr(torch, fn)(t, *args).indices)


def test_registered_ops():
    names = set(kiln._C.registered_ops())
    for n in ["sort", "topk", "kthvalue", "median", "nanmedian", "median_dim", "nanmedian_dim", "mode", "quantile",
              "nanquantile", "unique", "unique_consecutive", "searchsorted", "histc", "bincount"]:
        assert n in names, n


def test_thread_count_invariant():
    t = make((500, 300), torch.float32, seed=12, lo=-10, hi=10, nan_frac=0.05)
    k = K(t)
    nt = kiln.get_num_threads()
    try:
        results = []
        for n in (1, max(2, nt)):
            kiln.set_num_threads(n)
            results.append([T(kiln.sort(k, 0)[1]), T(kiln.topk(k, 9)[1]), T(kiln.kthvalue(k, 100)[1]),
                            T(kiln.median(k, 1)[1]), T(kiln.mode(k, 0)[1]), T(kiln.histc(k, 13, -5, 5)),
                            T(kiln.quantile(k, 0.3, dim=1))])
        for a, b in zip(*results):
            torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
    finally:
        kiln.set_num_threads(nt)


def test_inputs_unchanged():
    t = make((6, 7), torch.float32, nan_frac=0.2)
    k = K(t)
    for f in (lambda: kiln.sort(k, 0), lambda: kiln.topk(k, 3), lambda: kiln.kthvalue(k, 2), lambda: kiln.median(k),
              lambda: kiln.median(k, 0), lambda: kiln.mode(k), lambda: kiln.quantile(k, 0.5),
              lambda: kiln.unique(k, dim=1), lambda: kiln.histc(k, 4, 0, 1)):
        f()
        check(k, t)
