// torch.special's own ops (special_list.h): op table entries with torch's names and schemas, their
// metas (float results, broadcasting for the binary ones), derivatives, and the C++ front ends
// (special.h). The kernels and the mathematics are in kiln/backend/cpu/special.cpp.
#include "kiln/ops/special.h"

#include "kiln/autograd/non_differentiable.h"
#include "kiln/core/visit.h"

#include <cmath>

#include "kiln/ops/composite.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/special_list.h"

namespace kiln {
namespace {

// torch's CPU kernels of these have no float16 / bfloat16 form
bool half_ok(SpecialOp c) {
  using S = SpecialOp;
  return c == S::I0 || c == S::I0e || c == S::I1 || c == S::I1e || c == S::Ndtr || c == S::Entr || c == S::Sinc ||
         c == S::Xlog1py || c == S::Igamma || c == S::Igammac;
}

// the result dtype: the (promoted) input's when floating, the default float for integers and bool
Dtype result_dtype(const OpDef& op, Dtype d) {
  const SpecialOp c = static_cast<SpecialOp>(op.code);
  if (is_complex(d) && c != SpecialOp::Sinc) raise_dtype_unsupported(op.name, d);
  if (is_float8(d) || ((d == kFloat16 || d == kBFloat16) && !half_ok(c))) raise_dtype_unsupported(op.name, d);
  // igamma / igammac take floating inputs only (torch: not implemented for integers)
  if ((c == SpecialOp::Igamma || c == SpecialOp::Igammac) && !is_floating(d)) raise_dtype_unsupported(op.name, d);
  return is_floating(d) || is_complex(d) ? d : default_dtype();
}

SpecList unary_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  return {{in[0].sizes(), result_dtype(op, in[0].dtype())}};
}
SpecList binary_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  const Dtype d = result_type(in[0], in[1]);
  if (is_complex(in[0].dtype()) || is_complex(in[1].dtype())) raise_dtype_unsupported(op.name, d);
  return {{broadcast_shapes(in[0].sizes(), in[1].sizes(), op.name), result_dtype(op, d)}};
}

bool inplaceable(std::string_view name) {
  return name == "i0" || name == "sinc" || name == "igamma" || name == "igammac";
}

#define KILN_SPECIAL_DEF(name, code, meta, schema)                                                          \
  OpDef op_##name{#name, inplaceable(#name) ? kInplaceable : 0u, meta, {}, static_cast<int>(SpecialOp::code)}; \
  OpRegistrar reg_##name{op_##name, schema};
// torch names the argument x for airy_ai, the scaled K's, spherical_bessel_j0 and the polynomials (x, n)
constexpr bool named_x(std::string_view n) {
  return n == "special_airy_ai" || n == "special_scaled_modified_bessel_k0" ||
         n == "special_scaled_modified_bessel_k1" || n == "special_spherical_bessel_j0";
}
#define KILN_SPECIAL_UNARY_DEF(name, code) \
  KILN_SPECIAL_DEF(name, code, unary_meta, named_x(#name) ? #name "(Tensor x) -> Tensor" : #name "(Tensor self) -> Tensor")
#define KILN_SPECIAL_BINARY_DEF(name, code)                                                            \
  KILN_SPECIAL_DEF(name, code, binary_meta,                                                            \
                   std::string_view(#name).find("polynomial") != std::string_view::npos                \
                       ? #name "(Tensor x, Tensor n) -> Tensor"                                        \
                       : #name "(Tensor self, Tensor other) -> Tensor")
KILN_SPECIAL_UNARY(KILN_SPECIAL_UNARY_DEF)
KILN_SPECIAL_BINARY(KILN_SPECIAL_BINARY_DEF)
#undef KILN_SPECIAL_UNARY_DEF
#undef KILN_SPECIAL_BINARY_DEF
#undef KILN_SPECIAL_DEF

// public forms: the special_* functions; i0, sinc, igamma, igammac also as methods and in place (torch's)
constexpr uint32_t kNumbers = 0b11;  // either argument of a binary one may be a Python number
#define KILN_SPECIAL_UNARY_VARIANTS(name, code) \
  OpVariants v_##name{op_##name, static_cast<uint8_t>(inplaceable(#name) ? kAllVariants : kFunctionVariant)};
// (igamma / igammac take no Python number: torch's TypeError)
#define KILN_SPECIAL_BINARY_VARIANTS(name, code) \
  OpVariants v_##name{op_##name, static_cast<uint8_t>(inplaceable(#name) ? kAllVariants : kFunctionVariant), \
                      inplaceable(#name) ? 0u : kNumbers};
KILN_SPECIAL_UNARY(KILN_SPECIAL_UNARY_VARIANTS)
KILN_SPECIAL_BINARY(KILN_SPECIAL_BINARY_VARIANTS)
#undef KILN_SPECIAL_UNARY_VARIANTS
#undef KILN_SPECIAL_BINARY_VARIANTS

Tensor un(OpDef& op, const Tensor& x) { return dispatch1(op, {x}); }
Tensor bin(OpDef& op, const Tensor& a, const Tensor& b) { return dispatch1(op, {a, b}); }
Tensor num(double v) { return scalar_tensor(Scalar(v), Dtype::Undefined, true); }

// ---- derivatives (torch's formulas; kiln's own for the Bessel functions, which torch lacks)
// 0 where the mask holds, else v
Tensor zero_where(const Tensor& mask, const Tensor& v) { return where(mask, zeros_like(v), v); }

TensorList not_implemented(const GradCtx& ctx, const TensorList&) {
  KILN_CHECK(false, NotImplemented, ctx.op.name, "the derivative for '", ctx.op.name, "' is not implemented.");
  return {};
}

TensorList unary_derivative(const GradCtx& ctx, const TensorList& g) {
  const Tensor& x = ctx.in[0];
  const Tensor& y = ctx.out[0];
  const Tensor& go = g[0];
  using S = SpecialOp;
  Tensor d;
  switch (static_cast<S>(ctx.op.code)) {
    case S::BesselJ0: d = neg(special::bessel_j1(x)); break;
    case S::BesselY0: d = neg(special::bessel_y1(x)); break;
    case S::BesselJ1:  // J1' = J0 - J1 / x (1/2 at 0)
      d = where(eq(x, Scalar(0)), full_like(x, Scalar(0.5)), sub(special::bessel_j0(x), div(y, x)));
      break;
    case S::BesselY1: d = sub(special::bessel_y0(x), div(y, x)); break;
    case S::ModI0: d = special::modified_bessel_i1(x); break;
    case S::I0: d = special::i1(x); break;
    case S::ModI1: case S::I1:  // I1' = I0 - I1 / x (1/2 at 0)
      d = where(eq(x, Scalar(0)), full_like(x, Scalar(0.5)), sub(special::modified_bessel_i0(x), div(y, x)));
      break;
    case S::I0e: d = sub(special::i1e(x), mul(sgn(x), y)); break;
    case S::I1e:  // (e^{-|x|} I1)' = I0e - I1e (sgn x + 1/x) (1/2 at 0)
      d = where(eq(x, Scalar(0)), full_like(x, Scalar(0.5)),
                sub(special::i0e(x), mul(y, add(sgn(x), reciprocal(x)))));
      break;
    case S::ModK0: d = neg(special::modified_bessel_k1(x)); break;
    case S::ModK1: d = neg(add(special::modified_bessel_k0(x), div(y, x))); break;  // K1' = -K0 - K1 / x
    case S::ScaledK0: d = sub(y, special::scaled_modified_bessel_k1(x)); break;     // (e^x K0)' = k0e - k1e
    case S::ScaledK1:  // (e^x K1)' = k1e - k0e - k1e / x
      d = sub(sub(y, special::scaled_modified_bessel_k0(x)), div(y, x));
      break;
    case S::SphJ0:  // (sin x / x)' = (x cos x - sin x) / x^2 (0 at 0)
      d = zero_where(eq(x, Scalar(0)), div(sub(mul(x, cos(x)), sin(x)), mul(x, x)));
      break;
    case S::Ndtr: d = mul(exp(mul(mul(x, x), Scalar(-0.5))), Scalar(1.0 / std::sqrt(2 * M_PI))); break;
    case S::Ndtri: d = mul(exp(mul(mul(y, y), Scalar(0.5))), Scalar(std::sqrt(2 * M_PI))); break;
    case S::LogNdtr:  // phi(x) / Phi(x) = exp(-x^2/2 - log Phi(x)) / sqrt(2 pi)
      d = mul(exp(neg(add(y, mul(mul(x, x), Scalar(0.5))))), Scalar(1.0 / std::sqrt(2 * M_PI)));
      break;
    case S::Erfcx: d = sub(mul(mul(x, y), Scalar(2)), num(2.0 / std::sqrt(M_PI))); break;
    case S::Entr: d = neg(add(log(x), Scalar(1))); break;
    case S::Sinc: {  // (pi x cos(pi x) - sin(pi x)) / (pi x^2), 0 at 0
      Tensor px = mul(x, Scalar(M_PI));
      d = zero_where(eq(x, Scalar(0)), div(sub(mul(px, cos(px)), sin(px)), mul(px, x)));
      break;
    }
    default: return not_implemented(ctx, g);  // airy_ai
  }
  return {mul(go, d)};
}

TensorList binary_derivative(const GradCtx& ctx, const TensorList& g) {
  const Tensor &a = ctx.in[0], &b = ctx.in[1];
  const Tensor& go = g[0];
  using S = SpecialOp;
  TensorList r(2);
  switch (static_cast<S>(ctx.op.code)) {
    case S::Xlog1py:  // torch's: xlog1py(grad, y), 0 where x == 0 and y <= -1
      if (ctx.needs[0]) {
        Tensor gx = special::xlog1py(go, b);
        r[0] = where(logical_and(eq(a, Scalar(0)), le(b, Scalar(-1))), zeros_like(gx), gx);
      }
      if (ctx.needs[1]) r[1] = div(mul(go, a), add(b, Scalar(1)));
      return r;
    case S::Zeta:  // d/dq zeta(x, q) = -x zeta(x + 1, q)
      if (ctx.needs[0]) return not_implemented(ctx, g);
      if (ctx.needs[1]) r[1] = mul(go, neg(mul(a, special::zeta(add(a, Scalar(1)), b))));
      return r;
    case S::Igamma: case S::Igammac: {  // d/dx P(a, x) = x^{a-1} e^{-x} / Gamma(a) (Q: its negative)
      if (ctx.needs[0]) return not_implemented(ctx, g);
      if (ctx.needs[1]) {
        Tensor d = exp(sub(sub(mul(sub(a, Scalar(1)), log(b)), b), lgamma(a)));
        r[1] = mul(go, static_cast<S>(ctx.op.code) == S::Igamma ? d : neg(d));
      }
      return r;
    }
    default: return not_implemented(ctx, g);  // the polynomials
  }
}

// airy_ai and the polynomials have none: as torch's, their outputs do not require grad
struct SpecialGrad {
  SpecialGrad(OpDef& op, DerivativeFn fn, uint32_t in, uint32_t out) {
    const std::string_view n = op.name;
    if (n == "special_airy_ai" || n.find("polynomial") != std::string_view::npos) {
      op.tags |= kNonDifferentiable;
      return;
    }
    DerivativeRegistrar(op, fn, in, out);
  }
};
#define KILN_SPECIAL_UNARY_GRAD(name, code) SpecialGrad d_##name{op_##name, unary_derivative, 1, 1};
#define KILN_SPECIAL_BINARY_GRAD(name, code) SpecialGrad d_##name{op_##name, binary_derivative, 0b11, 0};
KILN_SPECIAL_UNARY(KILN_SPECIAL_UNARY_GRAD)
KILN_SPECIAL_BINARY(KILN_SPECIAL_BINARY_GRAD)
#undef KILN_SPECIAL_UNARY_GRAD
#undef KILN_SPECIAL_BINARY_GRAD

// multigammaln(x, p) = p (p - 1) / 4 log(pi) + sum_{j < p} lgamma(x - j / 2) (torch's mvlgamma)
Tensor mvlgamma_impl(const Tensor& x, int64_t p) {
  const char* op = "mvlgamma";
  KILN_CHECK(p >= 1, Runtime, op, "p has to be greater than or equal to 1");
  if (is_complex(x.dtype())) raise_dtype_unsupported(op, x.dtype());
  // (torch 2.13 no longer checks x > (p - 1) / 2: at and below it the lgamma terms give inf / values)
  Tensor xf = is_floating(x.dtype()) ? x : to_dtype(x, default_dtype());
  Tensor offs = arange(Scalar(-0.5 * p + 0.5), Scalar(0.5), Scalar(0.5), TensorOptions(xf.dtype()).device(xf.device()));
  Tensor args = add(unsqueeze(xf, -1), offs);
  return add(sum(lgamma(args), Shape{-1}), Scalar(p * (p - 1) * std::log(M_PI) / 4));
}
Composite c_mvlgamma{"mvlgamma(Tensor self, int p) -> Tensor",
                     [](const TensorList& in, const Attrs& a) -> TensorList {
                       return {mvlgamma_impl(in[0], attr<int64_t>(a, 0))};
                     },
                     kAllVariants};
// torch.polygamma(n, input): the n-th derivative of digamma (n = 0: digamma itself); the method form,
// self second in the schema, is bound in python/kiln/special.py
Composite c_polygamma{"polygamma(int n, Tensor input) -> Tensor",
                      [](const TensorList& in, const Attrs& a) -> TensorList {
                        const int64_t n = attr<int64_t>(a, 0);
                        KILN_CHECK(n >= 0, Runtime, "polygamma", "polygamma(n, x) does not support negative n.");
                        return {polygamma(n, in[0])};
                      },
                      kFunctionVariant};
Composite c_multigammaln{"special_multigammaln(Tensor self, int p) -> Tensor",
                         [](const TensorList& in, const Attrs& a) -> TensorList {
                           return {mvlgamma_impl(in[0], attr<int64_t>(a, 0))};
                         },
                         kFunctionVariant};

}  // namespace

Tensor i0(const Tensor& x) { return un(op_i0, x); }
Tensor sinc(const Tensor& x) { return un(op_sinc, x); }
Tensor igamma(const Tensor& a, const Tensor& x) { return bin(op_igamma, a, x); }
Tensor igammac(const Tensor& a, const Tensor& x) { return bin(op_igammac, a, x); }
Tensor mvlgamma(const Tensor& x, int64_t p) { return mvlgamma_impl(x, p); }

namespace special {
#define KILN_SPECIAL_UNARY_FN(fn, opname) \
  Tensor fn(const Tensor& x) { return un(op_##opname, x); }
KILN_SPECIAL_UNARY_FN(airy_ai, special_airy_ai)
KILN_SPECIAL_UNARY_FN(bessel_j0, special_bessel_j0)
KILN_SPECIAL_UNARY_FN(bessel_j1, special_bessel_j1)
KILN_SPECIAL_UNARY_FN(bessel_y0, special_bessel_y0)
KILN_SPECIAL_UNARY_FN(bessel_y1, special_bessel_y1)
KILN_SPECIAL_UNARY_FN(modified_bessel_i0, special_modified_bessel_i0)
KILN_SPECIAL_UNARY_FN(modified_bessel_i1, special_modified_bessel_i1)
KILN_SPECIAL_UNARY_FN(modified_bessel_k0, special_modified_bessel_k0)
KILN_SPECIAL_UNARY_FN(modified_bessel_k1, special_modified_bessel_k1)
KILN_SPECIAL_UNARY_FN(scaled_modified_bessel_k0, special_scaled_modified_bessel_k0)
KILN_SPECIAL_UNARY_FN(scaled_modified_bessel_k1, special_scaled_modified_bessel_k1)
KILN_SPECIAL_UNARY_FN(spherical_bessel_j0, special_spherical_bessel_j0)
KILN_SPECIAL_UNARY_FN(i0e, special_i0e)
KILN_SPECIAL_UNARY_FN(i1, special_i1)
KILN_SPECIAL_UNARY_FN(i1e, special_i1e)
KILN_SPECIAL_UNARY_FN(ndtr, special_ndtr)
KILN_SPECIAL_UNARY_FN(ndtri, special_ndtri)
KILN_SPECIAL_UNARY_FN(log_ndtr, special_log_ndtr)
KILN_SPECIAL_UNARY_FN(erfcx, special_erfcx)
KILN_SPECIAL_UNARY_FN(entr, special_entr)
#undef KILN_SPECIAL_UNARY_FN
#define KILN_SPECIAL_BINARY_FN(fn, opname) \
  Tensor fn(const Tensor& a, const Tensor& b) { return bin(op_##opname, a, b); }
KILN_SPECIAL_BINARY_FN(xlog1py, special_xlog1py)
KILN_SPECIAL_BINARY_FN(zeta, special_zeta)
KILN_SPECIAL_BINARY_FN(gammainc, igamma)
KILN_SPECIAL_BINARY_FN(gammaincc, igammac)
KILN_SPECIAL_BINARY_FN(chebyshev_polynomial_t, special_chebyshev_polynomial_t)
KILN_SPECIAL_BINARY_FN(chebyshev_polynomial_u, special_chebyshev_polynomial_u)
KILN_SPECIAL_BINARY_FN(chebyshev_polynomial_v, special_chebyshev_polynomial_v)
KILN_SPECIAL_BINARY_FN(chebyshev_polynomial_w, special_chebyshev_polynomial_w)
KILN_SPECIAL_BINARY_FN(shifted_chebyshev_polynomial_t, special_shifted_chebyshev_polynomial_t)
KILN_SPECIAL_BINARY_FN(shifted_chebyshev_polynomial_u, special_shifted_chebyshev_polynomial_u)
KILN_SPECIAL_BINARY_FN(shifted_chebyshev_polynomial_v, special_shifted_chebyshev_polynomial_v)
KILN_SPECIAL_BINARY_FN(shifted_chebyshev_polynomial_w, special_shifted_chebyshev_polynomial_w)
KILN_SPECIAL_BINARY_FN(hermite_polynomial_h, special_hermite_polynomial_h)
KILN_SPECIAL_BINARY_FN(hermite_polynomial_he, special_hermite_polynomial_he)
KILN_SPECIAL_BINARY_FN(laguerre_polynomial_l, special_laguerre_polynomial_l)
KILN_SPECIAL_BINARY_FN(legendre_polynomial_p, special_legendre_polynomial_p)
#undef KILN_SPECIAL_BINARY_FN
Tensor multigammaln(const Tensor& x, int64_t p) { return mvlgamma_impl(x, p); }
}  // namespace special

}  // namespace kiln
