"""BatchNorm1d/2d, GroupNorm, EmbeddingBag, Conv1d/2d, ConvTranspose1d, pooling and Upsample modules
against torch.nn (same weights, same inputs): outputs, input and parameter gradients, running
statistics, reprs and errors."""
import math

import pytest
import torch

import kiln
from kiln.nn import norm_conv as knn

from helpers import to_kiln, to_torch
from layer_helpers import close, compare, raises_like, sync

tnn = torch.nn


def rnd(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def both(name, *args, **kw):
    return getattr(knn, name)(*args, **kw), getattr(tnn, name)(*args, **kw)


# ---- BatchNorm ---------------------------------------------------------------------------------------
BN_CASES = [
    ("BatchNorm1d", (6, 3)),
    ("BatchNorm1d", (4, 3, 5)),
    ("BatchNorm2d", (3, 3, 4, 2)),
]
BN_KW = [{}, {"affine": False}, {"momentum": None}, {"momentum": 0.3, "eps": 1e-3}, {"bias": False},
         {"track_running_stats": False}]


@pytest.mark.parametrize("name,shape", BN_CASES)
@pytest.mark.parametrize("kw", BN_KW)
def test_batchnorm_train_steps_then_eval(name, shape, kw):
    km, tm = both(name, shape[1], **kw)
    assert repr(km) == repr(tm)
    sync(km, tm)
    for step in range(3):  # running statistics after a few training steps
        x = rnd(*shape, seed=step) * (step + 1) + step
        compare(km, tm, x, copy=False)
        for (n, kb), (_, tb) in zip(km.named_buffers(), tm.named_buffers()):
            close(kb, tb, 1e-5, f"buffer {n} after step {step}")
        for p in list(km.parameters()) + list(tm.parameters()):
            p.grad = None
    km.eval(), tm.eval()
    compare(km, tm, rnd(*shape, seed=9), copy=False)
    compare(km, tm, rnd(*shape, seed=9), copy=False, grad=False)


def test_batchnorm_strided_and_half_inputs():
    km, tm = both("BatchNorm2d", 3)
    x = rnd(2, 5, 4, 3).permute(0, 3, 1, 2)  # channels-last layout
    compare(km, tm, x)
    x1 = rnd(5, 8)[:, ::2][:, :3]
    compare(*both("BatchNorm1d", 3), x1)
    km, tm = both("BatchNorm1d", 3, dtype=torch.float64)
    assert km.weight.dtype == kiln.float64
    compare(km, tm, rnd(4, 3, dtype=torch.float64), tol=1e-10)


def test_batchnorm_momentum_setter_and_reset():
    km, tm = both("BatchNorm1d", 2)
    km.momentum = tm.momentum = 0.5
    compare(km, tm, rnd(5, 2))
    close(km.running_mean, tm.running_mean)
    km.reset_running_stats(), tm.reset_running_stats()
    close(km.running_var, tm.running_var)
    assert int(km.num_batches_tracked.item()) == 0
    assert km.num_batches_tracked.dtype == kiln.int64


def test_batchnorm_state_dict_and_buffers():
    km, tm = both("BatchNorm2d", 4)
    assert list(km.state_dict()) == list(tm.state_dict())
    km2, tm2 = both("BatchNorm2d", 4, track_running_stats=False)
    assert km2.running_mean is None and list(km2.state_dict()) == list(tm2.state_dict())


def test_batchnorm_errors():
    km, tm = both("BatchNorm1d", 3)
    for shape in [(2, 3, 4, 5), (3,)]:
        raises_like(lambda: km(to_kiln(rnd(*shape))), lambda: tm(rnd(*shape)))
    e = raises_like(lambda: km(to_kiln(rnd(1, 3))), lambda: tm(rnd(1, 3)))  # one value per channel
    assert str(e).startswith("[batch_norm]")
    raises_like(lambda: km(to_kiln(rnd(4, 5))), lambda: tm(rnd(4, 5)))  # channel mismatch
    km2, tm2 = both("BatchNorm2d", 3)
    raises_like(lambda: km2(to_kiln(rnd(2, 3, 4))), lambda: tm2(rnd(2, 3, 4)))
    km.eval(), tm.eval()
    compare(km, tm, rnd(1, 3))  # fine in eval


def test_functional_batch_norm():
    x, rm, rv, w, b = rnd(4, 3, 2), rnd(3).abs(), rnd(3, seed=1).abs() + 0.5, rnd(3, seed=2), rnd(3, seed=3)
    for training in (False, True):
        krm, krv = to_kiln(rm), to_kiln(rv)
        trm, trv = rm.clone(), rv.clone()
        ky = kiln._C.batch_norm(to_kiln(x), krm, krv, to_kiln(w), to_kiln(b), training, 0.2, 1e-4)
        ty = torch.nn.functional.batch_norm(x, trm, trv, w, b, training, 0.2, 1e-4)
        close(ky, ty)
        close(krm, trm), close(krv, trv)
    raises_like(lambda: kiln._C.batch_norm(to_kiln(x), None, None), lambda: torch.nn.functional.batch_norm(x, None, None))


# ---- GroupNorm ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(3, 6), (2, 6, 5), (2, 6, 3, 4)])
@pytest.mark.parametrize("kw", [{}, {"affine": False}, {"bias": False}, {"eps": 1e-2}])
@pytest.mark.parametrize("groups", [1, 3, 6])
def test_groupnorm(shape, kw, groups):
    # float64: groups of 2 elements make the input gradient ill-conditioned in float32 (torch's own noise)
    km, tm = both("GroupNorm", groups, 6, dtype=torch.float64, **kw)
    assert repr(km) == repr(tm)
    compare(km, tm, rnd(*shape, dtype=torch.float64) * 3 + 1, tol=1e-9)


def test_groupnorm_strided_and_errors():
    km, tm = both("GroupNorm", 2, 4)
    compare(km, tm, rnd(3, 5, 4, 2).permute(0, 2, 3, 1))
    raises_like(lambda: knn.GroupNorm(3, 4), lambda: tnn.GroupNorm(3, 4))
    raises_like(lambda: km(to_kiln(rnd(2, 6, 3))), lambda: tm(rnd(2, 6, 3)))
    raises_like(lambda: km(to_kiln(rnd(4))), lambda: tm(rnd(4)))
    raises_like(lambda: kiln._C.group_norm(to_kiln(rnd(1, 2)), 2), lambda: torch.nn.functional.group_norm(rnd(1, 2), 2))
    close(kiln._C.group_norm(to_kiln(rnd(2, 4, 3)), 2), torch.nn.functional.group_norm(rnd(2, 4, 3), 2))


# ---- EmbeddingBag ------------------------------------------------------------------------------------
IDX1 = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 0])
OFF = torch.tensor([0, 3, 3, 7])  # bag 1 is empty


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("kw", [{}, {"padding_idx": 2}, {"padding_idx": -1}, {"include_last_offset": True},
                                {"max_norm": 1.0}, {"scale_grad_by_freq": True}])
def test_embedding_bag_1d(mode, kw):
    if mode == "max" and kw.get("scale_grad_by_freq"):
        return
    km, tm = both("EmbeddingBag", 10, 3, mode=mode, **kw)
    assert repr(km) == repr(tm)
    # include_last_offset: CSR offsets ending at len(input) (torch 2.13 miscounts the last bag otherwise);
    # scale_grad_by_freq: torch 2.13's embedding_bag backward miscounts frequencies (see the test below)
    off = torch.tensor([0, 3, 3, 7, 10]) if kw.get("include_last_offset") else OFF
    compare(km, tm, IDX1, off, grad=not kw.get("scale_grad_by_freq"))
    if "max_norm" in kw:
        close(km.weight, tm.weight)  # renormalised in place


def test_embedding_bag_scale_grad_by_freq():
    # the weight gradient is divided by each row's frequency in the input, as torch.nn.functional.embedding
    # does (torch 2.13's embedding_bag gives row 3 of [1, 2, 2, 3, 3, 3] the factor 1.5 instead of 1)
    idx = torch.tensor([1, 2, 2, 3, 3, 3, 0])
    w = rnd(5, 2)
    kw_ = to_kiln(w).requires_grad_()
    kiln._C.embedding_bag(to_kiln(idx), kw_, to_kiln(torch.tensor([0, 4])), mode="sum",
                          scale_grad_by_freq=True).sum().backward()
    tw = w.clone().requires_grad_()
    torch.nn.functional.embedding(idx, tw, scale_grad_by_freq=True).sum().backward()
    close(kw_.grad, tw.grad)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_and_int32(mode):
    km, tm = both("EmbeddingBag", 10, 4, mode=mode, padding_idx=0)
    idx = torch.tensor([[1, 0, 3], [0, 0, 0], [7, 7, 2]])
    compare(km, tm, idx)
    compare(km, tm, idx.int())
    compare(km, tm, IDX1.int(), OFF.int())


def test_embedding_bag_per_sample_weights():
    km, tm = both("EmbeddingBag", 10, 3, mode="sum", padding_idx=4)
    psw = rnd(10).abs()
    compare(km, tm, IDX1, OFF, psw)  # gradient of per_sample_weights too
    compare(km, tm, IDX1.view(2, 5), None, psw.view(2, 5))
    km2, tm2 = both("EmbeddingBag", 10, 3, mode="mean")
    raises_like(lambda: km2(to_kiln(IDX1), to_kiln(OFF), to_kiln(psw)), lambda: tm2(IDX1, OFF, psw))
    raises_like(lambda: km(to_kiln(IDX1), to_kiln(OFF), to_kiln(psw[:4])), lambda: tm(IDX1, OFF, psw[:4]))


def test_embedding_bag_from_pretrained_and_functional():
    w = rnd(6, 2)
    km = knn.EmbeddingBag.from_pretrained(to_kiln(w), mode="sum")
    tm = tnn.EmbeddingBag.from_pretrained(w, mode="sum")
    assert not km.weight.requires_grad
    close(km(to_kiln(torch.tensor([[0, 5], [2, 2]]))), tm(torch.tensor([[0, 5], [2, 2]])))
    ky = kiln._C.embedding_bag(to_kiln(IDX1[:6]), to_kiln(w), to_kiln(OFF[:2]), mode="max")
    close(ky, torch.nn.functional.embedding_bag(IDX1[:6], w, OFF[:2], mode="max"))


def test_embedding_bag_errors():
    km, tm = both("EmbeddingBag", 10, 3)
    cases = [
        ((IDX1,), {}),  # 1-D without offsets
        ((IDX1.view(2, 5), OFF), {}),  # 2-D with offsets
        ((IDX1, OFF.view(2, 2)), {}),  # 2-D offsets
        ((IDX1.view(1, 2, 5),), {}),  # 3-D input
        ((torch.tensor([0, 10]), torch.tensor([0])), {}),  # index out of range
        ((IDX1, torch.tensor([1, 3])), {}),  # offsets[0] != 0
        ((IDX1, torch.tensor([0, 11])), {}),  # offsets[-1] > len
        ((IDX1.float(), OFF), {}),  # float indices
    ]
    for args, kw in cases:
        e = raises_like(lambda: km(*[to_kiln(a) for a in args]), lambda: tm(*args))
        assert str(e).startswith("[embedding_bag]"), str(e)
    raises_like(lambda: knn.EmbeddingBag(4, 2, padding_idx=4), lambda: tnn.EmbeddingBag(4, 2, padding_idx=4))
    bad = knn.EmbeddingBag(10, 3, mode="median")
    with pytest.raises(ValueError):
        bad(to_kiln(IDX1), to_kiln(OFF))


# ---- convolution -------------------------------------------------------------------------------------
CONV1 = [
    {},
    {"stride": 2, "padding": 1},
    {"padding": (2,), "dilation": 2},
    {"groups": 2, "bias": False},
    {"padding": "same", "dilation": 2},
    {"padding": "same"},
    {"padding": "valid", "stride": 3},
    {"padding": 2, "padding_mode": "reflect"},
    {"padding": 1, "padding_mode": "replicate", "stride": 2},
    {"padding": 3, "padding_mode": "circular"},
    {"padding": "same", "padding_mode": "reflect"},
]


@pytest.mark.parametrize("kw", CONV1)
@pytest.mark.parametrize("k", [3, 4])
def test_conv1d(kw, k):
    km, tm = both("Conv1d", 4, 6, k, **kw)
    assert repr(km) == repr(tm)
    assert km.kernel_size == tm.kernel_size and km.stride == tm.stride and km.padding == tm.padding
    compare(km, tm, rnd(2, 4, 11), tol=1e-4)
    compare(km, tm, rnd(3, 11, 4).transpose(1, 2), tol=1e-4)  # strided input
    compare(km, tm, rnd(4, 9), tol=1e-4)  # unbatched


CONV2 = [
    {},
    {"stride": (2, 1), "padding": (1, 2)},
    {"dilation": (2, 1), "groups": 3},
    {"padding": "same", "bias": False},
    {"padding": "valid"},
    {"padding": 1, "padding_mode": "reflect"},
    {"padding": (1, 2), "padding_mode": "replicate"},
    {"padding": (2, 1), "padding_mode": "circular", "stride": 2},
]


@pytest.mark.parametrize("kw", CONV2)
def test_conv2d(kw):
    km, tm = both("Conv2d", 3, 6, (3, 2), **kw)
    assert repr(km) == repr(tm)
    compare(km, tm, rnd(2, 3, 7, 6), tol=1e-4)
    compare(km, tm, rnd(2, 7, 6, 3).permute(0, 3, 1, 2), tol=1e-4)
    compare(km, tm, rnd(3, 6, 5), tol=1e-4)


def test_conv_init_bounds():
    km = knn.Conv2d(4, 8, 3)
    bound = 1 / math.sqrt(4 * 9)
    w = to_torch(km.weight)
    assert w.abs().max() <= bound + 1e-6 and w.abs().max() > 0.8 * bound
    assert to_torch(km.bias).abs().max() <= bound + 1e-6
    assert tuple(km.weight.shape) == (8, 4, 3, 3) and isinstance(km.weight, kiln.nn.Parameter)
    kt = knn.ConvTranspose1d(4, 6, 3, groups=2)
    assert tuple(kt.weight.shape) == tuple(tnn.ConvTranspose1d(4, 6, 3, groups=2).weight.shape)
    assert to_torch(kt.bias).abs().max() <= 1 / math.sqrt(3 * 3) + 1e-6


def test_conv_errors():
    cases = [
        ("Conv1d", (4, 6, 3), {"groups": 3}),
        ("Conv1d", (4, 6, 3), {"groups": 4}),
        ("Conv1d", (4, 6, 3), {"groups": 0}),
        ("Conv2d", (4, 6, 3), {"padding": "full"}),
        ("Conv2d", (4, 6, 3), {"padding": "same", "stride": 2}),
        ("Conv2d", (4, 6, 3), {"padding_mode": "mirror"}),
        ("ConvTranspose1d", (4, 6, 3), {"padding_mode": "reflect"}),
    ]
    for name, args, kw in cases:
        raises_like(lambda: getattr(knn, name)(*args, **kw), lambda: getattr(tnn, name)(*args, **kw))
    km, tm = both("Conv2d", 4, 6, 3)
    raises_like(lambda: km(to_kiln(rnd(2, 3, 5, 5))), lambda: tm(rnd(2, 3, 5, 5)))  # channel mismatch


CONVT = [
    {},
    {"stride": 2, "output_padding": 1},
    {"stride": 3, "padding": 2, "dilation": 2, "output_padding": 1},
    {"groups": 2, "bias": False},
    {"padding": 1, "dilation": 3},
]


@pytest.mark.parametrize("kw", CONVT)
def test_conv_transpose1d(kw):
    km, tm = both("ConvTranspose1d", 4, 6, 3, **kw)
    assert repr(km) == repr(tm)
    compare(km, tm, rnd(2, 4, 7), tol=1e-4)
    compare(km, tm, rnd(2, 7, 4).transpose(1, 2), tol=1e-4)
    compare(km, tm, rnd(4, 5), tol=1e-4)


def test_conv_transpose1d_output_size():
    km, tm = both("ConvTranspose1d", 2, 3, 3, stride=3)
    x = rnd(2, 2, 5)
    for size in ([15], [17], (2, 3, 16)):
        compare(km, tm, x, output_size=size)
    for size in ([14], [18], [1, 2]):
        raises_like(lambda: km(to_kiln(x), output_size=size), lambda: tm(x, output_size=size))


# ---- pooling and upsampling ----------------------------------------------------------------------------
POOLS = [
    ("MaxPool1d", (3,), {}, (2, 3, 11)),
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True}, (2, 3, 11)),
    ("MaxPool1d", (2,), {"return_indices": True}, (3, 9)),
    ("MaxPool2d", (2,), {}, (2, 3, 6, 7)),
    ("MaxPool2d", ((3, 2),), {"stride": (2, 1), "padding": (1, 0), "return_indices": True}, (2, 3, 7, 6)),
    ("MaxPool2d", (3,), {"stride": 2, "dilation": (1, 2), "ceil_mode": True}, (3, 9, 9)),
    ("AvgPool1d", (3,), {}, (2, 3, 10)),
    ("AvgPool1d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}, (2, 3, 10)),
    ("AvgPool2d", (2,), {}, (2, 3, 6, 7)),
    ("AvgPool2d", ((3, 2),), {"stride": 1, "padding": (1, 1), "count_include_pad": False}, (2, 3, 6, 7)),
    ("AvgPool2d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True, "divisor_override": 5}, (3, 7, 7)),
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 10)),
    ("AdaptiveAvgPool1d", (3,), {}, (3, 7)),
    ("AdaptiveAvgPool2d", (3,), {}, (2, 3, 7, 8)),
    ("AdaptiveAvgPool2d", ((None, 3),), {}, (2, 3, 7, 8)),
    ("AdaptiveAvgPool2d", ((4, 2),), {}, (3, 5, 9)),
]


@pytest.mark.parametrize("name,args,kw,shape", POOLS)
def test_pooling(name, args, kw, shape):
    km, tm = both(name, *args, **kw)
    assert repr(km) == repr(tm)
    compare(km, tm, rnd(*shape))
    if len(shape) == 4:
        compare(km, tm, rnd(shape[0], shape[2], shape[3], shape[1]).permute(0, 3, 1, 2))


def test_pooling_errors():
    km, tm = both("MaxPool2d", 3, padding=2)  # padding > kernel / 2
    raises_like(lambda: km(to_kiln(rnd(1, 2, 6, 6))), lambda: tm(rnd(1, 2, 6, 6)))
    km, tm = both("AvgPool1d", 4)
    raises_like(lambda: km(to_kiln(rnd(1, 2, 3))), lambda: tm(rnd(1, 2, 3)))


UPS = [
    ({"scale_factor": 2}, (2, 3, 5)),
    ({"size": 7}, (2, 3, 5)),
    ({"scale_factor": 1.5, "mode": "linear"}, (2, 3, 5)),
    ({"size": 9, "mode": "linear", "align_corners": True}, (2, 3, 5)),
    ({"scale_factor": (2, 3)}, (2, 3, 4, 5)),
    ({"size": (5, 7), "mode": "bilinear"}, (2, 3, 4, 5)),
    ({"scale_factor": 2.5, "mode": "bilinear", "align_corners": True}, (1, 2, 4, 3)),
    ({"scale_factor": 1.7, "mode": "bilinear", "recompute_scale_factor": True}, (1, 2, 4, 3)),
]


@pytest.mark.parametrize("kw,shape", UPS)
def test_upsample(kw, shape):
    km, tm = both("Upsample", **kw)
    assert repr(km) == repr(tm)
    compare(km, tm, rnd(*shape))
    if len(shape) == 4:
        compare(km, tm, rnd(shape[0], shape[2], shape[3], shape[1]).permute(0, 3, 1, 2))


def test_upsample_errors():
    for kw, shape in [({"scale_factor": 2, "align_corners": True}, (1, 2, 3)),
                      ({"size": (2, 3)}, (1, 2, 3)),
                      ({}, (1, 2, 3))]:
        km, tm = both("Upsample", **kw)
        raises_like(lambda: km(to_kiln(rnd(*shape))), lambda: tm(rnd(*shape)))


def test_modules_train_eval_and_parameters_shared():
    km = knn.BatchNorm1d(3)
    km.eval()
    assert not km.training and not km._cpp.training
    km.train()
    assert km._cpp.training
    with kiln.no_grad():
        km.weight.fill_(2.0)
    y = km(to_kiln(torch.ones(4, 3) + torch.arange(4.0)[:, None]))
    assert abs(float(y.abs().max().item()) - 2 * 1.5 / math.sqrt(1.25 + 1e-5)) < 1e-4
