// Convolution: one table op (`convolution`, 1-d and 2-d, plain and transposed) and one for the
// weight gradient (`convolution_backward_weight`): schemas, metas, derivatives and front ends. The
// CPU kernels are in kiln/backend/cpu/conv.cpp.
#include "kiln/ops/conv_detail.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

using namespace nn_detail;
using namespace conv_detail;

// ---- convolution: inputs {input, weight[, bias]}; attrs {stride, padding, dilation, transposed,
// output_padding, groups}
Attrs conv_attrs(const Shape& s, const Shape& p, const Shape& d, bool transposed, const Shape& op,
                 int64_t groups) {
  return {s, p, d, transposed, op, groups};
}

// torch's check_shape_forward, then the output shape.
SymShape conv_output_shape(const TensorSpec& x, const TensorSpec& w, const TensorSpec* b, const ConvArgs& c) {
  const char* op = "convolution";
  int64_t nsp = w.dim() - 2;
  KILN_CHECK(nsp >= 1 && nsp <= 3, NotImplemented, op,
             "only 1-d, 2-d and 3-d convolutions are supported, got a ", w.dim(), "-dimensional weight");
  const std::pair<const Shape*, const char*> lists[] = {{&c.stride, "stride"},
                                                        {&c.padding, "padding"},
                                                        {&c.dilation, "dilation"},
                                                        {&c.output_padding, "output_padding"}};
  for (auto [v, name] : lists)
    KILN_CHECK(static_cast<int64_t>(v->size()) == nsp, Runtime, op, "expected ", name,
               " to be a single integer value or a list of ", nsp,
               " values to match the convolution dimensions, but got ", name, "=", *v);
  for (int64_t v : c.padding) KILN_CHECK(v >= 0, Runtime, op, "negative padding is not supported");
  for (int64_t v : c.output_padding)
    KILN_CHECK(v >= 0, Runtime, op, "negative output_padding is not supported");
  for (int64_t v : c.stride) KILN_CHECK(v > 0, Runtime, op, "non-positive stride is not supported");
  for (int64_t v : c.dilation)
    KILN_CHECK(v > 0, Runtime, op, "non-positive dilation is not supported");
  KILN_CHECK(c.groups > 0, Runtime, op, "non-positive groups is not supported");
  const SymShape& ws = w.sizes();
  KILN_CHECK(x.dim() == w.dim(), Runtime, op, "Expected ", w.dim(), "-dimensional input for ",
             w.dim(), "-dimensional weight ", ws, ", but got ", x.dim(),
             "-dimensional input of size ", x.sizes(), " instead");
  KILN_CHECK(ws[0] >= c.groups, Runtime, op, "Given groups=", c.groups,
             ", expected weight to be at least ", c.groups,
             " at dimension 0, but got weight of size ", ws, " instead");
  KILN_CHECK(ws[0] % c.groups == 0, Runtime, op, "Given groups=", c.groups,
             ", expected weight to be divisible by ", c.groups,
             " at dimension 0, but got weight of size ", ws, " instead");
  KILN_CHECK(x.dtype() == w.dtype(), Runtime, op, "Input type (", dtype_name(x.dtype()),
             ") and weight type (", dtype_name(w.dtype()), ") should be the same");
  KILN_CHECK(!b || b->dtype() == x.dtype(), Runtime, op, "Input type (", dtype_name(x.dtype()),
             ") and bias type (", dtype_name(b->dtype()), ") should be the same");
  bool kernel_ok = true;
  for (int64_t i = 0; i < nsp; ++i) kernel_ok = kernel_ok && bool(ws[i + 2] > 0);
  KILN_CHECK(kernel_ok, Runtime, op, "kernel size should be greater than zero, but got weight of size ", ws);
  SymShape out{x.sizes()[0], 0};
  if (!c.transposed) {
    KILN_CHECK(x.sizes()[1] == ws[1] * c.groups, Runtime, op, "Given groups=", c.groups,
               ", weight of size ", ws, ", expected input", x.sizes(), " to have ",
               ws[1] * c.groups, " channels, but got ", x.sizes()[1], " channels instead");
    KILN_CHECK(!b || (b->dim() == 1 && b->sizes()[0] == ws[0]), Runtime, op,
               "Given weight of size ", ws, ", expected bias to be 1-dimensional with ", ws[0],
               " elements, but got bias of size ", b->sizes(), " instead");
    bool fits = true;
    SymShape padded, kernel;
    for (int64_t i = 0; i < nsp; ++i) {
      padded.push_back(x.sizes()[i + 2] + 2 * c.padding[i]);
      kernel.push_back(c.dilation[i] * (ws[i + 2] - 1) + 1);
      fits = fits && bool(padded.back() >= kernel.back());
    }
    if (!fits) {
      std::string ps, ks;
      for (int64_t i = 0; i < nsp; ++i) {
        ps += (i ? " x " : "") + padded[i].str();
        ks += (i ? " x " : "") + kernel[i].str();
      }
      KILN_FAIL(Runtime, op, "Calculated padded input size per channel: (", ps, "). Kernel size: (",
                ks, "). Kernel size can't be greater than actual input size");
    }
    out[1] = ws[0];
    for (int64_t i = 0; i < nsp; ++i) out.push_back((padded[i] - kernel[i]) / c.stride[i] + 1);
    return out;
  }
  KILN_CHECK(x.sizes()[1] == ws[0], Runtime, op, "Given transposed=1, weight of size ", ws,
             ", expected input", x.sizes(), " to have ", ws[0], " channels, but got ", x.sizes()[1],
             " channels instead");
  KILN_CHECK(!b || (b->dim() == 1 && b->sizes()[0] == ws[1] * c.groups), Runtime, op,
             "Given transposed=1, weight of size ", ws, ", expected bias to be 1-dimensional with ",
             ws[1] * c.groups, " elements, but got bias of size ", b->sizes(), " instead");
  bool op_ok = true;
  for (int64_t i = 0; i < nsp; ++i)
    op_ok = op_ok && (c.output_padding[i] < c.stride[i] || c.output_padding[i] < c.dilation[i]);
  KILN_CHECK(op_ok, Runtime, op,
             "output padding must be smaller than either stride or dilation, but got "
             "output_padding=",
             c.output_padding, " stride=", c.stride, " dilation=", c.dilation);
  out[1] = ws[1] * c.groups;
  bool positive = true;
  for (int64_t i = 0; i < nsp; ++i) {
    out.push_back((x.sizes()[i + 2] - 1) * c.stride[i] - 2 * c.padding[i] +
                  c.dilation[i] * (ws[i + 2] - 1) + c.output_padding[i] + 1);
    positive = positive && bool(out.back() > 0);
  }
  KILN_CHECK(positive, Runtime, op, "Given input size per channel: ", SymShape(x.sizes().begin() + 2, x.sizes().end()),
             ". Calculated output size per channel: ", SymShape(out.begin() + 2, out.end()), ". Output size is too small");
  return out;
}

SpecList conv_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  KILN_CHECK(in.size() == 2 || in.size() == 3, Runtime, "convolution",
             "expected input, weight and bias");
  const TensorSpec* b = in.size() == 3 && in[2].defined() ? &in[2] : nullptr;
  return {{conv_output_shape(in[0], in[1], b, conv_args(a)), in[0].dtype()}};
}

OpDef op_convolution{"convolution", 0, conv_meta, {}};
OpRegistrar reg_convolution{op_convolution, "convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, bool transposed, int[] output_padding, int groups) -> Tensor"};

// ---- convolution_backward_weight: inputs {grad_output, input}; attrs {weight_sizes, stride,
// padding, dilation, groups}
SpecList conv_bw_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const char* op = "convolution_backward_weight";
  const TensorSpec &gy = in[0], &x = in[1];
  const SymShape ws = attr_sym_shape(a, 0);
  int64_t groups = attr<int64_t>(a, 4);
  KILN_CHECK(x.dim() >= 3 && x.dim() <= 5 && gy.dim() == x.dim() &&
                 static_cast<int64_t>(ws.size()) == x.dim(),
             Runtime, op, "expected 3-d to 5-d grad_output and input matching the weight size ", ws,
             ", got ", gy.sizes(), " and ", x.sizes());
  KILN_CHECK(groups > 0 && ws[0] % groups == 0 && gy.sizes()[0] == x.sizes()[0] &&
                 gy.sizes()[1] == ws[0] && x.sizes()[1] == ws[1] * groups,
             Runtime, op, "grad_output ", gy.sizes(), " and input ", x.sizes(),
             " do not match weight ", ws, " with groups=", groups);
  KILN_CHECK(gy.dtype() == x.dtype(), Runtime, op,
             "expected grad_output and input of one dtype, got ", dtype_name(gy.dtype()), " and ",
             dtype_name(x.dtype()));
  return {{ws, x.dtype()}};
}
OpDef op_conv_bw{"convolution_backward_weight", 0, conv_bw_meta, {}};
OpRegistrar reg_conv_bw{op_conv_bw, "convolution_backward_weight(Tensor grad_output, Tensor input, int[] weight_size, int[] stride, int[] padding, int[] dilation, int groups) -> Tensor"};

// ---- derivatives -------------------------------------------------------------------------------
// The transposed-convolution output_padding that makes conv_transpose(g) as large as `target`.
// In SymInts (a trace keeps the batch symbolic); a symbolic padding is specialised (a guard).
Shape output_padding_for(const SymShape& target, const SymShape& g, const Shape& ksize, const Shape& s,
                         const Shape& p, const Shape& d) {
  Shape op;
  for (size_t i = 0; i < s.size(); ++i) {
    const SymInt v = target[i + 2] - ((g[i + 2] - 1) * s[i] - 2 * p[i] + d[i] * (ksize[i + 2] - 1) + 1);
    op.push_back(v.is_symbolic() ? v.guard_int(std::string("backward")) : v.raw());
  }
  return op;
}
// Trims the spatial dims of t to those of `target` (a plain convolution of a transposed one's
// output can reach further when output_padding >= stride).
Tensor trim_to(Tensor t, const SymShape& target) {
  for (int64_t i = 2; i < t.dim(); ++i)
    if (t.sym_size(i) != target[i]) t = narrow_symint(t, i, 0, target[i]);
  return t;
}

TensorList conv_derivative(const GradCtx& ctx, const TensorList& grad) {
  ConvArgs c = conv_args(ctx.attrs);
  const Tensor &x = ctx.in[0], &w = ctx.in[1], &g = grad[0];
  const SymShape& xs = ctx.in_specs[0].sizes();
  TensorList r(ctx.in.size());
  Shape zero(c.stride.size(), 0);
  if (!c.transposed) {
    if (ctx.needs[0])
      r[0] = convolution(
          g, w, {}, c.stride, c.padding, c.dilation, true,
          output_padding_for(xs, g.sym_sizes(), w.sizes(), c.stride, c.padding, c.dilation), c.groups);
    if (ctx.needs[1])
      r[1] =
          convolution_backward_weight(g, x, w.sizes(), c.stride, c.padding, c.dilation, c.groups);
  } else {
    if (ctx.needs[0])
      r[0] = trim_to(convolution(g, w, {}, c.stride, c.padding, c.dilation, false, zero, c.groups),
                     xs);
    if (ctx.needs[1])
      r[1] =
          convolution_backward_weight(x, g, w.sizes(), c.stride, c.padding, c.dilation, c.groups);
  }
  if (r.size() == 3 && ctx.needs[2]) {
    Shape dims{0};
    for (int64_t i = 2; i < g.dim(); ++i) dims.push_back(i);
    r[2] = sum(g, dims);
  }
  return r;
}
DerivativeRegistrar d_convolution{op_convolution, conv_derivative, 0b011, 0};

// dW = B(gy, x) is bilinear: its adjoints are a plain convolution of x (for gy) and a transposed
// convolution of gy (for x), both with the incoming weight gradient as the weight.
TensorList conv_bw_derivative(const GradCtx& ctx, const TensorList& grad) {
  const Attrs& a = ctx.attrs;
  const Shape &s = attr<Shape>(a, 1), &p = attr<Shape>(a, 2), &d = attr<Shape>(a, 3);
  int64_t groups = attr<int64_t>(a, 4);
  const Tensor &gy = ctx.in[0], &x = ctx.in[1], &gw = grad[0];
  TensorList r(2);
  if (ctx.needs[0])
    r[0] = trim_to(convolution(x, gw, {}, s, p, d, false, Shape(s.size(), 0), groups), gy.sym_sizes());
  if (ctx.needs[1])
    r[1] = convolution(gy, gw, {}, s, p, d, true,
                       output_padding_for(x.sym_sizes(), gy.sym_sizes(), gw.sizes(), s, p, d), groups);
  return r;
}
DerivativeRegistrar d_conv_bw{op_conv_bw, conv_bw_derivative, 0b11, 0};

// ---- front ends ---------------------------------------------------------------------------------
Shape expand_param(const Shape& v, int64_t n, const char* name, const char* op) {
  if (v.size() == 1 && n != 1) return Shape(n, v[0]);
  KILN_CHECK(static_cast<int64_t>(v.size()) == n, Runtime, op, "expected ", name,
             " to be a single integer value or a list of ", n,
             " values to match the convolution dimensions, but got ", name, "=", v);
  return v;
}

// torch's batchify: (C, *) inputs get a batch dim of 1.
Tensor batchify(const Tensor& x, int64_t nsp, const char* op, bool& batched) {
  KILN_CHECK(x.dim() == nsp + 1 || x.dim() == nsp + 2, Runtime, op, "Expected ", nsp + 1,
             "D (unbatched) or ", nsp + 2, "D (batched) input to ", op,
             ", but got input of size: ", x.sizes());
  batched = x.dim() == nsp + 2;
  return batched ? x : unsqueeze(x, 0);
}
int64_t weight_spatial_dims(const Tensor& w, const char* op) {
  KILN_CHECK(w.dim() >= 3, Runtime, op, "weight should have at least three dimensions, got ",
             w.sizes());
  return w.dim() - 2;
}

Tensor conv_nd(int64_t nsp, const char* op, const Tensor& input, const Tensor& weight,
               const Tensor& bias, const Shape& stride, const Shape& padding, const Shape& dilation,
               int64_t groups) {
  KILN_CHECK(!bias.defined() || bias.dtype() == input.dtype(), Runtime, op, "Input type (",
             dtype_name(input.dtype()), ") and bias type (", dtype_name(bias.dtype()),
             ") should be the same");
  bool batched;
  Tensor x = batchify(input, nsp, op, batched);
  int64_t k = weight_spatial_dims(weight, op);
  Tensor y = convolution(x, weight, bias, expand_param(stride, k, "stride", op),
                         expand_param(padding, k, "padding", op),
                         expand_param(dilation, k, "dilation", op), false, Shape(k, 0), groups);
  return batched ? y : squeeze(y, Shape{0});
}

// padding="valid" / "same" as torch's _convolution_mode.
Tensor conv_nd_mode(int64_t nsp, const char* op, const Tensor& input, const Tensor& weight,
                    const Tensor& bias, const Shape& stride, const std::string& padding,
                    const Shape& dilation, int64_t groups) {
  if (padding == "valid")
    return conv_nd(nsp, op, input, weight, bias, stride, {0}, dilation, groups);
  KILN_CHECK(padding == "same", Runtime, op, "Invalid padding string: '", padding, "'");
  KILN_CHECK(!bias.defined() || bias.dtype() == input.dtype(), Runtime, op, "Input type (",
             dtype_name(input.dtype()), ") and bias type (", dtype_name(bias.dtype()),
             ") should be the same");
  bool batched;
  Tensor x = batchify(input, nsp, op, batched);
  int64_t k = weight_spatial_dims(weight, op);
  Shape s = expand_param(stride, k, "stride", op), d = expand_param(dilation, k, "dilation", op);
  for (int64_t v : s)
    KILN_CHECK(v == 1, Runtime, op, "padding='same' is not supported for strided convolutions");
  Shape left(k), pad_nd(2 * k, 0);
  bool symmetric = true;
  for (int64_t i = 0; i < k; ++i) {
    int64_t total = d[i] * (weight.sizes()[i + 2] - 1);
    left[i] = total / 2;
    int64_t right = total - left[i];
    if (right != left[i]) {
      symmetric = false;
      pad_nd[2 * (k - 1 - i) + 1] = right - left[i];  // the extra element goes on the right
    }
  }
  if (!symmetric && x.dim() == k + 2) x = pad(x, pad_nd);
  Tensor y = convolution(x, weight, bias, s, left, d, false, Shape(k, 0), groups);
  return batched ? y : squeeze(y, Shape{0});
}

}  // namespace

Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const Shape& stride, const Shape& padding, const Shape& dilation,
                   bool transposed, const Shape& output_padding, int64_t groups) {
  TensorList in{input, weight};
  if (bias.defined()) in.push_back(bias);
  return dispatch1(op_convolution, std::move(in),
                   conv_attrs(stride, padding, dilation, transposed, output_padding, groups));
}

Tensor convolution_backward_weight(const Tensor& grad_output, const Tensor& input,
                                   const Shape& weight_sizes, const Shape& stride,
                                   const Shape& padding, const Shape& dilation, int64_t groups) {
  return dispatch1(op_conv_bw, {grad_output, input},
                   {weight_sizes, stride, padding, dilation, groups});
}

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride,
              const Shape& padding, const Shape& dilation, int64_t groups) {
  return conv_nd(1, "conv1d", input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride,
              const std::string& padding, const Shape& dilation, int64_t groups) {
  return conv_nd_mode(1, "conv1d", input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride,
              const Shape& padding, const Shape& dilation, int64_t groups) {
  return conv_nd(2, "conv2d", input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride,
              const std::string& padding, const Shape& dilation, int64_t groups) {
  return conv_nd_mode(2, "conv2d", input, weight, bias, stride, padding, dilation, groups);
}

namespace {
Tensor conv_transpose_nd(int64_t nsp, const char* op, const Tensor& input, const Tensor& weight,
                         const Tensor& bias, const Shape& stride, const Shape& padding,
                         const Shape& output_padding, int64_t groups, const Shape& dilation) {
  bool batched;
  Tensor x = batchify(input, nsp, op, batched);
  int64_t k = weight_spatial_dims(weight, op);
  Tensor y = convolution(x, weight, bias, expand_param(stride, k, "stride", op),
                         expand_param(padding, k, "padding", op),
                         expand_param(dilation, k, "dilation", op), true,
                         expand_param(output_padding, k, "output_padding", op), groups);
  return batched ? y : squeeze(y, Shape{0});
}
}  // namespace

Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride,
              const Shape& padding, const Shape& dilation, int64_t groups) {
  return conv_nd(3, "conv3d", input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride,
              const std::string& padding, const Shape& dilation, int64_t groups) {
  return conv_nd_mode(3, "conv3d", input, weight, bias, stride, padding, dilation, groups);
}
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const Shape& stride, const Shape& padding, const Shape& output_padding,
                        int64_t groups, const Shape& dilation) {
  return conv_transpose_nd(1, "conv_transpose1d", input, weight, bias, stride, padding,
                           output_padding, groups, dilation);
}
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const Shape& stride, const Shape& padding, const Shape& output_padding,
                        int64_t groups, const Shape& dilation) {
  return conv_transpose_nd(2, "conv_transpose2d", input, weight, bias, stride, padding,
                           output_padding, groups, dilation);
}
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const Shape& stride, const Shape& padding, const Shape& output_padding,
                        int64_t groups, const Shape& dilation) {
  return conv_transpose_nd(3, "conv_transpose3d", input, weight, bias, stride, padding,
                           output_padding, groups, dilation);
}

// ---- composites with torch's schemas (ops/composite.h): their public forms come from these -------
namespace {
const Shape& ints_at(const Attrs& a, size_t i) { return attr<Shape>(a, i); }
// conv1d / conv2d with padding as ints, then as "valid" / "same"
#define KILN_CONV(name, n)                                                                                       \
  Composite c_##name{#name "(Tensor input, Tensor weight, Tensor? bias=None, SymInt[" #n "] stride=1, "          \
                     "SymInt[" #n "] padding=0, SymInt[" #n "] dilation=1, SymInt groups=1) -> Tensor",            \
                     [](const TensorList& in, const Attrs& a) -> TensorList {                                    \
                       return {name(in[0], in[1], in[2], ints_at(a, 0), ints_at(a, 1), ints_at(a, 2),              \
                                    attr<int64_t>(a, 3))};                                                       \
                     },                                                                                          \
                     kFunctionVariant};                                                                          \
  Composite c_##name##_padding{#name ".padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[" #n "] stride=1, " \
                               "str padding=\"valid\", SymInt[" #n "] dilation=1, SymInt groups=1) -> Tensor",   \
                               [](const TensorList& in, const Attrs& a) -> TensorList {                          \
                                 return {name(in[0], in[1], in[2], ints_at(a, 0), attr<std::string>(a, 1),         \
                                              ints_at(a, 2), attr<int64_t>(a, 3))};                              \
                               },                                                                                \
                               kFunctionVariant};
KILN_CONV(conv1d, 1)
KILN_CONV(conv2d, 2)
KILN_CONV(conv3d, 3)
#undef KILN_CONV
#define KILN_CONV_T(name, n)                                                                                    \
  Composite c_##name{#name "(Tensor input, Tensor weight, Tensor? bias=None, SymInt[" #n "] stride=1, "          \
                     "SymInt[" #n "] padding=0, SymInt[" #n "] output_padding=0, SymInt groups=1, "              \
                     "SymInt[" #n "] dilation=1) -> Tensor",                                                     \
                     [](const TensorList& in, const Attrs& a) -> TensorList {                                    \
                       return {name(in[0], in[1], in[2], ints_at(a, 0), ints_at(a, 1), ints_at(a, 2),              \
                                    attr<int64_t>(a, 3), ints_at(a, 4))};                                        \
                     },                                                                                          \
                     kFunctionVariant};
KILN_CONV_T(conv_transpose1d, 1)
KILN_CONV_T(conv_transpose2d, 2)
KILN_CONV_T(conv_transpose3d, 3)
#undef KILN_CONV_T
}  // namespace

}  // namespace kiln
