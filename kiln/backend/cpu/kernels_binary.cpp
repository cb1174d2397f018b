// Binary elementwise inner loops (compiled once per ISA). Inputs share the compute dtype T;
// comparisons and logical ops write bool.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kiln/backend/cpu/isa_util.h"
#include "kiln/backend/cpu/math.h"
#include "kiln/backend/cpu/vec.h"

namespace kiln::cpu::KILN_ISA {
namespace {

using B = BinaryOp;

template <B OP>
constexpr bool returns_bool() {
  return OP == B::Eq || OP == B::Ne || OP == B::Lt || OP == B::Le || OP == B::Gt || OP == B::Ge ||
         OP == B::LogicalAnd || OP == B::LogicalOr || OP == B::LogicalXor;
}

template <B OP, class T>
constexpr bool supported() {
  // torch 2.13 supports only these on uint16/32/64 and float8 (tests/python/test_elementwise.py)
  if constexpr (std::is_same_v<T, Float8_e4m3fn> || std::is_same_v<T, Float8_e5m2>)
    return OP == B::Mul || OP == B::Eq || OP == B::Ne;
  if constexpr (std::is_same_v<T, uint16_t> || std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t>)
    return OP == B::Mul || OP == B::BitAnd || OP == B::BitOr || OP == B::BitXor || OP == B::Eq ||
           OP == B::Ne;
  constexpr bool b = std::is_same_v<T, bool>, i = is_int_v<T>, f = is_float_v<T>, c = is_complex_v<T>;
  switch (OP) {
    case B::Add: case B::Sub: case B::Mul: return b || i || f || c;
    case B::Div: return f || c;
    case B::DivTrunc: case B::DivFloor: case B::Remainder: case B::Fmod: return i || f;
    case B::Pow: return b || i || f || c;
    case B::Maximum: case B::Minimum: return b || i || f;
    case B::Fmax: case B::Fmin: return b || i || f;
    case B::BitAnd: case B::BitOr: case B::BitXor: return b || i;
    case B::Shl: case B::Shr: return i;
    case B::Gcd: case B::Lcm: return i;
    case B::LogicalAnd: case B::LogicalOr: case B::LogicalXor: return true;
    case B::Eq: case B::Ne: return true;
    case B::Lt: case B::Le: case B::Gt: case B::Ge: return b || i || f;
    case B::ClampMinT: case B::ClampMaxT: return i || f;
    case B::Polar: case B::Complex: return std::is_same_v<T, float> || std::is_same_v<T, double>;
    case B::LogAddExp: return f || c;
    default: return f;  // Atan2 Hypot Copysign Nextafter Xlogy
  }
}

// torch's calc_gcd and lcm (ATen/native/Math.h), wrap-arounds included: |v| in T (the most
// negative value stays itself), Euclid's loop; lcm = |a / gcd * b| in C++'s promoted type of T,
// wrapping as torch's compiled code does, then T (0 when the gcd is 0).
template <class T>
inline T abs_int(T v) {
  if constexpr (std::is_signed_v<T>) return v < 0 ? static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(v)) : v;
  else return v;
}
template <class T>
inline T gcd_int(T a, T b) {
  a = abs_int(a), b = abs_int(b);
  while (a != 0) {
    T c = a;
    a = static_cast<T>(b % a);
    b = c;
  }
  return b;
}
template <class T>
inline T lcm_int(T a, T b) {
  const T g = gcd_int(a, b);
  if (g == 0) return T(0);
  using P = decltype(a / g * b);
  using U = std::make_unsigned_t<P>;
  const P m = static_cast<P>(static_cast<U>(static_cast<P>(a / g)) * static_cast<U>(static_cast<P>(b)));
  return static_cast<T>(abs_int<P>(m));
}

template <B OP, class M>
inline auto apply(M a, M b, M alpha) {
  if constexpr (OP == B::Add) {
    if constexpr (std::is_same_v<M, bool>) return static_cast<bool>(a || (b && alpha));
    else if constexpr (kWraps<M>) return static_cast<M>(Wrap<M>(a) + Wrap<M>(alpha) * Wrap<M>(b));
    else return static_cast<M>(a + alpha * b);
  } else if constexpr (OP == B::Sub) {
    if constexpr (kWraps<M>) return static_cast<M>(Wrap<M>(a) - Wrap<M>(alpha) * Wrap<M>(b));
    else return static_cast<M>(a - alpha * b);
  } else if constexpr (OP == B::Mul) {
    if constexpr (std::is_same_v<M, bool>) return static_cast<bool>(a && b);
    else if constexpr (kWraps<M>) return static_cast<M>(Wrap<M>(a) * Wrap<M>(b));
    else return static_cast<M>(a * b);
  } else if constexpr (OP == B::Div) return static_cast<M>(a / b);
  else if constexpr (OP == B::DivTrunc) {
    if constexpr (std::is_integral_v<M>) {
      if constexpr (std::is_signed_v<M>)
        if (b == -1) return static_cast<M>(-static_cast<std::make_unsigned_t<M>>(a));
      return static_cast<M>(a / b);
    } else {
      return std::trunc(a / b);
    }
  } else if constexpr (OP == B::DivFloor) {
    if constexpr (std::is_integral_v<M>) return div_floor_int(a, b);
    else return div_floor_float(a, b);
  } else if constexpr (OP == B::Remainder) {
    if constexpr (std::is_integral_v<M>) return remainder_int(a, b);
    else return remainder_float(a, b);
  } else if constexpr (OP == B::Fmod) {
    if constexpr (std::is_integral_v<M>) {
      if constexpr (std::is_signed_v<M>)
        if (b == -1) return M(0);
      return static_cast<M>(a % b);
    } else {
      return std::fmod(a, b);
    }
  } else if constexpr (OP == B::Pow) {
    if constexpr (std::is_same_v<M, bool>) return static_cast<bool>(a || !b);
    else if constexpr (std::is_integral_v<M>) return pow_int(a, b);
    else if constexpr (is_complex_v<M>) return std::pow(a, b);
    else {
      if (b == M(2)) return a * a;
      return std::pow(a, b);
    }
  } else if constexpr (OP == B::Atan2) return std::atan2(a, b);
  else if constexpr (OP == B::Maximum || OP == B::Minimum) {
    if constexpr (std::is_floating_point_v<M>) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<M>::quiet_NaN();
    }
    if constexpr (OP == B::Maximum) return a > b ? a : b;
    else return a < b ? a : b;
  } else if constexpr (OP == B::Fmax) {
    if constexpr (std::is_floating_point_v<M>) return std::fmax(a, b);
    else return a > b ? a : b;
  } else if constexpr (OP == B::Fmin) {
    if constexpr (std::is_floating_point_v<M>) return std::fmin(a, b);
    else return a < b ? a : b;
  } else if constexpr (OP == B::Hypot) return std::hypot(a, b);
  else if constexpr (OP == B::Copysign) return std::copysign(a, b);
  else if constexpr (OP == B::Nextafter) return std::nextafter(a, b);
  else if constexpr (OP == B::BitAnd) return static_cast<M>(a & b);
  else if constexpr (OP == B::BitOr) return static_cast<M>(a | b);
  else if constexpr (OP == B::BitXor) return static_cast<M>(a ^ b);
  else if constexpr (OP == B::Shl) return shift_left(a, b);
  else if constexpr (OP == B::Shr) return shift_right(a, b);
  else if constexpr (OP == B::Gcd) return gcd_int(a, b);
  else if constexpr (OP == B::Lcm) return lcm_int(a, b);
  else if constexpr (OP == B::LogicalAnd) return (a != M(0)) && (b != M(0));
  else if constexpr (OP == B::LogicalOr) return (a != M(0)) || (b != M(0));
  else if constexpr (OP == B::LogicalXor) return (a != M(0)) != (b != M(0));
  else if constexpr (OP == B::Eq) return a == b;
  else if constexpr (OP == B::Ne) return a != b;
  else if constexpr (OP == B::Lt) return a < b;
  else if constexpr (OP == B::Le) return a <= b;
  else if constexpr (OP == B::Gt) return a > b;
  else if constexpr (OP == B::Ge) return a >= b;
  else if constexpr (OP == B::Xlogy) {
    if (std::isnan(b)) return b;
    if (a == M(0)) return M(0);
    return static_cast<M>(a * std::log(b));
  } else if constexpr (OP == B::ClampMinT) {  // clamp(x, min=b) with NaN propagation of either
    if constexpr (std::is_floating_point_v<M>)
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<M>::quiet_NaN();
    return a < b ? b : a;
  } else if constexpr (OP == B::ClampMaxT) {
    if constexpr (std::is_floating_point_v<M>)
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<M>::quiet_NaN();
    return a > b ? b : a;
  } else if constexpr (OP == B::GeluBackward) {
    M pdf = std::exp(M(-0.5) * b * b) * static_cast<M>(0.5 * M_2_SQRTPI * M_SQRT1_2);
    return static_cast<M>(a * (normal_cdf(b) + b * pdf));
  } else if constexpr (OP == B::GeluTanhBackward) {
    // with s = sigmoid(2u), u = k (x + c x^3): gelu = x s and gelu' = s + 2 x e s^2 u', e = exp(-2u)
    // (the exponent capped so that e s^2 -> 0 instead of inf * 0 far in the negative tail)
    const M k = static_cast<M>(M_SQRT2 * M_2_SQRTPI * 0.5), c = static_cast<M>(0.044715);
    M e = std::exp(std::min(M(-2) * gelu_tanh_arg(b), max_exp_arg<M>())), s = M(1) / (M(1) + e);
    return static_cast<M>(a * (s + M(2) * b * e * s * s * k * (M(1) + M(3) * c * b * b)));
  } else if constexpr (OP == B::LogAddExp) {
    // log(e^a + e^b) = max + log1p(e^-|a - b|); two equal infinities give themselves (no inf - inf)
    if constexpr (is_complex_v<M>) {
      using R = typename M::value_type;
      const M& hi = a.real() < b.real() ? b : a;
      const M& lo = a.real() < b.real() ? a : b;
      if (std::isnan(lo.real()) || std::isnan(lo.imag()))
        return M(std::numeric_limits<R>::quiet_NaN(), std::numeric_limits<R>::quiet_NaN());
      if (std::isinf(lo.real()) && lo.real() == hi.real())
        return lo.real() < 0 ? lo : std::log(std::exp(lo) + std::exp(hi));
      return std::log(R(1) + std::exp(lo - hi)) + hi;
    } else {
      if (std::isinf(a) && a == b) return a;
      return static_cast<M>((a < b ? b : a) + std::log1p(std::exp(-std::abs(a - b))));
    }
  } else if constexpr (OP == B::LogAddExp2) {  // the same in base 2
    if (std::isinf(a) && a == b) return a;
    return static_cast<M>((a < b ? b : a) + std::log1p(std::exp2(-std::abs(a - b))) * M(M_LOG2E));
  } else if constexpr (OP == B::Polar) return std::complex<M>(a * std::cos(b), a * std::sin(b));
  else if constexpr (OP == B::Complex) return std::complex<M>(a, b);
  else {
    static_assert(OP == B::Count, "unhandled binary op");
    return a;
  }
}

template <B OP, class T>
using out_t = std::conditional_t<returns_bool<OP>(), bool,
                                 std::conditional_t<(OP == B::Polar || OP == B::Complex),
                                                    std::complex<real_of_t<T>>, T>>;

// torch evaluates floor division of half / bfloat16 in the storage type: every step rounds.
template <class T>
inline float div_floor_rounded(float a, float b) {
  auto r = [](float x) { return static_cast<float>(T(x)); };
  if (b == 0) return r(a / b);
  float mod = r(std::fmod(a, b));
  float div = r(r(a - mod) / b);
  if (mod != 0 && (b < 0) != (mod < 0)) div = r(div - 1.0f);
  float fl;
  if (div != 0) {
    fl = std::floor(div);
    if (r(div - fl) > 0.5f) fl = r(fl + 1.0f);
  } else {
    fl = std::copysign(0.0f, r(a / b));
  }
  return fl;
}

template <B OP>
constexpr bool gelu_grad() { return OP == B::GeluBackward || OP == B::GeluTanhBackward; }

// half / bfloat16 arithmetic through float vectors (the conversions are what costs; the compiler
// does not vectorise the scalar ones).
template <B OP>
constexpr bool has_vec() { return OP == B::Add || OP == B::Sub || OP == B::Mul || OP == B::Div || gelu_grad<OP>(); }

template <B OP>
inline VecF vec_apply(VecF a, VecF b, VecF alpha) {
  if constexpr (OP == B::Add) return a + alpha * b;
  else if constexpr (OP == B::Sub) return a - alpha * b;
  else if constexpr (OP == B::Mul) return a * b;
  else if constexpr (OP == B::GeluBackward) {
    VecF gauss;
    VecF cdf = normal_cdf_fast(b, &gauss);
    return a * (cdf + b * gauss * VecF::set1(static_cast<float>(0.5 * M_2_SQRTPI * M_SQRT1_2)));
  } else if constexpr (OP == B::GeluTanhBackward) {  // as the scalar form above
    const VecF one = VecF::set1(1.0f);
    const VecF k = VecF::set1(static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5)), c3 = VecF::set1(3.0f * 0.044715f);
    VecF e = VecF::min(VecF::set1(-2.0f) * gelu_tanh_arg_fast(b), VecF::set1(max_exp_arg<float>())).exp();
    VecF s = one / (one + e);
    return a * (s + VecF::set1(2.0f) * b * e * s * s * k * (one + c3 * b * b));
  } else return a / b;
}

template <B OP, class T>
bool vec_loop(char** data, const int64_t* s, int64_t n, float alpha) {
  constexpr int64_t st = sizeof(T);
  if (s[0] != st || s[1] != st || (s[2] != st && s[2] != 0)) return false;
  T* o = reinterpret_cast<T*>(data[0]);
  const T* a = reinterpret_cast<const T*>(data[1]);
  const T* b = reinterpret_cast<const T*>(data[2]);
  VecF al = VecF::set1(alpha);
  int64_t i = 0;
  if (s[2] == 0) {
    VecF bv = VecF::set1(static_cast<float>(*b));
    for (; i + VecF::N <= n; i += VecF::N) store_from_float(o + i, vec_apply<OP>(load_as_float(a + i), bv, al));
  } else {
    for (; i + VecF::N <= n; i += VecF::N)
      store_from_float(o + i, vec_apply<OP>(load_as_float(a + i), load_as_float(b + i), al));
  }
  if (i < n) {  // the tail through the same vector code on padded buffers (position-independent results)
    T ba[VecF::N] = {}, bb[VecF::N] = {}, bo[VecF::N];
    const size_t bytes = static_cast<size_t>(n - i) * sizeof(T);
    std::memcpy(ba, a + i, bytes);
    if (s[2] == 0) {
      for (int l = 0; l < VecF::N; ++l) bb[l] = *b;
    } else {
      std::memcpy(bb, b + i, bytes);
    }
    store_from_float(bo, vec_apply<OP>(load_as_float(ba), load_as_float(bb), al));
    std::memcpy(o + i, bo, bytes);
  }
  return true;
}

template <B OP, class T>
void loop(char** data, const int64_t* s, int64_t n, const void* pp) {
  using O = out_t<OP, T>;
  using M = opmath_t<T>;
  if constexpr (has_vec<OP>() && (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half> ||
                                   (gelu_grad<OP>() && std::is_same_v<T, float>))) {
    if (vec_loop<OP, T>(data, s, n, static_cast<float>(static_cast<const KParams*>(pp)->d[0]))) return;
  }
  if constexpr (OP == B::DivFloor && (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)) {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<T*>(data[0] + i * s[0]) = T(div_floor_rounded<T>(
          static_cast<float>(*reinterpret_cast<const T*>(data[1] + i * s[1])),
          static_cast<float>(*reinterpret_cast<const T*>(data[2] + i * s[2]))));
    return;
  }
  const KParams& p = *static_cast<const KParams*>(pp);
  M alpha;
  if constexpr (is_complex_v<M>) alpha = M(static_cast<typename M::value_type>(p.d[0]),
                                             static_cast<typename M::value_type>(p.c_im[0]));
  else if constexpr (std::is_integral_v<M>) alpha = static_cast<M>(p.i[0]);
  else alpha = static_cast<M>(p.d[0]);
  O* __restrict o = reinterpret_cast<O*>(data[0]);
  const T* a = reinterpret_cast<const T*>(data[1]);
  const T* b = reinterpret_cast<const T*>(data[2]);
  constexpr int64_t so = sizeof(O), st = sizeof(T);
  if (s[0] == so && s[1] == st && s[2] == st) {
    for (int64_t i = 0; i < n; ++i)
      o[i] = static_cast<O>(apply<OP, M>(static_cast<M>(a[i]), static_cast<M>(b[i]), alpha));
  } else if (s[0] == so && s[1] == st && s[2] == 0) {
    const M bv = static_cast<M>(*b);
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<O>(apply<OP, M>(static_cast<M>(a[i]), bv, alpha));
  } else if (s[0] == so && s[1] == 0 && s[2] == st) {
    const M av = static_cast<M>(*a);
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<O>(apply<OP, M>(av, static_cast<M>(b[i]), alpha));
  } else {
    char* op = data[0];
    const char* ap = data[1];
    const char* bp = data[2];
    for (int64_t i = 0; i < n; ++i, op += s[0], ap += s[1], bp += s[2])
      *reinterpret_cast<O*>(op) = static_cast<O>(apply<OP, M>(
          static_cast<M>(*reinterpret_cast<const T*>(ap)), static_cast<M>(*reinterpret_cast<const T*>(bp)), alpha));
  }
}

}  // namespace

void fill_binary(KernelTable& t) {
  for_each_code<static_cast<int>(B::Count)>([&]<int I>() {
    constexpr B OP = static_cast<B>(I);
    auto set = [&]<class T>() {
      if constexpr (supported<OP, T>()) t.binary[I][static_cast<int>(dtype_of<T>())] = &loop<OP, T>;
    };
    for_each_type(set);
    set.template operator()<Float8_e4m3fn>();
    set.template operator()<Float8_e5m2>();
  });
}

}  // namespace kiln::cpu::KILN_ISA
