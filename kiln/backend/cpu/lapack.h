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

// The workspace size a query (lwork == -1) reported, as a count of T.
template <class T>
inline int work_size(const T& w) {
  if constexpr (is_cplx<T>) return static_cast<int>(w.real());
  else return static_cast<int>(w);
}

}  // namespace kiln::cpu::lapack
