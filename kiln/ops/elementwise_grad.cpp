// Derivatives of the pointwise ops (elementwise.cpp), written with kiln ops so that they are
// themselves differentiable. Complex inputs follow torch's convention (conjugates where it has
// them). Gradients may keep the broadcast shape: the engine sums them to each input's shape.
#include <cmath>
#include <string>
#include <numbers>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

using G = const GradCtx&;
using GL = const TensorList&;

// ---- unary --------------------------------------------------------------------------------------
#define UNARY_GRAD(name, save_in, save_out, expr)   \
  TensorList name##_grad(G c, GL go) {              \
    const Tensor& g = go[0];                        \
    const Tensor& x = c.in.empty() ? g : c.in[0];   \
    const Tensor& y = c.out.empty() ? g : c.out[0]; \
    (void)x;                                        \
    (void)y;                                        \
    return {expr};                                  \
  }                                                 \
  DerivativeByName d_##name{#name, name##_grad, save_in, save_out};

UNARY_GRAD(neg, 0, 0, neg(g))
UNARY_GRAD(abs, 1, 0, mul(g, sgn(x)))
UNARY_GRAD(sign, 1, 0, zeros_like(x))
UNARY_GRAD(reciprocal, 0, 1, mul(neg(g), cj(mul(y, y))))
UNARY_GRAD(sqrt, 0, 1, div(g, mul(cj(y), Scalar(2.0))))
UNARY_GRAD(rsqrt, 0, 1, mul(g, mul(cj(mul(y, mul(y, y))), Scalar(-0.5))))
UNARY_GRAD(square, 1, 0, mul(g, mul(cj(x), Scalar(2.0))))
UNARY_GRAD(exp, 0, 1, mul(g, cj(y)))
UNARY_GRAD(exp2, 0, 1, mul(g, mul(cj(y), Scalar(std::numbers::ln2))))
UNARY_GRAD(expm1, 0, 1, mul(g, add(cj(y), Scalar(1.0))))
UNARY_GRAD(log, 1, 0, div(g, cj(x)))
UNARY_GRAD(log2, 1, 0, div(g, mul(cj(x), Scalar(std::numbers::ln2))))
UNARY_GRAD(log10, 1, 0, div(g, mul(cj(x), Scalar(std::numbers::ln10))))
UNARY_GRAD(log1p, 1, 0, div(g, add(cj(x), Scalar(1.0))))
UNARY_GRAD(sin, 1, 0, mul(g, cj(cos(x))))
UNARY_GRAD(cos, 1, 0, mul(g, neg(cj(sin(x)))))
UNARY_GRAD(tan, 0, 1, mul(g, add(cj(mul(y, y)), Scalar(1.0))))
UNARY_GRAD(asin, 1, 0, div(g, cj(sqrt(rsub(mul(x, x), Scalar(1.0))))))
UNARY_GRAD(acos, 1, 0, neg(div(g, cj(sqrt(rsub(mul(x, x), Scalar(1.0)))))))
UNARY_GRAD(atan, 1, 0, div(g, cj(add(mul(x, x), Scalar(1.0)))))
UNARY_GRAD(sinh, 1, 0, mul(g, cj(cosh(x))))
UNARY_GRAD(cosh, 1, 0, mul(g, cj(sinh(x))))
UNARY_GRAD(tanh, 0, 1, mul(g, cj(rsub(mul(y, y), Scalar(1.0)))))
UNARY_GRAD(asinh, 1, 0, div(g, cj(sqrt(add(mul(x, x), Scalar(1.0))))))
UNARY_GRAD(acosh, 1, 0, div(g, cj(sqrt(sub(mul(x, x), Scalar(1.0))))))
UNARY_GRAD(atanh, 1, 0, div(g, cj(rsub(mul(x, x), Scalar(1.0)))))
UNARY_GRAD(sigmoid, 0, 1, mul(g, cj(mul(y, rsub(y, Scalar(1.0))))))
UNARY_GRAD(erf, 1, 0, mul(g, mul(exp(neg(mul(x, x))), Scalar(2.0 / std::sqrt(std::numbers::pi)))))
UNARY_GRAD(erfc, 1, 0, mul(g, mul(exp(neg(mul(x, x))), Scalar(-2.0 / std::sqrt(std::numbers::pi)))))
UNARY_GRAD(erfinv, 0, 1, mul(g, mul(exp(mul(y, y)), Scalar(std::sqrt(std::numbers::pi) / 2.0))))
UNARY_GRAD(lgamma, 1, 0, mul(g, digamma(x)))
UNARY_GRAD(digamma, 1, 0, mul(g, polygamma(1, x)))
UNARY_GRAD(floor, 0, 0, zeros_like(g))
UNARY_GRAD(ceil, 0, 0, zeros_like(g))
UNARY_GRAD(trunc, 0, 0, zeros_like(g))
UNARY_GRAD(round, 0, 0, zeros_like(g))
UNARY_GRAD(round_decimals, 0, 0, zeros_like(g))
UNARY_GRAD(frac, 0, 0, g)
// Masks as torch writes them: where its test is `x <= bound ? 0 : g`, a NaN input passes g.
UNARY_GRAD(relu, 0, 1, where(le(y, Scalar(0)), zeros({}, g.dtype()), g))
UNARY_GRAD(relu6, 1, 0,
           where(logical_or(le(x, Scalar(0)), ge(x, Scalar(6))), zeros({}, g.dtype()), g))
UNARY_GRAD(hardsigmoid, 1, 0,
           where_g(logical_and(gt(x, Scalar(-3.0)), lt(x, Scalar(3.0))), mul(g, Scalar(1.0 / 6.0))))
UNARY_GRAD(hardswish, 1, 0,
           where(le(x, Scalar(-3.0)), zeros({}, g.dtype()),
                 where(lt(x, Scalar(3.0)), mul(g, add(mul(x, Scalar(1.0 / 3.0)), Scalar(0.5))), g)))
UNARY_GRAD(logsigmoid, 1, 0, mul(g, sigmoid(neg(x))))
UNARY_GRAD(conj_physical, 0, 0, conj_physical(g))
UNARY_GRAD(nan_to_num, 1, 0, mul(g, isfinite(x)))
UNARY_GRAD(to, 0, 0, g)

TensorList sgn_grad(G c, GL go) {
  const Tensor &g = go[0], &x = c.in[0], &y = c.out[0];
  if (!x.is_complex()) return {zeros_like(g)};
  // d sgn(z): (g - Re(g conj(sgn)) sgn) / |z|, zero at z = 0
  Tensor a = abs(x);
  Tensor r = div(sub(g, mul(real(mul(g, conj(y))), y)), a);
  return {where(eq(a, Scalar(0.0)), zeros_like(r), r)};
}
DerivativeByName d_sgn{"sgn", sgn_grad, 1, 1};

TensorList angle_grad(G c, GL go) {
  const Tensor &g = go[0], &x = c.in[0];
  if (!x.is_complex()) return {zeros_like(g)};
  // angle = atan2(im, re): grad = g * i z / |z|^2, zero at z = 0
  Tensor iz = complex(neg(imag(x)), real(x));
  Tensor a = abs(x);
  return {where(eq(a, Scalar(0.0)), zeros({}, x.dtype()), mul(g, div(iz, mul(a, a))))};
}
DerivativeByName d_angle{"angle", angle_grad, 1, 0};

TensorList silu_grad(G c, GL go) {
  const Tensor &g = go[0], &x = c.in[0];
  Tensor s = sigmoid(x);
  return {mul(g, mul(s, add(mul(x, rsub(s, Scalar(1.0))), Scalar(1.0))))};
}
DerivativeByName d_silu{"silu", silu_grad, 1, 0};

TensorList mish_grad(G c, GL go) {
  const Tensor &g = go[0], &x = c.in[0];
  Tensor t = tanh(softplus(x));
  return {mul(g, add(t, mul(mul(x, sigmoid(x)), rsub(mul(t, t), Scalar(1.0)))))};
}
DerivativeByName d_mish{"mish", mish_grad, 1, 0};

// First-order backward runs GELU's fused kernel (one pass); under create_graph the composite below
// keeps the second derivative available.
bool fused_gelu_ok(const Tensor& g, const Tensor& x) {
  return !grad_mode_enabled() && !g.is_complex() && !x.is_complex() && is_floating(x.dtype());
}
Tensor gelu_backward(const Tensor& g, const Tensor& x, bool tanh_form) {
  static const OpDef* exact = find_op("gelu_backward");
  static const OpDef* approx = find_op("gelu_tanh_backward");
  return dispatch1(tanh_form ? *approx : *exact, {g, x});
}

TensorList gelu_grad(G c, GL go) {
  const Tensor &g = go[0], &x = c.in[0];
  if (fused_gelu_ok(g, x)) return {gelu_backward(g, x, false)};
  Tensor cdf = mul(add(erf(mul(x, Scalar(M_SQRT1_2))), Scalar(1.0)), Scalar(0.5));
  Tensor pdf = mul(exp(mul(mul(x, x), Scalar(-0.5))), Scalar(0.5 * M_2_SQRTPI * M_SQRT1_2));
  return {mul(g, add(cdf, mul(x, pdf)))};
}
DerivativeByName d_gelu{"gelu", gelu_grad, 1, 0};

TensorList gelu_tanh_grad(G c, GL go) {
  const Tensor &g = go[0], &x = c.in[0];
  if (fused_gelu_ok(g, x)) return {gelu_backward(g, x, true)};
  const double k = M_SQRT2 * M_2_SQRTPI * 0.5, kk = 0.044715;
  Tensor x2 = mul(x, x);
  Tensor inner = mul(mul(x, add(mul(x2, Scalar(kk)), Scalar(1.0))), Scalar(k));
  Tensor t = tanh(inner);
  Tensor left = mul(add(t, Scalar(1.0)), Scalar(0.5));
  Tensor dinner = mul(add(mul(x2, Scalar(3.0 * kk)), Scalar(1.0)), Scalar(k));
  Tensor right = mul(mul(mul(x, rsub(mul(t, t), Scalar(1.0))), dinner), Scalar(0.5));
  return {mul(g, add(left, right))};
}
DerivativeByName d_gelu_tanh{"gelu_tanh", gelu_tanh_grad, 1, 0};

TensorList logit_grad(G c, GL go) {
  const Tensor &g = go[0], &x = c.in[0];
  Tensor r = div(g, mul(x, rsub(x, Scalar(1.0))));
  // without eps: NaN outside [0, 1]; with eps: zero outside [eps, 1 - eps]
  const bool no_eps = std::holds_alternative<std::monostate>(c.attrs[0]);
  double lo = no_eps ? 0.0 : attr_double(c.attrs[0]), hi = 1.0 - lo;
  Tensor outside = logical_or(lt(x, Scalar(lo)), gt(x, Scalar(hi)));
  Tensor fill = no_eps ? full({}, Scalar(std::nan("")), r.dtype()) : zeros({}, r.dtype());
  return {where(outside, fill, r)};
}
DerivativeByName d_logit{"logit", logit_grad, 1, 0};

TensorList clamp_grad(G c, GL go) {
  const Tensor &g = go[0], &x = c.in[0];
  Tensor keep = logical_and(ge(x, attr_scalar(c.attrs[0])), le(x, attr_scalar(c.attrs[1])));
  return {where_g(keep, g)};
}
DerivativeByName d_clamp{"clamp", clamp_grad, 1, 0};
TensorList clamp_min_grad(G c, GL go) {
  return {where_g(ge(c.in[0], attr_scalar(c.attrs[0])), go[0])};
}
DerivativeByName d_clamp_min{"clamp_min", clamp_min_grad, 1, 0};
TensorList clamp_max_grad(G c, GL go) {
  return {where_g(le(c.in[0], attr_scalar(c.attrs[0])), go[0])};
}
DerivativeByName d_clamp_max{"clamp_max", clamp_max_grad, 1, 0};

TensorList leaky_relu_grad(G c, GL go) {
  const Tensor &g = go[0], &x = c.in[0];
  return {where(gt(x, Scalar(0)), g, mul(g, Scalar(attr_double(c.attrs[0]))))};
}
DerivativeByName d_leaky_relu{"leaky_relu", leaky_relu_grad, 1, 0};

TensorList elu_grad(G c, GL go) {
  const Tensor &g = go[0], &x = c.in[0], &y = c.out[0];
  double alpha = attr_double(c.attrs[0]), scale = attr_double(c.attrs[1]),
         is = attr_double(c.attrs[2]);
  // x <= 0: d/dx alpha scale (e^(is x) - 1) = is (y + alpha scale); NaN takes the positive branch
  Tensor neg_part = mul(mul(g, add(y, Scalar(alpha * scale))), Scalar(is));
  return {where(le(x, Scalar(0)), neg_part, mul(g, Scalar(scale)))};
}
DerivativeByName d_elu{"elu", elu_grad, 1, 1};

TensorList softplus_grad(G c, GL go) {
  const Tensor &g = go[0], &x = c.in[0];
  double beta = attr_double(c.attrs[0]), thr = attr_double(c.attrs[1]);
  Tensor bx = mul(x, Scalar(beta));
  return {where(gt(bx, Scalar(thr)), g, mul(g, sigmoid(bx)))};
}
DerivativeByName d_softplus{"softplus", softplus_grad, 1, 0};

TensorList hardtanh_grad(G c, GL go) {
  const Tensor &g = go[0], &x = c.in[0];
  Tensor out =
      logical_or(le(x, Scalar(attr_double(c.attrs[0]))), ge(x, Scalar(attr_double(c.attrs[1]))));
  return {where(out, zeros({}, g.dtype()), g)};
}
DerivativeByName d_hardtanh{"hardtanh", hardtanh_grad, 1, 0};

TensorList threshold_grad(G c, GL go) {
  return {where(le(c.in[0], Scalar(attr_double(c.attrs[0]))), zeros({}, go[0].dtype()), go[0])};
}
DerivativeByName d_threshold{"threshold", threshold_grad, 1, 0};

// ---- binary -------------------------------------------------------------------------------------
TensorList add_grad(G c, GL go) {
  const Tensor& g = go[0];
  Scalar alpha = c.attrs.empty() ? Scalar(1) : attr_scalar(c.attrs[0]);
  return {g, alpha.to_double() == 1.0 && !alpha.is_complex() ? g : mul(g, conj_scalar(alpha))};
}
DerivativeByName d_add{"add", add_grad, 0, 0};

TensorList sub_grad(G c, GL go) {
  const Tensor& g = go[0];
  Scalar alpha = c.attrs.empty() ? Scalar(1) : attr_scalar(c.attrs[0]);
  return {g, alpha.to_double() == 1.0 && !alpha.is_complex()
                 ? neg(g)
                 : mul(g, neg_scalar(conj_scalar(alpha)))};
}
DerivativeByName d_sub{"sub", sub_grad, 0, 0};

TensorList mul_grad(G c, GL go) {
  const Tensor& g = go[0];
  return {c.needs[0] ? mul(g, cj(c.in[1])) : Tensor(), c.needs[1] ? mul(g, cj(c.in[0])) : Tensor()};
}
DerivativeByName d_mul{"mul", mul_grad, 0b11, 0};

TensorList div_grad(G c, GL go) {
  const Tensor &g = go[0], &a = c.in[0], &b = c.in[1];
  Tensor ga = c.needs[0] || c.needs[1] ? div(g, cj(b)) : Tensor();
  return {ga, c.needs[1] ? neg(mul(ga, cj(div(a, b)))) : Tensor()};
}
DerivativeByName d_true_divide{"true_divide", div_grad, 0b11, 0};

TensorList zero2_grad(G c, GL go) { return {zeros_like(go[0]), zeros_like(go[0])}; }
DerivativeByName d_floor_divide{"floor_divide", zero2_grad, 0, 0};
DerivativeByName d_div_trunc{"div_trunc", zero2_grad, 0, 0};

TensorList remainder_grad(G c, GL go) {
  const Tensor& g = go[0];
  return {g, c.needs[1] ? neg(mul(g, floor_divide(c.in[0], c.in[1]))) : Tensor()};
}
DerivativeByName d_remainder{"remainder", remainder_grad, 0b11, 0};

TensorList fmod_grad(G c, GL go) {
  const Tensor& g = go[0];
  return {g, c.needs[1] ? neg(mul(g, div(c.in[0], c.in[1], "trunc"))) : Tensor()};
}
DerivativeByName d_fmod{"fmod", fmod_grad, 0b11, 0};

TensorList pow_grad(G c, GL go) {
  const Tensor &g = go[0], &a = c.in[0], &b = c.in[1], &y = c.out[0];
  Tensor ga, gb;
  if (c.needs[0]) {
    Tensor d;
    if (b.is_wrapped_number() && !b.is_complex()) {
      // a Python-number exponent: e and e - 1 stay double Scalars (a wrapped e - 1 would round to
      // the default dtype)
      double e = b.item<double>();
      d = e == 0.0 ? zeros_like(a) : mul(pow(a, Scalar(e - 1.0)), Scalar(e));
    } else {
      d = mul(b, pow(a, sub(b, Scalar(1))));
      d = where(eq(b, Scalar(0)), zeros({}, d.dtype()),
                d);  // x^0 has zero derivative, even at x = 0
    }
    ga = mul(g, cj(d));
  }
  if (c.needs[1]) {
    // 0^b for b >= 0 (real b) has a zero derivative in b, as torch defines it
    Tensor d = mul(y, log(a));
    Tensor real_nonneg = b.is_complex()
                             ? logical_and(eq(imag(b), Scalar(0)), ge(real(b), Scalar(0)))
                             : ge(b, Scalar(0));
    d = where(logical_and(eq(a, Scalar(0)), real_nonneg), zeros({}, d.dtype()), d);
    gb = mul(g, cj(d));
  }
  return {ga, gb};
}
DerivativeByName d_pow{"pow", pow_grad, 0b11, 1};

TensorList atan2_grad(G c, GL go) {
  const Tensor &g = go[0], &a = c.in[0], &b = c.in[1];
  // 1 / (a^2 + b^2), zero where that overflows (torch: the gradient at the origin is zero)
  Tensor recip = reciprocal(add(mul(a, a), mul(b, b)));
  recip = where(isinf(recip), zeros({}, recip.dtype()), recip);
  return {mul(mul(g, b), recip), mul(mul(g, neg(a)), recip)};
}
DerivativeByName d_atan2{"atan2", atan2_grad, 0b11, 0};

// Ties share the gradient equally; a NaN (which propagates) sends the full gradient to both sides.
TensorList maximum_grad(G c, GL go) {
  const Tensor &g = go[0], &a = c.in[0], &b = c.in[1];
  const bool is_max = std::string_view(c.op.name) == "maximum";
  Tensor shared = where(eq(a, b), mul(g, Scalar(0.5)), g);
  Tensor z = zeros({}, g.dtype());
  Tensor a_loses = is_max ? lt(a, b) : gt(a, b);
  Tensor b_loses = is_max ? gt(a, b) : lt(a, b);
  return {c.needs[0] ? where(a_loses, z, shared) : Tensor(),
          c.needs[1] ? where(b_loses, z, shared) : Tensor()};
}
DerivativeByName d_maximum{"maximum", maximum_grad, 0b11, 0};
DerivativeByName d_minimum{"minimum", maximum_grad, 0b11, 0};

TensorList fmax_grad(G c, GL go) {
  const Tensor &g = go[0], &a = c.in[0], &b = c.in[1];
  bool is_max = std::string_view(c.op.name) == "fmax";
  Tensor pick_a = logical_or(is_max ? ge(a, b) : le(a, b), isnan(b));
  Tensor z = zeros({}, g.dtype());
  return {where(pick_a, g, z), where(pick_a, z, g)};
}
DerivativeByName d_fmax{"fmax", fmax_grad, 0b11, 0};
DerivativeByName d_fmin{"fmin", fmax_grad, 0b11, 0};

// torch 2.13 defines nextafter's gradient as the identity in self and zero in other.
TensorList nextafter_grad(G, GL go) { return {go[0], zeros_like(go[0])}; }
DerivativeByName d_nextafter{"nextafter", nextafter_grad, 0, 0};

TensorList hypot_grad(G c, GL go) {
  const Tensor &g = go[0], &y = c.out[0];
  Tensor r = div(g, y);
  return {mul(r, c.in[0]), mul(r, c.in[1])};
}
DerivativeByName d_hypot{"hypot", hypot_grad, 0b11, 1};

TensorList copysign_grad(G c, GL go) {
  const Tensor &g = go[0], &a = c.in[0], &y = c.out[0];
  Tensor ratio = div(y, a);
  ratio = where(eq(a, Scalar(0)), zeros_like(ratio), ratio);
  return {mul(g, ratio), zeros_like(g)};
}
DerivativeByName d_copysign{"copysign", copysign_grad, 0b01, 1};

// torch's: d/dx = xlogy(grad, y), 0 where x == 0 and y <= 0 (the x log y = 0 convention's corner)
TensorList xlogy_grad(G c, GL go) {
  const Tensor &g = go[0], &a = c.in[0], &b = c.in[1];
  Tensor gx = xlogy(g, b);
  gx = where(logical_and(eq(a, Scalar(0)), le(b, Scalar(0))), zeros_like(gx), gx);
  return {gx, mul(g, div(a, b))};
}
DerivativeByName d_xlogy{"xlogy", xlogy_grad, 0b11, 0};

// d/da log(e^a + e^b) = 1 / (1 + e^(b - a)) (conjugated for complex, as torch); base 2 alike.
TensorList logaddexp_grad(G c, GL go) {
  const Tensor &g = go[0], &a = c.in[0], &b = c.in[1];
  return {div(g, conj(add(exp(sub(b, a)), Scalar(1)))), div(g, conj(add(exp(sub(a, b)), Scalar(1))))};
}
DerivativeByName d_logaddexp{"logaddexp", logaddexp_grad, 0b11, 0};
TensorList logaddexp2_grad(G c, GL go) {
  const Tensor &g = go[0], &a = c.in[0], &b = c.in[1];
  return {div(g, add(exp2(sub(b, a)), Scalar(1))), div(g, add(exp2(sub(a, b)), Scalar(1)))};
}
DerivativeByName d_logaddexp2{"logaddexp2", logaddexp2_grad, 0b11, 0};

TensorList clamp_min_tensor_grad(G c, GL go) {
  const Tensor &g = go[0], &x = c.in[0], &lo = c.in[1];
  return {where_g(ge(x, lo), g), where_g(lt(x, lo), g)};
}
DerivativeByName d_clamp_min_tensor{"clamp_min_tensor", clamp_min_tensor_grad, 0b11, 0};
TensorList clamp_max_tensor_grad(G c, GL go) {
  const Tensor &g = go[0], &x = c.in[0], &hi = c.in[1];
  return {where_g(le(x, hi), g), where_g(gt(x, hi), g)};
}
DerivativeByName d_clamp_max_tensor{"clamp_max_tensor", clamp_max_tensor_grad, 0b11, 0};

TensorList polar_grad(G c, GL go) {
  const Tensor &g = go[0], &y = c.out[0];
  // dy/dr = e^{i th}, dy/dth = i y; real inputs take Re(conj(g) * dy). torch writes e^{i th} as
  // sgn(y): zero where r = 0 and -e^{i th} where r < 0; kept for conformance.
  Tensor gr = real(mul(conj(g), sgn(y)));
  Tensor gth = real(mul(conj(g), complex(neg(imag(y)), real(y))));
  return {gr, gth};
}
DerivativeByName d_polar{"polar", polar_grad, 0, 1};

TensorList complex_grad(G, GL go) { return {real(go[0]), imag(go[0])}; }
DerivativeByName d_complex{"complex", complex_grad, 0, 0};

TensorList where_grad(G c, GL go) {
  const Tensor &g = go[0], &cond = c.in[0];
  Tensor z = zeros_like(g);
  return {Tensor(), c.needs[1] ? where(cond, g, z) : Tensor(),
          c.needs[2] ? where(cond, z, g) : Tensor()};
}
DerivativeByName d_where{"where", where_grad, 0b001, 0};

// copy_(dst, src): dst is overwritten (no gradient); src receives the gradient, summed to its
// shape.
TensorList copy_grad(G c, GL go) { return {zeros_like(go[0]), go[0]}; }
DerivativeByName d_copy_{"copy_", copy_grad, 0, 0};

}  // namespace
}  // namespace kiln
