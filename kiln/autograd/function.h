// Custom differentiable functions in C++, in the libtorch style:
//
//   struct MulAdd : kiln::autograd::Function<MulAdd> {
//     static kiln::TensorList forward(kiln::autograd::AutogradContext* ctx, const kiln::TensorList&
//     in,
//                                     double alpha) {
//       ctx->save_for_backward({in[0], in[1]});
//       ctx->saved_data["alpha"] = alpha;
//       return {kiln::add(kiln::mul(in[0], in[1]), kiln::Scalar(alpha))};
//     }
//     static kiln::TensorList backward(kiln::autograd::AutogradContext* ctx, const
//     kiln::TensorList& g) {
//       auto s = ctx->get_saved_variables();
//       return {kiln::mul(g[0], s[1]), kiln::mul(g[0], s[0])};  // one per input (undefined: none)
//     }
//   };
//   kiln::TensorList out = MulAdd::apply({x, y}, 2.0);
//
// forward runs with grad mode off; when grad mode is on and an input requires grad, the outputs get
// a CustomNode (named "<T>Backward", or T::name() + "Backward" when T has a static name()) whose
// backward calls T::backward. The Python autograd.Function records through the same
// record_function() below.
#pragma once

#include <memory>
#include <string>
#include <typeinfo>
#include <unordered_map>
#include <utility>

#include "kiln/autograd/nodes.h"

namespace kiln::autograd {

using kiln::Tensor;
using kiln::TensorList;

// What forward hands to backward.
class AutogradContext {
 public:
  // Tensors (inputs or outputs of forward) for backward; their versions are checked when unpacked.
  void save_for_backward(TensorList to_save) { to_save_ = std::move(to_save); }
  // In backward: the saved tensors (raises once the graph was freed); in forward: as given.
  TensorList get_saved_variables() const;
  // Outputs that get no gradient (no grad_fn; backward still receives a gradient slot for them).
  void mark_non_differentiable(const TensorList& outputs) { non_differentiable_ = outputs; }
  // Inputs forward modified in place (and returns): their history moves to this function.
  void mark_dirty(const TensorList& inputs) { dirty_ = inputs; }
  // false: backward receives undefined tensors for outputs that got no gradient (default: zeros).
  void set_materialize_grads(bool value) { materialize_grads_ = value; }
  bool needs_input_grad(size_t i) const { return i < needs_.size() && needs_[i]; }
  // Non-tensor state for backward.
  std::unordered_map<std::string, Attr> saved_data;

 private:
  template <class T>
  friend struct Function;
  TensorList to_save_, non_differentiable_, dirty_;
  std::vector<bool> needs_;
  bool materialize_grads_ = true;
  std::weak_ptr<CustomNode> node_;  // set once recorded
};

// One custom-function call, as the autograd layer sees it.
struct FunctionRecord {
  std::string name;    // of the backward node, e.g. "MulAddBackward"
  TensorList inputs;   // tensor arguments (undefined: a non-tensor / None argument)
  TensorList outputs;  // forward's results (undefined: a non-tensor result)
  TensorList to_save;
  TensorList non_differentiable;
  TensorList dirty;
  bool materialize_grads = true;
  CustomNode::BackwardFn backward;   // one gradient per input
  std::function<void()> on_release;  // the saved state is dropped (no retain_graph)
};

// Whether forward's outputs get a graph: grad mode on and an input requires grad.
bool function_needs_record(const TensorList& inputs);
// Links forward's outputs to a new CustomNode and returns them: an output that is an input becomes
// a fresh alias (the input itself when marked dirty), non-differentiable outputs get no grad_fn.
// `node` (optional) receives the node. Without a graph to record, returns the outputs unchanged.
TensorList record_function(FunctionRecord&& rec, std::shared_ptr<CustomNode>* node = nullptr);

std::string demangled_type_name(const std::type_info& t);

template <class T>
struct Function {
  template <class... Args>
  static TensorList apply(const TensorList& inputs, Args&&... args) {
    auto ctx = std::make_shared<AutogradContext>();
    const bool record = function_needs_record(inputs);
    ctx->needs_.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i)
      ctx->needs_[i] = inputs[i].defined() && kiln::requires_grad(inputs[i]);
    TensorList outputs;
    {
      AutoGradMode no_grad(false);
      outputs = T::forward(ctx.get(), inputs, std::forward<Args>(args)...);
    }
    if (!record) return outputs;
    FunctionRecord rec;
    if constexpr (requires { T::name(); })
      rec.name = std::string(T::name()) + "Backward";
    else
      rec.name = demangled_type_name(typeid(T)) + "Backward";
    rec.inputs = inputs;
    rec.outputs = std::move(outputs);
    rec.to_save = std::move(ctx->to_save_);
    rec.non_differentiable = std::move(ctx->non_differentiable_);
    rec.dirty = std::move(ctx->dirty_);
    rec.materialize_grads = ctx->materialize_grads_;
    const size_t n_in = inputs.size();
    rec.backward = [ctx, n_in, name = rec.name](CustomNode& self,
                                                TensorList&& grads) -> TensorList {
      ctx->node_ = std::static_pointer_cast<CustomNode>(self.shared_from_this());
      TensorList r = T::backward(ctx.get(), grads);
      // extra trailing undefined gradients (for non-tensor arguments) are allowed, as in libtorch
      while (r.size() > n_in && !r.back().defined()) r.pop_back();
      KILN_CHECK(r.size() == n_in, Runtime, name.c_str(), "function ", name,
                 " returned an incorrect number of gradients (expected ", n_in, ", got ", r.size(),
                 ")");
      return r;
    };
    std::shared_ptr<CustomNode> node;
    TensorList result = record_function(std::move(rec), &node);
    ctx->node_ = node;
    return result;
  }
};

}  // namespace kiln::autograd
