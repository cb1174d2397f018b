// Dtype-converting copy loops (compiled once per ISA).
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kiln/backend/cpu/isa_util.h"
#include "kiln/backend/cpu/vec.h"
#include "kiln/core/convert.h"

namespace kiln::cpu::KILN_ISA {
namespace {

template <class F, class T>
void cast_loop(char* out, const char* in, int64_t n, int64_t os, int64_t is) {
  if (os == sizeof(T) && is == sizeof(F)) {
    if constexpr (std::is_same_v<F, T>) {
      std::memcpy(out, in, static_cast<size_t>(n) * sizeof(T));
    } else {
      T* __restrict o = reinterpret_cast<T*>(out);
      const F* __restrict x = reinterpret_cast<const F*>(in);
      int64_t i = 0;
#if defined(__F16C__) && defined(__AVX2__)
      // float32 <-> float16 eight at a time with the F16C instructions (12x the scalar loop), which
      // round and widen as the scalar conversions do except for NaN payloads: lanes holding a NaN
      // take the scalar conversion's bits (float16: sign | 0x7e00; float32: the payload kept as is);
      // float32 -> bfloat16 by the scalar conversion's integer rounding, eight at a time
      if constexpr (std::is_same_v<F, float> && std::is_same_v<T, Half>) {
        for (; i + 8 <= n; i += 8) {
          const __m256 v = _mm256_loadu_ps(x + i);
          __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
          const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
          _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i), h);
          if (!_mm256_testz_ps(nan, nan)) [[unlikely]]
            for (int64_t l = i; l < i + 8; ++l) o[l] = convert<T>(x[l]);
        }
      } else if constexpr (std::is_same_v<F, float> && std::is_same_v<T, BFloat16>) {
        // (vec.h's store: round to nearest even on the bits, NaN to 0x7fc0, as the scalar conversion)
        for (; i + VecF::N <= n; i += VecF::N) store_from_float(o + i, VecF::load(x + i));
      } else if constexpr (std::is_same_v<F, Half> && std::is_same_v<T, float>) {
        const __m128i mag = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00);
        for (; i + 8 <= n; i += 8) {
          const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
          _mm256_storeu_ps(o + i, _mm256_cvtph_ps(h));
          const __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, mag), inf);
          if (!_mm_testz_si128(nan, nan)) [[unlikely]]
            for (int64_t l = i; l < i + 8; ++l) o[l] = convert<T>(x[l]);
        }
      }
#endif
      for (; i < n; ++i) o[i] = convert<T>(x[i]);
    }
  } else if (is == 0) {
    T v = convert<T>(*reinterpret_cast<const F*>(in));
    for (int64_t i = 0; i < n; ++i, out += os) *reinterpret_cast<T*>(out) = v;
  } else {
    for (int64_t i = 0; i < n; ++i, out += os, in += is)
      *reinterpret_cast<T*>(out) = convert<T>(*reinterpret_cast<const F*>(in));
  }
}

template <class F>
void for_all(F&& f) {
  for_each_type(f);
  f.template operator()<Float8_e4m3fn>();
  f.template operator()<Float8_e5m2>();
}

}  // namespace

#if defined(__AVX2__)
// dst (C x R, leading dimension ldd) := src (R x C, leading dimension lds)^T for 2-, 4- and 8-byte
// elements: 16 x 16 (2-byte), 8 x 8 (4-byte) or 4 x 4 (8-byte) tiles transposed in registers, the
// edges element by element. A pure permutation: the bits of every element are kept (NaN payloads included).
void transpose4(const uint32_t* src, int64_t R, int64_t C, int64_t lds, uint32_t* dst, int64_t ldd) {
  int64_t i0 = 0;
  for (; i0 + 8 <= R; i0 += 8) {
    int64_t j0 = 0;
    for (; j0 + 8 <= C; j0 += 8) {
      __m256 r[8], u[8], v[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(src + (i0 + i) * lds + j0));
      for (int i = 0; i < 8; i += 2) u[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), u[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
      for (int i = 0; i < 8; i += 4)
        for (int h = 0; h < 2; ++h) {
          v[i + h] = _mm256_shuffle_ps(u[i + h], u[i + 2 + h], 0x44);
          v[i + 2 + h] = _mm256_shuffle_ps(u[i + h], u[i + 2 + h], 0xEE);
        }
      // v[0..3]: columns 0, 4 / 2, 6 / 1, 5 / 3, 7 of rows 0-3 (low / high lane), v[4..7] of rows 4-7
      const int col[4] = {0, 2, 1, 3};
      for (int q = 0; q < 4; ++q) {
        float* d0 = reinterpret_cast<float*>(dst + (j0 + col[q]) * ldd + i0);
        float* d1 = reinterpret_cast<float*>(dst + (j0 + col[q] + 4) * ldd + i0);
        _mm256_storeu_ps(d0, _mm256_permute2f128_ps(v[q], v[q + 4], 0x20));
        _mm256_storeu_ps(d1, _mm256_permute2f128_ps(v[q], v[q + 4], 0x31));
      }
    }
    for (int64_t i = i0; i < i0 + 8; ++i)
      for (int64_t j = j0; j < C; ++j) dst[j * ldd + i] = src[i * lds + j];
  }
  for (int64_t i = i0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) dst[j * ldd + i] = src[i * lds + j];
}
void transpose8(const uint64_t* src, int64_t R, int64_t C, int64_t lds, uint64_t* dst, int64_t ldd) {
  int64_t i0 = 0;
  for (; i0 + 4 <= R; i0 += 4) {
    int64_t j0 = 0;
    for (; j0 + 4 <= C; j0 += 4) {
      __m256d r[4];
      for (int i = 0; i < 4; ++i) r[i] = _mm256_loadu_pd(reinterpret_cast<const double*>(src + (i0 + i) * lds + j0));
      const __m256d a = _mm256_unpacklo_pd(r[0], r[1]), b = _mm256_unpackhi_pd(r[0], r[1]);
      const __m256d c = _mm256_unpacklo_pd(r[2], r[3]), d = _mm256_unpackhi_pd(r[2], r[3]);
      double* o = reinterpret_cast<double*>(dst + j0 * ldd + i0);
      _mm256_storeu_pd(o, _mm256_permute2f128_pd(a, c, 0x20));
      _mm256_storeu_pd(o + ldd, _mm256_permute2f128_pd(b, d, 0x20));
      _mm256_storeu_pd(o + 2 * ldd, _mm256_permute2f128_pd(a, c, 0x31));
      _mm256_storeu_pd(o + 3 * ldd, _mm256_permute2f128_pd(b, d, 0x31));
    }
    for (int64_t i = i0; i < i0 + 4; ++i)
      for (int64_t j = j0; j < C; ++j) dst[j * ldd + i] = src[i * lds + j];
  }
  for (int64_t i = i0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) dst[j * ldd + i] = src[i * lds + j];
}
// 2-byte elements: 16 x 16 tiles, 16 rows of one ymm each, interleaved by 16, 32 and 64 bits, then
// the 128-bit lanes of rows 0-7 and rows 8-15 paired.
void transpose2(const uint16_t* src, int64_t R, int64_t C, int64_t lds, uint16_t* dst, int64_t ldd) {
  int64_t i0 = 0;
  for (; i0 + 16 <= R; i0 += 16) {
    int64_t j0 = 0;
    for (; j0 + 16 <= C; j0 += 16) {
      __m256i r[16], a[16], b[16], d[16];
      for (int i = 0; i < 16; ++i)
        r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + (i0 + i) * lds + j0));
      // a[2p]: rows 2p, 2p+1 interleaved for elements 0-3 of each lane, a[2p+1]: for elements 4-7
      for (int i = 0; i < 16; i += 2)
        a[i] = _mm256_unpacklo_epi16(r[i], r[i + 1]), a[i + 1] = _mm256_unpackhi_epi16(r[i], r[i + 1]);
      // b[4k + m]: rows 4k..4k+3 of elements 2m, 2m+1 of each lane
      for (int k = 0; k < 16; k += 4)
        for (int h = 0; h < 2; ++h) {
          b[k + 2 * h] = _mm256_unpacklo_epi32(a[k + h], a[k + 2 + h]);
          b[k + 2 * h + 1] = _mm256_unpackhi_epi32(a[k + h], a[k + 2 + h]);
        }
      // d[8g + e]: rows 8g..8g+7 of element e of each lane (e in 0..7)
      for (int g = 0; g < 2; ++g)
        for (int m = 0; m < 4; ++m) {
          d[8 * g + 2 * m] = _mm256_unpacklo_epi64(b[8 * g + m], b[8 * g + 4 + m]);
          d[8 * g + 2 * m + 1] = _mm256_unpackhi_epi64(b[8 * g + m], b[8 * g + 4 + m]);
        }
      for (int e = 0; e < 8; ++e) {  // columns e (the low lanes) and e + 8 (the high ones): rows 0-15
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (j0 + e) * ldd + i0),
                            _mm256_permute2x128_si256(d[e], d[8 + e], 0x20));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + (j0 + e + 8) * ldd + i0),
                            _mm256_permute2x128_si256(d[e], d[8 + e], 0x31));
      }
    }
    for (int64_t i = i0; i < i0 + 16; ++i)
      for (int64_t j = j0; j < C; ++j) dst[j * ldd + i] = src[i * lds + j];
  }
  for (int64_t i = i0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) dst[j * ldd + i] = src[i * lds + j];
}
void transpose_dense(const void* src, int64_t R, int64_t C, int64_t lds, void* dst, int64_t ldd, int64_t esize) {
  if (esize == 2) transpose2(static_cast<const uint16_t*>(src), R, C, lds, static_cast<uint16_t*>(dst), ldd);
  else if (esize == 4) transpose4(static_cast<const uint32_t*>(src), R, C, lds, static_cast<uint32_t*>(dst), ldd);
  else transpose8(static_cast<const uint64_t*>(src), R, C, lds, static_cast<uint64_t*>(dst), ldd);
}
#endif

void fill_copy(KernelTable& t) {
#if defined(__AVX2__)
  t.transpose_dense = &transpose_dense;
#endif
  for_all([&]<class F>() {
    for_all([&]<class T>() {
      t.cast[static_cast<int>(dtype_of<F>())][static_cast<int>(dtype_of<T>())] = &cast_loop<F, T>;
    });
  });
}

}  // namespace kiln::cpu::KILN_ISA
