// Operators as kiln.<name> functions and Tensor methods, table-driven where the signature is shared.
#include <Python.h>

#include <cstring>

#include "common.h"

namespace kiln::py {

namespace {

nb::object none() { return nb::none(); }

OptDims dims_arg(nb::handle h) { return as_dims(h); }


nb::object tuple2(const std::tuple<Tensor, Tensor>& t) {
  return nb::make_tuple(std::get<0>(t), std::get<1>(t));
}

// A torch.return_types-like named pair.
nb::object named2(const std::tuple<Tensor, Tensor>& t, const char* a, const char* b) {
  static nb::object nt = nb::module_::import_("collections").attr("namedtuple");
  static nb::object vi = nt("values_indices", nb::make_tuple("values", "indices"));
  static nb::object mm = nt("min_max", nb::make_tuple("min", "max"));
  if (std::string(a) == "min") return mm(std::get<0>(t), std::get<1>(t));
  return vi(std::get<0>(t), std::get<1>(t));
}

Shape dims_list(nb::handle h) {
  auto d = as_dims(h);
  return d ? *d : Shape{};
}

}  // namespace

void bind_ops(nb::module_& m, nb::class_<Tensor>& cls) {
  // ---- elementwise lists ------------------------------------------------------------------------
  // The ops that declare their variants (the unary/binary lists, add, sub, round, the indexing ops,
  // ...) are bound from their schemas by expose_registered (bind_schema.cpp), before this runs.
  // On a real tensor, torch's conj_physical_ returns it untouched (no write, so no version bump or
  // in-place check).
  cls.def("conj_physical_", [](const Tensor& x) { return conj_physical_(x); });

  m.def("rsub", [](nb::handle a, nb::handle b, nb::handle alpha) {
    return rsub(as_tensor(a, "rsub"), as_tensor(b, "rsub"), alpha.is_none() ? Scalar(1) : as_scalar(alpha));
  }, "input"_a, "other"_a, nb::kw_only(), "alpha"_a.none() = none());
  auto div_fn = [](nb::handle a, nb::handle b, nb::handle mode) {
    return div(as_tensor(a, "div"), as_tensor(b, "div"), mode.is_none() ? "" : nb::cast<std::string>(mode));
  };
  m.def("div", div_fn, "input"_a, "other"_a, nb::kw_only(), "rounding_mode"_a.none() = none());
  cls.def("div", div_fn, "other"_a, nb::kw_only(), "rounding_mode"_a.none() = none());
  cls.def("div_", [](const Tensor& a, nb::handle b, nb::handle mode) {
    return div_(a, as_tensor(b, "div_"), mode.is_none() ? "" : nb::cast<std::string>(mode));
  }, "other"_a, nb::kw_only(), "rounding_mode"_a.none() = none());
  auto logit_fn = [](const Tensor& x, std::optional<double> eps) { return logit(x, eps); };
  m.def("logit", logit_fn, "input"_a, "eps"_a.none() = none());
  cls.def("logit", logit_fn, "eps"_a.none() = none());
  auto clamp_fn = [](const Tensor& x, nb::handle lo, nb::handle hi) -> Tensor {
    if (nb::isinstance<Tensor>(lo) || nb::isinstance<Tensor>(hi))
      return clamp(x, lo.is_none() ? Tensor() : as_tensor(lo), hi.is_none() ? Tensor() : as_tensor(hi));
    std::optional<Scalar> l, h;
    if (!lo.is_none()) l = as_scalar(lo);
    if (!hi.is_none()) h = as_scalar(hi);
    return clamp(x, l, h);
  };
  for (const char* n : {"clamp", "clip"}) {
    m.def(n, clamp_fn, "input"_a, "min"_a.none() = none(), "max"_a.none() = none());
    cls.def(n, clamp_fn, "min"_a.none() = none(), "max"_a.none() = none());
  }
  cls.def("clamp_", [](const Tensor& x, nb::handle lo, nb::handle hi) {
    std::optional<Scalar> l, h;
    if (!lo.is_none()) l = as_scalar(lo);
    if (!hi.is_none()) h = as_scalar(hi);
    return clamp_(x, l, h);
  }, "min"_a.none() = none(), "max"_a.none() = none());
  auto n2n = [](const Tensor& x, std::optional<double> nan, std::optional<double> pi, std::optional<double> ni) {
    return nan_to_num(x, nan, pi, ni);
  };
  m.def("nan_to_num", n2n, "input"_a, "nan"_a = 0.0, "posinf"_a.none() = none(), "neginf"_a.none() = none());
  cls.def("nan_to_num", n2n, "nan"_a = 0.0, "posinf"_a.none() = none(), "neginf"_a.none() = none());
  m.def("leaky_relu", [](const Tensor& x, double s) { return leaky_relu(x, s); }, "input"_a, "negative_slope"_a = 0.01);
  m.def("elu", [](const Tensor& x, double a) { return elu(x, a); }, "input"_a, "alpha"_a = 1.0);
  m.def("softsign", [](const Tensor& x) { return softsign(x); }, "input"_a);
  m.def("selu", [](const Tensor& x) { return selu(x); }, "input"_a);
  m.def("celu", [](const Tensor& x, double a) { return celu(x, a); }, "input"_a, "alpha"_a = 1.0);
  m.def("gelu", [](const Tensor& x, const std::string& ap) { return gelu(x, ap); }, "input"_a, "approximate"_a = "none");
  m.def("softplus", [](const Tensor& x, double b, double t) { return softplus(x, b, t); }, "input"_a, "beta"_a = 1.0, "threshold"_a = 20.0);
  m.def("hardtanh", [](const Tensor& x, double lo, double hi) { return hardtanh(x, lo, hi); }, "input"_a, "min_val"_a = -1.0, "max_val"_a = 1.0);
  m.def("threshold", [](const Tensor& x, double t, double v) { return threshold(x, t, v); }, "input"_a, "threshold"_a, "value"_a);
  m.def("where", [](const Tensor& c, nb::handle a, nb::handle b) { return where(c, as_tensor(a), as_tensor(b)); },
        "condition"_a, "input"_a, "other"_a);
  cls.def("where", [](const Tensor& self, const Tensor& c, nb::handle b) { return where(c, self, as_tensor(b)); });
  auto lerp_fn = [](const Tensor& a, const Tensor& b, nb::handle w) {
    return nb::isinstance<Tensor>(w) ? lerp(a, b, nb::cast<Tensor>(w)) : lerp(a, b, as_scalar(w));
  };
  m.def("lerp", lerp_fn, "input"_a, "end"_a, "weight"_a);
  cls.def("lerp", lerp_fn, "end"_a, "weight"_a);
  auto addcmul_fn = [](const Tensor& x, const Tensor& a, const Tensor& b, nb::handle v) {
    return addcmul(x, a, b, as_scalar(v));
  };
  m.def("addcmul", addcmul_fn, "input"_a, "tensor1"_a, "tensor2"_a, nb::kw_only(), "value"_a = 1);
  cls.def("addcmul", addcmul_fn, "tensor1"_a, "tensor2"_a, nb::kw_only(), "value"_a = 1);
  auto addcdiv_fn = [](const Tensor& x, const Tensor& a, const Tensor& b, nb::handle v) {
    return addcdiv(x, a, b, as_scalar(v));
  };
  m.def("addcdiv", addcdiv_fn, "input"_a, "tensor1"_a, "tensor2"_a, nb::kw_only(), "value"_a = 1);
  cls.def("addcdiv", addcdiv_fn, "tensor1"_a, "tensor2"_a, nb::kw_only(), "value"_a = 1);
  auto isclose_fn = [](const Tensor& a, const Tensor& b, double rtol, double atol, bool en) {
    return isclose(a, b, rtol, atol, en);
  };
  m.def("isclose", isclose_fn, "input"_a, "other"_a, "rtol"_a = 1e-5, "atol"_a = 1e-8, "equal_nan"_a = false);
  cls.def("isclose", isclose_fn, "other"_a, "rtol"_a = 1e-5, "atol"_a = 1e-8, "equal_nan"_a = false);
  auto allclose_fn = [](const Tensor& a, const Tensor& b, double rtol, double atol, bool en) {
    return allclose(a, b, rtol, atol, en);
  };
  m.def("allclose", allclose_fn, "input"_a, "other"_a, "rtol"_a = 1e-5, "atol"_a = 1e-8, "equal_nan"_a = false);
  cls.def("allclose", allclose_fn, "other"_a, "rtol"_a = 1e-5, "atol"_a = 1e-8, "equal_nan"_a = false);
  m.def("equal", [](const Tensor& a, const Tensor& b) { return equal(a, b); });
  cls.def("equal", [](const Tensor& a, const Tensor& b) { return equal(a, b); });
  m.def("real", [](const Tensor& x) { return real(x); });
  m.def("imag", [](const Tensor& x) { return imag(x); });
  m.def("conj", [](const Tensor& x) { return conj(x); });
  cls.def("conj", [](const Tensor& x) { return conj(x); });

  // ---- creation -----------------------------------------------------------------------------------
  m.def("tensor", [](nb::handle data, nb::handle dtype, nb::handle device, bool) {
    Tensor t = tensor_from_data(data, as_opt_dtype(dtype));
    auto d = as_opt_device(device);
    return d ? to_device(t, *d) : t;
  }, "data"_a, nb::kw_only(), "dtype"_a.none() = none(), "device"_a.none() = none(), "requires_grad"_a = false);
  m.def("as_tensor", [](nb::handle data, nb::handle dtype, nb::handle device) -> Tensor {
    Tensor t;
    if (nb::isinstance<Tensor>(data)) {
      t = nb::cast<Tensor>(data);
      auto d = as_opt_dtype(dtype);
      if (d) t = to_dtype(t, *d);
    } else {
      t = tensor_from_data(data, as_opt_dtype(dtype));
    }
    auto dev = as_opt_device(device);
    return dev ? to_device(t, *dev) : t;
  }, "data"_a, "dtype"_a.none() = none(), "device"_a.none() = none());
  m.def("scalar_tensor", [](nb::handle v, nb::handle dtype) {
    return scalar_tensor(as_scalar(v), as_opt_dtype(dtype).value_or(default_dtype()));
  }, "s"_a, nb::kw_only(), "dtype"_a.none() = none());
#define BIND_FILL(name)                                                                          \
  m.def(#name, [](nb::args size, nb::handle dtype, nb::handle device, bool) {                    \
    return name(shape_from_args(size), opts(dtype, device));                                     \
  }, "size"_a, nb::kw_only(), "dtype"_a.none() = none(), "device"_a.none() = none(), "requires_grad"_a = false);
  BIND_FILL(zeros)
  BIND_FILL(ones)
  BIND_FILL(empty)
#undef BIND_FILL
  m.def("full", [](nb::handle size, nb::handle v, nb::handle dtype, nb::handle device, bool) {
    return full(as_shape(size), as_scalar(v), opts(dtype, device));
  }, "size"_a, "fill_value"_a, nb::kw_only(), "dtype"_a.none() = none(), "device"_a.none() = none(),
     "requires_grad"_a = false);
  // *_like: the input's sizes, and its dtype and device unless given.
  auto like_opts = [](const Tensor& t, nb::handle dtype, nb::handle device) {
    return TensorOptions(dtype.is_none() ? t.dtype() : as_dtype(dtype))
        .device(device.is_none() ? t.device() : as_device(device));
  };
#define BIND_LIKE(name, base)                                                                    \
  m.def(#name, [like_opts](const Tensor& t, nb::handle d, nb::handle dev, bool) {                \
    return base(t.sizes(), like_opts(t, d, dev));                                                \
  }, "input"_a, nb::kw_only(), "dtype"_a.none() = none(), "device"_a.none() = none(), "requires_grad"_a = false);
  BIND_LIKE(zeros_like, zeros)
  BIND_LIKE(ones_like, ones)
  BIND_LIKE(empty_like, empty)
#undef BIND_LIKE
  m.def("full_like", [like_opts](const Tensor& t, nb::handle v, nb::handle d, nb::handle dev, bool) {
    return full(t.sizes(), as_scalar(v), like_opts(t, d, dev));
  }, "input"_a, "fill_value"_a, nb::kw_only(), "dtype"_a.none() = none(), "device"_a.none() = none(),
     "requires_grad"_a = false);
  m.def("arange", [](nb::handle a, nb::handle b, nb::handle step, nb::handle dtype, nb::handle device, bool) {
    // a symbolic bound (kiln.SymInt) stays symbolic: the raw bits ride in the integer Scalar
    auto bound = [](nb::handle h) { return nb::isinstance<SymInt>(h) ? Scalar(size_arg(h)) : as_scalar(h); };
    if (b.is_none()) return arange(Scalar(0), bound(a), as_scalar(step), opts(dtype, device));
    return arange(bound(a), bound(b), as_scalar(step), opts(dtype, device));
  }, "start"_a, "end"_a.none() = none(), "step"_a = 1, nb::kw_only(), "dtype"_a.none() = none(),
     "device"_a.none() = none(), "requires_grad"_a = false);
  m.def("linspace", [](nb::handle s, nb::handle e, int64_t steps, nb::handle dtype, nb::handle device, bool) {
    return linspace(as_scalar(s), as_scalar(e), steps, opts(dtype, device));
  }, "start"_a, "end"_a, "steps"_a, nb::kw_only(), "dtype"_a.none() = none(), "device"_a.none() = none(),
     "requires_grad"_a = false);
  m.def("logspace", [](nb::handle s, nb::handle e, int64_t steps, double base, nb::handle dtype, nb::handle device, bool) {
    return logspace(as_scalar(s), as_scalar(e), steps, base, opts(dtype, device));
  }, "start"_a, "end"_a, "steps"_a, "base"_a = 10.0, nb::kw_only(), "dtype"_a.none() = none(),
     "device"_a.none() = none(), "requires_grad"_a = false);
  m.def("eye", [](int64_t n, std::optional<int64_t> mm, nb::handle dtype, nb::handle device, bool) {
    return eye(n, mm, opts(dtype, device));
  }, "n"_a, "m"_a.none() = none(), nb::kw_only(), "dtype"_a.none() = none(), "device"_a.none() = none(),
     "requires_grad"_a = false);
  cls.def("fill_", [](const Tensor& t, nb::handle v) { return fill_(t, as_scalar(v)); });
  cls.def("zero_", [](const Tensor& t) { return zero_(t); });

  // ---- conversion / copies ------------------------------------------------------------------------
  cls.def("contiguous", [](const Tensor& t) { return contiguous(t); });
  cls.def("clone", [](const Tensor& t) { return clone(t); });
  m.def("clone", [](const Tensor& t) { return clone(t); });
  cls.def("copy_", [](const Tensor& t, nb::handle src) { return copy_(t, as_tensor(src)); });
  // to(dtype), to(device, dtype=None), to(other) and the keywords dtype, device, copy, non_blocking.
  cls.def("to", [](nb::handle self, nb::args args, nb::kwargs kw) -> nb::object {
    const Tensor& t = nb::cast<const Tensor&>(self);
    std::optional<Dtype> d;
    std::optional<Device> dev;
    bool copy = false;
    size_t positional = 0;
    for (nb::handle a : args) {
      if (nb::isinstance<Tensor>(a)) {
        d = nb::cast<Tensor>(a).dtype(), dev = nb::cast<Tensor>(a).device();
      } else if (nb::isinstance<PyDtype>(a)) {
        d = as_dtype(a);
      } else if (positional == 0 && !nb::isinstance<nb::bool_>(a) && !a.is_none()) {
        dev = as_device(a);
      } else if (nb::isinstance<nb::bool_>(a)) {
        if (positional >= 2) copy = nb::cast<bool>(a);  // to(dtype, non_blocking, copy)
      }
      ++positional;
    }
    if (kw.contains("dtype") && !kw["dtype"].is_none()) d = as_dtype(kw["dtype"]);
    if (kw.contains("device") && !kw["device"].is_none()) dev = as_device(kw["device"]);
    if (kw.contains("copy")) copy = nb::cast<bool>(kw["copy"]);
    Tensor r = t;
    bool copied = false;
    if (dev && dev->type != t.device().type) r = to_device(r, *dev), copied = true;
    if (d && *d != r.dtype()) r = to_dtype(r, *d), copied = true;
    if (copy && !copied) return nb::cast(clone(r));
    return copied ? nb::cast(r) : nb::borrow(self);  // no change: the same object, as torch
  });
  cls.def("type", [](const Tensor& t, nb::handle d) { return to_dtype(t, as_dtype(d)); });
#define BIND_CAST(name, dt) cls.def(#name, [](const Tensor& t) { return to_dtype(t, dt); });
  BIND_CAST(float, kFloat32) BIND_CAST(double, kFloat64) BIND_CAST(half, kFloat16)
  BIND_CAST(bfloat16, kBFloat16) BIND_CAST(int, kInt32) BIND_CAST(long, kInt64) BIND_CAST(bool, kBool)
  BIND_CAST(short, kInt16) BIND_CAST(byte, kUInt8) BIND_CAST(char, kInt8) BIND_CAST(cfloat, kComplex64)
  BIND_CAST(cdouble, kComplex128)
#undef BIND_CAST

  // ---- views --------------------------------------------------------------------------------------
  cls.def("view", [](const Tensor& t, nb::args a) -> Tensor {
    if (a.size() == 1 && (nb::isinstance<PyDtype>(a[0]))) return view_dtype(t, as_dtype(a[0]));
    return view(t, shape_from_args(a));
  });
  cls.def("view_as", [](const Tensor& t, const Tensor& o) { return view(t, o.sizes()); });
  cls.def("reshape", [](const Tensor& t, nb::args a) { return reshape(t, shape_from_args(a)); });
  cls.def("reshape_as", [](const Tensor& t, const Tensor& o) { return reshape(t, o.sizes()); });
  m.def("reshape", [](const Tensor& t, nb::handle s) { return reshape(t, as_shape(s)); }, "input"_a, "shape"_a);
  for (const char* n : {"transpose", "swapaxes", "swapdims"}) {
    m.def(n, [](const Tensor& t, int64_t a, int64_t b) { return transpose(t, a, b); }, "input"_a, "dim0"_a, "dim1"_a);
    cls.def(n, [](const Tensor& t, int64_t a, int64_t b) { return transpose(t, a, b); }, "dim0"_a, "dim1"_a);
  }
  m.def("t", [](const Tensor& x) { return t(x); });
  cls.def("t", [](const Tensor& x) { return t(x); });
  m.def("adjoint", [](const Tensor& x) { return conj(mT(x)); });
  cls.def("expand_as", [](const Tensor& t, const Tensor& o) { return expand_as(t, o); });
  m.def("broadcast_to", [](const Tensor& t, nb::handle s) { return broadcast_to(t, as_shape(s)); }, "input"_a, "size"_a);
  cls.def("broadcast_to", [](const Tensor& t, nb::handle s) { return broadcast_to(t, as_shape(s)); }, "size"_a);
  m.def("broadcast_tensors", [](nb::args a) {
    TensorList ts;
    for (nb::handle h : a) ts.push_back(nb::cast<Tensor>(h));
    return broadcast_tensors(ts);
  });
  m.def("broadcast_shapes", [](nb::args a) {
    Shape s;
    for (nb::handle h : a) s = broadcast_shapes(s, as_shape(h));
    return shape_tuple(s);
  });
  auto narrow_fn = [](const Tensor& t, int64_t d, int64_t s, int64_t l) { return narrow(t, d, s, l); };
  m.def("narrow", narrow_fn, "input"_a, "dim"_a, "start"_a, "length"_a);
  cls.def("narrow", narrow_fn, "dim"_a, "start"_a, "length"_a);
  auto select_fn = [](const Tensor& t, int64_t d, int64_t i) { return select(t, d, i); };
  m.def("select", select_fn, "input"_a, "dim"_a, "index"_a);
  cls.def("select", select_fn, "dim"_a, "index"_a);
  auto sq = [](const Tensor& t, nb::handle d) { return squeeze(t, as_dims(d)); };
  m.def("squeeze", sq, "input"_a, "dim"_a.none() = none());
  cls.def("squeeze", sq, "dim"_a.none() = none());
  auto flat = [](const Tensor& t, int64_t s, int64_t e) { return flatten(t, s, e); };
  m.def("flatten", flat, "input"_a, "start_dim"_a = 0, "end_dim"_a = -1);
  cls.def("flatten", flat, "start_dim"_a = 0, "end_dim"_a = -1);
  m.def("ravel", [](const Tensor& t) { return reshape(t, {-1}); });
  cls.def("ravel", [](const Tensor& t) { return reshape(t, {-1}); });
  auto unflat = [](const Tensor& t, int64_t d, nb::handle s) { return unflatten(t, d, as_shape(s)); };
  m.def("unflatten", unflat, "input"_a, "dim"_a, "sizes"_a);
  cls.def("unflatten", unflat, "dim"_a, "sizes"_a);
  auto diag_fn = [](const Tensor& t, int64_t o, int64_t a, int64_t b) { return diagonal(t, o, a, b); };
  m.def("diagonal", diag_fn, "input"_a, "offset"_a = 0, "dim1"_a = 0, "dim2"_a = 1);
  cls.def("diagonal", diag_fn, "offset"_a = 0, "dim1"_a = 0, "dim2"_a = 1);
  m.def("as_strided", [](const Tensor& t, nb::handle s, nb::handle st, std::optional<int64_t> o) {
    return as_strided(t, as_shape(s), as_shape(st), o);
  }, "input"_a, "size"_a, "stride"_a, "storage_offset"_a.none() = none());
  cls.def("as_strided", [](const Tensor& t, nb::handle s, nb::handle st, std::optional<int64_t> o) {
    return as_strided(t, as_shape(s), as_shape(st), o);
  }, "size"_a, "stride"_a, "storage_offset"_a.none() = none());
  cls.def("unfold", [](const Tensor& t, int64_t d, int64_t s, int64_t st) { return unfold(t, d, s, st); },
          "dimension"_a, "size"_a, "step"_a);
  auto movedim_fn = [](const Tensor& t, nb::handle s, nb::handle d) { return movedim(t, as_shape(s), as_shape(d)); };
  for (const char* n : {"movedim", "moveaxis"}) {
    m.def(n, movedim_fn, "input"_a, "source"_a, "destination"_a);
    cls.def(n, movedim_fn, "source"_a, "destination"_a);
  }
  auto split_fn = [](const Tensor& t, nb::handle s, int64_t d) {
    if (PyLong_Check(s.ptr())) return split(t, nb::cast<int64_t>(s), d);
    return split_with_sizes(t, as_shape(s), d);
  };
  m.def("split", split_fn, "tensor"_a, "split_size_or_sections"_a, "dim"_a = 0);
  cls.def("split", split_fn, "split_size"_a, "dim"_a = 0);
  auto chunk_fn = [](const Tensor& t, int64_t c, int64_t d) { return chunk(t, c, d); };
  m.def("chunk", chunk_fn, "input"_a, "chunks"_a, "dim"_a = 0);
  cls.def("chunk", chunk_fn, "chunks"_a, "dim"_a = 0);
  auto unbind_fn = [](const Tensor& t, int64_t d) { return unbind(t, d); };
  m.def("unbind", unbind_fn, "input"_a, "dim"_a = 0);
  cls.def("unbind", unbind_fn, "dim"_a = 0);
  auto cat_fn = [](const TensorList& ts, int64_t d) { return cat(ts, d); };
  for (const char* n : {"cat", "concat", "concatenate"}) m.def(n, cat_fn, "tensors"_a, "dim"_a = 0);
  m.def("stack", [](const TensorList& ts, int64_t d) { return stack(ts, d); }, "tensors"_a, "dim"_a = 0);
  m.def("hstack", [](const TensorList& ts) { return hstack(ts); });
  m.def("vstack", [](const TensorList& ts) { return vstack(ts); });

  // ---- reductions ---------------------------------------------------------------------------------
#define BIND_RED(name)                                                                             \
  {                                                                                                \
    auto f = [](const Tensor& x, nb::handle dim, bool keepdim, nb::handle dtype) {                 \
      return name(x, dims_arg(dim), keepdim, as_opt_dtype(dtype));                                 \
    };                                                                                             \
    m.def(#name, f, "input"_a, "dim"_a.none() = none(), "keepdim"_a = false, nb::kw_only(), "dtype"_a.none() = none()); \
    cls.def(#name, f, "dim"_a.none() = none(), "keepdim"_a = false, nb::kw_only(), "dtype"_a.none() = none());  \
  }
  BIND_RED(nanmean)  // sum, nansum, mean: from their schemas (expose_registered)
#undef BIND_RED
  {
    auto f = [](const Tensor& x, std::optional<int64_t> dim, bool keepdim, nb::handle dtype) {
      return prod(x, dim, keepdim, as_opt_dtype(dtype));
    };
    m.def("prod", f, "input"_a, "dim"_a.none() = none(), "keepdim"_a = false, nb::kw_only(), "dtype"_a.none() = none());
    cls.def("prod", f, "dim"_a.none() = none(), "keepdim"_a = false, nb::kw_only(), "dtype"_a.none() = none());
  }
  // amax, amin, all, any: from their schemas (expose_registered)
  for (int which = 0; which < 2; ++which) {
    const char* n = which ? "min" : "max";
    auto f = [which](const Tensor& x, nb::handle dim, bool keepdim) -> nb::object {
      if (dim.is_none()) return nb::cast(which ? min(x) : max(x));
      if (nb::isinstance<Tensor>(dim)) return nb::cast(which ? minimum(x, nb::cast<Tensor>(dim)) : maximum(x, nb::cast<Tensor>(dim)));
      int64_t d = nb::cast<int64_t>(dim);
      return named2(which ? min(x, d, keepdim) : max(x, d, keepdim), "values", "indices");
    };
    m.def(n, f, "input"_a, "dim"_a.none() = none(), "keepdim"_a = false);
    cls.def(n, f, "dim"_a.none() = none(), "keepdim"_a = false);
  }
  {
    auto am = [](const Tensor& x, std::optional<int64_t> d, bool k) { return argmax(x, d, k); };
    auto an = [](const Tensor& x, std::optional<int64_t> d, bool k) { return argmin(x, d, k); };
    m.def("argmax", am, "input"_a, "dim"_a.none() = none(), "keepdim"_a = false);
    cls.def("argmax", am, "dim"_a.none() = none(), "keepdim"_a = false);
    m.def("argmin", an, "input"_a, "dim"_a.none() = none(), "keepdim"_a = false);
    cls.def("argmin", an, "dim"_a.none() = none(), "keepdim"_a = false);
    auto amm = [](const Tensor& x, std::optional<int64_t> d, bool k) { return named2(aminmax(x, d, k), "min", "max"); };
    m.def("aminmax", amm, "input"_a, nb::kw_only(), "dim"_a.none() = none(), "keepdim"_a = false);
    cls.def("aminmax", amm, nb::kw_only(), "dim"_a.none() = none(), "keepdim"_a = false);
  }
  auto corr = [](nb::handle correction, nb::handle unbiased) -> double {
    if (!correction.is_none()) return nb::cast<double>(correction);
    if (!unbiased.is_none()) return nb::cast<bool>(unbiased) ? 1.0 : 0.0;
    return 1.0;
  };
#define BIND_VAR(name, ret)                                                                        \
  {                                                                                                \
    auto f = [corr](const Tensor& x, nb::handle dim, nb::handle unbiased, bool keepdim, nb::handle correction) -> nb::object { \
      return ret(name(x, dims_arg(dim), corr(correction, unbiased), keepdim));                     \
    };                                                                                             \
    m.def(#name, f, "input"_a, "dim"_a.none() = none(), "unbiased"_a.none() = none(), "keepdim"_a = false, nb::kw_only(), "correction"_a.none() = none()); \
    cls.def(#name, f, "dim"_a.none() = none(), "unbiased"_a.none() = none(), "keepdim"_a = false, nb::kw_only(), "correction"_a.none() = none()); \
  }
  BIND_VAR(var, nb::cast) BIND_VAR(std, nb::cast) BIND_VAR(var_mean, tuple2) BIND_VAR(std_mean, tuple2)
#undef BIND_VAR
  auto lse = [](const Tensor& x, nb::handle dim, bool keepdim) { return logsumexp(x, dims_list(dim), keepdim); };
  m.def("logsumexp", lse, "input"_a, "dim"_a, "keepdim"_a = false);
  cls.def("logsumexp", lse, "dim"_a, "keepdim"_a = false);
  auto cnz = [](const Tensor& x, nb::handle dim) { return count_nonzero(x, dims_arg(dim)); };
  m.def("count_nonzero", cnz, "input"_a, "dim"_a.none() = none());
  cls.def("count_nonzero", cnz, "dim"_a.none() = none());
  auto norm_fn = [](const Tensor& x, nb::handle p, nb::handle dim, bool keepdim, nb::handle dtype) {
    double ord = 2;
    if (!p.is_none()) {
      if (PyUnicode_Check(p.ptr())) {
        std::string s = nb::cast<std::string>(p);
        KILN_CHECK(s == "fro", Value, "norm", "norm: unsupported p='", s, "'");
      } else {
        ord = nb::cast<double>(p);
      }
    }
    return vector_norm(x, ord, dims_arg(dim), keepdim, as_opt_dtype(dtype));
  };
  m.def("norm", norm_fn, "input"_a, "p"_a = "fro", "dim"_a.none() = none(), "keepdim"_a = false, "dtype"_a.none() = none());
  cls.def("norm", norm_fn, "p"_a = "fro", "dim"_a.none() = none(), "keepdim"_a = false, "dtype"_a.none() = none());
  m.def("_vector_norm", [](const Tensor& x, double ord, nb::handle dim, bool keepdim, nb::handle dtype) {
    return vector_norm(x, ord, dims_arg(dim), keepdim, as_opt_dtype(dtype));
  }, "x"_a, "ord"_a = 2.0, "dim"_a.none() = none(), "keepdim"_a = false, nb::kw_only(), "dtype"_a.none() = none());
  // softmax, log_softmax: from their schemas (expose_registered)
  // cumsum, cumprod: from their schemas (expose_registered)
  m.def("logcumsumexp", [](const Tensor& x, int64_t d) { return logcumsumexp(x, d); }, "input"_a, "dim"_a);
  cls.def("logcumsumexp", [](const Tensor& x, int64_t d) { return logcumsumexp(x, d); }, "dim"_a);

  // ---- matmul -------------------------------------------------------------------------------------
#define BIND_MM(name)                                                             \
  m.def(#name, [](const Tensor& a, const Tensor& b) { return name(a, b); });      \
  cls.def(#name, [](const Tensor& a, const Tensor& b) { return name(a, b); });
  BIND_MM(matmul) BIND_MM(mm) BIND_MM(mv) BIND_MM(dot) BIND_MM(vdot) BIND_MM(outer)
  BIND_MM(inner) BIND_MM(kron)
#undef BIND_MM
  m.def("ger", [](const Tensor& a, const Tensor& b) { return outer(a, b); });
#define BIND_ADDMM(name)                                                                           \
  {                                                                                                \
    auto f = [](const Tensor& c, const Tensor& a, const Tensor& b, nb::handle beta, nb::handle alpha) { \
      return name(c, a, b, as_scalar(beta), as_scalar(alpha));                                     \
    };                                                                                             \
    m.def(#name, f, "input"_a, "mat1"_a, "mat2"_a, nb::kw_only(), "beta"_a = 1, "alpha"_a = 1);    \
    cls.def(#name, f, "mat1"_a, "mat2"_a, nb::kw_only(), "beta"_a = 1, "alpha"_a = 1);            \
  }
  BIND_ADDMM(addmm) BIND_ADDMM(baddbmm) BIND_ADDMM(addbmm) BIND_ADDMM(addmv)
#undef BIND_ADDMM
  m.def("tensordot", [](const Tensor& a, const Tensor& b, nb::handle dims) {
    if (PyLong_Check(dims.ptr())) {
      int64_t n = nb::cast<int64_t>(dims);
      Shape da, db;
      for (int64_t i = 0; i < n; ++i) da.push_back(a.dim() - n + i), db.push_back(i);
      return tensordot(a, b, da, db);
    }
    nb::sequence s = nb::borrow<nb::sequence>(dims);
    return tensordot(a, b, as_shape(s[0]), as_shape(s[1]));
  }, "a"_a, "b"_a, "dims"_a = 2);
  m.def("einsum", [](const std::string& eq, nb::args ops) {
    TensorList ts;
    if (ops.size() == 1 && !nb::isinstance<Tensor>(ops[0]))
      for (nb::handle h : ops[0]) ts.push_back(nb::cast<Tensor>(h));
    else
      for (nb::handle h : ops) ts.push_back(nb::cast<Tensor>(h));
    return einsum(eq, ts);
  });

  // ---- indexing -----------------------------------------------------------------------------------
  auto mfill = [](const Tensor& x, const Tensor& mask, nb::handle v) { return masked_fill(x, mask, as_scalar(v)); };
  m.def("masked_fill", mfill, "input"_a, "mask"_a, "value"_a);
  cls.def("masked_fill", mfill, "mask"_a, "value"_a);
  cls.def("masked_fill_", [](const Tensor& x, const Tensor& mask, nb::handle v) {
    return copy_(x, masked_fill(x, mask, as_scalar(v)));
  }, "mask"_a, "value"_a);
  auto nz = [](const Tensor& x, bool as_tuple) -> nb::object {
    Tensor n = nonzero(x);
    if (!as_tuple) return nb::cast(n);
    nb::list l;
    for (int64_t d = 0; d < n.sizes()[1]; ++d) l.append(nb::cast(contiguous(select(n, 1, d))));
    return nb::tuple(l);
  };
  m.def("nonzero", nz, "input"_a, nb::kw_only(), "as_tuple"_a = false);
  cls.def("nonzero", nz, nb::kw_only(), "as_tuple"_a = false);
  m.def("argwhere", [](const Tensor& x) { return nonzero(x); });

  // ---- random -------------------------------------------------------------------------------------
  // kiln.Generator: an independent Philox stream (torch.Generator's API); generator=None uses the default.
  nb::class_<Generator>(m, "Generator")
      .def(nb::init<>())
      .def("manual_seed", [](Generator& g, uint64_t s) -> Generator& { g.manual_seed(s); return g; },
           nb::rv_policy::reference)
      .def("initial_seed", &Generator::initial_seed)
      .def("get_state", [](const Generator& g) { return nb::make_tuple(g.initial_seed(), g.offset()); })
      .def("set_state", [](Generator& g, nb::tuple st) {
        g.manual_seed(nb::cast<uint64_t>(st[0]));
        g.set_offset(nb::cast<uint64_t>(st[1]));
        return &g;
      }, nb::rv_policy::reference)
      .def_prop_ro("device", [](const Generator&) { return kCPU; });
  auto gen = [](nb::handle h) -> Generator* { return h.is_none() ? nullptr : nb::cast<Generator*>(h); };
  m.def("rand", [gen](nb::args size, nb::handle g, nb::handle dtype, nb::handle device) {
    return rand(shape_from_args(size), opts(dtype, device), gen(g));
  }, "size"_a, nb::kw_only(), "generator"_a.none() = none(), "dtype"_a.none() = none(), "device"_a.none() = none());
  m.def("randn", [gen](nb::args size, nb::handle g, nb::handle dtype, nb::handle device) {
    return randn(shape_from_args(size), opts(dtype, device), gen(g));
  }, "size"_a, nb::kw_only(), "generator"_a.none() = none(), "dtype"_a.none() = none(), "device"_a.none() = none());
  m.def("randint", [gen](int64_t a, nb::handle b, nb::handle size, nb::handle g, nb::handle dtype, nb::handle device) {
    TensorOptions o = opts(dtype, device);
    if (size.is_none()) return randint(0, a, as_shape(b), o, gen(g));
    return randint(a, nb::cast<int64_t>(b), as_shape(size), o, gen(g));
  }, "low"_a, "high"_a, "size"_a.none() = none(), nb::kw_only(), "generator"_a.none() = none(),
     "dtype"_a.none() = none(), "device"_a.none() = none());
  m.def("randperm", [gen](int64_t n, nb::handle g, nb::handle dtype, nb::handle device) {
    return randperm(n, opts(dtype, device), gen(g));
  }, "n"_a, nb::kw_only(), "generator"_a.none() = none(), "dtype"_a.none() = none(), "device"_a.none() = none());
  m.def("rand_like", [like_opts](const Tensor& t, nb::handle d, nb::handle dev) { return rand(t.sizes(), like_opts(t, d, dev)); },
        "input"_a, nb::kw_only(), "dtype"_a.none() = none(), "device"_a.none() = none());
  m.def("randn_like", [like_opts](const Tensor& t, nb::handle d, nb::handle dev) { return randn(t.sizes(), like_opts(t, d, dev)); },
        "input"_a, nb::kw_only(), "dtype"_a.none() = none(), "device"_a.none() = none());
  cls.def("uniform_", [gen](const Tensor& t, double a, double b, nb::handle g) { return uniform_(t, a, b, gen(g)); },
          "from_"_a = 0.0, "to"_a = 1.0, nb::kw_only(), "generator"_a.none() = none());
  cls.def("normal_", [gen](const Tensor& t, double a, double b, nb::handle g) { return normal_(t, a, b, gen(g)); },
          "mean"_a = 0.0, "std"_a = 1.0, nb::kw_only(), "generator"_a.none() = none());
  cls.def("exponential_", [](const Tensor& t, double l) { return exponential_(t, l); }, "lambd"_a = 1.0);
  cls.def("log_normal_", [](const Tensor& t, double a, double b) { return log_normal_(t, a, b); }, "mean"_a = 1.0, "std"_a = 2.0);
  cls.def("geometric_", [](const Tensor& t, double p) { return geometric_(t, p); }, "p"_a);
  cls.def("cauchy_", [](const Tensor& t, double a, double b) { return cauchy_(t, a, b); }, "median"_a = 0.0, "sigma"_a = 1.0);
  m.def("bernoulli", [gen](const Tensor& p, nb::handle g) { return bernoulli(p, gen(g)); }, "input"_a, nb::kw_only(),
        "generator"_a.none() = none());
  cls.def("bernoulli", [gen](const Tensor& p, nb::handle g) { return bernoulli(p, gen(g)); }, nb::kw_only(),
          "generator"_a.none() = none());
  m.def("normal", [gen](double mean, double std, nb::handle size, nb::handle g, nb::handle dtype, nb::handle device) {
    return normal_(empty(as_shape(size), opts(dtype, device)), mean, std, gen(g));
  }, "mean"_a, "std"_a, "size"_a, nb::kw_only(), "generator"_a.none() = none(), "dtype"_a.none() = none(),
     "device"_a.none() = none());
  auto multi = [gen](const Tensor& p, int64_t n, bool r, nb::handle g) { return multinomial(p, n, r, gen(g)); };
  m.def("multinomial", multi, "input"_a, "num_samples"_a, "replacement"_a = false, nb::kw_only(),
        "generator"_a.none() = none());
  cls.def("multinomial", multi, "num_samples"_a, "replacement"_a = false, nb::kw_only(), "generator"_a.none() = none());
}

}  // namespace kiln::py
