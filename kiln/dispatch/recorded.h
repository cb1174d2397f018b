// What the layers that keep kernels for later (a stream's queue, a captured graph) share with
// dispatch: snapshots of the tensors a kernel was issued on, and running a kept kernel as dispatch
// runs one (the thread marked as inside it, so the kernel's own dispatch calls go straight to kernels).
#pragma once

#include <utility>

#include "kiln/dispatch/op.h"

namespace kiln {

// New TensorImpls with the storage, sizes, strides, offset and dtype the tensors have now (no
// autograd): a later resize, `.data =` or resize_ of the originals does not move what a kept kernel
// reads and writes, and the kept kernel holds the memory. A tensor passed twice (in place: self is an
// input and the output) gets one snapshot: `seen` maps originals to snapshots across the lists of one
// kernel.
using SnapshotMap = SmallVec<std::pair<const TensorImpl*, Tensor>, 8>;
TensorList snapshot_tensors(const TensorList& ts, SnapshotMap& seen);

// run_kernel's work for a kept kernel (no capture layer sees it).
void run_kept_kernel(KernelFn kernel, const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                     TensorList& outputs);

}  // namespace kiln
