// CPU kernels of the linear-algebra ops (entries, schemas and metas: kiln/ops/linalg.cpp): LAPACK
// through OpenBLAS (lapack.h) for the factorisations, BLAS trsm for triangular solves. Each batch
// element is copied into a column-major scratch matrix, factorised there and copied back row-major;
// the copies are O(n^2) beside the O(n^3) factorisation. Batches of small matrices are spread over
// the threads (LAPACK runs single-threaded inside them); a large single matrix gets OpenBLAS's own
// threads. Failures are reported per batch element as LAPACK's info; the kernels raise torch's
// LinAlgError from it after the loop, when the call asks (check_errors).
#include "kiln/backend/cpu/lapack.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/dispatch/op.h"

namespace kiln {
namespace {

namespace lp = cpu::lapack;
using cpu::contiguous_of;
using cpu::parallel_for;

template <class F>
void visit_lapack(Dtype d, const char* op, F&& f) {
  switch (d) {
    case kFloat32: f.template operator()<float>(); break;
    case kFloat64: f.template operator()<double>(); break;
    case kComplex64: f.template operator()<complex64>(); break;
    case kComplex128: f.template operator()<complex128>(); break;
    default: KILN_FAIL(Runtime, op, "Low precision dtypes not supported. Got ", dtype_name(d));
  }
}

template <class T>
T cj(T x) {
  if constexpr (lp::is_cplx<T>) return std::conj(x);
  else return x;
}

// LAPACK takes 32-bit sizes.
void check_lapack_size(const char* op, int64_t m, int64_t n) {
  KILN_CHECK(m <= INT_MAX && n <= INT_MAX && m * n <= INT_MAX, Runtime, op, "a ", m, " by ", n,
             " matrix is too large for LAPACK's 32-bit sizes");
}

// Batch elements per thread chunk: parallel over the batch only when each chunk has real work.
int64_t batch_grain(int64_t m, int64_t n) {
  int64_t k = std::min(m, n);
  int64_t work = std::max<int64_t>(1, m * n * std::max<int64_t>(k, 1));
  return std::max<int64_t>(1, (int64_t(1) << 16) / work);
}

// (R, C) row-major src -> column-major dst (leading dimension R), and back.
template <class T>
void to_cm(const T* src, int64_t R, int64_t C, T* dst) {
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) dst[j * R + i] = src[i * C + j];
}
template <class T>
void from_cm(const T* src, int64_t R, int64_t C, T* dst) {
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) dst[i * C + j] = src[j * R + i];
}

// The element offset of every matrix of x (contiguous, (..., R, C)) for each index of `batch`,
// which x's batch dimensions broadcast to.
std::vector<int64_t> matrix_offsets(const Tensor& x, const Shape& batch) {
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

Shape batch_shape(const Tensor& t, int trailing) { return Shape(t.sizes().begin(), t.sizes().end() - trailing); }

// torch's error for the first failed batch element: "(Batch element k): " when the input is batched.
template <class Msg>
void raise_on_info(const Tensor& info, bool batched, const char* op, Msg&& msg, ErrorKind kind = ErrorKind::LinAlg) {
  const int32_t* p = info.data_ptr<int32_t>();
  for (int64_t b = 0; b < info.numel(); ++b) {
    if (p[b] == 0) continue;
    KILN_CHECK(p[b] > 0, Runtime, op, "LAPACK rejected argument ", -p[b], " (an internal error)");
    std::string where = batched ? "(Batch element " + std::to_string(b) + "): " : "";
    if (kind == ErrorKind::LinAlg) KILN_FAIL(LinAlg, op, where, msg(p[b]));
    KILN_FAIL(Runtime, op, where, msg(p[b]));
  }
}

// ---- LU -------------------------------------------------------------------------------------------------
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
    parallel_for(B, batch_grain(m, n), [&](int64_t b0, int64_t b1) {
      std::vector<T> w(m * n);
      for (int64_t b = b0; b < b1; ++b) {
        ip[b] = 0;
        if (k == 0) continue;
        to_cm(ap + b * m * n, m, n, w.data());
        ip[b] = lp::getrf<T>(int(m), int(n), w.data(), int(m), pp + b * k);
        from_cm(w.data(), m, n, lu + b * m * n);
      }
    });
  });
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
      std::vector<T> wl(n * n), wb(n * k);
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
          std::copy(wb.begin(), wb.end(), dst);
        } else {  // X A^H = B: A X^H = B^H, B^H column-major is conj of B's memory
          for (int64_t i = 0; i < n * k; ++i) wb[i] = cj(src[i]);
          lp::getrs<T>('N', int(n), int(k), wl.data(), int(n), p, wb.data(), int(n));
          for (int64_t i = 0; i < n * k; ++i) dst[i] = cj(wb[i]);
        }
      }
    });
  });
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
  });
}
KernelRegistrar k_lu_unpack{"lu_unpack", DeviceType::CPU, lu_unpack_kernel};

// ---- solve, inverse, determinants --------------------------------------------------------------------------
void solve_ex_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const char* op = "linalg.solve";
  Tensor A = contiguous_of(in[0]), Bm = contiguous_of(in[1]);
  Tensor &X = out[0], &LU = out[1], &piv = out[2], &info = out[3];
  const bool left = attr<bool>(a, 0);
  const int64_t n = A.size(-1), r = X.size(-2), c = X.size(-1), k = left ? c : r;
  check_lapack_size(op, n, std::max(n, k));
  const Shape batch = batch_shape(X, 2);
  const std::vector<int64_t> ao = matrix_offsets(A, batch), bo = matrix_offsets(Bm, batch);
  const int64_t nA = info.numel(), Bn = shape_numel(batch);
  visit_lapack(A.dtype(), op, [&]<class T>() {
    const T* ap = static_cast<const T*>(A.data_ptr());
    const T* bp = static_cast<const T*>(Bm.data_ptr());
    T* xp = static_cast<T*>(X.data_ptr());
    T* lu = static_cast<T*>(LU.data_ptr());
    int* pp = static_cast<int*>(piv.data_ptr());
    int* ip = static_cast<int*>(info.data_ptr());
    // each matrix of A is factored once (column-major factors kept for the solves), then every
    // matrix of the broadcast batch is solved with its A's factors
    std::vector<T> fac(nA * n * n);
    parallel_for(nA, batch_grain(n, n), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        ip[b] = 0;
        if (n == 0) continue;
        T* w = fac.data() + b * n * n;
        to_cm(ap + b * n * n, n, n, w);
        ip[b] = lp::getrf<T>(int(n), int(n), w, int(n), pp + b * n);
        from_cm(w, n, n, lu + b * n * n);
      }
    });
    if (n == 0 || k == 0) return;
    parallel_for(Bn, batch_grain(n, k), [&](int64_t b0, int64_t b1) {
      std::vector<T> wb(n * k);
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t ia = ao[b] / (n * n);
        const T* w = fac.data() + ia * n * n;
        const int* p = pp + ia * n;
        const T* src = bp + bo[b];
        T* dst = xp + b * r * c;
        if (left) {
          to_cm(src, n, k, wb.data());
          lp::getrs<T>('N', int(n), int(k), w, int(n), p, wb.data(), int(n));
          from_cm(wb.data(), n, k, dst);
        } else {  // X A = B: A^T X^T = B^T, and B^T column-major is B's row-major memory
          std::copy(src, src + n * k, wb.data());
          lp::getrs<T>('T', int(n), int(k), w, int(n), p, wb.data(), int(n));
          std::copy(wb.begin(), wb.end(), dst);
        }
      }
    });
  });
  if (attr<bool>(a, 1))
    raise_on_info(info, A.dim() > 2, op,
                  [](int) { return std::string("The solver failed because the input matrix is singular."); });
}
KernelRegistrar k_solve_ex{"_linalg_solve_ex", DeviceType::CPU, solve_ex_kernel};

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
    // A's row-major memory is A^T column-major, and inv(A^T) column-major is inv(A) row-major: no
    // transposes. getri's workspace is asked for once.
    int lwork = 1;
    if (n > 0) {
      T q{};
      lp::getri<T>(int(n), nullptr, int(n), nullptr, &q, -1);
      lwork = std::max<int>(1, lp::work_size(q));
    }
    parallel_for(Bn, batch_grain(n, n), [&](int64_t b0, int64_t b1) {
      std::vector<int> ipiv(n);
      std::vector<T> work(lwork);
      for (int64_t b = b0; b < b1; ++b) {
        ip[b] = 0;
        if (n == 0) continue;
        T* w = yp + b * n * n;
        std::copy(ap + b * n * n, ap + (b + 1) * n * n, w);
        ip[b] = lp::getrf<T>(int(n), int(n), w, int(n), ipiv.data());
        if (ip[b] == 0) ip[b] = lp::getri<T>(int(n), w, int(n), ipiv.data(), work.data(), lwork);
      }
    });
  });
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
void lu_each(const char* op, const Tensor& A, Tensor& LU, Tensor& piv, F&& f) {
  const int64_t n = A.size(-1), Bn = shape_numel(batch_shape(A, 2));
  check_lapack_size(op, n, n);
  const T* ap = static_cast<const T*>(A.data_ptr());
  T* lu = static_cast<T*>(LU.data_ptr());
  int* pp = static_cast<int*>(piv.data_ptr());
  parallel_for(Bn, batch_grain(n, n), [&](int64_t b0, int64_t b1) {
    std::vector<T> w(n * n);
    for (int64_t b = b0; b < b1; ++b) {
      int swaps = 0;
      if (n > 0) {
        to_cm(ap + b * n * n, n, n, w.data());
        lp::getrf<T>(int(n), int(n), w.data(), int(n), pp + b * n);
        from_cm(w.data(), n, n, lu + b * n * n);
        for (int64_t i = 0; i < n; ++i) swaps += pp[b * n + i] != i + 1;
      }
      f(b, w.data(), n, swaps);
    }
  });
}

void det_kernel(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  const char* op = "linalg.det";
  Tensor A = contiguous_of(in[0]);
  visit_lapack(A.dtype(), op, [&]<class T>() {
    T* d = static_cast<T*>(out[0].data_ptr());
    lu_each<T>(op, A, out[1], out[2], [&](int64_t b, const T* w, int64_t n, int swaps) {
      T p(swaps % 2 ? -1 : 1);
      for (int64_t i = 0; i < n; ++i) p *= w[i * n + i];
      d[b] = p;
    });
  });
}
KernelRegistrar k_det{"_linalg_det", DeviceType::CPU, det_kernel};

void slogdet_kernel(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  const char* op = "linalg.slogdet";
  Tensor A = contiguous_of(in[0]);
  visit_lapack(A.dtype(), op, [&]<class T>() {
    using R = lp::Real<T>;
    T* sg = static_cast<T*>(out[0].data_ptr());
    R* la = static_cast<R*>(out[1].data_ptr());
    lu_each<T>(op, A, out[2], out[3], [&](int64_t b, const T* w, int64_t n, int swaps) {
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
  });
}
KernelRegistrar k_slogdet{"_linalg_slogdet", DeviceType::CPU, slogdet_kernel};

// ---- Cholesky, triangular solve --------------------------------------------------------------------------
void cholesky_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const char* op = "linalg.cholesky";
  Tensor A = contiguous_of(in[0]);
  Tensor &L = out[0], &info = out[1];
  const bool upper = attr<bool>(a, 0);
  const int64_t n = A.size(-1), Bn = info.numel();
  check_lapack_size(op, n, n);
  visit_lapack(A.dtype(), op, [&]<class T>() {
    const T* ap = static_cast<const T*>(A.data_ptr());
    T* lp_ = static_cast<T*>(L.data_ptr());
    int* ip = static_cast<int*>(info.data_ptr());
    parallel_for(Bn, batch_grain(n, n), [&](int64_t b0, int64_t b1) {
      std::vector<T> w(n * n);
      for (int64_t b = b0; b < b1; ++b) {
        ip[b] = 0;
        if (n == 0) continue;
        to_cm(ap + b * n * n, n, n, w.data());
        ip[b] = lp::potrf<T>(upper ? 'U' : 'L', int(n), w.data(), int(n));
        for (int64_t j = 0; j < n; ++j)  // the other triangle is zero (w is column-major: (i, j) at j*n+i)
          for (int64_t i = 0; i < n; ++i)
            if (upper ? i > j : i < j) w[j * n + i] = T(0);
        from_cm(w.data(), n, n, lp_ + b * n * n);
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
      std::vector<T> wl(n * n), wb(n * k);
      for (int64_t b = b0; b < b1; ++b) {
        to_cm(lp_ + lo[b], n, n, wl.data());
        to_cm(bp + bo[b], n, k, wb.data());
        lp::potrs<T>(upper ? 'U' : 'L', int(n), int(k), wl.data(), int(n), wb.data(), int(n));
        from_cm(wb.data(), n, k, xp + b * n * k);
      }
    });
  });
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
      std::vector<T> w(n * n);
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
  });
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
  });
}
KernelRegistrar k_solve_triangular{"linalg_solve_triangular", DeviceType::CPU, solve_triangular_kernel};

}  // namespace
}  // namespace kiln
