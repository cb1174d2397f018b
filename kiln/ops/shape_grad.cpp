// Derivatives of the shape ops (shape.cpp): repeat, diag, diag_embed and the non-constant pads.
// roll, constant_pad_nd and embedding keep theirs in index_grad.cpp.
#include "kiln/autograd/autograd.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/shape.h"

namespace kiln {

// view_grad.cpp: g placed on the (offset, d1, d2) diagonal of zeros shaped like the input.
Tensor diagonal_backward(const Tensor& g, const SymShape& in_shape, int64_t offset, int64_t d1,
                         int64_t d2);

namespace {

using G = const GradCtx&;
using GL = const TensorList&;

// The same bit for bit (symbolic in a trace, no guard), for sizes passed on and never computed with.
Shape in_raw(G c) { return c.in_specs[0].raw_sizes(); }

// repeat(r): output dim i is r[i] copies of the input's dim; viewed as (r[i], size[i]) pairs the
// copies are summed away.
TensorList repeat_grad(G c, GL go) {
  const Tensor& g = go[0];
  const Shape& r = attr<Shape>(c.attrs, 0);
  const Shape& s = in_raw(c);  // only passed on, as reshape's sizes
  if (r.empty()) return {g};
  const int64_t lead = static_cast<int64_t>(r.size() - s.size());
  Shape split, dims;
  for (int64_t i = 0; i < static_cast<int64_t>(r.size()); ++i) {
    split.push_back(r[i]);
    split.push_back(i < lead ? 1 : s[i - lead]);
    dims.push_back(2 * i);
  }
  return {reshape(sum(reshape(g, split), dims), s)};
}
DerivativeByName d_repeat{"repeat", repeat_grad, 0, 0};

// diag(x, k): a 1-D input became the k-th diagonal of a matrix; a 2-D input gave its k-th diagonal.
TensorList diag_grad(G c, GL go) {
  const Tensor& g = go[0];
  const int64_t k = attr<int64_t>(c.attrs, 0);
  if (c.in_specs[0].dim() == 1) return {diagonal(g, k, 0, 1)};
  return {diagonal_backward(g, c.in_specs[0].sizes(), k, 0, 1)};
}
DerivativeByName d_diag{"diag", diag_grad, 0, 0};

// diag_embed(x, offset, d1, d2): attrs as given (d1, d2 refer to the output's dims).
TensorList diag_embed_grad(G c, GL go) {
  const int64_t nd = c.in_specs[0].dim() + 1;
  const int64_t d1 = wrap_dim(attr<int64_t>(c.attrs, 1), nd, "diag_embed");
  const int64_t d2 = wrap_dim(attr<int64_t>(c.attrs, 2), nd, "diag_embed");
  return {diagonal(go[0], attr<int64_t>(c.attrs, 0), d1, d2)};
}
DerivativeByName d_diag_embed{"diag_embed", diag_embed_grad, 0, 0};

// reflect / replicate / circular pads: each output element copies one input element. Padding the
// input's flat positions with the same mode tells which, and the gradient is added back there.
// Sizes stay symbolic in a trace.
TensorList pad_grad(G c, GL go) {
  const Tensor& g = go[0];
  const SymShape& s = c.in_specs[0].sizes();
  const SymInt n = sym_numel(s);
  Tensor flat = zeros_symint({n}, like(g));
  if (bool(g.sym_numel() == 0)) return {reshape_symint(flat, s)};
  Tensor iota = reshape_symint(arange_symint(n, like(g, kInt64)), s);
  Tensor where_from = pad(iota, attr<Shape>(c.attrs, 0), attr<std::string>(c.attrs, 1));
  Tensor added = index_add(flat, 0, reshape_symint(where_from, {g.sym_numel()}), reshape_symint(g, {g.sym_numel()}));
  return {reshape_symint(added, s)};
}
DerivativeByName d_pad{"pad", pad_grad, 0, 0};

}  // namespace
}  // namespace kiln
