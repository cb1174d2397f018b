// Python binding: attention.
#include "common.h"

namespace kiln::py {

void bind_attention(nb::module_& m) {}

}  // namespace kiln::py
