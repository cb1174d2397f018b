// The plain unary ops: X(torch_name, UnaryOp code, dtype rule). One line adds the C++ function,
// the in-place variant, the op-table entry and the Python binding.
//   Float: integers and bool compute in the default float dtype.  Same: keep the dtype.
//   Bool: the result is bool.  Real: complex gives its real type.  Round: integers pass through.
#pragma once

#define KILN_UNARY_OPS(X)                                                                        \
  X(neg, Neg, Same) X(abs, Abs, Real) X(sign, Sign, Same) X(sgn, Sgn, Same)                      \
  X(reciprocal, Reciprocal, Float) X(sqrt, Sqrt, Float) X(rsqrt, Rsqrt, Float)                   \
  X(square, Square, Same) X(exp, Exp, Float) X(exp2, Exp2, Float) X(expm1, Expm1, Float)         \
  X(log, Log, Float) X(log2, Log2, Float) X(log10, Log10, Float) X(log1p, Log1p, Float)          \
  X(sin, Sin, Float) X(cos, Cos, Float) X(tan, Tan, Float) X(asin, Asin, Float)                  \
  X(acos, Acos, Float) X(atan, Atan, Float) X(sinh, Sinh, Float) X(cosh, Cosh, Float)            \
  X(tanh, Tanh, Float) X(asinh, Asinh, Float) X(acosh, Acosh, Float) X(atanh, Atanh, Float)      \
  X(sigmoid, Sigmoid, Float) X(erf, Erf, Float) X(erfc, Erfc, Float) X(erfinv, Erfinv, Float)    \
  X(lgamma, Lgamma, Float) X(digamma, Digamma, Float) X(floor, Floor, Round)                     \
  X(ceil, Ceil, Round) X(trunc, Trunc, Round) X(frac, Frac, Same)                                \
  X(bitwise_not, BitwiseNot, Same) X(logical_not, LogicalNot, Bool) X(isnan, IsNan, Bool)        \
  X(isinf, IsInf, Bool) X(isfinite, IsFinite, Bool) X(isposinf, IsPosInf, Bool)                  \
  X(isneginf, IsNegInf, Bool) X(signbit, Signbit, Bool) X(relu, Relu, Same)                      \
  X(relu6, Relu6, Same) X(silu, Silu, Same) X(mish, Mish, Same)               \
  X(hardsigmoid, Hardsigmoid, Same) X(hardswish, Hardswish, Same)   \
  X(logsigmoid, Logsigmoid, Same) X(angle, Angle, Float) X(conj_physical, Conj, Same)

// Binary ops: X(torch_name, BinaryOp code, dtype rule, Python numbers). One line adds the C++
// functions, the in-place variant, the op-table entry with its schema, the kernel table's slot
// (the code is its BinaryOp) and the Python function, method and out= variant; the inner loop is
// the op's branch in backend/cpu/kernels_binary.cpp and the derivative sits in elementwise_grad.cpp.
//   Same: promoted dtype. Float: integers promote to the default float. Bool: bool result.
//   Int: integral/bool only.
//   Python numbers (torch's signatures): Any: either operand may be one; Second: only `other`;
//   None: both must be tensors.
#define KILN_BINARY_OPS(X)                                                                          \
  X(mul, Mul, Same, Any) X(true_divide, Div, Float, Any) X(floor_divide, DivFloor, Same, Any)       \
  X(remainder, Remainder, Same, Any) X(fmod, Fmod, Same, Second) X(pow, Pow, Same, Any)             \
  X(atan2, Atan2, Float, None) X(maximum, Maximum, Same, None) X(minimum, Minimum, Same, None)      \
  X(fmax, Fmax, Same, None) X(fmin, Fmin, Same, None) X(hypot, Hypot, Same, None)                   \
  X(copysign, Copysign, Float, Second) X(nextafter, Nextafter, Same, None)                          \
  X(bitwise_and, BitAnd, Int, Any) X(bitwise_or, BitOr, Int, Any) X(bitwise_xor, BitXor, Int, Any)  \
  X(bitwise_left_shift, Shl, Int, Any) X(bitwise_right_shift, Shr, Int, Any)                        \
  X(logical_and, LogicalAnd, Bool, None) X(logical_or, LogicalOr, Bool, None)                       \
  X(logical_xor, LogicalXor, Bool, None) X(eq, Eq, Bool, Second) X(ne, Ne, Bool, Second)            \
  X(lt, Lt, Bool, Second) X(le, Le, Bool, Second) X(gt, Gt, Bool, Second) X(ge, Ge, Bool, Second)   \
  X(xlogy, Xlogy, Float, Any) X(logaddexp, LogAddExp, Same, None) X(logaddexp2, LogAddExp2, Same, None) \
  X(gcd, Gcd, Same, None) X(lcm, Lcm, Same, None)

// The parametrised unary ops (attributes in KParams order) and the binary ops with a front end of
// their own: X(torch_name, code, dtype rule, schema). The op file makes their entries, the CPU
// backend registers its kernel for each name.
#define KILN_PUNARY_OPS(X)                                                                                    \
  X(round_decimals, RoundDecimals, Same, "round.decimals(Tensor self, *, int decimals) -> Tensor")            \
  X(round, Round, Round, "round(Tensor self) -> Tensor")                                                      \
  X(logit, Logit, Float, "logit(Tensor self, float? eps=None) -> Tensor")                                     \
  X(clamp, Clamp, Same, "clamp(Tensor self, Scalar min, Scalar max) -> Tensor")                               \
  X(clamp_min, ClampMin, Same, "clamp_min(Tensor self, Scalar min) -> Tensor")                                \
  X(clamp_max, ClampMax, Same, "clamp_max(Tensor self, Scalar max) -> Tensor")                                \
  X(nan_to_num, NanToNum, Same, "nan_to_num(Tensor self, float nan, float posinf, float neginf) -> Tensor")   \
  X(leaky_relu, LeakyRelu, Same, "leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor")             \
  X(elu, Elu, Same, "elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor")       \
  X(gelu, Gelu, Same, "gelu(Tensor self) -> Tensor")                                                          \
  X(gelu_tanh, GeluTanh, Same, "gelu_tanh(Tensor self) -> Tensor")                                            \
  X(softplus, Softplus, Same, "softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor")          \
  X(hardtanh, Hardtanh, Same, "hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor")         \
  X(threshold, Threshold, Same, "threshold(Tensor self, Scalar threshold, Scalar value) -> Tensor")
#define KILN_BINARY_EXTRA_OPS(X)                                                                              \
  X(add, Add, Same, "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")                     \
  X(sub, Sub, Same, "sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")                     \
  X(div_trunc, DivTrunc, Same, "div_trunc(Tensor self, Tensor other) -> Tensor")                              \
  X(clamp_min_tensor, ClampMinT, Same, "clamp_min_tensor(Tensor self, Tensor other) -> Tensor")               \
  X(clamp_max_tensor, ClampMaxT, Same, "clamp_max_tensor(Tensor self, Tensor other) -> Tensor")               \
  X(polar, Polar, Float, "polar(Tensor abs, Tensor angle) -> Tensor")                                         \
  X(complex, Complex, Same, "complex(Tensor real, Tensor imag) -> Tensor")                                    \
  /* GELU's fused first derivative: grad_output * gelu'(self) */                                              \
  X(gelu_backward, GeluBackward, Same, "gelu_backward(Tensor grad_output, Tensor self) -> Tensor")            \
  X(gelu_tanh_backward, GeluTanhBackward, Same, "gelu_tanh_backward(Tensor grad_output, Tensor self) -> Tensor")

namespace kiln {
enum class UnaryOp : int {
  Neg, Abs, Sign, Sgn, Reciprocal, Sqrt, Rsqrt, Square, Exp, Exp2, Expm1, Log, Log2, Log10, Log1p,
  Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Tanh, Asinh, Acosh, Atanh, Sigmoid, Logit, Erf, Erfc,
  Erfinv, Lgamma, Digamma, Floor, Ceil, Round, RoundDecimals, Trunc, Frac, BitwiseNot, LogicalNot,
  IsNan, IsInf, IsFinite, IsPosInf, IsNegInf, Signbit, Relu, Relu6, LeakyRelu, Elu, Gelu, GeluTanh,
  Silu, Mish, Softplus, Hardtanh, Hardsigmoid, Hardswish, Logsigmoid, Threshold, ClampMin,
  ClampMax, Clamp, NanToNum, Angle, Conj, Real, Imag,
  Count
};

// The binary ops of the list in ops/unary_list.h, then those with a front end of their own.
#define KILN_BINARY_CODE(name, code, rule, numbers) code,
enum class BinaryOp : int {
  KILN_BINARY_OPS(KILN_BINARY_CODE)
  Add, Sub, DivTrunc, ClampMinT, ClampMaxT, Polar, Complex,
  GeluBackward, GeluTanhBackward,  // (grad, x) -> grad * gelu'(x): the fused first derivative
  Count
};
#undef KILN_BINARY_CODE

}  // namespace kiln
