// Ops whose outputs never require grad, whatever their inputs (torch's non-differentiable functions,
// e.g. special.airy_ai and the orthogonal polynomials): a bit of OpDef::tags above op.h's OpTag
// values, set by the op file and read by autograd's dispatch layer.
#pragma once

#include <cstdint>

namespace kiln {
inline constexpr uint32_t kNonDifferentiable = 1u << 30;
}  // namespace kiln
