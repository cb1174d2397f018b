#include "kiln/nn/adaptive.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "kiln/core/format.h"
#include "kiln/nn/layer_util.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"

namespace kiln::nn {
namespace {

// Python's float a // b for a >= 0, b > 0 (torch computes in_features // div_value ** (i + 1)):
// (a - fmod(a, b)) / b, floored, and rounded up when that quotient sits more than halfway past it.
double py_floordiv(double a, double b) {
  const double mod = std::fmod(a, b);
  const double div = (a - mod) / b;
  double q = std::floor(div);
  if (div - q > 0.5) q += 1.0;
  return q;
}

}  // namespace

AdaptiveLogSoftmaxWithLoss::AdaptiveLogSoftmaxWithLoss(int64_t in_features_, int64_t n_classes_,
                                                       std::vector<int64_t> cutoffs_, double div_value_,
                                                       bool head_bias_, Dtype dtype)
    : Module("AdaptiveLogSoftmaxWithLoss"), in_features(in_features_), n_classes(n_classes_),
      cutoffs(std::move(cutoffs_)), div_value(div_value_), head_bias(head_bias_) {
  KILN_CHECK(!cutoffs.empty(), Value, "AdaptiveLogSoftmaxWithLoss",
             "cutoffs should be a sequence of length larger than 0");
  const bool ok = std::is_sorted(cutoffs.begin(), cutoffs.end()) && cutoffs.front() > 0 &&
                  cutoffs.back() <= n_classes - 1 &&
                  std::set<int64_t>(cutoffs.begin(), cutoffs.end()).size() == cutoffs.size();
  KILN_CHECK(ok, Value, "AdaptiveLogSoftmaxWithLoss",
             "cutoffs should be a sequence of unique, positive integers sorted in an increasing order, where each "
             "value is between 1 and n_classes-1");
  KILN_CHECK(div_value > 0 && std::isfinite(div_value), Value, "AdaptiveLogSoftmaxWithLoss",
             "div_value must be a positive finite number, got ", layer_util::pyfloat(div_value));
  cutoffs.push_back(n_classes);
  shortlist_size = cutoffs[0];
  n_clusters = static_cast<int64_t>(cutoffs.size()) - 1;
  head_size = shortlist_size + n_clusters;
  head = register_module("head", std::make_shared<Linear>(in_features, head_size, head_bias, dtype));
  tail = register_module("tail", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < n_clusters; ++i) {
    const auto hsz = static_cast<int64_t>(
        py_floordiv(static_cast<double>(in_features), std::pow(div_value, static_cast<double>(i + 1))));
    const int64_t osz = cutoffs[i + 1] - cutoffs[i];
    tail->push_back(std::make_shared<Sequential>(std::make_shared<Linear>(in_features, hsz, false, dtype),
                                                 std::make_shared<Linear>(hsz, osz, false, dtype)));
  }
}

void AdaptiveLogSoftmaxWithLoss::reset_parameters() {
  head->reset_parameters();
  for (size_t i = 0; i < tail->size(); ++i) {
    auto seq = tail->at<Sequential>(i);
    seq->at<Linear>(0)->reset_parameters();
    seq->at<Linear>(1)->reset_parameters();
  }
}

Tensor AdaptiveLogSoftmaxWithLoss::cluster(int64_t i, const Tensor& input) {
  return tail->at<Sequential>(static_cast<size_t>(i))->forward(input);
}

ASMoutput AdaptiveLogSoftmaxWithLoss::forward(const Tensor& input_, const Tensor& target_) {
  const int64_t targ_dim = target_.dim();
  if (targ_dim == 1) {
    KILN_CHECK(input_.size(0) == target_.size(0), Runtime, "AdaptiveLogSoftmaxWithLoss",
               "Input and target should have the same size in the batch dimension.");
    KILN_CHECK(input_.dim() == 2, Runtime, "AdaptiveLogSoftmaxWithLoss",
               "1D target tensor expects 2D input tensors, but found inputs with size ", torch_size(input_.sizes()));
  } else if (targ_dim == 0) {
    KILN_CHECK(input_.dim() == 1, Runtime, "AdaptiveLogSoftmaxWithLoss",
               "0D target tensor expects 1D input tensors, but found inputs with size ", torch_size(input_.sizes()));
  } else {
    KILN_FAIL(Runtime, "AdaptiveLogSoftmaxWithLoss", "0D or 1D target tensor expected, multi-target not supported");
  }
  const bool batched = targ_dim > 0;
  const Tensor input = batched ? input_ : input_.unsqueeze(0);
  const Tensor target = batched ? target_ : target_.unsqueeze(0);
  const int64_t batch = target.size(0);
  // As torch: the targets' log-probabilities within their clusters, then each target's head entry
  // (its class in the shortlist, or its cluster's) added.
  Tensor output = zeros({batch}, TensorOptions(input.dtype()));
  Tensor gather_inds = empty({batch}, TensorOptions(target.dtype()));
  int64_t used_rows = 0;
  for (int64_t i = 0; i <= n_clusters; ++i) {
    const int64_t low = i == 0 ? 0 : cutoffs[i - 1], high = cutoffs[i];
    const Tensor mask = logical_and(ge(target, Scalar(low)), lt(target, Scalar(high)));
    const Tensor rows = reshape(nonzero(mask), {-1});
    if (rows.numel() == 0) continue;
    if (i == 0) {
      index_copy_(gather_inds, 0, rows, masked_select(target, mask));
    } else {
      const Tensor relative = sub(masked_select(target, mask), Scalar(low));
      const Tensor cluster_output = cluster(i - 1, index_select(input, 0, rows));
      index_fill_(gather_inds, 0, rows, Scalar(shortlist_size + i - 1));
      const Tensor local = gather(log_softmax(cluster_output, 1), 1, relative.unsqueeze(1));
      output = index_copy(output, 0, rows, local.squeeze(1));
    }
    used_rows += rows.numel();
  }
  if (used_rows != batch) {
    std::ostringstream range;  // (as torch prints target.min().item(): a float for a float target)
    if (is_floating(target.dtype()))
      range << "[" << layer_util::pyfloat(amin(target).item<double>()) << ", "
            << layer_util::pyfloat(amax(target).item<double>()) << "]";
    else range << "[" << amin(target).item<int64_t>() << ", " << amax(target).item<int64_t>() << "]";
    KILN_FAIL(Runtime, "AdaptiveLogSoftmaxWithLoss", "Target values should be in [0, ", n_classes - 1,
              "], but values in range ", range.str(), " were found. ");
  }
  const Tensor head_logprob = log_softmax(head->forward(input), 1);
  output = add(output, reshape(gather(head_logprob, 1, gather_inds.unsqueeze(1)), {-1}));
  const Tensor loss = mean(neg(output));
  return {batched ? output : output.squeeze(0), loss};
}

Tensor AdaptiveLogSoftmaxWithLoss::full_log_prob(const Tensor& input, const Tensor& head_output) {
  const Tensor head_logprob = log_softmax(head_output, 1);
  TensorList parts{narrow(head_logprob, 1, 0, shortlist_size)};
  for (int64_t i = 0; i < n_clusters; ++i) {
    const Tensor cluster_logprob = log_softmax(cluster(i, input), 1);
    parts.push_back(add(cluster_logprob, narrow(head_logprob, 1, shortlist_size + i, 1)));
  }
  return cat(parts, 1);
}

Tensor AdaptiveLogSoftmaxWithLoss::log_prob(const Tensor& input) { return full_log_prob(input, head->forward(input)); }

Tensor AdaptiveLogSoftmaxWithLoss::predict(const Tensor& input) {
  const Tensor head_output = head->forward(input);
  Tensor output = argmax(head_output, 1);
  const Tensor not_in_shortlist = ge(output, Scalar(shortlist_size));
  if (!any(not_in_shortlist).item<bool>()) return output;
  if (all(not_in_shortlist).item<bool>()) return argmax(full_log_prob(input, head_output), 1);
  const Tensor rows = reshape(nonzero(not_in_shortlist), {-1});
  const Tensor lp = full_log_prob(index_select(input, 0, rows), index_select(head_output, 0, rows));
  return index_copy(output, 0, rows, argmax(lp, 1));
}

}  // namespace kiln::nn
