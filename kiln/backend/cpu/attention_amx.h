// FlexAttention's bfloat16 forward products on AMX tiles (included by kernels_gemm.cpp's AMX build;
// its table entries are the `attn_*` ones of kernels.h). The generic bfloat16 GEMM packs K and V for
// every query block that visits them; here they are packed once per call, into the tiles' own layout,
// and Q and P are read by the tile loads where they lie.
//
// Words hold two consecutive k in memory order (the even one in the low half), in A and B alike
// (tdpbf16ps adds both halves' products; which half comes first is the hardware's business).
// - K^T's B tiles: per 16 keys and 32 dims, the 16 x 16 word transpose of the keys' rows: row q holds,
//   for each key, its word q (dims 2q, 2q + 1).
// - V's B tiles: V's rows interleaved in pairs: word (q, e) = V[2q][e] | V[2q + 1][e] << 16, so a
//   tile is 16 pair rows of 16 dims, rows Ev words apart.
// Every size is a multiple of 32 (the caller falls back to the generic products otherwise).
#pragma once

#include "kiln/backend/cpu/gemm_amx.h"

#if defined(__AVX512BF16__) && defined(__AMX_BF16__) && defined(__AMX_TILE__)
namespace kiln::cpu::KILN_ISA {
namespace {
namespace attn_amx {

// K (S x E, row-major) -> [S / 16][E / 32][16 rows q][16 keys] words.
void pack_kt(const BFloat16* k, int64_t S, int64_t E, uint32_t* dst) {
  const int64_t wpr = E / 2;  // words per key row
  for (int64_t n0 = 0; n0 < S; n0 += 16)
    for (int64_t q0 = 0; q0 < wpr; q0 += 16, dst += 256) {
      __m512i r[16];
      for (int j = 0; j < 16; ++j) r[j] = _mm512_loadu_si512(k + (n0 + j) * E + 2 * q0);
      bf16p::transpose16(r);  // r[q] lane j: key n0 + j's word q0 + q
      for (int q = 0; q < 16; ++q) _mm512_storeu_si512(dst + q * 16, r[q]);
    }
}

// V (S x Ev, row-major) -> [S / 2][Ev] words.
void pack_v(const BFloat16* v, int64_t S, int64_t Ev, uint32_t* dst) {
  for (int64_t q = 0; 2 * q < S; ++q) {
    const uint16_t* a = reinterpret_cast<const uint16_t*>(v + 2 * q * Ev);
    const uint16_t* b = a + Ev;
    uint32_t* d = dst + q * Ev;
    for (int64_t e = 0; e < Ev; ++e) d[e] = uint32_t(a[e]) | uint32_t(b[e]) << 16;
  }
}

// s (bq x bk, rows bk apart) = Q (bq x E, rows E apart) K^T for keys [j0, j0 + bk) of the packed K^T.
void qk(const BFloat16* q, int64_t bq, int64_t E, const uint32_t* kt, int64_t j0, int64_t bk, float* s) {
  _tile_loadconfig(&amxp::kConfig);
  const int64_t nqb = E / 32;
  for (int64_t i0 = 0; i0 < bq; i0 += 32)
    for (int64_t n0 = 0; n0 < bk; n0 += 32) {
      amxp::zero_c();
      const uint32_t* b0 = kt + ((j0 + n0) / 16) * nqb * 256;
      const uint32_t* b1 = b0 + nqb * 256;
      for (int64_t qb = 0; qb < nqb; ++qb) {
        _tile_loadd(4, q + i0 * E + 32 * qb, E * 2);
        _tile_loadd(5, q + (i0 + 16) * E + 32 * qb, E * 2);
        _tile_loadd(6, b0 + qb * 256, 64);
        _tile_loadd(7, b1 + qb * 256, 64);
        amxp::multiply();
      }
      amxp::store_c(s + i0 * bk + n0, bk);
    }
  amxp::memory_barrier();
  _tile_release();
}

// acc (bq x Ev, rows Ev apart) += P (bq x bk bfloat16, rows bk apart) V for keys [j0, j0 + bk) of the
// packed V.
void pv(const BFloat16* p, int64_t bq, int64_t bk, const uint32_t* vp, int64_t j0, int64_t Ev, float* acc) {
  amxp::memory_barrier();
  _tile_loadconfig(&amxp::kConfig);
  for (int64_t i0 = 0; i0 < bq; i0 += 32)
    for (int64_t e0 = 0; e0 < Ev; e0 += 32) {
      float* c = acc + i0 * Ev + e0;
      amxp::load_c(c, Ev);
      for (int64_t k0 = 0; k0 < bk; k0 += 32) {
        _tile_loadd(4, p + i0 * bk + k0, bk * 2);
        _tile_loadd(5, p + (i0 + 16) * bk + k0, bk * 2);
        const uint32_t* b = vp + ((j0 + k0) / 2) * Ev + e0;
        _tile_loadd(6, b, Ev * 4);
        _tile_loadd(7, b + 16, Ev * 4);
        amxp::multiply();
      }
      amxp::store_c(c, Ev);
    }
  amxp::memory_barrier();
  _tile_release();
}

}  // namespace attn_amx
}  // namespace
}  // namespace kiln::cpu::KILN_ISA
#endif
