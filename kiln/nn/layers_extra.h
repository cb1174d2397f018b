// torch.nn's AlphaDropout, FeatureAlphaDropout, RReLU, LPPool1d / 2d / 3d, MaxUnpool1d / 2d / 3d,
// ChannelShuffle, UpsamplingNearest2d and UpsamplingBilinear2d over kiln::nn::functional
// (functional_extras.cpp), with torch's constructor arguments and reprs.
//   nn::MaxUnpool2d unpool(2);  Tensor y = unpool.forward(pooled, indices, input.sizes());
#pragma once

#include <optional>
#include <string>

#include "kiln/nn/conv_layers.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/layer_util.h"
#include "kiln/nn/module.h"

namespace kiln::nn {

// p outside [0, 1] raises ValueError at construction.
class AlphaDropoutNd : public Module {
 public:
  AlphaDropoutNd(std::string name, bool feature, double p = 0.5, bool inplace = false);
  Tensor forward(const Tensor& x);
  std::string extra_repr() const override;
  bool feature;
  double p;
  bool inplace;
};
struct AlphaDropout : AlphaDropoutNd {
  explicit AlphaDropout(double p = 0.5, bool inplace = false) : AlphaDropoutNd("AlphaDropout", false, p, inplace) {}
};
struct FeatureAlphaDropout : AlphaDropoutNd {
  explicit FeatureAlphaDropout(double p = 0.5, bool inplace = false)
      : AlphaDropoutNd("FeatureAlphaDropout", true, p, inplace) {}
};

class RReLU : public Module {
 public:
  explicit RReLU(double lower = 1.0 / 8, double upper = 1.0 / 3, bool inplace = false)
      : Module("RReLU"), lower(lower), upper(upper), inplace(inplace) {}
  Tensor forward(const Tensor& x) { return F::rrelu(x, lower, upper, is_training()); }
  std::string extra_repr() const override;
  double lower, upper;
  bool inplace;
};

class LPPoolNd : public Module {
 public:
  LPPoolNd(std::string name, int64_t spatial_dims, double norm_type, IntOrTuple kernel_size,
           std::optional<IntOrTuple> stride = std::nullopt, bool ceil_mode = false);
  Tensor forward(const Tensor& x);
  std::string extra_repr() const override;
  int64_t spatial_dims;
  double norm_type;
  IntOrTuple kernel_size;
  std::optional<IntOrTuple> stride;
  bool ceil_mode;
};
#define KILN_LP_POOL_DECL(N)                                                                        \
  struct LPPool##N##d : LPPoolNd {                                                                 \
    LPPool##N##d(double norm_type, IntOrTuple kernel_size, std::optional<IntOrTuple> stride = std::nullopt, \
                 bool ceil_mode = false)                                                           \
        : LPPoolNd("LPPool" #N "d", N, norm_type, std::move(kernel_size), std::move(stride), ceil_mode) {} \
  };
KILN_LP_POOL_DECL(1)
KILN_LP_POOL_DECL(2)
KILN_LP_POOL_DECL(3)
#undef KILN_LP_POOL_DECL

// forward's output_size: empty for the default size, else the spatial sizes (or the full shape).
class MaxUnpoolNd : public Module {
 public:
  MaxUnpoolNd(std::string name, int64_t spatial_dims, IntOrTuple kernel_size,
              std::optional<IntOrTuple> stride = std::nullopt, IntOrTuple padding = 0);
  Tensor forward(const Tensor& x, const Tensor& indices, const Shape& output_size = {});
  std::string extra_repr() const override;
  int64_t spatial_dims;
  Shape kernel_size, stride, padding;  // one value per spatial dim, as torch keeps them
};
#define KILN_MAX_UNPOOL_DECL(N)                                                                     \
  struct MaxUnpool##N##d : MaxUnpoolNd {                                                           \
    explicit MaxUnpool##N##d(IntOrTuple kernel_size, std::optional<IntOrTuple> stride = std::nullopt, \
                             IntOrTuple padding = 0)                                               \
        : MaxUnpoolNd("MaxUnpool" #N "d", N, std::move(kernel_size), std::move(stride), std::move(padding)) {} \
  };
KILN_MAX_UNPOOL_DECL(1)
KILN_MAX_UNPOOL_DECL(2)
KILN_MAX_UNPOOL_DECL(3)
#undef KILN_MAX_UNPOOL_DECL

// FractionalMaxPool2d / 3d: output_size, or output_ratio (one value or one per spatial dim, in (0, 1))
// times the input's size; _random_samples, when given, kept as a buffer and used for every call.
class FractionalMaxPoolNd : public Module {
 public:
  FractionalMaxPoolNd(std::string name, int64_t spatial_dims, IntOrTuple kernel_size,
                      std::optional<IntOrTuple> output_size, std::optional<std::vector<double>> output_ratio,
                      bool return_indices = false, Tensor random_samples = {});
  Tensor forward(const Tensor& x) { return std::get<0>(forward_with_indices(x)); }
  std::tuple<Tensor, Tensor> forward_with_indices(const Tensor& x);
  int64_t spatial_dims;
  Shape kernel_size, output_size;   // output_size empty when output_ratio is used
  std::vector<double> output_ratio;  // one per spatial dim, or empty
  bool return_indices;
};
#define KILN_FRACTIONAL_POOL_DECL(N)                                                                    \
  struct FractionalMaxPool##N##d : FractionalMaxPoolNd {                                                 \
    FractionalMaxPool##N##d(IntOrTuple kernel_size, std::optional<IntOrTuple> output_size,               \
                            std::optional<std::vector<double>> output_ratio = std::nullopt,              \
                            bool return_indices = false, Tensor random_samples = {})                     \
        : FractionalMaxPoolNd("FractionalMaxPool" #N "d", N, std::move(kernel_size), std::move(output_size), \
                              std::move(output_ratio), return_indices, std::move(random_samples)) {}     \
  };
KILN_FRACTIONAL_POOL_DECL(2)
KILN_FRACTIONAL_POOL_DECL(3)
#undef KILN_FRACTIONAL_POOL_DECL

class ChannelShuffle : public Module {
 public:
  explicit ChannelShuffle(int64_t groups) : Module("ChannelShuffle"), groups(groups) {}
  Tensor forward(const Tensor& x) { return F::channel_shuffle(x, groups); }
  std::string extra_repr() const override { return "groups=" + std::to_string(groups); }
  int64_t groups;
};

// Upsample with mode 'nearest', and 'bilinear' with align_corners=True.
struct UpsamplingNearest2d : Upsample {
  explicit UpsamplingNearest2d(std::optional<IntOrTuple> size,
                               std::optional<std::vector<double>> scale_factor = std::nullopt)
      : Upsample(std::move(size), std::move(scale_factor), "nearest", std::nullopt, std::nullopt, true,
                 "UpsamplingNearest2d") {}
};
struct UpsamplingBilinear2d : Upsample {
  explicit UpsamplingBilinear2d(std::optional<IntOrTuple> size,
                                std::optional<std::vector<double>> scale_factor = std::nullopt)
      : Upsample(std::move(size), std::move(scale_factor), "bilinear", true, std::nullopt, true,
                 "UpsamplingBilinear2d") {}
};

}  // namespace kiln::nn
