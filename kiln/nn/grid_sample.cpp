// torch.nn.functional.affine_grid and grid_sample (bilinear / nearest / bicubic; zeros, border and
// reflection padding; 4-d and 5-d inputs) as composites of table ops written as torch's CPU kernel
// computes them: source coordinates unnormalised from [-1, 1], padded (clip or reflect), corner
// values gathered from the flattened input and weighted. Their gradients (input and grid) are
// autograd's through those ops, which match torch's analytic ones away from the measure-zero points
// where a coordinate lands exactly on a clip boundary.
#include <cmath>

#include "kiln/core/format.h"
#include "kiln/nn/functional.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/shape.h"

namespace kiln::nn::functional {
namespace {

// linspace over [-1, 1] shrunk to pixel centres when not align_corners (torch's
// linspace_from_neg_one)
Tensor from_neg_one(const Tensor& theta, int64_t n, bool align) {
  if (n <= 1) return zeros({1}, TensorOptions(theta.dtype()));
  Tensor r = linspace(-1, 1, n, TensorOptions(theta.dtype()));
  return align ? r : mul(r, Scalar(static_cast<double>(n - 1) / static_cast<double>(n)));
}

// grid coordinate in [-1, 1] -> source pixel coordinate
Tensor unnormalize(const Tensor& c, int64_t size, bool align) {
  if (align) return mul(add(c, Scalar(1)), Scalar((size - 1) / 2.0));
  return true_divide(sub(mul(add(c, Scalar(1)), Scalar(static_cast<double>(size))), Scalar(1)), Scalar(2));
}
Tensor clip(const Tensor& c, int64_t size) {
  return clamp(c, Scalar(0), Scalar(static_cast<double>(size - 1)));
}
// torch's reflect_coordinates over [twice_low / 2, twice_high / 2]
Tensor reflect(const Tensor& c, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return zeros_like(c);
  double lo = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
  Tensor in = abs(sub(c, Scalar(lo)));
  Tensor extra = fmod(in, Scalar(span));
  Tensor flips = floor(true_divide(in, Scalar(span)));
  Tensor even = eq(remainder(flips, Scalar(2)), Scalar(0));
  return where(even, add(extra, Scalar(lo)), add(rsub(extra, Scalar(span)), Scalar(lo)));
}
Tensor pad_coordinate(const Tensor& c, int64_t size, const std::string& padding, bool align) {
  if (padding == "border") return clip(c, size);
  if (padding == "reflection") {
    Tensor r = align ? reflect(c, 0, 2 * (size - 1)) : reflect(c, -1, 2 * size - 1);
    return clip(r, size);
  }
  return c;
}

// Sampling the flattened input (N, C, S) at integer coordinates (one (N, P) tensor per spatial dim,
// width first), weighted; out-of-range taps count zero.
struct Sampler {
  Tensor flat;         // (N, C, S)
  Shape sizes;         // spatial sizes, width first
  int64_t N, C, P;
  Tensor at(const std::vector<Tensor>& idx, const Tensor& weight) const {
    Tensor valid, lin;
    int64_t stride = 1;
    for (size_t k = 0; k < idx.size(); ++k) {
      Tensor ok = logical_and(ge(idx[k], Scalar(0)), lt(idx[k], Scalar(sizes[k])));
      valid = valid.defined() ? logical_and(valid, ok) : ok;
      Tensor term = mul(clamp(idx[k], Scalar(0), Scalar(sizes[k] - 1)), Scalar(stride));
      lin = lin.defined() ? add(lin, term) : term;
      stride *= sizes[k];
    }
    Tensor g = gather(flat, 2, expand(reshape(lin, {N, 1, P}), {N, C, P}));
    Tensor w = where(valid, weight, zeros_like(weight));
    return mul(g, reshape(w, {N, 1, P}));
  }
};

// Keys' cubic convolution weights, A = -0.75
std::vector<Tensor> cubic_weights(const Tensor& t) {
  const double a = -0.75;
  Tensor x1 = add(t, Scalar(1)), x2 = rsub(t, Scalar(1)), x3 = rsub(t, Scalar(2));
  auto far = [&](const Tensor& x) {  // ((a x - 5a) x + 8a) x - 4a
    return sub(mul(add(mul(sub(mul(x, Scalar(a)), Scalar(5 * a)), x), Scalar(8 * a)), x), Scalar(4 * a));
  };
  auto near = [&](const Tensor& x) {  // ((a + 2) x - (a + 3)) x x + 1
    return add(mul(mul(sub(mul(x, Scalar(a + 2)), Scalar(a + 3)), x), x), Scalar(1));
  };
  return {far(x1), near(t), near(x2), far(x3)};
}

}  // namespace

Tensor affine_grid(const Tensor& theta, const Shape& size, bool align_corners) {
  const char* op = "affine_grid";
  KILN_CHECK(is_floating(theta.dtype()), Value, op, "Expected theta to have floating point type, but got ",
             dtype_name(theta.dtype()));
  KILN_CHECK(size.size() == 4 || size.size() == 5, NotImplemented, op,
             "affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, respectively. Got size ",
             size, ".");
  const bool two = size.size() == 4;
  KILN_CHECK(theta.dim() == 3 && theta.size(1) == (two ? 2 : 3) && theta.size(2) == (two ? 3 : 4), Value, op,
             "Expected a batch of ", two ? "2D affine matrices of shape Nx2x3" : "3D affine matrices of shape Nx3x4",
             " for size ", size, ". Got ", theta.sizes(), ".");
  int64_t mn = size[0];
  for (int64_t v : size) mn = std::min(mn, v);
  KILN_CHECK(mn > 0, Value, op, "Expected non-zero, positive output size. Got ", size);
  KILN_CHECK(theta.size(0) == size[0], Runtime, op, "affine_grid_generator: theta batch ", theta.size(0),
             " does not match size ", size);
  const int64_t N = size[0], nd = two ? 2 : 3;
  Shape sp(size.begin() + 2, size.end());  // (D,) H, W
  // base grid (*sp, nd + 1): x varies along W, y along H, z along D, then 1
  std::vector<Tensor> cols;
  for (int64_t k = 0; k < nd; ++k) {
    int64_t dim = nd - 1 - k;  // x -> last spatial dim
    Tensor r = from_neg_one(theta, sp[dim], align_corners);
    Shape view(nd, 1);
    view[dim] = sp[dim];
    cols.push_back(expand(reshape(r, view), sp));
  }
  cols.push_back(ones(sp, TensorOptions(theta.dtype())));
  Tensor base = reshape(stack(TensorList(cols.begin(), cols.end()), -1), {1, -1, nd + 1});
  Tensor grid = bmm(expand(base, {N, base.size(1), nd + 1}), transpose(theta, 1, 2));
  Shape out{N};
  out.insert(out.end(), sp.begin(), sp.end());
  out.push_back(nd);
  return reshape(grid, out);
}

Tensor grid_sample(const Tensor& input, const Tensor& grid, const std::string& mode,
                   const std::string& padding_mode, bool align_corners) {
  const char* op = "grid_sampler";
  KILN_CHECK(mode == "bilinear" || mode == "nearest" || mode == "bicubic", Value, "grid_sample",
             "nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: '",
             mode, "'");
  KILN_CHECK(padding_mode == "zeros" || padding_mode == "border" || padding_mode == "reflection", Value,
             "grid_sample",
             "nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or 'reflection', "
             "but got: '", padding_mode, "'");
  KILN_CHECK(input.dtype() == grid.dtype(), Runtime, op,
             "grid_sampler(): expected input and grid to have same dtype, but input has ",
             dtype_name(input.dtype()), " and grid has ", dtype_name(grid.dtype()));
  KILN_CHECK((input.dim() == 4 || input.dim() == 5) && input.dim() == grid.dim(), Runtime, op,
             "grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but got input "
             "with sizes ", input.sizes(), " and grid with sizes ", grid.sizes());
  const int64_t nd = input.dim() - 2;
  KILN_CHECK(input.size(0) == grid.size(0), Runtime, op,
             "grid_sampler(): expected grid and input to have same batch size, but got input with sizes ",
             input.sizes(), " and grid with sizes ", grid.sizes());
  KILN_CHECK(grid.size(-1) == nd, Runtime, op, "grid_sampler(): expected grid to have size ", nd,
             " in last dimension, but got grid with sizes ", grid.sizes());
  for (int64_t i = 2; i < input.dim(); ++i)
    KILN_CHECK(input.size(i) > 0, Runtime, op,
               "grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes ",
               input.sizes(), " with dimension ", i, " being empty");
  KILN_CHECK(mode != "bicubic" || nd == 2, Runtime, op, "grid_sampler(): bicubic interpolation only supports 4D input");
  KILN_CHECK(is_floating(input.dtype()), NotImplemented, op, "\"grid_sampler_", nd, "d_cpu\" not implemented for '",
             dtype_name(input.dtype()), "'");
  const int64_t N = input.size(0), C = input.size(1);
  Shape out_sp(grid.sizes().begin() + 1, grid.sizes().end() - 1);
  int64_t P = 1;
  for (int64_t v : out_sp) P *= v;
  Shape out{N, C};
  out.insert(out.end(), out_sp.begin(), out_sp.end());
  if (N == 0 || C == 0 || P == 0) return zeros(out, TensorOptions(input.dtype()));

  Sampler s{reshape(input, {N, C, -1}), {}, N, C, P};
  std::vector<Tensor> raw;  // unnormalised source coordinates (N, P), width first
  for (int64_t k = 0; k < nd; ++k) {
    int64_t size = input.size(input.dim() - 1 - k);
    s.sizes.push_back(size);
    raw.push_back(unnormalize(reshape(select(grid, -1, k), {N, P}), size, align_corners));
  }
  Tensor y;
  auto accumulate = [&](const Tensor& t) { y = y.defined() ? add(y, t) : t; };
  if (mode == "bicubic") {
    // taps at floor - 1 .. floor + 2, each padded on its own (torch's get_value_bounded)
    std::vector<Tensor> base, w[2];
    for (int k = 0; k < 2; ++k) {
      Tensor f = floor(raw[k]);
      base.push_back(f);
      auto ws = cubic_weights(sub(raw[k], f));
      w[k].assign(ws.begin(), ws.end());
    }
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 4; ++i) {
        std::vector<Tensor> idx;
        for (int k = 0; k < 2; ++k) {
          Tensor c = add(base[k], Scalar((k == 0 ? i : j) - 1));
          idx.push_back(pad_coordinate(c, s.sizes[k], padding_mode, align_corners).to(kInt64));
        }
        accumulate(s.at(idx, mul(w[0][i], w[1][j])));
      }
    return reshape(y, out);
  }
  std::vector<Tensor> c;
  for (int64_t k = 0; k < nd; ++k) c.push_back(pad_coordinate(raw[k], s.sizes[k], padding_mode, align_corners));
  if (mode == "nearest") {
    std::vector<Tensor> idx;
    for (const Tensor& v : c) idx.push_back(round(v).to(kInt64));
    // weight 1, tied to the grid so that the grid gets torch's zero gradient rather than none
    Tensor w = ones_like(c[0]);
    for (const Tensor& v : c) {
      Tensor d = sub(v, v.detach());
      w = add(w, mul(where(isfinite(d), d, zeros_like(d)), Scalar(0)));
    }
    return reshape(s.at(idx, w), out);
  }
  // bilinear / trilinear: 2^nd corners
  std::vector<Tensor> lo, frac;
  for (const Tensor& v : c) {
    Tensor f = floor(v);
    lo.push_back(f);
    frac.push_back(sub(v, f));
  }
  for (int corner = 0; corner < (1 << nd); ++corner) {
    std::vector<Tensor> idx;
    Tensor w;
    for (int64_t k = 0; k < nd; ++k) {
      bool hi = (corner >> k) & 1;
      idx.push_back((hi ? add(lo[k], Scalar(1)) : lo[k]).to(kInt64));
      Tensor wk = hi ? frac[k] : rsub(frac[k], Scalar(1));
      w = w.defined() ? mul(w, wk) : wk;
    }
    accumulate(s.at(idx, w));
  }
  return reshape(y, out);
}

}  // namespace kiln::nn::functional
