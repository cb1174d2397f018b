#include "kiln/core/deterministic.h"

#include <atomic>

namespace kiln {
namespace cpu {
void apply_blas_threads();  // backend/cpu/parallel.cpp
}
namespace {
std::atomic<bool> g_on{false}, g_warn_only{false};
}

void use_deterministic_algorithms(bool on, bool warn_only) {
  g_on.store(on, std::memory_order_relaxed);
  g_warn_only.store(warn_only, std::memory_order_relaxed);  // torch keeps it apart from `on`
  cpu::apply_blas_threads();
}
bool are_deterministic_algorithms_enabled() { return g_on.load(std::memory_order_relaxed); }
bool is_deterministic_algorithms_warn_only_enabled() { return g_warn_only.load(std::memory_order_relaxed); }

}  // namespace kiln
