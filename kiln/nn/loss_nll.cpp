// Class-index cross entropy and nll_loss as fused table ops, and their front ends.
//
// Layout: x (N, C, d...) contiguous, target (N, d...) int64, weight (C,) or undefined; the rows of
// classes are contiguous when there are no spatial dims (K = prod(d) = 1), otherwise blocks of K
// positions are transposed to rows. Attributes {reduction, ignore_index[, label_smoothing]}.
//
//   cross_entropy_loss   -> {loss, lse}: per row max, exp-sum -> lse and
//                           (1 - ls) w_t (lse - x_t) + ls / C * sum_c w_c (lse - x_c), one pass
//                           over the logits, nothing of their size written.
//   cross_entropy_loss_backward(g, x, target, weight, lse) -> g k (a softmax(x) - b): the whole
//                           gradient in one pass (a, b from weights and smoothing, k = 1 / total
//                           weight for 'mean'). Its derivative is composed of kiln ops and of this
//                           op again, so every order of derivative works.
//   nll_loss             -> {loss}: -w_t x_t; derivative nll_loss_backward, whose derivative (in
//                           grad) is nll_loss itself.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kiln/autograd/autograd.h"
#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/nn/loss.h"
#include "kiln/nn/loss_detail.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

using namespace loss_detail;

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

int64_t red_of(const Attrs& a) { return attr<int64_t>(a, 0); }
int64_t ignore_of(const Attrs& a) { return attr<int64_t>(a, 1); }

// The selected ISA's vector exp, row max and row sum from the kernel table.
template <class T>
struct Vec {
  cpu::InnerLoop exp_;
  cpu::ReduceInnerFn max_, sum_;
  Vec() {
    const cpu::KernelTable& t = cpu::cpu_kernels();
    constexpr int d = static_cast<int>(dtype_of<T>());
    exp_ = t.unary[static_cast<int>(cpu::UnaryOp::Exp)][d];
    max_ = t.reduce_inner[static_cast<int>(cpu::ReduceOp::Max)][d];
    sum_ = t.reduce_inner[static_cast<int>(cpu::ReduceOp::Sum)][d];
  }
  // out[r] = max / sum of row r of the (rows, n) block x
  void max(T* out, const T* x, int64_t rows, int64_t n) const {
    max_(reinterpret_cast<char*>(out), reinterpret_cast<const char*>(x), rows, n);
  }
  void sum(T* out, const T* x, int64_t rows, int64_t n) const {
    sum_(reinterpret_cast<char*>(out), reinterpret_cast<const char*>(x), rows, n);
  }
  void exp(T* x, int64_t n) const {
    char* data[2] = {reinterpret_cast<char*>(x), reinterpret_cast<char*>(x)};
    int64_t st[2] = {sizeof(T), sizeof(T)};
    cpu::KParams p;
    exp_(data, st, n, &p);
  }
};

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

// ---- cross_entropy_loss ------------------------------------------------------------------------
SpecList ce_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec &x = in[0], &t = in[1];
  SymShape loss = red_of(a) == kNone ? t.sizes() : SymShape{};
  if (op.code == 1) return {{loss, x.dtype()}};  // nll_loss
  return {{loss, x.dtype()}, {t.sizes(), x.dtype()}};
}

// Writes the reduced (or per-position) losses.
template <class T>
void write_loss(const std::vector<double>& rl, double total, int64_t red, Tensor& out) {
  T* lo = static_cast<T*>(out.data_ptr());
  if (red == kNone) {
    for (size_t i = 0; i < rl.size(); ++i) lo[i] = static_cast<T>(rl[i]);
    return;
  }
  double s = 0;
  for (double v : rl) s += v;
  lo[0] = static_cast<T>(red == kSum ? s : s / total);
}

template <class T>
void ce_forward(const TensorList& in, const Attrs& a, TensorList& out) {
  Tensor x = contiguous(in[0]), t = contiguous(in[1]);
  Tensor w = in[2].defined() ? contiguous(in[2]) : Tensor();
  const Geom g = geom(x.sizes());
  const double ls = attr<double>(a, 2);
  const T* wp = w.defined() ? static_cast<const T*>(w.data_ptr()) : nullptr;
  Targets<T> tg("cross_entropy", t, wp, g.C, ignore_of(a));
  double sumw = static_cast<double>(g.C);
  if (wp) {
    sumw = 0;
    for (int64_t c = 0; c < g.C; ++c) sumw += static_cast<double>(wp[c]);
  }
  std::vector<double> rl(g.N * g.K, 0.0);
  T* lse = static_cast<T*>(out[1].data_ptr());
  std::fill(lse, lse + out[1].numel(), T(0));
  const Vec<T> v;
  const int64_t C = g.C;
  const double inv_c = C ? 1.0 / static_cast<double>(C) : 0.0;
  if (C > 0)  // (with no classes every target is ignored)
    for_blocks<T>(g, static_cast<const T*>(x.data_ptr()), nullptr,
                  [&](int64_t i0, int64_t n, const T* rows, T*, T* buf) {
                    T m[kMaxRows], s[kMaxRows], sx[kMaxRows];
                    v.max(m, rows, n, C);
                    for (int64_t r = 0; r < n; ++r)
                      for (int64_t c = 0; c < C; ++c) buf[r * C + c] = rows[r * C + c] - m[r];
                    v.exp(buf, n * C);
                    v.sum(s, buf, n, C);
                    if (ls > 0 && !wp) v.sum(sx, rows, n, C);
                    for (int64_t r = 0; r < n; ++r) {
                      const int64_t i = i0 + r;
                      if (!tg.keep[i]) continue;
                      const T* row = rows + r * C;
                      const T l = m[r] + std::log(s[r]);
                      lse[i] = l;
                      const double lw = static_cast<double>(l);
                      double loss =
                          static_cast<double>(tg.wt[i]) * (lw - static_cast<double>(row[tg.t[i]]));
                      if (ls > 0) {
                        const double swx = wp ? dot(wp, row, C) : static_cast<double>(sx[r]);
                        loss = (1 - ls) * loss + ls * inv_c * (sumw * lw - swx);
                      }
                      rl[i] = loss;
                    }
                  });
  write_loss<T>(rl, tg.total, red_of(a), out[0]);
}

template <class T>
void nll_forward(const TensorList& in, const Attrs& a, TensorList& out) {
  Tensor x = contiguous(in[0]), t = contiguous(in[1]);
  Tensor w = in[2].defined() ? contiguous(in[2]) : Tensor();
  const Geom g = geom(x.sizes());
  const T* wp = w.defined() ? static_cast<const T*>(w.data_ptr()) : nullptr;
  Targets<T> tg("nll_loss", t, wp, g.C, ignore_of(a));
  const T* xp = static_cast<const T*>(x.data_ptr());
  std::vector<double> rl(g.N * g.K, 0.0);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k) {
      const int64_t i = n * g.K + k;
      if (tg.keep[i]) rl[i] = -static_cast<double>(tg.wt[i] * xp[(n * g.C + tg.t[i]) * g.K + k]);
    }
  write_loss<T>(rl, tg.total, red_of(a), out[0]);
}

void ce_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Dtype d = in[0].dtype();
  KILN_CHECK(d == kFloat32 || d == kFloat64, NotImplemented, op.name, "not implemented for dtype ",
             dtype_name(d));
  if (op.code == 1)
    return d == kFloat32 ? nll_forward<float>(in, a, out) : nll_forward<double>(in, a, out);
  d == kFloat32 ? ce_forward<float>(in, a, out) : ce_forward<double>(in, a, out);
}

OpDef op_ce{"cross_entropy_loss", kReduction, ce_meta, {ce_kernel, nullptr}, 0};
OpRegistrar reg_ce{op_ce, "cross_entropy_loss(Tensor self, Tensor target, Tensor? weight, int reduction, int ignore_index, float label_smoothing) -> (Tensor, Tensor)"};
OpDef op_nll{"nll_loss", kReduction, ce_meta, {ce_kernel, nullptr}, 1};
OpRegistrar reg_nll{op_nll, "nll_loss(Tensor self, Tensor target, Tensor? weight, int reduction, int ignore_index) -> (Tensor, Tensor)"};

// ---- backward ops ------------------------------------------------------------------------------
// cross_entropy_loss_backward: inputs {grad, x, target, weight, lse}; output d loss / d x.
SpecList ce_bw_meta(const OpDef&, const SpecList& in, const Attrs&) {
  return {{in[1].sizes(), in[1].dtype()}};
}

// The gradient's scale at target position i: grad (per position for 'none') / total for 'mean'.
template <class T>
struct GradScale {
  const T* g;
  bool per_pos;
  double k;
  GradScale(const Tensor& gc, int64_t red, double total)
      : g(static_cast<const T*>(gc.data_ptr())),
        per_pos(red == kNone),
        k(red == kMean ? 1.0 / total : 1.0) {}
  double operator()(int64_t i) const { return static_cast<double>(g[per_pos ? i : 0]) * k; }
};

template <class T>
void ce_backward(const TensorList& in, const Attrs& a, TensorList& out) {
  Tensor go = contiguous(to_dtype(in[0], dtype_of<T>())), x = contiguous(in[1]),
         t = contiguous(in[2]);
  Tensor w = in[3].defined() ? contiguous(in[3]) : Tensor();
  Tensor lse = contiguous(in[4]);
  const Geom g = geom(x.sizes());
  const double ls = attr<double>(a, 2);
  const T* wp = w.defined() ? static_cast<const T*>(w.data_ptr()) : nullptr;
  Targets<T> tg("cross_entropy", t, wp, g.C, ignore_of(a));
  double sumw = static_cast<double>(g.C);
  if (wp) {
    sumw = 0;
    for (int64_t c = 0; c < g.C; ++c) sumw += static_cast<double>(wp[c]);
  }
  const GradScale<T> scale(go, red_of(a), tg.total);
  const T* lp = static_cast<const T*>(lse.data_ptr());
  const Vec<T> v;
  const int64_t C = g.C;
  const double lsc = C ? ls / static_cast<double>(C) : 0.0;
  if (C == 0) return;
  for_blocks<T>(g, static_cast<const T*>(x.data_ptr()), static_cast<T*>(out[0].data_ptr()),
                [&](int64_t i0, int64_t n, const T* rows, T* o, T*) {
                  for (int64_t r = 0; r < n; ++r) {
                    const T l = lp[i0 + r];
                    for (int64_t c = 0; c < C; ++c) o[r * C + c] = rows[r * C + c] - l;
                  }
                  v.exp(o, n * C);
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

void ce_bw_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Dtype d = in[1].dtype();
  KILN_CHECK(d == kFloat32 || d == kFloat64, NotImplemented, op.name, "not implemented for dtype ",
             dtype_name(d));
  d == kFloat32 ? ce_backward<float>(in, a, out) : ce_backward<double>(in, a, out);
}

OpDef op_ce_bw{"cross_entropy_loss_backward", 0, ce_bw_meta, {ce_bw_kernel, nullptr}};
OpRegistrar reg_ce_bw{op_ce_bw, "cross_entropy_loss_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, Tensor logsumexp, int reduction, int ignore_index, float label_smoothing) -> Tensor"};

// nll_loss_backward: inputs {grad, target, weight}; attrs {reduction, ignore_index, input shape}.
SpecList nll_bw_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  return {{attr<Shape>(a, 2), in[0].dtype()}};
}

template <class T>
void nll_backward(const TensorList& in, const Attrs& a, TensorList& out) {
  Tensor go = contiguous(in[0]), t = contiguous(in[1]);
  Tensor w = in[2].defined() ? contiguous(to_dtype(in[2], dtype_of<T>())) : Tensor();
  const Geom g = geom(attr<Shape>(a, 2));
  const T* wp = w.defined() ? static_cast<const T*>(w.data_ptr()) : nullptr;
  Targets<T> tg("nll_loss", t, wp, g.C, ignore_of(a));
  const GradScale<T> scale(go, red_of(a), tg.total);
  T* o = static_cast<T*>(out[0].data_ptr());
  std::fill(o, o + out[0].numel(), T(0));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k) {
      const int64_t i = n * g.K + k;
      if (tg.keep[i])
        o[(n * g.C + tg.t[i]) * g.K + k] =
            static_cast<T>(-static_cast<double>(tg.wt[i]) * scale(i));
    }
}

void nll_bw_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Dtype d = in[0].dtype();
  KILN_CHECK(d == kFloat32 || d == kFloat64, NotImplemented, op.name, "not implemented for dtype ",
             dtype_name(d));
  d == kFloat32 ? nll_backward<float>(in, a, out) : nll_backward<double>(in, a, out);
}

OpDef op_nll_bw{"nll_loss_backward", 0, nll_bw_meta, {nll_bw_kernel, nullptr}};
OpRegistrar reg_nll_bw{op_nll_bw, "nll_loss_backward(Tensor grad_output, Tensor target, Tensor? weight, int reduction, int ignore_index, int[] input_size) -> Tensor"};

// ---- derivatives -------------------------------------------------------------------------------
TensorList ce_grad(const GradCtx& c, const TensorList& go) {
  TensorList r(c.in_specs.size());
  if (c.needs[0])
    r[0] = dispatch1(op_ce_bw, {go[0], c.in[0], c.in[1], c.in[2], detach(c.out[1])}, c.attrs);
  return r;
}
DerivativeRegistrar d_ce{op_ce, ce_grad, 0b111, 0b10};

// Per target position: grad * k * a with k = kept / (total weight for 'mean') and
// a = (1 - ls) w_t + ls / C * sum(w): the factor of softmax(x) in cross_entropy_loss_backward.
Tensor softmax_scale(const Tensor& g, const Tensor& x, const Tensor& t, const Tensor& w,
                     const Attrs& a) {
  const int64_t red = red_of(a);
  const double ls = attr<double>(a, 2);
  const int64_t C = x.sizes()[1];
  Tensor keep = ne(t, Scalar(ignore_of(a)));
  Tensor wt = ones(t.sizes(), like(x));
  if (w.defined()) {
    Tensor safe = where(keep, t, zeros({}, kInt64));
    wt = reshape(index_select(w, 0, reshape(safe, {-1})), t.sizes());
  }
  Tensor k = to_dtype(keep, x.dtype());
  if (red == kMean) k = where(keep, reciprocal(sum(mul(wt, k))), zeros({}, like(x)));
  Tensor sa = mul(wt, Scalar(1 - ls));
  if (ls > 0) {
    Tensor sumw = w.defined() ? sum(w) : full({}, Scalar(static_cast<double>(C)), x.dtype());
    sa = add(sa, mul(sumw, Scalar(ls / static_cast<double>(C))));
  }
  return mul(mul(g, k), sa);
}

// d/d grad: sum_c v * (the gradient for grad = 1); d/dx: softmax backward of v * grad k a.
TensorList ce_bw_grad(const GradCtx& c, const TensorList& go) {
  const Tensor &v = go[0], &g = c.in[0], &x = c.in[1], &t = c.in[2], &w = c.in[3];
  TensorList r(c.in_specs.size());
  if (c.needs[0]) {
    Tensor unit = dispatch1(op_ce_bw, {ones_like(g), x, t, w, c.in[4]}, c.attrs);
    Tensor vu = mul(v, unit);
    r[0] = red_of(c.attrs) == kNone ? sum(vu, Shape{1}) : sum(vu);
  }
  if (c.needs[1]) {
    Tensor p = softmax(x, 1);
    Tensor u = mul(v, unsqueeze(softmax_scale(g, x, t, w, c.attrs), 1));
    r[1] = mul(p, sub(u, sum(mul(u, p), Shape{1}, true)));
  }
  return r;
}
DerivativeRegistrar d_ce_bw{op_ce_bw, ce_bw_grad, 0b11111, 0};

TensorList nll_grad(const GradCtx& c, const TensorList& go) {
  TensorList r(c.in_specs.size());
  if (c.needs[0])
    r[0] = dispatch1(op_nll_bw, {go[0], c.in[1], c.in[2]},
                     {c.attrs[0], c.attrs[1], Attr(c.in_specs[0].concrete_sizes("backward"))});
  return r;
}
DerivativeRegistrar d_nll{op_nll, nll_grad, 0b110, 0};

// nll_loss_backward is linear in grad with the coefficients nll_loss applies to its input.
TensorList nll_bw_grad(const GradCtx& c, const TensorList& go) {
  TensorList r(c.in_specs.size());
  if (c.needs[0]) r[0] = dispatch1(op_nll, {go[0], c.in[1], c.in[2]}, {c.attrs[0], c.attrs[1]});
  return r;
}
DerivativeRegistrar d_nll_bw{op_nll_bw, nll_bw_grad, 0b110, 0};

// ---- front ends --------------------------------------------------------------------------------
// torch's argument checks of nll_loss_nd / nll_loss / nll_loss2d, in torch's order.
void check_nll_args(const char* op, const Tensor& x, const Tensor& t, const Tensor& w) {
  const SymShape xs = x.sym_sizes(), ts = t.sym_sizes();  // symbolic in a trace
  KILN_CHECK(x.dim() >= 1, Value, op, "Expected 1 or more dimensions (got ", x.dim(), ")");
  if (x.dim() != 1) {
    const SymInt tb = t.dim() ? ts[0] : SymInt(0);
    KILN_CHECK(xs[0] == tb, Value, op, "Expected input batch_size (", xs[0],
               ") to match target batch_size (", tb, ").");
  }
  if (x.dim() <= 2) {
    KILN_CHECK(t.dim() <= 1, Runtime, op,
               "0D or 1D target tensor expected, multi-target not supported");
    if (x.dim() == 1 && t.dim() == 1)
      KILN_CHECK(ts[0] == 1, Value, op,
                 "For 1D input, 1D target must have size 1, but got target size: ", ts[0]);
  } else if (x.dim() == 4) {
    KILN_CHECK(t.dim() == 3, Runtime, op,
               "only batches of spatial targets supported (3D tensors) but got "
               "targets of dimension: ",
               t.dim());
    KILN_CHECK(xs[2] == ts[1] && xs[3] == ts[2], Runtime, op,
               "size mismatch (got input: ", shape_str(xs),
               " , target: ", shape_str(ts));
  } else {
    SymShape want{xs[0]};
    want.insert(want.end(), xs.begin() + 2, xs.end());
    KILN_CHECK(ts == want, Runtime, op, "Expected target size ", shape_str(want), ", got ",
               shape_str(ts));
  }
  const SymInt C = x.dim() == 1 ? xs[0] : xs[1];
  KILN_CHECK(!w.defined() || (w.dim() == 1 && w.sym_numel() == C), Runtime, op,
             "weight tensor should be defined either for all ", C,
             " classes or no classes but got weight tensor of shape: ",
             shape_str(w.defined() ? w.sizes() : Shape{}));
  KILN_CHECK(t.dtype() == kInt64 || t.dtype() == kUInt8, Runtime, op,
             "expected target dtype to be Long or Byte, but got ",
             shape_detail::torch_type_name(t.dtype()));
  KILN_CHECK(!w.defined() || w.dtype() == x.dtype(), Runtime, op, "expected scalar type ",
             shape_detail::torch_type_name(x.dtype()), " but found ",
             shape_detail::torch_type_name(w.dtype()));
  KILN_CHECK(
      !(w.defined() && grad_mode_enabled() && w.requires_grad()), Runtime, op,
      "The function 'nll_loss_forward' is not differentiable with respect to argument 'weight'. "
      "This input cannot have requires_grad True.");
}

void check_float_input(const char* op, const char* kernel, const Tensor& x) {
  const Dtype d = x.dtype();
  if (!is_floating(d) || is_float8(d)) shape_detail::not_implemented(op, kernel, d);
}

// Class-index losses through the fused ops: 1-D inputs gain a batch dim, float16 / bfloat16 run in
// float32, the result returns in the input's dtype.
Tensor index_loss(const OpDef& op, const char* name, const Tensor& input, const Tensor& target,
                  const Tensor& weight, int64_t red, Attrs attrs) {
  check_nll_args(name, input, target, weight);
  const Dtype d = input.dtype();
  const bool low = d == kFloat16 || d == kBFloat16;
  Tensor x = low ? to_dtype(input, kFloat32) : input;
  Tensor w = weight.defined() && low ? to_dtype(weight, kFloat32) : weight;
  Tensor t = target.dtype() == kInt64 ? target : to_dtype(target, kInt64);
  const bool single = x.dim() == 1;
  if (single) {
    x = unsqueeze(x, 0);
    t = reshape(t, {1});
  }
  Tensor loss = dispatch(op, {x, t, w}, std::move(attrs))[0];
  if (single && red == kNone) loss = reshape(loss, {});
  return low ? to_dtype(loss, d) : loss;
}

// Class probabilities (target of input's shape): -sum(w * t * log_softmax(x)) over classes.
Tensor prob_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                          int64_t ignore_index, int64_t red, double ls) {
  const char* op = "cross_entropy";
  KILN_CHECK(is_floating(target.dtype()), Runtime, op,
             "Expected floating point type for target with class probabilities, got ",
             shape_detail::torch_type_name(target.dtype()));
  KILN_CHECK(ignore_index < 0, Runtime, op,
             "ignore_index is not supported for floating point target");
  const int64_t cd = input.dim() == 1 ? 0 : 1;
  const int64_t C = input.dim() == 0 ? 1 : input.sizes()[cd];
  KILN_CHECK(!weight.defined() || (weight.dim() == 1 && weight.numel() == C), Runtime, op,
             "cross_entropy: weight tensor should be defined either for all ", C,
             " classes or no classes but got weight tensor of shape: ",
             shape_str(weight.defined() ? weight.sizes() : Shape{}));
  check_float_input(op, "log_softmax_lastdim_kernel_impl", input);
  Tensor lsm = log_softmax(input, cd);
  Tensor t = target;
  if (ls > 0) {
    KILN_CHECK(ls <= 1.0, Runtime, op, "label_smoothing must be between 0.0 and 1.0. Got: ", ls);
    t = add(mul(t, Scalar(1 - ls)), Scalar(ls / static_cast<double>(C)));
  }
  Tensor prod = mul(lsm, t);
  if (weight.defined()) {
    Shape ws(input.dim(), 1);
    if (input.dim() > 1) ws[1] = C;
    prod = mul(prod, input.dim() > 1 ? reshape(weight, ws) : weight);
  }
  if (red == kNone) return neg(sum(prod, Shape{cd}));
  Tensor total = neg(sum(prod));
  if (red == kSum) return total;
  if (input.numel() == 0) return full_like(total, Scalar(std::numeric_limits<double>::quiet_NaN()));
  return true_divide(total, Scalar(input.numel() / C));
}

}  // namespace

namespace nn::functional {

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                     int64_t ignore_index, const std::string& reduction, double label_smoothing) {
  const int64_t red = reduction_enum(reduction);
  if (input.dim() == target.dim() && input.sym_sizes() == target.sym_sizes())
    return prob_cross_entropy(input, target, weight, ignore_index, red, label_smoothing);
  const char* op = "cross_entropy";
  double ls = 0;
  if (label_smoothing > 0) {
    KILN_CHECK(label_smoothing <= 1.0, Runtime, op,
               "label_smoothing must be between 0.0 and 1.0. Got: ", label_smoothing);
    ls = label_smoothing;
  }
  check_float_input(op, "log_softmax_lastdim_kernel_impl", input);
  return index_loss(op_ce, op, input, target, weight, red, {red, ignore_index, ls});
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                int64_t ignore_index, const std::string& reduction) {
  const int64_t red = reduction_enum(reduction);
  const char* op = "nll_loss";
  if (input.dim() >= 1) check_float_input(op, "nll_loss_out_frame", input);
  return index_loss(op_nll, op, input, target, weight, red, {red, ignore_index});
}

}  // namespace nn::functional
}  // namespace kiln
