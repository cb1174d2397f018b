"""kiln.nn.attention.flex_attention, as torch.nn.attention.flex_attention.

flex_attention(q, k, v, score_mod, block_mask) computes softmax(score_mod(q k^T * scale)) v over the
positions mask_mod keeps, in one fused CPU kernel forward and backward (kiln/attention/flex.h): no
compile step, no (L, S) buffer, and gradients for q, k, v and for tensors a score_mod captures.

score_mod(score, b, h, q_idx, kv_idx) and mask_mod(b, h, q_idx, kv_idx) are written with kiln ops.
They are never called per element: each is traced once (on data-less stand-ins) into a program the
kernel runs on whole tiles; the trace is cached per function, dtype and the tensors it captures."""
import inspect
import itertools
import math
import warnings
import weakref
from typing import NamedTuple

import kiln
from kiln import _C

__all__ = ["BlockMask", "flex_attention", "create_block_mask", "create_mask", "and_masks", "or_masks",
           "noop_mask", "AuxRequest", "AuxOutput"]

_DEFAULT_SPARSE_BLOCK_SIZE = 128
_LARGE_SPARSE_BLOCK_SIZE = 1 << 30


class AuxRequest(NamedTuple):
    """Which auxiliary outputs flex_attention returns (return_aux=)."""
    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """flex_attention's auxiliary outputs: lse (B, Hq, L), natural log; max_scores (B, Hq, L), the row
    maximum of the modified scores. -inf for rows whose scores are all masked."""
    lse: object = None
    max_scores: object = None


def _identity(score, b, h, q_idx, kv_idx):
    return score


def noop_mask(b, h, q_idx, kv_idx):
    """The mask_mod that keeps every score."""
    return kiln.ones((), dtype=kiln.bool)


def _sliced_mask_mod_error(b, h, q_idx, kv_idx):
    raise RuntimeError(
        "Cannot use mask_mod from a sliced BlockMask. When you index a BlockMask, its mask_mod is not "
        "adjusted to the slice; set sliced_mask.mask_mod to a mask_mod that accounts for the offset.")


def or_masks(*mask_mods):
    """The mask_mod that keeps a score when any of mask_mods does."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def or_mask(b, h, q_idx, kv_idx):
        result = kiln.zeros((), dtype=kiln.bool)
        for m in mask_mods:
            result = result | m(b, h, q_idx, kv_idx)
        return result
    return or_mask


def and_masks(*mask_mods):
    """The mask_mod that keeps a score when every one of mask_mods does."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def and_mask(b, h, q_idx, kv_idx):
        result = kiln.ones((), dtype=kiln.bool)
        for m in mask_mods:
            result = result & m(b, h, q_idx, kv_idx)
        return result
    return and_mask


def _mod_arity(fn):
    """4 for a mask_mod, 5 for a score_mod (positional parameters without defaults, as torch)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 4
    n = sum(1 for p in params if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    return 5 if n == 5 else 4


# ---- block masks ---------------------------------------------------------------------------------

class BlockMask:
    """A block-sparse attention mask (torch's format): per (batch, head, row of Q_BLOCK_SIZE queries)
    the partial kv blocks (mask_mod applies) and the full ones (it does not), as counts and index rows
    whose first `num_blocks` entries are valid; the q_* fields are the transposes (per kv block, its
    query blocks), which the backward reads. int32 throughout."""

    def __init__(self, seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices,
                 q_num_blocks, q_indices, full_q_num_blocks, full_q_indices,
                 BLOCK_SIZE=(_DEFAULT_SPARSE_BLOCK_SIZE, _DEFAULT_SPARSE_BLOCK_SIZE), mask_mod=noop_mask):
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError("full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        if (full_q_num_blocks is None) != (full_q_indices is None):
            raise AssertionError("full_q_num_blocks and full_q_indices must be both provided or omitted")
        self.seq_lengths = tuple(seq_lengths)
        self.kv_num_blocks = kv_num_blocks
        self.kv_indices = kv_indices
        self.full_kv_num_blocks = full_kv_num_blocks
        self.full_kv_indices = full_kv_indices
        self.q_num_blocks = q_num_blocks
        self.q_indices = q_indices
        self.full_q_num_blocks = full_q_num_blocks
        self.full_q_indices = full_q_indices
        self.BLOCK_SIZE = tuple(BLOCK_SIZE)
        self.mask_mod = mask_mod

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks, kv_indices, full_kv_num_blocks=None, full_kv_indices=None,
                       BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE, mask_mod=None, seq_lengths=None,
                       compute_q_blocks=True):
        """A BlockMask from its kv lists; the q lists are computed (compute_q_blocks)."""
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError("full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        q_num, q_idx, fq_num, fq_idx = None, None, None, None
        if compute_q_blocks:
            q_num, q_idx = _C._flex_transpose_ordered(kv_num_blocks, kv_indices)
            if full_kv_num_blocks is not None:
                fq_num, fq_idx = _C._flex_transpose_ordered(full_kv_num_blocks, full_kv_indices)
        if isinstance(BLOCK_SIZE, int):
            BLOCK_SIZE = (BLOCK_SIZE, BLOCK_SIZE)
        if seq_lengths is None:
            seq_lengths = (kv_indices.shape[-2] * BLOCK_SIZE[0], kv_indices.shape[-1] * BLOCK_SIZE[1])
        return cls(seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, q_num, q_idx,
                   fq_num, fq_idx, BLOCK_SIZE=BLOCK_SIZE, mask_mod=mask_mod if mask_mod is not None else noop_mask)

    def as_tuple(self, flatten=True):
        bs = tuple(self.BLOCK_SIZE) if flatten else (self.BLOCK_SIZE,)
        sl = tuple(self.seq_lengths) if flatten else (self.seq_lengths,)
        return (*sl, self.kv_num_blocks, self.kv_indices, self.full_kv_num_blocks, self.full_kv_indices,
                self.q_num_blocks, self.q_indices, self.full_q_num_blocks, self.full_q_indices, *bs, self.mask_mod)

    @property
    def shape(self):
        *batch, _, _ = self.kv_indices.shape
        return tuple(batch) + tuple(self.seq_lengths)

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def sparsity(self):
        """The percentage of the attention matrix in blocks that are never computed."""
        computed = int(self.kv_num_blocks.to(kiln.int64).sum().item())
        if self.full_kv_num_blocks is not None:
            computed += int(self.full_kv_num_blocks.to(kiln.int64).sum().item())
        total = self.numel()
        return 100 * (1 - computed * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1] / total) if total else 0.0

    def to_dense(self):
        """The block-level mask (..., Q_BLOCKS, KV_BLOCKS), int32: 1 where a block is computed."""
        d = _C._flex_ordered_to_dense(self.kv_num_blocks, self.kv_indices, self.kv_indices.shape[-1])
        if self.full_kv_num_blocks is not None:
            d = d | _C._flex_ordered_to_dense(self.full_kv_num_blocks, self.full_kv_indices,
                                              self.full_kv_indices.shape[-1])
        return d

    def to_string(self, grid_size=(20, 20), limit=4):
        """A picture of the block mask: █ computed, ░ partly, blank skipped (torch's format)."""
        dense = self.to_dense()
        *batch_dims, num_rows, num_cols = dense.shape
        if isinstance(grid_size, int):
            max_rows = max_cols = grid_size
        elif grid_size == -1:
            max_rows, max_cols = num_rows, num_cols
        else:
            max_rows, max_cols = grid_size

        def cdiv(a, b):
            return (a + b - 1) // b

        def block_vis(*batch_idx):
            vis = f"{batch_idx}" + "\n"
            cur = dense
            for i in batch_idx:
                cur = cur[i]
            row_step, col_step = max(1, cdiv(num_rows, max_rows)), max(1, cdiv(num_cols, max_cols))
            for r in range(0, num_rows, row_step):
                for c in range(0, num_cols, col_step):
                    frac = cur[r:r + row_step, c:c + col_step].to(kiln.float32).mean().item()
                    vis += ("█" if frac == 1 else " " if frac == 0 else "░") * 2
                vis += "\n"
            return vis

        total = []
        for i, idx in enumerate(itertools.product(*[range(n) for n in batch_dims])):
            if i == limit:
                total.append("...")
                total.append("To print out more, set BlockMask.to_string(limit=N)")
                total.append("You can also index (BlockMask[batch, head]) to choose a specific batch or head")
                break
            total.append(block_vis(*idx))
        return "\n".join(total)

    def __str__(self):
        return (f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n"
                + self.to_string().strip() + "\n)")

    def __repr__(self):
        def sh(x):
            return x.shape if x is not None else None
        name = getattr(self.mask_mod, "__name__", self.mask_mod)
        return (f"BlockMask(\n    kv_num_blocks={self.kv_num_blocks.shape},\n    kv_indices={self.kv_indices.shape},\n"
                f"    full_kv_num_blocks={sh(self.full_kv_num_blocks)},\n    full_kv_indices={sh(self.full_kv_indices)},\n"
                f"    q_num_blocks={sh(self.q_num_blocks)},\n    q_indices={sh(self.q_indices)},\n"
                f"    full_q_num_blocks={sh(self.full_q_num_blocks)},\n    full_q_indices={sh(self.full_q_indices)},\n"
                f"    BLOCK_SIZE={self.BLOCK_SIZE},\n    shape={self.shape},\n    sparsity={self.sparsity():.2f}%,\n"
                f"    mask_mod={name}\n)")

    def __getitem__(self, index):
        """The mask of some batches / heads / query-block rows (its mask_mod cannot be used as is)."""
        index = (index,) if not isinstance(index, tuple) else index
        padded = (*index, slice(None), slice(None), slice(None))[:3]
        sizes = self.kv_num_blocks.shape[:3]
        index = tuple((slice(i + n, i + n + 1) if -n <= i < 0 else slice(i, i + 1)) if isinstance(i, int) else i
                      for i, n in zip(padded, sizes))
        fn = self.full_kv_num_blocks[index] if self.full_kv_num_blocks is not None else None
        fi = self.full_kv_indices[index] if self.full_kv_indices is not None else None
        return BlockMask.from_kv_blocks(self.kv_num_blocks[index], self.kv_indices[index], fn, fi,
                                        BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=_sliced_mask_mod_error,
                                        seq_lengths=self.seq_lengths, compute_q_blocks=self.q_indices is not None)

    def _adjust(self, new_q_len, new_kv_len):
        """The mask cropped to the upper-left (new_q_len, new_kv_len) corner."""
        rows = (new_q_len + self.BLOCK_SIZE[0] - 1) // self.BLOCK_SIZE[0]
        cols = (new_kv_len + self.BLOCK_SIZE[1] - 1) // self.BLOCK_SIZE[1]

        def adjust(num, idx):
            idx = idx[:, :, :rows, :cols]
            num = num[:, :, :rows]
            num = kiln.where(num < cols, num, cols)
            num = (idx < num[:, :, :, None]).sum(dim=-1).to(kiln.int32)
            return num, idx
        kn, ki = adjust(self.kv_num_blocks, self.kv_indices)
        fn, fi = (None, None) if self.full_kv_num_blocks is None else adjust(self.full_kv_num_blocks,
                                                                              self.full_kv_indices)
        return self.from_kv_blocks(kn, ki, fn, fi, BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=self.mask_mod,
                                   seq_lengths=(new_q_len, new_kv_len), compute_q_blocks=self.q_indices is not None)

    def to(self, device):
        """The mask on `device` (the CPU is kiln's only device so far)."""
        def mv(x):
            return x.to(device) if x is not None else None
        return BlockMask(self.seq_lengths, *[mv(getattr(self, a)) for a in (
            "kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks", "q_indices",
            "full_q_num_blocks", "full_q_indices")], BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=self.mask_mod)


def create_mask(mod_fn, B, H, Q_LEN, KV_LEN, device="cpu"):
    """mod_fn (a mask_mod, or a score_mod: kept where it is not -inf) on every (b, h, q_idx, kv_idx):
    a (B, H, Q_LEN, KV_LEN) bool tensor. B or H of None count as 1."""
    B = 1 if B is None else B
    H = 1 if H is None else H
    if _mod_arity(mod_fn) == 5:
        b = kiln.arange(B).view(B, 1, 1, 1)
        h = kiln.arange(H).view(1, H, 1, 1)
        m = kiln.arange(Q_LEN).view(1, 1, Q_LEN, 1)
        n = kiln.arange(KV_LEN).view(1, 1, 1, KV_LEN)
        out = mod_fn(kiln.zeros(B, H, Q_LEN, KV_LEN), b, h, m, n)
        return ~kiln.isneginf(out.expand(B, H, Q_LEN, KV_LEN))
    return _C._flex_create_mask(mod_fn, B, H, Q_LEN, KV_LEN)


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device="cpu", BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE,
                      _compile=False):
    """The BlockMask of mask_mod: blocks whose every position is kept are full (mask_mod skipped there),
    blocks with some kept partial, others absent. mask_mod is evaluated a band of query blocks at a time,
    so memory stays O(block rows x KV_LEN). B or H of None broadcast. _compile is accepted for torch's
    signature and changes nothing (there is nothing to compile)."""
    if _mod_arity(mask_mod) != 4:
        raise AssertionError(f"create-block_mask requires a mask_mod function! Got {mask_mod}")
    qb, kb = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else BLOCK_SIZE
    kn, ki, fn, fi = _C._flex_create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, qb, kb)
    return BlockMask.from_kv_blocks(kn, ki, fn, fi, BLOCK_SIZE=(qb, kb), mask_mod=mask_mod,
                                    seq_lengths=(Q_LEN, KV_LEN))


def _create_empty_block_mask(query, key):
    return BlockMask.from_kv_blocks(kiln.ones(1, 1, 1, dtype=kiln.int32), kiln.zeros(1, 1, 1, 1, dtype=kiln.int32),
                                    BLOCK_SIZE=_LARGE_SPARSE_BLOCK_SIZE, seq_lengths=(1, 1))


# ---- tracing -------------------------------------------------------------------------------------

_traces = weakref.WeakKeyDictionary()


def _captured_ids(fn):
    """Identities of the tensors fn reaches through its closure, defaults and globals: a trace is reused
    only while they are the same objects."""
    ids = []
    f = getattr(fn, "func", fn)  # functools.partial
    for c in getattr(f, "__closure__", None) or ():
        try:
            ids.append(id(c.cell_contents))
        except ValueError:
            ids.append(0)
    code, g = getattr(f, "__code__", None), getattr(f, "__globals__", {})
    if code is not None:
        for name in code.co_names:
            v = g.get(name)
            if isinstance(v, kiln.Tensor):
                ids.append(id(v))
    for a in getattr(fn, "args", ()) or ():
        ids.append(id(a))
    return tuple(ids)


def _trace(fn, n_args, dtype):
    key = (n_args, dtype, _captured_ids(fn))
    try:
        per_fn = _traces.setdefault(fn, {})
    except TypeError:  # not weak-referenceable: trace every call
        per_fn = {}
    hit = per_fn.get(key)
    if hit is None:
        pid, bufs, _ = _C._flex_trace(fn, n_args, dtype)
        hit = per_fn[key] = (pid, list(bufs))
    return hit


_warned_lse = [False]


# ---- flex_attention ------------------------------------------------------------------------------

def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                   return_lse=False, kernel_options=None, *, return_aux=None):
    """Attention with score_mod applied to the scaled scores and the block mask's mask_mod dropping
    scores: q (B, Hq, L, E), k (B, Hkv, S, E), v (B, Hkv, S, Ev) -> (B, Hq, L, Ev). Differentiable in
    q, k, v and in tensors score_mod captures. kernel_options is accepted and ignored (kiln's kernel
    has no tunables)."""
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    if query.dtype != key.dtype or query.dtype != value.dtype:
        raise ValueError(f"Expected query, key, and value to have the same dtype, but got query.dtype: "
                         f"{query.dtype}, key.dtype: {key.dtype}, and value.dtype: {value.dtype} instead.")
    if query.size(-1) != key.size(-1):
        raise ValueError(f"Expect query and key/value to have the same embedding dimension but got "
                         f"E={query.size(-1)} and E={key.size(-1)}.")
    if (not enable_gqa) and query.size(-3) != key.size(-3):
        raise ValueError(f"Expect query and key/value to have the same number of heads but got "
                         f"Hq={query.size(-3)} and Hkv={key.size(-3)}. Try setting enable_gqa=True for GQA.")
    if enable_gqa and query.size(1) % key.size(1) != 0:
        raise ValueError(f"Expect number of query heads to be a multiple of kv heads for GQA but got "
                         f"Hq={query.size(1)} and Hkv={key.size(1)}.")
    if query.size(0) != key.size(0):
        if block_mask is None:
            raise ValueError(f"Expect query and key/value to have the same batch size, or non-none block_mask, "
                             f"but got block_mask=None, Bq={query.size(0)}, and Bkv={key.size(0)}.")
        if block_mask.kv_num_blocks.size(0) != query.size(0):
            raise ValueError(f"Expect query and key/value to have the same batch size, or block_mask and query "
                             f"to have the same batch size, but got Bq={query.size(0)}, Bkv={key.size(0)}, "
                             f"B_block_mask={block_mask.kv_num_blocks.size(0)}.")
    if block_mask is not None:
        if block_mask.mask_mod is _sliced_mask_mod_error:
            raise RuntimeError("Cannot use mask_mod from a sliced BlockMask")
        if tuple(block_mask.BLOCK_SIZE) == (_LARGE_SPARSE_BLOCK_SIZE, _LARGE_SPARSE_BLOCK_SIZE):
            block_mask = None  # the default mask: every position
    if block_mask is not None:
        ql, kl = block_mask.shape[-2], block_mask.shape[-1]
        if query.size(-2) > ql or key.size(-2) > kl:
            raise ValueError(
                f"block_mask was created for block_mask.shape={block_mask.shape} but got q_len={query.size(-2)} "
                f"and kv_len={key.size(-2)}. As the block mask was created for a smaller length than you're using "
                "it for, you likely need to create a new block mask.")
        if query.size(-2) < ql or key.size(-2) < kl:
            raise ValueError(
                f"block_mask was created for block_mask.shape={block_mask.shape} but got q_len={query.size(-2)} "
                f"and kv_len={key.size(-2)}. As the block mask was created for a larger length than you're using "
                "it for, you can either 1. create a new block mask with the correct length, or 2. 'adjust' the "
                "existing block mask to the correct length by calling block_mask._adjust(q_len, kv_len). This "
                "essentially 'crops' the block mask to the upper left corner, which does not work for all "
                "mask_mods!")
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux. return_lse is deprecated, please use "
                         "return_aux=AuxRequest(lse=True) instead.")
    if return_lse and return_aux is None and not _warned_lse[0]:
        _warned_lse[0] = True
        warnings.warn("return_lse is deprecated and will be removed in v2.10. Please use "
                      "return_aux=AuxRequest(lse=True) instead.", FutureWarning, stacklevel=2)
    if scale is None:
        scale = 1.0 / math.sqrt(query.size(-1))
    cd = kiln.float64 if query.dtype == kiln.float64 else kiln.float32
    sid, sbufs = (-1, []) if score_mod is None or score_mod is _identity else _trace(score_mod, 5, cd)
    if block_mask is None:
        blocks = (None, None, None, None)
        qb = kb = _DEFAULT_SPARSE_BLOCK_SIZE
        mid, mbufs = -1, []
    else:
        blocks = (block_mask.kv_num_blocks, block_mask.kv_indices, block_mask.full_kv_num_blocks,
                  block_mask.full_kv_indices)
        qb, kb = block_mask.BLOCK_SIZE
        mm = block_mask.mask_mod
        mid, mbufs = (-1, []) if mm is None or mm is noop_mask else _trace(mm, 4, cd)
    out, lse, max_scores = kiln.ops._flex_attention(query, key, value, *blocks, list(sbufs) + list(mbufs),
                                                    float(scale), bool(enable_gqa), int(qb), int(kb), sid, mid,
                                                    len(sbufs))
    if return_aux is not None:
        return out, AuxOutput(lse=lse if return_aux.lse else None,
                              max_scores=max_scores if return_aux.max_scores else None)
    if return_lse:
        return out, lse
    return out
