// What linalg.cpp and linalg_decomp.cpp share: torch's input checks and batch shapes for metas.
#pragma once

#include <string>

#include "kiln/dispatch/op.h"
#include "kiln/ops/shape.h"

namespace kiln::linalg_detail {

inline bool lapack_dtype(Dtype d) { return d == kFloat32 || d == kFloat64 || d == kComplex64 || d == kComplex128; }

// torch's checks of a matrix argument: at least 2 dims, square where asked, float32/64 or complex.
// A half-precision A is torch's NotImplementedError from the kernel named by `kernel` where torch's op
// reaches its LAPACK kernel before checking ("lu_cpu" not implemented for 'Half'), else RuntimeError.
inline void check_input(const TensorSpec& A, const char* op, bool square = true, const char* name = "A",
                        const char* kernel = nullptr) {
  KILN_CHECK(A.dim() >= 2, Runtime, op, "The input tensor ", name, " must have at least 2 dimensions.");
  if (square)
    KILN_CHECK(A.size(-1) == A.size(-2), Runtime, op, name, " must be batches of square matrices, but they are ",
               A.size(-2), " by ", A.size(-1), " matrices");
  const Dtype d = A.dtype();
  KILN_CHECK(is_floating(d) || is_complex(d), Runtime, op,
             "Expected a floating point or complex tensor as input. Got ", dtype_name(d));
  if (kernel && !lapack_dtype(d)) shape_detail::not_implemented(op, kernel, d);
  KILN_CHECK(lapack_dtype(d), Runtime, op, "Low precision dtypes not supported. Got ", dtype_name(d));
}

inline SymShape batch_of(const TensorSpec& t) { return SymShape(t.sizes().begin(), t.sizes().end() - 2); }

// torch's checks of linalg.lstsq(input, other, driver=...): the meta's, and its kernel's (a dynamic-shape op,
// whose meta runs only in a trace).
inline void check_lstsq(const TensorSpec& A, const TensorSpec& B, const std::string& driver) {
  const char* name = "linalg.lstsq";
  check_input(A, name, false, "input");
  KILN_CHECK(B.dim() >= 2, Runtime, name, "other must have at least 2 dimensions.");
  KILN_CHECK(A.dtype() == B.dtype(), Runtime, name, "Expected input and other to have the same dtype, but got "
             "input's dtype ", dtype_name(A.dtype()), " and other's dtype ", dtype_name(B.dtype()));
  KILN_CHECK(driver == "gels" || driver == "gelsy" || driver == "gelsd" || driver == "gelss", Runtime, name,
             "parameter `driver` should be one of (gels, gelsy, gelsd, gelss), but got '", driver, "'");
  KILN_CHECK(B.size(-2) == A.size(-2), Runtime, name, "input.size(-2) should match other.size(-2), but got ",
             A.size(-2), " and ", B.size(-2));
}

inline SymShape with_tail(SymShape b, std::initializer_list<SymInt> tail) {
  for (SymInt s : tail) b.push_back(s);
  return b;
}

}  // namespace kiln::linalg_detail
