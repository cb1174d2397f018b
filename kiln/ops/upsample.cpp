// Upsampling: nearest and linear / bilinear table ops (batched (N, C, [H,] W) inputs), their
// backward table ops and the derivatives of all four, plus torch.nn.functional.interpolate. Source
// indices and weights follow torch's CPU kernels: nearest = min(floor(dst * scale), In - 1) in
// float (the 2-d kernel and every backward first take torch's nearest_idx shortcuts for Out == In
// and Out == 2 In), linear = area_pixel_compute_source_index with align_corners both ways; scale =
// 1 / scale_factor when the user gave one, else In / Out.
#include <cmath>

#include "kiln/backend/cpu/parallel.h"
#include "kiln/ops/nn_detail.h"
#include "kiln/ops/nn_ops.h"

namespace kiln {
namespace {

using namespace nn_detail;

// attrs: a scale is a double, or monostate for none.
Scales scales_at(const Attrs& a, size_t from, size_t n) {
  Scales s;
  for (size_t i = 0; i < n; ++i) {
    const Attr& v = a[from + i];
    s.push_back(std::holds_alternative<double>(v) ? std::optional<double>(std::get<double>(v))
                                                  : std::nullopt);
  }
  return s;
}
void push_scales(Attrs& a, const Scales& s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (i < s.size() && s[i])
      a.push_back(*s[i]);
    else
      a.push_back(std::monostate{});
  }
}

// torch's upsample_{1,2}d_common_check; returns the output shape.
Shape upsample_shape(const char* op, const Shape& xs, const Shape& os) {
  size_t nsp = os.size();
  KILN_CHECK(nsp == 1 || nsp == 2, Runtime, op, "expected 1 or 2 output sizes, got ", nsp);
  KILN_CHECK(xs.size() == nsp + 2, Runtime, op, "It is expected input_size equals to ", nsp + 2,
             ", but got size ", xs.size());
  if (nsp == 1) {
    KILN_CHECK(xs[2] > 0 && os[0] > 0, Runtime, op,
               "Input and output sizes should be greater than 0, but got input (W: ", xs[2],
               ") and output (W: ", os[0], ")");
  } else {
    KILN_CHECK(xs[2] > 0 && xs[3] > 0 && os[0] > 0 && os[1] > 0, Runtime, op,
               "Input and output sizes should be greater than 0, but got input (H: ", xs[2],
               ", W: ", xs[3], ") output (H: ", os[0], ", W: ", os[1], ")");
  }
  KILN_CHECK(xs[1] != 0, Runtime, op, "Non-empty ", nsp + 2,
             "D data tensor expected but got a tensor with sizes ", xs);
  Shape out{xs[0], xs[1]};
  out.insert(out.end(), os.begin(), os.end());
  return out;
}

struct Dims {  // planes and 2-d sizes of the input and output sides
  int64_t n, H, W, oH, oW;
};
Dims dims_of(const Shape& in, const Shape& out) {
  return {in[0] * in[1], height(in), width(in), height(out), width(out)};
}
// Per-spatial-dim scales in 2-d form (none for the height of a 1-d op).
std::optional<double> scale_hw(const Scales& s, int i) {
  if (s.size() == 2) return s[i];
  return i == 1 && !s.empty() ? s[0] : std::nullopt;
}
template <class F>
void for_planes(int64_t n, int64_t work, F&& f) {
  int64_t grain = std::max<int64_t>(1, cpu::kGrainSize / std::max<int64_t>(1, work));
  cpu::parallel_for(n, grain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) f(i);
  });
}

// ---- nearest ------------------------------------------------------------------------------------
std::vector<int64_t> nearest_index(int64_t in, int64_t out, std::optional<double> scale,
                                   bool shortcuts) {
  std::vector<int64_t> idx(out);
  float sc = scale && *scale > 0 ? static_cast<float>(1.0 / *scale)
                                 : static_cast<float>(in) / static_cast<float>(out);
  for (int64_t i = 0; i < out; ++i) {
    if (shortcuts && out == in)
      idx[i] = i;
    else if (shortcuts && out == 2 * in)
      idx[i] = i >> 1;
    else
      idx[i] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(i) * sc)), in - 1);
  }
  return idx;
}

// upsample_nearest: attrs {output_size, scale per spatial dim}
SpecList nearest_meta(const OpDef&, const TensorList& in, const Attrs& a) {
  return {{upsample_shape("upsample_nearest", in[0].sizes(), attr<Shape>(a, 0)), in[0].dtype()}};
}
void nearest_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  Dtype d = in[0].dtype();
  if (!is_floating(d) && d != kUInt8) raise_dtype_unsupported(op.name, d);
  if (out[0].numel() == 0) return;
  const Shape& os = attr<Shape>(a, 0);
  Scales sc = scales_at(a, 1, os.size());
  Dims g = dims_of(in[0].sizes(), out[0].sizes());
  bool shortcuts = os.size() == 2;  // torch's 1-d forward kernel applies the formula everywhere
  auto sh = nearest_index(g.H, g.oH, scale_hw(sc, 0), shortcuts),
       sw = nearest_index(g.W, g.oW, scale_hw(sc, 1), shortcuts);
  with_compute_type<true>(op.name, d, {in[0]}, out[0],
                          [&]<class T>(const TensorList& cs, Tensor& r) {
                            const T* xp = cptr<T>(cs[0]);
                            T* yp = static_cast<T*>(r.data_ptr());
                            for_planes(g.n, g.oH * g.oW, [&](int64_t pl) {
                              const T* x = xp + pl * g.H * g.W;
                              T* y = yp + pl * g.oH * g.oW;
                              for (int64_t oh = 0; oh < g.oH; ++oh) {
                                const T* row = x + sh[oh] * g.W;
                                for (int64_t ow = 0; ow < g.oW; ++ow)
                                  y[oh * g.oW + ow] = row[sw[ow]];
                              }
                            });
                          });
}
OpDef op_nearest{"upsample_nearest", 0, nearest_meta, {nearest_kernel, nullptr}};
OpRegistrar reg_nearest{op_nearest, "upsample_nearest(Tensor self, int[] output_size, float? scale_0=None, float? scale_1=None, float? scale_2=None) -> Tensor"};

// upsample_nearest_backward: {grad} -> grad_input; attrs {input_size, output_size, scales...}
SpecList nearest_bw_meta(const OpDef&, const TensorList& in, const Attrs& a) {
  const Shape& is = attr<Shape>(a, 0);
  KILN_CHECK(upsample_shape("upsample_nearest_backward", is, attr<Shape>(a, 1)) == in[0].sizes(),
             Runtime, "upsample_nearest_backward", "grad of size ", in[0].sizes(),
             " does not match input size ", is);
  return {{is, in[0].dtype()}};
}
void nearest_bw_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  if (out[0].numel() == 0) return;
  const Shape& os = attr<Shape>(a, 1);
  Scales sc = scales_at(a, 2, os.size());
  Dims g = dims_of(out[0].sizes(), in[0].sizes());
  auto sh = nearest_index(g.H, g.oH, scale_hw(sc, 0), true),
       sw = nearest_index(g.W, g.oW, scale_hw(sc, 1), true);
  with_compute_type<false>(op.name, in[0].dtype(), {in[0]}, out[0],
                           [&]<class T>(const TensorList& cs, Tensor& r) {
                             const T* gp = cptr<T>(cs[0]);
                             T* ip = static_cast<T*>(r.data_ptr());
                             for_planes(g.n, g.oH * g.oW + g.H * g.W, [&](int64_t pl) {
                               const T* go = gp + pl * g.oH * g.oW;
                               T* gi = ip + pl * g.H * g.W;
                               std::fill(gi, gi + g.H * g.W, T(0));
                               for (int64_t oh = 0; oh < g.oH; ++oh)
                                 for (int64_t ow = 0; ow < g.oW; ++ow)
                                   gi[sh[oh] * g.W + sw[ow]] += go[oh * g.oW + ow];
                             });
                           });
}
OpDef op_nearest_bw{"upsample_nearest_backward", 0, nearest_bw_meta, {nearest_bw_kernel, nullptr}};
OpRegistrar reg_nearest_bw{op_nearest_bw, "upsample_nearest_backward(Tensor grad_output, int[] input_size, int[] output_size, float? scale_0=None, float? scale_1=None, float? scale_2=None) -> Tensor"};

TensorList nearest_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0]) {
    Attrs a{ctx.in_specs[0].sizes};
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
  if (os.size() == 2) {
    r[0] = upsample_nearest(grad[0], os, sc);
  } else {
    r[0] = squeeze(upsample_nearest(unsqueeze(grad[0], 2), {1, os[0]}, {std::nullopt, sc[0]}),
                   Shape{2});
  }
  return r;
}
DerivativeRegistrar d_nearest_bw{op_nearest_bw, nearest_bw_derivative, 0, 0};

// ---- linear -------------------------------------------------------------------------------------
template <class A>
struct Lerp {
  int64_t i0, i1;
  A l0, l1;
};
template <class A>
std::vector<Lerp<A>> linear_index(int64_t in, int64_t out, bool align,
                                  std::optional<double> scale) {
  std::vector<Lerp<A>> v(out);
  A sc = align ? (out > 1 ? static_cast<A>(in - 1) / static_cast<A>(out - 1) : A(0))
               : (scale && *scale > 0 ? static_cast<A>(1.0 / *scale)
                                      : static_cast<A>(in) / static_cast<A>(out));
  for (int64_t i = 0; i < out; ++i) {
    if (out == in) {
      v[i] = {i, i, A(1), A(0)};
      continue;
    }
    A real = align ? sc * static_cast<A>(i) : sc * (static_cast<A>(i) + A(0.5)) - A(0.5);
    if (!align && real < A(0)) real = A(0);
    int64_t i0 = std::min(static_cast<int64_t>(std::floor(static_cast<float>(real))), in - 1);
    A l1 = std::min(std::max(real - static_cast<A>(i0), A(0)), A(1));
    v[i] = {i0, i0 + (i0 < in - 1 ? 1 : 0), A(1) - l1, l1};
  }
  return v;
}

// upsample_linear: attrs {output_size, align_corners, scales...}
SpecList linear_meta(const OpDef&, const TensorList& in, const Attrs& a) {
  return {{upsample_shape("upsample_linear", in[0].sizes(), attr<Shape>(a, 0)), in[0].dtype()}};
}
void linear_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  if (out[0].numel() == 0) {
    if (!is_floating(in[0].dtype())) raise_dtype_unsupported(op.name, in[0].dtype());
    return;
  }
  const Shape& os = attr<Shape>(a, 0);
  bool align = attr<bool>(a, 1);
  Scales sc = scales_at(a, 2, os.size());
  Dims g = dims_of(in[0].sizes(), out[0].sizes());
  with_compute_type<false>(op.name, in[0].dtype(), {in[0]}, out[0],
                           [&]<class T>(const TensorList& cs, Tensor& r) {
                             auto lh = linear_index<T>(g.H, g.oH, align, scale_hw(sc, 0)),
                                  lw = linear_index<T>(g.W, g.oW, align, scale_hw(sc, 1));
                             const T* xp = cptr<T>(cs[0]);
                             T* yp = static_cast<T*>(r.data_ptr());
                             for_planes(g.n, 4 * g.oH * g.oW, [&](int64_t pl) {
                               const T* x = xp + pl * g.H * g.W;
                               T* y = yp + pl * g.oH * g.oW;
                               for (int64_t oh = 0; oh < g.oH; ++oh) {
                                 const Lerp<T>& h = lh[oh];
                                 const T *r0 = x + h.i0 * g.W, *r1 = x + h.i1 * g.W;
                                 for (int64_t ow = 0; ow < g.oW; ++ow) {
                                   const Lerp<T>& w = lw[ow];
                                   y[oh * g.oW + ow] = h.l0 * (w.l0 * r0[w.i0] + w.l1 * r0[w.i1]) +
                                                       h.l1 * (w.l0 * r1[w.i0] + w.l1 * r1[w.i1]);
                                 }
                               }
                             });
                           });
}
OpDef op_linear{"upsample_linear", 0, linear_meta, {linear_kernel, nullptr}};
OpRegistrar reg_linear{op_linear, "upsample_linear(Tensor self, int[] output_size, bool align_corners, float? scale_0=None, float? scale_1=None, float? scale_2=None) -> Tensor"};

// upsample_linear_backward: {grad} -> grad_input; attrs {input_size, output_size, align_corners,
// scales...}
SpecList linear_bw_meta(const OpDef&, const TensorList& in, const Attrs& a) {
  const Shape& is = attr<Shape>(a, 0);
  KILN_CHECK(upsample_shape("upsample_linear_backward", is, attr<Shape>(a, 1)) == in[0].sizes(),
             Runtime, "upsample_linear_backward", "grad of size ", in[0].sizes(),
             " does not match input size ", is);
  return {{is, in[0].dtype()}};
}
void linear_bw_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  if (out[0].numel() == 0) return;
  const Shape& os = attr<Shape>(a, 1);
  bool align = attr<bool>(a, 2);
  Scales sc = scales_at(a, 3, os.size());
  Dims g = dims_of(out[0].sizes(), in[0].sizes());
  with_compute_type<false>(op.name, in[0].dtype(), {in[0]}, out[0],
                           [&]<class T>(const TensorList& cs, Tensor& r) {
                             auto lh = linear_index<T>(g.H, g.oH, align, scale_hw(sc, 0)),
                                  lw = linear_index<T>(g.W, g.oW, align, scale_hw(sc, 1));
                             const T* gp = cptr<T>(cs[0]);
                             T* ip = static_cast<T*>(r.data_ptr());
                             for_planes(g.n, 4 * g.oH * g.oW + g.H * g.W, [&](int64_t pl) {
                               const T* go = gp + pl * g.oH * g.oW;
                               T* gi = ip + pl * g.H * g.W;
                               std::fill(gi, gi + g.H * g.W, T(0));
                               for (int64_t oh = 0; oh < g.oH; ++oh) {
                                 const Lerp<T>& h = lh[oh];
                                 T *r0 = gi + h.i0 * g.W, *r1 = gi + h.i1 * g.W;
                                 for (int64_t ow = 0; ow < g.oW; ++ow) {
                                   const Lerp<T>& w = lw[ow];
                                   T v = go[oh * g.oW + ow];
                                   r0[w.i0] += h.l0 * w.l0 * v;
                                   r0[w.i1] += h.l0 * w.l1 * v;
                                   r1[w.i0] += h.l1 * w.l0 * v;
                                   r1[w.i1] += h.l1 * w.l1 * v;
                                 }
                               }
                             });
                           });
}
OpDef op_linear_bw{"upsample_linear_backward", 0, linear_bw_meta, {linear_bw_kernel, nullptr}};
OpRegistrar reg_linear_bw{op_linear_bw, "upsample_linear_backward(Tensor grad_output, int[] input_size, int[] output_size, bool align_corners, float? scale_0=None, float? scale_1=None, float? scale_2=None) -> Tensor"};

TensorList linear_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0]) {
    Attrs a{ctx.in_specs[0].sizes};
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
      // torch: floor in Python when recomputing, else the kernel's truncating cast
      out.push_back(recompute ? static_cast<int64_t>(std::floor(v)) : static_cast<int64_t>(v));
      if (!recompute) scales[i] = (*scale_factor)[i];
    }
  }
  KILN_CHECK(!antialias || ((mode == "bilinear" || mode == "bicubic") && x.dim() == 4), Value, op,
             "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires "
             "a 4-D tensor as input");
  KILN_CHECK(!antialias, NotImplemented, op, "antialias=True is not supported by kiln");
  if (mode == "nearest" && (x.dim() == 3 || x.dim() == 4)) return upsample_nearest(x, out, scales);
  if (mode == "linear" && x.dim() == 3) return upsample_linear(x, out, align, scales);
  if (mode == "bilinear" && x.dim() == 4) return upsample_linear(x, out, align, scales);
  if (x.dim() >= 3 && x.dim() <= 5) {
    const char* need = mode == "linear"      ? "3D"
                       : mode == "bilinear"  ? "4D"
                       : mode == "trilinear" ? "5D"
                                             : nullptr;
    if (need && mode != "nearest")
      KILN_FAIL(NotImplemented, op, "Got ", x.dim(), "D input, but ", mode, " mode needs ", need,
                " input");
    bool known = mode == "nearest" || mode == "area" || mode == "nearest-exact" ||
                 mode == "bicubic" || mode == "trilinear" || mode == "lanczos";
    if (known)
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
