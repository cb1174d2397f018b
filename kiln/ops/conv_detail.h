// What the convolution ops (kiln/ops/conv.cpp) and their CPU kernels (kiln/backend/cpu/conv.cpp)
// share: the attributes of `convolution`, read by name.
#pragma once

#include "kiln/ops/nn_detail.h"
#include "kiln/ops/nn_ops.h"

namespace kiln::conv_detail {

// convolution's attrs: {stride, padding, dilation, transposed, output_padding, groups}
struct ConvArgs {
  Shape stride, padding, dilation, output_padding;
  bool transposed;
  int64_t groups;
};
inline ConvArgs conv_args(const Attrs& a) {
  return {attr<Shape>(a, 0), attr<Shape>(a, 1), attr<Shape>(a, 2),
          attr<Shape>(a, 4), attr<bool>(a, 3),  attr<int64_t>(a, 5)};
}

}  // namespace kiln::conv_detail
