// Reverse-mode automatic differentiation (DESIGN.md §1, step 2).
//
// Every op that runs while grad mode is on and has an input that requires grad records a Node: the
// op's derivative from the op table, the tensors its save masks name, and one Edge per input to the
// node that produced it (or to the leaf's AccumulateGrad). backward() walks that graph without
// recursion, in reverse creation order, and frees saved tensors as it goes unless retain_graph.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/dispatch/op.h"

namespace kiln {

struct Node;

// Where a gradient flows: input slot `input_nr` of node `fn`.
struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

// A tensor hook sees the gradient and may return a replacement (undefined = keep it).
using TensorHook = std::function<Tensor(const Tensor&)>;
// A post-accumulate-grad hook sees a leaf after its gradient was accumulated into .grad (torch's
// Tensor.register_post_accumulate_grad_hook; DDP starts its bucket reductions from them).
using PostAccumulateGradHook = std::function<void(const Tensor&)>;

// One step of a view chain: a kView op and its attributes (replayed to rebuild a view's history).
struct ViewStep {
  const OpDef* op;
  Attrs attrs;
};

struct AutogradMeta {
  bool requires_grad = false;
  bool retains_grad = false;
  uint32_t output_nr = 0;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;         // null for leaves
  std::weak_ptr<Node> grad_accumulator;  // leaves: their AccumulateGrad, while a graph holds it
  std::map<int, TensorHook> hooks;       // leaves: run before accumulation (id -> hook)
  std::map<int, std::weak_ptr<Node>> hook_nodes;  // non-leaves: the node each hook was put on
  std::map<int, PostAccumulateGradHook> post_acc_hooks;  // leaves: run after accumulation
  // Differentiable views (made by a kView op from a tensor that requires grad): the root base and
  // the view ops from it. An in-place op on the view rebases the base's history (CopySlices); a
  // view whose storage version moved since its grad_fn was set gets its grad_fn rebuilt from the
  // base.
  std::shared_ptr<TensorImpl> view_base;
  std::shared_ptr<const std::vector<ViewStep>> view_chain;
  uint32_t view_version = 0;
};

// torch.autograd.graph.saved_tensors_hooks: while a pair is installed (a thread-local stack; the
// innermost pair applies), every tensor autograd saves for backward is handed to `pack` and only
// what it returns is kept; `unpack` gives the tensor back when backward needs it (activation
// checkpointing, offloading). An output saved by its own node is packed detached.
struct SavedTensorHooks {
  std::function<std::shared_ptr<void>(const Tensor&)> pack;
  std::function<Tensor(const std::shared_ptr<void>&)> unpack;
};
void push_saved_tensor_hooks(SavedTensorHooks hooks);
void pop_saved_tensor_hooks();
// Installing hooks raises RuntimeError with this message while it is not empty
// (torch.autograd.graph.disable_saved_tensors_hooks).
std::string& saved_tensor_hooks_disabled_message();
struct SavedTensorHooksGuard {
  explicit SavedTensorHooksGuard(SavedTensorHooks h) { push_saved_tensor_hooks(std::move(h)); }
  ~SavedTensorHooksGuard() { pop_saved_tensor_hooks(); }
  SavedTensorHooksGuard(const SavedTensorHooksGuard&) = delete;
  SavedTensorHooksGuard& operator=(const SavedTensorHooksGuard&) = delete;
};

// A tensor saved for backward with the version it had; unpacking checks the version so a later
// in-place change raises torch's "modified by an inplace operation" error (not for tensors kept
// by saved-tensor hooks, whose owner decides what comes back).
class SavedTensor {
 public:
  SavedTensor() = default;
  // is_output: `t` is an output of the node saving it; stored without its autograd meta (no
  // reference cycle) and re-attached to the node when unpacked.
  SavedTensor(const Tensor& t, bool is_output);
  Tensor unpack(const std::shared_ptr<Node>& owner) const;
  void release();
  bool defined() const { return was_defined_; }

 private:
  Tensor data_;
  std::shared_ptr<void> packed_;  // with hooks: what pack returned, and the unpack to call
  std::function<Tensor(const std::shared_ptr<void>&)> unpack_;
  uint32_t version_ = 0;
  uint32_t output_nr_ = 0;
  bool is_output_ = false;
  bool was_defined_ = false;
  bool requires_grad_ = false;
  bool released_ = false;
};

// A node of the backward graph.
struct Node : std::enable_shared_from_this<Node> {
  Node();
  virtual ~Node();  // releases next_edges without recursion (deep graphs)
  virtual std::string name() const = 0;
  // Gradients of the inputs (one per next_edges entry) from those of the outputs (one per output).
  virtual TensorList apply(TensorList&& grad_outputs) = 0;
  virtual void release_saved() {}

  std::vector<Edge> next_edges;  // one per input
  SpecList in_specs;             // inputs' shapes and dtypes: gradients are summed/cast to these
  SpecList out_specs;            // outputs' shapes and dtypes: undefined gradients become zeros
  uint64_t sequence_nr;
  std::map<uint32_t, std::map<int, TensorHook>> tensor_hooks;  // by output slot
  std::map<uint32_t, std::weak_ptr<TensorImpl>> retained;      // non-leaf retain_grad()
  std::string trace;              // anomaly mode: where the forward op ran
  bool materialize_grads = true;  // undefined output gradients become zeros before apply()
};

// ---- grad mode ----------------------------------------------------------------------------------
bool grad_mode_enabled();
void set_grad_enabled(bool enabled);
bool inference_mode_enabled();

// RAII guards, as torch::NoGradGuard / AutoGradMode / InferenceMode.
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : prev_(grad_mode_enabled()) { set_grad_enabled(enabled); }
  ~AutoGradMode() { set_grad_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};
struct NoGradGuard : AutoGradMode {
  NoGradGuard() : AutoGradMode(false) {}
};
struct EnableGradGuard : AutoGradMode {
  EnableGradGuard() : AutoGradMode(true) {}
};
// Inference mode: no graph is recorded; tensors made inside are inference tensors that may not be
// saved for backward later.
class InferenceMode {
 public:
  explicit InferenceMode(bool enabled = true);
  ~InferenceMode();
  InferenceMode(const InferenceMode&) = delete;
  InferenceMode& operator=(const InferenceMode&) = delete;

 private:
  bool prev_grad_, prev_inf_;
};

// Anomaly mode: records where each forward op ran and raises when a backward produces NaN,
// naming the forward op.
bool anomaly_mode_enabled();
void set_anomaly_enabled(bool enabled, bool check_nan = true);
// Returns the current forward location (the Python binding installs one that formats the stack).
void set_anomaly_trace_fn(std::string (*fn)());

// ---- tensor-level API (also Tensor methods) ----------------------------------------------------
bool requires_grad(const Tensor& t);
// Leaves only (a non-leaf accepts r = true as a no-op, as torch's requires_grad_), float/complex
// only.
const Tensor& set_requires_grad(const Tensor& t, bool r = true);
Tensor grad(const Tensor& t);  // undefined when none
void set_grad(const Tensor& t, const Tensor& g);
std::shared_ptr<Node> grad_fn(const Tensor& t);
bool is_leaf(const Tensor& t);
void retain_grad(const Tensor& t);
bool retains_grad(const Tensor& t);
Tensor detach(const Tensor& t);          // shares storage and version counter, no autograd history
const Tensor& detach_(const Tensor& t);  // not for views of tensors that require grad
// Tensor.data: shares memory but has its own version counter (changes are invisible to autograd).
Tensor variable_data(const Tensor& t);
// A differentiable view of a tensor that requires grad (tracked by autograd), and its root base.
bool is_view(const Tensor& t);
Tensor view_base(const Tensor& t);
// Returns an id for remove_hook. A gradient the hook returns must keep the dtype, device and size of the one
// it was given (RuntimeError naming the hook `name` otherwise, as torch's).
int register_hook(const Tensor& t, TensorHook hook, const std::string& name = "hook");
void remove_hook(const Tensor& t, int id);
// Leaves only (a non-leaf raises RuntimeError, as torch's); returns an id for remove_hook.
int register_post_accumulate_grad_hook(const Tensor& t, PostAccumulateGradHook hook);
// The edge a gradient for `t` flows into (its grad_fn slot, or the leaf's accumulator).
Edge gradient_edge(const Tensor& t);

// ---- the engine ---------------------------------------------------------------------------------
struct BackwardOptions {
  std::optional<bool> retain_graph;  // default: create_graph
  bool create_graph = false;
  TensorList inputs;  // accumulate only into these (empty: every leaf)
};
// tensors.backward(grad_tensors); an undefined gradient means ones for a one-element tensor.
void backward(const TensorList& tensors, const TensorList& grad_tensors = {},
              const BackwardOptions& opts = {});
// kiln.autograd.grad: gradients of `outputs` w.r.t. `inputs` (returned, not accumulated).
TensorList grad(const TensorList& outputs, const TensorList& inputs,
                const TensorList& grad_outputs = {},
                std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                bool allow_unused = false);

// Sums a (broadcast) gradient back to `shape`.
Tensor sum_to(const Tensor& g, const Shape& shape);
// The same to sizes that may be symbolic (a trace): compared as SymInts, so that they stay symbolic.
Tensor sum_to(const Tensor& g, const SymShape& shape);
// g's sizes are `s`: bit for bit for plain sizes; as SymInts otherwise (a comparison the value ranges
// cannot decide records a guard, as any traced size comparison does).
bool same_sizes(const Tensor& g, const SymShape& s);
// True for dtypes that carry gradients (floating point and complex).
bool is_differentiable(Dtype d);

// Installs the autograd layer into dispatch(); done at load time.
void install_autograd_layer();

}  // namespace kiln
