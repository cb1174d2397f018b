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

}  // namespace kiln
