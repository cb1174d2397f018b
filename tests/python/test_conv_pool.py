"""Convolution, pooling and upsampling vs torch: forward over the argument combinations each function
accepts, strided / batch-less / empty inputs, float64 / float32 / float16 / bfloat16 (and the integer
dtypes torch takes), torch's exception types; gradients through the registered derivatives
(kiln._C._derivative runs an op's forward then its derivative, as the autograd engine will) against
torch.autograd.grad, and the derivatives of the backward ops against torch's double backward."""
import itertools

import pytest
import torch
import torch.nn.functional as TF

import kiln
import kiln.nn.functional as KF
from helpers import assert_same, check, make, to_kiln

pytestmark = pytest.mark.filterwarnings("ignore:Using padding=.same. with even kernel")

FN = {torch: TF, kiln: KF}


def fn(name, **kw):
    return lambda m, *a: getattr(FN[m], name)(*a, **kw)


def rand(shape, dtype="float64", seed=0):
    return make(shape, dtype, low=-1.0, high=1.0, seed=seed)


def torch_grads(f, inputs, grads):
    ins = [t.detach().clone().requires_grad_() for t in inputs]
    out = f(*ins)
    outs = out if isinstance(out, tuple) else (out,)
    pairs = [(o, g) for o, g in zip(outs, grads) if g is not None]
    return torch.autograd.grad([o for o, _ in pairs], ins, [g for _, g in pairs], allow_unused=True)


def kiln_grads(op, inputs, attrs, grads):
    assert op in kiln.registered_ops()
    return kiln._C._derivative(op, [to_kiln(t) for t in inputs], attrs,
                               [None if g is None else to_kiln(g) for g in grads])


def compare_grads(kres, tres, msg="", **tol):
    assert len(kres) == len(tres), msg
    for i, (k, t) in enumerate(zip(kres, tres)):
        if t is None:
            continue
        assert k is not None, f"{msg}: no gradient for input {i}"
        assert_same(k, t, msg=f"{msg} input {i}", **tol)


def double_backward(f, x, gy, gg, wrt_x=False):
    """torch: d<gg, d<f(x), gy>/dx>/d(gy) (and /dx when wrt_x)."""
    x = x.detach().clone().requires_grad_()
    gy = gy.detach().clone().requires_grad_()
    out = f(x)
    out = out[0] if isinstance(out, tuple) else out
    (gx,) = torch.autograd.grad(out, x, gy, create_graph=True)
    return torch.autograd.grad(gx, [gy, x] if wrt_x else [gy], gg, allow_unused=True)


# ---- convolution ------------------------------------------------------------------------------------
# (N, C, H, W, O, kH, kW, stride, padding, dilation, groups, bias)
CONV2D = [
    (2, 3, 7, 8, 4, 3, 3, 1, 0, 1, 1, True),
    (2, 3, 7, 8, 4, 3, 3, 2, 1, 1, 1, False),
    (1, 4, 9, 6, 6, 3, 2, (2, 1), (1, 0), (2, 1), 2, True),
    (3, 4, 5, 5, 4, 3, 3, 1, 1, 1, 4, True),      # depthwise
    (2, 6, 6, 7, 4, 1, 1, 1, 0, 1, 2, True),      # 1x1: no im2col
    (2, 3, 6, 7, 4, 1, 1, 2, 0, 1, 1, False),     # 1x1 strided
    (1, 2, 5, 5, 3, 5, 5, 1, 0, 1, 1, True),      # kernel as large as the input
    (2, 2, 8, 8, 2, 2, 3, 3, 2, 2, 1, True),      # padding larger than the stride covers
]


@pytest.mark.parametrize("case", CONV2D)
def test_conv2d(case):
    N, C, H, W, O, kh, kw, s, p, d, g, has_b = case
    x, w = rand((N, C, H, W)), rand((O, C // g, kh, kw), seed=1)
    b = rand((O,), seed=2) if has_b else None
    kw_ = dict(stride=s, padding=p, dilation=d, groups=g)
    check(lambda m, x, w, b: FN[m].conv2d(x, w, b, **kw_), x, w, b, msg=str(case))
    # gradients: convolution's derivative vs torch
    y = TF.conv2d(x, w, b, **kw_)
    gy = rand(y.shape, seed=3)
    pair = lambda v: list(v) if isinstance(v, tuple) else [v, v]
    attrs = [pair(s), pair(p), pair(d), False, [0, 0], g]
    ins = [x, w] + ([b] if has_b else [])
    tg = torch_grads(lambda *a: TF.conv2d(a[0], a[1], a[2] if has_b else None, **kw_), ins, [gy])
    compare_grads(kiln_grads("convolution", ins, attrs, [gy]), tg, str(case))
    # only the weight: the input is not used
    kg = kiln._C._derivative("convolution", [to_kiln(t) for t in ins], attrs, [to_kiln(gy)],
                             [False, True] + [False] * (len(ins) - 2))
    assert kg[0] is None
    assert_same(kg[1], tg[1])


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_conv2d_dtypes(dtype):
    x, w, b = rand((2, 4, 8, 9), dtype), rand((6, 2, 3, 3), dtype, 1), rand((6,), dtype, 2)
    tol = {"float32": dict(rtol=1e-5, atol=1e-5), "float16": dict(rtol=1e-2, atol=1e-2),
           "bfloat16": dict(rtol=2e-2, atol=2e-2)}[dtype]
    check(lambda m, x, w, b: FN[m].conv2d(x, w, b, stride=2, padding=1, groups=2), x, w, b, **tol)
    check(lambda m, x, w: FN[m].conv1d(x, w, padding=1), x[:, :, 0], w[:, :, 0], **tol)
    check(lambda m, x, w: FN[m].conv_transpose1d(x, w, stride=2), x[:, :, 0], w[:4, :, 0], **tol)
    y = TF.conv2d(x.double(), w.double(), b.double(), padding=1, groups=2)
    gy = rand(y.shape, dtype, 3)
    tg = torch_grads(lambda *a: TF.conv2d(*a, padding=1, groups=2), [x, w, b], [gy])
    compare_grads(kiln_grads("convolution", [x, w, b], [[1, 1], [1, 1], [1, 1], False, [0, 0], 2], [gy]), tg,
                  dtype, **tol)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint16"])
def test_conv_integers(dtype):
    x, w = make((2, 3, 6, 6), dtype, -3, 3), make((4, 3, 2, 2), dtype, -3, 3, seed=1)
    check(lambda m, x, w: FN[m].conv2d(x, w, stride=2, padding=1), x, w, exact=True)
    check(lambda m, x, w: FN[m].conv1d(x, w), x[:, :, 0], w[:, :, 0], exact=True)
    check(lambda m, x, w: FN[m].conv_transpose1d(x, w, stride=2), x[:, :, 0], w[:3, :, 0], exact=True)


def test_conv_layouts_and_unbatched():
    base = rand((2, 6, 9, 16))
    x = base[:, ::2, :, ::2]                       # strided
    w = rand((3, 3, 3, 4), seed=1).permute(3, 2, 0, 1)  # (4, 3, 3, 3) non-contiguous
    b = rand((8,), seed=2)[::2]
    check(fn("conv2d", padding=1), x, w, b)
    check(fn("conv2d", stride=2), x.permute(0, 1, 3, 2), w)
    check(fn("conv2d", padding=(1, 2)), x[0], w, b)  # (C, H, W)
    x1 = rand((3, 10, 5)).transpose(1, 2)          # (3, 5, 10) non-contiguous
    w1 = rand((4, 5, 3), seed=1)
    check(fn("conv1d", padding=2, dilation=2), x1, w1)
    check(fn("conv1d", stride=3), x1[0], w1)        # (C, L)
    check(fn("conv_transpose1d", stride=2), x1[0], w1.transpose(0, 1).contiguous())
    check(fn("conv2d"), rand((0, 3, 5, 5)), rand((2, 3, 3, 3)))  # empty batch


@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.parametrize("k,d", [(3, 1), (4, 1), (4, 2), (2, 3), (5, 2)])
def test_conv_padding_modes(padding, k, d):
    x, w = rand((2, 4, 11)), rand((6, 2, k), seed=1)
    b = rand((6,), seed=2)
    check(fn("conv1d", padding=padding, dilation=d, groups=2), x, w, b, msg=f"{padding} k={k} d={d}")
    check(fn("conv1d", padding=padding, dilation=d, groups=2), x[0], w, b, msg="unbatched")
    x2, w2 = rand((1, 2, 7, 9)), rand((3, 2, k, 3), seed=1)
    check(fn("conv2d", padding=padding, dilation=(d, 1)), x2, w2, msg=f"2d {padding} k={k} d={d}")


def test_conv_padding_modes_layers():
    """padding_mode (reflect / replicate / circular) is F.pad then a padding-free convolution."""
    x, w = rand((2, 3, 6, 7)), rand((4, 3, 3, 3), seed=1)
    for mode in ["reflect", "replicate", "circular"]:
        check(lambda m, x, w: FN[m].conv2d(FN[m].pad(x, (1, 1, 2, 2), mode=mode), w), x, w, msg=mode)
        check(lambda m, x, w: FN[m].conv1d(FN[m].pad(x, (2, 1), mode=mode), w), x[:, :, 0], w[:, :, 0], msg=mode)


# (N, Cin, L, Cout/g, k, stride, padding, output_padding, groups, dilation, bias)
CONVT1D = [
    (2, 4, 6, 3, 3, 1, 0, 0, 1, 1, True),
    (2, 4, 6, 3, 3, 2, 1, 1, 1, 1, False),
    (1, 4, 5, 2, 4, 3, 2, 2, 2, 1, True),
    (2, 6, 7, 1, 3, 2, 0, 1, 3, 2, True),
    (3, 2, 4, 3, 3, 1, 1, 2, 1, 3, False),  # output_padding >= stride (allowed: < dilation)
    (2, 4, 6, 5, 1, 1, 0, 0, 1, 1, True),   # 1x1
    (2, 4, 6, 5, 1, 1, 0, 1, 2, 2, True),   # 1x1 with output_padding
]


@pytest.mark.parametrize("case", CONVT1D)
def test_conv_transpose1d(case):
    N, C, L, Og, k, s, p, op, g, d, has_b = case
    x, w = rand((N, C, L)), rand((C, Og, k), seed=1)
    b = rand((Og * g,), seed=2) if has_b else None
    kw_ = dict(stride=s, padding=p, output_padding=op, groups=g, dilation=d)
    check(lambda m, x, w, b: FN[m].conv_transpose1d(x, w, b, **kw_), x, w, b, msg=str(case))
    check(lambda m, x, w, b: FN[m].conv_transpose1d(x, w, b, **kw_), x[0], w, b, msg="unbatched")
    y = TF.conv_transpose1d(x, w, b, **kw_)
    gy = rand(y.shape, seed=3)
    ins = [x, w] + ([b] if has_b else [])
    tg = torch_grads(lambda *a: TF.conv_transpose1d(a[0], a[1], a[2] if has_b else None, **kw_), ins, [gy])
    compare_grads(kiln_grads("convolution", ins, [[s], [p], [d], True, [op], g], [gy]), tg, str(case))


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("case", [(1, 0, 1, 1), (2, 1, 1, 2), (3, 2, 2, 1), (2, 1, 3, 1)])
def test_convolution_backward_weight_and_double_backward(transposed, case):
    s, p, d, g = case
    op = 1 if transposed and (s > 1 or d > 1) else 0
    x = rand((2, 4, 9))
    w = rand((4, 2, 3) if transposed or g == 2 else (3, 4, 3), seed=1)
    if transposed:
        f = lambda x, w: TF.conv_transpose1d(x, w, stride=s, padding=p, output_padding=op, groups=g, dilation=d)
    else:
        f = lambda x, w: TF.conv1d(x, w, stride=s, padding=p, dilation=d, groups=g)
    y = f(x, w)
    gy, gw = rand(y.shape, seed=2), rand(w.shape, seed=3)
    # the weight-gradient op itself
    if not transposed:
        tw = torch_grads(f, [x, w], [gy])[1]
        check(lambda m, gy, x: m.convolution_backward_weight(gy, x, tuple(w.shape), [s], [p], [d], g) if m is kiln
              else tw, gy, x)
    # d<gw, dW(gy, x)> / d(gy, x) vs torch's double backward
    xr, wr, gyr = (t.detach().clone().requires_grad_() for t in (x, w, gy))
    (tdw,) = torch.autograd.grad(f(xr, wr), wr, gyr, create_graph=True)
    t_gy, t_x = torch.autograd.grad(tdw, [gyr, xr], gw)
    attrs = [list(w.shape), [s], [p], [d], g]
    if transposed:  # the transposed convolution's weight gradient is dW(x, gy)
        k = kiln_grads("convolution_backward_weight", [x, gy], attrs, [gw])
        compare_grads([k[1], k[0]], [t_gy, t_x], f"transposed {case}")
    else:
        compare_grads(kiln_grads("convolution_backward_weight", [gy, x], attrs, [gw]), [t_gy, t_x], str(case))


def test_conv_errors():
    x, w = rand((2, 3, 5, 5)), rand((4, 3, 3, 3), seed=1)
    x1, w1 = x[:, :, 0], w[:, :, 0]
    cases = [
        (fn("conv2d"), (x, w.float())),                           # dtype mismatch
        (fn("conv2d"), (x, w, rand((4,)).float())),               # bias dtype
        (fn("conv2d"), (x, w, rand((5,)))),                       # bias size
        (fn("conv2d"), (x[None], w)),                             # 5-D input
        (fn("conv2d"), (x[0, 0], w)),                             # 2-D input
        (fn("conv2d"), (x, w[0])),                                # 3-D weight
        (fn("conv2d", stride=0), (x, w)),
        (fn("conv2d", stride=(1, 1, 1)), (x, w)),
        (fn("conv2d", padding=-1), (x, w)),
        (fn("conv2d", padding=(1, 1, 1)), (x, w)),
        (fn("conv2d", dilation=0), (x, w)),
        (fn("conv2d", groups=0), (x, w)),
        (fn("conv2d", groups=2), (x, w)),                         # in-channels vs groups
        (fn("conv2d", groups=3), (x, rand((4, 1, 3, 3)))),        # out-channels not divisible
        (fn("conv2d"), (x, rand((4, 2, 3, 3)))),                  # channel mismatch
        (fn("conv2d"), (x, rand((0, 3, 3, 3)))),                  # no output channels
        (fn("conv2d"), (x, rand((4, 3, 6, 6)))),                  # kernel larger than padded input
        (fn("conv2d", dilation=3), (x, w)),
        (fn("conv2d", padding="same", stride=2), (x, w)),
        (fn("conv2d", padding="foo"), (x, w)),
        (fn("conv1d"), (x, w1)),
        (fn("conv1d"), (x1[0, 0], w1)),
        (fn("conv1d"), (x1.bool(), w1.bool())),                   # bool: NotImplementedError
        (fn("conv_transpose1d", stride=2, output_padding=2), (x1, rand((3, 2, 3)))),
        (fn("conv_transpose1d"), (x1, rand((4, 2, 3)))),
        (fn("conv_transpose1d", groups=2), (x1, rand((3, 2, 3)))),
        (fn("conv_transpose1d"), (x1, rand((3, 2, 3)), rand((3,)))),
        (fn("conv_transpose1d", padding=-1), (x1, rand((3, 2, 3)))),
        (fn("conv_transpose1d", output_padding=-1), (x1, rand((3, 2, 3)))),
        (fn("conv_transpose1d", padding=5), (x1, rand((3, 2, 3)))),  # output size <= 0
        (fn("conv_transpose1d"), (x, rand((3, 2, 3)))),
    ]
    for i, (f, args) in enumerate(cases):
        check(f, *args, msg=f"case {i}")
    with pytest.raises(RuntimeError, match=r"^\[convolution\]"):
        KF.conv2d(to_kiln(x), to_kiln(w), stride=0)


# ---- max pooling -----------------------------------------------------------------------------------
MAXPOOL2D = [dict(kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=c)
             for k, s, p, d, c in itertools.product([2, 3, (2, 3)], [None, 1, 2, (1, 2)], [0, 1], [1, 2],
                                                   [False, True])]


def test_max_pool2d():
    x = make((2, 3, 7, 8), "float64", special=True)  # NaN, inf, -inf inside windows
    for kw in MAXPOOL2D:
        check(fn("max_pool2d", return_indices=True, **kw), x, msg=str(kw))
    check(fn("max_pool2d", kernel_size=3, stride=2, return_indices=True), x[0])            # (C, H, W)
    check(fn("max_pool2d", kernel_size=2, return_indices=True), rand((4, 9, 10)).permute(1, 0, 2)[None, :, ::2])
    check(fn("max_pool2d", kernel_size=2), rand((0, 3, 4, 4)))                            # empty batch
    check(fn("max_pool2d", kernel_size=2, padding=1), torch.full((1, 1, 4, 4), float("-inf")))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64", "int32", "uint8", "uint16"])
def test_max_pool_dtypes(dtype):
    x = make((2, 3, 6, 7), dtype, -50, 50)
    check(fn("max_pool2d", kernel_size=3, stride=2, padding=1, return_indices=True), x, exact=True)
    check(fn("max_pool1d", kernel_size=3, stride=2, padding=1, return_indices=True), x[0], exact=True)
    check(fn("max_pool1d", kernel_size=2), x[0], exact=True)  # index-free 1-d: floats only in torch


def test_max_pool1d():
    x = make((2, 3, 11), "float64", special=True)
    for k, s, p, d, c in itertools.product([1, 2, 3], [None, 1, 2], [0, 1], [1, 2], [False, True]):
        kw = dict(kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=c)
        check(fn("max_pool1d", return_indices=True, **kw), x, msg=str(kw))
        check(fn("max_pool1d", **kw), x[0], msg=str(kw))


@pytest.mark.parametrize("kw", MAXPOOL2D[::5] + [dict(kernel_size=3, stride=1, padding=1)])
def test_max_pool_grads(kw):
    x = rand((2, 3, 7, 8))
    y, _ = TF.max_pool2d(x, return_indices=True, **kw)
    gy, gg = rand(y.shape, seed=1), rand(x.shape, seed=2)
    k, s = kw["kernel_size"], kw["stride"]
    two = lambda v: list(v) if isinstance(v, tuple) else [v, v]
    attrs = [two(k), two(k if s is None else s), two(kw.get("padding", 0)), two(kw.get("dilation", 1)),
             kw.get("ceil_mode", False)]
    tg = torch_grads(lambda x: TF.max_pool2d(x, **kw), [x], [gy])
    compare_grads(kiln_grads("max_pool", [x], attrs, [gy, None]), tg, str(kw))
    # max_pool_backward's derivative (a gather of the incoming gradient) vs torch's double backward
    _, idx = TF.max_pool2d(x, return_indices=True, **kw)
    tdd = double_backward(lambda x: TF.max_pool2d(x, **kw), x, gy, gg)
    kdd = kiln_grads("max_pool_backward", [gy, idx], [list(x.shape)], [gg])
    compare_grads(kdd[:1], tdd, f"double {kw}")
    assert kdd[1] is None
    # 1-d through the same ops
    x1 = rand((2, 3, 9))
    y1 = TF.max_pool1d(x1, 3, 2, 1)
    g1 = rand(y1.shape, seed=3)
    compare_grads(kiln_grads("max_pool", [x1], [[3], [2], [1], [1], False], [g1, None]),
                  torch_grads(lambda x: TF.max_pool1d(x, 3, 2, 1), [x1], [g1]))


# ---- average pooling -------------------------------------------------------------------------------
AVGPOOL2D = [dict(kernel_size=k, stride=s, padding=p, ceil_mode=c, count_include_pad=i, divisor_override=dv)
             for k, s, p, c, i, dv in itertools.product([2, 3, (3, 2)], [None, 2, (1, 2)], [0, 1], [False, True],
                                                       [True, False], [None, 3])]


def test_avg_pool2d():
    x = rand((2, 3, 7, 8))
    for kw in AVGPOOL2D:
        check(fn("avg_pool2d", **kw), x, msg=str(kw))
    check(fn("avg_pool2d", kernel_size=3, stride=2, padding=1), x[0])  # (C, H, W)
    check(fn("avg_pool2d", kernel_size=2), rand((3, 8, 10)).permute(1, 0, 2)[None])
    check(fn("avg_pool2d", kernel_size=2), rand((0, 3, 4, 4)))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64", "int16"])
def test_avg_pool_dtypes(dtype):
    x = make((2, 3, 6, 7), dtype, -50, 50)
    tol = dict(rtol=1e-2, atol=1e-2) if dtype in ("float16", "bfloat16") else {}
    check(fn("avg_pool2d", kernel_size=3, stride=2, padding=1), x, **tol)
    check(fn("avg_pool2d", kernel_size=2, divisor_override=3, ceil_mode=True), x, **tol)
    check(fn("avg_pool1d", kernel_size=3, padding=1, count_include_pad=False), x[0], **tol)


def test_avg_pool1d():
    x = rand((2, 3, 11))
    for k, s, p, c, i in itertools.product([1, 2, 3], [None, 1, 2], [0, 1], [False, True], [True, False]):
        kw = dict(kernel_size=k, stride=s, padding=p, ceil_mode=c, count_include_pad=i)
        check(fn("avg_pool1d", **kw), x, msg=str(kw))
        check(fn("avg_pool1d", **kw), x[1].t().contiguous().t(), msg=str(kw))


@pytest.mark.parametrize("kw", AVGPOOL2D[::7])
def test_avg_pool_grads(kw):
    x = rand((2, 3, 7, 8))
    y = TF.avg_pool2d(x, **kw)
    gy, gg = rand(y.shape, seed=1), rand(x.shape, seed=2)
    two = lambda v: list(v) if isinstance(v, tuple) else [v, v]
    k, s = kw["kernel_size"], kw["stride"]
    attrs = [two(k), two(k if s is None else s), two(kw["padding"]), kw["ceil_mode"], kw["count_include_pad"],
             kw["divisor_override"] or 0]
    compare_grads(kiln_grads("avg_pool", [x], attrs, [gy]), torch_grads(lambda x: TF.avg_pool2d(x, **kw), [x], [gy]),
                  str(kw))
    tdd = double_backward(lambda x: TF.avg_pool2d(x, **kw), x, gy, gg)
    compare_grads(kiln_grads("avg_pool_backward", [gy], [list(x.shape)] + attrs, [gg]), tdd, f"double {kw}")
    x1 = rand((2, 3, 9))
    g1 = rand(TF.avg_pool1d(x1, 3, 2, 1, False, False).shape, seed=3)
    compare_grads(kiln_grads("avg_pool", [x1], [[3], [2], [1], False, False, 0], [g1]),
                  torch_grads(lambda x: TF.avg_pool1d(x, 3, 2, 1, False, False), [x1], [g1]))


# ---- adaptive average pooling ----------------------------------------------------------------------
@pytest.mark.parametrize("out", [1, 2, 3, (4, 3), 5, (7, 11), (13, 5), (None, 2), (3, None), 0])
def test_adaptive_avg_pool2d(out):
    x = rand((2, 3, 7, 9))
    check(fn("adaptive_avg_pool2d", output_size=out), x)
    check(fn("adaptive_avg_pool2d", output_size=out), x[0].transpose(1, 2))
    if out in (0, (None, 2), (3, None)):
        return
    o = out if isinstance(out, tuple) else (out, out)
    y = TF.adaptive_avg_pool2d(x, o)
    gy, gg = rand(y.shape, seed=1), rand(x.shape, seed=2)
    compare_grads(kiln_grads("adaptive_avg_pool", [x], [list(o)], [gy]),
                  torch_grads(lambda x: TF.adaptive_avg_pool2d(x, o), [x], [gy]))
    tdd = double_backward(lambda x: TF.adaptive_avg_pool2d(x, o), x, gy, gg)
    compare_grads(kiln_grads("adaptive_avg_pool_backward", [gy], [list(x.shape)], [gg]), tdd)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_adaptive_avg_pool1d(dtype):
    x = make((2, 3, 10), dtype)
    tol = dict(rtol=1e-2, atol=1e-2) if dtype in ("float16", "bfloat16") else {}
    for o in [1, 3, 4, 7, 10, 15]:
        check(fn("adaptive_avg_pool1d", output_size=o), x, **tol)
        check(fn("adaptive_avg_pool1d", output_size=o), x[0], **tol)
    check(fn("adaptive_avg_pool2d", output_size=(3, 2)), make((2, 3, 7, 5), dtype), **tol)
    if dtype == "float64":
        gy = rand((2, 3, 4), seed=1)
        compare_grads(kiln_grads("adaptive_avg_pool", [x], [[4]], [gy]),
                      torch_grads(lambda x: TF.adaptive_avg_pool1d(x, 4), [x], [gy]))


def test_pool_errors():
    x = rand((2, 3, 5, 5))
    cases = [
        (fn("max_pool2d", kernel_size=0), x), (fn("max_pool2d", kernel_size=2, stride=0), x),
        (fn("max_pool2d", kernel_size=3, padding=2), x), (fn("max_pool2d", kernel_size=3, padding=-1), x),
        (fn("max_pool2d", kernel_size=3, dilation=0), x), (fn("max_pool2d", kernel_size=3, dilation=3), x),
        (fn("max_pool2d", kernel_size=2), x[0, 0]), (fn("max_pool2d", kernel_size=2), x[None]),
        (fn("max_pool2d", kernel_size=2), x[:, :0]), (fn("max_pool2d", kernel_size=2), x[:, :, :0]),
        (fn("max_pool2d", kernel_size=(2, 2, 2)), x),
        (fn("max_pool2d", kernel_size=2, return_indices=True), x[:, :, :1]),
        (fn("max_pool1d", kernel_size=0), x[0]), (fn("max_pool1d", kernel_size=2, stride=0), x[0]),
        (fn("max_pool1d", kernel_size=3, padding=2), x[0]), (fn("max_pool1d", kernel_size=3, dilation=3), x[0]),
        (fn("max_pool1d", kernel_size=3, dilation=3, return_indices=True), x[0]),
        (fn("max_pool1d", kernel_size=2), x), (fn("max_pool1d", kernel_size=2), x[0, 0, 0]),
        (fn("max_pool1d", kernel_size=2, return_indices=True), x),
        (fn("max_pool1d", kernel_size=2), x[0].int()),
        (fn("avg_pool2d", kernel_size=0), x), (fn("avg_pool2d", kernel_size=2, stride=0), x),
        (fn("avg_pool2d", kernel_size=3, padding=2), x), (fn("avg_pool2d", kernel_size=3, padding=-1), x),
        (fn("avg_pool2d", kernel_size=3, divisor_override=0), x), (fn("avg_pool2d", kernel_size=2), x[0, 0]),
        (fn("avg_pool2d", kernel_size=6), x), (fn("avg_pool2d", kernel_size=2), x.bool()),
        (fn("avg_pool1d", kernel_size=0), x[0]), (fn("avg_pool1d", kernel_size=3, padding=2), x[0]),
        (fn("avg_pool1d", kernel_size=2), x), (fn("avg_pool1d", kernel_size=6), x[0]),
        (fn("adaptive_avg_pool2d", output_size=2), x.long()), (fn("adaptive_avg_pool2d", output_size=-1), x),
        (fn("adaptive_avg_pool2d", output_size=2), x[:, :, :0]), (fn("adaptive_avg_pool2d", output_size=2), x[0, 0]),
        (fn("adaptive_avg_pool2d", output_size=(2, 2, 2)), x), (fn("adaptive_avg_pool1d", output_size=2), x),
        (fn("adaptive_avg_pool1d", output_size=(2, 2)), x[0]), (fn("adaptive_avg_pool1d", output_size=2), x[0, :, :0]),
    ]
    for i, (f, a) in enumerate(cases):
        check(f, a, msg=f"case {i}")


# ---- upsampling ------------------------------------------------------------------------------------
NEAREST = [dict(size=7), dict(size=3), dict(size=10), dict(size=5), dict(scale_factor=2), dict(scale_factor=2.1),
           dict(scale_factor=1.2), dict(scale_factor=0.5), dict(scale_factor=1.7),
           dict(scale_factor=1.7, recompute_scale_factor=True), dict(scale_factor=3.0)]


@pytest.mark.parametrize("kw", NEAREST)
def test_interpolate_nearest(kw):
    x1 = rand((2, 3, 5))
    check(fn("interpolate", **kw), x1, msg=f"1d {kw}")
    x2 = rand((2, 3, 5, 6))
    check(fn("interpolate", **kw), x2, msg=f"2d {kw}")
    check(fn("interpolate", **kw), rand((3, 6, 5)).permute(1, 0, 2)[None, ::2], msg=f"strided {kw}")
    if "size" in kw:
        check(fn("interpolate", size=(kw["size"], 4)), x2)
    else:
        check(fn("interpolate", scale_factor=(kw["scale_factor"], 1.5)), x2)
    # gradients (backward uses torch's nearest_idx rule in both 1-d and 2-d) and the backward's derivative
    for x in (x1, x2):
        nsp = x.dim() - 2
        y = TF.interpolate(x, **kw)
        gy, gg = rand(y.shape, seed=1), rand(x.shape, seed=2)
        sc = kw.get("scale_factor") if not kw.get("recompute_scale_factor") else None
        attrs = [list(y.shape[2:])] + [None if sc is None else float(sc)] * nsp
        compare_grads(kiln_grads("upsample_nearest", [x], attrs, [gy]),
                      torch_grads(lambda x: TF.interpolate(x, **kw), [x], [gy]), f"{nsp}d {kw}")
        if nsp == 2 or sc in (None, 2, 3.0):  # torch's 1-d double backward uses the forward's floor rule
            tdd = double_backward(lambda x: TF.interpolate(x, **kw), x, gy, gg)
            compare_grads(kiln_grads("upsample_nearest_backward", [gy], [list(x.shape)] + attrs, [gg]), tdd,
                          f"double {nsp}d {kw}")


LINEAR = [dict(size=9), dict(size=3), dict(size=5), dict(size=1), dict(scale_factor=2), dict(scale_factor=1.3),
          dict(scale_factor=0.6), dict(scale_factor=2.5, recompute_scale_factor=True)]


@pytest.mark.parametrize("align", [None, False, True])
@pytest.mark.parametrize("kw", LINEAR)
def test_interpolate_linear(kw, align):
    x1 = rand((2, 3, 5))
    check(fn("interpolate", mode="linear", align_corners=align, **kw), x1, msg=f"linear {kw}")
    check(fn("interpolate", mode="linear", align_corners=align, **kw), x1.transpose(0, 1).contiguous().transpose(0, 1))
    x2 = rand((2, 3, 5, 6))
    check(fn("interpolate", mode="bilinear", align_corners=align, **kw), x2, msg=f"bilinear {kw}")
    check(fn("interpolate", mode="bilinear", align_corners=align, **kw), x2[:, :, ::2])
    for x, mode in ((x1, "linear"), (x2, "bilinear")):
        nsp = x.dim() - 2
        f = lambda x: TF.interpolate(x, mode=mode, align_corners=align, **kw)
        y = f(x)
        gy, gg = rand(y.shape, seed=1), rand(x.shape, seed=2)
        sc = kw.get("scale_factor") if not kw.get("recompute_scale_factor") else None
        attrs = [list(y.shape[2:]), bool(align)] + [None if sc is None else float(sc)] * nsp
        compare_grads(kiln_grads("upsample_linear", [x], attrs, [gy]), torch_grads(f, [x], [gy]), f"{mode} {kw}")
        tdd = double_backward(f, x, gy, gg)
        compare_grads(kiln_grads("upsample_linear_backward", [gy], [list(x.shape)] + attrs, [gg]), tdd,
                      f"double {mode} {kw}")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_interpolate_dtypes(dtype):
    x = make((2, 3, 5, 6), dtype)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype in ("float16", "bfloat16") else {}
    check(fn("interpolate", scale_factor=2.5), x, exact=True)
    check(fn("interpolate", size=(7, 4), mode="bilinear"), x, **tol)
    check(fn("interpolate", size=(7, 4), mode="bilinear", align_corners=True), x, **tol)
    check(fn("interpolate", scale_factor=1.5, mode="linear"), x[0], **tol)
    check(fn("interpolate", scale_factor=2), make((2, 3, 4, 4), "uint8", 0, 255), exact=True)
    gy = make((2, 3, 7, 4), dtype, seed=1)
    compare_grads(kiln_grads("upsample_linear", [x], [[7, 4], False, None, None], [gy]),
                  torch_grads(lambda x: TF.interpolate(x, size=(7, 4), mode="bilinear"), [x], [gy]), dtype,
                  rtol=2e-2, atol=2e-2)


def test_interpolate_errors():
    x = rand((2, 3, 5, 5))
    cases = [
        (dict(size=3, scale_factor=2), x), (dict(), x), (dict(size=(3, 3, 3)), x),
        (dict(scale_factor=(2, 2, 2)), x), (dict(size=3, align_corners=True), x),
        (dict(size=3, mode="linear"), x), (dict(size=3, mode="bilinear"), x[0]), (dict(size=3), x[0, 0]),
        (dict(size=3, mode="foo"), x), (dict(size=0), x), (dict(size=-1), x), (dict(scale_factor=0.1), x),
        (dict(scale_factor=-1.0), x), (dict(size=3), x[:, :0]), (dict(size=3), x[:, :, :0]),
        (dict(size=3, mode="bilinear"), x[:, :, :0]), (dict(size=3, antialias=True), x),
        (dict(size=3, recompute_scale_factor=True), x), (dict(size=3.0), x),
        (dict(size=4, mode="linear"), x[:, :, 0].long()), (dict(size=4), x.long()),
        (dict(size=4), x[:, :, 0].int()),
    ]
    for i, (kw, a) in enumerate(cases):
        check(fn("interpolate", **kw), a, msg=f"case {i} {kw}")
    check(fn("interpolate", size=3), rand((0, 3, 5, 5)))
