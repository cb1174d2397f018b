// Attention's fused row kernels, compiled once per ISA (the "attention" family of the kernel table).
//
// attn_softmax_bf16: the online-softmax step of one score tile on FlexAttention's bfloat16 path, in
// two passes over each row instead of six (scale, max, subtract, exp, sum, round): the scale is folded
// into the exponent, and the probabilities are written once, rounded to bfloat16 for the P V product.
// The row sums add the float32 probabilities (before rounding), as the float32 path does.
#include <cmath>
#include <limits>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/vec.h"

namespace kiln::cpu::KILN_ISA {
namespace {

// n floats (n a multiple of the vector width) -> bfloat16, rounded to nearest even (NaN quiet).
inline void round_bf16(BFloat16* dst, const float* src, int64_t n) {
  int64_t j = 0;
#if defined(__AVX512F__)
  for (; j + 16 <= n; j += 16) {
    __m512i x = _mm512_castps_si512(_mm512_loadu_ps(src + j));
    __m512i bias = _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1)),
                                    _mm512_set1_epi32(0x7fff));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, bias), 16);
    __mmask16 nan = _mm512_cmp_ps_mask(_mm512_castsi512_ps(x), _mm512_castsi512_ps(x), _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), _mm512_cvtepi32_epi16(r));
  }
#endif
  for (; j < n; ++j) dst[j] = BFloat16(src[j]);
}

bool softmax_bf16(float* s, int64_t bq, int64_t bk, float scale, float* mx, float* l, float* alpha, BFloat16* pb) {
  constexpr int W = VecF::N;
  const float ninf = -std::numeric_limits<float>::infinity();
  bool rescale = false;
  alignas(64) float lanes[W];
  for (int64_t i = 0; i < bq; ++i) {
    float* row = s + i * bk;
    VecF vm = VecF::set1(ninf);
    int64_t j = 0;
    for (; j + W <= bk; j += W) vm = VecF::max(vm, VecF::load(row + j));
    vm.store(lanes);
    float m = ninf;
    for (int k = 0; k < W; ++k) m = std::max(m, lanes[k]);
    for (; j < bk; ++j) m = std::max(m, row[j]);
    const float mn = std::max(mx[i], m * scale);
    const float mu = mn == ninf ? 0.0f : mn;
    alpha[i] = std::exp(mx[i] - mu);
    rescale |= alpha[i] != 1.0f;
    mx[i] = mn;
    const VecF vs = VecF::set1(scale), vmu = VecF::set1(mu);
    VecF sum = VecF::set1(0.0f);
    for (j = 0; j + W <= bk; j += W) {
      VecF p = (VecF::load(row + j) * vs - vmu).exp();
      sum = sum + p;
      p.store(row + j);
    }
    sum.store(lanes);
    float t = 0.0f;
    for (int k = 0; k < W; ++k) t += lanes[k];
    for (; j < bk; ++j) {
      row[j] = std::exp(row[j] * scale - mu);
      t += row[j];
    }
    l[i] = l[i] * alpha[i] + t;
    round_bf16(pb + i * bk, row, bk);
  }
  return rescale;
}

}  // namespace

void fill_attention(KernelTable& t) { t.attn_softmax_bf16 = &softmax_bf16; }

}  // namespace kiln::cpu::KILN_ISA
