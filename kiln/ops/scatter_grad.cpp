// Derivatives of the scatter-style ops (scatter.cpp): scatter / scatter_add / scatter_reduce,
// index_add / index_copy / index_fill, masked_scatter, take / put, take_along_dim.
#include <string>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

using G = const GradCtx&;
using GL = const TensorList&;

Shape in_shape(G c, size_t i = 0) { return c.in_specs[i].concrete_sizes("backward"); }
// The same bit for bit (symbolic in a trace, no guard), for a shape passed on and never computed with.
Shape in_raw(G c, size_t i = 0) { return c.in_specs[i].raw_sizes(); }
int64_t dim_attr(G c) { return attr<int64_t>(c.attrs, 0); }
Tensor zero_of(const Tensor& g) { return zeros({}, like(g)); }

// src (at least as large as index in every dim) cut to index's shape: the part scatter reads.
Tensor src_part(const Tensor& src, const Tensor& index) {
  Tensor r = src;
  for (int64_t d = 0; d < index.dim() && d < src.dim(); ++d)
    if (src.sizes()[d] != index.sizes()[d]) r = narrow(r, d, 0, index.sizes()[d]);
  return r;
}
// A gradient shaped like index, zero-padded to src's shape (src elements scatter never reads).
Tensor pad_to(const Tensor& g, const Shape& s) {
  if (g.sizes() == s || g.dim() != static_cast<int64_t>(s.size())) return g;
  Shape p;
  for (int64_t d = g.dim() - 1; d >= 0; --d) {
    p.push_back(0);
    p.push_back(s[d] - g.sizes()[d]);
  }
  return pad(g, p, "constant", 0.0);
}

// ---- scatter / scatter_add ----------------------------------------------------------------------
// inputs {x, index, src}; attrs {dim, reduce} (reduce: "" or torch's legacy "add" / "multiply")
TensorList scatter_grad(G c, GL go) {
  const size_t reduce_at = c.op.name == std::string("scatter") ? 1 : 2;
  const std::string& reduce = attr<std::string>(c.attrs, reduce_at);
  KILN_CHECK(reduce.empty(), NotImplemented, c.op.name, "the derivative for '", c.op.name,
             "' with reduce='", reduce, "' is not implemented.");
  const Tensor& g = go[0];
  const Tensor& index = c.in[1];
  TensorList r(c.in.size());
  if (c.needs[0]) r[0] = scatter(g, dim_attr(c), index, Scalar(0.0));
  if (c.in.size() > 2 && c.needs[2]) r[2] = pad_to(gather(g, dim_attr(c), index), in_shape(c, 2));
  return r;
}
DerivativeByName d_scatter{"scatter", scatter_grad, 0b010, 0};
DerivativeByName d_scatter_value{"scatter.value", scatter_grad, 0b010, 0};

TensorList scatter_add_grad(G c, GL go) {
  const Tensor& g = go[0];
  TensorList r(3);
  r[0] = g;
  if (c.needs[2]) r[2] = pad_to(gather(g, dim_attr(c), c.in[1]), in_shape(c, 2));
  return r;
}
DerivativeByName d_scatter_add{"scatter_add", scatter_add_grad, 0b010, 0};

// scatter_reduce(x, dim, index, src, reduce, include_self); attrs {dim, reduce, include_self}
TensorList scatter_reduce_grad(G c, GL go) {
  const Tensor& g = go[0];
  const Tensor &x = c.in[0], &index = c.in[1], &y = c.out[0];
  const Tensor src = src_part(c.in[2], index);
  const int64_t dim = dim_attr(c);
  const std::string& reduce = attr<std::string>(c.attrs, 1);
  const bool include_self = attr<bool>(c.attrs, 2);
  const Dtype dt = g.dtype();
  KILN_CHECK(!is_complex(dt), Runtime, "scatter_reduce",
             "scatter_reduce does not support automatic differentiation for outputs with complex dtype.");
  Tensor gx, gs;
  if (reduce == "sum") {
    gx = g;
    gs = gather(g, dim, index);
  } else if (reduce == "mean") {
    // n: how many values were averaged into each output element (1 where nothing was)
    Tensor n = include_self ? ones(g.sizes(), dt) : zeros(g.sizes(), dt);
    n = scatter_add(n, dim, index, ones(src.sizes(), dt));
    n = where(eq(n, Scalar(0)), ones({}, dt), n);
    gx = div(g, n);
    gs = div(gather(g, dim, index), gather(n, dim, index));
  } else if (reduce == "amax" || reduce == "amin") {
    // shared evenly among the values equal to the result
    Tensor value = gather(y, dim, index);
    Tensor self_hit = eq(x, y), src_hit = eq(src, value);
    Tensor n = scatter_add(to_dtype(self_hit, dt), dim, index, to_dtype(src_hit, dt));
    Tensor share = div(g, n);
    gx = mul(share, self_hit);
    gs = mul(gather(share, dim, index), src_hit);
  } else if (reduce == "prod") {
    // products of the other factors, without dividing by a zero factor
    Tensor one = ones({}, dt);
    Tensor x1 = where(eq(x, Scalar(0)), one, x);
    gx = div(mul(g, scatter_reduce(x1, dim, index, src, "prod", include_self)), x1);
    Tensor src_zero = eq(src, Scalar(0));
    Tensor zeros_here =
        gather(scatter_add(zeros(x.sizes(), dt), dim, index, to_dtype(src_zero, dt)), dim, index);
    Tensor lone_zero = logical_and(src_zero, eq(zeros_here, Scalar(1)));
    Tensor src1 = where(lone_zero, one, src);
    Tensor without = scatter_reduce(x, dim, index, src1, "prod", include_self);
    gs = where(lone_zero, gather(mul(g, without), dim, index),
               div(gather(mul(g, y), dim, index), where(src_zero, one, src)));
  } else {
    KILN_FAIL(Runtime, "scatter_reduce",
              "reduce argument must be either sum, prod, mean, amax or amin, got ", reduce);
  }
  if (!include_self) gx = scatter(gx, dim, index, Scalar(0.0));
  return {gx, Tensor(), pad_to(gs, in_shape(c, 2))};
}
DerivativeByName d_scatter_reduce{"scatter_reduce", scatter_reduce_grad, 0b111, 1};

// ---- index_add / index_copy / index_fill --------------------------------------------------------
// index_add(x, dim, index, source, alpha); attrs {dim, alpha}
TensorList index_add_grad(G c, GL go) {
  const Tensor& g = go[0];
  TensorList r(3);
  r[0] = g;
  if (c.needs[2]) {
    const Scalar alpha = attr_scalar(c.attrs[1]);  // torch does not conjugate a complex alpha here
    Tensor s = reshape(index_select(g, dim_attr(c), c.in[1]), in_raw(c, 2));
    bool unit = !alpha.is_complex() && alpha.to_double() == 1.0;
    r[2] = unit ? s : mul(s, alpha);
  }
  return r;
}
DerivativeByName d_index_add{"index_add", index_add_grad, 0b010, 0};

TensorList index_copy_grad(G c, GL go) {
  const Tensor& g = go[0];
  TensorList r(3);
  if (c.needs[0]) r[0] = index_fill(g, dim_attr(c), c.in[1], Scalar(0.0));
  if (c.needs[2]) r[2] = reshape(index_select(g, dim_attr(c), c.in[1]), in_raw(c, 2));
  return r;
}
DerivativeByName d_index_copy{"index_copy", index_copy_grad, 0b010, 0};

TensorList index_fill_grad(G c, GL go) {
  return {index_fill(go[0], dim_attr(c), c.in[1], Scalar(0.0)), Tensor()};
}
DerivativeByName d_index_fill{"index_fill", index_fill_grad, 0b10, 0};

// ---- masked_scatter -----------------------------------------------------------------------------
// inputs {x, mask, source}: source's leading elements fill the masked positions in order, so the
// gradient of the k-th masked position (k from 1: the running count of the mask there) goes to source
// element k - 1. Every gradient adds into slot k of a buffer one longer than the source, the unmasked
// ones into slot 0, which is cut off. No size depends on the mask's data: a trace stays symbolic.
TensorList masked_scatter_grad(G c, GL go) {
  const Tensor& g = go[0];
  const Tensor& mask = c.in[1];
  TensorList r(3);
  if (c.needs[0]) r[0] = where(mask, zero_of(g), g);
  if (c.needs[2]) {
    const SymShape& ss = c.in_specs[2].sizes();
    const SymInt ns = sym_numel(ss), n = g.sym_numel();
    Tensor m = reshape_symint(expand_symint(mask, g.sym_sizes()), {n});
    Tensor slot = mul(cumsum(m, 0, kInt64), m);
    Tensor acc = index_add(zeros_symint({ns + 1}, like(g)), 0, slot, reshape_symint(g, {n}));
    r[2] = reshape_symint(narrow_symint(acc, 0, 1, ns), ss);
  }
  return r;
}
DerivativeByName d_masked_scatter{"masked_scatter", masked_scatter_grad, 0b010, 0};

// ---- take / put / take_along_dim ----------------------------------------------------------------
TensorList take_grad(G c, GL go) {
  const Tensor& g = go[0];
  const SymShape& s = c.in_specs[0].sizes();  // symbolic in a trace
  Tensor flat = zeros_symint({sym_numel(s)}, like(g));
  return {reshape_symint(put(flat, c.in[1], g, true), s), Tensor()};
}
DerivativeByName d_take{"take", take_grad, 0b10, 0};

// put(x, index, source, accumulate); attrs {accumulate}
TensorList put_grad(G c, GL go) {
  const Tensor& g = go[0];
  const Tensor& index = c.in[1];
  TensorList r(3);
  if (c.needs[0])
    r[0] = attr<bool>(c.attrs, 0) ? g : put(g, index, zeros(in_raw(c, 2), like(g)), false);
  if (c.needs[2]) r[2] = reshape(take(g, index), in_raw(c, 2));
  return r;
}
DerivativeByName d_put{"put", put_grad, 0b010, 0};

// inputs {x broadcast, index broadcast and wrapped}; attrs {dim}
TensorList take_along_dim_grad(G c, GL go) {
  const Tensor& g = go[0];
  return {scatter_add(zeros(in_raw(c), like(g)), dim_attr(c), c.in[1], g), Tensor()};
}
DerivativeByName d_take_along_dim{"take_along_dim", take_along_dim_grad, 0b10, 0};

}  // namespace
}  // namespace kiln
