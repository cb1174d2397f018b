#include "kiln/backend/cpu/loop.h"

#include <algorithm>

namespace kiln::cpu {

Loop make_loop(const Tensor* const* ops, int n, const Shape& shape) {
  KILN_CHECK(n <= kMaxOperands, Runtime, "loop", "too many operands: ", n);
  int nd = static_cast<int>(shape.size());
  KILN_CHECK(nd <= kMaxLoopDims, Runtime, "loop", "tensors with more than ", kMaxLoopDims,
             " dimensions are not supported, got ", nd);
  Loop L;
  L.ntensors = n;
  L.numel = shape_numel(shape);
  // broadcast byte strides, outermost first
  int64_t st[kMaxLoopDims][kMaxOperands];
  for (int k = 0; k < n; ++k) {
    const Tensor& t = *ops[k];
    int64_t isz = static_cast<int64_t>(t.itemsize());
    int td = static_cast<int>(t.dim());
    L.data[k] = static_cast<char*>(t.data_ptr());
    for (int d = 0; d < nd; ++d) {
      int tdim = d - (nd - td);
      // (an empty tensor's strides are unchecked and may overflow in bytes: nothing is read anyway)
      st[d][k] = (L.numel == 0 || tdim < 0 || t.sizes()[tdim] == 1) ? 0 : t.strides()[tdim] * isz;
    }
  }
  // order dims innermost first by the output's (then inputs') strides, stable
  int perm[kMaxLoopDims];
  for (int d = 0; d < nd; ++d) perm[d] = nd - 1 - d;
  auto less = [&](int a, int b) {  // true if dim a should be inner to dim b
    for (int k = 0; k < n; ++k) {
      int64_t sa = st[a][k] < 0 ? -st[a][k] : st[a][k], sb = st[b][k] < 0 ? -st[b][k] : st[b][k];
      if (sa == 0 || sb == 0) continue;
      if (sa != sb) return sa < sb;
    }
    return false;
  };
  for (int i = 1; i < nd; ++i)  // insertion sort: a comparator that is not a strict order is safe
    for (int j = i; j > 0 && less(perm[j], perm[j - 1]); --j) std::swap(perm[j], perm[j - 1]);
  // drop size-1 dims, coalesce
  int out = 0;
  for (int i = 0; i < nd; ++i) {
    int d = perm[i];
    if (shape[d] == 1) continue;
    if (out > 0) {
      bool can = true;
      for (int k = 0; k < n && can; ++k)
        can = st[d][k] == L.shape[out - 1] * L.strides[out - 1][k];
      if (can) {
        L.shape[out - 1] *= shape[d];
        continue;
      }
    }
    L.shape[out] = shape[d];
    for (int k = 0; k < n; ++k) L.strides[out][k] = st[d][k];
    ++out;
  }
  L.ndim = out;
  if (L.numel == 0) L.ndim = 0, L.numel = 0;
  if (out == 0 && L.numel == 1) {  // a single element
    L.ndim = 1;
    L.shape[0] = 1;
    for (int k = 0; k < n; ++k) L.strides[0][k] = 0;
  }
  return L;
}

}  // namespace kiln::cpu
