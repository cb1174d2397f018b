// The special-function families (torch.special): X(op name, code, schema name). One line adds an op
// table entry (kiln/ops/special.cpp: meta, schema, derivative) and a case of the CPU kernel
// (kiln/backend/cpu/special.cpp: the scalar mathematics in double precision).
#pragma once

// unary: float results (integers and bool promote to the default float)
#define KILN_SPECIAL_UNARY(X)                                                                     \
  X(special_airy_ai, AiryAi) X(special_bessel_j0, BesselJ0) X(special_bessel_j1, BesselJ1)        \
  X(special_bessel_y0, BesselY0) X(special_bessel_y1, BesselY1)                                   \
  X(special_modified_bessel_i0, ModI0) X(special_modified_bessel_i1, ModI1)                      \
  X(special_modified_bessel_k0, ModK0) X(special_modified_bessel_k1, ModK1)                      \
  X(special_scaled_modified_bessel_k0, ScaledK0) X(special_scaled_modified_bessel_k1, ScaledK1)  \
  X(special_spherical_bessel_j0, SphJ0) X(i0, I0) X(special_i0e, I0e) X(special_i1, I1)         \
  X(special_i1e, I1e) X(special_ndtr, Ndtr) X(special_ndtri, Ndtri) X(special_log_ndtr, LogNdtr) \
  X(special_erfcx, Erfcx) X(special_entr, Entr) X(sinc, Sinc)

// binary: (x, y) broadcast, promoted, integers to the default float
#define KILN_SPECIAL_BINARY(X)                                                                      \
  X(special_xlog1py, Xlog1py) X(special_zeta, Zeta) X(igamma, Igamma) X(igammac, Igammac)          \
  X(special_chebyshev_polynomial_t, ChebT) X(special_chebyshev_polynomial_u, ChebU)                \
  X(special_chebyshev_polynomial_v, ChebV) X(special_chebyshev_polynomial_w, ChebW)                \
  X(special_shifted_chebyshev_polynomial_t, SChebT) X(special_shifted_chebyshev_polynomial_u, SChebU) \
  X(special_shifted_chebyshev_polynomial_v, SChebV) X(special_shifted_chebyshev_polynomial_w, SChebW) \
  X(special_hermite_polynomial_h, HermiteH) X(special_hermite_polynomial_he, HermiteHe)             \
  X(special_laguerre_polynomial_l, LaguerreL) X(special_legendre_polynomial_p, LegendreP)

namespace kiln {
#define KILN_SPECIAL_CODE(name, code) code,
enum class SpecialOp : int { KILN_SPECIAL_UNARY(KILN_SPECIAL_CODE) KILN_SPECIAL_BINARY(KILN_SPECIAL_CODE) };
#undef KILN_SPECIAL_CODE
}  // namespace kiln
