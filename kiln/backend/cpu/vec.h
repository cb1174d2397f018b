// One float vector type per ISA (SSE2 4 lanes, AVX2 8, AVX-512 16), chosen by the compiler flags of
// the translation unit that includes it (the per-ISA kernel files). exp is kiln's own (inline, within
// 1 ulp of the correctly rounded result for every float); the other transcendentals come from SLEEF's
// 1-ULP (u10) functions, the same family PyTorch's CPU kernels use.
#pragma once

// Compiled once per ISA with different flags: everything here lives in that ISA's namespace, so no
// out-of-line copy of an inline function is shared (merged by the linker) between the tables.
#ifndef KILN_ISA
#error "KILN_ISA must name the ISA namespace (base, avx2, avx512)"
#endif

#include <immintrin.h>
#include <sleef.h>

#include <cstdint>
#include <cstring>

#include "kiln/core/half.h"

namespace kiln::cpu::KILN_ISA {

// 8 float lanes (AVX2): the AVX2 table's VecF, also in the AVX-512 table for kernels whose tiles are
// 8 wide (the recurrent steps), so both tables give the same bits.
#if defined(__AVX2__)
struct VecF8 {
  using T = float;
  static constexpr int N = 8;
  __m256 v;
  static VecF8 load(const float* p) { return {_mm256_loadu_ps(p)}; }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  static VecF8 set1(float x) { return {_mm256_set1_ps(x)}; }
  friend VecF8 operator+(VecF8 a, VecF8 b) { return {_mm256_add_ps(a.v, b.v)}; }
  friend VecF8 operator-(VecF8 a, VecF8 b) { return {_mm256_sub_ps(a.v, b.v)}; }
  friend VecF8 operator*(VecF8 a, VecF8 b) { return {_mm256_mul_ps(a.v, b.v)}; }
  friend VecF8 operator/(VecF8 a, VecF8 b) { return {_mm256_div_ps(a.v, b.v)}; }
  static VecF8 max(VecF8 a, VecF8 b) { return {_mm256_max_ps(a.v, b.v)}; }
  friend VecF8 fma(VecF8 a, VecF8 b, VecF8 c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
  static VecF8 max_nan(VecF8 a, VecF8 b) {
    return {_mm256_blendv_ps(_mm256_max_ps(a.v, b.v), a.v, _mm256_cmp_ps(a.v, a.v, _CMP_UNORD_Q))};
  }
  VecF8 abs() const { return {_mm256_andnot_ps(_mm256_set1_ps(-0.0f), v)}; }
  VecF8 sign_bits() const { return {_mm256_and_ps(_mm256_set1_ps(-0.0f), v)}; }
  VecF8 operator-() const { return xor_bits(set1(-0.0f)); }
  VecF8 xor_bits(VecF8 o) const { return {_mm256_xor_ps(v, o.v)}; }
  static VecF8 select_lt(VecF8 a, VecF8 b, VecF8 x, VecF8 y) {
    return {_mm256_blendv_ps(y.v, x.v, _mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ))};
  }
  static VecF8 min(VecF8 a, VecF8 b) { return {_mm256_min_ps(a.v, b.v)}; }
  // r[i] lane j := r[j] lane i (an 8 x 8 transpose in registers: row i becomes column i).
  [[gnu::always_inline]] static void transpose8(VecF8* r) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_ps(r[i].v, r[i + 1].v);
      t[i + 1] = _mm256_unpackhi_ps(r[i].v, r[i + 1].v);
    }
    for (int i = 0; i < 8; i += 4) {
      u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
      u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
      u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
      u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; ++i) {
      r[i].v = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
      r[i + 4].v = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
  }
  VecF8 nan_mask() const { return {_mm256_cmp_ps(v, v, _CMP_UNORD_Q)}; }
  VecF8 or_bits(VecF8 o) const { return {_mm256_or_ps(v, o.v)}; }
  bool any_bits() const { return _mm256_movemask_ps(v) != 0; }
  VecF8 exp() const;
  static VecF8 round_int(VecF8 x) { return {_mm256_cvtepi32_ps(_mm256_cvtps_epi32(x.v))}; }
  VecF8 mul_pow2(VecF8 n) const {
    __m256i ni = _mm256_cvtps_epi32(n.v), h = _mm256_srai_epi32(ni, 1), bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, h), bias), 23));
    return {_mm256_mul_ps(_mm256_mul_ps(v, s1), s2)};
  }
  // this * 2^n in one step, for integral n in [-126, 127] (2^n a normal float)
  VecF8 mul_pow2_normal(VecF8 n) const {
    return {_mm256_mul_ps(v, _mm256_castsi256_ps(_mm256_slli_epi32(
                                 _mm256_add_epi32(_mm256_cvtps_epi32(n.v), _mm256_set1_epi32(127)), 23)))};
  }
  VecF8 expm1() const { return {Sleef_expm1f8_u10avx2(v)}; }
  VecF8 log() const { return {Sleef_logf8_u10avx2(v)}; }
  VecF8 log1p() const { return {Sleef_log1pf8_u10avx2(v)}; }
  VecF8 tanh() const { return {Sleef_tanhf8_u10avx2(v)}; }
  VecF8 erf() const { return {Sleef_erff8_u10avx2(v)}; }
  VecF8 sin() const { return {Sleef_sinf8_u10avx2(v)}; }
  VecF8 cos() const { return {Sleef_cosf8_u10avx2(v)}; }
  VecF8 sqrt() const { return {_mm256_sqrt_ps(v)}; }
  void sincospi(VecF8* s, VecF8* c) const {
    Sleef___m256_2 r = Sleef_sincospif8_u35avx2(v);
    s->v = r.x, c->v = r.y;
  }
  static VecF8 from_top24(const uint32_t* p) {
    return {_mm256_cvtepi32_ps(_mm256_srli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), 8))};
  }
};
#endif

#if defined(__AVX512F__)
struct VecF {
  using T = float;
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
  friend VecF fma(VecF a, VecF b, VecF c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  static VecF max_nan(VecF a, VecF b) {  // max(a, b), NaN if either is
    return {_mm512_mask_blend_ps(_mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q), _mm512_max_ps(a.v, b.v), a.v)};
  }
  VecF abs() const { return {_mm512_castsi512_ps(_mm512_andnot_si512(_mm512_set1_epi32(INT32_MIN), _mm512_castps_si512(v)))}; }
  VecF sign_bits() const { return {_mm512_castsi512_ps(_mm512_and_si512(_mm512_set1_epi32(INT32_MIN), _mm512_castps_si512(v)))}; }
  VecF operator-() const { return xor_bits(set1(-0.0f)); }
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
  VecF exp() const;
  // n: integral floats; round_int rounds to nearest even, mul_pow2 gives this * 2^n for |n| <= 252
  static VecF round_int(VecF x) { return {_mm512_cvtepi32_ps(_mm512_cvtps_epi32(x.v))}; }
  VecF mul_pow2(VecF n) const {
    __m512i ni = _mm512_cvtps_epi32(n.v), h = _mm512_srai_epi32(ni, 1), bias = _mm512_set1_epi32(127);
    __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(h, bias), 23));
    __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_sub_epi32(ni, h), bias), 23));
    return {_mm512_mul_ps(_mm512_mul_ps(v, s1), s2)};
  }
  VecF mul_pow2_normal(VecF n) const { return {_mm512_scalef_ps(v, n.v)}; }  // (exact for such n too)
  VecF expm1() const { return {Sleef_expm1f16_u10avx512f(v)}; }
  VecF log() const { return {Sleef_logf16_u10avx512f(v)}; }
  VecF log1p() const { return {Sleef_log1pf16_u10avx512f(v)}; }
  VecF tanh() const { return {Sleef_tanhf16_u10avx512f(v)}; }
  VecF erf() const { return {Sleef_erff16_u10avx512f(v)}; }
  VecF sin() const { return {Sleef_sinf16_u10avx512f(v)}; }
  VecF cos() const { return {Sleef_cosf16_u10avx512f(v)}; }
  VecF sqrt() const { return {_mm512_sqrt_ps(v)}; }
  void sincospi(VecF* s, VecF* c) const {  // sin(pi x), cos(pi x) (3.5 ulp)
    Sleef___m512_2 r = Sleef_sincospif16_u35avx512f(v);
    s->v = r.x, c->v = r.y;
  }
  // The top 24 bits of N 32-bit words as exact floats in [0, 2^24)
  static VecF from_top24(const uint32_t* p) {
    return {_mm512_cvtepi32_ps(_mm512_srli_epi32(_mm512_loadu_si512(p), 8))};
  }
};
#elif defined(__AVX2__)
using VecF = VecF8;
#else
struct VecF {
  using T = float;
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
  friend VecF fma(VecF a, VecF b, VecF c) { return a * b + c; }  // no FMA: two roundings
  static VecF max_nan(VecF a, VecF b) {
    __m128 m = _mm_cmpunord_ps(a.v, a.v);
    return {_mm_or_ps(_mm_and_ps(m, a.v), _mm_andnot_ps(m, _mm_max_ps(a.v, b.v)))};
  }
  VecF abs() const { return {_mm_andnot_ps(_mm_set1_ps(-0.0f), v)}; }
  VecF sign_bits() const { return {_mm_and_ps(_mm_set1_ps(-0.0f), v)}; }
  VecF operator-() const { return xor_bits(set1(-0.0f)); }
  VecF xor_bits(VecF o) const { return {_mm_xor_ps(v, o.v)}; }
  static VecF select_lt(VecF a, VecF b, VecF x, VecF y) {
    __m128 m = _mm_cmplt_ps(a.v, b.v);
    return {_mm_or_ps(_mm_and_ps(m, x.v), _mm_andnot_ps(m, y.v))};
  }
  static VecF min(VecF a, VecF b) { return {_mm_min_ps(a.v, b.v)}; }
  VecF nan_mask() const { return {_mm_cmpunord_ps(v, v)}; }
  VecF or_bits(VecF o) const { return {_mm_or_ps(v, o.v)}; }
  bool any_bits() const { return _mm_movemask_ps(v) != 0; }
  VecF exp() const;
  static VecF round_int(VecF x) { return {_mm_cvtepi32_ps(_mm_cvtps_epi32(x.v))}; }
  VecF mul_pow2(VecF n) const {
    __m128i ni = _mm_cvtps_epi32(n.v), h = _mm_srai_epi32(ni, 1), bias = _mm_set1_epi32(127);
    __m128 s1 = _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(h, bias), 23));
    __m128 s2 = _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(_mm_sub_epi32(ni, h), bias), 23));
    return {_mm_mul_ps(_mm_mul_ps(v, s1), s2)};
  }
  VecF mul_pow2_normal(VecF n) const {
    return {_mm_mul_ps(v, _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(_mm_cvtps_epi32(n.v), _mm_set1_epi32(127)), 23)))};
  }
  VecF expm1() const { return {Sleef_expm1f4_u10sse2(v)}; }
  VecF log() const { return {Sleef_logf4_u10sse2(v)}; }
  VecF log1p() const { return {Sleef_log1pf4_u10sse2(v)}; }
  VecF tanh() const { return {Sleef_tanhf4_u10sse2(v)}; }
  VecF erf() const { return {Sleef_erff4_u10sse2(v)}; }
  VecF sin() const { return {Sleef_sinf4_u10sse2(v)}; }
  VecF cos() const { return {Sleef_cosf4_u10sse2(v)}; }
  VecF sqrt() const { return {_mm_sqrt_ps(v)}; }
  void sincospi(VecF* s, VecF* c) const {
    Sleef___m128_2 r = Sleef_sincospif4_u35sse2(v);
    s->v = r.x, c->v = r.y;
  }
  static VecF from_top24(const uint32_t* p) {
    return {_mm_cvtepi32_ps(_mm_srli_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), 8))};
  }
};
#endif

// Double vectors: the arithmetic the fused optimiser update needs (same lanes as VecF's register).
#if defined(__AVX512F__)
struct VecD {
  using T = double;
  static constexpr int N = 8;
  __m512d v;
  static VecD load(const double* p) { return {_mm512_loadu_pd(p)}; }
  void store(double* p) const { _mm512_storeu_pd(p, v); }
  static VecD set1(double x) { return {_mm512_set1_pd(x)}; }
  friend VecD operator+(VecD a, VecD b) { return {_mm512_add_pd(a.v, b.v)}; }
  friend VecD operator-(VecD a, VecD b) { return {_mm512_sub_pd(a.v, b.v)}; }
  friend VecD operator*(VecD a, VecD b) { return {_mm512_mul_pd(a.v, b.v)}; }
  friend VecD operator/(VecD a, VecD b) { return {_mm512_div_pd(a.v, b.v)}; }
  friend VecD fma(VecD a, VecD b, VecD c) { return {_mm512_fmadd_pd(a.v, b.v, c.v)}; }
  VecD operator-() const { return {_mm512_xor_pd(v, _mm512_set1_pd(-0.0))}; }
  VecD sqrt() const { return {_mm512_sqrt_pd(v)}; }
  VecD abs() const { return {_mm512_castsi512_pd(_mm512_andnot_si512(_mm512_set1_epi64(INT64_MIN), _mm512_castpd_si512(v)))}; }
  static VecD select_lt(VecD a, VecD b, VecD x, VecD y) {  // a < b ? x : y
    return {_mm512_mask_blend_pd(_mm512_cmp_pd_mask(a.v, b.v, _CMP_LT_OQ), y.v, x.v)};
  }
  static VecD max_nan(VecD a, VecD b) {
    return {_mm512_mask_blend_pd(_mm512_cmp_pd_mask(a.v, a.v, _CMP_UNORD_Q), _mm512_max_pd(a.v, b.v), a.v)};
  }
};
#elif defined(__AVX2__)
struct VecD {
  using T = double;
  static constexpr int N = 4;
  __m256d v;
  static VecD load(const double* p) { return {_mm256_loadu_pd(p)}; }
  void store(double* p) const { _mm256_storeu_pd(p, v); }
  static VecD set1(double x) { return {_mm256_set1_pd(x)}; }
  friend VecD operator+(VecD a, VecD b) { return {_mm256_add_pd(a.v, b.v)}; }
  friend VecD operator-(VecD a, VecD b) { return {_mm256_sub_pd(a.v, b.v)}; }
  friend VecD operator*(VecD a, VecD b) { return {_mm256_mul_pd(a.v, b.v)}; }
  friend VecD operator/(VecD a, VecD b) { return {_mm256_div_pd(a.v, b.v)}; }
  friend VecD fma(VecD a, VecD b, VecD c) { return {_mm256_fmadd_pd(a.v, b.v, c.v)}; }
  VecD operator-() const { return {_mm256_xor_pd(v, _mm256_set1_pd(-0.0))}; }
  VecD sqrt() const { return {_mm256_sqrt_pd(v)}; }
  VecD abs() const { return {_mm256_andnot_pd(_mm256_set1_pd(-0.0), v)}; }
  static VecD select_lt(VecD a, VecD b, VecD x, VecD y) {
    return {_mm256_blendv_pd(y.v, x.v, _mm256_cmp_pd(a.v, b.v, _CMP_LT_OQ))};
  }
  static VecD max_nan(VecD a, VecD b) {
    return {_mm256_blendv_pd(_mm256_max_pd(a.v, b.v), a.v, _mm256_cmp_pd(a.v, a.v, _CMP_UNORD_Q))};
  }
};
#else
struct VecD {
  using T = double;
  static constexpr int N = 2;
  __m128d v;
  static VecD load(const double* p) { return {_mm_loadu_pd(p)}; }
  void store(double* p) const { _mm_storeu_pd(p, v); }
  static VecD set1(double x) { return {_mm_set1_pd(x)}; }
  friend VecD operator+(VecD a, VecD b) { return {_mm_add_pd(a.v, b.v)}; }
  friend VecD operator-(VecD a, VecD b) { return {_mm_sub_pd(a.v, b.v)}; }
  friend VecD operator*(VecD a, VecD b) { return {_mm_mul_pd(a.v, b.v)}; }
  friend VecD operator/(VecD a, VecD b) { return {_mm_div_pd(a.v, b.v)}; }
  friend VecD fma(VecD a, VecD b, VecD c) { return a * b + c; }  // no FMA: two roundings
  VecD operator-() const { return {_mm_xor_pd(v, _mm_set1_pd(-0.0))}; }
  VecD sqrt() const { return {_mm_sqrt_pd(v)}; }
  VecD abs() const { return {_mm_andnot_pd(_mm_set1_pd(-0.0), v)}; }
  static VecD select_lt(VecD a, VecD b, VecD x, VecD y) {
    __m128d m = _mm_cmplt_pd(a.v, b.v);
    return {_mm_or_pd(_mm_and_pd(m, x.v), _mm_andnot_pd(m, y.v))};
  }
  static VecD max_nan(VecD a, VecD b) {
    __m128d m = _mm_cmpunord_pd(a.v, a.v);
    return {_mm_or_pd(_mm_and_pd(m, a.v), _mm_andnot_pd(m, _mm_max_pd(a.v, b.v)))};
  }
};
#endif

// The polynomials here are plain expressions: the avx2 and avx512 tables contract them into the same
// fused multiply-adds (bit-identical results); base, without FMA, rounds every step (the bounds between
// the tables are stated and checked in tests/python/test_isa.py).

// exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 (ln 2 split in two, the first part exact
// in n * C1), exp(r) = 1 + r + r^2 p(r) with p of degree 4 fitted here for relative error 3e-9 on
// |r| <= ln(2) / 2 (Lawson's iteration in float64). Within 1 ulp of the correctly rounded float for
// every input (checked for all floats in [-104, 89], subnormal results included); 2^n is applied in
// two steps so results down to 2^-149 come out right. NaN stays NaN (max/min take x second), +-inf
// give inf and 0. Inline, unlike SLEEF's call, so the kernels that use it are not split by a call.
// exp_reduced gives exp(r) and n (exp(x) = exp(r) 2^n); exp_impl applies 2^n.
template <class V>
inline V exp_reduced(V x, V& n) {
  n = V::round_int(x * V::set1(1.44269504088896341f));
  V r = x - n * V::set1(0.693359375f);
  r = r - n * V::set1(-2.12194440e-4f);
  V p = V::set1(0.0013814595295116305f);
  p = p * r + V::set1(0.008368706330657005f);
  p = p * r + V::set1(0.04166838899254799f);
  p = p * r + V::set1(0.1666652113199234f);
  p = p * r + V::set1(0.4999999403953552f);
  return V::set1(1.0f) + (r + r * r * p);
}
template <class V>
inline V exp_impl(V x) {
  x = V::min(V::set1(100.0f), V::max(V::set1(-104.0f), x));
  V n;
  const V e = exp_reduced(x, n);
  return e.mul_pow2(n);
}
// exp(x) for x <= 0 (NaN stays NaN) with 2^n in one step, in 6 fewer operations: exp_impl's bits
// for x >= -87.33, 0 below (where exp_impl gives subnormals, and the few normals of [-87.3365, -87.33)).
template <class V>
inline V exp_nonpos_fast(V x) {
  V n;
  const V e = exp_reduced(V::max(V::set1(-87.33f), x), n);  // (max takes its second operand for a NaN)
  return V::select_lt(x, V::set1(-87.33f), V::set1(0.0f), e.mul_pow2_normal(n));
}
#if defined(__AVX2__)
inline VecF8 VecF8::exp() const { return exp_impl(*this); }
#endif
#if !defined(__AVX2__) || defined(__AVX512F__)
inline VecF VecF::exp() const { return exp_impl(*this); }
#endif

// The standard normal CDF Phi(x) = erfc(-x / sqrt(2)) / 2, without cancellation: for z >= 0,
// erfc(z) = t P(t) exp(-z^2) with t = 1 / (1 + 0.3275911 z) and P a degree-7 polynomial fitted here
// (Lawson's iteration in float64) for relative error below 1.1e-7 on z in [0, 9.5]; beyond that
// exp(-z^2) underflows in float32. So Phi(x) = erfc(|x| / sqrt(2)) / 2 for x < 0 and 1 minus that
// for x >= 0: accurate in relative terms far into the negative tail, where 1 + erf(x) loses every
// digit. exp(-z^2) does not depend on the division and the polynomial, so they overlap. Also
// returns exp(-x^2 / 2), which GELU's derivative needs. +inf gives 1, NaN stays NaN.
inline VecF normal_cdf_fast(VecF x, VecF* gauss = nullptr) {
  const VecF one = VecF::set1(1.0f), half = VecF::set1(0.5f);
  VecF z = x.abs() * VecF::set1(0.70710678118654752f);
  VecF e = exp_nonpos_fast(VecF::set1(0.0f) - z * z);
  VecF t = one / (VecF::set1(0.3275911f) * z + one);
  VecF P = VecF::set1(-0.14166226983070374f);
  P = P * t + VecF::set1(0.4988775849342346f);
  P = P * t + VecF::set1(-0.4095989465713501f);
  P = P * t + VecF::set1(0.45656126737594604f);
  P = P * t + VecF::set1(0.02371659316122532f);
  P = P * t + VecF::set1(0.20639780163764954f);
  P = P * t + VecF::set1(0.1806500107049942f);
  P = P * t + VecF::set1(0.1850580871105194f);
  VecF q = half * t * P * e;  // Phi(-|x|)
  if (gauss) *gauss = e;
  return VecF::select_lt(x, VecF::set1(0.0f), q, one - q);
}

// The tanh form of GELU's argument, as gelu_tanh_arg in math.h.
inline VecF gelu_tanh_arg_fast(VecF x) {
  return VecF::set1(0.79788456080286535588f) * (x + VecF::set1(0.044715f) * x * x * x);
}

// tanh: odd Taylor series to x^13 below |x| = 0.4, 1 - 2 / (exp(2|x|) + 1) above (both within
// ~2 ulp). SLEEF 3.5's vector tanh costs four times as much.
template <class V>
inline V tanh_fast(V x) {
  V a = x.abs(), one = V::set1(1.0f);
  V big = (one - V::set1(2.0f) / ((a + a).exp() + one)).xor_bits(x.sign_bits());
  V x2 = x * x;
  V p = V::set1(21844.0f / 6081075.0f);
  p = p * x2 + V::set1(-1382.0f / 155925.0f);
  p = p * x2 + V::set1(62.0f / 2835.0f);
  p = p * x2 + V::set1(-17.0f / 315.0f);
  p = p * x2 + V::set1(2.0f / 15.0f);
  p = p * x2 + V::set1(-1.0f / 3.0f);
  V small = x + x * x2 * p;
  return V::select_lt(a, V::set1(0.4f), small, big);
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

}  // namespace kiln::cpu::KILN_ISA
