// torch.use_deterministic_algorithms: a process-wide request that every op give bitwise-identical
// results from run to run and across thread counts (kernels whose parallel split changes the
// rounding order fix their split while it is on), and whether a nondeterministic op only warns.
#pragma once

namespace kiln {

void use_deterministic_algorithms(bool on, bool warn_only = false);
bool are_deterministic_algorithms_enabled();
bool is_deterministic_algorithms_warn_only_enabled();

}  // namespace kiln
