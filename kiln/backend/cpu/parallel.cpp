#include "kiln/backend/cpu/parallel.h"

#include <omp.h>
#include <pthread.h>

#include <algorithm>
#include <thread>

#include "kiln/core/deterministic.h"
#include "kiln/core/error.h"

extern "C" void openblas_set_num_threads(int);

namespace kiln {
namespace {
int g_threads = 0;
// GNU OpenMP does not restart its thread pool in a forked child: a parallel region there waits for
// threads that were not copied. So before fork() the forking thread releases its pool
// (omp_pause_resource_all: the threads exit) and both processes start a fresh one on their next
// parallel region. Where that cannot be done (fork from inside a parallel region), the child runs
// kiln on one thread, which enters no parallel region (kernels and OpenBLAS go serial), and refuses more.
bool g_forked_single = false;
bool g_paused = false;
void before_fork() {
  g_paused = g_threads <= 1 || (!omp_in_parallel() && omp_pause_resource_all(omp_pause_soft) == 0);
}
void after_fork_in_child() {
  if (g_paused) return;  // 0 or 1 thread, or the pool was released: the child starts its own
  g_threads = 1;
  g_forked_single = true;
  omp_set_num_threads(1);
  openblas_set_num_threads(1);
}
struct ForkGuard {
  ForkGuard() { pthread_atfork(&before_fork, nullptr, &after_fork_in_child); }
} fork_guard;
}  // namespace

void set_num_threads(int n) {
  KILN_CHECK(n > 0, Runtime, "set_num_threads", "set_num_threads expects a positive integer, got ", n);
  KILN_CHECK(n == 1 || !g_forked_single, Runtime, "set_num_threads",
             "this process was forked from inside a parallel region of kiln's OpenMP thread pool, "
             "which cannot be restarted after that (GNU OpenMP); kiln runs on one thread here. Fork "
             "outside kiln's kernels, or start workers with the 'spawn' or 'forkserver' method");
  g_threads = n;
  omp_set_num_threads(n);
  cpu::apply_blas_threads();
}

int get_num_threads() {
  if (g_threads == 0) {
    int n = omp_get_max_threads();
    g_threads = n > 0 ? n : 1;
    cpu::apply_blas_threads();
  }
  return g_threads;
}

namespace cpu {
bool in_parallel_region() { return omp_in_parallel(); }
// OpenBLAS splits a product differently on different thread counts (its bits change): in
// deterministic mode it runs on one thread; kiln's own loops keep their thread-independent splits.
void apply_blas_threads() {
  openblas_set_num_threads(are_deterministic_algorithms_enabled() ? 1 : std::max(g_threads, 1));
}
}  // namespace cpu

}  // namespace kiln
