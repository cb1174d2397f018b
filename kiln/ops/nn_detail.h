// Geometry helpers shared by the conv, pooling and upsampling ops and their CPU kernels.
#pragma once

#include "kiln/ops/ops.h"

namespace kiln::nn_detail {

// Value i (0 = height, 1 = width) of a per-spatial-dim list in 2-d form; a 1-d list gives `fill`
// for the height.
inline int64_t hw(const Shape& s, int i, int64_t fill) {
  if (s.size() == 2) return s[i];
  return i == 1 ? s[0] : fill;
}
inline Shape spatial(const Shape& s) { return Shape(s.begin() + 2, s.end()); }
// Height / width of a batched (N, C, [H,] W) shape.
inline int64_t height(const Shape& s) { return s.size() == 4 ? s[2] : 1; }
inline int64_t width(const Shape& s) { return s.back(); }

template <class T>
const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

}  // namespace kiln::nn_detail
