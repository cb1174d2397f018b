"""Tensor core vs torch: dtype conversions (bit-exact, float8 included), promotion, views and
strides, creation, printing, numpy / DLPack interop, memory stats."""
import itertools

import numpy as np
import pytest
import torch

import kiln
from helpers import ALL_DTYPES, assert_same, check, dname, kdt, make, tdt, to_kiln, to_torch


def test_promote_types_table():
    for a, b in itertools.product(ALL_DTYPES, ALL_DTYPES):
        try:
            want = dname(torch.promote_types(tdt(a), tdt(b)))
        except RuntimeError:
            with pytest.raises(RuntimeError):
                kiln.promote_types(kdt(a), kdt(b))
            continue
        assert dname(kiln.promote_types(kdt(a), kdt(b))) == want, (a, b)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("scalar", [1, 2.5, True, 1j, -3])
def test_result_type_with_scalars(dtype, scalar):
    if dtype == "float16" and isinstance(scalar, complex):
        pytest.skip("torch gives complex32, a dtype kiln does not have")
    t = make((2,), dtype)
    z = make((), "float64")
    for args in [(t, scalar), (t, z), (z, t)]:
        try:
            want = dname(torch.result_type(*args))
        except RuntimeError:
            continue
        kargs = [to_kiln(a) if isinstance(a, torch.Tensor) else a for a in args]
        assert dname(kiln.result_type(*kargs)) == want, (dtype, args)


SRC_VALUES = [0.0, -0.0, 1.0, -1.5, 0.1, 3.4e38, -3.4e38, 65504.0, 65520.0, 1e-8, 6e-8, 1e-40, 448.0, 464.0,
              480.0, 57344.0, 61440.0, 1e30, float("inf"), float("-inf"), float("nan"), 255.9, -128.5, 127.5,
              2.0 ** 24 + 1, 2.0 ** 31, -2.0 ** 31, 1.0 / 3.0]


@pytest.mark.parametrize("dst", ALL_DTYPES)
@pytest.mark.parametrize("src", ["float32", "float64", "float16", "bfloat16", "int64", "bool", "complex64", "uint8",
                                 "float8_e4m3fn", "float8_e5m2", "int8", "uint32"])
def test_conversion_bit_exact(src, dst):
    base = torch.tensor(SRC_VALUES, dtype=torch.float64)
    if src in ("float32", "float64", "float16", "bfloat16", "complex64", "float8_e4m3fn", "float8_e5m2"):
        x = base.to(tdt(src))
    else:  # integers: only in-range, finite values (out-of-range float->int is UB in torch too)
        x = torch.tensor([0, 1, -1, 7, 100, -100, 127, -128, 255], dtype=torch.int64)
        x = x.to(tdt(src)) if src != "uint32" else x.abs().to(tdt(src))
    if dst in ("uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64") and x.dtype.is_floating_point:
        x = x[torch.isfinite(x.float()) & (x.float().abs() < 127) & (x.float() >= (0 if dst.startswith("u") else -128))]
    if dst in ("uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64") and x.dtype.is_complex:
        x = x[torch.isfinite(x.real) & (x.real.abs() < 127) & (x.real >= 0)]
    if dst.startswith("u") and not x.dtype.is_floating_point and not x.dtype.is_complex and src not in ("bool",):
        x = x[x.to(torch.int64) >= 0] if src != "uint32" else x
    check(lambda m, t: t.to(kdt(dst) if m is kiln else tdt(dst)), x, exact=True, msg=f"{src}->{dst}")


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_float8_all_codes(dtype):
    codes = torch.arange(256, dtype=torch.int64).to(torch.uint8)
    t = codes.view(tdt(dtype)).float()
    k = kiln.from_numpy(codes.numpy()).view(kdt(dtype)).to(kiln.float32)
    torch.testing.assert_close(to_torch(k), t, rtol=0, atol=0, equal_nan=True)
    # every float32 rounding boundary: midpoints between consecutive codes and just beside them
    finite = t[torch.isfinite(t)].unique().double()
    mids = (finite[1:] + finite[:-1]) / 2
    probes = torch.cat([finite, mids, torch.nextafter(mids.float(), torch.tensor(1e9)).double(),
                        torch.nextafter(mids.float(), torch.tensor(-1e9)).double(),
                        torch.tensor([1e6, -1e6, 500.0, 70000.0])]).float()
    check(lambda m, x: x.to(kdt(dtype) if m is kiln else tdt(dtype)), probes, exact=True)


@pytest.mark.parametrize("src,dtype", [(s, d) for s in ("float32", "float64", "float16", "float8_e5m2")
                                       for d in ("float8_e4m3fn", "float8_e5m2") if s != d])
def test_float8_nan_keeps_its_sign(src, dtype):
    """A NaN's sign survives the conversion to float8 as in torch's (e4m3fn: 0x7f / 0xff), bits compared
    (equal_nan would not see the sign). Every e5m2 NaN code is a source too."""
    if src == "float8_e5m2":
        x = torch.tensor([0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF], dtype=torch.uint8).view(torch.float8_e5m2)
    else:
        x = torch.tensor([float("nan"), -float("nan"), 1.0]).to(tdt(src))
    want = x.to(tdt(dtype)).view(torch.uint8)
    got = to_torch(to_kiln(x).to(kdt(dtype)).view(kiln.uint8))
    assert torch.equal(got, want), f"{got.tolist()} != {want.tolist()}"


def test_half_bfloat16_from_float_exhaustive_sample():
    g = torch.Generator().manual_seed(0)
    bits = torch.randint(-2**31, 2**31, (200000,), generator=g, dtype=torch.int64).to(torch.int32)
    x = bits.view(torch.float32)
    for dt in ("float16", "bfloat16"):
        check(lambda m, t: t.to(kdt(dt) if m is kiln else tdt(dt)), x, exact=True)
    x64 = torch.randn(100000, generator=g, dtype=torch.float64) * 1000
    for dt in ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"):
        check(lambda m, t: t.to(kdt(dt) if m is kiln else tdt(dt)), x64, exact=True)


VIEW_OPS = [
    ("view", lambda m, x: x.view(4, 6)),
    ("view-1", lambda m, x: x.view(-1, 3)),
    ("reshape", lambda m, x: x.reshape(2, 12)),
    ("permute", lambda m, x: x.permute(1, 0)),
    ("transpose", lambda m, x: x.transpose(0, 1)),
    ("t", lambda m, x: x.t()),
    ("T", lambda m, x: x.T),
    ("mT", lambda m, x: x.unsqueeze(0).mT),
    ("expand", lambda m, x: x.unsqueeze(0).expand(3, 6, 4)),
    ("narrow", lambda m, x: x.narrow(1, 1, 2)),
    ("select", lambda m, x: x.select(0, -2)),
    ("slice-step", lambda m, x: x[1::2, ::3]),
    ("unsqueeze", lambda m, x: x.unsqueeze(-1)),
    ("squeeze", lambda m, x: x.unsqueeze(1).squeeze()),
    ("squeeze-dim", lambda m, x: x.unsqueeze(1).squeeze(1)),
    ("flatten", lambda m, x: x.flatten()),
    ("unflatten", lambda m, x: x.unflatten(1, (2, 2))),
    ("diagonal", lambda m, x: x.diagonal()),
    ("diagonal-off", lambda m, x: x.diagonal(1)),
    ("diagonal-neg", lambda m, x: x.diagonal(-2)),
    ("as_strided", lambda m, x: m.as_strided(x, (2, 2), (1, 2), 1)),
    ("unfold", lambda m, x: x.unfold(0, 2, 1)),
    ("movedim", lambda m, x: m.movedim(x.unsqueeze(0), 0, 2)),
    ("split", lambda m, x: x.split(2, 1)),
    ("split-sizes", lambda m, x: x.split([1, 3], 1)),
    ("chunk", lambda m, x: x.chunk(4, 0)),
    ("unbind", lambda m, x: x.unbind(1)),
]


@pytest.mark.parametrize("name,fn", VIEW_OPS, ids=[v[0] for v in VIEW_OPS])
def test_views_match_and_share_storage(name, fn):
    x = make((6, 4), "float32")
    t = fn(torch, x)
    kx = to_kiln(x)
    k = fn(kiln, kx)
    ts = t if isinstance(t, (list, tuple)) else [t]
    ks = k if isinstance(k, (list, tuple)) else [k]
    assert len(ts) == len(ks)
    for a, b in zip(ks, ts):
        assert_same(a, b, exact=True, msg=name)
        if b.untyped_storage().data_ptr() == x.untyped_storage().data_ptr() and name != "reshape":
            assert a.stride() == b.stride(), (name, a.stride(), b.stride())
            assert a.storage_offset() == b.storage_offset(), name
            assert a.untyped_storage_ptr() == kx.untyped_storage_ptr(), f"{name} copied"


def test_view_errors():
    x = make((6, 4), "float32")
    check(lambda m, t: t.t().view(24), x)
    check(lambda m, t: t.view(5, 5), x)
    check(lambda m, t: t.view(-1, -1), x)
    check(lambda m, t: t.select(0, 6), x)
    check(lambda m, t: t.transpose(0, 2), x)
    check(lambda m, t: t.permute(0, 0), x)
    check(lambda m, t: t.expand(3, 5), x)
    check(lambda m, t: t.narrow(1, 3, 2), x)
    check(lambda m, t: t.unflatten(1, (3, 2)), x)
    check(lambda m, t: t.squeeze(5), x)


def test_reshape_copies_only_when_needed():
    k = kiln.arange(24.0).view(4, 6)
    assert k.reshape(6, 4).untyped_storage_ptr() == k.untyped_storage_ptr()
    r = k.t().reshape(24)
    assert r.untyped_storage_ptr() != k.untyped_storage_ptr()
    assert_same(r, torch.arange(24.0).view(4, 6).t().reshape(24))


def test_zero_dim_and_empty():
    check(lambda m: m.tensor(3.5) + 1)
    check(lambda m: m.zeros(0, 3).sum(0))
    check(lambda m: m.zeros(0, 3).t().contiguous())
    check(lambda m: m.ones(()).reshape(1, 1))
    check(lambda m: m.tensor(5).item())
    check(lambda m: m.ones(2, 3).item())


def test_copy_broadcast_and_cast():
    for src_dt in ("float32", "int64", "bfloat16", "bool"):
        dst = make((3, 4), "float64")
        src = make((4,), src_dt)
        kd, ks = to_kiln(dst), to_kiln(src)
        dst.copy_(src)
        kd.copy_(ks)
        assert_same(kd, dst, exact=True)
    # into a strided view
    d = torch.zeros(4, 6)
    kd = kiln.zeros(4, 6)
    d[:, ::2].copy_(torch.arange(12.0).view(4, 3))
    kd[:, ::2].copy_(kiln.arange(12.0).view(4, 3))
    assert_same(kd, d)
    check(lambda m, a: m.zeros(3, 4).copy_(a), make((5,), "float32"))


CREATION = [
    ("zeros", lambda m: m.zeros(2, 3)),
    ("zeros-dt", lambda m: m.zeros((2, 3), dtype=m.int32)),
    ("ones", lambda m: m.ones(4, dtype=m.bfloat16)),
    ("full", lambda m: m.full((2, 2), 7)),
    ("full-float", lambda m: m.full((2, 2), 7.5)),
    ("full-bool", lambda m: m.full((2,), True)),
    ("arange", lambda m: m.arange(10)),
    ("arange-float", lambda m: m.arange(0, 1, 0.1)),
    ("arange-neg", lambda m: m.arange(10, 0, -3)),
    ("arange-dt", lambda m: m.arange(5, dtype=m.float64)),
    ("arange-empty", lambda m: m.arange(0)),
    ("linspace-1", lambda m: m.linspace(3, 5, 1)),
    ("linspace-int", lambda m: m.linspace(0, 10, 5, dtype=m.int64)),
    ("logspace", lambda m: m.logspace(0, 3, 4)),
    ("logspace-base", lambda m: m.logspace(0, 3, 4, base=2.0)),
    ("eye", lambda m: m.eye(3)),
    ("eye-rect", lambda m: m.eye(2, 4, dtype=m.int64)),
    ("tensor-nested", lambda m: m.tensor([[1, 2], [3, 4]])),
    ("tensor-float", lambda m: m.tensor([[1, 2.5], [3, 4]])),
    ("tensor-bool", lambda m: m.tensor([True, False])),
    ("tensor-complex", lambda m: m.tensor([1 + 2j, 3])),
    ("tensor-dtype", lambda m: m.tensor([1, 2], dtype=m.float16)),
    ("tensor-empty", lambda m: m.tensor([])),
    ("tensor-scalar", lambda m: m.tensor(3)),
    ("zeros_like", lambda m: m.zeros_like(m.ones(2, 3, dtype=m.int8))),
    ("ones_like-dt", lambda m: m.ones_like(m.ones(2), dtype=m.float64)),
    ("full_like", lambda m: m.full_like(m.ones(2, 2), 3.5)),
    ("ragged", lambda m: m.tensor([[1, 2], [3]])),
    ("arange-bad-step", lambda m: m.arange(0, 10, -1)),
    ("neg-size", lambda m: m.zeros(-1, 2)),
]


@pytest.mark.parametrize("name,fn", CREATION, ids=[c[0] for c in CREATION])
def test_creation(name, fn):
    check(fn, exact=True, msg=name)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("start,end,steps", [(-1, 1, 7), (0, 1, 37), (-3.5, 10, 100), (5, -5, 11), (100, 101, 9)])
def test_linspace(start, end, steps, dtype):
    # float64 reference: torch's result depends on its ISA (its vector kernel uses fused multiply-adds
    # from both ends, its scalar one does not: linspace(-1, 1, 7)[3] is -2.98e-8 or 0.0), so kiln is
    # held to one ulp of max(|start|, |end|) of the exact value
    atol = torch.finfo(getattr(torch, dtype)).eps * max(abs(start), abs(end))
    check(lambda m: m.linspace(start, end, steps, dtype=getattr(m, dtype)), ref="float64", rtol=0, atol=atol)


def test_linspace_pinned():
    # kiln's choice: torch's vector formula, start + i * step up to the middle and end - (steps - 1 - i) *
    # step after it, each one fused multiply-add (std::fma, so the same on every ISA)
    assert kiln.linspace(-1, 1, 7)[3].item() == -2.9802322387695312e-08
    assert kiln.linspace(-1, 1, 7, dtype=kiln.float64)[3].item() == 5.551115123125783e-17


def test_float_default_dtype():
    kiln.set_default_dtype(kiln.float64)
    try:
        assert kiln.tensor([1.5]).dtype == kiln.float64
        assert (kiln.ones(2, dtype=kiln.int32) + 1.5).dtype == kiln.float64
    finally:
        kiln.set_default_dtype(kiln.float32)
    assert kiln.tensor([1.5]).dtype is kiln.float32


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_repr_matches_torch(dtype):
    for shape, kw in [((3, 4), {}), ((), {}), ((0, 2), {}), ((2, 3, 4), {}), ((40,), {"low": -1e5, "high": 1e5}),
                      ((5,), {"low": 1e-6, "high": 1e-5}), ((2, 2), {"special": True})]:
        x = make(shape, dtype, **kw) if dtype != "bool" else make(shape, dtype)
        if kw.get("special") and not x.dtype.is_floating_point:
            continue
        want = repr(x).replace("torch.", "kiln.")
        got = repr(to_kiln(x))
        assert got == want, f"\nkiln : {got}\ntorch: {want}"


@pytest.mark.parametrize("vals", [[float("inf"), 1.0], [-0.0, 0.00195], [float("-inf"), 2.0], [-0.0, 1.0],
                                  [float("nan"), 1.5, 100.0], [1.0, 10.0, float("nan")], [float("inf")] * 2,
                                  [-0.0, 0.0], [float("nan"), -1e-5, 3e5], [1e9, float("-inf"), 0.0]])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float8_e4m3fn"])
def test_repr_width_over_nonzero_finite_values(vals, dtype):
    """torch sizes a floating tensor's columns over its nonzero finite values only: inf, nan and zeros
    are padded to that width, or printed whole where longer."""
    x = torch.tensor(vals).to(getattr(torch, dtype))
    for t in (x, torch.complex(x.float(), x.float().flip(0)) if dtype == "float32" else x):
        assert repr(to_kiln(t)) == repr(t).replace("torch.", "kiln.")


INFER_CASES = [  # written against `m` (torch or kiln) and numpy
    "[m.tensor(1., dtype=m.float16), 2]", "[m.tensor(1, dtype=m.int32), 2]", "[m.tensor(1, dtype=m.int32), 2.5]",
    "[m.tensor(1., dtype=m.float64), 2]", "[m.tensor(True), 2]", "[m.tensor(1, dtype=m.uint8), m.tensor(2, dtype=m.int8)]",
    "[np.float16(1), 2]", "[np.int32(3)]", "[np.int64(3), 2**62]", "[np.float32(1.5), 2.0]", "np.float32(1.5)",
    "[np.float64(1.5), 2]", "[[np.int8(1)], [2]]", "[1, 2.5, 1j]", "[True, False]", "[]", "[[], []]",
    "[np.bool_(True), 2]", "[np.bool_(True), True]", "np.float64(2.5)", "np.int16(7)", "[m.tensor(1, dtype=m.int32)]",
    "[np.complex64(1+2j), 1.0]", "[np.uint8(200), np.int8(-1)]", "[[1, 2], [np.float32(3), 4]]",
    # a tensor inside data is one element whatever its dims; more than one element raises
    "[m.tensor([1]), m.tensor([2])]", "[m.tensor([[1]]), m.tensor([[2.5]])]", "[[m.tensor(1), 2], [3, 4]]",
    "[m.tensor([1, 2]), m.tensor([3, 4])]", "[m.tensor([1., 2.]), [3, 4]]", "[m.ones(0), m.ones(0)]",
    "[[1, 2], m.tensor(3)]",
]


@pytest.mark.parametrize("case", INFER_CASES)
def test_tensor_infers_dtype_like_torch(case):
    """tensor() promotes over every element's type, as torch: a 0-dim tensor or a numpy scalar brings its
    own dtype (np.float64 too, though it is a Python float), a Python number its category's."""
    res = []
    for m in (torch, kiln):
        try:
            r = m.tensor(eval(case))
            res.append((str(r.dtype).split(".")[-1], tuple(r.shape), r.tolist()))
        except Exception as e:  # noqa: BLE001 - the class is compared
            res.append(type(e))
    assert res[1] == res[0] if not isinstance(res[0], type) else issubclass(res[1], res[0]), res


@pytest.mark.parametrize("dtype", ["int64", "uint64", "int32", "uint32"])
def test_repr_of_large_integers_is_exact(dtype):
    """Integers beyond 2^53 print exactly (they went through a double: 2^63 - 1 printed as ...808)."""
    info = np.iinfo(dtype)
    vals = [int(info.max), int(info.min), 2**53 + 1 if info.max > 2**53 else 3, 5]
    x = torch.tensor(vals, dtype=getattr(torch, dtype))
    assert repr(to_kiln(x)) == repr(x).replace("torch.", "kiln.")
    assert repr(to_kiln(x.view(2, 2))) == repr(x.view(2, 2)).replace("torch.", "kiln.")


def test_repr_summarised():
    x = torch.arange(2000.0).view(40, 50)
    assert repr(to_kiln(x)) == repr(x)
    y = torch.arange(1200)
    assert repr(to_kiln(y)) == repr(y)


def test_numpy_roundtrip_no_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    k = kiln.from_numpy(a)
    a[0, 0] = 42
    assert k[0, 0].item() == 42
    n = k.numpy()
    n[1, 1] = -1
    assert k[1, 1].item() == -1
    kt = k.t()
    assert np.shares_memory(kt.numpy(), a)
    assert kiln.from_numpy(a[:, ::2]).stride() == (4, 2)
    with pytest.raises(TypeError):
        kiln.from_numpy([1, 2])
    with pytest.raises(TypeError):
        kiln.ones(2, dtype=kiln.bfloat16).numpy()


def test_dlpack_both_ways_without_copy():
    t = torch.arange(12.0).view(3, 4)[:, 1:]
    k = kiln.from_dlpack(t)
    assert k.data_ptr() == t.data_ptr()
    assert k.stride() == t.stride()
    t[0, 0] = 99
    assert k[0, 0].item() == 99
    k2 = kiln.arange(6, dtype=kiln.int32).view(2, 3)
    t2 = torch.from_dlpack(k2)
    assert t2.data_ptr() == k2.data_ptr()
    assert torch.equal(t2, torch.arange(6, dtype=torch.int32).view(2, 3))
    b = kiln.ones(3, dtype=kiln.bfloat16)
    assert torch.from_dlpack(b).dtype == torch.bfloat16
    n = np.from_dlpack(k2)
    assert n.ctypes.data == k2.data_ptr()


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_numpy_and_dlpack_refusals_like_torch(lib):
    import warnings
    for dt in (object, np.clongdouble, np.longdouble, "U2", "M8[s]", "V4"):
        with pytest.raises(TypeError, match="can't convert np.ndarray of type numpy"):
            lib.from_numpy(np.zeros(2, dtype=dt))
    with pytest.raises(TypeError, match="numpy.object_"):
        lib.as_tensor(np.array([object()]))
    with pytest.raises(ValueError, match="byte order"):
        lib.from_numpy(np.zeros(3, dtype=">f4"))
    ro = np.zeros(3, dtype=np.float32)
    ro.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="not writable"):
            lib.from_numpy(ro)
        lib.tensor(ro)  # a copy: no warning
    with pytest.raises(RuntimeError, match=r"Use tensor.detach\(\).numpy\(\)"):
        lib.ones(3, requires_grad=True).numpy()
    with pytest.raises(RuntimeError, match=r"Use tensor.detach\(\).numpy\(\)"):
        np.asarray(lib.ones(3, requires_grad=True))
    assert lib.ones(3, requires_grad=True).detach().numpy().tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(BufferError, match="require gradient"):
        lib.ones(3, requires_grad=True).__dlpack__()
    cap = np.arange(3.0).__dlpack__()
    lib.from_dlpack(cap)
    for bad in (5, "abc", object(), cap):  # not a capsule, or one consumed already
        with pytest.raises(RuntimeError, match="invalid capsule"):
            lib.from_dlpack(bad)


def test_item_tolist():
    for dt in ("int64", "float32", "bool", "complex64", "uint8", "bfloat16"):
        x = make((2, 3), dt)
        assert to_kiln(x).tolist() == x.tolist()
        assert to_kiln(x[0, 1]).item() == x[0, 1].item()


def test_memory_stats_track_allocations():
    kiln.reset_peak_memory_stats()
    before = kiln.memory_stats()["allocated_bytes.all.current"]
    x = kiln.empty(1 << 20)
    during = kiln.memory_stats()
    assert during["allocated_bytes.all.current"] - before >= 4 << 20
    del x
    after = kiln.memory_stats()
    assert after["allocated_bytes.all.current"] == before
    assert after["allocated_bytes.all.peak"] - before >= 4 << 20


def test_dtype_objects():
    assert kiln.float32 is kiln.float
    assert repr(kiln.bfloat16) == "kiln.bfloat16"
    assert kiln.float16.is_floating_point and not kiln.int8.is_floating_point
    assert kiln.complex64.is_complex
    assert kiln.ones(2).dtype is kiln.float32
    assert kiln.float64.itemsize == 8


def test_tensor_of_a_zero_dim_numpy_array_is_zero_dim():
    import numpy as np
    import torch
    for a in (np.array(3), np.array(2.5, dtype=np.float32), np.array(True)):
        k, t = kiln.tensor(a), torch.tensor(a)
        assert tuple(k.shape) == tuple(t.shape) == ()
        assert k.item() == t.item() and str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16", "int8", "int64", "bool", "complex64",
                                   "complex128"])
def test_transposed_copies_by_blocks(dtype):
    """Copies whose output runs along a dimension the source strides through go by 16 x 16 blocks
    (creation.cpp): every element lands where numpy puts it, for sizes that are and are not
    multiples of the block, batch dimensions, flipped sources and converting copies."""
    import numpy as np
    rng = np.random.default_rng(3)
    # (4096 elements and more: smaller copies keep the element loop)
    for shape, perm in [((64, 80), (1, 0)), ((17, 300), (1, 0)), ((300, 33), (1, 0)), ((3, 40, 50), (0, 2, 1)),
                        ((40, 3, 50), (2, 1, 0)), ((20, 5, 64), (1, 2, 0)), ((1024, 16), (1, 0)), ((16, 1024), (1, 0))]:
        a = rng.standard_normal(shape) * 50
        t = torch.from_numpy(a).to(getattr(torch, dtype))
        k = to_kiln(t)
        want = t.permute(perm).contiguous()
        assert torch.equal(to_torch(k.permute(perm).contiguous()), want), (shape, perm)
        assert torch.equal(to_torch(k.flip(-1).permute(perm).contiguous()), t.flip(-1).permute(perm).contiguous())
        if dtype != "bool":  # a converting copy of the transposed view
            got = to_torch(k.permute(perm).to(kiln.float64))
            assert torch.equal(got, t.permute(perm).to(torch.float64)), (shape, perm)


_OVERLAP_CASES = {
    "copy_ transposed self": lambda L: (lambda x: x.copy_(x.t()))(L.arange(16.).reshape(4, 4)),
    "copy_ self": lambda L: (lambda x: x.copy_(x))(L.arange(16.).reshape(4, 4)),
    "copy_ shifted": lambda L: (lambda x: x[1:].copy_(x[:-1]))(L.arange(4.)),
    "copy_ transposed unsqueezed": lambda L: (lambda x: x.unsqueeze(1).copy_(x.unsqueeze(0).t()))(L.arange(4.)),
    "copy_ interleaved": lambda L: (lambda x: x[::2].copy_(x[1::2]))(L.arange(8.)),
    "copy_ disjoint halves": lambda L: (lambda x: x[:2].copy_(x[2:]))(L.arange(4.)),
    "add_ transposed": lambda L: (lambda x: x.t().add_(x))(L.arange(16.).reshape(4, 4)),
    "add_ both transposed": lambda L: (lambda x: x.t().add_(x.t()))(L.arange(16.).reshape(4, 4)),
    "add_ unsqueezed": lambda L: (lambda x: x.unsqueeze(0).add_(x))(L.arange(4.)),
    "add out= transposed": lambda L: (lambda x: L.add(x, 1, out=x.t()))(L.arange(16.).reshape(4, 4)),
    "mul_ same view": lambda L: (lambda x: x.mul_(x.view(4, 1, 4).squeeze(1)))(L.arange(16.).reshape(4, 4)),
}


@pytest.mark.parametrize("case", sorted(_OVERLAP_CASES))
def test_partial_overlap_raises_as_torch(case):
    """A written-to tensor and an input that share memory in another layout, or only in part, raise
    torch's RuntimeError (copy_ included); the same memory in the same layout is allowed."""
    f = _OVERLAP_CASES[case]
    try:
        f(torch)
        torch_raises = False
    except RuntimeError as e:
        assert "single memory location" in str(e)
        torch_raises = True
    if torch_raises:
        with pytest.raises(RuntimeError, match="single memory location"):
            f(kiln)
    else:
        f(kiln)
