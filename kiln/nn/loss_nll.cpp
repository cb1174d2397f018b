// Class-index cross entropy and nll_loss as fused table ops: their op-table entries, schemas,
// metas, derivatives and front ends. Their CPU kernels are in kiln/backend/cpu/loss.cpp, the
// attribute layout in kiln/nn/loss_detail.h.
//
// Layout: x (N, C, d...), target (N, d...) int64, weight (C,) or undefined. Attributes
// {reduction, ignore_index[, label_smoothing]}.
//
//   cross_entropy_loss   -> {loss, lse}: per row max, exp-sum -> lse and
//                           (1 - ls) w_t (lse - x_t) + ls / C * sum_c w_c (lse - x_c), one pass
//                           over the logits, nothing of their size written.
//   cross_entropy_loss_backward(g, x, target, weight, lse) -> g k (a softmax(x) - b): the whole
//                           gradient in one pass (a, b from weights and smoothing, k = 1 / total
//                           weight for 'mean'). Its derivative is composed of kiln ops and of this
//                           op again, so every order of derivative works.
//   nll_loss             -> {loss}: -w_t x_t; derivative nll_loss_backward, whose derivative (in
//                           grad) is nll_loss itself.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kiln/amp/autocast.h"
#include "kiln/autograd/autograd.h"
#include "kiln/nn/loss.h"
#include "kiln/nn/loss_detail.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

using namespace loss_detail;

// ---- cross_entropy_loss ------------------------------------------------------------------------
SpecList ce_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec &x = in[0], &t = in[1];
  SymShape loss = red_of(a) == kNone ? t.sizes() : SymShape{};
  if (op.code == 1) return {{loss, x.dtype()}};  // nll_loss
  return {{loss, x.dtype()}, {t.sizes(), x.dtype()}};
}

OpDef op_ce{"cross_entropy_loss", kReduction, ce_meta, {}, 0};
OpRegistrar reg_ce{op_ce, "cross_entropy_loss(Tensor self, Tensor target, Tensor? weight, int reduction, int ignore_index, float label_smoothing) -> (Tensor, Tensor)"};
OpDef op_nll{"nll_loss", kReduction, ce_meta, {}, 1};
OpRegistrar reg_nll{op_nll, "nll_loss(Tensor self, Tensor target, Tensor? weight, int reduction, int ignore_index) -> (Tensor, Tensor)"};

// ---- backward ops ------------------------------------------------------------------------------
// cross_entropy_loss_backward: inputs {grad, x, target, weight, lse}; output d loss / d x.
SpecList ce_bw_meta(const OpDef&, const SpecList& in, const Attrs&) {
  return {{in[1].sizes(), in[1].dtype()}};
}

OpDef op_ce_bw{"cross_entropy_loss_backward", 0, ce_bw_meta, {}};
OpRegistrar reg_ce_bw{op_ce_bw, "cross_entropy_loss_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, Tensor logsumexp, int reduction, int ignore_index, float label_smoothing) -> Tensor"};

// nll_loss_backward: inputs {grad, target, weight}; attrs {reduction, ignore_index, input shape}.
SpecList nll_bw_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  return {{attr<Shape>(a, 2), in[0].dtype()}};
}

OpDef op_nll_bw{"nll_loss_backward", 0, nll_bw_meta, {}};
OpRegistrar reg_nll_bw{op_nll_bw, "nll_loss_backward(Tensor grad_output, Tensor target, Tensor? weight, int reduction, int ignore_index, int[] input_size) -> Tensor"};

// ---- derivatives -------------------------------------------------------------------------------
TensorList ce_grad(const GradCtx& c, const TensorList& go) {
  TensorList r(c.in_specs.size());
  if (c.needs[0])
    r[0] = dispatch1(op_ce_bw, {go[0], c.in[0], c.in[1], c.in[2], detach(c.out[1])}, c.attrs);
  return r;
}
DerivativeRegistrar d_ce{op_ce, ce_grad, 0b111, 0b10};

// Per target position: grad * k * a with k = kept / (total weight for 'mean') and
// a = (1 - ls) w_t + ls / C * sum(w): the factor of softmax(x) in cross_entropy_loss_backward.
Tensor softmax_scale(const Tensor& g, const Tensor& x, const Tensor& t, const Tensor& w,
                     const Attrs& a) {
  const int64_t red = red_of(a);
  const double ls = smoothing_of(a);
  const int64_t C = x.sizes()[1];
  Tensor keep = ne(t, Scalar(ignore_of(a)));
  Tensor wt = ones(t.sizes(), like(x));
  if (w.defined()) {
    Tensor safe = where(keep, t, zeros({}, kInt64));
    wt = reshape(index_select(w, 0, reshape(safe, {-1})), t.sizes());
  }
  Tensor k = to_dtype(keep, x.dtype());
  if (red == kMean) k = where(keep, reciprocal(sum(mul(wt, k))), zeros({}, like(x)));
  Tensor sa = mul(wt, Scalar(1 - ls));
  if (ls > 0) {
    Tensor sumw = w.defined() ? sum(w) : full({}, Scalar(static_cast<double>(C)), x.dtype());
    sa = add(sa, mul(sumw, Scalar(ls / static_cast<double>(C))));
  }
  return mul(mul(g, k), sa);
}

// d/d grad: sum_c v * (the gradient for grad = 1); d/dx: softmax backward of v * grad k a.
TensorList ce_bw_grad(const GradCtx& c, const TensorList& go) {
  const Tensor &v = go[0], &g = c.in[0], &x = c.in[1], &t = c.in[2], &w = c.in[3];
  TensorList r(c.in_specs.size());
  if (c.needs[0]) {
    Tensor unit = dispatch1(op_ce_bw, {ones_like(g), x, t, w, c.in[4]}, c.attrs);
    Tensor vu = mul(v, unit);
    r[0] = red_of(c.attrs) == kNone ? sum(vu, Shape{1}) : sum(vu);
  }
  if (c.needs[1]) {
    Tensor p = softmax(x, 1);
    Tensor u = mul(v, unsqueeze(softmax_scale(g, x, t, w, c.attrs), 1));
    r[1] = mul(p, sub(u, sum(mul(u, p), Shape{1}, true)));
  }
  return r;
}
DerivativeRegistrar d_ce_bw{op_ce_bw, ce_bw_grad, 0b11111, 0};

TensorList nll_grad(const GradCtx& c, const TensorList& go) {
  TensorList r(c.in_specs.size());
  if (c.needs[0])
    r[0] = dispatch1(op_nll_bw, {go[0], c.in[1], c.in[2]},
                     {c.attrs[0], c.attrs[1], Attr(c.in_specs[0].raw_sizes())});
  return r;
}
DerivativeRegistrar d_nll{op_nll, nll_grad, 0b110, 0};

// nll_loss_backward is linear in grad with the coefficients nll_loss applies to its input.
TensorList nll_bw_grad(const GradCtx& c, const TensorList& go) {
  TensorList r(c.in_specs.size());
  if (c.needs[0]) r[0] = dispatch1(op_nll, {go[0], c.in[1], c.in[2]}, {c.attrs[0], c.attrs[1]});
  return r;
}
DerivativeRegistrar d_nll_bw{op_nll_bw, nll_bw_grad, 0b110, 0};

// ---- front ends --------------------------------------------------------------------------------
// torch's argument checks of nll_loss_nd / nll_loss / nll_loss2d, in torch's order.
void check_nll_args(const char* op, const Tensor& x, const Tensor& t, const Tensor& w) {
  const SymShape xs = x.sym_sizes(), ts = t.sym_sizes();  // symbolic in a trace
  KILN_CHECK(x.dim() >= 1, Value, op, "Expected 1 or more dimensions (got ", x.dim(), ")");
  if (x.dim() != 1) {
    const SymInt tb = t.dim() ? ts[0] : SymInt(0);
    KILN_CHECK(xs[0] == tb, Value, op, "Expected input batch_size (", xs[0],
               ") to match target batch_size (", tb, ").");
  }
  if (x.dim() <= 2) {
    KILN_CHECK(t.dim() <= 1, Runtime, op,
               "0D or 1D target tensor expected, multi-target not supported");
    if (x.dim() == 1 && t.dim() == 1)
      KILN_CHECK(ts[0] == 1, Value, op,
                 "For 1D input, 1D target must have size 1, but got target size: ", ts[0]);
  } else if (x.dim() == 4) {
    KILN_CHECK(t.dim() == 3, Runtime, op,
               "only batches of spatial targets supported (3D tensors) but got "
               "targets of dimension: ",
               t.dim());
    KILN_CHECK(xs[2] == ts[1] && xs[3] == ts[2], Runtime, op,
               "size mismatch (got input: ", shape_str(xs),
               " , target: ", shape_str(ts));
  } else {
    SymShape want{xs[0]};
    want.insert(want.end(), xs.begin() + 2, xs.end());
    KILN_CHECK(ts == want, Runtime, op, "Expected target size ", shape_str(want), ", got ",
               shape_str(ts));
  }
  const SymInt C = x.dim() == 1 ? xs[0] : xs[1];
  KILN_CHECK(!w.defined() || (w.dim() == 1 && w.sym_numel() == C), Runtime, op,
             "weight tensor should be defined either for all ", C,
             " classes or no classes but got weight tensor of shape: ",
             shape_str(w.defined() ? w.sizes() : Shape{}));
  KILN_CHECK(t.dtype() == kInt64 || t.dtype() == kUInt8, Runtime, op,
             "expected target dtype to be Long or Byte, but got ",
             shape_detail::torch_type_name(t.dtype()));
  KILN_CHECK(!w.defined() || w.dtype() == x.dtype(), Runtime, op, "expected scalar type ",
             shape_detail::torch_type_name(x.dtype()), " but found ",
             shape_detail::torch_type_name(w.dtype()));
  KILN_CHECK(
      !(w.defined() && grad_mode_enabled() && w.requires_grad()), Runtime, op,
      "The function 'nll_loss_forward' is not differentiable with respect to argument 'weight'. "
      "This input cannot have requires_grad True.");
}

void check_float_input(const char* op, const char* kernel, const Tensor& x) {
  const Dtype d = x.dtype();
  if (!is_floating(d) || is_float8(d)) shape_detail::not_implemented(op, kernel, d);
}

// Class-index losses through the fused ops: 1-D inputs gain a batch dim, float16 / bfloat16 run in
// float32, the result returns in the input's dtype.
Tensor index_loss(const OpDef& op, const char* name, const Tensor& input, const Tensor& target,
                  const Tensor& weight, int64_t red, Attrs attrs) {
  check_nll_args(name, input, target, weight);
  const Dtype d = input.dtype();
  const bool low = d == kFloat16 || d == kBFloat16;
  Tensor x = low ? to_dtype(input, kFloat32) : input;
  Tensor w = weight.defined() && low ? to_dtype(weight, kFloat32) : weight;
  Tensor t = target.dtype() == kInt64 ? target : to_dtype(target, kInt64);
  const bool single = x.dim() == 1;
  if (single) {
    x = unsqueeze(x, 0);
    t = reshape(t, {1});
  }
  Tensor loss = dispatch(op, {x, t, w}, std::move(attrs))[0];
  if (single && red == kNone) loss = reshape(loss, {});
  return low ? to_dtype(loss, d) : loss;
}

// Class probabilities (target of input's shape): -sum(w * t * log_softmax(x)) over classes.
Tensor prob_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                          int64_t ignore_index, int64_t red, double ls) {
  const char* op = "cross_entropy";
  KILN_CHECK(is_floating(target.dtype()), Runtime, op,
             "Expected floating point type for target with class probabilities, got ",
             shape_detail::torch_type_name(target.dtype()));
  KILN_CHECK(ignore_index < 0, Runtime, op,
             "ignore_index is not supported for floating point target");
  const int64_t cd = input.dim() == 1 ? 0 : 1;
  const int64_t C = input.dim() == 0 ? 1 : input.sizes()[cd];
  KILN_CHECK(!weight.defined() || (weight.dim() == 1 && weight.numel() == C), Runtime, op,
             "cross_entropy: weight tensor should be defined either for all ", C,
             " classes or no classes but got weight tensor of shape: ",
             shape_str(weight.defined() ? weight.sizes() : Shape{}));
  check_float_input(op, "log_softmax_lastdim_kernel_impl", input);
  Tensor lsm = log_softmax(input, cd);
  Tensor t = target;
  if (ls > 0) {
    KILN_CHECK(ls <= 1.0, Runtime, op, "label_smoothing must be between 0.0 and 1.0. Got: ", ls);
    t = add(mul(t, Scalar(1 - ls)), Scalar(ls / static_cast<double>(C)));
  }
  Tensor prod = mul(lsm, t);
  if (weight.defined()) {
    Shape ws(input.dim(), 1);
    if (input.dim() > 1) ws[1] = C;
    prod = mul(prod, input.dim() > 1 ? reshape(weight, ws) : weight);
  }
  if (red == kNone) return neg(sum(prod, Shape{cd}));
  Tensor total = neg(sum(prod));
  if (red == kSum) return total;
  if (input.numel() == 0) return full_like(total, Scalar(std::numeric_limits<double>::quiet_NaN()));
  return true_divide(total, Scalar(input.numel() / C));
}

}  // namespace

namespace nn::functional {

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                     int64_t ignore_index, const std::string& reduction, double label_smoothing) {
  KILN_AUTOCAST(kFp32, cross_entropy, input, target, weight, ignore_index, reduction, label_smoothing);
  const int64_t red = reduction_enum(reduction);
  if (input.dim() == target.dim() && input.sym_sizes() == target.sym_sizes())
    return prob_cross_entropy(input, target, weight, ignore_index, red, label_smoothing);
  const char* op = "cross_entropy";
  double ls = 0;
  if (label_smoothing > 0) {
    KILN_CHECK(label_smoothing <= 1.0, Runtime, op,
               "label_smoothing must be between 0.0 and 1.0. Got: ", label_smoothing);
    ls = label_smoothing;
  }
  check_float_input(op, "log_softmax_lastdim_kernel_impl", input);
  return index_loss(op_ce, op, input, target, weight, red, {red, ignore_index, ls});
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                int64_t ignore_index, const std::string& reduction) {
  KILN_AUTOCAST(kFp32, nll_loss, input, target, weight, ignore_index, reduction);
  const int64_t red = reduction_enum(reduction);
  const char* op = "nll_loss";
  if (input.dim() >= 1) check_float_input(op, "nll_loss_out_frame", input);
  return index_loss(op_nll, op, input, target, weight, red, {red, ignore_index});
}

}  // namespace nn::functional
}  // namespace kiln
