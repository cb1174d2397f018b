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

std::optional<int64_t> opt_int(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return nb::cast<int64_t>(h);
}
std::optional<std::string> opt_str(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return nb::cast<std::string>(h);
}
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

// scatter's src-or-value argument
Tensor scatter_dispatch(const Tensor& x, int64_t dim, const Tensor& index, nb::handle src, nb::handle value,
                        nb::handle reduce, bool inplace) {
  nb::handle s = src.is_none() ? value : src;
  if (s.is_none() || (!src.is_none() && !value.is_none()))
    type_error("scatter() received an invalid combination of arguments - expected (Tensor input, int dim, Tensor "
               "index, Tensor src) or (Tensor input, int dim, Tensor index, Number value)");
  auto r = opt_str(reduce);
  if (nb::isinstance<Tensor>(s)) {
    Tensor t = nb::cast<Tensor>(s);
    return inplace ? kiln::scatter_(x, dim, index, t, r) : kiln::scatter(x, dim, index, t, r);
  }
  if (!is_number(s))
    type_error("scatter(): argument 'src' must be Tensor or Number, not " + tname(s));
  Scalar v = as_scalar(s);
  return inplace ? kiln::scatter_(x, dim, index, v, r) : kiln::scatter(x, dim, index, v, r);
}

TensorList index_tuple(nb::handle h, const char* fn) {
  if (!(PyTuple_Check(h.ptr()) || PyList_Check(h.ptr())))
    type_error(std::string(fn) + "(): argument 'indices' (position 1) must be tuple of Tensors, not " + tname(h));
  TensorList ts;
  size_t i = 0;
  for (nb::handle x : h) {
    if (!nb::isinstance<Tensor>(x))
      type_error(std::string("expected Tensor as element ") + std::to_string(i) + " in argument 1, but got " +
                 tname(x));
    ts.push_back(nb::cast<Tensor>(x));
    ++i;
  }
  return ts;
}

Tensor values_arg(nb::handle h, const char* fn) {
  if (!nb::isinstance<Tensor>(h))
    type_error(std::string(fn) + "(): argument 'values' (position 2) must be Tensor, not " + tname(h));
  return nb::cast<Tensor>(h);
}

Tensor index_fill_dispatch(const Tensor& x, int64_t dim, const Tensor& index, nb::handle value, bool inplace) {
  if (nb::isinstance<Tensor>(value)) {
    Tensor v = nb::cast<Tensor>(value);
    return inplace ? kiln::index_fill_(x, dim, index, v) : kiln::index_fill(x, dim, index, v);
  }
  if (!is_number(value)) type_error("index_fill(): argument 'value' must be Number or Tensor, not " + tname(value));
  Scalar v = as_scalar(value);
  return inplace ? kiln::index_fill_(x, dim, index, v) : kiln::index_fill(x, dim, index, v);
}

Tensor repeat_interleave_dispatch(const Tensor& x, nb::handle repeats, nb::handle dim, nb::handle output_size) {
  // a symbolic output_size (a traced size) stays symbolic: its raw bits ride in the int
  std::optional<int64_t> os = nb::isinstance<SymInt>(output_size) ? std::optional<int64_t>(size_arg(output_size))
                                                                   : opt_int(output_size);
  if (repeats.is_none()) return kiln::repeat_interleave(x, os);  // torch.repeat_interleave(repeats)
  auto d = opt_int(dim);
  if (nb::isinstance<Tensor>(repeats)) return kiln::repeat_interleave(x, nb::cast<Tensor>(repeats), d, os);
  if (!is_int(repeats))
    type_error("repeat_interleave(): argument 'repeats' must be Tensor or int, not " + tname(repeats));
  return kiln::repeat_interleave(x, nb::cast<int64_t>(repeats), d, os);
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
  // ---- scatter family -----------------------------------------------------------------------------------
  m.def("scatter", [](const Tensor& x, int64_t dim, const Tensor& index, nb::handle src, nb::handle value,
                      nb::handle reduce) { return scatter_dispatch(x, dim, index, src, value, reduce, false); },
        "input"_a, "dim"_a, "index"_a, "src"_a.none() = none(), nb::kw_only(), "value"_a.none() = none(),
        "reduce"_a.none() = none());
  cls.def("scatter", [](const Tensor& x, int64_t dim, const Tensor& index, nb::handle src, nb::handle value,
                        nb::handle reduce) { return scatter_dispatch(x, dim, index, src, value, reduce, false); },
          "dim"_a, "index"_a, "src"_a.none() = none(), nb::kw_only(), "value"_a.none() = none(),
          "reduce"_a.none() = none());
  cls.def("scatter_", [](const Tensor& x, int64_t dim, const Tensor& index, nb::handle src, nb::handle value,
                         nb::handle reduce) { return scatter_dispatch(x, dim, index, src, value, reduce, true); },
          "dim"_a, "index"_a, "src"_a.none() = none(), nb::kw_only(), "value"_a.none() = none(),
          "reduce"_a.none() = none());
  cls.def("scatter_add_", [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
    return Tensor(kiln::scatter_add_(x, dim, index, src));
  }, "dim"_a, "index"_a, "src"_a);
  cls.def("scatter_reduce_", [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                                const std::string& reduce, bool include_self) {
    return Tensor(kiln::scatter_reduce_(x, dim, index, src, reduce, include_self));
  }, "dim"_a, "index"_a, "src"_a, "reduce"_a, nb::kw_only(), "include_self"_a = true);

  // ---- index_add / index_copy / index_fill ------------------------------------------------------------------
  cls.def("index_add_", [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, nb::handle alpha) {
    return Tensor(kiln::index_add_(x, dim, index, source, as_scalar(alpha)));
  }, "dim"_a, "index"_a, "source"_a, nb::kw_only(), "alpha"_a = 1);
  cls.def("index_copy_", [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
    return Tensor(kiln::index_copy_(x, dim, index, source));
  }, "dim"_a, "index"_a, "source"_a);
  auto ifill = [](const Tensor& x, int64_t dim, const Tensor& index, nb::handle value) {
    return index_fill_dispatch(x, dim, index, value, false);
  };
  m.def("index_fill", ifill, "input"_a, "dim"_a, "index"_a, "value"_a);
  cls.def("index_fill", ifill, "dim"_a, "index"_a, "value"_a);
  cls.def("index_fill_", [](const Tensor& x, int64_t dim, const Tensor& index, nb::handle value) {
    return index_fill_dispatch(x, dim, index, value, true);
  }, "dim"_a, "index"_a, "value"_a);

  // ---- masked_scatter / take / take_along_dim / put ---------------------------------------------------------
  cls.def("masked_scatter_", [](const Tensor& x, const Tensor& mask, const Tensor& source) {
    return Tensor(kiln::masked_scatter_(x, mask, source));
  }, "mask"_a, "source"_a);
  auto tad = [](const Tensor& x, const Tensor& indices, nb::handle dim) {
    return kiln::take_along_dim(x, indices, opt_int(dim));
  };
  m.def("take_along_dim", tad, "input"_a, "indices"_a, "dim"_a.none() = none());
  cls.def("take_along_dim", tad, "indices"_a, "dim"_a.none() = none());
  cls.def("put_", [](const Tensor& x, const Tensor& index, const Tensor& source, bool accumulate) {
    return Tensor(kiln::put_(x, index, source, accumulate));
  }, "index"_a, "source"_a, "accumulate"_a = false);

  // ---- index_put ----------------------------------------------------------------------------------------------
  m.def("index_put", [](const Tensor& x, nb::handle indices, nb::handle values, bool accumulate) {
    return kiln::index_put(x, index_tuple(indices, "index_put"), values_arg(values, "index_put"), accumulate);
  }, "input"_a, "indices"_a, "values"_a, "accumulate"_a = false);
  cls.def("index_put", [](const Tensor& x, nb::handle indices, nb::handle values, bool accumulate) {
    return kiln::index_put(x, index_tuple(indices, "index_put"), values_arg(values, "index_put"), accumulate);
  }, "indices"_a, "values"_a, "accumulate"_a = false);
  cls.def("index_put_", [](const Tensor& x, nb::handle indices, nb::handle values, bool accumulate) {
    return Tensor(kiln::index_put_checked_(x, index_tuple(indices, "index_put_"), values_arg(values, "index_put_"),
                                           accumulate));
  }, "indices"_a, "values"_a, "accumulate"_a = false);

  // ---- roll / rot90 / repeat / tile / repeat_interleave -------------------------------------------------------
  auto rot_fn = [](const Tensor& x, int64_t k, nb::handle dims) {
    return kiln::rot90(x, k, int_list(dims, "rot90", "dims", 3, false));
  };
  m.def("rot90", rot_fn, "input"_a, "k"_a = 1, "dims"_a = nb::make_tuple(0, 1));
  cls.def("rot90", rot_fn, "k"_a = 1, "dims"_a = nb::make_tuple(0, 1));
  m.def("tile", [](const Tensor& x, nb::handle dims) { return kiln::tile(x, int_list(dims, "tile", "dims", 2, false)); },
        "input"_a, "dims"_a);
  cls.def("tile", [](const Tensor& x, nb::args args) {
    if (args.size() == 0) type_error("tile() missing 1 required positional arguments: \"dims\"");
    Shape r = args.size() == 1 && !is_int(args[0]) ? int_list(args[0], "tile", "dims", 1, false)
                                                   : int_list(nb::tuple(args), "tile", "dims", 1, false);
    return kiln::tile(x, r);
  });
  m.def("repeat_interleave", [](const Tensor& x, nb::handle repeats, nb::handle dim, nb::handle output_size) {
    return repeat_interleave_dispatch(x, repeats, dim, output_size);
  }, "input"_a, "repeats"_a.none() = none(), "dim"_a.none() = none(), nb::kw_only(), "output_size"_a.none() = none());
  cls.def("repeat_interleave", [](const Tensor& x, nb::handle repeats, nb::handle dim, nb::handle output_size) {
    return repeat_interleave_dispatch(x, repeats, dim, output_size);
  }, "repeats"_a.none() = none(), "dim"_a.none() = none(), nb::kw_only(), "output_size"_a.none() = none());

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
  m.def("embedding", [](const Tensor& weight, const Tensor& indices, int64_t padding_idx, bool scale, bool sparse) {
    return kiln::embedding(weight, indices, padding_idx, scale, sparse);
  }, "weight"_a, "indices"_a, "padding_idx"_a = -1, "scale_grad_by_freq"_a = false, "sparse"_a = false);
  m.def("embedding_renorm_", [](const Tensor& weight, const Tensor& indices, double max_norm, double norm_type) {
    return Tensor(kiln::embedding_renorm_(weight, indices, max_norm, norm_type));
  }, "input"_a, "indices"_a, "max_norm"_a, "norm_type"_a);
}

}  // namespace kiln::py
