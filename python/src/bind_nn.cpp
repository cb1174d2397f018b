// Python binding: kiln::nn modules (kiln._C.nn) and the functional ops they use.
#include <nanobind/stl/function.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/vector.h>

#include "common.h"
#include "kiln/nn/nn.h"

namespace kiln::py {
namespace {

Tensor opt_t(nb::handle h) { return h.is_none() ? Tensor() : nb::cast<Tensor>(h); }
nb::object opt_obj(const Tensor& t) { return t.defined() ? nb::cast(t) : nb::none(); }
Dtype dt(nb::handle h) { return as_opt_dtype(h).value_or(Dtype::Undefined); }
std::optional<int64_t> opt_i(nb::handle h) {
  return h.is_none() ? std::nullopt : std::optional<int64_t>(nb::cast<int64_t>(h));
}
std::optional<double> opt_d(nb::handle h) {
  return h.is_none() ? std::nullopt : std::optional<double>(nb::cast<double>(h));
}
Shape shape_or_int(nb::handle h) {
  if (nb::isinstance<nb::int_>(h)) return {nb::cast<int64_t>(h)};
  return as_shape(h);
}

}  // namespace

void bind_nn(nb::module_& m) {
  using namespace kiln::nn;
  nb::module_ nnm = m.def_submodule("_nn", "kiln::nn modules (wrapped by kiln.nn)");

  nb::class_<Module>(nnm, "Module")
      .def("_own_parameters", [](const Module& mod) {
        nb::list l;
        for (auto& [n, t] : mod.own_parameters()) l.append(nb::make_tuple(n, opt_obj(t)));
        return l;
      })
      .def("_own_buffers", [](const Module& mod) {
        nb::list l;
        for (auto& [n, t] : mod.own_buffers()) l.append(nb::make_tuple(n, opt_obj(t), mod.buffer_persistent(n)));
        return l;
      })
      .def("_children", [](const Module& mod) {
        nb::list l;
        for (auto& [n, c] : mod.named_children()) l.append(nb::make_tuple(n, c));
        return l;
      })
      .def("_set_parameter", [](Module& mod, const std::string& n, nb::handle t) {
        mod.register_parameter(n, opt_t(t), false);
      })
      .def("_set_buffer", [](Module& mod, const std::string& n, nb::handle t, bool persistent) {
        mod.register_buffer(n, opt_t(t), persistent);
      })
      .def("train", [](Module& mod, bool on) { mod.train(on); }, "mode"_a = true)
      .def_prop_ro("training", &Module::is_training)
      .def("extra_repr", &Module::extra_repr)
      .def("_name", &Module::name)
      .def("__repr__", &Module::repr);

  nb::class_<Linear, Module>(nnm, "Linear")
      .def("__init__", [](Linear* self, int64_t in, int64_t out, bool bias, nb::handle dtype) {
        new (self) Linear(in, out, bias, dt(dtype));
      }, "in_features"_a, "out_features"_a, "bias"_a = true, "dtype"_a.none() = nb::none())
      .def("forward", &Linear::forward)
      .def("reset_parameters", &Linear::reset_parameters);
  nb::class_<MixtureOfExperts, Module>(nnm, "MixtureOfExperts")
      .def("__init__", [](MixtureOfExperts* self, int64_t dim, int64_t hidden, int64_t experts, int64_t k,
                          nb::handle dtype) { new (self) MixtureOfExperts(dim, hidden, experts, k, dt(dtype)); },
           "dim"_a, "hidden"_a, "num_experts"_a, "top_k"_a = 2, "dtype"_a.none() = nb::none())
      .def("forward", &MixtureOfExperts::forward)
      .def("reset_parameters", &MixtureOfExperts::reset_parameters);
  nb::class_<AdaptiveLogSoftmaxWithLoss, Module>(nnm, "AdaptiveLogSoftmaxWithLoss")
      .def("__init__", [](AdaptiveLogSoftmaxWithLoss* self, int64_t in, int64_t n, std::vector<int64_t> cutoffs,
                          double div, bool head_bias, nb::handle dtype) {
        new (self) AdaptiveLogSoftmaxWithLoss(in, n, std::move(cutoffs), div, head_bias, dt(dtype));
      }, "in_features"_a, "n_classes"_a, "cutoffs"_a, "div_value"_a = 4.0, "head_bias"_a = false,
         "dtype"_a.none() = nb::none())
      .def("forward", [](AdaptiveLogSoftmaxWithLoss& m, const Tensor& input, const Tensor& target) {
        ASMoutput r = m.forward(input, target);
        return std::make_pair(r.output, r.loss);
      })
      .def("log_prob", &AdaptiveLogSoftmaxWithLoss::log_prob)
      .def("predict", &AdaptiveLogSoftmaxWithLoss::predict)
      .def("reset_parameters", &AdaptiveLogSoftmaxWithLoss::reset_parameters);
  nb::class_<Float8Linear, Module>(nnm, "Float8Linear")
      .def("__init__", [](Float8Linear* self, int64_t in, int64_t out, bool bias, nb::handle dtype, nb::handle f8) {
        new (self) Float8Linear(in, out, bias, dt(dtype), f8.is_none() ? kFloat8_e4m3fn : dt(f8));
      }, "in_features"_a, "out_features"_a, "bias"_a = true, "dtype"_a.none() = nb::none(),
         "float8_dtype"_a.none() = nb::none())
      .def("forward", &Float8Linear::forward)
      .def("reset_parameters", &Float8Linear::reset_parameters)
      .def("freeze", &Float8Linear::freeze)
      .def_prop_ro("frozen", &Float8Linear::frozen);
  nnm.def("affine_grid", [](const Tensor& theta, const std::vector<int64_t>& size, bool align) {
    return nn::functional::affine_grid(theta, Shape(size.begin(), size.end()), align);
  }, "theta"_a, "size"_a, "align_corners"_a);
  nnm.def("grid_sample", [](const Tensor& x, const Tensor& grid, const std::string& mode, const std::string& pad,
                            bool align) {
    nb::gil_scoped_release g;
    return nn::functional::grid_sample(x, grid, mode, pad, align);
  }, "input"_a, "grid"_a, "mode"_a, "padding_mode"_a, "align_corners"_a);
  nnm.def("gumbel_softmax", [](const Tensor& logits, double tau, bool hard, int64_t dim, Generator* g) {
    return nn::functional::gumbel_softmax(logits, tau, hard, dim, g);
  }, "logits"_a, "tau"_a, "hard"_a, "dim"_a, "generator"_a.none() = nb::none());
  nnm.def("quantize_float8", [](const Tensor& x, nb::handle dtype, bool rowwise) {
    auto [q, s] = kiln::quantize_float8(x, dtype.is_none() ? kFloat8_e4m3fn : dt(dtype), rowwise);
    return nb::make_tuple(q, s);
  }, "x"_a, "dtype"_a.none() = nb::none(), "rowwise"_a = false);
  // torch.nn.functional.scaled_mm's checks and call (kiln/nn/float8.h); kiln.nn.functional.scaled_mm
  // unwraps its lists and enums into these ints
  nnm.def("scaled_mm", [](const Tensor& a, const Tensor& b, const Tensor& sa, int ra, const Tensor& sb, int rb,
                          nb::handle swizzle_a, nb::handle swizzle_b, nb::handle bias, nb::handle output_dtype,
                          std::vector<int64_t> contraction_dim, bool use_fast_accum) {
    namespace F = nn::functional;
    F::ScaledMMOptions o;
    if (!swizzle_a.is_none()) o.swizzle_a = static_cast<F::SwizzleType>(nb::cast<int>(swizzle_a));
    if (!swizzle_b.is_none()) o.swizzle_b = static_cast<F::SwizzleType>(nb::cast<int>(swizzle_b));
    if (!bias.is_none()) o.bias = nb::cast<Tensor>(bias);
    o.output_dtype = output_dtype.is_none() ? std::nullopt : std::optional<Dtype>(dt(output_dtype));
    o.contraction_dim = std::move(contraction_dim), o.use_fast_accum = use_fast_accum;
    return F::scaled_mm(a, b, sa, static_cast<F::ScalingType>(ra), sb, static_cast<F::ScalingType>(rb), o);
  }, "mat_a"_a, "mat_b"_a, "scale_a"_a, "scale_recipe_a"_a, "scale_b"_a, "scale_recipe_b"_a, "swizzle_a"_a.none(),
     "swizzle_b"_a.none(), "bias"_a.none(), "output_dtype"_a.none(), "contraction_dim"_a, "use_fast_accum"_a);
  nnm.def("dequantize_float8", [](const Tensor& q, const Tensor& s, nb::handle dtype) {
    return kiln::dequantize_float8(q, s, dtype.is_none() ? kFloat32 : dt(dtype));
  }, "q"_a, "scale"_a, "dtype"_a.none() = nb::none());
  nb::class_<Bilinear, Module>(nnm, "Bilinear")
      .def("__init__", [](Bilinear* self, int64_t a, int64_t b, int64_t out, bool bias, nb::handle dtype) {
        new (self) Bilinear(a, b, out, bias, dt(dtype));
      }, "in1_features"_a, "in2_features"_a, "out_features"_a, "bias"_a = true, "dtype"_a.none() = nb::none())
      .def("forward", &Bilinear::forward)
      .def("reset_parameters", &Bilinear::reset_parameters);
  nb::class_<Identity, Module>(nnm, "Identity").def(nb::init<>()).def("forward", &Identity::forward);
  nb::class_<Flatten, Module>(nnm, "Flatten")
      .def(nb::init<int64_t, int64_t>(), "start_dim"_a = 1, "end_dim"_a = -1)
      .def("forward", &Flatten::forward);
  nb::class_<PixelShuffle, Module>(nnm, "PixelShuffle")
      .def(nb::init<int64_t>(), "upscale_factor"_a)
      .def("forward", &PixelShuffle::forward);
  nb::class_<PixelUnshuffle, Module>(nnm, "PixelUnshuffle")
      .def(nb::init<int64_t>(), "downscale_factor"_a)
      .def("forward", &PixelUnshuffle::forward);
  nb::class_<Softmax2d, Module>(nnm, "Softmax2d").def(nb::init<>()).def("forward", &Softmax2d::forward);
  nb::class_<CosineSimilarity, Module>(nnm, "CosineSimilarity")
      .def(nb::init<int64_t, double>(), "dim"_a = 1, "eps"_a = 1e-8)
      .def("forward", &CosineSimilarity::forward);
  nb::class_<PairwiseDistance, Module>(nnm, "PairwiseDistance")
      .def(nb::init<double, double, bool>(), "p"_a = 2.0, "eps"_a = 1e-6, "keepdim"_a = false)
      .def("forward", &PairwiseDistance::forward);
  nb::class_<PReLU, Module>(nnm, "PReLU")
      .def("__init__", [](PReLU* self, int64_t n, double init, nb::handle dtype) { new (self) PReLU(n, init, dt(dtype)); },
           "num_parameters"_a = 1, "init"_a = 0.25, "dtype"_a.none() = nb::none())
      .def("forward", &PReLU::forward)
      .def("reset_parameters", &PReLU::reset_parameters);
  nb::class_<Unflatten, Module>(nnm, "Unflatten")
      .def("__init__", [](Unflatten* self, int64_t d, nb::handle s) { new (self) Unflatten(d, as_shape(s)); })
      .def("forward", &Unflatten::forward);
  nb::class_<Embedding, Module>(nnm, "Embedding")
      .def("__init__", [](Embedding* self, int64_t num, int64_t dim, nb::handle pad, nb::handle max_norm,
                          double norm_type, bool freq, bool sparse, nb::handle dtype) {
        new (self) Embedding(num, dim, opt_i(pad), opt_d(max_norm), norm_type, freq, sparse, dt(dtype));
      }, "num_embeddings"_a, "embedding_dim"_a, "padding_idx"_a.none() = nb::none(),
         "max_norm"_a.none() = nb::none(), "norm_type"_a = 2.0, "scale_grad_by_freq"_a = false, "sparse"_a = false,
         "dtype"_a.none() = nb::none())
      .def("forward", &Embedding::forward)
      .def("reset_parameters", &Embedding::reset_parameters)
      .def_prop_ro("padding_idx", [](const Embedding& e) { return e.padding_idx; });
  nb::class_<LayerNorm, Module>(nnm, "LayerNorm")
      .def("__init__", [](LayerNorm* self, nb::handle ns, double eps, bool affine, bool bias, nb::handle dtype) {
        new (self) LayerNorm(shape_or_int(ns), eps, affine, bias, dt(dtype));
      }, "normalized_shape"_a, "eps"_a = 1e-5, "elementwise_affine"_a = true, "bias"_a = true,
         "dtype"_a.none() = nb::none())
      .def("forward", &LayerNorm::forward)
      .def("reset_parameters", &LayerNorm::reset_parameters);
  nb::class_<RMSNorm, Module>(nnm, "RMSNorm")
      .def("__init__", [](RMSNorm* self, nb::handle ns, nb::handle eps, bool affine, nb::handle dtype) {
        new (self) RMSNorm(shape_or_int(ns), opt_d(eps), affine, dt(dtype));
      }, "normalized_shape"_a, "eps"_a.none() = nb::none(), "elementwise_affine"_a = true,
         "dtype"_a.none() = nb::none())
      .def("forward", &RMSNorm::forward)
      .def("reset_parameters", &RMSNorm::reset_parameters);
  nb::class_<Dropout, Module>(nnm, "Dropout")
      .def(nb::init<double, bool>(), "p"_a = 0.5, "inplace"_a = false)
      .def("forward", &Dropout::forward);
  nb::class_<Activation, Module>(nnm, "Activation").def("forward", &Activation::forward);
  nnm.def("make_activation", &make_activation, "name"_a, "args"_a = std::vector<double>{}, "inplace"_a = false,
          "approximate"_a = "none");

  // functional: linear, bilinear, layer_norm, rms_norm, dropout come from their composites' schemas
  // (kiln/nn/norm.cpp)

  // nn.utils
  nb::module_ um = nnm.def_submodule("utils");
  auto plist = [](nb::handle h) {
    TensorList r;
    if (nb::isinstance<Tensor>(h)) return TensorList{nb::cast<Tensor>(h)};
    for (nb::handle x : h) r.push_back(nb::cast<Tensor>(x));
    return r;
  };
  um.def("clip_grad_norm_", [plist](nb::handle ps, double max_norm, double norm_type, bool err, nb::handle) {
    return utils::clip_grad_norm_(plist(ps), max_norm, norm_type, err);
  }, "parameters"_a, "max_norm"_a, "norm_type"_a = 2.0, "error_if_nonfinite"_a = false, "foreach"_a.none() = nb::none());
  um.def("clip_grad_value_", [plist](nb::handle ps, double v, nb::handle) { utils::clip_grad_value_(plist(ps), v); },
         "parameters"_a, "clip_value"_a, "foreach"_a.none() = nb::none());
  um.def("parameters_to_vector", [plist](nb::handle ps) { return utils::parameters_to_vector(plist(ps)); },
         "parameters"_a);
  um.def("vector_to_parameters", [plist](const Tensor& v, nb::handle ps) { utils::vector_to_parameters(v, plist(ps)); },
         "vec"_a, "parameters"_a);

  // nn.init (in place, no graph)
  nb::module_ im = nnm.def_submodule("init");
  im.def("calculate_gain", &init::calculate_gain, "nonlinearity"_a, "param"_a.none() = nb::none());
  im.def("_calculate_fan_in_and_fan_out", &init::calculate_fan_in_and_fan_out);
  im.def("uniform_", [](const Tensor& t, double a, double b) { return init::uniform_(t, a, b); }, "tensor"_a, "a"_a = 0.0, "b"_a = 1.0);
  im.def("normal_", [](const Tensor& t, double mean, double std) { return init::normal_(t, mean, std); }, "tensor"_a, "mean"_a = 0.0, "std"_a = 1.0);
  im.def("constant_", [](const Tensor& t, nb::handle v) { return init::constant_(t, as_scalar(v)); }, "tensor"_a, "val"_a);
  im.def("zeros_", &init::zeros_);
  im.def("ones_", &init::ones_);
  im.def("eye_", &init::eye_);
  im.def("xavier_uniform_", [](const Tensor& t, double g) { return init::xavier_uniform_(t, g); }, "tensor"_a, "gain"_a = 1.0);
  im.def("xavier_normal_", [](const Tensor& t, double g) { return init::xavier_normal_(t, g); }, "tensor"_a, "gain"_a = 1.0);
  im.def("kaiming_uniform_", [](const Tensor& t, double a, const std::string& mode, const std::string& nl) {
    return init::kaiming_uniform_(t, a, mode, nl);
  }, "tensor"_a, "a"_a = 0.0, "mode"_a = "fan_in", "nonlinearity"_a = "leaky_relu");
  im.def("kaiming_normal_", [](const Tensor& t, double a, const std::string& mode, const std::string& nl) {
    return init::kaiming_normal_(t, a, mode, nl);
  }, "tensor"_a, "a"_a = 0.0, "mode"_a = "fan_in", "nonlinearity"_a = "leaky_relu");
  im.def("trunc_normal_", [](const Tensor& t, double mean, double std, double a, double b) {
    return init::trunc_normal_(t, mean, std, a, b);
  }, "tensor"_a, "mean"_a = 0.0, "std"_a = 1.0, "a"_a = -2.0, "b"_a = 2.0);
  im.def("orthogonal_", [](const Tensor& t, double gain) { return init::orthogonal_(t, gain); }, "tensor"_a, "gain"_a = 1.0);
  // F.lp_pool1d / 2d / 3d and F.max_unpool1d / 2d / 3d (kiln/nn/functional_extras.cpp); sizes as an int
  // or a sequence, None for a default.
  m.def(
      "_lp_pool",
      [](int64_t nd, const Tensor& x, double p, nb::handle k, nb::handle s, bool ceil_mode) {
        Shape ks = shape_or_int(k), ss = s.is_none() ? Shape{} : shape_or_int(s);
        nb::gil_scoped_release g;
        if (nd == 1) return F::lp_pool1d(x, p, ks, ss, ceil_mode);
        if (nd == 2) return F::lp_pool2d(x, p, ks, ss, ceil_mode);
        return F::lp_pool3d(x, p, ks, ss, ceil_mode);
      },
      "nd"_a, "input"_a, "norm_type"_a, "kernel_size"_a, "stride"_a.none() = nb::none(), "ceil_mode"_a = false);
  m.def(
      "_max_unpool",
      [](int64_t nd, const Tensor& x, const Tensor& indices, nb::handle k, nb::handle s, nb::handle p,
         nb::handle out) {
        Shape ks = shape_or_int(k), ss = s.is_none() ? Shape{} : shape_or_int(s), ps = shape_or_int(p);
        Shape os = out.is_none() ? Shape{} : shape_or_int(out);
        nb::gil_scoped_release g;
        if (nd == 1) return F::max_unpool1d(x, indices, ks, ss, ps, os);
        if (nd == 2) return F::max_unpool2d(x, indices, ks, ss, ps, os);
        return F::max_unpool3d(x, indices, ks, ss, ps, os);
      },
      "nd"_a, "input"_a, "indices"_a, "kernel_size"_a, "stride"_a.none() = nb::none(), "padding"_a = 0,
      "output_size"_a.none() = nb::none());
  m.def(
      "_fractional_max_pool",
      [](int64_t nd, const Tensor& x, const Shape& kernel_size, const Shape& output_size, nb::handle samples) {
        const Tensor s = opt_t(samples);
        nb::gil_scoped_release g;
        return nd == 2 ? F::fractional_max_pool2d(x, kernel_size, output_size, s)
                       : F::fractional_max_pool3d(x, kernel_size, output_size, s);
      },
      "nd"_a, "input"_a, "kernel_size"_a, "output_size"_a, "random_samples"_a.none() = nb::none());
}

}  // namespace kiln::py
