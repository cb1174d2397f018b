// kiln::nn::utils — gradient clipping and parameter/vector conversion (torch.nn.utils).
#pragma once

#include "kiln/ops/ops.h"

namespace kiln::nn::utils {

// Scales the gradients in place so that their total norm is at most max_norm; returns the norm.
Tensor clip_grad_norm_(const TensorList& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
void clip_grad_value_(const TensorList& params, double clip_value);
Tensor parameters_to_vector(const TensorList& params);
void vector_to_parameters(const Tensor& vec, const TensorList& params);

}  // namespace kiln::nn::utils
