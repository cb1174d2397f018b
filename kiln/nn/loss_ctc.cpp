// CTC loss: the forward (alpha recursion) and backward (beta recursion) kernels as table ops, and
// the front end with torch's argument checks and reductions.
//
//   ctc_loss(log_probs (T, N, C), targets int64 (N, S) or concatenated (sum L,))
//     attrs {input_lengths, target_lengths, blank, zero_infinity} -> {nll (N,), log_alpha (N, T, 2
//     Lmax + 1)}
//   ctc_loss_backward(grad (N,), log_probs, targets, nll, log_alpha) -> d / d log_probs
// Both recursions run in log space over the extended label sequence l' (blanks between labels and
// at both ends), one batch entry per task. The gradient is torch's: exp(lp) - exp(log(sum of
// alpha beta over the positions of class c) + nll - lp), i.e. it takes log_probs to be log-softmax
// outputs (their own derivative removes the exp(lp) term). Not differentiable twice, like torch.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kiln/autograd/autograd.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/nn/loss.h"
#include "kiln/nn/loss_detail.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

using namespace loss_detail;

// Where batch entry b's targets start in the contiguous int64 targets (stride 1).
struct TargetIndex {
  std::vector<int64_t> offset;
  int64_t stride = 1;
  int64_t max_len = 0;
  TargetIndex(const Tensor& targets, const Shape& tl) {
    const int64_t N = static_cast<int64_t>(tl.size());
    offset.resize(N);
    if (targets.dim() == 1) {
      int64_t pos = 0;
      for (int64_t b = 0; b < N; ++b) {
        offset[b] = pos;
        pos += tl[b];
      }
    } else {
      for (int64_t b = 0; b < N; ++b) offset[b] = b * targets.sizes()[1];
    }
    for (int64_t l : tl) max_len = std::max(max_len, l);
  }
};

const Shape& in_lengths(const Attrs& a) { return attr<Shape>(a, 0); }
const Shape& tg_lengths(const Attrs& a) { return attr<Shape>(a, 1); }
int64_t blank_of(const Attrs& a) { return attr<int64_t>(a, 2); }
bool zero_inf_of(const Attrs& a) { return attr<bool>(a, 3); }

SpecList ctc_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const TensorSpec& lp = in[0];
  int64_t max_len = 0;
  for (int64_t l : tg_lengths(a)) max_len = std::max(max_len, l);
  const SymInt T = lp.sizes()[0], N = lp.sizes()[1];
  return {{{N}, lp.dtype()}, {{N, T, 2 * max_len + 1}, lp.dtype()}};
}

template <class T>
T log_add3(T a, T b, T c) {
  T m = std::max(a, std::max(b, c));
  if (m == -std::numeric_limits<T>::infinity()) m = 0;
  return std::log(std::exp(a - m) + std::exp(b - m) + std::exp(c - m)) + m;
}

template <class T>
void ctc_forward(const TensorList& in, const Attrs& a, TensorList& out) {
  Tensor lp = contiguous(in[0]), tg = contiguous(in[1]);
  const int64_t T_ = lp.sizes()[0], N = lp.sizes()[1], C = lp.sizes()[2];
  const Shape &il = in_lengths(a), &tl = tg_lengths(a);
  const int64_t blank = blank_of(a);
  const TargetIndex ti(tg, tl);
  const int64_t S2 = out[1].sizes()[2];
  const T* lpp = static_cast<const T*>(lp.data_ptr());
  const int64_t* tp = static_cast<const int64_t*>(tg.data_ptr());
  T* nll = static_cast<T*>(out[0].data_ptr());
  T* alpha = static_cast<T*>(out[1].data_ptr());
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  std::fill(alpha, alpha + out[1].numel(), ninf);
  const int64_t grain = std::max<int64_t>(1, cpu::kGrainSize / std::max<int64_t>(8 * T_ * S2, 1));
  cpu::parallel_for(N, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t L = tl[b], Tb = il[b];
      const int64_t* tgt = tp + ti.offset[b];
      auto prime = [&](int64_t s) { return s % 2 == 0 ? blank : tgt[(s - 1) / 2 * ti.stride]; };
      auto lpv = [&](int64_t t, int64_t c) { return lpp[(t * N + b) * C + c]; };
      T* la = alpha + b * T_ * S2;
      if (Tb == 0) {
        nll[b] = L == 0 ? T(0) : -ninf;
        continue;
      }
      la[0] = lpv(0, blank);
      if (L > 0) la[1] = lpv(0, prime(1));
      for (int64_t t = 1; t < Tb; ++t) {
        const T* prev = la + (t - 1) * S2;
        T* cur = la + t * S2;
        for (int64_t s = 0; s < 2 * L + 1; ++s) {
          const int64_t cp = prime(s);
          const T a1 = prev[s], a2 = s > 0 ? prev[s - 1] : ninf;
          const T a3 = s > 1 && prime(s - 2) != cp ? prev[s - 2] : ninf;
          cur[s] = log_add3(a1, a2, a3) + lpv(t, cp);
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

void ctc_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Dtype d = in[0].dtype();
  KILN_CHECK(d == kFloat32 || d == kFloat64, NotImplemented, op.name, "not implemented for dtype ",
             dtype_name(d));
  d == kFloat32 ? ctc_forward<float>(in, a, out) : ctc_forward<double>(in, a, out);
}

OpDef op_ctc{"ctc_loss", 0, ctc_meta, {ctc_kernel, nullptr}};
OpRegistrar reg_ctc{op_ctc, "ctc_loss(Tensor log_probs, Tensor targets, int[] input_lengths, int[] target_lengths, int blank, bool zero_infinity) -> (Tensor, Tensor)"};

// ---- backward ----------------------------------------------------------------------------------
SpecList ctc_bw_meta(const OpDef&, const SpecList& in, const Attrs&) {
  return {{in[1].sizes(), in[1].dtype()}};
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

template <class T>
void ctc_backward(const TensorList& in, const Attrs& a, TensorList& out) {
  Tensor go = contiguous(to_dtype(in[0], in[1].dtype())), lp = contiguous(in[1]),
         tg = contiguous(in[2]);
  Tensor nllt = contiguous(in[3]), alpha_t = contiguous(in[4]);
  const int64_t T_ = lp.sizes()[0], N = lp.sizes()[1], C = lp.sizes()[2];
  const Shape &il = in_lengths(a), &tl = tg_lengths(a);
  const int64_t blank = blank_of(a);
  const bool zero_inf = zero_inf_of(a);
  const TargetIndex ti(tg, tl);
  const int64_t S2 = alpha_t.sizes()[2];
  const T* lpp = static_cast<const T*>(lp.data_ptr());
  const int64_t* tp = static_cast<const int64_t*>(tg.data_ptr());
  const T* gp = static_cast<const T*>(go.data_ptr());
  const T* nll = static_cast<const T*>(nllt.data_ptr());
  const T* alpha = static_cast<const T*>(alpha_t.data_ptr());
  T* grad = static_cast<T*>(out[0].data_ptr());
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const int64_t grain =
      std::max<int64_t>(1, cpu::kGrainSize / std::max<int64_t>(8 * T_ * (S2 + C), 1));
  cpu::parallel_for(N, grain, [&](int64_t b0, int64_t b1) {
    std::vector<T> beta, lcab;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t L = tl[b], Tb = il[b];
      const int64_t* tgt = tp + ti.offset[b];
      auto prime = [&](int64_t s) { return s % 2 == 0 ? blank : tgt[(s - 1) / 2 * ti.stride]; };
      auto lpv = [&](int64_t t, int64_t c) { return lpp[(t * N + b) * C + c]; };
      auto gout = [&](int64_t t, int64_t c) -> T& { return grad[(t * N + b) * C + c]; };
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
      lb_last[2 * L] = lpv(Tb - 1, blank);
      lcab[(Tb - 1) * C + blank] = la[(Tb - 1) * S2 + 2 * L] + lb_last[2 * L];
      if (L > 0) {
        const int64_t cp = prime(2 * L - 1);
        lb_last[2 * L - 1] = lpv(Tb - 1, cp);
        lcab[(Tb - 1) * C + cp] = la[(Tb - 1) * S2 + 2 * L - 1] + lb_last[2 * L - 1];
      }
      for (int64_t t = Tb - 2; t >= 0; --t) {
        const T* next = beta.data() + (t + 1) * S;
        T* cur = beta.data() + t * S;
        for (int64_t s = 2 * L; s >= 0; --s) {
          const int64_t cp = prime(s);
          const T b1v = next[s], b2v = s < 2 * L ? next[s + 1] : ninf;
          const T b3v = s < 2 * L - 1 && prime(s + 2) != cp ? next[s + 2] : ninf;
          cur[s] = log_add3(b1v, b2v, b3v) + lpv(t, cp);
          log_accumulate(lcab[t * C + cp], la[t * S2 + s] + cur[s]);
        }
      }
      for (int64_t t = 0; t < Tb; ++t)
        for (int64_t c = 0; c < C; ++c) {
          const T l = lpv(t, c);
          gout(t, c) = (std::exp(l) - std::exp(lcab[t * C + c] + nl - l)) * gr;
        }
      for (int64_t t = Tb; t < T_; ++t)
        for (int64_t c = 0; c < C; ++c) gout(t, c) = T(0);
    }
  });
}

void ctc_bw_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Dtype d = in[1].dtype();
  KILN_CHECK(d == kFloat32 || d == kFloat64, NotImplemented, op.name, "not implemented for dtype ",
             dtype_name(d));
  d == kFloat32 ? ctc_backward<float>(in, a, out) : ctc_backward<double>(in, a, out);
}

OpDef op_ctc_bw{"ctc_loss_backward", 0, ctc_bw_meta, {ctc_bw_kernel, nullptr}};
OpRegistrar reg_ctc_bw{op_ctc_bw, "ctc_loss_backward(Tensor grad, Tensor log_probs, Tensor targets, Tensor neg_log_likelihood, Tensor log_alpha, int[] input_lengths, int[] target_lengths, int blank, bool zero_infinity) -> Tensor"};

TensorList ctc_grad(const GradCtx& c, const TensorList& go) {
  TensorList r(c.in_specs.size());
  if (c.needs[0])
    r[0] = dispatch1(op_ctc_bw, {go[0], c.in[0], c.in[1], detach(c.out[0]), detach(c.out[1])},
                     c.attrs);
  return r;
}
DerivativeRegistrar d_ctc{op_ctc, ctc_grad, 0b11, 0b11};

const char* kFrom = " (while checking arguments for ctc_loss_allocate_outputs)";

}  // namespace

namespace nn::functional {

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Shape& il, const Shape& tl,
                int64_t blank, const std::string& reduction, bool zero_infinity) {
  const char* op = "ctc_loss";
  const int64_t red = reduction_enum(reduction);
  const Dtype d = log_probs.dtype();
  if (d != kFloat32 && d != kFloat64) shape_detail::not_implemented(op, "ctc_loss_cpu", d);
  KILN_CHECK(log_probs.numel() > 0, Runtime, op, "log_probs tensor must not be empty");
  const bool batched = log_probs.dim() == 3;
  Tensor lp = batched ? log_probs : unsqueeze(log_probs, 1);
  KILN_CHECK(lp.dim() == 3, Runtime, op, "Expected 3-dimensional tensor, but got ", lp.dim(),
             "-dimensional tensor for argument #1 'log_probs'", kFrom);
  KILN_CHECK(targets.dim() >= 1 && targets.dim() <= 2, Runtime, op,
             "Expected 1 to 2 dimensions, but got ", targets.dim(),
             "-dimensional tensor for argument #2 'targets'", kFrom);
  const int64_t T = lp.sizes()[0], N = lp.sizes()[1], C = lp.sizes()[2];
  KILN_CHECK(blank >= 0 && blank < C, Runtime, op, "blank must be in label range");
  KILN_CHECK(static_cast<int64_t>(il.size()) == N, Runtime, op,
             "input_lengths must be of size batch_size");
  KILN_CHECK(static_cast<int64_t>(tl.size()) == N, Runtime, op,
             "target_lengths must be of size batch_size");
  int64_t total = 0, max_len = 0;
  for (int64_t l : tl) {
    KILN_CHECK(l >= 0, Runtime, op,
               "Expected target_lengths to have value at least 0, but got value ", l, kFrom);
    total += l;
    max_len = std::max(max_len, l);
  }
  if (targets.dim() == 1) {
    KILN_CHECK(targets.sizes()[0] == total, Runtime, op, "Expected tensor to have size ", total,
               " at dimension 0, but got size ", targets.sizes()[0], " for argument #2 'targets'",
               kFrom);
  } else {
    KILN_CHECK(targets.sizes()[0] == N, Runtime, op, "Expected tensor to have size ", N,
               " at dimension 0, but got size ", targets.sizes()[0], " for argument #2 'targets'",
               kFrom);
    KILN_CHECK(targets.sizes()[1] >= max_len, Runtime, op, "Expected tensor to have size at least ",
               max_len, " at dimension 1, but got size ", targets.sizes()[1],
               " for argument #2 'targets'", kFrom);
  }
  for (int64_t l : il) {
    KILN_CHECK(l >= 0, Runtime, op,
               "Expected input_lengths to have value at least 0, but got value ", l, kFrom);
    KILN_CHECK(l <= T, Runtime, op, "Expected input_lengths to have value at most ", T,
               ", but got value ", l, kFrom);
  }
  Tensor tg = contiguous(to_dtype(targets, kInt64));
  // torch reads out of bounds here; kiln refuses
  {
    const TargetIndex ti(tg, tl);
    const int64_t* tp = static_cast<const int64_t*>(tg.data_ptr());
    for (int64_t b = 0; b < N; ++b)
      for (int64_t j = 0; j < tl[b]; ++j) {
        const int64_t v = tp[ti.offset[b] + j * ti.stride];
        KILN_CHECK(v >= 0 && v < C, Index, op, "target value ", v, " is out of range for ", C,
                   " classes");
      }
  }
  Tensor res = dispatch(op_ctc, {lp, tg}, {il, tl, blank, zero_infinity})[0];
  if (zero_infinity)
    res = where(eq(res, Scalar(std::numeric_limits<double>::infinity())), zeros({}, res.dtype()),
                res);
  if (red == kMean) {
    Tensor lens = empty({N}, kInt64);
    std::copy(tl.begin(), tl.end(), static_cast<int64_t*>(lens.data_ptr()));
    lens = clamp(to_dtype(lens, res.dtype()), Scalar(1), std::nullopt);
    return mean(div(res, lens));
  }
  if (red == kSum) return sum(res);
  return batched ? res : reshape(res, {});
}

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank, const std::string& reduction,
                bool zero_infinity) {
  const char* op = "ctc_loss";
  KILN_CHECK(is_integral(input_lengths.dtype(), false), Runtime, op,
             "input_lengths must be integral");
  KILN_CHECK(is_integral(target_lengths.dtype(), false), Runtime, op,
             "target_lengths must be integral");
  auto shape_of = [](const Tensor& t) {
    Tensor c = contiguous(to_dtype(t, kInt64));
    const int64_t* p = static_cast<const int64_t*>(c.data_ptr());
    return Shape(p, p + c.numel());
  };
  return ctc_loss(log_probs, targets, shape_of(input_lengths), shape_of(target_lengths), blank,
                  reduction, zero_infinity);
}

}  // namespace nn::functional
}  // namespace kiln
