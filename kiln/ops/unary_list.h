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

// Binary ops with a tensor-or-scalar second operand: X(torch_name, BinaryOp code, dtype rule).
//   Same: promoted dtype. Float: integers promote to the default float. Bool: bool result.
//   Int: integral/bool only.
#define KILN_BINARY_OPS(X)                                                                       \
  X(mul, Mul, Same) X(true_divide, Div, Float) X(floor_divide, DivFloor, Same)                   \
  X(remainder, Remainder, Same) X(fmod, Fmod, Same) X(pow, Pow, Same) X(atan2, Atan2, Float)     \
  X(maximum, Maximum, Same) X(minimum, Minimum, Same) X(fmax, Fmax, Same) X(fmin, Fmin, Same)    \
  X(hypot, Hypot, Same) X(copysign, Copysign, Float) X(nextafter, Nextafter, Same)              \
  X(bitwise_and, BitAnd, Int) X(bitwise_or, BitOr, Int) X(bitwise_xor, BitXor, Int)              \
  X(bitwise_left_shift, Shl, Int) X(bitwise_right_shift, Shr, Int)                               \
  X(logical_and, LogicalAnd, Bool) X(logical_or, LogicalOr, Bool) X(logical_xor, LogicalXor, Bool) \
  X(eq, Eq, Bool) X(ne, Ne, Bool) X(lt, Lt, Bool) X(le, Le, Bool) X(gt, Gt, Bool) X(ge, Ge, Bool) \
  X(xlogy, Xlogy, Float)
