// CPU kernels of upsampling, nearest and linear / bilinear, and their backward ops (the op-table
// entries, schemas, metas, derivatives and interpolate are in kiln/ops/upsample.cpp), registered by
// op name. Source indices and weights follow torch's CPU kernels (see kiln/ops/upsample.cpp).
#include <cmath>
#include <optional>
#include <vector>

#include "kiln/backend/cpu/compute.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/ops/upsample_detail.h"

namespace kiln {
namespace {

using namespace upsample_detail;
using cpu::with_compute_type;

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

KernelRegistrar k_nearest{"upsample_nearest", DeviceType::CPU, nearest_kernel};
KernelRegistrar k_nearest_bw{"upsample_nearest_backward", DeviceType::CPU, nearest_bw_kernel};
KernelRegistrar k_linear{"upsample_linear", DeviceType::CPU, linear_kernel};
KernelRegistrar k_linear_bw{"upsample_linear_backward", DeviceType::CPU, linear_bw_kernel};

}  // namespace
}  // namespace kiln
