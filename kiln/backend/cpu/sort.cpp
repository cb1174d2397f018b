// CPU kernels of the sorting family: sort, topk, kthvalue, median / nanmedian, mode, quantile /
// nanquantile, unique / unique_consecutive (their op-table entries, schemas, metas and front ends are
// in kiln/ops/sort.cpp), registered by op name.
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
#include "kiln/ops/sort.h"
#include "kiln/ops/sort_detail.h"

namespace kiln {
namespace {

// Rows per thread chunk: about kGrainSize element visits (a row of R costs ~8 R).
inline int64_t row_grain(int64_t R) { return std::max<int64_t>(1, cpu::kGrainSize / std::max<int64_t>(8 * R, 1)); }

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

void sort_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  int64_t d = wrap_dim(attr<int64_t>(a, 0), x.dim(), op.name);
  bool desc = attr<bool>(a, 1), stable = std::holds_alternative<bool>(a[2]) && attr<bool>(a, 2);  // None: false
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

KernelRegistrar k_sort{"sort", DeviceType::CPU, sort_kernel};
KernelRegistrar k_topk{"topk", DeviceType::CPU, topk_kernel};
KernelRegistrar k_kthvalue{"kthvalue", DeviceType::CPU, kthvalue_kernel};
KernelRegistrar k_median_dim{"median_dim", DeviceType::CPU, median_dim_kernel};
KernelRegistrar k_nanmedian_dim{"nanmedian_dim", DeviceType::CPU, median_dim_kernel};
KernelRegistrar k_median{"median", DeviceType::CPU, median_kernel};
KernelRegistrar k_nanmedian{"nanmedian", DeviceType::CPU, median_kernel};
KernelRegistrar k_mode{"mode", DeviceType::CPU, mode_kernel};
KernelRegistrar k_quantile{"quantile", DeviceType::CPU, quantile_kernel};
KernelRegistrar k_nanquantile{"nanquantile", DeviceType::CPU, quantile_kernel};
KernelRegistrar k_unique{"unique", DeviceType::CPU, unique_kernel};
KernelRegistrar k_unique_consecutive{"unique_consecutive", DeviceType::CPU, unique_kernel};

}  // namespace
}  // namespace kiln
