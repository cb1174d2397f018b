// Sorting, selection and searching ops (kiln/ops/sort.cpp).
#include "common.h"

namespace kiln::py {
void bind_sort(nb::module_&, nb::class_<Tensor>&) {}
}  // namespace kiln::py
