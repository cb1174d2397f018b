// kiln::fft — torch.fft: discrete Fourier transforms over one, two or n dims of real, complex and
// Hermitian signals, with torch's arguments (n / s sizes that zero-pad or trim, dim, norm =
// "backward" | "ortho" | "forward"), dtype rules (integers and bool promote to the default float,
// real inputs of complex transforms to its complex type; float16 / bfloat16 are refused on the CPU as
// torch refuses them) and errors; all differentiable. Kernels: FFTW (kiln/backend/cpu/fft.cpp).
#pragma once

#include <optional>
#include <string>

#include "kiln/core/tensor.h"

namespace kiln::fft {

using Norm = std::optional<std::string>;
using OptShape = std::optional<Shape>;

Tensor fft(const Tensor& x, std::optional<int64_t> n = std::nullopt, int64_t dim = -1, const Norm& norm = std::nullopt);
Tensor ifft(const Tensor& x, std::optional<int64_t> n = std::nullopt, int64_t dim = -1, const Norm& norm = std::nullopt);
Tensor rfft(const Tensor& x, std::optional<int64_t> n = std::nullopt, int64_t dim = -1, const Norm& norm = std::nullopt);
Tensor irfft(const Tensor& x, std::optional<int64_t> n = std::nullopt, int64_t dim = -1, const Norm& norm = std::nullopt);
Tensor hfft(const Tensor& x, std::optional<int64_t> n = std::nullopt, int64_t dim = -1, const Norm& norm = std::nullopt);
Tensor ihfft(const Tensor& x, std::optional<int64_t> n = std::nullopt, int64_t dim = -1, const Norm& norm = std::nullopt);

// n-d forms: dim nullopt = all dims (or the last len(s) when s is given); s entries of -1 keep the size.
Tensor fftn(const Tensor& x, const OptShape& s = std::nullopt, const OptShape& dim = std::nullopt, const Norm& norm = std::nullopt);
Tensor ifftn(const Tensor& x, const OptShape& s = std::nullopt, const OptShape& dim = std::nullopt, const Norm& norm = std::nullopt);
Tensor rfftn(const Tensor& x, const OptShape& s = std::nullopt, const OptShape& dim = std::nullopt, const Norm& norm = std::nullopt);
Tensor irfftn(const Tensor& x, const OptShape& s = std::nullopt, const OptShape& dim = std::nullopt, const Norm& norm = std::nullopt);
Tensor hfftn(const Tensor& x, const OptShape& s = std::nullopt, const OptShape& dim = std::nullopt, const Norm& norm = std::nullopt);
Tensor ihfftn(const Tensor& x, const OptShape& s = std::nullopt, const OptShape& dim = std::nullopt, const Norm& norm = std::nullopt);
// 2-d forms: dim defaults to the last two
Tensor fft2(const Tensor& x, const OptShape& s = std::nullopt, const Shape& dim = {-2, -1}, const Norm& norm = std::nullopt);
Tensor ifft2(const Tensor& x, const OptShape& s = std::nullopt, const Shape& dim = {-2, -1}, const Norm& norm = std::nullopt);
Tensor rfft2(const Tensor& x, const OptShape& s = std::nullopt, const Shape& dim = {-2, -1}, const Norm& norm = std::nullopt);
Tensor irfft2(const Tensor& x, const OptShape& s = std::nullopt, const Shape& dim = {-2, -1}, const Norm& norm = std::nullopt);
Tensor hfft2(const Tensor& x, const OptShape& s = std::nullopt, const Shape& dim = {-2, -1}, const Norm& norm = std::nullopt);
Tensor ihfft2(const Tensor& x, const OptShape& s = std::nullopt, const Shape& dim = {-2, -1}, const Norm& norm = std::nullopt);

// Sample frequencies: fftfreq [0, 1, ..., -(n/2), ..., -1] / (d n); rfftfreq [0, ..., n/2] / (d n).
Tensor fftfreq(int64_t n, double d = 1.0, TensorOptions o = {});
Tensor rfftfreq(int64_t n, double d = 1.0, TensorOptions o = {});
// The zero frequency moved to the centre (and back): a roll by n/2 (ifftshift: (n+1)/2) along dim
// (all dims when nullopt).
Tensor fftshift(const Tensor& x, const OptShape& dim = std::nullopt);
Tensor ifftshift(const Tensor& x, const OptShape& dim = std::nullopt);

}  // namespace kiln::fft
