#include "kiln/nn/utils.h"

#include <cmath>

#include "kiln/autograd/autograd.h"

namespace kiln::nn::utils {

Tensor clip_grad_norm_(const TensorList& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  NoGradGuard ng;
  TensorList grads;
  for (const Tensor& p : params)
    if (Tensor g = grad(p); g.defined()) grads.push_back(g);
  if (grads.empty()) return zeros({});
  TensorList norms;
  for (const Tensor& g : grads) norms.push_back(vector_norm(g, norm_type));
  Tensor total = norms.size() == 1 ? norms[0] : vector_norm(stack(norms), norm_type);
  if (error_if_nonfinite) {
    double v = total.item<double>();
    KILN_CHECK(std::isfinite(v), Runtime, "clip_grad_norm_", "The total norm of order ", norm_type,
               " for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error "
               "and scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`");
  }
  Tensor coef = clamp(true_divide(full({}, max_norm, TensorOptions(total.dtype())), add(total, Scalar(1e-6))),
                      std::nullopt, Scalar(1.0));
  for (const Tensor& g : grads) mul_(g, to_dtype(coef, g.dtype()));
  return total;
}

void clip_grad_value_(const TensorList& params, double v) {
  NoGradGuard ng;
  for (const Tensor& p : params)
    if (Tensor g = grad(p); g.defined()) clamp_(g, Scalar(-v), Scalar(v));
}

Tensor parameters_to_vector(const TensorList& params) {
  TensorList flat;
  for (const Tensor& p : params) flat.push_back(reshape(p, {-1}));
  return cat(flat, 0);
}

void vector_to_parameters(const Tensor& vec, const TensorList& params) {
  NoGradGuard ng;
  int64_t off = 0;
  for (const Tensor& p : params) {
    int64_t n = p.numel();
    KILN_CHECK(off + n <= vec.numel(), Runtime, "vector_to_parameters", "vector has ", vec.numel(),
               " elements, parameters need more");
    copy_(p, reshape(narrow(vec, 0, off, n), p.sizes()));
    off += n;
  }
}

}  // namespace kiln::nn::utils
