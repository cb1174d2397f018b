"""Automatic mixed precision against torch 2.13: which ops autocast runs in bfloat16 / float16, which
in float32, which promote (output dtypes and values), gradients through the casts, the region's
state rules (nesting, enabled=False, decorators, custom_fwd/custom_bwd), and GradScaler's scale
schedule with inf / NaN gradients."""
import copy
import warnings

import numpy as np
import pytest
import torch

import kiln
from helpers import to_kiln, to_torch

F32 = "float32"


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return {
        "a": r(4, 6), "b": r(6, 5), "c": r(4, 5), "v": r(6), "w": r(6),
        "b3": r(2, 4, 6), "bw": r(2, 6, 6), "c3": r(2, 6, 5), "o3": r(2, 4, 5),
        "x16": r(4, 6).bfloat16(), "y16": r(4, 6).bfloat16(), "t16": r(4, 6).sigmoid().bfloat16(),
        "img": r(2, 3, 8, 8), "ker": r(4, 3, 3, 3), "kb": r(4),
        "seq": r(5, 2, 6), "q": r(2, 2, 5, 8), "k": r(2, 2, 5, 8), "vv": r(2, 2, 5, 8),
        "pw": torch.full((1,), 0.25), "a64": r(4, 6).double(), "b64": r(6, 5).double(),
        "cls": torch.tensor([0, 2, 1, 4]), "vol16": r(1, 2, 4, 4, 4).bfloat16(),
        "img16": r(1, 2, 6, 6).bfloat16(), "spd": (lambda m: (m @ m.T + 6 * torch.eye(6)))(r(6, 6)).bfloat16(),
    }


# (name, fn(lib, F, inp)); the fns run under autocast in both libraries
CASES = [
    # lower precision
    ("mm", lambda m, F, i: m.mm(i["a"], i["b"])),
    ("matmul", lambda m, F, i: m.matmul(i["b3"], i["c3"])),
    ("matmul_2d_1d", lambda m, F, i: m.matmul(i["a"], i["v"])),
    ("bmm", lambda m, F, i: m.bmm(i["b3"], i["c3"])),
    ("addmm", lambda m, F, i: m.addmm(i["c"], i["a"], i["b"])),
    ("baddbmm", lambda m, F, i: m.baddbmm(i["o3"], i["b3"], i["c3"])),
    ("addbmm", lambda m, F, i: m.addbmm(i["c"], i["b3"], i["c3"])),
    ("linear", lambda m, F, i: F.linear(i["a"], i["b"].T, i["b"][0])),
    ("linear_3d", lambda m, F, i: F.linear(i["b3"], i["b"].T)),
    ("conv2d", lambda m, F, i: F.conv2d(i["img"], i["ker"], i["kb"], padding=1)),
    ("conv_transpose1d", lambda m, F, i: F.conv_transpose1d(i["img"][:, :, 0], i["ker"][:3, :, 0])),
    ("prelu", lambda m, F, i: F.prelu(i["a"], i["pw"])),
    ("sdpa", lambda m, F, i: F.scaled_dot_product_attention(i["q"], i["k"], i["vv"])),
    ("einsum", lambda m, F, i: m.einsum("ij,jk->ik", i["a"], i["b"])),
    ("inner", lambda m, F, i: m.inner(i["a"], i["a"])),
    ("vecdot", lambda m, F, i: m.linalg.vecdot(i["a"], i["a"])),
    ("multi_dot", lambda m, F, i: m.linalg.multi_dot([i["a"], i["b"], i["b"].T])),
    # not on a list, with kernels of their own in torch: float32 stays float32
    ("dot", lambda m, F, i: m.dot(i["v"], i["w"])),
    ("mv", lambda m, F, i: m.mv(i["a"], i["v"])),
    ("addmv", lambda m, F, i: m.addmv(i["a"][:, 0], i["a"], i["v"])),
    ("outer", lambda m, F, i: m.outer(i["v"], i["w"])),
    ("tensordot", lambda m, F, i: m.tensordot(i["a"], i["b"], dims=([1], [0]))),
    ("bilinear", lambda m, F, i: F.bilinear(i["a"], i["a"], i["bw"])),
    ("add_mixed", lambda m, F, i: i["x16"] + i["a"]),
    # float32
    ("mse_loss", lambda m, F, i: F.mse_loss(i["x16"], i["y16"])),
    ("l1_loss", lambda m, F, i: F.l1_loss(i["x16"], i["y16"])),
    ("smooth_l1_loss", lambda m, F, i: F.smooth_l1_loss(i["x16"], i["y16"])),
    ("huber_loss", lambda m, F, i: F.huber_loss(i["x16"], i["y16"])),
    ("kl_div", lambda m, F, i: F.kl_div(i["x16"], i["t16"], reduction="batchmean")),
    ("bce", lambda m, F, i: F.binary_cross_entropy(i["t16"], i["t16"])),
    ("bce_logits", lambda m, F, i: F.binary_cross_entropy_with_logits(i["x16"], i["t16"])),
    ("cross_entropy", lambda m, F, i: F.cross_entropy(i["x16"][:, :5], i["cls"])),
    ("nll_loss", lambda m, F, i: F.nll_loss(i["x16"][:, :5], i["cls"])),
    ("cosine_embedding", lambda m, F, i: F.cosine_embedding_loss(i["x16"], i["y16"], m.ones(4))),
    ("margin_ranking", lambda m, F, i: F.margin_ranking_loss(i["x16"][0], i["y16"][0], m.ones(6))),
    ("prod", lambda m, F, i: i["x16"].prod(1)),
    ("trace", lambda m, F, i: i["x16"][:, :4].trace()),
    ("quantile", lambda m, F, i: m.quantile(i["x16"], 0.3)),
    ("cholesky", lambda m, F, i: m.linalg.cholesky(i["spd"])),
    ("inv", lambda m, F, i: m.linalg.inv(i["spd"])),
    ("qr", lambda m, F, i: m.linalg.qr(i["spd"])[1].abs()),
    ("eigh", lambda m, F, i: m.linalg.eigh(i["spd"])[0]),
    ("svdvals", lambda m, F, i: m.linalg.svdvals(i["spd"])),
    ("pad_reflect", lambda m, F, i: F.pad(i["img16"], (1, 1, 2, 2), mode="reflect")),
    ("pad_replicate", lambda m, F, i: F.pad(i["img16"][0], (1, 1), mode="replicate")),
    ("pad_circular", lambda m, F, i: F.pad(i["img16"][0], (1, 1), mode="circular")),
    ("max_pool2d", lambda m, F, i: F.max_pool2d(i["img16"], 2)),
    # promote
    ("cat", lambda m, F, i: m.cat([i["x16"], i["a"]])),
    ("cat_low", lambda m, F, i: m.cat([i["x16"], i["y16"]])),
    ("stack", lambda m, F, i: m.stack([i["x16"], i["a"]])),
    ("index_copy", lambda m, F, i: i["x16"].index_copy(0, m.tensor([1]), i["a"][:1])),
    # float64 is never cast
    ("mm_f64", lambda m, F, i: m.mm(i["a64"], i["b64"])),
    ("softmax_low", lambda m, F, i: m.softmax(i["x16"], 1)),
    ("layer_norm", lambda m, F, i: F.layer_norm(i["x16"], (6,))),
]


def _run(lib, fn, inp, dtype):
    F = lib.nn.functional
    ins = inp if lib is torch else {k: to_kiln(v) for k, v in inp.items()}
    with lib.autocast("cpu", dtype=getattr(lib, dtype)):
        return fn(lib, F, ins)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_op_lists_match_torch(name, fn, dtype):
    inp = _inputs()
    try:
        t = _run(torch, fn, inp, dtype)
    except RuntimeError as e:  # float16 region, bfloat16 argument: torch's promote rule raises
        with pytest.raises(RuntimeError, match="Unexpected floating ScalarType"):
            _run(kiln, fn, inp, dtype)
        assert "Unexpected floating ScalarType" in str(e)
        return
    k = _run(kiln, fn, inp, dtype)
    assert str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], name
    # torch's bilinear sums its products in the region's dtype, then returns float32
    tol = 3e-2 if t.dtype in (torch.bfloat16, torch.float16) or name == "bilinear" else 1e-4
    np.testing.assert_allclose(to_torch(k).double().numpy(), t.double().numpy(), rtol=tol, atol=tol)


def test_gradients_flow_through_the_casts():
    inp = _inputs()
    res = {}
    for lib in (torch, kiln):
        lin = lib.nn.Linear(6, 5)
        with lib.no_grad():
            lin.weight.copy_(inp["b"].T if lib is torch else to_kiln(inp["b"].T.contiguous()))
            lin.bias.copy_(inp["b"][0] if lib is torch else to_kiln(inp["b"][0].contiguous()))
        x = inp["a"].clone() if lib is torch else to_kiln(inp["a"])
        x.requires_grad_(True)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            y = lin(x)
            loss = lib.nn.functional.mse_loss(y, lib.zeros(4, 5))
        assert y.dtype == lib.bfloat16 and loss.dtype == lib.float32
        loss.backward()
        res[lib] = (x.grad.detach(), lin.weight.grad.detach(), lin.bias.grad.detach())
    for k, t in zip(res[kiln], res[torch]):
        assert str(k.dtype) .split(".")[-1] == str(t.dtype).split(".")[-1] == "float32"
        np.testing.assert_allclose(to_torch(k).numpy(), t.numpy(), rtol=3e-2, atol=3e-2)


def _lstm_bf16_reference(m, x):
    """torch's LSTM under bfloat16 autocast is oneDNN's bfloat16 primitive, which this CPU lacks (no
    AVX-512: torch raises). The same math in its place: input and weights rounded to bfloat16, the
    layer in float32 outside autocast, the output in bfloat16 (the dtype torch gives where it runs)."""
    ref = copy.deepcopy(m)
    with torch.no_grad(), torch.autocast("cpu", enabled=False):
        for p in ref.parameters():
            p.copy_(p.bfloat16().float())
        return ref(x.bfloat16().float())[0].bfloat16()


@pytest.mark.parametrize("cls", ["LSTM", "RNN", "GRU"])
def test_recurrent_layers(cls):
    inp = _inputs()
    out = {}
    for lib in (torch, kiln):
        lib.manual_seed(0)
        m = getattr(lib.nn, cls)(6, 4)
        if lib is kiln:
            m.load_state_dict({k: to_kiln(v) for k, v in tm.state_dict().items()})
        else:
            tm = m
        x = inp["seq"] if lib is torch else to_kiln(inp["seq"])
        with lib.autocast("cpu", dtype=lib.bfloat16):
            try:
                out[lib] = m(x)[0]
            except RuntimeError as e:
                if lib is kiln or cls != "LSTM" or "primitive descriptor" not in str(e):
                    raise
                out[lib] = _lstm_bf16_reference(m, x)
    assert str(out[kiln].dtype).split(".")[-1] == str(out[torch].dtype).split(".")[-1]
    np.testing.assert_allclose(to_torch(out[kiln].detach()).float().numpy(), out[torch].detach().float().numpy(),
                               rtol=5e-2, atol=5e-2)


def test_region_state_nesting_and_decorator():
    assert not kiln.is_autocast_enabled("cpu")
    assert kiln.get_autocast_dtype("cpu") == kiln.bfloat16
    a = kiln.randn(3, 3)
    with kiln.autocast("cpu"):
        assert kiln.is_autocast_enabled("cpu") and (a @ a).dtype == kiln.bfloat16
        with kiln.autocast("cpu", enabled=False):
            assert not kiln.is_autocast_enabled("cpu") and (a @ a).dtype == kiln.float32
        with kiln.amp.autocast("cpu", dtype=kiln.float16):
            assert (a @ a).dtype == kiln.float16
        assert (a @ a).dtype == kiln.bfloat16
    assert not kiln.is_autocast_enabled("cpu") and (a @ a).dtype == kiln.float32

    @kiln.autocast("cpu")
    def f(x):
        return x @ x
    assert f(a).dtype == kiln.bfloat16 and not kiln.is_autocast_enabled("cpu")


def test_region_restores_after_an_error():
    a = kiln.randn(3, 3)
    with pytest.raises(RuntimeError):
        with kiln.autocast("cpu"):
            kiln.mm(a, kiln.randn(4, 4))
    assert not kiln.is_autocast_enabled("cpu") and (a @ a).dtype == kiln.float32


def test_bad_arguments_as_torch():
    for lib in (torch, kiln):
        with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
            lib.autocast(lib.device("cpu"))
        with pytest.raises(RuntimeError, match="tpu"):
            lib.autocast("tpu")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with lib.autocast("cpu", dtype=lib.float32):
                assert not lib.is_autocast_enabled("cpu")
        assert any("CPU Autocast only supports" in str(x.message) for x in w)


def test_weight_cast_is_cached_within_a_region():
    lin = kiln.nn.Linear(4, 4)
    x = kiln.randn(2, 4)
    with kiln.autocast("cpu"):
        y1 = lin(x)
        # the cached bfloat16 weight serves the second call; a fresh region recasts
        with kiln.no_grad():
            lin.weight.mul_(2)
        y2 = lin(x)
    assert kiln.equal(y1, y2)
    with kiln.autocast("cpu"):
        y3 = lin(x)
    assert not kiln.equal(y1, y3)


def test_custom_fwd_and_bwd():
    seen = {}

    class MyMM(kiln.autograd.Function):
        @staticmethod
        @kiln.amp.custom_fwd(device_type="cpu", cast_inputs=kiln.float32)
        def forward(ctx, a, b):
            seen["fwd"] = (a.dtype, kiln.is_autocast_enabled("cpu"))
            ctx.save_for_backward(a, b)
            return a.mm(b)

        @staticmethod
        @kiln.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            seen["bwd"] = kiln.is_autocast_enabled("cpu")
            return g.mm(b.t()), a.t().mm(g)

    a = kiln.randn(3, 3, dtype=kiln.bfloat16, requires_grad=True)
    with kiln.autocast("cpu"):
        y = MyMM.apply(a, kiln.randn(3, 3))
    assert y.dtype == kiln.float32 and seen["fwd"] == (kiln.float32, False)
    y.sum().backward()
    assert seen["bwd"] is False and a.grad.dtype == kiln.bfloat16


def _scaler_run(lib, grads_seq, **kw):
    p = lib.nn.Parameter(lib.ones(3))
    opt = lib.optim.SGD([p], lr=0.1)
    scaler = lib.amp.GradScaler("cpu", **kw)
    scales, params = [], []
    for g in grads_seq:
        opt.zero_grad()
        loss = scaler.scale((p * lib.tensor(g)).sum())
        loss.backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        params.append(p.detach().clone().tolist())
    return scales, params, scaler.state_dict()


def test_grad_scaler_schedule_matches_torch():
    inf, nan = float("inf"), float("nan")
    seq = [[1.0, 2.0, 3.0], [inf, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, nan, 1.0], [0.5, 0.5, 0.5],
           [1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [1e-3, 1.0, 1.0]]
    kw = dict(init_scale=1024.0, growth_interval=2)
    ks, kp, kst = _scaler_run(kiln, seq, **kw)
    ts, tp, tst = _scaler_run(torch, seq, **kw)
    assert ks == ts and kst == tst
    np.testing.assert_allclose(kp, tp, rtol=1e-6)


def test_grad_scaler_errors_and_state():
    for lib in (torch, kiln):
        p = lib.nn.Parameter(lib.ones(2))
        opt = lib.optim.SGD([p], lr=0.1)
        s = lib.amp.GradScaler("cpu")
        with pytest.raises(AssertionError, match="did not use scaler.scale"):
            s.step(opt)
        s.scale(p.sum()).backward()
        s.unscale_(opt)
        with pytest.raises(RuntimeError, match="already been called on this optimizer"):
            s.unscale_(opt)
        s.step(opt)
        with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
            s.step(opt)
        s.update(new_scale=8.0)
        assert s.get_scale() == 8.0
        s2 = lib.amp.GradScaler("cpu")
        s2.load_state_dict(s.state_dict())
        assert s2.state_dict() == s.state_dict()
        assert copy.deepcopy(s).get_scale() == 8.0
        d = lib.amp.GradScaler("cpu", enabled=False)
        assert d.get_scale() == 1.0 and d.state_dict() == {}
        with pytest.raises(AssertionError, match="growth factor"):
            lib.amp.GradScaler("cpu", growth_factor=1.0)
        s3 = lib.amp.GradScaler("cpu")
        p.grad = None
        p16 = lib.nn.Parameter(lib.ones(2, dtype=lib.float16))
        opt16 = lib.optim.SGD([p16], lr=0.1)
        s3.scale(p16.float().sum()).backward()
        with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients."):
            s3.unscale_(opt16)


def test_scaler_ops_match_torch():
    g = [torch.tensor([1.0, float("inf")]), torch.tensor([2.0, 4.0])]
    for lib, grads in ((torch, [x.clone() for x in g]), (kiln, [to_kiln(x.clone()) for x in g])):
        found = lib.zeros(()) if lib is kiln else torch.zeros(())
        inv = lib.full((), 0.5)
        mod = lib._C if lib is kiln else torch
        (mod._amp_foreach_non_finite_check_and_unscale_)(grads, found, inv)
        assert found.item() == 1.0
        assert grads[1].tolist() == [1.0, 2.0]
