// FlexAttention's block lists on the CPU (flex_attention.cpp): a BlockMask's kv lists read and
// validated into 0/1 block matrices, and per row the partial and full blocks as spans of one flat
// array, both ways round (kv blocks per query block for the forward, query blocks per kv block for
// the backward), with the walks over them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln::cpu::flex_blocks {

// For every (mask batch, mask head, row): the partial and the full blocks of that row, as spans of
// one flat array. dense: no block mask, every block of the row full.
struct Lists {
  bool dense = true;
  int64_t Bm = 1, Hm = 1, rows = 0, cols = 0;
  std::vector<int32_t> data;
  std::vector<int64_t> part_at, full_at;  // (Bm * Hm * rows + 1) offsets into data
  struct Span {
    const int32_t* p;
    int64_t n;
  };
  int64_t key(int64_t b, int64_t h, int64_t r) const {
    return ((Bm == 1 ? 0 : b) * Hm + (Hm == 1 ? 0 : h)) * rows + r;
  }
  Span partial(int64_t b, int64_t h, int64_t r) const {
    if (dense) return {nullptr, 0};
    const int64_t k = key(b, h, r);
    return {data.data() + part_at[k], part_at[k + 1] - part_at[k]};
  }
  Span full(int64_t b, int64_t h, int64_t r) const {
    if (dense) return {nullptr, cols};  // p null: every column
    const int64_t k = key(b, h, r);
    return {data.data() + full_at[k], full_at[k + 1] - full_at[k]};
  }
};

// The block matrices (Bm, Hm, nqb, nkb) of the kv lists, validated: counts within the row, indices
// within the grid. A block listed both partial and full counts as full.
struct Blocks {
  bool dense = true;
  int64_t Bm = 1, Hm = 1;
  std::vector<uint8_t> part, full;
};

Blocks read_blocks(const char* op, const Tensor& num, const Tensor& idx, const Tensor& fnum, const Tensor& fidx,
                   int64_t B, int64_t H, int64_t nqb, int64_t nkb);

// The lists of a 0/1 block matrix per (Bm, Hm): partial from `part`, full from `full` (may be empty).
Lists lists_of(const std::vector<uint8_t>& part, const std::vector<uint8_t>& full, int64_t Bm, int64_t Hm,
               int64_t rows, int64_t cols);

// kv lists (rows: query blocks) and q lists (rows: kv blocks).
std::pair<Lists, Lists> both_lists(const Blocks& b, int64_t nqb, int64_t nkb);

// f(col, partial) for every listed block of a row: partial blocks first, then full ones.
template <class F>
void each_block(const Lists& l, int64_t b, int64_t h, int64_t r, F&& f) {
  Lists::Span p = l.partial(b, h, r), fl = l.full(b, h, r);
  for (int64_t j = 0; j < p.n; ++j) f(static_cast<int64_t>(p.p[j]), true);
  for (int64_t j = 0; j < fl.n; ++j) f(fl.p ? static_cast<int64_t>(fl.p[j]) : j, false);
}

// f(first col, count, partial bits) over runs of up to `maxw` (<= 64) adjacent listed blocks, in
// ascending order, whatever their kind (bit j: block first + j is partial): wider tiles, fewer and
// larger GEMMs; mask_mod still runs on the partial blocks only (for_partial).
template <class F>
void each_run(const Lists& l, int64_t b, int64_t h, int64_t r, int64_t maxw, F&& f) {
  maxw = std::clamp<int64_t>(maxw, 1, 64);
  Lists::Span p = l.partial(b, h, r), fl = l.full(b, h, r);
  int64_t c0 = -1, n = 0;
  uint64_t bits = 0;
  auto add = [&](int64_t col, bool partial) {
    if (n > 0 && col == c0 + n && n < maxw) {
      bits |= uint64_t(partial) << n++;
      return;
    }
    if (n > 0) f(c0, n, bits);
    c0 = col, n = 1, bits = uint64_t(partial);
  };
  int64_t i = 0, j = 0;  // both lists ascending: merge them
  while (i < p.n || j < fl.n) {
    const int64_t pc = i < p.n ? p.p[i] : INT64_MAX;
    const int64_t fc = j < fl.n ? (fl.p ? fl.p[j] : j) : INT64_MAX;
    if (pc <= fc) {
      add(pc, true), ++i;
      if (pc == fc) ++j;
    } else {
      add(fc, false), ++j;
    }
  }
  if (n > 0) f(c0, n, bits);
}

// f(first, count) for each stretch of set bits of a run's partial bits.
template <class F>
void for_partial(uint64_t bits, int64_t n, F&& f) {
  for (int64_t j = 0; j < n;) {
    if (!((bits >> j) & 1)) {
      ++j;
      continue;
    }
    int64_t e = j;
    while (e < n && ((bits >> e) & 1)) ++e;
    f(j, e - j);
    j = e;
  }
}

}  // namespace kiln::cpu::flex_blocks
