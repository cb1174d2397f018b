// OpenBLAS glue for the CPU kernels: one row-major GEMM for float and double.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace kiln::cpu {

// Whether kiln's packed GEMM takes a float32 product (M, N > 1) outside the runtime too: up to 2^24
// multiply-adds (256^3) and K at most 4 min(M, N), where it beats OpenBLAS's SGEMM on one and two
// threads (decision 75). Never in deterministic mode or on the base table (matmul.cpp).
bool kiln_sgemm_small(int64_t M, int64_t N, int64_t K);

// C = op(A) op(B) on kiln's packed GEMM under a KilnSgemmScope (parallel.h: the runtime, where a
// team leaves OpenBLAS one thread) or for a kiln_sgemm_small product; false (nothing done)
// otherwise (matmul.cpp).
bool team_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                int64_t ldb, float* C, int64_t ldc);

// C = op(A) op(B) on kiln's packed GEMM, always (its bits depend neither on the thread count nor on
// the split of work; on the base table it is plain C++: callers there keep OpenBLAS).
void kiln_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                int64_t ldb, float* C, int64_t ldc);

// kiln_sgemm with a B packed once (a weight used by many calls): the words a K x N B takes (0 where
// the table has no such entry: use kiln_sgemm), its packing (B's element (k, n) at b[k * rs + n * cs]),
// and C (M x N, leading dimension ldc) = A (M x K, row-major, lda) @ B from it, with kiln_sgemm's bits.
int64_t kiln_sgemm_packed_words(int64_t K, int64_t N);
void kiln_sgemm_pack_b(int64_t K, int64_t N, const float* b, int64_t rs, int64_t cs, float* dst);
void kiln_sgemm_prepacked(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* bp, float* C,
                          int64_t ldc);

// For the runtime's learning (parallel.h), an OpenBLAS call big enough for several threads: a region
// where kiln's GEMM takes it in a team (`reroutable`), else a call a team would leave on one thread.
void count_blas_call(bool reroutable);

// C (M x N) = alpha op(A) op(B) + beta C, row-major, op(A) M x K, op(B) K x N (ta / tb: transposed).
// Empty M or N does nothing; K == 0 leaves beta C (zeros for beta == 0, whatever C held: BLAS's
// convention). Leading dimensions of empty operands may be 0: they are raised to 1 for BLAS.
template <class T>
inline void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                 const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "gemm: float or double");
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (beta == T(1)) return;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) C[m * ldc + n] = beta == T(0) ? T(0) : C[m * ldc + n] * beta;
    return;
  }
  const bool kiln_ok = std::is_same_v<T, float> && alpha == T(1) && beta == T(0) && M > 1 && N > 1;
  if (M * N * K >= 65536) count_blas_call(kiln_ok);  // (OpenBLAS's own threshold is about there)
  const auto a = ta ? CblasTrans : CblasNoTrans, b = tb ? CblasTrans : CblasNoTrans;
  lda = std::max<int64_t>(lda, 1), ldb = std::max<int64_t>(ldb, 1), ldc = std::max<int64_t>(ldc, 1);
  if constexpr (std::is_same_v<T, float>) {
    if (kiln_ok && team_sgemm(ta, tb, M, N, K, A, lda, B, ldb, C, ldc)) return;
    cblas_sgemm(CblasRowMajor, a, b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, a, b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

}  // namespace kiln::cpu
