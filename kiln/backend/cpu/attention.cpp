// CPU kernels of scaled dot-product attention, the table ops `_sdpa_flash` and
// `_sdpa_flash_backward` (their entries, schemas, metas, derivative and front ends are in
// kiln/attention/sdpa.cpp; what both read in kiln/attention/sdpa_detail.h), registered by op name:
// the forward with a streaming softmax and the FlashAttention-2 backward. Scores live only in
// per-thread (block_q x block_k) tiles; GEMMs on tiles go to OpenBLAS, exp / row max / row sum to
// kiln's ISA-dispatched kernel table. No kernel here calls an op: conversions and contiguous or
// broadcast copies are the cast loop into scratch buffers (cpu::converted, cpu::cast_copy), the
// sums over GQA groups and broadcast dims the table's reduce loops, chosen as sum's kernel does.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kiln/attention/sdpa_detail.h"
#include "kiln/backend/cpu/attention_common.h"
#include "kiln/backend/cpu/blas.h"
#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/core/generator.h"

namespace kiln {
namespace {

using namespace sdpa;
using cpu::gemm;
using cpu::pick_workers;
using cpu::run_tasks;

// Tile sizes (rows of q x rows of k), tuned on an AVX2 machine with E = 64: larger tiles amortise
// OpenBLAS's per-call packing, smaller ones keep the score tile in L2 and waste less of the causal
// diagonal. Per-thread scratch: forward kFwdQ * (kFwdK + Ev), backward 3 * kBwdQ * kBwdK values.
constexpr int64_t kFwdQ = 128, kFwdK = 256;
constexpr int64_t kBwdQ = 128, kBwdK = 128;

// ---- small helpers -----------------------------------------------------------------------------

// Element offsets of x's trailing-`trail`-dim slices for every flattened index of `batch`: x's
// leading dims align right with batch, size-1 dims broadcast, and the last batch dim (the head dim)
// is divided by `group` (GQA).
std::vector<int64_t> slice_offsets(const Tensor& x, int trail, const Shape& batch, int64_t group) {
  const int64_t n = static_cast<int64_t>(batch.size()), BH = shape_numel(batch);
  const int64_t xb = std::max<int64_t>(0, x.dim() - trail);
  std::vector<int64_t> st(n, 0), div(n, 1);
  for (int64_t d = 0; d < n; ++d) {
    int64_t xd = d - (n - xb);
    if (xd < 0 || x.size(xd) == 1) continue;  // broadcast
    st[d] = x.stride(xd);
    if (d == n - 1 && group > 1) div[d] = group;
  }
  std::vector<int64_t> off(BH);
  Shape idx(n, 0);
  for (int64_t b = 0; b < BH; ++b) {
    int64_t o = 0;
    for (int64_t d = 0; d < n; ++d) o += idx[d] / div[d] * st[d];
    off[b] = o;
    for (int64_t d = n - 1; d >= 0; --d) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
  return off;
}

// An operand: base pointer, per-batch offsets, row and column strides. BLAS operands keep a valid
// leading dimension even for a single row; the mask gets stride 0 on broadcast rows / columns.
template <class T>
struct View {
  const T* p = nullptr;
  std::vector<int64_t> off;
  int64_t rs = 0, cs = 0;
  const T* at(int64_t bh) const { return p + off[bh]; }
};

template <class T>
View<T> blas_view(const Tensor& x, const Geom& g, int64_t group) {
  View<T> v;
  v.p = static_cast<const T*>(x.data_ptr());
  v.off = slice_offsets(x, 2, g.batch, group);
  int64_t R = x.size(-2), C = x.size(-1);
  v.rs = R > 1 ? x.stride(-2) : std::max<int64_t>(C, 1);
  v.cs = 1;
  return v;
}

template <class T>
View<T> mask_view(const Tensor& m, const Geom& g) {
  View<T> v;
  if (!m.defined()) return v;
  v.p = static_cast<const T*>(m.data_ptr());
  v.off = slice_offsets(m, 2, g.batch, 1);
  int64_t d = m.dim();
  v.rs = d >= 2 && m.size(d - 2) != 1 ? m.stride(d - 2) : 0;
  v.cs = d >= 1 && m.size(d - 1) != 1 ? m.stride(d - 1) : 0;
  return v;
}

// Dropout keep/drop decisions: element (bh, i, j) reads word j % 4 of Philox block
// (offset + (bh * L + i) * ceil(S / 4) + j / 4); dropped when the word is below p * 2^32.
struct Dropout {
  bool on = false;
  uint64_t key = 0, base = 0, thresh = 0;
  int64_t L = 0, groups = 0;
  double keep_scale = 0;
  Dropout(const Geom& g, uint64_t seed, uint64_t offset) {
    on = g.dropout_p > 0;
    if (!on) return;
    key = seed, base = offset, L = g.L, groups = (g.S + 3) / 4;
    double p = g.dropout_p;
    thresh = p >= 1 ? (uint64_t(1) << 32) : static_cast<uint64_t>(std::ceil(p * 4294967296.0));
    keep_scale = p >= 1 ? 0.0 : 1.0 / (1.0 - p);
  }
  // f(j, keep) for columns j0 .. j0 + n - 1 of row (bh, i); j counts from 0
  template <class F>
  void each(int64_t bh, int64_t i, int64_t j0, int64_t n, F&& f) const {
    uint64_t c0 = base + static_cast<uint64_t>(bh * L + i) * static_cast<uint64_t>(groups);
    int64_t j = 0;
    while (j < n) {
      int64_t col = j0 + j;
      auto r = philox(key, c0 + static_cast<uint64_t>(col / 4));
      for (int w = static_cast<int>(col % 4); w < 4 && j < n; ++w, ++j) f(j, r[w] >= thresh);
    }
  }
};

// The scores arrive scaled (GEMM alpha). s += mask - off[i] (each part optional; off = -inf
// masks the row), then the causal cut (keys j > i), on a (bq, bk) tile at (i0, j0).
template <class T>
void adjust(T* s, int64_t bq, int64_t bk, const T* M, int64_t mrs, int64_t mcs, const T* off,
            bool causal, int64_t i0, int64_t j0) {
  const T ninf = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < bq; ++i) {
    T* row = s + i * bk;
    const T o = off ? off[i] : T(0);
    if (o == ninf) {
      std::fill(row, row + bk, ninf);
      continue;
    }
    if (M) {
      const T* mr = M + i * mrs;
      if (mcs == 1) {
        for (int64_t j = 0; j < bk; ++j) row[j] = row[j] + mr[j] - o;
      } else {
        for (int64_t j = 0; j < bk; ++j) row[j] = row[j] + mr[j * mcs] - o;
      }
    } else if (off) {
      for (int64_t j = 0; j < bk; ++j) row[j] -= o;
    }
    if (causal)
      for (int64_t j = std::max<int64_t>(0, i0 + i - j0 + 1); j < bk; ++j) row[j] = ninf;
  }
}


// ---- scratch buffers, copies and sums without an op ---------------------------------------------

// A contiguous tensor of zeros.
Tensor zeros_of(const Shape& s, Dtype d) {
  Tensor t = make_tensor(s, d);
  cpu::fill(t, 0);
  return t;
}

// y (contiguous; as many elements as x's kept dims hold) := x summed over the dims where m is true:
// the sum op's kernel (backend/cpu/reduce.cpp), so every sum rounds as `sum` would.
void sum_dims(const Tensor& y, const Tensor& x, const std::vector<bool>& m) {
  cpu::reduce_into(ReduceOp::Sum, y, x, m, "_sdpa_flash_backward");
}

// ---- forward -----------------------------------------------------------------------------------

template <class T>
struct Fwd {
  const Geom& g;
  View<T> q, k, v, m;
  T* out;
  T* lse;
  Dropout drop;
  cpu::RowFns<T> f;
  T scale;
};

template <class T>
void fwd_block(const Fwd<T>& c, int64_t bh, int64_t qb, T* ws) {
  const Geom& g = c.g;
  const int64_t i0 = qb * kFwdQ, bq = std::min(kFwdQ, g.L - i0), Ev = g.Ev;
  const T ninf = -std::numeric_limits<T>::infinity();
  T* s = ws;
  T* acc = s + kFwdQ * kFwdK;
  T* mx = acc + kFwdQ * Ev;
  T* l = mx + kFwdQ;
  T* alpha = l + kFwdQ;
  T* tmp = alpha + kFwdQ;
  std::fill(mx, mx + bq, ninf);
  std::fill(l, l + bq, T(0));
  std::fill(acc, acc + bq * Ev, T(0));
  const T* Q = c.q.at(bh) + i0 * c.q.rs;
  const T* K = c.k.at(bh);
  const T* V = c.v.at(bh);
  const T* M = c.m.p ? c.m.at(bh) + i0 * c.m.rs : nullptr;
  const T ks = static_cast<T>(c.drop.keep_scale);
  const int64_t kv_end = g.causal ? std::min(g.S, i0 + bq) : g.S;
  for (int64_t j0 = 0; j0 < kv_end; j0 += kFwdK) {
    const int64_t bk = std::min(kFwdK, kv_end - j0);
    gemm(false, true, bq, bk, g.E, c.scale, Q, c.q.rs, K + j0 * c.k.rs, c.k.rs, T(0), s, bk);
    if (M || (g.causal && j0 + bk - 1 > i0))
      adjust(s, bq, bk, M ? M + j0 * c.m.cs : nullptr, c.m.rs, c.m.cs,
             static_cast<const T*>(nullptr), g.causal, i0, j0);
    const bool rescale = cpu::online_softmax_step(c.f, s, bq, bk, mx, l, alpha, tmp);
    if (c.drop.on)
      for (int64_t i = 0; i < bq; ++i) {
        T* row = s + i * bk;
        c.drop.each(bh, i0 + i, j0, bk,
                    [&](int64_t j, bool keep) { row[j] = keep ? row[j] * ks : T(0); });
      }
    if (rescale) cpu::rescale_rows(acc, alpha, bq, Ev);
    gemm(false, false, bq, Ev, bk, T(1), s, bk, V + j0 * c.v.rs, c.v.rs, T(1), acc, Ev);
  }
  T* O = c.out + (bh * g.L + i0) * Ev;
  T* LS = c.lse + bh * g.L + i0;
  for (int64_t i = 0; i < bq; ++i) {
    T inv = l[i] == T(0) ? T(0) : T(1) / l[i];  // fully masked rows: zeros, as torch
    for (int64_t e = 0; e < Ev; ++e) O[i * Ev + e] = acc[i * Ev + e] * inv;
    LS[i] = l[i] == T(0) ? ninf : mx[i] + std::log(l[i]);
  }
}

// out (BH, L, Ev) and lse (BH, L), both contiguous of the compute dtype T (float32 or float64, the
// dtype of every tensor here); mask: additive, of T, any strides; or undefined. seed/offset: the
// Philox draw reserved for dropout.
template <class T>
void forward_t(const Geom& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
               const Tensor& out, const Tensor& lse, uint64_t seed, uint64_t offset) {
  Fwd<T> c{g,
           blas_view<T>(q, g, 1),
           blas_view<T>(k, g, g.gk),
           blas_view<T>(v, g, g.gv),
           mask_view<T>(mask, g),
           out.data_ptr<T>(),
           lse.data_ptr<T>(),
           Dropout(g, seed, offset),
           cpu::RowFns<T>(),
           static_cast<T>(g.scale)};
  const int64_t nqb = (g.L + kFwdQ - 1) / kFwdQ, ntask = g.BH * nqb;
  const int workers = pick_workers(ntask, double(g.BH) * g.L * g.S * (g.E + g.Ev));
  const int64_t per = kFwdQ * kFwdK + kFwdQ * g.Ev + 4 * kFwdQ;
  Tensor ws = make_tensor({std::max(workers, 1) * per}, dtype_of<T>());
  T* wp = ws.data_ptr<T>();
  run_tasks(ntask, workers, false, [&](int64_t w, int64_t t) {
    cpu::FlushSubnormals ftz(std::is_same_v<T, float>);  // exp of masked scores: no subnormal assists
    // the last query blocks (the longest under causal) go first
    fwd_block(c, t % g.BH, nqb - 1 - t / g.BH, wp + w * per);
  });
}

// ---- backward ----------------------------------------------------------------------------------

template <class T>
struct Bwd {
  const Geom& g;
  View<T> q, k, v, m;
  const T *dO, *lse, *D;
  T *dq, *dk, *dv;
  T* dq_parts;        // dq partial sums of key-block splits 1.. (split 0 writes dq)
  int64_t dq_split;   // elements between them
  T* dm;              // mask gradient accumulator (mask's shape), or null
  View<T> dmv;        // its offsets / strides
  int64_t dm_worker;  // elements between per-worker accumulators (0: shared)
  Dropout drop;
  cpu::RowFns<T> f;
  T scale;
  int64_t kb_per_split;
};

template <class T>
void bwd_task(const Bwd<T>& c, int64_t bh, int64_t split, int64_t worker, T* ws) {
  const Geom& g = c.g;
  const int64_t L = g.L, S = g.S, E = g.E, Ev = g.Ev;
  const int64_t nkb = (S + kBwdK - 1) / kBwdK, nqb = (L + kBwdQ - 1) / kBwdQ;
  const T ks = static_cast<T>(c.drop.keep_scale);
  T* P = ws;
  T* dP = P + kBwdQ * kBwdK;
  T* Pd = dP + kBwdQ * kBwdK;
  const T* Q0 = c.q.at(bh);
  const T* K0 = c.k.at(bh);
  const T* V0 = c.v.at(bh);
  const T* M0 = c.m.p ? c.m.at(bh) : nullptr;
  const T* dO = c.dO + bh * L * Ev;
  const T* lse = c.lse + bh * L;
  const T* D = c.D + bh * L;
  T* dq = (split == 0 ? c.dq : c.dq_parts + (split - 1) * c.dq_split) + bh * L * E;
  T* dm = c.dm ? c.dm + worker * c.dm_worker + c.dmv.off[bh] : nullptr;
  const int64_t kb_end = std::min(nkb, (split + 1) * c.kb_per_split);
  for (int64_t kb = split * c.kb_per_split; kb < kb_end; ++kb) {
    const int64_t j0 = kb * kBwdK, bk = std::min(kBwdK, S - j0);
    const T* K = K0 + j0 * c.k.rs;
    const T* V = V0 + j0 * c.v.rs;
    T* dk = c.dk + (bh * S + j0) * E;
    T* dv = c.dv + (bh * S + j0) * Ev;
    std::fill(dk, dk + bk * E, T(0));
    std::fill(dv, dv + bk * Ev, T(0));
    for (int64_t qb = g.causal ? j0 / kBwdQ : 0; qb < nqb; ++qb) {
      const int64_t i0 = qb * kBwdQ, bq = std::min(kBwdQ, L - i0);
      const T* Q = Q0 + i0 * c.q.rs;
      const T* dOb = dO + i0 * Ev;
      // P = exp(s - lse): the forward's probabilities, recomputed for this tile
      gemm(false, true, bq, bk, E, c.scale, Q, c.q.rs, K, c.k.rs, T(0), P, bk);
      adjust(P, bq, bk, M0 ? M0 + i0 * c.m.rs + j0 * c.m.cs : nullptr, c.m.rs, c.m.cs, lse + i0,
             g.causal && j0 + bk - 1 > i0, i0, j0);
      c.f.exp_inplace(P, bq * bk);
      // dP = dO V^T (through the dropout mask)
      gemm(false, true, bq, bk, Ev, T(1), dOb, Ev, V, c.v.rs, T(0), dP, bk);
      const T* Pv = P;
      if (c.drop.on) {
        for (int64_t i = 0; i < bq; ++i) {
          T *pr = P + i * bk, *pd = Pd + i * bk, *dp = dP + i * bk;
          c.drop.each(bh, i0 + i, j0, bk, [&](int64_t j, bool keep) {
            pd[j] = keep ? pr[j] * ks : T(0);
            dp[j] = keep ? dp[j] * ks : T(0);
          });
        }
        Pv = Pd;
      }
      gemm(true, false, bk, Ev, bq, T(1), Pv, bk, dOb, Ev, T(1), dv, Ev);
      // dS = P * (dP - D), into dP
      for (int64_t i = 0; i < bq; ++i) {
        const T* pr = P + i * bk;
        T* dp = dP + i * bk;
        const T Di = D[i0 + i];
        for (int64_t j = 0; j < bk; ++j) dp[j] = pr[j] * (dp[j] - Di);
      }
      if (dm)
        for (int64_t i = 0; i < bq; ++i) {
          T* dmr = dm + (i0 + i) * c.dmv.rs + j0 * c.dmv.cs;
          const T* dp = dP + i * bk;
          for (int64_t j = 0; j < bk; ++j) dmr[j * c.dmv.cs] += dp[j];
        }
      gemm(true, false, bk, E, bq, c.scale, dP, bk, Q, c.q.rs, T(1), dk, E);
      gemm(false, false, bq, E, bk, c.scale, dP, bk, K, c.k.rs, T(1), dq + i0 * E, E);
    }
  }
}

// True when no two batch entries share a mask slice.
bool mask_batch_injective(const Tensor& m, const Geom& g) {
  int64_t n = static_cast<int64_t>(g.batch.size()), mb = std::max<int64_t>(0, m.dim() - 2);
  for (int64_t d = 0; d < n; ++d) {
    int64_t md = d - (n - mb);
    if (g.batch[d] > 1 && (md < 0 || m.size(md) != g.batch[d])) return false;
  }
  return true;
}

// dO, O: (BH, L, Ev) contiguous; lse, dlse (BH, L) contiguous (dlse may be undefined), all of T.
// Writes dq (BH, L, E), dk (BH, S, E), dv (BH, S, Ev) contiguous (the per-q-head gradients; GQA and
// broadcast sums happen in the kernel entry) and, when dmask is defined (a contiguous tensor of the
// mask's own shape), the mask's gradient.
template <class T>
void backward_t(const Geom& g, const Tensor& dO, const Tensor& q, const Tensor& k, const Tensor& v,
                const Tensor& O, const Tensor& lse, const Tensor& dlse, const Tensor& mask,
                const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dmask,
                uint64_t seed, uint64_t offset) {
  const int64_t BH = g.BH, L = g.L, S = g.S, E = g.E, Ev = g.Ev;
  // D = rowsum(dO * O) - dlse
  Tensor Dt = make_tensor({BH * L}, dtype_of<T>());
  {
    T* Dp = Dt.data_ptr<T>();
    const T* a = dO.data_ptr<T>();
    const T* b = O.data_ptr<T>();
    const T* dl = dlse.defined() ? dlse.data_ptr<T>() : nullptr;
    cpu::parallel_for(BH * L, std::max<int64_t>(1, cpu::kGrainSize / std::max<int64_t>(Ev, 1)),
                      [&](int64_t s, int64_t e) {
                        for (int64_t r = s; r < e; ++r) {
                          T acc = 0;
                          for (int64_t x = 0; x < Ev; ++x) acc += a[r * Ev + x] * b[r * Ev + x];
                          Dp[r] = acc - (dl ? dl[r] : T(0));
                        }
                      });
  }
  const int64_t nkb = (S + kBwdK - 1) / kBwdK;
  const double madds = double(BH) * L * S * (2 * E + 3 * Ev);
  const int nt = get_num_threads();
  // few (batch, head) pairs for the threads: split the key blocks too, each split with its dq sum
  int64_t nsplit = 1;
  if (nt > 1 && madds >= 1 << 20 && BH % nt != 0 && BH < 4 * nt && nkb > 1)
    nsplit = std::min<int64_t>(nkb, (4 * nt + BH - 1) / std::max<int64_t>(BH, 1));
  const int64_t kps = nkb == 0 ? 1 : (nkb + nsplit - 1) / nsplit;
  nsplit = nkb == 0 ? 1 : (nkb + kps - 1) / kps;
  const int64_t ntask = BH * nsplit;
  const int workers = pick_workers(ntask, madds);
  cpu::fill(dq, 0);
  Tensor dq_parts;
  if (nsplit > 1) dq_parts = zeros_of({nsplit - 1, BH * L * E}, dtype_of<T>());
  // the mask gradient: one accumulator when tasks never share an element, else one per worker
  Tensor dm_acc;
  bool shared_dm = false;
  if (dmask.defined()) {
    bool s_bcast = mask.dim() < 1 || mask.size(-1) == 1;
    shared_dm = workers == 1 || (mask_batch_injective(mask, g) && (nsplit == 1 || !s_bcast));
    dm_acc = shared_dm ? dmask : zeros_of({workers, dmask.numel()}, dtype_of<T>());
    if (shared_dm) cpu::fill(dm_acc, 0);
  }
  Bwd<T> c{g,
           blas_view<T>(q, g, 1),
           blas_view<T>(k, g, g.gk),
           blas_view<T>(v, g, g.gv),
           mask_view<T>(mask, g),
           dO.data_ptr<T>(),
           lse.data_ptr<T>(),
           Dt.data_ptr<T>(),
           dq.data_ptr<T>(),
           dk.data_ptr<T>(),
           dv.data_ptr<T>(),
           nsplit > 1 ? dq_parts.data_ptr<T>() : nullptr,
           BH * L * E,
           dm_acc.defined() ? dm_acc.data_ptr<T>() : nullptr,
           dmask.defined() ? mask_view<T>(dmask, g) : View<T>(),
           dmask.defined() && !shared_dm ? dmask.numel() : 0,
           Dropout(g, seed, offset),
           cpu::RowFns<T>(),
           static_cast<T>(g.scale),
           kps};
  const int64_t per = 3 * kBwdQ * kBwdK;
  Tensor ws = make_tensor({std::max(workers, 1) * per}, dtype_of<T>());
  T* wp = ws.data_ptr<T>();
  // earliest key blocks (the most query rows under causal) first
  run_tasks(ntask, workers, dmask.defined() && !shared_dm,
            [&](int64_t w, int64_t t) {
              cpu::FlushSubnormals ftz(std::is_same_v<T, float>);
              bwd_task(c, t % BH, t / BH, w, wp + w * per);
            });
  if (nsplit > 1) {  // dq += the other splits' partial sums, in split order
    T* dqp = dq.data_ptr<T>();
    const T* parts = dq_parts.data_ptr<T>();
    const int64_t n = BH * L * E;
    cpu::parallel_for(n, cpu::kGrainSize, [&](int64_t b, int64_t e) {
      for (int64_t p = 0; p + 1 < nsplit; ++p)
        for (int64_t i = b; i < e; ++i) dqp[i] += parts[p * n + i];
    });
  }
  if (dmask.defined() && !shared_dm) {  // the per-worker accumulators summed
    Tensor r = dmask.is_contiguous() ? dmask : make_tensor(dmask.sizes(), dtype_of<T>());
    sum_dims(r, dm_acc, {true, false});
    if (!r.is_same(dmask)) cpu::cast_copy(dmask, r);
  }
}

// ---- the kernels: operands in the compute dtype, the tiled loops, the sums into the outputs -----

Shape with(Shape s, std::initializer_list<int64_t> tail) {
  s.insert(s.end(), tail);
  return s;
}

// x in the compute dtype, unit stride along its last dim and a row stride BLAS accepts: x itself,
// or a contiguous converted copy.
Tensor blas_operand(const Tensor& x, Dtype ct) {
  const int64_t R = x.size(-2), C = x.size(-1);
  const bool ok =
      (C <= 1 || x.stride(-1) == 1) && (R <= 1 || x.stride(-2) >= std::max<int64_t>(C, 1));
  return x.dtype() == ct && ok ? x : cpu::converted(x, ct);
}

// The mask, additive and of the compute dtype (any strides): bool masks become 0 / -inf at the
// mask's own shape.
Tensor additive_mask(const Tensor& m, Dtype ct) {
  if (!m.defined() || m.dtype() == ct) return m;
  if (m.dtype() != kBool) return cpu::converted(m, ct);
  const Tensor b = cpu::contiguous_of(m);
  Tensor r = make_tensor(m.sizes(), ct);
  const bool* bp = b.data_ptr<bool>();
  auto fill = [&]<class T>(T* rp) {
    const T ninf = -std::numeric_limits<T>::infinity();
    for (int64_t i = 0, n = r.numel(); i < n; ++i) rp[i] = bp[i] ? T(0) : ninf;
  };
  if (ct == kFloat64)
    fill(r.data_ptr<double>());
  else
    fill(r.data_ptr<float>());
  return r;
}

// t broadcast to shape s, contiguous and of the compute dtype (t itself when it is already);
// undefined stays undefined.
Tensor dense(const Tensor& t, const Shape& s, Dtype ct) {
  if (!t.defined() || (t.dtype() == ct && t.sizes() == s && t.is_contiguous())) return t;
  Tensor r = make_tensor(s, ct);
  cpu::cast_copy(r, t);
  return r;
}

// The contiguous view of x (contiguous) with sizes s.
Tensor reshaped(const Tensor& x, const Shape& s) {
  Shape st(s.size(), 1);
  for (int64_t i = static_cast<int64_t>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return make_view(x, s, st, x.storage_offset());
}

// dst := the per-q-head gradient `full` (batch..., R, C; contiguous, compute dtype) summed over the
// GQA groups (`group` consecutive q heads per k / v head), then over the dims dst broadcasts, then
// converted to dst's dtype.
void reduce_into(const Tensor& dst, const Tensor& full, int64_t group) {
  if (full.is_same(dst)) return;
  Tensor x = full;
  const int64_t n = full.dim();
  if (group > 1 && n >= 3 && full.size(n - 3) / group > 1) {
    // (..., Hk * G, R, C) -> (..., Hk, R, C)
    Shape s(full.sizes().begin(), full.sizes().end() - 3), ks = s;
    s.insert(s.end(), {full.size(n - 3) / group, group, full.size(n - 2), full.size(n - 1)});
    ks.insert(ks.end(), {full.size(n - 3) / group, full.size(n - 2), full.size(n - 1)});
    std::vector<bool> m(s.size(), false);
    m[s.size() - 3] = true;
    x = make_tensor(ks, full.dtype());
    sum_dims(x, reshaped(full, s), m);
  }
  // the leading dims dst lacks and the dims where dst has size 1 and x does not
  const Shape& target = dst.sizes();
  const int64_t lead = x.dim() - static_cast<int64_t>(target.size());
  std::vector<bool> m(x.dim(), false);
  bool any = lead > 0;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i < lead || (target[i - lead] == 1 && x.size(i) != 1)) m[i] = any = true;
  if (any) {
    Tensor y = make_tensor(target, x.dtype());
    sum_dims(y, x, m);
    x = y;
  }
  cpu::cast_copy(dst, x);
}

// in {q, k, v, mask?} -> {out, logsumexp, rng_state}
void fwd_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const Geom g = make_geom(kFwdName, in[0], in[1], in[2], in[3], a);
  const Dtype ct = compute_dtype(in[0].dtype());
  uint64_t seed = 0, offset = 0;
  if (g.dropout_p > 0 && g.BH * g.L * g.S > 0) {
    auto r = default_generator().reserve(static_cast<uint64_t>(g.BH * g.L * ((g.S + 3) / 4)));
    seed = r.first, offset = r.second;
  }
  int64_t* rng = static_cast<int64_t*>(out[2].data_ptr());
  rng[0] = static_cast<int64_t>(seed), rng[1] = static_cast<int64_t>(offset);
  if (g.BH * g.L == 0) return;
  Tensor o = out[0].dtype() == ct ? out[0] : make_tensor(out[0].sizes(), ct);
  const Tensor q = blas_operand(in[0], ct), k = blas_operand(in[1], ct);
  const Tensor v = blas_operand(in[2], ct);
  const Tensor mask = additive_mask(in[3], ct);
  if (ct == kFloat64)
    forward_t<double>(g, q, k, v, mask, o, out[1], seed, offset);
  else
    forward_t<float>(g, q, k, v, mask, o, out[1], seed, offset);
  if (!o.is_same(out[0])) cpu::cast_copy(out[0], o);
}

// in {grad_out, q, k, v, out, logsumexp, rng_state, mask?, grad_logsumexp?} -> {dq, dk, dv, dmask}
void bwd_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Geom g = make_geom(op.name, in[1], in[2], in[3], in[7], a);
  const Dtype ct = compute_dtype(in[1].dtype());
  const Shape os = with(g.batch, {g.L, g.Ev}), ls = with(g.batch, {g.L});
  const Tensor dO = dense(in[0], os, ct), O = dense(in[4], os, ct), lse = dense(in[5], ls, ct),
               dlse = dense(in[8], ls, ct);
  const Tensor rng = cpu::contiguous_of(in[6]);
  const int64_t* rp = static_cast<const int64_t*>(rng.data_ptr());
  const uint64_t seed = static_cast<uint64_t>(rp[0]), offset = static_cast<uint64_t>(rp[1]);
  // per-q-head gradients; written straight into the outputs when no reduction or cast is needed
  auto target = [&](const Tensor& o, const Shape& s) {
    return o.sizes() == s && o.dtype() == ct ? o : make_tensor(s, ct);
  };
  const Tensor dq = target(out[0], with(g.batch, {g.L, g.E}));
  const Tensor dk = target(out[1], with(g.batch, {g.S, g.E}));
  const Tensor dv = target(out[2], with(g.batch, {g.S, g.Ev}));
  Tensor dm;
  if (wants_mask_grad(in, a)) dm = out[3].dtype() == ct ? out[3] : make_tensor(out[3].sizes(), ct);
  const Tensor q = blas_operand(in[1], ct), k = blas_operand(in[2], ct);
  const Tensor v = blas_operand(in[3], ct);
  const Tensor mask = additive_mask(in[7], ct);
  if (ct == kFloat64)
    backward_t<double>(g, dO, q, k, v, O, lse, dlse, mask, dq, dk, dv, dm, seed, offset);
  else
    backward_t<float>(g, dO, q, k, v, O, lse, dlse, mask, dq, dk, dv, dm, seed, offset);
  reduce_into(out[0], dq, 1);
  reduce_into(out[1], dk, g.gk);
  reduce_into(out[2], dv, g.gv);
  if (dm.defined() && !dm.is_same(out[3])) cpu::cast_copy(out[3], dm);
}

KernelRegistrar k_sdpa{"_sdpa_flash", DeviceType::CPU, fwd_kernel};
KernelRegistrar k_sdpa_backward{"_sdpa_flash_backward", DeviceType::CPU, bwd_kernel};

}  // namespace
}  // namespace kiln
