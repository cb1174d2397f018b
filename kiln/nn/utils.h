// kiln::nn::utils — gradient clipping, parameter/vector conversion and sequence packing (torch.nn.utils).
#pragma once

#include <optional>
#include <string>
#include <tuple>

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

// torch.nn.utils.rnn.PackedSequence (packed_sequence.cpp): the time-major rows of sequences sorted by
// decreasing length, batch_sizes[t] (int64) sequences still running at step t; sorted_indices /
// unsorted_indices (undefined when the input was already sorted) map between the caller's batch
// order and the sorted one. The recurrent modules take it in place of a padded input.
struct PackedSequence {
  Tensor data, batch_sizes, sorted_indices, unsorted_indices;
};
PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths, bool batch_first = false,
                                    bool enforce_sorted = true);
// (padded, lengths): (T, B, *) or (B, T, *), T = total_length when given.
std::tuple<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first = false,
                                               double padding_value = 0.0,
                                               std::optional<int64_t> total_length = std::nullopt);
PackedSequence pack_sequence(const TensorList& sequences, bool enforce_sorted = true);
TensorList unpack_sequence(const PackedSequence& packed);
TensorList unpad_sequence(const Tensor& padded, const Tensor& lengths, bool batch_first = false);
Tensor invert_permutation(const Tensor& permutation);
}  // namespace rnn

}  // namespace kiln::nn::utils
