// MultiheadAttention and F.multi_head_attention_forward.
#include "kiln/nn/attention.h"

#include <cmath>

#include "kiln/attention/sdpa.h"
#include "kiln/nn/init.h"
#include "kiln/nn/layer_util.h"
#include "kiln/ops/shape.h"

namespace kiln::nn {
namespace {

using layer_util::opts;

std::string size_str(const SymShape& s) {
  std::string r = "torch.Size([";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + s[i].str();
  return r + "])";
}

bool same(const Tensor& a, const Tensor& b) { return a.impl() == b.impl(); }

// torch's _mha_shape_check; returns whether the inputs are batched.
bool mha_shape_check(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kpm,
                     const Tensor& am, int64_t num_heads) {
  const char* op = "multi_head_attention_forward";
  if (q.dim() == 3) {
    KILN_NN_ASSERT(k.dim() == 3 && v.dim() == 3, op,
                   "For batched (3-D) `query`, expected `key` and `value` to be "
                   "3-D but found ",
                   k.dim(), "-D and ", v.dim(), "-D tensors respectively");
    KILN_NN_ASSERT(!kpm.defined() || kpm.dim() == 2, op,
                   "For batched (3-D) `query`, expected `key_padding_mask` to "
                   "be `None` or 2-D but found ",
                   kpm.dim(), "-D tensor instead");
    KILN_NN_ASSERT(!am.defined() || am.dim() == 2 || am.dim() == 3, op,
                   "For batched (3-D) `query`, expected "
                   "`attn_mask` to be `None`, 2-D or 3-D but found ",
                   am.dim(), "-D tensor instead");
    return true;
  }
  KILN_NN_ASSERT(q.dim() == 2, op,
                 "query should be unbatched 2D or batched 3D tensor but received ", q.dim(),
                 "-D query tensor");
  KILN_NN_ASSERT(k.dim() == 2 && v.dim() == 2, op,
                 "For unbatched (2-D) `query`, expected `key` and `value` to be "
                 "2-D but found ",
                 k.dim(), "-D and ", v.dim(), "-D tensors respectively");
  KILN_NN_ASSERT(!kpm.defined() || kpm.dim() == 1, op,
                 "For unbatched (2-D) `query`, expected `key_padding_mask` "
                 "to be `None` or 1-D but found ",
                 kpm.dim(), "-D tensor instead");
  if (am.defined()) {
    KILN_NN_ASSERT(am.dim() == 2 || am.dim() == 3, op,
                   "For unbatched (2-D) `query`, expected `attn_mask` to be "
                   "`None`, 2-D or 3-D but found ",
                   am.dim(), "-D tensor instead");
    SymShape want{num_heads, q.sym_size(0), k.sym_size(0)};
    KILN_NN_ASSERT(am.dim() == 2 || has_sizes(am, want), op, "Expected `attn_mask` shape to be ",
                   sym_str(want), " but got ", size_str(am.sym_sizes()));
  }
  return false;
}

}  // namespace

namespace functional {

Tensor canonical_mask(const Tensor& mask, const char* name, Dtype dtype) {
  if (!mask.defined()) return mask;
  bool fl = is_floating(mask.dtype());
  KILN_NN_ASSERT(mask.dtype() == kBool || fl, "multi_head_attention_forward",
                 "only bool and floating types of ", name, " are supported");
  if (fl) return mask;
  return masked_fill(zeros(mask.sizes(), like(mask, dtype)), mask, -INFINITY);
}

std::tuple<Tensor, Tensor> multi_head_attention_forward(
    const Tensor& query, const Tensor& key, const Tensor& value, int64_t embed_dim_to_check,
    int64_t num_heads, const Tensor& in_proj_weight, const Tensor& in_proj_bias,
    const Tensor& bias_k, const Tensor& bias_v, bool add_zero_attn, double dropout_p,
    const Tensor& out_proj_weight, const Tensor& out_proj_bias, bool training,
    const Tensor& key_padding_mask, bool need_weights, const Tensor& attn_mask,
    bool use_separate_proj_weight, const Tensor& q_proj_weight, const Tensor& k_proj_weight,
    const Tensor& v_proj_weight, bool average_attn_weights, bool is_causal) {
  const char* op = "multi_head_attention_forward";
  const bool batched = mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads);
  Tensor q = query, k = key, v = value, kpm = key_padding_mask, am = attn_mask;
  if (!batched) {
    q = unsqueeze(q, 1);
    k = unsqueeze(k, 1);
    v = unsqueeze(v, 1);
    if (kpm.defined()) kpm = unsqueeze(kpm, 0);
  }
  // sizes stay symbolic in an export trace (SymInt), so batch and sequence lengths are not pinned
  const SymInt tgt_len = q.sym_size(0), bsz = q.sym_size(1);
  const int64_t embed_dim = q.size(2);
  SymInt src_len = k.sym_size(0);
  kpm = canonical_mask(kpm, "key_padding_mask", q.dtype());
  KILN_CHECK(
      !is_causal || am.defined(), Runtime, op,
      "Need attn_mask if specifying the is_causal hint. You may "
      "use the Transformer module method `generate_square_subsequent_mask` to create this mask.");
  if (is_causal && !kpm.defined() && !need_weights) {
    am = Tensor();  // the fused kernel applies the causal mask itself
  } else {
    am = canonical_mask(am, "attn_mask", q.dtype());
    if (kpm.defined()) is_causal = false;
  }
  KILN_NN_ASSERT(embed_dim == embed_dim_to_check, op, "was expecting embedding dimension of ",
                 embed_dim_to_check, ", but got ", embed_dim);
  const int64_t head_dim = embed_dim / num_heads;
  KILN_NN_ASSERT(head_dim * num_heads == embed_dim, op, "embed_dim ", embed_dim,
                 " not divisible by num_heads ", num_heads);
  if (use_separate_proj_weight) {
    KILN_NN_ASSERT(bool(k.sym_size(0) == v.sym_size(0)) && bool(k.sym_size(1) == v.sym_size(1)), op,
                   "key's sequence and batch dims ", size_str({k.sym_size(0), k.sym_size(1)}),
                   " do not match value's ", size_str({v.sym_size(0), v.sym_size(1)}));
  } else {
    KILN_NN_ASSERT(has_sizes(k, v.sym_sizes()), op, "key shape ", size_str(k.sym_sizes()),
                   " does not match value shape ", size_str(v.sym_sizes()));
  }
  // input projections
  const int64_t E = embed_dim;
  auto bias_part = [&](int64_t i) {
    return in_proj_bias.defined() ? narrow(in_proj_bias, 0, i * E, E) : Tensor();
  };
  if (!use_separate_proj_weight) {
    KILN_NN_ASSERT(in_proj_weight.defined(), op,
                   "use_separate_proj_weight is False but in_proj_weight is None");
    if (same(key, value) && same(query, key)) {  // self-attention: one GEMM
      TensorList qkv = chunk(linear(q, in_proj_weight, in_proj_bias), 3, -1);
      q = qkv[0], k = qkv[1], v = qkv[2];
    } else if (same(key, value)) {  // encoder-decoder: q, then k and v together
      Tensor bkv = in_proj_bias.defined() ? narrow(in_proj_bias, 0, E, 2 * E) : Tensor();
      TensorList kv = chunk(linear(k, narrow(in_proj_weight, 0, E, 2 * E), bkv), 2, -1);
      q = linear(q, narrow(in_proj_weight, 0, 0, E), bias_part(0));
      k = kv[0], v = kv[1];
    } else {
      q = linear(q, narrow(in_proj_weight, 0, 0, E), bias_part(0));
      k = linear(k, narrow(in_proj_weight, 0, E, E), bias_part(1));
      v = linear(v, narrow(in_proj_weight, 0, 2 * E, E), bias_part(2));
    }
  } else {
    KILN_NN_ASSERT(q_proj_weight.defined(), op,
                   "use_separate_proj_weight is True but q_proj_weight is None");
    KILN_NN_ASSERT(k_proj_weight.defined(), op,
                   "use_separate_proj_weight is True but k_proj_weight is None");
    KILN_NN_ASSERT(v_proj_weight.defined(), op,
                   "use_separate_proj_weight is True but v_proj_weight is None");
    // torch's _in_projection: each weight maps its input's features to embed_dim
    for (auto [w, x, name] : {std::tuple{&q_proj_weight, &q, "query"}, std::tuple{&k_proj_weight, &k, "key"},
                              std::tuple{&v_proj_weight, &v, "value"}}) {
      const SymShape want{E, x->sym_size(-1)};
      KILN_NN_ASSERT(has_sizes(*w, want), op, "expecting ", name, " weights shape of ", sym_str(want), ", but got ",
                     size_str(w->sym_sizes()));
    }
    q = linear(q, q_proj_weight, bias_part(0));
    k = linear(k, k_proj_weight, bias_part(1));
    v = linear(v, v_proj_weight, bias_part(2));
  }
  // attention mask to 3-D
  if (am.defined()) {
    if (am.dim() == 2) {
      KILN_CHECK(has_sizes(am, {tgt_len, src_len}), Runtime, op, "The shape of the 2D attn_mask is ",
                 size_str(am.sym_sizes()), ", but should be ", sym_str({tgt_len, src_len}), ".");
      am = unsqueeze(am, 0);
    } else if (am.dim() == 3) {
      SymShape want{bsz * num_heads, tgt_len, src_len};
      KILN_CHECK(has_sizes(am, want), Runtime, op, "The shape of the 3D attn_mask is ",
                 size_str(am.sym_sizes()), ", but should be ", sym_str(want), ".");
    } else {
      KILN_FAIL(Runtime, op, "attn_mask's dimension ", am.dim(), " is not supported");
    }
  }
  // learned key / value biases: one more key position
  KILN_NN_ASSERT(
      bias_k.defined() == bias_v.defined(), op,
      bias_k.defined() ? "bias_k is set but bias_v is None" : "bias_v is set but bias_k is None");
  if (bias_k.defined()) {
    k = cat({k, repeat(bias_k, raw_shape({1, bsz, 1}))}, 0);
    v = cat({v, repeat(bias_v, raw_shape({1, bsz, 1}))}, 0);
    if (am.defined()) am = pad(am, {0, 1});
    if (kpm.defined()) kpm = pad(kpm, {0, 1});
  }
  const SymInt bh = bsz * num_heads;
  q = transpose(reshape(q, raw_shape({tgt_len, bh, head_dim})), 0, 1);
  k = transpose(reshape(k, raw_shape({k.sym_size(0), bh, head_dim})), 0, 1);
  v = transpose(reshape(v, raw_shape({v.sym_size(0), bh, head_dim})), 0, 1);
  if (add_zero_attn) {
    k = cat({k, zeros(raw_shape({bh, 1, head_dim}), like(k))}, 1);
    v = cat({v, zeros(raw_shape({bh, 1, head_dim}), like(v))}, 1);
    if (am.defined()) am = pad(am, {0, 1});
    if (kpm.defined()) kpm = pad(kpm, {0, 1});
  }
  src_len = k.sym_size(1);
  if (kpm.defined()) {
    KILN_NN_ASSERT(bool(kpm.sym_size(0) == bsz), op, "Expected key_padded_mask.shape[0] to be ", bsz,
                   ", but got ", kpm.sym_size(0));
    KILN_NN_ASSERT(bool(kpm.sym_size(1) == src_len), op, "Expected key_padded_mask.shape[1] to be ", src_len,
                   ", but got ", kpm.sym_size(1));
    kpm = reshape(expand(reshape(kpm, raw_shape({bsz, 1, 1, src_len})), raw_shape({bsz, num_heads, 1, src_len})),
                  raw_shape({bh, 1, src_len}));
    am = am.defined() ? add(am, kpm) : kpm;
  }
  if (!training) dropout_p = 0.0;
  Tensor out, weights;
  if (need_weights) {
    KILN_NN_ASSERT(!(is_causal && !am.defined()), op,
                   "FIXME: is_causal not implemented for need_weights");
    Tensor qs = mul(q, Scalar(std::sqrt(1.0 / static_cast<double>(head_dim))));
    Tensor kt = transpose(k, -2, -1);
    weights = am.defined() ? baddbmm(am, qs, kt) : bmm(qs, kt);
    weights = softmax(weights, -1);
    if (dropout_p > 0.0) weights = dropout(weights, dropout_p, true);
    out = bmm(weights, v);
    out = reshape(transpose(out, 0, 1), raw_shape({tgt_len * bsz, embed_dim}));
    out = linear(out, out_proj_weight, out_proj_bias);
    out = reshape(out, raw_shape({tgt_len, bsz, out.sym_size(1)}));
    weights = reshape(weights, raw_shape({bsz, num_heads, tgt_len, src_len}));
    if (average_attn_weights) weights = mean(weights, Shape{1});
    if (!batched) {
      out = squeeze(out, Shape{1});
      weights = squeeze(weights, Shape{0});
    }
    return {out, weights};
  }
  if (am.defined())
    am = am.dim() == 3 && bool(am.sym_size(0) == 1) ? unsqueeze(am, 0)
                                                    : reshape(am, raw_shape({bsz, num_heads, -1, src_len}));
  q = reshape(q, raw_shape({bsz, num_heads, tgt_len, head_dim}));
  k = reshape(k, raw_shape({bsz, num_heads, src_len, head_dim}));
  v = reshape(v, raw_shape({bsz, num_heads, src_len, head_dim}));
  out = scaled_dot_product_attention(q, k, v, am, dropout_p, is_causal);
  out = reshape(permute(out, {2, 0, 1, 3}), raw_shape({bsz * tgt_len, embed_dim}));
  out = linear(out, out_proj_weight, out_proj_bias);
  out = reshape(out, raw_shape({tgt_len, bsz, out.sym_size(1)}));
  if (!batched) out = squeeze(out, Shape{1});
  return {out, Tensor()};
}

}  // namespace functional

// ---- MultiheadAttention -------------------------------------------------------------------------
MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, double dropout, bool bias,
                                       bool add_bias_kv, bool add_zero_attn,
                                       std::optional<int64_t> kd, std::optional<int64_t> vd,
                                       bool batch_first, Dtype dtype)
    : Module("MultiheadAttention"),
      embed_dim(e),
      kdim(kd.value_or(e)),
      vdim(vd.value_or(e)),
      num_heads(h),
      head_dim(h > 0 ? e / h : 0),
      dropout(dropout),
      batch_first(batch_first),
      add_zero_attn(add_zero_attn) {
  KILN_CHECK(e > 0 && h > 0, Value, "MultiheadAttention",
             "embed_dim and num_heads must be greater than 0, got "
             "embed_dim=",
             e, " and num_heads=", h, " instead");
  KILN_NN_ASSERT(head_dim * h == e, "MultiheadAttention",
                 "embed_dim must be divisible by num_heads");
  qkv_same_embed_dim = kdim == e && vdim == e;
  if (!qkv_same_embed_dim) {
    register_parameter("q_proj_weight", empty({e, e}, opts(dtype)));
    register_parameter("k_proj_weight", empty({e, kdim}, opts(dtype)));
    register_parameter("v_proj_weight", empty({e, vdim}, opts(dtype)));
    register_parameter("in_proj_weight", Tensor());
  } else {
    register_parameter("in_proj_weight", empty({3 * e, e}, opts(dtype)));
    register_parameter("q_proj_weight", Tensor());
    register_parameter("k_proj_weight", Tensor());
    register_parameter("v_proj_weight", Tensor());
  }
  register_parameter("in_proj_bias", bias ? empty({3 * e}, opts(dtype)) : Tensor());
  out_proj = register_module("out_proj",
                             std::make_shared<NonDynamicallyQuantizableLinear>(e, e, bias, dtype));
  register_parameter("bias_k", add_bias_kv ? empty({1, 1, e}, opts(dtype)) : Tensor());
  register_parameter("bias_v", add_bias_kv ? empty({1, 1, e}, opts(dtype)) : Tensor());
  reset_parameters();
}

void MultiheadAttention::reset_parameters() {
  if (qkv_same_embed_dim) {
    init::xavier_uniform_(param("in_proj_weight"));
  } else {
    init::xavier_uniform_(param("q_proj_weight"));
    init::xavier_uniform_(param("k_proj_weight"));
    init::xavier_uniform_(param("v_proj_weight"));
  }
  if (param("in_proj_bias").defined()) {
    init::zeros_(param("in_proj_bias"));
    if (out_proj->bias().defined()) init::zeros_(out_proj->bias());
  }
  if (param("bias_k").defined()) init::xavier_normal_(param("bias_k"));
  if (param("bias_v").defined()) init::xavier_normal_(param("bias_v"));
}

std::tuple<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key,
                                                       const Tensor& value, const Tensor& kpm,
                                                       bool need_weights, const Tensor& am,
                                                       bool average_attn_weights, bool is_causal) {
  Tensor q = query, k = key, v = value;
  const bool batched = query.dim() == 3;
  if (batch_first && batched) {  // keep the identities (self-attention) through the transposes
    q = transpose(query, 1, 0);
    k = same(key, query) ? q : transpose(key, 1, 0);
    v = same(value, key) ? k : same(value, query) ? q : transpose(value, 1, 0);
  }
  auto [out, w] = F::multi_head_attention_forward(
      q, k, v, embed_dim, num_heads, param("in_proj_weight"), param("in_proj_bias"),
      param("bias_k"), param("bias_v"), add_zero_attn, dropout, out_proj->weight(),
      out_proj->bias(), is_training(), kpm, need_weights, am, !qkv_same_embed_dim,
      param("q_proj_weight"), param("k_proj_weight"), param("v_proj_weight"), average_attn_weights,
      is_causal);
  if (batch_first && batched) out = transpose(out, 1, 0);
  return {out, w};
}

}  // namespace kiln::nn
