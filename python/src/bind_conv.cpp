// Python binding: conv.
#include "common.h"

namespace kiln::py {

void bind_conv(nb::module_& m) {}

}  // namespace kiln::py
