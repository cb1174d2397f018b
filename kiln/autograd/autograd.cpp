// Grad mode, the per-tensor autograd state, saved tensors, the node kinds, and the autograd layer
// that dispatch() calls for every op whose inputs require grad.
#include "kiln/autograd/autograd.h"
#include "kiln/autograd/non_differentiable.h"
#include "kiln/core/format.h"

#include <atomic>
#include <cctype>
#include <cstring>

#include "kiln/autograd/nodes.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

thread_local bool t_grad_enabled = true;
std::atomic<uint64_t> g_sequence{0};
std::atomic<bool> g_anomaly{false};
std::string (*g_trace_fn)() = nullptr;
std::atomic<int> g_hook_id{0};

const char* legacy_type(Dtype d) {
  switch (d) {
    case kFloat32:
      return "FloatTensor";
    case kFloat64:
      return "DoubleTensor";
    case kFloat16:
      return "HalfTensor";
    case kBFloat16:
      return "BFloat16Tensor";
    case kComplex64:
      return "ComplexFloatTensor";
    case kComplex128:
      return "ComplexDoubleTensor";
    case kInt64:
      return "LongTensor";
    case kInt32:
      return "IntTensor";
    default:
      return "Tensor";
  }
}

std::string describe(const Tensor& t) {
  return std::string("[kiln.") + legacy_type(t.dtype()) + " " + shape_list(t.sizes()) + "]";
}

}  // namespace

AutogradMeta* meta_of(const Tensor& t) { return t.defined() ? t.impl()->autograd.get() : nullptr; }
AutogradMeta& ensure_meta(const Tensor& t) {
  if (!t.impl()->autograd) t.impl()->autograd = std::make_shared<AutogradMeta>();
  return *t.impl()->autograd;
}

void set_history(const Tensor& t, const std::shared_ptr<Node>& fn, uint32_t output_nr) {
  AutogradMeta& m = ensure_meta(t);
  if (m.retains_grad && m.grad_fn) m.grad_fn->retained.erase(m.output_nr);
  m.requires_grad = true;
  m.grad_fn = fn;
  m.output_nr = output_nr;
  if (m.retains_grad && fn) fn->retained[output_nr] = t.impl_ptr();
}

// ---- grad mode ----------------------------------------------------------------------------------
bool grad_mode_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool enabled) { t_grad_enabled = enabled; }
bool inference_mode_enabled() { return inference_mode_tls(); }
InferenceMode::InferenceMode(bool enabled)
    : prev_grad_(t_grad_enabled), prev_inf_(inference_mode_tls()) {
  if (enabled) t_grad_enabled = false;
  inference_mode_tls() = enabled;
}
InferenceMode::~InferenceMode() {
  t_grad_enabled = prev_grad_;
  inference_mode_tls() = prev_inf_;
}
bool anomaly_mode_enabled() { return g_anomaly.load(std::memory_order_relaxed); }
void set_anomaly_enabled(bool enabled, bool) { g_anomaly = enabled; }
void set_anomaly_trace_fn(std::string (*fn)()) { g_trace_fn = fn; }
std::string anomaly_trace(const std::string& fallback) {
  return g_trace_fn ? g_trace_fn() : fallback;
}

bool is_differentiable(Dtype d) { return is_floating(d) || is_complex(d); }

// ---- per-tensor state ---------------------------------------------------------------------------
bool requires_grad(const Tensor& t) {
  const AutogradMeta* m = meta_of(t);
  return m && m->requires_grad;
}

const Tensor& set_requires_grad(const Tensor& t, bool r) {
  AutogradMeta* m = fresh_meta(t);
  if (r && m && m->grad_fn) return t;  // torch's requires_grad_(True) on a non-leaf: nothing to do
  KILN_CHECK(!(m && m->grad_fn), Runtime, "requires_grad_",
             r ? "you can only change requires_grad flags of leaf variables."
               : "you can only change requires_grad flags of leaf variables. If you want to use a "
                 "computed variable in a subgraph that doesn't require differentiation use "
                 "var_no_grad = var.detach().");
  KILN_CHECK(!r || is_differentiable(t.dtype()), Runtime, "requires_grad_",
             "only Tensors of floating point and complex dtype can require gradients");
  KILN_CHECK(
      !r || !t.impl()->inference || inference_mode_tls(), Runtime, "requires_grad_",
      "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.");
  if (r || m) ensure_meta(t).requires_grad = r;
  return t;
}

Tensor grad(const Tensor& t) {
  const AutogradMeta* m = meta_of(t);
  return m ? m->grad : Tensor();
}

void set_grad(const Tensor& t, const Tensor& g) {
  if (g.defined()) {
    KILN_CHECK(g.sizes() == t.sizes(), Runtime, "grad",
               "assigned grad has data of a different size");
    KILN_CHECK(g.dtype() == t.dtype(), Runtime, "grad",
               "assigned grad has data of a different type");
  }
  if (!g.defined() && !meta_of(t)) return;
  ensure_meta(t).grad = g;
}

std::shared_ptr<Node> grad_fn(const Tensor& t) {
  const AutogradMeta* m = fresh_meta(t);
  return m ? m->grad_fn : nullptr;
}

bool is_leaf(const Tensor& t) { return grad_fn(t) == nullptr; }

void retain_grad(const Tensor& t) {
  KILN_CHECK(requires_grad(t), Runtime, "retain_grad",
             "can't retain_grad on Tensor that has requires_grad=False");
  fresh_meta(t);
  AutogradMeta& m = ensure_meta(t);
  if (!m.grad_fn || m.retains_grad) return;
  m.grad_fn->retained[m.output_nr] = t.impl_ptr();
  m.retains_grad = true;
}

bool retains_grad(const Tensor& t) {
  const AutogradMeta* m = meta_of(t);
  return m && m->retains_grad;
}

Tensor detach(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>(*t.impl());
  impl->autograd = nullptr;
  return Tensor(std::move(impl));
}

Tensor variable_data(const Tensor& t) {
  // a second Storage over the same memory (so a second version counter); it keeps the first alive
  const std::shared_ptr<Storage>& st = t.storage();
  auto* keep = new std::shared_ptr<Storage>(st);
  auto alias = std::make_shared<Storage>(
      st->data(), st->nbytes(), st->device(),
      [](void*, size_t, void* ctx) { delete static_cast<std::shared_ptr<Storage>*>(ctx); }, keep);
  auto impl = std::make_shared<TensorImpl>(*t.impl());
  impl->storage = std::move(alias);
  impl->autograd = nullptr;
  return Tensor(std::move(impl));
}

bool is_view(const Tensor& t) {
  const AutogradMeta* m = meta_of(t);
  return m && m->view_base;
}

Tensor view_base(const Tensor& t) {
  const AutogradMeta* m = meta_of(t);
  return m && m->view_base ? Tensor(m->view_base) : Tensor();
}

const Tensor& detach_(const Tensor& t) {
  if (AutogradMeta* m = meta_of(t)) {
    KILN_CHECK(!m->view_base, Runtime, "detach_",
               "Can't detach views in-place. Use detach() instead.");
    if (m->retains_grad && m->grad_fn) m->grad_fn->retained.erase(m->output_nr);
    m->retains_grad = false;
    m->grad_fn = nullptr;
    m->requires_grad = false;
    m->output_nr = 0;
  }
  return t;
}

int register_hook(const Tensor& t, TensorHook hook, const std::string& name) {
  KILN_CHECK(requires_grad(t), Runtime, "register_hook",
             "cannot register a hook on a tensor that doesn't require gradient");
  // torch's check of a replacement gradient: the same dtype, device and size as the one the hook saw
  hook = [fn = std::move(hook), name](const Tensor& g) {
    Tensor r = fn(g);
    if (!r.defined()) return r;
    KILN_CHECK(r.dtype() == g.dtype(), Runtime, "register_hook", "hook '", name, "' has changed the type of value "
               "(was kiln.", legacy_type(g.dtype()), " got kiln.", legacy_type(r.dtype()), ")");
    KILN_CHECK(r.device() == g.device(), Runtime, "register_hook", "hook '", name, "' has changed the type of value "
               "(was a ", device_str(g.device()), " tensor got a ", device_str(r.device()), " tensor)");
    KILN_CHECK(r.sym_sizes() == g.sym_sizes(), Runtime, "register_hook", "hook '", name,
               "' has changed the size of value (was ", shape_list(g.sizes()), " got ", shape_list(r.sizes()), ")");
    return r;
  };
  int id = ++g_hook_id;
  fresh_meta(t);
  AutogradMeta& m = ensure_meta(t);
  if (m.grad_fn) {
    m.grad_fn->tensor_hooks[m.output_nr][id] = std::move(hook);
    m.hook_nodes[id] = m.grad_fn;
  } else {
    m.hooks[id] = std::move(hook);
  }
  return id;
}

int register_post_accumulate_grad_hook(const Tensor& t, PostAccumulateGradHook hook) {
  KILN_CHECK(requires_grad(t), Runtime, "register_post_accumulate_grad_hook",
             "cannot register a hook on a tensor that doesn't require gradient");
  KILN_CHECK(is_leaf(t), Runtime, "register_post_accumulate_grad_hook",
             "post accumulate grad hooks cannot be registered on non-leaf tensors");
  int id = ++g_hook_id;
  ensure_meta(t).post_acc_hooks[id] = std::move(hook);
  return id;
}

void remove_hook(const Tensor& t, int id) {
  AutogradMeta* m = meta_of(t);
  if (!m) return;
  m->hooks.erase(id);
  m->post_acc_hooks.erase(id);
  if (auto it = m->hook_nodes.find(id); it != m->hook_nodes.end()) {
    if (auto node = it->second.lock())
      for (auto& [slot, hooks] : node->tensor_hooks) hooks.erase(id);
    m->hook_nodes.erase(it);
  }
}

Edge gradient_edge(const Tensor& t) {
  fresh_meta(t);
  AutogradMeta& m = ensure_meta(t);
  if (m.grad_fn) return {m.grad_fn, m.output_nr};
  std::shared_ptr<Node> acc = m.grad_accumulator.lock();
  if (!acc) {
    auto a = std::make_shared<AccumulateGrad>();
    a->leaf = t.impl_ptr();
    a->out_specs = {TensorSpec::of(t)};
    m.grad_accumulator = a;
    acc = a;
  }
  return {acc, 0};
}

bool Tensor::requires_grad() const { return kiln::requires_grad(*this); }
const Tensor& Tensor::requires_grad_(bool r) const { return set_requires_grad(*this, r); }
Tensor Tensor::grad() const { return kiln::grad(*this); }
std::shared_ptr<Node> Tensor::grad_fn() const { return kiln::grad_fn(*this); }
bool Tensor::is_leaf() const { return kiln::is_leaf(*this); }
Tensor Tensor::detach() const { return kiln::detach(*this); }
void Tensor::retain_grad() const { kiln::retain_grad(*this); }
void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph,
                      bool create_graph) const {
  BackwardOptions o;
  o.retain_graph = retain_graph;
  o.create_graph = create_graph;
  kiln::backward({*this}, {gradient}, o);
}

// ---- saved tensors ------------------------------------------------------------------------------
namespace {
thread_local std::vector<SavedTensorHooks> tls_saved_hooks;
}  // namespace
std::string& saved_tensor_hooks_disabled_message() {
  thread_local std::string msg;
  return msg;
}
void push_saved_tensor_hooks(SavedTensorHooks hooks) {
  const std::string& off = saved_tensor_hooks_disabled_message();
  KILN_CHECK(off.empty(), Runtime, "saved_tensors_hooks", off);
  tls_saved_hooks.push_back(std::move(hooks));
}
void pop_saved_tensor_hooks() {
  KILN_CHECK(!tls_saved_hooks.empty(), Runtime, "saved_tensors_hooks", "no saved-tensor hooks to pop");
  tls_saved_hooks.pop_back();
}

SavedTensor::SavedTensor(const Tensor& t, bool is_output) : is_output_(is_output) {
  was_defined_ = t.defined();
  if (!was_defined_) return;
  KILN_CHECK(
      !t.impl()->inference, Runtime, "autograd",
      "Inference tensors cannot be saved for backward. To work around you can make a clone to "
      "get a normal tensor and use it in autograd.");
  version_ = t.version();
  requires_grad_ = requires_grad(t);
  if (is_output) {
    if (const AutogradMeta* m = meta_of(t)) output_nr_ = m->output_nr;
    data_ = detach(t);
  } else {
    data_ = t;
  }
  if (!tls_saved_hooks.empty()) {
    // the hook pair stays installed while pack runs (as torch's), so copy it first
    SavedTensorHooks hooks = tls_saved_hooks.back();
    {
      NoGradGuard no_grad;  // packing is not differentiated (torch packs in no-grad mode too)
      packed_ = hooks.pack(data_);
    }
    unpack_ = std::move(hooks.unpack);
    data_ = Tensor();
  }
}

void SavedTensor::release() {
  data_ = Tensor();
  packed_.reset();
  unpack_ = nullptr;
  released_ = was_defined_;
}

Tensor SavedTensor::unpack(const std::shared_ptr<Node>& owner) const {
  if (!was_defined_) return Tensor();
  KILN_CHECK(
      !released_, Runtime, "autograd",
      "Trying to backward through the graph a second time (or directly access saved tensors "
      "after they have already been freed). Saved intermediate values of the graph are freed "
      "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
      "backward through the graph a second time or if you need to access saved tensors after "
      "calling backward.");
  if (unpack_) {
    Tensor t = unpack_(packed_);
    if (is_output_ && requires_grad_ && t.defined()) {
      t = detach(t);
      AutogradMeta& m = ensure_meta(t);
      m.requires_grad = true;
      m.grad_fn = owner;
      m.output_nr = output_nr_;
    }
    return t;
  }
  if (data_.version() != version_) {
    std::string who;
    if (is_output_)
      who = ", which is output " + std::to_string(output_nr_) + " of " + owner->name() + ",";
    else if (auto fn = grad_fn(data_))
      who = ", which is output " + std::to_string(meta_of(data_)->output_nr) + " of " + fn->name() +
            ",";
    KILN_CHECK(
        false, Runtime, "autograd",
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: ",
        describe(data_), who, " is at version ", data_.version(), "; expected version ", version_,
        " instead. Hint: enable anomaly detection to find the operation that failed to "
        "compute its gradient, with kiln.autograd.set_detect_anomaly(True).");
  }
  if (is_output_ && requires_grad_) {
    Tensor t = detach(data_);
    AutogradMeta& m = ensure_meta(t);
    m.requires_grad = true;
    m.grad_fn = owner;
    m.output_nr = output_nr_;
    return t;
  }
  return data_;
}

// ---- nodes --------------------------------------------------------------------------------------
Node::Node() : sequence_nr(g_sequence.fetch_add(1, std::memory_order_relaxed)) {}
uint64_t next_sequence_nr() { return g_sequence.load(std::memory_order_relaxed); }

// A chain of 100k nodes would otherwise be freed by 100k nested destructors: a node whose last
// owner is a dying node is queued and freed by the outermost destructor's loop.
Node::~Node() {
  thread_local std::vector<std::shared_ptr<Node>> pending;
  thread_local bool draining = false;
  for (Edge& e : next_edges)
    if (e.fn && e.fn.use_count() == 1) pending.push_back(std::move(e.fn));
  next_edges.clear();
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    std::shared_ptr<Node> n = std::move(pending.back());
    pending.pop_back();
    n.reset();
  }
  draining = false;
}

std::string backward_name(const char* op) {
  if (std::strcmp(op, "true_divide") == 0) op = "div";  // torch's name for a / b
  std::string s;
  bool up = true;
  for (const char* p = op; *p; ++p) {
    if (*p == '_') {
      up = true;
      continue;
    }
    s += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(*p))) : *p;
    up = false;
  }
  return s + "Backward0";
}

std::string OpNode::name() const { return backward_name(op->name); }

TensorList OpNode::apply(TensorList&& grad_outputs) {
  auto self = shared_from_this();
  TensorList in(saved_in.size()), out(saved_out.size());
  for (size_t i = 0; i < saved_in.size(); ++i) in[i] = saved_in[i].unpack(self);
  for (size_t i = 0; i < saved_out.size(); ++i) out[i] = saved_out[i].unpack(self);
  bool any = false;
  for (bool b : needs) any |= b;
  if (!any || !op->derivative) return TensorList(next_edges.size());
  GradCtx ctx{*op, attrs, in, out, in_specs, needs};
  TensorList r = op->derivative(ctx, grad_outputs);
  r.resize(next_edges.size());
  for (size_t i = 0; i < r.size(); ++i)
    if (!needs[i]) r[i] = Tensor();
  return r;
}

void OpNode::release_saved() {
  for (SavedTensor& s : saved_in) s.release();
  for (SavedTensor& s : saved_out) s.release();
  released = true;
}

TensorList NotImplementedNode::apply(TensorList&&) {
  KILN_CHECK(false, NotImplemented, op_name.c_str(), "the derivative for '", op_name,
             "' is not implemented.");
  return {};
}

TensorList AccumulateGrad::apply(TensorList&& grad_outputs) {
  Tensor g = std::move(grad_outputs[0]);  // the leaf's hooks already ran (engine)
  if (!g.defined()) return {};
  Tensor var(leaf);
  AutogradMeta& m = ensure_meta(var);
  if (!grad_mode_enabled()) {
    if (requires_grad(g)) g = detach(g);
    bool steal = g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1 && g.is_contiguous();
    if (!m.grad.defined()) {
      m.grad = steal ? g : clone(g);
    } else if (!requires_grad(m.grad)) {
      add_(m.grad, g);
    } else {
      m.grad = add(m.grad, g);
    }
  } else {
    m.grad = m.grad.defined() ? add(m.grad, g) : clone(g);  // never an alias of another gradient
  }
  if (!m.post_acc_hooks.empty()) {
    auto hooks = m.post_acc_hooks;  // a hook may remove itself
    for (auto& [id, h] : hooks) h(var);
  }
  return {};
}

void CustomNode::release_saved() {
  for (SavedTensor& s : saved) s.release();
  released = true;
  if (on_release) on_release();
}

TensorList CustomNode::unpack_saved() {
  auto self = shared_from_this();
  TensorList r;
  for (const SavedTensor& s : saved) r.push_back(s.unpack(self));
  return r;
}

// ---- the autograd layer -------------------------------------------------------------------------
namespace {

// Out of line so that needs_grad computes the thread-local's address only when a tensor requires grad
// (the compiler would otherwise compute it on entry, a TLS-descriptor call on every op from Python).
[[gnu::noinline]] bool grad_enabled_here() { return t_grad_enabled; }

// dispatch() calls the layer when this is true: an input that requires grad (grad mode on), or an
// inference tensor outside inference mode (which may not be updated in place).
bool needs_grad(const TensorList& ts) {
  for (const Tensor& t : ts)
    if (t.defined()) {
      const TensorImpl* impl = t.impl();
      const AutogradMeta* m = impl->autograd.get();
      if (m && m->requires_grad && grad_enabled_here()) return true;
      if (impl->inference && !inference_mode_tls()) [[unlikely]]
        return true;
    }
  return false;
}

TensorList plain(const OpDef& op, const TensorList& inputs, const Attrs& attrs, TensorList* out,
                 bool inplace) {
  TensorList r = dispatch_kernel(op, inputs, attrs, out, inplace);
  if (inference_mode_tls() && !out)
    for (Tensor& t : r)
      if (t.defined()) t.impl()->inference = true;
  return r;
}

TensorList autograd_layer(const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                          TensorList* out, bool inplace) {
  static const bool resolved = (resolve_derivatives(), true);
  (void)resolved;
  if (inference_mode_tls()) return plain(op, inputs, attrs, out, inplace);
  // in-place: torch's `x.op_(...)` (out = {x}), or a table op named `*_` writing into its input 0
  const size_t len = std::strlen(op.name);
  const bool writes_self =
      inplace || (!out && len > 1 && op.name[len - 1] == '_' && !inputs.empty());
  const Tensor* self = inplace ? &(*out)[0] : (writes_self ? &inputs[0] : nullptr);
  if (self || out) {
    bool inference = self && self->defined() && self->impl()->inference;
    if (out)
      for (const Tensor& o : *out) inference |= o.defined() && o.impl()->inference;
    KILN_CHECK(
        !inference, Runtime, op.name,
        "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a "
        "clone to get a normal tensor before doing inplace update.See "
        "https://github.com/pytorch/rfcs/pull/17 for more details.");
  }
  const size_t n = inputs.size();
  std::vector<bool> needs(n);
  bool any = false;
  if (t_grad_enabled)
    for (size_t i = 0; i < n; ++i) any |= (needs[i] = requires_grad(inputs[i]));
  bool out_rg = false;
  if (out && t_grad_enabled)
    for (const Tensor& o : *out) out_rg |= requires_grad(o);
  if (!any && !out_rg) return plain(op, inputs, attrs, out, inplace);
  if (out && !inplace) {
    KILN_CHECK(
        false, Runtime, op.name, op.name,
        "(): functions with out=... arguments don't support automatic differentiation, but one "
        "of the arguments requires grad.");
  }
  // the tensor written in place: a leaf that requires grad may not be; a view of one neither
  Tensor base;  // set when self is a differentiable view whose base's history must be rebased
  int self_index = -1;
  if (self) {
    const AutogradMeta* m = fresh_meta(*self);
    KILN_CHECK(!(m && m->requires_grad && !m->grad_fn), Runtime, op.name,
               "a leaf Variable that requires grad is being used in an in-place operation.");
    base = tracked_base(m);
    KILN_CHECK(
        !(base.defined() && is_leaf(base)), Runtime, op.name,
        "a view of a leaf Variable that requires grad is being used in an in-place operation.");
    for (size_t i = 0; i < n && self_index < 0; ++i)
      if (inputs[i].is_same(*self)) self_index = static_cast<int>(i);
  }

  // inputs the derivative needs; an input the op overwrites is saved as a copy of its old value
  std::vector<SavedTensor> saved_in;
  if (any && op.derivative && op.save_in) {
    saved_in.resize(n);
    for (size_t i = 0; i < n; ++i) {
      if (!(op.save_in >> i & 1)) continue;
      const Tensor& t = inputs[i];
      bool overwritten = self && t.defined() && t.storage() == self->storage();
      saved_in[i] = SavedTensor(overwritten ? clone(t) : t, false);
    }
  }

  TensorList result;
  {
    AutoGradMode below(false);
    result = dispatch_kernel(op, inputs, attrs, out, inplace);
  }
  bool differentiable_out = false;
  for (const Tensor& r : result) differentiable_out |= r.defined() && is_differentiable(r.dtype());
  if (!differentiable_out || (op.tags & kNonDifferentiable)) return result;

  std::shared_ptr<Node> node;
  if (!any) {
    // an in-place op on a tensor with history, from inputs without: the old history is cut
    auto nn = std::make_shared<OpNode>();
    nn->op = &op;
    nn->needs = needs;
    node = nn;
  } else if (op.derivative) {
    auto nn = std::make_shared<OpNode>();
    nn->op = &op;
    nn->attrs = attrs;
    nn->needs = needs;
    nn->saved_in = std::move(saved_in);
    node = nn;
  } else {
    auto nn = std::make_shared<NotImplementedNode>();
    nn->op_name = op.name;
    node = nn;
  }
  node->next_edges.resize(n);
  node->in_specs.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (!inputs[i].defined()) continue;
    node->in_specs[i] = TensorSpec::of(inputs[i]);
    if (needs[i]) node->next_edges[i] = gradient_edge(inputs[i]);
  }
  if (anomaly_mode_enabled()) node->trace = anomaly_trace(op.name);
  node->out_specs.reserve(result.size());
  for (const Tensor& r : result)
    node->out_specs.push_back(r.defined() ? TensorSpec::of(r)
                                          : TensorSpec{{}, kFloat32});
  // outputs the derivative needs, saved once they carry this node's history (double backward)
  auto save_outputs = [&] {
    if (auto* nn = dynamic_cast<OpNode*>(node.get()); nn && any && op.save_out) {
      nn->saved_out.resize(result.size());
      for (size_t i = 0; i < result.size(); ++i)
        if (op.save_out >> i & 1) nn->saved_out[i] = SavedTensor(result[i], true);
    }
  };
  if (base.defined()) {  // self is a view that requires grad: saved as output 0 of the node
    save_outputs();
    rebase_view(*self, node, self_index);
    return result;
  }
  const bool view_op = (op.tags & kView) && !writes_self && n > 0 && needs[0];
  for (size_t i = 0; i < result.size(); ++i) {
    const Tensor& r = result[i];
    if (!r.defined() || !is_differentiable(r.dtype())) continue;
    set_history(r, node, static_cast<uint32_t>(i));
    if (view_op) track_view(inputs[0], op, attrs, r);
  }
  save_outputs();
  return result;
}

}  // namespace

void install_autograd_layer() { set_autograd_layer(autograd_layer, needs_grad); }

namespace {
struct Installer {
  Installer() { install_autograd_layer(); }
} installer;
}  // namespace

}  // namespace kiln
