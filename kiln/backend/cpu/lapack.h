// LAPACK glue for the CPU linear-algebra kernels: one templated name per routine over float, double,
// complex64 and complex128, calling the Fortran LAPACK that OpenBLAS (OpenMP build) exports, with
// the prototypes of LAPACKE's lapack.h (decision 25: liblapacke itself would pull in a second
// OpenBLAS through the liblapack.so.3 alternative). Matrices are column-major, as LAPACK's are.
#pragma once

#include <complex>
#include <cstdint>
#include <type_traits>

#define lapack_complex_float std::complex<float>
#define lapack_complex_double std::complex<double>
#include <lapack.h>

#include "kiln/core/dtype.h"

namespace kiln::cpu::lapack {

template <class T> struct real_of { using type = T; };
template <class T> struct real_of<std::complex<T>> { using type = T; };
template <class T> using Real = typename real_of<T>::type;
template <class T> inline constexpr bool is_cplx = !std::is_same_v<T, Real<T>>;

// A / LU factorisation with partial pivoting (getrf), in place; ipiv 1-based.
template <class T>
inline int getrf(int m, int n, T* a, int lda, int* ipiv) {
  int info = 0;
  if constexpr (std::is_same_v<T, float>) LAPACK_sgetrf(&m, &n, a, &lda, ipiv, &info);
  else if constexpr (std::is_same_v<T, double>) LAPACK_dgetrf(&m, &n, a, &lda, ipiv, &info);
  else if constexpr (std::is_same_v<T, complex64>) LAPACK_cgetrf(&m, &n, a, &lda, ipiv, &info);
  else LAPACK_zgetrf(&m, &n, a, &lda, ipiv, &info);
  return info;
}

// Solves op(A) X = B from getrf's factors; trans 'N', 'T' or 'C'.
template <class T>
inline int getrs(char trans, int n, int nrhs, const T* a, int lda, const int* ipiv, T* b, int ldb) {
  int info = 0;
  if constexpr (std::is_same_v<T, float>) LAPACK_sgetrs(&trans, &n, &nrhs, a, &lda, ipiv, b, &ldb, &info);
  else if constexpr (std::is_same_v<T, double>) LAPACK_dgetrs(&trans, &n, &nrhs, a, &lda, ipiv, b, &ldb, &info);
  else if constexpr (std::is_same_v<T, complex64>) LAPACK_cgetrs(&trans, &n, &nrhs, a, &lda, ipiv, b, &ldb, &info);
  else LAPACK_zgetrs(&trans, &n, &nrhs, a, &lda, ipiv, b, &ldb, &info);
  return info;
}

// The inverse from getrf's factors, in place; lwork == -1 asks for the workspace size in work[0].
template <class T>
inline int getri(int n, T* a, int lda, const int* ipiv, T* work, int lwork) {
  int info = 0;
  if constexpr (std::is_same_v<T, float>) LAPACK_sgetri(&n, a, &lda, ipiv, work, &lwork, &info);
  else if constexpr (std::is_same_v<T, double>) LAPACK_dgetri(&n, a, &lda, ipiv, work, &lwork, &info);
  else if constexpr (std::is_same_v<T, complex64>) LAPACK_cgetri(&n, a, &lda, ipiv, work, &lwork, &info);
  else LAPACK_zgetri(&n, a, &lda, ipiv, work, &lwork, &info);
  return info;
}

// Cholesky factorisation of the uplo ('L' / 'U') triangle, in place.
template <class T>
inline int potrf(char uplo, int n, T* a, int lda) {
  int info = 0;
  if constexpr (std::is_same_v<T, float>) LAPACK_spotrf(&uplo, &n, a, &lda, &info);
  else if constexpr (std::is_same_v<T, double>) LAPACK_dpotrf(&uplo, &n, a, &lda, &info);
  else if constexpr (std::is_same_v<T, complex64>) LAPACK_cpotrf(&uplo, &n, a, &lda, &info);
  else LAPACK_zpotrf(&uplo, &n, a, &lda, &info);
  return info;
}

// Solves A X = B from potrf's factor of A (the uplo triangle).
template <class T>
inline int potrs(char uplo, int n, int nrhs, const T* a, int lda, T* b, int ldb) {
  int info = 0;
  if constexpr (std::is_same_v<T, float>) LAPACK_spotrs(&uplo, &n, &nrhs, a, &lda, b, &ldb, &info);
  else if constexpr (std::is_same_v<T, double>) LAPACK_dpotrs(&uplo, &n, &nrhs, a, &lda, b, &ldb, &info);
  else if constexpr (std::is_same_v<T, complex64>) LAPACK_cpotrs(&uplo, &n, &nrhs, a, &lda, b, &ldb, &info);
  else LAPACK_zpotrs(&uplo, &n, &nrhs, a, &lda, b, &ldb, &info);
  return info;
}

// A^-1 from potrf's factor, in place (the uplo triangle only).
template <class T>
inline int potri(char uplo, int n, T* a, int lda) {
  int info = 0;
  if constexpr (std::is_same_v<T, float>) LAPACK_spotri(&uplo, &n, a, &lda, &info);
  else if constexpr (std::is_same_v<T, double>) LAPACK_dpotri(&uplo, &n, a, &lda, &info);
  else if constexpr (std::is_same_v<T, complex64>) LAPACK_cpotri(&uplo, &n, a, &lda, &info);
  else LAPACK_zpotri(&uplo, &n, a, &lda, &info);
  return info;
}

// The LAPACK routine for T's type: sdcz prefix.
#define KILN_LAPACK_CALL(name, ...)                                                     \
  do {                                                                                  \
    if constexpr (std::is_same_v<T, float>) LAPACK_s##name(__VA_ARGS__);               \
    else if constexpr (std::is_same_v<T, double>) LAPACK_d##name(__VA_ARGS__);         \
    else if constexpr (std::is_same_v<T, complex64>) LAPACK_c##name(__VA_ARGS__);      \
    else LAPACK_z##name(__VA_ARGS__);                                                   \
  } while (0)
// ... where the real and complex routines have different names (orgqr / ungqr).
#define KILN_LAPACK_CALL2(rname, cname, ...)                                            \
  do {                                                                                  \
    if constexpr (std::is_same_v<T, float>) LAPACK_s##rname(__VA_ARGS__);              \
    else if constexpr (std::is_same_v<T, double>) LAPACK_d##rname(__VA_ARGS__);        \
    else if constexpr (std::is_same_v<T, complex64>) LAPACK_c##cname(__VA_ARGS__);     \
    else LAPACK_z##cname(__VA_ARGS__);                                                  \
  } while (0)

// Row interchanges k1 .. k2 (1-based) of ipiv applied to the n columns of a.
template <class T>
inline void laswp(int n, T* a, int lda, int k1, int k2, const int* ipiv) {
  const int inc = 1;
  KILN_LAPACK_CALL(laswp, &n, a, &lda, &k1, &k2, ipiv, &inc);
}
// The triangular factor T of k forward, columnwise reflectors (H = I - V T V^H).
template <class T>
inline void larft(int n, int k, const T* v, int ldv, const T* tau, T* t, int ldt) {
  const char direct = 'F', storev = 'C';
  KILN_LAPACK_CALL(larft, &direct, &storev, &n, &k, v, &ldv, tau, t, &ldt);
}
// C (m x n) := H C ('N') or H^H C ('C'; 'T' for real types) for larft's block reflector, from the left.
template <class T>
inline void larfb(char trans, int m, int n, int k, const T* v, int ldv, const T* t, int ldt, T* c, int ldc, T* work,
                  int ldwork) {
  const char side = 'L', direct = 'F', storev = 'C';
  const char tr = trans == 'N' ? 'N' : (is_cplx<T> ? 'C' : 'T');
  KILN_LAPACK_CALL(larfb, &side, &tr, &direct, &storev, &m, &n, &k, v, &ldv, t, &ldt, c, &ldc, work, &ldwork);
}
// Unblocked QR and Q (xgeqr2, xorg2r / xung2r); work: n (geqr2) or n (org2r) elements.
template <class T>
inline int geqr2(int m, int n, T* a, int lda, T* tau, T* work) {
  int info = 0;
  KILN_LAPACK_CALL(geqr2, &m, &n, a, &lda, tau, work, &info);
  return info;
}
extern "C" {  // (not in LAPACKE's header)
void sorg2r_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau, float* work,
             int* info);
void dorg2r_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau, double* work,
             int* info);
void cung2r_(const int* m, const int* n, const int* k, std::complex<float>* a, const int* lda,
             const std::complex<float>* tau, std::complex<float>* work, int* info);
void zung2r_(const int* m, const int* n, const int* k, std::complex<double>* a, const int* lda,
             const std::complex<double>* tau, std::complex<double>* work, int* info);
}
template <class T>
inline int org2r(int m, int n, int k, T* a, int lda, const T* tau, T* work) {
  int info = 0;
  if constexpr (std::is_same_v<T, float>) sorg2r_(&m, &n, &k, a, &lda, tau, work, &info);
  else if constexpr (std::is_same_v<T, double>) dorg2r_(&m, &n, &k, a, &lda, tau, work, &info);
  else if constexpr (std::is_same_v<T, complex64>) cung2r_(&m, &n, &k, a, &lda, tau, work, &info);
  else zung2r_(&m, &n, &k, a, &lda, tau, work, &info);
  return info;
}
// QR: A = Q R with Q as Householder reflectors below the diagonal and in tau.
template <class T>
inline int geqrf(int m, int n, T* a, int lda, T* tau, T* work, int lwork) {
  int info = 0;
  KILN_LAPACK_CALL(geqrf, &m, &n, a, &lda, tau, work, &lwork, &info);
  return info;
}
// The first n columns of the product of k reflectors (orgqr / ungqr), in place.
template <class T>
inline int orgqr(int m, int n, int k, T* a, int lda, const T* tau, T* work, int lwork) {
  int info = 0;
  KILN_LAPACK_CALL2(orgqr, ungqr, &m, &n, &k, a, &lda, tau, work, &lwork, &info);
  return info;
}
// C := op(Q) C (side 'L') or C op(Q) ('R'), Q from k reflectors; trans 'N', or 'T' / 'C'. a is written
// and restored (xorm2r sets each reflector's leading element to one while it applies it): threads
// that share Q need their own copies.
template <class T>
inline int ormqr(char side, char trans, int m, int n, int k, T* a, int lda, const T* tau, T* c, int ldc,
                 T* work, int lwork) {
  int info = 0;
  KILN_LAPACK_CALL2(ormqr, unmqr, &side, &trans, &m, &n, &k, a, &lda, tau, c, &ldc, work, &lwork, &info);
  return info;
}
// op(A) X = B for triangular A (trans 'N', 'T' or 'C'), B := X.
template <class T>
inline int trtrs(char uplo, char trans, char diag, int n, int nrhs, const T* a, int lda, T* b, int ldb) {
  int info = 0;
  KILN_LAPACK_CALL(trtrs, &uplo, &trans, &diag, &n, &nrhs, a, &lda, b, &ldb, &info);
  return info;
}
// The upper trapezoidal m x n (m <= n) A := [T 0] Z, Z from m reflectors (xtzrzf).
template <class T>
inline int tzrzf(int m, int n, T* a, int lda, T* tau, T* work, int lwork) {
  int info = 0;
  KILN_LAPACK_CALL(tzrzf, &m, &n, a, &lda, tau, work, &lwork, &info);
  return info;
}
// C := op(Z) C (side 'L') for tzrzf's Z (k reflectors of l trailing elements); trans 'N', or 'T' / 'C'.
template <class T>
inline int ormrz(char side, char trans, int m, int n, int k, int l, const T* a, int lda, const T* tau, T* c, int ldc,
                 T* work, int lwork) {
  int info = 0;
  KILN_LAPACK_CALL2(ormrz, unmrz, &side, &trans, &m, &n, &k, &l, a, &lda, tau, c, &ldc, work, &lwork, &info);
  return info;
}
// Incremental condition estimation (xlaic1, not in LAPACKE's header): given x (j) with the estimate
// sest of the extreme (job 1: largest, 2: smallest) singular value of a j x j triangular L, the
// estimate sestpr for [L w; 0 gamma] and (s, c) with [s x; c] its vector.
extern "C" {
void slaic1_(const int* job, const int* j, const float* x, const float* sest, const float* w, const float* gamma,
             float* sestpr, float* s, float* c);
void dlaic1_(const int* job, const int* j, const double* x, const double* sest, const double* w, const double* gamma,
             double* sestpr, double* s, double* c);
void claic1_(const int* job, const int* j, const std::complex<float>* x, const float* sest,
             const std::complex<float>* w, const std::complex<float>* gamma, float* sestpr, std::complex<float>* s,
             std::complex<float>* c);
void zlaic1_(const int* job, const int* j, const std::complex<double>* x, const double* sest,
             const std::complex<double>* w, const std::complex<double>* gamma, double* sestpr,
             std::complex<double>* s, std::complex<double>* c);
}
template <class T>
inline void laic1(int job, int j, const T* x, Real<T> sest, const T* w, T gamma, Real<T>* sestpr, T* s, T* c) {
  if constexpr (std::is_same_v<T, float>) slaic1_(&job, &j, x, &sest, w, &gamma, sestpr, s, c);
  else if constexpr (std::is_same_v<T, double>) dlaic1_(&job, &j, x, &sest, w, &gamma, sestpr, s, c);
  else if constexpr (std::is_same_v<T, complex64>) claic1_(&job, &j, x, &sest, w, &gamma, sestpr, s, c);
  else zlaic1_(&job, &j, x, &sest, w, &gamma, sestpr, s, c);
}
// Eigen-decomposition of a symmetric / Hermitian matrix (divide and conquer); w ascending.
template <class T>
inline int heevd(char jobz, char uplo, int n, T* a, int lda, Real<T>* w, T* work, int lwork, Real<T>* rwork,
                 int lrwork, int* iwork, int liwork) {
  int info = 0;
  if constexpr (is_cplx<T>) KILN_LAPACK_CALL2(syevd, heevd, &jobz, &uplo, &n, a, &lda, w, work, &lwork, rwork, &lrwork, iwork, &liwork, &info);
  else KILN_LAPACK_CALL2(syevd, heevd, &jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, &info);
  (void)rwork, (void)lrwork;
  return info;
}
// Reduction of the uplo triangle of a symmetric / Hermitian matrix to real tridiagonal form Q^H A Q
// (diagonal d, off-diagonal e; the reflectors left in a and tau).
template <class T>
inline int hetrd(char uplo, int n, T* a, int lda, Real<T>* d, Real<T>* e, T* tau, T* work, int lwork) {
  int info = 0;
  KILN_LAPACK_CALL2(sytrd, hetrd, &uplo, &n, a, &lda, d, e, tau, work, &lwork, &info);
  return info;
}
// C := op(Q) C (side 'L') or C op(Q) ('R') for hetrd's Q (uplo as given to hetrd); a is written and
// restored, as ormqr's.
template <class T>
inline int unmtr(char side, char uplo, char trans, int m, int n, T* a, int lda, const T* tau, T* c, int ldc,
                 T* work, int lwork) {
  int info = 0;
  KILN_LAPACK_CALL2(ormtr, unmtr, &side, &uplo, &trans, &m, &n, a, &lda, tau, c, &ldc, work, &lwork, &info);
  return info;
}
// Eigenvalues of a real symmetric tridiagonal matrix (diagonal d, off-diagonal e), and with compz 'I'
// its eigenvectors z (divide and conquer; workspace 1 + 4n + n^2 and 3 + 5n for n > 1); d ascending.
template <class R>
inline int stedc(char compz, int n, R* d, R* e, R* z, int ldz, R* work, int lwork, int* iwork, int liwork) {
  int info = 0;
  if constexpr (std::is_same_v<R, float>) LAPACK_sstedc(&compz, &n, d, e, z, &ldz, work, &lwork, iwork, &liwork, &info);
  else LAPACK_dstedc(&compz, &n, d, e, z, &ldz, work, &lwork, iwork, &liwork, &info);
  return info;
}
// Eigenvalues only (root-free QL / QR); d ascending.
template <class R>
inline int sterf(int n, R* d, R* e) {
  int info = 0;
  if constexpr (std::is_same_v<R, float>) LAPACK_ssterf(&n, d, e, &info);
  else LAPACK_dsterf(&n, d, e, &info);
  return info;
}
// Reduction of an m x n matrix to bidiagonal form Q^H A P (upper when m >= n, else lower; diagonal
// d, off-diagonal e; Q's and P's reflectors left in a, tauq and taup).
template <class T>
inline int gebrd(int m, int n, T* a, int lda, Real<T>* d, Real<T>* e, T* tauq, T* taup, T* work, int lwork) {
  int info = 0;
  KILN_LAPACK_CALL(gebrd, &m, &n, a, &lda, d, e, tauq, taup, work, &lwork, &info);
  return info;
}
// SVD of a real n x n bidiagonal matrix (divide and conquer), compq 'I': d := the singular values,
// descending, u / vt := the singular vectors (work 3n^2 + 4n, iwork 8n).
template <class R>
inline int bdsdc(char uplo, char compq, int n, R* d, R* e, R* u, int ldu, R* vt, int ldvt, R* work, int* iwork) {
  int info = 0;
  R q = 0;
  int iq = 0;
  if constexpr (std::is_same_v<R, float>)
    LAPACK_sbdsdc(&uplo, &compq, &n, d, e, u, &ldu, vt, &ldvt, &q, &iq, work, iwork, &info);
  else LAPACK_dbdsdc(&uplo, &compq, &n, d, e, u, &ldu, vt, &ldvt, &q, &iq, work, iwork, &info);
  return info;
}
// SVD (divide and conquer): jobz 'N', 'S' or 'A'.
template <class T>
inline int gesdd(char jobz, int m, int n, T* a, int lda, Real<T>* s, T* u, int ldu, T* vt, int ldvt, T* work,
                 int lwork, Real<T>* rwork, int* iwork) {
  int info = 0;
  if constexpr (is_cplx<T>) KILN_LAPACK_CALL(gesdd, &jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, rwork, iwork, &info);
  else KILN_LAPACK_CALL(gesdd, &jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, &info);
  (void)rwork;
  return info;
}
// General eigen-decomposition, right vectors only. Real: wr, wi and LAPACK's packed real vectors;
// complex: w (in wr, as T*) and the vectors.
template <class T>
inline int geev(char jobvr, int n, T* a, int lda, T* w, Real<T>* wi, T* vr, int ldvr, T* work, int lwork,
                Real<T>* rwork) {
  int info = 0, one = 1;
  char no = 'N';
  if constexpr (is_cplx<T>) KILN_LAPACK_CALL(geev, &no, &jobvr, &n, a, &lda, w, nullptr, &one, vr, &ldvr, work, &lwork, rwork, &info);
  else KILN_LAPACK_CALL(geev, &no, &jobvr, &n, a, &lda, w, wi, nullptr, &one, vr, &ldvr, work, &lwork, &info);
  (void)rwork, (void)wi;
  return info;
}
// Least squares: gels (QR, full rank), gelsy (pivoted QR), gelsd (SVD, divide and conquer), gelss (SVD).
template <class T>
inline int gels(int m, int n, int nrhs, T* a, int lda, T* b, int ldb, T* work, int lwork) {
  int info = 0;
  char no = 'N';
  KILN_LAPACK_CALL(gels, &no, &m, &n, &nrhs, a, &lda, b, &ldb, work, &lwork, &info);
  return info;
}
template <class T>
inline int gelsy(int m, int n, int nrhs, T* a, int lda, T* b, int ldb, int* jpvt, Real<T> rcond, int* rank, T* work,
                 int lwork, Real<T>* rwork) {
  int info = 0;
  if constexpr (is_cplx<T>) KILN_LAPACK_CALL(gelsy, &m, &n, &nrhs, a, &lda, b, &ldb, jpvt, &rcond, rank, work, &lwork, rwork, &info);
  else KILN_LAPACK_CALL(gelsy, &m, &n, &nrhs, a, &lda, b, &ldb, jpvt, &rcond, rank, work, &lwork, &info);
  (void)rwork;
  return info;
}
template <class T>
inline int gelsd(int m, int n, int nrhs, T* a, int lda, T* b, int ldb, Real<T>* s, Real<T> rcond, int* rank, T* work,
                 int lwork, Real<T>* rwork, int* iwork) {
  int info = 0;
  if constexpr (is_cplx<T>) KILN_LAPACK_CALL(gelsd, &m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, rwork, iwork, &info);
  else KILN_LAPACK_CALL(gelsd, &m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, iwork, &info);
  (void)rwork;
  return info;
}
template <class T>
inline int gelss(int m, int n, int nrhs, T* a, int lda, T* b, int ldb, Real<T>* s, Real<T> rcond, int* rank, T* work,
                 int lwork, Real<T>* rwork) {
  int info = 0;
  if constexpr (is_cplx<T>) KILN_LAPACK_CALL(gelss, &m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, rwork, &info);
  else KILN_LAPACK_CALL(gelss, &m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, &info);
  (void)rwork;
  return info;
}

// The workspace size a query (lwork == -1) reported, as a count of T.
template <class T>
inline int work_size(const T& w) {
  if constexpr (is_cplx<T>) return static_cast<int>(w.real());
  else return static_cast<int>(w);
}

}  // namespace kiln::cpu::lapack
