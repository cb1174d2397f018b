"""hardshrink, softshrink, tanhshrink, glu and softmin (functions, modules, Tensor.hardshrink) against
torch: values with NaN / inf / the thresholds themselves, every floating dtype, gradients and errors."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import kiln
import kiln.nn.functional as KF

VALS = [float("nan"), float("-inf"), -2.0, -0.5, -0.3, -0.0, 0.0, 0.2, 0.5, 0.50001, 1.5, float("inf")]
DTYPES = ["float32", "float64", "float16", "bfloat16"]


def _pair(vals, dtype):
    t = torch.tensor(vals, dtype=getattr(torch, dtype))
    return kiln.from_numpy(t.double().numpy()).to(getattr(kiln, dtype)), t  # (exact: every value fits float64)


def _same(k, t, rtol=0.0):
    assert str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1] and tuple(k.shape) == tuple(t.shape)
    a, b = k.detach().to(kiln.float64).numpy(), t.detach().double().numpy()
    if rtol == 0:
        np.testing.assert_array_equal(a, b)  # (-0.0 == 0.0: see test_softshrink_zero_sign)
    else:
        np.testing.assert_allclose(a, b, rtol=rtol, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lambd", [0.5, 0.0, 1.5])
def test_hardshrink_softshrink_like_torch(dtype, lambd):
    k, t = _pair(VALS, dtype)
    _same(KF.hardshrink(k, lambd), TF.hardshrink(t, lambd))
    _same(kiln.hardshrink(k, lambd), torch.hardshrink(t, lambd))
    _same(k.hardshrink(lambd), t.hardshrink(lambd))
    _same(kiln.nn.Hardshrink(lambd)(k), torch.nn.Hardshrink(lambd)(t))
    _same(KF.softshrink(k, lambd), TF.softshrink(t, lambd))
    _same(kiln.nn.Softshrink(lambd)(k), torch.nn.Softshrink(lambd)(t))


@pytest.mark.parametrize("dtype", DTYPES)
def test_softshrink_zero_sign(dtype):
    # Inside [-lambd, lambd] torch's scalar loop gives x * 0 (x's sign) and its float64 vector loop
    # +0.0, so its sign depends on the element's place and the ISA; kiln's is x * 0 everywhere,
    # hardshrink's +0.0.
    k, _ = _pair(VALS * 3, dtype)
    x = k.to(kiln.float64).numpy()
    inside = np.abs(x) <= 0.5
    s = KF.softshrink(k).to(kiln.float64).numpy()
    np.testing.assert_array_equal(np.signbit(s[inside]), np.signbit(x[inside]))
    assert not np.signbit(KF.hardshrink(k).to(kiln.float64).numpy()[inside]).any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_tanhshrink_like_torch(dtype):
    k, t = _pair(VALS, dtype)
    rtol = {"float32": 2e-6, "float64": 1e-14}.get(dtype, 1e-2)
    got, want = KF.tanhshrink(k), TF.tanhshrink(t)
    _same(got, want, rtol)
    _same(kiln.nn.Tanhshrink()(k), torch.nn.Tanhshrink()(t), rtol)
    ki, ti = kiln.tensor([1, -2]), torch.tensor([1, -2])  # an integer input promotes
    _same(KF.tanhshrink(ki), TF.tanhshrink(ti), 1e-6)


@pytest.mark.parametrize("shape,dim", [((4,), 0), ((2, 6), -1), ((2, 6), 1), ((4, 3, 2), 0), ((3, 4, 2), -2)])
def test_glu_like_torch(shape, dim):
    a = np.random.default_rng(0).standard_normal(shape)
    k, t = kiln.from_numpy(a.copy()).requires_grad_(), torch.from_numpy(a.copy()).requires_grad_()
    got, want = KF.glu(k, dim), TF.glu(t, dim)
    _same(got, want, 1e-14)
    _same(kiln.nn.GLU(dim)(k), torch.nn.GLU(dim)(t), 1e-14)
    w = np.random.default_rng(1).standard_normal(tuple(want.shape))
    got.mul(kiln.from_numpy(w)).sum().backward()
    want.mul(torch.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), rtol=1e-13, atol=1e-15)


def test_shrink_gradients_like_torch():
    vals = [-2.0, -0.5, -0.3, 0.0, 0.5, 0.7, 3.0]
    for kf, tf in ((KF.hardshrink, TF.hardshrink), (KF.softshrink, TF.softshrink), (KF.tanhshrink, TF.tanhshrink)):
        k, t = kiln.tensor(vals, dtype=kiln.float64, requires_grad=True), torch.tensor(vals, dtype=torch.float64,
                                                                                        requires_grad=True)
        kf(k).mul(kiln.arange(7, dtype=kiln.float64)).sum().backward()
        tf(t).mul(torch.arange(7, dtype=torch.float64)).sum().backward()
        np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), rtol=1e-14, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmin_like_torch(dtype):
    a = np.random.default_rng(2).standard_normal((3, 5)).astype(dtype)
    k, t = kiln.from_numpy(a.copy()), torch.from_numpy(a.copy())
    for dim in (0, 1, -1):
        _same(KF.softmin(k, dim), TF.softmin(t, dim), 1e-6)
        _same(kiln.nn.Softmin(dim)(k), torch.nn.Softmin(dim)(t), 1e-6)
    _same(KF.softmin(k, 1, dtype=kiln.float64), TF.softmin(t, 1, dtype=torch.float64), 1e-6)


def test_module_reprs_like_torch():
    for name, args in (("Hardshrink", ()), ("Hardshrink", (0.25,)), ("Softshrink", (0.3,)), ("Tanhshrink", ()),
                       ("GLU", ()), ("GLU", (1,))):
        assert repr(getattr(kiln.nn, name)(*args)) == repr(getattr(torch.nn, name)(*args))


@pytest.mark.parametrize("lib,F", [(torch, TF), (kiln, KF)], ids=["torch", "kiln"])
def test_errors_like_torch(lib, F):
    for fn in (F.hardshrink, F.softshrink, F.glu):
        with pytest.raises(NotImplementedError):
            fn(lib.tensor([1, 2]))
    with pytest.raises(NotImplementedError):
        F.hardshrink(lib.tensor([1 + 1j]))
    with pytest.raises(RuntimeError, match="lambda must be in range"):
        F.softshrink(lib.tensor([1.0]), -1.0)
    with pytest.raises(RuntimeError, match="glu does not support scalars"):
        F.glu(lib.tensor(1.0))
    with pytest.raises(RuntimeError, match="Halving dimension must be even, but dimension 1 is size 3"):
        F.glu(lib.zeros(2, 3))
    with pytest.raises(IndexError):
        F.glu(lib.zeros(2, 4), 2)
