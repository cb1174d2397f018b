// Python binding: export (kiln/export/program.h) and the runtime (kiln/runtime/runtime.h). The public
// names live in python/kiln/export/__init__.py; these are its private entry points.
#include <nanobind/stl/complex.h>
#include <nanobind/stl/shared_ptr.h>

#include "common.h"
#include "kiln/dispatch/schema.h"
#include "kiln/export/program.h"
#include "kiln/runtime/runtime.h"

namespace kiln::py {
namespace {

using EP = ExportedProgram;

const char* kind_name(EP::InputKind k) {
  switch (k) {
    case EP::InputKind::Parameter: return "PARAMETER";
    case EP::InputKind::Buffer: return "BUFFER";
    case EP::InputKind::Constant: return "CONSTANT_TENSOR";
    default: return "USER_INPUT";
  }
}

std::string bytes_of(nb::handle b) {
  if (!nb::isinstance<nb::bytes>(b)) throw nb::type_error("expected bytes");
  nb::bytes by = nb::borrow<nb::bytes>(b);
  return std::string(by.c_str(), by.size());
}

// An integer of the program: a Python int, or its expression's text when it is symbolic.
nb::object size_value(int64_t raw) {
  const SymInt s = SymInt::from_raw(raw);
  return s.is_symbolic() ? nb::cast(s.str()) : nb::cast(raw);
}

// An attribute as a Python value (the ONNX writer reads them): sizes stay expressions (str).
nb::object attr_value(const Attr& a) {
  return std::visit(
      [&]<class V>(const V& v) -> nb::object {
        if constexpr (std::is_same_v<V, std::monostate>) {
          return nb::none();
        } else if constexpr (std::is_same_v<V, bool>) {
          return nb::bool_(v);
        } else if constexpr (std::is_same_v<V, int64_t>) {
          return size_value(v);
        } else if constexpr (std::is_same_v<V, double>) {
          return nb::float_(v);
        } else if constexpr (std::is_same_v<V, Scalar>) {
          if (v.is_bool()) return nb::bool_(v.template to<bool>());
          if (v.tag() == Scalar::Tag::Int) return size_value(v.to_int());
          if (v.is_integral()) return nb::int_(v.template to<uint64_t>());
          if (v.is_complex()) return nb::cast(v.to_complex());
          return nb::float_(v.to_double());
        } else if constexpr (std::is_same_v<V, Shape>) {
          nb::list l;
          for (int64_t x : v) l.append(size_value(x));
          return l;
        } else if constexpr (std::is_same_v<V, Dtype>) {
          return dtype_object(v);
        } else if constexpr (std::is_same_v<V, std::string>) {
          return nb::str(v.c_str());
        } else if constexpr (std::is_same_v<V, std::vector<double>>) {
          nb::list l;
          for (double x : v) l.append(x);
          return l;
        } else {
          return nb::str(device_str(v).c_str());
        }
      },
      a);
}

nb::list node_list(const EP& p, bool attr_text) {
  ShapeEnvGuard active(*p.env);
  auto name = [&](int v) { return v < 0 ? nb::object(nb::none()) : nb::cast(p.values[v].name); };
  nb::list l;
  for (const EP::Node& n : p.nodes) {
    nb::list ins, attrs, outs;
    for (int v : n.in) ins.append(name(v));
    for (const Attr& a : n.attrs) attrs.append(attr_text ? nb::cast(attr_str(a)) : attr_value(a));
    for (int v : n.out) outs.append(name(v));
    const Schema* s = op_schema(*n.op);
    l.append(nb::make_tuple(s ? s->qualified_name() : std::string(n.op->name), ins, attrs, outs, n.out_given));
  }
  return l;
}

}  // namespace

void bind_export(nb::module_& m) {
  nb::class_<EP>(m, "_ExportedProgram")
      .def("__str__", &EP::str)
      .def_prop_ro("inputs", [](const EP& p) {
        nb::list l;
        for (const EP::Input& in : p.inputs) l.append(nb::make_tuple(kind_name(in.kind), in.target, p.values[in.value].name));
        return l;
      })
      .def_prop_ro("outputs", [](const EP& p) {
        nb::list l;
        for (int v : p.outputs) l.append(v < 0 ? nb::object(nb::none()) : nb::cast(p.values[v].name));
        return l;
      })
      // (op, input names, attributes, output names, writes-in-place): the attributes as Python writes them
      // ("nodes", for printing) or as values ("graph_nodes", sizes as int or expression text)
      .def_prop_ro("nodes", [](const EP& p) { return node_list(p, true); })
      .def_prop_ro("graph_nodes", [](const EP& p) { return node_list(p, false); })
      .def_prop_ro("values", [](const EP& p) {  // name -> (sizes as text, dtype)
        ShapeEnvGuard active(*p.env);
        nb::dict d;
        for (const EP::Value& v : p.values) {
          nb::list sizes;
          for (SymInt s : v.sizes) sizes.append(s.is_symbolic() ? nb::cast(s.str()) : nb::cast(s.raw()));
          d[nb::cast(v.name)] = nb::make_tuple(sizes, dtype_object(v.dtype));
        }
        return d;
      })
      .def_prop_ro("symbols", [](const EP& p) {
        nb::list l;
        for (const EP::Symbol& s : p.symbols)
          l.append(nb::make_tuple(s.name, s.min, s.max == INT64_MAX ? nb::object(nb::none()) : nb::cast(s.max), s.unbacked));
        return l;
      })
      .def_prop_ro("guards", [](const EP& p) {
        nb::list l;
        for (const EP::Guard& g : p.guards) l.append(nb::make_tuple(g.text, g.where));
        return l;
      })
      .def_prop_ro("state", [](const EP& p) {
        nb::list l;
        for (const auto& [name, t] : p.state) l.append(nb::make_tuple(name, t));
        return l;
      })
      .def_rw("in_spec", &EP::in_spec)
      .def_rw("out_spec", &EP::out_spec)
      .def("save", [](const EP& p, const std::string& path) { save_program(p, path); })
      .def("save_bytes", [](const EP& p) {
        std::string b = save_program_bytes(p);
        return nb::bytes(b.data(), b.size());
      });
  m.def("_export_load", [](const std::string& path) { return load_program(path); });
  m.def("_export_load_bytes", [](nb::handle b) { return load_program_bytes(bytes_of(b)); });

  nb::class_<ExportTracer>(m, "_ExportTracer")
      .def(nb::init<>())
      .def("add_state", [](ExportTracer& t, const std::string& target, const Tensor& x, int kind) {
        t.add_state(target, x, static_cast<EP::InputKind>(kind));
      })
      // dims: {dim: (kind, name, min, max)} with kind 0 named, 1 dynamic, 2 auto, 3 static
      .def("add_input", [](ExportTracer& t, const std::string& name, const Tensor& example, nb::dict dims) {
        std::map<int64_t, Dim> ds;
        for (auto [k, v] : dims) {
          auto [kind, dname, lo, hi] = nb::cast<std::tuple<int, std::string, int64_t, std::optional<int64_t>>>(v);
          Dim d;
          d.kind = static_cast<Dim::Kind>(kind);
          d.name = dname;
          d.min = lo;
          d.max = hi.value_or(INT64_MAX);
          ds[nb::cast<int64_t>(k)] = d;
        }
        return t.add_input(name, example, ds);
      })
      .def("begin", &ExportTracer::begin)
      .def("end", &ExportTracer::end)
      .def("finish", [](ExportTracer& t, const std::vector<std::optional<Tensor>>& outs) {
        TensorList l;
        for (const auto& o : outs) l.push_back(o.value_or(Tensor()));
        return t.finish(l);
      });

  nb::class_<runtime::Program>(m, "_Runtime")
      .def(nb::init<std::shared_ptr<const EP>>())
      .def("run", [](const runtime::Program& r, const std::vector<Tensor>& inputs) {
        TensorList in(inputs.begin(), inputs.end());
        TensorList out;
        {
          nb::gil_scoped_release release;
          out = r.run(in);
        }
        nb::list l;
        for (const Tensor& t : out) l.append(t.defined() ? nb::cast(t) : nb::object(nb::none()));
        return l;
      })
      .def_prop_ro("stats", [](const runtime::Program& r) {
        const runtime::Program::Stats s = r.stats();
        nb::dict d;
        d["plans"] = s.plans;
        d["arena_bytes"] = s.arena_bytes;
        d["planned_bytes"] = s.planned_bytes;
        d["planned_values"] = s.planned_values;
        d["team"] = s.team;
        return d;
      });
}

}  // namespace kiln::py
