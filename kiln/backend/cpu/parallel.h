// Threading: one OpenMP pool; BLAS is told the same count. Never nested.
#pragma once

#include <cstdint>

#include "kiln/core/threads.h"

namespace kiln::cpu {

// Below this many elements of work an op stays on one thread.
inline constexpr int64_t kGrainSize = 32768;

bool in_parallel_region();
// Tells OpenBLAS its thread count: kiln's, or one in deterministic mode (use_deterministic_algorithms).
void apply_blas_threads();

// Calls f(begin, end) over [0, n) split into contiguous chunks, one per thread; serial when n is
// below grain or already inside a parallel region. f must not throw.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f);

}  // namespace kiln::cpu

#include <omp.h>

namespace kiln::cpu {
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  if (n <= grain) {  // one chunk: no need to ask OpenMP anything (the common case of small tensors)
    f(int64_t(0), n);
    return;
  }
  int nt = get_num_threads();
  if (nt <= 1 || omp_in_parallel()) {
    f(int64_t(0), n);
    return;
  }
  int64_t max_threads = (n + grain - 1) / grain;
  if (max_threads < nt) nt = static_cast<int>(max_threads);
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num(), T = omp_get_num_threads();
    int64_t chunk = (n + T - 1) / T;
    int64_t b = t * chunk, e = b + chunk < n ? b + chunk : n;
    if (b < e) f(b, e);
  }
}
}  // namespace kiln::cpu
