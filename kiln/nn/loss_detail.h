// Internals shared by the loss files: the op files (kiln/nn/loss.cpp, loss_nll.cpp, loss_ctc.cpp:
// op-table entries, schemas, metas, derivatives, front ends) and the CPU kernels of their table ops
// (kiln/backend/cpu/loss.cpp): the reduction codes, the ops' attribute layouts and where each
// batch entry's CTC targets start.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "kiln/ops/ops.h"

namespace kiln::loss_detail {

// torch's Reduction enum values (they travel as table-op attributes).
enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

// "none" / "mean" / "sum" (and torch's deprecated "elementwise_mean"); ValueError otherwise.
int64_t reduction_enum(const std::string& reduction);
// mean / sum over every element, or the loss itself for kNone.
Tensor apply_reduction(const Tensor& loss, int64_t reduction);
// "[3, 4]", as torch prints sizes in messages.
std::string shape_str(const Shape& s);
std::string shape_str(const SymShape& s);  // "[batch, 5]"

// Attributes of cross_entropy_loss / nll_loss and their backward ops: {reduction, ignore_index,
// label_smoothing (cross entropy) or the input's shape (nll_loss_backward)}.
inline int64_t red_of(const Attrs& a) { return attr<int64_t>(a, 0); }
inline int64_t ignore_of(const Attrs& a) { return attr<int64_t>(a, 1); }
inline double smoothing_of(const Attrs& a) { return attr<double>(a, 2); }

// Attributes of ctc_loss / ctc_loss_backward: {input_lengths, target_lengths, blank, zero_infinity}.
inline const Shape& in_lengths(const Attrs& a) { return attr<Shape>(a, 0); }
inline const Shape& tg_lengths(const Attrs& a) { return attr<Shape>(a, 1); }
inline int64_t blank_of(const Attrs& a) { return attr<int64_t>(a, 2); }
inline bool zero_inf_of(const Attrs& a) { return attr<bool>(a, 3); }

// Where batch entry b's targets start in the contiguous int64 CTC targets (padded (N, S) or
// concatenated 1-D; stride 1), and the longest target length.
struct TargetIndex {
  std::vector<int64_t> offset;
  int64_t stride = 1;
  int64_t max_len = 0;
  TargetIndex(const Tensor& targets, const Shape& tl) {
    const int64_t N = static_cast<int64_t>(tl.size());
    offset.resize(N);
    if (targets.dim() == 1) {
      int64_t pos = 0;
      for (int64_t b = 0; b < N; ++b) {
        offset[b] = pos;
        pos += tl[b];
      }
    } else {
      for (int64_t b = 0; b < N; ++b) offset[b] = b * targets.sizes()[1];
    }
    for (int64_t l : tl) max_len = std::max(max_len, l);
  }
};

}  // namespace kiln::loss_detail
