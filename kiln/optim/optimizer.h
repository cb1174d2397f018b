// kiln::optim::Optimizer: param groups, per-parameter state, zero_grad/step, and state dicts in
// torch's layout. The concrete optimisers (SGD, Adam, AdamW, RMSprop, Adagrad) are in
// optimizers.h; Python's kiln.optim binds these classes directly (DESIGN.md §8).
//
//   kiln::optim::AdamW opt(model_params, kiln::optim::AdamWOptions(1e-3).weight_decay(0.1));
//   opt.zero_grad(); loss.backward(); opt.step();
//   opt.param_groups()[0].set_lr(1e-4);
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/core/tensor.h"
#include "kiln/dispatch/op.h"
#include "kiln/optim/value.h"

namespace kiln::optim {

// Parameters with shared options (torch's param group dict: "params" plus the options).
struct ParamGroup {
  TensorList params;
  Options options;

  ParamGroup() = default;
  ParamGroup(TensorList p, Options o = {}) : params(std::move(p)), options(std::move(o)) {}
  double lr() const { return options.get_double("lr"); }
  void set_lr(double lr) { options.set("lr", lr); }
};

// One parameter's state ("step", "exp_avg", ...) in insertion order.
class ParamState {
 public:
  bool empty() const { return items_.empty() && lists_.empty(); }
  size_t size() const { return items_.size() + lists_.size(); }
  bool contains(const std::string& key) const { return find(key) != nullptr || find_list(key) != nullptr; }
  const Tensor* find(const std::string& key) const;
  Tensor get(const std::string& key) const;  // undefined when missing
  void set(const std::string& key, Tensor t);
  // List values (torch's LBFGS keeps its history as lists of tensors; an undefined one is None).
  const TensorList* find_list(const std::string& key) const;
  void set_list(const std::string& key, TensorList l);
  void clear() { items_.clear(), lists_.clear(); }
  const std::vector<std::pair<std::string, Tensor>>& items() const { return items_; }
  const std::vector<std::pair<std::string, TensorList>>& lists() const { return lists_; }

 private:
  std::vector<std::pair<std::string, Tensor>> items_;
  std::vector<std::pair<std::string, TensorList>> lists_;
};

// torch's optimizer state dict: parameters are numbered across groups in order.
struct StateDict {
  struct Group {
    Options options;              // every group key except "params"
    std::vector<int64_t> params;  // parameter indices
  };
  std::map<int64_t, ParamState> state;
  std::vector<Group> param_groups;
};

using LossClosure = std::function<Tensor()>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // The class name as torch prints it ("AdamW").
  const std::string& name() const { return name_; }

  // One optimisation step over every parameter that has a gradient (parameters whose grad is
  // undefined are skipped), under no-grad. `closure` (run with grad mode on) re-evaluates the model
  // and returns the loss, which step returns.
  virtual Tensor step(const LossClosure& closure = nullptr);
  // Sets every gradient to undefined, or zeros it in place (detached) when !set_to_none.
  void zero_grad(bool set_to_none = true);

  // Adds a group; options it does not name come from defaults(). Raises torch's errors for
  // non-leaf tensors and parameters already in another group.
  void add_param_group(ParamGroup group);
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  const Options& defaults() const { return defaults_; }

  // The state of parameter `p` (created empty when missing).
  ParamState& state(const Tensor& p) { return state_[p.impl()]; }
  const ParamState* find_state(const Tensor& p) const;

  // State and group options with parameters as indices; tensors are shared, not copied.
  StateDict state_dict() const;
  // Group options are replaced by the saved ones; state tensors are copied and cast to their
  // parameter's dtype ("step" keeps its dtype). Raises ValueError-kind errors on mismatched groups.
  void load_state_dict(const StateDict& sd);

  // torch's repr: "SGD (\nParameter Group 0\n    dampening: 0\n ...)".
  std::string repr() const;

 protected:
  Optimizer(std::string name, Options defaults);
  // Adds the groups (the constructor's work once the defaults are validated).
  void init_groups(std::vector<ParamGroup> groups);
  virtual void step_group(ParamGroup& group) = 0;
  // Called for each group added (Adagrad creates its state eagerly).
  virtual void group_added(ParamGroup&) {}
  // Options a loaded group lacks are filled from here; AdamW forces decoupled weight decay.
  virtual void fix_loaded_group(Options& o) const;

  std::string name_;
  Options defaults_;
  std::vector<ParamGroup> groups_;
  std::unordered_map<const TensorImpl*, ParamState> state_;
  // A graph that captured step() holds a weak handle to this: a replay after the optimiser is gone raises.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace kiln::optim
