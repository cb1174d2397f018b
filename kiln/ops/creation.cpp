// Creation ops, copies and conversions, and joining (cat, stack): entries, schemas, metas and front
// ends. The CPU kernels are in kiln/backend/cpu/creation.cpp.
#include <cmath>
#include <cstring>

#include "kiln/ops/composite.h"
#include "kiln/core/convert.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"
#include "kiln/core/visit.h"

namespace kiln {
namespace {

// full(size, value, dtype)
SpecList full_meta(const OpDef& op, const SpecList&, const Attrs& a) {
  // torch's checked conversion: 300 into int8, 1e300 into float32, 1+2j into a real type raise
  shape_detail::check_scalar_fits(std::get<Scalar>(a[1]), std::get<Dtype>(a[2]), op.name);
  return {{std::get<Shape>(a[0]), std::get<Dtype>(a[2])}};
}
OpDef op_full{"full", kCreation, full_meta, {}};  // kernels: kiln/backend/cpu/creation.cpp
OpRegistrar reg_full{op_full, "full(int[] size, Scalar fill_value, ScalarType dtype, *, Device? device=None) -> Tensor"};

SpecList empty_meta(const OpDef&, const SpecList&, const Attrs& a) {
  return {{std::get<Shape>(a[0]), std::get<Dtype>(a[1])}};
}
OpDef op_empty{"empty", kCreation, empty_meta, {}};
OpRegistrar reg_empty{op_empty, "empty(int[] size, ScalarType dtype, *, Device? device=None) -> Tensor"};

// arange(start, end, step, dtype): values start + i * step computed in double (int64 for ints).
SpecList arange_meta(const OpDef&, const SpecList&, const Attrs& a) {
  const Scalar &start = std::get<Scalar>(a[0]), &end = std::get<Scalar>(a[1]), &step = std::get<Scalar>(a[2]);
  Dtype d = std::get<Dtype>(a[3]);
  if (d == kBool || is_complex(d) || is_float8(d)) raise_dtype_unsupported("arange", d);
  if (start.is_integral() && end.is_integral() && step.is_integral()) {
    const SymInt a0 = SymInt::from_raw(start.to_int()), b0 = SymInt::from_raw(end.to_int());
    if (a0.is_symbolic() || b0.is_symbolic()) [[unlikely]] {  // a traced bound: the size is symbolic
      const int64_t c0 = step.to_int();
      KILN_CHECK(c0 != 0, Runtime, "arange", "step must be nonzero");
      KILN_CHECK(c0 > 0 ? b0 >= a0 : b0 <= a0, Runtime, "arange",
                 "upper bound and larger bound inconsistent with step sign");
      return {{{(b0 - a0 + (c0 - (c0 > 0 ? 1 : -1))) / c0}, d}};
    }
  }
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  KILN_CHECK(st != 0, Runtime, "arange", "step must be nonzero");
  KILN_CHECK(std::isfinite(s) && std::isfinite(e), Runtime, "arange", "unsupported range: ", start, " -> ", end);
  KILN_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), Runtime, "arange",
             "upper bound and larger bound inconsistent with step sign");
  double n;
  if (is_integral(d, true)) {
    // torch's integer arange computes the values from start and step truncated to int64; for int64
    // it counts them in the truncated bounds too (arange(1, 2.5, 0.5, dtype=int64) has a zero step),
    // for the other integer dtypes in the given ones (the same call in int32 is [1, 1, 1])
    KILN_CHECK(std::abs(s) < 0x1p63 && std::abs(e) < 0x1p63 && std::abs(st) < 0x1p63, Runtime, "arange",
               "value cannot be converted to type int64_t without overflow");
    const __int128 a0 = start.to_int(), b0 = end.to_int(), c0 = step.to_int();  // (no overflow)
    if (d == kInt64) {
      KILN_CHECK(c0 != 0, Value, "arange", "step must be nonzero");
      KILN_CHECK((c0 > 0 && b0 >= a0) || (c0 < 0 && b0 <= a0), Runtime, "arange",
                 "upper bound and larger bound inconsistent with step sign");
    }
    if (c0 != 0 && (d == kInt64 || (start.is_integral() && end.is_integral() && step.is_integral())))
      n = static_cast<double>((b0 - a0 + c0 - (c0 > 0 ? 1 : -1)) / c0);
    else
      n = std::ceil((e - s) / st);
  } else {
    n = std::ceil((e - s) / st);
  }
  KILN_CHECK(n >= 0 && n < 0x1p63, Runtime, "arange", "invalid size, possible overflow? (", start, " to ", end,
             " in steps of ", step, ")");
  return {{{static_cast<int64_t>(n)}, d}};
}
OpDef op_arange{"arange", kCreation, arange_meta, {}};
OpRegistrar reg_arange{op_arange, "arange.start_step(Scalar start, Scalar end, Scalar step, ScalarType dtype, *, Device? device=None) -> Tensor"};

// linspace / logspace(start, end, steps, base, dtype); base 0 means linspace.
SpecList linspace_meta(const OpDef& op, const SpecList&, const Attrs& a) {
  int64_t steps = std::get<int64_t>(a[2]);
  KILN_CHECK(steps >= 0, Runtime, op.name, "number of steps must be non-negative");
  return {{{steps}, std::get<Dtype>(a[4])}};
}
OpDef op_linspace{"linspace", kCreation, linspace_meta, {}};
OpRegistrar reg_linspace{op_linspace, "linspace(Scalar start, Scalar end, int steps, float base, ScalarType dtype, *, Device? device=None) -> Tensor"};
OpDef op_logspace{"logspace", kCreation, linspace_meta, {}};
OpRegistrar reg_logspace{op_logspace, "logspace(Scalar start, Scalar end, int steps, float base, ScalarType dtype, *, Device? device=None) -> Tensor"};

SpecList eye_meta(const OpDef&, const SpecList&, const Attrs& a) {
  int64_t n = std::get<int64_t>(a[0]), m = std::get<int64_t>(a[1]);
  KILN_CHECK(n >= 0, Runtime, "eye", "n must be greater or equal to 0, got ", n);
  KILN_CHECK(m >= 0, Runtime, "eye", "m must be greater or equal to 0, got ", m);
  return {{{n, m}, std::get<Dtype>(a[2])}};
}
OpDef op_eye{"eye", kCreation, eye_meta, {}};
OpRegistrar reg_eye{op_eye, "eye.m(int n, int m, ScalarType dtype, *, Device? device=None) -> Tensor"};

// contiguous copy with the same shape (clone) and dtype conversion share one kernel: attrs {dtype}
SpecList to_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  return {{in[0].sizes(), std::get<Dtype>(a[0])}};
}
OpDef op_to{"to", kPointwise, to_meta, {}};
OpRegistrar reg_to{op_to, "to.dtype(Tensor self, ScalarType dtype) -> Tensor"};

// cat(tensors, dim)
SpecList cat_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  KILN_CHECK(!in.empty(), Value, "cat", "torch.cat(): expected a non-empty list of Tensors");
  int64_t dim = std::get<int64_t>(a[0]);
  const TensorSpec* ref = nullptr;
  for (const TensorSpec& t : in)
    if (!(t.dim() == 1 && t.numel() == 0)) {  // legacy: 1-D empty tensors are skipped
      ref = &t;
      break;
    }
  Dtype d = result_type(in);
  if (!ref) return {{{0}, d}};
  int64_t nd = ref->dim();
  KILN_CHECK(nd > 0, Runtime, "cat", "zero-dimensional tensor (at position 0) cannot be concatenated");
  dim = wrap_dim(dim, nd, "cat");
  SymShape s = ref->sizes();
  s[dim] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const TensorSpec& t = in[i];
    if (t.dim() == 1 && t.numel() == 0) continue;
    KILN_CHECK(t.dim() == nd, Runtime, "cat", "Tensors must have same number of dimensions: got ", nd,
               " and ", t.dim());
    for (int64_t k = 0; k < nd; ++k)
      KILN_CHECK(k == dim || t.sizes()[k] == ref->sizes()[k], Runtime, "cat", "Sizes of tensors must match "
                 "except in dimension ", dim, ". Expected size ", ref->sizes()[k], " but got size ",
                 t.sizes()[k], " for tensor number ", i, " in the list.");
    s[dim] += t.sizes()[dim];
  }
  return {{s, d}};
}
OpDef op_cat{"cat", 0, cat_meta, {}};
OpRegistrar reg_cat{op_cat, "cat(Tensor[] tensors, int dim=0) -> Tensor", kFunctionVariant};

Dtype dtype_or(const TensorOptions& o) { return o.dtype_or_default(); }

}  // namespace

Tensor empty_symint(const SymShape& size, TensorOptions o) { return empty(raw_shape(size), o); }
Tensor zeros_symint(const SymShape& size, TensorOptions o) { return zeros(raw_shape(size), o); }
Tensor empty(const Shape& size, TensorOptions o) {
  return dispatch1(op_empty, {}, {size, dtype_or(o), o.device_});
}
Tensor full(const Shape& size, const Scalar& v, TensorOptions o) {
  Dtype d = o.dtype_ == Dtype::Undefined ? v.wrapped_dtype() : o.dtype_;
  return dispatch1(op_full, {}, {size, v, d, o.device_});
}
Tensor zeros(const Shape& size, TensorOptions o) { return dispatch1(op_full, {}, {size, Scalar(0), dtype_or(o), o.device_}); }
Tensor ones(const Shape& size, TensorOptions o) { return dispatch1(op_full, {}, {size, Scalar(1), dtype_or(o), o.device_}); }
// *_like: the input's sizes (symbolic ones stay symbolic: a trace records no guard), dtype (unless
// given) and device.
namespace {
Shape like_sizes(const Tensor& t) { return t.has_symbolic_sizes() ? raw_shape(t.sym_sizes()) : t.sizes(); }
}  // namespace
Tensor empty_like(const Tensor& t, std::optional<Dtype> d) { return empty(like_sizes(t), like(t, d.value_or(t.dtype()))); }
Tensor zeros_like(const Tensor& t, std::optional<Dtype> d) { return zeros(like_sizes(t), like(t, d.value_or(t.dtype()))); }
Tensor ones_like(const Tensor& t, std::optional<Dtype> d) { return ones(like_sizes(t), like(t, d.value_or(t.dtype()))); }
Tensor full_like(const Tensor& t, const Scalar& v, std::optional<Dtype> d) {
  return full(like_sizes(t), v, like(t, d.value_or(t.dtype())));
}
// Through dispatch (as an in-place `full`), so autograd sees it: a leaf that requires grad raises,
// and a filled tensor's history is cut.
Tensor fill_(const Tensor& t, const Scalar& v) {
  return dispatch_inplace(op_full, t, {}, {t.sizes(), v, t.dtype()});
}
Tensor zero_(const Tensor& t) { return fill_(t, Scalar(0)); }

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions o) {
  Dtype d = o.dtype_;
  if (d == Dtype::Undefined)
    d = (start.is_floating() || end.is_floating() || step.is_floating()) ? default_dtype() : kInt64;
  return dispatch1(op_arange, {}, {start, end, step, d, o.device_});
}
Tensor arange(const Scalar& end, TensorOptions o) { return arange(Scalar(0), end, Scalar(1), o); }
Tensor linspace(const Scalar& s, const Scalar& e, int64_t steps, TensorOptions o) {
  Dtype d = o.dtype_ == Dtype::Undefined ? ((s.is_complex() || e.is_complex()) ? default_complex_dtype() : default_dtype()) : o.dtype_;
  return dispatch1(op_linspace, {}, {s, e, steps, 0.0, d, o.device_});
}
Tensor logspace(const Scalar& s, const Scalar& e, int64_t steps, double base, TensorOptions o) {
  return dispatch1(op_logspace, {}, {s, e, steps, base, dtype_or(o), o.device_});
}
Tensor eye(int64_t n, std::optional<int64_t> m, TensorOptions o) {
  return dispatch1(op_eye, {}, {n, m.value_or(n), dtype_or(o), o.device_});
}

Tensor contiguous(const Tensor& t) { return t.is_contiguous() ? t : clone(t); }
Tensor clone(const Tensor& t) { return dispatch1(op_to, {t}, {t.dtype()}); }
Tensor to_dtype(const Tensor& t, Dtype d, bool copy) {
  if (t.dtype() == d && !copy) return t;
  return dispatch1(op_to, {t}, {d});
}
// A move to another device: a fresh tensor there, written by copy_ (which raises when the source is a
// meta tensor: it has no data to copy).
Tensor to_device(const Tensor& t, Device d, bool copy) {
  if (t.device().type == d.type && !copy) return t;
  Tensor dst = empty(t.sizes(), TensorOptions(t.dtype()).device(d));
  copy_(dst, t);
  return dst;
}
Tensor Tensor::to(Device d, bool copy) const { return to_device(*this, d, copy); }

// The end travels as the SymInt's bits in an integer Scalar, as a traced Python size does (bind_schema).
Tensor arange_symint(SymInt end, TensorOptions o) { return arange(Scalar(end.raw()), o); }

Tensor cat(const TensorList& ts, int64_t dim) { return dispatch1(op_cat, ts, {dim}); }
Tensor stack(const TensorList& ts, int64_t dim) {
  KILN_CHECK(!ts.empty(), Runtime, "stack", "stack expects a non-empty TensorList");
  const SymShape first = ts[0].sym_sizes();  // symbolic in a trace: compared without pinning
  for (size_t i = 1; i < ts.size(); ++i)
    KILN_CHECK(has_sizes(ts[i], first), Runtime, "stack", "stack expects each tensor to be equal size, but got ",
               sym_str(first), " at entry 0 and ", sym_str(ts[i].sym_sizes()), " at entry ", i);
  int64_t d = wrap_dim(dim, ts[0].dim() + 1, "stack");
  TensorList u;
  for (const Tensor& t : ts) u.push_back(unsqueeze(t, d));
  return cat(u, d);
}
Tensor hstack(const TensorList& ts) {
  KILN_CHECK(!ts.empty(), Runtime, "hstack", "hstack expects a non-empty TensorList");
  TensorList u;
  for (const Tensor& t : ts) u.push_back(t.dim() == 0 ? reshape(t, {1}) : t);
  return cat(u, u[0].dim() == 1 ? 0 : 1);
}
Tensor vstack(const TensorList& ts) {
  KILN_CHECK(!ts.empty(), Runtime, "vstack", "vstack expects a non-empty TensorList");
  TensorList u;
  for (const Tensor& t : ts) u.push_back(t.dim() == 0 ? reshape(t, {1, 1}) : t.dim() == 1 ? unsqueeze(t, 0) : t);
  return cat(u, 0);
}

Tensor Tensor::contiguous() const { return kiln::contiguous(*this); }
Tensor Tensor::clone() const { return kiln::clone(*this); }
Tensor Tensor::to(Dtype d, bool copy) const { return kiln::to_dtype(*this, d, copy); }
Tensor& Tensor::copy_(const Tensor& src) {
  kiln::copy_(*this, src);
  return *this;
}


// ---- composites with torch's schemas (ops/composite.h): their public forms come from these -------
namespace {
TensorList cat_c(const TensorList& in, const Attrs& a) { return {cat(in, attr<int64_t>(a, 0))}; }
Composite c_concat{"concat(Tensor[] tensors, int dim=0) -> Tensor", cat_c, kFunctionVariant};
Composite c_concatenate{"concatenate(Tensor[] tensors, int dim=0) -> Tensor", cat_c, kFunctionVariant};
Composite c_stack{"stack(Tensor[] tensors, int dim=0) -> Tensor",
                  [](const TensorList& in, const Attrs& a) -> TensorList { return {stack(in, attr<int64_t>(a, 0))}; },
                  kFunctionVariant};
Composite c_hstack{"hstack(Tensor[] tensors) -> Tensor",
                   [](const TensorList& in, const Attrs&) -> TensorList { return {hstack(in)}; }, kFunctionVariant};
Composite c_vstack{"vstack(Tensor[] tensors) -> Tensor",
                   [](const TensorList& in, const Attrs&) -> TensorList { return {vstack(in)}; }, kFunctionVariant};

// The factories' keyword tail, `*, ScalarType? dtype=None, Device? device=None, bool requires_grad=False`,
// from attribute i on.
#define KILN_FACTORY_KW "*, ScalarType? dtype=None, Device? device=None, bool requires_grad=False"
// the keyword tail from attribute i on: dtype, device, requires_grad
TensorOptions options_at(const Attrs& a, size_t i) { return options_attr(a, i); }
TensorList made(const Tensor& t, const Attrs& a, size_t i) { return factory_result(t, a, i + 2); }
TensorOptions like_options(const Tensor& t, const Attrs& a, size_t i) { return like_options_attr(t, a, i); }
Composite c_scalar_tensor{"scalar_tensor(Scalar s, " KILN_FACTORY_KW ") -> Tensor",
                          [](const TensorList&, const Attrs& a) -> TensorList {
                            TensorOptions o = options_at(a, 1);
                            Tensor t = scalar_tensor(attr<Scalar>(a, 0), o.dtype_or_default());
                            return made(o.device_.type == t.device().type ? t : to_device(t, o.device_), a, 1);
                          },
                          kFunctionVariant};
Composite c_zeros{"zeros(SymInt[] size, " KILN_FACTORY_KW ") -> Tensor",
                  [](const TensorList&, const Attrs& a) -> TensorList {
                    return made(zeros(attr<Shape>(a, 0), options_at(a, 1)), a, 1);
                  },
                  kFunctionVariant};
Composite c_ones{"ones(SymInt[] size, " KILN_FACTORY_KW ") -> Tensor",
                 [](const TensorList&, const Attrs& a) -> TensorList {
                   return made(ones(attr<Shape>(a, 0), options_at(a, 1)), a, 1);
                 },
                 kFunctionVariant};
Composite c_empty{"empty(SymInt[] size, " KILN_FACTORY_KW ") -> Tensor",
                  [](const TensorList&, const Attrs& a) -> TensorList {
                    return made(empty(attr<Shape>(a, 0), options_at(a, 1)), a, 1);
                  },
                  kFunctionVariant};
// full: the dtype follows the fill value when not given (bool, int64, the default float or complex)
Composite c_full{"full(SymInt[] size, Scalar fill_value, " KILN_FACTORY_KW ") -> Tensor",
                 [](const TensorList&, const Attrs& a) -> TensorList {
                   return made(full(attr<Shape>(a, 0), attr<Scalar>(a, 1), options_at(a, 2)), a, 2);
                 },
                 kFunctionVariant};
Composite c_zeros_like{"zeros_like(Tensor self, " KILN_FACTORY_KW ") -> Tensor",
                       [](const TensorList& in, const Attrs& a) -> TensorList {
                         return made(zeros(in[0].sizes(), like_options(in[0], a, 0)), a, 0);
                       },
                       kFunctionVariant};
Composite c_ones_like{"ones_like(Tensor self, " KILN_FACTORY_KW ") -> Tensor",
                      [](const TensorList& in, const Attrs& a) -> TensorList {
                        return made(ones(in[0].sizes(), like_options(in[0], a, 0)), a, 0);
                      },
                      kFunctionVariant};
Composite c_empty_like{"empty_like(Tensor self, " KILN_FACTORY_KW ") -> Tensor",
                       [](const TensorList& in, const Attrs& a) -> TensorList {
                         return made(empty(in[0].sizes(), like_options(in[0], a, 0)), a, 0);
                       },
                       kFunctionVariant};
Composite c_full_like{"full_like(Tensor self, Scalar fill_value, " KILN_FACTORY_KW ") -> Tensor",
                      [](const TensorList& in, const Attrs& a) -> TensorList {
                        return made(full(in[0].sizes(), attr<Scalar>(a, 0), like_options(in[0], a, 1)), a, 1);
                      },
                      kFunctionVariant};
// arange(end) and arange(start, end, step=1): int64 for integer bounds, else the default dtype
Composite c_arange{"arange(Scalar end, " KILN_FACTORY_KW ") -> Tensor",
                   [](const TensorList&, const Attrs& a) -> TensorList {
                     return made(arange(attr<Scalar>(a, 0), options_at(a, 1)), a, 1);
                   },
                   kFunctionVariant};
Composite c_arange_start{"arange.start_step(Scalar start, Scalar end, Scalar step=1, " KILN_FACTORY_KW ") -> Tensor",
                         [](const TensorList&, const Attrs& a) -> TensorList {
                           return made(arange(attr<Scalar>(a, 0), attr<Scalar>(a, 1), attr<Scalar>(a, 2),
                                              options_at(a, 3)), a, 3);
                         },
                         kFunctionVariant};
Composite c_linspace{"linspace(Scalar start, Scalar end, int steps, " KILN_FACTORY_KW ") -> Tensor",
                     [](const TensorList&, const Attrs& a) -> TensorList {
                       return made(linspace(attr<Scalar>(a, 0), attr<Scalar>(a, 1), attr<int64_t>(a, 2),
                                            options_at(a, 3)), a, 3);
                     },
                     kFunctionVariant};
Composite c_logspace{"logspace(Scalar start, Scalar end, int steps, float base=10.0, " KILN_FACTORY_KW ") -> Tensor",
                     [](const TensorList&, const Attrs& a) -> TensorList {
                       return made(logspace(attr<Scalar>(a, 0), attr<Scalar>(a, 1), attr<int64_t>(a, 2),
                                            attr<double>(a, 3), options_at(a, 4)), a, 4);
                     },
                     kFunctionVariant};
Composite c_eye{"eye(int n, int? m=None, " KILN_FACTORY_KW ") -> Tensor",
                [](const TensorList&, const Attrs& a) -> TensorList {
                  return made(eye(attr<int64_t>(a, 0), opt_attr<int64_t>(a, 1), options_at(a, 2)), a, 2);
                },
                kFunctionVariant};
#undef KILN_FACTORY_KW
// out= without dtype=: the factory makes out's dtype (torch's zeros(3, out=o) is o's dtype)
CompositeTags t_zeros{c_zeros, kDtypeFromOut}, t_ones{c_ones, kDtypeFromOut}, t_empty{c_empty, kDtypeFromOut},
    t_full{c_full, kDtypeFromOut}, t_arange{c_arange, kDtypeFromOut}, t_arange_start{c_arange_start, kDtypeFromOut},
    t_linspace{c_linspace, kDtypeFromOut}, t_logspace{c_logspace, kDtypeFromOut}, t_eye{c_eye, kDtypeFromOut};

// fill_, zero_, copy_ (in place only), clone, contiguous, and the dtype casts
Composite c_fill{"fill.Scalar(Tensor self, Scalar value) -> Tensor",
                 [](const TensorList& in, const Attrs& a) -> TensorList {
                   return {full(in[0].sizes(), attr<Scalar>(a, 0), like(in[0], in[0].dtype()))};
                 },
                 kInplaceVariant, 0,
                 [](const TensorList& in, const Attrs& a) -> TensorList { return {fill_(in[0], attr<Scalar>(a, 0))}; }};
Composite c_zero{"zero(Tensor self) -> Tensor",
                 [](const TensorList& in, const Attrs&) -> TensorList { return {zeros_like(in[0])}; }, kInplaceVariant, 0,
                 [](const TensorList& in, const Attrs&) -> TensorList { return {zero_(in[0])}; }};
Composite c_copy{"copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor",
                 [](const TensorList& in, const Attrs&) -> TensorList { return {clone(in[1])}; }, kInplaceVariant, 0b10,
                 [](const TensorList& in, const Attrs&) -> TensorList { return {copy_(in[0], in[1])}; }};
Composite c_clone{"clone(Tensor self) -> Tensor",
                  [](const TensorList& in, const Attrs&) -> TensorList { return {clone(in[0])}; }, kFunctionAndMethod};
Composite c_contiguous{"contiguous(Tensor self) -> Tensor",
                       [](const TensorList& in, const Attrs&) -> TensorList { return {contiguous(in[0])}; },
                       kMethodVariant};
#define KILN_CAST(name, dt)                                                                               \
  Composite c_cast_##name{#name "(Tensor self) -> Tensor",                                               \
                          [](const TensorList& in, const Attrs&) -> TensorList { return {to_dtype(in[0], dt)}; }, \
                          kMethodVariant};
KILN_CAST(float, kFloat32) KILN_CAST(double, kFloat64) KILN_CAST(half, kFloat16) KILN_CAST(bfloat16, kBFloat16)
KILN_CAST(int, kInt32) KILN_CAST(long, kInt64) KILN_CAST(bool, kBool) KILN_CAST(short, kInt16)
KILN_CAST(byte, kUInt8) KILN_CAST(char, kInt8) KILN_CAST(cfloat, kComplex64) KILN_CAST(cdouble, kComplex128)
#undef KILN_CAST
}  // namespace

}  // namespace kiln
