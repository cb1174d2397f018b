// Multi-head attention: torch.nn.MultiheadAttention and F.multi_head_attention_forward
// (torch 2.13's arguments, parameter names, initialisation, mask handling and errors).
//
// With need_weights the scores are formed explicitly (softmax(q k^T / sqrt(d) + mask)) so the
// weights can be returned; without, the fused scaled_dot_product_attention runs (no (L, S) matrix).
// Masks: attn_mask 2-D (L, S) or 3-D (N * num_heads, L, S), key_padding_mask (N, S) ((S)
// unbatched); bool masks mark positions NOT attended (true = masked), float masks are added to the
// scores.
#pragma once

#include <optional>
#include <tuple>

#include "kiln/nn/layers.h"

namespace kiln::nn::functional {

// torch's _canonical_mask: a bool mask becomes an additive mask of `dtype` (-inf where true); a
// floating mask is returned as is; other dtypes raise AssertionError.
Tensor canonical_mask(const Tensor& mask, const char* mask_name, Dtype dtype);

// torch.nn.functional.multi_head_attention_forward. query (L, N, E) or unbatched (L, E); key and
// value (S, N, Ek / Ev). Returns (attn_output (L, N, E), attn_weights (N, L, S) averaged over heads
// or (N, num_heads, L, S); undefined unless need_weights).
std::tuple<Tensor, Tensor> multi_head_attention_forward(
    const Tensor& query, const Tensor& key, const Tensor& value, int64_t embed_dim_to_check,
    int64_t num_heads, const Tensor& in_proj_weight, const Tensor& in_proj_bias,
    const Tensor& bias_k, const Tensor& bias_v, bool add_zero_attn, double dropout_p,
    const Tensor& out_proj_weight, const Tensor& out_proj_bias, bool training = true,
    const Tensor& key_padding_mask = {}, bool need_weights = true, const Tensor& attn_mask = {},
    bool use_separate_proj_weight = false, const Tensor& q_proj_weight = {},
    const Tensor& k_proj_weight = {}, const Tensor& v_proj_weight = {},
    bool average_attn_weights = true, bool is_causal = false);

}  // namespace kiln::nn::functional

namespace kiln::nn {

// MultiheadAttention's out_proj: a Linear under torch's class name (shown by repr).
class NonDynamicallyQuantizableLinear : public Linear {
 public:
  NonDynamicallyQuantizableLinear(int64_t in, int64_t out, bool bias = true,
                                  Dtype dtype = Dtype::Undefined)
      : Linear(in, out, bias, dtype) {
    name_ = "NonDynamicallyQuantizableLinear";
  }
};

// Parameters as torch: in_proj_weight (3E, E) when kdim == vdim == E, else q_proj_weight (E, E),
// k_proj_weight (E, kdim), v_proj_weight (E, vdim) (xavier_uniform); in_proj_bias (3E) and
// out_proj.bias zeros; bias_k / bias_v (1, 1, E) xavier_normal with add_bias_kv; out_proj Linear.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     bool add_bias_kv = false, bool add_zero_attn = false,
                     std::optional<int64_t> kdim = std::nullopt,
                     std::optional<int64_t> vdim = std::nullopt, bool batch_first = false,
                     Dtype dtype = Dtype::Undefined);
  // Returns (attn_output, attn_weights or undefined). batch_first: (N, L, E) inputs and output.
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = {}, bool need_weights = true,
                                     const Tensor& attn_mask = {}, bool average_attn_weights = true,
                                     bool is_causal = false);
  void reset_parameters();
  std::shared_ptr<NonDynamicallyQuantizableLinear> out_proj;
  int64_t embed_dim, kdim, vdim, num_heads, head_dim;
  double dropout;
  bool batch_first, add_zero_attn, qkv_same_embed_dim;
};

}  // namespace kiln::nn
