// Convolution: one table op (`convolution`, 1-d and 2-d, plain and transposed) and one for the
// weight gradient (`convolution_backward_weight`), with their derivatives. im2col / col2im + GEMM:
// OpenBLAS for float32 / float64, a plain loop for integers; float16 / bfloat16 run through
// float32. Work is split over batch x groups when there are enough items for every thread,
// otherwise one item at a time with BLAS threaded inside.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kiln/backend/cpu/parallel.h"
#include "kiln/core/visit.h"
#include "kiln/ops/nn_detail.h"
#include "kiln/ops/nn_ops.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

using namespace nn_detail;

// One convolution in 2-d form (1-d: H = oH = kH = 1). The image side has C channels of H x W, the
// column side O channels of oH x oW. A plain convolution maps image -> columns, a transposed one
// columns -> image with the same weight layout (O, C / groups, kH, kW).
struct Geom {
  int64_t N = 0, C = 0, H = 1, W = 1, O = 0, oH = 1, oW = 1;
  int64_t kH = 1, kW = 1, sH = 1, sW = 1, pH = 0, pW = 0, dH = 1, dW = 1, groups = 1;
  int64_t Cg() const { return C / groups; }
  int64_t Og() const { return O / groups; }
  int64_t K() const { return Cg() * kH * kW; }
  int64_t P() const { return oH * oW; }
  int64_t HW() const { return H * W; }
  // 1x1 kernel, unit stride, no padding, same size: the image is its own column matrix
  bool direct() const {
    return kH == 1 && kW == 1 && sH == 1 && sW == 1 && pH == 0 && pW == 0 && oH == H && oW == W;
  }
};

void set_params(Geom& g, const Shape& k, const Shape& s, const Shape& p, const Shape& d,
                int64_t groups) {
  g.kH = hw(k, 0, 1), g.kW = hw(k, 1, 1);
  g.sH = hw(s, 0, 1), g.sW = hw(s, 1, 1);
  g.pH = hw(p, 0, 0), g.pW = hw(p, 1, 0);
  g.dH = hw(d, 0, 1), g.dW = hw(d, 1, 1);
  g.groups = groups;
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

// img (Cg, H, W) -> col (Cg * kH * kW, oH * oW)
template <class T>
void im2col(const T* img, T* col, const Geom& g) {
  int64_t P = g.P();
  for (int64_t c = 0; c < g.Cg(); ++c)
    for (int64_t kh = 0; kh < g.kH; ++kh)
      for (int64_t kw = 0; kw < g.kW; ++kw) {
        T* row = col + ((c * g.kH + kh) * g.kW + kw) * P;
        const T* plane = img + c * g.HW();
        int64_t off = kw * g.dW - g.pW, lo, hi;
        valid_range(off, g.sW, g.W, g.oW, lo, hi);
        for (int64_t oh = 0; oh < g.oH; ++oh) {
          T* r = row + oh * g.oW;
          int64_t ih = oh * g.sH - g.pH + kh * g.dH;
          if (ih < 0 || ih >= g.H) {
            std::fill(r, r + g.oW, T(0));
            continue;
          }
          const T* src = plane + ih * g.W + off;
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

// img (Cg, H, W) += col (Cg * kH * kW, oH * oW) scattered back
template <class T>
void col2im(const T* col, T* img, const Geom& g) {
  int64_t P = g.P();
  for (int64_t c = 0; c < g.Cg(); ++c)
    for (int64_t kh = 0; kh < g.kH; ++kh)
      for (int64_t kw = 0; kw < g.kW; ++kw) {
        const T* row = col + ((c * g.kH + kh) * g.kW + kw) * P;
        T* plane = img + c * g.HW();
        int64_t off = kw * g.dW - g.pW, lo, hi;
        valid_range(off, g.sW, g.W, g.oW, lo, hi);
        for (int64_t oh = 0; oh < g.oH; ++oh) {
          int64_t ih = oh * g.sH - g.pH + kh * g.dH;
          if (ih < 0 || ih >= g.H) continue;
          const T* r = row + oh * g.oW;
          T* dst = plane + ih * g.W + off;
          for (int64_t ow = lo; ow < hi; ++ow) dst[ow * g.sW] += r[ow];
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
  auto TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, TA, TB, M, N, K, 1.0f, A, lda, B, ldb, accumulate ? 1.0f : 0.0f, C,
                ldc);
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, TA, TB, M, N, K, 1.0, A, lda, B, ldb, accumulate ? 1.0 : 0.0, C,
                ldc);
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

// y (N, O, oH, oW) = conv(x (N, C, H, W), w (O, Cg, kH, kW)) + b
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

// y (N, C, H, W) = conv_transpose(x (N, O, oH, oW), w (O, Cg, kH, kW)) + b
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

// dw (O, Cg, kH, kW) = sum over n of gy (N, O, oH, oW) x windows of x (N, C, H, W)
template <class T>
void conv_weight_backward(const T* gy, const T* x, T* dw, const Geom& g) {
  int64_t Og = g.Og(), K = g.K(), P = g.P(), wsize = g.O * K;
  bool direct = g.direct();
  int nt = get_num_threads();
  bool par = nt > 1 && g.N >= nt && !cpu::in_parallel_region();
  int64_t col_size = direct ? 0 : K * P;
  int64_t slots = par ? nt : 1;
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
  cpu::parallel_for(g.N, 1, [&](int64_t s, int64_t e) {
    int t = omp_get_thread_num();
    for (int64_t n = s; n < e; ++n) one(n, base + t * col_size, accs + t * wsize);
  });
  cpu::parallel_for(wsize, cpu::kGrainSize, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      T v = accs[i];
      for (int64_t t = 1; t < slots; ++t) v = static_cast<T>(v + accs[t * wsize + i]);
      dw[i] = v;
    }
  });
}

// ---- convolution: inputs {input, weight[, bias]}; attrs {stride, padding, dilation, transposed,
// output_padding, groups}
struct ConvArgs {
  Shape stride, padding, dilation, output_padding;
  bool transposed;
  int64_t groups;
};
ConvArgs conv_args(const Attrs& a) {
  return {attr<Shape>(a, 0), attr<Shape>(a, 1), attr<Shape>(a, 2),
          attr<Shape>(a, 4), attr<bool>(a, 3),  attr<int64_t>(a, 5)};
}
Attrs conv_attrs(const Shape& s, const Shape& p, const Shape& d, bool transposed, const Shape& op,
                 int64_t groups) {
  return {s, p, d, transposed, op, groups};
}

// torch's check_shape_forward, then the output shape.
SymShape conv_output_shape(const TensorSpec& x, const TensorSpec& w, const TensorSpec* b, const ConvArgs& c) {
  const char* op = "convolution";
  int64_t nsp = w.dim() - 2;
  KILN_CHECK(nsp == 1 || nsp == 2, NotImplemented, op,
             "only 1-d and 2-d convolutions are supported, got a ", w.dim(), "-dimensional weight");
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

void conv_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  ConvArgs c = conv_args(a);
  check_int_dtype(op.name, in[0].dtype(), !c.transposed);  // torch: int64 only for transposed
  if (out[0].numel() == 0) return;
  const Tensor &x = in[0], &w = in[1];
  Tensor& y = out[0];
  Geom g;
  set_params(g, spatial(w.sizes()), c.stride, c.padding, c.dilation, c.groups);
  g.N = x.sizes()[0];
  const Tensor& img = c.transposed ? y : x;
  const Tensor& cols = c.transposed ? x : y;
  g.C = img.sizes()[1], g.H = height(img.sizes()), g.W = width(img.sizes());
  g.O = cols.sizes()[1], g.oH = height(cols.sizes()), g.oW = width(cols.sizes());
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
OpDef op_convolution{"convolution", 0, conv_meta, {conv_kernel, nullptr}};
OpRegistrar reg_convolution{op_convolution, "convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, bool transposed, int[] output_padding, int groups) -> Tensor"};

// ---- convolution_backward_weight: inputs {grad_output, input}; attrs {weight_sizes, stride,
// padding, dilation, groups}
SpecList conv_bw_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const char* op = "convolution_backward_weight";
  const TensorSpec &gy = in[0], &x = in[1];
  const SymShape ws = attr_sym_shape(a, 0);
  int64_t groups = attr<int64_t>(a, 4);
  KILN_CHECK((x.dim() == 3 || x.dim() == 4) && gy.dim() == x.dim() &&
                 static_cast<int64_t>(ws.size()) == x.dim(),
             Runtime, op, "expected 3-d or 4-d grad_output and input matching the weight size ", ws,
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
void conv_bw_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  check_int_dtype(op.name, in[0].dtype(), true);
  if (out[0].numel() == 0) return;
  const Tensor &gy = in[0], &x = in[1];
  Geom g;
  set_params(g, spatial(attr<Shape>(a, 0)), attr<Shape>(a, 1), attr<Shape>(a, 2), attr<Shape>(a, 3),
             attr<int64_t>(a, 4));
  g.N = x.sizes()[0];
  g.C = x.sizes()[1], g.H = height(x.sizes()), g.W = width(x.sizes());
  g.O = gy.sizes()[1], g.oH = height(gy.sizes()), g.oW = width(gy.sizes());
  with_compute_type<true>(op.name, x.dtype(), {gy, x}, out[0],
                          [&]<class T>(const TensorList& cs, Tensor& r) {
                            T* dw = static_cast<T*>(r.data_ptr());
                            if (g.N == 0 || g.P() == 0)
                              std::fill(dw, dw + r.numel(), T(0));
                            else
                              conv_weight_backward<T>(cptr<T>(cs[0]), cptr<T>(cs[1]), dw, g);
                          });
}
OpDef op_conv_bw{"convolution_backward_weight", 0, conv_bw_meta, {conv_bw_kernel, nullptr}};
OpRegistrar reg_conv_bw{op_conv_bw, "convolution_backward_weight(Tensor grad_output, Tensor input, int[] weight_size, int[] stride, int[] padding, int[] dilation, int groups) -> Tensor"};

// ---- derivatives -------------------------------------------------------------------------------
// The transposed-convolution output_padding that makes conv_transpose(g) as large as `target`.
Shape output_padding_for(const Shape& target, const Shape& g, const Shape& ksize, const Shape& s,
                         const Shape& p, const Shape& d) {
  Shape op;
  for (size_t i = 0; i < s.size(); ++i)
    op.push_back(target[i + 2] -
                 ((g[i + 2] - 1) * s[i] - 2 * p[i] + d[i] * (ksize[i + 2] - 1) + 1));
  return op;
}
// Trims the spatial dims of t to those of `target` (a plain convolution of a transposed one's
// output can reach further when output_padding >= stride).
Tensor trim_to(Tensor t, const Shape& target) {
  for (int64_t i = 2; i < t.dim(); ++i)
    if (t.sizes()[i] != target[i]) t = narrow(t, i, 0, target[i]);
  return t;
}

TensorList conv_derivative(const GradCtx& ctx, const TensorList& grad) {
  ConvArgs c = conv_args(ctx.attrs);
  const Tensor &x = ctx.in[0], &w = ctx.in[1], &g = grad[0];
  const Shape& xs = ctx.in_specs[0].concrete_sizes("backward");
  TensorList r(ctx.in.size());
  Shape zero(c.stride.size(), 0);
  if (!c.transposed) {
    if (ctx.needs[0])
      r[0] = convolution(
          g, w, {}, c.stride, c.padding, c.dilation, true,
          output_padding_for(xs, g.sizes(), w.sizes(), c.stride, c.padding, c.dilation), c.groups);
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
    r[0] = trim_to(convolution(x, gw, {}, s, p, d, false, Shape(s.size(), 0), groups), gy.sizes());
  if (ctx.needs[1])
    r[1] = convolution(gy, gw, {}, s, p, d, true,
                       output_padding_for(x.sizes(), gy.sizes(), gw.sizes(), s, p, d), groups);
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

Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                        const Shape& stride, const Shape& padding, const Shape& output_padding,
                        int64_t groups, const Shape& dilation) {
  const char* op = "conv_transpose1d";
  bool batched;
  Tensor x = batchify(input, 1, op, batched);
  int64_t k = weight_spatial_dims(weight, op);
  Tensor y = convolution(x, weight, bias, expand_param(stride, k, "stride", op),
                         expand_param(padding, k, "padding", op),
                         expand_param(dilation, k, "dilation", op), true,
                         expand_param(output_padding, k, "output_padding", op), groups);
  return batched ? y : squeeze(y, Shape{0});
}

}  // namespace kiln
