"""FlexAttention benchmarks for `make bench` (issue 11), B=1, H=8, E=64:
(a) kiln flex_attention with a causal block mask against torch's fused F.scaled_dot_product_attention
    (is_causal=True), float32 and bfloat16, forward and forward+backward, L = S = 1024, 4096 (and 8192 in
    the full run);
(b) kiln flex_attention (causal) against torch 2.13's eager flex_attention, which materialises the scores
    (forward: torch's CPU flex_attention has no backward), and in the full run against
    torch.compile(flex_attention) after its warm-up (compiling takes tens of seconds, outside the timing);
(c) a sliding window of 256 (causal) against kiln's own causal at the largest L: the note gives the speed-up
    and the ideal one (the ratio of visited blocks); the torch peer is SDPA with the window as a bool mask;
(d) the same window's peak memory at L = 16384 forward+backward (kiln.memory_stats()) against one (L, S)
    float32 score matrix."""
import warnings

import numpy as np
import torch

import kiln
from kiln.nn.attention.flex_attention import create_block_mask as k_cbm
from kiln.nn.attention.flex_attention import flex_attention as k_flex

B, H, E = 1, 8, 64
DT = {"f32": (kiln.float32, torch.float32), "bf16": (kiln.bfloat16, torch.bfloat16)}


def _causal(b, h, q, kv):
    return q >= kv


def _window(b, h, q, kv):
    return (q >= kv) & (q - kv < 256)


def _qkv(L, tag, grad):
    rng = np.random.default_rng(0)
    arrs = [rng.standard_normal((B, H, L, E), dtype=np.float32) for _ in range(3)]
    kd, td = DT[tag]
    ks = [kiln.from_numpy(a.copy()).to(kd) for a in arrs]
    ts = [torch.from_numpy(a.copy()).to(td) for a in arrs]
    if grad:
        ks = [x.requires_grad_() for x in ks]
        ts = [x.requires_grad_() for x in ts]
    g = rng.standard_normal((B, H, L, E), dtype=np.float32)
    return ks, ts, kiln.from_numpy(g.copy()).to(kd), torch.from_numpy(g).to(td)


def _flops(L, visited_fraction=0.5, backward=False):
    fwd = 4.0 * B * H * L * L * E * visited_fraction
    return fwd * 3.5 if backward else fwd


def _vs_sdpa(Case, tag, L, backward):
    def setup():
        ks, ts, kg, tg = _qkv(L, tag, backward)
        bm = k_cbm(_causal, None, None, L, L)
        if not backward:
            return (lambda: k_flex(*ks, block_mask=bm)), \
                (lambda: torch.nn.functional.scaled_dot_product_attention(*ts, is_causal=True))
        return (lambda: k_flex(*ks, block_mask=bm).backward(kg)), \
            (lambda: torch.nn.functional.scaled_dot_product_attention(*ts, is_causal=True).backward(tg))
    kind = "fwd+bwd" if backward else "fwd"
    return Case(f"flex causal {tag} L={L} {kind} (torch: SDPA causal)", setup, _flops(L, backward=backward),
                "GFLOP/s")


def _vs_torch_flex(Case, L, compiled):
    def setup():
        from torch.nn.attention.flex_attention import create_block_mask as t_cbm
        from torch.nn.attention.flex_attention import flex_attention as t_flex
        ks, ts, _, _ = _qkv(L, "f32", False)
        kbm = k_cbm(_causal, None, None, L, L)
        tbm = t_cbm(_causal, None, None, L, L, device="cpu")
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
        fn = torch.compile(t_flex) if compiled else t_flex
        if compiled:
            fn(*ts, block_mask=tbm)  # the compile, untimed
        return (lambda: k_flex(*ks, block_mask=kbm)), (lambda: fn(*ts, block_mask=tbm))
    peer = "torch.compile(flex_attention)" if compiled else "eager flex_attention"
    return Case(f"flex causal f32 L={L} fwd (torch: {peer})", setup, _flops(L), "GFLOP/s")


def _visited(bm):
    n = int(bm.kv_num_blocks.to(kiln.int64).sum().item())
    return n + int(bm.full_kv_num_blocks.to(kiln.int64).sum().item())


def _window_case(Case, L):
    def setup():
        ks, ts, kg, tg = _qkv(L, "f32", True)
        bm = k_cbm(_window, None, None, L, L)
        i = torch.arange(L)
        mask = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < 256)
        return (lambda: k_flex(*ks, block_mask=bm).backward(kg)), \
            (lambda: torch.nn.functional.scaled_dot_product_attention(*ts, attn_mask=mask).backward(tg))

    def note():
        from gemm_cases import _kiln_seconds
        ks, _, kg, _ = _qkv(L, "f32", True)
        cbm, wbm = k_cbm(_causal, None, None, L, L), k_cbm(_window, None, None, L, L)
        tc = _kiln_seconds(lambda: k_flex(*ks, block_mask=cbm).backward(kg), repeats=3)
        tw = _kiln_seconds(lambda: k_flex(*ks, block_mask=wbm).backward(kg), repeats=3)
        ideal = _visited(cbm) / _visited(wbm)
        # (d): peak memory of the same window at L = 16384, forward + backward
        big = 16384
        kb, _, gb, _ = _qkv(big, "f32", True)
        bmb = k_cbm(_window, None, None, big, big)
        kiln.reset_peak_memory_stats()
        before = kiln.memory_stats()["allocated_bytes.all.current"]
        k_flex(*kb, block_mask=bmb).backward(gb)
        peak = kiln.memory_stats()["allocated_bytes.all.peak"] - before
        return (f"{tc / tw:.1f}x kiln causal, ideal {ideal:.1f}x ({tc / tw / ideal:.2f} of ideal); "
                f"L=16384 peak {peak / 2**20:.0f} MiB vs one LxS f32 {big * big * 4 / 2**20:.0f} MiB")
    bm = k_cbm(_window, None, None, L, L)
    visited = _visited(bm) * 128 * 128 / (L * L)
    return Case(f"flex window-256 f32 L={L} fwd+bwd (torch: SDPA bool mask)", setup,
                _flops(L, visited, backward=True), "GFLOP/s", note=note)


def flex_cases(Case, quick):
    cases = []
    lengths = [1024, 4096] if quick else [1024, 4096, 8192]
    for tag in ("f32", "bf16"):
        for L in lengths:
            for backward in (False, True):
                cases.append(_vs_sdpa(Case, tag, L, backward))
    cases.append(_vs_torch_flex(Case, 1024, False))
    if not quick:
        cases.append(_vs_torch_flex(Case, 4096, False))
        cases.append(_vs_torch_flex(Case, 1024, True))
    cases.append(_window_case(Case, lengths[-1]))
    return cases
