"""op_db entry of FlexAttention (issue 11): kiln.nn.attention.flex_attention.flex_attention (covering the
table ops `_flex_attention` and `_flex_attention_backward`) against torch 2.13's eager flex_attention for
values, and, for gradients (torch's CPU flex_attention raises NotImplementedError whenever q, k or v
requires grad), against the same attention written with plain torch ops in float64. Block masks and
modifiers are named by the sample (mask=, mod=) and built by each side with its own library."""
import math
import warnings

import torch

import kiln
from op_db import X, S, entry


def _masks(lib):
    return {
        "causal": lambda b, h, q, kv: q >= kv,
        "window": lambda b, h, q, kv: (q >= kv) & (q - kv <= 5),
        "prefix": lambda b, h, q, kv: (kv < 4) | (q >= kv),
        "per-head": lambda b, h, q, kv: (q + h) % 3 != kv % 3,
        "late-rows": lambda b, h, q, kv: q >= 3,
    }


def _mods(lib):
    return {
        "bias": lambda s, b, h, q, kv: s + (kv - q) * 0.125,
        "softcap": lambda s, b, h, q, kv: 2.0 * lib.tanh(s / 2.0),
        "head-scale": lambda s, b, h, q, kv: s * (h + 1),
    }


def _kiln_flex(q, k, v, mask=None, mod=None, block=16, **kw):
    from kiln.nn.attention.flex_attention import flex_attention, create_block_mask
    bm = None
    if mask is not None:
        bm = create_block_mask(_masks(kiln)[mask], None, q.shape[1] if mask == "per-head" else None,
                               q.shape[2], k.shape[2], BLOCK_SIZE=block)
    return flex_attention(q, k, v, score_mod=None if mod is None else _mods(kiln)[mod], block_mask=bm, **kw)


def _plain(q, k, v, mask=None, mod=None, scale=None, enable_gqa=False):
    """The attention with plain torch ops (torch.where on the dense mask, softmax with zero rows)."""
    B, H, L, E = q.shape
    S_ = k.shape[2]
    if enable_gqa:
        k = k.repeat_interleave(H // k.shape[1], 1)
        v = v.repeat_interleave(H // v.shape[1], 1)
    s = (q @ k.transpose(-2, -1)) * (1 / math.sqrt(E) if scale is None else scale)
    b_ = torch.arange(B).view(B, 1, 1, 1)
    h_ = torch.arange(H).view(1, H, 1, 1)
    qi = torch.arange(L).view(1, 1, L, 1)
    kv = torch.arange(S_).view(1, 1, 1, S_)
    if mod is not None:
        s = _mods(torch)[mod](s, b_, h_, qi, kv)
    if mask is not None:
        s = torch.where(_masks(torch)[mask](b_, h_, qi, kv), s, torch.tensor(-math.inf, dtype=s.dtype))
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return p @ v


def _torch_flex(q, k, v, mask=None, mod=None, block=16, **kw):
    if q.requires_grad or k.requires_grad or v.requires_grad:
        return _plain(q, k, v, mask, mod, **kw)
    from torch.nn.attention.flex_attention import flex_attention, create_block_mask
    bm = None
    if mask is not None:
        bm = create_block_mask(_masks(torch)[mask], None, q.shape[1] if mask == "per-head" else None,
                               q.shape[2], k.shape[2], device="cpu", BLOCK_SIZE=block)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return flex_attention(q, k, v, score_mod=None if mod is None else _mods(torch)[mod], block_mask=bm, **kw)


def _flex_samples(dtype, grad):
    def M(*shape, seed):
        return X(shape, dtype, grad, seed, low=-1, high=1)
    q, k, v = M(2, 2, 37, 8, seed=1), M(2, 2, 45, 8, seed=2), M(2, 2, 45, 6, seed=3)
    out = [S(q, k, v, desc="plain"), S(q, k, v, scale=0.3, desc="scale")]
    for m in ("causal", "window", "prefix", "per-head", "late-rows"):
        out.append(S(q, k, v, mask=m, desc=f"mask-{m}"))
    for md in ("bias", "softcap", "head-scale"):
        out.append(S(q, k, v, mod=md, desc=f"mod-{md}"))
    out.append(S(q, k, v, mask="causal", mod="softcap", block=(16, 8), desc="causal-softcap-blocks-16x8"))
    out.append(S(M(1, 4, 20, 8, seed=4), M(1, 2, 20, 8, seed=5), M(1, 2, 20, 8, seed=6), enable_gqa=True,
                 mask="causal", desc="gqa-causal"))
    out.append(S(q.transpose(2, 3).contiguous().transpose(2, 3), k, v, mask="window", desc="strided-q"))
    return out


FLEX_OPS = [entry("nn.attention.flex_attention.flex_attention", _flex_samples, kiln_fn=_kiln_flex,
                  torch_fn=_torch_flex, covers=("_flex_attention", "_flex_attention_backward"),
                  dtypes=("float32", "float64", "bfloat16", "float16"), method=False,
                  tol={"float32": (1e-5, 1e-5), "float64": (1e-7, 1e-7), "bfloat16": (1.6e-2, 1e-2),
                       "float16": (2e-3, 1e-3)},
                  meta=False, meta_reason="block masks and traced modifiers read CPU data (torch's too)")]
