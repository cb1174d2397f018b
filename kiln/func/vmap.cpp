// vmap: trace one example, replay the ops over the batch through batching rules (vmap.h).
#include "kiln/func/vmap.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "kiln/core/alias.h"
#include "kiln/core/generator.h"
#include "kiln/core/read_hook.h"
#include "kiln/dispatch/schema.h"
#include "kiln/ops/ops.h"

namespace kiln::func {
namespace {

const char* kOp = "vmap";

struct Node {
  const OpDef* op;
  std::vector<int> in;  // value ids; -1 for an undefined (absent) input
  Attrs attrs;
  std::vector<int> out;  // value ids; -1 for an undefined output
  bool inplace = false;
  bool out_given = false;  // an out= call (random_fill_'s form too): `out` are the values written into
  std::vector<int> out_targets;  // an out= call's targets, as the values they held before the call
  bool self_write = false;  // an op that writes into its first input and returns it (copy_)
};

// ---- the trace: every table op of one example run, with its values' identities
struct Trace {
  std::vector<Tensor> example;  // per value: the tensor of the example run (keeps its address alive)
  std::unordered_map<const TensorImpl*, int> id_of;
  std::vector<std::pair<int, Tensor>> constants;  // values made outside the traced ops
  std::vector<Node> nodes;
  std::vector<Tensor> keep;  // aliases found by find(): their addresses stay theirs while the trace lives
  std::vector<bool> mapped;  // per value: depends on a mapped input
  std::vector<bool> view;    // per value: made by a view op (writing into it writes into its base)
  std::vector<bool> outside;  // per value: a tensor from outside the function, or a view of one

  int add(const Tensor& t, bool depends = false, bool is_view = false, bool from_outside = false) {
    example.push_back(t);
    mapped.push_back(depends);
    view.push_back(is_view);
    outside.push_back(from_outside);
    const int id = static_cast<int>(example.size() - 1);
    id_of[t.impl()] = id;
    return id;
  }
  // the value t stands for: itself, or an alias of a traced tensor made outside the ops (detach(),
  // what kiln.func.grad does to its inputs); -1 when neither
  int find(const Tensor& t) {
    auto it = id_of.find(t.impl());
    if (it != id_of.end()) return it->second;
    for (size_t v = 0; v < example.size(); ++v) {
      if (example[v].defined() && same_view(example[v], t)) {
        id_of[t.impl()] = static_cast<int>(v);
        keep.push_back(t);
        return static_cast<int>(v);
      }
    }
    return -1;
  }
  // the value id's tensor becomes a copy of its state now (a write to the live tensor follows)
  void snapshot(int id, const Tensor& copy) {
    example[id] = copy;
    for (auto& c : constants)
      if (c.first == id) c.second = copy;
  }
  int value_of(const Tensor& t) {
    if (!t.defined()) return -1;
    if (int id = find(t); id >= 0) return id;
    const int id = add(t, false, false, true);
    constants.emplace_back(id, t);
    return id;
  }
};

int attr_index(const OpDef& op, std::string_view name);  // (below)

// whether a call of a random op draws: attention with dropout_p = 0 does not
bool draws(const OpDef& op, const Attrs& attrs) {
  if (!(op.tags & kRandom)) return false;
  const int p = attr_index(op, "dropout_p");
  return !(p >= 0 && std::holds_alternative<double>(attrs[p]) && std::get<double>(attrs[p]) == 0.0);
}

thread_local std::vector<Trace*> t_traces;  // the vmap traces running on this thread, innermost last

class RecordMode : public DispatchMode {
 public:
  RecordMode(Trace& t, Randomness r) : trace_(t), randomness_(r) {}

  TensorList handle(const OpDef& op, const TensorList& inputs, const Attrs& attrs, TensorList* out,
                    bool inplace) override {
    KILN_CHECK(!draws(op, attrs) || randomness_ != Randomness::Error, Runtime, kOp,
               "vmap: called random operation while in randomness error mode. Please either use the 'same' or "
               "'different' randomness flags on vmap or perform the randomness operation out of vmap");
    Node n;
    n.op = &op;
    n.attrs = attrs;
    n.inplace = inplace;
    bool mapped_in = false;
    for (const Tensor& t : inputs) {
      n.in.push_back(trace_.value_of(t));
      mapped_in |= n.in.back() >= 0 && trace_.mapped[n.in.back()];
    }
    // (under "different", a draw differs per example: its values depend on the batch too)
    const bool depends = mapped_in || (randomness_ == Randomness::Different && draws(op, attrs));
    const bool writes_first = op.name == std::string_view("copy_");  // (its kernel writes into self)
    // A write makes a new version of its target: the value id readers so far used keeps the state
    // before the write (a copy taken now), the tensor maps to a new id from here on.
    std::vector<const Tensor*> targets;
    if (out) {
      for (const Tensor& t : *out) targets.push_back(&t);
    } else if ((inplace || writes_first) && !inputs.empty()) {
      targets.push_back(&inputs[0]);
    }
    std::vector<int> before;
    for (const Tensor* t : targets) {
      const int tid = t->defined() ? trace_.value_of(*t) : -1;
      before.push_back(tid);
      if (tid < 0) continue;
      // a write of per-example values into a tensor from outside: torch's error, before anything is written
      KILN_CHECK(!mapped_in || trace_.mapped[tid] || !trace_.outside[tid], Runtime, kOp, "vmap: ", op.name,
                 " writes values that depend on the mapped inputs into a tensor from outside the function (in place ",
                 "or out=); this is not possible in vmap. Please use out-of-place operators instead.");
      trace_.snapshot(tid, clone(*t));
    }
    TensorList r = dispatch(op, inputs, attrs, out, inplace);
    auto new_version = [&](size_t k) {
      const int tid = before[k];
      return trace_.add(*targets[k], depends || trace_.mapped[tid], trace_.view[tid], trace_.outside[tid]);
    };
    if (out) {  // the values written into are the out tensors' (ops that write them have no other results)
      n.out_given = true;
      n.out_targets = before;
      for (size_t k = 0; k < targets.size(); ++k) n.out.push_back(before[k] >= 0 ? new_version(k) : -1);
      trace_.nodes.push_back(std::move(n));
      return r;
    }
    n.self_write = writes_first;
    for (size_t i = 0; i < r.size(); ++i) {
      const Tensor& t = r[i];
      if (!t.defined()) {
        n.out.push_back(-1);
      } else if (!targets.empty() && i == 0 && t.impl() == inputs[0].impl()) {
        n.out.push_back(before[0] >= 0 ? new_version(0) : -1);
      } else {
        const bool is_view = (op.tags & kView) != 0;
        n.out.push_back(trace_.add(t, depends, is_view, is_view && n.in[0] >= 0 && trace_.outside[n.in[0]]));
      }
    }
    trace_.nodes.push_back(std::move(n));
    return r;
  }

 private:
  Trace& trace_;
  Randomness randomness_;
};

// ---- the replay: values as physical tensors, batched ones with the batch at dim 0
struct BVal {
  Tensor t;
  bool batched = false;
  int64_t rank() const { return t.dim() - (batched ? 1 : 0); }  // the logical rank
};

thread_local VmapStats t_stats;

Tensor materialize(const BVal& v, int64_t B) {  // the value with a batch dim (expanded, no copy)
  if (v.batched || !v.t.defined()) return v.t;
  Shape s{B};
  s.insert(s.end(), v.t.sizes().begin(), v.t.sizes().end());
  return expand(unsqueeze(v.t, 0), s);
}
Tensor pad_rank(const Tensor& phys, int64_t have, int64_t want) {  // (B, *l) -> (B, 1.., *l)
  Tensor t = phys;
  for (int64_t i = have; i < want; ++i) t = unsqueeze(t, 1);
  return t;
}

// the attribute index of each named non-tensor argument of the op's schema
int attr_index(const OpDef& op, std::string_view name) {
  const Schema* s = op_schema(op);
  if (!s) return -1;
  int a = 0;
  for (const SchemaArg& arg : s->args) {
    if (arg.is_tensor()) continue;
    if (arg.name == name) return a;
    ++a;
  }
  return -1;
}

// ops whose dim arguments shift past the batch dim (all tensor inputs batched alike); the offset is
// 1 where the dim counts in the result's rank (unsqueeze, diag_embed)
struct DimSpec {
  std::vector<std::pair<const char*, int>> dims;
  bool only_first_batched = false;  // the other tensor inputs must not be batched (index_select's index)
};
const std::unordered_map<std::string_view, DimSpec>& dim_ops() {
  static const std::unordered_map<std::string_view, DimSpec> t = [] {
    std::unordered_map<std::string_view, DimSpec> m;
    for (const char* n : {"unsqueeze"}) m[n] = {{{"dim", 1}}};
    for (const char* n : {"select", "slice", "cumsum", "cumprod", "logcumsumexp", "softmax", "log_softmax", "sort",
                          "topk", "kthvalue", "median_dim", "nanmedian_dim", "mode", "max_dim", "min_dim", "cat",
                          "gather", "take_along_dim", "scatter_add", "scatter", "scatter.value", "cummax", "cummin"})
      m[n] = {{{"dim", 0}}};
    m["squeeze"] = {{{"dim", 0}}};
    m["flip"] = {{{"dims", 0}}};
    m["roll"] = {{{"dims", 0}}};
    m["diagonal"] = {{{"dim1", 0}, {"dim2", 0}}};
    m["diag_embed"] = {{{"dim1", 1}, {"dim2", 1}}};
    m["unfold"] = {{{"dimension", 0}}};
    m["index_select"] = {{{"dim", 0}}, true};
    return m;
  }();
  return t;
}
// reductions over an int[] dim (None or [] = every dim)
bool is_dim_reduction(std::string_view n) {
  return n == "sum" || n == "mean" || n == "amax" || n == "amin" || n == "prod" || n == "all" || n == "any" ||
         n == "norm_l1" || n == "norm_l2sq" || n == "nansum";
}
// ops that treat leading dims as batch dims already: the physical call is the batched one. `first`:
// only the first input may be batched (the others are weights).
bool leading_batch_op(std::string_view n, bool* first_only) {
  *first_only = true;  // every op below takes one data tensor (layer norm: and unbatched weights)
  // (one tensor input, or weights that are not batched: the leading dims of the batched one are free;
  // the two-operand solvers align their operands' batch dims in ways a leading B would break: the loop)
  static const char* all[] = {"tril", "triu", "constant_pad_nd", "linalg_cholesky_ex", "linalg_inv_ex", "linalg_det",
                              "_linalg_slogdet", "_linalg_eigh", "_linalg_svd", "linalg_qr", "linalg_lu_factor_ex",
                              "linalg_matrix_exp", "cholesky_inverse", "native_layer_norm", "view_as_real",
                              "view_as_complex", "view_dtype"};
  for (const char* a : all)
    if (n == a) return true;
  return false;
}

std::string inplace_name(std::string_view n) {
  std::string s(n);
  return !s.empty() && s.back() == '_' ? s : s + "_";
}

class Replay {
 public:
  Replay(int64_t B, Randomness r) : B_(B), randomness_(r) {}

  // outs: an out= node's targets (as values now)
  TensorList run(const Node& n, const std::vector<BVal>& in, const std::vector<BVal>& outs,
                 std::vector<bool>& out_batched) {
    const OpDef& op = *n.op;
    bool any = false;
    for (const BVal& v : in) any |= v.batched;
    bool any_out = false;
    for (const BVal& v : outs) any_out |= v.batched;
    const bool fresh_draws = draws(op, n.attrs) && randomness_ == Randomness::Different;
    if (!any && !any_out && !fresh_draws) {  // nothing batched: the op as traced
      out_batched.assign(16, false);
      if (!n.out_given) return dispatch(op, plain(in), n.attrs, nullptr, n.inplace);
      TensorList o = plain(outs);
      dispatch(op, plain(in), n.attrs, &o, n.inplace);
      return o;
    }
    // out= with something batched: the functional result stands for the targets (a batched value
    // cannot be written into a tensor shared by the batch)
    out_batched.assign(16, true);
    if (fresh_draws) return loop(n, in, /*redraw=*/true);
    if (n.out_given) {  // the functional result, written into the targets
      Node f = n;
      f.inplace = f.out_given = false;
      TensorList r = run(f, in, {}, out_batched);
      for (size_t j = 0; j < outs.size() && j < r.size(); ++j) {
        if (!outs[j].t.defined() || !r[j].defined()) continue;
        const bool rb = out_batched[j];
        KILN_CHECK(outs[j].batched || !rb, Runtime, kOp, "vmap: ", op.name, " writes a result that depends on the "
                   "mapped inputs into a tensor that does not (out= or in place); use the out-of-place form instead");
        copy_(outs[j].t, rb ? pad_rank(r[j], r[j].dim() - 1, outs[j].rank()) : r[j]);
        r[j] = outs[j].t;
        out_batched[j] = outs[j].batched;
      }
      return r;
    }
    const std::string_view name = op.name;
    if ((n.inplace || n.self_write) && !in.empty() && !in[0].batched)
      KILN_FAIL(Runtime, kOp, "vmap: ", inplace_name(name), "(self, *extra_args) is not possible because there "
                "exists a Tensor `other` in extra_args that has more elements than `self`. This happened due to "
                "`other` being vmapped over but `self` not being vmapped over in a vmap. Please try to use "
                "out-of-place operators instead of ", inplace_name(name), ".");
    ++t_stats.rules;
    if (n.self_write) {  // copy_(self, src): src broadcast into the batched self
      dispatch(op, {in[0].t, in[1].batched ? pad_rank(in[1].t, in[1].rank(), in[0].rank()) : in[1].t});
      return {in[0].t};
    }
    if (op.tags & kPointwise) return pointwise(n, in);
    if (name == "view") return view(n, in);
    if (name == "expand") return expand_rule(n, in);
    if (name == "permute") return permute_rule(n, in);
    if (name == "repeat") return repeat_rule(n, in);
    if (name == "bmm") return bmm_rule(in);
    if (name == "_fused_baddbmm") return fused_baddbmm_rule(op, n, in);
    if (TensorList r; conv_family(n, in, r)) return r;
    if (auto it = dim_ops().find(name); it != dim_ops().end()) {
      if (TensorList r; dim_rule(n, in, it->second, r)) return r;
    } else if (is_dim_reduction(name)) {
      if (TensorList r; reduction(n, in, r)) return r;
    } else if (bool first_only; leading_batch_op(name, &first_only)) {
      bool ok = true;
      for (size_t i = 1; i < in.size() && first_only; ++i) ok &= !in[i].batched;
      if (ok) {
        TensorList phys;
        for (const BVal& v : in) phys.push_back(first_only ? v.t : materialize(v, B_));
        return dispatch(op, phys, n.attrs, nullptr, n.inplace);
      }
    } else if (name == "embedding" && !in[0].batched) {  // batched indices: any shape of index works
      return dispatch(op, {in[0].t, in[1].t}, n.attrs, nullptr, n.inplace);
    }
    --t_stats.rules;
    return loop(n, in, false);
  }

 private:
  static TensorList plain(const std::vector<BVal>& in) {
    TensorList r;
    for (const BVal& v : in) r.push_back(v.t);
    return r;
  }

  // the per-example fallback: one call per example, results stacked
  TensorList loop(const Node& n, const std::vector<BVal>& in, bool redraw) {
    ++t_stats.loops;
    if (std::find(t_stats.looped_ops.begin(), t_stats.looped_ops.end(), n.op->name) == t_stats.looped_ops.end())
      t_stats.looped_ops.push_back(n.op->name);
    std::vector<TensorList> per;
    Attrs attrs = n.attrs;
    const int key_at = redraw ? attr_index(*n.op, "key") : -1, first_at = redraw ? attr_index(*n.op, "first") : -1;
    const bool fill_fresh = redraw && (n.inplace || n.out_given) && !in.empty() && !in[0].batched;
    TensorList targets;
    const int64_t runs = std::max<int64_t>(B_, 1);  // an empty batch: one run on zeros, for the shapes
    for (int64_t b = 0; b < runs; ++b) {
      TensorList args;
      for (const BVal& v : in)
        args.push_back(!v.batched ? v.t
                       : B_ > 0   ? select(v.t, 0, b)
                                  : zeros(Shape(v.t.sizes().begin() + 1, v.t.sizes().end()), TensorOptions(v.t.dtype())));
      if (fill_fresh) {  // an in-place draw into a tensor shared by the batch: one tensor per example
        args[0] = empty_like(in[0].t);
        targets.push_back(args[0]);
      }
      if (key_at >= 0 && first_at >= 0) {  // fresh counters for each example's draws
        auto [key, start] = default_generator().reserve(static_cast<uint64_t>(std::max<int64_t>(args[0].numel(), 1)));
        attrs[key_at] = static_cast<int64_t>(key);
        attrs[first_at] = static_cast<int64_t>(start);
      }
      if (fill_fresh && n.out_given) {
        TensorList o{args[0]};
        dispatch(*n.op, args, attrs, &o, false);
        per.push_back(o);
      } else {
        per.push_back(dispatch(*n.op, args, attrs, nullptr, n.inplace && !n.out_given));
      }
    }
    TensorList r;
    const size_t nout = per.empty() ? 0 : per[0].size();
    for (size_t j = 0; j < nout; ++j) {
      if (!per[0][j].defined()) {
        r.push_back(Tensor());
        continue;
      }
      TensorList parts;
      for (const TensorList& p : per) parts.push_back(p[j]);
      const int64_t s0 = parts[0].numel();
      for (const Tensor& p : parts)
        KILN_CHECK(p.sizes() == parts[0].sizes(), Runtime, kOp, "vmap: ", n.op->name, " returns a result whose shape ",
                   "depends on the data (", s0, " and ", p.numel(), " elements across the batch); such ops cannot be "
                   "vmapped");
      if (n.inplace && !n.out_given && j == 0 && in[0].batched) r.push_back(in[0].t);  // the slices wrote into it
      else if (B_ == 0) r.push_back(narrow(stack(parts, 0), 0, 0, 0));
      else r.push_back(stack(parts, 0));
    }
    return r;
  }

  TensorList pointwise(const Node& n, const std::vector<BVal>& in) {
    int64_t R = 0;
    for (const BVal& v : in)
      if (v.t.defined()) R = std::max(R, v.rank());
    TensorList phys;
    for (const BVal& v : in) phys.push_back(v.batched ? pad_rank(v.t, v.rank(), R) : v.t);
    // binary_cross_entropy is pointwise but wants equal shapes: its operands at the broadcast shape
    // (views; not in general: a 0-dim operand expanded would change type promotion)
    if (!n.inplace && std::string_view(n.op->name) == "binary_cross_entropy") {
      Shape s;
      for (const Tensor& t : phys)
        if (t.defined()) s = broadcast_shapes(s, t.sizes(), n.op->name);
      for (Tensor& t : phys)
        if (t.defined() && t.sizes() != s) t = expand(t, s);
    }
    TensorList r = dispatch(*n.op, phys, n.attrs, nullptr, n.inplace);
    if (n.inplace) r[0] = in[0].t;
    return r;
  }

  TensorList view(const Node& n, const std::vector<BVal>& in) {
    Attrs a = n.attrs;
    Shape s = std::get<Shape>(a[0]);
    s.insert(s.begin(), B_);
    a[0] = s;
    Tensor x = materialize(in[0], B_);
    try {
      return dispatch(*n.op, {x}, a);
    } catch (const Error&) {  // a batch dim that does not fold into the view's strides: copy once
      return dispatch(*n.op, {contiguous(x)}, a);
    }
  }

  TensorList expand_rule(const Node& n, const std::vector<BVal>& in) {
    Attrs a = n.attrs;
    Shape s = std::get<Shape>(a[0]);
    Tensor x = pad_rank(in[0].t, in[0].rank(), static_cast<int64_t>(s.size()));
    s.insert(s.begin(), B_);
    a[0] = s;
    return dispatch(*n.op, {x}, a);
  }

  TensorList permute_rule(const Node& n, const std::vector<BVal>& in) {
    Attrs a = n.attrs;
    const Shape& dims = std::get<Shape>(a[0]);
    Shape p{0};
    for (int64_t d : dims) p.push_back(wrap_dim(d, in[0].rank(), "permute") + 1);
    a[0] = p;
    return dispatch(*n.op, {in[0].t}, a);
  }

  TensorList repeat_rule(const Node& n, const std::vector<BVal>& in) {
    Attrs a = n.attrs;
    Shape reps = std::get<Shape>(a[0]);
    Tensor x = pad_rank(in[0].t, in[0].rank(), static_cast<int64_t>(reps.size()));
    reps.insert(reps.begin(), 1);
    a[0] = reps;
    return dispatch(*n.op, {x}, a);
  }

  // _fused_baddbmm (bfloat16 / float16 addmm, baddbmm, linear with a bias): the vmap batch folded into
  // the op's own batch dim, unbatched operands expanded to it, so each example's product and
  // rounding are those it has alone (an unbatched operand with more than one matrix is copied B
  // times by the fold; addmm and linear have one, a view).
  TensorList fused_baddbmm_rule(const OpDef& op, const Node& n, const std::vector<BVal>& in) {
    const Tensor a = materialize(in[1], B_);
    const int64_t bb = a.size(1);
    auto fold = [&](const Tensor& t) { return reshape(t, {B_ * bb, t.size(2), t.size(3)}); };
    TensorList r = dispatch(op, {fold(materialize(in[0], B_)), fold(a), fold(materialize(in[2], B_))}, n.attrs);
    return {reshape(r[0], {B_, bb, r[0].size(1), r[0].size(2)})};
  }

  // bmm over (b, n, k) x (b, k, m) per example: the batch folds into bmm's batch or into the rows /
  // columns of the unbatched side's partner
  TensorList bmm_rule(const std::vector<BVal>& in) {
    const BVal &a = in[0], &c = in[1];
    const int64_t b = a.batched ? a.t.size(1) : a.t.size(0);
    if (a.batched && c.batched) {
      Tensor x = reshape(a.t, {B_ * b, a.t.size(2), a.t.size(3)});
      Tensor y = reshape(c.t, {B_ * b, c.t.size(2), c.t.size(3)});
      Tensor r = bmm(x, y);
      return {reshape(r, {B_, b, r.size(1), r.size(2)})};
    }
    if (a.batched) {  // (B, b, n, k) -> (b, B n, k) @ (b, k, m)
      const int64_t n = a.t.size(2), k = a.t.size(3);
      Tensor x = reshape(permute(a.t, {1, 0, 2, 3}), {b, B_ * n, k});
      Tensor r = bmm(x, c.t);  // (b, B n, m)
      const int64_t m = r.size(2);
      return {permute(reshape(r, {b, B_, n, m}), {1, 0, 2, 3})};
    }
    // (b, n, k) @ (B, b, k, m) -> (b, n, k) @ (b, k, B m)
    const int64_t k = c.t.size(2), m = c.t.size(3), n = a.t.size(1);
    Tensor y = reshape(permute(c.t, {1, 2, 0, 3}), {b, k, B_ * m});
    Tensor r = bmm(a.t, y);  // (b, n, B m)
    return {permute(reshape(r, {b, n, B_, m}), {2, 0, 1, 3})};
  }

  // Convolutions and pools over a batched input with shared weights: the batch folds into N (an
  // example without N is itself a batch of B). A per-example weight gradient
  // (convolution_backward_weight of batched grad_output and input) is one call with the batch
  // folded into the channels and B times the groups: the standard per-sample-gradient trick.
  bool conv_family(const Node& n, const std::vector<BVal>& in, TensorList& out) {
    const std::string_view name = n.op->name;
    const bool conv = name == "convolution", pool = name == "max_pool" || name == "avg_pool";
    if (conv || pool) {
      for (size_t i = 1; i < in.size(); ++i)
        if (in[i].batched) return false;  // per-example weights: the loop
      const int64_t spatial = conv ? in[1].t.dim() - 2
                                   : static_cast<int64_t>(std::get<Shape>(n.attrs[attr_index(*n.op, "kernel_size")]).size());
      const Tensor& x = in[0].t;
      const bool has_n = in[0].rank() == spatial + 2;
      if (!has_n && in[0].rank() != spatial + 1) return false;
      TensorList phys;
      for (const BVal& v : in) phys.push_back(v.t);
      if (!has_n) {  // (B, C, *spatial): B is the batch
        out = dispatch(*n.op, phys, n.attrs);
        return true;
      }
      const int64_t N = x.size(1);
      Shape merged(x.sizes().begin() + 1, x.sizes().end());
      merged[0] = B_ * N;
      phys[0] = reshape(x, merged);
      out = dispatch(*n.op, phys, n.attrs);
      for (Tensor& o : out) {
        if (!o.defined()) continue;
        Shape s{B_, N};
        s.insert(s.end(), o.sizes().begin() + 1, o.sizes().end());
        o = reshape(o, s);
      }
      return true;
    }
    if (name != "convolution_backward_weight" || in.size() != 2) return false;
    // grad_output (B, N, Co, *osp), input (B, N, Ci, *sp) -> (N, B Co, *osp), (N, B Ci, *sp); groups B g
    Tensor go = materialize(in[0], B_), x = materialize(in[1], B_);
    const int64_t rank = in[1].rank();
    const int ws_at = attr_index(*n.op, "weight_size"), g_at = attr_index(*n.op, "groups");
    if (ws_at < 0 || g_at < 0) return false;
    Shape ws = std::get<Shape>(n.attrs[ws_at]);
    const int64_t spatial = static_cast<int64_t>(ws.size()) - 2;
    if (rank == spatial + 1) {  // no N: one sample each
      go = unsqueeze(go, 1);
      x = unsqueeze(x, 1);
    } else if (rank != spatial + 2) {
      return false;
    }
    auto fold = [&](const Tensor& t) {  // (B, N, C, *sp) -> (N, B C, *sp)
      Shape p{1, 0};
      for (int64_t d = 2; d < t.dim(); ++d) p.push_back(d);
      Tensor u = permute(t, p);
      Shape s{t.size(1), B_ * t.size(2)};
      s.insert(s.end(), t.sizes().begin() + 3, t.sizes().end());
      return reshape(u, s);
    };
    Attrs a = n.attrs;
    Shape ws2 = ws;
    ws2[0] = B_ * ws[0];
    a[ws_at] = ws2;
    a[g_at] = std::get<int64_t>(n.attrs[g_at]) * B_;
    Tensor gw = dispatch1(*n.op, {fold(go), fold(x)}, a);  // (B Co, Ci / g, *k)
    Shape s{B_};
    s.insert(s.end(), ws.begin(), ws.end());
    out = {reshape(gw, s)};
    return true;
  }

  bool dim_rule(const Node& n, const std::vector<BVal>& in, const DimSpec& spec, TensorList& out) {
    const OpDef& op = *n.op;
    for (size_t i = 1; i < in.size() && spec.only_first_batched; ++i)
      if (in[i].batched) return false;
    // the logical rank the dims refer to: the first tensor input's (0-dim examples: the loop)
    const int64_t r = in[0].rank();
    if (r == 0) return false;
    Attrs a = n.attrs;
    if (std::string_view(op.name) == "squeeze") {  // all_dims: every logical dim of size 1, named
      const int ai = attr_index(op, "all_dims");
      if (ai >= 0 && std::holds_alternative<bool>(a[ai]) && std::get<bool>(a[ai])) {
        Shape dims;
        for (int64_t d = 0; d < r; ++d)
          if (in[0].t.size(d + (in[0].batched ? 1 : 0)) == 1) dims.push_back(d);
        a[ai] = false;
        a[attr_index(op, "dim")] = dims;
      }
    }
    for (const auto& [arg, offset] : spec.dims) {
      const int ai = attr_index(op, arg);
      if (ai < 0) return false;
      Attr& v = a[ai];
      if (auto* d = std::get_if<int64_t>(&v)) {
        *d = wrap_dim(*d, r + offset, op.name) + 1;
      } else if (auto* ds = std::get_if<Shape>(&v)) {
        if (ds->empty()) return false;  // roll's flattening form, squeeze of nothing: the loop
        for (int64_t& d : *ds) d = wrap_dim(d, r + offset, op.name) + 1;
      } else {
        return false;  // dim=None
      }
    }
    TensorList phys;
    for (size_t i = 0; i < in.size(); ++i)
      phys.push_back(spec.only_first_batched && i > 0 ? in[i].t : materialize(in[i], B_));
    out = dispatch(op, phys, a, nullptr, n.inplace);
    if (n.inplace) out[0] = in[0].t;
    return true;
  }

  bool reduction(const Node& n, const std::vector<BVal>& in, TensorList& out) {
    const OpDef& op = *n.op;
    const int ai = attr_index(op, "dim");
    if (ai < 0 || in.size() != 1) return false;
    const int64_t r = in[0].rank();
    if (r == 0) return false;
    Attrs a = n.attrs;
    Shape dims;
    if (auto* ds = std::get_if<Shape>(&a[ai]); ds && !ds->empty()) {
      for (int64_t d : *ds) dims.push_back(wrap_dim(d, r, op.name) + 1);
    } else {  // None / []: every logical dim
      if (r == 0) return false;
      for (int64_t d = 1; d <= r; ++d) dims.push_back(d);
    }
    a[ai] = dims;
    out = dispatch(op, {in[0].t}, a);
    return true;
  }

  int64_t B_;
  Randomness randomness_;
};

}  // namespace

const VmapStats& last_vmap_stats() { return t_stats; }

bool is_mapped(const Tensor& t) {
  if (t_traces.empty() || !t.defined()) return false;
  for (Trace* tr : t_traces) {
    const int id = tr->find(t);
    if (id >= 0 && tr->mapped[id]) return true;
  }
  return false;
}

void check_data_read(const Tensor& t, const char* what) {
  if (!is_mapped(t)) return;
  if (std::string_view(what) == "item")
    KILN_FAIL(Runtime, kOp, "vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over "
              "calling .item() on a Tensor, please try to rewrite what you're doing with other operations.");
  KILN_FAIL(Runtime, kOp, "vmap: It looks like you're attempting to use a Tensor in some data-dependent control "
            "flow (", what, "). We don't support that: the function runs once, on the first example, and its ",
            "branches would hold for the whole batch; write it with tensor operations (kiln.where, ...).");
}

BatchedResult vmap_batched(const BatchedFn& f, const TensorList& inputs,
                           const std::vector<std::optional<int64_t>>& in_dims, Randomness randomness) {
  KILN_CHECK(in_dims.size() == inputs.size(), Value, kOp, "vmap(", "f, in_dims=...)(<inputs>): in_dims has ",
             in_dims.size(), " entries for ", inputs.size(), " inputs");
  // the batch size, and the batched inputs with the batch at dim 0
  int64_t B = -1;
  std::vector<BVal> batched_in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!in_dims[i] || !x.defined()) {
      batched_in[i] = {x, false};
      continue;
    }
    const int64_t d = *in_dims[i];
    KILN_CHECK(x.dim() > 0 && d >= -x.dim() && d < x.dim(), Value, kOp, "vmap(f, in_dims=", d,
               ", ...)(<inputs>): Got in_dim=", d, " for an input but the input is of type Tensor with ", x.dim(),
               " dims. We cannot vmap over dim ", d, " for the input");
    const int64_t dd = d < 0 ? d + x.dim() : d;
    if (B < 0) B = x.size(dd);
    KILN_CHECK(x.size(dd) == B, Value, kOp, "vmap: Expected all tensors to have the same size in the mapped "
               "dimension, got sizes ", B, " and ", x.size(dd), " for the mapped dimension");
    batched_in[i] = {movedim(x, {dd}, {0}), true};
  }
  KILN_CHECK(B >= 0, Value, kOp, "vmap(f)(<inputs>): at least one input must be a Tensor mapped over (in_dims not all "
             "None)");

  // 1. the trace: f on the first example
  Trace trace;
  TensorList ex;
  for (const BVal& v : batched_in) {
    // (an empty batch: a zero example of the right shape, for the shapes alone)
    Tensor e = !v.batched ? v.t : B > 0 ? clone(select(v.t, 0, 0)) : zeros(Shape(v.t.sizes().begin() + 1, v.t.sizes().end()), TensorOptions(v.t.dtype()));
    ex.push_back(e);
    if (e.defined()) {
      trace.add(e, v.batched, false, !v.batched);
    } else {
      trace.example.push_back(e);
      trace.mapped.push_back(false);
      trace.view.push_back(false);
      trace.outside.push_back(false);
    }
  }
  TensorList result;
  {
    t_traces.push_back(&trace);
    // C++ reading a value into a number (Tensor::item(): a front end's branch, a Scalar argument) is
    // checked like Python's reads
    auto prev_hook = detail::item_read_hook;
    detail::item_read_hook = [](const Tensor& t) { check_data_read(t, "item"); };
    struct Pop {
      void (*prev)(const Tensor&);
      ~Pop() {
        t_traces.pop_back();
        detail::item_read_hook = prev;
      }
    } pop{prev_hook};
    ModeGuard guard(std::make_shared<RecordMode>(trace, randomness));
    result = f(ex);
  }
  std::vector<int> out_ids;
  for (const Tensor& t : result) out_ids.push_back(t.defined() ? trace.value_of(t) : -1);

  // 2. the replay over the batch. A value that does not depend on the batch is the traced one (its
  // op is not run again: a front end may have filled it outside the ops, as tril_indices does).
  t_stats = VmapStats{};
  std::vector<BVal> vals(trace.example.size());
  std::vector<bool> external(trace.example.size(), false);  // user inputs and captured tensors
  for (size_t i = 0; i < batched_in.size(); ++i) {
    vals[i] = batched_in[i];
    external[i] = true;
  }
  for (const auto& [id, t] : trace.constants) {
    vals[id] = {t, false};
    external[id] = true;
  }
  for (size_t v = 0; v < vals.size(); ++v)
    if (!vals[v].t.defined() && !external[v]) vals[v] = {trace.example[v], false};
  Replay replay(B, randomness);
  std::vector<bool> ob;
  for (const Node& n : trace.nodes) {
    bool any = false;
    for (int id : n.in) any |= id >= 0 && vals[id].batched;
    for (int id : n.out_targets) any |= id >= 0 && vals[id].batched;
    const bool draw = draws(*n.op, n.attrs) && randomness == Randomness::Different;
    if (!any && !draw) continue;  // the traced values stand
    // a write of batched values into a tensor the function made (one_hot's zeros, then scatter_):
    // that tensor becomes batched (a tensor from outside cannot: the rule raises, as torch)
    const int target = n.out_given                                  ? (n.out_targets.empty() ? -1 : n.out_targets[0])
                       : (n.inplace || n.self_write) && !n.in.empty() ? n.in[0]
                                                                      : -1;
    if (target >= 0 && any && !vals[target].batched && !external[target] && !trace.view[target])
      vals[target] = {clone(materialize(vals[target], B)), true};  // (its value before the write: a copy)
    std::vector<BVal> in, outs;
    for (int id : n.in) in.push_back(id >= 0 ? vals[id] : BVal{});
    for (int id : n.out_targets) outs.push_back(id >= 0 ? vals[id] : BVal{});
    TensorList r = replay.run(n, in, outs, ob);
    for (size_t j = 0; j < n.out.size() && j < r.size(); ++j)
      if (n.out[j] >= 0) vals[n.out[j]] = {r[j], r[j].defined() && ob[j]};
  }

  BatchedResult res;
  res.batch_size = B;
  for (int id : out_ids) {
    if (id < 0) {
      res.outputs.push_back(Tensor());
      res.batched.push_back(false);
      continue;
    }
    res.outputs.push_back(vals[id].t);
    res.batched.push_back(vals[id].batched);
  }
  return res;
}

TensorList vmap(const BatchedFn& f, const TensorList& inputs, const std::vector<std::optional<int64_t>>& in_dims,
                const std::vector<std::optional<int64_t>>& out_dims, Randomness randomness) {
  BatchedResult b = vmap_batched(f, inputs, in_dims, randomness);
  TensorList outs;
  for (size_t j = 0; j < b.outputs.size(); ++j) {
    const std::optional<int64_t> od = out_dims.empty() ? std::optional<int64_t>(0)
                                                       : out_dims[std::min(j, out_dims.size() - 1)];
    outs.push_back(place_batch_dim(b.outputs[j], b.batched[j], b.batch_size, od));
  }
  return outs;
}

Tensor place_batch_dim(const Tensor& t, bool batched, int64_t batch_size, std::optional<int64_t> out_dim) {
  if (!t.defined()) return t;
  if (!out_dim) {
    KILN_CHECK(!batched, Value, kOp, "vmap: out_dims=None for an output that depends on the mapped inputs (it ",
               "has a batch dim); return it with an out_dim, or make it not depend on them");
    return t;
  }
  Tensor phys = materialize(BVal{t, batched}, batch_size);
  const int64_t r = phys.dim();
  const int64_t d = *out_dim;
  KILN_CHECK(d >= -r && d < r, Index, kOp, "vmap: out_dim=", d, " is out of range for an output of ", r - 1,
             " dims (expected in [", -r, ", ", r - 1, "])");
  return movedim(phys, {0}, {d < 0 ? d + r : d});
}

}  // namespace kiln::func
