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
  X(xlogy, Xlogy, Float, Any) X(logaddexp, LogAddExp, Same, None) X(logaddexp2, LogAddExp2, Same, None)
