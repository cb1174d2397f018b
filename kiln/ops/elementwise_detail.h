// What the elementwise ops' entries and metas (kiln/ops/elementwise.cpp) and their CPU kernels
// (kiln/backend/cpu/elementwise.cpp) share: how an op's code packs its function and dtype rule, and
// the compute dtype of a call.
#pragma once

#include "kiln/ops/ops.h"

namespace kiln::elementwise_detail {

enum class Rule : int { Float, Same, Bool, Real, Round, Int };
constexpr int pack(int code, Rule r) { return code | (static_cast<int>(r) << 16); }
inline int code_of(const OpDef& op) { return op.code & 0xffff; }
inline Rule rule_of(const OpDef& op) { return static_cast<Rule>(op.code >> 16); }

inline Dtype floatify(Dtype d) { return is_integral(d, true) ? default_dtype() : d; }

inline Dtype unary_compute_dtype(const OpDef& op, Dtype in) {
  UnaryOp code = static_cast<UnaryOp>(code_of(op));
  Rule r = rule_of(op);
  if (r == Rule::Float) return floatify(in);
  if (code == UnaryOp::Square && in == kBool) return kInt64;
  return in;
}

// T: Tensor (the kernels) or TensorSpec (the metas)
template <class T>
Dtype binary_compute_dtype(const OpDef& op, const T& a, const T& b) {
  Dtype p = result_type(a, b);
  BinaryOp code = static_cast<BinaryOp>(code_of(op));
  switch (rule_of(op)) {
    case Rule::Float: return floatify(p);
    case Rule::Int:
      KILN_CHECK(is_integral(p, true), NotImplemented, op.name, "not implemented for dtype ", dtype_name(p),
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

}  // namespace kiln::elementwise_detail
