"""F.unfold / F.fold and nn.Unfold / nn.Fold vs torch: values over kernel / dilation / padding / stride,
unbatched and strided inputs, dtypes, gradients (each op's derivative is the other) with double
backward, module reprs, and torch's exceptions."""
import pytest
import torch
import torch.nn.functional as TF

import kiln
import kiln.nn.functional as KF
from helpers import assert_same, check, make, to_kiln

FN = {torch: TF, kiln: KF}
CASES = [dict(kernel_size=2), dict(kernel_size=3, padding=1), dict(kernel_size=(2, 3), stride=(2, 1)),
         dict(kernel_size=3, dilation=2, padding=2, stride=2), dict(kernel_size=(1, 4), dilation=(1, 2), padding=(0, 1))]


def rand(shape, dtype="float64", seed=0):
    return make(shape, dtype, low=-1.0, high=1.0, seed=seed)


def grads(f, x, lib):
    xi = (x if lib is torch else to_kiln(x)).detach().clone().requires_grad_()
    y = f(lib, xi)
    gy = rand(tuple(y.shape), seed=3)
    gy = (gy if lib is torch else to_kiln(gy)).requires_grad_()
    (gx,) = lib.autograd.grad(y, xi, gy, create_graph=True)
    w = rand(tuple(x.shape), seed=4)
    (ggy,) = lib.autograd.grad((gx * (w if lib is torch else to_kiln(w))).sum(), gy)
    return y.detach(), gx.detach(), ggy


@pytest.mark.parametrize("kw", CASES)
def test_unfold_and_fold(kw):
    x = rand((2, 3, 7, 8))
    check(lambda m, x: FN[m].unfold(x, **kw), x)
    cols = TF.unfold(x, **kw)
    check(lambda m, c: FN[m].fold(c, (7, 8), **kw), rand(tuple(cols.shape), seed=1))
    for f, inp in ((lambda m, x: FN[m].unfold(x, **kw), x),
                   (lambda m, c: FN[m].fold(c, (7, 8), **kw), rand(tuple(cols.shape), seed=1))):
        for k, t in zip(grads(f, inp, kiln), grads(f, inp, torch)):
            assert_same(k, t, rtol=1e-9, atol=1e-9)


def test_layouts_dtypes_unbatched():
    xs = rand((2, 3, 14, 8))[:, :, ::2]
    check(lambda m, x: FN[m].unfold(x, 2, stride=2), xs)
    check(lambda m, x: FN[m].unfold(x, 3), xs[0])                                  # unbatched
    check(lambda m, c: FN[m].fold(c, (4, 5), 2), rand((12, 12)))                    # unbatched
    check(lambda m, x: FN[m].unfold(x, 2), rand((0, 3, 4, 4)))                      # empty batch
    for dt, tol in (("float32", dict(rtol=1e-6, atol=1e-6)), ("bfloat16", dict(rtol=1e-2, atol=1e-2)),
                    ("float16", dict(rtol=1e-3, atol=1e-3)), ("int64", {})):
        x = make((1, 2, 5, 5), dt, -3, 3)
        check(lambda m, x: FN[m].unfold(x, 2), x, **tol)
        check(lambda m, c: FN[m].fold(c, (5, 5), 2, stride=1), make((1, 8, 16), dt, -3, 3), **tol)


def test_modules():
    for tm, km, shape in ((torch.nn.Unfold(3, padding=1), kiln.nn.Unfold(3, padding=1), (2, 3, 5, 6)),
                          (torch.nn.Unfold((2, 3), dilation=(1, 2), stride=2), kiln.nn.Unfold((2, 3), dilation=(1, 2), stride=2), (1, 2, 6, 9)),
                          (torch.nn.Fold((4, 5), 2), kiln.nn.Fold((4, 5), 2), (2, 12, 12)),
                          (torch.nn.Fold(6, 3, padding=1, stride=2), kiln.nn.Fold(6, 3, padding=1, stride=2), (1, 18, 9))):
        assert repr(km) == repr(tm)
        x = rand(shape)
        assert_same(km(to_kiln(x)), tm(x))


def test_errors():
    x = rand((1, 2, 4, 4))
    check(lambda m, x: FN[m].unfold(x, 5), x)                            # no block fits
    check(lambda m, x: FN[m].unfold(x, 0), x)
    check(lambda m, x: FN[m].unfold(x, 2, stride=0), x)
    check(lambda m, x: FN[m].unfold(x, 2, padding=-1), x)
    check(lambda m, x: FN[m].unfold(x, 2), x[0, 0])                      # 2-d input
    check(lambda m, x: FN[m].unfold(x, 2), rand((1, 2, 0, 4)))
    check(lambda m, c: FN[m].fold(c, (4, 4), 2), rand((1, 7, 9)))       # 7 not divisible by 4
    check(lambda m, c: FN[m].fold(c, (4, 4), 2), rand((1, 8, 8)))       # 8 blocks, 9 expected
    check(lambda m, c: FN[m].fold(c, (1, 4), 2), rand((1, 8, 3)))       # no block fits
    check(lambda m, c: FN[m].fold(c, (4, 4), 2), rand((2, 1, 8, 9)))    # 4-d input
