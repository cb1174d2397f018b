// CPU kernels of the recurrent table ops (the op-table entries, schemas, metas and derivatives are in
// kiln/nn/rnn_ops.cpp), registered by op name.
//
// Forward: x W_ih^T for all steps is one GEMM; each step adds h W_hh^T with one GEMM and runs one
// pointwise pass (rnn_pointwise.cpp). (The fused float32 LSTM step instead multiplies inside its own
// tiles: h W_hh^T always, x W_ih^T too for one step or 8 rows and more; see lstm_forward.) Besides
// the hidden sequence and the last states, lstm_layer and gru_layer return a byte "reserve" (as
// cuDNN's reserve space: not differentiable, so autograd never materialises a gradient for it)
// holding what the backward reads: LSTM the activated gates
// (T, B, 4H), the cell states (T, B, H) and, with a projection, o * tanh(c) (T, B, H); GRU r, z, n
// and W_hn h + b_hn (T, B, 4H). An lstm_layer call with train=False (one autograd does not record)
// returns an empty reserve and keeps none of it (lstm_forward).
// Backward: per step one pointwise pass (which also accumulates the bias gradients) and one GEMM
// with W_hh; dx, dW_ih and dW_hh are then single GEMMs over the stacked sequence.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "kiln/backend/cpu/blas.h"
#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/backend/cpu/rnn_step.h"
#include "kiln/nn/rnn_detail.h"

namespace kiln {
namespace {

using namespace rnn_detail;
using namespace cpu::rnn;

// The kernel table's step functions for T, called as step(s, j0, j1) for every step struct.
template <class T>
const RnnStepFns<T>& step_fns() {
  if constexpr (std::is_same_v<T, float>) return cpu::cpu_kernels().rnn_f32;
  else return cpu::cpu_kernels().rnn_f64;
}
template <class T>
void step(const LstmStep<T>& s, int64_t j0, int64_t j1) { step_fns<T>().lstm(s, j0, j1); }
template <class T>
void step(const LstmBackStep<T>& s, int64_t j0, int64_t j1) { step_fns<T>().lstm_back(s, j0, j1); }
template <class T>
void step(const GruStep<T>& s, int64_t j0, int64_t j1) { step_fns<T>().gru(s, j0, j1); }
template <class T>
void step(const GruBackStep<T>& s, int64_t j0, int64_t j1) { step_fns<T>().gru_back(s, j0, j1); }
template <class T>
void step(const RnnStep<T>& s, int64_t j0, int64_t j1) { step_fns<T>().rnn(s, j0, j1); }
template <class T>
void step(const RnnBackStep<T>& s, int64_t j0, int64_t j1) { step_fns<T>().rnn_back(s, j0, j1); }

// The fused LSTM steps (rnn_step.h) need H % 16 == 0 and a table that has them.
bool lstm_fused_ok(int64_t H) { return H % 16 == 0 && cpu::cpu_kernels().lstm_fused_fwd != nullptr; }
void lstm_fused_fwd(const LstmFusedFwd& s, int64_t u0, int64_t u1) { cpu::cpu_kernels().lstm_fused_fwd(s, u0, u1); }
void lstm_fused_bwd(const LstmFusedBwd& s, int64_t u0, int64_t u1) { cpu::cpu_kernels().lstm_fused_bwd(s, u0, u1); }

// The forward panels of a (4H x K) weight (W_hh, K = H; W_ih, K = I) for the table's kernel: per
// block of n units (8, or 16 on AVX-512), per k, the n weights of gates i, f, g, o. Returns whether
// every weight is finite.
int64_t lstm_fwd_units() { return cpu::cpu_kernels().lstm_fused_units; }
bool lstm_pack_fwd(const float* w, int64_t H, int64_t K, float* out) {
  const int64_t n = lstm_fwd_units();
  for (int64_t u = 0; u < H / n; ++u)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t g = 0; g < 4; ++g)
        for (int64_t c = 0; c < n; ++c) *out++ = w[(g * H + u * n + c) * K + k];
  bool finite = true;
  for (int64_t i = 0; i < 4 * H * K; ++i) finite &= std::isfinite(w[i]);
  return finite;
}

// The forward panels of a weight, kept between calls while the weight is unchanged (inference runs
// the same weights every call; packing 4H x H floats with a transposition costs more than a short
// sequence's steps). An entry is named by the weight's storage (held weakly, so a freed storage never
// matches), offset and version counter, which every in-place write through kiln bumps, and by what
// was packed (`kind`: the fused steps' panels, or W_ih^T for kiln_sgemm_prepacked). Memory shared
// with numpy or DLPack (a storage that is not resizable) can change behind the counter: packed each
// call. Stale entries (an older version of a cached storage, or a freed one) are dropped; the cache
// holds at most 64 MiB of panels.
struct FwdPanels {
  Tensor panels;
  bool finite;  // every weight finite
};
enum class PanelKind { kFusedSteps, kGemmB };
template <class Pack>
FwdPanels cached_panels(const Tensor& w, PanelKind kind, int64_t H, int64_t K, Pack&& pack) {
  const std::shared_ptr<Storage>& st = w.storage();
  if (st->may_change_outside()) return pack();  // its version cannot tell a change
  struct Entry {
    std::weak_ptr<Storage> storage;
    int64_t offset, H, K;
    PanelKind kind;
    uint32_t version, epoch;
    FwdPanels panels;
  };
  static std::mutex* mu = new std::mutex;  // never destroyed: kernels may run during exit
  static std::vector<Entry>* cache = new std::vector<Entry>;
  std::lock_guard<std::mutex> lock(*mu);
  const int64_t off = w.storage_offset();
  for (size_t i = 0; i < cache->size(); ++i) {
    Entry& e = (*cache)[i];
    if (e.storage.lock() == st && e.offset == off && e.H == H && e.K == K && e.kind == kind &&
        e.version == st->version() && e.epoch == st->export_epoch()) {
      std::rotate(cache->begin(), cache->begin() + static_cast<std::ptrdiff_t>(i), cache->begin() + static_cast<std::ptrdiff_t>(i) + 1);
      return cache->front().panels;
    }
  }
  // the version the panels are of, read before packing: a write meanwhile leaves them stale, not marked new
  const uint32_t version = st->version(), epoch = st->export_epoch();
  FwdPanels wp = pack();
  std::erase_if(*cache, [&](const Entry& e) {
    const std::shared_ptr<Storage> s = e.storage.lock();
    return !s || (s == st && e.offset == off && e.kind == kind);
  });
  cache->insert(cache->begin(), Entry{st, off, H, K, kind, version, epoch, wp});
  int64_t bytes = 0;
  for (size_t i = 0; i < cache->size(); ++i) {
    bytes += (*cache)[i].panels.panels.numel() * 4;
    if (bytes > (int64_t{64} << 20) && i > 0) {
      cache->resize(i);
      break;
    }
  }
  return wp;
}
FwdPanels packed_fwd_panels(const Tensor& w, int64_t H, int64_t K) {
  return cached_panels(w, PanelKind::kFusedSteps, H, K, [&] {
    Tensor wp = make_tensor({4 * H * K}, kFloat32);
    const bool finite =
        lstm_pack_fwd(static_cast<const float*>(w.data_ptr()), H, K, static_cast<float*>(wp.data_ptr()));
    return FwdPanels{wp, finite};
  });
}
// W_ih (4H x I, row-major) as kiln_sgemm_prepacked's B = W_ih^T (I x 4H); empty where the kernel
// table has no prepacked products.
FwdPanels packed_gemm_b(const Tensor& w, int64_t H, int64_t I) {
  const int64_t words = cpu::kiln_sgemm_packed_words(I, 4 * H);
  if (words == 0) return {};
  return cached_panels(w, PanelKind::kGemmB, H, I, [&] {
    Tensor wp = make_tensor({words}, kFloat32);
    cpu::kiln_sgemm_pack_b(I, 4 * H, static_cast<const float*>(w.data_ptr()), 1, I, static_cast<float*>(wp.data_ptr()));
    return FwdPanels{wp, true};
  });
}

void lstm_pack_bwd(const float* w_hh, int64_t H, float* out) {
  for (int64_t u = 0; u < H / 16; ++u)
    for (int64_t k = 0; k < 4 * H; ++k)
      for (int64_t c = 0; c < 16; ++c) *out++ = w_hh[k * H + u * 16 + c];
}

// C (M, N) = op(A) op(B) + beta C, row-major (blas.h).
template <class T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
          int64_t ldb, T beta, T* C, int64_t ldc) {
  cpu::gemm<T>(ta, tb, M, N, K, T(1), A, lda, B, ldb, beta, C, ldc);
}

template <class T>
T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr;
}
Tensor contig(const Tensor& t) { return t.defined() ? cpu::contiguous_of(t) : t; }

// Splits the hidden units among threads in blocks of 8 (the vector width): a thread owns its units
// in every row, so it may accumulate its slice of a bias gradient without races.
template <class F>
void over_hidden(int64_t B, int64_t H, F&& f) {
  const int64_t blocks = (H + 7) / 8;
  // a step's pointwise part is split only where each thread gets 64K elements: below that, waking a
  // sleeping thread (OMP_WAIT_POLICY=PASSIVE) costs more than the work, on every step
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(B * 8, 1));
  cpu::parallel_for(blocks, grain, [&](int64_t b0, int64_t b1) { f(b0 * 8, std::min(H, b1 * 8)); });
}

// Unit blocks [0, n) among threads; `flops` per block and step keeps small problems on one thread: a
// step is split only where each thread gets about a megaflop (tens of microseconds), more than waking
// a sleeping thread costs (OMP_WAIT_POLICY=PASSIVE), which a step of a batch-1 LSTM 2x256 does not give.
template <class F>
void over_blocks(int64_t n, int64_t flops, F&& f) {
  cpu::parallel_for(n, std::max<int64_t>(1, (1 << 20) / std::max<int64_t>(flops, 1)), f);
}

// A whole sequence of steps over unit blocks [0, n): f(step, u0, u1). With several threads each owns a
// fixed range of blocks for every step and the threads meet at a spinning barrier between steps (a
// step reads the whole previous hidden state), in one parallel region: a region per step costs a
// thread wake-up per step, which is most of a small step. Every unit is computed by one thread as on
// one thread, so the results do not depend on the thread count.
template <class F>
void over_steps(int64_t steps, int64_t n, int64_t flops, F&& f) {
  const int64_t grain = std::max<int64_t>(1, (1 << 18) / std::max<int64_t>(flops, 1));
  int nt = static_cast<int>(std::min<int64_t>(get_num_threads(), n / grain));
  if (nt <= 1 || steps <= 1 || cpu::in_parallel_region()) {
    for (int64_t s = 0; s < steps; ++s) over_blocks(n, flops, [&](int64_t u0, int64_t u1) { f(s, u0, u1); });
    return;
  }
  cpu::SpinBarrier barrier;
  cpu::run_spmd(nt, [&](int t, int T) {
    const int64_t chunk = (n + T - 1) / T, u0 = std::min(n, t * chunk), u1 = std::min(n, u0 + chunk);
    int64_t round = 0;
    for (int64_t s = 0; s < steps; ++s) {
      if (u0 < u1) f(s, u0, u1);
      barrier.wait(T, round);  // step s is done when all T threads arrived
    }
  });
}

// An incoming gradient the caller left out (the schemas' Tensor?: autograd always passes them,
// kiln.ops callers need not) is zeros of its shape.
inline Tensor or_zeros(const Tensor& g, Shape shape, Dtype dt) {
  if (g.defined()) return g;
  Tensor z = make_tensor(std::move(shape), dt);
  if (z.numel() > 0) std::memset(z.data_ptr(), 0, static_cast<size_t>(z.numel()) * itemsize(dt));
  return z;
}

// dst[0, n) = src[0, n) (dst: a contiguous output; nothing to do for empty ones).
template <class T>
void copy_to(const Tensor& dst, const T* src, int64_t n) {
  if (n > 0) std::memcpy(dst.data_ptr(), src, n * sizeof(T));
}

// The sum of the two biases (zeros when absent), in the compute type.
template <class T>
std::vector<T> bias_vec(const Tensor& b, int64_t n) {
  std::vector<T> v(n, T(0));
  if (b.defined()) {
    Tensor c = cpu::contiguous_of(b);
    std::memcpy(v.data(), c.data_ptr(), n * sizeof(T));
  }
  return v;
}

// dW_hh = sum_t dg_t^T h_{t-1}: the first processed step pairs with h0, the others with the
// neighbouring rows of y, which are contiguous in both directions.
template <class T>
void grad_w_hh(const T* dg, int64_t G, const T* h0, const T* y, int64_t R, int64_t T_, int64_t B,
               bool reverse, T* dw) {
  gemm<T>(true, false, G, R, B, dg + (reverse ? T_ - 1 : 0) * B * G, G, h0, R, T(0), dw, R);
  if (T_ > 1) {
    if (!reverse)
      gemm<T>(true, false, G, R, (T_ - 1) * B, dg + B * G, G, y, R, T(1), dw, R);
    else
      gemm<T>(true, false, G, R, (T_ - 1) * B, dg, G, y + B * R, R, T(1), dw, R);
  }
}

template <class T>
void lstm_forward(const TensorList& in_, const Attrs& a, TensorList& out) {
  const bool reverse = attr<bool>(a, 0);
  const bool train = a.size() < 2 || attr<bool>(a, 1);  // (archives from before the attribute: true)
  TensorList in;
  for (const Tensor& t : in_) in.push_back(contig(t));
  const Dims d = lstm_dims("lstm_layer", in);
  const int64_t T_ = d.T, B = d.B, H = d.H, R = d.R, G = 4 * H;
  const bool proj = in[7].defined();
  std::vector<T> bias = bias_vec<T>(in[5], G), b2 = bias_vec<T>(in[6], G);
  for (int64_t k = 0; k < G; ++k) bias[k] += b2[k];
  T* y = ptr<T>(out[0]);
  // Training: the reserve keeps every step's gates and cell state for the backward. Inference
  // (train=False; the reserve is empty) keeps nothing it need not: the fused float32 steps write
  // the cell states to two alternating rows of buffers and no gates (none at all when the input
  // projection is fused in, else only the projection's product); the other paths use a scratch
  // laid out as the reserve.
  const bool fusable = std::is_same_v<T, float> && !proj && lstm_fused_ok(H);
  const bool in_step = fusable && d.I > 0 && (T_ == 1 || B >= 8);
  std::unique_ptr<T[]> scratch;
  T* gates = static_cast<T*>(out[3].data_ptr());
  if (!train) {
    const int64_t n = !fusable ? T_ * B * (5 * H + (proj ? H : 0)) : (in_step ? 0 : T_ * B * G) + 2 * B * H;
    scratch = std::make_unique_for_overwrite<T[]>(static_cast<size_t>(std::max<int64_t>(n, 1)));
    gates = scratch.get();
  }
  T* cs = gates + (train || !fusable || !in_step ? T_ * B * G : 0);
  T* hp = proj ? cs + T_ * B * H : nullptr;  // projection only
  // step t's cell state
  auto c_at = [&](int64_t t) { return train || !fusable ? cs + t * B * H : cs + (t & 1) * B * H; };
  const T *h0 = ptr<T>(in[1]), *c0 = ptr<T>(in[2]), *whh = ptr<T>(in[4]), *whr = ptr<T>(in[7]);
  bool fused = false;  // float32 without projection: the recurrent GEMM runs inside the step
  if constexpr (std::is_same_v<T, float>) {
    if (fusable) {
      fused = true;
      const FwdPanels wp = packed_fwd_panels(in[4], H, H);
      // The input projection runs inside the steps, on W_ih's cached panels, for one step (a decoding
      // call: a GEMM of so few rows would pack W_ih again on every call) and for batches of 8 rows or
      // more: each panel then serves enough rows, and no (T, B, 4H) product goes out to memory and
      // back (measured on Zen 4: 7% faster per layer at batch 32, even at 8, slower below). Other
      // sequences project all their steps with one GEMM first (W_ih read once, not once per step).
      // (in_step, above; no input columns: the GEMM's zeros)
      const FwdPanels wxp = in_step ? packed_fwd_panels(in[3], H, d.I) : FwdPanels{};
      // The projection runs on kiln's GEMM: its bits depend on no thread count, it runs on kiln's
      // threads (not beside them on OpenBLAS's pool), and it is faster (Zen 4, 128 x 1024 x 256, one
      // thread: 3% per layer against OpenBLAS 0.3.21). W_ih^T is packed once and cached like the
      // panels (packing it took 5% of a 2x256 LSTM at batch 1 seq 128, one thread); same bits.
      if (!in_step && d.I > 0 && T_ * B > 0) {
        const FwdPanels wb = packed_gemm_b(in[3], H, d.I);
        if (wb.panels.defined())
          cpu::kiln_sgemm_prepacked(T_ * B, G, d.I, ptr<T>(in[0]), d.I, ptr<float>(wb.panels), gates, G);
        else
          cpu::kiln_sgemm(false, true, T_ * B, G, d.I, ptr<T>(in[0]), d.I, ptr<T>(in[3]), d.I, gates, G);
      } else if (!in_step)
        std::fill(gates, gates + T_ * B * G, 0.0f);
      // a zero initial state (the module's default) with finite W_hh: step 0's recurrent product is 0
      const bool h0_zero = wp.finite && std::all_of(h0, h0 + B * H, [](float v) { return v == 0.0f; });
      auto step_at = [&](int64_t s) {
        const int64_t t = reverse ? T_ - 1 - s : s, tp = reverse ? t + 1 : t - 1;
        LstmFusedFwd f{s == 0 ? (h0_zero ? nullptr : h0) : y + tp * B * H,
                       ptr<float>(wp.panels),
                       in_step && !train ? nullptr : gates + t * B * G,
                       bias.data(),
                       s == 0 ? c0 : c_at(tp),
                       c_at(t),
                       y + t * B * H,
                       B,
                       H};
        f.backwards = s % 2 == 1;
        f.store_gates = train;
        if (in_step) f.x = ptr<float>(in[0]) + t * B * d.I, f.wxp = ptr<float>(wxp.panels), f.I = d.I;
        return f;
      };
      over_steps(T_, H / lstm_fwd_units(), B * (H + (in_step ? d.I : 0)) * 8 * lstm_fwd_units(),
                 [&](int64_t s, int64_t u0, int64_t u1) { lstm_fused_fwd(step_at(s), u0, u1); });
    }
  }
  if (!fused) gemm<T>(false, true, T_ * B, G, d.I, ptr<T>(in[0]), d.I, ptr<T>(in[3]), d.I, T(0), gates, G);
  for (int64_t s = 0; s < T_ && !fused; ++s) {
    const int64_t t = reverse ? T_ - 1 - s : s, tp = reverse ? t + 1 : t - 1;
    const T* hprev = s == 0 ? h0 : y + tp * B * R;
    T* g = gates + t * B * G;
    gemm<T>(false, true, B, G, R, hprev, R, whh, R, T(1), g, G);
    LstmStep<T> st{g,
                   bias.data(),
                   s == 0 ? c0 : cs + tp * B * H,
                   cs + t * B * H,
                   proj ? hp + t * B * H : y + t * B * R,
                   B,
                   H};
    over_hidden(B, H, [&](int64_t j0, int64_t j1) { step(st, j0, j1); });
    if (proj) gemm<T>(false, true, B, R, H, hp + t * B * H, H, whr, H, T(0), y + t * B * R, R);
  }
  const int64_t tl = reverse ? 0 : T_ - 1;
  copy_to<T>(out[1], y + tl * B * R, B * R);
  copy_to<T>(out[2], c_at(tl), B * H);
}

template <class T>
void lstm_backward(const TensorList& in_, const Attrs& a, TensorList& out) {
  const bool reverse = attr<bool>(a, 0);
  const int64_t mask = attr<int64_t>(a, 1);
  TensorList in;
  for (const Tensor& t : in_) in.push_back(contig(t));
  const Dims d =
      lstm_dims("lstm_layer_backward", TensorList{in[0], in[1], in[2], in[3], in[4], {}, {}, in[5]});
  const int64_t T_ = d.T, B = d.B, H = d.H, R = d.R, G = 4 * H;
  const bool proj = in[5].defined();
  in[8] = or_zeros(in[8], {T_, B, R}, in[0].dtype());
  in[9] = or_zeros(in[9], {B, R}, in[0].dtype());
  in[10] = or_zeros(in[10], {B, H}, in[0].dtype());
  const T *x = ptr<T>(in[0]), *h0 = ptr<T>(in[1]), *c0 = ptr<T>(in[2]), *wih = ptr<T>(in[3]);
  const T *whh = ptr<T>(in[4]), *whr = ptr<T>(in[5]), *y = ptr<T>(in[6]), *dy = ptr<T>(in[8]);
  const T* gates = static_cast<const T*>(in[7].data_ptr());
  const T* cs = gates + T_ * B * G;
  const T* hp = cs + T_ * B * H;
  Tensor dg_t = make_tensor({T_ * B * G}, in[0].dtype());
  Tensor dhr_t = proj ? make_tensor({T_ * B * R}, in[0].dtype()) : Tensor();
  T *dg = ptr<T>(dg_t), *dhr = ptr<T>(dhr_t);
  std::vector<T> dh(ptr<T>(in[9]), ptr<T>(in[9]) + B * R),
      dc(ptr<T>(in[10]), ptr<T>(in[10]) + B * H);
  std::vector<T> db(G, T(0)), dhp(proj ? B * H : 0);
  bool fused = false;  // as in the forward
  if constexpr (std::is_same_v<T, float>) {
    if (!proj && lstm_fused_ok(H)) {
      fused = true;
      Tensor wp = make_tensor({G * H}, kFloat32);
      lstm_pack_bwd(whh, H, ptr<float>(wp));
      for (int64_t s = T_ - 1; s >= 0; --s) {
        const int64_t t = reverse ? T_ - 1 - s : s, tp = reverse ? t + 1 : t - 1;
        const int64_t tn = reverse ? t - 1 : t + 1;  // processed after t in the forward
        const bool last = s == T_ - 1;
        LstmFusedBwd f{last ? nullptr : dg + tn * B * G,
                       ptr<float>(wp),
                       dy + t * B * H,
                       last ? ptr<float>(in[9]) : nullptr,
                       gates + t * B * G,
                       cs + t * B * H,
                       s == 0 ? c0 : cs + tp * B * H,
                       dc.data(),
                       dg + t * B * G,
                       db.data(),
                       B,
                       H};
        f.backwards = s % 2 == 1;
        over_blocks(H / 16, B * G * 32, [&](int64_t u0, int64_t u1) { lstm_fused_bwd(f, u0, u1); });
      }
      if (mask & 2)
        gemm<T>(false, false, B, R, G, dg + (reverse ? T_ - 1 : 0) * B * G, G, whh, R, T(0),
                dh.data(), R);
    }
  }
  for (int64_t s = T_ - 1; s >= 0 && !fused; --s) {
    const int64_t t = reverse ? T_ - 1 - s : s, tp = reverse ? t + 1 : t - 1;
    LstmBackStep<T> st{dy + t * B * R,
                       dh.data(),
                       gates + t * B * G,
                       cs + t * B * H,
                       s == 0 ? c0 : cs + tp * B * H,
                       dc.data(),
                       dg + t * B * G,
                       db.data(),
                       B,
                       H};
    if (proj) {  // gradient of h_t = W_hr (o * tanh(c)): kept for dW_hr, mapped back through W_hr
      T* r = dhr + t * B * R;
      for (int64_t k = 0; k < B * R; ++k) r[k] = st.dh[k] + dh[k];
      gemm<T>(false, false, B, H, R, r, R, whr, H, T(0), dhp.data(), H);
      st.dh = dhp.data(), st.dh_add = nullptr;
    }
    over_hidden(B, H, [&](int64_t j0, int64_t j1) { step(st, j0, j1); });
    gemm<T>(false, false, B, R, G, dg + t * B * G, G, whh, R, T(0), dh.data(), R);
  }
  if (mask & 1) gemm<T>(false, false, T_ * B, d.I, G, dg, G, wih, d.I, T(0), ptr<T>(out[0]), d.I);
  if (mask & 2) copy_to<T>(out[1], dh.data(), B * R);
  if (mask & 4) copy_to<T>(out[2], dc.data(), B * H);
  if (mask & 8) gemm<T>(true, false, G, d.I, T_ * B, dg, G, x, d.I, T(0), ptr<T>(out[3]), d.I);
  if (mask & 16) grad_w_hh<T>(dg, G, h0, y, R, T_, B, reverse, ptr<T>(out[4]));
  if (mask & 32) copy_to<T>(out[5], db.data(), G);
  if (mask & 64) gemm<T>(true, false, R, H, T_ * B, dhr, R, hp, H, T(0), ptr<T>(out[6]), H);
}

template <class T>
void gru_forward(const TensorList& in_, const Attrs& a, TensorList& out) {
  const bool reverse = attr<bool>(a, 0);
  TensorList in;
  for (const Tensor& t : in_) in.push_back(contig(t));
  const Dims d = gru_dims("gru_layer", in);
  const int64_t T_ = d.T, B = d.B, H = d.H, G = 3 * H;
  std::vector<T> bih = bias_vec<T>(in[4], G), bhh = bias_vec<T>(in[5], G), gh(B * G);
  T* y = ptr<T>(out[0]);
  T* res = static_cast<T*>(out[2].data_ptr());
  const T *h0 = ptr<T>(in[1]), *whh = ptr<T>(in[3]);
  // x W_ih^T into the first 3H columns of each reserve row
  gemm<T>(false, true, T_ * B, G, d.I, ptr<T>(in[0]), d.I, ptr<T>(in[2]), d.I, T(0), res, 4 * H);
  for (int64_t s = 0; s < T_; ++s) {
    const int64_t t = reverse ? T_ - 1 - s : s, tp = reverse ? t + 1 : t - 1;
    const T* hprev = s == 0 ? h0 : y + tp * B * H;
    gemm<T>(false, true, B, G, H, hprev, H, whh, H, T(0), gh.data(), G);
    GruStep<T> st{res + t * B * 4 * H, gh.data(), bih.data(), bhh.data(), hprev,
                  y + t * B * H,       B,         H};
    over_hidden(B, H, [&](int64_t j0, int64_t j1) { step(st, j0, j1); });
  }
  copy_to<T>(out[1], y + (reverse ? 0 : T_ - 1) * B * H, B * H);
}

template <class T>
void gru_backward(const TensorList& in_, const Attrs& a, TensorList& out) {
  const bool reverse = attr<bool>(a, 0);
  const int64_t mask = attr<int64_t>(a, 1);
  TensorList in;
  for (const Tensor& t : in_) in.push_back(contig(t));
  const Dims d = gru_dims("gru_layer_backward", TensorList{in[0], in[1], in[2], in[3]});
  const int64_t T_ = d.T, B = d.B, H = d.H, G = 3 * H;
  in[6] = or_zeros(in[6], {T_, B, H}, in[0].dtype());
  in[7] = or_zeros(in[7], {B, H}, in[0].dtype());
  const T *x = ptr<T>(in[0]), *h0 = ptr<T>(in[1]), *wih = ptr<T>(in[2]), *whh = ptr<T>(in[3]);
  const T *y = ptr<T>(in[4]), *dy = ptr<T>(in[6]);
  const T* res = static_cast<const T*>(in[5].data_ptr());
  Tensor dgx_t = make_tensor({T_ * B * G}, in[0].dtype()),
         dgh_t = make_tensor({T_ * B * G}, in[0].dtype());
  T *dgx = ptr<T>(dgx_t), *dgh = ptr<T>(dgh_t);
  std::vector<T> carry(ptr<T>(in[7]), ptr<T>(in[7]) + B * H), dbih(G, T(0)), dbhh(G, T(0));
  for (int64_t s = T_ - 1; s >= 0; --s) {
    const int64_t t = reverse ? T_ - 1 - s : s, tp = reverse ? t + 1 : t - 1;
    GruBackStep<T> st{dy + t * B * H,
                      carry.data(),
                      res + t * B * 4 * H,
                      s == 0 ? h0 : y + tp * B * H,
                      dgx + t * B * G,
                      dgh + t * B * G,
                      dbih.data(),
                      dbhh.data(),
                      B,
                      H};
    over_hidden(B, H, [&](int64_t j0, int64_t j1) { step(st, j0, j1); });
    gemm<T>(false, false, B, H, G, dgh + t * B * G, G, whh, H, T(1), carry.data(), H);
  }
  if (mask & 1) gemm<T>(false, false, T_ * B, d.I, G, dgx, G, wih, d.I, T(0), ptr<T>(out[0]), d.I);
  if (mask & 2) copy_to<T>(out[1], carry.data(), B * H);
  if (mask & 4) gemm<T>(true, false, G, d.I, T_ * B, dgx, G, x, d.I, T(0), ptr<T>(out[2]), d.I);
  if (mask & 8) grad_w_hh<T>(dgh, G, h0, y, H, T_, B, reverse, ptr<T>(out[3]));
  if (mask & 16) copy_to<T>(out[4], dbih.data(), G);
  if (mask & 32) copy_to<T>(out[5], dbhh.data(), G);
}

template <class T>
void rnn_forward(const TensorList& in_, const Attrs& a, TensorList& out) {
  const bool reverse = attr<bool>(a, 0), relu = attr<bool>(a, 1);
  TensorList in;
  for (const Tensor& t : in_) in.push_back(contig(t));
  const int64_t T_ = in[0].size(0), B = in[0].size(1), I = in[0].size(2), H = in[2].size(0);
  std::vector<T> bias = bias_vec<T>(in[4], H), b2 = bias_vec<T>(in[5], H);
  for (int64_t k = 0; k < H; ++k) bias[k] += b2[k];
  T* y = ptr<T>(out[0]);
  const T *h0 = ptr<T>(in[1]), *whh = ptr<T>(in[3]);
  gemm<T>(false, true, T_ * B, H, I, ptr<T>(in[0]), I, ptr<T>(in[2]), I, T(0), y, H);
  for (int64_t s = 0; s < T_; ++s) {
    const int64_t t = reverse ? T_ - 1 - s : s, tp = reverse ? t + 1 : t - 1;
    T* a = y + t * B * H;
    gemm<T>(false, true, B, H, H, s == 0 ? h0 : y + tp * B * H, H, whh, H, T(1), a, H);
    RnnStep<T> st{a, bias.data(), B, H, relu};
    over_hidden(B, H, [&](int64_t j0, int64_t j1) { step(st, j0, j1); });
  }
  copy_to<T>(out[1], y + (reverse ? 0 : T_ - 1) * B * H, B * H);
}

template <class T>
void rnn_backward(const TensorList& in_, const Attrs& a, TensorList& out) {
  const bool reverse = attr<bool>(a, 0), relu = attr<bool>(a, 1);
  const int64_t mask = attr<int64_t>(a, 2);
  TensorList in;
  for (const Tensor& t : in_) in.push_back(contig(t));
  const int64_t T_ = in[0].size(0), B = in[0].size(1), I = in[0].size(2), H = in[2].size(0);
  in[5] = or_zeros(in[5], {T_, B, H}, in[0].dtype());
  in[6] = or_zeros(in[6], {B, H}, in[0].dtype());
  const T *x = ptr<T>(in[0]), *h0 = ptr<T>(in[1]), *wih = ptr<T>(in[2]), *whh = ptr<T>(in[3]);
  const T *y = ptr<T>(in[4]), *dy = ptr<T>(in[5]);
  Tensor da_t = make_tensor({T_ * B * H}, in[0].dtype());
  T* da = ptr<T>(da_t);
  std::vector<T> carry(ptr<T>(in[6]), ptr<T>(in[6]) + B * H), db(H, T(0));
  for (int64_t s = T_ - 1; s >= 0; --s) {
    const int64_t t = reverse ? T_ - 1 - s : s;
    RnnBackStep<T> st{
        dy + t * B * H, carry.data(), y + t * B * H, da + t * B * H, db.data(), B, H, relu};
    over_hidden(B, H, [&](int64_t j0, int64_t j1) { step(st, j0, j1); });
    gemm<T>(false, false, B, H, H, da + t * B * H, H, whh, H, T(0), carry.data(), H);
  }
  if (mask & 1) gemm<T>(false, false, T_ * B, I, H, da, H, wih, I, T(0), ptr<T>(out[0]), I);
  if (mask & 2) copy_to<T>(out[1], carry.data(), B * H);
  if (mask & 4) gemm<T>(true, false, H, I, T_ * B, da, H, x, I, T(0), ptr<T>(out[2]), I);
  if (mask & 8) grad_w_hh<T>(da, H, h0, y, H, T_, B, reverse, ptr<T>(out[3]));
  if (mask & 16) copy_to<T>(out[4], db.data(), H);
}

// A layer kernel: Fn<double> for float64, Fn<float> for float32; float16 / bfloat16 run through
// float32 (inputs widened, outputs rounded once; the reserve stays float32).
template <void (*F32)(const TensorList&, const Attrs&, TensorList&), void (*F64)(const TensorList&, const Attrs&, TensorList&)>
void by_dtype(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const Dtype d = in[0].dtype();
  if (d == kFloat64) return F64(in, a, out);
  if (d == kFloat32) return F32(in, a, out);
  TensorList in32, out32;
  for (const Tensor& t : in) in32.push_back(t.defined() && t.dtype() == d ? t.to(kFloat32) : t);
  for (const Tensor& t : out) out32.push_back(t.dtype() == d ? make_tensor(t.sizes(), kFloat32) : t);
  F32(in32, a, out32);
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].dtype() == d) copy_(out[i], out32[i]);
}

KernelRegistrar k_lstm{"lstm_layer", DeviceType::CPU, by_dtype<lstm_forward<float>, lstm_forward<double>>};
KernelRegistrar k_lstm_bw{"lstm_layer_backward", DeviceType::CPU, by_dtype<lstm_backward<float>, lstm_backward<double>>};
KernelRegistrar k_gru{"gru_layer", DeviceType::CPU, by_dtype<gru_forward<float>, gru_forward<double>>};
KernelRegistrar k_gru_bw{"gru_layer_backward", DeviceType::CPU, by_dtype<gru_backward<float>, gru_backward<double>>};
KernelRegistrar k_rnn{"rnn_layer", DeviceType::CPU, by_dtype<rnn_forward<float>, rnn_forward<double>>};
KernelRegistrar k_rnn_bw{"rnn_layer_backward", DeviceType::CPU, by_dtype<rnn_backward<float>, rnn_backward<double>>};

}  // namespace
}  // namespace kiln
