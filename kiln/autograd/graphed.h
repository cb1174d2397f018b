// Graphed callables: a function's forward and its backward each captured as a Graph and replayed
// behind one autograd node (torch.cuda.make_graphed_callables, on the CPU; issue 17).
//
//   auto step = kiln::make_graphed_callable(
//       [&](const kiln::TensorList& a) { return kiln::TensorList{model->forward(a[0])}; }, {sample_x});
//   kiln::Tensor y = step({x})[0];   // the forward graph's replay, linked to autograd
//   loss_fn(y, target).backward();   // the backward graph's replay; gradients reach model's .grad
//
// make: runs each callable num_warmup_iters times (forward and a throw-away gradient), then captures
// every forward in order and every backward (autograd::grad of the outputs that require grad) in
// reverse order, all graphs in one memory pool. The tensors the backward differentiates are the
// arguments that require grad and every leaf the forward read that requires grad (found in the
// captured autograd graph: a module's parameters need not be listed, and a tensor the callable closes
// over gets its gradient too; torch differentiates only the listed parameters).
//
// call: copies the arguments into the sample arguments' memory (the graph's static inputs; an
// argument that is the sample itself is not copied), replays the forward graph and returns the static
// outputs, detached and, when grad mode is on and something requires grad, linked to a node whose
// backward copies the incoming gradients into static memory, replays the backward graph and hands
// the static gradients on (accumulated into .grad as any gradient). As with CUDA graphs the outputs
// are overwritten by the next call; in addition the backward of a call raises if the forward ran
// again before it (its saved state was overwritten; torch returns wrong gradients silently).
//
// A callable that runs backward itself (a whole training step: loss.backward(), opt.step()) keeps
// its gradients inside the forward graph: it gets no backward graph and returns plain tensors.
//
// Rules: the arguments keep the samples' shapes and dtypes (an error names the one that differs);
// a parameter keeps its memory (replacing it, e.g. through `.data =`, raises at the next call);
// the backward is not differentiable again (create_graph through it raises); an output the backward
// reads must not be changed in place before it (it raises, as eager autograd does); the callable's rules
// during capture are the Graph's (no host reads, no data-dependent output sizes). Calls on one
// graphed callable must not run concurrently.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "kiln/dispatch/graph.h"
#include "kiln/dispatch/op.h"

namespace kiln {

namespace detail {
struct GraphedState;
}

using GraphedFn = std::function<TensorList(const TensorList&)>;

struct GraphedOptions {
  int num_warmup_iters = 3;
  // false: an argument that requires grad but does not reach an output is an error (torch's rule)
  bool allow_unused_input = false;
  GraphPool pool;  // the pool all the graphs plan into (a new one when undefined)
};

class GraphedCallable {
 public:
  GraphedCallable() = default;
  TensorList operator()(const TensorList& args) const;
  // The call right after make: the capture already ran the forward on the sample arguments, so its
  // outputs are returned (linked to autograd with `args`, which hold the samples' values) without
  // a replay: the call's side effects (generator draws, running statistics) happen once.
  TensorList first_call(const TensorList& args) const;
  bool defined() const { return s_ != nullptr; }
  // Whether the latest call's backward can still run (its node is alive and its graph not freed by
  // a backward): a forward now would overwrite what that backward reads.
  bool backward_pending() const;
  // The leaves besides the arguments that the backward differentiates (the parameters it read).
  TensorList parameters() const;
  const Graph& forward_graph() const;
  const Graph& backward_graph() const;  // empty when no output requires grad

 private:
  friend std::vector<GraphedCallable> make_graphed_callables(const std::vector<GraphedFn>&,
                                                             const std::vector<TensorList>&,
                                                             const GraphedOptions&);
  friend GraphedCallable make_graphed_from_capture(Graph&&, const TensorList&, const TensorList&, uint64_t,
                                                   uint64_t, const GraphPool&, bool);
  TensorList run(const TensorList& args, bool replay) const;
  std::shared_ptr<detail::GraphedState> s_;
};

std::vector<GraphedCallable> make_graphed_callables(const std::vector<GraphedFn>& fns,
                                                    const std::vector<TensorList>& sample_args,
                                                    const GraphedOptions& opts = {});
GraphedCallable make_graphed_callable(const GraphedFn& fn, const TensorList& sample_args,
                                      const GraphedOptions& opts = {});
// From a forward already captured (kiln.compile): `forward` recorded a call on `args` that made
// `outputs` (still with their autograd graph); seq0 = next_sequence_nr() and runs0 = engine_runs()
// (kiln/autograd/nodes.h) when the capture began. Captures the backward into `pool` (the
// forward's when undefined) and takes the forward graph over.
GraphedCallable make_graphed_from_capture(Graph&& forward, const TensorList& args, const TensorList& outputs,
                                         uint64_t seq0, uint64_t runs0, const GraphPool& pool = {},
                                         bool allow_unused_input = true);

}  // namespace kiln
