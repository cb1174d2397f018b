// The tensor protocol's C++ side (python/kiln/_tensor_protocol.py is the Python side): print options,
// storages and shared memory, subclass instances (as_subclass), the deterministic-algorithms flags,
// and the subclass / __kiln_function__ dispatch of the ops bound from schemas (bind_schema.cpp calls
// has_function_overrides on every call: one type comparison per argument on the fast path).
#include <Python.h>
#include <structmember.h>

#include "common.h"

#include "kiln/backend/cpu/isa.h"
#include "kiln/dispatch/profiler.h"

namespace kiln::py {
namespace {

// Module-lifetime references, never released (a static nb::object would be released after the
// interpreter is gone).
PyTypeObject* g_tensor_cls = nullptr;
PyObject* g_handler = nullptr;   // kiln._tensor_protocol._dispatch(func, overloaded, args, kwargs)
PyObject* g_disabled = nullptr;  // its _disabled_function_impl: a type that sets it opts out (nn.Parameter)
PyObject* g_kiln_name = nullptr;
PyObject* g_torch_name = nullptr;
thread_local bool t_function_disabled = false;

// Whether a type's MRO defines a handler, __kiln_function__ or __torch_function__, whichever it meets
// first (a subclass may override either), other than the opt-out marker.
bool has_handler(PyTypeObject* tp) {
  PyObject* mro = tp->tp_mro;
  if (!mro) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    PyObject* dict = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i))->tp_dict;
    if (!dict) continue;
    PyObject* h = PyDict_GetItemWithError(dict, g_kiln_name);
    if (!h) h = PyDict_GetItemWithError(dict, g_torch_name);
    if (!h) continue;
    nb::object f = nb::borrow(h);
    if (Py_IS_TYPE(h, &PyClassMethod_Type) || Py_IS_TYPE(h, &PyStaticMethod_Type)) f = nb::getattr(f, "__func__");
    return f.ptr() != g_disabled;
  }
  PyErr_Clear();
  return false;
}

inline bool plain(PyObject* o) {
  PyTypeObject* tp = Py_TYPE(o);
  return tp == g_tensor_cls || o == Py_None || tp == &PyLong_Type || tp == &PyFloat_Type || tp == &PyBool_Type ||
         tp == &PyUnicode_Type || tp == &PyComplex_Type;
}

void collect(PyObject* o, std::vector<PyObject*>& found, int depth = 0) {
  if (plain(o)) return;
  PyTypeObject* tp = Py_TYPE(o);
  if ((tp == &PyList_Type || tp == &PyTuple_Type) && depth == 0) {  // Tensor[] arguments
    PyObject* seq = o;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; ++i) collect(PySequence_Fast_GET_ITEM(seq, i), found, 1);
    return;
  }
  if (tp == &PyList_Type || tp == &PyTuple_Type || PyType_Check(o)) return;
  if (!has_handler(tp)) return;
  for (PyObject* f : found)
    if (Py_TYPE(f) == tp) return;  // one object per type, the first (torch's rule)
  found.push_back(o);
}

}  // namespace

// Called by every op bound from a schema before it parses its arguments: nullptr when no argument is
// a Tensor subclass or an object with __kiln_function__ / __torch_function__ (or the protocol is
// disabled on this thread); else the handler's result (a new reference; nullptr with an error set).
PyObject* function_overrides(PyObject* func, PyObject* const* argv, size_t nargs, PyObject* kwnames, bool* handled) {
  *handled = false;
  if (!g_handler) return nullptr;
  const size_t nkw = kwnames ? static_cast<size_t>(PyTuple_GET_SIZE(kwnames)) : 0;
  bool all_plain = true;
  for (size_t i = 0; i < nargs + nkw && all_plain; ++i) all_plain = plain(argv[i]);
  // the thread-local only now: the module is dlopen'ed, so reading it is a TLS-descriptor call
  if (all_plain || t_function_disabled) return nullptr;
  std::vector<PyObject*> found;
  for (size_t i = 0; i < nargs + nkw; ++i) collect(argv[i], found);
  if (found.empty()) return nullptr;
  *handled = true;
  try {
    nb::list overloaded;
    for (PyObject* o : found) overloaded.append(nb::handle(o));
    nb::tuple args = nb::steal<nb::tuple>(PyTuple_New(static_cast<Py_ssize_t>(nargs)));
    for (size_t i = 0; i < nargs; ++i) PyTuple_SET_ITEM(args.ptr(), i, Py_NewRef(argv[i]));
    nb::dict kwargs;
    for (size_t k = 0; k < nkw; ++k) kwargs[nb::handle(PyTuple_GET_ITEM(kwnames, k))] = nb::handle(argv[nargs + k]);
    return nb::handle(g_handler)(nb::handle(func), overloaded, args, kwargs).release().ptr();
  } catch (nb::python_error& e) {
    e.restore();
    return nullptr;
  }
}

namespace {
// A hand-written Tensor method (nanobind's) behind the protocol: a method descriptor that checks its
// arguments as the schema-bound ops do, then calls the original with the same vector.
struct ProtocolMethod {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* orig;
};

PyObject* pm_vectorcall(PyObject* self, PyObject* const* argv, size_t nargsf, PyObject* kwnames) {
  bool handled;
  PyObject* r = function_overrides(self, argv, PyVectorcall_NARGS(nargsf), kwnames, &handled);
  if (handled) return r;
  return PyObject_Vectorcall(reinterpret_cast<ProtocolMethod*>(self)->orig, argv, nargsf, kwnames);
}
PyObject* pm_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}
void pm_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  Py_XDECREF(reinterpret_cast<ProtocolMethod*>(self)->orig);
  tp->tp_free(self);
  Py_DECREF(tp);
}
PyObject* pm_getattr(PyObject* self, PyObject* name) {  // __name__, __doc__, ...: the original's
  PyObject* r = PyObject_GenericGetAttr(self, name);
  if (r || !PyErr_ExceptionMatches(PyExc_AttributeError)) return r;
  PyErr_Clear();
  return PyObject_GetAttr(reinterpret_cast<ProtocolMethod*>(self)->orig, name);
}
PyMemberDef pm_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, static_cast<Py_ssize_t>(offsetof(ProtocolMethod, vectorcall)), READONLY, nullptr},
    {"__wrapped__", T_OBJECT, static_cast<Py_ssize_t>(offsetof(ProtocolMethod, orig)), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};
PyType_Slot pm_slots[] = {{Py_tp_dealloc, reinterpret_cast<void*>(pm_dealloc)},
                          {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
                          {Py_tp_descr_get, reinterpret_cast<void*>(pm_descr_get)},
                          {Py_tp_getattro, reinterpret_cast<void*>(pm_getattr)},
                          {Py_tp_members, pm_members},
                          {0, nullptr}};
PyType_Spec pm_spec = {"kiln._C._ProtocolMethod", sizeof(ProtocolMethod), 0,
                       Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR |
                           Py_TPFLAGS_DISALLOW_INSTANTIATION,
                       pm_slots};
PyTypeObject* g_pm_type = nullptr;
}  // namespace

void bind_protocol(nb::module_& m, nb::class_<Tensor>& cls) {
  g_tensor_cls = reinterpret_cast<PyTypeObject*>(cls.ptr());
  g_kiln_name = PyUnicode_InternFromString("__kiln_function__");
  g_torch_name = PyUnicode_InternFromString("__torch_function__");
  m.def("_set_function_handler", [](nb::handle h, nb::handle disabled) {
    Py_XDECREF(g_handler), Py_XDECREF(g_disabled);
    g_handler = Py_NewRef(h.ptr()), g_disabled = Py_NewRef(disabled.ptr());
  });
  m.def("_set_function_disabled", [](bool d) {
    bool prev = t_function_disabled;
    t_function_disabled = d;
    return prev;
  });
  m.def("_is_function_disabled", [] { return t_function_disabled; });
  g_pm_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&pm_spec));
  if (!g_pm_type) throw nb::python_error();
  m.def("_protocol_method", [](nb::handle orig) {
    ProtocolMethod* p = PyObject_New(ProtocolMethod, g_pm_type);
    if (!p) throw nb::python_error();
    p->vectorcall = pm_vectorcall;
    p->orig = Py_NewRef(orig.ptr());
    return nb::steal(reinterpret_cast<PyObject*>(p));
  });

  // ---- legacy constructors: kiln.Tensor(2, 3), kiln.Tensor([1., 2.]), kiln.Tensor() (float32, as torch's
  // legacy constructor), made by kiln._tensor_protocol._legacy_new
  cls.def("__init__", [](Tensor* self, nb::args args, nb::kwargs kw) {
    nb::object make = nb::module_::import_("kiln._tensor_protocol").attr("_legacy_new");
    new (self) Tensor(nb::cast<Tensor>(make(*args, **kw)));
  });
  // shapes are kiln.Size objects (a tuple subclass): bind_symint.cpp makes them once this is set
  m.def("_set_size_type", [](nb::handle t) { set_size_type(t); });

  // ---- print options
  m.def("_set_printoptions", [](int precision, double threshold, int edgeitems, int linewidth, nb::handle sci) {
    PrintOptions o;
    o.precision = precision, o.threshold = threshold, o.edgeitems = edgeitems, o.linewidth = linewidth;
    if (!sci.is_none()) o.sci_mode = nb::cast<bool>(sci);
    set_print_options(o);
  }, "precision"_a, "threshold"_a, "edgeitems"_a, "linewidth"_a, "sci_mode"_a.none());
  m.def("_get_printoptions", [] {
    const PrintOptions& o = print_options();
    nb::dict d;
    d["precision"] = o.precision, d["threshold"] = o.threshold, d["edgeitems"] = o.edgeitems;
    d["linewidth"] = o.linewidth;
    d["sci_mode"] = o.sci_mode ? nb::cast(*o.sci_mode) : nb::none();
    return d;
  });

  // ---- storages
  cls.def("_storage_nbytes", [](const Tensor& t) { return t.storage()->nbytes(); });
  cls.def("_storage_data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.storage()->data()); });
  cls.def("share_memory_", [](const Tensor& t) {
    t.storage()->share_memory();
    return t;
  });
  cls.def("is_shared", [](const Tensor& t) { return t.storage()->is_shared(); });

  // ---- subclasses: a new Python object of `cls` on the same tensor (torch's as_subclass)
  cls.def("as_subclass", [](nb::handle self, nb::handle sub) -> nb::object {
    if (!PyType_Check(sub.ptr()) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(sub.ptr()), g_tensor_cls))
      throw nb::type_error("as_subclass: cls must be a subclass of kiln.Tensor");
    const Tensor& t = nb::cast<const Tensor&>(self);
    nb::object o = nb::inst_alloc(sub);
    new (nb::inst_ptr<Tensor>(o)) Tensor(t);
    nb::inst_mark_ready(o);
    return o;
  }, "cls"_a);

  // ---- the profiler (kiln/dispatch/profiler.h; python/kiln/profiler is the Python side)
  m.def("_profiler_start", [](bool shapes) { profiler::start(shapes); }, "record_shapes"_a = false);
  m.def("_profiler_stop", [] {
    nb::list out;
    for (const profiler::Event& e : profiler::stop()) {
      nb::list shapes;
      for (const Shape& s : e.shapes) shapes.append(shape_tuple(s));
      out.append(nb::make_tuple(e.name, e.start_ns, e.end_ns, e.depth, e.is_range, shapes));
    }
    return out;
  });
  m.def("_profiler_enabled", &profiler::enabled);
  m.def("_profiler_range_push", &profiler::range_push);
  m.def("_profiler_range_pop", &profiler::range_pop);
  m.def("_profiler_now_ns", &profiler::now_ns);

  // ---- determinism and backends
  m.def("use_deterministic_algorithms", &use_deterministic_algorithms, "mode"_a, nb::kw_only(), "warn_only"_a = false);
  m.def("are_deterministic_algorithms_enabled", &are_deterministic_algorithms_enabled);
  m.def("is_deterministic_algorithms_warn_only_enabled", &is_deterministic_algorithms_warn_only_enabled);
}

}  // namespace kiln::py
