#include "kiln/autograd/graphed.h"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "kiln/autograd/autograd.h"
#include "kiln/autograd/function.h"
#include "kiln/autograd/nodes.h"
#include "kiln/core/error.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace detail {

struct GraphedState {
  size_t index = 0;   // among the callables made together (for messages)
  Graph fwd, bwd;
  bool has_bwd = false;
  TensorList args;     // the sample arguments: the forward graph's static inputs
  TensorList params;   // leaves besides the arguments that the backward differentiates
  std::vector<void*> param_ptrs;
  TensorList outs;                // the forward graph's static outputs
  std::vector<bool> out_diff;     // requires grad (gets a gradient slot in the backward graph)
  std::vector<bool> out_read;     // the backward graph reads it (an in-place change would be wrong)
  TensorList grad_outs;           // static incoming gradients (undefined: not differentiable)
  TensorList grad_ins;            // per args + params: static gradients (undefined: none)
  uint64_t generation = 0;        // forward replays so far
  std::weak_ptr<CustomNode> last_node;  // the latest call's backward node
};

namespace {

// The leaves (other than the arguments) whose gradients the outputs' history needs. Nodes made
// before `seq0` are history from outside the callable: allowed only as an argument's own history.
TensorList find_leaves(const TensorList& outs, const TensorList& args, uint64_t seq0, size_t index) {
  std::unordered_set<const TensorImpl*> arg_impls;
  std::unordered_set<const Node*> arg_fns;
  for (const Tensor& a : args) {
    arg_impls.insert(a.impl());
    if (AutogradMeta* m = meta_of(a); m && m->grad_fn) arg_fns.insert(m->grad_fn.get());
  }
  TensorList leaves;
  std::unordered_set<const TensorImpl*> seen_leaves;
  auto add_leaf = [&](const std::shared_ptr<TensorImpl>& impl) {
    if (arg_impls.count(impl.get()) || !seen_leaves.insert(impl.get()).second) return;
    leaves.push_back(Tensor(impl));
  };
  std::vector<Node*> stack;
  std::unordered_set<const Node*> visited;
  for (const Tensor& o : outs) {
    if (!o.defined() || !requires_grad(o)) continue;
    AutogradMeta* m = fresh_meta(o);
    if (!m->grad_fn) {
      add_leaf(o.impl_ptr());  // the callable returned a leaf itself
    } else if (m->grad_fn->sequence_nr >= seq0 && visited.insert(m->grad_fn.get()).second) {
      stack.push_back(m->grad_fn.get());
    }
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.fn) continue;
      if (auto* acc = dynamic_cast<AccumulateGrad*>(e.fn.get())) {
        add_leaf(acc->leaf);
        continue;
      }
      if (e.fn->sequence_nr < seq0) {
        KILN_CHECK(arg_fns.count(e.fn.get()), Runtime, "make_graphed_callables", "callable ", index,
                   " reads a tensor that requires grad and was computed before the call (its grad_fn is ",
                   e.fn->name(), "): a replay could not send its gradient back through that history. ",
                   "Pass it as an argument");
        continue;
      }
      if (visited.insert(e.fn.get()).second) stack.push_back(e.fn.get());
    }
  }
  return leaves;
}

// A gradient to take: the outputs `diff` selects, with zero incoming gradients, against the tensors
// of `surface` that require grad; with the positions of each among the outputs and the surface.
struct GradProblem {
  TensorList outs, gos, ins;
  std::vector<size_t> out_at, in_at;
};
GradProblem grad_problem(const TensorList& outs, const std::vector<bool>& diff, const TensorList& surface) {
  GradProblem p;
  for (size_t i = 0; i < outs.size(); ++i)
    if (diff[i]) {
      p.outs.push_back(outs[i]);
      p.gos.push_back(zeros_like(outs[i]));
      p.out_at.push_back(i);
    }
  for (size_t i = 0; i < surface.size(); ++i)
    if (requires_grad(surface[i])) {
      p.ins.push_back(surface[i]);
      p.in_at.push_back(i);
    }
  return p;
}

TensorList concat(const TensorList& a, const TensorList& b) {
  TensorList r(a);
  r.insert(r.end(), b.begin(), b.end());
  return r;
}

TensorList call(const GraphedFn& fn, const TensorList& args, size_t index) {
  TensorList outs = fn(args);
  for (size_t i = 0; i < outs.size(); ++i)
    KILN_CHECK(outs[i].defined(), Type, "make_graphed_callables", "callable ", index, " returned output ",
               i, " undefined (outputs must be tensors)");
  return outs;
}


}  // namespace

// After the forward capture: the leaves the backward differentiates and which outputs get a
// gradient. A callable that ran backward() itself (a whole training step) has its gradients in the
// forward graph: no backward graph, its outputs are plain tensors (as kiln.graph records a step).
// autograd.grad inside (a gradient penalty) is part of an ordinary forward.
void finish_forward(GraphedState& s, uint64_t seq0, uint64_t runs0, bool grad_on) {
  const bool own_backward = engine_runs() != runs0;
  if (grad_on && !own_backward) s.params = find_leaves(s.outs, s.args, seq0, s.index);
  for (const Tensor& p : s.params) s.param_ptrs.push_back(p.storage()->data());
  for (const Tensor& o : s.outs) s.out_diff.push_back(grad_on && !own_backward && requires_grad(o));
}

// The backward graph: autograd::grad of the outputs that require grad (static incoming gradients)
// with respect to the arguments and leaves that require grad.
void capture_backward(GraphedState& s, const GraphPool& pool, bool allow_unused) {
  const GradProblem p = grad_problem(s.outs, s.out_diff, concat(s.args, s.params));
  s.grad_ins.assign(s.args.size() + s.params.size(), Tensor());
  s.grad_outs.assign(s.outs.size(), Tensor());
  for (size_t k = 0; k < p.out_at.size(); ++k) s.grad_outs[p.out_at[k]] = p.gos[k];
  if (p.outs.empty() || p.ins.empty()) return;
  TensorList grads;
  {
    GraphCapture capture(s.bwd, pool);
    grads = kiln::grad(p.outs, p.ins, p.gos, false, false, allow_unused);
  }
  s.has_bwd = true;
  for (size_t k = 0; k < p.in_at.size(); ++k) s.grad_ins[p.in_at[k]] = grads[k];
  for (const Tensor& o : s.outs) s.out_read.push_back(s.bwd.reads(o));
}
}  // namespace detail

std::vector<GraphedCallable> make_graphed_callables(const std::vector<GraphedFn>& fns,
                                                    const std::vector<TensorList>& sample_args,
                                                    const GraphedOptions& opts) {
  using detail::GraphedState;
  KILN_CHECK(fns.size() == sample_args.size(), Value, "make_graphed_callables", "got ", fns.size(),
             " callables but ", sample_args.size(), " tuples of sample arguments");
  KILN_CHECK(opts.num_warmup_iters >= 0, Value, "make_graphed_callables", "num_warmup_iters must be >= 0, got ",
             opts.num_warmup_iters);
  KILN_CHECK(!graph_capturing(), Runtime, "make_graphed_callables",
             "called while a graph captures on this thread (graphs do not nest)");
  for (size_t c = 0; c < fns.size(); ++c) {
    KILN_CHECK(static_cast<bool>(fns[c]), Value, "make_graphed_callables", "callable ", c, " is empty");
    for (size_t i = 0; i < sample_args[c].size(); ++i) {
      const Tensor& a = sample_args[c][i];
      KILN_CHECK(a.defined(), Type, "make_graphed_callables", "sample argument ", i, " of callable ", c,
                 " is undefined (sample arguments must be tensors)");
      KILN_CHECK(a.is_cpu(), Runtime, "make_graphed_callables", "sample argument ", i, " of callable ", c,
                 " is on ", device_str(a.device()), "; graphs capture CPU tensors");
    }
  }
  const GraphPool pool = opts.pool.defined() ? opts.pool : GraphPool::create();
  const bool grad_on = grad_mode_enabled();
  std::vector<std::shared_ptr<GraphedState>> states;
  for (size_t c = 0; c < fns.size(); ++c) {
    auto s = std::make_shared<GraphedState>();
    s->index = c;
    s->args = sample_args[c];
    states.push_back(std::move(s));
  }

  // warm-up: forward and a gradient nobody keeps (errors in the callable surface here, uncaptured)
  for (auto& s : states)
    for (int it = 0; it < opts.num_warmup_iters; ++it) {
      const uint64_t seq0 = next_sequence_nr();
      TensorList outs = detail::call(fns[s->index], s->args, s->index);
      if (!grad_on) continue;
      std::vector<bool> diff;
      for (const Tensor& o : outs) diff.push_back(requires_grad(o));
      const detail::GradProblem p = detail::grad_problem(
          outs, diff, detail::concat(s->args, detail::find_leaves(outs, s->args, seq0, s->index)));
      if (!p.outs.empty() && !p.ins.empty()) kiln::grad(p.outs, p.ins, p.gos, false, false, opts.allow_unused_input);
    }

  // forwards in order
  for (auto& s : states) {
    const uint64_t seq0 = next_sequence_nr(), runs0 = engine_runs();
    {
      GraphCapture capture(s->fwd, pool);
      s->outs = detail::call(fns[s->index], s->args, s->index);
    }
    detail::finish_forward(*s, seq0, runs0, grad_on);
  }

  // backwards in reverse order (as torch: the last forward's backward runs first in training)
  for (auto it = states.rbegin(); it != states.rend(); ++it) detail::capture_backward(**it, pool, opts.allow_unused_input);

  std::vector<GraphedCallable> result;
  for (auto& s : states) {
    GraphedCallable g;
    g.s_ = s;
    result.push_back(std::move(g));
  }
  return result;
}

GraphedCallable make_graphed_from_capture(Graph&& forward, const TensorList& args, const TensorList& outputs,
                                         uint64_t seq0, uint64_t runs0, const GraphPool& pool, bool allow_unused_input) {
  auto s = std::make_shared<detail::GraphedState>();
  s->fwd = std::move(forward);
  s->args = args;
  s->outs = outputs;
  detail::finish_forward(*s, seq0, runs0, grad_mode_enabled());
  detail::capture_backward(*s, pool.defined() ? pool : s->fwd.pool(), allow_unused_input);
  GraphedCallable g;
  g.s_ = std::move(s);
  return g;
}

GraphedCallable make_graphed_callable(const GraphedFn& fn, const TensorList& sample_args,
                                      const GraphedOptions& opts) {
  return make_graphed_callables({fn}, {sample_args}, opts)[0];
}

TensorList GraphedCallable::operator()(const TensorList& args) const { return run(args, true); }

TensorList GraphedCallable::first_call(const TensorList& args) const {
  KILN_CHECK(s_ != nullptr && s_->generation == 0, Runtime, "graphed callable",
             "first_call() is for the call right after make_graphed_callables");
  return run(args, false);
}

TensorList GraphedCallable::run(const TensorList& args, bool replay) const {
  KILN_CHECK(s_ != nullptr, Runtime, "graphed callable", "called before make_graphed_callables made it");
  detail::GraphedState& s = *s_;
  const char* who = "graphed callable";
  KILN_CHECK(args.size() == s.args.size(), Type, who, "callable ", s.index, " takes ", s.args.size(),
             " tensor arguments (as its sample arguments) but got ", args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const Tensor& a = args[i];
    const Tensor& st = s.args[i];
    KILN_CHECK(a.defined(), Type, who, "argument ", i, " of callable ", s.index, " is undefined");
    KILN_CHECK(a.sizes() == st.sizes() && a.dtype() == st.dtype(), Runtime, who, "argument ", i, " of callable ",
               s.index, " has shape ", a.sizes(), " and dtype ", dtype_name(a.dtype()),
               " but the graph was captured for shape ", st.sizes(), " and dtype ", dtype_name(st.dtype()),
               ": make a graphed callable per input signature");
    KILN_CHECK(!(grad_mode_enabled() && requires_grad(a) && !requires_grad(st)), Runtime, who, "argument ", i,
               " of callable ", s.index, " requires grad but its sample argument did not, so the captured ",
               "backward computes no gradient for it: give the sample argument requires_grad=True");
  }
  for (size_t k = 0; k < s.params.size(); ++k)
    KILN_CHECK(s.params[k].storage()->data() == s.param_ptrs[k], Runtime, who, "parameter ", k, " (shape ",
               s.params[k].sizes(), ") of callable ", s.index,
               " no longer has the memory the graphs captured (was it replaced, e.g. through .data = or a "
               "move to another device?): make the graphed callable again");
  if (replay) {
    NoGradGuard no_grad;
    for (size_t i = 0; i < args.size(); ++i)
      if (!args[i].is_same(s.args[i]) &&
          !(args[i].data_ptr() == s.args[i].data_ptr() && args[i].strides() == s.args[i].strides()))
        copy_(s.args[i], args[i]);
    s.fwd.replay();
  }
  const uint64_t gen = ++s.generation;
  TensorList outs;
  outs.reserve(s.outs.size());
  for (const Tensor& o : s.outs) outs.push_back(detach(o));
  TensorList inputs = detail::concat(args, s.params);
  if (!s.has_bwd || !autograd::function_needs_record(inputs)) return outs;

  autograd::FunctionRecord rec;
  rec.name = "GraphedBackward";
  rec.inputs = std::move(inputs);
  rec.outputs = outs;
  for (size_t i = 0; i < outs.size(); ++i)
    if (!s.out_diff[i]) rec.non_differentiable.push_back(outs[i]);
  std::vector<uint32_t> versions;  // of the outputs the backward graph reads
  for (size_t i = 0; i < s.outs.size(); ++i) versions.push_back(s.outs[i].version());
  rec.backward = [state = s_, gen, versions = std::move(versions)](CustomNode&, TensorList&& grads) -> TensorList {
    detail::GraphedState& st = *state;
    const char* bwho = "graphed callable backward";
    KILN_CHECK(gen == st.generation, Runtime, bwho, "callable ", st.index,
               " ran its forward again before this backward: the static memory the backward reads holds ",
               "the later call's values (call backward after each forward, or make one graphed callable ",
               "per micro-batch)");
    for (size_t i = 0; i < st.outs.size(); ++i)
      KILN_CHECK(!st.out_read[i] || st.outs[i].version() == versions[i], Runtime, bwho,
                 "one of the variables needed for gradient computation has been modified by an inplace "
                 "operation: output ", i, " of graphed callable ", st.index, " (shape ", st.outs[i].sizes(),
                 ") is at version ", st.outs[i].version(), "; expected version ", versions[i],
                 " instead (the replayed backward reads it)");
    KILN_CHECK(!grad_mode_enabled(), Runtime, bwho, "the backward of a graphed callable is a replay and ",
               "cannot be differentiated again (create_graph=True)");
    for (size_t i = 0; i < st.grad_outs.size() && i < grads.size(); ++i) {
      if (!st.grad_outs[i].defined()) continue;
      if (!grads[i].defined()) {
        zero_(st.grad_outs[i]);
      } else if (!grads[i].is_same(st.grad_outs[i])) {
        copy_(st.grad_outs[i], grads[i]);
      }
    }
    st.bwd.replay();
    TensorList r;
    r.reserve(st.grad_ins.size());
    for (const Tensor& g : st.grad_ins) r.push_back(g.defined() ? detach(g) : Tensor());
    return r;
  };
  std::shared_ptr<CustomNode> node;
  TensorList r = autograd::record_function(std::move(rec), &node);
  s.last_node = node;
  return r;
}

bool GraphedCallable::backward_pending() const {
  if (!s_) return false;
  std::shared_ptr<CustomNode> n = s_->last_node.lock();
  return n && !n->released;
}

TensorList GraphedCallable::parameters() const { return s_ ? s_->params : TensorList{}; }
const Graph& GraphedCallable::forward_graph() const {
  KILN_CHECK(s_ != nullptr, Runtime, "graphed callable", "not made");
  return s_->fwd;
}
const Graph& GraphedCallable::backward_graph() const {
  KILN_CHECK(s_ != nullptr, Runtime, "graphed callable", "not made");
  return s_->bwd;
}

}  // namespace kiln
