"""conv3d, conv_transpose2d / conv_transpose3d and their modules (Conv3d, ConvTranspose2d/3d) vs torch:
values over stride / padding / dilation / groups / output_padding combinations, unbatched and strided
inputs, low-precision and integer dtypes, gradients of input, weight and bias through kiln's autograd
(and double backward), output_size on the modules, and torch's exceptions."""
import pytest
import torch
import torch.nn.functional as TF

import kiln
import kiln.nn.functional as KF
from helpers import assert_same, check, make, to_kiln

FN = {torch: TF, kiln: KF}


def rand(shape, dtype="float64", seed=0):
    return make(shape, dtype, low=-1.0, high=1.0, seed=seed)


def grads_match(fname, x, w, b, **kw):
    """forward and d(input, weight, bias) of <f(x, w, b), gy> in both libraries."""
    res = {}
    for lib in (torch, kiln):
        conv = lambda t: t if lib is torch else to_kiln(t)  # noqa: E731
        ins = [conv(t).detach().clone().requires_grad_() if t is not None else None for t in (x, w, b)]
        y = getattr(FN[lib], fname)(*ins, **kw)
        gy = rand(tuple(y.shape), seed=9)
        (y * conv(gy)).sum().backward()
        res[lib] = (y.detach(), *[t.grad for t in ins if t is not None])
    for k, t in zip(res[kiln], res[torch]):
        assert_same(k, t, rtol=1e-9, atol=1e-9)


# (N, C, D, H, W, O, k, stride, padding, dilation, groups, bias)
CONV3D = [
    (2, 3, 5, 6, 7, 4, 3, 1, 0, 1, 1, True),
    (1, 4, 6, 5, 6, 6, (2, 3, 1), (2, 1, 1), (1, 0, 1), 1, 2, False),
    (2, 2, 4, 4, 4, 2, 1, 1, 0, 1, 1, True),            # 1x1x1: the image is its own column matrix
    (1, 3, 7, 6, 5, 3, 3, 2, 2, 2, 3, True),             # depthwise, dilated, padded past the stride
    (1, 2, 3, 3, 3, 2, 3, 1, 0, 1, 1, False),            # kernel as large as the input
]


@pytest.mark.parametrize("case", CONV3D)
def test_conv3d(case):
    N, C, D, H, W, O, k, s, p, d, g, has_b = case
    ks = k if isinstance(k, tuple) else (k, k, k)
    x, w = rand((N, C, D, H, W)), rand((O, C // g, *ks), seed=1)
    b = rand((O,), seed=2) if has_b else None
    kw = dict(stride=s, padding=p, dilation=d, groups=g)
    check(lambda m, x, w, b: FN[m].conv3d(x, w, b, **kw), x, w, b, msg=str(case))
    grads_match("conv3d", x, w, b, **kw)


# (N, Cin, spatial, Cout, k, stride, padding, output_padding, dilation, groups, bias)
CONVT = [
    (2, 3, (5, 6), 4, 3, 1, 0, 0, 1, 1, True),
    (1, 4, (4, 5), 6, (2, 3), (2, 3), (1, 0), (1, 2), 1, 2, False),
    (2, 2, (3, 4), 3, 3, 2, 1, 1, 2, 1, True),
    (1, 4, (5, 5), 4, 1, 1, 0, 0, 1, 4, True),           # depthwise 1x1
    (2, 2, (3, 4, 5), 3, 3, 1, 0, 0, 1, 1, True),
    (1, 4, (3, 3, 4), 2, (2, 1, 3), (2, 1, 2), (1, 0, 1), (1, 0, 1), (1, 1, 2), 2, True),
    (1, 2, (2, 3, 3), 2, 2, 3, 0, 2, 1, 1, False),       # output_padding 2 < stride 3
]


@pytest.mark.parametrize("case", CONVT)
def test_conv_transpose(case):
    N, C, sp, O, k, s, p, op, d, g, has_b = case
    n = len(sp)
    ks = k if isinstance(k, tuple) else (k,) * n
    fname = f"conv_transpose{n}d"
    x, w = rand((N, C, *sp)), rand((C, O // g, *ks), seed=1)
    b = rand((O,), seed=2) if has_b else None
    kw = dict(stride=s, padding=p, output_padding=op, groups=g, dilation=d)
    check(lambda m, x, w, b: getattr(FN[m], fname)(x, w, b, **kw), x, w, b, msg=str(case))
    grads_match(fname, x, w, b, **kw)


def test_double_backward_3d():
    x, w = rand((1, 2, 4, 4, 4)), rand((3, 2, 2, 2, 2), seed=1)
    res = {}
    for lib in (torch, kiln):
        conv = lambda t: t if lib is torch else to_kiln(t)  # noqa: E731
        xi, wi = conv(x).clone().requires_grad_(), conv(w).clone().requires_grad_()
        y = FN[lib].conv3d(xi, wi, stride=2, padding=1)
        (gx,) = lib.autograd.grad(y.square().sum(), xi, create_graph=True)
        res[lib] = lib.autograd.grad(gx.sum(), [xi, wi])
    for k, t in zip(res[kiln], res[torch]):
        assert_same(k, t, rtol=1e-9, atol=1e-9)


def test_unbatched_strided_and_empty():
    x, w = rand((3, 5, 6, 7)), rand((4, 3, 2, 2, 2), seed=1)
    check(lambda m, x, w: FN[m].conv3d(x, w, padding=1), x, w)             # unbatched
    xs = rand((2, 3, 10, 6, 14))[:, :, ::2, :, ::2]
    check(lambda m, x, w: FN[m].conv3d(x, w), xs, w)                       # strided input
    check(lambda m, x, w: FN[m].conv3d(x, w), rand((0, 3, 4, 4, 4)), w)    # empty batch
    check(lambda m, x, w: FN[m].conv3d(x, w, padding="same"), rand((1, 3, 4, 5, 6)), rand((2, 3, 2, 3, 4), seed=1))
    check(lambda m, x, w: FN[m].conv_transpose2d(x, w, stride=2), rand((3, 4, 5)), rand((3, 2, 3, 3), seed=1))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64"])
def test_dtypes(dtype):
    lo = dtype == "int64"
    mk = (lambda s, seed=0: make(s, dtype, -3, 3, seed=seed)) if lo else (lambda s, seed=0: rand(s, dtype, seed))
    tol = {"float32": dict(rtol=1e-5, atol=1e-5), "float16": dict(rtol=1e-2, atol=1e-2),
           "bfloat16": dict(rtol=2e-2, atol=2e-2), "int64": dict(exact=True)}[dtype]
    x, w = mk((2, 4, 4, 5, 5)), mk((6, 2, 2, 3, 3), 1)
    check(lambda m, x, w: FN[m].conv3d(x, w, stride=2, padding=1, groups=2), x, w, **tol)
    check(lambda m, x, w: FN[m].conv_transpose3d(x, w, stride=2), x, mk((4, 2, 2, 2, 2), 2), **tol)
    check(lambda m, x, w: FN[m].conv_transpose2d(x, w, stride=2, padding=1), x[:, :, 0], mk((4, 3, 3, 3), 3), **tol)


def test_modules_match_torch():
    for name, args, kw, shape, size in [
            ("Conv3d", (3, 4, 3), dict(stride=2, padding=1), (2, 3, 5, 6, 7), None),
            ("Conv3d", (4, 4, (1, 2, 3)), dict(groups=2, padding="same", padding_mode="circular"), (1, 4, 4, 5, 6), None),
            ("Conv3d", (2, 3, 2), dict(padding=1, padding_mode="reflect", bias=False), (1, 2, 4, 4, 4), None),
            ("ConvTranspose2d", (3, 4, 3), dict(stride=2, padding=1), (2, 3, 5, 6), (10, 12)),
            ("ConvTranspose2d", (4, 2, (2, 3)), dict(stride=(2, 3), groups=2, dilation=2), (1, 4, 3, 3), None),
            ("ConvTranspose3d", (2, 3, 3), dict(stride=2), (1, 2, 3, 4, 5), (1, 3, 8, 9, 12)),
    ]:
        torch.manual_seed(0)
        tm = getattr(torch.nn, name)(*args, **kw).double()
        km = getattr(kiln.nn, name)(*args, **kw, dtype=kiln.float64)
        km.load_state_dict({k: to_kiln(v.detach()) for k, v in tm.state_dict().items()})
        assert repr(km) == repr(tm)
        assert [p.shape for p in km.parameters()] == [tuple(p.shape) for p in tm.parameters()]
        x = rand(shape)
        fkw = {} if size is None else dict(output_size=size)
        assert_same(km(to_kiln(x), **fkw), tm(x, **fkw).detach(), rtol=1e-9, atol=1e-9)


def test_module_init_statistics():
    m = kiln.nn.Conv3d(4, 8, 3)
    bound = 1 / (4 * 27) ** 0.5
    assert float(m.weight.abs().max()) <= bound and float(m.bias.abs().max()) <= bound
    assert tuple(kiln.nn.ConvTranspose3d(4, 6, 2, groups=2).weight.shape) == (4, 3, 2, 2, 2)


def test_errors():
    x, w = rand((1, 3, 4, 4, 4)), rand((2, 3, 3, 3, 3), seed=1)
    check(lambda m, x, w: FN[m].conv3d(x, w, stride=0), x, w)                 # non-positive stride
    check(lambda m, x, w: FN[m].conv3d(x, w, padding=-1), x, w)
    check(lambda m, x, w: FN[m].conv3d(x[:, :2], w), x, w)                     # channels
    check(lambda m, x, w: FN[m].conv3d(x, w), rand((1, 3, 2, 4, 4)), w)       # kernel larger than input
    check(lambda m, x, w: FN[m].conv3d(x, w, groups=2), x, w)
    check(lambda m, x, w: FN[m].conv3d(x, w), rand((3, 4, 4)), w)             # 3-d input
    check(lambda m, x, w: FN[m].conv3d(x, w, stride=2, padding="same"), x, w)
    check(lambda m, x, w: FN[m].conv_transpose3d(x, w, stride=1, output_padding=1), x, rand((3, 2, 2, 2, 2)))
    check(lambda m, x, w: FN[m].conv_transpose2d(x, w), rand((1, 3, 4, 4)), rand((2, 2, 3, 3)))  # in channels
    for lib in (torch, kiln):
        with pytest.raises(ValueError, match="Only \"zeros\" padding mode is supported for ConvTranspose2d"):
            lib.nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")
        m = lib.nn.ConvTranspose2d(2, 2, 3, stride=2)
        with pytest.raises(ValueError, match="requested an output size of"):
            m(lib.zeros(1, 2, 4, 4), output_size=(20, 20))
        with pytest.raises(ValueError, match="output_size must have 2 or 4 elements"):
            m(lib.zeros(1, 2, 4, 4), output_size=(9, 9, 9))
