// Derivatives of the linear-algebra ops (linalg.cpp), written with kiln ops so that double backward
// works. Conventions as torch's: for a complex input the gradient is the conjugate Wirtinger one, so
// every formula reads with ^H where the real one has ^T. Batch dims that broadcast (solves) come back
// in the broadcast shape; the engine sums them to the input's.
#include <algorithm>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

using G = const GradCtx&;
using GL = const TensorList&;

Tensor mH(const Tensor& x) { return cj(mT(x)); }

// X U^-H for upper-triangular U, and L^-H X for unit lower-triangular L.
Tensor right_solve_UH(const Tensor& X, const Tensor& U) {
  return linalg::solve_triangular(mH(U), X, /*upper=*/false, /*left=*/false);
}
Tensor left_solve_LH_unit(const Tensor& L, const Tensor& X) {
  return linalg::solve_triangular(mH(L), X, /*upper=*/true, /*left=*/true, /*unitriangular=*/true);
}

// A = P L U (lu_factor_ex): outputs LU, pivots, info. The square case and both rectangular ones:
// with M = L^-1 dA' U^-1 over the square block, dL = L tril(M, -1), dU = triu(M) U, and the
// off-square block of L (tall) or U (wide) follows from it.
TensorList lu_factor_grad(G c, GL go) {
  const Tensor &LU = c.out[0], &piv = c.out[1];
  const Tensor& gLU = go[0];
  const int64_t m = LU.size(-2), n = LU.size(-1), k = std::min(m, n);
  auto [P, L, U] = lu_unpack(LU, piv);
  Tensor gL = tril(narrow(gLU, -1, 0, k), -1);
  Tensor gU = triu(narrow(gLU, -2, 0, k));
  if (m == n) {
    Tensor phi = add(tril(matmul(mH(L), gL), -1), triu(matmul(gU, mH(U))));
    return {matmul(P, left_solve_LH_unit(L, right_solve_UH(phi, U)))};
  }
  if (m < n) {  // wide: U = [U1 | U2]
    Tensor U1 = narrow(U, -1, 0, m), U2 = narrow(U, -1, m, n - m);
    Tensor gU1 = narrow(gU, -1, 0, m), gU2 = narrow(gU, -1, m, n - m);
    Tensor gM = add(tril(sub(matmul(mH(L), gL), matmul(gU2, mH(U2))), -1), triu(matmul(gU1, mH(U1))));
    Tensor gA1 = left_solve_LH_unit(L, right_solve_UH(gM, U1));
    Tensor gA2 = left_solve_LH_unit(L, gU2);
    return {matmul(P, cat({gA1, gA2}, -1))};
  }
  // tall: L = [L1; L2]
  Tensor L1 = narrow(L, -2, 0, n), L2 = narrow(L, -2, n, m - n);
  Tensor gL1 = narrow(gL, -2, 0, n), gL2 = narrow(gL, -2, n, m - n);
  Tensor gM = add(tril(matmul(mH(L1), gL1), -1), triu(sub(matmul(gU, mH(U)), matmul(mH(L2), gL2))));
  Tensor gA1 = left_solve_LH_unit(L1, right_solve_UH(gM, U));
  Tensor gA2 = right_solve_UH(gL2, U);
  return {matmul(P, cat({gA1, gA2}, -2))};
}
DerivativeByName d_lu_factor{"linalg_lu_factor_ex", lu_factor_grad, 0, 0b011};

// The gradient of A = P L U's factors from A's: gL = tril(P^T gA U^H, -1), gU = triu(L^H P^T gA),
// packed as one LU matrix.
Tensor lu_grad_from_A(const Tensor& LU, const Tensor& piv, const Tensor& gA) {
  auto [P, L, U] = lu_unpack(LU, piv);
  Tensor PtgA = matmul(mT(P), gA);
  return add(tril(matmul(PtgA, mH(U)), -1), triu(matmul(mH(L), PtgA)));
}

// lu_solve(LU, pivots, B, left, adjoint): X = op(A)^-1 B or B op(A)^-1, op(A) = A or A^H.
TensorList lu_solve_grad(G c, GL go) {
  const Tensor &LU = c.in[0], &piv = c.in[1], &X = c.out[0];
  const bool left = attr<bool>(c.attrs, 0), adjoint = attr<bool>(c.attrs, 1);
  Tensor gB = linalg::lu_solve(LU, piv, go[0], left, !adjoint);
  Tensor gLU;
  if (c.needs[0]) {
    Tensor gA = left ? (adjoint ? matmul(X, mH(gB)) : matmul(gB, mH(X)))
                     : (adjoint ? matmul(mH(gB), X) : matmul(mH(X), gB));
    gLU = lu_grad_from_A(LU, piv, neg(gA));
  }
  return {gLU, Tensor(), c.needs[2] ? gB : Tensor()};
}
DerivativeByName d_lu_solve{"linalg_lu_solve", lu_solve_grad, 0b011, 0b1};

// lu_unpack: L and U are masked copies of LU's triangles (P is not differentiable).
TensorList lu_unpack_grad(G c, GL go) {
  if (!attr<bool>(c.attrs, 0)) return {Tensor(), Tensor()};
  const Shape s = c.in_specs[0].concrete_sizes("lu_unpack backward");
  const int64_t m = s[s.size() - 2], n = s.back();
  Tensor gL = tril(go[1], -1), gU = triu(go[2]);
  auto zeros_of = [&](int64_t r, int64_t cols) {
    Shape z(s.begin(), s.end() - 2);
    z.push_back(r), z.push_back(cols);
    return zeros(z, TensorOptions(go[1].dtype()));
  };
  if (m > n) gU = cat({gU, zeros_of(m - n, n)}, -2);
  if (m < n) gL = cat({gL, zeros_of(m, n - m)}, -1);
  return {add(gL, gU), Tensor()};
}
DerivativeByName d_lu_unpack{"lu_unpack", lu_unpack_grad, 0, 0};

// _linalg_solve_ex(A, B, left): X = A^-1 B (left) or B A^-1. Outputs X, LU, pivots, info. Under
// create_graph the solve goes through A itself, so that its own derivative is right.
TensorList solve_ex_grad(G c, GL go) {
  const Tensor &A = c.in[0], &X = c.out[0], &LU = c.out[1], &piv = c.out[2];
  const bool left = attr<bool>(c.attrs, 0);
  Tensor gB = grad_mode_enabled() ? linalg::solve(mH(A), go[0], left) : linalg::lu_solve(LU, piv, go[0], left, true);
  Tensor gA;
  if (c.needs[0]) gA = neg(left ? matmul(gB, mH(X)) : matmul(mH(X), gB));
  return {gA, c.needs[1] ? gB : Tensor()};
}
DerivativeByName d_solve_ex{"_linalg_solve_ex", solve_ex_grad, 0b01, 0b0111};

// inv_ex: d(A^-1) = -A^-1 dA A^-1, so gA = -A^-H g A^-H.
TensorList inv_ex_grad(G c, GL go) {
  const Tensor& Y = c.out[0];
  return {neg(matmul(mH(Y), matmul(go[0], mH(Y))))};
}
DerivativeByName d_inv_ex{"linalg_inv_ex", inv_ex_grad, 0, 0b1};

Tensor inv_of(const Tensor& A) { return std::get<0>(linalg::inv_ex(A)); }
Tensor as_matrix_coef(const Tensor& g) { return unsqueeze(unsqueeze(g, -1), -1); }

// det: d det = det tr(A^-1 dA), so gA = g conj(det) A^-H.
TensorList det_grad(G c, GL go) {
  const Tensor &A = c.in[0], &d = c.out[0];
  return {mul(as_matrix_coef(mul(go[0], cj(d))), mH(inv_of(A)))};
}
DerivativeByName d_det{"_linalg_det", det_grad, 0b1, 0b1};

// slogdet: d logabsdet = Re tr(A^-1 dA); for complex A, d sign = i sign Im tr(A^-1 dA). So
// gA = (g_logabsdet - i Im(conj(g_sign) sign)) A^-H.
TensorList slogdet_grad(G c, GL go) {
  const Tensor &A = c.in[0], &sign = c.out[0];
  Tensor coef = go[1];
  if (A.is_complex()) coef = complex(go[1], neg(imag(mul(conj(go[0]), sign))));
  return {mul(as_matrix_coef(coef), mH(inv_of(A)))};
}
DerivativeByName d_slogdet{"_linalg_slogdet", slogdet_grad, 0b1, 0b01};

// cholesky: A = L L^H, dL = L pi(L^-1 dA L^-H) with pi(X) the lower triangle, diagonal halved. Its
// adjoint gives gA = L^-H pi*(tril(L^H gL)) L^-1 with pi*(X) = (X + tril(X, -1)^H) / 2: Hermitian
// but for the imaginary part of the diagonal, which a Hermitian perturbation does not see (torch
// keeps it too). upper: A = U^H U with U = L^H.
TensorList cholesky_grad(G c, GL go) {
  const bool upper = attr<bool>(c.attrs, 0);
  Tensor L = upper ? mH(c.out[0]) : c.out[0];
  Tensor gL = upper ? mH(go[0]) : go[0];
  Tensor phi = tril(matmul(mH(L), gL));
  phi = mul(add(phi, mH(tril(phi, -1))), Scalar(0.5));
  Tensor gA = linalg::solve_triangular(mH(L), phi, /*upper=*/true, /*left=*/true);  // L^-H phi
  return {linalg::solve_triangular(L, gA, /*upper=*/false, /*left=*/false)};        // ... L^-1
}
DerivativeByName d_cholesky{"linalg_cholesky_ex", cholesky_grad, 0, 0b01};

// cholesky_solve(B, L, upper): X = A^-1 B with A = L L^H. L's gradient is torch's, that of A's
// factor taken as a full matrix: gL = -(C + C^H) L, C = gB X^H (upper: -U (C + C^H)).
TensorList cholesky_solve_grad(G c, GL go) {
  const Tensor &L = c.in[1], &X = c.out[0];
  const bool upper = attr<bool>(c.attrs, 0);
  Tensor gB = cholesky_solve(go[0], L, upper);
  Tensor gL;
  if (c.needs[1]) {
    Tensor C = matmul(gB, mH(X));
    C = add(C, mH(C));
    gL = neg(upper ? matmul(L, C) : matmul(C, L));
  }
  return {c.needs[0] ? gB : Tensor(), gL};
}
DerivativeByName d_cholesky_solve{"cholesky_solve", cholesky_solve_grad, 0b10, 0b1};

// cholesky_inverse(L, upper): Y = (L L^H)^-1; as torch: gL = -Y (g + g^H) Y L (upper: -U Y (g + g^H) Y).
TensorList cholesky_inverse_grad(G c, GL go) {
  const Tensor &L = c.in[0], &Y = c.out[0];
  const bool upper = attr<bool>(c.attrs, 0);
  Tensor C = matmul(Y, matmul(add(go[0], mH(go[0])), Y));
  return {neg(upper ? matmul(L, C) : matmul(C, L))};
}
DerivativeByName d_cholesky_inverse{"cholesky_inverse", cholesky_inverse_grad, 0b1, 0b1};

// solve_triangular(A, B, upper, left, unitriangular): as a solve, with gA kept to A's triangle.
TensorList solve_triangular_grad(G c, GL go) {
  const Tensor &A = c.in[0], &X = c.out[0];
  const bool upper = attr<bool>(c.attrs, 0), left = attr<bool>(c.attrs, 1), unit = attr<bool>(c.attrs, 2);
  Tensor gB = linalg::solve_triangular(mH(A), go[0], !upper, left, unit);
  Tensor gA;
  if (c.needs[0]) {
    gA = neg(left ? matmul(gB, mH(X)) : matmul(mH(X), gB));
    gA = upper ? triu(gA, unit ? 1 : 0) : tril(gA, unit ? -1 : 0);
  }
  return {gA, c.needs[1] ? gB : Tensor()};
}
DerivativeByName d_solve_triangular{"linalg_solve_triangular", solve_triangular_grad, 0b01, 0b1};

}  // namespace
}  // namespace kiln
