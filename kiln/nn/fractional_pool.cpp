// Fractional max pooling (Graham, "Fractional Max-Pooling"): torch.nn.functional.fractional_max_pool2d /
// 3d and nn::FractionalMaxPool2d / 3d. Each (batch, channel) plane draws one sample u in [0, 1) per
// spatial dimension; output position i of a dimension pools the window [s_i, s_i + k) with
// s_i = int((i + u) * alpha) - int(u * alpha), alpha = (in - k) / (out - 1), the last window ending at
// the input's end. As torch: that arithmetic in the input's dtype (float16 / bfloat16 round after
// each operation, so their windows can differ from float32's for the same samples), the first
// maximum in the window's row-major order (a NaN wins, the last NaN seen), indices into the flattened
// input plane, and the gradient of each output added into the input element it picked.
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "kiln/autograd/autograd.h"
#include "kiln/autograd/function.h"
#include "kiln/core/format.h"
#include "kiln/core/visit.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/layers_extra.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"

namespace kiln::nn {
namespace functional {
namespace {

// torch's generate_intervals for one dimension, in T's arithmetic.
template <class T>
void frac_intervals(T sample_t, int64_t in, int64_t out, int64_t pool, int64_t* seq) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  auto rt = [](A v) { return static_cast<A>(static_cast<T>(v)); };  // (identity for float / double)
  const A sample = static_cast<A>(sample_t);
  if (out > 1) {
    const A alpha = rt(rt(static_cast<A>(in - pool)) / rt(static_cast<A>(out - 1)));
    for (int64_t i = 0; i < out - 1; ++i)
      seq[i] = static_cast<int64_t>(rt(rt(rt(static_cast<A>(i)) + sample) * alpha)) -
               static_cast<int64_t>(rt(sample * alpha));
  }
  if (out > 0) seq[out - 1] = in - pool;
}

// Planes of 3 spatial dims (a 2-D pool: the first of size 1); samples (planes, D), dimension d of
// the D real ones reading sample sidx[d].
struct FracGeom {
  int D;
  int64_t planes, in[3], out[3], k[3];
  int sidx[3];
};

template <class T>
void frac_forward(const FracGeom& g, const T* x, const T* s, T* y, int64_t* idx) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int64_t plane_in = g.in[0] * g.in[1] * g.in[2], plane_out = g.out[0] * g.out[1] * g.out[2];
  std::vector<int64_t> seq[3];
  for (int d = 0; d < 3; ++d) seq[d].assign(static_cast<size_t>(g.out[d]), 0);
  for (int64_t p = 0; p < g.planes; ++p) {
    for (int d = 3 - g.D; d < 3; ++d)
      frac_intervals<T>(s[p * g.D + g.sidx[d - (3 - g.D)]], g.in[d], g.out[d], g.k[d], seq[d].data());
    const T* xp = x + p * plane_in;
    T* yp = y + p * plane_out;
    int64_t* ip = idx + p * plane_out;
    int64_t o = 0;
    for (int64_t a = 0; a < g.out[0]; ++a)
      for (int64_t b = 0; b < g.out[1]; ++b)
        for (int64_t c = 0; c < g.out[2]; ++c, ++o) {
          const int64_t a0 = seq[0][a], b0 = seq[1][b], c0 = seq[2][c];
          int64_t best_i = (a0 * g.in[1] + b0) * g.in[2] + c0;
          A best = -std::numeric_limits<A>::infinity();
          for (int64_t i = a0; i < a0 + g.k[0]; ++i)
            for (int64_t j = b0; j < b0 + g.k[1]; ++j)
              for (int64_t l = c0; l < c0 + g.k[2]; ++l) {
                const int64_t at = (i * g.in[1] + j) * g.in[2] + l;
                const A v = static_cast<A>(xp[at]);
                if (v > best || std::isnan(v)) best = v, best_i = at;
              }
          yp[o] = static_cast<T>(best);
          ip[o] = best_i;
        }
  }
}

// grad_input (planes, plane_in): each output's gradient added at its index, outputs in order.
Tensor frac_backward(const Tensor& grad, const Tensor& indices, const Shape& in_sizes, int64_t planes) {
  const int64_t plane_in = shape_numel(in_sizes) / std::max<int64_t>(planes, 1);
  Tensor gi = zeros({planes, plane_in}, TensorOptions(grad.dtype()));
  if (planes == 0 || indices.numel() == 0) return reshape(gi, in_sizes);
  gi = scatter_add(gi, 1, reshape(indices, {planes, -1}), reshape(grad, {planes, -1}));
  return reshape(gi, in_sizes);
}

// y and indices of x (checked by the caller) with samples s.
std::tuple<Tensor, Tensor> frac_compute(const FracGeom& g, const char* op, const Tensor& x, const Tensor& s,
                                        const Shape& out_shape) {
  Tensor xc = x.contiguous(), sc = s.contiguous();
  Tensor y = empty(out_shape, TensorOptions(x.dtype()));
  Tensor idx = empty(out_shape, TensorOptions(kInt64));
  visit_floating(x.dtype(), op, [&]<class T>() {
    frac_forward<T>(g, xc.data_ptr<T>(), sc.data_ptr<T>(), y.data_ptr<T>(), idx.data_ptr<int64_t>());
  });
  return {y, idx};
}

template <int D>
struct FractionalMaxPool : autograd::Function<FractionalMaxPool<D>> {
  static const char* name() { return D == 2 ? "FractionalMaxPool2DBackward0" : "FractionalMaxPool3DBackward0"; }
  // in: x and the samples
  static TensorList forward(autograd::AutogradContext* ctx, const TensorList& in, const FracGeom& g,
                            const char* op, const Shape& out_shape) {
    auto [y, idx] = frac_compute(g, op, in[0], in[1], out_shape);
    ctx->save_for_backward({idx});
    ctx->mark_non_differentiable({idx});
    ctx->saved_data["planes"] = g.planes;
    ctx->saved_data["sizes"] = in[0].sizes();
    return {y, idx};
  }
  static TensorList backward(autograd::AutogradContext* ctx, const TensorList& g) {
    const Tensor indices = ctx->get_saved_variables()[0];
    return {frac_backward(g[0], indices, std::get<Shape>(ctx->saved_data["sizes"]),
                          std::get<int64_t>(ctx->saved_data["planes"])),
            Tensor()};
  }
};

std::tuple<Tensor, Tensor> fractional_max_pool(int D, const Tensor& x, const Shape& kernel_size,
                                               const Shape& output_size, const Tensor& random_samples) {
  const char* op = D == 2 ? "fractional_max_pool2d" : "fractional_max_pool3d";
  const char* pre = D == 2 ? "fractional_max_pool2d(): " : "fractional_max_pool3d_out(): ";
  KILN_CHECK(x.dim() == D + 1 || x.dim() == D + 2, Runtime, op, pre, "Expected ", D + 1, "D or ", D + 2,
             "D tensor, but got: ", shape_list(x.sizes()));
  KILN_CHECK(static_cast<int>(kernel_size.size()) == D && static_cast<int>(output_size.size()) == D, Runtime, op,
             op, ": kernel_size and output_size must have ", D, " elements each, got ", shape_list(kernel_size),
             " and ", shape_list(output_size));
  const bool batched = x.dim() == D + 2;
  for (int64_t d = batched ? 1 : 0; d < x.dim(); ++d)
    KILN_CHECK(x.size(d) > 0, Runtime, op, pre, "Expected input to have non-zero size for non-batch dimensions, "
               "but got", shape_list(x.sizes()), " with dimension ", d, " being empty.");
  const int64_t N = batched ? x.size(0) : 1, C = x.size(batched ? 1 : 0);
  FracGeom g{D, N * C, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}};
  static const char* const names2[] = {"height", "width"};
  static const char* const names3[] = {"time", "height", "width"};
  for (int d = 0; d < D; ++d) {
    const int at = 3 - D + d;
    g.in[at] = x.size(x.dim() - D + d), g.out[at] = output_size[d], g.k[at] = kernel_size[d];
    g.sidx[d] = D == 2 ? 1 - d : d;  // (2-D: the width reads sample 0, the height sample 1)
    const char* what = D == 2 ? names2[d] : names3[d];
    // (torch: the pooled span may end at the input's end in 2-D, must end before it in 3-D)
    const bool fits = D == 2 ? g.out[at] + g.k[at] - 1 <= g.in[at] : g.out[at] + g.k[at] - 1 < g.in[at];
    KILN_CHECK(fits, Runtime, op, pre, "pool ", what, " ", g.k[at], " too large relative to input ", what, " ",
               g.in[at]);
  }
  Tensor s = random_samples;
  if (!s.defined()) {
    s = rand({N, C, D}, TensorOptions(x.dtype()));
  } else {
    KILN_CHECK(s.dim() == 3, Runtime, op, "Expect _random_samples to have 3 dimensions, got ", s.dim());
    KILN_CHECK(s.size(2) == D, Runtime, op, "Expect _random_samples.size(2) equals to ", D, "; got ", s.size(2), ".");
    KILN_CHECK(s.size(1) == C, Runtime, op, "Expect _random_samples.size(1) equals to input channel size.");
    KILN_CHECK(s.size(0) >= N, Runtime, op, "Expect _random_samples.size(0) no less then input batch size.");
    KILN_CHECK(s.dtype() == x.dtype(), Runtime, op, "Expect _random_samples to have the same dtype as input");
  }
  Shape out_shape = x.sizes();
  for (int d = 0; d < D; ++d) out_shape[out_shape.size() - D + d] = output_size[d];
  if (requires_grad(x) && grad_mode_enabled()) {
    TensorList r = D == 2 ? FractionalMaxPool<2>::apply({x, s}, g, op, out_shape)
                          : FractionalMaxPool<3>::apply({x, s}, g, op, out_shape);
    return {r[0], r[1]};
  }
  return frac_compute(g, op, x, s, out_shape);
}

}  // namespace

std::tuple<Tensor, Tensor> fractional_max_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& output_size,
                                                 const Tensor& random_samples) {
  return fractional_max_pool(2, x, kernel_size, output_size, random_samples);
}
std::tuple<Tensor, Tensor> fractional_max_pool3d(const Tensor& x, const Shape& kernel_size, const Shape& output_size,
                                                 const Tensor& random_samples) {
  return fractional_max_pool(3, x, kernel_size, output_size, random_samples);
}

}  // namespace functional

FractionalMaxPoolNd::FractionalMaxPoolNd(std::string name, int64_t nd, IntOrTuple k,
                                         std::optional<IntOrTuple> output_size_,
                                         std::optional<std::vector<double>> output_ratio_, bool return_indices_,
                                         Tensor random_samples)
    : Module(std::move(name)), spatial_dims(nd), return_indices(return_indices_) {
  const char* op = this->name().c_str();
  kernel_size = k.expand(nd, op, "kernel_size");
  KILN_CHECK(output_size_ || output_ratio_, Value, op, this->name(),
             " requires specifying either an output size, or a pooling ratio");
  KILN_CHECK(!(output_size_ && output_ratio_), Value, op, "only one of output_size and output_ratio may be specified");
  if (output_size_) output_size = output_size_->expand(nd, op, "output_size");
  if (output_ratio_) {
    std::vector<double> r = *output_ratio_;
    if (r.size() == 1) r.assign(static_cast<size_t>(nd), r[0]);
    KILN_CHECK(static_cast<int64_t>(r.size()) == nd, Value, op, "output_ratio must have ", nd, " values");
    for (double v : r) {
      std::ostringstream s;
      s << v;
      KILN_CHECK(v > 0 && v < 1, Value, op, "output_ratio must be between 0 and 1 (got ", s.str(), ")");
    }
    output_ratio = r;
  }
  if (random_samples.defined()) register_buffer("_random_samples", random_samples);
}

std::tuple<Tensor, Tensor> FractionalMaxPoolNd::forward_with_indices(const Tensor& x) {
  Shape osz = output_size;
  if (!output_ratio.empty()) {
    osz.resize(static_cast<size_t>(spatial_dims));
    for (int64_t d = 0; d < spatial_dims; ++d)
      osz[d] = static_cast<int64_t>(static_cast<double>(x.size(x.dim() - spatial_dims + d)) * output_ratio[d]);
  }
  const Tensor s = has_buffer("_random_samples") ? buffer("_random_samples") : Tensor();
  if (spatial_dims == 2) return F::fractional_max_pool2d(x, kernel_size, osz, s);
  return F::fractional_max_pool3d(x, kernel_size, osz, s);
}

}  // namespace kiln::nn
