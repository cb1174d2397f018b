#include "kiln/nn/float8.h"

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/nn/init.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

double float8_max(Dtype d) {
  KILN_CHECK(is_float8(d), Type, "quantize_float8", "expected a float8 dtype, got ", dtype_name(d));
  return d == kFloat8_e4m3fn ? 448.0 : 57344.0;
}

}  // namespace

std::tuple<Tensor, Tensor> quantize_float8(const Tensor& x, Dtype dtype, bool rowwise) {
  const double fmax = float8_max(dtype);
  KILN_CHECK(x.is_floating_point() && !is_float8(x.dtype()), Type, "quantize_float8",
             "expected a float tensor wider than float8, got ", dtype_name(x.dtype()));
  KILN_CHECK(!rowwise || x.dim() >= 1, Runtime, "quantize_float8", "row-wise scales need at least one dimension");
  Tensor scale;
  {
    NoGradGuard no_grad;
    Tensor a = to_dtype(abs(x), kFloat32);
    Tensor amax_ = rowwise ? amax(a, Shape{-1}, true) : amax(a);
    scale = div(clamp(amax_, Scalar(1e-12), std::nullopt), scalar_tensor(Scalar(fmax), kFloat32));
  }
  Tensor q = to_dtype(clamp(div(x, scale), Scalar(-fmax), Scalar(fmax)), dtype);
  return {q, scale};
}

Tensor dequantize_float8(const Tensor& q, const Tensor& scale, Dtype dtype) {
  return to_dtype(mul(to_dtype(q, kFloat32), scale), dtype);
}

namespace nn {

Float8Linear::Float8Linear(int64_t in, int64_t out, bool bias, Dtype dtype, Dtype f8)
    : Module("Float8Linear"), in_features(in), out_features(out), float8_dtype(f8) {
  float8_max(f8);
  TensorOptions o(dtype == Dtype::Undefined ? default_dtype() : dtype);
  register_parameter("weight", empty({out, in}, o));
  register_parameter("bias", bias ? empty({out}, o) : Tensor());
  reset_parameters();
}

void Float8Linear::reset_parameters() {  // nn::Linear's initialisation
  KILN_CHECK(!frozen(), Runtime, "Float8Linear", "reset_parameters() on a frozen layer (its weight is float8)");
  init::kaiming_uniform_(param("weight"), std::sqrt(5.0));
  if (param("bias").defined()) {
    const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
    init::uniform_(param("bias"), -bound, bound);
  }
}

void Float8Linear::freeze() {
  if (frozen()) return;
  NoGradGuard no_grad;
  auto [q, s] = quantize_float8(param("weight"), float8_dtype, true);
  register_buffer("weight_f8", q);
  register_buffer("weight_scale", s);
  register_parameter("weight", Tensor());
}

Tensor Float8Linear::forward(const Tensor& x) {
  KILN_CHECK(x.dim() >= 1 && x.sizes().back() == in_features, Runtime, "Float8Linear", "expected input with last "
             "dimension ", in_features, ", got ", x.sizes());
  Shape out_shape = x.sizes();
  out_shape.back() = out_features;
  auto [xq, sx] = quantize_float8(reshape(x, {-1, in_features}), float8_dtype, true);  // (T, in), (T, 1)
  Tensor wq, sw;
  if (frozen()) {
    wq = buffer("weight_f8"), sw = buffer("weight_scale");
  } else {
    std::tie(wq, sw) = quantize_float8(param("weight"), float8_dtype, true);  // (out, in), (out, 1)
  }
  Tensor y = _scaled_mm(xq, t(wq), sx, t(sw), param("bias"), Tensor(), x.dtype());
  return reshape(y, out_shape);
}

std::string Float8Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
         ", bias=" + (own_parameters().items()[1].second.defined() ? "True" : "False") + ", float8_dtype=" +
         std::string(dtype_name(float8_dtype)) + (frozen() ? ", frozen" : "");
}

}  // namespace nn
}  // namespace kiln
