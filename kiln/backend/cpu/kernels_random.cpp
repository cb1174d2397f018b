// Random fills (compiled once per ISA) on the counter-based Philox-4x32-10 generator.
//
// A fill with key k and first counter f gives element i a value that depends only on (k, f, i):
// - uniform and normal floats (float32, float16, bfloat16) use the four 32-bit words of block
//   f + i / 4 for elements 4j .. 4j + 3: a word's top 24 bits are one uniform, and the normals come
//   from Box-Muller on the word pairs (0, 1) and (2, 3), cos then sin. The blocks are computed N at
//   once in vector lanes and the transcendentals are vector functions; a chunk's ends run the same
//   vector code on whole groups and keep the part they own, so the split over threads never changes
//   a value;
// - everything else (float64, the other distributions, integers) uses block f + i, one element each.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kiln/backend/cpu/isa_util.h"
#include "kiln/backend/cpu/vec.h"
#include "kiln/core/convert.h"
#include "kiln/core/generator.h"

namespace kiln::cpu::KILN_ISA {
namespace {

using D = RandomDist;
constexpr int L = VecF::N;  // blocks per vector group; a group fills 4 * L elements

// L Philox blocks (key, c0 + l): plain loops over the lanes that the compiler vectorises
// (32 x 32 -> 64-bit multiplies); the same arithmetic as philox() in core/generator.h.
struct Words {
  alignas(64) uint32_t w[4][L];
};
inline void philox_lanes(uint64_t key, uint64_t c0, Words& out) {
  alignas(64) uint32_t x0[L], x1[L], x2[L], x3[L];
  auto counters = [&] {
    for (int l = 0; l < L; ++l) {
      const uint64_t c = c0 + static_cast<uint64_t>(l);
      x0[l] = static_cast<uint32_t>(c), x1[l] = static_cast<uint32_t>(c >> 32), x2[l] = 0, x3[l] = 0;
    }
  };
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
#if defined(__AVX512F__) || defined(__AVX2__)
  // The rounds in vector registers (GCC leaves the loop below scalar: 32 x 32 -> 64-bit products
  // per lane): even lanes' products from mul_epu32 directly, odd lanes' from the words shifted down;
  // the high and low halves are blended back into lane order.
#if defined(__AVX512F__)
  using V = __m512i;
  auto load = [](const uint32_t* q) { return _mm512_loadu_si512(q); };
  auto store = [](uint32_t* q, V v) { _mm512_store_si512(q, v); };
  auto set1 = [](uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); };
  auto mul_hi_lo = [](V x, V m, V& hi, V& lo) {
    const V e = _mm512_mul_epu32(x, m), o = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), m);
    hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(e, 32), o);
    lo = _mm512_mask_blend_epi32(0xAAAA, e, _mm512_slli_epi64(o, 32));
  };
  auto xor3 = [](V a, V b, V c) { return _mm512_xor_si512(_mm512_xor_si512(a, b), c); };
  auto add = [](V a, V b) { return _mm512_add_epi32(a, b); };
#else
  using V = __m256i;
  auto load = [](const uint32_t* q) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)); };
  auto store = [](uint32_t* q, V v) { _mm256_store_si256(reinterpret_cast<__m256i*>(q), v); };
  auto set1 = [](uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); };
  auto mul_hi_lo = [](V x, V m, V& hi, V& lo) {
    const V e = _mm256_mul_epu32(x, m), o = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m);
    hi = _mm256_blend_epi32(_mm256_srli_epi64(e, 32), o, 0xAA);
    lo = _mm256_blend_epi32(e, _mm256_slli_epi64(o, 32), 0xAA);
  };
  auto xor3 = [](V a, V b, V c) { return _mm256_xor_si256(_mm256_xor_si256(a, b), c); };
  auto add = [](V a, V b) { return _mm256_add_epi32(a, b); };
#endif
  static_assert(sizeof(V) == L * sizeof(uint32_t));
  // The counters c0 + l: in registers unless the low words carry within the group (rare; words
  // written one by one and read back as a vector would stall the load on every call).
  const uint32_t c_lo = static_cast<uint32_t>(c0);
  V v0, v1, v2 = set1(0), v3 = set1(0);
  if (c_lo <= 0xFFFFFFFFu - (L - 1)) {
    alignas(64) static constexpr uint32_t kIota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    v0 = add(set1(c_lo), load(kIota)), v1 = set1(static_cast<uint32_t>(c0 >> 32));
  } else {
    counters();
    v0 = load(x0), v1 = load(x1);
  }
  const V m0 = set1(0xD2511F53u), m1 = set1(0xCD9E8D57u);
  for (int r = 0; r < 10; ++r) {
    V h0, l0, h1, l1;
    mul_hi_lo(v0, m0, h0, l0);
    mul_hi_lo(v2, m1, h1, l1);
    const V n0 = xor3(h1, v1, set1(k0)), n2 = xor3(h0, v3, set1(k1));
    v1 = l1, v3 = l0, v0 = n0, v2 = n2;
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  store(out.w[0], v0), store(out.w[1], v1), store(out.w[2], v2), store(out.w[3], v3);
  return;
#endif
  counters();
  for (int r = 0; r < 10; ++r) {
    for (int l = 0; l < L; ++l) {
      const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * x0[l];
      const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * x2[l];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ x1[l] ^ k0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ x3[l] ^ k1;
      x1[l] = static_cast<uint32_t>(p1), x3[l] = static_cast<uint32_t>(p0), x0[l] = n0, x2[l] = n2;
    }
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  for (int l = 0; l < L; ++l) out.w[0][l] = x0[l], out.w[1][l] = x1[l], out.w[2][l] = x2[l], out.w[3][l] = x3[l];
}

// One group: elements [4 L g, 4 L (g + 1)) of the fill, as floats.
template <D DIST>
inline void group_values(const RandomArgs& a, int64_t g, float* v) {
  Words b;
  philox_lanes(a.key, a.first + static_cast<uint64_t>(g) * L, b);
  const VecF scale = VecF::set1(1.0f / 16777216.0f);
  alignas(64) float q[4][L];
  if constexpr (DIST == D::Uniform) {
    const float lo = static_cast<float>(a.p0), hi = static_cast<float>(a.p1);
    const VecF vlo = VecF::set1(lo), span = VecF::set1(hi - lo);
    for (int k = 0; k < 4; ++k) {
      VecF u = VecF::from_top24(b.w[k]) * scale;  // [0, 1), 24 bits
      VecF x = vlo + u * span;
      // never the upper bound (float rounding of lo + u * span can reach it)
      if (hi > lo) x = VecF::select_lt(x, VecF::set1(hi), x, vlo);
      x.store(q[k]);
    }
  } else {  // Normal
    const VecF half = VecF::set1(0.5f), mean = VecF::set1(static_cast<float>(a.p0)),
               sd = VecF::set1(static_cast<float>(a.p1));
    for (int p = 0; p < 2; ++p) {
      VecF u1 = (VecF::from_top24(b.w[2 * p]) + half) * scale;  // (0, 1)
      VecF u2 = VecF::from_top24(b.w[2 * p + 1]) * scale;       // [0, 1)
      VecF rad = (VecF::set1(-2.0f) * u1.log()).sqrt() * sd;
      VecF s, c;
      (u2 + u2).sincospi(&s, &c);
      (mean + rad * c).store(q[2 * p]);
      (mean + rad * s).store(q[2 * p + 1]);
    }
  }
  for (int l = 0; l < L; ++l)
    for (int k = 0; k < 4; ++k) v[4 * l + k] = q[k][l];
}

template <D DIST, class T>
void fill_vector(void* out, int64_t begin, int64_t end, const RandomArgs& a) {
  T* o = static_cast<T*>(out);
  constexpr int64_t G = 4 * L;
  alignas(64) float v[G];
  alignas(64) T t[G];
  for (int64_t g = begin / G; g * G < end; ++g) {
    group_values<DIST>(a, g, v);
    const int64_t lo = std::max(begin, g * G), hi = std::min(end, (g + 1) * G);
    if constexpr (std::is_same_v<T, float>) {
      std::memcpy(o + lo, v + (lo - g * G), static_cast<size_t>(hi - lo) * sizeof(float));
    } else {
      for (int i = 0; i < G; i += VecF::N) store_from_float(t + i, VecF::load(v + i));
      if constexpr (DIST == D::Uniform) {  // rounding to T may reach the upper bound too
        const float lo_v = static_cast<float>(a.p0), hi_v = static_cast<float>(a.p1);
        for (int i = 0; i < G; ++i)
          if (hi_v > lo_v && static_cast<float>(t[i]) >= hi_v) t[i] = T(lo_v);
      }
      std::memcpy(o + lo, t + (lo - g * G), static_cast<size_t>(hi - lo) * sizeof(T));
    }
  }
}

inline double u53(uint32_t a, uint32_t b) {  // uniform in [0, 1)
  uint64_t x = (static_cast<uint64_t>(a) << 21) ^ (b >> 11);
  return static_cast<double>(x & ((1ULL << 53) - 1)) * (1.0 / 9007199254740992.0);
}

// One Philox block per element, double arithmetic: float64, integers and the other distributions.
// The blocks come L at a time from philox_lanes (philox()'s values), the rest element by element.
template <D DIST, class T>
void fill_scalar(void* out, int64_t begin, int64_t end, const RandomArgs& a) {
  T* p = static_cast<T*>(out);
  const double p0 = a.p0, p1 = a.p1;
  // FromTo: [lo, lo + span) in 64-bit arithmetic; span 0 stands for 2^64
  const uint64_t lo = static_cast<uint64_t>(a.lo), span = static_cast<uint64_t>(a.hi) - lo + 1;
  Words b;
  for (int64_t i = begin, l = L; i < end; ++i, ++l) {
    if (l == L) philox_lanes(a.key, a.first + static_cast<uint64_t>(i), b), l = 0;
    const uint32_t r[4] = {b.w[0][l], b.w[1][l], b.w[2][l], b.w[3][l]};
    double u = u53(r[0], r[1]);
    double v;
    if constexpr (DIST == D::Uniform) {
      v = p0 + u * (p1 - p0);
      if constexpr (is_float_v<T>) {
        if (static_cast<double>(convert<T>(v)) >= p1 && p1 > p0) v = p0;
      }
    } else if constexpr (DIST == D::Normal) {
      v = p0 + p1 * std::sqrt(-2.0 * std::log1p(-u)) * std::cos(2.0 * M_PI * u53(r[2], r[3]));
    } else if constexpr (DIST == D::LogNormal) {
      v = std::exp(p0 + p1 * std::sqrt(-2.0 * std::log1p(-u)) * std::cos(2.0 * M_PI * u53(r[2], r[3])));
    } else if constexpr (DIST == D::Bernoulli) {
      v = u < p0 ? 1.0 : 0.0;
    } else if constexpr (DIST == D::Exponential) {
      v = -std::log1p(-u) / p0;
    } else if constexpr (DIST == D::Geometric) {
      v = std::ceil(std::log1p(-u) / std::log1p(-p0));
      if (v < 1) v = 1;
    } else if constexpr (DIST == D::Cauchy) {
      v = p0 + p1 * std::tan(M_PI * (u - 0.5));
    } else if constexpr (DIST == D::Randint) {  // in [p0, p1)
      const uint64_t range = static_cast<uint64_t>(p1 - p0);
      const uint64_t x = (static_cast<uint64_t>(r[0]) << 32) | r[1];
      p[i] = convert<T>(static_cast<int64_t>(p0) + static_cast<int64_t>(x % range));
      continue;
    } else {  // FromTo: in [p0, p1]
      const uint64_t x = (static_cast<uint64_t>(r[0]) << 32) | r[1];
      p[i] = convert<T>(static_cast<int64_t>(lo + (span ? x % span : x)));
      continue;
    }
    p[i] = convert<T>(v);
  }
}

template <class T>
inline constexpr bool vector_float_v =
    std::is_same_v<T, float> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

}  // namespace

void fill_random(KernelTable& t) {
  for_each_code<static_cast<int>(D::Count)>([&]<int I>() {
    constexpr D DIST = static_cast<D>(I);
    for_each_type([&]<class T>() {
      if constexpr (!is_complex_v<T>) {
        RandomFn fn;
        if constexpr ((DIST == D::Uniform || DIST == D::Normal) && vector_float_v<T>) fn = &fill_vector<DIST, T>;
        else fn = &fill_scalar<DIST, T>;
        t.random[I][static_cast<int>(dtype_of<T>())] = fn;
      }
    });
  });
}

}  // namespace kiln::cpu::KILN_ISA
