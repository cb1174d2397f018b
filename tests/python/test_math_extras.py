"""deg2rad / rad2deg, float_power, ldexp, frexp, isreal, dist, renorm and positive against torch:
dtypes, values (NaN, inf, subnormals, zero), in-place forms, gradients and errors."""
import numpy as np
import pytest
import torch

import kiln

SPECIAL = [0.0, -0.0, 1.0, -3.5, 8.0, 0.1, 1e-40, 5e-324, 1e300, float("inf"), float("-inf"), float("nan")]


def _k(t):
    return kiln.from_numpy(t.detach().numpy().copy()) if t.dtype not in (torch.bfloat16, torch.float16) else \
        kiln.from_numpy(t.double().numpy().copy()).to(getattr(kiln, str(t.dtype).split(".")[-1]))


def _eq(k, t, rtol=0.0):
    assert str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (k.dtype, t.dtype)
    assert tuple(k.shape) == tuple(t.shape)
    a = k.detach().to(kiln.complex128 if k.dtype.is_complex else kiln.float64).numpy()
    b = t.detach().to(torch.complex128 if t.dtype.is_complex else torch.float64).numpy()
    if rtol:
        np.testing.assert_allclose(a, b, rtol=rtol, atol=0)
    else:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32", "bool"])
def test_deg2rad_rad2deg_like_torch(dtype):
    t = torch.tensor([0, 1, 90, -180, 360], dtype=getattr(torch, dtype)) if dtype != "bool" else torch.tensor([True, False])
    k = _k(t)
    for name in ("deg2rad", "rad2deg"):
        _eq(getattr(kiln, name)(k), getattr(torch, name)(t), 1e-6 if dtype != "float64" else 1e-15)
        _eq(getattr(k, name)(), getattr(t, name)(), 1e-6 if dtype != "float64" else 1e-15)
    if dtype.startswith("float"):
        kk, tt = k.clone(), t.clone()
        kk.deg2rad_(), tt.deg2rad_()
        _eq(kk, tt, 1e-6 if dtype != "float64" else 1e-15)


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_deg2rad_errors_like_torch(lib):
    with pytest.raises(RuntimeError, match="deg2rad is not supported for complex tensors"):
        lib.deg2rad(lib.tensor([1 + 1j]))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        lib.tensor([180]).deg2rad_()


@pytest.mark.parametrize("a,b", [("float32", "float32"), ("int64", "int64"), ("float32", "complex64"),
                                 ("float16", "int32"), ("bool", "float64")])
def test_float_power_like_torch(a, b):
    ta = torch.tensor([2, 3, 0, 1], dtype=getattr(torch, a)) if a != "bool" else torch.tensor([True, False, True, True])
    tb = torch.tensor([3, -1, 0, 2], dtype=getattr(torch, b)) if b != "bool" else torch.tensor([True] * 4)
    if b.startswith("complex"):
        tb = tb * (1 + 0.5j)
    ka, kb = _k(ta), _k(tb)
    _eq(kiln.float_power(ka, kb), torch.float_power(ta, tb), 1e-12)
    _eq(ka.float_power(kb), ta.float_power(tb), 1e-12)
    _eq(kiln.float_power(ka, 2.5), torch.float_power(ta, 2.5), 1e-12)
    _eq(kiln.float_power(2, kb), torch.float_power(2, tb), 1e-12)
    x = kiln.tensor([-8.0], dtype=kiln.float64)
    assert np.isnan(kiln.float_power(x, 1 / 3).item())


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_float_power_inplace_like_torch(lib):
    x = lib.tensor([2.0, 3.0], dtype=lib.float64)
    assert x.float_power_(2) is x and x.tolist() == [4.0, 9.0]
    with pytest.raises(RuntimeError, match="the base given to float_power_ has dtype"):
        lib.tensor([2.0]).float_power_(2)
    with pytest.raises(RuntimeError, match="the base given to float_power_ has dtype"):
        lib.tensor([2.0], dtype=lib.float64).float_power_(lib.tensor([1j]))


@pytest.mark.parametrize("x,e", [("float32", "int64"), ("int64", "int64"), ("float16", "int32"), ("float64", "float32"),
                                 ("float32", "float64")])
def test_ldexp_like_torch(x, e):
    tx = torch.tensor([1, -3, 0, 7], dtype=getattr(torch, x))
    te = torch.tensor([3, -2, 5, 0], dtype=getattr(torch, e))
    kx, ke = _k(tx), _k(te)
    _eq(kiln.ldexp(kx, ke), torch.ldexp(tx, te))
    _eq(kx.ldexp(ke), tx.ldexp(te))
    if x.startswith("float") and not e.startswith("float64"):
        kk, tt = kx.clone(), tx.clone()
        kk.ldexp_(ke), tt.ldexp_(te)
        _eq(kk, tt)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_frexp_like_torch(dtype):
    vals = SPECIAL + [2.0 ** k for k in range(-20, 21, 3)] + [np.nextafter(2.0 ** k, 0) for k in range(-5, 6)]
    t = torch.tensor(vals, dtype=torch.float64).to(getattr(torch, dtype))
    if dtype == "float32":  # float32's subnormals and largest values
        t = torch.cat([t, torch.tensor([1e-45, 1.1754942e-38, 3.4028235e38], dtype=torch.float32)])
    k = _k(t)
    km, ke = kiln.frexp(k)
    tm, te = torch.frexp(t)
    _eq(km, tm)
    _eq(ke, te)
    assert ke.dtype == kiln.int32
    km2, ke2 = k.frexp()
    _eq(km2, tm)
    for lib in (torch, kiln):
        with pytest.raises(RuntimeError, match="only supports floating-point dtypes"):
            lib.frexp(lib.tensor([1, 2]))


def test_isreal_dist_positive_like_torch():
    c = torch.tensor([1 + 0j, 2 + 1j, -0.0 + 0j, float("nan") + 0j])
    _eq(kiln.isreal(_k(c)), torch.isreal(c))
    for t in (torch.tensor([1, 2]), torch.tensor([1.5, float("nan")])):
        _eq(kiln.isreal(_k(t)), torch.isreal(t))
    a, b = torch.randn(3, 4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    for p in (2, 1, 0, 3.5, float("inf"), float("-inf")):
        _eq(kiln.dist(_k(a), _k(b), p), torch.dist(a, b, p), 1e-14)
        _eq(_k(a).dist(_k(b), p), a.dist(b, p), 1e-14)
    i = torch.tensor([1, 2])
    _eq(kiln.positive(_k(i)), torch.positive(i))
    _eq(_k(a).positive(), a.positive())
    for lib in (torch, kiln):
        with pytest.raises(RuntimeError, match="on a bool tensor is not supported"):
            lib.positive(lib.tensor([True]))
        with pytest.raises(RuntimeError):
            lib.dist(lib.tensor([1, 2]), lib.tensor([1, 2]))


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("p,dim,maxnorm", [(2, 0, 5.0), (1, 1, 10.0), (3.5, -1, 1.0), (2, 0, 0.0), (2, 1, 100.0)])
def test_renorm_like_torch(dtype, p, dim, maxnorm):
    a = np.random.default_rng(0).standard_normal((3, 4, 2)) * 4
    t = torch.tensor(a, dtype=getattr(torch, dtype))
    if dtype.startswith("complex"):
        t = t * (1 - 0.5j)
    k = _k(t)
    rtol = 1e-6 if dtype != "float64" else 1e-13
    _eq(kiln.renorm(k, p, dim, maxnorm), torch.renorm(t, p, dim, maxnorm), rtol)
    _eq(k.renorm(p, dim, maxnorm), t.renorm(p, dim, maxnorm), rtol)
    kk, tt = k.clone(), t.clone()
    kk.renorm_(p, dim, maxnorm), tt.renorm_(p, dim, maxnorm)
    _eq(kk, tt, rtol)
    if dtype == "float64":
        kg, tg = k.clone().requires_grad_(), t.clone().requires_grad_()
        kiln.renorm(kg, p, dim, maxnorm).pow(2).sum().backward()
        torch.renorm(tg, p, dim, maxnorm).pow(2).sum().backward()
        np.testing.assert_allclose(kg.grad.numpy(), tg.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_renorm_errors_like_torch(lib):
    x = lib.ones(2, 2)
    with pytest.raises(RuntimeError, match="non-positive-norm not supported"):
        lib.renorm(x, -1, 0, 5)
    with pytest.raises(RuntimeError, match="expected maxnorm to be >= 0"):
        lib.renorm(x, 2, 0, -1)
    with pytest.raises(RuntimeError, match="input needs at least 2 dimensions, got 1 dimensions"):
        lib.renorm(lib.ones(3), 2, 0, 1)
    with pytest.raises(RuntimeError):
        lib.renorm(lib.ones(2, 2, dtype=lib.int64), 2, 0, 1)
