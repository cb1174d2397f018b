// kiln::nn::utils — gradient clipping and parameter/vector conversion (torch.nn.utils).
#pragma once

#include <string>

#include "kiln/ops/ops.h"

namespace kiln::nn::utils {

// Scales the gradients in place so that their total norm is at most max_norm; returns the norm.
Tensor clip_grad_norm_(const TensorList& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
void clip_grad_value_(const TensorList& params, double clip_value);
Tensor parameters_to_vector(const TensorList& params);
void vector_to_parameters(const Tensor& vec, const TensorList& params);

namespace rnn {
// torch.nn.utils.rnn.pad_sequence: (T_max, B, *) — (B, T_max, *) with batch_first — filled with
// padding_value, each sequence copied in at the start ("right") or the end ("left") of its row; the
// dtype is the first sequence's.
Tensor pad_sequence(const TensorList& sequences, bool batch_first = false, double padding_value = 0.0,
                    const std::string& padding_side = "right");
}  // namespace rnn

}  // namespace kiln::nn::utils
