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

namespace functional {

Tensor scaled_mm(const Tensor& mat_a, const Tensor& mat_b, const Tensor& scale_a, ScalingType scale_recipe_a,
                 const Tensor& scale_b, ScalingType scale_recipe_b, const ScaledMMOptions& o) {
  constexpr const char* op = "scaled_mm";
  KILN_CHECK(!(o.swizzle_a && o.swizzle_b &&
               (*o.swizzle_a == SwizzleType::SWIZZLE_32_4_4 || *o.swizzle_b == SwizzleType::SWIZZLE_32_4_4)),
             Value, op, "CPU does not support swizzle.");  // torch's check: both given, one a swizzle
  KILN_CHECK(mat_a.dim() == 2, Value, op, "mat_a must be a matrix");
  KILN_CHECK(mat_b.dim() == 2, Value, op, "mat_b must be a matrix");
  const int64_t M = mat_a.sizes()[0], K = mat_a.sizes()[1], N = mat_b.sizes()[1];
  KILN_CHECK(K == mat_b.sizes()[0], Value, op, "mat_a and mat_b shapes cannot be multiplied (", M, "x", K, " and ",
             mat_b.sizes()[0], "x", N, ")");
  const bool tensorwise = scale_recipe_a == ScalingType::TensorWise;
  KILN_CHECK(scale_recipe_a == scale_recipe_b && (tensorwise || scale_recipe_a == ScalingType::RowWise), Value, op,
             "Invalid scaling configuration.\n- For TensorWise scaling, a and b should be float8, scales should be "
             "float and singletons.\n- For RowWise scaling, a and b should be float8, scales should be float, scale_a "
             "should be (", M, ", 1) and scale_b should be (1, ", N, "), and both should be contiguous.\nGot "
             "mat_a.dtype()=", dtype_name(mat_a.dtype()), ", scale_a.size()=", scale_a.sizes(), ", mat_b.dtype()=",
             dtype_name(mat_b.dtype()), " and scale_b.size()=", scale_b.sizes());
  Tensor sa = scale_a, sb = scale_b;
  if (tensorwise) {
    KILN_CHECK(sa.numel() == 1 && sa.dtype() == kFloat32, Value, op, "scale_a must have 1 Float element");
    KILN_CHECK(sb.numel() == 1 && sb.dtype() == kFloat32, Value, op, "scale_b must have 1 Float element");
    sa = reshape(sa, {}), sb = reshape(sb, {});  // (_scaled_mm takes at most 2 dims)
  } else {
    KILN_CHECK(sa.dim() > 0 && sb.dim() > 0, Index, op, "Dimension specified as 0 but tensor has no dimensions");
    KILN_CHECK(sa.dim() > 1 && sb.dim() > 1, Index, op,
               "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
  }
  const auto& cd = o.contraction_dim;
  KILN_CHECK(cd.empty() || (cd.size() == 2 && cd[0] == 1 && cd[1] == 0), Value, op,
             "mat_a and mat_b shapes cannot be multiplied (", M, "x", K, " and ", K, "x", N,
             ") with contraction dims mat_a: ", cd.empty() ? std::string("None") : std::to_string(cd[0]),
             ", mat_b: ", cd.size() < 2 ? std::string("None") : std::to_string(cd[1]));
  KILN_CHECK(!o.bias.defined() || o.bias.numel() == N, Value, op, "Bias must be size ", N, " but got ",
             o.bias.defined() ? o.bias.numel() : 0);
  if (K == 0) return zeros({M, N}, TensorOptions().dtype(o.output_dtype.value_or(mat_a.dtype())));
  return _scaled_mm(mat_a, mat_b, sa, sb, o.bias, Tensor(), o.output_dtype, o.use_fast_accum);
}

}  // namespace functional
}  // namespace nn
}  // namespace kiln
