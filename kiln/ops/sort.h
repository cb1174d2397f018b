// Sorting, selection and searching ops (kiln/ops/sort.cpp), torch names and argument order.
//
// Tie-breaking follows torch's CPU kernels: NaN sorts as the largest value; sort/argsort with
// stable=true are stable, with stable=false they order equal values exactly as torch's unstable sort
// does; topk/kthvalue/median/mode/unique use the same algorithms torch uses, so equal values report
// the same indices.
#pragma once

#include <optional>
#include <string>
#include <tuple>

#include "kiln/core/scalar.h"
#include "kiln/core/tensor.h"

namespace kiln {

// (values, indices) along dim. stable=false: torch's introsort order (stable up to 16 elements).
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false,
                                bool stable = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
Tensor msort(const Tensor& x);  // sort along dim 0, values only
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);
std::tuple<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim = -1, bool keepdim = false);

// Global median: the lower median; NaN when any element is NaN (nanmedian: of the non-NaN values).
Tensor median(const Tensor& x);
std::tuple<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor nanmedian(const Tensor& x);
std::tuple<Tensor, Tensor> nanmedian(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> mode(const Tensor& x, int64_t dim = -1, bool keepdim = false);

// interpolation: "linear", "lower", "higher", "nearest" or "midpoint". q: 0-dim or 1-D, x's dtype.
Tensor quantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim = std::nullopt,
                bool keepdim = false, const std::string& interpolation = "linear");
Tensor quantile(const Tensor& x, double q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                const std::string& interpolation = "linear");
Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim = std::nullopt,
                   bool keepdim = false, const std::string& interpolation = "linear");
Tensor nanquantile(const Tensor& x, double q, std::optional<int64_t> dim = std::nullopt,
                   bool keepdim = false, const std::string& interpolation = "linear");

// (output, inverse_indices, counts); inverse_indices / counts are empty tensors unless requested.
// The output is always sorted (as on torch's CPU, whatever `sorted` says).
std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool sorted = true, bool return_inverse = false,
                                          bool return_counts = false,
                                          std::optional<int64_t> dim = std::nullopt);
std::tuple<Tensor, Tensor, Tensor> unique_consecutive(const Tensor& x, bool return_inverse = false,
                                                      bool return_counts = false,
                                                      std::optional<int64_t> dim = std::nullopt);

// side: "left" / "right" (overrides right; the two may not contradict). sorter: undefined = none.
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& input, bool out_int32 = false,
                    bool right = false, const std::optional<std::string>& side = std::nullopt,
                    const Tensor& sorter = Tensor());
Tensor searchsorted(const Tensor& sorted_sequence, const Scalar& input, bool out_int32 = false,
                    bool right = false, const std::optional<std::string>& side = std::nullopt,
                    const Tensor& sorter = Tensor());
Tensor bucketize(const Tensor& input, const Tensor& boundaries, bool out_int32 = false, bool right = false);
Tensor bucketize(const Scalar& input, const Tensor& boundaries, bool out_int32 = false, bool right = false);

Tensor histc(const Tensor& x, int64_t bins = 100, const Scalar& min = 0, const Scalar& max = 0);
// weights: undefined = none (int64 counts); float32 weights give float32, any other float64.
Tensor bincount(const Tensor& x, const Tensor& weights = Tensor(), int64_t minlength = 0);

}  // namespace kiln
