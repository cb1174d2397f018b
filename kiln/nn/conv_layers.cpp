// Convolution, pooling and upsampling modules over kiln/ops/nn_ops.h.
#include "kiln/nn/conv_layers.h"

#include <cmath>

#include "kiln/nn/init.h"
#include "kiln/ops/nn_ops.h"
#include "kiln/ops/shape.h"

namespace kiln::nn {
namespace {

using layer_util::expand_arg;
using layer_util::opts;
using layer_util::pybool;
using layer_util::pyfloat;
using layer_util::tuple_str;

bool all_equal(const Shape& s, int64_t v) {
  for (int64_t x : s)
    if (x != v) return false;
  return true;
}

}  // namespace

// ---- ConvNd -------------------------------------------------------------------------------------
ConvNd::ConvNd(std::string name, int64_t nd, bool transposed, int64_t in, int64_t out,
               const Shape& k, const Shape& s, const ConvPadding& p, const Shape& d,
               const Shape& op, int64_t groups, bool bias, std::string padding_mode, Dtype dtype)
    : Module(name),
      in_channels(in),
      out_channels(out),
      transposed(transposed),
      groups(groups),
      padding_mode(std::move(padding_mode)) {
  const char* n = name_.c_str();
  const size_t sd = static_cast<size_t>(nd);
  kernel_size = expand_arg(k, sd, n, "kernel_size");
  stride = expand_arg(s, sd, n, "stride");
  dilation = expand_arg(d, sd, n, "dilation");
  output_padding = expand_arg(op, sd, n, "output_padding");
  KILN_CHECK(groups > 0, Value, n, "groups must be a positive integer");
  KILN_CHECK(in % groups == 0, Value, n, "in_channels must be divisible by groups");
  KILN_CHECK(out % groups == 0, Value, n, "out_channels must be divisible by groups");
  reversed_padding_twice_.assign(2 * sd, 0);
  if (!p.mode.empty()) {
    KILN_CHECK(p.mode == "same" || p.mode == "valid", Value, n, "Invalid padding string '", p.mode,
               "', should be one of {'valid', 'same'}");
    KILN_CHECK(p.mode != "same" || all_equal(stride, 1), Value, n,
               "padding='same' is not supported for strided convolutions");
    padding_str = p.mode;
    padding = Shape(sd, 0);
    if (p.mode == "same")
      for (size_t i = 0; i < sd; ++i) {
        int64_t total = dilation[i] * (kernel_size[i] - 1), left = total / 2;
        size_t r = sd - 1 - i;
        reversed_padding_twice_[2 * r] = left;
        reversed_padding_twice_[2 * r + 1] = total - left;
      }
  } else {
    padding = expand_arg(p.values, sd, n, "padding");
    for (size_t i = 0; i < sd; ++i) {
      size_t r = sd - 1 - i;
      reversed_padding_twice_[2 * r] = reversed_padding_twice_[2 * r + 1] = padding[i];
    }
  }
  const std::string& pm = this->padding_mode;
  KILN_CHECK(pm == "zeros" || pm == "reflect" || pm == "replicate" || pm == "circular", Value, n,
             "padding_mode must be one of {'zeros', 'reflect', 'replicate', 'circular'}, but got "
             "padding_mode='",
             pm, "'");
  Shape wshape = transposed ? Shape{in, out / groups} : Shape{out, in / groups};
  wshape.insert(wshape.end(), kernel_size.begin(), kernel_size.end());
  register_parameter("weight", empty(wshape, opts(dtype)));
  register_parameter("bias", bias ? empty({out}, opts(dtype)) : Tensor());
  reset_parameters();
}

void ConvNd::reset_parameters() {
  init::kaiming_uniform_(weight(), std::sqrt(5.0));
  if (bias().defined()) {
    auto [fan_in, fan_out] = init::calculate_fan_in_and_fan_out(weight());
    double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias(), -bound, bound);
  }
}

std::string ConvNd::extra_repr() const {
  std::string s = std::to_string(in_channels) + ", " + std::to_string(out_channels) +
                  ", kernel_size=" + tuple_str(kernel_size) + ", stride=" + tuple_str(stride);
  if (!padding_str.empty())
    s += ", padding=" + padding_str;
  else if (!all_equal(padding, 0))
    s += ", padding=" + tuple_str(padding);
  if (!all_equal(dilation, 1)) s += ", dilation=" + tuple_str(dilation);
  if (!all_equal(output_padding, 0)) s += ", output_padding=" + tuple_str(output_padding);
  if (groups != 1) s += ", groups=" + std::to_string(groups);
  if (!own_parameters().items()[1].second.defined()) s += ", bias=False";
  if (padding_mode != "zeros") s += ", padding_mode=" + padding_mode;
  return s;
}

Tensor ConvNd::pad_input(const Tensor& x) const {
  return pad(x, reversed_padding_twice_, padding_mode);
}

Conv1d::Conv1d(int64_t in, int64_t out, const Shape& k, const Shape& s, const ConvPadding& p,
               const Shape& d, int64_t groups, bool bias, std::string padding_mode, Dtype dtype)
    : ConvNd("Conv1d", 1, false, in, out, k, s, p, d, {0}, groups, bias, std::move(padding_mode),
             dtype) {}

Tensor Conv1d::forward(const Tensor& x) {
  const Tensor &w = param("weight"), &b = param("bias");
  if (padding_mode != "zeros")
    return conv1d(pad_input(x), w, b, stride, Shape{0}, dilation, groups);
  if (!padding_str.empty()) return conv1d(x, w, b, stride, padding_str, dilation, groups);
  return conv1d(x, w, b, stride, padding, dilation, groups);
}

Conv2d::Conv2d(int64_t in, int64_t out, const Shape& k, const Shape& s, const ConvPadding& p,
               const Shape& d, int64_t groups, bool bias, std::string padding_mode, Dtype dtype)
    : ConvNd("Conv2d", 2, false, in, out, k, s, p, d, {0}, groups, bias, std::move(padding_mode),
             dtype) {}

Tensor Conv2d::forward(const Tensor& x) {
  const Tensor &w = param("weight"), &b = param("bias");
  if (padding_mode != "zeros")
    return conv2d(pad_input(x), w, b, stride, Shape{0, 0}, dilation, groups);
  if (!padding_str.empty()) return conv2d(x, w, b, stride, padding_str, dilation, groups);
  return conv2d(x, w, b, stride, padding, dilation, groups);
}

Conv3d::Conv3d(int64_t in, int64_t out, const Shape& k, const Shape& s, const ConvPadding& p,
               const Shape& d, int64_t groups, bool bias, std::string padding_mode, Dtype dtype)
    : ConvNd("Conv3d", 3, false, in, out, k, s, p, d, {0}, groups, bias, std::move(padding_mode),
             dtype) {}

Tensor Conv3d::forward(const Tensor& x) {
  const Tensor &w = param("weight"), &b = param("bias");
  if (padding_mode != "zeros")
    return conv3d(pad_input(x), w, b, stride, Shape{0, 0, 0}, dilation, groups);
  if (!padding_str.empty()) return conv3d(x, w, b, stride, padding_str, dilation, groups);
  return conv3d(x, w, b, stride, padding, dilation, groups);
}

// torch's _ConvTransposeNd._output_padding: the output_padding that gives output_size.
Shape ConvNd::output_padding_for(const Tensor& x, const std::optional<Shape>& output_size) const {
  if (!output_size) return output_padding;
  const int64_t nsp = static_cast<int64_t>(kernel_size.size());
  const std::string n = "ConvTranspose" + std::to_string(nsp) + "D";
  const int64_t non_spatial = x.dim() == nsp + 2 ? 2 : 1;
  Shape want = *output_size;
  if (static_cast<int64_t>(want.size()) == non_spatial + nsp)
    want.erase(want.begin(), want.begin() + non_spatial);
  KILN_CHECK(static_cast<int64_t>(want.size()) == nsp, Value, n.c_str(), n, ": for ", x.dim(),
             "D input, output_size must have ", nsp, " or ", non_spatial + nsp, " elements (got ",
             want.size(), ")");
  KILN_CHECK(x.dim() >= non_spatial + nsp, Runtime, n.c_str(), "expected a ", nsp + 1, "D or ",
             nsp + 2, "D input, got ", x.dim(), "D");
  Shape lo(nsp), hi(nsp), in_sizes(x.sizes().end() - nsp, x.sizes().end()), r(nsp);
  for (int64_t d = 0; d < nsp; ++d) {
    lo[d] = (x.size(d + non_spatial) - 1) * stride[d] - 2 * padding[d] +
            dilation[d] * (kernel_size[d] - 1) + 1;
    hi[d] = lo[d] + stride[d] - 1;
  }
  for (int64_t d = 0; d < nsp; ++d) {
    KILN_CHECK(want[d] >= lo[d] && want[d] <= hi[d], Value, n.c_str(), "requested an output size of ",
               want, ", but valid sizes range from ", lo, " to ", hi, " (for an input of ", in_sizes,
               ")");
    r[d] = want[d] - lo[d];
  }
  return r;
}

namespace {
std::string zeros_only(const std::string& padding_mode, const char* name) {
  KILN_CHECK(padding_mode == "zeros", Value, name, "Only \"zeros\" padding mode is supported for ",
             name);
  return padding_mode;
}
}  // namespace

#define KILN_CONV_TRANSPOSE(N)                                                                       \
  ConvTranspose##N##d::ConvTranspose##N##d(int64_t in, int64_t out, const Shape& k, const Shape& s, \
                                           const Shape& p, const Shape& op, int64_t groups,          \
                                           bool bias, const Shape& d, std::string padding_mode,      \
                                           Dtype dtype)                                              \
      : ConvNd("ConvTranspose" #N "d", N, true, in, out, k, s, p, d, op, groups, bias,               \
               zeros_only(padding_mode, "ConvTranspose" #N "d"), dtype) {}                           \
  Tensor ConvTranspose##N##d::forward(const Tensor& x, const std::optional<Shape>& output_size) {   \
    return conv_transpose##N##d(x, param("weight"), param("bias"), stride, padding,                  \
                                output_padding_for(x, output_size), groups, dilation);              \
  }
KILN_CONV_TRANSPOSE(1)
KILN_CONV_TRANSPOSE(2)
KILN_CONV_TRANSPOSE(3)
#undef KILN_CONV_TRANSPOSE

// ---- pooling ------------------------------------------------------------------------------------
MaxPoolNd::MaxPoolNd(std::string name, int64_t nd, IntOrTuple k, std::optional<IntOrTuple> s,
                     IntOrTuple p, IntOrTuple d, bool return_indices, bool ceil_mode)
    : Module(std::move(name)),
      spatial_dims(nd),
      kernel_size(std::move(k)),
      stride(s ? *s : kernel_size),
      padding(std::move(p)),
      dilation(std::move(d)),
      return_indices(return_indices),
      ceil_mode(ceil_mode) {}

std::tuple<Tensor, Tensor> MaxPoolNd::forward_with_indices(const Tensor& x) {
  if (spatial_dims == 3)
    return max_pool3d_with_indices(x, kernel_size.values, stride.values, padding.values,
                                   dilation.values, ceil_mode);
  if (spatial_dims == 1)
    return max_pool1d_with_indices(x, kernel_size.values, stride.values, padding.values,
                                   dilation.values, ceil_mode);
  return max_pool2d_with_indices(x, kernel_size.values, stride.values, padding.values,
                                 dilation.values, ceil_mode);
}
Tensor MaxPoolNd::forward(const Tensor& x) {
  if (spatial_dims == 3)
    return max_pool3d(x, kernel_size.values, stride.values, padding.values, dilation.values,
                      ceil_mode);
  if (spatial_dims == 1)
    return max_pool1d(x, kernel_size.values, stride.values, padding.values, dilation.values,
                      ceil_mode);
  return max_pool2d(x, kernel_size.values, stride.values, padding.values, dilation.values,
                    ceil_mode);
}
std::string MaxPoolNd::extra_repr() const {
  return "kernel_size=" + kernel_size.repr() + ", stride=" + stride.repr() +
         ", padding=" + padding.repr() + ", dilation=" + dilation.repr() +
         ", ceil_mode=" + pybool(ceil_mode);
}

AvgPool1d::AvgPool1d(IntOrTuple k, std::optional<IntOrTuple> s, IntOrTuple p, bool ceil_mode,
                     bool count_include_pad)
    : Module("AvgPool1d"),
      kernel_size(std::move(k)),
      stride(s ? *s : kernel_size),
      padding(std::move(p)),
      ceil_mode(ceil_mode),
      count_include_pad(count_include_pad) {
  kernel_size.scalar = stride.scalar = padding.scalar = false;  // torch's _single: always tuples
}
Tensor AvgPool1d::forward(const Tensor& x) {
  return avg_pool1d(x, kernel_size.values, stride.values, padding.values, ceil_mode,
                    count_include_pad);
}
std::string AvgPool1d::extra_repr() const {
  return "kernel_size=" + kernel_size.repr() + ", stride=" + stride.repr() +
         ", padding=" + padding.repr();
}

AvgPoolNd::AvgPoolNd(std::string name, int64_t nd, IntOrTuple k, std::optional<IntOrTuple> s,
                     IntOrTuple p, bool ceil_mode, bool count_include_pad,
                     std::optional<int64_t> divisor_override)
    : Module(std::move(name)),
      spatial_dims(nd),
      kernel_size(std::move(k)),
      stride(s ? *s : kernel_size),
      padding(std::move(p)),
      ceil_mode(ceil_mode),
      count_include_pad(count_include_pad),
      divisor_override(divisor_override) {}
Tensor AvgPoolNd::forward(const Tensor& x) {
  auto pool = spatial_dims == 3 ? &avg_pool3d : &avg_pool2d;
  return pool(x, kernel_size.values, stride.values, padding.values, ceil_mode, count_include_pad,
              divisor_override);
}
std::string AvgPoolNd::extra_repr() const {
  return "kernel_size=" + kernel_size.repr() + ", stride=" + stride.repr() +
         ", padding=" + padding.repr();
}

AdaptiveAvgPool1d::AdaptiveAvgPool1d(IntOrTuple o)
    : Module("AdaptiveAvgPool1d"), output_size(std::move(o)) {}
Tensor AdaptiveAvgPool1d::forward(const Tensor& x) {
  return adaptive_avg_pool1d(x, output_size.values);
}
std::string AdaptiveAvgPool1d::extra_repr() const { return "output_size=" + output_size.repr(); }

AdaptivePoolNd::AdaptivePoolNd(std::string name, int64_t nd, bool max,
                               std::vector<std::optional<int64_t>> o, bool scalar,
                               bool return_indices)
    : Module(std::move(name)),
      spatial_dims(nd),
      max(max),
      output_size(std::move(o)),
      scalar(scalar),
      return_indices(return_indices) {}

Shape AdaptivePoolNd::resolve(const Tensor& x) const {
  Shape out;
  std::vector<std::optional<int64_t>> o = output_size;
  if (o.size() == 1) o.resize(spatial_dims, o[0]);
  for (size_t i = 0; i < o.size(); ++i) {
    int64_t d = x.dim() - static_cast<int64_t>(o.size()) + static_cast<int64_t>(i);
    KILN_CHECK(o[i] || d >= 0, Runtime, name().c_str(), "expected a ", spatial_dims + 1, "D or ",
               spatial_dims + 2, "D input, got ", x.dim(), "D");
    out.push_back(o[i] ? *o[i] : x.size(d));
  }
  return out;
}
Tensor AdaptivePoolNd::forward(const Tensor& x) {
  if (max) return std::get<0>(forward_with_indices(x));
  return spatial_dims == 3 ? adaptive_avg_pool3d(x, resolve(x)) : adaptive_avg_pool2d(x, resolve(x));
}
std::tuple<Tensor, Tensor> AdaptivePoolNd::forward_with_indices(const Tensor& x) {
  KILN_CHECK(max, Runtime, name().c_str(), "average pooling has no indices");
  Shape o = resolve(x);
  if (spatial_dims == 1) return adaptive_max_pool1d(x, o);
  return spatial_dims == 2 ? adaptive_max_pool2d(x, o) : adaptive_max_pool3d(x, o);
}
std::string AdaptivePoolNd::extra_repr() const {
  auto one = [](const std::optional<int64_t>& v) {
    return v ? std::to_string(*v) : std::string("None");
  };
  if (scalar && output_size.size() == 1) return "output_size=" + one(output_size[0]);
  std::string s = "output_size=(";
  for (size_t i = 0; i < output_size.size(); ++i) s += (i ? ", " : "") + one(output_size[i]);
  return s + (output_size.size() == 1 ? ",)" : ")");
}

// ---- Fold / Unfold ------------------------------------------------------------------------------
Unfold::Unfold(IntOrTuple k, IntOrTuple d, IntOrTuple p, IntOrTuple s)
    : Module("Unfold"), kernel_size(std::move(k)), dilation(std::move(d)), padding(std::move(p)),
      stride(std::move(s)) {}
Tensor Unfold::forward(const Tensor& x) {
  return functional::unfold(x, kernel_size.values, dilation.values, padding.values, stride.values);
}
std::string Unfold::extra_repr() const {
  return "kernel_size=" + kernel_size.repr() + ", dilation=" + dilation.repr() +
         ", padding=" + padding.repr() + ", stride=" + stride.repr();
}
Fold::Fold(IntOrTuple o, IntOrTuple k, IntOrTuple d, IntOrTuple p, IntOrTuple s)
    : Module("Fold"), output_size(std::move(o)), kernel_size(std::move(k)), dilation(std::move(d)),
      padding(std::move(p)), stride(std::move(s)) {}
Tensor Fold::forward(const Tensor& x) {
  return functional::fold(x, output_size.values, kernel_size.values, dilation.values,
                          padding.values, stride.values);
}
std::string Fold::extra_repr() const {
  return "output_size=" + output_size.repr() + ", kernel_size=" + kernel_size.repr() +
         ", dilation=" + dilation.repr() + ", padding=" + padding.repr() +
         ", stride=" + stride.repr();
}

// ---- Upsample -----------------------------------------------------------------------------------
Upsample::Upsample(std::optional<IntOrTuple> size, std::optional<std::vector<double>> scale_factor,
                   std::string mode, std::optional<bool> align_corners,
                   std::optional<bool> recompute, bool scale_scalar, std::string name)
    : Module(std::move(name)),
      size(std::move(size)),
      scale_factor(std::move(scale_factor)),
      mode(std::move(mode)),
      align_corners(align_corners),
      recompute_scale_factor(recompute),
      scale_scalar(scale_scalar) {
  // torch keeps `float(scale_factor) if scale_factor else None`: a zero scale counts as absent
  if (this->scale_factor && this->scale_scalar && !this->scale_factor->empty() &&
      (*this->scale_factor)[0] == 0)
    this->scale_factor.reset();
}
Tensor Upsample::forward(const Tensor& x) {
  const size_t sd = static_cast<size_t>(std::max<int64_t>(x.dim() - 2, 0));
  std::optional<Shape> sz;
  if (size) sz = size->scalar ? Shape(sd, size->values[0]) : size->values;
  std::optional<std::vector<double>> sf = scale_factor;
  if (sf && scale_scalar && sf->size() == 1) sf = std::vector<double>(sd, (*sf)[0]);
  return interpolate(x, sz, sf, mode, align_corners, recompute_scale_factor);
}
std::string Upsample::extra_repr() const {
  std::string s;
  if (scale_factor) {
    if (scale_scalar && scale_factor->size() == 1) {
      s = "scale_factor=" + pyfloat((*scale_factor)[0]);
    } else {
      s = "scale_factor=(";
      for (size_t i = 0; i < scale_factor->size(); ++i)
        s += (i ? ", " : "") + pyfloat((*scale_factor)[i]);
      s += scale_factor->size() == 1 ? ",)" : ")";
    }
  } else {
    s = "size=" + (size ? size->repr() : std::string("None"));
  }
  return s + ", mode='" + mode + "'";
}

}  // namespace kiln::nn
