// CPU kernels of the special functions (kiln/ops/special_list.h; op entries in kiln/ops/special.cpp).
// Every element is read in the result dtype (as torch promotes), computed in double and rounded once. The Bessel functions of
// integer and one-third order come from the C++17 special functions of the standard library
// (std::cyl_bessel_j / _i / _k, std::cyl_neumann); the rest is written here from the mathematics:
// power series, Euler-Maclaurin summation, continued fractions, asymptotic expansions and Newton
// steps, each noted where it is used. Domain errors give NaN (the standard functions, which throw
// outside their domain, are only called inside it).
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>

#include "kiln/backend/cpu/loop.h"
#include "kiln/core/convert.h"
#include "kiln/core/visit.h"
#include "kiln/dispatch/op.h"
#include "kiln/ops/special_list.h"

namespace kiln::cpu {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kEps = std::numeric_limits<double>::epsilon();
constexpr double kPi = 3.14159265358979323846;
constexpr double kSqrt2Pi = 2.50662827463100050242;  // sqrt(2 pi)

// ---- Bessel functions ---------------------------------------------------------------------------------
// The standard library's Bessel functions throw std::domain_error outside the ranges their methods
// cover (beyond them the asymptotic series above serve); a throw inside a kernel would end the
// process, so each call is guarded and gives NaN instead.
template <class F>
double guarded(F&& f) {
  try {
    return f();
  } catch (...) {
    return kNan;
  }
}

// (at +-inf torch gives NaN for J, Y, I, Ai and sinc, though the limits exist: kiln follows it)
double j0(double x) {
  if (std::isnan(x) || std::isinf(x)) return kNan;
  return guarded([&] { return std::cyl_bessel_j(0.0, std::fabs(x)); });  // even
}
double j1(double x) {
  if (std::isnan(x) || std::isinf(x)) return kNan;
  const double r = guarded([&] { return std::cyl_bessel_j(1.0, std::fabs(x)); });  // odd
  return x < 0 ? -r : r;
}
double yn(double nu, double x) {
  if (std::isnan(x)) return x;
  if (x < 0) return kNan;
  if (x == 0) return -kInf;
  if (std::isinf(x)) return kNan;
  return guarded([&] { return std::cyl_neumann(nu, x); });
}

// I_nu(x) e^{-x} and K_nu(x) e^{x} for large x: the asymptotic series
//   I: (2 pi x)^{-1/2} sum_k (-1)^k a_k / x^k,  K: (pi / 2x)^{1/2} sum_k a_k / x^k,
//   a_k = prod_{j=1..k} (4 nu^2 - (2j - 1)^2) / (k! 8^k)
double scaled_asymptotic(double nu, double x, bool k_kind) {
  const double mu = 4 * nu * nu;
  double term = 1.0, sum = 1.0;
  for (int k = 1; k < 30; ++k) {
    term *= (mu - (2.0 * k - 1) * (2.0 * k - 1)) / (k * 8.0 * x);
    const double t = k_kind ? term : (k % 2 ? -term : term);
    sum += t;
    if (std::fabs(t) < kEps * std::fabs(sum)) break;
  }
  return k_kind ? std::sqrt(kPi / (2 * x)) * sum : sum / std::sqrt(2 * kPi * x);
}
constexpr double kScaledSwitch = 500.0;  // above it e^{±x} leaves the double range: the series instead

double mod_i(double nu, double x, bool scaled) {  // I_nu(x) (e^{-|x|} I_nu(x) when scaled); nu = 0 or 1
  if (std::isnan(x)) return x;
  const double a = std::fabs(x);
  double r;
  if (std::isinf(a)) r = scaled ? 0.0 : kNan;
  else if (a > kScaledSwitch) r = scaled ? scaled_asymptotic(nu, a, false) : std::exp(a) * scaled_asymptotic(nu, a, false);
  else r = guarded([&] { return scaled ? std::exp(-a) * std::cyl_bessel_i(nu, a) : std::cyl_bessel_i(nu, a); });
  return nu == 1 && x < 0 ? -r : r;
}
double mod_k(double nu, double x, bool scaled) {  // K_nu(x) (e^{x} K_nu(x) when scaled)
  if (std::isnan(x)) return x;
  if (x < 0) return kNan;
  if (x == 0) return kInf;
  if (std::isinf(x)) return 0.0;
  if (x > kScaledSwitch) return scaled ? scaled_asymptotic(nu, x, true) : std::exp(-x) * scaled_asymptotic(nu, x, true);
  return guarded([&] { return scaled ? std::exp(x) * std::cyl_bessel_k(nu, x) : std::cyl_bessel_k(nu, x); });
}

double spherical_j0(double x) {
  if (std::isnan(x)) return x;
  if (std::isinf(x)) return 0.0;
  if (x == 0) return 1.0;
  return std::sin(x) / x;
}

// Ai(x): the Maclaurin series Ai = c1 f - c2 g near 0 (f, g the two series solutions of y'' = x y);
// beyond, Ai(x) = sqrt(x / 3) K_{1/3}(z) / pi and Ai(-x) = sqrt(x) / 2 (J_{1/3}(z) - Y_{1/3}(z) / sqrt 3),
// z = 2/3 x^{3/2}
double airy_ai(double x) {
  if (std::isnan(x) || std::isinf(x)) return kNan;
  const double c1 = 0.355028053887817239260, c2 = 0.258819403792806798405;  // Ai(0), -Ai'(0)
  if (std::fabs(x) <= 2.0) {
    const double x3 = x * x * x;
    double f = 1.0, t = 1.0, g = x, u = x;
    for (int k = 1; k < 60; ++k) {
      t *= x3 / ((3.0 * k - 1) * (3.0 * k));
      u *= x3 / ((3.0 * k) * (3.0 * k + 1));
      f += t, g += u;
      if (std::fabs(t) + std::fabs(u) < kEps * (std::fabs(f) + std::fabs(g))) break;
    }
    return c1 * f - c2 * g;
  }
  const double a = std::fabs(x), z = 2.0 / 3.0 * a * std::sqrt(a);
  if (x > 0) return z > 700 ? 0.0 : guarded([&] { return std::sqrt(a / 3.0) / kPi * std::cyl_bessel_k(1.0 / 3.0, z); });
  return guarded([&] {
    return std::sqrt(a) / 2.0 * (std::cyl_bessel_j(1.0 / 3.0, z) - std::cyl_neumann(1.0 / 3.0, z) / std::sqrt(3.0));
  });
}

// ---- the normal distribution and erfc ----------------------------------------------------------------
// erfcx(x) = e^{x^2} erfc(x): directly where both factors are in range, the asymptotic series
// 1 / (x sqrt pi) sum_n (-1)^n (2n - 1)!! / (2 x^2)^n for large x, and erfcx(-x) = 2 e^{x^2} - erfcx(x)
double erfcx(double x) {
  if (std::isnan(x)) return x;
  if (x < 0) {
    if (x < -26.7) return kInf;
    return 2.0 * std::exp(x * x) - erfcx(-x);
  }
  if (x < 25.0) return std::exp(x * x) * std::erfc(x);
  if (std::isinf(x)) return 0.0;
  const double v = 1.0 / (2.0 * x * x);
  double term = 1.0, sum = 1.0;
  for (int n = 1; n < 12; ++n) {
    term *= -(2.0 * n - 1) * v;
    sum += term;
  }
  return sum / (x * std::sqrt(kPi));
}
double ndtr(double x) { return std::isnan(x) ? x : 0.5 * std::erfc(-x * M_SQRT1_2); }
// log Phi(x): log1p(-Phi(-x)) for large x, log Phi(x) in the middle, and for very negative x
// log(erfcx(t) / 2) - t^2 with t = -x / sqrt 2 (Phi underflows there)
double log_ndtr(double x) {
  if (std::isnan(x)) return x;
  if (x > 6.0) return std::log1p(-0.5 * std::erfc(x * M_SQRT1_2));
  if (x > -20.0) return std::log(0.5 * std::erfc(-x * M_SQRT1_2));
  const double t = -x * M_SQRT1_2;
  return std::log(0.5 * erfcx(t)) - t * t;
}
// Phi^{-1}(p): Newton's method on log Phi(x) - log p, which is concave and increasing in x, so the
// iteration converges from any start; it starts from Abramowitz & Stegun 26.2.23 (|error| < 4.5e-4).
// p > 1/2 by symmetry.
double ndtri(double p) {
  if (std::isnan(p) || p < 0 || p > 1) return kNan;
  if (p == 0) return -kInf;
  if (p == 1) return kInf;
  if (p == 0.5) return 0.0;
  if (p > 0.5) return -ndtri(1.0 - p);
  const double t = std::sqrt(-2.0 * std::log(p));
  double x = -(t - (2.515517 + 0.802853 * t + 0.010328 * t * t) /
                       (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t));
  const double lp = std::log(p);
  for (int it = 0; it < 20; ++it) {
    const double lphi = log_ndtr(x);
    // d/dx log Phi(x) = phi(x) / Phi(x) = exp(-x^2 / 2 - log Phi(x)) / sqrt(2 pi)
    const double step = (lphi - lp) / (std::exp(-0.5 * x * x - lphi) / kSqrt2Pi);
    x -= step;
    if (std::fabs(step) <= 4 * kEps * std::max(1.0, std::fabs(x))) break;
  }
  return x;
}

double entr(double x) {
  if (std::isnan(x)) return x;
  if (x > 0) return -x * std::log(x);
  if (x == 0) return 0.0;
  return -kInf;
}
double sinc(double x) {
  if (std::isnan(x)) return x;
  if (x == 0) return 1.0;
  if (std::isinf(x)) return kNan;
  const double px = kPi * x;
  return std::sin(px) / px;
}

// ---- binary ------------------------------------------------------------------------------------------
double xlog1py(double x, double y) {
  if (std::isnan(y)) return kNan;
  if (x == 0) return 0.0;
  return x * std::log1p(y);
}

// Hurwitz zeta(s, q) = sum_k (q + k)^{-s}: the first terms summed until q + N >= a bound that keeps the
// Euler-Maclaurin tail convergent, then a^{1-s} / (s - 1) + a^{-s} / 2 + sum_j B_2j / (2j)! s^(2j-1) a^{-s-2j+1}
double zeta(double s, double q) {
  // torch's (Cephes') order of checks: s = 1 first, then s < 1, then the poles q = 0, -1, ...
  if (s == 1) return kInf;
  if (s < 1) return kNan;
  if (q <= 0) {
    if (q == std::floor(q)) return kInf;
    if (s != std::floor(s)) return kNan;  // a negative base to a non-integer power
  }
  if (std::isnan(s) || std::isnan(q) || std::isinf(q)) return kNan;
  if (std::isinf(s)) return q == 1 ? 1.0 : q > 1 ? kNan : kInf;  // torch's (0 / 0 in its sum for q > 1)
  static const double kB2j[] = {1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6,
                                -3617.0 / 510, 43867.0 / 798, -174611.0 / 330, 854513.0 / 138,
                                -236364091.0 / 2730};
  const double bound = std::max(10.0, s / 4.0 + 10.0);
  double sum = 0.0, a = q;
  while (a < bound) {
    const double t = std::pow(a, -s);
    sum += t;
    a += 1.0;
  }
  const double as = std::pow(a, -s);
  sum += a * as / (s - 1.0) + 0.5 * as;
  // j = 1: B2 / 2! * s * a^{-s-1}; then times (s + 2j - 1)(s + 2j) / (a^2 (2j + 1)(2j + 2)) and B ratio
  double fac = s * as / a / 2.0;  // s a^{-s-1} / 2!
  for (int j = 1; j <= 12; ++j) {
    const double t = kB2j[j - 1] * fac;
    sum += t;
    if (std::fabs(t) < kEps * std::fabs(sum)) break;
    fac *= (s + 2.0 * j - 1) * (s + 2.0 * j) / (a * a * (2.0 * j + 1) * (2.0 * j + 2));
  }
  return sum;
}

// regularized incomplete gamma P(a, x) and Q(a, x) = 1 - P: the power series of P for x < a + 1, the
// continued fraction of Q (modified Lentz) beyond, both times x^a e^{-x} / Gamma(a)
double gamma_prefactor(double a, double x) { return std::exp(a * std::log(x) - x - std::lgamma(a)); }
double gamma_p_series(double a, double x) {
  double term = 1.0 / a, sum = term;
  for (int n = 1; n < 100000; ++n) {
    term *= x / (a + n);
    sum += term;
    if (std::fabs(term) < kEps * std::fabs(sum)) break;
  }
  return sum * gamma_prefactor(a, x);
}
double gamma_q_fraction(double a, double x) {
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1.0) < kEps) break;
  }
  return h * gamma_prefactor(a, x);
}
// the special cases in torch's order (a NaN is not tested first: gammainc(nan, inf) is 1)
double igamma(double a, double x) {  // P(a, x)
  if (x < 0 || a < 0) return kNan;
  if (a == 0) return x > 0 ? 1.0 : kNan;
  if (x == 0) return 0.0;
  if (std::isinf(a)) return std::isinf(x) ? kNan : 0.0;
  if (std::isinf(x)) return 1.0;
  if (std::isnan(a) || std::isnan(x)) return kNan;
  return x < a + 1.0 ? gamma_p_series(a, x) : 1.0 - gamma_q_fraction(a, x);
}
double igammac(double a, double x) {  // Q(a, x)
  if (x < 0 || a < 0) return kNan;
  if (a == 0) return x > 0 ? 0.0 : kNan;
  if (x == 0) return 1.0;
  if (std::isinf(a)) return std::isinf(x) ? kNan : 1.0;
  if (std::isinf(x)) return 0.0;
  if (std::isnan(a) || std::isnan(x)) return kNan;
  return x < a + 1.0 ? 1.0 - gamma_p_series(a, x) : gamma_q_fraction(a, x);
}

// ---- orthogonal polynomials (torch's conventions: n < 0 gives 0, the end points |x| = 1 exactly,
// the trigonometric forms inside (-1, 1) for large n, the three-term recurrences otherwise)
double cheb_t(double x, int64_t n) {
  if (n < 0) return 0.0;
  if (std::fabs(x) == 1.0) return x > 0 || n % 2 == 0 ? 1.0 : -1.0;
  if (n > 6 && std::fabs(x) < 1.0) return std::cos(n * std::acos(x));
  if (n == 0) return 1.0;
  if (n == 1) return x;
  double p = 1.0, q = x, r = 0.0;
  for (int64_t k = 2; k <= n; ++k) r = (x + x) * q - p, p = q, q = r;
  return r;
}
double cheb_u(double x, int64_t n) {
  if (n < 0) return 0.0;
  if (std::fabs(x) == 1.0) return x > 0 || n % 2 == 0 ? n + 1.0 : -(n + 1.0);
  if (n > 8 && std::fabs(x) < 1.0) {
    const double t = std::acos(x);
    if (std::sin(t) != 0) return std::sin((n + 1) * t) / std::sin(t);
    return (n + 1) * std::cos((n + 1) * t) / x;
  }
  if (n == 0) return 1.0;
  if (n == 1) return x + x;
  double p = 1.0, q = x + x, r = 0.0;
  for (int64_t k = 2; k <= n; ++k) r = (x + x) * q - p, p = q, q = r;
  return r;
}
double cheb_v(double x, int64_t n) {
  if (n < 0) return 0.0;
  if (std::fabs(x) == 1.0) {
    if (x > 0) return 1.0;
    return n % 2 == 0 ? n + n + 1.0 : -(n + n + 1.0);
  }
  if (n > 8 && std::fabs(x) < 1.0) {
    const double t = std::acos(x);
    if (std::sin(t / 2) != 1.0) return std::cos((n + 0.5) * t) / std::cos(t / 2);
    return n % 2 == 0 ? n + n + 1.0 : -(n + n + 1.0);
  }
  if (n == 0) return 1.0;
  if (n == 1) return x + x - 1.0;
  double p = 1.0, q = x + x - 1.0, r = 0.0;
  for (int64_t k = 2; k <= n; ++k) r = (x + x) * q - p, p = q, q = r;
  return r;
}
double cheb_w(double x, int64_t n) {
  if (n < 0) return 0.0;
  if (std::fabs(x) == 1.0) {
    if (x > 0) return n + n + 1.0;
    return n % 2 == 0 ? 1.0 : -1.0;
  }
  if (n > 8 && std::fabs(x) < 1.0) {
    const double t = std::acos(x);
    if (std::cos(t / 2) != 1.0) return std::sin((n + 0.5) * t) / std::sin(t / 2);
    if (x > 0) return n + n + 1.0;
    return n % 2 == 0 ? 1.0 : -1.0;
  }
  if (n == 0) return 1.0;
  if (n == 1) return x + x + 1.0;
  double p = 1.0, q = x + x + 1.0, r = 0.0;
  for (int64_t k = 2; k <= n; ++k) r = (x + x) * q - p, p = q, q = r;
  return r;
}
double hermite_h(double x, int64_t n, int64_t limit) {
  if (n < 0) return 0.0;
  if (n > limit) return kNan;
  if (n == 0) return 1.0;
  if (n == 1) return x + x;
  double p = 1.0, q = x + x, r = 0.0;
  for (int64_t k = 2; k < n + n; k += 2) r = (x + x) * q - k * p, p = q, q = r;
  return r;
}
double hermite_he(double x, int64_t n, int64_t limit) {
  if (n < 0) return 0.0;
  if (n > limit) return kNan;
  if (n == 0) return 1.0;
  if (n == 1) return x;
  double p = 1.0, q = x, r = 0.0;
  for (int64_t k = 1; k < n; ++k) r = x * q - k * p, p = q, q = r;
  return r;
}
double laguerre_l(double x, int64_t n) {
  if (n < 0) return 0.0;
  if (std::fabs(x) == 0.0) return 1.0;
  if (n == 0) return 1.0;
  if (n == 1) return 1.0 - x;
  double p = 1.0, q = 1.0 - x, r = 0.0;
  for (int64_t k = 1; k < n; ++k) r = (((k + k) + (1.0 - x)) * q - k * p) / (k + 1), p = q, q = r;
  return r;
}
double legendre_p(double x, int64_t n) {
  if (n < 0) return 0.0;
  if (std::fabs(x) == 1.0) return x > 0 || n == 0 || n % 2 == 0 ? 1.0 : -1.0;
  if (n == 0) return 1.0;
  if (n == 1) return x;
  double p = 1.0, q = x, r = 0.0;
  for (int64_t k = 1; k < n; ++k) r = ((k + k + 1) * x * q - k * p) / (k + 1), p = q, q = r;
  return r;
}
int64_t degree(double n) { return std::isfinite(n) ? static_cast<int64_t>(n) : -1; }

double unary(SpecialOp op, double x) {
  using S = SpecialOp;
  switch (op) {
    case S::AiryAi: return airy_ai(x);
    case S::BesselJ0: return j0(x);
    case S::BesselJ1: return j1(x);
    case S::BesselY0: return yn(0.0, x);
    case S::BesselY1: return yn(1.0, x);
    case S::ModI0: case S::I0: return mod_i(0.0, x, false);
    case S::ModI1: case S::I1: return mod_i(1.0, x, false);
    case S::I0e: return mod_i(0.0, x, true);
    case S::I1e: return mod_i(1.0, x, true);
    case S::ModK0: return mod_k(0.0, x, false);
    case S::ModK1: return mod_k(1.0, x, false);
    case S::ScaledK0: return mod_k(0.0, x, true);
    case S::ScaledK1: return mod_k(1.0, x, true);
    case S::SphJ0: return spherical_j0(x);
    case S::Ndtr: return ndtr(x);
    case S::Ndtri: return ndtri(x);
    case S::LogNdtr: return log_ndtr(x);
    case S::Erfcx: return erfcx(x);
    case S::Entr: return entr(x);
    case S::Sinc: return sinc(x);
    default: return kNan;
  }
}

double binary(SpecialOp op, double x, double y, bool single) {
  const int64_t hermite_limit = single ? 128 : 512;  // torch's: its recurrence's range per precision
  using S = SpecialOp;
  switch (op) {
    case S::Xlog1py: return xlog1py(x, y);
    case S::Zeta: return zeta(x, y);
    case S::Igamma: return igamma(x, y);
    case S::Igammac: return igammac(x, y);
    case S::ChebT: return cheb_t(x, degree(y));
    case S::ChebU: return cheb_u(x, degree(y));
    case S::ChebV: return cheb_v(x, degree(y));
    case S::ChebW: return cheb_w(x, degree(y));
    case S::SChebT: return cheb_t(x + x - 1.0, degree(y));
    case S::SChebU: return cheb_u(x + x - 1.0, degree(y));
    case S::SChebV: return cheb_v(x + x - 1.0, degree(y));
    case S::SChebW: return cheb_w(x + x - 1.0, degree(y));
    case S::HermiteH: return hermite_h(x, degree(y), hermite_limit);
    case S::HermiteHe: return hermite_he(x, degree(y), hermite_limit);
    case S::LaguerreL: return laguerre_l(x, degree(y));
    case S::LegendreP: return legendre_p(x, degree(y));
    default: return kNan;
  }
}

// sinc of a complex z: sin(pi z) / (pi z), 1 at 0 (torch computes it)
template <class C>
void complex_sinc(const Tensor& x, Tensor& y) {
  for_each(make_loop({&y, &x}, y.sizes()), [&](char** d, const int64_t* s, int64_t len) {
    char *yp = d[0], *xp = d[1];
    for (int64_t i = 0; i < len; ++i, yp += s[0], xp += s[1]) {
      const C v = *reinterpret_cast<const C*>(xp);
      const std::complex<double> z(v.real(), v.imag());
      const std::complex<double> r = z == 0.0 ? 1.0 : std::sin(kPi * z) / (kPi * z);
      *reinterpret_cast<C*>(yp) = C(static_cast<typename C::value_type>(r.real()),
                                    static_cast<typename C::value_type>(r.imag()));
    }
  }, 1024);
}

void unary_kernel(const OpDef& op, const TensorList& in, const Attrs&, TensorList& out) {
  const SpecialOp code = static_cast<SpecialOp>(op.code);
  const Tensor& x = in[0];
  Tensor& y = out[0];
  if (is_complex(x.dtype())) {  // sinc only (the meta refuses complex elsewhere)
    if (x.dtype() == kComplex64) complex_sinc<complex64>(x, y);
    else complex_sinc<complex128>(x, y);
    return;
  }
  visit_real(x.dtype(), op.name, [&]<class X>() {
    visit_floating(y.dtype(), op.name, [&]<class Y>() {
      for_each(make_loop({&y, &x}, y.sizes()), [&](char** d, const int64_t* s, int64_t len) {
        char *yp = d[0], *xp = d[1];
        for (int64_t i = 0; i < len; ++i, yp += s[0], xp += s[1])
          *reinterpret_cast<Y*>(yp) =
              convert<Y>(unary(code, convert<double>(convert<Y>(*reinterpret_cast<const X*>(xp)))));
      }, 1024);  // costly elements: a small grain
    });
  });
}

void binary_kernel(const OpDef& op, const TensorList& in, const Attrs&, TensorList& out) {
  const SpecialOp code = static_cast<SpecialOp>(op.code);
  const Tensor &a = in[0], &b = in[1];
  Tensor& y = out[0];
  visit_real(a.dtype(), op.name, [&]<class A>() {
    visit_real(b.dtype(), op.name, [&]<class B>() {
      visit_floating(y.dtype(), op.name, [&]<class Y>() {
        const bool single = y.dtype() != kFloat64;
        for_each(make_loop({&y, &a, &b}, y.sizes()), [&](char** d, const int64_t* s, int64_t len) {
          char *yp = d[0], *ap = d[1], *bp = d[2];
          for (int64_t i = 0; i < len; ++i, yp += s[0], ap += s[1], bp += s[2])
            // the inputs as the result dtype first (torch computes on the promoted values)
            *reinterpret_cast<Y*>(yp) =
                convert<Y>(binary(code, convert<double>(convert<Y>(*reinterpret_cast<const A*>(ap))),
                                  convert<double>(convert<Y>(*reinterpret_cast<const B*>(bp))), single));
        }, 1024);
      });
    });
  });
}

#define KILN_SPECIAL_UNARY_KERNEL(name, code) KernelRegistrar k_##name{#name, DeviceType::CPU, unary_kernel};
#define KILN_SPECIAL_BINARY_KERNEL(name, code) KernelRegistrar k_##name{#name, DeviceType::CPU, binary_kernel};
KILN_SPECIAL_UNARY(KILN_SPECIAL_UNARY_KERNEL)
KILN_SPECIAL_BINARY(KILN_SPECIAL_BINARY_KERNEL)
#undef KILN_SPECIAL_UNARY_KERNEL
#undef KILN_SPECIAL_BINARY_KERNEL

}  // namespace
}  // namespace kiln::cpu
