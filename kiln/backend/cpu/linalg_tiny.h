// Kernels of our own for tiny matrices (n <= 8): LU with partial pivoting on a row-major matrix held
// in registers, the size a template argument so every loop unrolls. LAPACK's per-call overhead is
// far larger than the work at these sizes, and batches of 4x4 inverses, determinants and solves are
// what graphics and camera geometry run. The factors and pivots are LAPACK's (getrf's pivot choice,
// including |re| + |im| for complex, and its convention for a zero pivot), so derivatives and
// lu_solve read them the same way.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

namespace kiln::cpu::tiny {

inline constexpr int64_t kMaxN = 8;

template <class T>
inline auto abs1(const T& x) {  // LAPACK's pivot magnitude: |x|, or |re| + |im| for complex (i?amax)
  if constexpr (std::is_arithmetic_v<T>) return std::abs(x);
  else return std::abs(x.real()) + std::abs(x.imag());
}

// LU of the N x N row-major matrix a in place (unit L below the diagonal, U on and above it);
// piv[i] (1-based) is the row swapped with row i; returns getrf's info (first zero pivot, 1-based).
template <class T, int N>
inline int lu(T* a, int* piv) {
  int info = 0;
  for (int k = 0; k < N; ++k) {
    int p = k;
    auto best = abs1(a[k * N + k]);
    for (int i = k + 1; i < N; ++i) {
      auto v = abs1(a[i * N + k]);
      if (v > best) best = v, p = i;
    }
    piv[k] = p + 1;
    if (a[p * N + k] == T(0)) {
      if (!info) info = k + 1;
      continue;  // LAPACK leaves the column as it is
    }
    if (p != k)
      for (int j = 0; j < N; ++j) std::swap(a[k * N + j], a[p * N + j]);
    const T inv = T(1) / a[k * N + k];
    for (int i = k + 1; i < N; ++i) {
      const T l = a[i * N + k] * inv;
      a[i * N + k] = l;
      for (int j = k + 1; j < N; ++j) a[i * N + j] -= l * a[k * N + j];
    }
  }
  return info;
}

// x := A^-1 x for the N x K row-major block x (leading dimension ldx), A given by lu()'s factors.
template <class T, int N>
inline void lu_solve(const T* f, const int* piv, T* x, int64_t K, int64_t ldx) {
  for (int k = 0; k < N; ++k)
    if (piv[k] - 1 != k)
      for (int64_t j = 0; j < K; ++j) std::swap(x[k * ldx + j], x[(piv[k] - 1) * ldx + j]);
  for (int64_t j = 0; j < K; ++j) {
    T y[N];
    for (int i = 0; i < N; ++i) {
      T s = x[i * ldx + j];
      for (int c = 0; c < i; ++c) s -= f[i * N + c] * y[c];
      y[i] = s;
    }
    for (int i = N - 1; i >= 0; --i) {
      T s = y[i];
      for (int c = i + 1; c < N; ++c) s -= f[i * N + c] * y[c];
      y[i] = s * (T(1) / f[i * N + i]);  // the reciprocal, as the vector code (kernels_linalg.cpp) has it
    }
    for (int i = 0; i < N; ++i) x[i * ldx + j] = y[i];
  }
}

// One matrix: LU into lu / piv (where not null), info and the determinant (where not null); then, unless singular (LAPACK computes
// nothing there either), the inverse into inv and the solution of A X = B (n x k) into x where not null.
template <class T, int N>
inline void one(const T* a, T* lu, int32_t* piv, int32_t* info, T* det, T* inv, const T* b, T* x, int64_t k) {
  T f[N * N];
  int pv[N];
  for (int i = 0; i < N * N; ++i) f[i] = a[i];
  *info = tiny::lu<T, N>(f, pv);
  if (lu)
    for (int i = 0; i < N * N; ++i) lu[i] = f[i];
  if (piv)
    for (int i = 0; i < N; ++i) piv[i] = pv[i];
  if (det) {  // U's diagonal's product, negated for each row swap (the vector code's order)
    T d = T(1);
    for (int i = 0; i < N; ++i) {
      d = d * f[i * N + i];
      if (pv[i] - 1 != i) d = d * T(-1);
    }
    *det = d;
  }
  if (*info) {  // singular: LAPACK computes no inverse; the results are NaN, never stale memory
    const T nan = T(std::numeric_limits<double>::quiet_NaN());
    if (inv)
      for (int i = 0; i < N * N; ++i) inv[i] = nan;
    if (b)
      for (int64_t i = 0; i < N * k; ++i) x[i] = nan;
    return;
  }
  if (inv) {
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < N; ++j) inv[i * N + j] = T(i == j ? 1 : 0);
    lu_solve<T, N>(f, pv, inv, N, N);
  }
  if (b) {
    for (int64_t i = 0; i < N * k; ++i) x[i] = b[i];
    lu_solve<T, N>(f, pv, x, k, k);
  }
}

// Runs f.template operator()<N>() for the runtime n in 1..8.
template <class F>
inline void with_n(int64_t n, F&& f) {
  switch (n) {
    case 1: f.template operator()<1>(); break;
    case 2: f.template operator()<2>(); break;
    case 3: f.template operator()<3>(); break;
    case 4: f.template operator()<4>(); break;
    case 5: f.template operator()<5>(); break;
    case 6: f.template operator()<6>(); break;
    case 7: f.template operator()<7>(); break;
    default: f.template operator()<8>(); break;
  }
}

}  // namespace kiln::cpu::tiny
