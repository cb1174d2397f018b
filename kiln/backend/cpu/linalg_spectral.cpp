// CPU kernels of the spectral decompositions (entries, schemas and metas: kiln/ops/linalg_decomp.cpp):
// eigh, eig, SVD and pinv, through LAPACK (lapack.h) and, for small matrices, the kernel table's
// Householder kernels. As in linalg.cpp each batch element is factored in a column-major scratch
// copy; every routine's workspace is asked for once per call and each thread chunk allocates its own.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
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
namespace {

using namespace cpu::linalg_util;
using cpu::contiguous_of;
using cpu::parallel_for;

template <class T>
bool all_finite(const T* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(std::abs(p[i]))) return false;
  return true;
}

// ---- eigh ------------------------------------------------------------------------------------------------------
// Small matrices are reduced to tridiagonal form and back-transformed on the table's unblocked
// kernels (xsytd2 / xhetd2 and xorm2r / xunm2r, kernels_householder.cpp) around LAPACK's tridiagonal
// solvers (xstedc with vectors, xsterf without), which is xsyevd / xheevd's own sequence: OpenBLAS's
// xsytrd and xormtr make BLAS calls per column there (Zen 4, one thread, float32 64 x 64: sytrd 39
// us and ormtr 25 us of syevd's 180). Up to 64 KiB of real and 200 KiB of complex matrix, where
// they win (syevd -> this, us: float32 64^2 181 -> 143, 128^2 666 -> 627, 160^2 1017 against 1073;
// float64 64^2 263 -> 224, 96^2 580 -> 554, 128^2 1065 against 1083; complex64 64^2 328 -> 224,
// 160^2 2371 -> 1981; complex128 64^2 433 -> 369, 96^2 1109 -> 1007, 128^2 level).
template <class T>
bool use_small_eigh(int64_t n) {
  return n * n * static_cast<int64_t>(sizeof(T)) <= (lp::is_cplx<T> ? 200 : 64) * 1024;
}

// Eigenvalues (ascending) and optionally eigenvectors of Hermitian n x n matrices held column-major
// (uplo's triangle read), in xsyevd / xheevd's sequence: xsyevd's scaling of a matrix whose largest
// element lies outside [sqrt(smlnum), sqrt(bignum)], the tridiagonal reduction, xstedc (xsterf
// without vectors), the back-transformation. Small matrices on the table's kernels (above); larger
// ones on xsytrd / xhetrd of the lower triangle (uplo 'U': the upper one's conjugate copied there)
// and ormqr_left (block reflectors as two GEMMs, shared by the threads: Zen 4, 1024, one thread,
// float32 127 -> 99 ms, float64 209 -> 193 against xormtr with its blocked workspace, which xheevd
// itself does not even give it: with n elements xunmtr falls back to the unblocked xunm2l / xunm2r,
// complex64 1024 xheevd 340 ms against 233 for its steps), the back-transformation split by columns
// over `threads` (one matrix on the pool). Workspace sizes are fixed at construction (on the calling
// thread); each thread makes its own Scratch.
template <class T>
class HermitianEig {
 public:
  using R = lp::Real<T>;
  struct Scratch {
    std::vector<T> work, tau, vec;
    std::vector<R> rwork, e, z;
    std::vector<int> iwork;
  };

  HermitianEig(bool vectors, char uplo, int64_t n, int threads = 1) : vectors_(vectors), uplo_(uplo), n_(n) {
    hh_ = householder<T>();
    if (hh_ && !use_small_eigh<T>(n)) hh_ = nullptr;
    // The split pays from about 512 KiB of matrix (Zen 4, two threads: float64 256^2 5.5 -> 4.7 ms,
    // complex64 256^2 6.5 -> 5.1; float32 256^2 level; all types 1024^2 a quarter off); at most one
    // thread per 128 columns.
    const int64_t bytes = n * n * int64_t(sizeof(T));
    if (!hh_ && vectors_ && bytes >= 512 * 1024) threads_ = int(std::clamp<int64_t>(n / 128, 1, threads));
    if (vectors_ && n > 1) lrw_ = int(1 + 4 * n + n * n), liw_ = int(3 + 5 * n);  // (eigh_kernel checks them)
    if (hh_ || n == 0) return;
    T q{}, qa{}, qt{};  // (a query reads no array)
    R qd{}, qe{};
    lp::hetrd<T>('L', int(n), &qa, int(n), &qd, &qe, &qt, &q, -1);
    lw_ = std::max(1, lp::work_size(q));
  }

  Scratch scratch() const {
    Scratch s;
    s.work = lapack_vector<T>(hh_ ? 0 : lw_);
    s.tau = lapack_vector<T>(std::max<int64_t>(n_, 1));
    s.e.resize(std::max<int64_t>(n_, 1));
    s.rwork.resize(lrw_);
    s.iwork.resize(liw_);
    if (vectors_) s.vec = lapack_matrix<T>(n_, n_), s.z.resize(lp::is_cplx<T> ? n_ * n_ : 0);
    return s;
  }

  // a (destroyed): the matrix; lam: the eigenvalues. Returns the eigenvectors (column-major, in s)
  // when asked for; info: xstedc's / xsterf's.
  const T* run(T* a, R* lam, Scratch& s, int& info) const {
    const int64_t n = n_;
    info = 0;
    // The elements read: the table's xsytd2 reads both triangles (the other := the conjugate of
    // uplo's), LAPACK's xsytrd / xhetrd the lower one (uplo 'U': the conjugate of the upper copied
    // there first, in tiles).
    const auto each = [&](auto&& f) {  // f(element, on the diagonal)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = hh_ ? 0 : j; i < n; ++i) f(a[i + j * n], i == j);
    };
    // the other triangle := the conjugate of uplo's (table: both; LAPACK: the lower one), in tiles
    if (hh_ || uplo_ == 'U')
      for (int64_t j0 = 0; j0 < n; j0 += 32)
        for (int64_t i0 = j0; i0 < n; i0 += 32)
          for (int64_t j = j0; j < std::min(n, j0 + 32); ++j)
            for (int64_t i = std::max(i0, j + 1); i < std::min(n, i0 + 32); ++i) {
              if (uplo_ == 'L') a[j + i * n] = conj_of(a[i + j * n]);
              else a[i + j * n] = conj_of(a[j + i * n]);
            }
    R anrm = 0;
    each([&](T& x, bool diag) {
      if constexpr (lp::is_cplx<T>)
        if (diag) x.imag(0);  // (not read)
      anrm = std::max(anrm, R(std::abs(x)));
    });
    const double smlnum = double(std::numeric_limits<R>::min()) / double(std::numeric_limits<R>::epsilon());
    const double rmin = std::sqrt(smlnum), rmax = std::sqrt(1 / smlnum);
    double sigma = 1;
    if (anrm > 0 && anrm < rmin) sigma = rmin / anrm;
    else if (anrm > rmax) sigma = rmax / anrm;
    if (sigma != 1) each([&](T& x, bool) { x *= R(sigma); });
    T* tau = s.tau.data();
    R* e = s.e.data();
    if (hh_) hh_->sytd2(n, a, n, lam, e, tau);
    else lp::hetrd<T>('L', int(n), a, int(n), lam, e, tau, s.work.data(), lw_);
    const T* vecs = nullptr;
    if (!vectors_) {
      info = lp::sterf<R>(int(n), lam, e);
    } else {
      R* z = lp::is_cplx<T> ? s.z.data() : reinterpret_cast<R*>(s.vec.data());
      info = lp::stedc<R>('I', int(n), lam, e, z, int(n), s.rwork.data(), lrw_, s.iwork.data(), liw_);
      if constexpr (lp::is_cplx<T>) std::copy(z, z + n * n, s.vec.begin());
      T* v = s.vec.data();
      if (hh_) {
        if (n > 1) hh_->orm2r_n(n - 1, n, n - 1, a + 1, n, tau, v + 1, n);  // Q = diag(1, H(0) ... H(n-2))
      } else {  // the same Q from xhetrd's reflectors below the subdiagonal
        ormqr_left<T>('N', n - 1, n, n - 1, a + 1, n, tau, v + 1, n, threads_);
      }
      vecs = v;
    }
    if (sigma != 1) {
      const R inv = R(1) / R(sigma);
      for (int64_t i = 0; i < n; ++i) lam[i] *= inv;
    }
    return vecs;
  }

 private:
  static T conj_of(T x) {
    if constexpr (lp::is_cplx<T>) return std::conj(x);
    else return x;
  }
  const cpu::KernelTable::Householder<T>* hh_ = nullptr;
  bool vectors_;
  char uplo_;
  int64_t n_;
  int threads_ = 1;
  int lw_ = 1, lrw_ = 1, liw_ = 1;
};

// xstedc's real workspace, 1 + 4n + n^2, is a 32-bit LAPACK size too.
inline void check_eigh_workspace(const char* op, int64_t n) {
  KILN_CHECK(1 + 4 * n + n * n <= INT_MAX, Runtime, op, "a ", n, " by ", n,
             " matrix is too large for LAPACK's 32-bit workspace sizes");
}

// Whether the elements eigh reads (uplo's triangle, the diagonal's real parts) of Bn row-major n x n
// matrices are finite; the rest is not read, as in torch.
template <class T>
bool hermitian_finite(const T* a, int64_t Bn, int64_t n, char uplo) {
  for (int64_t b = 0; b < Bn; ++b)
    for (int64_t i = 0; i < n; ++i) {
      const T* row = a + (b * n + i) * n;
      const int64_t j0 = uplo == 'L' ? 0 : i + 1, j1 = uplo == 'L' ? i : n;
      if (!all_finite(row + j0, j1 - j0) || !std::isfinite(std::real(row[i]))) return false;
    }
  return true;
}

void eigh_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const char* op = "linalg.eigh";
  Tensor A = contiguous_of(in[0]);
  const std::string& uplo_s = attr<std::string>(a, 0);
  const char uplo = uplo_s == "U" || uplo_s == "u" ? 'U' : 'L';
  const bool v = attr<bool>(a, 1);
  const int64_t n = A.size(-1), Bn = shape_numel(batch_shape(A, 2));
  Tensor info = make_tensor(batch_shape(A, 2), kInt32);
  int* ip = static_cast<int*>(info.data_ptr());
  std::fill(ip, ip + info.numel(), 0);
  check_lapack_size(op, n, n);
  check_eigh_workspace(op, n);
  bool finite = true;
  visit_lapack(A.dtype(), op, [&]<class T>() {
    using R = lp::Real<T>;
    const T* ap = static_cast<const T*>(A.data_ptr());
    R* lp_ = static_cast<R*>(out[0].data_ptr());
    T* vp = v ? static_cast<T*>(out[1].data_ptr()) : nullptr;
    finite = hermitian_finite(ap, Bn, n, uplo);  // LAPACK on NaN is left alone: it may iterate to its limit
    if (!finite || n == 0) return;
    const bool one = Bn == 1 && !cpu::in_parallel_region();  // one matrix: the pool on its steps
    const HermitianEig<T> eig(v, uplo, n, one ? linalg_threads() : 1);
    parallel_for(Bn, batch_grain(n, n), [&](int64_t b0, int64_t b1) {
      std::vector<T> w = lapack_matrix<T>(n, n);
      auto scratch = eig.scratch();
      for (int64_t b = b0; b < b1; ++b) {
        to_cm(ap + b * n * n, n, n, w.data());
        const T* vecs = eig.run(w.data(), lp_ + b * n, scratch, ip[b]);
        if (v) from_cm(vecs, n, n, vp + b * n * n);
      }
    });
  });
  KILN_CHECK(finite, LinAlg, op, "The algorithm failed to converge because the input matrix contained non-finite "
             "values.");
  raise_on_info(info, A.dim() > 2, op, [](int i) {
    return "The algorithm failed to converge because the input matrix is ill-conditioned or has too many repeated "
           "eigenvalues (error code: " + std::to_string(i) + ").";
  });
}
KernelRegistrar k_eigh{"_linalg_eigh", DeviceType::CPU, eigh_kernel};

// ---- eig -------------------------------------------------------------------------------------------------------
void eig_kernel(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  const char* op = "linalg.eig";
  Tensor A = contiguous_of(in[0]);
  const int64_t n = A.size(-1), Bn = shape_numel(batch_shape(A, 2));
  Tensor info = make_tensor(batch_shape(A, 2), kInt32);
  int* ip = static_cast<int*>(info.data_ptr());
  std::fill(ip, ip + info.numel(), 0);
  check_lapack_size(op, n, n);
  bool finite = true;
  visit_lapack(A.dtype(), op, [&]<class T>() {
    using R = lp::Real<T>;
    using C = std::complex<R>;
    const T* ap = static_cast<const T*>(A.data_ptr());
    C* wp = static_cast<C*>(out[0].data_ptr());
    C* vp = static_cast<C*>(out[1].data_ptr());
    finite = all_finite(ap, Bn * n * n);
    if (!finite || n == 0) return;
    T wq{};
    {  // the query gets real buffers: some LAPACK builds touch them
      std::vector<T> qa(n * n), qw(n), qv(n * n);
      std::vector<R> qi(n), qr(2 * n);
      lp::geev<T>('V', int(n), qa.data(), int(n), qw.data(), qi.data(), qv.data(), int(n), &wq, -1, qr.data());
    }
    const int lw = std::max(1, lp::work_size(wq));
    parallel_for(Bn, batch_grain(n, n), [&](int64_t b0, int64_t b1) {
      std::vector<T> w = lapack_matrix<T>(n, n), vr = lapack_matrix<T>(n, n), work = lapack_vector<T>(lw),
                     ev = lapack_vector<T>(n);
      std::vector<R> wi(n), rwork(2 * n);
      for (int64_t b = b0; b < b1; ++b) {
        to_cm(ap + b * n * n, n, n, w.data());
        ip[b] = lp::geev<T>('V', int(n), w.data(), int(n), ev.data(), wi.data(), vr.data(), int(n), work.data(), lw,
                            rwork.data());
        C* W = wp + b * n;
        C* V = vp + b * n * n;  // row-major: V[i * n + j] is component i of vector j
        if constexpr (lp::is_cplx<T>) {
          for (int64_t j = 0; j < n; ++j) W[j] = ev[j];
          from_cm(vr.data(), n, n, V);
        } else {
          // real geev packs a complex pair (wi > 0 first) as two real columns: re, im
          for (int64_t j = 0; j < n; ++j) {
            W[j] = C(ev[j], wi[j]);
            if (wi[j] == R(0)) {
              for (int64_t i = 0; i < n; ++i) V[i * n + j] = C(vr[j * n + i], 0);
            } else if (wi[j] > R(0) && j + 1 < n) {
              W[j + 1] = C(ev[j + 1], wi[j + 1]);
              for (int64_t i = 0; i < n; ++i) {
                V[i * n + j] = C(vr[j * n + i], vr[(j + 1) * n + i]);
                V[i * n + j + 1] = C(vr[j * n + i], -vr[(j + 1) * n + i]);
              }
              ++j;
            }
          }
        }
      }
    });
  });
  KILN_CHECK(finite, Runtime, op, "torch.linalg.eig: input tensor should not contain infs or NaNs.");
  raise_on_info(info, A.dim() > 2, op, [](int) {
    return std::string("The QR algorithm failed to compute all the eigenvalues.");
  });
}
KernelRegistrar k_eig{"linalg_eig", DeviceType::CPU, eig_kernel};

// ---- SVD -------------------------------------------------------------------------------------------------------
// Entries near the dtype's range limits are scaled by a power of two (exact) before the
// factorisation and the singular values unscaled after, so the SVD stays accurate there.
template <class T>
lp::Real<T> range_scale(const T* p, int64_t count) {
  using R = lp::Real<T>;
  R amax = 0;
  for (int64_t i = 0; i < count; ++i) amax = std::max(amax, std::abs(p[i]));
  const R big = std::ldexp(R(1), std::numeric_limits<R>::max_exponent / 2);
  const R small = std::ldexp(R(1), std::numeric_limits<R>::min_exponent / 2);
  if (amax == R(0) || (amax < big && amax > small)) return R(1);
  int e = 0;
  std::frexp(amax, &e);
  return std::ldexp(R(1), -e);
}

// One matrix not far from square (max(m, n) < 5/3 min(m, n)) with its singular vectors, on the pool:
// xgesdd's own steps for it (dgesdd's path 5, zgesdd's path 6, or their m < n forms) by hand, the
// two back-transformations on ormqr_left (block reflectors as two GEMMs, each split by columns over
// the threads), as eigh's. Zen 4, float64 1024^2, xgesdd's own steps on one thread: xgebrd 175 ms,
// xbdsdc 150, the back-transformations (xormbr) Q 81 and P 60.
// P's reflectors, stored by rows (conjugated), become columns of their conjugate transpose, and
// Vh = Vb^H P^H is computed as (P Vb)^H. OpenBLAS stays on one thread throughout. (Before, each
// thread ran LAPACK's xormbr on its share with its own copy of the reflectors: the sanitizer
// build's Python run crashed in it now and then, also with one OpenMP runtime, decision 74.)
// a: column-major, within xgesdd's unscaled range; u (m x uc) and vt (vr x n) column-major.
inline constexpr int64_t kSvdOnPool = 256;
template <class T>
int svd_on_pool(int64_t m, int64_t n, bool full, T* a, lp::Real<T>* s, T* u, T* vt, int threads) {
  using R = lp::Real<T>;
  const int64_t k = std::min(m, n), uc = full ? m : k, vr = full ? n : k, ldu = m, ldvt = vr;
  std::vector<R> e(k);
  std::vector<T> tauq(k), taup(k);
  T q{};
  lp::gebrd<T>(int(m), int(n), a, int(m), s, e.data(), tauq.data(), taup.data(), &q, -1);
  {
    const int lw = std::max(1, lp::work_size(q));
    std::vector<T> work = lapack_vector<T>(lw);
    lp::gebrd<T>(int(m), int(n), a, int(m), s, e.data(), tauq.data(), taup.data(), work.data(), lw);
  }
  // The bidiagonal SVD: into U's and Vh's leading k x k blocks (real ones first where T is complex);
  // with full matrices the rest of the larger one is the identity's.
  std::fill(u, u + ldu * uc, T(0));
  std::fill(vt, vt + ldvt * n, T(0));
  if (m > k && full)
    for (int64_t i = k; i < m; ++i) u[i + i * ldu] = T(1);
  if (n > k && full)
    for (int64_t i = k; i < n; ++i) vt[i + i * ldvt] = T(1);
  {
    std::vector<R> bw(3 * k * k + 4 * k), ub(lp::is_cplx<T> ? k * k : 0), vb(lp::is_cplx<T> ? k * k : 0);
    std::vector<int> iw(8 * k);
    R* ur = lp::is_cplx<T> ? ub.data() : reinterpret_cast<R*>(u);
    R* vr_ = lp::is_cplx<T> ? vb.data() : reinterpret_cast<R*>(vt);
    const int64_t ldur = lp::is_cplx<T> ? k : ldu, ldvr = lp::is_cplx<T> ? k : ldvt;
    const int info = lp::bdsdc<R>(m >= n ? 'U' : 'L', 'I', int(k), s, e.data(), ur, int(ldur), vr_, int(ldvr),
                                  bw.data(), iw.data());
    if (info != 0) return info;
    if constexpr (lp::is_cplx<T>)
      for (int64_t j = 0; j < k; ++j)
        for (int64_t i = 0; i < k; ++i) u[i + j * ldu] = ub[i + j * k], vt[i + j * ldvt] = vb[i + j * k];
  }
  // U := Q Ub. Q = H(0) ... H(k-1) below the diagonal (m >= n), or H(0) ... H(m-2) below the
  // subdiagonal (m < n).
  if (m >= n) ormqr_left<T>('N', m, uc, n, a, m, tauq.data(), u, ldu, threads);
  else ormqr_left<T>('N', m - 1, uc, m - 1, a + 1, m, tauq.data(), u + 1, ldu, threads);
  // Vh^H := P Vb. P = G(0) ... G(p-1), G(i) = I - taup(i) v v^H with v's tail stored conjugated in
  // row i right of the superdiagonal (m >= n: p = n - 1, v's unit at i + 1) or of the diagonal
  // (m < n: p = m, unit at i): their conjugate transpose holds them as columns, as xgeqrf's.
  const int64_t off = m >= n ? 1 : 0, p = m >= n ? n - 1 : m, rows = n - off;
  std::vector<T> refl = lapack_matrix<T>(rows, p), y = lapack_matrix<T>(n, vr);
  for (int64_t j = 0; j < p; ++j)
    for (int64_t r = j + 1; r < rows; ++r) refl[r + j * rows] = cj(a[j + (r + off) * m]);
  const auto conj_all = [](std::vector<T>& x) {
    if constexpr (lp::is_cplx<T>)
      for (T& v : x) v = std::conj(v);
  };
  to_cm(vt, n, vr, y.data());  // (vt: column-major vr x n, so row-major n x vr)
  conj_all(y);
  ormqr_left<T>('N', rows, vr, p, refl.data(), rows, taup.data(), y.data() + off, n, threads);
  conj_all(y);
  from_cm(y.data(), n, vr, vt);
  return 0;
}

void svd_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const char* op = "linalg.svd";
  Tensor A = contiguous_of(in[0]);
  const bool full = attr<bool>(a, 0), uv = attr<bool>(a, 1);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n), Bn = shape_numel(batch_shape(A, 2));
  const int64_t uc = full ? m : k, vr = full ? n : k;
  Tensor info = make_tensor(batch_shape(A, 2), kInt32);
  int* ip = static_cast<int*>(info.data_ptr());
  std::fill(ip, ip + info.numel(), 0);
  check_lapack_size(op, m, n);
  bool finite = true;
  const bool on_pool = uv && Bn == 1 && k >= kSvdOnPool && std::max(m, n) < 5 * k / 3 && linalg_threads() > 1 &&
                       !cpu::in_parallel_region();
  visit_lapack(A.dtype(), op, [&]<class T>() {
    using R = lp::Real<T>;
    const T* ap = static_cast<const T*>(A.data_ptr());
    T* up = uv ? static_cast<T*>(out[0].data_ptr()) : nullptr;
    R* sp = static_cast<R*>(out[1].data_ptr());
    T* vp = uv ? static_cast<T*>(out[2].data_ptr()) : nullptr;
    finite = all_finite(ap, Bn * m * n);
    if (!finite) return;
    if (k == 0) {  // an empty matrix: U and Vh are the identity where they have a square shape
      if (uv) {
        for (int64_t b = 0; b < Bn; ++b) {
          for (int64_t i = 0; i < m * uc; ++i) up[b * m * uc + i] = i % (uc + 1) == 0 && uc == m ? T(1) : T(0);
          for (int64_t i = 0; i < vr * n; ++i) vp[b * vr * n + i] = i % (n + 1) == 0 && vr == n ? T(1) : T(0);
        }
      }
      return;
    }
    const char jobz = uv ? (full ? 'A' : 'S') : 'N';
    const int ldu = int(m), ldvt = int(std::max<int64_t>(vr, 1));
    T wq{};
    int iq = 0;
    {
      std::vector<T> qa(m * n), qu(uv ? m * uc : 1), qv(uv ? vr * n : 1);
      std::vector<R> qs(k), qr(1);
      std::vector<int> qi(8 * k);
      lp::gesdd<T>(jobz, int(m), int(n), qa.data(), int(m), qs.data(), qu.data(), ldu, qv.data(), ldvt, &wq, -1,
                   qr.data(), qi.data());
    }
    const int lw = std::max(1, lp::work_size(wq));
    const int64_t mx = std::max(m, n);
    const int64_t lrw = uv ? k * std::max(5 * k + 7, 2 * mx + 2 * k + 1) : 7 * k;
    parallel_for(Bn, batch_grain(m, n), [&](int64_t b0, int64_t b1) {  // (on_pool: Bn is 1, this thread)
      std::vector<T> w = lapack_matrix<T>(m, n), work = lapack_vector<T>(lw);
      std::vector<T> u = uv ? lapack_matrix<T>(m, uc) : std::vector<T>(1), vt = uv ? lapack_matrix<T>(vr, n) : std::vector<T>(1);
      std::vector<R> rwork(lp::is_cplx<T> ? lrw : 1);
      std::vector<int> iwork(8 * k);
      for (int64_t b = b0; b < b1; ++b) {
        to_cm(ap + b * m * n, m, n, w.data());
        const R scale = range_scale(w.data(), m * n);
        if (scale != R(1))
          for (T& x : w) x *= scale;
        R* s = sp + b * k;
        R anrm = 0;  // xgesdd scales a matrix whose largest element lies outside [smlnum, bignum] itself
        if (on_pool)
          for (const T& x : w) anrm = std::max(anrm, R(std::abs(x)));
        const R smlnum = std::sqrt(std::numeric_limits<R>::min()) / std::numeric_limits<R>::epsilon();
        if (on_pool && anrm >= smlnum && anrm <= 1 / smlnum) {
          ip[b] = svd_on_pool<T>(m, n, full, w.data(), s, u.data(), vt.data(), linalg_threads());
        } else {
          ip[b] = lp::gesdd<T>(jobz, int(m), int(n), w.data(), int(m), s, u.data(), ldu, vt.data(), ldvt, work.data(),
                               lw, rwork.data(), iwork.data());
        }
        if (scale != R(1))
          for (int64_t i = 0; i < k; ++i) s[i] /= scale;
        if (!uv) continue;
        from_cm(u.data(), m, uc, up + b * m * uc);
        from_cm(vt.data(), vr, n, vp + b * vr * n);
      }
    });
  });
  KILN_CHECK(finite, LinAlg, op, "The algorithm failed to converge because the input matrix contained non-finite "
             "values.");
  raise_on_info(info, A.dim() > 2, op, [](int) {
    return std::string("The algorithm failed to converge because the input matrix is ill-conditioned or has too "
                       "many repeated singular values.");
  });
}
KernelRegistrar k_svd{"_linalg_svd", DeviceType::CPU, svd_kernel};

// ---- pinv ------------------------------------------------------------------------------------------------------
// C (m x n, column-major) = A (m x k) op(B): op(B) = B (k x n) or, conj_b, B^H with B (n x k).
template <class T>
void gemm_cm(bool conj_b, int64_t m, int64_t n, int64_t k, const T* A, const T* B, T* C) {
  const int64_t ldb = conj_b ? std::max<int64_t>(n, 1) : std::max<int64_t>(k, 1), lda = std::max<int64_t>(m, 1);
  gemm<T>(CblasColMajor, CblasNoTrans, conj_b ? CblasConjTrans : CblasNoTrans, m, n, k, A, lda, B, ldb, C, lda);
}

// pinv(A) = V diag(1 / s) U^H over the singular values above max(atol, rtol * s_max) (torch's rule:
// rtol defaults to eps * max(m, n) when atol is absent or zero); Hermitian: V diag(1 / l) V^H from eigh.
void pinv_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const char* op = "linalg.pinv";
  Tensor A = contiguous_of(in[0]);
  const bool herm = attr<bool>(a, 2);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n), Bn = shape_numel(batch_shape(A, 2));
  Tensor& P = out[0];
  check_lapack_size(op, m, n);
  if (herm) check_eigh_workspace(op, n);
  bool finite = true;
  visit_lapack(A.dtype(), op, [&]<class T>() {
    using R = lp::Real<T>;
    const T* ap = static_cast<const T*>(A.data_ptr());
    T* pp = static_cast<T*>(P.data_ptr());
    std::fill(pp, pp + P.numel(), T(0));
    finite = all_finite(ap, Bn * m * n);
    if (!finite || k == 0) return;
    const double atol = std::holds_alternative<double>(a[0]) ? std::get<double>(a[0]) : 0.0;
    const double rtol = std::holds_alternative<double>(a[1])
                            ? std::get<double>(a[1])
                            : (atol > 0 ? 0.0 : double(std::numeric_limits<R>::epsilon()) * double(std::max(m, n)));
    int lw = 1, lrw = 1, liw = 1;
    {
      T wq{};
      std::vector<T> qa(m * n), qu(m * k), qv(k * n);
      std::vector<R> qs(k), qr(1);
      std::vector<int> qi(8 * k);
      if (!herm) {
        lp::gesdd<T>('S', int(m), int(n), qa.data(), int(m), qs.data(), qu.data(), int(m), qv.data(), int(k), &wq, -1,
                     qr.data(), qi.data());
        lrw = int(k * std::max(5 * k + 7, 2 * std::max(m, n) + 2 * k + 1)), liw = int(8 * k);
      }
      lw = std::max(1, lp::work_size(wq));
    }
    const int eig_threads = Bn == 1 && !cpu::in_parallel_region() ? linalg_threads() : 1;
    const std::optional<HermitianEig<T>> eig =
        herm ? std::optional<HermitianEig<T>>(std::in_place, true, 'L', n, eig_threads) : std::nullopt;
    parallel_for(Bn, batch_grain(m, n), [&](int64_t b0, int64_t b1) {
      std::vector<T> w = lapack_matrix<T>(m, n), work = lapack_vector<T>(lw), c(m * n);
      std::vector<T> u = herm ? std::vector<T>(1) : lapack_matrix<T>(m, k), vt = herm ? std::vector<T>(1) : lapack_matrix<T>(k, n);
      auto scratch = herm ? eig->scratch() : typename HermitianEig<T>::Scratch{};
      std::vector<R> s(std::max(k, n)), rwork(lrw);
      std::vector<int> iwork(liw);
      for (int64_t b = b0; b < b1; ++b) {
        to_cm(ap + b * m * n, m, n, w.data());
        T* p = pp + b * n * m;
        if (herm) {  // w: the eigenvectors V (n x n); C = (V diag(1/l)) V^H is pinv, Hermitian
          int info = 0;
          const T* vecs = eig->run(w.data(), s.data(), scratch, info);
          if (info != 0) continue;
          R amax = 0;
          for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::abs(s[i]));
          const double thr = std::max(atol, rtol * double(amax));
          u.assign(vecs, vecs + n * n);
          for (int64_t j = 0; j < n; ++j) {
            const R inv = double(std::abs(s[j])) > thr ? R(1) / s[j] : R(0);
            for (int64_t i = 0; i < n; ++i) u[j * n + i] *= inv;
          }
          gemm_cm<T>(true, n, n, n, u.data(), vecs, c.data());
          from_cm(c.data(), n, n, p);
        } else {  // C = (U diag(1/s)) Vh is pinv^H (m x n): pinv's row-major memory is conj of C's column-major
          if (lp::gesdd<T>('S', int(m), int(n), w.data(), int(m), s.data(), u.data(), int(m), vt.data(), int(k),
                           work.data(), lw, rwork.data(), iwork.data()) != 0)
            continue;
          const double thr = std::max(atol, rtol * double(s[0]));
          for (int64_t j = 0; j < k; ++j) {
            const R inv = double(s[j]) > thr ? R(1) / s[j] : R(0);
            for (int64_t i = 0; i < m; ++i) u[j * m + i] *= inv;
          }
          gemm_cm<T>(false, m, n, k, u.data(), vt.data(), c.data());
          for (int64_t i = 0; i < m * n; ++i) p[i] = cj(c[i]);
        }
      }
    });
  });
  KILN_CHECK(finite, LinAlg, "linalg.svd", "The algorithm failed to converge because the input matrix contained "
             "non-finite values.");
}
KernelRegistrar k_pinv{"_linalg_pinv", DeviceType::CPU, pinv_kernel};

}  // namespace
}  // namespace kiln
