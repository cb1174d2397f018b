// Element handling for kiln's packed GEMM (included by kernels_gemm.cpp only, so compiled once per
// ISA): conversions of the input types to float32 and one rounding back, 8-wide vector loads and
// stores of them, and the register transpose the packing and the GEMV use.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kiln/backend/cpu/isa_util.h"
#include "kiln/core/half.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define KILN_GEMM_AVX2 1
#endif

namespace kiln::cpu::KILN_ISA {
namespace {

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// How K is cut into slices: nk slices of kcb (the last one shorter), each summed on its own and the
// slices added in order. A function of K alone, the same for every table and panel kind (kcb even,
// so a bfloat16 pair never straddles two slices): that is what lets the tables agree bit for bit.
struct Slicing {
  int64_t K, kcb, nk;
};
constexpr int64_t KC = 256;  // deepest slice
inline Slicing slicing(int64_t K) {
  const int64_t nk = ceil_div(K, KC);
  return {K, round_up(ceil_div(K, nk), 2), nk};  // balanced slices: no thin last slice
}


// ---- element conversions ------------------------------------------------------------------------

// float8 -> float32 lookup tables, built at compile time: this file is compiled for AVX-512 too, so
// it must not run any code (a dynamic initialiser) before the ISA has been picked. Same values as
// detail::f8e4m3fn_to_f32 / f8e5m2_to_f32.
struct Float8Tables {
  float e4m3fn[256], e5m2[256];
};
constexpr Float8Tables make_float8_tables() {
  Float8Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t sign = (b & 0x80) << 24;
    uint32_t e = (b >> 3) & 0xf, m = b & 7;
    float v = e == 0xf && m == 7 ? std::numeric_limits<float>::quiet_NaN()
              : e == 0           ? static_cast<float>(m) * 0.001953125f
                                 : std::bit_cast<float>(((e + 120) << 23) | (m << 20));
    t.e4m3fn[b] = (b & 0x80) ? -v : v;
    uint32_t e5 = (b >> 2) & 0x1f, m5 = b & 3;  // e5m2 = the high byte of a float16
    if (e5 == 0) {
      float w = static_cast<float>(m5 << 8) * 5.9604644775390625e-08f;
      t.e5m2[b] = sign ? -w : w;
    } else if (e5 == 31) {
      t.e5m2[b] = std::bit_cast<float>(sign | 0x7f800000u | (m5 << 21));
    } else {
      t.e5m2[b] = std::bit_cast<float>(sign | ((e5 + 112) << 23) | (m5 << 21));
    }
  }
  return t;
}
constexpr Float8Tables kF8 = make_float8_tables();

template <class T>
inline float to_f32(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return detail::bf16_to_f32(x.x);
  } else if constexpr (std::is_same_v<T, Float8_e4m3fn>) {
    return kF8.e4m3fn[x.x];
  } else if constexpr (std::is_same_v<T, Float8_e5m2>) {
    return kF8.e5m2[x.x];
#ifdef KILN_GEMM_AVX2
  } else if constexpr (std::is_same_v<T, Half>) {
    return _cvtsh_ss(x.x);
#endif
  } else {
    return static_cast<float>(x);
  }
}

// Rounds once to T (round to nearest even, NaN and saturation as kiln's scalar conversions).
template <class T>
inline T from_f32(float f) {
  if constexpr (std::is_same_v<T, float>) return f;
  else return T(f);
}

#ifdef KILN_GEMM_AVX2
// 8 contiguous elements -> 8 floats.
template <class T>
inline __m256 load8(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm256_loadu_ps(p);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  } else if constexpr (std::is_same_v<T, Half>) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  } else if constexpr (std::is_same_v<T, Float8_e5m2>) {  // e5m2 is the high byte of a float16
    __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtph_ps(_mm_unpacklo_epi8(_mm_setzero_si128(), b));
  } else if constexpr (std::is_same_v<T, Float8_e4m3fn>) {
    // |x|'s bits shifted into a float16 (exponent bias 15, not 7: the value is 2^-8 |x|, subnormals
    // included), times 2^8; then NaN (0x7f) and the sign, as kF8.
    __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    __m128i mag = _mm_slli_epi16(_mm_and_si128(_mm_cvtepu8_epi16(b), _mm_set1_epi16(0x7f)), 7);
    __m256 f = _mm256_mul_ps(_mm256_cvtph_ps(mag), _mm256_set1_ps(256.0f));
    __m256i w = _mm256_cvtepu8_epi32(b);
    __m256i nan = _mm256_cmpeq_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x7f)), _mm256_set1_epi32(0x7f));
    f = _mm256_blendv_ps(f, _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN()), _mm256_castsi256_ps(nan));
    __m256i sign = _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x80)), 24);
    return _mm256_or_ps(f, _mm256_castsi256_ps(sign));
  } else {
    alignas(32) float t[8];
    for (int i = 0; i < 8; ++i) t[i] = to_f32(p[i]);
    return _mm256_load_ps(t);
  }
}

// 8 floats -> 8 contiguous elements, bit-identical to from_f32 on each lane.
template <class T>
inline void store8(T* p, __m256 v) {
  if constexpr (std::is_same_v<T, float>) {
    _mm256_storeu_ps(p, v);
  } else if constexpr (std::is_same_v<T, BFloat16>) {  // round to nearest even, NaN -> 0x7fc0
    __m256i u = _mm256_castps_si256(v);
    __m256i bias = _mm256_add_epi32(_mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1)),
                                    _mm256_set1_epi32(0x7fff));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc0), nan);
    __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  } else if constexpr (std::is_same_v<T, Half>) {  // NaN -> sign | 0x7e00, as detail::f32_to_f16
    __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256i u = _mm256_castps_si256(v);
    __m256i fix = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x8000)),
                                  _mm256_set1_epi32(0x7e00));
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    __m128i fix16 = _mm_packus_epi32(_mm256_castsi256_si128(fix), _mm256_extracti128_si256(fix, 1));
    __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_blendv_epi8(h, fix16, nan16));
  } else {
    alignas(32) float t[8];
    _mm256_store_ps(t, v);
    for (int i = 0; i < 8; ++i) p[i] = from_f32<T>(t[i]);
  }
}

inline void transpose8(__m256 r[8]) {
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}
#endif

#ifdef KILN_GEMM_AVX2
inline float fma1(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}
#endif

}  // namespace
}  // namespace kiln::cpu::KILN_ISA
