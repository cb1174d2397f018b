// The AMX panels of kiln's packed GEMM, for CPUs with AMX-BF16 (Intel Sapphire Rapids and later;
// included by kernels_gemm.cpp when it is compiled once more with -mamx-tile -mamx-bf16, as the
// "avx512amx" object; isa.cpp puts its entries into the avx512 table when the CPU has the
// instructions and the kernel grants the process the tile state).
//
// A micro-tile is 32 x 32 float32 in four 16 x 16 tile registers; one tdpbf16ps multiplies a 16 x 32
// bfloat16 tile of A by a 32 x 16 tile of B (bfloat16 pairs) into one of them: 8192 products per
// instruction. Operands are the bfloat16-pair words of gemm_bf16.h (the even k in the high half):
// - B's micro-panel is gemm_bf16.h's own ([pair][32 words]): 16 pairs of it are two B tiles (columns
//   0-15 and 16-31, rows 128 bytes apart);
// - A's micro-panel is [block of 16 pairs][32 rows][16 words] (each row of a block is one tile row),
//   the last block [32 rows][its pairs].
// A block shorter than 16 pairs (the end of a K slice) is copied into zero-padded tiles.
//
// Arithmetic: float32 accumulation of exact bfloat16 products, subnormals flushed, like vdpbf16ps;
// but the order and rounding of the additions inside one tdpbf16ps are the hardware's own (measured:
// neither k-ordered float32 sums nor exactly rounded pair sums), so this path's bits differ in the
// last place from the vdpbf16ps and float32 paths. The matrix-vector and tiny products, which read
// the operands in place, keep vdpbf16ps (docs/decisions.md 45), except float8 matrix-vector products
// over a k-contiguous matrix from K = 64 on, which take the float32 panels' 64 lanes (decision 80).
#pragma once

#include "kiln/backend/cpu/gemm_bf16.h"

#if defined(__AVX512BF16__) && defined(__AMX_BF16__) && defined(__AMX_TILE__)
namespace kiln::cpu::KILN_ISA {
namespace {
namespace amxp {

constexpr int MR = 32, NR = 32;
constexpr int64_t kBlock = 16;  // pairs per tile (32 k)

// Tiles 0-3: C (rows 0-15 x cols 0-15, 0-15 x 16-31, 16-31 x 0-15, 16-31 x 16-31); 4-5: A (rows
// 0-15, 16-31); 6-7: B (cols 0-15, 16-31). Every tile 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
inline const TileConfig kConfig{};

// A block (mc x kc) -> ceil(mc / 32) micro-panels laid out as above, rows past mc zero.
template <class T>
void pack_a(const T* a, int64_t rs, int64_t cs, int64_t mc, int64_t kc, uint32_t* dst) {
  const int64_t kp = ceil_div(kc, 2);
  for (int64_t i0 = 0; i0 < mc; i0 += MR, dst += MR * kp) {
    const int64_t mr = std::min<int64_t>(MR, mc - i0);
    const T* p = a + i0 * rs;
    for (int64_t q0 = 0; q0 < kp; q0 += kBlock) {
      const int64_t bq = std::min(kBlock, kp - q0);  // pairs in this block (16 but at the end)
      uint32_t* d = dst + q0 * MR;
      if (rs == 1 && cs != 1 && mr == MR && bq == kBlock && 2 * (q0 + kBlock) <= kc) {
        // column-major (a transposed operand): each pair's words for 16 rows at a time, from two
        // columns, then a 16 x 16 transpose into the rows' words
        for (int h = 0; h < MR; h += 16) {
          __m512i r[16];
          for (int q = 0; q < 16; ++q) {
            const T* col = p + h + 2 * (q0 + q) * cs;
            r[q] = bf16p::pair16(bf16p::lo16(col), bf16p::lo16(col + cs));
          }
          bf16p::transpose16(r);
          for (int i = 0; i < 16; ++i) _mm512_storeu_si512(d + (h + i) * kBlock, r[i]);
        }
        continue;
      }
      for (int64_t i = 0; i < MR; ++i) {
        uint32_t* row = d + i * bq;
        if (i >= mr) {
          std::fill(row, row + bq, 0u);
        } else if (cs == 1 && bq == kBlock && 2 * (q0 + kBlock) <= kc) {  // row-major: the words in place
          _mm512_storeu_si512(row, bf16p::words_in_place(p + i * rs + 2 * q0));
        } else {
          for (int64_t q = 0; q < bq; ++q) {
            const int64_t k = 2 * (q0 + q);
            row[q] = bf16p::pair(p + i * rs + k * cs, cs, k + 1 < kc);
          }
        }
      }
    }
  }
}

// GCC's tile load and store intrinsics are asm statements that do not say they touch memory: a
// compiler barrier keeps the writes of the operands before the loads, and the reads of the tile after
// the stores.
inline void memory_barrier() { __asm__ volatile("" ::: "memory"); }

// The 32 x 32 C of tiles 0-3 from / to floats rows `ld` apart.
inline void load_c(const float* p, int64_t ld) {
  _tile_loadd(0, p, ld * 4);
  _tile_loadd(1, p + 16, ld * 4);
  _tile_loadd(2, p + 16 * ld, ld * 4);
  _tile_loadd(3, p + 16 * ld + 16, ld * 4);
}
inline void store_c(float* p, int64_t ld) {
  _tile_stored(0, p, ld * 4);
  _tile_stored(1, p + 16, ld * 4);
  _tile_stored(2, p + 16 * ld, ld * 4);
  _tile_stored(3, p + 16 * ld + 16, ld * 4);
}
inline void zero_c() {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}
// C tiles += A tiles 4-5 (rows 0-15, 16-31) x B tiles 6-7 (columns 0-15, 16-31).
inline void multiply() {
  _tile_dpbf16ps(0, 4, 6);
  _tile_dpbf16ps(1, 4, 7);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}

// C tiles += one block of 16 pairs: a's 32 rows (of 16 words) by b's 16 pairs (of 32 words).
inline void block(const uint32_t* a, const uint32_t* b) {
  _tile_loadd(4, a, 64);
  _tile_loadd(5, a + 16 * kBlock, 64);
  _tile_loadd(6, b, NR * 4);
  _tile_loadd(7, b + 16, NR * 4);
  multiply();
}

// out[32][32] (rows `ld` floats apart) = in + A's micro-panel x B's, kp pairs deep; in null: zero.
// The C tiles start from the partial sums of the earlier K slices and go back where they came
// from (no separate add pass over the workspace).
inline void ukernel(int64_t kp, const uint32_t* A, const uint32_t* B, const float* in, int64_t ld_in, float* out,
                    int64_t ld) {
  memory_barrier();
  if (in == nullptr) zero_c();
  else load_c(in, ld_in);
  const int64_t full = kp / kBlock;
  for (int64_t b = 0; b < full; ++b, A += MR * kBlock, B += NR * kBlock) block(A, B);
  if (const int64_t bq = kp - full * kBlock; bq > 0) {  // the last block, zero-padded to 16 pairs
    alignas(64) uint32_t at[MR * kBlock] = {}, bt[kBlock * NR] = {};
    for (int i = 0; i < MR; ++i) std::memcpy(at + i * kBlock, A + i * bq, bq * sizeof(uint32_t));
    std::memcpy(bt, B, bq * NR * sizeof(uint32_t));
    memory_barrier();
    block(at, bt);
  }
  store_c(out, ld);
  memory_barrier();
}

}  // namespace amxp

// bfloat16 pairs multiplied on the AMX tiles; GEMV and tiny products as Bf16Panels (vdpbf16ps; float8
// GEMVs over a k-contiguous matrix: the float32 panels' lanes, decision 80).
struct AmxPanels : Bf16Panels {
  static constexpr int MR = amxp::MR, NR = amxp::NR;
  static constexpr int64_t MC = 128;   // A block (MC x KC / 2 words, 64 KiB) stays in L2
  static constexpr int64_t NC = 4064;  // widest column block (B is packed for all of K: see block_n)
  static_assert(MC % MR == 0 && NC % NR == 0 && NR == bf16p::NR);

  template <class T>
  static void pack_a(const T* a, int64_t rs, int64_t cs, int64_t mc, int64_t kc, int64_t, W* dst) {
    amxp::pack_a(a, rs, cs, mc, kc, dst);
  }
  // (B: Bf16Panels::pack_b, whose micro-panels are [pair][32 words]; K: gemm_elem.h's slices of up
  // to 256, whose two 16 KiB micro-panels fit L1 together)
  static void ukernel(int64_t, int64_t, int64_t kp, const W* A, const W* B, float* tile) {
    amxp::ukernel(kp, A, B, nullptr, 0, tile, NR);
  }
  // The K slices accumulate in the tiles: a slice starts from the workspace's partial sums (none
  // for the first) and stores back into it, or into `tile` on the last (for the rounding into C).
  // So the AMX sum of a slice is added inside the tiles, not to the workspace afterwards (the
  // order differs from the other tables, which this path's bits do anyway: decision 45). The
  // driver keeps each micro-tile's partial sums contiguous (ld = NR). Slices stay 256 deep: a
  // 512-deep slice's two 32 KiB micro-panels no longer fit L1 together (measured: the micro-kernel
  // alone drops from ~2,500 to ~1,700 GFLOP/s).
  static constexpr bool kAccumulatesSlices = true;
  static void ukernel_acc(bool first, bool last, int64_t kp, const W* A, const W* B, float* ws, int64_t ldw,
                          float* tile) {
    amxp::ukernel(kp, A, B, first ? nullptr : ws, ldw, last ? tile : ws, last ? NR : ldw);
  }
  // The tile configuration, loaded around the micro-kernels of one K slice (compute_rows): loading
  // it zeroes the tiles, and another library in the process (oneDNN) may have loaded its own.
  static void tiles_on() { _tile_loadconfig(&amxp::kConfig); }
  static void tiles_off() { _tile_release(); }
};

}  // namespace
}  // namespace kiln::cpu::KILN_ISA
#endif
