// Scaled dot-product attention: the table ops `_sdpa_flash` (forward) and `_sdpa_flash_backward`
// (entries with empty kernel slots, schemas, metas), the forward's derivative beside it, argument
// validation as torch's, and the front ends. Their CPU kernels (the tiled loops, registered by op
// name) are in kiln/backend/cpu/attention.cpp; what both read is in sdpa_detail.h.
#include "kiln/attention/sdpa.h"

#include <cmath>

#include "kiln/amp/autocast.h"
#include "kiln/attention/sdpa_detail.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace sdpa {

namespace {
int64_t numel_of(const Shape& s) { return shape_numel(s); }
int64_t hint_of(int64_t v) { return v; }
int64_t hint_of(SymInt v) { return v.guard_int(std::string("scaled_dot_product_attention")); }  // the default scale
SymInt numel_of(const SymShape& s) { return sym_numel(s); }
}  // namespace

template <class T, class I = std::decay_t<decltype(std::declval<T>().sizes()[0])>>
GeomT<I> geom_of(const char* op, const T& q, const T& k, const T& v, const T& mask, const Attrs& a) {
  using Sizes = SmallVec<I, 6>;
  KILN_CHECK(q.defined() && k.defined() && v.defined(), Runtime, op,
             "query, key and value must be tensors");
  GeomT<I> g;
  g.dropout_p = attr<double>(a, 0);
  g.causal = attr<bool>(a, 1);
  g.gqa = attr<bool>(a, 3);
  const Dtype d = q.dtype();
  KILN_CHECK(k.dtype() == d && v.dtype() == d, Runtime, op,
             "Expected query, key, and value to have the same dtype, but got query.dtype: ",
             dtype_name(d), " key.dtype: ", dtype_name(k.dtype()),
             " and value.dtype: ", dtype_name(v.dtype()), " instead.");
  KILN_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, Runtime, op,
             "Expected query, key, and value to all be at least 2 dimensional, but got query.dim: ",
             q.dim(), " key.dim: ", k.dim(), " and value.dim: ", v.dim(), " instead.");
  KILN_CHECK(!is_complex(d), NotImplemented, op, "not implemented for '", dtype_name(d), "'");
  KILN_CHECK(d == kFloat32 || d == kFloat64 || d == kFloat16 || d == kBFloat16, Runtime, op,
             "expected query, key and value of a floating point dtype, but got ", dtype_name(d));
  if (mask.defined()) {
    const Dtype md = mask.dtype();
    KILN_CHECK(md == kBool || md == kFloat32 || md == d, Runtime, op,
               "Expected attn_mask dtype to be bool or float or to match query dtype, but got "
               "attn_mask.dtype: ",
               dtype_name(md), " and query.dtype: ", dtype_name(d), " instead.");
    KILN_CHECK(!g.causal, Runtime, op, "Explicit attn_mask should not be set when is_causal=True");
  }
  KILN_CHECK(!(g.dropout_p > 1.0), Runtime, op,
             "dropout probability has to be between 0 and 1, but got ", g.dropout_p);
  g.L = q.size(-2), g.E = q.size(-1), g.S = k.size(-2), g.Ev = v.size(-1);
  KILN_CHECK(k.size(-1) == g.E, Runtime, op,
             "query and key must have the same embedding size E, but got query ", q.sizes(),
             " and key ", k.sizes());
  KILN_CHECK(v.size(-2) == g.S, Runtime, op,
             "key and value must have the same sequence length S, but got key ", k.sizes(),
             " and value ", v.sizes());
  Sizes qb(q.sizes().begin(), q.sizes().end() - 2), kb(k.sizes().begin(), k.sizes().end() - 2),
      vb(v.sizes().begin(), v.sizes().end() - 2);
  if (g.gqa) {
    KILN_CHECK(
        q.dim() >= 3 && k.dim() >= 3 && v.dim() >= 3, Index, op,
        "Dimension out of range (expected to be in range of [-2, 1], but got -3): enable_gqa "
        "needs a head dim (-3) in query, key and value");
    const I hq = q.size(-3), hk = k.size(-3), hv = v.size(-3);
    KILN_CHECK(
        bool(hk > 0) && bool(hv > 0) && bool(hq % hk == 0) && bool(hq % hv == 0), Runtime, op,
        "Number of heads in key and value must divide the number of heads in query, but got ", hq,
        " query heads, ", hk, " key heads and ", hv, " value heads");
    g.gk = hq / hk, g.gv = hq / hv;
    kb.back() = hq, vb.back() = hq;  // repeat_interleave of the k / v heads
  }
  g.batch = broadcast_shapes(broadcast_shapes(qb, kb, op), vb, op);
  g.BH = numel_of(g.batch);
  if (mask.defined()) {
    Sizes full = g.batch;
    full.push_back(g.L), full.push_back(g.S);
    KILN_CHECK(mask.dim() <= static_cast<int64_t>(full.size()) &&
                   broadcast_shapes(mask.sizes(), full, op) == full,
               Runtime, op, "attn_mask of shape ", mask.sizes(),
               " is not broadcastable to the attention weights' shape ", full);
  }
  const std::optional<double> scale = std::holds_alternative<double>(a[2])
                                          ? std::optional<double>(attr<double>(a, 2))
                                          : std::nullopt;
  // E == 0: every score is an empty dot product, 0 (torch's math path), whatever the scale
  g.scale = bool(g.E == 0) ? 1.0 : scale ? *scale : 1.0 / std::sqrt(static_cast<double>(hint_of(g.E)));
  return g;
}
Geom make_geom(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
               const Attrs& a) {
  return geom_of(op, q, k, v, mask, a);
}
GeomT<SymInt> make_geom(const char* op, const TensorSpec& q, const TensorSpec& k, const TensorSpec& v,
                        const TensorSpec& mask, const Attrs& a) {
  return geom_of(op, q, k, v, mask, a);
}

}  // namespace sdpa

namespace {

using sdpa::compute_dtype;

// ---- forward: in {q, k, v, mask?} -> {out, logsumexp, rng_state} ---------------------------

SymShape with(SymShape s, std::initializer_list<SymInt> tail) {
  s.insert(s.end(), tail);
  return s;
}

SpecList fwd_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  sdpa::GeomT<SymInt> g = sdpa::make_geom(sdpa::kFwdName, in[0], in[1], in[2], in[3], a);
  const Dtype d = in[0].dtype();
  return {{with(g.batch, {g.L, g.Ev}), d}, {with(g.batch, {g.L}), compute_dtype(d)}, {{2}, kInt64}};
}

OpDef op_sdpa{"_sdpa_flash", kRandom, fwd_meta, {}};
OpRegistrar reg_sdpa{op_sdpa, "_sdpa_flash(Tensor query, Tensor key, Tensor value, Tensor? attn_mask, float dropout_p, bool is_causal, float? scale, bool enable_gqa) -> (Tensor, Tensor, Tensor)"};

// ---- backward ----------------------------------------------------------------------------------
// in {grad_out, q, k, v, out, logsumexp, rng_state, mask?, grad_logsumexp?}; attrs: the forward's
// + {mask_grad}; out {dq, dk, dv, dmask (shape (0,) unless mask_grad)}.

void check_like(const char* op, const char* what, const TensorSpec& t, const SymShape& shape) {
  KILN_CHECK(t.defined() && t.dim() <= static_cast<int64_t>(shape.size()) &&
                 broadcast_shapes(t.sizes(), shape, op) == shape,
             Runtime, op, what, " must have shape ", shape, ", got ",
             t.defined() ? t.sizes() : SymShape{});
}

SpecList bwd_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  sdpa::GeomT<SymInt> g = sdpa::make_geom(op.name, in[1], in[2], in[3], in[7], a);
  check_like(op.name, "grad_out", in[0], with(g.batch, {g.L, g.Ev}));
  check_like(op.name, "out", in[4], with(g.batch, {g.L, g.Ev}));
  check_like(op.name, "logsumexp", in[5], with(g.batch, {g.L}));
  if (in[8].defined()) check_like(op.name, "grad_logsumexp", in[8], with(g.batch, {g.L}));
  KILN_CHECK(in[6].defined() && in[6].dtype() == kInt64 && in[6].numel() == 2, Runtime, op.name,
             "rng_state must be the int64 (seed, offset) pair the forward returned");
  const Dtype d = in[1].dtype();
  TensorSpec dm =
      sdpa::wants_mask_grad(in, a) ? TensorSpec{in[7].sizes(), in[7].dtype()} : TensorSpec{{0}, d};
  return {{in[1].sizes(), d}, {in[2].sizes(), d}, {in[3].sizes(), d}, dm};
}

OpDef op_sdpa_backward{"_sdpa_flash_backward", 0, bwd_meta, {}};
OpRegistrar reg_sdpa_backward{op_sdpa_backward, "_sdpa_flash_backward(Tensor grad_out, Tensor query, Tensor key, Tensor value, Tensor out, Tensor logsumexp, Tensor rng_state, Tensor? attn_mask, Tensor? grad_logsumexp, float dropout_p, bool is_causal, float? scale, bool enable_gqa, bool grad_mask=False) -> (Tensor, Tensor, Tensor, Tensor)"};

// d(out, logsumexp) -> d(q, k, v, mask): the fused backward (mask gradient for float masks only).
TensorList sdpa_derivative(const GradCtx& ctx, const TensorList& grad_out) {
  const Tensor& mask = ctx.in[3];
  const bool mask_grad =
      mask.defined() && mask.dtype() != kBool && ctx.needs.size() > 3 && ctx.needs[3];
  Attrs a = ctx.attrs;
  a.resize(4);
  a.push_back(mask_grad);
  Tensor dlse = grad_out.size() > 1 ? grad_out[1] : Tensor();
  TensorList r = dispatch(op_sdpa_backward,
                          {grad_out[0], ctx.in[0], ctx.in[1], ctx.in[2], ctx.out[0], ctx.out[1],
                           ctx.out[2], mask, dlse},
                          std::move(a));
  return {r[0], r[1], r[2], mask_grad ? r[3] : Tensor()};
}
DerivativeRegistrar d_sdpa{op_sdpa, sdpa_derivative, /*save_in=*/0b1111, /*save_out=*/0b111};

Attrs make_attrs(double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa) {
  return {dropout_p, is_causal, scale ? Attr(*scale) : Attr(std::monostate{}), enable_gqa};
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> sdpa_flash(const Tensor& q, const Tensor& k, const Tensor& v,
                                              const Tensor& attn_mask, double dropout_p,
                                              bool is_causal, std::optional<double> scale,
                                              bool enable_gqa) {
  TensorList r =
      dispatch(op_sdpa, {q, k, v, attn_mask}, make_attrs(dropout_p, is_causal, scale, enable_gqa));
  return {r[0], r[1], r[2]};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> sdpa_flash_backward(
    const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
    const Tensor& logsumexp, const Tensor& rng_state, const Tensor& attn_mask, double dropout_p,
    bool is_causal, std::optional<double> scale, bool enable_gqa, bool mask_grad,
    const Tensor& grad_logsumexp) {
  Attrs a = make_attrs(dropout_p, is_causal, scale, enable_gqa);
  a.push_back(mask_grad);
  TensorList r = dispatch(op_sdpa_backward,
                          {grad_out, q, k, v, out, logsumexp, rng_state, attn_mask, grad_logsumexp},
                          std::move(a));
  const bool mg = mask_grad && attn_mask.defined() && attn_mask.dtype() != kBool;
  return {r[0], r[1], r[2], mg ? r[3] : Tensor()};
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, bool enable_gqa) {
  KILN_AUTOCAST(kLowerPrecision, scaled_dot_product_attention, q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  return std::get<0>(sdpa_flash(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa));
}


// ---- its composite with torch's schema (ops/composite.h): kiln.nn.functional's function ------------
namespace {
Composite c_sdpa{"scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, "
                 "float dropout_p=0.0, bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor",
                 [](const TensorList& in, const Attrs& a) -> TensorList {
                   return {scaled_dot_product_attention(in[0], in[1], in[2], in[3], attr<double>(a, 0),
                                                        attr<bool>(a, 1), opt_attr<double>(a, 2), attr<bool>(a, 3))};
                 },
                 kFunctionVariant};
}  // namespace

}  // namespace kiln
