// CTC loss: the op-table entries, schemas, metas and derivative of ctc_loss (alpha recursion) and
// ctc_loss_backward (beta recursion), and the front end with torch's argument checks and
// reductions. Their CPU kernels are in kiln/backend/cpu/loss.cpp; the attribute layout and the
// target offsets (TargetIndex) in kiln/nn/loss_detail.h.
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
#include "kiln/nn/loss.h"
#include "kiln/nn/loss_detail.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

using namespace loss_detail;

SpecList ctc_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const TensorSpec& lp = in[0];
  int64_t max_len = 0;
  for (int64_t l : tg_lengths(a)) max_len = std::max(max_len, l);
  const SymInt T = lp.sizes()[0], N = lp.sizes()[1];
  return {{{N}, lp.dtype()}, {{N, T, 2 * max_len + 1}, lp.dtype()}};
}

OpDef op_ctc{"ctc_loss", 0, ctc_meta, {}};
OpRegistrar reg_ctc{op_ctc, "ctc_loss(Tensor log_probs, Tensor targets, int[] input_lengths, int[] target_lengths, int blank, bool zero_infinity) -> (Tensor, Tensor)"};

// ---- backward ----------------------------------------------------------------------------------
SpecList ctc_bw_meta(const OpDef&, const SpecList& in, const Attrs&) {
  return {{in[1].sizes(), in[1].dtype()}};
}

OpDef op_ctc_bw{"ctc_loss_backward", 0, ctc_bw_meta, {}};
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
