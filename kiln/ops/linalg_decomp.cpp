// Linear algebra, the decompositions: QR (and the Householder ops geqrf, householder_product,
// ormqr), the Hermitian and general eigen-decompositions, the SVD and least squares. Table ops carry
// torch's names (`linalg_qr`, `_linalg_eigh`, `_linalg_svd`, `linalg_eig`, `linalg_lstsq`); the
// public forms are composites over them (linalg.h). Derivatives: linalg_grad.cpp; CPU kernels:
// backend/cpu/linalg_decomp.cpp.
#include "kiln/autograd/autograd.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/linalg_detail.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

using namespace linalg_detail;

// ---- QR ------------------------------------------------------------------------------------------------------
void check_qr_mode(const std::string& mode) {
  KILN_CHECK(mode == "reduced" || mode == "complete" || mode == "r", Runtime, "linalg.qr", "qr received unrecognized "
             "mode '", mode, "' but expected one of 'reduced' (default), 'r', or 'complete'");
}

SpecList qr_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const TensorSpec& A = in[0];
  check_input(A, "linalg.qr", false, "A", "geqrf_cpu");
  const std::string& mode = attr<std::string>(a, 0);
  check_qr_mode(mode);
  SymShape b = batch_of(A);
  SymInt m = A.size(-2), n = A.size(-1), k = sym_min(m, n);
  const bool complete = mode == "complete";
  TensorSpec Q{mode == "r" ? SymShape{0} : with_tail(b, {m, complete ? m : k}), A.dtype(), A.device()};
  return {Q, {with_tail(b, {complete ? m : k, n}), A.dtype(), A.device()}};
}
OpDef op_qr{"linalg_qr", kOutExactDtype, qr_meta, {}};
OpRegistrar reg_qr{op_qr, "linalg_qr(Tensor A, str mode='reduced') -> (Tensor Q, Tensor R)", kFunctionVariant};

SpecList geqrf_meta(const OpDef&, const SpecList& in, const Attrs&) {
  const TensorSpec& A = in[0];
  check_input(A, "geqrf", false, "input", "geqrf_cpu");
  SymShape b = batch_of(A);
  return {{A.sizes(), A.dtype(), A.device()}, {with_tail(b, {sym_min(A.size(-2), A.size(-1))}), A.dtype(), A.device()}};
}
OpDef op_geqrf{"geqrf", 0, geqrf_meta, {}};
OpRegistrar reg_geqrf{op_geqrf, "geqrf(Tensor self) -> (Tensor a, Tensor tau)", kFunctionAndMethod};

void check_tau(const char* op, const TensorSpec& A, const TensorSpec& tau) {
  KILN_CHECK(tau.dim() == A.dim() - 1, Runtime, op, "input.dim() must be greater than or equal to 2 and tau.dim() "
             "must equal input.dim() - 1, got ", A.dim(), " and ", tau.dim());
  KILN_CHECK(tau.dtype() == A.dtype(), Runtime, op, "tau dtype ", dtype_name(tau.dtype()),
             " does not match input dtype ", dtype_name(A.dtype()));
  SymShape ab = batch_of(A), tb(tau.sizes().begin(), tau.sizes().end() - 1);
  KILN_CHECK(ab == tb, Runtime, op, "Expected batch dimensions of tau to be equal to input.shape[:-2], got ",
             sym_str(tb), " and ", sym_str(ab));
}

SpecList householder_meta(const OpDef&, const SpecList& in, const Attrs&) {
  const char* op = "householder_product";
  const TensorSpec &A = in[0], &tau = in[1];
  check_input(A, op, false, "input", "orgqr_cpu");
  check_tau(op, A, tau);
  KILN_CHECK(A.size(-2) >= A.size(-1), Runtime, op, "input.shape[-2] must be greater than or equal to "
             "input.shape[-1]");
  KILN_CHECK(A.size(-1) >= tau.size(-1), Runtime, op, "input.shape[-1] must be greater than or equal to "
             "tau.shape[-1]");
  return {{A.sizes(), A.dtype(), A.device()}};
}
OpDef op_householder{"linalg_householder_product", 0, householder_meta, {}};
OpRegistrar reg_householder{op_householder, "linalg_householder_product(Tensor input, Tensor tau) -> Tensor",
                            kFunctionVariant};

SpecList ormqr_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const char* op = "ormqr";
  const TensorSpec &A = in[0], &tau = in[1], &C = in[2];
  check_input(A, op, false, "input", "ormqr_cpu");
  check_tau(op, A, tau);
  KILN_CHECK(C.dim() == A.dim(), Runtime, op, "input.dim() must equal other.dim(), got ", A.dim(), " and ", C.dim());
  KILN_CHECK(C.dtype() == A.dtype(), Runtime, op, "other dtype ", dtype_name(C.dtype()),
             " does not match input dtype ", dtype_name(A.dtype()));
  const bool left = attr<bool>(a, 0);
  SymInt need = left ? C.size(-2) : C.size(-1);
  KILN_CHECK(A.size(-2) == need, Runtime, op, "input.shape[-2] must be equal to other.shape[", left ? -2 : -1,
             "], got ", A.size(-2), " and ", need);
  KILN_CHECK(tau.size(-1) <= need, Runtime, op, "tau.shape[-1] must be less than or equal to ", need);
  KILN_CHECK(batch_of(A) == batch_of(C), Runtime, op, "Expected batch dimensions of other to be equal to "
             "input.shape[:-2]");
  return {{C.sizes(), C.dtype(), C.device()}};
}
OpDef op_ormqr{"ormqr", kOutExactDtype, ormqr_meta, {}};
OpRegistrar reg_ormqr{op_ormqr,
                      "ormqr(Tensor self, Tensor input2, Tensor input3, bool left=True, bool transpose=False) -> Tensor",
                      kFunctionAndMethod};

// ---- eigen-decompositions --------------------------------------------------------------------------------------
SpecList eigh_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const TensorSpec& A = in[0];
  check_input(A, "linalg.eigh", true, "A", "linalg_eigh_cpu");
  const std::string& uplo = attr<std::string>(a, 0);
  KILN_CHECK(uplo == "L" || uplo == "U" || uplo == "l" || uplo == "u", Runtime, "linalg.eigh",
             "Expected UPLO argument to be 'L' or 'U', but got ", uplo);
  SymShape b = batch_of(A);
  const bool v = attr<bool>(a, 1);
  return {{with_tail(b, {A.size(-1)}), to_real(A.dtype()), A.device()},
          {v ? A.sizes() : SymShape{0}, A.dtype(), A.device()}};
}
OpDef op_eigh{"_linalg_eigh", kOutExactDtype, eigh_meta, {}};
OpRegistrar reg_eigh{op_eigh, "_linalg_eigh(Tensor A, str UPLO=\"L\", bool compute_v=True) -> (Tensor eigenvalues, "
                              "Tensor eigenvectors)"};

SpecList eig_meta(const OpDef&, const SpecList& in, const Attrs&) {
  const TensorSpec& A = in[0];
  check_input(A, "linalg.eig", true, "A", "linalg_eig_out_cpu");
  const Dtype c = to_complex(A.dtype());
  return {{with_tail(batch_of(A), {A.size(-1)}), c, A.device()}, {A.sizes(), c, A.device()}};
}
OpDef op_eig{"linalg_eig", 0, eig_meta, {}};
OpRegistrar reg_eig{op_eig, "linalg_eig(Tensor self) -> (Tensor eigenvalues, Tensor eigenvectors)", kFunctionVariant};

// ---- SVD -------------------------------------------------------------------------------------------------------
void check_driver(const Attrs& a, size_t i, const char* op) {
  auto d = opt_attr<std::string>(a, i);
  KILN_CHECK(!d, Runtime, op, "keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER backend.");
}

SpecList svd_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const TensorSpec& A = in[0];
  check_input(A, "linalg.svd", false, "A", "linalg_svd_cpu");
  check_driver(a, 2, "linalg.svd");
  const bool full = attr<bool>(a, 0), uv = attr<bool>(a, 1);
  SymShape b = batch_of(A);
  SymInt m = A.size(-2), n = A.size(-1), k = sym_min(m, n);
  return {{uv ? with_tail(b, {m, full ? m : k}) : SymShape{0}, A.dtype(), A.device()},
          {with_tail(b, {k}), to_real(A.dtype()), A.device()},
          {uv ? with_tail(b, {full ? n : k, n}) : SymShape{0}, A.dtype(), A.device()}};
}
OpDef op_svd{"_linalg_svd", kOutExactDtype, svd_meta, {}};
OpRegistrar reg_svd{op_svd, "_linalg_svd(Tensor A, bool full_matrices=False, bool compute_uv=True, *, str? driver=None) "
                            "-> (Tensor U, Tensor S, Tensor Vh)"};

// ---- least squares ---------------------------------------------------------------------------------------------
// Whether residuals exist depends on the ranks (data): the op is dynamic-shape, and its kernel makes
// its outputs. In a trace the residuals' length is an unbacked size (0 or k).
SpecList lstsq_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const char* name = "linalg.lstsq";
  const TensorSpec &A = in[0], &B = in[1];
  const std::string driver = opt_attr<std::string>(a, 1).value_or("gelsy");
  check_lstsq(A, B, driver);
  SymInt m = A.size(-2), n = A.size(-1), k = B.size(-1);
  SymShape b = broadcast_shapes(batch_of(A), batch_of(B), name);
  const bool has_rank = driver != "gels", has_sv = driver == "gelsd" || driver == "gelss";
  return {{with_tail(b, {n, k}), A.dtype(), A.device()},
          {{unbacked_size(op.name, 0, k.maybe_int().value_or(ShapeEnv::kInf))}, to_real(A.dtype()), A.device()},
          {has_rank ? b : SymShape{0}, kInt64, A.device()},
          {has_sv ? with_tail(b, {sym_min(m, n)}) : SymShape{0}, to_real(A.dtype()), A.device()}};
}
OpDef op_lstsq{"_linalg_lstsq", kDynamicShape, lstsq_meta, {}};
OpRegistrar reg_lstsq{op_lstsq, "_linalg_lstsq(Tensor self, Tensor b, float? rcond=None, *, str? driver=None) -> "
                                "(Tensor solution, Tensor residuals, Tensor rank, Tensor singular_values)"};

// ---- pinv: from the SVD (or eigh for Hermitian input), with torch's derivative ---------------------------------
SpecList pinv_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const TensorSpec& A = in[0];
  check_input(A, "linalg.pinv", attr<bool>(a, 2), "input");
  return {{with_tail(batch_of(A), {A.size(-1), A.size(-2)}), A.dtype(), A.device()}};
}
OpDef op_pinv{"_linalg_pinv", 0, pinv_meta, {}};
OpRegistrar reg_pinv{op_pinv, "_linalg_pinv(Tensor self, float? atol=None, float? rtol=None, bool hermitian=False) "
                              "-> Tensor"};

// ---- matrix_exp: Padé approximant with scaling and squaring ------------------------------------------------------
SpecList matrix_exp_meta(const OpDef&, const SpecList& in, const Attrs&) {
  const TensorSpec& A = in[0];
  check_input(A, "linalg.matrix_exp");
  return {{A.sizes(), A.dtype(), A.device()}};
}
OpDef op_matrix_exp{"linalg_matrix_exp", 0, matrix_exp_meta, {}};
OpRegistrar reg_matrix_exp{op_matrix_exp, "linalg_matrix_exp(Tensor self) -> Tensor", kFunctionVariant};

}  // namespace

// ---- C++ front ends ----------------------------------------------------------------------------------------------
namespace linalg {

std::tuple<Tensor, Tensor> qr(const Tensor& A, const std::string& mode) {
  TensorList r = dispatch(op_qr, {A}, {mode});
  return {r[0], r[1]};
}
Tensor householder_product(const Tensor& A, const Tensor& tau) { return dispatch1(op_householder, {A, tau}); }

std::tuple<Tensor, Tensor> eigh(const Tensor& A, const std::string& UPLO) {
  TensorList r = dispatch(op_eigh, {A}, {UPLO, true});
  return {r[0], r[1]};
}
Tensor eigvalsh(const Tensor& A, const std::string& UPLO) {
  // with gradients wanted, the vectors are needed for the derivative
  const bool v = grad_mode_enabled() && A.requires_grad();
  return dispatch(op_eigh, {A}, {UPLO, v})[0];
}
std::tuple<Tensor, Tensor> eig(const Tensor& A) {
  TensorList r = dispatch(op_eig, {A});
  return {r[0], r[1]};
}
Tensor eigvals(const Tensor& A) { return std::get<0>(eig(A)); }
Tensor matrix_exp(const Tensor& A) { return dispatch1(op_matrix_exp, {A}); }
Tensor pinv(const Tensor& A, std::optional<double> atol, std::optional<double> rtol, bool hermitian) {
  Attr at = atol ? Attr(*atol) : Attr(std::monostate{}), rt = rtol ? Attr(*rtol) : Attr(std::monostate{});
  return dispatch1(op_pinv, {A}, {at, rt, hermitian});
}

std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& A, bool full_matrices) {
  TensorList r = dispatch(op_svd, {A}, {full_matrices, true, std::monostate{}});
  return {r[0], r[1], r[2]};
}
Tensor svdvals(const Tensor& A) {
  const bool uv = grad_mode_enabled() && A.requires_grad();
  return dispatch(op_svd, {A}, {false, uv, std::monostate{}})[1];
}

std::tuple<Tensor, Tensor, Tensor, Tensor> lstsq(const Tensor& A, const Tensor& B, std::optional<double> rcond,
                                                 std::optional<std::string> driver) {
  KILN_CHECK(A.dim() >= 2, Runtime, "linalg.lstsq", "input must have at least 2 dimensions.");
  // torch's vector case for lstsq: B with one dimension less than A
  const bool vec = B.dim() == A.dim() - 1;
  Attr rc = rcond ? Attr(*rcond) : Attr(std::monostate{});
  Attr dr = driver ? Attr(*driver) : Attr(std::monostate{});
  TensorList r = dispatch(op_lstsq, {A, vec ? unsqueeze(B, -1) : B}, {rc, dr});
  Tensor X = vec ? squeeze(r[0], Shape{-1}) : r[0];
  Tensor res = vec && r[1].numel() > 0 ? squeeze(r[1], Shape{-1}) : r[1];
  return {X, res, r[2], r[3]};
}

}  // namespace linalg

std::tuple<Tensor, Tensor> geqrf(const Tensor& A) {
  TensorList r = dispatch(op_geqrf, {A});
  return {r[0], r[1]};
}
Tensor ormqr(const Tensor& A, const Tensor& tau, const Tensor& C, bool left, bool transpose) {
  return dispatch1(op_ormqr, {A, tau, C}, {left, transpose});
}
std::tuple<Tensor, Tensor> qr(const Tensor& A, bool some) { return linalg::qr(A, some ? "reduced" : "complete"); }
std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& A, bool some, bool compute_uv) {
  if (!compute_uv) {
    // torch returns zero-filled U and V of the full shapes
    Tensor S = linalg::svdvals(A);
    int64_t m = A.size(-2), n = A.size(-1);
    Shape us(A.sizes().begin(), A.sizes().end() - 2), vs = us;
    us.push_back(m), us.push_back(some ? std::min(m, n) : m);
    vs.push_back(n), vs.push_back(some ? std::min(m, n) : n);
    TensorOptions o = TensorOptions(A.dtype()).device(A.device());
    return {zeros(us, o), S, zeros(vs, o)};
  }
  auto [U, S, Vh] = linalg::svd(A, !some);
  return {U, S, mT(Vh.is_complex() ? conj(Vh) : Vh)};
}

// ---- composites -------------------------------------------------------------------------------------------------
namespace {
TensorList c_qr_fn(const TensorList& in, const Attrs& a) {
  auto [Q, R] = qr(in[0], attr<bool>(a, 0));
  return {Q, R};
}
Composite c_qr{"qr(Tensor self, bool some=True) -> (Tensor Q, Tensor R)", c_qr_fn, kFunctionAndMethod};
TensorList c_orgqr_fn(const TensorList& in, const Attrs&) { return {linalg::householder_product(in[0], in[1])}; }
Composite c_orgqr{"orgqr(Tensor self, Tensor input2) -> Tensor", c_orgqr_fn, kFunctionAndMethod};

TensorList c_eigh_fn(const TensorList& in, const Attrs& a) {
  auto [L, V] = linalg::eigh(in[0], attr<std::string>(a, 0));
  return {L, V};
}
Composite c_eigh{"linalg_eigh(Tensor self, str UPLO=\"L\") -> (Tensor eigenvalues, Tensor eigenvectors)", c_eigh_fn,
                 kFunctionVariant};
TensorList c_eigvalsh_fn(const TensorList& in, const Attrs& a) { return {linalg::eigvalsh(in[0], attr<std::string>(a, 0))}; }
Composite c_eigvalsh{"linalg_eigvalsh(Tensor self, str UPLO=\"L\") -> Tensor", c_eigvalsh_fn, kFunctionVariant};
TensorList c_eigvals_fn(const TensorList& in, const Attrs&) { return {linalg::eigvals(in[0])}; }
Composite c_eigvals{"linalg_eigvals(Tensor self) -> Tensor", c_eigvals_fn, kFunctionVariant};

TensorList c_linalg_svd_fn(const TensorList& in, const Attrs& a) {
  check_driver(a, 1, "linalg.svd");
  auto [U, S, Vh] = linalg::svd(in[0], attr<bool>(a, 0));
  return {U, S, Vh};
}
Composite c_linalg_svd{"linalg_svd(Tensor A, bool full_matrices=True, *, str? driver=None) -> (Tensor U, Tensor S, "
                       "Tensor Vh)",
                       c_linalg_svd_fn, kFunctionVariant};
TensorList c_svdvals_fn(const TensorList& in, const Attrs& a) {
  check_driver(a, 0, "linalg.svdvals");
  return {linalg::svdvals(in[0])};
}
Composite c_svdvals{"linalg_svdvals(Tensor A, *, str? driver=None) -> Tensor", c_svdvals_fn, kFunctionVariant};
TensorList c_svd_fn(const TensorList& in, const Attrs& a) {
  auto [U, S, V] = svd(in[0], attr<bool>(a, 0), attr<bool>(a, 1));
  return {U, S, V};
}
Composite c_svd{"svd(Tensor self, bool some=True, bool compute_uv=True) -> (Tensor U, Tensor S, Tensor V)", c_svd_fn,
                kFunctionAndMethod};

TensorList c_matrix_exp_fn(const TensorList& in, const Attrs&) { return {linalg::matrix_exp(in[0])}; }
Composite c_matrix_exp{"matrix_exp(Tensor self) -> Tensor", c_matrix_exp_fn, kFunctionAndMethod};

TensorList c_lstsq_fn(const TensorList& in, const Attrs& a) {
  auto [X, res, rank, sv] = linalg::lstsq(in[0], in[1], opt_attr<double>(a, 0), opt_attr<std::string>(a, 1));
  return {X, res, rank, sv};
}
Composite c_lstsq{"linalg_lstsq(Tensor self, Tensor b, float? rcond=None, *, str? driver=None) -> (Tensor solution, "
                  "Tensor residuals, Tensor rank, Tensor singular_values)",
                  c_lstsq_fn, kFunctionVariant};
// torch refuses an out= of another dtype than the result's for these (not for eigvals, lstsq, orgqr)
CompositeTags t_qr{c_qr, kOutExactDtype}, t_eigh{c_eigh, kOutExactDtype}, t_eigvalsh{c_eigvalsh, kOutExactDtype};
CompositeTags t_linalg_svd{c_linalg_svd, kOutExactDtype}, t_svdvals{c_svdvals, kOutExactDtype}, t_svd{c_svd, kOutExactDtype};
}  // namespace

}  // namespace kiln
