// Upsampling: nearest, nearest-exact, linear / bilinear / trilinear and bicubic table ops (batched
// (N, C, [[D,] H,] W) inputs), their backward table ops and the derivatives of all, plus
// torch.nn.functional.interpolate (its 'area' mode is adaptive average pooling). Source
// indices and weights follow torch's CPU kernels: nearest = min(floor(dst * scale), In - 1) in
// float (the 2-d kernel and every backward first take torch's nearest_idx shortcuts for Out == In
// and Out == 2 In), linear = area_pixel_compute_source_index with align_corners both ways; scale =
// 1 / scale_factor when the user gave one, else In / Out. This file: the op-table entries, schemas,
// metas, derivatives and front ends; the CPU kernels are kiln/backend/cpu/upsample.cpp's.
#include <cmath>

#include "kiln/ops/nn_detail.h"
#include "kiln/ops/nn_ops.h"
#include "kiln/ops/upsample_detail.h"

namespace kiln {
namespace {

using namespace nn_detail;
using namespace upsample_detail;

void push_scales(Attrs& a, const Scales& s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (i < s.size() && s[i])
      a.push_back(*s[i]);
    else
      a.push_back(std::monostate{});
  }
}

// ---- nearest ------------------------------------------------------------------------------------

// upsample_nearest: attrs {output_size, scale per spatial dim}
SpecList nearest_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  return {{upsample_shape("upsample_nearest", in[0].sizes(), attr_sym_shape(a, 0)), in[0].dtype()}};
}
OpDef op_nearest{"upsample_nearest", 0, nearest_meta, {}};
OpRegistrar reg_nearest{op_nearest, "upsample_nearest(Tensor self, int[] output_size, float? scale_0=None, float? scale_1=None, float? scale_2=None) -> Tensor"};

// upsample_nearest_backward: {grad} -> grad_input; attrs {input_size, output_size, scales...}
SpecList nearest_bw_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const SymShape is = attr_sym_shape(a, 0);
  KILN_CHECK(upsample_shape("upsample_nearest_backward", is, attr_sym_shape(a, 1)) == in[0].sizes(),
             Runtime, "upsample_nearest_backward", "grad of size ", in[0].sizes(),
             " does not match input size ", is);
  return {{is, in[0].dtype()}};
}
OpDef op_nearest_bw{"upsample_nearest_backward", 0, nearest_bw_meta, {}};
OpRegistrar reg_nearest_bw{op_nearest_bw, "upsample_nearest_backward(Tensor grad_output, int[] input_size, int[] output_size, float? scale_0=None, float? scale_1=None, float? scale_2=None) -> Tensor"};

TensorList nearest_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0]) {
    Attrs a{ctx.in_specs[0].raw_sizes()};
    a.insert(a.end(), ctx.attrs.begin(), ctx.attrs.end());
    r[0] = dispatch1(op_nearest_bw, {grad[0]}, std::move(a));
  }
  return r;
}
DerivativeRegistrar d_nearest{op_nearest, nearest_derivative, 0, 0};
// The adjoint of the backward is the forward with the nearest_idx rule, which the 2-d kernel uses:
// a 1-d gradient runs as height 1.
TensorList nearest_bw_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (!ctx.needs[0]) return r;
  const Shape& os = attr<Shape>(ctx.attrs, 1);
  Scales sc = scales_at(ctx.attrs, 2, os.size());
  if (os.size() >= 2) {
    r[0] = upsample_nearest(grad[0], os, sc);
  } else {
    r[0] = squeeze(upsample_nearest(unsqueeze(grad[0], 2), {1, os[0]}, {std::nullopt, sc[0]}),
                   Shape{2});
  }
  return r;
}
DerivativeRegistrar d_nearest_bw{op_nearest_bw, nearest_bw_derivative, 0, 0};

// ---- nearest-exact: the same attributes, source min(floor((dst + 0.5) * scale), In - 1); op.code 1
OpDef op_nearest_exact{"upsample_nearest_exact", 0, nearest_meta, {}, 1};
OpRegistrar reg_nearest_exact{op_nearest_exact, "upsample_nearest_exact(Tensor self, int[] output_size, float? scale_0=None, float? scale_1=None, float? scale_2=None) -> Tensor"};
OpDef op_nearest_exact_bw{"upsample_nearest_exact_backward", 0, nearest_bw_meta, {}, 1};
OpRegistrar reg_nearest_exact_bw{op_nearest_exact_bw, "upsample_nearest_exact_backward(Tensor grad_output, int[] input_size, int[] output_size, float? scale_0=None, float? scale_1=None, float? scale_2=None) -> Tensor"};
TensorList nearest_exact_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0]) {
    Attrs a{ctx.in_specs[0].raw_sizes()};
    a.insert(a.end(), ctx.attrs.begin(), ctx.attrs.end());
    r[0] = dispatch1(op_nearest_exact_bw, {grad[0]}, std::move(a));
  }
  return r;
}
DerivativeRegistrar d_nearest_exact{op_nearest_exact, nearest_exact_derivative, 0, 0};
TensorList nearest_exact_bw_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0])
    r[0] = dispatch1(op_nearest_exact, {grad[0]}, Attrs(ctx.attrs.begin() + 1, ctx.attrs.end()));
  return r;
}
DerivativeRegistrar d_nearest_exact_bw{op_nearest_exact_bw, nearest_exact_bw_derivative, 0, 0};

// ---- linear -------------------------------------------------------------------------------------

// upsample_linear: attrs {output_size, align_corners, scales...}
SpecList linear_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  return {{upsample_shape("upsample_linear", in[0].sizes(), attr_sym_shape(a, 0)), in[0].dtype()}};
}
OpDef op_linear{"upsample_linear", 0, linear_meta, {}};
OpRegistrar reg_linear{op_linear, "upsample_linear(Tensor self, int[] output_size, bool align_corners, float? scale_0=None, float? scale_1=None, float? scale_2=None) -> Tensor"};

// upsample_linear_backward: {grad} -> grad_input; attrs {input_size, output_size, align_corners,
// scales...}
SpecList linear_bw_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const SymShape is = attr_sym_shape(a, 0);
  KILN_CHECK(upsample_shape("upsample_linear_backward", is, attr_sym_shape(a, 1)) == in[0].sizes(),
             Runtime, "upsample_linear_backward", "grad of size ", in[0].sizes(),
             " does not match input size ", is);
  return {{is, in[0].dtype()}};
}
OpDef op_linear_bw{"upsample_linear_backward", 0, linear_bw_meta, {}};
OpRegistrar reg_linear_bw{op_linear_bw, "upsample_linear_backward(Tensor grad_output, int[] input_size, int[] output_size, bool align_corners, float? scale_0=None, float? scale_1=None, float? scale_2=None) -> Tensor"};

TensorList linear_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0]) {
    Attrs a{ctx.in_specs[0].raw_sizes()};
    a.insert(a.end(), ctx.attrs.begin(), ctx.attrs.end());
    r[0] = dispatch1(op_linear_bw, {grad[0]}, std::move(a));
  }
  return r;
}
DerivativeRegistrar d_linear{op_linear, linear_derivative, 0, 0};
TensorList linear_bw_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0])
    r[0] = dispatch1(op_linear, {grad[0]}, Attrs(ctx.attrs.begin() + 1, ctx.attrs.end()));
  return r;
}
DerivativeRegistrar d_linear_bw{op_linear_bw, linear_bw_derivative, 0, 0};

// ---- bicubic (4-d input): attrs {output_size, align_corners, scale_h, scale_w} ---------------------
SpecList cubic_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const SymShape os = attr_sym_shape(a, 0);
  KILN_CHECK(os.size() == 2, Runtime, "upsample_bicubic2d", "It is expected output_size equals to 2, but got size ", os.size());
  return {{upsample_shape("upsample_bicubic2d", in[0].sizes(), os), in[0].dtype()}};
}
OpDef op_cubic{"upsample_bicubic2d", 0, cubic_meta, {}};
OpRegistrar reg_cubic{op_cubic, "upsample_bicubic2d(Tensor self, int[2] output_size, bool align_corners, float? scales_h=None, float? scales_w=None) -> Tensor"};
SpecList cubic_bw_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const SymShape is = attr_sym_shape(a, 0);
  KILN_CHECK(upsample_shape("upsample_bicubic2d_backward", is, attr_sym_shape(a, 1)) == in[0].sizes(),
             Runtime, "upsample_bicubic2d_backward", "grad of size ", in[0].sizes(),
             " does not match input size ", is);
  return {{is, in[0].dtype()}};
}
OpDef op_cubic_bw{"upsample_bicubic2d_backward", 0, cubic_bw_meta, {}};
OpRegistrar reg_cubic_bw{op_cubic_bw, "upsample_bicubic2d_backward(Tensor grad_output, int[2] input_size, int[2] output_size, bool align_corners, float? scales_h=None, float? scales_w=None) -> Tensor"};
TensorList cubic_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0]) {
    Attrs a{ctx.in_specs[0].raw_sizes()};
    a.insert(a.end(), ctx.attrs.begin(), ctx.attrs.end());
    r[0] = dispatch1(op_cubic_bw, {grad[0]}, std::move(a));
  }
  return r;
}
DerivativeRegistrar d_cubic{op_cubic, cubic_derivative, 0, 0};
TensorList cubic_bw_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0]) r[0] = dispatch1(op_cubic, {grad[0]}, Attrs(ctx.attrs.begin() + 1, ctx.attrs.end()));
  return r;
}
DerivativeRegistrar d_cubic_bw{op_cubic_bw, cubic_bw_derivative, 0, 0};

Attrs upsample_attrs(const Tensor& x, const Shape& os, const Scales& scales,
                     std::optional<bool> align) {
  Attrs a{os};
  if (align) a.push_back(*align);
  push_scales(a, scales, os.size());
  return a;
}

std::string shape_list(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace

Tensor upsample_nearest(const Tensor& x, const Shape& output_size, const Scales& scales) {
  return dispatch1(op_nearest, {x}, upsample_attrs(x, output_size, scales, std::nullopt));
}
Tensor upsample_linear(const Tensor& x, const Shape& output_size, bool align_corners,
                       const Scales& scales) {
  return dispatch1(op_linear, {x}, upsample_attrs(x, output_size, scales, align_corners));
}

Tensor upsample_nearest_exact(const Tensor& x, const Shape& output_size, const Scales& scales) {
  return dispatch1(op_nearest_exact, {x}, upsample_attrs(x, output_size, scales, std::nullopt));
}
Tensor upsample_bicubic2d(const Tensor& x, const Shape& output_size, bool align_corners,
                          const Scales& scales) {
  return dispatch1(op_cubic, {x}, upsample_attrs(x, output_size, scales, align_corners));
}

Tensor interpolate(const Tensor& x, const std::optional<Shape>& size,
                   const std::optional<std::vector<double>>& scale_factor, const std::string& mode,
                   std::optional<bool> align_corners, std::optional<bool> recompute_scale_factor,
                   bool antialias) {
  const char* op = "interpolate";
  bool nearest_like = mode == "nearest" || mode == "area" || mode == "nearest-exact";
  if (nearest_like) {
    KILN_CHECK(!align_corners, Value, op,
               "align_corners option can only be set with the interpolating modes: "
               "linear | bilinear | bicubic | trilinear");
  }
  bool align = align_corners.value_or(false);
  int64_t dim = x.dim() - 2;
  Shape in_sp(x.sizes().begin() + std::min<int64_t>(2, x.dim()), x.sizes().end());
  Shape out;
  Scales scales(std::max<int64_t>(dim, 0));
  KILN_CHECK(!(size && scale_factor), Value, op,
             "only one of size or scale_factor should be defined");
  KILN_CHECK(size || scale_factor, Value, op, "either size or scale_factor should be defined");
  if (size) {
    KILN_CHECK(static_cast<int64_t>(size->size()) == dim, Value, op,
               "Input and output must have the same number of "
               "spatial dimensions, but got input with spatial dimensions of ",
               shape_list(in_sp), " and output size of ", *size,
               ". Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size in "
               "(o1, o2, "
               "...,oK) format.");
    KILN_CHECK(!recompute_scale_factor.value_or(false), Value, op,
               "recompute_scale_factor is not meaningful with an explicit size.");
    out = *size;
  } else {
    KILN_CHECK(static_cast<int64_t>(scale_factor->size()) == dim, Value, op,
               "Input and scale_factor must have the "
               "same number of spatial dimensions, but got input with spatial dimensions of ",
               shape_list(in_sp), " and scale_factor of shape ", *scale_factor,
               ". Please provide input tensor in (N, C, d1, d2, ...,dK) "
               "format and scale_factor in (s1, s2, ...,sK) format.");
    bool recompute = recompute_scale_factor.value_or(false);
    for (int64_t i = 0; i < dim; ++i) {
      double v = static_cast<double>(in_sp[i]) * (*scale_factor)[i];
      KILN_CHECK(std::isfinite(v) && std::fabs(v) < 0x1p63, Runtime, op, "value cannot be converted to type int64_t "
                 "without overflow (input size ", in_sp[i], " times scale_factor ", (*scale_factor)[i], ")");
      // torch: floor in Python when recomputing, else the kernel's truncating cast
      out.push_back(recompute ? static_cast<int64_t>(std::floor(v)) : static_cast<int64_t>(v));
      if (!recompute) scales[i] = (*scale_factor)[i];
    }
  }
  KILN_CHECK(!antialias || ((mode == "bilinear" || mode == "bicubic") && x.dim() == 4), Value, op,
             "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires "
             "a 4-D tensor as input");
  KILN_CHECK(mode != "lanczos" || antialias, Value, op, "Lanczos mode requires antialias=True");
  KILN_CHECK(!antialias, NotImplemented, op, "antialias=True is not supported by kiln");
  const bool nd = x.dim() >= 3 && x.dim() <= 5;
  if (mode == "nearest" && nd) return upsample_nearest(x, out, scales);
  if (mode == "nearest-exact" && nd) return upsample_nearest_exact(x, out, scales);
  if (mode == "area" && nd) {
    return x.dim() == 3 ? adaptive_avg_pool1d(x, out)
                        : x.dim() == 4 ? adaptive_avg_pool2d(x, out) : adaptive_avg_pool3d(x, out);
  }
  if ((mode == "linear" && x.dim() == 3) || (mode == "bilinear" && x.dim() == 4) ||
      (mode == "trilinear" && x.dim() == 5))
    return upsample_linear(x, out, align, scales);
  if (mode == "bicubic" && x.dim() == 4) return upsample_bicubic2d(x, out, align, scales);
  if (x.dim() >= 3 && x.dim() <= 5) {
    const char* need = mode == "linear"      ? "3D"
                       : mode == "bilinear"  ? "4D"
                       : mode == "trilinear" ? "5D"
                       : mode == "bicubic"   ? "4D"
                                             : nullptr;
    if (need && mode != "nearest")
      KILN_FAIL(NotImplemented, op, "Got ", x.dim(), "D input, but ", mode, " mode needs ", need,
                " input");
    if (mode == "lanczos")
      KILN_FAIL(NotImplemented, op, "mode '", mode, "' with ", x.dim(),
                "D input is not supported by kiln");
  }
  KILN_FAIL(NotImplemented, op, "Input Error: Only 3D, 4D and 5D input Tensors supported (got ",
            x.dim(),
            "D) for the modes: nearest | linear | bilinear | bicubic | trilinear | lanczos | area "
            "| nearest-exact "
            "(got ",
            mode, ")");
}

}  // namespace kiln
