// The CPU caching allocator: 64-byte aligned blocks in size classes (four per power of two), freed
// blocks kept for reuse up to a cap. Statistics feed kiln.memory_stats().
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln {

struct MemoryStats {
  int64_t allocated_bytes = 0;       // bytes in live blocks (rounded to the size class)
  int64_t peak_allocated_bytes = 0;  // high-water mark of allocated_bytes since last reset
  int64_t reserved_bytes = 0;        // allocated + cached
  int64_t num_allocs = 0;            // allocate() calls
  int64_t num_frees = 0;
  int64_t cache_hits = 0;
};

void* cpu_allocate(size_t nbytes);
void cpu_free(void* ptr, size_t nbytes);
MemoryStats memory_stats();
void reset_peak_memory_stats();
void empty_cache();  // returns cached blocks to the system

}  // namespace kiln
