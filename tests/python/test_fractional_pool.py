"""F.fractional_max_pool2d / 3d and nn.FractionalMaxPool2d / 3d against torch 2.13, with the same
_random_samples: values and indices in every floating dtype (float16 / bfloat16 place their windows
with their own rounding, as torch), batched and unbatched, output_size and output_ratio, NaN, the
gradient (overlapping windows add), and torch's errors."""
import pytest
import torch
import torch.nn.functional as TF

import kiln
from helpers import assert_same, to_kiln

KF = kiln.nn.functional


def _samples(shape, dtype, seed):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", [
    ((2, 3, 7, 9), 3, dict(output_size=(4, 5))),
    ((2, 3, 7, 9), (2, 3), dict(output_size=(6, 7))),
    ((3, 10, 10), 2, dict(output_size=5)),  # unbatched
    ((2, 2, 12, 11), 3, dict(output_ratio=(0.5, 0.7))),
    ((1, 1, 5, 5), 2, dict(output_size=1)),
    ((2, 3, 7, 9), 3, dict(output_size=(0, 0))),
])
def test_fractional_max_pool2d(dtype, case):
    shape, k, kw = case
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    planes = (1 if len(shape) == 3 else shape[0], shape[-3], 2)
    for seed in range(3):
        s = _samples(planes, dtype, seed)
        ty, ti = TF.fractional_max_pool2d(x, k, return_indices=True, _random_samples=s, **kw)
        ky, ki = KF.fractional_max_pool2d(to_kiln(x), k, return_indices=True, _random_samples=to_kiln(s), **kw)
        assert_same(ki, ti, exact=True)
        assert_same(ky, ty, exact=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_fractional_max_pool3d(dtype):
    for shape, k, kw in (((2, 2, 6, 7, 8), (2, 2, 3), dict(output_size=(3, 4, 3))),
                         ((2, 5, 6, 7), 2, dict(output_size=(2, 3, 4))),
                         ((1, 2, 9, 9, 9), 3, dict(output_ratio=(0.5, 0.5, 0.5)))):
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(1)).to(dtype)
        planes = (1 if len(shape) == 4 else shape[0], shape[-4], 3)
        s = _samples(planes, dtype, 3)
        ty, ti = TF.fractional_max_pool3d(x, k, return_indices=True, _random_samples=s, **kw)
        ky, ki = KF.fractional_max_pool3d(to_kiln(x), k, return_indices=True, _random_samples=to_kiln(s), **kw)
        assert_same(ki, ti, exact=True)
        assert_same(ky, ty, exact=True)


def test_nan_ties_and_gradient():
    x = torch.randint(0, 4, (2, 2, 6, 6)).float()  # many ties: the first maximum in the window wins
    x[0, 0, 1, 1] = float("nan")
    x[1, 1, 2, 3] = float("nan")
    x[1, 1, 3, 3] = float("nan")
    s = _samples((2, 2, 2), torch.float32, 5)
    ty, ti = TF.fractional_max_pool2d(x, 3, output_size=4, return_indices=True, _random_samples=s)
    ky, ki = KF.fractional_max_pool2d(to_kiln(x), 3, output_size=4, return_indices=True, _random_samples=to_kiln(s))
    assert_same(ki, ti, exact=True)
    assert_same(ky, ty, exact=True)
    for D, shape, osz in ((2, (2, 3, 7, 7), 5), (3, (1, 2, 7, 7, 7), 4)):
        xg = torch.randn(*shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
        s = _samples((shape[0], shape[1], D), torch.float64, 8)
        g = torch.randn((shape[0], shape[1]) + (osz,) * D, dtype=torch.float64)
        fn_t, fn_k = getattr(TF, f"fractional_max_pool{D}d"), getattr(KF, f"fractional_max_pool{D}d")
        tx, kx = xg.clone().requires_grad_(), to_kiln(xg).requires_grad_()
        fn_t(tx, 3, output_size=osz, _random_samples=s).backward(g)
        fn_k(kx, 3, output_size=osz, _random_samples=to_kiln(s)).backward(to_kiln(g))
        assert_same(kx.grad, tx.grad, exact=True)  # (overlapping windows: the same picks added in order)
    assert kiln.autograd.gradcheck(lambda t: KF.fractional_max_pool2d(t, 2, output_size=3,
                                                                       _random_samples=kiln.full((1, 1, 2), 0.4,
                                                                                                 dtype=kiln.float64)),
                                   (kiln.randn(1, 1, 5, 5, dtype=kiln.float64).requires_grad_(),))


def test_drawn_samples_and_modules():
    x = kiln.randn(2, 3, 8, 8)
    y, i = KF.fractional_max_pool2d(x, 2, output_ratio=0.5, return_indices=True)
    assert tuple(y.shape) == (2, 3, 4, 4) and i.dtype == kiln.int64
    # the output holds the input's values at the indices
    assert bool(kiln.equal(y, x.flatten(2).gather(2, i.flatten(2)).reshape(y.shape)))
    assert KF.fractional_max_pool2d(x, 2, output_size=3, output_ratio=0.5).shape == (2, 3, 3, 3)  # size wins
    s = torch.rand(1, 3, 2)
    tm = torch.nn.FractionalMaxPool2d(3, output_size=(4, 5), return_indices=True, _random_samples=s)
    km = kiln.nn.FractionalMaxPool2d(3, output_size=(4, 5), return_indices=True, _random_samples=to_kiln(s))
    assert list(km.state_dict()) == list(tm.state_dict()) == ["_random_samples"]
    xt = torch.randn(1, 3, 9, 9)
    for a, b in zip(km(to_kiln(xt)), tm(xt)):
        assert_same(a, b, exact=True)
    assert repr(km) == repr(tm) == "FractionalMaxPool2d()"
    km3 = kiln.nn.FractionalMaxPool3d(2, output_ratio=0.5)
    assert tuple(km3(kiln.randn(1, 2, 6, 6, 6)).shape) == (1, 2, 3, 3, 3)
    assert list(kiln.nn.FractionalMaxPool3d(2, output_ratio=0.5).state_dict()) == []


def test_errors():
    x = torch.randn(2, 3, 7, 9)
    cases = [
        (2, torch.randn(2, 3, 7, 9, 1), 2, dict(output_size=3)),
        (2, x, 2, dict(output_size=3, _random_samples=torch.rand(2, 2, 2))),
        (2, x, 2, dict(output_size=3, _random_samples=torch.rand(2, 3))),
        (2, x, 2, dict(output_size=3, _random_samples=torch.rand(2, 3, 3))),
        (2, x, 2, dict(output_size=3, _random_samples=torch.rand(1, 3, 2))),
        (2, x, 2, dict(output_size=3, _random_samples=torch.rand(2, 3, 2, dtype=torch.float64))),
        (2, x, 8, dict(output_size=3)),
        (2, x, (2, 10), dict(output_size=3)),
        (2, x, 2, dict(output_size=(8, 3))),
        (2, torch.randn(2, 0, 7, 9), 2, dict(output_size=3)),
        (3, torch.randn(2, 3, 4, 5, 6), 2, dict(output_size=(3, 4, 3))),  # (3-D: the span must end early)
        (3, torch.randn(2, 3, 5, 5, 6), 2, dict(output_size=(3, 4, 3))),
        (3, torch.randn(2, 3, 5, 6, 6), 2, dict(output_size=(3, 4, 5))),
        (3, torch.randn(2, 3, 4, 5), 2, dict(output_size=3)),
        (3, torch.randn(2, 0, 4, 5, 6), 2, dict(output_size=3)),
    ]
    for D, t, k, kw in cases:
        kkw = {a: (to_kiln(v) if isinstance(v, torch.Tensor) else v) for a, v in kw.items()}
        with pytest.raises(RuntimeError) as te:
            getattr(TF, f"fractional_max_pool{D}d")(t, k, **kw)
        with pytest.raises(RuntimeError) as ke:
            getattr(KF, f"fractional_max_pool{D}d")(to_kiln(t), k, **kkw)
        assert str(te.value) in str(ke.value), (str(ke.value), str(te.value))
    with pytest.raises(ValueError, match="requires specifying either an output_size or an output_ratio"):
        KF.fractional_max_pool2d(to_kiln(x), 2)
    for kw, msg in ((dict(), "requires specifying either an output size, or a pooling ratio"),
                    (dict(output_size=3, output_ratio=0.5), "only one of output_size and output_ratio"),
                    (dict(output_ratio=1.5), r"output_ratio must be between 0 and 1 \(got 1.5\)"),
                    (dict(output_ratio=0), r"output_ratio must be between 0 and 1 \(got 0\)")):
        for lib in (torch, kiln):
            with pytest.raises(ValueError, match=msg):
                lib.nn.FractionalMaxPool2d(2, **kw)
