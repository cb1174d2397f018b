// Linear algebra written with other ops (torch's CompositeImplicitAutograd ones): matrix_rank from
// the SVD (or eigh for Hermitian input), the norms and cond, matrix_power,
// cross, vecdot, multi_dot, diagonal, vander, tensorinv and tensorsolve; and matrix_exp, a table op
// (its kernel is backend/cpu/linalg_decomp.cpp's Padé approximant, its derivative the exponential of
// a block matrix, as torch's).
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "kiln/amp/autocast.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/linalg_detail.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

using namespace linalg_detail;

Tensor mH(const Tensor& x) { return cj(mT(x)); }

double eps_of(Dtype d) {
  Dtype r = to_real(d);
  return r == kFloat64 ? std::numeric_limits<double>::epsilon() : double(std::numeric_limits<float>::epsilon());
}

// torch's tolerance rule: rtol defaults to eps * max(m, n) when atol is absent or zero, else to 0;
// the threshold is max(atol, rtol * the largest singular value).
Tensor threshold(const Tensor& smax, const Tensor& A, std::optional<double> atol, std::optional<double> rtol) {
  const double m = double(A.size(-2)), n = double(A.size(-1));
  const double r = rtol ? *rtol : (!atol || *atol == 0 ? eps_of(A.dtype()) * std::max(m, n) : 0.0);
  Tensor t = mul(smax, Scalar(r));
  if (atol) t = where(gt(t, Scalar(*atol)), t, full_like(t, Scalar(*atol)));
  return t;
}

// The singular values (descending), or |eigenvalues| for a Hermitian A (in eigh's order), and the
// largest of them.
Tensor spectrum_max(const Tensor& s) {
  return s.size(-1) == 0 ? zeros(Shape(s.sizes().begin(), s.sizes().end() - 1), TensorOptions(s.dtype()).device(s.device()))
                         : amax(s, Shape{-1});
}

}  // namespace

namespace linalg {

Tensor matrix_rank(const Tensor& A, std::optional<double> atol, std::optional<double> rtol, bool hermitian) {
  check_input(TensorSpec::of(A), "linalg.matrix_rank", hermitian, "input");
  Tensor s = hermitian ? abs(linalg::eigvalsh(A)) : linalg::svdvals(A);
  return sum(gt(s, unsqueeze(threshold(spectrum_max(s), A, atol, rtol), -1)), Shape{-1}, false, kInt64);
}

Tensor vector_norm(const Tensor& x, double ord, OptDims dim, bool keepdim, std::optional<Dtype> dtype) {
  return kiln::vector_norm(x, ord, dim, keepdim, dtype);
}

// ord: "fro", "nuc", or a number (inf, -inf, 1, -1, 2, -2) over the two dims.
Tensor matrix_norm(const Tensor& A, const std::string& ord, const Shape& dim, bool keepdim,
                   std::optional<Dtype> dtype) {
  const char* op = "linalg.matrix_norm";
  KILN_CHECK(A.dim() >= 2, Runtime, op, "The input tensor A must have at least 2 dimensions.");
  KILN_CHECK(dim.size() == 2, Runtime, op, "dim must be a 2-tuple. Got ", dim);
  int64_t d0 = wrap_dim(dim[0], A.dim(), op), d1 = wrap_dim(dim[1], A.dim(), op);
  KILN_CHECK(d0 != d1, Runtime, op, "dims must be different. Got (", dim[0], ", ", dim[1], ")");
  Tensor X = dtype ? A.to(*dtype) : A;
  if (ord == "fro") return kiln::vector_norm(X, 2, Shape{d0, d1}, keepdim);
  const bool nuc = ord == "nuc";
  double p = 0;
  if (!nuc) {
    KILN_CHECK(ord == "inf" || ord == "-inf" || ord == "1" || ord == "-1" || ord == "2" || ord == "-2", Runtime, op,
               "Order ", ord, " not supported.");
    p = ord == "inf" ? INFINITY : ord == "-inf" ? -INFINITY : std::stod(ord);
  }
  if (nuc || std::abs(p) == 2) {
    KILN_CHECK(is_floating(X.dtype()) || X.is_complex(), Runtime, op, "Expected a floating point or complex tensor "
               "as input. Got ", dtype_name(X.dtype()));
    // the two dims last, then the singular values
    Tensor s = linalg::svdvals(movedim(X, Shape{d0, d1}, Shape{-2, -1}));
    Tensor r = nuc ? sum(s, Shape{-1}) : (p > 0 ? amax(s, Shape{-1}) : amin(s, Shape{-1}));
    if (keepdim) {
      r = unsqueeze(r, std::min(d0, d1));
      r = unsqueeze(r, std::max(d0, d1));
    }
    return r;
  }
  // 1: the largest column sum (sum over d0, then over d1); inf: the largest row sum
  const bool cols = std::abs(p) == 1;
  const int64_t inner = cols ? d0 : d1, outer = cols ? d1 : d0;
  Tensor sums = sum(abs(X), Shape{inner}, true);
  Tensor r = p > 0 ? amax(sums, Shape{outer}, true) : amin(sums, Shape{outer}, true);
  if (!keepdim) r = squeeze(r, Shape{std::max(d0, d1)}), r = squeeze(r, Shape{std::min(d0, d1)});
  return r;
}

Tensor matrix_norm(const Tensor& A, double ord, const Shape& dim, bool keepdim, std::optional<Dtype> dtype) {
  std::string s = std::isinf(ord) ? (ord > 0 ? "inf" : "-inf") : std::to_string(int64_t(ord));
  KILN_CHECK(std::isinf(ord) || ord == std::floor(ord), Runtime, "linalg.matrix_norm", "Order ", ord,
             " not supported.");
  return matrix_norm(A, s, dim, keepdim, dtype);
}

Tensor norm(const Tensor& A, std::optional<double> ord, OptDims dim, bool keepdim, std::optional<Dtype> dtype) {
  if (dim && dim->size() == 2)
    return ord ? matrix_norm(A, *ord, *dim, keepdim, dtype) : matrix_norm(A, std::string("fro"), *dim, keepdim, dtype);
  if (!dim && ord && A.dim() == 2) return matrix_norm(A, *ord, Shape{-2, -1}, keepdim, dtype);
  KILN_CHECK(!dim || dim->size() <= 2, Runtime, "linalg.norm", "If dim is specified, it must be of length 1 or 2. "
             "Got ", *dim);
  KILN_CHECK(dim || !ord || A.dim() <= 2, Runtime, "linalg.norm", "If dim is not specified but ord is, the input "
             "must be 1D or 2D. Got ", A.dim(), "D.");
  return kiln::vector_norm(A, ord ? *ord : 2.0, dim, keepdim, dtype);
}
Tensor norm(const Tensor& A, const std::string& ord, OptDims dim, bool keepdim, std::optional<Dtype> dtype) {
  KILN_CHECK((dim && dim->size() == 2) || (!dim && A.dim() == 2), Runtime, "linalg.norm", "If dim is not specified "
             "but ord is, the input must be 1D or 2D. Got ", A.dim(), "D.");
  return matrix_norm(A, ord, dim ? *dim : Shape{-2, -1}, keepdim, dtype);
}

Tensor cond(const Tensor& A, const std::string& p) {
  const char* op = "linalg.cond";
  check_input(TensorSpec::of(A), op, p != "2" && p != "-2" && p != "None", "input");
  if (p == "None" || p == "2" || p == "-2") {
    Tensor s = linalg::svdvals(A);
    if (s.size(-1) == 0)
      return zeros(Shape(s.sizes().begin(), s.sizes().end() - 1), TensorOptions(s.dtype()).device(s.device()));
    Tensor smax = narrow(s, -1, 0, 1), smin = narrow(s, -1, s.size(-1) - 1, 1);
    return squeeze(p == "-2" ? div(smin, smax) : div(smax, smin), Shape{-1});
  }
  // the other orders: ||A|| ||A^-1||, inf for a singular A
  auto [Ainv, info] = linalg::inv_ex(A);
  Tensor r = mul(matrix_norm(A, p, Shape{-2, -1}, false), matrix_norm(Ainv, p, Shape{-2, -1}, false));
  Tensor singular = gt(info, Scalar(0));
  return where(singular, full_like(r, Scalar(INFINITY)), r);
}
Tensor cond(const Tensor& A, std::optional<double> p) {
  if (!p) return cond(A, std::string("None"));
  KILN_CHECK(std::isinf(*p) || *p == std::floor(*p), Runtime, "linalg.cond", "Order ", *p, " not supported.");
  return cond(A, std::isinf(*p) ? (*p > 0 ? std::string("inf") : std::string("-inf")) : std::to_string(int64_t(*p)));
}

Tensor matrix_power(const Tensor& A, int64_t n) {
  const char* op = "linalg.matrix_power";
  KILN_CHECK(A.dim() >= 2 && A.size(-1) == A.size(-2), Runtime, op, "A must be batches of square matrices, but they "
             "are ", A.dim() >= 2 ? A.size(-2) : 0, " by ", A.dim() >= 1 ? A.size(-1) : 0, " matrices");
  if (n == 0) {  // the identity, still in A's graph (a zero gradient), as torch's
    Tensor I = eye(A.size(-1), std::nullopt, TensorOptions(A.dtype()).device(A.device()));
    Tensor out = clone(A);
    out.copy_(I.expand(A.sizes()));
    return out;
  }
  Tensor base = n < 0 ? linalg::inv(A) : A;
  uint64_t e = n < 0 ? uint64_t(-(n + 1)) + 1 : uint64_t(n);
  Tensor result;
  // binary powering: the fewest matmuls
  while (e) {
    if (e & 1) result = result.defined() ? matmul(result, base) : base;
    e >>= 1;
    if (e) base = matmul(base, base);
  }
  return result;
}

Tensor cross(const Tensor& a, const Tensor& b, int64_t dim) {
  const char* op = "linalg.cross";
  KILN_CHECK(a.dim() == b.dim(), Runtime, op, "inputs must have the same number of dimensions.");
  KILN_CHECK(a.dtype() == b.dtype(), Runtime, op, "input and other must have the same dtype");
  const int64_t d = wrap_dim(dim, a.dim(), op);
  KILN_CHECK(a.size(d) == 3 && b.size(d) == 3, Runtime, op, "inputs dimension ", dim, " must have length 3. Got ",
             a.size(d), " and ", b.size(d));
  auto at = [&](const Tensor& x, int64_t i) { return narrow(x, d, i, 1); };
  return cat({sub(mul(at(a, 1), at(b, 2)), mul(at(a, 2), at(b, 1))), sub(mul(at(a, 2), at(b, 0)), mul(at(a, 0), at(b, 2))),
              sub(mul(at(a, 0), at(b, 1)), mul(at(a, 1), at(b, 0)))},
             d);
}

Tensor vecdot(const Tensor& x, const Tensor& y, int64_t dim) {
  KILN_AUTOCAST(kLowerPrecision, vecdot, x, y, dim);
  KILN_CHECK(x.dtype() == y.dtype(), Runtime, "linalg.vecdot", "Expected x and y to have the same dtype, but found x "
             "of type ", dtype_name(x.dtype()), " and y of type ", dtype_name(y.dtype()), " instead");
  return sum(mul(cj(x), y), Shape{dim});
}

Tensor multi_dot(const std::vector<Tensor>& ts) {
  const char* op = "linalg.multi_dot";
  const size_t n = ts.size();
  KILN_CHECK(n >= 2, Runtime, op, "expected at least 2 tensors but got ", n);
  std::vector<Tensor> m(ts);
  const bool first_vec = m[0].dim() == 1, last_vec = m[n - 1].dim() == 1;
  if (first_vec) m[0] = unsqueeze(m[0], 0);
  if (last_vec) m[n - 1] = unsqueeze(m[n - 1], 1);
  for (size_t i = 0; i < n; ++i) {
    KILN_CHECK(m[i].dim() == 2, Runtime, op, "tensor ", i, " must be 2D but got ", ts[i].dim(), "D");
    KILN_CHECK(m[i].dtype() == m[0].dtype(), Runtime, op, "all tensors must have the same dtype. Got ",
               dtype_name(m[0].dtype()), " and ", dtype_name(m[i].dtype()));
    if (i) KILN_CHECK(m[i - 1].size(1) == m[i].size(0), Runtime, op, "tensors ", i - 1, " and ", i,
                      " with shapes ", m[i - 1].sizes(), " and ", m[i].sizes(), " cannot be multiplied");
  }
  // the cheapest order (matrix-chain dynamic programme)
  std::vector<int64_t> p(n + 1);
  for (size_t i = 0; i < n; ++i) p[i] = m[i].size(0);
  p[n] = m[n - 1].size(1);
  std::vector<std::vector<double>> cost(n, std::vector<double>(n, 0));
  std::vector<std::vector<size_t>> split(n, std::vector<size_t>(n, 0));
  for (size_t len = 1; len < n; ++len)
    for (size_t i = 0; i + len < n; ++i) {
      size_t j = i + len;
      cost[i][j] = std::numeric_limits<double>::infinity();
      for (size_t k = i; k < j; ++k) {
        double c = cost[i][k] + cost[k + 1][j] + double(p[i]) * double(p[k + 1]) * double(p[j + 1]);
        if (c < cost[i][j]) cost[i][j] = c, split[i][j] = k;
      }
    }
  std::function<Tensor(size_t, size_t)> chain = [&](size_t i, size_t j) -> Tensor {
    if (i == j) return m[i];
    return mm(chain(i, split[i][j]), chain(split[i][j] + 1, j));
  };
  Tensor r = chain(0, n - 1);
  if (first_vec) r = squeeze(r, Shape{0});
  if (last_vec) r = squeeze(r, Shape{-1});
  return r;
}

Tensor diagonal(const Tensor& A, int64_t offset, int64_t dim1, int64_t dim2) {
  return kiln::diagonal(A, offset, dim1, dim2);
}

Tensor vander(const Tensor& x, std::optional<int64_t> N) {
  const char* op = "linalg.vander";
  KILN_CHECK(x.dim() >= 1, Runtime, op, "x must have at least one dimension.");
  const int64_t n = N ? *N : x.size(-1);
  KILN_CHECK(n > 1, Runtime, op, "N must be greater than 1.");
  Shape s = x.sizes();
  s.push_back(n - 1);
  Tensor powers = cumprod(unsqueeze(x, -1).expand(s), -1);
  Shape o = x.sizes();
  o.push_back(1);
  return cat({ones(o, TensorOptions(powers.dtype()).device(powers.device())), powers}, -1);
}

Tensor tensorinv(const Tensor& A, int64_t ind) {
  const char* op = "linalg.tensorinv";
  KILN_CHECK(ind > 0, Runtime, op, "Expected a strictly positive integer for 'ind', but got ", ind);
  Shape outer(A.sizes().begin(), A.sizes().begin() + std::min<int64_t>(ind, A.dim()));
  Shape inner(A.sizes().begin() + std::min<int64_t>(ind, A.dim()), A.sizes().end());
  const int64_t p = shape_numel(outer), q = shape_numel(inner);
  KILN_CHECK(p == q, Runtime, op, "Expected self to satisfy the requirement prod(self.shape[ind:]) == "
             "prod(self.shape[:ind]), but got ", q, " != ", p);
  Shape res = inner;
  res.insert(res.end(), outer.begin(), outer.end());
  return reshape(linalg::inv(reshape(A, {p, q})), res);
}

Tensor tensorsolve(const Tensor& A, const Tensor& B, std::optional<Shape> dims) {
  Tensor a = A;
  if (dims && !dims->empty()) {
    Shape dst;
    for (size_t i = 0; i < dims->size(); ++i) dst.push_back(A.dim() - int64_t(dims->size()) + int64_t(i));
    a = movedim(A, *dims, dst);
  }
  Shape rest(a.sizes().begin() + B.dim(), a.sizes().end());
  const int64_t p = B.numel(), q = shape_numel(rest);
  KILN_CHECK(p == q, Runtime, "linalg.tensorsolve", "Expected self to satisfy the requirement "
             "prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), but got ", q, " != ", p);
  return reshape(linalg::solve(reshape(a, {p, q}), reshape(B, {p})), rest);
}

}  // namespace linalg

Tensor pinverse(const Tensor& A, double rcond) { return linalg::pinv(A, std::nullopt, rcond); }
Tensor matrix_power(const Tensor& A, int64_t n) { return linalg::matrix_power(A, n); }

// ---- composites ----------------------------------------------------------------------------------------------------
namespace {
TensorList c_pinv_fn(const TensorList& in, const Attrs& a) {
  return {linalg::pinv(in[0], opt_attr<double>(a, 0), opt_attr<double>(a, 1), attr<bool>(a, 2))};
}
Composite c_pinv{"linalg_pinv.atol_rtol_float(Tensor self, *, float? atol=None, float? rtol=None, bool hermitian=False) "
                 "-> Tensor",
                 c_pinv_fn, kFunctionVariant};
TensorList c_pinv_rcond_fn(const TensorList& in, const Attrs& a) {
  return {linalg::pinv(in[0], std::nullopt, attr<double>(a, 0), attr<bool>(a, 1))};
}
Composite c_pinv_rcond{"linalg_pinv(Tensor self, float rcond, bool hermitian=False) -> Tensor", c_pinv_rcond_fn,
                       kFunctionVariant};
TensorList c_pinverse_fn(const TensorList& in, const Attrs& a) { return {pinverse(in[0], attr<double>(a, 0))}; }
Composite c_pinverse{"pinverse(Tensor self, float rcond=1e-15) -> Tensor", c_pinverse_fn, kFunctionAndMethod};

TensorList c_rank_fn(const TensorList& in, const Attrs& a) {
  return {linalg::matrix_rank(in[0], opt_attr<double>(a, 0), opt_attr<double>(a, 1), attr<bool>(a, 2))};
}
Composite c_rank{"linalg_matrix_rank.atol_rtol_float(Tensor self, *, float? atol=None, float? rtol=None, "
                 "bool hermitian=False) -> Tensor",
                 c_rank_fn, kFunctionVariant};
TensorList c_rank_tol_fn(const TensorList& in, const Attrs& a) {
  return {linalg::matrix_rank(in[0], attr<double>(a, 0), 0.0, attr<bool>(a, 1))};
}
Composite c_rank_tol{"linalg_matrix_rank(Tensor self, float tol, bool hermitian=False) -> Tensor", c_rank_tol_fn,
                     kFunctionVariant};

std::optional<Dtype> dtype_at(const Attrs& a, size_t i) { return opt_attr<Dtype>(a, i); }
double scalar_at(const Attrs& a, size_t i) { return attr_double(a[i]); }

TensorList c_vector_norm_fn(const TensorList& in, const Attrs& a) {
  auto dims = opt_attr<Shape>(a, 1);
  return {kiln::vector_norm(in[0], scalar_at(a, 0), dims, attr<bool>(a, 2), dtype_at(a, 3))};
}
Composite c_vector_norm{"linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, "
                        "ScalarType? dtype=None) -> Tensor",
                        c_vector_norm_fn, kFunctionVariant};
TensorList c_matrix_norm_fn(const TensorList& in, const Attrs& a) {
  return {linalg::matrix_norm(in[0], scalar_at(a, 0), attr<Shape>(a, 1), attr<bool>(a, 2), dtype_at(a, 3))};
}
Composite c_matrix_norm{"linalg_matrix_norm(Tensor self, Scalar ord, int[] dim=[-2,-1], bool keepdim=False, *, "
                        "ScalarType? dtype=None) -> Tensor",
                        c_matrix_norm_fn, kFunctionVariant};
TensorList c_matrix_norm_str_fn(const TensorList& in, const Attrs& a) {
  return {linalg::matrix_norm(in[0], attr<std::string>(a, 0), attr<Shape>(a, 1), attr<bool>(a, 2), dtype_at(a, 3))};
}
Composite c_matrix_norm_str{"linalg_matrix_norm.str_ord(Tensor self, str ord='fro', int[] dim=[-2,-1], "
                            "bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
                            c_matrix_norm_str_fn, kFunctionVariant};
TensorList c_norm_fn(const TensorList& in, const Attrs& a) {
  std::optional<double> ord;
  if (!std::holds_alternative<std::monostate>(a[0])) ord = scalar_at(a, 0);
  return {linalg::norm(in[0], ord, opt_attr<Shape>(a, 1), attr<bool>(a, 2), dtype_at(a, 3))};
}
Composite c_norm{"linalg_norm(Tensor self, Scalar? ord=None, int[1]? dim=None, bool keepdim=False, *, "
                 "ScalarType? dtype=None) -> Tensor",
                 c_norm_fn, kFunctionVariant};
TensorList c_norm_str_fn(const TensorList& in, const Attrs& a) {
  return {linalg::norm(in[0], attr<std::string>(a, 0), opt_attr<Shape>(a, 1), attr<bool>(a, 2), dtype_at(a, 3))};
}
Composite c_norm_str{"linalg_norm.ord_str(Tensor self, str ord, int[1]? dim=None, bool keepdim=False, *, "
                     "ScalarType? dtype=None) -> Tensor",
                     c_norm_str_fn, kFunctionVariant};
TensorList c_cond_fn(const TensorList& in, const Attrs& a) {
  std::optional<double> p;
  if (!std::holds_alternative<std::monostate>(a[0])) p = scalar_at(a, 0);
  return {linalg::cond(in[0], p)};
}
Composite c_cond{"linalg_cond(Tensor self, Scalar? p=None) -> Tensor", c_cond_fn, kFunctionVariant};
TensorList c_cond_str_fn(const TensorList& in, const Attrs& a) { return {linalg::cond(in[0], attr<std::string>(a, 0))}; }
Composite c_cond_str{"linalg_cond.p_str(Tensor self, str p) -> Tensor", c_cond_str_fn, kFunctionVariant};

TensorList c_matrix_power_fn(const TensorList& in, const Attrs& a) {
  return {linalg::matrix_power(in[0], attr<int64_t>(a, 0))};
}
Composite c_linalg_matrix_power{"linalg_matrix_power(Tensor self, int n) -> Tensor", c_matrix_power_fn,
                                kFunctionVariant};
Composite c_matrix_power{"matrix_power(Tensor self, int n) -> Tensor", c_matrix_power_fn, kFunctionAndMethod};

TensorList c_cross_fn(const TensorList& in, const Attrs& a) {
  const int64_t dim = attr<int64_t>(a, 0);
  Shape s = broadcast_shapes(in[0].sizes(), in[1].sizes(), "linalg.cross");
  return {linalg::cross(in[0].expand(s), in[1].expand(s), dim)};
}
Composite c_linalg_cross{"linalg_cross(Tensor self, Tensor other, *, int dim=-1) -> Tensor", c_cross_fn,
                         kFunctionVariant};
TensorList c_cross_legacy_fn(const TensorList& in, const Attrs& a) {
  Shape s = broadcast_shapes(in[0].sizes(), in[1].sizes(), "cross");
  int64_t dim = -1;
  if (auto d = opt_attr<int64_t>(a, 0)) {
    dim = *d;
  } else {  // torch's legacy default: the first dimension of size 3
    int64_t i = 0;
    while (i < int64_t(s.size()) && s[i] != 3) ++i;
    KILN_CHECK(i < int64_t(s.size()), Runtime, "cross", "no dimension of size 3 in input");
    dim = i;
  }
  return {linalg::cross(in[0].expand(s), in[1].expand(s), dim)};
}
Composite c_cross{"cross(Tensor self, Tensor other, int? dim=None) -> Tensor", c_cross_legacy_fn, kFunctionAndMethod};
TensorList c_vecdot_fn(const TensorList& in, const Attrs& a) { return {linalg::vecdot(in[0], in[1], attr<int64_t>(a, 0))}; }
Composite c_vecdot{"linalg_vecdot(Tensor x, Tensor y, *, int dim=-1) -> Tensor", c_vecdot_fn, kFunctionVariant};
TensorList c_multi_dot_fn(const TensorList& in, const Attrs&) {
  return {linalg::multi_dot(std::vector<Tensor>(in.begin(), in.end()))};
}
Composite c_multi_dot{"linalg_multi_dot(Tensor[] tensors) -> Tensor", c_multi_dot_fn, kFunctionVariant};
TensorList c_diagonal_fn(const TensorList& in, const Attrs& a) {
  return {linalg::diagonal(in[0], attr<int64_t>(a, 0), attr<int64_t>(a, 1), attr<int64_t>(a, 2))};
}
Composite c_diagonal{"linalg_diagonal(Tensor A, *, int offset=0, int dim1=-2, int dim2=-1) -> Tensor",
                     c_diagonal_fn, kFunctionVariant};
TensorList c_vander_fn(const TensorList& in, const Attrs& a) { return {linalg::vander(in[0], opt_attr<int64_t>(a, 0))}; }
Composite c_vander{"linalg_vander(Tensor x, *, SymInt? N=None) -> Tensor", c_vander_fn, kFunctionVariant};
TensorList c_tensorinv_fn(const TensorList& in, const Attrs& a) { return {linalg::tensorinv(in[0], attr<int64_t>(a, 0))}; }
Composite c_tensorinv{"linalg_tensorinv(Tensor self, int ind=2) -> Tensor", c_tensorinv_fn, kFunctionVariant};
TensorList c_tensorsolve_fn(const TensorList& in, const Attrs& a) {
  return {linalg::tensorsolve(in[0], in[1], opt_attr<Shape>(a, 0))};
}
Composite c_tensorsolve{"linalg_tensorsolve(Tensor self, Tensor other, int[]? dims=None) -> Tensor", c_tensorsolve_fn,
                        kFunctionVariant};
// torch refuses an out= of another dtype than the result's for these (pinv, cond, matrix_rank,
// tensorinv and tensorsolve cast into it)
CompositeTags t_vector_norm{c_vector_norm, kOutExactDtype}, t_matrix_norm{c_matrix_norm, kOutExactDtype};
CompositeTags t_matrix_norm_str{c_matrix_norm_str, kOutExactDtype};
CompositeTags t_norm{c_norm, kOutExactDtype}, t_norm_str{c_norm_str, kOutExactDtype};
CompositeTags t_linalg_matrix_power{c_linalg_matrix_power, kOutExactDtype}, t_matrix_power{c_matrix_power, kOutExactDtype};
CompositeTags t_linalg_cross{c_linalg_cross, kOutExactDtype}, t_cross{c_cross, kOutExactDtype};
CompositeTags t_vecdot{c_vecdot, kOutExactDtype}, t_multi_dot{c_multi_dot, kOutExactDtype};
}  // namespace

}  // namespace kiln
