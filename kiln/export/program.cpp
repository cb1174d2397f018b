// Export tracing (program.h): the export mode that records each dispatched op as a node, the check of
// the traced guards against the declared dimensions, and the program's printed form.
#include "kiln/export/program.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>
#include <unordered_map>

#include "kiln/autograd/autograd.h"
#include "kiln/core/alias.h"
#include "kiln/dispatch/schema.h"
#include "kiln/nn/module.h"

namespace kiln {

namespace {
constexpr const char* kOp = "export";
using Kind = ExportedProgram::InputKind;

// "fc.weight" -> "fc_weight": a graph value name from a state_dict key.
std::string ident(const std::string& s) {
  std::string r;
  for (char c : s) r += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (r.empty() || std::isdigit(static_cast<unsigned char>(r[0]))) r = "_" + r;
  return r;
}

// The identifiers of a guard's text ("seq", "batch").
std::vector<std::string> names_in(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    if (std::isalpha(static_cast<unsigned char>(text[i])) || text[i] == '_') {
      size_t j = i;
      while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
      std::string w = text.substr(i, j - i);
      if (w != "max" && w != "min") out.push_back(w);
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}
}  // namespace

// ---- the trace mode ---------------------------------------------------------------------------------

struct ExportTracer::State : DispatchMode {
  std::shared_ptr<ShapeEnv> env = std::make_shared<ShapeEnv>();
  std::shared_ptr<ExportedProgram> prog = std::make_shared<ExportedProgram>();
  std::unordered_map<const TensorImpl*, int> value_of;
  std::vector<Tensor> meta_of;  // per value: what the model's ops see (a meta tensor)
  std::vector<Tensor> keep;     // keeps captured and traced tensors (their addresses) alive
  std::unordered_map<std::string, int> name_count;
  struct SymDecl {
    std::string name;
    Dim::Kind kind;
    int64_t min, max;
    std::string source;  // "x.shape[1]"
  };
  std::vector<SymDecl> decls;  // per created symbol
  std::map<std::string, SymInt> symbol_by_name;
  int n_constants = 0;
  bool active = false;
  ShapeEnv* prev_env = nullptr;
  std::unique_ptr<AutoGradMode> grad;

  std::string fresh_name(const std::string& base) {
    int& n = name_count[base];
    std::string name = n == 0 ? base : base + "_" + std::to_string(n);
    ++n;
    while (name_count.count(name) && name != base) name = base + "_" + std::to_string(n++);
    if (name != base) name_count[name] = 1;
    return name;
  }

  int new_value(const Tensor& meta, const std::string& base) {
    ExportedProgram::Value v;
    v.name = fresh_name(base);
    v.sizes = meta.sym_sizes();
    v.dtype = meta.dtype();
    v.wrapped = meta.is_wrapped_number();
    prog->values.push_back(std::move(v));
    meta_of.push_back(meta);
    keep.push_back(meta);
    const int id = static_cast<int>(prog->values.size() - 1);
    value_of[meta.impl()] = id;
    return id;
  }

  // A model tensor as a graph input of its kind: the value stands for it, a meta twin flows through.
  int add_captured(const Tensor& t, Kind kind, const std::string& target) {
    const char* prefix = kind == Kind::Parameter ? "p_" : kind == Kind::Buffer ? "b_" : "c_";
    const int id = new_value(meta_twin(t), prefix + ident(target));
    value_of[t.impl()] = id;
    keep.push_back(t);
    prog->inputs.push_back({kind, target, id});
    prog->state.emplace_back(target, t);
    return id;
  }

  // The value t stands for, or -1. A meta tensor made outside the ops as an alias of a traced one
  // (detach(), requires_grad_() on a detached copy: what kiln.func.grad does) is that value.
  int find(const Tensor& t) {
    auto it = value_of.find(t.impl());
    if (it != value_of.end()) return it->second;
    if (!t.is_meta()) return -1;
    for (size_t v = 0; v < meta_of.size(); ++v) {
      if (same_view(meta_of[v], t)) {
        value_of[t.impl()] = static_cast<int>(v);
        keep.push_back(t);
        return static_cast<int>(v);
      }
    }
    return -1;
  }

  int lookup(const Tensor& t, const OpDef& op) {
    if (int id = find(t); id >= 0) return id;
    KILN_CHECK(!t.is_meta(), Runtime, kOp, op.name,
               " got a meta tensor that is neither an input of the exported call nor made inside it");
    KILN_CHECK(t.device().type == DeviceType::CPU, NotImplemented, kOp, op.name, " got a tensor on ",
               device_str(t.device()), ": only CPU tensors can be captured as constants");
    // a tensor the model made outside the traced ops (a Python number's tensor, a captured constant)
    return add_captured(t, Kind::Constant, "lifted_tensor_" + std::to_string(n_constants++));
  }

  TensorList handle(const OpDef& op, const TensorList& inputs, const Attrs& attrs, TensorList* out,
                    bool inplace) override {
    ExportedProgram::Node n;
    n.op = &op;
    n.attrs = attrs;
    for (Attr& a : n.attrs)  // `device=x.device` of a traced x: the device the program runs on
      if (auto* d = std::get_if<Device>(&a); d && d->is_meta()) a = Device(kCPU);
    n.inplace = inplace;
    n.out_given = out != nullptr;
    TensorList metas;
    for (const Tensor& t : inputs) {
      if (!t.defined()) {
        n.in.push_back(-1);
        metas.push_back(t);
        continue;
      }
      const int v = lookup(t, op);
      n.in.push_back(v);
      metas.push_back(meta_of[v]);
    }
    TensorList out_metas;
    if (out)
      for (const Tensor& t : *out) {
        KILN_CHECK(t.defined(), Runtime, kOp, op.name, ": an undefined out tensor");
        const int v = lookup(t, op);
        n.out.push_back(v);
        out_metas.push_back(meta_of[v]);
      }
    Attrs call = attrs;  // ops that make tensors on the CPU make them on meta while tracing
    for (Attr& a : call)
      if (auto* d = std::get_if<Device>(&a); d && d->type == DeviceType::CPU) a = Device(kMeta);
    TensorList result = dispatch(op, metas, call, out ? &out_metas : nullptr, inplace);
    if (out) {
      for (size_t i = 0; i < out_metas.size(); ++i) {
        ExportedProgram::Value& v = prog->values[n.out[i]];
        KILN_CHECK(sym_str(out_metas[i].sym_sizes()) == sym_str(v.sizes) && out_metas[i].dtype() == v.dtype,
                   NotImplemented, kOp, op.name, " resized or retyped its out tensor ", v.name,
                   ": use the op's functional form in an exported model");
      }
      prog->nodes.push_back(std::move(n));
      return *out;
    }
    for (const Tensor& r : result) {
      if (!r.defined()) {
        n.out.push_back(-1);
        continue;
      }
      auto it = value_of.find(r.impl());
      n.out.push_back(it != value_of.end() ? it->second : new_value(r, ident(op.name)));
    }
    prog->nodes.push_back(std::move(n));
    return result;
  }
};

ExportTracer::ExportTracer() : s_(std::make_unique<State>()) { s_->prog->env = s_->env; }
ExportTracer::~ExportTracer() {
  if (s_->active) end();
}
ShapeEnv& ExportTracer::env() { return *s_->env; }

void ExportTracer::add_state(const std::string& target, const Tensor& t, Kind kind) {
  if (!t.defined() || s_->value_of.count(t.impl())) return;  // absent (bias=False) or shared
  KILN_CHECK(!t.is_meta(), Runtime, kOp, "the model's ", target, " is a meta tensor: export needs its values");
  s_->add_captured(t, kind, target);
}

Tensor ExportTracer::add_input(const std::string& name, const Tensor& example, const std::map<int64_t, Dim>& dims) {
  State& s = *s_;
  KILN_CHECK(example.defined(), Value, kOp, "input ", name, " is undefined");
  ShapeEnvGuard active(*s.env);
  SymShape sizes;
  for (int64_t d = 0; d < example.dim(); ++d) {
    const int64_t n = example.sizes()[d];
    auto it = dims.find(d);
    const std::string source = name + ".shape[" + std::to_string(d) + "]";
    if (it == dims.end() || it->second.kind == Dim::Kind::Static) {
      sizes.push_back(n);
      continue;
    }
    const Dim& dim = it->second;
    std::string sym_name = dim.name;
    if (dim.kind != Dim::Kind::Named) {
      sym_name = "s" + std::to_string(s.decls.size());
      while (s.symbol_by_name.count(sym_name)) sym_name = "_" + sym_name;
    }
    KILN_CHECK(dim.min >= 0 && dim.min <= dim.max, Value, kOp, "Dim('", sym_name, "') has an empty range [",
               dim.min, ", ", dim.max, "]");
    KILN_CHECK(n >= dim.min && n <= dim.max, Value, kOp, "expected input ", source, " to be in [", dim.min, ", ",
               dim.max == INT64_MAX ? std::string("inf") : std::to_string(dim.max), "] (", sym_name, "), but got ", n);
    auto known = s.symbol_by_name.find(sym_name);
    if (known != s.symbol_by_name.end()) {  // one Dim used by several inputs: one symbol
      const State::SymDecl* decl = nullptr;
      for (const State::SymDecl& x : s.decls)
        if (x.name == sym_name) decl = &x;
      KILN_CHECK(decl->min == dim.min && decl->max == dim.max, Value, kOp, "two Dims named '", sym_name,
                 "' with different ranges");
      KILN_CHECK(known->second.hint() == std::max<int64_t>(n, 2) || n == known->second.hint(), Value, kOp,
                 "inputs ", decl->source, " and ", source, " share Dim '", sym_name, "' but have sizes ",
                 known->second.hint(), " and ", n);
      sizes.push_back(known->second);
      continue;
    }
    KILN_CHECK(dim.max >= 2, Value, kOp, "Dim('", sym_name, "') allows at most ", dim.max,
               ": a dimension of size 0 or 1 only is static (use Dim.STATIC)");
    // Traced as >= 2 (sizes 0 and 1 are broadcasting's special cases, as in torch); runs may use the
    // declared range.
    const int64_t lo = std::max<int64_t>(dim.min, 2);
    if (lo >= dim.max) {  // one value: static
      sizes.push_back(n);
      continue;
    }
    const SymInt sym = s.env->create_symbol(sym_name, std::clamp<int64_t>(n, lo, dim.max), lo, dim.max);
    s.symbol_by_name[sym_name] = sym;
    s.decls.push_back({sym_name, dim.kind, dim.min, dim.max, source});
    sizes.push_back(sym);
  }
  Tensor meta = make_tensor(sizes, example.dtype(), kMeta);
  const int id = s.new_value(meta, ident(name));
  s.prog->inputs.push_back({Kind::User, name, id});
  return meta;
}

void ExportTracer::begin() {
  State& s = *s_;
  KILN_CHECK(!s.active, Runtime, kOp, "the tracer is already running");
  s.prev_env = set_active_shape_env(s.env.get());
  s.grad = std::make_unique<AutoGradMode>(false);
  // the mode holds the state through an aliasing pointer: the tracer owns it
  push_mode(std::shared_ptr<DispatchMode>(std::shared_ptr<DispatchMode>{}, &s));
  s.active = true;
}

void ExportTracer::end() {
  State& s = *s_;
  if (!s.active) return;
  pop_mode();
  s.grad.reset();
  set_active_shape_env(s.prev_env);
  s.active = false;
}

namespace {
// torch's advice for a guard on a declared dimension: which dimension, who pinned it, what to change.
// `holds(v)`: whether the guard holds with the symbol at v (the others at their example values); empty
// when the guard involves other symbols. A guard on one symbol gets the range that implies it.
std::string advice(const ExportedProgram::Guard& g, const std::string& sym, const std::string& source, bool spec,
                   const std::function<std::optional<bool>(int64_t)>& holds = {}, int64_t lo = 0, int64_t hi = INT64_MAX) {
  std::ostringstream os;
  const std::string from = g.where.empty() ? "" : " (from " + g.where + ")";
  if (spec) {
    const std::string value = g.text.substr(g.text.find("== ") + 3);
    os << "  - Not all values of " << sym << " = " << source << " are valid because " << sym
       << " was inferred to be a constant (" << value << ")" << from << ".\n"
       << "Suggested fixes:\n  " << sym << " = " << value
       << "   (declare the dimension static: Dim.STATIC or no entry), or keep the size symbolic at that line"
          " (x.shape[d] / sym_size instead of int(...) / size())\n";
    return os.str();
  }
  os << "  - Not all values of " << sym << " = " << source << " in the specified range satisfy the generated guard "
     << g.text << from << ".\n";
  // a bound on the symbol alone: suggest the range that implies it
  const std::string lt = sym + " < ", le = sym + " <= ", gt = " < " + sym, ge = " <= " + sym;
  auto number = [](const std::string& t) -> std::optional<int64_t> {
    try {
      size_t k = 0;
      const int64_t v = std::stoll(t, &k);
      if (k == t.size()) return v;
    } catch (...) {
    }
    return std::nullopt;
  };
  std::optional<std::string> fix;
  if (holds) {  // scan the declared range: the first value where it holds, then the first where it stops
    constexpr int64_t kScan = 1 << 16;
    std::optional<int64_t> first, stop;
    for (int64_t v = lo; v <= hi && v - lo < kScan; ++v) {
      const std::optional<bool> h = holds(v);
      if (!h) break;
      if (*h && !first) first = v;
      if (!*h && first) {
        stop = v;
        break;
      }
    }
    if (first && (*first > lo || stop)) {
      std::string r = "Dim('" + sym + "'";
      if (*first > 0) r += ", min=" + std::to_string(*first);
      if (stop) r += ", max=" + std::to_string(*stop - 1);
      fix = r + ")";
    }
  }
  if (fix) {
    // the scan found it
  } else if (g.text.rfind(le, 0) == 0) {
    if (auto v = number(g.text.substr(le.size()))) fix = "Dim('" + sym + "', max=" + std::to_string(*v) + ")";
  } else if (g.text.rfind(lt, 0) == 0) {
    if (auto v = number(g.text.substr(lt.size()))) fix = "Dim('" + sym + "', max=" + std::to_string(*v - 1) + ")";
  } else if (g.text.size() > ge.size() && g.text.compare(g.text.size() - ge.size(), ge.size(), ge) == 0) {
    if (auto v = number(g.text.substr(0, g.text.size() - ge.size())))
      fix = "Dim('" + sym + "', min=" + std::to_string(*v) + ")";
  } else if (g.text.size() > gt.size() && g.text.compare(g.text.size() - gt.size(), gt.size(), gt) == 0) {
    if (auto v = number(g.text.substr(0, g.text.size() - gt.size())))
      fix = "Dim('" + sym + "', min=" + std::to_string(*v + 1) + ")";
  }
  os << "Suggested fixes:\n  " << sym << " = "
     << (fix ? *fix : "a Dim whose range satisfies " + g.text + ", or Dim.AUTO to let export decide") << "\n";
  return os.str();
}
}  // namespace

std::shared_ptr<ExportedProgram> ExportTracer::finish(const TensorList& outputs) {
  State& s = *s_;
  KILN_CHECK(!s.active, Runtime, kOp, "end() the trace before finish()");
  ExportedProgram& p = *s.prog;
  {
    ShapeEnvGuard active(*s.env);
    for (const Tensor& t : outputs) {
      if (!t.defined()) {
        p.outputs.push_back(-1);
        continue;
      }
      const int found = s.find(t);
      KILN_CHECK(found >= 0 || !t.is_meta(), Runtime, kOp,
                 "an output is a meta tensor the traced call did not make");
      p.outputs.push_back(found >= 0 ? found : s.add_captured(t, Kind::Constant,
                                                                              "lifted_tensor_" + std::to_string(s.n_constants++)));
    }
  }
  // the symbols: declared ones with their ranges, then the data-dependent ones
  for (int i = 0; i < s.env->num_symbols(); ++i) {
    const std::string& name = s.env->symbol_name(i);
    if (i < static_cast<int>(s.decls.size()))
      p.symbols.push_back({name, s.decls[i].min, s.decls[i].max, false});
    else
      p.symbols.push_back({name, 0, INT64_MAX, true});
  }
  std::set<std::string> violated;
  std::string why;
  for (const kiln::Guard& g : s.env->guards()) {
    ExportedProgram::Guard eg{g.text, g.where};
    for (const std::string& name : names_in(g.text)) {
      auto it = std::find_if(s.decls.begin(), s.decls.end(), [&](const State::SymDecl& d) { return d.name == name; });
      if (it == s.decls.end()) continue;
      const bool bad = it->kind == Dim::Kind::Named || (it->kind == Dim::Kind::Dynamic && g.specialization);
      if (bad && violated.insert(name + "|" + g.text).second) {
        std::function<std::optional<bool>(int64_t)> holds;
        std::vector<std::string> names = names_in(g.text);
        const bool one = std::all_of(names.begin(), names.end(), [&](const std::string& x) { return x == name; });
        std::optional<export_detail::ParsedGuard> parsed;
        std::vector<int64_t> values;
        if (one && !g.specialization) {
          try {
            ShapeEnvGuard active(*s.env);
            parsed = export_detail::parse_guard(g.text, s.symbol_by_name);
            for (int i = 0; i < s.env->num_symbols(); ++i) values.push_back(s.env->symbol(i).maybe_hint().value_or(0));
          } catch (const Error&) {
            parsed.reset();
          }
        }
        if (parsed)
          holds = [&, k = it - s.decls.begin()](int64_t v) -> std::optional<bool> {
            try {
              ShapeEnvGuard active(*s.env);
              values[k] = v;
              return export_detail::holds(*parsed, *s.env, values);
            } catch (const Error&) {
              return std::nullopt;
            }
          };
        why += advice(eg, name, it->source, g.specialization, holds, it->min, it->max);
      }
      if (!bad && g.specialization) {  // Dim.AUTO pinned: the range is the one value
        const int64_t v = std::stoll(g.text.substr(g.text.find("== ") + 3));
        ExportedProgram::Symbol& sym = p.symbols[it - s.decls.begin()];
        sym.min = sym.max = v;
      }
    }
    p.guards.push_back(std::move(eg));
  }
  if (!why.empty()) {
    std::set<std::string> names;
    for (const std::string& v : violated) names.insert(v.substr(0, v.find('|')));
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    KILN_FAIL(Runtime, kOp, "Constraints violated (", list, ")!\n", why);
  }
  return s.prog;
}

namespace {
// An error raised because the model read a tensor's data (item(), a branch on a value) gets the reason.
std::string data_dependent_hint(const std::string& what) {
  if (what.find("meta tensor") == std::string::npos) return what;
  return what + "\n[export] The model reads a tensor's value while it is traced (item(), tolist(), bool() of "
                "a tensor, a branch on data). Export records shapes only: compute both branches and select with "
                "kiln::where, or keep the value a tensor.";
}
}  // namespace

std::shared_ptr<ExportedProgram> export_program(const nn::Module& module,
                                                const std::function<TensorList(const TensorList&)>& forward,
                                                const TensorList& example_inputs, const DynamicShapes& dynamic_shapes) {
  KILN_CHECK(dynamic_shapes.empty() || dynamic_shapes.size() == example_inputs.size(), Value, kOp,
             "dynamic_shapes has ", dynamic_shapes.size(), " entries for ", example_inputs.size(), " inputs");
  ExportTracer tr;
  for (const auto& [name, t] : module.named_parameters()) tr.add_state(name, t, Kind::Parameter);
  for (const auto& [name, t] : module.named_buffers()) tr.add_state(name, t, Kind::Buffer);
  TensorList metas;
  for (size_t i = 0; i < example_inputs.size(); ++i)
    metas.push_back(tr.add_input("args_" + std::to_string(i), example_inputs[i],
                                 dynamic_shapes.empty() ? std::map<int64_t, Dim>{} : dynamic_shapes[i]));
  tr.begin();
  TensorList outs;
  try {
    outs = forward(metas);
  } catch (const Error& e) {
    tr.end();
    throw Error(e.kind(), data_dependent_hint(e.what()));
  } catch (...) {
    tr.end();
    throw;
  }
  tr.end();
  return tr.finish(outs);
}

// ---- the program ------------------------------------------------------------------------------------

std::vector<int> ExportedProgram::user_inputs() const {
  std::vector<int> r;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].kind == InputKind::User) r.push_back(static_cast<int>(i));
  return r;
}

const Tensor& ExportedProgram::state_tensor(const std::string& target) const {
  for (const auto& [name, t] : state)
    if (name == target) return t;
  KILN_FAIL(Index, kOp, "no state entry '", target, "'");
}

namespace {
std::string dtype_abbrev(Dtype d) {
  switch (d) {
    case kBool: return "b8";
    case kUInt8: return "u8";
    case kInt8: return "i8";
    case kInt16: return "i16";
    case kUInt16: return "u16";
    case kInt32: return "i32";
    case kUInt32: return "u32";
    case kInt64: return "i64";
    case kUInt64: return "u64";
    case kFloat16: return "f16";
    case kBFloat16: return "bf16";
    case kFloat32: return "f32";
    case kFloat64: return "f64";
    case kComplex64: return "c64";
    case kComplex128: return "c128";
    case kFloat8_e4m3fn: return "f8e4m3fn";
    case kFloat8_e5m2: return "f8e5m2";
    default: return "?";
  }
}
const char* kind_name(ExportedProgram::InputKind k) {
  switch (k) {
    case Kind::Parameter: return "PARAMETER";
    case Kind::Buffer: return "BUFFER";
    case Kind::Constant: return "CONSTANT_TENSOR";
    default: return "USER_INPUT";
  }
}
}  // namespace

std::string ExportedProgram::str() const {
  ShapeEnvGuard active(*env);
  std::ostringstream os;
  auto typed = [&](int v) {
    const Value& x = values[v];
    std::string dims;
    for (size_t i = 0; i < x.sizes.size(); ++i) dims += (i ? ", " : "") + x.sizes[i].str();
    return x.name + ": \"" + dtype_abbrev(x.dtype) + "[" + dims + "]\"";
  };
  os << "ExportedProgram:\n    def forward(self";
  for (const Input& in : inputs) os << ", " << typed(in.value);
  os << "):\n";
  for (const Node& n : nodes) {
    os << "        ";
    if (n.out_given) {
      os << "# writes " << (n.inplace ? "in place" : "out=") << ": ";
      for (size_t i = 0; i < n.out.size(); ++i) os << (i ? ", " : "") << values[n.out[i]].name;
      os << "\n        ";
    } else {
      bool first = true;
      for (int o : n.out) os << (first ? "" : ", ") << (o < 0 ? "_" : typed(o)), first = false;
      os << (n.out.empty() ? "" : " = ");
    }
    const Schema* sch = op_schema(*n.op);
    os << "kiln.ops." << (sch ? sch->qualified_name() : std::string(n.op->name)) << "(";
    bool first = true;
    for (int i : n.in) os << (first ? "" : ", ") << (i < 0 ? std::string("None") : values[i].name), first = false;
    for (const Attr& a : n.attrs) os << (first ? "" : ", ") << attr_str(a), first = false;
    os << ")\n";
  }
  os << "        return (";
  for (size_t i = 0; i < outputs.size(); ++i)
    os << (i ? ", " : "") << (outputs[i] < 0 ? std::string("None") : values[outputs[i]].name);
  os << (outputs.size() == 1 ? ",)" : ")") << "\n\nGraph signature:\n    # inputs\n";
  for (const Input& in : inputs)
    os << "    " << values[in.value].name << ": " << kind_name(in.kind)
       << (in.kind == InputKind::User ? "" : " target='" + in.target + "'") << "\n";
  os << "    # outputs\n";
  for (int o : outputs) os << "    " << (o < 0 ? std::string("None") : values[o].name) << ": USER_OUTPUT\n";
  os << "\nRange constraints: {";
  bool first = true;
  for (const Symbol& s : symbols) {
    os << (first ? "" : ", ") << s.name << ": VR[" << s.min << ", "
       << (s.max == INT64_MAX ? std::string("int_oo") : std::to_string(s.max)) << "]";
    first = false;
  }
  os << "}\n";
  if (!guards.empty()) {
    os << "Guards:";
    for (const Guard& g : guards) os << " " << g.text << ";";
    os << "\n";
  }
  return os.str();
}

// ---- size expressions ---------------------------------------------------------------------------------

namespace export_detail {
namespace {
struct ExprParser {
  const std::string& s;
  const std::map<std::string, SymInt>& symbols;
  size_t i = 0;
  int depth = 0;

  [[noreturn]] void fail(const char* what) {
    KILN_FAIL(Value, kOp, "malformed size expression '", s, "': ", what, " at position ", i);
  }
  void ws() {
    while (i < s.size() && s[i] == ' ') ++i;
  }
  bool eat(const char* t) {
    ws();
    const size_t n = std::char_traits<char>::length(t);
    if (s.compare(i, n, t) == 0) {
      i += n;
      return true;
    }
    return false;
  }
  SymInt sum() {
    if (++depth > 64) fail("nested too deeply");
    SymInt r = eat("-") ? -product() : product();
    for (;;) {
      if (eat("+"))
        r = r + product();
      else if (eat("-"))
        r = r - product();
      else
        break;
    }
    --depth;
    return r;
  }
  SymInt product() {
    SymInt r = factor();
    while (true) {
      ws();
      if (i < s.size() && s[i] == '*') {
        ++i;
        r = r * factor();
      } else {
        break;
      }
    }
    return r;
  }
  SymInt factor() {
    ws();
    if (i >= s.size()) fail("unexpected end");
    const char c = s[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      int64_t v = 0;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s[i] - '0', &v)) fail("number too large");
        ++i;
      }
      return v;
    }
    const bool is_max = eat("max(");
    if (is_max || eat("min(")) {
      SymInt a = sum();
      if (!eat(",")) fail("expected ','");
      SymInt b = sum();
      if (!eat(")")) fail("expected ')'");
      return is_max ? sym_max(a, b) : sym_min(a, b);
    }
    if (eat("(")) {
      SymInt a = sum();
      if (eat("//")) {
        SymInt b = sum();
        if (!eat(")")) fail("expected ')'");
        return a / b;
      }
      if (eat("%")) {
        SymInt b = sum();
        if (!eat(")")) fail("expected ')'");
        return a % b;
      }
      if (!eat(")")) fail("expected ')'");
      return a;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      auto it = symbols.find(s.substr(i, j - i));
      if (it == symbols.end()) fail("unknown symbol");
      i = j;
      return it->second;
    }
    fail("unexpected character");
  }
};
}  // namespace

SymInt parse_sym_expr(const std::string& text, const std::map<std::string, SymInt>& symbols) {
  KILN_CHECK(text.size() <= 4096, Value, kOp, "a size expression of ", text.size(), " characters");
  ExprParser p{text, symbols};
  SymInt r = p.sum();
  p.ws();
  if (p.i != text.size()) p.fail("trailing text");
  return r;
}

ParsedGuard parse_guard(const std::string& text, const std::map<std::string, SymInt>& symbols) {
  static const char* ops[] = {" == ", " != ", " < ", " <= "};
  for (int k : {3, 2, 0, 1}) {
    const size_t at = text.find(ops[k]);
    if (at == std::string::npos) continue;
    const size_t n = std::char_traits<char>::length(ops[k]);
    return {parse_sym_expr(text.substr(0, at), symbols), parse_sym_expr(text.substr(at + n), symbols), k};
  }
  KILN_FAIL(Value, kOp, "malformed guard '", text, "'");
}

bool holds(const ParsedGuard& g, const ShapeEnv& env, const std::vector<int64_t>& values) {
  const int64_t a = env.evaluate(g.lhs, values), b = env.evaluate(g.rhs, values);
  switch (g.cmp) {
    case 0: return a == b;
    case 1: return a != b;
    case 2: return a < b;
    default: return a <= b;
  }
}
}  // namespace export_detail

}  // namespace kiln
