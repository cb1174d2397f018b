// Derivatives of the view ops (view.cpp) and of cat (creation.cpp).
#include <numeric>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

using G = const GradCtx&;
using GL = const TensorList&;

const Shape& in_shape(G c, size_t i = 0) { return c.in_specs[i].sizes; }

// The gradient of a contiguous range [s, e) of dim d: zeros around g, as a (differentiable) pad.
Tensor pad_dim(const Tensor& g, int64_t d, int64_t before, int64_t after) {
  Shape p(2 * (g.dim() - d), 0);
  p[p.size() - 2] = before;
  p[p.size() - 1] = after;
  return pad(g, p, "constant", 0.0);
}

TensorList reshape_grad(G c, GL go) { return {reshape(go[0], in_shape(c))}; }
DerivativeByName d_view{"view", reshape_grad, 0, 0};
DerivativeByName d_unsqueeze{"unsqueeze", reshape_grad, 0, 0};
DerivativeByName d_squeeze{"squeeze", reshape_grad, 0, 0};

TensorList expand_grad(G, GL go) { return {go[0]}; }  // the engine sums to the input's shape
DerivativeByName d_expand{"expand", expand_grad, 0, 0};

TensorList permute_grad(G c, GL go) {
  const Shape& p = attr<Shape>(c.attrs, 0);
  Shape inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[wrap_dim(p[i], static_cast<int64_t>(p.size()), "permute")] = static_cast<int64_t>(i);
  return {permute(go[0], inv)};
}
DerivativeByName d_permute{"permute", permute_grad, 0, 0};

TensorList slice_grad(G c, GL go) {
  int64_t d = attr<int64_t>(c.attrs, 0), s = attr<int64_t>(c.attrs, 1), e = attr<int64_t>(c.attrs, 2),
          step = attr<int64_t>(c.attrs, 3);
  int64_t n = in_shape(c)[d];
  if (step == 1) return {pad_dim(go[0], d, s, n - std::max(e, s))};
  Tensor idx = arange(Scalar(s), Scalar(s + step * go[0].sizes()[d]), Scalar(step), TensorOptions(kInt64));
  return {index_add(zeros(in_shape(c), go[0].dtype()), d, idx, go[0])};
}
DerivativeByName d_slice{"slice", slice_grad, 0, 0};

TensorList select_grad(G c, GL go) {
  int64_t d = attr<int64_t>(c.attrs, 0), i = attr<int64_t>(c.attrs, 1);
  int64_t n = in_shape(c)[d];
  return {pad_dim(unsqueeze(go[0], d), d, i, n - i - 1)};
}
DerivativeByName d_select{"select", select_grad, 0, 0};

TensorList view_as_real_grad(G, GL go) { return {view_as_complex(contiguous(go[0]))}; }
DerivativeByName d_view_as_real{"view_as_real", view_as_real_grad, 0, 0};
TensorList view_as_complex_grad(G, GL go) { return {view_as_real(go[0])}; }
DerivativeByName d_view_as_complex{"view_as_complex", view_as_complex_grad, 0, 0};

TensorList cat_grad(G c, GL go) {
  const Tensor& g = go[0];
  TensorList r(c.in_specs.size());
  int64_t nd = g.dim();
  int64_t d = attr<int64_t>(c.attrs, 0);
  int64_t off = 0;
  for (size_t i = 0; i < c.in_specs.size(); ++i) {
    const Shape& s = c.in_specs[i].sizes;
    if (s.size() == 1 && s[0] == 0 && nd != 1) continue;  // legacy empty inputs are skipped by cat
    int64_t dd = wrap_dim(d, nd, "cat");
    int64_t len = s[dd];
    if (c.needs[i]) r[i] = narrow(g, dd, off, len);
    off += len;
  }
  return r;
}
DerivativeByName d_cat{"cat", cat_grad, 0, 0};

}  // namespace
}  // namespace kiln
