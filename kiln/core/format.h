// Text of shapes for error messages, in torch's list form: [2, 3].
#pragma once

#include <string>

#include "kiln/core/tensor.h"

namespace kiln {

inline std::string shape_list(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// torch's repr of a size: torch.Size([2, 3]).
inline std::string torch_size(const Shape& s) { return "torch.Size(" + shape_list(s) + ")"; }

}  // namespace kiln
