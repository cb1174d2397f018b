// The fused optimiser update's loops (compiled once per ISA; kernel table entry optim_update, run
// by the kernel in optim.cpp), written once against an ops struct: VecOps<T> over vec.h's VecF /
// VecD for the body, ScalarOps<T> for the remainder. fma is a fused multiply-add where the ISA has
// one (avx2, avx512), two roundings on base.
//
// Each loop mirrors torch's single-tensor code op by op (same roundings, in T): e.g. Adam is
//   g = -g (maximize); p *= 1 - lr*wd (AdamW) or g += wd*p; m.lerp_(g, 1-b1);
//   v = v*b2 + (1-b2)*g*g; (vmax = max(vmax, v)); p += step_neg * m / (sqrt(v)/bc2_sqrt + eps).
// torch's add(alpha=) and lerp use fused multiply-adds in their vector code; so do these.
#include <cmath>

#include "kiln/backend/cpu/isa_util.h"
#include "kiln/backend/cpu/vec.h"

namespace kiln::cpu::KILN_ISA {
namespace {

using optim::detail::Algo;
using optim::detail::Hyper;
using optim::detail::Segment;

// vec.h's fused multiply-add (a hidden friend of VecF / VecD, found by argument-dependent lookup).
template <class V>
inline V vfma(V a, V b, V c) {
  return fma(a, b, c);
}

// Vector lanes: vec.h's types behind the names the loops use.
template <class Vec>
struct VecOpsOf {
  using T = typename Vec::T;
  using V = Vec;
  static constexpr int N = Vec::N;
  static V load(const T* p) { return V::load(p); }
  static void store(T* p, V v) { v.store(p); }
  static V set1(T x) { return V::set1(x); }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V div(V a, V b) { return a / b; }
  static V sqrt(V a) { return a.sqrt(); }
  static V neg(V a) { return -a; }
  static V fma(V a, V b, V c) { return vfma(a, b, c); }
  static V maxnan(V a, V b) { return V::max_nan(a, b); }
};
template <class T>
using VecOps = VecOpsOf<std::conditional_t<std::is_same_v<T, float>, VecF, VecD>>;

// The remainder loop: plain scalars, with the vector code's fused multiply-adds.
template <class T_>
struct ScalarOps {
  using T = T_;
  using V = T;
  static constexpr int N = 1;
  static V load(const T* p) { return *p; }
  static void store(T* p, V v) { *p = v; }
  static V set1(T x) { return x; }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V div(V a, V b) { return a / b; }
  static V sqrt(V a) { return std::sqrt(a); }
  static V neg(V a) { return -a; }
  static V fma(V a, V b, V c) {
#if defined(__FMA__)
    return std::fma(a, b, c);
#else
    return a * b + c;
#endif
  }
  static V maxnan(V a, V b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
};

// torch's lerp: |w| < 0.5 ? s + w*(e-s) : e - (1-w)*(e-s), with one rounding per fma.
template <class O>
inline typename O::V lerp_to(typename O::V s, typename O::V e, typename O::V w,
                             typename O::V w_minus_1, bool small) {
  typename O::V d = O::sub(e, s);
  return small ? O::fma(w, d, s) : O::fma(w_minus_1, d, e);
}

template <class O, class T = typename O::T>
int64_t sgd_loop(const Hyper& h, const Segment& sg, T* p, const T* g, T* buf, int64_t i,
                 int64_t n) {
  using V = typename O::V;
  const bool wd = h.weight_decay != 0;
  const V wdv = O::set1(T(h.weight_decay)), mom = O::set1(T(h.momentum));
  const V one_minus_damp = O::set1(T(1 - h.dampening)), neg_lr = O::set1(T(-h.lr));
  for (; i + O::N <= n; i += O::N) {
    V gv = O::load(g + i);
    if (h.maximize) gv = O::neg(gv);
    V pv = O::load(p + i);
    if (wd) gv = O::fma(pv, wdv, gv);
    if (h.use_momentum) {
      V bv = sg.fresh ? gv : O::fma(gv, one_minus_damp, O::mul(O::load(buf + i), mom));
      O::store(buf + i, bv);
      gv = h.nesterov ? O::fma(bv, mom, gv) : bv;
    }
    O::store(p + i, O::fma(gv, neg_lr, pv));
  }
  return i;
}

template <class O, class T = typename O::T>
int64_t adam_loop(const Hyper& h, const Segment& sg, T* p, const T* g, T* m, T* v, T* vmax,
                  int64_t i, int64_t n) {
  using V = typename O::V;
  const bool wd = h.weight_decay != 0;
  const T w = T(1 - h.beta1);
  const bool small = (w < 0 ? -w : w) < T(0.5);
  const V wdv = O::set1(T(h.weight_decay)), decay = O::set1(T(1 - h.lr * h.weight_decay));
  const V wv = O::set1(w), wm1 = O::set1(w - T(1));
  const V b2 = O::set1(T(h.beta2)), one_minus_b2 = O::set1(T(1 - h.beta2));
  const V step_neg = O::set1(T(sg.c0)), bc2_sqrt = O::set1(T(sg.c1)), eps = O::set1(T(h.eps));
  for (; i + O::N <= n; i += O::N) {
    V gv = O::load(g + i);
    if (h.maximize) gv = O::neg(gv);
    V pv = O::load(p + i);
    if (wd) {
      if (h.decoupled) {
        pv = O::mul(pv, decay);
      } else {
        gv = O::fma(pv, wdv, gv);
      }
    }
    V mv = lerp_to<O>(O::load(m + i), gv, wv, wm1, small);
    V vv = O::add(O::mul(O::load(v + i), b2), O::mul(O::mul(one_minus_b2, gv), gv));
    O::store(m + i, mv);
    O::store(v + i, vv);
    if (h.amsgrad) {
      vv = O::maxnan(O::load(vmax + i), vv);
      O::store(vmax + i, vv);
    }
    V den = O::add(O::div(O::sqrt(vv), bc2_sqrt), eps);
    O::store(p + i, O::add(pv, O::div(O::mul(step_neg, mv), den)));
  }
  return i;
}

template <class O, class T = typename O::T>
int64_t rmsprop_loop(const Hyper& h, T* p, const T* g, T* sq, T* buf, T* gavg, int64_t i,
                     int64_t n) {
  using V = typename O::V;
  const bool wd = h.weight_decay != 0;
  const T w = T(1 - h.alpha);
  const bool small = (w < 0 ? -w : w) < T(0.5);
  const V wdv = O::set1(T(h.weight_decay)), alpha = O::set1(T(h.alpha)), wv = O::set1(w);
  const V wm1 = O::set1(w - T(1)), minus_one = O::set1(T(-1)), eps = O::set1(T(h.eps));
  const V mom = O::set1(T(h.momentum)), neg_lr = O::set1(T(-h.lr));
  for (; i + O::N <= n; i += O::N) {
    V gv = O::load(g + i);
    if (h.maximize) gv = O::neg(gv);
    V pv = O::load(p + i);
    if (wd) gv = O::fma(pv, wdv, gv);
    V sv = O::add(O::mul(O::load(sq + i), alpha), O::mul(O::mul(wv, gv), gv));
    O::store(sq + i, sv);
    V avg;
    if (h.centered) {
      V ga = lerp_to<O>(O::load(gavg + i), gv, wv, wm1, small);
      O::store(gavg + i, ga);
      avg = O::sqrt(O::add(sv, O::mul(O::mul(minus_one, ga), ga)));
    } else {
      avg = O::sqrt(sv);
    }
    avg = O::add(avg, eps);
    if (h.use_momentum) {
      V bv = O::add(O::mul(O::load(buf + i), mom), O::div(gv, avg));
      O::store(buf + i, bv);
      O::store(p + i, O::fma(bv, neg_lr, pv));
    } else {
      O::store(p + i, O::add(pv, O::div(O::mul(neg_lr, gv), avg)));
    }
  }
  return i;
}

template <class O, class T = typename O::T>
int64_t adagrad_loop(const Hyper& h, const Segment& sg, T* p, const T* g, T* sum, int64_t i,
                     int64_t n) {
  using V = typename O::V;
  const bool wd = h.weight_decay != 0;
  const V wdv = O::set1(T(h.weight_decay)), eps = O::set1(T(h.eps)), neg_clr = O::set1(T(-sg.c0));
  for (; i + O::N <= n; i += O::N) {
    V gv = O::load(g + i);
    if (h.maximize) gv = O::neg(gv);
    V pv = O::load(p + i);
    if (wd) gv = O::fma(pv, wdv, gv);
    V sv = O::add(O::load(sum + i), O::mul(gv, gv));
    O::store(sum + i, sv);
    V sd = O::add(O::sqrt(sv), eps);
    O::store(p + i, O::add(pv, O::div(O::mul(neg_clr, gv), sd)));
  }
  return i;
}

// Rprop, torch's single-tensor steps element by element (exact: signs and clamps).
template <class T>
void rprop_range(const Hyper& h, T* p, const T* g, T* prev, T* ss, int64_t b, int64_t e) {
  const T etaminus = T(h.beta1), etaplus = T(h.beta2), lo = T(h.momentum), hi = T(h.dampening);
  auto sign = [](T x) { return x > 0 ? T(1) : x < 0 ? T(-1) : x == 0 ? T(0) : x; };  // NaN stays NaN
  for (int64_t i = b; i < e; ++i) {
    T gv = h.maximize ? -g[i] : g[i];
    T s = sign(gv * prev[i]);
    T f = s > 0 ? etaplus : s < 0 ? etaminus : s == 0 ? T(1) : s;
    T st = ss[i] * f;
    st = std::isnan(st) ? st : std::min(std::max(st, lo), hi);  // torch's clamp_ keeps NaN
    ss[i] = st;
    if (f == etaminus) gv = T(0);
    p[i] = p[i] + T(-1) * sign(gv) * st;
    prev[i] = gv;
  }
}

// ASGD, torch's single-tensor steps: decay, update, then the running average.
template <class T>
void asgd_range(const Hyper& h, const Segment& sg, T* p, const T* g, T* ax, int64_t b, int64_t e) {
  const T wd = T(h.weight_decay), decay = T(1 - h.alpha * sg.c0), neg_eta = T(-sg.c0), mu = T(sg.c1);
  const bool average = sg.c1 != 1;
  for (int64_t i = b; i < e; ++i) {
    T gv = h.maximize ? -g[i] : g[i];
    if (h.weight_decay != 0) gv = gv + wd * p[i];
    T pv = p[i] * decay;
    pv = pv + neg_eta * gv;
    p[i] = pv;
    ax[i] = average ? ax[i] + (pv - ax[i]) * mu : pv;
  }
}

// torch's lerp_ (CPU): from the nearer end.
template <class T>
T lerp1(T a, T b, T w) {
  return (w < 0 ? -w : w) < T(0.5) ? a + w * (b - a) : b - (b - a) * (T(1) - w);
}

// Adamax, NAdam, RAdam: torch's single-tensor steps, op by op (each rounded to T as torch's are).
template <class T>
void adamax_range(const Hyper& h, const Segment& sg, T* p, const T* g, T* m, T* u, int64_t b, int64_t e) {
  const T w = T(1 - h.beta1), b2 = T(h.beta2), eps = T(h.eps), wd = T(h.weight_decay), neg_clr = T(-sg.c0);
  for (int64_t i = b; i < e; ++i) {
    T gv = h.maximize ? -g[i] : g[i];
    if (h.weight_decay != 0) gv = gv + wd * p[i];
    m[i] = lerp1(m[i], gv, w);
    T a = u[i] * b2, c = std::abs(gv) + eps;
    u[i] = std::isnan(a) || std::isnan(c) ? a + c : std::max(a, c);  // torch.maximum propagates NaN
    p[i] = p[i] + neg_clr * m[i] / u[i];
  }
}

// NAdam's and RAdam's shared start: the gradient (maximize, L2 or decoupled weight decay), then
// both moments. Returns the gradient used.
template <class T>
struct AdamMoments {
  T w, b2, one_minus_b2, wd, decay;
  explicit AdamMoments(const Hyper& h)
      : w(T(1 - h.beta1)), b2(T(h.beta2)), one_minus_b2(T(1 - h.beta2)), wd(T(h.weight_decay)),
        decay(T(1 - h.lr * h.weight_decay)) {}
  T operator()(const Hyper& h, T* p, const T* g, T* m, T* v, int64_t i) const {
    T gv = h.maximize ? -g[i] : g[i];
    if (h.weight_decay != 0) {
      if (h.decoupled) p[i] = p[i] * decay;
      else gv = gv + wd * p[i];
    }
    m[i] = lerp1(m[i], gv, w);
    v[i] = v[i] * b2 + one_minus_b2 * gv * gv;
    return gv;
  }
};

template <class T>
void nadam_range(const Hyper& h, const Segment& sg, T* p, const T* g, T* m, T* v, int64_t b, int64_t e) {
  const AdamMoments<T> moments(h);
  const T eps = T(h.eps), bc2 = T(sg.c0), cg = T(sg.c1), cm = T(sg.c2);
  for (int64_t i = b; i < e; ++i) {
    T gv = moments(h, p, g, m, v, i);
    T den = std::sqrt(v[i] / bc2) + eps;
    T pv = p[i] + cg * gv / den;
    p[i] = pv + cm * m[i] / den;
  }
}

template <class T>
void radam_range(const Hyper& h, const Segment& sg, T* p, const T* g, T* m, T* v, int64_t b, int64_t e) {
  const AdamMoments<T> moments(h);
  const T eps = T(h.eps), lr = T(h.lr), bc1 = T(sg.c0), bc2_sqrt = T(sg.c1), rect = T(sg.c2);
  const bool rectified = sg.c2 >= 0;
  for (int64_t i = b; i < e; ++i) {
    moments(h, p, g, m, v, i);
    T x = m[i] / bc1 * lr;
    if (rectified) x = x * ((T(1) / (std::sqrt(v[i]) + eps)) * bc2_sqrt) * rect;  // torch's scalar / tensor
    p[i] = p[i] - x;
  }
}

// Elements [b, e) of one segment whose data are T (float or double).
template <class T>
void update_range(Algo algo, const Hyper& h, const Segment& s, int64_t b, int64_t e) {
  T* p = static_cast<T*>(s.p);
  const T* g = static_cast<const T*>(s.g);
  T* s0 = static_cast<T*>(s.s0);
  T* s1 = static_cast<T*>(s.s1);
  T* s2 = static_cast<T*>(s.s2);
  using VO = VecOps<T>;
  using SO = ScalarOps<T>;
  switch (algo) {
    case Algo::SGD:
      sgd_loop<SO>(h, s, p, g, s0, sgd_loop<VO>(h, s, p, g, s0, b, e), e);
      break;
    case Algo::Adam:
      adam_loop<SO>(h, s, p, g, s0, s1, s2, adam_loop<VO>(h, s, p, g, s0, s1, s2, b, e), e);
      break;
    case Algo::RMSprop:
      rmsprop_loop<SO>(h, p, g, s0, s1, s2, rmsprop_loop<VO>(h, p, g, s0, s1, s2, b, e), e);
      break;
    case Algo::Adagrad:
      adagrad_loop<SO>(h, s, p, g, s0, adagrad_loop<VO>(h, s, p, g, s0, b, e), e);
      break;
    case Algo::Rprop:
      rprop_range<T>(h, p, g, s0, s1, b, e);
      break;
    case Algo::ASGD:
      asgd_range<T>(h, s, p, g, s0, b, e);
      break;
    case Algo::Adamax:
      adamax_range<T>(h, s, p, g, s0, s1, b, e);
      break;
    case Algo::NAdam:
      nadam_range<T>(h, s, p, g, s0, s1, b, e);
      break;
    case Algo::RAdam:
      radam_range<T>(h, s, p, g, s0, s1, b, e);
      break;
  }
}

// float16/bfloat16: blocks converted to float32, updated, converted back.
template <class R>
void update_range_reduced(Algo algo, const Hyper& h, const Segment& s, int64_t b, int64_t e) {
  constexpr int64_t kBlock = 256;
  float pb[kBlock], gb[kBlock], sb[3][kBlock];
  R* p = static_cast<R*>(s.p);
  const R* g = static_cast<const R*>(s.g);
  R* st[3] = {static_cast<R*>(s.s0), static_cast<R*>(s.s1), static_cast<R*>(s.s2)};
  for (int64_t blk = b; blk < e; blk += kBlock) {
    int64_t len = e - blk < kBlock ? e - blk : kBlock;
    Segment f = s;
    f.p = pb;
    f.g = gb;
    f.n = len;
    void** slots[3] = {&f.s0, &f.s1, &f.s2};
    for (int64_t j = 0; j < len; ++j) {
      pb[j] = static_cast<float>(p[blk + j]);
      gb[j] = static_cast<float>(g[blk + j]);
    }
    for (int k = 0; k < 3; ++k) {
      if (!st[k]) continue;
      *slots[k] = sb[k];
      for (int64_t j = 0; j < len; ++j) sb[k][j] = static_cast<float>(st[k][blk + j]);
    }
    update_range<float>(algo, h, f, 0, len);
    for (int64_t j = 0; j < len; ++j) p[blk + j] = R(pb[j]);
    for (int k = 0; k < 3; ++k) {
      if (!st[k]) continue;
      for (int64_t j = 0; j < len; ++j) st[k][blk + j] = R(sb[k][j]);
    }
  }
}

}  // namespace

void fill_optim(KernelTable& t) {
  t.optim_update[static_cast<int>(kFloat32)] = &update_range<float>;
  t.optim_update[static_cast<int>(kFloat64)] = &update_range<double>;
  t.optim_update[static_cast<int>(kBFloat16)] = &update_range_reduced<BFloat16>;
  t.optim_update[static_cast<int>(kFloat16)] = &update_range_reduced<Half>;
}

}  // namespace kiln::cpu::KILN_ISA
