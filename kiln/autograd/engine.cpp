// The backward engine: a dependency count per node, a ready queue ordered by creation (newest
// first), an explicit work list instead of recursion, saved tensors freed after each node runs.
#include <algorithm>
#include <cmath>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "kiln/amp/autocast.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/format.h"
#include "kiln/core/stream.h"
#include "kiln/autograd/nodes.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

std::string dims_str(const Tensor& t) { return shape_list(t.sizes()); }

// Ones for an implicit gradient (scalar outputs only), or the given gradient after checks.
Tensor root_grad(const Tensor& out, const Tensor& g, size_t i, const char* who) {
  if (!g.defined()) {
    KILN_CHECK(out.numel() == 1, Runtime, who,
               "grad can be implicitly created only for scalar outputs");
    KILN_CHECK(is_floating(out.dtype()), Runtime, who,
               "grad can be implicitly created only for real scalar outputs but got ",
               dtype_name(out.dtype()));
    return ones_like(out);
  }
  KILN_CHECK(g.sizes() == out.sizes(), Runtime, who, "Mismatch in shape: grad_output[", i,
             "] has a shape of ", dims_str(g), " and output[", i, "] has a shape of ",
             dims_str(out), ".");
  KILN_CHECK(
      is_complex(g.dtype()) == is_complex(out.dtype()), Runtime, who,
      "For complex Tensors, both grad_output and output are required to have the same dtype. "
      "Mismatch in dtype: grad_output[",
      i, "] has a dtype of ", dtype_name(g.dtype()), " and output[", i, "] has a dtype of ",
      dtype_name(out.dtype()), ".");
  return g;
}

// In SymInts: in a trace, a comparison the value ranges cannot decide records a guard.
bool broadcastable_to(const SymShape& from, const SymShape& to) {  // `to` expands to `from`
  if (to.size() > from.size()) return false;
  size_t lead = from.size() - to.size();
  for (size_t i = 0; i < to.size(); ++i)
    if (to[i] != 1 && to[i] != from[lead + i]) return false;
  return true;
}

// Equal sizes; compared as SymInts when either is symbolic (a trace), so that reading them pins nothing.
bool same_sizes(const Tensor& a, const Tensor& b) {
  if (!a.has_symbolic_sizes() && !b.has_symbolic_sizes()) [[likely]] return a.sizes() == b.sizes();
  return same_sizes(a, b.sym_sizes());
}

// Sums two gradients for one input slot. Without create_graph, a buffer the engine alone holds
// (one handle, one storage owner, same shape and dtype as the sum) is added into in place.
Tensor accumulate(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  if (!grad_mode_enabled() && a.impl_ptr().use_count() == 1 && a.storage().use_count() == 1 &&
      a.is_contiguous() && a.dtype() == b.dtype() && same_sizes(a, b) && !requires_grad(a) &&
      !requires_grad(b)) {
    add_(a, b);
    return a;
  }
  return add(a, b);
}

bool has_nan(const Tensor& g) {
  if (!g.defined() || !(is_floating(g.dtype()) || is_complex(g.dtype())) || g.numel() == 0)
    return false;
  Tensor x = is_complex(g.dtype()) ? view_as_real(g) : g;
  return any(isnan(x)).item<bool>();
}

struct GraphTask {
  std::unordered_map<Node*, int> deps;
  std::unordered_map<Node*, TensorList> buffers;
  // autograd.grad / backward(inputs=): where gradients are captured, and which nodes must run
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>>
      captures;  // slot -> result idx
  std::unordered_set<Node*> needed;
  bool restrict = false;
};

void compute_dependencies(GraphTask& task, const std::vector<Node*>& roots) {
  std::vector<Node*> stack;
  std::unordered_set<Node*> seen;
  for (Node* r : roots)
    if (seen.insert(r).second) stack.push_back(r);
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.valid()) continue;
      Node* m = e.fn.get();
      task.deps[m] += 1;
      if (seen.insert(m).second) stack.push_back(m);
    }
  }
}

// Marks every node from which a capture target can be reached (iterative post-order).
void compute_needed(GraphTask& task, const std::vector<Node*>& roots) {
  std::unordered_map<Node*, int> state;  // 1 = on stack, 2 = done
  std::vector<std::pair<Node*, size_t>> stack;
  for (Node* r : roots) {
    if (state[r]) continue;
    state[r] = 1;
    stack.push_back({r, 0});
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->next_edges.size()) {
        Node* m = n->next_edges[i++].fn.get();
        if (m && !state[m]) {
          state[m] = 1;
          stack.push_back({m, 0});
        }
        continue;
      }
      bool need = false;
      for (const Edge& e : n->next_edges)
        if (e.valid() && (task.needed.count(e.fn.get()) || task.captures.count(e.fn.get())))
          need = true;
      if (need) task.needed.insert(n);
      state[n] = 2;
      stack.pop_back();
    }
  }
}

struct ByNewest {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

thread_local uint64_t tls_engine_runs = 0;  // engine_runs(): backward() calls

// Runs the graph from `roots` (edges) seeded with `root_grads`. `captured` (when restricting)
// receives the gradients at the capture slots.
void execute(const std::vector<Edge>& roots, const TensorList& root_grads, bool keep_graph,
             bool create_graph, GraphTask& task, TensorList* captured) {
  std::vector<Node*> root_nodes;
  for (const Edge& e : roots) root_nodes.push_back(e.fn.get());
  compute_dependencies(task, root_nodes);
  if (task.restrict) compute_needed(task, root_nodes);

  std::priority_queue<Node*, std::vector<Node*>, ByNewest> ready;
  std::unordered_map<Node*, std::shared_ptr<Node>> keep;  // keeps queued nodes alive
  for (size_t i = 0; i < roots.size(); ++i) {
    Node* n = roots[i].fn.get();
    TensorList& buf = task.buffers[n];
    if (buf.size() < n->out_specs.size() || buf.size() <= roots[i].input_nr)
      buf.resize(std::max<size_t>(n->out_specs.size(), roots[i].input_nr + 1));
    buf[roots[i].input_nr] = accumulate(buf[roots[i].input_nr], root_grads[i]);
    keep[n] = roots[i].fn;
  }
  for (auto& [n, p] : keep)
    if (task.deps[n] == 0) ready.push(n);

  AutoGradMode mode(create_graph);
  // backward runs in the dtypes forward chose; a custom Function's backward may turn autocast on
  // again (custom_bwd)
  amp::Autocast no_autocast(DeviceType::CPU, std::nullopt, false);
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    std::shared_ptr<Node> hold = keep[node];
    keep.erase(node);
    TensorList grads = std::move(task.buffers[node]);
    task.buffers.erase(node);
    grads.resize(std::max(grads.size(), node->out_specs.size()));

    // tensor hooks and retain_grad on the outputs this node produced; a leaf's hooks
    if (auto* acc = dynamic_cast<AccumulateGrad*>(node);
        acc && !grads.empty() && grads[0].defined())
      if (const auto& m = acc->leaf->autograd)
        for (auto& [id, h] : m->hooks) {
          Tensor r = h(grads[0]);
          if (r.defined()) grads[0] = r;
        }
    for (auto& [slot, hooks] : node->tensor_hooks)
      if (slot < grads.size() && grads[slot].defined())
        for (auto& [id, h] : hooks) {
          Tensor r = h(grads[slot]);
          if (r.defined()) grads[slot] = r;
        }
    for (auto& [slot, weak] : node->retained)
      if (auto impl = weak.lock(); impl && slot < grads.size() && grads[slot].defined()) {
        Tensor t(impl);
        Tensor old = grad(t);
        Tensor g = create_graph ? grads[slot] : detach(grads[slot]);
        set_grad(t, old.defined() ? add(old, g) : clone(g));
      }
    if (auto it = task.captures.find(node); it != task.captures.end()) {
      for (auto [slot, idx] : it->second)
        if (slot < grads.size()) (*captured)[idx] = accumulate((*captured)[idx], grads[slot]);
    }
    bool run = !task.restrict || task.needed.count(node);
    TensorList outs;
    if (run) {
      bool any_grad = false;
      for (const Tensor& g : grads) any_grad |= g.defined();
      if (any_grad) {
        for (size_t i = 0; i < node->out_specs.size() && node->materialize_grads; ++i)
          if (!grads[i].defined() && is_differentiable(node->out_specs[i].dtype()))
            grads[i] = zeros(node->out_specs[i].raw_sizes(), TensorOptions(node->out_specs[i].dtype()).device(node->out_specs[i].device()));
        outs = node->apply(std::move(grads));
        KILN_CHECK(outs.size() == node->next_edges.size(), Runtime, node->name().c_str(),
                   "function ", node->name(),
                   " returned an incorrect number of gradients (expected ", node->next_edges.size(),
                   ", got ", outs.size(), ")");
        for (size_t i = 0; i < outs.size(); ++i) {
          if (!node->next_edges[i].valid()) {  // a gradient nobody asked for is dropped unchecked
            outs[i] = Tensor();
            continue;
          }
          outs[i] = validate_grad(*node, i, std::move(outs[i]));
          if (anomaly_mode_enabled() && has_nan(outs[i])) {
            std::string msg = "Function '" + node->name() + "' returned nan values in its " +
                              std::to_string(i) + "th output.";
            if (!node->trace.empty()) msg += "\nThe forward call that created it:\n" + node->trace;
            KILN_CHECK(false, Runtime, "autograd", msg);
          }
        }
      }
      if (!keep_graph) node->release_saved();
    }
    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.valid()) continue;
      Node* m = e.fn.get();
      if (i < outs.size() && outs[i].defined()) {
        TensorList& buf = task.buffers[m];
        if (buf.size() <= e.input_nr)
          buf.resize(std::max<size_t>(m->out_specs.size(), e.input_nr + 1));
        buf[e.input_nr] = accumulate(buf[e.input_nr], outs[i]);
      }
      keep.emplace(m, e.fn);
      if (--task.deps[m] == 0) ready.push(m);
    }
  }
}

}  // namespace

uint64_t engine_runs() { return tls_engine_runs; }

// Gradient checks after a node ran: sum to the input's shape, cast to its dtype (DESIGN.md §2).
Tensor validate_grad(const Node& node, size_t i, Tensor g) {
  if (!g.defined() || i >= node.in_specs.size()) return g;
  const TensorSpec& spec = node.in_specs[i];
  if (!same_sizes(g, spec.sizes())) {
    SymShape gs = g.sym_sizes();
    if (broadcastable_to(gs, spec.sizes())) {
      g = sum_to(g, spec.sizes());
    } else {
      KILN_CHECK(static_cast<bool>(sym_numel(gs) == spec.numel()), Runtime, "autograd", "Function ",
                 node.name(), " returned an invalid gradient at index ", i, " - got ", dims_str(g),
                 " but expected shape compatible with ", is_symbolic(spec.sizes()) ? sym_str(spec.sizes()) : shape_list(spec.raw_sizes()));
      g = reshape(g, spec.raw_sizes());
    }
  }
  // A float8 input keeps its gradient in the (wider) dtype its op returned: rounding gradients to
  // float8 would lose them (decision 27); the cast that made the float8 tensor casts them back.
  if (g.dtype() != spec.dtype() && !is_float8(spec.dtype())) {
    if (is_complex(g.dtype()) && !is_complex(spec.dtype())) g = real(g);
    if (g.dtype() != spec.dtype()) g = to_dtype(g, spec.dtype());
  }
  if (g.device().type != spec.device().type) g = to_device(g, spec.device());  // as torch: back to the input's
  return g;
}

void backward(const TensorList& tensors, const TensorList& grad_tensors,
              const BackwardOptions& opts) {
  ++tls_engine_runs;
  stream_detail::wait_other_streams();  // forward work queued on other streams comes first
  KILN_CHECK(grad_tensors.empty() || grad_tensors.size() == tensors.size(), Runtime, "backward",
             "got ", grad_tensors.size(), " gradients for ", tensors.size(), " tensors");
  std::vector<Edge> roots;
  TensorList grads;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    KILN_CHECK(requires_grad(t), Runtime, "backward", "element ", i,
               " of tensors does not require grad and does not have a grad_fn");
    roots.push_back(gradient_edge(t));
    grads.push_back(root_grad(t, grad_tensors.empty() ? Tensor() : grad_tensors[i], i, "backward"));
  }
  bool keep = opts.retain_graph.value_or(opts.create_graph);
  GraphTask task;
  std::vector<std::shared_ptr<Node>> hold;  // accumulators stay alive while the graph runs
  TensorList captured(opts.inputs.size());
  if (!opts.inputs.empty()) {
    task.restrict = true;
    for (size_t i = 0; i < opts.inputs.size(); ++i) {
      const Tensor& in = opts.inputs[i];
      KILN_CHECK(requires_grad(in), Runtime, "backward",
                 "One of the differentiated Tensors does not require grad");
      Edge e = gradient_edge(in);
      hold.push_back(e.fn);
      task.captures[e.fn.get()].push_back({e.input_nr, i});
      if (is_leaf(in)) task.needed.insert(e.fn.get());  // its accumulator runs
    }
  }
  execute(roots, grads, keep, opts.create_graph, task, &captured);
  // non-leaf inputs get their gradient accumulated into .grad, as torch does
  for (size_t i = 0; i < opts.inputs.size(); ++i) {
    const Tensor& in = opts.inputs[i];
    if (is_leaf(in) || retains_grad(in) || !captured[i].defined())
      continue;  // retained: already set
    Tensor g = opts.create_graph ? captured[i] : detach(captured[i]);
    Tensor old = grad(in);
    set_grad(in, old.defined() ? add(old, g) : g);
  }
}

TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs,
                std::optional<bool> retain_graph, bool create_graph, bool allow_unused) {
  stream_detail::wait_other_streams();
  KILN_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), Runtime, "grad",
             "grad requires one grad_output per output: got ", grad_outputs.size(), " and ",
             outputs.size());
  std::vector<Edge> roots;
  TensorList grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    KILN_CHECK(requires_grad(t), Runtime, "grad", "element ", i,
               " of tensors does not require grad and does not have a grad_fn");
    roots.push_back(gradient_edge(t));
    grads.push_back(root_grad(t, grad_outputs.empty() ? Tensor() : grad_outputs[i], i, "grad"));
  }
  GraphTask task;
  task.restrict = true;
  std::vector<std::shared_ptr<Node>> hold;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(requires_grad(inputs[i]), Runtime, "grad",
               "One of the differentiated Tensors does not require grad");
    Edge e = gradient_edge(inputs[i]);
    hold.push_back(e.fn);
    task.captures[e.fn.get()].push_back({e.input_nr, i});
  }
  TensorList result(inputs.size());
  execute(roots, grads, retain_graph.value_or(create_graph), create_graph, task, &result);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!result[i].defined()) {
      KILN_CHECK(allow_unused, Runtime, "grad",
                 "One of the differentiated Tensors appears to not have been used in the graph. "
                 "Set allow_unused=True if this is the desired behavior.");
      continue;
    }
    if (!create_graph) result[i] = detach(result[i]);
    const Tensor& in = inputs[i];
    if (in.has_symbolic_sizes() || result[i].has_symbolic_sizes()) [[unlikely]] {
      result[i] = sum_to(result[i], in.sym_sizes());
    } else if (result[i].sizes() != in.sizes()) {
      result[i] = sum_to(result[i], in.sizes());
    }
    if (result[i].dtype() != in.dtype() && !is_float8(in.dtype())) {
      if (is_complex(result[i].dtype()) && !is_complex(in.dtype())) result[i] = real(result[i]);
      result[i] = to_dtype(result[i], in.dtype());
    }
  }
  return result;
}

bool same_sizes(const Tensor& g, const SymShape& s) {
  if (!g.has_symbolic_sizes()) [[likely]] {
    const Shape& gs = g.sizes();
    if (gs.size() != s.size()) return false;
    bool bits = true;
    for (size_t k = 0; k < s.size(); ++k) bits &= gs[k] == s[k].raw();
    if (bits || !is_symbolic(s)) return bits;
  }
  SymShape gs = g.sym_sizes();
  if (gs.size() != s.size()) return false;
  for (size_t k = 0; k < s.size(); ++k)
    if (gs[k] != s[k]) return false;
  return true;
}

Tensor sum_to(const Tensor& g, const SymShape& shape) {
  if (same_sizes(g, shape)) return g;
  const SymShape gs = g.sym_sizes();
  int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  Shape dims;
  for (int64_t i = 0; i < lead; ++i) dims.push_back(i);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 1 && gs[lead + i] != 1) dims.push_back(lead + static_cast<int64_t>(i));
  Tensor r = dims.empty() ? g : sum(g, dims, true);
  return same_sizes(r, shape) ? r : reshape(r, raw_shape(shape));
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.sizes() == shape) return g;
  int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  Shape dims;
  for (int64_t i = 0; i < lead; ++i) dims.push_back(i);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 1 && g.sizes()[lead + i] != 1) dims.push_back(lead + static_cast<int64_t>(i));
  Tensor r = dims.empty() ? g : sum(g, dims, true);
  return r.sizes() == shape ? r : reshape(r, shape);
}

}  // namespace kiln
