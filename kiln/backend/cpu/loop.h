// The elementwise loop helper (TensorIterator-like): broadcasting, dimension reordering and
// coalescing, a contiguous fast path and parallel_for. Operand 0..nout-1 are outputs.
#pragma once

#include <cstdint>

#include "kiln/backend/cpu/parallel.h"
#include "kiln/core/tensor.h"

namespace kiln::cpu {

inline constexpr int kMaxOperands = 5;
inline constexpr int kMaxLoopDims = 32;

// 1-D inner loop: data[k] points at operand k's first element, strides[k] is its byte stride.
using InnerLoop = void (*)(char** data, const int64_t* strides, int64_t n, const void* params);

struct Loop {
  int ntensors = 0;
  int ndim = 0;                                 // after coalescing
  int64_t shape[kMaxLoopDims];                  // innermost first
  int64_t strides[kMaxLoopDims][kMaxOperands];  // bytes
  char* data[kMaxOperands];
  int64_t numel = 0;
  bool is_contiguous(int k, int64_t elem) const { return ndim <= 1 && (ndim == 0 || strides[0][k] == elem); }
};

// Operands broadcast to `shape` (outputs must have exactly `shape`).
Loop make_loop(const Tensor* const* ops, int n, const Shape& shape);
inline Loop make_loop(std::initializer_list<const Tensor*> ops, const Shape& shape) {
  return make_loop(ops.begin(), static_cast<int>(ops.size()), shape);
}

// Runs fn(data, strides, n) over every element in [begin, end) of the loop's linear order.
template <class F>
void loop_range(const Loop& L, int64_t begin, int64_t end, F&& fn) {
  int nt = L.ntensors;
  if (L.ndim == 0) {
    if (begin < end) {
      int64_t zero[kMaxOperands] = {0};
      char* d[kMaxOperands];
      for (int k = 0; k < nt; ++k) d[k] = L.data[k];
      fn(d, zero, end - begin);
    }
    return;
  }
  int64_t idx[kMaxLoopDims];
  int64_t rem = begin;
  for (int d = 0; d < L.ndim; ++d) {
    idx[d] = rem % L.shape[d];
    rem /= L.shape[d];
  }
  int64_t pos = begin;
  char* ptr[kMaxOperands];
  int64_t inner[kMaxOperands];
  for (int k = 0; k < nt; ++k) inner[k] = L.strides[0][k];
  while (pos < end) {
    for (int k = 0; k < nt; ++k) {
      char* p = L.data[k];
      for (int d = 0; d < L.ndim; ++d) p += idx[d] * L.strides[d][k];
      ptr[k] = p;
    }
    int64_t count = L.shape[0] - idx[0];
    if (count > end - pos) count = end - pos;
    fn(ptr, inner, count);
    pos += count;
    idx[0] += count;
    for (int d = 0; d < L.ndim - 1 && idx[d] >= L.shape[d]; ++d) {
      idx[d] = 0;
      idx[d + 1]++;
    }
  }
}

template <class F>
void for_each(const Loop& L, F&& fn, int64_t grain = kGrainSize) {
  parallel_for(L.numel, grain, [&](int64_t b, int64_t e) { loop_range(L, b, e, fn); });
}

inline void run(const Loop& L, InnerLoop fn, const void* params, int64_t grain = kGrainSize) {
  for_each(L, [&](char** d, const int64_t* s, int64_t n) { fn(d, s, n, params); }, grain);
}

// fn over `ops` (output first) broadcast to `shape`. When every operand is contiguous with exactly
// `shape`, or is an input of one element, fn runs straight over [0, numel) in the chunks
// parallel_for makes, without the loop set-up: the single dimension the general path would
// coalesce to, so the calls are the same but for a one-element tensor, which takes the contiguous
// inner loop like any element of a longer run.
inline void run_elementwise(std::initializer_list<const Tensor*> ops, const Shape& shape, InnerLoop fn,
                            const void* params, int64_t grain = kGrainSize) {
  const int n = static_cast<int>(ops.size());
  char* data[kMaxOperands];
  int64_t st[kMaxOperands];
  int k = 0;
  // (kernels see concrete tensors only, so the impl's sizes are read directly)
  auto same_sizes = [&](const Shape& s) {
    if (&s == &shape) return true;
    if (s.size() != shape.size()) return false;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] != shape[i]) return false;
    return true;
  };
  for (const Tensor* t : ops) {
    if (k == kMaxOperands) break;
    const TensorImpl& ti = *t->impl();
    if (k > 0 && ti.numel == 1) st[k] = 0;
    else if (ti.contiguous && same_sizes(ti.sizes)) st[k] = static_cast<int64_t>(itemsize(ti.dtype));
    else break;
    data[k++] = static_cast<char*>(t->data_ptr());
  }
  if (k < n) {
    run(make_loop(ops, shape), fn, params, grain);
    return;
  }
  parallel_for(ops.begin()[0]->impl()->numel, grain, [&](int64_t b, int64_t e) {
    char* d[kMaxOperands];
    for (int j = 0; j < n; ++j) d[j] = data[j] + b * st[j];
    fn(d, st, e - b, params);
  });
}

}  // namespace kiln::cpu
