// Differentiable views and in-place ops on them (torch's view tracking and CopySlices).
//
// A kView op run by the autograd layer on a tensor that requires grad records, in the output's
// AutogradMeta, the root base (the first tensor of the chain that is not such a view) and the view
// ops from it. An in-place op on the view then changes the base's values too, so the base's history
// is rebased: its new grad_fn is a CopySlices node whose backward takes the base's gradient, runs
// the in-place op's derivative on the view's region and writes the result back into that region.
// The view's own grad_fn is rebuilt by replaying the view ops on the base; so is that of any other
// view of the same base once the storage version shows it was changed through an alias.
#include "kiln/autograd/autograd.h"
#include "kiln/autograd/nodes.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"

namespace kiln {

void track_view(const Tensor& in, const OpDef& op, const Attrs& attrs, const Tensor& out) {
  const AutogradMeta* im = meta_of(in);
  auto chain = std::make_shared<std::vector<ViewStep>>();
  std::shared_ptr<TensorImpl> base = in.impl_ptr();
  if (im && im->view_base) {
    base = im->view_base;
    *chain = *im->view_chain;
  }
  chain->push_back({&op, attrs});
  AutogradMeta& m = ensure_meta(out);
  m.view_base = std::move(base);
  m.view_chain = std::move(chain);
  m.view_version = out.version();
}

Tensor tracked_base(const AutogradMeta* m) {
  if (!m || !m->view_base) return Tensor();
  Tensor base(m->view_base);
  return requires_grad(base) ? base : Tensor();
}

Tensor replay_view(const Tensor& base, const std::vector<ViewStep>& chain) {
  Tensor v = base;
  for (const ViewStep& s : chain) v = std::move(dispatch(*s.op, {v}, s.attrs)[0]);
  return v;
}

namespace {

// Rebuilds a view's grad_fn from its base's current history.
void regenerate(const Tensor& view, AutogradMeta& m) {
  Tensor base = tracked_base(&m);
  if (!base.defined()) {  // the base stopped requiring grad: the view keeps its history
    m.view_version = view.version();
    return;
  }
  if (inference_mode_enabled()) return;  // nothing is recorded there; rebuilt once outside
  Tensor r;
  {
    AutoGradMode on(true);  // the history does not depend on the caller's grad mode
    r = replay_view(base, *m.view_chain);
  }
  const AutogradMeta* rm = meta_of(r);
  if (rm && rm->grad_fn) set_history(view, rm->grad_fn, rm->output_nr);
  m.view_version = view.version();
}

}  // namespace

AutogradMeta* fresh_meta(const Tensor& t) {
  AutogradMeta* m = meta_of(t);
  if (m && m->view_base && t.version() != m->view_version) [[unlikely]]
    regenerate(t, *m);
  return m;
}

void rebase_view(const Tensor& self, const std::shared_ptr<Node>& fn, int self_index) {
  AutogradMeta& m = *meta_of(self);
  Tensor base(m.view_base);
  auto cs = std::make_shared<CopySlices>();
  cs->chain = m.view_chain;
  cs->fn = fn;
  cs->self_index = self_index;
  cs->next_edges = fn->next_edges;
  cs->in_specs = fn->in_specs;
  cs->base_slot = self_index >= 0 ? static_cast<size_t>(self_index) : cs->next_edges.size();
  if (cs->base_slot == cs->next_edges.size()) {
    cs->next_edges.emplace_back();
    cs->in_specs.emplace_back();
  }
  cs->next_edges[cs->base_slot] = gradient_edge(base);
  cs->in_specs[cs->base_slot] = TensorSpec::of(base);
  cs->out_specs = {TensorSpec::of(base)};
  cs->trace = fn->trace;
  if (self_index >= 0) fn->next_edges[self_index] = Edge();  // the view's old history is the base's
  set_history(base, cs, 0);
  // the view itself: a view of the base's new history
  m.view_version = self.version();
  Tensor r = replay_view(base, *m.view_chain);
  const AutogradMeta* rm = meta_of(r);
  set_history(self, rm->grad_fn, rm->output_nr);
}

TensorList CopySlices::apply(TensorList&& grad_outputs) {
  const TensorSpec& bs = in_specs[base_slot];
  Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[0];
  Tensor result = g.defined() ? clone(g) : zeros(bs.raw_sizes(), TensorOptions(bs.dtype()).device(bs.device()));
  Tensor region = replay_view(result, *chain);
  TensorList fg(std::max<size_t>(fn->out_specs.size(), 1));
  fg[0] = clone(region);
  for (size_t i = 1; i < fg.size(); ++i)
    if (is_differentiable(fn->out_specs[i].dtype()))
      fg[i] = zeros(fn->out_specs[i].raw_sizes(), TensorOptions(fn->out_specs[i].dtype()).device(fn->out_specs[i].device()));
  TensorList r = fn->apply(std::move(fg));
  r.resize(fn->next_edges.size());
  Tensor gs = self_index >= 0 ? validate_grad(*fn, self_index, r[self_index]) : Tensor();
  if (!grad_mode_enabled()) {
    if (gs.defined())
      copy_(region, gs);
    else
      copy_(region, zeros({}, region.dtype()));
  } else {
    // create_graph: the same write, out of place (index_put on the flat base) so that it is
    // recorded even when `result` itself does not require grad
    // (sizes stay symbolic in a trace)
    const SymInt n = bs.numel();
    Tensor pos = replay_view(reshape_symint(arange_symint(n, TensorOptions(kInt64).device(bs.device())), bs.sizes()), *chain);
    const SymShape ps = pos.sym_sizes();
    const SymInt pn = pos.sym_numel();
    Tensor vals = gs.defined() ? expand_symint(gs, ps) : zeros_symint(ps, TensorOptions(bs.dtype()).device(bs.device()));
    Tensor flat = index_put(reshape_symint(result, {n}), {reshape_symint(pos, {pn})}, reshape_symint(vals, {pn}), false);
    result = reshape_symint(flat, bs.sizes());
  }
  TensorList out(next_edges.size());
  for (size_t i = 0; i < r.size(); ++i)
    if (static_cast<int>(i) != self_index) out[i] = std::move(r[i]);
  out[base_slot] = std::move(result);
  return out;
}

}  // namespace kiln
