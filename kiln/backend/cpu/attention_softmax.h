// FlexAttention's fused softmax step (the kernel table's attn_softmax), in a header because two kinds
// of per-ISA objects compile it: kernels_attention.cpp (every table) and kernels_gemm.cpp's bfloat16
// builds, where vcvtneps2bf16 rounds 16 probabilities in one instruction (their fill replaces the
// avx512 table's entry when the CPU has it).
//
// The step on one float32 tile of unscaled scores, in two passes over each row instead of five or six
// (scale, max, subtract, exp, sum[, round]): the scale is folded into the exponent, and the
// probabilities are written once, in place or (FlexAttention's bfloat16 path) rounded to bfloat16 for
// the P V product. The row sums add the float32 probabilities (before any rounding).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/vec.h"

namespace kiln::cpu::KILN_ISA {
namespace {

#if defined(__AVX512BF16__)
// 16 floats -> 16 bfloat16 (nearest even, NaN quiet): one vcvtneps2bf16.
inline __m256i bf16x16(__m512 f) { return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(f)); }
#elif defined(__AVX512F__)
// 16 floats -> 16 bfloat16 (nearest even, NaN quiet).
inline __m256i bf16x16(__m512 f) {
  __m512i x = _mm512_castps_si512(f);
  __m512i bias = _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fff));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, bias), 16);
  r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), _mm512_set1_epi32(0x7fc0));
  return _mm512_cvtepi32_epi16(r);
}
#endif
// n floats -> bfloat16, rounded to nearest even (NaN quiet).
inline void round_bf16(BFloat16* dst, const float* src, int64_t n) {
  int64_t j = 0;
#if defined(__AVX512F__)
  for (; j + 16 <= n; j += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), bf16x16(_mm512_loadu_ps(src + j)));
#endif
  for (; j < n; ++j) dst[j] = BFloat16(src[j]);
}

#if defined(__AVX512F__)
// exp(x) for x <= 0 (the softmax's shifted scores): exp_impl's reduction and polynomial, with the
// power of two applied by vscalefps instead of two multiplies. Below -87.3 (where exp is subnormal or
// zero in float32) it gives 0: a subnormal result costs a microcode assist of ~100 cycles, and every
// masked score (-inf) would make one.
inline __m512 exp_nonpos(__m512 x) {
  const __mmask16 normal = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.33f), _CMP_NLT_UQ);  // (NaN: kept)
  x = _mm512_max_ps(_mm512_set1_ps(-88.0f), x);  // (NaN stays: max takes its second operand)
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(0.0013814595295116305f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.008368706330657005f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.04166838899254799f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.1666652113199234f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.4999999403953552f));
  __m512 e = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(_mm512_mul_ps(r, r), p, r));
  return _mm512_maskz_scalef_ps(normal, e, n);
}
#elif defined(__AVX2__) && defined(__FMA__)
// The same on 8 lanes: vec.h's exp_nonpos_fast (2^n written into the exponent field in one step;
// vec.h's two-step exp_impl cost 3-5% of the causal f32 forward at L=4096), 0 below -87.33. NaN
// stays NaN.
inline __m256 exp_nonpos(__m256 x) { return exp_nonpos_fast(VecF8{x}).v; }
// Lanes [0, n) set (n <= 8): the mask of a row's last n < 8 floats, so that they take the same steps.
inline __m256i first_lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
// The sum of the 8 lanes.
inline float sum8(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}
#endif

inline bool attn_softmax_rows(float* s, int64_t bq, int64_t bk, float scale, float* mx, float* l, float* alpha, BFloat16* pb) {
  constexpr int W = VecF::N;
  const float ninf = -std::numeric_limits<float>::infinity();
  bool rescale = false;
#if defined(__AVX512F__)
  if (bk % 16 == 0) {  // 16 rows at a time: their maxima, alphas and sums as vectors
    const __m512 vs = _mm512_set1_ps(scale), vninf = _mm512_set1_ps(ninf);
    for (int64_t i0 = 0; i0 < bq; i0 += 16) {
      const int nr = static_cast<int>(std::min<int64_t>(16, bq - i0));
      const __mmask16 km = static_cast<__mmask16>((1u << nr) - 1);
      alignas(64) float m[16], mu[16], t[16];
      for (int r = 0; r < nr; ++r) {
        const float* row = s + (i0 + r) * bk;
        __m512 vm = vninf;
        for (int64_t j = 0; j < bk; j += 16) vm = _mm512_max_ps(vm, _mm512_loadu_ps(row + j));
        m[r] = _mm512_reduce_max_ps(vm);
      }
      const __m512 old = _mm512_mask_loadu_ps(vninf, km, mx + i0);
      const __m512 mn = _mm512_max_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(km, m), vs), old);  // (as std::max(old, .))
      const __m512 vmu = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mn, vninf, _CMP_EQ_OQ), mn, _mm512_setzero_ps());
      const __m512 va = exp_nonpos(_mm512_sub_ps(old, vmu));
      rescale |= _mm512_mask_cmp_ps_mask(km, va, _mm512_set1_ps(1.0f), _CMP_NEQ_UQ) != 0;
      _mm512_mask_storeu_ps(alpha + i0, km, va);
      _mm512_mask_storeu_ps(mx + i0, km, mn);
      _mm512_store_ps(mu, vmu);
      for (int r = 0; r < nr; ++r) {  // one pass: exponent, row sum, rounding
        float* row = s + (i0 + r) * bk;
        BFloat16* out = pb ? pb + (i0 + r) * bk : nullptr;
        const __m512 vr = _mm512_set1_ps(mu[r]);
        __m512 acc = _mm512_setzero_ps();
        for (int64_t j = 0; j < bk; j += 16) {
          __m512 p = exp_nonpos(_mm512_fmsub_ps(_mm512_loadu_ps(row + j), vs, vr));
          acc = _mm512_add_ps(acc, p);
          if (out) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), bf16x16(p));
          else _mm512_storeu_ps(row + j, p);
        }
        t[r] = _mm512_reduce_add_ps(acc);
      }
      const __m512 vl = _mm512_mask_loadu_ps(_mm512_setzero_ps(), km, l + i0);
      _mm512_mask_storeu_ps(l + i0, km, _mm512_fmadd_ps(vl, va, _mm512_maskz_loadu_ps(km, t)));
    }
    return rescale;
  }
#endif
  alignas(64) float lanes[W];
  for (int64_t i = 0; i < bq; ++i) {
    float* row = s + i * bk;
    VecF vm = VecF::set1(ninf);
    int64_t j = 0;
    for (; j + W <= bk; j += W) vm = VecF::max(vm, VecF::load(row + j));
    vm.store(lanes);
    float m = ninf;
    for (int k = 0; k < W; ++k) m = std::max(m, lanes[k]);
    for (; j < bk; ++j) m = std::max(m, row[j]);
    const float mn = std::max(mx[i], m * scale);
    const float mu = mn == ninf ? 0.0f : mn;
    alpha[i] = std::exp(mx[i] - mu);
    rescale |= alpha[i] != 1.0f;
    mx[i] = mn;
#if defined(__AVX512F__)
    {  // one pass: exponent, row sum, rounding; the float32 probabilities are not kept
      const __m512 vs = _mm512_set1_ps(scale), vmu = _mm512_set1_ps(mu);
      __m512 acc = _mm512_setzero_ps();
      BFloat16* out = pb ? pb + i * bk : nullptr;
      for (j = 0; j + 16 <= bk; j += 16) {
        __m512 p = exp_nonpos(_mm512_fmsub_ps(_mm512_loadu_ps(row + j), vs, vmu));
        acc = _mm512_add_ps(acc, p);
        if (out) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), bf16x16(p));
        else _mm512_storeu_ps(row + j, p);
      }
      float t = _mm512_reduce_add_ps(acc);
      for (; j < bk; ++j) {
        const float p = std::exp(row[j] * scale - mu);
        t += p;
        if (out) out[j] = BFloat16(p);
        else row[j] = p;
      }
      l[i] = l[i] * alpha[i] + t;
      continue;
    }
#elif defined(__AVX2__) && defined(__FMA__)
    {  // one pass: exponent and row sum
      const __m256 vs = _mm256_set1_ps(scale), vmu = _mm256_set1_ps(mu);
      __m256 acc = _mm256_setzero_ps();
      for (j = 0; j + 8 <= bk; j += 8) {
        const __m256 p = exp_nonpos(_mm256_fmsub_ps(_mm256_loadu_ps(row + j), vs, vmu));
        acc = _mm256_add_ps(acc, p);
        _mm256_storeu_ps(row + j, p);
      }
      if (j < bk) {  // (masked-off lanes load 0 and add 0)
        const __m256i km = first_lanes(bk - j);
        const __m256 p = _mm256_and_ps(_mm256_castsi256_ps(km),
                                       exp_nonpos(_mm256_fmsub_ps(_mm256_maskload_ps(row + j, km), vs, vmu)));
        acc = _mm256_add_ps(acc, p);
        _mm256_maskstore_ps(row + j, km, p);
      }
      l[i] = l[i] * alpha[i] + sum8(acc);
      if (pb) round_bf16(pb + i * bk, row, bk);
      continue;
    }
#endif
    const VecF vs = VecF::set1(scale), vmu = VecF::set1(mu);
    VecF sum = VecF::set1(0.0f);
    for (j = 0; j + W <= bk; j += W) {
      VecF p = (VecF::load(row + j) * vs - vmu).exp();
      sum = sum + p;
      p.store(row + j);
    }
    sum.store(lanes);
    float t = 0.0f;
    for (int k = 0; k < W; ++k) t += lanes[k];
    for (; j < bk; ++j) {
      row[j] = std::exp(row[j] * scale - mu);
      t += row[j];
    }
    l[i] = l[i] * alpha[i] + t;
    if (pb) round_bf16(pb + i * bk, row, bk);
  }
  return rescale;
}

}  // namespace

}  // namespace kiln::cpu::KILN_ISA
