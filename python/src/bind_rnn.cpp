// Python binding: rnn modules.
#include "common.h"

namespace kiln::py {

void bind_rnn(nb::module_& m) {}

}  // namespace kiln::py
