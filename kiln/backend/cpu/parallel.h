// Threading: one OpenMP pool; BLAS is told the same count. Never nested.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <type_traits>

#include "kiln/core/threads.h"

namespace kiln::cpu {

// Below this many elements of work an op stays on one thread.
inline constexpr int64_t kGrainSize = 32768;

bool in_parallel_region();
// Tells OpenBLAS its thread count: kiln's, or one in deterministic mode (use_deterministic_algorithms).
void apply_blas_threads();
// OpenBLAS on one thread while this lives, where on (then back to apply_blas_threads' count). Its
// OpenMP build opens a parallel region for every call it splits, and LAPACK makes calls per column
// or per block: where OMP_WAIT_POLICY=PASSIVE puts the pool to sleep after each region (as make
// bench does), or where waking an idle virtual CPU is slow, every call pays tens of microseconds
// (Zen 4, 2 threads, PASSIVE: float64 cholesky 64 x 64 12 us -> 650, qr 256 x 256 2.9 ms -> 19).
// The linear-algebra kernels hold one around LAPACK (decision 60).
class SerialBlas {
 public:
  explicit SerialBlas(bool on = true);
  ~SerialBlas();
  SerialBlas(const SerialBlas&) = delete;
  SerialBlas& operator=(const SerialBlas&) = delete;

 private:
  bool on_;
};

// Calls f(begin, end) over [0, n) split into contiguous chunks, one per thread; serial when n is
// below grain or already inside a parallel region. f must not throw.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f);

// Runs body() on this thread with the pool held as a team for its whole length (decision 55): one
// OpenMP region, whose other threads spin between jobs, so body's parallel_for calls cost a handoff
// of a microsecond instead of a region each (tens of microseconds where OMP_WAIT_POLICY=PASSIVE
// puts the pool to sleep after every region, or where waking an idle virtual CPU is slow). For work
// of many small parallel ops in a row: the runtime's run of a program. OpenBLAS sees the region
// and runs on one thread inside it: hold a KilnSgemmScope so float32 products take kiln's GEMM,
// which uses the team. At most get_num_threads() threads (kernels size per-thread scratch by it).
// Just body() on one thread or inside a region. Exceptions from body pass through.
void run_as_team(int threads, const std::function<void()>& body);
// Runs f(t, T) on T = min(threads, the pool or team) threads at once, t in [0, T), for code that
// splits its work itself and syncs its threads (a barrier between steps); f(0, 1) inside a region.
template <class F>
void run_spmd(int threads, F&& f);
// One poll of a spin-wait: the core's hint that this thread spins.
inline void cpu_pause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}
// Spins until done(): a pause per poll, then (after a few microseconds) the CPU yielded per poll, for
// a machine with more threads than CPUs.
template <class Done>
void spin_until(Done&& done) {
  for (int spins = 0; !done();) {
    if (spins == 256) {
      std::this_thread::yield();
      continue;
    }
    ++spins;
    cpu_pause();
  }
}
// A barrier for the T threads of one run_spmd call: each passes its own count of the rounds it has
// been through (from 0). The threads spin (they all run at once), and yield the CPU after a few
// microseconds of it, for a machine with more threads than CPUs (two test processes on two cores).
class SpinBarrier {
 public:
  void wait(int threads, int64_t& round) {
    const int64_t target = ++round * threads;
    arrived_.fetch_add(1, std::memory_order_acq_rel);
    spin_until([&] { return arrived_.load(std::memory_order_acquire) >= target; });
  }

 private:
  std::atomic<int64_t> arrived_{0};
};
// What the runtime learns a team from, counted per thread: parallel regions opened (parallel_for,
// run_spmd, and OpenBLAS products that a team would give to kiln's GEMM), and OpenBLAS calls big
// enough to run on several threads that a team would leave on one (float64, matrix-vector, beta != 0).
int64_t regions_opened();
void count_region();
int64_t blas_serialised_in_team();
void count_blas_serialised();
// While alive on a thread, float32 products with alpha 1 and beta 0 (bmm, blas.h's gemm; neither
// side a vector) run on kiln's packed GEMM instead of OpenBLAS, as they must in a team (OpenBLAS runs
// on one thread in a region). The runtime holds one for a whole run, team or not, so that every run
// of a program gives the same bits. Nothing in deterministic mode (OpenBLAS's bits are the ones kept
// there) or on the base table (its GEMM is plain C++).
class KilnSgemmScope {
 public:
  KilnSgemmScope();
  ~KilnSgemmScope();
  KilnSgemmScope(const KilnSgemmScope&) = delete;
  KilnSgemmScope& operator=(const KilnSgemmScope&) = delete;

 private:
  bool saved_;
};
bool kiln_sgemm_preferred();
// Whether kiln's GEMM may take float32 products at all: not in deterministic mode (OpenBLAS's bits
// are the ones kept there) nor on the base table (its GEMM is plain C++).
bool kiln_sgemm_usable();
// Whether this thread leads a team (outside its jobs): parallel_for hands its chunks to the team.
bool leads_team();
namespace team_detail {
struct Team;
extern thread_local Team* t_team;
// Runs call(ctx, t) for t in [0, n) on the team's threads (t = 0 on the leader), n <= team_size.
void team_run(Team& team, int n, void (*call)(void*, int), void* ctx);
int team_size(const Team& team);
}  // namespace team_detail

}  // namespace kiln::cpu

#include <omp.h>

namespace kiln::cpu {
// The end of a region: the thread that opened it waits for the others spinning (for up to 100 us,
// yielding now and then for a machine with more threads than CPUs) before OpenMP's closing barrier,
// so that it arrives there last and is not put to sleep: a passive pool's sleeper is woken tens of
// microseconds late on a virtual machine (Zen 4, 2 threads, PASSIVE: an add of 256K floats 64 ->
// 39 us, bfloat16 matmul 256^3 130 -> 117 us). The others sleep there as before.
class JoinSpin {
 public:
  void arrive() { done_.fetch_add(1, std::memory_order_release); }
  void wait(int others) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 1; done_.load(std::memory_order_acquire) < others; ++i) {
      if ((i & 255) == 0) {
        if (std::chrono::steady_clock::now() - start > std::chrono::microseconds(100)) return;
        std::this_thread::yield();
      }
      cpu_pause();
    }
  }

 private:
  alignas(64) std::atomic<int> done_{0};
};

template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  if (n <= grain) {  // one chunk: no need to ask OpenMP anything (the common case of small tensors)
    f(int64_t(0), n);
    return;
  }
  if (team_detail::Team* team = team_detail::t_team) {  // leading a team: its threads take the chunks
    const int64_t most = (n + grain - 1) / grain;
    const int nt = static_cast<int>(most < team_detail::team_size(*team) ? most : team_detail::team_size(*team));
    if (nt <= 1) {
      f(int64_t(0), n);
      return;
    }
    using Fn = std::remove_reference_t<F>;
    struct Ctx {
      Fn* f;
      int64_t n, chunk;
    } ctx{&f, n, (n + nt - 1) / nt};
    team_detail::team_run(*team, nt, [](void* p, int t) {
      const Ctx& c = *static_cast<Ctx*>(p);
      const int64_t b = t * c.chunk, e = b + c.chunk < c.n ? b + c.chunk : c.n;
      if (b < e) (*c.f)(b, e);
    }, &ctx);
    return;
  }
  int nt = get_num_threads();
  if (nt <= 1 || omp_in_parallel()) {
    f(int64_t(0), n);
    return;
  }
  int64_t max_threads = (n + grain - 1) / grain;
  if (max_threads < nt) nt = static_cast<int>(max_threads);
  count_region();
  JoinSpin join;
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num(), T = omp_get_num_threads();
    int64_t chunk = (n + T - 1) / T;
    int64_t b = t * chunk, e = b + chunk < n ? b + chunk : n;
    if (b < e) f(b, e);
    if (t == 0) join.wait(T - 1);
    else join.arrive();
  }
}
}  // namespace kiln::cpu

namespace kiln::cpu {
template <class F>
void run_spmd(int threads, F&& f) {
  if (team_detail::Team* team = team_detail::t_team) {
    const int nt = threads < team_detail::team_size(*team) ? threads : team_detail::team_size(*team);
    if (nt <= 1) {
      f(0, 1);
      return;
    }
    struct Ctx {
      std::remove_reference_t<F>* f;
      int nt;
    } ctx{&f, nt};
    team_detail::team_run(*team, nt, [](void* p, int t) {
      const Ctx& c = *static_cast<Ctx*>(p);
      (*c.f)(t, c.nt);
    }, &ctx);
    return;
  }
  if (threads <= 1 || omp_in_parallel()) {
    f(0, 1);
    return;
  }
  count_region();
  JoinSpin join;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), T = omp_get_num_threads();
    f(t, T);
    if (t == 0) join.wait(T - 1);
    else join.arrive();
  }
}
}  // namespace kiln::cpu
