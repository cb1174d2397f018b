// FlexAttention (torch.nn.attention.flex_attention): attention whose scores a score_mod changes and a
// mask_mod drops, over a block-sparse BlockMask, fused on the CPU forward and backward.
//
//   score_mod(score, b, h, q_idx, kv_idx) -> score'     mask_mod(b, h, q_idx, kv_idx) -> bool
//
// Both are traced once into programs (flex_program.h) that the kernel runs on whole tiles; tensors
// they capture are inputs of the op, so gradients reach those that require grad. The kernel visits
// only the blocks the BlockMask lists: full blocks skip mask_mod, partial ones apply it; no (L, S)
// buffer is ever made. The backward recomputes the probabilities from the saved logsumexp
// (FlashAttention-2) and runs score_mod's program in reverse.
#pragma once

#include <optional>
#include <vector>

#include "kiln/attention/flex_program.h"

namespace kiln {

using ScoreMod = flex::ScoreModFn;
using MaskMod = flex::MaskModFn;

// torch's BlockMask: per (batch, head, row of query blocks) the partial kv blocks (mask_mod applies)
// and the full ones (it does not), as counts and index rows whose valid prefix is ascending; the
// transposed lists (per kv block, its query blocks) for the backward. int32, shapes (B, H, Q_BLOCKS)
// and (B, H, Q_BLOCKS, KV_BLOCKS) (q_*: KV_BLOCKS and Q_BLOCKS swapped); B and H may be 1 to broadcast.
struct BlockMask {
  Tensor kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices;
  Tensor q_num_blocks, q_indices, full_q_num_blocks, full_q_indices;
  int64_t q_block_size = 128, kv_block_size = 128;
  int64_t q_len = 0, kv_len = 0;  // seq_lengths
  MaskMod mask_mod;               // empty: noop_mask

  // The mask from kv block lists (full_* optional); the q lists are computed. seq_lengths default to
  // the block grid's extent.
  static BlockMask from_kv_blocks(const Tensor& kv_num_blocks, const Tensor& kv_indices,
                                  const Tensor& full_kv_num_blocks = {}, const Tensor& full_kv_indices = {},
                                  int64_t q_block_size = 128, int64_t kv_block_size = 128, MaskMod mask_mod = {},
                                  std::optional<std::pair<int64_t, int64_t>> seq_lengths = std::nullopt);
  // The block-level mask (B, H, Q_BLOCKS, KV_BLOCKS) int32: 1 where a block is visited.
  Tensor to_dense() const;
  // Percentage of the (unpadded) attention matrix whose blocks are skipped.
  double sparsity() const;
};

// torch's create_mask: mask_mod evaluated on every (b, h, q_idx, kv_idx): (B, H, Q_LEN, KV_LEN) bool.
// B or H of nullopt count as 1.
Tensor create_mask(const MaskMod& mask_mod, std::optional<int64_t> B, std::optional<int64_t> H, int64_t q_len,
                   int64_t kv_len);
// torch's create_block_mask (separate full blocks): mask_mod evaluated a band of query blocks at a
// time (memory O(block rows x KV_LEN)), blocks classified full / partial / empty.
BlockMask create_block_mask(const MaskMod& mask_mod, std::optional<int64_t> B, std::optional<int64_t> H,
                            int64_t q_len, int64_t kv_len, int64_t q_block_size = 128, int64_t kv_block_size = 128);
// The ordered lists of a 0/1 block matrix (..., R, C) and their transposes: (num (..., R), indices
// (..., R, C)) int32, each indices row the set columns ascending, then the others ascending (torch's
// stable descending argsort).
std::pair<Tensor, Tensor> dense_to_ordered(const Tensor& dense);
std::pair<Tensor, Tensor> transpose_ordered(const Tensor& num_blocks, const Tensor& indices);
// (..., R, C) 0/1 int32 from ordered lists (num (..., R), indices (..., R, K)) over C columns.
Tensor ordered_to_dense(const Tensor& num_blocks, const Tensor& indices, int64_t C);

MaskMod and_masks(std::vector<MaskMod> mods);
MaskMod or_masks(std::vector<MaskMod> mods);
MaskMod noop_mask();

struct FlexAttentionOutput {
  Tensor out;         // (B, Hq, L, Ev), q's dtype
  Tensor lse;         // (B, Hq, L) float32 (float64 for float64 inputs), natural log; -inf: row masked
  Tensor max_scores;  // (B, Hq, L) the row max of the modified scores; -inf: row masked
};

// flex_attention on traced modifiers (trace once, call many times): score_mod / mask_mod ids from
// flex::trace_score_mod / trace_mask_mod (-1: none), their captured tensors, and the block mask's
// kv lists (undefined: every block visited, no mask).
FlexAttentionOutput flex_attention_traced(const Tensor& query, const Tensor& key, const Tensor& value,
                                          const flex::Traced& score_mod, const BlockMask* block_mask,
                                          const flex::Traced& mask_mod, std::optional<double> scale = std::nullopt,
                                          bool enable_gqa = false);
// The same tracing score_mod and block_mask->mask_mod on the call.
FlexAttentionOutput flex_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const ScoreMod& score_mod = {}, const BlockMask* block_mask = nullptr,
                                   std::optional<double> scale = std::nullopt, bool enable_gqa = false);

}  // namespace kiln
