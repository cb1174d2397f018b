// Dtype visitors for kernels: visit(d, op, f) calls f.template operator()<T>() with the C++ type
// of d, raising a NotImplemented-kind error (torch's NotImplementedError) naming the op when d is
// outside the visitor's set.
#pragma once

#include "kiln/core/dtype.h"
#include "kiln/core/error.h"

namespace kiln {

#define KILN_VCASE(D) \
  case Dtype::D:      \
    return f.template operator()<cpp_t<Dtype::D>>();
#define KILN_VINTS \
  KILN_VCASE(UInt8) KILN_VCASE(Int8) KILN_VCASE(Int16) KILN_VCASE(UInt16) KILN_VCASE(Int32) \
  KILN_VCASE(UInt32) KILN_VCASE(Int64) KILN_VCASE(UInt64)
#define KILN_VFLOATS \
  KILN_VCASE(Float16) KILN_VCASE(BFloat16) KILN_VCASE(Float32) KILN_VCASE(Float64)
#define KILN_VCOMPLEX KILN_VCASE(Complex64) KILN_VCASE(Complex128)

[[noreturn]] void raise_dtype_unsupported(const char* op, Dtype d);

// Every dtype, float8 included.
template <class F>
decltype(auto) visit_all(Dtype d, const char* op, F&& f) {
  switch (d) {
    KILN_VCASE(Bool) KILN_VINTS KILN_VFLOATS KILN_VCOMPLEX
    KILN_VCASE(Float8_e4m3fn) KILN_VCASE(Float8_e5m2)
    default: raise_dtype_unsupported(op, d);
  }
}
// bool, integers, floats, complex (no float8): what arithmetic kernels support.
template <class F>
decltype(auto) visit_numeric(Dtype d, const char* op, F&& f) {
  switch (d) {
    KILN_VCASE(Bool) KILN_VINTS KILN_VFLOATS KILN_VCOMPLEX
    default: raise_dtype_unsupported(op, d);
  }
}
// bool, integers, floats.
template <class F>
decltype(auto) visit_real(Dtype d, const char* op, F&& f) {
  switch (d) {
    KILN_VCASE(Bool) KILN_VINTS KILN_VFLOATS
    default: raise_dtype_unsupported(op, d);
  }
}
template <class F>
decltype(auto) visit_floating(Dtype d, const char* op, F&& f) {
  switch (d) {
    KILN_VFLOATS
    default: raise_dtype_unsupported(op, d);
  }
}
template <class F>
decltype(auto) visit_floating_complex(Dtype d, const char* op, F&& f) {
  switch (d) {
    KILN_VFLOATS KILN_VCOMPLEX
    default: raise_dtype_unsupported(op, d);
  }
}
template <class F>
decltype(auto) visit_integral(Dtype d, const char* op, F&& f) {
  switch (d) {
    KILN_VCASE(Bool) KILN_VINTS
    default: raise_dtype_unsupported(op, d);
  }
}

// Accumulation / compute type: float for half, bfloat16 and float8; the type itself otherwise.
template <class T> struct OpMath { using type = T; };
template <> struct OpMath<Half> { using type = float; };
template <> struct OpMath<BFloat16> { using type = float; };
template <> struct OpMath<Float8_e4m3fn> { using type = float; };
template <> struct OpMath<Float8_e5m2> { using type = float; };
template <class T> using opmath_t = typename OpMath<T>::type;

template <class T> inline constexpr bool is_complex_v = false;
template <class T> inline constexpr bool is_complex_v<std::complex<T>> = true;
template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                                   std::is_same_v<T, BFloat16> || std::is_same_v<T, Float8_e4m3fn> ||
                                   std::is_same_v<T, Float8_e5m2>;

}  // namespace kiln
