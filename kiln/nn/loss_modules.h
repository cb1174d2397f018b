// torch.nn's loss modules over kiln::nn::functional (kiln/nn/loss.h), with torch's constructor
// arguments and defaults; the weights torch registers as buffers are buffers here too.
//   nn::CrossEntropyLoss ce({}, -100, "mean", 0.1);  Tensor loss = ce.forward(logits, target);
#pragma once

#include <string>
#include <utility>

#include "kiln/nn/loss.h"
#include "kiln/nn/module.h"

namespace kiln::nn {

namespace F = functional;

#define KILN_REDUCTION_LOSS(Name, fn)                                                        \
  class Name : public Module {                                                               \
   public:                                                                                   \
    explicit Name(std::string reduction = "mean") : Module(#Name), reduction(std::move(reduction)) {} \
    Tensor forward(const Tensor& input, const Tensor& target) { return F::fn(input, target, reduction); } \
    std::string reduction;                                                                   \
  };
KILN_REDUCTION_LOSS(MSELoss, mse_loss)
KILN_REDUCTION_LOSS(L1Loss, l1_loss)
KILN_REDUCTION_LOSS(SoftMarginLoss, soft_margin_loss)
KILN_REDUCTION_LOSS(MultiLabelMarginLoss, multilabel_margin_loss)
#undef KILN_REDUCTION_LOSS

class SmoothL1Loss : public Module {
 public:
  explicit SmoothL1Loss(std::string reduction = "mean", double beta = 1.0)
      : Module("SmoothL1Loss"), reduction(std::move(reduction)), beta(beta) {}
  Tensor forward(const Tensor& input, const Tensor& target) {
    return F::smooth_l1_loss(input, target, reduction, beta);
  }
  std::string reduction;
  double beta;
};

class HuberLoss : public Module {
 public:
  explicit HuberLoss(std::string reduction = "mean", double delta = 1.0)
      : Module("HuberLoss"), reduction(std::move(reduction)), delta(delta) {}
  Tensor forward(const Tensor& input, const Tensor& target) {
    return F::huber_loss(input, target, reduction, delta);
  }
  std::string reduction;
  double delta;
};

class KLDivLoss : public Module {
 public:
  explicit KLDivLoss(std::string reduction = "mean", bool log_target = false)
      : Module("KLDivLoss"), reduction(std::move(reduction)), log_target(log_target) {}
  Tensor forward(const Tensor& input, const Tensor& target) {
    return F::kl_div(input, target, reduction, log_target);
  }
  std::string reduction;
  bool log_target;
};

class BCELoss : public Module {
 public:
  explicit BCELoss(const Tensor& weight = {}, std::string reduction = "mean")
      : Module("BCELoss"), reduction(std::move(reduction)) {
    register_buffer("weight", weight);
  }
  Tensor forward(const Tensor& input, const Tensor& target) {
    return F::binary_cross_entropy(input, target, buffer("weight"), reduction);
  }
  std::string reduction;
};

class BCEWithLogitsLoss : public Module {
 public:
  explicit BCEWithLogitsLoss(const Tensor& weight = {}, std::string reduction = "mean",
                             const Tensor& pos_weight = {})
      : Module("BCEWithLogitsLoss"), reduction(std::move(reduction)) {
    register_buffer("weight", weight);
    register_buffer("pos_weight", pos_weight);
  }
  Tensor forward(const Tensor& input, const Tensor& target) {
    return F::binary_cross_entropy_with_logits(input, target, buffer("weight"), reduction,
                                               buffer("pos_weight"));
  }
  std::string reduction;
};

class CrossEntropyLoss : public Module {
 public:
  explicit CrossEntropyLoss(const Tensor& weight = {}, int64_t ignore_index = -100,
                            std::string reduction = "mean", double label_smoothing = 0.0)
      : Module("CrossEntropyLoss"),
        ignore_index(ignore_index),
        reduction(std::move(reduction)),
        label_smoothing(label_smoothing) {
    register_buffer("weight", weight);
  }
  Tensor forward(const Tensor& input, const Tensor& target) {
    return F::cross_entropy(input, target, buffer("weight"), ignore_index, reduction, label_smoothing);
  }
  int64_t ignore_index;
  std::string reduction;
  double label_smoothing;
};

class NLLLoss : public Module {
 public:
  explicit NLLLoss(const Tensor& weight = {}, int64_t ignore_index = -100, std::string reduction = "mean")
      : Module("NLLLoss"), ignore_index(ignore_index), reduction(std::move(reduction)) {
    register_buffer("weight", weight);
  }
  Tensor forward(const Tensor& input, const Tensor& target) {
    return F::nll_loss(input, target, buffer("weight"), ignore_index, reduction);
  }
  int64_t ignore_index;
  std::string reduction;
};

#define KILN_MARGIN_LOSS(Name, fn)                                                                \
  class Name : public Module {                                                                    \
   public:                                                                                        \
    explicit Name(double margin = 0.0, std::string reduction = "mean")                            \
        : Module(#Name), margin(margin), reduction(std::move(reduction)) {}                       \
    Tensor forward(const Tensor& input1, const Tensor& input2, const Tensor& target) {            \
      return F::fn(input1, input2, target, margin, reduction);                                     \
    }                                                                                             \
    double margin;                                                                                \
    std::string reduction;                                                                        \
  };
KILN_MARGIN_LOSS(CosineEmbeddingLoss, cosine_embedding_loss)
KILN_MARGIN_LOSS(MarginRankingLoss, margin_ranking_loss)
#undef KILN_MARGIN_LOSS

class CTCLoss : public Module {
 public:
  explicit CTCLoss(int64_t blank = 0, std::string reduction = "mean", bool zero_infinity = false)
      : Module("CTCLoss"), blank(blank), reduction(std::move(reduction)), zero_infinity(zero_infinity) {}
  Tensor forward(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                 const Tensor& target_lengths) {
    return F::ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity);
  }
  int64_t blank;
  std::string reduction;
  bool zero_infinity;
};

class PoissonNLLLoss : public Module {
 public:
  explicit PoissonNLLLoss(bool log_input = true, bool full = false, double eps = 1e-8,
                          std::string reduction = "mean")
      : Module("PoissonNLLLoss"), log_input(log_input), full(full), eps(eps), reduction(std::move(reduction)) {}
  Tensor forward(const Tensor& input, const Tensor& target) {
    return F::poisson_nll_loss(input, target, log_input, full, eps, reduction);
  }
  bool log_input, full;
  double eps;
  std::string reduction;
};

class GaussianNLLLoss : public Module {
 public:
  explicit GaussianNLLLoss(bool full = false, double eps = 1e-6, std::string reduction = "mean")
      : Module("GaussianNLLLoss"), full(full), eps(eps), reduction(std::move(reduction)) {}
  Tensor forward(const Tensor& input, const Tensor& target, const Tensor& var) {
    return F::gaussian_nll_loss(input, target, var, full, eps, reduction);
  }
  Tensor forward(const Tensor& input, const Tensor& target, double var) {
    return F::gaussian_nll_loss(input, target, var, full, eps, reduction);
  }
  bool full;
  double eps;
  std::string reduction;
};

class HingeEmbeddingLoss : public Module {
 public:
  explicit HingeEmbeddingLoss(double margin = 1.0, std::string reduction = "mean")
      : Module("HingeEmbeddingLoss"), margin(margin), reduction(std::move(reduction)) {}
  Tensor forward(const Tensor& input, const Tensor& target) {
    return F::hinge_embedding_loss(input, target, margin, reduction);
  }
  double margin;
  std::string reduction;
};

class MultiLabelSoftMarginLoss : public Module {
 public:
  explicit MultiLabelSoftMarginLoss(const Tensor& weight = {}, std::string reduction = "mean")
      : Module("MultiLabelSoftMarginLoss"), reduction(std::move(reduction)) {
    register_buffer("weight", weight);
  }
  Tensor forward(const Tensor& input, const Tensor& target) {
    return F::multilabel_soft_margin_loss(input, target, buffer("weight"), reduction);
  }
  std::string reduction;
};

// p must be 1 or 2 and weight one-dimensional (ValueError at construction, as torch).
class MultiMarginLoss : public Module {
 public:
  explicit MultiMarginLoss(int64_t p = 1, double margin = 1.0, const Tensor& weight = {},
                           std::string reduction = "mean");
  Tensor forward(const Tensor& input, const Tensor& target) {
    return F::multi_margin_loss(input, target, static_cast<double>(p), margin, buffer("weight"), reduction);
  }
  int64_t p;
  double margin;
  std::string reduction;
};

// margin must be > 0 (ValueError at construction).
class TripletMarginLoss : public Module {
 public:
  explicit TripletMarginLoss(double margin = 1.0, double p = 2.0, double eps = 1e-6, bool swap = false,
                             std::string reduction = "mean");
  Tensor forward(const Tensor& anchor, const Tensor& positive, const Tensor& negative) {
    return F::triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction);
  }
  double margin, p, eps;
  bool swap;
  std::string reduction;
};

// distance_function empty: pairwise_distance (torch's PairwiseDistance()). margin must be > 0.
class TripletMarginWithDistanceLoss : public Module {
 public:
  explicit TripletMarginWithDistanceLoss(F::DistanceFunction distance_function = {}, double margin = 1.0,
                                         bool swap = false, std::string reduction = "mean");
  Tensor forward(const Tensor& anchor, const Tensor& positive, const Tensor& negative) {
    return F::triplet_margin_with_distance_loss(anchor, positive, negative, distance_function, margin, swap,
                                                reduction);
  }
  F::DistanceFunction distance_function;
  double margin;
  bool swap;
  std::string reduction;
};

}  // namespace kiln::nn
