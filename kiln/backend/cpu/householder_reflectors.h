// The reflector kernels of kernels_householder.cpp (included by it only; compiled once per ISA):
// the vector type of one register, column norms, xlarfg and the one-pass reflector application,
// real and complex QR (xgeqr2, xorg2r / xung2r, xorm2r / xunm2r) and the tridiagonal reductions
// (xsytd2 / xhetd2, lower). The conventions and what differs from LAPACK: kernels_householder.cpp.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>

#include "kiln/backend/cpu/isa_util.h"

namespace kiln::cpu::KILN_ISA {
namespace {

#if defined(__AVX512F__) || defined(__AVX2__)
// One register of T; r: how many of the lanes from p exist (the rest read as 0 and are not stored).
template <class T>
struct V;
#if defined(__AVX512F__)
template <>
struct V<float> {
  static constexpr int N = 16;
  __m512 v;
  static __mmask16 mask(int64_t r) { return r >= 16 ? __mmask16(0xffff) : __mmask16((1u << r) - 1); }
  static V zero() { return {_mm512_setzero_ps()}; }
  static V set1(float x) { return {_mm512_set1_ps(x)}; }
  static V load(const float* p, int64_t r) { return {_mm512_maskz_loadu_ps(mask(r), p)}; }
  void store(float* p, int64_t r) const { _mm512_mask_storeu_ps(p, mask(r), v); }
  friend V fma(V a, V b, V c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  friend V operator*(V a, V b) { return {_mm512_mul_ps(a.v, b.v)}; }
  friend V fnma(V a, V b, V c) { return {_mm512_fnmadd_ps(a.v, b.v, c.v)}; }  // c - a b
  V swap() const { return {_mm512_permute_ps(v, 0xB1)}; }  // (re, im) pairs -> (im, re)
  static V set2(float even, float odd) { return {_mm512_setr4_ps(even, odd, even, odd)}; }
  float sum() const { return _mm512_reduce_add_ps(v); }
};
template <>
struct V<double> {
  static constexpr int N = 8;
  __m512d v;
  static __mmask8 mask(int64_t r) { return r >= 8 ? __mmask8(0xff) : __mmask8((1u << r) - 1); }
  static V zero() { return {_mm512_setzero_pd()}; }
  static V set1(double x) { return {_mm512_set1_pd(x)}; }
  static V load(const double* p, int64_t r) { return {_mm512_maskz_loadu_pd(mask(r), p)}; }
  void store(double* p, int64_t r) const { _mm512_mask_storeu_pd(p, mask(r), v); }
  friend V fma(V a, V b, V c) { return {_mm512_fmadd_pd(a.v, b.v, c.v)}; }
  friend V operator*(V a, V b) { return {_mm512_mul_pd(a.v, b.v)}; }
  friend V fnma(V a, V b, V c) { return {_mm512_fnmadd_pd(a.v, b.v, c.v)}; }
  V swap() const { return {_mm512_permute_pd(v, 0x55)}; }
  static V set2(double even, double odd) { return {_mm512_setr_pd(even, odd, even, odd, even, odd, even, odd)}; }
  double sum() const { return _mm512_reduce_add_pd(v); }
};
#else
template <>
struct V<float> {
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
  friend V operator*(V a, V b) { return {_mm256_mul_ps(a.v, b.v)}; }
  friend V fnma(V a, V b, V c) { return {_mm256_fnmadd_ps(a.v, b.v, c.v)}; }
  V swap() const { return {_mm256_permute_ps(v, 0xB1)}; }
  static V set2(float even, float odd) { return {_mm256_setr_ps(even, odd, even, odd, even, odd, even, odd)}; }
  float sum() const {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
};
template <>
struct V<double> {
  static constexpr int N = 4;
  __m256d v;
  static __m256i mask(int64_t r) {
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(r < 4 ? r : 4), _mm256_setr_epi64x(0, 1, 2, 3));
  }
  static V zero() { return {_mm256_setzero_pd()}; }
  static V set1(double x) { return {_mm256_set1_pd(x)}; }
  static V load(const double* p, int64_t r) { return {r >= 4 ? _mm256_loadu_pd(p) : _mm256_maskload_pd(p, mask(r))}; }
  void store(double* p, int64_t r) const {
    if (r >= 4) _mm256_storeu_pd(p, v);
    else _mm256_maskstore_pd(p, mask(r), v);
  }
  friend V fma(V a, V b, V c) { return {_mm256_fmadd_pd(a.v, b.v, c.v)}; }
  friend V operator*(V a, V b) { return {_mm256_mul_pd(a.v, b.v)}; }
  friend V fnma(V a, V b, V c) { return {_mm256_fnmadd_pd(a.v, b.v, c.v)}; }
  V swap() const { return {_mm256_permute_pd(v, 0x5)}; }
  static V set2(double even, double odd) { return {_mm256_setr_pd(even, odd, even, odd)}; }
  double sum() const {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
  }
};
#endif

// ||x|| of n elements, in double. float32: the squares summed in double. float64: the same where the
// largest |x_i| lies in [2^-450, 2^450] (no square over- or underflows to matter), else the elements
// scaled by a power of two first.
inline double norm2(const float* x, int64_t n) {
#if defined(__AVX512F__)
  __m512d acc = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 8) {
    const __mmask8 m = n - i >= 8 ? __mmask8(0xff) : __mmask8((1u << (n - i)) - 1);
    const __m512d d = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, x + i));
    acc = _mm512_fmadd_pd(d, d, acc);
  }
  return std::sqrt(_mm512_reduce_add_pd(acc));
#else
  __m256d acc = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d d = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
    acc = _mm256_fmadd_pd(d, d, acc);
  }
  double s = V<double>{acc}.sum();
  for (; i < n; ++i) s += double(x[i]) * double(x[i]);
  return std::sqrt(s);
#endif
}
inline double norm2(const double* x, int64_t n) {
  using W = V<double>;
  W acc = W::zero();
  double big = 0;
  for (int64_t i = 0; i < n; ++i) big = std::max(big, std::fabs(x[i]));
  if (big == 0 || std::isinf(big) || (big >= 0x1p-450 && big <= 0x1p450)) {  // (NaN: max skips it; the sum has it)
    for (int64_t i = 0; i < n; i += W::N) {
      const W v = W::load(x + i, n - i);
      acc = fma(v, v, acc);
    }
    return std::sqrt(acc.sum());
  }
  const int e = std::ilogb(big), h = -e / 2;  // 2^-e in two factors (2^1074 is no double)
  const W s1 = W::set1(std::ldexp(1.0, h)), s2 = W::set1(std::ldexp(1.0, -e - h));
  for (int64_t i = 0; i < n; i += W::N) {
    const W v = W::load(x + i, n - i) * s1 * s2;
    acc = fma(v, v, acc);
  }
  return std::ldexp(std::sqrt(acc.sum()), e);
}

// a (L x C, column-major, leading dimension lda) := (I - tau v v^T) a, a column at a time: d = v . a_c,
// then a_c -= (tau d) v, two columns side by side.
template <class T>
void apply_left(int64_t L, int64_t C, const T* v, T tau, T* a, int64_t lda) {
  using W = V<T>;
  constexpr int N = W::N;
  int64_t c = 0;
  for (; c + 2 <= C; c += 2) {
    T *x = a + c * lda, *y = x + lda;
    W dx = W::zero(), dy = W::zero();
    for (int64_t i = 0; i < L; i += N) {
      const W vi = W::load(v + i, L - i);
      dx = fma(vi, W::load(x + i, L - i), dx);
      dy = fma(vi, W::load(y + i, L - i), dy);
    }
    const W sx = W::set1(-tau * dx.sum()), sy = W::set1(-tau * dy.sum());
    for (int64_t i = 0; i < L; i += N) {
      const W vi = W::load(v + i, L - i);
      fma(sx, vi, W::load(x + i, L - i)).store(x + i, L - i);
      fma(sy, vi, W::load(y + i, L - i)).store(y + i, L - i);
    }
  }
  for (; c < C; ++c) {
    T* x = a + c * lda;
    W d = W::zero();
    for (int64_t i = 0; i < L; i += N) d = fma(W::load(v + i, L - i), W::load(x + i, L - i), d);
    const W s = W::set1(-tau * d.sum());
    for (int64_t i = 0; i < L; i += N) fma(s, W::load(v + i, L - i), W::load(x + i, L - i)).store(x + i, L - i);
  }
}

// xlarfg's rescaling threshold (safmin / eps for float64): below it beta, alpha - beta and v would
// keep only the digits of the subnormal grid, and H would be far from orthogonal; alpha and x are
// then scaled by a power of two first (exact), as xlarfg does, and beta scaled back.
constexpr double kSafmin = 0x1p-969;

// xlarfg on (alpha, x[0 .. n-1)): alpha := beta, x := v's tail; returns tau.
template <class T>
T larfg(int64_t n, T& alpha, T* x) {
  using W = V<T>;
  if (n <= 1) return T(0);
  double xnorm = norm2(x, n - 1);
  if (xnorm == 0.0) return T(0);
  double al = alpha, beta = -std::copysign(std::hypot(al, xnorm), al);
  int k = 0;
  if (std::fabs(beta) < kSafmin) {  // (float64 only: float32's arithmetic here is double's)
    k = -std::ilogb(beta);
    for (int64_t i = 0; i < n - 1; ++i) x[i] = static_cast<T>(std::ldexp(double(x[i]), k));
    al = std::ldexp(al, k), xnorm = norm2(x, n - 1);
    beta = -std::copysign(std::hypot(al, xnorm), al);
  }
  const double d = al - beta, scal = 1.0 / d;
  const T ts = static_cast<T>(scal);
  if (std::fabs(ts) >= std::numeric_limits<T>::min() && std::fabs(ts) <= std::numeric_limits<T>::max()) {
    const W s = W::set1(ts);
    for (int64_t i = 0; i < n - 1; i += W::N) (W::load(x + i, n - 1 - i) * s).store(x + i, n - 1 - i);
  } else {  // beta tiny (or huge): its reciprocal is not a T
    for (int64_t i = 0; i < n - 1; ++i) x[i] = static_cast<T>(x[i] / d);
  }
  alpha = static_cast<T>(std::ldexp(beta, -k));
  return static_cast<T>((beta - al) / beta);
}

// xgeqr2: a (m x n, column-major) := R above its diagonal, the reflectors' tails below; tau: min(m, n).
template <class T>
void geqr2(int64_t m, int64_t n, T* a, int64_t lda, T* tau) {
  const int64_t k = m < n ? m : n;
  for (int64_t i = 0; i < k; ++i) {
    T* d = a + i + i * lda;
    tau[i] = larfg(m - i, *d, d + 1);
    if (i + 1 < n && tau[i] != T(0)) {
      const T aii = *d;
      *d = T(1);
      apply_left(m - i, n - i - 1, d, tau[i], d + lda, lda);
      *d = aii;
    }
  }
}

// xorg2r: a (m x n, column-major, the first k columns holding geqr2's reflectors) := the first n
// columns of Q = H(0) ... H(k-1).
template <class T>
void org2r(int64_t m, int64_t n, int64_t k, T* a, int64_t lda, const T* tau) {
  for (int64_t j = k; j < n; ++j) {
    for (int64_t l = 0; l < m; ++l) a[l + j * lda] = T(0);
    if (j < m) a[j + j * lda] = T(1);
  }
  for (int64_t i = k - 1; i >= 0; --i) {
    T* d = a + i + i * lda;
    if (i + 1 < n) {
      *d = T(1);
      if (tau[i] != T(0)) apply_left(m - i, n - i - 1, d, tau[i], d + lda, lda);
    }
    for (int64_t l = 1; l < m - i; ++l) d[l] *= -tau[i];
    *d = T(1) - tau[i];
    for (int64_t l = 0; l < i; ++l) a[l + i * lda] = T(0);
  }
}

// xorm2r ('L', 'T'): c (m x nc, column-major) := H(k-1) ... H(0) c.
template <class T>
void orm2r_t(int64_t m, int64_t nc, int64_t k, T* a, int64_t lda, const T* tau, T* c, int64_t ldc) {
  for (int64_t i = 0; i < k; ++i) {
    if (tau[i] == T(0)) continue;
    T* d = a + i + i * lda;
    const T aii = *d;
    *d = T(1);
    apply_left(m - i, nc, d, tau[i], c + i, ldc);
    *d = aii;
  }
}

// xorm2r ('L', 'N'): c (m x nc) := Q c = H(0) ... H(k-1) c.
template <class T>
void orm2r_n(int64_t m, int64_t nc, int64_t k, T* a, int64_t lda, const T* tau, T* c, int64_t ldc) {
  for (int64_t i = k - 1; i >= 0; --i) {
    if (tau[i] == T(0)) continue;
    T* d = a + i + i * lda;
    const T aii = *d;
    *d = T(1);
    apply_left(m - i, nc, d, tau[i], c + i, ldc);
    *d = aii;
  }
}

// ---- tridiagonal reduction (xsytd2 / xhetd2, lower) for eigh ---------------------------------------------------
// w (L) := a (L x L, column-major) v, the columns in turn (w += a_j v_j) for blocks of up to 4
// registers of rows.
template <class T, int K>
void matvec_rows(int64_t rl, int64_t L, const T* a, int64_t lda, const T* v, T* w) {
  using W = V<T>;
  constexpr int N = W::N;
  W s[K];
  for (int k = 0; k < K; ++k) s[k] = W::zero();
  for (int64_t j = 0; j < L; ++j) {
    const T* c = a + j * lda;
    const W vj = W::set1(v[j]);
    for (int k = 0; k < K; ++k) s[k] = fma(W::load(c + k * N, rl - k * N), vj, s[k]);
  }
  for (int k = 0; k < K; ++k) s[k].store(w + k * N, rl - k * N);
}
template <class T>
void matvec(int64_t L, const T* a, int64_t lda, const T* v, T* w) {
  constexpr int N = V<T>::N;
  for (int64_t r = 0; r < L; r += 4 * N) {
    const int64_t rl = L - r;
    if (rl > 3 * N) matvec_rows<T, 4>(rl, L, a + r, lda, v, w + r);
    else if (rl > 2 * N) matvec_rows<T, 3>(rl, L, a + r, lda, v, w + r);
    else if (rl > N) matvec_rows<T, 2>(rl, L, a + r, lda, v, w + r);
    else matvec_rows<T, 1>(rl, L, a + r, lda, v, w + r);
  }
}

// xsytd2 ('L') on a full symmetric matrix a (n x n, column-major; both triangles are read and kept
// symmetric): Q^T a Q = T, tridiagonal with diagonal d and off-diagonal e; the reflectors H(i) = I -
// tau v v^T below the subdiagonal (v(0) = 1 implied), as LAPACK's. Step i: w = tau A22 v, w -= (tau
// / 2) (w . v) v, A22 -= v w^T + w v^T, on the whole trailing block.
template <class T>
void sytd2(int64_t n, T* a, int64_t lda, T* d, T* e, T* tau) {
  using W = V<T>;
  constexpr int N = W::N;
  if (n <= 0) return;
  T* w = new T[n];
  for (int64_t i = 0; i + 1 < n; ++i) {
    const int64_t L = n - i - 1;
    T* v = a + (i + 1) + i * lda;
    const T taui = larfg(L, v[0], v + 1);
    e[i] = v[0];
    if (taui != T(0)) {
      v[0] = T(1);
      T* a22 = a + (i + 1) + (i + 1) * lda;
      matvec(L, a22, lda, v, w);
      const W tv = W::set1(taui);
      W dot = W::zero();
      for (int64_t k = 0; k < L; k += N) {
        const W x = W::load(w + k, L - k) * tv;
        x.store(w + k, L - k);
        dot = fma(x, W::load(v + k, L - k), dot);
      }
      const W al = W::set1(T(-0.5) * taui * dot.sum());
      for (int64_t k = 0; k < L; k += N) fma(al, W::load(v + k, L - k), W::load(w + k, L - k)).store(w + k, L - k);
      for (int64_t j = 0; j < L; ++j) {
        T* c = a22 + j * lda;
        const W wj = W::set1(w[j]), vj = W::set1(v[j]);
        for (int64_t k = 0; k < L; k += N)
          fnma(W::load(w + k, L - k), vj, fnma(W::load(v + k, L - k), wj, W::load(c + k, L - k))).store(c + k, L - k);
      }
      v[0] = e[i];
    }
    d[i] = a[i + i * lda];
    tau[i] = taui;
  }
  d[n - 1] = a[(n - 1) + (n - 1) * lda];
  delete[] w;
}

// |x|: float32's and complex64's through double; float64's sqrt(re^2 + im^2) where that neither over-
// nor underflows, else hypot (glibc's hypot is exact and slow).
inline float abs_of(float x) { return std::fabs(x); }
inline double abs_of(double x) { return std::fabs(x); }
inline float abs_of(std::complex<float> x) {
  return float(std::sqrt(double(x.real()) * double(x.real()) + double(x.imag()) * double(x.imag())));
}
inline double abs_of(std::complex<double> x) {
  const double r = std::fabs(x.real()), i = std::fabs(x.imag()), big = std::max(r, i);
  if (big < 0x1p500 && big > 0x1p-500) return std::sqrt(r * r + i * i);
  return std::hypot(r, i);
}

// ---- complex matrices (interleaved (re, im) pairs of R): xlarfg, xgeqr2, xung2r, xunm2r ('L', 'C') --------
template <class R>
using Cx = std::complex<R>;

// x (n complex) := r x.
template <class R>
void scale_c(int64_t n, Cx<R> r, Cx<R>* x) {
  using W = V<R>;
  R* p = reinterpret_cast<R*>(x);
  const W rr = W::set1(r.real()), ri = W::set2(-r.imag(), r.imag());
  for (int64_t i = 0; i < 2 * n; i += W::N) {
    const W v = W::load(p + i, 2 * n - i);
    fma(v.swap(), ri, v * rr).store(p + i, 2 * n - i);
  }
}

// a (L x C) := (I - tau v v^H) a, a column at a time: d = v^H a_c, then a_c -= (tau d) v. The
// products of (re, im) pairs: v . a_c summed lane-wise gives d's real part; v . swap(a_c), even
// lanes minus odd, its imaginary part.
template <class R>
void apply_left_c(int64_t L, int64_t C, const Cx<R>* v, Cx<R> tau, Cx<R>* a, int64_t lda) {
  using W = V<R>;
  constexpr int N = W::N;
  const R* vp = reinterpret_cast<const R*>(v);
  const int64_t L2 = 2 * L;
  const W alt = W::set2(R(1), R(-1));
  for (int64_t c = 0; c < C; ++c) {
    R* x = reinterpret_cast<R*>(a + c * lda);
    W p = W::zero(), q = W::zero();
    for (int64_t i = 0; i < L2; i += N) {
      const W vi = W::load(vp + i, L2 - i), xi = W::load(x + i, L2 - i);
      p = fma(vi, xi, p);
      q = fma(vi, xi.swap(), q);
    }
    const Cx<R> s = tau * Cx<R>(p.sum(), (q * alt).sum());
    const W sr = W::set1(s.real()), si = W::set2(-s.imag(), s.imag());
    for (int64_t i = 0; i < L2; i += N) {
      const W vi = W::load(vp + i, L2 - i);
      fnma(vi.swap(), si, fnma(vi, sr, W::load(x + i, L2 - i))).store(x + i, L2 - i);
    }
  }
}

// xlarfg (complex) on (alpha, x[0 .. n-1)): beta = -sign(Re alpha) ||(alpha, x)||, tau = ((beta -
// Re alpha) / beta, -Im alpha / beta), x := x / (alpha - beta), alpha := beta; returns tau (0 when x
// is zero and alpha real).
template <class R>
Cx<R> larfg_c(int64_t n, Cx<R>& alpha, Cx<R>* x) {
  if (n <= 0) return Cx<R>(0);
  R* xr = reinterpret_cast<R*>(x);
  double xnorm = n > 1 ? norm2(xr, 2 * (n - 1)) : 0.0;
  double ar = alpha.real(), ai = alpha.imag();
  if (xnorm == 0.0 && ai == 0.0) return Cx<R>(0);
  double beta = -std::copysign(std::hypot(std::hypot(ar, ai), xnorm), ar);
  int k = 0;
  if (std::fabs(beta) < kSafmin) {  // (complex128 only)
    k = -std::ilogb(beta);
    for (int64_t i = 0; i < 2 * (n - 1); ++i) xr[i] = static_cast<R>(std::ldexp(double(xr[i]), k));
    ar = std::ldexp(ar, k), ai = std::ldexp(ai, k), xnorm = n > 1 ? norm2(xr, 2 * (n - 1)) : 0.0;
    beta = -std::copysign(std::hypot(std::hypot(ar, ai), xnorm), ar);
  }
  const std::complex<double> d(ar - beta, ai), r = 1.0 / d;
  const Cx<R> rt(static_cast<R>(r.real()), static_cast<R>(r.imag()));
  if (std::isfinite(std::abs(rt)) && std::abs(rt) >= std::numeric_limits<R>::min()) {
    scale_c(n - 1, rt, x);
  } else {  // beta tiny (or huge): its reciprocal is not a T
    for (int64_t i = 0; i < n - 1; ++i) {
      const std::complex<double> y = std::complex<double>(x[i].real(), x[i].imag()) / d;
      x[i] = Cx<R>(static_cast<R>(y.real()), static_cast<R>(y.imag()));
    }
  }
  alpha = Cx<R>(static_cast<R>(std::ldexp(beta, -k)), R(0));
  return Cx<R>(static_cast<R>((beta - ar) / beta), static_cast<R>(-ai / beta));
}

// xgeqr2: H(i)^H applied to the trailing columns (tau conjugated), as LAPACK.
template <class R>
void geqr2_c(int64_t m, int64_t n, Cx<R>* a, int64_t lda, Cx<R>* tau) {
  const int64_t k = m < n ? m : n;
  for (int64_t i = 0; i < k; ++i) {
    Cx<R>* d = a + i + i * lda;
    tau[i] = larfg_c(m - i, *d, d + 1);
    if (i + 1 < n && tau[i] != Cx<R>(0)) {
      const Cx<R> aii = *d;
      *d = Cx<R>(1);
      apply_left_c(m - i, n - i - 1, d, std::conj(tau[i]), d + lda, lda);
      *d = aii;
    }
  }
}

// xung2r: the first n columns of Q = H(0) ... H(k-1).
template <class R>
void org2r_c(int64_t m, int64_t n, int64_t k, Cx<R>* a, int64_t lda, const Cx<R>* tau) {
  for (int64_t j = k; j < n; ++j) {
    for (int64_t l = 0; l < m; ++l) a[l + j * lda] = Cx<R>(0);
    if (j < m) a[j + j * lda] = Cx<R>(1);
  }
  for (int64_t i = k - 1; i >= 0; --i) {
    Cx<R>* d = a + i + i * lda;
    if (i + 1 < n) {
      *d = Cx<R>(1);
      if (tau[i] != Cx<R>(0)) apply_left_c(m - i, n - i - 1, d, tau[i], d + lda, lda);
    }
    if (i + 1 < m) scale_c(m - i - 1, -tau[i], d + 1);
    *d = Cx<R>(1) - tau[i];
    for (int64_t l = 0; l < i; ++l) a[l + i * lda] = Cx<R>(0);
  }
}

// xunm2r ('L', 'C'): c (m x nc) := Q^H c = H(k-1)^H ... H(0)^H c.
template <class R>
void orm2r_c(int64_t m, int64_t nc, int64_t k, Cx<R>* a, int64_t lda, const Cx<R>* tau, Cx<R>* c, int64_t ldc) {
  for (int64_t i = 0; i < k; ++i) {
    if (tau[i] == Cx<R>(0)) continue;
    Cx<R>* d = a + i + i * lda;
    const Cx<R> aii = *d;
    *d = Cx<R>(1);
    apply_left_c(m - i, nc, d, std::conj(tau[i]), c + i, ldc);
    *d = aii;
  }
}

// xunm2r ('L', 'N'): c (m x nc) := Q c = H(0) ... H(k-1) c.
template <class R>
void orm2r_nc(int64_t m, int64_t nc, int64_t k, Cx<R>* a, int64_t lda, const Cx<R>* tau, Cx<R>* c, int64_t ldc) {
  for (int64_t i = k - 1; i >= 0; --i) {
    if (tau[i] == Cx<R>(0)) continue;
    Cx<R>* d = a + i + i * lda;
    const Cx<R> aii = *d;
    *d = Cx<R>(1);
    apply_left_c(m - i, nc, d, tau[i], c + i, ldc);
    *d = aii;
  }
}

// w (L) := a (L x L) v for complex a, v: w += a_j v_j, a_j v_j = a_j Re v_j + swap(a_j) (-Im v_j, Im v_j).
template <class R, int K>
void matvec_rows_c(int64_t rl, int64_t L, const Cx<R>* a, int64_t lda, const Cx<R>* v, Cx<R>* w) {
  using W = V<R>;
  constexpr int N = W::N;
  W s[K];
  for (int k = 0; k < K; ++k) s[k] = W::zero();
  for (int64_t j = 0; j < L; ++j) {
    const R* c = reinterpret_cast<const R*>(a + j * lda);
    const W vr = W::set1(v[j].real()), vi = W::set2(-v[j].imag(), v[j].imag());
    for (int k = 0; k < K; ++k) {
      const W x = W::load(c + k * N, rl - k * N);
      s[k] = fma(x.swap(), vi, fma(x, vr, s[k]));
    }
  }
  R* wr = reinterpret_cast<R*>(w);
  for (int k = 0; k < K; ++k) s[k].store(wr + k * N, rl - k * N);
}
template <class R>
void matvec_c(int64_t L, const Cx<R>* a, int64_t lda, const Cx<R>* v, Cx<R>* w) {
  constexpr int N = V<R>::N;
  const int64_t L2 = 2 * L;
  for (int64_t r = 0; r < L2; r += 4 * N) {
    const int64_t rl = L2 - r;
    const Cx<R>* ar = a + r / 2;
    if (rl > 3 * N) matvec_rows_c<R, 4>(rl, L, ar, lda, v, w + r / 2);
    else if (rl > 2 * N) matvec_rows_c<R, 3>(rl, L, ar, lda, v, w + r / 2);
    else if (rl > N) matvec_rows_c<R, 2>(rl, L, ar, lda, v, w + r / 2);
    else matvec_rows_c<R, 1>(rl, L, ar, lda, v, w + r / 2);
  }
}

// xhetd2 ('L') on a full Hermitian matrix (both triangles read and kept Hermitian, the diagonal's
// imaginary parts dropped): Q^H a Q = T, real tridiagonal (d, e), reflectors H(i) = I - tau v v^H as
// LAPACK's (the last one a 1 x 1 phase that makes e(n - 2) real). Step i: w = tau A22 v, w += (-tau /
// 2) (w^H v) v, A22 -= v w^H + w v^H.
template <class R>
void hetd2(int64_t n, Cx<R>* a, int64_t lda, R* d, R* e, Cx<R>* tau) {
  using W = V<R>;
  constexpr int N = W::N;
  if (n <= 0) return;
  for (int64_t i = 0; i < n; ++i) a[i + i * lda].imag(R(0));
  Cx<R>* w = new Cx<R>[n];
  const W alt = W::set2(R(1), R(-1));
  for (int64_t i = 0; i + 1 < n; ++i) {
    const int64_t L = n - i - 1, L2 = 2 * L;
    Cx<R>* v = a + (i + 1) + i * lda;
    const Cx<R> taui = larfg_c(L, v[0], v + 1);
    e[i] = v[0].real();
    if (taui != Cx<R>(0)) {
      v[0] = Cx<R>(1);
      Cx<R>* a22 = a + (i + 1) + (i + 1) * lda;
      matvec_c(L, a22, lda, v, w);
      scale_c(L, taui, w);
      R* wp = reinterpret_cast<R*>(w);
      const R* vp = reinterpret_cast<const R*>(v);
      W p = W::zero(), q = W::zero();  // w^H v: (sum w . v, sum of w . swap(v) even lanes minus odd)
      for (int64_t k = 0; k < L2; k += N) {
        const W wk = W::load(wp + k, L2 - k), vk = W::load(vp + k, L2 - k);
        p = fma(wk, vk, p);
        q = fma(wk, vk.swap(), q);
      }
      const Cx<R> al = R(-0.5) * taui * Cx<R>(p.sum(), (q * alt).sum());
      {
        const W ar = W::set1(al.real()), ai = W::set2(-al.imag(), al.imag());
        for (int64_t k = 0; k < L2; k += N) {
          const W vk = W::load(vp + k, L2 - k);
          fma(vk.swap(), ai, fma(vk, ar, W::load(wp + k, L2 - k))).store(wp + k, L2 - k);
        }
      }
      for (int64_t j = 0; j < L; ++j) {  // a_j -= v conj(w_j) + w conj(v_j)
        R* c = reinterpret_cast<R*>(a22 + j * lda);
        const W wr = W::set1(w[j].real()), wi = W::set2(w[j].imag(), -w[j].imag());
        const W vr = W::set1(v[j].real()), vi = W::set2(v[j].imag(), -v[j].imag());
        for (int64_t k = 0; k < L2; k += N) {
          const W vk = W::load(vp + k, L2 - k), wk = W::load(wp + k, L2 - k);
          W x = fnma(vk, wr, W::load(c + k, L2 - k));
          x = fnma(vk.swap(), wi, x);
          x = fnma(wk, vr, x);
          fnma(wk.swap(), vi, x).store(c + k, L2 - k);
        }
        a22[j + j * lda].imag(R(0));
      }
      v[0] = Cx<R>(e[i]);
    }
    d[i] = a[i + i * lda].real();
    tau[i] = taui;
  }
  d[n - 1] = a[(n - 1) + (n - 1) * lda].real();
  delete[] w;
}
#endif

}  // namespace
}  // namespace kiln::cpu::KILN_ISA
