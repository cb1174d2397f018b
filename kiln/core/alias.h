// Whether two tensors are the same view of one storage: an alias made outside the ops (detach(), a
// Parameter around a traced value), which the tracers (export, vmap) map to the value it aliases.
#pragma once

#include "kiln/core/tensor.h"

namespace kiln {

inline bool same_view(const Tensor& a, const Tensor& b) {
  return a.storage() == b.storage() && a.dtype() == b.dtype() && a.sym_sizes() == b.sym_sizes() &&
         a.sym_strides() == b.sym_strides() && a.storage_offset() == b.storage_offset();
}

}  // namespace kiln
