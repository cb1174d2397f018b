#include "kiln/nn/init.h"

#include <cmath>
#include <vector>

#include "kiln/autograd/autograd.h"
#include "kiln/core/stream.h"

namespace kiln::nn::init {

double calculate_gain(const std::string& nl, std::optional<double> param) {
  if (nl == "linear" || nl == "conv1d" || nl == "conv2d" || nl == "conv3d" || nl == "conv_transpose1d" ||
      nl == "conv_transpose2d" || nl == "conv_transpose3d" || nl == "sigmoid")
    return 1.0;
  if (nl == "tanh") return 5.0 / 3.0;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "leaky_relu") {
    double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1 + slope * slope));
  }
  if (nl == "selu") return 3.0 / 4.0;
  KILN_FAIL(Value, "calculate_gain", "Unsupported nonlinearity ", nl);
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  KILN_CHECK(t.dim() >= 2, Value, "calculate_fan_in_and_fan_out",
             "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions");
  int64_t recept = 1;
  for (int64_t i = 2; i < t.dim(); ++i) recept *= t.sizes()[i];
  return {t.sizes()[1] * recept, t.sizes()[0] * recept};
}

const Tensor& uniform_(const Tensor& t, double a, double b, Generator* g) {
  NoGradGuard ng;
  return kiln::uniform_(t, a, b, g);
}
const Tensor& normal_(const Tensor& t, double mean, double std, Generator* g) {
  NoGradGuard ng;
  return kiln::normal_(t, mean, std, g);
}
const Tensor& constant_(const Tensor& t, const Scalar& v) {
  NoGradGuard ng;
  fill_(t, v);
  return t;
}
const Tensor& zeros_(const Tensor& t) { return constant_(t, 0); }
const Tensor& ones_(const Tensor& t) { return constant_(t, 1); }
const Tensor& eye_(const Tensor& t) {
  KILN_CHECK(t.dim() == 2, Value, "eye_", "Only tensors with 2 dimensions are supported");
  NoGradGuard ng;
  copy_(t, eye(t.sizes()[0], t.sizes()[1], TensorOptions(t.dtype())));
  return t;
}

const Tensor& xavier_uniform_(const Tensor& t, double gain, Generator* g) {
  auto [fi, fo] = calculate_fan_in_and_fan_out(t);
  double a = gain * std::sqrt(2.0 / static_cast<double>(fi + fo)) * std::sqrt(3.0);
  return init::uniform_(t, -a, a, g);
}
const Tensor& xavier_normal_(const Tensor& t, double gain, Generator* g) {
  auto [fi, fo] = calculate_fan_in_and_fan_out(t);
  return init::normal_(t, 0, gain * std::sqrt(2.0 / static_cast<double>(fi + fo)), g);
}

static double kaiming_std(const Tensor& t, double a, const std::string& mode, const std::string& nl) {
  KILN_CHECK(mode == "fan_in" || mode == "fan_out", Value, "kaiming", "Mode ", mode,
             " not supported, please use one of fan_in, fan_out");
  if (t.numel() == 0) return 0;
  auto [fi, fo] = calculate_fan_in_and_fan_out(t);
  double fan = static_cast<double>(mode == "fan_in" ? fi : fo);
  return calculate_gain(nl, a) / std::sqrt(fan);
}
const Tensor& kaiming_uniform_(const Tensor& t, double a, const std::string& mode, const std::string& nl,
                               Generator* g) {
  if (t.numel() == 0) return t;
  double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nl);
  return init::uniform_(t, -bound, bound, g);
}
const Tensor& kaiming_normal_(const Tensor& t, double a, const std::string& mode, const std::string& nl,
                              Generator* g) {
  if (t.numel() == 0) return t;
  return init::normal_(t, 0, kaiming_std(t, a, mode, nl), g);
}

// torch's method: uniform in [cdf(a), cdf(b)], inverse cdf via erfinv, then clamp.
const Tensor& trunc_normal_(const Tensor& t, double mean, double std, double a, double b, Generator* g) {
  NoGradGuard ng;
  auto cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  double l = cdf((a - mean) / std), u = cdf((b - mean) / std);
  Tensor r = kiln::uniform_(empty(t.sizes(), TensorOptions(kFloat64)), 2 * l - 1, 2 * u - 1, g);
  r = erfinv(r);
  r = add(mul(r, Scalar(std * std::sqrt(2.0))), Scalar(mean));
  r = clamp(r, Scalar(a), Scalar(b));
  copy_(t, r);
  return t;
}

// QR of a normal matrix by modified Gram-Schmidt (Q with a positive-diagonal R, as torch makes it).
const Tensor& orthogonal_(const Tensor& t, double gain, Generator* g) {
  KILN_CHECK(t.dim() >= 2, Value, "orthogonal_", "Only tensors with 2 or more dimensions are supported");
  if (t.numel() == 0) return t;
  NoGradGuard ng;
  int64_t rows = t.sizes()[0], cols = t.numel() / rows;
  Tensor flat = kiln::normal_(empty({rows, cols}, TensorOptions(kFloat64)), 0, 1, g);
  if (rows < cols) flat = contiguous(kiln::t(flat));
  int64_t m = flat.sizes()[0], n = flat.sizes()[1];  // m >= n; orthonormalise the n columns
  stream_detail::before_host_read();
  std::vector<double> a(static_cast<const double*>(flat.data_ptr()), static_cast<const double*>(flat.data_ptr()) + m * n);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t k = 0; k < j; ++k) {
      double d = 0;
      for (int64_t i = 0; i < m; ++i) d += a[i * n + k] * a[i * n + j];
      for (int64_t i = 0; i < m; ++i) a[i * n + j] -= d * a[i * n + k];
    }
    double norm = 0;
    for (int64_t i = 0; i < m; ++i) norm += a[i * n + j] * a[i * n + j];
    norm = std::sqrt(norm);
    for (int64_t i = 0; i < m; ++i) a[i * n + j] /= norm > 0 ? norm : 1;
  }
  Tensor q = empty({m, n}, TensorOptions(kFloat64));
  std::copy(a.begin(), a.end(), static_cast<double*>(q.data_ptr()));
  if (rows < cols) q = kiln::t(q);
  copy_(t, reshape(mul(q, Scalar(gain)), t.sizes()));
  return t;
}

}  // namespace kiln::nn::init
