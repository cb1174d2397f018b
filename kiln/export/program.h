// Export: a model traced once on symbolic shapes into a graph of table ops (issue 12; DESIGN.md §1's
// trace mode), saved as a checked archive and run without Python by kiln::runtime.
//
// Tracing runs the model on meta tensors whose sizes are SymInts (kiln/core/symint.h): every op goes
// through dispatch(), the export mode records it as a node (op, input values, attributes, outputs with
// symbolic sizes) and runs its meta only. Parameters, buffers and tensors the model captures become
// graph inputs of their kind. Composite ops are recorded as the table ops they call; LSTM / GRU layers
// and attention are single table ops, so the batch and the sequence length stay symbolic.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/dispatch/op.h"

namespace kiln {
namespace nn {
class Module;
}

// torch.export.Dim: how one dimension of an input may vary.
//   Named (Dim("seq", min, max)): symbolic; export fails when the model needs more than the range.
//   Dynamic (Dim.DYNAMIC): symbolic; export fails only if the model pins it to one value.
//   Auto (Dim.AUTO): symbolic where the model allows, else pinned to the example's size, silently.
//   Static (Dim.STATIC, or no entry): the example's size.
struct Dim {
  enum class Kind : uint8_t { Named, Dynamic, Auto, Static };
  Kind kind = Kind::Static;
  std::string name;
  int64_t min = 0;
  int64_t max = INT64_MAX;

  Dim() = default;
  explicit Dim(std::string n, int64_t lo = 0, int64_t hi = INT64_MAX)
      : kind(Kind::Named), name(std::move(n)), min(lo), max(hi) {}
  static Dim AUTO() { Dim d; d.kind = Kind::Auto; return d; }
  static Dim DYNAMIC() { Dim d; d.kind = Kind::Dynamic; return d; }
  static Dim STATIC() { return Dim(); }
};
// Per user input (in order), per dimension: its Dim; a dimension not named is static.
using DynamicShapes = std::vector<std::map<int64_t, Dim>>;

// The traced program. Sizes are SymInts of `env` (activate it with ShapeEnvGuard to read them; the
// program's methods do so themselves).
struct ExportedProgram {
  enum class InputKind : uint8_t { Parameter, Buffer, Constant, User };
  struct Value {
    std::string name;  // unique in the graph: "x", "p_fc_weight", "linear_1"
    SymShape sizes;
    Dtype dtype = kFloat32;
    bool wrapped = false;  // a Python number (0-dim, promotion category)
  };
  struct Input {
    InputKind kind;
    std::string target;  // the state_dict key (parameter, buffer), constant name, or argument name
    int value;
  };
  struct Node {
    const OpDef* op;
    std::vector<int> in;   // value ids; -1 for an absent optional tensor
    Attrs attrs;           // integer entries may be symbolic (raw SymInts of env)
    std::vector<int> out;  // value ids; -1 for an output the op leaves undefined
    bool out_given = false;  // an in-place / out= call: `out` are values the node writes into
    bool inplace = false;
  };
  struct Symbol {
    std::string name;
    int64_t min, max;  // the values a run may give it (the user's range); max INT64_MAX: unbounded
    bool unbacked = false;  // a size a dynamic-shape op decides at run time
  };
  struct Guard {
    std::string text;   // "seq <= 64": a condition every run must satisfy
    std::string where;  // who asked for it
  };

  std::shared_ptr<ShapeEnv> env;
  std::vector<Symbol> symbols;  // env's symbols, in creation order
  std::vector<Value> values;
  std::vector<Input> inputs;
  std::vector<Node> nodes;
  std::vector<int> outputs;  // value ids (-1: None)
  std::vector<Guard> guards;
  std::vector<std::pair<std::string, Tensor>> state;  // parameters, buffers and lifted constants by target name (CPU tensors)
  // the front end's argument / result structure (Python's pytree specs, as JSON text); opaque here
  std::string in_spec, out_spec;

  // print(ep): the graph as readable text, its signature and its range constraints.
  std::string str() const;
  std::vector<int> user_inputs() const;  // indices into `inputs`
  const Tensor& state_tensor(const std::string& target) const;
};

// Records the graph of one traced call. The front ends (export_program below; Python's
// kiln.export.export) drive it: declare state and inputs, begin(), call the model on the meta inputs,
// end(), then finish() with its outputs.
class ExportTracer {
 public:
  ExportTracer();
  ~ExportTracer();
  ExportTracer(const ExportTracer&) = delete;
  ExportTracer& operator=(const ExportTracer&) = delete;

  ShapeEnv& env();
  // A model tensor that is a graph input of its kind (parameters and buffers, before tracing).
  void add_state(const std::string& target, const Tensor& t, ExportedProgram::InputKind kind);
  // A user input: a meta tensor with the example's dtype and, per dimension, a size made from `dims`
  // (entries missing or Static: the example's size). Returns what the model is called with.
  Tensor add_input(const std::string& name, const Tensor& example, const std::map<int64_t, Dim>& dims);
  void begin();  // the export mode on, grad off, the ShapeEnv active (on this thread)
  void end();
  // The program, once the model returned `outputs`; raises (with advice) when the model needs more of
  // a dimension than its Dim allows.
  std::shared_ptr<ExportedProgram> finish(const TensorList& outputs);

  struct State;

 private:
  std::unique_ptr<State> s_;
};

// The C++ front end: traces `forward` (the module's computation on its inputs) with the module's
// parameters and buffers as graph inputs.
std::shared_ptr<ExportedProgram> export_program(const nn::Module& module,
                                                const std::function<TensorList(const TensorList&)>& forward,
                                                const TensorList& example_inputs,
                                                const DynamicShapes& dynamic_shapes = {});

namespace export_detail {
inline void flatten_into(TensorList& out, const Tensor& t) { out.push_back(t); }
template <class... Ts>
void flatten_into(TensorList& out, const std::tuple<Ts...>& t) {
  std::apply([&](const auto&... x) { (flatten_into(out, x), ...); }, t);
}
template <class M>
TensorList call_forward(M& m, const TensorList& in) {
  TensorList out;
  auto take = [&](auto&& r) { flatten_into(out, r); };
  if constexpr (requires { m.forward(in[0]); }) {
    if (in.size() == 1) return take(m.forward(in[0])), out;
  }
  if constexpr (requires { m.forward(in[0], in[1]); }) {
    if (in.size() == 2) return take(m.forward(in[0], in[1])), out;
  }
  if constexpr (requires { m.forward(in[0], in[1], in[2]); }) {
    if (in.size() == 3) return take(m.forward(in[0], in[1], in[2])), out;
  }
  KILN_FAIL(Type, "export", "the module's forward does not take ", in.size(), " tensors");
}
}  // namespace export_detail

// The same for a module whose forward takes the inputs as tensors (one to three) and returns a tensor
// or (nested) tuples of tensors, which become the program's outputs in order: export_program(model,
// {x}, {{{0, Dim("batch")}}}).
template <class M>
std::shared_ptr<ExportedProgram> export_program(const std::shared_ptr<M>& module, const TensorList& example_inputs,
                                                const DynamicShapes& dynamic_shapes = {}) {
  return export_program(
      *module, [&](const TensorList& in) { return export_detail::call_forward(*module, in); }, example_inputs,
      dynamic_shapes);
}

// The archive (docs/export.md, docs/decisions.md 30): a zip of a version record, the graph as JSON and the weights raw,
// 64-byte aligned, each member CRC-checked; zip64 past 4 GiB. load_program validates everything and maps the weights.
void save_program(const ExportedProgram& ep, const std::string& path);
std::shared_ptr<ExportedProgram> load_program(const std::string& path);
// The same to and from memory (the bytes of an archive).
std::string save_program_bytes(const ExportedProgram& ep);
std::shared_ptr<ExportedProgram> load_program_bytes(std::string bytes);

namespace export_detail {
// A size expression's text ("2*batch*seq + 1", "(seq//2)", "max(a, 1)") back into a SymInt of the
// active env; names resolve through `symbols`. Raises ValueError on malformed text.
SymInt parse_sym_expr(const std::string& text, const std::map<std::string, SymInt>& symbols);
// A guard's text ("seq <= 64") as its two sides and comparison (0 ==, 1 !=, 2 <, 3 <=, 4 >, 5 >=).
struct ParsedGuard {
  SymInt lhs, rhs;
  int cmp;
};
ParsedGuard parse_guard(const std::string& text, const std::map<std::string, SymInt>& symbols);
bool holds(const ParsedGuard& g, const ShapeEnv& env, const std::vector<int64_t>& values);
}  // namespace export_detail

}  // namespace kiln
