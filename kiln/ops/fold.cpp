// Sliding blocks: im2col (torch.nn.functional.unfold) and its adjoint col2im (F.fold), table ops over
// batched (N, C, H, W) images and (N, C * kH * kW, L) block columns, each the other's derivative. The
// CPU kernels share the convolution's im2col / col2im (kiln/backend/cpu/conv.cpp).
#include <algorithm>
#include <string>

#include "kiln/ops/nn_detail.h"
#include "kiln/ops/nn_ops.h"

namespace kiln {
namespace {

std::string pair_str(const Shape& v) { return "(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ")"; }

// torch's im2col / col2im shape checks: the number of blocks along each spatial dim.
std::pair<SymInt, SymInt> blocks(const char* op, SymInt H, SymInt W, const Shape& k, const Shape& d,
                                 const Shape& p, const Shape& s, const char* what) {
  KILN_CHECK(k.size() == 2 && d.size() == 2 && p.size() == 2 && s.size() == 2, Runtime, op,
             "It is expected kernel_size, dilation, padding and stride to have two elements each");
  KILN_CHECK(k[0] > 0 && k[1] > 0, Runtime, op,
             "kernel size should be greater than zero, but got kernel_height: ", k[0],
             " kernel_width: ", k[1]);
  KILN_CHECK(d[0] > 0 && d[1] > 0, Runtime, op,
             "dilation should be greater than zero, but got dilation_height: ", d[0],
             " dilation_width: ", d[1]);
  KILN_CHECK(p[0] >= 0 && p[1] >= 0, Runtime, op,
             "padding should be non-negative, but got pad_height: ", p[0], " pad_width: ", p[1]);
  KILN_CHECK(s[0] > 0 && s[1] > 0, Runtime, op,
             "stride should be greater than zero, but got stride_height: ", s[0],
             " stride_width: ", s[1]);
  SymInt bh = (H + 2 * p[0] - (d[0] * (k[0] - 1) + 1)) / s[0] + 1;
  SymInt bw = (W + 2 * p[1] - (d[1] * (k[1] - 1) + 1)) / s[1] + 1;
  KILN_CHECK(bh >= 1 && bw >= 1, Runtime, op, "Given ", what, " (", H, ", ", W, "), kernel_size=",
             pair_str(k), ", dilation=", pair_str(d), ", padding=", pair_str(p), ", stride=",
             pair_str(s), ", calculated shape of the array of sliding blocks as (", bh, ", ", bw,
             "), but its components must be at least one.");
  return {bh, bw};
}

// ---- im2col: {input (N, C, H, W)} -> (N, C * kH * kW, L); attrs {kernel, dilation, padding, stride}
SpecList im2col_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  KILN_CHECK(x.dim() == 4, Runtime, "im2col", "Expected 4D input tensor, but got input of size ",
             x.sizes());
  const Shape& k = attr<Shape>(a, 0);
  auto [bh, bw] = blocks("im2col", x.sizes()[2], x.sizes()[3], k, attr<Shape>(a, 1),
                         attr<Shape>(a, 2), attr<Shape>(a, 3), "input with spatial size");
  return {{{x.sizes()[0], x.sizes()[1] * k[0] * k[1], bh * bw}, x.dtype()}};
}
OpDef op_im2col{"im2col", 0, im2col_meta, {}};
OpRegistrar reg_im2col{op_im2col, "im2col(Tensor self, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) -> Tensor"};

// ---- col2im: {input (N, C * kH * kW, L)} -> (N, C, H, W); attrs {output_size, kernel, dilation,
// padding, stride}
SpecList col2im_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const char* op = "col2im";
  const TensorSpec& x = in[0];
  KILN_CHECK(x.dim() == 3, Runtime, op, "Expected 3D input tensor, but got input of size ", x.sizes());
  const Shape &o = attr<Shape>(a, 0), &k = attr<Shape>(a, 1), &d = attr<Shape>(a, 2),
              &p = attr<Shape>(a, 3), &s = attr<Shape>(a, 4);
  KILN_CHECK(o.size() == 2, Runtime, op, "It is expected output_size equals to 2, but got size ", o.size());
  auto [bh, bw] = blocks(op, o[0], o[1], k, d, p, s, "output_size=");
  KILN_CHECK(x.sizes()[1] % (k[0] * k[1]) == 0, Runtime, op,
             "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
             "got input.size(1)=", x.sizes()[1], " and kernel_size=", pair_str(k));
  KILN_CHECK(x.sizes()[2] == bh * bw, Runtime, op, "Given output_size=", pair_str(o), ", kernel_size=",
             pair_str(k), ", dilation=", pair_str(d), ", padding=", pair_str(p), ", stride=",
             pair_str(s), ", expected size of input's dimension 2 to match the calculated number of "
             "sliding blocks ", bh, " * ", bw, " = ", bh * bw, ", but got input.size(2)=", x.sizes()[2], ".");
  return {{{x.sizes()[0], x.sizes()[1] / (k[0] * k[1]), o[0], o[1]}, x.dtype()}};
}
OpDef op_col2im{"col2im", 0, col2im_meta, {}};
OpRegistrar reg_col2im{op_col2im, "col2im(Tensor self, int[2] output_size, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) -> Tensor"};

// each is linear, and the other's adjoint
TensorList im2col_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0]) {
    const SymShape& xs = ctx.in_specs[0].sizes();
    Attrs a{raw_shape(SymShape{xs[2], xs[3]})};
    a.insert(a.end(), ctx.attrs.begin(), ctx.attrs.end());
    r[0] = dispatch1(op_col2im, {grad[0]}, std::move(a));
  }
  return r;
}
DerivativeRegistrar d_im2col{op_im2col, im2col_derivative, 0, 0};
TensorList col2im_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0]) r[0] = dispatch1(op_im2col, {grad[0]}, Attrs(ctx.attrs.begin() + 1, ctx.attrs.end()));
  return r;
}
DerivativeRegistrar d_col2im{op_col2im, col2im_derivative, 0, 0};

Shape pair_of(const Shape& v, const char* name, const char* op) {
  KILN_CHECK(v.size() == 1 || v.size() == 2, Runtime, op, op, ": ", name,
             " must be a single int or a tuple of two ints, got ", v);
  return v.size() == 1 ? Shape{v[0], v[0]} : v;
}

}  // namespace

namespace nn::functional {

Tensor unfold(const Tensor& input, const Shape& kernel_size, const Shape& dilation,
              const Shape& padding, const Shape& stride) {
  const char* op = "im2col";
  const int64_t nd = std::max<int64_t>(input.dim(), 1);
  KILN_CHECK(input.dim() >= 3, Index, op, "Dimension out of range (expected to be in range of [", -nd,
             ", ", nd - 1, "], but got 2)");  // torch reads size(2) first
  bool nonempty = true;
  for (int64_t i = input.dim() - 3; i >= 0 && i < input.dim(); ++i) nonempty = nonempty && input.size(i) != 0;
  KILN_CHECK((input.dim() == 3 || input.dim() == 4) && nonempty, Runtime, op,
             "Expected non-empty 3D or 4D input tensor, but got input of size ", input.sizes());
  const bool batched = input.dim() == 4;
  Tensor y = dispatch1(op_im2col, {batched ? input : unsqueeze(input, 0)},
                       {pair_of(kernel_size, "kernel_size", op), pair_of(dilation, "dilation", op),
                        pair_of(padding, "padding", op), pair_of(stride, "stride", op)});
  return batched ? y : squeeze(y, Shape{0});
}

Tensor fold(const Tensor& input, const Shape& output_size, const Shape& kernel_size,
            const Shape& dilation, const Shape& padding, const Shape& stride) {
  const char* op = "col2im";
  KILN_CHECK(input.dim() == 2 || input.dim() == 3, Runtime, op,
             "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and "
             "non-zero dimensions for input, but got: ", input.sizes());
  const bool batched = input.dim() == 3;
  Tensor y = dispatch1(op_col2im, {batched ? input : unsqueeze(input, 0)},
                       {pair_of(output_size, "output_size", op), pair_of(kernel_size, "kernel_size", op),
                        pair_of(dilation, "dilation", op), pair_of(padding, "padding", op),
                        pair_of(stride, "stride", op)});
  return batched ? y : squeeze(y, Shape{0});
}

}  // namespace nn::functional
}  // namespace kiln
