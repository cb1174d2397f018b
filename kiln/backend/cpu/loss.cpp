// CPU kernels of the loss table ops, registered by op name: binary_cross_entropy (pointwise),
// cross_entropy_loss / nll_loss and their backward ops (one pass over the logits each way), and
// ctc_loss / ctc_loss_backward (the alpha / beta recursions). Their op-table entries, schemas,
// metas, derivatives and front ends are in kiln/nn/loss.cpp, loss_nll.cpp and loss_ctc.cpp; what
// both sides read (reduction codes, attribute layouts, CTC target offsets) is in
// kiln/nn/loss_detail.h.
//
// Every kernel computes in float32 or float64 (the front ends convert float16 / bfloat16), with one
// templated body per kernel. No kernel calls an op: contiguous copies and conversions of inputs
// come from the cast loop (cpu::contiguous_of, cpu::converted); the vector exp, row max and row sum
// of cross entropy are the kernel table's inner loops.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/nn/loss_detail.h"

namespace kiln {
namespace {

using namespace loss_detail;
using cpu::contiguous_of;

// x as a contiguous tensor of dtype d: x itself where it already is one, else a converted copy.
Tensor contiguous_as(const Tensor& x, Dtype d) {
  return x.dtype() == d ? contiguous_of(x) : cpu::converted(x, d);
}

template <class T>
const T* cptr(const Tensor& t) {
  return static_cast<const T*>(t.data_ptr());
}
template <class T>
T* mptr(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

// The registered kernel of a float32 / float64 body pair, picked by input `arg`'s dtype (torch's
// NotImplementedError for any other dtype). Each templated body below is followed by its kernel.
using Body = void (*)(const TensorList& in, const Attrs& a, TensorList& out);
template <Body F32, Body F64, int arg>
void float_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Dtype d = in[arg].dtype();
  KILN_CHECK(d == kFloat32 || d == kFloat64, NotImplemented, op.name, "not implemented for dtype ",
             dtype_name(d));
  (d == kFloat32 ? F32 : F64)(in, a, out);
}

// ---- binary_cross_entropy ----------------------------------------------------------------------
// inputs {x, t} of one shape and dtype; output the unweighted, unreduced loss
// (t - 1) max(log(1 - x), -100) - t max(log x, -100). Values outside [0, 1] raise RuntimeError.
template <class T>
void bce_forward(const TensorList& in, const Attrs&, TensorList& out) {
  const Tensor xc = contiguous_of(in[0]), tc = contiguous_of(in[1]);
  const T *x = cptr<T>(xc), *t = cptr<T>(tc);
  T* o = mptr<T>(out[0]);
  const int64_t n = xc.numel();
  for (int64_t i = 0; i < n; ++i)
    KILN_CHECK(x[i] >= T(0) && x[i] <= T(1), Runtime, "binary_cross_entropy",
               "all elements of input should be between 0 and 1");
  for (int64_t i = 0; i < n; ++i)
    KILN_CHECK(t[i] >= T(0) && t[i] <= T(1), Runtime, "binary_cross_entropy",
               "all elements of target should be between 0 and 1");
  cpu::parallel_for(n, cpu::kGrainSize / 8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      o[i] = (t[i] - T(1)) * std::max(std::log1p(-x[i]), T(-100)) -
             t[i] * std::max(std::log(x[i]), T(-100));
  });
}
constexpr KernelFn bce_kernel = float_kernel<bce_forward<float>, bce_forward<double>, 0>;

// ---- cross_entropy_loss / nll_loss -------------------------------------------------------------
// x (N, C, d...) contiguous, target (N, d...) int64, weight (C,) or undefined; the rows of classes
// are contiguous when there are no spatial dims (K = prod(d) = 1), otherwise blocks of K positions
// are transposed to rows.
struct Geom {
  int64_t N = 0, C = 0, K = 1;
};
Geom geom(const Shape& s) {
  Geom g;
  g.N = s[0];
  g.C = s[1];
  for (size_t i = 2; i < s.size(); ++i) g.K *= s[i];
  return g;
}

// sum_c w_c x_c in double (four accumulators keep the loop pipelined).
template <class T>
double dot(const T* w, const T* x, int64_t n) {
  double s[4] = {0, 0, 0, 0};
  int64_t c = 0;
  for (; c + 4 <= n; c += 4)
    for (int j = 0; j < 4; ++j)
      s[j] += static_cast<double>(w[c + j]) * static_cast<double>(x[c + j]);
  for (; c < n; ++c) s[0] += static_cast<double>(w[c]) * static_cast<double>(x[c]);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// sum_c w_c in double; C without a weight.
template <class T>
double weight_sum(const T* w, int64_t C) {
  if (!w) return static_cast<double>(C);
  double s = 0;
  for (int64_t c = 0; c < C; ++c) s += static_cast<double>(w[c]);
  return s;
}

// Per target position: the class weight and whether it counts (not ignore_index); raises torch's
// IndexError for a class outside [0, C). Returns the summed weight of the counted targets.
template <class T>
struct Targets {
  const int64_t* t = nullptr;
  std::vector<T> wt;
  std::vector<uint8_t> keep;
  double total = 0;
  Targets(const char* op, const Tensor& target, const T* w, int64_t C, int64_t ignore) {
    const int64_t M = target.numel();
    t = static_cast<const int64_t*>(target.data_ptr());
    wt.assign(M, T(0));
    keep.assign(M, 0);
    for (int64_t i = 0; i < M; ++i) {
      const int64_t c = t[i];
      if (c == ignore) continue;
      KILN_CHECK(c >= 0 && c < C, Index, op, "Target ", c, " is out of bounds.");
      keep[i] = 1;
      wt[i] = w ? w[c] : T(1);
      total += static_cast<double>(wt[i]);
    }
  }
};

// Rows (target positions) per block: a block of rows goes through each table kernel in one call,
// so short rows do not pay a call per row. At most kMaxRows.
constexpr int64_t kMaxRows = 64;
int64_t block_rows(int64_t C) {
  return std::clamp<int64_t>(8192 / std::max<int64_t>(C, 1), 1, kMaxRows);
}

// Runs block(i0, n, rows_in, rows_out, scratch) over consecutive target positions i0 .. i0 + n - 1
// with their class values as n contiguous rows of C: x itself when K == 1, else (C, n) slices of x
// transposed into a buffer (and rows_out transposed back into `out`). out may be null; scratch
// holds n * C values (one allocation per thread, not per block).
template <class T, class F>
void for_blocks(const Geom& g, const T* in, T* out, F&& block) {
  const int64_t C = g.C, K = g.K, B = block_rows(C);
  const int64_t grain = std::max<int64_t>(1, cpu::kGrainSize / std::max<int64_t>(C * B, 1));
  if (K == 1) {
    const int64_t nb = (g.N + B - 1) / B;
    cpu::parallel_for(nb, grain, [&](int64_t b, int64_t e) {
      std::vector<T> scratch(B * C);
      for (int64_t blk = b; blk < e; ++blk) {
        const int64_t i0 = blk * B, n = std::min(B, g.N - i0);
        block(i0, n, in + i0 * C, out ? out + i0 * C : nullptr, scratch.data());
      }
    });
    return;
  }
  const int64_t nb = (K + B - 1) / B;
  cpu::parallel_for(g.N * nb, grain, [&](int64_t b, int64_t e) {
    std::vector<T> rin(B * C), rout(out ? B * C : 0), scratch(B * C);
    for (int64_t task = b; task < e; ++task) {
      const int64_t n = task / nb, k0 = (task % nb) * B, kc = std::min(B, K - k0);
      const T* src = in + n * C * K + k0;
      for (int64_t c = 0; c < C; ++c)
        for (int64_t k = 0; k < kc; ++k) rin[k * C + c] = src[c * K + k];
      block(n * K + k0, kc, rin.data(), out ? rout.data() : nullptr, scratch.data());
      if (!out) continue;
      T* dst = out + n * C * K + k0;
      for (int64_t c = 0; c < C; ++c)
        for (int64_t k = 0; k < kc; ++k) dst[c * K + k] = rout[k * C + c];
    }
  });
}

// Writes the reduced (or per-position) losses.
template <class T>
void write_loss(const std::vector<double>& rl, double total, int64_t red, Tensor& out) {
  T* lo = mptr<T>(out);
  if (red == kNone) {
    for (size_t i = 0; i < rl.size(); ++i) lo[i] = static_cast<T>(rl[i]);
    return;
  }
  double s = 0;
  for (double v : rl) s += v;
  lo[0] = static_cast<T>(red == kSum ? s : s / total);
}

// cross_entropy_loss {x, target, weight} -> {loss, lse}: per row max, exp-sum -> lse and
// (1 - ls) w_t (lse - x_t) + ls / C * sum_c w_c (lse - x_c), nothing of the logits' size written.
template <class T>
void ce_forward(const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor x = contiguous_of(in[0]), t = contiguous_of(in[1]);
  const Tensor w = in[2].defined() ? contiguous_of(in[2]) : Tensor();
  const Geom g = geom(x.sizes());
  const double ls = smoothing_of(a);
  const T* wp = w.defined() ? cptr<T>(w) : nullptr;
  Targets<T> tg("cross_entropy", t, wp, g.C, ignore_of(a));
  const double sumw = weight_sum(wp, g.C);
  std::vector<double> rl(g.N * g.K, 0.0);
  T* lse = mptr<T>(out[1]);
  std::fill(lse, lse + out[1].numel(), T(0));
  const cpu::RowFns<T> v;
  const int64_t C = g.C;
  const double inv_c = C ? 1.0 / static_cast<double>(C) : 0.0;
  if (C > 0)  // (with no classes every target is ignored)
    for_blocks<T>(g, cptr<T>(x), nullptr, [&](int64_t i0, int64_t n, const T* rows, T*, T* buf) {
      T m[kMaxRows], s[kMaxRows], sx[kMaxRows];
      v.row_max(m, rows, n, C);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < C; ++c) buf[r * C + c] = rows[r * C + c] - m[r];
      v.exp_inplace(buf, n * C);
      v.row_sum(s, buf, n, C);
      if (ls > 0 && !wp) v.row_sum(sx, rows, n, C);
      for (int64_t r = 0; r < n; ++r) {
        const int64_t i = i0 + r;
        if (!tg.keep[i]) continue;
        const T* row = rows + r * C;
        const T l = m[r] + std::log(s[r]);
        lse[i] = l;
        const double lw = static_cast<double>(l);
        double loss = static_cast<double>(tg.wt[i]) * (lw - static_cast<double>(row[tg.t[i]]));
        if (ls > 0) {
          const double swx = wp ? dot(wp, row, C) : static_cast<double>(sx[r]);
          loss = (1 - ls) * loss + ls * inv_c * (sumw * lw - swx);
        }
        rl[i] = loss;
      }
    });
  write_loss<T>(rl, tg.total, red_of(a), out[0]);
}
constexpr KernelFn ce_kernel = float_kernel<ce_forward<float>, ce_forward<double>, 0>;

// nll_loss {x, target, weight} -> {loss}: -w_t x_t.
template <class T>
void nll_forward(const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor x = contiguous_of(in[0]), t = contiguous_of(in[1]);
  const Tensor w = in[2].defined() ? contiguous_of(in[2]) : Tensor();
  const Geom g = geom(x.sizes());
  const T* wp = w.defined() ? cptr<T>(w) : nullptr;
  Targets<T> tg("nll_loss", t, wp, g.C, ignore_of(a));
  const T* xp = cptr<T>(x);
  std::vector<double> rl(g.N * g.K, 0.0);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k) {
      const int64_t i = n * g.K + k;
      if (tg.keep[i]) rl[i] = -static_cast<double>(tg.wt[i] * xp[(n * g.C + tg.t[i]) * g.K + k]);
    }
  write_loss<T>(rl, tg.total, red_of(a), out[0]);
}
constexpr KernelFn nll_kernel = float_kernel<nll_forward<float>, nll_forward<double>, 0>;

// The gradient's scale at target position i: grad (per position for 'none') / total for 'mean'.
template <class T>
struct GradScale {
  const T* g;
  bool per_pos;
  double k;
  GradScale(const Tensor& gc, int64_t red, double total)
      : g(cptr<T>(gc)), per_pos(red == kNone), k(red == kMean ? 1.0 / total : 1.0) {}
  double operator()(int64_t i) const { return static_cast<double>(g[per_pos ? i : 0]) * k; }
};

// cross_entropy_loss_backward {grad, x, target, weight, lse} -> g k (a softmax(x) - b), the whole
// gradient in one pass (a, b from weights and smoothing, k = 1 / total weight for 'mean').
template <class T>
void ce_backward(const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor go = contiguous_as(in[0], dtype_of<T>()), x = contiguous_of(in[1]),
               t = contiguous_of(in[2]);
  const Tensor w = in[3].defined() ? contiguous_of(in[3]) : Tensor();
  const Tensor lse = contiguous_of(in[4]);
  const Geom g = geom(x.sizes());
  const double ls = smoothing_of(a);
  const T* wp = w.defined() ? cptr<T>(w) : nullptr;
  Targets<T> tg("cross_entropy", t, wp, g.C, ignore_of(a));
  const double sumw = weight_sum(wp, g.C);
  const GradScale<T> scale(go, red_of(a), tg.total);
  const T* lp = cptr<T>(lse);
  const cpu::RowFns<T> v;
  const int64_t C = g.C;
  const double lsc = C ? ls / static_cast<double>(C) : 0.0;
  if (C == 0) return;
  T* const gx = mptr<T>(out[0]);
  for_blocks<T>(g, cptr<T>(x), gx, [&](int64_t i0, int64_t n, const T* rows, T* o, T*) {
    for (int64_t r = 0; r < n; ++r) {
      const T l = lp[i0 + r];
      for (int64_t c = 0; c < C; ++c) o[r * C + c] = rows[r * C + c] - l;
    }
    v.exp_inplace(o, n * C);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t i = i0 + r;
      T* orow = o + r * C;
      if (!tg.keep[i]) {
        std::fill(orow, orow + C, T(0));
        continue;
      }
      const double coef = scale(i), wt = static_cast<double>(tg.wt[i]);
      const T ca = static_cast<T>(coef * ((1 - ls) * wt + lsc * sumw));
      if (ls > 0) {
        const T cb = static_cast<T>(coef * lsc);
        if (wp) {
          for (int64_t c = 0; c < C; ++c) orow[c] = orow[c] * ca - cb * wp[c];
        } else {
          for (int64_t c = 0; c < C; ++c) orow[c] = orow[c] * ca - cb;
        }
      } else {
        for (int64_t c = 0; c < C; ++c) orow[c] *= ca;
      }
      orow[tg.t[i]] -= static_cast<T>(coef * (1 - ls) * wt);
    }
  });
}
constexpr KernelFn ce_bw_kernel = float_kernel<ce_backward<float>, ce_backward<double>, 1>;

// nll_loss_backward {grad, target, weight}, attrs {reduction, ignore_index, input shape}:
// -w_t grad k at each kept target's class, zero elsewhere.
template <class T>
void nll_backward(const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor go = contiguous_of(in[0]), t = contiguous_of(in[1]);
  const Tensor w = in[2].defined() ? contiguous_as(in[2], dtype_of<T>()) : Tensor();
  const Geom g = geom(attr<Shape>(a, 2));
  const T* wp = w.defined() ? cptr<T>(w) : nullptr;
  Targets<T> tg("nll_loss", t, wp, g.C, ignore_of(a));
  const GradScale<T> scale(go, red_of(a), tg.total);
  T* o = mptr<T>(out[0]);
  std::fill(o, o + out[0].numel(), T(0));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k) {
      const int64_t i = n * g.K + k;
      if (tg.keep[i])
        o[(n * g.C + tg.t[i]) * g.K + k] =
            static_cast<T>(-static_cast<double>(tg.wt[i]) * scale(i));
    }
}
constexpr KernelFn nll_bw_kernel = float_kernel<nll_backward<float>, nll_backward<double>, 0>;

// ---- ctc_loss / ctc_loss_backward --------------------------------------------------------------
// log_probs (T, N, C) and int64 targets made contiguous, and the attributes, of one call. Both
// recursions run in log space over the extended label sequence l' (blanks between labels and at
// both ends), one batch entry per task.
template <class T>
struct Ctc {
  static constexpr T ninf = -std::numeric_limits<T>::infinity();
  Tensor lp, tg;
  int64_t T_, N, C;
  const Shape &il, &tl;
  int64_t blank;
  TargetIndex ti;
  Ctc(const Tensor& log_probs, const Tensor& targets, const Attrs& a)
      : lp(contiguous_of(log_probs)),
        tg(contiguous_of(targets)),
        T_(lp.sizes()[0]),
        N(lp.sizes()[1]),
        C(lp.sizes()[2]),
        il(in_lengths(a)),
        tl(tg_lengths(a)),
        blank(blank_of(a)),
        ti(tg, tl) {}

  // Batch entry b: its target and input lengths, l'_s and log_probs[t, b, c].
  struct Entry {
    const T* lp;  // log_probs[0, b, 0]
    const int64_t* tgt;
    int64_t L, Tb, NC, stride, blank;
    int64_t prime(int64_t s) const { return s % 2 == 0 ? blank : tgt[(s - 1) / 2 * stride]; }
    T lpv(int64_t t, int64_t c) const { return lp[t * NC + c]; }
  };
  Entry entry(int64_t b) const {
    return {cptr<T>(lp) + b * C, cptr<int64_t>(tg) + ti.offset[b], tl[b], il[b], N * C, ti.stride,
            blank};
  }

  // f(b0, b1) over ranges of batch entries, in parallel when they hold enough work.
  template <class F>
  void for_entries(int64_t work_per_entry, F&& f) const {
    const int64_t grain =
        std::max<int64_t>(1, cpu::kGrainSize / std::max<int64_t>(work_per_entry, 1));
    cpu::parallel_for(N, grain, f);
  }
};

template <class T>
T log_add3(T a, T b, T c) {
  T m = std::max(a, std::max(b, c));
  if (m == -std::numeric_limits<T>::infinity()) m = 0;
  return std::log(std::exp(a - m) + std::exp(b - m) + std::exp(c - m)) + m;
}

// log(exp(acc) + exp(v)), acc = -inf meaning "empty"
template <class T>
void log_accumulate(T& acc, T v) {
  if (acc == -std::numeric_limits<T>::infinity()) {
    acc = v;
    return;
  }
  const T m = std::max(acc, v);
  acc = std::log(std::exp(acc - m) + std::exp(v - m)) + m;
}

// ctc_loss {log_probs, targets} -> {nll (N,), log_alpha (N, T, 2 Lmax + 1)}
template <class T>
void ctc_forward(const TensorList& in, const Attrs& a, TensorList& out) {
  const Ctc<T> k(in[0], in[1], a);
  constexpr T ninf = Ctc<T>::ninf;
  const int64_t T_ = k.T_, S2 = out[1].sizes()[2];
  T* nll = mptr<T>(out[0]);
  T* alpha = mptr<T>(out[1]);
  std::fill(alpha, alpha + out[1].numel(), ninf);
  k.for_entries(8 * T_ * S2, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const auto e = k.entry(b);
      const int64_t L = e.L, Tb = e.Tb;
      T* la = alpha + b * T_ * S2;
      if (Tb == 0) {
        nll[b] = L == 0 ? T(0) : -ninf;
        continue;
      }
      la[0] = e.lpv(0, e.blank);
      if (L > 0) la[1] = e.lpv(0, e.prime(1));
      for (int64_t t = 1; t < Tb; ++t) {
        const T* prev = la + (t - 1) * S2;
        T* cur = la + t * S2;
        for (int64_t s = 0; s < 2 * L + 1; ++s) {
          const int64_t cp = e.prime(s);
          const T a1 = prev[s], a2 = s > 0 ? prev[s - 1] : ninf;
          const T a3 = s > 1 && e.prime(s - 2) != cp ? prev[s - 2] : ninf;
          cur[s] = log_add3(a1, a2, a3) + e.lpv(t, cp);
        }
      }
      const T* last = la + (Tb - 1) * S2;
      if (L == 0) {
        nll[b] = -last[0];
      } else {
        const T l1 = last[2 * L], l2 = last[2 * L - 1];
        T m = std::max(l1, l2);
        if (m == ninf) m = 0;
        nll[b] = -(std::log(std::exp(l1 - m) + std::exp(l2 - m)) + m);
      }
    }
  });
}
constexpr KernelFn ctc_kernel = float_kernel<ctc_forward<float>, ctc_forward<double>, 0>;

// ctc_loss_backward {grad (N,), log_probs, targets, nll, log_alpha} -> d / d log_probs, torch's:
// exp(lp) - exp(log(sum of alpha beta over the positions of class c) + nll - lp).
template <class T>
void ctc_backward(const TensorList& in, const Attrs& a, TensorList& out) {
  const Ctc<T> k(in[1], in[2], a);
  constexpr T ninf = Ctc<T>::ninf;
  const Tensor go = contiguous_as(in[0], in[1].dtype());
  const Tensor nllt = contiguous_of(in[3]), alpha_t = contiguous_of(in[4]);
  const int64_t T_ = k.T_, C = k.C, S2 = alpha_t.sizes()[2];
  const bool zero_inf = zero_inf_of(a);
  const T* gp = cptr<T>(go);
  const T* nll = cptr<T>(nllt);
  const T* alpha = cptr<T>(alpha_t);
  T* grad = mptr<T>(out[0]);
  k.for_entries(8 * T_ * (S2 + C), [&](int64_t b0, int64_t b1) {
    std::vector<T> beta, lcab;
    for (int64_t b = b0; b < b1; ++b) {
      const auto e = k.entry(b);
      const int64_t L = e.L, Tb = e.Tb;
      auto gout = [&](int64_t t, int64_t c) -> T& { return grad[(t * k.N + b) * C + c]; };
      const T nl = nll[b], gr = gp[b];
      if ((zero_inf && nl == -ninf) || Tb == 0) {
        for (int64_t t = 0; t < T_; ++t)
          for (int64_t c = 0; c < C; ++c) gout(t, c) = T(0);
        continue;
      }
      const T* la = alpha + b * T_ * S2;
      const int64_t S = 2 * L + 1;
      beta.assign(Tb * S, ninf);
      lcab.assign(Tb * C, ninf);
      T* lb_last = beta.data() + (Tb - 1) * S;
      lb_last[2 * L] = e.lpv(Tb - 1, e.blank);
      lcab[(Tb - 1) * C + e.blank] = la[(Tb - 1) * S2 + 2 * L] + lb_last[2 * L];
      if (L > 0) {
        const int64_t cp = e.prime(2 * L - 1);
        lb_last[2 * L - 1] = e.lpv(Tb - 1, cp);
        lcab[(Tb - 1) * C + cp] = la[(Tb - 1) * S2 + 2 * L - 1] + lb_last[2 * L - 1];
      }
      for (int64_t t = Tb - 2; t >= 0; --t) {
        const T* next = beta.data() + (t + 1) * S;
        T* cur = beta.data() + t * S;
        for (int64_t s = 2 * L; s >= 0; --s) {
          const int64_t cp = e.prime(s);
          const T b1v = next[s], b2v = s < 2 * L ? next[s + 1] : ninf;
          const T b3v = s < 2 * L - 1 && e.prime(s + 2) != cp ? next[s + 2] : ninf;
          cur[s] = log_add3(b1v, b2v, b3v) + e.lpv(t, cp);
          log_accumulate(lcab[t * C + cp], la[t * S2 + s] + cur[s]);
        }
      }
      for (int64_t t = 0; t < Tb; ++t)
        for (int64_t c = 0; c < C; ++c) {
          const T l = e.lpv(t, c);
          gout(t, c) = (std::exp(l) - std::exp(lcab[t * C + c] + nl - l)) * gr;
        }
      for (int64_t t = Tb; t < T_; ++t)
        for (int64_t c = 0; c < C; ++c) gout(t, c) = T(0);
    }
  });
}
constexpr KernelFn ctc_bw_kernel = float_kernel<ctc_backward<float>, ctc_backward<double>, 1>;

// ---- registrations -----------------------------------------------------------------------------
KernelRegistrar k_bce{"binary_cross_entropy", DeviceType::CPU, bce_kernel};
KernelRegistrar k_ce{"cross_entropy_loss", DeviceType::CPU, ce_kernel};
KernelRegistrar k_nll{"nll_loss", DeviceType::CPU, nll_kernel};
KernelRegistrar k_ce_bw{"cross_entropy_loss_backward", DeviceType::CPU, ce_bw_kernel};
KernelRegistrar k_nll_bw{"nll_loss_backward", DeviceType::CPU, nll_bw_kernel};
KernelRegistrar k_ctc{"ctc_loss", DeviceType::CPU, ctc_kernel};
KernelRegistrar k_ctc_bw{"ctc_loss_backward", DeviceType::CPU, ctc_bw_kernel};

}  // namespace
}  // namespace kiln
