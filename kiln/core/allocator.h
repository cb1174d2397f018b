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

// Each device type allocates through its own allocator; Storage finds it here. cpu: the caching
// allocator below; meta: no memory at all (data() is null). A device type without one (cuda until
// its backend exists) raises when a tensor is made there, naming the missing backend.
struct DeviceAllocator {
  void* (*allocate)(size_t nbytes) = nullptr;
  void (*free)(void* ptr, size_t nbytes) = nullptr;
};
void register_device_allocator(int device_type, DeviceAllocator a);
const DeviceAllocator& device_allocator(int device_type, const char* device_name);

void* cpu_allocate(size_t nbytes);
void cpu_free(void* ptr, size_t nbytes);
MemoryStats memory_stats();
void reset_peak_memory_stats();
void empty_cache();  // returns cached blocks to the system

}  // namespace kiln
