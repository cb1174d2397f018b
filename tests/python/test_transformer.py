"""MultiheadAttention, TransformerEncoderLayer, TransformerDecoderLayer and TransformerEncoder against
torch.nn (weights copied by name, same inputs): outputs, attention weights, input and parameter
gradients, masks of every kind, batch_first both ways, reprs and errors."""
import copy

import pytest
import torch

import kiln
from kiln.nn import transformer as ktr
from kiln.nn import layers as klayers

from helpers import to_kiln
from layer_helpers import close, compare, raises_like, sync

tnn = torch.nn
TOL = 2e-5


def rnd(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def both(name, *args, **kw):
    return getattr(ktr, name)(*args, **kw), getattr(tnn, name)(*args, **kw)


def bool_mask(*shape, seed=3, p=0.3):
    m = torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) < p
    m[..., 0] = False  # no fully masked row (torch's two paths disagree there: NaN vs 0)
    return m


def float_mask(m):
    return torch.zeros(m.shape).masked_fill(m, float("-inf")) + rnd(*m.shape, seed=7) * 0.1


L, S, N, E, H = 4, 5, 2, 8, 2


# ---- MultiheadAttention ----------------------------------------------------------------------------
MHA_KW = [
    {},
    {"bias": False},
    {"add_bias_kv": True},
    {"add_zero_attn": True},
    {"add_bias_kv": True, "add_zero_attn": True},
    {"kdim": 3, "vdim": 5},
    {"batch_first": True},
    {"kdim": 6, "vdim": 6, "batch_first": True, "add_zero_attn": True},
]


@pytest.mark.parametrize("kw", MHA_KW)
@pytest.mark.parametrize("need_weights,avg", [(True, True), (True, False), (False, True)])
def test_mha_cross_attention(kw, need_weights, avg):
    km, tm = both("MultiheadAttention", E, H, **kw)
    kd, vd = kw.get("kdim", E), kw.get("vdim", E)
    bf = kw.get("batch_first", False)
    shp = (lambda n, l, e: (n, l, e)) if bf else (lambda n, l, e: (l, n, e))
    q, k, v = rnd(*shp(N, L, E)), rnd(*shp(N, S, kd), seed=1), rnd(*shp(N, S, vd), seed=2)
    compare(km, tm, q, k, v, need_weights=need_weights, average_attn_weights=avg, tol=TOL)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_self_attention_and_unbatched(batch_first, need_weights):
    km, tm = both("MultiheadAttention", E, H, batch_first=batch_first)
    sync(km, tm)
    x = rnd(N, L, E)
    kx, tx = to_kiln(x).requires_grad_(), x.clone().requires_grad_()
    ky, kw_ = km(kx, kx, kx, need_weights=need_weights)
    ty, tw = tm(tx, tx, tx, need_weights=need_weights)
    close(ky, ty, TOL)
    if need_weights:
        close(kw_, tw, TOL)
    else:
        assert kw_ is None and tw is None
    g = rnd(*ty.shape, seed=5)
    ky.backward(to_kiln(g)), ty.backward(g)
    close(kx.grad, tx.grad, TOL)
    close(km.in_proj_weight.grad, tm.in_proj_weight.grad, TOL)
    # unbatched (L, E) inputs, with a 3-D (num_heads, L, S) mask
    m3 = bool_mask(H, L, S)
    compare(km, tm, rnd(L, E), rnd(S, E, seed=1), rnd(S, E, seed=2), attn_mask=m3, need_weights=need_weights,
            key_padding_mask=bool_mask(S, seed=4), tol=TOL)


MASKS = ["attn2d_bool", "attn2d_float", "attn3d_bool", "attn3d_float", "kpm_bool", "kpm_float", "both",
         "causal"]


def make_masks(kind):
    if kind == "attn2d_bool":
        return {"attn_mask": bool_mask(L, S)}
    if kind == "attn2d_float":
        return {"attn_mask": float_mask(bool_mask(L, S))}
    if kind == "attn3d_bool":
        return {"attn_mask": bool_mask(N * H, L, S)}
    if kind == "attn3d_float":
        return {"attn_mask": float_mask(bool_mask(N * H, L, S))}
    if kind == "kpm_bool":
        return {"key_padding_mask": bool_mask(N, S)}
    if kind == "kpm_float":
        return {"key_padding_mask": float_mask(bool_mask(N, S))}
    if kind == "both":
        return {"attn_mask": float_mask(bool_mask(L, S)), "key_padding_mask": float_mask(bool_mask(N, S, seed=4))}
    return {"attn_mask": torch.triu(torch.full((L, S), float("-inf")), 1), "is_causal": True}


@pytest.mark.parametrize("kind", MASKS)
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("kw", [{}, {"add_bias_kv": True, "add_zero_attn": True, "batch_first": True}])
def test_mha_masks(kind, need_weights, kw):
    km, tm = both("MultiheadAttention", E, H, **kw)
    bf = kw.get("batch_first", False)
    q = rnd(N, L, E) if bf else rnd(L, N, E)
    k = rnd(N, S, E, seed=1) if bf else rnd(S, N, E, seed=1)
    compare(km, tm, q, k, k.clone(), need_weights=need_weights, tol=TOL, **make_masks(kind))


def test_mha_eval_mode_dropout_and_no_grad():
    km, tm = both("MultiheadAttention", E, H, dropout=0.5)
    km.eval(), tm.eval()
    q, k = rnd(L, N, E), rnd(S, N, E, seed=1)
    compare(km, tm, q, k, k, tol=TOL)
    compare(km, tm, q, k, k, need_weights=False, tol=TOL)
    with torch.no_grad(), kiln.no_grad():  # torch takes its native fast path here
        x = rnd(N, L, E)
        km2, tm2 = both("MultiheadAttention", E, H, batch_first=True)
        km2.eval(), tm2.eval()
        sync(km2, tm2)
        kx = to_kiln(x)
        close(km2(kx, kx, kx, key_padding_mask=to_kiln(bool_mask(N, L)))[0],
              tm2(x, x, x, key_padding_mask=bool_mask(N, L))[0], TOL)


def test_mha_dropout_in_training_zeroes_weights():
    km = ktr.MultiheadAttention(E, H, dropout=0.5)
    q = to_kiln(rnd(L, N, E))
    _, w = km(q, q, q, average_attn_weights=False)
    w = w.detach().numpy()
    assert (w == 0).sum() > 0 and abs(w.sum(-1).mean() - 1.0) < 0.5


def test_mha_parameters_init_and_repr():
    for kw in [{}, {"kdim": 3, "vdim": 5, "add_bias_kv": True}, {"bias": False}]:
        km, tm = both("MultiheadAttention", E, H, **kw)
        assert repr(km) == repr(tm)
        assert [n for n, _ in km.named_parameters()] == [n for n, _ in tm.named_parameters()]
        assert list(km.state_dict()) == list(tm.state_dict())
        for (n, kp), (_, tp) in zip(km.named_parameters(), tm.named_parameters()):
            assert tuple(kp.shape) == tuple(tp.shape), n
    km = ktr.MultiheadAttention(E, H)
    assert float(km.in_proj_bias.abs().sum().item()) == 0 and float(km.out_proj.bias.abs().sum().item()) == 0
    bound = (6 / (E + 3 * E)) ** 0.5  # xavier_uniform on (3E, E)
    assert float(km.in_proj_weight.abs().max().item()) <= bound + 1e-6
    assert km.bias_k is None and km.head_dim == E // H and km._qkv_same_embed_dim
    assert not ktr.MultiheadAttention(E, H, kdim=3)._qkv_same_embed_dim


def test_mha_functional():
    km, tm = both("MultiheadAttention", E, H)
    sync(km, tm)
    q, k = rnd(L, N, E), rnd(S, N, E, seed=1)
    args = lambda m, conv: (conv(q), conv(k), conv(k), E, H, m.in_proj_weight, m.in_proj_bias, None, None,  # noqa: E731
                            False, 0.0, m.out_proj.weight, m.out_proj.bias)
    ko = kiln._C.multi_head_attention_forward(*args(km, to_kiln), training=False)
    to = torch.nn.functional.multi_head_attention_forward(*args(tm, lambda t: t), training=False)
    close(ko[0], to[0].detach(), TOL)
    close(ko[1], to[1].detach(), TOL)


def test_mha_errors():
    raises_like(lambda: ktr.MultiheadAttention(6, 4), lambda: tnn.MultiheadAttention(6, 4))
    raises_like(lambda: ktr.MultiheadAttention(0, 2), lambda: tnn.MultiheadAttention(0, 2))
    km, tm = both("MultiheadAttention", E, H)
    q, k = rnd(L, N, E), rnd(S, N, E, seed=1)
    cases = [
        ((rnd(1, L, N, E), k, k), {}),  # 4-D query
        ((q, rnd(S, E), k), {}),  # 3-D query with a 2-D key
        ((q, k, k), {"attn_mask": bool_mask(L, L)}),  # 2-D mask of the wrong shape
        ((q, k, k), {"attn_mask": bool_mask(H, L, S)}),  # 3-D mask of the wrong shape
        ((q, k, k), {"attn_mask": bool_mask(1, 1, L, S)}),  # 4-D mask
        ((q, k, k), {"attn_mask": bool_mask(L, S).int()}),  # int mask
        ((q, k, k), {"key_padding_mask": bool_mask(N, S + 1)}),  # wrong key padding shape
        ((q, k, k), {"key_padding_mask": bool_mask(N, S, 2)}),  # 3-D key padding mask
        ((q, k, k), {"is_causal": True}),  # is_causal without a mask
        ((rnd(L, N, E + 1), k, k), {}),  # wrong embedding size
        ((q, k, rnd(S + 1, N, E)), {}),  # key / value shapes differ
    ]
    for args, kw in cases:
        raises_like(lambda: km(*[to_kiln(a) for a in args], **{n: to_kiln(v) if isinstance(v, torch.Tensor) else v
                                                             for n, v in kw.items()}),
                    lambda: tm(*args, **kw))


# ---- Transformer layers ----------------------------------------------------------------------------
LAYER_KW = [
    {},
    {"norm_first": True},
    {"activation": "gelu", "batch_first": True},
    {"bias": False, "layer_norm_eps": 1e-3},
    {"norm_first": True, "batch_first": True, "activation": "gelu"},
]


def layer_pair(name, kw, d=E, h=H, ff=16, dropout=0.0):
    return both(name, d, h, ff, dropout, **kw)


@pytest.mark.parametrize("kw", LAYER_KW)
@pytest.mark.parametrize("masks", ["none", "bool", "float", "causal"])
def test_encoder_layer(kw, masks):
    km, tm = layer_pair("TransformerEncoderLayer", kw)
    assert repr(km) == repr(tm)
    bf = kw.get("batch_first", False)
    x = rnd(N, L, E) if bf else rnd(L, N, E)
    mk = {}
    if masks == "bool":
        mk = {"src_mask": bool_mask(L, L), "src_key_padding_mask": bool_mask(N, L, seed=4)}
    elif masks == "float":
        mk = {"src_mask": float_mask(bool_mask(L, L)), "src_key_padding_mask": float_mask(bool_mask(N, L, seed=4))}
    elif masks == "causal":
        mk = {"src_mask": torch.triu(torch.full((L, L), float("-inf")), 1), "is_causal": True}
    compare(km, tm, x, tol=TOL, **mk)


def test_encoder_layer_eval_unbatched_and_strided():
    km, tm = layer_pair("TransformerEncoderLayer", {}, dropout=0.3)
    km.eval(), tm.eval()
    compare(km, tm, rnd(L, N, E), tol=TOL)
    compare(km, tm, rnd(L, E), tol=TOL, src_key_padding_mask=bool_mask(L))
    compare(km, tm, rnd(N, L, E).transpose(0, 1), tol=TOL)
    with torch.no_grad(), kiln.no_grad():  # torch's fused fast path
        km2, tm2 = layer_pair("TransformerEncoderLayer", {"batch_first": True})
        km2.eval(), tm2.eval()
        sync(km2, tm2)
        x = rnd(N, L, E)
        close(km2(to_kiln(x)), tm2(x), TOL)


def test_encoder_layer_custom_activation():
    for kact, tact in [(lambda x: kiln.tanh(x), torch.tanh), (klayers.GELU(approximate="tanh"),
                                                              tnn.GELU(approximate="tanh"))]:
        km = ktr.TransformerEncoderLayer(E, H, 16, 0.0, activation=kact)
        tm = tnn.TransformerEncoderLayer(E, H, 16, 0.0, activation=tact)
        assert repr(km) == repr(tm)
        assert [n for n, _ in km.named_modules()] == [n for n, _ in tm.named_modules()]
        compare(km, tm, rnd(L, N, E), tol=TOL)
    km = ktr.TransformerEncoderLayer(E, H, 16, 0.0, activation=kiln.nn.functional.gelu)
    tm = tnn.TransformerEncoderLayer(E, H, 16, 0.0, activation=torch.nn.functional.gelu)
    compare(km, tm, rnd(L, N, E), tol=TOL)
    assert km.activation_relu_or_gelu == 2
    raises_like(lambda: ktr.TransformerEncoderLayer(E, H, activation="tanh"),
                lambda: tnn.TransformerEncoderLayer(E, H, activation="tanh"))


def test_encoder_layer_errors():
    km, tm = layer_pair("TransformerEncoderLayer", {})
    raises_like(lambda: km(to_kiln(rnd(L, N, E)), is_causal=True), lambda: tm(rnd(L, N, E), is_causal=True))
    raises_like(lambda: km(to_kiln(rnd(L, N, E)), src_mask=to_kiln(bool_mask(L, L).long())),
                lambda: tm(rnd(L, N, E), src_mask=bool_mask(L, L).long()))
    raises_like(lambda: km(to_kiln(rnd(L, N, E + 2))), lambda: tm(rnd(L, N, E + 2)))
    raises_like(lambda: ktr.TransformerEncoderLayer(6, 4), lambda: tnn.TransformerEncoderLayer(6, 4))


@pytest.mark.parametrize("kw", LAYER_KW)
@pytest.mark.parametrize("masks", ["none", "bool", "float", "causal"])
def test_decoder_layer(kw, masks):
    km, tm = layer_pair("TransformerDecoderLayer", kw)
    assert repr(km) == repr(tm)
    bf = kw.get("batch_first", False)
    tgt = rnd(N, L, E) if bf else rnd(L, N, E)
    mem = rnd(N, S, E, seed=1) if bf else rnd(S, N, E, seed=1)
    mk = {}
    if masks == "bool":
        mk = {"tgt_mask": bool_mask(L, L), "memory_mask": bool_mask(L, S, seed=5),
              "tgt_key_padding_mask": bool_mask(N, L, seed=4), "memory_key_padding_mask": bool_mask(N, S, seed=6)}
    elif masks == "float":
        mk = {"tgt_mask": float_mask(bool_mask(L, L)), "memory_key_padding_mask": float_mask(bool_mask(N, S))}
    elif masks == "causal":
        mk = {"tgt_mask": torch.triu(torch.full((L, L), float("-inf")), 1), "tgt_is_causal": True}
    compare(km, tm, tgt, mem, tol=TOL, **mk)


def test_decoder_layer_eval_and_unbatched():
    km, tm = layer_pair("TransformerDecoderLayer", {"norm_first": True}, dropout=0.2)
    km.eval(), tm.eval()
    compare(km, tm, rnd(L, E), rnd(S, E, seed=1), tol=TOL, memory_key_padding_mask=bool_mask(S))


# ---- TransformerEncoder ----------------------------------------------------------------------------
@pytest.mark.parametrize("norm", [False, True])
@pytest.mark.parametrize("kw", [{}, {"batch_first": True, "norm_first": True}])
@pytest.mark.parametrize("masks", ["none", "kpm", "causal_detected", "causal_hint"])
def test_encoder(norm, kw, masks):
    kl, tl = layer_pair("TransformerEncoderLayer", kw)
    km = ktr.TransformerEncoder(kl, 2, norm=kiln.nn.LayerNorm(E) if norm else None, enable_nested_tensor=False)
    tm = tnn.TransformerEncoder(tl, 2, norm=tnn.LayerNorm(E) if norm else None, enable_nested_tensor=False)
    assert list(km.state_dict()) == list(tm.state_dict())
    assert len(km.layers) == 2 and km.num_layers == 2
    bf = kw.get("batch_first", False)
    x = rnd(N, L, E) if bf else rnd(L, N, E)
    causal = torch.triu(torch.full((L, L), float("-inf")), 1)
    mk = {"none": {}, "kpm": {"src_key_padding_mask": bool_mask(N, L)},
          "causal_detected": {"mask": causal}, "causal_hint": {"mask": causal, "is_causal": True}}[masks]
    compare(km, tm, x, tol=TOL, **mk)


def test_encoder_layers_are_independent_copies():
    kl = ktr.TransformerEncoderLayer(E, H, 16, 0.0)
    enc = ktr.TransformerEncoder(kl, 3)
    ids = {id(p) for layer in enc.layers for p in layer.parameters()}
    assert len(ids) == 3 * len(list(kl.parameters()))
    assert not ids & {id(p) for p in kl.parameters()}
    # copies start equal to the original and train independently
    close(enc.layers[2].linear1.weight, torch.from_numpy(kl.linear1.weight.detach().numpy()))
    with kiln.no_grad():
        enc.layers[0].linear1.weight.fill_(0.5)
    assert float(enc.layers[1].linear1.weight.abs().max().item()) != 0.5
    assert float(kl.linear1.weight.abs().max().item()) != 0.5
    # deepcopy of a layer is a copy too
    c = copy.deepcopy(kl)
    assert repr(c) == repr(kl) and next(iter(c.parameters())) is not next(iter(kl.parameters()))


def test_encoder_custom_norm_and_train_eval():
    kl, tl = layer_pair("TransformerEncoderLayer", {}, dropout=0.4)
    km = ktr.TransformerEncoder(kl, 2, norm=kiln.nn.RMSNorm(E))
    tm = tnn.TransformerEncoder(tl, 2, norm=tnn.RMSNorm(E), enable_nested_tensor=False)
    km.eval(), tm.eval()
    assert not km.layers[1].dropout.training and not km.layers[1]._cpp.training
    compare(km, tm, rnd(L, N, E), tol=TOL)
    with pytest.raises(TypeError):
        ktr.TransformerEncoder(kiln.nn.Linear(2, 2), 2)
