// Tensor: properties, Python protocols and operators.
#include <Python.h>

#include "common.h"
#include "kiln/core/stream.h"

namespace kiln::py {

namespace {

// A Tensor subclass or an object with __kiln_function__ among the operands: the operator goes to
// its handler (bind_protocol.cpp) as Tensor.<name>, as torch's operators do.
PyTypeObject* g_tensor_type_obj = nullptr;  // kiln.Tensor, set by bind_tensor
bool overridden(const char* name, nb::handle a, nb::handle b, nb::object& r) {
  auto simple = [](PyObject* o) {
    PyTypeObject* t = Py_TYPE(o);
    return t == g_tensor_type_obj || t == &PyLong_Type || t == &PyFloat_Type || t == &PyBool_Type ||
           t == &PyComplex_Type;
  };
  if (simple(a.ptr()) && simple(b.ptr())) return false;  // the fast path: one or two comparisons
  PyObject* argv[2] = {a.ptr(), b.ptr()};
  nb::object func = nb::getattr(nb::type<Tensor>(), name);
  bool handled = false;
  PyObject* res = function_overrides(func.ptr(), argv, 2, nullptr, &handled);
  if (!handled) return false;
  if (!res) throw nb::python_error();
  r = nb::steal(res);
  return true;
}

nb::object binop(const char* name, nb::handle a, nb::handle b, Tensor (*f)(const Tensor&, const Tensor&)) {
  nb::object r;
  if (overridden(name, a, b, r)) return r;
  if (!nb::isinstance<Tensor>(b) && !is_number(b)) return nb::borrow(Py_NotImplemented);
  return nb::cast(f(nb::cast<Tensor>(a), as_tensor(b)));
}
nb::object rbinop(const char* name, nb::handle a, nb::handle b, Tensor (*f)(const Tensor&, const Tensor&)) {
  nb::object r;
  if (overridden(name, a, b, r)) return r;
  if (!is_number(b)) return nb::borrow(Py_NotImplemented);
  return nb::cast(f(as_tensor(b), nb::cast<Tensor>(a)));
}
nb::object ibinop(const char* name, nb::handle a, nb::handle b, const Tensor& (*f)(const Tensor&, const Tensor&)) {
  nb::object r;
  if (overridden(name, a, b, r)) return r;
  if (!nb::isinstance<Tensor>(b) && !is_number(b)) return nb::borrow(Py_NotImplemented);
  f(nb::cast<Tensor>(a), as_tensor(b));
  return nb::borrow(a);
}

// torch's reflected forms: `s * x` is x.mul(s) (the number second, where mul reads it in float32
// for float16 / bfloat16), `s / x` is x.reciprocal() * s (torch/_tensor.py's __rdiv__).
nb::object rmul(nb::handle a, nb::handle b) {
  nb::object r;
  if (overridden("__rmul__", a, b, r)) return r;
  if (!is_number(b)) return nb::borrow(Py_NotImplemented);
  return nb::cast(mul(nb::cast<Tensor>(a), as_tensor(b)));
}
nb::object rtruediv(nb::handle a, nb::handle b) {
  nb::object r;
  if (overridden("__rtruediv__", a, b, r)) return r;
  if (!is_number(b)) return nb::borrow(Py_NotImplemented);
  return nb::cast(mul(reciprocal(nb::cast<Tensor>(a)), as_tensor(b)));
}
Tensor add2(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor sub2(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor div2(const Tensor& a, const Tensor& b) { return div(a, b); }
const Tensor& iadd2(const Tensor& a, const Tensor& b) { return add_(a, b); }
const Tensor& isub2(const Tensor& a, const Tensor& b) { return sub_(a, b); }
const Tensor& idiv2(const Tensor& a, const Tensor& b) { return div_(a, b); }
Tensor pow2(const Tensor& a, const Tensor& b) { return pow(a, b); }
Tensor mm2(const Tensor& a, const Tensor& b) { return matmul(a, b); }
// int() / float() of a tensor: one element only (torch's ValueError)
const Tensor& one_element(const Tensor& t) {
  func::check_data_read(t, "int() / float()");
  stream_detail::before_host_read();
  KILN_CHECK(t.numel() == 1, Value, "item", "only one element tensors can be converted to Python scalars");
  return t;
}

bool truthy(const Tensor& t) {
  func::check_data_read(t, "bool()");
  stream_detail::before_host_read();
  KILN_CHECK(t.numel() == 1, Runtime, "bool", "Boolean value of Tensor with more than one value is ambiguous");
  return t.item<bool>();
}

}  // namespace

void bind_tensor(nb::module_& m, nb::class_<Tensor>& cls) {
  g_tensor_type_obj = reinterpret_cast<PyTypeObject*>(cls.ptr());
  cls.def(nb::init<const Tensor&>(), "data"_a);  // shares the TensorImpl (used by nn.Parameter)
  cls.def_prop_ro("shape", [](const Tensor& t) { return sym_shape_tuple(t); })
      .def_prop_ro("dtype", [](const Tensor& t) { return dtype_object(t.dtype()); })
      .def_prop_ro("ndim", &Tensor::dim)
      .def_prop_ro("device", [](const Tensor& t) { return t.device(); })
      .def_prop_ro("is_meta", &Tensor::is_meta)
      .def_prop_ro("is_cpu", &Tensor::is_cpu)
      .def_prop_ro("is_cuda", [](const Tensor& t) { return t.device().type == DeviceType::CUDA; })
      .def("get_device", [](const Tensor& t) { return t.is_cpu() ? -1 : t.device().index; })
      .def("cpu", [](nb::handle self) -> nb::object {
        const Tensor& t = nb::cast<const Tensor&>(self);
        return t.is_cpu() ? nb::borrow(self) : nb::cast(to_device(t, kCPU));
      })
      .def("cuda", [](const Tensor& t, nb::handle device) {
        Device d = device.is_none() ? Device{DeviceType::CUDA, -1} : as_device(device);
        return to_device(t, d);
      }, "device"_a.none() = nb::none())
      .def_prop_ro("T", [](const Tensor& t) {
        Shape p(t.dim());
        for (int64_t i = 0; i < t.dim(); ++i) p[i] = t.dim() - 1 - i;
        return permute(t, p);
      })
      .def_prop_ro("mT", [](const Tensor& t) { return mT(t); })
      .def_prop_ro("mH", [](const Tensor& t) {
        KILN_CHECK(t.dim() >= 2, Runtime, "mH", "tensor.mH is only supported on matrices or batches of matrices. "
                   "Got ", t.dim(), "-D tensor.");
        return conj(mT(t));
      })
      .def_prop_ro("H", [](const Tensor& t) {
        KILN_CHECK(t.dim() == 2 || t.dim() == 0, Runtime, "H", "tensor.H is only supported on matrices (2-D "
                   "tensors). Got ", t.dim(), "-D tensor.");
        return t.dim() == 0 ? t : conj(mT(t));
      })
      .def_prop_ro("real", [](const Tensor& t) { return real(t); })
      .def_prop_ro("imag", [](const Tensor& t) { return imag(t); })
      .def_prop_ro("itemsize", [](const Tensor& t) { return t.itemsize(); })
      .def_prop_ro("nbytes", [](const Tensor& t) { return t.nbytes(); })
      .def_prop_ro("_version", &Tensor::version)
      .def("dim", &Tensor::dim)
      .def("ndimension", &Tensor::dim)
      .def("numel", [](const Tensor& t) { return symint_object(t.sym_numel()); })
      .def("nelement", [](const Tensor& t) { return symint_object(t.sym_numel()); })
      .def("element_size", [](const Tensor& t) { return t.itemsize(); })
      .def("size", [](const Tensor& t, nb::handle d) -> nb::object {
        if (d.is_none()) return sym_shape_tuple(t);
        return symint_object(t.sym_size(nb::cast<int64_t>(d)));
      }, "dim"_a.none() = nb::none())
      .def("stride", [](const Tensor& t, nb::handle d) -> nb::object {
        if (d.is_none()) return shape_tuple(t.strides());
        return nb::int_(t.stride(nb::cast<int64_t>(d)));
      }, "dim"_a.none() = nb::none())
      .def("storage_offset", [](const Tensor& t) { return t.storage_offset(); })
      .def("resize_", [](Tensor& t, nb::args size) -> Tensor& {
        // out= semantics: a fresh contiguous block of the new shape, same dtype (data not kept)
        KILN_CHECK(!t.requires_grad(), Runtime, "resize_", "cannot resize variables that require grad");
        Shape s = shape_from_args(size);
        if (s != t.sizes()) {
          KILN_CHECK(t.storage()->resizable() || storage_bytes_for(s, t.itemsize()) <= t.storage()->nbytes(), Runtime, "resize_",
                     "Trying to resize storage that is not resizable");
          Tensor fresh = make_tensor(s, t.dtype(), t.device());
          *t.impl() = *fresh.impl();
        }
        return t;
      }, nb::rv_policy::reference)
      .def("is_contiguous", [](const Tensor& t) { return t.is_contiguous(); })
      .def("is_floating_point", &Tensor::is_floating_point)
      .def("is_complex", &Tensor::is_complex)
      .def("data_ptr", [](const Tensor& t) { stream_detail::before_host_read(); return t.is_meta() ? uintptr_t(0) : reinterpret_cast<uintptr_t>(t.data_ptr()); })
      .def("untyped_storage_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.storage()->data()); })
      .def("item", [](const Tensor& t) -> nb::object {
        func::check_data_read(t, "item");
        stream_detail::before_host_read();
        Scalar s = t.item();
        switch (s.tag()) {
          case Scalar::Tag::Bool: return nb::bool_(s.to<bool>());
          case Scalar::Tag::Int: return nb::int_(s.to<int64_t>());
          case Scalar::Tag::UInt: return nb::int_(s.to<uint64_t>());
          case Scalar::Tag::Double: return nb::float_(s.to_double());
          default: {
            auto c = s.to_complex();
            return nb::steal(PyComplex_FromDoubles(c.real(), c.imag()));
          }
        }
      })
      .def("tolist", [](const Tensor& t) {
        func::check_data_read(t, "tolist()");
        stream_detail::before_host_read();
        return to_list(t);
      })
      .def("__repr__", [](const Tensor& t) { return repr(t); })
      .def("__str__", [](const Tensor& t) { return repr(t); })
      .def("__len__", [](const Tensor& t) {
        KILN_CHECK(t.dim() > 0, Type, "len", "len() of a 0-d tensor");
        return t.sizes()[0];
      })
      .def("__bool__", &truthy)
      .def("__float__", [](const Tensor& t) { return one_element(t).item().to_double(); })
      .def("__int__", [](const Tensor& t) { return one_element(t).item().to<int64_t>(); })
      .def("__index__", [](const Tensor& t) {
        func::check_data_read(t, "an index");
        stream_detail::before_host_read();
        KILN_CHECK(is_integral(t.dtype(), true) && t.numel() == 1, Type, "index", "only integer tensors of a "
                   "single element can be converted to an index");
        return t.item().to<int64_t>();
      })
      .def("__hash__", [](nb::handle h) { return reinterpret_cast<intptr_t>(h.ptr()); })
      .def("__iter__", [](const Tensor& t) {
        KILN_CHECK(t.dim() > 0, Type, "iter", "iteration over a 0-d tensor");
        nb::list l;
        for (const Tensor& x : unbind(t, 0)) l.append(nb::cast(x));
        return nb::iter(l);
      })
      .def("__getitem__", [](const Tensor& t, nb::handle i) { return getitem(t, i); }, nb::arg("index").none())
      .def("__setitem__", [](const Tensor& t, nb::handle i, nb::handle v) { setitem(t, i, v); },
           nb::arg("index").none(), nb::arg("value").none())
      .def("__add__", [](nb::handle a, nb::handle b) { return binop("__add__", a, b, add2); })
      .def("__radd__", [](nb::handle a, nb::handle b) { return rbinop("__radd__", a, b, add2); })
      .def("__iadd__", [](nb::handle a, nb::handle b) { return ibinop("__iadd__", a, b, iadd2); })
      .def("__sub__", [](nb::handle a, nb::handle b) { return binop("__sub__", a, b, sub2); })
      .def("__rsub__", [](nb::handle a, nb::handle b) { return rbinop("__rsub__", a, b, sub2); })
      .def("__isub__", [](nb::handle a, nb::handle b) { return ibinop("__isub__", a, b, isub2); })
      .def("__mul__", [](nb::handle a, nb::handle b) { return binop("__mul__", a, b, mul); })
      .def("__rmul__", rmul)
      .def("__imul__", [](nb::handle a, nb::handle b) { return ibinop("__imul__", a, b, mul_); })
      .def("__truediv__", [](nb::handle a, nb::handle b) { return binop("__truediv__", a, b, div2); })
      .def("__rtruediv__", rtruediv)
      .def("__itruediv__", [](nb::handle a, nb::handle b) { return ibinop("__itruediv__", a, b, idiv2); })
      .def("__floordiv__", [](nb::handle a, nb::handle b) { return binop("__floordiv__", a, b, floor_divide); })
      .def("__rfloordiv__", [](nb::handle a, nb::handle b) { return rbinop("__rfloordiv__", a, b, floor_divide); })
      .def("__ifloordiv__", [](nb::handle a, nb::handle b) { return ibinop("__ifloordiv__", a, b, floor_divide_); })
      .def("__mod__", [](nb::handle a, nb::handle b) { return binop("__mod__", a, b, remainder); })
      .def("__rmod__", [](nb::handle a, nb::handle b) { return rbinop("__rmod__", a, b, remainder); })
      .def("__imod__", [](nb::handle a, nb::handle b) { return ibinop("__imod__", a, b, remainder_); })
      .def("__pow__", [](nb::handle a, nb::handle b) { return binop("__pow__", a, b, pow2); })
      .def("__rpow__", [](nb::handle a, nb::handle b) { return rbinop("__rpow__", a, b, pow2); })
      .def("__ipow__", [](nb::handle a, nb::handle b) { return ibinop("__ipow__", a, b, pow_); })
      // a Python number is no matrix: NotImplemented, so Python raises TypeError (as torch)
      .def("__matmul__", [](nb::handle a, nb::handle b) -> nb::object {
        if (!nb::isinstance<Tensor>(b)) return nb::borrow(Py_NotImplemented);
        return binop("__matmul__", a, b, mm2);
      })
      .def("__rmatmul__", [](nb::handle, nb::handle) -> nb::object { return nb::borrow(Py_NotImplemented); })
      .def("__and__", [](nb::handle a, nb::handle b) { return binop("__and__", a, b, bitwise_and); })
      .def("__rand__", [](nb::handle a, nb::handle b) { return rbinop("__rand__", a, b, bitwise_and); })
      .def("__iand__", [](nb::handle a, nb::handle b) { return ibinop("__iand__", a, b, bitwise_and_); })
      .def("__or__", [](nb::handle a, nb::handle b) { return binop("__or__", a, b, bitwise_or); })
      .def("__ror__", [](nb::handle a, nb::handle b) { return rbinop("__ror__", a, b, bitwise_or); })
      .def("__ior__", [](nb::handle a, nb::handle b) { return ibinop("__ior__", a, b, bitwise_or_); })
      .def("__xor__", [](nb::handle a, nb::handle b) { return binop("__xor__", a, b, bitwise_xor); })
      .def("__rxor__", [](nb::handle a, nb::handle b) { return rbinop("__rxor__", a, b, bitwise_xor); })
      .def("__ixor__", [](nb::handle a, nb::handle b) { return ibinop("__ixor__", a, b, bitwise_xor_); })
      .def("__lshift__", [](nb::handle a, nb::handle b) { return binop("__lshift__", a, b, bitwise_left_shift); })
      .def("__rlshift__", [](nb::handle a, nb::handle b) { return rbinop("__rlshift__", a, b, bitwise_left_shift); })
      .def("__ilshift__", [](nb::handle a, nb::handle b) { return ibinop("__ilshift__", a, b, bitwise_left_shift_); })
      .def("__rshift__", [](nb::handle a, nb::handle b) { return binop("__rshift__", a, b, bitwise_right_shift); })
      .def("__rrshift__", [](nb::handle a, nb::handle b) { return rbinop("__rrshift__", a, b, bitwise_right_shift); })
      .def("__irshift__", [](nb::handle a, nb::handle b) { return ibinop("__irshift__", a, b, bitwise_right_shift_); })
      .def("__eq__", [](nb::handle a, nb::handle b) { return binop("__eq__", a, b, eq); })
      .def("__ne__", [](nb::handle a, nb::handle b) { return binop("__ne__", a, b, ne); })
      .def("__lt__", [](nb::handle a, nb::handle b) { return binop("__lt__", a, b, lt); })
      .def("__le__", [](nb::handle a, nb::handle b) { return binop("__le__", a, b, le); })
      .def("__gt__", [](nb::handle a, nb::handle b) { return binop("__gt__", a, b, gt); })
      .def("__ge__", [](nb::handle a, nb::handle b) { return binop("__ge__", a, b, ge); })
      .def("__neg__", [](const Tensor& t) { return neg(t); })
      .def("__pos__", [](const Tensor& t) { return t; })
      .def("__abs__", [](const Tensor& t) { return abs(t); })
      .def("__invert__", [](const Tensor& t) { return bitwise_not(t); });
}

}  // namespace kiln::py
