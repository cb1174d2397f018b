// Layer-norm row loops (compiled once per ISA, kernel table entries layer_norm / layer_norm_backward;
// the kernels that run them are in norm.cpp). Plain loops over kLanes accumulators that the compiler
// vectorises for the ISA: the summation order is fixed by the source and the file is compiled with
// -ffp-contract=off (CMakeLists.txt), so every table gives the same bits.
#include <cmath>

#include "kiln/backend/cpu/isa_util.h"

namespace kiln::cpu::KILN_ISA {
namespace {

constexpr int kLanes = 16;

// sum of f(i) for i in [0, n): kLanes accumulators, folded pairwise, then the tail.
template <class T, class F>
inline T lane_sum(int64_t n, F&& f) {
  T acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += f(i + l);
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  T r = acc[0];
  for (; i < n; ++i) r += f(i);
  return r;
}

template <class T>
void fwd_rows(const LayerNormArgs& a, int64_t r0, int64_t r1) {
  const int64_t N = a.N;
  const T* xp = static_cast<const T*>(a.x);
  const T* wp = static_cast<const T*>(a.w);
  const T* bp = static_cast<const T*>(a.b);
  T* yp = static_cast<T*>(a.y);
  T* mp = static_cast<T*>(a.mean);
  T* rp = static_cast<T*>(a.rstd);
  for (int64_t r = r0; r < r1; ++r) {
    const T* row = xp + r * N;
    const T mean = lane_sum<T>(N, [&](int64_t i) { return row[i]; }) / static_cast<T>(N);
    const T var = lane_sum<T>(N, [&](int64_t i) {
                    T d = row[i] - mean;
                    return d * d;
                  }) / static_cast<T>(N);
    const T rstd = T(1) / std::sqrt(var + static_cast<T>(a.eps));
    mp[r] = mean;
    rp[r] = rstd;
    T* y = yp + r * N;
    if (wp && bp) {
      for (int64_t i = 0; i < N; ++i) y[i] = (row[i] - mean) * rstd * wp[i] + bp[i];
    } else if (wp) {
      for (int64_t i = 0; i < N; ++i) y[i] = (row[i] - mean) * rstd * wp[i];
    } else if (bp) {
      for (int64_t i = 0; i < N; ++i) y[i] = (row[i] - mean) * rstd + bp[i];
    } else {
      for (int64_t i = 0; i < N; ++i) y[i] = (row[i] - mean) * rstd;
    }
  }
}

// Rows [r0, r1): dx, and dw / db accumulated into acc (2 * N: dw then db). dxh: N values of scratch.
template <class T>
void bwd_rows(const LayerNormBackwardArgs& a, int64_t r0, int64_t r1, void* acc_, void* dxh_) {
  const int64_t N = a.N;
  const T* gp = static_cast<const T*>(a.g);
  const T* xp = static_cast<const T*>(a.x);
  const T* mp = static_cast<const T*>(a.mean);
  const T* rp = static_cast<const T*>(a.rstd);
  const T* wp = static_cast<const T*>(a.w);
  T* dxp = static_cast<T*>(a.dx);
  T* dw = static_cast<T*>(acc_);
  T* db = dw + N;
  T* dxh = static_cast<T*>(dxh_);
  for (int64_t r = r0; r < r1; ++r) {
    const T *gr = gp + r * N, *xr = xp + r * N;
    const T mu = mp[r], rs = rp[r];
    for (int64_t i = 0; i < N; ++i) {
      const T xh = (xr[i] - mu) * rs;
      dxh[i] = wp ? gr[i] * wp[i] : gr[i];
      dw[i] += gr[i] * xh;
      db[i] += gr[i];
    }
    const T s1 = lane_sum<T>(N, [&](int64_t i) { return dxh[i]; }) / static_cast<T>(N);
    const T s2 = lane_sum<T>(N, [&](int64_t i) { return dxh[i] * ((xr[i] - mu) * rs); }) / static_cast<T>(N);
    T* dx = dxp + r * N;
    for (int64_t i = 0; i < N; ++i) dx[i] = rs * (dxh[i] - s1 - (xr[i] - mu) * rs * s2);
  }
}

}  // namespace

void fill_norm(KernelTable& t) {
  t.layer_norm[static_cast<int>(kFloat32)] = &fwd_rows<float>;
  t.layer_norm[static_cast<int>(kFloat64)] = &fwd_rows<double>;
  t.layer_norm_backward[static_cast<int>(kFloat32)] = &bwd_rows<float>;
  t.layer_norm_backward[static_cast<int>(kFloat64)] = &bwd_rows<double>;
}

}  // namespace kiln::cpu::KILN_ISA
