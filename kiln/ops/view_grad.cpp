// Derivatives of the view ops (view.cpp) and of cat (creation.cpp).
#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

using G = const GradCtx&;
using GL = const TensorList&;

// The same bit for bit (symbolic in a trace, no guard), for a shape passed on and never computed with.
Shape in_raw(G c, size_t i = 0) { return c.in_specs[i].raw_sizes(); }
// One size computed with: a symbolic one is specialised (a guard); the other dims stay symbolic.
int64_t in_size(G c, int64_t d, size_t i = 0) {
  const SymInt s = c.in_specs[i].sizes()[d];
  return s.is_symbolic() ? s.guard_int(std::string("backward")) : s.raw();
}
// A size as a number: a symbolic one is specialised (a guard).
int64_t int_of(SymInt s) { return s.is_symbolic() ? s.guard_int(std::string("backward")) : s.raw(); }
// An int attribute that may carry a symbolic size (narrow's start/length in a trace), as a number.
int64_t int_of(const Attr& a) { return int_of(SymInt::from_raw(std::get<int64_t>(a))); }

// The gradient of a contiguous range [s, e) of dim d: zeros around g, as a (differentiable) pad.
Tensor pad_dim(const Tensor& g, int64_t d, int64_t before, int64_t after) {
  Shape p(2 * (g.dim() - d), 0);
  p[p.size() - 2] = before;
  p[p.size() - 1] = after;
  return pad(g, p, "constant", 0.0);
}

}  // namespace

// The gradient of diagonal(x, offset, d1, d2) (also used by diag): g placed on that diagonal of
// zeros shaped like x, built with diag_embed and a (cropping) pad so that it stays differentiable.
// In a trace the pads are differences of symbolic sizes, which simplify to numbers where the sizes'
// ranges decide which of the two is smaller (a square matrix, or sizes s and s + k): no guard then;
// otherwise the pads are specialised (a guard).
Tensor diagonal_backward(const Tensor& g, const SymShape& in_shape, int64_t offset, int64_t d1,
                         int64_t d2) {
  const SymInt n = g.dim() ? g.sym_size(-1) : SymInt(0);
  if (bool(n == 0) || bool(sym_numel(in_shape) == 0)) return zeros_symint(in_shape, like(g));
  const SymInt m = n + std::abs(offset);
  const int64_t nd = static_cast<int64_t>(in_shape.size());
  d1 = wrap_dim(d1, nd, "diagonal"), d2 = wrap_dim(d2, nd, "diagonal");
  Tensor e = diag_embed(g, offset, d1, d2);
  e = pad_dim(e, d1, 0, int_of(in_shape[d1] - m));
  return pad_dim(e, d2, 0, int_of(in_shape[d2] - m));
}

namespace {

TensorList reshape_grad(G c, GL go) { return {reshape(go[0], in_raw(c))}; }
DerivativeByName d_view{"view", reshape_grad, 0, 0};
DerivativeByName d_unsqueeze{"unsqueeze", reshape_grad, 0, 0};
DerivativeByName d_squeeze{"squeeze", reshape_grad, 0, 0};

TensorList expand_grad(G, GL go) { return {go[0]}; }  // the engine sums to the input's shape
DerivativeByName d_expand{"expand", expand_grad, 0, 0};

TensorList permute_grad(G c, GL go) {
  const Shape& p = attr<Shape>(c.attrs, 0);
  Shape inv(p.size());
  const int64_t n = static_cast<int64_t>(p.size());
  for (int64_t i = 0; i < n; ++i) inv[wrap_dim(p[i], n, "permute")] = i;
  return {permute(go[0], inv)};
}
DerivativeByName d_permute{"permute", permute_grad, 0, 0};

TensorList slice_grad(G c, GL go) {
  int64_t d = attr<int64_t>(c.attrs, 0), s = int_of(c.attrs[1]);
  int64_t e = int_of(c.attrs[2]), step = attr<int64_t>(c.attrs, 3);
  int64_t n = in_size(c, d);
  if (step == 1) return {pad_dim(go[0], d, s, n - std::max(e, s))};
  Tensor idx =
      arange(Scalar(s), Scalar(s + step * go[0].size(d)), Scalar(step), like(go[0], kInt64));
  return {index_add(zeros(in_raw(c), like(go[0])), d, idx, go[0])};
}
DerivativeByName d_slice{"slice", slice_grad, 0, 0};

TensorList select_grad(G c, GL go) {
  int64_t d = attr<int64_t>(c.attrs, 0), i = int_of(c.attrs[1]);
  int64_t n = in_size(c, d);
  return {pad_dim(unsqueeze(go[0], d), d, i, n - i - 1)};
}
DerivativeByName d_select{"select", select_grad, 0, 0};

TensorList view_as_real_grad(G, GL go) { return {view_as_complex(contiguous(go[0]))}; }
DerivativeByName d_view_as_real{"view_as_real", view_as_real_grad, 0, 0};
TensorList view_as_complex_grad(G, GL go) { return {view_as_real(go[0])}; }
DerivativeByName d_view_as_complex{"view_as_complex", view_as_complex_grad, 0, 0};

// as_strided: the gradient is scattered into a buffer laid out like the shared storage (overlapping
// output elements accumulate), then read back through the input's geometry; where the input's own
// elements overlap, each storage element's gradient is shared evenly among them (as torch does).
// The input is saved for its strides and offset only.
Tensor storage_positions(const Shape& sizes, const Shape& strides, int64_t offset) {
  Tensor p = make_tensor(sizes, kInt64);
  int64_t* out = static_cast<int64_t*>(p.data_ptr());
  const int64_t n = shape_numel(sizes), nd = static_cast<int64_t>(sizes.size());
  Shape pos(nd, 0);
  int64_t cur = offset;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = cur;
    for (int64_t d = nd - 1; d >= 0; --d) {
      cur += strides[d];
      if (++pos[d] < sizes[d]) break;
      cur -= strides[d] * sizes[d];
      pos[d] = 0;
    }
  }
  return p;
}

TensorList as_strided_grad(G c, GL go) {
  const Tensor& x = c.in[0];
  const Tensor& g = go[0];
  if (x.numel() == 0) return {zeros(x.sizes(), like(g))};
  Tensor in_pos = storage_positions(x.sizes(), x.strides(), x.storage_offset());
  Tensor out_pos = storage_positions(attr<Shape>(c.attrs, 0), attr<Shape>(c.attrs, 1),
                                     attr<int64_t>(c.attrs, 2));
  const int64_t* ip = static_cast<const int64_t*>(in_pos.data_ptr());
  const int64_t* op = static_cast<const int64_t*>(out_pos.data_ptr());
  int64_t lo = ip[0], hi = ip[0];
  for (int64_t i = 0; i < in_pos.numel(); ++i) lo = std::min(lo, ip[i]), hi = std::max(hi, ip[i]);
  for (int64_t i = 0; i < out_pos.numel(); ++i) lo = std::min(lo, op[i]), hi = std::max(hi, op[i]);
  const int64_t n = hi - lo + 1;
  Tensor in_flat = contiguous(reshape(sub(in_pos, Scalar(lo)), {-1}));
  Tensor buf = zeros({n}, like(g));
  if (g.numel() > 0)
    buf = index_add(buf, 0, reshape(sub(out_pos, Scalar(lo)), {-1}), reshape(g, {-1}));
  std::vector<int64_t> count(static_cast<size_t>(n), 0);
  bool overlap = false;
  const int64_t* fp = static_cast<const int64_t*>(in_flat.data_ptr());
  for (int64_t i = 0; i < in_flat.numel(); ++i) overlap |= ++count[fp[i]] > 1;
  Tensor r = index_select(buf, 0, in_flat);
  if (overlap) {
    Tensor cnt = make_tensor({in_flat.numel()}, kInt64);
    int64_t* cp = static_cast<int64_t*>(cnt.data_ptr());
    for (int64_t i = 0; i < in_flat.numel(); ++i) cp[i] = count[fp[i]];
    r = div(r, cnt);
  }
  return {reshape(r, x.sizes())};
}
DerivativeByName d_as_strided{"as_strided", as_strided_grad, 1, 0};

TensorList diagonal_grad(G c, GL go) {
  const Attrs& a = c.attrs;
  return {diagonal_backward(go[0], c.in_specs[0].sizes(), attr<int64_t>(a, 0), attr<int64_t>(a, 1),
                            attr<int64_t>(a, 2))};
}
DerivativeByName d_diagonal{"diagonal", diagonal_grad, 0, 0};

// unfold(d, size, step): window i, element j is x[i * step + j] along d; the windows' gradients are
// added back at those positions.
TensorList unfold_grad(G c, GL go) {
  const Tensor& g = go[0];
  const SymShape& s = c.in_specs[0].sizes();
  if (s.empty()) return {reshape(sum(g), {})};
  const Attrs& a = c.attrs;
  int64_t d = wrap_dim(attr<int64_t>(a, 0), static_cast<int64_t>(s.size()), "unfold");
  int64_t size = attr<int64_t>(a, 1), step = attr<int64_t>(a, 2);
  const SymInt windows = g.sym_size(d);  // symbolic in a trace
  Tensor start = unsqueeze(mul(arange_symint(windows, like(g, kInt64)), Scalar(step)), 1);
  Tensor idx = add(start, unsqueeze(arange(Scalar(size), like(g, kInt64)), 0));
  idx = reshape_symint(idx, {idx.sym_numel()});
  Tensor gm = movedim(g, {-1}, {d + 1});
  SymShape ms = gm.sym_sizes();
  ms[d] = ms[d] * ms[d + 1];
  ms.erase(ms.begin() + d + 1);
  return {index_add(zeros_symint(s, like(g)), d, idx, reshape_symint(gm, ms))};
}
DerivativeByName d_unfold{"unfold", unfold_grad, 0, 0};

// view(dtype) is not differentiable in torch (its output never requires grad); here the output is
// treated as a constant: no gradient flows back through it.
TensorList view_dtype_grad(G, GL) { return {Tensor()}; }
DerivativeByName d_view_dtype{"view_dtype", view_dtype_grad, 0, 0};

TensorList cat_grad(G c, GL go) {
  const Tensor& g = go[0];
  TensorList r(c.in_specs.size());
  int64_t nd = g.dim();
  int64_t d = attr<int64_t>(c.attrs, 0);
  SymInt off = 0;  // symbolic in a trace: the pieces' lengths are the inputs' sizes
  for (size_t i = 0; i < c.in_specs.size(); ++i) {
    const SymShape& s = c.in_specs[i].sizes();
    if (s.size() == 1 && s[0].raw() == 0 && nd != 1) {  // legacy empty inputs are skipped by cat
      if (c.needs[i]) r[i] = zeros({0}, like(g));
      continue;
    }
    int64_t dd = wrap_dim(d, nd, "cat");
    const SymInt len = s[dd];
    if (c.needs[i]) r[i] = narrow_symint(g, dd, off, len);
    off += len;
  }
  return r;
}
DerivativeByName d_cat{"cat", cat_grad, 0, 0};

}  // namespace
}  // namespace kiln
