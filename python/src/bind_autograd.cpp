// Python binding: autograd.
#include "common.h"

namespace kiln::py {

void bind_autograd(nb::module_& m, nb::class_<Tensor>& cls) {}

}  // namespace kiln::py
