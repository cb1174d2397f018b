// CPU kernel of linalg.lstsq (entry, schema and meta: kiln/ops/linalg_decomp.cpp): the drivers gels,
// gelsd and gelss through LAPACK, and gelsy (the default) on kiln's pivoted QR kernels (decision 61).
// As in linalg.cpp each batch element is solved in column-major scratch copies.
#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <complex>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
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

// ---- least squares ---------------------------------------------------------------------------------------------
// gelsy, the default driver, on the table's Householder kernels (kernels_householder.cpp): xgelsy's
// own steps, with kiln's QR in place of OpenBLAS's xgeqp3 (which makes BLAS calls per column and per
// step of its partial-norm bookkeeping): A and B scaled into [smlnum, bignum], A P = Q R, the rank
// from xlaic1's incremental estimates of the leading blocks' extreme singular values (accepted while
// smax rcond <= smin), xtzrzf when it is short of n, Q^H B, the triangular solve, xormrz / xunmrz, P,
// and the scaling undone. The QR is first tried without pivots (P = I; blocked from 256 columns and
// 200 KiB): when every leading block of that R passes the test, the rank is min(m, n), as MKL's
// xgelsy (torch's) decides on its unpivoted R. The first block that fails (the blocked QR stops at
// that panel) sends A to kiln's xgeqp3, whose pivots follow LAPACK's rule (largest partial norm, the
// first of equals), so a rank short of min(m, n) and its solution are LAPACK's up to rounding
// (decision 64). One matrix from 256 columns on more than one thread: the QRs split over the pool
// (geqrf_blocked, geqp3).

// LAPACK's xlascl ('G'): x (rows x cols, leading dimension ld) *= cto / cfrom, in steps that neither
// over- nor underflow.
template <class T>
void lascl(lp::Real<T> cfrom, lp::Real<T> cto, T* x, int64_t rows, int64_t cols, int64_t ld) {
  using R = lp::Real<T>;
  const R smlnum = std::numeric_limits<R>::min(), bignum = R(1) / smlnum;
  R cfromc = cfrom, ctoc = cto;
  for (bool done = false; !done;) {
    R mul;
    const R cfrom1 = cfromc * smlnum;
    if (cfrom1 == cfromc) {  // cfromc is inf
      mul = ctoc / cfromc, done = true;
    } else if (const R cto1 = ctoc / bignum; cto1 == ctoc) {  // ctoc is 0 or inf
      mul = ctoc, done = true;
    } else if (std::abs(cfrom1) > std::abs(ctoc) && ctoc != R(0)) {
      mul = smlnum, cfromc = cfrom1;
    } else if (std::abs(cto1) > std::abs(cfromc)) {
      mul = bignum, ctoc = cto1;
    } else {
      mul = ctoc / cfromc, done = true;
    }
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t i = 0; i < rows; ++i) x[j * ld + i] *= mul;
  }
}

// max |x_i| of n reals; NaN if one is (as xlange and xnrm2: gelsy then runs on, as LAPACK's does).
// On the bit patterns with the sign cleared, whose order as integers is the order of the values (a
// NaN's above infinity's): a loop the compiler vectorizes, where float compares with a NaN test do
// not (float32 256 x 256 lstsq: the two passes were 5% of it).
template <class R>
R max_abs_of(const R* x, int64_t n) {
  using I = std::conditional_t<sizeof(R) == 4, int32_t, int64_t>;
  constexpr I mask = std::numeric_limits<I>::max();
  const I inf = std::bit_cast<I>(std::numeric_limits<R>::infinity());
  I m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const I b = std::bit_cast<I>(x[i]) & mask;
    m = b > m ? b : m;
  }
  return m > inf ? std::numeric_limits<R>::quiet_NaN() : std::bit_cast<R>(m);
}

constexpr int64_t kQpsBlock = 32, kQp2Cols = 128, kGelsyOnPool = 256;
template <class T>
struct GelsyScratch {
  GelsyScratch(int64_t m, int64_t n, int lw)
      : tau(std::max<int64_t>(std::min(m, n), 1)), tau2(tau.size()), xmin(tau.size()), xmax(tau.size()),
        perm(std::max<int64_t>(n, 1)), work(lapack_vector<T>(lw)), lwork(lw), f(std::max<int64_t>(n, 1) * kQpsBlock),
        qps(kQpsBlock * (1 + std::max<int64_t>(n, 1))), vn(2 * std::max<int64_t>(n, 1)), jpvt(std::max<int64_t>(n, 1)) {}
  std::vector<T> tau, tau2, xmin, xmax, perm, work;
  int lwork;  // (work's size as LAPACK was told it: without lapack_vector's spare)
  std::vector<T> f, qps;
  std::vector<lp::Real<T>> vn;
  std::vector<int64_t> jpvt;
};

// The workspace xtzrzf and xormrz ask for at these sizes (rank n - 1 or min(m, n): the most they take).
template <class T>
int gelsy_kiln_work(int64_t m, int64_t n, int64_t k) {
  if (n < 2) return 1;
  const int r = int(std::min({m, n - 1})), nn = int(n);
  T q1{}, q2{};
  std::vector<T> qa(m * n), qt(r), qb(n * k);
  lp::tzrzf<T>(r, nn, qa.data(), int(m), qt.data(), &q1, -1);
  lp::ormrz<T>('L', lp::is_cplx<T> ? 'C' : 'T', nn, int(k), r, nn - r, qa.data(), int(m), qt.data(), qb.data(), nn,
               &q2, -1);
  return std::max({1, lp::work_size(q1), lp::work_size(q2)});
}

// xgeqp3 with every column free: blocks of xlaqps (kb <= kQpsBlock steps, then A -= V F^H through
// BLAS and the flagged partial norms recomputed) while more than kQp2Cols columns are left, then
// xlaqp2.
template <class T>
void geqp3(const cpu::KernelTable::Householder<T>& hh, int64_t m, int64_t n, T* a, GelsyScratch<T>& s,
           int threads) {
  using R = lp::Real<T>;
  R *vn1 = s.vn.data(), *vn2 = vn1 + n;
  // Column norms in double: float32's squares need no scaling there; float64's are scaled by a power
  // of two (exact) first. Four partial sums: a loop the compiler vectorizes.
  auto norm = [](const T* x, int64_t len) {
    const R* r = reinterpret_cast<const R*>(x);
    const int64_t cnt = (lp::is_cplx<T> ? 2 : 1) * len;
    double s1 = 1, s2 = 1;
    int e = 0;
    if constexpr (std::is_same_v<R, double>) {
      const R big = max_abs_of(r, cnt);
      if (big == R(0) || !std::isfinite(big)) return big;
      e = std::ilogb(big);
      const int h = -e / 2;  // 2^-e in two factors (2^1074 is no double)
      s1 = std::ldexp(1.0, h), s2 = std::ldexp(1.0, -e - h);
    }
    double acc[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= cnt; i += 4)
      for (int l = 0; l < 4; ++l) {
        const double v = double(r[i + l]) * s1 * s2;
        acc[l] += v * v;
      }
    for (; i < cnt; ++i) {
      const double v = double(r[i]) * s1 * s2;
      acc[0] += v * v;
    }
    return R(std::ldexp(std::sqrt((acc[0] + acc[1]) + (acc[2] + acc[3])), e));  // (float32: NaN, inf pass)
  };
  for (int64_t j = 0; j < n; ++j) s.jpvt[j] = j;
  const int64_t mn = std::min(m, n);
  // On `threads` threads each takes a share of the columns in every step (the kernels' SpmdShare),
  // of the trailing update and of the norms.
  run_shared(threads, [&](const cpu::SpmdShare& sh) {
    for (int64_t c = sh.begin(0, n), ce = sh.end(0, n); c < ce; ++c) vn1[c] = vn2[c] = norm(a + c * m, m);
    sh.sync();
    int64_t j = 0;
    while (mn - j > kQp2Cols) {
      const int64_t nj = n - j;
      const int64_t kb = hh.qps(m, nj, j, std::min(kQpsBlock, mn - j - kQp2Cols), a + j * m, m, s.jpvt.data() + j,
                                s.tau.data() + j, vn1 + j, vn2 + j, s.f.data(), nj, s.qps.data(), sh);
      const int64_t rk = j + kb, c0 = sh.begin(j + kb, n), c1 = sh.end(j + kb, n);
      if (kb < std::min(nj, m - j) && c0 < c1)  // A(rk:, j+kb:) -= A(rk:, j:j+kb) F(kb:, :kb)^H
        gemm_sub_cm<T>(CblasNoTrans, herm<T>(), m - rk, c1 - c0, kb, a + rk + j * m, m, s.f.data() + (c0 - j), nj,
                       a + rk + c0 * m, m);
      for (int64_t c = c0; c < c1; ++c)
        if (vn2[c] < 0) vn1[c] = vn2[c] = norm(a + rk + c * m, m - rk);
      sh.sync();
      j = rk;
    }
    if (j < mn) hh.qp2(m, n - j, j, a + j * m, m, s.jpvt.data() + j, s.tau.data() + j, vn1 + j, vn2 + j, sh);
  });
}

// xgelsy's rank: the leading blocks of R (the upper triangle of a, leading dimension lda) accepted
// while xlaic1's estimates of their extreme singular values keep smax rcond <= smin. extend(c) takes
// R's columns up to c (final by then) and says whether every block so far passed; rank is then the
// last accepted order (0 when R(0, 0) is zero).
template <class T>
struct LeadingRank {
  using R = lp::Real<T>;
  const T* a;
  int64_t lda;
  R rcond;
  GelsyScratch<T>& s;
  int64_t rank = 0;
  bool failed = false;
  R smax = 0, smin = 0;
  bool extend(int64_t c) {
    if (rank == 0 && c > 0 && !failed) {
      smax = smin = std::abs(a[0]);
      if (smax == R(0)) failed = true;
      else s.xmin[0] = s.xmax[0] = T(1), rank = 1;
    }
    for (; !failed && rank < c; ++rank) {
      const T* col = a + rank * lda;
      R sminpr, smaxpr;
      T s1, c1, s2, c2;
      lp::laic1<T>(2, int(rank), s.xmin.data(), smin, col, col[rank], &sminpr, &s1, &c1);
      lp::laic1<T>(1, int(rank), s.xmax.data(), smax, col, col[rank], &smaxpr, &s2, &c2);
      if (!(smaxpr * rcond <= sminpr)) {
        failed = true;
        break;
      }
      for (int64_t i = 0; i < rank; ++i) s.xmin[i] *= s1, s.xmax[i] *= s2;
      s.xmin[rank] = c1, s.xmax[rank] = c2, smin = sminpr, smax = smaxpr;
    }
    return !failed;
  }
};

// wa: A (m x n, column-major), wb: B (ldb x k) := the solution in its first n rows. Returns the rank.
// load_a() writes A into wa again.
template <class T>
int64_t gelsy_kiln(const cpu::KernelTable::Householder<T>& hh, int64_t m, int64_t n, int64_t k, T* wa, T* wb,
                   int64_t ldb, lp::Real<T> rcond, GelsyScratch<T>& s, int threads,
                   const std::function<void()>& load_a) {
  using R = lp::Real<T>;
  const int64_t mn = std::min(m, n);
  const R smlnum = std::numeric_limits<R>::min() / std::numeric_limits<R>::epsilon(), bignum = R(1) / smlnum;
  auto max_abs = [&](const T* x, int64_t rows, int64_t cols, int64_t ld) {  // xlange ('M')
    R v = 0;
    for (int64_t j = 0; j < cols; ++j) {  // (complex: the largest part first, |x| lies within sqrt(2) of it)
      const R c = max_abs_of(reinterpret_cast<const R*>(x + j * ld), (lp::is_cplx<T> ? 2 : 1) * rows);
      if (c != c) return c;
      v = std::max(v, c);
    }
    if (!lp::is_cplx<T> || (v > 2 * smlnum && v < bignum / 2)) return v;  // (complex: no scaling either way)
    v = 0;
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t i = 0; i < rows; ++i) v = std::max(v, R(std::abs(x[j * ld + i])));
    return v;
  };
  auto zero_rows = [&](int64_t r0, int64_t r1) {
    for (int64_t j = 0; j < k; ++j) std::fill(wb + j * ldb + r0, wb + j * ldb + r1, T(0));
  };
  const R anrm = max_abs(wa, m, n, m);
  int iascl = 0, ibscl = 0;
  auto scale_a = [&] {
    if (iascl == 1) lascl(anrm, smlnum, wa, m, n, m);
    else if (iascl == 2) lascl(anrm, bignum, wa, m, n, m);
  };
  iascl = anrm > 0 && anrm < smlnum ? 1 : anrm > bignum ? 2 : 0;
  scale_a();
  int64_t rank = 0;
  R bnrm = 0;
  if (anrm == R(0)) {
    zero_rows(0, std::max(m, n));
  } else {
    bnrm = max_abs(wb, m, k, ldb);
    if (bnrm > 0 && bnrm < smlnum) lascl(bnrm, smlnum, wb, m, k, ldb), ibscl = 1;
    else if (bnrm > bignum) lascl(bnrm, bignum, wb, m, k, ldb), ibscl = 2;
    // First A = Q R without pivots (BLAS-3 blocks, where xgeqp3 streams the trailing columns once per
    // column): when every leading block of that R passes the rank test, the rank is min(m, n) and the
    // pivots are not needed. Else A is factored again with them.
    // The blocked QR stops at the first panel whose columns fail.
    LeadingRank<T> est{wa, m, rcond, s};
    bool full = true;
    if (use_small_qr<T>(m, n, 0) || mn < kBlockedQr) hh.geqr2(m, n, wa, m, s.tau.data());
    else full = geqrf_blocked<T>(m, n, wa, m, s.tau.data(), threads, [&](int64_t c) { return est.extend(c); });
    full = full && est.extend(mn);
    rank = est.rank;
    if (full) {
      for (int64_t j = 0; j < n; ++j) s.jpvt[j] = j;
    } else {
      load_a();
      scale_a();
      geqp3<T>(hh, m, n, wa, s, threads);
      LeadingRank<T> pivoted{wa, m, rcond, s};
      pivoted.extend(mn);
      rank = pivoted.rank;
    }
    if (rank == 0) {
      zero_rows(0, std::max(m, n));
    } else {
      const int lw = s.lwork;
      if (rank < n) lp::tzrzf<T>(int(rank), int(n), wa, int(m), s.tau2.data(), s.work.data(), lw);
      hh.orm2r_t(m, k, mn, wa, m, s.tau.data(), wb, ldb);
      // (xtrsm as xgelsy: a zero pivot accepted at rcond <= 0 gives inf / NaN)
      trsm_cm<T>(CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, rank, k, wa, m, wb, ldb);
      zero_rows(rank, n);
      if (rank < n)
        lp::ormrz<T>('L', lp::is_cplx<T> ? 'C' : 'T', int(n), int(k), int(rank), int(n - rank), wa, int(m),
                     s.tau2.data(), wb, int(ldb), s.work.data(), lw);
      for (int64_t j = 0; j < k; ++j) {
        T* c = wb + j * ldb;
        for (int64_t i = 0; i < n; ++i) s.perm[s.jpvt[i]] = c[i];
        std::copy(s.perm.begin(), s.perm.begin() + n, c);
      }
    }
  }
  if (iascl == 1) lascl(anrm, smlnum, wb, n, k, ldb);
  else if (iascl == 2) lascl(anrm, bignum, wb, n, k, ldb);
  if (ibscl == 1) lascl(smlnum, bnrm, wb, n, k, ldb);
  else if (ibscl == 2) lascl(bignum, bnrm, wb, n, k, ldb);
  return rank;
}

void lstsq_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const char* op = "linalg.lstsq";
  const std::string driver = std::holds_alternative<std::string>(a[1]) ? std::get<std::string>(a[1]) : "gelsy";
  linalg_detail::check_lstsq(TensorSpec::of(in[0]), TensorSpec::of(in[1]), driver);  // the meta runs only in a trace
  Tensor A = contiguous_of(in[0]), Bm = contiguous_of(in[1]);
  const int64_t m = A.size(-2), n = A.size(-1), k = Bm.size(-1), mn = std::min(m, n), ldb = std::max<int64_t>(
      std::max(m, n), 1);
  const Shape batch = broadcast_shapes(batch_shape(A, 2), batch_shape(Bm, 2), op);
  const int64_t Bn = shape_numel(batch);
  const bool has_rank = driver != "gels", has_sv = driver == "gelsd" || driver == "gelss";
  check_lapack_size(op, ldb, std::max(n, k));
  const Dtype rd = to_real(A.dtype());
  Shape xs = batch, svs = batch;
  xs.push_back(n), xs.push_back(k), svs.push_back(mn);
  Tensor X = make_tensor(xs, A.dtype());
  Tensor rank = make_tensor(has_rank ? batch : Shape{0}, kInt64);
  Tensor sv = make_tensor(has_sv ? svs : Shape{0}, rd);
  Tensor tail = make_tensor({Bn, k}, rd);  // the squared residuals, kept if every matrix had full rank
  Tensor info = make_tensor(batch, kInt32);
  int* ip = static_cast<int*>(info.data_ptr());
  std::fill(ip, ip + info.numel(), 0);
  const std::vector<int64_t> ao = matrix_offsets(A, batch), bo = matrix_offsets(Bm, batch);
  bool full_rank = true;
  visit_lapack(A.dtype(), op, [&]<class T>() {
    using R = lp::Real<T>;
    const T* ap = static_cast<const T*>(A.data_ptr());
    const T* bp = static_cast<const T*>(Bm.data_ptr());
    T* xp = static_cast<T*>(X.data_ptr());
    int64_t* rp = has_rank ? static_cast<int64_t*>(rank.data_ptr()) : nullptr;
    R* svp = has_sv ? static_cast<R*>(sv.data_ptr()) : nullptr;
    R* tp = static_cast<R*>(tail.data_ptr());
    const R rcond = std::holds_alternative<double>(a[0]) ? R(std::get<double>(a[0]))
                                                          : std::numeric_limits<R>::epsilon() * R(std::max(m, n));
    if (m == 0 || n == 0 || k == 0) {
      std::fill(xp, xp + X.numel(), T(0));
      if (rp) std::fill(rp, rp + rank.numel(), int64_t(0));
      std::fill(tp, tp + tail.numel(), R(0));
      full_rank = mn > 0 || n == 0;
      return;
    }
    // the workspace, asked for once
    int lw = 1, liw = 1, lrw = 1;
    {
      T wq{};
      R rq{};
      int iq = 0, rk = 0;
      std::vector<T> qa(m * n), qb(ldb * k);
      std::vector<R> qs(mn);
      std::vector<int> qj(n);
      std::vector<R> qrw(std::max<int64_t>({2 * n, 5 * mn, 1}));
      if (driver == "gels") lp::gels<T>(int(m), int(n), int(k), qa.data(), int(m), qb.data(), int(ldb), &wq, -1);
      else if (driver == "gelsy")
        lp::gelsy<T>(int(m), int(n), int(k), qa.data(), int(m), qb.data(), int(ldb), qj.data(), rcond, &rk, &wq, -1, qrw.data());
      else if (driver == "gelsd")
        lp::gelsd<T>(int(m), int(n), int(k), qa.data(), int(m), qb.data(), int(ldb), qs.data(), rcond, &rk, &wq, -1, qrw.data(),
                     &iq);
      else lp::gelss<T>(int(m), int(n), int(k), qa.data(), int(m), qb.data(), int(ldb), qs.data(), rcond, &rk, &wq, -1,
                        qrw.data());
      rq = qrw[0];
      lw = std::max(1, lp::work_size(wq));
      if (driver == "gelsd") liw = std::max(1, iq), lrw = std::max<int>(1, int(rq));
      if (driver == "gelsy") lrw = int(2 * n);
      if (driver == "gelss") lrw = int(5 * mn);
    }
    const auto* hh = householder<T>();
    const bool own = driver == "gelsy" && hh;
    const int lw_own = own ? gelsy_kiln_work<T>(m, n, k) : 1;
    // One matrix: the pivoted QR's steps split over the pool from kGelsyOnPool columns.
    const int own_threads =
        Bn == 1 && mn >= kGelsyOnPool && !cpu::in_parallel_region() ? linalg_threads() : 1;
    parallel_for(Bn, batch_grain(m, n), [&](int64_t b0, int64_t b1) {
      std::vector<T> wa = lapack_matrix<T>(m, n), wb = lapack_matrix<T>(ldb, k), work = lapack_vector<T>(own ? 1 : lw);
      std::optional<GelsyScratch<T>> gs;
      if (own) gs.emplace(m, n, lw_own);
      std::vector<R> s(mn), rwork(std::max(lrw, 1));
      std::vector<int> iwork(liw), jpvt(n);
      for (int64_t b = b0; b < b1; ++b) {
        auto load_a = [&] { to_cm(ap + ao[b], m, n, wa.data()); };
        auto load = [&] {
          load_a();
          std::fill(wb.begin(), wb.end(), T(0));
          const T* src = bp + bo[b];
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < k; ++j) wb[j * ldb + i] = src[i * k + j];
        };
        load();
        int rk = int(mn);
        if (own) {
          rk = int(gelsy_kiln<T>(*hh, m, n, k, wa.data(), wb.data(), ldb, rcond, *gs, own_threads, load_a));
        } else if (driver == "gels") {
          ip[b] = lp::gels<T>(int(m), int(n), int(k), wa.data(), int(m), wb.data(), int(ldb), work.data(), lw);
        } else if (driver == "gelsy") {
          std::fill(jpvt.begin(), jpvt.end(), 0);
          ip[b] = lp::gelsy<T>(int(m), int(n), int(k), wa.data(), int(m), wb.data(), int(ldb), jpvt.data(), rcond, &rk,
                               work.data(), lw, rwork.data());
        } else if (driver == "gelsd") {
          ip[b] = lp::gelsd<T>(int(m), int(n), int(k), wa.data(), int(m), wb.data(), int(ldb), s.data(), rcond, &rk,
                               work.data(), lw, rwork.data(), iwork.data());
        } else {
          ip[b] = lp::gelss<T>(int(m), int(n), int(k), wa.data(), int(m), wb.data(), int(ldb), s.data(), rcond, &rk,
                               work.data(), lw, rwork.data());
        }
        T* x = xp + b * n * k;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < k; ++j) x[i * k + j] = wb[j * ldb + i];
        if (rp) rp[b] = rk;
        if (svp) std::copy(s.begin(), s.end(), svp + b * mn);
        // rows n..m-1 of the returned B hold the residual's components (full rank, m > n)
        for (int64_t j = 0; j < k; ++j) {
          R acc = 0;
          for (int64_t i = n; i < m; ++i) acc += std::norm(std::complex<R>(wb[j * ldb + i]));
          tp[b * k + j] = acc;
        }
      }
    });
    if (rp)
      for (int64_t b = 0; b < Bn; ++b) full_rank = full_rank && rp[b] == n;
  });
  raise_on_info(info, A.dim() > 2, op, [](int i) {
    return "The least squares solution could not be computed because the input matrix does not have full rank "
           "(error code: " + std::to_string(i) + ").";
  });
  // torch: residuals when m > n, every matrix has full rank, and the driver is not gelsy
  const bool residuals = m > n && driver != "gelsy" && full_rank;
  Shape rs = batch;
  rs.push_back(k);
  out = {X, residuals ? make_view(tail, rs, contiguous_strides(rs), 0) : make_tensor({0}, rd), rank, sv};
}
KernelRegistrar k_lstsq{"_linalg_lstsq", DeviceType::CPU, lstsq_kernel};

}  // namespace
}  // namespace kiln
