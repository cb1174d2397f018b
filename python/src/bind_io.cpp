// Python binding: io.
#include "common.h"

namespace kiln::py {

void bind_io(nb::module_& m) {}

}  // namespace kiln::py
