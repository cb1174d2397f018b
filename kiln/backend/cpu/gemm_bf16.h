// The bfloat16-pair panels of kiln's packed GEMM, for CPUs with AVX512-BF16 (included by
// kernels_gemm.cpp; empty unless that file is compiled with -mavx512bf16, which CMake does once
// more as the "avx512bf16" object, used by the avx512 table when the CPU has the instructions).
//
// Packing keeps bfloat16: a panel element is a 32-bit word holding the values of two consecutive
// k (high half the even one, low half the odd one, zero past K), so A's panel is [k/2][MR] words
// and B's [k/2][NR]. The
// micro-kernel (14 x 32: 28 zmm accumulators) broadcasts one A word and runs vdpbf16ps against two
// B vectors, which multiplies 32 bfloat16 pairs and adds both products to 16 float32 lanes per
// instruction: twice the float32 FMA rate, with no widening. float8 operands convert to bfloat16
// exactly, so they can use these panels too.
//
// The instruction adds the high halves' product to the accumulator first, then the low halves'
// (each product of two bfloat16 is exact in float32; each addition rounds to nearest even), which
// is why the even k sits in the high half: the sums are then those of the float32 kernel, k in
// order, and the result is the same bit for bit, except that vdpbf16ps reads subnormal inputs as
// zero and flushes subnormal results to zero (as torch's oneDNN kernels on the same CPUs do). The
// GEMV and tiny-product paths below use the same instruction with the same operands in the same
// order, so every path still gives the packed path's bits. (float8 matrix-vector products over a
// k-contiguous matrix from K = 64 on do not come here: they take the float32 panels' 64 lanes on
// every table, decision 80.)
#pragma once

#include "kiln/backend/cpu/gemm_elem.h"

#ifdef __AVX512BF16__
namespace kiln::cpu::KILN_ISA {
namespace {
namespace bf16p {

constexpr int MR = 14, NR = 32;
constexpr int64_t kSmallMacs = 64;
constexpr int64_t kAxpyCols = 4096;  // GEMV, j-contiguous matrix: columns per pass

// The bfloat16 bits of an element that converts to bfloat16 exactly (bfloat16, float8).
template <class T>
inline uint32_t bits16(T x) {
  if constexpr (std::is_same_v<T, BFloat16>) return x.x;
  else return std::bit_cast<uint32_t>(to_f32(x)) >> 16;
}

// The word of k (even) and k + 1 (p points at k's element, step to k + 1's); has_odd false past K.
template <class T>
inline uint32_t pair(const T* p, int64_t step, bool has_odd) {
  return bits16(p[0]) << 16 | (has_odd ? bits16(p[step]) : 0u);
}

// 32 float8 bytes -> their 32 bfloat16 bits (bits16's values, NaN included), with integer ops:
// |x| shifted into place plus the exponent bias difference, a table for the subnormals, then the
// specials and the sign.
template <class T>
inline __m512i f8_to_bf16(__m256i bytes) {
  const __m512i x = _mm512_cvtepu8_epi16(bytes);
  const __m512i mag = _mm512_and_si512(x, _mm512_set1_epi16(0x7f));
  const __m512i sign = _mm512_slli_epi16(_mm512_and_si512(x, _mm512_set1_epi16(0x80)), 8);
  __m512i v;
  if constexpr (std::is_same_v<T, Float8_e4m3fn>) {  // m * 2^-9 below 2^-6; 0x7f NaN
    alignas(64) static constexpr uint16_t kSub[32] = {0, 0x3B00, 0x3B80, 0x3BC0, 0x3C00, 0x3C20, 0x3C40, 0x3C60};
    v = _mm512_add_epi16(_mm512_slli_epi16(mag, 4), _mm512_set1_epi16(0x3C00));  // (e + 120) << 7 | m << 4
    v = _mm512_mask_permutexvar_epi16(v, _mm512_cmplt_epu16_mask(mag, _mm512_set1_epi16(8)), mag,
                                      _mm512_load_si512(kSub));
    v = _mm512_mask_mov_epi16(v, _mm512_cmpeq_epi16_mask(mag, _mm512_set1_epi16(0x7f)), _mm512_set1_epi16(0x7FC0));
  } else {  // e5m2: m * 2^-16 below 2^-14; exponent 31: inf and NaN, the mantissa kept
    static_assert(std::is_same_v<T, Float8_e5m2>);
    alignas(64) static constexpr uint16_t kSub[32] = {0, 0x3780, 0x3800, 0x3840};
    v = _mm512_add_epi16(_mm512_slli_epi16(mag, 5), _mm512_set1_epi16(0x3800));  // (e + 112) << 7 | m << 5
    v = _mm512_mask_permutexvar_epi16(v, _mm512_cmplt_epu16_mask(mag, _mm512_set1_epi16(4)), mag,
                                      _mm512_load_si512(kSub));
    v = _mm512_mask_add_epi16(v, _mm512_cmpge_epu16_mask(mag, _mm512_set1_epi16(0x7c)), v, _mm512_set1_epi16(0x3800));
  }
  return _mm512_or_si512(v, sign);
}

// 16 contiguous elements -> their bfloat16 bits in the low halves of 16 32-bit lanes.
template <class T>
inline __m512i lo16(const T* p) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  } else if constexpr (std::is_same_v<T, Float8_e4m3fn> || std::is_same_v<T, Float8_e5m2>) {
    const __m256i b = _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm512_cvtepu16_epi32(_mm512_castsi512_si256(f8_to_bf16<T>(b)));
  } else {
    __m512 f = _mm512_insertf32x8(_mm512_castps256_ps512(load8(p)), load8(p + 8), 1);
    return _mm512_srli_epi32(_mm512_castps_si512(f), 16);
  }
}

// Words from the even and odd k's bits (each in the low halves).
inline __m512i pair16(__m512i even, __m512i odd) { return _mm512_or_si512(_mm512_slli_epi32(even, 16), odd); }
// The 16 words of 32 consecutive k from a row in place (bfloat16: the 32-bit words as they lie in
// memory, even k low, with their halves swapped; float8: converted, then the same).
template <class T>
inline __m512i words_in_place(const T* p) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return _mm512_rol_epi32(_mm512_loadu_si512(p), 16);
  } else if constexpr (std::is_same_v<T, Float8_e4m3fn> || std::is_same_v<T, Float8_e5m2>) {
    return _mm512_rol_epi32(f8_to_bf16<T>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16);
  } else {
    __m256i lo = _mm512_cvtepi32_epi16(lo16(p)), hi = _mm512_cvtepi32_epi16(lo16(p + 16));
    return _mm512_rol_epi32(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), 16);
  }
}
inline __m512bh as_bh(__m512i v) { return reinterpret_cast<__m512bh&>(v); }
inline __m512bh bcast(uint32_t w) { return as_bh(_mm512_set1_epi32(static_cast<int>(w))); }

// 16 x 16 transpose of 32-bit lanes: r[i] lane j -> r[j] lane i.
inline void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // u[i + q], 128-bit block L: column 4L + q of rows i..i+3
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int q = 0; q < 4; ++q) {
    __m512i s0 = _mm512_shuffle_i32x4(u[q], u[4 + q], 0x44), s1 = _mm512_shuffle_i32x4(u[q], u[4 + q], 0xee);
    __m512i s2 = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0x44), s3 = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0xee);
    r[q] = _mm512_shuffle_i32x4(s0, s2, 0x88);
    r[4 + q] = _mm512_shuffle_i32x4(s0, s2, 0xdd);
    r[8 + q] = _mm512_shuffle_i32x4(s1, s3, 0x88);
    r[12 + q] = _mm512_shuffle_i32x4(s1, s3, 0xdd);
  }
}

// ---- packing ------------------------------------------------------------------------------------

// A block (mc x kc, element (i, k) at a[i * rs + k * cs]) -> ceil(mc / MR) micro-panels of
// [ceil(kc / 2)][MR] words, rows past mc zero. rows_avail: rows that exist from a (for 16-wide
// reads). May write up to 2 words past the last panel (scratch slack).
template <class T>
void pack_a(const T* a, int64_t rs, int64_t cs, int64_t mc, int64_t kc, int64_t rows_avail, uint32_t* dst) {
  const int64_t kp = ceil_div(kc, 2);
  for (int64_t i0 = 0; i0 < mc; i0 += MR, dst += MR * kp) {
    const int64_t mr = std::min<int64_t>(MR, mc - i0);
    const T* p = a + i0 * rs;
    int64_t q = 0;
    if (mr == MR && cs == 1) {  // row-major: a row's pairs are words in place
      for (; 2 * q + 32 <= kc; q += 16) {
        __m512i r[16];
        for (int i = 0; i < MR; ++i) r[i] = words_in_place(p + i * rs + 2 * q);
        for (int i = MR; i < 16; ++i) r[i] = _mm512_setzero_si512();
        transpose16(r);
        for (int j = 0; j < 16; ++j) _mm512_storeu_si512(dst + (q + j) * MR, r[j]);  // 2 lanes overwritten next
      }
    } else if (mr == MR && rs == 1 && i0 + 16 <= rows_avail) {  // column-major: columns 2q, 2q + 1
      for (; 2 * q + 2 <= kc; ++q)
        _mm512_storeu_si512(dst + q * MR, pair16(lo16(p + 2 * q * cs), lo16(p + (2 * q + 1) * cs)));
    }
    for (; q < kp; ++q) {
      uint32_t* d = dst + q * MR;
      const bool hi = 2 * q + 1 < kc;
      for (int64_t i = 0; i < mr; ++i) d[i] = pair(p + i * rs + 2 * q * cs, cs, hi);
      for (int64_t i = mr; i < MR; ++i) d[i] = 0;
    }
  }
}

// B block (kc x nc, element (k, j) at b[k * rs + j * cs]) -> ceil(nc / NR) micro-panels of
// [ceil(kc / 2)][NR] words, columns past nc zero.
template <class T>
void pack_b(const T* b, int64_t rs, int64_t cs, int64_t kc, int64_t nc, uint32_t* dst) {
  const int64_t kp = ceil_div(kc, 2);
  for (int64_t j0 = 0; j0 < nc; j0 += NR, dst += NR * kp) {
    const int64_t nr = std::min<int64_t>(NR, nc - j0);
    const T* p = b + j0 * cs;
    int64_t q = 0;
    if (nr == NR && cs == 1) {  // row-major: rows 2q and 2q + 1 interleaved
      for (; 2 * q + 2 <= kc; ++q)
        for (int h = 0; h < NR; h += 16)
          _mm512_store_si512(dst + q * NR + h, pair16(lo16(p + 2 * q * rs + h), lo16(p + (2 * q + 1) * rs + h)));
    } else if (nr == NR && rs == 1) {  // column-major: words in place
      for (; 2 * q + 32 <= kc; q += 16)
        for (int h = 0; h < NR; h += 16) {
          __m512i r[16];
          for (int j = 0; j < 16; ++j) r[j] = words_in_place(p + (h + j) * cs + 2 * q);
          transpose16(r);
          for (int i = 0; i < 16; ++i) _mm512_store_si512(dst + (q + i) * NR + h, r[i]);
        }
    }
    for (; q < kp; ++q) {
      uint32_t* d = dst + q * NR;
      const bool hi = 2 * q + 1 < kc;
      for (int64_t j = 0; j < nr; ++j) d[j] = pair(p + 2 * q * rs + j * cs, rs, hi);
      for (int64_t j = nr; j < NR; ++j) d[j] = 0;
    }
  }
}

// ---- micro-kernel: tile[MR][NR] = sum over pairs of A[q][0..MR) x B[q][0..NR) ----------------------

// R rows (<= MR) and V * 16 columns of the tile; rows / columns past those are left unwritten.
template <int R, int V>
void ukernel(int64_t kp, const uint32_t* __restrict A, const uint32_t* __restrict B, float* __restrict tile) {
  __m512 c[R][V];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) c[i][v] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t q = 0; q < kp; ++q) {
    __m512bh b[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) b[v] = as_bh(_mm512_load_si512(B + v * 16));
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const __m512bh a = bcast(A[i]);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) c[i][v] = _mm512_dpbf16_ps(c[i][v], a, b[v]);
    }
    A += MR;
    B += NR;
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) _mm512_store_ps(tile + i * NR + v * 16, c[i][v]);
}

using UkernelFn = void (*)(int64_t, const uint32_t*, const uint32_t*, float*);
template <int... R>
constexpr auto make_ukernels(std::integer_sequence<int, R...>) {
  struct Tab { UkernelFn f[MR][2]; };
  return Tab{{{&ukernel<R + 1, 1>, &ukernel<R + 1, 2>}...}};
}
constexpr auto kUkernels = make_ukernels(std::make_integer_sequence<int, MR>{});

// ---- tiny products and matrix-vector shapes: the micro-kernel's arithmetic, lane by lane ----------

inline float dp1(float acc, uint32_t a, uint32_t b) {
  __m128i av = _mm_cvtsi32_si128(static_cast<int>(a)), bv = _mm_cvtsi32_si128(static_cast<int>(b));
  return _mm_cvtss_f32(_mm_dpbf16_ps(_mm_set_ss(acc), reinterpret_cast<__m128bh&>(av), reinterpret_cast<__m128bh&>(bv)));
}

template <class TA, class TB, class TC>
void run_small(const GemmArgs& g, const TA* a, const TB* b, TC* c) {
  const int64_t kp = ceil_div(g.K, 2);
  for (int64_t i = 0; i < g.M; ++i)
    for (int64_t j = 0; j < g.N; ++j) {
      float acc = 0.0f;
      for (int64_t q = 0; q < kp; ++q) {
        const bool hi = 2 * q + 1 < g.K;
        acc = dp1(acc, pair(a + i * g.a_rs + 2 * q * g.a_cs, g.a_cs, hi), pair(b + 2 * q * g.b_rs + j * g.b_cs, g.b_rs, hi));
      }
      c[i * g.c_rs + j * g.c_cs] = from_f32<TC>(acc);
    }
}

// Pairs [q0, q1) of one K slice.
inline void slice_pairs(const Slicing& sl, int64_t kb, int64_t& k1, int64_t& q0, int64_t& q1) {
  const int64_t k0 = kb * sl.kcb;
  k1 = std::min(sl.K, k0 + sl.kcb);
  q0 = k0 / 2, q1 = ceil_div(k1, 2);
}

// m(k, j) = rows[j][k]: k contiguous, so a row's pairs are words in place. 16 outputs, R vectors
// (xw + v * xst; totals at tot + v * tst); 16 x 16 word blocks are transposed in registers (once for
// all R) so each output still accumulates in pair order.
template <int R, class T>
void gemv_dot_block(const uint32_t* xw, int64_t xst, const T* const* rows, const Slicing& sl, float* tot,
                    int64_t tst) {
  for (int64_t kb = 0; kb < sl.nk; ++kb) {
    int64_t k1, q0, q1;
    slice_pairs(sl, kb, k1, q0, q1);
    __m512 acc[R];
    for (int v = 0; v < R; ++v) acc[v] = _mm512_setzero_ps();
    int64_t q = q0;
    for (; 2 * q + 32 <= k1; q += 16) {
      __m512i r[16];
      for (int i = 0; i < 16; ++i) r[i] = words_in_place(rows[i] + 2 * q);
      transpose16(r);
#pragma GCC unroll 4
      for (int v = 0; v < R; ++v)
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) acc[v] = _mm512_dpbf16_ps(acc[v], bcast(xw[v * xst + q + i]), as_bh(r[i]));
    }
    for (; q < q1; ++q) {
      const bool hi = 2 * q + 1 < k1;
      alignas(64) uint32_t w[16];
      for (int i = 0; i < 16; ++i) w[i] = pair(rows[i] + 2 * q, 1, hi);
      for (int v = 0; v < R; ++v)
        acc[v] = _mm512_dpbf16_ps(acc[v], bcast(xw[v * xst + q]), as_bh(_mm512_load_si512(w)));
    }
    for (int v = 0; v < R; ++v) {
      float* t = tot + v * tst;
      _mm512_storeu_ps(t, kb == 0 ? acc[v] : _mm512_add_ps(_mm512_loadu_ps(t), acc[v]));
    }
  }
}

// tot + v * tst must have room for n rounded up to 16.
template <int R, class T>
void gemv_dot_r(const uint32_t* xw, int64_t xst, const T* m, int64_t js, int64_t n, const Slicing& sl, float* tot,
                int64_t tst) {
  // One group of 16 rows at a time: two (32 rows read side by side) were slower, most for rows of a
  // power-of-two length, which all fall in one L1 set (Zen 4, bfloat16 1 x 4096 @ 14336 x 4096^T:
  // 14-16 GB/s with two, 20 with one on one thread; 22 and 28 GB/s on two).
  for (int64_t j = 0; j < n; j += 16) {
    const T* rows[16];
    for (int i = 0; i < 16; ++i) rows[i] = m + std::min<int64_t>(j + i, n - 1) * js;  // past n: repeats
    gemv_dot_block<R>(xw, xst, rows, sl, tot + j, tst);
  }
}
template <class T>
void gemv_dot(const uint32_t* xw, int64_t xst, int R, const T* m, int64_t js, int64_t n, const Slicing& sl,
              float* tot, int64_t tst) {
  switch (R) {
    case 1: gemv_dot_r<1>(xw, xst, m, js, n, sl, tot, tst); break;
    case 2: gemv_dot_r<2>(xw, xst, m, js, n, sl, tot, tst); break;
    case 3: gemv_dot_r<3>(xw, xst, m, js, n, sl, tot, tst); break;
    default: gemv_dot_r<4>(xw, xst, m, js, n, sl, tot, tst); break;
  }
}

// m(k, j) = m[k * ks + j]: j contiguous. R pairs of rows (2r, 2r + 1; the last row absent when
// !hi) streamed into the slice's accumulators in memory: acc[j] = dp(... dp(acc[j], x_0, m_0) ..., x_R-1, m_R-1).
template <int R, class T>
inline void axpy_pairs(const uint32_t* xw, const T* row, int64_t ks, int64_t cn, float* acc, bool hi) {
  __m512bh xb[R];
  for (int r = 0; r < R; ++r) xb[r] = bcast(xw[r]);
  int64_t j = 0;
  for (; j + 16 <= cn; j += 16) {
    __m512 a = _mm512_loadu_ps(acc + j);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const T* p = row + 2 * r * ks + j;
      __m512i w = (r < R - 1 || hi) ? pair16(lo16(p), lo16(p + ks)) : _mm512_slli_epi32(lo16(p), 16);
      a = _mm512_dpbf16_ps(a, xb[r], as_bh(w));
    }
    _mm512_storeu_ps(acc + j, a);
  }
  if (j < cn) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (cn - j)) - 1);
    __m512 a = _mm512_maskz_loadu_ps(mask, acc + j);
    for (int r = 0; r < R; ++r) {
      alignas(64) uint32_t w[16] = {};
      for (int64_t c = 0; c < cn - j; ++c) w[c] = pair(row + 2 * r * ks + j + c, ks, r < R - 1 || hi);
      a = _mm512_dpbf16_ps(a, xb[r], as_bh(_mm512_load_si512(w)));
    }
    _mm512_mask_storeu_ps(acc + j, mask, a);
  }
}

template <class T>
void gemv_axpy(const uint32_t* xw, const T* m, int64_t ks, int64_t n, const Slicing& sl, float* tot, float* acc) {
  for (int64_t kb = 0; kb < sl.nk; ++kb) {
    int64_t k1, q0, q1;
    slice_pairs(sl, kb, k1, q0, q1);
    for (int64_t c0 = 0; c0 < n; c0 += kAxpyCols) {
      const int64_t cn = std::min(kAxpyCols, n - c0);
      std::fill(acc, acc + cn, 0.0f);
      int64_t q = q0;
      for (; 2 * q + 8 <= k1; q += 4) axpy_pairs<4>(xw + q, m + 2 * q * ks + c0, ks, cn, acc, true);
      for (; q < q1; ++q) axpy_pairs<1>(xw + q, m + 2 * q * ks + c0, ks, cn, acc, 2 * q + 1 < k1);
      float* t = tot + c0;
      if (kb == 0) std::copy(acc, acc + cn, t);
      else
        for (int64_t j = 0; j < cn; ++j) t[j] = t[j] + acc[j];
    }
  }
}

}  // namespace bf16p

// Packs bfloat16 pairs: the panel element is one 32-bit word holding two k (KU = 2).
struct Bf16Panels {
  using W = uint32_t;
  static constexpr int MR = bf16p::MR, NR = bf16p::NR, KU = 2;
  static constexpr int64_t MC = 140;   // A block (MC x KC / 2 words, 70 KiB) stays in L2; B micro-panel 16 KiB, L1
  static constexpr int64_t NC = 4064;  // widest column block (B is packed for all of K: see block_n)
  static constexpr bool kGemv = true;
  static constexpr int64_t kSmallMacs = bf16p::kSmallMacs;
  static constexpr int64_t kAxpyCols = bf16p::kAxpyCols;
  static_assert(MC % MR == 0 && NC % NR == 0);

  template <class T>
  static void pack_a(const T* a, int64_t rs, int64_t cs, int64_t mc, int64_t kc, int64_t rows_avail, W* dst) {
    bf16p::pack_a(a, rs, cs, mc, kc, rows_avail, dst);
  }
  template <class T>
  static void pack_b(const T* b, int64_t rs, int64_t cs, int64_t kc, int64_t nc, W* dst) {
    bf16p::pack_b(b, rs, cs, kc, nc, dst);
  }
  static void ukernel(int64_t mr, int64_t nr, int64_t kp, const W* A, const W* B, float* tile) {
    bf16p::kUkernels.f[mr - 1][nr > 16 ? 1 : 0](kp, A, B, tile);
  }
  static int64_t gemv_x_words(int64_t K) { return round_up(K + 16, 16); }  // (pairs: K / 2 are used)
  template <class T>
  static void gemv_x(const T* x, int64_t xs, int64_t K, int /*rows*/, W* xw) {
    for (int64_t q = 0; 2 * q < K; ++q) xw[q] = bf16p::pair(x + 2 * q * xs, xs, 2 * q + 1 < K);
  }
  template <class T>
  static void gemv_axpy(const W* xw, const T* m, int64_t ks, int64_t n, const Slicing& sl, float* tot, float* acc) {
    bf16p::gemv_axpy(xw, m, ks, n, sl, tot, acc);
  }
  template <class T>
  static void gemv_dot(const W* xw, int64_t xst, int R, const T* m, int64_t js, int64_t n, const Slicing& sl,
                       float* tot, int64_t tst) {
    bf16p::gemv_dot(xw, xst, R, m, js, n, sl, tot, tst);
  }
  template <class TA, class TB, class TC>
  static void small(const GemmArgs& g, const TA* a, const TB* b, TC* c) {
    bf16p::run_small(g, a, b, c);
  }
};

}  // namespace
}  // namespace kiln::cpu::KILN_ISA
#endif
