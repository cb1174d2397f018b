// kiln.Graph (kiln/dispatch/graph.h); kiln.graph, the context manager, is Python (kiln/graphs.py).
#include "common.h"
#include "kiln/dispatch/graph.h"

namespace kiln::py {

void bind_graph(nb::module_& m) {
  nb::class_<Graph>(m, "Graph")
      .def(nb::init<>())
      .def("capture_begin", &Graph::capture_begin)
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
