// The margin, embedding and likelihood losses of torch.nn.functional that loss.cpp does not have:
// poisson_nll_loss, gaussian_nll_loss, hinge_embedding_loss, soft_margin_loss,
// multilabel_soft_margin_loss, multi_margin_loss, multilabel_margin_loss, triplet_margin_loss and
// triplet_margin_with_distance_loss. Each is a composite of kiln ops written as torch computes it
// (so values, dtypes and gradients follow), with torch's argument checks and error classes.
//
// multi_margin_loss and multilabel_margin_loss are hand-written loops in torch; here they are
// gathers and masks over (N, C) — or (N, K, C) for K the most targets of a row — whose autograd
// gives torch's gradient (a hinge at exactly zero, or NaN, passes none, as torch's `z > 0`). Where torch
// leaves the result of an empty batch uninitialised ('mean' / 'sum' over N = 0), kiln returns the
// mean or sum of nothing: NaN and 0.
#include <cmath>
#include <numbers>

#include "kiln/amp/autocast.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/format.h"
#include "kiln/nn/loss.h"
#include "kiln/nn/loss_detail.h"
#include "kiln/nn/loss_modules.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/tensor_utils.h"

namespace kiln::nn::functional {

namespace {

using namespace loss_detail;

const char* tname(Dtype d) { return shape_detail::torch_type_name(d); }

// torch's ValueError text for the losses written in its Python layer (gaussian_nll_loss and
// multilabel_soft_margin_loss say "is not valid", the rest "is not a valid value for reduction").
int64_t python_reduction(const std::string& r) {
  if (r == "none") return kNone;
  if (r == "mean") return kMean;
  if (r == "sum") return kSum;
  KILN_FAIL(Value, "loss", r, " is not valid");
}

// The shape check of torch's multi_margin / multilabel_margin kernels: input (N, C) with C > 0, (C,)
// with C > 0, or 0-dim (one class); returns {N, C}.
std::pair<int64_t, int64_t> margin_frames(const char* op, const Tensor& x) {
  const int64_t nd = x.dim();
  const bool ok = (nd == 2 && x.sizes()[1] != 0) || (nd == 1 && x.sizes()[0] != 0) || nd == 0;
  KILN_CHECK(ok, Runtime, op, "Expected non-empty vector or matrix with optional 0-dim batch size, but got: ",
             shape_str(x.sizes()));
  if (nd <= 1) return {1, nd == 0 ? 1 : x.sizes()[0]};
  return {x.sizes()[0], x.sizes()[1]};
}

// The dtype checks, which torch's kernels make after returning early for an empty input: float32 /
// float64 input, int64 target.
void check_margin_dtypes(const char* op, const char* kernel, const Tensor& x, const Tensor& t) {
  if (x.dtype() != kFloat32 && x.dtype() != kFloat64) shape_detail::not_implemented(op, kernel, x.dtype());
  KILN_CHECK(t.dtype() == kInt64, Runtime, op, "expected scalar type Long but found ", tname(t.dtype()));
}

// An empty batch (N = 0): torch returns its output unwritten; kiln the mean (NaN) or sum (0) of nothing.
Tensor empty_batch(const Tensor& x, int64_t c, int64_t red, bool batched) {
  Tensor rows = zeros({0}, TensorOptions(x.dtype()));
  if (is_floating(x.dtype()) || is_complex(x.dtype())) rows = sum(reshape(x, {0, c}), Shape{1});  // (x's graph)
  if (red == kMean && !is_floating(rows.dtype())) return zeros({}, TensorOptions(x.dtype()));
  return red == kNone ? (batched ? rows : reshape(rows, {})) : apply_reduction(rows, red);
}

// (N, C) -> per-row losses reduced: 'none' keeps (N,) when `batched`, else a 0-dim result.
Tensor reduce_rows(const Tensor& rows, int64_t red, bool batched) {
  if (red == kNone) return batched ? rows : reshape(rows, {});
  return apply_reduction(rows, red);
}

}  // namespace

Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input, bool full, double eps,
                        const std::string& reduction) {
  KILN_AUTOCAST(kFp32, poisson_nll_loss, input, target, log_input, full, eps, reduction);
  const int64_t red = reduction_enum(reduction);
  Tensor loss = log_input ? sub(exp(input), mul(target, input))
                          : sub(input, mul(target, log(add(input, Scalar(eps)))));
  if (full) {
    // Stirling's term t log t - t + 0.5 log(2 pi t), where t > 1
    Tensor stirling = add(sub(mul(target, log(target)), target),
                          mul(log(mul(target, Scalar(2 * std::numbers::pi))), Scalar(0.5)));
    loss = add(loss, masked_fill(stirling, le(target, Scalar(1)), Scalar(0)));
  }
  return apply_reduction(loss, red);
}

Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var_in, bool full,
                         double eps, const std::string& reduction) {
  const char* op = "gaussian_nll_loss";
  Tensor var = var_in;
  {
    NoGradGuard ng;
    KILN_CHECK(!any(lt(var, Scalar(0))).item<bool>(), Value, op, "var has negative entry/entries");
  }
  if (var.sizes() != input.sizes()) {
    const Shape& is = input.sizes();
    const Shape& vs = var.sizes();
    if (input.dim() >= 1 && Shape(is.begin(), is.end() - 1) == vs) {
      var = unsqueeze(var, -1);  // one variance per row (homoscedastic)
    } else {
      int64_t mismatched = 0;  // torch sums var's sizes where they differ from input's
      if (input.dim() == var.dim())
        for (int64_t i = 0; i < input.dim(); ++i)
          if (is[i] != vs[i]) mismatched += vs[i];
      KILN_CHECK(input.dim() == var.dim() && mismatched == 1, Value, op, "var is of incorrect size");
    }
  }
  const int64_t red = python_reduction(reduction);
  // torch clamps a clone of var in place without recording it: the gradient reaches var as if
  // unclamped, evaluated at the clamped value.
  KILN_CHECK(is_floating(var.dtype()) || is_complex(var.dtype()), Runtime, op,
             "result type Float can't be cast to the desired output type ", tname(var.dtype()));
  var = clone(var);
  {
    NoGradGuard ng;
    clamp_(var, Scalar(eps), std::nullopt);
  }
  Tensor d = sub(input, target);
  Tensor loss = mul(add(log(var), div(mul(d, d), var)), Scalar(0.5));
  if (full) loss = add(loss, Scalar(0.5 * std::log(2 * std::numbers::pi)));
  return apply_reduction(loss, red);
}

Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, double var, bool full, double eps,
                         const std::string& reduction) {
  KILN_CHECK(!(var < 0), Value, "gaussian_nll_loss", "var has negative entry/entries");
  return gaussian_nll_loss(input, target, mul(ones_like(input), Scalar(var)), full, eps, reduction);
}

Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin,
                            const std::string& reduction) {
  KILN_AUTOCAST(kFp32, hinge_embedding_loss, input, target, margin, reduction);
  const char* op = "hinge_embedding_loss";
  const int64_t red = reduction_enum(reduction);
  KILN_CHECK(!input.is_complex(), NotImplemented, op, "clamp is not supported for complex types");
  // torch writes margin - x as a tensor of x's dtype filled with margin, minus x
  Tensor zeros = zeros_like(input);
  Tensor margin_clamp = clamp_min(sub(full_like(input, Scalar(margin)), input), Scalar(0));
  Tensor loss = add(where(ne(target, Scalar(1)), margin_clamp, zeros), where(ne(target, Scalar(-1)), input, zeros));
  return apply_reduction(loss, red);
}

Tensor soft_margin_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  KILN_AUTOCAST(kFp32, soft_margin_loss, input, target, reduction);
  const char* op = "soft_margin_loss";
  const int64_t red = reduction_enum(reduction);
  // torch: log1p(exp(-x * t)) computed in place in a tensor of x's shape and dtype
  Tensor nx = neg(input);
  const Shape b = broadcast_shapes(input.sizes(), target.sizes(), op);
  KILN_CHECK(b == input.sizes(), Runtime, op, "output with shape ", shape_str(input.sizes()),
             " doesn't match the broadcast shape ", shape_str(b));
  const Dtype common = result_type(input, target), out = input.dtype();
  KILN_CHECK(can_cast(common, out), Runtime, op, "result type ", tname(common),
             " can't be cast to the desired output type ", tname(out));
  KILN_CHECK(is_floating(out) || is_complex(out), Runtime, op,
             "result type Float can't be cast to the desired output type ", tname(out));
  Tensor z = to_dtype(mul(nx, target), out);
  return apply_reduction(log1p(exp(z)), red);
}

Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                                   const std::string& reduction) {
  const char* op = "multilabel_soft_margin_loss";
  Tensor loss = neg(add(mul(target, logsigmoid(input)), mul(rsub(target, Scalar(1)), logsigmoid(neg(input)))));
  if (weight.defined()) loss = mul(loss, weight);
  KILN_CHECK(input.dim() > 0, Index, op, "Dimension specified as -1 but tensor has no dimensions");
  const int64_t class_dim = input.dim() - 1;
  loss = true_divide(sum(loss, Shape{class_dim}), Scalar(input.sizes()[class_dim]));
  return apply_reduction(loss, python_reduction(reduction));
}

Tensor multi_margin_loss(const Tensor& input, const Tensor& target, double p, double margin, const Tensor& weight,
                         const std::string& reduction) {
  KILN_AUTOCAST(kFp32, multi_margin_loss, input, target, p, margin, weight, reduction);
  const char* op = "multi_margin_loss";
  const int64_t red = reduction_enum(reduction);
  KILN_CHECK(p == 1 || p == 2, Value, op, "only p == 1 and p == 2 supported");
  KILN_CHECK(!weight.defined() || weight.dim() == 1, Value, op, "weight must be one-dimensional");
  auto [n, c] = margin_frames(op, input);
  KILN_CHECK(target.dim() <= 1 && target.numel() == n, Runtime, op,
             "multi_margin_loss: target tensor should be 1-D with size equal to the number of input samples "
             "(batch size). Expected target size [", n, "], but got ", shape_str(target.sizes()),
             ". Input has shape ", shape_str(input.sizes()), ".");
  if (weight.defined())
    KILN_CHECK(weight.numel() == c, Runtime, op, "inconsistent weight size, expected ", c, " but got ",
               shape_str(weight.sizes()));
  if (n == 0) return empty_batch(input, c, red, target.dim() > 0);
  check_margin_dtypes(op, "multi_margin_loss_cpu_kernel", input, target);
  if (weight.defined())
    KILN_CHECK(weight.dtype() == input.dtype(), Runtime, op, "expected scalar type ", tname(input.dtype()),
               " but found ", tname(weight.dtype()));
  Tensor t = reshape(target, {n, 1});
  {
    NoGradGuard ng;
    KILN_CHECK(!any(logical_or(lt(t, Scalar(0)), ge(t, Scalar(c)))).item<bool>(), Runtime, op,
               "target out of range");
  }
  Tensor x = reshape(input, {n, c});
  // z = margin - x[target] + x, over the classes other than the target
  Tensor z = add(rsub(gather(x, 1, t), Scalar(margin)), x);
  Tensor h = p == 2 ? mul(z, z) : z;
  if (weight.defined()) h = mul(h, reshape(index_select(weight, 0, reshape(t, {n})), {n, 1}));
  // torch adds a hinge only where z > 0 (a NaN z, or a NaN / inf weight on a zero hinge, adds nothing)
  Tensor is_target = eq(unsqueeze(arange(Scalar(0), Scalar(c), Scalar(1), kInt64), 0), t);
  h = where(logical_and(gt(z, Scalar(0)), logical_not(is_target)), h, zeros_like(h));
  Tensor rows = true_divide(sum(h, Shape{1}), Scalar(c));
  return reduce_rows(rows, red, target.dim() > 0);
}

Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  KILN_AUTOCAST(kFp32, multilabel_margin_loss, input, target, reduction);
  const char* op = "multilabel_margin_loss";
  const int64_t red = reduction_enum(reduction);
  auto [n, c] = margin_frames(op, input);
  const bool shape_ok = input.dim() <= 1 ? target.dim() <= 1 && target.numel() == c
                                         : target.dim() == 2 && target.sizes() == input.sizes();
  KILN_CHECK(shape_ok, Runtime, op, "inconsistent target size: ", shape_str(target.sizes()),
             " for input of size: ", shape_str(input.sizes()));
  if (n == 0) return empty_batch(input, c, red, target.dim() > 1);
  check_margin_dtypes(op, "multilabel_margin_loss_forward_out_frame", input, target);
  Tensor x = reshape(input, {n, c}), t = reshape(target, {n, c});
  int64_t k = 0;  // the most targets in a row: each row's targets end at its first -1
  Tensor valid;
  {
    NoGradGuard ng;
    KILN_CHECK(!any(logical_or(lt(t, Scalar(-1)), ge(t, Scalar(c)))).item<bool>(), Runtime, op,
               "argument #2 'target' is out of range");
    valid = to_dtype(cumprod(to_dtype(ge(t, Scalar(0)), kInt64), 1), kBool);
    k = amax(sum(valid, Shape{1})).item<int64_t>();
  }
  Tensor rows;
  if (k == 0) {
    rows = sum(where(zeros_like(x, kBool), x, zeros_like(x)), Shape{1});  // (zeros, still x's graph)
  } else {
    Tensor vk = narrow(valid, 1, 0, k);
    Tensor tk = where(vk, narrow(t, 1, 0, k), zeros_like(narrow(t, 1, 0, k)));  // (N, K), -1 read as 0
    Tensor is_target = gt(scatter_add(zeros({n, c}, kInt64), 1, tk, to_dtype(vk, kInt64)), Scalar(0));
    // z[i, j, d] = 1 - x[i, target_j] + x[i, d] for each listed target j and each class d not listed
    Tensor z = add(rsub(unsqueeze(gather(x, 1, tk), 2), Scalar(1)), unsqueeze(x, 1));
    Tensor keep = logical_and(logical_and(unsqueeze(vk, 2), unsqueeze(logical_not(is_target), 1)), gt(z, Scalar(0)));
    Tensor h = where(keep, z, zeros_like(z));  // torch's `z > 0`: a NaN z adds nothing
    rows = true_divide(sum(h, Shape{1, 2}), Scalar(c));
  }
  return reduce_rows(rows, red, target.dim() > 1);
}

namespace {

Tensor triplet_common(const char* op, const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                      double margin, bool swap, int64_t red, const DistanceFunction& dist) {
  KILN_CHECK(anchor.dim() == positive.dim() && positive.dim() == negative.dim(), Runtime, op,
             "The anchor, positive, and negative tensors are expected to have the same number of dimensions, "
             "but got: anchor ", anchor.dim(), "D, positive ", positive.dim(), "D, and negative ", negative.dim(),
             "D inputs");
  Tensor dist_pos = dist(anchor, positive);
  Tensor dist_neg = dist(anchor, negative);
  if (swap) dist_neg = minimum(dist_neg, dist(positive, negative));
  Tensor loss = clamp_min(sub(add(dist_pos, Scalar(margin)), dist_neg), Scalar(0));
  return apply_reduction(loss, red);
}

}  // namespace

Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative, double margin,
                           double p, double eps, bool swap, const std::string& reduction) {
  KILN_AUTOCAST(kFp32, triplet_margin_loss, anchor, positive, negative, margin, p, eps, swap, reduction);
  const int64_t red = reduction_enum(reduction);
  KILN_CHECK(!(margin <= 0), Value, "triplet_margin_loss", "margin must be greater than 0, got ", margin);
  return triplet_margin_loss_op(anchor, positive, negative, margin, p, eps, swap, red);
}

Tensor triplet_margin_loss_op(const Tensor& anchor, const Tensor& positive, const Tensor& negative, double margin,
                              double p, double eps, bool swap, int64_t reduction) {
  KILN_AUTOCAST(kFp32, triplet_margin_loss_op, anchor, positive, negative, margin, p, eps, swap, reduction);
  return triplet_common("triplet_margin_loss", anchor, positive, negative, margin, swap, reduction,
                        [&](const Tensor& a, const Tensor& b) { return pairwise_distance(a, b, p, eps); });
}

Tensor triplet_margin_with_distance_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                                         const DistanceFunction& distance_function, double margin, bool swap,
                                         const std::string& reduction) {
  const int64_t red = reduction_enum(reduction);
  KILN_CHECK(!(margin <= 0), Value, "triplet_margin_with_distance_loss", "margin must be greater than 0, got ",
             margin);
  DistanceFunction dist = distance_function;
  if (!dist) dist = [](const Tensor& a, const Tensor& b) { return pairwise_distance(a, b); };
  return triplet_common("triplet_margin_with_distance_loss", anchor, positive, negative, margin, swap, red, dist);
}

}  // namespace kiln::nn::functional

namespace kiln::nn {

MultiMarginLoss::MultiMarginLoss(int64_t p, double margin, const Tensor& weight, std::string reduction)
    : Module("MultiMarginLoss"), p(p), margin(margin), reduction(std::move(reduction)) {
  KILN_CHECK(p == 1 || p == 2, Value, "MultiMarginLoss", "only p == 1 and p == 2 supported");
  KILN_CHECK(!weight.defined() || weight.dim() == 1, Value, "MultiMarginLoss",
             "MultiMarginLoss: expected weight to be None or 1D tensor, got ", weight.dim(), "D instead");
  register_buffer("weight", weight);
}

TripletMarginLoss::TripletMarginLoss(double margin, double p, double eps, bool swap, std::string reduction)
    : Module("TripletMarginLoss"), margin(margin), p(p), eps(eps), swap(swap), reduction(std::move(reduction)) {
  KILN_CHECK(!(margin <= 0), Value, "TripletMarginLoss",
             "TripletMarginLoss: expected margin to be greater than 0, got ", margin, " instead");
}

TripletMarginWithDistanceLoss::TripletMarginWithDistanceLoss(F::DistanceFunction distance_function, double margin,
                                                             bool swap, std::string reduction)
    : Module("TripletMarginWithDistanceLoss"),
      distance_function(std::move(distance_function)),
      margin(margin),
      swap(swap),
      reduction(std::move(reduction)) {
  KILN_CHECK(!(margin <= 0), Value, "TripletMarginWithDistanceLoss",
             "TripletMarginWithDistanceLoss: expected margin to be greater than 0, got ", margin, " instead");
}

}  // namespace kiln::nn
