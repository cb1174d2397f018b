// Value conversion between kiln's C++ element types with PyTorch's CPU semantics: complex -> real
// takes the real part, anything -> bool tests != 0, floats -> integers truncate (via int64, as x86
// does for out-of-range values), reduced floats convert through float.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <type_traits>

#include "kiln/core/visit.h"

namespace kiln {

namespace detail {
inline int64_t f2i64(double x) {
  // x86 cvttsd2si semantics: NaN and out-of-range give INT64_MIN.
  if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0)) return INT64_MIN;
  return static_cast<int64_t>(x);
}
}  // namespace detail

template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_complex_v<From>) {
    if constexpr (std::is_same_v<To, bool>) return v.real() != 0 || v.imag() != 0;
    else if constexpr (is_complex_v<To>) return To(static_cast<typename To::value_type>(v.real()),
                                                   static_cast<typename To::value_type>(v.imag()));
    else return convert<To>(v.real());
  } else if constexpr (is_complex_v<To>) {
    using V = typename To::value_type;
    return To(static_cast<V>(convert<std::conditional_t<std::is_same_v<V, float>, float, double>>(v)), V(0));
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (is_float_v<From> && !std::is_floating_point_v<From>) return static_cast<float>(v) != 0.f;
    else return v != From(0);
  } else if constexpr (is_float_v<From> && !std::is_floating_point_v<From>) {
    return convert<To>(static_cast<float>(v));  // half, bfloat16, float8 -> via float
  } else if constexpr (std::is_integral_v<To>) {
    if constexpr (std::is_floating_point_v<From>) {
      if constexpr (std::is_same_v<To, uint64_t>) {
        if (v >= 9223372036854775808.0 && v < 18446744073709551616.0) return static_cast<uint64_t>(v);
      }
      return static_cast<To>(detail::f2i64(static_cast<double>(v)));
    } else {
      return static_cast<To>(v);
    }
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(v);
  } else {
    // To is half / bfloat16 / float8: through float (double rounds to float first, as torch does)
    return To(static_cast<float>(v));
  }
}

}  // namespace kiln
