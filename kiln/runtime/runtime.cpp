// The standalone runtime (runtime.h): input checks, the memory plan, the run.
#include "kiln/runtime/runtime.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "kiln/autograd/autograd.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/core/live_span.h"

namespace kiln::runtime {

namespace {
constexpr const char* kOp = "runtime";
using EP = ExportedProgram;

// A plan: attributes with the symbols' values in, and where each planned value lives in the arena.
struct Plan {
  std::vector<Attrs> attrs;       // per node
  std::vector<int64_t> offset;    // per value: byte offset in the arena, -1: not planned
  std::vector<Shape> sizes;       // per value: concrete sizes (planned values)
  std::vector<int> last_use;      // per value: the last node that reads it (-1: none; INT_MAX: escapes)
  std::shared_ptr<Storage> arena;
  int64_t arena_bytes = 0, planned_bytes = 0, planned_values = 0;
  bool dry = false;  // planned from a meta run (false: the graph has data-dependent sizes)
  // whether runs take the pool as one team (parallel.h's run_as_team): learnt on the first run on
  // several threads (again when the thread count changes), which runs without; a team when that run
  // opened two parallel regions or more (one costs what the team does) and made no OpenBLAS call
  // that a team would leave on one thread
  mutable std::atomic<int> team{-1};
  mutable std::atomic<int> team_threads{0};
};
}  // namespace

struct Program::Impl {
  std::shared_ptr<const EP> ep;
  std::map<std::string, SymInt> symbol_by_name;
  std::unordered_map<int64_t, int> symbol_index;  // a plain symbol's raw SymInt -> its index
  std::vector<export_detail::ParsedGuard> guards;
  std::vector<int> user;  // value ids of the user inputs, in order
  bool has_unbacked = false;
  mutable std::mutex mu;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<Plan>> plans;
  mutable int64_t n_plans = 0;
  mutable std::shared_ptr<Plan> last;

  bool is_sym(int64_t raw) const {
    const SymInt s = SymInt::from_raw(raw);
    return s.is_symbolic() && ((static_cast<uint64_t>(raw) >> 32) & 0xffff) == (ep->env->generation() & 0xffff);
  }
  int64_t eval(int64_t raw, const std::vector<int64_t>& values) const {
    return is_sym(raw) ? ep->env->evaluate(SymInt::from_raw(raw), values) : raw;
  }
  Attrs eval_attrs(const Attrs& a, const std::vector<int64_t>& values) const {
    Attrs r = a;
    for (Attr& x : r) {
      if (auto* i = std::get_if<int64_t>(&x)) *i = eval(*i, values);
      else if (auto* s = std::get_if<Shape>(&x))
        for (int64_t& v : *s) v = eval(v, values);
      else if (auto* c = std::get_if<Scalar>(&x); c && c->tag() == Scalar::Tag::Int && is_sym(c->to_int()))
        *c = Scalar(eval(c->to_int(), values));
    }
    return r;
  }

  // The symbols' values from the user inputs, checked against dtypes, static sizes, ranges and guards.
  std::vector<int64_t> bind(const TensorList& inputs) const {
    KILN_CHECK(inputs.size() == user.size(), Type, kOp, "the program takes ", user.size(), " inputs, got ",
               inputs.size());
    std::vector<int64_t> values(ep->symbols.size(), -1);
    std::vector<std::string> bound_by(ep->symbols.size());
    for (size_t i = 0; i < user.size(); ++i) {
      const EP::Value& v = ep->values[user[i]];
      const Tensor& t = inputs[i];
      const std::string at = "input " + std::to_string(i) + " (" + v.name + ")";
      KILN_CHECK(t.defined(), Runtime, kOp, at, " is None");
      KILN_CHECK(t.device().type == DeviceType::CPU, Runtime, kOp, at, " is on ", device_str(t.device()),
                 ": the program runs on the CPU");
      KILN_CHECK(t.dtype() == v.dtype, Runtime, kOp, "Expected ", at, " to have dtype ", dtype_name(v.dtype),
                 ", but got ", dtype_name(t.dtype()));
      KILN_CHECK(t.dim() == static_cast<int64_t>(v.sizes.size()), Runtime, kOp, "Expected ", at, " to have ",
                 v.sizes.size(), " dimensions, but got ", t.dim());
      for (size_t d = 0; d < v.sizes.size(); ++d) {
        const int64_t n = t.sizes()[d], raw = v.sizes[d].raw();
        if (!is_sym(raw)) {
          KILN_CHECK(n == raw, Runtime, kOp, "Expected ", at, ".shape[", d, "] to be equal to ", raw, ", but got ", n,
                     " (the dimension is static in the exported program)");
          continue;
        }
        auto it = symbol_index.find(raw);
        if (it == symbol_index.end()) continue;  // an expression: checked below, once every symbol is bound
        const int k = it->second;
        const EP::Symbol& s = ep->symbols[k];
        KILN_CHECK(values[k] < 0 || values[k] == n, Runtime, kOp, "Expected ", at, ".shape[", d, "] to be equal to ",
                   values[k], " (", s.name, ", from ", bound_by[k], "), but got ", n);
        KILN_CHECK(n >= s.min && n <= s.max, Runtime, kOp, "Expected ", at, ".shape[", d, "] (", s.name, ") to be in [",
                   s.min, ", ", s.max == INT64_MAX ? std::string("inf") : std::to_string(s.max), "], but got ", n);
        values[k] = n;
        bound_by[k] = at + ".shape[" + std::to_string(d) + "]";
      }
    }
    for (size_t k = 0; k < values.size(); ++k)
      KILN_CHECK(values[k] >= 0 || ep->symbols[k].unbacked, Runtime, kOp, "no input gives the size ",
                 ep->symbols[k].name);
    for (size_t i = 0; i < user.size(); ++i) {  // sizes that are expressions of the symbols
      const EP::Value& v = ep->values[user[i]];
      for (size_t d = 0; d < v.sizes.size(); ++d)
        if (is_sym(v.sizes[d].raw()) && !symbol_index.count(v.sizes[d].raw())) {
          const int64_t want = ep->env->evaluate(v.sizes[d], values);
          KILN_CHECK(inputs[i].sizes()[d] == want, Runtime, kOp, "Expected input ", i, ".shape[", d, "] to be ", want,
                     ", but got ", inputs[i].sizes()[d]);
        }
    }
    for (size_t g = 0; g < guards.size(); ++g)
      KILN_CHECK(export_detail::holds(guards[g], *ep->env, values), Runtime, kOp, "Guard failed: ", ep->guards[g].text,
                 ep->guards[g].where.empty() ? "" : " (the traced program assumed it at " + ep->guards[g].where + ")");
    return values;
  }

  std::shared_ptr<Plan> make_plan(const std::vector<int64_t>& values) const;
  TensorList execute(const TensorList& inputs, const std::vector<int64_t>& values, const Plan& plan) const;
};

std::shared_ptr<Plan> Program::Impl::make_plan(const std::vector<int64_t>& values) const {
  const EP& p = *ep;
  auto plan = std::make_shared<Plan>();
  const int nv = static_cast<int>(p.values.size()), nn = static_cast<int>(p.nodes.size());
  plan->attrs.reserve(nn);
  for (const EP::Node& n : p.nodes) plan->attrs.push_back(has_unbacked ? n.attrs : eval_attrs(n.attrs, values));
  plan->offset.assign(nv, -1);
  plan->sizes.resize(nv);
  plan->last_use.assign(nv, -1);
  if (has_unbacked) return plan;  // sizes known only while running: kernels allocate
  // a shape-only run: every value's sizes, and which storage (root) each lives in
  std::vector<Tensor> meta(nv);
  for (const EP::Input& in : p.inputs) {
    const EP::Value& v = p.values[in.value];
    Shape s;
    for (SymInt x : v.sizes) s.push_back(eval(x.raw(), values));
    meta[in.value] = make_tensor(s, v.dtype, kMeta);
    meta[in.value].impl()->wrapped_number = v.wrapped;
  }
  std::vector<int> def(nv, -1);  // the node that made the value's storage (-1: an input's)
  std::vector<bool> plannable(nv, false);
  std::unordered_map<const Storage*, std::vector<int>> members;  // a root's values
  for (int i = 0; i < nn; ++i) {
    const EP::Node& n = p.nodes[i];
    TensorList ins;
    for (int v : n.in) ins.push_back(v >= 0 ? meta[v] : Tensor());
    TensorList outs;
    if (n.out_given)
      for (int v : n.out) outs.push_back(meta[v]);
    Attrs a = plan->attrs[i];  // ops that make CPU tensors make meta ones in the shape-only run
    for (Attr& x : a)
      if (auto* d = std::get_if<Device>(&x); d && d->type == DeviceType::CPU) x = Device(kMeta);
    TensorList r = dispatch_kernel(*n.op, ins, a, n.out_given ? &outs : nullptr, n.inplace);
    if (n.out_given) continue;
    const bool fresh = n.op->meta && !(n.op->tags & (kView | kDynamicShape));
    for (size_t k = 0; k < n.out.size() && k < r.size(); ++k) {
      const int v = n.out[k];
      if (v < 0) continue;
      meta[v] = r[k];
      plan->sizes[v] = r[k].sizes();
      if (fresh) def[v] = i, plannable[v] = true;
    }
  }
  for (int v = 0; v < nv; ++v)
    if (meta[v].defined()) members[meta[v].storage().get()].push_back(v);
  // lifetimes: a root lives from the node that made it to the last node that touches any of its views
  for (int i = 0; i < nn; ++i) {
    const EP::Node& n = p.nodes[i];
    for (int v : n.in)
      if (v >= 0) plan->last_use[v] = i;
    for (int v : n.out)
      if (v >= 0) plan->last_use[v] = std::max(plan->last_use[v], i);
  }
  for (int v : p.outputs)
    if (v >= 0) plan->last_use[v] = INT32_MAX;
  std::vector<LiveSpan> bufs;  // id: the value whose storage it is
  for (auto& [storage, vs] : members) {
    int root = -1, end = -1;
    for (int v : vs) {
      if (plannable[v] && meta[v].storage_offset() == 0 && (root < 0 || def[v] < def[root])) root = v;
      end = std::max(end, plan->last_use[v]);
    }
    // the storage must be a fresh node output's (not an input's), and must not escape
    if (root < 0 || end == INT32_MAX) continue;
    for (int v : vs) plan->last_use[v] = std::max(plan->last_use[v], end);
    const int64_t bytes = (static_cast<int64_t>(storage->nbytes()) + 63) / 64 * 64;
    if (bytes == 0) continue;
    bufs.push_back({bytes, def[root], std::max(end, def[root]), static_cast<size_t>(root)});
  }
  // greedy by size: each buffer at the lowest offset clear of every placed buffer it overlaps in time
  plan->arena_bytes = place_live_spans(bufs);
  for (const LiveSpan& b : bufs) {
    plan->offset[b.id] = b.offset;
    plan->planned_bytes += b.bytes;
    ++plan->planned_values;
  }
  if (plan->arena_bytes > 0) plan->arena = std::make_shared<Storage>(static_cast<size_t>(plan->arena_bytes), kCPU);
  plan->dry = true;
  return plan;
}

TensorList Program::Impl::execute(const TensorList& inputs, const std::vector<int64_t>& values_in, const Plan& plan) const {
  const EP& p = *ep;
  std::vector<int64_t> values = values_in;
  std::vector<Tensor> slot(p.values.size());
  size_t u = 0;
  for (const EP::Input& in : p.inputs)
    slot[in.value] = in.kind == EP::InputKind::User ? inputs[u++] : p.state_tensor(in.target);
  NoGradGuard no_grad;
  // the whole program in one team (parallel.h): one wake-up of the pool per run, not one per op;
  // float32 products on kiln's GEMM in every run, so that runs with and without the team agree
  const int threads = get_num_threads();
  const bool learn = threads > 1 && !cpu::in_parallel_region() &&
                     (plan.team.load(std::memory_order_relaxed) < 0 || plan.team_threads.load(std::memory_order_relaxed) != threads);
  const int64_t regions = cpu::regions_opened(), serialised = cpu::blas_serialised_in_team();
  std::optional<cpu::KilnSgemmScope> kiln_sgemm;
  if (threads > 1) kiln_sgemm.emplace();
  cpu::run_as_team(!learn && plan.team.load(std::memory_order_relaxed) == 1 ? threads : 1, [&] {
    for (size_t i = 0; i < p.nodes.size(); ++i) {
      const EP::Node& n = p.nodes[i];
      TensorList ins;
      for (int v : n.in) ins.push_back(v >= 0 ? slot[v] : Tensor());
      const Attrs attrs = plan.dry ? Attrs() : eval_attrs(n.attrs, values);
      const Attrs& a = plan.dry ? plan.attrs[i] : attrs;
      if (n.out_given) {
        TensorList outs;
        for (int v : n.out) outs.push_back(slot[v]);
        dispatch_kernel(*n.op, ins, a, &outs, n.inplace);
        continue;
      }
      bool planned = plan.dry && !n.out.empty();
      for (int v : n.out) planned = planned && v >= 0 && plan.offset[v] >= 0;
      TensorList r;
      if (planned) {  // write straight into the arena
        TensorList outs;
        for (int v : n.out) {
          auto impl = std::make_shared<TensorImpl>();
          impl->storage = plan.arena;
          impl->sizes = plan.sizes[v];
          impl->strides = contiguous_strides(plan.sizes[v]);
          impl->dtype = p.values[v].dtype;
          impl->offset = plan.offset[v] / static_cast<int64_t>(itemsize(impl->dtype));
          impl->refresh();
          outs.push_back(Tensor(std::move(impl)));
        }
        r = dispatch_kernel(*n.op, ins, a, &outs, false);
      } else {
        r = dispatch_kernel(*n.op, ins, a, nullptr, false);
      }
      for (size_t k = 0; k < n.out.size() && k < r.size(); ++k) {
        const int v = n.out[k];
        if (v < 0) continue;
        slot[v] = r[k];
        if (has_unbacked) {  // a data-dependent size is known once its op ran
          const EP::Value& val = p.values[v];
          for (size_t d = 0; d < val.sizes.size() && d < static_cast<size_t>(r[k].dim()); ++d) {
            auto it = symbol_index.find(val.sizes[d].raw());
            if (it != symbol_index.end() && values[it->second] < 0) values[it->second] = r[k].sizes()[d];
          }
        }
      }
      if (plan.dry)  // drop what no later node reads (memory outside the arena goes back early)
        for (int v : n.in)
          if (v >= 0 && plan.last_use[v] == static_cast<int>(i) && slot[v].defined() && plan.offset[v] < 0) slot[v] = Tensor();
    }
  });
  if (learn) {
    const bool team = cpu::regions_opened() - regions >= 2 && cpu::blas_serialised_in_team() == serialised;
    plan.team.store(team ? 1 : 0, std::memory_order_relaxed);
    plan.team_threads.store(threads, std::memory_order_relaxed);
  }
  TensorList out;
  for (int v : p.outputs) out.push_back(v >= 0 ? slot[v] : Tensor());
  return out;
}

Program::Program(std::shared_ptr<const ExportedProgram> ep) : impl_(std::make_shared<Impl>()) {
  KILN_CHECK(ep && ep->env, Value, kOp, "no program");
  Impl& m = *impl_;
  m.ep = std::move(ep);
  const EP& p = *m.ep;
  KILN_CHECK(static_cast<int>(p.symbols.size()) == p.env->num_symbols(), Value, kOp, "the program declares ",
             p.symbols.size(), " symbols, its shape environment has ", p.env->num_symbols());
  ShapeEnvGuard active(*p.env);
  for (int i = 0; i < p.env->num_symbols(); ++i) {
    const SymInt s = p.env->symbol(i);
    m.symbol_by_name[p.symbols[i].name] = s;
    m.symbol_index[s.raw()] = i;
    m.has_unbacked = m.has_unbacked || p.symbols[i].unbacked;
  }
  for (const EP::Guard& g : p.guards) m.guards.push_back(export_detail::parse_guard(g.text, m.symbol_by_name));
  for (const EP::Input& in : p.inputs)
    if (in.kind == EP::InputKind::User) m.user.push_back(in.value);
}

Program Program::load(const std::string& path) { return Program(load_program(path)); }

const ExportedProgram& Program::exported() const { return *impl_->ep; }

Program::Stats Program::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Stats s;
  s.plans = impl_->n_plans;
  if (const auto& p = impl_->last) {
    s.arena_bytes = p->arena_bytes;
    s.planned_bytes = p->planned_bytes;
    s.planned_values = p->planned_values;
    s.team = p->team.load(std::memory_order_relaxed);
  }
  return s;
}

TensorList Program::run(const TensorList& inputs) const {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  ShapeEnvGuard active(*m.ep->env);
  const std::vector<int64_t> values = m.bind(inputs);
  auto it = m.plans.find(values);
  if (it == m.plans.end()) {
    if (m.plans.size() >= 64) m.plans.clear();  // many shapes: keep the memory bounded
    it = m.plans.emplace(values, m.make_plan(values)).first;
    ++m.n_plans;
  }
  const std::shared_ptr<Plan> plan = it->second;
  m.last = plan;
  // the arena is one per plan: a previous run's intermediates are dead by now
  return m.execute(inputs, values, *plan);
}

}  // namespace kiln::runtime
