// One generic Python entry for every table op, driven by its schema (dispatch/schema.h):
//   kiln.ops.<op>(*args, **kwargs)   (torch.ops.aten.<op> in spirit)
// Positional and keyword arguments are matched to the schema's arguments in order, defaults come
// from the schema, each value is converted by its argument's type, and the call goes through
// dispatch() like any other: modes, autograd, the interpreter lock released around the kernel.
// `out=` (a tensor, or a tuple for several outputs) makes it an out= call.
#include <Python.h>

#include <cstdlib>

#include "common.h"
#include "kiln/dispatch/schema.h"

namespace kiln::py {
namespace {

[[noreturn]] void type_error(const std::string& msg) { throw nb::type_error(msg.c_str()); }

// A default as written in the schema ("1", "None", "[]", "[0, 1]", "\"none\"", "True") as the Attr
// its argument takes.
Attr parse_default(const SchemaArg& a, const std::string& text, const std::string& op) {
  if (text == "None") return std::monostate{};
  auto number = [&](bool integral) -> Scalar {
    char* end = nullptr;
    if (integral) {
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (end && *end == '\0') return Scalar(static_cast<int64_t>(v));
    }
    double d = std::strtod(text.c_str(), &end);
    KILN_CHECK(end && *end == '\0', Runtime, op.c_str(), "bad default '", text, "' for ", a.name);
    return Scalar(d);
  };
  switch (a.kind) {
    case ArgKind::Int: return number(true).to_int();
    case ArgKind::Float: return number(false).to_double();
    case ArgKind::Bool: return text == "True";
    case ArgKind::Scalar: return number(text.find_first_of(".eE") == std::string::npos);
    case ArgKind::Str: return text.size() >= 2 ? text.substr(1, text.size() - 2) : text;
    case ArgKind::IntList: {
      Shape s;
      std::string body = text.front() == '[' ? text.substr(1, text.size() - 2) : text;
      size_t i = 0;
      while (i < body.size()) {
        size_t j = body.find(',', i);
        if (j == std::string::npos) j = body.size();
        std::string item = body.substr(i, j - i);
        if (item.find_first_not_of(' ') != std::string::npos) s.push_back(std::stoll(item));
        i = j + 1;
      }
      return s;
    }
    case ArgKind::FloatList: return std::vector<double>{};
    default: KILN_FAIL(Runtime, op.c_str(), "no default of type ", a.type, " for ", a.name);
  }
}

Attr convert(const SchemaArg& a, nb::handle v, const std::string& op) {
  if (v.is_none()) {
    if (a.optional) return std::monostate{};
    type_error(op + "(): argument '" + a.name + "' must be " + a.type + ", not None");
  }
  switch (a.kind) {
    case ArgKind::Int:
      if (!PyLong_Check(v.ptr())) type_error(op + "(): argument '" + a.name + "' must be int, not " +
                                            nb::type_name(v.type()).c_str());
      return nb::cast<int64_t>(v);
    case ArgKind::Float: return nb::cast<double>(v);
    case ArgKind::Bool: return nb::cast<bool>(v);
    case ArgKind::Scalar: return as_scalar(v);
    case ArgKind::IntList: return PyLong_Check(v.ptr()) ? Shape{nb::cast<int64_t>(v)} : as_shape(v);
    case ArgKind::FloatList: return nb::cast<std::vector<double>>(v);
    case ArgKind::Str: return nb::cast<std::string>(v);
    case ArgKind::ScalarType: return as_dtype(v);
    case ArgKind::Device: return as_device(v);
    default: type_error(op + "(): argument '" + a.name + "' has an unsupported type " + a.type);
  }
}

void add_tensor(const SchemaArg& a, nb::handle v, const std::string& op, TensorList& in) {
  if (a.kind == ArgKind::Tensor) {
    if (v.is_none()) {
      if (!a.optional) type_error(op + "(): argument '" + a.name + "' must be Tensor, not None");
      in.emplace_back();
    } else {
      in.push_back(as_tensor(v, op.c_str()));
    }
    return;
  }
  if (!nb::isinstance<nb::sequence>(v) || nb::isinstance<Tensor>(v))
    type_error(op + "(): argument '" + a.name + "' must be tuple of Tensors, not " + nb::type_name(v.type()).c_str());
  for (nb::handle t : nb::cast<nb::sequence>(v)) {
    if (t.is_none() && a.optional) in.emplace_back();
    else in.push_back(as_tensor(t, op.c_str()));
  }
}

class OpHandle {
 public:
  explicit OpHandle(const OpDef& op) : op_(&op), schema_(op_schema(op)) {
    KILN_CHECK(schema_ != nullptr, Runtime, op.name, "the op has no schema");
    name_ = schema_->name;
    defaults_.resize(schema_->args.size());
    for (size_t i = 0; i < schema_->args.size(); ++i) {
      const SchemaArg& a = schema_->args[i];
      if (a.default_ && !a.is_tensor()) defaults_[i] = parse_default(a, *a.default_, name_);
    }
  }

  nb::object call(nb::args args, nb::kwargs kwargs) const {
    TensorList in;
    Attrs attrs;
    nb::object out = nb::none();
    size_t pos = 0, used = 0;
    if (kwargs.contains("out")) out = kwargs["out"], ++used;
    const auto& params = schema_->args;
    for (size_t i = 0; i < params.size(); ++i) {
      const SchemaArg& a = params[i];
      nb::handle v;
      bool given = false;
      if (!a.kwarg_only && pos < args.size()) {
        v = args[pos++], given = true;
        if (kwargs.contains(a.name.c_str()))
          type_error(name_ + "(): argument '" + a.name + "' given by name and position");
      } else if (kwargs.contains(a.name.c_str())) {
        v = kwargs[a.name.c_str()], given = true, ++used;
      }
      if (a.is_tensor()) {
        if (given) add_tensor(a, v, name_, in);
        else if (a.default_ || a.optional) { if (!a.is_tensor_list()) in.emplace_back(); }
        else type_error(name_ + "() missing required argument '" + a.name + "' (pos " + std::to_string(i + 1) + ")");
      } else if (given) {
        attrs.push_back(convert(a, v, name_));
      } else if (a.default_) {
        attrs.push_back(defaults_[i]);
      } else {
        type_error(name_ + "() missing required argument '" + a.name + "' (pos " + std::to_string(i + 1) + ")");
      }
    }
    if (pos < args.size())
      type_error(name_ + "() takes " + std::to_string(pos) + " positional arguments but " +
                 std::to_string(args.size()) + " were given");
    if (used < kwargs.size())
      for (auto [k, v] : kwargs) {
        std::string key = nb::cast<std::string>(k);
        bool known = key == "out";
        for (const SchemaArg& a : params) known = known || a.name == key;
        if (!known) type_error(name_ + "() got an unexpected keyword argument '" + key + "'");
      }
    TensorList result;
    if (out.is_none()) {
      result = dispatch(*op_, std::move(in), std::move(attrs));
    } else {
      TensorList outs;
      if (nb::isinstance<Tensor>(out)) outs.push_back(nb::cast<Tensor>(out));
      else
        for (nb::handle t : nb::cast<nb::sequence>(out)) outs.push_back(nb::cast<Tensor>(t));
      result = dispatch(*op_, std::move(in), std::move(attrs), &outs, false);
      if (nb::isinstance<Tensor>(out)) return out;
    }
    if (result.size() == 1) return nb::cast(result[0]);
    nb::list l;
    for (const Tensor& t : result) l.append(nb::cast(t));
    return nb::tuple(l);
  }

  std::string repr() const { return "<kiln op " + schema_->str() + ">"; }
  std::string schema() const { return schema_->str(); }
  std::string op_name() const { return op_->name; }

 private:
  const OpDef* op_;
  const Schema* schema_;
  std::string name_;
  std::vector<Attr> defaults_;
};

}  // namespace

void bind_schema(nb::module_& m) {
  nb::class_<OpHandle>(m, "_Op")
      .def("__call__", &OpHandle::call)
      .def("__repr__", &OpHandle::repr)
      .def_prop_ro("schema", &OpHandle::schema)
      .def_prop_ro("name", &OpHandle::op_name);
  m.def("_op", [](const std::string& name) {
    const OpDef* op = find_op(name);
    if (!op) throw nb::attribute_error(("kiln.ops has no op named '" + name + "'").c_str());
    return OpHandle(*op);
  });
}

}  // namespace kiln::py
