// The float32 panels of kiln's packed GEMM (included by kernels_gemm.cpp only): every input type is
// converted to float32 while packing, and the micro-kernel multiplies float32 with fused
// multiply-adds (AVX-512: 14 x 32 = 28 zmm accumulators; AVX2: 6 x 16 = twelve ymm accumulators,
// broadcast A, two B loads per k; base ISA: 4 x 8 in plain C++, mul then add). Also the matrix-vector and tiny-product paths, which replay
// the micro-kernel's arithmetic exactly (see kernels_gemm.cpp).
#pragma once

#include "kiln/backend/cpu/gemm_elem.h"
#include "kiln/backend/cpu/vec.h"

namespace kiln::cpu::KILN_ISA {
namespace {
namespace f32p {

// AVX-512: 14 x 32 (28 zmm accumulators). Each element of C is the same chain of fused multiply-adds
// in k order whatever the tile's width, so the AVX2 and AVX-512 tables give the same bits.
#if defined(KILN_GEMM_AVX2) && defined(__AVX512F__)
#define KILN_GEMM_F32_AVX512 1
constexpr int MR = 14, NR = 32;
#elif defined(KILN_GEMM_AVX2)
constexpr int MR = 6, NR = 16;
#else
constexpr int MR = 4, NR = 8;
#endif

// ---- packing ------------------------------------------------------------------------------------

// A block (mc x kc, element (i, k) at a[i * rs + k * cs]) -> ceil(mc / MR) micro-panels, each
// laid out [k][MR], rows past mc zero. rows_avail: rows that exist from a (for 8-wide reads).
// May write a few floats past the last panel (at most 2 with AVX-512's MR = 14, into the scratch slack).
template <class T>
void pack_a(const T* a, int64_t rs, int64_t cs, int64_t mc, int64_t kc, int64_t rows_avail, float* dst) {
  for (int64_t i0 = 0; i0 < mc; i0 += MR, dst += MR * kc) {
    const int64_t mr = std::min<int64_t>(MR, mc - i0);
    const T* p = a + i0 * rs;
    int64_t k = 0;
#ifdef KILN_GEMM_AVX2
    constexpr int G = (MR + 7) / 8;  // groups of 8 rows
    if (mr == MR && cs == 1) {  // row-major: 8 k at a time, 8 rows at a time transposed in registers
      for (; k + 8 <= kc; k += 8) {
        __m256 r[G][8];
        for (int g = 0; g < G; ++g) {
          for (int i = 0; i < 8; ++i) r[g][i] = g * 8 + i < MR ? load8(p + (g * 8 + i) * rs + k) : _mm256_setzero_ps();
          transpose8(r[g]);
        }
        // k in order: the lanes past MR spill into the next k's row, which its own store overwrites
        // (past the last k: the scratch slack)
        for (int j = 0; j < 8; ++j)
          for (int g = 0; g < G; ++g) _mm256_storeu_ps(dst + (k + j) * MR + g * 8, r[g][j]);
      }
    } else if (mr == MR && rs == 1 && i0 + 8 * G <= rows_avail) {  // column-major: 8-wide reads per k
      for (; k < kc; ++k)
        for (int g = 0; g < G; ++g) _mm256_storeu_ps(dst + k * MR + g * 8, load8(p + g * 8 + k * cs));
    }
#else
    (void)rows_avail;
#endif
    for (; k < kc; ++k) {
      float* d = dst + k * MR;
      for (int64_t i = 0; i < mr; ++i) d[i] = to_f32(p[i * rs + k * cs]);
      for (int64_t i = mr; i < MR; ++i) d[i] = 0.0f;
    }
  }
}

// B block (kc x nc, element (k, j) at b[k * rs + j * cs]) -> ceil(nc / NR) micro-panels, each laid
// out [k][NR], columns past nc zero.
template <class T>
void pack_b(const T* b, int64_t rs, int64_t cs, int64_t kc, int64_t nc, float* dst) {
  for (int64_t j0 = 0; j0 < nc; j0 += NR, dst += NR * kc) {
    const int64_t nr = std::min<int64_t>(NR, nc - j0);
    const T* p = b + j0 * cs;
    int64_t k = 0;
#ifdef KILN_GEMM_AVX2
    if (nr == NR && cs == 1) {  // row-major
      for (; k < kc; ++k)
        for (int h = 0; h < NR; h += 8) _mm256_storeu_ps(dst + k * NR + h, load8(p + k * rs + h));
    } else if (nr == NR && rs == 1) {  // column-major: 8 columns x 8 k, transposed in registers
      for (; k + 8 <= kc; k += 8) {
        for (int h = 0; h < NR; h += 8) {
          __m256 r[8];
          for (int j = 0; j < 8; ++j) r[j] = load8(p + (h + j) * cs + k);
          transpose8(r);
          for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + (k + i) * NR + h, r[i]);
        }
      }
    }
#endif
    for (; k < kc; ++k) {
      float* d = dst + k * NR;
      for (int64_t j = 0; j < nr; ++j) d[j] = to_f32(p[k * rs + j * cs]);
      for (int64_t j = nr; j < NR; ++j) d[j] = 0.0f;
    }
  }
}

// ---- micro-kernels: tile[MR][NR] = sum_k A[k][0..MR) x B[k][0..NR) --------------------------------

#ifdef KILN_GEMM_AVX2
// (vec.h's float vector: 16 lanes on the AVX-512 table, 8 on the AVX2 one)
static_assert(NR == 2 * VecF::N);

// R rows (<= MR) and W vectors of columns of the tile; rows / columns past those are left unwritten.
template <int R, int W>
void ukernel(int64_t kc, const float* __restrict A, const float* __restrict B, float* __restrict tile) {
  VecF c[R][W];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < W; ++v) c[i][v] = VecF::set1(0.0f);
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; ++k) {
    VecF b[W];
#pragma GCC unroll 2
    for (int v = 0; v < W; ++v) b[v] = VecF::load(B + v * VecF::N);
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const VecF a = VecF::set1(A[i]);
#pragma GCC unroll 2
      for (int v = 0; v < W; ++v) c[i][v] = fma(a, b[v], c[i][v]);
    }
    A += MR;
    B += NR;
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < W; ++v) c[i][v].store(tile + i * NR + v * VecF::N);
}

using UkernelFn = void (*)(int64_t, const float*, const float*, float*);
template <int... R>
constexpr auto make_ukernels(std::integer_sequence<int, R...>) {
  struct Tab { UkernelFn f[MR][2]; };
  return Tab{{{&ukernel<R + 1, 1>, &ukernel<R + 1, 2>}...}};
}
constexpr auto kUkernels = make_ukernels(std::make_integer_sequence<int, MR>{});

inline void run_ukernel(int64_t mr, int64_t nr, int64_t kc, const float* A, const float* B, float* tile) {
  kUkernels.f[mr - 1][nr > VecF::N ? 1 : 0](kc, A, B, tile);
}
#else
// Plain C++ for the base ISA: the compiler vectorises the column loop (no FMA: mul then add).
inline void run_ukernel(int64_t, int64_t, int64_t kc, const float* __restrict A, const float* __restrict B,
                        float* __restrict tile) {
  float c[MR][NR] = {};
  for (int64_t k = 0; k < kc; ++k, A += MR, B += NR)
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) c[i][j] += A[i] * B[j];
  std::memcpy(tile, c, sizeof(c));
}
#endif

constexpr int64_t kAxpyCols = 4096;  // GEMV, j-contiguous matrix: columns per pass

#ifdef KILN_GEMM_AVX2
// ---- matrix-vector shapes (M == 1 or N == 1) ----------------------------------------------------
// y[j] = sum_k x[k] * m(k, j): one row of C against a K x n matrix m (B itself, or A transposed).
// No packing and no padded micro-tile: the matrix is read once, in place. Every y[j] runs the
// GEMM path's arithmetic exactly (per K slice a chain acc = fma(x[k], m(k, j), acc) from 0 in k
// order, slices summed into a float32 total in order), so the result is bit-identical to what
// the packed path would give for that row or column.

// Folds one slice's accumulators into the totals (first slice: copy).
inline __m256 fold(bool first, const float* tot, __m256 acc) {
  return first ? acc : _mm256_add_ps(_mm256_loadu_ps(tot), acc);
}

// m(k, j) = m[k * ks + j]: j contiguous. Rows are streamed whole (up to kAxpyCols columns at a
// time), four at once, into the slice's accumulators in memory (L1 / L2):
// acc[j] = fma(x[k + 3], m(k + 3, j), fma(x[k + 2], ..., fma(x[k], m(k, j), acc[j]))).
template <int R, class T>
inline void axpy_rows(const float* x, const T* row, int64_t ks, int64_t cn, float* acc) {
  __m256 xb[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) xb[r] = _mm256_broadcast_ss(x + r);
  int64_t j = 0;
  for (; j + 16 <= cn; j += 16) {
    __m256 a0 = _mm256_load_ps(acc + j), a1 = _mm256_load_ps(acc + j + 8);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      a0 = _mm256_fmadd_ps(xb[r], load8(row + r * ks + j), a0);
      a1 = _mm256_fmadd_ps(xb[r], load8(row + r * ks + j + 8), a1);
    }
    _mm256_store_ps(acc + j, a0);
    _mm256_store_ps(acc + j + 8, a1);
  }
  for (; j + 8 <= cn; j += 8) {
    __m256 a0 = _mm256_load_ps(acc + j);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) a0 = _mm256_fmadd_ps(xb[r], load8(row + r * ks + j), a0);
    _mm256_store_ps(acc + j, a0);
  }
  for (; j < cn; ++j) {
    float a = acc[j];
    for (int r = 0; r < R; ++r) a = fma1(x[r], to_f32(row[r * ks + j]), a);
    acc[j] = a;
  }
}

template <class T>
void gemv_axpy(const float* x, const T* m, int64_t ks, int64_t n, const Slicing& sl, float* tot, float* acc) {
  for (int64_t kb = 0; kb < sl.nk; ++kb) {
    const int64_t k0 = kb * sl.kcb, k1 = std::min(sl.K, k0 + sl.kcb);
    for (int64_t c0 = 0; c0 < n; c0 += kAxpyCols) {
      const int64_t cn = std::min(kAxpyCols, n - c0);
      std::fill(acc, acc + cn, 0.0f);
      int64_t k = k0;
      for (; k + 4 <= k1; k += 4) axpy_rows<4>(x + k, m + k * ks + c0, ks, cn, acc);
      for (; k < k1; ++k) axpy_rows<1>(x + k, m + k * ks + c0, ks, cn, acc);
      float* t = tot + c0;
      if (kb == 0) std::copy(acc, acc + cn, t);
      else
        for (int64_t j = 0; j < cn; ++j) t[j] = t[j] + acc[j];
    }
  }
}

// m(k, j) = rows[j][k]: k contiguous. G groups of 8 outputs; 8 x 8 blocks are transposed in
// registers so that each output still accumulates in k order.
template <int G, class T>
void gemv_dot_block(const float* x, const T* const* rows, const Slicing& sl, float* tot) {
  for (int64_t kb = 0; kb < sl.nk; ++kb) {
    const int64_t k0 = kb * sl.kcb, k1 = std::min(sl.K, k0 + sl.kcb);
    __m256 acc[G];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
    int64_t k = k0;
    for (; k + 8 <= k1; k += 8) {
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        __m256 r[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) r[i] = load8(rows[g * 8 + i] + k);
        transpose8(r);
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) acc[g] = _mm256_fmadd_ps(_mm256_broadcast_ss(x + k + i), r[i], acc[g]);
      }
    }
    for (; k < k1; ++k) {
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        alignas(32) float v[8];
        for (int i = 0; i < 8; ++i) v[i] = to_f32(rows[g * 8 + i][k]);
        acc[g] = _mm256_fmadd_ps(_mm256_broadcast_ss(x + k), _mm256_load_ps(v), acc[g]);
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) _mm256_storeu_ps(tot + g * 8, fold(kb == 0, tot + g * 8, acc[g]));
  }
}

#ifdef KILN_GEMM_F32_AVX512
// 16 x 16 float16 elements: r[i] holds elements 0..15 of row i; on return r[e] holds element e of
// rows 0..15 (interleaves of 16, 32 and 64 bits within the 128-bit lanes, then the lanes joined).
inline void transpose16x16_epi16(__m256i* r) {
  __m256i a[16], b[16];
  for (int p = 0; p < 8; ++p) {  // a[2p] / a[2p+1]: elements 0-3 / 4-7 (and 8-11 / 12-15) of rows 2p, 2p+1
    a[2 * p] = _mm256_unpacklo_epi16(r[2 * p], r[2 * p + 1]);
    a[2 * p + 1] = _mm256_unpackhi_epi16(r[2 * p], r[2 * p + 1]);
  }
  for (int q = 0; q < 4; ++q)  // b[4q + m]: elements 2m, 2m+1 (and 8+2m, 9+2m) of rows 4q..4q+3
    for (int h = 0; h < 2; ++h) {
      b[4 * q + 2 * h] = _mm256_unpacklo_epi32(a[4 * q + h], a[4 * q + 2 + h]);
      b[4 * q + 2 * h + 1] = _mm256_unpackhi_epi32(a[4 * q + h], a[4 * q + 2 + h]);
    }
  for (int h = 0; h < 2; ++h)  // a[8h + n]: element n (lane 1: 8+n) of rows 8h..8h+7
    for (int m = 0; m < 4; ++m) {
      a[8 * h + 2 * m] = _mm256_unpacklo_epi64(b[8 * h + m], b[8 * h + 4 + m]);
      a[8 * h + 2 * m + 1] = _mm256_unpackhi_epi64(b[8 * h + m], b[8 * h + 4 + m]);
    }
  for (int n = 0; n < 8; ++n) {
    r[n] = _mm256_permute2x128_si256(a[n], a[8 + n], 0x20);
    r[8 + n] = _mm256_permute2x128_si256(a[n], a[8 + n], 0x31);
  }
}

// gemv_dot_block for float16 rows on AVX-512: G groups of 16 outputs, lane i of group g = output
// 16 g + i, one zmm chain per group: each output still accumulates acc = fma(x[k], m(k, j), acc)
// from 0 in k order per slice, the packed path's arithmetic. 16 x 16 blocks are transposed at 16
// bits, then widened: half the shuffles per element of the float32 transposes. Each row is read a
// whole line (32 elements) at a time: rows of a power-of-two length (a 4096-wide weight: 8 KiB)
// all fall in one L1 set, so a half line read now would be evicted before its other half is.
// (Zen 4, 4096 x 4096, one thread: 6.6 GB/s with the float32 transposes, 16-17 now, 22 when the
// matrix sits in L3; bound by the shuffles: two groups at once, G = 2, were no faster.)
template <int G>
void gemv_dot_block16_f16(const float* x, const Half* const* rows, const Slicing& sl, float* tot) {
  for (int64_t kb = 0; kb < sl.nk; ++kb) {
    const int64_t k0 = kb * sl.kcb, k1 = std::min(sl.K, k0 + sl.kcb);
    __m512 acc[G];
    for (int g = 0; g < G; ++g) acc[g] = _mm512_setzero_ps();
    auto fmas = [&](__m512& a, const __m256i* r, int64_t k) {
#pragma GCC unroll 16
      for (int e = 0; e < 16; ++e) a = _mm512_fmadd_ps(_mm512_set1_ps(x[k + e]), _mm512_cvtph_ps(r[e]), a);
    };
    int64_t k = k0;
    for (; k + 32 <= k1; k += 32)
#pragma GCC unroll 2
      for (int g = 0; g < G; ++g) {
        __m256i r[16], hi[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) {
          const __m512i v = _mm512_loadu_si512(reinterpret_cast<const void*>(rows[g * 16 + i] + k));
          r[i] = _mm512_castsi512_si256(v), hi[i] = _mm512_extracti64x4_epi64(v, 1);
        }
        transpose16x16_epi16(r);
        fmas(acc[g], r, k);
        transpose16x16_epi16(hi);
        fmas(acc[g], hi, k + 16);
      }
    for (; k + 16 <= k1; k += 16)
      for (int g = 0; g < G; ++g) {
        __m256i r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[g * 16 + i] + k));
        transpose16x16_epi16(r);
        fmas(acc[g], r, k);
      }
    for (; k < k1; ++k)
      for (int g = 0; g < G; ++g) {
        alignas(64) float v[16];
        for (int i = 0; i < 16; ++i) v[i] = to_f32(rows[g * 16 + i][k]);
        acc[g] = _mm512_fmadd_ps(_mm512_set1_ps(x[k]), _mm512_load_ps(v), acc[g]);
      }
    for (int g = 0; g < G; ++g) {
      float* t = tot + 16 * g;
      _mm512_storeu_ps(t, kb == 0 ? acc[g] : _mm512_add_ps(_mm512_loadu_ps(t), acc[g]));
    }
  }
}
#endif

// tot must have room for n rounded up to 8.
template <class T>
void gemv_dot(const float* x, const T* m, int64_t js, int64_t n, const Slicing& sl, float* tot) {
#ifdef KILN_GEMM_F32_AVX512
  if constexpr (std::is_same_v<T, Half>) {  // whole groups of 16 outputs; the rest below
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
      const Half* rows[16];
      for (int i = 0; i < 16; ++i) rows[i] = m + (j + i) * js;
      gemv_dot_block16_f16<1>(x, rows, sl, tot + j);
    }
    if (j >= n) return;
    m += j * js, n -= j, tot += j;
  }
#endif
  // Two groups of 8 rows at a time, one when the rows lie a multiple of 4 KiB apart: then they all
  // fall in one L1 set (8 ways), and 16 rows read side by side evict each other's lines before
  // their next elements are read (Zen 4, avx2 table, float16 1 x K @ 4096 x K^T on one thread:
  // K = 4096: 6.8 GB/s with four groups, 10.4 with two, 12.3 with one; K = 4128: 10.9, 15.5, 11.6).
  const int gmax = (js * static_cast<int64_t>(sizeof(T))) % 4096 == 0 ? 1 : 2;
  for (int64_t j = 0; j < n; j += 8 * gmax) {
    const T* rows[16];
    for (int i = 0; i < 16; ++i) rows[i] = m + std::min<int64_t>(j + i, n - 1) * js;  // past n: repeats
    switch (std::min<int64_t>(gmax, ceil_div(n - j, 8))) {
      case 2: gemv_dot_block<2>(x, rows, sl, tot + j); break;
      default: gemv_dot_block<1>(x, rows, sl, tot + j); break;
    }
  }
}
#endif


// Tiny products (one K slice, at most kSmallMacs multiply-adds): no packing, one chain per output, the
// same arithmetic as the micro-kernel's lanes.
constexpr int64_t kSmallMacs = 64;

inline float madd(float a, float b, float c) {
#ifdef KILN_GEMM_AVX2
  return fma1(a, b, c);
#else
  return c + a * b;  // the base micro-kernel's operation (SSE2 has no FMA)
#endif
}

template <class TA, class TB, class TC>
void run_small(const GemmArgs& g, const TA* a, const TB* b, TC* c) {
  float bf[kSmallMacs];  // B converted once, [k][j]
  for (int64_t k = 0; k < g.K; ++k)
    for (int64_t j = 0; j < g.N; ++j) bf[k * g.N + j] = to_f32(b[k * g.b_rs + j * g.b_cs]);
  for (int64_t i = 0; i < g.M; ++i) {
    float av[kSmallMacs];
    for (int64_t k = 0; k < g.K; ++k) av[k] = to_f32(a[i * g.a_rs + k * g.a_cs]);
    for (int64_t j = 0; j < g.N; ++j) {
      float acc = 0.0f;
      for (int64_t k = 0; k < g.K; ++k) acc = madd(av[k], bf[k * g.N + j], acc);
      c[i * g.c_rs + j * g.c_cs] = from_f32<TC>(acc);
    }
  }
}

}  // namespace f32p

// Packs to float32: the panel element is one float (KU = 1: one k per element).
struct F32Panels {
  using W = float;
  static constexpr int MR = f32p::MR, NR = f32p::NR, KU = 1;
#ifdef KILN_GEMM_F32_AVX512
  static constexpr int64_t MC = 140;   // A block (MC x KC floats) stays in L2; B micro-panel (KC x 32) in L1
  static constexpr int64_t NC = 4064;  // widest column block (B is packed for all of K: see block_n)
#else
  static constexpr int64_t MC = 144;   // A block (MC x KC floats, 144 KiB) stays in L2; B micro-panel 16 KiB, L1
  static constexpr int64_t NC = 4080;  // widest column block (B is packed for all of K: see block_n)
#endif
  static_assert(MC % MR == 0 && NC % NR == 0);
#ifdef KILN_GEMM_AVX2
  static constexpr bool kGemv = true;
#else
  static constexpr bool kGemv = false;
#endif
  static constexpr int64_t kSmallMacs = f32p::kSmallMacs;
  static constexpr int64_t kAxpyCols = f32p::kAxpyCols;

  template <class T>
  static void pack_a(const T* a, int64_t rs, int64_t cs, int64_t mc, int64_t kc, int64_t rows_avail, W* dst) {
    f32p::pack_a(a, rs, cs, mc, kc, rows_avail, dst);
  }
  template <class T>
  static void pack_b(const T* b, int64_t rs, int64_t cs, int64_t kc, int64_t nc, W* dst) {
    f32p::pack_b(b, rs, cs, kc, nc, dst);
  }
  static void ukernel(int64_t mr, int64_t nr, int64_t kc, const W* A, const W* B, float* tile) {
    f32p::run_ukernel(mr, nr, kc, A, B, tile);
  }
  // The vector of a GEMV, K elements at stride xs, in the panel element type.
  template <class T>
  static void gemv_x(const T* x, int64_t xs, int64_t K, W* xw) {
    for (int64_t k = 0; k < K; ++k) xw[k] = to_f32(x[k * xs]);
  }
#ifdef KILN_GEMM_AVX2
  template <class T>
  static void gemv_axpy(const W* xw, const T* m, int64_t ks, int64_t n, const Slicing& sl, float* tot, float* acc) {
    f32p::gemv_axpy(xw, m, ks, n, sl, tot, acc);
  }
  template <class T>
  static void gemv_dot(const W* xw, const T* m, int64_t js, int64_t n, const Slicing& sl, float* tot) {
    f32p::gemv_dot(xw, m, js, n, sl, tot);
  }
#endif
  template <class TA, class TB, class TC>
  static void small(const GemmArgs& g, const TA* a, const TB* b, TC* c) {
    f32p::run_small(g, a, b, c);
  }
};

}  // namespace
}  // namespace kiln::cpu::KILN_ISA
