// kiln::linalg (torch.linalg) and the linear-algebra functions torch keeps at the top level
// (torch.det, torch.inverse, torch.cholesky_solve, ...), with torch 2.13's names, arguments and
// semantics: every function batches over leading dimensions (and broadcasts them where torch does),
// takes float32, float64, complex64 and complex128, and raises LinAlgError (ErrorKind::LinAlg) for a
// singular or non-positive-definite input, naming the batch element; the `_ex` forms return the
// LAPACK info codes instead. The op-table entries, schemas and metas are in linalg.cpp, the
// derivatives in linalg_grad.cpp, the CPU kernels in backend/cpu/linalg.cpp.
#pragma once

#include <tuple>

#include "kiln/core/tensor.h"

namespace kiln {
namespace linalg {

// LU with partial pivoting: A = P L U. pivots are LAPACK's (1-based, int32).
std::tuple<Tensor, Tensor> lu_factor(const Tensor& A, bool pivot = true);
std::tuple<Tensor, Tensor, Tensor> lu_factor_ex(const Tensor& A, bool pivot = true, bool check_errors = false);
std::tuple<Tensor, Tensor, Tensor> lu(const Tensor& A, bool pivot = true);  // P, L, U
// Solves A X = B (left) or X A = B, A given by its LU factors; adjoint: A^H instead of A.
Tensor lu_solve(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool left = true, bool adjoint = false);

Tensor solve(const Tensor& A, const Tensor& B, bool left = true);
std::tuple<Tensor, Tensor> solve_ex(const Tensor& A, const Tensor& B, bool left = true, bool check_errors = false);
Tensor solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool left = true, bool unitriangular = false);

Tensor inv(const Tensor& A);
std::tuple<Tensor, Tensor> inv_ex(const Tensor& A, bool check_errors = false);
Tensor det(const Tensor& A);
std::tuple<Tensor, Tensor> slogdet(const Tensor& A);  // sign, logabsdet

Tensor cholesky(const Tensor& A, bool upper = false);
std::tuple<Tensor, Tensor> cholesky_ex(const Tensor& A, bool upper = false, bool check_errors = false);

}  // namespace linalg

// torch's top-level forms.
Tensor det(const Tensor& A);
Tensor logdet(const Tensor& A);
std::tuple<Tensor, Tensor> slogdet(const Tensor& A);
Tensor inverse(const Tensor& A);
Tensor cholesky(const Tensor& A, bool upper = false);
// X with A X = B for A = L L^H (upper: A = U^H U), from the factor.
Tensor cholesky_solve(const Tensor& B, const Tensor& L, bool upper = false);
Tensor cholesky_inverse(const Tensor& L, bool upper = false);
// P, L, U from lu_factor's result; unpack_data / unpack_pivots false leave L, U / P empty.
std::tuple<Tensor, Tensor, Tensor> lu_unpack(const Tensor& LU, const Tensor& pivots, bool unpack_data = true,
                                             bool unpack_pivots = true);
// Legacy: (solution, cloned_coefficient) of A X = B with A triangular.
std::tuple<Tensor, Tensor> triangular_solve(const Tensor& B, const Tensor& A, bool upper = true, bool transpose = false,
                                            bool unitriangular = false);

}  // namespace kiln
