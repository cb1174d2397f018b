// Helpers shared by the scheduler files (lr_scheduler.cpp, lr_scheduler_cyclic.cpp).
#pragma once

#include <vector>

#include "kiln/core/error.h"
#include "kiln/optim/value.h"

namespace kiln::optim::detail {

// One value per param group: a single value is repeated; otherwise the counts must match (torch's
// _format_param message).
inline std::vector<double> per_group(const char* op, const char* name, const std::vector<double>& v, size_t groups) {
  if (v.size() == 1 && groups != 1) return std::vector<double>(groups, v[0]);
  KILN_CHECK(v.size() == groups, Value, op, name, " must have the same length as optimizer.param_groups. ", name,
             " has ", v.size(), " values, param_groups has ", groups, ".");
  return v;
}

// A state-dict entry, or null.
inline const Value* get(const Value& d, const char* key) { return d.find(key); }

}  // namespace kiln::optim::detail
