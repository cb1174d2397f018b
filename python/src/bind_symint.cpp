// kiln.SymInt, kiln.SymBool and kiln.ShapeEnv: symbolic sizes in Python (kiln/core/symint.h). In a
// trace, `x.shape` of a meta tensor made from symbols holds SymInts; arithmetic on them builds
// expressions, and they go back into ops as sizes (x.view(B * T, C)) without becoming numbers. Turning
// one into a Python int (int(), an index, range()) or a comparison into a bool specialises: the env
// records the guard with the Python line that asked.
#include <Python.h>

#include "common.h"

namespace kiln::py {

std::string python_where() {
  PyFrameObject* f = PyEval_GetFrame();  // borrowed
  if (!f) return "";
  PyCodeObject* code = PyFrame_GetCode(f);  // new reference
  const char* file = PyUnicode_AsUTF8(code->co_filename);
  std::string w = std::string(file ? file : "?") + ":" + std::to_string(PyFrame_GetLineNumber(f));
  Py_DECREF(code);
  return w;
}

nb::object symint_object(SymInt s) { return s.is_symbolic() ? nb::cast(s) : nb::int_(s.raw()); }

int64_t size_arg(nb::handle h) {
  if (nb::isinstance<SymInt>(h)) return nb::cast<SymInt>(h).raw();
  return nb::cast<int64_t>(h);
}

namespace {
PyTypeObject* g_size_type = nullptr;  // kiln.Size, a tuple subclass without fields of its own
}
void set_size_type(nb::handle t) {
  if (!PyType_Check(t.ptr()) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(t.ptr()), &PyTuple_Type))
    throw nb::type_error("_set_size_type: expected a tuple subclass");
  g_size_type = reinterpret_cast<PyTypeObject*>(nb::handle(t).inc_ref().ptr());
}

// A kiln.Size of the tensor's sizes: the tuple subclass filled as CPython's tuple_subtype_new does.
nb::tuple sym_shape_tuple(const Tensor& t) {
  const bool sym = t.has_symbolic_sizes();
  const SymShape s = sym ? t.sym_sizes() : SymShape();
  const Shape& c = t.impl()->sizes;
  const Py_ssize_t n = static_cast<Py_ssize_t>(sym ? s.size() : c.size());
  PyObject* o = g_size_type ? g_size_type->tp_alloc(g_size_type, n) : PyTuple_New(n);
  if (!o) throw nb::python_error();
  for (Py_ssize_t i = 0; i < n; ++i)
    PyTuple_SET_ITEM(o, i, sym ? symint_object(s[i]).release().ptr() : PyLong_FromLongLong(c[i]));
  return nb::steal<nb::tuple>(o);
}

namespace {
std::optional<SymInt> maybe_symint(nb::handle h) {
  if (nb::isinstance<SymInt>(h)) return nb::cast<SymInt>(h);
  if (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) return SymInt(nb::cast<int64_t>(h));
  return std::nullopt;
}
nb::object symbool_object(SymBool b) {
  if (auto v = b.maybe_bool()) return nb::bool_(*v);
  return nb::cast(b);
}
// Binary operators: int or SymInt operands, NotImplemented otherwise (Python then tries float etc.).
template <class F>
auto binop(F f) {
  return [f](SymInt a, nb::handle b) -> nb::object {
    auto o = maybe_symint(b);
    if (!o) return nb::borrow(Py_NotImplemented);
    return f(a, *o);
  };
}
template <class F>
auto rbinop(F f) {
  return [f](SymInt a, nb::handle b) -> nb::object {
    auto o = maybe_symint(b);
    if (!o) return nb::borrow(Py_NotImplemented);
    return f(*o, a);
  };
}
thread_local std::vector<ShapeEnv*> g_replaced;  // what each __enter__ replaced, restored by __exit__
}  // namespace

void bind_symint(nb::module_& m) {
  auto I = [](auto f) { return [f](SymInt a, SymInt b) { return symint_object(f(a, b)); }; };
  auto B = [](auto f) { return [f](SymInt a, SymInt b) { return symbool_object(f(a, b)); }; };
  auto add = I([](SymInt a, SymInt b) { return a + b; });
  auto sub = I([](SymInt a, SymInt b) { return a - b; });
  auto mul = I([](SymInt a, SymInt b) { return a * b; });
  auto fdiv = I([](SymInt a, SymInt b) { return a / b; });
  auto mod = I([](SymInt a, SymInt b) { return a % b; });
  nb::class_<SymInt>(m, "SymInt")
      .def("__add__", binop(add)).def("__radd__", rbinop(add))
      .def("__sub__", binop(sub)).def("__rsub__", rbinop(sub))
      .def("__mul__", binop(mul)).def("__rmul__", rbinop(mul))
      .def("__floordiv__", binop(fdiv)).def("__rfloordiv__", rbinop(fdiv))
      .def("__mod__", binop(mod)).def("__rmod__", rbinop(mod))
      .def("__neg__", [](SymInt a) { return symint_object(-a); })
      .def("__eq__", binop(B([](SymInt a, SymInt b) { return a == b; })))
      .def("__ne__", binop(B([](SymInt a, SymInt b) { return a != b; })))
      .def("__lt__", binop(B([](SymInt a, SymInt b) { return a < b; })))
      .def("__le__", binop(B([](SymInt a, SymInt b) { return a <= b; })))
      .def("__gt__", binop(B([](SymInt a, SymInt b) { return a > b; })))
      .def("__ge__", binop(B([](SymInt a, SymInt b) { return a >= b; })))
      .def("__int__", [](SymInt a) { return a.guard_int(python_where()); })
      .def("__index__", [](SymInt a) { return a.guard_int(python_where()); })
      .def("__float__", [](SymInt a) { return static_cast<double>(a.guard_int(python_where())); })
      .def("__bool__", [](SymInt a) { return (a != 0).guard(python_where()); })
      .def("__hash__", [](SymInt a) { return a.raw(); })
      .def("__repr__", [](SymInt a) { return a.str(); })
      .def("__str__", [](SymInt a) { return a.str(); })
      .def_prop_ro("hint", [](SymInt a) { return a.hint(); })
      .def("range", [](SymInt a) {
        ShapeEnv* e = active_shape_env();
        KILN_CHECK(e, Runtime, "SymInt", "no ShapeEnv is active");
        auto r = e->range(a);
        return nb::make_tuple(r.first, r.second == ShapeEnv::kInf ? nb::object(nb::none()) : nb::int_(r.second));
      });
  nb::class_<SymBool>(m, "SymBool")
      .def("__bool__", [](const SymBool& b) { return b.guard(python_where()); })
      .def("__invert__", [](const SymBool& b) { return symbool_object(!b); })
      .def("__repr__", [](const SymBool& b) {  // printing asks nothing: no guard
        auto v = b.maybe_bool();
        return v ? std::string(*v ? "True" : "False") : std::string("SymBool(undecided)");
      });

  nb::class_<ShapeEnv>(m, "ShapeEnv")
      .def(nb::init<>())
      .def("create_symbol", [](ShapeEnv& e, const std::string& name, int64_t hint, int64_t min,
                               std::optional<int64_t> max) {
        return symint_object(e.create_symbol(name, hint, min, max.value_or(ShapeEnv::kInf)));
      }, "name"_a, "hint"_a, "min"_a = 2, "max"_a.none() = nb::none())
      .def("create_unbacked", [](ShapeEnv& e) { return symint_object(e.create_unbacked()); })
      .def_prop_ro("guards", [](const ShapeEnv& e) {
        nb::list l;
        for (const Guard& g : e.guards()) l.append(nb::make_tuple(g.text, g.where, g.specialization));
        return l;
      })
      .def_prop_ro("symbols", [](const ShapeEnv& e) {
        nb::list l;
        for (int i = 0; i < e.num_symbols(); ++i) l.append(e.symbol_name(i));
        return l;
      })
      .def("check", [](const ShapeEnv& e, const std::vector<int64_t>& values) { return e.check(values); })
      .def("evaluate", [](const ShapeEnv& e, nb::handle s, const std::vector<int64_t>& values) {
        return e.evaluate(SymInt::from_raw(size_arg(s)), values);
      })
      .def("__enter__", [](nb::handle self) {
        g_replaced.push_back(set_active_shape_env(&nb::cast<ShapeEnv&>(self)));
        return nb::borrow(self);
      })
      .def("__exit__", [](ShapeEnv&, nb::args) {
        if (g_replaced.empty()) return;
        set_active_shape_env(g_replaced.back());
        g_replaced.pop_back();
      });
}

}  // namespace kiln::py
