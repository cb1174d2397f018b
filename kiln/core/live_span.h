// One arena for buffers with known live spans (graph capture's memory plan, the runtime's plan per
// input shape): the largest first (equal sizes by first use: for intervals of one size, first-fit in
// start order never needs more buffers than are live at once), each at the lowest offset free over
// its span, as an allocator reusing freed blocks would.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace kiln {

struct LiveSpan {
  int64_t bytes;
  int64_t first, last;  // live from the first to the last use, both included
  size_t id;            // the caller's
  int64_t offset = 0;   // set by place_live_spans
};

// Sets every span's offset (the order of `spans` changes); returns the arena's size.
inline int64_t place_live_spans(std::vector<LiveSpan>& spans) {
  std::sort(spans.begin(), spans.end(), [](const LiveSpan& a, const LiveSpan& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.first < b.first;
  });
  int64_t total = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    LiveSpan& s = spans[i];
    std::vector<std::pair<int64_t, int64_t>> busy;  // [offset, end) of placed spans live at the same time
    for (size_t j = 0; j < i; ++j)
      if (spans[j].first <= s.last && s.first <= spans[j].last)
        busy.emplace_back(spans[j].offset, spans[j].offset + spans[j].bytes);
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (const auto& [lo, hi] : busy) {
      if (at + s.bytes <= lo) break;
      at = std::max(at, hi);
    }
    s.offset = at;
    total = std::max(total, at + s.bytes);
  }
  return total;
}

}  // namespace kiln
