// Basic layers: Linear, Bilinear, Identity, Flatten, Unflatten, Embedding, LayerNorm, RMSNorm, Dropout,
// the activation modules and Softmax/LogSoftmax — torch's arguments, defaults and initialisation.
#pragma once

#include <functional>
#include <optional>

#include "kiln/nn/functional.h"
#include "kiln/nn/module.h"

namespace kiln::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Dtype dtype = Dtype::Undefined);
  Tensor forward(const Tensor& x);
  void reset_parameters();
  std::string extra_repr() const override;
  Tensor& weight() { return param("weight"); }
  Tensor& bias() { return param("bias"); }
  int64_t in_features, out_features;
};

class Bilinear : public Module {
 public:
  Bilinear(int64_t in1_features, int64_t in2_features, int64_t out_features, bool bias = true,
           Dtype dtype = Dtype::Undefined);
  Tensor forward(const Tensor& x1, const Tensor& x2);
  void reset_parameters();
  std::string extra_repr() const override;
  int64_t in1_features, in2_features, out_features;
};

class Identity : public Module {
 public:
  Identity() : Module("Identity") {}
  Tensor forward(const Tensor& x) { return x; }
};

class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  Tensor forward(const Tensor& x) { return flatten(x, start_dim, end_dim); }
  std::string extra_repr() const override;
  int64_t start_dim, end_dim;
};

// Parameter-free layers over nn::functional (torch's PixelShuffle, PixelUnshuffle, Softmax2d,
// CosineSimilarity, PairwiseDistance) and PReLU with its learnable slope(s).
class PixelShuffle : public Module {
 public:
  explicit PixelShuffle(int64_t upscale_factor);
  Tensor forward(const Tensor& x) { return functional::pixel_shuffle(x, upscale_factor); }
  std::string extra_repr() const override;
  int64_t upscale_factor;
};

class PixelUnshuffle : public Module {
 public:
  explicit PixelUnshuffle(int64_t downscale_factor);
  Tensor forward(const Tensor& x) { return functional::pixel_unshuffle(x, downscale_factor); }
  std::string extra_repr() const override;
  int64_t downscale_factor;
};

class Softmax2d : public Module {
 public:
  Softmax2d() : Module("Softmax2d") {}
  Tensor forward(const Tensor& x);
};

class CosineSimilarity : public Module {
 public:
  explicit CosineSimilarity(int64_t dim = 1, double eps = 1e-8);
  Tensor forward(const Tensor& x1, const Tensor& x2) { return functional::cosine_similarity(x1, x2, dim, eps); }
  int64_t dim;
  double eps;
};

class PairwiseDistance : public Module {
 public:
  explicit PairwiseDistance(double p = 2.0, double eps = 1e-6, bool keepdim = false);
  Tensor forward(const Tensor& x1, const Tensor& x2) {
    return functional::pairwise_distance(x1, x2, norm, eps, keepdim);
  }
  double norm, eps;
  bool keepdim;
};

class PReLU : public Module {
 public:
  explicit PReLU(int64_t num_parameters = 1, double init = 0.25, std::optional<Dtype> dtype = std::nullopt);
  Tensor forward(const Tensor& x) { return functional::prelu(x, param("weight")); }
  std::string extra_repr() const override;
  void reset_parameters();
  int64_t num_parameters;
  double init;
};

class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, Shape sizes);
  Tensor forward(const Tensor& x) { return unflatten(x, dim, sizes); }
  std::string extra_repr() const override;
  int64_t dim;
  Shape sizes;
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt,
            std::optional<double> max_norm = std::nullopt, double norm_type = 2.0,
            bool scale_grad_by_freq = false, bool sparse = false, Dtype dtype = Dtype::Undefined);
  Tensor forward(const Tensor& indices);
  void reset_parameters();
  std::string extra_repr() const override;
  Tensor& weight() { return param("weight"); }
  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;
  std::optional<double> max_norm;
  double norm_type;
  bool scale_grad_by_freq, sparse;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true, Dtype dtype = Dtype::Undefined);
  Tensor forward(const Tensor& x);
  void reset_parameters();
  std::string extra_repr() const override;
  Shape normalized_shape;
  double eps;
  bool elementwise_affine;
};

class RMSNorm : public Module {
 public:
  explicit RMSNorm(Shape normalized_shape, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true, Dtype dtype = Dtype::Undefined);
  Tensor forward(const Tensor& x);
  void reset_parameters();
  std::string extra_repr() const override;
  Shape normalized_shape;
  std::optional<double> eps;
  bool elementwise_affine;
};

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, bool inplace = false);
  Tensor forward(const Tensor& x) { return F::dropout(x, p, is_training()); }
  std::string extra_repr() const override;
  double p;
  bool inplace;
};

// An activation: a module around a pointwise function (ReLU, GELU, ...), with torch's repr text.
class Activation : public Module {
 public:
  Activation(std::string name, std::function<Tensor(const Tensor&)> fn, std::string extra = "")
      : Module(std::move(name)), fn_(std::move(fn)), extra_(std::move(extra)) {}
  Tensor forward(const Tensor& x) { return fn_(x); }
  std::string extra_repr() const override { return extra_; }

 private:
  std::function<Tensor(const Tensor&)> fn_;
  std::string extra_;
};

// Factories for every activation module of torch.nn (arguments as torch; `inplace` is accepted and
// only shown in the repr, as kiln's activations are out-of-place).
std::shared_ptr<Activation> make_activation(const std::string& name,
                                            const std::vector<double>& args = {}, bool inplace = false,
                                            const std::string& approximate = "none");

}  // namespace kiln::nn
