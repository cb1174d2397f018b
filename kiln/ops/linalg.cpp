// Linear algebra: the LU family, solves, inverse, determinants and Cholesky (torch.linalg and the
// top-level functions; linalg.h). Table ops carry torch's internal names and schemas
// (`linalg_lu_factor_ex`, `linalg_det`, `linalg_solve_ex`, `_linalg_slogdet`, ...), so export names them as torch
// does; the public functions are composites of them. Metas here (every check a kernel relies on),
// derivatives in linalg_grad.cpp, CPU kernels (LAPACK, and our own for tiny matrices) in
// backend/cpu/linalg.cpp.
#include "kiln/ops/linalg.h"

#include "kiln/ops/composite.h"
#include "kiln/ops/linalg_detail.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

using namespace linalg_detail;

void check_same_dtype(const char* op, const TensorSpec& A, const TensorSpec& B) {
  KILN_CHECK(A.dtype() == B.dtype(), Runtime, op, "Expected A and B to have the same dtype, but found A of type ",
             dtype_name(A.dtype()), " and B of type ", dtype_name(B.dtype()), " instead.");
}

// A X = B (left) or X A = B: A (*, n, n), B (*, n, k) / (*, k, n); the batch dims broadcast.
SymShape solve_shape(const char* op, const TensorSpec& A, const TensorSpec& B, bool left) {
  KILN_CHECK(B.dim() >= 2, Runtime, op, "The input tensor B must have at least 2 dimensions.");
  SymInt n = A.size(-1);
  bool ok = left ? bool(B.size(-2) == n) : bool(B.size(-1) == n);
  KILN_CHECK(ok, Runtime, op, "Incompatible shapes of A and B for the equation ", left ? "AX = B" : "XA = B", " (",
             A.size(-2), "x", A.size(-1), " and ", B.size(-2), "x", B.size(-1), ")");
  SymShape b = broadcast_shapes(batch_of(A), batch_of(B), op);
  return with_tail(b, {B.size(-2), B.size(-1)});
}

// ---- LU -------------------------------------------------------------------------------------------------
SpecList lu_factor_ex_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const TensorSpec& A = in[0];
  check_input(A, "linalg.lu_factor", /*square=*/false, "A", "lu_cpu");
  KILN_CHECK(attr<bool>(a, 0), Runtime, "linalg.lu_factor", "LU without pivoting is not implemented on the CPU");
  SymShape b = batch_of(A);
  SymInt k = sym_min(A.size(-2), A.size(-1));
  return {{A.sizes(), A.dtype(), A.device()}, {with_tail(b, {k}), kInt32, A.device()}, {b, kInt32, A.device()}};
}
OpDef op_lu_factor_ex{"linalg_lu_factor_ex", kOutExactDtype, lu_factor_ex_meta, {}};
OpRegistrar reg_lu_factor_ex{op_lu_factor_ex,
                             "linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False) -> "
                             "(Tensor LU, Tensor pivots, Tensor info)",
                             kFunctionVariant};

void check_pivots(const char* op, const TensorSpec& LU, const TensorSpec& piv) {
  KILN_CHECK(piv.dtype() == kInt32, Runtime, op, "pivots should be a Tensor of scalar type int32, but got ",
             dtype_name(piv.dtype()));
  KILN_CHECK(piv.dim() == LU.dim() - 1, Runtime, op, "Expected LU and pivots to have ",
             "one dimension less in pivots, but got LU.dim() = ", LU.dim(), " and pivots.dim() = ", piv.dim());
  KILN_CHECK(piv.size(-1) == sym_min(LU.size(-2), LU.size(-1)), Runtime, op,
             "Expected pivots of size min(m, n) = ", sym_min(LU.size(-2), LU.size(-1)), " in its last dimension, got ",
             piv.size(-1));
  SymShape lb = batch_of(LU), pb(piv.sizes().begin(), piv.sizes().end() - 1);
  KILN_CHECK(lb == pb, Runtime, op, "Expected LU and pivots to have the same batch shape, got ", sym_str(lb),
             " and ", sym_str(pb));
}

SpecList lu_solve_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const char* op = "linalg.lu_solve";
  const TensorSpec &LU = in[0], &piv = in[1], &B = in[2];
  check_input(LU, op, true, "LU", "linalg.lu_solve_cpu");
  check_pivots(op, LU, piv);
  check_same_dtype(op, LU, B);
  return {{solve_shape(op, LU, B, attr<bool>(a, 0)), LU.dtype(), LU.device()}};
}
OpDef op_lu_solve{"linalg_lu_solve", kOutExactDtype, lu_solve_meta, {}};
OpRegistrar reg_lu_solve{op_lu_solve,
                         "linalg_lu_solve(Tensor LU, Tensor pivots, Tensor B, *, bool left=True, bool adjoint=False) "
                         "-> Tensor",
                         kFunctionVariant};

SpecList lu_unpack_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const char* op = "lu_unpack";
  const TensorSpec &LU = in[0], &piv = in[1];
  check_input(LU, op, false, "LU_data");
  check_pivots(op, LU, piv);
  SymShape b = batch_of(LU);
  SymInt m = LU.size(-2), n = LU.size(-1), k = sym_min(m, n);
  bool data = attr<bool>(a, 0), pivots = attr<bool>(a, 1);
  SymShape empty{0};
  return {{pivots ? with_tail(b, {m, m}) : empty, LU.dtype(), LU.device()},
          {data ? with_tail(b, {m, k}) : empty, LU.dtype(), LU.device()},
          {data ? with_tail(b, {k, n}) : empty, LU.dtype(), LU.device()}};
}
OpDef op_lu_unpack{"lu_unpack", kOutExactDtype, lu_unpack_meta, {}};
OpRegistrar reg_lu_unpack{op_lu_unpack,
                          "lu_unpack(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True, bool unpack_pivots=True) "
                          "-> (Tensor P, Tensor L, Tensor U)",
                          kFunctionVariant};

// ---- solve, inverse, determinants --------------------------------------------------------------------------
// B is a vector (or a batch of vectors) when torch's rule says so: B.dim() == 1, or B has A's shape
// without its last dimension.
bool vector_case(const TensorSpec& A, const TensorSpec& B) {
  if (B.dim() == 1) return true;
  if (B.dim() != A.dim() - 1) return false;
  return SymShape(A.sizes().begin(), A.sizes().end() - 1) == B.sizes();
}

// linalg_solve_ex(A, B, left, check_errors) -> (result, info). Unlike torch's internal
// _linalg_solve_ex it returns no LU factors (decision 25: tiny batched solves never write them; the
// derivative solves with A^H instead).
SpecList solve_ex_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const char* op = "linalg.solve";
  const TensorSpec &A = in[0], &B = in[1];
  check_input(A, op, true, "A", "lu_cpu");
  check_same_dtype(op, A, B);
  const bool left = attr<bool>(a, 0);
  if (vector_case(A, B)) {
    SymShape bs = B.sizes();
    bs.insert(bs.end() - (left ? 0 : 1), SymInt(1));
    SymShape x = solve_shape(op, A, {bs, B.dtype(), B.device()}, left);
    x.erase(x.end() - (left ? 1 : 2));
    return {{x, A.dtype(), A.device()}, {batch_of(A), kInt32, A.device()}};
  }
  return {{solve_shape(op, A, B, left), A.dtype(), A.device()}, {batch_of(A), kInt32, A.device()}};
}
OpDef op_solve_ex{"linalg_solve_ex", kOutExactDtype, solve_ex_meta, {}};
OpRegistrar reg_solve_ex{op_solve_ex,
                         "linalg_solve_ex(Tensor A, Tensor B, *, bool left=True, bool check_errors=False) -> "
                         "(Tensor result, Tensor info)",
                         kFunctionVariant};

SpecList inv_ex_meta(const OpDef&, const SpecList& in, const Attrs&) {
  const TensorSpec& A = in[0];
  check_input(A, "linalg.inv");
  return {{A.sizes(), A.dtype(), A.device()}, {batch_of(A), kInt32, A.device()}};
}
OpDef op_inv_ex{"linalg_inv_ex", kOutExactDtype, inv_ex_meta, {}};
OpRegistrar reg_inv_ex{op_inv_ex,
                       "linalg_inv_ex(Tensor A, *, bool check_errors=False) -> (Tensor inverse, Tensor info)",
                       kFunctionVariant};

// linalg_det(A): torch's public op; its internal _linalg_det also returns the LU factors, which no
// kiln derivative needs (decision 25).
SpecList det_meta(const OpDef&, const SpecList& in, const Attrs&) {
  const TensorSpec& A = in[0];
  check_input(A, "linalg.det", true, "A", "lu_cpu");
  return {{batch_of(A), A.dtype(), A.device()}};
}
OpDef op_det{"linalg_det", kOutExactDtype, det_meta, {}};
OpRegistrar reg_det{op_det, "linalg_det(Tensor A) -> Tensor", kFunctionVariant};

SpecList slogdet_meta(const OpDef&, const SpecList& in, const Attrs&) {
  const TensorSpec& A = in[0];
  check_input(A, "linalg.slogdet");
  SymShape b = batch_of(A);
  return {{b, A.dtype(), A.device()},
          {b, to_real(A.dtype()), A.device()},
          {A.sizes(), A.dtype(), A.device()},
          {with_tail(b, {A.size(-1)}), kInt32, A.device()}};
}
OpDef op_slogdet{"_linalg_slogdet", kOutExactDtype, slogdet_meta, {}};
OpRegistrar reg_slogdet{op_slogdet,
                        "_linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet, Tensor LU, Tensor pivots)"};

// ---- Cholesky, triangular solve --------------------------------------------------------------------------
SpecList cholesky_ex_meta(const OpDef&, const SpecList& in, const Attrs&) {
  const TensorSpec& A = in[0];
  check_input(A, "linalg.cholesky", true, "A", "cholesky_cpu");
  return {{A.sizes(), A.dtype(), A.device()}, {batch_of(A), kInt32, A.device()}};
}
OpDef op_cholesky_ex{"linalg_cholesky_ex", kOutExactDtype, cholesky_ex_meta, {}};
OpRegistrar reg_cholesky_ex{op_cholesky_ex,
                            "linalg_cholesky_ex(Tensor self, *, bool upper=False, bool check_errors=False) -> "
                            "(Tensor L, Tensor info)",
                            kFunctionVariant};

SpecList solve_triangular_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const char* op = "linalg.solve_triangular";
  const TensorSpec &A = in[0], &B = in[1];
  check_input(A, op, true, "A", "triangular_solve_cpu");
  check_same_dtype(op, A, B);
  return {{solve_shape(op, A, B, attr<bool>(a, 1)), A.dtype(), A.device()}};
}
OpDef op_solve_triangular{"linalg_solve_triangular", kOutExactDtype, solve_triangular_meta, {}};
OpRegistrar reg_solve_triangular{op_solve_triangular,
                                 "linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool left=True, "
                                 "bool unitriangular=False) -> Tensor",
                                 kFunctionVariant};

// cholesky_solve(B, L, upper): A X = B with A = L L^H (upper: U^H U) from the factor alone.
SpecList cholesky_solve_meta(const OpDef&, const SpecList& in, const Attrs&) {
  const char* op = "cholesky_solve";
  const TensorSpec &B = in[0], &L = in[1];
  KILN_CHECK(B.dim() >= 2, Runtime, op, "b should have at least 2 dimensions, but has ", B.dim(), " dimensions instead");
  KILN_CHECK(L.dim() >= 2, Runtime, op, "u should have at least 2 dimensions, but has ", L.dim(), " dimensions instead");
  check_input(L, op, true, "input2", "cholesky_solve_cpu");
  check_same_dtype(op, L, B);
  return {{solve_shape(op, L, B, true), L.dtype(), L.device()}};
}
OpDef op_cholesky_solve{"cholesky_solve", 0, cholesky_solve_meta, {}};
OpRegistrar reg_cholesky_solve{op_cholesky_solve, "cholesky_solve(Tensor self, Tensor input2, bool upper=False) -> Tensor",
                               kFunctionAndMethod};

SpecList cholesky_inverse_meta(const OpDef&, const SpecList& in, const Attrs&) {
  const TensorSpec& L = in[0];
  check_input(L, "cholesky_inverse", true, "input", "cholesky_inverse_out_cpu");
  return {{L.sizes(), L.dtype(), L.device()}};
}
OpDef op_cholesky_inverse{"cholesky_inverse", 0, cholesky_inverse_meta, {}};
OpRegistrar reg_cholesky_inverse{op_cholesky_inverse, "cholesky_inverse(Tensor self, bool upper=False) -> Tensor",
                                 kFunctionAndMethod};

template <size_t N>
auto tuple_of(const TensorList& r) {
  if constexpr (N == 2) return std::tuple<Tensor, Tensor>{r[0], r[1]};
  else return std::tuple<Tensor, Tensor, Tensor>{r[0], r[1], r[2]};
}

}  // namespace

// ---- C++ front ends ------------------------------------------------------------------------------------------
namespace linalg {

std::tuple<Tensor, Tensor, Tensor> lu_factor_ex(const Tensor& A, bool pivot, bool check_errors) {
  return tuple_of<3>(dispatch(op_lu_factor_ex, {A}, {pivot, check_errors}));
}
std::tuple<Tensor, Tensor> lu_factor(const Tensor& A, bool pivot) {
  auto [LU, piv, info] = lu_factor_ex(A, pivot, /*check_errors=*/true);
  return {LU, piv};
}
std::tuple<Tensor, Tensor, Tensor> lu(const Tensor& A, bool pivot) {
  auto [LU, piv, info] = lu_factor_ex(A, pivot, false);
  return lu_unpack(LU, piv);
}
Tensor lu_solve(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left, bool adjoint) {
  return dispatch1(op_lu_solve, {LU, pivots, B}, {left, adjoint});
}

std::tuple<Tensor, Tensor> solve_ex(const Tensor& A, const Tensor& B, bool left, bool check_errors) {
  return tuple_of<2>(dispatch(op_solve_ex, {A, B}, {left, check_errors}));
}
Tensor solve(const Tensor& A, const Tensor& B, bool left) { return std::get<0>(solve_ex(A, B, left, true)); }
Tensor solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool left, bool unitriangular) {
  return dispatch1(op_solve_triangular, {A, B}, {upper, left, unitriangular});
}

std::tuple<Tensor, Tensor> inv_ex(const Tensor& A, bool check_errors) {
  return tuple_of<2>(dispatch(op_inv_ex, {A}, {check_errors}));
}
Tensor inv(const Tensor& A) { return std::get<0>(inv_ex(A, true)); }
Tensor det(const Tensor& A) { return dispatch1(op_det, {A}); }
std::tuple<Tensor, Tensor> slogdet(const Tensor& A) { return tuple_of<2>(dispatch(op_slogdet, {A})); }

std::tuple<Tensor, Tensor> cholesky_ex(const Tensor& A, bool upper, bool check_errors) {
  return tuple_of<2>(dispatch(op_cholesky_ex, {A}, {upper, check_errors}));
}
Tensor cholesky(const Tensor& A, bool upper) { return std::get<0>(cholesky_ex(A, upper, true)); }

}  // namespace linalg

Tensor det(const Tensor& A) { return linalg::det(A); }
std::tuple<Tensor, Tensor> slogdet(const Tensor& A) { return linalg::slogdet(A); }
Tensor logdet(const Tensor& A) {
  auto [sign, logabs] = linalg::slogdet(A);
  if (A.is_complex()) return add(log(sign), logabs);
  // a negative determinant has no real logarithm
  return where(eq(sign, Scalar(-1)), full_like(logabs, Scalar(std::nan(""))), logabs);
}
Tensor inverse(const Tensor& A) { return linalg::inv(A); }
Tensor cholesky(const Tensor& A, bool upper) { return linalg::cholesky(A, upper); }

Tensor cholesky_solve(const Tensor& B, const Tensor& L, bool upper) {
  return dispatch1(op_cholesky_solve, {B, L}, {upper});
}
Tensor cholesky_inverse(const Tensor& L, bool upper) { return dispatch1(op_cholesky_inverse, {L}, {upper}); }

std::tuple<Tensor, Tensor, Tensor> lu_unpack(const Tensor& LU, const Tensor& pivots, bool unpack_data,
                                             bool unpack_pivots) {
  return tuple_of<3>(dispatch(op_lu_unpack, {LU, pivots}, {unpack_data, unpack_pivots}));
}

std::tuple<Tensor, Tensor> triangular_solve(const Tensor& B, const Tensor& A, bool upper, bool transpose,
                                            bool unitriangular) {
  KILN_CHECK(B.dim() >= 2, Runtime, "triangular_solve", "torch.triangular_solve: Expected b to have at least 2 "
             "dimensions, but it has ", B.dim(), " dimensions instead");
  KILN_CHECK(A.dim() >= 2, Runtime, "triangular_solve", "torch.triangular_solve: Expected A to have at least 2 "
             "dimensions, but it has ", A.dim(), " dimensions instead");
  Tensor op = transpose ? mT(A) : A;
  Tensor X = linalg::solve_triangular(op, B, transpose ? !upper : upper, true, unitriangular);
  // the coefficient comes back broadcast to the batch, as torch's does
  Shape ab(X.sizes().begin(), X.sizes().end() - 2);
  ab.push_back(A.size(-2)), ab.push_back(A.size(-1));
  return {X, clone(A.expand(ab))};
}

// ---- composites: the public forms, from torch's schemas ----------------------------------------------------
namespace {
TensorList c_lu_factor_fn(const TensorList& in, const Attrs& a) {
  auto [LU, piv] = linalg::lu_factor(in[0], attr<bool>(a, 0));
  return {LU, piv};
}
Composite c_lu_factor{"linalg_lu_factor(Tensor A, *, bool pivot=True) -> (Tensor LU, Tensor pivots)",
                      c_lu_factor_fn, kFunctionVariant};
TensorList c_lu_fn(const TensorList& in, const Attrs& a) {
  auto [P, L, U] = linalg::lu(in[0], attr<bool>(a, 0));
  return {P, L, U};
}
Composite c_lu{"linalg_lu(Tensor A, *, bool pivot=True) -> (Tensor P, Tensor L, Tensor U)", c_lu_fn,
               kFunctionVariant};
TensorList c_solve_fn(const TensorList& in, const Attrs& a) { return {linalg::solve(in[0], in[1], attr<bool>(a, 0))}; }
Composite c_solve{"linalg_solve(Tensor A, Tensor B, *, bool left=True) -> Tensor", c_solve_fn, kFunctionVariant};

TensorList c_inv_fn(const TensorList& in, const Attrs&) { return {linalg::inv(in[0])}; }
Composite c_inv{"linalg_inv(Tensor A) -> Tensor", c_inv_fn, kFunctionVariant};
Composite c_inverse{"inverse(Tensor self) -> Tensor", c_inv_fn, kFunctionAndMethod};
TensorList c_det_fn(const TensorList& in, const Attrs&) { return {linalg::det(in[0])}; }
Composite c_det{"det(Tensor self) -> Tensor", c_det_fn, kFunctionAndMethod};
TensorList c_slogdet_fn(const TensorList& in, const Attrs&) {
  auto [s, l] = linalg::slogdet(in[0]);
  return {s, l};
}
Composite c_linalg_slogdet{"linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet)", c_slogdet_fn,
                           kFunctionVariant};
Composite c_slogdet{"slogdet(Tensor self) -> (Tensor sign, Tensor logabsdet)", c_slogdet_fn, kFunctionAndMethod};
TensorList c_logdet_fn(const TensorList& in, const Attrs&) { return {logdet(in[0])}; }
Composite c_logdet{"logdet(Tensor self) -> Tensor", c_logdet_fn, kFunctionAndMethod};

TensorList c_cholesky_fn(const TensorList& in, const Attrs& a) { return {linalg::cholesky(in[0], attr<bool>(a, 0))}; }
Composite c_linalg_cholesky{"linalg_cholesky(Tensor self, *, bool upper=False) -> Tensor", c_cholesky_fn,
                            kFunctionVariant};
Composite c_cholesky{"cholesky(Tensor self, bool upper=False) -> Tensor", c_cholesky_fn, kFunctionAndMethod};
TensorList c_triangular_solve_fn(const TensorList& in, const Attrs& a) {
  auto [X, M] = triangular_solve(in[0], in[1], attr<bool>(a, 0), attr<bool>(a, 1), attr<bool>(a, 2));
  return {X, M};
}
Composite c_triangular_solve{"triangular_solve(Tensor self, Tensor A, bool upper=True, bool transpose=False, "
                             "bool unitriangular=False) -> (Tensor solution, Tensor cloned_coefficient)",
                             c_triangular_solve_fn, kFunctionAndMethod};
// torch refuses an out= of another dtype than the result's for these (not for the legacy cholesky, det, logdet)
CompositeTags t_lu_factor{c_lu_factor, kOutExactDtype}, t_lu{c_lu, kOutExactDtype}, t_solve{c_solve, kOutExactDtype};
CompositeTags t_inv{c_inv, kOutExactDtype}, t_inverse{c_inverse, kOutExactDtype};
CompositeTags t_linalg_slogdet{c_linalg_slogdet, kOutExactDtype}, t_slogdet{c_slogdet, kOutExactDtype};
CompositeTags t_linalg_cholesky{c_linalg_cholesky, kOutExactDtype};
CompositeTags t_triangular_solve{c_triangular_solve, kOutExactDtype};
}  // namespace

}  // namespace kiln
