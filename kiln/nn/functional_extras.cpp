// torch.nn.functional's lp_pool1d / 2d / 3d, max_unpool1d / 2d / 3d, channel_shuffle, alpha_dropout,
// feature_alpha_dropout and rrelu: composites of kiln ops written as torch computes them (values,
// gradients, errors), registered with torch's schemas where torch has a top-level op.
//
// max_unpool scatters each value to its flat index in the output plane, so its gradient is the
// gather at those indices (torch's max_unpool backward). rrelu draws one slope per non-positive
// element from U(lower, upper) while training (the slope is the gradient there, as torch's saved
// noise); in eval it is leaky_relu with the mean slope.
#include <cmath>

#include "kiln/amp/autocast.h"
#include "kiln/autograd/autograd.h"
#include "kiln/core/format.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/layers_extra.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/nn_ops.h"
#include "kiln/ops/shape.h"

namespace kiln::nn::functional {

namespace {

// A size argument of one value or nd values, as torch's _single / _pair / _triple.
Shape nd_arg(const char* op, const Shape& v, int64_t nd, const char* what) {
  if (v.size() == 1) return Shape(nd, v[0]);
  KILN_CHECK(static_cast<int64_t>(v.size()) == nd, Value, op, op, ": ", what, " must be a single int or a tuple of ",
             nd, " ints, got ", shape_list(v));
  return v;
}

Tensor max_pool_nd(int64_t nd, const Tensor& x, const Shape& k, const Shape& s, bool ceil_mode) {
  if (nd == 1) return max_pool1d(x, k, s, {0}, {1}, ceil_mode);
  if (nd == 2) return max_pool2d(x, k, s, {0}, {1}, ceil_mode);
  return max_pool3d(x, k, s, {0}, {1}, ceil_mode);
}

Tensor avg_pool_nd(int64_t nd, const Tensor& x, const Shape& k, const Shape& s, bool ceil_mode) {
  if (nd == 1) return avg_pool1d(x, k, s, {0}, ceil_mode);
  if (nd == 2) return avg_pool2d(x, k, s, {0}, ceil_mode);
  return avg_pool3d(x, k, s, {0}, ceil_mode);
}

// (sum over the window of x^p)^(1/p): torch's lp_pool, an average pool of x^p times the window size.
Tensor lp_pool(const char* op, int64_t nd, const Tensor& x, double p, const Shape& kernel_size, const Shape& stride,
               bool ceil_mode) {
  const Shape k = nd_arg(op, kernel_size, nd, "kernel_size");
  if (std::isinf(p))
    return p > 0 ? max_pool_nd(nd, abs(x), k, stride, ceil_mode)
                 : neg(max_pool_nd(nd, neg(abs(x)), k, stride, ceil_mode));
  Tensor out = avg_pool_nd(nd, pow(x, Scalar(p)), k, stride, ceil_mode);
  int64_t window = 1;
  for (int64_t v : k) window *= v;
  return pow(mul(mul(sign(out), relu(abs(out))), Scalar(window)), Scalar(1.0 / p));
}

// torch's _unpool_output_size: the default (in - 1) * stride + kernel - 2 * padding per spatial dim,
// or output_size (its last nd entries) when it lies strictly within a stride of the default.
Shape unpool_size(const Tensor& x, const Shape& k, const Shape& s, const Shape& p, const Shape& output_size) {
  const int64_t nd = static_cast<int64_t>(k.size());
  KILN_CHECK(x.dim() >= nd, Index, "max_unpool", "max_unpool", nd, "d: input of shape ", shape_list(x.sizes()),
             " has fewer than ", nd, " dimensions");
  Shape def(nd);
  for (int64_t d = 0; d < nd; ++d) def[d] = (x.sizes()[x.dim() - nd + d] - 1) * s[d] + k[d] - 2 * p[d];
  Shape out = def;
  if (!output_size.empty()) {
    out = output_size;
    if (static_cast<int64_t>(out.size()) == nd + 2) out = Shape(out.begin() + 2, out.end());
    KILN_CHECK(static_cast<int64_t>(out.size()) == nd, Value, "max_unpool",
               "output_size should be a sequence containing ", nd, " or ", nd + 2,
               " elements, but it has a length of '", out.size(), "'");
    for (int64_t d = 0; d < nd; ++d)
      KILN_CHECK(def[d] - s[d] < out[d] && out[d] < def[d] + s[d], Value, "max_unpool", "invalid output_size \"",
                 shape_list(out), "\" (dim ", d, " must be between ", def[d] - s[d], " and ", def[d] + s[d], ")");
  }
  for (int64_t d = 0; d < nd; ++d)
    KILN_CHECK(out[d] >= 0, Value, "max_unpool",
               "max_unpooling: output_size must contain non-negative spatial dimensions, but got output_size[", d,
               "]=", out[d]);
  return out;
}

// torch's max_unpool2d / max_unpool3d kernels: input (N, C, *) or (C, *), int64 indices of its shape
// into each flattened output plane.
Tensor unpool(const char* op, int64_t nd, const Tensor& x, const Tensor& indices, const Shape& out) {
  const char* what = nd == 2 ? "(height, width)" : "(depth, height, width)";
  const char* count = nd == 2 ? "two" : "three";
  KILN_CHECK(indices.dtype() == kInt64, Runtime, op, "elements in indices should be type int64 but got: ",
             shape_detail::torch_type_name(indices.dtype()));
  KILN_CHECK(static_cast<int64_t>(out.size()) == nd, Runtime, op, "There should be exactly ", count,
             " elements ", what, " in output_size, but got ", out.size(), " elements.");
  KILN_CHECK(x.dim() == nd + 1 || x.dim() == nd + 2, Runtime, op, "Input to max_unpooling", nd, "d should be a ",
             nd + 1, "d or ", nd + 2, "d Tensor, but got a tensor with ", x.dim(), " dimensions.");
  KILN_CHECK(x.sizes() == indices.sizes(), Runtime, op, "Expected shape of indices to be same as that of the input "
             "tensor (", shape_list(x.sizes()), ") but got indices tensor with shape: ", shape_list(indices.sizes()));
  for (int64_t i = 1; i < x.dim(); ++i)
    KILN_CHECK(x.sizes()[i] > 0, Runtime, op, op, "(): Expected input to have non-zero size for non-batch "
               "dimensions, but got ", shape_list(x.sizes()), " with dimension ", i, " being empty.");
  int64_t plane = 1;
  for (int64_t v : out) plane *= v;
  const bool batched = x.dim() == nd + 2;
  const int64_t n = batched ? x.sizes()[0] : 1, c = x.sizes()[batched ? 1 : 0];
  const int64_t inner = n * c == 0 ? 0 : x.numel() / (n * c);
  Tensor idx = reshape(indices, {n, c, inner}), src = reshape(x, {n, c, inner});
  if (idx.numel() > 0) {
    NoGradGuard ng;
    const int64_t lo = amin(idx).item<int64_t>(), hi = amax(idx).item<int64_t>();
    const int64_t bad = lo < 0 ? lo : hi;
    std::string sizes = shape_list(out);
    sizes = sizes.substr(1, sizes.size() - 2);
    for (auto& ch : sizes) ch = ch == ',' ? 'x' : ch;
    std::erase(sizes, ' ');
    KILN_CHECK(lo >= 0 && hi < plane, Runtime, op, "Found an invalid max index: ", bad,
               " (output volumes are of size ", sizes, ")");
  }
  if (!is_floating(x.dtype()) || is_float8(x.dtype()))
    shape_detail::not_implemented(op, nd == 2 ? "max_unpool2d" : "max_unpool3d", x.dtype());
  Tensor y = scatter(zeros({n, c, plane}, TensorOptions(x.dtype())), 2, idx, src);
  Shape shape = batched ? Shape{n, c} : Shape{c};
  shape.insert(shape.end(), out.begin(), out.end());
  return reshape(y, shape);
}

Tensor max_unpool(int64_t nd, const Tensor& x, const Tensor& indices, const Shape& kernel_size, const Shape& stride,
                  const Shape& padding, const Shape& output_size) {
  const char* op = nd == 1 ? "max_unpool1d" : nd == 2 ? "max_unpool2d" : "max_unpool3d";
  const Shape k = nd_arg(op, kernel_size, nd, "kernel_size");
  const Shape s = stride.empty() ? k : nd_arg(op, stride, nd, "stride");
  const Shape p = nd_arg(op, padding, nd, "padding");
  Shape out = unpool_size(x, k, s, p, output_size);
  if (nd == 3) {
    for (int64_t v : s)
      KILN_CHECK(v > 0, Runtime, op, "strides should be greater than zero, but got stride: ", shape_list(s));
    return unpool(op, 3, x, indices, out);
  }
  if (nd == 2) return unpool(op, 2, x, indices, out);
  out.push_back(1);  // torch runs max_unpool1d as max_unpool2d over (L, 1)
  return squeeze(unpool(op, 2, unsqueeze(x, -1), unsqueeze(indices, -1), out), Shape{-1});
}

// alpha dropout keeps the mean and variance of SELU activations: kept values are scaled by a and
// dropped ones set to a' = -alpha' a, then shifted by b (torch's _dropout_impl with alpha_dropout).
Tensor alpha_dropout_impl(const Tensor& x, double p, bool train, bool feature) {
  KILN_CHECK(p >= 0 && p <= 1, Runtime, "alpha_dropout", "dropout probability has to be between 0 and 1, but got ", p);
  if (p == 0 || !train || x.numel() == 0) return x;
  if (p == 1) return mul(x, zeros({}, TensorOptions(x.dtype())));
  Shape ms = x.sizes();
  if (feature) {
    KILN_CHECK(x.dim() >= 2, Runtime, "feature_alpha_dropout",
               "Feature dropout requires at least 2 dimensions in the input");
    ms = Shape(x.sizes().begin(), x.sizes().begin() + 2);
    ms.resize(x.dim(), 1);
  }
  const Dtype d = is_floating(x.dtype()) ? x.dtype() : kFloat32;
  Tensor keep = to_dtype(ge(rand(ms, TensorOptions(d)), Scalar(p)), d);
  constexpr double kAlpha = 1.7580993408473766;
  const double a = 1.0 / std::sqrt((kAlpha * kAlpha * p + 1) * (1 - p));
  Tensor b = add(mul(sub(keep, Scalar(1)), Scalar(kAlpha * a)), Scalar(kAlpha * a * p));
  Tensor r = add(mul(x, mul(keep, Scalar(a))), b);
  KILN_CHECK(can_cast(r.dtype(), x.dtype()), Runtime, "alpha_dropout", "result type ",
             shape_detail::torch_type_name(r.dtype()), " can't be cast to the desired output type ",
             shape_detail::torch_type_name(x.dtype()));
  return r;
}

}  // namespace

Tensor lp_pool1d(const Tensor& x, double norm_type, const Shape& kernel_size, const Shape& stride, bool ceil_mode) {
  return lp_pool("lp_pool1d", 1, x, norm_type, kernel_size, stride, ceil_mode);
}
Tensor lp_pool2d(const Tensor& x, double norm_type, const Shape& kernel_size, const Shape& stride, bool ceil_mode) {
  return lp_pool("lp_pool2d", 2, x, norm_type, kernel_size, stride, ceil_mode);
}
Tensor lp_pool3d(const Tensor& x, double norm_type, const Shape& kernel_size, const Shape& stride, bool ceil_mode) {
  return lp_pool("lp_pool3d", 3, x, norm_type, kernel_size, stride, ceil_mode);
}

Tensor max_unpool1d(const Tensor& x, const Tensor& indices, const Shape& kernel_size, const Shape& stride,
                    const Shape& padding, const Shape& output_size) {
  KILN_AUTOCAST(kFp32, max_unpool1d, x, indices, kernel_size, stride, padding, output_size);
  return max_unpool(1, x, indices, kernel_size, stride, padding, output_size);
}
Tensor max_unpool2d(const Tensor& x, const Tensor& indices, const Shape& kernel_size, const Shape& stride,
                    const Shape& padding, const Shape& output_size) {
  KILN_AUTOCAST(kFp32, max_unpool2d, x, indices, kernel_size, stride, padding, output_size);
  return max_unpool(2, x, indices, kernel_size, stride, padding, output_size);
}
Tensor max_unpool3d(const Tensor& x, const Tensor& indices, const Shape& kernel_size, const Shape& stride,
                    const Shape& padding, const Shape& output_size) {
  KILN_AUTOCAST(kFp32, max_unpool3d, x, indices, kernel_size, stride, padding, output_size);
  return max_unpool(3, x, indices, kernel_size, stride, padding, output_size);
}

Tensor channel_shuffle(const Tensor& x, int64_t groups) {
  const char* op = "channel_shuffle";
  KILN_CHECK(x.dim() > 2, Runtime, op, "channel_shuffle expects input with > 2 dims, but got input with sizes ",
             shape_list(x.sizes()));
  KILN_CHECK(groups > 0, Runtime, op, "Number of groups to divide channels in must be positive. Value of groups:",
             groups);
  const int64_t c = x.sizes()[1];
  KILN_CHECK(c % groups == 0, Runtime, op, "Number of channels must be divisible by groups. Got ", c,
             " channels and ", groups, " groups.");
  Shape split = x.sizes();
  split[1] = c / groups;
  split.insert(split.begin() + 1, groups);  // (N, g, C / g, *) -> (N, C / g, g, *)
  // a new contiguous tensor, as torch's (groups 1 or C would otherwise give a view of x)
  return reshape(clone(transpose(reshape(x, split), 1, 2), MemoryFormat::Contiguous), x.sizes());
}

Tensor alpha_dropout(const Tensor& x, double p, bool training) { return alpha_dropout_impl(x, p, training, false); }
Tensor feature_alpha_dropout(const Tensor& x, double p, bool training) {
  return alpha_dropout_impl(x, p, training, true);
}

Tensor rrelu(const Tensor& x, double lower, double upper, bool training, Generator* generator) {
  const char* op = "rrelu";
  KILN_CHECK(lower <= upper, Runtime, op, "Lower bound should be less than or equal to the upper bound");
  if (!training) return leaky_relu(x, (lower + upper) / 2);
  const Dtype d = x.dtype();
  if (d != kFloat32 && d != kFloat64 && d != kBFloat16) shape_detail::not_implemented(op, "rrelu_with_noise_out_cpu", d);
  Tensor slope;
  {
    NoGradGuard ng;  // the noise is a constant of the graph, as torch's saved noise
    slope = where(le(x, Scalar(0)), uniform_(empty(x.sizes(), TensorOptions(d)), lower, upper, generator),
                  ones_like(x));
  }
  return mul(x, slope);
}

namespace {
Composite c_channel_shuffle{"channel_shuffle(Tensor self, int groups) -> Tensor",
                            [](const TensorList& in, const Attrs& a) -> TensorList {
                              return {channel_shuffle(in[0], attr<int64_t>(a, 0))};
                            },
                            kFunctionVariant};
Composite c_native_channel_shuffle{"native_channel_shuffle(Tensor self, int groups) -> Tensor",
                                   [](const TensorList& in, const Attrs& a) -> TensorList {
                                     return {channel_shuffle(in[0], attr<int64_t>(a, 0))};
                                   },
                                   kFunctionVariant};
Composite c_alpha_dropout{"alpha_dropout(Tensor input, float p, bool train) -> Tensor",
                          [](const TensorList& in, const Attrs& a) -> TensorList {
                            return {alpha_dropout(in[0], attr<double>(a, 0), attr<bool>(a, 1))};
                          },
                          kFunctionVariant};
Composite c_feature_alpha_dropout{"feature_alpha_dropout(Tensor input, float p, bool train) -> Tensor",
                                  [](const TensorList& in, const Attrs& a) -> TensorList {
                                    return {feature_alpha_dropout(in[0], attr<double>(a, 0), attr<bool>(a, 1))};
                                  },
                                  kFunctionVariant};
Composite c_rrelu{"rrelu(Tensor self, float lower=0.125, float upper=0.3333333333333333, bool training=False, "
                  "Generator? generator=None) -> Tensor",
                  [](const TensorList& in, const Attrs& a) -> TensorList {
                    return {rrelu(in[0], attr<double>(a, 0), attr<double>(a, 1), attr<bool>(a, 2),
                                  generator_attr(a, 3))};
                  },
                  kFunctionVariant};
}  // namespace

}  // namespace kiln::nn::functional

namespace kiln::nn {

using layer_util::pybool;
using layer_util::pyfloat;

AlphaDropoutNd::AlphaDropoutNd(std::string name, bool feature, double p, bool inplace)
    : Module(std::move(name)), feature(feature), p(p), inplace(inplace) {
  KILN_CHECK(p >= 0 && p <= 1, Value, this->name().c_str(), "dropout probability has to be between 0 and 1, but got ",
             p);
}
Tensor AlphaDropoutNd::forward(const Tensor& x) {
  return feature ? F::feature_alpha_dropout(x, p, is_training()) : F::alpha_dropout(x, p, is_training());
}
std::string AlphaDropoutNd::extra_repr() const { return "p=" + pyfloat(p) + ", inplace=" + pybool(inplace); }

std::string RReLU::extra_repr() const {
  return "lower=" + pyfloat(lower) + ", upper=" + pyfloat(upper) + (inplace ? ", inplace=True" : "");
}

LPPoolNd::LPPoolNd(std::string name, int64_t nd, double norm_type, IntOrTuple k, std::optional<IntOrTuple> s,
                   bool ceil_mode)
    : Module(std::move(name)),
      spatial_dims(nd),
      norm_type(norm_type),
      kernel_size(std::move(k)),
      stride(std::move(s)),
      ceil_mode(ceil_mode) {}
Tensor LPPoolNd::forward(const Tensor& x) {
  const Shape s = stride ? stride->values : Shape{};
  if (spatial_dims == 1) return F::lp_pool1d(x, norm_type, kernel_size.values, s, ceil_mode);
  if (spatial_dims == 2) return F::lp_pool2d(x, norm_type, kernel_size.values, s, ceil_mode);
  return F::lp_pool3d(x, norm_type, kernel_size.values, s, ceil_mode);
}
std::string LPPoolNd::extra_repr() const {
  const bool whole = norm_type == std::floor(norm_type) && std::abs(norm_type) < 1e15;
  return "norm_type=" + (whole ? std::to_string(static_cast<int64_t>(norm_type)) : pyfloat(norm_type)) +
         ", kernel_size=" + kernel_size.repr() + ", stride=" + (stride ? stride->repr() : std::string("None")) +
         ", ceil_mode=" + pybool(ceil_mode);
}

MaxUnpoolNd::MaxUnpoolNd(std::string name, int64_t nd, IntOrTuple k, std::optional<IntOrTuple> s, IntOrTuple p)
    : Module(std::move(name)), spatial_dims(nd) {
  const char* op = this->name().c_str();
  kernel_size = k.expand(nd, op, "kernel_size");
  stride = s ? s->expand(nd, op, "stride") : kernel_size;
  padding = p.expand(nd, op, "padding");
}
Tensor MaxUnpoolNd::forward(const Tensor& x, const Tensor& indices, const Shape& output_size) {
  if (spatial_dims == 1) return F::max_unpool1d(x, indices, kernel_size, stride, padding, output_size);
  if (spatial_dims == 2) return F::max_unpool2d(x, indices, kernel_size, stride, padding, output_size);
  return F::max_unpool3d(x, indices, kernel_size, stride, padding, output_size);
}
std::string MaxUnpoolNd::extra_repr() const {
  return "kernel_size=" + layer_util::tuple_str(kernel_size) + ", stride=" + layer_util::tuple_str(stride) +
         ", padding=" + layer_util::tuple_str(padding);
}

}  // namespace kiln::nn
