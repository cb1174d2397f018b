// CPU kernels of the convolution ops (the op-table entries, schemas, metas, derivatives and front
// ends are in kiln/ops/conv.cpp), registered by op name. im2col / col2im + GEMM: OpenBLAS for
// float32 / float64, a plain loop for integers; float16 / bfloat16 run through float32. Work is
// split over batch x groups when there are enough items for every thread, otherwise one item at a
// time with BLAS threaded inside.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kiln/backend/cpu/blas.h"
#include "kiln/backend/cpu/compute.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/core/deterministic.h"
#include "kiln/ops/conv_detail.h"

namespace kiln {
namespace {

using namespace nn_detail;
using namespace conv_detail;
using cpu::check_int_dtype;
using cpu::with_compute_type;

// One convolution in 3-d form (2-d: D = oD = kD = 1; 1-d also H = oH = kH = 1). The image side has
// C channels of D x H x W, the column side O channels of oD x oH x oW. A plain convolution maps
// image -> columns, a transposed one columns -> image with the same weight layout
// (O, C / groups, kD, kH, kW).
struct Geom {
  int64_t N = 0, C = 0, D = 1, H = 1, W = 1, O = 0, oD = 1, oH = 1, oW = 1;
  int64_t kD = 1, kH = 1, kW = 1, sD = 1, sH = 1, sW = 1, pD = 0, pH = 0, pW = 0, dD = 1, dH = 1, dW = 1;
  int64_t groups = 1;
  int64_t Cg() const { return C / groups; }
  int64_t Og() const { return O / groups; }
  int64_t K() const { return Cg() * kD * kH * kW; }
  int64_t P() const { return oD * oH * oW; }
  int64_t HW() const { return D * H * W; }  // one image channel
  // 1x1 kernel, unit stride, no padding, same size: the image is its own column matrix
  bool direct() const {
    return kD == 1 && kH == 1 && kW == 1 && sD == 1 && sH == 1 && sW == 1 && pD == 0 && pH == 0 &&
           pW == 0 && oD == D && oH == H && oW == W;
  }
};

void set_params(Geom& g, const Shape& k, const Shape& s, const Shape& p, const Shape& d,
                int64_t groups) {
  g.kD = dhw(k, 0, 1), g.kH = dhw(k, 1, 1), g.kW = dhw(k, 2, 1);
  g.sD = dhw(s, 0, 1), g.sH = dhw(s, 1, 1), g.sW = dhw(s, 2, 1);
  g.pD = dhw(p, 0, 0), g.pH = dhw(p, 1, 0), g.pW = dhw(p, 2, 0);
  g.dD = dhw(d, 0, 1), g.dH = dhw(d, 1, 1), g.dW = dhw(d, 2, 1);
  g.groups = groups;
}
void set_sizes(Geom& g, const Shape& img, const Shape& cols) {
  g.C = img[1], g.D = depth(img), g.H = height(img), g.W = width(img);
  g.O = cols[1], g.oD = depth(cols), g.oH = height(cols), g.oW = width(cols);
}

// ---- building blocks ---------------------------------------------------------------------------
// Valid output range [lo, hi) of positions o with 0 <= o * s + off < n.
inline void valid_range(int64_t off, int64_t s, int64_t n, int64_t count, int64_t& lo,
                        int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + s - 1) / s;
  hi = n - 1 - off < 0 ? 0 : (n - 1 - off) / s + 1;
  hi = std::min(hi, count);
  lo = std::min(lo, hi);
}

// img (Cg, D, H, W) -> col (Cg * kD * kH * kW, oD * oH * oW)
template <class T>
void im2col(const T* img, T* col, const Geom& g) {
  int64_t P = g.P();
  for (int64_t c = 0; c < g.Cg(); ++c)
    for (int64_t kd = 0; kd < g.kD; ++kd)
      for (int64_t kh = 0; kh < g.kH; ++kh)
        for (int64_t kw = 0; kw < g.kW; ++kw) {
          T* row = col + (((c * g.kD + kd) * g.kH + kh) * g.kW + kw) * P;
          const T* vol = img + c * g.HW();
          int64_t off = kw * g.dW - g.pW, lo, hi;
          valid_range(off, g.sW, g.W, g.oW, lo, hi);
          for (int64_t od = 0; od < g.oD; ++od) {
            int64_t id = od * g.sD - g.pD + kd * g.dD;
            for (int64_t oh = 0; oh < g.oH; ++oh) {
              T* r = row + (od * g.oH + oh) * g.oW;
              int64_t ih = oh * g.sH - g.pH + kh * g.dH;
              if (id < 0 || id >= g.D || ih < 0 || ih >= g.H) {
                std::fill(r, r + g.oW, T(0));
                continue;
              }
              const T* src = vol + (id * g.H + ih) * g.W + off;
              std::fill(r, r + lo, T(0));
              if (g.sW == 1) {
                if (hi > lo) std::memcpy(r + lo, src + lo, (hi - lo) * sizeof(T));
              } else {
                for (int64_t ow = lo; ow < hi; ++ow) r[ow] = src[ow * g.sW];
              }
              std::fill(r + hi, r + g.oW, T(0));
            }
          }
        }
}

// img (Cg, D, H, W) += col (Cg * kD * kH * kW, oD * oH * oW) scattered back
template <class T>
void col2im(const T* col, T* img, const Geom& g) {
  int64_t P = g.P();
  for (int64_t c = 0; c < g.Cg(); ++c)
    for (int64_t kd = 0; kd < g.kD; ++kd)
      for (int64_t kh = 0; kh < g.kH; ++kh)
        for (int64_t kw = 0; kw < g.kW; ++kw) {
          const T* row = col + (((c * g.kD + kd) * g.kH + kh) * g.kW + kw) * P;
          T* vol = img + c * g.HW();
          int64_t off = kw * g.dW - g.pW, lo, hi;
          valid_range(off, g.sW, g.W, g.oW, lo, hi);
          for (int64_t od = 0; od < g.oD; ++od) {
            int64_t id = od * g.sD - g.pD + kd * g.dD;
            if (id < 0 || id >= g.D) continue;
            for (int64_t oh = 0; oh < g.oH; ++oh) {
              int64_t ih = oh * g.sH - g.pH + kh * g.dH;
              if (ih < 0 || ih >= g.H) continue;
              const T* r = row + (od * g.oH + oh) * g.oW;
              T* dst = vol + (id * g.H + ih) * g.W + off;
              for (int64_t ow = lo; ow < hi; ++ow) dst[ow * g.sW] += r[ow];
            }
          }
        }
}

// Row-major C (M x N) = op(A) (M x K) * op(B) (K x N) (+ C when accumulate).
template <class T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
          int64_t ldb, bool accumulate, T* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate)
      for (int64_t m = 0; m < M; ++m) std::fill(C + m * ldc, C + m * ldc + N, T(0));
    return;
  }
  if constexpr (std::is_floating_point_v<T>) {
    cpu::gemm<T>(ta, tb, M, N, K, T(1), A, lda, B, ldb, accumulate ? T(1) : T(0), C, ldc);
  } else {  // integers: wrap-around arithmetic like torch
    for (int64_t m = 0; m < M; ++m) {
      T* c = C + m * ldc;
      if (!accumulate) std::fill(c, c + N, T(0));
      for (int64_t k = 0; k < K; ++k) {
        T a = ta ? A[k * lda + m] : A[m * lda + k];
        if (a == T(0)) continue;
        if (!tb) {
          const T* b = B + k * ldb;
          for (int64_t n = 0; n < N; ++n) c[n] = static_cast<T>(c[n] + a * b[n]);
        } else {
          for (int64_t n = 0; n < N; ++n) c[n] = static_cast<T>(c[n] + a * B[n * ldb + k]);
        }
      }
    }
  }
}

// Runs item(i, scratch) for i in [0, items): in parallel with a scratch slice per thread when
// every thread gets an item, else serially (BLAS then threads inside).
template <class T, class F>
void run_items(int64_t items, int64_t scratch, F&& item) {
  int nt = get_num_threads();
  bool par = nt > 1 && items >= nt && !cpu::in_parallel_region();
  Tensor buf = make_tensor({std::max<int64_t>(1, (par ? nt : 1) * scratch)}, dtype_of<T>());
  T* base = static_cast<T*>(buf.data_ptr());
  if (!par) {
    for (int64_t i = 0; i < items; ++i) item(i, base);
    return;
  }
  cpu::parallel_for(items, 1, [&](int64_t s, int64_t e) {
    T* mine = base + omp_get_thread_num() * scratch;
    for (int64_t i = s; i < e; ++i) item(i, mine);
  });
}

template <class T>
void fill_bias(T* y, const T* b, int64_t rows, int64_t P) {
  for (int64_t o = 0; o < rows; ++o) std::fill(y + o * P, y + (o + 1) * P, b ? b[o] : T(0));
}

// y (N, O, oD, oH, oW) = conv(x (N, C, D, H, W), w (O, Cg, kD, kH, kW)) + b
template <class T>
void conv_forward(const T* x, const T* w, const T* b, T* y, const Geom& g) {
  int64_t Og = g.Og(), K = g.K(), P = g.P();
  bool direct = g.direct();
  run_items<T>(g.N * g.groups, direct ? 0 : K * P, [&](int64_t it, T* col) {
    int64_t n = it / g.groups, gi = it % g.groups;
    const T* xg = x + (n * g.C + gi * g.Cg()) * g.HW();
    T* yg = y + (n * g.O + gi * Og) * P;
    if (!direct) im2col(xg, col, g);
    if (b) fill_bias(yg, b + gi * Og, Og, P);
    gemm<T>(false, false, Og, P, K, w + gi * Og * K, K, direct ? xg : col, P, b != nullptr, yg, P);
  });
}

// y (N, C, D, H, W) = conv_transpose(x (N, O, oD, oH, oW), w (O, Cg, kD, kH, kW)) + b
template <class T>
void conv_transpose_forward(const T* x, const T* w, const T* b, T* y, const Geom& g) {
  int64_t Og = g.Og(), Cg = g.Cg(), K = g.K(), P = g.P();
  bool direct = g.direct();
  run_items<T>(g.N * g.groups, direct ? 0 : K * P, [&](int64_t it, T* col) {
    int64_t n = it / g.groups, gi = it % g.groups;
    const T* xg = x + (n * g.O + gi * Og) * P;
    T* yg = y + (n * g.C + gi * Cg) * g.HW();
    fill_bias(yg, b ? b + gi * Cg : nullptr, Cg, g.HW());
    if (direct) {
      gemm<T>(true, false, K, P, Og, w + gi * Og * K, K, xg, P, true, yg, P);
    } else {
      gemm<T>(true, false, K, P, Og, w + gi * Og * K, K, xg, P, false, col, P);
      col2im(col, yg, g);
    }
  });
}

// dw (O, Cg, kD, kH, kW) = sum over n of gy (N, O, oD, oH, oW) x windows of x (N, C, D, H, W)
constexpr int64_t kDeterministicSlices = 4;
template <class T>
void conv_weight_backward(const T* gy, const T* x, T* dw, const Geom& g) {
  int64_t Og = g.Og(), K = g.K(), P = g.P(), wsize = g.O * K;
  bool direct = g.direct();
  int nt = get_num_threads();
  // deterministic mode: the batch is split into a fixed number of slices (not one per thread), each
  // summed into its own accumulator and the accumulators added in order, on any number of threads
  const bool det = are_deterministic_algorithms_enabled() && g.N > 1;
  bool par = det || (nt > 1 && g.N >= nt && !cpu::in_parallel_region());
  int64_t col_size = direct ? 0 : K * P;
  int64_t slots = det ? std::min<int64_t>(g.N, kDeterministicSlices) : par ? nt : 1;
  // per thread: a column buffer and (in parallel) a private accumulator
  Tensor buf =
      make_tensor({std::max<int64_t>(1, slots * (col_size + (par ? wsize : 0)))}, dtype_of<T>());
  T* base = static_cast<T*>(buf.data_ptr());
  auto one = [&](int64_t n, T* col, T* acc) {
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      const T* xg = x + (n * g.C + gi * g.Cg()) * g.HW();
      if (!direct) im2col(xg, col, g);
      gemm<T>(false, true, Og, K, P, gy + (n * g.O + gi * Og) * P, P, direct ? xg : col, P, true,
              acc + gi * Og * K, K);
    }
  };
  if (!par) {
    std::fill(dw, dw + wsize, T(0));
    for (int64_t n = 0; n < g.N; ++n) one(n, base, dw);
    return;
  }
  T* accs = base + slots * col_size;
  std::fill(accs, accs + slots * wsize, T(0));
  if (det) {
    const int64_t per = (g.N + slots - 1) / slots;
    cpu::parallel_for(slots, 1, [&](int64_t s, int64_t e) {
      for (int64_t t = s; t < e; ++t)
        for (int64_t n = t * per; n < std::min(g.N, (t + 1) * per); ++n) one(n, base + t * col_size, accs + t * wsize);
    });
  } else {
    cpu::parallel_for(g.N, 1, [&](int64_t s, int64_t e) {
      int t = omp_get_thread_num();
      for (int64_t n = s; n < e; ++n) one(n, base + t * col_size, accs + t * wsize);
    });
  }
  cpu::parallel_for(wsize, cpu::kGrainSize, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      T v = accs[i];
      for (int64_t t = 1; t < slots; ++t) v = static_cast<T>(v + accs[t * wsize + i]);
      dw[i] = v;
    }
  });
}

void conv_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  ConvArgs c = conv_args(a);
  check_int_dtype(op.name, in[0].dtype(), !c.transposed);  // torch: int64 only for transposed
  if (out[0].numel() == 0) return;
  const Tensor &x = in[0], &w = in[1];
  Tensor& y = out[0];
  Geom g;
  set_params(g, spatial(w.sizes()), c.stride, c.padding, c.dilation, c.groups);
  g.N = x.sizes()[0];
  set_sizes(g, (c.transposed ? y : x).sizes(), (c.transposed ? x : y).sizes());
  TensorList ins{x, w, in.size() == 3 ? in[2] : Tensor()};
  with_compute_type<true>(
      op.name, x.dtype(), ins, y, [&]<class T>(const TensorList& cs, Tensor& r) {
        T* yp = static_cast<T*>(r.data_ptr());
        if (c.transposed)
          conv_transpose_forward<T>(cptr<T>(cs[0]), cptr<T>(cs[1]), cptr<T>(cs[2]), yp, g);
        else
          conv_forward<T>(cptr<T>(cs[0]), cptr<T>(cs[1]), cptr<T>(cs[2]), yp, g);
      });
}
void conv_bw_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  check_int_dtype(op.name, in[0].dtype(), true);
  if (out[0].numel() == 0) return;
  const Tensor &gy = in[0], &x = in[1];
  Geom g;
  set_params(g, spatial(attr<Shape>(a, 0)), attr<Shape>(a, 1), attr<Shape>(a, 2), attr<Shape>(a, 3),
             attr<int64_t>(a, 4));
  g.N = x.sizes()[0];
  set_sizes(g, x.sizes(), gy.sizes());
  with_compute_type<true>(op.name, x.dtype(), {gy, x}, out[0],
                          [&]<class T>(const TensorList& cs, Tensor& r) {
                            T* dw = static_cast<T*>(r.data_ptr());
                            if (g.N == 0 || g.P() == 0)
                              std::fill(dw, dw + r.numel(), T(0));
                            else
                              conv_weight_backward<T>(cptr<T>(cs[0]), cptr<T>(cs[1]), dw, g);
                          });
}
// im2col: (N, C, H, W) -> (N, C * kH * kW, oH * oW) (F.unfold); col2im the adjoint (F.fold), its
// output (N, C, H, W) summing the overlapping blocks. attrs {[output_size,] kernel, dilation, padding,
// stride}, two values each.
Geom block_geom(const Shape& img, const Attrs& a, size_t o) {
  Geom g;
  set_params(g, attr<Shape>(a, o), attr<Shape>(a, o + 3), attr<Shape>(a, o + 2), attr<Shape>(a, o + 1), 1);
  g.N = img[0], g.C = img[1], g.H = img[2], g.W = img[3], g.O = g.C * g.kH * g.kW;
  g.oH = (g.H + 2 * g.pH - g.dH * (g.kH - 1) - 1) / g.sH + 1;
  g.oW = (g.W + 2 * g.pW - g.dW * (g.kW - 1) - 1) / g.sW + 1;
  return g;
}
void im2col_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  if (out[0].numel() == 0) return;
  Geom g = block_geom(in[0].sizes(), a, 0);
  with_compute_type<false>(op.name, in[0].dtype(), {in[0]}, out[0], [&]<class T>(const TensorList& cs, Tensor& r) {
    const T* x = cptr<T>(cs[0]);
    T* y = static_cast<T*>(r.data_ptr());
    cpu::parallel_for(g.N, 1, [&](int64_t s, int64_t e) {
      for (int64_t n = s; n < e; ++n) im2col(x + n * g.C * g.HW(), y + n * g.K() * g.P(), g);
    });
  });
}
void col2im_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  if (out[0].numel() == 0) return;
  Geom g = block_geom(out[0].sizes(), a, 1);
  with_compute_type<false>(op.name, in[0].dtype(), {in[0]}, out[0], [&]<class T>(const TensorList& cs, Tensor& r) {
    const T* x = cptr<T>(cs[0]);
    T* y = static_cast<T*>(r.data_ptr());
    std::fill(y, y + r.numel(), T(0));
    cpu::parallel_for(g.N, 1, [&](int64_t s, int64_t e) {
      for (int64_t n = s; n < e; ++n) col2im(x + n * g.K() * g.P(), y + n * g.C * g.HW(), g);
    });
  });
}

KernelRegistrar k_im2col{"im2col", DeviceType::CPU, im2col_kernel};
KernelRegistrar k_col2im{"col2im", DeviceType::CPU, col2im_kernel};
KernelRegistrar k_convolution{"convolution", DeviceType::CPU, conv_kernel};
KernelRegistrar k_conv_bw{"convolution_backward_weight", DeviceType::CPU, conv_bw_kernel};

}  // namespace
}  // namespace kiln
