// CPU kernels of pooling (max with indices, average, adaptive average and max) and their backward
// ops (the op-table entries, schemas, metas, derivatives and front ends are in kiln/ops/pool.cpp),
// registered by op name. Kernels work on contiguous planes in 3-d form (a 2-d op has depth 1, a 1-d
// one also height 1) and split the N * C planes over threads; float16 / bfloat16 compute in float32.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/backend/cpu/compute.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/ops/pool_detail.h"

namespace kiln {
namespace {

using namespace pool_detail;
using cpu::check_int_dtype;
using cpu::with_compute_type;

// Planes of the image (input) side and the output side, in 3-d form.
struct Planes {
  int64_t n = 0, D = 1, H = 1, W = 1, oD = 1, oH = 1, oW = 1;
  int64_t in() const { return D * H * W; }
  int64_t out() const { return oD * oH * oW; }
};

Planes planes_of(const Shape& in, const Shape& out) {
  return {in[0] * in[1], depth(in), height(in), width(in), depth(out), height(out), width(out)};
}

// Calls f(plane) for every plane, in parallel when the planes hold enough work.
template <class F>
void for_planes(const Planes& p, int64_t work_per_plane, F&& f) {
  int64_t grain = std::max<int64_t>(1, cpu::kGrainSize / std::max<int64_t>(1, work_per_plane));
  cpu::parallel_for(p.n, grain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) f(i);
  });
}

template <class T>
constexpr T lowest() {
  return std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
}
// torch's max rule: a NaN wins and stays
template <class T>
inline bool takes(T v, T m) {
  if constexpr (std::is_floating_point_v<T>) return v > m || std::isnan(v);
  return v > m;
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
        for_planes(p, p.out() * w.kD * w.kH * w.kW, [&](int64_t pl) {
          const T* x = xp + pl * p.in();
          T* y = yp + pl * p.out();
          int64_t* idx = ip + pl * p.out();
          for (int64_t od = 0; od < p.oD; ++od)
            for (int64_t oh = 0; oh < p.oH; ++oh)
              for (int64_t ow = 0; ow < p.oW; ++ow) {
                int64_t d0 = od * w.sD - w.pD, h0 = oh * w.sH - w.pH, w0 = ow * w.sW - w.pW;
                int64_t d1 = std::min(d0 + (w.kD - 1) * w.dD + 1, p.D),
                        h1 = std::min(h0 + (w.kH - 1) * w.dH + 1, p.H),
                        w1 = std::min(w0 + (w.kW - 1) * w.dW + 1, p.W);
                while (d0 < 0) d0 += w.dD;
                while (h0 < 0) h0 += w.dH;
                while (w0 < 0) w0 += w.dW;
                int64_t best = (d0 * p.H + h0) * p.W + w0;
                T m = lowest<T>();
                for (int64_t d = d0; d < d1; d += w.dD)
                  for (int64_t h = h0; h < h1; h += w.dH)
                    for (int64_t ww = w0; ww < w1; ww += w.dW) {
                      int64_t i = (d * p.H + h) * p.W + ww;
                      if (takes(x[i], m)) m = x[i], best = i;
                    }
                int64_t o = (od * p.oH + oh) * p.oW + ow;
                y[o] = m;
                idx[o] = best;
              }
        });
      });
}

// Scatters grad to the input positions the forward's indices name (max_pool, adaptive_max_pool).
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

// Calls f(out_index, d0, d1, h0, h1, w0, w1, divisor) for every output window (torch's
// cpu_avg_pool rule: the divisor counts padding up to the padded edge unless count_include_pad is off).
template <class F>
void avg_windows(const Planes& p, const Window& w, const AvgArgs& c, F&& f) {
  for (int64_t od = 0; od < p.oD; ++od)
    for (int64_t oh = 0; oh < p.oH; ++oh)
      for (int64_t ow = 0; ow < p.oW; ++ow) {
        int64_t d0 = od * w.sD - w.pD, h0 = oh * w.sH - w.pH, w0 = ow * w.sW - w.pW;
        int64_t d1 = std::min(d0 + w.kD, p.D + w.pD), h1 = std::min(h0 + w.kH, p.H + w.pH),
                w1 = std::min(w0 + w.kW, p.W + w.pW);
        int64_t pool = (d1 - d0) * (h1 - h0) * (w1 - w0);
        d0 = std::max<int64_t>(d0, 0), h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
        d1 = std::min(d1, p.D), h1 = std::min(h1, p.H), w1 = std::min(w1, p.W);
        int64_t div = c.divisor ? c.divisor : c.include_pad ? pool : (d1 - d0) * (h1 - h0) * (w1 - w0);
        f((od * p.oH + oh) * p.oW + ow, d0, d1, h0, h1, w0, w1, div);
      }
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
        for_planes(p, p.out() * w.kD * w.kH * w.kW, [&](int64_t pl) {
          const T* x = xp + pl * p.in();
          T* y = yp + pl * p.out();
          avg_windows(p, w, c,
                      [&](int64_t o, int64_t d0, int64_t d1, int64_t h0, int64_t h1, int64_t w0,
                          int64_t w1, int64_t div) {
                        if (d0 >= d1 || h0 >= h1 || w0 >= w1) {
                          y[o] = T(0);
                          return;
                        }
                        Acc s = 0;
                        for (int64_t d = d0; d < d1; ++d)
                          for (int64_t h = h0; h < h1; ++h)
                            for (int64_t ww = w0; ww < w1; ++ww) s += x[(d * p.H + h) * p.W + ww];
                        y[o] = static_cast<T>(s / static_cast<Acc>(div));
                      });
        });
      });
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
        for_planes(p, p.out() * w.kD * w.kH * w.kW, [&](int64_t pl) {
          T* gi = op_ + pl * p.in();
          std::fill(gi, gi + p.in(), T(0));
          const T* g = gp + pl * p.out();
          avg_windows(p, w, c,
                      [&](int64_t o, int64_t d0, int64_t d1, int64_t h0, int64_t h1, int64_t w0,
                          int64_t w1, int64_t div) {
                        T delta = g[o] / static_cast<T>(div);
                        for (int64_t d = d0; d < d1; ++d)
                          for (int64_t h = h0; h < h1; ++h)
                            for (int64_t ww = w0; ww < w1; ++ww) gi[(d * p.H + h) * p.W + ww] += delta;
                      });
        });
      });
}

// Calls f(out_index, d0, d1, h0, h1, w0, w1) for every adaptive window.
template <class F>
void adaptive_windows(const Planes& p, F&& f) {
  for (int64_t od = 0; od < p.oD; ++od) {
    int64_t d0 = start_index(od, p.oD, p.D), d1 = end_index(od, p.oD, p.D);
    for (int64_t oh = 0; oh < p.oH; ++oh) {
      int64_t h0 = start_index(oh, p.oH, p.H), h1 = end_index(oh, p.oH, p.H);
      for (int64_t ow = 0; ow < p.oW; ++ow) {
        int64_t w0 = start_index(ow, p.oW, p.W), w1 = end_index(ow, p.oW, p.W);
        f((od * p.oH + oh) * p.oW + ow, d0, d1, h0, h1, w0, w1);
      }
    }
  }
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
          adaptive_windows(p, [&](int64_t o, int64_t d0, int64_t d1, int64_t h0, int64_t h1, int64_t w0,
                                  int64_t w1) {
            T s = 0;
            for (int64_t d = d0; d < d1; ++d)
              for (int64_t h = h0; h < h1; ++h)
                for (int64_t w = w0; w < w1; ++w) s += x[(d * p.H + h) * p.W + w];
            y[o] = s / static_cast<T>(d1 - d0) / static_cast<T>(h1 - h0) / static_cast<T>(w1 - w0);
          });
        });
      });
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
          adaptive_windows(p, [&](int64_t o, int64_t d0, int64_t d1, int64_t h0, int64_t h1, int64_t w0,
                                  int64_t w1) {
            T delta = g[o] / static_cast<T>(d1 - d0) / static_cast<T>(h1 - h0) / static_cast<T>(w1 - w0);
            for (int64_t d = d0; d < d1; ++d)
              for (int64_t h = h0; h < h1; ++h)
                for (int64_t w = w0; w < w1; ++w) gi[(d * p.H + h) * p.W + w] += delta;
          });
        });
      });
}

// adaptive_max_pool: {values, int64 indices}; the backward is max_pool_backward's scatter
void adaptive_max_kernel(const OpDef& op, const TensorList& in, const Attrs&, TensorList& out) {
  if (!is_floating(in[0].dtype())) raise_dtype_unsupported(op.name, in[0].dtype());  // as torch
  if (out[0].numel() == 0) return;
  Planes p = planes_of(in[0].sizes(), out[0].sizes());
  int64_t* ip = static_cast<int64_t*>(out[1].data_ptr());
  with_compute_type<true>(
      op.name, in[0].dtype(), {in[0]}, out[0], [&]<class T>(const TensorList& cs, Tensor& r) {
        const T* xp = cptr<T>(cs[0]);
        T* yp = static_cast<T*>(r.data_ptr());
        for_planes(p, p.in() + p.out(), [&](int64_t pl) {
          const T* x = xp + pl * p.in();
          T* y = yp + pl * p.out();
          int64_t* idx = ip + pl * p.out();
          adaptive_windows(p, [&](int64_t o, int64_t d0, int64_t d1, int64_t h0, int64_t h1, int64_t w0,
                                  int64_t w1) {
            int64_t best = (d0 * p.H + h0) * p.W + w0;
            T m = lowest<T>();
            for (int64_t d = d0; d < d1; ++d)
              for (int64_t h = h0; h < h1; ++h)
                for (int64_t w = w0; w < w1; ++w) {
                  int64_t i = (d * p.H + h) * p.W + w;
                  if (takes(x[i], m)) m = x[i], best = i;
                }
            y[o] = m;
            idx[o] = best;
          });
        });
      });
}

KernelRegistrar k_max_pool{"max_pool", DeviceType::CPU, max_pool_kernel};
KernelRegistrar k_max_pool_bw{"max_pool_backward", DeviceType::CPU, max_pool_bw_kernel};
KernelRegistrar k_avg_pool{"avg_pool", DeviceType::CPU, avg_pool_kernel};
KernelRegistrar k_avg_pool_bw{"avg_pool_backward", DeviceType::CPU, avg_pool_bw_kernel};
KernelRegistrar k_adaptive{"adaptive_avg_pool", DeviceType::CPU, adaptive_kernel};
KernelRegistrar k_adaptive_bw{"adaptive_avg_pool_backward", DeviceType::CPU, adaptive_bw_kernel};
KernelRegistrar k_adaptive_max{"adaptive_max_pool", DeviceType::CPU, adaptive_max_kernel};

}  // namespace
}  // namespace kiln
