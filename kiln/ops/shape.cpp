// Shape ops: roll, rot90, repeat / tile, repeat_interleave, diag / diag_embed, meshgrid, and the
// torch.nn.functional block pad / one_hot / embedding.
//
// This file: the op-table entries, schemas, metas and front ends. The CPU kernels are
// kiln/backend/cpu/shape.cpp's: roll, repeat, pad and embedding share one gather kernel there (every
// output element is read from one input position given by a per-dimension source map, or is a fill
// value). All validation happens before that kernel runs; its parallel loop cannot fail.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kiln/core/visit.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"
#include "kiln/core/stream.h"

namespace kiln {

using shape_detail::check_scalar_fits;
using shape_detail::not_implemented;
using shape_detail::torch_type_name;

namespace {

// ---- roll -------------------------------------------------------------------------------------------------
void check_roll(const TensorSpec& x, const Shape& shifts, const Shape& dims) {
  const char* op = "roll";
  if (!(dims.size() == 1 && shifts.size() == 1)) {
    KILN_CHECK(!shifts.empty(), Runtime, op, "`shifts` required");
    if (!(dims.empty() && shifts.size() == 1))
      KILN_CHECK(shifts.size() == dims.size(), Runtime, op, "shifts and dimensions must align. shifts: ", shifts.size(),
                 ", dims:", dims.size());
  }
  if (bool(x.numel() == 0)) return;  // torch returns a clone before looking at dims
  for (int64_t d : dims) {
    KILN_CHECK(x.dim() > 0, Index, op, "Dimension specified as ", d, " but tensor has no dimensions");
    wrap_dim(d, x.dim(), op);
  }
}
SpecList roll_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  check_roll(in[0], attr<Shape>(a, 0), attr<Shape>(a, 1));
  return {{in[0].sizes(), in[0].dtype()}};
}
OpDef op_roll{"roll", 0, roll_meta, {}};
OpRegistrar reg_roll{op_roll, "roll(Tensor self, int[1] shifts, int[1] dims=[]) -> Tensor", kFunctionAndMethod};

// ---- repeat ----------------------------------------------------------------------------------------------
SymShape repeat_shape(const TensorSpec& x, const Shape& r) {
  KILN_CHECK(static_cast<int64_t>(r.size()) >= x.dim(), Runtime, "repeat",
             "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  int64_t lead = static_cast<int64_t>(r.size()) - x.dim();
  SymShape s(r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    SymInt xs = static_cast<int64_t>(i) < lead ? SymInt(1) : x.sizes()[i - lead];
    s[i] = xs * r[i];
  }
  for (SymInt v : s)
    KILN_CHECK(v >= 0, Runtime, "repeat", "Trying to create tensor with negative dimension ", v, ": ", s);
  return s;
}
SpecList repeat_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  return {{repeat_shape(in[0], attr<Shape>(a, 0)), in[0].dtype()}};
}
OpDef op_repeat{"repeat", 0, repeat_meta, {}};
OpRegistrar reg_repeat{op_repeat, "repeat(Tensor self, int[] repeats) -> Tensor", kMethodVariant};  // x.repeat(2, 3)

// ---- repeat_interleave(repeats) -> indices -----------------------------------------------------------------
// attrs {output_size (int64, or none)}: a given output size is the output's; otherwise the data's
SpecList repeat_interleave_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& r = in[0];
  if (r.dtype() != kInt32 && r.dtype() != kInt64) shape_detail::not_implemented(op.name, "repeat_interleave_cpu", r.dtype());
  KILN_CHECK(r.dim() == 1, Runtime, op.name, "repeat_interleave only accept 1D vector as repeat");
  if (std::holds_alternative<int64_t>(a[0])) return {{{SymInt::from_raw(std::get<int64_t>(a[0]))}, r.dtype()}};
  if (const auto n = r.numel().maybe_int(); n && *n == 0) return {{{0}, r.dtype()}};  // no repeats, no data
  return {{{unbacked_size(op.name)}, r.dtype()}};
}
OpDef op_repeat_interleave{"repeat_interleave", kDynamicShape, repeat_interleave_meta, {}};
OpRegistrar reg_repeat_interleave{op_repeat_interleave, "repeat_interleave.Tensor(Tensor repeats, *, int? output_size=None) -> Tensor"};

// ---- diag / diag_embed ----------------------------------------------------------------------------------------
SpecList diag_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  int64_t k = attr<int64_t>(a, 0);
  if (x.dim() == 1) {
    SymInt n = x.sizes()[0] + (k < 0 ? -k : k);
    return {{{n, n}, x.dtype()}};
  }
  KILN_CHECK(x.dim() == 2, Runtime, op.name, "diag(): Supports 1D or 2D tensors. Got ", x.dim(), "D");
  SymInt R = x.sizes()[0], C = x.sizes()[1];
  SymInt len = k >= 0 ? sym_min(R, C - k) : sym_min(R + k, C);
  return {{{sym_max(len, 0)}, x.dtype()}};
}
OpDef op_diag{"diag", kOutExactDtype, diag_meta, {}};
OpRegistrar reg_diag{op_diag, "diag(Tensor self, int diagonal=0) -> Tensor", kFunctionAndMethod};

// attrs {offset, dim1, dim2}
SpecList diag_embed_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  int64_t off = attr<int64_t>(a, 0);
  int64_t nd = x.dim() + 1;
  int64_t d1 = wrap_dim(attr<int64_t>(a, 1), nd, op.name), d2 = wrap_dim(attr<int64_t>(a, 2), nd, op.name);
  KILN_CHECK(d1 != d2, Runtime, op.name, "diagonal dimensions cannot be identical ", attr<int64_t>(a, 1), ", ",
             attr<int64_t>(a, 2));
  SymInt n = (off < 0 ? -off : off) + (x.dim() ? x.sizes().back() : 1);
  SymShape s = x.sizes();
  if (!s.empty()) s.pop_back();
  s.insert(s.begin() + std::min(d1, d2), n);
  s.insert(s.begin() + std::max(d1, d2), n);
  return {{s, x.dtype()}};
}
OpDef op_diag_embed{"diag_embed", 0, diag_embed_meta, {}};
OpRegistrar reg_diag_embed{op_diag_embed, "diag_embed(Tensor self, int offset=0, int dim1=-2, int dim2=-1) -> Tensor", kFunctionAndMethod};

// ---- pad ---------------------------------------------------------------------------------------------------
// constant_pad_nd: attrs {pad, value}. Pads the last pad.size()/2 dims; negative pads crop.
SymShape constant_pad_shape(const TensorSpec& x, const Shape& pad) {
  const char* op = "constant_pad_nd";
  KILN_CHECK(pad.size() % 2 == 0, Runtime, op, "Length of pad must be even but instead it equals ", pad.size());
  int64_t lp = static_cast<int64_t>(pad.size()) / 2;
  KILN_CHECK(x.dim() >= lp, Runtime, op, "Length of pad should be no more than twice the number of dimensions of "
             "the input. Pad length is ", pad.size(), " while the input has ", x.dim(), " dimensions.");
  SymShape s = x.sizes();
  for (int64_t i = 0; i < lp; ++i) {
    int64_t d = x.dim() - 1 - i;
    SymInt cur = x.sizes()[d];
    // torch narrows for the negative pads first, left then right
    for (int64_t p : {pad[2 * i], pad[2 * i + 1]})
      if (p < 0) {
        KILN_CHECK(cur + p >= 0, Runtime, op, "narrow(): length must be non-negative.");
        cur += p;
      }
    s[d] = x.sizes()[d] + pad[2 * i] + pad[2 * i + 1];
    KILN_CHECK(s[d] >= 0, Runtime, op, "The input size ", x.sizes()[d], ", plus negative padding ", pad[2 * i],
               " and ", pad[2 * i + 1], " resulted in a negative output size, which is invalid. Check dimension ", d,
               " of your input.");
  }
  return s;
}
SpecList constant_pad_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  return {{constant_pad_shape(in[0], attr<Shape>(a, 0)), in[0].dtype()}};
}
OpDef op_constant_pad{"constant_pad_nd", 0, constant_pad_meta, {}};
OpRegistrar reg_constant_pad{op_constant_pad, "constant_pad_nd(Tensor self, int[] pad, Scalar value) -> Tensor"};

// reflect / replicate / circular: attrs {pad, mode}. Pads 1-3 trailing dims of a (batched) input.
SymShape nonconst_pad_shape(const TensorSpec& x, const Shape& pad, const std::string& mode) {
  const char* op = "pad";
  int64_t k = static_cast<int64_t>(pad.size()) / 2, nd = x.dim();
  bool ok = (k == 1 || k == 2 || k == 3) && (nd == k + 1 || nd == k + 2);
  KILN_CHECK(ok, NotImplemented, op, "Padding size ", pad.size(), " is not supported for ", nd, "D input tensor.");
  if (mode != "circular") {
    bool batch = nd == k + 2;
    bool valid = true;
    for (int64_t d = batch ? 1 : 0; d < nd; ++d) valid = valid && bool(x.sizes()[d] != 0);
    KILN_CHECK(valid, Runtime, op, "Expected ", k + 1, "D or ", k + 2, "D (batch mode) tensor with possibly 0 batch "
               "size and other non-zero dimensions for input, but got: ", x.sizes());
  }
  SymShape s = x.sizes();
  for (int64_t i = 0; i < k; ++i) {
    int64_t d = nd - 1 - i, pl = pad[2 * i], pr = pad[2 * i + 1];
    SymInt n = x.sizes()[d];
    s[d] = n + pl + pr;
    if (mode == "reflect")
      KILN_CHECK(pl < n && pr < n, Runtime, op, "Argument #4: Padding size should be less than the corresponding "
                 "input dimension, but got: padding (", pl, ", ", pr, ") at dimension ", d, " of input ", x.sizes());
    if (mode == "circular") {
      KILN_CHECK(pl <= n && pr <= n, Runtime, op, "Padding value causes wrapping around more than once.");
      KILN_CHECK(s[d] >= 0, Runtime, op, "Negative padding value is resulting in an empty dimension");
    }
  }
  if (mode == "circular" && bool(sym_numel(s) > 0)) {
    // torch fills the pads by copying slices of the output into itself; where a source and a destination
    // slice are dense and partially overlap, copy_ refuses
    for (int64_t i = 0; i < k; ++i) {
      const int64_t d = nd - 1 - i, pl = pad[2 * i], pr = pad[2 * i + 1];
      SymInt outer = 1;
      for (int64_t j = 0; j < d; ++j) outer = outer * s[j];
      if (bool(outer != 1)) continue;  // (in a trace, decided by the sizes' ranges where it can be)
      const int64_t o = s[d].is_symbolic() ? s[d].guard_int(std::string(op)) : s[d].raw();
      auto partial = [](int64_t a, int64_t b, int64_t len) { return a != b && a < b + len && b < a + len; };
      bool bad = (pl > 0 && partial(o - pl - std::max<int64_t>(pr, 0), 0, pl)) ||
                 (pr > 0 && partial(std::max<int64_t>(pl, 0), o - pr, pr));
      KILN_CHECK(!bad, Runtime, op, "unsupported operation: some elements of the input tensor and the written-to "
                 "tensor refer to a single memory location. Please clone() the tensor before performing the operation.");
    }
  }
  if (mode != "circular")  // 1-D pads need a non-empty output; 2-D / 3-D pads only a non-negative one
    for (int64_t i = 0; i < k; ++i) {
      int64_t d = nd - 1 - i;
      if (k == 1)
        KILN_CHECK(s[d] >= 1, Runtime, op, "input (W: ", x.sizes()[d], ") is too small. Calculated output W: ", s[d]);
      else
        KILN_CHECK(s[d] >= 0, Runtime, op, "Trying to create tensor with negative dimension ", s[d], ": ", s);
    }
  return s;
}
SpecList nonconst_pad_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const std::string& mode = attr<std::string>(a, 1);
  const Dtype dt = in[0].dtype();
  if (mode != "circular" && (dt == kBool || is_barebones_unsigned(dt) || is_float8(dt)))  // torch's kernels' set
    shape_detail::not_implemented(op.name, mode == "reflect" ? "reflection_pad" : "replication_pad", dt);
  return {{nonconst_pad_shape(in[0], attr<Shape>(a, 0), mode), dt}};
}
OpDef op_nonconst_pad{"pad", 0, nonconst_pad_meta, {}};
OpRegistrar reg_nonconst_pad{op_nonconst_pad, "pad(Tensor self, int[] pad, str mode) -> Tensor"};

// ---- embedding ---------------------------------------------------------------------------------------------
// inputs {weight, indices}; attrs {padding_idx, scale_grad_by_freq, sparse}
template <class T>
void check_embedding_args(const T& weight, const T& indices, const char* op) {
  KILN_CHECK(weight.dim() == 2, Runtime, op, "'weight' must be 2-D");
  KILN_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32, Runtime, op,
             "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got ",
             torch_type_name(indices.dtype()), " instead (while checking arguments for ", op, ")");
}
SpecList embedding_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  const TensorSpec &w = in[0], &idx = in[1];
  check_embedding_args(w, idx, op.name);
  SymShape s = idx.sizes();
  s.push_back(w.sizes()[1]);
  return {{s, w.dtype()}};
}
OpDef op_embedding{"embedding", 0, embedding_meta, {}};
OpRegistrar reg_embedding{op_embedding, "embedding(Tensor weight, Tensor indices, int padding_idx, bool scale_grad_by_freq, bool sparse) -> Tensor"};

// ---- flip's dtype support (rot90) ------------------------------------------------------------------------------
// torch's flip reverses the innermost (unit-stride) dimension with a dtype-dispatched kernel that has no
// uint16/32/64 or float8 version; every other flip is a dtype-agnostic byte copy.
bool dense_strides(const Tensor& x) {
  std::vector<int64_t> ds;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (x.sizes()[d] != 1) ds.push_back(d);
  std::sort(ds.begin(), ds.end(), [&](int64_t a, int64_t b) { return x.strides()[a] < x.strides()[b]; });
  int64_t expect = 1;
  for (int64_t d : ds) {
    if (x.strides()[d] != expect) return false;
    expect *= x.sizes()[d];
  }
  return true;
}
void check_flip_dtype(const Tensor& x, const Shape& flip_dims) {
  Dtype dt = x.dtype();
  if (!(is_barebones_unsigned(dt) || is_float8(dt)) || x.numel() <= 1) return;
  bool work = false;
  for (int64_t d : flip_dims) work = work || (x.sizes()[d] > 1 && x.strides()[d] != 0);
  if (!work) return;
  Shape ost = dense_strides(x) ? x.strides() : contiguous_strides(x.sizes());
  int64_t inner = -1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (x.sizes()[d] <= 1) continue;
    int64_t s = ost[d] < 0 ? -ost[d] : ost[d];
    if (inner < 0 || s < (ost[inner] < 0 ? -ost[inner] : ost[inner]) ||
        (s == (ost[inner] < 0 ? -ost[inner] : ost[inner]) && d > inner))
      inner = d;
  }
  if (inner < 0) return;
  bool flipped = std::find(flip_dims.begin(), flip_dims.end(), inner) != flip_dims.end();
  if (flipped && x.strides()[inner] == 1) not_implemented("flip", "flip_cpu", dt);
}

}  // namespace

// ---- public API ------------------------------------------------------------------------------------------------
Tensor roll(const Tensor& x, const Shape& shifts, const Shape& dims) { return dispatch1(op_roll, {x}, {shifts, dims}); }

Tensor rot90(const Tensor& x, int64_t k, const Shape& dims) {
  const char* op = "rot90";
  KILN_CHECK(dims.size() == 2, Runtime, op, "expected total rotation dims == 2, but got dims = ", dims.size());
  KILN_CHECK(x.dim() >= 2, Runtime, op, "expected total dims >= 2, but got total dims = ", x.dim());
  int64_t d0 = wrap_dim(dims[0], x.dim(), op), d1 = wrap_dim(dims[1], x.dim(), op);
  KILN_CHECK(d0 != d1, Runtime, op, "expected rotation dims to be different, but got dim0 = ", dims[0],
             " and dim1 = ", dims[1]);
  k = ((k % 4) + 4) % 4;
  switch (k) {
    case 1:
      check_flip_dtype(x, {d1});
      return transpose(flip(x, {d1}), d0, d1);
    case 2:
      check_flip_dtype(x, {d0, d1});
      return flip(x, {d0, d1});
    case 3:
      check_flip_dtype(x, {d0});
      return transpose(flip(x, {d0}), d0, d1);
    default:
      return clone(x);
  }
}

Tensor repeat(const Tensor& x, const Shape& repeats) { return dispatch1(op_repeat, {x}, {repeats}); }

Tensor tile(const Tensor& x, const Shape& dims) {
  Shape r = dims;
  if (static_cast<int64_t>(r.size()) < x.dim()) r.insert(r.begin(), x.dim() - r.size(), 1);
  return repeat(x, r);
}

Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> output_size) {
  Attr os = output_size ? Attr(*output_size) : Attr(std::monostate{});
  return dispatch1(op_repeat_interleave, {repeats}, {os});
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim,
                         std::optional<int64_t> output_size) {
  const char* op = "repeat_interleave";
  Tensor input = dim ? x : flatten(x);
  int64_t d = wrap_dim(dim.value_or(0), x.dim(), op);
  KILN_CHECK(repeats >= 0, Runtime, op, "Repeats must be non-negative");
  KILN_CHECK(d + 1 <= input.dim(), Index, op, "Dimension out of range (expected to be in range of [", -input.dim() - 1,
             ", ", input.dim(), "], but got ", d + 1, ")");
  int64_t expected;
  KILN_CHECK(!__builtin_mul_overflow(input.sizes()[d], repeats, &expected), Runtime, op,
             "value cannot be converted to type int64_t without overflow (", input.sizes()[d], " x ", repeats, ")");
  if (output_size)
    KILN_CHECK(*output_size == expected, Runtime, op, "repeat_interleave: Invalid output_size, expected ", expected,
               " but got ", *output_size);
  Shape es = input.sizes();
  es.insert(es.begin() + d + 1, repeats);
  Tensor r = contiguous(expand(unsqueeze(input, d + 1), es));
  return flatten(r, d, d + 1);
}

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim,
                         std::optional<int64_t> output_size) {
  const char* op = "repeat_interleave";
  Tensor input = x;
  int64_t d = 0;
  if (!dim) {
    input = flatten(x);
  } else {
    KILN_CHECK(x.dim() > 0, Index, op, "Dimension specified as ", *dim, " but tensor has no dimensions");
    d = wrap_dim(*dim, x.dim(), op);
  }
  int64_t n = input.sizes()[d];
  Tensor rep = repeats;
  if (repeats.dim() == 0 || (repeats.dim() == 1 && repeats.sizes()[0] == 1)) {
    rep = expand(reshape(repeats, {1}), {n});
  } else if (repeats.dim() == 1) {
    KILN_CHECK(repeats.sizes()[0] == n, Runtime, op, "repeats must have the same size as input along dim, but got "
               "repeats.size(0) = ", repeats.sizes()[0], " and input.size(", d, ") = ", n);
  } else {
    KILN_FAIL(Runtime, op, "repeats must be 0-dim or 1-dim tensor");
  }
  Tensor idx = repeat_interleave(rep, output_size);
  // torch's index_select has no uint16/32/64 kernel for a 1-D input (higher ranks copy bytes)
  if (input.dim() <= 1 && is_barebones_unsigned(input.dtype())) not_implemented(op, "index_select", input.dtype());
  return index_select(input, d, idx);
}

Tensor diag(const Tensor& x, int64_t diagonal) { return dispatch1(op_diag, {x}, {diagonal}); }

Tensor diag_embed(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  return dispatch1(op_diag_embed, {x}, {offset, dim1, dim2});
}

TensorList meshgrid(const TensorList& ts, const std::string& indexing) {
  const char* op = "meshgrid";
  int64_t n = static_cast<int64_t>(ts.size());
  KILN_CHECK(n > 0, Runtime, op, "meshgrid expects a non-empty TensorList");
  for (int64_t i = 0; i + 1 < n; ++i)
    KILN_CHECK(ts[i].dtype() == ts[i + 1].dtype(), Runtime, op, "meshgrid expects all tensors to have the same dtype");
  TensorList in = ts;
  bool swap = false;
  if (indexing == "xy") {
    swap = n >= 2;
    if (swap) std::swap(in[0], in[1]);
  } else {
    KILN_CHECK(indexing == "ij", Runtime, op, "torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: ",
               indexing);
  }
  Shape shape(n);
  for (int64_t i = 0; i < n; ++i) {
    KILN_CHECK(in[i].dim() <= 1, Runtime, op, "torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: ",
               in[i].sizes());
    shape[i] = in[i].numel();
  }
  TensorList grids;
  Shape vs(n, 1);
  for (int64_t i = 0; i < n; ++i) {
    vs[i] = shape[i];
    grids.push_back(expand(reshape(in[i], vs), shape));
    vs[i] = 1;
  }
  if (swap) std::swap(grids[0], grids[1]);
  return grids;
}

Tensor pad(const Tensor& x, const Shape& p, const std::string& mode, std::optional<double> value) {
  const char* op = "pad";
  KILN_CHECK(mode == "constant" || mode == "reflect" || mode == "replicate" || mode == "circular", NotImplemented, op,
             "Unrecognised padding mode ", mode);
  KILN_CHECK(p.size() % 2 == 0, Runtime, op, "Padding length must be divisible by 2");
  KILN_CHECK(static_cast<int64_t>(p.size()) <= x.dim() * 2, Runtime, op, "Padding length should be less than or "
             "equal to two times the input dimension but got padding length ", p.size(), " and input of dimension ",
             x.dim());
  if (mode == "constant") return dispatch1(op_constant_pad, {x}, {p, Scalar(value.value_or(0.0))});
  KILN_CHECK(!value || *value == 0, Runtime, op, "Padding mode \"", mode, "\" doesn't take in value argument");
  return dispatch1(op_nonconst_pad, {x}, {p, mode});
}

Tensor one_hot(const Tensor& x, int64_t num_classes) {
  const char* op = "one_hot";
  KILN_CHECK(x.dtype() == kInt64, Runtime, op, "one_hot is only applicable to index tensor of type LongTensor.");
  Shape s = x.sizes();
  if (x.numel() == 0) {
    KILN_CHECK(num_classes > 0, Runtime, op, "Can not infer total number of classes from empty tensor.");
    s.push_back(num_classes);
    return zeros(s, kInt64);
  }
  Tensor xc = contiguous(x);
  stream_detail::before_host_read();
  const int64_t* p = static_cast<const int64_t*>(xc.data_ptr());
  int64_t mn = p[0], mx = p[0];
  for (int64_t i = 1; i < xc.numel(); ++i) mn = std::min(mn, p[i]), mx = std::max(mx, p[i]);
  KILN_CHECK(mn >= 0, Runtime, op, "Class values must be non-negative.");
  if (num_classes == -1) num_classes = mx + 1;
  else KILN_CHECK(num_classes > mx, Runtime, op, "Class values must be smaller than num_classes.");
  s.push_back(num_classes);
  Tensor y = zeros(s, kInt64);
  scatter_(y, -1, unsqueeze(x, -1), Scalar(1));
  return y;
}

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx, bool scale_grad_by_freq,
                 bool sparse) {
  return dispatch1(op_embedding, {weight, indices}, {padding_idx, scale_grad_by_freq, sparse});
}

const Tensor& embedding_renorm_(const Tensor& weight, const Tensor& indices, double max_norm, double norm_type) {
  const char* op = "embedding_renorm_";
  KILN_CHECK(weight.dim() == 2, Runtime, op, "Expected 2-dimensional tensor, but got ", weight.dim(),
             "-dimensional tensor for argument #1 'self' (while checking arguments for embedding_renorm_)");
  KILN_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32, Runtime, op,
             "Expected tensor for argument #2 'indices' to have one of the following scalar types: Long, Int; but got ",
             torch_type_name(indices.dtype()), " instead (while checking arguments for embedding_renorm_)");
  Tensor ii = contiguous(to_dtype(indices, kInt64));
  const int64_t* ip = static_cast<const int64_t*>(ii.data_ptr());
  std::vector<int64_t> sorted(ip, ip + ii.numel());
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  int64_t N = weight.sizes()[0];
  for (int64_t k : sorted)  // checked before any row is scaled
    KILN_CHECK(k >= -N && k < N, Index, op, "select(): index ", k, " out of range for tensor of size ", weight.sizes(),
               " at dimension 0");
  if (sorted.empty()) return weight;
  KILN_CHECK(weight.is_floating_point() || weight.is_complex(), Runtime, op, "norm(): input dtype should be either "
             "floating point or complex. Got ", torch_type_name(weight.dtype()), " instead.");
  for (int64_t k : sorted) {
    Tensor row = select(weight, 0, k);
    double norm = vector_norm(row, norm_type).item<double>();
    if (norm > max_norm) mul_(row, Scalar(max_norm / (norm + 1e-7)));
  }
  return weight;
}


// ---- composites with torch's schemas (ops/composite.h): their public forms come from these -------
namespace {
int64_t i64(const Attrs& a, size_t i) { return attr<int64_t>(a, i); }
std::optional<std::string> reduce_of(const Attrs& a, size_t i) { return opt_attr<std::string>(a, i); }

// scatter(dim, index, src) and scatter(dim, index, value), each with reduce=
Composite c_scatter_src{"scatter.src(Tensor self, int dim, Tensor index, Tensor src, *, str? reduce=None) -> Tensor",
                        [](const TensorList& in, const Attrs& a) -> TensorList {
                          return {scatter(in[0], i64(a, 0), in[1], in[2], reduce_of(a, 1))};
                        },
                        kAllVariants, 0,
                        [](const TensorList& in, const Attrs& a) -> TensorList {
                          return {scatter_(in[0], i64(a, 0), in[1], in[2], reduce_of(a, 1))};
                        }};
Composite c_scatter_value{"scatter.value(Tensor self, int dim, Tensor index, Scalar value, *, str? reduce=None) -> Tensor",
                          [](const TensorList& in, const Attrs& a) -> TensorList {
                            return {scatter(in[0], i64(a, 0), in[1], attr<Scalar>(a, 1), reduce_of(a, 2))};
                          },
                          kAllVariants, 0,
                          [](const TensorList& in, const Attrs& a) -> TensorList {
                            return {scatter_(in[0], i64(a, 0), in[1], attr<Scalar>(a, 1), reduce_of(a, 2))};
                          }};
// The in-place forms of table ops whose front ends check more than the table op's in-place call
Composite c_scatter_add_{"scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor",
                         [](const TensorList& in, const Attrs& a) -> TensorList {
                           return {scatter_add(in[0], i64(a, 0), in[1], in[2])};
                         },
                         kInplaceVariant, 0,
                         [](const TensorList& in, const Attrs& a) -> TensorList {
                           return {scatter_add_(in[0], i64(a, 0), in[1], in[2])};
                         }};
Composite c_scatter_reduce_{
    "scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor",
    [](const TensorList& in, const Attrs& a) -> TensorList {
      return {scatter_reduce(in[0], i64(a, 0), in[1], in[2], attr<std::string>(a, 1), attr<bool>(a, 2))};
    },
    kInplaceVariant, 0,
    [](const TensorList& in, const Attrs& a) -> TensorList {
      return {scatter_reduce_(in[0], i64(a, 0), in[1], in[2], attr<std::string>(a, 1), attr<bool>(a, 2))};
    }};
Composite c_index_add_{"index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor",
                       [](const TensorList& in, const Attrs& a) -> TensorList {
                         return {index_add(in[0], i64(a, 0), in[1], in[2], attr<Scalar>(a, 1))};
                       },
                       kInplaceVariant, 0,
                       [](const TensorList& in, const Attrs& a) -> TensorList {
                         return {index_add_(in[0], i64(a, 0), in[1], in[2], attr<Scalar>(a, 1))};
                       }};
Composite c_index_copy_{"index_copy(Tensor self, int dim, Tensor index, Tensor source) -> Tensor",
                        [](const TensorList& in, const Attrs& a) -> TensorList {
                          return {index_copy(in[0], i64(a, 0), in[1], in[2])};
                        },
                        kInplaceVariant, 0,
                        [](const TensorList& in, const Attrs& a) -> TensorList {
                          return {index_copy_(in[0], i64(a, 0), in[1], in[2])};
                        }};
Composite c_masked_scatter_{"masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor",
                            [](const TensorList& in, const Attrs&) -> TensorList {
                              return {masked_scatter(in[0], in[1], in[2])};
                            },
                            kInplaceVariant, 0,
                            [](const TensorList& in, const Attrs&) -> TensorList {
                              return {masked_scatter_(in[0], in[1], in[2])};
                            }};
Composite c_put_{"put(Tensor self, Tensor index, Tensor source, bool accumulate=False) -> Tensor",
                 [](const TensorList& in, const Attrs& a) -> TensorList {
                   return {put(in[0], in[1], in[2], attr<bool>(a, 0))};
                 },
                 kInplaceVariant, 0,
                 [](const TensorList& in, const Attrs& a) -> TensorList {
                   return {put_(in[0], in[1], in[2], attr<bool>(a, 0))};
                 }};
// index_fill with a 0-dim tensor value first, then a number
Composite c_index_fill_t{"index_fill.int_Tensor(Tensor self, int dim, Tensor index, Tensor value) -> Tensor",
                         [](const TensorList& in, const Attrs& a) -> TensorList {
                           return {index_fill(in[0], i64(a, 0), in[1], in[2])};
                         },
                         kAllVariants, 0,
                         [](const TensorList& in, const Attrs& a) -> TensorList {
                           return {index_fill_(in[0], i64(a, 0), in[1], in[2])};
                         }};
Composite c_index_fill_s{"index_fill.int_Scalar(Tensor self, int dim, Tensor index, Scalar value) -> Tensor",
                         [](const TensorList& in, const Attrs& a) -> TensorList {
                           return {index_fill(in[0], i64(a, 0), in[1], attr<Scalar>(a, 1))};
                         },
                         kAllVariants, 0,
                         [](const TensorList& in, const Attrs& a) -> TensorList {
                           return {index_fill_(in[0], i64(a, 0), in[1], attr<Scalar>(a, 1))};
                         }};
Composite c_take_along_dim{"take_along_dim(Tensor self, Tensor indices, int? dim=None) -> Tensor",
                           [](const TensorList& in, const Attrs& a) -> TensorList {
                             return {take_along_dim(in[0], in[1], opt_attr<int64_t>(a, 0))};
                           },
                           kFunctionAndMethod};
// torch refuses an out= of another dtype than self's for scatter and take_along_dim
CompositeTags t_scatter_src{c_scatter_src, kOutExactDtype}, t_scatter_value{c_scatter_value, kOutExactDtype};
CompositeTags t_take_along_dim{c_take_along_dim, kOutExactDtype};
Composite c_rot90{"rot90(Tensor self, int k=1, int[] dims=[0,1]) -> Tensor",
                  [](const TensorList& in, const Attrs& a) -> TensorList {
                    return {rot90(in[0], i64(a, 0), attr<Shape>(a, 1))};
                  },
                  kFunctionAndMethod};
Composite c_tile{"tile(Tensor self, SymInt[] dims) -> Tensor",
                 [](const TensorList& in, const Attrs& a) -> TensorList { return {tile(in[0], attr<Shape>(a, 0))}; },
                 kFunctionAndMethod};
// index_put(indices, values): the index list sits between self and values, so in = {self,
// indices..., values} (a None index an undefined tensor)
TensorList index_list(const TensorList& in) { return TensorList(in.begin() + 1, in.end() - 1); }
Composite c_index_put{"index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor",
                      [](const TensorList& in, const Attrs& a) -> TensorList {
                        return {index_put(in[0], index_list(in), in.back(), attr<bool>(a, 0))};
                      },
                      kAllVariants, 0,
                      [](const TensorList& in, const Attrs& a) -> TensorList {
                        return {index_put_checked_(in[0], index_list(in), in.back(), attr<bool>(a, 0))};
                      }};
Composite c_embedding{"embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, "
                      "bool sparse=False) -> Tensor",
                      [](const TensorList& in, const Attrs& a) -> TensorList {
                        return {embedding(in[0], in[1], i64(a, 0), attr<bool>(a, 1), attr<bool>(a, 2))};
                      },
                      kFunctionVariant};
// torch.embedding_renorm_: a function that renormalises the referenced rows of its input in place
Composite c_embedding_renorm{"embedding_renorm_(Tensor input, Tensor indices, float max_norm, float norm_type) -> Tensor",
                             [](const TensorList& in, const Attrs& a) -> TensorList {
                               return {embedding_renorm_(in[0], in[1], attr<double>(a, 0), attr<double>(a, 1))};
                             },
                             kFunctionVariant};
// repeat_interleave(repeats), (self, repeats tensor, dim), (self, repeats int, dim)
Composite c_ri{"repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size=None) -> Tensor",
               [](const TensorList& in, const Attrs& a) -> TensorList {
                 return {repeat_interleave(in[0], opt_attr<int64_t>(a, 0))};
               },
               kFunctionAndMethod};
Composite c_ri_t{"repeat_interleave.self_Tensor(Tensor self, Tensor repeats, int? dim=None, *, SymInt? output_size=None) -> Tensor",
                 [](const TensorList& in, const Attrs& a) -> TensorList {
                   return {repeat_interleave(in[0], in[1], opt_attr<int64_t>(a, 0), opt_attr<int64_t>(a, 1))};
                 },
                 kFunctionAndMethod};
Composite c_ri_i{"repeat_interleave.self_int(Tensor self, SymInt repeats, int? dim=None, *, SymInt? output_size=None) -> Tensor",
                 [](const TensorList& in, const Attrs& a) -> TensorList {
                   return {repeat_interleave(in[0], i64(a, 0), opt_attr<int64_t>(a, 1), opt_attr<int64_t>(a, 2))};
                 },
                 kFunctionAndMethod};
}  // namespace

}  // namespace kiln
