// What linalg.cpp and linalg_decomp.cpp share: torch's input checks and batch shapes for metas.
#pragma once

#include "kiln/dispatch/op.h"

namespace kiln::linalg_detail {

inline bool lapack_dtype(Dtype d) { return d == kFloat32 || d == kFloat64 || d == kComplex64 || d == kComplex128; }

// torch's checks of a matrix argument: at least 2 dims, square where asked, float32/64 or complex.
inline void check_input(const TensorSpec& A, const char* op, bool square = true, const char* name = "A") {
  KILN_CHECK(A.dim() >= 2, Runtime, op, "The input tensor ", name, " must have at least 2 dimensions.");
  if (square)
    KILN_CHECK(A.size(-1) == A.size(-2), Runtime, op, name, " must be batches of square matrices, but they are ",
               A.size(-2), " by ", A.size(-1), " matrices");
  const Dtype d = A.dtype();
  KILN_CHECK(is_floating(d) || is_complex(d), Runtime, op,
             "Expected a floating point or complex tensor as input. Got ", dtype_name(d));
  KILN_CHECK(lapack_dtype(d), Runtime, op, "Low precision dtypes not supported. Got ", dtype_name(d));
}

inline SymShape batch_of(const TensorSpec& t) { return SymShape(t.sizes().begin(), t.sizes().end() - 2); }

inline SymShape with_tail(SymShape b, std::initializer_list<SymInt> tail) {
  for (SymInt s : tail) b.push_back(s);
  return b;
}

}  // namespace kiln::linalg_detail
