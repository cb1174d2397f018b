// The node kinds the autograd layer records (internal to kiln/autograd and the bindings).
#pragma once

#include "kiln/autograd/autograd.h"

namespace kiln {

// Backward of a table op: calls the op's derivative with what its save masks kept.
struct OpNode : Node {
  const OpDef* op = nullptr;
  Attrs attrs;
  std::vector<SavedTensor> saved_in, saved_out;
  std::vector<bool> needs;
  bool released = false;

  std::string name() const override;
  TensorList apply(TensorList&& grad_outputs) override;
  void release_saved() override;
};

// Backward of an op with no derivative: raises when a gradient reaches it.
struct NotImplementedNode : Node {
  std::string op_name;
  std::string name() const override { return "NotImplemented"; }
  TensorList apply(TensorList&& grad_outputs) override;
};

// Accumulates into a leaf's .grad (after the leaf's hooks).
struct AccumulateGrad : Node {
  std::shared_ptr<TensorImpl> leaf;
  std::string name() const override { return "AccumulateGrad"; }
  TensorList apply(TensorList&& grad_outputs) override;
};

// Backward of a custom Function (C++ or Python): a callback over the saved context.
struct CustomNode : Node {
  using BackwardFn = std::function<TensorList(CustomNode& self, TensorList&& grads)>;
  std::string fn_name;
  BackwardFn backward_fn;
  std::vector<SavedTensor> saved;
  std::function<void()> on_release;  // e.g. drops Python references
  bool released = false;
  std::string name() const override { return fn_name; }
  TensorList apply(TensorList&& grad_outputs) override {
    return backward_fn(*this, std::move(grad_outputs));
  }
  void release_saved() override;
  TensorList unpack_saved();
};

// The base's new history after an in-place op `fn` on one of its views: the base's gradient with
// the view's region replaced by what `fn` gives its old value (torch's CopySlices).
struct CopySlices : Node {
  std::shared_ptr<const std::vector<ViewStep>> chain;  // base -> view
  std::shared_ptr<Node> fn;                            // the in-place op, as applied to the view
  int self_index = -1;   // the view among fn's inputs (-1: fn does not read it)
  size_t base_slot = 0;  // next_edges slot of the base's previous history
  std::string name() const override { return "CopySlices"; }
  TensorList apply(TensorList&& grad_outputs) override;
  void release_saved() override { fn->release_saved(); }
};

// The sequence number the next node made will get (nodes made later have larger ones).
uint64_t next_sequence_nr();
// How many times backward() ran on this thread so far (accumulating into .grad: a training step's
// own backward; autograd.grad, which returns gradients, is not counted).
uint64_t engine_runs();

// "MulBackward0" from "mul".
std::string backward_name(const char* op);

// ---- internals shared by autograd.cpp, views.cpp, engine.cpp and function.cpp -----------------
AutogradMeta* meta_of(const Tensor& t);
AutogradMeta& ensure_meta(const Tensor& t);
// The tensor's autograd state with an up-to-date grad_fn (a view modified through an alias since
// its grad_fn was set gets one rebuilt from its base).
AutogradMeta* fresh_meta(const Tensor& t);
// Sets t's history (requires_grad, grad_fn, output_nr); a retain_grad() moves to the new grad_fn.
void set_history(const Tensor& t, const std::shared_ptr<Node>& fn, uint32_t output_nr);
// After a kView op: `out` (a view of `in`, which requires grad) records its base and view chain.
void track_view(const Tensor& in, const OpDef& op, const Attrs& attrs, const Tensor& out);
// The root base of a tracked view whose base requires grad (undefined otherwise).
Tensor tracked_base(const AutogradMeta* m);
// Replays a view chain on `base` (through dispatch: recorded when grad mode is on).
Tensor replay_view(const Tensor& base, const std::vector<ViewStep>& chain);
// In-place op `fn` wrote into the tracked view `self` (input `self_index` of fn, or -1): the base's
// history becomes a CopySlices over fn, and the view's grad_fn is rebuilt from the base.
void rebase_view(const Tensor& self, const std::shared_ptr<Node>& fn, int self_index);
// Anomaly mode: where the current forward op runs (the installed trace function, or `fallback`).
std::string anomaly_trace(const std::string& fallback);
// A gradient for input i of `node`: summed to the input's shape, cast to its dtype.
Tensor validate_grad(const Node& node, size_t i, Tensor g);

}  // namespace kiln
