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
  std::string fn_name;
  std::function<TensorList(CustomNode& self, TensorList&& grads)> backward_fn;
  std::vector<SavedTensor> saved;
  std::function<void()> on_release;  // e.g. drops Python references
  bool released = false;
  std::string name() const override { return fn_name; }
  TensorList apply(TensorList&& grad_outputs) override { return backward_fn(*this, std::move(grad_outputs)); }
  void release_saved() override;
  TensorList unpack_saved();
};

// "MulBackward0" from "mul".
std::string backward_name(const char* op);

}  // namespace kiln
