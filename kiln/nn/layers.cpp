#include "kiln/nn/layers.h"

#include <cmath>

#include "kiln/nn/init.h"
#include "kiln/nn/layer_util.h"
#include "kiln/ops/shape.h"

namespace kiln::nn {
namespace {

using layer_util::pybool;
using layer_util::pyfloat;
using layer_util::tuple_str;
TensorOptions opts(Dtype d) { return TensorOptions(d == Dtype::Undefined ? default_dtype() : d); }

}  // namespace

// ---- Linear -------------------------------------------------------------------------------------
Linear::Linear(int64_t in, int64_t out, bool bias, Dtype dtype)
    : Module("Linear"), in_features(in), out_features(out) {
  register_parameter("weight", empty({out, in}, opts(dtype)));
  register_parameter("bias", bias ? empty({out}, opts(dtype)) : Tensor());
  reset_parameters();
}
void Linear::reset_parameters() {
  init::kaiming_uniform_(weight(), std::sqrt(5.0));
  if (bias().defined()) {
    double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
    init::uniform_(bias(), -bound, bound);
  }
}
Tensor Linear::forward(const Tensor& x) { return F::linear(x, param("weight"), param("bias")); }
std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
         ", bias=" + pybool(own_parameters().items()[1].second.defined());
}

// ---- Bilinear -----------------------------------------------------------------------------------
Bilinear::Bilinear(int64_t in1, int64_t in2, int64_t out, bool bias, Dtype dtype)
    : Module("Bilinear"), in1_features(in1), in2_features(in2), out_features(out) {
  register_parameter("weight", empty({out, in1, in2}, opts(dtype)));
  register_parameter("bias", bias ? empty({out}, opts(dtype)) : Tensor());
  reset_parameters();
}
void Bilinear::reset_parameters() {
  double bound = in1_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in1_features)) : 0.0;
  init::uniform_(param("weight"), -bound, bound);
  if (param("bias").defined()) init::uniform_(param("bias"), -bound, bound);
}
Tensor Bilinear::forward(const Tensor& x1, const Tensor& x2) {
  return F::bilinear(x1, x2, param("weight"), param("bias"));
}
std::string Bilinear::extra_repr() const {
  return "in1_features=" + std::to_string(in1_features) + ", in2_features=" + std::to_string(in2_features) +
         ", out_features=" + std::to_string(out_features) + ", bias=" + pybool(own_parameters().items()[1].second.defined());
}

// ---- Flatten / Unflatten ------------------------------------------------------------------------
Flatten::Flatten(int64_t s, int64_t e) : Module("Flatten"), start_dim(s), end_dim(e) {}
std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
}
Unflatten::Unflatten(int64_t d, Shape s) : Module("Unflatten"), dim(d), sizes(std::move(s)) {}
std::string Unflatten::extra_repr() const {
  return "dim=" + std::to_string(dim) + ", unflattened_size=" + tuple_str(sizes);
}

// ---- pixel shuffle, Softmax2d, similarity and distance, PReLU ---------------------------------------
PixelShuffle::PixelShuffle(int64_t r) : Module("PixelShuffle"), upscale_factor(r) {}
std::string PixelShuffle::extra_repr() const { return "upscale_factor=" + std::to_string(upscale_factor); }
PixelUnshuffle::PixelUnshuffle(int64_t r) : Module("PixelUnshuffle"), downscale_factor(r) {}
std::string PixelUnshuffle::extra_repr() const { return "downscale_factor=" + std::to_string(downscale_factor); }
Tensor Softmax2d::forward(const Tensor& x) {
  KILN_CHECK(x.dim() == 3 || x.dim() == 4, Value, "Softmax2d",
             "Softmax2d: expected input to be 3D or 4D, got ", x.dim(), "D instead");
  return softmax(x, -3);
}
CosineSimilarity::CosineSimilarity(int64_t d, double e) : Module("CosineSimilarity"), dim(d), eps(e) {}
PairwiseDistance::PairwiseDistance(double p, double e, bool k) : Module("PairwiseDistance"), norm(p), eps(e), keepdim(k) {}
PReLU::PReLU(int64_t n, double i, std::optional<Dtype> dtype) : Module("PReLU"), num_parameters(n), init(i) {
  register_parameter("weight", empty({n}, dtype.value_or(default_dtype())));
  reset_parameters();
}
void PReLU::reset_parameters() {
  NoGradGuard ng;
  fill_(param("weight"), Scalar(init));
}
std::string PReLU::extra_repr() const { return "num_parameters=" + std::to_string(num_parameters); }

// ---- Embedding ----------------------------------------------------------------------------------
Embedding::Embedding(int64_t num, int64_t dim, std::optional<int64_t> pad, std::optional<double> max_norm,
                     double norm_type, bool scale_grad_by_freq, bool sparse, Dtype dtype)
    : Module("Embedding"), num_embeddings(num), embedding_dim(dim), max_norm(max_norm), norm_type(norm_type),
      scale_grad_by_freq(scale_grad_by_freq), sparse(sparse) {
  if (pad) {
    KILN_CHECK(*pad < num && *pad >= -num, Assertion, "Embedding", "Padding_idx must be within num_embeddings, got "
               "padding_idx=", *pad, " for num_embeddings=", num);
    padding_idx = *pad < 0 ? *pad + num : *pad;
  }
  register_parameter("weight", empty({num, dim}, opts(dtype)));
  reset_parameters();
}
void Embedding::reset_parameters() {
  init::normal_(weight());
  if (padding_idx) {
    NoGradGuard ng;
    fill_(select(weight(), 0, *padding_idx), 0);
  }
}
Tensor Embedding::forward(const Tensor& idx) {
  if (max_norm) {
    NoGradGuard ng;
    embedding_renorm_(weight(), idx, *max_norm, norm_type);
  }
  return embedding(weight(), idx, padding_idx.value_or(-1), scale_grad_by_freq, sparse);
}
std::string Embedding::extra_repr() const {
  std::string s = std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim);
  if (padding_idx) s += ", padding_idx=" + std::to_string(*padding_idx);
  if (max_norm) s += ", max_norm=" + pyfloat(*max_norm);
  if (norm_type != 2) s += ", norm_type=" + pyfloat(norm_type);
  if (scale_grad_by_freq) s += ", scale_grad_by_freq=True";
  if (sparse) s += ", sparse=True";
  return s;
}

// ---- LayerNorm / RMSNorm ------------------------------------------------------------------------
LayerNorm::LayerNorm(Shape ns, double eps, bool affine, bool bias, Dtype dtype)
    : Module("LayerNorm"), normalized_shape(std::move(ns)), eps(eps), elementwise_affine(affine) {
  register_parameter("weight", affine ? empty(normalized_shape, opts(dtype)) : Tensor());
  register_parameter("bias", affine && bias ? empty(normalized_shape, opts(dtype)) : Tensor());
  reset_parameters();
}
void LayerNorm::reset_parameters() {
  if (param("weight").defined()) init::ones_(param("weight"));
  if (param("bias").defined()) init::zeros_(param("bias"));
}
Tensor LayerNorm::forward(const Tensor& x) {
  return F::layer_norm(x, normalized_shape, param("weight"), param("bias"), eps);
}
std::string LayerNorm::extra_repr() const {
  return tuple_str(normalized_shape) + ", eps=" + pyfloat(eps) + ", elementwise_affine=" + pybool(elementwise_affine) +
         ", bias=" + pybool(own_parameters().items()[1].second.defined());
}

RMSNorm::RMSNorm(Shape ns, std::optional<double> eps, bool affine, Dtype dtype)
    : Module("RMSNorm"), normalized_shape(std::move(ns)), eps(eps), elementwise_affine(affine) {
  register_parameter("weight", affine ? empty(normalized_shape, opts(dtype)) : Tensor());
  reset_parameters();
}
void RMSNorm::reset_parameters() {
  if (param("weight").defined()) init::ones_(param("weight"));
}
Tensor RMSNorm::forward(const Tensor& x) { return F::rms_norm(x, normalized_shape, param("weight"), eps); }
std::string RMSNorm::extra_repr() const {
  return tuple_str(normalized_shape) + ", eps=" + (eps ? pyfloat(*eps) : "None") +
         ", elementwise_affine=" + pybool(elementwise_affine);
}

// ---- Dropout ------------------------------------------------------------------------------------
Dropout::Dropout(double p, bool inplace) : Module("Dropout"), p(p), inplace(inplace) {
  KILN_CHECK(p >= 0 && p <= 1, Value, "Dropout", "dropout probability has to be between 0 and 1, but got ", p);
}
std::string Dropout::extra_repr() const { return "p=" + pyfloat(p) + ", inplace=" + pybool(inplace); }

FeatureDropout::FeatureDropout(std::string name, int64_t spatial_dims, double p, bool inplace)
    : Module(std::move(name)), spatial_dims(spatial_dims), p(p), inplace(inplace) {
  KILN_CHECK(p >= 0 && p <= 1, Value, this->name().c_str(), "dropout probability has to be between 0 and 1, but got ", p);
}
Tensor FeatureDropout::forward(const Tensor& x) {
  return spatial_dims == 1 ? F::dropout1d(x, p, is_training())
         : spatial_dims == 2 ? F::dropout2d(x, p, is_training())
                             : F::dropout3d(x, p, is_training());
}
std::string FeatureDropout::extra_repr() const { return "p=" + pyfloat(p) + ", inplace=" + pybool(inplace); }

// ---- padding ------------------------------------------------------------------------------------
Pad::Pad(std::string name, int64_t dims, std::string mode, Shape padding, double value)
    : Module(std::move(name)), dims(dims), mode(std::move(mode)), padding(std::move(padding)), value(value) {}
Pad::Pad(std::string name, int64_t dims, std::string mode, int64_t padding, double value)
    : Pad(std::move(name), dims, std::move(mode), Shape(static_cast<size_t>(2 * dims), padding), value) {}
Tensor Pad::forward(const Tensor& x) {
  if (mode == "circular")  // (torch's CircularPadNd checks the rank itself)
    KILN_CHECK(x.dim() == dims + 1 || x.dim() == dims + 2, Value, name().c_str(), "expected ", dims + 1, "D or ",
               dims + 2, "D input (got ", x.dim(), "D input)");
  return pad(x, padding, mode, mode == "constant" ? std::optional<double>(value) : std::nullopt);
}
std::string Pad::extra_repr() const {
  if (name().rfind("ConstantPad", 0) == 0) return "padding=" + tuple_str(padding) + ", value=" + pyfloat(value);
  return tuple_str(padding);
}

// ---- activations --------------------------------------------------------------------------------
ActivationSpec activation_spec(const std::string& name, const std::vector<double>& a, bool inplace,
                               const std::string& approximate) {
  auto arg = [&](size_t i, double dflt) { return i < a.size() ? a[i] : dflt; };
  std::string ip = inplace ? "inplace=True" : "";
  auto join = [&](std::string s) { return ip.empty() ? s : (s.empty() ? ip : s + ", " + ip); };
  using Fn = std::function<Tensor(const Tensor&)>;
  auto mk = [&](Fn f, std::string extra = "") { return ActivationSpec{std::move(f), join(extra)}; };
  if (name == "ReLU") return mk([](const Tensor& x) { return relu(x); });
  if (name == "ReLU6") return mk([](const Tensor& x) { return relu6(x); });
  if (name == "SiLU") return mk([](const Tensor& x) { return silu(x); });
  if (name == "Mish") return mk([](const Tensor& x) { return mish(x); });
  if (name == "Sigmoid") return mk([](const Tensor& x) { return sigmoid(x); });
  if (name == "Tanh") return mk([](const Tensor& x) { return tanh(x); });
  if (name == "Hardsigmoid") return mk([](const Tensor& x) { return hardsigmoid(x); });
  if (name == "Hardswish") return mk([](const Tensor& x) { return hardswish(x); });
  if (name == "LogSigmoid") return mk([](const Tensor& x) { return logsigmoid(x); });
  if (name == "Softsign") return mk([](const Tensor& x) { return softsign(x); });
  if (name == "SELU") return mk([](const Tensor& x) { return selu(x); });
  if (name == "LeakyReLU") {
    double s = arg(0, 0.01);
    return mk([s](const Tensor& x) { return leaky_relu(x, s); }, "negative_slope=" + pyfloat(s));
  }
  if (name == "ELU") {
    double al = arg(0, 1.0);
    return mk([al](const Tensor& x) { return elu(x, al); }, "alpha=" + pyfloat(al));
  }
  if (name == "CELU") {
    double al = arg(0, 1.0);
    return mk([al](const Tensor& x) { return celu(x, al); }, "alpha=" + pyfloat(al));
  }
  if (name == "GELU") {
    std::string ap = approximate;
    return mk([ap](const Tensor& x) { return gelu(x, ap); }, "approximate='" + ap + "'");
  }
  if (name == "Softplus") {
    double b = arg(0, 1.0), t = arg(1, 20.0);
    return mk([b, t](const Tensor& x) { return softplus(x, b, t); }, "beta=" + pyfloat(b) + ", threshold=" + pyfloat(t));
  }
  if (name == "Hardtanh") {
    double lo = arg(0, -1.0), hi = arg(1, 1.0);
    return mk([lo, hi](const Tensor& x) { return hardtanh(x, lo, hi); },
              "min_val=" + pyfloat(lo) + ", max_val=" + pyfloat(hi));
  }
  if (name == "Tanhshrink") return mk([](const Tensor& x) { return tanhshrink(x); });
  if (name == "Hardshrink" || name == "Softshrink") {
    double l = arg(0, 0.5);
    Fn f = name == "Hardshrink" ? Fn([l](const Tensor& x) { return hardshrink(x, l); })
                                : Fn([l](const Tensor& x) { return softshrink(x, l); });
    return ActivationSpec{f, pyfloat(l)};
  }
  if (name == "GLU") {
    int64_t d = static_cast<int64_t>(arg(0, -1));
    return ActivationSpec{[d](const Tensor& x) { return glu(x, d); }, "dim=" + std::to_string(d)};
  }
  if (name == "Threshold") {
    KILN_CHECK(a.size() >= 2, Value, "Threshold", "Threshold needs threshold and value");
    double t = a[0], v = a[1];
    return mk([t, v](const Tensor& x) { return threshold(x, t, v); }, "threshold=" + pyfloat(t) + ", value=" + pyfloat(v));
  }
  if (name == "Softmax" || name == "LogSoftmax" || name == "Softmin") {
    KILN_CHECK(!a.empty(), Value, name.c_str(), name, " needs dim");
    int64_t d = static_cast<int64_t>(a[0]);
    Fn f = name == "Softmax"      ? Fn([d](const Tensor& x) { return softmax(x, d); })
           : name == "LogSoftmax" ? Fn([d](const Tensor& x) { return log_softmax(x, d); })
                                  : Fn([d](const Tensor& x) { return softmax(neg(x), d); });
    return ActivationSpec{f, "dim=" + std::to_string(d)};
  }
  KILN_FAIL(Value, "make_activation", "unknown activation ", name);
}

std::shared_ptr<Activation> make_activation(const std::string& name, const std::vector<double>& a, bool inplace,
                                            const std::string& approximate) {
  return std::make_shared<Activation>(name, a, inplace, approximate);
}

}  // namespace kiln::nn
