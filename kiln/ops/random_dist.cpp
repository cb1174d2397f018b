// The distribution samplers (random_dist.h): table ops whose kernels draw from the reserved Philox
// range (kernels: backend/cpu/random_dist.cpp), their derivatives, and the composites that give them
// torch's public schemas.
#include "kiln/ops/random_dist.h"

#include <string_view>

#include "kiln/autograd/non_differentiable.h"
#include "kiln/core/finfo.h"
#include "kiln/core/generator.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

// float32 / float64 (torch's gamma_cpu); poisson and normal also take float16 / bfloat16, as torch's
bool half_ok(std::string_view op) { return op == "poisson" || op == "normal" || op == "_poisson_draw" || op == "_normal_draw"; }
Dtype sampler_dtype(const char* op, Dtype d) {
  const bool half = (d == kFloat16 || d == kBFloat16) && half_ok(op);
  if (d != kFloat32 && d != kFloat64 && !half) raise_dtype_unsupported(op, d);
  return d;
}
SpecList draw_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  return {{in[0].sizes(), sampler_dtype(op.name, in[0].dtype())}};
}
SpecList pair_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  return {{in[0].sizes(), sampler_dtype(op.name, in[0].dtype())}};  // the front ends pass equal shapes and dtypes
}

// attrs {key, first}: the generator's counters, reserved by the front end (as random_fill_'s)
OpDef op_gamma_draw{"_gamma_draw", kRandom, draw_meta, {}};
OpRegistrar reg_gamma_draw{op_gamma_draw, "_gamma_draw(Tensor self, int key, int first) -> Tensor"};
OpDef op_poisson_draw{"_poisson_draw", kRandom, draw_meta, {}};
OpRegistrar reg_poisson_draw{op_poisson_draw, "_poisson_draw(Tensor self, int key, int first) -> Tensor"};
OpDef op_normal_draw{"_normal_draw", kRandom, pair_meta, {}};
OpRegistrar reg_normal_draw{op_normal_draw, "_normal_draw(Tensor mean, Tensor std, int key, int first) -> Tensor"};
OpDef op_gamma_grad{"_gamma_grad", kNonDifferentiable, pair_meta, {}};  // the front end broadcasts
OpRegistrar reg_gamma_grad{op_gamma_grad, "_gamma_grad(Tensor self, Tensor output) -> Tensor"};

// x = F^-1(u; alpha) with u held fixed: dx/dalpha (torch's StandardGammaBackward)
TensorList gamma_backward(const GradCtx& ctx, const TensorList& g) {
  return {mul(g[0], standard_gamma_grad(ctx.in[0], ctx.out[0]))};
}
DerivativeRegistrar d_gamma{op_gamma_draw, gamma_backward, 1, 1};
// torch's PoissonBackward and NormalBackward: zero gradients
TensorList zero_backward(const GradCtx& ctx, const TensorList& g) {
  TensorList r;
  for (size_t i = 0; i < ctx.needs.size(); ++i) r.push_back(ctx.needs[i] ? zeros_like(g[0]) : Tensor());
  return r;
}
DerivativeRegistrar d_poisson{op_poisson_draw, zero_backward, 0, 0};
DerivativeRegistrar d_normal{op_normal_draw, zero_backward, 0, 0};

Tensor draw(const OpDef& op, const TensorList& in, Generator* gen) {
  Generator& g = gen ? *gen : default_generator();
  auto [key, start] = g.reserve(static_cast<uint64_t>(in[0].numel()));
  return dispatch1(op, in, {static_cast<int64_t>(key), static_cast<int64_t>(start)});
}

}  // namespace

Tensor standard_gamma(const Tensor& alpha, Generator* g) {
  sampler_dtype("_standard_gamma", alpha.dtype());
  return draw(op_gamma_draw, {contiguous(alpha)}, g);
}

Tensor standard_gamma_grad(const Tensor& alpha, const Tensor& x) {
  const char* op = "_standard_gamma_grad";
  KILN_CHECK(alpha.dtype() == x.dtype(), Runtime, op, "expected scalar type ", dtype_name(alpha.dtype()),
             " but found ", dtype_name(x.dtype()));
  Dtype d = sampler_dtype(op, alpha.dtype());
  Shape s = broadcast_shapes(alpha.sizes(), x.sizes(), op);
  return dispatch1(op_gamma_grad, {contiguous(to_dtype(expand(alpha, s), d)), contiguous(to_dtype(expand(x, s), d))});
}

Tensor sample_dirichlet(const Tensor& alpha, Generator* g) {
  // drawn and normalised in double (torch's _s_dirichlet_cpu): float32 gamma draws of a tiny alpha
  // underflow to the floor together, which would make the sample exactly uniform
  sampler_dtype("_sample_dirichlet", alpha.dtype());
  Tensor gam = standard_gamma(to_dtype(alpha, kFloat64), g);  // (a 0-dim alpha: one category, the draw 1)
  Tensor x = div(gam, sum(gam, Shape{-1}, true));
  // torch's floor and ceiling: every component strictly inside (0, 1)
  const Dtype d = alpha.dtype();
  return to_dtype(clamp(x, Scalar(finfo_tiny(d)), Scalar(1.0 - finfo_eps(d))), d);
}

Tensor poisson(const Tensor& rate, Generator* g) {
  sampler_dtype("poisson", rate.dtype());
  Tensor r = contiguous(rate);
  if (!r.is_meta() && r.numel() > 0)
    KILN_CHECK(all(ge(r, Scalar(0))).item<bool>(), Runtime, "poisson",
               "invalid Poisson rate, expected rate to be non-negative");
  return draw(op_poisson_draw, {r}, g);
}

Tensor normal(const Tensor& mean, const Tensor& std, Generator* g) {
  const char* op = "normal";
  // torch's dtype: the mean's (a Python-number mean: the std's)
  Dtype d = mean.is_wrapped_number() ? std.dtype() : mean.dtype();
  KILN_CHECK(!is_complex(std.dtype()), Runtime, op, "normal expects standard deviation to be non-complex");
  if (is_complex(d)) {  // torch's: mean + std z, z's parts N(0, 1/2) (normal_ on the complex output)
    Shape s = broadcast_shapes(mean.sizes(), std.sizes(), op);
    const Tensor sd = to_dtype(std, to_real(d));
    if (!sd.is_meta() && sd.numel() > 0)
      KILN_CHECK(all(ge(sd, Scalar(0))).item<bool>(), Runtime, op, "normal expects all elements of std >= 0.0");
    Tensor z = empty(s, TensorOptions(d).device(mean.device()));
    normal_(z, 0.0, 1.0, g);
    return add(mul(z, sd), mean);
  }
  if (!is_floating(d)) raise_dtype_unsupported("normal_kernel_cpu", d);
  sampler_dtype(op, d);
  Shape s = broadcast_shapes(mean.sizes(), std.sizes(), op);
  Tensor sd = contiguous(to_dtype(expand(std, s), d));
  if (!sd.is_meta() && sd.numel() > 0)
    KILN_CHECK(all(ge(sd, Scalar(0))).item<bool>(), Runtime, op, "normal expects all elements of std >= 0.0");
  return draw(op_normal_draw, {contiguous(to_dtype(expand(mean, s), d)), sd}, g);
}

// ---- torch's public schemas
namespace {
Tensor number(const Attrs& a, size_t i, const Tensor& like) {  // (a complex tensor's: its real dtype)
  const Dtype d = like.dtype();
  return scalar_tensor(Scalar(attr<double>(a, i)), is_complex(d) ? to_real(d) : d, true);
}
Composite c_standard_gamma{"_standard_gamma(Tensor self, Generator? generator=None) -> Tensor",
                           [](const TensorList& in, const Attrs& a) -> TensorList {
                             return {standard_gamma(in[0], generator_attr(a, 0))};
                           },
                           kFunctionVariant};
Composite c_sample_dirichlet{"_sample_dirichlet(Tensor self, Generator? generator=None) -> Tensor",
                             [](const TensorList& in, const Attrs& a) -> TensorList {
                               return {sample_dirichlet(in[0], generator_attr(a, 0))};
                             },
                             kFunctionVariant};
Composite c_gamma_grad{"_standard_gamma_grad(Tensor self, Tensor output) -> Tensor",
                       [](const TensorList& in, const Attrs&) -> TensorList { return {standard_gamma_grad(in[0], in[1])}; },
                       kFunctionVariant};
Composite c_poisson{"poisson(Tensor self, Generator? generator=None) -> Tensor",
                    [](const TensorList& in, const Attrs& a) -> TensorList { return {poisson(in[0], generator_attr(a, 0))}; },
                    kFunctionVariant};
Composite c_normal_tt{"normal.Tensor_Tensor(Tensor mean, Tensor std, *, Generator? generator=None) -> Tensor",
                      [](const TensorList& in, const Attrs& a) -> TensorList {
                        return {normal(in[0], in[1], generator_attr(a, 0))};
                      },
                      kFunctionVariant};
Composite c_normal_tf{"normal.Tensor_float(Tensor mean, float std=1, *, Generator? generator=None) -> Tensor",
                      [](const TensorList& in, const Attrs& a) -> TensorList {
                        return {normal(in[0], number(a, 0, in[0]), generator_attr(a, 1))};
                      },
                      kFunctionVariant};
Composite c_normal_ft{"normal.float_Tensor(float mean, Tensor std, *, Generator? generator=None) -> Tensor",
                      [](const TensorList& in, const Attrs& a) -> TensorList {
                        return {normal(number(a, 0, in[0]), in[0], generator_attr(a, 1))};
                      },
                      kFunctionVariant};
}  // namespace

}  // namespace kiln
