// What the CPU linear-algebra kernels share (linalg.cpp, linalg_decomp.cpp, linalg_spectral.cpp,
// linalg_lstsq.cpp): the LAPACK dtype switch, column-major scratch copies, the matrix offsets of a
// broadcast batch, the batch grain, and torch's LinAlgError from LAPACK's info.
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <cblas.h>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/lapack.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/core/deterministic.h"
#include "kiln/core/tensor.h"

namespace kiln::cpu::linalg_util {

namespace lp = cpu::lapack;

// From this order on, the LU and Cholesky routines' BLAS-3 blocks outweigh OpenBLAS's region per
// call at two threads (Zen 4, PASSIVE, float64 dgetrf 384: 1.86 ms on one thread, 1.94 on two; 512:
// 4.7 -> 3.3; dpotrf 512: 1.9 -> 1.6).
inline constexpr int64_t kParallelBlasOrder = 512;
// visit_lapack's parallel_blas for a batch of `batch` matrices of this order: one matrix only. A
// batch of more is dealt over the threads by parallel_for, and a BLAS call on each thread must then
// run on that thread alone: OpenBLAS's OpenMP build does so where it sees kiln's region, which it
// cannot where its OpenMP runtime is not kiln's (clang's libomp beside OpenBLAS's libgomp, unless
// one stands in for the other); two threads then enter its threaded path at once.
inline bool parallel_blas(int64_t batch, int64_t order) { return batch == 1 && order >= kParallelBlasOrder; }

// The threads one matrix's factorization is split over: kiln's count, or one in deterministic mode
// (the splits change the rounding: a share of the columns through a BLAS call of that width, and the
// blocked LU, the Cholesky and the svd path taken only on more than one thread).
inline int linalg_threads() { return are_deterministic_algorithms_enabled() ? 1 : get_num_threads(); }

// f<T>() for the LAPACK type of d, with OpenBLAS on one thread unless parallel_blas (SerialBlas).
template <class F>
inline void visit_lapack(Dtype d, const char* op, F&& f, bool parallel_blas = false) {
  const cpu::SerialBlas serial(!parallel_blas);
  switch (d) {
    case kFloat32: f.template operator()<float>(); break;
    case kFloat64: f.template operator()<double>(); break;
    case kComplex64: f.template operator()<complex64>(); break;
    case kComplex128: f.template operator()<complex128>(); break;
    default: KILN_FAIL(Runtime, op, "Low precision dtypes not supported. Got ", dtype_name(d));
  }
}

// f(share) on `threads` threads at once (run_spmd; fewer inside a region), the shares synced by a
// spinning barrier, with T shared flags.
template <class F>
void run_shared(int threads, F&& f) {
  if (threads <= 1) return f(SpmdShare{});
  std::vector<int> flags(threads);
  SpinBarrier barrier;
  run_spmd(threads, [&](int t, int T_) {
    struct Ctx {
      SpinBarrier* barrier;
      int threads;
      int64_t round;
    } ctx{&barrier, T_, 0};
    const SpmdShare sh{t, T_, [](void* p) {
      auto* c = static_cast<Ctx*>(p);
      c->barrier->wait(c->threads, c->round);
    }, &ctx, flags.data()};
    f(sh);
  });
}

// A column-major working matrix (rows x cols, zeros) that LAPACK and OpenBLAS are handed. OpenBLAS
// 0.3.21's complex GEMV without transpose (the Haswell / Zen kernel that xlarf on the right, xlabrd
// and others call) loads from the column after its matrix's last and the element after its vector's
// last (OpenBLAS issue 4013): up to a column past the end when that matrix ends the buffer, which
// faults where the next page is unmapped (the sanitizer build's allocator now and then; a guard-page
// malloc every time). A complex matrix therefore carries a spare column and 64 bytes, zeros; real
// ones, which those kernels do not overread, none. size() counts them: take rows * cols for the matrix.
template <class T>
std::vector<T> lapack_matrix(int64_t rows, int64_t cols) {
  const int64_t spare = lp::is_cplx<T> ? std::max<int64_t>(rows, 1) + int64_t(64 / sizeof(T)) : 0;
  return std::vector<T>(rows * cols + spare);
}
// A vector LAPACK is handed (a workspace, which can be such a GEMV's vector): 64 spare bytes, zeros,
// where T is complex.
template <class T>
std::vector<T> lapack_vector(int64_t n) {
  return std::vector<T>(n + (lp::is_cplx<T> ? int64_t(64 / sizeof(T)) : 0));
}

template <class T>
T cj(T x) {
  if constexpr (lp::is_cplx<T>) return std::conj(x);
  else return x;
}

// LAPACK takes 32-bit sizes.
inline void check_lapack_size(const char* op, int64_t m, int64_t n) {
  KILN_CHECK(m <= INT_MAX && n <= INT_MAX && m * n <= INT_MAX, Runtime, op, "a ", m, " by ", n,
             " matrix is too large for LAPACK's 32-bit sizes");
}

// Batch elements per thread chunk: parallel over the batch only when each chunk has real work.
inline int64_t batch_grain(int64_t m, int64_t n) {
  int64_t k = std::min(m, n);
  int64_t work = std::max<int64_t>(1, m * n * std::max<int64_t>(k, 1));
  return std::max<int64_t>(1, (int64_t(1) << 16) / work);
}

// (R, C) row-major src -> column-major dst (leading dimension R), and back: 4- and 8-byte elements
// by tiles transposed in registers (the table's transpose_dense: 4x faster than tiles at 64 x 64),
// others in 16 x 16 tiles (element by element, one side's accesses are a row length apart: a cache
// miss each from n = 64 up). From 2^18 elements (float64 1024^2 is 8 MB each way) the rows are split
// over the threads.
template <class T>
void transpose_tiles(const T* src, int64_t R, int64_t C, int64_t lds, T* dst, int64_t ldd) {  // dst = src^T
  if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
    if (const auto f = cpu_kernels().transpose_dense) return f(src, R, C, lds, dst, ldd, sizeof(T));
  }
  constexpr int64_t kT = 16;
  for (int64_t i0 = 0; i0 < R; i0 += kT)
    for (int64_t j0 = 0; j0 < C; j0 += kT) {
      const int64_t i1 = std::min(R, i0 + kT), j1 = std::min(C, j0 + kT);
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t i = i0; i < i1; ++i) dst[j * ldd + i] = src[i * lds + j];
    }
}
template <class T>
void transpose_tiles(const T* src, int64_t R, int64_t C, T* dst) {  // dst (C x R) = src (R x C)^T
  if (R * C < (int64_t(1) << 18)) return transpose_tiles(src, R, C, C, dst, R);
  cpu::parallel_for((R + 7) / 8, 1, [&](int64_t b0, int64_t b1) {  // (blocks of 8 rows: whole register tiles)
    const int64_t r0 = b0 * 8, r1 = std::min(R, b1 * 8);
    transpose_tiles(src + r0 * C, r1 - r0, C, C, dst + r0, R);
  });
}
template <class T>
void to_cm(const T* src, int64_t R, int64_t C, T* dst) {
  transpose_tiles(src, R, C, dst);
}
template <class T>
void from_cm(const T* src, int64_t R, int64_t C, T* dst) {
  transpose_tiles(src, C, R, dst);
}

// The kernel table's Householder kernels for T (kernels_householder.cpp; null on the base table).
template <class T>
const cpu::KernelTable::Householder<T>* householder() {
  const cpu::KernelTable::Householder<T>* h = nullptr;
  if constexpr (std::is_same_v<T, float>) h = &cpu::cpu_kernels().householder_f32;
  else if constexpr (std::is_same_v<T, double>) h = &cpu::cpu_kernels().householder_f64;
  else if constexpr (std::is_same_v<T, complex64>) h = &cpu::cpu_kernels().householder_c64;
  else h = &cpu::cpu_kernels().householder_c128;
  return h && h->geqr2 ? h : nullptr;
}

// BLAS on column-major matrices for the four LAPACK types: op(A)^-1 B (or B op(A)^-1 for side
// right) with alpha 1, and C -= op(A) op(B). herm<T>(): the conjugate transpose (the transpose for
// real T).
template <class T>
constexpr CBLAS_TRANSPOSE herm() {
  return lp::is_cplx<T> ? CblasConjTrans : CblasTrans;
}
template <class T>
void trsm_cm(CBLAS_SIDE side, CBLAS_UPLO uplo, CBLAS_TRANSPOSE tr, CBLAS_DIAG diag, int64_t m, int64_t n, const T* a,
             int64_t lda, T* b, int64_t ldb) {
  if (m <= 0 || n <= 0) return;
  if constexpr (std::is_same_v<T, float>) cblas_strsm(CblasColMajor, side, uplo, tr, diag, m, n, 1.0f, a, lda, b, ldb);
  else if constexpr (std::is_same_v<T, double>) cblas_dtrsm(CblasColMajor, side, uplo, tr, diag, m, n, 1.0, a, lda, b, ldb);
  else {
    const T one(1);
    if constexpr (std::is_same_v<T, complex64>) cblas_ctrsm(CblasColMajor, side, uplo, tr, diag, m, n, &one, a, lda, b, ldb);
    else cblas_ztrsm(CblasColMajor, side, uplo, tr, diag, m, n, &one, a, lda, b, ldb);
  }
}
template <class T>
void gemm_sub_cm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                 const T* b, int64_t ldb, T* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if constexpr (std::is_same_v<T, float>) cblas_sgemm(CblasColMajor, ta, tb, m, n, k, -1.0f, a, lda, b, ldb, 1.0f, c, ldc);
  else if constexpr (std::is_same_v<T, double>) cblas_dgemm(CblasColMajor, ta, tb, m, n, k, -1.0, a, lda, b, ldb, 1.0, c, ldc);
  else {
    const T minus(-1), one(1);
    if constexpr (std::is_same_v<T, complex64>) cblas_cgemm(CblasColMajor, ta, tb, m, n, k, &minus, a, lda, b, ldb, &one, c, ldc);
    else cblas_zgemm(CblasColMajor, ta, tb, m, n, k, &minus, a, lda, b, ldb, &one, c, ldc);
  }
}

// The element offset of every matrix of x (contiguous, (..., R, C)) for each index of `batch`,
// which x's batch dimensions broadcast to.
inline std::vector<int64_t> matrix_offsets(const Tensor& x, const Shape& batch) {
  const int64_t mat = x.size(-1) * x.size(-2);
  const int nb = static_cast<int>(batch.size()), xd = static_cast<int>(x.dim()) - 2;
  std::vector<int64_t> st(nb, 0);
  int64_t s = mat;
  for (int i = xd - 1; i >= 0; --i) {
    int j = nb - xd + i;
    st[j] = x.sizes()[i] == 1 ? 0 : s;
    s *= x.sizes()[i];
  }
  int64_t B = shape_numel(batch);
  std::vector<int64_t> off(B);
  std::vector<int64_t> idx(nb, 0);
  int64_t o = 0;
  for (int64_t b = 0; b < B; ++b) {
    off[b] = o;
    for (int j = nb - 1; j >= 0; --j) {
      if (++idx[j] < batch[j]) {
        o += st[j];
        break;
      }
      o -= st[j] * (batch[j] - 1);
      idx[j] = 0;
    }
  }
  return off;
}

inline Shape batch_shape(const Tensor& t, int trailing) { return Shape(t.sizes().begin(), t.sizes().end() - trailing); }

// torch's error for the first failed batch element: "(Batch element k): " when the input is batched.
template <class Msg>
inline void raise_on_info(const Tensor& info, bool batched, const char* op, Msg&& msg, ErrorKind kind = ErrorKind::LinAlg) {
  const int32_t* p = info.data_ptr<int32_t>();
  for (int64_t b = 0; b < info.numel(); ++b) {
    if (p[b] == 0) continue;
    KILN_CHECK(p[b] > 0, Runtime, op, "LAPACK rejected argument ", -p[b], " (an internal error)");
    std::string where = batched ? "(Batch element " + std::to_string(b) + "): " : "";
    if (kind == ErrorKind::LinAlg) KILN_FAIL(LinAlg, op, where, msg(p[b]));
    KILN_FAIL(Runtime, op, where, msg(p[b]));
  }
}

// C (m x n) = op(A) op(B) in `order` (CblasRowMajor / CblasColMajor), op: CblasNoTrans, CblasTrans or
// CblasConjTrans; one BLAS call for any of the four dtypes.
template <class T>
inline void gemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const T* A,
                 int64_t lda, const T* B, int64_t ldb, T* C, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(order, ta, tb, m, n, k, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(order, ta, tb, m, n, k, 1.0, A, lda, B, ldb, 0.0, C, ldc);
  } else {
    const T one(1), zero(0);
    if constexpr (std::is_same_v<T, complex64>) cblas_cgemm(order, ta, tb, m, n, k, &one, A, lda, B, ldb, &zero, C, ldc);
    else cblas_zgemm(order, ta, tb, m, n, k, &one, A, lda, B, ldb, &zero, C, ldc);
  }
}

template <class T>
void trmm_left_upper_cm(CBLAS_TRANSPOSE tr, int64_t m, int64_t n, const T* a, int64_t lda, T* b, int64_t ldb) {
  if (m <= 0 || n <= 0) return;
  constexpr CBLAS_SIDE L = CblasLeft;
  constexpr CBLAS_UPLO U = CblasUpper;
  constexpr CBLAS_DIAG N = CblasNonUnit;
  if constexpr (std::is_same_v<T, float>) cblas_strmm(CblasColMajor, L, U, tr, N, m, n, 1.0f, a, lda, b, ldb);
  else if constexpr (std::is_same_v<T, double>) cblas_dtrmm(CblasColMajor, L, U, tr, N, m, n, 1.0, a, lda, b, ldb);
  else {
    const T one(1);
    if constexpr (std::is_same_v<T, complex64>) cblas_ctrmm(CblasColMajor, L, U, tr, N, m, n, &one, a, lda, b, ldb);
    else cblas_ztrmm(CblasColMajor, L, U, tr, N, m, n, &one, a, lda, b, ldb);
  }
}

// The k reflectors of a blocked QR's panel (m x k at a, leading dimension lda; xgeqrf's layout: R
// above the diagonal) as an explicit V (m x k, leading dimension m: ones on the diagonal, zeros above),
// so that applying them is two whole GEMMs (larfb_left).
template <class T>
void explicit_v(int64_t m, int64_t k, const T* a, int64_t lda, T* v) {
  for (int64_t j = 0; j < k; ++j) {
    T* col = v + j * m;
    std::fill(col, col + std::min(j, m), T(0));
    if (j < m) col[j] = T(1);
    if (j + 1 < m) std::copy(a + j * lda + j + 1, a + j * lda + m, col + j + 1);
  }
}

// C (m x n, leading dimension ldc) := H^H C (trans 'C') or H C ('N'), H = I - V T V^H the block
// reflector of xlarft (forward, columnwise; T k x k upper, leading dimension ldt) with V explicit
// (explicit_v). w: k x n. Two GEMMs and a k x k TRMM: LAPACK's xlarfb copies C's top k rows into a
// row-major W and subtracts it back element by element at a row's stride (float64 1024^2 QR, one
// thread: 15% of the time in those loops).
template <class T>
void larfb_left(char trans, int64_t m, int64_t n, int64_t k, const T* v, const T* t, int64_t ldt, T* c, int64_t ldc,
                T* w) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  gemm<T>(CblasColMajor, herm<T>(), CblasNoTrans, k, n, m, v, m, c, ldc, w, k);  // W = V^H C
  trmm_left_upper_cm<T>(trans == 'N' ? CblasNoTrans : herm<T>(), k, n, t, ldt, w, k);  // W = op(T) W
  gemm_sub_cm<T>(CblasNoTrans, CblasNoTrans, m, n, k, v, m, w, k, c, ldc);  // C -= V W
}

// QR up to this size (200 KiB of matrix) runs on the table's unblocked Householder kernels
// (kernels_householder.cpp), not LAPACK: OpenBLAS's xgeqrf / xorgqr are unblocked there too, with
// BLAS calls for each column of each rank-1 update (Zen 4, one thread, reduced mode: float32 64 x 64
// 78 -> 33 us (MKL: 63-95 us), 128^2 370 -> 302, 224^2 2400 -> 1250, 1000 x 36 316 -> 264, 36 x 1000
// 451 -> 215, and 256^2 1410 against 1950 for the blocked sgeqrf; float64 64^2 86 -> 49, 160^2
// 883 -> 808, 224^2 1833 against 2218; complex64 64^2 152 -> 87, 160^2 1139 -> 1102; complex128
// 64^2 169 -> 141, 112^2 825 -> 801, 160^2 2093 against 2337).
template <class T>
bool use_small_qr(int64_t m, int64_t n, int64_t qc) {
  return m * std::max(n, qc) * static_cast<int64_t>(sizeof(T)) <= 200 * 1024;
}

// xgeqrf of one matrix (column-major m x n, leading dimension lda) in panels of 64 columns, the
// trailing updates split over `threads` (linalg_decomp.cpp; float32, float64, complex64, complex128).
// go_on, if given, is asked after each panel with the count c of R's columns now final (0 .. c-1);
// when it says no the factorization stops there and returns false.
inline constexpr int64_t kBlockedQr = 256;  // from this min(m, n) on one matrix's QR is blocked
template <class T>
bool geqrf_blocked(int64_t m, int64_t n, T* a, int64_t lda, T* tau, int threads,
                   const std::function<bool(int64_t)>& go_on = {});

// Q C ('N') or Q^H C ('C') for Q = H(0) ... H(k-1), xgeqrf's reflectors (m x k at a, leading
// dimension lda; on and above the diagonal not read); C m x nc, leading dimension ldc. xormqr from
// the left in blocks of 64 reflectors on larfb_left (linalg_decomp.cpp): every block's T and explicit
// V first (the blocks dealt round `threads`), then each thread applies them all to its share of C's
// columns; the reflectors are only read (LAPACK's xorm2r writes and restores them).
template <class T>
void ormqr_left(char trans, int64_t m, int64_t nc, int64_t k, const T* a, int64_t lda, const T* tau, T* c,
                int64_t ldc, int threads);

}  // namespace kiln::cpu::linalg_util
