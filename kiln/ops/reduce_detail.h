// What the reductions' metas (kiln/ops/reduce.cpp) and their CPU kernels (kiln/backend/cpu/reduce.cpp)
// share: the reduction codes and the dims an attribute list reduces.
#pragma once

#include <vector>

#include "kiln/ops/ops.h"

namespace kiln {
enum class ReduceOp : int { Sum, Prod, Max, Min, All, Any, SumAbs, SumSq, NanSum, Mean, Count };

// The reduction entries: X(torch_name, ReduceOp code).
#define KILN_REDUCE_OPS(X) \
  X(sum, Sum) X(prod, Prod) X(amax, Max) X(amin, Min) X(all, All) X(any, Any) X(norm_l1, SumAbs) \
  X(norm_l2sq, SumSq) X(nansum, NanSum) X(mean, Mean)
}  // namespace kiln

namespace kiln::reduce_detail {

template <class T>  // Tensor or TensorSpec: only the rank is read
std::vector<bool> dim_mask(const T& x, const OptDims& dims, const char* op) {
  int64_t n = x.dim();
  std::vector<bool> m(n, false);
  if (!dims || dims->empty()) {
    std::fill(m.begin(), m.end(), true);
    return m;
  }
  for (int64_t d : *dims) {
    int64_t w = wrap_dim(d, n, op);
    if (n == 0) continue;
    KILN_CHECK(!m[w], Runtime, op, "dim ", w, " appears multiple times in the list of dims");
    m[w] = true;
  }
  return m;
}

// attrs: {dims (Shape), all (bool), keepdim (bool)}; the input is already in the compute dtype.
template <class T>
std::vector<bool> mask_from_attrs(const T& x, const Attrs& a, const char* op) {
  bool all = std::get<bool>(a[1]);
  return dim_mask(x, all ? OptDims{} : OptDims{std::get<Shape>(a[0])}, op);
}

}  // namespace kiln::reduce_detail
