// FlexAttention's traced score_mod / mask_mod programs (flex_program.h): the trace mode, the registry,
// the forward run on tiles and the reverse pass.
#include "kiln/attention/flex_program.h"

#include <cstdio>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "kiln/autograd/autograd.h"
#include "kiln/dispatch/schema.h"
#include "kiln/ops/ops.h"

namespace kiln::flex {
namespace {

constexpr const char* kOp = "flex_attention";

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<const Program>> programs;
  std::unordered_map<std::string, int64_t> by_text;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: kernels may read it during exit
  return *r;
}

int64_t register_program(std::shared_ptr<Program> p) {
  std::ostringstream os;
  os << (p->is_score_mod() ? "score_mod" : "mask_mod") << " buffers=" << p->n_buffers << "\n";
  for (size_t i = 0; i < p->constants.size(); ++i) {
    const Tensor& c = p->constants[i];
    os << "  %" << p->n_args + p->n_buffers + i << " = " << dtype_name(c.dtype()) << " " << c.item() << "\n";
  }
  for (const Program::Node& n : p->nodes) {
    os << "  ";
    for (size_t i = 0; i < n.out.size(); ++i) os << (i ? ", %" : "%") << n.out[i];
    os << " = " << n.op->name << "(";
    bool first = true;
    for (int s : n.in) os << (first ? "" : ", ") << (s < 0 ? std::string("None") : "%" + std::to_string(s)), first = false;
    for (const Attr& a : n.attrs) os << (first ? "" : ", ") << attr_str(a), first = false;
    os << ")\n";
  }
  os << "  return %" << p->result << "\n";
  p->text = os.str();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_text.find(p->text);
  if (it != r.by_text.end()) return it->second;
  const int64_t id = static_cast<int64_t>(r.programs.size());
  r.by_text.emplace(p->text, id);
  r.programs.push_back(std::move(p));
  return id;
}

}  // namespace

bool Program::reads(int slot) const {
  if (result == slot) return true;
  for (const Node& n : nodes)
    for (int s : n.in)
      if (s == slot) return true;
  return false;
}

std::vector<bool> Program::active(const std::vector<bool>& buffer_needs) const {
  std::vector<bool> a(n_slots, false);
  if (is_score_mod()) a[0] = true;
  for (int i = 0; i < n_buffers && i < static_cast<int>(buffer_needs.size()); ++i) a[n_args + i] = buffer_needs[i];
  for (const Node& n : nodes) {
    bool any = false;
    for (int s : n.in) any |= s >= 0 && a[s];
    if (any)
      for (int s : n.out) a[s] = true;
  }
  return a;
}

// ---- tracing ----------------------------------------------------------------------------------

struct Tracer::State : DispatchMode {
  std::shared_ptr<Program> prog = std::make_shared<Program>();
  TensorList args;
  std::unordered_map<const TensorImpl*, int> slot_of;  // traced values
  std::vector<Tensor> keep;                           // keeps traced impls alive (their addresses)
  std::vector<Tensor> buffers, constants;
  std::vector<std::pair<const TensorImpl*, int>> captured;  // captured tensor -> buffer / constant index
  std::vector<Program::Node> nodes;
  int next_node_slot = 0;  // node outputs counted from 0, offset once the capture count is known

  TensorList handle(const OpDef& op, const TensorList& inputs, const Attrs& attrs, TensorList* out,
                    bool inplace) override {
    KILN_CHECK(!out && !inplace, Runtime, kOp, "score_mod / mask_mod may not use in-place ops or out= (",
               op.name, "): write them with out-of-place ops");
    Program::Node n;
    n.op = &op;
    n.attrs = attrs;
    for (Attr& a : n.attrs)  // a creation op on the traced values' device runs on the CPU's
      if (auto* d = std::get_if<Device>(&a); d && d->is_meta()) a = Device(kCPU);
    TensorList metas;
    for (const Tensor& t : inputs) {
      if (!t.defined()) {
        n.in.push_back(-1);
        metas.push_back(t);
        continue;
      }
      auto it = slot_of.find(t.impl());
      if (it != slot_of.end()) {
        n.in.push_back(it->second);
        metas.push_back(t);
        continue;
      }
      KILN_CHECK(!t.is_meta(), Runtime, kOp, "score_mod / mask_mod read a meta tensor it did not make (", op.name,
                 ")");
      n.in.push_back(capture(t));
      metas.push_back(meta_twin(t));
    }
    // torch runs a modifier per element (vmap): a reduction or a view of a traced value would see the
    // whole tile here, so only elementwise ops and indexing may touch one
    bool traced = false;
    for (int sl : n.in) traced |= sl >= 0 && (sl < kBufBase || sl >= kNodeBase);
    KILN_CHECK(!traced || !(op.tags & (kReduction | kView)), NotImplemented, kOp,
               "score_mod / mask_mod use ", op.name, " on a score or an index, which is a ",
               (op.tags & kReduction) ? "reduction" : "view",
               "; they are applied per element: use elementwise ops, where and indexing of captured tensors");
    TensorList res = dispatch_kernel(op, metas, n.attrs, nullptr, false);
    for (const Tensor& r : res) {
      if (!r.defined()) {
        n.out.push_back(-1);
        continue;
      }
      const int s = kNodeBase + next_node_slot++;
      n.out.push_back(s);
      slot_of[r.impl()] = s;
      keep.push_back(r);
    }
    nodes.push_back(std::move(n));
    return res;
  }

  // Captured tensors get provisional slots (kBufBase + i for buffers, kConstBase + i for constants),
  // renumbered in finish().
  static constexpr int kBufBase = 1 << 20, kConstBase = 1 << 24, kNodeBase = 1 << 28;
  int capture(const Tensor& t) {
    for (auto& [impl, s] : captured)
      if (impl == t.impl()) return s;
    int s;
    if (t.is_wrapped_number()) {
      s = kConstBase + static_cast<int>(constants.size());
      constants.push_back(t);
    } else {
      s = kBufBase + static_cast<int>(buffers.size());
      buffers.push_back(t);
    }
    captured.emplace_back(t.impl(), s);
    return s;
  }
};

Tracer::Tracer(int n_args, Dtype score_dtype) : st_(std::make_shared<State>()) {
  st_->prog->n_args = n_args;
  auto arg = [&](Dtype d) {
    Tensor t = make_tensor(Shape{}, d, kMeta);
    st_->slot_of[t.impl()] = static_cast<int>(st_->args.size());
    st_->keep.push_back(t);
    st_->args.push_back(t);
  };
  if (n_args == 5) arg(score_dtype);
  for (int i = 0; i < 4; ++i) arg(kInt64);
  push_mode(st_);
}

Tracer::~Tracer() {
  if (st_) pop_mode();
}

const TensorList& Tracer::args() const { return st_->args; }

Traced Tracer::finish(const Tensor& result) {
  pop_mode();
  std::shared_ptr<State> st = std::move(st_);
  Program& p = *st->prog;
  const char* what = p.is_score_mod() ? "score_mod" : "mask_mod";
  KILN_CHECK(result.defined(), Type, kOp, what, " must return a tensor");
  int res;
  auto it = st->slot_of.find(result.impl());
  if (it != st->slot_of.end()) {
    res = it->second;
  } else {  // a captured tensor (or a number) returned as it is
    KILN_CHECK(!result.is_meta(), Runtime, kOp, what, " returned a tensor it did not make");
    res = st->capture(result);
  }
  if (!p.is_score_mod())
    KILN_CHECK(result.dtype() == kBool, Type, kOp, "mask_mod must return a bool tensor, got ",
               dtype_name(result.dtype()));
  const int nb = static_cast<int>(st->buffers.size()), nc = static_cast<int>(st->constants.size());
  p.n_buffers = nb;
  p.constants = st->constants;
  auto renumber = [&](int s) {
    if (s < State::kBufBase) return s;
    if (s >= State::kNodeBase) return p.n_args + nb + nc + (s - State::kNodeBase);
    if (s >= State::kConstBase) return p.n_args + nb + (s - State::kConstBase);
    return p.n_args + (s - State::kBufBase);
  };
  for (Program::Node& n : st->nodes) {
    for (int& s : n.in) s = renumber(s);
    for (int& s : n.out) s = renumber(s);
  }
  p.nodes = std::move(st->nodes);
  p.n_slots = p.n_args + nb + nc + st->next_node_slot;
  p.result = renumber(res);
  Traced tr;
  tr.buffers = st->buffers;
  tr.id = register_program(std::move(st->prog));
  return tr;
}

Traced trace_score_mod(const ScoreModFn& f, Dtype score_dtype) {
  Tracer t(5, score_dtype);
  const TensorList& a = t.args();
  Tensor r = f(a[0], a[1], a[2], a[3], a[4]);
  return t.finish(r);
}

Traced trace_mask_mod(const MaskModFn& f) {
  Tracer t(4, kFloat32);
  const TensorList& a = t.args();
  Tensor r = f(a[0], a[1], a[2], a[3]);
  return t.finish(r);
}

std::shared_ptr<const Program> program(int64_t id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  KILN_CHECK(id >= 0 && id < static_cast<int64_t>(r.programs.size()), Index, kOp, "no traced modifier with id ", id);
  return r.programs[id];
}

// ---- running ------------------------------------------------------------------------------------

void run(const Program& p, std::vector<Tensor>& slots) {
  const int c0 = p.n_args + p.n_buffers;
  for (size_t i = 0; i < p.constants.size(); ++i) slots[c0 + i] = p.constants[i];
  TensorList in;
  for (const Program::Node& n : p.nodes) {
    in.clear();
    for (int s : n.in) in.push_back(s < 0 ? Tensor() : slots[s]);
    TensorList r = dispatch_kernel(*n.op, in, n.attrs, nullptr, false);
    for (size_t i = 0; i < n.out.size() && i < r.size(); ++i)
      if (n.out[i] >= 0) slots[n.out[i]] = std::move(r[i]);
  }
}

void backprop(const Program& p, const std::vector<Tensor>& slots, const std::vector<bool>& active,
              const Tensor& grad_result, Tensor& grad_score, std::vector<Tensor>& grad_buffers) {
  NoGradGuard no_grad;
  std::vector<Tensor> g(p.n_slots);
  g[p.result] = grad_result;
  auto accumulate = [&](int s, Tensor x) {
    const Tensor& v = slots[s];
    if (!kiln::is_differentiable(v.dtype())) return;
    if (x.sizes() != v.sizes()) x = kiln::sum_to(x, v.sizes());
    if (x.dtype() != v.dtype()) x = x.to(v.dtype());
    g[s] = g[s].defined() ? add(g[s], x) : x;
  };
  for (auto n = p.nodes.rbegin(); n != p.nodes.rend(); ++n) {
    bool flows = false, needed = false;
    for (int s : n->out) flows |= s >= 0 && g[s].defined();
    for (int s : n->in) needed |= s >= 0 && active[s];
    if (!flows || !needed) continue;
    KILN_CHECK(n->op->derivative, NotImplemented, kOp, "the score_mod uses ", n->op->name,
               ", which has no derivative");
    TensorList in, out, grad_out;
    for (int s : n->in) in.push_back(s < 0 ? Tensor() : slots[s]);
    for (int s : n->out) {
      out.push_back(s < 0 ? Tensor() : slots[s]);
      if (s < 0) {
        grad_out.push_back(Tensor());
      } else if (g[s].defined()) {
        grad_out.push_back(g[s]);
      } else {
        grad_out.push_back(zeros_like(slots[s]));
      }
    }
    std::vector<bool> needs;
    for (int s : n->in) needs.push_back(s >= 0 && active[s]);
    SpecList specs = specs_of(in);
    GradCtx ctx{*n->op, n->attrs, in, out, specs, needs};
    TensorList gi = n->op->derivative(ctx, grad_out);
    for (size_t i = 0; i < n->in.size() && i < gi.size(); ++i)
      if (needs[i] && gi[i].defined()) accumulate(n->in[i], gi[i]);
  }
  grad_score = p.is_score_mod() ? g[0] : Tensor();
  grad_buffers.assign(p.n_buffers, Tensor());
  for (int i = 0; i < p.n_buffers; ++i)
    if (active[p.n_args + i]) grad_buffers[i] = g[p.n_args + i];
}

}  // namespace kiln::flex
