// Searching and counting: searchsorted/bucketize, histc, bincount (declared in sort.h): the op-table
// entries, schemas, metas and front ends; the CPU kernels are kiln/backend/cpu/search.cpp's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kiln/ops/sort.h"
#include "kiln/ops/sort_detail.h"

namespace kiln {
namespace {

using namespace sort_detail;

// ---- searchsorted. inputs {boundaries, values[, sorter]} (one dtype); attrs {out_int32, right, has_sorter}
SpecList searchsorted_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec &bd = in[0], &v = in[1];
  bool out_int32 = attr<bool>(a, 0), has_sorter = attr<bool>(a, 2);
  KILN_CHECK(bd.dim() != 0, Runtime, op.name, "torch.searchsorted(): boundaries tensor should have positive "
             "dimension, but got 0 dimension");
  KILN_CHECK(v.dim() > 0 || bd.dim() == 1, Runtime, op.name, "torch.searchsorted(): input value can be a scalar "
             "only when boundaries tensor dimension is 1, but we got boundaries tensor dim(", bd.dim(),
             ") and input value's dim(", v.dim(), ") numel(", v.numel(), ")");
  if (bd.dim() != 1) {
    bool ok = v.dim() == bd.dim();
    for (int64_t i = 0; ok && i + 1 < bd.dim(); ++i) ok = bool(bd.sizes()[i] == v.sizes()[i]);
    KILN_CHECK(ok, Runtime, op.name, "torch.searchsorted(): boundaries tensor should be 1 dimension or the first "
               "N-1 dimensions of boundaries tensor and input value tensor must match, but we got boundaries "
               "tensor ", bd.sizes(), " and input value tensor ", v.sizes());
  }
  if (has_sorter) {
    const TensorSpec& st = in[2];
    KILN_CHECK(st.dtype() == kInt64, Runtime, op.name, "torch.searchsorted(): sorter must be a tensor of long "
               "dtype but got dtype ", dtype_name(st.dtype()));
    KILN_CHECK(st.sizes() == bd.sizes(), Runtime, op.name, "torch.searchsorted(): boundary and sorter must have "
               "the same size, but got boundary tensor ", bd.sizes(), " and got sorter tensor ", st.sizes());
  }
  if (!all_types_half(bd.dtype())) not_implemented(op.name, "searchsorted_out_cpu", bd.dtype());
  return {{v.sizes(), out_int32 ? kInt32 : kInt64}};
}

// torch's bounds: `!(mid >= val)` / `!(mid > val)`, so a NaN value lands past every element.
OpDef op_searchsorted{"searchsorted", kOutExactDtype, searchsorted_meta, {}};
OpRegistrar reg_searchsorted{op_searchsorted, "searchsorted(Tensor sorted_sequence, Tensor self, Tensor? sorter, bool out_int32, bool right, bool has_sorter) -> Tensor"};

// ---- histc(x, bins, min, max). attrs {bins, min, max} -------------------------------------------
SpecList histc_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  int64_t bins = attr<int64_t>(a, 0);
  if (!plain_float(x.dtype())) not_implemented(op.name, "histogram_cpu", x.dtype());
  KILN_CHECK(bins > 0, Runtime, op.name, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  return {{{bins}, x.dtype()}};
}

// Bin of an element inside [l, r], computed in T as torch does (each reduced-float op rounds).
OpDef op_histc{"histc", kOutExactDtype, histc_meta, {}};
OpRegistrar reg_histc{op_histc, "histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor", kFunctionAndMethod};

// ---- bincount(x[, weights]). attrs {minlength, has_weights} -----------------------------------------
OpDef op_bincount{"bincount", kDynamicShape, nullptr, {}};
OpRegistrar reg_bincount{op_bincount, "bincount(Tensor self, Tensor? weights, int minlength, bool has_weights) -> Tensor"};

}  // namespace

Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& input, bool out_int32, bool right,
                    const std::optional<std::string>& side, const Tensor& sorter) {
  bool is_right = right;
  if (side) {
    KILN_CHECK(*side == "left" || *side == "right", Runtime, "searchsorted",
               "torch.searchsorted(): side can only be 'left' or 'right' but got ", *side);
    KILN_CHECK(!right || *side == "right", Runtime, "searchsorted", "torch.searchsorted(): side and right can't "
               "be set to opposites, got side of ", *side, " while right was True");
    is_right = *side == "right";
  }
  Tensor bd = sorted_sequence, v = input;
  if (bd.dtype() != v.dtype()) {  // both to the promoted dtype (a Python number counts as wrapped)
    Dtype c = result_type(bd, v);
    bd = to_dtype(bd, c);
    v = to_dtype(v, c);
  }
  TensorList ins{bd, v};
  if (sorter.defined()) ins.push_back(sorter);
  return dispatch1(op_searchsorted, ins, {out_int32, is_right, sorter.defined()});
}
Tensor searchsorted(const Tensor& sorted_sequence, const Scalar& input, bool out_int32, bool right,
                    const std::optional<std::string>& side, const Tensor& sorter) {
  return searchsorted(sorted_sequence, scalar_tensor(input, Dtype::Undefined, true), out_int32, right, side, sorter);
}
Tensor bucketize(const Tensor& input, const Tensor& boundaries, bool out_int32, bool right) {
  KILN_CHECK(boundaries.dim() == 1, Runtime, "bucketize", "boundaries tensor must be 1 dimension, but got dim(",
             boundaries.dim(), ")");
  return searchsorted(boundaries, input, out_int32, right);
}
Tensor bucketize(const Scalar& input, const Tensor& boundaries, bool out_int32, bool right) {
  return bucketize(scalar_tensor(input, Dtype::Undefined, true), boundaries, out_int32, right);
}

Tensor histc(const Tensor& x, int64_t bins, const Scalar& min, const Scalar& max) {
  return dispatch1(op_histc, {x}, {bins, min, max});
}
Tensor bincount(const Tensor& x, const Tensor& weights, int64_t minlength) {
  if (weights.defined()) return dispatch1(op_bincount, {x, weights}, {minlength, true});
  return dispatch1(op_bincount, {x}, {minlength, false});
}

}  // namespace kiln
