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

// nn::Dropout1d / Dropout2d / Dropout3d: whole channels zeroed while training (F::dropout1d / 2d / 3d).
class FeatureDropout : public Module {
 public:
  FeatureDropout(std::string name, int64_t spatial_dims, double p = 0.5, bool inplace = false);
  Tensor forward(const Tensor& x);
  std::string extra_repr() const override;
  int64_t spatial_dims;
  double p;
  bool inplace;
};
struct Dropout1d : FeatureDropout {
  explicit Dropout1d(double p = 0.5, bool inplace = false) : FeatureDropout("Dropout1d", 1, p, inplace) {}
};
struct Dropout2d : FeatureDropout {
  explicit Dropout2d(double p = 0.5, bool inplace = false) : FeatureDropout("Dropout2d", 2, p, inplace) {}
};
struct Dropout3d : FeatureDropout {
  explicit Dropout3d(double p = 0.5, bool inplace = false) : FeatureDropout("Dropout3d", 3, p, inplace) {}
};

// torch's padding modules: F::pad over the last 1-3 dimensions with the module's mode; padding
// (left, right[, top, bottom[, front, back]]), or one int for every side.
//   nn::ReflectionPad2d pad({1, 1, 2, 0});  pad.forward(x);
class Pad : public Module {
 public:
  Pad(std::string name, int64_t dims, std::string mode, Shape padding, double value = 0);
  Pad(std::string name, int64_t dims, std::string mode, int64_t padding, double value = 0);
  Tensor forward(const Tensor& x);
  std::string extra_repr() const override;
  int64_t dims;
  std::string mode;
  Shape padding;
  double value;
};
#define KILN_PAD_MODULE(Name, D, Mode)                                                       \
  struct Name : Pad {                                                                       \
    explicit Name(Shape padding) : Pad(#Name, D, Mode, std::move(padding)) {}               \
    explicit Name(int64_t padding) : Pad(#Name, D, Mode, padding) {}                        \
  };
#define KILN_CONSTANT_PAD_MODULE(Name, D)                                                    \
  struct Name : Pad {                                                                       \
    Name(Shape padding, double value) : Pad(#Name, D, "constant", std::move(padding), value) {} \
    Name(int64_t padding, double value) : Pad(#Name, D, "constant", padding, value) {}      \
  };
KILN_PAD_MODULE(ZeroPad1d, 1, "constant")
KILN_PAD_MODULE(ZeroPad2d, 2, "constant")
KILN_PAD_MODULE(ZeroPad3d, 3, "constant")
KILN_PAD_MODULE(ReflectionPad1d, 1, "reflect")
KILN_PAD_MODULE(ReflectionPad2d, 2, "reflect")
KILN_PAD_MODULE(ReflectionPad3d, 3, "reflect")
KILN_PAD_MODULE(ReplicationPad1d, 1, "replicate")
KILN_PAD_MODULE(ReplicationPad2d, 2, "replicate")
KILN_PAD_MODULE(ReplicationPad3d, 3, "replicate")
KILN_PAD_MODULE(CircularPad1d, 1, "circular")
KILN_PAD_MODULE(CircularPad2d, 2, "circular")
KILN_PAD_MODULE(CircularPad3d, 3, "circular")
KILN_CONSTANT_PAD_MODULE(ConstantPad1d, 1)
KILN_CONSTANT_PAD_MODULE(ConstantPad2d, 2)
KILN_CONSTANT_PAD_MODULE(ConstantPad3d, 3)
#undef KILN_PAD_MODULE
#undef KILN_CONSTANT_PAD_MODULE

// An activation's function and its repr text, by torch's class name and arguments (`inplace` is
// accepted and only shown in the repr, as kiln's activations are out-of-place).
struct ActivationSpec {
  std::function<Tensor(const Tensor&)> fn;
  std::string extra;
};
ActivationSpec activation_spec(const std::string& name, const std::vector<double>& args = {},
                               bool inplace = false, const std::string& approximate = "none");

// An activation: a module around a pointwise function (ReLU, GELU, ...), with torch's repr text.
class Activation : public Module {
 public:
  Activation(std::string name, std::function<Tensor(const Tensor&)> fn, std::string extra = "")
      : Module(std::move(name)), fn_(std::move(fn)), extra_(std::move(extra)) {}
  Activation(const std::string& name, const std::vector<double>& args, bool inplace = false,
             const std::string& approximate = "none")
      : Activation(name, activation_spec(name, args, inplace, approximate)) {}
  Tensor forward(const Tensor& x) { return fn_(x); }
  std::string extra_repr() const override { return extra_; }

 private:
  Activation(const std::string& name, ActivationSpec spec)
      : Activation(name, std::move(spec.fn), std::move(spec.extra)) {}
  std::function<Tensor(const Tensor&)> fn_;
  std::string extra_;
};

// Factories for every activation module of torch.nn (arguments as torch).
std::shared_ptr<Activation> make_activation(const std::string& name,
                                            const std::vector<double>& args = {}, bool inplace = false,
                                            const std::string& approximate = "none");

// One class per torch.nn activation, with torch's constructor arguments:
//   auto act = std::make_shared<nn::GELU>("tanh");  act->forward(x);
#define KILN_ACTIVATION_INPLACE(Name)                                             \
  struct Name : Activation {                                                      \
    explicit Name(bool inplace = false) : Activation(#Name, {}, inplace) {}       \
  };
#define KILN_ACTIVATION_PLAIN(Name)                                               \
  struct Name : Activation {                                                      \
    Name() : Activation(#Name, std::vector<double>{}) {}                          \
  };
KILN_ACTIVATION_INPLACE(ReLU)
KILN_ACTIVATION_INPLACE(ReLU6)
KILN_ACTIVATION_INPLACE(SiLU)
KILN_ACTIVATION_INPLACE(Mish)
KILN_ACTIVATION_INPLACE(Hardsigmoid)
KILN_ACTIVATION_INPLACE(Hardswish)
KILN_ACTIVATION_INPLACE(SELU)
KILN_ACTIVATION_PLAIN(Sigmoid)
KILN_ACTIVATION_PLAIN(Tanh)
KILN_ACTIVATION_PLAIN(LogSigmoid)
KILN_ACTIVATION_PLAIN(Softsign)
KILN_ACTIVATION_PLAIN(Tanhshrink)
#undef KILN_ACTIVATION_INPLACE
#undef KILN_ACTIVATION_PLAIN
struct LeakyReLU : Activation {
  explicit LeakyReLU(double negative_slope = 0.01, bool inplace = false)
      : Activation("LeakyReLU", {negative_slope}, inplace) {}
};
struct ELU : Activation {
  explicit ELU(double alpha = 1.0, bool inplace = false) : Activation("ELU", {alpha}, inplace) {}
};
struct CELU : Activation {
  explicit CELU(double alpha = 1.0, bool inplace = false) : Activation("CELU", {alpha}, inplace) {}
};
struct GELU : Activation {
  explicit GELU(const std::string& approximate = "none") : Activation("GELU", {}, false, approximate) {}
};
struct Softplus : Activation {
  explicit Softplus(double beta = 1.0, double threshold = 20.0) : Activation("Softplus", {beta, threshold}) {}
};
struct Hardtanh : Activation {
  explicit Hardtanh(double min_val = -1.0, double max_val = 1.0, bool inplace = false)
      : Activation("Hardtanh", {min_val, max_val}, inplace) {}
};
struct Threshold : Activation {
  Threshold(double threshold, double value, bool inplace = false)
      : Activation("Threshold", {threshold, value}, inplace) {}
};
struct Hardshrink : Activation {
  explicit Hardshrink(double lambd = 0.5) : Activation("Hardshrink", {lambd}) {}
};
struct Softshrink : Activation {
  explicit Softshrink(double lambd = 0.5) : Activation("Softshrink", {lambd}) {}
};
struct GLU : Activation {
  explicit GLU(int64_t dim = -1) : Activation("GLU", {static_cast<double>(dim)}) {}
};
struct Softmax : Activation {
  explicit Softmax(int64_t dim) : Activation("Softmax", {static_cast<double>(dim)}) {}
};
struct LogSoftmax : Activation {
  explicit LogSoftmax(int64_t dim) : Activation("LogSoftmax", {static_cast<double>(dim)}) {}
};
struct Softmin : Activation {
  explicit Softmin(int64_t dim) : Activation("Softmin", {static_cast<double>(dim)}) {}
};

// nn::Sequential: children "0", "1", ... applied in order to one tensor. Any module whose
// forward(const Tensor&) returns a Tensor can be added; its forward is captured when it is added.
//   nn::Sequential net(std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(),
//                      std::make_shared<nn::Linear>(8, 2));
class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  template <class... M>
  explicit Sequential(M... modules) : Sequential() {  // shared_ptrs or ModuleHolders
    (push_back(std::move(modules)), ...);
  }
  template <class M>
  void push_back(std::shared_ptr<M> m) {
    push_back(std::to_string(modules_.size()), std::move(m));
  }
  template <class M>
  void push_back(const ModuleHolder<M>& m) {
    push_back(m.ptr());
  }
  template <class M>
  void push_back(const std::string& name, std::shared_ptr<M> m) {
    register_module(name, m);
    steps_.push_back([m](const Tensor& x) -> Tensor { return m->forward(x); });
    modules_.push_back(m);
  }
  Tensor forward(const Tensor& x) const {
    Tensor y = x;
    for (const auto& step : steps_) y = step(y);
    return y;
  }
  size_t size() const { return modules_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const { return modules_.at(i); }
  template <class M>
  std::shared_ptr<M> at(size_t i) const {
    return std::dynamic_pointer_cast<M>(modules_.at(i));
  }

 private:
  std::vector<std::function<Tensor(const Tensor&)>> steps_;
  std::vector<std::shared_ptr<Module>> modules_;
};

// nn::ModuleList: children "0", "1", ... held in order (their parameters are the list's).
class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  template <class... M>
  explicit ModuleList(M... modules) : ModuleList() {  // shared_ptrs or ModuleHolders
    (push_back(std::move(modules)), ...);
  }
  template <class M>
  void push_back(std::shared_ptr<M> m) {
    register_module(std::to_string(modules_.size()), m);
    modules_.push_back(std::move(m));
  }
  template <class M>
  void push_back(const ModuleHolder<M>& m) {
    push_back(m.ptr());
  }
  size_t size() const { return modules_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const { return modules_.at(i); }
  template <class M>
  std::shared_ptr<M> at(size_t i) const {
    return std::dynamic_pointer_cast<M>(modules_.at(i));
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace kiln::nn
