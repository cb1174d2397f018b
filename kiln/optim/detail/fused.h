// The fused multi-tensor update behind every kiln optimiser: one pass over each parameter's memory
// doing the whole update (gradient transform, state update, parameter update), vectorised per ISA
// (the CPU kernel table: base / AVX2+FMA / AVX-512, chosen at run time) and threaded over the elements of all the
// parameters of a step together. The per-element arithmetic follows torch's single-tensor path op
// by op in the parameter's dtype (float32/float64); float16/bfloat16 compute in float32.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/core/dtype.h"
#include "kiln/dispatch/op.h"
#include "kiln/optim/detail/update.h"

namespace kiln::optim::detail {

// The same through the op table (op `_fused_optimizer_update`): `tensors` holds five per segment,
// in order: parameter, gradient, state slots 0, 1, 2 (undefined where unused), all contiguous, real
// and of one dtype; the segments' pointers are ignored (taken from the tensors), their n, c0, c1 and
// fresh are passed as the op's attributes. So an optimiser step is one kernel with its buffers and
// hyper-parameters, like every other op.
void fused_update(Algo algo, const Hyper& h, const TensorList& tensors, const std::vector<Segment>& segs);

// What the kernel reads back from the op's attributes: the algorithm and hyper-parameters, and the
// segments' c0, c1 and fresh (their pointers and n come from the tensors).
Hyper hyper_of(const Attrs& a, Algo& algo);
std::vector<Segment> segments_of(const Attrs& a);

// The kernel table the update runs: "avx512", "avx2" or "base" (KILN_CPU_ISA=base/avx2 lowers it).
const char* update_isa();

}  // namespace kiln::optim::detail
