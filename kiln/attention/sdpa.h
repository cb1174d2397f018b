// Scaled dot-product attention (torch.nn.functional.scaled_dot_product_attention), fused and
// memory efficient on the CPU.
//
// q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev). The batch dims broadcast as torch's
// do; with enable_gqa the head dim (dim -3) of k and v may divide q's (each k/v head serves a run
// of consecutive q heads, torch's repeat_interleave rule). attn_mask: bool (true = attend) or
// additive float, broadcastable to (..., L, S); is_causal: the top-left lower-triangular mask (tril
// of ones(L, S)). Rows with every key masked give zeros (as torch 2.13 does), not NaN.
//
// The kernel tiles queries and keys and keeps a streaming (online) softmax, so the (L, S) score
// matrix never exists: each thread works in O(block_q * block_k + block_q * Ev) scratch. The
// backward recomputes the probabilities per tile from q, k and the saved row logsumexp
// (FlashAttention-2). float32 and float64 compute in their own type, float16 / bfloat16 in float32.
// Dropout draws from kiln's Philox generator; the forward returns the (seed, offset) it used so the
// backward regenerates the same mask.
#pragma once

#include <optional>
#include <tuple>

#include "kiln/core/tensor.h"

namespace kiln {

// torch.nn.functional.scaled_dot_product_attention. scale defaults to 1 / sqrt(E).
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    bool enable_gqa = false);

// The table op `_sdpa_flash`: (out (..., L, Ev) in q's dtype, logsumexp (..., L) float32 (float64
// for float64 inputs; -inf for fully masked rows), rng_state int64 (2,) = {seed, offset} of the
// dropout draw, zeros without dropout).
std::tuple<Tensor, Tensor, Tensor> sdpa_flash(const Tensor& query, const Tensor& key,
                                              const Tensor& value, const Tensor& attn_mask = {},
                                              double dropout_p = 0.0, bool is_causal = false,
                                              std::optional<double> scale = std::nullopt,
                                              bool enable_gqa = false);

// The table op `_sdpa_flash_backward`: gradients of q, k, v at their own shapes and dtypes (GQA
// groups and broadcast batch dims summed), and, when mask_grad and the mask is float, the mask's
// gradient at the mask's shape (undefined otherwise). grad_logsumexp (optional) is the gradient
// flowing into the forward's logsumexp output.
std::tuple<Tensor, Tensor, Tensor, Tensor> sdpa_flash_backward(
    const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value,
    const Tensor& out, const Tensor& logsumexp, const Tensor& rng_state,
    const Tensor& attn_mask = {}, double dropout_p = 0.0, bool is_causal = false,
    std::optional<double> scale = std::nullopt, bool enable_gqa = false, bool mask_grad = false,
    const Tensor& grad_logsumexp = {});

}  // namespace kiln
