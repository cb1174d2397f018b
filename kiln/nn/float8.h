// float8 training and inference helpers (issue 10): amax -> scale -> quantise, per tensor or per row,
// and a drop-in for nn::Linear whose product runs in float8 (_scaled_mm, row-wise scales).
#pragma once

#include <tuple>

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

}  // namespace nn
}  // namespace kiln
