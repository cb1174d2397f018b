// FlexAttention's block lists (flex_blocks.h).
#include "kiln/backend/cpu/flex_blocks.h"

#include "kiln/core/error.h"

namespace kiln::cpu::flex_blocks {

// The lists of a 0/1 block matrix per (Bm, Hm): partial from `part`, full from `full` (may be empty).
Lists lists_of(const std::vector<uint8_t>& part, const std::vector<uint8_t>& full, int64_t Bm, int64_t Hm,
               int64_t rows, int64_t cols) {
  Lists l;
  l.dense = false, l.Bm = Bm, l.Hm = Hm, l.rows = rows, l.cols = cols;
  const int64_t R = Bm * Hm * rows;
  l.part_at.resize(R + 1), l.full_at.resize(R + 1);
  for (int pass = 0; pass < 2; ++pass) {
    const std::vector<uint8_t>& m = pass == 0 ? part : full;
    std::vector<int64_t>& at = pass == 0 ? l.part_at : l.full_at;
    for (int64_t r = 0; r < R; ++r) {
      at[r] = static_cast<int64_t>(l.data.size());
      if (m.empty()) continue;
      for (int64_t c = 0; c < cols; ++c)
        if (m[r * cols + c]) l.data.push_back(static_cast<int32_t>(c));
    }
    at[R] = static_cast<int64_t>(l.data.size());
  }
  return l;
}

Blocks read_blocks(const char* op, const Tensor& num, const Tensor& idx, const Tensor& fnum, const Tensor& fidx,
                   int64_t B, int64_t H, int64_t nqb, int64_t nkb) {
  Blocks b;
  if (!num.defined()) return b;
  b.dense = false;
  KILN_CHECK(idx.defined() && idx.dim() == 4 && num.dim() == 3, Runtime, op,
             "block mask lists must be (B, H, Q_BLOCKS) and (B, H, Q_BLOCKS, KV_BLOCKS), got ", num.sizes(), " and ",
             idx.defined() ? idx.sizes() : Shape{});
  b.Bm = idx.size(0), b.Hm = idx.size(1);
  KILN_CHECK((b.Bm == 1 || b.Bm == B) && (b.Hm == 1 || b.Hm == H), Runtime, op, "block mask of batch and heads (",
             b.Bm, ", ", b.Hm, ") does not broadcast to (", B, ", ", H, ")");
  KILN_CHECK(idx.size(2) >= nqb && num.size(0) == b.Bm && num.size(1) == b.Hm && num.size(2) == idx.size(2), Runtime,
             op, "block mask lists ", num.sizes(), " and ", idx.sizes(), " do not cover ", nqb, " query blocks");
  const int64_t R = b.Bm * b.Hm * nqb;
  auto fill = [&](const Tensor& n, const Tensor& ix, std::vector<uint8_t>& m) {
    Tensor nc = n.to(kInt64).contiguous(), ic = ix.to(kInt64).contiguous();
    KILN_CHECK(ic.dim() == 4 && ic.size(0) == b.Bm && ic.size(1) == b.Hm && ic.size(2) == idx.size(2) &&
                   nc.dim() == 3 && nc.size(2) == ic.size(2),
               Runtime, op, "full block lists ", nc.sizes(), " and ", ic.sizes(), " do not match the partial ones");
    const int64_t K = ic.size(3), rows_all = ic.size(2);
    const int64_t *np = nc.data_ptr<int64_t>(), *ip = ic.data_ptr<int64_t>();
    m.assign(R * nkb, 0);
    for (int64_t bh = 0; bh < b.Bm * b.Hm; ++bh)
      for (int64_t r = 0; r < nqb; ++r) {
        const int64_t cnt = np[bh * rows_all + r];
        KILN_CHECK(cnt >= 0 && cnt <= K, Runtime, op, "block mask row lists ", cnt, " blocks but holds ", K);
        const int64_t* row = ip + (bh * rows_all + r) * K;
        for (int64_t j = 0; j < cnt; ++j) {
          KILN_CHECK(row[j] >= 0, Index, op, "block index ", row[j], " is negative");
          if (row[j] < nkb) m[(bh * nqb + r) * nkb + row[j]] = 1;  // blocks past the keys: nothing to visit
        }
      }
  };
  fill(num, idx, b.part);
  if (fnum.defined()) {
    fill(fnum, fidx, b.full);
    for (size_t i = 0; i < b.part.size(); ++i)
      if (b.full[i]) b.part[i] = 0;
  }
  return b;
}

// kv lists (rows: query blocks) and q lists (rows: kv blocks).
std::pair<Lists, Lists> both_lists(const Blocks& b, int64_t nqb, int64_t nkb) {
  Lists kv, q;
  kv.rows = nqb, kv.cols = nkb, q.rows = nkb, q.cols = nqb;
  if (b.dense) return {kv, q};
  kv = lists_of(b.part, b.full, b.Bm, b.Hm, nqb, nkb);
  auto transpose = [&](const std::vector<uint8_t>& m) {
    std::vector<uint8_t> t;
    if (m.empty()) return t;
    t.assign(m.size(), 0);
    for (int64_t bh = 0; bh < b.Bm * b.Hm; ++bh)
      for (int64_t r = 0; r < nqb; ++r)
        for (int64_t c = 0; c < nkb; ++c) t[(bh * nkb + c) * nqb + r] = m[(bh * nqb + r) * nkb + c];
    return t;
  };
  q = lists_of(transpose(b.part), transpose(b.full), b.Bm, b.Hm, nkb, nqb);
  return {kv, q};
}

}  // namespace kiln::cpu::flex_blocks
