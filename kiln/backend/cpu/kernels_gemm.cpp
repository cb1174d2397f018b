// Packed GEMM for reduced-precision floats (compiled once per ISA): C[b] = A[b] @ B[b] with float32
// accumulation and one rounding of each result to the output dtype (float16, bfloat16, float8;
// float32 too, for tests).
//
// BLIS-style blocking. For each column block of C (ncb columns, B packed for the whole of K: about
// 4 MiB, L3), for each MC-row block (MC x KC of A per K slice: L2), for each KC-deep K slice, the
// micro-kernel keeps an MR x NR tile of C in registers (AVX2/FMA: 6 x 16 = twelve ymm accumulators,
// broadcast A, two B loads per k; base ISA: 4 x 8 in plain C++) while streaming an A micro-panel
// from L2 against a B micro-panel in L1. Packing reads any strides (row- or column-major operands,
// leading dimensions, transposed views, broadcast batches) and converts to float32 on the way; it
// is templated on the element type, so a new input type only needs a conversion (vectorised
// 8-wide loads for bfloat16 / float16 / float8_e5m2, a table for float8_e4m3fn).
//
// K slices are summed in a float32 workspace (ws = t0; ws = ws + t1; ...; C = round(ws + t_last)),
// kept to one MC x ncb block so it stays in L2; with one slice the tile is rounded straight into C.
// Every element of C sees the same sequence of float operations wherever it falls in the tile grid
// (edge tiles run the same arithmetic on zero-padded panels), and the matrix-vector (M == 1 or
// N == 1) and tiny-product paths, which skip packing, replay exactly that sequence too. So neither
// the thread count, nor the split of work (batches, row blocks handed out on demand, column
// ranges; K is never split), nor the path taken can change a bit of the result: a row of C is the
// same whether it is computed alone or inside a larger product.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <numeric>
#include <type_traits>

#include "kiln/backend/cpu/isa_util.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/core/half.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define KILN_GEMM_AVX2 1
#endif

namespace kiln::cpu::KILN_ISA {
namespace {

#ifdef KILN_GEMM_AVX2
constexpr int MR = 6, NR = 16;
#else
constexpr int MR = 4, NR = 8;
#endif
constexpr int64_t KC = 256;   // K slice: a B micro-panel (KC x NR floats, 16 KiB) stays in L1
constexpr int64_t MC = 144;   // A block (MC x KC floats, 144 KiB) stays in L2
constexpr int64_t NC = 4080;  // widest column block (B is packed for all of K: see block_n)
static_assert(MC % MR == 0 && NC % NR == 0);
// Below this many flops one thread does the whole product (a fork costs a few microseconds).
constexpr double kParallelFlops = 1 << 21;

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

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

// ---- packing ------------------------------------------------------------------------------------

// A block (mc x kc, element (i, k) at a[i * rs + k * cs]) -> ceil(mc / MR) micro-panels, each
// laid out [k][MR], rows past mc zero. rows_avail: rows that exist from a (for 8-wide reads).
// May write up to 8 floats past the last panel (scratch slack).
template <class T>
void pack_a(const T* a, int64_t rs, int64_t cs, int64_t mc, int64_t kc, int64_t rows_avail, float* dst) {
  for (int64_t i0 = 0; i0 < mc; i0 += MR, dst += MR * kc) {
    const int64_t mr = std::min<int64_t>(MR, mc - i0);
    const T* p = a + i0 * rs;
    int64_t k = 0;
#ifdef KILN_GEMM_AVX2
    if (mr == MR && cs == 1) {  // row-major: 8 k at a time, transposed in registers
      for (; k + 8 <= kc; k += 8) {
        __m256 r[8];
        for (int i = 0; i < MR; ++i) r[i] = load8(p + i * rs + k);
        r[6] = r[7] = _mm256_setzero_ps();
        transpose8(r);
        for (int j = 0; j < 8; ++j) _mm256_storeu_ps(dst + (k + j) * MR, r[j]);  // lanes 6, 7 overwritten next
      }
    } else if (mr == MR && rs == 1 && i0 + 8 <= rows_avail) {  // column-major: one 8-wide read per k
      for (; k < kc; ++k) _mm256_storeu_ps(dst + k * MR, load8(p + k * cs));
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
      for (; k < kc; ++k) {
        _mm256_store_ps(dst + k * NR, load8(p + k * rs));
        _mm256_store_ps(dst + k * NR + 8, load8(p + k * rs + 8));
      }
    } else if (nr == NR && rs == 1) {  // column-major: 8 columns x 8 k, transposed in registers
      for (; k + 8 <= kc; k += 8) {
        for (int h = 0; h < NR; h += 8) {
          __m256 r[8];
          for (int j = 0; j < 8; ++j) r[j] = load8(p + (h + j) * cs + k);
          transpose8(r);
          for (int i = 0; i < 8; ++i) _mm256_store_ps(dst + (k + i) * NR + h, r[i]);
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
// R rows (<= MR) and V * 8 columns of the tile; rows / columns past those are left unwritten.
template <int R, int V>
void ukernel(int64_t kc, const float* __restrict A, const float* __restrict B, float* __restrict tile) {
  __m256 c[R][V];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) c[i][v] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    __m256 b[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) b[v] = _mm256_load_ps(B + v * 8);
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      __m256 a = _mm256_broadcast_ss(A + i);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) c[i][v] = _mm256_fmadd_ps(a, b[v], c[i][v]);
    }
    A += MR;
    B += NR;
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) _mm256_store_ps(tile + i * NR + v * 8, c[i][v]);
}

using UkernelFn = void (*)(int64_t, const float*, const float*, float*);
template <int... R>
constexpr auto make_ukernels(std::integer_sequence<int, R...>) {
  struct Tab { UkernelFn f[MR][2]; };
  return Tab{{{&ukernel<R + 1, 1>, &ukernel<R + 1, 2>}...}};
}
constexpr auto kUkernels = make_ukernels(std::make_integer_sequence<int, MR>{});

inline void run_ukernel(int64_t mr, int64_t nr, int64_t kc, const float* A, const float* B, float* tile) {
  kUkernels.f[mr - 1][nr > 8 ? 1 : 0](kc, A, B, tile);
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

// ---- tile epilogue ------------------------------------------------------------------------------

enum class Slice { Only, First, Middle, Last };

// Folds one K slice's tile (mr valid rows) into the float32 workspace (whole NR-wide rows: ws is
// padded to whole micro-tiles) and, on the last slice, rounds ws + tile into C (mr x nr valid).
template <class T>
inline void epilogue(Slice s, float* tile, int64_t mr, int64_t nr, float* ws, int64_t ldw, T* c, int64_t crs,
                     int64_t ccs) {
  if (s == Slice::First) {
    for (int64_t i = 0; i < mr; ++i) std::memcpy(ws + i * ldw, tile + i * NR, NR * sizeof(float));
    return;
  }
  if (s != Slice::Only) {
    for (int64_t i = 0; i < mr; ++i)
      for (int j = 0; j < NR; ++j) tile[i * NR + j] = ws[i * ldw + j] + tile[i * NR + j];
    if (s == Slice::Middle) {
      for (int64_t i = 0; i < mr; ++i) std::memcpy(ws + i * ldw, tile + i * NR, NR * sizeof(float));
      return;
    }
  }
#ifdef KILN_GEMM_AVX2
  if (ccs == 1 && nr == NR) {
    for (int64_t i = 0; i < mr; ++i) {
      store8(c + i * crs, _mm256_load_ps(tile + i * NR));
      store8(c + i * crs + 8, _mm256_load_ps(tile + i * NR + 8));
    }
    return;
  }
#endif
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j) c[i * crs + j * ccs] = from_f32<T>(tile[i * NR + j]);
}

// ---- driver -------------------------------------------------------------------------------------

template <class T>
struct Problem {
  const T* a;
  const T* b;
  T* c;
  GemmArgs g;
  int64_t kcb, nk;  // K slice depth and count (a function of K only)
};

// Width of a column block: B is packed for the whole of K at once (K x ncb floats, kept to about
// 4 MiB so it stays in L3), capped at NC. A function of K only.
inline int64_t block_n(int64_t K) {
  return std::clamp<int64_t>((int64_t(1) << 20) / std::max<int64_t>(K, 1) / NR * NR, NR, NC);
}

// Packs micro-panels [q0, q1) of the column block [jc, jc + nc) for every K slice; slice kb's
// panels start at Bp + pc * ldw (ldw = nc rounded up to NR), panel q at + q * NR * kc.
template <class T>
void pack_b_block(const Problem<T>& P, const T* b, int64_t jc, int64_t nc, int64_t q0, int64_t q1, float* Bp) {
  const GemmArgs& g = P.g;
  const int64_t ldw = round_up(nc, NR), j0 = q0 * NR, j1 = std::min(nc, q1 * NR);
  for (int64_t kb = 0; kb < P.nk; ++kb) {
    const int64_t pc = kb * P.kcb, kc = std::min(P.kcb, g.K - pc);
    pack_b(b + pc * g.b_rs + (jc + j0) * g.b_cs, g.b_rs, g.b_cs, kc, j1 - j0, Bp + pc * ldw + q0 * NR * kc);
  }
}

// Rows [ic, ic + mc) x columns [jc, jc + nc) of one batch's C from the packed column block Bp:
// for each K slice, A's rows are packed and every micro-tile runs. ws: mc (rounded up to MR) x ldw
// floats of partial sums; tile: MR x NR floats (edge tiles leave stale lanes in it).
template <class T>
void compute_rows(const Problem<T>& P, const T* a, T* c, int64_t ic, int64_t mc, int64_t jc, int64_t nc,
                  const float* Bp, float* Ap, float* ws, float* tile) {
  const GemmArgs& g = P.g;
  const int64_t ldw = round_up(nc, NR);
  for (int64_t kb = 0; kb < P.nk; ++kb) {
    const int64_t pc = kb * P.kcb, kc = std::min(P.kcb, g.K - pc);
    const Slice s = P.nk == 1 ? Slice::Only : kb == 0 ? Slice::First : kb == P.nk - 1 ? Slice::Last : Slice::Middle;
    pack_a(a + ic * g.a_rs + pc * g.a_cs, g.a_rs, g.a_cs, mc, kc, g.M - ic, Ap);
    const float* Bk = Bp + pc * ldw;
    for (int64_t jr = 0; jr < nc; jr += NR) {
      const int64_t nr = std::min<int64_t>(NR, nc - jr);
      for (int64_t ir = 0; ir < mc; ir += MR) {
        const int64_t mr = std::min<int64_t>(MR, mc - ir);
        float* w = ws + ir * ldw + jr;
        T* ct = c + (ic + ir) * g.c_rs + (jc + jr) * g.c_cs;
        // the micro-kernel's ~kc * MR cycles hide the misses on this tile's partial sums / output
        if (s == Slice::Middle || s == Slice::Last)
          for (int64_t i = 0; i < mr; ++i) _mm_prefetch(reinterpret_cast<const char*>(w + i * ldw), _MM_HINT_T0);
        if (s == Slice::Last || s == Slice::Only)
          for (int64_t i = 0; i < mr; ++i) _mm_prefetch(reinterpret_cast<const char*>(ct + i * g.c_rs), _MM_HINT_T0);
        run_ukernel(mr, nr, kc, Ap + ir * kc, Bk + jr * kc, tile);
        epilogue(s, tile, mr, nr, w, ldw, ct, g.c_rs, g.c_cs);
      }
    }
  }
}

// C[bi][m0:m1, n0:n1] of one batch on one thread. Loop order: column block (B packed for all of
// K), row block, K slice (A packed), micro-tiles; the float32 partial sums of one MC x ncb block
// stay in L2 between K slices.
template <class T>
void run_block(const Problem<T>& P, int64_t bi, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* Ap,
               float* Bp, float* ws, float* tile) {
  const GemmArgs& g = P.g;
  const T* a = P.a + bi * g.a_bs;
  const T* b = P.b + bi * g.b_bs;
  T* c = P.c + bi * g.c_bs;
  const int64_t ncb = block_n(g.K);
  for (int64_t jc = n0; jc < n1; jc += ncb) {
    const int64_t nc = std::min(ncb, n1 - jc);
    pack_b_block(P, b, jc, nc, 0, ceil_div(nc, NR), Bp);
    for (int64_t ic = m0; ic < m1; ic += MC) compute_rows(P, a, c, ic, std::min(MC, m1 - ic), jc, nc, Bp, Ap, ws, tile);
  }
}

constexpr int64_t kAxpyCols = 4096;  // GEMV, j-contiguous matrix: columns per pass

#ifdef KILN_GEMM_AVX2
// ---- matrix-vector shapes (M == 1 or N == 1) ----------------------------------------------------
// y[j] = sum_k x[k] * m(k, j): one row of C against a K x n matrix m (B itself, or A transposed).
// No packing and no padded micro-tile: the matrix is read once, in place. Every y[j] runs the
// GEMM path's arithmetic exactly (per K slice a chain acc = fma(x[k], m(k, j), acc) from 0 in k
// order, slices summed into a float32 total in order), so the result is bit-identical to what
// the packed path would give for that row or column.

inline float fma1(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

struct Slicing {
  int64_t K, kcb, nk;
};

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

// tot must have room for n rounded up to 8.
template <class T>
void gemv_dot(const float* x, const T* m, int64_t js, int64_t n, const Slicing& sl, float* tot) {
  for (int64_t j = 0; j < n; j += 32) {
    const T* rows[32];
    for (int i = 0; i < 32; ++i) rows[i] = m + std::min<int64_t>(j + i, n - 1) * js;  // past n: repeats
    switch (std::min<int64_t>(4, ceil_div(n - j, 8))) {
      case 4: gemv_dot_block<4>(x, rows, sl, tot + j); break;
      case 3: gemv_dot_block<3>(x, rows, sl, tot + j); break;
      case 2: gemv_dot_block<2>(x, rows, sl, tot + j); break;
      default: gemv_dot_block<1>(x, rows, sl, tot + j); break;
    }
  }
}
#endif

// One GEMV problem: out[j * os] = x (1 x K, stride xs) @ m (K x n, strides rs, cs). Set up by
// gemv_view when M == 1 or N == 1 and the matrix is contiguous along one of its dimensions.
struct GemvView {
  bool ok = false;
  bool use_b;              // M == 1: x = A's row, m = B; else N == 1: x = B's column, m = A^T
  int64_t n, xs, rs, cs, os;
};

inline GemvView gemv_view(const GemmArgs& g) {
  GemvView v;
#ifdef KILN_GEMM_AVX2
  if (g.M == 1 && (g.b_cs == 1 || g.b_rs == 1)) {
    v = {true, true, g.N, g.a_cs, g.b_rs, g.b_cs, g.c_cs};
  } else if (g.N == 1 && (g.a_rs == 1 || g.a_cs == 1)) {
    v = {true, false, g.M, g.b_rs, g.a_cs, g.a_rs, g.c_rs};
  }
  if (v.ok && v.cs != 1 && v.rs != 1) v.ok = false;
#else
  (void)g;
#endif
  return v;
}

// Outputs [j0, j1) of batch bi. xf: K floats; tot: j1 - j0 (rounded up to 16) + 16 floats, then
// kAxpyCols floats of slice accumulators (64-byte aligned).
template <class T>
void run_gemv(const Problem<T>& P, const GemvView& v, int64_t bi, int64_t j0, int64_t j1, float* xf, float* tot) {
#ifdef KILN_GEMM_AVX2
  const GemmArgs& g = P.g;
  const T* x = v.use_b ? P.a + bi * g.a_bs : P.b + bi * g.b_bs;
  const T* m = (v.use_b ? P.b + bi * g.b_bs : P.a + bi * g.a_bs) + j0 * v.cs;
  T* out = P.c + bi * g.c_bs + j0 * v.os;
  for (int64_t k = 0; k < g.K; ++k) xf[k] = to_f32(x[k * v.xs]);
  const Slicing sl{g.K, P.kcb, P.nk};
  const int64_t n = j1 - j0;
  if (v.cs == 1) gemv_axpy(xf, m, v.rs, n, sl, tot, tot + round_up(n, 16) + 16);
  else gemv_dot(xf, m, v.cs, n, sl, tot);
  int64_t j = 0;
  if (v.os == 1)
    for (; j + 8 <= n; j += 8) store8(out + j, _mm256_loadu_ps(tot + j));
  for (; j < n; ++j) out[j * v.os] = from_f32<T>(tot[j]);
#else
  (void)P, (void)v, (void)bi, (void)j0, (void)j1, (void)xf, (void)tot;
#endif
}

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

template <class T>
void run_small(const Problem<T>& P, int64_t bi) {
  const GemmArgs& g = P.g;
  const T* a = P.a + bi * g.a_bs;
  const T* b = P.b + bi * g.b_bs;
  T* c = P.c + bi * g.c_bs;
  float bf[kSmallMacs];  // B converted once, [k][j]
  for (int64_t k = 0; k < g.K; ++k)
    for (int64_t j = 0; j < g.N; ++j) bf[k * g.N + j] = to_f32(b[k * g.b_rs + j * g.b_cs]);
  for (int64_t i = 0; i < g.M; ++i) {
    float av[kSmallMacs];
    for (int64_t k = 0; k < g.K; ++k) av[k] = to_f32(a[i * g.a_rs + k * g.a_cs]);
    for (int64_t j = 0; j < g.N; ++j) {
      float acc = 0.0f;
      for (int64_t k = 0; k < g.K; ++k) acc = madd(av[k], bf[k * g.N + j], acc);
      c[i * g.c_rs + j * g.c_cs] = from_f32<T>(acc);
    }
  }
}

// ---- entry point --------------------------------------------------------------------------------

struct AlignedFree {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
};

// One or a few large products between threads: each column block of B is packed once, by all of
// them, into a shared buffer; then the threads take blocks of C's rows from a counter, so a thread
// slowed down by other work on its core simply takes fewer (nothing is packed twice, and which
// thread computes a row never changes its bits).
template <class T>
void gemm_shared(const Problem<T>& P, int nt) {
  const GemmArgs& g = P.g;
  const int64_t M = g.M, N = g.N, K = g.K;
  const int64_t mcu = std::clamp<int64_t>(round_up(ceil_div(M, 4 * nt), MR), 4 * MR, MC);  // ~4 row blocks a thread
  const int64_t units = ceil_div(M, mcu), slots = std::min<int64_t>(nt, units);
  const int64_t ncb_max = block_n(K), ncb = round_up(std::min(ncb_max, N), NR);
  const int64_t b_sz = round_up(ncb * K + 16, 16);
  const int64_t a_sz = round_up(mcu * P.kcb + 16, 16);
  const int64_t w_sz = P.nk > 1 ? round_up(mcu * ncb, 16) : 0;
  const int64_t per_slot = a_sz + w_sz + MR * NR;
  std::unique_ptr<float[], AlignedFree> scratch(static_cast<float*>(
      ::operator new[](static_cast<size_t>(b_sz + slots * per_slot) * sizeof(float), std::align_val_t{64})));
  float* Bp = scratch.get();
  for (int64_t bi = 0; bi < g.batch; ++bi) {
    const T* a = P.a + bi * g.a_bs;
    const T* b = P.b + bi * g.b_bs;
    T* c = P.c + bi * g.c_bs;
    for (int64_t jc = 0; jc < N; jc += ncb_max) {
      const int64_t nc = std::min(ncb_max, N - jc);
      const int64_t panels = ceil_div(nc, NR), groups = ceil_div(panels, 4);
      std::atomic<int64_t> next_group{0}, next{0};
      parallel_for(std::min<int64_t>(nt, groups), 1, [&](int64_t, int64_t) {
        for (int64_t q; (q = next_group.fetch_add(1, std::memory_order_relaxed)) < groups;)
          pack_b_block(P, b, jc, nc, q * 4, std::min(panels, q * 4 + 4), Bp);
      });
      parallel_for(slots, 1, [&](int64_t s0, int64_t) {
        float* Ap = Bp + b_sz + s0 * per_slot;
        float* ws = Ap + a_sz;
        float* tile = ws + w_sz;
        std::fill(tile, tile + MR * NR, 0.0f);
        for (int64_t u; (u = next.fetch_add(1, std::memory_order_relaxed)) < units;)
          compute_rows(P, a, c, u * mcu, std::min(mcu, M - u * mcu), jc, nc, Bp, Ap, ws, tile);
      });
    }
  }
}

template <class T>
void gemm(const GemmArgs& g) {
  const int64_t Bn = g.batch, M = g.M, N = g.N, K = g.K;
  if (Bn <= 0 || M <= 0 || N <= 0) return;
  T* cp = static_cast<T*>(g.c);
  if (K <= 0) {
    for (int64_t bi = 0; bi < Bn; ++bi)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) cp[bi * g.c_bs + i * g.c_rs + j * g.c_cs] = from_f32<T>(0.0f);
    return;
  }
  Problem<T> P{static_cast<const T*>(g.a), static_cast<const T*>(g.b), cp, g, 0, 0};
  P.nk = ceil_div(K, KC);
  P.kcb = ceil_div(K, P.nk);  // balanced slices: no thin last slice
  const bool small = P.nk == 1 && M * N * K <= kSmallMacs;
  const GemvView gv = small ? GemvView{} : gemv_view(g);

  // Work split. A few products with enough rows: shared packed B, row blocks on demand. Otherwise
  // whole batches when they divide evenly between the threads (or are many), else each batch's C
  // is cut into S parts along its longer side (the GEMV's outputs), in whole micro-tiles.
  const int nt = in_parallel_region() ? 1 : get_num_threads();
  const bool par = nt > 1 && 2.0 * static_cast<double>(Bn) * M * N * K >= kParallelFlops;
  if (par && !small && !gv.ok && Bn < 4 * nt && M >= 8 * MR * nt) {
    gemm_shared(P, nt);
    return;
  }
  const bool split_n = gv.ok || N >= M;
  int64_t S = 1;
  if (par && !small && Bn < 4 * nt && Bn % nt != 0) S = nt / std::gcd<int64_t>(Bn, nt);
  const int64_t gran = gv.ok ? 64 : split_n ? NR : MR, extent = gv.ok ? gv.n : split_n ? N : M;
  S = std::max<int64_t>(1, std::min(S, ceil_div(extent, gran)));
  const int64_t chunk = round_up(ceil_div(extent, S), gran);
  S = ceil_div(extent, chunk);
  const int64_t jobs = Bn * S;
  const int64_t slots = par ? std::min<int64_t>(nt, jobs) : 1;

  // Scratch per slot (one slot per thread). GEMM: packed A, packed B, float32 partial sums when K
  // is sliced. GEMV: the vector in float32, the outputs' totals.
  int64_t a_sz, b_sz, w_sz;
  if (gv.ok) {
    a_sz = round_up(K + 16, 16), b_sz = round_up(std::min(chunk, extent), 16) + 16 + kAxpyCols + 16, w_sz = 0;
  } else {
    const int64_t m_job = split_n ? M : chunk, n_job = split_n ? chunk : N;
    const int64_t ncb = round_up(std::min(block_n(K), n_job), NR);
    a_sz = round_up(round_up(std::min(MC, m_job), MR) * P.kcb + 16, 16);
    b_sz = round_up(ncb * K + 16, 16);
    w_sz = P.nk > 1 ? round_up(round_up(std::min(MC, m_job), MR) * ncb, 16) : 0;
  }
  if (small) a_sz = b_sz = w_sz = 0;
  const int64_t per_slot = a_sz + b_sz + w_sz + MR * NR;
  std::unique_ptr<float[], AlignedFree> scratch(static_cast<float*>(
      ::operator new[](static_cast<size_t>(slots * per_slot) * sizeof(float), std::align_val_t{64})));
  float* buf = scratch.get();

  parallel_for(slots, 1, [&](int64_t s0, int64_t s1) {
    float* Ap = buf + s0 * per_slot;
    float* Bp = Ap + a_sz;
    float* ws = Bp + b_sz;
    float* tile = ws + w_sz;
    std::fill(tile, tile + MR * NR, 0.0f);
    for (int64_t s = s0; s < s1; ++s) {
      for (int64_t j = s * jobs / slots, je = (s + 1) * jobs / slots; j < je; ++j) {
        const int64_t bi = j / S, part = j % S;
        const int64_t lo = part * chunk, hi = std::min(extent, lo + chunk);
        if (small) run_small(P, bi);
        else if (gv.ok) run_gemv(P, gv, bi, lo, hi, Ap, Bp);
        else if (split_n) run_block(P, bi, 0, M, lo, hi, Ap, Bp, ws, tile);
        else run_block(P, bi, lo, hi, 0, N, Ap, Bp, ws, tile);
      }
    }
  });
}

}  // namespace

void fill_gemm(KernelTable& t) {
  t.gemm_lowp[static_cast<int>(kFloat16)] = &gemm<Half>;
  t.gemm_lowp[static_cast<int>(kBFloat16)] = &gemm<BFloat16>;
  t.gemm_lowp[static_cast<int>(kFloat8_e4m3fn)] = &gemm<Float8_e4m3fn>;
  t.gemm_lowp[static_cast<int>(kFloat8_e5m2)] = &gemm<Float8_e5m2>;
  t.gemm_lowp[static_cast<int>(kFloat32)] = &gemm<float>;  // not used by bmm (OpenBLAS); for tests
}

}  // namespace kiln::cpu::KILN_ISA
