// View ops: results share the input's storage (DESIGN.md §3). Each is an op-table entry so that
// autograd and tracing see them; composites (reshape, split, chunk, ...) are built on them.
#include <algorithm>
#include <numeric>
#include <optional>

#include "kiln/ops/composite.h"
#include "kiln/autograd/function.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

const Shape& shape_attr(const Attrs& a, size_t i) { return std::get<Shape>(a[i]); }
int64_t int_attr(const Attrs& a, size_t i) { return std::get<int64_t>(a[i]); }

// ---- view geometry, written once over the size type ------------------------------------------------
// I is int64_t for the CPU kernels and SymInt on the meta device, where a traced tensor's sizes,
// strides and offset are symbolic: the same code makes both views (DESIGN.md §2).
template <class I>
using Sz = SmallVec<I, 6>;
template <class I>
struct Geo {
  Sz<I> sizes, strides;
  I offset;
};
template <class I>
Sz<I> sizes_attr(const Attrs& a, size_t i) {
  if constexpr (std::is_same_v<I, int64_t>) return shape_attr(a, i);
  else return attr_sym_shape(a, i);
}
template <class I>
I size_attr(const Attrs& a, size_t i) {  // an int attribute that may carry a symbolic size
  if constexpr (std::is_same_v<I, int64_t>) return int_attr(a, i);
  else return SymInt::from_raw(int_attr(a, i));
}
int64_t numel_of(const Shape& s) { return shape_numel(s); }
SymInt numel_of(const SymShape& s) { return sym_numel(s); }
Shape strides_for(const Shape& s) { return contiguous_strides(s); }
SymShape strides_for(const SymShape& s) { return sym_contiguous_strides(s); }
int64_t min_of(int64_t a, int64_t b) { return std::min(a, b); }
SymInt min_of(SymInt a, SymInt b) { return sym_min(a, b); }
int64_t max_of(int64_t a, int64_t b) { return std::max(a, b); }
SymInt max_of(SymInt a, SymInt b) { return sym_max(a, b); }

// Offset and stride arithmetic of the views: an empty tensor's strides are unchecked (torch allows any),
// so for concrete sizes it wraps, as torch's does, instead of overflowing (nothing of an empty view is
// read; a non-empty one stays inside its storage, where no product overflows).
template <class I>
I wmul(I a, I b) {
  if constexpr (std::is_same_v<I, int64_t>)
    return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else
    return a * b;
}
template <class I>
I wadd(I a, I b) {
  if constexpr (std::is_same_v<I, int64_t>)
    return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else
    return a + b;
}

template <class I>
Sz<I> infer_size(const Sz<I>& shape, I numel, const char* op) {
  Sz<I> out = shape;
  I known = 1;
  int64_t infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      KILN_CHECK(infer < 0, Runtime, op, "only one dimension can be inferred");
      infer = static_cast<int64_t>(i);
    } else {
      KILN_CHECK(shape[i] >= 0, Runtime, op, "invalid shape dimension ", shape[i]);
      if constexpr (std::is_same_v<I, int64_t>)  // wraps, as torch's: the view's numel check refuses overflow
        known = static_cast<int64_t>(static_cast<uint64_t>(known) * static_cast<uint64_t>(shape[i]));
      else
        known = known * shape[i];
    }
  }
  if (infer >= 0) {
    KILN_CHECK(known != 0 && numel % known == 0, Runtime, op, "shape '", shape,
               "' is invalid for input of size ", numel);
    out[infer] = numel / known;
  } else {
    KILN_CHECK(known == numel, Runtime, op, "shape '", shape, "' is invalid for input of size ", numel);
  }
  return out;
}

// Strides for viewing (sizes, strides) as `shape` without a copy, if possible.
template <class I>
std::optional<Sz<I>> view_strides(Sz<I> old_sizes, Sz<I> old_strides, const Sz<I>& shape) {
  if (old_sizes.empty()) old_sizes = {1}, old_strides = {1};
  if constexpr (std::is_same_v<I, SymInt>) {
    // contiguous (the same interned expressions as its contiguous strides): any shape of the same
    // size is a contiguous view, decided without comparing sizes (which could record guards)
    const Sz<I> cs = strides_for(old_sizes);
    bool contiguous = true;
    for (size_t d = 0; d < cs.size(); ++d) contiguous = contiguous && cs[d].raw() == old_strides[d].raw();
    if (contiguous) return strides_for(shape);
  }
  Sz<I> st(shape.size());
  if (numel_of(old_sizes) == 0) return strides_for(shape);
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  I base = old_strides.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_sizes.size()) - 1; d >= 0; --d) {
    tensor_numel = tensor_numel * old_sizes[d];
    if (d == 0 || (old_sizes[d - 1] != 1 && old_strides[d - 1] != tensor_numel * base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        st[view_d] = view_numel * base;
        view_numel = view_numel * shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        base = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return st;
}

// A view of x on the meta device with symbolic geometry: example values in the tensor, the
// expressions beside them.
Tensor make_sym_view(const Tensor& x, Geo<SymInt> g) {
  auto hint = [](SymInt v) {
    if (!v.is_symbolic()) return v.raw();
    return v.maybe_hint().value_or(std::max<int64_t>(active_shape_env()->range(v).first, 0));
  };
  Shape sizes, strides;
  for (SymInt v : g.sizes) sizes.push_back(hint(v));
  for (SymInt v : g.strides) strides.push_back(hint(v));
  Tensor t = make_view(x, sizes, strides, hint(g.offset));
  if (is_symbolic(g.sizes) || is_symbolic(g.strides) || g.offset.is_symbolic()) {
    auto sg = std::make_shared<SymGeometry>();
    sg->sizes = std::move(g.sizes);
    sg->strides = std::move(g.strides);
    sg->offset = g.offset;
    t.impl()->sym = std::move(sg);
  }
  return t;
}

// One view op from its geometry function `geo<I>(sizes, strides, offset, attrs)`: the CPU kernel
// (int64_t) and the meta kernel (SymInt, so traced shapes stay symbolic).
#define VIEW_GEO_OP(name, geo, schema)                                                            \
  void name##_k(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {             \
    const Tensor& x = in[0];                                                                        \
    Geo<int64_t> g = geo<int64_t>(x.sizes(), x.strides(), x.storage_offset(), a);                   \
    out = {make_view(x, std::move(g.sizes), std::move(g.strides), g.offset)};                       \
  }                                                                                                 \
  void name##_meta_k(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {        \
    const Tensor& x = in[0];                                                                        \
    const SymInt off = x.impl()->sym ? x.impl()->sym->offset : SymInt(x.storage_offset());          \
    out = {make_sym_view(x, geo<SymInt>(x.sym_sizes(), x.sym_strides(), off, a))};                  \
  }                                                                                                 \
  OpDef op_##name{#name, kView, nullptr, {name##_k, nullptr, name##_meta_k}};                      \
  OpRegistrar reg_##name{op_##name, schema};

#define VIEW_OP(name, fn, schema)                            \
  OpDef op_##name{#name, kView, nullptr, {fn, nullptr}};     \
  OpRegistrar reg_##name{op_##name, schema};

template <class I>
Geo<I> view_geo(const Sz<I>& sizes, const Sz<I>& strides, I off, const Attrs& a) {
  Sz<I> shape = infer_size<I>(sizes_attr<I>(a, 0), numel_of(sizes), "view");
  auto st = view_strides<I>(sizes, strides, shape);
  KILN_CHECK(st.has_value(), Runtime, "view", "view size is not compatible with input tensor's size "
             "and stride (at least one dimension spans across two contiguous subspaces). Use "
             ".reshape(...) instead.");
  return {std::move(shape), std::move(*st), off};
}
VIEW_GEO_OP(view, view_geo, "view(Tensor(a) self, int[] size) -> Tensor(a)")

void view_dtype_k(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  Dtype d = std::get<Dtype>(a[0]);
  size_t from = x.itemsize(), to = itemsize(d);
  if (from == to) {
    Tensor v = make_view(x, x.sizes(), x.strides(), x.storage_offset());
    v.impl()->dtype = d;
    out = {v};
    return;
  }
  KILN_CHECK(x.dim() > 0, Runtime, "view", "self.dim() cannot be 0 to view ", x.dtype(), " as ", d,
             " (different element sizes)");
  KILN_CHECK(x.stride(-1) == 1, Runtime, "view", "self.stride(-1) must be 1 to view ", x.dtype(),
             " as ", d, " (different element sizes), but got ", x.stride(-1));
  Shape sizes = x.sizes(), strides = x.strides();
  int64_t off = x.storage_offset();
  if (to > from) {
    int64_t r = static_cast<int64_t>(to / from);
    KILN_CHECK(sizes.back() % r == 0 && off % r == 0, Runtime, "view", "self.size(-1) must be "
               "divisible by ", r, " to view ", x.dtype(), " as ", d, " (different element sizes), but got ",
               sizes.back());
    sizes.back() /= r;
    for (size_t i = 0; i + 1 < strides.size(); ++i) {
      KILN_CHECK(strides[i] % r == 0, Runtime, "view", "self.stride(", i, ") must be divisible by ", r,
                 " to view ", x.dtype(), " as ", d, " (different element sizes)");
      strides[i] /= r;
    }
    off /= r;
  } else {
    int64_t r = static_cast<int64_t>(from / to);
    sizes.back() = wmul(sizes.back(), r);
    for (size_t i = 0; i + 1 < strides.size(); ++i) strides[i] = wmul(strides[i], r);
    off = wmul(off, r);
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = x.storage();
  impl->sizes = sizes;
  impl->strides = strides;
  impl->offset = off;
  impl->dtype = d;
  impl->refresh();
  out = {Tensor(impl)};
}
VIEW_OP(view_dtype, view_dtype_k, "view.dtype(Tensor(a) self, ScalarType dtype) -> Tensor(a)")

template <class I>
Geo<I> as_strided_geo(const Sz<I>&, const Sz<I>&, I, const Attrs& a) {
  Sz<I> size = sizes_attr<I>(a, 0), stride = sizes_attr<I>(a, 1);
  I off = size_attr<I>(a, 2);
  KILN_CHECK(size.size() == stride.size(), Runtime, "as_strided", "mismatch in length of strides and "
             "shape");
  for (size_t i = 0; i < size.size(); ++i)
    KILN_CHECK(size[i] >= 0 && stride[i] >= 0, Runtime, "as_strided", "negative size or stride: ",
               size, " ", stride);
  return {std::move(size), std::move(stride), off};
}
// The storage bound needs the storage: checked by make_view on the CPU (a meta tensor's storage is only a size).
void as_strided_k(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  Geo<int64_t> g = as_strided_geo<int64_t>(x.sizes(), x.strides(), x.storage_offset(), a);
  const Shape &size = g.sizes, &stride = g.strides;
  const int64_t off = g.offset;  // make_view checks the bound, overflow-safe
  out = {make_view(x, size, stride, off)};
}
void as_strided_meta_k(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  if (!x.has_symbolic_sizes() && !is_symbolic(attr_sym_shape(a, 0)) && !is_symbolic(attr_sym_shape(a, 1)) &&
      !SymInt::from_raw(int_attr(a, 2)).is_symbolic())
    return as_strided_k(op_view, in, a, out);  // concrete: the same bound check as on the CPU
  out = {make_sym_view(x, as_strided_geo<SymInt>(x.sym_sizes(), x.sym_strides(), SymInt(0), a))};
}
OpDef op_as_strided{"as_strided", kView, nullptr, {as_strided_k, nullptr, as_strided_meta_k}};
OpRegistrar reg_as_strided{op_as_strided, "as_strided(Tensor(a) self, int[] size, int[] stride, int storage_offset) -> Tensor(a)"};

template <class I>
Geo<I> permute_geo(const Sz<I>& xs, const Sz<I>& xst, I off, const Attrs& a) {
  const Shape& dims = shape_attr(a, 0);
  int64_t n = static_cast<int64_t>(xs.size());
  KILN_CHECK(static_cast<int64_t>(dims.size()) == n, Runtime, "permute", "number of dims don't match "
             "in permute: input has ", n, " dims but ", dims.size(), " were given");
  Sz<I> sizes(n), strides(n);
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[i], n, "permute");
    KILN_CHECK(!seen[d], Runtime, "permute", "repeated dim in permute: ", dims);
    seen[d] = true;
    sizes[i] = xs[d];
    strides[i] = xst[d];
  }
  return {std::move(sizes), std::move(strides), off};
}
VIEW_GEO_OP(permute, permute_geo, "permute(Tensor(a) self, int[] dims) -> Tensor(a)")
OpVariants v_permute{op_permute, kFunctionAndMethod};  // x.permute(1, 0): a lone int list as varargs

template <class I>
Geo<I> expand_geo(const Sz<I>& xs, const Sz<I>& xst, I off, const Attrs& a) {
  const Sz<I> shape = sizes_attr<I>(a, 0);
  int64_t n = static_cast<int64_t>(shape.size()), xd = static_cast<int64_t>(xs.size());
  KILN_CHECK(n >= xd, Runtime, "expand", "the number of sizes provided (", n, ") must be greater or "
             "equal to the number of dimensions in the tensor (", xd, ")");
  Sz<I> sizes(n), strides(n);
  for (int64_t i = n - 1; i >= 0; --i) {
    int64_t o = i - (n - xd);
    I want = shape[i];
    if (o >= 0) {
      I have = xs[o];
      if (want == -1) want = have;
      KILN_CHECK(want >= 0, Runtime, "expand", "The expanded size of the tensor (", want, ") at dimension ", i,
                 " is negative.  Target sizes: ", shape, ".  Tensor sizes: ", xs);
      const bool same = bool(have == want);
      KILN_CHECK(same || have == 1, Runtime, "expand", "The expanded size of the tensor (", want,
                 ") must match the existing size (", have, ") at non-singleton dimension ", i,
                 ".  Target sizes: ", shape, ".  Tensor sizes: ", xs);
      sizes[i] = want;
      strides[i] = same ? xst[o] : I(0);
    } else {
      KILN_CHECK(want >= 0, Runtime, "expand", "The expanded size of the tensor (", want,
                 ") isn't allowed in a leading, non-existing dimension ", i);
      sizes[i] = want;
      strides[i] = 0;
    }
  }
  return {std::move(sizes), std::move(strides), off};
}
VIEW_GEO_OP(expand, expand_geo, "expand(Tensor(a) self, int[] size) -> Tensor(a)")
OpVariants v_expand{op_expand, kMethodVariant};

// slice(dim, start, end, step): attrs {dim, start, end, step} already clamped by the front end.
template <class I>
Geo<I> slice_geo(const Sz<I>& xs, const Sz<I>& xst, I off, const Attrs& a) {
  int64_t d = int_attr(a, 0), step = int_attr(a, 3);
  I start = size_attr<I>(a, 1), end = size_attr<I>(a, 2);
  Sz<I> sizes = xs, strides = xst;
  I len = max_of(end - start + (step - 1), I(0)) / step;
  if (start != 0 && len > 0) off = wadd(off, wmul(start, strides[d]));  // (no question asked of a start of 0)
  sizes[d] = len;
  strides[d] = wmul(strides[d], I(step));
  return {std::move(sizes), std::move(strides), off};
}
VIEW_GEO_OP(slice, slice_geo, "slice.Tensor(Tensor(a) self, int dim, int start, int end, int step) -> Tensor(a)")

template <class I>
Geo<I> select_geo(const Sz<I>& xs, const Sz<I>& xst, I off, const Attrs& a) {
  int64_t d = int_attr(a, 0);
  I i = size_attr<I>(a, 1);
  Sz<I> sizes = xs, strides = xst;
  off = wadd(off, wmul(i, strides[d]));
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return {std::move(sizes), std::move(strides), off};
}
VIEW_GEO_OP(select, select_geo, "select.int(Tensor(a) self, int dim, int index) -> Tensor(a)")

template <class I>
Geo<I> unsqueeze_geo(const Sz<I>& xs, const Sz<I>& xst, I off, const Attrs& a) {
  int64_t d = wrap_dim(int_attr(a, 0), static_cast<int64_t>(xs.size()) + 1, "unsqueeze");
  Sz<I> sizes = xs, strides = xst;
  I st = d < static_cast<int64_t>(xs.size()) ? wmul(sizes[d], strides[d]) : I(1);
  sizes.insert(sizes.begin() + d, I(1));
  strides.insert(strides.begin() + d, st);
  return {std::move(sizes), std::move(strides), off};
}
VIEW_GEO_OP(unsqueeze, unsqueeze_geo, "unsqueeze(Tensor(a) self, int dim) -> Tensor(a)")
OpVariants v_unsqueeze{op_unsqueeze, kFunctionAndMethod};

template <class I>
Geo<I> squeeze_geo(const Sz<I>& xs, const Sz<I>& xst, I off, const Attrs& a) {
  const Shape& dims = shape_attr(a, 0);  // normalised; empty with attr[1]=true means all
  bool all = std::get<bool>(a[1]);
  Sz<I> sizes, strides;
  for (size_t i = 0; i < xs.size(); ++i) {
    bool listed = all || std::find(dims.begin(), dims.end(), static_cast<int64_t>(i)) != dims.end();
    if (listed && xs[i] == 1) continue;
    sizes.push_back(xs[i]);
    strides.push_back(xst[i]);
  }
  return {std::move(sizes), std::move(strides), off};
}
VIEW_GEO_OP(squeeze, squeeze_geo, "squeeze.dims(Tensor(a) self, int[] dim, bool all_dims) -> Tensor(a)")

template <class I>
Geo<I> diagonal_geo(const Sz<I>& xs, const Sz<I>& xst, I off, const Attrs& a) {
  int64_t offset = int_attr(a, 0), d1 = int_attr(a, 1), d2 = int_attr(a, 2);
  I s1 = xs[d1], s2 = xs[d2];
  I n;
  if (offset >= 0) {
    n = max_of(min_of(s1, s2 - offset), I(0));
    if (n > 0) off = wadd(off, wmul(I(offset), xst[d2]));
  } else {
    n = max_of(min_of(s1 + offset, s2), I(0));
    if (n > 0) off = wadd(off, wmul(I(-offset), xst[d1]));
  }
  Sz<I> sizes, strides;
  for (int64_t i = 0; i < static_cast<int64_t>(xs.size()); ++i) {
    if (i == d1 || i == d2) continue;
    sizes.push_back(xs[i]);
    strides.push_back(xst[i]);
  }
  sizes.push_back(n);
  strides.push_back(wadd(xst[d1], xst[d2]));
  return {std::move(sizes), std::move(strides), off};
}
VIEW_GEO_OP(diagonal, diagonal_geo, "diagonal(Tensor(a) self, int offset, int dim1, int dim2) -> Tensor(a)")

template <class I>
Geo<I> unfold_geo(const Sz<I>& xs, const Sz<I>& xst, I off, const Attrs& a) {
  int64_t d = int_attr(a, 0), size = int_attr(a, 1), step = int_attr(a, 2);
  Sz<I> sizes = xs, strides = xst;
  if (xs.empty()) {
    sizes = {I(size)};
    strides = {I(1)};
  } else {
    I st = strides[d];
    sizes[d] = (sizes[d] - size) / step + 1;
    strides[d] = wmul(st, I(step));
    sizes.push_back(I(size));
    strides.push_back(st);
  }
  return {std::move(sizes), std::move(strides), off};
}
VIEW_GEO_OP(unfold, unfold_geo, "unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a)")

void view_as_real_k(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  const Tensor& x = in[0];
  KILN_CHECK(x.is_complex(), Runtime, "view_as_real", "view_as_real is only supported for complex "
             "tensors, got ", dtype_name(x.dtype()));
  Shape sizes = x.sizes(), strides = x.strides();
  for (auto& s : strides) s = wmul(s, int64_t(2));
  sizes.push_back(2);
  strides.push_back(1);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = x.storage();
  impl->sizes = sizes;
  impl->strides = strides;
  impl->offset = wmul(x.storage_offset(), int64_t(2));
  impl->dtype = to_real(x.dtype());
  impl->refresh();
  out = {Tensor(impl)};
}
VIEW_OP(view_as_real, view_as_real_k, "view_as_real(Tensor(a) self) -> Tensor(a)")
OpVariants v_view_as_real{op_view_as_real, kFunctionVariant};

void view_as_complex_k(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  const Tensor& x = in[0];
  KILN_CHECK(x.dtype() == kFloat32 || x.dtype() == kFloat64, Runtime, "view_as_complex",
             "view_as_complex is only supported for float and double tensors, but got a tensor of "
             "scalar type: ", dtype_name(x.dtype()));
  KILN_CHECK(x.dim() > 0 && x.sizes().back() == 2, Runtime, "view_as_complex",
             "Tensor must have a last dimension of size 2");
  KILN_CHECK(x.strides().back() == 1, Runtime, "view_as_complex",
             "Tensor must have a last dimension with stride 1");
  Shape sizes(x.sizes().begin(), x.sizes().end() - 1), strides(x.strides().begin(), x.strides().end() - 1);
  for (auto& s : strides) {
    KILN_CHECK(s % 2 == 0, Runtime, "view_as_complex", "Tensor must have a stride divisible by 2 for all "
               "but last dimension");
    s /= 2;
  }
  KILN_CHECK(x.storage_offset() % 2 == 0, Runtime, "view_as_complex",
             "Tensor must have a storage_offset divisible by 2");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = x.storage();
  impl->sizes = sizes;
  impl->strides = strides;
  impl->offset = x.storage_offset() / 2;
  impl->dtype = to_complex(x.dtype());
  impl->refresh();
  out = {Tensor(impl)};
}
VIEW_OP(view_as_complex, view_as_complex_k, "view_as_complex(Tensor(a) self) -> Tensor(a)")
OpVariants v_view_as_complex{op_view_as_complex, kFunctionVariant};

Tensor run_view(const OpDef& op, const Tensor& x, Attrs a) { return dispatch1(op, {x}, std::move(a)); }

}  // namespace

Tensor view(const Tensor& x, const Shape& shape) { return run_view(op_view, x, {shape}); }
Tensor view_dtype(const Tensor& x, Dtype d) { return run_view(op_view_dtype, x, {d}); }

Tensor view_symint(const Tensor& x, const SymShape& shape) { return view(x, raw_shape(shape)); }
Tensor reshape_symint(const Tensor& x, const SymShape& shape) { return reshape(x, raw_shape(shape)); }
Tensor expand_symint(const Tensor& x, const SymShape& shape) { return expand(x, raw_shape(shape)); }

Tensor reshape(const Tensor& x, const Shape& shape) {
  if (x.has_symbolic_sizes() || has_symbolic(shape)) [[unlikely]] {  // a traced shape stays symbolic
    SymShape s = infer_size<SymInt>(to_sym(shape), x.sym_numel(), "reshape");
    if (view_strides<SymInt>(x.sym_sizes(), x.sym_strides(), s)) return view(x, raw_shape(s));
    return view(contiguous(x), raw_shape(s));
  }
  Shape s = infer_size(shape, x.numel(), "reshape");
  if (view_strides(x.sizes(), x.strides(), s)) return view(x, s);
  return view(contiguous(x), s);
}

Tensor as_strided(const Tensor& x, const Shape& size, const Shape& stride, std::optional<int64_t> off) {
  return run_view(op_as_strided, x, {size, stride, off.value_or(x.storage_offset())});
}

Tensor permute(const Tensor& x, const Shape& dims) { return run_view(op_permute, x, {dims}); }

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  int64_t n = x.dim();
  if (n == 0) {
    wrap_dim(d0, n, "transpose");
    wrap_dim(d1, n, "transpose");
    return run_view(op_permute, x, {Shape{}});
  }
  d0 = wrap_dim(d0, n, "transpose");
  d1 = wrap_dim(d1, n, "transpose");
  Shape p(n);
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[d0], p[d1]);
  return permute(x, p);
}

Tensor t(const Tensor& x) {
  KILN_CHECK(x.dim() <= 2, Runtime, "t", "t() expects a tensor with <= 2 dimensions, but self is ",
             x.dim(), "D");
  return x.dim() < 2 ? permute(x, x.dim() == 1 ? Shape{0} : Shape{}) : transpose(x, 0, 1);
}
Tensor mT(const Tensor& x) {
  KILN_CHECK(x.dim() >= 2, Runtime, "mT", "tensor.mT is only supported on matrices or batches of "
             "matrices. Got ", x.dim(), "-D tensor.");
  return transpose(x, -2, -1);
}

Tensor expand(const Tensor& x, const Shape& shape) { return run_view(op_expand, x, {shape}); }
Tensor expand_as(const Tensor& x, const Tensor& o) { return expand(x, o.sizes()); }
Tensor broadcast_to(const Tensor& x, const Shape& shape) { return expand(x, shape); }

Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
             int64_t step) {
  KILN_CHECK(x.dim() > 0, Index, "slice", "slice() cannot be applied to a 0-dim tensor.");
  KILN_CHECK(step > 0, Value, "slice", "step must be greater than zero");
  int64_t d = wrap_dim(dim, x.dim(), "slice");
  if (x.has_symbolic_sizes()) [[unlikely]] {  // the dimension may stay symbolic (x[:, 0] records no guard)
    const SymInt n = x.sym_size(d);
    SymInt s = start ? SymInt::from_raw(*start) : SymInt(0), e = end ? SymInt::from_raw(*end) : n;
    if (bool(s < 0)) s = s + n;
    if (bool(e < 0)) e = e + n;
    if (bool(s < 0)) s = 0;
    if (bool(s > n)) s = n;
    if (bool(e < s)) e = s;
    if (bool(e > n)) e = n;
    return run_view(op_slice, x, {d, s.raw(), e.raw(), step});
  }
  int64_t n = x.sizes()[d];
  int64_t s = start.value_or(0), e = end.value_or(n);
  if (s < 0) s += n;
  if (e < 0) e += n;
  s = std::clamp<int64_t>(s, 0, n);
  e = std::clamp<int64_t>(e, s, n);
  return run_view(op_slice, x, {d, s, e, step});
}

Tensor narrow_symint(const Tensor& x, int64_t dim, SymInt start, SymInt length) {
  if (!start.is_symbolic() && !length.is_symbolic()) [[likely]] return narrow(x, dim, start.raw(), length.raw());
  KILN_CHECK(x.dim() > 0, Runtime, "narrow", "narrow() cannot be applied to a 0-dim tensor.");
  const int64_t d = wrap_dim(dim, x.dim(), "narrow");
  const SymInt n = x.sym_size(d);
  KILN_CHECK(length >= 0, Runtime, "narrow", "narrow(): length must be non-negative.");
  KILN_CHECK(start >= 0 && start <= n - length, Runtime, "narrow", "start (", start, ") + length (",
             length, ") exceeds dimension size (", n, ").");
  return run_view(op_slice, x, {d, start.raw(), (start + length).raw(), int64_t(1)});
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  KILN_CHECK(x.dim() > 0, Runtime, "narrow", "narrow() cannot be applied to a 0-dim tensor.");
  int64_t d = wrap_dim(dim, x.dim(), "narrow");
  if (x.has_symbolic_sizes()) [[unlikely]] {  // the dimension may stay symbolic
    const SymInt n = x.sym_size(d);
    KILN_CHECK(length >= 0, Runtime, "narrow", "narrow(): length must be non-negative.");
    KILN_CHECK(start >= -n && start <= n, Index, "narrow", "start out of range");
    const SymInt s = start < 0 ? n + start : SymInt(start);
    KILN_CHECK(s <= n - length, Runtime, "narrow", "start (", s, ") + length (", length,
               ") exceeds dimension size (", n, ").");
    return run_view(op_slice, x, {d, s.raw(), (s + length).raw(), int64_t(1)});
  }
  int64_t n = x.sizes()[d];
  KILN_CHECK(length >= 0, Runtime, "narrow", "narrow(): length must be non-negative.");
  KILN_CHECK(start >= -n && start <= n, Index, "narrow", "start out of range (expected to be in range of [",
             -n, ", ", n, "], but got ", start, ")");
  if (start < 0) start += n;
  KILN_CHECK(start <= n - length, Runtime, "narrow", "start (", start, ") + length (", length,
             ") exceeds dimension size (", n, ").");
  return run_view(op_slice, x, {d, start, start + length, int64_t(1)});
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  KILN_CHECK(x.dim() > 0, Index, "select", "select() cannot be applied to a 0-dim tensor.");
  int64_t d = wrap_dim(dim, x.dim(), "select");
  if (x.has_symbolic_sizes()) [[unlikely]] {  // the dimension may stay symbolic
    const SymInt n = x.sym_size(d);
    KILN_CHECK(index >= -n && index < n, Index, "select", "index ", index, " is out of bounds for dimension ",
               d, " with size ", n);
    return run_view(op_select, x, {d, (index < 0 ? n + index : SymInt(index)).raw()});
  }
  int64_t n = x.sizes()[d];
  KILN_CHECK(index >= -n && index < n, Index, "select", "index ", index, " is out of bounds for dimension ",
             d, " with size ", n);
  if (index < 0) index += n;
  return run_view(op_select, x, {d, index});
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  return run_view(op_unsqueeze, x, {dim});
}

Tensor squeeze(const Tensor& x, std::optional<Shape> dims) {
  Shape ds;
  if (dims)
    for (int64_t d : *dims) ds.push_back(wrap_dim(d, x.dim(), "squeeze"));
  return run_view(op_squeeze, x, {ds, !dims.has_value()});
}

Tensor flatten(const Tensor& x, int64_t start, int64_t end) {
  if (x.dim() == 0) return reshape(x, {1});
  start = wrap_dim(start, x.dim(), "flatten");
  end = wrap_dim(end, x.dim(), "flatten");
  KILN_CHECK(start <= end, Runtime, "flatten", "flatten() has invalid args: start_dim cannot come after "
             "end_dim");
  if (start == end) return x;
  const SymShape xs = x.sym_sizes();  // symbolic in a trace: the flattened size is their product
  SymShape s(xs.begin(), xs.begin() + start);
  SymInt m = 1;
  for (int64_t i = start; i <= end; ++i) m = m * xs[i];
  s.push_back(m);
  s.insert(s.end(), xs.begin() + end + 1, xs.end());
  return reshape(x, raw_shape(s));
}

Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes) {
  int64_t d = wrap_dim(dim, x.dim(), "unflatten");
  KILN_CHECK(!sizes.empty(), Runtime, "unflatten", "unflatten: sizes must be non-empty");
  Shape inner = infer_size(sizes, x.sizes()[d], "unflatten");
  Shape s(x.sizes().begin(), x.sizes().begin() + d);
  s.insert(s.end(), inner.begin(), inner.end());
  s.insert(s.end(), x.sizes().begin() + d + 1, x.sizes().end());
  return view(x, s);
}

Tensor diagonal(const Tensor& x, int64_t offset, int64_t d1, int64_t d2) {
  d1 = wrap_dim(d1, x.dim(), "diagonal");  // torch's IndexError first (a 1-d tensor's dim 1)
  d2 = wrap_dim(d2, x.dim(), "diagonal");
  KILN_CHECK(x.dim() >= 2, Runtime, "diagonal", "diagonal dimensions requested (", d1, ", ", d2,
             ") but the tensor has only ", x.dim(), " dimensions");
  KILN_CHECK(d1 != d2, Runtime, "diagonal", "diagonal dimensions cannot be identical ", d1, ", ", d2);
  return run_view(op_diagonal, x, {offset, d1, d2});
}

Tensor unfold(const Tensor& x, int64_t dim, int64_t size, int64_t step) {
  int64_t d = wrap_dim(dim, x.dim(), "unfold");
  const SymInt n = x.dim() == 0 ? SymInt(1) : x.sym_size(d);  // (a trace: a guard only when undecided)
  KILN_CHECK(bool(n >= size), Runtime, "unfold", "maximum size for tensor at dimension ", d, " is ", n,
             " but size is ", size);
  KILN_CHECK(size >= 0, Runtime, "unfold", "size is ", size, " but must be >= 0");
  KILN_CHECK(step > 0, Runtime, "unfold", "step is ", step, " but must be > 0");
  return run_view(op_unfold, x, {d, size, step});
}

Tensor movedim(const Tensor& x, const Shape& src, const Shape& dst) {
  int64_t n = x.dim();
  KILN_CHECK(src.size() == dst.size(), Runtime, "movedim", "movedim: Invalid source or destination "
             "dims: source (", src, " dims) should contain the same number of dims as destination (",
             dst, " dims)");
  Shape perm(n, -1);
  std::vector<bool> used(n, false);
  for (size_t i = 0; i < src.size(); ++i) {
    int64_t s = wrap_dim(src[i], n, "movedim"), d = wrap_dim(dst[i], n, "movedim");
    KILN_CHECK(perm[d] == -1 && !used[s], Runtime, "movedim", "movedim: repeated dim in `source` or `destination`");
    perm[d] = s;
    used[s] = true;
  }
  int64_t next = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (perm[i] != -1) continue;
    while (used[next]) ++next;
    perm[i] = next;
    used[next] = true;
  }
  return permute(x, perm);
}

Tensor view_as_real(const Tensor& x) { return run_view(op_view_as_real, x, {}); }
Tensor view_as_complex(const Tensor& x) { return run_view(op_view_as_complex, x, {}); }
Tensor real(const Tensor& x) { return x.is_complex() ? select(view_as_real(x), -1, 0) : x; }
Tensor imag(const Tensor& x) {
  KILN_CHECK(x.is_complex(), Runtime, "imag", "imag is not implemented for tensors with non-complex dtypes.");
  return select(view_as_real(x), -1, 1);
}
Tensor conj(const Tensor& x) { return x.is_complex() ? conj_physical(x) : x; }

namespace {
// split/chunk under autograd: one backward node that concatenates the pieces' gradients (zeros for
// pieces that got none), instead of one zero-padded full-size gradient per piece. Like torch, the
// pieces are views that are not meant to be modified in place.
struct SplitWithSizes : autograd::Function<SplitWithSizes> {
  static std::string name() { return "SplitWithSizes"; }
  static TensorList forward(autograd::AutogradContext* ctx, const TensorList& in, Shape sizes, int64_t d) {
    ctx->saved_data["dim"] = d;
    TensorList out;
    int64_t start = 0;
    for (int64_t n : sizes) {
      out.push_back(narrow(in[0], d, start, n));
      start += n;
    }
    return out;
  }
  static TensorList backward(autograd::AutogradContext* ctx, const TensorList& g) {
    return {cat(g, std::get<int64_t>(ctx->saved_data["dim"]))};
  }
};

TensorList split_pieces(const Tensor& x, const Shape& sizes, int64_t d) {
  if (autograd::function_needs_record({x})) return SplitWithSizes::apply({x}, sizes, d);
  TensorList out;
  int64_t start = 0;
  for (int64_t n : sizes) {
    out.push_back(narrow(x, d, start, n));
    start += n;
  }
  return out;
}
}  // namespace

TensorList split(const Tensor& x, int64_t size, int64_t dim) {
  int64_t d = wrap_dim(dim, x.dim(), "split");
  int64_t n = x.size(d);  // only the split dimension needs a number
  KILN_CHECK(size >= 0, Runtime, "split", "split expects split_size be non-negative, but got split_size=", size);
  KILN_CHECK(size > 0 || n == 0, Runtime, "split", "split_size can only be 0 if dimension size is 0, but got dimension size of ", n);
  if (n == 0) return {x};
  Shape sizes;
  for (int64_t s = 0; s < n; s += size) sizes.push_back(std::min(size, n - s));
  return split_pieces(x, sizes, d);
}

TensorList split_with_sizes(const Tensor& x, const Shape& sizes, int64_t dim) {
  int64_t d = wrap_dim(dim, x.dim(), "split_with_sizes");
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  KILN_CHECK(total == x.sizes()[d], Runtime, "split_with_sizes", "split_with_sizes expects split_sizes to "
             "sum exactly to ", x.sizes()[d], " (input tensor's size at dimension ", d, "), but got split_sizes=",
             sizes);
  return split_pieces(x, sizes, d);
}

TensorList chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  KILN_CHECK(x.dim() > 0, Runtime, "chunk", "chunk expects at least a 1-dimensional tensor");
  KILN_CHECK(chunks > 0, Runtime, "chunk", "chunk expects `chunks` to be greater than 0, got: ", chunks);
  int64_t d = wrap_dim(dim, x.dim(), "chunk");
  int64_t n = x.size(d);  // pins this dimension only, in a trace
  int64_t size = (n + chunks - 1) / chunks;
  if (size == 0 && n == 0) {
    TensorList out;
    for (int64_t i = 0; i < chunks; ++i) out.push_back(narrow(x, d, 0, 0));
    return out;
  }
  return split(x, std::max<int64_t>(size, 1), d);
}

TensorList unbind(const Tensor& x, int64_t dim) {
  int64_t d = wrap_dim(dim, x.dim(), "unbind");
  KILN_CHECK(x.dim() > 0, Index, "unbind", "Dimension specified as 0 but tensor has no dimensions");
  TensorList out;
  for (int64_t i = 0; i < x.sizes()[d]; ++i) out.push_back(select(x, d, i));
  return out;
}

TensorList broadcast_tensors(const TensorList& ts) {
  Shape s;
  for (const Tensor& t : ts) s = broadcast_shapes(s, t.sizes(), "broadcast_tensors");
  TensorList out;
  for (const Tensor& t : ts) out.push_back(expand(t, s));
  return out;
}

Tensor Tensor::view(const Shape& s) const { return kiln::view(*this, s); }
Tensor Tensor::reshape(const Shape& s) const { return kiln::reshape(*this, s); }
Tensor Tensor::permute(const Shape& d) const { return kiln::permute(*this, d); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return kiln::transpose(*this, a, b); }
Tensor Tensor::t() const { return kiln::t(*this); }
Tensor Tensor::unsqueeze(int64_t d) const { return kiln::unsqueeze(*this, d); }
Tensor Tensor::squeeze(int64_t d) const { return kiln::squeeze(*this, Shape{d}); }
Tensor Tensor::expand(const Shape& s) const { return kiln::expand(*this, s); }
Tensor Tensor::select(int64_t d, int64_t i) const { return kiln::select(*this, d, i); }
Tensor Tensor::narrow(int64_t d, int64_t s, int64_t l) const { return kiln::narrow(*this, d, s, l); }
Tensor Tensor::flatten(int64_t s, int64_t e) const { return kiln::flatten(*this, s, e); }

}  // namespace kiln
