// Derivatives of the sorting and selection ops (sort.cpp, search.cpp): the values' gradient goes
// back to the positions the indices name; global medians share it among the tied elements;
// quantiles split it between the two order statistics they interpolate.
#include <string>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/sort.h"

namespace kiln {
namespace {

using G = const GradCtx&;
using GL = const TensorList&;

// The input's sizes, bit for bit (symbolic in a trace): passed on as a shape argument, never computed with.
Shape in_shape(G c) { return c.in_specs[0].raw_sizes(); }

// g (the values' gradient, reduced along dim unless keep) scattered to `idx` of zeros like x.
Tensor to_indices(G c, const Tensor& g, const Tensor& idx, int64_t dim, bool keep) {
  const Shape& s = in_shape(c);
  if (s.empty()) return reshape(g, {});
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(s.size()), "backward");
  Tensor gg = keep ? g : unsqueeze(g, d);
  Tensor ii = keep ? idx : unsqueeze(idx, d);
  return scatter(zeros(s, like(g)), d, ii, gg);
}

// sort(x, dim, descending, stable), topk(x, k, dim, largest, sorted): outputs {values, indices}
TensorList sort_grad(G c, GL go) {
  return {to_indices(c, go[0], c.out[1], attr<int64_t>(c.attrs, 0), true)};
}
DerivativeByName d_sort{"sort", sort_grad, 0, 0b10};
TensorList topk_grad(G c, GL go) {
  return {to_indices(c, go[0], c.out[1], attr<int64_t>(c.attrs, 1), true)};
}
DerivativeByName d_topk{"topk", topk_grad, 0, 0b10};

// kthvalue(x, k, dim, keepdim)
TensorList kthvalue_grad(G c, GL go) {
  return {to_indices(c, go[0], c.out[1], attr<int64_t>(c.attrs, 1), attr<bool>(c.attrs, 2))};
}
DerivativeByName d_kthvalue{"kthvalue", kthvalue_grad, 0, 0b10};

// median / nanmedian / mode along a dim: attrs {dim, keepdim}
TensorList dim_select_grad(G c, GL go) {
  return {to_indices(c, go[0], c.out[1], attr<int64_t>(c.attrs, 0), attr<bool>(c.attrs, 1))};
}
DerivativeByName d_median_dim{"median_dim", dim_select_grad, 0, 0b10};
DerivativeByName d_nanmedian_dim{"nanmedian_dim", dim_select_grad, 0, 0b10};
DerivativeByName d_mode{"mode", dim_select_grad, 0, 0b10};

// Global median / nanmedian: shared evenly among the elements equal to the result (the NaNs when
// the result is NaN).
TensorList median_grad(G c, GL go) {
  const Tensor &x = c.in[0], &y = c.out[0];
  Tensor hit = logical_or(eq(x, y), logical_and(isnan(x), isnan(y)));
  return {div(mul(go[0], hit), sum(hit))};
}
DerivativeByName d_median{"median", median_grad, 1, 1};
DerivativeByName d_nanmedian{"nanmedian", median_grad, 1, 1};

// quantile / nanquantile(x, q): inputs {x, q}; attrs {has_dim, dim, keepdim, interpolation}.
// Each row is sorted and the result interpolates the sorted values around rank = q * (n - 1), n the
// row's length (nanquantile: its non-NaN count). A row holding a NaN (quantile) or only NaNs
// (nanquantile) has a fixed rank instead, so q gets no gradient there. The x gradient splits g
// between the two order statistics the interpolation used; q's (linear only) is
// g * (hi - lo) * (n - 1).
TensorList quantile_grad(G c, GL go) {
  const Tensor &x = c.in[0], &q = c.in[1];
  const Tensor& g = go[0];
  const bool has_dim = attr<bool>(c.attrs, 0);
  const bool ignore_nan = c.op.name == std::string("nanquantile");
  const std::string& interp = attr<std::string>(c.attrs, 3);
  const Dtype dt = x.dtype();
  // rows along the last dim: xr [P..., R]
  const bool along = has_dim && x.dim() > 0;
  const int64_t d = along ? wrap_dim(attr<int64_t>(c.attrs, 1), x.dim(), "quantile") : 0;
  Tensor xr = along ? movedim(x, {d}, {-1}) : reshape(x, {-1});
  const int64_t R = xr.sizes().back();
  auto [sorted, order] = sort(detach(xr), -1);
  // ranks: [Q, P..., 1] (Q = 1 for a 0-dim q)
  Shape fshape(xr.sizes().begin(), xr.sizes().end() - 1), qs(fshape.size() + 2, 1);
  qs[0] = q.dim() == 0 ? 1 : q.numel();
  fshape.insert(fshape.begin(), qs[0]);
  fshape.push_back(1);
  Tensor qb = reshape(q, qs);
  Tensor scale, fixed;  // rank = q * scale where not fixed
  if (ignore_nan) {
    scale = sub(sum(logical_not(isnan(sorted)), Shape{-1}, true), Scalar(1));
    fixed = expand(lt(scale, Scalar(0)), fshape);
  } else {
    scale = full({}, Scalar(static_cast<double>(R - 1)), dt);
    fixed = expand(any(isnan(sorted), Shape{-1}, true), fshape);
  }
  Tensor fixed_rank = full({}, Scalar(ignore_nan ? 0.0 : static_cast<double>(R - 1)), dt);
  Tensor rank = expand(where(fixed, fixed_rank, mul(qb, scale)), fshape);
  Tensor pick = rank;
  if (interp == "lower") pick = floor(rank);
  else if (interp == "higher") pick = ceil(rank);
  else if (interp == "nearest") pick = round(rank);
  Shape rows = fshape;
  rows.back() = R;
  Tensor order_e = expand(unsqueeze(order, 0), rows);
  Tensor below = to_dtype(floor(detach(pick)), kInt64);
  Tensor lo = gather(order_e, -1, below);  // positions in the row
  Tensor gr = reshape(g, fshape);
  Tensor z = zeros(rows, like(g));
  TensorList r(2);
  if (interp == "linear" || interp == "midpoint") {
    Tensor hi = gather(order_e, -1, to_dtype(ceil(detach(pick)), kInt64));
    Tensor w = interp == "midpoint" ? full_like(rank, Scalar(0.5)) : sub(rank, to_dtype(below, dt));
    z = scatter_add(z, -1, lo, mul(gr, rsub(w, Scalar(1.0))));
    z = scatter_add(z, -1, hi, mul(gr, w));
    if (c.needs[1] && interp == "linear") {
      Tensor xe = expand(unsqueeze(xr, 0), rows);
      Tensor dq = mul(mul(gr, sub(gather(xe, -1, hi), gather(xe, -1, lo))), scale);
      dq = where(fixed, zeros({}, dq.dtype()), dq);
      Shape rest;
      for (int64_t i = 1; i < dq.dim(); ++i) rest.push_back(i);
      r[1] = reshape(sum(dq, rest), q.sizes());
    }
  } else {
    z = scatter_add(z, -1, lo, gr);
  }
  Tensor gx = sum(z, Shape{0});
  r[0] = along ? movedim(gx, {-1}, {d}) : reshape(gx, x.sizes());
  return r;
}
DerivativeByName d_quantile{"quantile", quantile_grad, 0b11, 0};
DerivativeByName d_nanquantile{"nanquantile", quantile_grad, 0b11, 0};

// histc counts: not differentiable in torch (its output is a constant); no gradient flows back.
TensorList histc_grad(G, GL) { return {Tensor()}; }
DerivativeByName d_histc{"histc", histc_grad, 0, 0};

}  // namespace
}  // namespace kiln
