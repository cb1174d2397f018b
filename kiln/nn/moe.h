// A mixture-of-experts feed-forward layer built on the grouped matrix multiply (issue 10): a linear
// router scores each token against every expert, the top k experts of each token (softmax over the
// scores, renormalised over the chosen k, as Mixtral does) each run a SiLU MLP on it, and their
// outputs are summed with those weights. The tokens are sorted by expert so that the two expert
// projections are each one _grouped_mm over all experts (offsets from the per-expert counts), then
// scattered back with index_add; every step is a differentiable kiln op.
#pragma once

#include "kiln/nn/module.h"

namespace kiln::nn {

class MixtureOfExperts : public Module {
 public:
  // Parameters: router (num_experts, dim), w1 (num_experts, dim, hidden), w2 (num_experts, hidden, dim).
  MixtureOfExperts(int64_t dim, int64_t hidden, int64_t num_experts, int64_t top_k = 2, Dtype dtype = Dtype::Undefined);
  // x (..., dim) -> (..., dim)
  Tensor forward(const Tensor& x);
  void reset_parameters();
  std::string extra_repr() const override;
  int64_t dim, hidden, num_experts, top_k;
};

}  // namespace kiln::nn
