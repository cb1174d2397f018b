// Python binding: convolution, pooling, upsampling (kiln/ops/nn_ops.h) and a derivative test hook.
#include <Python.h>

#include "common.h"
#include "kiln/ops/nn_ops.h"

namespace kiln::py {

namespace {

nb::object none() { return nb::none(); }

std::string type_of(nb::handle h) { return nb::type_name(h.type()).c_str(); }

bool is_int(nb::handle h) { return PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr()); }
bool is_float(nb::handle h) { return PyFloat_Check(h.ptr()) || is_int(h); }

// An int or a sequence of ints (torch's IntArrayRef arguments); None = empty.
Shape ints(nb::handle h, const char* fn, const char* arg) {
  if (h.is_none()) return {};
  if (is_int(h)) return {nb::cast<int64_t>(h)};
  if (PyTuple_Check(h.ptr()) || PyList_Check(h.ptr())) {
    Shape s;
    for (nb::handle v : nb::borrow<nb::sequence>(h)) {
      if (!is_int(v))
        throw nb::type_error((std::string(fn) + "(): argument '" + arg +
                              "' must be tuple of ints, but found element "
                              "of type " +
                              type_of(v))
                                 .c_str());
      s.push_back(nb::cast<int64_t>(v));
    }
    return s;
  }
  throw nb::type_error(
      (std::string(fn) + "(): argument '" + arg + "' must be tuple of ints, not " + type_of(h))
          .c_str());
}

Tensor opt_tensor(nb::handle h) { return h.is_none() ? Tensor() : nb::cast<Tensor>(h); }

nb::object pair(const std::tuple<Tensor, Tensor>& t) {
  return nb::make_tuple(std::get<0>(t), std::get<1>(t));
}

// conv1d / conv2d with padding as ints or "valid" / "same"
template <Tensor (*Ints)(const Tensor&, const Tensor&, const Tensor&, const Shape&, const Shape&,
                         const Shape&, int64_t),
          Tensor (*Str)(const Tensor&, const Tensor&, const Tensor&, const Shape&,
                        const std::string&, const Shape&, int64_t)>
Tensor conv_call(const char* fn, const Tensor& x, const Tensor& w, nb::handle bias,
                 nb::handle stride, nb::handle padding, nb::handle dilation, int64_t groups) {
  Shape s = ints(stride, fn, "stride"), d = ints(dilation, fn, "dilation");
  Tensor b = opt_tensor(bias);
  if (nb::isinstance<nb::str>(padding)) {
    std::string p = nb::cast<std::string>(padding);
    nb::gil_scoped_release g;
    return Str(x, w, b, s, p, d, groups);
  }
  Shape p = ints(padding, fn, "padding");
  nb::gil_scoped_release g;
  return Ints(x, w, b, s, p, d, groups);
}
Tensor conv1d_ints(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& s,
                   const Shape& p, const Shape& d, int64_t g) {
  return conv1d(x, w, b, s, p, d, g);
}
Tensor conv1d_str(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& s,
                  const std::string& p, const Shape& d, int64_t g) {
  return conv1d(x, w, b, s, p, d, g);
}
Tensor conv2d_ints(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& s,
                   const Shape& p, const Shape& d, int64_t g) {
  return conv2d(x, w, b, s, p, d, g);
}
Tensor conv2d_str(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& s,
                  const std::string& p, const Shape& d, int64_t g) {
  return conv2d(x, w, b, s, p, d, g);
}

// Python value -> op attribute: None, bool, int, float, str, or a sequence of ints.
Attr to_attr(nb::handle h) {
  if (h.is_none()) return std::monostate{};
  if (PyBool_Check(h.ptr())) return nb::cast<bool>(h);
  if (is_int(h)) return nb::cast<int64_t>(h);
  if (PyFloat_Check(h.ptr())) return nb::cast<double>(h);
  if (nb::isinstance<nb::str>(h)) return nb::cast<std::string>(h);
  return ints(h, "_derivative", "attrs");
}

}  // namespace

void bind_conv(nb::module_& m) {
  // ---- convolution ------------------------------------------------------------------------------
  m.def(
      "conv1d",
      [](const Tensor& x, const Tensor& w, nb::handle b, nb::handle s, nb::handle p, nb::handle d,
         int64_t groups) {
        return conv_call<conv1d_ints, conv1d_str>("conv1d", x, w, b, s, p, d, groups);
      },
      "input"_a, "weight"_a, "bias"_a.none() = none(), "stride"_a.none() = 1,
      "padding"_a.none() = 0, "dilation"_a.none() = 1, "groups"_a = 1);
  m.def(
      "conv2d",
      [](const Tensor& x, const Tensor& w, nb::handle b, nb::handle s, nb::handle p, nb::handle d,
         int64_t groups) {
        return conv_call<conv2d_ints, conv2d_str>("conv2d", x, w, b, s, p, d, groups);
      },
      "input"_a, "weight"_a, "bias"_a.none() = none(), "stride"_a.none() = 1,
      "padding"_a.none() = 0, "dilation"_a.none() = 1, "groups"_a = 1);
  m.def(
      "conv_transpose1d",
      [](const Tensor& x, const Tensor& w, nb::handle b, nb::handle s, nb::handle p, nb::handle op,
         int64_t groups, nb::handle d) {
        const char* fn = "conv_transpose1d";
        Shape S = ints(s, fn, "stride"), P = ints(p, fn, "padding"),
              OP = ints(op, fn, "output_padding"), D = ints(d, fn, "dilation");
        Tensor B = opt_tensor(b);
        nb::gil_scoped_release g;
        return conv_transpose1d(x, w, B, S, P, OP, groups, D);
      },
      "input"_a, "weight"_a, "bias"_a.none() = none(), "stride"_a.none() = 1,
      "padding"_a.none() = 0, "output_padding"_a.none() = 0, "groups"_a = 1,
      "dilation"_a.none() = 1);
  m.def(
      "convolution",
      [](const Tensor& x, const Tensor& w, nb::handle b, nb::handle s, nb::handle p, nb::handle d,
         bool transposed, nb::handle op, int64_t groups) {
        const char* fn = "convolution";
        Shape S = ints(s, fn, "stride"), P = ints(p, fn, "padding"), D = ints(d, fn, "dilation"),
              OP = ints(op, fn, "output_padding");
        Tensor B = opt_tensor(b);
        nb::gil_scoped_release g;
        return convolution(x, w, B, S, P, D, transposed, OP, groups);
      },
      "input"_a, "weight"_a, "bias"_a.none(), "stride"_a, "padding"_a, "dilation"_a, "transposed"_a,
      "output_padding"_a, "groups"_a);
  m.def(
      "convolution_backward_weight",
      [](const Tensor& gy, const Tensor& x, nb::handle ws, nb::handle s, nb::handle p, nb::handle d,
         int64_t groups) {
        const char* fn = "convolution_backward_weight";
        return convolution_backward_weight(gy, x, ints(ws, fn, "weight_size"),
                                           ints(s, fn, "stride"), ints(p, fn, "padding"),
                                           ints(d, fn, "dilation"), groups);
      },
      "grad_output"_a, "input"_a, "weight_size"_a, "stride"_a, "padding"_a, "dilation"_a,
      "groups"_a);

  // ---- pooling ----------------------------------------------------------------------------------
  auto max_pool = [&m](const char* name, auto fn, bool with_indices) {
    m.def(
        name,
        [name, fn, with_indices](const Tensor& x, nb::handle k, nb::handle s, nb::handle p,
                                 nb::handle d, bool ceil) -> nb::object {
          Shape K = ints(k, name, "kernel_size"), S = ints(s, name, "stride"),
                P = ints(p, name, "padding"), D = ints(d, name, "dilation");
          std::tuple<Tensor, Tensor> r;
          {
            nb::gil_scoped_release g;
            r = fn(x, K, S, P, D, ceil);
          }
          if (with_indices) return pair(r);
          return nb::cast(std::get<0>(r));
        },
        "input"_a, "kernel_size"_a, "stride"_a.none() = nb::tuple(), "padding"_a = 0,
        "dilation"_a = 1, "ceil_mode"_a = false);
  };
  max_pool("max_pool1d_with_indices", &max_pool1d_with_indices, true);
  max_pool("max_pool2d_with_indices", &max_pool2d_with_indices, true);
  max_pool(
      "max_pool1d",
      [](const Tensor& x, const Shape& k, const Shape& s, const Shape& p, const Shape& d, bool c) {
        return std::tuple<Tensor, Tensor>{max_pool1d(x, k, s, p, d, c), Tensor()};
      },
      false);
  max_pool("max_pool2d", &max_pool2d_with_indices, false);
  m.def(
      "avg_pool1d",
      [](const Tensor& x, nb::handle k, nb::handle s, nb::handle p, bool ceil, bool include_pad) {
        const char* fn = "avg_pool1d";
        Shape K = ints(k, fn, "kernel_size"), S = ints(s, fn, "stride"), P = ints(p, fn, "padding");
        nb::gil_scoped_release g;
        return avg_pool1d(x, K, S, P, ceil, include_pad);
      },
      "input"_a, "kernel_size"_a, "stride"_a.none() = nb::tuple(), "padding"_a = 0,
      "ceil_mode"_a = false, "count_include_pad"_a = true);
  m.def(
      "avg_pool2d",
      [](const Tensor& x, nb::handle k, nb::handle s, nb::handle p, bool ceil, bool include_pad,
         std::optional<int64_t> divisor) {
        const char* fn = "avg_pool2d";
        Shape K = ints(k, fn, "kernel_size"), S = ints(s, fn, "stride"), P = ints(p, fn, "padding");
        nb::gil_scoped_release g;
        return avg_pool2d(x, K, S, P, ceil, include_pad, divisor);
      },
      "input"_a, "kernel_size"_a, "stride"_a.none() = nb::tuple(), "padding"_a = 0,
      "ceil_mode"_a = false, "count_include_pad"_a = true, "divisor_override"_a.none() = none());
  m.def(
      "adaptive_avg_pool1d",
      [](const Tensor& x, nb::handle os) {
        return adaptive_avg_pool1d(x, ints(os, "adaptive_avg_pool1d", "output_size"));
      },
      "input"_a, "output_size"_a);
  m.def(
      "adaptive_avg_pool2d",
      [](const Tensor& x, nb::handle os) {
        return adaptive_avg_pool2d(x, ints(os, "adaptive_avg_pool2d", "output_size"));
      },
      "input"_a, "output_size"_a);

  // ---- upsampling -------------------------------------------------------------------------------
  m.def(
      "_interpolate",
      [](const Tensor& x, nb::handle size, nb::handle scale, const std::string& mode,
         std::optional<bool> align, std::optional<bool> recompute, bool antialias) {
        int64_t dim = std::max<int64_t>(x.dim() - 2, 0);
        std::optional<Shape> sz;
        if (!size.is_none())
          sz = is_int(size) ? Shape(dim, nb::cast<int64_t>(size))
                            : ints(size, "interpolate", "size");
        std::optional<std::vector<double>> sf;
        if (!scale.is_none()) {
          if (is_float(scale)) {
            sf = std::vector<double>(dim, nb::cast<double>(scale));
          } else {
            sf.emplace();
            for (nb::handle v : nb::borrow<nb::sequence>(scale)) sf->push_back(nb::cast<double>(v));
          }
        }
        nb::gil_scoped_release g;
        return interpolate(x, sz, sf, mode, align, recompute, antialias);
      },
      "input"_a, "size"_a.none() = none(), "scale_factor"_a.none() = none(), "mode"_a = "nearest",
      "align_corners"_a.none() = none(), "recompute_scale_factor"_a.none() = none(),
      "antialias"_a = false);

  // ---- testing hook: runs an op's forward, then its registered derivative as the autograd engine
  // will (only the inputs / outputs named by the save masks are passed). Returns one gradient or
  // None per input.
  m.def(
      "_derivative",
      [](const std::string& name, const std::vector<Tensor>& inputs, nb::handle attrs,
         nb::handle grads, nb::handle needs) {
        const OpDef* op = find_op(name);
        if (!op) throw nb::value_error(("_derivative: no op named " + name).c_str());
        if (!op->derivative)
          throw nb::value_error(("_derivative: op " + name + " has no derivative").c_str());
        TensorList in(inputs.begin(), inputs.end());
        Attrs a;
        for (nb::handle v : nb::borrow<nb::sequence>(attrs)) a.push_back(to_attr(v));
        TensorList go;
        for (nb::handle v : nb::borrow<nb::sequence>(grads)) go.push_back(opt_tensor(v));
        std::vector<bool> need(in.size(), true);
        if (!needs.is_none()) {
          size_t i = 0;
          for (nb::handle v : nb::borrow<nb::sequence>(needs))
            if (i < need.size()) need[i++] = nb::cast<bool>(v);
        }
        TensorList out = dispatch_kernel(*op, in, a, nullptr, false);
        TensorList saved_in(in.size()), saved_out(out.size());
        SpecList specs;
        for (size_t i = 0; i < in.size(); ++i) {
          if (op->save_in >> i & 1) saved_in[i] = in[i];
          specs.push_back({in[i].sizes(), in[i].dtype()});
        }
        for (size_t i = 0; i < out.size(); ++i)
          if (op->save_out >> i & 1) saved_out[i] = out[i];
        if (go.size() != out.size())
          throw nb::value_error("_derivative: one gradient (or None) per output expected");
        GradCtx ctx{*op, a, saved_in, saved_out, specs, need};
        TensorList r = op->derivative(ctx, go);
        nb::list res;
        for (const Tensor& t : r) res.append(t.defined() ? nb::cast(t) : none());
        return res;
      },
      "op"_a, "inputs"_a, "attrs"_a, "grad_outputs"_a, "needs"_a.none() = none());
}

}  // namespace kiln::py
