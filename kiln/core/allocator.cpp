#include "kiln/core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <new>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/core/accelerator.h"
#include "kiln/core/error.h"

namespace kiln {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kMaxCached = size_t(1) << 30;  // cap on cached (free) bytes

size_t size_class(size_t n) {
  if (n <= 512) return n == 0 ? kAlign : (n + kAlign - 1) / kAlign * kAlign;
  // four classes per power of two
  size_t p = size_t(1) << (63 - __builtin_clzll(n - 1));  // largest power of two < n
  size_t step = p / 4;
  return (n + step - 1) / step * step;
}

constexpr size_t kSmallClasses = 512 / kAlign;  // the classes up to 512 bytes: 64, 128, ..., 512

// The cache's lock: its critical sections are a few loads and stores (a free-list push or pop and the
// counters), so an uncontended pthread mutex's lock and unlock were most of a small allocation's cost.
// Contended, it spins briefly, then yields the core.
class SpinLock {
 public:
  void lock() {
    for (int spins = 0; held_.exchange(true, std::memory_order_acquire); ++spins)
      while (held_.load(std::memory_order_relaxed)) {
        if (++spins > 64) std::this_thread::yield();
#if defined(__x86_64__) || defined(__i386__)
        else __builtin_ia32_pause();
#endif
      }
  }
  void unlock() { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

struct Cache {
  SpinLock mu;
  std::vector<void*> small[kSmallClasses];  // free blocks of the small classes, by class (no hashing)
  std::unordered_map<size_t, std::vector<void*>> free_blocks;  // the larger classes
  size_t cached = 0;
  MemoryStats stats;

  std::vector<void*>& blocks(size_t cls) { return cls <= 512 ? small[cls / kAlign - 1] : free_blocks[cls]; }
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: tensors may outlive static destruction
  return *c;
}

}  // namespace

void* cpu_allocate(size_t nbytes) {
  size_t cls = size_class(nbytes);
  Cache& c = cache();
  {
    std::lock_guard<SpinLock> g(c.mu);
    c.stats.num_allocs++;
    c.stats.allocated_bytes += cls;
    if (c.stats.allocated_bytes > c.stats.peak_allocated_bytes)
      c.stats.peak_allocated_bytes = c.stats.allocated_bytes;
    std::vector<void*>* free_list = nullptr;
    if (cls <= 512) {
      free_list = &c.small[cls / kAlign - 1];
    } else if (auto it = c.free_blocks.find(cls); it != c.free_blocks.end()) {
      free_list = &it->second;
    }
    if (free_list && !free_list->empty()) {
      void* p = free_list->back();
      free_list->pop_back();
      c.cached -= cls;
      c.stats.cache_hits++;
      return p;
    }
    c.stats.reserved_bytes += cls;
  }
  void* p = std::aligned_alloc(kAlign, cls);
  if (!p) {
    std::lock_guard<SpinLock> g(c.mu);
    c.stats.allocated_bytes -= cls;
    c.stats.reserved_bytes -= cls;
    KILN_FAIL(OutOfMemory, "allocate", "out of memory: tried to allocate ", nbytes, " bytes");
  }
  return p;
}

void cpu_free(void* ptr, size_t nbytes) {
  if (!ptr) return;
  size_t cls = size_class(nbytes);
  Cache& c = cache();
  std::lock_guard<SpinLock> g(c.mu);
  c.stats.num_frees++;
  c.stats.allocated_bytes -= cls;
  if (c.cached + cls <= kMaxCached) {
    c.blocks(cls).push_back(ptr);
    c.cached += cls;
  } else {
    c.stats.reserved_bytes -= cls;
    std::free(ptr);
  }
}

MemoryStats memory_stats() {
  std::lock_guard<SpinLock> g(cache().mu);
  return cache().stats;
}

void reset_peak_memory_stats() {
  std::lock_guard<SpinLock> g(cache().mu);
  cache().stats.peak_allocated_bytes = cache().stats.allocated_bytes;
}

void empty_cache() {
  Cache& c = cache();
  std::lock_guard<SpinLock> g(c.mu);
  auto release = [&](size_t cls, std::vector<void*>& blocks) {
    for (void* p : blocks) std::free(p);
    c.stats.reserved_bytes -= static_cast<int64_t>(cls * blocks.size());
    blocks.clear();
  };
  for (size_t k = 0; k < kSmallClasses; ++k) release((k + 1) * kAlign, c.small[k]);
  for (auto& [cls, blocks] : c.free_blocks) release(cls, blocks);
  c.cached = 0;
}

namespace {
void* meta_allocate(size_t) { return nullptr; }
void meta_free(void*, size_t) {}
DeviceAllocator* allocators() {
  static DeviceAllocator a[8] = {{cpu_allocate, cpu_free}, {}, {meta_allocate, meta_free}};
  return a;
}
}  // namespace

void register_device_allocator(int device_type, DeviceAllocator a) { allocators()[device_type] = a; }

const DeviceAllocator& device_allocator(int device_type, const char* device_name) {
  const DeviceAllocator& a = allocators()[device_type];
  if (a.allocate == nullptr && std::string_view(device_name) == "cuda")
    KILN_FAIL(Assertion, device_name, "kiln cannot place a tensor on device 'cuda': ", accelerator::diagnose().reason);
  KILN_CHECK(a.allocate != nullptr, Assertion, device_name, "kiln was built without a ", device_name,
             " backend, so no tensor can be placed on device '", device_name,
             "' (available devices: cpu, meta)");
  return a;
}

}  // namespace kiln
