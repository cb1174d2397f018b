// Python binding: kiln._C._vmap, kiln::func::vmap_batched for kiln.func.vmap (which flattens the
// pytrees, applies out_dims and chunk_size in Python).
#include <nanobind/stl/function.h>

#include "common.h"

namespace kiln::py {

void bind_func(nb::module_& m) {
  m.def("_vmap", [](nb::callable f, const std::vector<std::optional<Tensor>>& inputs,
                    const std::vector<std::optional<int64_t>>& in_dims, const std::string& randomness) {
    func::Randomness r = randomness == "same" ? func::Randomness::Same
                         : randomness == "different" ? func::Randomness::Different : func::Randomness::Error;
    TensorList in;
    for (const auto& t : inputs) in.push_back(t.value_or(Tensor()));
    func::BatchedResult b = func::vmap_batched(
        [&](const TensorList& xs) -> TensorList {
          nb::list args;
          for (const Tensor& x : xs) args.append(x.defined() ? nb::cast(x) : nb::none());
          nb::object res = f(args);
          TensorList out;
          for (nb::handle h : res) out.push_back(h.is_none() ? Tensor() : nb::cast<Tensor>(h));
          return out;
        },
        in, in_dims, r);
    nb::list outs, flags;
    for (size_t j = 0; j < b.outputs.size(); ++j) {
      outs.append(b.outputs[j].defined() ? nb::cast(b.outputs[j]) : nb::none());
      flags.append(static_cast<bool>(b.batched[j]));
    }
    return nb::make_tuple(outs, flags, b.batch_size);
  });
  m.def("_vmap_place", &func::place_batch_dim, "t"_a, "batched"_a, "batch_size"_a, "out_dim"_a.none());
  m.def("_vmap_stats", []() {
    const func::VmapStats& s = func::last_vmap_stats();
    return nb::make_tuple(s.rules, s.loops, s.looped_ops);
  });
}

}  // namespace kiln::py
