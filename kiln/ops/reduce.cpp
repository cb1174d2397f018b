// Reductions: sum/prod/amax/amin/all/any and their composites (mean, var, std, norms, logsumexp),
// arg-reductions (max/min with indices, argmax, argmin), softmax and the cumulative scans: entries,
// schemas, metas, derivatives' wiring and front ends. The CPU kernels are in
// kiln/backend/cpu/reduce.cpp.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kiln/ops/composite.h"
#include "kiln/autograd/function.h"
#include "kiln/core/convert.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/reduce_detail.h"

namespace kiln {
namespace {

using namespace reduce_detail;

SymShape reduced_shape(const TensorSpec& x, const std::vector<bool>& m, bool keepdim) {
  SymShape s;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (!m[i]) s.push_back(x.sizes()[i]);
    else if (keepdim) s.push_back(1);
  }
  return s;
}

Dtype reduce_out_dtype(ReduceOp r, Dtype in) {
  switch (r) {
    case ReduceOp::All: case ReduceOp::Any: return in == kUInt8 ? kUInt8 : kBool;
    case ReduceOp::SumAbs: case ReduceOp::SumSq: return to_real(in);
    default: return in;
  }
}

Dtype sum_dtype(Dtype d) { return is_integral(d, true) ? kInt64 : d; }

// torch's `ScalarType? dtype=None` argument: attribute i as a dtype, absent or None as nullopt, and back
std::optional<Dtype> dtype_attr(const Attrs& a, size_t i) {
  if (i < a.size() && std::holds_alternative<Dtype>(a[i])) return std::get<Dtype>(a[i]);
  return std::nullopt;
}
Attr dtype_attr(std::optional<Dtype> d) { return d ? Attr(*d) : Attr(std::monostate{}); }

// sum, nansum, mean: the dtype the op computes (and returns) in: dtype= or torch's default
Dtype reduce_compute_dtype(const OpDef& op, const TensorSpec& x, const Attrs& a) {
  if (a.size() < 3) return x.dtype();
  const ReduceOp r = static_cast<ReduceOp>(op.code);
  const std::optional<Dtype> given = dtype_attr(a, 2);
  if (r == ReduceOp::Mean) {
    const Dtype d = given.value_or(x.dtype());
    KILN_CHECK(is_floating(d) || is_complex(d), Runtime, "mean", "mean(): could not infer output dtype. "
               "Input dtype must be either a floating point or complex dtype. Got: ", dtype_name(d));
    return d;
  }
  const Dtype d = given.value_or(sum_dtype(x.dtype()));
  if (r == ReduceOp::NanSum)
    KILN_CHECK(!is_complex(d), Runtime, "nansum", "nansum does not support complex inputs");
  return d;
}

SpecList reduce_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  ReduceOp r = static_cast<ReduceOp>(op.code);
  auto m = mask_from_attrs(op, x, a);
  if ((r == ReduceOp::Max || r == ReduceOp::Min) && x.numel() == 0) {
    KILN_CHECK(!reduces_all(op, a) || x.dim() == 0, Runtime, op.name, op.name,
               "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim "
               "with the 'dim' argument.");
    for (int64_t i = 0; i < x.dim(); ++i)
      KILN_CHECK(!(m[i] && x.sizes()[i] == 0), Index, op.name, op.name, "(): Expected reduction dim ", i,
                 " to have non-zero size.");
    KILN_CHECK(x.dim() > 0, Runtime, op.name, "Expected reduction dim to be specified for input.numel() == 0");
  }
  return {{reduced_shape(x, m, std::get<bool>(a[1])), reduce_out_dtype(r, reduce_compute_dtype(op, x, a))}};
}

// torch's schemas: amax/amin exactly, all/any as all.dims/any.dims, sum/nansum/mean with dtype=;
// prod and the norms keep the dim-list form (torch's prod takes one int dim) and are not bound.
// amax/amin refuse an out= of another dtype than the input's, as torch's
#define REDUCE_OP(name, code)                                                                  \
  OpDef op_##name{#name,                                                                       \
                  kReduction | (ReduceOp::code == ReduceOp::Max || ReduceOp::code == ReduceOp::Min \
                                    ? kOutExactDtype : 0u),                                    \
                  reduce_meta, {}, static_cast<int>(ReduceOp::code)};                           \
  OpRegistrar reg_##name{op_##name, #name "(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor"};
#define REDUCE_OP_OPT(name, code)                                                              \
  OpDef op_##name{#name, kReduction, reduce_meta, {}, static_cast<int>(ReduceOp::code)}; \
  OpRegistrar reg_##name{op_##name, #name ".dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor"};
#define REDUCE_OP_DTYPE(name, code, schema_name, tags)                                         \
  OpDef op_##name{#name, kReduction | (tags), reduce_meta, {}, static_cast<int>(ReduceOp::code)}; \
  OpRegistrar reg_##name{op_##name,                                                         \
                         schema_name "(Tensor self, int[1]? dim=None, bool keepdim=False, *, "       \
                         "ScalarType? dtype=None) -> Tensor", kFunctionAndMethod};
KILN_REDUCE_OPS(REDUCE_OP)
KILN_REDUCE_OPT_OPS(REDUCE_OP_OPT)
KILN_REDUCE_DTYPE_OPS(REDUCE_OP_DTYPE)
#undef REDUCE_OP
#undef REDUCE_OP_OPT
#undef REDUCE_OP_DTYPE
OpVariants v_amax{op_amax, kFunctionAndMethod}, v_amin{op_amin, kFunctionAndMethod};
OpVariants v_all{op_all, kFunctionAndMethod}, v_any{op_any, kFunctionAndMethod};

// None: every dim (an empty list, which all/any read as "none", for the others)
Attrs rattrs(const OpDef& op, const OptDims& dims, bool keepdim) {
  const auto r = static_cast<ReduceOp>(op.code);
  if (r == ReduceOp::All || r == ReduceOp::Any) return {dims ? Attr(*dims) : Attr(std::monostate{}), keepdim};
  return {dims.value_or(Shape{}), keepdim};
}
Attrs rattrs(const OptDims& dims, bool keepdim, std::optional<Dtype> dtype) {  // sum, nansum, mean
  return {dims ? Attr(*dims) : Attr(std::monostate{}), keepdim, dtype_attr(dtype)};
}


int64_t reduced_count(const Tensor& x, const OptDims& dims) {
  auto m = dim_mask(x, dims, "mean");
  int64_t c = 1;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (m[i]) c *= x.sizes()[i];
  return c;
}

// ---- arg reductions: max/min along a dim with indices ----------------------------------------------
SpecList argred_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  int64_t d = std::get<int64_t>(a[0]);
  bool keep = std::get<bool>(a[1]);
  SymShape s;
  if (x.dim() > 0) {
    d = wrap_dim(d, x.dim(), op.name);
    KILN_CHECK(x.sizes()[d] > 0, Index, op.name, op.name, "(): Expected reduction dim ", d,
               " to have non-zero size.");
    s = x.sizes();
    if (keep) s[d] = 1; else s.erase(s.begin() + d);
  } else {
    wrap_dim(d, 0, op.name);
  }
  return {{s, x.dtype()}, {s, kInt64}};
}

OpDef op_max_dim{"max_dim", kReduction | kOutExactDtype, argred_meta, {}, 0};
OpRegistrar reg_max_dim{op_max_dim, "max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"};
OpDef op_min_dim{"min_dim", kReduction | kOutExactDtype, argred_meta, {}, 1};
OpRegistrar reg_min_dim{op_min_dim, "min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"};
OpVariants v_max_dim{op_max_dim, kFunctionAndMethod}, v_min_dim{op_min_dim, kFunctionAndMethod};

// ---- softmax / log_softmax over one dim: (outer, R, inner) on a contiguous input ----------------
// dtype= (attr 1, torch's): the input is converted to it inside the op
SpecList softmax_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  wrap_dim(std::get<int64_t>(a[0]), x.dim(), op.name);
  const Dtype d = dtype_attr(a, 1).value_or(x.dtype());
  KILN_CHECK(is_floating(d) && !is_float8(d), NotImplemented, op.name, "not implemented for dtype ", dtype_name(d));
  return {{x.sizes(), d}};
}

OpDef op_softmax{"softmax", kOutExactDtype, softmax_meta, {}, 0};
OpRegistrar reg_softmax{op_softmax, "softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", kFunctionAndMethod};
OpDef op_log_softmax{"log_softmax", kOutExactDtype, softmax_meta, {}, 1};
OpRegistrar reg_log_softmax{op_log_softmax, "log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor",
                             kFunctionAndMethod};

// ---- cumulative scans: code 0 cumsum, 1 cumprod, 2 logcumsumexp, 3 cummax, 4 cummin ----------------
// cumsum/cumprod take torch's dtype= (attr 1): they compute in it, or in int64 for integer inputs
SpecList scan_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  wrap_dim(std::get<int64_t>(a[0]), x.dim(), op.name);
  if (op.code >= 3) return {{x.sizes(), x.dtype()}, {x.sizes(), kInt64}};
  if (op.code <= 1) {
    return {{x.sizes(), dtype_attr(a, 1).value_or(sum_dtype(x.dtype()))}};
  }
  return {{x.sizes(), x.dtype()}};
}

OpDef op_cumsum{"cumsum", kDtypeFromOut, scan_meta, {}, 0};
OpRegistrar reg_cumsum{op_cumsum, "cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", kFunctionAndMethod};
OpDef op_cumprod{"cumprod", kDtypeFromOut, scan_meta, {}, 1};
OpRegistrar reg_cumprod{op_cumprod, "cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", kFunctionAndMethod};
OpDef op_logcumsumexp{"logcumsumexp", kOutExactDtype, scan_meta, {}, 2};
OpRegistrar reg_logcumsumexp{op_logcumsumexp, "logcumsumexp(Tensor self, int dim) -> Tensor"};
OpDef op_cummax{"cummax", kOutExactDtype, scan_meta, {}, 3};
OpRegistrar reg_cummax{op_cummax, "cummax(Tensor self, int dim) -> (Tensor values, Tensor indices)", kFunctionAndMethod};
OpDef op_cummin{"cummin", kOutExactDtype, scan_meta, {}, 4};
OpRegistrar reg_cummin{op_cummin, "cummin(Tensor self, int dim) -> (Tensor values, Tensor indices)", kFunctionAndMethod};

Tensor reduce(const OpDef& op, const Tensor& x, const OptDims& dims, bool keepdim) {
  return dispatch1(op, {x}, rattrs(op, dims, keepdim));
}

// ---- trace: the sum of a matrix's main diagonal (torch.trace) -----------------------------------------
// The whole op is this entry (schema, public variants, meta, derivative) and its kernel
// (backend/cpu/reduce.cpp, which also declares the dtypes it handles).
SpecList trace_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  const TensorSpec& x = in[0];
  KILN_CHECK(x.dim() == 2, Runtime, op.name, "trace: expected a matrix, but got tensor with dim ", x.dim());
  check_dtype_supported(op, x.device(), x.dtype());
  return {{SymShape{}, is_integral(x.dtype(), true) ? kInt64 : x.dtype()}};
}
// d trace / dX = I * grad, the identity of X's shape; written with ops, so double backward works
TensorList trace_grad(const GradCtx& c, const TensorList& g) {
  const Shape s = c.in_specs[0].concrete_sizes("trace");
  return {mul(eye(s[0], s[1], TensorOptions().dtype(g[0].dtype())), g[0])};
}
OpDef op_trace{"trace", kReduction, trace_meta, {}};
OpRegistrar reg_trace{op_trace, "trace(Tensor self) -> Tensor", kFunctionAndMethod};
DerivativeRegistrar d_trace{op_trace, trace_grad, 0, 0};

}  // namespace

Tensor sum(const Tensor& x, OptDims dims, bool keepdim, std::optional<Dtype> dtype) {
  return dispatch1(op_sum, {x}, rattrs(dims, keepdim, dtype));
}
Tensor nansum(const Tensor& x, OptDims dims, bool keepdim, std::optional<Dtype> dtype) {
  return dispatch1(op_nansum, {x}, rattrs(dims, keepdim, dtype));
}
Tensor mean(const Tensor& x, OptDims dims, bool keepdim, std::optional<Dtype> dtype) {
  return dispatch1(op_mean, {x}, rattrs(dims, keepdim, dtype));
}
Tensor nanmean(const Tensor& x, OptDims dims, bool keepdim, std::optional<Dtype> dtype) {
  KILN_CHECK(is_floating(x.dtype()), Runtime, "nanmean", "nanmean(): expected input to have floating point "
             "dtype but got ", dtype_name(x.dtype()));
  Tensor cnt = sum(logical_not(isnan(x)), dims, keepdim);
  return true_divide(nansum(x, dims, keepdim, dtype), cnt).to(dtype.value_or(x.dtype()));
}
Tensor prod(const Tensor& x, std::optional<int64_t> dim, bool keepdim, std::optional<Dtype> dtype) {
  Dtype d = dtype.value_or(sum_dtype(x.dtype()));
  return reduce(op_prod, to_dtype(x, d), dim ? OptDims{Shape{*dim}} : OptDims{}, keepdim);
}
Tensor amax(const Tensor& x, OptDims dims, bool keepdim) { return reduce(op_amax, x, dims, keepdim); }
Tensor amin(const Tensor& x, OptDims dims, bool keepdim) { return reduce(op_amin, x, dims, keepdim); }
Tensor all(const Tensor& x, OptDims dims, bool keepdim) { return reduce(op_all, x, dims, keepdim); }
Tensor any(const Tensor& x, OptDims dims, bool keepdim) { return reduce(op_any, x, dims, keepdim); }
Tensor max(const Tensor& x) {
  KILN_CHECK(x.numel() > 0, Runtime, "max", "max(): Expected reduction dim to be specified for "
             "input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
  return amax(x);
}
Tensor min(const Tensor& x) {
  KILN_CHECK(x.numel() > 0, Runtime, "min", "min(): Expected reduction dim to be specified for "
             "input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
  return amin(x);
}
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  auto r = dispatch(op_max_dim, {x}, {dim, keepdim});
  return {r[0], r[1]};
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  auto r = dispatch(op_min_dim, {x}, {dim, keepdim});
  return {r[0], r[1]};
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  KILN_CHECK(x.dtype() != kBool, Runtime, "argmax", "argmax(): does not support bool input");
  if (!dim) {
    KILN_CHECK(x.numel() > 0, Index, "argmax", "argmax(): Expected reduction dim to be specified for "
               "input.numel() == 0.");
    Tensor i = std::get<1>(max(reshape(x, {-1}), 0, false));
    return keepdim ? reshape(i, Shape(x.dim(), 1)) : i;
  }
  return std::get<1>(max(x, *dim, keepdim));
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  KILN_CHECK(x.dtype() != kBool, Runtime, "argmin", "argmin(): does not support bool input");
  if (!dim) {
    KILN_CHECK(x.numel() > 0, Index, "argmin", "argmin(): Expected reduction dim to be specified for "
               "input.numel() == 0.");
    Tensor i = std::get<1>(min(reshape(x, {-1}), 0, false));
    return keepdim ? reshape(i, Shape(x.dim(), 1)) : i;
  }
  return std::get<1>(min(x, *dim, keepdim));
}
std::tuple<Tensor, Tensor> aminmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  OptDims d = dim ? OptDims{Shape{*dim}} : OptDims{};
  return {amin(x, d, keepdim), amax(x, d, keepdim)};
}

namespace {
// sqrt for std and the 2-norm: the same forward, but a zero result gets a zero gradient (torch's
// std_backward / norm_backward) instead of g / 0 * 0 = NaN.
struct NormSqrt : autograd::Function<NormSqrt> {
  static std::string name() { return "NormSqrt"; }
  static TensorList forward(autograd::AutogradContext* ctx, const TensorList& in) {
    Tensor y = sqrt(in[0]);
    ctx->save_for_backward({y});
    return {y};
  }
  static TensorList backward(autograd::AutogradContext* ctx, const TensorList& g) {
    Tensor y = ctx->get_saved_variables()[0];
    Tensor r = true_divide(g[0], mul(y, Scalar(2.0)));
    return {where(eq(y, Scalar(0)), zeros_like(r), r)};
  }
};
Tensor norm_sqrt(const Tensor& v) {
  return autograd::function_needs_record({v}) ? NormSqrt::apply({v})[0] : sqrt(v);
}

// var and mean in the compute dtype (float32 for half / bfloat16); callers round once at the end.
std::tuple<Tensor, Tensor> var_mean_acc(const Tensor& x, OptDims dims, double correction, bool keepdim) {
  KILN_CHECK(is_floating(x.dtype()) || is_complex(x.dtype()), Runtime, "var", "std and var only support "
             "floating point and complex dtypes");
  Dtype cd = is_reduced_float(x.dtype()) ? kFloat32 : x.dtype();
  Tensor xf = to_dtype(x, cd);
  int64_t n = reduced_count(x, dims);
  Tensor m = mean(xf, dims, true);
  Tensor dev = sub(xf, m);
  Tensor sq = is_complex(cd) ? reduce(op_norm_l2sq, dev, dims, keepdim) : sum(mul(dev, dev), dims, keepdim);
  double denom = std::max(0.0, static_cast<double>(n) - correction);
  Tensor v = true_divide(sq, Scalar(denom));
  Tensor mo = keepdim ? m : (dims && !dims->empty() ? squeeze(m, *dims) : reshape(m, {}));
  return {v, mo};
}
}  // namespace

std::tuple<Tensor, Tensor> var_mean(const Tensor& x, OptDims dims, double correction, bool keepdim) {
  auto [v, m] = var_mean_acc(x, dims, correction, keepdim);
  return {to_dtype(v, to_real(x.dtype())), to_dtype(m, x.dtype())};
}
Tensor var(const Tensor& x, OptDims dims, double correction, bool keepdim) {
  return std::get<0>(var_mean(x, dims, correction, keepdim));
}
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, OptDims dims, double correction, bool keepdim) {
  auto [v, m] = var_mean_acc(x, dims, correction, keepdim);
  return {to_dtype(norm_sqrt(v), to_real(x.dtype())), to_dtype(m, x.dtype())};
}
Tensor std(const Tensor& x, OptDims dims, double correction, bool keepdim) {
  return std::get<0>(std_mean(x, dims, correction, keepdim));
}

Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim) {
  Tensor xf = is_integral(x.dtype(), true) ? to_dtype(x, default_dtype()) : x;
  if (xf.numel() == 0) return log(sum(exp(xf), dims, keepdim));
  Tensor m = amax(xf, dims, true);
  Tensor mz = where(isinf(m), zeros_like(m), m);
  Tensor r = add(log(sum(exp(sub(xf, mz)), dims, true)), mz);
  return keepdim ? r : (dims.empty() ? reshape(r, {}) : squeeze(r, dims));
}

Tensor vector_norm(const Tensor& x, double ord, OptDims dims, bool keepdim, std::optional<Dtype> dtype) {
  Tensor xf = dtype ? to_dtype(x, *dtype) : x;
  KILN_CHECK(is_floating(xf.dtype()) || is_complex(xf.dtype()), Runtime, "linalg.vector_norm",
             "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ",
             dtype_name(xf.dtype()));
  if (ord == 2) return norm_sqrt(reduce(op_norm_l2sq, xf, dims, keepdim));
  if (ord == 1) return reduce(op_norm_l1, xf, dims, keepdim);
  if (std::isinf(ord)) {
    KILN_CHECK(xf.numel() > 0 || ord > 0, Runtime, "linalg.vector_norm", "linalg.vector_norm cannot compute "
               "the -inf norm on an empty tensor because the operation does not have an identity");
    Tensor a = abs(xf);
    if (xf.numel() == 0) return sum(a, dims, keepdim);
    return ord > 0 ? amax(a, dims, keepdim) : amin(a, dims, keepdim);
  }
  if (ord == 0) return to_dtype(sum(ne(xf, Scalar(0)), dims, keepdim), to_real(xf.dtype()));
  Tensor a = abs(xf);
  return pow(sum(pow(a, Scalar(ord)), dims, keepdim), Scalar(1.0 / ord));
}

Tensor count_nonzero(const Tensor& x, OptDims dims) { return sum(ne(x, Scalar(0)), dims, false); }

Tensor softmax(const Tensor& x, int64_t dim, std::optional<Dtype> dtype) {
  return dispatch1(op_softmax, {x}, {dim, dtype_attr(dtype)});
}
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<Dtype> dtype) {
  return dispatch1(op_log_softmax, {x}, {dim, dtype_attr(dtype)});
}
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<Dtype> dtype) {
  return dispatch1(op_cumsum, {x}, {dim, dtype_attr(dtype)});
}
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<Dtype> dtype) {
  return dispatch1(op_cumprod, {x}, {dim, dtype_attr(dtype)});
}
Tensor logcumsumexp(const Tensor& x, int64_t dim) {
  KILN_CHECK(is_floating(x.dtype()), NotImplemented, "logcumsumexp", "not implemented for dtype ", dtype_name(x.dtype()));
  return dispatch1(op_logcumsumexp, {x}, {dim});
}
std::tuple<Tensor, Tensor> cummax(const Tensor& x, int64_t dim) {
  auto r = dispatch(op_cummax, {x}, {dim});
  return {r[0], r[1]};
}
std::tuple<Tensor, Tensor> cummin(const Tensor& x, int64_t dim) {
  auto r = dispatch(op_cummin, {x}, {dim});
  return {r[0], r[1]};
}

Tensor Tensor::sum() const { return kiln::sum(*this); }
Tensor Tensor::mean() const { return kiln::mean(*this); }

Tensor trace(const Tensor& x) { return dispatch1(op_trace, {x}); }


// ---- composites with torch's schemas (ops/composite.h): their public forms come from these -------
namespace {
OptDims dims_of(const Attrs& a, size_t i) { return opt_attr<Shape>(a, i); }

Composite c_nanmean{"nanmean(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
                    [](const TensorList& in, const Attrs& a) -> TensorList {
                      return {nanmean(in[0], dims_of(a, 0), attr<bool>(a, 1), opt_attr<Dtype>(a, 2))};
                    },
                    kFunctionAndMethod};
// all(x, dim) and any(x, dim) with one int (torch's all.dim; the list form is the table op all.dims)
Composite c_all_dim{"all.dim(Tensor self, int dim, bool keepdim=False) -> Tensor",
                    [](const TensorList& in, const Attrs& a) -> TensorList {
                      return {all(in[0], Shape{attr<int64_t>(a, 0)}, attr<bool>(a, 1))};
                    },
                    kFunctionAndMethod};
Composite c_any_dim{"any.dim(Tensor self, int dim, bool keepdim=False) -> Tensor",
                    [](const TensorList& in, const Attrs& a) -> TensorList {
                      return {any(in[0], Shape{attr<int64_t>(a, 0)}, attr<bool>(a, 1))};
                    },
                    kFunctionAndMethod};
Composite c_prod{"prod(Tensor self, *, ScalarType? dtype=None) -> Tensor",
                 [](const TensorList& in, const Attrs& a) -> TensorList {
                   return {prod(in[0], std::nullopt, false, opt_attr<Dtype>(a, 0))};
                 },
                 kFunctionAndMethod};
Composite c_prod_dim{"prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
                     [](const TensorList& in, const Attrs& a) -> TensorList {
                       return {prod(in[0], attr<int64_t>(a, 0), attr<bool>(a, 1), opt_attr<Dtype>(a, 2))};
                     },
                     kFunctionAndMethod};
CompositeTags t_prod{c_prod, kDtypeFromOut}, t_prod_dim{c_prod_dim, kDtypeFromOut}, t_nanmean{c_nanmean, kDtypeFromOut};
// max and min: the whole tensor, along a dim (values and indices), or elementwise against another
Composite c_max{"max(Tensor self) -> Tensor", [](const TensorList& in, const Attrs&) -> TensorList { return {max(in[0])}; },
                kFunctionAndMethod};
Composite c_max_other{"max.other(Tensor self, Tensor other) -> Tensor",
                      [](const TensorList& in, const Attrs&) -> TensorList { return {maximum(in[0], in[1])}; },
                      kFunctionAndMethod};
Composite c_min{"min(Tensor self) -> Tensor", [](const TensorList& in, const Attrs&) -> TensorList { return {min(in[0])}; },
                kFunctionAndMethod};
Composite c_min_other{"min.other(Tensor self, Tensor other) -> Tensor",
                      [](const TensorList& in, const Attrs&) -> TensorList { return {minimum(in[0], in[1])}; },
                      kFunctionAndMethod};
Composite c_argmax{"argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
                   [](const TensorList& in, const Attrs& a) -> TensorList {
                     return {argmax(in[0], opt_attr<int64_t>(a, 0), attr<bool>(a, 1))};
                   },
                   kFunctionAndMethod};
Composite c_argmin{"argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
                   [](const TensorList& in, const Attrs& a) -> TensorList {
                     return {argmin(in[0], opt_attr<int64_t>(a, 0), attr<bool>(a, 1))};
                   },
                   kFunctionAndMethod};
Composite c_aminmax{"aminmax(Tensor self, *, int? dim=None, bool keepdim=False) -> (Tensor min, Tensor max)",
                    [](const TensorList& in, const Attrs& a) -> TensorList {
                      auto [lo, hi] = aminmax(in[0], opt_attr<int64_t>(a, 0), attr<bool>(a, 1));
                      return {lo, hi};
                    },
                    kFunctionAndMethod};
// torch refuses an out= of another dtype than the result's (int64 for argmax/argmin)
CompositeTags t_argmax{c_argmax, kOutExactDtype}, t_argmin{c_argmin, kOutExactDtype};
CompositeTags t_aminmax{c_aminmax, kOutExactDtype};

// var, std, var_mean, std_mean: torch's three overloads each (dims with `unbiased`, dims with
// `correction=`, the whole tensor with `unbiased`), one function underneath taking the correction.
using VarFn = TensorList (*)(const Tensor&, OptDims, double, bool);
double correction_of(const Attrs& a, size_t i) {
  std::optional<Scalar> c = opt_attr<Scalar>(a, i);
  return c ? c->to_double() : 1.0;
}
template <VarFn F>
TensorList var_dim(const TensorList& in, const Attrs& a) {
  return F(in[0], dims_of(a, 0), attr<bool>(a, 1) ? 1.0 : 0.0, attr<bool>(a, 2));
}
template <VarFn F>
TensorList var_corr(const TensorList& in, const Attrs& a) {
  return F(in[0], dims_of(a, 0), correction_of(a, 1), attr<bool>(a, 2));
}
template <VarFn F>
TensorList var_all(const TensorList& in, const Attrs& a) {
  return F(in[0], std::nullopt, attr<bool>(a, 0) ? 1.0 : 0.0, false);
}
TensorList var1(const Tensor& x, OptDims d, double c, bool k) { return {var(x, d, c, k)}; }
TensorList std1(const Tensor& x, OptDims d, double c, bool k) { return {std(x, d, c, k)}; }
TensorList var2(const Tensor& x, OptDims d, double c, bool k) {
  auto [v, m] = var_mean(x, d, c, k);
  return {v, m};
}
TensorList std2(const Tensor& x, OptDims d, double c, bool k) {
  auto [s, m] = std_mean(x, d, c, k);
  return {s, m};
}
#define KILN_VAR_COMPOSITES(name, fn, ret, variants)                                                          \
  Composite c_##name##_dim{#name ".dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> " ret, \
                           var_dim<fn>, variants};                                                           \
  Composite c_##name##_corr{#name ".correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, "      \
                            "bool keepdim=False) -> " ret, var_corr<fn>, variants};                          \
  Composite c_##name{#name "(Tensor self, bool unbiased=True) -> " ret, var_all<fn>, variants};
KILN_VAR_COMPOSITES(var, var1, "Tensor", kFunctionAndMethod)
KILN_VAR_COMPOSITES(std, std1, "Tensor", kFunctionAndMethod)
KILN_VAR_COMPOSITES(var_mean, var2, "(Tensor, Tensor)", kFunctionVariant)
KILN_VAR_COMPOSITES(std_mean, std2, "(Tensor, Tensor)", kFunctionVariant)
#undef KILN_VAR_COMPOSITES

Composite c_logsumexp{"logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor",
                      [](const TensorList& in, const Attrs& a) -> TensorList {
                        return {logsumexp(in[0], attr<Shape>(a, 0), attr<bool>(a, 1))};
                      },
                      kFunctionAndMethod};
Composite c_count_nonzero{"count_nonzero(Tensor self, int? dim=None) -> Tensor",
                          [](const TensorList& in, const Attrs& a) -> TensorList {
                            std::optional<int64_t> d = opt_attr<int64_t>(a, 0);
                            return {count_nonzero(in[0], d ? OptDims{Shape{*d}} : OptDims{})};
                          },
                          kFunctionAndMethod};
Composite c_count_nonzero_dims{"count_nonzero.dim_IntList(Tensor self, int[] dim) -> Tensor",
                               [](const TensorList& in, const Attrs& a) -> TensorList {
                                 return {count_nonzero(in[0], attr<Shape>(a, 0))};
                               },
                               kFunctionAndMethod};
// cumsum_, cumprod_: in self's dtype; a dtype= that differs is refused, as torch's
#define KILN_SCAN_INPLACE(name)                                                                                \
  Composite c_##name##_{#name "(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor",                      \
                        [](const TensorList& in, const Attrs& a) -> TensorList {                                  \
                          return {name(in[0], attr<int64_t>(a, 0), opt_attr<Dtype>(a, 1))};                       \
                        },                                                                                        \
                        kInplaceVariant, 0,                                                                       \
                        [](const TensorList& in, const Attrs& a) -> TensorList {                                  \
                          const Tensor& x = in[0];                                                                \
                          std::optional<Dtype> d = opt_attr<Dtype>(a, 1);                                         \
                          KILN_CHECK(!d || *d == x.dtype(), Runtime, #name "_", "Bad in-place call: input tensor dtype ", \
                                     dtype_name(x.dtype()), " and output tensor dtype ", dtype_name(*d), " should match"); \
                          if (x.dim() == 0 || x.numel() == 0) return {x}; /* nothing to accumulate */             \
                          return {dispatch_inplace(op_##name, x, {x}, {attr<int64_t>(a, 0), x.dtype()})};         \
                        }};
KILN_SCAN_INPLACE(cumsum)
KILN_SCAN_INPLACE(cumprod)
#undef KILN_SCAN_INPLACE
Composite c_logcumsumexp{"logcumsumexp(Tensor self, int dim) -> Tensor",
                         [](const TensorList& in, const Attrs& a) -> TensorList {
                           return {logcumsumexp(in[0], attr<int64_t>(a, 0))};
                         },
                         kFunctionAndMethod};
CompositeTags t_logcumsumexp{c_logcumsumexp, kOutExactDtype};
}  // namespace

}  // namespace kiln
