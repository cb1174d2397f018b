// torch._grouped_mm: the grouped matrix multiply of mixture-of-experts layers, in torch's four layouts
// (the kernel: backend/cpu/grouped_mm.cpp). offs holds int32 cumulative end offsets of the groups
// along the dimension a 2-D operand is cut on:
//   2D x 3D  A (T, K),    B (G, K, N), offs over T  -> (T, N):     rows of group g use B[g]
//   3D x 2D  A (G, M, K), B (K, N),    offs over N  -> (M, N):     columns of group g use A[g]
//   2D x 2D  A (M, K),    B (K, N),    offs over K  -> (G, M, N):  out[g] sums group g's slice of K
//   3D x 3D  A (G, M, K), B (G, K, N), no offs      -> (G, M, N):  bmm
// Without torch's CPU limits: any strides, a bias (G, N) (3D x 2D: one per column, (N,)), rows /
// columns past offs[-1] and empty groups are zero, and the derivative takes any upstream gradient
// (a zero-stride one from sum() included). Each derivative is another grouped product.
#include "kiln/ops/composite.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

enum Layout { k2D3D, k3D2D, k2D2D, k3D3D };
Layout layout_of(int64_t da, int64_t db) {
  return da == 2 ? (db == 3 ? k2D3D : k2D2D) : (db == 2 ? k3D2D : k3D3D);
}

// inputs {self, mat2, offs?, bias?}; attrs {out_dtype}
SpecList grouped_mm_meta(const OpDef& op, const SpecList& in, const Attrs& attrs) {
  const TensorSpec &a = in[0], &b = in[1];
  const TensorSpec* offs = in.size() > 2 && in[2].defined() ? &in[2] : nullptr;
  const TensorSpec* bias = in.size() > 3 && in[3].defined() ? &in[3] : nullptr;
  const Dtype d = a.dtype();
  KILN_CHECK(d == kFloat32 || d == kBFloat16 || d == kFloat16, Runtime, op.name,
             "Expected mat_a to be Float32, BFloat16 or Float16 matrix, got ", dtype_name(d));
  KILN_CHECK(b.dtype() == d, Runtime, op.name, "expected m1 and m2 to have the same dtype, but got: ",
             dtype_name(d), " != ", dtype_name(b.dtype()));
  KILN_CHECK(a.dim() == 2 || a.dim() == 3, Runtime, op.name, "mat_a has to be 2 or 3d");
  KILN_CHECK(b.dim() == 2 || b.dim() == 3, Runtime, op.name, "mat_b has to be 2 or 3d");
  const Layout l = layout_of(a.dim(), b.dim());
  KILN_CHECK((offs != nullptr) == (l != k3D3D), Runtime, op.name,
             "Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d");
  const SymInt ka = a.size(-1), kb = b.size(-2);
  KILN_CHECK(bool(ka == kb), Runtime, op.name, "contraction dimension of mat_a and mat_b must match, got ", a.sizes(),
             " and ", b.sizes());
  SymInt groups;
  if (offs) {
    KILN_CHECK(offs->dtype() == kInt32, Runtime, op.name, "Offsets have to be int32");
    KILN_CHECK(offs->dim() == 1, Runtime, op.name, "Offsets have to be 1-D, got ", offs->dim(), "-D");
    groups = offs->size(0);
    if (l == k2D3D) KILN_CHECK(bool(groups == b.size(0)), Runtime, op.name, "matrix batch sizes have to match");
    if (l == k3D2D) KILN_CHECK(bool(groups == a.size(0)), Runtime, op.name, "matrix batch sizes have to match");
  } else {
    KILN_CHECK(bool(a.size(0) == b.size(0)), Runtime, op.name, "matrix batch sizes have to match");
    groups = a.size(0);
  }
  const Dtype out = opt_attr<Dtype>(attrs, 0).value_or(d);
  KILN_CHECK(out == d, Runtime, op.name, "Grouped gemm output dtype must match `mat_a` dtype");
  SymShape shape;
  switch (l) {
    case k2D3D: shape = {a.size(0), b.size(2)}; break;
    case k3D2D: shape = {a.size(1), b.size(1)}; break;
    case k2D2D: shape = {groups, a.size(0), b.size(1)}; break;
    case k3D3D: shape = {a.size(0), a.size(1), b.size(2)}; break;
  }
  if (bias) {
    const bool per_column = l == k3D2D;
    const bool ok = per_column ? bias->dim() == 1 && bool(bias->size(0) == shape[1])
                               : bias->dim() == 2 && bool(bias->size(0) == groups) && bool(bias->size(1) == shape.back());
    KILN_CHECK(ok, Runtime, op.name, "bias must have shape ",
               per_column ? SymShape{shape[1]} : SymShape{groups, shape.back()}, ", got ", bias->sizes());
    KILN_CHECK(bias->dtype() == d, Runtime, op.name, "bias must have mat_a's dtype ", dtype_name(d), ", got ",
               dtype_name(bias->dtype()));
  }
  return {{shape, out}};
}

OpDef op_grouped_mm{"_grouped_mm", 0, grouped_mm_meta, {}};
OpRegistrar reg_grouped_mm{op_grouped_mm,
                           "_grouped_mm(Tensor self, Tensor mat2, Tensor? offs=None, Tensor? bias=None, "
                           "ScalarType? out_dtype=None) -> Tensor",
                           kFunctionVariant};

Tensor grouped(const Tensor& a, const Tensor& b, const Tensor& offs) { return _grouped_mm(a, b, offs); }

// Each layout's derivative is a grouped product in another layout (see the table at the top).
TensorList grouped_mm_grad(const GradCtx& c, const TensorList& go) {
  const Tensor &a = c.in[0], &b = c.in[1], &g = go[0];
  const Tensor offs = c.in.size() > 2 ? c.in[2] : Tensor();
  const Layout l = layout_of(a.dim(), b.dim());
  Tensor da, db, dbias;
  switch (l) {
    case k2D3D:  // Y[rows g] = A[rows g] B[g]
      if (c.needs[0]) da = grouped(g, mT(b), offs);          // (T, N) x (G, N, K)
      if (c.needs[1]) db = grouped(mT(a), g, offs);          // (K, T) x (T, N), cut on T -> (G, K, N)
      break;
    case k3D2D:  // Y[:, cols g] = A[g] B[:, cols g]
      if (c.needs[0]) da = grouped(g, mT(b), offs);          // (M, N) x (N, K), cut on N -> (G, M, K)
      if (c.needs[1]) db = grouped(mT(a), g, offs);          // (G, K, M) x (M, N) -> (K, N)
      break;
    case k2D2D:  // Y[g] = A[:, K g] B[K g, :]
      if (c.needs[0]) da = grouped(g, mT(b), offs);          // (G, M, N) x (N, K) -> (M, K)
      if (c.needs[1]) db = grouped(mT(a), g, offs);          // (K, M) x (G, M, N) -> (K, N)
      break;
    case k3D3D:
      if (c.needs[0]) da = bmm(g, mT(b));
      if (c.needs[1]) db = bmm(mT(a), g);
      break;
  }
  if (c.needs.size() > 3 && c.needs[3]) {
    if (l == k2D3D) {  // per group: the sum of its rows, as (1, T) x (T, N) cut on T
      Tensor ones_row = ones({1, g.sizes()[0]}, TensorOptions(g.dtype()));
      dbias = squeeze(grouped(ones_row, g, offs), Shape{1});
    } else if (l == k3D2D) {  // columns past the last group get no bias, so no gradient
      const Tensor cols = arange(g.sizes()[1], TensorOptions(kInt32));
      dbias = mul(sum(g, Shape{0}), to_dtype(lt(cols, select(offs, 0, -1)), g.dtype()));
    } else {
      dbias = sum(g, Shape{1});
    }
  }
  return {da, db, Tensor(), dbias};
}
DerivativeRegistrar d_grouped_mm{op_grouped_mm, grouped_mm_grad, 0b0111, 0};

}  // namespace

Tensor _grouped_mm(const Tensor& self, const Tensor& mat2, const Tensor& offs, const Tensor& bias,
                   std::optional<Dtype> out_dtype) {
  Attrs attrs{out_dtype ? Attr(*out_dtype) : Attr()};
  return dispatch1(op_grouped_mm, {self, mat2, offs, bias}, attrs);
}

}  // namespace kiln
