// Attention's row kernels, compiled once per ISA (the "attention" family of the kernel table):
// FlexAttention's fused softmax step (attention_softmax.h) and, with AVX-512 or AVX2, its float32 tile products:
// Q K^T (and dO V^T) from K^T (V^T) packed in 32-key panels, and the products with a row-major
// right-hand side read where it lies (a BLAS call per tile packed both operands every time); the
// backward's row steps and the mask's application.
#include <algorithm>

#include "kiln/backend/cpu/attention_softmax.h"

namespace kiln::cpu::KILN_ISA {
namespace {

#if defined(__AVX512F__)
// r[c] := column c of the 16 x 16 matrix whose rows are r[0..15].
inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane: (a0 b0 a1 b1), (a2 b2 a3 b3)
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // u[4i + k], lane l: column 4l + k of rows 4i .. 4i + 3
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int k = 0; k < 4; ++k) {  // lanes gathered across the four row groups
    const __m512 v0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x88), v1 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xDD);
    const __m512 w0 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x88);
    const __m512 w1 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xDD);
    r[k] = _mm512_shuffle_f32x4(v0, w0, 0x88);
    r[8 + k] = _mm512_shuffle_f32x4(v0, w0, 0xDD);
    r[4 + k] = _mm512_shuffle_f32x4(v1, w1, 0x88);
    r[12 + k] = _mm512_shuffle_f32x4(v1, w1, 0xDD);
  }
}

// K (S x E, rows E apart; S a multiple of 32) -> [S / 32][E][32 keys]: 16 x 16 blocks transposed in
// registers, the columns past a multiple of 16 one by one.
void pack_kt_f32(const float* k, int64_t S, int64_t E, float* dst) {
  const int64_t E16 = E / 16 * 16;
  for (int64_t n0 = 0; n0 < S; n0 += 32, dst += 32 * E) {
    for (int64_t j0 = 0; j0 < 32; j0 += 16)
      for (int64_t e0 = 0; e0 < E16; e0 += 16) {
        __m512 r[16];
        for (int j = 0; j < 16; ++j) r[j] = _mm512_loadu_ps(k + (n0 + j0 + j) * E + e0);
        transpose16(r);
        for (int c = 0; c < 16; ++c) _mm512_storeu_ps(dst + (e0 + c) * 32 + j0, r[c]);
      }
    for (int64_t j = 0; j < 32; ++j)
      for (int64_t e = E16; e < E; ++e) dst[e * 32 + j] = k[(n0 + j) * E + e];
  }
}

// s (bq x bk, rows bk apart) = Q (bq x E, rows E apart) K^T for keys [j0, j0 + bk) of the packed K^T;
// bq a multiple of 8, bk and j0 of 32. Micro-tiles of 8 rows x 32 keys, Q broadcast from its rows.
void qk_f32(const float* q, int64_t bq, int64_t E, const float* kt, int64_t j0, int64_t bk, float* s) {
  const int64_t lines = 2 * E, per = (lines + bq / 8 - 1) / (bq / 8);  // a panel's cache lines; per micro-tile
  for (int64_t n0 = 0; n0 < bk; n0 += 32) {
    const float* panel = kt + (j0 + n0) * E;  // [E][32]
    // the tile's next panel fetched while this one is used
    const char* next = reinterpret_cast<const char*>(panel + 32 * E);
    const int64_t next_lines = n0 + 32 < bk ? lines : 0;
    for (int64_t i0 = 0; i0 < bq; i0 += 8) {
      for (int64_t x = (i0 / 8) * per, xe = std::min(next_lines, x + per); x < xe; ++x)
        _mm_prefetch(next + x * 64, _MM_HINT_T0);
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

// C (m x n, rows ldc apart) += alpha * op(A) B, B (k x n, rows ldb apart) read where it lies; op(A) is
// A (m x k, rows lda apart), or A^T for an A of k x m (rows lda apart) when TA. m a multiple of 8, n of
// 32. Micro-tiles of 8 rows x 32 columns over slices of 128 of k (B's 32-column panel of a slice, 16 KB,
// stays in L1 for every row). alpha 1 accumulates onto C's values; any other alpha sums a slice's
// products first and adds alpha times the sum (as a BLAS call with beta 1).
template <bool TA>
void mm_f32_t(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
              int64_t ldb, float* c, int64_t ldc) {
  constexpr int64_t kSlice = 128;
  const bool onto = alpha == 1.0f;
  const __m512 va = _mm512_set1_ps(alpha);
  for (int64_t p0 = 0; p0 < k; p0 += kSlice) {
    const int64_t p1 = std::min(k, p0 + kSlice);
    for (int64_t n0 = 0; n0 < n; n0 += 32) {
      // B's next panel (this slice's next 32 columns, else the next slice's first) fetched meanwhile
      int64_t np0 = p0, np1 = p1, nn0 = n0 + 32;
      if (nn0 >= n) nn0 = 0, np0 = p1, np1 = std::min(k, p1 + kSlice);
      const int64_t lines = 2 * (np1 - np0), per = (lines + m / 8 - 1) / (m / 8);
      for (int64_t i0 = 0; i0 < m; i0 += 8) {
        for (int64_t x = (i0 / 8) * per, xe = std::min(lines, x + per); x < xe; ++x)
          _mm_prefetch(reinterpret_cast<const char*>(b + (np0 + x / 2) * ldb + nn0 + (x & 1) * 16), _MM_HINT_T0);
        __m512 acc[8][2];
        for (int r = 0; r < 8; ++r) {
          float* cr = c + (i0 + r) * ldc + n0;
          acc[r][0] = onto ? _mm512_loadu_ps(cr) : _mm512_setzero_ps();
          acc[r][1] = onto ? _mm512_loadu_ps(cr + 16) : _mm512_setzero_ps();
        }
        for (int64_t p = p0; p < p1; ++p) {
          const __m512 b0 = _mm512_loadu_ps(b + p * ldb + n0), b1 = _mm512_loadu_ps(b + p * ldb + n0 + 16);
          for (int r = 0; r < 8; ++r) {
            const __m512 x = _mm512_set1_ps(TA ? a[p * lda + i0 + r] : a[(i0 + r) * lda + p]);
            acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
          }
        }
        for (int r = 0; r < 8; ++r) {
          float* cr = c + (i0 + r) * ldc + n0;
          if (!onto) {
            acc[r][0] = _mm512_fmadd_ps(va, acc[r][0], _mm512_loadu_ps(cr));
            acc[r][1] = _mm512_fmadd_ps(va, acc[r][1], _mm512_loadu_ps(cr + 16));
          }
          _mm512_storeu_ps(cr, acc[r][0]);
          _mm512_storeu_ps(cr + 16, acc[r][1]);
        }
      }
    }
  }
}

// The backward's row steps: p (bq x bk) := exp(p * scale - lse[row]), rows whose lse is -inf all 0 (a
// fully masked row); after dP: ds := p * (ds - d[row]).
void bwd_p(float* p, int64_t bq, int64_t bk, float scale, const float* lse) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const __m512 vs = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < bq; ++i) {
    float* row = p + i * bk;
    if (lse[i] == ninf) {
      std::fill(row, row + bk, 0.0f);
      continue;
    }
    const __m512 vl = _mm512_set1_ps(lse[i]);
    int64_t j = 0;
    for (; j + 16 <= bk; j += 16) _mm512_storeu_ps(row + j, exp_nonpos(_mm512_fmsub_ps(_mm512_loadu_ps(row + j), vs, vl)));
    if (j < bk) {
      const __mmask16 km = static_cast<__mmask16>((1u << (bk - j)) - 1);
      _mm512_mask_storeu_ps(row + j, km, exp_nonpos(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(km, row + j), vs, vl)));
    }
  }
}

void bwd_ds(const float* p, float* ds, int64_t bq, int64_t bk, const float* d) {
  for (int64_t i = 0; i < bq; ++i) {
    const float* pr = p + i * bk;
    float* r = ds + i * bk;
    const __m512 vd = _mm512_set1_ps(d[i]);
    int64_t j = 0;
    for (; j + 16 <= bk; j += 16)
      _mm512_storeu_ps(r + j, _mm512_mul_ps(_mm512_loadu_ps(pr + j), _mm512_sub_ps(_mm512_loadu_ps(r + j), vd)));
    for (; j < bk; ++j) r[j] = pr[j] * (r[j] - d[i]);
  }
}

// s (bq x bk, rows ld apart) := -inf where m (bytes, rows ldm apart) is 0.
void mask_rows(float* s, int64_t ld, const uint8_t* m, int64_t ldm, int64_t bq, int64_t bk) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const __m512 vninf = _mm512_set1_ps(ninf);
  for (int64_t i = 0; i < bq; ++i) {
    float* row = s + i * ld;
    const uint8_t* mr = m + i * ldm;
    int64_t j = 0;
    for (; j + 16 <= bk; j += 16) {
      const __mmask16 off = _mm_cmpeq_epi8_mask(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mr + j)),
                                                _mm_setzero_si128());
      _mm512_mask_storeu_ps(row + j, off, vninf);
    }
    for (; j < bk; ++j)
      if (!mr[j]) row[j] = ninf;
  }
}

void mm_f32(bool ta, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
            int64_t ldb, float* c, int64_t ldc) {
  (ta ? mm_f32_t<true> : mm_f32_t<false>)(m, n, k, alpha, a, lda, b, ldb, c, ldc);
}
#elif defined(__AVX2__) && defined(__FMA__)
// The same kernels on AVX2's 16 registers: micro-tiles of 6 rows x 16 columns (12 accumulators, two B
// vectors, one broadcast), rows taken 6 at a time and the last 1-5 by a narrower tile. Without them
// each tile was a BLAS call that packed both operands (and zeroed the scores first): causal f32
// L = 4096 forward on Zen 3, one thread, 0.91x torch's fused SDPA.

// f<RM>(i0) for rows [i0, i0 + RM) covering [0, m), RM = 6 but at the end.
template <class F>
inline void by_six_rows(int64_t m, F&& f) {
  int64_t i0 = 0;
  for (; i0 + 6 <= m; i0 += 6) f.template operator()<6>(i0);
  switch (m - i0) {
    case 5: f.template operator()<5>(i0); break;
    case 4: f.template operator()<4>(i0); break;
    case 3: f.template operator()<3>(i0); break;
    case 2: f.template operator()<2>(i0); break;
    case 1: f.template operator()<1>(i0); break;
    default: break;
  }
}

// K (S x E, rows E apart; S a multiple of 32) -> [S / 32][E][32 keys].
void pack_kt_f32(const float* k, int64_t S, int64_t E, float* dst) {
  for (int64_t n0 = 0; n0 < S; n0 += 32, dst += 32 * E)
    for (int64_t j = 0; j < 32; ++j)
      for (int64_t e = 0; e < E; ++e) dst[e * 32 + j] = k[(n0 + j) * E + e];
}

// s (bq x bk, rows bk apart) = Q (bq x E, rows E apart) K^T for keys [j0, j0 + bk) of the packed K^T;
// bk and j0 multiples of 32. Each 16-key half of a panel ([E][32], 8 KB for E = 64) stays in L1 for
// every row.
void qk_f32(const float* q, int64_t bq, int64_t E, const float* kt, int64_t j0, int64_t bk, float* s) {
  for (int64_t n0 = 0; n0 < bk; n0 += 16) {
    const float* half = kt + (j0 + n0 / 32 * 32) * E + n0 % 32;  // column n0 % 32 of its panel
    by_six_rows(bq, [&]<int RM>(int64_t i0) {
      __m256 c[RM][2];
      for (int r = 0; r < RM; ++r) c[r][0] = c[r][1] = _mm256_setzero_ps();
      const float* qr = q + i0 * E;
      for (int64_t e = 0; e < E; ++e) {
        const __m256 b0 = _mm256_loadu_ps(half + e * 32), b1 = _mm256_loadu_ps(half + e * 32 + 8);
        for (int r = 0; r < RM; ++r) {
          const __m256 a = _mm256_broadcast_ss(qr + r * E + e);
          c[r][0] = _mm256_fmadd_ps(a, b0, c[r][0]);
          c[r][1] = _mm256_fmadd_ps(a, b1, c[r][1]);
        }
      }
      for (int r = 0; r < RM; ++r) {
        _mm256_storeu_ps(s + (i0 + r) * bk + n0, c[r][0]);
        _mm256_storeu_ps(s + (i0 + r) * bk + n0 + 8, c[r][1]);
      }
    });
  }
}

// C (m x n, rows ldc apart) += alpha * op(A) B as the AVX-512 kernel (n a multiple of 16 here), over
// slices of 128 of k (B's 16-column panel of a slice, 8 KB, stays in L1 for every row).
template <bool TA>
void mm_f32_t(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
              int64_t ldb, float* c, int64_t ldc) {
  constexpr int64_t kSlice = 128;
  const bool onto = alpha == 1.0f;
  const __m256 va = _mm256_set1_ps(alpha);
  for (int64_t p0 = 0; p0 < k; p0 += kSlice) {
    const int64_t p1 = std::min(k, p0 + kSlice);
    for (int64_t n0 = 0; n0 < n; n0 += 16)
      by_six_rows(m, [&]<int RM>(int64_t i0) {
        __m256 acc[RM][2];
        for (int r = 0; r < RM; ++r) {
          const float* cr = c + (i0 + r) * ldc + n0;
          acc[r][0] = onto ? _mm256_loadu_ps(cr) : _mm256_setzero_ps();
          acc[r][1] = onto ? _mm256_loadu_ps(cr + 8) : _mm256_setzero_ps();
        }
        for (int64_t p = p0; p < p1; ++p) {
          const __m256 b0 = _mm256_loadu_ps(b + p * ldb + n0), b1 = _mm256_loadu_ps(b + p * ldb + n0 + 8);
          for (int r = 0; r < RM; ++r) {
            const __m256 x = _mm256_broadcast_ss(TA ? a + p * lda + i0 + r : a + (i0 + r) * lda + p);
            acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
          }
        }
        for (int r = 0; r < RM; ++r) {
          float* cr = c + (i0 + r) * ldc + n0;
          if (!onto) {
            acc[r][0] = _mm256_fmadd_ps(va, acc[r][0], _mm256_loadu_ps(cr));
            acc[r][1] = _mm256_fmadd_ps(va, acc[r][1], _mm256_loadu_ps(cr + 8));
          }
          _mm256_storeu_ps(cr, acc[r][0]);
          _mm256_storeu_ps(cr + 8, acc[r][1]);
        }
      });
  }
}

void mm_f32(bool ta, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
            int64_t ldb, float* c, int64_t ldc) {
  (ta ? mm_f32_t<true> : mm_f32_t<false>)(m, n, k, alpha, a, lda, b, ldb, c, ldc);
}

// The backward's row steps and the mask, as the AVX-512 ones.
void bwd_p(float* p, int64_t bq, int64_t bk, float scale, const float* lse) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const __m256 vs = _mm256_set1_ps(scale);
  for (int64_t i = 0; i < bq; ++i) {
    float* row = p + i * bk;
    if (lse[i] == ninf) {
      std::fill(row, row + bk, 0.0f);
      continue;
    }
    const __m256 vl = _mm256_set1_ps(lse[i]);
    int64_t j = 0;
    for (; j + 8 <= bk; j += 8)
      _mm256_storeu_ps(row + j, exp_nonpos(_mm256_fmsub_ps(_mm256_loadu_ps(row + j), vs, vl)));
    if (j < bk) {
      const __m256i km = first_lanes(bk - j);
      _mm256_maskstore_ps(row + j, km, exp_nonpos(_mm256_fmsub_ps(_mm256_maskload_ps(row + j, km), vs, vl)));
    }
  }
}

void bwd_ds(const float* p, float* ds, int64_t bq, int64_t bk, const float* d) {
  for (int64_t i = 0; i < bq; ++i) {
    const float* pr = p + i * bk;
    float* r = ds + i * bk;
    const __m256 vd = _mm256_set1_ps(d[i]);
    int64_t j = 0;
    for (; j + 8 <= bk; j += 8)
      _mm256_storeu_ps(r + j, _mm256_mul_ps(_mm256_loadu_ps(pr + j), _mm256_sub_ps(_mm256_loadu_ps(r + j), vd)));
    for (; j < bk; ++j) r[j] = pr[j] * (r[j] - d[i]);
  }
}

void mask_rows(float* s, int64_t ld, const uint8_t* m, int64_t ldm, int64_t bq, int64_t bk) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const __m256 vninf = _mm256_set1_ps(ninf);
  for (int64_t i = 0; i < bq; ++i) {
    float* row = s + i * ld;
    const uint8_t* mr = m + i * ldm;
    int64_t j = 0;
    for (; j + 8 <= bk; j += 8) {
      const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mr + j)));
      const __m256 off = _mm256_castsi256_ps(_mm256_cmpeq_epi32(bytes, _mm256_setzero_si256()));
      _mm256_storeu_ps(row + j, _mm256_blendv_ps(_mm256_loadu_ps(row + j), vninf, off));
    }
    for (; j < bk; ++j)
      if (!mr[j]) row[j] = ninf;
  }
}
#endif

}  // namespace

void fill_attention(KernelTable& t) {
  t.attn_softmax = &attn_softmax_rows;
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  t.attn_pack_kt_f32 = &pack_kt_f32;
  t.attn_qk_f32 = &qk_f32;
  t.attn_mm_f32 = &mm_f32;
  t.attn_bwd_p = &bwd_p;
  t.attn_bwd_ds = &bwd_ds;
  t.attn_mask = &mask_rows;
#endif
}

}  // namespace kiln::cpu::KILN_ISA
