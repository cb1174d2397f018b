// CPU kernels of upsampling — nearest and nearest-exact, linear / bilinear / trilinear, bicubic —
// and their backward ops (the op-table entries, schemas, metas, derivatives and interpolate are in
// kiln/ops/upsample.cpp), registered by op name. Planes are worked in 3-d form (a 2-d op has depth 1,
// a 1-d one also height 1). Source indices and weights follow torch's CPU kernels (see
// kiln/ops/upsample.cpp).
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

struct Dims {  // planes and 3-d sizes of the input and output sides
  int64_t n, D, H, W, oD, oH, oW;
  int64_t in() const { return D * H * W; }
  int64_t out() const { return oD * oH * oW; }
};

Dims dims_of(const Shape& in, const Shape& out) {
  return {in[0] * in[1], depth(in), height(in), width(in), depth(out), height(out), width(out)};
}

// Per-spatial-dim scale i (0 = depth, 1 = height, 2 = width), none for the dims a shorter op lacks.
std::optional<double> scale_dhw(const Scales& s, int i) {
  int64_t k = static_cast<int64_t>(s.size()) - (3 - i);
  return k >= 0 ? s[k] : std::nullopt;
}

template <class F>
void for_planes(int64_t n, int64_t work, F&& f) {
  int64_t grain = std::max<int64_t>(1, cpu::kGrainSize / std::max<int64_t>(1, work));
  cpu::parallel_for(n, grain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) f(i);
  });
}

// ---- nearest (op.code 0) and nearest-exact (op.code 1) --------------------------------------------
// nearest: min(floor(dst * scale), In - 1), with torch's shortcuts for Out == In and Out == 2 In
// where its kernel takes them; exact: min(floor((dst + 0.5) * scale), In - 1). In float, as torch.
std::vector<int64_t> nearest_index(int64_t in, int64_t out, std::optional<double> scale,
                                   bool exact, bool shortcuts) {
  std::vector<int64_t> idx(out);
  float sc = scale && *scale > 0 ? static_cast<float>(1.0 / *scale)
                                 : static_cast<float>(in) / static_cast<float>(out);
  for (int64_t i = 0; i < out; ++i) {
    if (exact)
      idx[i] = std::min(static_cast<int64_t>(std::floor((static_cast<float>(i) + 0.5f) * sc)), in - 1);
    else if (shortcuts && out == in)
      idx[i] = i;
    else if (shortcuts && out == 2 * in)
      idx[i] = i >> 1;
    else
      idx[i] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(i) * sc)), in - 1);
  }
  return idx;
}

struct NearestIdx {
  std::vector<int64_t> d, h, w;
};
NearestIdx nearest_indices(const Dims& g, const Scales& sc, bool exact, bool shortcuts) {
  return {nearest_index(g.D, g.oD, scale_dhw(sc, 0), exact, shortcuts),
          nearest_index(g.H, g.oH, scale_dhw(sc, 1), exact, shortcuts),
          nearest_index(g.W, g.oW, scale_dhw(sc, 2), exact, shortcuts)};
}

void nearest_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  Dtype d = in[0].dtype();
  if (!is_floating(d) && d != kUInt8) raise_dtype_unsupported(op.name, d);
  if (out[0].numel() == 0) return;
  const Shape& os = attr<Shape>(a, 0);
  Scales sc = scales_at(a, 1, os.size());
  Dims g = dims_of(in[0].sizes(), out[0].sizes());
  // torch's 1-d nearest forward applies the formula everywhere
  NearestIdx ix = nearest_indices(g, sc, op.code == 1, os.size() >= 2);
  with_compute_type<true>(op.name, d, {in[0]}, out[0], [&]<class T>(const TensorList& cs, Tensor& r) {
    const T* xp = cptr<T>(cs[0]);
    T* yp = static_cast<T*>(r.data_ptr());
    for_planes(g.n, g.out(), [&](int64_t pl) {
      const T* x = xp + pl * g.in();
      T* y = yp + pl * g.out();
      for (int64_t od = 0; od < g.oD; ++od)
        for (int64_t oh = 0; oh < g.oH; ++oh) {
          const T* row = x + (ix.d[od] * g.H + ix.h[oh]) * g.W;
          T* yr = y + (od * g.oH + oh) * g.oW;
          for (int64_t ow = 0; ow < g.oW; ++ow) yr[ow] = row[ix.w[ow]];
        }
    });
  });
}

void nearest_bw_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  if (out[0].numel() == 0) return;
  const Shape& os = attr<Shape>(a, 1);
  Scales sc = scales_at(a, 2, os.size());
  Dims g = dims_of(out[0].sizes(), in[0].sizes());
  NearestIdx ix = nearest_indices(g, sc, op.code == 1, true);
  with_compute_type<false>(op.name, in[0].dtype(), {in[0]}, out[0], [&]<class T>(const TensorList& cs, Tensor& r) {
    const T* gp = cptr<T>(cs[0]);
    T* ip = static_cast<T*>(r.data_ptr());
    for_planes(g.n, g.out() + g.in(), [&](int64_t pl) {
      const T* go = gp + pl * g.out();
      T* gi = ip + pl * g.in();
      std::fill(gi, gi + g.in(), T(0));
      for (int64_t od = 0; od < g.oD; ++od)
        for (int64_t oh = 0; oh < g.oH; ++oh) {
          T* row = gi + (ix.d[od] * g.H + ix.h[oh]) * g.W;
          const T* gr = go + (od * g.oH + oh) * g.oW;
          for (int64_t ow = 0; ow < g.oW; ++ow) row[ix.w[ow]] += gr[ow];
        }
    });
  });
}

// ---- linear / bilinear / trilinear ----------------------------------------------------------------
template <class A>
struct Lerp {
  int64_t i0, i1;
  A l0, l1;
};

// torch's area_pixel_compute_source_index (cubic: no clamp at 0) with scale from the user's scale
// factor or In / Out.
template <class A>
A source_scale(int64_t in, int64_t out, bool align, std::optional<double> scale) {
  return align ? (out > 1 ? static_cast<A>(in - 1) / static_cast<A>(out - 1) : A(0))
               : (scale && *scale > 0 ? static_cast<A>(1.0 / *scale)
                                      : static_cast<A>(in) / static_cast<A>(out));
}
template <class A>
A source_index(A sc, int64_t dst, bool align, bool cubic) {
  if (align) return sc * static_cast<A>(dst);
  A real = sc * (static_cast<A>(dst) + A(0.5)) - A(0.5);
  return (!cubic && real < A(0)) ? A(0) : real;
}

template <class A>
std::vector<Lerp<A>> linear_index(int64_t in, int64_t out, bool align, std::optional<double> scale) {
  std::vector<Lerp<A>> v(out);
  A sc = source_scale<A>(in, out, align, scale);
  for (int64_t i = 0; i < out; ++i) {
    if (out == in) {
      v[i] = {i, i, A(1), A(0)};
      continue;
    }
    A real = source_index(sc, i, align, false);
    int64_t i0 = std::min(static_cast<int64_t>(std::floor(static_cast<float>(real))), in - 1);
    A l1 = std::min(std::max(real - static_cast<A>(i0), A(0)), A(1));
    v[i] = {i0, i0 + (i0 < in - 1 ? 1 : 0), A(1) - l1, l1};
  }
  return v;
}

template <class A>
struct LinearIdx {
  std::vector<Lerp<A>> d, h, w;
};
template <class A>
LinearIdx<A> linear_indices(const Dims& g, bool align, const Scales& sc) {
  return {linear_index<A>(g.D, g.oD, align, scale_dhw(sc, 0)),
          linear_index<A>(g.H, g.oH, align, scale_dhw(sc, 1)),
          linear_index<A>(g.W, g.oW, align, scale_dhw(sc, 2))};
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
  with_compute_type<false>(op.name, in[0].dtype(), {in[0]}, out[0], [&]<class T>(const TensorList& cs, Tensor& r) {
    LinearIdx<T> ix = linear_indices<T>(g, align, sc);
    const T* xp = cptr<T>(cs[0]);
    T* yp = static_cast<T*>(r.data_ptr());
    for_planes(g.n, 8 * g.out(), [&](int64_t pl) {
      const T* x = xp + pl * g.in();
      T* y = yp + pl * g.out();
      for (int64_t od = 0; od < g.oD; ++od) {
        const Lerp<T>& dd = ix.d[od];
        for (int64_t oh = 0; oh < g.oH; ++oh) {
          const Lerp<T>& h = ix.h[oh];
          const T *r00 = x + (dd.i0 * g.H + h.i0) * g.W, *r01 = x + (dd.i0 * g.H + h.i1) * g.W;
          const T *r10 = x + (dd.i1 * g.H + h.i0) * g.W, *r11 = x + (dd.i1 * g.H + h.i1) * g.W;
          T* yr = y + (od * g.oH + oh) * g.oW;
          for (int64_t ow = 0; ow < g.oW; ++ow) {
            const Lerp<T>& w = ix.w[ow];
            T v0 = h.l0 * (w.l0 * r00[w.i0] + w.l1 * r00[w.i1]) + h.l1 * (w.l0 * r01[w.i0] + w.l1 * r01[w.i1]);
            if (g.D == 1 && g.oD == 1) {  // 1-d and 2-d: torch's bilinear sum, exactly
              yr[ow] = v0;
              continue;
            }
            T v1 = h.l0 * (w.l0 * r10[w.i0] + w.l1 * r10[w.i1]) + h.l1 * (w.l0 * r11[w.i0] + w.l1 * r11[w.i1]);
            yr[ow] = dd.l0 * v0 + dd.l1 * v1;
          }
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
  with_compute_type<false>(op.name, in[0].dtype(), {in[0]}, out[0], [&]<class T>(const TensorList& cs, Tensor& r) {
    LinearIdx<T> ix = linear_indices<T>(g, align, sc);
    const T* gp = cptr<T>(cs[0]);
    T* ip = static_cast<T*>(r.data_ptr());
    for_planes(g.n, 8 * g.out() + g.in(), [&](int64_t pl) {
      const T* go = gp + pl * g.out();
      T* gi = ip + pl * g.in();
      std::fill(gi, gi + g.in(), T(0));
      for (int64_t od = 0; od < g.oD; ++od) {
        const Lerp<T>& dd = ix.d[od];
        for (int64_t oh = 0; oh < g.oH; ++oh) {
          const Lerp<T>& h = ix.h[oh];
          const T* gr = go + (od * g.oH + oh) * g.oW;
          for (int e = 0; e < (g.D == 1 && g.oD == 1 ? 1 : 2); ++e) {
            int64_t di = e ? dd.i1 : dd.i0;
            T ld = (g.D == 1 && g.oD == 1) ? T(1) : (e ? dd.l1 : dd.l0);
            T *r0 = gi + (di * g.H + h.i0) * g.W, *r1 = gi + (di * g.H + h.i1) * g.W;
            for (int64_t ow = 0; ow < g.oW; ++ow) {
              const Lerp<T>& w = ix.w[ow];
              T v = ld * gr[ow];
              r0[w.i0] += h.l0 * w.l0 * v;
              r0[w.i1] += h.l0 * w.l1 * v;
              r1[w.i0] += h.l1 * w.l0 * v;
              r1[w.i1] += h.l1 * w.l1 * v;
            }
          }
        }
      }
    });
  });
}

// ---- bicubic (2-d) ----------------------------------------------------------------------------------
// torch's upsample_bicubic2d: Keys' cubic convolution with A = -0.75 over a 4 x 4 neighbourhood,
// the source index unclamped, the taps clamped to the border.
template <class A>
struct Cubic {
  int64_t i[4];
  A w[4];
};
template <class A>
std::vector<Cubic<A>> cubic_index(int64_t in, int64_t out, bool align, std::optional<double> scale) {
  std::vector<Cubic<A>> v(out);
  A sc = source_scale<A>(in, out, align, scale);
  const A a = A(-0.75);
  for (int64_t o = 0; o < out; ++o) {
    A real = source_index(sc, o, align, true);
    int64_t i0 = static_cast<int64_t>(std::floor(real));
    A t = real - static_cast<A>(i0);
    A x1 = t + 1, x2 = 1 - t, x3 = 2 - t;
    v[o].w[0] = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a;
    v[o].w[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
    v[o].w[2] = ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1;
    v[o].w[3] = ((a * x3 - 5 * a) * x3 + 8 * a) * x3 - 4 * a;
    for (int k = 0; k < 4; ++k) v[o].i[k] = std::min(std::max<int64_t>(i0 - 1 + k, 0), in - 1);
  }
  return v;
}

void cubic_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  if (!is_floating(in[0].dtype())) raise_dtype_unsupported(op.name, in[0].dtype());
  if (out[0].numel() == 0) return;
  bool align = attr<bool>(a, 1);
  Scales sc = scales_at(a, 2, 2);
  Dims g = dims_of(in[0].sizes(), out[0].sizes());
  with_compute_type<false>(op.name, in[0].dtype(), {in[0]}, out[0], [&]<class T>(const TensorList& cs, Tensor& r) {
    auto ch = cubic_index<T>(g.H, g.oH, align, sc[0]), cw = cubic_index<T>(g.W, g.oW, align, sc[1]);
    const T* xp = cptr<T>(cs[0]);
    T* yp = static_cast<T*>(r.data_ptr());
    for_planes(g.n, 16 * g.out(), [&](int64_t pl) {
      const T* x = xp + pl * g.in();
      T* y = yp + pl * g.out();
      for (int64_t oh = 0; oh < g.oH; ++oh)
        for (int64_t ow = 0; ow < g.oW; ++ow) {
          const Cubic<T>&h = ch[oh], &w = cw[ow];
          T s = 0;
          for (int j = 0; j < 4; ++j) {
            const T* row = x + h.i[j] * g.W;
            T rs = w.w[0] * row[w.i[0]] + w.w[1] * row[w.i[1]] + w.w[2] * row[w.i[2]] + w.w[3] * row[w.i[3]];
            s += h.w[j] * rs;
          }
          y[oh * g.oW + ow] = s;
        }
    });
  });
}

void cubic_bw_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  if (out[0].numel() == 0) return;
  bool align = attr<bool>(a, 2);
  Scales sc = scales_at(a, 3, 2);
  Dims g = dims_of(out[0].sizes(), in[0].sizes());
  with_compute_type<false>(op.name, in[0].dtype(), {in[0]}, out[0], [&]<class T>(const TensorList& cs, Tensor& r) {
    auto ch = cubic_index<T>(g.H, g.oH, align, sc[0]), cw = cubic_index<T>(g.W, g.oW, align, sc[1]);
    const T* gp = cptr<T>(cs[0]);
    T* ip = static_cast<T*>(r.data_ptr());
    for_planes(g.n, 16 * g.out() + g.in(), [&](int64_t pl) {
      const T* go = gp + pl * g.out();
      T* gi = ip + pl * g.in();
      std::fill(gi, gi + g.in(), T(0));
      for (int64_t oh = 0; oh < g.oH; ++oh)
        for (int64_t ow = 0; ow < g.oW; ++ow) {
          const Cubic<T>&h = ch[oh], &w = cw[ow];
          T v = go[oh * g.oW + ow];
          for (int j = 0; j < 4; ++j)
            for (int i = 0; i < 4; ++i) gi[h.i[j] * g.W + w.i[i]] += v * h.w[j] * w.w[i];
        }
    });
  });
}

KernelRegistrar k_nearest{"upsample_nearest", DeviceType::CPU, nearest_kernel};
KernelRegistrar k_nearest_bw{"upsample_nearest_backward", DeviceType::CPU, nearest_bw_kernel};
KernelRegistrar k_nearest_exact{"upsample_nearest_exact", DeviceType::CPU, nearest_kernel};
KernelRegistrar k_nearest_exact_bw{"upsample_nearest_exact_backward", DeviceType::CPU, nearest_bw_kernel};
KernelRegistrar k_linear{"upsample_linear", DeviceType::CPU, linear_kernel};
KernelRegistrar k_linear_bw{"upsample_linear_backward", DeviceType::CPU, linear_bw_kernel};
KernelRegistrar k_cubic{"upsample_bicubic2d", DeviceType::CPU, cubic_kernel};
KernelRegistrar k_cubic_bw{"upsample_bicubic2d_backward", DeviceType::CPU, cubic_bw_kernel};

}  // namespace
}  // namespace kiln
