"""lp_pool1d/2d/3d, max_unpool1d/2d/3d, channel_shuffle, alpha_dropout, feature_alpha_dropout, rrelu, the
in-place activations (F.relu_(...), F.elu(..., inplace=True), ...) and their modules, against torch 2.13."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import kiln
from helpers import assert_same as _check, same_with_grad as same, seeded_randn as rnd
from helpers import to_kiln as _k, to_kiln_tree as _conv
import kiln.nn.functional as KF


# ---- lp_pool ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("norm_type", [2, 1, 3.0, 0.5, float("inf"), -float("inf")])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_lp_pool_like_torch(norm_type, ceil_mode):
    x1, x2, x3 = rnd(2, 3, 9).abs() + 0.1, rnd(2, 3, 7, 8).abs() + 0.1, rnd(1, 2, 5, 6, 7).abs() + 0.1
    g = (0,) if not np.isinf(norm_type) else ()
    same(lambda L, x: L.nn.functional.lp_pool1d(x, norm_type, 3, ceil_mode=ceil_mode), x1, grad=g)
    same(lambda L, x: L.nn.functional.lp_pool1d(x, norm_type, 3, 2, ceil_mode), x1, grad=g)
    same(lambda L, x: L.nn.functional.lp_pool2d(x, norm_type, (3, 2), ceil_mode=ceil_mode), x2, grad=g)
    same(lambda L, x: L.nn.functional.lp_pool2d(x, norm_type, 3, (2, 1), ceil_mode), x2, grad=g)
    same(lambda L, x: L.nn.functional.lp_pool3d(x, norm_type, 2, ceil_mode=ceil_mode), x3, grad=g)
    same(lambda L, x: L.nn.functional.lp_pool3d(x, norm_type, (2, 3, 2), (1, 2, 3), ceil_mode), x3, grad=g)
    same(lambda L, x: L.nn.functional.lp_pool2d(x, norm_type, 2), x2[0])  # unbatched
    same(lambda L, x: L.nn.LPPool2d(norm_type, 2, ceil_mode=ceil_mode)(x), x2)


def test_lp_pool_signs_and_errors():
    x = rnd(1, 2, 8)  # negative values: x^p of odd p is negative; torch's sign * relu(|out|) keeps it
    same(lambda L, x: L.nn.functional.lp_pool1d(x, 3, 2), x, grad=(0,))
    same(lambda L, x: L.nn.functional.lp_pool1d(x, 2, 2), x, grad=(0,))
    same(lambda L, x: L.nn.functional.lp_pool1d(x, 2, 2), torch.zeros(1, 1, 4), grad=(0,))  # zero windows
    same(lambda L, x: L.nn.functional.lp_pool2d(x, 2, 3), rnd(1, 1, 2, 2))  # window larger than input
    same(lambda L, x: L.nn.functional.lp_pool2d(x, 2, (2, 2, 2)), rnd(1, 1, 4, 4))
    same(lambda L, x: L.nn.functional.lp_pool1d(x, 2, 0), x)
    same(lambda L, x: L.nn.functional.lp_pool1d(x, 0, 2), x)  # ZeroDivisionError
    same(lambda L, x: L.nn.functional.lp_pool2d(x, 2, 2), rnd(1, 1, 4, 4, dtype=torch.float64), grad=(0,))


def test_lp_pool_module_repr():
    for lib in (torch, kiln):
        assert repr(lib.nn.LPPool1d(2, 3, 2)) == "LPPool1d(norm_type=2, kernel_size=3, stride=2, ceil_mode=False)"
        assert repr(lib.nn.LPPool2d(1.5, (2, 3))) == ("LPPool2d(norm_type=1.5, kernel_size=(2, 3), stride=None, "
                                                      "ceil_mode=False)")


# ---- max_unpool -------------------------------------------------------------------------------------
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("cfg", [dict(k=2), dict(k=3, s=2, p=1), dict(k=2, s=1)])
def test_max_unpool_roundtrip_like_torch(nd, cfg):
    shape = {1: (2, 3, 9), 2: (2, 3, 7, 6), 3: (1, 2, 5, 6, 5)}[nd]
    x = rnd(*shape)
    k, s, p = cfg["k"], cfg.get("s"), cfg.get("p", 0)
    pool = getattr(TF, f"max_pool{nd}d")
    y, idx = pool(x, k, s, p, return_indices=True)
    unpool = f"max_unpool{nd}d"
    same(lambda L, y, i: getattr(L.nn.functional, unpool)(y, i, k, s, p), y, idx, grad=(0,))
    same(lambda L, y, i: getattr(L.nn.functional, unpool)(y, i, k, s, p, output_size=x.shape), y, idx, grad=(0,))
    same(lambda L, y, i: getattr(L.nn.functional, unpool)(y, i, k, s, p, output_size=x.shape[2:]), y, idx)
    same(lambda L, y, i: getattr(L.nn.functional, unpool)(y, i, k, s, p), y[0], idx[0], grad=(0,))  # unbatched
    cls = f"MaxUnpool{nd}d"
    same(lambda L, y, i: getattr(L.nn, cls)(k, s, p)(y, i), y, idx)
    same(lambda L, y, i: getattr(L.nn, cls)(k, s, p)(y, i, output_size=list(x.shape)), y, idx)


def test_max_unpool_errors():
    x = rnd(1, 2, 6, 6)
    y, idx = TF.max_pool2d(x, 2, return_indices=True)
    f = lambda L, y, i, **kw: L.nn.functional.max_unpool2d(y, i, 2, **kw)  # noqa: E731
    same(f, y, idx.int())  # int32 indices
    same(f, y, idx[..., :2])  # shape mismatch
    same(f, y, idx * 100)  # index past the output plane
    same(f, y, idx - 100)
    same(f, y, idx, output_size=(9, 9))  # ValueError: beyond a stride of the default
    same(f, y, idx, output_size=(7, 7))
    same(f, y, idx, output_size=(1, 2, 3))
    same(f, y[:, :0], idx[:, :0])  # empty channel dim
    same(f, y[:0], idx[:0])  # empty batch: fine
    same(lambda L, y, i: L.nn.functional.max_unpool2d(y, i, 2), rnd(6, 6), torch.zeros(6, 6, dtype=torch.int64))
    same(lambda L, y, i: L.nn.functional.max_unpool3d(y, i, 2, stride=0), rnd(1, 1, 2, 2, 2),
         torch.zeros(1, 1, 2, 2, 2, dtype=torch.int64))
    for dt in (torch.int32, torch.int64, torch.complex64):
        same(f, y.to(dt), idx)  # NotImplementedError
    with torch.autocast("cpu", dtype=torch.bfloat16), kiln.autocast("cpu", dtype=kiln.bfloat16):
        same(f, y.bfloat16(), idx)  # float32 under autocast, as torch
    y1, i1 = TF.max_pool1d(rnd(1, 2, 8), 2, return_indices=True)
    same(lambda L, y, i: L.nn.functional.max_unpool1d(y, i, 2), y1, i1 * 10)


def test_max_unpool_module_repr():
    for lib in (torch, kiln):
        assert repr(lib.nn.MaxUnpool2d(2)) == "MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))"
        assert repr(lib.nn.MaxUnpool1d(3, 2, 1)) == "MaxUnpool1d(kernel_size=(3,), stride=(2,), padding=(1,))"


# ---- channel_shuffle ------------------------------------------------------------------------------------
def test_channel_shuffle_like_torch():
    for shape, g in [((2, 6, 3, 3), 3), ((2, 6, 3), 2), ((1, 8, 1, 1, 1), 4), ((0, 6, 2), 3), ((2, 6, 2), 6)]:
        x = rnd(*shape)
        same(lambda L, x: L.channel_shuffle(x, g), x, grad=(0,) if x.numel() else ())
        same(lambda L, x: L.nn.functional.channel_shuffle(x, g), x)
        same(lambda L, x: L.native_channel_shuffle(x, g), x)
        same(lambda L, x: L.nn.ChannelShuffle(g)(x), x)
    same(lambda L, x: L.channel_shuffle(x, 4), rnd(2, 6, 3))
    same(lambda L, x: L.channel_shuffle(x, 0), rnd(2, 6, 3))
    same(lambda L, x: L.channel_shuffle(x, 2), rnd(2, 6))
    same(lambda L, x: L.channel_shuffle(x, 2), torch.arange(24).reshape(2, 6, 2))
    assert repr(kiln.nn.ChannelShuffle(2)) == repr(torch.nn.ChannelShuffle(2))
    for g in (1, 6):  # a new contiguous tensor even where the shuffle moves nothing, as torch's
        k = _k(rnd(2, 6, 3).transpose(1, 2).contiguous()).transpose(1, 2)
        y = kiln.channel_shuffle(k, g)
        before = k.numpy().copy()
        y.add_(100)
        np.testing.assert_array_equal(k.numpy(), before)
        assert y.is_contiguous()


# ---- alpha dropout ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("feature", [False, True])
def test_alpha_dropout_keeps_selu_statistics(feature):
    fn = KF.feature_alpha_dropout if feature else KF.alpha_dropout
    kiln.manual_seed(0)
    x = kiln.randn(64, 64, 8, 8) if feature else kiln.randn(1 << 20)
    p = 0.3
    y = fn(x, p, training=True)
    alpha = 1.7580993408473766
    a = (1 / ((alpha * alpha * p + 1) * (1 - p))) ** 0.5
    b = alpha * a * p
    xs, ys = x.numpy().ravel(), y.numpy().ravel()
    kept = np.isclose(ys, a * xs + b, rtol=1e-5, atol=1e-6)
    dropped = np.isclose(ys, -alpha * a + b, rtol=1e-5, atol=1e-6)
    assert np.all(kept | dropped)
    assert abs(dropped.mean() - p) < 0.02
    # unit mean / variance in, unit mean / variance out (the point of alpha dropout)
    assert abs(ys.mean()) < 0.05 and abs(ys.std() - 1) < 0.05
    if feature:  # a whole channel is kept or dropped
        assert np.all(kept.reshape(64, 64, 64).all(-1) | dropped.reshape(64, 64, 64).all(-1))


@pytest.mark.parametrize("name", ["alpha_dropout", "feature_alpha_dropout"])
def test_alpha_dropout_like_torch_where_deterministic(name):
    x = rnd(4, 3, 5)
    for lib_kw in [dict(p=0.5, training=False), dict(p=0.0, training=True), dict(p=1.0, training=True)]:
        same(lambda L, x: getattr(L.nn.functional, name)(x, **lib_kw), x, grad=(0,))
    same(lambda L, x: getattr(L.nn.functional, name)(x, 1.5, True), x)  # ValueError
    same(lambda L, x: getattr(L, name)(x, 1.5, True), x)  # RuntimeError
    same(lambda L, x: getattr(L, name)(x, 0.5, True), torch.arange(6).reshape(2, 3))
    same(lambda L, x: getattr(L, name)(x, 0.5, True), torch.zeros(0, 3))
    if name == "feature_alpha_dropout":
        same(lambda L, x: L.feature_alpha_dropout(x, 0.5, True), rnd(5))
    x = rnd(8, 8)
    k = _k(x)
    r = getattr(KF, name)(k, 0.4, True, inplace=True)
    assert r is k and not np.array_equal(k.numpy(), x.numpy())
    for lib in (torch, kiln):
        cls = "AlphaDropout" if name == "alpha_dropout" else "FeatureAlphaDropout"
        assert repr(getattr(lib.nn, cls)(0.2)) == f"{cls}(p=0.2, inplace=False)"
        m = getattr(lib.nn, cls)(0.3).eval()
        assert m(lib.ones(3, 2)).sum().item() == 6.0


def test_alpha_dropout_gradient_is_the_scale():
    kiln.manual_seed(1)
    x = kiln.randn(1000, requires_grad=True)
    y = KF.alpha_dropout(x, 0.25, True)
    y.sum().backward()
    alpha = 1.7580993408473766
    a = (1 / ((alpha * alpha * 0.25 + 1) * 0.75)) ** 0.5
    g = x.grad.numpy()
    assert np.all(np.isclose(g, 0.0) | np.isclose(g, a, rtol=1e-6))


# ---- rrelu -----------------------------------------------------------------------------------------------
def test_rrelu_eval_like_torch():
    x = torch.tensor([-3.0, -0.5, -0.0, 0.0, 0.25, 4.0, float("nan"), -float("inf")])
    for lo, hi in [(1 / 8, 1 / 3), (0.1, 0.1), (0.0, 0.9)]:
        same(lambda L, x: L.nn.functional.rrelu(x, lo, hi), x, grad=(0,))
        same(lambda L, x: L.rrelu(x, lo, hi, False), x)
        same(lambda L, x: L.nn.RReLU(lo, hi).eval()(x), x)
    same(lambda L, x: L.rrelu(x, 0.5, 0.2, True), x)
    same(lambda L, x: L.rrelu(x, 0.5, 0.2, False), x)
    same(lambda L, x: L.rrelu(x, training=True), x.half())
    same(lambda L, x: L.rrelu(x), torch.arange(3))
    same(lambda L, x: L.rrelu(x, training=True), torch.arange(3))
    for lib in (torch, kiln):
        assert repr(lib.nn.RReLU()) == "RReLU(lower=0.125, upper=0.3333333333333333)"
        assert repr(lib.nn.RReLU(0.1, 0.3, inplace=True)) == "RReLU(lower=0.1, upper=0.3, inplace=True)"


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.bfloat16])
def test_rrelu_training_draws_slopes(dtype):
    kiln.manual_seed(3)
    x = kiln.randn(20000).to(dtype).requires_grad_(True)
    y = KF.rrelu(x, 0.1, 0.3, training=True)
    assert y.dtype == dtype
    y.sum().backward()
    xs, ys = x.detach().to(kiln.float64).numpy(), y.detach().to(kiln.float64).numpy()
    g = x.grad.to(kiln.float64).numpy()
    pos = xs > 0
    np.testing.assert_array_equal(ys[pos], xs[pos])
    np.testing.assert_array_equal(g[pos], 1.0)
    slopes = g[~pos]  # the gradient is the drawn slope, and the output is x times it
    tol = 1e-2 if dtype == kiln.bfloat16 else 1e-6
    assert slopes.min() >= 0.1 - tol and slopes.max() <= 0.3 + tol
    assert abs(slopes.mean() - 0.2) < 0.005
    np.testing.assert_allclose(ys[~pos], xs[~pos] * slopes, rtol=tol * 2, atol=1e-30)
    gen = kiln.Generator().manual_seed(5)
    a = kiln.rrelu(kiln.full((5,), -1.0), training=True, generator=gen)
    gen.manual_seed(5)
    b = kiln.rrelu(kiln.full((5,), -1.0), training=True, generator=gen)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


# ---- in-place activations ---------------------------------------------------------------------------------
INPLACE = [("relu", ()), ("relu6", ()), ("elu", (0.7,)), ("selu", ()), ("celu", (1.3,)), ("leaky_relu", (0.2,)),
           ("hardtanh", (-0.5, 0.75)), ("silu", ()), ("mish", ()), ("hardsigmoid", ()), ("hardswish", ())]


@pytest.mark.parametrize("name,args", INPLACE)
def test_inplace_activations_like_torch(name, args):
    x = torch.tensor([-3.0, -0.5, -0.0, 0.0, 0.25, 0.9, 4.0])

    def via_kwarg(L, x):
        y = x * 1  # a non-leaf: in-place on a leaf that requires grad is refused, as torch
        r = getattr(L.nn.functional, name)(y, *args, inplace=True)
        assert r is y
        return r

    same(via_kwarg, x, grad=(0,))
    if hasattr(TF, name + "_"):
        def via_underscore(L, x):
            y = x * 1
            r = getattr(L.nn.functional, name + "_")(y, *args)
            assert r is y
            return r
        same(via_underscore, x, grad=(0,))
    same(lambda L, x: getattr(L.nn.functional, name)(x, *args, inplace=False), x, grad=(0,))
    leaf = _k(x).requires_grad_(True)
    with pytest.raises(RuntimeError):
        getattr(KF, name)(leaf, *args, inplace=True)


def test_top_level_inplace_activations():
    x = torch.tensor([-2.0, -0.5, 0.5, 3.0])
    for name, args in [("relu_", ()), ("celu_", (0.5,)), ("selu_", ()), ("threshold_", (0.4, -7.0))]:
        t, k = x.clone(), _k(x)
        _check(getattr(kiln, name)(k, *args), getattr(torch, name)(t, *args))
        _check(k, t)
    k = _k(x)
    assert kiln.rrelu_(k) is k
    _check(k, torch.rrelu(x))
    t, k = x.clone(), _k(x)
    _check(KF.threshold_(k, 0.0, 9.0), TF.threshold_(t, 0.0, 9.0))


# ---- upsampling ----------------------------------------------------------------------------------------
def test_upsampling_modules_and_deprecated_functions():
    x = rnd(1, 2, 3, 4)
    same(lambda L, x: L.nn.UpsamplingNearest2d(scale_factor=2)(x), x, grad=(0,))
    same(lambda L, x: L.nn.UpsamplingNearest2d(size=(5, 7))(x), x)
    same(lambda L, x: L.nn.UpsamplingBilinear2d(scale_factor=2)(x), x, grad=(0,))
    same(lambda L, x: L.nn.UpsamplingBilinear2d((6, 5))(x), x)
    for lib in (torch, kiln):
        want = "UpsamplingNearest2d(scale_factor=2.0, mode='nearest')"
        assert repr(lib.nn.UpsamplingNearest2d(scale_factor=2)) == want
        assert repr(lib.nn.UpsamplingBilinear2d(size=4)) == "UpsamplingBilinear2d(size=4, mode='bilinear')"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same(lambda L, x: L.nn.functional.upsample_nearest(x, scale_factor=2), x)
        same(lambda L, x: L.nn.functional.upsample_bilinear(x, (5, 6)), x)
    for fn in ("upsample_nearest", "upsample_bilinear", "upsample"):
        with pytest.warns(UserWarning, match="deprecated"):
            getattr(KF, fn)(_k(x), scale_factor=2)


# ---- pdist ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, 0.5, 3.0, float("inf")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pdist_like_torch(p, dtype):
    x = rnd(7, 4, dtype=dtype)
    same(lambda L, x: L.pdist(x, p), x, grad=(0,))
    same(lambda L, x: L.nn.functional.pdist(x.t().contiguous().t()[1:, :3], p), x, grad=(0,))  # strided
    # ties and zero distances: torch's pdist gradient (0 at a zero distance; for p = inf every tied
    # coordinate gets the whole gradient), not the norm's
    t = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0], [2.0, -1.0, 0.0]], dtype=dtype)
    same(lambda L, x: L.pdist(x, p), t, grad=(0,))


def test_pdist_special_values_and_double_backward():
    for rows in ([[float("inf"), 0.0], [0.0, 0.0]], [[1e30, 0.0], [0.0, 0.0], [1.0, 1.0]], [[1e-45, 0.0], [0.0, 0.0]]):
        for p in (2.0, 3.0, 0.1, 1.0, float("inf")):
            t = torch.tensor(rows)
            want = torch.pdist(t.clone().requires_grad_(True), p)
            got = kiln.pdist(_k(t).requires_grad_(True), p)
            _check(got, want)  # values, with the input requiring grad (inf stays inf)
    x = rnd(5, 3)
    k = _k(x).requires_grad_(True)
    (g,) = kiln.autograd.grad(kiln.pdist(k).sum(), k, create_graph=True)
    with pytest.raises(NotImplementedError):  # torch: "the derivative for '_pdist_backward' is not implemented"
        (g * g).sum().backward()
    big = kiln.randn(600, 64)  # one row at a time: no (N (N - 1) / 2, M) difference matrix
    assert kiln.pdist(big).shape == (600 * 599 // 2,)


def test_pdist_shapes_and_errors():
    for shape in [(1, 3), (0, 3), (4, 0), (2, 1)]:
        same(lambda L, x: L.pdist(x), rnd(*shape), grad=(0,) if shape[0] > 1 and shape[1] > 0 else ())
    same(lambda L, x: L.pdist(x), rnd(2, 3, 4))
    same(lambda L, x: L.pdist(x), rnd(4))
    same(lambda L, x: L.pdist(x, -1.0), rnd(4, 3))
    same(lambda L, x: L.pdist(x), torch.ones(3, 2, dtype=torch.int64))
    same(lambda L, x: L.pdist(x), rnd(3, 2, dtype=torch.float16))
    same(lambda L, x: L.pdist(x), rnd(3, 2, dtype=torch.complex64))
