// numpy and DLPack interop without copies.
#include <Python.h>
#include <nanobind/ndarray.h>

#include "common.h"

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

}  // namespace

void bind_interop(nb::module_& m, nb::class_<Tensor>& cls) {
  cls.def("__dlpack__", [](const Tensor& t, nb::kwargs) {
    KILN_CHECK(t.is_cpu(), Runtime, "__dlpack__", "Cannot export a tensor on device '", device_str(t.device()),
               "' through DLPack (no data)");
    t.storage()->set_resizable(false);
    auto* e = new Export{t, t.sizes(), t.strides(), {}};
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
    KILN_CHECK(PyCapsule_IsValid(cap.ptr(), "dltensor"), Type, "from_dlpack",
               "expected a DLPack capsule named 'dltensor'");
    auto* mt = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), "dltensor"));
    PyCapsule_SetName(cap.ptr(), "used_dltensor");
    return wrap_dl(mt);
  });
  m.def("from_numpy", [](nb::handle arr) -> Tensor {
    nb::object np = nb::module_::import_("numpy");
    KILN_CHECK(nb::isinstance(arr, np.attr("ndarray")), Type, "from_numpy", "expected np.ndarray (got ",
               nb::str(arr.type()).c_str(), ")");
    nb::dict ai = nb::borrow<nb::dict>(arr.attr("__array_interface__"));
    std::string ts = nb::cast<std::string>(ai["typestr"]);
    char kind = ts[1];
    int bytes = std::stoi(ts.substr(2));
    KILN_CHECK(ts[0] != '>', Type, "from_numpy", "big-endian arrays are not supported");
    Dtype d;
    switch (kind) {
      case 'b': d = kBool; break;
      case 'i': d = bytes == 1 ? kInt8 : bytes == 2 ? kInt16 : bytes == 4 ? kInt32 : kInt64; break;
      case 'u': d = bytes == 1 ? kUInt8 : bytes == 2 ? kUInt16 : bytes == 4 ? kUInt32 : kUInt64; break;
      case 'f':
        KILN_CHECK(bytes != 16, Type, "from_numpy", "can't convert np.ndarray of type numpy.float128");
        d = bytes == 2 ? kFloat16 : bytes == 4 ? kFloat32 : kFloat64;
        break;
      case 'c': d = bytes == 8 ? kComplex64 : kComplex128; break;
      default: KILN_FAIL(Type, "from_numpy", "can't convert np.ndarray of type ", ts, ". The only supported types "
                         "are: float64, float32, float16, complex64, complex128, int64, int32, int16, int8, uint64, "
                         "uint32, uint16, uint8, and bool.");
    }
    nb::tuple shape = nb::borrow<nb::tuple>(ai["shape"]);
    Shape sizes, strides;
    for (nb::handle s : shape) sizes.push_back(nb::cast<int64_t>(s));
    if (ai.contains("strides") && !ai["strides"].is_none()) {
      for (nb::handle s : nb::borrow<nb::tuple>(ai["strides"])) {
        int64_t st = nb::cast<int64_t>(s);
        KILN_CHECK(st % bytes == 0, Value, "from_numpy", "given numpy array strides not a multiple of the element "
                   "byte size. Copy the numpy array to reallocate the memory.");
        strides.push_back(st / bytes);
      }
    } else {
      strides = contiguous_strides(sizes);
    }
    for (int64_t s : strides)
      KILN_CHECK(s >= 0, Value, "from_numpy", "At least one stride in the given numpy array is negative, and "
                 "tensors with negative strides are not currently supported. (You can probably work around "
                 "this by making a copy of your array  with array.copy().)");
    uintptr_t ptr = nb::cast<uintptr_t>(nb::borrow<nb::tuple>(ai["data"])[0]);
    Py_INCREF(arr.ptr());
    int64_t span = 1;
    for (size_t i = 0; i < sizes.size(); ++i) span += (sizes[i] - 1) * strides[i];
    Tensor t = from_blob(reinterpret_cast<void*>(ptr), sizes, strides, d, release_pyobject, arr.ptr(),
                     static_cast<size_t>(std::max<int64_t>(span, 0)) * itemsize(d));
    t.storage()->set_resizable(false);  // numpy's memory
    return t;
  });
  cls.def("numpy", [](nb::handle self) -> nb::object {
    const Tensor& t = nb::cast<const Tensor&>(self);
    func::check_data_read(t, "numpy()");
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
    // resize_ or set_ could replace), and the storage is marked shared out
    t.storage()->set_resizable(false);
    holder.attr("_kiln_tensor") = nb::cast(make_view(t, t.sizes(), t.strides(), t.storage_offset()));
    return np.attr("asarray")(holder);
  });
  cls.def("__array__", [](nb::handle self, nb::args) { return self.attr("numpy")(); });
}

}  // namespace kiln::py
