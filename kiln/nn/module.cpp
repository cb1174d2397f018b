#include "kiln/nn/module.h"

#include <algorithm>
#include <ostream>
#include <sstream>

#include "kiln/core/format.h"

namespace kiln::nn {
namespace {

std::string add_indent(const std::string& s, int n) {
  std::string out, pad(n, ' ');
  for (char ch : s) {
    out += ch;
    if (ch == '\n') out += pad;
  }
  return out;
}

std::string shape_str(const Shape& s) { return "kiln.Size(" + shape_list(s) + ")"; }

Tensor* find(NamedTensors& v, const std::string& name) {
  for (auto& [n, t] : v)
    if (n == name) return &t;
  return nullptr;
}

// Replaces t's contents (storage, shape, dtype) with src's, keeping its autograd state and identity.
void assign_data(const Tensor& t, const Tensor& src) {
  auto keep = t.impl()->autograd;
  *t.impl() = *src.impl();
  t.impl()->autograd = keep;
}

}  // namespace

Tensor& Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  KILN_CHECK(!name.empty() && name.find('.') == std::string::npos, Value, "register_parameter",
             "parameter name can't be empty or contain \".\", got \"", name, "\"");
  KILN_CHECK(!find(buffers_, name) && !child(name), Value, "register_parameter", "attribute '", name,
             "' already exists");
  if (t.defined() && requires_grad) set_requires_grad(t, true);
  if (Tensor* p = find(params_, name)) return *p = t;
  params_.emplace_back(name, t);
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t, bool persistent) {
  KILN_CHECK(!name.empty() && name.find('.') == std::string::npos, Value, "register_buffer",
             "buffer name can't be empty or contain \".\", got \"", name, "\"");
  KILN_CHECK(!find(params_, name) && !child(name), Value, "register_buffer", "attribute '", name,
             "' already exists");
  std::erase(non_persistent_, name);
  if (!persistent) non_persistent_.push_back(name);
  if (Tensor* b = find(buffers_, name)) return *b = t;
  buffers_.emplace_back(name, t);
  return buffers_.back().second;
}

void Module::register_module_impl(const std::string& name, std::shared_ptr<Module> m) {
  KILN_CHECK(!name.empty() && name.find('.') == std::string::npos, Value, "register_module",
             "module name can't be empty or contain \".\", got \"", name, "\"");
  KILN_CHECK(!find(params_, name) && !find(buffers_, name), Value, "register_module", "attribute '", name,
             "' already exists");
  for (auto& [n, c] : children_)
    if (n == name) {
      c = std::move(m);
      return;
    }
  children_.emplace_back(name, std::move(m));
}

Tensor& Module::param(const std::string& name) {
  Tensor* p = find(params_, name);
  KILN_CHECK(p, Index, "Module", "'", name_, "' object has no parameter '", name, "'");
  return *p;
}
Tensor& Module::buffer(const std::string& name) {
  Tensor* b = find(buffers_, name);
  KILN_CHECK(b, Index, "Module", "'", name_, "' object has no buffer '", name, "'");
  return *b;
}
std::shared_ptr<Module> Module::child(const std::string& name) const {
  for (auto& [n, c] : children_)
    if (n == name) return c;
  return nullptr;
}
bool Module::has_param(const std::string& name) const {
  return std::any_of(params_.begin(), params_.end(), [&](auto& p) { return p.first == name; });
}
bool Module::has_buffer(const std::string& name) const {
  return std::any_of(buffers_.begin(), buffers_.end(), [&](auto& p) { return p.first == name; });
}
bool Module::buffer_persistent(const std::string& name) const {
  return std::find(non_persistent_.begin(), non_persistent_.end(), name) == non_persistent_.end();
}

void Module::collect(const std::string& prefix, bool params, bool recurse, NamedTensors& out,
                     std::vector<const TensorImpl*>& seen) const {
  for (const auto& [n, t] : params ? params_ : buffers_) {
    if (!t.defined() || std::find(seen.begin(), seen.end(), t.impl()) != seen.end()) continue;
    seen.push_back(t.impl());
    out.emplace_back(prefix + n, t);
  }
  if (!recurse) return;
  for (const auto& [n, c] : children_)
    if (c) c->collect(prefix + n + ".", params, true, out, seen);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  std::vector<const TensorImpl*> seen;
  collect("", true, recurse, out, seen);
  return out;
}
NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  std::vector<const TensorImpl*> seen;
  collect("", false, recurse, out, seen);
  return out;
}
TensorList Module::parameters(bool recurse) const {
  TensorList r;
  for (auto& [n, t] : named_parameters(recurse)) r.push_back(t);
  return r;
}
TensorList Module::buffers(bool recurse) const {
  TensorList r;
  for (auto& [n, t] : named_buffers(recurse)) r.push_back(t);
  return r;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules(const std::string& prefix) {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::vector<std::pair<std::string, Module*>> stack{{prefix, this}};
  std::vector<const Module*> seen;
  while (!stack.empty()) {
    auto [p, m] = stack.back();
    stack.pop_back();
    if (std::find(seen.begin(), seen.end(), m) != seen.end()) continue;
    seen.push_back(m);
    out.emplace_back(p, m->shared_from_this());
    for (auto it = m->children_.rbegin(); it != m->children_.rend(); ++it)
      if (it->second) stack.emplace_back(p.empty() ? it->first : p + "." + it->first, it->second.get());
  }
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_)
    if (c) c->train(on);
}

void Module::zero_grad(bool set_to_none) {
  for (Tensor& p : parameters()) {
    Tensor g = grad(p);
    if (!g.defined()) continue;
    if (set_to_none) {
      set_grad(p, Tensor());
    } else {
      NoGradGuard ng;
      set_grad(p, detach(g));
      zero_(grad(p));
    }
  }
}

void Module::to(Dtype d) {
  NoGradGuard ng;
  auto convert = [&](const Tensor& t) {
    if (!t.defined() || !(is_floating(t.dtype()) || is_complex(t.dtype())) || t.dtype() == d) return;
    if (is_complex(t.dtype()) != is_complex(d)) return;
    Tensor g = grad(t);
    assign_data(t, to_dtype(t, d));
    if (g.defined()) set_grad(t, to_dtype(g, d));
  };
  apply([&](Module& m) {
    for (auto& [n, t] : m.params_) convert(t);
    for (auto& [n, t] : m.buffers_) convert(t);
  });
}

void Module::to(Device d) {
  NoGradGuard ng;
  auto move = [&](const Tensor& t) {
    if (!t.defined() || t.device() == d) return;
    Tensor g = grad(t);
    assign_data(t, to_device(t, d));
    if (g.defined()) set_grad(t, to_device(g, d));
  };
  apply([&](Module& m) {
    for (auto& [n, t] : m.params_) move(t);
    for (auto& [n, t] : m.buffers_) move(t);
  });
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [n, c] : children_)
    if (c) c->apply(fn);
  fn(*this);
}

void Module::requires_grad_(bool on) {
  for (Tensor& p : parameters()) set_requires_grad(p, on);
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  std::vector<std::pair<std::string, const Module*>> stack{{"", this}};
  // depth-first in registration order: own parameters, own persistent buffers, then children
  std::function<void(const std::string&, const Module&)> walk = [&](const std::string& p, const Module& m) {
    for (const auto& [n, t] : m.params_)
      if (t.defined()) out.emplace_back(p + n, detach(t));
    for (const auto& [n, t] : m.buffers_)
      if (t.defined() && m.buffer_persistent(n)) out.emplace_back(p + n, detach(t));
    for (const auto& [n, c] : m.children_)
      if (c) walk(p + n + ".", *c);
  };
  walk("", *this);
  return out;
}

LoadResult Module::load_state_dict(const NamedTensors& sd, bool strict) {
  LoadResult r;
  NamedTensors own = state_dict();
  std::vector<std::string> errors;
  NoGradGuard ng;
  std::vector<std::pair<Tensor, Tensor>> copies;
  for (const auto& [name, target] : own) {
    auto it = std::find_if(sd.begin(), sd.end(), [&](auto& p) { return p.first == name; });
    if (it == sd.end()) {
      r.missing_keys.push_back(name);
      continue;
    }
    if (it->second.sizes() != target.sizes()) {
      errors.push_back("size mismatch for " + name + ": copying a param with shape " +
                       shape_str(it->second.sizes()) + " from checkpoint, the shape in current model is " +
                       shape_str(target.sizes()) + ".");
      continue;
    }
    copies.emplace_back(target, it->second);
  }
  for (const auto& [name, t] : sd)
    if (std::none_of(own.begin(), own.end(), [&](auto& p) { return p.first == name; }))
      r.unexpected_keys.push_back(name);
  if (strict) {
    auto quote = [](const std::vector<std::string>& ks) {
      std::string s;
      for (size_t i = 0; i < ks.size(); ++i) s += (i ? ", \"" : "\"") + ks[i] + "\"";
      return s;
    };
    if (!r.unexpected_keys.empty())
      errors.insert(errors.begin(), "Unexpected key(s) in state_dict: " + quote(r.unexpected_keys) + ". ");
    if (!r.missing_keys.empty())
      errors.insert(errors.begin(), "Missing key(s) in state_dict: " + quote(r.missing_keys) + ". ");
  }
  if (!errors.empty()) {
    std::string msg = "Error(s) in loading state_dict for " + name_ + ":";
    for (const std::string& e : errors) msg += "\n\t" + e;
    KILN_FAIL(Runtime, "load_state_dict", msg);
  }
  for (auto& [dst, src] : copies) copy_(dst, src);
  return r;
}

std::string Module::repr() const {
  std::vector<std::string> lines;
  std::string extra = extra_repr();
  size_t n_extra = 0;
  if (!extra.empty()) {
    std::stringstream ss(extra);
    for (std::string l; std::getline(ss, l);) lines.push_back(l), ++n_extra;
  }
  bool has_children = false;
  for (const auto& [n, c] : children_) {
    if (!c) continue;
    lines.push_back("(" + n + "): " + add_indent(c->repr(), 2));
    has_children = true;
  }
  std::string s = name_ + "(";
  if (!lines.empty()) {
    if (n_extra == 1 && !has_children) {
      s += lines[0];
    } else {
      s += "\n  ";
      for (size_t i = 0; i < lines.size(); ++i) s += (i ? "\n  " : "") + lines[i];
      s += "\n";
    }
  }
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.repr(); }

}  // namespace kiln::nn
