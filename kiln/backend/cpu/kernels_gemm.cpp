// Packed GEMM for reduced-precision floats (compiled once per ISA): C[b] = A[b] @ B[b] with float32
// accumulation and one rounding of each result to the output dtype (float16, bfloat16, float8;
// float32 too, for tests).
//
// BLIS-style blocking. For each column block of C (ncb columns, B packed for the whole of K: about
// 4 MiB, L3), for each MC-row block (MC x KC of A per K slice: L2), for each KC-deep K slice, the
// micro-kernel keeps an MR x NR tile of C in registers while streaming an A micro-panel from L2
// against a B micro-panel in L1. Packing reads any strides (row- or column-major operands, leading
// dimensions, transposed views, broadcast batches) and converts on the way; it is templated on the
// element type, so a new input type only needs a conversion (vectorised 8-wide loads for bfloat16,
// float16 and both float8 formats).
//
// K slices are summed in a float32 workspace (ws = t0; ws = ws + t1; ...; C = round(ws + t_last)),
// kept to one MC x ncb block so it stays in L2; with one slice the tile is rounded straight into C.
// Every element of C sees the same sequence of float operations wherever it falls in the tile grid
// (edge tiles run the same arithmetic on zero-padded panels), and the matrix-vector (M or N up to
// kGemvRows) and tiny-product paths, which skip packing, replay exactly that sequence too. So neither
// the thread count, nor the split of work (batches, row blocks handed out on demand, column
// ranges; K is never split), nor the path taken can change a bit of the result: a row of C is the
// same whether it is computed alone or inside a larger product. (Except for bfloat16 and float8 on
// CPUs with AMX: the tiles add in their own order, and the matrix-vector and tiny paths keep
// vdpbf16ps, so a row alone can differ in the last bit from the same row of a larger product;
// decision 45. And float16 matrix-vector products over a k-contiguous matrix from K = 64 on: they
// sum in 64 lanes to read the matrix row after row, the same bits on every table and thread count;
// decision 67. bfloat16 likewise on every table but the AVX512-BF16 one, which keeps vdpbf16ps's
// chain there; decision 70. And float8 likewise on every table, the AVX512-BF16 and AMX ones too;
// decisions 77 and 80.)
//
// The panels (how operands are packed and which micro-kernel multiplies them) are a parameter of
// the driver: F32Panels (gemm_f32.h) converts every type to float32 for a float32 FMA kernel
// (AVX2: 6 x 16; base ISA: 4 x 8 in plain C++); Bf16Panels (gemm_bf16.h, built once more for CPUs
// with AVX512-BF16) keeps bfloat16 pairs and multiplies them with vdpbf16ps (14 x 32). Every panel
// kind adds the same products in the same order into the same slices (gemm_elem.h: slicing), so
// bfloat16 gives the same bits on every table, subnormals aside (vdpbf16ps flushes them), except
// the float32 panels' 64-lane matrix-vector products (decision 70).
#include <algorithm>
#include <atomic>
#include <memory>
#include <new>
#include <numeric>
#include <vector>

#include "kiln/backend/cpu/attention_amx.h"
#ifdef __AVX512BF16__
#include "kiln/backend/cpu/attention_softmax.h"
#endif
#include "kiln/backend/cpu/gemm_amx.h"
#include "kiln/backend/cpu/gemm_bf16.h"
#include "kiln/backend/cpu/gemm_f32.h"
#include "kiln/backend/cpu/parallel.h"

namespace kiln::cpu::KILN_ISA {
namespace {

// Below this many flops one thread does the whole product (a fork costs a few microseconds).
constexpr double kParallelFlops = 1 << 21;

// ---- tile epilogue ------------------------------------------------------------------------------

enum class Slice { Only, First, Middle, Last };

// Folds one K slice's tile (mr valid rows, NR wide) into the float32 workspace (whole NR-wide rows:
// ws is padded to whole micro-tiles) and, on the last slice, rounds ws + tile into C (mr x nr valid).
template <int NR, class T>
inline void epilogue(Slice s, float* tile, int64_t mr, int64_t nr, float* ws, int64_t ldw, T* c, int64_t crs,
                     int64_t ccs) {
  if (s == Slice::First) {
    for (int64_t i = 0; i < mr; ++i) std::memcpy(ws + i * ldw, tile + i * NR, NR * sizeof(float));
    return;
  }
  if (s == Slice::Middle) {
    for (int64_t i = 0; i < mr; ++i)
      for (int j = 0; j < NR; ++j) ws[i * ldw + j] = ws[i * ldw + j] + tile[i * NR + j];
    return;
  }
  if (s == Slice::Last)
    for (int64_t i = 0; i < mr; ++i)
      for (int j = 0; j < NR; ++j) tile[i * NR + j] = ws[i * ldw + j] + tile[i * NR + j];
#ifdef KILN_GEMM_AVX2
  if (ccs == 1 && nr == NR) {
    for (int64_t i = 0; i < mr; ++i)
      for (int v = 0; v < NR; v += 8) store8(c + i * crs + v, _mm256_load_ps(tile + i * NR + v));
    return;
  }
#endif
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j) c[i * crs + j * ccs] = from_f32<T>(tile[i * NR + j]);
}

// ---- driver -------------------------------------------------------------------------------------

// One product: A's, B's and C's element types (C's is float32 for the scaled float8 products, whose
// scales are applied afterwards) and the panels.
template <class TA, class TB, class TC, class Pn_>
struct Problem {
  using A = TA;
  using B = TB;
  using C = TC;
  using Pn = Pn_;
  using W = typename Pn::W;
  static constexpr int MR = Pn::MR, NR = Pn::NR, KU = Pn::KU;
  const TA* a;
  const TB* b;
  TC* c;
  GemmArgs g;
  int64_t kcb, nk;  // K slice depth (a multiple of KU) and count: a function of K only
  // Packed depth of kc values of k (KU of them per panel element).
  static int64_t depth(int64_t kc) { return ceil_div(kc, KU); }
};

// Width of a column block: B is packed for the whole of K at once (about 4 MiB of panel words, so it
// stays in L3), capped at NC. A function of K only.
template <class Pn>
inline int64_t block_n(int64_t K) {
  const int64_t words = std::max<int64_t>(ceil_div(K, Pn::KU), 1);
  return std::clamp<int64_t>((int64_t(1) << 20) / words / Pn::NR * Pn::NR, Pn::NR, Pn::NC);
}

// C := 0 (M x N at strides rs, cs): a product with K == 0.
template <class T>
void fill_zero(T* c, int64_t M, int64_t N, int64_t rs, int64_t cs) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) c[i * rs + j * cs] = from_f32<T>(0.0f);
}

// Scratch words for run_block on an m x n part of a product with K (one thread): packed A of one row
// block and K slice, packed B of one column block, the float32 partial sums when K is sliced.
struct BlockScratch {
  int64_t a, b, w;
};
template <class Pn>
BlockScratch block_scratch(int64_t m, int64_t n, int64_t K) {
  const Slicing sl = slicing(K);
  const int64_t rows = round_up(std::min(Pn::MC, m), Pn::MR), ncb = round_up(std::min(block_n<Pn>(K), n), Pn::NR);
  return {round_up(rows * ceil_div(sl.kcb, Pn::KU) + 16, 16), round_up(ncb * ceil_div(K, Pn::KU) + 16, 16),
          sl.nk > 1 ? round_up(rows * ncb, 16) : 0};
}

// Packs micro-panels [q0, q1) of the column block [jc, jc + nc) for every K slice; slice kb's
// panels start at Bp + depth(pc) * ldw (ldw = nc rounded up to NR), panel q at + q * NR * depth(kc).
template <class Pb>
void pack_b_block(const Pb& P, const typename Pb::B* b, int64_t jc, int64_t nc, int64_t q0, int64_t q1,
                  typename Pb::W* Bp) {
  using Pn = typename Pb::Pn;
  const GemmArgs& g = P.g;
  const int64_t ldw = round_up(nc, Pb::NR), j0 = q0 * Pb::NR, j1 = std::min(nc, q1 * Pb::NR);
  for (int64_t kb = 0; kb < P.nk; ++kb) {
    const int64_t pc = kb * P.kcb, kc = std::min(P.kcb, g.K - pc);
    Pn::pack_b(b + pc * g.b_rs + (jc + j0) * g.b_cs, g.b_rs, g.b_cs, kc, j1 - j0,
               Bp + Pb::depth(pc) * ldw + q0 * Pb::NR * Pb::depth(kc));
  }
}

// Rows [ic, ic + mc) x columns [jc, jc + nc) of one batch's C from the packed column block Bp:
// for each K slice, A's rows are packed and every micro-tile runs. ws: mc (rounded up to MR) x ldw
// floats of partial sums; tile: MR x NR floats (edge tiles leave stale lanes in it).
template <class Pb>
void compute_rows(const Pb& P, const typename Pb::A* a, typename Pb::C* c, int64_t ic, int64_t mc, int64_t jc,
                  int64_t nc, const typename Pb::W* Bp, typename Pb::W* Ap, float* ws, float* tile) {
  using Pn = typename Pb::Pn;
  constexpr int MR = Pb::MR, NR = Pb::NR;
  static_assert(Pn::MC % MR == 0);  // (whole micro-tiles of partial sums in ws, below)
  const GemmArgs& g = P.g;
  const int64_t ldw = round_up(nc, NR);
  for (int64_t kb = 0; kb < P.nk; ++kb) {
    const int64_t pc = kb * P.kcb, kc = std::min(P.kcb, g.K - pc), kp = Pb::depth(kc);
    const Slice s = P.nk == 1 ? Slice::Only : kb == 0 ? Slice::First : kb == P.nk - 1 ? Slice::Last : Slice::Middle;
    Pn::pack_a(a + ic * g.a_rs + pc * g.a_cs, g.a_rs, g.a_cs, mc, kc, g.M - ic, Ap);
    const typename Pn::W* Bk = Bp + Pb::depth(pc) * ldw;
    if constexpr (requires { Pn::tiles_on(); }) Pn::tiles_on();  // (AMX: the tile configuration)
    for (int64_t jr = 0; jr < nc; jr += NR) {
      const int64_t nr = std::min<int64_t>(NR, nc - jr);
      for (int64_t ir = 0; ir < mc; ir += MR) {
        const int64_t mr = std::min<int64_t>(MR, mc - ir);
        // the partial sums of one micro-tile are contiguous (MR x NR floats, in the order of the
        // row-major tile grid): rows of a row-major workspace ldw floats apart alias in L1 when ldw
        // is a multiple of 1024 (measured: 9% of a bfloat16 2048^3 product in the sums' misses)
        float* w = ws + ((ir / MR) * (ldw / NR) + jr / NR) * (MR * NR);
        typename Pb::C* ct = c + (ic + ir) * g.c_rs + (jc + jr) * g.c_cs;
        // the micro-kernel's ~kc * MR cycles hide the misses on this tile's partial sums / output
        if constexpr (!requires { Pn::kAccumulatesSlices; })  // (AMX: the tile loads read them)
          if (s == Slice::Middle || s == Slice::Last)
            for (int64_t i = 0; i < mr * NR; i += 16) _mm_prefetch(reinterpret_cast<const char*>(w + i), _MM_HINT_T0);
        if constexpr (!requires { Pn::kAccumulatesSlices; })
          if (s == Slice::Last || s == Slice::Only)
            for (int64_t i = 0; i < mr; ++i) {  // the row's first and last element's lines
              _mm_prefetch(reinterpret_cast<const char*>(ct + i * g.c_rs), _MM_HINT_T0);
              _mm_prefetch(reinterpret_cast<const char*>(ct + i * g.c_rs + (nr - 1) * g.c_cs), _MM_HINT_T0);
            }
        if constexpr (requires { Pn::kAccumulatesSlices; }) {  // AMX: the tiles carry the sums
          // (a tile load or store reads the 16 contiguous lines of w's rows: 1.2x the product's
          // speed against a row-major workspace)
          const bool first = s == Slice::Only || s == Slice::First, last = s == Slice::Only || s == Slice::Last;
          Pn::ukernel_acc(first, last, kp, Ap + ir * kp, Bk + jr * kp, w, NR, tile);
          if (last) epilogue<NR>(Slice::Only, tile, mr, nr, w, NR, ct, g.c_rs, g.c_cs);
        } else {
          Pn::ukernel(mr, nr, kp, Ap + ir * kp, Bk + jr * kp, tile);
          epilogue<NR>(s, tile, mr, nr, w, NR, ct, g.c_rs, g.c_cs);
        }
      }
    }
    if constexpr (requires { Pn::tiles_off(); }) Pn::tiles_off();
  }
}

// C[bi][m0:m1, n0:n1] of one batch on one thread. Loop order: column block (B packed for all of
// K), row block, K slice (A packed), micro-tiles; the float32 partial sums of one MC x ncb block
// stay in L2 between K slices.
template <class Pb>
void run_block(const Pb& P, int64_t bi, int64_t m0, int64_t m1, int64_t n0, int64_t n1, typename Pb::W* Ap,
               typename Pb::W* Bp, float* ws, float* tile) {
  using Pn = typename Pb::Pn;
  const GemmArgs& g = P.g;
  const auto* a = P.a + bi * g.a_bs;
  const auto* b = P.b + bi * g.b_bs;
  auto* c = P.c + bi * g.c_bs;
  const int64_t ncb = block_n<Pn>(g.K);
  for (int64_t jc = n0; jc < n1; jc += ncb) {
    const int64_t nc = std::min(ncb, n1 - jc);
    pack_b_block(P, b, jc, nc, 0, ceil_div(nc, Pn::NR), Bp);
    for (int64_t ic = m0; ic < m1; ic += Pn::MC)
      compute_rows(P, a, c, ic, std::min(Pn::MC, m1 - ic), jc, nc, Bp, Ap, ws, tile);
  }
}

// One GEMV problem: out_r[j * os] = x_r (1 x K, stride xs) @ m (K x n, strides rs, cs) for `rows`
// vectors x_r (xr apart; their outputs orow apart). Set up by gemv_view when M or N is 1 and the
// matrix is contiguous along one of its dimensions, or when M or N is at most kGemvRows and the
// matrix's k is contiguous (decode steps of a few tokens: the matrix is read once for all of them).
constexpr int64_t kGemvRows = 4;
struct GemvView {
  bool ok = false;
  bool use_b;              // x: A's rows, m = B (M small); else x: B's columns, m = A^T (N small)
  int64_t n, xs, rs, cs, os;
  int64_t rows = 1, xr = 0, orow = 0;
};

template <class Pn>
inline GemvView gemv_view(const GemmArgs& g) {
  GemvView v;
  if constexpr (Pn::kGemv) {
    if (g.M == 1 && (g.b_cs == 1 || g.b_rs == 1)) {
      v = {true, true, g.N, g.a_cs, g.b_rs, g.b_cs, g.c_cs};
    } else if (g.N == 1 && (g.a_rs == 1 || g.a_cs == 1)) {
      v = {true, false, g.M, g.b_rs, g.a_cs, g.a_rs, g.c_rs};
    } else if (g.M <= kGemvRows && g.b_rs == 1) {
      v = {true, true, g.N, g.a_cs, 1, g.b_cs, g.c_cs, g.M, g.a_rs, g.c_rs};
    } else if (g.N <= kGemvRows && g.a_cs == 1) {
      v = {true, false, g.M, g.b_rs, 1, g.a_rs, g.c_rs, g.N, g.b_cs, g.c_cs};
    }
    if (v.ok && v.cs != 1 && v.rs != 1) v.ok = false;
    if (v.ok && v.n == 1 && v.rs == 1) v.cs = 0;  // one output, k contiguous: the dot path (the 64 lanes)
  }
  return v;
}

// Scratch words of run_gemv for up to n outputs: the vectors in panel elements (Pn::gemv_x_words
// each), then the outputs' totals per vector, then kAxpyCols floats of slice accumulators (one
// vector, j-contiguous matrix).
inline int64_t gemv_tot_stride(int64_t n) { return round_up(n, 64) + 16; }

// Outputs [j0, j1) of batch bi; xw and tot: the scratch above (64-byte aligned), for j1 - j0
// outputs.
template <class Pb>
void run_gemv(const Pb& P, const GemvView& v, int64_t bi, int64_t j0, int64_t j1, typename Pb::W* xw, float* tot) {
  using Pn = typename Pb::Pn;
  // F32Panels::gemv_x picks the vectors' layout by their type, gemv_dot its reader by the matrix's
  // (the lanes' order for two to four float16 / bfloat16 vectors; a float8 vector's scaled copy for
  // float8 rows): the two must agree.
  static_assert(!std::is_same_v<Pn, F32Panels> ||
                (f32p::kLaneVectors<typename Pb::A> == f32p::kLaneVectors<typename Pb::B> &&
                 f32p::kFloat8<typename Pb::A> == f32p::kFloat8<typename Pb::B>));
  if constexpr (Pn::kGemv) {
    const GemmArgs& g = P.g;
    const int64_t n = j1 - j0, xst = Pn::gemv_x_words(g.K), tst = gemv_tot_stride(n);
    const Slicing sl{g.K, P.kcb, P.nk};
    // x: A's rows and m: B, or x: B's columns and m: A transposed
    auto sums = [&](const auto* x, const auto* m) {
      for (int64_t r = 0; r < v.rows; ++r) Pn::gemv_x(x + r * v.xr, v.xs, g.K, static_cast<int>(v.rows), xw + r * xst);
      if (v.rows == 1 && v.cs == 1 && v.rs != 1) Pn::gemv_axpy(xw, m + j0 * v.cs, v.rs, n, sl, tot, tot + tst);
      else Pn::gemv_dot(xw, xst, static_cast<int>(v.rows), m + j0 * v.cs, v.cs, n, sl, tot, tst);
    };
    if (v.use_b) sums(P.a + bi * g.a_bs, P.b + bi * g.b_bs);
    else sums(P.b + bi * g.b_bs, P.a + bi * g.a_bs);
    using TC = typename Pb::C;
    for (int64_t r = 0; r < v.rows; ++r) {
      TC* out = P.c + bi * g.c_bs + r * v.orow + j0 * v.os;
      const float* t = tot + r * tst;
      int64_t j = 0;
#ifdef KILN_GEMM_AVX2
      if (v.os == 1)
        for (; j + 8 <= n; j += 8) store8(out + j, _mm256_loadu_ps(t + j));
#endif
      for (; j < n; ++j) out[j * v.os] = from_f32<TC>(t[j]);
    }
  } else {
    (void)P, (void)v, (void)bi, (void)j0, (void)j1, (void)xw, (void)tot;
  }
}

// ---- entry point --------------------------------------------------------------------------------

struct AlignedFree {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
using Scratch = std::unique_ptr<float[], AlignedFree>;
// Scratch of n 4-byte words (floats or packed pairs), 64-byte aligned.
inline Scratch scratch_words(int64_t n) {
  return Scratch(static_cast<float*>(::operator new[](static_cast<size_t>(n) * sizeof(float), std::align_val_t{64})));
}
template <class W>
inline W* words(float* p) {
  static_assert(sizeof(W) == sizeof(float));
  return reinterpret_cast<W*>(p);
}
// One thread's part of the scratch: packed A (a_sz words), packed B (b_sz), float32 partial sums
// (w_sz), then the micro-tile (zeroed: edge tiles leave lanes unwritten).
template <class Pn>
struct Slot {
  typename Pn::W *Ap, *Bp;
  float *ws, *tile;
  Slot(float* base, int64_t a_sz, int64_t b_sz, int64_t w_sz)
      : Ap(words<typename Pn::W>(base)), Bp(words<typename Pn::W>(base + a_sz)), ws(base + a_sz + b_sz), tile(ws + w_sz) {
    std::fill(tile, tile + Pn::MR * Pn::NR, 0.0f);
  }
};

// Rows of gemm_shared's row blocks: about 2 or 4 blocks a thread (more: a thread slowed by other
// work on its core takes fewer), in whole micro-rows, the size whose blocks dealt out in turn load
// the threads most evenly (1024 rows on two threads: 8 blocks of 140 rows gave one thread 560 and
// the other 464, 9 of 126 give 520 and 504; 256 rows: 4 blocks of 70, not 5 of 56).
inline int64_t shared_block_rows(int64_t M, int64_t MR, int64_t MC, int64_t nt) {
  const int64_t tiles = ceil_div(M, MR);
  int64_t best = 0, best_load = 0;
  for (int64_t per_thread : {4, 2})
    for (int64_t up = 0; up < 2; ++up) {
      const int64_t per = std::clamp<int64_t>(tiles / (per_thread * nt) + up, 2, MC / MR);  // micro-rows a block
      const int64_t units = ceil_div(tiles, per);
      int64_t load = 0;  // the busiest thread's micro-rows when block u goes to thread u % nt
      for (int64_t t = 0; t < nt; ++t) {
        int64_t l = 0;
        for (int64_t u = t; u < units; u += nt) l += std::min(per, tiles - u * per);
        load = std::max(load, l);
      }
      if (best == 0 || load < best_load) best = per, best_load = load;
    }
  return best * MR;
}

// One or a few large products between threads: each column block of B is packed once, by all of
// them, into a shared buffer; then the threads take blocks of C's rows from a counter, so a thread
// slowed down by other work on its core simply takes fewer (nothing is packed twice, and which
// thread computes a row never changes its bits).
template <class Pb>
void gemm_shared(const Pb& P, int nt) {
  using Pn = typename Pb::Pn;
  using W = typename Pn::W;
  constexpr int MR = Pn::MR, NR = Pn::NR;
  const GemmArgs& g = P.g;
  const int64_t M = g.M, N = g.N, K = g.K;
  const int64_t mcu = shared_block_rows(M, MR, Pn::MC, nt);
  const int64_t units = ceil_div(M, mcu), slots = std::min<int64_t>(nt, units);
  const int64_t ncb_max = block_n<Pn>(K), ncb = round_up(std::min(ncb_max, N), NR);
  const int64_t b_sz = round_up(ncb * ceil_div(K, Pn::KU) + 16, 16);
  const int64_t a_sz = round_up(mcu * ceil_div(P.kcb, Pn::KU) + 16, 16);
  const int64_t w_sz = P.nk > 1 ? round_up(mcu * ncb, 16) : 0;
  const int64_t per_slot = a_sz + w_sz + MR * NR;
  Scratch scratch = scratch_words(b_sz + slots * per_slot);
  W* Bp = words<W>(scratch.get());
  for (int64_t bi = 0; bi < g.batch; ++bi) {
    const auto* a = P.a + bi * g.a_bs;
    const auto* b = P.b + bi * g.b_bs;
    auto* c = P.c + bi * g.c_bs;
    for (int64_t jc = 0; jc < N; jc += ncb_max) {
      const int64_t nc = std::min(ncb_max, N - jc);
      const int64_t panels = ceil_div(nc, NR), groups = ceil_div(panels, 4);
      std::atomic<int64_t> next_group{0}, packed{0}, next{0};
      // One parallel region (each wake-up of a passive pool costs tens of microseconds): the threads
      // pack B's groups of panels from a counter, wait until every claimed group is packed (a thread
      // that finishes its groups waits only on groups being packed by running threads), then take
      // row blocks.
      parallel_for(slots, 1, [&](int64_t s0, int64_t) {
        for (int64_t q; (q = next_group.fetch_add(1, std::memory_order_relaxed)) < groups;) {
          pack_b_block(P, b, jc, nc, q * 4, std::min(panels, q * 4 + 4), Bp);
          packed.fetch_add(1, std::memory_order_release);
        }
        spin_until([&] { return packed.load(std::memory_order_acquire) >= groups; });
        const Slot<Pn> sc(scratch.get() + b_sz + s0 * per_slot, a_sz, 0, w_sz);  // B: the shared Bp
        const bool last = jc + ncb_max >= N;
        for (int64_t u; (u = next.fetch_add(1, std::memory_order_relaxed)) < units;) {
          compute_rows(P, a, c, u * mcu, std::min(mcu, M - u * mcu), jc, nc, Bp, sc.Ap, sc.ws, sc.tile);
          if (last && g.row_epilogue) g.row_epilogue(g.epilogue_ctx, u * mcu, std::min(M, (u + 1) * mcu));
        }
      });
    }
  }
}

// C (TC) = A (TA) @ B (TB).
template <class TA, class TB, class TC, class Pn>
void gemm(const GemmArgs& g) {
  using T = TC;
  constexpr int MR = Pn::MR, NR = Pn::NR;
  const int64_t Bn = g.batch, M = g.M, N = g.N, K = g.K;
  KILN_CHECK(!g.row_epilogue || Bn == 1, Runtime, "gemm", "a row epilogue needs a batch of one product, got ", Bn);
  if (Bn <= 0 || M <= 0 || N <= 0) return;
  T* cp = static_cast<T*>(g.c);
  if (K <= 0) {
    for (int64_t bi = 0; bi < Bn; ++bi) fill_zero(cp + bi * g.c_bs, M, N, g.c_rs, g.c_cs);
    if (g.row_epilogue) g.row_epilogue(g.epilogue_ctx, 0, M);
    return;
  }
  if constexpr (!std::is_same_v<Pn, F32Panels> && f32p::kFloat8<TA>) {
    // float8 matrix-vector products over a k-contiguous matrix take the float32 panels' 64 lanes
    // on the vdpbf16ps / AMX tables too (decision 80): a decode step streams the matrix row after
    // row there (vdpbf16ps's chains read 16 rows side by side, widening each byte pair: 31-44% of
    // copy bandwidth on Zen 4), and float8 gets the same bits on every table.
    if (K >= 64) {
      const GemvView v = gemv_view<F32Panels>(g);
      if (v.ok && !(v.rows == 1 && v.cs == 1 && v.rs != 1)) return gemm<TA, TB, TC, F32Panels>(g);
    }
  }
  Problem<TA, TB, TC, Pn> P{static_cast<const TA*>(g.a), static_cast<const TB*>(g.b), cp, g, 0, 0};
  const Slicing sl = slicing(K);
  P.nk = sl.nk, P.kcb = sl.kcb;
  // (float16, and bfloat16 and float8 on the float32 panels, from K = 64 on: the matrix-vector
  // paths, whose 64 lanes a lone dot product gets too)
  constexpr bool lanes = std::is_same_v<Pn, F32Panels> && f32p::kLanes64<TA>;
  const bool small = P.nk == 1 && M * N * K <= Pn::kSmallMacs && (K < 64 || !lanes);
  const GemvView gv = small ? GemvView{} : gemv_view<Pn>(g);

  // Work split. A few products with enough rows: shared packed B, row blocks on demand. Otherwise
  // whole batches when they divide evenly between the threads (or are many), else each batch's C
  // is cut into S parts along its longer side (the GEMV's outputs), in whole micro-tiles.
  const int nt = in_parallel_region() ? 1 : get_num_threads();
  const bool par = nt > 1 && 2.0 * static_cast<double>(Bn) * M * N * K >= kParallelFlops;
  if (par && !small && !gv.ok && Bn < 4 * nt && M >= 8 * MR * nt) {
    gemm_shared(P, nt);
    return;
  }
  const bool split_n = gv.ok || N >= M;
  int64_t S = 1;
  if (par && !small && Bn < 4 * nt && Bn % nt != 0) S = nt / std::gcd<int64_t>(Bn, nt);
  const int64_t gran = gv.ok ? 64 : split_n ? NR : MR, extent = gv.ok ? gv.n : split_n ? N : M;
  S = std::max<int64_t>(1, std::min(S, ceil_div(extent, gran)));
  const int64_t chunk = round_up(ceil_div(extent, S), gran);
  S = ceil_div(extent, chunk);
  const int64_t jobs = Bn * S;
  const int64_t slots = par ? std::min<int64_t>(nt, jobs) : 1;

  // Scratch per slot (one slot per thread), in 4-byte words. GEMM: packed A, packed B, float32
  // partial sums when K is sliced. GEMV: the vector in panel elements, the outputs' totals.
  int64_t a_sz, b_sz, w_sz;
  if (gv.ok) {
    a_sz = gv.rows * Pn::gemv_x_words(K);
    b_sz = gv.rows * gemv_tot_stride(std::min(chunk, extent)) + Pn::kAxpyCols + 16, w_sz = 0;
  } else {
    const BlockScratch bs = block_scratch<Pn>(split_n ? M : chunk, split_n ? chunk : N, K);
    a_sz = bs.a, b_sz = bs.b, w_sz = bs.w;
  }
  if (small) a_sz = b_sz = w_sz = 0;
  const int64_t per_slot = a_sz + b_sz + w_sz + MR * NR;
  Scratch scratch = scratch_words(slots * per_slot);

  parallel_for(slots, 1, [&](int64_t s0, int64_t s1) {
    float* slot = scratch.get() + s0 * per_slot;
    const Slot<Pn> sc(slot, a_sz, b_sz, w_sz);
    for (int64_t s = s0; s < s1; ++s) {
      for (int64_t j = s * jobs / slots, je = (s + 1) * jobs / slots; j < je; ++j) {
        const int64_t bi = j / S, part = j % S;
        const int64_t lo = part * chunk, hi = std::min(extent, lo + chunk);
        if (small) Pn::small(g, P.a + bi * g.a_bs, P.b + bi * g.b_bs, P.c + bi * g.c_bs);
        else if (gv.ok) run_gemv(P, gv, bi, lo, hi, sc.Ap, slot + a_sz);
        else if (split_n) run_block(P, bi, 0, M, lo, hi, sc.Ap, sc.Bp, sc.ws, sc.tile);
        else {
          run_block(P, bi, lo, hi, 0, N, sc.Ap, sc.Bp, sc.ws, sc.tile);
          if (g.row_epilogue) g.row_epilogue(g.epilogue_ctx, lo, hi);  // (these rows are final)
        }
      }
    }
  });
  if (g.row_epilogue && (small || gv.ok || split_n))  // a job's rows were final only at the end
    parallel_for(M, std::max<int64_t>(1, kGrainSize / N), [&](int64_t i0, int64_t i1) {
      g.row_epilogue(g.epilogue_ctx, i0, i1);
    });
}

// Grouped products: every item's C = A @ B (batch 1), items of any shapes, in one parallel loop over
// (item, column block) work items taken from a counter; each packs its part of B and runs all of its
// rows (run_block), so each element sees the same arithmetic as in a plain product of its item.
template <class T, class Pn, class TC = T>
void gemm_grouped(const GemmArgs* items, int64_t count) {
  using Pb = Problem<T, T, TC, Pn>;
  constexpr int MR = Pn::MR, NR = Pn::NR;
  struct Work { int64_t item, m0, m1, n0, n1; };
  std::vector<Work> work;
  int64_t a_sz = 16, b_sz = 16, w_sz = 0;
  double flops = 0;
  for (int64_t i = 0; i < count; ++i) {
    const GemmArgs& g = items[i];
    if (g.M <= 0 || g.N <= 0) continue;
    if (g.K <= 0) {
      fill_zero(static_cast<TC*>(g.c), g.M, g.N, g.c_rs, g.c_cs);
      continue;
    }
    const int64_t ncb = block_n<Pn>(g.K);
    for (int64_t n0 = 0; n0 < g.N; n0 += ncb) work.push_back({i, 0, g.M, n0, std::min(g.N, n0 + ncb)});
    const BlockScratch bs = block_scratch<Pn>(g.M, g.N, g.K);
    a_sz = std::max(a_sz, bs.a), b_sz = std::max(b_sz, bs.b), w_sz = std::max(w_sz, bs.w);
    flops += 2.0 * g.M * g.N * g.K;
  }
  if (work.empty()) return;
  const int nt = in_parallel_region() ? 1 : get_num_threads();
  if (nt > 1 && static_cast<int64_t>(work.size()) < 4 * nt) {  // few items: cut their rows too (B packed per part)
    std::vector<Work> split;
    const int64_t parts = ceil_div(4 * nt, static_cast<int64_t>(work.size()));
    for (const Work& wk : work) {
      const int64_t step = round_up(ceil_div(wk.m1, parts), MR);
      for (int64_t m0 = 0; m0 < wk.m1; m0 += step) split.push_back({wk.item, m0, std::min(wk.m1, m0 + step), wk.n0, wk.n1});
    }
    work.swap(split);
  }
  const int64_t slots = flops >= kParallelFlops ? std::min<int64_t>(nt, static_cast<int64_t>(work.size())) : 1;
  const int64_t per_slot = a_sz + b_sz + w_sz + MR * NR;
  Scratch scratch = scratch_words(slots * per_slot);
  std::atomic<int64_t> next{0};
  parallel_for(slots, 1, [&](int64_t s0, int64_t) {
    const Slot<Pn> sc(scratch.get() + s0 * per_slot, a_sz, b_sz, w_sz);
    for (int64_t w; (w = next.fetch_add(1, std::memory_order_relaxed)) < static_cast<int64_t>(work.size());) {
      const Work& wk = work[w];
      const GemmArgs& g = items[wk.item];
      const Slicing sl = slicing(g.K);
      Pb P{static_cast<const T*>(g.a), static_cast<const T*>(g.b), static_cast<TC*>(g.c), g, sl.kcb, sl.nk};
      run_block(P, 0, wk.m0, wk.m1, wk.n0, wk.n1, sc.Ap, sc.Bp, sc.ws, sc.tile);
    }
  });
}

// Both float8 formats for A and B, float32 C.
template <class Pn>
void fill_float8(KernelTable& t) {
  t.gemm_f8[0][0] = &gemm<Float8_e4m3fn, Float8_e4m3fn, float, Pn>;
  t.gemm_f8[0][1] = &gemm<Float8_e4m3fn, Float8_e5m2, float, Pn>;
  t.gemm_f8[1][0] = &gemm<Float8_e5m2, Float8_e4m3fn, float, Pn>;
  t.gemm_f8[1][1] = &gemm<Float8_e5m2, Float8_e5m2, float, Pn>;
}

// The entries of the bfloat16-pair panels: bfloat16 and both float8 formats (same dtype in and out,
// float8 pairs into float32), and the grouped bfloat16 products.
template <class Pn>
[[maybe_unused]] void fill_pairs(KernelTable& t) {
  t.gemm_lowp[static_cast<int>(kBFloat16)] = &gemm<BFloat16, BFloat16, BFloat16, Pn>;
  t.gemm_grouped[static_cast<int>(kBFloat16)] = &gemm_grouped<BFloat16, Pn>;
  t.gemm_grouped_f32[static_cast<int>(kBFloat16)] = &gemm_grouped<BFloat16, Pn, float>;
  t.gemm_lowp[static_cast<int>(kFloat8_e4m3fn)] = &gemm<Float8_e4m3fn, Float8_e4m3fn, Float8_e4m3fn, Pn>;
  t.gemm_lowp[static_cast<int>(kFloat8_e5m2)] = &gemm<Float8_e5m2, Float8_e5m2, Float8_e5m2, Pn>;
  t.gemm_bf16_f32 = &gemm<BFloat16, BFloat16, float, Pn>;
  fill_float8<Pn>(t);
}

}  // namespace

#ifdef KILN_GEMM_AMX
// The AMX build (kernels_gemm.cpp compiled once more with -mamx-tile -mamx-bf16): its bfloat16 and
// float8 entries replace the AVX512-BF16 ones when the CPU has AMX-BF16 and the kernel grants the tile
// state (isa.cpp). Matrix-vector and tiny products inside them still run vdpbf16ps (gemm_amx.h), but
// float8 ones over a k-contiguous matrix, which take the float32 panels' lanes (decision 80).
void fill_gemm_amx(KernelTable& t) {
  fill_pairs<AmxPanels>(t);
  t.attn_softmax = &attn_softmax_rows;  // (vcvtneps2bf16)
  t.attn_pack_kt = &attn_amx::pack_kt;
  t.attn_pack_v = &attn_amx::pack_v;
  t.attn_qk = &attn_amx::qk;
  t.attn_pv = &attn_amx::pv;
}
#elif defined(KILN_GEMM_BF16_ONLY)
// The AVX512-BF16 build (kernels_gemm.cpp compiled once more with -mavx512bf16): its table entries
// replace the avx512 table's when the CPU has the instructions (isa.cpp). float8 converts to bfloat16
// exactly, and no product or sum of two float8 values is subnormal in float32, so the float8 entries
// give the float32 kernel's bits too.
void fill_gemm_bf16(KernelTable& t) {
  fill_pairs<Bf16Panels>(t);
  t.attn_softmax = &attn_softmax_rows;  // (vcvtneps2bf16)
}
#else
// float32 B packed once: every column block of block_n(K) columns for all of K, each as run_block
// packs it, one after another; then the products from it run compute_rows as gemm's paths do, so
// they give the same bits.
using F32Problem = Problem<float, float, float, F32Panels>;
int64_t prepacked_block_words(int64_t K) {
  return round_up(block_n<F32Panels>(K), F32Panels::NR) * F32Problem::depth(K);
}
int64_t sgemm_packed_b_words(int64_t K, int64_t N) {
  return ceil_div(N, block_n<F32Panels>(K)) * prepacked_block_words(K);
}
void sgemm_pack_b(int64_t K, int64_t N, const float* b, int64_t b_rs, int64_t b_cs, float* dst) {
  GemmArgs g;
  g.N = N, g.K = K, g.b = b, g.b_rs = b_rs, g.b_cs = b_cs;
  const Slicing sl = slicing(K);
  const F32Problem P{nullptr, b, nullptr, g, sl.kcb, sl.nk};
  const int64_t ncb = block_n<F32Panels>(K), words = prepacked_block_words(K);
  for (int64_t jc = 0, blk = 0; jc < N; jc += ncb, ++blk) {
    const int64_t nc = std::min(ncb, N - jc);
    pack_b_block(P, b, jc, nc, 0, ceil_div(nc, F32Panels::NR), dst + blk * words);
  }
}
void sgemm_prepacked(const GemmArgs& g, const float* bp) {
  constexpr int MR = F32Panels::MR, NR = F32Panels::NR;
  const int64_t M = g.M, N = g.N, K = g.K;
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return fill_zero(static_cast<float*>(g.c), M, N, g.c_rs, g.c_cs);
  const Slicing sl = slicing(K);
  const F32Problem P{static_cast<const float*>(g.a), nullptr, static_cast<float*>(g.c), g, sl.kcb, sl.nk};
  const int nt = in_parallel_region() ? 1 : get_num_threads();
  const bool par = nt > 1 && 2.0 * static_cast<double>(M) * N * K >= kParallelFlops;
  // work items: (column block, row block of mcu rows), about four row blocks a thread
  const int64_t mcu = std::clamp<int64_t>(round_up(ceil_div(M, 4 * (par ? nt : 1)), MR), MR, F32Panels::MC);
  const int64_t ncb = block_n<F32Panels>(K), blocks = ceil_div(N, ncb), units = ceil_div(M, mcu);
  const int64_t items = blocks * units, slots = par ? std::min<int64_t>(nt, items) : 1;
  const int64_t ldw = round_up(std::min(ncb, N), NR);
  const int64_t a_sz = round_up(mcu * F32Problem::depth(sl.kcb) + 16, 16), w_sz = sl.nk > 1 ? round_up(mcu * ldw, 16) : 0;
  const int64_t per_slot = a_sz + w_sz + MR * NR;
  Scratch scratch = scratch_words(slots * per_slot);
  std::atomic<int64_t> next{0};
  parallel_for(slots, 1, [&](int64_t s0, int64_t) {
    const Slot<F32Panels> sc(scratch.get() + s0 * per_slot, a_sz, 0, w_sz);
    for (int64_t w; (w = next.fetch_add(1, std::memory_order_relaxed)) < items;) {
      const int64_t blk = w / units, u = w % units, jc = blk * ncb;
      compute_rows(P, P.a, P.c, u * mcu, std::min(mcu, M - u * mcu), jc, std::min(ncb, N - jc),
                   bp + blk * prepacked_block_words(K), sc.Ap, sc.ws, sc.tile);
    }
  });
}

template <class T>
constexpr auto same = &gemm<T, T, T, F32Panels>;
void fill_gemm(KernelTable& t) {
  t.sgemm_packed_b_words = &sgemm_packed_b_words;
  t.sgemm_pack_b = &sgemm_pack_b;
  t.sgemm_prepacked = &sgemm_prepacked;
  t.gemm_lowp[static_cast<int>(kFloat16)] = same<Half>;
  t.gemm_lowp[static_cast<int>(kBFloat16)] = same<BFloat16>;
  t.gemm_lowp[static_cast<int>(kFloat8_e4m3fn)] = same<Float8_e4m3fn>;
  t.gemm_lowp[static_cast<int>(kFloat8_e5m2)] = same<Float8_e5m2>;
  t.gemm_lowp[static_cast<int>(kFloat32)] = same<float>;  // bmm's in a team and small ones (else OpenBLAS); tests
  fill_float8<F32Panels>(t);
  t.gemm_bf16_f32 = &gemm<BFloat16, BFloat16, float, F32Panels>;
  t.gemm_f16_f32 = &gemm<Half, Half, float, F32Panels>;
  t.gemm_grouped[static_cast<int>(kFloat32)] = &gemm_grouped<float, F32Panels>;
  t.gemm_grouped[static_cast<int>(kFloat16)] = &gemm_grouped<Half, F32Panels>;
  t.gemm_grouped[static_cast<int>(kBFloat16)] = &gemm_grouped<BFloat16, F32Panels>;
  t.gemm_grouped_f32[static_cast<int>(kFloat16)] = &gemm_grouped<Half, F32Panels, float>;
  t.gemm_grouped_f32[static_cast<int>(kBFloat16)] = &gemm_grouped<BFloat16, F32Panels, float>;
}
#endif

}  // namespace kiln::cpu::KILN_ISA
