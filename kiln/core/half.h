// Reduced-precision floating types: float16, bfloat16, float8_e4m3fn, float8_e5m2.
// Conversions round to nearest even and match PyTorch's CPU conversions bit for bit (checked
// against the torch wheel in tests/python/test_dtypes.py). Conversions from double go through
// float, as PyTorch's do.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace kiln {
namespace detail {

inline uint32_t f32_bits(float f) { return std::bit_cast<uint32_t>(f); }
inline float f32_from_bits(uint32_t b) { return std::bit_cast<float>(b); }

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    float v = static_cast<float>(mant) * 5.9604644775390625e-08f;  // 2^-24
    return sign ? -v : v;
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (mant << 13));
  return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00;            // NaN
  if (ax >= 0x477ff000u) return sign | 0x7c00;           // rounds to or is infinity
  if (ax < 0x38800000u) {                                // subnormal result: let the FPU round
    float r = f32_from_bits(ax) + 0.5f;
    return sign | static_cast<uint16_t>(f32_bits(r) - 0x3f000000u);
  }
  uint32_t odd = (ax >> 13) & 1;
  ax += (static_cast<uint32_t>(15 - 127) << 23) + 0xfff + odd;
  return sign | static_cast<uint16_t>(ax >> 13);
}

inline float bf16_to_f32(uint16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }

inline uint16_t f32_to_bf16(float f) {
  if (std::isnan(f)) return 0x7fc0;
  uint32_t x = f32_bits(f);
  uint32_t bias = ((x >> 16) & 1) + 0x7fff;
  return static_cast<uint16_t>((x + bias) >> 16);
}

inline float f8e4m3fn_to_f32(uint8_t b) {
  uint32_t e = (b >> 3) & 0xf, m = b & 7;
  bool neg = b & 0x80;
  float v;
  if (e == 0xf && m == 7) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (e == 0) {
    v = static_cast<float>(m) * 0.001953125f;  // 2^-9
  } else {
    v = f32_from_bits(((e + 120) << 23) | (m << 20));
  }
  return neg ? -v : v;
}

// torch 2.13's CPU conversion saturates: values that round past 448 (infinities included) give
// +-448; NaN gives 0x7f with its sign (0xff for -NaN).
inline uint8_t f32_to_f8e4m3fn(float f) {
  uint32_t x = f32_bits(f);
  uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7f;         // NaN
  if (ax >= 0x43e80000u) return sign | 0x7e;         // >= 464 rounds past 448: saturate
  if (ax < (121u << 23)) {                     // below 2^-6: subnormal, let the FPU round
    float r = f32_from_bits(ax) + f32_from_bits(141u << 23);
    return sign | static_cast<uint8_t>(f32_bits(r) - (141u << 23));
  }
  uint32_t odd = (ax >> 20) & 1;
  ax += (static_cast<uint32_t>(7 - 127) << 23) + 0x7ffff + odd;
  return sign | static_cast<uint8_t>(ax >> 20);
}

inline float f8e5m2_to_f32(uint8_t b) { return f16_to_f32(static_cast<uint16_t>(b) << 8); }

inline uint8_t f32_to_f8e5m2(float f) {
  uint32_t x = f32_bits(f);
  uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= (143u << 23)) return sign | (ax > 0x7f800000u ? 0x7f : 0x7c);
  if (ax < (113u << 23)) {
    float r = f32_from_bits(ax) + f32_from_bits(134u << 23);
    return sign | static_cast<uint8_t>(f32_bits(r) - (134u << 23));
  }
  uint32_t odd = (ax >> 21) & 1;
  ax += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffff + odd;
  return sign | static_cast<uint8_t>(ax >> 21);
}

}  // namespace detail

#define KILN_SMALL_FLOAT(Name, Storage, to_f32, from_f32)                              \
  struct Name {                                                                        \
    Storage x;                                                                         \
    Name() = default;                                                                  \
    Name(float f) : x(detail::from_f32(f)) {}                                          \
    Name(double d) : x(detail::from_f32(static_cast<float>(d))) {}                     \
    template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>               \
    Name(I i) : x(detail::from_f32(static_cast<float>(i))) {}                          \
    operator float() const { return detail::to_f32(x); }                               \
    static Name from_bits(Storage b) {                                                 \
      Name n;                                                                          \
      n.x = b;                                                                         \
      return n;                                                                        \
    }                                                                                  \
  };

KILN_SMALL_FLOAT(Half, uint16_t, f16_to_f32, f32_to_f16)
KILN_SMALL_FLOAT(BFloat16, uint16_t, bf16_to_f32, f32_to_bf16)
KILN_SMALL_FLOAT(Float8_e4m3fn, uint8_t, f8e4m3fn_to_f32, f32_to_f8e4m3fn)
KILN_SMALL_FLOAT(Float8_e5m2, uint8_t, f8e5m2_to_f32, f32_to_f8e5m2)
#undef KILN_SMALL_FLOAT

}  // namespace kiln
