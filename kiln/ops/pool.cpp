// Pooling (max with indices, average, adaptive average and max; 1-, 2- and 3-d) and upsampling (nearest, linear /
// bilinear): each a table op over batched (N, C, [H,] W) inputs with a backward table op and the
// derivatives of both: the op-table entries, schemas, metas, derivatives and front ends (the CPU
// kernels are kiln/backend/cpu/pool.cpp's; what both read is pool_detail.h). Index and weight
// rules follow torch's CPU kernels (pooling_output_shape, start/end_index, nearest_idx,
// area_pixel_compute_source_index) so results agree bit for bit where the arithmetic allows.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/ops/nn_detail.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/nn_ops.h"
#include "kiln/ops/pool_detail.h"

namespace kiln {
namespace {

using namespace nn_detail;
using namespace pool_detail;

// ---- max_pool: {input} -> {values, indices}; attrs {kernel, stride, padding, dilation, ceil_mode}
SpecList max_pool_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  SymShape out = pool_shape("max_pool", in[0].sizes(), attr<Shape>(a, 0), attr<Shape>(a, 1),
                         attr<Shape>(a, 2), attr<Shape>(a, 3), attr<bool>(a, 4));
  return {{out, in[0].dtype()}, {out, kInt64}};
}
OpDef op_max_pool{"max_pool", 0, max_pool_meta, {}};
OpRegistrar reg_max_pool{op_max_pool, "max_pool(Tensor self, int[] kernel_size, int[] stride, int[] padding, int[] dilation, bool ceil_mode) -> (Tensor, Tensor)"};

// ---- max_pool_backward: {grad, indices} -> grad_input; attrs {input_size} -----------------------
SpecList max_pool_bw_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const SymShape is = attr_sym_shape(a, 0);
  KILN_CHECK(in[0].sizes() == in[1].sizes() && in[1].dtype() == kInt64 &&
                 in[0].dim() == static_cast<int64_t>(is.size()) &&
                 is.size() >= 3 && is.size() <= 5 && in[0].sizes()[0] == is[0] &&
                 in[0].sizes()[1] == is[1],
             Runtime, "max_pool_backward", "grad ", in[0].sizes(), " and int64 indices ",
             in[1].sizes(), " must match, with the input size ", is);
  return {{is, in[0].dtype()}};
}
OpDef op_max_pool_bw{"max_pool_backward", 0, max_pool_bw_meta, {}};
OpRegistrar reg_max_pool_bw{op_max_pool_bw, "max_pool_backward(Tensor grad_output, Tensor indices, int[] input_size) -> Tensor"};

Tensor max_pool_backward(const Tensor& grad, const Tensor& indices, const Shape& input_size) {
  return dispatch1(op_max_pool_bw, {grad, indices}, {input_size});
}
TensorList max_pool_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0]) r[0] = max_pool_backward(grad[0], ctx.out[1], ctx.in_specs[0].raw_sizes());
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
SpecList avg_pool_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  return {{avg_shape(in[0].sizes(), avg_args(a, 0)), in[0].dtype()}};
}
OpDef op_avg_pool{"avg_pool", 0, avg_pool_meta, {}};
OpRegistrar reg_avg_pool{op_avg_pool, "avg_pool(Tensor self, int[] kernel_size, int[] stride, int[] padding, bool ceil_mode, bool count_include_pad, int divisor_override) -> Tensor"};

SpecList avg_pool_bw_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const SymShape is = attr_sym_shape(a, 0);
  KILN_CHECK(avg_shape(is, avg_args(a, 1)) == in[0].sizes(), Runtime, "avg_pool_backward",
             "grad of size ", in[0].sizes(), " does not match the pooled input size ", is);
  return {{is, in[0].dtype()}};
}
OpDef op_avg_pool_bw{"avg_pool_backward", 0, avg_pool_bw_meta, {}};
OpRegistrar reg_avg_pool_bw{op_avg_pool_bw, "avg_pool_backward(Tensor grad_output, int[] input_size, int[] kernel_size, int[] stride, int[] padding, bool ceil_mode, bool count_include_pad, int divisor_override) -> Tensor"};

TensorList avg_pool_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0]) {
    Attrs a{ctx.in_specs[0].raw_sizes()};
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

SymShape adaptive_shape(const char* op, const TensorSpec& x, const Attrs& a) {
  const SymShape os = attr_sym_shape(a, 0);
  int64_t nsp = static_cast<int64_t>(os.size());
  KILN_CHECK(nsp >= 1 && nsp <= 3 && x.dim() == nsp + 2, Runtime, op,
             "expected a batched input with ", nsp, " spatial dims, got input of size ", x.sizes());
  for (SymInt v : os)
    KILN_CHECK(v >= 0, Runtime, op,
               "elements of output_size must be greater than or equal to 0 but received ", os);
  for (int64_t i = 2; i < x.dim(); ++i)
    KILN_CHECK(x.sizes()[i] > 0, Runtime, op,
               "Expected input to have non-zero size for non-batch dimensions, but "
               "input has sizes ",
               x.sizes(), " with dimension ", i, " being empty");
  SymShape out{x.sizes()[0], x.sizes()[1]};
  out.insert(out.end(), os.begin(), os.end());
  return out;
}
SpecList adaptive_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  return {{adaptive_shape(op.name, in[0], a), in[0].dtype()}};
}
OpDef op_adaptive{"adaptive_avg_pool", 0, adaptive_meta, {}};
OpRegistrar reg_adaptive{op_adaptive, "adaptive_avg_pool(Tensor self, int[] output_size) -> Tensor"};

SpecList adaptive_bw_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const SymShape is = attr_sym_shape(a, 0);
  KILN_CHECK(is.size() >= 3 && is.size() <= 5 && in[0].dim() == static_cast<int64_t>(is.size()) &&
                 in[0].sizes()[0] == is[0] && in[0].sizes()[1] == is[1],
             Runtime, "adaptive_avg_pool_backward", "grad of size ", in[0].sizes(),
             " does not match input size ", is);
  return {{is, in[0].dtype()}};
}
OpDef op_adaptive_bw{
    "adaptive_avg_pool_backward", 0, adaptive_bw_meta, {}};
OpRegistrar reg_adaptive_bw{op_adaptive_bw, "adaptive_avg_pool_backward(Tensor grad_output, int[] input_size) -> Tensor"};

TensorList adaptive_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0]) r[0] = dispatch1(op_adaptive_bw, {grad[0]}, {ctx.in_specs[0].raw_sizes()});
  return r;
}
DerivativeRegistrar d_adaptive{op_adaptive, adaptive_derivative, 0, 0};
TensorList adaptive_bw_derivative(const GradCtx& ctx, const TensorList& grad) {
  TensorList r(1);
  if (ctx.needs[0]) r[0] = dispatch1(op_adaptive, {grad[0]}, {spatial(ctx.in_specs[0].raw_sizes())});
  return r;
}
DerivativeRegistrar d_adaptive_bw{op_adaptive_bw, adaptive_bw_derivative, 0, 0};

// ---- adaptive_max_pool: {input} -> {values, indices}; attrs {output_size}. Its backward is
// max_pool_backward (a scatter by the indices).
SpecList adaptive_max_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  SymShape out = adaptive_shape(op.name, in[0], a);
  return {{out, in[0].dtype()}, {out, kInt64}};
}
OpDef op_adaptive_max{"adaptive_max_pool", 0, adaptive_max_meta, {}};
OpRegistrar reg_adaptive_max{op_adaptive_max, "adaptive_max_pool(Tensor self, int[] output_size) -> (Tensor, Tensor)"};
DerivativeRegistrar d_adaptive_max{op_adaptive_max, max_pool_derivative, 0, 0b10};

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
void check_3d(const char* op, const char* name, const Shape& v, bool allow_empty = false) {
  KILN_CHECK(v.size() == 1 || v.size() == 3 || (allow_empty && v.empty()), Runtime, op, op, ": ",
             name,
             allow_empty ? " must either be omitted, a single int, or a tuple of three ints"
                         : " must either be a single int, or a tuple of three ints");
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

std::tuple<Tensor, Tensor> max_pool3d_with_indices(const Tensor& x, const Shape& k, const Shape& s,
                                                   const Shape& p, const Shape& d, bool ceil_mode) {
  const char* op = "max_pool3d";
  check_3d(op, "kernel_size", k);
  check_3d(op, "stride", s, true);
  check_3d(op, "padding", p);
  check_3d(op, "dilation", d);
  KILN_CHECK(x.dim() == 4 || x.dim() == 5, Runtime, op,
             "non-empty 4D or 5D (batch mode) tensor expected for input");
  return max_pool_nd(op, 3, x, k, s, p, d, ceil_mode);
}
Tensor max_pool3d(const Tensor& x, const Shape& k, const Shape& s, const Shape& p, const Shape& d,
                  bool ceil_mode) {
  return std::get<0>(max_pool3d_with_indices(x, k, s, p, d, ceil_mode));
}

Tensor avg_pool3d(const Tensor& x, const Shape& k, const Shape& s, const Shape& p, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  const char* op = "avg_pool3d";
  check_3d(op, "kernel_size", k);
  check_3d(op, "stride", s, true);
  check_3d(op, "padding", p);
  KILN_CHECK(!divisor_override || *divisor_override != 0, Runtime, op, "divisor must be not zero");
  KILN_CHECK(x.dim() == 4 || x.dim() == 5, Runtime, op,
             "non-empty 4D or 5D (batch mode) tensor expected for input");
  Shape K = expand_to(k, 3), S = s.empty() ? K : expand_to(s, 3);
  return batched_call(
      op_avg_pool, x, 3,
      {K, S, expand_to(p, 3), ceil_mode, count_include_pad, divisor_override.value_or(0)})[0];
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

Tensor adaptive_avg_pool3d(const Tensor& x, const Shape& size) {
  const char* op = "adaptive_avg_pool3d";
  Shape output_size = expand_to(size, 3);
  KILN_CHECK(output_size.size() == 3, Runtime, op, "adaptive_avg_pool3d: output_size must be 3");
  for (int64_t v : output_size)
    KILN_CHECK(v >= 0, Runtime, op,
               "adaptive_avg_pool3d: elements of output_size must be greater than or equal to 0 "
               "but received ", output_size);
  KILN_CHECK(x.dim() == 4 || x.dim() == 5, Runtime, op,
             "adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got ", x.sizes());
  return batched_call(op_adaptive, x, 3, {output_size})[0];
}

namespace {
std::tuple<Tensor, Tensor> adaptive_max_nd(const char* op, int64_t nsp, const Tensor& x, const Shape& size) {
  Shape output_size = expand_to(size, nsp);
  KILN_CHECK(static_cast<int64_t>(output_size.size()) == nsp, Runtime, op, op,
             "(): internal error: output_size.size() must be ", nsp);
  KILN_CHECK(x.dim() == nsp + 1 || x.dim() == nsp + 2, Runtime, op, op, "(): Expected ", nsp + 1,
             "D or ", nsp + 2, "D tensor, but got: ", x.sizes());
  for (int64_t v : output_size)
    KILN_CHECK(v >= 0, Runtime, op, op, "(): elements of output_size must be greater than or equal to 0 but received ",
               output_size);
  for (int64_t i = x.dim() - nsp; i < x.dim(); ++i)
    KILN_CHECK(x.sizes()[i] > 0, Runtime, op, op,
               "(): Expected input to have non-zero size for non-batch dimensions, but input has sizes ",
               x.sizes(), " with dimension ", i, " being empty");
  TensorList r = batched_call(op_adaptive_max, x, nsp, {output_size});
  return {r[0], r[1]};
}
}  // namespace

std::tuple<Tensor, Tensor> adaptive_max_pool1d(const Tensor& x, const Shape& output_size) {
  check_1d("adaptive_max_pool1d", "output_size", output_size);
  return adaptive_max_nd("adaptive_max_pool1d", 1, x, output_size);
}
std::tuple<Tensor, Tensor> adaptive_max_pool2d(const Tensor& x, const Shape& output_size) {
  return adaptive_max_nd("adaptive_max_pool2d", 2, x, output_size);
}
std::tuple<Tensor, Tensor> adaptive_max_pool3d(const Tensor& x, const Shape& output_size) {
  return adaptive_max_nd("adaptive_max_pool3d", 3, x, output_size);
}

// ---- composites with torch's schemas (ops/composite.h): their public forms come from these -------
namespace {
const Shape& ints_at(const Attrs& a, size_t i) { return attr<Shape>(a, i); }
// stride=[] (or None): the kernel size, as torch
#define KILN_MAX_POOL(n)                                                                                          \
  Composite c_max_pool##n##d{"max_pool" #n "d(Tensor self, int[" #n "] kernel_size, int[" #n "] stride=[], "          \
                             "int[" #n "] padding=0, int[" #n "] dilation=1, bool ceil_mode=False) -> Tensor",     \
                             [](const TensorList& in, const Attrs& a) -> TensorList {                             \
                               return {max_pool##n##d(in[0], ints_at(a, 0), ints_at(a, 1), ints_at(a, 2),         \
                                                      ints_at(a, 3), attr<bool>(a, 4))};                          \
                             },                                                                                   \
                             kFunctionVariant};                                                                   \
  Composite c_max_pool##n##d_wi{"max_pool" #n "d_with_indices(Tensor self, int[" #n "] kernel_size, int[" #n "] stride=[], " \
                                "int[" #n "] padding=0, int[" #n "] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)", \
                                [](const TensorList& in, const Attrs& a) -> TensorList {                          \
                                  auto [y, i] = max_pool##n##d_with_indices(in[0], ints_at(a, 0), ints_at(a, 1),   \
                                                                            ints_at(a, 2), ints_at(a, 3),         \
                                                                            attr<bool>(a, 4));                    \
                                  return {y, i};                                                                  \
                                },                                                                                \
                                kFunctionVariant};
KILN_MAX_POOL(1)
KILN_MAX_POOL(2)
KILN_MAX_POOL(3)
#undef KILN_MAX_POOL
Composite c_avg_pool3d{"avg_pool3d(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, "
                       "bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor",
                       [](const TensorList& in, const Attrs& a) -> TensorList {
                         return {avg_pool3d(in[0], ints_at(a, 0), ints_at(a, 1), ints_at(a, 2), attr<bool>(a, 3),
                                            attr<bool>(a, 4), opt_attr<int64_t>(a, 5))};
                       },
                       kFunctionVariant};
Composite c_adaptive_avg_pool3d{"adaptive_avg_pool3d(Tensor self, SymInt[3] output_size) -> Tensor",
                                [](const TensorList& in, const Attrs& a) -> TensorList {
                                  return {adaptive_avg_pool3d(in[0], ints_at(a, 0))};
                                },
                                kFunctionVariant};
#define KILN_ADAPTIVE_MAX(n)                                                                                \
  Composite c_adaptive_max_pool##n##d{"adaptive_max_pool" #n "d(Tensor self, int[" #n "] output_size) -> (Tensor, Tensor)", \
                                      [](const TensorList& in, const Attrs& a) -> TensorList {              \
                                        auto [y, i] = adaptive_max_pool##n##d(in[0], ints_at(a, 0));        \
                                        return {y, i};                                                      \
                                      },                                                                    \
                                      kFunctionVariant};
KILN_ADAPTIVE_MAX(1)
KILN_ADAPTIVE_MAX(2)
KILN_ADAPTIVE_MAX(3)
#undef KILN_ADAPTIVE_MAX
Composite c_avg_pool1d{"avg_pool1d(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=0, "
                       "bool ceil_mode=False, bool count_include_pad=True) -> Tensor",
                       [](const TensorList& in, const Attrs& a) -> TensorList {
                         return {avg_pool1d(in[0], ints_at(a, 0), ints_at(a, 1), ints_at(a, 2), attr<bool>(a, 3),
                                            attr<bool>(a, 4))};
                       },
                       kFunctionVariant};
Composite c_avg_pool2d{"avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
                       "bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor",
                       [](const TensorList& in, const Attrs& a) -> TensorList {
                         return {avg_pool2d(in[0], ints_at(a, 0), ints_at(a, 1), ints_at(a, 2), attr<bool>(a, 3),
                                            attr<bool>(a, 4), opt_attr<int64_t>(a, 5))};
                       },
                       kFunctionVariant};
Composite c_adaptive_avg_pool1d{"adaptive_avg_pool1d(Tensor self, int[1] output_size) -> Tensor",
                                [](const TensorList& in, const Attrs& a) -> TensorList {
                                  return {adaptive_avg_pool1d(in[0], ints_at(a, 0))};
                                },
                                kFunctionVariant};
Composite c_adaptive_avg_pool2d{"adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor",
                                [](const TensorList& in, const Attrs& a) -> TensorList {
                                  return {adaptive_avg_pool2d(in[0], ints_at(a, 0))};
                                },
                                kFunctionVariant};
}  // namespace

}  // namespace kiln
