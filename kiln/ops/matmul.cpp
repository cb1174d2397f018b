// The matmul family. One table op, bmm over (B, M, K) x (B, K, N), backs every composite; float32,
// float64 and complex go to OpenBLAS, float16 / bfloat16 / float8 to kiln's own packed GEMM
// (converted while packing, float32 accumulation, one rounding: kernels_gemm.cpp), integers use a
// plain triple loop (the kernel: kiln/backend/cpu/matmul.cpp).
#include <algorithm>
#include <numeric>

#include "kiln/amp/autocast.h"
#include "kiln/ops/composite.h"
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

OpDef op_bmm{"bmm", kOutExactDtype, bmm_meta, {}};  // kernel: backend/cpu/matmul.cpp
OpRegistrar reg_bmm{op_bmm, "bmm(Tensor self, Tensor mat2) -> Tensor", kFunctionAndMethod};

// beta * self + alpha * (batch1 @ batch2) in bfloat16 or float16, rounded once from the product's
// float32 sums, as torch's addmm / baddbmm / linear with a bias round (the composites below send
// those dtypes here; mm then add would round twice). self comes expanded to the output's shape.
SpecList fused_baddbmm_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  const TensorSpec &c = in[0], &a = in[1], &b = in[2];
  SpecList p = bmm_meta(op, {a, b}, {});
  KILN_CHECK(c.dtype() == a.dtype() && (a.dtype() == kBFloat16 || a.dtype() == kFloat16), Runtime, op.name,
             "expected bfloat16 or float16 operands of one dtype, got ", dtype_name(c.dtype()), ", ",
             dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  KILN_CHECK(c.dim() == 3 && c.sizes()[0] == a.sizes()[0] && c.sizes()[1] == a.sizes()[1] &&
                 c.sizes()[2] == b.sizes()[2],
             Runtime, op.name, "self must have the product's shape [", a.sizes()[0], ", ", a.sizes()[1], ", ",
             b.sizes()[2], "], got ", c.sizes());
  return p;
}
OpDef op_fused_baddbmm{"_fused_baddbmm", 0, fused_baddbmm_meta, {}};  // kernel: backend/cpu/matmul.cpp
OpRegistrar reg_fused_baddbmm{
    op_fused_baddbmm, "_fused_baddbmm(Tensor self, Tensor batch1, Tensor batch2, Scalar beta, Scalar alpha) -> Tensor",
    kFunctionVariant};

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dtype() == b.dtype(), Runtime, op, "expected m1 and m2 to have the same dtype, but got: ",
             dtype_name(a.dtype()), " != ", dtype_name(b.dtype()));
}

}  // namespace

Tensor bmm(const Tensor& a, const Tensor& b) { return dispatch1(op_bmm, {a, b}); }

namespace {
void check_mm(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 2, Runtime, "mm", "self must be a matrix");
  KILN_CHECK(b.dim() == 2, Runtime, "mm", "mat2 must be a matrix");
  KILN_CHECK(a.sym_size(1) == b.sym_size(0), Runtime, "mm", "mat1 and mat2 shapes cannot be multiplied (",
             a.sym_size(0), "x", a.sym_size(1), " and ", b.sym_size(0), "x", b.sym_size(1), ")");
  check_same_dtype("mm", a, b);
}
}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  KILN_AUTOCAST(kLowerPrecision, mm, a, b);
  check_mm(a, b);
  return squeeze(bmm(unsqueeze(a, 0), unsqueeze(b, 0)), Shape{0});
}

Tensor mv(const Tensor& a, const Tensor& v) {
  KILN_AUTOCAST(kOpaque, mv, a, v);
  KILN_CHECK(a.dim() == 2 && v.dim() == 1, Runtime, "mv", "vector + matrix @ vector expected, got ",
             a.dim(), ", ", v.dim());
  KILN_CHECK(a.sizes()[1] == v.sizes()[0], Runtime, "mv", "size mismatch, got input (", a.sizes()[0],
             "), mat (", a.sizes()[0], "x", a.sizes()[1], "), vec (", v.sizes()[0], ")");
  check_same_dtype("mv", a, v);
  return reshape(mm(a, unsqueeze(v, 1)), {a.sizes()[0]});
}

Tensor dot(const Tensor& a, const Tensor& b) {
  KILN_AUTOCAST(kOpaque, dot, a, b);
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
  KILN_AUTOCAST(kLowerPrecision, matmul, a, b);
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

// bfloat16 / float16 operands of one dtype and real scalars: one rounding (_fused_baddbmm).
static bool fused_lowp(const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  return (a.dtype() == kBFloat16 || a.dtype() == kFloat16) && b.dtype() == a.dtype() && c.dtype() == a.dtype() &&
         !beta.is_complex() && !alpha.is_complex();
}
static Tensor fused_baddbmm(const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta,
                            const Scalar& alpha) {
  SymShape s{a.sym_size(0), a.sym_size(1), b.sym_size(2)};
  return dispatch1(op_fused_baddbmm, {expand_symint(c, s), a, b}, {beta, alpha});
}

Tensor addmm(const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  KILN_AUTOCAST(kLowerPrecision, addmm, c, a, b, beta, alpha);
  if (fused_lowp(c, a, b, beta, alpha)) {
    check_mm(a, b);
    SymShape s{a.sym_size(0), b.sym_size(1)};
    return squeeze(fused_baddbmm(unsqueeze(expand_symint(c, s), 0), unsqueeze(a, 0), unsqueeze(b, 0), beta, alpha),
                   Shape{0});
  }
  Tensor p = mm(a, b);
  return axpby(expand_symint(c, p.sym_sizes()), p, beta, alpha);
}
Tensor baddbmm(const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  KILN_AUTOCAST(kLowerPrecision, baddbmm, c, a, b, beta, alpha);
  if (fused_lowp(c, a, b, beta, alpha) && a.dim() == 3 && b.dim() == 3) return fused_baddbmm(c, a, b, beta, alpha);
  Tensor p = bmm(a, b);
  return axpby(expand_symint(c, p.sym_sizes()), p, beta, alpha);
}
Tensor addbmm(const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  KILN_AUTOCAST(kLowerPrecision, addbmm, c, a, b, beta, alpha);
  if (fused_lowp(c, a, b, beta, alpha) && a.dim() == 3 && b.dim() == 3 && !a.has_symbolic_sizes() &&
      !b.has_symbolic_sizes() && a.sizes()[0] > 0 && a.sizes()[0] == b.sizes()[0] && a.sizes()[2] == b.sizes()[1]) {
    // torch's order: one addmm a batch into the result, rounded each time (beta on the first only)
    Tensor r = c;
    for (int64_t i = 0; i < a.sizes()[0]; ++i)
      r = addmm(r, select(a, 0, i), select(b, 0, i), i == 0 ? beta : Scalar(1), alpha);
    return r;
  }
  Tensor p = sum(bmm(a, b), Shape{0});
  return axpby(expand_symint(c, p.sym_sizes()), p, beta, alpha);
}
Tensor addmv(const Tensor& c, const Tensor& a, const Tensor& v, const Scalar& beta, const Scalar& alpha) {
  KILN_AUTOCAST(kOpaque, addmv, c, a, v, beta, alpha);
  Tensor p = mv(a, v);
  return axpby(expand_symint(c, p.sym_sizes()), p, beta, alpha);
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

Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims) {
  KILN_CHECK(dims >= 0, Runtime, "tensordot", "tensordot expects dims >= 0, but got dims=", dims);
  KILN_CHECK(dims <= a.dim() && dims <= b.dim(), Runtime, "tensordot",
             "tensordot expects dims < ndim_a or ndim_b, but got dims=", dims);
  Shape da, db;
  for (int64_t i = 0; i < dims; ++i) da.push_back(a.dim() - dims + i), db.push_back(i);
  return tensordot(a, b, da, db);
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
// torch's addmm / baddbmm derivative: d self = beta G, d batch1 = alpha G B^T, d batch2 = alpha A^T G.
TensorList fused_baddbmm_grad(const GradCtx& c, const TensorList& go) {
  const Tensor &g = go[0], &a = c.in[1], &b = c.in[2];
  const Scalar beta = attr<Scalar>(c.attrs, 0), alpha = attr<Scalar>(c.attrs, 1);
  auto scaled = [](const Tensor& t, const Scalar& s) { return s.to_double() == 1.0 ? t : mul(t, s); };
  return {c.needs[0] ? scaled(g, beta) : Tensor(), c.needs[1] ? scaled(bmm(g, transpose(b, 1, 2)), alpha) : Tensor(),
          c.needs[2] ? scaled(bmm(transpose(a, 1, 2), g), alpha) : Tensor()};
}
DerivativeRegistrar d_fused_baddbmm{op_fused_baddbmm, fused_baddbmm_grad, 0b110, 0};
}  // namespace

// ---- composites with torch's schemas (ops/composite.h): their public forms come from these -------
namespace {
using BinFn = Tensor (*)(const Tensor&, const Tensor&);
template <BinFn F>
TensorList bin(const TensorList& in, const Attrs&) {
  return {F(in[0], in[1])};
}
Composite c_matmul{"matmul(Tensor self, Tensor other) -> Tensor", bin<matmul>, kFunctionAndMethod};
Composite c_mm{"mm(Tensor self, Tensor mat2) -> Tensor", bin<mm>, kFunctionAndMethod};
Composite c_mv{"mv(Tensor self, Tensor vec) -> Tensor", bin<mv>, kFunctionAndMethod};
Composite c_dot{"dot(Tensor self, Tensor tensor) -> Tensor", bin<dot>, kFunctionAndMethod};
Composite c_vdot{"vdot(Tensor self, Tensor other) -> Tensor", bin<vdot>, kFunctionAndMethod};
Composite c_outer{"outer(Tensor self, Tensor vec2) -> Tensor", bin<outer>, kFunctionAndMethod};
Composite c_ger{"ger(Tensor self, Tensor vec2) -> Tensor", bin<outer>, kFunctionAndMethod};
Composite c_inner{"inner(Tensor self, Tensor other) -> Tensor", bin<inner>, kFunctionAndMethod};
Composite c_kron{"kron(Tensor self, Tensor other) -> Tensor", bin<kron>, kFunctionAndMethod};

using AddFn = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Scalar&, const Scalar&);
template <AddFn F>
TensorList addmul(const TensorList& in, const Attrs& a) {
  return {F(in[0], in[1], in[2], attr<Scalar>(a, 0), attr<Scalar>(a, 1))};
}
Composite c_addmm{"addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
                  addmul<addmm>, kAllVariants};
Composite c_addmv{"addmv(Tensor self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
                  addmul<addmv>, kAllVariants};
Composite c_baddbmm{"baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
                    addmul<baddbmm>, kAllVariants};
Composite c_addbmm{"addbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
                   addmul<addbmm>, kAllVariants};
// torch refuses an out= of another dtype than the result's for these (outer, ger, kron cast into it)
CompositeTags t_matmul{c_matmul, kOutExactDtype}, t_mm{c_mm, kOutExactDtype}, t_mv{c_mv, kOutExactDtype};
CompositeTags t_dot{c_dot, kOutExactDtype}, t_vdot{c_vdot, kOutExactDtype}, t_inner{c_inner, kOutExactDtype};
CompositeTags t_addmm{c_addmm, kOutExactDtype}, t_addmv{c_addmv, kOutExactDtype};
CompositeTags t_baddbmm{c_baddbmm, kOutExactDtype}, t_addbmm{c_addbmm, kOutExactDtype};
}  // namespace

}  // namespace kiln
