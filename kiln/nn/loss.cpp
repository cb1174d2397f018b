// Losses composed of kiln ops (autograd comes from the ops), binary_cross_entropy's pointwise table
// op (entry, schema, meta, derivative, front end; its CPU kernel is in kiln/backend/cpu/loss.cpp),
// and the reduction helpers shared by the loss files (kiln/nn/loss_detail.h). cross_entropy /
// nll_loss live in loss_nll.cpp, ctc_loss in loss_ctc.cpp.
#include "kiln/nn/loss.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/amp/autocast.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/format.h"
#include "kiln/nn/loss_detail.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/shape.h"

namespace kiln {

namespace loss_detail {

int64_t reduction_enum(const std::string& r) {
  if (r == "none") return kNone;
  if (r == "mean" || r == "elementwise_mean") return kMean;
  if (r == "sum") return kSum;
  KILN_FAIL(Value, "loss", r, " is not a valid value for reduction");
}

Tensor apply_reduction(const Tensor& loss, int64_t reduction) {
  if (reduction == kMean) return mean(loss);
  if (reduction == kSum) return sum(loss);
  return loss;
}

std::string shape_str(const Shape& s) { return shape_list(s); }
std::string shape_str(const SymShape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].str();
  return out + "]";
}

}  // namespace loss_detail

namespace {

using namespace loss_detail;

const char* tname(Dtype d) { return shape_detail::torch_type_name(d); }

// NotImplementedError for integer / bool compute dtypes, as torch's kernels raise it.
void check_floating(const char* op, const char* kernel, Dtype d) {
  if (!is_floating(d) && !is_complex(d)) shape_detail::not_implemented(op, kernel, d);
}

// The weight argument of mse / l1 / huber: input's size (ValueError otherwise).
void check_elem_weight(const char* op, const Tensor& x, const Tensor& w) {
  KILN_CHECK(w.sizes() == x.sizes(), Value, op, "Weights and input must have the same size.");
}

// ---- binary_cross_entropy: pointwise table op --------------------------------------------------
// inputs {x, t} of one shape and dtype (float32 / float64); output the unweighted, unreduced loss
// (t - 1) max(log(1 - x), -100) - t max(log x, -100). Values outside [0, 1] raise RuntimeError (in
// the kernel, kiln/backend/cpu/loss.cpp).
SpecList bce_meta(const OpDef&, const SpecList& in, const Attrs&) {
  return {{in[0].sizes(), in[0].dtype()}};
}

OpDef op_bce{"binary_cross_entropy", kPointwise, bce_meta, {}};
OpRegistrar reg_bce{op_bce, "binary_cross_entropy(Tensor self, Tensor target) -> Tensor"};

// torch's gradients (not those of the clamped logs): g (x - t) / max(x (1 - x), 1e-12) and
// -g logit(x); composed of kiln ops, so they differentiate again.
TensorList bce_grad(const GradCtx& c, const TensorList& go) {
  const Tensor &g = go[0], &x = c.in[0], &t = c.in[1];
  TensorList r(2);
  if (c.needs[0]) {
    Tensor den = clamp(mul(rsub(x, Scalar(1)), x), Scalar(1e-12), std::nullopt);
    r[0] = div(mul(g, sub(x, t)), den);
  }
  if (c.needs[1]) r[1] = mul(g, sub(log1p(neg(x)), log(x)));
  return r;
}
DerivativeRegistrar d_bce{op_bce, bce_grad, 0b11, 0};

}  // namespace

namespace nn::functional {

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
                const Tensor& weight) {
  KILN_AUTOCAST(kFp32, mse_loss, input, target, reduction, weight);
  const char* op = "mse_loss";
  const int64_t red = reduction_enum(reduction);
  TensorList xt = broadcast_tensors({input, target});
  Tensor d = sub(xt[0], xt[1]);
  check_floating(op, "mse_cpu", d.dtype());
  Tensor sq = mul(d, d);
  if (!weight.defined()) return apply_reduction(sq, red);
  check_elem_weight(op, input, weight);
  Tensor wl = mul(sq, weight);
  return red == kMean ? div(sum(wl), sum(weight)) : apply_reduction(wl, red);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
               const Tensor& weight) {
  KILN_AUTOCAST(kFp32, l1_loss, input, target, reduction, weight);
  const int64_t red = reduction_enum(reduction);
  TensorList xt = broadcast_tensors({input, target});
  Tensor l = abs(sub(xt[0], xt[1]));
  if (!weight.defined()) return apply_reduction(l, red);
  check_elem_weight("l1_loss", input, weight);
  Tensor wl = mul(l, weight);
  return red == kMean ? div(sum(wl), sum(weight)) : apply_reduction(wl, red);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
                      double beta) {
  KILN_AUTOCAST(kFp32, smooth_l1_loss, input, target, reduction, beta);
  const char* op = "smooth_l1_loss";
  const int64_t red = reduction_enum(reduction);
  if (beta == 0.0) return l1_loss(input, target, reduction);
  TensorList xt = broadcast_tensors({input, target});
  Tensor d = sub(xt[0], xt[1]);
  check_floating(op, "smooth_l1_cpu", d.dtype());
  KILN_CHECK(beta >= 0, Runtime, op, "smooth_l1_loss does not support negative values for beta.");
  Tensor a = abs(d);
  Tensor l =
      where(lt(a, Scalar(beta)), mul(mul(d, d), Scalar(0.5 / beta)), sub(a, Scalar(0.5 * beta)));
  return apply_reduction(l, red);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
                  double delta, const Tensor& weight) {
  KILN_AUTOCAST(kFp32, huber_loss, input, target, reduction, delta, weight);
  const char* op = "huber_loss";
  const int64_t red = reduction_enum(reduction);
  TensorList xt = broadcast_tensors({input, target});
  const Dtype common = result_type(input, target);
  KILN_CHECK(can_cast(common, input.dtype()), Runtime, op, "result type ", tname(common),
             " can't be cast to the desired output type ", tname(input.dtype()));
  check_floating(op, "huber_cpu", common);
  KILN_CHECK(delta > 0, Runtime, op, "huber_loss does not support non-positive values for delta.");
  Tensor d = sub(xt[0], xt[1]);
  Tensor a = abs(d);
  Tensor l = where(lt(a, Scalar(delta)), mul(mul(d, d), Scalar(0.5)),
                   mul(sub(a, Scalar(0.5 * delta)), Scalar(delta)));
  l = to_dtype(l, input.dtype());
  if (!weight.defined()) return apply_reduction(l, red);
  check_elem_weight(op, input, weight);
  return apply_reduction(mul(l, weight), red);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            const std::string& reduction) {
  KILN_AUTOCAST(kFp32, binary_cross_entropy, input, target, weight, reduction);
  const char* op = "binary_cross_entropy";
  const int64_t red = reduction_enum(reduction);
  KILN_CHECK(target.sizes() == input.sizes(), Value, op, "Using a target size (",
             shape_str(target.sizes()), ") that is different to the input size (",
             shape_str(input.sizes()), ") is deprecated. Please ensure they have the same size.");
  Tensor w = weight;
  if (w.defined()) {
    w = expand(w, broadcast_shapes(target.sizes(), w.sizes(), op));
    KILN_CHECK(w.sizes() == input.sizes(), Runtime, op, "output with shape ",
               shape_str(input.sizes()), " doesn't match the broadcast shape ",
               shape_str(w.sizes()));
  }
  const Dtype d = input.dtype();
  KILN_CHECK(target.dtype() == d, Runtime, op, "Found dtype ", tname(target.dtype()),
             " but expected ", tname(d));
  if (!is_floating(d) || is_float8(d)) shape_detail::not_implemented(op, op, d);
  const bool low = d == kFloat16 || d == kBFloat16;
  Tensor loss = dispatch1(
      op_bce, {low ? to_dtype(input, kFloat32) : input, low ? to_dtype(target, kFloat32) : target});
  if (w.defined()) loss = to_dtype(mul(loss, w), loss.dtype());
  loss = apply_reduction(loss, red);
  return low ? to_dtype(loss, d) : loss;
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight, const std::string& reduction,
                                        const Tensor& pos_weight) {
  KILN_AUTOCAST(kFp32, binary_cross_entropy_with_logits, input, target, weight, reduction, pos_weight);
  const char* op = "binary_cross_entropy_with_logits";
  const int64_t red = reduction_enum(reduction);
  KILN_CHECK(target.sizes() == input.sizes(), Value, op, "Target size (", shape_str(target.sizes()),
             ") must be the same as input size (", shape_str(input.sizes()), ")");
  // torch computes in place on (1 - target): the result has target's dtype
  const Dtype out = target.dtype(), common = result_type(input, target);
  check_floating(op, "log_sigmoid_cpu", input.dtype());
  KILN_CHECK(can_cast(common, out), Runtime, op, "result type ", tname(common),
             " can't be cast to the desired output type ", tname(out));
  auto check_into = [&](const Tensor& t) {
    Shape b = broadcast_shapes(input.sizes(), t.sizes(), op);
    KILN_CHECK(b == input.sizes(), Runtime, op, "output with shape ", shape_str(input.sizes()),
               " doesn't match the broadcast shape ", shape_str(b));
  };
  Tensor log_sig = logsigmoid(input);
  if (pos_weight.defined()) {
    Tensor log_weight = add(mul(sub(pos_weight, Scalar(1)), target), Scalar(1));
    check_into(log_weight);
    log_sig = mul(log_sig, log_weight);
  }
  Tensor loss = sub(mul(rsub(target, Scalar(1)), input), log_sig);
  if (weight.defined()) {
    check_into(weight);
    loss = mul(loss, weight);
  }
  return apply_reduction(to_dtype(loss, out), red);
}

Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction,
              bool log_target) {
  KILN_AUTOCAST(kFp32, kl_div, input, target, reduction, log_target);
  const char* op = "kl_div";
  const bool batchmean = reduction == "batchmean";
  const int64_t red = batchmean ? kSum : reduction_enum(reduction);
  KILN_CHECK(!input.is_complex() && !target.is_complex(), Runtime, op,
             "kl_div: Complex inputs not supported.");
  KILN_CHECK(!is_integral(input.dtype(), true) && !is_integral(target.dtype(), true), Runtime, op,
             "kl_div: Integral inputs not supported.");
  Tensor l = log_target ? mul(exp(target), sub(target, input))
                        : sub(xlogy(target, target), mul(target, input));
  Tensor r = apply_reduction(l, red);
  if (batchmean && input.dim() != 0) r = true_divide(r, Scalar(input.sizes()[0]));
  return r;
}

Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             double margin, const std::string& reduction) {
  KILN_AUTOCAST(kFp32, cosine_embedding_loss, input1, input2, target, margin, reduction);
  const char* op = "cosine_embedding_loss";
  const int64_t red = reduction_enum(reduction);
  const int64_t td = target.dim();
  KILN_CHECK(td == 1 || td == 0, Runtime, op,
             "0D or 1D target tensor expected, multi-target not supported");
  if (td == 1) {
    KILN_CHECK(input1.dim() == 2 && input2.dim() == 2, Runtime, op,
               "1D target tensor expects 2D input tensors, but found inputs with sizes ",
               shape_str(input1.sizes()), " and ", shape_str(input2.sizes()), ".");
  } else {
    KILN_CHECK(input1.dim() == 1 && input2.dim() == 1, Runtime, op,
               "0D target tensor expects 1D input tensors, but found inputs with sizes ",
               shape_str(input1.sizes()), " and ", shape_str(input2.sizes()), ".");
  }
  constexpr double kEps = 1e-12;
  const Shape dim{td};
  Tensor prod_sum = sum(mul(input1, input2), dim);
  Tensor mag1 = add(sum(mul(input1, input1), dim), Scalar(kEps));
  Tensor mag2 = add(sum(mul(input2, input2), dim), Scalar(kEps));
  Tensor cos = div(prod_sum, sqrt(mul(mag1, mag2)));
  Tensor zero = zeros_like(cos);
  Tensor pos = rsub(cos, Scalar(1));
  Tensor neg_ = clamp(sub(cos, Scalar(margin)), Scalar(0), std::nullopt);
  Tensor l =
      add(where(eq(target, Scalar(1)), pos, zero), where(eq(target, Scalar(-1)), neg_, zero));
  return apply_reduction(l, red);
}

Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           double margin, const std::string& reduction) {
  KILN_AUTOCAST(kFp32, margin_ranking_loss, input1, input2, target, margin, reduction);
  const char* op = "margin_ranking_loss";
  const int64_t red = reduction_enum(reduction);
  KILN_CHECK(
      input1.dim() == input2.dim() && input1.dim() == target.dim(), Runtime, op,
      "margin_ranking_loss : All input tensors should have same dimension but got sizes: input1: ",
      shape_str(input1.sizes()), ", input2: ", shape_str(input2.sizes()),
      ", target: ", shape_str(target.sizes()), " ");
  Tensor l = add(mul(neg(target), sub(input1, input2)), Scalar(margin));
  return apply_reduction(clamp(l, Scalar(0), std::nullopt), red);
}

}  // namespace nn::functional
}  // namespace kiln
