// Scalar math shared by the CPU kernels: the special functions the C++ library lacks (erfinv,
// digamma) and PyTorch's exact semantics for integer division, remainder, shifts and rounding.
#pragma once

// Compiled once per ISA with different flags: everything here lives in that ISA's namespace, so no
// out-of-line copy of an inline function is shared (merged by the linker) between the tables.
#ifndef KILN_ISA
#error "KILN_ISA must name the ISA namespace (base, avx2, avx512)"
#endif

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kiln/core/visit.h"

namespace kiln::cpu::KILN_ISA {

// GELU's pieces. Phi(x) = P(N(0,1) <= x) through erfc, which keeps its relative accuracy in the
// negative tail (1 + erf(x) cancels there); the tanh form's argument u = sqrt(2/pi) (x + 0.044715 x^3),
// with 0.5 (1 + tanh(u)) written as 1 / (1 + exp(-2u)) for the same reason.
template <class T>
inline T normal_cdf(T x) {
  return T(0.5) * std::erfc(-x * static_cast<T>(0.70710678118654752440));
}
template <class T>
inline T gelu_tanh_arg(T x) {
  return static_cast<T>(0.79788456080286535588) * (x + static_cast<T>(0.044715) * x * x * x);
}
// The largest argument exp() takes without overflowing, rounded down.
template <class T>
constexpr T max_exp_arg() {
  return std::is_same_v<T, float> ? T(88) : T(709);
}

template <class T>
inline T erfinv_impl(T y) {
  // Rational approximation for a first guess, then two Newton steps on erf(x) - y.
  if (std::isnan(y) || y < T(-1) || y > T(1)) return std::numeric_limits<T>::quiet_NaN();
  if (y == T(1)) return std::numeric_limits<T>::infinity();
  if (y == T(-1)) return -std::numeric_limits<T>::infinity();
  double x = static_cast<double>(y);
  double w = -std::log((1.0 - x) * (1.0 + x)), p;
  if (w < 6.25) {
    w -= 3.125;
    p = -3.6444120640178196996e-21;
    p = -1.685059138182016589e-19 + p * w;
    p = 1.2858480715256400167e-18 + p * w;
    p = 1.115787767802518096e-17 + p * w;
    p = -1.333171662854620906e-16 + p * w;
    p = 2.0972767875968561637e-17 + p * w;
    p = 6.6376381343583238325e-15 + p * w;
    p = -4.0545662729752068639e-14 + p * w;
    p = -8.1519341976054721522e-14 + p * w;
    p = 2.6335093153082322977e-12 + p * w;
    p = -1.2975133253453532498e-11 + p * w;
    p = -5.4154120542946279317e-11 + p * w;
    p = 1.051212273321532285e-09 + p * w;
    p = -4.1126339803469836976e-09 + p * w;
    p = -2.9070369957882005086e-08 + p * w;
    p = 4.2347877827932403518e-07 + p * w;
    p = -1.3654692000834678645e-06 + p * w;
    p = -1.3882523362786468719e-05 + p * w;
    p = 0.0001867342080340571352 + p * w;
    p = -0.00074070253416626697512 + p * w;
    p = -0.0060336708714301490533 + p * w;
    p = 0.24015818242558961693 + p * w;
    p = 1.6536545626831027356 + p * w;
  } else if (w < 16.0) {
    w = std::sqrt(w) - 3.25;
    p = 2.2137376921775787049e-09;
    p = 9.0756561938885390979e-08 + p * w;
    p = -2.7517406297064545428e-07 + p * w;
    p = 1.8239629214389227755e-08 + p * w;
    p = 1.5027403968909827627e-06 + p * w;
    p = -4.013867526981545969e-06 + p * w;
    p = 2.9234449089955446044e-06 + p * w;
    p = 1.2475304481671778723e-05 + p * w;
    p = -4.7318229009055733981e-05 + p * w;
    p = 6.8284851459573175448e-05 + p * w;
    p = 2.4031110387097893999e-05 + p * w;
    p = -0.0003550375203628474796 + p * w;
    p = 0.00095328937973738049703 + p * w;
    p = -0.0016882755560235047313 + p * w;
    p = 0.0024914420961078508066 + p * w;
    p = -0.0037512085075692412107 + p * w;
    p = 0.005370914553590063617 + p * w;
    p = 1.0052589676941592334 + p * w;
    p = 3.0838856104922207635 + p * w;
  } else {
    w = std::sqrt(w) - 5.0;
    p = -2.7109920616438573243e-11;
    p = -2.5556418169965252055e-10 + p * w;
    p = 1.5076572693500548083e-09 + p * w;
    p = -3.7894654401267369937e-09 + p * w;
    p = 7.6157012080783393804e-09 + p * w;
    p = -1.4960026627149240478e-08 + p * w;
    p = 2.9147953450901080826e-08 + p * w;
    p = -6.7711997758452339498e-08 + p * w;
    p = 2.2900482228026654717e-07 + p * w;
    p = -9.9298272942317002539e-07 + p * w;
    p = 4.5260625972231537039e-06 + p * w;
    p = -1.9681778105531670567e-05 + p * w;
    p = 7.5995277030017761139e-05 + p * w;
    p = -0.00021503011930044477347 + p * w;
    p = -0.00013871931833623122026 + p * w;
    p = 1.0103004648645343977 + p * w;
    p = 4.8499064014085844221 + p * w;
  }
  double r = p * x;
  // Newton refinement in double
  for (int i = 0; i < 2; ++i) {
    double err = std::erf(r) - x;
    r -= err / (1.1283791670955126 * std::exp(-r * r));
  }
  return static_cast<T>(r);
}

template <class T>
inline T digamma_impl(T xin) {
  double x = static_cast<double>(xin);
  if (x == 0) return static_cast<T>(std::copysign(std::numeric_limits<double>::infinity(), -x));
  if (x < 0) {
    if (x == std::trunc(x)) return std::numeric_limits<T>::quiet_NaN();
    // reflection: psi(1-x) - psi(x) = pi / tan(pi x)
    double r = std::fmod(x, 1.0);  // tan(pi x) computed on the fractional part for accuracy
    return static_cast<T>(digamma_impl<double>(1.0 - x) - M_PI / std::tan(M_PI * r));
  }
  double result = 0;
  while (x < 10) {
    result -= 1 / x;
    x += 1;
  }
  if (x == 10) return static_cast<T>(result + 2.25175258906672110764);
  double y = 0;
  if (x < 1e17) {
    double z = 1 / (x * x);
    y = z * (8.33333333333333333333e-2 +
             z * (-8.33333333333333333333e-3 +
                  z * (3.96825396825396825397e-3 +
                       z * (-4.16666666666666666667e-3 +
                            z * (7.57575757575757575758e-3 +
                                 z * (-2.10927960927960927961e-2 + z * 8.33333333333333333333e-2))))));
  }
  return static_cast<T>(result + std::log(x) - 0.5 / x - y);
}

template <class T>
inline T lgamma_impl(T x) {
  if constexpr (std::is_same_v<T, float>) {
    int s;
    return ::lgammaf_r(x, &s);
  } else {
    int s;
    return ::lgamma_r(static_cast<double>(x), &s);
  }
}

// Python-style floor division for floats (as CPython and PyTorch compute it).
template <class T>
inline T div_floor_float(T a, T b) {
  if (b == 0) return a / b;
  T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= T(1);
  T fl;
  if (div != 0) {
    fl = std::floor(div);
    if (div - fl > T(0.5)) fl += T(1);
  } else {
    fl = std::copysign(T(0), a / b);
  }
  return fl;
}

template <class T>
inline T div_floor_int(T a, T b) {
  if constexpr (std::is_unsigned_v<T>) {
    return a / b;
  } else {
    if (b == -1) return static_cast<T>(-static_cast<std::make_unsigned_t<T>>(a));  // no overflow trap
    T q = a / b, r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) --q;
    return q;
  }
}

template <class T>
inline T remainder_float(T a, T b) {
  T mod = std::fmod(a, b);
  if (mod != 0 && ((b < 0) != (mod < 0))) mod += b;
  return mod;
}

template <class T>
inline T remainder_int(T a, T b) {
  if constexpr (std::is_unsigned_v<T>) {
    return a % b;
  } else {
    if (b == -1) return 0;
    T r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }
}

template <class T>
inline T pow_int(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp & 1) ? -1 : 1;
      return 0;
    }
  }
  using U = std::make_unsigned_t<T>;
  U result = 1, b = static_cast<U>(base);
  auto e = static_cast<U>(exp);
  while (e) {
    if (e & 1) result *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<T>(result);
}

template <class T>
inline T shift_left(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a && !b;
  } else {
    constexpr int bits = sizeof(T) * 8;
    if (static_cast<std::make_signed_t<T>>(b) < 0 || static_cast<int64_t>(b) >= bits) return 0;
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) << b);
  }
}

template <class T>
inline T shift_right(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a && !b;
  } else {
    constexpr int bits = sizeof(T) * 8;
    if (static_cast<std::make_signed_t<T>>(b) < 0 || static_cast<int64_t>(b) >= bits)
      return static_cast<T>(a >> (bits - 1));
    return static_cast<T>(a >> b);
  }
}

template <class T>
inline T round_decimals(T x, int64_t decimals) {
  bool neg = decimals < 0;
  T ten = static_cast<T>(std::pow(T(10), static_cast<T>(neg ? -decimals : decimals)));
  return neg ? std::nearbyint(x / ten) * ten : std::nearbyint(x * ten) / ten;
}

}  // namespace kiln::cpu::KILN_ISA
