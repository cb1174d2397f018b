// Loss functions with torch.nn.functional's semantics (reductions, dtype rules, errors).
//
// `reduction` is "none", "mean" or "sum" (kl_div also takes "batchmean"); anything else raises
// torch's ValueError. Class-index cross_entropy and nll_loss are fused table ops (one pass over the
// logits forward, one backward, double backward through a second table op); ctc_loss is a table op
// with an alpha/beta-recursion kernel pair; binary_cross_entropy is a pointwise table op (torch's
// clamped logs and gradient); the rest are composites of kiln ops.
#pragma once

#include <functional>
#include <string>

#include "kiln/nn/functional.h"

namespace kiln::nn::functional {

// input (N, C, d1, ...) or (C,) logits; target: class indices (N, d1, ...) / () as int64 or uint8,
// or class probabilities of input's shape. weight (C,) rescales classes; targets equal to
// ignore_index contribute nothing; 'mean' divides by the summed weights of the kept targets.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                     int64_t ignore_index = -100, const std::string& reduction = "mean",
                     double label_smoothing = 0.0);
// input: log-probabilities laid out as for cross_entropy; the same index, weight and ignore rules.
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                int64_t ignore_index = -100, const std::string& reduction = "mean");

// Elementwise regression losses; input and target broadcast. `weight` (input's shape) scales the
// elements: mse/l1 'mean' divide by sum(weight), huber 'mean' by the element count, as torch.
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                const Tensor& weight = Tensor());
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
               const Tensor& weight = Tensor());
// 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta = 0: l1_loss).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      const std::string& reduction = "mean", double beta = 1.0);
// 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta); the result has input's dtype.
Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                  double delta = 1.0, const Tensor& weight = Tensor());

// -w (t log x + (1 - t) log(1 - x)), each log clamped to >= -100; x and t in [0, 1], same shape.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const Tensor& weight = Tensor(), const std::string& reduction = "mean");
// The same on logits, in the stable form (1 - t) x - (1 + (pos_weight - 1) t) log_sigmoid(x).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight = Tensor(),
                                        const std::string& reduction = "mean",
                                        const Tensor& pos_weight = Tensor());
// target * (log target - input) (log_target: exp(target) * (target - input)); "batchmean" divides
// the sum by the batch size input.size(0).
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
              bool log_target = false);
// target 1: 1 - cos(x1, x2); target -1: max(0, cos - margin). x (N, D) with target (N,), or (D,)
// with a 0-dim target.
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             double margin = 0.0, const std::string& reduction = "mean");
// max(0, -target * (x1 - x2) + margin)
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           double margin = 0.0, const std::string& reduction = "mean");

// exp(x) - t x (log_input), else x - t log(x + eps); `full` adds Stirling's term
// t log t - t + 0.5 log(2 pi t) where t > 1.
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input = true, bool full = false,
                        double eps = 1e-8, const std::string& reduction = "mean");
// 0.5 (log v + (x - t)^2 / v) (+ 0.5 log 2 pi when `full`), v = max(var, eps) (var's gradient taken
// as if unclamped, torch's rule). var: input's shape, input's shape without its last dim, or one size
// differing by a 1; a number means that variance everywhere. Negative variances raise ValueError.
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var, bool full = false,
                         double eps = 1e-6, const std::string& reduction = "mean");
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, double var, bool full = false,
                         double eps = 1e-6, const std::string& reduction = "mean");
// x where target == 1, max(0, margin - x) where target == -1 (other targets: both terms).
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin = 1.0,
                            const std::string& reduction = "mean");
// log(1 + exp(-target x)), in x's shape and dtype.
Tensor soft_margin_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
// -(t log_sigmoid(x) + (1 - t) log_sigmoid(-x)) * weight, averaged over the last (class) dim.
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                                   const std::string& reduction = "mean");
// Per sample: sum over classes d != y of weight[y] max(0, margin - x[y] + x[d])^p / C, p 1 or 2.
// input (N, C), (C,) or 0-dim (float32 / float64); target int64 (N,) / (1,) / ().
Tensor multi_margin_loss(const Tensor& input, const Tensor& target, double p = 1, double margin = 1.0,
                         const Tensor& weight = Tensor(), const std::string& reduction = "mean");
// Per sample: sum over listed targets j and unlisted classes d of max(0, 1 - x[j] + x[d]) / C. target
// int64 of input's shape (N, C) or (C,): class indices, the list ending at the first -1.
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
// max(0, margin + d(a, p) - d(a, n)), d = pairwise_distance(., ., p, eps); `swap` uses
// min(d(a, n), d(p, n)). margin must be > 0.
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           double margin = 1.0, double p = 2.0, double eps = 1e-6, bool swap = false,
                           const std::string& reduction = "mean");
// torch.triplet_margin_loss (the op under F's): any margin, torch's integer reduction (1 mean, 2 sum,
// any other none).
Tensor triplet_margin_loss_op(const Tensor& anchor, const Tensor& positive, const Tensor& negative, double margin,
                              double p, double eps, bool swap, int64_t reduction);
// The same with any distance (empty: pairwise_distance).
using DistanceFunction = std::function<Tensor(const Tensor&, const Tensor&)>;
Tensor triplet_margin_with_distance_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                                         const DistanceFunction& distance_function = {}, double margin = 1.0,
                                         bool swap = false, const std::string& reduction = "mean");

// Connectionist temporal classification. log_probs (T, N, C) or (T, C); targets padded (N, S) or
// concatenated 1-D; one input and one target length per batch entry. 'mean' divides each loss by
// its target length (at least 1) before averaging; zero_infinity replaces infinite losses (and
// their gradients) by zero. Gradients follow torch: they assume log_probs are log-softmax outputs.
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Shape& input_lengths,
                const Shape& target_lengths, int64_t blank = 0,
                const std::string& reduction = "mean", bool zero_infinity = false);
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank = 0,
                const std::string& reduction = "mean", bool zero_infinity = false);

}  // namespace kiln::nn::functional
