// kiln::nn::functional — torch.nn.functional in C++ (layers are built from these).
#pragma once

#include <optional>
#include <string>

#include "kiln/ops/ops.h"

namespace kiln::nn::functional {

// y = x W^T + b
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// y = x1^T A x2 + b, weight (out, in1, in2)
Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const Tensor& bias = Tensor());
// Normalises over the trailing `normalized_shape` dims (fused kernel; float32/float64, half via float32).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);
// Zeroes elements with probability p and scales the rest by 1/(1-p) when training.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);

}  // namespace kiln::nn::functional

namespace kiln {
namespace F = nn::functional;
}
