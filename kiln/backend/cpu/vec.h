// One float vector type per ISA (SSE2 4 lanes, AVX2 8, AVX-512 16), chosen by the compiler flags of
// the translation unit that includes it (the per-ISA kernel files). Transcendentals come from
// SLEEF's 1-ULP (u10) functions, the same family PyTorch's CPU kernels use.
#pragma once

#include <immintrin.h>
#include <sleef.h>

#include <cstdint>
#include <cstring>

#include "kiln/core/half.h"

namespace kiln::cpu {

#if defined(__AVX512F__)
struct VecF {
  static constexpr int N = 16;
  __m512 v;
  static VecF load(const float* p) { return {_mm512_loadu_ps(p)}; }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  static VecF set1(float x) { return {_mm512_set1_ps(x)}; }
  friend VecF operator+(VecF a, VecF b) { return {_mm512_add_ps(a.v, b.v)}; }
  friend VecF operator-(VecF a, VecF b) { return {_mm512_sub_ps(a.v, b.v)}; }
  friend VecF operator*(VecF a, VecF b) { return {_mm512_mul_ps(a.v, b.v)}; }
  friend VecF operator/(VecF a, VecF b) { return {_mm512_div_ps(a.v, b.v)}; }
  static VecF max(VecF a, VecF b) { return {_mm512_max_ps(a.v, b.v)}; }
  VecF abs() const { return {_mm512_castsi512_ps(_mm512_andnot_si512(_mm512_set1_epi32(INT32_MIN), _mm512_castps_si512(v)))}; }
  VecF sign_bits() const { return {_mm512_castsi512_ps(_mm512_and_si512(_mm512_set1_epi32(INT32_MIN), _mm512_castps_si512(v)))}; }
  VecF xor_bits(VecF o) const { return {_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), _mm512_castps_si512(o.v)))}; }
  static VecF select_lt(VecF a, VecF b, VecF x, VecF y) {  // a < b ? x : y
    return {_mm512_mask_blend_ps(_mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ), y.v, x.v)};
  }
  static VecF min(VecF a, VecF b) { return {_mm512_min_ps(a.v, b.v)}; }
  VecF nan_mask() const {
    return {_mm512_castsi512_ps(_mm512_maskz_mov_epi32(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(-1)))};
  }
  VecF or_bits(VecF o) const { return {_mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), _mm512_castps_si512(o.v)))}; }
  bool any_bits() const { return _mm512_test_epi32_mask(_mm512_castps_si512(v), _mm512_castps_si512(v)) != 0; }
  VecF exp() const { return {Sleef_expf16_u10avx512f(v)}; }
  VecF expm1() const { return {Sleef_expm1f16_u10avx512f(v)}; }
  VecF log() const { return {Sleef_logf16_u10avx512f(v)}; }
  VecF log1p() const { return {Sleef_log1pf16_u10avx512f(v)}; }
  VecF tanh() const { return {Sleef_tanhf16_u10avx512f(v)}; }
  VecF erf() const { return {Sleef_erff16_u10avx512f(v)}; }
  VecF sin() const { return {Sleef_sinf16_u10avx512f(v)}; }
  VecF cos() const { return {Sleef_cosf16_u10avx512f(v)}; }
};
#elif defined(__AVX2__)
struct VecF {
  static constexpr int N = 8;
  __m256 v;
  static VecF load(const float* p) { return {_mm256_loadu_ps(p)}; }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  static VecF set1(float x) { return {_mm256_set1_ps(x)}; }
  friend VecF operator+(VecF a, VecF b) { return {_mm256_add_ps(a.v, b.v)}; }
  friend VecF operator-(VecF a, VecF b) { return {_mm256_sub_ps(a.v, b.v)}; }
  friend VecF operator*(VecF a, VecF b) { return {_mm256_mul_ps(a.v, b.v)}; }
  friend VecF operator/(VecF a, VecF b) { return {_mm256_div_ps(a.v, b.v)}; }
  static VecF max(VecF a, VecF b) { return {_mm256_max_ps(a.v, b.v)}; }
  VecF abs() const { return {_mm256_andnot_ps(_mm256_set1_ps(-0.0f), v)}; }
  VecF sign_bits() const { return {_mm256_and_ps(_mm256_set1_ps(-0.0f), v)}; }
  VecF xor_bits(VecF o) const { return {_mm256_xor_ps(v, o.v)}; }
  static VecF select_lt(VecF a, VecF b, VecF x, VecF y) {
    return {_mm256_blendv_ps(y.v, x.v, _mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ))};
  }
  static VecF min(VecF a, VecF b) { return {_mm256_min_ps(a.v, b.v)}; }
  VecF nan_mask() const { return {_mm256_cmp_ps(v, v, _CMP_UNORD_Q)}; }
  VecF or_bits(VecF o) const { return {_mm256_or_ps(v, o.v)}; }
  bool any_bits() const { return _mm256_movemask_ps(v) != 0; }
  VecF exp() const { return {Sleef_expf8_u10avx2(v)}; }
  VecF expm1() const { return {Sleef_expm1f8_u10avx2(v)}; }
  VecF log() const { return {Sleef_logf8_u10avx2(v)}; }
  VecF log1p() const { return {Sleef_log1pf8_u10avx2(v)}; }
  VecF tanh() const { return {Sleef_tanhf8_u10avx2(v)}; }
  VecF erf() const { return {Sleef_erff8_u10avx2(v)}; }
  VecF sin() const { return {Sleef_sinf8_u10avx2(v)}; }
  VecF cos() const { return {Sleef_cosf8_u10avx2(v)}; }
};
#else
struct VecF {
  static constexpr int N = 4;
  __m128 v;
  static VecF load(const float* p) { return {_mm_loadu_ps(p)}; }
  void store(float* p) const { _mm_storeu_ps(p, v); }
  static VecF set1(float x) { return {_mm_set1_ps(x)}; }
  friend VecF operator+(VecF a, VecF b) { return {_mm_add_ps(a.v, b.v)}; }
  friend VecF operator-(VecF a, VecF b) { return {_mm_sub_ps(a.v, b.v)}; }
  friend VecF operator*(VecF a, VecF b) { return {_mm_mul_ps(a.v, b.v)}; }
  friend VecF operator/(VecF a, VecF b) { return {_mm_div_ps(a.v, b.v)}; }
  static VecF max(VecF a, VecF b) { return {_mm_max_ps(a.v, b.v)}; }
  VecF abs() const { return {_mm_andnot_ps(_mm_set1_ps(-0.0f), v)}; }
  VecF sign_bits() const { return {_mm_and_ps(_mm_set1_ps(-0.0f), v)}; }
  VecF xor_bits(VecF o) const { return {_mm_xor_ps(v, o.v)}; }
  static VecF select_lt(VecF a, VecF b, VecF x, VecF y) {
    __m128 m = _mm_cmplt_ps(a.v, b.v);
    return {_mm_or_ps(_mm_and_ps(m, x.v), _mm_andnot_ps(m, y.v))};
  }
  static VecF min(VecF a, VecF b) { return {_mm_min_ps(a.v, b.v)}; }
  VecF nan_mask() const { return {_mm_cmpunord_ps(v, v)}; }
  VecF or_bits(VecF o) const { return {_mm_or_ps(v, o.v)}; }
  bool any_bits() const { return _mm_movemask_ps(v) != 0; }
  VecF exp() const { return {Sleef_expf4_u10sse2(v)}; }
  VecF expm1() const { return {Sleef_expm1f4_u10sse2(v)}; }
  VecF log() const { return {Sleef_logf4_u10sse2(v)}; }
  VecF log1p() const { return {Sleef_log1pf4_u10sse2(v)}; }
  VecF tanh() const { return {Sleef_tanhf4_u10sse2(v)}; }
  VecF erf() const { return {Sleef_erff4_u10sse2(v)}; }
  VecF sin() const { return {Sleef_sinf4_u10sse2(v)}; }
  VecF cos() const { return {Sleef_cosf4_u10sse2(v)}; }
};
#endif

// erf(x) by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): one exp instead of SLEEF's erf, the
// speed/accuracy trade torch's vectorised GELU makes as well.
inline VecF erf_fast(VecF x) {
  VecF a = x.abs(), one = VecF::set1(1.0f);
  VecF t = one / (VecF::set1(0.3275911f) * a + one);
  VecF r = VecF::set1(1.061405429f);
  r = r * t + VecF::set1(-1.453152027f);
  r = r * t + VecF::set1(1.421413741f);
  r = r * t + VecF::set1(-0.284496736f);
  r = r * t + VecF::set1(0.254829592f);
  VecF e = (VecF::set1(0.0f) - a * a).exp();
  return (one - r * t * e).xor_bits(x.sign_bits());
}

// tanh: odd Taylor series to x^13 below |x| = 0.4, 1 - 2 / (exp(2|x|) + 1) above (both within
// ~2 ulp). SLEEF 3.5's vector tanh costs four times as much.
inline VecF tanh_fast(VecF x) {
  VecF a = x.abs(), one = VecF::set1(1.0f);
  VecF big = (one - VecF::set1(2.0f) / ((a + a).exp() + one)).xor_bits(x.sign_bits());
  VecF x2 = x * x;
  VecF p = VecF::set1(21844.0f / 6081075.0f);
  p = p * x2 + VecF::set1(-1382.0f / 155925.0f);
  p = p * x2 + VecF::set1(62.0f / 2835.0f);
  p = p * x2 + VecF::set1(-17.0f / 315.0f);
  p = p * x2 + VecF::set1(2.0f / 15.0f);
  p = p * x2 + VecF::set1(-1.0f / 3.0f);
  VecF small = x + x * x2 * p;
  return VecF::select_lt(a, VecF::set1(0.4f), small, big);
}

// Loads/stores of N elements of a storage type through float (bfloat16 / float16 / float).
template <class T>
inline VecF load_as_float(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return VecF::load(p);
#if defined(__AVX512F__)
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(w, 16))};
  } else if constexpr (std::is_same_v<T, Half>) {
    return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
#elif defined(__AVX2__)
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(w, 16))};
  } else if constexpr (std::is_same_v<T, Half>) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
#endif
  } else {
    float tmp[VecF::N];
    for (int i = 0; i < VecF::N; ++i) tmp[i] = static_cast<float>(p[i]);
    return VecF::load(tmp);
  }
}
template <class T>
inline void store_from_float(T* p, VecF v) {
  if constexpr (std::is_same_v<T, float>) {
    v.store(p);
#if defined(__AVX512F__)
  } else if constexpr (std::is_same_v<T, BFloat16>) {  // round to nearest even, NaN -> 0x7fc0
    __m512i u = _mm512_castps_si512(v.v);
    __m512i bias = _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)),
                                    _mm512_set1_epi32(0x7fff));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    __mmask16 nan = _mm512_cmp_ps_mask(v.v, v.v, _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
  } else if constexpr (std::is_same_v<T, Half>) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v.v, _MM_FROUND_TO_NEAREST_INT));
#elif defined(__AVX2__)
  } else if constexpr (std::is_same_v<T, BFloat16>) {  // round to nearest even, NaN -> 0x7fc0
    __m256i u = _mm256_castps_si256(v.v);
    __m256i bias = _mm256_add_epi32(_mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1)),
                                    _mm256_set1_epi32(0x7fff));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v.v, v.v, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc0), nan);
    __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  } else if constexpr (std::is_same_v<T, Half>) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v.v, _MM_FROUND_TO_NEAREST_INT));
#endif
  } else {
    float tmp[VecF::N];
    v.store(tmp);
    for (int i = 0; i < VecF::N; ++i) p[i] = T(tmp[i]);
  }
}

// Applies f (VecF -> VecF) to n contiguous elements; the tail goes through the same vector code on
// a padded buffer, so an element's result never depends on its position.
template <class T, class F>
inline void map_contiguous(T* out, const T* in, int64_t n, F&& f) {
  int64_t i = 0;
  for (; i + VecF::N <= n; i += VecF::N) store_from_float(out + i, f(load_as_float(in + i)));
  if (i < n) {
    T buf_in[VecF::N] = {}, buf_out[VecF::N];
    std::memcpy(buf_in, in + i, (n - i) * sizeof(T));
    store_from_float(buf_out, f(load_as_float(buf_in)));
    std::memcpy(out + i, buf_out, (n - i) * sizeof(T));
  }
}

}  // namespace kiln::cpu
