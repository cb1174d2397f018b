// Householder kernels, real and complex (compiled once per ISA; kernel table entries householder_f32
// / _f64 / _c64 / _c128): QR of small matrices and the panels of the blocked one (linalg.qr,
// linalg_decomp.cpp), the tridiagonal reduction of small Hermitian matrices (eigh, linalg_spectral.cpp) and
// QR with column pivoting (lstsq's gelsy, linalg_lstsq.cpp), where LAPACK's unblocked code makes a
// BLAS call per column. The QR ones are
// LAPACK's xgeqr2, xorg2r / xung2r and xorm2r / xunm2r ('L', 'T' / 'C'), reflector by reflector with
// LAPACK's conventions (xlarfg: beta = -sign(Re alpha) ||(alpha, x)||, real; tau = ((beta - Re
// alpha) / beta, -Im alpha / beta); v = x / (alpha - beta); tau = 0 when x is zero and alpha real; a
// reflector with tau = 0 is not applied; geqr2 applies H^H, tau conjugated), so Q and R have
// LAPACK's signs and phases. What differs is the arithmetic: each reflector is applied to a column
// in one pass over it (its dot with v, then the update, while the column sits in L1) instead of a
// matrix-vector product and a rank-1 update through BLAS calls per column; single precision's
// reflectors are computed in double (no float32 input over- or underflows there), double's norms
// are scaled by a power of two when the largest element is far from 1, and a subnormal beta is
// rescaled once by a power of two (xlarfg loops by 1 / safmin).
// Complex elements are (re, im) pairs in the lanes of the real type's registers. Results agree with
// LAPACK's to rounding, not bit for bit. The base table has none (the kernels then call LAPACK).
// The reflector primitives are in householder_reflectors.h; this file has the pivoted QR and the
// table entries.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>

#include "kiln/backend/cpu/isa_util.h"
#include "kiln/backend/cpu/householder_reflectors.h"

namespace kiln::cpu::KILN_ISA {
namespace {

#if defined(__AVX512F__) || defined(__AVX2__)
// ---- QR with column pivoting, generic over real and complex T --------------------------------------------------
template <class T>
struct RealOf {
  using type = T;
};
template <class R>
struct RealOf<Cx<R>> {
  using type = R;
};
template <class T>
constexpr bool kIsCx = !std::is_same_v<T, typename RealOf<T>::type>;
template <class T>
T conj_of(T x) {
  if constexpr (kIsCx<T>) return std::conj(x);
  else return x;
}
template <class T>
typename RealOf<T>::type norm_of(const T* x, int64_t n) {
  using R = typename RealOf<T>::type;
  if constexpr (kIsCx<T>) return R(norm2(reinterpret_cast<const R*>(x), 2 * n));
  else return R(norm2(x, n));
}
template <class T>
T larfg_any(int64_t n, T& alpha, T* x) {
  if constexpr (kIsCx<T>) return larfg_c(n, alpha, x);
  else return larfg(n, alpha, x);
}

// sum_i conj(x_i) y_i for nc columns x (leading dimension ldx) at once, four at a time: out[c]
// (times scale where given). Complex: the lane sums of x . y give the real part; of x . swap(y), even
// lanes minus odd, the imaginary part. Whole registers first, the masked tail after.
// first (if not null): each column's first element, read while it is in L1.
template <class T>
void dotc_cols(int64_t L, int64_t nc, const T* x, int64_t ldx, const T* y, T* out, T* first = nullptr,
               const T* scale = nullptr) {
  using R = typename RealOf<T>::type;
  using W = V<R>;
  constexpr int N = W::N, E = kIsCx<T> ? 2 : 1;
  const int64_t L2 = E * L, full = L2 / N * N;
  const R* yp = reinterpret_cast<const R*>(y);
  const W alt = W::set2(R(1), R(-1));
  int64_t c = 0;
  auto finish = [&](W p, W q, T* o) {
    if constexpr (kIsCx<T>) *o = T(p.sum(), (q * alt).sum());
    else *o = p.sum(), (void)q;
    if (scale) *o *= *scale;
  };
  for (; c + 4 <= nc; c += 4) {
    const R* x0 = reinterpret_cast<const R*>(x + c * ldx);
    const R* x1 = reinterpret_cast<const R*>(x + (c + 1) * ldx);
    const R* x2 = reinterpret_cast<const R*>(x + (c + 2) * ldx);
    const R* x3 = reinterpret_cast<const R*>(x + (c + 3) * ldx);
    W p0 = W::zero(), p1 = p0, p2 = p0, p3 = p0, q0 = p0, q1 = p0, q2 = p0, q3 = p0;
    auto step = [&](int64_t i, int64_t r) {
      const W yi = W::load(yp + i, r);
      const W a0 = W::load(x0 + i, r), a1 = W::load(x1 + i, r), a2 = W::load(x2 + i, r), a3 = W::load(x3 + i, r);
      p0 = fma(a0, yi, p0), p1 = fma(a1, yi, p1), p2 = fma(a2, yi, p2), p3 = fma(a3, yi, p3);
      if constexpr (kIsCx<T>) {
        const W ys = yi.swap();
        q0 = fma(a0, ys, q0), q1 = fma(a1, ys, q1), q2 = fma(a2, ys, q2), q3 = fma(a3, ys, q3);
      }
    };
    for (int64_t i = 0; i < full; i += N) step(i, N);
    if (full < L2) step(full, L2 - full);
    finish(p0, q0, out + c), finish(p1, q1, out + c + 1), finish(p2, q2, out + c + 2), finish(p3, q3, out + c + 3);
    if (first)
      for (int l = 0; l < 4; ++l) first[c + l] = x[(c + l) * ldx];
  }
  for (; c < nc; ++c) {
    const R* x0 = reinterpret_cast<const R*>(x + c * ldx);
    W p = W::zero(), q = W::zero();
    auto step = [&](int64_t i, int64_t r) {
      const W yi = W::load(yp + i, r), a0 = W::load(x0 + i, r);
      p = fma(a0, yi, p);
      if constexpr (kIsCx<T>) q = fma(a0, yi.swap(), q);
    };
    for (int64_t i = 0; i < full; i += N) step(i, N);
    if (full < L2) step(full, L2 - full);
    finish(p, q, out + c);
    if (first) first[c] = x[c * ldx];
  }
}

// y += alpha x (n elements).
template <class T>
void axpy(int64_t n, T alpha, const T* x, T* y) {
  using R = typename RealOf<T>::type;
  using W = V<R>;
  constexpr int N = W::N;
  const R* xp = reinterpret_cast<const R*>(x);
  R* yp = reinterpret_cast<R*>(y);
  if constexpr (kIsCx<T>) {
    const W ar = W::set1(alpha.real()), ai = W::set2(-alpha.imag(), alpha.imag());
    for (int64_t i = 0; i < 2 * n; i += N) {
      const W xi = W::load(xp + i, 2 * n - i);
      fma(xi.swap(), ai, fma(xi, ar, W::load(yp + i, 2 * n - i))).store(yp + i, 2 * n - i);
    }
  } else {
    const W al = W::set1(alpha);
    for (int64_t i = 0; i < n; i += N) fma(W::load(xp + i, n - i), al, W::load(yp + i, n - i)).store(yp + i, n - i);
  }
}

// The column in [i, n) of largest partial norm, the first of equals (xgeqp3's pivot).
template <class R>
int64_t pivot_of(const R* vn1, int64_t i, int64_t n) {
  int64_t p = i;
  for (int64_t j = i + 1; j < n; ++j)
    if (vn1[j] > vn1[p]) p = j;
  return p;
}

// xlaqp2: columns 0 .. n-1 of a (all m rows; the reflectors from row offset), each step swapping
// the column of largest partial norm (the first of equals) into place, applying its reflector (H^H
// for complex) to the trailing columns and downdating their norms from the new row (recomputed where
// cancellation has eaten half the digits). jpvt, vn1, vn2: the caller's (swapped along). With sh.T
// threads: thread 0 picks the pivot and makes the reflector, each thread applies it to its share of
// the trailing columns and downdates their norms; two barriers a step.
template <class T>
void qp2(int64_t m, int64_t n, int64_t offset, T* a, int64_t lda, int64_t* jpvt, T* tau,
         typename RealOf<T>::type* vn1, typename RealOf<T>::type* vn2, const SpmdShare& sh) {
  using R = typename RealOf<T>::type;
  const R tol3z = std::sqrt(std::numeric_limits<R>::epsilon() / 2);  // sqrt(xlamch('E'))
  const int64_t k = std::min(m - offset, n);
  const bool lead = sh.t == 0;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t r = offset + i;
    T* d = a + r + i * lda;
    T aii{};
    if (lead) {
      const int64_t p = pivot_of(vn1, i, n);
      if (p != i) {
        std::swap_ranges(a + p * lda, a + p * lda + m, a + i * lda);
        std::swap(jpvt[p], jpvt[i]);
        vn1[p] = vn1[i], vn2[p] = vn2[i];
      }
      tau[i] = larfg_any(m - r, *d, d + 1);
      aii = *d;
      *d = T(1);
    }
    sh.sync();
    const int64_t c0 = sh.begin(i + 1, n), c1 = sh.end(i + 1, n);
    if (c0 < c1 && tau[i] != T(0)) {
      if constexpr (kIsCx<T>) apply_left_c(m - r, c1 - c0, d, std::conj(tau[i]), a + r + c0 * lda, lda);
      else apply_left(m - r, c1 - c0, d, tau[i], a + r + c0 * lda, lda);
    }
    for (int64_t j = c0; j < c1; ++j) {
      if (vn1[j] == R(0)) continue;
      const T* c = a + j * lda;
      R t = abs_of(c[r]) / vn1[j];
      t = std::max(R(1) - t * t, R(0));
      const R q = vn1[j] / vn2[j];
      if (t * q * q <= tol3z) {
        vn1[j] = r + 1 < m ? norm_of(c + r + 1, m - r - 1) : R(0);
        vn2[j] = vn1[j];
      } else {
        vn1[j] *= std::sqrt(t);
      }
    }
    sh.sync();
    if (lead) *d = aii;
  }
  sh.sync();
}

// xlaqps: up to nb steps of pivoted QR on columns 0 .. n-1 of a (all m rows; reflectors from row
// offset) with the trailing update deferred: F (n x nb, leading dimension ldf) collects tau A^H v
// so that the pivot column and the pivot row are brought up to date alone (A - V F^H), and the
// caller applies A -= V F^H to the rest after the block. Stops early when a partial norm needs
// recomputing (its vn2 is set to -1 for the caller, after its update). Returns the steps taken.
// The block's updated rows are kept in rows (nb x n, row-major; their old values read while F's
// column streams through the trailing columns) and stored into a once, column by column, at the end:
// a row of a is a stride-lda walk. With sh.T threads: thread 0 picks the pivot, brings its column up
// to date and makes the reflector; each thread computes F's new column, the pivot row and the norms
// for its share of the trailing columns; two barriers a step.
template <class T>
int64_t qps(int64_t m, int64_t n, int64_t offset, int64_t nb, T* a, int64_t lda, int64_t* jpvt, T* tau,
            typename RealOf<T>::type* vn1, typename RealOf<T>::type* vn2, T* f, int64_t ldf, T* work,
            const SpmdShare& sh) {
  using R = typename RealOf<T>::type;
  const R tol3z = std::sqrt(std::numeric_limits<R>::epsilon() / 2);
  const int64_t lastrk = std::min(m, n + offset);
  T* aux = work;  // A(rk:, :k)^H v
  T* rows = work + nb;
  const bool lead = sh.t == 0;
  if (lead && sh.T > 1)
    for (int i = 0; i < sh.T; ++i) sh.flags[i] = 0;
  bool marked = false;
  int64_t k = 0;
  for (; k < nb && !marked; ++k) {
    const int64_t rk = offset + k, L = m - rk;
    T* ck = a + rk + k * lda;
    T* fk = f + k * ldf;
    T* row = rows + k * n;  // row rk of a, columns k+1 ..
    T akk{};
    if (lead) {
      const int64_t p = pivot_of(vn1, k, n);
      if (p != k) {
        std::swap_ranges(a + p * lda, a + p * lda + m, a + k * lda);
        for (int64_t j = 0; j < k; ++j)
          std::swap(f[p + j * ldf], f[k + j * ldf]), std::swap(rows[j * n + p], rows[j * n + k]);
        std::swap(jpvt[p], jpvt[k]);
        vn1[p] = vn1[k], vn2[p] = vn2[k];
      }
      for (int64_t j = 0; j < k; ++j) axpy(L, -conj_of(f[k + j * ldf]), a + rk + j * lda, ck);  // A(:, k) -= A F(k, :)^H
      tau[k] = larfg_any(L, ck[0], ck + 1);
      akk = ck[0];
      ck[0] = T(1);
      for (int64_t j = 0; j <= k; ++j) fk[j] = T(0);
      if (k > 0) dotc_cols(L, k, a + rk, lda, ck, aux);
    }
    sh.sync();
    const T t = tau[k];
    const int64_t c0 = sh.begin(k + 1, n), c1 = sh.end(k + 1, n);
    if (c0 < c1)  // F(k+1:, k) = tau A(rk:, k+1:)^H v
      dotc_cols(L, c1 - c0, a + rk + c0 * lda, lda, ck, fk + c0, row + c0, &t);
    if (k > 0) {  // F(:, k) -= tau F(:, :k) A(rk:, :k)^H v (thread 0: rows 0 .. k too)
      const int64_t r0 = lead ? 0 : c0, r1 = lead ? std::max(c1, k + 1) : c1;
      for (int64_t j = 0; j < k; ++j) axpy(r1 - r0, -t * aux[j], f + r0 + j * ldf, fk + r0);
    }
    if (c0 < c1) {  // A(rk, k+1:) -= A(rk, :k+1) F(k+1:, :k+1)^H, conjugated: row^* -= F A(rk, :)^*
      if constexpr (kIsCx<T>)
        for (int64_t c = c0; c < c1; ++c) row[c] = std::conj(row[c]);
      for (int64_t j = 0; j <= k; ++j) axpy(c1 - c0, -conj_of(a[rk + j * lda]), f + c0 + j * ldf, row + c0);
      if constexpr (kIsCx<T>)
        for (int64_t c = c0; c < c1; ++c) row[c] = std::conj(row[c]);
    }
    bool mine = false;
    if (rk + 1 < lastrk) {
      for (int64_t j = c0; j < c1; ++j) {
        if (vn1[j] == R(0)) continue;
        R u = abs_of(row[j]) / vn1[j];
        u = std::max(R(0), (R(1) + u) * (R(1) - u));
        const R q = vn1[j] / vn2[j];
        if (u * q * q <= tol3z) vn2[j] = R(-1), mine = true;
        else vn1[j] *= std::sqrt(u);
      }
    }
    if (sh.T == 1) {
      marked = mine;
    } else {
      if (mine) sh.flags[sh.t] = 1;
      sh.sync();
      for (int i = 0; i < sh.T; ++i) marked = marked || sh.flags[i] != 0;
    }
    if (lead) ck[0] = akk;
  }
  for (int64_t c = std::max<int64_t>(1, sh.begin(0, n)), ce = sh.end(0, n); c < ce; ++c) {  // the rows into a
    T* col = a + offset + c * lda;
    for (int64_t j = 0; j < std::min(k, c); ++j) col[j] = rows[j * n + c];
  }
  sh.sync();
  return k;
}
#endif

}  // namespace

void fill_householder(KernelTable& t) {
#if defined(__AVX512F__) || defined(__AVX2__)
  t.householder_f32 = {&geqr2<float>, &org2r<float>, &orm2r_t<float>, &orm2r_n<float>, &sytd2<float>, &qp2<float>, &qps<float>};
  t.householder_f64 = {&geqr2<double>, &org2r<double>, &orm2r_t<double>, &orm2r_n<double>, &sytd2<double>, &qp2<double>, &qps<double>};
  t.householder_c64 = {&geqr2_c<float>, &org2r_c<float>, &orm2r_c<float>, &orm2r_nc<float>, &hetd2<float>, &qp2<Cx<float>>, &qps<Cx<float>>};
  t.householder_c128 = {&geqr2_c<double>, &org2r_c<double>, &orm2r_c<double>, &orm2r_nc<double>, &hetd2<double>, &qp2<Cx<double>>, &qps<Cx<double>>};
#else
  (void)t;
#endif
}

}  // namespace kiln::cpu::KILN_ISA
