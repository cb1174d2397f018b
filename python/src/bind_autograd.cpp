// Python binding: autograd (tensor attributes, grad mode, the engine, custom Functions).
#include <nanobind/stl/function.h>
#include <nanobind/stl/shared_ptr.h>

#include "common.h"
#include "kiln/autograd/function.h"

namespace kiln::py {
namespace {

TensorList tensor_list(nb::handle h) {
  TensorList r;
  if (h.is_none()) return r;
  if (nb::isinstance<Tensor>(h)) return {nb::cast<Tensor>(h)};
  for (nb::handle x : h) r.push_back(x.is_none() ? Tensor() : nb::cast<Tensor>(x));
  return r;
}

nb::object opt_tensor(const Tensor& t) { return t.defined() ? nb::cast(t) : nb::none(); }

std::string python_stack() {
  nb::gil_scoped_acquire gil;
  try {
    nb::object tb = nb::module_::import_("traceback");
    nb::list frames = nb::cast<nb::list>(tb.attr("format_stack")());
    std::string s;
    for (nb::handle f : frames) s += nb::cast<std::string>(f);
    return s;
  } catch (...) {
    return std::string();
  }
}

// A Python callable kept by a C++ node; dropped with the GIL held.
struct PyRef {
  nb::object obj;
  ~PyRef() {
    if (Py_IsInitialized()) {
      nb::gil_scoped_acquire gil;
      obj.reset();
    }
  }
};

TensorHook py_hook(nb::object fn) {
  auto ref = std::make_shared<PyRef>(PyRef{std::move(fn)});
  return [ref](const Tensor& g) -> Tensor {
    nb::gil_scoped_acquire gil;
    nb::object r = ref->obj(g);
    if (r.is_none()) return Tensor();
    KILN_CHECK(nb::isinstance<Tensor>(r), Type, "register_hook", "expected Tensor, but hook returned '",
               nb::cast<std::string>(r.type().attr("__name__")), "'");
    return nb::cast<Tensor>(r);
  };
}

// torch's name for a hook in its errors: its __name__, else "<unknown>"
std::string hook_name(nb::handle fn) {
  nb::object n = nb::getattr(fn, "__name__", nb::none());
  return nb::isinstance<nb::str>(n) ? nb::cast<std::string>(n) : std::string("<unknown>");
}

}  // namespace

void bind_autograd(nb::module_& m, nb::class_<Tensor>& cls) {
  nb::class_<Node>(m, "Node")
      .def("name", &Node::name)
      .def_prop_ro("next_functions",
                   [](const Node& n) {
                     nb::list l;
                     for (const Edge& e : n.next_edges)
                       l.append(nb::make_tuple(e.fn ? nb::cast(e.fn) : nb::none(), e.input_nr));
                     return nb::tuple(l);
                   })
      .def_prop_ro("_sequence_nr", [](const Node& n) { return n.sequence_nr; })
      .def("__repr__", [](const Node& n) { return "<" + n.name() + " object>"; })
      .def("__eq__", [](const Node& a, const Node& b) { return &a == &b; })
      .def("__hash__", [](const Node& a) { return reinterpret_cast<uintptr_t>(&a); });

  cls.def_prop_rw(
         "requires_grad", [](const Tensor& t) { return requires_grad(t); },
         [](const Tensor& t, bool r) {
           KILN_CHECK(is_leaf(t), Runtime, "requires_grad",
                      "you can only change requires_grad flags of leaf variables.",
                      r ? ""
                        : " If you want to use a computed variable in a subgraph that doesn't "
                          "require differentiation use var_no_grad = var.detach().");
           set_requires_grad(t, r);
         })
      .def_prop_rw(
          "grad", [](const Tensor& t) { return opt_tensor(grad(t)); },
          [](const Tensor& t, nb::handle g) {
            set_grad(t, g.is_none() ? Tensor() : nb::cast<Tensor>(g));
          },
          nb::arg("value").none())
      .def_prop_ro("grad_fn",
                   [](const Tensor& t) -> nb::object {
                     auto fn = grad_fn(t);
                     return fn ? nb::cast(fn) : nb::none();
                   })
      .def_prop_ro("is_leaf", [](const Tensor& t) { return is_leaf(t); })
      .def_prop_ro("retains_grad", [](const Tensor& t) { return retains_grad(t); })
      .def_prop_ro(
          "output_nr",
          [](const Tensor& t) { return t.impl()->autograd ? t.impl()->autograd->output_nr : 0u; })
      .def("is_inference", [](const Tensor& t) { return t.impl()->inference; })
      .def("_is_view", [](const Tensor& t) { return is_view(t); })
      .def_prop_ro("_base", [](const Tensor& t) { return opt_tensor(view_base(t)); })
      .def_prop_rw(
          "data", [](const Tensor& t) { return variable_data(t); },
          [](const Tensor& t, const Tensor& src) {
            auto keep = t.impl()->autograd;
            *t.impl() = *src.impl();
            t.impl()->autograd = keep;
          })
      .def(
          "requires_grad_", [](const Tensor& t, bool r) { return set_requires_grad(t, r); },
          "requires_grad"_a = true)
      .def("detach", [](const Tensor& t) { return detach(t); })
      .def("detach_", [](const Tensor& t) { return detach_(t); })
      .def("retain_grad", [](const Tensor& t) { retain_grad(t); })
      .def("_register_hook",
           [](const Tensor& t, nb::object fn) { return register_hook(t, py_hook(fn), hook_name(fn)); })
      .def("_register_post_accumulate_grad_hook",
           [](const Tensor& t, nb::object fn) {
             auto ref = std::make_shared<PyRef>(PyRef{std::move(fn)});
             return register_post_accumulate_grad_hook(t, [ref](const Tensor& leaf) {
               nb::gil_scoped_acquire gil;
               ref->obj(leaf);
             });
           })
      .def("_remove_hook", [](const Tensor& t, int id) { remove_hook(t, id); });

  // torch.autograd.graph.saved_tensors_hooks (python/kiln/autograd/graph.py)
  m.def("_push_saved_tensor_hooks", [](nb::object pack, nb::object unpack) {
    auto p = std::make_shared<PyRef>(PyRef{std::move(pack)});
    auto u = std::make_shared<PyRef>(PyRef{std::move(unpack)});
    push_saved_tensor_hooks(
        {[p](const Tensor& t) -> std::shared_ptr<void> {
           nb::gil_scoped_acquire gil;
           return std::make_shared<PyRef>(PyRef{p->obj(t)});
         },
         [u](const std::shared_ptr<void>& packed) -> Tensor {
           nb::gil_scoped_acquire gil;
           nb::object r = u->obj(static_cast<PyRef*>(packed.get())->obj);
           if (!nb::isinstance<Tensor>(r))
             throw nb::type_error(("Output of saved tensor unpack_hook expected to be a Tensor but got result of type " +
                                   std::string(nb::type_name(r.type()).c_str()))
                                      .c_str());
           return nb::cast<Tensor>(r);
         }});
  });
  m.def("_pop_saved_tensor_hooks", &pop_saved_tensor_hooks);
  m.def("_saved_tensor_hooks_disabled", []() { return saved_tensor_hooks_disabled_message(); });
  m.def("_set_saved_tensor_hooks_disabled",
        [](const std::string& msg) { saved_tensor_hooks_disabled_message() = msg; });

  m.def("is_grad_enabled", &grad_mode_enabled);
  m.def("_set_grad_enabled", &set_grad_enabled);
  m.def("is_inference_mode_enabled", &inference_mode_enabled);
  m.def("_set_inference_mode", [](bool on) {
    bool prev = inference_mode_tls();
    inference_mode_tls() = on;
    return prev;
  });
  m.def("is_anomaly_enabled", &anomaly_mode_enabled);
  m.def("_set_anomaly_enabled", [](bool on) {
    set_anomaly_trace_fn(&python_stack);
    set_anomaly_enabled(on);
  });

  m.def(
      "_backward",
      [](nb::handle tensors, nb::handle grads, nb::handle retain_graph, bool create_graph,
         nb::handle inputs) {
        BackwardOptions o;
        if (!retain_graph.is_none()) o.retain_graph = nb::cast<bool>(retain_graph);
        o.create_graph = create_graph;
        o.inputs = tensor_list(inputs);
        TensorList ts = tensor_list(tensors), gs = tensor_list(grads);
        if (gs.empty()) gs.resize(ts.size());
        nb::gil_scoped_release nogil;  // Python hooks and Functions take it back (py_hook, _function_record)
        backward(ts, gs, o);
      },
      "tensors"_a, "grad_tensors"_a.none(), "retain_graph"_a.none(), "create_graph"_a,
      "inputs"_a.none());

  m.def(
      "_grad",
      [](nb::handle outputs, nb::handle inputs, nb::handle grad_outputs, nb::handle retain_graph,
         bool create_graph, bool allow_unused) {
        TensorList outs = tensor_list(outputs), ins = tensor_list(inputs),
                   gs = tensor_list(grad_outputs);
        if (gs.empty()) gs.resize(outs.size());
        std::optional<bool> rg;
        if (!retain_graph.is_none()) rg = nb::cast<bool>(retain_graph);
        TensorList r;
        {
          nb::gil_scoped_release nogil;
          r = grad(outs, ins, gs, rg, create_graph, allow_unused);
        }
        nb::list l;
        for (const Tensor& t : r) l.append(opt_tensor(t));
        return nb::tuple(l);
      },
      "outputs"_a, "inputs"_a, "grad_outputs"_a.none(), "retain_graph"_a.none(), "create_graph"_a,
      "allow_unused"_a);

  // Custom Function (python/kiln/autograd/function.py): links forward's outputs to a CustomNode
  // whose backward calls `backward_cb(saved, grads)`; the recording is autograd::record_function,
  // shared with C++ Function<T>. Returns the outputs (fresh aliases where an output is an input).
  m.def("_function_record",
        [](const std::string& name, nb::handle inputs, nb::list outputs, nb::handle to_save,
           nb::handle non_differentiable, nb::handle dirty, bool materialize_grads,
           nb::object backward_cb) -> nb::list {
          autograd::FunctionRecord rec;
          rec.name = name;
          rec.inputs = tensor_list(inputs);
          for (nb::handle o : outputs)
            rec.outputs.push_back(nb::isinstance<Tensor>(o) ? nb::cast<Tensor>(o) : Tensor());
          rec.to_save = tensor_list(to_save);
          rec.non_differentiable = tensor_list(non_differentiable);
          rec.dirty = tensor_list(dirty);
          rec.materialize_grads = materialize_grads;
          auto cb = std::make_shared<PyRef>(PyRef{std::move(backward_cb)});
          rec.backward = [cb](CustomNode& self, TensorList&& grads) -> TensorList {
            TensorList saved = self.unpack_saved();
            nb::gil_scoped_acquire gil;
            nb::list ps, gs;
            for (const Tensor& t : saved) ps.append(opt_tensor(t));
            for (const Tensor& g : grads) gs.append(opt_tensor(g));
            nb::object r = cb->obj(ps, gs);
            TensorList out;
            for (nb::handle x : r) out.push_back(x.is_none() ? Tensor() : nb::cast<Tensor>(x));
            return out;
          };
          TensorList outs = autograd::record_function(std::move(rec));
          nb::list result;
          size_t k = 0;
          for (nb::handle o : outputs) {
            const Tensor& t = outs[k++];
            result.append(t.defined() ? nb::cast(t) : nb::borrow(o));
          }
          return result;
        });
}

}  // namespace kiln::py
