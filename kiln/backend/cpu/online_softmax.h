// The streaming (online) softmax step both attention kernels take per score tile
// (backend/cpu/attention.cpp for SDPA, backend/cpu/flex_attention.cpp for FlexAttention).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kiln/backend/cpu/kernels.h"

namespace kiln::cpu {

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

}  // namespace kiln::cpu
