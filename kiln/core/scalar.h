// A Python-number-like value: bool, integer, float or complex.
#pragma once

#include <complex>
#include <cstdint>
#include <ostream>
#include <type_traits>

#include "kiln/core/dtype.h"
#include "kiln/core/visit.h"

namespace kiln {

class Scalar {
 public:
  enum class Tag : uint8_t { Bool, Int, UInt, Double, Complex };

  Scalar() : tag_(Tag::Int), i_(0) {}
  Scalar(bool b) : tag_(Tag::Bool), i_(b) {}
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  Scalar(I v) {
    if constexpr (std::is_unsigned_v<I> && sizeof(I) == 8) {
      if (v > static_cast<uint64_t>(INT64_MAX)) {
        tag_ = Tag::UInt;
        u_ = v;
        return;
      }
    }
    tag_ = Tag::Int;
    i_ = static_cast<int64_t>(v);
  }
  Scalar(double d) : tag_(Tag::Double), d_(d) {}
  Scalar(float f) : tag_(Tag::Double), d_(f) {}
  Scalar(Half h) : Scalar(static_cast<float>(h)) {}
  Scalar(BFloat16 h) : Scalar(static_cast<float>(h)) {}
  Scalar(Float8_e4m3fn h) : Scalar(static_cast<float>(h)) {}
  Scalar(Float8_e5m2 h) : Scalar(static_cast<float>(h)) {}
  template <class T>
  Scalar(std::complex<T> c) : tag_(Tag::Complex), c_(c.real(), c.imag()) {}

  Tag tag() const { return tag_; }
  bool is_bool() const { return tag_ == Tag::Bool; }
  bool is_integral() const { return tag_ == Tag::Int || tag_ == Tag::UInt; }
  bool is_floating() const { return tag_ == Tag::Double; }
  bool is_complex() const { return tag_ == Tag::Complex; }

  // The dtype this value has as a Python number in promotion: bool, int64, default float/complex.
  Dtype wrapped_dtype() const;
  // The dtype of a 0-dim tensor made from this value (float64 and complex128 for floats).
  Dtype natural_dtype() const;

  // Value converted like a C++ cast (complex -> real part).
  template <class T>
  T to() const {
    if constexpr (is_complex_v<T>) {
      using V = typename T::value_type;
      if (tag_ == Tag::Complex) return T(static_cast<V>(c_.real()), static_cast<V>(c_.imag()));
      return T(static_cast<V>(to_double()), V(0));
    } else if constexpr (std::is_same_v<T, bool>) {
      switch (tag_) {
        case Tag::Bool: case Tag::Int: return i_ != 0;
        case Tag::UInt: return u_ != 0;
        case Tag::Double: return d_ != 0;
        default: return c_ != std::complex<double>(0, 0);
      }
    } else if constexpr (std::is_integral_v<T>) {
      switch (tag_) {
        case Tag::Bool: case Tag::Int: return static_cast<T>(i_);
        case Tag::UInt: return static_cast<T>(u_);
        case Tag::Double: return static_cast<T>(double_to_int64(d_));
        default: return static_cast<T>(double_to_int64(c_.real()));
      }
    } else {
      return static_cast<T>(to_double());
    }
  }
  double to_double() const {
    switch (tag_) {
      case Tag::Bool: case Tag::Int: return static_cast<double>(i_);
      case Tag::UInt: return static_cast<double>(u_);
      case Tag::Double: return d_;
      default: return c_.real();
    }
  }
  int64_t to_int() const { return to<int64_t>(); }
  // A C++ cast where it is defined; NaN and values outside int64's range give INT64_MIN, what x86's
  // conversion instruction gives (the cast itself is undefined behaviour there).
  static int64_t double_to_int64(double d) {
    return d >= -9223372036854775808.0 && d < 9223372036854775808.0 ? static_cast<int64_t>(d) : INT64_MIN;
  }
  std::complex<double> to_complex() const { return to<std::complex<double>>(); }
  Scalar operator-() const;

 private:
  Tag tag_;
  union {
    int64_t i_;
    uint64_t u_;
    double d_;
  };
  std::complex<double> c_{};
};

std::ostream& operator<<(std::ostream& os, const Scalar& s);

}  // namespace kiln
