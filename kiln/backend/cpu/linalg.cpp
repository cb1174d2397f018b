// CPU kernels of the linear-algebra ops (entries, schemas and metas: kiln/ops/linalg.cpp): LAPACK
// through OpenBLAS (lapack.h) for the factorisations, BLAS trsm for triangular solves. Each batch
// element is copied into a column-major scratch matrix, factorised there and copied back row-major;
// the copies are O(n^2) beside the O(n^3) factorisation. Batches of small matrices are spread over
// the threads (LAPACK runs single-threaded inside them); a large single matrix gets OpenBLAS's own
// threads. Failures are reported per batch element as LAPACK's info; the kernels raise torch's
// LinAlgError from it after the loop, when the call asks (check_errors).
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/linalg_tiny.h"
#include "kiln/backend/cpu/linalg_util.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/dispatch/op.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

using namespace cpu::linalg_util;
using cpu::contiguous_of;
using cpu::parallel_for;

// Tiny matrices (n <= 8), `count` contiguous ones from a: the vectorised table kernel for float and
// double (kernels_linalg.cpp), the scalar one (linalg_tiny.h) for complex; spread over the threads.
// Outputs as cpu::TinyLinalgFn's; pointers that are null are not computed.
template <class T>
void tiny_run(int64_t n, int64_t count, const T* a, T* lu, int* piv, int* info, T* det, T* inv, const T* b, T* x,
              int64_t k) {
  const int64_t M = n * n;
  parallel_for(count, batch_grain(n, n + k), [&](int64_t b0, int64_t b1) {
    const int64_t c = b1 - b0;
    T* lu_ = lu ? lu + b0 * M : nullptr;
    int* piv_ = piv ? piv + b0 * n : nullptr;
    T* det_ = det ? det + b0 : nullptr;
    T* inv_ = inv ? inv + b0 * M : nullptr;
    const T* b_ = b ? b + b0 * n * k : nullptr;
    T* x_ = x ? x + b0 * n * k : nullptr;
    if constexpr (std::is_same_v<T, float>) {
      cpu::cpu_kernels().tiny_linalg_f32(n, c, a + b0 * M, lu_, piv_, info + b0, det_, inv_, b_, x_, k);
    } else if constexpr (std::is_same_v<T, double>) {
      cpu::cpu_kernels().tiny_linalg_f64(n, c, a + b0 * M, lu_, piv_, info + b0, det_, inv_, b_, x_, k);
    } else {
      cpu::tiny::with_n(n, [&]<int N>() {
        for (int64_t m = 0; m < c; ++m)
          cpu::tiny::one<T, N>(a + (b0 + m) * M, lu_ ? lu_ + m * M : nullptr, piv_ ? piv_ + m * n : nullptr,
                               info + b0 + m, det_ ? det_ + m : nullptr, inv_ ? inv_ + m * M : nullptr,
                               b_ ? b_ + m * n * k : nullptr, x_ ? x_ + m * n * k : nullptr, k);
      });
    }
  });
}
bool is_tiny(int64_t n) { return n >= 1 && n <= cpu::tiny::kMaxN; }

// ---- LU -------------------------------------------------------------------------------------------------
// From order kBlockedLu on, one matrix on more than one thread: a right-looking blocked LU with the
// pool held as a team (decision 55; OpenBLAS's parallel getrf opens regions per call, decision 60).
// Each panel of kLuBlock columns is factored by LAPACK on one thread; then each thread takes a
// share of the other columns and applies the panel's interchanges to them, and for those right of
// the panel solves U12 = L11^-1 A12 and updates A22 -= L21 U12 (each a BLAS call on one thread).
constexpr int64_t kBlockedLu = 192, kLuBlock = 32;

// xlaswp's forward interchanges k1 .. k2 (1-based, ipiv 1-based) on nc columns of a column-major
// matrix, one column at a time: the column's rows stay in L1 through all the swaps (OpenBLAS's
// xlaswp walks each swap across the columns).
template <class T>
void swap_rows(int64_t nc, T* a, int64_t lda, int64_t k1, int64_t k2, const int* ipiv) {
  for (int64_t c = 0; c < nc; ++c) {
    T* col = a + c * lda;
    for (int64_t i = k1 - 1; i < k2; ++i) {
      const int64_t p = ipiv[i] - 1;
      if (p != i) std::swap(col[i], col[p]);
    }
  }
}

// getrf (column-major, ipiv 1-based, LAPACK's info), blocked over the threads where `blocked`. With
// a look-ahead of one panel: thread 0 brings the next panel's columns up to date first and factors
// them while the other threads finish the trailing update (the panel on one thread is the serial part).
template <class T>
int getrf_any(int64_t m, int64_t n, T* a, int64_t lda, int* ipiv, bool blocked) {
  if (!blocked) return lp::getrf<T>(int(m), int(n), a, int(lda), ipiv);
  const int threads = linalg_threads();
  const int64_t mn = std::min(m, n);
  int info = 0;
  auto factor = [&](int64_t k0) {  // the panel at k0 (its columns up to date)
    const int64_t kb = std::min(kLuBlock, mn - k0);
    const int pi = lp::getrf<T>(int(m - k0), int(kb), a + k0 + k0 * lda, int(lda), ipiv + k0);
    if (pi > 0 && info == 0) info = int(k0) + pi;
    for (int64_t i = k0; i < k0 + kb; ++i) ipiv[i] += int(k0);
  };
  // columns [c0, c1) right of the panel at k0: its interchanges, U12 = L11^-1 A12, A22 -= L21 U12
  auto update = [&](int64_t k0, int64_t c0, int64_t c1) {
    const int64_t kb = std::min(kLuBlock, mn - k0), r0 = k0 + kb;
    if (c0 >= c1) return;
    swap_rows<T>(c1 - c0, a + c0 * lda, lda, k0 + 1, r0, ipiv);
    trsm_cm<T>(CblasLeft, CblasLower, CblasNoTrans, CblasUnit, kb, c1 - c0, a + k0 + k0 * lda, lda, a + k0 + c0 * lda,
               lda);
    gemm_sub_cm<T>(CblasNoTrans, CblasNoTrans, m - r0, c1 - c0, kb, a + r0 + k0 * lda, lda, a + k0 + c0 * lda, lda,
                   a + r0 + c0 * lda, lda);
  };
  const cpu::SerialBlas serial;  // (see potrf_blocked)
  cpu::run_as_team(threads, [&] {
    factor(0);
    for (int64_t k0 = 0; k0 < mn; k0 += kLuBlock) {
      const int64_t kb = std::min(kLuBlock, mn - k0), r0 = k0 + kb;
      const int64_t next = r0 < mn ? std::min(kLuBlock, mn - r0) : 0;  // the next panel's width
      const int64_t rest0 = r0 + next, rest = n - rest0;  // the trailing columns after it
      cpu::run_spmd(threads, [&](int t, int T_) {
        if (t == 0 && next > 0) {
          update(k0, r0, rest0);
          factor(r0);
        }
        // the rest: thread 0's share smaller by what the next panel costs it (about 2 panels of update)
        const int64_t lead = next > 0 ? std::min(rest, 2 * next) : 0, w = rest + lead;
        const int64_t b = std::max<int64_t>(0, w * t / T_ - lead), e = std::max<int64_t>(0, w * (t + 1) / T_ - lead);
        update(k0, rest0 + b, rest0 + e);
        const int64_t l0 = k0 * t / T_, l1 = k0 * (t + 1) / T_;  // the panel's interchanges left of it
        if (l0 < l1) swap_rows<T>(l1 - l0, a + l0 * lda, lda, k0 + 1, r0, ipiv);
      });
    }
  });
  return info;
}
// xgetri (inv(A) from getrf's P L U, column-major n x n in w, ipiv 1-based, U's diagonal nonzero)
// split over `threads` in a held team, where LAPACK's runs on one: inv(U) by columns (each thread
// solves U X = I for a share of the columns, in pieces of 64 whose solves stop at the piece's last
// row; column j costs about j^2, so the shares end at n (t / T)^(1/3)), then X = inv(U) inv(L) by
// rows (X L = inv(U), a share of the rows each), then inv(A) = X P^T, the columns taken in P's
// order while copied back into w. xgetri's flops: n^3 / 3 for inv(U), n^3 for the product.
template <class T>
void getri_team(int64_t n, T* w, const int* ipiv, int threads) {
  std::vector<T> x(n * n);  // (zeros)
  const cpu::SerialBlas serial;  // (see potrf_blocked)
  cpu::run_as_team(threads, [&] {
    cpu::run_spmd(threads, [&](int t, int T_) {
      auto edge = [&](int u) { return u >= T_ ? n : std::min(n, int64_t(double(n) * std::cbrt(double(u) / T_))); };
      const int64_t c0 = edge(t), c1 = edge(t + 1);
      for (int64_t j0 = c0; j0 < c1; j0 += 64) {
        const int64_t j1 = std::min(c1, j0 + 64);
        for (int64_t j = j0; j < j1; ++j) x[j * n + j] = T(1);
        trsm_cm<T>(CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, j1, j1 - j0, w, n, x.data() + j0 * n, n);
      }
    });
    cpu::run_spmd(threads, [&](int t, int T_) {
      const int64_t r0 = n * t / T_, r1 = n * (t + 1) / T_;
      trsm_cm<T>(CblasRight, CblasLower, CblasNoTrans, CblasUnit, r1 - r0, n, w, n, x.data() + r0, n);
    });
  });
  std::vector<int64_t> perm(n);  // inv(A)'s column j is X's column perm[j] (xgetri's swaps, last first)
  for (int64_t j = 0; j < n; ++j) perm[j] = j;
  for (int64_t j = n - 2; j >= 0; --j) std::swap(perm[j], perm[ipiv[j] - 1]);
  for (int64_t j = 0; j < n; ++j) std::copy(x.data() + perm[j] * n, x.data() + (perm[j] + 1) * n, w + j * n);
}

bool blocked_lu(int64_t batch, int64_t m, int64_t n) {
  return batch == 1 && std::min(m, n) >= kBlockedLu && linalg_threads() > 1 && !cpu::in_parallel_region();
}

void lu_factor_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const char* op = "linalg.lu_factor";
  Tensor A = contiguous_of(in[0]);
  Tensor &LU = out[0], &piv = out[1], &info = out[2];
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n), B = info.numel();
  check_lapack_size(op, m, n);
  visit_lapack(A.dtype(), op, [&]<class T>() {
    const T* ap = static_cast<const T*>(A.data_ptr());
    T* lu = static_cast<T*>(LU.data_ptr());
    int* pp = static_cast<int*>(piv.data_ptr());
    int* ip = static_cast<int*>(info.data_ptr());
    if (m == n && is_tiny(n)) {  // tiny matrices: our own kernels
      tiny_run<T>(n, B, ap, lu, pp, ip, nullptr, nullptr, nullptr, nullptr, 0);
      return;
    }
    parallel_for(B, batch_grain(m, n), [&](int64_t b0, int64_t b1) {
      std::vector<T> w = lapack_matrix<T>(m, n);
      for (int64_t b = b0; b < b1; ++b) {
        ip[b] = 0;
        if (k == 0) continue;
        to_cm(ap + b * m * n, m, n, w.data());
        ip[b] = getrf_any<T>(m, n, w.data(), m, pp + b * k, blocked_lu(B, m, n));
        from_cm(w.data(), m, n, lu + b * m * n);
      }
    });
  }, parallel_blas(B, n));
  if (attr<bool>(a, 1))
    raise_on_info(info, A.dim() > 2, "linalg.lu_factor_ex", [](int i) {
      return "U[" + std::to_string(i) + "," + std::to_string(i) + "] is zero and using it on lu_solve would result "
             "in a division by zero. If you still want to perform the factorization, consider calling "
             "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)";
    }, ErrorKind::Runtime);  // torch raises a plain RuntimeError here
}
KernelRegistrar k_lu_factor{"linalg_lu_factor_ex", DeviceType::CPU, lu_factor_kernel};

void lu_solve_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const char* op = "linalg.lu_solve";
  Tensor LU = contiguous_of(in[0]), piv = contiguous_of(in[1]), Bm = contiguous_of(in[2]);
  Tensor& X = out[0];
  const bool left = attr<bool>(a, 0), adjoint = attr<bool>(a, 1);
  const int64_t n = LU.size(-1), r = X.size(-2), c = X.size(-1);
  const int64_t k = left ? c : r;  // right-hand sides
  if (n == 0 || k == 0) return;
  check_lapack_size(op, n, std::max(n, k));
  const Shape batch = batch_shape(X, 2);
  const std::vector<int64_t> lo = matrix_offsets(LU, batch), bo = matrix_offsets(Bm, batch);
  const int64_t Bn = shape_numel(batch);
  // pivots and LU have one batch shape: a pivot row's offset is the matrix's divided by n
  visit_lapack(LU.dtype(), op, [&]<class T>() {
    const T* lp_ = static_cast<const T*>(LU.data_ptr());
    const T* bp = static_cast<const T*>(Bm.data_ptr());
    const int* pp = static_cast<const int*>(piv.data_ptr());
    T* xp = static_cast<T*>(X.data_ptr());
    const char trans_left = adjoint ? (lp::is_cplx<T> ? 'C' : 'T') : 'N';
    parallel_for(Bn, batch_grain(n, n + k), [&](int64_t b0, int64_t b1) {
      std::vector<T> wl = lapack_matrix<T>(n, n), wb = lapack_matrix<T>(n, k);
      for (int64_t b = b0; b < b1; ++b) {
        to_cm(lp_ + lo[b], n, n, wl.data());
        const int* p = pp + lo[b] / n;
        const T* src = bp + bo[b];
        T* dst = xp + b * r * c;
        if (left) {  // X (n, k) = op(A)^-1 B
          to_cm(src, n, k, wb.data());
          lp::getrs<T>(trans_left, int(n), int(k), wl.data(), int(n), p, wb.data(), int(n));
          from_cm(wb.data(), n, k, dst);
        } else if (!adjoint) {  // X A = B: A^T X^T = B^T, and B^T column-major is B's row-major memory
          std::copy(src, src + n * k, wb.data());
          lp::getrs<T>('T', int(n), int(k), wl.data(), int(n), p, wb.data(), int(n));
          std::copy(wb.begin(), wb.begin() + n * k, dst);
        } else {  // X A^H = B: A X^H = B^H, B^H column-major is conj of B's memory
          for (int64_t i = 0; i < n * k; ++i) wb[i] = cj(src[i]);
          lp::getrs<T>('N', int(n), int(k), wl.data(), int(n), p, wb.data(), int(n));
          for (int64_t i = 0; i < n * k; ++i) dst[i] = cj(wb[i]);
        }
      }
    });
  }, parallel_blas(Bn, n));
}
KernelRegistrar k_lu_solve{"linalg_lu_solve", DeviceType::CPU, lu_solve_kernel};

void lu_unpack_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const char* op = "lu_unpack";
  Tensor LU = contiguous_of(in[0]), piv = contiguous_of(in[1]);
  const bool data = attr<bool>(a, 0), pivots = attr<bool>(a, 1);
  const int64_t m = LU.size(-2), n = LU.size(-1), k = std::min(m, n);
  const int64_t Bn = shape_numel(batch_shape(LU, 2));
  const int* pp = static_cast<const int*>(piv.data_ptr());
  if (pivots) {  // checked first: a bad pivot raises before anything is written
    for (int64_t i = 0; i < Bn * k; ++i)
      KILN_CHECK(pp[i] >= 1 && pp[i] <= m, Runtime, op, "pivots passed to lu_unpack must be between 1 and LU.size(-2) "
                 "inclusive. Did you use the pivots from a call to lu_factor? Got ", pp[i]);
  }
  visit_lapack(LU.dtype(), op, [&]<class T>() {
    const T* lu = static_cast<const T*>(LU.data_ptr());
    if (data) {
      T* L = static_cast<T*>(out[1].data_ptr());
      T* U = static_cast<T*>(out[2].data_ptr());
      for (int64_t b = 0; b < Bn; ++b) {
        const T* s = lu + b * m * n;
        T* l = L + b * m * k;
        T* u = U + b * k * n;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < k; ++j) l[i * k + j] = i > j ? s[i * n + j] : T(i == j ? 1 : 0);
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < n; ++j) u[i * n + j] = j >= i ? s[i * n + j] : T(0);
      }
    }
    if (pivots) {
      T* P = static_cast<T*>(out[0].data_ptr());
      std::fill(P, P + Bn * m * m, T(0));
      std::vector<int64_t> perm(m);
      for (int64_t b = 0; b < Bn; ++b) {
        for (int64_t i = 0; i < m; ++i) perm[i] = i;
        for (int64_t i = 0; i < k; ++i) std::swap(perm[i], perm[pp[b * k + i] - 1]);
        // P^T A = L U: row i of P^T A is row perm[i] of A
        for (int64_t i = 0; i < m; ++i) P[b * m * m + perm[i] * m + i] = T(1);
      }
    }
  }, parallel_blas(Bn, n));
}
KernelRegistrar k_lu_unpack{"lu_unpack", DeviceType::CPU, lu_unpack_kernel};

// ---- solve, inverse, determinants --------------------------------------------------------------------------
void solve_ex_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const char* op = "linalg.solve";
  const bool left = attr<bool>(a, 0);
  Tensor A = contiguous_of(in[0]), Bm = contiguous_of(in[1]);
  Tensor &X = out[0], &info = out[1];
  if (X.dim() < A.dim()) {  // a vector right-hand side: the same memory as an (n, 1) or (1, n) matrix
    Shape s = Bm.sizes();
    s.insert(s.end() - (left ? 0 : 1), 1);
    Bm = make_view(Bm, s, contiguous_strides(s), Bm.storage_offset());  // (a view keeps its offset)
  }
  const int64_t n = A.size(-1), r = left ? n : Bm.size(-2), c = left ? Bm.size(-1) : n, k = left ? c : r;
  check_lapack_size(op, n, std::max(n, k));
  Shape batch = broadcast_shapes(batch_shape(A, 2), batch_shape(Bm, 2), op);
  const int64_t nA = info.numel(), Bn = shape_numel(batch);
  // no broadcasting: matrix b of A and of B is simply the b-th (a tiny batch then takes one pass)
  const bool plain = batch_shape(A, 2) == batch && batch_shape(Bm, 2) == batch;
  std::vector<int64_t> ao, bo;
  if (!plain) ao = matrix_offsets(A, batch), bo = matrix_offsets(Bm, batch);
  visit_lapack(A.dtype(), op, [&]<class T>() {
    const T* ap = static_cast<const T*>(A.data_ptr());
    const T* bp = static_cast<const T*>(Bm.data_ptr());
    T* xp = static_cast<T*>(X.data_ptr());
    int* ip = static_cast<int*>(info.data_ptr());
    std::fill(ip, ip + nA, 0);
    if (left && is_tiny(n) && plain) {  // tiny matrices: our own kernels, one pass, no factors kept
      tiny_run<T>(n, Bn, ap, nullptr, nullptr, ip, nullptr, nullptr, bp, xp, k);
      return;
    }
    auto a_off = [&](int64_t b) { return plain ? b * n * n : ao[b]; };
    auto b_off = [&](int64_t b) { return plain ? b * n * k : bo[b]; };
    std::vector<int> piv(nA * n);
    if (left && is_tiny(n)) {
      std::vector<T> lu(nA * n * n);
      tiny_run<T>(n, nA, ap, lu.data(), piv.data(), ip, nullptr, nullptr, nullptr, nullptr, 0);
      cpu::tiny::with_n(n, [&]<int N>() {
        parallel_for(Bn, batch_grain(N, N + k), [&](int64_t b0, int64_t b1) {
          for (int64_t b = b0; b < b1; ++b) {
            const int64_t ia = a_off(b) / (N * N);
            T* dst = xp + b * r * c;
            std::copy(bp + b_off(b), bp + b_off(b) + N * k, dst);
            cpu::tiny::lu_solve<T, N>(lu.data() + ia * N * N, piv.data() + ia * N, dst, k, k);
          }
        });
      });
      return;
    }
    // each matrix of A is factored once (column-major factors kept for the solves), then every
    // matrix of the broadcast batch is solved with its A's factors
    std::vector<T> fac = lapack_matrix<T>(n, nA * n);  // (the matrices side by side)
    parallel_for(nA, batch_grain(n, n), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        if (n == 0) continue;
        T* w = fac.data() + b * n * n;
        to_cm(ap + b * n * n, n, n, w);
        ip[b] = getrf_any<T>(n, n, w, n, piv.data() + b * n, blocked_lu(nA, n, n));
      }
    });
    if (n == 0 || k == 0) return;
    parallel_for(Bn, batch_grain(n, k), [&](int64_t b0, int64_t b1) {
      std::vector<T> wb = lapack_matrix<T>(n, k);
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t ia = a_off(b) / (n * n);
        const T* w = fac.data() + ia * n * n;
        const int* p = piv.data() + ia * n;
        const T* src = bp + b_off(b);
        T* dst = xp + b * r * c;
        if (left) {
          to_cm(src, n, k, wb.data());
          lp::getrs<T>('N', int(n), int(k), w, int(n), p, wb.data(), int(n));
          from_cm(wb.data(), n, k, dst);
        } else {  // X A = B: A^T X^T = B^T, and B^T column-major is B's row-major memory
          std::copy(src, src + n * k, wb.data());
          lp::getrs<T>('T', int(n), int(k), w, int(n), p, wb.data(), int(n));
          std::copy(wb.begin(), wb.begin() + n * k, dst);
        }
      }
    });
  }, parallel_blas(std::max(nA, Bn), n));
  if (attr<bool>(a, 1))
    raise_on_info(info, A.dim() > 2, op,
                  [](int) { return std::string("The solver failed because the input matrix is singular."); });
}
KernelRegistrar k_solve_ex{"linalg_solve_ex", DeviceType::CPU, solve_ex_kernel};

void inv_ex_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const char* op = "linalg.inv";
  Tensor A = contiguous_of(in[0]);
  Tensor &Y = out[0], &info = out[1];
  const int64_t n = A.size(-1), Bn = info.numel();
  check_lapack_size(op, n, n);
  visit_lapack(A.dtype(), op, [&]<class T>() {
    const T* ap = static_cast<const T*>(A.data_ptr());
    T* yp = static_cast<T*>(Y.data_ptr());
    int* ip = static_cast<int*>(info.data_ptr());
    if (is_tiny(n)) {  // tiny matrices: our own kernels
      tiny_run<T>(n, Bn, ap, nullptr, nullptr, ip, nullptr, yp, nullptr, nullptr, 0);
      return;
    }
    // A's row-major memory is A^T column-major, and inv(A^T) column-major is inv(A) row-major: no
    // transposes. getri's workspace is asked for once.
    int lwork = 1;
    if (n > 0) {
      T q{};
      std::vector<T> qa(n * n);
      std::vector<int> qp(n);
      lp::getri<T>(int(n), qa.data(), int(n), qp.data(), &q, -1);
      lwork = std::max<int>(1, lp::work_size(q));
    }
    parallel_for(Bn, batch_grain(n, n), [&](int64_t b0, int64_t b1) {
      std::vector<int> ipiv(n);
      std::vector<T> work = lapack_vector<T>(lwork), wv = lapack_matrix<T>(n, n);
      for (int64_t b = b0; b < b1; ++b) {
        ip[b] = 0;
        if (n == 0) continue;
        T* w = wv.data();
        std::copy(ap + b * n * n, ap + (b + 1) * n * n, w);
        const bool blocked = blocked_lu(Bn, n, n);
        ip[b] = getrf_any<T>(n, n, w, n, ipiv.data(), blocked);
        // xgetri: split over the team below kParallelBlasOrder, where OpenBLAS runs on one thread;
        // from there on OpenBLAS's threads do better (float64 1024 on two: 34-39 ms against 43-55)
        if (ip[b] == 0 && blocked && n < kParallelBlasOrder) getri_team<T>(n, w, ipiv.data(), linalg_threads());
        else if (ip[b] == 0) ip[b] = lp::getri<T>(int(n), w, int(n), ipiv.data(), work.data(), lwork);
        if (ip[b] != 0) {  // torch's info is the first zero pivot of A's LU, not of A^T's: A itself again
          std::vector<T> cm = lapack_matrix<T>(n, n);
          to_cm(ap + b * n * n, n, n, cm.data());
          ip[b] = lp::getrf<T>(int(n), int(n), cm.data(), int(n), ipiv.data());
          if (ip[b] == 0) ip[b] = lp::getri<T>(int(n), cm.data(), int(n), ipiv.data(), work.data(), lwork);
          if (ip[b] == 0) from_cm(cm.data(), n, n, w);
        }
        std::copy(w, w + n * n, yp + b * n * n);
      }
    });
  }, parallel_blas(Bn, n));
  if (attr<bool>(a, 0))
    raise_on_info(info, A.dim() > 2, op, [](int i) {
      return "The diagonal element " + std::to_string(i) +
             " is zero, the inversion could not be completed because the input matrix is singular.";
    });
}
KernelRegistrar k_inv_ex{"linalg_inv_ex", DeviceType::CPU, inv_ex_kernel};

// LU of every matrix of A into LU / piv (row-major); calls f(b, diagonal of U as column-major w,
// number of row swaps) for each batch element.
template <class T, class F>
void lu_each(const char* op, const Tensor& A, T* lu, int* pp, F&& fn) {
  const int64_t n = A.size(-1), Bn = shape_numel(batch_shape(A, 2));
  check_lapack_size(op, n, n);
  const T* ap = static_cast<const T*>(A.data_ptr());
  if (is_tiny(n)) {  // tiny matrices: our own kernels; U's diagonal is where the column-major one's is
    std::vector<int> info(Bn);
    tiny_run<T>(n, Bn, ap, lu, pp, info.data(), nullptr, nullptr, nullptr, nullptr, 0);
    parallel_for(Bn, batch_grain(n, n), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        int swaps = 0;
        for (int64_t i = 0; i < n; ++i) swaps += pp[b * n + i] != i + 1;
        fn(b, lu + b * n * n, n, swaps);
      }
    });
    return;
  }
  parallel_for(Bn, batch_grain(n, n), [&](int64_t b0, int64_t b1) {
    std::vector<T> w = lapack_matrix<T>(n, n);
    for (int64_t b = b0; b < b1; ++b) {
      int swaps = 0;
      if (n > 0) {
        to_cm(ap + b * n * n, n, n, w.data());
        getrf_any<T>(n, n, w.data(), n, pp + b * n, blocked_lu(Bn, n, n));
        from_cm(w.data(), n, n, lu + b * n * n);
        for (int64_t i = 0; i < n; ++i) swaps += pp[b * n + i] != i + 1;
      }
      fn(b, w.data(), n, swaps);
    }
  });
}

void det_kernel(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  const char* op = "linalg.det";
  Tensor A = contiguous_of(in[0]);
  const int64_t n = A.size(-1), Bn = shape_numel(batch_shape(A, 2));
  visit_lapack(A.dtype(), op, [&]<class T>() {
    const T* ap = static_cast<const T*>(A.data_ptr());
    T* d = static_cast<T*>(out[0].data_ptr());
    std::vector<int> info(Bn);
    if (is_tiny(n)) {  // tiny matrices: the determinant straight from the kernel, no factors written
      tiny_run<T>(n, Bn, ap, nullptr, nullptr, info.data(), d, nullptr, nullptr, nullptr, 0);
      return;
    }
    std::vector<T> lu(Bn * n * n);
    std::vector<int> piv(Bn * n);
    lu_each<T>(op, A, lu.data(), piv.data(), [&](int64_t b, const T* w, int64_t n, int swaps) {
      T p(swaps % 2 ? -1 : 1);
      for (int64_t i = 0; i < n; ++i) p *= w[i * n + i];
      d[b] = p;
    });
  }, parallel_blas(Bn, n));
}
KernelRegistrar k_det{"linalg_det", DeviceType::CPU, det_kernel};

void slogdet_kernel(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  const char* op = "linalg.slogdet";
  Tensor A = contiguous_of(in[0]);
  visit_lapack(A.dtype(), op, [&]<class T>() {
    using R = lp::Real<T>;
    T* sg = static_cast<T*>(out[0].data_ptr());
    R* la = static_cast<R*>(out[1].data_ptr());
    lu_each<T>(op, A, static_cast<T*>(out[2].data_ptr()), static_cast<int*>(out[3].data_ptr()), [&](int64_t b, const T* w, int64_t n, int swaps) {
      T s(swaps % 2 ? -1 : 1);
      R l = 0;
      for (int64_t i = 0; i < n; ++i) {
        T u = w[i * n + i];
        R au = std::abs(u);
        if (au == R(0)) {
          s = T(0), l = -std::numeric_limits<R>::infinity();
          break;
        }
        s *= u / au;
        l += std::log(au);
      }
      sg[b] = s, la[b] = l;
    });
  }, parallel_blas(shape_numel(batch_shape(A, 2)), A.size(-1)));
}
KernelRegistrar k_slogdet{"_linalg_slogdet", DeviceType::CPU, slogdet_kernel};

// ---- Cholesky, triangular solve --------------------------------------------------------------------------
// ---- Cholesky ------------------------------------------------------------------------------------------------
// The row-major Hermitian A read as a column-major matrix is A^T = conj(A): its Cholesky factor with
// the other uplo is the transpose of A's, which read back row-major is A's factor itself (conj(A) =
// U^H U gives A = U^T conj(U), so L = U^T; likewise U = L'^T for upper). So each matrix is factored
// in a copy (lapack_matrix: see there) with the uplo flipped, with no transposed copies (they were 20% of a 1024 x
// 1024 factorization).
//
// From order kBlockedCholesky on, with more than one thread, a right-looking blocked Cholesky runs
// with the pool held as a team (decision 55): the diagonal block on LAPACK (one thread), then the
// panel's triangular solve and the trailing update split over the threads, each part a BLAS call
// on one thread (column-major; for 'U' A = U^H U: U12 = U11^-H A12, A22 -= U12^H U12; 'L' mirrored).
// OpenBLAS's own parallel potrf opens regions per call, which PASSIVE waiting makes slow (decision 60).
constexpr int64_t kBlockedCholesky = 512, kCholeskyBlock = 128;

// The blocked Cholesky above (uplo of the column-major a); returns LAPACK's info.
template <class T>
int potrf_blocked(char uplo, int64_t n, T* a, int64_t lda, int threads) {
  int info = 0;
  const bool up = uplo == 'U';
  // Every BLAS call in the team on one thread: where kiln's OpenMP runtime is not OpenBLAS's (the
  // ASan build), OpenBLAS cannot see that it is called inside a region and would split each call.
  const cpu::SerialBlas serial;
  cpu::run_as_team(threads, [&] {
    for (int64_t k0 = 0; k0 < n; k0 += kCholeskyBlock) {
      const int64_t kb = std::min(kCholeskyBlock, n - k0), r0 = k0 + kb, rest = n - r0;
      T* akk = a + k0 + k0 * lda;
      if (const int i = lp::potrf<T>(uplo, int(kb), akk, int(lda)); i != 0) {
        info = int(k0) + i;
        return;
      }
      if (rest == 0) return;
      const int64_t nblk = (rest + kCholeskyBlock - 1) / kCholeskyBlock;
      cpu::run_spmd(threads, [&](int t, int T_) {
        const int64_t c0 = rest * t / T_, c1 = rest * (t + 1) / T_;  // (columns of U12 / rows of L21)
        if (c1 <= c0) return;
        if (up) trsm_cm<T>(CblasLeft, CblasUpper, herm<T>(), CblasNonUnit, kb, c1 - c0, akk, lda, a + k0 + (r0 + c0) * lda, lda);
        else trsm_cm<T>(CblasRight, CblasLower, herm<T>(), CblasNonUnit, c1 - c0, kb, akk, lda, a + (r0 + c0) + k0 * lda, lda);
      });
      cpu::run_spmd(threads, [&](int t, int T_) {
        for (int64_t b = t; b < nblk; b += T_) {  // (interleaved: the blocks' work grows along the diagonal)
          const int64_t c0 = r0 + b * kCholeskyBlock, c1 = std::min(n, c0 + kCholeskyBlock);
          if (up)  // A(r0:c1, c0:c1) -= U12(:, r0:c1)^H U12(:, c0:c1)
            gemm_sub_cm<T>(herm<T>(), CblasNoTrans, c1 - r0, c1 - c0, kb, a + k0 + r0 * lda, lda, a + k0 + c0 * lda, lda,
                           a + r0 + c0 * lda, lda);
          else  // A(c0:n, c0:c1) -= L21(c0:n, :) L21(c0:c1, :)^H
            gemm_sub_cm<T>(CblasNoTrans, herm<T>(), n - c0, c1 - c0, kb, a + c0 + k0 * lda, lda, a + c0 + k0 * lda, lda,
                           a + c0 + c0 * lda, lda);
        }
      });
    }
  });
  return info;
}

void cholesky_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const char* op = "linalg.cholesky";
  Tensor A = contiguous_of(in[0]);
  Tensor &L = out[0], &info = out[1];
  const bool upper = attr<bool>(a, 0);
  const int64_t n = A.size(-1), Bn = info.numel();
  check_lapack_size(op, n, n);
  const char flipped = upper ? 'L' : 'U';  // (see above)
  const int threads = linalg_threads();
  const bool blocked = Bn == 1 && n >= kBlockedCholesky && threads > 1 && !cpu::in_parallel_region();
  visit_lapack(A.dtype(), op, [&]<class T>() {
    const T* ap = static_cast<const T*>(A.data_ptr());
    T* lp_ = static_cast<T*>(L.data_ptr());
    int* ip = static_cast<int*>(info.data_ptr());
    parallel_for(Bn, batch_grain(n, n), [&](int64_t b0, int64_t b1) {
      std::vector<T> wv = lapack_matrix<T>(n, n);
      for (int64_t b = b0; b < b1; ++b) {
        ip[b] = 0;
        if (n == 0) continue;
        T* w = wv.data();
        std::copy(ap + b * n * n, ap + (b + 1) * n * n, w);
        ip[b] = blocked ? potrf_blocked<T>(flipped, n, w, n, threads) : lp::potrf<T>(flipped, int(n), w, int(n));
        // OpenBLAS's potrf takes a NaN pivot (only `ajj <= 0` fails); reference LAPACK and MKL (torch) stop
        // at it. The factor's first NaN diagonal entry is the first NaN pivot.
        for (int64_t j = 0; ip[b] == 0 && j < n; ++j)
          if (std::isnan(std::real(w[j * n + j]))) ip[b] = int(j + 1);
        for (int64_t i = 0; i < n; ++i)  // the other triangle (row-major now) is zero
          for (int64_t j = 0; j < n; ++j)
            if (upper ? j < i : j > i) w[i * n + j] = T(0);
        std::copy(w, w + n * n, lp_ + b * n * n);
      }
    });
  });
  if (attr<bool>(a, 1))
    raise_on_info(info, A.dim() > 2, op, [](int i) {
      return "The factorization could not be completed because the input is not positive-definite (the leading "
             "minor of order " + std::to_string(i) + " is not positive-definite).";
    });
}
KernelRegistrar k_cholesky{"linalg_cholesky_ex", DeviceType::CPU, cholesky_kernel};

void cholesky_solve_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const char* op = "cholesky_solve";
  Tensor Bm = contiguous_of(in[0]), L = contiguous_of(in[1]);
  Tensor& X = out[0];
  const bool upper = attr<bool>(a, 0);
  const int64_t n = L.size(-1), k = X.size(-1);
  if (n == 0 || k == 0) return;
  check_lapack_size(op, n, std::max(n, k));
  const Shape batch = batch_shape(X, 2);
  const std::vector<int64_t> lo = matrix_offsets(L, batch), bo = matrix_offsets(Bm, batch);
  const int64_t Bn = shape_numel(batch);
  visit_lapack(L.dtype(), op, [&]<class T>() {
    const T* lp_ = static_cast<const T*>(L.data_ptr());
    const T* bp = static_cast<const T*>(Bm.data_ptr());
    T* xp = static_cast<T*>(X.data_ptr());
    parallel_for(Bn, batch_grain(n, n + k), [&](int64_t b0, int64_t b1) {
      std::vector<T> wl = lapack_matrix<T>(n, n), wb = lapack_matrix<T>(n, k);
      for (int64_t b = b0; b < b1; ++b) {
        to_cm(lp_ + lo[b], n, n, wl.data());
        to_cm(bp + bo[b], n, k, wb.data());
        lp::potrs<T>(upper ? 'U' : 'L', int(n), int(k), wl.data(), int(n), wb.data(), int(n));
        from_cm(wb.data(), n, k, xp + b * n * k);
      }
    });
  }, parallel_blas(Bn, n));
}
KernelRegistrar k_cholesky_solve{"cholesky_solve", DeviceType::CPU, cholesky_solve_kernel};

void cholesky_inverse_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const char* op = "cholesky_inverse";
  Tensor L = contiguous_of(in[0]);
  Tensor& Y = out[0];
  const bool upper = attr<bool>(a, 0);
  const int64_t n = L.size(-1), Bn = shape_numel(batch_shape(L, 2));
  if (n == 0) return;
  check_lapack_size(op, n, n);
  visit_lapack(L.dtype(), op, [&]<class T>() {
    const T* lp_ = static_cast<const T*>(L.data_ptr());
    T* yp = static_cast<T*>(Y.data_ptr());
    parallel_for(Bn, batch_grain(n, n), [&](int64_t b0, int64_t b1) {
      std::vector<T> w = lapack_matrix<T>(n, n);
      for (int64_t b = b0; b < b1; ++b) {
        to_cm(lp_ + b * n * n, n, n, w.data());
        lp::potri<T>(upper ? 'U' : 'L', int(n), w.data(), int(n));
        // potri fills one triangle of the Hermitian inverse: mirror it (column-major (i, j) at j*n+i)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = j + 1; i < n; ++i) {
            if (upper) w[j * n + i] = cj(w[i * n + j]);
            else w[i * n + j] = cj(w[j * n + i]);
          }
        from_cm(w.data(), n, n, yp + b * n * n);
      }
    });
  }, parallel_blas(Bn, n));
}
KernelRegistrar k_cholesky_inverse{"cholesky_inverse", DeviceType::CPU, cholesky_inverse_kernel};

template <class T>
void trsm(bool left, bool upper, bool unit, int64_t M, int64_t N, const T* A, int64_t lda, T* X, int64_t ldx) {
  const auto side = left ? CblasLeft : CblasRight;
  const auto uplo = upper ? CblasUpper : CblasLower;
  const auto diag = unit ? CblasUnit : CblasNonUnit;
  if constexpr (std::is_same_v<T, float>) {
    cblas_strsm(CblasRowMajor, side, uplo, CblasNoTrans, diag, M, N, 1.0f, A, lda, X, ldx);
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dtrsm(CblasRowMajor, side, uplo, CblasNoTrans, diag, M, N, 1.0, A, lda, X, ldx);
  } else if constexpr (std::is_same_v<T, complex64>) {
    const complex64 one(1);
    cblas_ctrsm(CblasRowMajor, side, uplo, CblasNoTrans, diag, M, N, &one, A, lda, X, ldx);
  } else {
    const complex128 one(1);
    cblas_ztrsm(CblasRowMajor, side, uplo, CblasNoTrans, diag, M, N, &one, A, lda, X, ldx);
  }
}

void solve_triangular_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const char* op = "linalg.solve_triangular";
  Tensor A = contiguous_of(in[0]), Bm = contiguous_of(in[1]);
  Tensor& X = out[0];
  const bool upper = attr<bool>(a, 0), left = attr<bool>(a, 1), unit = attr<bool>(a, 2);
  const int64_t n = A.size(-1), r = X.size(-2), c = X.size(-1);
  if (r == 0 || c == 0) return;
  check_lapack_size(op, r, c);
  const Shape batch = batch_shape(X, 2);
  const std::vector<int64_t> ao = matrix_offsets(A, batch), bo = matrix_offsets(Bm, batch);
  const int64_t Bn = shape_numel(batch);
  visit_lapack(A.dtype(), op, [&]<class T>() {
    const T* ap = static_cast<const T*>(A.data_ptr());
    const T* bp = static_cast<const T*>(Bm.data_ptr());
    T* xp = static_cast<T*>(X.data_ptr());
    parallel_for(Bn, batch_grain(n, std::max(r, c)), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        T* x = xp + b * r * c;
        std::copy(bp + bo[b], bp + bo[b] + r * c, x);
        trsm<T>(left, upper, unit, r, c, ap + ao[b], std::max<int64_t>(n, 1), x, c);
      }
    });
  }, parallel_blas(Bn, n));
}
KernelRegistrar k_solve_triangular{"linalg_solve_triangular", DeviceType::CPU, solve_triangular_kernel};

}  // namespace
}  // namespace kiln
