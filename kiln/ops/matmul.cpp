// The matmul family. One table op, bmm over (B, M, K) x (B, K, N), backs every composite; float32,
// float64 and complex go to OpenBLAS, float16 / bfloat16 / float8 to kiln's own packed GEMM
// (converted while packing, float32 accumulation, one rounding: kernels_gemm.cpp), integers use a
// plain triple loop.
#include <cblas.h>

#include <algorithm>
#include <numeric>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

SpecList bmm_meta(const OpDef&, const SpecList& in, const Attrs&) {
  const TensorSpec &a = in[0], &b = in[1];
  KILN_CHECK(a.dim() == 3 && b.dim() == 3, Runtime, "bmm", "batch1 must be a 3D tensor, got ", a.dim(),
             "D and ", b.dim(), "D");
  KILN_CHECK(a.sizes()[0] == b.sizes()[0], Runtime, "bmm", "batch1 and batch2 must have same number of "
             "batches, got ", a.sizes()[0], " and ", b.sizes()[0]);
  KILN_CHECK(a.sizes()[2] == b.sizes()[1], Runtime, "bmm", "Expected size for first two dimensions of "
             "batch2 tensor to be: [", b.sizes()[0], ", ", a.sizes()[2], "] but got: [", b.sizes()[0], ", ",
             b.sizes()[1], "].");
  KILN_CHECK(a.dtype() == b.dtype(), Runtime, "bmm", "expected scalar type ", dtype_name(a.dtype()),
             " but found ", dtype_name(b.dtype()));
  return {{{a.sizes()[0], a.sizes()[1], b.sizes()[2]}, a.dtype()}};
}

// A matrix operand for BLAS: row-major with leading dim, or transposed.
struct Mat {
  Tensor t;
  bool trans = false;
  int64_t ld = 0;
};
Mat blas_operand(const Tensor& x) {  // x: (B, R, C)
  int64_t R = x.sizes()[1], C = x.sizes()[2];
  int64_t sr = x.strides()[1], sc = x.strides()[2];
  if ((sc == 1 || C == 1) && sr >= std::max<int64_t>(C, 1)) return {x, false, sr};
  if ((sr == 1 || R == 1) && sc >= std::max<int64_t>(R, 1)) return {x, true, sc};
  Tensor c = contiguous(x);
  return {c, false, std::max<int64_t>(C, 1)};
}

template <class T>
void gemm_blas(const Mat& A, const Mat& B, Tensor& C, int64_t Bn, int64_t M, int64_t N, int64_t K) {
  const T* ap = static_cast<const T*>(A.t.data_ptr());
  const T* bp = static_cast<const T*>(B.t.data_ptr());
  T* cp = static_cast<T*>(C.data_ptr());
  int64_t sa = A.t.strides()[0], sb = B.t.strides()[0];
  auto ta = A.trans ? CblasTrans : CblasNoTrans, tb = B.trans ? CblasTrans : CblasNoTrans;
  for (int64_t i = 0; i < Bn; ++i) {
    const T* a = ap + i * sa;
    const T* b = bp + i * sb;
    T* c = cp + i * M * N;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      // matrix-vector shapes go to GEMV: GEMM kernels waste most of their work on a 1-wide panel
      auto gemv = [](CBLAS_TRANSPOSE t, int64_t rows, int64_t cols, const T* m, int64_t ld, const T* x,
                     int64_t incx, T* y) {
        if constexpr (std::is_same_v<T, float>) cblas_sgemv(CblasRowMajor, t, rows, cols, 1.0f, m, ld, x, incx, 0.0f, y, 1);
        else cblas_dgemv(CblasRowMajor, t, rows, cols, 1.0, m, ld, x, incx, 0.0, y, 1);
      };
      if (M == 1) {  // y(N) = B^T a: B is (K, N), row-major unless transposed
        int64_t inca = A.trans ? A.ld : 1;
        if (!B.trans) gemv(CblasTrans, K, N, b, B.ld, a, inca, c);
        else gemv(CblasNoTrans, N, K, b, B.ld, a, inca, c);
        continue;
      }
      if (N == 1) {  // y(M) = A b
        int64_t incb = B.trans ? 1 : B.ld;
        if (!A.trans) gemv(CblasNoTrans, M, K, a, A.ld, b, incb, c);
        else gemv(CblasTrans, K, M, a, A.ld, b, incb, c);
        continue;
      }
    }
    if constexpr (std::is_same_v<T, float>) {
      cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, a, A.ld, b, B.ld, 0.0f, c, N);
    } else if constexpr (std::is_same_v<T, double>) {
      cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, a, A.ld, b, B.ld, 0.0, c, N);
    } else if constexpr (std::is_same_v<T, complex64>) {
      complex64 one(1), zero(0);
      cblas_cgemm(CblasRowMajor, ta, tb, M, N, K, &one, a, A.ld, b, B.ld, &zero, c, N);
    } else {
      complex128 one(1), zero(0);
      cblas_zgemm(CblasRowMajor, ta, tb, M, N, K, &one, a, A.ld, b, B.ld, &zero, c, N);
    }
  }
}

void bmm_kernel(const OpDef& op, const TensorList& in, const Attrs& attrs, TensorList& out) {
  Tensor a = in[0], b = in[1];
  Tensor& c = out[0];
  int64_t Bn = a.sizes()[0], M = a.sizes()[1], K = a.sizes()[2], N = b.sizes()[2];
  if (c.numel() == 0) return;
  if (K == 0) {
    fill_(c, Scalar(0));
    return;
  }
  Dtype d = a.dtype();
  if (d == kFloat16 || d == kBFloat16 || is_float8(d)) {
    // kiln's packed GEMM reads any strides; float8 matches torch's CPU matmul (float32 accumulation)
    if (c.storage() == a.storage() || c.storage() == b.storage()) {  // out= aliasing an input
      Tensor tmp = make_tensor(c.sizes(), d);
      TensorList o{tmp};
      bmm_kernel(op, in, attrs, o);
      copy_(c, tmp);
      return;
    }
    cpu::GemmArgs g;
    g.batch = Bn, g.M = M, g.N = N, g.K = K;
    g.a = a.data_ptr(), g.a_bs = a.strides()[0], g.a_rs = a.strides()[1], g.a_cs = a.strides()[2];
    g.b = b.data_ptr(), g.b_bs = b.strides()[0], g.b_rs = b.strides()[1], g.b_cs = b.strides()[2];
    g.c = c.data_ptr(), g.c_bs = c.strides()[0], g.c_rs = c.strides()[1], g.c_cs = c.strides()[2];
    cpu::cpu_kernels().gemm_lowp[static_cast<int>(d)](g);
    return;
  }
  if (d == kFloat32 || d == kFloat64 || d == kComplex64 || d == kComplex128) {
    Mat A = blas_operand(a), B = blas_operand(b);
    visit_floating_complex(d, "bmm", [&]<class T>() {
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || is_complex_v<T>)
        gemm_blas<T>(A, B, c, Bn, M, N, K);
    });
    return;
  }
  visit_integral(d, "bmm", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      raise_dtype_unsupported("bmm", kBool);
    } else {
      Tensor ac = contiguous(a), bc = contiguous(b);
      const T* ap = static_cast<const T*>(ac.data_ptr());
      const T* bp = static_cast<const T*>(bc.data_ptr());
      T* cp = static_cast<T*>(c.data_ptr());
      cpu::parallel_for(Bn * M, std::max<int64_t>(1, cpu::kGrainSize / std::max<int64_t>(N * K, 1)), [&](int64_t s, int64_t e) {
        for (int64_t bm = s; bm < e; ++bm) {
          int64_t bi = bm / M, m = bm % M;
          T* crow = cp + bm * N;
          for (int64_t n = 0; n < N; ++n) crow[n] = 0;
          for (int64_t k = 0; k < K; ++k) {
            T av = ap[bi * M * K + m * K + k];
            const T* brow = bp + bi * K * N + k * N;
            for (int64_t n = 0; n < N; ++n) crow[n] = static_cast<T>(crow[n] + av * brow[n]);
          }
        }
      });
    }
  });
}
OpDef op_bmm{"bmm", 0, bmm_meta, {bmm_kernel, nullptr}};
OpRegistrar reg_bmm{op_bmm, "bmm(Tensor self, Tensor mat2) -> Tensor"};

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dtype() == b.dtype(), Runtime, op, "expected m1 and m2 to have the same dtype, but got: ",
             dtype_name(a.dtype()), " != ", dtype_name(b.dtype()));
}

}  // namespace

Tensor bmm(const Tensor& a, const Tensor& b) { return dispatch1(op_bmm, {a, b}); }

Tensor mm(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 2, Runtime, "mm", "self must be a matrix");
  KILN_CHECK(b.dim() == 2, Runtime, "mm", "mat2 must be a matrix");
  KILN_CHECK(a.sym_size(1) == b.sym_size(0), Runtime, "mm", "mat1 and mat2 shapes cannot be multiplied (",
             a.sym_size(0), "x", a.sym_size(1), " and ", b.sym_size(0), "x", b.sym_size(1), ")");
  check_same_dtype("mm", a, b);
  return squeeze(bmm(unsqueeze(a, 0), unsqueeze(b, 0)), Shape{0});
}

Tensor mv(const Tensor& a, const Tensor& v) {
  KILN_CHECK(a.dim() == 2 && v.dim() == 1, Runtime, "mv", "vector + matrix @ vector expected, got ",
             a.dim(), ", ", v.dim());
  KILN_CHECK(a.sizes()[1] == v.sizes()[0], Runtime, "mv", "size mismatch, got input (", a.sizes()[0],
             "), mat (", a.sizes()[0], "x", a.sizes()[1], "), vec (", v.sizes()[0], ")");
  check_same_dtype("mv", a, v);
  return reshape(mm(a, unsqueeze(v, 1)), {a.sizes()[0]});
}

Tensor dot(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 1 && b.dim() == 1, Runtime, "dot", "1D tensors expected, but got ", a.dim(),
             "D and ", b.dim(), "D tensors");
  KILN_CHECK(a.dtype() == b.dtype(), Runtime, "dot", "dot : expected both vectors to have same dtype, but "
             "found ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  KILN_CHECK(a.numel() == b.numel(), Runtime, "dot", "inconsistent tensor size, expected tensor [",
             a.numel(), "] and src [", b.numel(), "] to have the same number of elements, but got ",
             a.numel(), " and ", b.numel(), " elements respectively");
  return reshape(mm(unsqueeze(a, 0), unsqueeze(b, 1)), {});
}

Tensor vdot(const Tensor& a, const Tensor& b) { return dot(conj(a), b); }

Tensor matmul(const Tensor& a, const Tensor& b) {
  int64_t da = a.dim(), db = b.dim();
  KILN_CHECK(da > 0 && db > 0, Runtime, "matmul", "both arguments to matmul need to be at least 1D, but "
             "they are ", da, "D and ", db, "D");
  if (da == 1 && db == 1) return dot(a, b);
  if (da == 2 && db == 1) return mv(a, b);
  if (da == 1 && db == 2) return squeeze(mm(unsqueeze(a, 0), b), Shape{0});
  if (da == 2 && db == 2) return mm(a, b);
  check_same_dtype("matmul", a, b);
  // batched: promote 1-D operands, broadcast batch dims
  Tensor A = da == 1 ? unsqueeze(a, 0) : a;
  Tensor B = db == 1 ? unsqueeze(b, 1) : b;
  // in SymInts: a traced batch or sequence length stays symbolic
  const SymShape as = A.sym_sizes(), bs = B.sym_sizes();
  SymInt M = as[as.size() - 2], K = as.back(), K2 = bs[bs.size() - 2], N = bs.back();
  KILN_CHECK(K == K2, Runtime, "matmul", "mat1 and mat2 shapes cannot be multiplied (", M, "x", K, " and ",
             K2, "x", N, ")");
  SymShape ba(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  SymShape batch = broadcast_shapes(ba, bb, "matmul");
  SymInt Bn = sym_numel(batch);
  SymShape s = batch;
  s.push_back(M), s.push_back(N);
  Tensor C;
  if (db <= 2 && ba == batch) {
    // (..., M, K) @ (K, N): fold the batch into M
    C = reshape_symint(mm(reshape_symint(A, {Bn * M, K}), B), s);
  } else {
    SymShape ea = batch, eb = batch;
    ea.push_back(M), ea.push_back(K), eb.push_back(K), eb.push_back(N);
    Tensor A3 = reshape_symint(expand_symint(A, ea), {Bn, M, K});
    Tensor B3 = reshape_symint(expand_symint(B, eb), {Bn, K, N});
    C = reshape_symint(bmm(A3, B3), s);
  }
  if (da == 1) C = squeeze(C, Shape{-2});
  if (db == 1) C = squeeze(C, Shape{-1});
  return C;
}

Tensor outer(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 1 && b.dim() == 1, Runtime, "outer", "outer: Expected 1-D argument self, but got ",
             a.dim(), "-D");
  return mul(unsqueeze(a, 1), unsqueeze(b, 0));
}

static Tensor axpby(const Tensor& c, const Tensor& prod, const Scalar& beta, const Scalar& alpha) {
  Tensor p = alpha.to_double() == 1.0 && !alpha.is_complex() ? prod : mul(prod, alpha);
  if (!beta.is_complex() && beta.to_double() == 0.0) return add(zeros_like(p), p);  // beta 0 ignores NaN in c
  Tensor cb = !beta.is_complex() && beta.to_double() == 1.0 ? c : mul(c, beta);
  return add(cb, p);
}

Tensor addmm(const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  Tensor p = mm(a, b);
  return axpby(expand(c, p.sizes()), p, beta, alpha);
}
Tensor baddbmm(const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  Tensor p = bmm(a, b);
  return axpby(expand(c, p.sizes()), p, beta, alpha);
}
Tensor addbmm(const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  Tensor p = sum(bmm(a, b), Shape{0});
  return axpby(expand(c, p.sizes()), p, beta, alpha);
}
Tensor addmv(const Tensor& c, const Tensor& a, const Tensor& v, const Scalar& beta, const Scalar& alpha) {
  Tensor p = mv(a, v);
  return axpby(expand(c, p.sizes()), p, beta, alpha);
}

Tensor inner(const Tensor& a, const Tensor& b) {
  if (a.dim() == 0 || b.dim() == 0) return mul(a, b);
  KILN_CHECK(a.sizes().back() == b.sizes().back(), Runtime, "inner", "inner() the last dimension must "
             "match on both input tensors but got shapes ", a.sizes(), " and ", b.sizes());
  return tensordot(a, b, {a.dim() - 1}, {b.dim() - 1});
}

Tensor tensordot(const Tensor& a, const Tensor& b, const Shape& dims_a, const Shape& dims_b) {
  KILN_CHECK(dims_a.size() == dims_b.size(), Runtime, "tensordot", "both dimension lists should have "
             "same length");
  std::vector<bool> ca(a.dim(), false), cb(b.dim(), false);
  Shape pa, pb;
  int64_t K = 1;
  for (size_t i = 0; i < dims_a.size(); ++i) {
    int64_t x = wrap_dim(dims_a[i], a.dim(), "tensordot"), y = wrap_dim(dims_b[i], b.dim(), "tensordot");
    KILN_CHECK(a.sizes()[x] == b.sizes()[y], Runtime, "tensordot", "contracted dimensions need to match, "
               "but first has size ", a.sizes()[x], " in dim ", x, " and second has size ", b.sizes()[y],
               " in dim ", y);
    ca[x] = cb[y] = true;
    K *= a.sizes()[x];
  }
  Shape out, fa, fb;
  int64_t M = 1, N = 1;
  for (int64_t i = 0; i < a.dim(); ++i)
    if (!ca[i]) fa.push_back(i), out.push_back(a.sizes()[i]), M *= a.sizes()[i];
  for (int64_t i = 0; i < b.dim(); ++i)
    if (!cb[i]) fb.push_back(i), out.push_back(b.sizes()[i]), N *= b.sizes()[i];
  for (size_t i = 0; i < dims_a.size(); ++i) {
    fa.push_back(wrap_dim(dims_a[i], a.dim(), "tensordot"));
  }
  Shape ob;
  for (size_t i = 0; i < dims_b.size(); ++i) ob.push_back(wrap_dim(dims_b[i], b.dim(), "tensordot"));
  ob.insert(ob.end(), fb.begin(), fb.end());
  Tensor A = reshape(permute(a, fa), {M, K});
  Tensor B = reshape(permute(b, ob), {K, N});
  return reshape(mm(A, B), out);
}

Tensor kron(const Tensor& a, const Tensor& b) {
  int64_t n = std::max(a.dim(), b.dim());
  Tensor A = a, B = b;
  while (A.dim() < n) A = unsqueeze(A, 0);
  while (B.dim() < n) B = unsqueeze(B, 0);
  Shape sa, sb, out;
  for (int64_t i = 0; i < n; ++i) {
    sa.push_back(A.sizes()[i]), sa.push_back(1);
    sb.push_back(1), sb.push_back(B.sizes()[i]);
    out.push_back(A.sizes()[i] * B.sizes()[i]);
  }
  return reshape(mul(reshape(A, sa), reshape(B, sb)), out);
}

Tensor Tensor::matmul(const Tensor& o) const { return kiln::matmul(*this, o); }

}  // namespace kiln

namespace kiln {
namespace {
// d(A B): dA = G B^H, dB = A^H G (batched).
TensorList bmm_grad(const GradCtx& c, const TensorList& go) {
  const Tensor &g = go[0], &a = c.in[0], &b = c.in[1];
  auto h = [](const Tensor& t) { return transpose(t.is_complex() ? conj(t) : t, 1, 2); };
  return {c.needs[0] ? bmm(g, h(b)) : Tensor(), c.needs[1] ? bmm(h(a), g) : Tensor()};
}
DerivativeRegistrar d_bmm{op_bmm, bmm_grad, 0b11, 0};
}  // namespace
}  // namespace kiln
