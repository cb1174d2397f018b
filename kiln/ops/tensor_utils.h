// torch's small numeric utilities, as composites of table ops (so autograd, the modes and export see
// their parts): block_diag, cartesian_prod, tril/triu_indices, cdist, cov, corrcoef, diff, trapezoid,
// cumulative_trapezoid, clamp_min/clamp_max and the Tensor.new_* factories. Names, arguments, dtype
// rules and errors are torch 2.13's.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/core/tensor.h"
#include "kiln/dispatch/op.h"

namespace kiln {

// Block-diagonal matrix of 0-, 1- and 2-d tensors (a 0-d tensor is 1x1, a 1-d one a row); the dtype
// is the inputs' promoted type. No inputs give a (1, 0) tensor, as torch's.
Tensor block_diag(const TensorList& tensors);
// Cartesian product of 1-d tensors: (prod of sizes, number of tensors); one tensor is returned as is.
Tensor cartesian_prod(const TensorList& tensors);
// The (2, N) coordinates of the lower / upper triangle of a row x col matrix, row-major; dtype int64
// unless given (an integral dtype).
Tensor tril_indices(int64_t row, int64_t col, int64_t offset = 0, TensorOptions options = kInt64);
Tensor triu_indices(int64_t row, int64_t col, int64_t offset = 0, TensorOptions options = kInt64);

// The p-norm distances between the rows i < j of x (N, M): N (N - 1) / 2 values in row-major pair
// order (torch.pdist); float32 / float64, p >= 0. Its gradient is torch's (see tensor_utils.cpp).
Tensor pdist(const Tensor& x, double p = 2);
// (tensor_extras.cpp) beta * self + alpha * outer(vec1, vec2) (beta = 0 ignores self; bool: or / and).
Tensor addr(const Tensor& self, const Tensor& vec1, const Tensor& vec2, const Scalar& beta = 1,
            const Scalar& alpha = 1);
// A copy of self with src written into its diagonal / select / slice view (src of that view's shape).
Tensor diagonal_scatter(const Tensor& self, const Tensor& src, int64_t offset = 0, int64_t dim1 = 0,
                        int64_t dim2 = 1);
Tensor select_scatter(const Tensor& self, const Tensor& src, int64_t dim, int64_t index);
Tensor slice_scatter(const Tensor& self, const Tensor& src, int64_t dim = 0, std::optional<int64_t> start = std::nullopt,
                     std::optional<int64_t> end = std::nullopt, int64_t step = 1);
// Reduces source's slices along dim into self's slices at index ("prod", "mean", "amax", "amin").
Tensor index_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                    const std::string& reduce, bool include_self = true);
Tensor narrow_copy(const Tensor& self, int64_t dim, int64_t start, int64_t length);
// Sums self down to `size`, which must broadcast to self's shape (Tensor.sum_to_size).
Tensor sum_to_size(const Tensor& self, const Shape& size);
// Writes fill_value on the main diagonal of a matrix or of an equal-sided tensor (wrap: a tall
// matrix's diagonal restarts every cols + 1 rows).
const Tensor& fill_diagonal_(const Tensor& self, const Scalar& fill_value, bool wrap = false);
// The coordinates in `shape` of flat indices (floor division and modulo: negative indices wrap).
TensorList unravel_index(const Tensor& indices, const Shape& shape);
// torch.histogram of float32 / float64 values: (hist, bin_edges). bins: the edges (1-d, increasing),
// or a count of equal bins over `range` (default: the data's min and max). Values outside the edges
// and NaN are not counted; density divides by the total times the bin width.
std::tuple<Tensor, Tensor> histogram(const Tensor& self, const Tensor& bins, const Tensor& weight = Tensor(),
                                     bool density = false);
std::tuple<Tensor, Tensor> histogram(const Tensor& self, int64_t bins = 100,
                                     std::optional<std::vector<double>> range = std::nullopt,
                                     const Tensor& weight = Tensor(), bool density = false);
// (stft.cpp) torch.stft: (B?, freq, n_frames) complex (or view_as_real when return_complex=False) of the
// windowed frames of a 1-d or (B, L) signal; center pads n_fft / 2 each side with pad_mode;
// align_to_window (center off) starts each frame where its window starts.
Tensor stft(const Tensor& self, int64_t n_fft, std::optional<int64_t> hop_length = std::nullopt,
            std::optional<int64_t> win_length = std::nullopt, const Tensor& window = Tensor(), bool center = true,
            const std::string& pad_mode = "reflect", bool normalized = false,
            std::optional<bool> onesided = std::nullopt, std::optional<bool> return_complex = std::nullopt,
            std::optional<bool> align_to_window = std::nullopt);
// torch.istft: the signal back from stft's complex output, by inverse transforms, overlap-add and the
// squared window's envelope (which must stay above 1e-11: the NOLA condition).
Tensor istft(const Tensor& self, int64_t n_fft, std::optional<int64_t> hop_length = std::nullopt,
             std::optional<int64_t> win_length = std::nullopt, const Tensor& window = Tensor(), bool center = true,
             bool normalized = false, std::optional<bool> onesided = std::nullopt,
             std::optional<int64_t> length = std::nullopt, bool return_complex = false);
// The r-element combinations of a 1-d tensor's values, in lexicographic order of positions.
Tensor combinations(const Tensor& self, int64_t r = 2, bool with_replacement = false);
// torch's window functions (windows.cpp), of a floating dtype (default: the default dtype); periodic
// windows are the first window_length values of the symmetric window one longer.
Tensor hann_window(int64_t window_length, bool periodic = true, TensorOptions options = {});
Tensor hamming_window(int64_t window_length, bool periodic = true, double alpha = 0.54, double beta = 0.46,
                      TensorOptions options = {});
Tensor blackman_window(int64_t window_length, bool periodic = true, TensorOptions options = {});
Tensor bartlett_window(int64_t window_length, bool periodic = true, TensorOptions options = {});
Tensor kaiser_window(int64_t window_length, bool periodic = true, double beta = 12.0, TensorOptions options = {});

// p-norm distances between the rows of x1 (B..., P, M) and x2 (B..., R, M): (B..., P, R), batch dims
// broadcast. compute_mode is torch's string: "use_mm_for_euclid_dist_if_necessary" (p = 2 through
// matrix products when P or R > 25), "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist".
Tensor cdist(const Tensor& x1, const Tensor& x2, double p = 2,
             const std::string& compute_mode = "use_mm_for_euclid_dist_if_necessary");
// Covariance of the rows (variables) over the columns (observations) of a 1-d or 2-d tensor, with
// optional integral frequency weights and floating observation weights.
Tensor cov(const Tensor& x, int64_t correction = 1, const Tensor& fweights = {}, const Tensor& aweights = {});
// Pearson correlation coefficients (cov normalised, clipped to [-1, 1]).
Tensor corrcoef(const Tensor& x);
// n-th forward difference along dim, after concatenating prepend / append (undefined: none); bool
// tensors use logical_xor.
Tensor diff(const Tensor& x, int64_t n = 1, int64_t dim = -1, const Tensor& prepend = {}, const Tensor& append = {});
// The trapezoid rule along dim, over sample points x (1-d, or broadcastable to y) or a constant
// spacing dx; the cumulative form keeps the running integral (size - 1 along dim).
Tensor trapezoid(const Tensor& y, const Tensor& x, int64_t dim = -1);
Tensor trapezoid(const Tensor& y, const Scalar& dx = 1, int64_t dim = -1);
Tensor cumulative_trapezoid(const Tensor& y, const Tensor& x, int64_t dim = -1);
Tensor cumulative_trapezoid(const Tensor& y, const Scalar& dx = 1, int64_t dim = -1);

// torch.heaviside: 0 below zero, 1 above, `values` at zero (input and values of one dtype).
Tensor heaviside(const Tensor& input, const Tensor& values);
// torch.isin: whether each element occurs in test_elements (sorted and searched, not all pairs).
Tensor isin(const Tensor& elements, const Tensor& test_elements, bool assume_unique = false, bool invert = false);
// torch.vander: columns x^(N-1), ..., x^0 (increasing: x^0 first); N defaults to len(x).
Tensor vander(const Tensor& x, std::optional<int64_t> N = std::nullopt, bool increasing = false);
// torch.diagflat: the flattened input on the offset diagonal of a square matrix.
Tensor diagflat(const Tensor& x, int64_t offset = 0);
// torch.atleast_1d / 2d / 3d: views with leading (and for 3-d, trailing) unit dims added.
Tensor atleast_1d(const Tensor& x);
Tensor atleast_2d(const Tensor& x);
Tensor atleast_3d(const Tensor& x);

// torch.tensor_split: views of x along dim, in `sections` parts whose sizes differ by at most one (the
// first size % sections ones longer), or cut before each of `indices` (as slices: negative from the end,
// clamped, an index below the last giving an empty part); a tensor: 0-d int64 sections, 1-d indices.
TensorList tensor_split(const Tensor& x, int64_t sections, int64_t dim = 0);
TensorList tensor_split(const Tensor& x, const Shape& indices, int64_t dim = 0);
TensorList tensor_split(const Tensor& x, const Tensor& indices_or_sections, int64_t dim = 0);
// torch.hsplit / vsplit / dsplit: tensor_split along dim 1 (dim 0 for a 1-d x), 0 and 2; a number of
// sections must divide that dimension.
TensorList hsplit(const Tensor& x, int64_t sections);
TensorList hsplit(const Tensor& x, const Shape& indices);
TensorList vsplit(const Tensor& x, int64_t sections);
TensorList vsplit(const Tensor& x, const Shape& indices);
TensorList dsplit(const Tensor& x, int64_t sections);
TensorList dsplit(const Tensor& x, const Shape& indices);
// torch.dstack: the tensors made at least 3-d, joined along dim 2; column_stack: 0-d and 1-d ones as
// columns (n, 1), joined along dim 1 (hstack).
Tensor dstack(const TensorList& ts);
Tensor column_stack(const TensorList& ts);
// torch.fliplr (dim 1, x at least 2-d) and flipud (dim 0, x at least 1-d).
Tensor fliplr(const Tensor& x);
Tensor flipud(const Tensor& x);

// clamp with one bound (the result dtype promotes with the bound as clamp's does).
Tensor clamp_min(const Tensor& x, const Scalar& min);
Tensor clamp_min(const Tensor& x, const Tensor& min);
Tensor clamp_max(const Tensor& x, const Scalar& max);
Tensor clamp_max(const Tensor& x, const Tensor& max);

}  // namespace kiln
