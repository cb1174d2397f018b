#include "kiln/dispatch/schema.h"

#include <cctype>
#include <cstdio>
#include <sstream>

#include "kiln/core/error.h"

namespace kiln {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Schema parse() {
    Schema sc;
    sc.name = ident("op name");
    if (eat('.')) sc.overload = ident("overload name");
    expect('(');
    bool kw = false;
    skip();
    if (!peek(')')) {
      for (;;) {
        skip();
        if (eat('*')) {
          kw = true;
        } else {
          SchemaArg a;
          a.type = type();
          a.list_size = last_list_size_;
          a.name = ident("argument name");
          skip();
          if (eat('=')) a.default_ = value();
          a.kwarg_only = kw;
          classify(a);
          for (const SchemaArg& b : sc.args)
            if (b.name == a.name) fail("argument '" + a.name + "' appears twice");
          sc.args.push_back(std::move(a));
        }
        skip();
        if (eat(',')) continue;
        break;
      }
    }
    expect(')');
    expect('-');
    expect('>');
    skip();
    if (eat('(')) {
      skip();
      while (!peek(')')) {
        sc.returns.push_back(type());
        skip();
        sc.return_names.emplace_back();
        if (!peek(',') && !peek(')')) sc.return_names.back() = ident("return name");  // (Tensor values, ...)
        skip();
        if (!eat(',')) break;
      }
      expect(')');
    } else {
      sc.returns.push_back(type());
      sc.return_names.emplace_back();
    }
    skip();
    if (i_ != s_.size()) fail("unexpected text after the returns");
    size_t seen = 0;
    for (const SchemaArg& a : sc.args) {
      if (a.is_tensor_list()) {
        if (sc.has_list) fail("more than one Tensor[] argument");
        sc.has_list = true;
      } else if (a.is_tensor()) {
        ++sc.max_inputs;
        if (!a.optional) sc.min_inputs = sc.max_inputs;
      } else {
        ++seen;
        if (!a.default_) sc.min_attrs = seen;
      }
    }
    sc.max_attrs = seen;
    if (sc.has_list) sc.min_inputs = sc.max_inputs, sc.max_inputs = SIZE_MAX;
    return sc;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    KILN_FAIL(Value, "schema", why, " at position ", i_, " of \"", std::string(s_), "\"");
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool peek(char c) {
    skip();
    return i_ < s_.size() && s_[i_] == c;
  }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++i_;
    return true;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  std::string ident(const char* what) {
    skip();
    size_t b = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
    if (b == i_) fail(std::string("expected ") + what);
    return std::string(s_.substr(b, i_ - b));
  }
  // Tensor, Tensor?, Tensor(a!), int[], int[2], float[]?, ScalarType?, Tensor?[]
  std::string type() {
    std::string t = ident("a type");
    if (peek('(')) {  // alias annotation, e.g. Tensor(a!): the op writes that argument
      while (i_ < s_.size() && s_[i_] != ')') ++i_;
      expect(')');
    }
    if (eat('?')) t += '?';  // Tensor?[]: a list of optional tensors
    last_list_size_ = 0;
    if (eat('[')) {
      skip();
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_])))
        last_list_size_ = last_list_size_ * 10 + (s_[i_++] - '0');
      expect(']');
      t += "[]";
      if (eat('?')) t += '?';
    }
    return t;
  }
  // A default value: everything up to the next ',' or ')' outside brackets and quotes.
  std::string value() {
    skip();
    size_t b = i_;
    int depth = 0;
    char quote = 0;
    for (; i_ < s_.size(); ++i_) {
      char c = s_[i_];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '[' || c == '(') {
        ++depth;
      } else if (c == ']' || (c == ')' && depth > 0)) {
        --depth;
      } else if ((c == ',' || c == ')') && depth == 0) {
        break;
      }
    }
    std::string v(s_.substr(b, i_ - b));
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
    if (v.empty()) fail("expected a default value");
    return v;
  }

  void classify(SchemaArg& a) {
    std::string t = a.type;
    if (t == "Tensor?[]") {
      a.kind = ArgKind::TensorList, a.optional = true;
      return;
    }
    if (!t.empty() && t.back() == '?') a.optional = true, t.pop_back();
    static const std::pair<const char*, ArgKind> kinds[] = {
        {"Tensor", ArgKind::Tensor}, {"Tensor[]", ArgKind::TensorList}, {"int", ArgKind::Int},
        {"SymInt", ArgKind::Int}, {"float", ArgKind::Float}, {"bool", ArgKind::Bool},
        {"Scalar", ArgKind::Scalar}, {"int[]", ArgKind::IntList}, {"SymInt[]", ArgKind::IntList},
        {"float[]", ArgKind::FloatList}, {"str", ArgKind::Str}, {"ScalarType", ArgKind::ScalarType},
        {"Device", ArgKind::Device}, {"Generator", ArgKind::Generator}};
    for (const auto& [name, kind] : kinds)
      if (t == name) {
        a.kind = kind;
        return;
      }
    fail("unknown type '" + a.type + "'");
  }

  std::string_view s_;
  size_t i_ = 0;
  int last_list_size_ = 0;  // N of the last type() read as T[N]
};

}  // namespace

Schema parse_schema(std::string_view text) { return Parser(text).parse(); }

std::string Schema::str() const {
  std::string s = qualified_name() + "(";
  bool kw = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const SchemaArg& a = args[i];
    if (i) s += ", ";
    if (a.kwarg_only && !kw) {
      s += "*, ";
      kw = true;
    }
    s += a.type + " " + a.name;
    if (a.default_) s += "=" + *a.default_;
  }
  s += ") -> ";
  if (returns.size() == 1) return s + returns[0];
  s += "(";
  for (size_t i = 0; i < returns.size(); ++i) {
    s += (i ? ", " : "") + returns[i];
    if (i < return_names.size() && !return_names[i].empty()) s += " " + return_names[i];
  }
  return s + ")";
}

namespace {
// Whether an attribute value fits a (non-tensor) argument.
bool fits(const SchemaArg& a, const Attr& v) {
  if (std::holds_alternative<std::monostate>(v)) return a.optional;
  switch (a.kind) {
    case ArgKind::Int: return std::holds_alternative<int64_t>(v);
    case ArgKind::Float: return std::holds_alternative<double>(v);
    case ArgKind::Bool: return std::holds_alternative<bool>(v);
    case ArgKind::Scalar: return std::holds_alternative<Scalar>(v);
    case ArgKind::IntList: return std::holds_alternative<Shape>(v);
    case ArgKind::FloatList: return std::holds_alternative<std::vector<double>>(v);
    case ArgKind::Str: return std::holds_alternative<std::string>(v);
    case ArgKind::ScalarType: return std::holds_alternative<Dtype>(v);
    case ArgKind::Device: return std::holds_alternative<Device>(v);
    case ArgKind::Generator: return std::holds_alternative<int64_t>(v);
    default: return false;
  }
}
std::string range(size_t lo, size_t hi) {
  if (hi == SIZE_MAX) return std::to_string(lo) + " or more";
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi);
}
}  // namespace

const char* attr_type_name(const Attr& a) {
  static const char* names[] = {"None", "bool", "int", "float", "Scalar", "int[]", "ScalarType", "str", "float[]", "Device"};
  return names[a.index()];
}

std::string attr_str(const Attr& a) {
  std::ostringstream os;
  auto num = [&](double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    os << buf;
  };
  auto size = [&](int64_t v) {  // a size in a trace may be an expression of the active ShapeEnv
    const SymInt s = SymInt::from_raw(v);
    if (s.is_symbolic() && active_shape_env())
      os << s.str();
    else
      os << v;
  };
  std::visit(
      [&]<class V>(const V& v) {
        if constexpr (std::is_same_v<V, std::monostate>) {
          os << "None";
        } else if constexpr (std::is_same_v<V, bool>) {
          os << (v ? "True" : "False");
        } else if constexpr (std::is_same_v<V, int64_t>) {
          size(v);
        } else if constexpr (std::is_same_v<V, double>) {
          num(v);
        } else if constexpr (std::is_same_v<V, Scalar>) {
          if (v.tag() == Scalar::Tag::Int)
            size(v.to_int());
          else
            os << v;
        } else if constexpr (std::is_same_v<V, Shape>) {
          os << "[";
          for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : ""), size(v[i]);
          os << "]";
        } else if constexpr (std::is_same_v<V, Dtype>) {
          os << "kiln." << dtype_name(v);
        } else if constexpr (std::is_same_v<V, std::string>) {
          os << '"' << v << '"';
        } else if constexpr (std::is_same_v<V, std::vector<double>>) {
          os << "[";
          for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : ""), num(v[i]);
          os << "]";
        } else if constexpr (std::is_same_v<V, Device>) {
          os << '"' << device_str(v) << '"';
        }
      },
      a);
  return os.str();
}

std::string schema_mismatch(const Schema& schema, const TensorList& inputs, const Attrs& attrs) {
  if (inputs.size() < schema.min_inputs || inputs.size() > schema.max_inputs)
    return "expected " + range(schema.min_inputs, schema.max_inputs) + " tensor inputs, got " +
           std::to_string(inputs.size());
  if (attrs.size() < schema.min_attrs || attrs.size() > schema.max_attrs)
    return "expected " + range(schema.min_attrs, schema.max_attrs) + " attributes, got " +
           std::to_string(attrs.size());
  const size_t non_list = schema.has_list ? schema.min_inputs : 0;  // the other tensor arguments
  size_t t = 0, k = 0, tensor_args = 0;
  for (const SchemaArg& a : schema.args) {
    if (a.is_tensor_list()) {  // takes what the later tensor arguments leave
      t = inputs.size() - (non_list - tensor_args);
      continue;
    }
    if (a.is_tensor()) {
      if (t < inputs.size() && !a.optional && !inputs[t].defined())
        return "input '" + a.name + "' is undefined (not Tensor?)";
      ++t, ++tensor_args;
      continue;
    }
    if (k == attrs.size()) break;  // the rest take their defaults
    if (!fits(a, attrs[k]))
      return "attribute '" + a.name + "' should be " + a.type + ", got " + attr_type_name(attrs[k]);
    ++k;
  }
  return "";
}

}  // namespace kiln
