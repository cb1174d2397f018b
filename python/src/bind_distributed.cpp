// Python binding: kiln.distributed (process groups, Work, functional collectives, the DDP reducer).
// The public names live in python/kiln/distributed/; these are its private entry points.
#include <nanobind/stl/shared_ptr.h>

#include "common.h"
#include "kiln/distributed/ddp.h"
#include "kiln/distributed/functional.h"
#include "kiln/distributed/process_group.h"

namespace kiln::py {
namespace {
namespace d = kiln::distributed;
using PG = d::ProcessGroup;
using Ts = std::vector<Tensor>;

d::Millis ms(double seconds) { return d::Millis(static_cast<int64_t>(seconds * 1000.0 + 0.5)); }
d::ReduceOp rop(int op) {
  if (op < 0 || op > 4) throw nb::value_error("[distributed] unknown ReduceOp");
  return static_cast<d::ReduceOp>(op);
}
}  // namespace

void bind_distributed(nb::module_& m) {
  nb::class_<d::Work>(m, "_Work")
      .def("wait",
           [](d::Work& w, std::optional<double> timeout) {
             std::optional<d::Millis> t;
             if (timeout) t = ms(*timeout);
             return w.wait(t);
           },
           "timeout"_a = nb::none(), nb::call_guard<nb::gil_scoped_release>())
      .def("is_completed", &d::Work::is_completed)
      .def("is_success", &d::Work::is_success)
      .def("result", [](const d::Work& w) { return w.result(); })
      .def_prop_ro("source", [](const d::Work& w) { return w.source; });

  nb::class_<PG>(m, "_ProcessGroup")
      .def_prop_ro("id", &PG::id)
      .def("rank", &PG::rank)
      .def("size", &PG::size)
      .def_prop_ro("ranks", [](const PG& g) { return g.ranks(); })
      .def("group_rank", &PG::group_rank)
      .def("global_rank", &PG::global_rank)
      .def_prop_ro("timeout_seconds", [](const PG& g) { return g.timeout().count() / 1000.0; })
      .def("describe", &PG::describe)
      // blocking: waits too (raising the Work's error), so that a synchronous call crosses once
      .def("all_reduce",
           [](PG& g, const Tensor& t, int op, bool blocking) {
             auto w = g.all_reduce(t, rop(op), blocking);
             if (blocking) w->wait();
             return w;
           },
           "tensor"_a, "op"_a, "blocking"_a = false, nb::call_guard<nb::gil_scoped_release>())
      .def("broadcast", &PG::broadcast)
      .def("reduce", [](PG& g, const Tensor& t, int root, int op) { return g.reduce(t, root, rop(op)); })
      .def("all_gather", [](PG& g, const Ts& outs, const Tensor& in) { return g.all_gather(outs, in); })
      .def("all_gather_into_tensor", &PG::all_gather_into_tensor)
      .def("reduce_scatter",
           [](PG& g, const Tensor& out, const Ts& ins, int op) { return g.reduce_scatter(out, ins, rop(op)); })
      .def("reduce_scatter_tensor",
           [](PG& g, const Tensor& out, const Tensor& in, int op) { return g.reduce_scatter_tensor(out, in, rop(op)); })
      .def("all_to_all", [](PG& g, const Ts& outs, const Ts& ins) { return g.all_to_all(outs, ins); })
      .def("all_to_all_single", &PG::all_to_all_single)
      .def("gather", [](PG& g, const Ts& outs, const Tensor& in, int root) { return g.gather(outs, in, root); })
      .def("scatter", [](PG& g, const Tensor& out, const Ts& ins, int root) { return g.scatter(out, ins, root); })
      .def("barrier", &PG::barrier)
      .def("send", &PG::send)
      .def("recv", &PG::recv);

  m.def("_dist_is_available", &d::is_available);
  m.def("_dist_init", [](const std::string& backend, double timeout, int world_size, int rank) {
    d::InitOptions o;
    o.backend = backend;
    o.timeout = ms(timeout);
    o.world_size = world_size;
    o.rank = rank;
    nb::gil_scoped_release nogil;
    d::init_process_group(o);
  });
  m.def("_dist_is_initialized", &d::is_initialized);
  m.def("_dist_rank", &d::get_rank);
  m.def("_dist_world_size", &d::get_world_size);
  m.def("_dist_world", &d::world);
  m.def("_dist_group", &d::group_by_id);
  m.def("_dist_new_group", [](const std::vector<int>& ranks, std::optional<double> timeout) {
    std::optional<d::Millis> t;
    if (timeout) t = ms(*timeout);
    nb::gil_scoped_release nogil;
    return d::new_group(ranks, t);
  });
  m.def("_dist_destroy", [](std::shared_ptr<PG> g) {
    nb::gil_scoped_release nogil;
    d::destroy_process_group(g);
  }, "group"_a = nb::none());
  m.def("_dist_set_checks", &d::set_consistency_checks);
  m.def("_dist_bench_raw_allreduce", &d::bench_raw_allreduce, nb::call_guard<nb::gil_scoped_release>());
  m.def("_dist_abort", [](int code) { d::abort_job(code); });

  // functional collectives (table ops; group by id)
  namespace f = kiln::distributed::functional;
  m.def("_fc_all_reduce", [](const Tensor& t, const std::string& op, int g) {
    return f::all_reduce(t, op, d::group_by_id(g));
  });
  m.def("_fc_all_gather", [](const Tensor& t, int64_t dim, int g) { return f::all_gather_tensor(t, dim, d::group_by_id(g)); });
  m.def("_fc_reduce_scatter", [](const Tensor& t, const std::string& op, int64_t dim, int g) {
    return f::reduce_scatter_tensor(t, op, dim, d::group_by_id(g));
  });
  m.def("_fc_all_to_all_single", [](const Tensor& t, const Shape& os, const Shape& is, int g) {
    return f::all_to_all_single(t, os, is, d::group_by_id(g));
  });
  m.def("_fc_broadcast", [](const Tensor& t, int src, int g) { return f::broadcast(t, src, d::group_by_id(g)); });
  m.def("_fc_reduce", [](const Tensor& t, int dst, const std::string& op, int g) {
    return f::reduce(t, dst, op, d::group_by_id(g));
  });

  nb::class_<d::Reducer>(m, "_Reducer")
      .def("__init__",
           [](d::Reducer* self, const TensorList& params, std::shared_ptr<PG> g, double cap, bool unused, bool view,
              bool static_graph, bool bcast) {
             d::DDPOptions o;
             o.bucket_cap_mb = cap;
             o.find_unused_parameters = unused;
             o.gradient_as_bucket_view = view;
             o.static_graph = static_graph;
             o.broadcast_buffers = bcast;
             new (self) d::Reducer(params, std::move(g), o);
           })
      .def("prepare_for_backward", &d::Reducer::prepare_for_backward)
      .def("set_require_sync", &d::Reducer::set_require_sync)
      .def("require_sync", &d::Reducer::require_sync)
      .def("broadcast_from_rank0", &d::Reducer::broadcast_from_rank0, nb::call_guard<nb::gil_scoped_release>())
      .def("bucket_indices", &d::Reducer::bucket_indices)
      .def("last_wait_seconds", &d::Reducer::last_wait_seconds);
}

}  // namespace kiln::py
