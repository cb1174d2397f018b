// polygamma(n, x) for n >= 1: the derivatives of digamma. A small table op so that digamma's and
// lgamma's derivatives are themselves differentiable (polygamma(n)' = polygamma(n + 1)). The kernel
// (and the mathematics) are in kiln/backend/cpu/polygamma.cpp.
#include "kiln/ops/grad_util.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

SpecList polygamma_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  int64_t n = attr<int64_t>(a, 0);
  KILN_CHECK(n >= 1, Runtime, op.name,
             "polygamma(n, x) does not support negative n (the op table entry "
             "takes n >= 1; n = 0 is digamma).");
  Dtype d = x.dtype();
  KILN_CHECK(!is_complex(d), NotImplemented, op.name, "\"polygamma\" not implemented for '", dtype_name(d),
             "'");
  if (!is_floating(d)) d = default_dtype();
  return {{x.sizes(), d}};
}

OpDef op_polygamma{"polygamma", kPointwise, polygamma_meta, {}};  // kernel: backend/cpu/polygamma.cpp
OpRegistrar reg_polygamma{op_polygamma, "polygamma(Tensor self, int n) -> Tensor"};

TensorList polygamma_grad(const GradCtx& c, const TensorList& go) {
  return {mul(go[0], polygamma(attr<int64_t>(c.attrs, 0) + 1, c.in[0]))};
}
DerivativeRegistrar d_polygamma{op_polygamma, polygamma_grad, 1, 0};

}  // namespace

Tensor polygamma(int64_t n, const Tensor& x) {
  if (n == 0) return digamma(x);
  return dispatch1(op_polygamma, {x}, {n});
}

}  // namespace kiln
