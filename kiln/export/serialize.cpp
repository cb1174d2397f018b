// save_program / load_program (program.h): the graph as JSON (schema version 1.0) and the weights as
// raw little-endian members of the archive (archive.h). Loading trusts nothing: every count, string,
// index, dtype, size, op name and attribute is checked before anything is built.
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "kiln/dispatch/schema.h"
#include "kiln/export/archive.h"
#include "kiln/export/program.h"
#include "kiln/core/stream.h"

namespace kiln {
namespace {

using json = nlohmann::json;
using Kind = ExportedProgram::InputKind;
constexpr const char* kOp = "export.load";
constexpr int kSchemaMajor = 1, kSchemaMinor = 0;
constexpr const char* kRoot = "kiln_program/";
constexpr const char* kVersionRecord = "kiln-export 1\n";
constexpr size_t kMaxJson = size_t{1} << 28, kMaxDepth = 64, kMaxCount = size_t{1} << 22, kMaxList = 4096,
                 kMaxString = 4096, kMaxRank = 64;

const char* kind_str(Kind k) {
  switch (k) {
    case Kind::Parameter: return "PARAMETER";
    case Kind::Buffer: return "BUFFER";
    case Kind::Constant: return "CONSTANT_TENSOR";
    default: return "USER_INPUT";
  }
}

std::string hex_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

// A size or an integer attribute: a number, or its expression when it is symbolic.
json size_json(int64_t raw) {
  const SymInt s = SymInt::from_raw(raw);
  if (s.is_symbolic()) return s.str();
  return raw;
}

json attr_json(const Attr& a) {
  json j;
  std::visit(
      [&]<class V>(const V& v) {
        if constexpr (std::is_same_v<V, std::monostate>) {
          j = {{"t", "none"}};
        } else if constexpr (std::is_same_v<V, bool>) {
          j = {{"t", "bool"}, {"v", v}};
        } else if constexpr (std::is_same_v<V, int64_t>) {
          j = {{"t", "int"}, {"v", size_json(v)}};
        } else if constexpr (std::is_same_v<V, double>) {
          j = {{"t", "float"}, {"v", hex_double(v)}};
        } else if constexpr (std::is_same_v<V, Scalar>) {
          switch (v.tag()) {
            case Scalar::Tag::Bool: j = {{"t", "scalar_bool"}, {"v", v.template to<bool>()}}; break;
            case Scalar::Tag::Int: j = {{"t", "scalar_int"}, {"v", size_json(v.to_int())}}; break;
            case Scalar::Tag::UInt: j = {{"t", "scalar_uint"}, {"v", std::to_string(v.template to<uint64_t>())}}; break;
            case Scalar::Tag::Double: j = {{"t", "scalar_float"}, {"v", hex_double(v.to_double())}}; break;
            case Scalar::Tag::Complex:
              j = {{"t", "scalar_complex"}, {"v", {hex_double(v.to_complex().real()), hex_double(v.to_complex().imag())}}};
              break;
          }
        } else if constexpr (std::is_same_v<V, Shape>) {
          json l = json::array();
          for (int64_t x : v) l.push_back(size_json(x));
          j = {{"t", "ints"}, {"v", l}};
        } else if constexpr (std::is_same_v<V, Dtype>) {
          j = {{"t", "dtype"}, {"v", std::string(dtype_name(v))}};
        } else if constexpr (std::is_same_v<V, std::string>) {
          j = {{"t", "str"}, {"v", v}};
        } else if constexpr (std::is_same_v<V, std::vector<double>>) {
          json l = json::array();
          for (double x : v) l.push_back(hex_double(x));
          j = {{"t", "floats"}, {"v", l}};
        } else if constexpr (std::is_same_v<V, Device>) {
          j = {{"t", "device"}, {"v", device_str(v)}};
        }
      },
      a);
  return j;
}

std::string qualified(const OpDef& op) {
  const Schema* s = op_schema(op);
  return s ? s->qualified_name() : std::string(op.name);
}

}  // namespace

namespace {
void write_program(const ExportedProgram& ep, archive::Writer& w) {
  ShapeEnvGuard active(*ep.env);
  json j;
  j["schema_version"] = {kSchemaMajor, kSchemaMinor};
  json syms = json::array();
  for (const auto& s : ep.symbols)
    syms.push_back({{"name", s.name}, {"min", s.min}, {"max", s.max == INT64_MAX ? json(nullptr) : json(s.max)},
                    {"unbacked", s.unbacked}});
  j["symbols"] = syms;
  json values = json::array();
  for (const auto& v : ep.values) {
    json sizes = json::array();
    for (SymInt s : v.sizes) sizes.push_back(size_json(s.raw()));
    values.push_back({{"name", v.name}, {"sizes", sizes}, {"dtype", std::string(dtype_name(v.dtype))}, {"wrapped", v.wrapped}});
  }
  j["values"] = values;
  json inputs = json::array();
  for (const auto& in : ep.inputs) inputs.push_back({{"kind", kind_str(in.kind)}, {"target", in.target}, {"value", in.value}});
  j["inputs"] = inputs;
  json nodes = json::array();
  for (const auto& n : ep.nodes) {
    json attrs = json::array();
    for (const Attr& a : n.attrs) attrs.push_back(attr_json(a));
    nodes.push_back({{"op", qualified(*n.op)}, {"in", n.in}, {"attrs", attrs}, {"out", n.out},
                     {"out_given", n.out_given}, {"inplace", n.inplace}});
  }
  j["nodes"] = nodes;
  j["outputs"] = ep.outputs;
  json guards = json::array();
  for (const auto& g : ep.guards) guards.push_back({{"text", g.text}, {"where", g.where}});
  j["guards"] = guards;
  j["in_spec"] = ep.in_spec;
  j["out_spec"] = ep.out_spec;
  w.add(std::string(kRoot) + "version", kVersionRecord);
  json state = json::array();
  std::vector<Tensor> contiguous;
  for (size_t i = 0; i < ep.state.size(); ++i) {
    const auto& [name, t] = ep.state[i];
    contiguous.push_back(t.contiguous());
    state.push_back({{"name", name}, {"dtype", std::string(dtype_name(t.dtype()))}, {"sizes", t.sizes()},
                     {"member", "data/" + std::to_string(i)}, {"nbytes", t.numel() * static_cast<int64_t>(t.itemsize())}});
  }
  j["state"] = state;
  w.add(std::string(kRoot) + "model.json", j.dump(1));
  stream_detail::before_host_read();
  for (size_t i = 0; i < contiguous.size(); ++i)
    w.add(std::string(kRoot) + "data/" + std::to_string(i), contiguous[i].data_ptr(),
          static_cast<size_t>(contiguous[i].numel()) * contiguous[i].itemsize());
}
}  // namespace

std::string save_program_bytes(const ExportedProgram& ep) {
  archive::Writer w;
  write_program(ep, w);
  return w.finish();
}

void save_program(const ExportedProgram& ep, const std::string& path) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  KILN_CHECK(f.good(), Runtime, "export.save", "cannot write '", path, "'");
  archive::Writer w(&f);  // streamed: the weights go from the tensors to the file
  write_program(ep, w);
  w.finish();
  f.close();
  KILN_CHECK(f.good(), Runtime, "export.save", "writing '", path, "' failed");
}

// ---- loading ----------------------------------------------------------------------------------------

namespace {

struct Loader {
  std::string what;  // the archive's name, for errors
  std::shared_ptr<ExportedProgram> p = std::make_shared<ExportedProgram>();
  std::map<std::string, SymInt> symbol_by_name;

  [[noreturn]] void bad(const std::string& where, const std::string& why) const {
    KILN_FAIL(Runtime, kOp, "'", what, "': ", where, ": ", why);
  }
  const json& field(const json& j, const char* key, json::value_t type, const std::string& where) const {
    if (!j.is_object()) bad(where, "expected an object");
    auto it = j.find(key);
    if (it == j.end()) bad(where, std::string("missing '") + key + "'");
    const bool ok = type == json::value_t::number_integer
                        ? it->is_number_integer()
                        : type == json::value_t::number_unsigned ? it->is_number_unsigned() : it->type() == type;
    if (!ok) bad(where, std::string("'") + key + "' has the wrong type");
    return *it;
  }
  const json& list(const json& j, const char* key, const std::string& where, size_t max) const {
    const json& l = field(j, key, json::value_t::array, where);
    if (l.size() > max) bad(where, std::string("'") + key + "' has " + std::to_string(l.size()) + " entries");
    return l;
  }
  std::string str(const json& j, const char* key, const std::string& where) const {
    const std::string s = field(j, key, json::value_t::string, where).get<std::string>();
    if (s.size() > kMaxString) bad(where, std::string("'") + key + "' is too long");
    return s;
  }
  int64_t integer(const json& j, const std::string& where) const {
    if (!j.is_number_integer()) bad(where, "expected an integer");
    if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) bad(where, "integer out of range");
    return j.get<int64_t>();
  }
  int64_t integer(const json& j, const char* key, const std::string& where) const {
    if (!j.is_object() || !j.contains(key)) bad(where, std::string("missing '") + key + "'");
    return integer(j[key], where + "." + key);
  }
  bool boolean(const json& j, const char* key, const std::string& where) const {
    return field(j, key, json::value_t::boolean, where).get<bool>();
  }
  Dtype dtype(const std::string& name, const std::string& where) const {
    for (int i = 0; i < kNumDtypes; ++i)
      if (dtype_name(static_cast<Dtype>(i)) == name) return static_cast<Dtype>(i);
    bad(where, "unknown dtype '" + name + "'");
  }
  // a size: an integer or an expression over the program's symbols
  SymInt size(const json& j, const std::string& where) const {
    if (j.is_string()) {
      const std::string s = j.get<std::string>();
      if (s.size() > kMaxString) bad(where, "expression too long");
      try {
        return export_detail::parse_sym_expr(s, symbol_by_name);
      } catch (const Error& e) {
        bad(where, e.what());
      }
    }
    return integer(j, where);
  }
  double real(const json& j, const std::string& where) const {
    if (!j.is_string()) bad(where, "expected a float as a hex string");
    const std::string s = j.get<std::string>();
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || s.size() > 64 || end != s.c_str() + s.size()) bad(where, "malformed float '" + s + "'");
    return v;
  }

  Attr attr(const json& j, const std::string& where) const {
    const std::string t = str(j, "t", where);
    if (t == "none") return std::monostate{};
    if (!j.contains("v")) bad(where, "missing 'v'");
    const json& v = j["v"];
    if (t == "bool" || t == "scalar_bool") {
      if (!v.is_boolean()) bad(where, "expected a bool");
      return t == "bool" ? Attr(v.get<bool>()) : Attr(Scalar(v.get<bool>()));
    }
    if (t == "int") return size(v, where).raw();
    if (t == "scalar_int") return Scalar(size(v, where).raw());
    if (t == "scalar_uint") {
      if (!v.is_string()) bad(where, "expected a string");
      const std::string s = v.get<std::string>();
      char* end = nullptr;
      errno = 0;
      const unsigned long long u = std::strtoull(s.c_str(), &end, 10);
      if (s.empty() || s.size() > 24 || errno || end != s.c_str() + s.size() || !std::isdigit(static_cast<unsigned char>(s[0])))
        bad(where, "malformed unsigned integer");
      return Scalar(static_cast<uint64_t>(u));
    }
    if (t == "float") return real(v, where);
    if (t == "scalar_float") return Scalar(real(v, where));
    if (t == "scalar_complex") {
      if (!v.is_array() || v.size() != 2) bad(where, "expected [real, imag]");
      return Scalar(std::complex<double>(real(v[0], where), real(v[1], where)));
    }
    if (t == "ints") {
      if (!v.is_array() || v.size() > kMaxList) bad(where, "expected a bounded list");
      Shape s;
      for (const json& x : v) s.push_back(size(x, where).raw());
      return s;
    }
    if (t == "floats") {
      if (!v.is_array() || v.size() > kMaxList) bad(where, "expected a bounded list");
      std::vector<double> d;
      for (const json& x : v) d.push_back(real(x, where));
      return d;
    }
    if (t == "dtype") {
      if (!v.is_string()) bad(where, "expected a dtype name");
      return dtype(v.get<std::string>(), where);
    }
    if (t == "str") {
      if (!v.is_string() || v.get<std::string>().size() > kMaxString) bad(where, "expected a bounded string");
      return v.get<std::string>();
    }
    if (t == "device") {
      if (!v.is_string() || v.get<std::string>().size() > 64) bad(where, "expected a device");
      std::optional<Device> d;
      try {
        d = parse_device(v.get<std::string>());
      } catch (const Error& e) {
        bad(where, e.what());
      }
      if (d->type != DeviceType::CPU) bad(where, "a program runs on the CPU, not " + v.get<std::string>());
      return *d;
    }
    bad(where, "unknown attribute type '" + t + "'");
  }

  // JSON nesting depth, counted before parsing (the parser recurses)
  void check_depth(const uint8_t* s, size_t n) const {
    size_t depth = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; ++i) {
      const uint8_t c = s[i];
      if (in_str) {
        if (c == '\\') ++i;
        else if (c == '"') in_str = false;
      } else if (c == '"') {
        in_str = true;
      } else if (c == '[' || c == '{') {
        if (++depth > kMaxDepth) bad("model.json", "nested too deeply");
      } else if (c == ']' || c == '}') {
        if (depth > 0) --depth;
      }
    }
  }

  void build(const std::vector<archive::Member>& members, const std::shared_ptr<archive::Blob>& blob) {
    std::map<std::string, const archive::Member*> by_name;
    for (const archive::Member& m : members) by_name[m.name] = &m;
    auto member = [&](const std::string& name) -> const archive::Member& {
      auto it = by_name.find(kRoot + name);
      if (it == by_name.end()) bad("archive", "missing member '" + name + "'");
      return *it->second;
    };
    const archive::Member& version = member("version");
    if (std::string(reinterpret_cast<const char*>(version.data), version.size) != kVersionRecord)
      bad("version", "not a kiln export archive (version record)");
    const archive::Member& model = member("model.json");
    if (model.size > kMaxJson) bad("model.json", "too large");
    check_depth(model.data, model.size);
    json j;
    try {
      j = json::parse(model.data, model.data + model.size);
    } catch (const json::exception& e) {
      bad("model.json", e.what());
    }
    if (!j.is_object()) bad("model.json", "expected an object");
    const json& ver = list(j, "schema_version", "model.json", 2);
    if (ver.size() != 2) bad("schema_version", "expected [major, minor]");
    const int64_t major = integer(ver[0], "schema_version");
    if (major != kSchemaMajor)
      bad("schema_version", "schema major version " + std::to_string(major) + " is not " + std::to_string(kSchemaMajor) +
                                " (the archive was written by an incompatible kiln)");
    ExportedProgram& ep = *p;
    ep.env = std::make_shared<ShapeEnv>();
    ShapeEnvGuard active(*ep.env);

    // symbols
    for (const json& s : list(j, "symbols", "model.json", kMaxList)) {
      const std::string where = "symbol " + std::to_string(ep.symbols.size());
      ExportedProgram::Symbol sym;
      sym.name = str(s, "name", where);
      if (sym.name.empty() || sym.name == "max" || sym.name == "min" || !(std::isalpha(static_cast<unsigned char>(sym.name[0])) || sym.name[0] == '_'))
        bad(where, "bad symbol name");
      for (char c : sym.name)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) bad(where, "bad symbol name");
      if (symbol_by_name.count(sym.name)) bad(where, "duplicate symbol " + sym.name);
      sym.min = integer(s, "min", where);
      sym.max = s.contains("max") && s["max"].is_null() ? INT64_MAX : integer(s, "max", where);
      sym.unbacked = boolean(s, "unbacked", where);
      if (sym.min < 0 || sym.min > sym.max) bad(where, "empty or negative range");
      // traced as >= 2, as the exporter did (sizes 0 and 1 are broadcasting's special cases)
      const int64_t lo = std::max<int64_t>(sym.min, 2), hi = std::max(sym.max, lo);
      const SymInt v = sym.unbacked ? ep.env->create_unbacked(0, INT64_MAX) : ep.env->create_symbol(sym.name, lo, lo, std::max(hi, lo + 1));
      symbol_by_name[sym.name] = v;
      ep.symbols.push_back(std::move(sym));
    }
    // values
    std::set<std::string> value_names;
    for (const json& v : list(j, "values", "model.json", kMaxCount)) {
      const std::string where = "value " + std::to_string(ep.values.size());
      ExportedProgram::Value val;
      val.name = str(v, "name", where);
      if (val.name.empty() || !value_names.insert(val.name).second) bad(where, "empty or duplicate name");
      for (const json& s : list(v, "sizes", where, kMaxRank)) {
        val.sizes.push_back(size(s, where));
        if (!val.sizes.back().is_symbolic() && val.sizes.back().raw() < 0) bad(where, "negative size");
      }
      val.dtype = dtype(str(v, "dtype", where), where);
      val.wrapped = boolean(v, "wrapped", where);
      if (val.wrapped && !val.sizes.empty()) bad(where, "a wrapped number has dimensions");
      ep.values.push_back(std::move(val));
    }
    const int nv = static_cast<int>(ep.values.size());
    std::vector<bool> defined(nv, false);
    auto value_id = [&](const json& x, const std::string& where, bool allow_none) {
      const int64_t id = integer(x, where);
      if (id == -1 && allow_none) return -1;
      if (id < 0 || id >= nv) bad(where, "value index " + std::to_string(id) + " out of range");
      return static_cast<int>(id);
    };
    // state: sizes, dtypes, byte counts against the members
    std::map<std::string, Tensor> state;
    std::set<std::string> used_members = {std::string(kRoot) + "version", std::string(kRoot) + "model.json"};
    for (const json& s : list(j, "state", "model.json", kMaxCount)) {
      const std::string where = "state " + std::to_string(ep.state.size());
      const std::string name = str(s, "name", where);
      if (name.empty() || state.count(name)) bad(where, "empty or duplicate name");
      const Dtype dt = dtype(str(s, "dtype", where), where);
      Shape sizes;
      for (const json& x : list(s, "sizes", where, kMaxRank)) {
        sizes.push_back(integer(x, where));
        if (sizes.back() < 0) bad(where, "negative size");
      }
      size_t nbytes;
      try {
        nbytes = storage_bytes_for(sizes, itemsize(dt));
      } catch (const Error&) {
        bad(where, "its size overflows");
      }
      const std::string mem = str(s, "member", where);
      if (integer(s, "nbytes", where) != static_cast<int64_t>(nbytes)) bad(where, "nbytes does not match sizes and dtype");
      const archive::Member& m = member(mem);
      if (!used_members.insert(m.name).second) bad(where, "member used twice");
      if (m.size != nbytes) bad(where, "member " + mem + " has " + std::to_string(m.size) + " bytes, expected " + std::to_string(nbytes));
      auto* keep = new std::shared_ptr<archive::Blob>(blob);
      Tensor t = from_blob(m.data, sizes, {}, dt, [](void*, size_t, void* ctx) { delete static_cast<std::shared_ptr<archive::Blob>*>(ctx); },
                           keep, std::max<size_t>(nbytes, 1));
      state[name] = t;
      ep.state.emplace_back(name, t);
    }
    if (used_members.size() != members.size()) bad("archive", "members that no entry uses");
    // inputs
    std::set<std::string> targets;
    for (const json& in : list(j, "inputs", "model.json", kMaxCount)) {
      const std::string where = "input " + std::to_string(ep.inputs.size());
      const std::string kind = str(in, "kind", where);
      ExportedProgram::Input x{Kind::User, str(in, "target", where), value_id(in["value"], where, false)};
      if (kind == "PARAMETER") x.kind = Kind::Parameter;
      else if (kind == "BUFFER") x.kind = Kind::Buffer;
      else if (kind == "CONSTANT_TENSOR") x.kind = Kind::Constant;
      else if (kind != "USER_INPUT") bad(where, "unknown kind '" + kind + "'");
      if (defined[x.value]) bad(where, "value defined twice");
      defined[x.value] = true;
      const ExportedProgram::Value& v = ep.values[x.value];
      if (x.kind != Kind::User) {
        auto it = state.find(x.target);
        if (it == state.end()) bad(where, "no state entry '" + x.target + "'");
        if (!targets.insert(x.target).second) bad(where, "state entry used twice");
        const Tensor& t = it->second;
        bool same = t.dtype() == v.dtype && static_cast<size_t>(t.dim()) == v.sizes.size();
        for (size_t d = 0; same && d < v.sizes.size(); ++d) same = !v.sizes[d].is_symbolic() && v.sizes[d].raw() == t.sizes()[d];
        if (!same) bad(where, "the state tensor's sizes or dtype differ from its value's");
        if (v.wrapped) t.impl()->wrapped_number = true;
      }
      ep.inputs.push_back(std::move(x));
    }
    if (targets.size() != state.size()) bad("state", "entries that no input uses");
    // nodes: known ops, arguments that fit the schema, every value defined before use and once
    Tensor placeholder = make_tensor(Shape{}, kFloat32, kMeta);
    for (const json& n : list(j, "nodes", "model.json", kMaxCount)) {
      const std::string where = "node " + std::to_string(ep.nodes.size());
      ExportedProgram::Node node;
      const std::string op = str(n, "op", where);
      node.op = find_program_op(op);
      if (!node.op) bad(where, "unknown op '" + op + "'");
      node.out_given = boolean(n, "out_given", where);
      node.inplace = boolean(n, "inplace", where);
      if (node.inplace && !node.out_given) bad(where, "in place without targets");
      TensorList dummies;
      for (const json& x : list(n, "in", where, kMaxList)) {
        const int id = value_id(x, where + " input", true);
        if (id >= 0 && !defined[id]) bad(where, "input " + ep.values[id].name + " used before it is defined");
        node.in.push_back(id);
        dummies.push_back(id >= 0 ? placeholder : Tensor());
      }
      for (const json& a : list(n, "attrs", where, 256)) node.attrs.push_back(attr(a, where + " attribute"));
      if (const Schema* sch = op_schema(*node.op)) {
        const std::string why = schema_mismatch(*sch, dummies, node.attrs);
        if (!why.empty()) bad(where, op + ": " + why);
      }
      for (const json& x : list(n, "out", where, kMaxList)) {
        const int id = value_id(x, where + " output", !node.out_given);
        if (id >= 0) {
          if (node.out_given != defined[id]) bad(where, node.out_given ? "writes an undefined value" : "redefines " + ep.values[id].name);
          defined[id] = true;
        }
        node.out.push_back(id);
      }
      ep.nodes.push_back(std::move(node));
    }
    for (int v = 0; v < nv; ++v)
      if (!defined[v]) bad("value " + ep.values[v].name, "never defined");
    for (const json& x : list(j, "outputs", "model.json", kMaxList)) ep.outputs.push_back(value_id(x, "outputs", true));
    for (const json& g : list(j, "guards", "model.json", kMaxCount)) {
      ExportedProgram::Guard guard{str(g, "text", "guard"), str(g, "where", "guard")};
      try {
        export_detail::parse_guard(guard.text, symbol_by_name);
      } catch (const Error& e) {
        bad("guard", e.what());
      }
      ep.guards.push_back(std::move(guard));
    }
    ep.in_spec = field(j, "in_spec", json::value_t::string, "model.json").get<std::string>();
    ep.out_spec = field(j, "out_spec", json::value_t::string, "model.json").get<std::string>();
    if (ep.in_spec.size() > kMaxJson / 16 || ep.out_spec.size() > kMaxJson / 16) bad("model.json", "specs too long");
  }

  // Ops by their serialised name ("add.Tensor"), built once.
  static const OpDef* find_program_op(const std::string& name) {
    static const std::map<std::string, const OpDef*> table = [] {
      std::map<std::string, const OpDef*> t;
      for (const OpDef* op : registered_ops()) t.emplace(qualified(*op), op);
      return t;
    }();
    auto it = table.find(name);
    return it == table.end() ? nullptr : it->second;
  }
};

std::shared_ptr<ExportedProgram> load_blob(const std::shared_ptr<archive::Blob>& blob, const std::string& what) {
  Loader l{what};
  l.build(archive::read(*blob, what), blob);
  return l.p;
}
}  // namespace

std::shared_ptr<ExportedProgram> load_program(const std::string& path) {
  return load_blob(archive::Blob::map_file(path), path);
}
std::shared_ptr<ExportedProgram> load_program_bytes(std::string bytes) {
  return load_blob(archive::Blob::copy(bytes), "<bytes>");
}

}  // namespace kiln
