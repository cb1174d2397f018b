// kiln::special — torch.special's functions that are ops of their own (the others are kiln's
// elementwise ops under torch.special's names, bound in python/kiln/special.py): Bessel and modified
// Bessel functions, Airy Ai, the normal distribution (ndtr, ndtri, log_ndtr), erfcx, entr, sinc,
// xlog1py, the Hurwitz zeta, the regularized incomplete gamma functions, multigammaln and the
// classical orthogonal polynomials. float results (integers promote to the default float), computed
// in double; differentiable where torch is, and also for the Bessel functions (kiln/ops/special.cpp).
#pragma once

#include "kiln/core/tensor.h"

namespace kiln {

Tensor i0(const Tensor& x);
Tensor sinc(const Tensor& x);
Tensor igamma(const Tensor& a, const Tensor& x);   // regularized lower incomplete gamma P(a, x)
Tensor igammac(const Tensor& a, const Tensor& x);  // regularized upper incomplete gamma Q(a, x)
Tensor mvlgamma(const Tensor& x, int64_t p);       // multivariate log-gamma of dimension p
Tensor polygamma(int64_t n, const Tensor& x);     // the n-th derivative of digamma

namespace special {
Tensor airy_ai(const Tensor& x);
Tensor bessel_j0(const Tensor& x);
Tensor bessel_j1(const Tensor& x);
Tensor bessel_y0(const Tensor& x);
Tensor bessel_y1(const Tensor& x);
Tensor modified_bessel_i0(const Tensor& x);
Tensor modified_bessel_i1(const Tensor& x);
Tensor modified_bessel_k0(const Tensor& x);
Tensor modified_bessel_k1(const Tensor& x);
Tensor scaled_modified_bessel_k0(const Tensor& x);  // e^x K0(x)
Tensor scaled_modified_bessel_k1(const Tensor& x);  // e^x K1(x)
Tensor spherical_bessel_j0(const Tensor& x);
Tensor i0e(const Tensor& x);  // e^{-|x|} I0(x)
Tensor i1(const Tensor& x);
Tensor i1e(const Tensor& x);  // e^{-|x|} I1(x)
Tensor ndtr(const Tensor& x);
Tensor ndtri(const Tensor& p);
Tensor log_ndtr(const Tensor& x);
Tensor erfcx(const Tensor& x);  // e^{x^2} erfc(x)
Tensor entr(const Tensor& x);   // -x log x
Tensor xlog1py(const Tensor& x, const Tensor& y);
Tensor zeta(const Tensor& x, const Tensor& q);  // Hurwitz zeta
Tensor gammainc(const Tensor& a, const Tensor& x);
Tensor gammaincc(const Tensor& a, const Tensor& x);
Tensor multigammaln(const Tensor& x, int64_t p);
// the polynomials of degree n (n is read as an integer; n < 0 gives 0)
Tensor chebyshev_polynomial_t(const Tensor& x, const Tensor& n);
Tensor chebyshev_polynomial_u(const Tensor& x, const Tensor& n);
Tensor chebyshev_polynomial_v(const Tensor& x, const Tensor& n);
Tensor chebyshev_polynomial_w(const Tensor& x, const Tensor& n);
Tensor shifted_chebyshev_polynomial_t(const Tensor& x, const Tensor& n);
Tensor shifted_chebyshev_polynomial_u(const Tensor& x, const Tensor& n);
Tensor shifted_chebyshev_polynomial_v(const Tensor& x, const Tensor& n);
Tensor shifted_chebyshev_polynomial_w(const Tensor& x, const Tensor& n);
Tensor hermite_polynomial_h(const Tensor& x, const Tensor& n);
Tensor hermite_polynomial_he(const Tensor& x, const Tensor& n);
Tensor laguerre_polynomial_l(const Tensor& x, const Tensor& n);
Tensor legendre_polynomial_p(const Tensor& x, const Tensor& n);
}  // namespace special

}  // namespace kiln
