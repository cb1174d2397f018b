// Shared helpers for the Python binding: argument conversion with torch's conventions.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "kiln/kiln.h"

namespace nb = nanobind;
using namespace nb::literals;

// kiln's inline vectors (Shape, TensorList, Attrs) convert like std::vector: Python sequence <-> list.
namespace nanobind::detail {
template <class T, size_t N>
struct type_caster<kiln::SmallVec<T, N>> : list_caster<kiln::SmallVec<T, N>, T> {};
}  // namespace nanobind::detail

namespace kiln::py {

// dtype objects are singletons so `x.dtype is kiln.float32` holds.
struct PyDtype {
  Dtype d;
};
nb::object dtype_object(Dtype d);
Dtype as_dtype(nb::handle h);
std::optional<Dtype> as_opt_dtype(nb::handle h);

// kiln.device: torch.device's type, index, equality, hash and repr. Device arguments take a device,
// a string ("cpu", "meta", "cuda:1") or an int (a cuda index), as torch.
void bind_device(nb::module_& m);
Device as_device(nb::handle h);
std::optional<Device> as_opt_device(nb::handle h);
// dtype= and device= keyword arguments as TensorOptions.
TensorOptions opts(nb::handle dtype, nb::handle device = nb::none());

bool is_number(nb::handle h);
Scalar as_scalar(nb::handle h);
// A Tensor argument, or a Python number turned into a wrapped 0-dim tensor.
Tensor as_tensor(nb::handle h, const char* op = "argument");
// Shape from a tuple/list/torch.Size or from varargs (x.view(2, 3) or x.view((2, 3))).
Shape as_shape(nb::handle h);
Shape shape_from_args(const nb::args& args);
std::optional<Shape> as_dims(nb::handle h);  // None, int, or sequence of ints
nb::tuple shape_tuple(const Shape& s);
// Symbolic sizes (bind_symint.cpp): a SymInt as a Python int when concrete, a kiln.SymInt otherwise;
// a size argument (int or kiln.SymInt) as the raw SymInt bits an integer-list attribute carries.
nb::object symint_object(SymInt s);
int64_t size_arg(nb::handle h);
nb::tuple sym_shape_tuple(const Tensor& t);  // a kiln.Size once set_size_type ran
void set_size_type(nb::handle t);
std::string python_where();  // "file.py:line" of the Python code running now
void bind_symint(nb::module_& m);

// Tensor subclasses and __kiln_function__ / __torch_function__ (bind_protocol.cpp): *handled is set
// when an argument overrides the op, and then the result is the handler's (null with an error set).
PyObject* function_overrides(PyObject* func, PyObject* const* argv, size_t nargs, PyObject* kwnames, bool* handled);

// From nested Python sequences / numbers / numpy arrays.
Tensor tensor_from_data(nb::handle data, std::optional<Dtype> dtype);
// A tensor over a numpy array's memory (bind_interop.cpp; kiln.from_numpy warns for a read-only array).
Tensor tensor_from_numpy(nb::handle arr, bool warn_if_not_writeable);
nb::object to_list(const Tensor& t);

// Indexing (bind_index.cpp)
Tensor getitem(const Tensor& self, nb::handle index);
void setitem(const Tensor& self, nb::handle index, nb::handle value);

void bind_dtype(nb::module_& m);
void bind_tensor(nb::module_& m, nb::class_<Tensor>& cls);
void bind_ops(nb::module_& m, nb::class_<Tensor>& cls);
void bind_protocol(nb::module_& m, nb::class_<Tensor>& cls);
void bind_interop(nb::module_& m, nb::class_<Tensor>& cls);
void bind_sort(nb::module_& m, nb::class_<Tensor>& cls);   // bind_sort.cpp
void bind_shape(nb::module_& m, nb::class_<Tensor>& cls);  // bind_shape.cpp
void bind_autograd(nb::module_& m, nb::class_<Tensor>& cls);  // bind_autograd.cpp
void bind_amp(nb::module_& m);                                 // bind_amp.cpp (autocast, GradScaler ops)
void bind_io(nb::module_& m);                                  // bind_io.cpp (safetensors)
void bind_nn(nb::module_& m);                                  // bind_nn.cpp (layers' functional ops)
void bind_func(nb::module_& m);                              // bind_func.cpp (vmap)
void bind_distributions(nb::module_& m);                      // bind_distributions.cpp
void bind_optim(nb::module_& m);                               // bind_optim.cpp
void bind_attention(nb::module_& m);                           // bind_attention.cpp (SDPA)
void bind_rnn(nb::module_& m);                                 // bind_rnn.cpp (RNN, LSTM, GRU)
void bind_layers(nb::module_& m);                              // bind_layers.cpp (norms, conv/pool modules, attention)
void bind_loss(nb::module_& m);                                // bind_loss.cpp (losses)
void bind_conv(nb::module_& m);                                // bind_conv.cpp (conv, pooling, upsample)
void bind_export(nb::module_& m);                              // bind_export.cpp (kiln.export, the runtime)
void bind_distributed(nb::module_& m);                         // bind_distributed.cpp (kiln.distributed; with MPI)
void bind_schema(nb::module_& m, nb::handle tensor_cls);      // bind_schema.cpp (kiln.ops: any op by its schema)

// Callables made from an op's schema (bind_schema.cpp): a public function (`kiln.exp`, its `self`
// named `input`, out= accepted), a method (`x.exp()`) or an in-place method (`x.exp_()`, returning
// the object it was called on). number_args: bit i set when tensor argument i takes a Python number.
enum class FnKind : uint8_t { Function, Method, Inplace };
nb::object make_op_fn(const OpDef& op, FnKind kind, std::string py_name, uint32_t number_args);
// kiln.<name>, Tensor.<name>, Tensor.<name>_ for every op that declares its variants (OpRegistrar),
// under its schema's name; ops of one name are overloads (the one with fewer required arguments
// tried first).
void expose_registered(nb::module_& m, nb::handle cls);
// The Python error for a C++ exception caught outside nanobind (kiln::Error by its kind, nanobind's
// exceptions as themselves): what a raw CPython entry point calls before returning null.
void set_python_error(const std::exception_ptr& e);
void bind_capture(nb::module_& m);                             // bind_capture.cpp (capture layer test hook)

}  // namespace kiln::py
