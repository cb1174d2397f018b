// Derivatives of the reductions, softmax family and scans (reduce.cpp).
#include <algorithm>
#include <limits>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/reduce_detail.h"
#include "kiln/ops/shape.h"

namespace kiln {

Tensor expand_reduced(const Tensor& g, const Shape& in_shape, const Shape& dims, bool all,
                      bool keepdim) {
  const int64_t n = static_cast<int64_t>(in_shape.size());
  Tensor r = g;
  if (!keepdim && n > 0) {
    Shape ds;
    if (all) {
      for (int64_t i = 0; i < n; ++i) ds.push_back(i);
    } else {
      for (int64_t d : dims) ds.push_back(wrap_dim(d, n, "backward"));
    }
    std::sort(ds.begin(), ds.end());
    ds.erase(std::unique(ds.begin(), ds.end()), ds.end());
    Shape s = raw_sizes(r);
    for (int64_t d : ds) s.insert(s.begin() + d, 1);
    r = reshape(r, s);
  }
  return expand(r, in_shape);
}

namespace {

using G = const GradCtx&;
using GL = const TensorList&;

// attrs {dim, keepdim} (reduce_detail.h); the ops with a derivative read an empty dim as every dim
const Shape& rdims(G c) {
  static const Shape none;
  return std::holds_alternative<Shape>(c.attrs[0]) ? attr<Shape>(c.attrs, 0) : none;
}
bool rall(G c) { return reduce_detail::reduces_all(c.op, c.attrs); }
bool rkeep(G c) { return attr<bool>(c.attrs, 1); }
// The input's sizes, bit for bit (symbolic in a trace): passed on as a shape argument, never computed with.
Shape in_shape(G c) { return c.in_specs[0].raw_sizes(); }
int64_t in_dim(G c) { return c.in_specs[0].dim(); }
Tensor expand_g(G c, const Tensor& g) {
  return expand_reduced(g, in_shape(c), rdims(c), rall(c), rkeep(c));
}

TensorList sum_grad(G c, GL go) { return {expand_g(c, go[0])}; }
DerivativeByName d_sum{"sum", sum_grad, 0, 0};

TensorList nansum_grad(G c, GL go) {
  return {mul(expand_g(c, go[0]), logical_not(isnan(c.in[0])))};
}
DerivativeByName d_nansum{"nansum", nansum_grad, 1, 0};

TensorList mean_grad(G c, GL go) {
  const SymShape& s = c.in_specs[0].sizes();
  Shape ds;  // the reduced dims
  if (rall(c)) {
    for (size_t d = 0; d < s.size(); ++d) ds.push_back(static_cast<int64_t>(d));
  } else if (!s.empty()) {
    for (int64_t d : rdims(c)) ds.push_back(wrap_dim(d, static_cast<int64_t>(s.size()), "mean"));
    std::sort(ds.begin(), ds.end());
    ds.erase(std::unique(ds.begin(), ds.end()), ds.end());
  } else {
    for (int64_t d : rdims(c)) wrap_dim(d, 1, "mean");
  }
  SymInt count = 1;
  for (int64_t d : ds) count *= s[d];
  if (!count.is_symbolic()) [[likely]]
    return {true_divide(expand_g(c, go[0]),
                        Scalar(static_cast<double>(std::max<int64_t>(count.raw(), 1))))};
  // A symbolic count (a trace that reduces a symbolic dim) is no Scalar: it is the sum of ones shaped
  // like the reduced dims, so the divisor stays an expression of the sizes and nothing is pinned.
  SymShape os(s.size(), SymInt(1));
  for (int64_t d : ds) os[d] = s[d];
  return {div(expand_g(c, go[0]), sum(ones(raw_shape(os), like(go[0]))))};
}
DerivativeByName d_mean{"mean", mean_grad, 0, 0};

// amax/amin: the gradient is shared evenly among the elements equal to the extreme value.
TensorList amax_grad(G c, GL go) {
  const Tensor &x = c.in[0], &y = c.out[0];
  Tensor ye = expand_g(c, y);
  Tensor mask = eq(x, ye);
  Tensor count = expand_g(c, sum(mask, rall(c) ? OptDims{} : OptDims{rdims(c)}, rkeep(c)));
  return {div(mul(expand_g(c, go[0]), mask), count)};
}
DerivativeByName d_amax{"amax", amax_grad, 1, 1};
DerivativeByName d_amin{"amin", amax_grad, 1, 1};

TensorList norm_l1_grad(G c, GL go) { return {mul(expand_g(c, go[0]), sgn(c.in[0]))}; }
DerivativeByName d_norm_l1{"norm_l1", norm_l1_grad, 1, 0};
TensorList norm_l2sq_grad(G c, GL go) {
  return {mul(expand_g(c, go[0]), mul(c.in[0], Scalar(2.0)))};
}
DerivativeByName d_norm_l2sq{"norm_l2sq", norm_l2sq_grad, 1, 0};

// max(dim) / min(dim): the gradient goes to the selected index.
TensorList argred_grad(G c, GL go) {
  int64_t dim = wrap_dim(attr<int64_t>(c.attrs, 0),
                         std::max<int64_t>(in_dim(c), 1), "backward");
  bool keep = attr<bool>(c.attrs, 1);
  const Shape& s = in_shape(c);
  if (s.empty()) return {go[0]};
  Tensor g = keep ? go[0] : unsqueeze(go[0], dim);
  Tensor idx = keep ? c.out[1] : unsqueeze(c.out[1], dim);
  return {scatter(zeros(s, like(go[0])), dim, idx, g)};
}
DerivativeByName d_max_dim{"max_dim", argred_grad, 0, 0b10};
DerivativeByName d_min_dim{"min_dim", argred_grad, 0, 0b10};

// prod: the gradient of x_i is g * (product of the other elements). Without zeros that is y / x_i
// (differentiable through the saved y); with zeros it is the product of the exclusive prefix and
// suffix products, built with cumprod so that double backward still works.
Tensor exclusive_cumprod(const Tensor& x, int64_t d) {
  const int64_t n = x.sizes()[d];
  Shape s1 = x.sizes();
  s1[d] = 1;
  return cumprod(cat({ones(s1, like(x)), narrow(x, d, 0, n - 1)}, d), d);
}
Tensor prod_others(const Tensor& x, int64_t d) {
  Tensor fwd = exclusive_cumprod(x, d);
  Tensor bwd = flip(exclusive_cumprod(flip(x, {d}), d), {d});
  return mul(fwd, bwd);
}

TensorList prod_grad(G c, GL go) {
  const Tensor &x = c.in[0], &y = c.out[0];
  if (in_shape(c).empty()) return {go[0]};
  Tensor g = expand_g(c, go[0]);
  if (x.numel() == 0) return {g};
  if (!any(eq(x, Scalar(0))).item<bool>()) return {mul(g, cj(div(expand_g(c, y), x)))};
  if (rall(c)) return {mul(g, cj(reshape(prod_others(reshape(x, {-1}), 0), x.sizes())))};
  int64_t d = wrap_dim(rdims(c)[0], x.dim(), "backward");
  return {mul(g, cj(prod_others(x, d)))};
}
DerivativeByName d_prod{"prod", prod_grad, 1, 1};

int64_t sm_dim(G c) {
  return wrap_dim(attr<int64_t>(c.attrs, 0), std::max<int64_t>(in_dim(c), 1), "backward");
}
TensorList softmax_grad(G c, GL go) {
  const Tensor &g = go[0], &y = c.out[0];
  if (in_shape(c).empty()) return {zeros_like(g)};
  Tensor gy = mul(g, y);
  return {sub(gy, mul(y, sum(gy, Shape{sm_dim(c)}, true)))};
}
DerivativeByName d_softmax{"softmax", softmax_grad, 0, 1};

TensorList log_softmax_grad(G c, GL go) {
  const Tensor &g = go[0], &y = c.out[0];
  if (in_shape(c).empty()) return {zeros_like(g)};
  return {sub(g, mul(exp(y), sum(g, Shape{sm_dim(c)}, true)))};
}
DerivativeByName d_log_softmax{"log_softmax", log_softmax_grad, 0, 1};

TensorList cumsum_grad(G c, GL go) {
  if (in_shape(c).empty()) return {go[0]};
  int64_t d = sm_dim(c);
  return {flip(cumsum(flip(go[0], {d}), d), {d})};
}
DerivativeByName d_cumsum{"cumsum", cumsum_grad, 0, 0};

Tensor reverse_cumsum(const Tensor& t, int64_t d) { return flip(cumsum(flip(t, {d}), d), {d}); }

// cumprod: d y_j / d x_i = prod_{m <= j, m != i} x_m for i <= j.
//   no zeros: grad_i = sum_{j >= i} g_j y_j / x_i.
//   zeros, first backward: the same before the first zero z1; at z1 the sum over [z1, z2) of
//     g_j * (the prefix product with the zero skipped); zero after z1. Its own derivative is not
//     the second derivative of cumprod, so under create_graph the O(n^2) exact form is used
//     instead.
Tensor cumprod_grad_exact(const Tensor& g, const Tensor& x, int64_t d) {
  const int64_t n = x.sizes()[d];
  TensorList cols;
  for (int64_t i = 0; i < n; ++i) {
    // products that omit x_i, for every j >= i: prefix(<i) * cumprod(x[i+1..j])
    Tensor head = i == 0 ? Tensor() : prod(narrow(x, d, 0, i), d, true);
    Tensor rest = i + 1 < n ? cumprod(narrow(x, d, i + 1, n - i - 1), d) : Tensor();
    Tensor omit;
    if (!head.defined()) {
      Shape s1 = x.sizes();
      s1[d] = 1;
      omit = rest.defined() ? cat({ones(s1, like(x)), rest}, d) : ones(s1, like(x));
    } else {
      omit = rest.defined() ? cat({head, mul(head, rest)}, d) : head;
    }
    cols.push_back(sum(mul(narrow(g, d, i, n - i), cj(omit)), Shape{d}, true));
  }
  return cat(cols, d);
}

TensorList cumprod_grad(G c, GL go) {
  const Tensor &g = go[0], &x = c.in[0], &y = c.out[0];
  if (in_shape(c).empty() || x.numel() == 0) return {g};
  int64_t d = sm_dim(c);
  Tensor z = eq(x, Scalar(0));
  if (!any(z).item<bool>()) return {div(reverse_cumsum(mul(g, cj(y)), d), cj(x))};
  if (grad_mode_enabled()) return {cumprod_grad_exact(g, x, d)};
  Tensor count = cumsum(z, d);
  Tensor before = eq(count, Scalar(0)), in_first = eq(count, Scalar(1));
  Tensor one = ones({}, like(x));
  Tensor g_before = div(reverse_cumsum(mul(g, cj(y)), d), cj(where(before, x, one)));
  Tensor skipped = cumprod(where(z, one, x), d);  // prefix products with the zeros left out
  Tensor g_first = reverse_cumsum(where_g(in_first, mul(g, cj(skipped))), d);
  Tensor zero = zeros({}, g_first.dtype());
  return {where(before, g_before, where(logical_and(z, in_first), g_first, zero))};
}
DerivativeByName d_cumprod{"cumprod", cumprod_grad, 1, 1};

// logcumsumexp: grad_i = sum_{j >= i} g_j exp(x_i - y_j), summed in log space separately for the
// positive and the negative g_j (the lowest finite value stands for log 0, so no inf - inf).
TensorList logcumsumexp_grad(G c, GL go) {
  const Tensor &g = go[0], &x = c.in[0], &y = c.out[0];
  if (in_shape(c).empty() || x.numel() == 0) return {g};
  int64_t d = sm_dim(c);
  auto rev_lcse = [d](const Tensor& t) { return flip(logcumsumexp(flip(t, {d}), d), {d}); };
  double lowest = static_cast<double>(std::numeric_limits<float>::lowest());
  if (g.dtype() == kFloat64) lowest = std::numeric_limits<double>::lowest();
  if (g.dtype() == kFloat16) lowest = -65504.0;
  if (g.dtype() == kBFloat16) lowest = -3.3895313892515355e38;
  Tensor floor_ = full({}, Scalar(lowest), g.dtype());
  Tensor log_g = log(abs(g));
  Tensor pos = exp(add(rev_lcse(sub(where(gt(g, Scalar(0)), log_g, floor_), y)), x));
  Tensor neg = exp(add(rev_lcse(sub(where(lt(g, Scalar(0)), log_g, floor_), y)), x));
  return {sub(pos, neg)};
}
DerivativeByName d_logcumsumexp{"logcumsumexp", logcumsumexp_grad, 1, 1};

TensorList cumext_grad(G c, GL go) {  // cummax / cummin
  if (in_shape(c).empty()) return {go[0]};
  return {scatter_add(zeros(in_shape(c), like(go[0])), sm_dim(c), c.out[1], go[0])};
}
DerivativeByName d_cummax{"cummax", cumext_grad, 0, 0b10};
DerivativeByName d_cummin{"cummin", cumext_grad, 0, 0b10};

}  // namespace
}  // namespace kiln
