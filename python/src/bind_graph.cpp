// kiln.Graph (kiln/dispatch/graph.h); kiln.graph, the context manager, is Python (kiln/graphs.py).
#include "common.h"
#include "kiln/dispatch/graph.h"

namespace kiln::py {

void bind_graph(nb::module_& m) {
  nb::class_<GraphPool>(m, "_GraphPool")
      .def("__eq__", [](const GraphPool& a, nb::handle b) {
        return nb::isinstance<GraphPool>(b) && a == nb::cast<const GraphPool&>(b);
      })
      .def("__hash__", [](const GraphPool& p) { return nb::hash(nb::int_(reinterpret_cast<uintptr_t>(p.state().get()))); });
  m.def("graph_pool_handle", &GraphPool::create);
  nb::class_<Graph>(m, "Graph")
      .def(nb::init<>())
      .def("capture_begin", [](Graph& g, std::optional<GraphPool> pool, nb::handle) {
        g.capture_begin(pool ? *pool : GraphPool());
      }, "pool"_a.none() = nb::none(), "capture_error_mode"_a.none() = nb::none())
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
}
}  // namespace kiln::py
