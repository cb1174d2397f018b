// Shared by bind_optim.cpp and bind_lr_scheduler.cpp: Python <-> kiln::optim::Value conversion.
#pragma once

#include "common.h"
#include "kiln/optim/optim.h"

namespace kiln::py {

// None/bool/int/float/str/tuple/list/dict (a 1-element Tensor becomes its float) -> Value.
optim::Value to_value(nb::handle h, const char* what = "value");
optim::Value options_dict_value(const optim::Options& o);  // an Options map as a dict Value
nb::object to_py(const optim::Value& v);

void bind_lr_scheduler(nb::module_& optim_module);

}  // namespace kiln::py
