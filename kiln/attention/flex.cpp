// FlexAttention: the table ops `_flex_attention` and `_flex_attention_backward` (schemas, metas, the
// derivative), the block masks (create_mask, create_block_mask, the ordered lists) and the C++ front
// ends. The CPU kernels are in kiln/backend/cpu/flex_attention.cpp.
#include "kiln/attention/flex.h"

#include <algorithm>
#include <cmath>

#include "kiln/attention/flex_detail.h"
#include "kiln/autograd/autograd.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

using flex::kName;

SpecList fwd_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  auto g = flex::geometry(kName, in[0], in[1], in[2], attr<bool>(a, flex::kGqa));
  const Dtype d = in[0].dtype(), c = flex::compute_dtype(d);
  return {{{g.B, g.Hq, g.L, g.Ev}, d}, {{g.B, g.Hq, g.L}, c}, {{g.B, g.Hq, g.L}, c}};
}

OpDef op_flex{"_flex_attention", 0, fwd_meta, {}};
OpRegistrar reg_flex{op_flex,
                     "_flex_attention(Tensor query, Tensor key, Tensor value, Tensor? kv_num_blocks, "
                     "Tensor? kv_indices, Tensor? full_kv_num_blocks, Tensor? full_kv_indices, Tensor[] buffers, "
                     "float scale, bool enable_gqa, int q_block, int kv_block, int score_mod, int mask_mod, "
                     "int n_score_buffers) -> (Tensor, Tensor, Tensor)"};

SpecList bwd_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  auto g = flex::geometry(op.name, in[2], in[3], in[4], attr<bool>(a, flex::kGqa));
  const Dtype d = in[2].dtype();
  SpecList r{{in[2].sizes(), d}, {in[3].sizes(), d}, {in[4].sizes(), d}};
  const Shape& want = attr<Shape>(a, flex::kBufferGrads);
  const size_t b0 = 7 + flex::kBlockInputs;
  for (size_t i = b0; i < in.size(); ++i) {
    const size_t j = i - b0;
    if (j < want.size() && want[j])
      r.push_back({in[i].sizes(), in[i].dtype()});
    else
      r.push_back({{0}, kFloat32});
  }
  (void)g;
  return r;
}

OpDef op_flex_backward{"_flex_attention_backward", 0, bwd_meta, {}};
OpRegistrar reg_flex_backward{
    op_flex_backward,
    "_flex_attention_backward(Tensor grad_out, Tensor? grad_lse, Tensor query, Tensor key, Tensor value, "
    "Tensor out, Tensor lse, Tensor? kv_num_blocks, Tensor? kv_indices, Tensor? full_kv_num_blocks, "
    "Tensor? full_kv_indices, Tensor[] buffers, float scale, bool enable_gqa, int q_block, int kv_block, "
    "int score_mod, int mask_mod, int n_score_buffers, int[] buffer_grads) -> Tensor[]"};

// d(out, lse) -> d(q, k, v, score_mod's captured tensors); max_scores carries no gradient.
TensorList flex_derivative(const GradCtx& ctx, const TensorList& grad_out) {
  const int64_t nsb = attr<int64_t>(ctx.attrs, flex::kNScoreBuffers);
  const size_t b0 = 3 + flex::kBlockInputs;
  Shape want;
  for (size_t i = b0; i < ctx.in.size(); ++i) {
    const int64_t j = static_cast<int64_t>(i - b0);
    want.push_back(j < nsb && ctx.needs[i] && is_differentiable(ctx.in[i].dtype()) ? 1 : 0);
  }
  TensorList in{grad_out[0], grad_out.size() > 1 ? grad_out[1] : Tensor(), ctx.in[0], ctx.in[1], ctx.in[2],
                ctx.out[0], ctx.out[1]};
  for (size_t i = 3; i < ctx.in.size(); ++i) in.push_back(ctx.in[i]);
  Attrs a = ctx.attrs;
  a.resize(flex::kBufferGrads);
  a.push_back(want);
  TensorList r = dispatch(op_flex_backward, in, std::move(a));
  TensorList g{r[0], r[1], r[2]};
  for (int i = 0; i < flex::kBlockInputs; ++i) g.push_back(Tensor());
  for (size_t j = 0; j < want.size(); ++j) g.push_back(want[j] ? r[3 + j] : Tensor());
  return g;
}
DerivativeRegistrar d_flex{op_flex, flex_derivative, /*save_in=*/~0u, /*save_out=*/0b11};

// ---- block masks --------------------------------------------------------------------------------

Tensor int32_contiguous(const Tensor& t) { return t.to(kInt32).contiguous(); }

}  // namespace

std::pair<Tensor, Tensor> dense_to_ordered(const Tensor& dense) {
  KILN_CHECK(dense.defined() && dense.dim() >= 2, Runtime, "BlockMask", "BlockMask must have at least 2 dimensions");
  Tensor d = int32_contiguous(dense);
  const Shape& s = d.sizes();
  const int64_t C = s.back(), R = d.numel() / std::max<int64_t>(C, 1);
  Shape ns(s.begin(), s.end() - 1);
  Tensor num = make_tensor(ns, kInt32), idx = make_tensor(s, kInt32);
  const int32_t* dp = d.data_ptr<int32_t>();
  int32_t *np = num.data_ptr<int32_t>(), *ip = idx.data_ptr<int32_t>();
  for (int64_t r = 0; r < R; ++r) {
    const int32_t* row = dp + r * C;
    int32_t* out = ip + r * C;
    int64_t n = 0, sum = 0;
    for (int64_t c = 0; c < C; ++c) sum += row[c];
    for (int64_t c = 0; c < C; ++c)
      if (row[c] != 0) out[n++] = static_cast<int32_t>(c);
    for (int64_t c = 0; c < C; ++c)
      if (row[c] == 0) out[n++] = static_cast<int32_t>(c);
    np[r] = static_cast<int32_t>(sum);
  }
  return {num, idx};
}

Tensor ordered_to_dense(const Tensor& num_blocks, const Tensor& indices, int64_t C) {
  Tensor n = int32_contiguous(num_blocks), ix = int32_contiguous(indices);
  KILN_CHECK(ix.dim() >= 2 && n.dim() == ix.dim() - 1, Runtime, "BlockMask",
             "num_blocks ", n.sizes(), " and indices ", ix.sizes(), " do not match");
  const int64_t K = ix.size(-1), R = ix.numel() / std::max<int64_t>(K, 1);
  KILN_CHECK(n.numel() == R, Runtime, "BlockMask", "num_blocks ", n.sizes(), " and indices ", ix.sizes(),
             " do not match");
  Shape s(ix.sizes().begin(), ix.sizes().end() - 1);
  s.push_back(C);
  Tensor d = zeros(s, kInt32);
  const int32_t *np = n.data_ptr<int32_t>(), *ip = ix.data_ptr<int32_t>();
  int32_t* dp = d.data_ptr<int32_t>();
  for (int64_t r = 0; r < R; ++r) {
    const int64_t cnt = std::clamp<int64_t>(np[r], 0, K);
    for (int64_t j = 0; j < cnt; ++j) {
      const int32_t c = ip[r * K + j];
      KILN_CHECK(c >= 0 && c < C, Index, "BlockMask", "block index ", c, " out of range for ", C, " blocks");
      dp[r * C + c] = 1;
    }
  }
  return d;
}

std::pair<Tensor, Tensor> transpose_ordered(const Tensor& num_blocks, const Tensor& indices) {
  Tensor dense = ordered_to_dense(num_blocks, indices, indices.size(-1));
  return dense_to_ordered(dense.transpose(-2, -1));
}

BlockMask BlockMask::from_kv_blocks(const Tensor& kv_num_blocks, const Tensor& kv_indices,
                                    const Tensor& full_kv_num_blocks, const Tensor& full_kv_indices,
                                    int64_t q_block_size, int64_t kv_block_size, MaskMod mask_mod,
                                    std::optional<std::pair<int64_t, int64_t>> seq_lengths) {
  KILN_CHECK(kv_indices.defined() && kv_indices.dim() >= 2, Runtime, "BlockMask",
             "BlockMask must have at least 2 dimensions");
  KILN_CHECK(full_kv_num_blocks.defined() == full_kv_indices.defined(), Runtime, "BlockMask",
             "full_kv_num_blocks and full_kv_indices must be both provided or omitted");
  KILN_CHECK(q_block_size > 0 && kv_block_size > 0, Value, "BlockMask", "BLOCK_SIZE must be positive, got (",
             q_block_size, ", ", kv_block_size, ")");
  BlockMask m;
  m.kv_num_blocks = kv_num_blocks, m.kv_indices = kv_indices;
  m.full_kv_num_blocks = full_kv_num_blocks, m.full_kv_indices = full_kv_indices;
  std::tie(m.q_num_blocks, m.q_indices) = transpose_ordered(kv_num_blocks, kv_indices);
  if (full_kv_num_blocks.defined())
    std::tie(m.full_q_num_blocks, m.full_q_indices) = transpose_ordered(full_kv_num_blocks, full_kv_indices);
  m.q_block_size = q_block_size, m.kv_block_size = kv_block_size;
  m.mask_mod = std::move(mask_mod);
  if (seq_lengths) {
    m.q_len = seq_lengths->first, m.kv_len = seq_lengths->second;
  } else {
    m.q_len = kv_indices.size(-2) * q_block_size, m.kv_len = kv_indices.size(-1) * kv_block_size;
  }
  return m;
}

Tensor BlockMask::to_dense() const {
  Tensor d = ordered_to_dense(kv_num_blocks, kv_indices, kv_indices.size(-1));
  if (full_kv_num_blocks.defined())
    d = bitwise_or(d, ordered_to_dense(full_kv_num_blocks, full_kv_indices, full_kv_indices.size(-1)));
  return d;
}

double BlockMask::sparsity() const {
  double total = static_cast<double>(q_len) * static_cast<double>(kv_len);
  for (int64_t i = 0; i + 2 < kv_indices.dim(); ++i) total *= static_cast<double>(kv_indices.size(i));
  double blocks = sum(kv_num_blocks.to(kInt64)).item<double>();
  if (full_kv_num_blocks.defined()) blocks += sum(full_kv_num_blocks.to(kInt64)).item<double>();
  return 100.0 * (1.0 - blocks * static_cast<double>(q_block_size * kv_block_size) / total);
}

namespace {
// The four index tensors of a mask_mod call on the grid [0,B) x [0,H) x [q0, q1) x [0, KV).
TensorList grid(int64_t B, int64_t H, int64_t q0, int64_t q1, int64_t KV) {
  return {arange(0, B, 1, kInt64).view({B, 1, 1, 1}), arange(0, H, 1, kInt64).view({1, H, 1, 1}),
          arange(q0, q1, 1, kInt64).view({1, 1, q1 - q0, 1}), arange(0, KV, 1, kInt64).view({1, 1, 1, KV})};
}
Tensor eval_mask(const MaskMod& f, int64_t B, int64_t H, int64_t q0, int64_t q1, int64_t KV) {
  TensorList g = grid(B, H, q0, q1, KV);
  Tensor m = f(g[0], g[1], g[2], g[3]);
  KILN_CHECK(m.defined() && m.dtype() == kBool, Type, "create_block_mask", "mask_mod must return a bool tensor, got ",
             m.defined() ? dtype_name(m.dtype()) : std::string_view("None"));
  return m.expand({B, H, q1 - q0, KV});
}
}  // namespace

Tensor create_mask(const MaskMod& mask_mod, std::optional<int64_t> B, std::optional<int64_t> H, int64_t q_len,
                   int64_t kv_len) {
  const int64_t b = B.value_or(1), h = H.value_or(1);
  KILN_CHECK(b >= 0 && h >= 0 && q_len >= 0 && kv_len >= 0, Value, "create_mask", "sizes must be non-negative, got B=",
             b, " H=", h, " Q_LEN=", q_len, " KV_LEN=", kv_len);
  return eval_mask(mask_mod ? mask_mod : noop_mask(), b, h, 0, q_len, kv_len).contiguous();
}

BlockMask create_block_mask(const MaskMod& mask_mod, std::optional<int64_t> Bo, std::optional<int64_t> Ho,
                            int64_t q_len, int64_t kv_len, int64_t QB, int64_t KB) {
  const char* op = "create_block_mask";
  const int64_t B = Bo.value_or(1), H = Ho.value_or(1);
  KILN_CHECK(B >= 1 && H >= 1 && q_len >= 0 && kv_len >= 0, Value, op, "sizes must be positive, got B=", B, " H=",
             H, " Q_LEN=", q_len, " KV_LEN=", kv_len);
  KILN_CHECK(QB > 0 && KB > 0, Value, op, "BLOCK_SIZE must be positive, got (", QB, ", ", KB, ")");
  const MaskMod f = mask_mod ? mask_mod : noop_mask();
  const int64_t nqb = (q_len + QB - 1) / QB, nkb = (kv_len + KB - 1) / KB;
  Tensor partial = zeros({B, H, nqb, nkb}, kInt32), full = zeros({B, H, nqb, nkb}, kInt32);
  int32_t *pp = partial.data_ptr<int32_t>(), *fp = full.data_ptr<int32_t>();
  // a band of query blocks at a time: at most ~16M mask elements
  const int64_t per_block_row = std::max<int64_t>(1, B * H * QB * std::max<int64_t>(kv_len, 1));
  const int64_t band = std::max<int64_t>(1, (int64_t(1) << 24) / per_block_row);
  for (int64_t r0 = 0; r0 < nqb; r0 += band) {
    const int64_t r1 = std::min(nqb, r0 + band), q0 = r0 * QB, q1 = std::min(q_len, r1 * QB);
    Tensor m = eval_mask(f, B, H, q0, q1, kv_len).contiguous();
    const bool* mp = m.data_ptr<bool>();
    const int64_t rows = q1 - q0;
    std::vector<int64_t> cnt(nkb);
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t r = r0; r < r1; ++r) {
        std::fill(cnt.begin(), cnt.end(), 0);
        for (int64_t i = r * QB; i < std::min(q_len, (r + 1) * QB); ++i) {
          const uint8_t* row = reinterpret_cast<const uint8_t*>(mp + (bh * rows + (i - q0)) * kv_len);
          for (int64_t c = 0; c < nkb; ++c) {
            int64_t n = 0;
            for (int64_t j = c * KB; j < std::min(kv_len, (c + 1) * KB); ++j) n += row[j];
            cnt[c] += n;
          }
        }
        for (int64_t c = 0; c < nkb; ++c) {
          const int64_t at = (bh * nqb + r) * nkb + c;
          // padded rows and columns count as masked, so a ragged block is never full (as torch)
          if (cnt[c] == QB * KB)
            fp[at] = 1;
          else if (cnt[c] > 0)
            pp[at] = 1;
        }
      }
  }
  auto [kn, ki] = dense_to_ordered(partial);
  auto [fn, fi] = dense_to_ordered(full);
  return BlockMask::from_kv_blocks(kn, ki, fn, fi, QB, KB, mask_mod, std::make_pair(q_len, kv_len));
}

MaskMod and_masks(std::vector<MaskMod> mods) {
  return [mods = std::move(mods)](const Tensor& b, const Tensor& h, const Tensor& q, const Tensor& kv) {
    Tensor r = full({}, Scalar(true), kBool);
    for (const MaskMod& m : mods) r = bitwise_and(r, m(b, h, q, kv));
    return r;
  };
}
MaskMod or_masks(std::vector<MaskMod> mods) {
  return [mods = std::move(mods)](const Tensor& b, const Tensor& h, const Tensor& q, const Tensor& kv) {
    Tensor r = full({}, Scalar(false), kBool);
    for (const MaskMod& m : mods) r = bitwise_or(r, m(b, h, q, kv));
    return r;
  };
}
MaskMod noop_mask() {
  return [](const Tensor&, const Tensor&, const Tensor&, const Tensor&) { return full({}, Scalar(true), kBool); };
}

// ---- front ends ---------------------------------------------------------------------------------

FlexAttentionOutput flex_attention_traced(const Tensor& q, const Tensor& k, const Tensor& v,
                                          const flex::Traced& score_mod, const BlockMask* bm,
                                          const flex::Traced& mask_mod, std::optional<double> scale,
                                          bool enable_gqa) {
  KILN_CHECK(q.defined() && q.dim() == 4, NotImplemented, kName, "NYI: query, key, and value must be 4D tensors");
  int64_t QB = 128, KB = 128;
  TensorList in{q, k, v};
  if (bm) {
    KILN_CHECK(q.size(2) == bm->q_len && k.defined() && k.dim() == 4 && k.size(2) == bm->kv_len, Value, kName,
               "block_mask was created for seq_lengths (", bm->q_len, ", ", bm->kv_len, ") but got q_len=",
               q.size(2), " and kv_len=", k.defined() && k.dim() == 4 ? k.size(2) : -1,
               "; create a new block mask with the correct lengths");
    QB = bm->q_block_size, KB = bm->kv_block_size;
    in.push_back(bm->kv_num_blocks), in.push_back(bm->kv_indices);
    in.push_back(bm->full_kv_num_blocks), in.push_back(bm->full_kv_indices);
  } else {
    for (int i = 0; i < flex::kBlockInputs; ++i) in.push_back(Tensor());
  }
  for (const Tensor& t : score_mod.buffers) in.push_back(t);
  for (const Tensor& t : mask_mod.buffers) in.push_back(t);
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  Attrs a{s, enable_gqa, QB, KB, score_mod.id, bm ? mask_mod.id : int64_t(-1),
          static_cast<int64_t>(score_mod.buffers.size())};
  TensorList r = dispatch(op_flex, in, std::move(a));
  return {r[0], r[1], r[2]};
}

FlexAttentionOutput flex_attention(const Tensor& q, const Tensor& k, const Tensor& v, const ScoreMod& score_mod,
                                   const BlockMask* bm, std::optional<double> scale, bool enable_gqa) {
  const Dtype cd = flex::compute_dtype(q.defined() ? q.dtype() : kFloat32);
  flex::Traced s = score_mod ? flex::trace_score_mod(score_mod, cd) : flex::Traced{};
  flex::Traced m = bm && bm->mask_mod ? flex::trace_mask_mod(bm->mask_mod) : flex::Traced{};
  return flex_attention_traced(q, k, v, s, bm, m, scale, enable_gqa);
}

}  // namespace kiln
