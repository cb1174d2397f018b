// Unary elementwise inner loops (compiled once per ISA).
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>

#include <xmmintrin.h>

#include "kiln/backend/cpu/isa_util.h"
#include "kiln/backend/cpu/math.h"
#include "kiln/backend/cpu/vec.h"

namespace kiln::cpu::KILN_ISA {
namespace {

using U = UnaryOp;

template <U OP>
constexpr bool returns_bool() {
  return OP == U::IsNan || OP == U::IsInf || OP == U::IsFinite || OP == U::IsPosInf ||
         OP == U::IsNegInf || OP == U::Signbit || OP == U::LogicalNot;
}

template <class T>
inline constexpr bool is_f8_v = std::is_same_v<T, Float8_e4m3fn> || std::is_same_v<T, Float8_e5m2>;
template <class T>
inline constexpr bool is_bare_unsigned_v =
    std::is_same_v<T, uint16_t> || std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t>;

// Which (op, dtype) pairs exist follows torch 2.13 exactly (checked by tests/python/test_elementwise.py):
// uint16/32/64 and float8 support only a handful of ops.
template <U OP, class T>
constexpr bool supported() {
  if constexpr (is_f8_v<T>) {
    if (OP == U::IsInf || OP == U::IsFinite) return std::is_same_v<T, Float8_e5m2>;
    return OP == U::Abs || OP == U::IsNan;
  }
  if constexpr (is_bare_unsigned_v<T>) {
    return OP == U::IsNan || OP == U::IsInf || OP == U::IsFinite || OP == U::IsPosInf ||
           OP == U::IsNegInf || OP == U::Signbit;
  }
  constexpr bool b = std::is_same_v<T, bool>, i = is_int_v<T>, f = is_float_v<T>, c = is_complex_v<T>;
  switch (OP) {
    case U::LogicalNot: case U::IsNan: case U::IsInf: case U::IsFinite: return true;
    case U::IsPosInf: case U::IsNegInf: case U::Signbit: return !c;
    case U::Neg: case U::Abs: case U::Square: return i || f || c;
    case U::Sign: return b || i || f;
    case U::Sgn: return b || i || f || c;
    case U::BitwiseNot: return b || i;
    case U::Relu: case U::Relu6: case U::Hardtanh: case U::ClampMin: case U::ClampMax: case U::Clamp:
      return i || f;
    case U::Silu: case U::Expm1: case U::Log1p: return f || c;
    case U::Conj: case U::Real: case U::Imag: case U::Angle: return c || f;
    case U::Reciprocal: case U::Sqrt: case U::Rsqrt: case U::Exp: case U::Exp2: case U::Log:
    case U::Log2: case U::Log10: case U::Sin: case U::Cos: case U::Tan: case U::Asin: case U::Acos:
    case U::Atan: case U::Sinh: case U::Cosh: case U::Tanh: case U::Asinh: case U::Acosh:
    case U::Atanh: case U::Sigmoid:
      return f || c;
    default: return f;
  }
}

template <U OP, class M>
inline auto apply(M x, const KParams& p) {
  using std::abs, std::exp, std::log, std::sqrt;
  constexpr bool cx = is_complex_v<M>;
  if constexpr (OP == U::Neg) return static_cast<M>(-x);
  else if constexpr (OP == U::Abs) {
    if constexpr (cx) return std::abs(x);
    else if constexpr (std::is_unsigned_v<M>) return x;
    else if constexpr (std::is_integral_v<M>) return static_cast<M>(x < 0 ? -x : x);
    else return std::fabs(x);
  } else if constexpr (OP == U::Sign || OP == U::Sgn) {
    if constexpr (cx) {
      auto a = std::abs(x);
      return a == 0 ? M(0) : x / a;
    } else if constexpr (std::is_same_v<M, bool>) {
      return x;
    } else {
      return static_cast<M>((M(0) < x) - (x < M(0)));
    }
  } else if constexpr (OP == U::Reciprocal) return static_cast<M>(M(1) / x);
  else if constexpr (OP == U::Sqrt) return sqrt(x);
  else if constexpr (OP == U::Rsqrt) return static_cast<M>(M(1) / sqrt(x));
  else if constexpr (OP == U::Square) return static_cast<M>(x * x);
  else if constexpr (OP == U::Exp) return exp(x);
  else if constexpr (OP == U::Exp2) {
    if constexpr (cx) return exp(x * static_cast<typename M::value_type>(M_LN2));
    else return std::exp2(x);
  } else if constexpr (OP == U::Expm1) {
    if constexpr (cx) return static_cast<M>(exp(x) - M(1));
    else return std::expm1(x);
  }
  else if constexpr (OP == U::Log) return log(x);
  else if constexpr (OP == U::Log2) {
    if constexpr (cx) return static_cast<M>(log(x) / static_cast<typename M::value_type>(M_LN2));
    else return std::log2(x);
  } else if constexpr (OP == U::Log10) return std::log10(x);
  else if constexpr (OP == U::Log1p) {
    if constexpr (cx) return log(M(1) + x);
    else return std::log1p(x);
  }
  else if constexpr (OP == U::Sin) return std::sin(x);
  else if constexpr (OP == U::Cos) return std::cos(x);
  else if constexpr (OP == U::Tan) return std::tan(x);
  else if constexpr (OP == U::Asin) return std::asin(x);
  else if constexpr (OP == U::Acos) return std::acos(x);
  else if constexpr (OP == U::Atan) return std::atan(x);
  else if constexpr (OP == U::Sinh) return std::sinh(x);
  else if constexpr (OP == U::Cosh) return std::cosh(x);
  else if constexpr (OP == U::Tanh) return std::tanh(x);
  else if constexpr (OP == U::Asinh) return std::asinh(x);
  else if constexpr (OP == U::Acosh) return std::acosh(x);
  else if constexpr (OP == U::Atanh) return std::atanh(x);
  else if constexpr (OP == U::Sigmoid) return static_cast<M>(M(1) / (M(1) + exp(-x)));
  else if constexpr (OP == U::Logit) {
    M e = static_cast<M>(p.d[0]);
    if (p.i[0]) x = x < e ? e : (x > M(1) - e ? M(1) - e : x);
    return log(x / (M(1) - x));
  } else if constexpr (OP == U::Erf) return std::erf(x);
  else if constexpr (OP == U::Erfc) return std::erfc(x);
  else if constexpr (OP == U::Erfinv) return erfinv_impl(x);
  else if constexpr (OP == U::Lgamma) return lgamma_impl(x);
  else if constexpr (OP == U::Digamma) return digamma_impl(x);
  else if constexpr (OP == U::Floor) return std::floor(x);
  else if constexpr (OP == U::Ceil) return std::ceil(x);
  else if constexpr (OP == U::Round) return std::nearbyint(x);
  else if constexpr (OP == U::RoundDecimals) return round_decimals(x, p.i[0]);
  else if constexpr (OP == U::Trunc) return std::trunc(x);
  else if constexpr (OP == U::Frac) return static_cast<M>(x - std::trunc(x));
  else if constexpr (OP == U::BitwiseNot) {
    if constexpr (std::is_same_v<M, bool>) return !x;
    else return static_cast<M>(~x);
  } else if constexpr (OP == U::LogicalNot) return !(x != M(0));
  else if constexpr (OP == U::IsNan) {
    if constexpr (cx) return std::isnan(x.real()) || std::isnan(x.imag());
    else if constexpr (std::is_floating_point_v<M>) return std::isnan(x);
    else return false;
  } else if constexpr (OP == U::IsInf) {
    if constexpr (cx) return std::isinf(x.real()) || std::isinf(x.imag());
    else if constexpr (std::is_floating_point_v<M>) return std::isinf(x);
    else return false;
  } else if constexpr (OP == U::IsFinite) {
    if constexpr (cx) return std::isfinite(x.real()) && std::isfinite(x.imag());
    else if constexpr (std::is_floating_point_v<M>) return static_cast<bool>(std::isfinite(x));
    else return true;
  } else if constexpr (OP == U::IsPosInf) {
    if constexpr (std::is_floating_point_v<M>) return x == std::numeric_limits<M>::infinity();
    else return false;
  } else if constexpr (OP == U::IsNegInf) {
    if constexpr (std::is_floating_point_v<M>) return x == -std::numeric_limits<M>::infinity();
    else return false;
  } else if constexpr (OP == U::Signbit) {
    // bit test instead of std::signbit: gcc 12 ICEs vectorising signbit over bfloat16 input
    if constexpr (std::is_same_v<M, float>) return (std::bit_cast<uint32_t>(x) >> 31) != 0;
    else if constexpr (std::is_same_v<M, double>) return (std::bit_cast<uint64_t>(x) >> 63) != 0;
    else if constexpr (std::is_signed_v<M>) return x < 0;
    else return false;
  } else if constexpr (OP == U::Relu) return x < M(0) ? M(0) : x;  // NaN passes through
  else if constexpr (OP == U::Relu6) {
    if constexpr (std::is_floating_point_v<M>)
      if (std::isnan(x)) return x;
    return x < M(0) ? M(0) : (x > M(6) ? M(6) : x);
  }
  else if constexpr (OP == U::LeakyRelu) return x > M(0) ? x : static_cast<M>(x * static_cast<M>(p.d[0]));
  else if constexpr (OP == U::Elu) {  // d[0]=alpha d[1]=scale d[2]=input_scale
    M a = static_cast<M>(p.d[0]), s = static_cast<M>(p.d[1]), is = static_cast<M>(p.d[2]);
    return x > M(0) ? static_cast<M>(x * s) : static_cast<M>(std::expm1(x * is) * a * s);
  } else if constexpr (OP == U::Gelu) return static_cast<M>(x * normal_cdf(x));
  else if constexpr (OP == U::GeluTanh) return static_cast<M>(x / (M(1) + std::exp(M(-2) * gelu_tanh_arg(x))));
  else if constexpr (OP == U::Silu) return static_cast<M>(x / (M(1) + exp(-x)));
  else if constexpr (OP == U::Mish) return static_cast<M>(x * std::tanh(std::log1p(exp(x))));
  else if constexpr (OP == U::Softplus) {  // d[0]=beta d[1]=threshold
    M b = static_cast<M>(p.d[0]), t = static_cast<M>(p.d[1]);
    return x * b > t ? x : static_cast<M>(std::log1p(exp(x * b)) / b);
  }
  else if constexpr (OP == U::Hardtanh) {
    M lo = static_cast<M>(p.d[0]), hi = static_cast<M>(p.d[1]);
    return x <= lo ? lo : (x >= hi ? hi : x);
  } else if constexpr (OP == U::Hardsigmoid) {
    M y = x + M(3);
    y = y < M(0) ? M(0) : (y > M(6) ? M(6) : y);
    return static_cast<M>(y / M(6));
  } else if constexpr (OP == U::Hardswish) {
    M y = x + M(3);
    y = y < M(0) ? M(0) : (y > M(6) ? M(6) : y);
    return static_cast<M>(x * y / M(6));
  } else if constexpr (OP == U::Logsigmoid) {
    M mn = x < M(0) ? x : M(0);
    return static_cast<M>(mn - std::log1p(exp(-std::fabs(x))));
  } else if constexpr (OP == U::Threshold) {
    return x <= static_cast<M>(p.d[0]) ? static_cast<M>(p.d[1]) : x;
  } else if constexpr (OP == U::ClampMin || OP == U::ClampMax || OP == U::Clamp) {
    M lo, hi;
    if constexpr (std::is_integral_v<M>) lo = static_cast<M>(p.i[0]), hi = static_cast<M>(p.i[1]);
    else lo = static_cast<M>(p.d[0]), hi = static_cast<M>(p.d[1]);
    if constexpr (std::is_floating_point_v<M>) {  // NaN propagates from x and from either bound (torch)
      if (std::isnan(x)) return x;
      if (OP != U::ClampMax && std::isnan(lo)) return lo;
      if (OP != U::ClampMin && std::isnan(hi)) return hi;
    }
    if constexpr (OP == U::ClampMin) return x < lo ? lo : x;
    else if constexpr (OP == U::ClampMax) return x > hi ? hi : x;
    else return (x < lo ? lo : x) > hi ? hi : (x < lo ? lo : x);
  } else if constexpr (OP == U::NanToNum) {
    if (std::isnan(x)) return static_cast<M>(p.d[0]);
    if (x == std::numeric_limits<M>::infinity()) return static_cast<M>(p.d[1]);
    if (x == -std::numeric_limits<M>::infinity()) return static_cast<M>(p.d[2]);
    return x;
  } else if constexpr (OP == U::Angle) {
    if constexpr (cx) return std::arg(x);
    else return std::isnan(x) ? x : (x < M(0) ? static_cast<M>(M_PI) : M(0));
  } else if constexpr (OP == U::Conj) {
    if constexpr (cx) return std::conj(x);
    else return x;
  } else if constexpr (OP == U::Real) {
    if constexpr (cx) return x.real();
    else return x;
  } else if constexpr (OP == U::Imag) {
    if constexpr (cx) return x.imag();
    else return M(0);
  } else {
    static_assert(OP == U::Count, "unhandled unary op");
    return x;
  }
}

template <U OP, class T>
using out_t = std::conditional_t<
    returns_bool<OP>(), bool,
    std::conditional_t<(OP == U::Abs || OP == U::Angle || OP == U::Real || OP == U::Imag), real_of_t<T>, T>>;

// Vectorised forms (SLEEF u10) of the hot float functions, used on contiguous float / half /
// bfloat16 runs. The formulas are the ones torch's vectorised CPU kernels evaluate.
template <U OP>
constexpr bool has_vec() {
  return OP == U::Exp || OP == U::Expm1 || OP == U::Log || OP == U::Log1p || OP == U::Tanh ||
         OP == U::Sigmoid || OP == U::Erf || OP == U::Sin || OP == U::Cos || OP == U::Gelu ||
         OP == U::GeluTanh || OP == U::Silu;
}

template <U OP>
inline VecF vec_apply(VecF x) {
  const VecF one = VecF::set1(1.0f);
  if constexpr (OP == U::Exp) return x.exp();
  else if constexpr (OP == U::Expm1) return x.expm1();
  else if constexpr (OP == U::Log) return x.log();
  else if constexpr (OP == U::Log1p) return x.log1p();
  else if constexpr (OP == U::Tanh) return tanh_fast(x);
  else if constexpr (OP == U::Erf) return x.erf();
  else if constexpr (OP == U::Sin) return x.sin();
  else if constexpr (OP == U::Cos) return x.cos();
  else if constexpr (OP == U::Sigmoid) return one / (one + (VecF::set1(0.0f) - x).exp());
  else if constexpr (OP == U::Silu) return x / (one + (VecF::set1(0.0f) - x).exp());
  else if constexpr (OP == U::Gelu) return x * normal_cdf_fast(x);
  else return x / (one + (VecF::set1(-2.0f) * gelu_tanh_arg_fast(x)).exp());  // GeluTanh
}

// bfloat16 and float16 have 65536 values each: for long contiguous runs, the vectorised function's
// result for every one of them, computed once (on first use, per table: the bits are this table's
// vector path's exactly, NaN payloads included), then one load per element. On Zen 4 a 1M-element
// bfloat16 GELU takes a fifth of the vector path's time (which is bound by the FMA pipes, ~25
// zmm multiplies per 16 elements, and by the rounding to bfloat16).
constexpr int64_t kLutMin = 4096;  // shorter runs: the vector path (no 64K evaluations on first use)

// The vector path over a contiguous run: one instance for the runs and the tables, so that both
// give the same bits (the operand order of a NaN-propagating multiply, so the NaN that comes out,
// is the compiler's choice in each inlined copy).
template <U OP, class T>
[[gnu::noinline]] void vec_run(T* out, const T* in, int64_t n) {
  map_contiguous(out, in, n, [](VecF x) { return vec_apply<OP>(x); });
}

// o[i] = table[x[i]]: 64 lookups into a buffer, then one copy out (an output written element by
// element right behind the input loads stalls them when the two tensors lie a multiple of 4 KiB
// apart: the loads' low address bits match the stores', which the CPU takes for a dependence). Not
// vectorised: GCC's gathers from scalar inserts are slower than the loads.
#if defined(__clang__)
#define KILN_NOT_VECTORISED
#else
#define KILN_NOT_VECTORISED __attribute__((optimize("no-tree-vectorize")))
#endif
[[gnu::noinline]] KILN_NOT_VECTORISED void lut_run(const uint16_t* table, const uint16_t* x, uint16_t* o, int64_t n) {
  alignas(64) uint16_t buf[64];
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {  // (in place too: a block is read before it is written)
#if defined(__clang__)
#pragma clang loop vectorize(disable)
#endif
    for (int j = 0; j < 64; ++j) buf[j] = table[x[i + j]];
    std::memcpy(o + i, buf, sizeof(buf));
  }
  for (; i < n; ++i) o[i] = table[x[i]];
}

// Built under the default floating-point mode (a caller may run with subnormals flushed: attention's
// tasks do) and never freed (kernels may still run on other threads while the process exits).
template <U OP, class T>
const uint16_t* lut16() {
  static const uint16_t* const table = [] {
    auto t = std::make_unique<uint16_t[]>(65536);
    auto codes = std::make_unique<uint16_t[]>(65536);
    for (int c = 0; c < 65536; ++c) codes[c] = static_cast<uint16_t>(c);
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr & ~0x8040u);  // FTZ and DAZ off
    vec_run<OP, T>(reinterpret_cast<T*>(t.get()), reinterpret_cast<const T*>(codes.get()), 65536);
    _mm_setcsr(csr);
    return t.release();
  }();
  return table;
}

template <U OP, class T>
void loop(char** data, const int64_t* s, int64_t n, const void* pp) {
  const KParams& p = *static_cast<const KParams*>(pp);
  using O = out_t<OP, T>;
  using M = opmath_t<T>;
  if constexpr (has_vec<OP>() && (std::is_same_v<T, float> || std::is_same_v<T, BFloat16> ||
                                   std::is_same_v<T, Half>)) {
    if constexpr (!std::is_same_v<T, float>) {
      if (s[0] == sizeof(T) && s[1] == sizeof(T) && n >= kLutMin) {
        const uint16_t* table = lut16<OP, T>();
        lut_run(table, reinterpret_cast<const uint16_t*>(data[1]), reinterpret_cast<uint16_t*>(data[0]), n);
        return;
      }
    }
    if (s[0] == sizeof(T) && s[1] == sizeof(T)) {
      vec_run<OP, T>(reinterpret_cast<T*>(data[0]), reinterpret_cast<const T*>(data[1]), n);
      return;
    }
  }
  if (s[0] == sizeof(O) && s[1] == sizeof(T)) {
    O* __restrict o = reinterpret_cast<O*>(data[0]);
    const T* __restrict x = reinterpret_cast<const T*>(data[1]);
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<O>(apply<OP>(static_cast<M>(x[i]), p));
  } else {
    char* o = data[0];
    const char* x = data[1];
    for (int64_t i = 0; i < n; ++i, o += s[0], x += s[1])
      *reinterpret_cast<O*>(o) =
          static_cast<O>(apply<OP>(static_cast<M>(*reinterpret_cast<const T*>(x)), p));
  }
}

}  // namespace

void fill_unary(KernelTable& t) {
  for_each_code<static_cast<int>(U::Count)>([&]<int I>() {
    constexpr U OP = static_cast<U>(I);
    auto set = [&]<class T>() {
      if constexpr (supported<OP, T>()) t.unary[I][static_cast<int>(dtype_of<T>())] = &loop<OP, T>;
    };
    for_each_type(set);
    set.template operator()<Float8_e4m3fn>();
    set.template operator()<Float8_e5m2>();
  });
}

}  // namespace kiln::cpu::KILN_ISA
