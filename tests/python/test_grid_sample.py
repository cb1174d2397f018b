"""F.affine_grid, F.grid_sample and F.gumbel_softmax vs torch: grids for 2-d and 3-d transforms with
align_corners both ways; sampling values and gradients (input and grid, with double backward where
torch has one) for every mode x padding_mode x align_corners on 4-d and 5-d inputs, grids reaching
past the border; gumbel_softmax's distribution, hard one-hot with straight-through gradient; torch's
warnings and exceptions."""
import itertools
import warnings

import pytest
import torch
import torch.nn.functional as TF

import kiln
import kiln.nn.functional as KF
from helpers import assert_same, check, make, to_kiln

FN = {torch: TF, kiln: KF}


def rand(shape, dtype="float64", seed=0, low=-1.0, high=1.0):
    return make(shape, dtype, low=low, high=high, seed=seed)


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 1, 1, 3), (2, 2, 3, 4, 5), (1, 1, 2, 1, 3)])
def test_affine_grid(size, align):
    theta = rand((size[0], 2, 3) if len(size) == 4 else (size[0], 3, 4), seed=1)
    check(lambda m, t: FN[m].affine_grid(t, size, align_corners=align), theta)
    res = {}
    for lib in (torch, kiln):
        t = (theta if lib is torch else to_kiln(theta)).clone().requires_grad_()
        g = FN[lib].affine_grid(t, size, align_corners=align)
        w = rand(tuple(g.shape), seed=2)
        (g * (w if lib is torch else to_kiln(w))).sum().backward()
        res[lib] = t.grad
    assert_same(res[kiln], res[torch], rtol=1e-9, atol=1e-9)


MODES = list(itertools.product(["bilinear", "nearest", "bicubic"], ["zeros", "border", "reflection"], [False, True]))


def _sample_matches(x, grid, mode, padding, align):
    """values, then the input's and the grid's gradients of <grid_sample(x, grid), gy>, against torch."""
    f = lambda m, x, g: FN[m].grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align)  # noqa: E731
    check(f, x, grid, rtol=1e-9, atol=1e-9)
    res = {}
    for lib in (torch, kiln):
        conv = (lambda t: t) if lib is torch else to_kiln  # noqa: E731
        xi, gi = conv(x).clone().requires_grad_(), conv(grid).clone().requires_grad_()
        y = f(lib, xi, gi)
        y.backward(conv(rand(tuple(y.shape), seed=3)))
        res[lib] = (xi.grad, gi.grad)
    for k, t in zip(res[kiln], res[torch]):
        assert_same(k, t, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("mode,padding,align", MODES)
def test_grid_sample_2d(mode, padding, align):
    # some points outside [-1, 1]
    _sample_matches(rand((2, 3, 5, 6)), rand((2, 4, 7, 2), seed=1, low=-1.3, high=1.3), mode, padding, align)


@pytest.mark.parametrize("mode,padding,align", [m for m in MODES if m[0] != "bicubic"])
def test_grid_sample_3d(mode, padding, align):
    _sample_matches(rand((1, 2, 4, 5, 3)), rand((1, 3, 2, 4, 3), seed=1, low=-1.3, high=1.3), mode, padding, align)


def test_grid_sample_float32_and_identity():
    x = rand((2, 3, 6, 5), "float32")
    theta = torch.tensor([[[1.0, 0, 0], [0, 1.0, 0]]]).repeat(2, 1, 1)
    for align in (False, True):
        g = TF.affine_grid(theta, (2, 3, 6, 5), align_corners=align)
        check(lambda m, x, g: FN[m].grid_sample(x, g, align_corners=align), x, g, rtol=1e-5, atol=1e-5)
        k = KF.grid_sample(to_kiln(x), KF.affine_grid(to_kiln(theta), (2, 3, 6, 5), align_corners=align),
                           align_corners=align)
        assert_same(k, x, rtol=1e-5, atol=1e-5)  # the identity transform samples the input back


def test_warnings_and_errors():
    x, g = rand((1, 2, 3, 3)), rand((1, 2, 2, 2), seed=1)
    for lib in (torch, kiln):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            FN[lib].grid_sample(x if lib is torch else to_kiln(x), g if lib is torch else to_kiln(g))
        assert any("align_corners=False since 1.3.0" in str(m.message) for m in w)
    f = lambda **kw: (lambda m, x, g: FN[m].grid_sample(x, g, align_corners=False, **kw))  # noqa: E731
    check(f(mode="bogus"), x, g)
    check(f(padding_mode="bogus"), x, g)
    check(f(mode="bicubic"), rand((1, 2, 3, 3, 3)), rand((1, 2, 2, 2, 3)))
    check(f(), x, rand((1, 2, 2, 3)))                  # last grid dim 3 for a 4-d input
    check(f(), x, rand((2, 2, 2, 2)))                  # batch mismatch
    check(f(), x, rand((1, 2, 2)))                     # 3-d grid
    check(f(), x.float(), g)                           # dtype mismatch
    check(lambda m, t: FN[m].affine_grid(t, (1, 2, 3), align_corners=False), rand((1, 2, 3)))
    check(lambda m, t: FN[m].affine_grid(t, (1, 2, 3, 4), align_corners=False), rand((1, 3, 4)))
    check(lambda m, t: FN[m].affine_grid(t, (1, 2, 0, 4), align_corners=False), rand((1, 2, 3)))
    check(lambda m, t: FN[m].affine_grid(t, (1, 2, 3, 4), align_corners=False), make((1, 2, 3), "int64"))


def test_gumbel_softmax():
    logits = kiln.tensor([[1.0, 2.0, 0.5, -1.0]]).repeat(20000, 1)
    kiln.manual_seed(0)
    y = KF.gumbel_softmax(logits, tau=0.5)
    assert float((y.sum(-1) - 1).abs().max()) < 1e-5
    h = KF.gumbel_softmax(logits, hard=True)
    assert set(h.unique().tolist()) == {0.0, 1.0} and bool((h.sum(-1) == 1).all())
    # the argmax of a Gumbel-perturbed logit is a draw from softmax(logits)
    freq = h.mean(0)
    expect = torch.softmax(torch.tensor([1.0, 2.0, 0.5, -1.0]), 0)
    assert (to_torch_list := freq.tolist()) and max(abs(a - b) for a, b in zip(to_torch_list, expect.tolist())) < 0.015
    # straight-through: the hard sample's gradient is the soft sample's
    x = kiln.randn(3, 5, requires_grad=True)
    kiln.manual_seed(1)
    hard = KF.gumbel_softmax(x, tau=0.7, hard=True, dim=1)
    w = kiln.randn(3, 5)
    (hard * w).sum().backward()
    g_hard = x.grad.clone()
    x.grad = None
    kiln.manual_seed(1)
    soft = KF.gumbel_softmax(x, tau=0.7, dim=1)
    (soft * w).sum().backward()
    assert kiln.allclose(g_hard, x.grad)
    assert kiln.equal(hard.argmax(1), soft.argmax(1))
