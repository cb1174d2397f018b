// Small helpers shared by the derivative files (`*_grad.cpp`).
#pragma once

#include <variant>

#include "kiln/ops/ops.h"

namespace kiln {

// conj for complex tensors, identity for real ones.
inline Tensor cj(const Tensor& t) { return t.is_complex() ? conj(t) : t; }

inline double attr_double(const Attr& a) {
  if (auto* d = std::get_if<double>(&a)) return *d;
  if (auto* s = std::get_if<Scalar>(&a)) return s->to_double();
  if (auto* i = std::get_if<int64_t>(&a)) return static_cast<double>(*i);
  if (auto* b = std::get_if<bool>(&a)) return *b;
  KILN_FAIL(Runtime, "autograd", "expected a numeric attribute");
}
inline Scalar attr_scalar(const Attr& a) {
  if (auto* s = std::get_if<Scalar>(&a)) return *s;
  return Scalar(attr_double(a));
}
inline Scalar neg_scalar(const Scalar& s) {
  if (s.is_complex()) return Scalar(-s.to_complex());
  if (s.is_integral()) return Scalar(-s.to_int());
  return Scalar(-s.to_double());
}

inline Scalar conj_scalar(const Scalar& s) {
  return s.is_complex() ? Scalar(std::conj(s.to_complex())) : s;
}

// g where mask holds, zero elsewhere (torch's where/masked_fill: a NaN or inf in g outside the
// mask does not leak, unlike g * mask).
inline Tensor where_g(const Tensor& mask, const Tensor& g) {
  return where(mask, g, zeros({}, g.dtype()));
}

// Sizes as an integer list for the next op's shape argument, bit for bit: symbolic sizes (a trace)
// stay symbolic and record no guard; plain ones are the sizes themselves.
inline Shape raw_sizes(const Tensor& t) { return t.has_symbolic_sizes() ? raw_shape(t.sym_sizes()) : t.sizes(); }

// narrow(x, dim, start, length) with a start and length that may be symbolic (a trace; view.cpp):
// concrete ones are narrow's own call.
Tensor narrow_symint(const Tensor& x, int64_t dim, SymInt start, SymInt length);

// polygamma(n, x), n >= 0 (n = 0 is digamma); a table op for n >= 1 (polygamma.cpp).
Tensor polygamma(int64_t n, const Tensor& x);

// A reduction's gradient broadcast back to the input: reinserts the reduced dims (when not kept)
// and expands. `dims` empty with `all` = every dim.
Tensor expand_reduced(const Tensor& g, const Shape& in_shape, const Shape& dims, bool all,
                      bool keepdim);

}  // namespace kiln
