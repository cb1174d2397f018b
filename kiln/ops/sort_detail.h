// Internal helpers shared by the sort/select (sort.cpp) and search/count (search.cpp) kernels.
#pragma once

#include <string>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kiln/core/visit.h"
#include "kiln/ops/ops.h"

namespace kiln::sort_detail {

template <class C>
inline bool isnan_(C v) {
  if constexpr (std::is_floating_point_v<C>) return std::isnan(v);
  else return false;
}

// torch raises NotImplementedError for a dtype its kernel was not compiled for.
[[noreturn]] inline void not_implemented(const char* op, const char* kernel, Dtype d) {
  KILN_FAIL(NotImplemented, op, "\"", kernel, "\" not implemented for '", dtype_name(d), "'");
}

// AT_ALL_TYPES + Half + BFloat16: the integers without the uint16/32/64 and bool, and the floats.
inline bool all_types_half(Dtype d) {
  switch (d) {
    case kUInt8: case kInt8: case kInt16: case kInt32: case kInt64:
    case kFloat16: case kBFloat16: case kFloat32: case kFloat64:
      return true;
    default:
      return false;
  }
}
inline bool plain_float(Dtype d) { return d == kFloat16 || d == kBFloat16 || d == kFloat32 || d == kFloat64; }

// Visits the dtypes of all_types_half.
template <class F>
decltype(auto) visit_all_types_half(Dtype d, const char* op, F&& f) {
  switch (d) {
    KILN_VCASE(UInt8) KILN_VCASE(Int8) KILN_VCASE(Int16) KILN_VCASE(Int32) KILN_VCASE(Int64)
    KILN_VFLOATS
    default: raise_dtype_unsupported(op, d);
  }
}

// torch sorts 1-D integer tensors of at least this many elements with a (stable) radix sort.
constexpr int64_t kTorchRadixSortMin = 32768;

// x with dim d moved last, contiguous; a 0-dim tensor is one row of one element.
inline Tensor rows_of(const Tensor& x, int64_t d) {
  if (x.dim() == 0) return contiguous(reshape(x, {1}));
  if (d == x.dim() - 1) return contiguous(x);
  return contiguous(movedim(x, {d}, {-1}));
}
inline int64_t row_len(const Tensor& x, int64_t d) { return x.dim() ? x.sizes()[d] : 1; }
inline SymInt row_len(const TensorSpec& x, int64_t d) { return x.dim() ? x.sizes()[d] : SymInt(1); }
inline int64_t num_rows(const Tensor& x, int64_t d) {
  int64_t m = 1;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != d) m *= x.sizes()[i];
  return m;
}

// For outputs that keep dim d (sort, topk): the buffer rows are written to, and the copy back.
inline Tensor moved_target(const Tensor& out, int64_t d) {
  if (out.dim() <= 1 || d == out.dim() - 1) return out;
  return make_tensor(movedim(out, {d}, {-1}).sizes(), out.dtype());
}
inline void write_back(const Tensor& out, int64_t d, const Tensor& tmp) {
  if (!tmp.is_same(out)) copy_(movedim(out, {d}, {-1}), tmp);
}

inline SymShape reduced_shape(const TensorSpec& x, int64_t d, bool keepdim) {
  if (x.dim() == 0) return {};
  SymShape s = x.sizes();
  if (keepdim) s[d] = 1;
  else s.erase(s.begin() + d);
  return s;
}
inline void check_nonzero_dim(const TensorSpec& x, int64_t d, const char* op, const char* fn) {
  if (x.dim() > 0)
    KILN_CHECK(x.sizes()[d] != 0, Index, op, fn, "(): Expected reduction dim ", d, " to have non-zero size.");
}

template <class T>
inline const T* cptr(const Tensor& t) { return static_cast<const T*>(t.data_ptr()); }
template <class T>
inline T* mptr(const Tensor& t) { return static_cast<T*>(t.data_ptr()); }

// quantile's interpolation names (its meta checks the name, its kernel uses it)
enum class Interp { Linear, Lower, Higher, Midpoint, Nearest };

inline Interp parse_interp(const std::string& s, const char* op) {
  if (s == "linear") return Interp::Linear;
  if (s == "lower") return Interp::Lower;
  if (s == "higher") return Interp::Higher;
  if (s == "midpoint") return Interp::Midpoint;
  if (s == "nearest") return Interp::Nearest;
  KILN_FAIL(Runtime, op, "quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, "
            "but got ", s);
}

}  // namespace kiln::sort_detail
