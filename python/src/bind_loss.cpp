// Python binding: loss functions.
#include "common.h"

namespace kiln::py {

void bind_loss(nb::module_& m) {}

}  // namespace kiln::py
