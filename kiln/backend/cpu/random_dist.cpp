// CPU kernels of the distribution samplers (their entries and front ends: kiln/ops/random_dist.cpp):
// gamma draws (Marsaglia and Tsang), Poisson draws (inversion below 10, Hörmann's transformed
// rejection PTRS above) and the reparameterisation derivative of a gamma draw. Computed in double.
//
// A rejection sampler uses a data-dependent number of uniforms, so an element cannot own a fixed
// slice of the Philox stream as random_fill_'s do. Element i instead gets one counter of the
// reserved range (start + i), and that counter mixed into the generator's key keys a Philox stream
// of its own, which the element reads for as long as it needs. The draws are a pure function of (key, start, i): the same
// for every thread count and every split of the work.
#include <cmath>
#include <limits>

#include "kiln/backend/cpu/parallel.h"
#include "kiln/core/convert.h"
#include "kiln/core/generator.h"
#include "kiln/core/visit.h"
#include "kiln/dispatch/op.h"

namespace kiln::cpu {
namespace {

class ElementStream {
 public:
  // Philox keys index independent streams: the element's key is the generator's key mixed with its
  // counter (the golden-ratio multiple makes neighbouring counters' keys differ in many bits).
  ElementStream(uint64_t key, uint64_t counter) : key_(key ^ (counter + 1) * 0x9E3779B97F4A7C15ULL) {}
  // uniform on (0, 1): 53 random bits, never 0 or 1
  double uniform() {
    if (pos_ == 4) refill();
    uint64_t hi = buf_[pos_++];
    if (pos_ == 4) refill();
    uint64_t lo = buf_[pos_++];
    uint64_t bits = ((hi << 32) | lo) >> 11;
    return (static_cast<double>(bits) + 0.5) * 0x1.0p-53;
  }
  double normal() {  // Box-Muller (one of the pair)
    double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }

 private:
  void refill() {
    buf_ = philox(key_, ctr_++);
    pos_ = 0;
  }
  uint64_t key_;
  uint64_t ctr_ = 0;
  std::array<uint32_t, 4> buf_{};
  int pos_ = 4;
};

// Gamma(alpha, 1): Marsaglia and Tsang (2000); alpha < 1 through Gamma(alpha + 1) * U^(1 / alpha).
double sample_gamma(double alpha, ElementStream& s) {
  if (!(alpha > 0)) return alpha == 0 ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(alpha)) return alpha;
  double boost = 1.0;
  if (alpha < 1.0) {
    boost = std::pow(s.uniform(), 1.0 / alpha);
    alpha += 1.0;
  }
  const double d = alpha - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = s.normal();
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = s.uniform(), x2 = x * x;
    if (u < 1.0 - 0.0331 * x2 * x2) return d * v * boost;
    if (std::log(u) < 0.5 * x2 + d * (1.0 - v + std::log(v))) return d * v * boost;
  }
}

// Poisson(lambda): products of uniforms below 10; PTRS (Hörmann 1993) above.
double sample_poisson(double lambda, ElementStream& s) {
  if (!(lambda >= 0)) return std::numeric_limits<double>::quiet_NaN();
  if (lambda == 0 || std::isinf(lambda)) return lambda;
  if (lambda >= 1e12) {  // PTRS's acceptance test cancels digits here; the normal limit is exact to ~1e-6
    return std::max(0.0, std::nearbyint(lambda + std::sqrt(lambda) * s.normal()));
  }
  if (lambda < 10) {
    const double limit = std::exp(-lambda);
    double prod = s.uniform();
    int64_t k = 0;
    while (prod > limit) {
      prod *= s.uniform();
      ++k;
    }
    return static_cast<double>(k);
  }
  const double slam = std::sqrt(lambda), loglam = std::log(lambda);
  const double b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b, inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
  const double vr = 0.9277 - 3.6224 / (b - 2);
  for (;;) {
    const double u = s.uniform() - 0.5, v = s.uniform();
    const double us = 0.5 - std::fabs(u);
    const double k = std::floor((2 * a / us + b) * u + lambda + 0.43);
    if (us >= 0.07 && v <= vr) return k;
    if (k < 0 || (us < 0.013 && v > us)) continue;
    if (std::log(v) + std::log(inv_alpha) - std::log(a / (us * us) + b) <= -lambda + k * loglam - std::lgamma(k + 1))
      return k;
  }
}

// digamma in double: the recurrence up to 6, then the asymptotic series (error below 1e-15)
double digamma(double a) {
  double r = 0;
  while (a < 6) {
    r -= 1 / a;
    a += 1;
  }
  const double f = 1 / (a * a);
  return r + std::log(a) - 0.5 / a -
         f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132)))));
}

// d x / d alpha for a draw x ~ Gamma(alpha, 1) with its CDF value held fixed (implicit
// reparameterisation): -(dP/dalpha)(alpha, x) / p(x; alpha), exactly, from the function's own
// expansions differentiated in alpha. With P = e^-x x^a / Gamma(a) * S (the series, x < a + 1) or
// Q = 1 - P = e^-x x^a / Gamma(a) * H (the continued fraction), P / p = x S and Q / p = x H, so
//   below: dx/da = -x (S (log x - digamma(a)) + dS/da)
//   above: dx/da =  x (H (log x - digamma(a)) + dH/da)
// with dS/da summed beside S and dH/da carried through the Lentz recurrence (forward mode).
double standard_gamma_grad(double a, double x) {
  if (!(a > 0) || !(x > 0) || std::isinf(a) || std::isinf(x)) {
    if (x == 0 && a > 0) return 0;  // a draw clamped to 0 does not move
    return std::numeric_limits<double>::quiet_NaN();
  }
  const double lx_minus_psi = std::log(x) - digamma(a);
  if (x < a + 1) {
    double t = 1 / a, h = 1 / a, S = t, dS = -t * h;  // t_n = x^n / (a (a+1) ... (a+n)), h_n = sum 1/(a+k)
    for (int n = 1; n < 100000; ++n) {
      const double r = 1 / (a + n);
      t *= x * r;
      h += r;
      S += t;
      dS -= t * h;
      if (t < S * 1e-16 && t * h < std::fabs(dS) * 1e-16) break;
    }
    return -x * (S * lx_minus_psi + dS);
  }
  // modified Lentz on values and their derivatives in a (two divisions an iteration)
  const double tiny = 1e-300;
  double b = x + 1 - a, db = -1;
  double c = 1 / tiny, dc = 0;
  double d = 1 / b, dd = -db * d * d;
  double H = d, dH = dd;
  for (int i = 1; i < 100000; ++i) {
    const double an = -i * (i - a), dan = i;
    b += 2;
    double dv = an * d + b, ddv = dan * d + an * dd + db;
    if (std::fabs(dv) < tiny) dv = tiny, ddv = 0;
    const double ic = 1 / c, q = an * ic;
    const double dq = (dan - q * dc) * ic;
    c = b + q, dc = db + dq;
    if (std::fabs(c) < tiny) c = tiny, dc = 0;
    d = 1 / dv, dd = -ddv * d * d;
    const double del = d * c, ddel = dd * c + d * dc;
    dH = dH * del + H * ddel;
    H *= del;
    if (std::fabs(del - 1) < 1e-16 && std::fabs(ddel) * std::fabs(H) < 1e-16 * std::fabs(dH) + 1e-300) break;
  }
  return x * (H * lx_minus_psi + dH);
}

// attrs {key, first}: as random_fill_'s, reserved by the front end
template <class Fn>
void draw_kernel(const TensorList& in, const Attrs& a, TensorList& out, const char* op, Fn sample) {
  const Tensor& p = in[0];  // contiguous (the front end's)
  Tensor& y = out[0];
  const uint64_t key = static_cast<uint64_t>(attr<int64_t>(a, 0)), first = static_cast<uint64_t>(attr<int64_t>(a, 1));
  visit_floating(y.dtype(), op, [&]<class T>() {
    const T* pp = static_cast<const T*>(p.data_ptr());
    T* yp = static_cast<T*>(y.data_ptr());
    parallel_for(y.numel(), 256, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        ElementStream s(key, first + static_cast<uint64_t>(i));
        yp[i] = convert<T>(sample(convert<double>(pp[i]), s));
      }
    });
  });
}

void gamma_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const bool single = out[0].dtype() != kFloat64;
  draw_kernel(in, a, out, "_standard_gamma", [single](double alpha, ElementStream& s) {
    double x = sample_gamma(alpha, s);
    // torch's floor: the smallest normal number of the dtype (a draw never rounds to exactly 0)
    const double tiny = single ? static_cast<double>(std::numeric_limits<float>::min())
                               : std::numeric_limits<double>::min();
    return x >= tiny ? x : tiny;  // (NaN and non-positive alphas too, as torch)
  });
}
void poisson_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  draw_kernel(in, a, out, "poisson", sample_poisson);
}

void normal_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor &mean = in[0], &sd = in[1];  // contiguous, the output's shape and dtype
  Tensor& y = out[0];
  const uint64_t key = static_cast<uint64_t>(attr<int64_t>(a, 0)), first = static_cast<uint64_t>(attr<int64_t>(a, 1));
  visit_floating(y.dtype(), "normal", [&]<class T>() {
    const T* mp = static_cast<const T*>(mean.data_ptr());
    const T* sp = static_cast<const T*>(sd.data_ptr());
    T* yp = static_cast<T*>(y.data_ptr());
    parallel_for(y.numel(), 1024, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        ElementStream s(key, first + static_cast<uint64_t>(i));
        yp[i] = convert<T>(convert<double>(mp[i]) + convert<double>(sp[i]) * s.normal());
      }
    });
  });
}

void gamma_grad_kernel(const OpDef& op, const TensorList& in, const Attrs&, TensorList& out) {
  const Tensor &alpha = in[0], &x = in[1];  // contiguous, the output's shape and dtype
  Tensor& y = out[0];
  visit_floating(y.dtype(), op.name, [&]<class T>() {
    const T* ap = static_cast<const T*>(alpha.data_ptr());
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* yp = static_cast<T*>(y.data_ptr());
    parallel_for(y.numel(), 64, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        yp[i] = convert<T>(standard_gamma_grad(convert<double>(ap[i]), convert<double>(xp[i])));
    });
  });
}

KernelRegistrar k_gamma{"_gamma_draw", DeviceType::CPU, gamma_kernel};
KernelRegistrar k_poisson{"_poisson_draw", DeviceType::CPU, poisson_kernel};
KernelRegistrar k_normal{"_normal_draw", DeviceType::CPU, normal_kernel};
KernelRegistrar k_gamma_grad{"_gamma_grad", DeviceType::CPU, gamma_grad_kernel};

}  // namespace
}  // namespace kiln::cpu
