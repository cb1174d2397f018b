// kiln::nn::Module: parameters, buffers and submodules in registration order, libtorch style.
//
//   struct Net : kiln::nn::Module {
//     std::shared_ptr<kiln::nn::Linear> fc;
//     Net() { fc = register_module("fc", std::make_shared<kiln::nn::Linear>(4, 2)); }
//     kiln::Tensor forward(const kiln::Tensor& x) { return fc->forward(x); }
//   };
//
// The Python binding exposes the same modules; Python's kiln.nn.Module wraps them, sharing the
// parameter tensors (one TensorImpl), so an optimiser or load_state_dict on either side is seen by both.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/autograd/autograd.h"
#include "kiln/core/ordered_dict.h"
#include "kiln/ops/ops.h"

namespace kiln::nn {

// Names to tensors in registration order: kiln::TensorDict (kiln/core/ordered_dict.h), the type
// state_dict(), load_state_dict(), save_file() and load_file() share.
using NamedTensors = TensorDict;

// Keys load_state_dict could not match (torch's report).
struct LoadResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string name = "Module") : name_(std::move(name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The class name used by repr ("Linear").
  const std::string& name() const { return name_; }
  // Layer-specific text inside the parentheses of the repr.
  virtual std::string extra_repr() const { return ""; }
  std::string repr() const;

  // Registration. A parameter is a tensor with requires_grad set (unless requires_grad = false);
  // an undefined tensor registers the name with no value (e.g. bias=False), as torch does.
  Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor t, bool persistent = true);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    register_module_impl(name, m);
    return m;
  }
  void register_module_impl(const std::string& name, std::shared_ptr<Module> m);

  // Access by name (raises IndexError-kind for unknown names).
  Tensor& param(const std::string& name);
  Tensor& buffer(const std::string& name);
  std::shared_ptr<Module> child(const std::string& name) const;
  bool has_param(const std::string& name) const;
  bool has_buffer(const std::string& name) const;

  // Iteration, torch's order: own entries first, then children depth-first; shared tensors once.
  NamedTensors named_parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  TensorList parameters(bool recurse = true) const;
  TensorList buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules(const std::string& prefix = "");

  // Direct entries (no recursion), including undefined parameters (bias=False).
  const NamedTensors& own_parameters() const { return params_; }
  const NamedTensors& own_buffers() const { return buffers_; }
  bool buffer_persistent(const std::string& name) const;

  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad(bool set_to_none = true);
  // Converts floating parameters and buffers (in place: the tensors keep their identity).
  void to(Dtype d);
  // Moves parameters and buffers (and their gradients) to a device, in place (torch's Module.to(device)).
  void to(Device d);
  void apply(const std::function<void(Module&)>& fn);
  void requires_grad_(bool on = true);

  // Persistent parameters and buffers by dotted name.
  NamedTensors state_dict() const;
  // Copies values in (shapes must match); strict raises listing missing/unexpected keys.
  LoadResult load_state_dict(const NamedTensors& sd, bool strict = true);

 protected:
  std::string name_;
  bool training_ = true;

 private:
  void collect(const std::string& prefix, bool params, bool recurse, NamedTensors& out,
               std::vector<const TensorImpl*>& seen) const;
  NamedTensors params_;
  NamedTensors buffers_;
  std::vector<std::string> non_persistent_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

std::ostream& operator<<(std::ostream& os, const Module& m);

// libtorch's module holder: owns a shared module and reads like one (`->`, call operator).
//   nn::ModuleHolder<nn::Linear> fc(4, 8);   fc->weight();   Tensor y = fc(x);
//   net.push_back(fc);                         // Sequential / ModuleList take holders too
template <class M>
class ModuleHolder {
 public:
  template <class... A>
  explicit ModuleHolder(A&&... args) : impl_(std::make_shared<M>(std::forward<A>(args)...)) {}
  ModuleHolder(std::shared_ptr<M> m) : impl_(std::move(m)) {}  // NOLINT: implicit, as libtorch's
  M* operator->() const { return impl_.get(); }
  M& operator*() const { return *impl_; }
  const std::shared_ptr<M>& ptr() const { return impl_; }
  operator std::shared_ptr<M>() const { return impl_; }  // NOLINT
  template <class... A>
  auto operator()(A&&... args) const {
    return impl_->forward(std::forward<A>(args)...);
  }

 private:
  std::shared_ptr<M> impl_;
};

}  // namespace kiln::nn
