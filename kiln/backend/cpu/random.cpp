// CPU kernel of random_fill_, the table op every random function reduces to (its entry, schema, meta
// and the front ends are in kiln/ops/random.cpp), registered by op name. The per-ISA draws are in
// kernels_random.cpp.
#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/core/visit.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

void random_kernel(const OpDef&, const TensorList&, const Attrs& a, TensorList& out) {
  const Tensor& c = out[0];
  const int dist = static_cast<int>(attr<int64_t>(a, 0));
  cpu::RandomArgs args;
  args.p0 = attr<double>(a, 1), args.p1 = attr<double>(a, 2);
  args.key = static_cast<uint64_t>(attr<int64_t>(a, 3)), args.first = static_cast<uint64_t>(attr<int64_t>(a, 4));
  if (a.size() > 6) args.lo = attr<int64_t>(a, 5), args.hi = attr<int64_t>(a, 6);
  cpu::RandomFn fn = cpu::cpu_kernels().random[dist][static_cast<int>(c.dtype())];
  if (!fn) raise_dtype_unsupported("random", c.dtype());
  void* p = c.data_ptr();
  cpu::parallel_for(c.numel(), 4096, [&](int64_t b, int64_t e) { fn(p, b, e, args); });
}
KernelRegistrar k_random_fill{"random_fill_", DeviceType::CPU, random_kernel};

}  // namespace
}  // namespace kiln
