// kiln.Graph (kiln/dispatch/graph.h); kiln.graph, the context manager, is Python (kiln/graphs.py).
#include "common.h"
#include "kiln/autograd/graphed.h"
#include "kiln/autograd/nodes.h"
#include "kiln/dispatch/graph.h"

namespace kiln::py {
namespace {
TensorList tensors_of(nb::handle seq, const char* what) {
  TensorList r;
  for (nb::handle x : seq) {
    if (!nb::isinstance<Tensor>(x))
      throw nb::type_error((std::string(what) + " must be tensors, got " +
                            nb::cast<std::string>(nb::str(x.type().attr("__name__")))).c_str());
    r.push_back(nb::cast<Tensor>(x));
  }
  return r;
}
nb::list py_tensors(const TensorList& ts) {
  nb::list l;
  for (const Tensor& t : ts) l.append(t.defined() ? nb::cast(t) : nb::none());
  return l;
}
}  // namespace

void bind_graph(nb::module_& m) {
  nb::class_<GraphPool>(m, "_GraphPool")
      .def("__eq__", [](const GraphPool& a, nb::handle b) {
        return nb::isinstance<GraphPool>(b) && a == nb::cast<const GraphPool&>(b);
      })
      .def("__hash__", [](const GraphPool& p) { return nb::hash(nb::int_(reinterpret_cast<uintptr_t>(p.state().get()))); });
  m.def("graph_pool_handle", &GraphPool::create);
  nb::class_<Graph>(m, "Graph")
      .def(nb::init<>())
      .def("capture_begin", [](Graph& g, std::optional<GraphPool> pool, nb::handle, bool lenient) {
        g.capture_begin(pool ? *pool : GraphPool(), lenient);
      }, "pool"_a.none() = nb::none(), "capture_error_mode"_a.none() = nb::none(), "_lenient"_a = false)
      .def("pool", &Graph::pool)
      .def("capture_end", &Graph::capture_end)
      .def("replay", &Graph::replay, nb::call_guard<nb::gil_scoped_release>())
      .def("reset", &Graph::reset)
      .def_prop_ro("capturing", &Graph::capturing)
      .def_prop_ro("num_kernels", &Graph::num_kernels)
      .def_prop_ro("arena_bytes", &Graph::arena_bytes)
      .def_prop_ro("planned_buffers", &Graph::planned_buffers)
      .def("__repr__", [](const Graph& g) {
        return "kiln.Graph(" + std::to_string(g.num_kernels()) + " kernels" + (g.capturing() ? ", capturing" : "") + ")";
      });

  // kiln.compile's check of a module's tensors per call: each still has the memory and the
  // requires_grad it had when the guard was made.
  struct TensorGuard {
    TensorList ts;
    std::vector<std::pair<const void*, bool>> want;  // first element's address, requires_grad
    static std::pair<const void*, bool> of(const Tensor& t) {
      const void* d = t.storage() ? static_cast<const char*>(t.storage()->data()) +
                                        t.storage_offset() * static_cast<int64_t>(t.itemsize())
                                  : nullptr;
      return {d, t.requires_grad()};
    }
  };
  nb::class_<TensorGuard>(m, "_TensorGuard")
      .def("__init__", [](TensorGuard* g, nb::handle tensors) {
        new (g) TensorGuard();
        g->ts = tensors_of(tensors, "_TensorGuard");
        for (const Tensor& t : g->ts) g->want.push_back(TensorGuard::of(t));
      })
      .def("check", [](const TensorGuard& g) {
        for (size_t i = 0; i < g.ts.size(); ++i)
          if (TensorGuard::of(g.ts[i]) != g.want[i]) return false;
        return true;
      });

  // kiln.make_graphed_callables (python/kiln/graphs.py flattens arguments and outputs): callables
  // take and return flat lists of tensors. The interpreter lock is held while the callables are
  // captured (they are Python) and released while a call replays.
  nb::class_<GraphedCallable>(m, "_GraphedCallable")
      .def("__call__", [](const GraphedCallable& g, nb::handle args) {
        TensorList a = tensors_of(args, "graphed callable arguments");
        TensorList r;
        {
          nb::gil_scoped_release nogil;
          r = g(a);
        }
        return py_tensors(r);
      })
      .def("_first_call", [](const GraphedCallable& g, nb::handle args) {
        TensorList a = tensors_of(args, "graphed callable arguments");
        TensorList r;
        {
          nb::gil_scoped_release nogil;
          r = g.first_call(a);
        }
        return py_tensors(r);
      })
      .def_prop_ro("backward_pending", &GraphedCallable::backward_pending)
      .def_prop_ro("parameters", [](const GraphedCallable& g) { return py_tensors(g.parameters()); })
      .def_prop_ro("forward_graph", &GraphedCallable::forward_graph, nb::rv_policy::reference_internal)
      .def_prop_ro("backward_graph", &GraphedCallable::backward_graph, nb::rv_policy::reference_internal);
  // kiln.compile: the backward of a forward it captured itself (leniently, as the call).
  m.def("_graphed_from_capture", [](Graph& g, nb::handle args, nb::handle outs, uint64_t seq0, uint64_t runs0,
                                    std::optional<GraphPool> pool) {
    Graph fwd = std::move(g);
    g = Graph();  // the Python object keeps a valid, empty graph
    return make_graphed_from_capture(std::move(fwd), tensors_of(args, "arguments"), tensors_of(outs, "outputs"),
                                     seq0, runs0, pool ? *pool : GraphPool());
  });
  m.def("_next_sequence_nr", &next_sequence_nr);
  m.def("_engine_runs", &engine_runs);
  m.def("_make_graphed_callables", [](nb::list fns, nb::list sample_args, int num_warmup_iters,
                                      bool allow_unused_input, std::optional<GraphPool> pool) {
    std::vector<GraphedFn> cs;
    std::vector<TensorList> samples;
    for (nb::handle f : fns) {
      nb::object fn = nb::borrow(f);
      cs.push_back([fn](const TensorList& args) {
        nb::object r = fn(py_tensors(args));
        return tensors_of(r, "graphed callable outputs");
      });
    }
    for (nb::handle a : sample_args) samples.push_back(tensors_of(a, "sample_args"));
    GraphedOptions o;
    o.num_warmup_iters = num_warmup_iters;
    o.allow_unused_input = allow_unused_input;
    if (pool) o.pool = *pool;
    std::vector<GraphedCallable> made = make_graphed_callables(cs, samples, o);
    cs.clear();  // drop the Python callables with the lock held
    nb::list r;
    for (auto& g : made) r.append(nb::cast(std::move(g)));
    return r;
  }, "fns"_a, "sample_args"_a, "num_warmup_iters"_a, "allow_unused_input"_a, "pool"_a.none());
}
}  // namespace kiln::py
