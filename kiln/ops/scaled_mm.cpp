// torch._scaled_mm: float8 x float8 matrix products with tensor-wise or row-wise float32 scales, as
// torch 2.13 defines them on the CPU (argument checks, errors, output dtype, bias, scale_result), plus
// what torch lacks there: a derivative for both scalings (the kernel: backend/cpu/scaled_mm.cpp).
//
//   out = round_to(out_dtype, ((A @ B) * scale_a[i] * scale_b[j] + bias[j]) * (1 / scale_result))
//
// A @ B is summed in float32 from the float8 bytes (one byte read per element, no float32 copy of
// either operand); scale_result applies only when out_dtype names a float8 dtype explicitly (torch
// ignores it for out_dtype=None).
#include "kiln/ops/composite.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

// c10's ScalarType names, which torch's scaled_mm messages print.
std::string_view c10_name(Dtype d) {
  switch (d) {
    case kFloat32: return "Float";
    case kFloat64: return "Double";
    case kFloat16: return "Half";
    case kBFloat16: return "BFloat16";
    case kFloat8_e4m3fn: return "Float8_e4m3fn";
    case kFloat8_e5m2: return "Float8_e5m2";
    case kInt32: return "Int";
    case kInt64: return "Long";
    default: return dtype_name(d);
  }
}

bool singleton(const TensorSpec& s) { return bool(s.numel() == 1); }

// attrs {out_dtype, use_fast_accum}; inputs {self, mat2, scale_a, scale_b, bias?, scale_result?}
SpecList scaled_mm_meta(const OpDef& op, const SpecList& in, const Attrs& attrs) {
  const TensorSpec &a = in[0], &b = in[1], &sa = in[2], &sb = in[3];
  const SymInt m = a.dim() > 0 ? a.size(0) : SymInt(1), n = b.dim() > 1 ? b.size(1) : SymInt(1);
  const bool f8 = is_float8(a.dtype()) && is_float8(b.dtype());
  const bool f32 = sa.dtype() == kFloat32 && sb.dtype() == kFloat32;
  const bool tensorwise = singleton(sa) && singleton(sb);
  const bool rowwise = sa.dim() == 2 && sb.dim() == 2 && bool(sa.size(0) == m) && bool(sa.size(1) == 1) &&
                       bool(sb.size(0) == 1) && bool(sb.size(1) == n);
  KILN_CHECK(f8 && f32 && (tensorwise || rowwise), Value, op.name,
             "Invalid scaling configuration.\n- For TensorWise scaling, a and b should be float8, scales should "
             "be float and singletons.\n- For RowWise scaling, a and b should be float8, scales should be float, "
             "scale_a should be (", m, ", 1) and scale_b should be (1, ", n, "), and both should be contiguous.\n"
             "Got mat_a.dtype()=", c10_name(a.dtype()), ", scale_a.dtype()=", c10_name(sa.dtype()),
             ", scale_a.size()=", sa.sizes(), ", mat_b.dtype()=", c10_name(b.dtype()), ", scale_b.dtype()=",
             c10_name(sb.dtype()), " and scale_b.size()=", sb.sizes());
  for (const TensorSpec* s : {&sa, &sb})  // torch transposes a one-element scale on the way
    KILN_CHECK(!tensorwise || s->dim() <= 2, Runtime, op.name, "t() expects a tensor with <= 2 dimensions, but self is ",
               s->dim(), "D");
  KILN_CHECK(a.dim() == 2, Runtime, op.name, "mat1 must be a matrix");
  KILN_CHECK(b.dim() == 2, Runtime, op.name, "mat2 must be a matrix");
  KILN_CHECK(bool(a.size(1) == b.size(0)), Runtime, op.name, "mat_a and mat_b shapes cannot be multiplied (",
             a.size(0), "x", a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  if (in.size() > 5 && in[5].defined())
    KILN_CHECK(in[5].dtype() == kFloat32 && singleton(in[5]), Runtime, op.name, "scale_result must be a float scalar");
  if (in.size() > 4 && in[4].defined())
    KILN_CHECK(bool(in[4].numel() == n), Runtime, op.name, "Bias must be size ", n, " but got ", in[4].numel());
  const Dtype out = opt_attr<Dtype>(attrs, 0).value_or(a.dtype());
  KILN_CHECK(!is_complex(out) && out != kBool, Type, op.name, "out_dtype must be a real float or integer "
             "dtype, got ", dtype_name(out));
  return {{{m, n}, out}};
}

OpDef op_scaled_mm{"_scaled_mm", 0, scaled_mm_meta, {}};
OpRegistrar reg_scaled_mm{op_scaled_mm,
                          "_scaled_mm(Tensor self, Tensor mat2, Tensor scale_a, Tensor scale_b, Tensor? bias=None, "
                          "Tensor? scale_result=None, ScalarType? out_dtype=None, bool use_fast_accum=False) -> Tensor",
                          kFunctionVariant};

// What torch lacks: out = S_a (A B) S_b + bias (times 1 / scale_result), so with G the output's
// gradient, dA = S_a (G S_b) B^T, dB = A^T (S_a G) S_b, dbias = sum of G's rows; in float32, returned
// in the output's dtype where that is a float wider than float8 (the engine keeps a float8 input's
// gradient in the dtype it gets: see decision 27). The scales get none (a training recipe computes
// them from amax under no_grad).
TensorList scaled_mm_grad(const GradCtx& c, const TensorList& go) {
  const Tensor &a = c.in[0], &b = c.in[1], &sa = c.in[2], &sb = c.in[3];
  const Dtype out = opt_attr<Dtype>(c.attrs, 0).value_or(a.dtype());
  const Dtype hp = is_floating(out) && !is_float8(out) ? out : kFloat32;
  Tensor g = to_dtype(go[0], kFloat32);
  const bool explicit_f8 = opt_attr<Dtype>(c.attrs, 0).has_value() && is_float8(out);
  if (explicit_f8 && c.in.size() > 5 && c.in[5].defined()) g = mul(g, reciprocal(reshape(c.in[5], {})));
  const bool tensorwise = sa.numel() == 1 && sb.numel() == 1;
  const Tensor ra = tensorwise ? reshape(sa, {}) : sa, rb = tensorwise ? reshape(sb, {}) : sb;  // (M, 1), (1, N)
  Tensor da, db, dbias;
  if (c.needs[0]) da = to_dtype(mul(mm(mul(g, rb), t(to_dtype(b, kFloat32))), ra), hp);
  if (c.needs[1]) db = to_dtype(mul(mm(t(to_dtype(a, kFloat32)), mul(g, ra)), rb), hp);
  if (c.needs.size() > 4 && c.needs[4]) dbias = sum(g, Shape{0});
  TensorList r{da, db, Tensor(), Tensor()};
  if (c.in.size() > 4) r.push_back(dbias);
  if (c.in.size() > 5) r.push_back(Tensor());
  return r;
}
DerivativeRegistrar d_scaled_mm{op_scaled_mm, scaled_mm_grad, 0b101111, 0};

}  // namespace

Tensor _scaled_mm(const Tensor& self, const Tensor& mat2, const Tensor& scale_a, const Tensor& scale_b,
                  const Tensor& bias, const Tensor& scale_result, std::optional<Dtype> out_dtype, bool use_fast_accum) {
  Attrs attrs{out_dtype ? Attr(*out_dtype) : Attr(), use_fast_accum};
  return dispatch1(op_scaled_mm, {self, mat2, scale_a, scale_b, bias, scale_result}, attrs);
}

}  // namespace kiln
