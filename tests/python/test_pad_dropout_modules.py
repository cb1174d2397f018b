"""The padding modules (ZeroPad / ConstantPad / ReflectionPad / ReplicationPad / CircularPad 1d-3d),
F.dropout1d / 2d / 3d with nn.Dropout1d / 2d / 3d, and nn.BatchNorm3d against torch."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import kiln
import kiln.nn.functional as KF

PADS = [("ZeroPad1d", (2,), (2, 3)), ("ZeroPad1d", ((1, 2),), (2, 3)), ("ZeroPad2d", (1,), (1, 2, 3)),
        ("ZeroPad2d", ((1, 0, 2, -1),), (2, 3, 4)), ("ZeroPad3d", (1,), (1, 2, 2, 3)),
        ("ConstantPad1d", (2, 3.5), (2, 3)), ("ConstantPad2d", ((1, 2, 0, 1), -1), (2, 3, 4)),
        ("ConstantPad3d", ((1, 0, 1, 0, 1, 0), 2), (1, 2, 2, 3)),
        ("ReflectionPad1d", (2,), (2, 3)), ("ReflectionPad1d", ((2, 1),), (1, 2, 5)), ("ReflectionPad2d", (1,), (1, 2, 3, 4)),
        ("ReflectionPad3d", ((1, 0, 1, 1, 0, 1),), (1, 2, 3, 3, 3)),
        ("ReplicationPad1d", ((3, 1),), (2, 3)), ("ReplicationPad2d", (2,), (1, 2, 3)), ("ReplicationPad3d", (1,), (1, 1, 2, 2, 2)),
        ("CircularPad1d", (1,), (2, 3)), ("CircularPad2d", ((1, 2, 0, 1),), (1, 2, 3, 4)), ("CircularPad3d", (1,), (1, 1, 2, 2, 2))]


@pytest.mark.parametrize("name,args,shape", PADS)
def test_padding_modules_like_torch(name, args, shape):
    a = np.random.default_rng(0).standard_normal(shape)
    km, tm = getattr(kiln.nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(km) == repr(tm) and tuple(km.padding) == tuple(tm.padding)
    k, t = kiln.from_numpy(a.copy()).requires_grad_(), torch.from_numpy(a.copy()).requires_grad_()
    got, want = km(k), tm(t)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    w = np.random.default_rng(1).standard_normal(tuple(want.shape))
    got.mul(kiln.from_numpy(w)).sum().backward()
    want.mul(torch.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), rtol=1e-14, atol=1e-14)
    assert not list(km.parameters()) and km.state_dict() == {} or list(km.state_dict()) == list(tm.state_dict())


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_padding_module_errors_like_torch(lib):
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding input dimension"):
        lib.nn.ReflectionPad1d(3)(lib.zeros(2, 3))
    with pytest.raises(RuntimeError, match="Padding length should be less than or equal to two times"):
        lib.nn.ZeroPad2d(1)(lib.zeros(3))
    for name, shape in (("CircularPad1d", (3,)), ("CircularPad2d", (3,)), ("CircularPad3d", (2, 2))):
        with pytest.raises(ValueError, match=r"expected \dD or \dD input"):
            getattr(lib.nn, name)(1)(lib.zeros(shape))


@pytest.mark.parametrize("fn,shape", [("dropout1d", (4, 16, 5)), ("dropout1d", (16, 5)), ("dropout2d", (4, 16, 3, 3)),
                                      ("dropout2d", (4, 16, 5)), ("dropout3d", (2, 16, 2, 2, 2)), ("dropout3d", (16, 2, 2, 2))])
@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_channel_dropout_zeroes_whole_channels(fn, shape, p):
    # the draws differ from torch's: the contract (whole channels 0 or scaled by 1 / (1 - p), about a p
    # share of them zero, shape and dtype kept, identity when not training) is checked on both libraries
    for lib, F in ((torch, TF), (kiln, KF)):
        lib.manual_seed(0)
        x = lib.ones(shape, dtype=lib.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = getattr(F, fn)(x, p, True)
            assert lib.equal(getattr(F, fn)(x, p, False), x)
        assert tuple(y.shape) == tuple(shape) and y.dtype == lib.float64
        unbatched = (fn == "dropout1d" and len(shape) == 2) or (fn == "dropout3d" and len(shape) == 4)
        ch = y.reshape(1 if unbatched else shape[0], shape[1 if not unbatched else 0], -1).double()
        lo, hi = ch.amin(-1), ch.amax(-1)
        assert lib.equal(lo, hi)  # each channel is one value
        scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
        assert lib.all((lo == 0) | (lo == scale)).item()
        if 0 < p < 1:
            assert 0.05 < (lo == 0).double().mean().item() < 0.6


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 6), (5,), (2, 3, 4, 5)])
def test_dropout3d_reads_every_rank_but_5_as_unbatched(shape):
    # torch's rule: the input is a batch of one, so its first dim holds the channels: the mask has one
    # entry per index of that dim (each element of a 1-D input)
    for lib, F in ((torch, TF), (kiln, KF)):
        lib.manual_seed(3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = F.dropout3d(lib.ones(shape, dtype=lib.float64), 0.5, True)
        rows = y.reshape(shape[0], -1)
        assert lib.equal(rows.amin(1), rows.amax(1)) and tuple(y.shape) == shape


@pytest.mark.parametrize("lib,F", [(torch, TF), (kiln, KF)], ids=["torch", "kiln"])
def test_channel_dropout_early_returns_like_torch(lib, F):
    x = lib.ones(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert lib.equal(F.dropout2d(x, 0.5, False), x)  # not training: no rank check
        assert lib.equal(F.dropout2d(x, 0.0, True), x)
        assert lib.equal(F.dropout2d(x, 1.0, True), lib.zeros(5))
        assert F.dropout2d(lib.ones(0, 3), 0.5, True).shape == (0, 3)
    for fn, shape in ((F.dropout1d, (4, 5)), (F.dropout3d, (3, 2, 2, 2))):  # unbatched, in place: input itself
        z = lib.ones(shape)
        assert fn(z, 0.5, True, inplace=True) is z


def test_channel_dropout_gradient_and_inplace():
    kiln.manual_seed(1)
    x = kiln.ones(4, 8, 3, dtype=kiln.float64, requires_grad=True)
    y = KF.dropout1d(x, 0.5, True)
    y.sum().backward()
    assert kiln.equal(x.grad, y.detach())  # the mask times 1 / (1 - p)
    z = kiln.ones(4, 8, 3)
    assert KF.dropout2d(z, 0.5, True, inplace=True) is z
    assert set(z.unique().tolist()) <= {0.0, 2.0}


@pytest.mark.parametrize("lib,F", [(torch, TF), (kiln, KF)], ids=["torch", "kiln"])
def test_channel_dropout_errors_and_warnings_like_torch(lib, F):
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input, but received a 4D input"):
        F.dropout1d(lib.zeros(1, 2, 3, 4))
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        F.dropout2d(lib.zeros(1, 2, 3, 4), 1.5)
    with pytest.raises(ValueError, match="between 0 and 1"):
        lib.nn.Dropout3d(-0.1)
    with pytest.warns(UserWarning, match="assuming that channel-wise 1D dropout behavior is desired"):
        F.dropout2d(lib.zeros(2, 3, 4))
    with pytest.warns(UserWarning, match="Received a 2-D input to dropout3d, which is deprecated"):
        F.dropout3d(lib.zeros(2, 3), training=False)
    for name, p in (("Dropout1d", 0.5), ("Dropout2d", 0.25), ("Dropout3d", 0.0)):
        assert repr(getattr(lib.nn, name)(p)) == repr(getattr(torch.nn, name)(p))


def test_batchnorm3d_like_torch():
    a = np.random.default_rng(2).standard_normal((3, 4, 2, 3, 2))
    km, tm = kiln.nn.BatchNorm3d(4, momentum=0.2).double(), torch.nn.BatchNorm3d(4, momentum=0.2).double()
    assert repr(km) == repr(tm) and list(km.state_dict()) == list(tm.state_dict())
    k, t = kiln.from_numpy(a.copy()).requires_grad_(), torch.from_numpy(a.copy()).requires_grad_()
    got, want = km(k), tm(t)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)
    got.pow(2).sum().backward()
    want.pow(2).sum().backward()
    np.testing.assert_allclose(k.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(km.running_var.numpy(), tm.running_var.numpy(), rtol=1e-12)
    km.eval(), tm.eval()
    np.testing.assert_allclose(km(k).detach().numpy(), tm(t).detach().numpy(), rtol=1e-12, atol=1e-12)
    for lib in (torch, kiln):
        with pytest.raises(ValueError, match=r"expected 5D input \(got 4D input\)"):
            lib.nn.BatchNorm3d(4)(lib.zeros(3, 4, 2, 2))


@pytest.mark.parametrize("lib,F", [(torch, TF), (kiln, KF)], ids=["torch", "kiln"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_dropout_scale_is_the_dtypes_own(lib, F, dtype):
    # kept elements are x * (1 / (1 - p)) in x's dtype (kiln's float64 scale was rounded to float32)
    lib.manual_seed(0)
    d = getattr(lib, dtype)
    y = F.dropout(lib.ones(2000, dtype=d), 0.3, True)
    want = lib.ones((), dtype=d) * (1 / 0.7)
    assert set(y.double().tolist()) == {0.0, want.double().item()}
