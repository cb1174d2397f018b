// CPU kernels of the decompositions (entries, schemas and metas: kiln/ops/linalg_decomp.cpp): QR
// and the Householder ops, and matrix_exp, through LAPACK (lapack.h; eigh, eig, SVD and pinv:
// linalg_spectral.cpp; least squares: linalg_lstsq.cpp). As in linalg.cpp each batch element is
// factored in a column-major scratch copy; every routine's workspace is asked for once per call and
// each thread chunk allocates its own.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <type_traits>
#include <string>
#include <vector>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/linalg_util.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/dispatch/op.h"
#include "kiln/ops/linalg_detail.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace cpu::linalg_util {

// Blocked QR (xgeqrf) and Q (xorgqr) for one matrix from order 256, with the pool held as a team
// (decision 55; OpenBLAS's parallel calls open a region each, decision 60): panels of 64 columns on
// the table's unblocked kernels (LAPACK's on base), T by xlarft, and the block reflector applied by
// larfb_left (two GEMMs, decision 64) to a share of the columns per thread, each BLAS call on one
// thread. geqrf looks one panel ahead (thread 0 updates and factors the next panel while the others
// update the rest). Zen 4, reduced mode, against OpenBLAS's xgeqrf + xorgqr, ms: one thread float32
// 1024^2 74.7 -> 44, float64 110 -> 89; two threads float32 1024^2 240 (OpenBLAS's own threads) ->
// 26, float64 257 -> 53.
namespace {
constexpr int64_t kQrBlock = 64;
}  // namespace

namespace {
template <class T>
void panel_qr(const cpu::KernelTable::Householder<T>* hh, int64_t m, int64_t n, T* a, int64_t lda, T* tau, T* work) {
  if (hh) hh->geqr2(m, n, a, lda, tau);
  else lp::geqr2<T>(int(m), int(n), a, int(lda), tau, work);
}
template <class T>
void panel_q(const cpu::KernelTable::Householder<T>* hh, int64_t m, int64_t n, int64_t k, T* a, int64_t lda,
             const T* tau, T* work) {
  if (hh) hh->org2r(m, n, k, a, lda, tau);
  else lp::org2r<T>(int(m), int(n), int(k), a, int(lda), tau, work);
}
}  // namespace

template <class T>
bool geqrf_blocked(int64_t m, int64_t n, T* a, int64_t lda, T* tau, int threads,
                   const std::function<bool(int64_t)>& go_on) {
  const auto* hh = householder<T>();
  const int64_t mn = std::min(m, n), nb = std::min(kQrBlock, std::max<int64_t>(mn, 1));
  // per panel (two at once: the next one is factored while the last one is applied): T and V
  std::vector<T> tf(2 * nb * nb), vf(2 * m * nb), work = lapack_vector<T>(threads * std::max<int64_t>(n, 1) * nb);
  auto half = [&](int64_t k0) { return k0 / nb % 2; };
  auto panel = [&](int64_t k0) {  // factor the panel at k0, form its T and its explicit V
    const int64_t kb = std::min(nb, mn - k0);
    T* p = a + k0 + k0 * lda;
    panel_qr<T>(hh, m - k0, kb, p, lda, tau + k0, work.data());
    lp::larft<T>(int(m - k0), int(kb), p, int(lda), tau + k0, tf.data() + half(k0) * nb * nb, int(nb));
    explicit_v<T>(m - k0, kb, p, lda, vf.data() + half(k0) * m * nb);
  };
  auto apply = [&](int64_t k0, int64_t c0, int64_t c1, int t) {  // H^H to columns [c0, c1)
    if (c0 >= c1) return;
    larfb_left<T>('C', m - k0, c1 - c0, std::min(nb, mn - k0), vf.data() + half(k0) * m * nb,
                  tf.data() + half(k0) * nb * nb, nb, a + k0 + c0 * lda, lda,
                  work.data() + t * std::max<int64_t>(n, 1) * nb);
  };
  bool stop = false;  // go_on said no: R's columns so far are final (factored panels), the rest is not
  cpu::run_as_team(threads, [&] {
    panel(0);
    stop = go_on && !go_on(std::min(nb, mn));
    for (int64_t k0 = 0; k0 < mn && !stop; k0 += nb) {
      const int64_t r0 = k0 + std::min(nb, mn - k0);
      const int64_t next = r0 < mn ? std::min(nb, mn - r0) : 0, rest0 = r0 + next, rest = n - rest0;
      cpu::run_spmd(threads, [&](int t, int T_) {
        if (t == 0 && next > 0) {
          apply(k0, r0, rest0, 0);
          panel(r0);
          stop = go_on && !go_on(rest0);
        }
        const int64_t lead = next > 0 ? std::min(rest, 2 * next) : 0, w = rest + lead;
        const int64_t b = std::max<int64_t>(0, w * t / T_ - lead), e = std::max<int64_t>(0, w * (t + 1) / T_ - lead);
        apply(k0, rest0 + b, rest0 + e, t);
      });
    }
  });
  return !stop;
}

template <class T>
void ormqr_left(char trans, int64_t m, int64_t nc, int64_t k, const T* a, int64_t lda, const T* tau, T* c,
                int64_t ldc, int threads) {
  if (m <= 0 || nc <= 0 || k <= 0) return;
  const int64_t nb = std::min(kQrBlock, k), blocks = (k + nb - 1) / nb;
  std::vector<T> tf(blocks * nb * nb), vf(blocks * m * nb), work(threads * nc * nb);
  const cpu::SerialBlas serial;
  cpu::run_as_team(threads, [&] {
    cpu::run_spmd(threads, [&](int t, int T_) {  // every block's T and V, blocks dealt round the threads
      for (int64_t b = t; b < blocks; b += T_) {
        const int64_t i0 = b * nb, ib = std::min(nb, k - i0);
        lp::larft<T>(int(m - i0), int(ib), a + i0 + i0 * lda, int(lda), tau + i0, tf.data() + b * nb * nb, int(nb));
        explicit_v<T>(m - i0, ib, a + i0 + i0 * lda, lda, vf.data() + b * m * nb);
      }
    });
    cpu::run_spmd(threads, [&](int t, int T_) {  // Q C: the last block first; Q^H C: the first
      const int64_t c0 = nc * t / T_, c1 = nc * (t + 1) / T_;
      for (int64_t s = 0; s < blocks && c0 < c1; ++s) {
        const int64_t b = trans == 'N' ? blocks - 1 - s : s, i0 = b * nb;
        larfb_left<T>(trans, m - i0, c1 - c0, std::min(nb, k - i0), vf.data() + b * m * nb, tf.data() + b * nb * nb,
                      nb, c + i0 + c0 * ldc, ldc, work.data() + t * nc * nb);
      }
    });
  });
}

#define KILN_GEQRF_BLOCKED(T) \
  template bool geqrf_blocked<T>(int64_t, int64_t, T*, int64_t, T*, int, const std::function<bool(int64_t)>&);
KILN_GEQRF_BLOCKED(float)
KILN_GEQRF_BLOCKED(double)
KILN_GEQRF_BLOCKED(complex64)
KILN_GEQRF_BLOCKED(complex128)
#undef KILN_GEQRF_BLOCKED
#define KILN_ORMQR_LEFT(T) \
  template void ormqr_left<T>(char, int64_t, int64_t, int64_t, const T*, int64_t, const T*, T*, int64_t, int);
KILN_ORMQR_LEFT(float)
KILN_ORMQR_LEFT(double)
KILN_ORMQR_LEFT(complex64)
KILN_ORMQR_LEFT(complex128)
#undef KILN_ORMQR_LEFT

}  // namespace cpu::linalg_util

namespace {

using namespace cpu::linalg_util;
using cpu::contiguous_of;
using cpu::parallel_for;

// ---- QR --------------------------------------------------------------------------------------------------------
// a (m x n): the first n columns of Q from k reflectors (geqrf's, in the first k columns).
template <class T>
void orgqr_blocked(int64_t m, int64_t n, int64_t k, T* a, int64_t lda, const T* tau, int threads) {
  const auto* hh = householder<T>();
  const int64_t nb = kQrBlock;
  std::vector<T> tf(nb * nb), vf(m * nb), work = lapack_vector<T>(threads * std::max<int64_t>(n, 1) * nb);
  const int64_t last = k > 0 ? (k - 1) / nb * nb : 0;  // the last block: unblocked, with the columns after it
  auto zero_above = [&](int64_t r, int64_t c0, int64_t c1) {
    for (int64_t j = c0; j < c1; ++j) std::fill(a + j * lda, a + j * lda + r, T(0));
  };
  cpu::run_as_team(threads, [&] {
    panel_q<T>(hh, m - last, n - last, k - last, a + last + last * lda, lda, tau + last, work.data());
    zero_above(last, last, n);
    for (int64_t i = last - nb; i >= 0; i -= nb) {
      lp::larft<T>(int(m - i), int(nb), a + i + i * lda, int(lda), tau + i, tf.data(), int(nb));
      explicit_v<T>(m - i, nb, a + i + i * lda, lda, vf.data());
      const int64_t c0 = i + nb, cols = n - c0;
      cpu::run_spmd(threads, [&](int t, int T_) {
        const int64_t b = c0 + cols * t / T_, e = c0 + cols * (t + 1) / T_;
        larfb_left<T>('N', m - i, e - b, nb, vf.data(), tf.data(), nb, a + i + b * lda, lda,
                      work.data() + t * std::max<int64_t>(n, 1) * nb);
      });
      panel_q<T>(hh, m - i, nb, nb, a + i + i * lda, lda, tau + i, work.data());
      zero_above(i, i, i + nb);
    }
  });
}

void qr_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const char* op = "linalg.qr";
  Tensor A = contiguous_of(in[0]);
  const std::string& mode = attr<std::string>(a, 0);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n), Bn = shape_numel(batch_shape(A, 2));
  const bool complete = mode == "complete", want_q = mode != "r";
  const int64_t qc = complete ? m : k, rr = complete ? m : k;
  check_lapack_size(op, m, std::max(n, qc));
  visit_lapack(A.dtype(), op, [&]<class T>() {
    const T* ap = static_cast<const T*>(A.data_ptr());
    T* qp = want_q ? static_cast<T*>(out[0].data_ptr()) : nullptr;
    T* rp = static_cast<T*>(out[1].data_ptr());
    const auto* hh = householder<T>();
    const bool small = hh && use_small_qr<T>(m, n, qc);
    const int threads = linalg_threads();
    const bool blocked = !small && Bn == 1 && std::min(m, n) >= kBlockedQr && !cpu::in_parallel_region();
    int lw = 1;
    if (!small && m > 0 && n > 0) {
      T q{};
      std::vector<T> qa(m * n), qt(k);
      lp::geqrf<T>(int(m), int(n), qa.data(), int(m), qt.data(), &q, -1);
      lw = std::max(lw, lp::work_size(q));
    }
    if (!small && want_q && m > 0 && qc > 0) {
      T q{};
      std::vector<T> qa(m * qc), qt(std::max<int64_t>(k, 1));
      lp::orgqr<T>(int(m), int(qc), int(k), qa.data(), int(m), qt.data(), &q, -1);
      lw = std::max(lw, lp::work_size(q));
    }
    parallel_for(Bn, batch_grain(m, n), [&](int64_t b0, int64_t b1) {
      std::vector<T> w = lapack_matrix<T>(m, n), tau = lapack_vector<T>(std::max<int64_t>(k, 1)),
                     q = lapack_matrix<T>(m, want_q ? qc : 0), work = lapack_vector<T>(lw);
      for (int64_t b = b0; b < b1; ++b) {
        if (m > 0 && n > 0) {
          to_cm(ap + b * m * n, m, n, w.data());
          if (small) hh->geqr2(m, n, w.data(), m, tau.data());
          else if (blocked) geqrf_blocked<T>(m, n, w.data(), m, tau.data(), threads);
          else lp::geqrf<T>(int(m), int(n), w.data(), int(m), tau.data(), work.data(), lw);
        }
        T* r = rp + b * rr * n;  // the first rr rows of w (column-major), then zeros below the diagonal
        if (rr > 0 && n > 0) transpose_tiles(w.data(), n, std::min(rr, m), m, r, n);
        for (int64_t i = 0; i < rr; ++i) std::fill(r + i * n, r + i * n + std::min(i, n), T(0));
        if (!want_q || m == 0 || qc == 0) continue;
        std::fill(q.begin(), q.end(), T(0));
        std::copy(w.begin(), w.begin() + m * std::min(qc, n), q.begin());  // the reflectors' columns
        if (small) hh->org2r(m, qc, k, q.data(), m, tau.data());
        else if (blocked) orgqr_blocked<T>(m, qc, k, q.data(), m, tau.data(), threads);
        else lp::orgqr<T>(int(m), int(qc), int(k), q.data(), int(m), tau.data(), work.data(), lw);
        from_cm(q.data(), m, qc, qp + b * m * qc);
      }
    });
  });
}
KernelRegistrar k_qr{"linalg_qr", DeviceType::CPU, qr_kernel};

void geqrf_kernel(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  const char* op = "geqrf";
  Tensor A = contiguous_of(in[0]);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n), Bn = shape_numel(batch_shape(A, 2));
  if (k == 0) return;
  check_lapack_size(op, m, n);
  visit_lapack(A.dtype(), op, [&]<class T>() {
    const T* ap = static_cast<const T*>(A.data_ptr());
    T* op_ = static_cast<T*>(out[0].data_ptr());
    T* tp = static_cast<T*>(out[1].data_ptr());
    T q{};
    std::vector<T> qa(m * n), qt(k);
    lp::geqrf<T>(int(m), int(n), qa.data(), int(m), qt.data(), &q, -1);
    const int lw = std::max(1, lp::work_size(q));
    parallel_for(Bn, batch_grain(m, n), [&](int64_t b0, int64_t b1) {
      std::vector<T> w = lapack_matrix<T>(m, n), work = lapack_vector<T>(lw);
      for (int64_t b = b0; b < b1; ++b) {
        to_cm(ap + b * m * n, m, n, w.data());
        lp::geqrf<T>(int(m), int(n), w.data(), int(m), tp + b * k, work.data(), lw);
        from_cm(w.data(), m, n, op_ + b * m * n);
      }
    });
  });
}
KernelRegistrar k_geqrf{"geqrf", DeviceType::CPU, geqrf_kernel};

void householder_kernel(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  const char* op = "householder_product";
  Tensor A = contiguous_of(in[0]), tau = contiguous_of(in[1]);
  const int64_t m = A.size(-2), n = A.size(-1), k = tau.size(-1), Bn = shape_numel(batch_shape(A, 2));
  if (m == 0 || n == 0) return;
  check_lapack_size(op, m, n);
  visit_lapack(A.dtype(), op, [&]<class T>() {
    const T* ap = static_cast<const T*>(A.data_ptr());
    const T* tp = static_cast<const T*>(tau.data_ptr());
    T* yp = static_cast<T*>(out[0].data_ptr());
    T q{};
    std::vector<T> qa(m * n), qt(std::max<int64_t>(k, 1));
    lp::orgqr<T>(int(m), int(n), int(k), qa.data(), int(m), qt.data(), &q, -1);
    const int lw = std::max(1, lp::work_size(q));
    parallel_for(Bn, batch_grain(m, n), [&](int64_t b0, int64_t b1) {
      std::vector<T> w = lapack_matrix<T>(m, n), work = lapack_vector<T>(lw);
      for (int64_t b = b0; b < b1; ++b) {
        to_cm(ap + b * m * n, m, n, w.data());
        lp::orgqr<T>(int(m), int(n), int(k), w.data(), int(m), tp + b * k, work.data(), lw);
        from_cm(w.data(), m, n, yp + b * m * n);
      }
    });
  });
}
KernelRegistrar k_householder{"linalg_householder_product", DeviceType::CPU, householder_kernel};

void ormqr_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const char* op = "ormqr";
  Tensor A = contiguous_of(in[0]), tau = contiguous_of(in[1]), C = contiguous_of(in[2]);
  const bool left = attr<bool>(a, 0), transpose = attr<bool>(a, 1);
  const int64_t mq = A.size(-2), na = A.size(-1), k = tau.size(-1);
  const int64_t r = C.size(-2), c = C.size(-1), Bn = shape_numel(batch_shape(C, 2));
  if (r == 0 || c == 0) return;
  check_lapack_size(op, std::max(mq, r), std::max(na, c));
  visit_lapack(A.dtype(), op, [&]<class T>() {
    const T* ap = static_cast<const T*>(A.data_ptr());
    const T* tp = static_cast<const T*>(tau.data_ptr());
    const T* cp = static_cast<const T*>(C.data_ptr());
    T* yp = static_cast<T*>(out[0].data_ptr());
    const char side = left ? 'L' : 'R', trans = transpose ? (lp::is_cplx<T> ? 'C' : 'T') : 'N';
    T q{};
    std::vector<T> qa(mq * na), qt(std::max<int64_t>(k, 1)), qc(r * c);
    lp::ormqr<T>(side, trans, int(r), int(c), int(k), qa.data(), int(mq), qt.data(), qc.data(), int(r), &q, -1);
    const int lw = std::max(1, lp::work_size(q));
    parallel_for(Bn, batch_grain(r, c), [&](int64_t b0, int64_t b1) {
      std::vector<T> wa = lapack_matrix<T>(mq, na), wc = lapack_matrix<T>(r, c), work = lapack_vector<T>(lw);
      for (int64_t b = b0; b < b1; ++b) {
        to_cm(ap + b * mq * na, mq, na, wa.data());
        to_cm(cp + b * r * c, r, c, wc.data());
        lp::ormqr<T>(side, trans, int(r), int(c), int(k), wa.data(), int(mq), tp + b * k, wc.data(), int(r),
                     work.data(), lw);
        from_cm(wc.data(), r, c, yp + b * r * c);
      }
    });
  });
}
KernelRegistrar k_ormqr{"ormqr", DeviceType::CPU, ormqr_kernel};

// ---- matrix_exp ------------------------------------------------------------------------------------------------
// C = A B, n x n row-major.
template <class T>
void mm(int64_t n, const T* A, const T* B, T* C) {
  gemm<T>(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, A, n, B, n, C, n);
}

// exp(A) by Higham's degree-13 Padé approximant after scaling A by 2^-s to ||A||_1 <= theta_13, then
// s squarings (accurate to double precision, so to float's too).
template <class T>
void expm(int64_t n, const T* a, T* y) {
  using R = lp::Real<T>;
  static const double b[14] = {64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
                               129060195264000.,   10559470521600.,   670442572800.,     33522128640.,
                               1323241920.,        40840800.,         960960.,           16380.,
                               182.,               1.};
  const double theta13 = 5.371920351148152;
  double norm1 = 0;
  for (int64_t j = 0; j < n; ++j) {
    double c = 0;
    for (int64_t i = 0; i < n; ++i) c += double(std::abs(a[i * n + j]));
    norm1 = std::max(norm1, c);
  }
  const int64_t nn = n * n;
  if (!std::isfinite(norm1)) {
    std::fill(y, y + nn, T(std::numeric_limits<R>::quiet_NaN()));
    return;
  }
  const int s = norm1 > theta13 ? int(std::ceil(std::log2(norm1 / theta13))) : 0;
  const R scale = std::ldexp(R(1), -s);
  std::vector<T> A(nn), A2(nn), A4(nn), A6(nn), U(nn), V(nn), t(nn);
  for (int64_t i = 0; i < nn; ++i) A[i] = a[i] * scale;
  mm(n, A.data(), A.data(), A2.data());
  mm(n, A2.data(), A2.data(), A4.data());
  mm(n, A4.data(), A2.data(), A6.data());
  auto R_ = [](double x) { return R(x); };
  // U = A [A6 (b13 A6 + b11 A4 + b9 A2) + b7 A6 + b5 A4 + b3 A2 + b1 I]
  for (int64_t i = 0; i < nn; ++i) t[i] = R_(b[13]) * A6[i] + R_(b[11]) * A4[i] + R_(b[9]) * A2[i];
  mm(n, A6.data(), t.data(), U.data());
  for (int64_t i = 0; i < nn; ++i) U[i] += R_(b[7]) * A6[i] + R_(b[5]) * A4[i] + R_(b[3]) * A2[i];
  for (int64_t i = 0; i < n; ++i) U[i * n + i] += R_(b[1]);
  mm(n, A.data(), U.data(), t.data());
  std::swap(U, t);
  // V = A6 (b12 A6 + b10 A4 + b8 A2) + b6 A6 + b4 A4 + b2 A2 + b0 I
  for (int64_t i = 0; i < nn; ++i) t[i] = R_(b[12]) * A6[i] + R_(b[10]) * A4[i] + R_(b[8]) * A2[i];
  mm(n, A6.data(), t.data(), V.data());
  for (int64_t i = 0; i < nn; ++i) V[i] += R_(b[6]) * A6[i] + R_(b[4]) * A4[i] + R_(b[2]) * A2[i];
  for (int64_t i = 0; i < n; ++i) V[i * n + i] += R_(b[0]);
  // (V - U) X = (V + U), column-major for LAPACK
  std::vector<T> P = lapack_matrix<T>(n, n), Q = lapack_matrix<T>(n, n);
  std::vector<int> ipiv(n);
  to_cm(V.data(), n, n, P.data());
  to_cm(U.data(), n, n, Q.data());
  for (int64_t i = 0; i < nn; ++i) {
    T v = P[i], u = Q[i];
    P[i] = v - u, Q[i] = v + u;
  }
  lp::getrf<T>(int(n), int(n), P.data(), int(n), ipiv.data());
  lp::getrs<T>('N', int(n), int(n), P.data(), int(n), ipiv.data(), Q.data(), int(n));
  from_cm(Q.data(), n, n, A.data());
  for (int k = 0; k < s; ++k) {
    mm(n, A.data(), A.data(), t.data());
    std::swap(A, t);
  }
  std::copy(A.begin(), A.end(), y);
}

void matrix_exp_kernel(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  const char* op = "linalg.matrix_exp";
  Tensor A = contiguous_of(in[0]);
  const int64_t n = A.size(-1), Bn = shape_numel(batch_shape(A, 2));
  if (n == 0) return;
  check_lapack_size(op, n, n);
  visit_lapack(A.dtype(), op, [&]<class T>() {
    const T* ap = static_cast<const T*>(A.data_ptr());
    T* yp = static_cast<T*>(out[0].data_ptr());
    parallel_for(Bn, batch_grain(n, n), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) expm<T>(n, ap + b * n * n, yp + b * n * n);
    });
  }, parallel_blas(Bn, n));
}
KernelRegistrar k_matrix_exp{"linalg_matrix_exp", DeviceType::CPU, matrix_exp_kernel};

}  // namespace
}  // namespace kiln
