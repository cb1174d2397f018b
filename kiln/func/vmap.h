// kiln::func::vmap — torch.func.vmap: a function of one example run over a batch, by batching rules
// keyed on the op table (decision 41).
//
// vmap traces the function once on the first example (a recording dispatch mode sees every table
// op, forward and backward alike, so vmap(grad(f)) works), then replays the recorded ops on the
// batched inputs, each through its op family's batching rule: pointwise ops align ranks and
// broadcast, reductions and dim-taking ops shift their dims past the batch dim, view and shape ops
// prepend it, bmm folds it into its batch; an op without a rule runs once per example (a C++ loop)
// and its results are stacked. The batch dim of every batched value is dim 0 of its physical
// tensor.
//
//   TensorList out = func::vmap([](const TensorList& x) -> TensorList { return {sum(mul(x[0], x[1]))}; },
//                               {a, b}, {0, std::nullopt});   // a: (B, n) batched, b: (n) shared
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/dispatch/op.h"

namespace kiln::func {

enum class Randomness { Error, Same, Different };  // torch's randomness= ("error", "same", "different")

using BatchedFn = std::function<TensorList(const TensorList&)>;

// f over the batch: in_dims[i] is input i's batch dim (nullopt: not batched; every batched input
// has the same size there); out_dims[j] where output j's batch dim goes (nullopt: the output must
// not depend on the batch and is returned as is; a short list repeats its last entry).
TensorList vmap(const BatchedFn& f, const TensorList& inputs, const std::vector<std::optional<int64_t>>& in_dims,
                const std::vector<std::optional<int64_t>>& out_dims = {0}, Randomness randomness = Randomness::Error);

// The same, before out_dims: each output as computed, with its batch (if it has one) at dim 0.
struct BatchedResult {
  TensorList outputs;
  std::vector<bool> batched;
  int64_t batch_size = 0;
};
BatchedResult vmap_batched(const BatchedFn& f, const TensorList& inputs,
                           const std::vector<std::optional<int64_t>>& in_dims, Randomness randomness = Randomness::Error);
// An output of vmap_batched with its batch dim moved to out_dim (an unbatched one expanded; out_dim
// nullopt: returned as is, which a batched output may not be).
Tensor place_batch_dim(const Tensor& t, bool batched, int64_t batch_size, std::optional<int64_t> out_dim);

// Raises torch's vmap error (RuntimeError) when a vmap trace runs on this thread and t depends on a
// mapped input: its data differs per example, so reading it (item(), bool(), an index) would fix the
// first example's value for the whole batch. The binding calls it wherever Python reads tensor data.
void check_data_read(const Tensor& t, const char* what);
// Whether a vmap trace runs on this thread and t depends on a mapped input.
bool is_mapped(const Tensor& t);

// How many ops the last vmap on this thread ran through a batching rule and through the
// per-example loop (for tests and the docs' coverage note).
struct VmapStats {
  int64_t rules = 0, loops = 0;
  std::vector<std::string> looped_ops;
};
const VmapStats& last_vmap_stats();

}  // namespace kiln::func
