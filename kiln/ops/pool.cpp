// Pooling (max with indices, average, adaptive average) and upsampling (nearest, linear /
// bilinear): each a table op over batched (N, C, [H,] W) inputs with a backward table op and the
// derivatives of both. Kernels work on contiguous planes (a 1-d op is the 2-d one with height 1)
// and split the N * C planes over threads; float16 / bfloat16 compute in float32. Index and weight
// rules follow torch's CPU kernels (pooling_output_shape, start/end_index, nearest_idx,
// area_pixel_compute_source_index) so results agree bit for bit where the arithmetic allows.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/backend/cpu/parallel.h"
#include "kiln/ops/nn_detail.h"
#include "kiln/ops/nn_ops.h"

namespace kiln {
namespace {

using namespace nn_detail;

// Planes of the image (input) side and the output side, in 2-d form.
struct Planes {
  int64_t n = 0, H = 1, W = 1, oH = 1, oW = 1;
  int64_t in() const { return H * W; }
  int64_t out() const { return oH * oW; }
};
Planes planes_of(const Shape& in, const Shape& out) {
  return {in[0] * in[1], height(in), width(in), height(out), width(out)};
}
// Calls f(plane) for every plane, in parallel when the planes hold enough work.
template <class F>
void for_planes(const Planes& p, int64_t work_per_plane, F&& f) {
  int64_t grain = std::max<int64_t>(1, cpu::kGrainSize / std::max<int64_t>(1, work_per_plane));
  cpu::parallel_for(p.n, grain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) f(i);
  });
}

struct Window {  // kernel, stride, padding, dilation in 2-d form
  int64_t kH = 1, kW = 1, sH = 1, sW = 1, pH = 0, pW = 0, dH = 1, dW = 1;
};
Window window(const Shape& k, const Shape& s, const Shape& p, const Shape& d) {
  return {hw(k, 0, 1), hw(k, 1, 1), hw(s, 0, 1), hw(s, 1, 1),
          hw(p, 0, 0), hw(p, 1, 0), hw(d, 0, 1), hw(d, 1, 1)};
}

// torch's pooling_output_shape, with its checks.
int64_t pool_out(const char* op, int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d,
                 bool ceil) {
  KILN_CHECK(s != 0, Runtime, op, "stride should not be zero");
  KILN_CHECK(pad >= 0, Runtime, op, "pad must be non-negative, but got pad: ", pad);
  KILN_CHECK(pad <= ((k - 1) * d + 1) / 2, Runtime, op,
             "pad should be at most half of effective kernel size, but got "
             "pad=",
             pad, ", kernel_size=", k, " and dilation=", d);
  int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  int64_t q = num / s;
  if ((num % s != 0) && ((num < 0) != (s < 0))) --q;  // floor division
  int64_t out = q + 1;
  if (ceil && (out - 1) * s >= in + pad) --out;
  return out;
}

// Checks a pooling call (torch's pool2d_shape_check) and returns the output shape.
Shape pool_shape(const char* op, const Shape& xs, const Shape& k, const Shape& s, const Shape& p,
                 const Shape& d, bool ceil) {
  int64_t nsp = static_cast<int64_t>(k.size()), nd = static_cast<int64_t>(xs.size());
  KILN_CHECK((nsp == 1 || nsp == 2) && nd == nsp + 2 && s.size() == k.size() &&
                 p.size() == k.size() && d.size() == k.size(),
             Runtime, op, "expected a batched input with ", nsp,
             " spatial dims and one kernel, stride, padding "
             "and dilation value per spatial dim, got input of size ",
             xs);
  Shape out{xs[0], xs[1]};
  for (int64_t i = 0; i < nsp; ++i)
    out.push_back(pool_out(op, xs[i + 2], k[i], p[i], s[i], d[i], ceil));
  Window w = window(k, s, p, d);
  KILN_CHECK(w.kH > 0 && w.kW > 0, Runtime, op,
             "kernel size should be greater than zero, but got kH: ", w.kH, " kW: ", w.kW);
  KILN_CHECK(w.sH > 0 && w.sW > 0, Runtime, op,
             "stride should be greater than zero, but got dH: ", w.sH, " dW: ", w.sW);
  KILN_CHECK(w.dH > 0 && w.dW > 0, Runtime, op,
             "dilation should be greater than zero, but got dilationH: ", w.dH,
             " dilationW: ", w.dW);
  bool nonempty = true;
  for (int64_t i = 1; i < nd; ++i) nonempty = nonempty && xs[i] != 0;
  KILN_CHECK(nonempty, Runtime, op, "Expected ", nd - 1, "D or ", nd,
             "D (batch mode) tensor with optional 0 dim batch size for input, but got:", xs);
  KILN_CHECK(w.kW / 2 >= w.pW && w.kH / 2 >= w.pH, Runtime, op,
             "pad should be smaller than or equal to half of "
             "kernel size, but got padW = ",
             w.pW, ", padH = ", w.pH, ", kW = ", w.kW, ", kH = ", w.kH);
  bool positive = true;
  for (int64_t i = 2; i < nd; ++i) positive = positive && out[i] >= 1;
  std::string ins = std::to_string(xs[1]), outs = ins;
  for (int64_t i = 2; i < nd; ++i)
    ins += "x" + std::to_string(xs[i]), outs += "x" + std::to_string(out[i]);
  KILN_CHECK(positive, Runtime, op, "Given input size: (", ins, "). Calculated output size: (",
             outs, "). Output size is too small");
  return out;
}

// ---- max_pool: {input} -> {values, indices}; attrs {kernel, stride, padding, dilation, ceil_mode}
SpecList max_pool_meta(const OpDef&, const TensorList& in, const Attrs& a) {
  Shape out = pool_shape("max_pool", in[0].sizes(), attr<Shape>(a, 0), attr<Shape>(a, 1),
                         attr<Shape>(a, 2), attr<Shape>(a, 3), attr<bool>(a, 4));
  return {{out, in[0].dtype()}, {out, kInt64}};
}
void max_pool_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  check_int_dtype(op.name, in[0].dtype(), true);
  if (out[0].numel() == 0) return;
  Window w = window(attr<Shape>(a, 0), attr<Shape>(a, 1), attr<Shape>(a, 2), attr<Shape>(a, 3));
  Planes p = planes_of(in[0].sizes(), out[0].sizes());
  int64_t* ip = static_cast<int64_t*>(out[1].data_ptr());
  with_compute_type<true>(
      op.name, in[0].dtype(), {in[0]}, out[0], [&]<class T>(const TensorList& cs, Tensor& r) {
        const T* xp = cptr<T>(cs[0]);
        T* yp = static_cast<T*>(r.data_ptr());
        for_planes(p, p.out() * w.kH * w.kW, [&](int64_t pl) {
          const T* x = xp + pl * p.in();
          T* y = yp + pl * p.out();
          int64_t* idx = ip + pl * p.out();
          for (int64_t oh = 0; oh < p.oH; ++oh)
            for (int64_t ow = 0; ow < p.oW; ++ow) {
              int64_t h0 = oh * w.sH - w.pH, w0 = ow * w.sW - w.pW;
              int64_t h1 = std::min(h0 + (w.kH - 1) * w.dH + 1, p.H),
                      w1 = std::min(w0 + (w.kW - 1) * w.dW + 1, p.W);
              while (h0 < 0) h0 += w.dH;
              while (w0 < 0) w0 += w.dW;
              int64_t best = h0 * p.W + w0;
              T m = std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
              for (int64_t h = h0; h < h1; h += w.dH)
                for (int64_t ww = w0; ww < w1; ww += w.dW) {
                  T v = x[h * p.W + ww];
                  bool nan = false;
                  if constexpr (std::is_floating_point_v<T>) nan = std::isnan(v);
                  if (v > m || nan) m = v, best = h * p.W + ww;
                }
              y[oh * p.oW + ow] = m;
              idx[oh * p.oW + ow] = best;
            }
        });
      });
}
OpDef op_max_pool{"max_pool", 0, max_pool_meta, {max_pool_kernel, nullptr}};
OpRegistrar reg_max_pool{op_max_pool, "max_pool(Tensor self, int[] kernel_size, int[] stride, int[] padding, int[] dilation, bool ceil_mode) -> (Tensor, Tensor)"};

// ---- max_pool_backward: {grad, indices} -> grad_input; attrs {input_size} -----------------------
SpecList max_pool_bw_meta(const OpDef&, const TensorList& in, const Attrs& a) {
  const Shape& is = attr<Shape>(a, 0);
  KILN_CHECK(in[0].sizes() == in[1].sizes() && in[1].dtype() == kInt64 &&
                 in[0].dim() == static_cast<int64_t>(is.size()) &&
                 (is.size() == 3 || is.size() == 4) && in[0].sizes()[0] == is[0] &&
                 in[0].sizes()[1] == is[1],
             Runtime, "max_pool_backward", "grad ", in[0].sizes(), " and int64 indices ",
             in[1].sizes(), " must match, with the input size ", is);
  return {{is, in[0].dtype()}};
}
void max_pool_bw_kernel(const OpDef& op, const TensorList& in, const Attrs&, TensorList& out) {
  if (out[0].numel() == 0) return;
  Planes p = planes_of(out[0].sizes(), in[0].sizes());
  with_compute_type<false>(op.name, in[0].dtype(), {in[0], in[1]}, out[0],
                           [&]<class T>(const TensorList& cs, Tensor& r) {
                             const T* gp = cptr<T>(cs[0]);
                             const int64_t* ip = cptr<int64_t>(cs[1]);
                             T* op_ = static_cast<T*>(r.data_ptr());
                             for_planes(p, p.out() + p.in(), [&](int64_t pl) {
                               T* gi = op_ + pl * p.in();
                               std::fill(gi, gi + p.in(), T(0));
                               const T* g = gp + pl * p.out();
                               const int64_t* idx = ip + pl * p.out();
                               for (int64_t o = 0; o < p.out(); ++o)
                                 if (idx[o] >= 0 && idx[o] < p.in()) gi[idx[o]] += g[o];
                             });
                           });
}
OpDef op_max_pool_bw{"max_pool_backward", 0, max_pool_bw_meta, {max_pool_bw_kernel, nullptr}};
OpRegistrar reg_max_pool_bw{op_max_pool_bw, "max_pool_backward(Tensor grad_output, Tensor indices, int[] input_size) -> Tensor"};

Tensor max_pool_backward(const Tensor& grad, const Tensor& indices, const Shape& input_size) {
  return dispatch1(op_max_pool_bw, {grad, indices}, {input_size});
}
TensorList max_pool_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0]) r[0] = max_pool_backward(grad[0], ctx.out[1], ctx.in_specs[0].sizes);
  return r;
}
DerivativeRegistrar d_max_pool{op_max_pool, max_pool_derivative, 0, 0b10};
// linear in grad: its adjoint gathers the incoming gradient at the indices
TensorList max_pool_bw_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(2);
  if (ctx.needs[0]) {
    const Tensor& idx = ctx.in[1];
    const Shape& gs = grad[0].sizes();
    Tensor src = reshape(grad[0], {gs[0], gs[1], -1});
    r[0] = reshape(gather(src, 2, reshape(idx, {idx.sizes()[0], idx.sizes()[1], -1})), idx.sizes());
  }
  return r;
}
DerivativeRegistrar d_max_pool_bw{op_max_pool_bw, max_pool_bw_derivative, 0b10, 0};

// ---- avg_pool: attrs {kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
// (0 = none)}; avg_pool_backward: {grad} -> grad_input, attrs {input_size, then avg_pool's} -----
struct AvgArgs {
  Shape k, s, p;
  bool ceil, include_pad;
  int64_t divisor;
};
AvgArgs avg_args(const Attrs& a, size_t o) {
  return {attr<Shape>(a, o),    attr<Shape>(a, o + 1), attr<Shape>(a, o + 2),
          attr<bool>(a, o + 3), attr<bool>(a, o + 4),  attr<int64_t>(a, o + 5)};
}
Shape avg_shape(const Shape& xs, const AvgArgs& c) {
  return pool_shape("avg_pool", xs, c.k, c.s, c.p, Shape(c.k.size(), 1), c.ceil);
}
// Calls f(out_index, h0, h1, w0, w1, divisor) for every output window (torch's cpu_avg_pool rule).
template <class F>
void avg_windows(const Planes& p, const Window& w, const AvgArgs& c, F&& f) {
  for (int64_t oh = 0; oh < p.oH; ++oh)
    for (int64_t ow = 0; ow < p.oW; ++ow) {
      int64_t h0 = oh * w.sH - w.pH, w0 = ow * w.sW - w.pW;
      int64_t h1 = std::min(h0 + w.kH, p.H + w.pH), w1 = std::min(w0 + w.kW, p.W + w.pW);
      int64_t pool = (h1 - h0) * (w1 - w0);
      h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
      h1 = std::min(h1, p.H), w1 = std::min(w1, p.W);
      int64_t div = c.divisor ? c.divisor : c.include_pad ? pool : (h1 - h0) * (w1 - w0);
      f(oh * p.oW + ow, h0, h1, w0, w1, div);
    }
}
SpecList avg_pool_meta(const OpDef&, const TensorList& in, const Attrs& a) {
  return {{avg_shape(in[0].sizes(), avg_args(a, 0)), in[0].dtype()}};
}
void avg_pool_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  check_int_dtype(op.name, in[0].dtype(), false);
  if (out[0].numel() == 0) return;
  AvgArgs c = avg_args(a, 0);
  Window w = window(c.k, c.s, c.p, Shape(c.k.size(), 1));
  Planes p = planes_of(in[0].sizes(), out[0].sizes());
  with_compute_type<true>(
      op.name, in[0].dtype(), {in[0]}, out[0], [&]<class T>(const TensorList& cs, Tensor& r) {
        using Acc = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
        const T* xp = cptr<T>(cs[0]);
        T* yp = static_cast<T*>(r.data_ptr());
        for_planes(p, p.out() * w.kH * w.kW, [&](int64_t pl) {
          const T* x = xp + pl * p.in();
          T* y = yp + pl * p.out();
          avg_windows(p, w, c,
                      [&](int64_t o, int64_t h0, int64_t h1, int64_t w0, int64_t w1, int64_t div) {
                        if (h0 >= h1 || w0 >= w1) {
                          y[o] = T(0);
                          return;
                        }
                        Acc s = 0;
                        for (int64_t h = h0; h < h1; ++h)
                          for (int64_t ww = w0; ww < w1; ++ww) s += x[h * p.W + ww];
                        y[o] = static_cast<T>(s / static_cast<Acc>(div));
                      });
        });
      });
}
OpDef op_avg_pool{"avg_pool", 0, avg_pool_meta, {avg_pool_kernel, nullptr}};
OpRegistrar reg_avg_pool{op_avg_pool, "avg_pool(Tensor self, int[] kernel_size, int[] stride, int[] padding, bool ceil_mode, bool count_include_pad, int divisor_override) -> Tensor"};

SpecList avg_pool_bw_meta(const OpDef&, const TensorList& in, const Attrs& a) {
  const Shape& is = attr<Shape>(a, 0);
  KILN_CHECK(avg_shape(is, avg_args(a, 1)) == in[0].sizes(), Runtime, "avg_pool_backward",
             "grad of size ", in[0].sizes(), " does not match the pooled input size ", is);
  return {{is, in[0].dtype()}};
}
void avg_pool_bw_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  if (out[0].numel() == 0) return;
  AvgArgs c = avg_args(a, 1);
  Window w = window(c.k, c.s, c.p, Shape(c.k.size(), 1));
  Planes p = planes_of(out[0].sizes(), in[0].sizes());
  with_compute_type<false>(
      op.name, in[0].dtype(), {in[0]}, out[0], [&]<class T>(const TensorList& cs, Tensor& r) {
        const T* gp = cptr<T>(cs[0]);
        T* op_ = static_cast<T*>(r.data_ptr());
        for_planes(p, p.out() * w.kH * w.kW, [&](int64_t pl) {
          T* gi = op_ + pl * p.in();
          std::fill(gi, gi + p.in(), T(0));
          const T* g = gp + pl * p.out();
          avg_windows(p, w, c,
                      [&](int64_t o, int64_t h0, int64_t h1, int64_t w0, int64_t w1, int64_t div) {
                        T delta = g[o] / static_cast<T>(div);
                        for (int64_t h = h0; h < h1; ++h)
                          for (int64_t ww = w0; ww < w1; ++ww) gi[h * p.W + ww] += delta;
                      });
        });
      });
}
OpDef op_avg_pool_bw{"avg_pool_backward", 0, avg_pool_bw_meta, {avg_pool_bw_kernel, nullptr}};
OpRegistrar reg_avg_pool_bw{op_avg_pool_bw, "avg_pool_backward(Tensor grad_output, int[] input_size, int[] kernel_size, int[] stride, int[] padding, bool ceil_mode, bool count_include_pad, int divisor_override) -> Tensor"};

TensorList avg_pool_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0]) {
    Attrs a{ctx.in_specs[0].sizes};
    a.insert(a.end(), ctx.attrs.begin(), ctx.attrs.end());
    r[0] = dispatch1(op_avg_pool_bw, {grad[0]}, std::move(a));
  }
  return r;
}
DerivativeRegistrar d_avg_pool{op_avg_pool, avg_pool_derivative, 0, 0};
TensorList avg_pool_bw_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0])
    r[0] = dispatch1(op_avg_pool, {grad[0]}, Attrs(ctx.attrs.begin() + 1, ctx.attrs.end()));
  return r;
}
DerivativeRegistrar d_avg_pool_bw{op_avg_pool_bw, avg_pool_bw_derivative, 0, 0};

// ---- adaptive_avg_pool: attrs {output_size}; backward: {grad} -> grad_input, attrs {input_size}
inline int64_t start_index(int64_t a, int64_t b, int64_t c) {
  return (a / b) * c + ((a % b) * c) / b;
}
inline int64_t end_index(int64_t a, int64_t b, int64_t c) { return 1 + ((a + 1) * c - 1) / b; }

SpecList adaptive_meta(const OpDef&, const TensorList& in, const Attrs& a) {
  const char* op = "adaptive_avg_pool";
  const Tensor& x = in[0];
  const Shape& os = attr<Shape>(a, 0);
  int64_t nsp = static_cast<int64_t>(os.size());
  KILN_CHECK((nsp == 1 || nsp == 2) && x.dim() == nsp + 2, Runtime, op,
             "expected a batched input with ", nsp, " spatial dims, got input of size ", x.sizes());
  for (int64_t v : os)
    KILN_CHECK(v >= 0, Runtime, op,
               "elements of output_size must be greater than or equal to 0 but received ", os);
  for (int64_t i = 2; i < x.dim(); ++i)
    KILN_CHECK(x.sizes()[i] > 0, Runtime, op,
               "Expected input to have non-zero size for non-batch dimensions, but "
               "input has sizes ",
               x.sizes(), " with dimension ", i, " being empty");
  Shape out{x.sizes()[0], x.sizes()[1]};
  out.insert(out.end(), os.begin(), os.end());
  return {{out, x.dtype()}};
}
void adaptive_kernel(const OpDef& op, const TensorList& in, const Attrs&, TensorList& out) {
  if (out[0].numel() == 0) return;
  Planes p = planes_of(in[0].sizes(), out[0].sizes());
  with_compute_type<false>(
      op.name, in[0].dtype(), {in[0]}, out[0], [&]<class T>(const TensorList& cs, Tensor& r) {
        const T* xp = cptr<T>(cs[0]);
        T* yp = static_cast<T*>(r.data_ptr());
        for_planes(p, p.in() + p.out(), [&](int64_t pl) {
          const T* x = xp + pl * p.in();
          T* y = yp + pl * p.out();
          for (int64_t oh = 0; oh < p.oH; ++oh) {
            int64_t h0 = start_index(oh, p.oH, p.H), h1 = end_index(oh, p.oH, p.H);
            for (int64_t ow = 0; ow < p.oW; ++ow) {
              int64_t w0 = start_index(ow, p.oW, p.W), w1 = end_index(ow, p.oW, p.W);
              T s = 0;
              for (int64_t h = h0; h < h1; ++h)
                for (int64_t w = w0; w < w1; ++w) s += x[h * p.W + w];
              y[oh * p.oW + ow] = s / static_cast<T>(h1 - h0) / static_cast<T>(w1 - w0);
            }
          }
        });
      });
}
OpDef op_adaptive{"adaptive_avg_pool", 0, adaptive_meta, {adaptive_kernel, nullptr}};
OpRegistrar reg_adaptive{op_adaptive, "adaptive_avg_pool(Tensor self, int[] output_size) -> Tensor"};

SpecList adaptive_bw_meta(const OpDef&, const TensorList& in, const Attrs& a) {
  const Shape& is = attr<Shape>(a, 0);
  KILN_CHECK((is.size() == 3 || is.size() == 4) && in[0].dim() == static_cast<int64_t>(is.size()) &&
                 in[0].sizes()[0] == is[0] && in[0].sizes()[1] == is[1],
             Runtime, "adaptive_avg_pool_backward", "grad of size ", in[0].sizes(),
             " does not match input size ", is);
  return {{is, in[0].dtype()}};
}
void adaptive_bw_kernel(const OpDef& op, const TensorList& in, const Attrs&, TensorList& out) {
  if (out[0].numel() == 0) return;
  Planes p = planes_of(out[0].sizes(), in[0].sizes());
  with_compute_type<false>(
      op.name, in[0].dtype(), {in[0]}, out[0], [&]<class T>(const TensorList& cs, Tensor& r) {
        const T* gp = cptr<T>(cs[0]);
        T* op_ = static_cast<T*>(r.data_ptr());
        for_planes(p, p.in() + p.out(), [&](int64_t pl) {
          T* gi = op_ + pl * p.in();
          std::fill(gi, gi + p.in(), T(0));
          const T* g = gp + pl * p.out();
          for (int64_t oh = 0; oh < p.oH; ++oh) {
            int64_t h0 = start_index(oh, p.oH, p.H), h1 = end_index(oh, p.oH, p.H);
            for (int64_t ow = 0; ow < p.oW; ++ow) {
              int64_t w0 = start_index(ow, p.oW, p.W), w1 = end_index(ow, p.oW, p.W);
              T delta = g[oh * p.oW + ow] / static_cast<T>(h1 - h0) / static_cast<T>(w1 - w0);
              for (int64_t h = h0; h < h1; ++h)
                for (int64_t w = w0; w < w1; ++w) gi[h * p.W + w] += delta;
            }
          }
        });
      });
}
OpDef op_adaptive_bw{
    "adaptive_avg_pool_backward", 0, adaptive_bw_meta, {adaptive_bw_kernel, nullptr}};
OpRegistrar reg_adaptive_bw{op_adaptive_bw, "adaptive_avg_pool_backward(Tensor grad_output, int[] input_size) -> Tensor"};

TensorList adaptive_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0]) r[0] = dispatch1(op_adaptive_bw, {grad[0]}, {ctx.in_specs[0].sizes});
  return r;
}
DerivativeRegistrar d_adaptive{op_adaptive, adaptive_derivative, 0, 0};
TensorList adaptive_bw_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0]) r[0] = dispatch1(op_adaptive, {grad[0]}, {spatial(ctx.in_specs[0].sizes)});
  return r;
}
DerivativeRegistrar d_adaptive_bw{op_adaptive_bw, adaptive_bw_derivative, 0, 0};

// ---- front ends --------------------------------------------------------------------------------
// A list argument of 1 or n ints as n ints.
Shape expand_to(const Shape& v, size_t n) { return v.size() == 1 ? Shape(n, v[0]) : v; }

void check_1d(const char* op, const char* name, const Shape& v, bool allow_empty = false) {
  KILN_CHECK(v.size() == 1 || (allow_empty && v.empty()), Runtime, op, op, "() argument '", name,
             "' should contain one int (got ", v.size(), ")");
}
void check_2d(const char* op, const char* name, const Shape& v, bool allow_empty = false) {
  KILN_CHECK(v.size() == 1 || v.size() == 2 || (allow_empty && v.empty()), Runtime, op, op, ": ",
             name,
             allow_empty ? " must either be omitted, a single int, or a tuple of two ints"
                         : " must either be a single int, or a tuple of two ints");
}
void check_dims(const char* op, const Tensor& x, int64_t lo, int64_t hi) {
  KILN_CHECK(x.dim() >= lo && x.dim() <= hi, Runtime, op, "Expected ", lo, " to ", hi,
             " dimensions, but got ", x.dim(),
             "-dimensional tensor for argument #1 'self' (while checking arguments for ", op, ")");
}
// Runs op on x with a batch dim added when x has none; removes it from the results.
TensorList batched_call(const OpDef& op, const Tensor& x, int64_t nsp, Attrs attrs) {
  bool batched = x.dim() == nsp + 2;
  TensorList r = dispatch(op, {batched ? x : unsqueeze(x, 0)}, std::move(attrs));
  if (!batched)
    for (Tensor& t : r) t = squeeze(t, Shape{0});
  return r;
}

std::tuple<Tensor, Tensor> max_pool_nd(const char* op, int64_t nsp, const Tensor& x, const Shape& k,
                                       const Shape& s, const Shape& p, const Shape& d, bool ceil) {
  Shape K = expand_to(k, nsp), S = s.empty() ? K : expand_to(s, nsp);
  TensorList r =
      batched_call(op_max_pool, x, nsp, {K, S, expand_to(p, nsp), expand_to(d, nsp), ceil});
  return {r[0], r[1]};
}

}  // namespace

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Shape& k, const Shape& s,
                                                   const Shape& p, const Shape& d, bool ceil_mode) {
  const char* op = "max_pool2d";
  check_2d(op, "kernel_size", k);
  check_2d(op, "stride", s, true);
  check_2d(op, "padding", p);
  check_2d(op, "dilation", d);
  KILN_CHECK(x.dim() == 3 || x.dim() == 4, Runtime, op,
             "non-empty 3D or 4D (batch mode) tensor expected for input");
  return max_pool_nd(op, 2, x, k, s, p, d, ceil_mode);
}
std::tuple<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, const Shape& k, const Shape& s,
                                                   const Shape& p, const Shape& d, bool ceil_mode) {
  const char* op = "max_pool1d";
  check_dims(op, x, 2, 3);
  check_1d(op, "kernel_size", k);
  check_1d(op, "stride", s, true);
  check_1d(op, "padding", p);
  check_1d(op, "dilation", d);
  return max_pool_nd(op, 1, x, k, s, p, d, ceil_mode);
}
Tensor max_pool2d(const Tensor& x, const Shape& k, const Shape& s, const Shape& p, const Shape& d,
                  bool ceil_mode) {
  return std::get<0>(max_pool2d_with_indices(x, k, s, p, d, ceil_mode));
}
Tensor max_pool1d(const Tensor& x, const Shape& k, const Shape& s, const Shape& p, const Shape& d,
                  bool ceil_mode) {
  // torch's index-free 1-d kernel takes floating types only
  if (x.dim() >= 2 && x.dim() <= 3 && !is_floating(x.dtype()))
    raise_dtype_unsupported("max_pool1d", x.dtype());
  return std::get<0>(max_pool1d_with_indices(x, k, s, p, d, ceil_mode));
}

Tensor avg_pool2d(const Tensor& x, const Shape& k, const Shape& s, const Shape& p, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  const char* op = "avg_pool2d";
  check_2d(op, "kernel_size", k);
  check_2d(op, "stride", s, true);
  check_2d(op, "padding", p);
  KILN_CHECK(!divisor_override || *divisor_override != 0, Runtime, op, "divisor must be not zero");
  KILN_CHECK(x.dim() >= 3, Index, op, "Dimension out of range (expected to be in range of [",
             -std::max<int64_t>(x.dim(), 1), ", ", std::max<int64_t>(x.dim(), 1) - 1,
             "], but got -3)");
  KILN_CHECK(x.dim() <= 4, Runtime, op,
             "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for "
             "input, but got:",
             x.sizes());
  Shape K = expand_to(k, 2), S = s.empty() ? K : expand_to(s, 2);
  return batched_call(
      op_avg_pool, x, 2,
      {K, S, expand_to(p, 2), ceil_mode, count_include_pad, divisor_override.value_or(0)})[0];
}
Tensor avg_pool1d(const Tensor& x, const Shape& k, const Shape& s, const Shape& p, bool ceil_mode,
                  bool count_include_pad) {
  const char* op = "avg_pool1d";
  check_dims(op, x, 2, 3);
  check_1d(op, "kernel_size", k);
  check_1d(op, "stride", s, true);
  check_1d(op, "padding", p);
  return batched_call(op_avg_pool, x, 1,
                      {k, s.empty() ? k : s, p, ceil_mode, count_include_pad, int64_t(0)})[0];
}

Tensor adaptive_avg_pool2d(const Tensor& x, const Shape& size) {
  const char* op = "adaptive_avg_pool2d";
  Shape output_size = expand_to(size, 2);
  KILN_CHECK(output_size.size() == 2, Runtime, op, "adaptive_avg_pool2d: output_size must be 2");
  KILN_CHECK(output_size[0] >= 0 && output_size[1] >= 0, Runtime, op,
             "adaptive_avg_pool2d: elements of output_size "
             "must be greater than or equal to 0 but received {",
             output_size[0], ", ", output_size[1], "}");
  KILN_CHECK(x.dim() == 3 || x.dim() == 4, Runtime, op,
             "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got ", x.sizes());
  for (int64_t i : {x.dim() - 2, x.dim() - 1})
    KILN_CHECK(x.sizes()[i] > 0, Runtime, op,
               "adaptive_avg_pool2d(): Expected input to have non-zero size for "
               "non-batch dimensions, but input has sizes ",
               x.sizes(), " with dimension ", i, " being empty");
  return batched_call(op_adaptive, x, 2, {output_size})[0];
}
Tensor adaptive_avg_pool1d(const Tensor& x, const Shape& output_size) {
  const char* op = "adaptive_avg_pool1d";
  check_dims(op, x, 2, 3);
  check_1d(op, "output_size", output_size);
  KILN_CHECK(output_size[0] >= 0, Runtime, op,
             "adaptive_avg_pool1d: elements of output_size must be greater than or "
             "equal to 0 but received {",
             output_size[0], "}");
  KILN_CHECK(x.sizes().back() > 0, Runtime, op,
             "adaptive_avg_pool1d(): Expected input to have non-zero size for "
             "non-batch dimensions, but input has sizes ",
             x.sizes(), " with dimension ", x.dim() - 1, " being empty");
  return batched_call(op_adaptive, x, 1, {output_size})[0];
}

}  // namespace kiln
