// Python callables made from op schemas (dispatch/schema.h): one generic argument parser for every
// table op, and the public functions, methods, in-place methods and out= variants built from it.
//   kiln.ops.<op>(*args, **kwargs)        any table op by its schema (torch.ops.aten in spirit)
//   kiln.exp / Tensor.exp / Tensor.exp_   the public names of an op that declares its variants
// Positional and keyword arguments are matched to the schema's arguments in order, defaults come
// from the schema, each value is converted by its argument's type, and the call goes through
// dispatch() like any other: modes, autograd, the interpreter lock released around the kernel.
// `out=` (a tensor, or a tuple for several outputs) makes it an out= call.
//
// The callable is a plain CPython type with vectorcall and the method-descriptor flag, so
// `kiln.exp(x)` and `x.exp()` reach the parser with no bound-method object and no keyword dict; a
// tensor argument is recognised by its type pointer before anything else is tried.
#include <Python.h>
#include <structmember.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include "common.h"
#include "kiln/core/generator.h"
#include "kiln/dispatch/schema.h"
#include "kiln/ops/composite.h"

namespace kiln::py {
namespace {

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

// The error a wrongly typed argument raises, in torch's words:
//   exp(): argument 'input' (position 1) must be Tensor, not str
[[noreturn]] void bad_type(const std::string& fn, const std::string& arg, int pos, const char* want, PyObject* v) {
  std::string msg = fn + "(): argument '" + arg + "'";
  if (pos >= 0) msg += " (position " + std::to_string(pos + 1) + ")";
  msg += std::string(" must be ") + want + ", not " + Py_TYPE(v)->tp_name;
  throw nb::type_error(msg.c_str());
}

struct ArgInfo {
  const SchemaArg* a;
  nb::object name;  // interned: the Python-facing name ("input" for a function's `self`)
  Attr def;         // parsed default (non-tensor arguments)
  bool numbers;     // a Tensor argument that takes a Python number (a wrapped 0-dim tensor)
};

struct OpFn {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  const OpDef* op;          // a table op, or
  const Composite* comp;    // a composite (ops/composite.h)
  const Schema* schema;
  FnKind variant;
  std::string* name;            // the Python name ("add", "add_")
  std::vector<ArgInfo>* args;
  int varargs;  // torch's rule: the one positional argument besides a method's self is an int list,
                // which may be given as separate ints (x.permute(1, 0)); its index, or -1
  bool one_tensor;        // the schema returns one Tensor (not a list)
  PyObject* next;         // the next overload of the same Python name (owned), or null
  PyObject* result_type;  // a torch.return_types-like namedtuple for named returns (owned), or null
};

PyTypeObject* g_opfn_type = nullptr;     // functions (kiln.add): never bind to an instance
PyTypeObject* g_method_type = nullptr;   // its subclass for methods: the method-descriptor protocol
PyTypeObject* g_tensor_type = nullptr;
nb::object g_out_name;

inline bool is_tensor_obj(PyObject* o) {
  return Py_TYPE(o) == g_tensor_type || PyType_IsSubtype(Py_TYPE(o), g_tensor_type);
}
inline const Tensor& tensor_of(PyObject* o) { return *nb::inst_ptr<Tensor>(o); }

// A Python or numpy number (np.int64, np.float32, ...): what torch takes for a Scalar.
bool is_numeric(PyObject* v) {
  if (is_number(v)) return true;
  if (is_tensor_obj(v) || PyUnicode_Check(v) || PyBytes_Check(v) || PySequence_Check(v)) return false;
  return PyIndex_Check(v) || PyNumber_Check(v);
}
bool is_numpy_bool(PyObject* v) {
  const char* n = Py_TYPE(v)->tp_name;
  return std::strcmp(n, "numpy.bool") == 0 || std::strcmp(n, "numpy.bool_") == 0;
}
// An int argument: a Python int or anything with __index__ (numpy ints), not a bool or a tensor.
bool is_int_like(PyObject* v) { return PyIndex_Check(v) && !PyBool_Check(v) && !is_numpy_bool(v) && !is_tensor_obj(v); }
// A name for messages, also when it cannot be encoded (a lone surrogate).
std::string utf8(PyObject* s) {
  const char* c = PyUnicode_AsUTF8(s);
  if (c) return c;
  PyErr_Clear();
  return "<a name that is not valid UTF-8>";
}

Tensor tensor_arg(const OpFn& f, const ArgInfo& ai, int pos, PyObject* v) {
  if (is_tensor_obj(v)) return tensor_of(v);
  if (ai.numbers && is_numeric(v)) return scalar_tensor(as_scalar(v), Dtype::Undefined, true);
  bad_type(*f.name, nb::borrow<nb::str>(ai.name).c_str(), pos, "Tensor", v);
}

Attr convert(const OpFn& f, const ArgInfo& ai, int pos, PyObject* v) {
  const SchemaArg& a = *ai.a;
  if (v == Py_None) {
    if (a.optional) return std::monostate{};
    bad_type(*f.name, a.name, pos, a.type.c_str(), v);
  }
  nb::handle h(v);
  switch (a.kind) {
    case ArgKind::Int:
      if (nb::isinstance<SymInt>(h)) return size_arg(h);
      if (!is_int_like(v)) bad_type(*f.name, a.name, pos, "int", v);
      return nb::cast<int64_t>(nb::int_(h));
    case ArgKind::Float: {
      if (PyFloat_Check(v)) return PyFloat_AS_DOUBLE(v);
      double d = is_tensor_obj(v) ? -1.0 : PyFloat_AsDouble(v);
      if (is_tensor_obj(v) || (d == -1.0 && PyErr_Occurred())) {
        PyErr_Clear();
        bad_type(*f.name, a.name, pos, "float", v);
      }
      return d;
    }
    case ArgKind::Bool:
      if (PyBool_Check(v)) return v == Py_True;
      if (!is_numpy_bool(v)) bad_type(*f.name, a.name, pos, "bool", v);
      return PyObject_IsTrue(v) == 1;
    case ArgKind::Scalar:
      if (nb::isinstance<SymInt>(h)) return Scalar(size_arg(h));  // a traced size stays symbolic (arange's bound)
      if (!is_numeric(v) && !is_tensor_obj(v)) bad_type(*f.name, a.name, pos, "Number", v);
      return as_scalar(h);
    case ArgKind::IntList:
      // a lone int for a sized list (int[1] dim), as torch's parser; an unsized one (int[] dims) only
      // takes separate ints as varargs (x.flip(0, 1)), never torch.flip(x, 0)
      if (is_int_like(v) && a.list_size > 0) return Shape{nb::cast<int64_t>(nb::int_(h))};
      if (PyUnicode_Check(v) || PyBytes_Check(v) || PyBool_Check(v) ||
          !(PySequence_Check(v) || is_tensor_obj(v) || nb::isinstance<SymInt>(h)))
        bad_type(*f.name, a.name, pos, "tuple of ints", v);
      if (PySequence_Check(v) && !is_tensor_obj(v)) {
        size_t k = 0;
        for (nb::handle e : nb::borrow<nb::sequence>(h)) {
          if (!is_int_like(e.ptr()) && !nb::isinstance<SymInt>(e)) {  // torch's wording
            std::string msg = *f.name + "(): argument '" + a.name + "'";
            if (pos >= 0) msg += " (position " + std::to_string(pos + 1) + ")";
            msg += std::string(" must be tuple of ints, but found element of type ") + Py_TYPE(e.ptr())->tp_name +
                   " at pos " + std::to_string(k);
            throw nb::type_error(msg.c_str());
          }
          ++k;
        }
      }
      return as_shape(h);
    case ArgKind::FloatList: return nb::cast<std::vector<double>>(h);
    case ArgKind::Str: {
      if (!PyUnicode_Check(v)) bad_type(*f.name, a.name, pos, "str", v);
      const char* c = PyUnicode_AsUTF8(v);
      if (!c) {
        PyErr_Clear();
        throw nb::value_error((*f.name + "(): argument '" + a.name + "' is not valid UTF-8").c_str());
      }
      return std::string(c);
    }
    case ArgKind::ScalarType: return as_dtype(h);
    case ArgKind::Device: return as_device(h);
    case ArgKind::Generator:
      if (!nb::isinstance<Generator>(h)) bad_type(*f.name, a.name, pos, "torch.Generator", v);
      return generator_attr(nb::cast<Generator*>(h));
    default: bad_type(*f.name, a.name, pos, a.type.c_str(), v);
  }
}

void add_tensors(const OpFn& f, const ArgInfo& ai, int pos, PyObject* v, TensorList& in) {
  const SchemaArg& a = *ai.a;
  if (a.kind == ArgKind::Tensor) {
    if (v == Py_None) {
      if (!a.optional) bad_type(*f.name, a.name, pos, "Tensor", v);
      in.emplace_back();
    } else {
      in.push_back(tensor_arg(f, ai, pos, v));
    }
    return;
  }
  if (is_tensor_obj(v) || !PySequence_Check(v)) bad_type(*f.name, a.name, pos, "tuple of Tensors", v);
  size_t k = 0;
  for (nb::handle t : nb::borrow<nb::sequence>(v)) {
    // torch's parser takes no None in a list from Python, even for Tensor?[] (index_put's indices)
    if (!is_tensor_obj(t.ptr()) && !(ai.numbers && is_numeric(t.ptr())))
      throw nb::type_error(("expected Tensor as element " + std::to_string(k) + " in argument " +
                            std::to_string(pos < 0 ? 0 : pos) + ", but got " + Py_TYPE(t.ptr())->tp_name).c_str());
    in.push_back(tensor_arg(f, ai, pos, t.ptr()));
    ++k;
  }
}

// A new Python Tensor holding t: the instance is allocated from the cached type and the tensor
// moved in (nb::cast would look the type up by its type_info on every call).
PyObject* tensor_object(Tensor&& t) {
  static PyObject* type = nb::type<Tensor>().ptr();
  nb::object o = nb::inst_alloc(type);
  new (nb::inst_ptr<Tensor>(o)) Tensor(std::move(t));
  nb::inst_mark_ready(o);
  return o.release().ptr();
}

// The result as the schema returns it: `-> Tensor` one tensor, `-> ()` None, several (or a
// Tensor[]) a tuple, a namedtuple where the returns are named.
PyObject* result_object(const OpFn& f, TensorList& r) {
  if (f.one_tensor && r.size() == 1) return tensor_object(std::move(r[0]));
  if (f.schema->returns.empty()) return Py_NewRef(Py_None);
  if (f.schema->returns.size() == 1 && f.schema->returns[0] == "bool")  // a composite's 0-dim bool answer
    return PyBool_FromLong(r[0].item<bool>());
  nb::object t = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(r.size())));
  if (!t) throw nb::python_error();
  for (size_t i = 0; i < r.size(); ++i) PyTuple_SET_ITEM(t.ptr(), i, tensor_object(std::move(r[i])));
  if (!f.result_type) return t.release().ptr();
  PyObject* named = PyObject_Call(f.result_type, t.ptr(), nullptr);  // namedtuple(*values)
  if (!named) throw nb::python_error();
  return named;
}

// One call's arguments, matched to the schema and converted.
struct Parsed {
  TensorList in;
  Attrs attrs;
  PyObject* out = nullptr;
  PyObject* self = nullptr;  // the object given for the first argument (by position or by name)
};

constexpr size_t kMaxArgs = 24;


// Matches and converts the arguments; a TypeError (nb::type_error) when they do not fit the schema.
void parse(const OpFn& f, PyObject* const* argv, size_t nargs, PyObject* kwnames, Parsed& p) {
  const std::vector<ArgInfo>& params = *f.args;
  PyObject* vals[kMaxArgs] = {};
  int where[kMaxArgs];  // positional index, or -1 for a keyword
  PyObject* out = nullptr;
  nb::object packed;  // the int list gathered from varargs
  PyObject* packed_argv[kMaxArgs];
  if (f.varargs >= 0 && nargs > static_cast<size_t>(f.varargs) &&
      (nargs > static_cast<size_t>(f.varargs) + 1 || is_int_like(argv[f.varargs]) ||
       nb::isinstance<SymInt>(argv[f.varargs]))) {
    const size_t k = static_cast<size_t>(f.varargs);
    packed = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(nargs - k)));
    for (size_t j = k; j < nargs; ++j) PyTuple_SET_ITEM(packed.ptr(), j - k, Py_NewRef(argv[j]));
    for (size_t j = 0; j < k; ++j) packed_argv[j] = argv[j];
    packed_argv[k] = packed.ptr();
    const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (k + 1 + static_cast<size_t>(nkw) > kMaxArgs) throw nb::type_error((*f.name + "(): too many arguments").c_str());
    for (Py_ssize_t j = 0; j < nkw; ++j) packed_argv[k + 1 + j] = argv[nargs + j];
    argv = packed_argv, nargs = k + 1;
  }
  size_t pos = 0;
  for (size_t i = 0; i < params.size() && pos < nargs; ++i) {
    if (params[i].a->kwarg_only) break;
    // positions as torch counts them: a method's self is not one
    vals[i] = argv[pos], where[i] = static_cast<int>(pos) - (f.variant == FnKind::Function ? 0 : 1), ++pos;
  }
  if (pos < nargs)
    throw nb::type_error((*f.name + "() takes " + std::to_string(pos) + " positional arguments but " +
                          std::to_string(nargs) + " were given").c_str());
  if (kwnames) {
    const Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; ++k) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, k);
      PyObject* v = argv[nargs + k];
      size_t i = 0;
      for (; i < params.size(); ++i)
        if (params[i].name.ptr() == key) break;
      if (i == params.size())
        for (i = 0; i < params.size(); ++i)
          if (PyUnicode_Compare(params[i].name.ptr(), key) == 0) break;
      if (i < params.size()) {
        if (vals[i])
          throw nb::type_error((*f.name + "() got multiple values for argument '" +
                                nb::borrow<nb::str>(params[i].name).c_str() + "' (given by name and position)").c_str());
        vals[i] = v, where[i] = -1;
      } else if (f.variant == FnKind::Function && PyUnicode_Compare(key, g_out_name.ptr()) == 0) {
        out = v == Py_None ? nullptr : v;
      } else {
        throw nb::type_error((*f.name + "() got an unexpected keyword argument '" + utf8(key) + "'").c_str());
      }
    }
  }
  TensorList& in = p.in;
  Attrs& attrs = p.attrs;
  p.out = out;
  p.self = params.empty() ? nullptr : vals[0];
  bool a_tensor = false;      // some tensor argument is a tensor object
  int first_number = -1;      // the first tensor argument given as a Python number
  for (size_t i = 0; i < params.size(); ++i) {
    const ArgInfo& ai = params[i];
    const SchemaArg& a = *ai.a;
    PyObject* v = vals[i];
    if (a.is_tensor()) {
      if (v && !a.is_tensor_list()) {
        if (is_tensor_obj(v)) a_tensor = true;
        else if (first_number < 0 && is_numeric(v)) first_number = static_cast<int>(i);
      }
      if (v) add_tensors(f, ai, where[i], v, in);
      else if (a.default_ || a.optional) { if (!a.is_tensor_list()) in.emplace_back(); }
      else
        throw nb::type_error((*f.name + "() missing required argument '" + nb::borrow<nb::str>(ai.name).c_str() +
                              "' (pos " + std::to_string(i + 1) + ")").c_str());
    } else if (v == Py_None && !a.optional && a.default_ && a.kind == ArgKind::IntList) {
      attrs.push_back(ai.def);  // torch's parser takes None for an int list with a default (roll's dims)
    } else if (!v && out && a.kind == ArgKind::ScalarType && ((f.op ? f.op->tags : f.comp->tags) & kDtypeFromOut) && is_tensor_obj(out)) {
      attrs.push_back(tensor_of(out).dtype());  // torch's sum(..., out=o) computes in o's dtype
    } else if (v) {
      try {
        attrs.push_back(convert(f, ai, where[i], v));
      } catch (const std::bad_cast&) {  // nanobind's conversion refused a value (an int beyond int64)
        if (PyLong_Check(v) && (a.kind == ArgKind::Int || a.kind == ArgKind::IntList))  // a lone int: torch's
          throw nb::value_error((*f.name + "(): Overflow when unpacking long long").c_str());  // ValueError
        std::string msg = *f.name + "(): argument '" + nb::borrow<nb::str>(ai.name).c_str() + "'";
        if (where[i] >= 0) msg += " (position " + std::to_string(where[i] + 1) + ")";
        msg += std::string(" must be ") + (a.kind == ArgKind::IntList ? "tuple of ints" : a.kind == ArgKind::Int ? "int"
                                           : a.kind == ArgKind::Scalar ? "Number" : a.type.c_str());
        if (a.kind == ArgKind::Int || a.kind == ArgKind::IntList || a.kind == ArgKind::Scalar)
          msg += ", but a value does not fit in 64 bits (Overflow when unpacking long long)";
        else
          msg += std::string(", but got ") + Py_TYPE(v)->tp_name + " it cannot convert";
        throw nb::type_error(msg.c_str());
      }
    } else if (a.default_) {
      attrs.push_back(ai.def);
    } else {
      throw nb::type_error((*f.name + "() missing required argument '" + nb::borrow<nb::str>(ai.name).c_str() +
                            "' (pos " + std::to_string(i + 1) + ")").c_str());
    }
  }
  // torch's number overloads need one tensor: add(2, 3) matches no signature (kiln.ops.<name>, unnamed,
  // which takes numbers everywhere, is exempt)
  if (first_number >= 0 && !a_tensor && !f.name->empty())
    throw nb::type_error((*f.name + "(): argument '" + nb::borrow<nb::str>(params[first_number].name).c_str() +
                          "' (position " + std::to_string(first_number + 1) + ") must be Tensor, not " +
                          Py_TYPE(vals[first_number])->tp_name).c_str());
}

PyObject* run(const OpFn& f, Parsed& p) {
  PyObject* self_obj = p.self;
  TensorList& in = p.in;
  Attrs& attrs = p.attrs;
  PyObject* out = p.out;
  if (f.variant == FnKind::Inplace) {
    if (f.comp) call_composite(*f.comp, in, attrs, nullptr, true);
    else dispatch_inplace(*f.op, in[0], in, attrs);
    Py_INCREF(self_obj);
    return self_obj;  // the same Python object, as torch's `x.add_(1) is x`
  }
  if (out) {
    TensorList outs;
    if (is_tensor_obj(out)) {
      outs.push_back(tensor_of(out));
    } else {
      if (!PyTuple_Check(out) && !PyList_Check(out)) bad_type(*f.name, "out", -1, "Tensor", out);
      for (nb::handle t : nb::borrow<nb::sequence>(out)) {
        if (!is_tensor_obj(t.ptr())) bad_type(*f.name, "out", -1, "tuple of Tensors", out);
        outs.push_back(tensor_of(t.ptr()));
      }
    }
    if (f.comp) call_composite(*f.comp, in, attrs, &outs, false);
    else dispatch(*f.op, in, attrs, &outs, false);
    if (f.result_type && PyTuple_Check(out)) {  // torch returns its return_types namedtuple of the outs
      PyObject* named = PyObject_Call(f.result_type, out, nullptr);
      if (!named) throw nb::python_error();
      return named;
    }
    Py_INCREF(out);
    return out;  // the out object itself, as torch
  }
  TensorList r = f.comp ? call_composite(*f.comp, in, attrs) : dispatch(*f.op, in, attrs);
  return result_object(f, r);
}

std::string signature_text(const OpFn& f) {
  std::string s = "(";
  bool kw = false;
  for (size_t i = (f.variant == FnKind::Function ? 0 : 1); i < f.args->size(); ++i) {
    const ArgInfo& ai = (*f.args)[i];
    if (s.size() > 1) s += ", ";
    if (ai.a->kwarg_only && !kw) s += "*, ", kw = true;
    s += ai.a->type + " " + nb::borrow<nb::str>(ai.name).c_str();
    if (ai.a->default_) s += "=" + *ai.a->default_;
  }
  return s + ")";
}

// The first overload whose schema the arguments fit runs (torch's rule); when none does, a lone
// schema's own error, or torch's list of the signatures.
PyObject* call(const OpFn& f, PyObject* const* argv, size_t nargs, PyObject* kwnames) {
  if (!f.next) {
    Parsed p;
    parse(f, argv, nargs, kwnames, p);
    return run(f, p);
  }
  for (const OpFn* g = &f; g; g = reinterpret_cast<const OpFn*>(g->next)) {
    Parsed p;
    try {
      parse(*g, argv, nargs, kwnames, p);
    } catch (const nb::builtin_exception& e) {
      if (e.type() != nb::exception_type::type_error) throw;
      continue;
    } catch (nb::python_error& e) {  // a conversion that raised TypeError in Python
      if (!e.matches(PyExc_TypeError)) throw;
      continue;
    } catch (const std::bad_cast&) {
      continue;
    } catch (const kiln::Error& e) {  // a conversion's own TypeError (a device string, ...)
      if (e.kind() != ErrorKind::Type) throw;
      continue;
    }
    return run(*g, p);
  }
  std::string got = "(";
  for (size_t i = 0; i < nargs; ++i) got += std::string(i ? ", " : "") + Py_TYPE(argv[i])->tp_name;
  if (kwnames)
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); ++k)
      got += std::string(got.size() > 1 ? ", " : "") + utf8(PyTuple_GET_ITEM(kwnames, k)) + "=" +
             Py_TYPE(argv[nargs + k])->tp_name;
  std::string msg = *f.name + "() received an invalid combination of arguments - got " + got +
                    "), but expected one of:";
  for (const OpFn* g = &f; g; g = reinterpret_cast<const OpFn*>(g->next)) msg += "\n * " + signature_text(*g);
  throw nb::type_error(msg.c_str());
}

PyObject* opfn_vectorcall(PyObject* self, PyObject* const* argv, size_t nargsf, PyObject* kwnames) {
  const OpFn& f = *reinterpret_cast<OpFn*>(self);
  const size_t nargs = PyVectorcall_NARGS(nargsf);
  bool handled;
  PyObject* r = function_overrides(self, argv, nargs, kwnames, &handled);
  if (handled) return r;
  try {
    return call(f, argv, nargs, kwnames);
  } catch (...) {
    set_python_error(std::current_exception());
    return nullptr;
  }
}

// A method (or in-place method) looked up on an instance without being called binds it, as a
// Python function would; a module function does not bind (builtin functions do not).
PyObject* opfn_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  const OpFn& f = *reinterpret_cast<OpFn*>(self);
  if (obj == nullptr || obj == Py_None || f.variant == FnKind::Function) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

void opfn_dealloc(PyObject* self) {
  OpFn* f = reinterpret_cast<OpFn*>(self);
  delete f->name;
  delete f->args;
  Py_XDECREF(f->next);
  Py_XDECREF(f->result_type);
  PyTypeObject* tp = Py_TYPE(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

PyObject* opfn_repr(PyObject* self) {
  const OpFn& f = *reinterpret_cast<OpFn*>(self);
  return PyUnicode_FromString(("<kiln op " + f.schema->str() + ">").c_str());
}

PyObject* get_name(PyObject* self, void*) { return PyUnicode_FromString(reinterpret_cast<OpFn*>(self)->name->c_str()); }
PyObject* get_op(PyObject* self, void*) {
  const OpFn& f = *reinterpret_cast<OpFn*>(self);
  return PyUnicode_FromString(f.op ? f.op->name : f.schema->qualified_name().c_str());
}
PyObject* get_schema(PyObject* self, void*) {
  return PyUnicode_FromString(reinterpret_cast<OpFn*>(self)->schema->str().c_str());
}
PyObject* get_doc(PyObject* self, void*) {
  const OpFn& f = *reinterpret_cast<OpFn*>(self);
  std::string doc = *f.name + ": the op `" + f.schema->str() + "`";
  return PyUnicode_FromString(doc.c_str());
}

PyGetSetDef opfn_getset[] = {
    {"__name__", get_name, nullptr, nullptr, nullptr},
    {"__qualname__", get_name, nullptr, nullptr, nullptr},
    {"__doc__", get_doc, nullptr, nullptr, nullptr},
    {"name", get_op, nullptr, nullptr, nullptr},
    {"schema", get_schema, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMemberDef opfn_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, static_cast<Py_ssize_t>(offsetof(OpFn, vectorcall)), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot opfn_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(opfn_dealloc)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_descr_get, reinterpret_cast<void*>(opfn_descr_get)},
    {Py_tp_repr, reinterpret_cast<void*>(opfn_repr)},
    {Py_tp_getset, opfn_getset},
    {Py_tp_members, opfn_members},
    {0, nullptr}};

// Functions: a plain callable (stored on a class it does not bind, as builtins do). Methods: a
// subclass with the method-descriptor flag, so `x.exp()` passes x in the argument vector. Neither
// can be made from Python.
PyType_Spec opfn_spec = {"kiln._C._Op", sizeof(OpFn), 0,
                         Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_VECTORCALL |
                             Py_TPFLAGS_DISALLOW_INSTANTIATION,
                         opfn_slots};
PyType_Spec method_spec = {"kiln._C._OpMethod", sizeof(OpFn), 0,
                           Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR |
                               Py_TPFLAGS_DISALLOW_INSTANTIATION,
                           opfn_slots};

}  // namespace

namespace {
nb::object make_fn(const Schema* schema, const OpDef* op, const Composite* comp, FnKind variant, std::string py_name,
                   uint32_t number_args) {
  const char* op_name = schema->name.c_str();
  KILN_CHECK(schema->args.size() <= kMaxArgs, Runtime, op_name, "more than ", kMaxArgs, " arguments");
  KILN_CHECK(variant == FnKind::Function || (!schema->args.empty() && schema->args[0].kind == ArgKind::Tensor),
             Runtime, op_name, "a method's first argument must be a Tensor");
  auto* args = new std::vector<ArgInfo>();
  for (size_t i = 0; i < schema->args.size(); ++i) {
    const SchemaArg& a = schema->args[i];
    ArgInfo ai{&a, nb::object(), Attr{}, ((number_args >> i) & 1) != 0};
    const bool public_fn = variant == FnKind::Function && py_name != "";
    std::string name = (i == 0 && a.name == "self" && public_fn) ? "input" : a.name;
    PyObject* s = PyUnicode_InternFromString(name.c_str());
    ai.name = nb::steal(s);
    if (a.default_ && !a.is_tensor()) ai.def = parse_default(a, *a.default_, schema->name);
    args->push_back(std::move(ai));
  }
  int varargs = -1;
  {
    const size_t first = variant == FnKind::Function ? 0 : 1;
    size_t positional = 0, last = 0;
    for (size_t i = first; i < schema->args.size(); ++i)
      if (!schema->args[i].kwarg_only) ++positional, last = i;
    if (positional == 1 && schema->args[last].kind == ArgKind::IntList) varargs = static_cast<int>(last);
  }
  nb::object result_type;
  if (schema->returns.size() > 1 && !schema->return_names.empty() && !schema->return_names[0].empty()) {
    static auto* types = new std::map<std::string, nb::object>();  // one per op name, module lifetime
    auto it = types->find(schema->name);
    if (it == types->end()) {
      nb::list fields;
      for (const std::string& n : schema->return_names) fields.append(nb::str(n.c_str()));
      nb::object ty = nb::module_::import_("collections").attr("namedtuple")(schema->name.c_str(), fields);
      ty.attr("__module__") = "kiln.return_types";
      it = types->emplace(schema->name, ty).first;
    }
    result_type = it->second;
  }
  OpFn* f = PyObject_New(OpFn, variant == FnKind::Function ? g_opfn_type : g_method_type);
  f->varargs = varargs;
  f->one_tensor = schema->returns.size() == 1 && schema->returns[0] == "Tensor";
  f->next = nullptr;
  f->result_type = result_type.release().ptr();
  f->vectorcall = opfn_vectorcall;
  f->op = op;
  f->comp = comp;
  f->schema = schema;
  f->variant = variant;
  f->name = new std::string(py_name.empty() ? schema->name : py_name);
  f->args = args;
  return nb::steal(reinterpret_cast<PyObject*>(f));
}
}  // namespace

nb::object make_op_fn(const OpDef& op, FnKind variant, std::string py_name, uint32_t number_args) {
  const Schema* schema = op_schema(op);
  KILN_CHECK(schema != nullptr, Runtime, op.name, "the op has no schema");
  return make_fn(schema, &op, nullptr, variant, std::move(py_name), number_args);
}

namespace {
// What a public name is made from: a table op or a composite, with its declared variants.
struct Entry {
  const Schema* schema;
  const OpDef* op;
  const Composite* comp;
  uint8_t variants;
  uint32_t number_args;
};

// The callables of one kind for a list of overloads, chained first to last.
nb::object chain(const std::vector<Entry>& ops, FnKind kind, const std::string& name) {
  nb::object head, tail;
  for (const Entry& e : ops) {
    const uint32_t numbers = kind == FnKind::Function ? e.number_args : e.number_args & ~1u;  // not self
    nb::object fn = make_fn(e.schema, e.op, e.comp, kind, name, numbers);
    if (!head) head = fn;
    else reinterpret_cast<OpFn*>(tail.ptr())->next = fn.inc_ref().ptr();
    tail = fn;
  }
  return head;
}

size_t required_args(const Schema& s) {
  size_t n = 0;
  for (const SchemaArg& a : s.args) n += !a.default_ && !a.optional;
  return n;
}
}  // namespace

void expose_registered(nb::module_& m, nb::handle cls) {
  std::vector<std::pair<std::string, std::vector<Entry>>> groups;  // by schema name, first seen first
  auto add = [&](const Entry& e) {
    const std::string& name = e.schema->name;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == name; });
    if (it == groups.end()) groups.push_back({name, {e}});
    else it->second.push_back(e);
  };
  for (const OpDef* op : registered_ops())
    if (op->variants) add({op_schema(*op), op, nullptr, op->variants, op->number_args});
  for (const Composite* c : registered_composites())
    if (c->variants) add({&composite_schema(*c), nullptr, c, c->variants, c->number_args});
  for (auto& [name, ops] : groups) {
    // torch's parser tries the signature with fewer required arguments first; here it also spares
    // the common call (round(x)) a failed match
    std::stable_sort(ops.begin(), ops.end(),
                     [](const Entry& a, const Entry& b) { return required_args(*a.schema) < required_args(*b.schema); });
    for (auto [bit, kind] : {std::pair{kFunctionVariant, FnKind::Function}, std::pair{kMethodVariant, FnKind::Method},
                             std::pair{kInplaceVariant, FnKind::Inplace}}) {
      std::vector<Entry> some;
      for (const Entry& e : ops)
        if (e.variants & bit) some.push_back(e);
      if (some.empty()) continue;
      if (kind == FnKind::Function) m.attr(name.c_str()) = chain(some, kind, name);
      else if (kind == FnKind::Method) nb::setattr(cls, name.c_str(), chain(some, kind, name));
      else nb::setattr(cls, (name + "_").c_str(), chain(some, kind, name + "_"));
    }
  }
}

void bind_schema(nb::module_& m, nb::handle tensor_cls) {
  g_tensor_type = reinterpret_cast<PyTypeObject*>(tensor_cls.ptr());
  g_opfn_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&opfn_spec));
  if (!g_opfn_type) throw nb::python_error();
  g_method_type = reinterpret_cast<PyTypeObject*>(
      PyType_FromSpecWithBases(&method_spec, reinterpret_cast<PyObject*>(g_opfn_type)));
  if (!g_method_type) throw nb::python_error();
  g_out_name = nb::steal(PyUnicode_InternFromString("out"));
  m.attr("_Op") = nb::handle(reinterpret_cast<PyObject*>(g_opfn_type));
  // kiln.ops.<name>: the op under its schema's argument names, numbers taken for every tensor
  m.def("_op", [](const std::string& name) {
    if (const OpDef* op = find_op(name)) return make_op_fn(*op, FnKind::Function, "", ~0u);
    if (const Composite* c = find_composite(name))
      return make_fn(&composite_schema(*c), nullptr, c, FnKind::Function, "", ~0u);
    throw nb::attribute_error(("kiln.ops has no op named '" + name + "'").c_str());
  });
}

}  // namespace kiln::py
