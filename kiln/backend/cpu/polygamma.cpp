// CPU kernel of polygamma(n, x), n >= 1 (its op-table entry, schema, meta, derivative and front end
// are in kiln/ops/polygamma.cpp), registered by op name.
//   n = 1 (trigamma): reflection below 1/2, recurrence up to x >= 10, asymptotic series.
//   n >= 2: (-1)^(n+1) n! zeta(n + 1, x), the Hurwitz zeta by direct summation then
//   Euler–Maclaurin.
// Computed in double for every floating dtype and rounded once; any input layout and dtype is read in
// place (no temporaries, no nested op calls).
#include <cmath>
#include <limits>
#include <numbers>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/core/convert.h"
#include "kiln/core/visit.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// B_2k / (2k)! for k = 1..8: the Euler–Maclaurin coefficients.
constexpr double kBernoulliOverFact[8] = {
    1.0 / 6.0 / 2.0,           -1.0 / 30.0 / 24.0,
    1.0 / 42.0 / 720.0,        -1.0 / 30.0 / 40320.0,
    5.0 / 66.0 / 3628800.0,    -691.0 / 2730.0 / 479001600.0,
    7.0 / 6.0 / 87178291200.0, -3617.0 / 510.0 / 20922789888000.0,
};

double trigamma_scalar(double x) {
  if (std::isnan(x) || x == -kInf) return kNaN;
  if (x == kInf) return 0.0;
  if (x <= 0 && x == std::floor(x)) return kInf;
  double reflect = 0.0, sign = 1.0;
  if (x < 0.5) {
    // psi1(x) + psi1(1 - x) = pi^2 / sin^2(pi x); reduce the argument of sin first
    double s = std::sin(std::numbers::pi * (x - std::round(x)));
    reflect = std::numbers::pi * std::numbers::pi / (s * s);
    sign = -1.0;
    x = 1.0 - x;
  }
  double acc = 0.0;
  while (x < 10.0) {
    acc += 1.0 / (x * x);
    x += 1.0;
  }
  // psi1(x) ~ 1/x + 1/(2x^2) + sum_k B_2k / x^(2k+1)
  double ix = 1.0 / x, ix2 = ix * ix, series = 0.0;
  static constexpr double kB[6] = {1.0 / 6.0,   -1.0 / 30.0, 1.0 / 42.0,
                                   -1.0 / 30.0, 5.0 / 66.0,  -691.0 / 2730.0};
  for (int k = 5; k >= 0; --k) series = series * ix2 + kB[k];
  acc += ix + 0.5 * ix2 + series * ix2 * ix;
  return reflect + sign * acc;
}

// Hurwitz zeta(s, q) for an integer s >= 2 (any real q that is not a pole).
double hurwitz_zeta_int(int64_t s, double q) {
  if (std::isnan(q) || q == -kInf) return kNaN;
  if (q == kInf) return 0.0;
  if (q <= 0 && q == std::floor(q)) return kInf;
  const double sd = static_cast<double>(s);
  double acc = 0.0;
  const double start = 12.0 + sd;  // series terms shrink like ((s + 2k) / (2 pi q))^2
  while (q < start) {
    acc += std::pow(q, -sd);
    q += 1.0;
  }
  // tail: q^(1-s)/(s-1) + q^(-s)/2 + sum_k B_2k/(2k)! * s(s+1)...(s+2k-2) q^(-s-2k+1)
  double qs = std::pow(q, -sd);
  acc += q * qs / (sd - 1.0) + 0.5 * qs;
  double term = qs / q;  // q^(-s-1)
  double rising = sd;    // s (s+1) ... (s + 2k - 2)
  for (int k = 0; k < 8; ++k) {
    double t = kBernoulliOverFact[k] * rising * term;
    acc += t;
    if (std::fabs(t) < 1e-17 * std::fabs(acc)) break;
    rising *= (sd + 2 * k + 1) * (sd + 2 * k + 2);
    term /= q * q;
  }
  return acc;
}

double polygamma_scalar(int64_t n, double x) {
  if (n == 1) return trigamma_scalar(x);
  // torch's infinities: +inf gives NaN, -inf the sign of (-1)^(n+1) n! zeta(n + 1, -inf) = inf
  if (std::isinf(x)) return x > 0 ? std::numeric_limits<double>::quiet_NaN()
                                  : (n % 2 ? 1.0 : -1.0) * std::numeric_limits<double>::infinity();
  double z = hurwitz_zeta_int(n + 1, x);
  double f = std::exp(std::lgamma(static_cast<double>(n) + 1.0));  // n!
  return (n % 2 ? 1.0 : -1.0) * f * z;
}

void polygamma_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const int64_t n = attr<int64_t>(a, 0);
  const Tensor& x = in[0];
  Tensor& y = out[0];
  visit_real(x.dtype(), op.name, [&]<class X>() {
    visit_floating(y.dtype(), op.name, [&]<class Y>() {
      cpu::for_each(cpu::make_loop({&y, &x}, y.sizes()), [&](char** d, const int64_t* s, int64_t len) {
        char *yp = d[0], *xp = d[1];
        for (int64_t i = 0; i < len; ++i, yp += s[0], xp += s[1])
          *reinterpret_cast<Y*>(yp) =
              convert<Y>(polygamma_scalar(n, convert<double>(*reinterpret_cast<const X*>(xp))));
      }, 2048);  // a costly element: a small grain
    });
  });
}

KernelRegistrar k_polygamma{"polygamma", DeviceType::CPU, polygamma_kernel};

}  // namespace
}  // namespace kiln
