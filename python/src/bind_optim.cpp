// Python binding: optim. kiln.optim.SGD/Adam/AdamW/RMSprop/Adagrad are the C++ classes of
// kiln/optim with torch's Python signatures; param_groups are live views of the C++ groups (a
// scheduler's or a user's `group["lr"] = x` writes through), state dicts have torch's layout.
#include <nanobind/stl/function.h>
#include <nanobind/stl/shared_ptr.h>

#include "kiln/optim/detail/fused.h"
#include "optim_common.h"

namespace kiln::py {

using optim::Optimizer;
using optim::Options;
using optim::ParamGroup;
using optim::ParamState;
using optim::StateDict;
using optim::Value;

// ---- Value <-> Python
// ------------------------------------------------------------------------------
Value to_value(nb::handle h, const char* what) {
  if (h.is_none()) return Value();
  if (PyBool_Check(h.ptr())) return Value(h.ptr() == Py_True);
  if (PyLong_Check(h.ptr())) return Value(nb::cast<int64_t>(h));
  if (PyFloat_Check(h.ptr())) return Value(nb::cast<double>(h));
  if (PyUnicode_Check(h.ptr())) return Value(nb::cast<std::string>(h));
  if (nb::isinstance<Tensor>(h)) {
    Tensor t = nb::cast<Tensor>(h);
    KILN_CHECK(t.numel() == 1, Value, "optim", "Tensor ", what, " must be 1-element");
    return Value(t.item<double>());
  }
  if (PyTuple_Check(h.ptr()) || PyList_Check(h.ptr())) {
    std::vector<Value> items;
    for (nb::handle x : h) items.push_back(to_value(x, what));
    return PyTuple_Check(h.ptr()) ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  }
  if (PyDict_Check(h.ptr())) {
    std::vector<std::pair<Value, Value>> entries;
    for (auto [k, v] : nb::borrow<nb::dict>(h))
      entries.emplace_back(to_value(k, what), to_value(v, what));
    return Value::dict(std::move(entries));
  }
  if (PyIndex_Check(h.ptr())) return Value(nb::cast<int64_t>(nb::int_(h)));
  if (PyNumber_Check(h.ptr())) return Value(nb::cast<double>(nb::float_(h)));
  throw nb::type_error(("unsupported type for " + std::string(what) + ": " +
                        nb::cast<std::string>(nb::str(h.type().attr("__name__"))))
                           .c_str());
}

nb::object to_py(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::None:
      return nb::none();
    case Value::Kind::Bool:
      return nb::bool_(v.to_bool());
    case Value::Kind::Int:
      return nb::int_(v.to_int());
    case Value::Kind::Float:
      return nb::float_(v.to_double());
    case Value::Kind::Str:
      return nb::str(v.str_value().c_str());
    case Value::Kind::List: {
      nb::list l;
      for (const Value& x : v.items()) l.append(to_py(x));
      return l;
    }
    case Value::Kind::Tuple: {
      nb::list l;
      for (const Value& x : v.items()) l.append(to_py(x));
      return nb::tuple(l);
    }
    case Value::Kind::Dict: {
      nb::dict d;
      for (const auto& [k, x] : v.entries()) d[to_py(k)] = to_py(x);
      return d;
    }
  }
  return nb::none();
}

Value options_dict_value(const Options& o) {
  std::vector<std::pair<Value, Value>> e;
  for (const auto& [k, v] : o.items()) e.emplace_back(Value(k), v);
  return Value::dict(std::move(e));
}

namespace {

std::string py_type_name(nb::handle h) {
  nb::handle t = h.type();
  std::string mod =
      nb::hasattr(t, "__module__") ? nb::cast<std::string>(nb::str(t.attr("__module__"))) : "";
  std::string name = nb::cast<std::string>(nb::str(t.attr("__qualname__")));
  return mod.empty() || mod == "builtins" ? name : mod + "." + name;
}

// ---- params argument
// ------------------------------------------------------------------------------- The C++ groups
// plus, per group, the Python parameter objects (kept so that `group["params"]` and `opt.state[p]`
// see the caller's own objects).
struct Parsed {
  std::vector<ParamGroup> groups;
  std::vector<nb::list> py;
};

nb::list param_list(nb::handle params) {
  if (nb::isinstance<Tensor>(params)) {
    nb::list l;
    l.append(params);
    return l;
  }
  if (PySet_Check(params.ptr()) || PyFrozenSet_Check(params.ptr()))
    throw nb::type_error(
        "optimizer parameters need to be organized in ordered collections, but the ordering of "
        "tensors in sets "
        "will change between runs. Please use a list instead.");
  nb::list l;
  for (nb::handle p : params) {
    if (!nb::isinstance<Tensor>(p))
      throw nb::type_error(
          ("optimizer can only optimize Tensors, but one of the params is " + py_type_name(p))
              .c_str());
    l.append(p);
  }
  return l;
}

ParamGroup parse_group(nb::handle d, nb::list& py) {
  if (!PyDict_Check(d.ptr()))
    throw nb::type_error(("param_group must be a dict, but got " + py_type_name(d)).c_str());
  nb::dict dict = nb::borrow<nb::dict>(d);
  if (!dict.contains("params")) throw nb::key_error("params");
  py = param_list(dict["params"]);
  ParamGroup g;
  for (nb::handle p : py) g.params.push_back(nb::cast<Tensor>(p));
  for (auto [k, v] : dict) {
    std::string key = nb::cast<std::string>(k);
    if (key != "params") g.options.set(key, to_value(v, key.c_str()));
  }
  return g;
}

Parsed parse_params(nb::handle params) {
  if (nb::isinstance<Tensor>(params))
    throw nb::type_error(
        ("params argument given to the optimizer should be an iterable of Tensors or dicts, "
         "but got " +
         py_type_name(params))
            .c_str());
  nb::list items;
  for (nb::handle x : params) items.append(x);
  if (items.size() == 0) throw nb::value_error("optimizer got an empty parameter list");
  Parsed r;
  if (!PyDict_Check(nb::handle(items[0]).ptr())) {
    nb::dict d;
    d["params"] = items;
    items = nb::list();
    items.append(d);
  }
  for (nb::handle d : items) {
    nb::list py;
    r.groups.push_back(parse_group(d, py));
    r.py.push_back(py);
  }
  return r;
}

void set_py_params(nb::handle self, const std::vector<nb::list>& py) {
  nb::list all;
  for (const nb::list& l : py) all.append(l);
  nb::setattr(self, "_py_params", all);
}

// The Python objects of group i, or fresh wrappers if the C++ group changed underneath.
nb::list group_params(nb::handle self, size_t i) {
  Optimizer& opt = nb::cast<Optimizer&>(self);
  const TensorList& ps = opt.param_groups().at(i).params;
  if (nb::hasattr(self, "_py_params")) {
    nb::list all = nb::borrow<nb::list>(self.attr("_py_params"));
    if (i < all.size()) {
      nb::list l = nb::borrow<nb::list>(all[i]);
      bool same = l.size() == ps.size();
      for (size_t j = 0; same && j < ps.size(); ++j)
        same = nb::cast<Tensor&>(l[j]).impl() == ps[j].impl();
      if (same) return l;
    }
  }
  nb::list l;
  for (const Tensor& p : ps) l.append(nb::cast(p));
  return l;
}

// ---- param group view
// ------------------------------------------------------------------------------
struct GroupRef {
  nb::object owner;  // the Python optimizer
  size_t index;
  Optimizer& opt() const { return nb::cast<Optimizer&>(owner); }
  ParamGroup& group() const {
    auto& gs = opt().param_groups();
    if (index >= gs.size()) throw nb::index_error("param group no longer exists");
    return gs[index];
  }
};

nb::list group_keys(const GroupRef& g) {
  nb::list keys;
  keys.append("params");
  for (const auto& [k, v] : g.group().options.items()) keys.append(nb::str(k.c_str()));
  return keys;
}

nb::object group_get(const GroupRef& g, const std::string& key) {
  if (key == "params") return group_params(g.owner, g.index);
  const Value* v = g.group().options.find(key);
  if (!v) throw nb::key_error(key.c_str());
  return to_py(*v);
}

void group_set(const GroupRef& g, const std::string& key, nb::handle value) {
  if (key == "params") {
    nb::list py = param_list(value);
    TensorList ps;
    for (nb::handle p : py) ps.push_back(nb::cast<Tensor>(p));
    g.group().params = std::move(ps);
    if (nb::hasattr(g.owner, "_py_params")) {
      nb::list all = nb::borrow<nb::list>(g.owner.attr("_py_params"));
      if (g.index < all.size()) all[g.index] = py;
    }
    return;
  }
  g.group().options.set(key, to_value(value, key.c_str()));
}

nb::dict group_dict(const GroupRef& g) {
  nb::dict d;
  for (nb::handle k : group_keys(g)) d[k] = group_get(g, nb::cast<std::string>(k));
  return d;
}

nb::object state_tensor(const Tensor& t) { return t.defined() ? nb::cast(t) : nb::none(); }

// One state entry from Python: a tensor, None, a list of them (LBFGS's history) or a number (older
// checkpoints keep "step" as a float).
void set_state_entry(ParamState& st, const std::string& key, nb::handle t) {
  if (t.is_none()) {
    st.set(key, Tensor());
  } else if (PyList_Check(t.ptr()) || PyTuple_Check(t.ptr())) {
    TensorList l;
    for (nb::handle e : t) {
      if (e.is_none()) l.emplace_back();
      else if (nb::isinstance<Tensor>(e)) l.push_back(nb::cast<Tensor>(e));
      else l.push_back(full({}, nb::cast<double>(nb::float_(e)), kFloat64));
    }
    st.set_list(key, std::move(l));
  } else if (nb::isinstance<Tensor>(t)) {
    st.set(key, nb::cast<Tensor>(t));
  } else {
    st.set(key, full({}, nb::cast<double>(nb::float_(t)), kFloat32));
  }
}

nb::dict state_py(const ParamState& st) {
  nb::dict d;
  for (const auto& [k, t] : st.items()) d[k.c_str()] = state_tensor(t);
  for (const auto& [k, l] : st.lists()) {
    nb::list items;
    for (const Tensor& t : l) items.append(state_tensor(t));
    d[k.c_str()] = items;
  }
  return d;
}

// ---- one parameter's state, live: `opt.state[p][key] = t` writes the C++ state (as torch's dicts do)
struct StateRef {
  nb::object owner;  // the Python optimizer
  Tensor param;
  ParamState& state() const { return nb::cast<Optimizer&>(owner).state(param); }
};

nb::list state_keys(const StateRef& r) {
  nb::list keys;
  const ParamState& st = r.state();
  for (const auto& [k, t] : st.items()) keys.append(nb::str(k.c_str()));
  for (const auto& [k, l] : st.lists()) keys.append(nb::str(k.c_str()));
  return keys;
}

nb::object state_get(const StateRef& r, const std::string& key) {
  const ParamState& st = r.state();
  if (const Tensor* t = st.find(key)) return state_tensor(*t);
  if (const TensorList* l = st.find_list(key)) {
    nb::list items;
    for (const Tensor& t : *l) items.append(state_tensor(t));
    return items;
  }
  throw nb::key_error(key.c_str());
}

nb::dict state_dict_py(const Optimizer& opt) {
  StateDict sd = opt.state_dict();
  nb::dict state;
  for (const auto& [i, st] : sd.state) state[nb::int_(i)] = state_py(st);
  nb::list groups;
  for (const StateDict::Group& g : sd.param_groups) {
    nb::dict d;
    for (const auto& [k, v] : g.options.items()) d[k.c_str()] = to_py(v);
    nb::list idx;
    for (int64_t i : g.params) idx.append(i);
    d["params"] = idx;
    groups.append(d);
  }
  nb::dict r;
  r["state"] = state;
  r["param_groups"] = groups;
  return r;
}

void load_state_dict_py(Optimizer& opt, nb::handle sd_obj) {
  if (!PyDict_Check(sd_obj.ptr())) throw nb::type_error("state_dict must be a dict");
  nb::dict sd_py = nb::borrow<nb::dict>(sd_obj);
  StateDict sd;
  if (sd_py.contains("state")) {
    for (auto [k, v] : nb::borrow<nb::dict>(sd_py["state"])) {
      ParamState st;
      for (auto [name, t] : nb::borrow<nb::dict>(v)) set_state_entry(st, nb::cast<std::string>(name), t);
      sd.state[nb::cast<int64_t>(nb::int_(k))] = std::move(st);
    }
  }
  if (!sd_py.contains("param_groups")) throw nb::key_error("param_groups");
  for (nb::handle g : nb::borrow<nb::list>(sd_py["param_groups"])) {
    StateDict::Group sg;
    for (auto [k, v] : nb::borrow<nb::dict>(g)) {
      std::string key = nb::cast<std::string>(k);
      if (key == "params") {
        for (nb::handle i : v) sg.params.push_back(nb::cast<int64_t>(i));
      } else {
        sg.options.set(key, to_value(v, key.c_str()));
      }
    }
    sd.param_groups.push_back(std::move(sg));
  }
  opt.load_state_dict(sd);
}

// __init__ for an optimiser: validate the options, read params, construct in place.
template <class O>
void construct(nb::pointer_and_handle<O> self, nb::handle params, const Options& given,
               Options (*validate)(const Options&)) {
  validate(given);  // argument errors first, as torch
  Parsed parsed = parse_params(params);
  new (self.p) O(std::move(parsed.groups), given);
  set_py_params(self.h, parsed.py);
}

Options adam_check(const Options& o) { return optim::adam_defaults(o, false); }
Options adamw_check(const Options& o) { return optim::adam_defaults(o, true); }

// The reading side of Python's mapping protocol over a keys and a get function: iteration, keys(),
// values(), items() (ParamGroup and ParamState, live views of the optimizer's C++ state).
template <class Ref, nb::list (*Keys)(const Ref&), nb::object (*Get)(const Ref&, const std::string&)>
void mapping_views(nb::class_<Ref>& c) {
  c.def("__iter__", [](const Ref& r) { return nb::iter(Keys(r)); })
      .def("keys", Keys)
      .def("values",
           [](const Ref& r) {
             nb::list l;
             for (nb::handle k : Keys(r)) l.append(Get(r, nb::cast<std::string>(k)));
             return l;
           })
      .def("items", [](const Ref& r) {
        nb::list l;
        for (nb::handle k : Keys(r)) l.append(nb::make_tuple(k, Get(r, nb::cast<std::string>(k))));
        return l;
      });
}

}  // namespace

void bind_optim(nb::module_& m) {
  nb::module_ om = m.def_submodule("_optim", "kiln.optim: optimisers and learning-rate schedulers");

  auto group_cls = nb::class_<GroupRef>(om, "ParamGroup")
      .def("__getitem__", &group_get)
      .def("__setitem__", &group_set)
      .def("__delitem__",
           [](const GroupRef& g, const std::string& key) {
             if (key == "params" || !g.group().options.erase(key)) throw nb::key_error(key.c_str());
           })
      .def("__contains__",
           [](const GroupRef& g, const std::string& key) {
             return key == "params" || g.group().options.contains(key);
           })
      .def("__len__", [](const GroupRef& g) { return g.group().options.size() + 1; })
      .def(
          "get",
          [](const GroupRef& g, const std::string& key, nb::handle dflt) -> nb::object {
            if (key != "params" && !g.group().options.contains(key)) return nb::borrow(dflt);
            return group_get(g, key);
          },
          "key"_a, "default"_a = nb::none())
      .def(
          "setdefault",
          [](const GroupRef& g, const std::string& key, nb::handle dflt) {
            if (key != "params" && !g.group().options.contains(key)) group_set(g, key, dflt);
            return group_get(g, key);
          },
          "key"_a, "default"_a = nb::none())
      .def("update",
           [](const GroupRef& g, nb::handle other) {
             nb::dict d =
                 nb::borrow<nb::dict>(nb::module_::import_("builtins").attr("dict")(other));
             for (auto [k, v] : d) group_set(g, nb::cast<std::string>(k), v);
           })
      .def("copy", &group_dict)
      .def("__eq__", [](const GroupRef& g, nb::handle o) { return group_dict(g).equal(o); })
      .def("__repr__", [](const GroupRef& g) { return nb::repr(group_dict(g)); });

  mapping_views<GroupRef, group_keys, group_get>(group_cls);

  auto state_cls = nb::class_<StateRef>(om, "ParamState")
      .def("__getitem__", &state_get)
      .def("__setitem__", [](const StateRef& r, const std::string& key, nb::handle v) {
        set_state_entry(r.state(), key, v);
      })
      .def("__delitem__",
           [](const StateRef& r, const std::string& key) {
             ParamState& st = r.state();
             if (!st.contains(key)) throw nb::key_error(key.c_str());
             ParamState kept;
             for (const auto& [k, t] : st.items())
               if (k != key) kept.set(k, t);
             for (const auto& [k, l] : st.lists())
               if (k != key) kept.set_list(k, l);
             st = std::move(kept);
           })
      .def("__contains__", [](const StateRef& r, const std::string& key) { return r.state().contains(key); })
      .def("__len__", [](const StateRef& r) { return r.state().size(); })
      .def(
          "get",
          [](const StateRef& r, const std::string& key, nb::handle dflt) -> nb::object {
            return r.state().contains(key) ? state_get(r, key) : nb::borrow(dflt);
          },
          "key"_a, "default"_a = nb::none())
      .def("copy", [](const StateRef& r) { return state_py(r.state()); })
      .def("__repr__", [](const StateRef& r) { return nb::repr(state_py(r.state())); });
  mapping_views<StateRef, state_keys, state_get>(state_cls);

  nb::class_<Optimizer>(om, "Optimizer", nb::dynamic_attr())
      .def(
          "step",
          [](nb::handle self, nb::handle closure) -> nb::object {
            Optimizer& opt = nb::cast<Optimizer&>(self);
            nb::object loss = nb::none();
            if (!closure.is_none()) {
              EnableGradGuard enable;
              loss = nb::borrow(closure)();
            }
            {
              nb::gil_scoped_release release;
              opt.step();
            }
            return loss;
          },
          "closure"_a = nb::none())
      .def("zero_grad", &Optimizer::zero_grad, "set_to_none"_a = true)
      .def_prop_ro("param_groups",
                   [](nb::handle self) {
                     nb::list l;
                     size_t n = nb::cast<Optimizer&>(self).param_groups().size();
                     for (size_t i = 0; i < n; ++i)
                       l.append(nb::cast(GroupRef{nb::borrow(self), i}));
                     return l;
                   })
      .def_prop_ro("defaults",
                   [](const Optimizer& o) { return to_py(options_dict_value(o.defaults())); })
      .def_prop_ro("state",
                   [](nb::handle self) {
                     Optimizer& opt = nb::cast<Optimizer&>(self);
                     nb::object dd =
                         nb::module_::import_("collections")
                             .attr("defaultdict")(nb::module_::import_("builtins").attr("dict"));
                     for (size_t i = 0; i < opt.param_groups().size(); ++i) {
                       nb::list py = group_params(self, i);
                       const TensorList& ps = opt.param_groups()[i].params;
                       for (size_t j = 0; j < ps.size(); ++j) {
                         const ParamState* st = opt.find_state(ps[j]);
                         if (st && !st->empty()) dd[py[j]] = nb::cast(StateRef{nb::borrow(self), ps[j]});
                       }
                     }
                     return dd;
                   })
      .def(
          "add_param_group",
          [](nb::handle self, nb::handle group) {
            nb::list py;
            ParamGroup g = parse_group(group, py);
            nb::cast<Optimizer&>(self).add_param_group(std::move(g));
            if (nb::hasattr(self, "_py_params"))
              nb::borrow<nb::list>(self.attr("_py_params")).append(py);
          },
          "param_group"_a)
      .def("state_dict", &state_dict_py)
      .def("load_state_dict", &load_state_dict_py, "state_dict"_a)
      .def("__repr__", &Optimizer::repr);

  using optim::Adagrad;
  using optim::Adam;
  using optim::AdamW;
  using optim::RMSprop;
  using optim::SGD;
  nb::class_<SGD, Optimizer>(om, "SGD").def(
      "__init__",
      [](nb::pointer_and_handle<SGD> self, nb::handle params, nb::handle lr, nb::handle momentum,
         nb::handle dampening, nb::handle weight_decay, nb::handle nesterov, nb::handle maximize,
         nb::handle foreach, nb::handle differentiable, nb::handle fused) {
        Options o{{"lr", to_value(lr, "lr")},         {"momentum", to_value(momentum)},
                  {"dampening", to_value(dampening)}, {"weight_decay", to_value(weight_decay)},
                  {"nesterov", to_value(nesterov)},   {"maximize", to_value(maximize)},
                  {"foreach", to_value(foreach)},     {"differentiable", to_value(differentiable)},
                  {"fused", to_value(fused)}};
        construct(self, params, o, &optim::sgd_defaults);
      },
      "params"_a, "lr"_a = 1e-3, "momentum"_a = 0, "dampening"_a = 0, "weight_decay"_a = 0,
      "nesterov"_a = false, nb::kw_only(), "maximize"_a = false, "foreach"_a = nb::none(),
      "differentiable"_a = false, "fused"_a = nb::none());

  auto adam_init = [](auto self, nb::handle params, nb::handle lr, nb::handle betas, nb::handle eps,
                      nb::handle weight_decay, nb::handle amsgrad, nb::handle foreach,
                      nb::handle maximize, nb::handle capturable, nb::handle differentiable,
                      nb::handle fused, nb::handle decoupled, bool adamw) {
    Options o{{"lr", to_value(lr, "lr")},
              {"betas", to_value(betas, "betas")},
              {"eps", to_value(eps)},
              {"weight_decay", to_value(weight_decay)},
              {"amsgrad", to_value(amsgrad)},
              {"maximize", to_value(maximize)},
              {"foreach", to_value(foreach)},
              {"capturable", to_value(capturable)},
              {"differentiable", to_value(differentiable)},
              {"fused", to_value(fused)}};
    if (!adamw) o.set("decoupled_weight_decay", to_value(decoupled));
    construct(self, params, o, adamw ? &adamw_check : &adam_check);
  };
  nb::class_<Adam, Optimizer>(om, "Adam")
      .def(
          "__init__",
          [adam_init](nb::pointer_and_handle<Adam> self, nb::handle params, nb::handle lr,
                      nb::handle betas, nb::handle eps, nb::handle weight_decay, nb::handle amsgrad,
                      nb::handle foreach, nb::handle maximize, nb::handle capturable,
                      nb::handle differentiable, nb::handle fused, nb::handle decoupled) {
            adam_init(self, params, lr, betas, eps, weight_decay, amsgrad, foreach, maximize,
                      capturable, differentiable, fused, decoupled, false);
          },
          "params"_a, "lr"_a = 1e-3, "betas"_a = nb::make_tuple(0.9, 0.999), "eps"_a = 1e-8,
          "weight_decay"_a = 0, "amsgrad"_a = false, nb::kw_only(), "foreach"_a = nb::none(),
          "maximize"_a = false, "capturable"_a = false, "differentiable"_a = false,
          "fused"_a = nb::none(), "decoupled_weight_decay"_a = false);
  nb::class_<AdamW, Adam>(om, "AdamW")
      .def(
          "__init__",
          [adam_init](nb::pointer_and_handle<AdamW> self, nb::handle params, nb::handle lr,
                      nb::handle betas, nb::handle eps, nb::handle weight_decay, nb::handle amsgrad,
                      nb::handle maximize, nb::handle foreach, nb::handle capturable,
                      nb::handle differentiable, nb::handle fused) {
            adam_init(self, params, lr, betas, eps, weight_decay, amsgrad, foreach, maximize,
                      capturable, differentiable, fused, nb::none(), true);
          },
          "params"_a, "lr"_a = 1e-3, "betas"_a = nb::make_tuple(0.9, 0.999), "eps"_a = 1e-8,
          "weight_decay"_a = 1e-2, "amsgrad"_a = false, nb::kw_only(), "maximize"_a = false,
          "foreach"_a = nb::none(), "capturable"_a = false, "differentiable"_a = false,
          "fused"_a = nb::none());

  nb::class_<RMSprop, Optimizer>(om, "RMSprop")
      .def(
          "__init__",
          [](nb::pointer_and_handle<RMSprop> self, nb::handle params, nb::handle lr,
             nb::handle alpha, nb::handle eps, nb::handle weight_decay, nb::handle momentum,
             nb::handle centered, nb::handle capturable, nb::handle foreach, nb::handle maximize,
             nb::handle differentiable) {
            Options o{
                {"lr", to_value(lr, "lr")},           {"momentum", to_value(momentum)},
                {"alpha", to_value(alpha)},           {"eps", to_value(eps)},
                {"centered", to_value(centered)},     {"weight_decay", to_value(weight_decay)},
                {"capturable", to_value(capturable)}, {"foreach", to_value(foreach)},
                {"maximize", to_value(maximize)},     {"differentiable", to_value(differentiable)}};
            construct(self, params, o, &optim::rmsprop_defaults);
          },
          "params"_a, "lr"_a = 1e-2, "alpha"_a = 0.99, "eps"_a = 1e-8, "weight_decay"_a = 0,
          "momentum"_a = 0, "centered"_a = false, "capturable"_a = false, "foreach"_a = nb::none(),
          "maximize"_a = false, "differentiable"_a = false);

  nb::class_<Adagrad, Optimizer>(om, "Adagrad")
      .def(
          "__init__",
          [](nb::pointer_and_handle<Adagrad> self, nb::handle params, nb::handle lr,
             nb::handle lr_decay, nb::handle weight_decay, nb::handle initial_accumulator_value,
             nb::handle eps, nb::handle foreach, nb::handle maximize, nb::handle differentiable,
             nb::handle fused) {
            Options o{{"lr", to_value(lr, "lr")},
                      {"lr_decay", to_value(lr_decay)},
                      {"eps", to_value(eps)},
                      {"weight_decay", to_value(weight_decay)},
                      {"initial_accumulator_value", to_value(initial_accumulator_value)},
                      {"foreach", to_value(foreach)},
                      {"maximize", to_value(maximize)},
                      {"differentiable", to_value(differentiable)},
                      {"fused", to_value(fused)}};
            construct(self, params, o, &optim::adagrad_defaults);
          },
          "params"_a, "lr"_a = 1e-2, "lr_decay"_a = 0, "weight_decay"_a = 0,
          "initial_accumulator_value"_a = 0, "eps"_a = 1e-10, "foreach"_a = nb::none(),
          nb::kw_only(), "maximize"_a = false, "differentiable"_a = false, "fused"_a = nb::none());

  nb::class_<optim::Rprop, Optimizer>(om, "Rprop")
      .def(
          "__init__",
          [](nb::pointer_and_handle<optim::Rprop> self, nb::handle params, nb::handle lr, nb::handle etas,
             nb::handle step_sizes, nb::handle capturable, nb::handle foreach, nb::handle maximize,
             nb::handle differentiable) {
            Options o{{"lr", to_value(lr, "lr")},
                      {"etas", to_value(etas, "etas")},
                      {"step_sizes", to_value(step_sizes, "step_sizes")},
                      {"foreach", to_value(foreach)},
                      {"maximize", to_value(maximize)},
                      {"differentiable", to_value(differentiable)},
                      {"capturable", to_value(capturable)}};
            construct(self, params, o, &optim::rprop_defaults);
          },
          "params"_a, "lr"_a = 1e-2, "etas"_a = nb::make_tuple(0.5, 1.2), "step_sizes"_a = nb::make_tuple(1e-6, 50),
          nb::kw_only(), "capturable"_a = false, "foreach"_a = nb::none(), "maximize"_a = false,
          "differentiable"_a = false);

  nb::class_<optim::ASGD, Optimizer>(om, "ASGD")
      .def(
          "__init__",
          [](nb::pointer_and_handle<optim::ASGD> self, nb::handle params, nb::handle lr, nb::handle lambd,
             nb::handle alpha, nb::handle t0, nb::handle weight_decay, nb::handle foreach, nb::handle maximize,
             nb::handle differentiable, nb::handle capturable) {
            Options o{{"lr", to_value(lr, "lr")},
                      {"lambd", to_value(lambd)},
                      {"alpha", to_value(alpha)},
                      {"t0", to_value(t0)},
                      {"weight_decay", to_value(weight_decay)},
                      {"foreach", to_value(foreach)},
                      {"maximize", to_value(maximize)},
                      {"differentiable", to_value(differentiable)},
                      {"capturable", to_value(capturable)}};
            construct(self, params, o, &optim::asgd_defaults);
          },
          "params"_a, "lr"_a = 1e-2, "lambd"_a = 1e-4, "alpha"_a = 0.75, "t0"_a = 1e6, "weight_decay"_a = 0,
          "foreach"_a = nb::none(), "maximize"_a = false, "differentiable"_a = false, "capturable"_a = false);

  // Adamax, NAdam, RAdam: torch's signatures; options passed through by name.
  auto adam_family = [](auto self, nb::handle params, nb::kwargs kw, const char* lr_default,
                        Options (*defaults)(const Options&)) {
    Options o;
    for (auto [k, v] : kw) {
      std::string key = nb::cast<std::string>(k);
      o.set(key, to_value(v, key.c_str()));
    }
    (void)lr_default;
    construct(self, params, o, defaults);
  };
  nb::class_<optim::Adamax, Optimizer>(om, "Adamax")
      .def(
          "__init__",
          [adam_family](nb::pointer_and_handle<optim::Adamax> self, nb::handle params, nb::handle lr,
                        nb::handle betas, nb::handle eps, nb::handle weight_decay, nb::handle foreach,
                        nb::handle maximize, nb::handle differentiable, nb::handle capturable) {
            nb::kwargs kw;
            kw["lr"] = lr, kw["betas"] = betas, kw["eps"] = eps, kw["weight_decay"] = weight_decay;
            kw["foreach"] = foreach, kw["maximize"] = maximize, kw["differentiable"] = differentiable;
            kw["capturable"] = capturable;
            adam_family(self, params, kw, "lr", &optim::adamax_defaults);
          },
          "params"_a, "lr"_a = 2e-3, "betas"_a = nb::make_tuple(0.9, 0.999), "eps"_a = 1e-8,
          "weight_decay"_a = 0, "foreach"_a = nb::none(), nb::kw_only(), "maximize"_a = false,
          "differentiable"_a = false, "capturable"_a = false);
  nb::class_<optim::NAdam, Optimizer>(om, "NAdam")
      .def(
          "__init__",
          [adam_family](nb::pointer_and_handle<optim::NAdam> self, nb::handle params, nb::handle lr,
                        nb::handle betas, nb::handle eps, nb::handle weight_decay, nb::handle momentum_decay,
                        nb::handle decoupled, nb::handle foreach, nb::handle maximize, nb::handle capturable,
                        nb::handle differentiable) {
            nb::kwargs kw;
            kw["lr"] = lr, kw["betas"] = betas, kw["eps"] = eps, kw["weight_decay"] = weight_decay;
            kw["momentum_decay"] = momentum_decay, kw["decoupled_weight_decay"] = decoupled;
            kw["foreach"] = foreach, kw["maximize"] = maximize, kw["capturable"] = capturable;
            kw["differentiable"] = differentiable;
            adam_family(self, params, kw, "lr", &optim::nadam_defaults);
          },
          "params"_a, "lr"_a = 2e-3, "betas"_a = nb::make_tuple(0.9, 0.999), "eps"_a = 1e-8,
          "weight_decay"_a = 0, "momentum_decay"_a = 4e-3, "decoupled_weight_decay"_a = false, nb::kw_only(),
          "foreach"_a = nb::none(), "maximize"_a = false, "capturable"_a = false, "differentiable"_a = false);
  nb::class_<optim::RAdam, Optimizer>(om, "RAdam")
      .def(
          "__init__",
          [adam_family](nb::pointer_and_handle<optim::RAdam> self, nb::handle params, nb::handle lr,
                        nb::handle betas, nb::handle eps, nb::handle weight_decay, nb::handle decoupled,
                        nb::handle foreach, nb::handle maximize, nb::handle capturable, nb::handle differentiable) {
            nb::kwargs kw;
            kw["lr"] = lr, kw["betas"] = betas, kw["eps"] = eps, kw["weight_decay"] = weight_decay;
            kw["decoupled_weight_decay"] = decoupled, kw["foreach"] = foreach, kw["maximize"] = maximize;
            kw["capturable"] = capturable, kw["differentiable"] = differentiable;
            adam_family(self, params, kw, "lr", &optim::radam_defaults);
          },
          "params"_a, "lr"_a = 1e-3, "betas"_a = nb::make_tuple(0.9, 0.999), "eps"_a = 1e-8,
          "weight_decay"_a = 0, "decoupled_weight_decay"_a = false, nb::kw_only(), "foreach"_a = nb::none(),
          "maximize"_a = false, "capturable"_a = false, "differentiable"_a = false);

  nb::class_<optim::LBFGS, Optimizer>(om, "LBFGS")
      .def(
          "__init__",
          [](nb::pointer_and_handle<optim::LBFGS> self, nb::handle params, nb::handle lr, nb::handle max_iter,
             nb::handle max_eval, nb::handle tolerance_grad, nb::handle tolerance_change, nb::handle history_size,
             nb::handle line_search_fn) {
            Options o{{"lr", to_value(lr, "lr")},
                      {"max_iter", to_value(max_iter)},
                      {"max_eval", to_value(max_eval)},
                      {"tolerance_grad", to_value(tolerance_grad)},
                      {"tolerance_change", to_value(tolerance_change)},
                      {"history_size", to_value(history_size)},
                      {"line_search_fn", to_value(line_search_fn)}};
            construct(self, params, o, &optim::lbfgs_defaults);
          },
          "params"_a, "lr"_a = 1, "max_iter"_a = 20, "max_eval"_a = nb::none(), "tolerance_grad"_a = 1e-7,
          "tolerance_change"_a = 1e-9, "history_size"_a = 100, "line_search_fn"_a = nb::none())
      .def(
          "step",
          [](optim::LBFGS& opt, nb::handle closure) -> nb::object {
            if (closure.is_none()) throw nb::type_error("LBFGS.step() missing 1 required positional argument: 'closure'");
            nb::object fn = nb::borrow(closure);
            nb::object first = nb::none();
            optim::LossClosure c = [&fn, &first]() {
              nb::object r = fn();
              if (first.is_none()) first = r;
              return nb::isinstance<Tensor>(r) ? nb::cast<Tensor>(r) : scalar_tensor(nb::cast<double>(nb::float_(r)));
            };
            opt.step(c);
            return first;
          },
          "closure"_a);

  om.def("_update_isa", &optim::detail::update_isa);
  bind_lr_scheduler(om);
}

}  // namespace kiln::py
