// kiln::linalg (torch.linalg) and the linear-algebra functions torch keeps at the top level
// (torch.det, torch.inverse, torch.cholesky_solve, ...), with torch 2.13's names, arguments and
// semantics: every function batches over leading dimensions (and broadcasts them where torch does),
// takes float32, float64, complex64 and complex128, and raises LinAlgError (ErrorKind::LinAlg) for a
// singular or non-positive-definite input, naming the batch element; the `_ex` forms return the
// LAPACK info codes instead. The op-table entries, schemas and metas are in linalg.cpp, the
// derivatives in linalg_grad.cpp, the CPU kernels in backend/cpu/linalg.cpp.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

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

// QR: mode "reduced", "complete" or "r" (Q empty).
std::tuple<Tensor, Tensor> qr(const Tensor& A, const std::string& mode = "reduced");
// The product of Householder reflectors (geqrf's a and tau): Q's first n columns.
Tensor householder_product(const Tensor& A, const Tensor& tau);
// Hermitian eigen-decomposition (eigenvalues ascending, real) from the UPLO triangle.
std::tuple<Tensor, Tensor> eigh(const Tensor& A, const std::string& UPLO = "L");
Tensor eigvalsh(const Tensor& A, const std::string& UPLO = "L");
// General eigen-decomposition: complex eigenvalues and unit-norm eigenvectors, as LAPACK's geev.
std::tuple<Tensor, Tensor> eig(const Tensor& A);
Tensor eigvals(const Tensor& A);
// A = U diag(S) Vh; full_matrices: U (m, m), Vh (n, n), else (m, k), (k, n).
std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& A, bool full_matrices = true);
Tensor svdvals(const Tensor& A);
// min ||A X - B||: solution, residuals, rank, singular_values as torch returns them (driver: gels,
// gelsy (default), gelsd, gelss).
std::tuple<Tensor, Tensor, Tensor, Tensor> lstsq(const Tensor& A, const Tensor& B,
                                                 std::optional<double> rcond = std::nullopt,
                                                 std::optional<std::string> driver = std::nullopt);

Tensor matrix_exp(const Tensor& A);
// The pseudo-inverse from the SVD (eigh when hermitian): singular values at or below
// max(atol, rtol * the largest) count as zero; rtol defaults to eps * max(m, n) when atol is absent.
Tensor pinv(const Tensor& A, std::optional<double> atol = std::nullopt, std::optional<double> rtol = std::nullopt,
            bool hermitian = false);
Tensor matrix_rank(const Tensor& A, std::optional<double> atol = std::nullopt,
                   std::optional<double> rtol = std::nullopt, bool hermitian = false);
Tensor vector_norm(const Tensor& x, double ord = 2, std::optional<Shape> dim = std::nullopt, bool keepdim = false,
                   std::optional<Dtype> dtype = std::nullopt);
// ord: "fro", "nuc", "inf", "-inf", "1", "-1", "2", "-2" (or the number).
Tensor matrix_norm(const Tensor& A, const std::string& ord = "fro", const Shape& dim = {-2, -1}, bool keepdim = false,
                   std::optional<Dtype> dtype = std::nullopt);
Tensor matrix_norm(const Tensor& A, double ord, const Shape& dim = {-2, -1}, bool keepdim = false,
                   std::optional<Dtype> dtype = std::nullopt);
Tensor norm(const Tensor& A, std::optional<double> ord = std::nullopt, std::optional<Shape> dim = std::nullopt,
            bool keepdim = false, std::optional<Dtype> dtype = std::nullopt);
Tensor norm(const Tensor& A, const std::string& ord, std::optional<Shape> dim = std::nullopt, bool keepdim = false,
            std::optional<Dtype> dtype = std::nullopt);
Tensor cond(const Tensor& A, std::optional<double> p = std::nullopt);
Tensor cond(const Tensor& A, const std::string& p);
Tensor matrix_power(const Tensor& A, int64_t n);
Tensor cross(const Tensor& a, const Tensor& b, int64_t dim = -1);
Tensor vecdot(const Tensor& x, const Tensor& y, int64_t dim = -1);
Tensor multi_dot(const std::vector<Tensor>& tensors);
Tensor diagonal(const Tensor& A, int64_t offset = 0, int64_t dim1 = -2, int64_t dim2 = -1);
Tensor vander(const Tensor& x, std::optional<int64_t> N = std::nullopt);
Tensor tensorinv(const Tensor& A, int64_t ind = 2);
Tensor tensorsolve(const Tensor& A, const Tensor& B, std::optional<Shape> dims = std::nullopt);

}  // namespace linalg

// torch's top-level forms.
Tensor pinverse(const Tensor& A, double rcond = 1e-15);
Tensor matrix_power(const Tensor& A, int64_t n);
std::tuple<Tensor, Tensor> geqrf(const Tensor& A);
Tensor ormqr(const Tensor& A, const Tensor& tau, const Tensor& C, bool left = true, bool transpose = false);
std::tuple<Tensor, Tensor> qr(const Tensor& A, bool some = true);
// U, S, V (not Vh); compute_uv false: zero-filled U and V.
std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& A, bool some = true, bool compute_uv = true);
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
