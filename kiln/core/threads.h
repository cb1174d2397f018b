// The number of threads kiln's kernels use (torch.set_num_threads / get_num_threads); the pool
// itself is the CPU backend's (backend/cpu/parallel.h).
#pragma once

namespace kiln {
void set_num_threads(int n);
int get_num_threads();
}  // namespace kiln
