"""F.interpolate's modes beyond nearest / linear / bilinear vs torch: nearest and nearest-exact on 1-3
spatial dims, trilinear, bicubic (align_corners both ways, scale factors given or recomputed), area;
gradients through kiln's autograd with double backward, float32 / bfloat16 / uint8, the Upsample module,
and torch's exceptions."""
import pytest
import torch
import torch.nn.functional as TF

import kiln
import kiln.nn.functional as KF
from helpers import assert_same, check, make, to_kiln

FN = {torch: TF, kiln: KF}


def rand(shape, dtype="float64", seed=0):
    return make(shape, dtype, low=-1.0, high=1.0, seed=seed)


def grads_match(f, x):
    res = {}
    for lib in (torch, kiln):
        conv = (lambda t: t) if lib is torch else to_kiln  # noqa: E731
        xi = conv(x).detach().clone().requires_grad_()
        y = f(lib, xi)
        gy = conv(rand(tuple(y.shape), seed=5)).requires_grad_()
        (gx,) = lib.autograd.grad(y, xi, gy, create_graph=True)
        (ggy,) = lib.autograd.grad((gx * conv(rand(tuple(x.shape), seed=6))).sum(), gy)
        res[lib] = (y.detach(), gx.detach(), ggy)
    for k, t in zip(res[kiln], res[torch]):
        assert_same(k, t, rtol=1e-9, atol=1e-9)


SIZES = [dict(scale_factor=2), dict(scale_factor=0.6), dict(scale_factor=1.7, recompute_scale_factor=True),
         dict(size=5), dict(size=1)]
SHAPES = {3: (2, 3, 6), 4: (2, 3, 5, 6), 5: (1, 2, 4, 5, 3)}


@pytest.mark.parametrize("mode,ndim", [("nearest", 5), ("nearest-exact", 3), ("nearest-exact", 4),
                                       ("nearest-exact", 5), ("trilinear", 5), ("bicubic", 4), ("area", 3),
                                       ("area", 4), ("area", 5)])
@pytest.mark.parametrize("kw", SIZES)
def test_modes(mode, ndim, kw):
    x = rand(SHAPES[ndim])
    for align in ([None, False, True] if mode in ("trilinear", "bicubic") else [None]):
        f = lambda m, x: FN[m].interpolate(x, mode=mode, align_corners=align, **kw)  # noqa: E731
        check(f, x, msg=f"{mode} {kw} {align}")
        grads_match(f, x)


def test_per_dim_sizes_and_scales():
    x = rand((1, 2, 4, 5, 6))
    for mode in ("nearest", "nearest-exact", "trilinear", "area"):
        check(lambda m, x: FN[m].interpolate(x, size=(3, 7, 6), mode=mode), x)
        check(lambda m, x: FN[m].interpolate(x, scale_factor=(1.5, 0.5, 2.0), mode=mode), x)
    check(lambda m, x: FN[m].interpolate(x, size=(9, 3), mode="bicubic", align_corners=True), x[0])
    check(lambda m, x: FN[m].interpolate(x, scale_factor=(2.5, 1.25), mode="bicubic"), x[0])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "uint8"])
def test_dtypes(dtype):
    x = make((1, 2, 4, 5, 6), dtype, 0, 9) if dtype == "uint8" else rand((1, 2, 4, 5, 6), dtype)
    tol = {} if dtype == "uint8" else dict(rtol=2e-2, atol=2e-2) if dtype == "bfloat16" else dict(rtol=1e-5, atol=1e-5)
    check(lambda m, x: FN[m].interpolate(x, scale_factor=2, mode="nearest"), x, **tol)
    check(lambda m, x: FN[m].interpolate(x, scale_factor=1.5, mode="nearest-exact"), x, **tol)
    check(lambda m, x: FN[m].interpolate(x, scale_factor=1.5, mode="trilinear"), x, **tol)
    if dtype == "uint8":  # torch's uint8 bicubic is a fixed-point vector kernel; kiln declines it
        with pytest.raises(NotImplementedError):
            KF.interpolate(to_kiln(x[0]), scale_factor=1.5, mode="bicubic")
        return
    check(lambda m, x: FN[m].interpolate(x, scale_factor=1.5, mode="bicubic"), x[0], **tol)


def test_upsample_module():
    x = rand((1, 2, 3, 4, 5))
    for kw in (dict(scale_factor=2, mode="trilinear"), dict(size=(4, 6, 7), mode="nearest-exact"),
               dict(scale_factor=2.0, mode="bicubic", align_corners=True)):
        tm, km = torch.nn.Upsample(**kw), kiln.nn.Upsample(**kw)
        assert repr(km) == repr(tm)
        xi = x[0] if kw["mode"] == "bicubic" else x
        assert_same(km(to_kiln(xi)), tm(xi), rtol=1e-9, atol=1e-9)


def test_errors():
    x = rand((1, 2, 4, 5))
    check(lambda m, x: FN[m].interpolate(x, scale_factor=2, mode="trilinear"), x)
    check(lambda m, x: FN[m].interpolate(x, scale_factor=2, mode="bicubic"), x[0])
    check(lambda m, x: FN[m].interpolate(x, scale_factor=2, mode="nearest-exact", align_corners=True), x)
    check(lambda m, x: FN[m].interpolate(x, scale_factor=2, mode="area", align_corners=False), x)
    check(lambda m, x: FN[m].interpolate(x, scale_factor=2, mode="lanczos"), x)
    check(lambda m, x: FN[m].interpolate(x, size=(0, 3), mode="bicubic"), x)
    check(lambda m, x: FN[m].interpolate(x, size=(2, 3, 4), mode="nearest-exact"), x)
    check(lambda m, x: FN[m].interpolate(x, scale_factor=2, mode="bogus"), x)
