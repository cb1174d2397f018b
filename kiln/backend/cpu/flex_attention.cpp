// CPU kernels of FlexAttention, the table ops `_flex_attention` and `_flex_attention_backward`
// (entries, metas and derivative in kiln/attention/flex.cpp): tiled online-softmax attention over the
// blocks a BlockMask lists, score_mod / mask_mod run as traced programs on whole tiles
// (kiln/attention/flex_program.h). Scores exist only in per-thread (q_block x kv_block) tiles.
//
// Forward: one task per (batch, head, query block), kv blocks visited as listed (partial ones
// masked by mask_mod, full ones not), adjacent listed blocks merged into tiles up to 512 keys wide.
// Backward, FlashAttention-2 style from the saved logsumexp, in one pass over the kv blocks per (kv
// batch, kv head[, split of the kv blocks]): each block's key and value gradients summed in
// place over the GQA group and the broadcast batches, the query gradient accumulated per split
// (splits only when there are few heads for the threads; their partial sums are added in split
// order), the captured tensors' gradients per worker (added in worker order). The backward reads the
// transposed block lists (flex_blocks.h), so absent blocks are never touched in either direction.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#include "kiln/attention/flex_detail.h"
#include "kiln/attention/flex_program.h"
#include "kiln/autograd/autograd.h"
#include "kiln/backend/cpu/attention_common.h"
#include "kiln/backend/cpu/blas.h"
#include "kiln/backend/cpu/flex_blocks.h"
#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

using cpu::gemm;
using cpu::pick_workers;
using cpu::run_tasks;
using flex::Program;
using namespace cpu::flex_blocks;

// ---- the call --------------------------------------------------------------------------------

template <class T>
struct Call {
  int64_t B, Hq, Hkv, G, Bk, L, S, E, Ev, QB, KB, nqb, nkb;
  int64_t fw = 1, bw = 1;  // blocks merged per tile: forward kv runs, backward query runs
  int64_t ft_rows = 1, ft_cols = 1, bt_rows = 1, bt_cols = 1;  // the largest tiles (scratch sizes)
  T scale;
  const T *q = nullptr, *k = nullptr, *v = nullptr;  // contiguous, compute dtype (not on the bfloat16 path)
  // The bfloat16 path (bfloat16 inputs on a CPU with AMX): the products run on bfloat16 operands into
  // float32 tiles, as torch's flash attention does there; the softmax stays float32, and the tiles that
  // feed a product (P, dS) are rounded to bfloat16 first.
  const BFloat16 *qh = nullptr, *kh = nullptr, *vh = nullptr;
  bool lowp() const { return qh != nullptr; }
  // ... and on AMX with every size a multiple of 32, K^T and V packed once for the forward's tiles
  const uint32_t *ktp = nullptr, *vp = nullptr;
  // float32 with AVX-512 or AVX2 and S, Ev multiples of 32: K^T packed for the forward's tiles, each 32-key
  // panel by the first task that needs it (in cache for its tile; panels no tile visits never are),
  // kt_state[kv head * S / 32 + panel] 0 (not yet), 1 (being packed), 2 (packed). The backward packs
  // each kv block's K^T and V^T when it starts on it.
  float* ktf = nullptr;
  std::atomic<uint8_t>* kt_state = nullptr;
  Lists kv, ql;
  std::shared_ptr<const Program> sp, mp;  // null: none
  // A mask_mod that reads neither b nor h, on a block mask: its partial blocks' masks evaluated once per
  // call (tq x tk bytes each, rows tk apart; tile_of[qb * nkb + kb] the index, -1: none), not once per
  // head and tile. Within a budget; without it the program runs per tile.
  int64_t tq = 0, tk = 0;
  std::vector<int32_t> tile_of;
  std::shared_ptr<std::vector<uint8_t>> mask_tiles;
  TensorList sbuf, mbuf;                  // their captured tensors
  Tensor qidx, kvidx;                     // arange(L), arange(S) int64
  cpu::RowFns<T> f;

  const T* Q(int64_t b, int64_t h, int64_t i0) const { return q + ((b * Hq + h) * L + i0) * E; }
  int64_t kvbh(int64_t b, int64_t h) const { return (Bk == 1 ? 0 : b) * Hkv + h / G; }
  const T* K(int64_t b, int64_t h, int64_t j0) const { return k + (kvbh(b, h) * S + j0) * E; }
  const T* V(int64_t b, int64_t h, int64_t j0) const { return v + (kvbh(b, h) * S + j0) * Ev; }
  const BFloat16* Qh(int64_t b, int64_t h, int64_t i0) const { return qh + ((b * Hq + h) * L + i0) * E; }
  const BFloat16* Kh(int64_t b, int64_t h, int64_t j0) const { return kh + (kvbh(b, h) * S + j0) * E; }
  const BFloat16* Vh(int64_t b, int64_t h, int64_t j0) const { return vh + (kvbh(b, h) * S + j0) * Ev; }
  const uint32_t* Ktp(int64_t b, int64_t h) const { return ktp + kvbh(b, h) * S * E / 2; }
  // K^T of (b, h) with the panels of keys [j0, j0 + bk) packed.
  const float* Ktf(int64_t b, int64_t h, int64_t j0, int64_t bk) const {
    const int64_t x = kvbh(b, h);
    for (int64_t p = j0 / 32; p < (j0 + bk) / 32; ++p) {
      std::atomic<uint8_t>& st = kt_state[x * (S / 32) + p];
      if (st.load(std::memory_order_acquire) == 2) continue;
      uint8_t free_ = 0;
      if (st.compare_exchange_strong(free_, 1, std::memory_order_acq_rel)) {
        cpu::cpu_kernels().attn_pack_kt_f32(k + (x * S + p * 32) * E, 32, E, ktf + (x * S + p * 32) * E);
        st.store(2, std::memory_order_release);
      } else {
        while (st.load(std::memory_order_acquire) != 2) std::this_thread::yield();  // another task packs it
      }
    }
    return ktf + x * S * E;
  }
  const uint32_t* Vp(int64_t b, int64_t h) const { return vp + kvbh(b, h) * S * Ev / 2; }
};

// ---- the bfloat16 path's products ---------------------------------------------------------------

// Whether bfloat16 inputs take the bfloat16 path: AMX tiles make its products several times faster
// than float32's; without them (vdpbf16ps, or converting panels) the float32 products are as fast.
bool lowp_path(Dtype d) { return d == kBFloat16 && cpu::amx() && cpu::cpu_kernels().gemm_bf16_f32; }

// C (M x N float32, rows ldc apart) := A @ B, A (M x K) and B (K x N) bfloat16 by element strides.
void mm(int64_t M, int64_t N, int64_t K, const BFloat16* a, int64_t ars, int64_t acs, const BFloat16* b, int64_t brs,
        int64_t bcs, float* c, int64_t ldc) {
  cpu::GemmArgs g;
  g.M = M, g.N = N, g.K = K;
  g.a = a, g.a_rs = ars, g.a_cs = acs;
  g.b = b, g.b_rs = brs, g.b_cs = bcs;
  g.c = c, g.c_rs = ldc, g.c_cs = 1;
  cpu::cpu_kernels().gemm_bf16_f32(g);
}
// dst (n bfloat16) := src rounded to nearest even.
void to_bf16(BFloat16* dst, const float* src, int64_t n) {
  cpu::cpu_kernels().cast[static_cast<int>(kFloat32)][static_cast<int>(kBFloat16)](
      reinterpret_cast<char*>(dst), reinterpret_cast<const char*>(src), n, sizeof(BFloat16), sizeof(float));
}
// dst (rows x cols, rows ldd apart) += alpha * src (rows x cols, contiguous).
void add_scaled(float* dst, int64_t ldd, const float* src, int64_t rows, int64_t cols, float alpha) {
  for (int64_t i = 0; i < rows; ++i) {
    float* d = dst + i * ldd;
    const float* r = src + i * cols;
    for (int64_t j = 0; j < cols; ++j) d[j] += alpha * r[j];
  }
}
void scale_in_place(float* p, int64_t n, float alpha) {
  for (int64_t i = 0; i < n; ++i) p[i] *= alpha;
}

template <class T>
Tensor tile_tensor(T* p, int64_t bq, int64_t bk) {
  return from_blob(p, {bq, bk}, {bk, 1}, dtype_of<T>());
}

// The program's argument slots for the tile (b, h, rows [i0, i0 + bq), columns [j0, j0 + bk)).
template <class T>
void set_args(const Call<T>& c, const Program& p, std::vector<Tensor>& slots, const Tensor& score, int64_t b,
              int64_t h, int64_t i0, int64_t bq, int64_t j0, int64_t bk, const TensorList& buffers) {
  slots.assign(p.n_slots, Tensor());
  int a = 0;
  if (p.is_score_mod()) slots[a++] = score;
  slots[a++] = scalar_tensor(Scalar(b), kInt64);
  slots[a++] = scalar_tensor(Scalar(h), kInt64);
  slots[a++] = make_view(c.qidx, {bq, 1}, {1, 1}, i0);
  slots[a++] = make_view(c.kvidx, {1, bk}, {bk, 1}, j0);
  for (int i = 0; i < p.n_buffers; ++i) slots[p.n_args + i] = buffers[i];
}

// s (bq, bk) := score_mod(s); with `pre` given, the unmodified scores are kept there and the slots
// (for the reverse pass) in `slots`.
template <class T>
void apply_score_mod(const Call<T>& c, T* s, T* pre, std::vector<Tensor>& slots, int64_t b, int64_t h, int64_t i0,
                     int64_t bq, int64_t j0, int64_t bk) {
  const Program& p = *c.sp;
  T* in = s;
  if (pre) {
    std::copy(s, s + bq * bk, pre);
    in = pre;
  }
  set_args(c, p, slots, tile_tensor(in, bq, bk), b, h, i0, bq, j0, bk, c.sbuf);
  run(p, slots);
  const Tensor& r = slots[p.result];
  KILN_CHECK(r.dim() <= 2, Runtime, flex::kName, "score_mod returned a tensor of shape ", r.sizes(),
             " for a score tile of shape (", bq, ", ", bk, "); it must be elementwise");
  cpu::cast_copy(tile_tensor(s, bq, bk), r);
}

// m (bq x bk bytes, rows ld apart) := mask_mod on the tile (b, h, rows i0.., columns j0..).
template <class T>
void eval_mask(const Call<T>& c, uint8_t* m, int64_t ld, int64_t b, int64_t h, int64_t i0, int64_t bq, int64_t j0,
               int64_t bk) {
  const Program& p = *c.mp;
  std::vector<Tensor> slots;
  set_args(c, p, slots, Tensor(), b, h, i0, bq, j0, bk, c.mbuf);
  run(p, slots);
  const Tensor& r = slots[p.result];
  KILN_CHECK(r.dim() <= 2, Runtime, flex::kName, "mask_mod returned a tensor of shape ", r.sizes(),
             " for a tile of shape (", bq, ", ", bk, "); it must be elementwise");
  cpu::cast_copy(from_blob(m, {bq, bk}, {ld, 1}, kBool), r);
}

// s (bq x bk, rows ld apart) := -inf where m (rows ldm apart) is 0.
template <class T>
void mask_rows(T* s, int64_t ld, const uint8_t* m, int64_t ldm, int64_t bq, int64_t bk) {
  if constexpr (std::is_same_v<T, float>) {
    if (cpu::cpu_kernels().attn_mask) return cpu::cpu_kernels().attn_mask(s, ld, m, ldm, bq, bk);
  }
  const T ninf = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < bq; ++i) {  // branch-free, so it vectorises
    T* row = s + i * ld;
    const uint8_t* mr = m + i * ldm;
    for (int64_t j = 0; j < bk; ++j) row[j] = mr[j] ? row[j] : ninf;
  }
}

// s (bq x bk, rows ld apart) := -inf where mask_mod is false; the tile starts on a block's corner and
// covers partial blocks only. From the call's evaluated masks where it has them.
template <class T>
void apply_mask_mod(const Call<T>& c, T* s, int64_t ld, uint8_t* mbuf, int64_t b, int64_t h, int64_t i0, int64_t bq,
                    int64_t j0, int64_t bk) {
  if (c.mask_tiles) {
    const uint8_t* tiles = c.mask_tiles->data();
    for (int64_t i = i0; i < i0 + bq; i = (i / c.QB + 1) * c.QB)
      for (int64_t j = j0; j < j0 + bk; j = (j / c.KB + 1) * c.KB) {
        const int64_t qb = i / c.QB, kb = j / c.KB;
        const int64_t rows = std::min((qb + 1) * c.QB, i0 + bq) - i, cols = std::min((kb + 1) * c.KB, j0 + bk) - j;
        const int32_t t = c.tile_of[qb * c.nkb + kb];
        T* dst = s + (i - i0) * ld + (j - j0);
        if (t >= 0) {
          mask_rows(dst, ld, tiles + t * c.tq * c.tk + (i - qb * c.QB) * c.tk + (j - kb * c.KB), c.tk, rows, cols);
        } else {  // not listed partial anywhere (cannot happen for a listed block): evaluate it
          eval_mask(c, mbuf, cols, b, h, i, rows, j, cols);
          mask_rows(dst, ld, mbuf, cols, rows, cols);
        }
      }
    return;
  }
  eval_mask(c, mbuf, bk, b, h, i0, bq, j0, bk);
  mask_rows(s, ld, mbuf, bk, bq, bk);
}

// The call's evaluated masks (see Call::mask_tiles), when the mask_mod allows them and they fit.
template <class T>
void cache_masks(Call<T>& c, const Blocks& bl) {
  constexpr double kBudget = 64.0 * (1 << 20);  // bytes
  if (!c.mp || bl.dense || c.mp->reads(0) || c.mp->reads(1) || c.L == 0 || c.S == 0) return;
  const int64_t nqb = c.nqb, nkb = c.nkb;
  c.tq = std::min(c.QB, c.L), c.tk = std::min(c.KB, c.S);
  std::vector<int32_t> tile_of(nqb * nkb, -1);
  std::vector<int64_t> blocks;  // qb * nkb + kb of each tile
  for (int64_t bh = 0; bh < bl.Bm * bl.Hm; ++bh)
    for (int64_t x = 0; x < nqb * nkb; ++x)
      if (bl.part[bh * nqb * nkb + x] && tile_of[x] < 0) {
        if (double(blocks.size() + 1) * c.tq * c.tk > kBudget) return;
        tile_of[x] = static_cast<int32_t>(blocks.size());
        blocks.push_back(x);
      }
  auto tiles = std::make_shared<std::vector<uint8_t>>(blocks.size() * c.tq * c.tk);
  const int64_t n = static_cast<int64_t>(blocks.size());
  run_tasks(n, pick_workers(n, double(n) * c.tq * c.tk * 8), /*fixed=*/false, [&](int64_t, int64_t t) {
    NoGradGuard no_grad;
    const int64_t qb = blocks[t] / nkb, kb = blocks[t] % nkb;
    const int64_t i0 = qb * c.QB, j0 = kb * c.KB;
    eval_mask(c, tiles->data() + t * c.tq * c.tk, c.tk, 0, 0, i0, std::min(c.QB, c.L - i0), j0,
              std::min(c.KB, c.S - j0));
  });
  c.tile_of = std::move(tile_of);
  c.mask_tiles = std::move(tiles);
}

// ---- forward ---------------------------------------------------------------------------------

template <class T>
void fwd_task(const Call<T>& c, int64_t b, int64_t h, int64_t qb, T* ws, T* out, T* lse, T* mxo) {
  const int64_t i0 = qb * c.QB, bq = std::min(c.QB, c.L - i0), Ev = c.Ev, KB = c.KB;
  const T ninf = -std::numeric_limits<T>::infinity();
  T* s = ws;
  const int64_t R = c.ft_rows;
  T* acc = s + R * c.ft_cols;
  T* mx = acc + R * Ev;
  T* l = mx + R;
  T* alpha = l + R;
  T* tmp = alpha + R;
  uint8_t* mb = reinterpret_cast<uint8_t*>(tmp + R);
  // the bfloat16 path: P rounded, and the product P V before it is added (after the mask bytes)
  T* pv = c.lowp() ? tmp + R + (R * c.ft_cols + sizeof(T) - 1) / sizeof(T) : nullptr;
  BFloat16* pb = c.lowp() ? reinterpret_cast<BFloat16*>(pv + R * Ev) : nullptr;
  std::fill(mx, mx + bq, ninf);
  std::fill(l, l + bq, T(0));
  std::fill(acc, acc + bq * Ev, T(0));
  const T* Q = c.lowp() ? nullptr : c.Q(b, h, i0);
  // float32 without a score_mod: scale, softmax step (and the bfloat16 path's rounding) in one kernel
  // (a mask only writes -inf, which the scale keeps)
  const bool fused = std::is_same_v<T, float> && !c.sp && c.scale > T(0);
  // the bfloat16 path: acc += P V, P rounded in pb
  auto lowp_pv = [&](int64_t j0, int64_t bk, bool tiles) {
    if constexpr (std::is_same_v<T, float>) {
      if (tiles) {
        cpu::cpu_kernels().attn_pv(pb, bq, bk, c.Vp(b, h), j0, Ev, acc);
      } else {
        mm(bq, Ev, bk, pb, bk, 1, c.Vh(b, h, j0), Ev, 1, pv, Ev);
        add_scaled(acc, Ev, pv, bq, Ev, 1.0f);
      }
    }
  };
  std::vector<Tensor> slots;
  each_run(c.kv, b, h, qb, c.fw, [&](int64_t col, int64_t nb, uint64_t partial) {
    const int64_t j0 = col * KB;
    if (j0 >= c.S) return;
    const int64_t bk = std::min(nb * KB, c.S - j0);
    const bool tiles = c.ktp && bq % 32 == 0 && bk % 32 == 0 && j0 % 32 == 0;  // the packed AMX products
    const bool ftiles = c.ktf && bq % 8 == 0 && bk % 32 == 0 && j0 % 32 == 0;  // the packed float32 ones
    if constexpr (std::is_same_v<T, float>) {
      if (tiles) {
        cpu::cpu_kernels().attn_qk(c.Qh(b, h, i0), bq, c.E, c.Ktp(b, h), j0, bk, s);
        if (!fused) scale_in_place(s, bq * bk, c.scale);
      } else if (c.lowp()) {  // s = Q K^T (K's rows are the columns of B), then scaled (by the softmax when fused)
        mm(bq, bk, c.E, c.Qh(b, h, i0), c.E, 1, c.Kh(b, h, j0), 1, c.E, s, bk);
        if (!fused) scale_in_place(s, bq * bk, c.scale);
      }
    }
    if constexpr (std::is_same_v<T, float>) {
      if (ftiles) {
        cpu::cpu_kernels().attn_qk_f32(Q, bq, c.E, c.Ktf(b, h, j0, bk), j0, bk, s);
        if (!fused) scale_in_place(s, bq * bk, c.scale);
      }
    }
    if (!c.lowp() && !ftiles)
      gemm(false, true, bq, bk, c.E, fused ? T(1) : c.scale, Q, c.E, c.K(b, h, j0), c.E, T(0), s, bk);
    if (c.sp) apply_score_mod(c, s, static_cast<T*>(nullptr), slots, b, h, i0, bq, j0, bk);
    if (c.mp)
      for_partial(partial, nb, [&](int64_t f, int64_t n) {
        const int64_t jf = j0 + f * KB;
        if (jf < c.S) apply_mask_mod(c, s + f * KB, bk, mb, b, h, i0, bq, jf, std::min(n * KB, c.S - jf));
      });
    if constexpr (std::is_same_v<T, float>) {
      if (fused) {  // the softmax step with the scale folded in (P rounded once on the bfloat16 path)
        if (cpu::cpu_kernels().attn_softmax(s, bq, bk, c.scale, mx, l, alpha, c.lowp() ? pb : nullptr))
          cpu::rescale_rows(acc, alpha, bq, Ev);
        if (!c.lowp()) {
          if (ftiles) cpu::cpu_kernels().attn_mm_f32(false, bq, Ev, bk, 1.0f, s, bk, c.V(b, h, j0), Ev, acc, Ev);
          else gemm(false, false, bq, Ev, bk, T(1), s, bk, c.V(b, h, j0), Ev, T(1), acc, Ev);
          return;
        }
        lowp_pv(j0, bk, tiles);
        return;
      }
    }
    if (cpu::online_softmax_step(c.f, s, bq, bk, mx, l, alpha, tmp)) cpu::rescale_rows(acc, alpha, bq, Ev);
    if constexpr (std::is_same_v<T, float>) {
      if (c.lowp()) {
        to_bf16(pb, s, bq * bk);
        lowp_pv(j0, bk, tiles);
        return;
      }
      if (ftiles) {
        cpu::cpu_kernels().attn_mm_f32(false, bq, Ev, bk, 1.0f, s, bk, c.V(b, h, j0), Ev, acc, Ev);
        return;
      }
    }
    gemm(false, false, bq, Ev, bk, T(1), s, bk, c.V(b, h, j0), Ev, T(1), acc, Ev);
  });
  const int64_t row0 = (b * c.Hq + h) * c.L + i0;
  T* O = out + row0 * Ev;
  for (int64_t i = 0; i < bq; ++i) {
    const bool empty = l[i] == T(0);
    const T inv = empty ? T(0) : T(1) / l[i];  // fully masked rows: zeros, as torch
    for (int64_t e = 0; e < Ev; ++e) O[i * Ev + e] = acc[i * Ev + e] * inv;
    lse[row0 + i] = empty ? ninf : mx[i] + std::log(l[i]);
    mxo[row0 + i] = empty ? ninf : mx[i];
  }
}

// Contiguous copies in the compute dtype (x itself when it already is one).
Tensor operand(const Tensor& x, Dtype ct) { return x.dtype() == ct && x.is_contiguous() ? x : cpu::converted(x, ct); }

template <class T>
Call<T> make_call(const OpDef& op, const TensorList& in, size_t q0, size_t blocks0, size_t buf0, const Attrs& a,
                  TensorList& keep) {
  const Tensor &q = in[q0], &k = in[q0 + 1], &v = in[q0 + 2];
  auto g = flex::geometry(op.name, q, k, v, attr<bool>(a, flex::kGqa));
  Call<T> c;
  c.B = g.B, c.Hq = g.Hq, c.Hkv = g.Hkv, c.G = g.Hkv > 0 ? g.Hq / g.Hkv : 1, c.Bk = g.Bk;
  c.L = g.L, c.S = g.S, c.E = g.E, c.Ev = g.Ev;
  c.QB = attr<int64_t>(a, flex::kQBlock), c.KB = attr<int64_t>(a, flex::kKvBlock);
  KILN_CHECK(c.QB > 0 && c.KB > 0, Value, op.name, "block sizes must be positive, got (", c.QB, ", ", c.KB, ")");
  // the default mask (one block of 2^30) and any block past the lengths: tiles of at most 128 rows
  const bool dense = !in[blocks0].defined();
  if (dense) c.QB = std::min<int64_t>(c.QB, 128), c.KB = std::min<int64_t>(c.KB, 128);
  c.nqb = (c.L + c.QB - 1) / c.QB, c.nkb = (c.S + c.KB - 1) / c.KB;
  c.fw = std::max<int64_t>(1, 512 / c.KB), c.bw = std::max<int64_t>(1, 256 / c.QB);
  // a block larger than the sequence (the default mask's 2^30) never makes a larger tile
  c.ft_rows = std::max<int64_t>(1, std::min(c.QB, c.L)), c.ft_cols = std::max<int64_t>(1, std::min(c.KB * c.fw, c.S));
  c.bt_rows = std::max<int64_t>(1, std::min(c.QB * c.bw, c.L)), c.bt_cols = std::max<int64_t>(1, std::min(c.KB, c.S));
  c.scale = static_cast<T>(attr<double>(a, flex::kScale));
  const Dtype ct = dtype_of<T>();
  if constexpr (std::is_same_v<T, float>) {
    if (lowp_path(q.dtype()) && k.dtype() == kBFloat16 && v.dtype() == kBFloat16) {
      keep.push_back(operand(q, kBFloat16)), keep.push_back(operand(k, kBFloat16)), keep.push_back(operand(v, kBFloat16));
      c.qh = keep[keep.size() - 3].template data_ptr<BFloat16>();
      c.kh = keep[keep.size() - 2].template data_ptr<BFloat16>();
      c.vh = keep[keep.size() - 1].template data_ptr<BFloat16>();
    }
  }
  if (!c.lowp()) {
    keep.push_back(operand(q, ct)), keep.push_back(operand(k, ct)), keep.push_back(operand(v, ct));
    c.q = keep[keep.size() - 3].template data_ptr<T>();
    c.k = keep[keep.size() - 2].template data_ptr<T>();
    c.v = keep[keep.size() - 1].template data_ptr<T>();
  }
  Blocks bl = read_blocks(op.name, in[blocks0], in[blocks0 + 1], in[blocks0 + 2], in[blocks0 + 3], c.B, c.Hq, c.nqb,
                          c.nkb);
  std::tie(c.kv, c.ql) = both_lists(bl, c.nqb, c.nkb);
  const int64_t sid = attr<int64_t>(a, flex::kScoreMod), mid = attr<int64_t>(a, flex::kMaskMod);
  const int64_t nsb = attr<int64_t>(a, flex::kNScoreBuffers);
  if (sid >= 0) {
    c.sp = flex::program(sid);
    if (c.sp->identity()) c.sp = nullptr;
  }
  if (mid >= 0) c.mp = flex::program(mid);
  const int64_t nbuf = static_cast<int64_t>(in.size() - buf0);
  KILN_CHECK(nsb >= 0 && nsb <= nbuf, Runtime, op.name, "n_score_buffers ", nsb, " but ", nbuf, " buffers given");
  for (int64_t i = 0; i < nbuf; ++i) (i < nsb ? c.sbuf : c.mbuf).push_back(in[buf0 + i]);
  KILN_CHECK(!c.sp || c.sp->n_buffers == static_cast<int>(c.sbuf.size()), Runtime, op.name, "score_mod captures ",
             c.sp ? c.sp->n_buffers : 0, " tensors but ", c.sbuf.size(), " were given");
  KILN_CHECK(!c.mp || c.mp->n_buffers == static_cast<int>(c.mbuf.size()), Runtime, op.name, "mask_mod captures ",
             c.mp ? c.mp->n_buffers : 0, " tensors but ", c.mbuf.size(), " were given");
  c.qidx = arange(Scalar(int64_t(0)), Scalar(std::max<int64_t>(c.L, 1)), Scalar(int64_t(1)), kInt64);
  c.kvidx = arange(Scalar(int64_t(0)), Scalar(std::max<int64_t>(c.S, 1)), Scalar(int64_t(1)), kInt64);
  cache_masks(c, bl);
  return c;
}

template <class T>
void forward_t(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  TensorList keep;
  Call<T> c = make_call<T>(op, in, 0, 3, 3 + flex::kBlockInputs, a, keep);
  const Dtype ct = dtype_of<T>();
  const cpu::KernelTable& kt = cpu::cpu_kernels();
  Tensor ktp, vp;
  if (c.lowp() && kt.attn_qk && c.E % 32 == 0 && c.Ev % 32 == 0 && c.S % 32 == 0 && c.S > 0) {
    const int64_t heads = c.Bk * c.Hkv, S = c.S, E = c.E, Ev = c.Ev;
    ktp = make_tensor({heads * S * E / 2}, kInt32), vp = make_tensor({heads * S * Ev / 2}, kInt32);
    auto* kp = reinterpret_cast<uint32_t*>(ktp.data_ptr<int32_t>());
    auto* vq = reinterpret_cast<uint32_t*>(vp.data_ptr<int32_t>());
    cpu::parallel_for(heads, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t x = lo; x < hi; ++x) {
        kt.attn_pack_kt(c.kh + x * S * E, S, E, kp + x * S * E / 2);
        kt.attn_pack_v(c.vh + x * S * Ev, S, Ev, vq + x * S * Ev / 2);
      }
    });
    c.ktp = kp, c.vp = vq;
  }
  Tensor ktf;
  std::unique_ptr<std::atomic<uint8_t>[]> kt_state;
  if constexpr (std::is_same_v<T, float>) {
    if (!c.lowp() && kt.attn_qk_f32 && c.S % 32 == 0 && c.Ev % 32 == 0 && c.S > 0 && c.E > 0) {
      const int64_t panels = c.Bk * c.Hkv * c.S / 32;
      ktf = make_tensor({c.Bk * c.Hkv * c.S * c.E}, kFloat32);
      kt_state.reset(new std::atomic<uint8_t>[panels]);
      for (int64_t i = 0; i < panels; ++i) kt_state[i].store(0, std::memory_order_relaxed);
      c.ktf = ktf.data_ptr<float>(), c.kt_state = kt_state.get();
    }
  }
  Tensor o = out[0].dtype() == ct ? out[0] : make_tensor(out[0].sizes(), ct);
  T* op_ = o.data_ptr<T>();
  T* lse = out[1].data_ptr<T>();
  T* mxo = out[2].data_ptr<T>();
  const int64_t ntask = c.B * c.Hq * c.nqb;
  const int workers = pick_workers(ntask, double(c.B) * c.Hq * c.L * c.S * (c.E + c.Ev));
  // per worker: scores, accumulator, 4 row vectors, the mask tile's bytes; the bfloat16 path's P V
  // product and rounded P
  const int64_t R = c.ft_rows, W = c.ft_cols;
  const int64_t per = R * W + R * c.Ev + 4 * R + (R * W + sizeof(T) - 1) / sizeof(T) +
                      (c.lowp() ? R * c.Ev + (R * W + 1) / 2 : 0);
  Tensor ws = make_tensor({std::max(workers, 1) * per}, ct);
  T* wp = ws.data_ptr<T>();
  run_tasks(ntask, workers, /*fixed=*/true, [&](int64_t w, int64_t t) {
    NoGradGuard no_grad;  // the programs' ops record nothing
    cpu::FlushSubnormals ftz(std::is_same_v<T, float>);
    const int64_t qb = c.nqb - 1 - t / (c.B * c.Hq), bh = t % (c.B * c.Hq);  // longest rows first
    fwd_task(c, bh / c.Hq, bh % c.Hq, qb, wp + w * per, op_, lse, mxo);
  });
  if (!o.is_same(out[0])) cpu::cast_copy(out[0], o);
}

void fwd_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  if (in[0].dtype() == kFloat64)
    forward_t<double>(op, in, a, out);
  else
    forward_t<float>(op, in, a, out);
}

// ---- backward --------------------------------------------------------------------------------

template <class T>
struct BwdCall : Call<T> {
  const T *dO, *lse, *D;
  const BFloat16* dOh = nullptr;  // the bfloat16 path's dO
  std::vector<bool> active_kv, active_q;  // the score program's active slots, with / without buffer grads
  std::vector<bool> want;                 // score buffers whose gradient is asked for
  bool buffer_grads = false;
};

// One tile of the backward at (b, h, query rows i0.., key rows j0..): P (the probabilities) and dS
// (the gradient of the pre-mod scores) into the scratch; buffer gradients into `gbuf` when given.
// ktb, vtb (not null): the kv block's K^T and V^T packed for the float32 tile products.
template <class T>
void bwd_tile(const BwdCall<T>& c, int64_t b, int64_t h, int64_t i0, int64_t bq, int64_t j0, int64_t bk,
              uint64_t partial, const float* ktb, const float* vtb, T* P, T* dP, T* pre, uint8_t* mb,
              std::vector<Tensor>* gbuf) {
  const bool ftiles = ktb != nullptr;
  const T ninf = -std::numeric_limits<T>::infinity();
  std::vector<Tensor> slots;
  const int64_t row0 = (b * c.Hq + h) * c.L + i0;
  T pscale = T(1);  // the scale still to apply to P's scores (with the logsumexp, when there is no score_mod)
  if constexpr (std::is_same_v<T, float>) {
    if (c.lowp()) {
      mm(bq, bk, c.E, c.Qh(b, h, i0), c.E, 1, c.Kh(b, h, j0), 1, c.E, P, bk);
      scale_in_place(P, bq * bk, c.scale);
    } else if (ftiles) {
      cpu::cpu_kernels().attn_qk_f32(c.Q(b, h, i0), bq, c.E, ktb, 0, bk, P);
      // the scale folded into the exponent only where it keeps a masked -inf at -inf (and no
      // score_mod needs the scaled scores first)
      if (c.sp || !(c.scale > 0)) scale_in_place(P, bq * bk, c.scale);
      else pscale = c.scale;
    }
  }
  if (!c.lowp() && !ftiles)
    gemm(false, true, bq, bk, c.E, c.scale, c.Q(b, h, i0), c.E, c.K(b, h, j0), c.E, T(0), P, bk);
  if (c.sp) apply_score_mod(c, P, pre, slots, b, h, i0, bq, j0, bk);
  if (c.mp)  // the partial query blocks of the run: row stretches of the tile
    for_partial(partial, (bq + c.QB - 1) / c.QB, [&](int64_t f, int64_t n) {
      const int64_t r0 = f * c.QB;
      if (r0 < bq) apply_mask_mod(c, P + r0 * bk, bk, mb, b, h, i0 + r0, std::min(n * c.QB, bq - r0), j0, bk);
    });
  const T* lse = c.lse + row0;
  const T* D = c.D + row0;
  const cpu::KernelTable& kt = cpu::cpu_kernels();
  bool fused = false;  // float32 with AVX-512 or AVX2: the row steps in one pass each
  if constexpr (std::is_same_v<T, float>) fused = kt.attn_bwd_p != nullptr;
  if (fused) {
    if constexpr (std::is_same_v<T, float>) kt.attn_bwd_p(P, bq, bk, pscale, lse);
  } else {
    for (int64_t i = 0; i < bq; ++i) {
      T* row = P + i * bk;
      if (lse[i] == ninf) {
        std::fill(row, row + bk, ninf);
      } else if (pscale != T(1)) {
        for (int64_t j = 0; j < bk; ++j) row[j] = row[j] * pscale - lse[i];
      } else {
        for (int64_t j = 0; j < bk; ++j) row[j] -= lse[i];
      }
    }
    c.f.exp_inplace(P, bq * bk);
  }
  // dP = dO V^T; dS = P * (dP - D)
  if constexpr (std::is_same_v<T, float>) {
    if (c.lowp()) mm(bq, bk, c.Ev, c.dOh + row0 * c.Ev, c.Ev, 1, c.Vh(b, h, j0), 1, c.Ev, dP, bk);
    else if (ftiles) cpu::cpu_kernels().attn_qk_f32(c.dO + row0 * c.Ev, bq, c.Ev, vtb, 0, bk, dP);
  }
  if (!c.lowp() && !ftiles)
    gemm(false, true, bq, bk, c.Ev, T(1), c.dO + row0 * c.Ev, c.Ev, c.V(b, h, j0), c.Ev, T(0), dP, bk);
  if (fused) {
    if constexpr (std::is_same_v<T, float>) kt.attn_bwd_ds(P, dP, bq, bk, D);
  } else {
    for (int64_t i = 0; i < bq; ++i) {
      const T* pr = P + i * bk;
      T* dp = dP + i * bk;
      for (int64_t j = 0; j < bk; ++j) dp[j] = pr[j] * (dp[j] - D[i]);
    }
  }
  if (!c.sp) return;
  Tensor gs;
  std::vector<Tensor> gb;
  flex::backprop(*c.sp, slots, gbuf ? c.active_kv : c.active_q, tile_tensor(dP, bq, bk), gs, gb);
  if (gs.defined())
    cpu::cast_copy(tile_tensor(dP, bq, bk), gs);
  else
    std::fill(dP, dP + bq * bk, T(0));
  if (gbuf)
    for (size_t i = 0; i < gb.size(); ++i)
      if (gb[i].defined() && c.want[i]) {
        Tensor& acc = (*gbuf)[i];
        acc = acc.defined() ? add(acc, gb[i]) : gb[i].to(gb[i].dtype(), /*copy=*/true);
      }
}

template <class T>
void backward_t(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  // in: {grad_out, grad_lse?, q, k, v, out, lse, 4 block tensors, buffers...}
  TensorList keep;
  BwdCall<T> c;
  static_cast<Call<T>&>(c) = make_call<T>(op, in, 2, 7, 7 + flex::kBlockInputs, a, keep);
  const Dtype ct = dtype_of<T>();
  const int64_t B = c.B, Hq = c.Hq, L = c.L, S = c.S, E = c.E, Ev = c.Ev, QB = c.QB, KB = c.KB;
  KILN_CHECK(in[0].defined() && in[0].sizes() == Shape({B, Hq, L, Ev}) && in[5].sizes() == Shape({B, Hq, L, Ev}) &&
                 in[6].sizes() == Shape({B, Hq, L}),
             Runtime, op.name, "grad_out, out and lse must match the forward's outputs");
  Tensor dO = operand(in[0], ct), O = operand(in[5], ct), lse = operand(in[6], ct);
  // float32 with AVX-512 or AVX2, E and Ev multiples of 32: the tile products, each kv block's K^T and V^T
  // by its worker (in cache for its tiles) when its first tile comes
  bool ftiles = false;
  if constexpr (std::is_same_v<T, float>)
    ftiles = !c.lowp() && cpu::cpu_kernels().attn_mm_f32 && E % 32 == 0 && Ev % 32 == 0;
  c.dO = dO.data_ptr<T>(), c.lse = lse.data_ptr<T>();
  Tensor dOh = c.lowp() ? operand(in[0], kBFloat16) : Tensor();
  if (c.lowp()) c.dOh = dOh.data_ptr<BFloat16>();
  // D = rowsum(dO * O) - grad_lse, rows [lo, hi) of (B * Hq * L)
  Tensor Dt = make_tensor({B * Hq * L}, ct);
  Tensor gl = in[1].defined() ? operand(in[1], ct) : Tensor();
  T* Dp = Dt.data_ptr<T>();
  auto d_rows = [Dp, op_ = O.data_ptr<T>(), dop = c.dO, glp = gl.defined() ? gl.data_ptr<T>() : nullptr, Ev](
                    int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      T s = 0;
      for (int64_t e = 0; e < Ev; ++e) s += dop[r * Ev + e] * op_[r * Ev + e];
      Dp[r] = glp ? s - (std::isinf(glp[r]) || std::isnan(glp[r]) ? T(0) : glp[r]) : s;
    }
  };
  c.D = Dp;
  const Shape& want = attr<Shape>(a, flex::kBufferGrads);
  c.want.assign(c.sbuf.size(), false);
  for (size_t i = 0; i < c.sbuf.size() && i < want.size(); ++i) c.want[i] = want[i] != 0, c.buffer_grads |= c.want[i];
  if (c.sp) {
    c.active_kv = c.sp->active(c.want);
    c.active_q = c.sp->active(std::vector<bool>(c.sbuf.size(), false));
  }
  // the gradients computed in place in the outputs where those are contiguous in the compute dtype
  auto grad_buffer = [&](const Tensor& o, Shape shape) {
    return o.dtype() == ct && o.is_contiguous() && o.sizes() == shape ? o : make_tensor(shape, ct);
  };
  Tensor dq = grad_buffer(out[0], {B, Hq, L, E}), dk = grad_buffer(out[1], {c.Bk, c.Hkv, S, E}),
         dv = grad_buffer(out[2], {c.Bk, c.Hkv, S, Ev});
  T *dqp = dq.data_ptr<T>(), *dkp = dk.data_ptr<T>(), *dvp = dv.data_ptr<T>();
  // one pass over the kv blocks: dk, dv of each block summed in place over the GQA group and the
  // broadcast batches; dq accumulated across the blocks of a split (split 0 into dq, the others into
  // partial sums added in split order); the captured tensors' gradients per worker.
  const int64_t R = c.bt_rows, W = c.bt_cols;  // the largest tile: merged query blocks x one kv block
  // per worker: P, dP, the pre-mod scores, the mask bytes; the bfloat16 path's rounded P and dS and
  // one product before it is added; the float32 tiles' packed K^T and V^T of one kv block
  const int64_t mm_tmp = std::max(R, W) * std::max(E, Ev);
  const int64_t per = 3 * R * W + (R * W + sizeof(T) - 1) / sizeof(T) + (c.lowp() ? R * W + mm_tmp : 0) +
                      (ftiles ? W * (E + Ev) : 0);
  const double madds = double(B) * Hq * L * S * (E + Ev);
  const int64_t heads = c.Bk * c.Hkv, nkb = c.nkb;
  const int nt = get_num_threads();
  int64_t nsplit = 1;  // few (kv batch, kv head) pairs for the threads: split the kv blocks too
  if (nt > 1 && madds >= (1 << 20) && heads % nt != 0 && heads < 4 * nt && nkb > 1)
    nsplit = std::min<int64_t>(nkb, (4 * nt + heads - 1) / heads);
  const int64_t kps = nkb == 0 ? 1 : (nkb + nsplit - 1) / nsplit;
  nsplit = nkb == 0 ? 1 : (nkb + kps - 1) / kps;
  // dq's query blocks zeroed by the task that first adds to them (in cache, not one pass over dq
  // first; those no tile touches at the end), and their D rows computed then when the kv blocks are
  // not split (else all up front). Each (b, h) belongs to one task of split 0.
  if (nsplit > 1)
    cpu::parallel_for(B * Hq * L, std::max<int64_t>(1, cpu::kGrainSize / std::max<int64_t>(Ev, 1)), d_rows);
  std::vector<uint8_t> dq_zeroed(B * Hq * c.nqb, 0);
  auto zero_dq = [&](int64_t b, int64_t h, int64_t qb, bool with_d) {
    uint8_t& z = dq_zeroed[(b * Hq + h) * c.nqb + qb];
    if (z) return;
    const int64_t r0 = (b * Hq + h) * L + qb * QB, rows = std::min(QB, L - qb * QB);
    std::fill(dqp + r0 * E, dqp + (r0 + rows) * E, T(0));
    if (with_d && nsplit == 1) d_rows(r0, r0 + rows);
    z = 1;
  };
  const int64_t dq_n = B * Hq * L * E;
  Tensor parts = nsplit > 1 ? zeros({nsplit - 1, dq_n}, ct) : Tensor();
  const int64_t ntask = heads * nsplit;
  const int workers = pick_workers(ntask, madds);
  Tensor ws = make_tensor({std::max(workers, 1) * per}, ct);
  T* wp = ws.data_ptr<T>();
  std::vector<std::vector<Tensor>> gbufs(std::max(workers, 1), std::vector<Tensor>(c.sbuf.size()));
  run_tasks(ntask, workers, /*fixed=*/true, [&](int64_t w, int64_t t) {  // fixed: per-worker buffer sums
    NoGradGuard no_grad;  // the programs' ops and derivatives record nothing
    cpu::FlushSubnormals ftz(std::is_same_v<T, float>);
    const int64_t split = t / heads, hk = t % c.Hkv, bk_ = (t % heads) / c.Hkv;
    T* P = wp + w * per;
    T* dP = P + R * W;
    T* pre = dP + R * W;
    uint8_t* mb = reinterpret_cast<uint8_t*>(pre + R * W);
    T* prod = c.lowp() ? pre + R * W + (R * W + sizeof(T) - 1) / sizeof(T) : nullptr;  // the bfloat16 path's scratch
    BFloat16* pb = c.lowp() ? reinterpret_cast<BFloat16*>(prod + mm_tmp) : nullptr;
    BFloat16* db = c.lowp() ? pb + R * W : nullptr;
    float* ktb = nullptr;  // the float32 tiles' packed K^T and V^T of the kv block
    if constexpr (std::is_same_v<T, float>) ktb = ftiles ? pre + R * W + (R * W + sizeof(T) - 1) / sizeof(T) : nullptr;
    float* vtb = ktb ? ktb + W * E : nullptr;
    T* dqs = split == 0 ? dqp : parts.data_ptr<T>() + (split - 1) * dq_n;
    const int64_t b_lo = c.Bk == 1 ? 0 : bk_, b_hi = c.Bk == 1 ? B : bk_ + 1;
    for (int64_t kb = split * kps; kb < std::min(nkb, (split + 1) * kps); ++kb) {
      const int64_t j0 = kb * KB, bk = std::min(KB, S - j0);
      T* dkt = dkp + ((bk_ * c.Hkv + hk) * S + j0) * E;
      T* dvt = dvp + ((bk_ * c.Hkv + hk) * S + j0) * Ev;
      std::fill(dkt, dkt + bk * E, T(0));
      std::fill(dvt, dvt + bk * Ev, T(0));
      const bool block_tiles = ktb && bk % 32 == 0;
      bool packed = false;
      for (int64_t b = b_lo; b < b_hi; ++b)
        for (int64_t h = hk * c.G; h < (hk + 1) * c.G; ++h)
          each_run(c.ql, b, h, kb, c.bw, [&](int64_t qb, int64_t nq, uint64_t partial) {
            const int64_t i0 = qb * QB;
            if (i0 >= L) return;
            const int64_t bq = std::min(nq * QB, L - i0);
            if (split == 0)
              for (int64_t x = qb; x < std::min(qb + nq, c.nqb); ++x) zero_dq(b, h, x, true);
            const bool tiles = block_tiles && bq % 8 == 0;
            if constexpr (std::is_same_v<T, float>) {
              if (tiles && !packed) {
                const int64_t kv0 = (bk_ * c.Hkv + hk) * S + j0;
                cpu::cpu_kernels().attn_pack_kt_f32(c.k + kv0 * E, bk, E, ktb);
                cpu::cpu_kernels().attn_pack_kt_f32(c.v + kv0 * Ev, bk, Ev, vtb);
                packed = true;
              }
            }
            bwd_tile(c, b, h, i0, bq, j0, bk, partial, tiles ? ktb : nullptr, tiles ? vtb : nullptr, P, dP, pre, mb,
                     c.buffer_grads ? &gbufs[w] : nullptr);
            const int64_t row0 = (b * Hq + h) * L + i0;
            if constexpr (std::is_same_v<T, float>) {
              if (tiles) {  // dv += P^T dO; dk += scale dS^T Q; dq += scale dS K
                const cpu::KernelTable& kt = cpu::cpu_kernels();
                kt.attn_mm_f32(true, bk, Ev, bq, 1.0f, P, bk, c.dO + row0 * Ev, Ev, dvt, Ev);
                kt.attn_mm_f32(true, bk, E, bq, c.scale, dP, bk, c.Q(b, h, i0), E, dkt, E);
                kt.attn_mm_f32(false, bq, E, bk, c.scale, dP, bk, c.K(b, h, j0), E, dqs + row0 * E, E);
                return;
              }
              if (c.lowp()) {  // dv += P^T dO; dk += scale dS^T Q; dq += scale dS K
                to_bf16(pb, P, bq * bk);
                to_bf16(db, dP, bq * bk);
                mm(bk, Ev, bq, pb, 1, bk, c.dOh + row0 * Ev, Ev, 1, prod, Ev);
                add_scaled(dvt, Ev, prod, bk, Ev, 1.0f);
                mm(bk, E, bq, db, 1, bk, c.Qh(b, h, i0), E, 1, prod, E);
                add_scaled(dkt, E, prod, bk, E, c.scale);
                mm(bq, E, bk, db, bk, 1, c.Kh(b, h, j0), E, 1, prod, E);
                add_scaled(dqs + row0 * E, E, prod, bq, E, c.scale);
                return;
              }
            }
            gemm(true, false, bk, Ev, bq, T(1), P, bk, c.dO + row0 * Ev, Ev, T(1), dvt, Ev);
            gemm(true, false, bk, E, bq, c.scale, dP, bk, c.Q(b, h, i0), E, T(1), dkt, E);
            gemm(false, false, bq, E, bk, c.scale, dP, bk, c.K(b, h, j0), E, T(1), dqs + row0 * E, E);
          });
    }
  });
  cpu::parallel_for(B * Hq * c.nqb, 64, [&](int64_t lo, int64_t hi) {
    for (int64_t x = lo; x < hi; ++x) zero_dq(x / (Hq * c.nqb), (x / c.nqb) % Hq, x % c.nqb, false);
  });
  if (nsplit > 1) {  // dq += the other splits' partial sums, in split order
    const T* pp = parts.data_ptr<T>();
    cpu::parallel_for(dq_n, cpu::kGrainSize, [&](int64_t lo, int64_t hi) {
      for (int64_t p = 0; p + 1 < nsplit; ++p)
        for (int64_t i = lo; i < hi; ++i) dqp[i] += pp[p * dq_n + i];
    });
  }
  // the captured tensors' gradients: the workers' sums, in worker order
  for (size_t i = 0; i < c.sbuf.size(); ++i) {
    if (!c.want[i]) continue;
    Tensor g;
    for (auto& gb : gbufs)
      if (gb[i].defined()) g = g.defined() ? add(g, gb[i]) : gb[i];
    if (!g.defined()) g = zeros_like(c.sbuf[i]);
    cpu::cast_copy(out[3 + i], g);
  }
  if (!dq.is_same(out[0])) cpu::cast_copy(out[0], dq);
  if (!dk.is_same(out[1])) cpu::cast_copy(out[1], dk);
  if (!dv.is_same(out[2])) cpu::cast_copy(out[2], dv);
}

void bwd_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  if (in[2].dtype() == kFloat64)
    backward_t<double>(op, in, a, out);
  else
    backward_t<float>(op, in, a, out);
}

KernelRegistrar k_flex{"_flex_attention", DeviceType::CPU, fwd_kernel};
KernelRegistrar k_flex_backward{"_flex_attention_backward", DeviceType::CPU, bwd_kernel};

}  // namespace
}  // namespace kiln
