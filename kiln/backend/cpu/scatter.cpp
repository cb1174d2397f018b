// CPU kernels of the scatter-style ops (their op-table entries, meta functions and front ends are in
// kiln/ops/scatter.cpp): scatter / scatter_add / scatter_reduce, index_add / index_copy / index_fill,
// masked_scatter, take / take_along_dim / put.
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
#include "kiln/ops/scatter_detail.h"

namespace kiln {
namespace {

using namespace scatter_detail;

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

KernelRegistrar k_scatter{"scatter", DeviceType::CPU, scatter_kernel};
KernelRegistrar k_scatter_value{"scatter.value", DeviceType::CPU, scatter_kernel};
KernelRegistrar k_scatter_add{"scatter_add", DeviceType::CPU, scatter_kernel};
KernelRegistrar k_scatter_reduce{"scatter_reduce", DeviceType::CPU, scatter_kernel};
KernelRegistrar k_index_add{"index_add", DeviceType::CPU, index_add_kernel};
KernelRegistrar k_index_copy{"index_copy", DeviceType::CPU, index_copy_kernel};
KernelRegistrar k_index_fill{"index_fill", DeviceType::CPU, index_fill_kernel};
KernelRegistrar k_masked_scatter{"masked_scatter", DeviceType::CPU, masked_scatter_kernel};
KernelRegistrar k_take{"take", DeviceType::CPU, take_kernel};
KernelRegistrar k_put{"put", DeviceType::CPU, put_kernel};
KernelRegistrar k_take_along_dim{"take_along_dim", DeviceType::CPU, tad_gather_kernel};

}  // namespace
}  // namespace kiln
