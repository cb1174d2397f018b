// The per-step pointwise passes of the recurrent ops (compiled once per ISA; the kernel table's
// rnn_f32 / rnn_f64 entries, run by rnn.cpp; the step structs are in rnn_step.h). float32 runs 8-lane
// vectors (vec.h's VecF8) in the avx2 and avx512 tables, so both give the same bits, and scalars on
// base; float64 is scalar everywhere. The scalar sigmoid and tanh are the C library's; the vector
// ones are written here (sigm8, tanh8) on vec.h's exp polynomial.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kiln/backend/cpu/isa_util.h"
#include "kiln/backend/cpu/rnn_step.h"
#include "kiln/backend/cpu/vec.h"

namespace kiln::cpu::KILN_ISA {
namespace {

using namespace cpu::rnn;

template <class T>
inline T sigm(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

#if defined(__AVX2__)
// 8 lanes (vec.h's VecF8) in the avx2 and avx512 tables alike: the tiles below are 8 units wide and
// both tables give the same bits. sigmoid and tanh are the ones below.
using V = VecF8;
inline V ld(const float* p) { return V::load(p); }
inline void st(float* p, V v) { v.store(p); }
inline V set1(float x) { return V::set1(x); }
inline V zero() { return V::set1(0.0f); }
inline V add(V a, V b) { return a + b; }
inline V sub(V a, V b) { return a - b; }
inline V mul(V a, V b) { return a * b; }
inline V vfma(V a, V b, V c) { return fma(a, b, c); }
inline V fnma(V a, V b, V c) { return fma(-a, b, c); }  // c - a * b, one rounding
// The recurrent steps' activations, cheaper than vec.h's general exp and tanh (about half the
// instructions: the steps' pointwise part costs a third of a fused LSTM step otherwise). Both rest on
// exp_parts: for y in [-87.3, 89] (the callers clamp, NaN passing through), n = round(y / ln 2) and the
// bits of 2^n come from one FMA, t = y log2(e) + (1.5 * 2^23 + 127): t's low mantissa bits hold n + 127,
// rounded to nearest by the FMA, which shifted into the exponent field are 2^n (n + 127 in [1, 255];
// 255 is inf, from y = 88.38 on, where e^y itself would still be finite up to 88.72). Then
// e^y = 2^n (1 + q) with q = e^r - 1 on |r| <= ln(2) / 2 by vec.h's exp polynomial. Enough for the
// callers: sigmoid is 0 from x = -88.38 down (true value below 4.2e-39), tanh never gets there.
struct ExpParts {
  __m256 pow2n, q;
};
inline ExpParts exp_parts(__m256 y) {
  const __m256 magic = _mm256_set1_ps(12583039.0f);  // 1.5 * 2^23 + 127
  const __m256 t = _mm256_fmadd_ps(y, _mm256_set1_ps(1.44269504088896341f), magic);
  const __m256 n = _mm256_sub_ps(t, magic);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), y);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(0.0013814595295116305f), r, _mm256_set1_ps(0.008368706330657005f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.04166838899254799f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.1666652113199234f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.4999999403953552f));
  return {_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t), 23)),
          _mm256_fmadd_ps(_mm256_mul_ps(r, r), p, r)};
}
// sigmoid(x) = 1 / (1 + e^-x): -x clamped to [-87.3, 89] (below, e^-x < 2^-126 leaves 1 exactly;
// above, e^-x = inf gives 0, as -inf must). NaN propagates (max and min return their second operand
// for NaN).
inline V sigm8(V x) {
  __m256 y = _mm256_xor_ps(x.v, _mm256_set1_ps(-0.0f));
  y = _mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_max_ps(_mm256_set1_ps(-87.3f), y));
  const ExpParts e = exp_parts(y);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 ey = _mm256_mul_ps(e.pow2n, _mm256_add_ps(one, e.q));  // (1 + q) > 0: inf stays inf
  return {_mm256_div_ps(one, _mm256_add_ps(one, ey))};
}
// tanh(x) = sign(x) m / (m + 2) with m = expm1(2 |x|) = 2^n q + (2^n - 1) (one rounding, none of
// 1 + q's cancellation near 0, so tanh keeps its relative accuracy there); |x| clamped to 9, where
// tanh rounds to 1. -0 stays -0, NaN stays NaN.
inline V tanh8(V x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 a = _mm256_min_ps(_mm256_set1_ps(9.0f), _mm256_andnot_ps(sign, x.v));
  const ExpParts e = exp_parts(_mm256_add_ps(a, a));
  const __m256 m = _mm256_fmadd_ps(e.pow2n, e.q, _mm256_sub_ps(e.pow2n, _mm256_set1_ps(1.0f)));
  const __m256 t = _mm256_div_ps(m, _mm256_add_ps(m, _mm256_set1_ps(2.0f)));
  return {_mm256_or_ps(t, _mm256_and_ps(sign, x.v))};
}
// sigmoid'(y) = y (1 - y) from the activation y
inline V dsig(V y) { return mul(y, sub(set1(1.0f), y)); }

// The LSTM backward of 8 units of one row: from dh, the activations g (i, f, g, o, H apart), the
// cell state c and c_prev, and the cell gradient carried in dc (updated for the step before), the
// gate gradients into d, and their sums over rows for the bias gradient.
struct GateSums {
  V i = zero(), f = zero(), g = zero(), o = zero();
  void add_to(float* db, int64_t H) const {
    st(db, add(ld(db), i)), st(db + H, add(ld(db + H), f));
    st(db + 2 * H, add(ld(db + 2 * H), g)), st(db + 3 * H, add(ld(db + 3 * H), o));
  }
};
inline void lstm_back_row(V dh, const float* g, float* d, const float* c, const float* c_prev, float* dc, int64_t H,
                          GateSums& sums) {
  const V one = set1(1.0f);
  V i = ld(g), f = ld(g + H), gg = ld(g + 2 * H), o = ld(g + 3 * H);
  V tc = tanh8(ld(c));
  V dcv = vfma(mul(dh, o), fnma(tc, tc, one), ld(dc));
  V di = mul(mul(dcv, gg), dsig(i)), df = mul(mul(dcv, ld(c_prev)), dsig(f));
  V dg = mul(mul(dcv, i), fnma(gg, gg, one)), dout = mul(mul(dh, tc), dsig(o));
  st(d, di), st(d + H, df), st(d + 2 * H, dg), st(d + 3 * H, dout);
  st(dc, mul(dcv, f));
  sums.i = add(sums.i, di), sums.f = add(sums.f, df), sums.g = add(sums.g, dg), sums.o = add(sums.o, dout);
}
#endif

// ---- LSTM ---------------------------------------------------------------------------------------
template <class T>
inline void unit_step(const LstmStep<T>& s, int64_t b, int64_t j) {
  const int64_t H = s.H;
  T* g = s.gates + b * 4 * H;
  T i = sigm(g[j] + s.bias[j]), f = sigm(g[H + j] + s.bias[H + j]);
  T gg = std::tanh(g[2 * H + j] + s.bias[2 * H + j]), o = sigm(g[3 * H + j] + s.bias[3 * H + j]);
  g[j] = i, g[H + j] = f, g[2 * H + j] = gg, g[3 * H + j] = o;
  T c = f * s.c_prev[b * H + j] + i * gg;
  s.c[b * H + j] = c;
  s.h[b * H + j] = o * std::tanh(c);
}

template <class T>
inline void unit_step(const LstmBackStep<T>& s, int64_t b, int64_t j) {
  const int64_t H = s.H, k = b * H + j;
  const T* g = s.gates + b * 4 * H;
  T* d = s.dgates + b * 4 * H;
  T dh = s.dh[k] + (s.dh_add ? s.dh_add[k] : T(0));
  T i = g[j], f = g[H + j], gg = g[2 * H + j], o = g[3 * H + j];
  T tc = std::tanh(s.c[k]);
  T dc = s.dc[k] + dh * o * (T(1) - tc * tc);
  T di = dc * gg * i * (T(1) - i), df = dc * s.c_prev[k] * f * (T(1) - f);
  T dg = dc * i * (T(1) - gg * gg), dout = dh * tc * o * (T(1) - o);
  d[j] = di, d[H + j] = df, d[2 * H + j] = dg, d[3 * H + j] = dout;
  s.dc[k] = dc * f;
  s.dbias[j] += di, s.dbias[H + j] += df, s.dbias[2 * H + j] += dg, s.dbias[3 * H + j] += dout;
}

#if defined(__AVX2__)
int64_t vec_step(const LstmStep<float>& s, int64_t j0, int64_t j1) {
  const int64_t H = s.H;
  int64_t j = j0;
  for (; j + 8 <= j1; j += 8) {
    V bi = ld(s.bias + j), bf = ld(s.bias + H + j), bg = ld(s.bias + 2 * H + j),
      bo = ld(s.bias + 3 * H + j);
    for (int64_t b = 0; b < s.B; ++b) {
      float* g = s.gates + b * 4 * H + j;
      V i = sigm8(add(ld(g), bi)), f = sigm8(add(ld(g + H), bf));
      V gg = tanh8(add(ld(g + 2 * H), bg)), o = sigm8(add(ld(g + 3 * H), bo));
      st(g, i), st(g + H, f), st(g + 2 * H, gg), st(g + 3 * H, o);
      V c = vfma(f, ld(s.c_prev + b * H + j), mul(i, gg));
      st(s.c + b * H + j, c);
      st(s.h + b * H + j, mul(o, tanh8(c)));
    }
  }
  return j;
}

int64_t vec_step(const LstmBackStep<float>& s, int64_t j0, int64_t j1) {
  const int64_t H = s.H;
  int64_t j = j0;
  for (; j + 8 <= j1; j += 8) {
    GateSums sums;
    for (int64_t b = 0; b < s.B; ++b) {
      const int64_t k = b * H + j;
      V dh = ld(s.dh + k);
      if (s.dh_add) dh = add(dh, ld(s.dh_add + k));
      lstm_back_row(dh, s.gates + b * 4 * H + j, s.dgates + b * 4 * H + j, s.c + k, s.c_prev + k, s.dc + k, H, sums);
    }
    sums.add_to(s.dbias + j, H);
  }
  return j;
}
#endif

// ---- GRU ----------------------------------------------------------------------------------------
template <class T>
inline void unit_step(const GruStep<T>& s, int64_t b, int64_t j) {
  const int64_t H = s.H;
  T* row = s.res + b * 4 * H;
  const T* gh = s.gh + b * 3 * H;
  T r = sigm(row[j] + s.b_ih[j] + gh[j] + s.b_hh[j]);
  T z = sigm(row[H + j] + s.b_ih[H + j] + gh[H + j] + s.b_hh[H + j]);
  T hn = gh[2 * H + j] + s.b_hh[2 * H + j];
  T n = std::tanh(row[2 * H + j] + s.b_ih[2 * H + j] + r * hn);
  T hp = s.h_prev[b * H + j];
  s.h[b * H + j] = n + z * (hp - n);
  row[j] = r, row[H + j] = z, row[2 * H + j] = n, row[3 * H + j] = hn;
}

template <class T>
inline void unit_step(const GruBackStep<T>& s, int64_t b, int64_t j) {
  const int64_t H = s.H, k = b * H + j;
  const T* row = s.res + b * 4 * H;
  T r = row[j], z = row[H + j], n = row[2 * H + j], hn = row[3 * H + j];
  T dh = s.dy[k] + s.carry[k];
  T dn = dh * (T(1) - z), dz = dh * (s.h_prev[k] - n);
  s.carry[k] = dh * z;
  T dan = dn * (T(1) - n * n);
  T dar = dan * hn * r * (T(1) - r), daz = dz * z * (T(1) - z);
  T* dx = s.dgx + b * 3 * H;
  T* dhh = s.dgh + b * 3 * H;
  dx[j] = dhh[j] = dar;
  dx[H + j] = dhh[H + j] = daz;
  dx[2 * H + j] = dan;
  dhh[2 * H + j] = dan * r;
  s.db_ih[j] += dar, s.db_ih[H + j] += daz, s.db_ih[2 * H + j] += dan;
  s.db_hh[j] += dar, s.db_hh[H + j] += daz, s.db_hh[2 * H + j] += dan * r;
}

#if defined(__AVX2__)
int64_t vec_step(const GruStep<float>& s, int64_t j0, int64_t j1) {
  const int64_t H = s.H;
  int64_t j = j0;
  for (; j + 8 <= j1; j += 8) {
    V br = add(ld(s.b_ih + j), ld(s.b_hh + j)), bz = add(ld(s.b_ih + H + j), ld(s.b_hh + H + j));
    V bin = ld(s.b_ih + 2 * H + j), bhn = ld(s.b_hh + 2 * H + j);
    for (int64_t b = 0; b < s.B; ++b) {
      float* row = s.res + b * 4 * H + j;
      const float* gh = s.gh + b * 3 * H + j;
      V r = sigm8(add(add(ld(row), ld(gh)), br));
      V z = sigm8(add(add(ld(row + H), ld(gh + H)), bz));
      V hn = add(ld(gh + 2 * H), bhn);
      V n = tanh8(vfma(r, hn, add(ld(row + 2 * H), bin)));
      V hp = ld(s.h_prev + b * H + j);
      st(s.h + b * H + j, vfma(z, sub(hp, n), n));
      st(row, r), st(row + H, z), st(row + 2 * H, n), st(row + 3 * H, hn);
    }
  }
  return j;
}

int64_t vec_step(const GruBackStep<float>& s, int64_t j0, int64_t j1) {
  const int64_t H = s.H;
  const V one = set1(1.0f);
  int64_t j = j0;
  for (; j + 8 <= j1; j += 8) {
    V sr = zero(), sz = sr, sn = sr, snr = sr;
    for (int64_t b = 0; b < s.B; ++b) {
      const int64_t k = b * H + j;
      const float* row = s.res + b * 4 * H + j;
      V r = ld(row), z = ld(row + H), n = ld(row + 2 * H), hn = ld(row + 3 * H);
      V dh = add(ld(s.dy + k), ld(s.carry + k));
      V dn = mul(dh, sub(one, z)), dz = mul(dh, sub(ld(s.h_prev + k), n));
      st(s.carry + k, mul(dh, z));
      V dan = mul(dn, fnma(n, n, one));
      V dar = mul(mul(dan, hn), dsig(r)), daz = mul(dz, dsig(z)), danr = mul(dan, r);
      float* dx = s.dgx + b * 3 * H + j;
      float* dhh = s.dgh + b * 3 * H + j;
      st(dx, dar), st(dx + H, daz), st(dx + 2 * H, dan);
      st(dhh, dar), st(dhh + H, daz), st(dhh + 2 * H, danr);
      sr = add(sr, dar), sz = add(sz, daz), sn = add(sn, dan), snr = add(snr, danr);
    }
    st(s.db_ih + j, add(ld(s.db_ih + j), sr)), st(s.db_ih + H + j, add(ld(s.db_ih + H + j), sz));
    st(s.db_ih + 2 * H + j, add(ld(s.db_ih + 2 * H + j), sn));
    st(s.db_hh + j, add(ld(s.db_hh + j), sr)), st(s.db_hh + H + j, add(ld(s.db_hh + H + j), sz));
    st(s.db_hh + 2 * H + j, add(ld(s.db_hh + 2 * H + j), snr));
  }
  return j;
}
#endif

// ---- Elman RNN ----------------------------------------------------------------------------------
template <class T>
inline T rnn_act(T v, bool relu) {
  if (relu) return v < T(0) ? T(0) : v;  // NaN stays NaN, as torch's relu
  return std::tanh(v);
}

template <class T>
inline void unit_step(const RnnStep<T>& s, int64_t b, int64_t j) {
  T& a = s.a[b * s.H + j];
  a = rnn_act(a + s.bias[j], s.relu);
}

// No transcendental: the scalar loop over units vectorises as it is.
template <class T>
inline void unit_step(const RnnBackStep<T>& s, int64_t b, int64_t j) {
  const int64_t k = b * s.H + j;
  T y = s.y[k], g = s.dy[k] + s.carry[k];
  T d = s.relu ? (y > T(0) ? g : T(0)) : g * (T(1) - y * y);
  s.da[k] = d;
  s.db[j] += d;
}

#if defined(__AVX2__)
int64_t vec_step(const RnnStep<float>& s, int64_t j0, int64_t j1) {
  int64_t j = j0;
  for (; j + 8 <= j1; j += 8) {
    V bias = ld(s.bias + j);
    for (int64_t b = 0; b < s.B; ++b) {
      float* a = s.a + b * s.H + j;
      V v = add(ld(a), bias);
      st(a, s.relu ? V::max(zero(), v) : tanh8(v));
    }
  }
  return j;
}
#endif

// ---- LSTM with the recurrent GEMM fused in (float32, AVX2) -----------------------------------
#if defined(__AVX2__)
// The cell updates of G groups of 8 units (group q: row[q], units [j[q], j[q] + 8)) from the four
// gates' products a[q][0..3]: gates = a + xproj (in s.gates; 0 when the input projection was fused
// into the products) + bias, activated in place; then c and h. Stage by stage over the groups, so
// their independent chains (an activation is ~70 cycles of latency) overlap.
alignas(32) constexpr float kZeros8[8] = {};
template <int G>
[[gnu::always_inline]] inline void lstm_cells(const LstmFusedFwd& s, const int64_t* row, const int64_t* j,
                                              const V (*a)[4]) {
  const int64_t H = s.H;
  // one code path: with the projection fused in, acc + 0 (exact) stands for acc + xproj
  const int64_t xs = s.x ? 0 : H;
  V act[G][4], c[G];
  for (int q = 0; q < G; ++q) {
    const float* xp = s.x ? kZeros8 : s.gates + row[q] * 4 * H + j[q];
    for (int k = 0; k < 4; ++k) act[q][k] = add(add(a[q][k], ld(xp + k * xs)), ld(s.bias + k * H + j[q]));
  }
  for (int k = 0; k < 4; ++k)
    for (int q = 0; q < G; ++q) act[q][k] = k == 2 ? tanh8(act[q][k]) : sigm8(act[q][k]);
  for (int q = 0; q < G; ++q) {
    if (s.store_gates) {
      float* g = s.gates + row[q] * 4 * H + j[q];
      for (int k = 0; k < 4; ++k) st(g + k * H, act[q][k]);
    }
    c[q] = vfma(act[q][1], ld(s.c_prev + row[q] * H + j[q]), mul(act[q][0], act[q][2]));
    st(s.c + row[q] * H + j[q], c[q]);
  }
  for (int q = 0; q < G; ++q) st(s.h + row[q] * H + j[q], mul(act[q][3], tanh8(c[q])));
}

// The epilogue's operands of rows [b0, b0 + MR) x units [j, j + 16) (the input projections, 4H apart
// per row, c_prev, and the c and h rows it writes) fetched while the tile's K chunks run (issued on
// the first): they come from L3. (A macro: as an inline function GCC's interprocedural passes
// dropped the prefetches.)
#define KILN_LSTM_PREFETCH_CELL(s, b0, mr, j)                                                            \
  for (int r_ = 0; r_ < (mr); ++r_) {                                                                     \
    if ((s).store_gates || !(s).x) {                                                                      \
      const float* g_ = (s).gates + ((b0) + r_) * 4 * (s).H + (j);                                        \
      for (int q_ = 0; q_ < 4; ++q_) _mm_prefetch(reinterpret_cast<const char*>(g_ + q_ * (s).H), _MM_HINT_T0); \
    }                                                                                                     \
    _mm_prefetch(reinterpret_cast<const char*>((s).c_prev + ((b0) + r_) * (s).H + (j)), _MM_HINT_T0);     \
    _mm_prefetch(reinterpret_cast<const char*>((s).c + ((b0) + r_) * (s).H + (j)), _MM_HINT_T0);          \
    _mm_prefetch(reinterpret_cast<const char*>((s).h + ((b0) + r_) * (s).H + (j)), _MM_HINT_T0);          \
  }

// The forward tile's lanes: N = 8 (VecF8, both tables) or 16 (zmm registers, the AVX-512 table).
template <int N>
struct FwdLanes;
template <>
struct FwdLanes<8> {
  using T = V;
  static T zero() { return V::set1(0.0f); }
  static T load(const float* p) { return V::load(p); }
  static void store(float* p, T v) { v.store(p); }
  static T bcast(float x) { return V::set1(x); }
  static T fmadd(T a, T b, T c) { return fma(a, b, c); }
};
#if defined(__AVX512F__)
template <>
struct FwdLanes<16> {
  using T = __m512;
  static T zero() { return _mm512_setzero_ps(); }
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static T bcast(float x) { return _mm512_set1_ps(x); }
  static T fmadd(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
};
#endif

// The cell update of rows [b0, b0 + mr) x units [j0, j0 + N) from the four gates' products in acc
// (row r's gate q at acc + (4 r + q) N, as the tile stored them), on 8-lane halves. One call per
// tile, so the activations' constants stay in registers across its rows.
template <int N>
[[gnu::noinline]] void lstm_cell_rows(const LstmFusedFwd& s, int64_t b0, int mr, int64_t j0, const float* acc) {
  using L = FwdLanes<N>;
  constexpr int H8 = N / 8;  // groups per row
  V a[2 * H8][4];
  int64_t row[2 * H8], j[2 * H8];
  auto gather = [&](int r, int q0) {  // row b0 + r's groups into a[q0, q0 + H8)
    for (int h = 0; h < H8; ++h) row[q0 + h] = b0 + r, j[q0 + h] = j0 + 8 * h;
    for (int k = 0; k < 4; ++k) {
      const typename L::T v = L::load(acc + (4 * r + k) * N);
      if constexpr (N == 8) {
        a[q0][k] = v;
      } else {
#if defined(__AVX512F__)
        a[q0][k] = V{_mm512_castps512_ps256(v)}, a[q0 + 1][k] = V{_mm512_extractf32x8_ps(v, 1)};
#endif
      }
    }
  };
  int r = 0;
  for (; r + 2 <= mr; r += 2) {  // two rows at a time
    gather(r, 0), gather(r + 1, H8);
    lstm_cells<2 * H8>(s, row, j, a);
  }
  if (r < mr) {
    gather(r, 0);
    lstm_cells<H8>(s, row, j, a);
  }
}

// Forward tile: rows [b0, b0 + MR) x the N hidden units of block u (panels per block of N units: per
// k, the N weights of each gate). The four gates' products accumulate in 4 * MR registers over one K
// chunk of one source (a: the chunk's first column of row b0, rows lda apart; w: the chunk's panel):
// from zero on the first chunk, else from `part`, and go back to `part`; after the last chunk the
// cell update runs on them. The cell update runs on 8-lane halves with the 8-lane functions, so every
// element sees the same operations in the same order whatever N: the avx2 (N = 8) and avx512 (N = 16)
// tables give the same bits.
template <int N, int MR>
[[gnu::noinline]] void lstm_fused_fwd_tile(const LstmFusedFwd& s, int64_t u, int64_t b0, const float* a, int64_t lda,
                                           const float* w, int64_t kn, bool first, bool last, float* part) {
  using L = FwdLanes<N>;
  const int64_t j0 = u * N;
  if (first) KILN_LSTM_PREFETCH_CELL(s, b0, MR, j0)
  typename L::T acc[MR][4];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
    for (int g = 0; g < 4; ++g) acc[r][g] = first ? L::zero() : L::load(part + r * 4 * N + g * N);
  for (int64_t k = 0; k < kn; ++k, w += 4 * N) {
    const typename L::T w0 = L::load(w), w1 = L::load(w + N), w2 = L::load(w + 2 * N), w3 = L::load(w + 3 * N);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const typename L::T x = L::bcast(a[r * lda + k]);
      acc[r][0] = L::fmadd(x, w0, acc[r][0]), acc[r][1] = L::fmadd(x, w1, acc[r][1]);
      acc[r][2] = L::fmadd(x, w2, acc[r][2]), acc[r][3] = L::fmadd(x, w3, acc[r][3]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
    for (int g = 0; g < 4; ++g) L::store(part + r * 4 * N + g * N, acc[r][g]);
  if (last) lstm_cell_rows<N>(s, b0, MR, j0, part);
}

// Backward tile: rows [b0, b0 + MR) x the 16 hidden units of block u. dh = dy (+ dh_add) +
// dg_next W_hh[:, units] accumulates in 2 * MR registers (K = 4H; `a`: row b0 of dg_next, or null
// on the first step), then the gate gradients.
template <int MR>
void lstm_fused_bwd_tile(const LstmFusedBwd& s, const float* a, int64_t u, int64_t b0,
                                      int64_t k0, int64_t k1, float* part, bool last) {
  const int64_t H = s.H, K = 4 * H, j0 = u * 16;
  V acc[MR][2];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
    for (int h = 0; h < 2; ++h)
      acc[r][h] = k0 == 0 ? zero() : ld(part + r * 16 + h * 8);
  if (a) {
    const float* w = s.wp + (u * K + k0) * 16;
    for (int64_t k = k0; k < k1; ++k, w += 16) {
      V w0 = ld(w), w1 = ld(w + 8);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        V x = set1(a[r * K + k]);
        acc[r][0] = vfma(x, w0, acc[r][0]), acc[r][1] = vfma(x, w1, acc[r][1]);
      }
    }
  }
  if (!last) {
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) st(part + r * 16, acc[r][0]), st(part + r * 16 + 8, acc[r][1]);
    return;
  }
#pragma GCC unroll 2
  for (int half = 0; half < 2; ++half) {
    const int64_t j = j0 + 8 * half;
    GateSums sums;
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const int64_t row = b0 + r, k = row * H + j;
      V dh = add(acc[r][half], ld(s.dy + k));
      if (s.dh_add) dh = add(dh, ld(s.dh_add + k));
      lstm_back_row(dh, s.gates + row * 4 * H + j, s.dg + row * 4 * H + j, s.c + k, s.c_prev + k, s.dc + k, H, sums);
    }
    sums.add_to(s.dbias + j, H);
  }
}

// Calls f.template operator()<MR>(b0) on row tiles of Step rows, then of 2 and 1 for the rest.
template <int Step, class F>
inline void for_row_tiles(int64_t B, F&& f) {
  int64_t b = 0;
  if constexpr (Step == 6) {  // 6 + 2 rows at the end as 4 + 4: a 2-row tile is load-bound
    if (B % 6 == 2 && B >= 8) {
      for (; b + 8 < B; b += 6) f.template operator()<6>(b);
      f.template operator()<4>(b), f.template operator()<4>(b + 4);
      return;
    }
  }
  for (; b + Step <= B; b += Step) f.template operator()<Step>(b);
  for (; b + 2 <= B; b += 2) f.template operator()<2>(b);
  if (b < B) f.template operator()<1>(b);
}
#endif
#if defined(__AVX2__)
// Both steps run the K loop in chunks whose panel slice stays in L1 while every row tile reads it;
// partial sums wait in a per-thread buffer between chunks. The forward's K runs over its sources in
// order: x's columns (the input projection, when fused in), then h_prev's (unless the state is zero).
// N units per block, Step rows per tile.
template <int N, int Step, class Tile>
void lstm_fused_fwd_run(const LstmFusedFwd& s, int64_t u0, int64_t u1, Tile&& tile) {
  thread_local std::vector<float> part;
  part.resize(s.B * 4 * N);
  constexpr int64_t Kc = 128;  // a chunk's panel: 64 or 32 KiB
  float* p = part.data();
  struct Src {
    const float* a;
    int64_t K;
    const float* w;
  };
  for (int64_t i = u0; i < u1; ++i) {
    const int64_t u = s.backwards ? u1 - 1 - (i - u0) : i;
    Src src[2];
    int ns = 0;
    if (s.x && s.I > 0) src[ns++] = {s.x, s.I, s.wxp + u * s.I * 4 * N};
    if (s.h_prev) src[ns++] = {s.h_prev, s.H, s.wp + u * s.H * 4 * N};
    if (ns == 0) {  // nothing to multiply: the cell update on zeros
      for_row_tiles<Step>(s.B, [&]<int MR>(int64_t b) {
        tile.template operator()<MR>(u, b, nullptr, 0, nullptr, 0, true, true, p);
      });
      continue;
    }
    for (int si = 0; si < ns; ++si)
      for (int64_t k0 = 0; k0 < src[si].K; k0 += Kc) {
        const int64_t k1 = std::min(src[si].K, k0 + Kc);
        const bool first = si == 0 && k0 == 0, last = si == ns - 1 && k1 == src[si].K;
        const int64_t lda = src[si].K;
        for_row_tiles<Step>(s.B, [&]<int MR>(int64_t b) {
          tile.template operator()<MR>(u, b, src[si].a + b * lda + k0, lda, src[si].w + k0 * 4 * N, k1 - k0, first,
                                       last, p + b * 4 * N);
        });
      }
  }
}

void lstm_fused_fwd_impl(const LstmFusedFwd& s, int64_t u0, int64_t u1) {
  lstm_fused_fwd_run<8, 3>(s, u0, u1, [&]<int MR>(int64_t u, int64_t b, const float* a, int64_t lda, const float* w,
                                                   int64_t kn, bool first, bool last, float* part) {
    lstm_fused_fwd_tile<8, MR>(s, u, b, a, lda, w, kn, first, last, part);
  });
}

#if defined(__AVX512F__)
void lstm_fused_fwd_impl16(const LstmFusedFwd& s, int64_t u0, int64_t u1) {
  lstm_fused_fwd_run<16, 6>(s, u0, u1, [&]<int MR>(int64_t u, int64_t b, const float* a, int64_t lda,
                                                    const float* w, int64_t kn, bool first, bool last, float* part) {
    lstm_fused_fwd_tile<16, MR>(s, u, b, a, lda, w, kn, first, last, part);
  });
}
#endif

void lstm_fused_bwd_impl(const LstmFusedBwd& s, int64_t u0, int64_t u1) {
  thread_local std::vector<float> part;
  part.resize(s.B * 16);
  constexpr int64_t Kc = 256;
  const int64_t K = s.dg_next ? 4 * s.H : 0;
  float* p = part.data();
  for (int64_t i = u0; i < u1; ++i)
    for (int64_t k0 = 0, u = s.backwards ? u1 - 1 - (i - u0) : i; k0 == 0 || k0 < K; k0 += Kc) {
      const int64_t k1 = std::min(K, k0 + Kc);
      for_row_tiles<6>(s.B, [&]<int MR>(int64_t b) {
        lstm_fused_bwd_tile<MR>(s, K ? s.dg_next + b * K : nullptr, u, b, k0, k1, p + b * 16,
                                k1 == K);
      });
    }
}

#endif


// ---- the table's entries: the vector step (which does whole blocks of 8 units and returns where it
// stopped) for float32 where the ISA has 8 lanes and the struct has one, then the scalar one -------
template <class T, template <class> class S>
void step_entry(const S<T>& s, int64_t j0, int64_t j1) {
#if defined(__AVX2__)
  if constexpr (std::is_same_v<T, float> && requires { vec_step(s, j0, j1); })
    j0 = vec_step(s, j0, j1);  // whole blocks of 8 units; the rest below
#endif
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t j = j0; j < j1; ++j) unit_step(s, b, j);
}

template <class T>
RnnStepFns<T> step_fns() {
  return {&step_entry<T, LstmStep>, &step_entry<T, LstmBackStep>, &step_entry<T, GruStep>,
          &step_entry<T, GruBackStep>, &step_entry<T, RnnStep>,  &step_entry<T, RnnBackStep>};
}

}  // namespace

void fill_rnn(KernelTable& t) {
  t.rnn_f32 = step_fns<float>();
  t.rnn_f64 = step_fns<double>();
#if defined(__AVX2__)
  t.lstm_fused_fwd = &lstm_fused_fwd_impl;
  t.lstm_fused_bwd = &lstm_fused_bwd_impl;
#if defined(__AVX512F__)
  t.lstm_fused_fwd = &lstm_fused_fwd_impl16;
  t.lstm_fused_units = 16;
#endif
#endif
}

}  // namespace kiln::cpu::KILN_ISA
