// What both attention kernels (backend/cpu/attention.cpp for SDPA, backend/cpu/flex_attention.cpp for
// FlexAttention) share: the streaming (online) softmax step per score tile, the task runner and the
// worker count.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/parallel.h"

namespace kiln::cpu {

// Flushes subnormal results to zero (MXCSR's FTZ) on this thread while it lives. Softmax tiles are full
// of exp(-large) (every masked score): each subnormal result costs the core a microcode assist of
// about a hundred cycles, and probabilities below 2^-126 do not matter. Inputs are read as they are.
// Used for float32 only (float64 keeps torch's subnormals).
struct FlushSubnormals {
#if defined(__x86_64__) || defined(__i386__)
  unsigned saved = _mm_getcsr();
  bool on;
  explicit FlushSubnormals(bool on_) : on(on_) {
    if (on) _mm_setcsr(saved | 0x8000u);
  }
  ~FlushSubnormals() {
    if (on) _mm_setcsr(saved);
  }
#else
  explicit FlushSubnormals(bool) {}
#endif
};

// s (bq x bk, contiguous) holds a tile's scores; mx, l the rows' running max and sum of exponentials.
// Updates mx, turns s into exp(s - new max), adds its row sums into l (rescaled), and writes alpha[i],
// the factor the row's accumulated output must be multiplied by. Returns whether any alpha is not 1.
// A row masked so far (max -inf) subtracts 0, so exp(-inf) = 0 and no NaN appears.
template <class T>
bool online_softmax_step(const RowFns<T>& f, T* s, int64_t bq, int64_t bk, T* mx, T* l, T* alpha, T* tmp) {
  const T ninf = -std::numeric_limits<T>::infinity();
  f.row_max(tmp, s, bq, bk);
  bool rescale = false;
  for (int64_t i = 0; i < bq; ++i) {
    const T mn = std::max(mx[i], tmp[i]);
    const T mu = mn == ninf ? T(0) : mn;
    alpha[i] = std::exp(mx[i] - mu);
    rescale |= alpha[i] != T(1);
    mx[i] = mn;
    T* row = s + i * bk;
    for (int64_t j = 0; j < bk; ++j) row[j] -= mu;
  }
  f.exp_inplace(s, bq * bk);
  f.row_sum(tmp, s, bq, bk);
  for (int64_t i = 0; i < bq; ++i) l[i] = l[i] * alpha[i] + tmp[i];
  return rescale;
}

// acc (bq x Ev) rows *= alpha where alpha is not 1.
template <class T>
void rescale_rows(T* acc, const T* alpha, int64_t bq, int64_t Ev) {
  for (int64_t i = 0; i < bq; ++i)
    if (alpha[i] != T(1))
      for (int64_t e = 0; e < Ev; ++e) acc[i * Ev + e] *= alpha[i];
}

// f(worker, task) for every task in [0, n) on `workers` threads: dynamically balanced, or in a fixed
// round-robin (each worker's set, and so any per-worker sum, independent of timing) when `fixed`. The
// first exception a task raises stops the others and is rethrown once every worker returned.
template <class F>
void run_tasks(int64_t n, int workers, bool fixed, F&& f) {
  if (n <= 0) return;
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr err;
  std::mutex mu;
  auto guarded = [&](int64_t w, int64_t t) {
    try {
      f(w, t);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!err) err = std::current_exception();
      failed = true;
    }
  };
  parallel_for(workers, 1, [&](int64_t b, int64_t e) {
    for (int64_t w = b; w < e; ++w) {
      if (fixed) {
        for (int64_t t = w; t < n && !failed.load(std::memory_order_relaxed); t += workers) guarded(w, t);
      } else {
        for (int64_t t = next.fetch_add(1); t < n && !failed.load(std::memory_order_relaxed); t = next.fetch_add(1))
          guarded(w, t);
      }
    }
  });
  if (err) std::rethrow_exception(err);
}

// Threads for `tasks` tasks of `madds` multiply-adds in all: small problems stay on one thread.
inline int pick_workers(int64_t tasks, double madds) {
  if (madds < (1 << 20) || tasks <= 1) return 1;
  return static_cast<int>(std::min<int64_t>(get_num_threads(), tasks));
}

}  // namespace kiln::cpu
