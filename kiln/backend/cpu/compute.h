// What the CPU kernels of the nn families (conv, pooling, upsampling) share: running a typed body on
// contiguous inputs in the compute type of a dtype, without calling an op (the conversions and copies
// are the cast loop's: kernels.h).
#pragma once

#include <type_traits>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/core/visit.h"
#include "kiln/ops/ops.h"

namespace kiln::cpu {

// Runs body.template operator()<T>(ins as contiguous T tensors, result) with T the compute type of
// d: float16 / bfloat16 compute in float32 and round once into out. Ints: integer dtypes are
// computed natively (else they raise torch's NotImplementedError, as do bool and complex).
template <bool Ints, class F>
void with_compute_type(const char* op, Dtype d, const TensorList& ins, Tensor& out, F&& body) {
  if (d == kBool || is_complex(d) || is_float8(d) || (!Ints && !is_floating(d)))
    raise_dtype_unsupported(op, d);
  Dtype cd = (d == kFloat16 || d == kBFloat16) ? kFloat32 : d;
  TensorList cs;
  for (const Tensor& t : ins) {
    if (!t.defined())
      cs.push_back(Tensor());
    else if (is_floating(t.dtype()) && t.dtype() != cd)
      cs.push_back(converted(t, cd));
    else
      cs.push_back(contiguous_of(t));
  }
  Tensor res = cd == d ? out : make_tensor(out.sizes(), cd);
  visit_real(cd, op, [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<T, Half> &&
                  !std::is_same_v<T, BFloat16> && (Ints || std::is_floating_point_v<T>))
      body.template operator()<T>(cs, res);
  });
  if (cd != d) cast_copy(out, res);
}

// The integer dtypes torch's CPU kernels take: `small` adds int8 / uint8 / int16 / int32 to int64.
inline void check_int_dtype(const char* op, Dtype d, bool small) {
  if (is_floating(d) || d == kInt64) return;
  if (small && (d == kInt8 || d == kUInt8 || d == kInt16 || d == kInt32)) return;
  raise_dtype_unsupported(op, d);
}

}  // namespace kiln::cpu
