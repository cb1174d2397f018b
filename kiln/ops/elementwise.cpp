// Elementwise ops: the unary and binary lists (unary_list.h), parametrised activations, where,
// clamp and the composites built from them.
#include <cmath>
#include <cstring>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

using cpu::BinaryOp;
using cpu::KParams;
using cpu::UnaryOp;

enum class Rule : int { Float, Same, Bool, Real, Round, Int };
constexpr int pack(int code, Rule r) { return code | (static_cast<int>(r) << 16); }
int code_of(const OpDef& op) { return op.code & 0xffff; }
Rule rule_of(const OpDef& op) { return static_cast<Rule>(op.code >> 16); }

Dtype floatify(Dtype d) { return is_integral(d, true) ? default_dtype() : d; }

// ---- unary ----------------------------------------------------------------------------------------

Dtype unary_compute_dtype(const OpDef& op, Dtype in) {
  UnaryOp code = static_cast<UnaryOp>(code_of(op));
  Rule r = rule_of(op);
  if (r == Rule::Float) return floatify(in);
  if (code == UnaryOp::Square && in == kBool) return kInt64;
  return in;
}

SpecList unary_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  const TensorSpec& x = in[0];
  Dtype d = x.dtype();
  UnaryOp code = static_cast<UnaryOp>(code_of(op));
  KILN_CHECK(!(code == UnaryOp::Neg && d == kBool), Runtime, op.name,
             "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
             "invert a mask, use the `~` or `logical_not()` operator instead.");
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

KParams unary_params(UnaryOp code, const Attrs& a) {
  KParams p;
  for (size_t i = 0; i < a.size() && i < 4; ++i) {
    if (auto* s = std::get_if<Scalar>(&a[i])) {
      p.d[i] = s->to_double();
      p.i[i] = s->is_floating() ? static_cast<int64_t>(std::floor(s->to_double())) : s->to_int();
    } else if (auto* d = std::get_if<double>(&a[i])) {
      p.d[i] = *d;
    } else if (auto* n = std::get_if<int64_t>(&a[i])) {
      p.i[i] = *n;
      p.d[i] = static_cast<double>(*n);
    }
  }
  if (code == UnaryOp::Logit) p.i[0] = !a.empty() && !std::holds_alternative<std::monostate>(a[0]);
  if (code == UnaryOp::ClampMin || code == UnaryOp::Clamp) {
    // integer clamp with a float bound: bounds are cast like torch (ceil for min, floor for max)
    if (auto* s = std::get_if<Scalar>(&a[0])) p.i[0] = s->to_int();
  }
  if (code == UnaryOp::Clamp && a.size() > 1)
    if (auto* s = std::get_if<Scalar>(&a[1])) p.i[1] = s->to_int();
  if (code == UnaryOp::ClampMax && !a.empty())  // clamp_max(self, max): the kernel reads the upper bound
    if (auto* s = std::get_if<Scalar>(&a[0])) p.d[1] = s->to_double(), p.i[1] = s->to_int();
  return p;
}

void unary_kernel(const OpDef& op, const TensorList& in, const Attrs& attrs, TensorList& out) {
  Tensor x = in[0];
  Tensor& y = out[0];
  UnaryOp code = static_cast<UnaryOp>(code_of(op));
  Dtype ct = unary_compute_dtype(op, x.dtype());
  if (rule_of(op) == Rule::Round && is_integral(ct, true)) {
    if (ct == kBool) raise_dtype_unsupported(op.name, ct);
    copy_(y, x);
    return;
  }
  if (code == UnaryOp::Conj && !is_complex(ct)) {  // conj of a real tensor is a copy
    copy_(y, x);
    return;
  }
  if (x.dtype() != ct) x = to_dtype(x, ct);
  cpu::InnerLoop fn = cpu::cpu_kernels().unary[static_cast<int>(code)][static_cast<int>(ct)];
  if (!fn) raise_dtype_unsupported(op.name, ct);
  KParams p = unary_params(code, attrs);
  cpu::run_elementwise({&y, &x}, y.sizes(), fn, &p);
}

// ---- binary ---------------------------------------------------------------------------------------

template <class T>  // Tensor (the kernel's callers) or TensorSpec (meta)
Dtype binary_compute_dtype(const OpDef& op, const T& a, const T& b) {
  Dtype p = result_type(a, b);
  BinaryOp code = static_cast<BinaryOp>(code_of(op));
  switch (rule_of(op)) {
    case Rule::Float: return floatify(p);
    case Rule::Int:
      KILN_CHECK(is_integral(p, true), Runtime, op.name, "not implemented for dtype ", dtype_name(p),
                 " (bitwise ops need integral or bool tensors)");
      return p;
    default: break;
  }
  if (code == BinaryOp::Sub && a.dtype() == kBool && b.dtype() == kBool)
    KILN_FAIL(Runtime, op.name, "Subtraction, the `-` operator, with two bool tensors is not "
              "supported. Use the `^` or `logical_xor()` operator instead.");
  if (code == BinaryOp::Sub && (a.dtype() == kBool || b.dtype() == kBool))
    KILN_FAIL(Runtime, op.name, "Subtraction, the `-` operator, with a bool tensor is not supported. "
              "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
  return p;
}

SpecList binary_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  const TensorSpec& a = in[0];
  const TensorSpec& b = in[1];
  SymShape shape = broadcast_shapes(a.sizes(), b.sizes(), op.name);
  Dtype ct = binary_compute_dtype(op, a, b);
  BinaryOp code = static_cast<BinaryOp>(code_of(op));
  Dtype out = rule_of(op) == Rule::Bool ? kBool : ct;
  if (code == BinaryOp::Polar || code == BinaryOp::Complex) out = to_complex(ct);
  SpecList r(1);
  r[0].sizes_ = std::move(shape);
  r[0].dtype_ = out;
  return r;
}

bool any_zero(const Tensor& t) {
  return any(eq(t, Scalar(0))).item<bool>();
}

// pow with a Python-number exponent: torch's special cases (copy, fill, square, cube, sqrt,
// reciprocals) computed as the same ops torch runs, so every rounding step matches.
bool pow_scalar_fast_path(const Tensor& a, const Tensor& b, Dtype ct, Tensor& y) {
  if (!b.is_wrapped_number() || b.is_complex()) return false;
  double e = b.item<double>();
  if (e == 1.0) {
    copy_(y, a);
    return true;
  }
  if (e == 0.0) {
    fill_(y, Scalar(1));
    return true;
  }
  if (!is_floating(ct) && !is_complex(ct)) return false;
  // torch 2.13 rounds float16 once (computed in float) but bfloat16 after every step
  Tensor x = to_dtype(a, ct == kFloat16 ? kFloat32 : ct), r;
  if (e == 2.0) r = mul(x, x);
  else if (e == 3.0) r = mul(mul(x, x), x);
  else if (e == 0.5) r = sqrt(x);
  else if (e == -0.5) r = rsqrt(x);
  else if (e == -1.0) r = reciprocal(x);
  else if (e == -2.0) r = reciprocal(mul(x, x));
  else return false;
  copy_(y, r);
  return true;
}

void check_pow_args(const OpDef& op, const Tensor& a, const Tensor& b, Dtype ct) {
  if (!is_integral(ct, true)) return;
  if (b.is_wrapped_number() && !b.is_floating_point() && !b.is_complex()) {
    int64_t e = b.item<int64_t>();
    KILN_CHECK(e >= 0, Runtime, op.name, "Integers to negative integer powers are not allowed.");
    bool fits = visit_integral(ct, op.name, [&]<class T>() {
      return e <= static_cast<int64_t>(std::numeric_limits<T>::max());
    });
    KILN_CHECK(fits, Runtime, op.name, "value cannot be converted to type ", dtype_name(ct), " without overflow");
  }
  if (ct == kBool && !b.is_wrapped_number()) raise_dtype_unsupported(op.name, ct);
  (void)a;
}

void binary_kernel(const OpDef& op, const TensorList& in, const Attrs& attrs, TensorList& out) {
  const Tensor* pa = &in[0];
  const Tensor* pb = &in[1];
  Tensor& y = out[0];
  BinaryOp code = static_cast<BinaryOp>(code_of(op));
  // the output has meta's dtype, which is the compute dtype but for comparisons and complex results
  Dtype ct = rule_of(op) == Rule::Bool || code == BinaryOp::Polar || code == BinaryOp::Complex
                 ? binary_compute_dtype(op, *pa, *pb)
                 : y.dtype();
  const Tensor& a0 = *pa;
  const Tensor& b0 = *pb;
  if (is_float8(ct) && rule_of(op) != Rule::Bool && (a0.dtype() != ct || b0.dtype() != ct))
    raise_dtype_unsupported(op.name, ct);
  if (code == BinaryOp::Pow) {
    check_pow_args(op, a0, b0, ct);
    if (pow_scalar_fast_path(a0, b0, ct, y)) return;
  }
  Tensor ca, cb;  // operands converted to the compute dtype, where they differ
  if (a0.dtype() != ct) ca = to_dtype(a0, ct), pa = &ca;
  if (b0.dtype() != ct) cb = to_dtype(b0, ct), pb = &cb;
  const Tensor& a = *pa;
  const Tensor& b = *pb;
  if (is_integral(ct, false) && (code == BinaryOp::DivTrunc || code == BinaryOp::DivFloor ||
                                 code == BinaryOp::Remainder || code == BinaryOp::Fmod))
    KILN_CHECK(!any_zero(b), Runtime, op.name, "ZeroDivisionError");
  cpu::InnerLoop fn = cpu::cpu_kernels().binary[static_cast<int>(code)][static_cast<int>(ct)];
  if (!fn) raise_dtype_unsupported(op.name, ct);
  KParams p;
  p.d[0] = 1;
  p.i[0] = 1;
  if (!attrs.empty()) {
    const Scalar& alpha = std::get<Scalar>(attrs[0]);
    p.d[0] = alpha.to_double();
    p.i[0] = alpha.to_int();
    p.c_im[0] = alpha.to_complex().imag();
  }
  cpu::run_elementwise({&y, &a, &b}, y.sizes(), fn, &p);
}

#define KILN_DEF_UNARY(name, code, rule)                                                          \
  OpDef op_##name{#name, kPointwise | kInplaceable, unary_meta, {unary_kernel, nullptr},          \
                  pack(static_cast<int>(UnaryOp::code), Rule::rule)};                            \
  OpRegistrar reg_##name{op_##name, #name "(Tensor self) -> Tensor"};
KILN_UNARY_OPS(KILN_DEF_UNARY)
#undef KILN_DEF_UNARY

#define KILN_DEF_BINARY_S(name, code, rule, schema)                                               \
  OpDef op_##name{#name, kPointwise | kInplaceable, binary_meta, {binary_kernel, nullptr},        \
                  pack(static_cast<int>(BinaryOp::code), Rule::rule)};                           \
  OpRegistrar reg_##name{op_##name, schema};
#define KILN_DEF_BINARY(name, code, rule, numbers) \
  KILN_DEF_BINARY_S(name, code, rule, #name "(Tensor self, Tensor other) -> Tensor")
KILN_BINARY_OPS(KILN_DEF_BINARY)
KILN_DEF_BINARY_S(add, Add, Same, "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
KILN_DEF_BINARY_S(sub, Sub, Same, "sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
KILN_DEF_BINARY(div_trunc, DivTrunc, Same, Any)
KILN_DEF_BINARY(clamp_min_tensor, ClampMinT, Same, Any)
KILN_DEF_BINARY(clamp_max_tensor, ClampMaxT, Same, Any)
KILN_DEF_BINARY(polar, Polar, Float, None)
KILN_DEF_BINARY(complex, Complex, Same, None)
// GELU's fused first derivative: grad_output * gelu'(self)
KILN_DEF_BINARY_S(gelu_backward, GeluBackward, Same, "gelu_backward(Tensor grad_output, Tensor self) -> Tensor")
KILN_DEF_BINARY_S(gelu_tanh_backward, GeluTanhBackward, Same,
                  "gelu_tanh_backward(Tensor grad_output, Tensor self) -> Tensor")
#undef KILN_DEF_BINARY
#undef KILN_DEF_BINARY_S

// Parametrised unary ops share the unary kernel; their attrs are Scalars or floats in KParams order.
#define KILN_DEF_PUNARY(name, code, rule, schema)                                                 \
  OpDef op_##name{#name, kPointwise | kInplaceable, unary_meta, {unary_kernel, nullptr},          \
                  pack(static_cast<int>(UnaryOp::code), Rule::rule)};                            \
  OpRegistrar reg_##name{op_##name, schema};
KILN_DEF_PUNARY(round_decimals, RoundDecimals, Same, "round.decimals(Tensor self, *, int decimals) -> Tensor")
KILN_DEF_PUNARY(round, Round, Round, "round(Tensor self) -> Tensor")
KILN_DEF_PUNARY(logit, Logit, Float, "logit(Tensor self, float? eps=None) -> Tensor")
KILN_DEF_PUNARY(clamp, Clamp, Same, "clamp(Tensor self, Scalar min, Scalar max) -> Tensor")
KILN_DEF_PUNARY(clamp_min, ClampMin, Same, "clamp_min(Tensor self, Scalar min) -> Tensor")
KILN_DEF_PUNARY(clamp_max, ClampMax, Same, "clamp_max(Tensor self, Scalar max) -> Tensor")
KILN_DEF_PUNARY(nan_to_num, NanToNum, Same, "nan_to_num(Tensor self, float nan, float posinf, float neginf) -> Tensor")
KILN_DEF_PUNARY(leaky_relu, LeakyRelu, Same, "leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor")
KILN_DEF_PUNARY(elu, Elu, Same, "elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor")
KILN_DEF_PUNARY(gelu, Gelu, Same, "gelu(Tensor self) -> Tensor")
KILN_DEF_PUNARY(gelu_tanh, GeluTanh, Same, "gelu_tanh(Tensor self) -> Tensor")
KILN_DEF_PUNARY(softplus, Softplus, Same, "softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor")
KILN_DEF_PUNARY(hardtanh, Hardtanh, Same, "hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor")
KILN_DEF_PUNARY(threshold, Threshold, Same, "threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor")
#undef KILN_DEF_PUNARY

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

void where_kernel(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  Tensor& y = out[0];
  Tensor c = in[0], a = in[1], b = in[2];
  if (a.dtype() != y.dtype()) a = to_dtype(a, y.dtype());
  if (b.dtype() != y.dtype()) b = to_dtype(b, y.dtype());
  size_t isz = y.itemsize();
  cpu::for_each(cpu::make_loop({&y, &c, &a, &b}, y.sizes()), [&](char** d, const int64_t* s, int64_t n) {
    char *o = d[0], *cp = d[1], *ap = d[2], *bp = d[3];
    for (int64_t i = 0; i < n; ++i, o += s[0], cp += s[1], ap += s[2], bp += s[3])
      std::memcpy(o, *reinterpret_cast<bool*>(cp) ? ap : bp, isz);
  });
}
OpDef op_where{"where", kPointwise, where_meta, {where_kernel, nullptr}};
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

static void check_alpha(const char* op, const Tensor& a, const Tensor& b, const Scalar& alpha) {
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

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  check_alpha("add", a, b, alpha);
  return dispatch1(op_add, {a, b}, {alpha});
}
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) { return add(a, wrap(b), alpha); }
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  check_alpha("sub", a, b, alpha);
  return dispatch1(op_sub, {a, b}, {alpha});
}
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) { return sub(a, wrap(b), alpha); }
const Tensor& add_(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  check_alpha("add_", a, b, alpha);
  return dispatch_inplace(op_add, a, {a, b}, {alpha});
}
const Tensor& sub_(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  check_alpha("sub_", a, b, alpha);
  return dispatch_inplace(op_sub, a, {a, b}, {alpha});
}
const Tensor& add_out(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  check_alpha("add", a, b, alpha);
  return dispatch_out(op_add, out, {a, b}, {alpha});
}

static const OpDef& div_op(const std::string& mode) {
  if (mode.empty()) return op_true_divide;
  if (mode == "trunc") return op_div_trunc;
  if (mode == "floor") return op_floor_divide;
  KILN_FAIL(Value, "div", "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
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

Tensor nan_to_num(const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  if (is_integral(x.dtype(), true)) return clone(x);
  double big = 0, small = 0;
  switch (x.dtype()) {
    case kFloat16: big = 65504.0; break;
    case kBFloat16: big = 3.3895313892515355e38; break;
    case kFloat32: big = 3.4028234663852886e38; break;
    default: big = 1.7976931348623157e308;
  }
  small = -big;
  return un(op_nan_to_num, x, {nan.value_or(0.0), posinf.value_or(big), neginf.value_or(small)});
}

Tensor leaky_relu(const Tensor& x, double slope) { return un(op_leaky_relu, x, {Scalar(slope)}); }
Tensor elu(const Tensor& x, double alpha, double scale, double input_scale) {
  return un(op_elu, x, {Scalar(alpha), Scalar(scale), Scalar(input_scale)});
}
Tensor selu(const Tensor& x) {
  return elu(x, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1.0);
}
Tensor celu(const Tensor& x, double alpha) { return elu(x, alpha, 1.0, 1.0 / alpha); }
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
Tensor polar(const Tensor& abs_, const Tensor& angle) {
  KILN_CHECK(abs_.dtype() == angle.dtype() && (abs_.dtype() == kFloat32 || abs_.dtype() == kFloat64),
             Runtime, "polar", "Expected both inputs to be Float or Double tensors but got ",
             dtype_name(abs_.dtype()), " and ", dtype_name(angle.dtype()));
  return dispatch1(op_polar, {abs_, angle});
}
Tensor complex(const Tensor& re, const Tensor& im) {
  KILN_CHECK(re.dtype() == im.dtype() && (re.dtype() == kFloat32 || re.dtype() == kFloat64), Runtime,
             "complex", "Expected both inputs to be Float or Double tensors but got ",
             dtype_name(re.dtype()), " and ", dtype_name(im.dtype()));
  return dispatch1(op_complex, {re, im});
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return true_divide(a, b); }
Tensor Tensor::operator-() const { return neg(*this); }

}  // namespace kiln
