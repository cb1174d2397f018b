// Scatter-style indexing ops: scatter / scatter_add / scatter_reduce, index_add / index_copy / index_fill,
// masked_scatter, take / take_along_dim / put, and torch.index_put with torch's argument checks: the
// op-table entries with their schemas and meta functions, and the front ends. The CPU kernels are
// kiln/backend/cpu/scatter.cpp's, registered there by op name (register_kernel).
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kiln/core/convert.h"
#include "kiln/core/visit.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/scatter_detail.h"
#include "kiln/ops/shape.h"

namespace kiln {

using shape_detail::check_scalar_fits;
using shape_detail::not_implemented;
using shape_detail::torch_type_name;

namespace {

using namespace scatter_detail;

// ---- scatter / scatter_add / scatter_reduce -----------------------------------------------------------

// The shape checks of torch's scatter_meta_impl (dtype, then sizes, then the reduce name).
SpecList scatter_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec &x = in[0], &idx = in[1];
  const TensorSpec* src = op.code == kScValue ? nullptr : &in[2];
  int64_t dim = wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  if (idx.numel() != 0)
    KILN_CHECK(idx.dtype() == kInt64 || idx.dtype() == kInt32, Runtime, op.name,
               "scatter(): Expected dtype int32/int64 for index");
  if (src)
    KILN_CHECK(x.dtype() == src->dtype(), Runtime, op.name, "scatter(): Expected self.dtype to be equal to src.dtype");
  if (idx.numel() != 0) {
    KILN_CHECK(nonempty_dim(x) == nonempty_dim(idx), Runtime, op.name,
               "Index tensor must have the same number of dimensions as self tensor");
    bool wrong = false;
    int64_t nd = nonempty_dim(x);
    for (int64_t d = 0; d < nd && !wrong; ++d)
      if (d != dim && nonempty_size(idx, d) > nonempty_size(x, d)) wrong = true;
    if (!wrong && src)
      for (int64_t d = 0; d < nd && !wrong; ++d)
        if (nonempty_size(idx, d) > checked_size(*src, d, op.name)) wrong = true;
    if (wrong) {
      if (src)
        KILN_FAIL(Runtime, op.name, "Expected index ", idx.sizes(), " to be no larger than self ", x.sizes(),
                  " apart from dimension ", dim, " and to be no larger size than src ", src->sizes());
      KILN_FAIL(Runtime, op.name, "Expected index ", idx.sizes(), " to be no larger than self ", x.sizes(),
                " apart from dimension ", dim);
    }
  }
  switch (op.code) {
    case kScSrc: legacy_reduce(attr<std::string>(a, 1), op.name); break;
    case kScValue: legacy_reduce(attr<std::string>(a, 2), op.name); break;
    case kScReduce: two_reduce(attr<std::string>(a, 1), op.name); break;
    default: break;
  }
  return {{x.sizes(), x.dtype()}};
}

OpDef op_scatter{"scatter", kInplaceable | kOutExactDtype, scatter_meta, {}, kScSrc};
OpRegistrar reg_scatter{op_scatter, "scatter.src(Tensor self, Tensor index, Tensor src, int dim, str reduce) -> Tensor"};
OpDef op_scatter_value{"scatter.value", kInplaceable | kOutExactDtype, scatter_meta, {}, kScValue};
OpRegistrar reg_scatter_value{op_scatter_value, "scatter.value(Tensor self, Tensor index, int dim, Scalar value, str reduce) -> Tensor"};
OpDef op_scatter_add{"scatter_add", kInplaceable | kOutExactDtype, scatter_meta, {}, kScAdd};
OpRegistrar reg_scatter_add{op_scatter_add, "scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", kFunctionAndMethod};
OpDef op_scatter_reduce{"scatter_reduce", kInplaceable | kOutExactDtype, scatter_meta, {}, kScReduce};
OpRegistrar reg_scatter_reduce{op_scatter_reduce,
                                "scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, "
                                "bool include_self=True) -> Tensor",
                                kFunctionAndMethod};

SpecList index_add_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec &x = in[0], &idx = in[1], &src = in[2];
  int64_t dim = wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  SymInt numel = idx.numel();
  KILN_CHECK(idx.dim() <= 1, Index, op.name, "index_add_(): Index is supposed to be a vector, but got dim: ",
             idx.dim(), " with type: ", torch_type_name(idx.dtype()), " and size: ", idx.sizes());
  KILN_CHECK(idx.dtype() == kInt64 || idx.dtype() == kInt32, Runtime, op.name,
             "index_add_(): Expected dtype int32/int64 for index but got: ", torch_type_name(idx.dtype()));
  KILN_CHECK(x.dtype() == src.dtype(), Runtime, op.name, "index_add_(): self (", torch_type_name(x.dtype()),
             ") and source (", torch_type_name(src.dtype()), ") must have the same scalar type");
  KILN_CHECK(dim == 0 || dim < src.dim(), Runtime, op.name, "index_add_(): Indexing dim ", dim,
             " is out of bounds of the source tensor with dim ", src.dim());
  if (numel != (src.dim() == 0 ? 1 : src.sizes()[dim])) {
    KILN_CHECK(src.dim() != 0, Index, op.name, "Dimension specified as 0 but tensor has no dimensions");
    KILN_FAIL(Runtime, op.name, "index_add_(): Number of indices (", numel, ") should be equal to source.size(dim): (",
              src.sizes()[dim], "), for dim: ", dim);
  }
  SymShape xs = x.sizes(), ss = src.sizes();
  if (src.dim() != 0 && x.dim() != 0) {
    xs.erase(xs.begin() + dim);
    ss.erase(ss.begin() + dim);
  }
  KILN_CHECK(xs == ss, Runtime, op.name, "source tensor shape must match self tensor shape, excluding the specified "
             "dimension. Got self.shape = ", x.sizes(), " source.shape = ", src.sizes());
  return {{x.sizes(), x.dtype()}};
}

OpDef op_index_add{"index_add", kInplaceable | kOutExactDtype, index_add_meta, {}};
OpRegistrar reg_index_add{op_index_add, "index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor", kFunctionAndMethod};

SpecList index_copy_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec &x = in[0], &idx = in[1], &src = in[2];
  int64_t dim = wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  KILN_CHECK(idx.dim() < 2, Index, op.name, "index_copy_(): Index should have dimension 1 or 0 (got ", idx.dim(), ")");
  SymInt numel = idx.numel();
  if (src.dim() == 0 && numel != 1)
    KILN_FAIL(Index, op.name, "index_copy_(): When source is scalar, index should have one element (got ", numel, ")");
  if (src.dim() != x.dim() && src.dim() != 0 && x.dim() != 0)
    KILN_FAIL(Index, op.name, "index_copy_(): When source and destination are not scalars, their dimensionality "
              "must match. Source dimensionality (", src.dim(), "), destination dimensionality (", x.dim(), ")");
  KILN_CHECK(idx.dtype() == kInt64, Runtime, op.name, "index_copy_(): Expected a long tensor for index, but got ",
             torch_type_name(idx.dtype()));
  KILN_CHECK(x.dtype() == src.dtype(), Runtime, op.name, "index_copy_(): self and source expected to have the same "
             "dtype, but got (self) ", torch_type_name(x.dtype()), " and (source) ", torch_type_name(src.dtype()));
  SymShape xs = x.sizes(), ss = src.sizes();
  if (!xs.empty()) xs.erase(xs.begin() + dim);
  if (!ss.empty()) ss.erase(ss.begin() + dim);
  KILN_CHECK(xs == ss, Runtime, op.name, "index_copy_(): Source/destination tensor must have same slice shapes. "
             "Destination slice shape: ", xs, " and source slice shape: ", ss);
  KILN_CHECK(src.dim() == 0 || numel == src.sizes()[dim], Index, op.name, "index_copy_(): Number of indices (",
             numel, ") should be equal to source.size(dim) (", src.dim() ? src.sizes()[dim] : 1, ")");
  return {{x.sizes(), x.dtype()}};
}

OpDef op_index_copy{"index_copy", kInplaceable | kOutExactDtype, index_copy_meta, {}};
OpRegistrar reg_index_copy{op_index_copy, "index_copy(Tensor self, int dim, Tensor index, Tensor source) -> Tensor", kFunctionAndMethod};

SpecList index_fill_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec &x = in[0], &idx = in[1];
  KILN_CHECK(idx.dtype() == kInt64, Index, op.name, "index_fill_(): Expected dtype int64 for index.");
  const Scalar& v = attr<Scalar>(a, 1);
  KILN_CHECK(x.is_complex() || !v.is_complex(), Runtime, op.name,
             "index_fill_(): Converting complex Scalar to non-complex type is not supported");
  wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  KILN_CHECK(idx.dim() <= 1, Runtime, op.name, "Index has to be a vector/scalar");
  return {{x.sizes(), x.dtype()}};
}

OpDef op_index_fill{"index_fill", kInplaceable, index_fill_meta, {}};
OpRegistrar reg_index_fill{op_index_fill, "index_fill.int_Scalar(Tensor self, Tensor index, int dim, Scalar value) -> Tensor"};

SpecList masked_scatter_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  const TensorSpec &x = in[0], &mask = in[1], &src = in[2];
  SymShape s = broadcast_shapes(mask.sizes(), x.sizes(), op.name);
  check_masked_scatter(op, x, mask, src);
  return {{s, x.dtype()}};
}
OpDef op_masked_scatter{"masked_scatter", kInplaceable, masked_scatter_meta, {}};
OpRegistrar reg_masked_scatter{op_masked_scatter, "masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor", kFunctionAndMethod};

// ---- take / put ---------------------------------------------------------------------------------------
SpecList take_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  const TensorSpec &x = in[0], &idx = in[1];
  KILN_CHECK(idx.dtype() == kInt64, Runtime, op.name, "take(): Expected a long tensor for index, but got ",
             torch_type_name(idx.dtype()));
  KILN_CHECK(!(x.numel() == 0 && idx.numel() != 0), Index, op.name, "take(): tried to take from an empty tensor");
  return {{idx.sizes(), x.dtype()}};
}
OpDef op_take{"take", kOutExactDtype, take_meta, {}};
OpRegistrar reg_take{op_take, "take(Tensor self, Tensor index) -> Tensor", kFunctionAndMethod};

SpecList put_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  const TensorSpec &x = in[0], &idx = in[1], &src = in[2];
  KILN_CHECK(idx.dtype() == kInt64, Runtime, op.name, "put_(): Expected a long tensor for index, but got ",
             torch_type_name(idx.dtype()));
  KILN_CHECK(x.dtype() == src.dtype(), Runtime, op.name, "put_(): self and source expected to have the same dtype, "
             "but got self.dtype = ", torch_type_name(x.dtype()), " and source.dtype = ", torch_type_name(src.dtype()));
  KILN_CHECK(src.numel() == idx.numel(), Index, op.name, "put_(): Expected source and index to have the same number "
             "of elements, but got source.numel() = ", src.numel(), ", index.numel() = ", idx.numel());
  KILN_CHECK(!(x.numel() == 0 && idx.numel() != 0), Index, op.name, "put_(): Tried to put elements into an empty tensor");
  return {{x.sizes(), x.dtype()}};
}
OpDef op_put{"put", kInplaceable, put_meta, {}};
OpRegistrar reg_put{op_put, "put(Tensor self, Tensor index, Tensor source, bool accumulate=False) -> Tensor", kFunctionAndMethod};

// ---- gather without index wrapping (take_along_dim) ------------------------------------------------------
// inputs: x, index (int64, same rank, broadcast already); attrs {dim}. Indices must lie in [0, size).
SpecList tad_gather_meta(const OpDef&, const SpecList& in, const Attrs&) {
  return {{in[1].sizes(), in[0].dtype()}};
}
OpDef op_tad_gather{"take_along_dim", kOutExactDtype, tad_gather_meta, {}};
OpRegistrar reg_tad_gather{op_tad_gather, "take_along_dim(Tensor self, Tensor indices, int dim) -> Tensor"};

std::string reduce_str(const std::optional<std::string>& r) { return r ? *r : std::string(); }

// torch's assert_no_internal_overlap for in-place writes: a broadcast (stride-0) self is refused.
void assert_no_internal_overlap(const Tensor& x, const char* op) {
  for (int64_t d = 0; d < x.dim(); ++d)
    KILN_CHECK(!(x.sizes()[d] > 1 && x.strides()[d] == 0), Runtime, op, "unsupported operation: more than one "
               "element of the written-to tensor refers to a single memory location. Please clone() the tensor before "
               "performing the operation.");
}

}  // namespace

// ---- public API -------------------------------------------------------------------------------------------
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
               const std::optional<std::string>& reduce) {
  return dispatch1(op_scatter, {x, index, src}, {dim, reduce_str(reduce)});
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value,
               const std::optional<std::string>& reduce) {
  return dispatch1(op_scatter_value, {x, index}, {dim, value, reduce_str(reduce)});
}
const Tensor& scatter_(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                       const std::optional<std::string>& reduce) {
  assert_no_internal_overlap(x, "scatter_");
  return dispatch_inplace(op_scatter, x, {x, index, src}, {dim, reduce_str(reduce)});
}
const Tensor& scatter_(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value,
                       const std::optional<std::string>& reduce) {
  assert_no_internal_overlap(x, "scatter_");
  return dispatch_inplace(op_scatter_value, x, {x, index}, {dim, value, reduce_str(reduce)});
}
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return dispatch1(op_scatter_add, {x, index, src}, {dim});
}
const Tensor& scatter_add_(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  assert_no_internal_overlap(x, "scatter_add_");
  return dispatch_inplace(op_scatter_add, x, {x, index, src}, {dim});
}
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                      bool include_self) {
  return dispatch1(op_scatter_reduce, {x, index, src}, {dim, reduce, include_self});
}
const Tensor& scatter_reduce_(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                              const std::string& reduce, bool include_self) {
  assert_no_internal_overlap(x, "scatter_reduce_");
  return dispatch_inplace(op_scatter_reduce, x, {x, index, src}, {dim, reduce, include_self});
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  return dispatch1(op_index_add, {x, index, source}, {dim, alpha});
}
const Tensor& index_add_(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                         const Scalar& alpha) {
  assert_no_internal_overlap(x, "index_add_");
  return dispatch_inplace(op_index_add, x, {x, index, source}, {dim, alpha});
}
Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
  return dispatch1(op_index_copy, {x, index, source}, {dim});
}
const Tensor& index_copy_(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
  assert_no_internal_overlap(x, "index_copy_");
  return dispatch_inplace(op_index_copy, x, {x, index, source}, {dim});
}
static Scalar fill_value_of(const Tensor& value, const char* op) {
  KILN_CHECK(value.dim() == 0, Runtime, op, "index_fill_ only supports a 0-dimensional value tensor, but got tensor "
             "with ", value.dim(), " dimension(s).");
  return value.item();
}
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  return dispatch1(op_index_fill, {x, index}, {dim, value});
}
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& value) {
  return index_fill(x, dim, index, fill_value_of(value, "index_fill"));
}
const Tensor& index_fill_(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  bool overlap = false;
  for (int64_t d = 0; d < x.dim(); ++d) overlap = overlap || (x.sizes()[d] > 1 && x.strides()[d] == 0);
  if (overlap) {
    // torch (deprecated, with a warning) fills an expanded self through its memory: every memory location
    // one of whose aliases is filled takes the value. Validate on a copy, then fill the collapsed view.
    index_fill(x, dim, index, value);
    int64_t d = wrap_dim(dim, x.dim(), "index_fill_");
    Shape sz = x.sizes();
    for (int64_t k = 0; k < x.dim(); ++k)
      if (x.strides()[k] == 0) sz[k] = 1;
    Tensor base = make_view(x, sz, x.strides(), x.storage_offset());
    Tensor idx = x.strides()[d] == 0 ? zeros_like(index) : index;
    dispatch_inplace(op_index_fill, base, {base, idx}, {d, value});
    return x;
  }
  return dispatch_inplace(op_index_fill, x, {x, index}, {dim, value});
}
const Tensor& index_fill_(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& value) {
  return index_fill_(x, dim, index, fill_value_of(value, "index_fill_"));
}

Tensor masked_scatter(const Tensor& x, const Tensor& mask, const Tensor& source) {
  return dispatch1(op_masked_scatter, {x, mask, source});
}
const Tensor& masked_scatter_(const Tensor& x, const Tensor& mask, const Tensor& source) {
  assert_no_internal_overlap(x, "masked_scatter_");
  check_masked_scatter(op_masked_scatter, x, mask, source);
  Shape s = broadcast_shapes(mask.sizes(), x.sizes(), "masked_scatter_");
  KILN_CHECK(s == x.sizes(), Runtime, "masked_scatter_", "mask of shape ", mask.sizes(),
             " cannot be broadcast to self of shape ", x.sizes());
  return dispatch_inplace(op_masked_scatter, x, {x, mask, source});
}

Tensor take(const Tensor& x, const Tensor& index) { return dispatch1(op_take, {x, index}); }

Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
  const char* op = "take_along_dim";
  if (!dim) {
    // torch: self.view(-1).gather(0, indices.view(-1)), indices in [0, numel)
    Tensor xf = view(x, {-1}), idf = view(indices, {-1});
    KILN_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32 || indices.numel() == 0, Runtime, op,
               "gather(): Expected dtype int32/int64 for index");
    return dispatch1(op_tad_gather, {xf, idf}, {int64_t(0)});
  }
  KILN_CHECK(x.dim() == indices.dim(), Runtime, op, "torch.take_along_dim(): input and indices should have the same "
             "number of dimensions, but got ", x.dim(), " dimensions for input, and ", indices.dim(),
             " dimensions for indices");
  KILN_CHECK(indices.dtype() == kInt64, Runtime, op, "torch.take_along_dim(): dtype of indices should be Long but got ",
             torch_type_name(indices.dtype()));
  KILN_CHECK(x.dim() > 0, Index, op, "Dimension specified as ", *dim, " but tensor has no dimensions");
  int64_t d = wrap_dim(*dim, x.dim(), op);
  Shape xs = x.sizes();
  xs[d] = indices.sizes()[d];
  Tensor ib = broadcast_to(indices, broadcast_shapes(xs, indices.sizes(), op));
  Shape is = indices.sizes();
  is[d] = x.sizes()[d];
  Tensor xb = broadcast_to(x, broadcast_shapes(is, x.sizes(), op));
  // torch 2.13 takes indices modulo the size (Python's floor modulo)
  int64_t n = x.sizes()[d];
  if (ib.numel() > 0) {
    KILN_CHECK(n != 0, Runtime, op, "ZeroDivisionError");
    ib = remainder(ib, Scalar(n));  // (an op: traced and batched like the rest)
  }
  return dispatch1(op_tad_gather, {xb, ib}, {d});
}

Tensor put(const Tensor& x, const Tensor& index, const Tensor& source, bool accumulate) {
  return dispatch1(op_put, {x, index, source}, {accumulate});
}
const Tensor& put_(const Tensor& x, const Tensor& index, const Tensor& source, bool accumulate) {
  assert_no_internal_overlap(x, "put_");
  return dispatch_inplace(op_put, x, {x, index, source}, {accumulate});
}

}  // namespace kiln
