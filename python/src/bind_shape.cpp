// Shape and scatter-style ops (kiln/ops/shape.cpp, kiln/ops/scatter.cpp).
#include "common.h"

namespace kiln::py {
void bind_shape(nb::module_&, nb::class_<Tensor>&) {}
}  // namespace kiln::py
