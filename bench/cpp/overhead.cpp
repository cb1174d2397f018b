// Per-op overhead of kiln's C++ API: the time of one call on tiny tensors, where the kernel is
// negligible and what is measured is the path through the op table (front end, dispatch, meta,
// allocation, loop set-up). bench/bench.py runs it (build/kiln_bench_overhead) and prints its rows.
//   kiln_bench_overhead            prints "name<TAB>ns per call" lines
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <kiln/kiln.h>

namespace {

template <class F>
double ns_per_call(F&& f) {
  for (int i = 0; i < 2000; ++i) f();  // warm the allocator's cache and the branch predictors
  std::vector<double> samples;
  for (int rep = 0; rep < 15; ++rep) {
    const int n = 20000;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) f();
    auto t1 = std::chrono::steady_clock::now();
    samples.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / n);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace

int main() {
  using namespace kiln;
  set_num_threads(1);
  Tensor a = randn({1}), b = randn({1}), m = randn({4, 4});
  volatile int64_t sink = 0;
  std::printf("add f32 1-elem\t%.1f\n", ns_per_call([&] { sink = sink + add(a, b).numel(); }));
  std::printf("mul f32 1-elem\t%.1f\n", ns_per_call([&] { sink = sink + mul(a, b).numel(); }));
  std::printf("add_ f32 1-elem (in place)\t%.1f\n", ns_per_call([&] { add_(a, b); }));
  std::printf("relu f32 1-elem\t%.1f\n", ns_per_call([&] { sink = sink + relu(a).numel(); }));
  std::printf("sum f32 4x4\t%.1f\n", ns_per_call([&] { sink = sink + sum(m).numel(); }));
  std::printf("view f32 4x4 -> 16\t%.1f\n", ns_per_call([&] { sink = sink + m.view({16}).numel(); }));
  return 0;
}
