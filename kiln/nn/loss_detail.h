// Internals shared by the loss files (loss.cpp, loss_nll.cpp, loss_ctc.cpp).
#pragma once

#include <string>

#include "kiln/ops/ops.h"

namespace kiln::loss_detail {

// torch's Reduction enum values (they travel as table-op attributes).
enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

// "none" / "mean" / "sum" (and torch's deprecated "elementwise_mean"); ValueError otherwise.
int64_t reduction_enum(const std::string& reduction);
// mean / sum over every element, or the loss itself for kNone.
Tensor apply_reduction(const Tensor& loss, int64_t reduction);
// "[3, 4]", as torch prints sizes in messages.
std::string shape_str(const Shape& s);
std::string shape_str(const SymShape& s);  // "[batch, 5]"

}  // namespace kiln::loss_detail
