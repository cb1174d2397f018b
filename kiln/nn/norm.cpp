// Normalisation: the fused layer_norm table ops (schemas, metas, derivative; the CPU kernels are in
// kiln/backend/cpu/norm.cpp), rms_norm, and the small functional layers (linear, bilinear, dropout).
#include "kiln/amp/autocast.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/finfo.h"
#include "kiln/core/format.h"
#include "kiln/ops/composite.h"
#include "kiln/nn/functional.h"

namespace kiln {
namespace {

Tensor mean_of(const Tensor& x, const Shape& dims) { return mean(x, dims, true); }

// inputs {x, weight?, bias?}; attrs {normalized ndim, eps}; outputs {y, mean, rstd}
SpecList layer_norm_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  int64_t k = attr<int64_t>(a, 0);
  SymShape stat = x.sizes();
  for (int64_t i = 0; i < k; ++i) stat[x.dim() - 1 - i] = 1;
  Dtype acc = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
  return {{x.sizes(), x.dtype()}, {stat, acc}, {stat, acc}};
}

OpDef op_layer_norm{"native_layer_norm", 0, layer_norm_meta, {}};
OpRegistrar reg_layer_norm{op_layer_norm, "native_layer_norm(Tensor input, Tensor? weight, Tensor? bias, int normalized_ndim, float eps) -> (Tensor, Tensor, Tensor)"};

// The fused first-order backward: inputs {grad, x, mean, rstd, weight?}; outputs {dx, dweight, dbias}
// (dweight/dbias over the normalised shape, summed over rows in fixed 64-row blocks, so results do
// not depend on the thread count).
SpecList layer_norm_bwd_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[1];
  int64_t k = attr<int64_t>(a, 0);
  SymShape ns(x.sizes().end() - k, x.sizes().end());
  return {{x.sizes(), x.dtype()}, {ns, x.dtype()}, {ns, x.dtype()}};
}

OpDef op_layer_norm_bwd{"native_layer_norm_backward", 0, layer_norm_bwd_meta, {}};
OpRegistrar reg_layer_norm_bwd{op_layer_norm_bwd, "native_layer_norm_backward(Tensor grad_out, Tensor input, Tensor mean, Tensor rstd, Tensor? weight, int normalized_ndim) -> (Tensor, Tensor, Tensor)"};

// dx = rstd * (dxh - mean(dxh) - xh * mean(dxh * xh)), dxh = g * w; dw = sum(g * xh); db = sum(g).
// First order runs the fused kernel above; under create_graph the composite keeps it differentiable.
TensorList layer_norm_grad(const GradCtx& c, const TensorList& go) {
  const Tensor &g = go[0], &x = c.in[0], &mean = c.out[1], &rstd = c.out[2];
  const Tensor w = c.in.size() > 1 ? c.in[1] : Tensor();
  if (!grad_mode_enabled() && (x.dtype() == kFloat32 || x.dtype() == kFloat64) && g.dtype() == x.dtype() &&
      mean.dtype() == x.dtype()) {
    TensorList r = dispatch(op_layer_norm_bwd, {g, x, mean, rstd, w}, {attr<int64_t>(c.attrs, 0)});
    TensorList out(c.in_specs.size());
    out[0] = r[0];
    if (out.size() > 1 && c.needs[1]) out[1] = r[1];
    if (out.size() > 2 && c.needs[2]) out[2] = r[2];
    return out;
  }
  int64_t k = attr<int64_t>(c.attrs, 0);
  int64_t nd = x.dim();
  Shape norm_dims, lead_dims;
  for (int64_t i = 0; i < nd; ++i) (i >= nd - k ? norm_dims : lead_dims).push_back(i);
  Tensor mu = mean.to(x.dtype()), rs = rstd.to(x.dtype());
  if (grad_mode_enabled()) {  // create_graph: statistics as functions of x, so double backward sees them
    mu = mean_of(x, norm_dims);
    Tensor d = sub(x, mu);
    rs = rsqrt(add(mean_of(mul(d, d), norm_dims), Scalar(attr<double>(c.attrs, 1))));
  }
  Tensor xh = mul(sub(x, mu), rs);
  TensorList r(c.in_specs.size());
  Tensor dxh = w.defined() ? mul(g, w) : g;
  if (c.needs[0]) {
    Tensor m1 = mean_of(dxh, norm_dims);
    Tensor m2 = mean_of(mul(dxh, xh), norm_dims);
    r[0] = mul(sub(sub(dxh, m1), mul(xh, m2)), rs);
  }
  if (r.size() > 1 && c.needs[1]) r[1] = lead_dims.empty() ? mul(g, xh) : sum(mul(g, xh), lead_dims);
  if (r.size() > 2 && c.needs[2]) r[2] = lead_dims.empty() ? g : sum(g, lead_dims);
  return r;
}

DerivativeRegistrar d_layer_norm{op_layer_norm, layer_norm_grad, 0b011, 0b110};
}

namespace nn::functional {

Tensor layer_norm(const Tensor& x, const Shape& ns, const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "layer_norm";
  int64_t k = static_cast<int64_t>(ns.size());
  bool ok = k <= x.dim();
  for (int64_t i = 0; ok && i < k; ++i) ok = bool(x.sym_size(x.dim() - k + i) == ns[i]);
  auto shape_s = shape_list;
  KILN_CHECK(ok, Runtime, op, "Given normalized_shape=", shape_s(ns), ", expected input with shape [*, ",
             shape_s(ns).substr(1), ", but got input of size", shape_s(x.sizes()));
  KILN_CHECK(!weight.defined() || weight.sizes() == ns, Runtime, op, "Expected weight to be of same shape as "
             "normalized_shape, but got weight of shape ", shape_s(weight.sizes()), " and normalized_shape = ",
             shape_s(ns));
  KILN_CHECK(!bias.defined() || bias.sizes() == ns, Runtime, op, "Expected bias to be of same shape as "
             "normalized_shape, but got bias of shape ", shape_s(bias.sizes()), " and normalized_shape = ",
             shape_s(ns));
  Dtype d = x.dtype();
  bool low = d == kFloat16 || d == kBFloat16;
  auto up = [&](const Tensor& t) { return t.defined() && low ? to_dtype(t, kFloat32) : t; };
  Tensor y = dispatch(op_layer_norm, {up(x), up(weight), up(bias)}, {k, eps})[0];
  return low ? to_dtype(y, d) : y;
}

Tensor rms_norm(const Tensor& x, const Shape& ns, const Tensor& weight, std::optional<double> eps) {
  const char* op = "rms_norm";
  int64_t k = static_cast<int64_t>(ns.size());
  auto shape_s = shape_list;
  KILN_CHECK(k >= 1, Runtime, op, "Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
             "least one element, but got normalized_shape = ", shape_s(ns));
  KILN_CHECK(k <= x.dim(), Value, op, "Input tensor must have at least ", k, " dimensions, but got ", x.dim());
  bool ok = true;  // torch's check, as layer_norm's
  for (int64_t i = 0; ok && i < k; ++i) ok = bool(x.sym_size(x.dim() - k + i) == ns[i]);
  KILN_CHECK(ok, Runtime, op, "Given normalized_shape=", shape_s(ns), ", expected input with shape [*, ",
             shape_s(ns).substr(1), ", but got input of size", shape_s(x.sizes()));
  KILN_CHECK(!weight.defined() || weight.sizes() == ns, Runtime, op, "Expected weight to be of same shape as "
             "normalized_shape, but got weight of shape ", shape_s(weight.sizes()), " and normalized_shape = ",
             shape_s(ns));
  Shape dims;
  for (int64_t i = x.dim() - k; i < x.dim(); ++i) dims.push_back(i);
  Dtype d = x.dtype();
  Tensor xf = d == kFloat16 || d == kBFloat16 ? to_dtype(x, kFloat32) : x;
  double e = eps.value_or(finfo_eps(xf.dtype() == kFloat64 ? kFloat64 : kFloat32));
  Tensor y = mul(xf, rsqrt(add(mean(mul(xf, xf), dims, true), Scalar(e))));
  y = to_dtype(y, d);
  return weight.defined() ? mul(y, weight) : y;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  KILN_AUTOCAST(kLowerPrecision, linear, x, w, b);
  KILN_CHECK(w.dim() == 2 || w.dim() == 1, Runtime, "linear", "weight must be 1-D or 2-D, got ", w.dim(), "-D");
  if (x.dim() == 2 && w.dim() == 2 && b.defined()) return addmm(b, x, t(w));
  // torch's fused path: a contiguous input of another rank with a bias of one row ((N) or (1, N)) goes
  // through addmm as (rows, K), so bfloat16 / float16 round once there too (decode steps (K) and
  // (B, 1, K) included); the output drops the bias's row dim, as torch's does
  if (w.dim() == 2 && b.defined() && x.dim() != 2 && x.dim() >= 1 && x.is_contiguous() &&
      (b.dim() == 1 || (b.dim() == 2 && b.sizes()[0] == 1 && b.sizes()[1] == w.sizes()[0]))) {
    const SymShape xs = x.sym_sizes();
    SymInt rows = 1;
    for (size_t i = 0; i + 1 < xs.size(); ++i) rows = rows * xs[i];
    Tensor y = addmm(b, reshape_symint(x, {rows, xs.back()}), t(w));
    SymShape ys(xs.begin(), xs.end() - 1);
    ys.push_back(y.sym_size(1));
    return reshape_symint(y, ys);
  }
  Tensor y = matmul(x, w.dim() == 2 ? t(w) : w);
  return b.defined() ? add(y, b) : y;
}

Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& w, const Tensor& b) {
  KILN_AUTOCAST(kOpaque, bilinear, x1, x2, w, b);
  KILN_CHECK(w.dim() == 3, Runtime, "bilinear", "weight must be 3-D (out, in1, in2), got ", w.dim(), "-D");
  KILN_CHECK(x1.dim() >= 1 && x1.sizes().back() == w.sizes()[1] && x2.sizes().back() == w.sizes()[2], Runtime,
             "bilinear", "input sizes do not match the weight");
  Tensor y = einsum("...i,oij,...j->...o", {x1, w, x2});
  return b.defined() ? add(y, b) : y;
}

Tensor dropout(const Tensor& x, double p, bool training) {
  KILN_CHECK(p >= 0 && p <= 1, Value, "dropout", "dropout probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0) return x;
  if (p == 1) return mul(x, zeros_like(x));
  // (the mask in x's floating dtype: a bool mask times the scale would be float32, and a float64
  // input would be scaled by 1 / (1 - p) rounded to float32)
  const Dtype d = is_floating(x.dtype()) ? x.dtype() : kFloat32;
  Tensor keep = to_dtype(ge(rand(x.sizes(), like(x, d)), Scalar(p)), d);
  return mul(x, mul(keep, Scalar(1.0 / (1.0 - p))));
}

Tensor feature_dropout(const Tensor& x, double p, bool training) {  // (torch's order of checks)
  KILN_CHECK(p >= 0 && p <= 1, Runtime, "dropout", "dropout probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0 || x.numel() == 0) return x;
  if (p == 1) return mul(x, zeros({}, like(x, x.dtype())));
  KILN_CHECK(x.dim() >= 2, Runtime, "feature_dropout", "Feature dropout requires at least 2 dimensions in the input");
  Shape ms(x.sizes().begin(), x.sizes().begin() + 2);  // (N, C, 1, ...)
  ms.resize(x.dim(), 1);
  const Dtype d = is_floating(x.dtype()) ? x.dtype() : kFloat32;
  Tensor keep = to_dtype(ge(rand(ms, like(x, d)), Scalar(p)), d);  // (in x's dtype: see dropout)
  return mul(x, mul(keep, Scalar(1.0 / (1.0 - p))));
}
namespace {
// dropout1d / 3d: any input of another rank than `batched` as a batch of one (torch's rule)
Tensor channel_dropout(const char* op, const Tensor& x, double p, bool training, int64_t batched) {
  KILN_CHECK(p >= 0 && p <= 1, Value, op, "dropout probability has to be between 0 and 1, but got ", p);
  if (x.dim() != batched) return squeeze(feature_dropout(unsqueeze(x, 0), p, training), Shape{0});
  return feature_dropout(x, p, training);
}
}  // namespace
Tensor dropout1d(const Tensor& x, double p, bool training) {
  KILN_CHECK(x.dim() == 2 || x.dim() == 3, Runtime, "dropout1d", "dropout1d: Expected 2D or 3D input, but received a ",
             x.dim(), "D input. Note that dropout1d exists to provide channel-wise dropout on inputs with 1 spatial "
             "dimension, a channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).");
  return channel_dropout("dropout1d", x, p, training, 3);
}
Tensor dropout2d(const Tensor& x, double p, bool training) {
  KILN_CHECK(p >= 0 && p <= 1, Value, "dropout2d", "dropout probability has to be between 0 and 1, but got ", p);
  return feature_dropout(x, p, training);
}
Tensor dropout3d(const Tensor& x, double p, bool training) { return channel_dropout("dropout3d", x, p, training, 5); }

}  // namespace nn::functional

// ---- composites with torch's schemas (ops/composite.h): kiln.nn.functional's ops come from these ---
namespace {
using namespace nn::functional;
Composite c_linear{"linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
                   [](const TensorList& in, const Attrs&) -> TensorList { return {linear(in[0], in[1], in[2])}; },
                   kFunctionVariant};
Composite c_bilinear{"bilinear(Tensor input1, Tensor input2, Tensor weight, Tensor? bias=None) -> Tensor",
                     [](const TensorList& in, const Attrs&) -> TensorList {
                       return {bilinear(in[0], in[1], in[2], in[3])};
                     },
                     kFunctionVariant};
// normalized_shape also as one int (torch takes a list; kiln's functional always took both)
Composite c_layer_norm{"layer_norm(Tensor input, int[1] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
                       "float eps=1e-05) -> Tensor",
                       [](const TensorList& in, const Attrs& a) -> TensorList {
                         return {layer_norm(in[0], attr<Shape>(a, 0), in[1], in[2], attr<double>(a, 1))};
                       },
                       kFunctionVariant};
Composite c_rms_norm{"rms_norm(Tensor input, int[1] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor",
                     [](const TensorList& in, const Attrs& a) -> TensorList {
                       return {rms_norm(in[0], attr<Shape>(a, 0), in[1], opt_attr<double>(a, 1))};
                     },
                     kFunctionVariant};
Composite c_dropout{"dropout(Tensor input, float p=0.5, bool training=True, bool inplace=False) -> Tensor",
                    [](const TensorList& in, const Attrs& a) -> TensorList {
                      Tensor r = dropout(in[0], attr<double>(a, 0), attr<bool>(a, 1));
                      if (attr<bool>(a, 2) && r.impl() != in[0].impl()) return {copy_(in[0], r)};
                      return {r};
                    },
                    kFunctionVariant};
Composite c_feature_dropout{"feature_dropout(Tensor input, float p, bool train) -> Tensor",
                            [](const TensorList& in, const Attrs& a) -> TensorList {
                              return {feature_dropout(in[0], attr<double>(a, 0), attr<bool>(a, 1))};
                            },
                            kFunctionVariant};
}  // namespace

}  // namespace kiln
