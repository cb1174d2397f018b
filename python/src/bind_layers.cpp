// Python binding: layers modules.
#include "common.h"

namespace kiln::py {

void bind_layers(nb::module_& m) {}

}  // namespace kiln::py
