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
  // conv1d, conv2d (padding as ints or "valid" / "same"), conv_transpose1d: from their composites'
  // schemas (kiln/ops/conv.cpp)
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

  // ---- pooling: max_pool1d/2d (with_indices), avg_pool1d/2d, adaptive_avg_pool1d/2d come from their
  // composites' schemas (kiln/ops/pool.cpp)

  // ---- upsampling -------------------------------------------------------------------------------
  m.def(
      "_unfold",
      [](const Tensor& x, nb::handle k, nb::handle d, nb::handle p, nb::handle s) {
        const char* f = "unfold";
        Shape K = ints(k, f, "kernel_size"), D = ints(d, f, "dilation"), P = ints(p, f, "padding"),
              S = ints(s, f, "stride");
        nb::gil_scoped_release g;
        return nn::functional::unfold(x, K, D, P, S);
      },
      "input"_a, "kernel_size"_a, "dilation"_a = 1, "padding"_a = 0, "stride"_a = 1);
  m.def(
      "_fold",
      [](const Tensor& x, nb::handle o, nb::handle k, nb::handle d, nb::handle p, nb::handle s) {
        const char* f = "fold";
        Shape O = ints(o, f, "output_size"), K = ints(k, f, "kernel_size"),
              D = ints(d, f, "dilation"), P = ints(p, f, "padding"), S = ints(s, f, "stride");
        nb::gil_scoped_release g;
        return nn::functional::fold(x, O, K, D, P, S);
      },
      "input"_a, "output_size"_a, "kernel_size"_a, "dilation"_a = 1, "padding"_a = 0, "stride"_a = 1);
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
