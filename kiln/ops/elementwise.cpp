// Elementwise ops: the unary and binary lists (unary_list.h), parametrised activations, where,
// clamp and the composites built from them: entries, schemas, metas, front ends. The CPU kernels are
// in kiln/backend/cpu/elementwise.cpp.
#include <cmath>
#include <cstring>
#include <string_view>
#include <tuple>

#include "kiln/core/finfo.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/elementwise_detail.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

using namespace elementwise_detail;

// ---- unary ----------------------------------------------------------------------------------------

SpecList unary_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  const TensorSpec& x = in[0];
  Dtype d = x.dtype();
  UnaryOp code = static_cast<UnaryOp>(code_of(op));
  KILN_CHECK(!(code == UnaryOp::Neg && d == kBool), Runtime, op.name,
             "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
             "invert a mask, use the `~` or `logical_not()` operator instead.");
  check_dtype_supported(op, x.device(), unary_compute_dtype(op, d));
  Dtype out;
  switch (rule_of(op)) {
    case Rule::Bool: out = kBool; break;
    case Rule::Real: out = to_real(d); break;
    case Rule::Float: out = code == UnaryOp::Angle ? to_real(floatify(d)) : floatify(d); break;
    default: out = unary_compute_dtype(op, d);
  }
  SpecList r(1);  // built in place: the hot path of every pointwise call
  r[0].sizes_ = x.sizes();
  r[0].dtype_ = out;
  return r;
}

// ---- binary ---------------------------------------------------------------------------------------

// add/sub: torch's checks of alpha against the inputs' promoted dtype.
void check_alpha(const char* op, const TensorSpec& a, const TensorSpec& b, const Scalar& alpha) {
  if (!alpha.is_floating() && !alpha.is_complex()) return;  // an integer or bool alpha suits every dtype
  Dtype d = result_type(a, b);
  if (is_integral(d, true))
    KILN_CHECK(!alpha.is_floating() && !alpha.is_complex(), Runtime, op,
               "For integral input tensors, argument alpha must not be a floating point number.");
  if (d != kBool && alpha.is_bool()) return;
  if (!is_complex(d))
    KILN_CHECK(!alpha.is_complex(), Runtime, op, "For non-complex input tensors, argument alpha "
               "must not be a complex number.");
}


SpecList binary_meta(const OpDef& op, const SpecList& in, const Attrs& attrs) {
  const TensorSpec& a = in[0];
  const TensorSpec& b = in[1];
  if (!attrs.empty()) [[unlikely]] check_alpha(op.name, a, b, attr<Scalar>(attrs, 0));  // add, sub
  BinaryOp code = static_cast<BinaryOp>(code_of(op));
  if (code == BinaryOp::Polar || code == BinaryOp::Complex) [[unlikely]]
    KILN_CHECK(a.dtype() == b.dtype() && (a.dtype() == kFloat32 || a.dtype() == kFloat64), Runtime, op.name,
               "Expected both inputs to be Float or Double tensors but got ", dtype_name(a.dtype()), " and ",
               dtype_name(b.dtype()));
  SymShape shape = broadcast_shapes(a.sizes(), b.sizes(), op.name);
  Dtype ct = binary_compute_dtype(op, a, b);
  check_dtype_supported(op, a.device(), ct);
  Dtype out = rule_of(op) == Rule::Bool ? kBool : ct;
  if (code == BinaryOp::Polar || code == BinaryOp::Complex) out = to_complex(ct);
  SpecList r(1);
  r[0].sizes_ = std::move(shape);
  r[0].dtype_ = out;
  return r;
}

// The ops whose out= torch takes only in the result's dtype (its structured unary ops that keep the
// input's dtype, and polar/complex), where the others cast into any dtype the result can be cast to.
// abs is not one: torch writes a complex input's abs into a complex or real out= alike.
constexpr bool out_exact_dtype(std::string_view n) {
  constexpr std::string_view exact[] = {
      "neg", "sign", "sgn", "floor", "ceil", "trunc", "frac", "bitwise_not", "conj_physical", "isposinf",
      "isneginf", "signbit", "silu", "mish", "hardsigmoid", "hardswish", "logsigmoid", "round",
      "round_decimals", "clamp", "clamp_min", "clamp_max", "nan_to_num", "leaky_relu", "elu", "gelu",
      "gelu_tanh", "softplus", "hardtanh", "polar", "complex"};
  for (std::string_view e : exact)
    if (e == n) return true;
  return false;
}
constexpr uint32_t out_tags(std::string_view n) { return out_exact_dtype(n) ? kOutExactDtype : 0u; }

// The entries: one per list line (unary_list.h). Kernels are registered for the same names by the
// CPU backend (backend/cpu/elementwise.cpp).
#define KILN_DEF_UNARY_S(name, code, rule, schema)                                                \
  OpDef op_##name{#name, kPointwise | kInplaceable | out_tags(#name), unary_meta, {},             \
                  pack(static_cast<int>(UnaryOp::code), Rule::rule)};                            \
  OpRegistrar reg_##name{op_##name, schema};
#define KILN_DEF_UNARY(name, code, rule) KILN_DEF_UNARY_S(name, code, rule, #name "(Tensor self) -> Tensor")
KILN_UNARY_OPS(KILN_DEF_UNARY)
// Parametrised unary ops share the unary kernel; their attrs are Scalars or floats in KParams order.
KILN_PUNARY_OPS(KILN_DEF_UNARY_S)
#undef KILN_DEF_UNARY
#undef KILN_DEF_UNARY_S

#define KILN_DEF_BINARY_S(name, code, rule, schema)                                               \
  OpDef op_##name{#name, kPointwise | kInplaceable | out_tags(#name), binary_meta, {},            \
                  pack(static_cast<int>(BinaryOp::code), Rule::rule)};                           \
  OpRegistrar reg_##name{op_##name, schema};
#define KILN_DEF_BINARY(name, code, rule, numbers) \
  KILN_DEF_BINARY_S(name, code, rule, #name "(Tensor self, Tensor other) -> Tensor")
KILN_BINARY_OPS(KILN_DEF_BINARY)
KILN_BINARY_EXTRA_OPS(KILN_DEF_BINARY_S)
#undef KILN_DEF_BINARY
#undef KILN_DEF_BINARY_S

// Their public forms (kiln.<name>, Tensor.<name>, Tensor.<name>_ and out=, made from the schemas by
// the binding). A binary op's tensor arguments take Python numbers where torch's signatures do: the
// list's fourth column.
constexpr uint32_t kNumbersAny = 0b11, kNumbersSecond = 0b10, kNumbersNone = 0;
#define KILN_UNARY_VARIANTS(name, code, rule) \
  OpVariants v_##name{op_##name, std::string_view(#name) == "conj_physical" ? kFunctionAndMethod : kAllVariants};
#define KILN_BINARY_VARIANTS(name, code, rule, numbers) OpVariants v_##name{op_##name, kAllVariants, kNumbers##numbers};
KILN_UNARY_OPS(KILN_UNARY_VARIANTS)
KILN_BINARY_OPS(KILN_BINARY_VARIANTS)
#undef KILN_UNARY_VARIANTS
#undef KILN_BINARY_VARIANTS
OpVariants v_add{op_add, kAllVariants, kNumbersAny}, v_sub{op_sub, kAllVariants, kNumbersAny};
OpVariants v_round{op_round, kAllVariants}, v_round_decimals{op_round_decimals, kAllVariants};
OpVariants v_polar{op_polar, kFunctionVariant}, v_complex{op_complex, kFunctionVariant};

Tensor wrap(const Scalar& s) { return scalar_tensor(s, Dtype::Undefined, true); }
}  // namespace

void check_scalar_fits(const char* op, const Scalar& v, Dtype d) {
  if (!is_integral(d, false) || !(v.is_integral() || v.is_bool())) return;
  bool ok = visit_integral(d, op, [&]<class T>() {
    if (v.tag() == Scalar::Tag::UInt) return v.to<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
    int64_t x = v.to_int();
    if constexpr (std::is_same_v<T, uint64_t>) return x >= 0;
    else return x >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                x <= static_cast<int64_t>(std::numeric_limits<T>::max());
  });
  KILN_CHECK(ok, Runtime, op, "value cannot be converted to type ", dtype_name(d), " without overflow");
}

namespace {

// ---- where ----------------------------------------------------------------------------------------
SpecList where_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  KILN_CHECK(in[0].dtype() == kBool, Runtime, op.name, "where expected condition to be a boolean "
             "tensor, but got a tensor with dtype ", dtype_name(in[0].dtype()));
  SymShape s = broadcast_shapes(broadcast_shapes(in[0].sizes(), in[1].sizes(), op.name), in[2].sizes(), op.name);
  return {{s, result_type(in[1], in[2])}};
}

OpDef op_where{"where", kPointwise | kOutExactDtype, where_meta, {}};
OpRegistrar reg_where{op_where, "where.self(Tensor condition, Tensor self, Tensor other) -> Tensor"};

// ---- copy_ ----------------------------------------------------------------------------------------
// On the meta device (the destination's): only the shape check.
void copy_meta_kernel(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  const Tensor& dst = in[0];
  KILN_CHECK(sym_numel(broadcast_shapes(dst.sym_sizes(), in[1].sym_sizes(), "copy_")) == dst.sym_numel(), Runtime,
             "copy_", "output with shape ", dst.sym_sizes(), " doesn't match the broadcast shape ",
             broadcast_shapes(dst.sym_sizes(), in[1].sym_sizes()));
  dst.bump_version();
  out = {dst};
}
OpDef op_copy_{"copy_", kInplaceable | kCrossDevice, nullptr, {nullptr, nullptr, copy_meta_kernel}};  // CPU: backend/cpu/creation.cpp
OpRegistrar reg_copy_{op_copy_, "copy_(Tensor(a!) self, Tensor src) -> Tensor(a!)"};

Tensor un(const OpDef& op, const Tensor& x, Attrs attrs = {}) { return dispatch1(op, {x}, std::move(attrs)); }
const Tensor& un_(const OpDef& op, const Tensor& x, Attrs attrs = {}) {
  return dispatch_inplace(op, x, {x}, std::move(attrs));
}

}  // namespace

#define KILN_IMPL_UNARY(name, code, rule)                                      \
  Tensor name(const Tensor& x) { return dispatch1(op_##name, {x}); }           \
  const Tensor& name##_(const Tensor& x) {                                     \
    if (UnaryOp::code == UnaryOp::Conj && !x.is_complex()) return x; /* as torch */ \
    return dispatch_inplace(op_##name, x, {x});                                \
  }
KILN_UNARY_OPS(KILN_IMPL_UNARY)
#undef KILN_IMPL_UNARY

#define KILN_IMPL_BINARY(name, code, rule, numbers)                                          \
  Tensor name(const Tensor& a, const Tensor& b) { return dispatch1(op_##name, {a, b}); }      \
  Tensor name(const Tensor& a, const Scalar& b) { return dispatch1(op_##name, {a, wrap(b)}); } \
  const Tensor& name##_(const Tensor& a, const Tensor& b) {                                  \
    return dispatch_inplace(op_##name, a, {a, b});                                           \
  }                                                                                          \
  const Tensor& name##_(const Tensor& a, const Scalar& b) {                                  \
    return dispatch_inplace(op_##name, a, {a, wrap(b)});                                     \
  }
KILN_BINARY_OPS(KILN_IMPL_BINARY)
#undef KILN_IMPL_BINARY

const Tensor& unary_out(const char* name, const Tensor& x, const Tensor& out) {
  const OpDef* op = find_op(name);
  KILN_CHECK(op, Value, name, "unknown op");
  return dispatch_out(*op, out, {x});
}
const Tensor& binary_out(const char* name, const Tensor& a, const Tensor& b, const Tensor& out) {
  const OpDef* op = find_op(name);
  KILN_CHECK(op, Value, name, "unknown op");
  return dispatch_out(*op, out, {a, b});
}

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return dispatch1(op_add, {a, b}, {alpha});
}
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) { return add(a, wrap(b), alpha); }
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return dispatch1(op_sub, {a, b}, {alpha});
}
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) { return sub(a, wrap(b), alpha); }
const Tensor& add_(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return dispatch_inplace(op_add, a, {a, b}, {alpha});
}
const Tensor& sub_(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return dispatch_inplace(op_sub, a, {a, b}, {alpha});
}
const Tensor& add_out(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return dispatch_out(op_add, out, {a, b}, {alpha});
}

static const OpDef& div_op(const std::string& mode) {
  if (mode.empty()) return op_true_divide;
  if (mode == "trunc") return op_div_trunc;
  if (mode == "floor") return op_floor_divide;
  KILN_FAIL(Runtime, "div", "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
            mode, "'");
}
Tensor div(const Tensor& a, const Tensor& b, const std::string& mode) {
  return dispatch1(div_op(mode), {a, b});
}
const Tensor& div_(const Tensor& a, const Tensor& b, const std::string& mode) {
  return dispatch_inplace(div_op(mode), a, {a, b});
}

Tensor round(const Tensor& x, std::optional<int64_t> decimals) {
  if (!decimals) return un(op_round, x);
  return un(op_round_decimals, x, {*decimals});  // integer dtypes: not implemented, as in torch
}
const Tensor& round_(const Tensor& x, std::optional<int64_t> decimals) {
  if (!decimals) return un_(op_round, x);
  return un_(op_round_decimals, x, {*decimals});
}

Tensor logit(const Tensor& x, std::optional<double> eps) {
  Attrs a;
  if (eps) a.push_back(*eps); else a.push_back(std::monostate{});
  return un(op_logit, x, a);
}

Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  KILN_CHECK(lo || hi, Runtime, "clamp", "At least one of 'min' or 'max' must not be None");
  TensorList ts{x};
  if (lo) ts.push_back(wrap(*lo));
  if (hi) ts.push_back(wrap(*hi));
  Dtype d = result_type(ts);
  Tensor xx = x.dtype() == d ? x : to_dtype(x, d);
  if (lo && hi) return un(op_clamp, xx, {*lo, *hi});
  if (lo) return un(op_clamp_min, xx, {*lo});
  return un(op_clamp_max, xx, {*hi});
}
const Tensor& clamp_(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  KILN_CHECK(lo || hi, Runtime, "clamp_", "At least one of 'min' or 'max' must not be None");
  if (lo && hi) return un_(op_clamp, x, {*lo, *hi});
  if (lo) return un_(op_clamp_min, x, {*lo});
  return un_(op_clamp_max, x, {*hi});
}
Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi) {
  KILN_CHECK(lo.defined() || hi.defined(), Runtime, "clamp",
             "At least one of 'min' or 'max' must not be None");
  Tensor y = x;
  if (lo.defined()) y = dispatch1(op_clamp_min_tensor, {y, lo});
  if (hi.defined()) y = dispatch1(op_clamp_max_tensor, {y, hi});
  return y;
}

// nan_to_num's attributes: the replacements, infinities by default the dtype's largest finite values
static Attrs nan_to_num_attrs(Dtype d, std::optional<double> nan, std::optional<double> posinf,
                              std::optional<double> neginf) {
  double big = 0;
  switch (d) {
    case kFloat16: big = 65504.0; break;
    case kBFloat16: big = 3.3895313892515355e38; break;
    case kFloat32: big = 3.4028234663852886e38; break;
    default: big = 1.7976931348623157e308;
  }
  return {nan.value_or(0.0), posinf.value_or(big), neginf.value_or(-big)};
}
Tensor nan_to_num(const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  if (is_integral(x.dtype(), true)) return clone(x);
  if (x.is_complex())  // each part on its own, as torch
    return complex(nan_to_num(real(x), nan, posinf, neginf), nan_to_num(imag(x), nan, posinf, neginf));
  return un(op_nan_to_num, x, nan_to_num_attrs(x.dtype(), nan, posinf, neginf));
}
// In place: integers have nothing to replace and are left untouched (no write), as torch's.
const Tensor& nan_to_num_(const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                          std::optional<double> neginf) {
  if (is_integral(x.dtype(), true)) return x;
  if (x.is_complex()) return copy_(x, nan_to_num(x, nan, posinf, neginf));
  return un_(op_nan_to_num, x, nan_to_num_attrs(x.dtype(), nan, posinf, neginf));
}

Tensor leaky_relu(const Tensor& x, double slope) { return un(op_leaky_relu, x, {Scalar(slope)}); }
Tensor elu(const Tensor& x, double alpha, double scale, double input_scale) {
  return un(op_elu, x, {Scalar(alpha), Scalar(scale), Scalar(input_scale)});
}
Tensor selu(const Tensor& x) {
  return elu(x, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1.0);
}
Tensor celu(const Tensor& x, double alpha) {
  KILN_CHECK(alpha != 0, Runtime, "celu", "ZeroDivisionError: alpha cannot be 0 for CELU, got alpha=", alpha);
  return elu(x, alpha, 1.0, 1.0 / alpha);
}
Tensor gelu(const Tensor& x, const std::string& approximate) {
  if (approximate == "none") return un(op_gelu, x);
  KILN_CHECK(approximate == "tanh", Runtime, "gelu", "approximate argument must be either none or tanh, got ",
             approximate);
  return un(op_gelu_tanh, x);
}
Tensor softplus(const Tensor& x, double beta, double thr) { return un(op_softplus, x, {Scalar(beta), Scalar(thr)}); }
Tensor hardtanh(const Tensor& x, double lo, double hi) {
  KILN_CHECK(!(is_unsigned(x.dtype()) && x.dtype() != kBool && (lo < 0 || hi < 0)), Runtime, "hardtanh",
             "cannot do hardtanh on an unsigned type with negative limits");
  return un(op_hardtanh, x, {Scalar(lo), Scalar(hi)});
}
// torch.nn.functional.softsign is this composite; rounding each step the same way matches it.
Tensor softsign(const Tensor& x) { return div(x, add(abs(x), Scalar(1))); }
Tensor threshold(const Tensor& x, double thr, double value) { return un(op_threshold, x, {Scalar(thr), Scalar(value)}); }
namespace {
bool reduced_float(Dtype d) { return d == kFloat16 || d == kBFloat16; }
}  // namespace
Tensor hardshrink(const Tensor& x, double lambd) {  // (NaN passes, as torch's)
  const Dtype d = x.dtype();
  if (!is_floating(d)) raise_dtype_unsupported("hardshrink", d);
  const double l = scalar_tensor(Scalar(lambd), d).item<double>();  // torch's: lambd in x's dtype
  return where(logical_and(ge(x, Scalar(-l)), le(x, Scalar(l))), zeros_like(x), x);
}
Tensor softshrink(const Tensor& x, double lambd) {  // (inside: x * 0, which keeps x's sign and a NaN, as torch's)
  const Dtype d = x.dtype();
  if (!is_floating(d)) raise_dtype_unsupported("softshrink", d);
  const double max = -finfo_min(d);
  KILN_CHECK(lambd >= 0 && lambd <= max, Runtime, "softshrink", "lambda must be in range [0, ", max,
             "] for input dtype ", dtype_name(d), ", but found ", lambd);
  if (reduced_float(d)) return to_dtype(softshrink(to_dtype(x, kFloat32), lambd), d);  // (rounded once, as torch's)
  return where(gt(abs(x), Scalar(lambd)), sub(x, mul(sign(x), Scalar(lambd))), mul(x, Scalar(0)));
}
Tensor tanhshrink(const Tensor& x) { return sub(x, tanh(x)); }
namespace {
Tensor angle_scale(const char* op, const Tensor& x, double factor) {
  KILN_CHECK(!is_complex(x.dtype()), Runtime, op, op, " is not supported for complex tensors.");
  const Tensor f = is_integral(x.dtype(), true) ? to_dtype(x, default_dtype()) : x;
  return mul(f, Scalar(factor));
}
Dtype float_power_dtype(Dtype a, Dtype b) { return is_complex(a) || is_complex(b) ? kComplex128 : kFloat64; }
}  // namespace
Tensor deg2rad(const Tensor& x) { return angle_scale("deg2rad", x, M_PI / 180.0); }
Tensor rad2deg(const Tensor& x) { return angle_scale("rad2deg", x, 180.0 / M_PI); }
Tensor float_power(const Tensor& x, const Tensor& e) {
  const Dtype d = float_power_dtype(x.dtype(), e.dtype());
  return pow(to_dtype(x, d), to_dtype(e, d));
}
Tensor float_power(const Tensor& x, const Scalar& e) {
  const Dtype d = float_power_dtype(x.dtype(), e.is_complex() ? kComplex128 : kFloat64);
  return pow(to_dtype(x, d), e);
}
Tensor float_power(const Scalar& x, const Tensor& e) {
  const Dtype d = float_power_dtype(x.is_complex() ? kComplex128 : kFloat64, e.dtype());
  return pow(scalar_tensor(x, d), to_dtype(e, d));
}
Tensor ldexp(const Tensor& x, const Tensor& other) {  // x * 2^other in the promoted dtype (integral: the default)
  Dtype d = result_type(x, other);
  if (is_integral(d, true)) d = default_dtype();
  return mul(to_dtype(x, d), pow(scalar_tensor(Scalar(2.0), d), to_dtype(other, d)));
}
std::tuple<Tensor, Tensor> frexp(const Tensor& x) {
  KILN_CHECK(is_floating(x.dtype()) && !is_float8(x.dtype()), Runtime, "frexp",
             "torch.frexp() only supports floating-point dtypes");
  // in float64, where every power of two that scales a float32 / float64 value is held in two steps
  const Tensor xd = to_dtype(x, kFloat64);
  const Tensor regular = logical_and(isfinite(xd), ne(xd, Scalar(0)));
  const Tensor a = where(regular, abs(xd), ones_like(xd));
  Tensor e = add(floor(log2(a)), Scalar(1));  // (log2 may be one off near a power of two: fixed below)
  const Tensor h = floor(mul(neg(e), Scalar(0.5)));
  Tensor m = mul(mul(where(regular, xd, ones_like(xd)), exp2(h)), exp2(sub(neg(e), h)));
  const Tensor low = lt(abs(m), Scalar(0.5)), high = ge(abs(m), Scalar(1));
  m = where(low, mul(m, Scalar(2)), where(high, mul(m, Scalar(0.5)), m));
  e = where(low, sub(e, Scalar(1)), where(high, add(e, Scalar(1)), e));
  return {to_dtype(where(regular, m, xd), x.dtype()), to_dtype(where(regular, e, zeros_like(e)), kInt32)};
}
Tensor isreal(const Tensor& x) {
  if (!is_complex(x.dtype())) return ones_like(x, kBool);
  return eq(imag(x), Scalar(0));
}
Tensor dist(const Tensor& x, const Tensor& y, const Scalar& p) { return vector_norm(sub(x, y), p.to_double()); }
Tensor renorm(const Tensor& x, const Scalar& p, int64_t dim, const Scalar& maxnorm) {
  const char* op = "renorm";
  const double pv = p.to_double(), mx = maxnorm.to_double();
  KILN_CHECK(pv > 0, Runtime, op, "renorm: non-positive-norm not supported");
  KILN_CHECK(mx >= 0, Runtime, op, "renorm: expected maxnorm to be >= 0 but got ", mx);
  KILN_CHECK(x.dim() > 1, Runtime, op, "renorm: input needs at least 2 dimensions, got ", x.dim(), " dimensions");
  const int64_t d = wrap_dim(dim, x.dim(), op);
  Shape others;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != d) others.push_back(i);
  // torch's factor: maxnorm / (norm + 1e-7) where the norm exceeds maxnorm, computed without gradient
  // through the comparison
  // the norms in torch's accumulation type (float64 for float32 on the CPU, float32 for the half types;
  // complex: its real type's); an integral x raises in vector_norm, as torch's
  const Dtype xd = x.dtype();
  const Dtype acc = xd == kFloat32 || xd == kFloat64 ? kFloat64 : xd == kComplex64 || xd == kComplex128 ? kComplex128
                    : is_floating(xd) ? kFloat32 : xd;
  const Tensor norm = vector_norm(to_dtype(x, acc), pv, others, true);
  const Tensor factor = where(gt(norm, Scalar(mx)), div(scalar_tensor(Scalar(mx), norm.dtype()),
                                                         add(norm, Scalar(1e-7))), ones_like(norm));
  return mul(x, to_dtype(factor, is_complex(xd) ? to_real(xd) : xd));
}
Tensor glu(const Tensor& x, int64_t dim) {
  const char* op = "glu";
  if (!is_floating(x.dtype())) raise_dtype_unsupported(op, x.dtype());
  KILN_CHECK(x.dim() > 0, Runtime, op, "glu does not support scalars because halving size must be even");
  const int64_t d = wrap_dim(dim, x.dim(), op), n = x.size(d);
  KILN_CHECK(n % 2 == 0, Runtime, op, "Halving dimension must be even, but dimension ", d, " is size ", n);
  if (reduced_float(x.dtype())) return to_dtype(glu(to_dtype(x, kFloat32), d), x.dtype());  // (rounded once)
  return mul(narrow(x, d, 0, n / 2), sigmoid(narrow(x, d, n / 2, n / 2)));
}

Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) { return dispatch1(op_where, {c, a, b}); }

const Tensor& copy_(const Tensor& dst, const Tensor& src) {
  dispatch(op_copy_, {dst, src});
  return dst;
}

Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& w) {
  // torch's formula: weight < 0.5 ? a + w * (b - a) : b - (b - a) * (1 - w)
  Tensor diff = sub(b, a);
  return where(lt(abs(w), Scalar(0.5)), add(a, mul(w, diff)), sub(b, mul(diff, rsub(w, Scalar(1.0)))));
}
Tensor lerp(const Tensor& a, const Tensor& b, const Scalar& w) {
  return lerp(a, b, scalar_tensor(w, a.dtype()));
}
Tensor rsub(const Tensor& x, const Scalar& s, const Scalar& alpha) { return sub(wrap(s), x, alpha); }
Tensor rsub(const Tensor& a, const Tensor& b, const Scalar& alpha) { return sub(b, a, alpha); }

Tensor addcmul(const Tensor& x, const Tensor& a, const Tensor& b, const Scalar& v) {
  return add(x, mul(mul(a, b), v));
}
Tensor addcdiv(const Tensor& x, const Tensor& a, const Tensor& b, const Scalar& v) {
  KILN_CHECK(!(is_integral(a.dtype(), true) && is_integral(b.dtype(), true)), Runtime, "addcdiv",
             "Integer division with addcdiv is no longer supported, and in a future release addcdiv "
             "will perform a true division of tensor1 and tensor2.");
  return add(x, mul(div(a, b), v));
}

Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  KILN_CHECK(a.dtype() == b.dtype(), Runtime, "isclose", a.dtype(), " did not match ", b.dtype());
  Tensor close = eq(a, b);
  if (is_integral(a.dtype(), true) && !(rtol == 0 && atol == 0)) {
    Tensor da = to_dtype(a, kFloat64), db = to_dtype(b, kFloat64);
    return logical_or(close, le(abs(sub(da, db)), add(mul(abs(db), Scalar(rtol)), Scalar(atol))));
  }
  if (!is_floating(a.dtype()) && !is_complex(a.dtype())) return close;
  if (equal_nan) close = logical_or(close, logical_and(isnan(a), isnan(b)));
  Tensor tol = add(mul(abs(b), Scalar(rtol)), Scalar(atol));
  Tensor diff = abs(sub(a, b));
  Tensor finite_close = logical_and(isfinite(diff), le(diff, tol));
  return logical_or(close, finite_close);
}
bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  return all(isclose(a, b, rtol, atol, equal_nan)).item<bool>();
}
bool equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  return all(eq(a, b)).item<bool>();
}
Tensor polar(const Tensor& abs_, const Tensor& angle) { return dispatch1(op_polar, {abs_, angle}); }
Tensor complex(const Tensor& re, const Tensor& im) { return dispatch1(op_complex, {re, im}); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return true_divide(a, b); }
Tensor Tensor::operator-() const { return neg(*this); }


// ---- composites with torch's schemas (ops/composite.h): their public forms come from these -------
namespace {
const Scalar& sc(const Attrs& a, size_t i) { return attr<Scalar>(a, i); }
double dbl(const Attrs& a, size_t i) { return attr<Scalar>(a, i).to_double(); }
std::string mode_of(const Attrs& a, size_t i) { return opt_attr<std::string>(a, i).value_or(""); }

Composite c_div{"div.Tensor(Tensor self, Tensor other) -> Tensor",
                [](const TensorList& in, const Attrs&) -> TensorList { return {true_divide(in[0], in[1])}; },
                kAllVariants, 0b11,
                [](const TensorList& in, const Attrs&) -> TensorList { return {true_divide_(in[0], in[1])}; }};
Composite c_div_mode{
    "div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor",
    [](const TensorList& in, const Attrs& a) -> TensorList { return {div(in[0], in[1], mode_of(a, 0))}; },
    kAllVariants, 0b11,
    [](const TensorList& in, const Attrs& a) -> TensorList { return {div_(in[0], in[1], mode_of(a, 0))}; }};
Composite c_rsub{"rsub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
                 [](const TensorList& in, const Attrs& a) -> TensorList { return {rsub(in[0], in[1], sc(a, 0))}; },
                 kFunctionVariant, 0b11};
Composite c_logit{"logit(Tensor self, float? eps=None) -> Tensor",
                  [](const TensorList& in, const Attrs& a) -> TensorList { return {logit(in[0], opt_attr<double>(a, 0))}; },
                  kAllVariants};
// clamp and its alias clip: the Tensor bounds first (a 0-dim tensor would also pass as a Scalar)
TensorList clamp_t(const TensorList& in, const Attrs&) { return {clamp(in[0], in[1], in[2])}; }
TensorList clamp_s(const TensorList& in, const Attrs& a) {
  return {clamp(in[0], opt_attr<Scalar>(a, 0), opt_attr<Scalar>(a, 1))};
}
TensorList clamp_s_(const TensorList& in, const Attrs& a) {
  return {clamp_(in[0], opt_attr<Scalar>(a, 0), opt_attr<Scalar>(a, 1))};
}
Composite c_clamp_t{"clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor", clamp_t, kAllVariants};
Composite c_clamp{"clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", clamp_s, kAllVariants, 0, clamp_s_};
Composite c_clip_t{"clip.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor", clamp_t, kAllVariants};
Composite c_clip{"clip(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", clamp_s, kAllVariants, 0, clamp_s_};
Composite c_nan_to_num{"nan_to_num(Tensor self, float? nan=None, float? posinf=None, float? neginf=None) -> Tensor",
                       [](const TensorList& in, const Attrs& a) -> TensorList {
                         return {nan_to_num(in[0], opt_attr<double>(a, 0), opt_attr<double>(a, 1), opt_attr<double>(a, 2))};
                       },
                       kAllVariants, 0,
                       [](const TensorList& in, const Attrs& a) -> TensorList {
                         return {nan_to_num_(in[0], opt_attr<double>(a, 0), opt_attr<double>(a, 1), opt_attr<double>(a, 2))};
                       }};
// torch refuses an out= of another dtype than the result's for the Scalar-bound clamp and nan_to_num
// (clamp with Tensor bounds casts into it)
CompositeTags t_clamp{c_clamp, kOutExactDtype}, t_clip{c_clip, kOutExactDtype};
CompositeTags t_nan_to_num{c_nan_to_num, kOutExactDtype};
// The activations torch also has as kiln.<name> functions (torch.nn.functional's Python layer adds inplace=).
Composite c_leaky_relu{"leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor",
                       [](const TensorList& in, const Attrs& a) -> TensorList { return {leaky_relu(in[0], dbl(a, 0))}; },
                       kFunctionVariant};
Composite c_elu{"elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor",
                [](const TensorList& in, const Attrs& a) -> TensorList {
                  return {elu(in[0], dbl(a, 0), dbl(a, 1), dbl(a, 2))};
                },
                kFunctionVariant};
Composite c_selu{"selu(Tensor self) -> Tensor",
                 [](const TensorList& in, const Attrs&) -> TensorList { return {selu(in[0])}; }, kFunctionVariant};
Composite c_celu{"celu(Tensor self, Scalar alpha=1.0) -> Tensor",
                 [](const TensorList& in, const Attrs& a) -> TensorList { return {celu(in[0], dbl(a, 0))}; },
                 kFunctionVariant};
Composite c_softsign{"softsign(Tensor self) -> Tensor",
                     [](const TensorList& in, const Attrs&) -> TensorList { return {softsign(in[0])}; }, kFunctionVariant};
Composite c_gelu{"gelu(Tensor self, str approximate=\"none\") -> Tensor",
                 [](const TensorList& in, const Attrs& a) -> TensorList { return {gelu(in[0], attr<std::string>(a, 0))}; },
                 kFunctionVariant};
Composite c_softplus{"softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor",
                     [](const TensorList& in, const Attrs& a) -> TensorList {
                       return {softplus(in[0], dbl(a, 0), dbl(a, 1))};
                     },
                     kFunctionVariant};
Composite c_hardtanh{"hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor",
                     [](const TensorList& in, const Attrs& a) -> TensorList {
                       return {hardtanh(in[0], dbl(a, 0), dbl(a, 1))};
                     },
                     kFunctionVariant};
Composite c_threshold{"threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor",
                      [](const TensorList& in, const Attrs& a) -> TensorList {
                        return {threshold(in[0], dbl(a, 0), dbl(a, 1))};
                      },
                      kFunctionVariant};
Composite c_deg2rad{"deg2rad(Tensor self) -> Tensor",
                    [](const TensorList& in, const Attrs&) -> TensorList { return {deg2rad(in[0])}; }, kAllVariants};
Composite c_rad2deg{"rad2deg(Tensor self) -> Tensor",
                    [](const TensorList& in, const Attrs&) -> TensorList { return {rad2deg(in[0])}; }, kAllVariants};
// float_power_: self must already hold the float64 (complex128) result, as torch's
TensorList float_power_inplace(const Tensor& self, const Tensor& r) {
  KILN_CHECK(self.dtype() == r.dtype(), Runtime, "float_power_", "the base given to float_power_ has dtype ",
             dtype_name(self.dtype()), " but the operation's result requires dtype ", dtype_name(r.dtype()));
  return {copy_(self, r)};
}
Composite c_float_power_tt{"float_power.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor",
                           [](const TensorList& in, const Attrs&) -> TensorList { return {float_power(in[0], in[1])}; },
                           kAllVariants, 0,
                           [](const TensorList& in, const Attrs&) -> TensorList {
                             return float_power_inplace(in[0], float_power(in[0], in[1]));
                           }};
Composite c_float_power_ts{"float_power.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor",
                           [](const TensorList& in, const Attrs& a) -> TensorList {
                             return {float_power(in[0], sc(a, 0))};
                           },
                           kAllVariants, 0,
                           [](const TensorList& in, const Attrs& a) -> TensorList {
                             return float_power_inplace(in[0], float_power(in[0], sc(a, 0)));
                           }};
Composite c_float_power_st{"float_power.Scalar(Scalar self, Tensor exponent) -> Tensor",
                           [](const TensorList& in, const Attrs& a) -> TensorList {
                             return {float_power(sc(a, 0), in[0])};
                           },
                           kFunctionVariant};
Composite c_ldexp{"ldexp.Tensor(Tensor self, Tensor other) -> Tensor",
                  [](const TensorList& in, const Attrs&) -> TensorList { return {ldexp(in[0], in[1])}; }, kAllVariants};
Composite c_frexp{"frexp.Tensor(Tensor self) -> (Tensor mantissa, Tensor exponent)",
                  [](const TensorList& in, const Attrs&) -> TensorList {
                    auto [m, e] = frexp(in[0]);
                    return {m, e};
                  },
                  kFunctionAndMethod};
Composite c_isreal{"isreal(Tensor self) -> Tensor",
                   [](const TensorList& in, const Attrs&) -> TensorList { return {isreal(in[0])}; }, kFunctionVariant};
Composite c_dist{"dist(Tensor self, Tensor other, Scalar p=2) -> Tensor",
                 [](const TensorList& in, const Attrs& a) -> TensorList { return {dist(in[0], in[1], sc(a, 0))}; },
                 kFunctionAndMethod};
Composite c_renorm{"renorm(Tensor self, Scalar p, int dim, Scalar maxnorm) -> Tensor",
                   [](const TensorList& in, const Attrs& a) -> TensorList {
                     return {renorm(in[0], sc(a, 0), attr<int64_t>(a, 1), sc(a, 2))};
                   },
                   kAllVariants};
Composite c_positive{"positive(Tensor(a) self) -> Tensor(a)",
                     [](const TensorList& in, const Attrs&) -> TensorList {
                       KILN_CHECK(in[0].dtype() != kBool, Runtime, "positive",
                                  "The `+` operator, on a bool tensor is not supported.");
                       return {in[0]};
                     },
                     kFunctionAndMethod};
Composite c_hardshrink{"hardshrink(Tensor self, Scalar lambd=0.5) -> Tensor",
                       [](const TensorList& in, const Attrs& a) -> TensorList { return {hardshrink(in[0], dbl(a, 0))}; },
                       kFunctionAndMethod};
Composite c_softshrink{"softshrink(Tensor self, Scalar lambd=0.5) -> Tensor",
                       [](const TensorList& in, const Attrs& a) -> TensorList { return {softshrink(in[0], dbl(a, 0))}; },
                       kFunctionVariant};
Composite c_tanhshrink{"tanhshrink(Tensor self) -> Tensor",
                       [](const TensorList& in, const Attrs&) -> TensorList { return {tanhshrink(in[0])}; },
                       kFunctionVariant};
Composite c_glu{"glu(Tensor self, int dim=-1) -> Tensor",
                [](const TensorList& in, const Attrs& a) -> TensorList { return {glu(in[0], attr<int64_t>(a, 0))}; },
                kFunctionVariant};
CompositeTags t_leaky_relu{c_leaky_relu, kOutExactDtype}, t_elu{c_elu, kOutExactDtype}, t_gelu{c_gelu, kOutExactDtype};
CompositeTags t_softplus{c_softplus, kOutExactDtype}, t_hardtanh{c_hardtanh, kOutExactDtype};
// lerp: the Tensor weight first (a 0-dim tensor would also pass as a Scalar)
Composite c_lerp_t{"lerp.Tensor(Tensor self, Tensor end, Tensor weight) -> Tensor",
                   [](const TensorList& in, const Attrs&) -> TensorList { return {lerp(in[0], in[1], in[2])}; },
                   kAllVariants};
Composite c_lerp_s{"lerp.Scalar(Tensor self, Tensor end, Scalar weight) -> Tensor",
                   [](const TensorList& in, const Attrs& a) -> TensorList { return {lerp(in[0], in[1], sc(a, 0))}; },
                   kAllVariants};
Composite c_addcmul{"addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
                    [](const TensorList& in, const Attrs& a) -> TensorList {
                      return {addcmul(in[0], in[1], in[2], sc(a, 0))};
                    },
                    kAllVariants};
Composite c_addcdiv{"addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
                    [](const TensorList& in, const Attrs& a) -> TensorList {
                      return {addcdiv(in[0], in[1], in[2], sc(a, 0))};
                    },
                    kAllVariants};
Composite c_isclose{"isclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False) -> Tensor",
                    [](const TensorList& in, const Attrs& a) -> TensorList {
                      return {isclose(in[0], in[1], attr<double>(a, 0), attr<double>(a, 1), attr<bool>(a, 2))};
                    },
                    kFunctionAndMethod};
// allclose and equal answer a Python bool (a 0-dim bool tensor here; the binding unwraps it)
Composite c_allclose{"allclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False) -> bool",
                     [](const TensorList& in, const Attrs& a) -> TensorList {
                       return {scalar_tensor(Scalar(allclose(in[0], in[1], attr<double>(a, 0), attr<double>(a, 1),
                                                             attr<bool>(a, 2))), kBool)};
                     },
                     kFunctionAndMethod};
Composite c_equal{"equal(Tensor self, Tensor other) -> bool",
                  [](const TensorList& in, const Attrs&) -> TensorList {
                    return {scalar_tensor(Scalar(equal(in[0], in[1])), kBool)};
                  },
                  kFunctionAndMethod};
// where(condition, input, other) and where(condition): the method (input.where(condition, other))
// has self second, so it stays a binding of its own
Composite c_where{"where.self(Tensor condition, Tensor self, Tensor other) -> Tensor",
                  [](const TensorList& in, const Attrs&) -> TensorList { return {where(in[0], in[1], in[2])}; },
                  kFunctionVariant, 0b110};
CompositeTags t_where{c_where, kOutExactDtype};
Composite c_where_cond{"where(Tensor condition) -> Tensor[]",
                       [](const TensorList& in, const Attrs&) -> TensorList {
                         // a 0-dim condition counts as one element of a 1-d one (torch's nonzero(as_tuple))
                         Tensor n = nonzero(in[0].dim() == 0 ? reshape(in[0], {1}) : in[0]);
                         TensorList r;
                         for (int64_t d = 0; d < n.size(1); ++d) r.push_back(contiguous(select(n, 1, d)));
                         return r;
                       },
                       kFunctionVariant};
}  // namespace

}  // namespace kiln
