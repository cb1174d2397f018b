"""Fused scaled-dot-product attention (`_sdpa_flash`, `_sdpa_flash_backward`,
`scaled_dot_product_attention`) vs torch.nn.functional.scaled_dot_product_attention and torch
autograd: batch shapes, broadcasting, GQA, causal, masks, scale, dtypes, strided inputs, empty
sizes, errors, dropout and the memory bound."""
import math

import pytest
import torch
import torch.nn.functional as F

import kiln
from helpers import assert_same, check, make, to_kiln, to_torch

TOLS = {"float32": (1e-4, 2e-5), "float64": (1e-9, 1e-10), "bfloat16": (3e-2, 3e-2),
        "float16": (5e-3, 5e-3)}
GRAD_TOLS = {"float32": (1e-4, 5e-5), "float64": (1e-9, 1e-10), "bfloat16": (6e-2, 6e-2),
             "float16": (1e-2, 1e-2)}


def sdpa(m):
    return F.scaled_dot_product_attention if m is torch else kiln.scaled_dot_product_attention


def rnd(shape, dtype="float32", seed=0):
    return make(shape, dtype, low=-2.0, high=2.0, seed=seed)


def torch_ref(q, k, v, mask=None, causal=False, scale=None, gqa=False, g=None, mask_grad=False):
    """torch's output and its gradients (q, k, v[, mask]) for upstream gradient g."""
    tq, tk, tv = (x.detach().clone().requires_grad_() for x in (q, k, v))
    tm = tmask = mask
    if mask is not None and mask_grad:
        tm = tmask = mask.detach().clone().requires_grad_()
    if mask is not None and mask.dim() < 2:  # torch's autograd path rejects 0-/1-D masks
        tmask = tm.expand(q.shape[-2], k.shape[-2])
    out = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask, is_causal=causal, scale=scale,
                                         enable_gqa=gqa)
    if g is None:
        g = make(tuple(out.shape), str(q.dtype).split(".")[-1], low=-1, high=1, seed=7)
    out.backward(g)
    grads = [tq.grad, tk.grad, tv.grad] + ([tm.grad] if mask_grad else [])
    return out.detach(), grads, g


def kiln_fwd_bwd(q, k, v, g, mask=None, causal=False, scale=None, gqa=False, mask_grad=False):
    km = to_kiln(mask) if mask is not None else None
    kq, kk, kv = to_kiln(q), to_kiln(k), to_kiln(v)
    out, lse, rng = kiln._C._sdpa_flash(kq, kk, kv, km, is_causal=causal, scale=scale,
                                        enable_gqa=gqa)
    dq, dk, dv, dm = kiln._C._sdpa_flash_backward(to_kiln(g), kq, kk, kv, out, lse, rng, km,
                                                   is_causal=causal, scale=scale, enable_gqa=gqa,
                                                   mask_grad=mask_grad)
    return out, [dq, dk, dv] + ([dm] if mask_grad else []), lse


def compare(q, k, v, mask=None, causal=False, scale=None, gqa=False, mask_grad=False, msg=""):
    dt = str(q.dtype).split(".")[-1]
    tout, tgrads, g = torch_ref(q, k, v, mask, causal, scale, gqa, mask_grad=mask_grad)
    kout, kgrads, lse = kiln_fwd_bwd(q, k, v, g, mask, causal, scale, gqa, mask_grad)
    r, a = TOLS[dt]
    assert_same(kout, tout, rtol=r, atol=a, msg=f"out {msg}")
    # the front end gives the same forward
    kfront = kiln.scaled_dot_product_attention(
        to_kiln(q), to_kiln(k), to_kiln(v), to_kiln(mask) if mask is not None else None,
        is_causal=causal, scale=scale, enable_gqa=gqa)
    assert_same(kfront, tout, rtol=r, atol=a, msg=f"front end {msg}")
    r, a = GRAD_TOLS[dt]
    for name, kg_, tg in zip(["dq", "dk", "dv", "dmask"], kgrads, tgrads):
        assert_same(kg_, tg, rtol=r, atol=a, msg=f"{name} {msg}")
    return lse


SHAPES = [  # q, k, v shapes
    ((9, 8), (11, 8), (11, 8)),                              # 2-D
    ((3, 9, 8), (3, 11, 8), (3, 11, 5)),                     # (B, L, E), Ev != E
    ((2, 3, 70, 16), (2, 3, 150, 16), (2, 3, 150, 24)),      # (B, H, L, E), odd tile remainders
    ((2, 2, 3, 13, 8), (2, 2, 3, 17, 8), (2, 2, 3, 17, 8)),  # (B1, B2, H, L, E)
    ((2, 1, 9, 8), (1, 3, 11, 8), (3, 11, 6)),               # broadcast batch dims
    ((9, 8), (2, 11, 8), (2, 11, 8)),                        # q broadcast against batched k/v
    ((1, 2, 200, 32), (1, 2, 260, 32), (1, 2, 260, 32)),     # several tiles each way
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shapes", SHAPES, ids=[str(s[0]) for s in SHAPES])
def test_forward_backward_shapes(shapes, causal):
    q, k, v = (rnd(s, seed=i) for i, s in enumerate(shapes))
    compare(q, k, v, causal=causal, msg=f"{shapes} causal={causal}")


@pytest.mark.parametrize("L,S", [(5, 17), (17, 5), (130, 129), (1, 1), (64, 300), (300, 64)])
def test_causal_rectangular(L, S):
    q, k, v = rnd((2, L, 16), seed=1), rnd((2, S, 16), seed=2), rnd((2, S, 12), seed=3)
    compare(q, k, v, causal=True, msg=f"L={L} S={S}")


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_dtypes(dtype):
    shapes = [(2, 2, 37, 16), (2, 2, 45, 16), (2, 2, 45, 16)]
    q, k, v = (rnd(s, dtype, i) for i, s in enumerate(shapes))
    compare(q, k, v, msg=dtype)
    compare(q, k, v, causal=True, msg=dtype + " causal")
    mask = make((37, 45), "float32", seed=4) if dtype != "float64" else rnd((37, 45), "float64", 4)
    compare(q, k, v, mask=mask, mask_grad=True, msg=dtype + " float mask")
    compare(q, k, v, mask=rnd((2, 1, 37, 45), dtype, 5), mask_grad=True,
            msg=dtype + " same-dtype mask")


MASKS = [(9, 11), (11,), (1, 11), (9, 1), (2, 1, 9, 11), (1, 3, 1, 11), (2, 3, 9, 11), ()]


@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("mshape", MASKS, ids=[str(m) for m in MASKS])
def test_masks_broadcast(mshape, kind):
    q, k, v = rnd((2, 3, 9, 8), seed=1), rnd((2, 3, 11, 8), seed=2), rnd((2, 3, 11, 8), seed=3)
    if kind == "bool":
        mask = torch.rand(mshape, generator=torch.Generator().manual_seed(5)) > 0.3
        compare(q, k, v, mask=mask, msg=f"bool {mshape}")
    else:
        mask = make(mshape, "float32", seed=5)
        compare(q, k, v, mask=mask, mask_grad=True, msg=f"float {mshape}")


def test_mask_matching_dtype_and_strided():
    q, k, v = (rnd((2, 9, 8), "float64", i) for i in range(3))
    mask = rnd((11, 9), "float64", 4).t()[:, :9]  # non-contiguous float64 mask
    compare(q, k, v, mask=mask, mask_grad=True, msg="strided f64 mask")


def test_fully_masked_rows_give_zeros():
    q, k, v = rnd((2, 2, 6, 8), seed=1), rnd((2, 2, 7, 8), seed=2), rnd((2, 2, 7, 8), seed=3)
    bmask = torch.rand(6, 7, generator=torch.Generator().manual_seed(0)) > 0.4
    bmask[2] = False
    bmask[5] = False
    fmask = torch.zeros(6, 7).masked_fill(~bmask, float("-inf"))
    for mask in (bmask, fmask):
        compare(q, k, v, mask=mask, msg=str(mask.dtype))
        out = kiln.scaled_dot_product_attention(to_kiln(q), to_kiln(k), to_kiln(v), to_kiln(mask))
        assert (to_torch(out)[:, :, 2] == 0).all() and not to_torch(out).isnan().any()
    _, lse, _ = kiln._C._sdpa_flash(to_kiln(q), to_kiln(k), to_kiln(v), to_kiln(bmask))
    assert (to_torch(lse)[:, :, 2] == float("-inf")).all()


@pytest.mark.parametrize("scale", [0.3, 2.0, -0.5, 0.0])
def test_custom_scale(scale):
    q, k, v = rnd((2, 13, 8), seed=1), rnd((2, 21, 8), seed=2), rnd((2, 21, 8), seed=3)
    compare(q, k, v, scale=scale, msg=f"scale={scale}")
    compare(q, k, v, scale=scale, causal=True, msg=f"causal scale={scale}")


GQA = [  # q, k, v shapes with enable_gqa
    ((2, 8, 19, 16), (2, 2, 23, 16), (2, 2, 23, 16)),
    ((2, 4, 19, 16), (2, 2, 23, 16), (2, 1, 23, 8)),   # k and v with different head counts
    ((6, 19, 16), (3, 23, 16), (3, 23, 16)),           # 3-D: dim -3 is the head dim
    ((3, 4, 19, 16), (1, 2, 23, 16), (1, 2, 23, 16)),  # broadcast batch + GQA
    ((2, 2, 4, 9, 8), (2, 2, 2, 11, 8), (2, 2, 2, 11, 8)),
    ((2, 3, 9, 8), (2, 3, 11, 8), (2, 3, 11, 8)),      # equal heads: no-op
]


@pytest.mark.parametrize("shapes", GQA, ids=[str(s) for s in GQA])
def test_gqa(shapes):
    q, k, v = (rnd(s, seed=i) for i, s in enumerate(shapes))
    compare(q, k, v, gqa=True, msg=str(shapes))
    compare(q, k, v, gqa=True, causal=True, msg=f"causal {shapes}")
    mask = make((shapes[0][-2], shapes[1][-2]), "float32", seed=9)
    compare(q, k, v, gqa=True, mask=mask, mask_grad=True, msg=f"mask {shapes}")


def test_strided_inputs():
    B, L, S, H, E = 2, 33, 41, 3, 16
    # (B, L, H, E).transpose(1, 2), as attention layers produce
    q = rnd((B, L, H, E), seed=1).transpose(1, 2)
    k = rnd((B, S, H, E), seed=2).transpose(1, 2)
    v = rnd((B, S, H, E), seed=3).transpose(1, 2)
    compare(q, k, v, msg="transposed heads")
    compare(q, k, v, causal=True, msg="transposed heads causal")
    # last-dim strided, sliced and expanded operands
    k2 = rnd((B, H, E, S), seed=4).transpose(-1, -2)
    v2 = rnd((B, H, S, 2 * E), seed=5)[..., ::2]
    q2 = rnd((1, H, L, E), seed=6).expand(B, H, L, E)
    compare(q2, k2, v2, msg="strided last dims / expanded")
    k3 = rnd((B, H, 1, E), seed=7).expand(B, H, S, E)  # rows with stride 0
    compare(q, k3, v, msg="stride-0 rows")


@pytest.mark.parametrize("shapes", [
    ((0, 4, 8), (0, 5, 8), (0, 5, 8)),   # no batch entries
    ((2, 0, 8), (2, 5, 8), (2, 5, 8)),   # L = 0
    ((2, 4, 8), (2, 0, 8), (2, 0, 8)),   # S = 0: zeros
    ((2, 4, 0), (2, 5, 0), (2, 5, 3)),   # E = 0: uniform weights
    ((2, 4, 8), (2, 5, 8), (2, 5, 0)),   # Ev = 0
])
def test_empty(shapes):
    q, k, v = (rnd(s, seed=i) for i, s in enumerate(shapes))
    compare(q, k, v, msg=str(shapes))
    if shapes[0][1] and shapes[1][1]:
        compare(q, k, v, causal=True, msg=f"causal {shapes}")


def test_logsumexp_output():
    q, k, v = rnd((2, 3, 21, 8), seed=1), rnd((2, 3, 30, 8), seed=2), rnd((2, 3, 30, 8), seed=3)
    mask = make((21, 30), "float32", seed=4)
    _, lse, rng = kiln._C._sdpa_flash(to_kiln(q), to_kiln(k), to_kiln(v), to_kiln(mask), scale=0.7)
    ref = torch.logsumexp(q @ k.transpose(-1, -2) * 0.7 + mask, dim=-1)
    assert_same(lse, ref, rtol=1e-5, atol=1e-5)
    assert to_torch(rng).tolist() == [0, 0] and rng.dtype == kiln.int64
    _, lse64, _ = kiln._C._sdpa_flash(*(to_kiln(x.double()) for x in (q, k, v)))
    assert lse64.dtype == kiln.float64
    _, lse16, _ = kiln._C._sdpa_flash(*(to_kiln(x.bfloat16()) for x in (q, k, v)))
    assert lse16.dtype == kiln.float32


def test_logsumexp_gradient():
    """grad_logsumexp flows into q and k as d lse / d s = softmax."""
    q, k, v = (rnd(s, "float64", i) for i, s in enumerate([(2, 13, 8), (2, 17, 8), (2, 17, 8)]))
    tq, tk, tv = (x.clone().requires_grad_() for x in (q, k, v))
    s = tq @ tk.transpose(-1, -2) / math.sqrt(8)
    out = torch.softmax(s, -1) @ tv
    lse = torch.logsumexp(s, -1)
    g, gl = rnd(out.shape, "float64", 4), rnd(lse.shape, "float64", 5)
    ((out * g).sum() + (lse * gl).sum()).backward()
    kq, kk, kv = to_kiln(q), to_kiln(k), to_kiln(v)
    o, klse, rng = kiln._C._sdpa_flash(kq, kk, kv)
    dq, dk, dv, dm = kiln._C._sdpa_flash_backward(to_kiln(g), kq, kk, kv, o, klse, rng,
                                                   grad_logsumexp=to_kiln(gl))
    assert dm is None
    for a, b in zip((dq, dk, dv), (tq.grad, tk.grad, tv.grad)):
        assert_same(a, b, rtol=1e-9, atol=1e-10)


def test_errors():
    r = rnd

    def both(*args, **kw):
        t = [a for a in args]
        check(lambda m, *xs: sdpa(m)(*xs, **kw), *t, msg=str(kw))

    both(r((2, 3, 4)), r((2, 5, 4)), r((2, 5, 4)), torch.ones(3, 5, dtype=torch.bool),
         is_causal=True)
    both(r((2, 3, 4)), r((2, 5, 3)), r((2, 5, 4)))                      # E mismatch
    both(r((2, 3, 4)), r((2, 5, 4)), r((2, 6, 4)))                      # S mismatch
    both(r((4,)), r((5, 4)), r((5, 4)))                                  # dims < 2
    both(r((1, 4, 3, 4)), r((1, 3, 5, 4)), r((1, 3, 5, 4)), enable_gqa=True)  # heads don't divide
    both(r((1, 4, 3, 4)), r((1, 2, 5, 4)), r((1, 2, 5, 4)))              # GQA without the flag
    both(r((3, 4)), r((5, 4)), r((5, 4)), enable_gqa=True)               # GQA needs a head dim
    both(r((3, 2, 3, 4)), r((2, 2, 5, 4)), r((2, 2, 5, 4)))              # batch not broadcastable
    both(r((2, 3, 4)), r((2, 5, 4)), r((2, 5, 4)), torch.ones(3, 4, dtype=torch.bool))  # mask shape
    both(r((2, 3, 4)), r((2, 5, 4)), r((2, 5, 4)), torch.ones(4, 2, 3, 5))  # mask has more dims
    both(r((2, 3, 4)), r((2, 5, 4)), r((2, 5, 4)), torch.ones(3, 5, dtype=torch.int64))  # dtype
    both(r((2, 3, 4)), r((2, 5, 4)), r((2, 5, 4)), torch.ones(3, 5, dtype=torch.float64))
    both(r((2, 3, 4)), r((2, 5, 4), "float64"), r((2, 5, 4)))           # dtype mismatch
    both(r((2, 3, 4), "int64"), r((2, 5, 4), "int64"), r((2, 5, 4), "int64"))
    both(r((2, 3, 4)), r((2, 5, 4)), r((2, 5, 4)), dropout_p=1.5)
    with pytest.raises(RuntimeError, match=r"^\[scaled_dot_product_attention\] query and key"):
        kiln.scaled_dot_product_attention(to_kiln(r((2, 3, 4))), to_kiln(r((2, 5, 3))),
                                          to_kiln(r((2, 5, 4))))
    q, k, v = (to_kiln(r((2, 3, 4))) for _ in range(3))
    o, lse, rng = kiln._C._sdpa_flash(q, k, v)
    with pytest.raises(RuntimeError, match=r"^\[_sdpa_flash_backward\]"):
        kiln._C._sdpa_flash_backward(o, q, k, v, o, lse, lse)  # rng_state must be int64 (2,)
    with pytest.raises(RuntimeError, match=r"^\[_sdpa_flash_backward\]"):
        kiln._C._sdpa_flash_backward(to_kiln(r((2, 4, 4))), q, k, v, o, lse, rng)


def test_threaded_paths():
    """Two workers: per-worker mask-gradient sums (mask shared across heads) and key-block splits
    with partial dq sums (fewer (batch, head) pairs than the threads can balance)."""
    n = kiln.get_num_threads()
    kiln.set_num_threads(2)
    try:
        q, k, v = (rnd(s, seed=i) for i, s in enumerate([(1, 3, 150, 16), (1, 3, 300, 16),
                                                         (1, 3, 300, 16)]))
        for mshape in [(150, 300), (150, 1), (3, 1, 300), (1, 3, 150, 300)]:
            compare(q, k, v, mask=make(mshape, "float32", seed=4), mask_grad=True, msg=str(mshape))
        compare(q, k, v, causal=True, msg="causal split")
        compare(q[:, :1], k[:, :1], v[:, :1], causal=True, msg="one head")
        compare(rnd((2, 4, 64, 16), seed=5), rnd((2, 2, 64, 16), seed=6),
                rnd((2, 2, 64, 16), seed=7), gqa=True, mask=make((64, 64), "float32", seed=8),
                mask_grad=True, msg="gqa shared mask")
    finally:
        kiln.set_num_threads(n)


def test_autograd_end_to_end():
    """The derivative registered beside `_sdpa_flash`: gradients through kiln's autograd."""
    q, k, v = rnd((2, 4, 19, 16), seed=1), rnd((2, 2, 23, 16), seed=2), rnd((1, 2, 23, 8), seed=3)
    mask = make((19, 23), "float32", seed=4)
    tout, tgrads, g = torch_ref(q, k, v, mask, gqa=True, mask_grad=True)
    kx = [to_kiln(x).requires_grad_() for x in (q, k, v, mask)]
    out = kiln.scaled_dot_product_attention(*kx, enable_gqa=True)
    (out * to_kiln(g)).sum().backward()
    assert_same(out.detach(), tout, rtol=1e-4, atol=2e-5)
    for x, tg in zip(kx, tgrads):
        assert_same(x.grad, tg, rtol=1e-4, atol=5e-5)
    # bool mask, causal: no mask gradient, q/k/v gradients as torch
    for kw in ({"attn_mask": torch.rand(19, 23) > 0.5}, {"is_causal": True}):
        tq, tk, tv = (x.clone().requires_grad_() for x in (q, k[:, :1], v[:, :1]))
        F.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True, **kw).sum().backward()
        kq, kk, kv = (to_kiln(x).requires_grad_() for x in (q, k[:, :1], v[:, :1]))
        kkw = {n: (to_kiln(a) if isinstance(a, torch.Tensor) else a) for n, a in kw.items()}
        kiln.scaled_dot_product_attention(kq, kk, kv, enable_gqa=True, **kkw).sum().backward()
        for a, b in zip((kq, kk, kv), (tq, tk, tv)):
            assert_same(a.grad, b.grad, rtol=1e-4, atol=5e-5)


def test_autograd_logsumexp_and_dropout():
    B, L, S, E, p = 2, 21, 29, 8, 0.4
    q, k, v = (rnd(s, "float64", i) for i, s in enumerate([(B, L, E), (B, S, E), (B, S, E)]))
    eye = to_kiln(torch.eye(S, dtype=torch.float64).expand(B, S, S))
    kiln.manual_seed(5)
    w, _, _ = kiln._C._sdpa_flash(to_kiln(q), to_kiln(k), eye, dropout_p=p)
    keep = (to_torch(w) != 0).double()
    tq, tk, tv = (x.clone().requires_grad_() for x in (q, k, v))
    s = tq @ tk.transpose(-1, -2) / math.sqrt(E)
    out = (torch.softmax(s, -1) * keep / (1 - p)) @ tv
    lse = torch.logsumexp(s, -1)
    g, gl = rnd(out.shape, "float64", 4), rnd(lse.shape, "float64", 5)
    ((out * g).sum() + (lse * gl).sum()).backward()
    kq, kk, kv = (to_kiln(x).requires_grad_() for x in (q, k, v))
    kiln.manual_seed(5)
    ko, klse, _ = kiln._C._sdpa_flash(kq, kk, kv, dropout_p=p)
    ((ko * to_kiln(g)).sum() + (klse * to_kiln(gl)).sum()).backward()
    for a, b in zip((kq, kk, kv), (tq, tk, tv)):
        assert_same(a.grad, b.grad, rtol=1e-9, atol=1e-10)


# ---- dropout -------------------------------------------------------------------------------------


def test_dropout_statistics():
    kiln.manual_seed(1234)
    L, S, p = 256, 512, 0.3
    q, k = to_kiln(rnd((4, L, 16), seed=1)), to_kiln(rnd((4, S, 16), seed=2))
    ones = kiln.ones((4, S, 1))
    out, _, rng = kiln._C._sdpa_flash(q, k, ones, dropout_p=p)
    o = to_torch(out)
    # each row: sum_j P_ij * keep_ij / (1 - p); expectation 1
    assert abs(o.mean().item() - 1.0) < 0.01
    assert 0.5 < o.min().item() and o.max().item() < 1.5
    assert to_torch(rng)[1].item() >= 0
    # the dropped fraction, read off with an identity value matrix
    eye = kiln.from_numpy(torch.eye(S).numpy())
    kiln.manual_seed(99)
    w, _, _ = kiln._C._sdpa_flash(q[:1], k[:1], eye, dropout_p=p)
    dropped = (to_torch(w) == 0).double().mean().item()
    assert abs(dropped - p) < 0.01
    # p >= 1 drops everything (torch returns zeros too); p <= 0 is no dropout
    qkv = [rnd((2, 5, 4), seed=i) for i in range(3)]
    check(lambda m, a, b, c: sdpa(m)(a, b, c, dropout_p=1.0), *qkv)
    check(lambda m, a, b, c: sdpa(m)(a, b, c, dropout_p=-0.2), *qkv)


def test_dropout_reproducible_and_advances():
    q, k, v = (to_kiln(rnd((2, 17, 8), seed=i)) for i in range(3))
    kiln.manual_seed(7)
    a, _, ra = kiln._C._sdpa_flash(q, k, v, dropout_p=0.5)
    b, _, rb = kiln._C._sdpa_flash(q, k, v, dropout_p=0.5)
    kiln.manual_seed(7)
    c, _, rc = kiln._C._sdpa_flash(q, k, v, dropout_p=0.5)
    assert torch.equal(to_torch(a), to_torch(c)) and to_torch(ra).tolist() == to_torch(rc).tolist()
    assert not torch.equal(to_torch(a), to_torch(b)) and to_torch(ra)[1] != to_torch(rb)[1]


@pytest.mark.parametrize("causal", [False, True])
def test_dropout_forward_backward_consistent(causal):
    """The dropout mask is read back (values = identity), then torch's autograd of
    dropout(softmax(qk^T * scale)) @ v with that mask gives the reference output and gradients."""
    B, H, L, S, E, p = 2, 2, 37, 45, 8, 0.25
    shapes = [(B, H, L, E), (B, H, S, E), (B, H, S, 6)]
    q, k, v = (rnd(s, "float64", i) for i, s in enumerate(shapes))
    kq, kk, kv = to_kiln(q), to_kiln(k), to_kiln(v)
    eye = to_kiln(torch.eye(S, dtype=torch.float64).expand(B, H, S, S))
    kiln.manual_seed(2024)
    w, _, _ = kiln._C._sdpa_flash(kq, kk, eye, dropout_p=p, is_causal=causal)
    keep = (to_torch(w) != 0).double()
    kiln.manual_seed(2024)
    out, lse, rng = kiln._C._sdpa_flash(kq, kk, kv, dropout_p=p, is_causal=causal)
    tq, tk, tv = (x.clone().requires_grad_() for x in (q, k, v))
    s = tq @ tk.transpose(-1, -2) / math.sqrt(E)
    if causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    ref = (torch.softmax(s, -1) * keep / (1 - p)) @ tv
    g = rnd(ref.shape, "float64", 4)
    ref.backward(g)
    assert_same(out, ref.detach(), rtol=1e-9, atol=1e-10)
    dq, dk, dv, _ = kiln._C._sdpa_flash_backward(to_kiln(g), kq, kk, kv, out, lse, rng,
                                                  dropout_p=p, is_causal=causal)
    for a, b in zip((dq, dk, dv), (tq.grad, tk.grad, tv.grad)):
        assert_same(a, b, rtol=1e-9, atol=1e-10)


# ---- memory and table ----------------------------------------------------------------------------


def test_memory_far_below_score_matrix():
    B, H, L, E = 1, 2, 4096, 64
    q, k, v, g = (kiln.randn((B, H, L, E)) for _ in range(4))
    kiln.reset_peak_memory_stats()
    base = kiln.memory_stats()["allocated_bytes.all.current"]
    out, lse, rng = kiln._C._sdpa_flash(q, k, v, is_causal=True)
    grads = kiln._C._sdpa_flash_backward(g, q, k, v, out, lse, rng, is_causal=True)
    peak = kiln.memory_stats()["allocated_bytes.all.peak"] - base
    score_matrix = L * L * 4  # one head's (L, S) float32 scores
    io = 4 * B * H * L * E * 4  # out + dq + dk + dv
    assert peak < score_matrix / 2, f"peak {peak / 2**20:.1f} MiB"
    assert peak < 3 * io, f"peak {peak / 2**20:.1f} MiB vs outputs {io / 2**20:.1f} MiB"
    assert tuple(grads[0].shape) == (B, H, L, E)


def test_ops_registered():
    ops = kiln.registered_ops()
    assert "_sdpa_flash" in ops and "_sdpa_flash_backward" in ops
