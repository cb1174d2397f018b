#include "kiln/optim/optimizer.h"

#include <algorithm>
#include <unordered_set>

#include "kiln/autograd/autograd.h"
#include "kiln/core/stream.h"
#include "kiln/dispatch/graph.h"
#include "kiln/ops/ops.h"

namespace kiln::optim {

// ---- ParamState
// ------------------------------------------------------------------------------------
const Tensor* ParamState::find(const std::string& key) const {
  for (const auto& [k, t] : items_)
    if (k == key) return &t;
  return nullptr;
}

Tensor ParamState::get(const std::string& key) const {
  const Tensor* t = find(key);
  return t ? *t : Tensor();
}

void ParamState::set(const std::string& key, Tensor t) {
  for (auto& [k, v] : items_) {
    if (k == key) {
      v = std::move(t);
      return;
    }
  }
  items_.emplace_back(key, std::move(t));
}

const TensorList* ParamState::find_list(const std::string& key) const {
  for (const auto& [k, l] : lists_)
    if (k == key) return &l;
  return nullptr;
}

void ParamState::set_list(const std::string& key, TensorList l) {
  for (auto& [k, v] : lists_) {
    if (k == key) {
      v = std::move(l);
      return;
    }
  }
  lists_.emplace_back(key, std::move(l));
}

// ---- Optimizer
// -------------------------------------------------------------------------------------
Optimizer::Optimizer(std::string name, Options defaults)
    : name_(std::move(name)), defaults_(std::move(defaults)) {}

void Optimizer::init_groups(std::vector<ParamGroup> groups) {
  KILN_CHECK(!groups.empty(), Value, name_.c_str(), "optimizer got an empty parameter list");
  for (ParamGroup& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  const char* op = name_.c_str();
  for (const Tensor& p : group.params) {
    KILN_CHECK(p.defined(), Type, op,
               "optimizer can only optimize Tensors, but one of the params is None");
    KILN_CHECK(is_leaf(p) || retains_grad(p), Value, op, "can't optimize a non-leaf Tensor");
  }
  for (const auto& [k, v] : defaults_.items()) group.options.setdefault(k, v);
  std::unordered_set<const TensorImpl*> seen;
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params) seen.insert(p.impl());
  for (const Tensor& p : group.params)
    KILN_CHECK(!seen.count(p.impl()), Value, op,
               "some parameters appear in more than one parameter group");
  groups_.push_back(std::move(group));
  group_added(groups_.back());
}

const ParamState* Optimizer::find_state(const Tensor& p) const {
  auto it = state_.find(p.impl());
  return it == state_.end() ? nullptr : &it->second;
}

Tensor Optimizer::step(const LossClosure& closure) {
  Tensor loss;
  if (closure) {
    EnableGradGuard enable;
    loss = closure();
  }
  NoGradGuard no_grad;
  // The updates read and write parameter memory from this thread (the step counters, the fused
  // loops): on a stream they run here, after all queued work (the gradients may come from any stream);
  // in a graph capture they are recorded as one host step, run again at each replay.
  std::weak_ptr<int> alive = alive_;
  graph_host_step([this, alive]() {
    KILN_CHECK(!alive.expired(), Runtime, "replay",
               "the optimiser whose step() this graph captured no longer exists");
    NoGradGuard no_grad;
    stream_detail::before_host_read();
    StreamGuard here{default_stream()};
    for (ParamGroup& g : groups_) step_group(g);
  });
  return loss;
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (ParamGroup& g : groups_) {
    for (const Tensor& p : g.params) {
      Tensor gr = grad(p);
      if (!gr.defined()) continue;
      if (set_to_none) {
        set_grad(p, Tensor());
      } else {
        if (requires_grad(gr)) detach_(gr);
        zero_(gr);
      }
    }
  }
}

StateDict Optimizer::state_dict() const {
  StateDict sd;
  std::unordered_map<const TensorImpl*, int64_t> index;
  int64_t start = 0;
  for (const ParamGroup& g : groups_) {
    StateDict::Group sg{g.options, {}};
    int64_t i = start;
    for (const Tensor& p : g.params) index.emplace(p.impl(), i++);
    for (const Tensor& p : g.params) sg.params.push_back(index.at(p.impl()));
    start += static_cast<int64_t>(g.params.size());
    sd.param_groups.push_back(std::move(sg));
  }
  for (const auto& [impl, st] : state_) {
    auto it = index.find(impl);
    if (it != index.end() && !st.empty()) sd.state[it->second] = st;
  }
  return sd;
}

void Optimizer::fix_loaded_group(Options&) const {}

void Optimizer::load_state_dict(const StateDict& sd) {
  const char* op = name_.c_str();
  KILN_CHECK(sd.param_groups.size() == groups_.size(), Value, op,
             "loaded state dict has a different number of parameter groups");
  for (size_t i = 0; i < groups_.size(); ++i)
    KILN_CHECK(sd.param_groups[i].params.size() == groups_[i].params.size(), Value, op,
               "loaded state dict contains a parameter group that doesn't match the size of "
               "optimizer's group");
  std::unordered_map<int64_t, Tensor> id_map;
  for (size_t i = 0; i < groups_.size(); ++i)
    for (size_t j = 0; j < groups_[i].params.size(); ++j)
      id_map.emplace(sd.param_groups[i].params[j], groups_[i].params[j]);

  // Copy the state first so a bad tensor leaves the optimiser unchanged.
  std::unordered_map<const TensorImpl*, ParamState> state;
  {
    NoGradGuard no_grad;
    for (const auto& [idx, saved] : sd.state) {
      auto it = id_map.find(idx);
      if (it == id_map.end()) continue;
      const Tensor& p = it->second;
      ParamState st;
      // torch's _process_value_according_to_param_policy: floating values take the parameter's dtype
      // ("step" excepted), lists element by element
      auto load = [&](const std::string& key, const Tensor& t) {
        if (!t.defined()) return t;
        bool cast = key != "step" && is_floating(p.dtype()) && is_floating(t.dtype());
        return contiguous(to_dtype(t, cast ? p.dtype() : t.dtype(), /*copy=*/true));
      };
      for (const auto& [key, t] : saved.items()) st.set(key, load(key, t));
      for (const auto& [key, l] : saved.lists()) {
        TensorList copied;
        for (const Tensor& t : l) copied.push_back(load(key, t));
        st.set_list(key, std::move(copied));
      }
      state[p.impl()] = std::move(st);
    }
  }
  for (size_t i = 0; i < groups_.size(); ++i) {
    Options o = sd.param_groups[i].options;
    o.erase("params");
    fix_loaded_group(o);
    groups_[i].options = std::move(o);
  }
  state_ = std::move(state);
}

std::string Optimizer::repr() const {
  std::string s = name_ + " (";
  for (size_t i = 0; i < groups_.size(); ++i) {
    s += "\nParameter Group " + std::to_string(i) + "\n";
    std::vector<std::pair<std::string, Value>> items = groups_[i].options.items();
    std::sort(items.begin(), items.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [k, v] : items)
      s += "    " + k + ": " + (v.kind() == Value::Kind::Str ? v.str_value() : v.repr()) + "\n";
  }
  return s + ")";
}

}  // namespace kiln::optim
