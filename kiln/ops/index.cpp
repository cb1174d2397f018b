// Indexing ops: index_select, gather, masked_fill, masked_select, nonzero, flip, tril/triu.
// Indices are checked before any write: out-of-range raises IndexError, never a crash. This file: the
// op-table entries, schemas, metas and front ends; the CPU kernels are kiln/backend/cpu/index.cpp's.
#include <cstring>

#include "kiln/ops/composite.h"
#include "kiln/autograd/autograd.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

// ---- index_select(x, dim, index) ------------------------------------------------------------------
SpecList index_select_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const TensorSpec &x = in[0], &idx = in[1];
  int64_t d = wrap_dim(std::get<int64_t>(a[0]), x.dim(), "index_select");
  KILN_CHECK(idx.dim() <= 1, Index, "index_select", "index_select(): Index is supposed to be a vector");
  KILN_CHECK(idx.dtype() == kInt64 || idx.dtype() == kInt32, Runtime, "index_select",
             "index_select(): Expected dtype int32 or int64 for index");
  KILN_CHECK(x.dim() > 0 || idx.numel() <= 1, Runtime, "index_select",
             "index_select(): Index to scalar can have only 1 value, got ", idx.numel(), " value(s)");
  SymShape s = x.sizes();
  if (x.dim() > 0) s[d] = idx.numel();
  return {{s, x.dtype()}};
}

OpDef op_index_select{"index_select", kOutExactDtype, index_select_meta, {}};
OpRegistrar reg_index_select{op_index_select, "index_select(Tensor self, int dim, Tensor index) -> Tensor", kFunctionAndMethod};

// ---- gather(x, dim, index) ------------------------------------------------------------------------
SpecList gather_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const TensorSpec &x = in[0], &idx = in[1];
  int64_t d = wrap_dim(std::get<int64_t>(a[0]), x.dim(), "gather");
  KILN_CHECK(idx.dtype() == kInt64 || idx.dtype() == kInt32, Runtime, "gather",
             "gather(): Expected dtype int32/int64 for index");
  KILN_CHECK(idx.dim() == x.dim() || (idx.dim() <= 1 && x.dim() <= 1), Runtime, "gather",
             "Index tensor must have the same number of dimensions as input tensor");
  for (int64_t i = 0; i < idx.dim(); ++i)
    KILN_CHECK(i == d || idx.sizes()[i] <= x.sizes()[i], Runtime, "gather", "Size does not match at dimension ", i,
               " expected index ", idx.sizes(), " to be smaller than self ", x.sizes(), " apart from dimension ", d);
  return {{idx.sizes(), x.dtype()}};
}
OpDef op_gather{"gather", kOutExactDtype, gather_meta, {}};
OpRegistrar reg_gather{op_gather, "gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor", kFunctionAndMethod};

// ---- nonzero ----------------------------------------------------------------------------------------
// (count, ndim), the count a data-dependent size in [0, numel]
SpecList nonzero_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  const auto n = in[0].numel().maybe_int();
  return {{{unbacked_size(op.name, 0, n ? *n : ShapeEnv::kInf), in[0].dim()}, kInt64}};
}
OpDef op_nonzero{"nonzero", kDynamicShape | kOutExactDtype, nonzero_meta, {}};
OpRegistrar reg_nonzero{op_nonzero, "nonzero(Tensor self) -> Tensor"};

// ---- masked_select ----------------------------------------------------------------------------------
SpecList masked_select_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  KILN_CHECK(in[1].dtype() == kBool, Runtime, op.name, "masked_select: expected BoolTensor for mask");
  const SymInt n = sym_numel(broadcast_shapes(in[0].sizes(), in[1].sizes(), op.name));
  return {{{unbacked_size(op.name, 0, n.maybe_int().value_or(ShapeEnv::kInf))}, in[0].dtype()}};
}
OpDef op_masked_select{"masked_select", kDynamicShape | kOutExactDtype, masked_select_meta, {}};
OpRegistrar reg_masked_select{op_masked_select, "masked_select(Tensor self, Tensor mask) -> Tensor", kFunctionAndMethod};

// ---- flip -------------------------------------------------------------------------------------------
// the dims are checked here, so a meta run raises as the real one does
SpecList flip_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  const int64_t n = in[0].dim();
  Shape seen;
  for (int64_t d0 : std::get<Shape>(a[0])) {
    int64_t d = wrap_dim(d0, n, "flip");
    for (int64_t e : seen)
      KILN_CHECK(e != d, Runtime, "flip", "dim ", d, " appears multiple times in the list of dims");
    seen.push_back(d);
  }
  return {{in[0].sizes(), in[0].dtype()}};
}
OpDef op_flip{"flip", 0, flip_meta, {}};
OpRegistrar reg_flip{op_flip, "flip(Tensor self, int[] dims) -> Tensor", kFunctionAndMethod};

// ---- tril / triu (attrs: diagonal; code 0 tril, 1 triu) --------------------------------------------
SpecList tri_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  KILN_CHECK(in[0].dim() >= 2, Runtime, op.name, op.name, ": input tensor must have at least 2 dimensions");
  return {{in[0].sizes(), in[0].dtype()}};
}
OpDef op_tril{"tril", kOutExactDtype, tri_meta, {}, 0};
OpRegistrar reg_tril{op_tril, "tril(Tensor self, int diagonal=0) -> Tensor", kAllVariants};
OpDef op_triu{"triu", kOutExactDtype, tri_meta, {}, 1};
OpRegistrar reg_triu{op_triu, "triu(Tensor self, int diagonal=0) -> Tensor", kAllVariants};

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  return dispatch1(op_index_select, {x, index}, {dim});
}
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) { return dispatch1(op_gather, {x, index}, {dim}); }
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  KILN_CHECK(mask.dtype() == kBool, Runtime, "masked_fill", "masked_fill_ only supports boolean masks, but got "
             "mask with dtype ", dtype_name(mask.dtype()));
  check_scalar_fits("masked_fill", value, x.dtype());
  Tensor r = where(mask, scalar_tensor(value, x.dtype()), x);
  KILN_CHECK(r.sizes() == x.sizes(), Runtime, "masked_fill", "mask of shape ", mask.sizes(),
             " does not broadcast to input of shape ", x.sizes());
  return r;
}
Tensor masked_select(const Tensor& x, const Tensor& mask) { return dispatch1(op_masked_select, {x, mask}); }
Tensor nonzero(const Tensor& x) { return dispatch1(op_nonzero, {x}); }
Tensor flip(const Tensor& x, const Shape& dims) { return dispatch1(op_flip, {x}, {dims}); }
Tensor tril(const Tensor& x, int64_t k) { return dispatch1(op_tril, {x}, {k}); }
Tensor triu(const Tensor& x, int64_t k) { return dispatch1(op_triu, {x}, {k}); }

}  // namespace kiln

// ---- advanced indexing: index / index_put_ ----------------------------------------------------------
namespace kiln {
namespace {

// Integer indices: the broadcast index shape replaces the indexed dims (in place when they are
// adjacent, first otherwise), as torch; a bool / uint8 mask's count is the data's (a size symbol in a
// trace, NotImplementedError on meta tensors outside one).
SpecList index_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  const TensorSpec& x = in[0];
  SymShape bshape;
  bool first = true, adjacent = true;
  int64_t lo = -1, hi = -1;
  int64_t d = 0;
  for (size_t i = 1; i < in.size(); ++i) {
    const TensorSpec& t = in[i];
    if (!t.defined()) {
      ++d;
      continue;
    }
    if (t.dtype() == kBool || t.dtype() == kUInt8) return {{{unbacked_size(op.name)}, x.dtype()}};
    KILN_CHECK(is_integral(t.dtype(), false), Index, op.name,
               "tensors used as indices must be long, int, byte or bool tensors");
    if (lo >= 0 && d != hi + 1) adjacent = false;
    if (lo < 0) lo = d;
    hi = d;
    bshape = first ? t.sizes() : broadcast_shapes(bshape, t.sizes(), op.name);
    first = false;
    ++d;
  }
  KILN_CHECK(d <= x.dim(), Index, op.name, "too many indices for tensor of dimension ", x.dim());
  SymShape r;
  if (lo < 0) return {{x.sizes(), x.dtype()}};
  if (adjacent) {
    for (int64_t j = 0; j < lo; ++j) r.push_back(x.sizes()[j]);
    r.insert(r.end(), bshape.begin(), bshape.end());
  } else {
    r = bshape;
    for (int64_t j = 0; j < lo; ++j) r.push_back(x.sizes()[j]);
  }
  for (int64_t j = adjacent ? hi + 1 : lo; j < x.dim(); ++j) {
    if (!adjacent) {
      bool indexed = false;
      if (j <= hi && static_cast<size_t>(j + 1) < in.size()) indexed = in[j + 1].defined();
      if (indexed) continue;
    }
    r.push_back(x.sizes()[j]);
  }
  return {{r, x.dtype()}};
}

OpDef op_index{"index", kDynamicShape, index_meta, {}};
OpRegistrar reg_index{op_index, "index.Tensor(Tensor self, Tensor?[] indices) -> Tensor"};

// In place: the output is self (the indices' shapes broadcast against the values; a mask's count is the data's).
SpecList index_put_meta(const OpDef&, const SpecList& in, const Attrs&) { return {{in[0].sizes(), in[0].dtype()}}; }
OpDef op_index_put{"index_put_", kDynamicShape, index_put_meta, {}};
OpRegistrar reg_index_put{op_index_put, "index_put_(Tensor(a!) self, Tensor values, Tensor?[] indices, bool accumulate) -> Tensor(a!)"};

}  // namespace

Tensor index(const Tensor& x, const TensorList& indices) {
  TensorList in{x};
  in.insert(in.end(), indices.begin(), indices.end());
  return dispatch1(op_index, in);
}

const Tensor& index_put_(const Tensor& x, const TensorList& indices, const Tensor& values, bool accumulate) {
  TensorList in{x, values};
  in.insert(in.end(), indices.begin(), indices.end());
  dispatch(op_index_put, in, {accumulate});
  return x;
}

// index_put with torch's argument checks (the Python __setitem__ / index_put path).
using shape_detail::not_implemented;
using shape_detail::torch_type_name;
const Tensor& index_put_checked_(const Tensor& x, const TensorList& indices, const Tensor& values, bool accumulate) {
  const char* op = "index_put_";
  KILN_CHECK(static_cast<int64_t>(indices.size()) <= x.dim(), Index, op, "too many indices for tensor of dimension ",
             x.dim(), " (got ", indices.size(), ")");
  // torch fills through masked_fill_ for a single mask index and a one-element value
  if (!accumulate && bool(values.sym_numel() == 1)) {  // (a trace: decided by the sizes' ranges where it can be)
    Tensor mask;
    bool ok = true;
    int64_t num_ind = 0;
    for (const Tensor& t : indices) {
      if (!t.defined()) {
        ++num_ind;
        continue;
      }
      if ((t.dtype() != kBool && t.dtype() != kUInt8) || mask.defined()) {
        ok = false;
        break;
      }
      mask = t;
      for (int64_t j = 0; j < t.dim(); ++j) {
        int64_t src = num_ind + j;
        KILN_CHECK(src < x.dim(), Index, op, "Dimension out of range (expected to be in range of [", -x.dim(), ", ",
                   x.dim() - 1, "], but got ", src, ")");
        KILN_CHECK(bool(t.sym_size(j) == x.sym_size(src)), Index, op, "The shape of the mask ", t.sizes(), " at index ", j,
                   " does not match the shape of the indexed tensor ", x.sizes(), " at index ", src);
      }
      num_ind += t.dim();
    }
    if (ok) {
      KILN_CHECK(mask.defined(), Runtime, op, "sym_strides() called on an undefined Tensor");
      KILN_CHECK(mask.dtype() == kBool, Runtime, op, "masked_fill_ only supports boolean masks, but got mask with "
                 "dtype unsigned char");
      if (is_barebones_unsigned(x.dtype())) not_implemented(op, "masked_fill", x.dtype());
      Scalar v = values.item();
      shape_detail::check_scalar_fits(v, x.dtype(), op);
      // a value that requires grad stays a tensor, so its gradient (the masked sum) flows back
      Tensor val = grad_mode_enabled() && requires_grad(values) ? to_dtype(reshape(values, {}), x.dtype())
                                                                : scalar_tensor(v, x.dtype());
      return kiln::index_put_(x, indices, val, false);
    }
  }
  bool any = false;
  for (const Tensor& t : indices) {
    if (!t.defined()) continue;
    any = true;
    Dtype d = t.dtype();
    KILN_CHECK(d == kInt64 || d == kInt32 || d == kUInt8 || d == kBool, Index, op,
               "tensors used as indices must be long, int, byte or bool tensors");
  }
  KILN_CHECK(any, Runtime, op, "sym_strides() called on an undefined Tensor");
  int64_t d = 0;
  for (const Tensor& t : indices) {
    if (t.defined() && t.dtype() != kBool && t.dtype() != kUInt8)
      KILN_CHECK(!(bool(x.sym_size(d) == 0) && bool(t.sym_numel() > 0)), Index, op,
                 "index is out of bounds for dimension with size 0");
    d += t.defined() && (t.dtype() == kBool || t.dtype() == kUInt8) ? t.dim() : 1;
    if (d >= x.dim()) break;
  }
  KILN_CHECK(values.dtype() == x.dtype(), Runtime, op, "Index put requires the source and destination dtypes match, "
             "got ", torch_type_name(x.dtype()), " for the destination and ", torch_type_name(values.dtype()),
             " for the source.");
  if (is_barebones_unsigned(x.dtype())) not_implemented(op, accumulate ? "index_put_with_sort" : "index_put", x.dtype());
  if (accumulate && is_float8(x.dtype())) {
    // kiln's accumulate kernel has no float8 arithmetic: accumulate in float32 and round once per index
    Tensor tmp = to_dtype(x, kFloat32);
    kiln::index_put_(tmp, indices, to_dtype(values, kFloat32), true);
    copy_(x, tmp);
    return x;
  }
  return kiln::index_put_(x, indices, values, accumulate);
}

Tensor index_put(const Tensor& x, const TensorList& indices, const Tensor& values, bool accumulate) {
  Tensor y = clone(x);
  index_put_checked_(y, indices, values, accumulate);
  return y;
}


// ---- composites with torch's schemas (ops/composite.h): their public forms come from these -------
namespace {
Composite c_masked_fill{"masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor",
                        [](const TensorList& in, const Attrs& a) -> TensorList {
                          return {masked_fill(in[0], in[1], attr<Scalar>(a, 0))};
                        },
                        kAllVariants};
Composite c_argwhere{"argwhere(Tensor self) -> Tensor",
                     [](const TensorList& in, const Attrs&) -> TensorList { return {nonzero(in[0])}; },
                     kFunctionAndMethod};
}  // namespace

}  // namespace kiln
