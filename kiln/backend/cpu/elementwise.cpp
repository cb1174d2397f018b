// CPU kernels of the elementwise ops: the unary and binary lists (ops/unary_list.h), the
// parametrised activations and where; their entries, schemas, metas and front ends are in
// kiln/ops/elementwise.cpp. Registered by op name. No kernel here calls dispatch: operands in another
// dtype are converted into scratch buffers with the cast loop, and pow's special exponents run the
// mul / sqrt / reciprocal inner loops themselves (the same loops, so the same roundings, as the ops).
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/core/convert.h"
#include "kiln/core/visit.h"
#include "kiln/ops/elementwise_detail.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

using namespace elementwise_detail;
using cpu::KParams;

using cpu::cast_copy;
using cpu::converted;

// A bound as an integer: a float one truncated as x86 does (NaN and out of range: INT64_MIN; the
// integer kernels never see those, torch's clamp of an integer tensor by a float bound is a float op).
int64_t int_bound(const Scalar& s) { return s.is_floating() ? detail::f2i64(s.to_double()) : s.to_int(); }

KParams unary_params(UnaryOp code, const Attrs& a) {
  KParams p;
  for (size_t i = 0; i < a.size() && i < 4; ++i) {
    if (auto* s = std::get_if<Scalar>(&a[i])) {
      p.d[i] = s->to_double();
      p.i[i] = s->is_floating() ? detail::f2i64(std::floor(s->to_double())) : s->to_int();  // (NaN, 1e30: no UB)
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
    if (auto* s = std::get_if<Scalar>(&a[0])) p.i[0] = int_bound(*s);
  }
  if (code == UnaryOp::Clamp && a.size() > 1)
    if (auto* s = std::get_if<Scalar>(&a[1])) p.i[1] = int_bound(*s);
  if (code == UnaryOp::ClampMax && !a.empty())  // clamp_max(self, max): the kernel reads the upper bound
    if (auto* s = std::get_if<Scalar>(&a[0])) p.d[1] = s->to_double(), p.i[1] = int_bound(*s);
  return p;
}

void unary_kernel(const OpDef& op, const TensorList& in, const Attrs& attrs, TensorList& out) {
  Tensor x = in[0];
  Tensor& y = out[0];
  UnaryOp code = static_cast<UnaryOp>(code_of(op));
  Dtype ct = unary_compute_dtype(op, x.dtype());
  if (rule_of(op) == Rule::Round && is_integral(ct, true)) {
    if (ct == kBool) raise_dtype_unsupported(op.name, ct);
    cast_copy(y, x);
    return;
  }
  if (code == UnaryOp::Conj && !is_complex(ct)) {  // conj of a real tensor is a copy
    cast_copy(y, x);
    return;
  }
  if (x.dtype() != ct) x = converted(x, ct);
  cpu::InnerLoop fn = cpu::cpu_kernels().unary[static_cast<int>(code)][static_cast<int>(ct)];
  if (!fn) raise_dtype_unsupported(op.name, ct);
  KParams p = unary_params(code, attrs);
  cpu::run_elementwise({&y, &x}, y.sizes(), fn, &p);
}

bool any_zero(const Tensor& t) {  // integer divisors only
  std::atomic<bool> found{false};
  visit_integral(t.dtype(), "any_zero", [&]<class T>() {
    cpu::for_each(cpu::make_loop({&t}, t.sizes()), [&](char** d, const int64_t* s, int64_t n) {
      const char* p = d[0];
      for (int64_t i = 0; i < n; ++i, p += s[0])
        if (*reinterpret_cast<const T*>(p) == T(0)) found.store(true, std::memory_order_relaxed);
    });
  });
  return found.load();
}

// pow with a Python-number exponent: torch's special cases (copy, fill, square, cube, sqrt,
// reciprocals) computed as the same ops torch runs, so every rounding step matches.
bool pow_scalar_fast_path(const Tensor& a, const Tensor& b, Dtype ct, Tensor& y) {
  if (!b.is_wrapped_number() || b.is_complex()) return false;
  double e = b.item<double>();
  if (e == 1.0) {
    cast_copy(y, a);
    return true;
  }
  if (e == 0.0) {
    cpu::fill(y, Scalar(1));
    return true;
  }
  if (!is_floating(ct) && !is_complex(ct)) return false;
  // torch 2.13 rounds float16 once (computed in float) but bfloat16 after every step
  const Dtype wt = ct == kFloat16 ? kFloat32 : ct;
  Tensor x = a.dtype() == wt ? a : converted(a, wt), r;
  auto bin = [&](BinaryOp code, const Tensor& p, const Tensor& q) {  // the mul kernel, into a scratch buffer
    Tensor o = make_tensor(y.sizes(), wt);
    KParams k;
    k.d[0] = 1, k.i[0] = 1;
    cpu::run_elementwise({&o, &p, &q}, o.sizes(), cpu::cpu_kernels().binary[static_cast<int>(code)][static_cast<int>(wt)], &k);
    return o;
  };
  auto un = [&](UnaryOp code, const Tensor& p) {
    Tensor o = make_tensor(y.sizes(), wt);
    KParams k;
    cpu::run_elementwise({&o, &p}, o.sizes(), cpu::cpu_kernels().unary[static_cast<int>(code)][static_cast<int>(wt)], &k);
    return o;
  };
  if (e == 2.0) r = bin(BinaryOp::Mul, x, x);
  else if (e == 3.0) r = bin(BinaryOp::Mul, bin(BinaryOp::Mul, x, x), x);
  else if (e == 0.5) r = un(UnaryOp::Sqrt, x);
  else if (e == -0.5) r = un(UnaryOp::Rsqrt, x);
  else if (e == -1.0) r = un(UnaryOp::Reciprocal, x);
  else if (e == -2.0) r = un(UnaryOp::Reciprocal, bin(BinaryOp::Mul, x, x));
  else return false;
  cast_copy(y, r);
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

// torch multiplies and divides float16 / bfloat16 by a scalar second operand (a 0-dim tensor of
// another real dtype, or a Python number) reading the scalar in float32, its "opmath" type, from its
// own dtype, not rounded to the result dtype first (x * 0.1 is round(float(x) * 0.1f)); the scalar
// as the first operand, and the other ops, are rounded first, as here below. This runs the float32
// kernel on a float32 copy of a and rounds once.
bool mul_div_by_float_scalar(BinaryOp code, const Tensor& a, const Tensor& b, Dtype ct, const Attrs& attrs, Tensor& y) {
  if ((ct != kFloat16 && ct != kBFloat16) || (code != BinaryOp::Mul && code != BinaryOp::Div)) return false;
  if (b.dim() != 0 || b.dtype() == ct || b.is_complex() || y.dtype() != ct) return false;
  Tensor a32 = converted(a, kFloat32), b32 = converted(b, kFloat32), y32 = make_tensor(y.sizes(), kFloat32);
  KParams p;
  p.d[0] = attrs.empty() ? 1.0 : std::get<Scalar>(attrs[0]).to_double();
  p.i[0] = 1;
  cpu::run_elementwise({&y32, &a32, &b32}, y.sizes(),
                       cpu::cpu_kernels().binary[static_cast<int>(code)][static_cast<int>(kFloat32)], &p);
  cast_copy(y, y32);
  return true;
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
  if (mul_div_by_float_scalar(code, a0, b0, ct, attrs, y)) return;
  Tensor ca, cb;  // operands converted to the compute dtype, where they differ
  if (a0.dtype() != ct) ca = converted(a0, ct), pa = &ca;
  if (b0.dtype() != ct) cb = converted(b0, ct), pb = &cb;
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

void where_kernel(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  Tensor& y = out[0];
  Tensor c = in[0], a = in[1], b = in[2];
  if (a.dtype() != y.dtype()) a = converted(a, y.dtype());
  if (b.dtype() != y.dtype()) b = converted(b, y.dtype());
  size_t isz = y.itemsize();
  cpu::for_each(cpu::make_loop({&y, &c, &a, &b}, y.sizes()), [&](char** d, const int64_t* s, int64_t n) {
    char *o = d[0], *cp = d[1], *ap = d[2], *bp = d[3];
    for (int64_t i = 0; i < n; ++i, o += s[0], cp += s[1], ap += s[2], bp += s[3])
      std::memcpy(o, *reinterpret_cast<bool*>(cp) ? ap : bp, isz);
  });
}

// The compute dtypes the loops cover: the kernel table's slots (and the unary kernel's copies).
bool unary_supports(const OpDef& op, Dtype ct) {
  const UnaryOp code = static_cast<UnaryOp>(code_of(op));
  if (rule_of(op) == Rule::Round && is_integral(ct, true)) return ct != kBool;
  if (code == UnaryOp::Conj && !is_complex(ct)) return true;
  return cpu::cpu_kernels().unary[static_cast<int>(code)][static_cast<int>(ct)] != nullptr;
}
bool binary_supports(const OpDef& op, Dtype ct) {
  // pow with a Python-number exponent may take the fast path (a copy, a fill, a square) where no
  // loop exists: that depends on the exponent's value, which only the kernel sees
  if (static_cast<BinaryOp>(code_of(op)) == BinaryOp::Pow) return true;
  return cpu::cpu_kernels().binary[code_of(op)][static_cast<int>(ct)] != nullptr;
}

#define KILN_REG_UNARY(name, code, rule) \
  KernelRegistrar k_##name{#name, DeviceType::CPU, unary_kernel, unary_supports};
#define KILN_REG_UNARY_S(name, code, rule, schema) KILN_REG_UNARY(name, code, rule)
#define KILN_REG_BINARY(name, code, rule, numbers) \
  KernelRegistrar k_##name{#name, DeviceType::CPU, binary_kernel, binary_supports};
#define KILN_REG_BINARY_S(name, code, rule, schema) KILN_REG_BINARY(name, code, rule, _)
KILN_UNARY_OPS(KILN_REG_UNARY)
KILN_PUNARY_OPS(KILN_REG_UNARY_S)
KILN_BINARY_OPS(KILN_REG_BINARY)
KILN_BINARY_EXTRA_OPS(KILN_REG_BINARY_S)
#undef KILN_REG_UNARY
#undef KILN_REG_UNARY_S
#undef KILN_REG_BINARY
#undef KILN_REG_BINARY_S
KernelRegistrar k_where{"where", DeviceType::CPU, where_kernel};

}  // namespace
}  // namespace kiln
