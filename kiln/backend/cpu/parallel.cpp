#include "kiln/backend/cpu/parallel.h"

#include <omp.h>

#include <thread>

#include "kiln/core/error.h"

extern "C" void openblas_set_num_threads(int);

namespace kiln {
namespace {
int g_threads = 0;
}

void set_num_threads(int n) {
  KILN_CHECK(n > 0, Value, "set_num_threads", "number of threads must be positive, got ", n);
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
