// CPU kernels of searchsorted/bucketize, histc and bincount (their op-table entries, schemas, metas
// and front ends are in kiln/ops/search.cpp), registered by op name.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kiln/backend/cpu/parallel.h"
#include "kiln/ops/sort.h"
#include "kiln/ops/sort_detail.h"

namespace kiln {
namespace {

using namespace sort_detail;

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

KernelRegistrar k_searchsorted{"searchsorted", DeviceType::CPU, searchsorted_kernel};
KernelRegistrar k_histc{"histc", DeviceType::CPU, histc_kernel};
KernelRegistrar k_bincount{"bincount", DeviceType::CPU, bincount_kernel};

}  // namespace
}  // namespace kiln
