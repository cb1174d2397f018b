// The matmul family. One table op, bmm over (B, M, K) x (B, K, N), backs every composite; float32,
// float64 and complex go to OpenBLAS, float16 / bfloat16 convert to float32 and accumulate there,
// integers use a plain triple loop.
#include <cblas.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "kiln/backend/cpu/parallel.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

SpecList bmm_meta(const OpDef&, const TensorList& in, const Attrs&) {
  const Tensor &a = in[0], &b = in[1];
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

void bmm_kernel(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  Tensor a = in[0], b = in[1];
  Tensor& c = out[0];
  int64_t Bn = a.sizes()[0], M = a.sizes()[1], K = a.sizes()[2], N = b.sizes()[2];
  if (c.numel() == 0) return;
  if (K == 0) {
    fill_(c, Scalar(0));
    return;
  }
  Dtype d = a.dtype();
  if (d == kFloat16 || d == kBFloat16) {
    Tensor a32 = to_dtype(a, kFloat32), b32 = to_dtype(b, kFloat32);
    Tensor c32 = make_tensor(c.sizes(), kFloat32);
    Mat A = blas_operand(a32), B = blas_operand(b32);
    gemm_blas<float>(A, B, c32, Bn, M, N, K);
    copy_(c, c32);
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
OpRegistrar reg_bmm{op_bmm};

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dtype() == b.dtype(), Runtime, op, "expected m1 and m2 to have the same dtype, but got: ",
             dtype_name(a.dtype()), " != ", dtype_name(b.dtype()));
}

}  // namespace

Tensor bmm(const Tensor& a, const Tensor& b) { return dispatch1(op_bmm, {a, b}); }

Tensor mm(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 2, Runtime, "mm", "self must be a matrix");
  KILN_CHECK(b.dim() == 2, Runtime, "mm", "mat2 must be a matrix");
  KILN_CHECK(a.sizes()[1] == b.sizes()[0], Runtime, "mm", "mat1 and mat2 shapes cannot be multiplied (",
             a.sizes()[0], "x", a.sizes()[1], " and ", b.sizes()[0], "x", b.sizes()[1], ")");
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
  int64_t M = A.sizes()[A.dim() - 2], K = A.sizes()[A.dim() - 1];
  int64_t K2 = B.sizes()[B.dim() - 2], N = B.sizes()[B.dim() - 1];
  KILN_CHECK(K == K2, Runtime, "matmul", "mat1 and mat2 shapes cannot be multiplied (", M, "x", K, " and ",
             K2, "x", N, ")");
  Shape ba(A.sizes().begin(), A.sizes().end() - 2), bb(B.sizes().begin(), B.sizes().end() - 2);
  Shape batch = broadcast_shapes(ba, bb, "matmul");
  int64_t Bn = shape_numel(batch);
  Tensor C;
  if (db <= 2 && ba == batch) {
    // (..., M, K) @ (K, N): fold the batch into M
    C = reshape(mm(reshape(A, {Bn * M, K}), B), [&] { Shape s = batch; s.push_back(M); s.push_back(N); return s; }());
  } else {
    Shape ea = batch, eb = batch;
    ea.push_back(M), ea.push_back(K), eb.push_back(K), eb.push_back(N);
    Tensor A3 = reshape(expand(A, ea), {Bn, M, K});
    Tensor B3 = reshape(expand(B, eb), {Bn, K, N});
    Shape s = batch;
    s.push_back(M), s.push_back(N);
    C = reshape(bmm(A3, B3), s);
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

// einsum: diagonals for repeated labels, every operand aligned to one label order, a broadcast
// product, then a sum over the contracted labels. (Pairwise bmm contraction is a TODO for speed.)
Tensor einsum(const std::string& eq_in, const TensorList& ops) {
  std::string eq;
  for (char c : eq_in)
    if (c != ' ') eq += c;
  auto arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  {
    size_t s = 0;
    while (true) {
      size_t c = lhs.find(',', s);
      terms.push_back(lhs.substr(s, c == std::string::npos ? std::string::npos : c - s));
      if (c == std::string::npos) break;
      s = c + 1;
    }
  }
  KILN_CHECK(terms.size() == ops.size(), Value, "einsum", "einsum(): more operands were provided than "
             "specified in the equation" );
  // expand "..." into unique uppercase-free placeholder labels (chars 1..)
  int64_t ell_dims = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    auto p = terms[i].find("...");
    if (p != std::string::npos) ell_dims = std::max<int64_t>(ell_dims, ops[i].dim() - (int64_t)(terms[i].size() - 3));
  }
  auto expand_ell = [&](const std::string& t, int64_t nd) {
    auto p = t.find("...");
    if (p == std::string::npos) return t;
    std::string e;
    for (int64_t k = ell_dims - nd; k < ell_dims; ++k) e += static_cast<char>(1 + k);
    return t.substr(0, p) + e + t.substr(p + 3);
  };
  std::vector<std::string> labels;
  for (size_t i = 0; i < terms.size(); ++i) {
    int64_t nd = terms[i].find("...") == std::string::npos ? 0 : ops[i].dim() - (int64_t)(terms[i].size() - 3);
    labels.push_back(expand_ell(terms[i], nd));
    KILN_CHECK((int64_t)labels.back().size() == ops[i].dim(), Runtime, "einsum", "einsum(): the number of "
               "subscripts in the equation (", labels.back().size(), ") does not match the number of "
               "dimensions (", ops[i].dim(), ") for operand ", i, (terms[i].find("...") == std::string::npos ? " and no ellipsis was given" : ""));
  }
  std::string out;
  if (arrow != std::string::npos) {
    std::string r = eq.substr(arrow + 2);
    auto p = r.find("...");
    if (p != std::string::npos) {
      std::string e;
      for (int64_t k = 0; k < ell_dims; ++k) e += static_cast<char>(1 + k);
      r = r.substr(0, p) + e + r.substr(p + 3);
    }
    out = r;
  } else {
    std::map<char, int> cnt;
    for (auto& l : labels)
      for (char c : l) cnt[c]++;
    for (int64_t k = 0; k < ell_dims; ++k) out += static_cast<char>(1 + k);
    for (auto& [c, n] : cnt)
      if (n == 1 && c > 31) out += c;
  }
  // sizes per label (with broadcasting of size-1)
  std::map<char, int64_t> size;
  for (size_t i = 0; i < ops.size(); ++i)
    for (size_t k = 0; k < labels[i].size(); ++k) {
      int64_t s = ops[i].sizes()[k];
      auto it = size.find(labels[i][k]);
      if (it == size.end() || it->second == 1) size[labels[i][k]] = s;
      else KILN_CHECK(s == 1 || s == it->second, Runtime, "einsum", "einsum(): operands do not broadcast "
                      "with remapped shapes (original->remapped)");
    }
  // Bring every operand to the full label set in a canonical order: out labels then the rest.
  std::string all = out;
  for (auto& l : labels)
    for (char c : l)
      if (all.find(c) == std::string::npos) all += c;
  Tensor acc;
  for (size_t i = 0; i < ops.size(); ++i) {
    Tensor t = ops[i];
    std::string l = labels[i];
    // diagonals for repeated labels
    for (size_t a = 0; a < l.size(); ++a)
      for (size_t b = a + 1; b < l.size();) {
        if (l[a] == l[b]) {
          t = movedim(diagonal(t, 0, a, b), {-1}, {(int64_t)a});
          l.erase(b, 1);
        } else {
          ++b;
        }
      }
    // permute to canonical order, inserting size-1 dims for missing labels
    Shape perm;
    for (char c : all) {
      auto p = l.find(c);
      if (p != std::string::npos) perm.push_back(p);
    }
    t = permute(t, perm);
    Shape s2;
    size_t k = 0;
    for (char c : all) {
      if (l.find(c) != std::string::npos) s2.push_back(t.sizes()[k++]);
      else s2.push_back(1);
    }
    t = reshape(t, s2);
    acc = acc.defined() ? mul(acc, t) : t;
  }
  // sum out the non-output labels
  Shape red;
  for (size_t k = out.size(); k < all.size(); ++k) red.push_back(k);
  Tensor r = red.empty() ? acc : sum(acc, red);
  Shape final_shape;
  for (char c : out) final_shape.push_back(size[c]);
  return contiguous(expand(r, final_shape));
}

Tensor Tensor::matmul(const Tensor& o) const { return kiln::matmul(*this, o); }

}  // namespace kiln
