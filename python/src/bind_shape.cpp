// Shape and scatter-style ops (kiln/ops/shape.cpp, kiln/ops/scatter.cpp): kiln.<name> functions and Tensor
// methods with torch's signatures, plus the _C entry points behind kiln.nn.functional.pad / one_hot /
// embedding.
#include <Python.h>

#include <string>

#include "common.h"
#include "kiln/ops/shape.h"

namespace kiln::py {
namespace {

nb::object none() { return nb::none(); }

[[noreturn]] void type_error(const std::string& msg) { throw nb::type_error(msg.c_str()); }

std::string tname(nb::handle h) { return nb::type_name(h.type()).c_str(); }

bool is_int(nb::handle h) { return PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr()); }

// A sequence of ints (tuple / list / torch.Size-like); `what` names the argument for TypeErrors.
Shape int_list(nb::handle h, const char* fn, const char* what, int pos, bool allow_int) {
  if (is_int(h)) {
    if (allow_int) return {nb::cast<int64_t>(h)};
  } else if (PyTuple_Check(h.ptr()) || PyList_Check(h.ptr())) {
    Shape s;
    for (nb::handle x : h) {
      if (!PyIndex_Check(x.ptr()) || PyBool_Check(x.ptr()) || nb::isinstance<Tensor>(x))
        type_error(std::string(fn) + "(): argument '" + what + "' (position " + std::to_string(pos) +
                   ") must be tuple of ints, but found element of type " + tname(x) + " at pos 0");
      s.push_back(nb::cast<int64_t>(nb::int_(x)));
    }
    return s;
  }
  type_error(std::string(fn) + "(): argument '" + what + "' (position " + std::to_string(pos) +
             ") must be tuple of ints, not " + tname(h));
}


TensorList tensor_seq(const nb::args& args) {
  TensorList ts;
  if (args.size() == 1 && !nb::isinstance<Tensor>(args[0])) {
    if (!(PyTuple_Check(args[0].ptr()) || PyList_Check(args[0].ptr())))
      type_error("meshgrid(): expected Tensors or a sequence of Tensors, got " + tname(args[0]));
    for (nb::handle h : args[0]) ts.push_back(nb::cast<Tensor>(h));
    return ts;
  }
  for (nb::handle h : args) ts.push_back(nb::cast<Tensor>(h));
  return ts;
}

nb::tuple to_tuple(const TensorList& ts) {
  nb::list l;
  for (const Tensor& t : ts) l.append(nb::cast(t));
  return nb::tuple(l);
}

}  // namespace

void bind_shape(nb::module_& m, nb::class_<Tensor>& cls) {
  // scatter, scatter_, the in-place index ops, index_fill, take_along_dim, rot90, tile and
  // repeat_interleave, index_put: from their composites' schemas (kiln/ops/shape.cpp). meshgrid
  // (tensors as varargs) and the nn.functional entry points here.
  // ---- diag / diag_embed / meshgrid -------------------------------------------------------------------------------
  m.def("meshgrid", [](nb::args tensors, nb::handle indexing) {
    std::string ix = indexing.is_none() ? "ij" : nb::cast<std::string>(indexing);
    return to_tuple(kiln::meshgrid(tensor_seq(tensors), ix));
  }, "tensors"_a, nb::kw_only(), "indexing"_a.none() = none());

  // ---- nn.functional entry points ----------------------------------------------------------------------------------
  m.def("_pad", [](const Tensor& x, nb::handle pad, const std::string& mode, std::optional<double> value) {
    return kiln::pad(x, int_list(pad, "pad", "pad", 2, false), mode, value);
  }, "input"_a, "pad"_a, "mode"_a = "constant", "value"_a.none() = none());
  m.def("_one_hot", [](const Tensor& x, int64_t num_classes) { return kiln::one_hot(x, num_classes); }, "input"_a,
        "num_classes"_a = -1);
  // embedding, embedding_renorm_: from their composites' schemas (kiln/ops/shape.cpp)
}

}  // namespace kiln::py
