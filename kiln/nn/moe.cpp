#include "kiln/nn/moe.h"

#include <cmath>

#include "kiln/nn/init.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/sort.h"

namespace kiln::nn {

MixtureOfExperts::MixtureOfExperts(int64_t dim_, int64_t hidden_, int64_t experts, int64_t k, Dtype dtype)
    : Module("MixtureOfExperts"), dim(dim_), hidden(hidden_), num_experts(experts), top_k(k) {
  KILN_CHECK(experts > 0 && k > 0 && k <= experts, Value, "MixtureOfExperts", "top_k must be in [1, num_experts], got ",
             k, " with ", experts, " experts");
  TensorOptions o(dtype == Dtype::Undefined ? default_dtype() : dtype);
  register_parameter("router", empty({experts, dim_}, o));
  register_parameter("w1", empty({experts, dim_, hidden_}, o));
  register_parameter("w2", empty({experts, hidden_, dim_}, o));
  reset_parameters();
}

void MixtureOfExperts::reset_parameters() {  // as nn.Linear's weights of the same fan-in
  const double b1 = dim > 0 ? 1.0 / std::sqrt(static_cast<double>(dim)) : 0.0;
  const double b2 = hidden > 0 ? 1.0 / std::sqrt(static_cast<double>(hidden)) : 0.0;
  init::uniform_(param("router"), -b1, b1);
  init::uniform_(param("w1"), -b1, b1);
  init::uniform_(param("w2"), -b2, b2);
}

Tensor MixtureOfExperts::forward(const Tensor& x) {
  KILN_CHECK(x.dim() >= 1 && x.sizes().back() == dim, Runtime, "MixtureOfExperts", "expected input with last "
             "dimension ", dim, ", got ", x.sizes());
  const Shape shape = x.sizes();
  const Tensor tokens = reshape(x, {-1, dim});  // (T, dim)
  const int64_t T = tokens.sizes()[0];
  // router: top k experts per token, weights renormalised over them
  const Tensor probs = softmax(matmul(tokens, t(param("router"))), -1);  // (T, E)
  auto [top_w, top_e] = topk(probs, top_k, -1);                           // (T, k)
  top_w = div(top_w, sum(top_w, Shape{-1}, true));
  // tokens sorted by expert: (T k) rows, expert e's rows between offs[e - 1] and offs[e]
  const Tensor flat_e = reshape(top_e, {-1});
  const Tensor order = argsort(flat_e, 0, false, true);
  const Tensor token = div(order, full({}, top_k, TensorOptions(kInt64)), "floor");
  const Tensor offs = to_dtype(cumsum(bincount(flat_e, Tensor(), num_experts), 0), kInt32);
  Tensor h = _grouped_mm(index_select(tokens, 0, token), param("w1"), offs);  // (T k, hidden)
  Tensor y = _grouped_mm(silu(h), param("w2"), offs);                          // (T k, dim)
  y = mul(y, unsqueeze(index_select(reshape(top_w, {-1}), 0, order), -1));
  Tensor out = index_add(zeros({T, dim}, TensorOptions(y.dtype())), 0, token, y);
  return reshape(out, shape);
}

std::string MixtureOfExperts::extra_repr() const {
  return "dim=" + std::to_string(dim) + ", hidden=" + std::to_string(hidden) + ", num_experts=" +
         std::to_string(num_experts) + ", top_k=" + std::to_string(top_k);
}

}  // namespace kiln::nn
