// BatchNorm1d/2d, GroupNorm, EmbeddingBag and their functional forms (composites of kiln ops).
#include "kiln/nn/norm_layers.h"

#include <algorithm>
#include <cmath>

#include "kiln/nn/init.h"
#include "kiln/nn/layer_util.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/nn_ops.h"
#include "kiln/ops/shape.h"
#include "kiln/core/stream.h"

namespace kiln {
namespace {

using nn::layer_util::opts;
using nn::layer_util::pybool;
using nn::layer_util::pyfloat;
Tensor from_vector(const std::vector<int64_t>& v) {
  return nn::layer_util::vector_tensor(v, kInt64);
}
Tensor from_vector(const std::vector<double>& v) {
  return nn::layer_util::vector_tensor(v, kFloat64);
}
Tensor from_vector(const std::vector<uint8_t>& v) {
  return nn::layer_util::vector_tensor(v, kBool);
}

std::string list_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

bool is_low(Dtype d) { return d == kFloat16 || d == kBFloat16; }
Tensor up(const Tensor& t) { return t.defined() && is_low(t.dtype()) ? to_dtype(t, kFloat32) : t; }

// torch's _verify_batch_size: a single value per channel cannot be normalised in training.
void verify_batch_size(const char* op, const Shape& size, bool torch_size) {
  int64_t n = size.empty() ? 1 : size[0];
  for (size_t i = 2; i < size.size(); ++i) n *= size[i];
  KILN_CHECK(n != 1, Value, op,
             "Expected more than 1 value per channel when training, got input size ",
             torch_size ? "torch.Size(" + list_str(size) + ")" : list_str(size));
}

// Shape (1, C, 1, ...) for per-channel tensors against an input of `nd` dims.
Shape channel_shape(int64_t nd, int64_t c) {
  Shape s(nd, 1);
  s[1] = c;
  return s;
}

// Reads an integer tensor (int32 / int64) into int64 values.
std::vector<int64_t> host_ints(const Tensor& t) {
  Tensor c = contiguous(to_dtype(t, kInt64));
  stream_detail::before_host_read();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

}  // namespace

namespace nn::functional {

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  const char* op = "batch_norm";
  KILN_CHECK(x.dim() >= 2, Index, op,
             "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
  if (training) verify_batch_size(op, x.sizes(), true);
  KILN_CHECK(!training || eps > 0, Value, op,
             "batch_norm eps must be positive during training, but got ", eps);
  KILN_CHECK(eps >= 0, Value, op, "batch_norm eps must be non-negative, but got ", eps);
  const int64_t c = x.size(1);
  auto check_len = [&](const Tensor& t, const char* name) {
    KILN_CHECK(!t.defined() || t.numel() == c, Runtime, op, name, " should contain ", c,
               " elements not ", t.numel());
  };
  check_len(running_mean, "running_mean");
  check_len(running_var, "running_var");
  check_len(weight, "weight");
  check_len(bias, "bias");
  KILN_CHECK(training || (running_mean.defined() && running_var.defined()), Runtime, op,
             running_mean.defined() ? "running_var" : "running_mean",
             " must be defined in evaluation mode");
  const Shape cs = channel_shape(x.dim(), c);
  Shape dims{0};
  for (int64_t i = 2; i < x.dim(); ++i) dims.push_back(i);
  Tensor xf = up(x);
  Tensor mean, rstd;
  if (training) {
    auto [var, mu] = var_mean(xf, dims, 0, true);
    mean = mu;
    rstd = rsqrt(add(var, Scalar(eps)));
    if (running_mean.defined() || running_var.defined()) {
      NoGradGuard ng;
      const int64_t n = x.numel() / std::max<int64_t>(c, 1);
      if (running_mean.defined()) {
        Tensor m = to_dtype(reshape(detach(mu), {c}), running_mean.dtype());
        copy_(running_mean, add(mul(running_mean, Scalar(1 - momentum)), mul(m, Scalar(momentum))));
      }
      if (running_var.defined()) {
        Tensor uv = mul(reshape(detach(var), {c}),
                        Scalar(static_cast<double>(n) / std::max<int64_t>(n - 1, 1)));
        uv = to_dtype(uv, running_var.dtype());
        copy_(running_var, add(mul(running_var, Scalar(1 - momentum)), mul(uv, Scalar(momentum))));
      }
    }
  } else {
    mean = reshape(up(running_mean), cs);
    rstd = rsqrt(add(reshape(up(running_var), cs), Scalar(eps)));
  }
  Tensor scale = weight.defined() ? mul(rstd, reshape(up(weight), cs)) : rstd;
  Tensor y = mul(sub(xf, mean), scale);
  if (bias.defined()) y = add(y, reshape(up(bias), cs));
  return is_low(x.dtype()) ? to_dtype(y, x.dtype()) : y;
}

Tensor group_norm(const Tensor& x, int64_t g, const Tensor& weight, const Tensor& bias,
                  double eps) {
  const char* op = "group_norm";
  KILN_CHECK(x.dim() >= 2, Runtime, op,
             "Expected at least 2 dimensions for input tensor but received ", x.dim());
  const int64_t n = x.size(0), c = x.size(1);
  KILN_CHECK(
      g > 0 && c % g == 0, Runtime, op,
      "Expected number of channels in input to be divisible by num_groups, but got input of shape ",
      list_str(x.sizes()), " and num_groups=", g);
  Shape vs{n * c / g, g};
  for (int64_t i = 2; i < x.dim(); ++i) vs.push_back(x.size(i));
  verify_batch_size(op, vs, false);
  for (auto [t, name] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}})
    KILN_CHECK(!t->defined() || (t->dim() == 1 && t->numel() == c), Runtime, op, "Expected ", name,
               " to be a vector of size equal to the number of channels in input, but got ", name,
               " of shape ", list_str(t->sizes()), " and input of shape ", list_str(x.sizes()));
  Tensor xf = up(x);
  Tensor xg = reshape(xf, {n, g, -1});
  auto [var, mean] = var_mean(xg, Shape{2}, 0, true);
  Tensor y = reshape(mul(sub(xg, mean), rsqrt(add(var, Scalar(eps)))), x.sizes());
  const Shape cs = channel_shape(x.dim(), c);
  if (weight.defined()) y = mul(y, reshape(up(weight), cs));
  if (bias.defined()) y = add(y, reshape(up(bias), cs));
  return is_low(x.dtype()) ? to_dtype(y, x.dtype()) : y;
}

Tensor embedding_bag(const Tensor& input, const Tensor& weight, const Tensor& offsets_in,
                     std::optional<double> max_norm, double norm_type, bool scale_grad_by_freq,
                     const std::string& mode, bool sparse, const Tensor& psw_in,
                     bool include_last_offset, std::optional<int64_t> padding_idx) {
  const char* op = "embedding_bag";
  KILN_CHECK(!psw_in.defined() || psw_in.sizes() == input.sizes(), Value, op,
             "embedding_bag: If per_sample_weights (", list_str(psw_in.sizes()),
             ") is not None, then it must have the same shape as the input (",
             list_str(input.sizes()), ")");
  KILN_CHECK(weight.dim() == 2, Value, op,
             "weight has to be a 2D Tensor, but got Tensor of dimension ", weight.dim());
  Tensor idx = input, psw = psw_in;
  std::vector<int64_t> off;
  if (input.dim() == 2) {
    KILN_CHECK(!offsets_in.defined(), Value, op,
               "if input is 2D, then offsets has to be None, as input is treated is a mini-batch "
               "of fixed length "
               "sequences. However, found offsets of type <class 'Tensor'>");
    for (int64_t i = 0; i < input.size(0); ++i) off.push_back(i * input.size(1));
    include_last_offset = false;
    idx = reshape(input, {-1});
    if (psw.defined()) psw = reshape(psw, {-1});
  } else if (input.dim() == 1) {
    KILN_CHECK(offsets_in.defined(), Value, op, "offsets has to be a 1D Tensor but got None");
    KILN_CHECK(offsets_in.dim() == 1, Value, op, "offsets has to be a 1D Tensor");
  } else {
    KILN_FAIL(Value, op, "input has to be 1D or 2D Tensor, but got Tensor of dimension ",
              input.dim());
  }
  KILN_CHECK(mode == "sum" || mode == "mean" || mode == "max", Value, op,
             "mode has to be one of sum, mean or max");
  KILN_CHECK(mode != "max" || !scale_grad_by_freq, Value, op,
             "max mode does not support scaling the gradient by the frequency");
  KILN_CHECK(mode != "max" || !sparse, Value, op, "max mode does not support sparse weights");
  auto is_index = [](Dtype d) { return d == kInt64 || d == kInt32; };
  KILN_CHECK(is_index(idx.dtype()), Runtime, op,
             "Expected tensor for argument #1 'indices' to have one of the "
             "following scalar types: Long, Int; but got ",
             dtype_name(idx.dtype()), " instead");
  if (input.dim() == 1) {
    KILN_CHECK(is_index(offsets_in.dtype()), Runtime, op,
               "Expected tensor for argument #2 'offsets' to have one "
               "of the following scalar types: Long, Int; but got ",
               dtype_name(offsets_in.dtype()), " instead");
    off = host_ints(offsets_in);
  }
  const int64_t n = idx.numel(), rows = weight.size(0);
  std::vector<int64_t> ids = host_ints(idx);
  for (int64_t i = 0; i < n; ++i)
    KILN_CHECK(ids[i] >= 0 && ids[i] < rows, Runtime, op, "Index ", i, " of input takes value ",
               ids[i], " which is not in the valid range [0, ", rows, ")");
  if (!off.empty()) {
    KILN_CHECK(off[0] == 0, Runtime, op,
               "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has "
               "to start from position 0. However, got ",
               off[0]);
    KILN_CHECK(off.back() <= n, Runtime, op, "offsets[-1] can not be greater than input's length ",
               n, " but got offsets[-1] of ", off.back());
    for (size_t i = 1; i < off.size(); ++i)
      KILN_CHECK(off[i] >= off[i - 1], Runtime, op, "offsets must be non-decreasing, got offsets[",
                 i, "] = ", off[i], " < offsets[", i - 1, "] = ", off[i - 1]);
  }
  const int64_t nbags = include_last_offset
                            ? std::max<int64_t>(static_cast<int64_t>(off.size()) - 1, 0)
                            : static_cast<int64_t>(off.size());
  if (psw.defined()) {
    KILN_CHECK(mode == "sum", NotImplemented, op,
               "embedding_bag: per_sample_weights was not None. "
               "per_sample_weights is only supported for mode='sum' (got mode='",
               mode, "'). Please open a feature request on GitHub.");
    KILN_CHECK(psw.dtype() == weight.dtype(), Runtime, op,
               "Expected tensor for argument #1 'weight' to have the "
               "same type as tensor for argument #1 'per_sample_weights'; but type ",
               dtype_name(weight.dtype()), " does not equal ", dtype_name(psw.dtype()));
  }
  if (max_norm) {
    NoGradGuard ng;
    embedding_renorm_(weight, contiguous(idx), *max_norm, norm_type);
  }
  int64_t pad = -1;
  if (padding_idx) pad = *padding_idx < 0 ? *padding_idx + rows : *padding_idx;
  // bag of every kept element (padding entries are left out), and the bag sizes
  std::vector<int64_t> bag_of, kept;
  std::vector<int64_t> count(nbags, 0);
  int64_t longest = 0;
  for (int64_t b = 0; b < nbags; ++b) {
    int64_t end = b + 1 < static_cast<int64_t>(off.size()) ? off[b + 1] : n;
    for (int64_t i = off[b]; i < end; ++i) {
      if (ids[i] == pad) continue;
      bag_of.push_back(b);
      kept.push_back(i);
      ++count[b];
    }
    longest = std::max(longest, count[b]);
  }
  const int64_t d = weight.size(1);
  Tensor emb = embedding(weight, idx, pad, scale_grad_by_freq, sparse);  // (n, d)
  Tensor sel = from_vector(kept);
  if (mode != "max") {
    Tensor src = index_select(emb, 0, sel);
    if (psw.defined()) src = mul(src, unsqueeze(index_select(psw, 0, sel), 1));
    Tensor out =
        index_add(zeros({nbags, d}, TensorOptions(weight.dtype())), 0, from_vector(bag_of), src);
    if (mode == "sum") return out;
    std::vector<double> denom(nbags);
    for (int64_t b = 0; b < nbags; ++b)
      denom[b] = static_cast<double>(std::max<int64_t>(count[b], 1));
    return div(out, unsqueeze(to_dtype(from_vector(denom), weight.dtype()), 1));
  }
  // max: a dense (bags, longest) table of element rows, -inf where a bag is shorter
  std::vector<int64_t> table(nbags * std::max<int64_t>(longest, 1),
                             static_cast<int64_t>(kept.size()));
  std::vector<int64_t> fill(nbags, 0);
  for (size_t j = 0; j < kept.size(); ++j)
    table[bag_of[j] * std::max<int64_t>(longest, 1) + fill[bag_of[j]]++] = j;
  Tensor ext =
      cat({index_select(emb, 0, sel), full({1, d}, -INFINITY, TensorOptions(weight.dtype()))}, 0);
  Tensor dense =
      reshape(index_select(ext, 0, from_vector(table)), {nbags, std::max<int64_t>(longest, 1), d});
  Tensor best = std::get<0>(max(dense, 1));
  std::vector<uint8_t> nonempty(nbags);
  for (int64_t b = 0; b < nbags; ++b) nonempty[b] = count[b] > 0;
  Tensor keep = unsqueeze(from_vector(nonempty), 1);
  return where(keep, best, zeros({1}, TensorOptions(weight.dtype())));
}

}  // namespace nn::functional

namespace nn {

// ---- BatchNorm ----------------------------------------------------------------------------------
namespace {
// torch's _NormBase: weight (and bias) when affine; running_mean, running_var, num_batches_tracked when
// tracking running statistics.
void register_norm_state(Module& m, int64_t nf, bool affine, bool bias, bool track, Dtype dtype) {
  m.register_parameter("weight", affine ? empty({nf}, opts(dtype)) : Tensor());
  m.register_parameter("bias", affine && bias ? empty({nf}, opts(dtype)) : Tensor());
  m.register_buffer("running_mean", track ? zeros({nf}, opts(dtype)) : Tensor());
  m.register_buffer("running_var", track ? ones({nf}, opts(dtype)) : Tensor());
  m.register_buffer("num_batches_tracked", track ? zeros({}, TensorOptions(kInt64)) : Tensor());
}
void reset_norm_running_stats(Module& m) {
  NoGradGuard ng;
  if (m.buffer("running_mean").defined()) zero_(m.buffer("running_mean"));
  if (m.buffer("running_var").defined()) fill_(m.buffer("running_var"), 1);
  if (m.buffer("num_batches_tracked").defined()) zero_(m.buffer("num_batches_tracked"));
}
}  // namespace

BatchNorm::BatchNorm(std::string name, int64_t nf, double eps, std::optional<double> momentum,
                     bool affine, bool track, bool bias, Dtype dtype)
    : Module(std::move(name)),
      num_features(nf),
      eps(eps),
      momentum(momentum),
      affine(affine),
      track_running_stats(track) {
  register_norm_state(*this, nf, affine, bias, track, dtype);
  reset_parameters();
}

void BatchNorm::reset_running_stats() {
  if (track_running_stats) reset_norm_running_stats(*this);
}

void BatchNorm::reset_parameters() {
  reset_running_stats();
  if (param("weight").defined()) init::ones_(param("weight"));
  if (param("bias").defined()) init::zeros_(param("bias"));
}

Tensor BatchNorm::forward(const Tensor& x) {
  check_input_dim(x);
  double factor = momentum.value_or(0.0);
  Tensor& nbt = buffer("num_batches_tracked");
  if (is_training() && track_running_stats && nbt.defined()) {
    NoGradGuard ng;
    add_(nbt, ones({}, TensorOptions(nbt.dtype())));
    if (!momentum) factor = 1.0 / nbt.item<double>();
  }
  const Tensor &rm = buffer("running_mean"), &rv = buffer("running_var");
  bool use_batch = is_training() || (!rm.defined() && !rv.defined());
  bool pass_stats = !is_training() || track_running_stats;
  return F::batch_norm(x, pass_stats ? rm : Tensor(), pass_stats ? rv : Tensor(), param("weight"),
                       param("bias"), use_batch, factor, eps);
}

std::string BatchNorm::extra_repr() const {
  bool has_bias = own_parameters().items()[1].second.defined();
  return std::to_string(num_features) + ", eps=" + pyfloat(eps) +
         ", momentum=" + (momentum ? pyfloat(*momentum) : "None") + ", affine=" + pybool(affine) +
         ", bias=" + pybool(has_bias) + ", track_running_stats=" + pybool(track_running_stats);
}

void BatchNorm1d::check_input_dim(const Tensor& x) const {
  KILN_CHECK(x.dim() == 2 || x.dim() == 3, Value, "BatchNorm1d", "expected 2D or 3D input (got ",
             x.dim(), "D input)");
}
void BatchNorm2d::check_input_dim(const Tensor& x) const {
  KILN_CHECK(x.dim() == 4, Value, "BatchNorm2d", "expected 4D input (got ", x.dim(), "D input)");
}
void BatchNorm3d::check_input_dim(const Tensor& x) const {
  KILN_CHECK(x.dim() == 5, Value, "BatchNorm3d", "expected 5D input (got ", x.dim(), "D input)");
}

// ---- GroupNorm ----------------------------------------------------------------------------------
GroupNorm::GroupNorm(int64_t g, int64_t c, double eps, bool affine, bool bias, Dtype dtype)
    : Module("GroupNorm"), num_groups(g), num_channels(c), eps(eps), affine(affine) {
  KILN_CHECK(g != 0 && c % g == 0, Value, "GroupNorm", "num_channels (", c,
             ") must be divisible by num_groups (", g, ")");
  register_parameter("weight", affine ? empty({c}, opts(dtype)) : Tensor());
  register_parameter("bias", affine && bias ? empty({c}, opts(dtype)) : Tensor());
  reset_parameters();
}
void GroupNorm::reset_parameters() {
  if (param("weight").defined()) init::ones_(param("weight"));
  if (param("bias").defined()) init::zeros_(param("bias"));
}
Tensor GroupNorm::forward(const Tensor& x) {
  return F::group_norm(x, num_groups, param("weight"), param("bias"), eps);
}
std::string GroupNorm::extra_repr() const {
  return std::to_string(num_groups) + ", " + std::to_string(num_channels) +
         ", eps=" + pyfloat(eps) + ", affine=" + pybool(affine) +
         ", bias=" + pybool(own_parameters().items()[1].second.defined());
}

// ---- InstanceNorm, LocalResponseNorm ----------------------------------------------------------------
namespace functional {

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                     const Tensor& bias, bool use_input_stats, double momentum, double eps) {
  const char* op = "instance_norm";
  KILN_CHECK(use_input_stats || (running_mean.defined() && running_var.defined()), Runtime, op,
             "Expected running_mean and running_var to be defined when use_input_stats is false");
  KILN_CHECK(x.dim() >= 2, Runtime, op, "Expected at least 2 dimensions for input tensor but received ", x.dim());
  const int64_t b = x.size(0), c = x.size(1);
  if (use_input_stats) {  // torch's _verify_spatial_size
    int64_t spatial = 1;
    for (int64_t i = 2; i < x.dim(); ++i) spatial *= x.size(i);
    KILN_CHECK(spatial != 1, Value, op, "Expected more than 1 spatial element when training, got input size ",
               list_str(x.sizes()));
  }
  auto rep = [b](const Tensor& t) { return t.defined() ? repeat(t, Shape{b}) : Tensor(); };
  Tensor rm = rep(running_mean), rv = rep(running_var);
  Shape shape = x.sizes();
  shape[1] = b * c, shape[0] = 1;
  Tensor out = batch_norm(reshape(contiguous(x), shape), rm, rv, rep(weight), rep(bias), use_input_stats, momentum, eps);
  {
    NoGradGuard ng;
    if (running_mean.defined()) copy_(running_mean, mean(reshape(rm, {b, c}), Shape{0}));
    if (running_var.defined()) copy_(running_var, mean(reshape(rv, {b, c}), Shape{0}));
  }
  return reshape(out, x.sizes());
}

Tensor local_response_norm(const Tensor& x, int64_t size, double alpha, double beta, double k) {
  const int64_t d = x.dim();
  KILN_CHECK(d >= 3, Value, "local_response_norm", "Expected 3D or higher dimensionality                          "
             "input (got ", d, " dimensions)");
  if (x.numel() == 0) return x;
  // the mean of x^2 over `size` channels, zero-padded as torch's: avg_pool2d over (C, rest) with a
  // (size, 1) window equals torch's avg_pool3d over (C, H, rest) with (size, 1, 1)
  Tensor sq = mul(x, x);
  Shape s4{x.size(0), 1, x.size(1), -1};
  Tensor v = reshape(sq, s4);
  v = pad(v, {0, 0, size / 2, (size - 1) / 2});
  v = avg_pool2d(v, {size, 1}, {1, 1});
  Tensor div_ = pow(add(mul(reshape(v, x.sizes()), Scalar(alpha)), Scalar(k)), Scalar(beta));
  return div(x, div_);
}

}  // namespace functional

InstanceNorm::InstanceNorm(std::string name, int64_t sd, int64_t nf, double eps, double momentum, bool affine,
                           bool track, bool bias, Dtype dtype)
    : Module(std::move(name)), spatial_dims(sd), num_features(nf), eps(eps), momentum(momentum), affine(affine),
      track_running_stats(track) {
  register_norm_state(*this, nf, affine, bias, track, dtype);
  reset_parameters();
}

void InstanceNorm::reset_running_stats() {
  if (track_running_stats) reset_norm_running_stats(*this);
}

void InstanceNorm::reset_parameters() {
  reset_running_stats();
  if (param("weight").defined()) init::ones_(param("weight"));
  if (param("bias").defined()) init::zeros_(param("bias"));
}

Tensor InstanceNorm::forward(const Tensor& x) {
  const int64_t batched = spatial_dims + 2;
  KILN_CHECK(x.dim() == batched || x.dim() == batched - 1, Value, name_.c_str(), "expected ", batched - 1, "D or ",
             batched, "D input (got ", x.dim(), "D input)");
  const int64_t feature_dim = x.dim() - spatial_dims - 1;
  if (x.size(feature_dim) != num_features)
    KILN_CHECK(!affine, Value, name_.c_str(), "expected input's size at dim=", feature_dim,
               " to match num_features (", num_features, "), but got: ", x.size(feature_dim), ".");
  const bool unbatched = x.dim() == batched - 1;
  Tensor in = unbatched ? unsqueeze(x, 0) : x;
  const bool use_input_stats = is_training() || !track_running_stats;
  Tensor y = F::instance_norm(in, buffer("running_mean"), buffer("running_var"), param("weight"), param("bias"),
                              use_input_stats, momentum, eps);
  return unbatched ? squeeze(y, Shape{0}) : y;
}

std::string InstanceNorm::extra_repr() const {
  return std::to_string(num_features) + ", eps=" + pyfloat(eps) + ", momentum=" + pyfloat(momentum) +
         ", affine=" + pybool(affine) + ", bias=" + pybool(own_parameters().items()[1].second.defined()) +
         ", track_running_stats=" + pybool(track_running_stats);
}

LocalResponseNorm::LocalResponseNorm(int64_t s, double a, double b, double kk)
    : Module("LocalResponseNorm"), size(s), alpha(a), beta(b), k(kk) {}
std::string LocalResponseNorm::extra_repr() const {
  return std::to_string(size) + ", alpha=" + pyfloat(alpha) + ", beta=" + pyfloat(beta) + ", k=" + pyfloat(k);
}

namespace functional {
namespace {
Composite c_instance_norm{
    "instance_norm(Tensor input, Tensor? running_mean=None, Tensor? running_var=None, Tensor? weight=None, "
    "Tensor? bias=None, bool use_input_stats=True, float momentum=0.1, float eps=1e-05) -> Tensor",
    [](const TensorList& in, const Attrs& a) -> TensorList {
      return {instance_norm(in[0], in[1], in[2], in[3], in[4], attr<bool>(a, 0), attr<double>(a, 1), attr<double>(a, 2))};
    },
    kFunctionVariant};
Composite c_local_response_norm{
    "local_response_norm(Tensor input, int size, float alpha=0.0001, float beta=0.75, float k=1.) -> Tensor",
    [](const TensorList& in, const Attrs& a) -> TensorList {
      return {local_response_norm(in[0], attr<int64_t>(a, 0), attr<double>(a, 1), attr<double>(a, 2), attr<double>(a, 3))};
    },
    kFunctionVariant};
}  // namespace
}  // namespace functional

// ---- EmbeddingBag -------------------------------------------------------------------------------
EmbeddingBag::EmbeddingBag(int64_t num, int64_t dim, std::optional<double> max_norm,
                           double norm_type, bool scale_grad_by_freq, std::string mode, bool sparse,
                           bool include_last_offset, std::optional<int64_t> pad, Dtype dtype)
    : Module("EmbeddingBag"),
      num_embeddings(num),
      embedding_dim(dim),
      max_norm(max_norm),
      norm_type(norm_type),
      scale_grad_by_freq(scale_grad_by_freq),
      mode(std::move(mode)),
      sparse(sparse),
      include_last_offset(include_last_offset) {
  if (pad) {
    KILN_NN_ASSERT(*pad < num && *pad >= -num, "EmbeddingBag",
                   "padding_idx must be within num_embeddings");
    padding_idx = *pad < 0 ? *pad + num : *pad;
  }
  register_parameter("weight", empty({num, dim}, opts(dtype)));
  reset_parameters();
}
void EmbeddingBag::reset_parameters() {
  init::normal_(weight());
  if (padding_idx) {
    NoGradGuard ng;
    fill_(select(weight(), 0, *padding_idx), 0);
  }
}
Tensor EmbeddingBag::forward(const Tensor& input, const Tensor& offsets, const Tensor& psw) {
  return F::embedding_bag(input, weight(), offsets, max_norm, norm_type, scale_grad_by_freq, mode,
                          sparse, psw, include_last_offset, padding_idx);
}
std::string EmbeddingBag::extra_repr() const {
  std::string s = std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim);
  if (max_norm) s += ", max_norm=" + pyfloat(*max_norm);
  if (norm_type != 2) s += ", norm_type=" + pyfloat(norm_type);
  if (scale_grad_by_freq) s += ", scale_grad_by_freq=True";
  s += ", mode='" + mode + "'";
  if (padding_idx) s += ", padding_idx=" + std::to_string(*padding_idx);
  return s;
}

}  // namespace nn

// ---- composites with torch's schemas (ops/composite.h): kiln.nn.functional's ops come from these ---
namespace {
Composite c_batch_norm{"batch_norm(Tensor input, Tensor? running_mean, Tensor? running_var, Tensor? weight=None, "
                       "Tensor? bias=None, bool training=False, float momentum=0.1, float eps=1e-05) -> Tensor",
                       [](const TensorList& in, const Attrs& a) -> TensorList {
                         return {nn::functional::batch_norm(in[0], in[1], in[2], in[3], in[4], attr<bool>(a, 0),
                                                            attr<double>(a, 1), attr<double>(a, 2))};
                       },
                       kFunctionVariant};
Composite c_group_norm{"group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, "
                       "float eps=1e-05) -> Tensor",
                       [](const TensorList& in, const Attrs& a) -> TensorList {
                         return {nn::functional::group_norm(in[0], attr<int64_t>(a, 0), in[1], in[2], attr<double>(a, 1))};
                       },
                       kFunctionVariant};
Composite c_embedding_bag{
    "embedding_bag(Tensor input, Tensor weight, Tensor? offsets=None, float? max_norm=None, float norm_type=2.0, "
    "bool scale_grad_by_freq=False, str mode=\"mean\", bool sparse=False, Tensor? per_sample_weights=None, "
    "bool include_last_offset=False, int? padding_idx=None) -> Tensor",
    [](const TensorList& in, const Attrs& a) -> TensorList {
      return {nn::functional::embedding_bag(in[0], in[1], in[2], opt_attr<double>(a, 0), attr<double>(a, 1),
                                            attr<bool>(a, 2), attr<std::string>(a, 3), attr<bool>(a, 4), in[3],
                                            attr<bool>(a, 5), opt_attr<int64_t>(a, 6))};
    },
    kFunctionVariant};
}  // namespace

}  // namespace kiln
