// Sorting, selection and searching: sort/argsort/msort, topk, kthvalue, median/nanmedian, mode,
// quantile/nanquantile, unique/unique_consecutive (searching and counting: search.cpp).
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
#include "kiln/ops/sort_detail.h"

namespace kiln {
namespace {

using namespace sort_detail;

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
OpRegistrar reg_sort{op_sort, "sort.stable(Tensor self, int dim, bool descending, bool stable) -> (Tensor values, Tensor indices)"};

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
OpRegistrar reg_topk{op_topk, "topk(Tensor self, int k, int dim, bool largest, bool sorted) -> (Tensor values, Tensor indices)"};

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
OpRegistrar reg_kthvalue{op_kthvalue, "kthvalue(Tensor self, int k, int dim, bool keepdim) -> (Tensor values, Tensor indices)"};

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
OpRegistrar reg_median_dim{op_median_dim, "median.dim(Tensor self, int dim, bool keepdim) -> (Tensor values, Tensor indices)"};
OpDef op_nanmedian_dim{"nanmedian_dim", kReduction, median_dim_meta, {median_dim_kernel, nullptr}, 1};
OpRegistrar reg_nanmedian_dim{op_nanmedian_dim, "nanmedian.dim(Tensor self, int dim, bool keepdim) -> (Tensor values, Tensor indices)"};

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
OpRegistrar reg_median{op_median, "median(Tensor self) -> Tensor"};
OpDef op_nanmedian{"nanmedian", kReduction, median_meta, {median_kernel, nullptr}, 1};
OpRegistrar reg_nanmedian{op_nanmedian, "nanmedian(Tensor self) -> Tensor"};

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
OpRegistrar reg_mode{op_mode, "mode(Tensor self, int dim, bool keepdim) -> (Tensor values, Tensor indices)"};

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
OpRegistrar reg_quantile{op_quantile, "quantile(Tensor self, Tensor q, bool has_dim, int dim, bool keepdim, str interpolation) -> Tensor"};
OpDef op_nanquantile{"nanquantile", kReduction, quantile_meta, {quantile_kernel, nullptr}, 1};
OpRegistrar reg_nanquantile{op_nanquantile, "nanquantile(Tensor self, Tensor q, bool has_dim, int dim, bool keepdim, str interpolation) -> Tensor"};

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
OpRegistrar reg_unique{op_unique, "unique(Tensor self, bool has_dim, int dim, bool return_inverse, bool return_counts) -> (Tensor, Tensor, Tensor)"};
OpDef op_unique_consecutive{"unique_consecutive", kDynamicShape, nullptr, {unique_kernel, nullptr}, 1};
OpRegistrar reg_unique_consecutive{op_unique_consecutive, "unique_consecutive(Tensor self, bool has_dim, int dim, bool return_inverse, bool return_counts) -> (Tensor, Tensor, Tensor)"};

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

}  // namespace kiln
