// Internals shared by conv.cpp and pool.cpp.
#pragma once

#include <type_traits>

#include "kiln/core/visit.h"
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

// Runs body.template operator()<T>(ins as contiguous T tensors, result) with T the compute type of
// d: float16 / bfloat16 compute in float32 and round once into out. Ints: integer dtypes are
// computed natively (else they raise torch's NotImplementedError, as do bool and complex).
template <bool Ints, class F>
void with_compute_type(const char* op, Dtype d, const TensorList& ins, Tensor& out, F&& body) {
  if (d == kBool || is_complex(d) || is_float8(d) || (!Ints && !is_floating(d)))
    raise_dtype_unsupported(op, d);
  Dtype cd = (d == kFloat16 || d == kBFloat16) ? kFloat32 : d;
  TensorList cs;
  for (const Tensor& t : ins)
    cs.push_back(t.defined() ? contiguous(is_floating(t.dtype()) ? to_dtype(t, cd) : t) : Tensor());
  Tensor res = cd == d ? out : make_tensor(out.sizes(), cd);
  visit_real(cd, op, [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<T, Half> &&
                  !std::is_same_v<T, BFloat16> && (Ints || std::is_floating_point_v<T>))
      body.template operator()<T>(cs, res);
  });
  if (cd != d) copy_(out, res);
}

// The integer dtypes torch's CPU kernels take: `small` adds int8 / uint8 / int16 / int32 to int64.
inline void check_int_dtype(const char* op, Dtype d, bool small) {
  if (is_floating(d) || d == kInt64) return;
  if (small && (d == kInt8 || d == kUInt8 || d == kInt16 || d == kInt32)) return;
  raise_dtype_unsupported(op, d);
}

template <class T>
const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

}  // namespace kiln::nn_detail
