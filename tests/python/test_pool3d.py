"""3-d pooling (max_pool3d, avg_pool3d, adaptive_avg_pool3d) and adaptive max pooling (1-, 2- and 3-d)
with their modules vs torch: values and indices over kernel / stride / padding / dilation / ceil_mode
combinations, NaN propagation, unbatched and strided inputs, dtypes, gradients through kiln's autograd
(double backward too), None entries of output_size, reprs and torch's exceptions."""
import pytest
import torch
import torch.nn.functional as TF

import kiln
import kiln.nn.functional as KF
from helpers import assert_same, check, make, to_kiln

FN = {torch: TF, kiln: KF}


def rand(shape, dtype="float64", seed=0, **kw):
    return make(shape, dtype, low=-1.0, high=1.0, seed=seed, **kw)


def grads_match(f, x, double=False):
    """forward, d<f(x), gy>/dx and (double) d<that, v>/d(gy) in both libraries."""
    res = {}
    for lib in (torch, kiln):
        conv = (lambda t: t) if lib is torch else to_kiln  # noqa: E731
        xi = conv(x).detach().clone().requires_grad_()
        y = f(lib, xi)
        y = y[0] if isinstance(y, tuple) else y
        gy = conv(rand(tuple(y.shape), seed=5)).requires_grad_(double)
        (gx,) = lib.autograd.grad(y, xi, gy, create_graph=double)
        out = [y.detach(), gx.detach()]
        if double:
            out += list(lib.autograd.grad((gx * conv(rand(tuple(x.shape), seed=6))).sum(), gy))
        res[lib] = out
    for k, t in zip(res[kiln], res[torch]):
        assert_same(k, t, rtol=1e-9, atol=1e-9)


MAXPOOL3D = [
    dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1), dict(kernel_size=(1, 2, 3), stride=(1, 2, 1)),
    dict(kernel_size=3, stride=2, padding=1, dilation=2), dict(kernel_size=2, ceil_mode=True, stride=2),
    dict(kernel_size=(3, 2, 2), stride=2, padding=(1, 0, 1), ceil_mode=True),
]


@pytest.mark.parametrize("kw", MAXPOOL3D)
def test_max_pool3d(kw):
    x = rand((2, 3, 7, 6, 5), special=True)
    check(lambda m, x: FN[m].max_pool3d(x, **kw, return_indices=True), x)
    grads_match(lambda m, x: FN[m].max_pool3d(x, **kw), rand((2, 3, 7, 6, 5)))


AVGPOOL3D = [
    dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1), dict(kernel_size=3, stride=1, padding=1, count_include_pad=False),
    dict(kernel_size=(1, 2, 3), stride=(1, 2, 1), padding=(0, 1, 1)), dict(kernel_size=2, ceil_mode=True, stride=2, padding=1),
    dict(kernel_size=3, stride=2, divisor_override=5), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
]


@pytest.mark.parametrize("kw", AVGPOOL3D)
def test_avg_pool3d(kw):
    x = rand((2, 3, 7, 6, 5))
    check(lambda m, x: FN[m].avg_pool3d(x, **kw), x)
    grads_match(lambda m, x: FN[m].avg_pool3d(x, **kw), x, double=True)


@pytest.mark.parametrize("out", [1, 2, (3, 4, 2), (None, 2, None), (5, 7, 3), (1, 1, 9)])
def test_adaptive_avg_pool3d(out):
    x = rand((2, 3, 5, 6, 7))
    check(lambda m, x: FN[m].adaptive_avg_pool3d(x, out), x)
    grads_match(lambda m, x: FN[m].adaptive_avg_pool3d(x, out), x, double=True)


@pytest.mark.parametrize("n,out", [(1, 3), (1, 7), (1, 1), (2, 2), (2, (3, 5)), (2, (None, 4)), (2, (7, 11)),
                                   (3, 2), (3, (2, 3, 4)), (3, (None, 1, 6))])
def test_adaptive_max_pool(n, out):
    shape = (2, 3, 5, 6, 7)[: 2 + n]
    fname = f"adaptive_max_pool{n}d"
    check(lambda m, x: getattr(FN[m], fname)(x, out, return_indices=True), rand(shape, special=True))
    grads_match(lambda m, x: getattr(FN[m], fname)(x, out), rand(shape), double=True)


def test_layouts_and_unbatched():
    xs = rand((2, 3, 12, 6, 10))[:, :, ::2, :, ::2]
    check(lambda m, x: FN[m].max_pool3d(x, 2, return_indices=True), xs)
    check(lambda m, x: FN[m].avg_pool3d(x, 2), xs)
    check(lambda m, x: FN[m].max_pool3d(x, 2), xs[0])                          # unbatched
    check(lambda m, x: FN[m].adaptive_avg_pool3d(x, 2), xs[0])
    check(lambda m, x: FN[m].adaptive_max_pool2d(x, 3, return_indices=True), rand((3, 7, 5)))
    check(lambda m, x: FN[m].adaptive_max_pool1d(x, 2), rand((0, 3, 5)))        # empty batch


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64"])
def test_dtypes(dtype):
    x = make((1, 2, 4, 5, 6), dtype, -5, 5)
    tol = dict(exact=True) if dtype == "int64" else dict(rtol=1e-2, atol=1e-2)
    check(lambda m, x: FN[m].max_pool3d(x, 2, return_indices=True), x, **tol)
    if dtype in ("float16", "bfloat16"):  # torch's avg_pool3d has no such kernel; kiln's runs in float32
        assert_same(KF.avg_pool3d(to_kiln(x), 2), TF.avg_pool3d(x.double(), 2).to(x.dtype), **tol)
    else:
        check(lambda m, x: FN[m].avg_pool3d(x, 2), x, **tol)
    check(lambda m, x: FN[m].adaptive_avg_pool3d(x, 3), x, **tol)
    check(lambda m, x: FN[m].adaptive_max_pool3d(x, 3, return_indices=True), x, **tol)
    check(lambda m, x: FN[m].adaptive_max_pool2d(x, 3), x[0], **tol)


def test_modules_match_torch():
    x = rand((2, 3, 6, 7, 8))
    for name, args, kw in [("MaxPool3d", (3,), dict(stride=2, padding=1)), ("MaxPool3d", (2,), dict(return_indices=True)),
                           ("AvgPool3d", ((2, 3, 2),), dict(stride=1, ceil_mode=True)),
                           ("AvgPool3d", (3,), dict(padding=1, count_include_pad=False, divisor_override=4)),
                           ("AdaptiveAvgPool3d", ((2, None, 3),), {}), ("AdaptiveAvgPool3d", (4,), {}),
                           ("AdaptiveMaxPool3d", (3,), dict(return_indices=True)),
                           ("AdaptiveMaxPool2d", ((None, 3),), {}), ("AdaptiveMaxPool1d", (5,), dict(return_indices=True))]:
        tm, km = getattr(torch.nn, name)(*args, **kw), getattr(kiln.nn, name)(*args, **kw)
        assert repr(km) == repr(tm), name
        n = 3 if "3d" in name else 2 if "2d" in name else 1
        xi = x.reshape(2, 3, 6, 56)[..., 0] if n == 1 else x[:, :, 0] if n == 2 else x
        kr, tr = km(to_kiln(xi)), tm(xi)
        if isinstance(tr, tuple):
            for k, t in zip(kr, tr):
                assert_same(k, t)
        else:
            assert_same(kr, tr)


def test_errors():
    x = rand((1, 2, 4, 4, 4))
    check(lambda m, x: FN[m].max_pool3d(x, 2, padding=2), x)            # pad more than half the kernel
    check(lambda m, x: FN[m].max_pool3d(x, (2, 2)), x)                   # two kernel sizes
    check(lambda m, x: FN[m].max_pool3d(x, 5), x)                        # output too small
    check(lambda m, x: FN[m].max_pool3d(x, 2, stride=0), x)
    check(lambda m, x: FN[m].max_pool3d(x, 2), x[0, 0])                  # 3-d input
    check(lambda m, x: FN[m].avg_pool3d(x, 2, divisor_override=0), x)
    check(lambda m, x: FN[m].avg_pool3d(x, 2), x[0, 0])
    check(lambda m, x: FN[m].adaptive_avg_pool3d(x, (2, 2)), x)
    check(lambda m, x: FN[m].adaptive_avg_pool3d(x, 2), x[0, 0])
    check(lambda m, x: FN[m].adaptive_max_pool2d(x, 2), x)               # 5-d input
    check(lambda m, x: FN[m].adaptive_max_pool2d(x, -1), x[0])
    check(lambda m, x: FN[m].adaptive_max_pool3d(x, 2), rand((1, 2, 0, 4, 4)))
