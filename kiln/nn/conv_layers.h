// Convolution, pooling and upsampling modules (torch.nn.Conv1d/2d/3d, ConvTranspose1d/2d/3d,
// MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool1d/2d, Upsample) over the ops of kiln/ops/nn_ops.h:
// torch 2.13's arguments, defaults, initialisation, reprs and errors.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/nn/layer_util.h"
#include "kiln/nn/module.h"

namespace kiln::nn {

// A convolution's padding: ints (one value for every spatial dim, or one per dim) or "same" /
// "valid".
struct ConvPadding {
  Shape values{0};
  std::string mode;  // "" for ints
  ConvPadding() = default;
  ConvPadding(int64_t v) : values{v} {}           // NOLINT: implicit, as torch's argument
  ConvPadding(Shape v) : values(std::move(v)) {}  // NOLINT
  ConvPadding(std::initializer_list<int64_t> v) : values(v) {}
  ConvPadding(std::string m) : mode(std::move(m)) {}  // NOLINT
  ConvPadding(const char* m) : mode(m) {}             // NOLINT
};

// torch's _ConvNd: weight (out, in / groups, *k) or, transposed, (in, out / groups, *k),
// initialised kaiming_uniform(a = sqrt(5)); bias uniform(+-1/sqrt(fan_in)). padding_mode "zeros",
// "reflect", "replicate" or "circular" (the non-zero modes pad with F.pad, then convolve unpadded).
class ConvNd : public Module {
 public:
  ConvNd(std::string name, int64_t spatial_dims, bool transposed, int64_t in_channels,
         int64_t out_channels, const Shape& kernel_size, const Shape& stride,
         const ConvPadding& padding, const Shape& dilation, const Shape& output_padding,
         int64_t groups, bool bias, std::string padding_mode, Dtype dtype);
  void reset_parameters();
  std::string extra_repr() const override;
  Tensor& weight() { return param("weight"); }
  Tensor& bias() { return param("bias"); }
  int64_t in_channels, out_channels;
  Shape kernel_size, stride, padding, dilation, output_padding;
  std::string padding_str;  // "same" / "valid", or "" when padding holds ints
  bool transposed;
  int64_t groups;
  std::string padding_mode;

 protected:
  Shape reversed_padding_twice_;  // F.pad's order, for padding_mode != "zeros"
  Tensor pad_input(const Tensor& x) const;
  // transposed: the output_padding that makes the output output_size (its spatial sizes, or all of
  // them); output_padding when none is asked for. ValueError for an unreachable size.
  Shape output_padding_for(const Tensor& x, const std::optional<Shape>& output_size) const;
};

class Conv1d : public ConvNd {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, const Shape& kernel_size,
         const Shape& stride = {1}, const ConvPadding& padding = {}, const Shape& dilation = {1},
         int64_t groups = 1, bool bias = true, std::string padding_mode = "zeros",
         Dtype dtype = Dtype::Undefined);
  Tensor forward(const Tensor& x);
};

class Conv2d : public ConvNd {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, const Shape& kernel_size,
         const Shape& stride = {1}, const ConvPadding& padding = {}, const Shape& dilation = {1},
         int64_t groups = 1, bool bias = true, std::string padding_mode = "zeros",
         Dtype dtype = Dtype::Undefined);
  Tensor forward(const Tensor& x);
};

class Conv3d : public ConvNd {
 public:
  Conv3d(int64_t in_channels, int64_t out_channels, const Shape& kernel_size,
         const Shape& stride = {1}, const ConvPadding& padding = {}, const Shape& dilation = {1},
         int64_t groups = 1, bool bias = true, std::string padding_mode = "zeros",
         Dtype dtype = Dtype::Undefined);
  Tensor forward(const Tensor& x);
};

// ConvTranspose1d / 2d / 3d. forward's output_size: the spatial size wanted (or the whole output
// shape); it picks the output_padding.
#define KILN_CONV_TRANSPOSE_DECL(N)                                                                \
  class ConvTranspose##N##d : public ConvNd {                                                      \
   public:                                                                                         \
    ConvTranspose##N##d(int64_t in_channels, int64_t out_channels, const Shape& kernel_size,       \
                        const Shape& stride = {1}, const Shape& padding = {0},                     \
                        const Shape& output_padding = {0}, int64_t groups = 1, bool bias = true,   \
                        const Shape& dilation = {1}, std::string padding_mode = "zeros",           \
                        Dtype dtype = Dtype::Undefined);                                           \
    Tensor forward(const Tensor& x, const std::optional<Shape>& output_size = std::nullopt);       \
  };
KILN_CONV_TRANSPOSE_DECL(1)
KILN_CONV_TRANSPOSE_DECL(2)
KILN_CONV_TRANSPOSE_DECL(3)
#undef KILN_CONV_TRANSPOSE_DECL

// MaxPool1d / 2d / 3d (stride nullopt = kernel_size). forward_with_indices returns the
// int64 argmax positions too (return_indices=True).
class MaxPoolNd : public Module {
 public:
  MaxPoolNd(std::string name, int64_t spatial_dims, IntOrTuple kernel_size,
            std::optional<IntOrTuple> stride, IntOrTuple padding, IntOrTuple dilation,
            bool return_indices, bool ceil_mode);
  Tensor forward(const Tensor& x);
  std::tuple<Tensor, Tensor> forward_with_indices(const Tensor& x);
  std::string extra_repr() const override;
  int64_t spatial_dims;
  IntOrTuple kernel_size, stride, padding, dilation;
  bool return_indices, ceil_mode;
};
class MaxPool1d : public MaxPoolNd {
 public:
  MaxPool1d(IntOrTuple kernel_size, std::optional<IntOrTuple> stride = std::nullopt,
            IntOrTuple padding = 0, IntOrTuple dilation = 1, bool return_indices = false,
            bool ceil_mode = false)
      : MaxPoolNd("MaxPool1d", 1, std::move(kernel_size), std::move(stride), std::move(padding),
                  std::move(dilation), return_indices, ceil_mode) {}
};
class MaxPool2d : public MaxPoolNd {
 public:
  MaxPool2d(IntOrTuple kernel_size, std::optional<IntOrTuple> stride = std::nullopt,
            IntOrTuple padding = 0, IntOrTuple dilation = 1, bool return_indices = false,
            bool ceil_mode = false)
      : MaxPoolNd("MaxPool2d", 2, std::move(kernel_size), std::move(stride), std::move(padding),
                  std::move(dilation), return_indices, ceil_mode) {}
};

class MaxPool3d : public MaxPoolNd {
 public:
  MaxPool3d(IntOrTuple kernel_size, std::optional<IntOrTuple> stride = std::nullopt,
            IntOrTuple padding = 0, IntOrTuple dilation = 1, bool return_indices = false,
            bool ceil_mode = false)
      : MaxPoolNd("MaxPool3d", 3, std::move(kernel_size), std::move(stride), std::move(padding),
                  std::move(dilation), return_indices, ceil_mode) {}
};

// AvgPool1d keeps its sizes as tuples (torch's _single).
class AvgPool1d : public Module {
 public:
  AvgPool1d(IntOrTuple kernel_size, std::optional<IntOrTuple> stride = std::nullopt,
            IntOrTuple padding = 0, bool ceil_mode = false, bool count_include_pad = true);
  Tensor forward(const Tensor& x);
  std::string extra_repr() const override;
  IntOrTuple kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
};
// AvgPool2d / AvgPool3d keep their sizes as given.
class AvgPoolNd : public Module {
 public:
  AvgPoolNd(std::string name, int64_t spatial_dims, IntOrTuple kernel_size,
            std::optional<IntOrTuple> stride, IntOrTuple padding, bool ceil_mode,
            bool count_include_pad, std::optional<int64_t> divisor_override);
  Tensor forward(const Tensor& x);
  std::string extra_repr() const override;
  int64_t spatial_dims;
  IntOrTuple kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
  std::optional<int64_t> divisor_override;
};
#define KILN_AVG_POOL_DECL(N)                                                                       \
  class AvgPool##N##d : public AvgPoolNd {                                                          \
   public:                                                                                          \
    AvgPool##N##d(IntOrTuple kernel_size, std::optional<IntOrTuple> stride = std::nullopt,          \
                  IntOrTuple padding = 0, bool ceil_mode = false, bool count_include_pad = true,    \
                  std::optional<int64_t> divisor_override = std::nullopt)                           \
        : AvgPoolNd("AvgPool" #N "d", N, std::move(kernel_size), std::move(stride),                 \
                    std::move(padding), ceil_mode, count_include_pad, divisor_override) {}          \
  };
KILN_AVG_POOL_DECL(2)
KILN_AVG_POOL_DECL(3)
#undef KILN_AVG_POOL_DECL

class AdaptiveAvgPool1d : public Module {
 public:
  explicit AdaptiveAvgPool1d(IntOrTuple output_size);
  Tensor forward(const Tensor& x);
  std::string extra_repr() const override;
  IntOrTuple output_size;
};
// Adaptive pooling over 2 or 3 spatial dims (average) or 1 to 3 (max). output_size entries may be
// nullopt (keep that input size); scalar: given as one int (the repr shows it so).
class AdaptivePoolNd : public Module {
 public:
  AdaptivePoolNd(std::string name, int64_t spatial_dims, bool max,
                 std::vector<std::optional<int64_t>> output_size, bool scalar, bool return_indices);
  Tensor forward(const Tensor& x);
  // max only: the values and their int64 positions (return_indices=True)
  std::tuple<Tensor, Tensor> forward_with_indices(const Tensor& x);
  std::string extra_repr() const override;
  int64_t spatial_dims;
  bool max;
  std::vector<std::optional<int64_t>> output_size;
  bool scalar, return_indices;

 private:
  Shape resolve(const Tensor& x) const;
};
#define KILN_ADAPTIVE_POOL_DECL(Name, N, Max)                                                       \
  class Name : public AdaptivePoolNd {                                                              \
   public:                                                                                          \
    explicit Name(std::vector<std::optional<int64_t>> output_size, bool return_indices = false,     \
                  bool scalar = false)                                                              \
        : AdaptivePoolNd(#Name, N, Max, std::move(output_size), scalar, return_indices) {}          \
    explicit Name(int64_t output_size, bool return_indices = false)                                 \
        : Name(std::vector<std::optional<int64_t>>{output_size}, return_indices, true) {}           \
  };
KILN_ADAPTIVE_POOL_DECL(AdaptiveAvgPool2d, 2, false)
KILN_ADAPTIVE_POOL_DECL(AdaptiveAvgPool3d, 3, false)
KILN_ADAPTIVE_POOL_DECL(AdaptiveMaxPool1d, 1, true)
KILN_ADAPTIVE_POOL_DECL(AdaptiveMaxPool2d, 2, true)
KILN_ADAPTIVE_POOL_DECL(AdaptiveMaxPool3d, 3, true)
#undef KILN_ADAPTIVE_POOL_DECL

// Unfold / Fold: F.unfold / F.fold (sliding blocks as columns and back).
class Unfold : public Module {
 public:
  explicit Unfold(IntOrTuple kernel_size, IntOrTuple dilation = 1, IntOrTuple padding = 0,
                  IntOrTuple stride = 1);
  Tensor forward(const Tensor& x);
  std::string extra_repr() const override;
  IntOrTuple kernel_size, dilation, padding, stride;
};
class Fold : public Module {
 public:
  Fold(IntOrTuple output_size, IntOrTuple kernel_size, IntOrTuple dilation = 1,
       IntOrTuple padding = 0, IntOrTuple stride = 1);
  Tensor forward(const Tensor& x);
  std::string extra_repr() const override;
  IntOrTuple output_size, kernel_size, dilation, padding, stride;
};

// Upsample: F.interpolate with mode "nearest", "linear" or "bilinear". scale_factor: one value
// for every spatial dim (scale_scalar) or one per dim.
class Upsample : public Module {
 public:
  Upsample(std::optional<IntOrTuple> size,
           std::optional<std::vector<double>> scale_factor = std::nullopt,
           std::string mode = "nearest", std::optional<bool> align_corners = std::nullopt,
           std::optional<bool> recompute_scale_factor = std::nullopt, bool scale_scalar = true,
           std::string name = "Upsample");
  Tensor forward(const Tensor& x);
  std::string extra_repr() const override;
  std::optional<IntOrTuple> size;
  std::optional<std::vector<double>> scale_factor;
  std::string mode;
  std::optional<bool> align_corners, recompute_scale_factor;
  bool scale_scalar;
};

}  // namespace kiln::nn
