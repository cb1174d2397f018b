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
    return zeros(z, TensorOptions(go[1].dtype()).device(go[1].device()));
  };
  if (m > n) gU = cat({gU, zeros_of(m - n, n)}, -2);
  if (m < n) gL = cat({gL, zeros_of(m, n - m)}, -1);
  return {add(gL, gU), Tensor()};
}
DerivativeByName d_lu_unpack{"lu_unpack", lu_unpack_grad, 0, 0};

// linalg_solve_ex(A, B, left): X = A^-1 B (left) or B A^-1; B may be a vector (the front's rule).
// gB solves with A^H (differentiable, so double backward holds); gA = -gB X^H or -X^H gB.
TensorList solve_ex_grad(G c, GL go) {
  const Tensor &A = c.in[0], &X = c.out[0];
  const bool left = attr<bool>(c.attrs, 0);
  const bool vec = X.dim() < A.dim();  // only a vector right-hand side loses a dimension
  Tensor g = vec ? unsqueeze(go[0], left ? -1 : -2) : go[0];
  Tensor Xm = vec ? unsqueeze(X, left ? -1 : -2) : X;
  Tensor gB = linalg::solve(mH(A), g, left);
  Tensor gA;
  if (c.needs[0]) gA = neg(left ? matmul(gB, mH(Xm)) : matmul(mH(Xm), gB));
  if (vec) gB = squeeze(gB, Shape{left ? -1 : -2});
  return {gA, c.needs[1] ? gB : Tensor()};
}
DerivativeByName d_solve_ex{"linalg_solve_ex", solve_ex_grad, 0b01, 0b01};

// inv_ex: d(A^-1) = -A^-1 dA A^-1, so gA = -A^-H g A^-H.
TensorList inv_ex_grad(G c, GL go) {
  const Tensor& Y = c.out[0];
  return {neg(matmul(mH(Y), matmul(go[0], mH(Y))))};
}
DerivativeByName d_inv_ex{"linalg_inv_ex", inv_ex_grad, 0, 0b1};

// householder_product(A, tau) = the first n columns of Q = H_1 ... H_k, H_i = I - tau_i v_i v_i^H, v_i
// the i-th column of A below the diagonal with 1 on it. With G the gradient padded to m x m columns,
// the gradient with respect to H_i is W_i = P_i^H G S_i^H (P_i = H_1 ... H_{i-1}, S_i = H_{i+1} ... H_k),
// and through dH_i = -dtau v v^H - tau (dv v^H + v dv^H):
//   g_tau_i = -v^H W_i v,   g_v_i = -(conj(tau_i) W_i v + tau_i W_i^H v),
// of which A takes the entries below the diagonal. The suffix part is carried from i = k down
// (X_{i-1} = X_i H_i^H), the prefix applied as reflectors (O(k^2 m^2) per matrix), all in kiln ops.
TensorList householder_product_grad(G c, GL go) {
  const Tensor &A = c.in[0], &tau = c.in[1];
  const int64_t m = A.size(-2), n = A.size(-1), k = tau.size(-1);
  const TensorOptions o = TensorOptions(A.dtype()).device(A.device());
  Tensor V = add(narrow(tril(A, -1), -1, 0, k), eye(m, k, o));  // (..., m, k): v_i = V[..., :, i]
  Tensor G = go[0];
  if (n < m) {  // zero columns n..m
    Shape pad_shape(G.sizes().begin(), G.sizes().end());
    pad_shape.back() = m - n;
    G = cat({G, zeros(pad_shape, o)}, -1);
  }
  auto v_of = [&](int64_t i) { return narrow(V, -1, i, 1); };          // (..., m, 1)
  auto t_of = [&](int64_t i) { return unsqueeze(narrow(tau, -1, i, 1), -1); };  // (..., 1, 1)
  // H^H Y = Y - conj(tau) v (v^H Y);  X H^H = X - conj(tau) (X v) v^H
  auto left_HH = [&](int64_t i, const Tensor& Y) {
    Tensor v = v_of(i);
    return sub(Y, mul(cj(t_of(i)), matmul(v, matmul(mH(v), Y))));
  };
  auto right_HH = [&](int64_t i, const Tensor& X) {
    Tensor v = v_of(i);
    return sub(X, mul(cj(t_of(i)), matmul(matmul(X, v), mH(v))));
  };
  std::vector<Tensor> g_tau(k), g_v(k);
  Tensor X = G;  // X_i = G S_i^H
  for (int64_t i = k - 1; i >= 0; --i) {
    Tensor W = X;  // P_i^H X_i = H_{i-1}^H ... H_1^H X_i
    for (int64_t j = 0; j < i; ++j) W = left_HH(j, W);
    Tensor v = v_of(i), t = t_of(i);
    g_tau[i] = squeeze(neg(matmul(mH(v), matmul(W, v))), Shape{-2, -1});
    g_v[i] = neg(add(mul(cj(t), matmul(W, v)), mul(t, matmul(mH(W), v))));
    X = right_HH(i, X);
  }
  Tensor gtau = c.needs[1] ? stack(TensorList(g_tau.begin(), g_tau.end()), -1) : Tensor();
  Tensor gA;
  if (c.needs[0]) {
    Tensor gV = tril(cat(TensorList(g_v.begin(), g_v.end()), -1), -1);  // (..., m, k), below the diagonal
    if (k < n) {
      Shape pad_shape(gV.sizes().begin(), gV.sizes().end());
      pad_shape.back() = n - k;
      gV = cat({gV, zeros(pad_shape, o)}, -1);
    }
    gA = gV;
  }
  return {gA, gtau};
}
DerivativeByName d_householder{"linalg_householder_product", householder_product_grad, 0b11, 0};

Tensor inv_of(const Tensor& A) { return std::get<0>(linalg::inv_ex(A)); }
Tensor as_matrix_coef(const Tensor& g) { return unsqueeze(unsqueeze(g, -1), -1); }

// det: d det = tr(adj(A) dA), so gA = g adj(A)^H: g conj(det) A^-H where A is invertible. Where it is
// singular (det 0, or the inverse not finite) the adjugate comes from the SVD A = U S V^H:
// adj(A)^H = conj(det U det V^H) U diag(prod_{j != i} S_j) V^H (torch's singular formula), which is
// the limit of the invertible one (rank n - 1: nonzero; lower rank: zero).
Tensor products_of_others(const Tensor& S) {  // p_i = prod_{j != i} S_j, with zeros allowed
  const int64_t n = S.size(-1);
  Shape one_shape(S.sizes().begin(), S.sizes().end());
  one_shape.back() = 1;
  Tensor ones1 = ones(one_shape, TensorOptions(S.dtype()).device(S.device()));
  Tensor left = cat({ones1, narrow(cumprod(S, -1), -1, 0, n - 1)}, -1);
  Tensor rs = flip(S, {-1});
  Tensor right = flip(cat({ones1, narrow(cumprod(rs, -1), -1, 0, n - 1)}, -1), {-1});
  return mul(left, right);
}
TensorList det_grad(G c, GL go) {
  const Tensor &A = c.in[0], &d = c.out[0];
  Tensor g = as_matrix_coef(mul(go[0], cj(d)));
  Tensor gA = mul(g, mH(inv_of(A)));
  Tensor bad = logical_or(eq(d, Scalar(0)), logical_not(all(isfinite(gA), Shape{-2, -1})));
  if (A.size(-1) == 0 || !any(bad).item<bool>()) return {gA};
  auto [U, S, Vh] = linalg::svd(A, false);
  Tensor alpha = cj(mul(linalg::det(U), linalg::det(Vh)));
  Tensor p = to_dtype(products_of_others(S), A.dtype());
  Tensor sing = matmul(mul(U, unsqueeze(p, -2)), Vh);
  sing = mul(as_matrix_coef(mul(go[0], alpha)), sing);
  return {where(unsqueeze(unsqueeze(bad, -1), -1), sing, gA)};
}
DerivativeByName d_det{"linalg_det", det_grad, 0b1, 0b1};

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

// ---- the decompositions (linalg_decomp.cpp) ---------------------------------------------------------------------
// E_jk = x_k - x_j off the diagonal, 1 on it (so a division by it leaves the diagonal alone).
Tensor pair_differences(const Tensor& x) {
  Tensor E = sub(unsqueeze(x, -2), unsqueeze(x, -1));
  const int64_t n = x.size(-1);
  return add(E, eye(n, std::nullopt, TensorOptions(E.dtype()).device(E.device())));
}
Tensor zero_diagonal(const Tensor& X) {
  const int64_t n = X.size(-1);
  Tensor I = eye(n, std::nullopt, TensorOptions(kBool).device(X.device()));
  return where(I, zeros({}, TensorOptions(X.dtype())), X);
}
Tensor real_part(const Tensor& x) { return x.is_complex() ? real(x) : x; }

// Complex singular / eigen vectors are defined up to a phase per column; a loss that depends on it
// has no gradient (torch's check): the imaginary part `im` must vanish (within 1e-2). Data is read,
// so a trace on meta tensors skips the check.
void check_gauge(const Tensor& im, const char* op, const char* what) {
  if (im.is_meta() || im.numel() == 0) return;
  const double worst = amax(abs(im)).to(kFloat64).item<double>();
  KILN_CHECK(worst <= 1e-2, Runtime, op, op, ": The ", what, " in the complex case are specified up to "
             "multiplication by e^{i phi}. The specified loss function depends on this phase term, making it "
             "ill-defined.");
}

// linalg_qr(A, mode): A = Q R. With M = gR R^H - Q^H gQ, for m >= n
// gA = (gQ + Q copyltu(M)) R^-H, copyltu(M) = triu(M, 1) + triu(M, 1)^H + Re diag(M). A wide A = Q [R1 R2]
// is the square case of A1 = Q R1 with gQ + A2 gR2^H, and gA2 = Q gR2.
Tensor qr_square_grad(const Tensor& Q, const Tensor& R, const Tensor& gQ, const Tensor& gR) {
  Tensor M = sub(matmul(gR, mH(R)), matmul(mH(Q), gQ));
  Tensor Mu = triu(M, 1);
  Tensor sym = add(add(Mu, mH(Mu)), diag_embed(real_part(diagonal(M, 0, -2, -1))));
  Tensor X = add(gQ, matmul(Q, sym));
  return linalg::solve_triangular(mH(R), X, /*upper=*/false, /*left=*/false);
}
TensorList qr_grad(G c, GL go) {
  const std::string& mode = attr<std::string>(c.attrs, 0);
  KILN_CHECK(mode != "r", Runtime, "linalg.qr", "The derivative of linalg.qr depends on Q, which is not computed when "
             "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.");
  const Tensor &Q = c.out[0], &R = c.out[1];
  const int64_t m = Q.size(-2), n = R.size(-1);
  KILN_CHECK(mode == "reduced" || m <= n, Runtime, "linalg.qr", "The QR decomposition is not differentiable when "
             "mode='complete' and nrows > ncols.");
  if (m >= n) return {qr_square_grad(Q, R, go[0], go[1])};
  Tensor R1 = narrow(R, -1, 0, m), R2 = narrow(R, -1, m, n - m);
  Tensor gR1 = narrow(go[1], -1, 0, m), gR2 = narrow(go[1], -1, m, n - m);
  Tensor A2 = matmul(Q, R2);
  Tensor gA1 = qr_square_grad(Q, R1, add(go[0], matmul(A2, mH(gR2))), gR1);
  return {cat({gA1, matmul(Q, gR2)}, -1)};
}
DerivativeByName d_qr{"linalg_qr", qr_grad, 0, 0b11};

// _linalg_eigh: A = V diag(L) V^H, so gA = V (diag(gL) + (V^H gV) / E) V^H with E_jk = L_k - L_j, made
// Hermitian.
TensorList eigh_grad(G c, GL go) {
  const Tensor &L = c.out[0], &V = c.out[1];
  KILN_CHECK(V.dim() >= 2, Runtime, "linalg.eigvalsh", "the derivative needs the eigenvectors, which this call did "
             "not compute");
  Tensor inner = diag_embed(go[0]);
  if (go[1].dim() >= 2) {
    Tensor VhgV = matmul(mH(V), go[1]);
    inner = add(zero_diagonal(div(VhgV, pair_differences(L))), inner);
  }
  Tensor gA = matmul(V, matmul(inner, mH(V)));
  return {mul(add(gA, mH(gA)), Scalar(0.5))};  // A is Hermitian: its gradient is too, as torch's
}
DerivativeByName d_eigh{"_linalg_eigh", eigh_grad, 0, 0b11};

// linalg_eig: A = V diag(L) V^-1 with unit-norm vectors. gA = V^-H (diag(gL) + (W - V^H V Re diag(W)) / conj(E))
// V^H, W = V^H gV (the gauge term keeps the loss's dependence on each vector's phase out); real for a real A.
TensorList eig_grad(G c, GL go) {
  const Tensor &L = c.out[0], &V = c.out[1];
  Tensor VH = mH(V);
  Tensor W = matmul(VH, go[1]);
  check_gauge(imag(diagonal(W, 0, -2, -1)), "linalg_eig_backward", "eigenvectors");
  Tensor re = real(diagonal(W, 0, -2, -1));
  Tensor inner = sub(W, mul(matmul(VH, V), unsqueeze(re, -2)));
  inner = zero_diagonal(div(inner, conj(pair_differences(L))));
  inner = add(inner, diag_embed(go[0]));
  Tensor gA = linalg::solve(VH, matmul(inner, VH));
  return {c.in_specs[0].is_complex() ? gA : real(gA)};
}
DerivativeByName d_eig{"linalg_eig", eig_grad, 0, 0b11};

// _linalg_svd: A = U diag(S) Vh. With E_jk = S_k^2 - S_j^2 and skew(X) = X - X^H,
// gA = U [ (skew(U^H gU) S + S skew(V^H gV)) / E + diag(gS) + i Im diag(U^H gU) / S ] Vh
//      + (I - U U^H) gU S^-1 Vh + U S^-1 gVh (I - V Vh).
// With full_matrices only the first k columns of U and rows of Vh take part, as in torch.
TensorList svd_grad(G c, GL go) {
  Tensor U = c.out[0], S = c.out[1], Vh = c.out[2];
  Tensor gU = go[0], gS = go[1], gVh = go[2];
  const bool uv = attr<bool>(c.attrs, 1);
  KILN_CHECK(uv && U.dim() >= 2, Runtime, "linalg.svdvals", "the derivative needs the singular vectors, which this "
             "call did not compute");
  const int64_t k = S.size(-1), m = U.size(-2), n = Vh.size(-1);
  if (U.size(-1) != k) U = narrow(U, -1, 0, k), gU = narrow(gU, -1, 0, k);
  if (Vh.size(-2) != k) Vh = narrow(Vh, -2, 0, k), gVh = narrow(gVh, -2, 0, k);
  Tensor UH = mH(U), V = mH(Vh);
  Tensor UhgU = matmul(UH, gU), VhgV = matmul(Vh, mH(gVh));
  if (U.is_complex())
    check_gauge(imag(add(diagonal(UhgU, 0, -2, -1), diagonal(VhgV, 0, -2, -1))), "svd_backward", "singular vectors");
  Tensor E = pair_differences(mul(S, S));
  Tensor core = div(add(mul(sub(UhgU, mH(UhgU)), unsqueeze(S, -2)), mul(unsqueeze(S, -1), sub(VhgV, mH(VhgV)))), E);
  core = add(zero_diagonal(core), diag_embed(gS));
  if (U.is_complex())
    core = add(core, diag_embed(complex(zeros_like(S), div(imag(diagonal(UhgU, 0, -2, -1)), S))));
  Tensor gA = matmul(U, matmul(core, Vh));
  if (m > k) {  // tall: the part of gU outside U's span
    Tensor gUS = div(gU, unsqueeze(S, -2));
    gA = add(gA, matmul(sub(gUS, matmul(U, matmul(UH, gUS))), Vh));
  }
  if (n > k) {  // wide: the part of gVh outside Vh's span
    Tensor gVS = div(gVh, unsqueeze(S, -1));
    gA = add(gA, matmul(U, sub(gVS, matmul(matmul(gVS, V), Vh))));
  }
  return {gA};
}
DerivativeByName d_svd{"_linalg_svd", svd_grad, 0, 0b111};

// The derivative of P = pinv(A) (Golub and Pereyra; torch's): for gP,
// gA = -P^H gP P^H + (I - A P) gP^H P P^H + P^H P gP^H (I - P A).
Tensor pinv_backward(const Tensor& gP, const Tensor& P, const Tensor& A) {
  Tensor PH = mH(P), gPH = mH(gP);
  Tensor t1 = neg(matmul(PH, matmul(gP, PH)));
  Tensor y = matmul(gPH, matmul(P, PH));
  Tensor t2 = sub(y, matmul(A, matmul(P, y)));
  Tensor z = matmul(matmul(PH, P), gPH);
  Tensor t3 = sub(z, matmul(matmul(z, P), A));
  return add(add(t1, t2), t3);
}
TensorList pinv_grad(G c, GL go) { return {pinv_backward(go[0], c.out[0], c.in[0])}; }
DerivativeByName d_pinv{"_linalg_pinv", pinv_grad, 0b1, 0b1};

// _linalg_lstsq: the solution is pinv(A) B (torch's derivative); the rank and singular values are not
// differentiable. gB = P^H gX, and A's gradient is pinv's for gP = gX B^H.
TensorList lstsq_grad(G c, GL go) {
  const Tensor &A = c.in[0], &B = c.in[1];
  Tensor P = linalg::pinv(A);
  Tensor gX = go[0];
  Tensor gA = c.needs[0] ? pinv_backward(matmul(gX, mH(B)), P, A) : Tensor();
  Tensor gB = c.needs[1] ? matmul(mH(P), gX) : Tensor();
  // the residuals ||A X - B||^2 (per column, where returned): at the optimum only the explicit terms
  // count: gA += 2 (A X - B) diag(gR) X^H, gB -= 2 (A X - B) diag(gR)
  if (go[1].numel() > 0) {
    const Tensor& X = c.out[0];
    Tensor Rg = mul(sub(matmul(A, X), B), mul(unsqueeze(go[1], -2), Scalar(2)));
    if (c.needs[0]) gA = add(gA, matmul(Rg, mH(X)));
    if (c.needs[1]) gB = sub(gB, Rg);
  }
  return {gA, gB};
}
DerivativeByName d_lstsq{"_linalg_lstsq", lstsq_grad, 0b11, 0b1};

// linalg_matrix_exp: the adjoint of the Fréchet derivative, exp([[A^H, g], [0, A^H]])'s top-right block.
TensorList matrix_exp_grad(G c, GL go) {
  const Tensor& A = c.in[0];
  const int64_t n = A.size(-1);
  Tensor AH = mH(A);
  Tensor top = cat({AH, go[0]}, -1), bottom = cat({zeros_like(AH), AH}, -1);
  Tensor E = linalg::matrix_exp(cat({top, bottom}, -2));
  return {narrow(narrow(E, -2, 0, n), -1, n, n)};
}
DerivativeByName d_matrix_exp{"linalg_matrix_exp", matrix_exp_grad, 0b1, 0};

}  // namespace
}  // namespace kiln
