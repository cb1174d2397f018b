// Batch and group normalisation and EmbeddingBag: torch.nn's modules and the functional forms they
// use (torch 2.13's arguments, defaults, parameter/buffer names, initialisation and errors).
//
// The functional forms are composites of kiln ops, so autograd (and double backward) comes from
// the ops' derivatives; half-precision inputs are normalised in float32 and cast back.
#pragma once

#include <optional>
#include <string>

#include "kiln/nn/functional.h"
#include "kiln/nn/module.h"

namespace kiln::nn::functional {

// torch.nn.functional.batch_norm on (N, C, *). training: normalise with the batch statistics
// (biased variance) and, when the running tensors are defined, update them in place:
// running = (1 - momentum) * running + momentum * stat, with the unbiased variance. Otherwise
// normalise with running_mean / running_var (which must then be defined).
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = {}, const Tensor& bias = {}, bool training = false,
                  double momentum = 0.1, double eps = 1e-5);

// torch.nn.functional.group_norm on (N, C, *): statistics per sample over each group of
// C / num_groups channels (and all spatial positions); weight and bias per channel.
Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

// torch.nn.functional.instance_norm on (N, C, *): batch_norm over the (1, N*C, *) view, statistics per
// sample and channel; the running tensors (C), when defined, get the mean of the N updated copies.
Tensor instance_norm(const Tensor& input, const Tensor& running_mean = {}, const Tensor& running_var = {},
                     const Tensor& weight = {}, const Tensor& bias = {}, bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5);

// torch.nn.functional.local_response_norm on (N, C, *): x / (k + alpha * mean of x^2 over `size`
// neighbouring channels)^beta.
Tensor local_response_norm(const Tensor& input, int64_t size, double alpha = 1e-4, double beta = 0.75,
                           double k = 1.0);

// torch.nn.functional.embedding_bag. input: 1-D indices with offsets (bag starts; with
// include_last_offset the last entry ends the last bag) or 2-D (B, N) fixed-length bags (offsets
// undefined). mode "sum" | "mean" | "max"; per_sample_weights (input's shape) only with "sum";
// entries equal to padding_idx are left out of their bag; empty bags give zeros. max_norm
// renormalises the referenced rows of weight in place first. Returns (B, embedding_dim).
Tensor embedding_bag(const Tensor& input, const Tensor& weight, const Tensor& offsets = {},
                     std::optional<double> max_norm = std::nullopt, double norm_type = 2.0,
                     bool scale_grad_by_freq = false, const std::string& mode = "mean",
                     bool sparse = false, const Tensor& per_sample_weights = {},
                     bool include_last_offset = false,
                     std::optional<int64_t> padding_idx = std::nullopt);

}  // namespace kiln::nn::functional

namespace kiln::nn {

// torch's _BatchNorm: weight (ones) / bias (zeros) when affine; buffers running_mean (zeros),
// running_var (ones), num_batches_tracked (int64 0) when track_running_stats. momentum nullopt =
// cumulative moving average (factor 1 / num_batches_tracked).
class BatchNorm : public Module {
 public:
  BatchNorm(std::string name, int64_t num_features, double eps = 1e-5,
            std::optional<double> momentum = 0.1, bool affine = true,
            bool track_running_stats = true, bool bias = true, Dtype dtype = Dtype::Undefined);
  Tensor forward(const Tensor& x);
  void reset_running_stats();
  void reset_parameters();
  std::string extra_repr() const override;
  int64_t num_features;
  double eps;
  std::optional<double> momentum;
  bool affine, track_running_stats;

 protected:
  // Raises torch's ValueError for an input of the wrong rank.
  virtual void check_input_dim(const Tensor& x) const = 0;
};

// (N, C) or (N, C, L)
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true, bool bias = true,
                       Dtype dtype = Dtype::Undefined)
      : BatchNorm("BatchNorm1d", num_features, eps, momentum, affine, track_running_stats, bias,
                  dtype) {}

 protected:
  void check_input_dim(const Tensor& x) const override;
};

// (N, C, H, W)
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true, bool bias = true,
                       Dtype dtype = Dtype::Undefined)
      : BatchNorm("BatchNorm2d", num_features, eps, momentum, affine, track_running_stats, bias,
                  dtype) {}

 protected:
  void check_input_dim(const Tensor& x) const override;
};

// (N, C, D, H, W)
class BatchNorm3d : public BatchNorm {
 public:
  explicit BatchNorm3d(int64_t num_features, double eps = 1e-5,
                       std::optional<double> momentum = 0.1, bool affine = true,
                       bool track_running_stats = true, bool bias = true,
                       Dtype dtype = Dtype::Undefined)
      : BatchNorm("BatchNorm3d", num_features, eps, momentum, affine, track_running_stats, bias,
                  dtype) {}

 protected:
  void check_input_dim(const Tensor& x) const override;
};

class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true,
            bool bias = true, Dtype dtype = Dtype::Undefined);
  Tensor forward(const Tensor& x);
  void reset_parameters();
  std::string extra_repr() const override;
  int64_t num_groups, num_channels;
  double eps;
  bool affine;
};

// torch's _InstanceNorm: no affine parameters and no running statistics by default; an unbatched
// input (C, *) is accepted.
class InstanceNorm : public Module {
 public:
  InstanceNorm(std::string name, int64_t spatial_dims, int64_t num_features, double eps = 1e-5,
               double momentum = 0.1, bool affine = false, bool track_running_stats = false,
               bool bias = true, Dtype dtype = Dtype::Undefined);
  Tensor forward(const Tensor& x);
  void reset_running_stats();
  void reset_parameters();
  std::string extra_repr() const override;
  int64_t spatial_dims, num_features;
  double eps, momentum;
  bool affine, track_running_stats;
};

class InstanceNorm1d : public InstanceNorm {
 public:
  explicit InstanceNorm1d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = false,
                          bool track_running_stats = false, bool bias = true, Dtype dtype = Dtype::Undefined)
      : InstanceNorm("InstanceNorm1d", 1, num_features, eps, momentum, affine, track_running_stats, bias, dtype) {}
};
class InstanceNorm2d : public InstanceNorm {
 public:
  explicit InstanceNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = false,
                          bool track_running_stats = false, bool bias = true, Dtype dtype = Dtype::Undefined)
      : InstanceNorm("InstanceNorm2d", 2, num_features, eps, momentum, affine, track_running_stats, bias, dtype) {}
};
class InstanceNorm3d : public InstanceNorm {
 public:
  explicit InstanceNorm3d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = false,
                          bool track_running_stats = false, bool bias = true, Dtype dtype = Dtype::Undefined)
      : InstanceNorm("InstanceNorm3d", 3, num_features, eps, momentum, affine, track_running_stats, bias, dtype) {}
};

class LocalResponseNorm : public Module {
 public:
  explicit LocalResponseNorm(int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0);
  Tensor forward(const Tensor& x) { return functional::local_response_norm(x, size, alpha, beta, k); }
  std::string extra_repr() const override;
  int64_t size;
  double alpha, beta, k;
};

class EmbeddingBag : public Module {
 public:
  EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim,
               std::optional<double> max_norm = std::nullopt, double norm_type = 2.0,
               bool scale_grad_by_freq = false, std::string mode = "mean", bool sparse = false,
               bool include_last_offset = false, std::optional<int64_t> padding_idx = std::nullopt,
               Dtype dtype = Dtype::Undefined);
  Tensor forward(const Tensor& input, const Tensor& offsets = {},
                 const Tensor& per_sample_weights = {});
  void reset_parameters();
  std::string extra_repr() const override;
  Tensor& weight() { return param("weight"); }
  int64_t num_embeddings, embedding_dim;
  std::optional<double> max_norm;
  double norm_type;
  bool scale_grad_by_freq;
  std::string mode;
  bool sparse, include_last_offset;
  std::optional<int64_t> padding_idx;
};

}  // namespace kiln::nn
