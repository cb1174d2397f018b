#include "kiln/backend/cpu/parallel.h"

#include <omp.h>
#include <pthread.h>

#include <thread>

#include "kiln/core/error.h"

extern "C" void openblas_set_num_threads(int);

namespace kiln {
namespace {
int g_threads = 0;
// GNU OpenMP cannot restart its thread pool in a process forked after the pool ran: a parallel region
// in the child waits forever for threads that were not copied. A child of a parent that may have used
// the pool (more than one thread) therefore runs kiln on one thread, which enters no parallel region
// (kernels and OpenBLAS go serial), and refuses more.
bool g_forked_single = false;
void after_fork_in_child() {
  if (g_threads <= 1) return;  // 0: no kernel has asked for threads yet, so the pool never ran
  g_threads = 1;
  g_forked_single = true;
  omp_set_num_threads(1);
  openblas_set_num_threads(1);
}
struct ForkGuard {
  ForkGuard() { pthread_atfork(nullptr, nullptr, &after_fork_in_child); }
} fork_guard;
}  // namespace

void set_num_threads(int n) {
  KILN_CHECK(n > 0, Value, "set_num_threads", "number of threads must be positive, got ", n);
  KILN_CHECK(n == 1 || !g_forked_single, Runtime, "set_num_threads",
             "this process was forked from one that used kiln's OpenMP thread pool, which cannot be "
             "restarted after fork (GNU OpenMP); kiln runs on one thread here. Start worker processes "
             "with the 'spawn' or 'forkserver' method to use more threads in them");
  g_threads = n;
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int get_num_threads() {
  if (g_threads == 0) {
    int n = omp_get_max_threads();
    g_threads = n > 0 ? n : 1;
    openblas_set_num_threads(g_threads);
  }
  return g_threads;
}

namespace cpu {
bool in_parallel_region() { return omp_in_parallel(); }
}  // namespace cpu

}  // namespace kiln
