// float8 training and inference helpers (issue 10): amax -> scale -> quantise, per tensor or per row,
// and a drop-in for nn::Linear whose product runs in float8 (_scaled_mm, row-wise scales).
#pragma once

#include <optional>
#include <tuple>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln {

// (q, scale) with q = (x / scale) in `dtype` (float8_e4m3fn or float8_e5m2, saturating to its largest
// finite value) and scale = amax(|x|) / that value, float32: one element (rowwise = false, shape ())
// or one per row of the last dimension (rowwise = true, shape (..., 1)). amax is clamped below at
// 1e-12 so that zeros quantise to zeros. The scale carries no gradient; q's gradient passes to x
// unchanged, divided by the scale (the cast is the identity for the gradient).
std::tuple<Tensor, Tensor> quantize_float8(const Tensor& x, Dtype dtype = kFloat8_e4m3fn, bool rowwise = false);
// q * scale in `dtype`.
Tensor dequantize_float8(const Tensor& q, const Tensor& scale, Dtype dtype = kFloat32);

namespace nn {

// y = x W^T + b with x and W quantised to float8 per row (x: per token, W: per output feature) and
// multiplied by _scaled_mm, the output in x's dtype. Training keeps W as a high-precision master
// parameter (gradients reach it through the quantisation); freeze() replaces it by the float8 weight
// and its scales (buffers `weight_f8`, `weight_scale`: one byte per weight) for inference.
class Float8Linear : public Module {
 public:
  Float8Linear(int64_t in_features, int64_t out_features, bool bias = true, Dtype dtype = Dtype::Undefined,
               Dtype float8_dtype = kFloat8_e4m3fn);
  Tensor forward(const Tensor& x);
  void reset_parameters();
  void freeze();
  bool frozen() const { return has_buffer("weight_f8"); }
  std::string extra_repr() const override;
  int64_t in_features, out_features;
  Dtype float8_dtype;
};

namespace functional {

// torch.nn.functional.ScalingType / SwizzleType (the same values). The CPU takes TensorWise and RowWise
// scales, and no swizzle.
enum class ScalingType : int {
  TensorWise = 0,
  RowWise = 1,
  BlockWise1x16 = 2,
  BlockWise1x32 = 3,
  BlockWise1x128 = 4,
  BlockWise128x128 = 5
};
enum class SwizzleType : int { NO_SWIZZLE = 0, SWIZZLE_32_4_4 = 1 };

// scaled_mm's keyword arguments, with torch's defaults.
struct ScaledMMOptions {
  std::optional<SwizzleType> swizzle_a, swizzle_b;
  Tensor bias;
  std::optional<Dtype> output_dtype = kBFloat16;  // nullopt: mat_a's float8 dtype
  std::vector<int64_t> contraction_dim;           // {} or {1, 0}
  bool use_fast_accum = false;
};

// torch.nn.functional.scaled_mm on the CPU: mat_a @ mat_b for float8 matrices with TensorWise (one
// float32 element each, any rank) or RowWise ((M, 1) and (1, N)) scales, on _scaled_mm
// (differentiable in mat_a, mat_b and the bias), with torch's checks and error classes; K = 0 gives
// zeros, the bias not added (as torch's).
Tensor scaled_mm(const Tensor& mat_a, const Tensor& mat_b, const Tensor& scale_a, ScalingType scale_recipe_a,
                 const Tensor& scale_b, ScalingType scale_recipe_b, const ScaledMMOptions& options = {});
// torch.nn.functional.grouped_mm: _grouped_mm (kiln/ops/ops.h) under its public name.
inline Tensor grouped_mm(const Tensor& mat_a, const Tensor& mat_b, const Tensor& offs = Tensor(),
                         const Tensor& bias = Tensor(), std::optional<Dtype> out_dtype = std::nullopt) {
  return _grouped_mm(mat_a, mat_b, offs, bias, out_dtype);
}

}  // namespace functional
}  // namespace nn
}  // namespace kiln
