// Dtypes, their C++ types, and PyTorch's type promotion.
#pragma once

#include <complex>
#include <cstdint>
#include <ostream>
#include <string_view>

#include "kiln/core/half.h"

namespace kiln {

enum class Dtype : int8_t {
  Bool,
  UInt8,
  Int8,
  Int16,
  UInt16,
  Int32,
  UInt32,
  Int64,
  UInt64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Complex64,
  Complex128,
  Float8_e4m3fn,
  Float8_e5m2,
  Undefined,
};
inline constexpr int kNumDtypes = 17;

inline constexpr Dtype kBool = Dtype::Bool, kUInt8 = Dtype::UInt8, kInt8 = Dtype::Int8,
                       kInt16 = Dtype::Int16, kUInt16 = Dtype::UInt16, kInt32 = Dtype::Int32,
                       kUInt32 = Dtype::UInt32, kInt64 = Dtype::Int64, kUInt64 = Dtype::UInt64,
                       kFloat16 = Dtype::Float16, kBFloat16 = Dtype::BFloat16,
                       kFloat32 = Dtype::Float32, kFloat64 = Dtype::Float64,
                       kComplex64 = Dtype::Complex64, kComplex128 = Dtype::Complex128,
                       kFloat8_e4m3fn = Dtype::Float8_e4m3fn, kFloat8_e5m2 = Dtype::Float8_e5m2;
inline constexpr Dtype kFloat = kFloat32, kDouble = kFloat64, kHalf = kFloat16, kInt = kInt32,
                       kLong = kInt64;

using complex64 = std::complex<float>;
using complex128 = std::complex<double>;

// C++ type of each dtype, and back.
template <Dtype D> struct DtypeCpp;
#define KILN_DT(D, T) \
  template <> struct DtypeCpp<Dtype::D> { using type = T; };
KILN_DT(Bool, bool) KILN_DT(UInt8, uint8_t) KILN_DT(Int8, int8_t) KILN_DT(Int16, int16_t)
KILN_DT(UInt16, uint16_t) KILN_DT(Int32, int32_t) KILN_DT(UInt32, uint32_t) KILN_DT(Int64, int64_t)
KILN_DT(UInt64, uint64_t) KILN_DT(Float16, Half) KILN_DT(BFloat16, BFloat16)
KILN_DT(Float32, float) KILN_DT(Float64, double) KILN_DT(Complex64, complex64)
KILN_DT(Complex128, complex128) KILN_DT(Float8_e4m3fn, Float8_e4m3fn)
KILN_DT(Float8_e5m2, Float8_e5m2)
#undef KILN_DT
template <Dtype D> using cpp_t = typename DtypeCpp<D>::type;

template <class T> constexpr Dtype dtype_of();
#define KILN_DTO(T, D) \
  template <> constexpr Dtype dtype_of<T>() { return Dtype::D; }
KILN_DTO(bool, Bool) KILN_DTO(uint8_t, UInt8) KILN_DTO(int8_t, Int8) KILN_DTO(int16_t, Int16)
KILN_DTO(uint16_t, UInt16) KILN_DTO(int32_t, Int32) KILN_DTO(uint32_t, UInt32)
KILN_DTO(int64_t, Int64) KILN_DTO(uint64_t, UInt64) KILN_DTO(Half, Float16)
KILN_DTO(BFloat16, BFloat16) KILN_DTO(float, Float32) KILN_DTO(double, Float64)
KILN_DTO(complex64, Complex64) KILN_DTO(complex128, Complex128)
KILN_DTO(Float8_e4m3fn, Float8_e4m3fn) KILN_DTO(Float8_e5m2, Float8_e5m2)
#undef KILN_DTO

inline constexpr size_t kItemSizes[] = {1, 1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8, 8, 16, 1, 1, 0};  // by Dtype
inline constexpr size_t itemsize(Dtype d) { return kItemSizes[static_cast<int>(d)]; }
std::string_view dtype_name(Dtype d);  // "float32", as torch prints it after "torch."
std::ostream& operator<<(std::ostream& os, Dtype d);

inline bool is_complex(Dtype d) { return d == kComplex64 || d == kComplex128; }
inline bool is_float8(Dtype d) { return d == kFloat8_e4m3fn || d == kFloat8_e5m2; }
inline bool is_floating(Dtype d) {
  return d == kFloat16 || d == kBFloat16 || d == kFloat32 || d == kFloat64 || is_float8(d);
}
inline bool is_integral(Dtype d, bool include_bool) {
  return (d >= kUInt8 && d <= kUInt64) || (include_bool && d == kBool);
}
inline bool is_unsigned(Dtype d) {
  return d == kBool || d == kUInt8 || d == kUInt16 || d == kUInt32 || d == kUInt64;
}
// uint16/32/64: promote only with floating types, as in PyTorch.
inline bool is_barebones_unsigned(Dtype d) { return d == kUInt16 || d == kUInt32 || d == kUInt64; }
inline bool is_reduced_float(Dtype d) { return d == kFloat16 || d == kBFloat16 || is_float8(d); }

Dtype to_complex(Dtype d);  // float32 -> complex64, float64 -> complex128
Dtype to_real(Dtype d);     // complex64 -> float32, complex128 -> float64; others unchanged

// torch.promote_types; raises TypeError-kind errors where PyTorch does.
Dtype promote_types(Dtype a, Dtype b);
// True when a value of `from` may be written to `to` by an in-place/out= op (torch.can_cast).
bool can_cast(Dtype from, Dtype to);

// Default dtype for Python floats (float32) and complex (complex64).
Dtype default_dtype();
void set_default_dtype(Dtype d);
inline Dtype default_complex_dtype() { return default_dtype() == kFloat64 ? kComplex128 : kComplex64; }

}  // namespace kiln
