"""torch's functional in-place forms (torch.abs_ ...), the *_copy forms of the view ops, and the
small utilities (nonzero_static, constant_pad_nd, fill, asarray, frombuffer, gradient, default
device, float32 matmul precision) against torch 2.13."""
import numpy as np
import pytest
import torch

import kiln
from helpers import assert_same, make, to_kiln, to_torch


UNARY_INPLACE = ["abs_", "acos_", "asin_", "atan_", "ceil_", "cos_", "cosh_", "deg2rad_", "erf_", "erfc_", "exp2_",
                 "exp_", "expm1_", "fix_", "floor_", "frac_", "log10_", "log1p_", "log2_", "log_", "neg_", "negative_",
                 "rad2deg_", "reciprocal_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinh_", "sqrt_", "square_",
                 "tan_", "tanh_", "trunc_", "zero_", "arccos_", "arcsin_", "arctan_", "asinh_", "arcsinh_",
                 "detach_", "nan_to_num_"]


@pytest.mark.parametrize("name", UNARY_INPLACE)
def test_unary_inplace_functions(name):
    t = make((3, 4), "float32", -0.9, 0.9)
    t[0, 0] = float("nan")
    k = to_kiln(t)
    tr, kr = getattr(torch, name)(t), getattr(kiln, name)(k)
    assert kr is k  # in place: the input comes back
    assert_same(k, t, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name,args", [("clamp_", (-0.5, 0.5)), ("clamp_min_", (0.1,)), ("clamp_max_", (0.1,)),
                                       ("clip_", (-0.2, 0.3)), ("fill_", (2.5,)), ("logit_", (0.1,)),
                                       ("xlogy_", ("other",)), ("ldexp_", ("exp",)),
                                       ("acosh_", ()), ("atanh_", ()), ("arccosh_", ()), ("arctanh_", ())])
def test_inplace_functions_with_arguments(name, args):
    lo, hi = (1.0, 3.0) if "cosh" in name else (-0.9, 0.9)
    t = make((3, 4), "float32", lo, hi)
    k = to_kiln(t)
    other = make((3, 4), "float32", 0.1, 2.0, seed=1)
    expo = torch.tensor([1, -2, 3, 0]).to(torch.float32)

    def conv(a, lib):
        if a == "other":
            return other if lib is torch else to_kiln(other)
        if a == "exp":
            return expo if lib is torch else to_kiln(expo)
        return a
    getattr(torch, name)(t, *[conv(a, torch) for a in args])
    assert getattr(kiln, name)(k, *[conv(a, kiln) for a in args]) is k
    assert_same(k, t, rtol=2e-6, atol=1e-6)


def test_integer_and_index_inplace_functions():
    a, b = torch.tensor([12, 18, -8, 0]), torch.tensor([8, 12, 6, 5])
    for name in ("gcd_", "lcm_"):
        ta, ka = a.clone(), to_kiln(a)
        getattr(torch, name)(ta, b)
        getattr(kiln, name)(ka, to_kiln(b))
        assert_same(ka, ta, exact=True)
    t = torch.zeros(5)
    k = to_kiln(t)
    idx, vals = torch.tensor([1, 3, 1]), torch.tensor([1.0, 2.0, 3.0])
    torch.index_put_(t, (idx,), vals, accumulate=True)
    kiln.index_put_(k, (to_kiln(idx),), to_kiln(vals), accumulate=True)
    assert_same(k, t, exact=True)
    y, m, v = torch.ones(3), make((3, 4), "float32"), make((4,), "float32", seed=2)
    ky = to_kiln(y)
    torch.addmv_(y, m, v, beta=0.5, alpha=2.0)
    kiln.addmv_(ky, to_kiln(m), to_kiln(v), beta=0.5, alpha=2.0)
    assert_same(ky, y, rtol=1e-5, atol=1e-5)
    c = torch.tensor([1 + 2j, -3j])
    kc = to_kiln(c)
    torch.conj_physical_(c)
    kiln.conj_physical_(kc)
    assert_same(kc, c, exact=True)


COPIES = [
    ("alias_copy", (), {}), ("detach_copy", (), {}), ("t_copy", (), {}),
    ("diagonal_copy", (), {}), ("diagonal_copy", (1,), {}), ("diagonal_copy", (0, 1, 0), {}),
    ("expand_copy", ((2, 3, 4),), {}), ("permute_copy", ((1, 0),), {}), ("select_copy", (1, 2), {}),
    ("slice_copy", (1, 1, 4, 2), {}), ("slice_copy", (), {}), ("squeeze_copy", (), {}),
    ("transpose_copy", (0, 1), {}), ("unfold_copy", (1, 2, 1), {}), ("unsqueeze_copy", (1,), {}),
    ("view_copy", ((4, 3),), {}), ("as_strided_copy", ((2, 2), (1, 2)), {}),
    ("as_strided_copy", ((2,), (3,), 1), {}),
]


@pytest.mark.parametrize("name,args,kw", COPIES)
def test_view_copies(name, args, kw):
    t = make((3, 4), "float32")
    if name == "squeeze_copy":
        t = t.reshape(3, 1, 4)
    k = to_kiln(t)
    tr, kr = getattr(torch, name)(t, *args, **kw), getattr(kiln, name)(k, *args, **kw)
    assert_same(kr, tr, exact=True, check_stride=True)
    kr.fill_(0.0)  # a copy: the input is untouched
    assert_same(k, t, exact=True)


def test_view_copies_lists_complex_and_out():
    t = make((5, 4), "float32")
    k = to_kiln(t)
    for name, args in (("split_copy", (2,)), ("split_with_sizes_copy", ([1, 4],)), ("unbind_copy", (1,))):
        tr, kr = getattr(torch, name)(t, *args), getattr(kiln, name)(k, *args)
        assert len(kr) == len(tr)
        for a, b in zip(kr, tr):
            assert_same(a, b, exact=True, check_stride=True)
    c = make((3, 2), "float32")
    assert_same(kiln.view_as_complex_copy(to_kiln(c)), torch.view_as_complex_copy(c), exact=True)
    z = torch.view_as_complex(c)
    assert_same(kiln.view_as_real_copy(to_kiln(z)), torch.view_as_real_copy(z), exact=True)
    out_t, out_k = torch.empty(0), kiln.empty(0)
    torch.permute_copy(t, (1, 0), out=out_t)
    assert kiln.permute_copy(k, (1, 0), out=out_k) is out_k
    assert_same(out_k, out_t, exact=True)


def test_nonzero_static():
    for t, size, fill in ((torch.tensor([0, 1, 0, 2]), 3, -1), (torch.tensor([[0, 1], [3, 0]]), 1, 7),
                          (torch.tensor([[0, 1], [3, 0]]), 0, -1), (torch.zeros(2, 3), 4, 9),
                          (torch.tensor([True, False, True]), 5, -1), (torch.tensor(2.0), 2, 0)):
        assert_same(kiln.nonzero_static(to_kiln(t), size=size, fill_value=fill),
                    torch.nonzero_static(t, size=size, fill_value=fill), exact=True)
    with pytest.raises(RuntimeError, match="non-negative integer"):
        kiln.nonzero_static(kiln.tensor([1]), size=-1)
    with pytest.raises(RuntimeError, match="non-negative integer"):
        torch.nonzero_static(torch.tensor([1]), size=-1)


def test_fill_pad_detach_predicates_and_vmap():
    t = make((2, 3), "float64")
    k = to_kiln(t)
    assert_same(kiln.fill(k, 2.5), torch.fill(t, 2.5), exact=True)
    assert_same(kiln.fill(k, kiln.tensor(1.5)), torch.fill(t, torch.tensor(1.5)), exact=True)
    assert_same(kiln.constant_pad_nd(k, (1, 2, 0, 1), 3.0), torch.constant_pad_nd(t, (1, 2, 0, 1), 3.0), exact=True)
    assert_same(kiln.constant_pad_nd(k, (-1, 1)), torch.constant_pad_nd(t, (-1, 1)), exact=True)
    kg = k.clone().requires_grad_()
    d = kiln.detach(kg)
    assert not d.requires_grad and d.data_ptr() == kg.data_ptr()
    assert kiln.is_conj(k) is torch.is_conj(t) and kiln.is_neg(k) is torch.is_neg(t)
    assert kiln.is_inference(k) == torch.is_inference(t)
    assert kiln.get_device(k) == torch.get_device(t) == -1
    xs = make((4, 3), "float32")
    assert_same(kiln.vmap(lambda r: r.sum())(to_kiln(xs)), torch.vmap(lambda r: r.sum())(xs), rtol=1e-6, atol=1e-6)


def test_default_device_and_matmul_precision():
    assert str(kiln.get_default_device()) == str(torch.get_default_device()) == "cpu"
    kiln.set_default_device("cpu")
    kiln.set_default_device(None)
    with pytest.raises(RuntimeError):
        kiln.set_default_device("cuda")
    assert kiln.get_float32_matmul_precision() == torch.get_float32_matmul_precision() == "highest"
    try:
        for p in ("high", "medium", "highest"):
            kiln.set_float32_matmul_precision(p)
            assert kiln.get_float32_matmul_precision() == p
        with pytest.warns(UserWarning):  # (torch warns and keeps the value)
            kiln.set_float32_matmul_precision("low")
        assert kiln.get_float32_matmul_precision() == "highest"
    finally:
        kiln.set_float32_matmul_precision("highest")


def test_asarray():
    x = kiln.tensor([[1.0, 2.0]])
    assert kiln.asarray(x) is x
    c = kiln.asarray(x, copy=True)
    assert c is not x and c.data_ptr() != x.data_ptr() and bool(kiln.equal(c, x))
    assert kiln.asarray(x, dtype=kiln.float64).dtype == kiln.float64
    with pytest.raises(ValueError) as ke:
        kiln.asarray(x, dtype=kiln.float64, copy=False)
    with pytest.raises(ValueError) as te:
        torch.asarray(torch.tensor([[1.0, 2.0]]), dtype=torch.float64, copy=False)
    assert str(ke.value) == str(te.value)
    n = np.arange(3.0)
    kn, tn = kiln.asarray(n), torch.asarray(n)
    n[0] = 9.0  # shared memory in both
    assert_same(kn, tn, exact=True)
    n2 = np.arange(3.0)
    kc = kiln.asarray(n2, copy=True)
    n2[0] = 5.0
    assert float(kc[0]) == 0.0
    for obj in ([1, 2.5], [[1, 2], [3, 4]], 3, 3.5, True, [True, False], [1 + 2j]):
        assert_same(kiln.asarray(obj), torch.asarray(obj), exact=True)
    assert_same(kiln.asarray([1, 2], dtype=kiln.float16), torch.asarray([1, 2], dtype=torch.float16), exact=True)
    r = kiln.asarray([1.0, 2.0], requires_grad=True)
    assert r.requires_grad and r.is_leaf


def test_frombuffer():
    b = bytearray(np.array([1.0, 2.0, -3.0], dtype=np.float32).tobytes())
    k, t = kiln.frombuffer(b, dtype=kiln.float32), torch.frombuffer(bytearray(b), dtype=torch.float32)
    assert_same(k, t, exact=True)
    k[0] = 7.0  # the buffer's memory
    assert np.frombuffer(b, dtype=np.float32)[0] == 7.0
    b2 = bytearray(range(16))
    for kw in (dict(count=2, offset=4), dict(offset=8), dict(count=1)):
        for dt in ("int16", "int32", "uint8", "float16", "bfloat16"):
            assert_same(kiln.frombuffer(b2, dtype=getattr(kiln, dt), **kw),
                        torch.frombuffer(bytearray(b2), dtype=getattr(torch, dt), **kw), exact=True)
    bad = bytearray(8)
    for kw in (dict(count=3), dict(offset=9), dict(offset=2), dict(count=0), dict(offset=-1)):
        with pytest.raises(ValueError) as te:
            torch.frombuffer(bytearray(bad), dtype=torch.float32, **kw)
        with pytest.raises(ValueError) as ke:
            kiln.frombuffer(bad, dtype=kiln.float32, **kw)
        assert str(ke.value) == str(te.value), kw
    with pytest.raises(ValueError) as ke:
        kiln.frombuffer(b"", dtype=kiln.float32)
    assert "both buffer length (0) and count (-1) must not be 0" in str(ke.value)


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient(edge_order):
    t = make((5, 6, 4), "float64")
    k = to_kiln(t)
    cases = [dict(), dict(spacing=2.0), dict(dim=1), dict(dim=(0, 2), spacing=(0.5, 3.0)), dict(dim=-1),
             dict(spacing=[torch.tensor([0.0, 1.0, 3.0, 3.5, 7.0]), torch.tensor([0.0, 0.5, 1.0, 2.0, 4.0, 8.0]),
                           torch.tensor([1.0, 2.0, 4.0, 5.0])]),
             dict(dim=1, spacing=[torch.tensor([0.0, 0.5, 1.0, 2.0, 4.0, 8.0])]),
             dict(spacing=[1.0, 2.0, 0.5])]
    for kw in cases:
        kkw = {a: ([to_kiln(s) if isinstance(s, torch.Tensor) else s for s in v] if a == "spacing" and
                   isinstance(v, list) else v) for a, v in kw.items()}
        tr, kr = torch.gradient(t, edge_order=edge_order, **kw), kiln.gradient(k, edge_order=edge_order, **kkw)
        assert isinstance(kr, tuple) and len(kr) == len(tr)
        for a, b in zip(kr, tr):
            assert_same(a, b, rtol=1e-12, atol=1e-12, msg=str(kw))
    ti = torch.tensor([1, 2, 4, 8, 16])
    assert_same(kiln.gradient(to_kiln(ti), edge_order=edge_order)[0], torch.gradient(ti, edge_order=edge_order)[0],
                rtol=1e-6, atol=1e-6)


def test_gradient_errors():
    t = torch.tensor([1.0, 2.0, 4.0, 8.0])
    k = to_kiln(t)
    for kw in (dict(edge_order=3), dict(spacing=[1.0, 2.0]), dict(dim=0, spacing=[1.0, 2.0])):
        with pytest.raises(RuntimeError) as te:
            torch.gradient(t, **kw)
        with pytest.raises(RuntimeError) as ke:
            kiln.gradient(k, **kw)
        assert str(ke.value) == str(te.value), kw
    with pytest.raises(RuntimeError) as te:
        torch.gradient(t[:2], edge_order=2)
    with pytest.raises(RuntimeError) as ke:
        kiln.gradient(k[:2], edge_order=2)
    assert str(ke.value) == str(te.value)


def test_review_findings():
    # asarray keeps the graph when it does not copy; bytes read as the default dtype; copy=False of a number
    x = kiln.randn(3).requires_grad_()
    y = x * 2
    z = kiln.asarray(y, requires_grad=True)
    assert z is y and z.grad_fn is not None
    assert_same(kiln.asarray(b"\x00\x00\x80\x3f"), torch.asarray(b"\x00\x00\x80\x3f"), exact=True)
    for lib in (torch, kiln):
        with pytest.raises(ValueError, match="can't alias arbitrary sequence"):
            lib.asarray(3, copy=False)
    # gradient: integers subtracted exactly, uint8 / bool / 0-dim spacing refused, the duplicated dim named
    for t in (torch.tensor([2 ** 40, 2 ** 40 + 1, 2 ** 40 + 3]), torch.tensor([1, 2, 4, 8, 16], dtype=torch.int32)):
        for eo in (1, 2):
            assert_same(kiln.gradient(to_kiln(t), edge_order=eo)[0], torch.gradient(t, edge_order=eo)[0], exact=True)
    for t, kw in ((torch.tensor([1, 2, 3], dtype=torch.uint8), {}), (torch.tensor([True, False, True]), {}),
                  (torch.arange(4.0), dict(spacing=[torch.tensor(1.0)])),
                  (torch.zeros(3, 3, 3), dict(dim=[1, 0, 0]))):
        kkw = {a: ([to_kiln(s) for s in v] if a == "spacing" else v) for a, v in kw.items()}
        with pytest.raises(RuntimeError) as te:
            torch.gradient(t, **kw)
        with pytest.raises(RuntimeError) as ke:
            kiln.gradient(to_kiln(t), **kkw)
        assert str(ke.value) == str(te.value)
    # fill: the input's strides, a 0-dim value's gradient, a 1-dim value refused
    for t in (torch.zeros(2, 3).t(), torch.zeros(2, 3)[:, ::2], torch.zeros(1, 3).expand(2, 3)):
        assert_same(kiln.fill(to_kiln(t), 1.5), torch.fill(t, 1.5), exact=True, check_stride=True)
    v = kiln.tensor(2.0, requires_grad=True)
    kiln.fill(kiln.zeros(2, 3), v).sum().backward()
    assert float(v.grad) == 6.0
    with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor"):
        kiln.fill(kiln.zeros(2), kiln.ones(2))
    # set_float32_matmul_precision warns on a bad value and keeps the old one
    with pytest.warns(UserWarning, match="is not one of 'highest', 'high', or 'medium'"):
        kiln.set_float32_matmul_precision("low")
    assert kiln.get_float32_matmul_precision() == "highest"
    # *_copy: tuples for the splits, out= of another dtype refused, slice steps positive; nonzero_static ints
    t = torch.arange(4.0)
    for name, args in (("split_copy", (2,)), ("split_with_sizes_copy", ([1, 3],))):
        assert type(getattr(kiln, name)(to_kiln(t), *args)) is type(getattr(torch, name)(t, *args)) is tuple
    assert type(kiln.unbind_copy(kiln.ones(2, 2))) is type(torch.unbind_copy(torch.ones(2, 2))) is tuple
    with pytest.raises(RuntimeError):
        kiln.permute_copy(kiln.ones(2, 2), (1, 0), out=kiln.empty(0, dtype=kiln.float64))
    with pytest.raises(RuntimeError):
        torch.permute_copy(torch.ones(2, 2), (1, 0), out=torch.empty(0, dtype=torch.float64))
    for lib, T in ((torch, t), (kiln, to_kiln(t))):
        with pytest.raises(RuntimeError, match="slice step must be positive"):
            lib.slice_copy(T, 0, 0, 4, 0)
        with pytest.raises(TypeError, match="argument 'fill_value' must be int"):
            lib.nonzero_static(T, size=2, fill_value=2.5)


def test_dtypes_pickle_and_copy_as_themselves():
    import copy
    import pickle
    for name in ("float32", "float64", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int64", "uint8",
                 "bool", "complex64", "complex128"):
        d = getattr(kiln, name)
        assert pickle.loads(pickle.dumps(d)) is d and copy.copy(d) is d and copy.deepcopy(d) is d
        assert pickle.loads(pickle.dumps(getattr(torch, name))) is getattr(torch, name)
    lin = kiln.nn.Linear(2, 3, dtype=kiln.float64)  # (its constructor arguments hold a dtype)
    assert pickle.loads(pickle.dumps(lin)).weight.dtype == kiln.float64
