// Geometry helpers shared by the conv, pooling and upsampling ops and their CPU kernels.
#pragma once

#include "kiln/ops/ops.h"

namespace kiln::nn_detail {

// Value i (0 = depth, 1 = height, 2 = width) of a per-spatial-dim list, counted from its end: a
// shorter list gives `fill` for the leading dims (a 1-d op runs as 2-d with height 1, a 2-d one as
// 3-d with depth 1).
inline int64_t dhw(const Shape& s, int i, int64_t fill) {
  int64_t k = static_cast<int64_t>(s.size()) - (3 - i);
  return k >= 0 ? s[k] : fill;
}
// The same for 0 = height, 1 = width.
inline int64_t hw(const Shape& s, int i, int64_t fill) { return dhw(s, i + 1, fill); }
inline Shape spatial(const Shape& s) { return Shape(s.begin() + 2, s.end()); }
// Depth / height / width of a batched (N, C, [[D,] H,] W) shape.
inline int64_t depth(const Shape& s) { return s.size() == 5 ? s[2] : 1; }
inline int64_t height(const Shape& s) { return s.size() >= 4 ? s[s.size() - 2] : 1; }
inline int64_t width(const Shape& s) { return s.back(); }

template <class T>
const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

}  // namespace kiln::nn_detail
