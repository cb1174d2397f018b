// torch.nn.AdaptiveLogSoftmaxWithLoss (Grave et al., "Efficient softmax approximation for GPUs"):
// the classes below cutoffs[0] (the shortlist) and one entry per tail cluster share a head
// Linear; a target in cluster i adds the log-probability of its class within the cluster, from
// that cluster's two bias-free Linears (in_features -> in_features / div_value^(i+1) -> cluster
// size). torch's arguments, checks, errors, submodule names (head, tail.i.0, tail.i.1) and
// computation order, written with kiln ops, so autograd, the modes and export see its parts.
//   nn::AdaptiveLogSoftmaxWithLoss asm_(64, 1000, {100, 500});
//   auto [out, loss] = asm_.forward(hidden, target);  // out: the targets' log-probabilities
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/nn/layers.h"

namespace kiln::nn {

struct ASMoutput {
  Tensor output;  // (N) or (): log-probability of each target
  Tensor loss;    // (): mean negative log-likelihood
};

class AdaptiveLogSoftmaxWithLoss : public Module {
 public:
  // cutoffs: unique, increasing, each in [1, n_classes - 1] (ValueError otherwise, as torch).
  AdaptiveLogSoftmaxWithLoss(int64_t in_features, int64_t n_classes, std::vector<int64_t> cutoffs,
                             double div_value = 4.0, bool head_bias = false, Dtype dtype = Dtype::Undefined);
  // input (N, in_features) with target (N), or (in_features) with a 0-dim target.
  ASMoutput forward(const Tensor& input, const Tensor& target);
  // (N, in_features) -> (N, n_classes): the log of the full distribution.
  Tensor log_prob(const Tensor& input);
  // (N, in_features) -> (N): the most likely class (log_prob(input).argmax(1), computed for the rows
  // whose head argmax falls in a tail cluster only).
  Tensor predict(const Tensor& input);
  void reset_parameters();

  int64_t in_features, n_classes;
  std::vector<int64_t> cutoffs;  // the argument, then n_classes
  double div_value;
  bool head_bias;
  int64_t shortlist_size, n_clusters, head_size;
  std::shared_ptr<Linear> head;
  std::shared_ptr<ModuleList> tail;  // of Sequential(Linear, Linear)

 private:
  Tensor full_log_prob(const Tensor& input, const Tensor& head_output);
  Tensor cluster(int64_t i, const Tensor& input);
};

}  // namespace kiln::nn
