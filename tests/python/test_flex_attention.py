"""kiln.nn.attention.flex_attention vs torch 2.13's torch.nn.attention.flex_attention.

What is compared with what:
- forward (out, lse): kiln vs torch's eager flex_attention on the same inputs and the same torch BlockMask
  (torch's CPU eager path materialises the scores and applies mask_mod densely; it gives the forward only),
  and vs `ref_attention`, a dense float64 reference written with plain torch ops on the same (rounded)
  inputs: score = (q @ k^T) * scale, score_mod, masked scores -inf, a softmax that gives zero rows where a
  row is all masked, out = P @ v, lse = logsumexp (-inf for masked rows), max_scores = the row max.
  Cases: causal, sliding window, prefix-LM, document masking (a captured int64 doc-id vector), ALiBi
  (captured per-head slopes), tanh soft-capping, relative-position bias (a captured table), kiln.where
  score_mods, a score_mod that masks with -inf, GQA, Ev != E, L != S, lengths that are not multiples of
  the block size, BLOCK_SIZE 128 / 64 / (64, 32) / 32, no block mask at all, masks built with B and H
  None (broadcast) and with real B, H dependence, rows masked entirely; float32, float64, bfloat16,
  float16.
- gradients of q, k, v (torch's CPU flex_attention raises NotImplementedError for those): vs the float64
  reference through torch.autograd; also through lse.
- gradients of captured tensors (ALiBi slopes, relative-position table): vs torch's eager flex_attention
  (which computes them when q, k, v do not require grad) and vs the reference, within a bound scaled by
  the sum of the magnitudes the gradient adds up.
- BlockMask: kv/q (full) num_blocks exactly and the valid prefix of every index row, dtypes (int32) and
  shapes, BLOCK_SIZE, seq_lengths, shape, sparsity(), to_dense(), to_string(), str() vs torch's
  create_block_mask for the same mask_mod; create_mask vs torch's; and_masks / or_masks / noop_mask;
  slicing (block_mask[0], [:, 1], ...) vs torch's slicing; from_kv_blocks round trips and defaults; a
  block list from from_kv_blocks alone decides which blocks are visited (vs the reference: torch's CPU
  eager path ignores the block lists).
- errors: the exception class torch raises for the same call (pinned here, then required of kiln).
- return_aux: AuxOutput's lse and max_scores (torch raises NotImplementedError for max_scores on CPU:
  vs the reference only).
- memory: a causal forward + backward at L = S = 2048 peaks far below one (L, S) float32 buffer.
- tracing: score_mod / mask_mod are traced into programs, not called per element: two forward +
  backward calls make at most a handful of Python calls of them.
"""
import contextlib
import math
import warnings
from dataclasses import dataclass

import pytest
import torch
import torch.nn.attention.flex_attention as TFA

import kiln
import kiln.nn.attention.flex_attention as KFA
from helpers import assert_same, dname, to_kiln, to_torch


@pytest.fixture(autouse=True)
def _seeded():
    """Every test draws the same inputs, captured tensors and upstream gradients on every run."""
    torch.manual_seed(0)
    kiln.manual_seed(0)


def FA(lib):
    return TFA if lib is torch else KFA


def kt(x):
    """A kiln tensor's values as a torch tensor (detached first: it may require grad)."""
    return to_torch(x.detach())


def quiet(fn, *args, **kw):
    """torch's flex_attention warns (eager use, deprecated return_lse): not what these tests are about."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


@contextlib.contextmanager
def torch_uncompiled():
    """torch's eager flex_attention normally wraps its dense math path (math_attention) in a dynamo trace
    with the eager backend: about half a second per new modifier. With this flag it calls the same path
    directly; the forward is the same, the backward is not supported (the captured-tensor gradient tests
    leave the flag alone)."""
    old = TFA._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG
    TFA._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = True
    try:
        yield
    finally:
        TFA._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = old


# ---- the modifiers, written once for both libraries -------------------------------------------------
# A factory takes the library (torch or kiln) and a dict `c` of the tensors the modifier captures (in that
# library) plus plain Python constants, and returns the score_mod / mask_mod.


def _causal(b, h, q, kv):
    return q >= kv


MASKS = {
    "causal": lambda lib, c: _causal,
    "sliding_window": lambda lib, c: FA(lib).and_masks(_causal, lambda b, h, q, kv: q - kv <= 24),
    "prefix_lm": lambda lib, c: FA(lib).or_masks(lambda b, h, q, kv: kv < 40, _causal),
    "document": lambda lib, c: (lambda b, h, q, kv: c["doc"][q] == c["doc"][kv]),
    "document_causal": lambda lib, c: FA(lib).and_masks(MASKS["document"](lib, c), _causal),
    # per-batch kv lengths (padding) and a head that is not causal: real B and H dependence
    "length_head": lambda lib, c: (lambda b, h, q, kv: (kv < c["lens"][b]) & ((h == 0) | (q >= kv))),
    # rows q < 40 see nothing: zero output, lse -inf
    "late_start": lambda lib, c: (lambda b, h, q, kv: q - kv >= 40),
    "noop": lambda lib, c: FA(lib).noop_mask,
}

SCORES = {
    "alibi": lambda lib, c: (lambda s, b, h, q, kv: s + c["slopes"][h] * (kv - q)),
    "softcap": lambda lib, c: (lambda s, b, h, q, kv: 2.0 * lib.tanh(s / 2.0)),
    "relpos": lambda lib, c: (lambda s, b, h, q, kv: s + c["table"][q - kv + c["offset"]]),
    "where": lambda lib, c: (lambda s, b, h, q, kv: lib.where(kv > q, s * 0.75 - 1.5, s)),
    "score_mask": lambda lib, c: (lambda s, b, h, q, kv: lib.where(q >= kv, s, -math.inf)),
}


@dataclass
class Case:
    id: str
    B: int = 2
    Hq: int = 2
    L: int = 128
    S: int = 128
    E: int = 16
    Ev: int = None
    Hkv: int = None
    mask: str = None     # a MASKS key; None: no block mask at all
    score: str = None    # a SCORES key
    bs: object = 128     # BLOCK_SIZE
    bh: bool = False     # create_block_mask with the real B, H (else None, None: broadcast)
    gqa: bool = False
    scale: float = None
    qmul: float = 1.0    # q's scale (soft-capping needs scores beyond the cap)

    @property
    def hkv(self):
        return self.Hkv or self.Hq

    @property
    def ev(self):
        return self.Ev or self.E


CASES = [
    Case("causal_200", L=200, S=200, mask="causal"),
    Case("causal_bs64_bh", L=256, S=256, mask="causal", bs=64, bh=True),
    Case("sliding_window_64x32", B=1, L=160, S=160, mask="sliding_window", bs=(64, 32)),
    Case("prefix_lm", L=192, S=192, mask="prefix_lm", bs=64),
    Case("document", L=200, S=200, mask="document", bs=64),
    Case("document_causal_bs32", B=1, L=130, S=130, mask="document_causal", bs=32),
    Case("alibi_causal", Hq=4, L=130, S=130, mask="causal", score="alibi", bs=64),
    Case("softcap_no_mask", L=100, S=150, score="softcap", qmul=3.0),
    Case("relpos_causal", L=96, S=128, mask="causal", score="relpos", bs=32),
    Case("gqa_alibi", Hq=4, Hkv=2, L=144, S=144, Ev=8, mask="causal", score="alibi", bs=64, gqa=True),
    Case("gqa_length_head_bh", Hq=4, Hkv=2, L=64, S=96, mask="length_head", bs=32, bh=True, gqa=True),
    Case("ev24_l200_s300", B=1, L=200, S=300, Ev=24, mask="causal"),
    Case("length_head_bh_64x32", Hq=3, L=120, S=160, mask="length_head", bs=(64, 32), bh=True),
    Case("masked_rows", B=1, L=128, S=128, mask="late_start", bs=32),
    Case("noop_mask", B=1, L=100, S=100, mask="noop", bs=64),
    Case("where_prefix_scale", B=1, L=96, S=96, mask="prefix_lm", score="where", bs=32, scale=0.3),
    Case("score_mask_no_mask", B=1, L=70, S=90, score="score_mask"),
    Case("decode_alibi", L=1, S=77, score="alibi"),
    Case("tiny", B=1, Hq=1, L=5, S=7, E=4, Ev=3, mask="causal"),
]
BY_ID = {c.id: c for c in CASES}


def ids(cases):
    return [c.id for c in cases]


def captures(case, dtype=torch.float32):
    """The torch tensors (and constants) the case's modifiers capture; the names that are trainable.
    Float ones are float32, float64 for float64 inputs (torch computes a float32 capture's terms in float32)."""
    c, train = {}, []
    if case.mask in ("document", "document_causal"):
        c["doc"] = torch.sort(torch.randint(0, 5, (case.L,)))[0]  # L == S: sorted document ids
    if case.mask == "length_head":
        c["lens"] = torch.tensor([case.S - 7, case.S // 2 + 3])[:case.B]
    if case.score == "alibi":
        c["slopes"] = 0.1 * torch.rand(case.Hq) + 0.02
        train.append("slopes")
    if case.score == "relpos":
        c["table"] = 0.5 * torch.randn(case.L + case.S - 1)
        c["offset"] = case.S - 1
        train.append("table")
    if dtype == torch.float64:
        c = {n: t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for n, t in c.items()}
    return c, train


def torch_caps(c, grad=(), f64=False):
    out = {}
    for n, t in c.items():
        if isinstance(t, torch.Tensor):
            t = t.clone()
            if f64 and t.dtype.is_floating_point:
                t = t.double()
            if n in grad:
                t.requires_grad_()
        out[n] = t
    return out


def kiln_caps(c, grad=()):
    out = {}
    for n, t in c.items():
        if isinstance(t, torch.Tensor):
            t = to_kiln(t)
            if n in grad:
                t.requires_grad_()
        out[n] = t
    return out


def mods(case, lib, caps):
    sm = SCORES[case.score](lib, caps) if case.score else None
    mm = MASKS[case.mask](lib, caps) if case.mask else None
    return sm, mm


def block_mask(case, lib, mm):
    if mm is None:
        return None
    B, H = (case.B, case.Hq) if case.bh else (None, None)
    return FA(lib).create_block_mask(mm, B, H, case.L, case.S, device="cpu", BLOCK_SIZE=case.bs)


def inputs(case, dtype):
    q = (torch.randn(case.B, case.Hq, case.L, case.E) * case.qmul).to(dtype)
    k = torch.randn(case.B, case.hkv, case.S, case.E).to(dtype)
    v = torch.randn(case.B, case.hkv, case.S, case.ev).to(dtype)
    g = torch.randn(case.B, case.Hq, case.L, case.ev).to(dtype)
    return q, k, v, g


# ---- the float64 reference ---------------------------------------------------------------------------


@dataclass
class Ref:
    out: torch.Tensor
    lse: torch.Tensor
    max_scores: torch.Tensor
    raw: torch.Tensor    # (q @ k^T) * scale
    mod: torch.Tensor    # score_mod(raw)
    post: torch.Tensor   # mod with masked positions -inf: what the softmax reads


def ref_attention(q, k, v, score_mod=None, mask_mod=None, scale=None, gqa=False):
    """Dense attention with plain torch ops (differentiable): torch's flex_attention semantics."""
    B, Hq, L, E = q.shape
    Hkv, S = k.shape[1], k.shape[2]
    if gqa:
        k = k.repeat_interleave(Hq // Hkv, dim=1)
        v = v.repeat_interleave(Hq // Hkv, dim=1)
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    raw = (q @ k.transpose(-2, -1)) * scale
    b = torch.arange(B).view(B, 1, 1, 1)
    h = torch.arange(Hq).view(1, Hq, 1, 1)
    qi = torch.arange(L).view(1, 1, L, 1)
    ki = torch.arange(S).view(1, 1, 1, S)
    mod = raw if score_mod is None else torch.broadcast_to(score_mod(raw, b, h, qi, ki), raw.shape)
    keep = torch.ones(raw.shape, dtype=torch.bool)
    if mask_mod is not None:
        keep = torch.broadcast_to(mask_mod(b, h, qi, ki), raw.shape)
    post = torch.where(keep, mod, torch.tensor(-math.inf, dtype=mod.dtype))
    mx = post.amax(-1, keepdim=True).detach()
    mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
    p = torch.exp(post - mx)
    den = p.sum(-1, keepdim=True)
    p = p / torch.where(den == 0, torch.ones_like(den), den)  # all-masked rows: zeros
    out = p @ v
    lse = torch.logsumexp(post, -1)  # -inf where the row is all -inf
    return Ref(out, lse, post.amax(-1), raw, mod, post)


def ref_for(case, tin, c, grad=False, train=()):
    """The reference on float64 copies of the (rounded) inputs; the leaves that require grad."""
    q, k, v = (t.double().requires_grad_(grad) for t in tin[:3])
    caps = torch_caps(c, grad=train, f64=True)
    sm, mm = mods(case, torch, caps)
    return ref_attention(q, k, v, sm, mm, case.scale, case.gqa), (q, k, v), caps


# ---- comparisons -------------------------------------------------------------------------------------


def close(got, ref, rtol, atol, msg=""):
    """got (kiln or torch) vs ref (torch) in float64: same shape, |got - ref| <= atol + rtol * |ref|;
    -inf where ref is -inf."""
    g = got.detach() if isinstance(got, torch.Tensor) else kt(got)
    g, r = g.double(), ref.detach().double()
    assert tuple(g.shape) == tuple(r.shape), f"{msg}: shape {tuple(g.shape)} != {tuple(r.shape)}"
    torch.testing.assert_close(g, r, rtol=rtol, atol=atol, msg=lambda m: f"{msg}: {m}")


def mag(t):
    """The largest finite magnitude of t (at least 1e-30)."""
    t = t.detach().double()
    t = t[torch.isfinite(t)]
    return max(t.abs().max().item(), 1e-30) if t.numel() else 1.0


# (rtol, atol) for out and for lse against the float64 reference
FWD_TOL = {
    "float32": ((1e-4, 2e-5), (1e-5, 2e-5)),
    "float64": ((1e-10, 1e-11), (1e-11, 1e-11)),
    "bfloat16": ((1.6e-2, 1e-2), (5e-4, 5e-4)),
    "float16": ((4e-3, 2e-3), (5e-4, 5e-4)),
}
# (rtol, atol as a fraction of the reference's largest magnitude) for dq, dk, dv
GRAD_TOL = {"float32": (1e-4, 5e-5), "float64": (1e-9, 1e-11), "bfloat16": (3e-2, 2e-2),
            "float16": (1e-2, 4e-3)}
# captured tensors' gradients: |got - ref| <= PARAM_TOL * (the sum of the magnitudes of the terms)
PARAM_TOL = {"float32": 2e-5, "float64": 1e-12}


def param_grad_bound(ref, params, dpost):
    """For an additive bias linear in each captured entry (ALiBi, the relative-position table), the sum
    over (b, h, q, kv) of |dL/dscore| * |d bias / d entry|: what a float32 reduction rounds against."""
    bias = ref.mod - ref.raw.detach()
    s = (dpost.abs() * bias.abs()).sum()
    return [g.abs() for g in torch.autograd.grad(s, params, allow_unused=False)]


# ---- forward -----------------------------------------------------------------------------------------


def kiln_forward(case, tin, c, grad=False, train=(), aux=None):
    kq, kk, kv = (to_kiln(t) for t in tin[:3])
    if grad:
        for t in (kq, kk, kv):
            t.requires_grad_()
    kc = kiln_caps(c, grad=train)
    sm, mm = mods(case, kiln, kc)
    bm = block_mask(case, kiln, mm)
    res = KFA.flex_attention(kq, kk, kv, score_mod=sm, block_mask=bm, scale=case.scale, enable_gqa=case.gqa,
                             return_aux=KFA.AuxRequest(lse=True) if aux is None else aux)
    return res, (kq, kk, kv), kc


def torch_forward(case, tin, c, train=()):
    tc = torch_caps(c, grad=train)
    sm, mm = mods(case, torch, tc)
    bm = block_mask(case, torch, mm)
    with contextlib.nullcontext() if train else torch_uncompiled():
        out, aux = quiet(TFA.flex_attention, *tin[:3], score_mod=sm, block_mask=bm, scale=case.scale,
                         enable_gqa=case.gqa, return_aux=TFA.AuxRequest(lse=True))
    return out, aux.lse, tc


def check_forward(case, dtype):
    name = dname(dtype)
    tin = inputs(case, dtype)
    c, _ = captures(case, dtype)
    (kout, kaux), _, _ = kiln_forward(case, tin, c)
    tout, tlse, _ = torch_forward(case, tin, c)
    ref, _, _ = ref_for(case, tin, c)
    assert isinstance(kaux, KFA.AuxOutput) and kaux.max_scores is None
    assert dname(kout.dtype) == dname(tout.dtype) == name
    assert dname(kaux.lse.dtype) == dname(tlse.dtype)  # float32; float64 for float64 inputs
    (ro, ao), (rl, al) = FWD_TOL[name]
    # the reference agrees with torch's own eager result (it is the semantics the tests hold kiln to)
    close(tout, ref.out, 2 * ro, 2 * ao, f"{case.id} torch out vs reference")
    close(tlse, ref.lse, 2 * rl, 2 * al, f"{case.id} torch lse vs reference")
    close(kout, ref.out, ro, ao, f"{case.id} out vs float64 reference")
    close(kaux.lse, ref.lse, rl, al, f"{case.id} lse vs float64 reference")
    close(kout, tout, 2 * ro, 2 * ao, f"{case.id} out vs torch")
    close(kaux.lse, tlse, 2 * rl, 2 * al, f"{case.id} lse vs torch")
    return kout, kaux, ref


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_forward_float32(case):
    check_forward(case, torch.float32)


DTYPE_CASES = [BY_ID[i] for i in ("causal_200", "alibi_causal", "softcap_no_mask", "gqa_alibi", "masked_rows",
                                  "length_head_bh_64x32")]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64], ids=dname)
@pytest.mark.parametrize("case", DTYPE_CASES, ids=ids(DTYPE_CASES))
def test_forward_dtypes(case, dtype):
    check_forward(case, dtype)


def test_fully_masked_rows_give_zeros_and_neg_inf_lse():
    case = BY_ID["masked_rows"]
    kout, kaux, _ = check_forward(case, torch.float32)
    o, lse = kt(kout), kt(kaux.lse)
    assert torch.equal(o[:, :, :40], torch.zeros_like(o[:, :, :40]))
    assert bool(torch.isneginf(lse[:, :, :40]).all()) and bool(torch.isfinite(lse[:, :, 40:]).all())
    assert not bool(o.isnan().any())


def test_block_mask_broadcast_equals_real_batch_heads():
    """A mask built with B=H=None serves every (b, h); built for the real B, H it gives the same output."""
    case = BY_ID["causal_200"]
    q, k, v, _ = inputs(case, torch.float32)
    kq, kk, kv = to_kiln(q), to_kiln(k), to_kiln(v)
    a = KFA.flex_attention(kq, kk, kv, block_mask=KFA.create_block_mask(_causal, None, None, 200, 200, device="cpu"))
    b = KFA.flex_attention(kq, kk, kv, block_mask=KFA.create_block_mask(_causal, 2, 2, 200, 200, device="cpu"))
    close(a, kt(b), 1e-6, 1e-7, "broadcast vs real B, H")


def test_noop_block_mask_equals_no_block_mask():
    case = BY_ID["softcap_no_mask"]
    q, k, v, _ = inputs(case, torch.float32)
    kq, kk, kv = to_kiln(q), to_kiln(k), to_kiln(v)
    sm = SCORES["softcap"](kiln, {})
    bm = KFA.create_block_mask(KFA.noop_mask, None, None, case.L, case.S, device="cpu", BLOCK_SIZE=64)
    a = KFA.flex_attention(kq, kk, kv, score_mod=sm)
    b = KFA.flex_attention(kq, kk, kv, score_mod=sm, block_mask=bm)
    close(a, kt(b), 1e-5, 2e-6, "noop block mask vs none")


def test_return_forms():
    """No request: one tensor; return_lse=True (deprecated): (out, lse); return_aux: (out, AuxOutput)."""
    case = BY_ID["causal_200"]
    q, k, v, _ = inputs(case, torch.float32)
    kq, kk, kv = to_kiln(q), to_kiln(k), to_kiln(v)
    bm = KFA.create_block_mask(_causal, None, None, 200, 200, device="cpu")
    tbm = TFA.create_block_mask(_causal, None, None, 200, 200, device="cpu")
    out = KFA.flex_attention(kq, kk, kv, block_mask=bm)
    assert isinstance(out, kiln.Tensor) and tuple(out.shape) == (2, 2, 200, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = KFA.flex_attention(kq, kk, kv, block_mask=bm, return_lse=True)
        tres = TFA.flex_attention(q, k, v, block_mask=tbm, return_lse=True)
    assert isinstance(res, tuple) and len(res) == 2
    close(res[0], tres[0], 1e-4, 2e-5, "return_lse out")
    close(res[1], tres[1], 1e-5, 2e-5, "return_lse lse")
    for req, has_lse, has_max in ((KFA.AuxRequest(), False, False), (KFA.AuxRequest(lse=True), True, False),
                                  (KFA.AuxRequest(max_scores=True), False, True)):
        o, aux = KFA.flex_attention(kq, kk, kv, block_mask=bm, return_aux=req)
        assert isinstance(aux, KFA.AuxOutput)
        assert (aux.lse is not None) == has_lse and (aux.max_scores is not None) == has_max
        close(o, tres[0], 1e-4, 2e-5, "return_aux out")
    assert KFA.AuxRequest().lse is False and KFA.AuxRequest().max_scores is False
    assert KFA.AuxOutput().lse is None and KFA.AuxOutput().max_scores is None


@pytest.mark.parametrize("case", [BY_ID[i] for i in ("alibi_causal", "masked_rows", "softcap_no_mask",
                                                     "gqa_length_head_bh")],
                         ids=["alibi_causal", "masked_rows", "softcap_no_mask", "gqa_length_head_bh"])
def test_return_aux_lse_and_max_scores(case):
    """AuxRequest(lse=True, max_scores=True): both, (B, Hq, L); max_scores is the row max of the modified,
    masked scores (-inf for rows masked entirely). torch raises NotImplementedError for max_scores on CPU."""
    tin = inputs(case, torch.float32)
    c, _ = captures(case)
    (kout, kaux), _, _ = kiln_forward(case, tin, c, aux=KFA.AuxRequest(lse=True, max_scores=True))
    ref, _, _ = ref_for(case, tin, c)
    _, tlse, _ = torch_forward(case, tin, c)
    assert isinstance(kaux, KFA.AuxOutput)
    assert dname(kaux.lse.dtype) == "float32" and dname(kaux.max_scores.dtype) == "float32"
    close(kout, ref.out, 1e-4, 2e-5, "out")
    close(kaux.lse, ref.lse, 1e-5, 2e-5, "lse")
    close(kaux.lse, tlse, 2e-5, 4e-5, "lse vs torch")
    close(kaux.max_scores, ref.max_scores, 1e-5, 2e-5, "max_scores")
    with pytest.raises(NotImplementedError):  # torch's CPU path: why this compares with the reference only
        tc = torch_caps(c)
        sm, mm = mods(case, torch, tc)
        quiet(TFA.flex_attention, *tin[:3], score_mod=sm, block_mask=block_mask(case, torch, mm),
              enable_gqa=case.gqa, return_aux=TFA.AuxRequest(lse=True, max_scores=True))


# ---- backward ----------------------------------------------------------------------------------------


def check_backward(case, dtype, lse_grad=False):
    name = dname(dtype)
    tin = inputs(case, dtype)
    q, k, v, g = tin
    c, train = captures(case, dtype)
    if dtype not in (torch.float32, torch.float64):
        train = []  # captured float32 parameters: checked in float32 / float64
    (kout, kaux), kx, kc = kiln_forward(case, tin, c, grad=True, train=train)
    gl = torch.randn(case.B, case.Hq, case.L) if lse_grad else None
    if lse_grad:
        ((kout * to_kiln(g)).sum() + (kaux.lse * to_kiln(gl)).sum()).backward()
    else:
        kout.backward(to_kiln(g))
    ref, rx, rc = ref_for(case, tin, c, grad=True, train=train)
    params = [rc[n] for n in train]
    outs, grads_in = [ref.out], [g.double()]
    if lse_grad:
        outs.append(ref.lse)
        grads_in.append(gl.double())
    grads = torch.autograd.grad(outs, [*rx, *params, ref.post], grads_in, retain_graph=True)
    rt, at = GRAD_TOL[name]
    for nm, kxi, rg in zip(("dq", "dk", "dv"), kx, grads[:3]):
        assert kxi.grad is not None, f"{case.id}: no {nm}"
        assert dname(kxi.grad.dtype) == name
        close(kxi.grad, rg, rt, at * mag(rg), f"{case.id} {nm} vs float64 reference")
    if params:
        bounds = param_grad_bound(ref, params, grads[-1].detach())
        for nm, rg, bd in zip(train, grads[3:-1], bounds):
            kg = kc[nm].grad
            assert kg is not None, f"{case.id}: no gradient for captured {nm}"
            assert dname(kg.dtype) == dname(c[nm].dtype)
            err = (kt(kg).double() - rg.detach()).abs()
            tol = PARAM_TOL[name] * bd.detach() + 1e-7 * mag(rg)
            assert bool((err <= tol).all()), \
                f"{case.id} d{nm}: max error {err.max().item():.3g}, worst error/bound {(err / tol).max().item():.3g}"


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_backward_float32(case):
    check_backward(case, torch.float32)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64], ids=dname)
@pytest.mark.parametrize("case", DTYPE_CASES, ids=ids(DTYPE_CASES))
def test_backward_dtypes(case, dtype):
    check_backward(case, dtype)


@pytest.mark.parametrize("case", [BY_ID[i] for i in ("alibi_causal", "gqa_length_head_bh", "softcap_no_mask")],
                         ids=["alibi_causal", "gqa_length_head_bh", "softcap_no_mask"])
def test_backward_through_lse(case):
    """Gradients flow from lse as well as from out (rows all have an unmasked entry here)."""
    check_backward(case, torch.float32, lse_grad=True)


PARAM_CASES = [BY_ID[i] for i in ("alibi_causal", "relpos_causal", "gqa_alibi", "decode_alibi")]


@pytest.mark.parametrize("case", PARAM_CASES, ids=ids(PARAM_CASES))
def test_captured_tensor_grads_vs_torch(case):
    """q, k, v without grad (torch's CPU flex_attention then differentiates): the gradient reaches only the
    captured tensor, as torch's, and as the reference's."""
    tin = inputs(case, torch.float32)
    g = tin[3]
    c, train = captures(case)
    (kout, _), kx, kc = kiln_forward(case, tin, c, train=train)
    kout.backward(to_kiln(g))
    assert all(t.grad is None for t in kx)
    tout, _, tc = torch_forward(case, tin, c, train=train)
    tout.backward(g)
    ref, _, rc = ref_for(case, tin, c, train=train)
    params = [rc[n] for n in train]
    grads = torch.autograd.grad(ref.out, [*params, ref.post], g.double(), retain_graph=True)
    bounds = param_grad_bound(ref, params, grads[-1].detach())
    for nm, rg, bd in zip(train, grads[:-1], bounds):
        rg, bd = rg.detach(), bd.detach()
        tol = PARAM_TOL["float32"] * bd + 1e-7 * mag(rg)
        tg = tc[nm].grad.double()
        assert bool(((tg - rg).abs() <= tol).all()), f"torch's own d{nm} vs the reference"
        kg = kt(kc[nm].grad).double()
        assert tuple(kg.shape) == tuple(tg.shape)
        assert bool(((kg - rg).abs() <= tol).all()), f"d{nm} vs reference: max error {(kg - rg).abs().max():.3g}"
        assert bool(((kg - tg).abs() <= 2 * tol).all()), f"d{nm} vs torch: max error {(kg - tg).abs().max():.3g}"


# ---- BlockMask ---------------------------------------------------------------------------------------


def assert_block_mask_equal(kbm, tbm, msg=""):
    """Every field of kiln's BlockMask as torch's: counts exactly, the valid prefix of every index row
    (row r: its first num_blocks[r] entries), int32 dtypes and shapes, and the derived values."""
    assert tuple(kbm.BLOCK_SIZE) == tuple(tbm.BLOCK_SIZE), f"{msg}: BLOCK_SIZE {kbm.BLOCK_SIZE} != {tbm.BLOCK_SIZE}"
    assert tuple(kbm.seq_lengths) == tuple(tbm.seq_lengths), f"{msg}: seq_lengths"
    assert tuple(kbm.shape) == tuple(tbm.shape), f"{msg}: shape {kbm.shape} != {tbm.shape}"
    for num, idx in (("kv_num_blocks", "kv_indices"), ("full_kv_num_blocks", "full_kv_indices"),
                     ("q_num_blocks", "q_indices"), ("full_q_num_blocks", "full_q_indices")):
        tn, ti, kn, ki = getattr(tbm, num), getattr(tbm, idx), getattr(kbm, num), getattr(kbm, idx)
        if tn is None:
            assert kn is None and ki is None, f"{msg}: {num} should be None"
            continue
        assert kn is not None and ki is not None, f"{msg}: {num} missing"
        assert_same(kn, tn, exact=True, msg=f"{msg}: {num}")
        assert dname(ki.dtype) == "int32", f"{msg}: {idx} dtype {ki.dtype}"
        assert tuple(ki.shape) == tuple(ti.shape), f"{msg}: {idx} shape {tuple(ki.shape)} != {tuple(ti.shape)}"
        valid = torch.arange(ti.shape[-1]) < tn.unsqueeze(-1)
        got = kt(ki).masked_fill(~valid, -1)
        assert torch.equal(got, ti.masked_fill(~valid, -1)), f"{msg}: {idx} valid prefix\n{got}\n{ti}"
    assert_same(kbm.to_dense(), tbm.to_dense(), exact=True, msg=f"{msg}: to_dense")
    assert kbm.sparsity() == pytest.approx(tbm.sparsity(), abs=1e-9), f"{msg}: sparsity"


MASK_CASES = [c for c in CASES if c.mask is not None]


@pytest.mark.parametrize("case", MASK_CASES, ids=ids(MASK_CASES))
def test_block_mask_matches_torch(case):
    c, _ = captures(case)
    kc, tc = kiln_caps(c), torch_caps(c)
    _, kmm = mods(case, kiln, kc)
    _, tmm = mods(case, torch, tc)
    kbm, tbm = block_mask(case, kiln, kmm), block_mask(case, torch, tmm)
    assert isinstance(kbm, KFA.BlockMask)
    assert kbm.mask_mod is kmm
    assert_block_mask_equal(kbm, tbm, case.id)
    assert kbm.to_string() == tbm.to_string()
    assert str(kbm) == str(tbm)
    B, H = (case.B, case.Hq) if case.bh else (None, None)
    assert_same(KFA.create_mask(kmm, B, H, case.L, case.S, device="cpu"),
                TFA.create_mask(tmm, B, H, case.L, case.S, device="cpu"), exact=True, msg="create_mask")


@pytest.mark.parametrize("B,H,L,S,bs", [(None, None, 300, 200, 128), (2, 3, 96, 160, (32, 64)),
                                        (1, 1, 64, 64, 64), (None, 2, 33, 65, 16)])
def test_block_mask_shapes_and_partial_edge_blocks(B, H, L, S, bs):
    """Lengths that do not fill the last block row / column: torch pads the mask with False, so edge
    blocks are partial, never full, even where mask_mod is True everywhere."""
    for name in ("causal", "noop", "prefix_lm"):
        kbm = KFA.create_block_mask(MASKS[name](kiln, {}), B, H, L, S, device="cpu", BLOCK_SIZE=bs)
        tbm = TFA.create_block_mask(MASKS[name](torch, {}), B, H, L, S, device="cpu", BLOCK_SIZE=bs)
        assert_block_mask_equal(kbm, tbm, f"{name} {B} {H} {L} {S} {bs}")
        assert kbm.to_string() == tbm.to_string()


def test_to_string_options():
    bm_args = (MASKS["length_head"], 2, 3, 120, 160)
    c = {"lens": torch.tensor([153, 83])}
    kbm = KFA.create_block_mask(bm_args[0](kiln, kiln_caps(c)), *bm_args[1:], device="cpu", BLOCK_SIZE=16)
    tbm = TFA.create_block_mask(bm_args[0](torch, c), *bm_args[1:], device="cpu", BLOCK_SIZE=16)
    for kw in ({}, {"limit": 2}, {"grid_size": 4}, {"grid_size": (3, 5), "limit": 6}, {"grid_size": -1}):
        assert kbm.to_string(**kw) == tbm.to_string(**kw), kw


def test_create_mask_of_score_mod():
    """create_mask of a score_mod: True where the modified score is not -inf."""
    sm_k, sm_t = SCORES["score_mask"](kiln, {}), SCORES["score_mask"](torch, {})
    for B, H in ((None, None), (2, 3)):
        assert_same(KFA.create_mask(sm_k, B, H, 9, 13, device="cpu"),
                    TFA.create_mask(sm_t, B, H, 9, 13, device="cpu"), exact=True)


def test_mask_combinators():
    c = {"doc": torch.sort(torch.randint(0, 4, (40,)))[0]}
    kc, tc = kiln_caps(c), torch_caps(c)
    win = lambda b, h, q, kv: q - kv <= 5  # noqa: E731
    combos = [
        lambda F, cc: F.and_masks(_causal, win),
        lambda F, cc: F.or_masks(lambda b, h, q, kv: kv < 7, _causal),
        lambda F, cc: F.and_masks(_causal, MASKS["document"](torch if F is TFA else kiln, cc), win),
        lambda F, cc: F.or_masks(F.and_masks(_causal, win), lambda b, h, q, kv: (h == 1) & (b == 0)),
        lambda F, cc: F.noop_mask,
        lambda F, cc: F.and_masks(F.noop_mask, _causal),
        lambda F, cc: F.and_masks(),
        lambda F, cc: F.or_masks(),
    ]
    for i, make in enumerate(combos):
        km, tm = make(KFA, kc), make(TFA, tc)
        assert_same(KFA.create_mask(km, 2, 2, 40, 40, device="cpu"), TFA.create_mask(tm, 2, 2, 40, 40, device="cpu"),
                    exact=True, msg=f"combo {i}")
        assert_block_mask_equal(KFA.create_block_mask(km, 2, 2, 40, 40, device="cpu", BLOCK_SIZE=8),
                                TFA.create_block_mask(tm, 2, 2, 40, 40, device="cpu", BLOCK_SIZE=8), f"combo {i}")


SLICES = [
    ("[0]", lambda lib: 0),
    ("[-1]", lambda lib: -1),
    ("[:, 1]", lambda lib: (slice(None), 1)),
    ("[0, 1]", lambda lib: (0, 1)),
    ("[1:, 0:2]", lambda lib: (slice(1, None), slice(0, 2))),
    ("[tensor([1, 0])]", lambda lib: lib.tensor([1, 0])),
    ("[:, :, 1:3]", lambda lib: (slice(None), slice(None), slice(1, 3))),
]


@pytest.mark.parametrize("label,index", SLICES, ids=[s[0] for s in SLICES])
def test_block_mask_slicing(label, index):
    """Slicing indexes the block lists' batch, head (and query-block) dims; an integer keeps its dim
    (torch turns it into a length-1 slice); the q lists are recomputed; seq_lengths and BLOCK_SIZE stay."""
    c = {"lens": torch.tensor([150, 77])}
    mm = MASKS["length_head"]
    kbm = KFA.create_block_mask(mm(kiln, kiln_caps(c)), 2, 3, 120, 160, device="cpu", BLOCK_SIZE=(32, 64))
    tbm = TFA.create_block_mask(mm(torch, c), 2, 3, 120, 160, device="cpu", BLOCK_SIZE=(32, 64))
    ks, ts = kbm[index(kiln)], tbm[index(torch)]
    assert isinstance(ks, KFA.BlockMask)
    assert_block_mask_equal(ks, ts, label)
    assert ks.to_string() == ts.to_string()


def test_from_kv_blocks_round_trip():
    case = BY_ID["length_head_bh_64x32"]
    tin = inputs(case, torch.float32)
    c, _ = captures(case)
    kc, tc = kiln_caps(c), torch_caps(c)
    _, kmm = mods(case, kiln, kc)
    _, tmm = mods(case, torch, tc)
    kbm, tbm = block_mask(case, kiln, kmm), block_mask(case, torch, tmm)
    rebuilt = KFA.BlockMask.from_kv_blocks(kbm.kv_num_blocks, kbm.kv_indices, kbm.full_kv_num_blocks,
                                           kbm.full_kv_indices, BLOCK_SIZE=kbm.BLOCK_SIZE, mask_mod=kbm.mask_mod,
                                           seq_lengths=kbm.seq_lengths)
    assert_block_mask_equal(rebuilt, tbm, "rebuilt")
    assert rebuilt.mask_mod is kmm
    kq, kk, kv = (to_kiln(t) for t in tin[:3])
    a = KFA.flex_attention(kq, kk, kv, block_mask=kbm)
    b = KFA.flex_attention(kq, kk, kv, block_mask=rebuilt)
    close(a, kt(b), 1e-6, 1e-7, "rebuilt mask's output")
    # from torch's lists, with from_kv_blocks' defaults: BLOCK_SIZE 128, seq_lengths from the block grid,
    # mask_mod noop_mask; without the full lists, no full lists at all
    for args, kw in (((tbm.kv_num_blocks, tbm.kv_indices), {}),
                     ((tbm.kv_num_blocks, tbm.kv_indices, tbm.full_kv_num_blocks, tbm.full_kv_indices), {}),
                     ((tbm.kv_num_blocks, tbm.kv_indices), {"BLOCK_SIZE": 64}),
                     ((tbm.kv_num_blocks, tbm.kv_indices, tbm.full_kv_num_blocks, tbm.full_kv_indices),
                      {"BLOCK_SIZE": (64, 32), "seq_lengths": (120, 160)})):
        k2 = KFA.BlockMask.from_kv_blocks(*(to_kiln(t) for t in args), **kw)
        t2 = TFA.BlockMask.from_kv_blocks(*args, **kw)
        assert_block_mask_equal(k2, t2, f"from_kv_blocks {len(args)} {kw}")
        assert k2.mask_mod is KFA.noop_mask


def test_block_lists_decide_which_blocks_are_visited():
    """A BlockMask made from block lists alone (mask_mod noop_mask): only the listed blocks take part, as
    in torch's compiled kernels (torch's CPU eager path applies mask_mod densely and ignores the lists, so
    this compares with the reference on the equivalent element mask)."""
    B, H, L, S, E, bq, bk = 1, 2, 96, 128, 16, 32, 32
    dense = torch.zeros(1, 1, L // bq, S // bk, dtype=torch.int32)
    dense[0, 0, 0, [0, 3]] = 1
    dense[0, 0, 1, 1] = 1
    dense[0, 0, 2, [0, 1, 2]] = 1
    num = dense.sum(-1).to(torch.int32)
    idx = torch.argsort(dense, dim=-1, descending=True, stable=True).to(torch.int32)
    kbm = KFA.BlockMask.from_kv_blocks(to_kiln(num), to_kiln(idx), BLOCK_SIZE=(bq, bk), seq_lengths=(L, S))
    tbm = TFA.BlockMask.from_kv_blocks(num, idx, BLOCK_SIZE=(bq, bk), seq_lengths=(L, S))
    assert_block_mask_equal(kbm, tbm, "from lists")
    q, k, v, g = (torch.randn(B, H, n, E) for n in (L, S, S, L))
    kq, kk, kv = (to_kiln(t).requires_grad_() for t in (q, k, v))
    kout, kaux = KFA.flex_attention(kq, kk, kv, block_mask=kbm, return_aux=KFA.AuxRequest(lse=True))
    kout.backward(to_kiln(g))
    allowed = dense[0, 0].repeat_interleave(bq, 0).repeat_interleave(bk, 1).bool()
    rq, rk, rv = (t.double().requires_grad_() for t in (q, k, v))
    ref = ref_attention(rq, rk, rv, mask_mod=lambda b, h, qi, ki: allowed[qi, ki])
    close(kout, ref.out, 1e-4, 2e-5, "out")
    close(kaux.lse, ref.lse, 1e-5, 2e-5, "lse")
    for nm, kx, rg in zip(("dq", "dk", "dv"), (kq, kk, kv), torch.autograd.grad(ref.out, (rq, rk, rv), g.double())):
        close(kx.grad, rg, 1e-4, 5e-5 * mag(rg), nm)
    # the same blocks listed as full blocks (mask_mod skipped there): the same attention
    zero = torch.zeros_like(num)
    kfull = KFA.BlockMask.from_kv_blocks(to_kiln(zero), to_kiln(idx), to_kiln(num), to_kiln(idx), BLOCK_SIZE=(bq, bk),
                                         seq_lengths=(L, S))
    assert_block_mask_equal(kfull, TFA.BlockMask.from_kv_blocks(zero, idx, num, idx, BLOCK_SIZE=(bq, bk),
                                                                seq_lengths=(L, S)), "full lists")
    close(KFA.flex_attention(to_kiln(q), to_kiln(k), to_kiln(v), block_mask=kfull), ref.out, 1e-4, 2e-5, "full blocks")


@pytest.mark.parametrize("E", [16, 32])
def test_mask_tiles_cover_every_heads_partial_blocks(E):
    """A mask_mod that reads neither b nor h is evaluated once per call on each block some (b, h) lists
    as partial (not per head and tile): block lists that differ per batch and head must each find their
    blocks' masks. A mask_mod that reads h runs per tile. Forward and gradients against the reference on
    the equivalent element mask (full blocks: everything; partial ones: mask_mod; others: nothing).
    E = 32: with the float32 tile products, forward and backward."""
    B, H, L, S, bq, bk = 2, 3, 96, 128, 32, 32
    nq, nk = L // bq, S // bk
    g = torch.Generator().manual_seed(3)
    part = (torch.rand(B, H, nq, nk, generator=g) < 0.5).to(torch.int32)
    full = (torch.rand(B, H, nq, nk, generator=g) < 0.3).to(torch.int32) * (1 - part)

    def lists(m):
        return m.sum(-1).to(torch.int32), torch.argsort(m, dim=-1, descending=True, stable=True).to(torch.int32)

    def window(b, h, q, kv):
        return (q >= kv) & (q - kv < 40)

    def per_head(b, h, q, kv):
        return (q >= kv) | (h == 1)

    q, k, v, gr = (torch.randn(B, H, n, E, generator=g) for n in (L, S, S, L))
    for mm in (window, per_head):
        kbm = KFA.BlockMask.from_kv_blocks(*(to_kiln(t) for t in (*lists(part), *lists(full))), BLOCK_SIZE=(bq, bk),
                                           mask_mod=mm, seq_lengths=(L, S))
        kq, kk, kv = (to_kiln(t).requires_grad_() for t in (q, k, v))
        kout = KFA.flex_attention(kq, kk, kv, block_mask=kbm)
        kout.backward(to_kiln(gr))

        def expand(m):
            return m.repeat_interleave(bq, 2).repeat_interleave(bk, 3).bool()

        allowed = expand(full) | (expand(part) & torch.broadcast_to(
            mm(torch.arange(B).view(B, 1, 1, 1), torch.arange(H).view(1, H, 1, 1), torch.arange(L).view(1, 1, L, 1),
               torch.arange(S).view(1, 1, 1, S)), (B, H, L, S)))
        rq, rk, rv = (t.double().requires_grad_() for t in (q, k, v))
        ref = ref_attention(rq, rk, rv, mask_mod=lambda b, h, qi, ki: allowed)
        close(kout, ref.out, 1e-4, 2e-5, f"{mm.__name__} out")
        grads = torch.autograd.grad(ref.out, (rq, rk, rv), gr.double())
        for nm, kx, rg in zip(("dq", "dk", "dv"), (kq, kk, kv), grads):
            close(kx.grad, rg, 1e-4, 5e-5 * mag(rg), f"{mm.__name__} {nm}")


_SPLIT_MASKS = {
    "causal": lambda b, h, q, kv: q >= kv,
    # the first kv block reaches only the first query block: split 0 leaves the other dq blocks to the
    # final zeroing, then adds the other splits' sums
    "anti_causal": lambda b, h, q, kv: q <= kv,
    # query rows below 200 see nothing: their dq blocks are reached by no tile (zeroed at the end)
    "late_rows": lambda b, h, q, kv: q - kv >= 200,
}


@pytest.mark.parametrize("mask", list(_SPLIT_MASKS))
@pytest.mark.parametrize("H", [1, 2])
def test_backward_split_and_threads(H, mask):
    """The backward on one and on two threads: with one kv head for two threads it splits the kv blocks
    (query-gradient partial sums added in split order, D computed up front); with two it does not (each
    task zeroes its dq blocks and computes their D rows when it first reaches them). A gradient through
    lse too (where it is finite). Both against float64, and the same bits on both thread counts."""
    mm = _SPLIT_MASKS[mask]
    L, E = 512, 64
    g = torch.Generator().manual_seed(11)
    q, k, v, go = (torch.randn(1, H, L, E, generator=g) for _ in range(4))
    gl = torch.randn(1, H, L, generator=g)
    rq, rk, rv = (t.double().requires_grad_() for t in (q, k, v))
    ref = ref_attention(rq, rk, rv, mask_mod=mm)
    fin = torch.isfinite(ref.lse).detach()
    gl = torch.where(fin, gl, torch.zeros_like(gl))
    want = torch.autograd.grad((ref.out * go.double()).sum() + (torch.where(fin, ref.lse, 0) * gl.double()).sum(),
                               (rq, rk, rv))
    got = []
    before = kiln.get_num_threads()
    try:
        for nt in (1, 2):
            kiln.set_num_threads(nt)
            kq, kk, kv = (to_kiln(t).requires_grad_() for t in (q, k, v))
            bm = KFA.create_block_mask(mm, None, None, L, L, device="cpu")
            out, aux = KFA.flex_attention(kq, kk, kv, block_mask=bm, return_aux=KFA.AuxRequest(lse=True))
            ((out * to_kiln(go)).sum() + (aux.lse * to_kiln(gl)).sum()).backward()
            got.append([kt(x.grad) for x in (kq, kk, kv)])
    finally:
        kiln.set_num_threads(before)
    for nt, grads in zip((1, 2), got):
        for nm, a, w in zip(("dq", "dk", "dv"), grads, want):
            close(a, w, 1e-4, 5e-5 * mag(w), f"{nm} on {nt} threads")
    for nm, a, b in zip(("dq", "dk", "dv"), *got):
        if H == 2:  # no split: each gradient element sums the same products in the same order
            assert torch.equal(a, b), nm


# ---- errors ------------------------------------------------------------------------------------------


def _qkv(lib, q, k=None, v=None):
    return lib.randn(q), lib.randn(k or q), lib.randn(v or k or q)


ERRORS = [
    ("three_d_inputs", NotImplementedError, lambda lib: FA(lib).flex_attention(*_qkv(lib, (2, 64, 16)))),
    ("five_d_inputs", NotImplementedError, lambda lib: FA(lib).flex_attention(*_qkv(lib, (1, 1, 2, 64, 16)))),
    ("gqa_heads_not_divisible", ValueError,
     lambda lib: FA(lib).flex_attention(*_qkv(lib, (1, 3, 64, 16), (1, 2, 64, 16)), enable_gqa=True)),
    ("heads_differ_without_gqa", ValueError,
     lambda lib: FA(lib).flex_attention(*_qkv(lib, (1, 4, 64, 16), (1, 2, 64, 16)))),
    ("embed_dims_differ", ValueError,
     lambda lib: FA(lib).flex_attention(*_qkv(lib, (1, 2, 64, 16), (1, 2, 64, 8)))),
    ("batch_differs_without_block_mask", ValueError,
     lambda lib: FA(lib).flex_attention(*_qkv(lib, (2, 2, 64, 16), (1, 2, 64, 16)))),
    ("block_mask_for_longer_sequences", ValueError,
     lambda lib: FA(lib).flex_attention(*_qkv(lib, (1, 2, 64, 16)), block_mask=FA(lib).create_block_mask(
         _causal, None, None, 128, 128, device="cpu"))),
    ("block_mask_for_shorter_sequences", ValueError,
     lambda lib: FA(lib).flex_attention(*_qkv(lib, (1, 2, 64, 16)), block_mask=FA(lib).create_block_mask(
         _causal, None, None, 32, 32, device="cpu", BLOCK_SIZE=16))),
    ("block_mask_for_other_kv_length", ValueError,
     lambda lib: FA(lib).flex_attention(*_qkv(lib, (1, 2, 64, 16), (1, 2, 96, 16)),
                                        block_mask=FA(lib).create_block_mask(_causal, None, None, 64, 64,
                                                                             device="cpu"))),
    ("return_lse_and_return_aux", ValueError,
     lambda lib: FA(lib).flex_attention(*_qkv(lib, (1, 2, 64, 16)), return_lse=True,
                                        return_aux=FA(lib).AuxRequest(lse=True))),
    ("sliced_block_mask", RuntimeError,
     lambda lib: FA(lib).flex_attention(*_qkv(lib, (1, 2, 64, 16)), block_mask=FA(lib).create_block_mask(
         _causal, 2, 2, 64, 64, device="cpu", BLOCK_SIZE=32)[0])),
    ("and_masks_not_callable", RuntimeError, lambda lib: FA(lib).and_masks(_causal, 3)),
    ("or_masks_not_callable", RuntimeError, lambda lib: FA(lib).or_masks(3)),
    ("from_kv_blocks_one_dim", RuntimeError,
     lambda lib: FA(lib).BlockMask.from_kv_blocks(lib.ones(1, dtype=lib.int32), lib.zeros(1, dtype=lib.int32))),
    ("create_block_mask_of_score_mod", AssertionError,
     lambda lib: FA(lib).create_block_mask(lambda s, b, h, q, kv: s, None, None, 64, 64, device="cpu")),
]


@pytest.mark.parametrize("name,exc,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_as_torch(name, exc, fn):
    with pytest.raises(exc):  # torch 2.13's class for this call, pinned
        quiet(fn, torch)
    with pytest.raises(exc):
        fn(kiln)


# ---- memory and tracing ------------------------------------------------------------------------------


@pytest.mark.parametrize("score", [None, "alibi"])
def test_memory_no_score_matrix(score):
    """A causal forward + backward at L = S = 2048 keeps no (L, S) buffer: its peak is under a quarter of
    one (L, S) float32 score matrix (the block mask is built before the measurement)."""
    L = S = 2048
    q, k, v = (kiln.randn((1, 1, L, 16)).requires_grad_() for _ in range(3))
    g = kiln.randn((1, 1, L, 16))
    caps = {"slopes": kiln.tensor([0.01])}
    sm = SCORES[score](kiln, caps) if score else None
    bm = KFA.create_block_mask(_causal, None, None, L, S, device="cpu")
    kiln.reset_peak_memory_stats()
    base = kiln.memory_stats()["allocated_bytes.all.current"]
    out = KFA.flex_attention(q, k, v, score_mod=sm, block_mask=bm)
    out.backward(g)
    peak = kiln.memory_stats()["allocated_bytes.all.peak"] - base
    assert peak < L * S * 4 / 4, f"peak {peak / 2**20:.2f} MiB"
    assert q.grad is not None and k.grad is not None and v.grad is not None
    assert not bool(kt(q.grad).isnan().any())


def test_mods_are_traced_not_called_per_element():
    """score_mod and mask_mod run as traced programs: two forward + backward calls with the same shapes
    make at most a handful of Python calls of each, and create_block_mask is not per element either."""
    calls = {"score": 0, "mask": 0}
    slopes = to_kiln(0.1 * torch.rand(2)).requires_grad_()

    def score_mod(s, b, h, q, kv):
        calls["score"] += 1
        return s + slopes[h] * (kv - q)

    def mask_mod(b, h, q, kv):
        calls["mask"] += 1
        return q >= kv

    L = S = 256
    bm = KFA.create_block_mask(mask_mod, None, None, L, S, device="cpu", BLOCK_SIZE=64)
    assert 1 <= calls["mask"] < L, f"create_block_mask called mask_mod {calls['mask']} times"
    calls["mask"] = 0
    for _ in range(2):
        q, k, v = (kiln.randn((1, 2, L, 16)).requires_grad_() for _ in range(3))
        out = KFA.flex_attention(q, k, v, score_mod=score_mod, block_mask=bm)
        out.backward(kiln.randn((1, 2, L, 16)))
    assert 1 <= calls["score"] <= 4, f"score_mod called {calls['score']} times"
    assert calls["mask"] <= 4, f"mask_mod called {calls['mask']} times"
    assert slopes.grad is not None


# ---- kiln-specific: what a traced modifier may not do, and bad block lists ------------------------------

def _qkv_small():
    return kiln.randn(1, 2, 50, 8), kiln.randn(1, 2, 50, 8), kiln.randn(1, 2, 50, 8)


def test_modifier_errors_are_clear():
    q, k, v = _qkv_small()

    def boom(s, b, h, qi, kv):
        raise ValueError("raised by the score_mod")
    with pytest.raises(ValueError, match="raised by the score_mod"):
        KFA.flex_attention(q, k, v, score_mod=boom)
    # torch applies a modifier per element (vmap): a reduction over the score is refused, not run on a tile
    with pytest.raises(NotImplementedError, match="reduction"):
        KFA.flex_attention(q, k, v, score_mod=lambda s, b, h, qi, kv: s.sum())
    causal = KFA.create_block_mask(lambda b, h, qi, kv: qi >= kv, None, None, 50, 50)
    not_bool = KFA.BlockMask.from_kv_blocks(causal.kv_num_blocks, causal.kv_indices,
                                           mask_mod=lambda b, h, qi, kv: qi - kv, seq_lengths=(50, 50))
    with pytest.raises(TypeError, match="bool"):
        KFA.flex_attention(q, k, v, block_mask=not_bool)
    # a captured tensor indexed out of range: IndexError from the kernel's worker, not a crash
    doc = kiln.tensor([0, 1, 2])
    short = KFA.BlockMask.from_kv_blocks(causal.kv_num_blocks, causal.kv_indices,
                                         mask_mod=lambda b, h, qi, kv: doc[qi] == doc[kv], seq_lengths=(50, 50))
    with pytest.raises(IndexError):
        KFA.flex_attention(q, k, v, block_mask=short)
    with pytest.raises(IndexError):
        KFA.create_block_mask(lambda b, h, qi, kv: doc[qi] == doc[kv], None, None, 50, 50)


def test_bad_block_lists_raise():
    q, k, v = _qkv_small()
    neg = KFA.BlockMask.from_kv_blocks(kiln.tensor([[[1]]], dtype=kiln.int32),
                                       kiln.tensor([[[[0]]]], dtype=kiln.int32), BLOCK_SIZE=64, seq_lengths=(50, 50))
    neg.kv_indices = kiln.tensor([[[[-1]]]], dtype=kiln.int32)
    with pytest.raises(IndexError):
        KFA.flex_attention(q, k, v, block_mask=neg)
    many = KFA.BlockMask.from_kv_blocks(kiln.tensor([[[1]]], dtype=kiln.int32),
                                        kiln.tensor([[[[0]]]], dtype=kiln.int32), BLOCK_SIZE=64, seq_lengths=(50, 50))
    many.kv_num_blocks = kiln.tensor([[[5]]], dtype=kiln.int32)  # more blocks than the row holds
    with pytest.raises(RuntimeError):
        KFA.flex_attention(q, k, v, block_mask=many)


def test_block_larger_than_the_sequence():
    """One block of 2^20 covering everything equals no block mask (the tile stays the sequence's size)."""
    q, k, v = _qkv_small()
    big = KFA.BlockMask.from_kv_blocks(kiln.ones(1, 1, 1, dtype=kiln.int32), kiln.zeros(1, 1, 1, 1, dtype=kiln.int32),
                                       BLOCK_SIZE=1 << 20, seq_lengths=(50, 50))
    assert kiln.equal(KFA.flex_attention(q, k, v, block_mask=big), KFA.flex_attention(q, k, v))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=dname)
@pytest.mark.parametrize("L,S,E,Ev,masked", [(256, 256, 64, 64, True), (256, 256, 64, 64, False),
                                             (384, 384, 32, 96, True), (200, 160, 64, 64, True),
                                             (204, 160, 40, 64, True)])
def test_tiles_against_float64(L, S, E, Ev, masked, dtype):
    """Sizes that are multiples of 32 take the packed tile products: bfloat16 on AMX (K^T and V packed
    once per call for the forward; the backward on the bfloat16 GEMM), float32 with AVX-512 (the
    forward's K^T packed panel by panel; the backward's five products on tiles when E and Ev are
    multiples of 32 too, each kv block's K^T and V^T packed); elsewhere the generic products. Output and gradients against torch's SDPA in float64 on the same
    inputs. 200 queries: the last query block (72 rows) takes the float32 tiles (a multiple of 8) but
    the generic bfloat16 products; 204 (76 rows) the generic ones in both."""
    g = torch.Generator().manual_seed(L + E)
    q = torch.randn(2, 3, L, E, generator=g).to(dtype)
    k = torch.randn(2, 3, S, E, generator=g).to(dtype)
    v = torch.randn(2, 3, S, Ev, generator=g).to(dtype)
    dout = torch.randn(2, 3, L, Ev, generator=g).to(dtype)
    tq, tk, tv = (t.double().requires_grad_() for t in (q, k, v))
    ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=masked)
    ref.backward(dout.double())
    kq, kk, kv = (to_kiln(t).requires_grad_() for t in (q, k, v))
    bm = KFA.create_block_mask(_causal, None, None, L, S, device="cpu") if masked else None
    out = KFA.flex_attention(kq, kk, kv, block_mask=bm)
    (fr, fa), (gr, ga) = FWD_TOL[dname(dtype)][0], GRAD_TOL[dname(dtype)]
    close(out, ref, fr, fa, "out")
    out.backward(to_kiln(dout))
    for name, got, want in (("dq", kq.grad, tq.grad), ("dk", kk.grad, tk.grad), ("dv", kv.grad, tv.grad)):
        close(got, want, gr, ga * mag(want), name)


@pytest.mark.parametrize("kv_block", [48, 64])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=dname)
def test_tiles_with_gqa_score_mod_and_odd_blocks(dtype, kv_block):
    """The packed tile products beside the rest: GQA (4 query heads on 2 kv heads, packed buffers indexed
    per kv head), one kv batch broadcast to two query batches (its gradients summed over both), a
    score_mod (the unfused softmax before the packed P V; the scale applied before it), E = 128 (four k
    blocks of the tiles). kv blocks of 48 keys: tiles (j0 a multiple of 32) and generic products
    alternate in one forward row and the float32 backward takes none; of 64: the float32 backward's
    tiles (each kv block's K^T and V^T packed) with GQA, the broadcast batch and the score_mod. Query
    blocks of 64, so the bfloat16 tiles apply too. Against the same math in float64."""
    B, L, E, Ev, H, Hkv = 2, 192, 128, 64, 4, 2
    g = torch.Generator().manual_seed(5)
    q = torch.randn(B, H, L, E, generator=g).to(dtype)
    k = torch.randn(1, Hkv, L, E, generator=g).to(dtype)
    v = torch.randn(1, Hkv, L, Ev, generator=g).to(dtype)
    dout = torch.randn(B, H, L, Ev, generator=g).to(dtype)
    tq, tk, tv = (t.double().requires_grad_() for t in (q, k, v))
    scale = 1.0 / math.sqrt(E)
    kx, vx = (t.expand(B, -1, -1, -1).repeat_interleave(H // Hkv, 1) for t in (tk, tv))
    s = tq @ kx.transpose(-1, -2) * scale
    idx = torch.arange(L, dtype=torch.float64)
    s = s + 0.05 * (idx[None, :] - idx[:, None])  # the score_mod: a relative-position bias
    s = s.masked_fill(idx[:, None] < idx[None, :], float("-inf"))
    ref = torch.softmax(s, -1) @ vx
    ref.backward(dout.double())

    def bias(score, b, h, qi, kv):
        return score + 0.05 * (kv - qi)

    kq, kk, kv = (to_kiln(t).requires_grad_() for t in (q, k, v))
    bm = KFA.create_block_mask(_causal, B, None, L, L, device="cpu", BLOCK_SIZE=(64, kv_block))
    out = KFA.flex_attention(kq, kk, kv, score_mod=bias, block_mask=bm, enable_gqa=True)
    (fr, fa), (gr, ga) = FWD_TOL[dname(dtype)][0], GRAD_TOL[dname(dtype)]
    close(out, ref, fr, fa, "out")
    out.backward(to_kiln(dout))
    for name, got, want in (("dq", kq.grad, tq.grad), ("dk", kk.grad, tk.grad), ("dv", kv.grad, tv.grad)):
        close(got, want, gr, ga * mag(want), name)


@pytest.mark.parametrize("scale", [0.0, -0.5])
def test_tiles_with_zero_and_negative_scale(scale):
    """A scale of 0 or below with masked scores: the masked -inf must stay -inf (not NaN from -inf * 0, not
    +inf from -inf * -0.5), so the tiles apply the scale before the mask there. float32, sizes that take
    every tile kernel, forward and backward against float64."""
    L, E = 256, 32
    g = torch.Generator().manual_seed(7)
    q, k, v, dout = (torch.randn(1, 2, L, E, generator=g) for _ in range(4))
    tq, tk, tv = (t.double().requires_grad_() for t in (q, k, v))
    s = (tq @ tk.transpose(-1, -2)) * scale
    idx = torch.arange(L)
    s = s.masked_fill(idx[:, None] < idx[None, :], float("-inf"))
    ref = torch.softmax(s, -1) @ tv
    ref.backward(dout.double())
    kq, kk, kv = (to_kiln(t).requires_grad_() for t in (q, k, v))
    bm = KFA.create_block_mask(_causal, None, None, L, L, device="cpu")
    out = KFA.flex_attention(kq, kk, kv, block_mask=bm, scale=scale)
    close(out, ref, 1e-5, 1e-6, "out")
    out.backward(to_kiln(dout))
    for name, got, want in (("dq", kq.grad, tq.grad), ("dk", kk.grad, tk.grad), ("dv", kv.grad, tv.grad)):
        assert not bool(kt(got).isnan().any()), name
        close(got, want, 1e-4, 5e-5 * mag(want), name)
