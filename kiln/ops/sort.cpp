// Sorting, selection and searching: sort/argsort/msort, topk, kthvalue, median/nanmedian, mode,
// quantile/nanquantile, unique/unique_consecutive, searchsorted/bucketize, histc, bincount.
//
// Row ops move the working dim last, make it contiguous and process rows in parallel. Where torch's
// result among equal values depends on its algorithm (sort with stable=false, topk, kthvalue, median,
// mode, unique) the same standard-library algorithm is run with the same comparator, so ties break the
// same way. Everything that can fail is checked before a parallel region is entered.
#include "kiln/ops/sort.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "kiln/backend/cpu/parallel.h"
#include "kiln/core/visit.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

template <class C>
inline bool isnan_(C v) {
  if constexpr (std::is_floating_point_v<C>) return std::isnan(v);
  else return false;
}

// torch raises NotImplementedError for a dtype its kernel was not compiled for.
[[noreturn]] void not_implemented(const char* op, const char* kernel, Dtype d) {
  KILN_FAIL(NotImplemented, op, "\"", kernel, "\" not implemented for '", dtype_name(d), "'");
}

// AT_ALL_TYPES + Half + BFloat16: the integers without the uint16/32/64 and bool, and the floats.
bool all_types_half(Dtype d) {
  switch (d) {
    case kUInt8: case kInt8: case kInt16: case kInt32: case kInt64:
    case kFloat16: case kBFloat16: case kFloat32: case kFloat64:
      return true;
    default:
      return false;
  }
}
bool plain_float(Dtype d) { return d == kFloat16 || d == kBFloat16 || d == kFloat32 || d == kFloat64; }

// Visits the dtypes of all_types_half.
template <class F>
decltype(auto) visit_all_types_half(Dtype d, const char* op, F&& f) {
  switch (d) {
    KILN_VCASE(UInt8) KILN_VCASE(Int8) KILN_VCASE(Int16) KILN_VCASE(Int32) KILN_VCASE(Int64)
    KILN_VFLOATS
    default: raise_dtype_unsupported(op, d);
  }
}

// torch sorts 1-D integer tensors of at least this many elements with a (stable) radix sort.
constexpr int64_t kTorchRadixSortMin = 32768;

int64_t row_grain(int64_t R) { return std::max<int64_t>(1, cpu::kGrainSize / std::max<int64_t>(8 * R, 1)); }

// x with dim d moved last, contiguous; a 0-dim tensor is one row of one element.
Tensor rows_of(const Tensor& x, int64_t d) {
  if (x.dim() == 0) return contiguous(reshape(x, {1}));
  if (d == x.dim() - 1) return contiguous(x);
  return contiguous(movedim(x, {d}, {-1}));
}
int64_t row_len(const Tensor& x, int64_t d) { return x.dim() ? x.sizes()[d] : 1; }
int64_t num_rows(const Tensor& x, int64_t d) {
  int64_t m = 1;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != d) m *= x.sizes()[i];
  return m;
}

// For outputs that keep dim d (sort, topk): the buffer rows are written to, and the copy back.
Tensor moved_target(const Tensor& out, int64_t d) {
  if (out.dim() <= 1 || d == out.dim() - 1) return out;
  return make_tensor(movedim(out, {d}, {-1}).sizes(), out.dtype());
}
void write_back(const Tensor& out, int64_t d, const Tensor& tmp) {
  if (!tmp.is_same(out)) copy_(movedim(out, {d}, {-1}), tmp);
}

Shape reduced_shape(const Tensor& x, int64_t d, bool keepdim) {
  if (x.dim() == 0) return {};
  Shape s = x.sizes();
  if (keepdim) s[d] = 1;
  else s.erase(s.begin() + d);
  return s;
}
void check_nonzero_dim(const Tensor& x, int64_t d, const char* op, const char* fn) {
  if (x.dim() > 0)
    KILN_CHECK(x.sizes()[d] != 0, Index, op, fn, "(): Expected reduction dim ", d, " to have non-zero size.");
}

template <class T>
const T* cptr(const Tensor& t) { return static_cast<const T*>(t.data_ptr()); }
template <class T>
T* mptr(const Tensor& t) { return static_cast<T*>(t.data_ptr()); }

// ---- argsort of one row, as torch's sort kernel does it ---------------------------------------------
// stable: std::stable_sort; otherwise std::sort (introsort: not stable beyond 16 elements) with torch's
// comparators, so equal values come out in the same order as in torch. NaN is the largest value.
template <class C>
struct KV {
  C v;
  int64_t i;
};

template <class T>
void argsort_row(const T* row, int64_t R, bool desc, bool stable, std::vector<KV<opmath_t<T>>>& buf) {
  using C = opmath_t<T>;
  buf.resize(R);
  bool has_nan = false;
  for (int64_t r = 0; r < R; ++r) {
    C v = static_cast<C>(row[r]);
    if (isnan_(v)) has_nan = true;
    buf[r] = {v, r};
  }
  if (!stable) {  // without NaN the comparators reduce to > / <, with the same results
    auto lt = [](const KV<C>& p, const KV<C>& q) { return p.v < q.v; };
    auto gt = [](const KV<C>& p, const KV<C>& q) { return p.v > q.v; };
    if (desc && has_nan)
      std::sort(buf.begin(), buf.end(), [](const KV<C>& p, const KV<C>& q) {
        return (isnan_(p.v) && !isnan_(q.v)) || p.v > q.v;
      });
    else if (has_nan)
      std::sort(buf.begin(), buf.end(), [](const KV<C>& p, const KV<C>& q) {
        return (!isnan_(p.v) && isnan_(q.v)) || p.v < q.v;
      });
    else if (desc)
      std::sort(buf.begin(), buf.end(), gt);
    else
      std::sort(buf.begin(), buf.end(), lt);
    return;
  }
  auto first = buf.begin(), last = buf.end();
  if (has_nan) {  // NaNs to the end (ascending) or front (descending), in index order
    if (desc) first = std::stable_partition(first, last, [](const KV<C>& e) { return isnan_(e.v); });
    else last = std::stable_partition(first, last, [](const KV<C>& e) { return !isnan_(e.v); });
  }
  if (desc) std::stable_sort(first, last, [](const KV<C>& p, const KV<C>& q) { return p.v > q.v; });
  else std::stable_sort(first, last, [](const KV<C>& p, const KV<C>& q) { return p.v < q.v; });
}

// ---- sort(x, dim, descending, stable) ---------------------------------------------------------------
void check_sort_dtype(const char* op, Dtype d) {
  KILN_CHECK(!is_complex(d), Runtime, op, "Sort does not support complex dtypes on CPU");
  if (is_float8(d)) not_implemented(op, "sort", d);
}

SpecList sort_meta(const OpDef& op, const TensorList& in, const Attrs& a) {
  const Tensor& x = in[0];
  wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  check_sort_dtype(op.name, x.dtype());
  return {{x.sizes(), x.dtype()}, {x.sizes(), kInt64}};
}

void sort_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  int64_t d = wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  bool desc = attr<bool>(a, 1), stable = attr<bool>(a, 2);
  if (x.numel() == 0) return;
  int64_t R = row_len(x, d), M = num_rows(x, d);
  // constant along dim (stride 0, e.g. expanded): torch does not sort, indices stay 0..R-1
  bool constant = x.dim() > 0 && x.strides()[d] == 0;
  // torch radix-sorts (stably) long 1-D integer tensors in ascending order
  if (x.dim() == 1 && R >= kTorchRadixSortMin && is_integral(x.dtype(), false) && !desc) stable = true;
  Tensor xr = rows_of(x, d);
  Tensor vt = moved_target(out[0], d), it = moved_target(out[1], d);
  visit_real(x.dtype(), op.name, [&]<class T>() {
    const T* xp = cptr<T>(xr);
    T* vp = mptr<T>(vt);
    int64_t* ip = mptr<int64_t>(it);
    cpu::parallel_for(M, row_grain(R), [&](int64_t b, int64_t e) {
      std::vector<KV<opmath_t<T>>> buf;
      for (int64_t m = b; m < e; ++m) {
        const T* row = xp + m * R;
        T* vr = vp + m * R;
        int64_t* ir = ip + m * R;
        if (constant) {
          for (int64_t r = 0; r < R; ++r) vr[r] = row[r], ir[r] = r;
          continue;
        }
        argsort_row<T>(row, R, desc, stable, buf);
        for (int64_t r = 0; r < R; ++r) {
          vr[r] = row[buf[r].i];
          ir[r] = buf[r].i;
        }
      }
    });
  });
  write_back(out[0], d, vt);
  write_back(out[1], d, it);
}
OpDef op_sort{"sort", 0, sort_meta, {sort_kernel, nullptr}};
OpRegistrar reg_sort{op_sort};

// ---- topk(x, k, dim, largest, sorted): torch's partial_sort / nth_element selection ---------------
SpecList topk_meta(const OpDef& op, const TensorList& in, const Attrs& a) {
  const Tensor& x = in[0];
  int64_t k = attr<int64_t>(a, 0);
  int64_t d = wrap_dim(attr<int64_t>(a, 1), x.dim(), op.name);
  KILN_CHECK(k >= 0 && k <= row_len(x, d), Runtime, op.name, "selected index k out of range");
  Dtype dt = x.dtype();
  KILN_CHECK(!is_complex(dt), Runtime, op.name, "topk does not support complex dtypes on CPU");
  KILN_CHECK(dt != kBool, Runtime, op.name, "topk does not support bool dtypes on CPU");
  if (!all_types_half(dt)) not_implemented(op.name, "topk_cpu", dt);
  Shape s = x.sizes();
  if (x.dim()) s[d] = k;
  return {{s, dt}, {s, kInt64}};
}

void topk_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  int64_t k = attr<int64_t>(a, 0);
  int64_t d = wrap_dim(attr<int64_t>(a, 1), x.dim(), op.name);
  bool largest = attr<bool>(a, 2), sorted = attr<bool>(a, 3);
  if (x.dim() == 0) {  // torch copies a 0-dim input whatever k (0 or 1) is
    copy_(out[0], x);
    fill_(out[1], Scalar(0));
    return;
  }
  if (k == 0 || x.numel() == 0) return;
  Tensor xr = rows_of(x, d);
  int64_t R = row_len(x, d), M = num_rows(x, d);
  Tensor vt = moved_target(out[0], d), it = moved_target(out[1], d);
  visit_all_types_half(x.dtype(), op.name, [&]<class T>() {
    using C = opmath_t<T>;
    using E = std::pair<C, int64_t>;
    const T* xp = cptr<T>(xr);
    T* vp = mptr<T>(vt);
    int64_t* ip = mptr<int64_t>(it);
    cpu::parallel_for(M, row_grain(R), [&](int64_t b, int64_t e) {
      std::vector<E> q(R);
      for (int64_t m = b; m < e; ++m) {
        const T* row = xp + m * R;
        for (int64_t r = 0; r < R; ++r) q[r] = E(static_cast<C>(row[r]), r);
        auto select = [&](auto comp) {
          if (k * 64 <= R) {
            std::partial_sort(q.begin(), q.begin() + k, q.end(), comp);
          } else {
            std::nth_element(q.begin(), q.begin() + (k - 1), q.end(), comp);
            if (sorted) std::sort(q.begin(), q.begin() + (k - 1), comp);
          }
        };
        if (largest)
          select([](const E& u, const E& v) { return (isnan_(u.first) && !isnan_(v.first)) || u.first > v.first; });
        else
          select([](const E& u, const E& v) { return (!isnan_(u.first) && isnan_(v.first)) || u.first < v.first; });
        for (int64_t j = 0; j < k; ++j) {
          vp[m * k + j] = row[q[j].second];
          ip[m * k + j] = q[j].second;
        }
      }
    });
  });
  write_back(out[0], d, vt);
  write_back(out[1], d, it);
}
OpDef op_topk{"topk", 0, topk_meta, {topk_kernel, nullptr}};
OpRegistrar reg_topk{op_topk};

// ---- kthvalue(x, k, dim, keepdim): torch's quickselect (Sedgewick), NaN largest ------------------
template <class C>
void quick_select(C* arr, int64_t* idx, int64_t n, int64_t k) {
  auto gt = [](C x, C y) { return (isnan_(x) && !isnan_(y)) || x > y; };
  auto swp = [&](int64_t i, int64_t j) {
    std::swap(arr[i], arr[j]);
    std::swap(idx[i], idx[j]);
  };
  int64_t L = 0, R = n - 1;
  while (true) {
    if (R <= L) return;
    if (R == L + 1) {
      if (gt(arr[L], arr[R])) swp(L, R);
      return;
    }
    int64_t P = L + ((R - L) >> 1);
    swp(P, L + 1);
    if (gt(arr[L + 1], arr[R])) swp(L + 1, R);
    if (gt(arr[L], arr[R])) swp(L, R);
    if (gt(arr[L + 1], arr[L])) swp(L + 1, L);
    int64_t i = L + 1, j = R;
    C piv = arr[L];
    while (true) {
      do ++i; while (gt(piv, arr[i]));
      do --j; while (gt(arr[j], piv));
      if (j < i) break;
      swp(i, j);
    }
    swp(L, j);
    if (j <= k) L = i;
    if (j >= k) R = j - 1;
  }
}

SpecList kthvalue_meta(const OpDef& op, const TensorList& in, const Attrs& a) {
  const Tensor& x = in[0];
  int64_t k = attr<int64_t>(a, 0);
  int64_t d = wrap_dim(attr<int64_t>(a, 1), x.dim(), op.name);
  check_nonzero_dim(x, d, op.name, "kthvalue");
  KILN_CHECK(k >= 1 && k <= row_len(x, d), Runtime, op.name,
             "kthvalue(): selected number k out of range for dimension ", d);
  if (!all_types_half(x.dtype())) not_implemented(op.name, "kthvalue_cpu", x.dtype());
  Shape s = reduced_shape(x, d, attr<bool>(a, 2));
  return {{s, x.dtype()}, {s, kInt64}};
}

void kthvalue_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  int64_t k = attr<int64_t>(a, 0);
  int64_t d = wrap_dim(attr<int64_t>(a, 1), x.dim(), op.name);
  if (x.numel() == 0) return;
  Tensor xr = rows_of(x, d);
  int64_t R = row_len(x, d), M = num_rows(x, d);
  visit_all_types_half(x.dtype(), op.name, [&]<class T>() {
    using C = opmath_t<T>;
    const T* xp = cptr<T>(xr);
    T* vp = mptr<T>(out[0]);
    int64_t* ip = mptr<int64_t>(out[1]);
    cpu::parallel_for(M, row_grain(R), [&](int64_t b, int64_t e) {
      std::vector<C> vals(R);
      std::vector<int64_t> idx(R);
      for (int64_t m = b; m < e; ++m) {
        const T* row = xp + m * R;
        for (int64_t r = 0; r < R; ++r) vals[r] = static_cast<C>(row[r]), idx[r] = r;
        quick_select(vals.data(), idx.data(), R, k - 1);
        vp[m] = row[idx[k - 1]];
        ip[m] = idx[k - 1];
      }
    });
  });
}
OpDef op_kthvalue{"kthvalue", kReduction, kthvalue_meta, {kthvalue_kernel, nullptr}};
OpRegistrar reg_kthvalue{op_kthvalue};

// ---- median / nanmedian along a dim (code 0 median, 1 nanmedian) ----------------------------------
SpecList median_dim_meta(const OpDef& op, const TensorList& in, const Attrs& a) {
  const Tensor& x = in[0];
  int64_t d = wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  check_nonzero_dim(x, d, op.name, "median");
  if (!all_types_half(x.dtype())) not_implemented(op.name, "median_out", x.dtype());
  Shape s = reduced_shape(x, d, attr<bool>(a, 1));
  return {{s, x.dtype()}, {s, kInt64}};
}

void median_dim_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  int64_t d = wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  bool ignore_nan = op.code == 1;
  if (x.numel() == 0) return;
  Tensor xr = rows_of(x, d);
  int64_t R = row_len(x, d), M = num_rows(x, d);
  visit_all_types_half(x.dtype(), op.name, [&]<class T>() {
    using C = opmath_t<T>;
    const T* xp = cptr<T>(xr);
    T* vp = mptr<T>(out[0]);
    int64_t* ip = mptr<int64_t>(out[1]);
    cpu::parallel_for(M, row_grain(R), [&](int64_t b, int64_t e) {
      std::vector<C> v(R);
      std::vector<int64_t> idx(R);
      for (int64_t m = b; m < e; ++m) {
        const T* row = xp + m * R;
        int64_t first_nan = -1, nnan = 0;
        for (int64_t r = 0; r < R; ++r) {
          v[r] = static_cast<C>(row[r]);
          if (isnan_(v[r])) {
            if (first_nan < 0) first_nan = r;
            ++nnan;
          }
        }
        if (!ignore_nan && first_nan >= 0) {  // median: the first NaN
          vp[m] = row[first_nan];
          ip[m] = first_nan;
          continue;
        }
        std::iota(idx.begin(), idx.end(), int64_t(0));
        int64_t nth;
        if (!ignore_nan) {
          nth = (R - 1) / 2;
          std::nth_element(idx.begin(), idx.begin() + nth, idx.end(), [&](int64_t i, int64_t j) {
            return v[i] < v[j] || (v[i] == v[j] && i < j);
          });
        } else {
          nth = (R - nnan - 1) / 2;  // C++ division: 0 when every value is NaN
          std::nth_element(idx.begin(), idx.begin() + nth, idx.end(), [&](int64_t i, int64_t j) {
            return v[i] < v[j] || (v[i] == v[j] && i < j) || (isnan_(v[j]) && !isnan_(v[i]));
          });
        }
        vp[m] = row[idx[nth]];
        ip[m] = idx[nth];
      }
    });
  });
}
OpDef op_median_dim{"median_dim", kReduction, median_dim_meta, {median_dim_kernel, nullptr}, 0};
OpRegistrar reg_median_dim{op_median_dim};
OpDef op_nanmedian_dim{"nanmedian_dim", kReduction, median_dim_meta, {median_dim_kernel, nullptr}, 1};
OpRegistrar reg_nanmedian_dim{op_nanmedian_dim};

// ---- global median / nanmedian ---------------------------------------------------------------------
SpecList median_meta(const OpDef& op, const TensorList& in, const Attrs&) {
  if (!all_types_half(in[0].dtype())) not_implemented(op.name, "median_cpu", in[0].dtype());
  return {{{}, in[0].dtype()}};
}

void median_kernel(const OpDef& op, const TensorList& in, const Attrs&, TensorList& out) {
  const Tensor& x = in[0];
  bool ignore_nan = op.code == 1;
  int64_t N = x.numel();
  Tensor xc = contiguous(reshape(x, {-1}));
  visit_all_types_half(x.dtype(), op.name, [&]<class T>() {
    using C = opmath_t<T>;
    T* o = mptr<T>(out[0]);
    if (N == 0) {  // torch: NaN converted to the dtype (x86 conversion of NaN)
      if constexpr (is_float_v<T>) *o = static_cast<T>(std::numeric_limits<float>::quiet_NaN());
      else if constexpr (std::is_same_v<T, int64_t>) *o = std::numeric_limits<int64_t>::min();
      else if constexpr (std::is_same_v<T, int32_t>) *o = std::numeric_limits<int32_t>::min();
      else *o = T(0);
      return;
    }
    const T* p = cptr<T>(xc);
    std::vector<C> v(N);
    int64_t nnan = 0;
    for (int64_t i = 0; i < N; ++i) {
      v[i] = static_cast<C>(p[i]);
      if (isnan_(v[i])) ++nnan;
    }
    if (!ignore_nan && nnan > 0) {
      if constexpr (is_float_v<T>) *o = static_cast<T>(std::numeric_limits<float>::quiet_NaN());
      return;
    }
    int64_t pos = (N - nnan - 1) / 2;
    std::nth_element(v.begin(), v.begin() + pos, v.end(),
                     [](C u, C w) { return u < w || (isnan_(w) && !isnan_(u)); });
    *o = static_cast<T>(v[pos]);
  });
}
OpDef op_median{"median", kReduction, median_meta, {median_kernel, nullptr}, 0};
OpRegistrar reg_median{op_median};
OpDef op_nanmedian{"nanmedian", kReduction, median_meta, {median_kernel, nullptr}, 1};
OpRegistrar reg_nanmedian{op_nanmedian};

// ---- mode(x, dim, keepdim): torch's sort-and-count; the index is the last in its run ---------------
SpecList mode_meta(const OpDef& op, const TensorList& in, const Attrs& a) {
  const Tensor& x = in[0];
  int64_t d = wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  check_nonzero_dim(x, d, op.name, "mode");
  if (x.dtype() != kBool && !all_types_half(x.dtype())) not_implemented(op.name, "mode_cpu", x.dtype());
  Shape s = reduced_shape(x, d, attr<bool>(a, 1));
  return {{s, x.dtype()}, {s, kInt64}};
}

void mode_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  int64_t d = wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  if (x.numel() == 0) return;
  Tensor xr = rows_of(x, d);
  int64_t R = row_len(x, d), M = num_rows(x, d);
  visit_real(x.dtype(), op.name, [&]<class T>() {
    using C = opmath_t<T>;
    using E = std::pair<C, int64_t>;
    const T* xp = cptr<T>(xr);
    T* vp = mptr<T>(out[0]);
    int64_t* ip = mptr<int64_t>(out[1]);
    cpu::parallel_for(M, row_grain(R), [&](int64_t b, int64_t e) {
      std::vector<E> el(R);
      for (int64_t m = b; m < e; ++m) {
        const T* row = xp + m * R;
        for (int64_t r = 0; r < R; ++r) el[r] = E(static_cast<C>(row[r]), r);
        std::sort(el.begin(), el.end(), [](const E& u, const E& v) { return u.first < v.first; });
        int64_t modei = 0, freq = 0, best = 0;
        for (int64_t r = 0; r < R; ++r) {
          ++freq;
          if (r == R - 1 || el[r].first != el[r + 1].first) {
            if (freq > best) {
              modei = el[r].second;
              best = freq;
            }
            freq = 0;
          }
        }
        vp[m] = row[modei];
        ip[m] = modei;
      }
    });
  });
}
OpDef op_mode{"mode", kReduction, mode_meta, {mode_kernel, nullptr}};
OpRegistrar reg_mode{op_mode};

// ---- quantile / nanquantile (code 0 / 1). inputs {x, q}; attrs {has_dim, dim, keepdim, interp} ----
enum class Interp { Linear, Lower, Higher, Midpoint, Nearest };

Interp parse_interp(const std::string& s, const char* op) {
  if (s == "linear") return Interp::Linear;
  if (s == "lower") return Interp::Lower;
  if (s == "higher") return Interp::Higher;
  if (s == "midpoint") return Interp::Midpoint;
  if (s == "nearest") return Interp::Nearest;
  KILN_FAIL(Runtime, op, "quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, "
            "but got ", s);
}

SpecList quantile_meta(const OpDef& op, const TensorList& in, const Attrs& a) {
  const Tensor &x = in[0], &q = in[1];
  KILN_CHECK(x.numel() > 0, Runtime, op.name, "quantile() input tensor must be non-empty");
  KILN_CHECK(q.dim() <= 1, Runtime, op.name, "quantile() q must be a scalar or 1D tensor");
  KILN_CHECK(x.dtype() == kFloat32 || x.dtype() == kFloat64, Runtime, op.name,
             "quantile() input tensor must be either float or double dtype");
  KILN_CHECK(x.dtype() == q.dtype(), Runtime, op.name, "quantile() q tensor must be same dtype as the input tensor");
  bool has_dim = attr<bool>(a, 0), keepdim = attr<bool>(a, 2);
  int64_t d = wrap_dim(has_dim ? attr<int64_t>(a, 1) : 0, x.dim(), op.name);
  Shape s;
  if (has_dim && x.dim() > 0) s = reduced_shape(x, d, keepdim);
  else if (keepdim) s = Shape(x.dim(), 1);
  if (q.dim() > 0) s.insert(s.begin(), q.numel());
  parse_interp(attr<std::string>(a, 3), op.name);
  return {{s, x.dtype()}};
}

void quantile_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor &x = in[0], &q = in[1];
  bool ignore_nan = op.code == 1, has_dim = attr<bool>(a, 0);
  Interp interp = parse_interp(attr<std::string>(a, 3), op.name);
  int64_t d = has_dim ? wrap_dim(attr<int64_t>(a, 1), x.dim(), op.name) : 0;
  Tensor qc = contiguous(reshape(q, {-1}));
  Tensor xr = has_dim ? rows_of(x, d) : contiguous(reshape(x, {-1}));
  int64_t R = has_dim ? row_len(x, d) : x.numel();
  int64_t M = has_dim ? num_rows(x, d) : 1;
  int64_t nq = qc.numel();
  visit_floating(x.dtype(), op.name, [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      const T* qp = cptr<T>(qc);
      for (int64_t j = 0; j < nq; ++j)
        KILN_CHECK(qp[j] >= 0 && qp[j] <= 1, Runtime, op.name, "quantile() q values must be in the range [0, 1]");
      const T* xp = cptr<T>(xr);
      T* yp = mptr<T>(out[0]);
      cpu::parallel_for(M, row_grain(R), [&](int64_t b, int64_t e) {
        std::vector<KV<T>> buf;
        std::vector<T> s(R);
        for (int64_t m = b; m < e; ++m) {
          const T* row = xp + m * R;
          argsort_row<T>(row, R, false, false, buf);
          int64_t nnan = 0;
          for (int64_t r = 0; r < R; ++r) {
            s[r] = row[buf[r].i];
            if (std::isnan(s[r])) ++nnan;
          }
          for (int64_t j = 0; j < nq; ++j) {
            T rank;
            if (ignore_nan) {
              rank = qp[j] * static_cast<T>(R - nnan - 1);
              if (rank < 0) rank = 0;
            } else {
              rank = nnan > 0 ? static_cast<T>(R - 1) : qp[j] * static_cast<T>(R - 1);
            }
            if (interp == Interp::Lower) rank = std::floor(rank);
            else if (interp == Interp::Higher) rank = std::ceil(rank);
            else if (interp == Interp::Nearest) rank = std::nearbyint(rank);
            int64_t below = static_cast<int64_t>(rank);
            T v = s[below];
            if (interp == Interp::Linear || interp == Interp::Midpoint) {
              T w = interp == Interp::Midpoint ? T(0.5) : rank - static_cast<T>(below);
              T hi = s[static_cast<int64_t>(std::ceil(rank))];
              v = std::abs(w) < T(0.5) ? v + w * (hi - v) : hi - (hi - v) * (T(1) - w);  // torch's lerp
            }
            yp[j * M + m] = v;
          }
        }
      });
    }
  });
}
OpDef op_quantile{"quantile", kReduction, quantile_meta, {quantile_kernel, nullptr}, 0};
OpRegistrar reg_quantile{op_quantile};
OpDef op_nanquantile{"nanquantile", kReduction, quantile_meta, {quantile_kernel, nullptr}, 1};
OpRegistrar reg_nanquantile{op_nanquantile};

// ---- unique / unique_consecutive (code 0 / 1). attrs {has_dim, dim, return_inverse, return_counts};
// outputs {values, inverse, counts}
void check_unique_dtype(const char* op, Dtype d) {
  if (is_complex(d) || is_float8(d)) not_implemented(op, "unique", d);
}

// Flattened: sorted (torch's unstable sort, NaN last) or in order; a new run starts where the value
// != the run's first (so each NaN is its own run). The inverse and counts are empty unless wanted.
void unique_flat(const OpDef& op, const Tensor& x, bool consecutive, bool want_inv, bool want_counts,
                 TensorList& out) {
  int64_t N = x.numel();
  Tensor inv = want_inv ? make_tensor(x.sizes(), kInt64) : make_tensor({0}, kInt64);
  if (N == 0) {
    out = {make_tensor({0}, x.dtype()), inv, make_tensor({0}, kInt64)};
    return;
  }
  Tensor xc = contiguous(reshape(x, {-1}));
  visit_real(x.dtype(), op.name, [&]<class T>() {
    using C = opmath_t<T>;
    const T* p = cptr<T>(xc);
    int64_t* ip = want_inv ? mptr<int64_t>(inv) : nullptr;
    if (consecutive) {  // one pass straight into N-sized outputs, then trimmed (as torch resizes)
      Tensor vals = make_tensor({N}, x.dtype()), counts = make_tensor({want_counts ? N : 0}, kInt64);
      T* vp = mptr<T>(vals);
      int64_t* cp = want_counts ? mptr<int64_t>(counts) : nullptr;
      C cur = static_cast<C>(p[0]);
      vp[0] = p[0];
      int64_t u = 0, last = 0;
      if (ip) ip[0] = 0;
      for (int64_t i = 1; i < N; ++i) {
        C v = static_cast<C>(p[i]);
        if (v != cur) {
          if (cp) cp[u] = i - last;
          last = i;
          vp[++u] = p[i];
          cur = v;
        }
        if (ip) ip[i] = u;
      }
      if (cp) cp[u] = N - last;
      out = {narrow(vals, 0, 0, u + 1), inv, want_counts ? narrow(counts, 0, 0, u + 1) : counts};
      return;
    }
    std::vector<int64_t> starts;  // run starts, as positions in `order`
    std::vector<int64_t> order(N);  // position -> element
    {
      std::vector<KV<C>> buf;
      argsort_row<T>(p, N, false, false, buf);
      for (int64_t i = 0; i < N; ++i) order[i] = buf[i].i;
    }
    auto at = [&](int64_t i) { return order[i]; };
    C cur = static_cast<C>(p[at(0)]);
    starts.push_back(0);
    if (ip) ip[at(0)] = 0;
    for (int64_t i = 1; i < N; ++i) {
      int64_t e = at(i);
      C v = static_cast<C>(p[e]);
      if (v != cur) {
        starts.push_back(i);
        cur = v;
      }
      if (ip) ip[e] = static_cast<int64_t>(starts.size()) - 1;
    }
    int64_t U = static_cast<int64_t>(starts.size());
    Tensor vals = make_tensor({U}, x.dtype()), counts = make_tensor({want_counts ? U : 0}, kInt64);
    T* vp = mptr<T>(vals);
    int64_t* cp = mptr<int64_t>(counts);
    for (int64_t u = 0; u < U; ++u) {
      vp[u] = p[at(starts[u])];
      if (want_counts) cp[u] = (u + 1 < U ? starts[u + 1] : N) - starts[u];
    }
    out = {vals, inv, counts};
  });
}

// Along a dim: slices compared lexicographically (torch's std::sort on slice indices), equal when
// every element is == (NaN never equal).
void unique_dim(const OpDef& op, const Tensor& x, int64_t dim, bool consecutive, bool want_inv,
                bool want_counts, TensorList& out) {
  KILN_CHECK(x.dim() > 0, Index, op.name, "Dimension specified as ", dim, " but tensor has no dimensions");
  int64_t d = wrap_dim(dim, x.dim(), op.name);
  const Shape& sz = x.sizes();
  int64_t nzero = std::count(sz.begin(), sz.end(), int64_t(0));
  if (sz[d] == 0) {
    KILN_CHECK(nzero == 1, Runtime, op.name, "Number of zero sized dimensions is more than one, so unique cannot "
               "be applied ");
    out = {make_tensor(sz, x.dtype()), make_tensor({0}, kInt64), make_tensor({0}, kInt64)};
    return;
  }
  KILN_CHECK(nzero == 0, Runtime, op.name, "There are 0 sized dimensions, and they aren't selected, so unique "
             "cannot be applied");
  Tensor flat = d == 0 ? contiguous(x) : contiguous(movedim(x, {d}, {0}));
  int64_t n = sz[d], K = x.numel() / n;
  visit_real(x.dtype(), op.name, [&]<class T>() {
    using C = opmath_t<T>;
    const T* p = cptr<T>(flat);
    std::vector<int64_t> idx(n);
    std::iota(idx.begin(), idx.end(), int64_t(0));
    if (!consecutive) {
      std::sort(idx.begin(), idx.end(), [&](int64_t u, int64_t v) {
        for (int64_t i = 0; i < K; ++i) {
          C l = static_cast<C>(p[u * K + i]), r = static_cast<C>(p[v * K + i]);
          if (l < r) return true;
          if (l > r) return false;
        }
        return false;
      });
    }
    auto same = [&](int64_t u, int64_t v) {
      for (int64_t i = 0; i < K; ++i)
        if (static_cast<C>(p[u * K + i]) != static_cast<C>(p[v * K + i])) return false;
      return true;
    };
    Tensor inv = make_tensor({n}, kInt64);
    int64_t* ip = mptr<int64_t>(inv);
    std::vector<int64_t> starts{0};
    ip[idx[0]] = 0;
    for (int64_t pos = 1; pos < n; ++pos) {
      if (!same(idx[pos], idx[starts.back()])) starts.push_back(pos);
      ip[idx[pos]] = static_cast<int64_t>(starts.size()) - 1;
    }
    int64_t U = static_cast<int64_t>(starts.size());
    Shape osz = flat.sizes();
    osz[0] = U;
    Tensor vals = make_tensor(osz, x.dtype()), counts = make_tensor({U}, kInt64);
    T* vp = mptr<T>(vals);
    int64_t* cp = mptr<int64_t>(counts);
    for (int64_t u = 0; u < U; ++u) {
      std::memcpy(vp + u * K, p + idx[starts[u]] * K, static_cast<size_t>(K) * sizeof(T));
      cp[u] = (u + 1 < U ? starts[u + 1] : n) - starts[u];
    }
    if (d != 0) vals = contiguous(movedim(vals, {0}, {d}));
    out = {vals, want_inv ? inv : make_tensor({0}, kInt64), want_counts ? counts : make_tensor({0}, kInt64)};
  });
}

void unique_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  bool consecutive = op.code == 1, has_dim = attr<bool>(a, 0);
  int64_t dim = attr<int64_t>(a, 1);
  bool want_inv = attr<bool>(a, 2), want_counts = attr<bool>(a, 3);
  check_unique_dtype(op.name, x.dtype());
  if (!has_dim || (consecutive && dim == 0 && x.dim() == 1)) unique_flat(op, x, consecutive, want_inv, want_counts, out);
  else unique_dim(op, x, dim, consecutive, want_inv, want_counts, out);
}
OpDef op_unique{"unique", kDynamicShape, nullptr, {unique_kernel, nullptr}, 0};
OpRegistrar reg_unique{op_unique};
OpDef op_unique_consecutive{"unique_consecutive", kDynamicShape, nullptr, {unique_kernel, nullptr}, 1};
OpRegistrar reg_unique_consecutive{op_unique_consecutive};

// ---- searchsorted. inputs {boundaries, values[, sorter]} (one dtype); attrs {out_int32, right, has_sorter}
SpecList searchsorted_meta(const OpDef& op, const TensorList& in, const Attrs& a) {
  const Tensor &bd = in[0], &v = in[1];
  bool out_int32 = attr<bool>(a, 0), has_sorter = attr<bool>(a, 2);
  KILN_CHECK(bd.dim() != 0, Runtime, op.name, "torch.searchsorted(): boundaries tensor should have positive "
             "dimension, but got 0 dimension");
  KILN_CHECK(v.dim() > 0 || bd.dim() == 1, Runtime, op.name, "torch.searchsorted(): input value can be a scalar "
             "only when boundaries tensor dimension is 1, but we got boundaries tensor dim(", bd.dim(),
             ") and input value's dim(", v.dim(), ") numel(", v.numel(), ")");
  if (bd.dim() != 1) {
    bool ok = v.dim() == bd.dim();
    for (int64_t i = 0; ok && i + 1 < bd.dim(); ++i) ok = bd.sizes()[i] == v.sizes()[i];
    KILN_CHECK(ok, Runtime, op.name, "torch.searchsorted(): boundaries tensor should be 1 dimension or the first "
               "N-1 dimensions of boundaries tensor and input value tensor must match, but we got boundaries "
               "tensor ", bd.sizes(), " and input value tensor ", v.sizes());
  }
  if (has_sorter) {
    const Tensor& st = in[2];
    KILN_CHECK(st.dtype() == kInt64, Runtime, op.name, "torch.searchsorted(): sorter must be a tensor of long "
               "dtype but got dtype ", dtype_name(st.dtype()));
    KILN_CHECK(st.sizes() == bd.sizes(), Runtime, op.name, "torch.searchsorted(): boundary and sorter must have "
               "the same size, but got boundary tensor ", bd.sizes(), " and got sorter tensor ", st.sizes());
  }
  if (!all_types_half(bd.dtype())) not_implemented(op.name, "searchsorted_out_cpu", bd.dtype());
  return {{v.sizes(), out_int32 ? kInt32 : kInt64}};
}

// torch's bounds: `!(mid >= val)` / `!(mid > val)`, so a NaN value lands past every element.
template <class C, class T>
int64_t lower_pos(int64_t s, int64_t e, C val, const T* bd, const int64_t* st) {
  const int64_t base = s;
  while (s < e) {
    int64_t mid = s + ((e - s) >> 1);
    C mv = static_cast<C>(st ? bd[st[mid] + base] : bd[mid]);
    if (!(mv >= val)) s = mid + 1;
    else e = mid;
  }
  return s;
}
template <class C, class T>
int64_t upper_pos(int64_t s, int64_t e, C val, const T* bd, const int64_t* st) {
  const int64_t base = s;
  while (s < e) {
    int64_t mid = s + ((e - s) >> 1);
    C mv = static_cast<C>(st ? bd[st[mid] + base] : bd[mid]);
    if (!(mv > val)) s = mid + 1;
    else e = mid;
  }
  return s;
}

void searchsorted_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  bool out_int32 = attr<bool>(a, 0), right = attr<bool>(a, 1), has_sorter = attr<bool>(a, 2);
  Tensor bd = contiguous(in[0]), v = contiguous(in[1]);
  Tensor st = has_sorter ? contiguous(in[2]) : Tensor();
  int64_t n = v.numel();
  int64_t idim_bd = bd.sizes().back(), idim_in = v.dim() ? v.sizes().back() : 1;
  bool is1d = bd.dim() == 1;
  const int64_t* sp = has_sorter ? cptr<int64_t>(st) : nullptr;
  if (sp)
    for (int64_t i = 0; i < st.numel(); ++i)
      KILN_CHECK(sp[i] >= 0 && sp[i] < idim_bd, Runtime, op.name, "torch.searchsorted(): sorter index out of range");
  if (n == 0) return;
  visit_all_types_half(bd.dtype(), op.name, [&]<class T>() {
    using C = opmath_t<T>;
    const T* bp = cptr<T>(bd);
    const T* vp = cptr<T>(v);
    int32_t* o32 = out_int32 ? mptr<int32_t>(out[0]) : nullptr;
    int64_t* o64 = out_int32 ? nullptr : mptr<int64_t>(out[0]);
    cpu::parallel_for(n, 2048, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        int64_t s = is1d ? 0 : i / idim_in * idim_bd;
        C val = static_cast<C>(vp[i]);
        int64_t pos = (right ? upper_pos<C, T>(s, s + idim_bd, val, bp, sp) : lower_pos<C, T>(s, s + idim_bd, val, bp, sp)) - s;
        if (o32) o32[i] = static_cast<int32_t>(pos);
        else o64[i] = pos;
      }
    });
  });
}
OpDef op_searchsorted{"searchsorted", 0, searchsorted_meta, {searchsorted_kernel, nullptr}};
OpRegistrar reg_searchsorted{op_searchsorted};

// ---- histc(x, bins, min, max). attrs {bins, min, max} -------------------------------------------
SpecList histc_meta(const OpDef& op, const TensorList& in, const Attrs& a) {
  const Tensor& x = in[0];
  int64_t bins = attr<int64_t>(a, 0);
  if (!plain_float(x.dtype())) not_implemented(op.name, "histogram_cpu", x.dtype());
  KILN_CHECK(bins > 0, Runtime, op.name, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  return {{{bins}, x.dtype()}};
}

// Bin of an element inside [l, r], computed in T as torch does (each reduced-float op rounds).
template <class T>
int64_t bin_of(T e, T l, T r, int64_t bins) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<int64_t>((e - l) * static_cast<T>(bins) / (r - l));
  } else {
    T diff = T(static_cast<float>(e) - static_cast<float>(l));
    T scaled = T(static_cast<float>(diff) * static_cast<float>(T(bins)));
    T width = T(static_cast<float>(r) - static_cast<float>(l));
    return static_cast<int64_t>(static_cast<float>(T(static_cast<float>(scaled) / static_cast<float>(width))));
  }
}

void histc_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  int64_t bins = attr<int64_t>(a, 0);
  double lo = attr<Scalar>(a, 1).to_double(), hi = attr<Scalar>(a, 2).to_double();
  int64_t N = x.numel();
  Tensor xc = contiguous(reshape(x, {-1}));
  visit_floating(x.dtype(), op.name, [&]<class T>() {
    using C = opmath_t<T>;
    const T* p = cptr<T>(xc);
    if (lo == hi && N > 0) {  // the data's range; NaN propagates into the check below
      C mn = static_cast<C>(p[0]), mx = mn;
      for (int64_t i = 0; i < N; ++i) {
        C v = static_cast<C>(p[i]);
        if (std::isnan(v)) {
          mn = mx = v;
          break;
        }
        mn = std::min(mn, v);
        mx = std::max(mx, v);
      }
      lo = mn;
      hi = mx;
    }
    if (lo == hi) {
      lo -= 1;
      hi += 1;
    }
    KILN_CHECK(!(std::isinf(lo) || std::isinf(hi) || std::isnan(lo) || std::isnan(hi)), Runtime, op.name,
               "torch.histc: range of [", lo, ", ", hi, "] is not finite");
    KILN_CHECK(lo < hi, Runtime, op.name, "torch.histc: max must be larger than min");
    const T left = static_cast<T>(lo), rightv = static_cast<T>(hi);
    const C lc = static_cast<C>(left), rc = static_cast<C>(rightv);
    int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), N / cpu::kGrainSize));
    int64_t len = (N + chunks - 1) / chunks;
    std::vector<int64_t> local(static_cast<size_t>(chunks * bins), 0);
    cpu::parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        int64_t* h = local.data() + c * bins;
        for (int64_t i = c * len, end = std::min(N, (c + 1) * len); i < end; ++i) {
          C v = static_cast<C>(p[i]);
          if (!(v >= lc && v <= rc)) continue;  // outside the range, or NaN
          int64_t pos = bin_of<T>(p[i], left, rightv, bins);
          pos = std::clamp<int64_t>(pos, 0, bins - 1);  // the last bin includes its right edge
          ++h[pos];
        }
      }
    });
    T* o = mptr<T>(out[0]);
    for (int64_t j = 0; j < bins; ++j) {
      int64_t s = 0;
      for (int64_t c = 0; c < chunks; ++c) s += local[c * bins + j];
      if constexpr (std::is_same_v<T, double>) o[j] = static_cast<double>(s);
      else o[j] = static_cast<T>(static_cast<float>(s));  // exact counts, rounded once to the dtype
    }
  });
}
OpDef op_histc{"histc", 0, histc_meta, {histc_kernel, nullptr}};
OpRegistrar reg_histc{op_histc};

// ---- bincount(x[, weights]). attrs {minlength, has_weights} -----------------------------------------
void bincount_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  int64_t minlength = attr<int64_t>(a, 0);
  bool has_w = attr<bool>(a, 1);
  Dtype dt = x.dtype();
  if (!(dt == kUInt8 || dt == kInt8 || dt == kInt16 || dt == kInt32 || dt == kInt64))
    not_implemented(op.name, "bincount_cpu", dt);
  KILN_CHECK(minlength >= 0, Runtime, op.name, "minlength should be >= 0");
  if (x.dim() == 1 && x.numel() == 0) {
    out = {zeros({minlength}, kInt64)};
    return;
  }
  KILN_CHECK(x.dim() == 1, Runtime, op.name, "bincount only supports 1-d non-negative integral inputs.");
  Tensor xc = contiguous(to_dtype(x, kInt64));
  const int64_t* p = cptr<int64_t>(xc);
  int64_t n = xc.numel(), mn = p[0], mx = p[0];
  for (int64_t i = 1; i < n; ++i) mn = std::min(mn, p[i]), mx = std::max(mx, p[i]);
  KILN_CHECK(mn >= 0, Runtime, op.name, "bincount only supports 1-d non-negative integral inputs.");
  if (has_w) {
    const Tensor& w = in[1];
    KILN_CHECK(w.dim() == 1 && w.sizes()[0] == n, Runtime, op.name,
               "weights should be 1-d and have the same length as input");
  }
  int64_t nbins = std::max(mx + 1, minlength);
  if (!has_w) {
    Tensor y = zeros({nbins}, kInt64);
    int64_t* yp = mptr<int64_t>(y);
    for (int64_t i = 0; i < n; ++i) ++yp[p[i]];
    out = {y};
    return;
  }
  Dtype od = in[1].dtype() == kFloat32 ? kFloat32 : kFloat64;
  Tensor w = contiguous(to_dtype(in[1], od));
  Tensor y = zeros({nbins}, od);
  visit_floating(od, op.name, [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      const T* wp = cptr<T>(w);
      T* yp = mptr<T>(y);
      for (int64_t i = 0; i < n; ++i) yp[p[i]] += wp[i];  // in order, as torch
    }
  });
  out = {y};
}
OpDef op_bincount{"bincount", kDynamicShape, nullptr, {bincount_kernel, nullptr}};
OpRegistrar reg_bincount{op_bincount};

std::tuple<Tensor, Tensor> pair_of(const TensorList& r) { return {r[0], r[1]}; }


}  // namespace

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  return pair_of(dispatch(op_sort, {x}, {dim, descending, stable}));
}
Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  return std::get<1>(kiln::sort(x, dim, descending, stable));
}
Tensor msort(const Tensor& x) { return std::get<0>(kiln::sort(x, 0, false)); }

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  return pair_of(dispatch(op_topk, {x}, {k, dim, largest, sorted}));
}
std::tuple<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim) {
  return pair_of(dispatch(op_kthvalue, {x}, {k, dim, keepdim}));
}

Tensor median(const Tensor& x) { return dispatch1(op_median, {x}); }
std::tuple<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim) {
  return pair_of(dispatch(op_median_dim, {x}, {dim, keepdim}));
}
Tensor nanmedian(const Tensor& x) { return dispatch1(op_nanmedian, {x}); }
std::tuple<Tensor, Tensor> nanmedian(const Tensor& x, int64_t dim, bool keepdim) {
  return pair_of(dispatch(op_nanmedian_dim, {x}, {dim, keepdim}));
}
std::tuple<Tensor, Tensor> mode(const Tensor& x, int64_t dim, bool keepdim) {
  return pair_of(dispatch(op_mode, {x}, {dim, keepdim}));
}

Tensor quantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                const std::string& interpolation) {
  return dispatch1(op_quantile, {x, q}, {dim.has_value(), dim.value_or(0), keepdim, interpolation});
}
Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                   const std::string& interpolation) {
  return dispatch1(op_nanquantile, {x, q}, {dim.has_value(), dim.value_or(0), keepdim, interpolation});
}
Tensor quantile(const Tensor& x, double q, std::optional<int64_t> dim, bool keepdim,
                const std::string& interpolation) {
  KILN_CHECK(q >= 0 && q <= 1, Runtime, "quantile", "quantile() q must be in the range [0, 1] but got ", q);
  return quantile(x, scalar_tensor(Scalar(q), x.dtype()), dim, keepdim, interpolation);
}
Tensor nanquantile(const Tensor& x, double q, std::optional<int64_t> dim, bool keepdim,
                   const std::string& interpolation) {
  KILN_CHECK(q >= 0 && q <= 1, Runtime, "nanquantile", "quantile() q must be in the range [0, 1] but got ", q);
  return nanquantile(x, scalar_tensor(Scalar(q), x.dtype()), dim, keepdim, interpolation);
}

std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool, bool return_inverse, bool return_counts,
                                          std::optional<int64_t> dim) {
  auto r = dispatch(op_unique, {x}, {dim.has_value(), dim.value_or(0), return_inverse, return_counts});
  return {r[0], r[1], r[2]};
}
std::tuple<Tensor, Tensor, Tensor> unique_consecutive(const Tensor& x, bool return_inverse, bool return_counts,
                                                      std::optional<int64_t> dim) {
  auto r = dispatch(op_unique_consecutive, {x}, {dim.has_value(), dim.value_or(0), return_inverse, return_counts});
  return {r[0], r[1], r[2]};
}

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
