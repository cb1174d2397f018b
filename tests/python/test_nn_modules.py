"""nn.Module machinery and the basic layers against torch.nn (same weights copied across)."""
import numpy as np
import pytest
import torch

import kiln
from kiln import nn
import kiln.nn.functional as F

from helpers import to_kiln, to_torch


def copy_params(km, tm):
    kp, tp = dict(km.named_parameters()), dict(tm.named_parameters())
    assert list(kp) == list(tp)
    with kiln.no_grad():
        for name, p in kp.items():
            p.copy_(to_kiln(tp[name].detach()))


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def run_both(km, tm, *inputs, grad=True, tol=1e-5):
    copy_params(km, tm)
    kin = [to_kiln(x).requires_grad_() if x.is_floating_point() and grad else to_kiln(x) for x in inputs]
    tin = [x.clone().requires_grad_() if x.is_floating_point() and grad else x for x in inputs]
    ky, ty = km(*kin), tm(*tin)
    close(ky, ty, tol)
    if grad:
        g = torch.randn(ty.shape, dtype=ty.dtype)
        ky.backward(to_kiln(g))
        ty.backward(g)
        for a, b in zip(kin, tin):
            if b.grad is not None:
                close(a.grad, b.grad, tol)
        kp, tp = dict(km.named_parameters()), dict(tm.named_parameters())
        for name in tp:
            if tp[name].grad is not None:
                close(kp[name].grad, tp[name].grad, tol)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4), (4,)])
def test_linear(bias, shape):
    run_both(nn.Linear(4, 3, bias=bias), torch.nn.Linear(4, 3, bias=bias), torch.randn(shape))


def test_linear_default_init_bounds_and_repr():
    m = nn.Linear(100, 7)
    w = m.weight.detach().numpy()
    assert np.abs(w).max() <= 0.1 + 1e-6 and np.abs(w).max() > 0.08
    assert repr(m) == repr(torch.nn.Linear(100, 7))
    assert repr(nn.Linear(3, 2, bias=False)) == repr(torch.nn.Linear(3, 2, bias=False))
    assert m.weight.requires_grad and isinstance(m.weight, nn.Parameter)


def test_bilinear():
    run_both(nn.Bilinear(3, 4, 2), torch.nn.Bilinear(3, 4, 2), torch.randn(5, 3), torch.randn(5, 4), tol=1e-4)


@pytest.mark.parametrize("kw", [{}, {"padding_idx": 1}, {"padding_idx": -2}, {"scale_grad_by_freq": True}])
def test_embedding(kw):
    km, tm = nn.Embedding(6, 3, **kw), torch.nn.Embedding(6, 3, **kw)
    idx = torch.tensor([[1, 2, 1], [4, 4, 0]])
    run_both(km, tm, idx)
    assert repr(km) == repr(tm)
    if "padding_idx" in kw:
        assert km.padding_idx == tm.padding_idx
        assert float(abs(nn.Embedding(6, 3, **kw).weight[tm.padding_idx]).sum()) == 0


def test_embedding_max_norm():
    km, tm = nn.Embedding(5, 4, max_norm=1.0), torch.nn.Embedding(5, 4, max_norm=1.0)
    idx = torch.tensor([0, 2, 2, 4])
    run_both(km, tm, idx)
    close(km.weight, tm.weight)


@pytest.mark.parametrize("kw", [{}, {"elementwise_affine": False}, {"bias": False}, {"eps": 1e-3}])
@pytest.mark.parametrize("ns", [4, (3, 4)])
def test_layer_norm(kw, ns):
    km, tm = nn.LayerNorm(ns, **kw), torch.nn.LayerNorm(ns, **kw)
    with torch.no_grad():
        for p in tm.parameters():
            p.uniform_(0.5, 1.5)
    run_both(km, tm, torch.randn(2, 3, 4), tol=1e-4)
    assert repr(km) == repr(tm)


def test_layer_norm_gradcheck_and_errors():
    x = kiln.randn(3, 5, dtype=kiln.float64, requires_grad=True)
    w = kiln.randn(5, dtype=kiln.float64, requires_grad=True)
    b = kiln.randn(5, dtype=kiln.float64, requires_grad=True)
    assert kiln.autograd.gradcheck(lambda x, w, b: F.layer_norm(x, (5,), w, b), (x, w, b))
    assert kiln.autograd.gradgradcheck(lambda x, w, b: F.layer_norm(x, (5,), w, b), (x, w, b))
    with pytest.raises(RuntimeError):
        F.layer_norm(kiln.randn(3, 4), (5,))
    with pytest.raises(RuntimeError):
        torch.nn.functional.layer_norm(torch.randn(3, 4), (5,))
    # "native_layer_norm" (the fused table op) in bfloat16 goes through float32
    xb = torch.randn(4, 8).bfloat16()
    close(F.layer_norm(to_kiln(xb), (8,)).float(), torch.nn.functional.layer_norm(xb, (8,)).float(), 2e-2)


@pytest.mark.parametrize("kw", [{}, {"eps": 1e-3}, {"elementwise_affine": False}])
def test_rms_norm(kw):
    run_both(nn.RMSNorm(4, **kw), torch.nn.RMSNorm(4, **kw), torch.randn(3, 4), tol=1e-5)


def test_dropout():
    x = torch.randn(1000)
    km, tm = nn.Dropout(0.3), torch.nn.Dropout(0.3)
    km.eval(), tm.eval()
    run_both(km, tm, x)
    km.train()
    y = km(to_kiln(x)).numpy()
    zeros = (y == 0).mean()
    assert 0.22 < zeros < 0.38
    kept = y != 0
    np.testing.assert_allclose(y[kept], x.numpy()[kept] / 0.7, rtol=1e-6)
    assert repr(km) == repr(tm)
    with pytest.raises(ValueError):
        nn.Dropout(1.5)


ACTS = [("ReLU", ()), ("ReLU6", ()), ("LeakyReLU", (0.2,)), ("ELU", (0.5,)), ("CELU", (1.5,)), ("SELU", ()),
        ("GELU", ()), ("SiLU", ()), ("Mish", ()), ("Softplus", (2.0, 10.0)), ("Softsign", ()),
        ("Hardtanh", (-0.5, 0.5)), ("Hardsigmoid", ()), ("Hardswish", ()), ("LogSigmoid", ()), ("Sigmoid", ()),
        ("Tanh", ()), ("Threshold", (0.1, 20.0)), ("Softmax", (1,)), ("LogSoftmax", (1,)), ("Softmin", (0,))]


@pytest.mark.parametrize("name,args", ACTS)
def test_activation_modules(name, args):
    km, tm = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    run_both(km, tm, torch.randn(4, 5) * 3, tol=1e-5)
    assert repr(km) == repr(tm)


def test_gelu_tanh_and_inplace_repr():
    run_both(nn.GELU(approximate="tanh"), torch.nn.GELU(approximate="tanh"), torch.randn(7))
    assert repr(nn.ReLU(inplace=True)) == repr(torch.nn.ReLU(inplace=True))
    assert repr(nn.LeakyReLU(0.1, True)) == repr(torch.nn.LeakyReLU(0.1, True))


def test_flatten_unflatten_identity():
    x = torch.randn(2, 3, 4, 5)
    run_both(nn.Flatten(), torch.nn.Flatten(), x)
    run_both(nn.Flatten(0, 2), torch.nn.Flatten(0, 2), x)
    run_both(nn.Unflatten(1, (3, 1)), torch.nn.Unflatten(1, (3, 1)), x)
    run_both(nn.Identity(), torch.nn.Identity(), x)
    assert repr(nn.Flatten()) == repr(torch.nn.Flatten())
    assert repr(nn.Unflatten(1, (3, 1))) == repr(torch.nn.Unflatten(1, (3, 1)))


# ---- Module machinery ----------------------------------------------------------------------------
def make_pair():
    class K(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 4)
            self.register_buffer("running", kiln.zeros(4))
            self.register_buffer("tmp", kiln.ones(2), persistent=False)
            self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Sequential(nn.ReLU(), nn.Linear(4, 2))])
            self.scale = nn.Parameter(kiln.ones(1))

        def forward(self, x):
            x = self.a(x) + self.running
            for b in self.blocks:
                x = b(x)
            return x * self.scale

    class T(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(3, 4)
            self.register_buffer("running", torch.zeros(4))
            self.register_buffer("tmp", torch.ones(2), persistent=False)
            self.blocks = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Sequential(torch.nn.ReLU(),
                                                                                          torch.nn.Linear(4, 2))])
            self.scale = torch.nn.Parameter(torch.ones(1))

        def forward(self, x):
            x = self.a(x) + self.running
            for b in self.blocks:
                x = b(x)
            return x * self.scale
    return K(), T()


def test_module_tree_names_state_dict_repr():
    km, tm = make_pair()
    assert [n for n, _ in km.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in km.named_buffers()] == [n for n, _ in tm.named_buffers()]
    assert list(km.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in km.named_modules()] == [n for n, _ in tm.named_modules()]
    assert [n for n, _ in km.named_children()] == [n for n, _ in tm.named_children()]
    assert repr(km).replace("K(", "T(") == repr(tm)
    run_both(km, tm, torch.randn(5, 3))


def test_load_state_dict_strict_report():
    km, tm = make_pair()
    sd = km.state_dict()
    km2, _ = make_pair()
    assert repr(km2.load_state_dict(sd)) == "<All keys matched successfully>"
    for k in sd:
        assert np.array_equal(km2.state_dict()[k].numpy(), sd[k].numpy())
    bad = dict(sd)
    del bad["a.bias"]
    bad["extra"] = kiln.zeros(1)
    tbad = {k: to_torch(v) for k, v in bad.items()}
    with pytest.raises(RuntimeError) as ke:
        km2.load_state_dict(bad)
    with pytest.raises(RuntimeError) as te:
        tm.load_state_dict(tbad)
    assert str(ke.value).replace("K", "T") == str(te.value)
    r, tr = km2.load_state_dict(bad, strict=False), tm.load_state_dict(tbad, strict=False)
    assert r.missing_keys == tr.missing_keys and r.unexpected_keys == tr.unexpected_keys
    bad2 = dict(sd)
    bad2["a.weight"] = kiln.zeros(2, 2)
    with pytest.raises(RuntimeError, match="size mismatch for a.weight"):
        km2.load_state_dict(bad2)


def test_train_eval_zero_grad_requires_grad_apply_to():
    km, _ = make_pair()
    km.eval()
    assert not any(m.training for m in km.modules())
    km.train()
    assert all(m.training for m in km.modules())
    km(kiln.randn(2, 3)).sum().backward()
    assert all(p.grad is not None for p in km.parameters())
    km.zero_grad(set_to_none=False)
    assert all(float(p.grad.abs().sum()) == 0 for p in km.parameters())
    km.zero_grad()
    assert all(p.grad is None for p in km.parameters())
    km.requires_grad_(False)
    assert not any(p.requires_grad for p in km.parameters())
    seen = []
    km.apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "K"
    km.to(kiln.float64)
    assert all(p.dtype == kiln.float64 for p in km.parameters())
    assert km(kiln.randn(2, 3, dtype=kiln.float64)).dtype == kiln.float64  # the C++ layers see it too


def test_setattr_rules_and_errors():
    m = nn.Module()
    m.w = nn.Parameter(kiln.ones(2))
    assert "w" in dict(m.named_parameters())
    with pytest.raises(TypeError):
        m.w = kiln.ones(2)
    m.w = None
    assert m.w is None
    with pytest.raises(KeyError):
        m.register_parameter("a.b", None)
    with pytest.raises(KeyError):
        m.register_buffer("", None)
    with pytest.raises(AttributeError):
        m.nothing
    with pytest.raises(NotImplementedError):
        m(1)


def test_forward_hooks():
    km = nn.Linear(2, 2)
    calls = []
    h1 = km.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    h2 = km.register_forward_hook(lambda mod, args, out: out + 1)
    x = kiln.ones(1, 2)
    y = km(x)
    ref = F.linear(x * 2, km.weight, km.bias) + 1
    assert kiln.allclose(y, ref)
    h1.remove(), h2.remove()
    assert kiln.allclose(km(x), F.linear(x, km.weight, km.bias))
    km.register_forward_hook(lambda mod, args, kwargs, out: calls.append(kwargs), with_kwargs=True)
    km(x)
    assert calls == [{}]


def test_containers():
    s = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    ts = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    run_both(s, ts, torch.randn(4, 2))
    assert len(s) == 3 and isinstance(s[-1], type(s[0])) and len(s[1:]) == 2
    s.append(nn.Tanh())
    assert len(s) == 4
    ml = nn.ModuleList([nn.ReLU()])
    ml.extend([nn.Tanh()])
    assert len(ml) == 2 and repr(ml) == repr(torch.nn.ModuleList([torch.nn.ReLU(), torch.nn.Tanh()]))
    md = nn.ModuleDict({"a": nn.ReLU(), "b": nn.Tanh()})
    assert list(md.keys()) == ["a", "b"] and "a" in md
    pl = nn.ParameterList([nn.Parameter(kiln.ones(2)), kiln.zeros(3)])
    assert len(pl) == 2 and [n for n, _ in pl.named_parameters()] == ["0", "1"]
    pd = nn.ParameterDict({"x": nn.Parameter(kiln.ones(1))})
    assert [n for n, _ in pd.named_parameters()] == ["x"]


# ---- init ----------------------------------------------------------------------------------------
def test_init_functions():
    ini = nn.init
    for nl, p in [("relu", None), ("tanh", None), ("leaky_relu", 0.2), ("selu", None), ("linear", None)]:
        assert ini.calculate_gain(nl, p) == pytest.approx(torch.nn.init.calculate_gain(nl, p))
    t = kiln.empty(200, 300)
    assert ini._calculate_fan_in_and_fan_out(t) == torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(200, 300))
    ini.xavier_uniform_(t)
    a = (6 / 500) ** 0.5
    assert float(t.abs().max()) <= a and float(t.abs().max()) > 0.95 * a
    ini.kaiming_normal_(t, mode="fan_out", nonlinearity="relu")
    assert float(t.std()) == pytest.approx((2 / 200) ** 0.5, rel=0.05)
    ini.trunc_normal_(t, std=1.0, a=-1.0, b=1.5)
    assert float(t.min()) >= -1.0 and float(t.max()) <= 1.5
    q = kiln.empty(30, 50)
    ini.orthogonal_(q)
    np.testing.assert_allclose((q @ q.T).numpy(), np.eye(30), atol=1e-5)
    ini.constant_(q, 0.5)
    assert float(q.mean()) == 0.5
    ini.eye_(q)
    assert float(q.sum()) == 30
    ini.normal_(t, 2.0, 0.5)
    assert float(t.mean()) == pytest.approx(2.0, abs=0.02)


def test_clip_grad_and_vector_utils():
    ps = [nn.Parameter(kiln.randn(3, 4)), nn.Parameter(kiln.randn(5))]
    tps = [torch.nn.Parameter(to_torch(p.detach())) for p in ps]
    for p, tp in zip(ps, tps):
        g = torch.randn(tp.shape) * 3
        p.grad, tp.grad = to_kiln(g), g.clone()
    for norm_type in (2.0, 1.0, float("inf")):
        kp = [nn.Parameter(p.detach().clone()) for p in ps]
        for a, b in zip(kp, ps):
            a.grad = b.grad.clone()
        tp2 = [torch.nn.Parameter(p.detach().clone()) for p in tps]
        for a, b in zip(tp2, tps):
            a.grad = b.grad.clone()
        kn = nn.utils.clip_grad_norm_(kp, 1.0, norm_type)
        tn = torch.nn.utils.clip_grad_norm_(tp2, 1.0, norm_type)
        assert float(kn) == pytest.approx(float(tn), rel=1e-5)
        for a, b in zip(kp, tp2):
            close(a.grad, b.grad)
    nn.utils.clip_grad_value_(ps, 0.5)
    torch.nn.utils.clip_grad_value_(tps, 0.5)
    for a, b in zip(ps, tps):
        close(a.grad, b.grad)
    v = nn.utils.parameters_to_vector(ps)
    close(v, torch.nn.utils.parameters_to_vector(tps))
    nn.utils.vector_to_parameters(v * 2, ps)
    close(ps[1], tps[1] * 2)


def test_save_model_load_model_roundtrip_and_torch_interop(tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    km, tm = make_pair()
    path = str(tmp_path / "m.safetensors")
    kiln.save_model(km, path)
    tm.load_state_dict(safetensors_torch.load_file(path))  # kiln's file loads into the torch twin
    for name, p in tm.state_dict().items():
        np.testing.assert_array_equal(p.numpy(), km.state_dict()[name].numpy())
    km2, _ = make_pair()
    assert kiln.load_model(km2, path) == ([], [])
    x = torch.randn(2, 3)
    close(km2(to_kiln(x)), tm(x))
    safetensors_torch.save_file(tm.state_dict(), path)  # and the reverse
    km3, _ = make_pair()
    kiln.load_model(km3, path)
    close(km3(to_kiln(x)), tm(x))


def _backward_hook_run(m, inputs_require_grad=True, replace=True):
    lin = m.nn.Sequential(m.nn.Linear(3, 2), m.nn.Tanh())
    with m.no_grad():
        lin[0].weight.copy_(m.tensor([[1., 2, 3], [4, 5, 6]]) / 10)
        lin[0].bias.fill_(0.5)
    seen = []
    h1 = lin.register_full_backward_pre_hook(lambda mod, go: (go[0] * 2,) if replace else None)
    lin.register_full_backward_hook(
        lambda mod, gi, go: seen.append(("full", tuple(None if g is None else g.tolist() for g in gi),
                                         [g.tolist() for g in go])) or ((gi[0] * 10,) if replace and gi[0] is not None
                                                                        else None))
    lin[0].register_full_backward_hook(lambda mod, gi, go: seen.append(("inner", [g.tolist() for g in go])))
    x = m.tensor([[1., -1, 2], [0.5, 0, -1]], requires_grad=inputs_require_grad)
    lin(x).sum().backward()
    h1.remove()
    lin(x).sum().backward()  # the pre-hook is gone
    return seen, (x.grad.tolist() if inputs_require_grad else None), lin[0].weight.grad.tolist()


@pytest.mark.parametrize("inputs_require_grad,replace", [(True, True), (False, False), (True, False)])
def test_full_backward_hooks_match_torch(inputs_require_grad, replace):
    import warnings
    with warnings.catch_warnings(record=True) as kw:
        warnings.simplefilter("always")
        k = _backward_hook_run(kiln, inputs_require_grad, replace)
    with warnings.catch_warnings(record=True) as tw:
        warnings.simplefilter("always")
        t = _backward_hook_run(torch, inputs_require_grad, replace)
    assert [str(w.message)[:60] for w in kw] == [str(w.message)[:60] for w in tw]
    def close(x, y):  # nested lists / tuples of floats, None and names
        if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
            return len(x) == len(y) and all(close(u, v) for u, v in zip(x, y))
        if isinstance(x, float) and isinstance(y, float):
            return abs(x - y) <= 1e-5 * max(1.0, abs(y))
        return x == y
    assert close(k[0], t[0]), (k[0], t[0])  # the same hook calls, in order, with the same gradients
    if inputs_require_grad:
        np.testing.assert_allclose(k[1], t[1], rtol=1e-6)
    np.testing.assert_allclose(k[2], t[2], rtol=1e-6)


def test_full_backward_hook_wrong_count_raises():
    for m in (kiln, torch):
        lin = m.nn.Linear(2, 2)
        lin.register_full_backward_hook(lambda mod, gi, go: (gi[0], gi[0]))
        with pytest.raises(RuntimeError, match="invalid number"):
            lin(m.ones(1, 2, requires_grad=True)).sum().backward()


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_layer_argument_errors_like_torch(lib):
    """torch raises some of these only in forward; kiln may raise them when the layer is built (same class)."""
    x = lib.ones(1, 1, 5, 5)
    with pytest.raises(RuntimeError):
        lib.nn.Conv2d(1, 1, (3, 3, 3))(x)
    with pytest.raises(RuntimeError):
        lib.nn.Conv2d(1, 1, 3, stride=(1, 1, 1))(x)
    with pytest.raises(RuntimeError):
        lib.nn.MaxPool2d((3, 3, 3))(x)
    with pytest.raises(RuntimeError, match="kernel size should be greater than zero"):
        lib.nn.Conv2d(1, 1, 0)(x)
    for w in (lib.ones(1, 1, 0, 3), lib.ones(1, 1, 3, 0)):
        with pytest.raises(RuntimeError, match="kernel size should be greater than zero"):
            lib.nn.functional.conv2d(x, w)
    with pytest.raises(RuntimeError, match="kernel size should be greater than zero"):
        lib.nn.functional.conv_transpose2d(x, lib.ones(1, 1, 0, 0))
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        lib.nn.Embedding(3, 2, padding_idx=5)
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        lib.nn.Embedding(3, 2, padding_idx=-4)
    with pytest.raises(AssertionError, match="2-dimensional"):
        lib.nn.Embedding.from_pretrained(lib.ones(3))
    m = lib.nn.MultiheadAttention(4, 2, kdim=3, vdim=4)
    with pytest.raises(AssertionError, match=r"expecting key weights shape of \(4, 5\)"):
        m(lib.ones(2, 1, 4), lib.ones(3, 1, 5), lib.ones(3, 1, 4))
    with pytest.raises(AssertionError, match=r"expecting value weights shape of \(4, 6\)"):
        m(lib.ones(2, 1, 4), lib.ones(3, 1, 3), lib.ones(3, 1, 6))
    assert m(lib.ones(2, 1, 4), lib.ones(3, 1, 3), lib.ones(3, 1, 4))[0].shape == (2, 1, 4)
