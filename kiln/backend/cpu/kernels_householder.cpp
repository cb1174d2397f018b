// Householder QR of small float32 matrices (compiled once per ISA; kernel table entries geqr2_f32,
// org2r_f32 and orm2r_t_f32, run by linalg.qr's and linalg.lstsq's kernels in linalg_decomp.cpp
// for sizes where LAPACK's unblocked code is slower than it need be). They are LAPACK's sgeqr2,
// sorg2r and sorm2r, reflector by reflector with LAPACK's conventions (slarfg: beta = -sign(alpha)
// ||(alpha, x)||, tau = (beta - alpha) / beta, v = x / (alpha - beta), tau = 0 when x is zero; a
// reflector with tau = 0 is not applied), so Q and R have LAPACK's signs. What differs is the
// arithmetic: each reflector is applied to a column in one pass over it (its dot with v, then the
// update, while the column sits in L1) instead of a matrix-vector product and a rank-1 update
// through BLAS calls per column, and the norms are summed in double (no overflow or underflow for
// any float32 input, so slarfg's rescaling loop is not needed). Results agree with LAPACK's to
// rounding, not bit for bit. The base table has none (the kernels then call LAPACK).
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "kiln/backend/cpu/isa_util.h"

namespace kiln::cpu::KILN_ISA {
namespace {

#if defined(__AVX512F__) || defined(__AVX2__)
#if defined(__AVX512F__)
// 16 float lanes; r: how many of the lanes from p exist (the rest read as 0 and are not stored).
struct V {
  static constexpr int N = 16;
  __m512 v;
  static __mmask16 mask(int64_t r) { return r >= 16 ? __mmask16(0xffff) : __mmask16((1u << r) - 1); }
  static V zero() { return {_mm512_setzero_ps()}; }
  static V set1(float x) { return {_mm512_set1_ps(x)}; }
  static V load(const float* p, int64_t r) { return {_mm512_maskz_loadu_ps(mask(r), p)}; }
  void store(float* p, int64_t r) const { _mm512_mask_storeu_ps(p, mask(r), v); }
  friend V fma(V a, V b, V c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  friend V operator+(V a, V b) { return {_mm512_add_ps(a.v, b.v)}; }
  friend V operator*(V a, V b) { return {_mm512_mul_ps(a.v, b.v)}; }
  float sum() const { return _mm512_reduce_add_ps(v); }
};
// The sum of squares of n floats, in double.
inline double sum_squares(const float* x, int64_t n) {
  __m512d acc = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 8) {
    const __mmask8 m = n - i >= 8 ? __mmask8(0xff) : __mmask8((1u << (n - i)) - 1);
    const __m512d d = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, x + i));
    acc = _mm512_fmadd_pd(d, d, acc);
  }
  return _mm512_reduce_add_pd(acc);
}
#else
struct V {
  static constexpr int N = 8;
  __m256 v;
  static __m256i mask(int64_t r) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(r < 8 ? r : 8)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V zero() { return {_mm256_setzero_ps()}; }
  static V set1(float x) { return {_mm256_set1_ps(x)}; }
  static V load(const float* p, int64_t r) { return {r >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask(r))}; }
  void store(float* p, int64_t r) const {
    if (r >= 8) _mm256_storeu_ps(p, v);
    else _mm256_maskstore_ps(p, mask(r), v);
  }
  friend V fma(V a, V b, V c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
  friend V operator+(V a, V b) { return {_mm256_add_ps(a.v, b.v)}; }
  friend V operator*(V a, V b) { return {_mm256_mul_ps(a.v, b.v)}; }
  float sum() const {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
};
inline double sum_squares(const float* x, int64_t n) {
  __m256d acc = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d d = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
    acc = _mm256_fmadd_pd(d, d, acc);
  }
  alignas(32) double t[4];
  _mm256_store_pd(t, acc);
  double s = (t[0] + t[1]) + (t[2] + t[3]);
  for (; i < n; ++i) s += double(x[i]) * double(x[i]);
  return s;
}
#endif

// a (L x C, column-major, leading dimension lda) := (I - tau v v^T) a, a column at a time: d = v . a_c,
// then a_c -= (tau d) v, two columns side by side.
void apply_left(int64_t L, int64_t C, const float* v, float tau, float* a, int64_t lda) {
  constexpr int N = V::N;
  int64_t c = 0;
  for (; c + 2 <= C; c += 2) {
    float *x = a + c * lda, *y = x + lda;
    V dx = V::zero(), dy = V::zero();
    for (int64_t i = 0; i < L; i += N) {
      const V vi = V::load(v + i, L - i);
      dx = fma(vi, V::load(x + i, L - i), dx);
      dy = fma(vi, V::load(y + i, L - i), dy);
    }
    const V sx = V::set1(-tau * dx.sum()), sy = V::set1(-tau * dy.sum());
    for (int64_t i = 0; i < L; i += N) {
      const V vi = V::load(v + i, L - i);
      fma(sx, vi, V::load(x + i, L - i)).store(x + i, L - i);
      fma(sy, vi, V::load(y + i, L - i)).store(y + i, L - i);
    }
  }
  for (; c < C; ++c) {
    float* x = a + c * lda;
    V d = V::zero();
    for (int64_t i = 0; i < L; i += N) d = fma(V::load(v + i, L - i), V::load(x + i, L - i), d);
    const V s = V::set1(-tau * d.sum());
    for (int64_t i = 0; i < L; i += N) fma(s, V::load(v + i, L - i), V::load(x + i, L - i)).store(x + i, L - i);
  }
}

// slarfg on (alpha, x[0 .. n-1)): alpha := beta, x := v's tail; returns tau.
float larfg(int64_t n, float& alpha, float* x) {
  if (n <= 1) return 0.0f;
  const double xn2 = sum_squares(x, n - 1);
  if (xn2 == 0.0) return 0.0f;
  const double al = alpha, beta = -std::copysign(std::sqrt(al * al + xn2), al);
  const double scal = 1.0 / (al - beta);
  const float fs = static_cast<float>(scal);
  if (std::fabs(fs) >= std::numeric_limits<float>::min() && std::fabs(fs) <= std::numeric_limits<float>::max()) {
    const V s = V::set1(fs);
    for (int64_t i = 0; i < n - 1; i += V::N) (V::load(x + i, n - 1 - i) * s).store(x + i, n - 1 - i);
  } else {  // beta tiny (or huge): the scale only exists in double
    for (int64_t i = 0; i < n - 1; ++i) x[i] = static_cast<float>(x[i] * scal);
  }
  alpha = static_cast<float>(beta);
  return static_cast<float>((beta - al) / beta);
}

// sgeqr2: a (m x n, column-major) := R above its diagonal, the reflectors' tails below; tau: min(m, n).
void geqr2(int64_t m, int64_t n, float* a, int64_t lda, float* tau) {
  const int64_t k = m < n ? m : n;
  for (int64_t i = 0; i < k; ++i) {
    float* d = a + i + i * lda;
    tau[i] = larfg(m - i, *d, d + 1);
    if (i + 1 < n && tau[i] != 0.0f) {
      const float aii = *d;
      *d = 1.0f;
      apply_left(m - i, n - i - 1, d, tau[i], d + lda, lda);
      *d = aii;
    }
  }
}

// sorg2r: a (m x n, column-major, the first k columns holding geqr2's reflectors) := the first n
// columns of Q = H(0) ... H(k-1).
void org2r(int64_t m, int64_t n, int64_t k, float* a, int64_t lda, const float* tau) {
  for (int64_t j = k; j < n; ++j) {
    for (int64_t l = 0; l < m; ++l) a[l + j * lda] = 0.0f;
    if (j < m) a[j + j * lda] = 1.0f;
  }
  for (int64_t i = k - 1; i >= 0; --i) {
    float* d = a + i + i * lda;
    if (i + 1 < n) {
      *d = 1.0f;
      if (tau[i] != 0.0f) apply_left(m - i, n - i - 1, d, tau[i], d + lda, lda);
    }
    for (int64_t l = 1; l < m - i; ++l) d[l] *= -tau[i];
    *d = 1.0f - tau[i];
    for (int64_t l = 0; l < i; ++l) a[l + i * lda] = 0.0f;
  }
}

// sorm2r ('L', 'T'): c (m x nc, column-major) := H(k-1) ... H(0) c.
void orm2r_t(int64_t m, int64_t nc, int64_t k, float* a, int64_t lda, const float* tau, float* c, int64_t ldc) {
  for (int64_t i = 0; i < k; ++i) {
    if (tau[i] == 0.0f) continue;
    float* d = a + i + i * lda;
    const float aii = *d;
    *d = 1.0f;
    apply_left(m - i, nc, d, tau[i], c + i, ldc);
    *d = aii;
  }
}
#endif

}  // namespace

void fill_householder(KernelTable& t) {
#if defined(__AVX512F__) || defined(__AVX2__)
  t.geqr2_f32 = &geqr2;
  t.org2r_f32 = &org2r;
  t.orm2r_t_f32 = &orm2r_t;
#else
  (void)t;
#endif
}

}  // namespace kiln::cpu::KILN_ISA
