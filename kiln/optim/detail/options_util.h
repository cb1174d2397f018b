// Option handling shared by the optimisers' files (optimizers.cpp, lbfgs.cpp).
#pragma once

#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim::detail {

// Fills `base` (torch's defaults, in torch's order) with the given values; unknown names raise TypeError.
Options merge(const char* op, Options base, const Options& given);
// torch: `if not 0.0 <= x: raise ValueError(f"Invalid {what}: {x}")` (NaN fails too).
void check_nonneg(const char* op, const Options& o, const char* key, const char* what);
// fused / foreach / differentiable combinations torch refuses.
void check_flags(const char* op, const Options& o);
// One group of the given parameters (none when empty).
std::vector<ParamGroup> single_group(const TensorList& params);

}  // namespace kiln::optim::detail
