// Python binding: norm, conv/pool/upsample, attention and transformer modules (kiln._C._nn) and the
// functional forms they use (kiln._C.batch_norm, group_norm, embedding_bag,
// multi_head_attention_forward).
#include <Python.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/shared_ptr.h>

#include "common.h"
#include "kiln/nn/conv_layers.h"
#include "kiln/nn/norm_layers.h"
#include "kiln/nn/transformer.h"

namespace kiln::py {
namespace {

using namespace kiln::nn;

Tensor opt_t(nb::handle h) { return h.is_none() ? Tensor() : nb::cast<Tensor>(h); }
nb::object opt_obj(const Tensor& t) { return t.defined() ? nb::cast(t) : nb::none(); }
Dtype dt(nb::handle h) { return as_opt_dtype(h).value_or(Dtype::Undefined); }
std::optional<double> opt_d(nb::handle h) {
  return h.is_none() ? std::nullopt : std::optional<double>(nb::cast<double>(h));
}
bool is_int(nb::handle h) { return PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr()); }

// torch's int-or-tuple arguments
Shape ints(nb::handle h, const char* fn, const char* arg) {
  if (is_int(h)) return {nb::cast<int64_t>(h)};
  if (PyTuple_Check(h.ptr()) || PyList_Check(h.ptr())) {
    Shape s;
    for (nb::handle v : nb::borrow<nb::sequence>(h)) {
      if (!is_int(v))
        throw nb::type_error(
            (std::string(fn) + "(): argument '" + arg + "' must be a tuple of ints").c_str());
      s.push_back(nb::cast<int64_t>(v));
    }
    return s;
  }
  throw nb::type_error((std::string(fn) + "(): argument '" + arg +
                        "' must be an int or a tuple of ints, not " +
                        nb::type_name(h.type()).c_str())
                           .c_str());
}
IntOrTuple int_or_tuple(nb::handle h, const char* fn, const char* arg) {
  if (is_int(h)) return IntOrTuple(nb::cast<int64_t>(h));
  return IntOrTuple(ints(h, fn, arg));
}
std::optional<IntOrTuple> opt_int_or_tuple(nb::handle h, const char* fn, const char* arg) {
  if (h.is_none()) return std::nullopt;
  return int_or_tuple(h, fn, arg);
}
ConvPadding conv_padding(nb::handle h, const char* fn) {
  if (nb::isinstance<nb::str>(h)) return ConvPadding(nb::cast<std::string>(h));
  return ConvPadding(ints(h, fn, "padding"));
}

// A Python activation: a name ("relu" / "gelu") or any callable.
template <class Layer>
void set_activation(Layer& layer, nb::handle act) {
  if (nb::isinstance<nb::str>(act)) {
    layer.set_activation(activation_by_name(nb::cast<std::string>(act)),
                         nb::cast<std::string>(act));
    return;
  }
  if (!PyCallable_Check(act.ptr()))
    throw nb::type_error("activation must be a string or a callable");
  layer.set_activation(nb::cast<std::function<Tensor(const Tensor&)>>(act), "");
}

template <class Pool>
void bind_max_pool(nb::module_& nnm, const char* name) {
  nb::class_<Pool, MaxPoolNd>(nnm, name).def(
      "__init__",
      [name](Pool* self, nb::handle k, nb::handle s, nb::handle p, nb::handle d, bool ri, bool cm) {
        new (self)
            Pool(int_or_tuple(k, name, "kernel_size"), opt_int_or_tuple(s, name, "stride"),
                 int_or_tuple(p, name, "padding"), int_or_tuple(d, name, "dilation"), ri, cm);
      },
      "kernel_size"_a, "stride"_a.none() = nb::none(), "padding"_a = 0, "dilation"_a = 1,
      "return_indices"_a = false, "ceil_mode"_a = false);
}

void bind_norm_conv(nb::module_& nnm) {
  nb::class_<BatchNorm, Module>(nnm, "BatchNorm")
      .def("forward", &BatchNorm::forward)
      .def("reset_parameters", &BatchNorm::reset_parameters)
      .def("reset_running_stats", &BatchNorm::reset_running_stats)
      .def_rw("eps", &BatchNorm::eps)
      .def_rw("momentum", &BatchNorm::momentum, nb::arg("momentum").none());
  auto bn_init = [](auto* self, int64_t n, double eps, nb::handle mom, bool affine, bool track,
                    bool bias, nb::handle dtype) {
    using T = std::remove_pointer_t<decltype(self)>;
    new (self) T(n, eps, opt_d(mom), affine, track, bias, dt(dtype));
  };
#define KILN_BIND_BATCH_NORM(C)                                                                               \
  nb::class_<C, BatchNorm>(nnm, #C)                                                                             \
      .def("__init__",                                                                                          \
           [bn_init](C* s, int64_t n, double eps, nb::handle mom, bool a, bool t, bool b, nb::handle d) {       \
             bn_init(s, n, eps, mom, a, t, b, d);                                                               \
           },                                                                                                   \
           "num_features"_a, "eps"_a = 1e-5, "momentum"_a.none() = 0.1, "affine"_a = true,                      \
           "track_running_stats"_a = true, "bias"_a = true, "dtype"_a.none() = nb::none());
  KILN_BIND_BATCH_NORM(BatchNorm1d)
  KILN_BIND_BATCH_NORM(BatchNorm2d)
  KILN_BIND_BATCH_NORM(BatchNorm3d)
#undef KILN_BIND_BATCH_NORM
  nb::class_<InstanceNorm, Module>(nnm, "InstanceNorm")
      .def("forward", &InstanceNorm::forward)
      .def("reset_parameters", &InstanceNorm::reset_parameters)
      .def("reset_running_stats", &InstanceNorm::reset_running_stats)
      .def_rw("eps", &InstanceNorm::eps)
      .def_rw("momentum", &InstanceNorm::momentum);
  auto in_init = [](auto* self, int64_t n, double eps, double mom, bool affine, bool track, bool bias,
                    nb::handle dtype) {
    using T = std::remove_pointer_t<decltype(self)>;
    new (self) T(n, eps, mom, affine, track, bias, dt(dtype));
  };
#define KILN_BIND_INSTANCE_NORM(C)                                                                            \
  nb::class_<C, InstanceNorm>(nnm, #C)                                                                          \
      .def("__init__",                                                                                          \
           [in_init](C* s, int64_t n, double eps, double mom, bool a, bool t, bool b, nb::handle d) {           \
             in_init(s, n, eps, mom, a, t, b, d);                                                               \
           },                                                                                                   \
           "num_features"_a, "eps"_a = 1e-5, "momentum"_a = 0.1, "affine"_a = false,                            \
           "track_running_stats"_a = false, "bias"_a = true, "dtype"_a.none() = nb::none());
  KILN_BIND_INSTANCE_NORM(InstanceNorm1d)
  KILN_BIND_INSTANCE_NORM(InstanceNorm2d)
  KILN_BIND_INSTANCE_NORM(InstanceNorm3d)
#undef KILN_BIND_INSTANCE_NORM
  nb::class_<LocalResponseNorm, Module>(nnm, "LocalResponseNorm")
      .def(nb::init<int64_t, double, double, double>(), "size"_a, "alpha"_a = 1e-4, "beta"_a = 0.75, "k"_a = 1.0)
      .def("forward", &LocalResponseNorm::forward);
  nb::class_<GroupNorm, Module>(nnm, "GroupNorm")
      .def(
          "__init__",
          [](GroupNorm* self, int64_t g, int64_t c, double eps, bool affine, bool bias,
             nb::handle d) { new (self) GroupNorm(g, c, eps, affine, bias, dt(d)); },
          "num_groups"_a, "num_channels"_a, "eps"_a = 1e-5, "affine"_a = true, "bias"_a = true,
          "dtype"_a.none() = nb::none())
      .def("forward", &GroupNorm::forward)
      .def("reset_parameters", &GroupNorm::reset_parameters);
  nb::class_<EmbeddingBag, Module>(nnm, "EmbeddingBag")
      .def(
          "__init__",
          [](EmbeddingBag* self, int64_t num, int64_t dim, nb::handle max_norm, double norm_type,
             bool freq, const std::string& mode, bool sparse, bool last, std::optional<int64_t> pad,
             nb::handle d) {
            new (self) EmbeddingBag(num, dim, opt_d(max_norm), norm_type, freq, mode, sparse, last,
                                    pad, dt(d));
          },
          "num_embeddings"_a, "embedding_dim"_a, "max_norm"_a.none() = nb::none(),
          "norm_type"_a = 2.0, "scale_grad_by_freq"_a = false, "mode"_a = "mean",
          "sparse"_a = false, "include_last_offset"_a = false, "padding_idx"_a.none() = nb::none(),
          "dtype"_a.none() = nb::none())
      .def(
          "forward",
          [](EmbeddingBag& m, const Tensor& x, nb::handle off, nb::handle psw) {
            return m.forward(x, opt_t(off), opt_t(psw));
          },
          "input"_a, "offsets"_a.none() = nb::none(), "per_sample_weights"_a.none() = nb::none())
      .def("reset_parameters", &EmbeddingBag::reset_parameters)
      .def_prop_ro("padding_idx", [](const EmbeddingBag& e) { return e.padding_idx; });

  nb::class_<ConvNd, Module>(nnm, "ConvNd")
      .def("reset_parameters", &ConvNd::reset_parameters)
      .def_ro("kernel_size", &ConvNd::kernel_size)
      .def_ro("stride", &ConvNd::stride)
      .def_ro("padding_values", &ConvNd::padding)
      .def_ro("padding_str", &ConvNd::padding_str)
      .def_ro("dilation", &ConvNd::dilation)
      .def_ro("output_padding", &ConvNd::output_padding);
  auto conv = [&]<class C>(const char* name) {
    nb::class_<C, ConvNd>(nnm, name)
        .def(
            "__init__",
            [name](C* self, int64_t in, int64_t out, nb::handle k, nb::handle s, nb::handle p,
                   nb::handle d, int64_t g, bool bias, const std::string& pm, nb::handle dtype) {
              new (self) C(in, out, ints(k, name, "kernel_size"), ints(s, name, "stride"),
                           conv_padding(p, name), ints(d, name, "dilation"), g, bias, pm, dt(dtype));
            },
            "in_channels"_a, "out_channels"_a, "kernel_size"_a, "stride"_a = 1, "padding"_a = 0,
            "dilation"_a = 1, "groups"_a = 1, "bias"_a = true, "padding_mode"_a = "zeros",
            "dtype"_a.none() = nb::none())
        .def("forward", &C::forward);
  };
  conv.operator()<Conv1d>("Conv1d");
  conv.operator()<Conv2d>("Conv2d");
  conv.operator()<Conv3d>("Conv3d");
  auto conv_t = [&]<class C>(const char* name) {
    nb::class_<C, ConvNd>(nnm, name)
        .def(
            "__init__",
            [name](C* self, int64_t in, int64_t out, nb::handle k, nb::handle s, nb::handle p,
                   nb::handle op, int64_t g, bool bias, nb::handle d, const std::string& pm,
                   nb::handle dtype) {
              new (self) C(in, out, ints(k, name, "kernel_size"), ints(s, name, "stride"),
                           ints(p, name, "padding"), ints(op, name, "output_padding"), g, bias,
                           ints(d, name, "dilation"), pm, dt(dtype));
            },
            "in_channels"_a, "out_channels"_a, "kernel_size"_a, "stride"_a = 1, "padding"_a = 0,
            "output_padding"_a = 0, "groups"_a = 1, "bias"_a = true, "dilation"_a = 1,
            "padding_mode"_a = "zeros", "dtype"_a.none() = nb::none())
        .def(
            "forward",
            [name](C& m, const Tensor& x, nb::handle size) {
              std::optional<Shape> os;
              if (!size.is_none()) os = ints(size, name, "output_size");
              return m.forward(x, os);
            },
            "input"_a, "output_size"_a.none() = nb::none());
  };
  conv_t.operator()<ConvTranspose1d>("ConvTranspose1d");
  conv_t.operator()<ConvTranspose2d>("ConvTranspose2d");
  conv_t.operator()<ConvTranspose3d>("ConvTranspose3d");

  nb::class_<MaxPoolNd, Module>(nnm, "MaxPoolNd")
      .def("forward", [](MaxPoolNd& m, const Tensor& x) -> nb::object {
        if (!m.return_indices) return nb::cast(m.forward(x));
        auto [y, i] = m.forward_with_indices(x);
        return nb::make_tuple(y, i);
      });
  bind_max_pool<MaxPool1d>(nnm, "MaxPool1d");
  bind_max_pool<MaxPool2d>(nnm, "MaxPool2d");
  bind_max_pool<MaxPool3d>(nnm, "MaxPool3d");
  nb::class_<AvgPool1d, Module>(nnm, "AvgPool1d")
      .def(
          "__init__",
          [](AvgPool1d* self, nb::handle k, nb::handle s, nb::handle p, bool cm, bool cip) {
            const char* f = "AvgPool1d";
            new (self)
                AvgPool1d(int_or_tuple(k, f, "kernel_size"), opt_int_or_tuple(s, f, "stride"),
                          int_or_tuple(p, f, "padding"), cm, cip);
          },
          "kernel_size"_a, "stride"_a.none() = nb::none(), "padding"_a = 0, "ceil_mode"_a = false,
          "count_include_pad"_a = true)
      .def("forward", &AvgPool1d::forward);
  auto avg_pool = [&]<class Pool>(const char* f) {
    nb::class_<Pool, Module>(nnm, f)
        .def(
            "__init__",
            [f](Pool* self, nb::handle k, nb::handle s, nb::handle p, bool cm, bool cip,
                std::optional<int64_t> div) {
              new (self) Pool(int_or_tuple(k, f, "kernel_size"), opt_int_or_tuple(s, f, "stride"),
                              int_or_tuple(p, f, "padding"), cm, cip, div);
            },
            "kernel_size"_a, "stride"_a.none() = nb::none(), "padding"_a = 0, "ceil_mode"_a = false,
            "count_include_pad"_a = true, "divisor_override"_a.none() = nb::none())
        .def("forward", &Pool::forward);
  };
  avg_pool.operator()<AvgPool2d>("AvgPool2d");
  avg_pool.operator()<AvgPool3d>("AvgPool3d");
  nb::class_<AdaptiveAvgPool1d, Module>(nnm, "AdaptiveAvgPool1d")
      .def(
          "__init__",
          [](AdaptiveAvgPool1d* self, nb::handle o) {
            new (self) AdaptiveAvgPool1d(int_or_tuple(o, "AdaptiveAvgPool1d", "output_size"));
          },
          "output_size"_a)
      .def("forward", &AdaptiveAvgPool1d::forward);
  nb::class_<AdaptivePoolNd, Module>(nnm, "AdaptivePoolNd")
      .def("forward", [](AdaptivePoolNd& m, const Tensor& x) -> nb::object {
        if (!m.return_indices) return nb::cast(m.forward(x));
        auto [y, i] = m.forward_with_indices(x);
        return nb::make_tuple(y, i);
      });
  auto adaptive = [&]<class Pool>(const char* name) {
    nb::class_<Pool, AdaptivePoolNd>(nnm, name).def(
        "__init__",
        [](Pool* self, nb::handle o, bool ri) {
          if (is_int(o)) {
            new (self) Pool(nb::cast<int64_t>(o), ri);
            return;
          }
          std::vector<std::optional<int64_t>> v;
          for (nb::handle e : nb::borrow<nb::sequence>(o))
            v.push_back(e.is_none() ? std::nullopt : std::optional<int64_t>(nb::cast<int64_t>(e)));
          new (self) Pool(std::move(v), ri, false);
        },
        "output_size"_a, "return_indices"_a = false);
  };
  adaptive.operator()<AdaptiveAvgPool2d>("AdaptiveAvgPool2d");
  adaptive.operator()<AdaptiveAvgPool3d>("AdaptiveAvgPool3d");
  adaptive.operator()<AdaptiveMaxPool1d>("AdaptiveMaxPool1d");
  adaptive.operator()<AdaptiveMaxPool2d>("AdaptiveMaxPool2d");
  adaptive.operator()<AdaptiveMaxPool3d>("AdaptiveMaxPool3d");
  nb::class_<Unfold, Module>(nnm, "Unfold")
      .def(
          "__init__",
          [](Unfold* self, nb::handle k, nb::handle d, nb::handle p, nb::handle s) {
            const char* f = "Unfold";
            new (self) Unfold(int_or_tuple(k, f, "kernel_size"), int_or_tuple(d, f, "dilation"),
                              int_or_tuple(p, f, "padding"), int_or_tuple(s, f, "stride"));
          },
          "kernel_size"_a, "dilation"_a = 1, "padding"_a = 0, "stride"_a = 1)
      .def("forward", &Unfold::forward);
  nb::class_<Fold, Module>(nnm, "Fold")
      .def(
          "__init__",
          [](Fold* self, nb::handle o, nb::handle k, nb::handle d, nb::handle p, nb::handle s) {
            const char* f = "Fold";
            new (self) Fold(int_or_tuple(o, f, "output_size"), int_or_tuple(k, f, "kernel_size"),
                            int_or_tuple(d, f, "dilation"), int_or_tuple(p, f, "padding"),
                            int_or_tuple(s, f, "stride"));
          },
          "output_size"_a, "kernel_size"_a, "dilation"_a = 1, "padding"_a = 0, "stride"_a = 1)
      .def("forward", &Fold::forward);
  nb::class_<Upsample, Module>(nnm, "Upsample")
      .def(
          "__init__",
          [](Upsample* self, nb::handle size, nb::handle scale, const std::string& mode,
             std::optional<bool> align, std::optional<bool> recompute) {
            std::optional<std::vector<double>> sf;
            bool scalar = true;
            if (!scale.is_none()) {
              if (PyTuple_Check(scale.ptr()) || PyList_Check(scale.ptr())) {
                scalar = false;
                sf.emplace();
                for (nb::handle v : nb::borrow<nb::sequence>(scale))
                  sf->push_back(nb::cast<double>(v));
              } else {
                sf = std::vector<double>{nb::cast<double>(scale)};
              }
            }
            new (self) Upsample(opt_int_or_tuple(size, "Upsample", "size"), sf, mode, align,
                                recompute, scalar);
          },
          "size"_a.none() = nb::none(), "scale_factor"_a.none() = nb::none(), "mode"_a = "nearest",
          "align_corners"_a.none() = nb::none(), "recompute_scale_factor"_a.none() = nb::none())
      .def("forward", &Upsample::forward);
}

void bind_attention_layers(nb::module_& nnm) {
  nb::class_<NonDynamicallyQuantizableLinear, Linear>(nnm, "NonDynamicallyQuantizableLinear");
  nb::class_<MultiheadAttention, Module>(nnm, "MultiheadAttention")
      .def(
          "__init__",
          [](MultiheadAttention* self, int64_t e, int64_t h, double p, bool bias, bool bkv,
             bool zero, std::optional<int64_t> kdim, std::optional<int64_t> vdim, bool bf,
             nb::handle d) {
            new (self) MultiheadAttention(e, h, p, bias, bkv, zero, kdim, vdim, bf, dt(d));
          },
          "embed_dim"_a, "num_heads"_a, "dropout"_a = 0.0, "bias"_a = true, "add_bias_kv"_a = false,
          "add_zero_attn"_a = false, "kdim"_a.none() = nb::none(), "vdim"_a.none() = nb::none(),
          "batch_first"_a = false, "dtype"_a.none() = nb::none())
      .def(
          "forward",
          [](MultiheadAttention& m, const Tensor& q, const Tensor& k, const Tensor& v,
             nb::handle kpm, bool need_weights, nb::handle am, bool avg, bool causal) {
            auto [out, w] = m.forward(q, k, v, opt_t(kpm), need_weights, opt_t(am), avg, causal);
            return nb::make_tuple(out, opt_obj(w));
          },
          "query"_a, "key"_a, "value"_a, "key_padding_mask"_a.none() = nb::none(),
          "need_weights"_a = true, "attn_mask"_a.none() = nb::none(),
          "average_attn_weights"_a = true, "is_causal"_a = false)
      .def("reset_parameters", &MultiheadAttention::reset_parameters)
      .def_ro("embed_dim", &MultiheadAttention::embed_dim)
      .def_ro("kdim", &MultiheadAttention::kdim)
      .def_ro("vdim", &MultiheadAttention::vdim)
      .def_ro("num_heads", &MultiheadAttention::num_heads)
      .def_ro("head_dim", &MultiheadAttention::head_dim)
      .def_ro("dropout", &MultiheadAttention::dropout)
      .def_ro("batch_first", &MultiheadAttention::batch_first)
      .def_ro("add_zero_attn", &MultiheadAttention::add_zero_attn)
      .def_ro("_qkv_same_embed_dim", &MultiheadAttention::qkv_same_embed_dim);

  nb::class_<TransformerEncoderLayer, Module>(nnm, "TransformerEncoderLayer")
      .def(
          "__init__",
          [](TransformerEncoderLayer* self, int64_t d, int64_t h, int64_t ff, double p,
             nb::handle act, double eps, bool bf, bool nf, bool bias, nb::handle dtype) {
            new (self) TransformerEncoderLayer(d, h, ff, p, "relu", eps, bf, nf, bias, dt(dtype));
            set_activation(*self, act);
          },
          "d_model"_a, "nhead"_a, "dim_feedforward"_a = 2048, "dropout"_a = 0.1,
          "activation"_a = "relu", "layer_norm_eps"_a = 1e-5, "batch_first"_a = false,
          "norm_first"_a = false, "bias"_a = true, "dtype"_a.none() = nb::none())
      .def(
          "forward",
          [](TransformerEncoderLayer& m, const Tensor& src, nb::handle mask, nb::handle kpm,
             bool c) { return m.forward(src, opt_t(mask), opt_t(kpm), c); },
          "src"_a, "src_mask"_a.none() = nb::none(), "src_key_padding_mask"_a.none() = nb::none(),
          "is_causal"_a = false)
      .def("_set_activation",
           [](TransformerEncoderLayer& m, nb::handle act) { set_activation(m, act); })
      .def_prop_ro("_activation_name", &TransformerEncoderLayer::activation_name)
      .def("clone", &TransformerEncoderLayer::clone)
      .def_ro("norm_first", &TransformerEncoderLayer::norm_first);
  nb::class_<TransformerDecoderLayer, Module>(nnm, "TransformerDecoderLayer")
      .def(
          "__init__",
          [](TransformerDecoderLayer* self, int64_t d, int64_t h, int64_t ff, double p,
             nb::handle act, double eps, bool bf, bool nf, bool bias, nb::handle dtype) {
            new (self) TransformerDecoderLayer(d, h, ff, p, "relu", eps, bf, nf, bias, dt(dtype));
            set_activation(*self, act);
          },
          "d_model"_a, "nhead"_a, "dim_feedforward"_a = 2048, "dropout"_a = 0.1,
          "activation"_a = "relu", "layer_norm_eps"_a = 1e-5, "batch_first"_a = false,
          "norm_first"_a = false, "bias"_a = true, "dtype"_a.none() = nb::none())
      .def(
          "forward",
          [](TransformerDecoderLayer& m, const Tensor& tgt, const Tensor& mem, nb::handle tm,
             nb::handle mm, nb::handle tk, nb::handle mk, bool tc, bool mc) {
            return m.forward(tgt, mem, opt_t(tm), opt_t(mm), opt_t(tk), opt_t(mk), tc, mc);
          },
          "tgt"_a, "memory"_a, "tgt_mask"_a.none() = nb::none(),
          "memory_mask"_a.none() = nb::none(), "tgt_key_padding_mask"_a.none() = nb::none(),
          "memory_key_padding_mask"_a.none() = nb::none(), "tgt_is_causal"_a = false,
          "memory_is_causal"_a = false)
      .def("_set_activation",
           [](TransformerDecoderLayer& m, nb::handle act) { set_activation(m, act); })
      .def_prop_ro("_activation_name", &TransformerDecoderLayer::activation_name)
      .def_ro("norm_first", &TransformerDecoderLayer::norm_first);
  nb::class_<TransformerEncoder, Module>(nnm, "TransformerEncoder")
      .def(
          "__init__",
          [](TransformerEncoder* self, std::shared_ptr<TransformerEncoderLayer> layer, int64_t n,
             std::shared_ptr<Module> norm, bool nested, bool check,
             std::optional<std::function<Tensor(const Tensor&)>> norm_fn) {
            new (self)
                TransformerEncoder(layer, n, norm, nested, check, norm_fn.value_or(ActivationFn{}));
          },
          "encoder_layer"_a, "num_layers"_a, "norm"_a.none() = nb::none(),
          "enable_nested_tensor"_a = true, "mask_check"_a = true, "norm_fn"_a.none() = nb::none())
      .def(
          "forward",
          [](TransformerEncoder& m, const Tensor& src, nb::handle mask, nb::handle kpm,
             std::optional<bool> c) { return m.forward(src, opt_t(mask), opt_t(kpm), c); },
          "src"_a, "mask"_a.none() = nb::none(), "src_key_padding_mask"_a.none() = nb::none(),
          "is_causal"_a.none() = nb::none())
      .def("_layers", &TransformerEncoder::layers);
  nb::class_<TransformerDecoder, Module>(nnm, "TransformerDecoder")
      .def(
          "__init__",
          [](TransformerDecoder* self, std::shared_ptr<TransformerDecoderLayer> layer, int64_t n,
             std::shared_ptr<Module> norm, std::optional<std::function<Tensor(const Tensor&)>> norm_fn) {
            new (self) TransformerDecoder(layer, n, norm, norm_fn.value_or(ActivationFn{}));
          },
          "decoder_layer"_a, "num_layers"_a, "norm"_a.none() = nb::none(), "norm_fn"_a.none() = nb::none())
      .def(
          "forward",
          [](TransformerDecoder& m, const Tensor& tgt, const Tensor& memory, nb::handle tm, nb::handle mm,
             nb::handle tkpm, nb::handle mkpm, std::optional<bool> tc, bool mc) {
            return m.forward(tgt, memory, opt_t(tm), opt_t(mm), opt_t(tkpm), opt_t(mkpm), tc, mc);
          },
          "tgt"_a, "memory"_a, "tgt_mask"_a.none() = nb::none(), "memory_mask"_a.none() = nb::none(),
          "tgt_key_padding_mask"_a.none() = nb::none(), "memory_key_padding_mask"_a.none() = nb::none(),
          "tgt_is_causal"_a.none() = nb::none(), "memory_is_causal"_a = false)
      .def("_layers", &TransformerDecoder::layers);
}

}  // namespace

void bind_layers(nb::module_& m) {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const nn::AssertionFailure& e) {
      PyErr_SetString(PyExc_AssertionError, e.what());
    }
  });
  nb::module_ nnm = nb::borrow<nb::module_>(m.attr("_nn"));
  bind_norm_conv(nnm);
  bind_attention_layers(nnm);

  // functional
  // batch_norm, group_norm, embedding_bag: from their composites' schemas (kiln/nn/norm_layers.cpp)
  m.def(
      "multi_head_attention_forward",
      [](const Tensor& q, const Tensor& k, const Tensor& v, int64_t e, int64_t h, nb::handle ipw,
         nb::handle ipb, nb::handle bk, nb::handle bv, bool zero, double p, const Tensor& ow,
         nb::handle ob, bool training, nb::handle kpm, bool need_weights, nb::handle am,
         bool separate, nb::handle qw, nb::handle kw, nb::handle vw, nb::handle static_k,
         nb::handle static_v, bool avg, bool causal) {
        if (!static_k.is_none() || !static_v.is_none())
          throw nb::type_error(
              "multi_head_attention_forward: static_k / static_v are not supported");
        auto [out, w] = F::multi_head_attention_forward(
            q, k, v, e, h, opt_t(ipw), opt_t(ipb), opt_t(bk), opt_t(bv), zero, p, ow, opt_t(ob),
            training, opt_t(kpm), need_weights, opt_t(am), separate, opt_t(qw), opt_t(kw),
            opt_t(vw), avg, causal);
        return nb::make_tuple(out, opt_obj(w));
      },
      "query"_a, "key"_a, "value"_a, "embed_dim_to_check"_a, "num_heads"_a,
      "in_proj_weight"_a.none(), "in_proj_bias"_a.none(), "bias_k"_a.none(), "bias_v"_a.none(),
      "add_zero_attn"_a, "dropout_p"_a, "out_proj_weight"_a, "out_proj_bias"_a.none(),
      "training"_a = true, "key_padding_mask"_a.none() = nb::none(), "need_weights"_a = true,
      "attn_mask"_a.none() = nb::none(), "use_separate_proj_weight"_a = false,
      "q_proj_weight"_a.none() = nb::none(), "k_proj_weight"_a.none() = nb::none(),
      "v_proj_weight"_a.none() = nb::none(), "static_k"_a.none() = nb::none(),
      "static_v"_a.none() = nb::none(), "average_attn_weights"_a = true, "is_causal"_a = false);
  m.def(
      "generate_square_subsequent_mask",
      [](int64_t sz, nb::handle dtype) {
        return nn::generate_square_subsequent_mask(sz, dt(dtype));
      },
      "sz"_a, "dtype"_a.none() = nb::none());
}

}  // namespace kiln::py
