// Derivatives of the indexing ops (index.cpp) and of embedding / padding (shape.cpp).
#include "kiln/autograd/autograd.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/sort.h"

namespace kiln {
namespace {

using G = const GradCtx&;
using GL = const TensorList&;

// The input's sizes, bit for bit (symbolic in a trace): passed on as a shape argument, never computed with.
Shape in_shape(G c, size_t i = 0) { return c.in_specs[i].raw_sizes(); }
int64_t dim0(G c) {
  return wrap_dim(attr<int64_t>(c.attrs, 0), std::max<int64_t>(in_shape(c).size(), 1), "backward");
}

TensorList index_select_grad(G c, GL go) {
  if (in_shape(c).empty()) return {reshape(go[0], {}), Tensor()};
  return {index_add(zeros(in_shape(c), like(go[0])), dim0(c), c.in[1], go[0]), Tensor()};
}
DerivativeByName d_index_select{"index_select", index_select_grad, 0b10, 0};

TensorList gather_grad(G c, GL go) {
  if (in_shape(c).empty()) return {reshape(go[0], {}), Tensor()};
  return {scatter_add(zeros(in_shape(c), like(go[0])), dim0(c), c.in[1], go[0]), Tensor()};
}
DerivativeByName d_gather{"gather", gather_grad, 0b10, 0};

// aten::index: inputs {x, index...}; the gradient is accumulated back at the indexed positions.
TensorList index_grad(G c, GL go) {
  TensorList idx(c.in.begin() + 1, c.in.end());
  TensorList r(c.in.size());
  r[0] = index_put(zeros(in_shape(c), like(go[0])), idx, go[0], true);
  return r;
}
DerivativeByName d_index{"index", index_grad, ~1u, 0};

// index_put_: inputs {x, values, index...}.
TensorList index_put_grad(G c, GL go) {
  TensorList idx(c.in.begin() + 2, c.in.end());
  bool accumulate = attr<bool>(c.attrs, 0);
  TensorList r(c.in.size());
  if (c.needs[0])
    r[0] = accumulate ? go[0] : index_put(go[0], idx, zeros({}, like(go[0])), false);
  if (c.needs[1]) r[1] = index(go[0], idx);
  return r;
}
DerivativeByName d_index_put{"index_put_", index_put_grad, ~3u, 0};

TensorList masked_select_grad(G c, GL go) {
  Tensor mask = expand(c.in[1], raw_shape(broadcast_shapes(c.in_specs[0].sizes(), c.in_specs[1].sizes())));
  Tensor z = zeros(raw_sizes(mask), like(go[0]));
  return {masked_scatter(z, mask, go[0]), Tensor()};
}
DerivativeByName d_masked_select{"masked_select", masked_select_grad, 0b10, 0};

TensorList flip_grad(G c, GL go) { return {flip(go[0], attr<Shape>(c.attrs, 0))}; }
DerivativeByName d_flip{"flip", flip_grad, 0, 0};
TensorList tril_grad(G c, GL go) { return {tril(go[0], attr<int64_t>(c.attrs, 0))}; }
DerivativeByName d_tril{"tril", tril_grad, 0, 0};
TensorList triu_grad(G c, GL go) { return {triu(go[0], attr<int64_t>(c.attrs, 0))}; }
DerivativeByName d_triu{"triu", triu_grad, 0, 0};

TensorList roll_grad(G c, GL go) {
  Shape shifts = attr<Shape>(c.attrs, 0);
  for (int64_t& s : shifts) s = -s;
  return {roll(go[0], shifts, attr<Shape>(c.attrs, 1))};
}
DerivativeByName d_roll{"roll", roll_grad, 0, 0};

TensorList constant_pad_grad(G c, GL go) {
  Shape p = attr<Shape>(c.attrs, 0);
  for (int64_t& v : p) v = -v;
  return {pad(go[0], p, "constant", 0.0)};
}
DerivativeByName d_constant_pad_nd{"constant_pad_nd", constant_pad_grad, 0, 0};

// embedding(weight, indices): rows of the gradient summed into the weight (padding_idx gets none).
TensorList embedding_grad(G c, GL go) {
  const Tensor& idx = c.in[1];
  int64_t padding_idx = attr<int64_t>(c.attrs, 0);
  bool by_freq = attr<bool>(c.attrs, 1);
  const Shape& ws = in_shape(c);
  Tensor flat = reshape(idx, {-1});
  Tensor g = reshape(go[0], {flat.sym_numel().raw(), ws[1]});
  if (padding_idx >= 0) g = mul(g, unsqueeze(ne(flat, Scalar(padding_idx)), 1));
  if (by_freq) {
    Tensor counts = bincount(flat, Tensor(), c.in_specs[0].size(0).guard_int("backward"));
    g = div(g, unsqueeze(index_select(counts, 0, flat), 1));
  }
  return {index_add(zeros(ws, like(go[0])), 0, flat, g), Tensor()};
}
DerivativeByName d_embedding{"embedding", embedding_grad, 0b10, 0};

}  // namespace
}  // namespace kiln
