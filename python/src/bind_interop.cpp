// numpy and DLPack interop without copies.
#include <Python.h>
#include <nanobind/ndarray.h>

#include "common.h"
#include "kiln/core/stream.h"

namespace kiln::py {
namespace {

// DLPack ABI (the public v0.8 structs, unversioned capsule "dltensor").
struct DLDevice { int32_t device_type; int32_t device_id; };
struct DLDataType { uint8_t code; uint8_t bits; uint16_t lanes; };
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
enum : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLComplex = 5, kDLBool = 6,
                 kDLFloat8_e4m3fn = 10, kDLFloat8_e5m2 = 12 };

DLDataType dl_type(Dtype d) {
  uint8_t bits = static_cast<uint8_t>(itemsize(d) * 8);
  switch (d) {
    case kBool: return {kDLBool, 8, 1};
    case kUInt8: case kUInt16: case kUInt32: case kUInt64: return {kDLUInt, bits, 1};
    case kInt8: case kInt16: case kInt32: case kInt64: return {kDLInt, bits, 1};
    case kFloat16: case kFloat32: case kFloat64: return {kDLFloat, bits, 1};
    case kBFloat16: return {kDLBfloat, 16, 1};
    case kComplex64: case kComplex128: return {kDLComplex, bits, 1};
    case kFloat8_e4m3fn: return {kDLFloat8_e4m3fn, 8, 1};
    case kFloat8_e5m2: return {kDLFloat8_e5m2, 8, 1};
    default: KILN_FAIL(Type, "__dlpack__", "unsupported dtype ", dtype_name(d));
  }
}

Dtype from_dl(uint8_t code, uint8_t bits) {
  switch (code) {
    case kDLBool: return kBool;
    case kDLInt: return bits == 8 ? kInt8 : bits == 16 ? kInt16 : bits == 32 ? kInt32 : kInt64;
    case kDLUInt: return bits == 8 ? kUInt8 : bits == 16 ? kUInt16 : bits == 32 ? kUInt32 : kUInt64;
    case kDLFloat: return bits == 16 ? kFloat16 : bits == 32 ? kFloat32 : kFloat64;
    case kDLBfloat: return kBFloat16;
    case kDLComplex: return bits == 64 ? kComplex64 : kComplex128;
    case kDLFloat8_e4m3fn: return kFloat8_e4m3fn;
    case kDLFloat8_e5m2: return kFloat8_e5m2;
    default: KILN_FAIL(Type, "from_dlpack", "unsupported DLPack dtype code ", int(code));
  }
}

struct Export {
  Tensor t;
  std::vector<int64_t> shape, strides;
  DLManagedTensor m;
  std::shared_ptr<Storage> pinned;  // exported: not resizable until this export is freed
  ~Export() {
    if (pinned) pinned->drop_export();
  }
};

void export_deleter(DLManagedTensor* m) { delete static_cast<Export*>(m->manager_ctx); }

void capsule_destructor(PyObject* cap) {
  if (PyCapsule_IsValid(cap, "dltensor")) {  // never consumed: free it ourselves
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
    if (m && m->deleter) m->deleter(m);
  }
}

void release_pyobject(void*, size_t, void* ctx) {
  nb::gil_scoped_acquire g;
  Py_DECREF(static_cast<PyObject*>(ctx));
}

void release_dlpack(void*, size_t, void* ctx) {
  auto* m = static_cast<DLManagedTensor*>(ctx);
  if (m->deleter) m->deleter(m);
}

Tensor wrap_dl(DLManagedTensor* m) {
  DLTensor& dl = m->dl_tensor;
  KILN_CHECK(dl.device.device_type == 1, Runtime, "from_dlpack", "only CPU tensors can be imported");
  KILN_CHECK(dl.dtype.lanes == 1, Runtime, "from_dlpack", "vector dtypes are not supported");
  Dtype d = from_dl(dl.dtype.code, dl.dtype.bits);
  Shape sizes(dl.shape, dl.shape + dl.ndim), strides;
  if (dl.strides) strides.assign(dl.strides, dl.strides + dl.ndim);
  else strides = contiguous_strides(sizes);
  char* data = static_cast<char*>(dl.data) + dl.byte_offset;
  int64_t span = 1;
  for (int i = 0; i < dl.ndim; ++i) span += (sizes[i] - 1) * strides[i];
  Tensor t = from_blob(data, sizes, strides, d, release_dlpack, m, static_cast<size_t>(span) * itemsize(d));
  t.storage()->set_resizable(false);  // the producer's memory
  return t;
}

// The numpy dtype's kiln counterpart, as torch's numpy_dtype_to_aten: nullopt for the types torch refuses
// (object, str, datetime, void, longdouble, clongdouble).
std::optional<Dtype> numpy_dtype(char kind, int64_t bytes) {
  struct Entry { char kind; int64_t bytes; Dtype d; };
  static constexpr Entry table[] = {
      {'b', 1, kBool},    {'i', 1, kInt8},    {'i', 2, kInt16},   {'i', 4, kInt32},       {'i', 8, kInt64},
      {'u', 1, kUInt8},   {'u', 2, kUInt16},  {'u', 4, kUInt32},  {'u', 8, kUInt64},      {'f', 2, kFloat16},
      {'f', 4, kFloat32}, {'f', 8, kFloat64}, {'c', 8, kComplex64}, {'c', 16, kComplex128}};
  for (const Entry& e : table)
    if (e.kind == kind && e.bytes == bytes) return e.d;
  return std::nullopt;
}

}  // namespace

// A tensor over a numpy array's memory (torch's tensor_from_numpy): the checks in torch's order, with its
// exception classes and messages.
Tensor tensor_from_numpy(nb::handle arr, bool warn_if_not_writeable) {
  nb::object np = nb::module_::import_("numpy");
  KILN_CHECK(nb::isinstance(arr, np.attr("ndarray")), Type, "from_numpy", "expected np.ndarray (got ",
             nb::str(arr.type()).c_str(), ")");
  if (warn_if_not_writeable && !nb::cast<bool>(arr.attr("flags").attr("writeable")) &&
      PyErr_WarnEx(PyExc_UserWarning, "The given NumPy array is not writable, and PyTorch does not support "
                   "non-writable tensors. This means writing to this tensor will result in undefined behavior. "
                   "You may want to copy the array to protect its data or make it writable before converting it "
                   "to a tensor.", 1) != 0)
    throw nb::python_error();
  nb::object dt = arr.attr("dtype");
  const std::string kind = nb::cast<std::string>(dt.attr("kind"));
  const int64_t bytes = nb::cast<int64_t>(dt.attr("itemsize"));
  const std::optional<Dtype> d = numpy_dtype(kind.empty() ? '?' : kind[0], bytes);
  KILN_CHECK(d.has_value(), Type, "from_numpy", "can't convert np.ndarray of type numpy.",
             nb::cast<std::string>(dt.attr("type").attr("__name__")), ". The only supported types are: float64, "
             "float32, float16, complex64, complex128, int64, int32, int16, int8, uint64, uint32, uint16, uint8, "
             "and bool.");
  Shape sizes, strides;
  for (nb::handle s : nb::borrow<nb::tuple>(arr.attr("shape"))) sizes.push_back(nb::cast<int64_t>(s));
  for (nb::handle s : nb::borrow<nb::tuple>(arr.attr("strides"))) {
    int64_t st = nb::cast<int64_t>(s);
    KILN_CHECK(st % bytes == 0, Value, "from_numpy", "given numpy array strides not a multiple of the element "
               "byte size. Copy the numpy array to reallocate the memory.");
    strides.push_back(st / bytes);
  }
  for (int64_t s : strides)
    KILN_CHECK(s >= 0, Value, "from_numpy", "At least one stride in the given numpy array is negative, and "
               "tensors with negative strides are not currently supported. (You can probably work around "
               "this by making a copy of your array  with array.copy().)");
  KILN_CHECK(nb::cast<bool>(dt.attr("isnative")), Value, "from_numpy", "given numpy array has byte order "
             "different from the native byte order. Conversion between byte orders is currently not supported.");
  nb::dict ai = nb::borrow<nb::dict>(arr.attr("__array_interface__"));
  uintptr_t ptr = nb::cast<uintptr_t>(nb::borrow<nb::tuple>(ai["data"])[0]);
  int64_t span = 1;  // the elements the array reaches (none when it is empty)
  for (size_t i = 0; i < sizes.size(); ++i) span = sizes[i] == 0 || span == 0 ? 0 : span + (sizes[i] - 1) * strides[i];
  Py_INCREF(arr.ptr());
  Tensor t = from_blob(reinterpret_cast<void*>(ptr), sizes, strides, *d, release_pyobject, arr.ptr(),
                       static_cast<size_t>(std::max<int64_t>(span, 0)) * itemsize(*d));
  t.storage()->set_resizable(false);  // numpy's memory
  return t;
}

void bind_interop(nb::module_& m, nb::class_<Tensor>& cls) {
  cls.def("__dlpack__", [](const Tensor& t, nb::kwargs) {
    if (t.requires_grad()) {  // torch's class: the buffer protocol's error
      PyErr_SetString(PyExc_BufferError, "Can't export tensors that require gradient, use tensor.detach()");
      throw nb::python_error();
    }
    KILN_CHECK(t.is_cpu(), Runtime, "__dlpack__", "Cannot export a tensor on device '", device_str(t.device()),
               "' through DLPack (no data)");
    stream_detail::before_host_read();
    auto* e = new Export{t, t.sizes(), t.strides(), {}, t.storage()};
    t.storage()->add_export();
    e->m.dl_tensor.data = t.storage()->data();
    e->m.dl_tensor.byte_offset = static_cast<uint64_t>(t.storage_offset()) * t.itemsize();
    e->m.dl_tensor.device = {1, 0};
    e->m.dl_tensor.ndim = static_cast<int32_t>(t.dim());
    e->m.dl_tensor.dtype = dl_type(t.dtype());
    e->m.dl_tensor.shape = e->shape.data();
    e->m.dl_tensor.strides = e->strides.data();
    e->m.manager_ctx = e;
    e->m.deleter = export_deleter;
    return nb::steal(PyCapsule_New(&e->m, "dltensor", capsule_destructor));
  });
  cls.def("__dlpack_device__", [](const Tensor&) { return nb::make_tuple(1, 0); });
  m.def("from_dlpack", [](nb::handle obj) -> Tensor {
    nb::object cap = nb::hasattr(obj, "__dlpack__") ? obj.attr("__dlpack__")() : nb::borrow(obj);
    KILN_CHECK(PyCapsule_IsValid(cap.ptr(), "dltensor"), Runtime, "from_dlpack",
               "from_dlpack received an invalid capsule (got ", nb::type_name(cap.type()).c_str(), "). Note that "
               "DLTensor capsules can be consumed only once, so you might have already constructed a tensor from "
               "it once.");
    auto* mt = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), "dltensor"));
    PyCapsule_SetName(cap.ptr(), "used_dltensor");
    return wrap_dl(mt);
  });
  m.def("from_numpy", [](nb::handle arr) { return tensor_from_numpy(arr, /*warn_if_not_writeable=*/true); });
  cls.def("numpy", [](nb::handle self) -> nb::object {
    const Tensor& t = nb::cast<const Tensor&>(self);
    func::check_data_read(t, "numpy()");
    stream_detail::before_host_read();
    KILN_CHECK(!t.requires_grad(), Runtime, "numpy", "Can't call numpy() on Tensor that requires grad. Use "
               "tensor.detach().numpy() instead.");
    KILN_CHECK(!t.is_meta(), Type, "numpy", "can't convert meta device type tensor to numpy. Use Tensor.cpu() "
               "to copy the tensor to host memory first.");
    nb::object np = nb::module_::import_("numpy");
    const char* name;
    switch (t.dtype()) {
      case kBFloat16: case kFloat8_e4m3fn: case kFloat8_e5m2:
        KILN_FAIL(Type, "numpy", "Got unsupported ScalarType ", dtype_name(t.dtype()));
      default: name = dtype_name(t.dtype()).data();
    }
    // Build the array through __array_interface__ on a small holder that keeps the tensor alive.
    nb::dict ai;
    ai["shape"] = shape_tuple(t.sizes());
    Shape bst = t.strides();
    for (auto& s : bst) s *= static_cast<int64_t>(t.itemsize());
    ai["strides"] = shape_tuple(bst);
    nb::object dt = np.attr("dtype")(name);
    ai["typestr"] = dt.attr("str");
    ai["data"] = nb::make_tuple(reinterpret_cast<uintptr_t>(t.data_ptr()), false);
    ai["version"] = 3;
    nb::object types = nb::module_::import_("types");
    nb::object holder = types.attr("SimpleNamespace")();
    holder.attr("__array_interface__") = ai;
    // the holder keeps the storage through a view of its own (not the tensor object, whose storage
    // resize_ or set_ could replace), and pins it as shared out while the array lives
    holder.attr("_kiln_tensor") = nb::cast(make_view(t, t.sizes(), t.strides(), t.storage_offset()));
    auto* pin = new std::shared_ptr<Storage>(t.storage());
    (*pin)->add_export();
    holder.attr("_kiln_export") = nb::capsule(pin, [](void* p) noexcept {
      auto* s = static_cast<std::shared_ptr<Storage>*>(p);
      (*s)->drop_export();
      delete s;
    });
    return np.attr("asarray")(holder);
  });
  cls.def("__array__", [](nb::handle self, nb::args) { return self.attr("numpy")(); });
}

}  // namespace kiln::py
