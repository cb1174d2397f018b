// kiln::nn::functional — torch.nn.functional in C++ (layers are built from these).
#pragma once

#include <optional>
#include <string>

#include "kiln/ops/ops.h"

namespace kiln::nn::functional {

// y = x W^T + b
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// y = x1^T A x2 + b, weight (out, in1, in2)
Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const Tensor& bias = Tensor());
// Normalises over the trailing `normalized_shape` dims (fused kernel; float32/float64, half via float32).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);
// Zeroes elements with probability p and scales the rest by 1/(1-p) when training.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
// Whole channels of x (N, C, *) zeroed with probability p, the rest scaled by 1/(1-p), when training
// (torch's feature_dropout).
Tensor feature_dropout(const Tensor& x, double p = 0.5, bool training = true);
// torch.nn.functional.dropout1d ((N, C, L) or unbatched (C, L)), dropout2d ((N, C, H, W); a 3-d input
// is read as (N, C, L), torch's rule) and dropout3d ((N, C, D, H, W); any other rank as unbatched).
Tensor dropout1d(const Tensor& x, double p = 0.5, bool training = true);
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true);
Tensor dropout3d(const Tensor& x, double p = 0.5, bool training = true);

// x / max(||x||_p over dim, eps) (torch.nn.functional.normalize).
Tensor normalize(const Tensor& x, double p = 2.0, int64_t dim = 1, double eps = 1e-12);
// <x1, x2> / (max(||x1||, eps) max(||x2||, eps)) along dim, after broadcasting (torch's formulation).
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
// ||x1 - x2 + eps||_p over the last dimension.
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2.0, double eps = 1e-6,
                         bool keepdim = false);
// (*, C r^2, H, W) -> (*, C, H r, W r), and back.
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor);
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor);
// torch.norm_except_dim: the p-norm over every dim but `dim`, shaped to broadcast against v (dim -1:
// the whole tensor's norm).
Tensor norm_except_dim(const Tensor& v, int64_t pow = 2, int64_t dim = 0);
// torch._weight_norm: v * (g / norm_except_dim(v, 2, dim)).
Tensor weight_norm(const Tensor& v, const Tensor& g, int64_t dim = 0);
// max(0, x) + weight * min(0, x), weight one value or one per channel (dim 1).
Tensor prelu(const Tensor& x, const Tensor& weight);

// (functional_extras.cpp) Power-average pooling: (sum of x^p over each window)^(1/p), p = +-inf the
// max (min) of |x|; kernel_size / stride one value or one per spatial dim (stride empty: kernel_size).
Tensor lp_pool1d(const Tensor& x, double norm_type, const Shape& kernel_size, const Shape& stride = {},
                 bool ceil_mode = false);
Tensor lp_pool2d(const Tensor& x, double norm_type, const Shape& kernel_size, const Shape& stride = {},
                 bool ceil_mode = false);
Tensor lp_pool3d(const Tensor& x, double norm_type, const Shape& kernel_size, const Shape& stride = {},
                 bool ceil_mode = false);
// The inverse of max_pool*d's indices: each value of x (N, C, *) or (C, *) placed at its int64 index
// in a zero output plane of output_size (empty: (in - 1) * stride + kernel - 2 * padding).
Tensor max_unpool1d(const Tensor& x, const Tensor& indices, const Shape& kernel_size, const Shape& stride = {},
                    const Shape& padding = {0}, const Shape& output_size = {});
Tensor max_unpool2d(const Tensor& x, const Tensor& indices, const Shape& kernel_size, const Shape& stride = {},
                    const Shape& padding = {0}, const Shape& output_size = {});
Tensor max_unpool3d(const Tensor& x, const Tensor& indices, const Shape& kernel_size, const Shape& stride = {},
                    const Shape& padding = {0}, const Shape& output_size = {});
// (fractional_pool.cpp) Fractional max pooling of x (N, C, H, W) / (C, H, W) (3d: one more spatial
// dim) to output_size with windows of kernel_size placed by random_samples (N, C, 2 / 3) in x's dtype
// (undefined: drawn uniform in [0, 1)); returns the output and int64 indices into each input plane.
std::tuple<Tensor, Tensor> fractional_max_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& output_size,
                                                 const Tensor& random_samples = {});
std::tuple<Tensor, Tensor> fractional_max_pool3d(const Tensor& x, const Shape& kernel_size, const Shape& output_size,
                                                 const Tensor& random_samples = {});
// (N, C, *) with C = g * k: channel g' * k + j moves to j * g + g'.
Tensor channel_shuffle(const Tensor& x, int64_t groups);
// Dropout that keeps SELU's self-normalisation: dropped values set to SELU's negative saturation,
// then an affine map restoring mean and variance; feature_: whole channels of (N, C, *).
Tensor alpha_dropout(const Tensor& x, double p = 0.5, bool training = false);
Tensor feature_alpha_dropout(const Tensor& x, double p = 0.5, bool training = false);
// Randomized leaky ReLU: slopes drawn from U(lower, upper) while training, (lower + upper) / 2 in eval.
Tensor rrelu(const Tensor& x, double lower = 1.0 / 8, double upper = 1.0 / 3, bool training = false,
             Generator* generator = nullptr);

// Sampling grids (grid_sample.cpp): theta (N, 2, 3) or (N, 3, 4) -> grid (N, H, W, 2) or
// (N, D, H, W, 3) for size (N, C, [D,] H, W).
Tensor affine_grid(const Tensor& theta, const Shape& size, bool align_corners = false);
// input (N, C, [D,] H, W) sampled at grid (N, [Do,] Ho, Wo, 2 or 3) in [-1, 1] (x first); mode
// "bilinear", "nearest" or "bicubic" (4-d), padding_mode "zeros", "border" or "reflection".
Tensor grid_sample(const Tensor& input, const Tensor& grid, const std::string& mode = "bilinear",
                   const std::string& padding_mode = "zeros", bool align_corners = false);
// softmax((logits + Gumbel noise) / tau); hard: one-hot of its argmax, with the soft sample's
// gradient (straight-through).
Tensor gumbel_softmax(const Tensor& logits, double tau = 1.0, bool hard = false, int64_t dim = -1,
                      Generator* generator = nullptr);

}  // namespace kiln::nn::functional

namespace kiln {
namespace F = nn::functional;
}
