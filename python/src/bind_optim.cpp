// Python binding: optim.
#include "common.h"

namespace kiln::py {

void bind_optim(nb::module_& m) {}

}  // namespace kiln::py
