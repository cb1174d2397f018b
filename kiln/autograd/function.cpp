// Recording a custom Function call (C++ Function<T> and Python autograd.Function share this).
#include "kiln/autograd/function.h"

#include <cxxabi.h>

#include <cstdlib>

namespace kiln::autograd {

std::string demangled_type_name(const std::type_info& t) {
  int status = 0;
  char* s = abi::__cxa_demangle(t.name(), nullptr, nullptr, &status);
  std::string r = status == 0 && s ? s : t.name();
  std::free(s);
  // the unqualified name, as torch names a Python Function's node after its class
  size_t colon = r.rfind("::");
  return colon == std::string::npos ? r : r.substr(colon + 2);
}

TensorList AutogradContext::get_saved_variables() const {
  if (auto node = node_.lock()) return node->unpack_saved();
  return to_save_;
}

bool function_needs_record(const TensorList& inputs) {
  if (!grad_mode_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && requires_grad(t)) return true;
  return false;
}

namespace {
bool contains(const TensorList& ts, const Tensor& t) {
  for (const Tensor& x : ts)
    if (x.defined() && x.is_same(t)) return true;
  return false;
}
}  // namespace

TensorList record_function(FunctionRecord&& rec, std::shared_ptr<CustomNode>* node_out) {
  if (!function_needs_record(rec.inputs)) return std::move(rec.outputs);
  const std::string& name = rec.name;
  auto node = std::make_shared<CustomNode>();
  node->fn_name = name;
  node->materialize_grads = rec.materialize_grads;
  node->backward_fn = std::move(rec.backward);
  node->on_release = std::move(rec.on_release);
  const size_t n = rec.inputs.size();
  node->next_edges.resize(n);
  node->in_specs.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Tensor& in = rec.inputs[i];
    if (!in.defined()) continue;
    node->in_specs[i] = TensorSpec::of(in);
    if (requires_grad(in)) node->next_edges[i] = gradient_edge(in);
  }
  for (const Tensor& d : rec.dirty) {
    KILN_CHECK(d.defined() && contains(rec.inputs, d), Runtime, name.c_str(),
               "mark_dirty only accepts input tensors, but argument 0 isn't one");
    const AutogradMeta* m = fresh_meta(d);
    KILN_CHECK(!(m && m->requires_grad && !m->grad_fn), Runtime, name.c_str(),
               "a leaf Variable that requires grad has been used in an in-place operation.");
    KILN_CHECK(!tracked_base(m).defined(), NotImplemented, name.c_str(),
               "mark_dirty on a view of a tensor that requires grad is not supported");
  }
  if (anomaly_mode_enabled()) node->trace = anomaly_trace(name);

  TensorList outs;
  outs.reserve(rec.outputs.size());
  for (const Tensor& o : rec.outputs) {
    const uint32_t nr = static_cast<uint32_t>(outs.size());
    if (!o.defined()) {
      node->out_specs.push_back({{}, kFloat32});
      outs.emplace_back();
      continue;
    }
    Tensor t = o;
    if (!contains(rec.dirty, o) && (contains(rec.inputs, o) || !is_leaf(o)))
      t = detach(o);  // a returned input (or a tensor with history) becomes a fresh alias
    node->out_specs.push_back(TensorSpec::of(t));
    if (!contains(rec.non_differentiable, o) && is_differentiable(t.dtype()))
      set_history(t, node, nr);
    outs.push_back(t);
  }
  for (const Tensor& s : rec.to_save) {
    size_t k = 0;
    while (k < rec.outputs.size() &&
           !(s.defined() && rec.outputs[k].defined() && rec.outputs[k].is_same(s)))
      ++k;
    // an output is saved without its link to this node (no reference cycle) and re-linked on unpack
    node->saved.emplace_back(k < outs.size() ? outs[k] : s, k < outs.size());
  }
  if (node_out) *node_out = node;
  return outs;
}

}  // namespace kiln::autograd
