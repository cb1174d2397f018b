// The fused optimiser update (detail/fused.h): per-ISA vector ops, the kernels of
// detail/fused_impl.h compiled for each, and the threaded multi-tensor driver.
//
// The kernels are compiled here per ISA with `#pragma GCC target` regions (not through the
// per-ISA kernel files of kiln/backend/cpu), so one translation unit holds the whole update; the
// regions contain only this file's code, never a library header's inline functions.
#include "kiln/optim/detail/fused.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/core/half.h"

namespace kiln::optim::detail {
namespace {

// The remainder loop: plain scalars. Fma is a true fused multiply-add where the ISA has one.
template <class T_, bool kHasFma>
struct ScalarOpsT {
  using T = T_;
  using V = T;
  static constexpr int N = 1;
  static V load(const T* p) { return *p; }
  static void store(T* p, V v) { *p = v; }
  static V set1(T x) { return x; }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V div(V a, V b) { return a / b; }
  static V sqrt(V a) { return std::sqrt(a); }
  static V neg(V a) { return -a; }
  static V fma(V a, V b, V c) {
    if constexpr (kHasFma) {
      return std::fma(a, b, c);
    } else {
      return a * b + c;
    }
  }
  static V maxnan(V a, V b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
};

// ---- SSE2 (every x86-64 CPU)
// ---------------------------------------------------------------------
namespace sse2 {
template <class T>
struct VecOps;
template <>
struct VecOps<float> {
  using T = float;
  using V = __m128;
  static constexpr int N = 4;
  static V load(const T* p) { return _mm_loadu_ps(p); }
  static void store(T* p, V v) { _mm_storeu_ps(p, v); }
  static V set1(T x) { return _mm_set1_ps(x); }
  static V add(V a, V b) { return _mm_add_ps(a, b); }
  static V sub(V a, V b) { return _mm_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm_mul_ps(a, b); }
  static V div(V a, V b) { return _mm_div_ps(a, b); }
  static V sqrt(V a) { return _mm_sqrt_ps(a); }
  static V neg(V a) { return _mm_xor_ps(a, _mm_set1_ps(-0.0f)); }
  static V fma(V a, V b, V c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
  static V maxnan(V a, V b) {
    V m = _mm_cmpunord_ps(a, a);
    return _mm_or_ps(_mm_and_ps(m, a), _mm_andnot_ps(m, _mm_max_ps(a, b)));
  }
};
template <>
struct VecOps<double> {
  using T = double;
  using V = __m128d;
  static constexpr int N = 2;
  static V load(const T* p) { return _mm_loadu_pd(p); }
  static void store(T* p, V v) { _mm_storeu_pd(p, v); }
  static V set1(T x) { return _mm_set1_pd(x); }
  static V add(V a, V b) { return _mm_add_pd(a, b); }
  static V sub(V a, V b) { return _mm_sub_pd(a, b); }
  static V mul(V a, V b) { return _mm_mul_pd(a, b); }
  static V div(V a, V b) { return _mm_div_pd(a, b); }
  static V sqrt(V a) { return _mm_sqrt_pd(a); }
  static V neg(V a) { return _mm_xor_pd(a, _mm_set1_pd(-0.0)); }
  static V fma(V a, V b, V c) { return _mm_add_pd(_mm_mul_pd(a, b), c); }
  static V maxnan(V a, V b) {
    V m = _mm_cmpunord_pd(a, a);
    return _mm_or_pd(_mm_and_pd(m, a), _mm_andnot_pd(m, _mm_max_pd(a, b)));
  }
};
template <class T>
using ScalarOps = ScalarOpsT<T, false>;
#include "kiln/optim/detail/fused_impl.h"
}  // namespace sse2

// ---- AVX2 + FMA
// ------------------------------------------------------------------------------------
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
template <class T>
struct VecOps;
template <>
struct VecOps<float> {
  using T = float;
  using V = __m256;
  static constexpr int N = 8;
  static V load(const T* p) { return _mm256_loadu_ps(p); }
  static void store(T* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(T x) { return _mm256_set1_ps(x); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V sqrt(V a) { return _mm256_sqrt_ps(a); }
  static V neg(V a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V maxnan(V a, V b) {
    return _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  }
};
template <>
struct VecOps<double> {
  using T = double;
  using V = __m256d;
  static constexpr int N = 4;
  static V load(const T* p) { return _mm256_loadu_pd(p); }
  static void store(T* p, V v) { _mm256_storeu_pd(p, v); }
  static V set1(T x) { return _mm256_set1_pd(x); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static V sub(V a, V b) { return _mm256_sub_pd(a, b); }
  static V mul(V a, V b) { return _mm256_mul_pd(a, b); }
  static V div(V a, V b) { return _mm256_div_pd(a, b); }
  static V sqrt(V a) { return _mm256_sqrt_pd(a); }
  static V neg(V a) { return _mm256_xor_pd(a, _mm256_set1_pd(-0.0)); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V maxnan(V a, V b) {
    return _mm256_blendv_pd(_mm256_max_pd(a, b), a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
  }
};
template <class T>
using ScalarOps = ScalarOpsT<T, true>;
#include "kiln/optim/detail/fused_impl.h"
}  // namespace avx2
#pragma GCC pop_options

// ---- AVX-512
// -------------------------------------------------------------------------------------
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")
namespace avx512 {
template <class T>
struct VecOps;
template <>
struct VecOps<float> {
  using T = float;
  using V = __m512;
  static constexpr int N = 16;
  static V load(const T* p) { return _mm512_loadu_ps(p); }
  static void store(T* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(T x) { return _mm512_set1_ps(x); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V sqrt(V a) { return _mm512_sqrt_ps(a); }
  static V neg(V a) { return _mm512_xor_ps(a, _mm512_set1_ps(-0.0f)); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V maxnan(V a, V b) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), _mm512_max_ps(a, b), a);
  }
};
template <>
struct VecOps<double> {
  using T = double;
  using V = __m512d;
  static constexpr int N = 8;
  static V load(const T* p) { return _mm512_loadu_pd(p); }
  static void store(T* p, V v) { _mm512_storeu_pd(p, v); }
  static V set1(T x) { return _mm512_set1_pd(x); }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
  static V sub(V a, V b) { return _mm512_sub_pd(a, b); }
  static V mul(V a, V b) { return _mm512_mul_pd(a, b); }
  static V div(V a, V b) { return _mm512_div_pd(a, b); }
  static V sqrt(V a) { return _mm512_sqrt_pd(a); }
  static V neg(V a) { return _mm512_xor_pd(a, _mm512_set1_pd(-0.0)); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V maxnan(V a, V b) {
    return _mm512_mask_blend_pd(_mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q), _mm512_max_pd(a, b), a);
  }
};
template <class T>
using ScalarOps = ScalarOpsT<T, true>;
#include "kiln/optim/detail/fused_impl.h"
}  // namespace avx512
#pragma GCC pop_options

using ChunkFn = void (*)(Algo, const Hyper&, Dtype, const Segment&, int64_t, int64_t);

struct IsaChoice {
  ChunkFn fn;
  const char* name;
};

IsaChoice pick_isa() {
  switch (cpu::selected_isa()) {
    case cpu::Isa::Avx512: return {avx512::update_chunk, "avx512"};
    case cpu::Isa::Avx2: return {avx2::update_chunk, "avx2"};
    default: return {sse2::update_chunk, "sse2"};
  }
}

const IsaChoice& isa() {
  static const IsaChoice c = pick_isa();
  return c;
}

}  // namespace

const char* update_isa() { return isa().name; }

void run_update(Algo algo, const Hyper& h, Dtype dtype, const std::vector<Segment>& segs) {
  std::vector<int64_t> start(segs.size() + 1, 0);
  for (size_t k = 0; k < segs.size(); ++k) start[k + 1] = start[k] + segs[k].n;
  const int64_t total = start.back();
  if (total == 0) return;
  ChunkFn fn = isa().fn;
  // Threads split the elements of all the parameters together; a chunk may span several.
  cpu::parallel_for(total, cpu::kGrainSize, [&](int64_t b, int64_t e) {
    size_t k =
        static_cast<size_t>(std::upper_bound(start.begin(), start.end(), b) - start.begin()) - 1;
    for (; k < segs.size() && start[k] < e; ++k) {
      int64_t lo = std::max(b, start[k]) - start[k];
      int64_t hi = std::min(e, start[k + 1]) - start[k];
      if (lo < hi) fn(algo, h, dtype, segs[k], lo, hi);
    }
  });
}

}  // namespace kiln::optim::detail

namespace kiln::optim::detail {
namespace {

// attrs: {algo, flags, hyper-parameters (8), c0 per segment, c1 per segment, fresh per segment}
enum : int64_t { kMaximize = 1, kNesterov = 2, kAmsgrad = 4, kDecoupled = 8, kCentered = 16, kMomentum = 32 };

SpecList update_meta(const OpDef&, const SpecList&, const Attrs&) { return {}; }

void update_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList&) {
  const Algo algo = static_cast<Algo>(attr<int64_t>(a, 0));
  const int64_t f = attr<int64_t>(a, 1);
  const std::vector<double>& hv = attr<std::vector<double>>(a, 2);
  Hyper h;
  h.lr = hv[0], h.beta1 = hv[1], h.beta2 = hv[2], h.eps = hv[3], h.weight_decay = hv[4];
  h.momentum = hv[5], h.dampening = hv[6], h.alpha = hv[7];
  h.maximize = f & kMaximize, h.nesterov = f & kNesterov, h.amsgrad = f & kAmsgrad;
  h.decoupled = f & kDecoupled, h.centered = f & kCentered, h.use_momentum = f & kMomentum;
  const std::vector<double>& c0 = attr<std::vector<double>>(a, 3);
  const std::vector<double>& c1 = attr<std::vector<double>>(a, 4);
  const Shape& fresh = attr<Shape>(a, 5);
  std::vector<Segment> segs(c0.size());
  for (size_t k = 0; k < segs.size(); ++k) {
    const Tensor* t = &in[5 * k];
    auto ptr = [](const Tensor& x) { return x.defined() ? x.data_ptr() : nullptr; };
    segs[k].p = t[0].data_ptr(), segs[k].g = t[1].data_ptr();
    segs[k].s0 = ptr(t[2]), segs[k].s1 = ptr(t[3]), segs[k].s2 = ptr(t[4]);
    segs[k].n = t[0].numel(), segs[k].c0 = c0[k], segs[k].c1 = c1[k], segs[k].fresh = fresh[k] != 0;
  }
  if (!segs.empty()) run_update(algo, h, in[0].dtype(), segs);
}

OpDef op_update{"_fused_optimizer_update", 0, update_meta, {update_kernel, nullptr}};
OpRegistrar reg_update{op_update,
                       "_fused_optimizer_update(Tensor[] tensors, int algo, int flags, float[] hyper, float[] c0, "
                       "float[] c1, int[] fresh) -> ()"};

}  // namespace

void fused_update(Algo algo, const Hyper& h, const TensorList& tensors, const std::vector<Segment>& segs) {
  const int64_t f = (h.maximize ? kMaximize : 0) | (h.nesterov ? kNesterov : 0) | (h.amsgrad ? kAmsgrad : 0) |
                    (h.decoupled ? kDecoupled : 0) | (h.centered ? kCentered : 0) |
                    (h.use_momentum ? kMomentum : 0);
  std::vector<double> c0, c1;
  Shape fresh;
  for (const Segment& s : segs) c0.push_back(s.c0), c1.push_back(s.c1), fresh.push_back(s.fresh);
  dispatch(op_update, tensors,
           {static_cast<int64_t>(algo), f,
            std::vector<double>{h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.momentum, h.dampening, h.alpha},
            std::move(c0), std::move(c1), std::move(fresh)});
}

}  // namespace kiln::optim::detail
