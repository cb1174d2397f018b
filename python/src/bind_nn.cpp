// Python binding: nn.
#include "common.h"

namespace kiln::py {

void bind_nn(nb::module_& m) {}

}  // namespace kiln::py
