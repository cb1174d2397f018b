// What the scatter-style ops' meta functions (kiln/ops/scatter.cpp) and their CPU kernels
// (kiln/backend/cpu/scatter.cpp) share: the dimension helpers, the reduce codes and names, the
// masked_scatter checks.
#pragma once

#include <string>
#include <vector>

#include "kiln/core/visit.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"

namespace kiln::scatter_detail {

using shape_detail::check_scalar_fits;
using shape_detail::not_implemented;
using shape_detail::torch_type_name;


// torch's AT_ALL_TYPES_AND_COMPLEX_AND3(Bool, Half, BFloat16): no uint16/32/64, no float8.
template <class F>
decltype(auto) visit_std(Dtype d, const char* op, const char* kernel, F&& f) {
  switch (d) {
    KILN_VCASE(Bool) KILN_VCASE(UInt8) KILN_VCASE(Int8) KILN_VCASE(Int16) KILN_VCASE(Int32) KILN_VCASE(Int64)
    KILN_VFLOATS KILN_VCOMPLEX
    default: not_implemented(op, kernel, d);
  }
}
inline bool std_dtype(Dtype d) {
  return !(d == kUInt16 || d == kUInt32 || d == kUInt64 || is_float8(d));
}

// T: Tensor (kernels) or TensorSpec (meta functions, in SymInts).
template <class T>
int64_t nonempty_dim(const T& t) { return t.dim() == 0 ? 1 : t.dim(); }
template <class T>
auto nonempty_size(const T& t, int64_t d) -> std::decay_t<decltype(t.sizes()[0])> {
  return t.dim() == 0 ? 1 : t.sizes()[d];
}
template <class T>
auto nonempty_sizes(const T& t) -> std::decay_t<decltype(t.sizes())> {
  return t.dim() == 0 ? std::decay_t<decltype(t.sizes())>{1} : t.sizes();
}
inline Shape nonempty_strides(const Tensor& t) { return t.dim() == 0 ? Shape{1} : t.strides(); }

// size(d) of t as torch's Tensor::size would: IndexError for d outside a non-scalar tensor's dims.
template <class T>
auto checked_size(const T& t, int64_t d, const char* op) -> std::decay_t<decltype(t.sizes()[0])> {
  if (t.dim() == 0) return 1;
  KILN_CHECK(d < t.dim(), Index, op, "Dimension out of range (expected to be in range of [", -t.dim(), ", ",
             t.dim() - 1, "], but got ", d, ")");
  return t.sizes()[d];
}

inline bool same_view(const Tensor& a, const Tensor& b) {
  return a.data_ptr() == b.data_ptr() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.dtype() == b.dtype();
}
// out := x, unless out already is x (in-place calls write straight into self).
inline void init_out(const Tensor& out, const Tensor& x) {
  if (!same_view(out, x)) copy_(out, x);
}

inline Tensor index_i64(const Tensor& idx) { return contiguous(to_dtype(idx, kInt64)); }
inline const int64_t* i64p(const Tensor& t) { return static_cast<const int64_t*>(t.data_ptr()); }

// Visits every position of `sizes` in row-major order: f(linear, offset_a, offset_b), offsets in
// elements for the two stride sets.
template <class F>
void for_each_pos(const Shape& sizes, const Shape& sa, const Shape& sb, F&& f) {
  int64_t n = shape_numel(sizes);
  if (n == 0) return;
  int64_t nd = static_cast<int64_t>(sizes.size());
  if (nd == 0) {
    f(int64_t(0), int64_t(0), int64_t(0));
    return;
  }
  std::vector<int64_t> c(nd, 0);
  int64_t oa = 0, ob = 0;
  int64_t last = sizes[nd - 1], la = sa[nd - 1], lb = sb[nd - 1];
  for (int64_t lin = 0; lin < n; lin += last) {
    for (int64_t i = 0; i < last; ++i) f(lin + i, oa + i * la, ob + i * lb);
    for (int64_t d = nd - 2; d >= 0; --d) {
      if (++c[d] < sizes[d]) {
        oa += sa[d];
        ob += sb[d];
        break;
      }
      oa -= (sizes[d] - 1) * sa[d];
      ob -= (sizes[d] - 1) * sb[d];
      c[d] = 0;
    }
  }
}

enum Red { kNone = 0, kSum, kProd, kMean, kAmax, kAmin };
enum ScatterCode { kScSrc = 0, kScValue, kScAdd, kScReduce };

inline int legacy_reduce(const std::string& r, const char* op) {
  if (r.empty()) return kNone;
  if (r == "add") return kSum;
  if (r == "multiply") return kProd;
  KILN_FAIL(Runtime, op, "reduce argument must be either add or multiply.");
}

inline int two_reduce(const std::string& r, const char* op) {
  if (r == "sum") return kSum;
  if (r == "prod") return kProd;
  if (r == "mean") return kMean;
  if (r == "amax") return kAmax;
  if (r == "amin") return kAmin;
  KILN_FAIL(Runtime, op, "reduce argument must be either sum, prod, mean, amax or amin, got ", r);
}

// ---- masked_scatter -----------------------------------------------------------------------------------
template <class T>  // Tensor or TensorSpec
void check_masked_scatter(const OpDef& op, const T& x, const T& mask, const T& src) {
  KILN_CHECK(x.dtype() == src.dtype(), Runtime, op.name, "masked_scatter: expected self and source to have same "
             "dtypes but got", torch_type_name(x.dtype()), " and ", torch_type_name(src.dtype()));
  KILN_CHECK(mask.dtype() == kBool, Runtime, op.name, "masked_scatter_ only supports boolean masks, but got mask "
             "with dtype ", torch_type_name(mask.dtype()));
}

}  // namespace kiln::scatter_detail
