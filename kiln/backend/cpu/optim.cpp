// CPU kernel of `_fused_optimizer_update` (the op-table entry, schema and front end are in
// kiln/optim/fused.cpp), registered by op name. Threads split the elements of all the parameters of
// a step together (a chunk may span several); each chunk runs the kernel table's per-ISA loop
// (kernels_optim.cpp) for the job's dtype.
#include <algorithm>
#include <vector>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/optim/detail/fused.h"

namespace kiln {

const char* optim::detail::update_isa() { return cpu::cpu_isa(); }

namespace {

using optim::detail::Algo;
using optim::detail::Hyper;
using optim::detail::Segment;

void run_update(Algo algo, const Hyper& h, Dtype dtype, const std::vector<Segment>& segs) {
  std::vector<int64_t> start(segs.size() + 1, 0);
  for (size_t k = 0; k < segs.size(); ++k) start[k + 1] = start[k] + segs[k].n;
  const int64_t total = start.back();
  if (total == 0) return;
  cpu::OptimUpdateFn fn = cpu::cpu_kernels().optim_update[static_cast<int>(dtype)];
  KILN_CHECK(fn, Runtime, "_fused_optimizer_update", "no update kernel for ", dtype_name(dtype));
  cpu::parallel_for(total, cpu::kGrainSize, [&](int64_t b, int64_t e) {
    size_t k = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), b) - start.begin()) - 1;
    for (; k < segs.size() && start[k] < e; ++k) {
      int64_t lo = std::max(b, start[k]) - start[k];
      int64_t hi = std::min(e, start[k + 1]) - start[k];
      if (lo < hi) fn(algo, h, segs[k], lo, hi);
    }
  });
}

void update_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList&) {
  Algo algo;
  const Hyper h = optim::detail::hyper_of(a, algo);
  std::vector<Segment> segs = optim::detail::segments_of(a);
  for (size_t k = 0; k < segs.size(); ++k) {
    const Tensor* t = &in[5 * k];
    auto ptr = [](const Tensor& x) { return x.defined() ? x.data_ptr() : nullptr; };
    segs[k].p = t[0].data_ptr(), segs[k].g = t[1].data_ptr();
    segs[k].s0 = ptr(t[2]), segs[k].s1 = ptr(t[3]), segs[k].s2 = ptr(t[4]);
    segs[k].n = t[0].numel();
  }
  if (!segs.empty()) run_update(algo, h, in[0].dtype(), segs);
}

KernelRegistrar k_update{"_fused_optimizer_update", DeviceType::CPU, update_kernel};

}  // namespace
}  // namespace kiln
