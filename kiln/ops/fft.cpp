// torch.fft: the three table ops torch has (_fft_c2c, _fft_r2c, _fft_c2r: transforms over a list of
// dims with a normalisation mode 0 = none, 1 = 1/sqrt(n), 2 = 1/n), their derivatives (each is
// linear; torch's formulas), and the public functions as composites over them: the dtype promotion,
// the n / s resizing (zero padding or trimming), the norm string and the Hermitian conventions.
#include "kiln/ops/fft.h"

#include <algorithm>
#include <cmath>

#include "kiln/core/visit.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

// torch's maybe_wrap_dim without the scalar allowance: a 0-dim tensor has no dim to transform
int64_t fft_dim(int64_t d, int64_t nd, const char* op) {
  KILN_CHECK(nd > 0, Index, op, "Dimension specified as ", d, " but tensor has no dimensions");
  return wrap_dim(d, nd, op);
}
Shape wrapped_dims(const Shape& dims, int64_t nd, const char* op) {
  Shape r;
  for (int64_t d : dims) r.push_back(fft_dim(d, nd, op));
  return r;
}

// ---- the table ops
// _fft_c2c: complex -> complex, same shape; attrs {dim, normalization, forward}
SpecList c2c_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  KILN_CHECK(is_complex(x.dtype()), Runtime, op.name, "_fft_c2c expects a complex input tensor, but got ",
             dtype_name(x.dtype()));
  wrapped_dims(attr<Shape>(a, 0), x.dim(), op.name);
  return {{x.sizes(), x.dtype()}};
}
// _fft_r2c: real -> complex, dim[-1] halved to n / 2 + 1 when onesided; attrs {dim, normalization, onesided}
SpecList r2c_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  KILN_CHECK(x.dtype() == kFloat32 || x.dtype() == kFloat64, Runtime, op.name,
             "_fft_r2c expects a float32 or float64 input tensor, but got ", dtype_name(x.dtype()));
  Shape dims = wrapped_dims(attr<Shape>(a, 0), x.dim(), op.name);
  KILN_CHECK(!dims.empty(), Runtime, op.name, "_fft_r2c must transform at least one axis");
  SymShape s = x.sizes();
  if (attr<bool>(a, 2)) s[dims.back()] = s[dims.back()] / 2 + 1;
  return {{s, to_complex(x.dtype())}};
}
// _fft_c2r: complex (dim[-1] holding last_dim_size / 2 + 1 values) -> real with dim[-1] = last_dim_size;
// attrs {dim, normalization, last_dim_size}
SpecList c2r_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  KILN_CHECK(is_complex(x.dtype()), Runtime, op.name, "_fft_c2r expects a complex input tensor, but got ",
             dtype_name(x.dtype()));
  Shape dims = wrapped_dims(attr<Shape>(a, 0), x.dim(), op.name);
  KILN_CHECK(!dims.empty(), Runtime, op.name, "_fft_c2r must transform at least one axis");
  const int64_t n = attr<int64_t>(a, 2);
  KILN_CHECK(n >= 1, Runtime, op.name, "Invalid number of data points (", n, ") specified");
  SymShape s = x.sizes();
  const std::optional<int64_t> have = s[dims.back()].maybe_int();  // (FFTW reads n / 2 + 1 of them)
  KILN_CHECK(!have || *have >= n / 2 + 1, Runtime, op.name, "_fft_c2r of ", n, " points needs ", n / 2 + 1,
             " values along dim ", dims.back(), ", but got ", *have);
  s[dims.back()] = n;
  return {{s, to_real(x.dtype())}};
}
OpDef op_fft_c2c{"_fft_c2c", 0, c2c_meta, {}};
OpDef op_fft_r2c{"_fft_r2c", 0, r2c_meta, {}};
OpDef op_fft_c2r{"_fft_c2r", 0, c2r_meta, {}};
OpRegistrar reg_c2c{op_fft_c2c, "_fft_c2c(Tensor self, int[] dim, int normalization, bool forward) -> Tensor"};
OpRegistrar reg_r2c{op_fft_r2c, "_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor"};
OpRegistrar reg_c2r{op_fft_c2r, "_fft_c2r(Tensor self, int[] dim, int normalization, int last_dim_size) -> Tensor"};

Tensor c2c(const Tensor& x, const Shape& dims, int64_t norm, bool forward) {
  return dispatch1(op_fft_c2c, {x}, {dims, norm, forward});
}
Tensor r2c(const Tensor& x, const Shape& dims, int64_t norm, bool onesided) {
  return dispatch1(op_fft_r2c, {x}, {dims, norm, onesided});
}
Tensor c2r(const Tensor& x, const Shape& dims, int64_t norm, int64_t last) {
  return dispatch1(op_fft_c2r, {x}, {dims, norm, last});
}

// d/dx of c2c is c2c the other way with the same normalisation
TensorList c2c_derivative(const GradCtx& ctx, const TensorList& g) {
  return {ctx.needs[0] ? c2c(g[0], attr<Shape>(ctx.attrs, 0), attr<int64_t>(ctx.attrs, 1), !attr<bool>(ctx.attrs, 2))
                       : Tensor()};
}
// r2c: the half spectrum's gradient zero-extended to the full length, transformed back, its real part
TensorList r2c_derivative(const GradCtx& ctx, const TensorList& g) {
  if (!ctx.needs[0]) return {Tensor()};
  const Shape dims = wrapped_dims(attr<Shape>(ctx.attrs, 0), ctx.in_specs[0].dim(), "_fft_r2c");
  Tensor full = g[0];
  const int64_t last = dims.back(), n = ctx.in_specs[0].sizes()[last].raw();
  if (attr<bool>(ctx.attrs, 2) && full.size(last) < n) {
    Shape zs = full.sizes();
    zs[last] = n - full.size(last);
    full = cat({full, zeros(zs, TensorOptions(full.dtype()).device(full.device()))}, last);
  }
  return {real(c2c(full, dims, attr<int64_t>(ctx.attrs, 1), false))};
}
// c2r: r2c of the gradient, the entries that stand for two (a value and its conjugate) doubled
TensorList c2r_derivative(const GradCtx& ctx, const TensorList& g) {
  if (!ctx.needs[0]) return {Tensor()};
  const Shape dims = wrapped_dims(attr<Shape>(ctx.attrs, 0), ctx.in_specs[0].dim(), "_fft_c2r");
  const int64_t last = dims.back();
  Tensor gi = r2c(g[0], dims, attr<int64_t>(ctx.attrs, 1), true);
  const int64_t doubled = g[0].size(last) - gi.size(last);
  if (doubled > 0) {
    Tensor w = ones({gi.size(last)}, TensorOptions(to_real(gi.dtype())).device(gi.device()));
    fill_(narrow(w, 0, 1, doubled), Scalar(2));
    Shape ws(static_cast<size_t>(gi.dim()), 1);
    ws[last] = gi.size(last);
    gi = mul(gi, reshape(w, ws));
  }
  // the input may hold more than last_dim_size / 2 + 1 values along the last dim: those get zero
  const int64_t m = ctx.in_specs[0].sizes()[last].raw();
  if (gi.size(last) < m) {
    Shape zs = gi.sizes();
    zs[last] = m - gi.size(last);
    gi = cat({gi, zeros(zs, TensorOptions(gi.dtype()).device(gi.device()))}, last);
  }
  return {gi};
}
DerivativeRegistrar d_c2c{op_fft_c2c, c2c_derivative, 0, 0};
DerivativeRegistrar d_r2c{op_fft_r2c, r2c_derivative, 0, 0};
DerivativeRegistrar d_c2r{op_fft_c2r, c2r_derivative, 0, 0};

// ---- the public functions' shared steps
// norm string -> normalisation mode for a transform in the given direction (torch's norm_from_string)
int64_t norm_mode(const fft::Norm& norm, bool forward) {
  if (!norm || *norm == "backward") return forward ? 0 : 2;
  if (*norm == "forward") return forward ? 2 : 0;
  if (*norm == "ortho") return 1;
  KILN_CHECK(false, Runtime, "fft", "Invalid normalization mode: \"", *norm, "\"");
  return 0;
}

// torch's promote_tensor_fft: integers and bool to the default float; float16 / bfloat16 refused on
// the CPU; to complex when asked
Tensor promote(const char* op, const Tensor& x, bool require_complex) {
  Dtype d = x.dtype();
  KILN_CHECK(d != kFloat16 && d != kBFloat16 && !is_float8(d), Runtime, op, "Unsupported dtype ",
             d == kFloat16 ? "Half" : d == kBFloat16 ? "BFloat16" : dtype_name(d));
  if (!is_floating(d) && !is_complex(d)) d = default_dtype();
  if (require_complex && !is_complex(d)) d = to_complex(d);
  return d == x.dtype() ? x : to_dtype(x, d);
}

void check_real(const char* op, const Tensor& x) {
  KILN_CHECK(!is_complex(x.dtype()), Runtime, op, op, " expects a real input tensor, but got ",
             shape_detail::torch_type_name(x.dtype()));
}

void check_points(int64_t n) {
  KILN_CHECK(n >= 1, Runtime, "fft", "Invalid number of data points (", n, ") specified");
}

// x zero-padded or trimmed to n along dim
Tensor resize_dim(const Tensor& x, int64_t dim, int64_t n) {
  const int64_t have = x.size(dim);
  if (have == n) return x;
  if (have > n) return narrow(x, dim, 0, n);
  Shape zs = x.sizes();
  zs[dim] = n - have;
  return cat({x, zeros(zs, TensorOptions(x.dtype()).device(x.device()))}, dim);
}

// torch's canonicalize_fft_shape_and_dim_args: the dims (wrapped, unique) and the signal sizes
struct Plan {
  Shape dims, sizes;
};
Plan canonical(const char* op, const Tensor& x, const fft::OptShape& s, const fft::OptShape& dim) {
  Plan p;
  const int64_t nd = x.dim();
  if (dim) {
    p.dims = wrapped_dims(*dim, nd, op);
    Shape sorted = p.dims;
    std::sort(sorted.begin(), sorted.end());
    KILN_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), Runtime, op,
               "FFT dims must be unique");
  }
  if (s) {
    if (dim)
      KILN_CHECK(s->size() == dim->size(), Runtime, op,
                 "When given, dim and shape arguments must have the same length");
    const int64_t ns = static_cast<int64_t>(s->size());
    KILN_CHECK(ns <= nd, Runtime, op, "Got shape with ", ns, " values but input tensor only has ", nd,
               " dimensions.");
    if (!dim)
      for (int64_t i = nd - ns; i < nd; ++i) p.dims.push_back(i);
    for (size_t i = 0; i < s->size(); ++i) {
      const int64_t v = (*s)[i] == -1 ? x.size(p.dims[i]) : (*s)[i];
      check_points(v);
      p.sizes.push_back(v);
    }
  } else {
    if (!dim)
      for (int64_t i = 0; i < nd; ++i) p.dims.push_back(i);
    for (int64_t d : p.dims) {
      check_points(x.size(d));
      p.sizes.push_back(x.size(d));
    }
  }
  return p;
}

Tensor resize(const Tensor& x, const Shape& dims, const Shape& sizes) {
  Tensor r = x;
  for (size_t i = 0; i < dims.size(); ++i) r = resize_dim(r, dims[i], sizes[i]);
  return r;
}

// The complex-to-real n-d plans: the last dim's output length (s[-1], or 2 (m - 1)), the input
// resized to it / 2 + 1 there
Plan c2r_plan(const char* op, const Tensor& x, const fft::OptShape& s, const fft::OptShape& dim, int64_t& last) {
  Plan p = canonical(op, x, s, dim);
  KILN_CHECK(!p.dims.empty(), Runtime, op, op, " must transform at least one axis");
  last = s && (*s).back() != -1 ? p.sizes.back() : 2 * (x.size(p.dims.back()) - 1);
  check_points(last);
  p.sizes.back() = last / 2 + 1;
  return p;
}

int64_t signal_length(const Tensor& x, std::optional<int64_t> n, int64_t dim) {
  const int64_t v = n ? *n : x.size(dim);
  check_points(v);
  return v;
}

}  // namespace

namespace fft {

Tensor fft(const Tensor& x, std::optional<int64_t> n, int64_t dim, const Norm& norm) {
  Tensor t = promote("fft", x, false);
  dim = fft_dim(dim, t.dim(), "fft");
  t = resize_dim(t, dim, signal_length(t, n, dim));
  return is_complex(t.dtype()) ? c2c(t, {dim}, norm_mode(norm, true), true) : r2c(t, {dim}, norm_mode(norm, true), false);
}

Tensor ifft(const Tensor& x, std::optional<int64_t> n, int64_t dim, const Norm& norm) {
  Tensor t = promote("ifft", x, false);
  dim = fft_dim(dim, t.dim(), "ifft");
  t = resize_dim(t, dim, signal_length(t, n, dim));
  if (is_complex(t.dtype())) return c2c(t, {dim}, norm_mode(norm, false), false);
  return conj(r2c(t, {dim}, norm_mode(norm, false), false));
}

Tensor rfft(const Tensor& x, std::optional<int64_t> n, int64_t dim, const Norm& norm) {
  check_real("rfft", x);
  Tensor t = promote("rfft", x, false);
  dim = fft_dim(dim, t.dim(), "rfft");
  t = resize_dim(t, dim, signal_length(t, n, dim));
  return r2c(t, {dim}, norm_mode(norm, true), true);
}

namespace {
// irfft and hfft: a complex half spectrum (n / 2 + 1 values, n defaulting to 2 (m - 1)) to n real
// values; hfft is the forward transform of the conjugate
Tensor c2r_1d(const char* op, const Tensor& x, std::optional<int64_t> n, int64_t dim, const Norm& norm, bool hermitian) {
  Tensor t = promote(op, x, true);
  dim = fft_dim(dim, t.dim(), op);
  const int64_t out = n ? *n : 2 * (t.size(dim) - 1);
  check_points(out);
  t = resize_dim(t, dim, out / 2 + 1);
  return c2r(hermitian ? conj(t) : t, {dim}, norm_mode(norm, hermitian), out);
}
}  // namespace

Tensor irfft(const Tensor& x, std::optional<int64_t> n, int64_t dim, const Norm& norm) {
  return c2r_1d("irfft", x, n, dim, norm, false);
}

Tensor hfft(const Tensor& x, std::optional<int64_t> n, int64_t dim, const Norm& norm) {
  return c2r_1d("hfft", x, n, dim, norm, true);
}

Tensor ihfft(const Tensor& x, std::optional<int64_t> n, int64_t dim, const Norm& norm) {
  check_real("ihfft", x);
  Tensor t = promote("ihfft", x, false);
  dim = fft_dim(dim, t.dim(), "ihfft");
  t = resize_dim(t, dim, signal_length(t, n, dim));
  return conj(r2c(t, {dim}, norm_mode(norm, false), true));
}

Tensor fftn(const Tensor& x, const OptShape& s, const OptShape& dim, const Norm& norm) {
  Tensor t = promote("fftn", x, true);
  Plan p = canonical("fftn", t, s, dim);
  t = resize(t, p.dims, p.sizes);
  return p.dims.empty() ? clone(t) : c2c(t, p.dims, norm_mode(norm, true), true);
}

Tensor ifftn(const Tensor& x, const OptShape& s, const OptShape& dim, const Norm& norm) {
  Tensor t = promote("ifftn", x, true);
  Plan p = canonical("ifftn", t, s, dim);
  t = resize(t, p.dims, p.sizes);
  return p.dims.empty() ? clone(t) : c2c(t, p.dims, norm_mode(norm, false), false);
}

Tensor rfftn(const Tensor& x, const OptShape& s, const OptShape& dim, const Norm& norm) {
  check_real("rfftn", x);
  Tensor t = promote("rfftn", x, false);
  Plan p = canonical("rfftn", t, s, dim);
  KILN_CHECK(!p.dims.empty(), Runtime, "rfftn", "rfftn must transform at least one axis");
  t = resize(t, p.dims, p.sizes);
  return r2c(t, p.dims, norm_mode(norm, true), true);
}

Tensor irfftn(const Tensor& x, const OptShape& s, const OptShape& dim, const Norm& norm) {
  Tensor t = promote("irfftn", x, true);
  int64_t last = 0;
  Plan p = c2r_plan("irfftn", t, s, dim, last);
  t = resize(t, p.dims, p.sizes);
  return c2r(t, p.dims, norm_mode(norm, false), last);
}

Tensor hfftn(const Tensor& x, const OptShape& s, const OptShape& dim, const Norm& norm) {
  Tensor t = promote("hfftn", x, true);
  int64_t last = 0;
  Plan p = c2r_plan("hfftn", t, s, dim, last);
  t = resize(t, p.dims, p.sizes);
  const int64_t mode = norm_mode(norm, true);
  if (p.dims.size() > 1) t = c2c(t, Shape(p.dims.begin(), p.dims.end() - 1), mode, true);
  return c2r(conj(t), {p.dims.back()}, mode, last);
}

Tensor ihfftn(const Tensor& x, const OptShape& s, const OptShape& dim, const Norm& norm) {
  check_real("ihfftn", x);
  Tensor t = promote("ihfftn", x, false);
  Plan p = canonical("ihfftn", t, s, dim);
  KILN_CHECK(!p.dims.empty(), Runtime, "ihfftn", "ihfftn must transform at least one axis");
  t = resize(t, p.dims, p.sizes);
  const int64_t mode = norm_mode(norm, false);
  Tensor r = conj(r2c(t, {p.dims.back()}, mode, true));
  if (p.dims.size() == 1) return r;
  return c2c(r, Shape(p.dims.begin(), p.dims.end() - 1), mode, false);
}

Tensor fft2(const Tensor& x, const OptShape& s, const Shape& dim, const Norm& norm) { return fftn(x, s, dim, norm); }
Tensor ifft2(const Tensor& x, const OptShape& s, const Shape& dim, const Norm& norm) { return ifftn(x, s, dim, norm); }
Tensor rfft2(const Tensor& x, const OptShape& s, const Shape& dim, const Norm& norm) { return rfftn(x, s, dim, norm); }
Tensor irfft2(const Tensor& x, const OptShape& s, const Shape& dim, const Norm& norm) { return irfftn(x, s, dim, norm); }
Tensor hfft2(const Tensor& x, const OptShape& s, const Shape& dim, const Norm& norm) { return hfftn(x, s, dim, norm); }
Tensor ihfft2(const Tensor& x, const OptShape& s, const Shape& dim, const Norm& norm) { return ihfftn(x, s, dim, norm); }

namespace {
Dtype freq_dtype(const char* op, TensorOptions o) {
  const Dtype d = o.dtype_or_default();
  if (is_complex(d)) raise_dtype_unsupported(op, d);
  KILN_CHECK(is_floating(d), Runtime, op, op, " requires a floating point dtype, got ", dtype_name(d));
  return d;
}
}  // namespace

Tensor fftfreq(int64_t n, double d, TensorOptions o) {
  const Dtype dt = freq_dtype("fftfreq", o);
  KILN_CHECK(n >= 0, Runtime, "fftfreq", "fftfreq: n must be non-negative, got ", n);
  Tensor r = arange(Scalar(n), o.dtype(dt));
  const int64_t half = (n + 1) / 2;  // [0, ..., (n - 1) / 2] then [-(n / 2), ..., -1]
  if (n > half) r = cat({narrow(r, 0, 0, half), sub(narrow(r, 0, half, n - half), Scalar(n))}, 0);
  return mul(r, Scalar(1.0 / (static_cast<double>(n) * d)));
}

Tensor rfftfreq(int64_t n, double d, TensorOptions o) {
  const Dtype dt = freq_dtype("rfftfreq", o);
  return mul(arange(Scalar(n / 2 + 1), o.dtype(dt)), Scalar(1.0 / (static_cast<double>(n) * d)));
}

namespace {
Tensor shift(const Tensor& x, const OptShape& dim, bool inverse) {
  Shape dims;
  if (dim) dims = wrapped_dims(*dim, x.dim(), inverse ? "ifftshift" : "fftshift");
  else
    for (int64_t i = 0; i < x.dim(); ++i) dims.push_back(i);
  Shape shifts;
  for (int64_t d : dims) shifts.push_back(inverse ? (x.size(d) + 1) / 2 : x.size(d) / 2);
  KILN_CHECK(!dims.empty(), Runtime, "roll", "`shifts` required");
  return roll(x, shifts, dims);
}
}  // namespace

Tensor fftshift(const Tensor& x, const OptShape& dim) { return shift(x, dim, false); }
Tensor ifftshift(const Tensor& x, const OptShape& dim) { return shift(x, dim, true); }

}  // namespace fft

// ---- schemas (torch's fft_* names; kiln.fft binds them without the prefix)
namespace {
std::optional<int64_t> opt_int(const Attrs& a, size_t i) { return opt_attr<int64_t>(a, i); }
fft::Norm opt_str(const Attrs& a, size_t i) { return opt_attr<std::string>(a, i); }

#define KILN_FFT_1D(name)                                                                                      \
  Composite c_fft_##name{"fft_" #name "(Tensor self, SymInt? n=None, int dim=-1, str? norm=None) -> Tensor",   \
                         [](const TensorList& in, const Attrs& a) -> TensorList {                              \
                           return {fft::name(in[0], opt_int(a, 0), attr<int64_t>(a, 1), opt_str(a, 2))};       \
                         },                                                                                    \
                         kFunctionVariant};
#define KILN_FFT_2D(name)                                                                                      \
  Composite c_fft_##name{"fft_" #name "(Tensor self, SymInt[1]? s=None, int[1] dim=[-2,-1], str? norm=None) -> Tensor", \
                         [](const TensorList& in, const Attrs& a) -> TensorList {                              \
                           return {fft::name(in[0], opt_attr<Shape>(a, 0), attr<Shape>(a, 1), opt_str(a, 2))}; \
                         },                                                                                    \
                         kFunctionVariant};
#define KILN_FFT_ND(name)                                                                                      \
  Composite c_fft_##name{"fft_" #name "(Tensor self, SymInt[1]? s=None, int[1]? dim=None, str? norm=None) -> Tensor", \
                         [](const TensorList& in, const Attrs& a) -> TensorList {                              \
                           return {fft::name(in[0], opt_attr<Shape>(a, 0), opt_attr<Shape>(a, 1), opt_str(a, 2))}; \
                         },                                                                                    \
                         kFunctionVariant};
KILN_FFT_1D(fft) KILN_FFT_1D(ifft) KILN_FFT_1D(rfft) KILN_FFT_1D(irfft) KILN_FFT_1D(hfft) KILN_FFT_1D(ihfft)
KILN_FFT_2D(fft2) KILN_FFT_2D(ifft2) KILN_FFT_2D(rfft2) KILN_FFT_2D(irfft2) KILN_FFT_2D(hfft2) KILN_FFT_2D(ihfft2)
KILN_FFT_ND(fftn) KILN_FFT_ND(ifftn) KILN_FFT_ND(rfftn) KILN_FFT_ND(irfftn) KILN_FFT_ND(hfftn) KILN_FFT_ND(ihfftn)
#undef KILN_FFT_1D
#undef KILN_FFT_2D
#undef KILN_FFT_ND

Composite c_fftfreq{"fft_fftfreq(int n, float d=1.0, *, ScalarType? dtype=None, Device? device=None, "
                    "bool requires_grad=False) -> Tensor",
                    [](const TensorList&, const Attrs& a) -> TensorList {
                      return factory_result(fft::fftfreq(attr<int64_t>(a, 0), attr<double>(a, 1), options_attr(a, 2)),
                                            a, 4);
                    },
                    kFunctionVariant};
Composite c_rfftfreq{"fft_rfftfreq(int n, float d=1.0, *, ScalarType? dtype=None, Device? device=None, "
                     "bool requires_grad=False) -> Tensor",
                     [](const TensorList&, const Attrs& a) -> TensorList {
                       return factory_result(fft::rfftfreq(attr<int64_t>(a, 0), attr<double>(a, 1), options_attr(a, 2)),
                                             a, 4);
                     },
                     kFunctionVariant};
Composite c_fftshift{"fft_fftshift(Tensor self, int[1]? dim=None) -> Tensor",
                     [](const TensorList& in, const Attrs& a) -> TensorList {
                       return {fft::fftshift(in[0], opt_attr<Shape>(a, 0))};
                     },
                     kFunctionVariant};
Composite c_ifftshift{"fft_ifftshift(Tensor self, int[1]? dim=None) -> Tensor",
                      [](const TensorList& in, const Attrs& a) -> TensorList {
                        return {fft::ifftshift(in[0], opt_attr<Shape>(a, 0))};
                      },
                      kFunctionVariant};
}  // namespace

}  // namespace kiln
