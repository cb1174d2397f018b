// Sorting, selection and searching: sort/argsort/msort, topk, kthvalue, median/nanmedian, mode,
// quantile/nanquantile, unique/unique_consecutive (searching and counting: search.cpp): the op-table
// entries, schemas, metas and front ends. The CPU kernels are kiln/backend/cpu/sort.cpp's.
//
// Row ops move the working dim last, make it contiguous and process rows in parallel. Where torch's
// result among equal values depends on its algorithm (sort with stable=false, topk, kthvalue, median,
// mode, unique) the same standard-library algorithm is run with the same comparator, so ties break the
// same way. Everything that can fail is checked before a parallel region is entered.
#include "kiln/ops/sort.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "kiln/core/visit.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/sort_detail.h"

namespace kiln {
namespace {

using namespace sort_detail;

// ---- sort(x, dim, descending, stable) ---------------------------------------------------------------
void check_sort_dtype(const char* op, Dtype d) {
  KILN_CHECK(!is_complex(d), Runtime, op, "Sort does not support complex dtypes on CPU");
  if (is_float8(d)) not_implemented(op, "sort", d);
}

SpecList sort_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  check_sort_dtype(op.name, x.dtype());
  return {{x.sizes(), x.dtype()}, {x.sizes(), kInt64}};
}

OpDef op_sort{"sort", kOutExactDtype, sort_meta, {}};
OpRegistrar reg_sort{op_sort, "sort.stable(Tensor self, int dim=-1, bool descending=False, *, bool? stable=False) -> (Tensor values, Tensor indices)", kFunctionAndMethod};

// ---- topk(x, k, dim, largest, sorted): torch's partial_sort / nth_element selection ---------------
SpecList topk_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  int64_t k = attr<int64_t>(a, 0);
  int64_t d = wrap_dim(attr<int64_t>(a, 1), x.dim(), op.name);
  KILN_CHECK(k >= 0 && k <= row_len(x, d), Runtime, op.name, "selected index k out of range");
  Dtype dt = x.dtype();
  KILN_CHECK(!is_complex(dt), Runtime, op.name, "topk does not support complex dtypes on CPU");
  KILN_CHECK(dt != kBool, Runtime, op.name, "topk does not support bool dtypes on CPU");
  if (!all_types_half(dt)) not_implemented(op.name, "topk_cpu", dt);
  SymShape s = x.sizes();
  if (x.dim()) s[d] = k;
  return {{s, dt}, {s, kInt64}};
}

OpDef op_topk{"topk", kOutExactDtype, topk_meta, {}};
OpRegistrar reg_topk{op_topk, "topk(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)", kFunctionAndMethod};

// ---- kthvalue(x, k, dim, keepdim): torch's quickselect (Sedgewick), NaN largest ------------------

SpecList kthvalue_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  int64_t k = attr<int64_t>(a, 0);
  int64_t d = wrap_dim(attr<int64_t>(a, 1), x.dim(), op.name);
  check_nonzero_dim(x, d, op.name, "kthvalue");
  KILN_CHECK(k >= 1 && k <= row_len(x, d), Runtime, op.name,
             "kthvalue(): selected number k out of range for dimension ", d);
  if (!all_types_half(x.dtype())) not_implemented(op.name, "kthvalue_cpu", x.dtype());
  SymShape s = reduced_shape(x, d, attr<bool>(a, 2));
  return {{s, x.dtype()}, {s, kInt64}};
}

OpDef op_kthvalue{"kthvalue", kReduction | kOutExactDtype, kthvalue_meta, {}};
OpRegistrar reg_kthvalue{op_kthvalue, "kthvalue(Tensor self, int k, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)", kFunctionAndMethod};

// ---- median / nanmedian along a dim (code 0 median, 1 nanmedian) ----------------------------------
SpecList median_dim_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  int64_t d = wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  check_nonzero_dim(x, d, op.name, "median");
  if (!all_types_half(x.dtype())) not_implemented(op.name, "median_out", x.dtype());
  SymShape s = reduced_shape(x, d, attr<bool>(a, 1));
  return {{s, x.dtype()}, {s, kInt64}};
}

OpDef op_median_dim{"median_dim", kReduction | kOutExactDtype, median_dim_meta, {}, 0};
OpRegistrar reg_median_dim{op_median_dim, "median.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)", kFunctionAndMethod};
OpDef op_nanmedian_dim{"nanmedian_dim", kReduction | kOutExactDtype, median_dim_meta, {}, 1};
OpRegistrar reg_nanmedian_dim{op_nanmedian_dim, "nanmedian.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)", kFunctionAndMethod};

// ---- global median / nanmedian ---------------------------------------------------------------------
SpecList median_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  if (!all_types_half(in[0].dtype())) not_implemented(op.name, "median_cpu", in[0].dtype());
  return {{{}, in[0].dtype()}};
}

OpDef op_median{"median", kReduction, median_meta, {}, 0};
OpRegistrar reg_median{op_median, "median(Tensor self) -> Tensor", kFunctionAndMethod};
OpDef op_nanmedian{"nanmedian", kReduction, median_meta, {}, 1};
OpRegistrar reg_nanmedian{op_nanmedian, "nanmedian(Tensor self) -> Tensor", kFunctionAndMethod};

// ---- mode(x, dim, keepdim): torch's sort-and-count; the index is the last in its run ---------------
SpecList mode_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  int64_t d = wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  check_nonzero_dim(x, d, op.name, "mode");
  if (x.dtype() != kBool && !all_types_half(x.dtype())) not_implemented(op.name, "mode_cpu", x.dtype());
  SymShape s = reduced_shape(x, d, attr<bool>(a, 1));
  return {{s, x.dtype()}, {s, kInt64}};
}

OpDef op_mode{"mode", kReduction | kOutExactDtype, mode_meta, {}};
OpRegistrar reg_mode{op_mode, "mode(Tensor self, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)", kFunctionAndMethod};

// ---- quantile / nanquantile (code 0 / 1). inputs {x, q}; attrs {has_dim, dim, keepdim, interp} ----

SpecList quantile_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec &x = in[0], &q = in[1];
  KILN_CHECK(x.numel() > 0, Runtime, op.name, "quantile() input tensor must be non-empty");
  KILN_CHECK(q.dim() <= 1, Runtime, op.name, "quantile() q must be a scalar or 1D tensor");
  KILN_CHECK(x.dtype() == kFloat32 || x.dtype() == kFloat64, Runtime, op.name,
             "quantile() input tensor must be either float or double dtype");
  KILN_CHECK(x.dtype() == q.dtype(), Runtime, op.name, "quantile() q tensor must be same dtype as the input tensor");
  bool has_dim = attr<bool>(a, 0), keepdim = attr<bool>(a, 2);
  int64_t d = wrap_dim(has_dim ? attr<int64_t>(a, 1) : 0, x.dim(), op.name);
  SymShape s;
  if (has_dim && x.dim() > 0) s = reduced_shape(x, d, keepdim);
  else if (keepdim) s = SymShape(x.dim(), 1);
  if (q.dim() > 0) s.insert(s.begin(), q.numel());
  parse_interp(attr<std::string>(a, 3), op.name);
  return {{s, x.dtype()}};
}

OpDef op_quantile{"quantile", kReduction, quantile_meta, {}, 0};
OpRegistrar reg_quantile{op_quantile, "quantile(Tensor self, Tensor q, bool has_dim, int dim, bool keepdim, str interpolation) -> Tensor"};
OpDef op_nanquantile{"nanquantile", kReduction, quantile_meta, {}, 1};
OpRegistrar reg_nanquantile{op_nanquantile, "nanquantile(Tensor self, Tensor q, bool has_dim, int dim, bool keepdim, str interpolation) -> Tensor"};

// ---- unique / unique_consecutive (code 0 / 1). attrs {has_dim, dim, return_inverse, return_counts};

OpDef op_unique{"unique", kDynamicShape, nullptr, {}, 0};
OpRegistrar reg_unique{op_unique, "unique(Tensor self, bool has_dim, int dim, bool return_inverse, bool return_counts) -> (Tensor, Tensor, Tensor)"};
OpDef op_unique_consecutive{"unique_consecutive", kDynamicShape, nullptr, {}, 1};
OpRegistrar reg_unique_consecutive{op_unique_consecutive, "unique_consecutive(Tensor self, bool has_dim, int dim, bool return_inverse, bool return_counts) -> (Tensor, Tensor, Tensor)"};

std::tuple<Tensor, Tensor> pair_of(const TensorList& r) { return {r[0], r[1]}; }

}  // namespace

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  return pair_of(dispatch(op_sort, {x}, {dim, descending, stable}));
}
Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  return std::get<1>(kiln::sort(x, dim, descending, stable));
}
Tensor msort(const Tensor& x) { return std::get<0>(kiln::sort(x, 0, false)); }

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  return pair_of(dispatch(op_topk, {x}, {k, dim, largest, sorted}));
}
std::tuple<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim) {
  return pair_of(dispatch(op_kthvalue, {x}, {k, dim, keepdim}));
}

Tensor median(const Tensor& x) { return dispatch1(op_median, {x}); }
std::tuple<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim) {
  return pair_of(dispatch(op_median_dim, {x}, {dim, keepdim}));
}
Tensor nanmedian(const Tensor& x) { return dispatch1(op_nanmedian, {x}); }
std::tuple<Tensor, Tensor> nanmedian(const Tensor& x, int64_t dim, bool keepdim) {
  return pair_of(dispatch(op_nanmedian_dim, {x}, {dim, keepdim}));
}
std::tuple<Tensor, Tensor> mode(const Tensor& x, int64_t dim, bool keepdim) {
  return pair_of(dispatch(op_mode, {x}, {dim, keepdim}));
}

Tensor quantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                const std::string& interpolation) {
  return dispatch1(op_quantile, {x, q}, {dim.has_value(), dim.value_or(0), keepdim, interpolation});
}
Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                   const std::string& interpolation) {
  return dispatch1(op_nanquantile, {x, q}, {dim.has_value(), dim.value_or(0), keepdim, interpolation});
}
Tensor quantile(const Tensor& x, double q, std::optional<int64_t> dim, bool keepdim,
                const std::string& interpolation) {
  KILN_CHECK(q >= 0 && q <= 1, Runtime, "quantile", "quantile() q must be in the range [0, 1] but got ", q);
  return quantile(x, scalar_tensor(Scalar(q), x.dtype()), dim, keepdim, interpolation);
}
Tensor nanquantile(const Tensor& x, double q, std::optional<int64_t> dim, bool keepdim,
                   const std::string& interpolation) {
  KILN_CHECK(q >= 0 && q <= 1, Runtime, "nanquantile", "quantile() q must be in the range [0, 1] but got ", q);
  return nanquantile(x, scalar_tensor(Scalar(q), x.dtype()), dim, keepdim, interpolation);
}

std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool, bool return_inverse, bool return_counts,
                                          std::optional<int64_t> dim) {
  auto r = dispatch(op_unique, {x}, {dim.has_value(), dim.value_or(0), return_inverse, return_counts});
  return {r[0], r[1], r[2]};
}
std::tuple<Tensor, Tensor, Tensor> unique_consecutive(const Tensor& x, bool return_inverse, bool return_counts,
                                                      std::optional<int64_t> dim) {
  auto r = dispatch(op_unique_consecutive, {x}, {dim.has_value(), dim.value_or(0), return_inverse, return_counts});
  return {r[0], r[1], r[2]};
}


// ---- composites with torch's schemas (ops/composite.h): their public forms come from these -------
namespace {
Composite c_argsort{"argsort(Tensor self, int dim=-1, bool descending=False, *, bool stable=False) -> Tensor",
                    [](const TensorList& in, const Attrs& a) -> TensorList {
                      return {argsort(in[0], attr<int64_t>(a, 0), attr<bool>(a, 1), attr<bool>(a, 2))};
                    },
                    kFunctionAndMethod};
Composite c_msort{"msort(Tensor self) -> Tensor",
                  [](const TensorList& in, const Attrs&) -> TensorList { return {msort(in[0])}; }, kFunctionAndMethod};
// torch refuses an out= of another dtype than the result's for these (and the ones below)
CompositeTags t_argsort{c_argsort, kOutExactDtype}, t_msort{c_msort, kOutExactDtype};
// quantile, nanquantile: q as a tensor first, then as a float
#define KILN_QUANTILE(name)                                                                                      \
  Composite c_##name##_t{#name "(Tensor self, Tensor q, int? dim=None, bool keepdim=False, *, "                      \
                         "str interpolation=\"linear\") -> Tensor",                                                \
                         [](const TensorList& in, const Attrs& a) -> TensorList {                                  \
                           return {name(in[0], in[1], opt_attr<int64_t>(a, 0), attr<bool>(a, 1),                   \
                                        attr<std::string>(a, 2))};                                                \
                         },                                                                                        \
                         kFunctionAndMethod};                                                                      \
  Composite c_##name##_s{#name ".scalar(Tensor self, float q, int? dim=None, bool keepdim=False, *, "                \
                         "str interpolation=\"linear\") -> Tensor",                                                \
                         [](const TensorList& in, const Attrs& a) -> TensorList {                                  \
                           return {name(in[0], attr<double>(a, 0), opt_attr<int64_t>(a, 1), attr<bool>(a, 2),      \
                                        attr<std::string>(a, 3))};                                                \
                         },                                                                                        \
                         kFunctionAndMethod};
KILN_QUANTILE(quantile)
KILN_QUANTILE(nanquantile)
#undef KILN_QUANTILE
CompositeTags t_quantile_t{c_quantile_t, kOutExactDtype}, t_quantile_s{c_quantile_s, kOutExactDtype};
CompositeTags t_nanquantile_t{c_nanquantile_t, kOutExactDtype}, t_nanquantile_s{c_nanquantile_s, kOutExactDtype};
// searchsorted(sorted_sequence, input) and bucketize(input, boundaries): input a tensor or a number
Composite c_searchsorted_t{
    "searchsorted.Tensor(Tensor sorted_sequence, Tensor input, *, bool out_int32=False, bool right=False, "
    "str? side=None, Tensor? sorter=None) -> Tensor",
    [](const TensorList& in, const Attrs& a) -> TensorList {
      return {searchsorted(in[0], in[1], attr<bool>(a, 0), attr<bool>(a, 1), opt_attr<std::string>(a, 2), in[2])};
    },
    kFunctionVariant};
Composite c_searchsorted_s{
    "searchsorted.Scalar(Tensor sorted_sequence, Scalar input, *, bool out_int32=False, bool right=False, "
    "str? side=None, Tensor? sorter=None) -> Tensor",
    [](const TensorList& in, const Attrs& a) -> TensorList {
      return {searchsorted(in[0], attr<Scalar>(a, 0), attr<bool>(a, 1), attr<bool>(a, 2), opt_attr<std::string>(a, 3),
                           in[1])};
    },
    kFunctionVariant};
Composite c_bucketize_t{"bucketize.Tensor(Tensor self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor",
                        [](const TensorList& in, const Attrs& a) -> TensorList {
                          return {bucketize(in[0], in[1], attr<bool>(a, 0), attr<bool>(a, 1))};
                        },
                        kFunctionVariant};
Composite c_bucketize_s{"bucketize.Scalar(Scalar self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor",
                        [](const TensorList& in, const Attrs& a) -> TensorList {
                          return {bucketize(attr<Scalar>(a, 0), in[0], attr<bool>(a, 1), attr<bool>(a, 2))};
                        },
                        kFunctionVariant};
// out= must be int64, or int32 with out_int32=True (the result's dtype), as torch's
CompositeTags t_searchsorted_t{c_searchsorted_t, kOutExactDtype}, t_searchsorted_s{c_searchsorted_s, kOutExactDtype};
CompositeTags t_bucketize_t{c_bucketize_t, kOutExactDtype}, t_bucketize_s{c_bucketize_s, kOutExactDtype};
Composite c_bincount{"bincount(Tensor self, Tensor? weights=None, int minlength=0) -> Tensor",
                     [](const TensorList& in, const Attrs& a) -> TensorList {
                       return {bincount(in[0], in[1], attr<int64_t>(a, 0))};
                     },
                     kFunctionAndMethod};
}  // namespace

}  // namespace kiln
