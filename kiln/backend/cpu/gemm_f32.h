// The float32 panels of kiln's packed GEMM (included by kernels_gemm.cpp only): every input type is
// converted to float32 while packing, and the micro-kernel multiplies float32 with fused
// multiply-adds (AVX-512: 14 x 32 = 28 zmm accumulators; AVX2: 6 x 16 = twelve ymm accumulators,
// broadcast A, two B loads per k; base ISA: 4 x 8 in plain C++, mul then add). Also the matrix-vector
// (gemm_gemv.h) and tiny-product paths, which replay the micro-kernel's arithmetic exactly (see
// kernels_gemm.cpp), except float16, bfloat16 and float8 rows with k contiguous (64 lanes, decisions
// 67, 70 and 77).
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

// The micro-kernel's multiply-add, for the paths that replay it one element at a time.
inline float madd(float a, float b, float c) {
#ifdef KILN_GEMM_AVX2
  return fma1(a, b, c);
#else
  return c + a * b;  // the base micro-kernel's operation (SSE2 has no FMA)
#endif
}


template <class T>
constexpr bool kFloat8 = std::is_same_v<T, Float8_e4m3fn> || std::is_same_v<T, Float8_e5m2>;
// The element types whose rows with k contiguous sum in 64 lanes on these panels (decisions 67, 70,
// 77), and those among them whose vectors, two to four at once, take gemv_x_lanes's order on AVX2 and AVX-512.
template <class T>
constexpr bool kLaneVectors = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T>
constexpr bool kLanes64 = kLaneVectors<T> || kFloat8<T>;

}  // namespace f32p
}  // namespace
}  // namespace kiln::cpu::KILN_ISA

#include "kiln/backend/cpu/gemm_gemv.h"

namespace kiln::cpu::KILN_ISA {
namespace {
namespace f32p {

// Tiny products (one K slice, at most kSmallMacs multiply-adds): no packing, one chain per output, the
// same arithmetic as the micro-kernel's lanes.
constexpr int64_t kSmallMacs = 64;

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
  static constexpr bool kGemv = true;
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
  // The vector of a GEMV, K elements at stride xs, in the panel element type (xw has room for
  // gemv_x_words(K)); behind it, a second form (x_f16) on AVX2 and AVX-512: a float16 vector as it is, a float8
  // one times 2^64 in float32, in dot64_f8's order (f8_x_scaled) or, one of several, in
  // gemv_x_lanes's.
  static int64_t gemv_x_words(int64_t K) { return 2 * round_up(K + 16, 16); }
  static const Half* x_f16(const W* xw, int64_t K) { return reinterpret_cast<const Half*>(xw + round_up(K + 16, 16)); }
  // `rows` vectors in all (gemv_dot's R): float16 and bfloat16 ones, when more than one, in
  // gemv_x_lanes's order on AVX2 and AVX-512.
  template <class T>
  static void gemv_x(const T* x, int64_t xs, int64_t K, int rows, W* xw) {
#ifdef KILN_GEMM_AVX2
    if constexpr (f32p::kLaneVectors<T>)
      if (rows > 1) return f32p::gemv_x_lanes(x, xs, K, xw);
#endif
    (void)rows;
    for (int64_t k = 0; k < K; ++k) xw[k] = to_f32(x[k * xs]);
#ifdef KILN_GEMM_AVX2
    if constexpr (std::is_same_v<T, Half>) {  // (the base ISA's loops read the float32 copy)
      Half* xh = const_cast<Half*>(x_f16(xw, K));
      for (int64_t k = 0; k < K; ++k) xh[k] = x[k * xs];
    }
    if constexpr (f32p::kFloat8<T>) {
      float* x8 = const_cast<float*>(reinterpret_cast<const float*>(x_f16(xw, K)));
      if (rows > 1) f32p::gemv_x_lanes(x, xs, K, x8);
      else f32p::f8_x_scaled(xw, K / 64 * 64, x8);
    }
#endif
  }
  template <class T>
  static void gemv_axpy(const W* xw, const T* m, int64_t ks, int64_t n, const Slicing& sl, float* tot, float* acc) {
    f32p::gemv_axpy(xw, m, ks, n, sl, tot, acc);
  }
  // R vectors (xw + r * xst, each as gemv_x left it) against m's n k-contiguous rows; totals at
  // tot + r * tst.
  template <class T>
  static void gemv_dot(const W* xw, int64_t xst, int R, const T* m, int64_t js, int64_t n, const Slicing& sl,
                       float* tot, int64_t tst) {
    f32p::gemv_dot(xw, xst, x_f16(xw, sl.K), 2 * xst, R, m, js, n, sl, tot, tst);
  }
  template <class TA, class TB, class TC>
  static void small(const GemmArgs& g, const TA* a, const TB* b, TC* c) {
    f32p::run_small(g, a, b, c);
  }
};

}  // namespace
}  // namespace kiln::cpu::KILN_ISA
