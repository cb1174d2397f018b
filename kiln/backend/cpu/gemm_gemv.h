// The float32 panels' matrix-vector paths (M or N up to 4: kernels_gemm.cpp's GemvView): the
// rows read in place, no packing; on AVX2 / AVX-512 the transposed-block chains, the 64 lanes of
// float16, bfloat16 and float8 rows (decisions 67, 70, 77) and the lane-group kernel for two to four
// vectors; on the base ISA the same sums one element at a time. Included by gemm_f32.h only, after
// its micro-kernels (it uses f32p's madd, kAxpyCols and the lane traits, and KILN_GEMM_F32_AVX512).
#pragma once

namespace kiln::cpu::KILN_ISA {
namespace {
namespace f32p {

#ifdef KILN_GEMM_AVX2
// ---- matrix-vector shapes (M or N up to 4: kernels_gemm.cpp's GemvView) -------------------------
// y[j] = sum_k x[k] * m(k, j): a row of C against a K x n matrix m (B itself, or A transposed).
// No packing and no padded micro-tile: the matrix is read once, in place. Every y[j] runs the
// GEMM path's arithmetic exactly (per K slice a chain acc = fma(x[k], m(k, j), acc) from 0 in k
// order, slices summed into a float32 total in order), so the result is bit-identical to what
// the packed path would give for that row or column; except float16 with k contiguous
// (gemv_rows_lanes: 64 lanes), and bfloat16 and float8 likewise (decisions 70, 77).

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

// m(k, j) = rows[j][k]: k contiguous. G groups of 8 outputs, R vectors (x_r = x + r * xst, its
// totals at tot + r * tst); 8 x 8 blocks are transposed in registers (once for all R) so that each
// output still accumulates in k order.
template <int G, int R, class T>
void gemv_dot_block(const float* x, int64_t xst, const T* const* rows, const Slicing& sl, float* tot, int64_t tst) {
  for (int64_t kb = 0; kb < sl.nk; ++kb) {
    const int64_t k0 = kb * sl.kcb, k1 = std::min(sl.K, k0 + sl.kcb);
    __m256 acc[G][R];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
      for (int v = 0; v < R; ++v) acc[g][v] = _mm256_setzero_ps();
    int64_t k = k0;
    for (; k + 8 <= k1; k += 8) {
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        __m256 r[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) r[i] = load8(rows[g * 8 + i] + k);
        transpose8(r);
#pragma GCC unroll 4
        for (int v = 0; v < R; ++v)
#pragma GCC unroll 8
          for (int i = 0; i < 8; ++i)
            acc[g][v] = _mm256_fmadd_ps(_mm256_broadcast_ss(x + v * xst + k + i), r[i], acc[g][v]);
      }
    }
    for (; k < k1; ++k) {
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        alignas(32) float w[8];
        for (int i = 0; i < 8; ++i) w[i] = to_f32(rows[g * 8 + i][k]);
        for (int v = 0; v < R; ++v)
          acc[g][v] = _mm256_fmadd_ps(_mm256_broadcast_ss(x + v * xst + k), _mm256_load_ps(w), acc[g][v]);
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g)
      for (int v = 0; v < R; ++v) {
        float* t = tot + v * tst + g * 8;
        _mm256_storeu_ps(t, fold(kb == 0, t, acc[g][v]));
      }
  }
}

// ---- float16, bfloat16 and float8 rows with k contiguous: 64 lanes (decisions 67, 70, 77) ------
// These products sum within lanes, as torch's kernel does, not in the packed path's order: a lone
// row then reads the matrix as one stream, row after row (the packed path's order needs 16 rows
// read side by side, which ran at 0.75x torch's speed from memory on Zen 4). Every table gives
// these bits: lane l accumulates fma(x[k], m(k, j), lane) from 0 for k = l mod 64 below K64 (K
// rounded down to 64), in k order; the lanes combine as S = (Z0 + Z1) + (Z2 + Z3), Zq = lanes
// 16q..16q+15, then S8 = S[0, 8) + S[8, 16), S4 = S8[0, 4) + S8[4, 8), S2 = S4[0, 2) + S4[2, 4),
// y = S2[0] + S2[1]; then y = fma(x[k], m(k, j), y) for the last K - K64 k in order. (Products of
// two float16, two bfloat16 or two float8 values are exact in float32: fma and multiply-then-add
// agree. Below K = 64 this is the packed path's chain.) A float16 vector is read as float16 (xh):
// in float32 the loop streamed 15-35% slower; a bfloat16 vector is read as float32 (x); a float8
// one as float32, and times 2^64 (dot64_f8). On the AVX512-BF16 and AMX tables bfloat16 takes
// vdpbf16ps pairs instead (gemm_bf16.h); their float8 products come here (decision 80).

// y from S8 (8 lanes): the last three steps above.
inline float sum8_lanes(__m256 s8) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}
// y from the 64 lanes in 8 registers (a[p]: lanes 8p..8p+7, so Z0 = (a[0], a[1]), ..., Z3 = (a[6], a[7])).
inline float sum64_lanes(const __m256* a) {
  const __m256 lo = _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[4], a[6]));
  const __m256 hi = _mm256_add_ps(_mm256_add_ps(a[1], a[3]), _mm256_add_ps(a[5], a[7]));
  return sum8_lanes(_mm256_add_ps(lo, hi));
}

template <class T>
inline float dot64_tail(const float* x, const T* r, int64_t k, int64_t K, float y) {
  for (; k < K; ++k) y = fma1(x[k], to_f32(r[k]), y);
  return y;
}

// dot64_row's sum with every element widened by load8 (the vector x in float32, xh in float16 for
// float16).
template <class T>
inline float dot64_load8(const float* x, const Half* xh, const T* r, int64_t K) {
  const int64_t K64 = K / 64 * 64;
  auto loadx = [&](int64_t k) {
    if constexpr (std::is_same_v<T, Half>) return load8(xh + k);
    else return _mm256_loadu_ps(x + k);
  };
  __m256 a[8];  // a[p]: lanes 8p..8p+7 (sum64_lanes)
  for (int p = 0; p < 8; ++p) a[p] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K64; k += 64)
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) a[p] = _mm256_fmadd_ps(loadx(k + 8 * p), load8(r + k + 8 * p), a[p]);
  return dot64_tail(x, r, K64, K, sum64_lanes(a));
}

// float8 rows (decision 77), 32 bytes at a time, with shifts and masks in place (no shuffles): a
// 32-bit lane holds bytes e0..e3 (e3 on top); shifting a 16-bit half right (arithmetic) by 4
// (e4m3fn) or 3 (e5m2) spreads its top byte's sign over float32's top exponent bits, and masking
// the 32-bit lane to the sign, the float8 exponent's place in float32's low exponent bits and the
// mantissa bits under them leaves the float32 of 2^-120 w (e4m3fn) or 2^-112 w (e5m2): float8's
// exponent bias read with float32's (127), float8's subnormals as float32's. So f3 = t & M and
// f1 = (t << 16) & M with t = b >>a 4 (16-bit halves), f2 and f0 the same from b << 8 (e2, e0 moved
// up): 9 instructions for 32 elements, whose lanes hold elements 4j + q (f_q). (Zen 3, in cache:
// 19 G elements/s against 15.5 with a byte sign-extended to 32 bits per element and 12.5 through
// float16's conversion instruction.) Except for the bytes of NaN (e4m3fn: b & 0x7f == 0x7f) and
// of inf and NaN (e5m2: b & 0x7c == 0x7c), which come out finite: the row's largest doubled byte
// (0xfe only for e4m3fn's NaN; 0xf8 and up only for e5m2's inf and NaN) tells.
template <class T>
struct F8Bits {
  static constexpr bool e4 = std::is_same_v<T, Float8_e4m3fn>;
  static constexpr int shift = e4 ? 4 : 3;
  static constexpr uint32_t mask = e4 ? 0x87f00000u : 0x8fe00000u;
  static constexpr uint8_t special = e4 ? 0xfe : 0xf8;  // doubled bytes from here up: NaN / inf
  static constexpr float unscale = e4 ? 0x1p56f : 0x1p48f;  // 2^120 / 2^64, 2^112 / 2^64
  // 8 bytes in order (lanes_segment): each sign-extended to 32 bits, shifted left so that the
  // exponent lands in float32's low exponent bits, masked: the same floats as above.
  static constexpr int lane_shift = e4 ? 20 : 21;
  static constexpr uint32_t lane_mask = e4 ? 0x87ffffffu : 0x8fffffffu;
};

// Whether the float8 bytes p[0, L) (L a multiple of 32) hold one that F8Bits's shifts do not convert.
template <class T>
inline bool f8_special(const T* p, int64_t L) {
  const uint8_t* b = reinterpret_cast<const uint8_t*>(p);
  __m256i seen = _mm256_setzero_si256();
  for (int64_t k = 0; k < L; k += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + k));
    seen = _mm256_max_epu8(seen, _mm256_add_epi8(v, v));
  }
  const __m256i top = _mm256_set1_epi8(static_cast<char>(F8Bits<T>::special));
  return _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_max_epu8(seen, top), seen)) != 0;
}

// x * 2^64 for dot64_f8 (x: float8 values, K64 of them), each 32 in the order of f0..f3 above:
// xs[k0 + 8q + j] = x[k0 + 4j + q] * 2^64 (exact: a float8 value times 2^64 is far below float32's
// limit).
inline void f8_x_scaled(const float* x, int64_t K64, float* xs) {
  for (int64_t k0 = 0; k0 < K64; k0 += 32)
    for (int q = 0; q < 4; ++q)
      for (int j = 0; j < 8; ++j) xs[k0 + 8 * q + j] = x[k0 + 4 * j + q] * 0x1p64f;
}

// The 64 lanes' sum S (sum64_lanes) of a float8 row's first K64 elements against xs (f8_x_scaled
// of x, which holds float8 values: F32Panels::gemv_x of the other float8 operand); NaN when the
// row holds a byte the shifts do not convert (the caller then takes load8's loop). The lanes sum
// x * 2^64 * 2^-120 w (e4m3fn; 2^-112 w for e5m2): each product of two float8 values is a multiple
// of 2^-32 below 2^32 in magnitude, so every scaled product and partial sum is exactly 2^-56
// (2^-48) times the unscaled one (a multiple of 2^-81 below 2^-16, and sums of fewer than 2^40 of
// them), far from float32's subnormals and overflow (where rounding commutes with a power of two),
// and S scaled back has the unscaled lanes' bits. (The float8 subnormals are float32 subnormals
// here: no slower on Zen 3. gemv_dot clears DAZ around these kernels, which would read them as
// zero.)
template <class T>
inline float dot64_f8(const float* xs, const T* r, int64_t K64) {
  using B = F8Bits<T>;
  __m256 a[8];  // a[4h + q]: lanes 32h + 4j + q, j = 0..7
  for (int p = 0; p < 8; ++p) a[p] = _mm256_setzero_ps();
  __m256i seen = _mm256_setzero_si256();
  const __m256i M = _mm256_set1_epi32(static_cast<int>(B::mask));
  const uint8_t* rb = reinterpret_cast<const uint8_t*>(r);
  for (int64_t k = 0; k < K64; k += 64) {
    // (2 KiB ahead, past the row's end into the next row: 5-15% faster from memory on Zen 3; the
    // address as an integer, since it may lie past the allocation. On the AVX-512 tables also 8 KiB
    // ahead into L2: Zen 4, one row of 4096 x 4096 from memory, one thread: 13 -> 23-24 GB/s, two
    // threads 23 -> 30. Before Zen 4, prefetcht1 fills L1 as well.)
    const uintptr_t ahead = reinterpret_cast<uintptr_t>(rb) + k;
    _mm_prefetch(reinterpret_cast<const char*>(ahead + 2048), _MM_HINT_T0);
#ifdef KILN_GEMM_F32_AVX512
    _mm_prefetch(reinterpret_cast<const char*>(ahead + 8192), _MM_HINT_T1);
#endif
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rb + k + 32 * h));
      seen = _mm256_max_epu8(seen, _mm256_add_epi8(b, b));
      const __m256i t = _mm256_srai_epi16(b, B::shift), u = _mm256_srai_epi16(_mm256_slli_epi16(b, 8), B::shift);
      const __m256 f[4] = {_mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(u, 16), M)),
                           _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(t, 16), M)),
                           _mm256_castsi256_ps(_mm256_and_si256(u, M)), _mm256_castsi256_ps(_mm256_and_si256(t, M))};
      const float* xq = xs + k + 32 * h;
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) a[4 * h + q] = _mm256_fmadd_ps(_mm256_loadu_ps(xq + 8 * q), f[q], a[4 * h + q]);
    }
  }
  const __m256i top = _mm256_set1_epi8(static_cast<char>(B::special));
  if (_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_max_epu8(seen, top), seen)) != 0)
    return std::numeric_limits<float>::quiet_NaN();
  // sum64_lanes's tree over lanes l = 4j + q: Z0 + Z1 and Z2 + Z3 pair the halves of a[q] and of
  // a[4 + q], giving S[4j + q] in s[q][j]; then S8 = S[l] + S[l + 8] (s[q][j] + s[q][j + 2]), S4 =
  // S8[l] + S8[l + 4], S2 = S4[l] + S4[l + 2], y = S2[0] + S2[1].
  float s4[4];
  for (int q = 0; q < 4; ++q) {
    const __m128 z01 = _mm_add_ps(_mm256_castps256_ps128(a[q]), _mm256_extractf128_ps(a[q], 1));
    const __m128 z23 = _mm_add_ps(_mm256_castps256_ps128(a[4 + q]), _mm256_extractf128_ps(a[4 + q], 1));
    const __m128 s = _mm_add_ps(z01, z23), s8 = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s4[q] = _mm_cvtss_f32(_mm_add_ss(s8, _mm_movehdup_ps(s8)));
  }
  return ((s4[0] + s4[2]) + (s4[1] + s4[3])) * B::unscale;
}

// One row r (K float16, bfloat16 or float8) against the vector (x in float32, xh in float16 for
// float16; for float8, f8_x_scaled's copy of x: F32Panels::gemv_x).
template <class T>
inline float dot64_row(const float* x, const Half* xh, const T* r, int64_t K) {
  const int64_t K64 = K / 64 * 64;
  if constexpr (kFloat8<T>) {  // (DAZ clear: gemv_dot)
    const float y = dot64_f8(reinterpret_cast<const float*>(xh), r, K64);
    if (!std::isnan(y)) return dot64_tail(x, r, K64, K, y);
    // (a byte the shifts do not convert, or a NaN sum: load8's loop gives the same bits)
    return dot64_load8(x, xh, r, K);
  } else {
#ifdef KILN_GEMM_F32_AVX512
    auto load16 = [](const T* p) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
      if constexpr (std::is_same_v<T, Half>) return _mm512_cvtph_ps(h);
      else return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    };
    auto loadx = [&](int64_t k) {
      if constexpr (std::is_same_v<T, Half>)
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xh + k)));
      else return _mm512_loadu_ps(x + k);
    };
    __m512 a[4];  // a[q]: lanes 16q..16q+15 = Zq
    for (int q = 0; q < 4; ++q) a[q] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K64; k += 64)
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) a[q] = _mm512_fmadd_ps(loadx(k + 16 * q), load16(r + k + 16 * q), a[q]);
    const __m512 s = _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3]));
    const float y = sum8_lanes(_mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1)));
    return dot64_tail(x, r, K64, K, y);
#else
    return dot64_load8(x, xh, r, K);
#endif
  }
}

// y[j] = row j of m (n rows js apart) . x for one vector (in float16 at xh for float16).
template <class T>
inline void gemv_rows_lanes(const float* x, const Half* xh, const T* m, int64_t js, int64_t n, int64_t K, float* y) {
  for (int64_t j = 0; j < n; ++j) y[j] = dot64_row(x, xh, m + j * js, K);
}

// Two to four vectors (AVX2 and AVX-512 tables: 8-lane registers on both): the same 64 lanes and the same bits, computed lane group by lane
// group. dot64_row holds one pair's 64 lanes in 8 registers, so each vector reread every row and
// two loads fed each multiply-add (40-50% of copy bandwidth on Zen 3). Here lane group p (lanes
// 8p..8p+7) of J rows and all R vectors runs in J x R registers: one row load feeds R
// multiply-adds, one vector load J.
// - K is taken in segments of kLaneKc (below K64). Per segment, a group of kLaneGroup(R) rows runs
//   J rows at a time, 8 passes (one per lane group) over the J rows' segment, which stays in L1
//   across them; the lane groups' accumulators wait in memory between segments.
// - Every J rows of the group read the vectors' segment from L1. (Reading all of K for J rows at a
//   time, the vectors came from L2: four rows at 52-62% of copy on Zen 3, against 63-68% with the
//   group; three rows 74%, two 87%.)
// - The vectors come in segment-major, then group-major order (gemv_x_lanes), so that each pass
//   reads them as one stream.
// - The rows are fetched ahead of their use: the passes over a segment in L1 miss nothing, so the
//   hardware's prefetchers stop (four rows: 45% of copy with no fetch). Two vectors fetch the next
//   set's segments into L1 while a set runs (SetFetch); three and four fetch the next group's rows
//   with prefetcht1 (GroupFetch), which on Zen 3 fills L1 as well and evicts segments in use, but
//   fetches far enough ahead for their slower sets. Zen 3, 14336 x 4096, one thread: two vectors
//   7.2-7.7 ms with SetFetch against 10.1-10.6 with GroupFetch (65-74% of copy -> 82-100%); with
//   SetFetch three vectors were 4% slower (one thread) and four 7% (two threads): its lead, one set,
//   is too short for them. (Two or more sets ahead, or a steady stream of lines some way ahead, was
//   slower again: the sets' segments fall in the same L1 sets when rows lie a multiple of 4 KiB
//   apart.)
// - Four vectors on one thread are bound by the arithmetic, not by memory: with the matrix in L2 or
//   L3 this loop runs at 60-66 GFLOP/s on Zen 3 (80-90 when every set reads the same rows, from L1;
//   the multiply-adds alone could run at 100), so the arithmetic alone takes 7.2 ms of a 14336 x
//   4096 product against copy's 6.4; from memory four vectors reach 61-78% of copy bandwidth.
//   (Three rows to a set for three or four vectors, the segment loop unrolled, bfloat16 widened by
//   shift / mask of 16 elements: no faster.)
constexpr int64_t kLaneKc = 512;
constexpr int kLaneRows(int R) { return R == 2 ? 4 : 2; }  // J: J x R accumulators + J rows + 1 of 16 registers
constexpr int kLaneGroup(int R) { return 4 * kLaneRows(R); }
constexpr bool kFetchSets(int R) { return R == 2; }  // SetFetch, else GroupFetch

// xp: K floats, the vector x (K elements at stride xs) in that order: segment [k0, k0 + L) of
// K64 (L a multiple of 64) at xp[k0 + p * (L / 8) + 8 i + l] = x[k0 + 64 i + 8 p + l]; past K64,
// x[k] at xp[k].
// (float8: every value times 2^64, for F8Bits's floats; exact.)
template <class T>
void gemv_x_lanes(const T* x, int64_t xs, int64_t K, float* xp) {
  const int64_t K64 = K / 64 * 64;
  auto value = [&](int64_t k) {
    if constexpr (kFloat8<T>) return to_f32(x[k * xs]) * 0x1p64f;
    else return to_f32(x[k * xs]);
  };
  for (int64_t k0 = 0; k0 < K64; k0 += kLaneKc) {
    const int64_t L = std::min(kLaneKc, K64 - k0);
    for (int64_t i = 0; i < L / 64; ++i)
      for (int p = 0; p < 8; ++p)
        for (int l = 0; l < 8; ++l) xp[k0 + p * (L / 8) + 8 * i + l] = value(k0 + 64 * i + 8 * p + l);
  }
  for (int64_t k = K64; k < K; ++k) xp[k] = value(k);
}

// The sets of rows in gemv_rows_lanes_r's order: per group of kLaneGroup(R) rows, per segment of
// K64, J rows at a time (the group's last ones one at a time). `next` steps to the following set;
// past the last, `done`.
template <int R>
struct LaneSets {
  static constexpr int J = kLaneRows(R), G = kLaneGroup(R);
  int64_t n, K64, j0 = 0, k0 = 0, q = 0;  // rows j0 + q.., segment [k0, k0 + length())
  int w = 0;                              // rows in the set
  LaneSets(int64_t n_, int64_t K64_) : n(n_), K64(K64_) { width(); }
  bool done() const { return j0 >= n; }
  int64_t group() const { return std::min<int64_t>(G, n - j0); }
  int64_t length() const { return std::min(kLaneKc, K64 - k0); }
  bool ends_group() const { return q + w >= group() && k0 + kLaneKc >= K64; }
  template <class T>
  const T* row(const T* m, int64_t js, int t) const {  // t < J; past w: the last row again
    return m + (j0 + q + std::min(t, w - 1)) * js + k0;
  }
  void width() {
    if (!done()) w = q + J <= group() ? J : 1;
  }
  void next() {
    q += w;
    if (q >= group()) {
      q = 0, k0 += kLaneKc;
      if (k0 >= K64) k0 = 0, j0 += G;
    }
    width();
  }
};

// The rows fetched ahead while a set runs, one prefetch per step of lanes_segment. SetFetch: the next
// set's segments into L1, one 64-byte line a step from the segments in turn (`lines` in all).
// GroupFetch: the next group's rows, row after row (js_bytes apart), 8 elements of J rows a step, which
// covers them as the group's last step ends (prefetcht1: into L2 from Zen 4 on, into L1 as well
// before it).
template <int J, class T>
struct SetFetch {
  static constexpr int64_t kLine = 64 / sizeof(T);  // elements
  const T* seg[J];
  uint64_t lines = 0, at = 0;  // (unsigned: % and / by J, a power of two, are a mask and a shift)
  void step() {
    if (at < lines) _mm_prefetch(reinterpret_cast<const char*>(seg[at % J] + at / J * kLine), _MM_HINT_T0);
    ++at;
  }
};
template <int J, class T>
struct GroupFetch {
  static constexpr int64_t kStep = 8 * J * sizeof(T);  // bytes: 8 elements of J rows a step
  const char *at, *end;  // in the present row
  int64_t rows_left, js_bytes, row_bytes;
  void step() {
    _mm_prefetch(at, _MM_HINT_T1);
    at += kStep;
    if (at < end) return;
    if (rows_left > 0) at = end - row_bytes + js_bytes, end = at + row_bytes, --rows_left;
    else at = end - kStep;  // all fetched: the last line again
  }
};

// One segment (L elements, a multiple of 64) of J rows (rows[j]: the segment's start) against the
// R vectors' segment (xs: its start, vectors xst apart); acc[j][v][p]: lane group p's
// accumulators (zero when `first`); `fetch` steps once per step.
template <int J, int R, class T, class Fetch>
inline void lanes_segment(const float* xs, int64_t xst, int64_t L, const T* const* rows, Fetch& fetch, bool first,
                          __m256 (*acc)[R][8]) {
  // (float8: F8Bits's floats, 2^-120 w or 2^-112 w, against vectors kept times 2^64)
  auto load = [](const T* p) {
    if constexpr (kFloat8<T>) {
      const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
      return _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(v, F8Bits<T>::lane_shift),
                                                  _mm256_set1_epi32(static_cast<int>(F8Bits<T>::lane_mask))));
    } else {
      return load8(p);
    }
  };
  const int64_t L8 = L / 8;
  for (int p = 0; p < 8; ++p) {
    __m256 a[J][R];
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j)
#pragma GCC unroll 4
      for (int v = 0; v < R; ++v) a[j][v] = first ? _mm256_setzero_ps() : acc[j][v][p];
    const float* xq = xs + p * L8;
    for (int64_t i = 0; i < L8; i += 8) {
      __m256 r[J];
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) r[j] = load(rows[j] + 8 * i + 8 * p);
      fetch.step();
#pragma GCC unroll 4
      for (int v = 0; v < R; ++v) {
        __m256 xv = _mm256_load_ps(xq + v * xst + i);
        __asm__("" : "+x"(xv));  // one load for the J rows (GCC would fold it into each multiply-add)
#pragma GCC unroll 4
        for (int j = 0; j < J; ++j) a[j][v] = _mm256_fmadd_ps(xv, r[j], a[j][v]);
      }
    }
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j)
#pragma GCC unroll 4
      for (int v = 0; v < R; ++v) acc[j][v][p] = a[j][v];
  }
}

// R (2 to 4) vectors in gemv_x_lanes's order, xst apart, against m's n rows (js apart); xn: the
// vectors for the last K - K64 elements (xp itself, whose order is plain there; for float8, the
// vectors as they are, while xp holds them times 2^64, and a row with a byte that F8Bits's shifts
// do not convert takes dot64_load8 on them).
template <int R, class T>
void gemv_rows_lanes_r(const float* xp, int64_t xst, const float* xn, const T* m, int64_t js, int64_t n, int64_t K,
                       float* y, int64_t ys) {
  constexpr int J = kLaneRows(R), G = kLaneGroup(R);
  const int64_t K64 = K / 64 * 64;
  __m256 acc[G][R][8];
  bool special[G] = {};  // (float8)
  LaneSets<R> set(n, K64), ahead(n, K64);  // the set that runs, and the one after it
  ahead.next();
  GroupFetch<J, T> group{};
  const int64_t row_bytes = K * static_cast<int64_t>(sizeof(T)), js_bytes = js * static_cast<int64_t>(sizeof(T));
  for (; !set.done(); set.next(), ahead.next()) {
    const T* rows[J];
    for (int t = 0; t < J; ++t) rows[t] = set.row(m, js, t);
    const int64_t L = set.length();
    auto run = [&](auto& fetch) {
      if (set.w == J) lanes_segment<J, R>(xp + set.k0, xst, L, rows, fetch, set.k0 == 0, acc + set.q);
      else lanes_segment<1, R>(xp + set.k0, xst, L, rows, fetch, set.k0 == 0, acc + set.q);
    };
    if constexpr (kFetchSets(R)) {
      SetFetch<J, T> fetch;
      if (!ahead.done()) {
        for (int t = 0; t < J; ++t) fetch.seg[t] = ahead.row(m, js, t);
        fetch.lines = static_cast<uint64_t>(J * (ahead.length() / SetFetch<J, T>::kLine));
      }
      run(fetch);
    } else {
      if (set.k0 == 0 && set.q == 0) {  // a new group: fetch the next (after the last: this one's first row, in cache)
        const int64_t g1 = std::min<int64_t>(G, n - set.j0 - set.group());
        const char* f0 = reinterpret_cast<const char*>(m + (g1 > 0 ? set.j0 + set.group() : set.j0) * js);
        group = {f0, f0 + row_bytes, std::max<int64_t>(g1, 1) - 1, js_bytes, row_bytes};
      }
      run(group);
    }
    if constexpr (kFloat8<T>)  // (the set's segments, in L1)
      for (int t = 0; t < set.w; ++t) special[set.q + t] = (set.k0 != 0 && special[set.q + t]) || f8_special(rows[t], L);
    if (!set.ends_group()) continue;
    for (int64_t t = 0; t < set.group(); ++t) {
      const T* row = m + (set.j0 + t) * js;
      for (int v = 0; v < R; ++v) {
        float s = K64 > 0 ? sum64_lanes(acc[t][v]) : 0.0f;
        if constexpr (kFloat8<T>) {
          s *= F8Bits<T>::unscale;
          if (special[t] || std::isnan(s)) {  // (load8's loop: the same bits)
            y[v * ys + set.j0 + t] = dot64_load8(xn + v * xst, nullptr, row, K);
            continue;
          }
        }
        y[v * ys + set.j0 + t] = dot64_tail(xn + v * xst, row, K64, K, s);
      }
    }
  }
}

// R vectors (x + v * xst; in float16 at xh + v * xhs when T is: F32Panels::gemv_x keeps them; in
// gemv_x_lanes's order when R > 1 on AVX2 and AVX-512); the totals at tot + v * tst, each with room for n
// rounded up to 8.
template <int R, class T>
void gemv_dot_r(const float* x, int64_t xst, const T* m, int64_t js, int64_t n, const Slicing& sl, float* tot,
                int64_t tst) {
  // Two groups of 8 rows at a time, one when the rows lie a multiple of 4 KiB apart: then they all
  // fall in one L1 set (8 ways), and 16 rows read side by side evict each other's lines before
  // their next elements are read (measured when float16 took this path: Zen 4, avx2 table, 1 x K @
  // 4096 x K^T on one thread: K = 4096: 6.8 GB/s with four groups, 10.4 with two, 12.3 with one;
  // K = 4128: 10.9, 15.5, 11.6).
  const int gmax = (js * static_cast<int64_t>(sizeof(T))) % 4096 == 0 ? 1 : 2;
  for (int64_t j = 0; j < n; j += 8 * gmax) {
    const T* rows[16];
    for (int i = 0; i < 16; ++i) rows[i] = m + std::min<int64_t>(j + i, n - 1) * js;  // past n: repeats
    switch (std::min<int64_t>(gmax, ceil_div(n - j, 8))) {
      case 2: gemv_dot_block<2, R>(x, xst, rows, sl, tot + j, tst); break;
      default: gemv_dot_block<1, R>(x, xst, rows, sl, tot + j, tst); break;
    }
  }
}
template <class T>
void gemv_dot(const float* x, int64_t xst, const Half* xh, int64_t xhs, int R, const T* m, int64_t js, int64_t n,
              const Slicing& sl, float* tot, int64_t tst) {
  if constexpr (kLanes64<T>) {
    // float8: the vectors times 2^64 at xh, as floats (one: f8_x_scaled's order; more:
    // gemv_x_lanes's), and DAZ clear while the kernels run, since it would read F8Bits's subnormal
    // floats as zero (nothing else here meets a subnormal: the bits are the same either way). As
    // lut16 does in kernels_unary.cpp.
    struct DazClear {
      unsigned csr = kFloat8<T> ? _mm_getcsr() : 0;
      DazClear() {
        if (kFloat8<T> && (csr & 0x40)) _mm_setcsr(csr & ~0x40u);
      }
      ~DazClear() {  // (DAZ alone: the exception flags raised meanwhile stay)
        if (kFloat8<T> && (csr & 0x40)) _mm_setcsr(_mm_getcsr() | 0x40);
      }
    } daz_clear;
    const float* xp = kFloat8<T> ? reinterpret_cast<const float*>(xh) : x;
    switch (R) {
      case 1: break;
      case 2: return gemv_rows_lanes_r<2>(xp, xst, x, m, js, n, sl.K, tot, tst);
      case 3: return gemv_rows_lanes_r<3>(xp, xst, x, m, js, n, sl.K, tot, tst);
      default: return gemv_rows_lanes_r<4>(xp, xst, x, m, js, n, sl.K, tot, tst);
    }
    (void)xhs;
    gemv_rows_lanes(x, xh, m, js, n, sl.K, tot);
  } else {
    (void)xh, (void)xhs;
    switch (R) {
      case 1: gemv_dot_r<1>(x, xst, m, js, n, sl, tot, tst); break;
      case 2: gemv_dot_r<2>(x, xst, m, js, n, sl, tot, tst); break;
      case 3: gemv_dot_r<3>(x, xst, m, js, n, sl, tot, tst); break;
      default: gemv_dot_r<4>(x, xst, m, js, n, sl, tot, tst); break;
    }
  }
}
#else
// ---- matrix-vector shapes on the base ISA: the same sums one element at a time ----------------

template <class T>
void gemv_axpy(const float* x, const T* m, int64_t ks, int64_t n, const Slicing& sl, float* tot, float* acc) {
  for (int64_t kb = 0; kb < sl.nk; ++kb) {
    const int64_t k0 = kb * sl.kcb, k1 = std::min(sl.K, k0 + sl.kcb);
    for (int64_t c0 = 0; c0 < n; c0 += kAxpyCols) {  // (acc holds kAxpyCols)
      const int64_t cn = std::min(kAxpyCols, n - c0);
      std::fill(acc, acc + cn, 0.0f);
      for (int64_t k = k0; k < k1; ++k)
        for (int64_t j = 0; j < cn; ++j) acc[j] = madd(x[k], to_f32(m[k * ks + c0 + j]), acc[j]);
      for (int64_t j = 0; j < cn; ++j) tot[c0 + j] = kb == 0 ? acc[j] : tot[c0 + j] + acc[j];
    }
  }
}

// float16, bfloat16 and float8 rows: the 64 lanes of the AVX2 / AVX-512 kernels (above), lane by lane.
template <class T>
inline float dot64_row(const float* x, const T* r, int64_t K) {
  const int64_t K64 = K / 64 * 64;
  float lane[64] = {};
  for (int64_t k = 0; k < K64; k += 64)
    for (int l = 0; l < 64; ++l) lane[l] = madd(x[k + l], to_f32(r[k + l]), lane[l]);
  float s[16];
  for (int l = 0; l < 16; ++l) s[l] = (lane[l] + lane[16 + l]) + (lane[32 + l] + lane[48 + l]);
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) s[l] = s[l] + s[l + w];
  float v = s[0];
  for (int64_t k = K64; k < K; ++k) v = madd(x[k], to_f32(r[k]), v);
  return v;
}

template <class T>
void gemv_dot(const float* x, int64_t xst, const Half*, int64_t, int R, const T* m, int64_t js, int64_t n,
              const Slicing& sl, float* tot, int64_t tst) {
  for (int64_t j = 0; j < n; ++j) {
    const T* r = m + j * js;
    for (int v = 0; v < R; ++v) {
      const float* xv = x + v * xst;
      float* t = tot + v * tst + j;
      if constexpr (kLanes64<T>) {
        *t = dot64_row(xv, r, sl.K);
      } else {
        for (int64_t kb = 0; kb < sl.nk; ++kb) {
          const int64_t k0 = kb * sl.kcb, k1 = std::min(sl.K, k0 + sl.kcb);
          float acc = 0.0f;
          for (int64_t k = k0; k < k1; ++k) acc = madd(xv[k], to_f32(r[k]), acc);
          *t = kb == 0 ? acc : *t + acc;
        }
      }
    }
  }
}
#endif

}  // namespace f32p
}  // namespace
}  // namespace kiln::cpu::KILN_ISA
