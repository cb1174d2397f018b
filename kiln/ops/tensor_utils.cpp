// torch's small numeric utilities as composites (tensor_utils.h): the C++ functions, then their
// schemas, which bind them to Python as torch's functions and methods.
#include "kiln/ops/tensor_utils.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "kiln/core/visit.h"
#include "kiln/autograd/autograd.h"
#include "kiln/autograd/function.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/sort.h"

namespace kiln {

Tensor block_diag(const TensorList& tensors) {
  const char* op = "block_diag";
  if (tensors.empty()) return empty({1, 0});
  int64_t cols = 0;
  TensorList mats;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    KILN_CHECK(t.dim() <= 2, Runtime, op, "torch.block_diag: Input tensors must have 2 or fewer dimensions. Input ",
               i, " has ", t.dim(), " dimensions");
    Tensor m = t.dim() == 2 ? t : reshape(t, {1, -1});
    cols += m.size(1);
    mats.push_back(m);
  }
  const Dtype dt = result_type(tensors);
  // each block padded with zero columns to its place, then the rows stacked: differentiable as is
  TensorList padded;
  int64_t left = 0;
  for (const Tensor& m : mats) {
    const int64_t c = m.size(1);
    Tensor mm = m.dtype() == dt ? m : to_dtype(m, dt);
    padded.push_back(pad(mm, {left, cols - left - c}));
    left += c;
  }
  return cat(padded, 0);
}

Tensor cartesian_prod(const TensorList& tensors) {
  const char* op = "cartesian_prod";
  KILN_CHECK(!tensors.empty(), Runtime, op, "cartesian_prod expects at least one tensor");
  for (const Tensor& t : tensors)
    KILN_CHECK(t.dim() == 1, Runtime, op, "Expect a 1D vector, but got shape ", t.sizes());
  if (tensors.size() == 1) return tensors[0];
  TensorList grids = meshgrid(tensors, "ij");
  for (Tensor& g : grids) g = flatten(g);
  return stack(grids, 1);
}

namespace {
using i128 = __int128;

// sum over r < row of clamp(r + k, 0, col): the (r, c) with 0 <= c < col and c < r + k. Rows before r0 hold
// none, rows from r1 on hold col, those between r + k each (an arithmetic series). Exact in 128 bits: the
// count is below row * col < 2^126, twice the series below 2^127.
i128 tri_count(int64_t row, int64_t col, i128 k) {
  const i128 r0 = std::min<i128>(row, std::max<i128>(0, 1 - k));
  const i128 r1 = std::min<i128>(row, std::max<i128>(r0, col - k));
  const i128 series = r1 > r0 ? (r0 + k + r1 - 1 + k) * (r1 - r0) / 2 : 0;
  return series + (row - r1) * i128(col);
}

std::string i128_str(i128 v) {  // v >= 0
  std::string s;
  do s.insert(s.begin(), char('0' + int(v % 10))), v /= 10;
  while (v > 0);
  return s;
}

Tensor tri_indices(const char* op, int64_t row, int64_t col, int64_t offset, TensorOptions o, bool lower) {
  KILN_CHECK(row >= 0, Runtime, op, "row must be non-negative, got", row);
  KILN_CHECK(col >= 0, Runtime, op, "col must be non-negative, got", col);
  const Dtype dt = o.dtype_ == Dtype::Undefined ? kInt64 : o.dtype_;
  if (dt != kInt64 && dt != kInt32) raise_dtype_unsupported(op, dt);
  // lower: row r holds c < r + offset + 1; upper: c >= r + offset, the rest of the row
  const i128 count = lower ? tri_count(row, col, i128(offset) + 1) : i128(row) * col - tri_count(row, col, offset);
  // the count first, so a result no storage can hold raises here, before any allocation (torch's words)
  KILN_CHECK(count <= std::numeric_limits<int64_t>::max() / (2 * int64_t(sizeof(int64_t))), Runtime, op,
             "Storage size calculation overflowed with sizes=[2, ", i128_str(count), "] (row=", row, ", col=", col,
             ", offset=", offset, ")");
  const int64_t n = static_cast<int64_t>(count);
  Tensor out = empty({2, n}, TensorOptions(kInt64));
  int64_t* rs = out.data_ptr<int64_t>();
  int64_t* cs = rs + n;
  // only the rows that hold an index are visited (at most n of them)
  const int64_t first = lower ? int64_t(std::min<i128>(row, std::max<i128>(0, -i128(offset)))) : 0;
  const int64_t last = lower ? row : int64_t(std::clamp<i128>(i128(col) - offset, 0, row));
  for (int64_t r = first, i = 0; r < last; ++r) {
    const int64_t lo = lower ? 0 : int64_t(std::max<i128>(0, i128(r) + offset));
    const int64_t hi = lower ? int64_t(std::min<i128>(col, i128(r) + offset + 1)) : col;
    for (int64_t c = lo; c < hi; ++c, ++i) rs[i] = r, cs[i] = c;
  }
  out = dt == kInt64 ? out : to_dtype(out, dt);
  return o.device_.type == out.device().type ? out : to_device(out, o.device_);
}
}  // namespace

Tensor tril_indices(int64_t row, int64_t col, int64_t offset, TensorOptions o) {
  return tri_indices("tril_indices", row, col, offset, o, true);
}
Tensor triu_indices(int64_t row, int64_t col, int64_t offset, TensorOptions o) {
  return tri_indices("triu_indices", row, col, offset, o, false);
}

Tensor cdist(const Tensor& x1, const Tensor& x2, double p, const std::string& compute_mode) {
  const char* op = "cdist";
  int mode = 0;
  if (compute_mode == "use_mm_for_euclid_dist") mode = 1;
  else if (compute_mode == "donot_use_mm_for_euclid_dist") mode = 2;
  else KILN_CHECK(compute_mode == "use_mm_for_euclid_dist_if_necessary", Value, op, compute_mode,
                  " is not a valid value for compute_mode");
  KILN_CHECK(x1.dim() >= 2, Runtime, op, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D");
  KILN_CHECK(x2.dim() >= 2, Runtime, op, "cdist only supports at least 2D tensors, X2 got: ", x2.dim(), "D");
  KILN_CHECK(is_floating(x1.dtype()) && x1.dtype() != kFloat16 && x1.dtype() != kBFloat16, Runtime, op,
             "cdist only supports floating-point dtypes, X1 got: ", dtype_name(x1.dtype()));
  KILN_CHECK(is_floating(x2.dtype()) && x2.dtype() != kFloat16 && x2.dtype() != kBFloat16, Runtime, op,
             "cdist only supports floating-point dtypes, X2 got: ", dtype_name(x2.dtype()));
  KILN_CHECK(x1.dtype() == x2.dtype(), Runtime, op, "cdist: X1 and X2 must have the same dtype, got ",
             dtype_name(x1.dtype()), " and ", dtype_name(x2.dtype()));
  KILN_CHECK(x1.size(-1) == x2.size(-1), Runtime, op, "X1 and X2 must have the same number of columns. X1: ",
             x1.size(-1), " X2: ", x2.size(-1));
  KILN_CHECK(p >= 0, Runtime, op, "cdist only supports non-negative p values");
  const int64_t r1 = x1.size(-2), r2 = x2.size(-2);
  const Shape b1(x1.sizes().begin(), x1.sizes().end() - 2), b2(x2.sizes().begin(), x2.sizes().end() - 2);
  Shape batch = broadcast_shapes(b1, b2);
  Shape s1 = batch, s2 = batch;
  s1.insert(s1.end(), {r1, x1.size(-1)});
  s2.insert(s2.end(), {r2, x2.size(-1)});
  Tensor a = expand(x1, s1), b = expand(x2, s2);
  if (p == 2 && (mode == 1 || (mode == 0 && (r1 > 25 || r2 > 25)))) {
    // torch's _euclidean_dist: |a|^2 - 2 a.b + |b|^2 as one matrix product, clamped at zero
    Tensor an = sum(mul(a, a), Shape{-1}, true), bn = sum(mul(b, b), Shape{-1}, true);
    Tensor a_ = cat({mul(a, Scalar(-2)), an, ones_like(an)}, -1);
    Tensor b_ = cat({b, ones_like(bn), bn}, -1);
    return sqrt(clamp_min(matmul(a_, transpose(b_, -1, -2)), Scalar(0)));
  }
  // (B..., P, 1, M) - (B..., 1, R, M), reduced over M
  Tensor d = sub(unsqueeze(a, -2), unsqueeze(b, -3));
  return vector_norm(d, p, Shape{-1});
}

namespace {

// torch's _pdist_backward factor for one difference d of a pair at distance `dist`: 0 at a zero
// distance (and, for p < 1, at a zero difference); sign(d) for p = 1; for p = inf the whole
// gradient to each coordinate that attains the max; else sign(d) |d|^(p-1) / dist^(p-1).
Tensor pdist_factor(const Tensor& d, const Tensor& dist, double p) {
  Tensor dk = unsqueeze(dist, 1);
  if (p == 0) return zeros_like(d);
  if (p == 1) return sign(d);
  Tensor a = abs(d);
  if (std::isinf(p)) return mul(sign(d), to_dtype(eq(a, dk), d.dtype()));
  if (p == 2) return masked_fill(div(d, dk), eq(dk, Scalar(0)), Scalar(0));  // d / dist (the common case)
  Tensor w = div(mul(sign(d), pow(a, Scalar(p - 1))), pow(dk, Scalar(p - 1)));
  Tensor zero = eq(dk, Scalar(0));
  if (p < 1) zero = logical_or(zero, eq(d, Scalar(0)));
  return masked_fill(w, zero, Scalar(0));
}

// The rows i < j of x, one row i at a time (N (N - 1) / 2 distances, (N - i - 1, M) work each).
Tensor pdist_values(const Tensor& x, double p) {
  const int64_t n = x.size(0);
  TensorList parts;
  for (int64_t i = 0; i + 1 < n; ++i) {
    Tensor d = sub(unsqueeze(select(x, 0, i), 0), narrow(x, 0, i + 1, n - i - 1));
    parts.push_back(vector_norm(d, p, Shape{1}));
  }
  if (parts.empty()) return empty({0}, TensorOptions(x.dtype()));
  return cat(parts, 0);
}

// Its gradient's own gradient is not defined in torch ("the derivative for '_pdist_backward' is not
// implemented"); kiln raises the same when a graph is built through it.
struct PdistBackwardOp : autograd::Function<PdistBackwardOp> {
  static const char* name() { return "PdistBackward_"; }
  static TensorList forward(autograd::AutogradContext*, const TensorList& in, Tensor grad) {
    return {std::move(grad)};
  }
  static TensorList backward(autograd::AutogradContext*, const TensorList&) {
    KILN_FAIL(NotImplemented, "pdist", "the derivative for '_pdist_backward' is not implemented.");
  }
};

struct Pdist : autograd::Function<Pdist> {
  static const char* name() { return "Pdist"; }
  static TensorList forward(autograd::AutogradContext* ctx, const TensorList& in, double p) {
    Tensor dist = pdist_values(in[0], p);
    ctx->save_for_backward({in[0], dist});
    ctx->saved_data["p"] = p;
    return {dist};
  }
  static TensorList backward(autograd::AutogradContext* ctx, const TensorList& g) {
    TensorList s = ctx->get_saved_variables();
    const Tensor &x = s[0], &dist = s[1];
    const double p = std::get<double>(ctx->saved_data["p"]);
    const bool graph = grad_mode_enabled();
    Tensor grad;
    {
      NoGradGuard ng;
      const int64_t n = x.size(0);
      grad = zeros_like(x);
      int64_t k = 0;
      for (int64_t i = 0; i + 1 < n; ++i) {
        const int64_t m = n - i - 1;
        Tensor d = sub(unsqueeze(select(x, 0, i), 0), narrow(x, 0, i + 1, m));
        Tensor c = mul(pdist_factor(d, narrow(dist, 0, k, m), p), unsqueeze(narrow(g[0], 0, k, m), 1));
        add_(select(grad, 0, i), sum(c, Shape{0}));
        sub_(narrow(grad, 0, i + 1, m), c);
        k += m;
      }
    }
    // create_graph: the gradient carries a node that refuses a second derivative, as torch's
    if (graph && (requires_grad(g[0]) || requires_grad(x))) grad = PdistBackwardOp::apply({g[0], x}, grad)[0];
    return {grad};
  }
};

}  // namespace

Tensor pdist(const Tensor& x, double p) {
  const char* op = "pdist";
  KILN_CHECK(x.dim() == 2, Runtime, op, "pdist only supports 2D tensors, got: ", x.dim(), "D");
  KILN_CHECK(is_floating(x.dtype()), Runtime, op, "pdist only supports floating-point dtypes");
  KILN_CHECK(p >= 0, Runtime, op, "pdist only supports non-negative p values");
  if (x.dtype() != kFloat32 && x.dtype() != kFloat64) shape_detail::not_implemented(op, "pdist", x.dtype());
  return Pdist::apply({x}, p)[0];
}

Tensor cov(const Tensor& x, int64_t correction, const Tensor& fweights, const Tensor& aweights) {
  const char* op = "cov";
  KILN_CHECK(x.dim() <= 2, Runtime, op, "cov(): expected input to have two or fewer dimensions but got an input with ",
             x.dim(), " dimensions");
  Tensor in = x.dim() < 2 ? reshape(x, {1, -1}) : x;
  const int64_t n_obs = in.size(1);
  auto check_weights = [&](const Tensor& w, const char* name, bool integral) {
    KILN_CHECK(w.dim() <= 1, Runtime, op, "cov(): expected ", name, " to have one or fewer dimensions but got ",
               name, " with ", w.dim(), " dimensions");
    if (integral)
      KILN_CHECK(is_integral(w.dtype(), false), Runtime, op, "cov(): expected fweights to have integral dtype but got "
                 "fweights with ", dtype_name(w.dtype()), " dtype");
    else
      KILN_CHECK(is_floating(w.dtype()), Runtime, op, "cov(): expected aweights to have floating point dtype but got "
                 "aweights with ", dtype_name(w.dtype()), " dtype");
    KILN_CHECK(w.numel() == n_obs, Runtime, op, "cov(): expected ", name, " to have the same numel as there are "
               "observations in the input but got ", w.numel(), " != ", n_obs);
    KILN_CHECK(n_obs == 0 || min(w).item<double>() >= 0, Runtime, op, "cov(): ", name, " cannot be negative");
  };
  Tensor w;
  if (fweights.defined()) {
    check_weights(fweights, "fweights", true);
    w = fweights;
  }
  if (aweights.defined()) {
    check_weights(aweights, "aweights", false);
    w = w.defined() ? mul(w, aweights) : aweights;
  }
  Tensor w_sum = w.defined() ? sum(w) : scalar_tensor(Scalar(n_obs), kInt64);
  Tensor avg = div(w.defined() ? sum(mul(in, w), Shape{1}) : sum(in, Shape{1}), w_sum);
  Tensor norm_factor;
  if (w.defined() && correction != 0 && aweights.defined())
    norm_factor = sub(w_sum, mul(div(sum(mul(w, aweights)), w_sum), Scalar(correction)));
  else
    norm_factor = sub(w_sum, Scalar(correction));
  if (norm_factor.item<double>() <= 0) norm_factor = zeros_like(norm_factor);  // torch warns; inf / nan follow
  Tensor centred = sub(in, unsqueeze(avg, 1));
  Tensor c = mm(centred, conj(transpose(w.defined() ? mul(centred, w) : centred, 0, 1)));
  return squeeze(div(c, norm_factor));
}

Tensor corrcoef(const Tensor& x) {
  KILN_CHECK(x.dim() <= 2, Runtime, "corrcoef", "corrcoef(): expected input to have two or fewer dimensions but got "
             "an input with ", x.dim(), " dimensions");
  Tensor c = cov(x);
  if (c.dim() == 0) return div(c, c);
  Tensor d = diagonal(c);
  Tensor sd = sqrt(is_complex(d.dtype()) ? real(d) : d);
  c = div(c, reshape(sd, {-1, 1}));
  c = div(c, reshape(sd, {1, -1}));
  if (is_complex(c.dtype()))
    return complex(clamp(real(c), Scalar(-1), Scalar(1)), clamp(imag(c), Scalar(-1), Scalar(1)));
  return clamp(c, Scalar(-1), Scalar(1));
}

Tensor diff(const Tensor& x, int64_t n, int64_t dim, const Tensor& prepend, const Tensor& append) {
  const char* op = "diff";
  KILN_CHECK(x.dim() >= 1, Runtime, op, "diff expects input to be at least one-dimensional");
  KILN_CHECK(n >= 0, Runtime, op, "order must be non-negative but got ", n);
  for (const Tensor* t : {&prepend, &append})
    KILN_CHECK(!t->defined() || t->dim() == x.dim(), Runtime, op,
               "diff expects prepend or append to be the same dimension as input");
  dim = wrap_dim(dim, x.dim(), op);
  Tensor r = x;
  if (prepend.defined() || append.defined()) {
    TensorList parts;
    if (prepend.defined()) parts.push_back(prepend);
    parts.push_back(x);
    if (append.defined()) parts.push_back(append);
    r = cat(parts, dim);
  }
  if (n == 0) return clone(r);
  int64_t len = r.size(dim) - 1;
  n = std::min(n, r.size(dim));
  const bool boolean = r.dtype() == kBool;
  for (int64_t i = 0; i < n; ++i, --len) {
    Tensor hi = narrow(r, dim, 1, std::max<int64_t>(len, 0)), lo = narrow(r, dim, 0, std::max<int64_t>(len, 0));
    r = boolean ? logical_xor(hi, lo) : sub(hi, lo);
  }
  return r;
}

namespace {
// the sizes of y without dim: what an integral over no samples returns (zeros, as numpy)
// (in y's dtype, as torch's)
Tensor zeros_except(const Tensor& y, int64_t dim) {
  Shape s = y.sizes();
  s.erase(s.begin() + dim);
  return zeros(s, TensorOptions(y.dtype()).device(y.device()));
}

// dx viewed to broadcast against y along dim (torch's rule for 1-d and lower-rank sample points)
Dtype float_of(Dtype d) { return is_floating(d) || is_complex(d) ? d : default_dtype(); }

Tensor spacing(const char* op, const Tensor& y, const Tensor& x, int64_t dim) {
  KILN_CHECK(y.dtype() != kBool && x.dtype() != kBool, Runtime, op, op, ": received a bool input for `x` or `y`, "
             "but bool is not supported");
  Tensor xv = x;
  if (x.dim() == 1) {
    KILN_CHECK(x.size(0) == y.size(dim), Runtime, op, op, ": There must be one `x` value for each sample point");
    Shape s(static_cast<size_t>(y.dim()), 1);
    s[dim] = x.size(0);
    xv = reshape(x, s);
  } else if (x.dim() < y.dim()) {
    Shape s(static_cast<size_t>(y.dim() - x.dim()), 1);
    s.insert(s.end(), x.sizes().begin(), x.sizes().end());
    xv = reshape(x, s);
  }
  return sub(slice(xv, dim, 1, std::nullopt), slice(xv, dim, 0, -1));
}
double real_dx(const char* op, const Scalar& dx) {
  KILN_CHECK(!dx.is_complex() && !dx.is_bool(), Runtime, op, op, ": Currently, we only support dx as a real number.");
  return dx.to<double>();
}
Tensor pair_sum(const Tensor& y, int64_t dim) {
  return add(slice(y, dim, 0, -1), slice(y, dim, 1, std::nullopt));
}
}  // namespace

Tensor trapezoid(const Tensor& y, const Tensor& x, int64_t dim) {
  const char* op = "trapezoid";
  dim = wrap_dim(dim, y.dim(), op);
  if (y.size(dim) == 0) return zeros_except(y, dim);
  Tensor dx = spacing(op, y, x, dim);
  return true_divide(sum(mul(dx, pair_sum(y, dim)), Shape{dim}), Scalar(2.0));
}

Tensor trapezoid(const Tensor& y, const Scalar& dx, int64_t dim) {
  const char* op = "trapezoid";
  dim = wrap_dim(dim, y.dim(), op);
  if (y.size(dim) == 0) return zeros_except(y, dim);
  KILN_CHECK(y.dtype() != kBool, Runtime, op, "trapezoid: received a bool input for `y`, but bool is not supported");
  const double h = real_dx(op, dx);
  Tensor ends = mul(add(select(y, dim, 0), select(y, dim, -1)), Scalar(0.5));
  return mul(sub(sum(y, Shape{dim}), ends), Scalar(h));
}

Tensor cumulative_trapezoid(const Tensor& y, const Tensor& x, int64_t dim) {
  const char* op = "cumulative_trapezoid";
  dim = wrap_dim(dim, y.dim(), op);
  if (y.size(dim) == 0) return zeros(y.sizes(), TensorOptions(float_of(y.dtype())).device(y.device()));  // integers: the default float
  Tensor dx = spacing(op, y, x, dim);
  return true_divide(cumsum(mul(dx, pair_sum(y, dim)), dim), Scalar(2.0));
}

Tensor cumulative_trapezoid(const Tensor& y, const Scalar& dx, int64_t dim) {
  const char* op = "cumulative_trapezoid";
  dim = wrap_dim(dim, y.dim(), op);
  KILN_CHECK(y.dtype() != kBool, Runtime, op, "cumulative_trapezoid: received a bool input for `y`, but bool is not "
             "supported");
  if (y.size(dim) == 0) return zeros(y.sizes(), TensorOptions(float_of(y.dtype())).device(y.device()));  // integers: the default float
  return cumsum(mul(pair_sum(y, dim), Scalar(real_dx(op, dx) / 2.0)), dim);
}

Tensor heaviside(const Tensor& input, const Tensor& values) {
  const char* op = "heaviside";
  KILN_CHECK(!is_complex(input.dtype()) && !is_complex(values.dtype()), Runtime, op,
             "heaviside is not yet implemented for complex tensors.");
  KILN_CHECK(input.dtype() == values.dtype(), Runtime, op,
             "heaviside is not yet implemented for tensors with different dtypes.");
  Tensor step = to_dtype(gt(input, Scalar(0)), input.dtype());
  return where(eq(input, Scalar(0)), values, step);
}

Tensor isin(const Tensor& elements, const Tensor& test_elements, bool assume_unique, bool invert) {
  (void)assume_unique;  // a hint for torch's algorithm choice; the answer is the same
  const Dtype d = promote_types(elements.dtype(), test_elements.dtype());
  Tensor e = to_dtype(elements, d), t = to_dtype(flatten(test_elements), d);
  Tensor found;
  if (t.numel() == 0) {
    found = zeros(e.sizes(), TensorOptions(kBool).device(e.device()));
  } else {
    Tensor sorted = std::get<0>(sort(t));
    Tensor idx = clamp(searchsorted(sorted, contiguous(e)), Scalar(0), Scalar(t.numel() - 1));
    found = eq(reshape(index_select(sorted, 0, flatten(idx)), e.sizes()), e);
  }
  return invert ? logical_not(found) : found;
}

Tensor vander(const Tensor& x, std::optional<int64_t> N, bool increasing) {
  const char* op = "vander";
  KILN_CHECK(x.dim() == 1, Runtime, op, "x must be a one-dimensional tensor.");
  const int64_t n = N ? *N : x.size(0);
  KILN_CHECK(n >= 0, Runtime, op, "N must be non-negative.");
  Tensor xx = x.dtype() == kBool ? to_dtype(x, kInt64) : x;
  // x^0, x^1, ... as a running product (torch's cumprod: the same rounding for floats)
  Tensor cols = ones({x.size(0), n}, TensorOptions(xx.dtype()).device(x.device()));
  if (n > 1) {
    Tensor rep = expand(unsqueeze(xx, 1), {x.size(0), n - 1});
    cols = cat({narrow(cols, 1, 0, 1), cumprod(rep, 1)}, 1);
  }
  return increasing ? cols : flip(cols, {1});
}

Tensor diagflat(const Tensor& x, int64_t offset) { return diag(flatten(x), offset); }

Tensor atleast_1d(const Tensor& x) { return x.dim() == 0 ? reshape(x, {1}) : x; }
Tensor atleast_2d(const Tensor& x) {
  if (x.dim() == 0) return reshape(x, {1, 1});
  return x.dim() == 1 ? unsqueeze(x, 0) : x;
}
Tensor atleast_3d(const Tensor& x) {
  if (x.dim() == 0) return reshape(x, {1, 1, 1});
  if (x.dim() == 1) return unsqueeze(unsqueeze(x, 0), 2);
  return x.dim() == 2 ? unsqueeze(x, 2) : x;
}

TensorList tensor_split(const Tensor& x, int64_t sections, int64_t dim) {
  const char* op = "tensor_split";
  KILN_CHECK(x.dim() > 0, Runtime, op, "tensor_split expected at least a 1-dimensional tensor, but got a tensor with ",
             x.dim(), " dims");
  const int64_t d = wrap_dim(dim, x.dim(), op);
  KILN_CHECK(sections > 0, Runtime, op, "number of sections must be larger than 0, got ", sections);
  const int64_t n = x.size(d), base = n / sections, longer = n % sections;
  TensorList out;
  for (int64_t i = 0, start = 0; i < sections; ++i) {
    const int64_t len = base + (i < longer ? 1 : 0);
    out.push_back(slice(x, d, start, start + len));
    start += len;
  }
  return out;
}
TensorList tensor_split(const Tensor& x, const Shape& indices, int64_t dim) {
  const char* op = "tensor_split";
  KILN_CHECK(x.dim() > 0, Runtime, op, "tensor_split expected at least a 1-dimensional tensor, but got a tensor with ",
             x.dim(), " dims");
  const int64_t d = wrap_dim(dim, x.dim(), op);
  TensorList out;
  std::optional<int64_t> start = 0;
  for (int64_t end : indices) {
    out.push_back(slice(x, d, start, end));
    start = end;
  }
  out.push_back(slice(x, d, start, std::nullopt));
  return out;
}
TensorList tensor_split(const Tensor& x, const Tensor& indices_or_sections, int64_t dim) {
  const char* op = "tensor_split";
  const Tensor& t = indices_or_sections;
  KILN_CHECK(t.device().type == DeviceType::CPU, Runtime, op, "tensor_split expected tensor_indices_or_sections to be "
             "on cpu, but it's on ", device_str(t.device()));
  KILN_CHECK(t.dtype() == kInt64, Runtime, op, "tensor_split expected tensor_indices_or_sections to have dtype of long, "
             "but got ", dtype_name(t.dtype()));
  KILN_CHECK(t.dim() <= 1, Runtime, op, "tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
             "one-dimensional tensor, but got a tensor with ", t.dim(), " dims");
  const Tensor c = contiguous(t);
  const int64_t* p = static_cast<const int64_t*>(c.data_ptr());
  if (t.dim() == 0) return tensor_split(x, p[0], dim);
  return tensor_split(x, Shape(p, p + c.numel()), dim);
}

namespace {
// hsplit / vsplit / dsplit: x at least `min_dim`-d, split along `d`
int64_t split_dim(const Tensor& x, const char* name, int64_t min_dim, int64_t d) {
  KILN_CHECK(x.dim() >= min_dim, Runtime, name, "torch.", name, " requires a tensor with at least ", min_dim,
             " dimension, but got a tensor with ", x.dim(), " dimensions!");
  return d;
}
TensorList split_sections(const Tensor& x, const char* name, int64_t d, int64_t sections) {
  KILN_CHECK(sections != 0 && x.size(d) % sections == 0, Runtime, name, "torch.", name,
             " attempted to split along dimension ", d, ", but the size of the dimension ", x.size(d),
             " is not divisible by the split_size ", sections, "!");
  return tensor_split(x, sections, d);
}
}  // namespace

TensorList hsplit(const Tensor& x, int64_t sections) {
  return split_sections(x, "hsplit", split_dim(x, "hsplit", 1, x.dim() == 1 ? 0 : 1), sections);
}
TensorList hsplit(const Tensor& x, const Shape& indices) {
  return tensor_split(x, indices, split_dim(x, "hsplit", 1, x.dim() == 1 ? 0 : 1));
}
TensorList vsplit(const Tensor& x, int64_t sections) { return split_sections(x, "vsplit", split_dim(x, "vsplit", 2, 0), sections); }
TensorList vsplit(const Tensor& x, const Shape& indices) { return tensor_split(x, indices, split_dim(x, "vsplit", 2, 0)); }
TensorList dsplit(const Tensor& x, int64_t sections) { return split_sections(x, "dsplit", split_dim(x, "dsplit", 3, 2), sections); }
TensorList dsplit(const Tensor& x, const Shape& indices) { return tensor_split(x, indices, split_dim(x, "dsplit", 3, 2)); }

Tensor dstack(const TensorList& ts) {
  KILN_CHECK(!ts.empty(), Runtime, "dstack", "dstack expects a non-empty TensorList");
  TensorList u;
  for (const Tensor& t : ts) u.push_back(atleast_3d(t));
  return cat(u, 2);
}
Tensor column_stack(const TensorList& ts) {
  KILN_CHECK(!ts.empty(), Runtime, "column_stack", "column_stack expects a non-empty TensorList");
  TensorList u;
  for (const Tensor& t : ts) u.push_back(t.dim() <= 1 ? reshape(t, {t.numel(), 1}) : t);
  return hstack(u);
}
Tensor fliplr(const Tensor& x) {
  KILN_CHECK(x.dim() >= 2, Runtime, "fliplr", "Input must be >= 2-d.");
  return flip(x, {1});
}
Tensor flipud(const Tensor& x) {
  KILN_CHECK(x.dim() >= 1, Runtime, "flipud", "Input must be >= 1-d.");
  return flip(x, {0});
}

Tensor clamp_min(const Tensor& x, const Scalar& lo) { return clamp(x, lo, std::nullopt); }
Tensor clamp_max(const Tensor& x, const Scalar& hi) { return clamp(x, std::nullopt, hi); }
Tensor clamp_min(const Tensor& x, const Tensor& lo) { return clamp(x, lo, Tensor()); }
Tensor clamp_max(const Tensor& x, const Tensor& hi) { return clamp(x, Tensor(), hi); }

// ---- schemas ---------------------------------------------------------------------------------------------
namespace {
#define KILN_NEW_KW "*, ScalarType? dtype=None, Device? device=None, bool requires_grad=False"
Composite c_new_zeros{"new_zeros(Tensor self, SymInt[] size, " KILN_NEW_KW ") -> Tensor",
                      [](const TensorList& in, const Attrs& a) -> TensorList {
                        return factory_result(zeros(attr<Shape>(a, 0), like_options_attr(in[0], a, 1)), a, 3);
                      },
                      kMethodVariant};
Composite c_new_ones{"new_ones(Tensor self, SymInt[] size, " KILN_NEW_KW ") -> Tensor",
                     [](const TensorList& in, const Attrs& a) -> TensorList {
                       return factory_result(ones(attr<Shape>(a, 0), like_options_attr(in[0], a, 1)), a, 3);
                     },
                     kMethodVariant};
Composite c_new_empty{"new_empty(Tensor self, SymInt[] size, " KILN_NEW_KW ") -> Tensor",
                      [](const TensorList& in, const Attrs& a) -> TensorList {
                        return factory_result(empty(attr<Shape>(a, 0), like_options_attr(in[0], a, 1)), a, 3);
                      },
                      kMethodVariant};
Composite c_new_full{"new_full(Tensor self, SymInt[] size, Scalar fill_value, " KILN_NEW_KW ") -> Tensor",
                     [](const TensorList& in, const Attrs& a) -> TensorList {
                       return factory_result(full(attr<Shape>(a, 0), attr<Scalar>(a, 1), like_options_attr(in[0], a, 2)),
                                             a, 4);
                     },
                     kMethodVariant};
#undef KILN_NEW_KW

Composite c_block_diag{"block_diag(Tensor[] tensors) -> Tensor",
                       [](const TensorList& in, const Attrs&) -> TensorList { return {block_diag(in)}; },
                       kFunctionVariant};
Composite c_cartesian_prod{"cartesian_prod(Tensor[] tensors) -> Tensor",
                           [](const TensorList& in, const Attrs&) -> TensorList {
                             return {cartesian_prod(in)};
                           },
                           kFunctionVariant};
Composite c_tril_indices{"tril_indices(int row, int col, int offset=0, *, ScalarType? dtype=None, Device? device=None, "
                         "bool requires_grad=False) -> Tensor",
                         [](const TensorList&, const Attrs& a) -> TensorList {
                           return factory_result(tril_indices(attr<int64_t>(a, 0), attr<int64_t>(a, 1),
                                                              attr<int64_t>(a, 2), options_attr(a, 3)), a, 5);
                         },
                         kFunctionVariant};
Composite c_triu_indices{"triu_indices(int row, int col, int offset=0, *, ScalarType? dtype=None, Device? device=None, "
                         "bool requires_grad=False) -> Tensor",
                         [](const TensorList&, const Attrs& a) -> TensorList {
                           return factory_result(triu_indices(attr<int64_t>(a, 0), attr<int64_t>(a, 1),
                                                              attr<int64_t>(a, 2), options_attr(a, 3)), a, 5);
                         },
                         kFunctionVariant};
Composite c_pdist{"pdist(Tensor input, float p=2) -> Tensor",
                  [](const TensorList& in, const Attrs& a) -> TensorList { return {pdist(in[0], attr<double>(a, 0))}; },
                  kFunctionVariant};
Composite c_cdist{"cdist(Tensor x1, Tensor x2, float p=2., str compute_mode=\"use_mm_for_euclid_dist_if_necessary\") "
                  "-> Tensor",
                  [](const TensorList& in, const Attrs& a) -> TensorList {
                    return {cdist(in[0], in[1], attr<double>(a, 0), attr<std::string>(a, 1))};
                  },
                  kFunctionVariant};
Composite c_cov{"cov(Tensor self, *, int correction=1, Tensor? fweights=None, Tensor? aweights=None) -> Tensor",
                [](const TensorList& in, const Attrs& a) -> TensorList {
                  return {cov(in[0], attr<int64_t>(a, 0), in[1], in[2])};
                },
                kFunctionAndMethod};
Composite c_corrcoef{"corrcoef(Tensor self) -> Tensor",
                     [](const TensorList& in, const Attrs&) -> TensorList { return {corrcoef(in[0])}; },
                     kFunctionAndMethod};
Composite c_diff{"diff(Tensor self, int n=1, int dim=-1, Tensor? prepend=None, Tensor? append=None) -> Tensor",
                 [](const TensorList& in, const Attrs& a) -> TensorList {
                   return {diff(in[0], attr<int64_t>(a, 0), attr<int64_t>(a, 1), in[1], in[2])};
                 },
                 kFunctionAndMethod};
TensorList trapezoid_x(const TensorList& in, const Attrs& a) { return {trapezoid(in[0], in[1], attr<int64_t>(a, 0))}; }
TensorList trapezoid_dx(const TensorList& in, const Attrs& a) {
  return {trapezoid(in[0], attr<Scalar>(a, 0), attr<int64_t>(a, 1))};
}
TensorList cumtrapz_x(const TensorList& in, const Attrs& a) {
  return {cumulative_trapezoid(in[0], in[1], attr<int64_t>(a, 0))};
}
TensorList cumtrapz_dx(const TensorList& in, const Attrs& a) {
  return {cumulative_trapezoid(in[0], attr<Scalar>(a, 0), attr<int64_t>(a, 1))};
}
Composite c_trapezoid_x{"trapezoid.x(Tensor y, Tensor x, *, int dim=-1) -> Tensor", trapezoid_x, kFunctionVariant};
Composite c_trapezoid_dx{"trapezoid.dx(Tensor y, *, Scalar dx=1, int dim=-1) -> Tensor", trapezoid_dx, kFunctionVariant};
Composite c_trapz_x{"trapz.x(Tensor y, Tensor x, *, int dim=-1) -> Tensor", trapezoid_x, kFunctionVariant};
Composite c_trapz_dx{"trapz.dx(Tensor y, *, float dx=1, int dim=-1) -> Tensor",
                     [](const TensorList& in, const Attrs& a) -> TensorList {
                       return {trapezoid(in[0], Scalar(attr<double>(a, 0)), attr<int64_t>(a, 1))};
                     },
                     kFunctionVariant};
Composite c_cumtrapz_x{"cumulative_trapezoid.x(Tensor y, Tensor x, *, int dim=-1) -> Tensor", cumtrapz_x,
                       kFunctionVariant};
Composite c_cumtrapz_dx{"cumulative_trapezoid.dx(Tensor y, *, Scalar dx=1, int dim=-1) -> Tensor", cumtrapz_dx,
                        kFunctionVariant};

Composite c_heaviside{"heaviside(Tensor self, Tensor values) -> Tensor",
                      [](const TensorList& in, const Attrs&) -> TensorList { return {heaviside(in[0], in[1])}; },
                      kAllVariants};
TensorList isin_tt(const TensorList& in, const Attrs& a) {
  return {isin(in[0], in[1], attr<bool>(a, 0), attr<bool>(a, 1))};
}
TensorList isin_ts(const TensorList& in, const Attrs& a) {
  return {isin(in[0], scalar_tensor(attr<Scalar>(a, 0)), attr<bool>(a, 1), attr<bool>(a, 2))};
}
TensorList isin_st(const TensorList& in, const Attrs& a) {
  return {isin(scalar_tensor(attr<Scalar>(a, 0)), in[0], attr<bool>(a, 1), attr<bool>(a, 2))};
}
Composite c_isin_tt{"isin.Tensor_Tensor(Tensor elements, Tensor test_elements, *, bool assume_unique=False, "
                    "bool invert=False) -> Tensor", isin_tt, kFunctionVariant};
Composite c_isin_ts{"isin.Tensor_Scalar(Tensor elements, Scalar test_element, *, bool assume_unique=False, "
                    "bool invert=False) -> Tensor", isin_ts, kFunctionVariant};
Composite c_isin_st{"isin.Scalar_Tensor(Scalar element, Tensor test_elements, *, bool assume_unique=False, "
                    "bool invert=False) -> Tensor", isin_st, kFunctionVariant};
Composite c_vander{"vander(Tensor x, int? N=None, bool increasing=False) -> Tensor",
                   [](const TensorList& in, const Attrs& a) -> TensorList {
                     return {vander(in[0], opt_attr<int64_t>(a, 0), attr<bool>(a, 1))};
                   },
                   kFunctionVariant};
Composite c_diagflat{"diagflat(Tensor self, int offset=0) -> Tensor",
                     [](const TensorList& in, const Attrs& a) -> TensorList {
                       return {diagflat(in[0], attr<int64_t>(a, 0))};
                     },
                     kFunctionAndMethod};
Composite c_atleast_1d{"atleast_1d(Tensor self) -> Tensor",
                       [](const TensorList& in, const Attrs&) -> TensorList { return {atleast_1d(in[0])}; },
                       kFunctionVariant};
Composite c_atleast_2d{"atleast_2d(Tensor self) -> Tensor",
                       [](const TensorList& in, const Attrs&) -> TensorList { return {atleast_2d(in[0])}; },
                       kFunctionVariant};
Composite c_atleast_3d{"atleast_3d(Tensor self) -> Tensor",
                       [](const TensorList& in, const Attrs&) -> TensorList { return {atleast_3d(in[0])}; },
                       kFunctionVariant};

Composite c_tensor_split_s{"tensor_split.sections(Tensor(a -> *) self, SymInt sections, int dim=0) -> Tensor(a)[]",
                           [](const TensorList& in, const Attrs& a) -> TensorList {
                             return tensor_split(in[0], attr<int64_t>(a, 0), attr<int64_t>(a, 1));
                           },
                           kFunctionAndMethod};
// (the tensor form before the list: a tensor would be read as a list of ints)
Composite c_tensor_split_t{"tensor_split.tensor_indices_or_sections(Tensor(a -> *) self, Tensor tensor_indices_or_sections, "
                           "int dim=0) -> Tensor(a)[]",
                           [](const TensorList& in, const Attrs& a) -> TensorList {
                             return tensor_split(in[0], in[1], attr<int64_t>(a, 0));
                           },
                           kFunctionAndMethod};
Composite c_tensor_split_i{"tensor_split.indices(Tensor(a -> *) self, SymInt[] indices, int dim=0) -> Tensor(a)[]",
                           [](const TensorList& in, const Attrs& a) -> TensorList {
                             return tensor_split(in[0], attr<Shape>(a, 0), attr<int64_t>(a, 1));
                           },
                           kFunctionAndMethod};
#define KILN_XSPLIT(name)                                                                                       \
  Composite c_##name##_int{#name ".int(Tensor(a -> *) self, int sections) -> Tensor(a)[]",                      \
                           [](const TensorList& in, const Attrs& a) -> TensorList {                             \
                             return name(in[0], attr<int64_t>(a, 0));                                           \
                           },                                                                                   \
                           kFunctionAndMethod};                                                                 \
  Composite c_##name##_array{#name ".array(Tensor(a -> *) self, int[] indices) -> Tensor(a)[]",                 \
                             [](const TensorList& in, const Attrs& a) -> TensorList {                           \
                               return name(in[0], attr<Shape>(a, 0));                                           \
                             },                                                                                 \
                             kFunctionAndMethod};
KILN_XSPLIT(hsplit)
KILN_XSPLIT(vsplit)
KILN_XSPLIT(dsplit)
#undef KILN_XSPLIT
Composite c_split_with_sizes{"split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]",
                             [](const TensorList& in, const Attrs& a) -> TensorList {
                               return split_with_sizes(in[0], attr<Shape>(a, 0), attr<int64_t>(a, 1));
                             },
                             kFunctionAndMethod};
Composite c_dstack{"dstack(Tensor[] tensors) -> Tensor",
                   [](const TensorList& in, const Attrs&) -> TensorList { return {dstack(in)}; }, kFunctionVariant};
Composite c_column_stack{"column_stack(Tensor[] tensors) -> Tensor",
                         [](const TensorList& in, const Attrs&) -> TensorList { return {column_stack(in)}; },
                         kFunctionVariant};
Composite c_row_stack{"row_stack(Tensor[] tensors) -> Tensor",
                      [](const TensorList& in, const Attrs&) -> TensorList { return {vstack(in)}; }, kFunctionVariant};
Composite c_fliplr{"fliplr(Tensor self) -> Tensor",
                   [](const TensorList& in, const Attrs&) -> TensorList { return {fliplr(in[0])}; }, kFunctionAndMethod};
Composite c_flipud{"flipud(Tensor self) -> Tensor",
                   [](const TensorList& in, const Attrs&) -> TensorList { return {flipud(in[0])}; }, kFunctionAndMethod};

TensorList clamp_min_s(const TensorList& in, const Attrs& a) { return {clamp_min(in[0], attr<Scalar>(a, 0))}; }
TensorList clamp_max_s(const TensorList& in, const Attrs& a) { return {clamp_max(in[0], attr<Scalar>(a, 0))}; }
Composite c_clamp_min_t{"clamp_min.Tensor(Tensor self, Tensor min) -> Tensor",
                        [](const TensorList& in, const Attrs&) -> TensorList { return {clamp_min(in[0], in[1])}; },
                        kAllVariants};
// in place: the promoted result written back under torch's can_cast rule (an int tensor refuses 2.5)
Composite c_clamp_min{"clamp_min(Tensor self, Scalar min) -> Tensor", clamp_min_s, kAllVariants};
Composite c_clamp_max_t{"clamp_max.Tensor(Tensor self, Tensor max) -> Tensor",
                        [](const TensorList& in, const Attrs&) -> TensorList { return {clamp_max(in[0], in[1])}; },
                        kAllVariants};
Composite c_clamp_max{"clamp_max(Tensor self, Scalar max) -> Tensor", clamp_max_s, kAllVariants};
// torch refuses an out= of another dtype than the result's with a Scalar bound (a Tensor bound casts)
CompositeTags t_clamp_min{c_clamp_min, kOutExactDtype}, t_clamp_max{c_clamp_max, kOutExactDtype};
}  // namespace

}  // namespace kiln
