// Convolution, pooling and upsampling with torch.nn.functional's semantics (conv.cpp, pool.cpp).
//
// The table ops take batched inputs with one or two spatial dims, (N, C, L) or (N, C, H, W) (the
// convolution also three, (N, C, D, H, W)); list attributes hold one value per spatial dim. A 1-d
// op runs as the 2-d one with height 1. The front
// ends below accept torch's unbatched forms ((C, L), (C, H, W)) and expand single ints to every
// spatial dim. float32 / float64 run natively, float16 / bfloat16 through float32.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/core/tensor.h"
#include "kiln/dispatch/op.h"

namespace kiln {

// ---- convolution (conv.cpp)
// ----------------------------------------------------------------------- torch's
// aten::convolution: weight is (Cout, Cin/groups, k...) or, transposed, (Cin, Cout/groups, k...);
// bias may be undefined. output_padding only matters for transposed.
Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const Shape& stride, const Shape& padding, const Shape& dilation,
                   bool transposed, const Shape& output_padding, int64_t groups);
// The weight gradient of a (non-transposed) convolution: for each weight element the sum over the
// batch of grad_output times the input element it multiplied. Its output spatial size is
// grad_output's (input positions beyond are ignored), which lets it serve transposed convolutions.
Tensor convolution_backward_weight(const Tensor& grad_output, const Tensor& input,
                                   const Shape& weight_sizes, const Shape& stride,
                                   const Shape& padding, const Shape& dilation, int64_t groups);

// torch.nn.functional.conv1d / conv2d / conv3d; padding as ints or "valid" / "same" (even kernels pad
// asymmetrically, as torch does, through constant_pad_nd).
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              const Shape& stride = {1}, const Shape& padding = {0}, const Shape& dilation = {1},
              int64_t groups = 1);
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride,
              const std::string& padding, const Shape& dilation = {1}, int64_t groups = 1);
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              const Shape& stride = {1}, const Shape& padding = {0}, const Shape& dilation = {1},
              int64_t groups = 1);
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride,
              const std::string& padding, const Shape& dilation = {1}, int64_t groups = 1);
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              const Shape& stride = {1}, const Shape& padding = {0}, const Shape& dilation = {1},
              int64_t groups = 1);
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride,
              const std::string& padding, const Shape& dilation = {1}, int64_t groups = 1);
// torch.nn.functional.conv_transpose1d / 2d / 3d (weight (Cin, Cout / groups, k...)).
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
                        const Shape& stride = {1}, const Shape& padding = {0},
                        const Shape& output_padding = {0}, int64_t groups = 1,
                        const Shape& dilation = {1});
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
                        const Shape& stride = {1}, const Shape& padding = {0},
                        const Shape& output_padding = {0}, int64_t groups = 1,
                        const Shape& dilation = {1});
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
                        const Shape& stride = {1}, const Shape& padding = {0},
                        const Shape& output_padding = {0}, int64_t groups = 1,
                        const Shape& dilation = {1});

// ---- sliding blocks (fold.cpp) ------------------------------------------------------------------
namespace nn::functional {
// F.unfold: (N, C, H, W) or (C, H, W) -> (N, C * kH * kW, L), the blocks as columns.
Tensor unfold(const Tensor& input, const Shape& kernel_size, const Shape& dilation = {1},
              const Shape& padding = {0}, const Shape& stride = {1});
// F.fold: the adjoint, summing overlapping blocks into (N, C, output_size).
Tensor fold(const Tensor& input, const Shape& output_size, const Shape& kernel_size,
            const Shape& dilation = {1}, const Shape& padding = {0}, const Shape& stride = {1});
}  // namespace nn::functional

// ---- pooling (pool.cpp)
// --------------------------------------------------------------------------- stride empty =
// kernel_size. Indices are int64 positions in the flattened (unpadded) input plane.
std::tuple<Tensor, Tensor> max_pool1d_with_indices(const Tensor& input, const Shape& kernel_size,
                                                   const Shape& stride = {},
                                                   const Shape& padding = {0},
                                                   const Shape& dilation = {1},
                                                   bool ceil_mode = false);
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, const Shape& kernel_size,
                                                   const Shape& stride = {},
                                                   const Shape& padding = {0},
                                                   const Shape& dilation = {1},
                                                   bool ceil_mode = false);
Tensor max_pool1d(const Tensor& input, const Shape& kernel_size, const Shape& stride = {},
                  const Shape& padding = {0}, const Shape& dilation = {1}, bool ceil_mode = false);
Tensor max_pool2d(const Tensor& input, const Shape& kernel_size, const Shape& stride = {},
                  const Shape& padding = {0}, const Shape& dilation = {1}, bool ceil_mode = false);
Tensor avg_pool1d(const Tensor& input, const Shape& kernel_size, const Shape& stride = {},
                  const Shape& padding = {0}, bool ceil_mode = false,
                  bool count_include_pad = true);
Tensor avg_pool2d(const Tensor& input, const Shape& kernel_size, const Shape& stride = {},
                  const Shape& padding = {0}, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
std::tuple<Tensor, Tensor> max_pool3d_with_indices(const Tensor& input, const Shape& kernel_size,
                                                   const Shape& stride = {},
                                                   const Shape& padding = {0},
                                                   const Shape& dilation = {1},
                                                   bool ceil_mode = false);
Tensor max_pool3d(const Tensor& input, const Shape& kernel_size, const Shape& stride = {},
                  const Shape& padding = {0}, const Shape& dilation = {1}, bool ceil_mode = false);
Tensor avg_pool3d(const Tensor& input, const Shape& kernel_size, const Shape& stride = {},
                  const Shape& padding = {0}, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
// Windows [floor(i * In / Out), ceil((i + 1) * In / Out)).
Tensor adaptive_avg_pool1d(const Tensor& input, const Shape& output_size);
Tensor adaptive_avg_pool2d(const Tensor& input, const Shape& output_size);
Tensor adaptive_avg_pool3d(const Tensor& input, const Shape& output_size);
// The maximum of each adaptive window and its int64 position in the flattened input plane.
std::tuple<Tensor, Tensor> adaptive_max_pool1d(const Tensor& input, const Shape& output_size);
std::tuple<Tensor, Tensor> adaptive_max_pool2d(const Tensor& input, const Shape& output_size);
std::tuple<Tensor, Tensor> adaptive_max_pool3d(const Tensor& input, const Shape& output_size);

// ---- upsampling (pool.cpp)
// ------------------------------------------------------------------------ scales: one per spatial
// dim, the user's scale factor (nullopt: In / Out is used); they change the source index exactly as
// in torch's upsample kernels.
using Scales = std::vector<std::optional<double>>;
// 'nearest': src = min(floor(dst * scale), In - 1) in float, torch's rule (not 'nearest-exact').
Tensor upsample_nearest(const Tensor& input, const Shape& output_size, const Scales& scales = {});
// 'linear' / 'bilinear' / 'trilinear' (one to three spatial dims).
Tensor upsample_linear(const Tensor& input, const Shape& output_size, bool align_corners,
                       const Scales& scales = {});
// 'nearest-exact': src = min(floor((dst + 0.5) * scale), In - 1).
Tensor upsample_nearest_exact(const Tensor& input, const Shape& output_size, const Scales& scales = {});
// 'bicubic' (4-d input): Keys' cubic convolution, A = -0.75, taps clamped to the border.
Tensor upsample_bicubic2d(const Tensor& input, const Shape& output_size, bool align_corners,
                          const Scales& scales = {});
// torch.nn.functional.interpolate: 'nearest', 'nearest-exact', 'area' (1-3 spatial dims), 'linear',
// 'bilinear', 'trilinear', 'bicubic'.
Tensor interpolate(const Tensor& input, const std::optional<Shape>& size,
                   const std::optional<std::vector<double>>& scale_factor,
                   const std::string& mode = "nearest",
                   std::optional<bool> align_corners = std::nullopt,
                   std::optional<bool> recompute_scale_factor = std::nullopt,
                   bool antialias = false);

}  // namespace kiln
