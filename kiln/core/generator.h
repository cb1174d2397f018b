// Counter-based random numbers (Philox-4x32-10). Element i of a random op draws from counter
// (offset + i), so results depend only on the seed and the op sequence, never on thread count.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

namespace kiln {

// The distributions of the random_fill_ op (its `dist` attribute; the kernels: backend/cpu).
// Randint: integers in [p0, p1); FromTo (Tensor.random_): integers in [lo, hi] (random_fill_'s int
// attributes, exact), every int64 value when that span is 2^64.
enum class RandomDist : int { Uniform, Normal, Bernoulli, Exponential, LogNormal, Geometric, Cauchy, Randint, FromTo, Count };

class Generator;
namespace detail {
// Set while a graph captures on this thread (kiln/dispatch/graph.cpp): told of every reservation, so a
// replay can reserve the same counts again and draw fresh numbers.
extern thread_local void (*reserve_hook)(Generator* g, uint64_t n, uint64_t key, uint64_t start);
}  // namespace detail

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ULL) : seed_(seed) {}
  void manual_seed(uint64_t seed) {
    std::lock_guard<std::mutex> g(mu_);
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t initial_seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t o) { offset_ = o; }
  // Reserves n counters; returns (key, first counter).
  std::pair<uint64_t, uint64_t> reserve(uint64_t n) {
    uint64_t key, start;
    {
      std::lock_guard<std::mutex> g(mu_);
      start = offset_;
      offset_ += n;
      key = seed_;
    }
    if (detail::reserve_hook) [[unlikely]] detail::reserve_hook(this, n, key, start);
    return {key, start};
  }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
  std::mutex mu_;
};

Generator& default_generator();

// Philox-4x32-10 block for (key, counter).
inline std::array<uint32_t, 4> philox(uint64_t key, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {c0, c1, c2, c3};
}

}  // namespace kiln
