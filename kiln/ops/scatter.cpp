// Scatter-style indexing ops: scatter / scatter_add / scatter_reduce, index_add / index_copy / index_fill,
// masked_scatter, take / take_along_dim / put, and torch.index_put with torch's argument checks.
//
// Every kernel validates its indices (and everything else that can fail) before the first write, and
// runs serially: duplicate indices resolve exactly as on torch's CPU (the last write wins; reductions
// accumulate in increasing source order). Nothing here throws inside a parallel region.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kiln/core/convert.h"
#include "kiln/core/visit.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"

namespace kiln {


using shape_detail::check_scalar_fits;
using shape_detail::not_implemented;
using shape_detail::torch_type_name;

namespace {

// torch's AT_ALL_TYPES_AND_COMPLEX_AND3(Bool, Half, BFloat16): no uint16/32/64, no float8.
template <class F>
decltype(auto) visit_std(Dtype d, const char* op, const char* kernel, F&& f) {
  switch (d) {
    KILN_VCASE(Bool) KILN_VCASE(UInt8) KILN_VCASE(Int8) KILN_VCASE(Int16) KILN_VCASE(Int32) KILN_VCASE(Int64)
    KILN_VFLOATS KILN_VCOMPLEX
    default: not_implemented(op, kernel, d);
  }
}
bool std_dtype(Dtype d) {
  return !(d == kUInt16 || d == kUInt32 || d == kUInt64 || is_float8(d));
}

int64_t nonempty_dim(const Tensor& t) { return t.dim() == 0 ? 1 : t.dim(); }
int64_t nonempty_size(const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.sizes()[d]; }
Shape nonempty_sizes(const Tensor& t) { return t.dim() == 0 ? Shape{1} : t.sizes(); }
Shape nonempty_strides(const Tensor& t) { return t.dim() == 0 ? Shape{1} : t.strides(); }

// size(d) of t as torch's Tensor::size would: IndexError for d outside a non-scalar tensor's dims.
int64_t checked_size(const Tensor& t, int64_t d, const char* op) {
  if (t.dim() == 0) return 1;
  KILN_CHECK(d < t.dim(), Index, op, "Dimension out of range (expected to be in range of [", -t.dim(), ", ",
             t.dim() - 1, "], but got ", d, ")");
  return t.sizes()[d];
}

bool same_view(const Tensor& a, const Tensor& b) {
  return a.data_ptr() == b.data_ptr() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.dtype() == b.dtype();
}
// out := x, unless out already is x (in-place calls write straight into self).
void init_out(const Tensor& out, const Tensor& x) {
  if (!same_view(out, x)) copy_(out, x);
}

Tensor index_i64(const Tensor& idx) { return contiguous(to_dtype(idx, kInt64)); }
const int64_t* i64p(const Tensor& t) { return static_cast<const int64_t*>(t.data_ptr()); }

// Visits every position of `sizes` in row-major order: f(linear, offset_a, offset_b), offsets in
// elements for the two stride sets.
template <class F>
void for_each_pos(const Shape& sizes, const Shape& sa, const Shape& sb, F&& f) {
  int64_t n = shape_numel(sizes);
  if (n == 0) return;
  int64_t nd = static_cast<int64_t>(sizes.size());
  if (nd == 0) {
    f(int64_t(0), int64_t(0), int64_t(0));
    return;
  }
  std::vector<int64_t> c(nd, 0);
  int64_t oa = 0, ob = 0;
  int64_t last = sizes[nd - 1], la = sa[nd - 1], lb = sb[nd - 1];
  for (int64_t lin = 0; lin < n; lin += last) {
    for (int64_t i = 0; i < last; ++i) f(lin + i, oa + i * la, ob + i * lb);
    for (int64_t d = nd - 2; d >= 0; --d) {
      if (++c[d] < sizes[d]) {
        oa += sa[d];
        ob += sb[d];
        break;
      }
      oa -= (sizes[d] - 1) * sa[d];
      ob -= (sizes[d] - 1) * sb[d];
      c[d] = 0;
    }
  }
}

// ---- element arithmetic with torch's CPU semantics ---------------------------------------------------
template <class T>
inline T e_add(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a || b;
  else if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else if constexpr (is_complex_v<T>) return a + b;
  else return static_cast<T>(static_cast<opmath_t<T>>(a) + static_cast<opmath_t<T>>(b));
}
template <class T>
inline T e_mul(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a && b;
  else if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else if constexpr (is_complex_v<T>) return a * b;
  else return static_cast<T>(static_cast<opmath_t<T>>(a) * static_cast<opmath_t<T>>(b));
}
template <class T>
inline bool e_isnan(T v) {
  if constexpr (is_float_v<T>) return std::isnan(static_cast<double>(static_cast<opmath_t<T>>(v)));
  else return false;
}
// self = a, src = b; NaN propagates from either side.
template <class T>
inline T e_max(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a || b;
  else if constexpr (is_complex_v<T>) return a;  // not reached: complex is rejected before
  else {
    if (e_isnan(b)) return b;
    return static_cast<opmath_t<T>>(a) < static_cast<opmath_t<T>>(b) ? b : a;
  }
}
template <class T>
inline T e_min(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a && b;
  else if constexpr (is_complex_v<T>) return a;
  else {
    if (e_isnan(b)) return b;
    return static_cast<opmath_t<T>>(b) < static_cast<opmath_t<T>>(a) ? b : a;
  }
}
// mean: self / count with count held in T as torch does (floats divide, integers floor-divide).
template <class T>
inline T count_as(int64_t c) {
  if constexpr (is_complex_v<T>) return T(static_cast<typename T::value_type>(c));
  else if constexpr (is_float_v<T>) return static_cast<T>(static_cast<float>(c));
  else return static_cast<T>(static_cast<uint64_t>(c));  // integers wrap
}
template <class T>
inline T e_div_count(T s, T c) {
  if constexpr (is_complex_v<T>) {
    using V = typename T::value_type;
    V scl = V(1) / c.real();  // c10::complex division by (c + 0i)
    return T(s.real() * scl, s.imag() * scl);
  } else if constexpr (is_float_v<T>) {
    return static_cast<T>(static_cast<opmath_t<T>>(s) / static_cast<opmath_t<T>>(c));
  } else if constexpr (std::is_same_v<T, bool>) {
    return s;
  } else if constexpr (std::is_signed_v<T>) {
    int64_t a = s, b = c;
    if (b == -1) return static_cast<T>(static_cast<uint64_t>(0) - static_cast<uint64_t>(a));
    int64_t q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) --q;
    return static_cast<T>(q);
  } else {
    return static_cast<T>(static_cast<uint64_t>(s) / static_cast<uint64_t>(c));
  }
}
template <class T>
T identity_of(int red);

// ---- scatter / scatter_add / scatter_reduce -----------------------------------------------------------
enum Red { kNone = 0, kSum, kProd, kMean, kAmax, kAmin };
enum ScatterCode { kScSrc = 0, kScValue, kScAdd, kScReduce };

template <class T>
T identity_of(int red) {
  switch (red) {
    case kProd: return T(1);
    case kAmax:
      if constexpr (std::is_same_v<T, bool>) return false;
      else if constexpr (is_complex_v<T>) return T(0);
      else if constexpr (is_float_v<T>) return static_cast<T>(-std::numeric_limits<float>::infinity());
      else return std::numeric_limits<T>::lowest();
    case kAmin:
      if constexpr (std::is_same_v<T, bool>) return true;
      else if constexpr (is_complex_v<T>) return T(0);
      else if constexpr (is_float_v<T>) return static_cast<T>(std::numeric_limits<float>::infinity());
      else return std::numeric_limits<T>::max();
    default: return T(0);
  }
}

int legacy_reduce(const std::string& r, const char* op) {
  if (r.empty()) return kNone;
  if (r == "add") return kSum;
  if (r == "multiply") return kProd;
  KILN_FAIL(Runtime, op, "reduce argument must be either add or multiply.");
}
int two_reduce(const std::string& r, const char* op) {
  if (r == "sum") return kSum;
  if (r == "prod") return kProd;
  if (r == "mean") return kMean;
  if (r == "amax") return kAmax;
  if (r == "amin") return kAmin;
  KILN_FAIL(Runtime, op, "reduce argument must be either sum, prod, mean, amax or amin, got ", r);
}

// The shape checks of torch's scatter_meta_impl (dtype, then sizes, then the reduce name).
SpecList scatter_meta(const OpDef& op, const TensorList& in, const Attrs& a) {
  const Tensor &x = in[0], &idx = in[1];
  const Tensor* src = op.code == kScValue ? nullptr : &in[2];
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

// The scatter loop over index positions. A: the accumulation type (float for half / bfloat16).
template <class T, class A>
void scatter_run(const Tensor& y, const Shape& S, const Shape& ost, int64_t odim, const Shape& sst, const int64_t* ip,
                 const T* sp, T v, int red, bool include_self) {
  T* yp = static_cast<T*>(y.data_ptr());
  int64_t numel = y.numel();
  A* buf;
  std::vector<A> store;
  if constexpr (std::is_same_v<A, T>) {
    buf = yp;
  } else {
    store.resize(static_cast<size_t>(numel));
    for (int64_t t = 0; t < numel; ++t) store[t] = static_cast<A>(yp[t]);
    buf = store.data();
  }
  auto srcv = [&](int64_t so) -> A { return static_cast<A>(sp ? sp[so] : v); };
  if (!include_self) {
    A init = identity_of<A>(red);
    for_each_pos(S, ost, sst, [&](int64_t lin, int64_t oo, int64_t) { buf[oo + ip[lin] * odim] = init; });
  }
  std::vector<int64_t> cnt;
  if (red == kMean) cnt.assign(static_cast<size_t>(numel), include_self ? 1 : 0);
  for_each_pos(S, ost, sst, [&](int64_t lin, int64_t oo, int64_t so) {
    int64_t t = oo + ip[lin] * odim;
    A& o = buf[t];
    switch (red) {
      case kNone: o = srcv(so); break;
      case kSum: o = e_add(o, srcv(so)); break;
      case kMean:
        o = e_add(o, srcv(so));
        ++cnt[t];
        break;
      case kProd: o = e_mul(o, srcv(so)); break;
      case kAmax: o = e_max(o, srcv(so)); break;
      default: o = e_min(o, srcv(so));
    }
  });
  if constexpr (!std::is_same_v<A, T>)
    for (int64_t t = 0; t < numel; ++t) yp[t] = static_cast<T>(store[t]);
  if (red == kMean)
    for (int64_t t = 0; t < numel; ++t) {
      if (cnt[t] == 0 || (cnt[t] == 1 && include_self)) continue;  // torch divides these by 1
      T c = count_as<T>(cnt[t]);
      if (c == T(0)) c = T(1);  // count.masked_fill_(count == 0, 1)
      yp[t] = e_div_count(yp[t], c);
    }
}

void scatter_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor &x = in[0], &idx = in[1];
  const Tensor& y = out[0];
  init_out(y, x);
  // scatter_reduce(mean) divides by a count tensor even for an empty index: torch's masked_fill_ / floor
  // division have no kernel for these dtypes
  if (op.code == kScReduce && two_reduce(attr<std::string>(a, 1), op.name) == kMean &&
      ((x.dtype() == kBool && idx.numel() == 0) || !std_dtype(x.dtype())))
    not_implemented(op.name, x.dtype() == kBool ? "div_floor_cpu" : "masked_fill", x.dtype());
  if (idx.numel() == 0) return;
  int64_t dim = x.dim() ? wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name) : 0;
  const bool has_src = op.code != kScValue;
  int red = kNone;
  bool include_self = true;
  Scalar value;
  switch (op.code) {
    case kScSrc: red = legacy_reduce(attr<std::string>(a, 1), op.name); break;
    case kScValue:
      value = attr<Scalar>(a, 1);
      red = legacy_reduce(attr<std::string>(a, 2), op.name);
      break;
    case kScAdd: red = kSum; break;
    default:
      red = two_reduce(attr<std::string>(a, 1), op.name);
      include_self = attr<bool>(a, 2);
  }
  if (has_src)
    KILN_CHECK(nonempty_dim(in[2]) == nonempty_dim(idx), Runtime, op.name,
               "Index tensor must have the same number of dimensions as src tensor");
  // dtypes torch's kernels are compiled for
  Dtype dt = x.dtype();
  const char* kname = op.code == kScReduce ? "scatter_reduce_two_cpu" : "scatter_gather_tensor_cpu";
  if (!std_dtype(dt)) not_implemented(op.name, kname, dt);
  if ((red == kAmax || red == kAmin) && is_complex(dt)) not_implemented(op.name, kname, dt);
  if (!has_src) check_scalar_fits(value, dt, op.name);
  // indices: checked before the first write
  Tensor ii = index_i64(idx);
  const int64_t* ip = i64p(ii);
  int64_t n = nonempty_size(y, dim);
  for (int64_t i = 0; i < ii.numel(); ++i)
    KILN_CHECK(ip[i] >= 0 && ip[i] < n, Runtime, op.name, "index ", ip[i], " is out of bounds for dimension ", dim,
               " with size ", n);
  // bool sums fine, but torch's final floor division has no bool kernel (raised here, before any write)
  if (red == kMean && dt == kBool) not_implemented(op.name, "div_floor_cpu", dt);
  Shape S = nonempty_sizes(idx);
  Shape ost = nonempty_strides(y);  // y is contiguous
  int64_t odim = ost[dim];
  ost[dim] = 0;
  Shape sst = has_src ? nonempty_strides(in[2]) : Shape(S.size(), 0);
  visit_std(dt, op.name, kname, [&]<class T>() {
    const T* sp = has_src ? static_cast<const T*>(in[2].data_ptr()) : nullptr;
    T v = has_src ? T() : value.to<T>();
    // torch accumulates half / bfloat16 reductions in float and rounds once
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      if (red != kNone) {
        scatter_run<T, float>(y, S, ost, odim, sst, ip, sp, v, red, include_self);
        return;
      }
    }
    scatter_run<T, T>(y, S, ost, odim, sst, ip, sp, v, red, include_self);
  });
}

OpDef op_scatter{"scatter", kInplaceable, scatter_meta, {scatter_kernel, nullptr}, kScSrc};
OpRegistrar reg_scatter{op_scatter, "scatter.src(Tensor self, Tensor index, Tensor src, int dim, str reduce) -> Tensor"};
OpDef op_scatter_value{"scatter.value", kInplaceable, scatter_meta, {scatter_kernel, nullptr}, kScValue};
OpRegistrar reg_scatter_value{op_scatter_value, "scatter.value(Tensor self, Tensor index, int dim, Scalar value, str reduce) -> Tensor"};
OpDef op_scatter_add{"scatter_add", kInplaceable, scatter_meta, {scatter_kernel, nullptr}, kScAdd};
OpRegistrar reg_scatter_add{op_scatter_add, "scatter_add(Tensor self, Tensor index, Tensor src, int dim) -> Tensor"};
OpDef op_scatter_reduce{"scatter_reduce", kInplaceable, scatter_meta, {scatter_kernel, nullptr}, kScReduce};
OpRegistrar reg_scatter_reduce{op_scatter_reduce, "scatter_reduce.two(Tensor self, Tensor index, Tensor src, int dim, str reduce, bool include_self) -> Tensor"};

// ---- index_add / index_copy / index_fill --------------------------------------------------------------
// Visits the slice positions of index entry i: f(i, k = index[i], offset in out, offset in source).
// S = source-like shape (dim d has one entry per index), out strides with d zeroed.
template <class F>
void for_each_index_slice(const Shape& S, int64_t d, const Shape& ost, const Shape& sst, F&& f) {
  int64_t inner = 1;
  for (size_t j = d + 1; j < S.size(); ++j) inner *= S[j];
  int64_t sd = S[d];
  for_each_pos(S, ost, sst, [&](int64_t lin, int64_t oo, int64_t so) { f((lin / inner) % sd, oo, so); });
}

SpecList index_add_meta(const OpDef& op, const TensorList& in, const Attrs& a) {
  const Tensor &x = in[0], &idx = in[1], &src = in[2];
  int64_t dim = wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  int64_t numel = idx.numel();
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
  Shape xs = x.sizes(), ss = src.sizes();
  if (src.dim() != 0 && x.dim() != 0) {
    xs.erase(xs.begin() + dim);
    ss.erase(ss.begin() + dim);
  }
  KILN_CHECK(xs == ss, Runtime, op.name, "source tensor shape must match self tensor shape, excluding the specified "
             "dimension. Got self.shape = ", x.sizes(), " source.shape = ", src.sizes());
  return {{x.sizes(), x.dtype()}};
}

void index_add_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor &x = in[0], &idx = in[1], &src = in[2];
  const Tensor& y = out[0];
  int64_t dim = x.dim() ? wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name) : 0;
  const Scalar& alpha = attr<Scalar>(a, 1);
  init_out(y, x);
  if (y.dim() > 1 && (idx.numel() == 0 || y.numel() == 0)) return;  // torch returns before dispatching
  // torch runs index_add through scatter_add (float accumulation for half / bfloat16, RuntimeError for a bad
  // index) when dim is the first or last of a >1-D self, the index is int64 and alpha is 1; otherwise it adds
  // slice by slice (rounding each step) and raises IndexError.
  bool unit = !alpha.is_complex() && alpha.to_double() == 1.0;
  bool via_scatter = y.dim() > 1 && (dim == 0 || dim == y.dim() - 1) && idx.dtype() == kInt64 && unit;
  Tensor ii = index_i64(idx);
  const int64_t* ip = i64p(ii);
  int64_t n = nonempty_size(y, dim);
  if (!std_dtype(x.dtype())) {
    // slice by slice, torch checks index 0 before its first add_ fails on the dtype
    if (y.dim() > 1 && !via_scatter && ii.numel() > 0)
      KILN_CHECK(ip[0] >= 0 && ip[0] < n, Index, op.name, "index out of range in self");
    not_implemented(op.name, y.dim() <= 1 ? "index_add_" : via_scatter ? "scatter_gather_tensor_cpu" : "add_stub",
                    x.dtype());
  }
  check_scalar_fits(alpha, x.dtype(), op.name);
  if (idx.numel() == 0) return;
  for (int64_t i = 0; i < ii.numel(); ++i) {
    if (via_scatter)
      KILN_CHECK(ip[i] >= 0 && ip[i] < n, Runtime, op.name, "index ", ip[i], " is out of bounds for dimension ", dim,
                 " with size ", n);
    else
      KILN_CHECK(ip[i] >= 0 && ip[i] < n, Index, op.name, "index out of range in self");
  }
  // source viewed with y's rank (a 0-dim source is one slice)
  Shape S = nonempty_sizes(y);
  S[dim] = ii.numel();
  Shape sst = src.dim() == 0 ? Shape(S.size(), 0) : src.strides();
  Shape ost = nonempty_strides(y);
  int64_t odim = ost[dim];
  ost[dim] = 0;
  visit_std(x.dtype(), op.name, "index_add_", [&]<class T>() {
    T* yp = static_cast<T*>(y.data_ptr());
    const T* sp = static_cast<const T*>(src.data_ptr());
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      if (via_scatter) {
        std::vector<float> buf(static_cast<size_t>(y.numel()));
        for (int64_t t = 0; t < y.numel(); ++t) buf[t] = static_cast<float>(yp[t]);
        for_each_index_slice(S, dim, ost, sst, [&](int64_t i, int64_t oo, int64_t so) {
          buf[oo + ip[i] * odim] += static_cast<float>(sp[so]);
        });
        for (int64_t t = 0; t < y.numel(); ++t) yp[t] = static_cast<T>(buf[t]);
        return;
      }
    }
    T al = alpha.to<T>();
    float alf = alpha.to<float>();
    (void)alf;
    bool one_d = y.dim() <= 1;  // torch: `*self += *src * alpha` in T; otherwise add_(src, alpha)
    for_each_index_slice(S, dim, ost, sst, [&](int64_t i, int64_t oo, int64_t so) {
      T& o = yp[oo + ip[i] * odim];
      if (unit) o = e_add(o, sp[so]);
      else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        if (one_d) o = e_add(o, e_mul(sp[so], al));
        else o = static_cast<T>(static_cast<float>(o) + alf * static_cast<float>(sp[so]));
      } else {
        o = e_add(o, e_mul(sp[so], al));
      }
    });
  });
}
OpDef op_index_add{"index_add", kInplaceable, index_add_meta, {index_add_kernel, nullptr}};
OpRegistrar reg_index_add{op_index_add, "index_add(Tensor self, Tensor index, Tensor source, int dim, Scalar alpha) -> Tensor"};

// index_copy / index_fill on an empty self: torch restrides self to the index's length along dim (with
// stride 0 there); when that view is non-empty its storage is too small (RuntimeError), otherwise nothing
// happens and indices are not checked. Returns true when there is nothing to do.
bool empty_self_restrided(const Tensor& y, int64_t dim, int64_t nidx, const char* op) {
  if (y.numel() != 0) return false;
  Shape s = nonempty_sizes(y), st = nonempty_strides(y);
  s[dim] = nidx;
  st[dim] = 0;
  if (shape_numel(s) == 0) return true;
  int64_t need = 1 + y.storage_offset();
  for (size_t d = 0; d < s.size(); ++d) need += (s[d] - 1) * st[d];
  int64_t have = static_cast<int64_t>(y.storage()->nbytes());
  KILN_CHECK(need * static_cast<int64_t>(y.itemsize()) <= have, Runtime, op, "setStorage: sizes ", s, ", strides ", st,
             " are out of bounds for storage of size ", have);
  return false;  // the indices are checked next: every one is out of range
}

SpecList index_copy_meta(const OpDef& op, const TensorList& in, const Attrs& a) {
  const Tensor &x = in[0], &idx = in[1], &src = in[2];
  int64_t dim = wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  KILN_CHECK(idx.dim() < 2, Index, op.name, "index_copy_(): Index should have dimension 1 or 0 (got ", idx.dim(), ")");
  int64_t numel = idx.numel();
  if (src.dim() == 0 && numel != 1)
    KILN_FAIL(Index, op.name, "index_copy_(): When source is scalar, index should have one element (got ", numel, ")");
  if (src.dim() != x.dim() && src.dim() != 0 && x.dim() != 0)
    KILN_FAIL(Index, op.name, "index_copy_(): When source and destination are not scalars, their dimensionality "
              "must match. Source dimensionality (", src.dim(), "), destination dimensionality (", x.dim(), ")");
  KILN_CHECK(idx.dtype() == kInt64, Runtime, op.name, "index_copy_(): Expected a long tensor for index, but got ",
             torch_type_name(idx.dtype()));
  KILN_CHECK(x.dtype() == src.dtype(), Runtime, op.name, "index_copy_(): self and source expected to have the same "
             "dtype, but got (self) ", torch_type_name(x.dtype()), " and (source) ", torch_type_name(src.dtype()));
  Shape xs = x.sizes(), ss = src.sizes();
  if (!xs.empty()) xs.erase(xs.begin() + dim);
  if (!ss.empty()) ss.erase(ss.begin() + dim);
  KILN_CHECK(xs == ss, Runtime, op.name, "index_copy_(): Source/destination tensor must have same slice shapes. "
             "Destination slice shape: ", xs, " and source slice shape: ", ss);
  KILN_CHECK(src.dim() == 0 || numel == src.sizes()[dim], Index, op.name, "index_copy_(): Number of indices (",
             numel, ") should be equal to source.size(dim) (", src.dim() ? src.sizes()[dim] : 1, ")");
  return {{x.sizes(), x.dtype()}};
}

void index_copy_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor &x = in[0], &idx = in[1], &src = in[2];
  const Tensor& y = out[0];
  int64_t dim = x.dim() ? wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name) : 0;
  init_out(y, x);
  bool nothing = idx.numel() == 0 || empty_self_restrided(y, dim, idx.numel(), op.name);
  if (!std_dtype(x.dtype())) not_implemented(op.name, "index_copy_cpu", x.dtype());
  if (nothing) return;
  Tensor ii = index_i64(idx);
  const int64_t* ip = i64p(ii);
  int64_t n = nonempty_size(y, dim);
  for (int64_t i = 0; i < ii.numel(); ++i)
    KILN_CHECK(ip[i] >= 0 && ip[i] < n, Index, op.name, "index_copy_(): index ", ip[i],
               " is out of bounds for dimension ", dim, " with size ", n);
  Shape S = nonempty_sizes(y);
  S[dim] = ii.numel();
  Shape sst = src.dim() == 0 ? Shape(S.size(), 0) : src.strides();
  Shape ost = nonempty_strides(y);
  int64_t odim = ost[dim];
  ost[dim] = 0;
  int64_t isz = static_cast<int64_t>(x.itemsize());
  char* yp = static_cast<char*>(y.data_ptr());
  const char* sp = static_cast<const char*>(src.data_ptr());
  for_each_index_slice(S, dim, ost, sst, [&](int64_t i, int64_t oo, int64_t so) {
    std::memcpy(yp + (oo + ip[i] * odim) * isz, sp + so * isz, isz);
  });
}
OpDef op_index_copy{"index_copy", kInplaceable, index_copy_meta, {index_copy_kernel, nullptr}};
OpRegistrar reg_index_copy{op_index_copy, "index_copy(Tensor self, Tensor index, Tensor source, int dim) -> Tensor"};

SpecList index_fill_meta(const OpDef& op, const TensorList& in, const Attrs& a) {
  const Tensor &x = in[0], &idx = in[1];
  KILN_CHECK(idx.dtype() == kInt64, Index, op.name, "index_fill_(): Expected dtype int64 for index.");
  const Scalar& v = attr<Scalar>(a, 1);
  KILN_CHECK(x.is_complex() || !v.is_complex(), Runtime, op.name,
             "index_fill_(): Converting complex Scalar to non-complex type is not supported");
  wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  KILN_CHECK(idx.dim() <= 1, Runtime, op.name, "Index has to be a vector/scalar");
  return {{x.sizes(), x.dtype()}};
}

void index_fill_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor &x = in[0], &idx = in[1];
  const Tensor& y = out[0];
  int64_t dim = wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  const Scalar& v = attr<Scalar>(a, 1);
  init_out(y, x);
  bool nothing = idx.numel() == 0 || empty_self_restrided(y, dim, idx.numel(), op.name);
  if (!std_dtype(x.dtype())) not_implemented(op.name, "index_fill_cpu", x.dtype());
  check_scalar_fits(v, x.dtype(), op.name);
  if (nothing) return;
  Tensor ii = index_i64(idx);
  const int64_t* ip = i64p(ii);
  int64_t n = nonempty_size(y, dim);
  for (int64_t i = 0; i < ii.numel(); ++i)
    KILN_CHECK(ip[i] >= -n && ip[i] < n, Index, op.name, "index ", ip[i], " is out of bounds for dimension ", dim,
               " with size ", n);
  Shape S = nonempty_sizes(y);
  S[dim] = ii.numel();
  Shape ost = nonempty_strides(y);
  int64_t odim = ost[dim];
  ost[dim] = 0;
  Shape zero(S.size(), 0);
  visit_std(x.dtype(), op.name, "index_fill_cpu", [&]<class T>() {
    T* yp = static_cast<T*>(y.data_ptr());
    T val = v.to<T>();
    for_each_index_slice(S, dim, ost, zero, [&](int64_t i, int64_t oo, int64_t) {
      int64_t k = ip[i] < 0 ? ip[i] + n : ip[i];
      yp[oo + k * odim] = val;
    });
  });
}
OpDef op_index_fill{"index_fill", kInplaceable, index_fill_meta, {index_fill_kernel, nullptr}};
OpRegistrar reg_index_fill{op_index_fill, "index_fill.int_Scalar(Tensor self, Tensor index, int dim, Scalar value) -> Tensor"};

// ---- masked_scatter -----------------------------------------------------------------------------------
void check_masked_scatter(const OpDef& op, const Tensor& x, const Tensor& mask, const Tensor& src) {
  KILN_CHECK(x.dtype() == src.dtype(), Runtime, op.name, "masked_scatter: expected self and source to have same "
             "dtypes but got", torch_type_name(x.dtype()), " and ", torch_type_name(src.dtype()));
  KILN_CHECK(mask.dtype() == kBool, Runtime, op.name, "masked_scatter_ only supports boolean masks, but got mask "
             "with dtype ", torch_type_name(mask.dtype()));
}
SpecList masked_scatter_meta(const OpDef& op, const TensorList& in, const Attrs&) {
  const Tensor &x = in[0], &mask = in[1], &src = in[2];
  Shape s = broadcast_shapes(mask.sizes(), x.sizes(), op.name);
  check_masked_scatter(op, x, mask, src);
  return {{s, x.dtype()}};
}
void masked_scatter_kernel(const OpDef& op, const TensorList& in, const Attrs&, TensorList& out) {
  const Tensor &x = in[0], &mask = in[1], &src = in[2];
  const Tensor& y = out[0];
  init_out(y, x);
  if (!std_dtype(x.dtype())) not_implemented(op.name, "masked_scatter", x.dtype());
  if (y.numel() == 0) return;
  Tensor m = contiguous(expand(mask, y.sizes()));
  const bool* mp = static_cast<const bool*>(m.data_ptr());
  int64_t cnt = 0;
  for (int64_t i = 0; i < m.numel(); ++i) cnt += mp[i];
  KILN_CHECK(cnt <= src.numel(), Runtime, op.name, "Number of elements of source < number of ones in mask");
  Tensor s = contiguous(src);
  int64_t isz = static_cast<int64_t>(x.itemsize());
  char* yp = static_cast<char*>(y.data_ptr());
  const char* sp = static_cast<const char*>(s.data_ptr());
  for (int64_t i = 0, k = 0; i < m.numel(); ++i)
    if (mp[i]) std::memcpy(yp + i * isz, sp + (k++) * isz, isz);
}
OpDef op_masked_scatter{"masked_scatter", kInplaceable, masked_scatter_meta, {masked_scatter_kernel, nullptr}};
OpRegistrar reg_masked_scatter{op_masked_scatter, "masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor"};

// ---- take / put ---------------------------------------------------------------------------------------
SpecList take_meta(const OpDef& op, const TensorList& in, const Attrs&) {
  const Tensor &x = in[0], &idx = in[1];
  KILN_CHECK(idx.dtype() == kInt64, Runtime, op.name, "take(): Expected a long tensor for index, but got ",
             torch_type_name(idx.dtype()));
  KILN_CHECK(!(x.numel() == 0 && idx.numel() != 0), Index, op.name, "take(): tried to take from an empty tensor");
  return {{idx.sizes(), x.dtype()}};
}
void take_kernel(const OpDef& op, const TensorList& in, const Attrs&, TensorList& out) {
  const Tensor &x = in[0], &idx = in[1];
  const Tensor& y = out[0];
  if (idx.numel() == 0) return;
  if (!std_dtype(x.dtype())) not_implemented(op.name, "take_cpu", x.dtype());
  Tensor ii = index_i64(idx);
  const int64_t* ip = i64p(ii);
  int64_t n = x.numel();
  for (int64_t i = 0; i < ii.numel(); ++i)
    KILN_CHECK(ip[i] >= -n && ip[i] < n, Index, op.name, "out of range: tried to access index ", ip[i],
               " on a tensor of ", n, " elements.");
  Tensor xc = contiguous(x);
  int64_t isz = static_cast<int64_t>(x.itemsize());
  char* yp = static_cast<char*>(y.data_ptr());
  const char* xp = static_cast<const char*>(xc.data_ptr());
  for (int64_t i = 0; i < ii.numel(); ++i) {
    int64_t k = ip[i] < 0 ? ip[i] + n : ip[i];
    std::memcpy(yp + i * isz, xp + k * isz, isz);
  }
}
OpDef op_take{"take", 0, take_meta, {take_kernel, nullptr}};
OpRegistrar reg_take{op_take, "take(Tensor self, Tensor index) -> Tensor"};

SpecList put_meta(const OpDef& op, const TensorList& in, const Attrs&) {
  const Tensor &x = in[0], &idx = in[1], &src = in[2];
  KILN_CHECK(idx.dtype() == kInt64, Runtime, op.name, "put_(): Expected a long tensor for index, but got ",
             torch_type_name(idx.dtype()));
  KILN_CHECK(x.dtype() == src.dtype(), Runtime, op.name, "put_(): self and source expected to have the same dtype, "
             "but got self.dtype = ", torch_type_name(x.dtype()), " and source.dtype = ", torch_type_name(src.dtype()));
  KILN_CHECK(src.numel() == idx.numel(), Index, op.name, "put_(): Expected source and index to have the same number "
             "of elements, but got source.numel() = ", src.numel(), ", index.numel() = ", idx.numel());
  KILN_CHECK(!(x.numel() == 0 && idx.numel() != 0), Index, op.name, "put_(): Tried to put elements into an empty tensor");
  return {{x.sizes(), x.dtype()}};
}
void put_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor &x = in[0], &idx = in[1], &src = in[2];
  const Tensor& y = out[0];
  bool acc = attr<bool>(a, 0);
  init_out(y, x);
  if (idx.numel() == 0) return;
  if (!std_dtype(x.dtype())) not_implemented(op.name, "put_cpu", x.dtype());
  Tensor ii = index_i64(idx);
  const int64_t* ip = i64p(ii);
  int64_t n = y.numel();
  for (int64_t i = 0; i < ii.numel(); ++i)
    KILN_CHECK(ip[i] >= -n && ip[i] < n, Index, op.name, "out of range: tried to access index ", ip[i],
               " on a tensor of ", n, " elements.");
  Tensor s = contiguous(src);
  visit_std(x.dtype(), op.name, "put_cpu", [&]<class T>() {
    T* yp = static_cast<T*>(y.data_ptr());  // contiguous: linear index == element offset
    const T* sp = static_cast<const T*>(s.data_ptr());
    for (int64_t i = 0; i < ii.numel(); ++i) {
      int64_t k = ip[i] < 0 ? ip[i] + n : ip[i];
      yp[k] = acc ? e_add(yp[k], sp[i]) : sp[i];
    }
  });
}
OpDef op_put{"put", kInplaceable, put_meta, {put_kernel, nullptr}};
OpRegistrar reg_put{op_put, "put(Tensor self, Tensor index, Tensor source, bool accumulate) -> Tensor"};

// ---- gather without index wrapping (take_along_dim) ------------------------------------------------------
// inputs: x, index (int64, same rank, broadcast already); attrs {dim}. Indices must lie in [0, size).
SpecList tad_gather_meta(const OpDef&, const TensorList& in, const Attrs&) {
  return {{in[1].sizes(), in[0].dtype()}};
}
void tad_gather_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor &x = in[0], &idx = in[1];
  const Tensor& y = out[0];
  if (idx.numel() == 0) return;
  int64_t dim = attr<int64_t>(a, 0);
  if (!std_dtype(x.dtype())) not_implemented(op.name, "gather", x.dtype());
  Tensor ii = index_i64(idx);
  const int64_t* ip = i64p(ii);
  int64_t n = nonempty_size(x, dim);
  for (int64_t i = 0; i < ii.numel(); ++i)
    KILN_CHECK(ip[i] >= 0 && ip[i] < n, Runtime, op.name, "index ", ip[i], " is out of bounds for dimension ", dim,
               " with size ", n);
  Shape S = nonempty_sizes(idx);
  Shape xst = nonempty_strides(x);
  int64_t xdim = xst[dim];
  xst[dim] = 0;
  Shape yst = nonempty_strides(y);
  int64_t isz = static_cast<int64_t>(x.itemsize());
  char* yp = static_cast<char*>(y.data_ptr());
  const char* xp = static_cast<const char*>(x.data_ptr());
  for_each_pos(S, yst, xst, [&](int64_t lin, int64_t yo, int64_t xo) {
    std::memcpy(yp + yo * isz, xp + (xo + ip[lin] * xdim) * isz, isz);
  });
}
OpDef op_tad_gather{"take_along_dim", 0, tad_gather_meta, {tad_gather_kernel, nullptr}};
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
    Tensor ic = contiguous(ib);
    Tensor w = make_tensor(ic.sizes(), kInt64);
    const int64_t* src = i64p(ic);
    int64_t* dst = static_cast<int64_t*>(w.data_ptr());
    for (int64_t i = 0; i < ic.numel(); ++i) {
      int64_t r = src[i] % n;
      dst[i] = r < 0 ? r + n : r;
    }
    ib = w;
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
