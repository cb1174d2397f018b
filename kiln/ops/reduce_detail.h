// What the reductions' metas (kiln/ops/reduce.cpp) and their CPU kernels (kiln/backend/cpu/reduce.cpp)
// share: the reduction codes and the dims an attribute list reduces.
#pragma once

#include <vector>

#include "kiln/ops/ops.h"

namespace kiln {
enum class ReduceOp : int { Sum, Prod, Max, Min, All, Any, SumAbs, SumSq, NanSum, Mean, Count };

// The reduction entries: X(torch_name, ReduceOp code).
#define KILN_REDUCE_OPS(X) \
  X(prod, Prod) X(amax, Max) X(amin, Min) X(norm_l1, SumAbs) X(norm_l2sq, SumSq)
// the three with torch's `dtype=` (the input is converted to it, or to the default accumulation
// dtype, inside the op): X(name, code, torch's schema name, extra tags)
#define KILN_REDUCE_DTYPE_OPS(X) \
  X(sum, Sum, "sum.dim_IntList", kDtypeFromOut) X(nansum, NanSum, "nansum", kDtypeFromOut) X(mean, Mean, "mean.dim", kDtypeFromOut)
// the two whose dim is optional (all.dims, any.dims)
#define KILN_REDUCE_OPT_OPS(X) X(all, All) X(any, Any)
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

// attrs: {dim (int list, or None), keepdim (bool)[, dtype]} as torch's schemas have them. Every dim is reduced for None, and for an empty list except by all/any
// (torch's all.dims / any.dims reduce nothing for dim=()).
inline bool reduces_all(const OpDef& op, const Attrs& a) {
  if (std::holds_alternative<std::monostate>(a[0])) return true;
  const auto r = static_cast<ReduceOp>(op.code);
  return std::get<Shape>(a[0]).empty() && r != ReduceOp::All && r != ReduceOp::Any;
}
template <class T>
std::vector<bool> mask_from_attrs(const OpDef& op, const T& x, const Attrs& a) {
  if (reduces_all(op, a)) return dim_mask(x, OptDims{}, op.name);
  const Shape& dims = std::get<Shape>(a[0]);
  if (dims.empty()) return std::vector<bool>(x.dim(), false);  // all/any over dim=(): nothing reduced
  return dim_mask(x, OptDims{dims}, op.name);
}

}  // namespace kiln::reduce_detail
