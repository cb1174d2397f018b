// Attention's row kernels, compiled once per ISA (the "attention" family of the kernel table):
// FlexAttention's fused softmax step (attention_softmax.h) and, with AVX-512, its float32 forward
// products from K^T packed once per call (the BLAS call per tile packs K and P every time).
#include "kiln/backend/cpu/attention_softmax.h"

namespace kiln::cpu::KILN_ISA {
namespace {

#if defined(__AVX512F__)
// K (S x E, rows E apart; S a multiple of 32) -> [S / 32][E][32 keys].
void pack_kt_f32(const float* k, int64_t S, int64_t E, float* dst) {
  for (int64_t n0 = 0; n0 < S; n0 += 32, dst += 32 * E)
    for (int64_t j = 0; j < 32; ++j)
      for (int64_t e = 0; e < E; ++e) dst[e * 32 + j] = k[(n0 + j) * E + e];
}

// s (bq x bk, rows bk apart) = Q (bq x E, rows E apart) K^T for keys [j0, j0 + bk) of the packed K^T;
// bq a multiple of 8, bk and j0 of 32. Micro-tiles of 8 rows x 32 keys, Q broadcast from its rows.
void qk_f32(const float* q, int64_t bq, int64_t E, const float* kt, int64_t j0, int64_t bk, float* s) {
  for (int64_t n0 = 0; n0 < bk; n0 += 32) {
    const float* panel = kt + (j0 + n0) * E;  // [E][32]
    for (int64_t i0 = 0; i0 < bq; i0 += 8) {
      __m512 c[8][2];
      for (int r = 0; r < 8; ++r) c[r][0] = c[r][1] = _mm512_setzero_ps();
      const float* qr = q + i0 * E;
      for (int64_t e = 0; e < E; ++e) {
        const __m512 b0 = _mm512_loadu_ps(panel + e * 32), b1 = _mm512_loadu_ps(panel + e * 32 + 16);
        for (int r = 0; r < 8; ++r) {
          const __m512 a = _mm512_set1_ps(qr[r * E + e]);
          c[r][0] = _mm512_fmadd_ps(a, b0, c[r][0]);
          c[r][1] = _mm512_fmadd_ps(a, b1, c[r][1]);
        }
      }
      for (int r = 0; r < 8; ++r) {
        _mm512_storeu_ps(s + (i0 + r) * bk + n0, c[r][0]);
        _mm512_storeu_ps(s + (i0 + r) * bk + n0 + 16, c[r][1]);
      }
    }
  }
}

// acc (bq x Ev, rows Ev apart) += P (bq x bk, rows bk apart) V (bk x Ev, rows Ev apart); bq a multiple
// of 8, Ev of 32. V's rows are read where they lie.
void pv_f32(const float* p, int64_t bq, int64_t bk, const float* v, int64_t Ev, float* acc) {
  for (int64_t e0 = 0; e0 < Ev; e0 += 32)
    for (int64_t i0 = 0; i0 < bq; i0 += 8) {
      __m512 c[8][2];
      for (int r = 0; r < 8; ++r) {
        c[r][0] = _mm512_loadu_ps(acc + (i0 + r) * Ev + e0);
        c[r][1] = _mm512_loadu_ps(acc + (i0 + r) * Ev + e0 + 16);
      }
      const float* pr = p + i0 * bk;
      for (int64_t j = 0; j < bk; ++j) {
        const __m512 b0 = _mm512_loadu_ps(v + j * Ev + e0), b1 = _mm512_loadu_ps(v + j * Ev + e0 + 16);
        for (int r = 0; r < 8; ++r) {
          const __m512 a = _mm512_set1_ps(pr[r * bk + j]);
          c[r][0] = _mm512_fmadd_ps(a, b0, c[r][0]);
          c[r][1] = _mm512_fmadd_ps(a, b1, c[r][1]);
        }
      }
      for (int r = 0; r < 8; ++r) {
        _mm512_storeu_ps(acc + (i0 + r) * Ev + e0, c[r][0]);
        _mm512_storeu_ps(acc + (i0 + r) * Ev + e0 + 16, c[r][1]);
      }
    }
}
#endif

}  // namespace

void fill_attention(KernelTable& t) {
  t.attn_softmax = &attn_softmax_rows;
#if defined(__AVX512F__)
  t.attn_pack_kt_f32 = &pack_kt_f32;
  t.attn_qk_f32 = &qk_f32;
  t.attn_pv_f32 = &pv_f32;
#endif
}

}  // namespace kiln::cpu::KILN_ISA
