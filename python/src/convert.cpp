// Argument conversion and dtype objects.
#include <Python.h>

#include <complex>
#include <cstring>

#include "common.h"
#include "kiln/core/stream.h"
#include "kiln/ops/shape.h"

namespace kiln::py {

namespace {
nb::object g_dtypes[kNumDtypes];
}

nb::object dtype_object(Dtype d) { return g_dtypes[static_cast<int>(d)]; }

Dtype as_dtype(nb::handle h) {
  if (nb::isinstance<PyDtype>(h)) return nb::cast<PyDtype&>(h).d;
  // a torch.dtype too (by its name), and Python's scalar types as torch takes them; not a string or a
  // numpy dtype (torch's TypeError)
  const std::string tname = nb::type_name(h.type()).c_str();
  const std::string mod = nb::hasattr(h.type(), "__module__") ? nb::str(h.type().attr("__module__")).c_str() : "";
  const bool numpy = mod.rfind("numpy", 0) == 0 && nb::hasattr(h, "kind");  // a numpy dtype (kiln's own use)
  if ((mod == "torch" && tname.find("dtype") != std::string::npos) || numpy) {
    std::string name = nb::str(h).c_str();
    if (!numpy) name = name.substr(6);  // "torch."
    for (int i = 0; i < kNumDtypes; ++i)
      if (name == dtype_name(static_cast<Dtype>(i))) return static_cast<Dtype>(i);
    static const std::pair<const char*, Dtype> alias[] = {
        {"float", kFloat32}, {"double", kFloat64}, {"half", kFloat16}, {"int", kInt32},
        {"long", kInt64}, {"short", kInt16}, {"cfloat", kComplex64}, {"cdouble", kComplex128}};
    for (auto& [n, d] : alias)
      if (name == n) return d;
  }
  if (h.is(reinterpret_cast<PyObject*>(&PyFloat_Type))) return kFloat64;
  if (h.is(reinterpret_cast<PyObject*>(&PyLong_Type))) return kInt64;
  if (h.is(reinterpret_cast<PyObject*>(&PyBool_Type))) return kBool;
  if (h.is(reinterpret_cast<PyObject*>(&PyComplex_Type))) return kComplex128;
  throw nb::type_error(("argument 'dtype' must be kiln.dtype, not " + tname).c_str());
}

std::optional<Dtype> as_opt_dtype(nb::handle h) {
  if (!h.is_valid() || h.is_none()) return std::nullopt;
  return as_dtype(h);
}

bool is_number(nb::handle h) {
  PyObject* o = h.ptr();
  return PyBool_Check(o) || PyLong_Check(o) || PyFloat_Check(o) || PyComplex_Check(o);
}

Scalar as_scalar(nb::handle h) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) return Scalar(o == Py_True);
  if (PyLong_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    // beyond uint64 either way: Python's OverflowError with its words, as torch's argument parser
    if (overflow > 0) {
      unsigned long long u = PyLong_AsUnsignedLongLong(o);  // sets OverflowError("int too big to convert")
      if (PyErr_Occurred()) throw nb::python_error();
      return Scalar(static_cast<uint64_t>(u));
    }
    if (overflow < 0) {
      PyErr_SetString(PyExc_OverflowError, "can't convert negative int to unsigned");
      throw nb::python_error();
    }
    return Scalar(static_cast<int64_t>(v));
  }
  if (PyFloat_Check(o)) return Scalar(PyFloat_AS_DOUBLE(o));
  if (PyComplex_Check(o)) return Scalar(std::complex<double>(PyComplex_RealAsDouble(o), PyComplex_ImagAsDouble(o)));
  if (nb::isinstance<Tensor>(h)) {
    Tensor& t = nb::cast<Tensor&>(h);
    return t.item();
  }
  // numpy scalars and other numbers
  if (PyIndex_Check(o)) return Scalar(static_cast<int64_t>(nb::cast<int64_t>(nb::int_(h))));
  if (PyNumber_Check(o)) return Scalar(nb::cast<double>(nb::float_(h)));
  throw nb::type_error(("expected a number, got " + std::string(nb::str(h.type()).c_str())).c_str());
}

Tensor as_tensor(nb::handle h, const char* op) {
  if (nb::isinstance<Tensor>(h)) return nb::cast<Tensor>(h);
  if (is_number(h)) return scalar_tensor(as_scalar(h), Dtype::Undefined, true);
  throw nb::type_error((std::string(op) + "(): expected a Tensor or a number, got " +
                        nb::str(h.type()).c_str()).c_str());
}

Shape as_shape(nb::handle h) {
  if (nb::isinstance<SymInt>(h)) return {size_arg(h)};
  if (PyLong_Check(h.ptr()) || PyIndex_Check(h.ptr())) return {nb::cast<int64_t>(h)};
  if (nb::isinstance<Tensor>(h)) {
    Tensor t = nb::cast<Tensor>(h);
    Shape s;
    Tensor c = contiguous(to_dtype(t, kInt64));
    stream_detail::before_host_read();
    const int64_t* p = static_cast<const int64_t*>(c.data_ptr());
    s.assign(p, p + c.numel());
    return s;
  }
  Shape s;
  for (nb::handle x : h) s.push_back(size_arg(x));
  return s;
}

Shape shape_from_args(const nb::args& args) {
  if (args.size() == 1 && !PyLong_Check(args[0].ptr()) && !nb::isinstance<SymInt>(args[0])) return as_shape(args[0]);
  Shape s;
  for (nb::handle x : args) s.push_back(size_arg(x));
  return s;
}

std::optional<Shape> as_dims(nb::handle h) {
  if (!h.is_valid() || h.is_none()) return std::nullopt;
  return as_shape(h);
}

nb::tuple shape_tuple(const Shape& s) {
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(s.size()));
  for (size_t i = 0; i < s.size(); ++i) PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(s[i]));
  return nb::steal<nb::tuple>(t);
}

// ---- nested data -> tensor ------------------------------------------------------------------------
namespace {
struct Collect {
  static constexpr size_t kMaxDims = 128;  // torch's limit on nesting
  std::vector<Scalar> vals;
  Shape shape;
  // torch's inference: the promotion of every element's type (a bool Bool, an int Long, a float the
  // default dtype, a complex the default complex dtype; a tensor or a numpy scalar its own dtype)
  std::optional<Dtype> inferred;
  bool numpy_bool = false;  // an np.bool_ element: torch cannot read one into an integer tensor
  void see(Dtype d) { inferred = inferred ? promote_types(*inferred, d) : d; }
  // a numpy scalar (np.float16(1), np.int32(3), np.float64 too, though it is a Python float)
  static bool is_numpy_scalar(nb::handle h) {
    return std::strncmp(Py_TYPE(h.ptr())->tp_name, "numpy.", 6) == 0 && !PySequence_Check(h.ptr()) &&
           nb::hasattr(h, "dtype");
  }

  // torch's shape inference: the lengths along the first elements (a string opens no dimension)
  static bool opens_dim(nb::handle h) {
    if (nb::isinstance<Tensor>(h)) return false;  // a tensor inside data is one element, as torch's
    return !is_number(h) && PySequence_Check(h.ptr()) && !PyUnicode_Check(h.ptr()) && !PyBytes_Check(h.ptr()) &&
           !PyByteArray_Check(h.ptr());
  }
  void infer(nb::handle h) {
    nb::object cur = nb::borrow(h);
    while (opens_dim(cur) && !nb::isinstance<Tensor>(cur)) {
      if (shape.size() >= kMaxDims) throw nb::value_error("too many dimensions 'list'");
      const Py_ssize_t n = PySequence_Size(cur.ptr());
      if (n < 0) throw nb::python_error();
      shape.push_back(n);
      if (n == 0) return;
      cur = nb::steal(PySequence_GetItem(cur.ptr(), 0));
      if (!cur.is_valid()) throw nb::python_error();
    }
    if (PyUnicode_Check(cur.ptr())) {  // torch reads a string as a sequence here: nesting without end
      if (!shape.empty()) throw nb::value_error("too many dimensions 'str'");
      throw nb::type_error("new(): invalid data type 'str'");
    }
  }

  // torch infers the dtype from every element, whatever the shape: strings and objects raise even
  // where no element is read (an empty dimension)
  static std::string type_name(nb::handle h) { return nb::cast<std::string>(nb::str(h.type().attr("__name__"))); }
  static void scan_types(nb::handle h, size_t depth) {
    if (is_number(h) || nb::isinstance<Tensor>(h) || is_numpy_scalar(h)) return;
    if (PyUnicode_Check(h.ptr()) || PyBytes_Check(h.ptr()) || PyByteArray_Check(h.ptr()))
      throw nb::type_error(("new(): invalid data type '" + type_name(h) + "'").c_str());
    if (!PySequence_Check(h.ptr())) KILN_FAIL(Runtime, "tensor", "Could not infer dtype of ", type_name(h));
    if (depth >= kMaxDims) throw nb::value_error(("too many dimensions '" + type_name(h) + "'").c_str());
    const Py_ssize_t n = PySequence_Size(h.ptr());
    if (n < 0) throw nb::python_error();
    for (Py_ssize_t i = 0; i < n; ++i) {
      nb::object item = nb::steal(PySequence_GetItem(h.ptr(), i));
      if (!item.is_valid()) throw nb::python_error();
      scan_types(item, depth + 1);
    }
  }

  void walk(nb::handle h, size_t depth) {
    if (is_numpy_scalar(h)) {
      if (depth != shape.size()) throw nb::type_error("not a sequence");
      const Dtype nd = as_dtype(h.attr("dtype"));
      see(nd);
      if (nd == kBool) numpy_bool = true;
      vals.push_back(as_scalar(h.attr("item")()));  // its value as a Python number
      return;
    }
    if (is_number(h)) {
      if (depth != shape.size()) throw nb::type_error("not a sequence");
      PyObject* o = h.ptr();
      if (PyBool_Check(o)) see(kBool);
      else if (PyLong_Check(o)) see(kInt64);
      else if (PyFloat_Check(o)) see(default_dtype());
      else see(default_complex_dtype());
      if (PyLong_Check(o) && !PyBool_Check(o)) {  // tensor() holds ints as int64: beyond it, torch's ValueError
        int overflow = 0;
        const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow) throw nb::value_error("Overflow when unpacking long long");
        vals.push_back(Scalar(static_cast<int64_t>(v)));
        return;
      }
      vals.push_back(as_scalar(h));
      return;
    }
    if (nb::isinstance<Tensor>(h)) {
      // one element, whatever its dims (torch reads it as a number: through __index__ for an integer
      // tensor, __float__ otherwise, hence its two errors)
      Tensor t = nb::cast<Tensor>(h);
      if (depth != shape.size()) throw nb::type_error("not a sequence");
      if (t.numel() != 1) {
        if (is_integral(t.dtype(), true))
          throw nb::type_error("only integer tensors of a single element can be converted to an index");
        throw nb::value_error("only one element tensors can be converted to Python scalars");
      }
      see(t.dtype());
      vals.push_back(t.reshape({}).item());
      return;
    }
    // (a string on the first-element path was refused by infer(); anywhere else it is an element of
    // an invalid type, as torch)
    if (PyUnicode_Check(h.ptr()) || PyBytes_Check(h.ptr()) || PyByteArray_Check(h.ptr()))
      throw nb::type_error(("new(): invalid data type '" + type_name(h) + "'").c_str());
    if (!PySequence_Check(h.ptr())) KILN_FAIL(Runtime, "tensor", "Could not infer dtype of ", type_name(h));
    Py_ssize_t n = PySequence_Size(h.ptr());
    if (n < 0) throw nb::python_error();
    if (depth >= shape.size()) {  // a sequence where the inferred shape has an element
      throw nb::type_error(("'" + type_name(h) + "' object cannot be interpreted as a number").c_str());
    } else if (shape[depth] != n) {
      throw nb::value_error(("expected sequence of length " + std::to_string(shape[depth]) + " at dim " +
                             std::to_string(depth) + " (got " + std::to_string(n) + ")").c_str());
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
      nb::object item = nb::steal(PySequence_GetItem(h.ptr(), i));
      walk(item, depth + 1);
    }
  }
};
}  // namespace

Tensor tensor_from_data(nb::handle data, std::optional<Dtype> dtype) {
  if (nb::isinstance<Tensor>(data)) {
    Tensor t = nb::cast<Tensor>(data);
    return to_dtype(t, dtype.value_or(t.dtype()), true);
  }
  if (nb::hasattr(data, "__array_interface__") && !is_number(data) && !Collect::is_numpy_scalar(data)) {
    // asarray(order="C"), not ascontiguousarray, which makes a 0-d array 1-d
    Tensor t = tensor_from_numpy(nb::module_::import_("numpy").attr("asarray")(data, "order"_a = "C"), false);
    return to_dtype(t, dtype.value_or(t.dtype()), true);
  }
  Collect c;
  c.infer(data);
  // torch infers the dtype (visiting every element) before it reads any; with no element to read
  // (an empty dimension) that is the only check, as torch's
  const bool empty = shape_numel(c.shape) == 0 && !c.shape.empty();
  if (!dtype || empty) Collect::scan_types(data, 0);
  if (!empty) c.walk(data, 0);
  const Dtype d = dtype ? *dtype : c.inferred.value_or(default_dtype());  // an empty list: the default
  if (c.numpy_bool && is_integral(d, false))  // torch reads an integer through __index__, which np.bool_ lacks
    throw nb::type_error("'numpy.bool' object cannot be interpreted as an integer");
  // torch's checked conversions: a complex number into a real type is a TypeError; an integer target
  // refuses values beyond its range (RuntimeError; -1 into uint8 wraps, as c10's check allows)
  if (!is_complex(d))
    for (const Scalar& v : c.vals)
      if (v.is_complex()) throw nb::type_error("must be real number, not complex");
  if (is_integral(d, false))
    for (const Scalar& v : c.vals) shape_detail::check_scalar_fits(v, d, "tensor");
  Tensor t = make_tensor(c.shape, d);
  visit_all(d, "tensor", [&]<class T>() {
    T* p = static_cast<T*>(t.data_ptr());
    for (size_t i = 0; i < c.vals.size(); ++i) {
      if constexpr (is_float_v<T> && !std::is_floating_point_v<T>) p[i] = T(c.vals[i].to<float>());
      else p[i] = c.vals[i].to<T>();
    }
  });
  return t;
}

namespace {
nb::object elem_object(const char* p, Dtype d) {
  return visit_all(d, "tolist", [&]<class T>() -> nb::object {
    T v = *reinterpret_cast<const T*>(p);
    if constexpr (std::is_same_v<T, bool>) return nb::bool_(v);
    else if constexpr (std::is_integral_v<T>) return nb::int_(v);
    else if constexpr (is_complex_v<T>)
      return nb::steal(PyComplex_FromDoubles(static_cast<double>(v.real()), static_cast<double>(v.imag())));
    else if constexpr (std::is_floating_point_v<T>) return nb::float_(static_cast<double>(v));
    else return nb::float_(static_cast<double>(static_cast<float>(v)));
  });
}
nb::object list_rec(const Tensor& t, const char* p, int64_t d) {
  if (d == t.dim()) return elem_object(p, t.dtype());
  const int64_t n = t.sizes()[d];
  PyObject* l = PyList_New(n);
  if (!l) throw nb::python_error();  // a list too long for memory: MemoryError, not a crash
  if (t.numel() == 0) {  // (an empty tensor's strides are unchecked: no address arithmetic on them)
    for (int64_t i = 0; i < n; ++i) PyList_SET_ITEM(l, i, list_rec(t, p, d + 1).release().ptr());
    return nb::steal(l);
  }
  const int64_t st = t.strides()[d] * static_cast<int64_t>(t.itemsize());
  for (int64_t i = 0; i < n; ++i) PyList_SET_ITEM(l, i, list_rec(t, p + i * st, d + 1).release().ptr());
  return nb::steal(l);
}
}  // namespace

nb::object to_list(const Tensor& t) {
  KILN_CHECK(!t.is_meta(), NotImplemented, "tolist", "Cannot copy out of meta tensor; no data!");
  stream_detail::before_host_read();
  return list_rec(t, static_cast<const char*>(t.data_ptr()), 0); }

Device as_device(nb::handle h) {
  if (nb::isinstance<Device>(h)) return nb::cast<Device>(h);
  if (nb::isinstance<nb::str>(h)) return parse_device(nb::cast<std::string>(h));
  if (nb::isinstance<nb::int_>(h) && !nb::isinstance<nb::bool_>(h))  // the current accelerator's index
    KILN_FAIL(Runtime, "device", "Cannot access accelerator device when none is available.");
  KILN_FAIL(Type, "device", "expected a device (kiln.device, str or int), but got ",
            nb::cast<std::string>(nb::str(h.type().attr("__name__"))));
}
std::optional<Device> as_opt_device(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return as_device(h);
}
TensorOptions opts(nb::handle dtype, nb::handle device) {
  TensorOptions o;
  if (auto d = as_opt_dtype(dtype)) o = o.dtype(*d);
  if (auto d = as_opt_device(device)) o = o.device(*d);
  return o;
}

void bind_device(nb::module_& m) {
  nb::class_<Device>(m, "device")
      .def("__init__", [](Device* self, nb::handle type, nb::handle index) {
        Device d = as_device(type);
        if (!index.is_none()) {
          KILN_CHECK(nb::isinstance<nb::str>(type) && d.index < 0, Runtime, "device",
                     "type (string) must not include an index because index was passed explicitly: ",
                     nb::cast<std::string>(nb::str(type)));
          int64_t i = nb::cast<int64_t>(index);
          KILN_CHECK(i >= 0, Runtime, "device", "Device index must not be negative");
          d.index = static_cast<int>(i);
        }
        new (self) Device(d);
      }, "type"_a, "index"_a.none() = nb::none())
      .def_prop_ro("type", [](const Device& d) { return device_type_name(d.type); })
      .def_prop_ro("index", [](const Device& d) -> nb::object {
        return d.index < 0 ? nb::object(nb::none()) : nb::object(nb::int_(d.index));
      })
      .def("__eq__", [](const Device& a, nb::handle b) {
        return nb::isinstance<Device>(b) && nb::cast<Device>(b) == a;
      })
      .def("__ne__", [](const Device& a, nb::handle b) {
        return !(nb::isinstance<Device>(b) && nb::cast<Device>(b) == a);
      })
      .def("__hash__", [](const Device& d) { return static_cast<int64_t>(d.type) * 1000 + d.index; })
      .def("__str__", [](const Device& d) { return device_str(d); })
      .def("__repr__", [](const Device& d) {
        std::string s = std::string("device(type='") + device_type_name(d.type) + "'";
        if (d.index >= 0) s += ", index=" + std::to_string(d.index);
        return s + ")";
      })
      .def("__reduce__", [](const Device& d) {
        return nb::make_tuple(nb::module_::import_("kiln").attr("device"), nb::make_tuple(device_str(d)));
      });
}

void bind_dtype(nb::module_& m) {
  nb::class_<PyDtype>(m, "dtype")
      .def("__repr__", [](const PyDtype& d) { return "kiln." + std::string(dtype_name(d.d)); })
      .def("__eq__", [](const PyDtype& a, nb::handle b) {
        return nb::isinstance<PyDtype>(b) && nb::cast<PyDtype&>(b).d == a.d;
      })
      .def("__hash__", [](const PyDtype& d) { return static_cast<int>(d.d); })
      .def_prop_ro("is_floating_point", [](const PyDtype& d) { return is_floating(d.d); })
      .def_prop_ro("is_complex", [](const PyDtype& d) { return is_complex(d.d); })
      .def_prop_ro("is_signed", [](const PyDtype& d) { return !is_unsigned(d.d); })
      .def_prop_ro("itemsize", [](const PyDtype& d) { return itemsize(d.d); })
      .def_prop_ro("name", [](const PyDtype& d) { return std::string(dtype_name(d.d)); });
  for (int i = 0; i < kNumDtypes; ++i) {
    Dtype d = static_cast<Dtype>(i);
    g_dtypes[i] = nb::cast(PyDtype{d});
    m.attr(std::string(dtype_name(d)).c_str()) = g_dtypes[i];
  }
  m.attr("float") = g_dtypes[static_cast<int>(kFloat32)];
  m.attr("double") = g_dtypes[static_cast<int>(kFloat64)];
  m.attr("half") = g_dtypes[static_cast<int>(kFloat16)];
  m.attr("long") = g_dtypes[static_cast<int>(kInt64)];
  m.attr("int") = g_dtypes[static_cast<int>(kInt32)];
  m.attr("short") = g_dtypes[static_cast<int>(kInt16)];
  m.attr("cfloat") = g_dtypes[static_cast<int>(kComplex64)];
  m.attr("cdouble") = g_dtypes[static_cast<int>(kComplex128)];
  m.def("promote_types", [](nb::handle a, nb::handle b) { return dtype_object(promote_types(as_dtype(a), as_dtype(b))); });
  m.def("can_cast", [](nb::handle a, nb::handle b) { return can_cast(as_dtype(a), as_dtype(b)); });
  m.def("get_default_dtype", []() { return dtype_object(default_dtype()); });
  m.def("set_default_dtype", [](nb::handle d) { set_default_dtype(as_dtype(d)); });
  m.def("result_type", [](nb::handle a, nb::handle b) {
    return dtype_object(result_type(as_tensor(a, "result_type"), as_tensor(b, "result_type")));
  });
}

}  // namespace kiln::py
