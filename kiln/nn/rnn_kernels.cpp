// The recurrent table ops: lstm_layer, gru_layer and rnn_layer run one layer in one direction over
// a whole (T, B, I) sequence; each derivative calls a fused backward op (lstm_layer_backward, ...),
// which has no derivative itself (double backward through an RNN raises NotImplemented).
//
// Forward: x W_ih^T for all steps is one GEMM; each step adds h W_hh^T with one GEMM and runs one
// pointwise pass (rnn_pointwise.cpp). Besides the hidden sequence and the last states, lstm_layer
// and gru_layer return a byte "reserve" (as cuDNN's reserve space: not differentiable, so autograd
// never materialises a gradient for it) holding what the backward reads: LSTM the activated gates
// (T, B, 4H), the cell states (T, B, H) and, with a projection, o * tanh(c) (T, B, H); GRU r, z, n
// and W_hn h + b_hn (T, B, 4H).
// Backward: per step one pointwise pass (which also accumulates the bias gradients) and one GEMM
// with W_hh; dx, dW_ih and dW_hh are then single GEMMs over the stacked sequence.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kiln/autograd/autograd.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/nn/rnn.h"
#include "kiln/nn/rnn_detail.h"

namespace kiln {
namespace {

using namespace rnn_detail;

// C (M, N) = op(A) op(B) + beta C, row-major; op(A) is (M, K).
template <class T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
          int64_t ldb, T beta, T* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) C[m * ldc + n] = beta == T(0) ? T(0) : C[m * ldc + n] * beta;
    return;
  }
  auto a = ta ? CblasTrans : CblasNoTrans, b = tb ? CblasTrans : CblasNoTrans;
  lda = std::max<int64_t>(lda, 1), ldb = std::max<int64_t>(ldb, 1), ldc = std::max<int64_t>(ldc, 1);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, a, b, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
  else
    cblas_dgemm(CblasRowMajor, a, b, M, N, K, 1.0, A, lda, B, ldb, beta, C, ldc);
}

template <class T>
T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr;
}
Tensor contig(const Tensor& t) { return t.defined() ? contiguous(t) : t; }

// Splits the hidden units among threads in blocks of 8 (the vector width): a thread owns its units
// in every row, so it may accumulate its slice of a bias gradient without races.
template <class F>
void over_hidden(int64_t B, int64_t H, F&& f) {
  const int64_t blocks = (H + 7) / 8;
  const int64_t grain = std::max<int64_t>(1, 2048 / std::max<int64_t>(B * 8, 1));
  cpu::parallel_for(blocks, grain, [&](int64_t b0, int64_t b1) { f(b0 * 8, std::min(H, b1 * 8)); });
}

// Unit blocks [0, n) among threads; `flops` per block and step keeps small problems on one thread.
template <class F>
void over_blocks(int64_t n, int64_t flops, F&& f) {
  cpu::parallel_for(n, std::max<int64_t>(1, (1 << 18) / std::max<int64_t>(flops, 1)), f);
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
    Tensor c = contiguous(b);
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

// ---- checks shared by the metas -----------------------------------------------------------------
// L: TensorList (kernels) or SpecList (metas, in SymInts); X its element.
template <class L>
Dtype check_dtypes(const char* op, const L& in) {
  Dtype d = in[0].dtype();
  KILN_CHECK(d == kFloat32 || d == kFloat64, Runtime, op,
             "expected a float32 or float64 input, got ", dtype_name(d));
  for (const auto& t : in)
    if (t.defined())
      KILN_CHECK(t.dtype() == d, Runtime, op, "expected all tensors to have dtype ", dtype_name(d),
                 ", but got ", dtype_name(t.dtype()));
  return d;
}
template <class X>
void check_shape(const char* op, const char* what, const X& t,
                 const std::decay_t<decltype(std::declval<X>().sizes())>& want) {
  if (!t.defined()) return;
  KILN_CHECK(t.sizes() == want, Runtime, op, what, " has shape ", t.sizes(), ", expected ", want);
}

// Sizes of a layer op: x (T, B, I), hidden H (gate rows / chunks), state width R.
template <class N>
struct DimsT {
  N T, B, I, H, R;
};
using Dims = DimsT<int64_t>;
template <class X, class N = std::decay_t<decltype(std::declval<X>().sizes()[0])>>
DimsT<N> layer_dims(const char* op, const X& x, const X& w_ih, int64_t chunks) {
  KILN_CHECK(x.dim() == 3, Runtime, op, "input must be 3-D (T, B, I), got ", x.dim(), "-D");
  KILN_CHECK(w_ih.dim() == 2 && w_ih.size(0) % chunks == 0 && w_ih.size(0) > 0, Runtime, op,
             "weight_ih must be 2-D with a multiple of ", chunks, " rows, got shape ",
             w_ih.sizes());
  KILN_CHECK(x.size(0) > 0, Runtime, op, "Expected sequence length to be larger than 0 in RNN");
  N H = w_ih.size(0) / chunks;
  return {x.size(0), x.size(1), x.size(2), H, H};
}
SymInt bytes(Dtype d, SymInt n) { return n * static_cast<int64_t>(itemsize(d)); }
SymShape maybe(bool on, SymShape s) { return on ? s : SymShape{0}; }

// ==== LSTM =======================================================================================
// inputs {x, h0, c0, w_ih, w_hh, b_ih?, b_hh?, w_hr?}; attrs {reverse}; outputs {y, h_n, c_n,
// reserve}
template <class L>
auto lstm_dims(const char* op, const L& in) {
  auto d = layer_dims(op, in[0], in[3], 4);
  const auto G = 4 * d.H;
  if (in[7].defined()) {
    KILN_CHECK(in[7].dim() == 2, Runtime, op, "weight_hr must be 2-D");
    d.R = in[7].size(0);
    check_shape(op, "weight_hr", in[7], {d.R, d.H});
  }
  check_shape(op, "weight_ih", in[3], {G, d.I});
  check_shape(op, "weight_hh", in[4], {G, d.R});
  check_shape(op, "bias_ih", in[5], {G});
  check_shape(op, "bias_hh", in[6], {G});
  check_shape(op, "h0", in[1], {d.B, d.R});
  check_shape(op, "c0", in[2], {d.B, d.H});
  return d;
}

SpecList lstm_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  Dtype dt = check_dtypes(op.name, in);
  auto d = lstm_dims(op.name, in);
  SymInt n = d.T * d.B * (5 * d.H + (in[7].defined() ? d.H : 0));
  return {{{d.T, d.B, d.R}, dt}, {{d.B, d.R}, dt}, {{d.B, d.H}, dt}, {{bytes(dt, n)}, kUInt8}};
}

template <class T>
void lstm_forward(const TensorList& in_, bool reverse, TensorList& out) {
  TensorList in;
  for (const Tensor& t : in_) in.push_back(contig(t));
  const Dims d = lstm_dims("lstm_layer", in);
  const int64_t T_ = d.T, B = d.B, H = d.H, R = d.R, G = 4 * H;
  const bool proj = in[7].defined();
  std::vector<T> bias = bias_vec<T>(in[5], G), b2 = bias_vec<T>(in[6], G);
  for (int64_t k = 0; k < G; ++k) bias[k] += b2[k];
  T* y = ptr<T>(out[0]);
  T* gates = static_cast<T*>(out[3].data_ptr());
  T* cs = gates + T_ * B * G;
  T* hp = cs + T_ * B * H;  // projection only
  const T *h0 = ptr<T>(in[1]), *c0 = ptr<T>(in[2]), *whh = ptr<T>(in[4]), *whr = ptr<T>(in[7]);
  gemm<T>(false, true, T_ * B, G, d.I, ptr<T>(in[0]), d.I, ptr<T>(in[3]), d.I, T(0), gates, G);
  bool fused = false;  // float32 without projection: the recurrent GEMM runs inside the step
  if constexpr (std::is_same_v<T, float>) {
    if (!proj && lstm_fused_ok(H)) {
      fused = true;
      Tensor wp = make_tensor({G * H}, kFloat32);
      lstm_pack_fwd(whh, H, ptr<float>(wp));
      for (int64_t s = 0; s < T_; ++s) {
        const int64_t t = reverse ? T_ - 1 - s : s, tp = reverse ? t + 1 : t - 1;
        LstmFusedFwd f{s == 0 ? h0 : y + tp * B * H,
                       ptr<float>(wp),
                       gates + t * B * G,
                       bias.data(),
                       s == 0 ? c0 : cs + tp * B * H,
                       cs + t * B * H,
                       y + t * B * H,
                       B,
                       H};
        over_blocks(H / 8, B * H * 64, [&](int64_t u0, int64_t u1) { lstm_fused_fwd(f, u0, u1); });
      }
    }
  }
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
  copy_to<T>(out[2], cs + tl * B * H, B * H);
}

void lstm_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  if (in[0].dtype() == kFloat64)
    lstm_forward<double>(in, attr<bool>(a, 0), out);
  else
    lstm_forward<float>(in, attr<bool>(a, 0), out);
}
OpDef op_lstm_layer{"lstm_layer", 0, lstm_meta, {lstm_kernel, nullptr}};
OpRegistrar reg_lstm_layer{op_lstm_layer, "lstm_layer(Tensor input, Tensor h0, Tensor c0, Tensor w_ih, Tensor w_hh, Tensor? b_ih, Tensor? b_hh, Tensor? w_hr, bool reverse) -> (Tensor, Tensor, Tensor, Tensor)"};

// inputs {x, h0, c0, w_ih, w_hh, w_hr?, y, reserve, dy, dh_n, dc_n}; attrs {reverse, mask}
// outputs {dx, dh0, dc0, dw_ih, dw_hh, db, dw_hr}; mask bit k: output k is wanted (else shape {0})
SpecList lstm_back_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  auto d = lstm_dims(op.name, SpecList{in[0], in[1], in[2], in[3], in[4], {}, {}, in[5]});
  Dtype dt = in[0].dtype();
  check_shape(op.name, "grad_output", in[8], {d.T, d.B, d.R});
  check_shape(op.name, "grad_h_n", in[9], {d.B, d.R});
  check_shape(op.name, "grad_c_n", in[10], {d.B, d.H});
  const int64_t m = attr<int64_t>(a, 1);
  const SymInt G = 4 * d.H;
  return {{maybe(m & 1, {d.T, d.B, d.I}), dt}, {maybe(m & 2, {d.B, d.R}), dt},
          {maybe(m & 4, {d.B, d.H}), dt},      {maybe(m & 8, {G, d.I}), dt},
          {maybe(m & 16, {G, d.R}), dt},       {maybe(m & 32, {G}), dt},
          {maybe(m & 64, {d.R, d.H}), dt}};
}

template <class T>
void lstm_backward(const TensorList& in_, bool reverse, int64_t mask, TensorList& out) {
  TensorList in;
  for (const Tensor& t : in_) in.push_back(contig(t));
  const Dims d =
      lstm_dims("lstm_layer_backward", TensorList{in[0], in[1], in[2], in[3], in[4], {}, {}, in[5]});
  const int64_t T_ = d.T, B = d.B, H = d.H, R = d.R, G = 4 * H;
  const bool proj = in[5].defined();
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

void lstm_back_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  bool rev = attr<bool>(a, 0);
  int64_t mask = attr<int64_t>(a, 1);
  if (in[0].dtype() == kFloat64)
    lstm_backward<double>(in, rev, mask, out);
  else
    lstm_backward<float>(in, rev, mask, out);
}
OpDef op_lstm_layer_backward{"lstm_layer_backward", 0, lstm_back_meta, {lstm_back_kernel, nullptr}};
OpRegistrar reg_lstm_layer_backward{op_lstm_layer_backward, "lstm_layer_backward(Tensor input, Tensor h0, Tensor c0, Tensor w_ih, Tensor w_hh, Tensor? w_hr, Tensor output, Tensor reserve, Tensor? grad_output, Tensor? grad_h_n, Tensor? grad_c_n, bool reverse, int needs_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)"};

TensorList lstm_layer_grad(const GradCtx& c, const TensorList& go) {
  const auto& n = c.needs;
  const int64_t mask = (n[0] ? 1 : 0) | (n[1] ? 2 : 0) | (n[2] ? 4 : 0) | (n[3] ? 8 : 0) |
                       (n[4] ? 16 : 0) | (n[5] || n[6] ? 32 : 0) | (n[7] ? 64 : 0);
  TensorList g = dispatch(op_lstm_layer_backward,
                          {c.in[0], c.in[1], c.in[2], c.in[3], c.in[4], c.in[7], c.out[0], c.out[3],
                           go[0], go[1], go[2]},
                          {attr<bool>(c.attrs, 0), mask});
  TensorList r(8);
  for (int k = 0; k < 5; ++k)
    if (n[k]) r[k] = g[k];
  if (n[5]) r[5] = g[5];
  if (n[6]) r[6] = n[5] ? clone(g[5]) : g[5];
  if (n[7]) r[7] = g[6];
  return r;
}
DerivativeRegistrar d_lstm_layer{op_lstm_layer, lstm_layer_grad, 0b10011111, 0b1001};

// ==== GRU ========================================================================================
// inputs {x, h0, w_ih, w_hh, b_ih?, b_hh?}; attrs {reverse}; outputs {y, h_n, reserve}
template <class L>
auto gru_dims(const char* op, const L& in) {
  auto d = layer_dims(op, in[0], in[2], 3);
  const auto G = 3 * d.H;
  check_shape(op, "weight_ih", in[2], {G, d.I});
  check_shape(op, "weight_hh", in[3], {G, d.H});
  if (in.size() > 5) {
    check_shape(op, "bias_ih", in[4], {G});
    check_shape(op, "bias_hh", in[5], {G});
  }
  check_shape(op, "h0", in[1], {d.B, d.H});
  return d;
}

SpecList gru_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  Dtype dt = check_dtypes(op.name, in);
  auto d = gru_dims(op.name, in);
  return {{{d.T, d.B, d.H}, dt}, {{d.B, d.H}, dt}, {{bytes(dt, d.T * d.B * 4 * d.H)}, kUInt8}};
}

template <class T>
void gru_forward(const TensorList& in_, bool reverse, TensorList& out) {
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

void gru_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  if (in[0].dtype() == kFloat64)
    gru_forward<double>(in, attr<bool>(a, 0), out);
  else
    gru_forward<float>(in, attr<bool>(a, 0), out);
}
OpDef op_gru_layer{"gru_layer", 0, gru_meta, {gru_kernel, nullptr}};
OpRegistrar reg_gru_layer{op_gru_layer, "gru_layer(Tensor input, Tensor h0, Tensor w_ih, Tensor w_hh, Tensor? b_ih, Tensor? b_hh, bool reverse) -> (Tensor, Tensor, Tensor)"};

// inputs {x, h0, w_ih, w_hh, y, reserve, dy, dh_n}; attrs {reverse, mask}
// outputs {dx, dh0, dw_ih, dw_hh, db_ih, db_hh}
SpecList gru_back_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  auto d = gru_dims(op.name, SpecList{in[0], in[1], in[2], in[3]});
  Dtype dt = in[0].dtype();
  check_shape(op.name, "grad_output", in[6], {d.T, d.B, d.H});
  check_shape(op.name, "grad_h_n", in[7], {d.B, d.H});
  const int64_t m = attr<int64_t>(a, 1);
  const SymInt G = 3 * d.H;
  return {{maybe(m & 1, {d.T, d.B, d.I}), dt},
          {maybe(m & 2, {d.B, d.H}), dt},
          {maybe(m & 4, {G, d.I}), dt},
          {maybe(m & 8, {G, d.H}), dt},
          {maybe(m & 16, {G}), dt},
          {maybe(m & 32, {G}), dt}};
}

template <class T>
void gru_backward(const TensorList& in_, bool reverse, int64_t mask, TensorList& out) {
  TensorList in;
  for (const Tensor& t : in_) in.push_back(contig(t));
  const Dims d = gru_dims("gru_layer_backward", TensorList{in[0], in[1], in[2], in[3]});
  const int64_t T_ = d.T, B = d.B, H = d.H, G = 3 * H;
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

void gru_back_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  bool rev = attr<bool>(a, 0);
  int64_t mask = attr<int64_t>(a, 1);
  if (in[0].dtype() == kFloat64)
    gru_backward<double>(in, rev, mask, out);
  else
    gru_backward<float>(in, rev, mask, out);
}
OpDef op_gru_layer_backward{"gru_layer_backward", 0, gru_back_meta, {gru_back_kernel, nullptr}};
OpRegistrar reg_gru_layer_backward{op_gru_layer_backward, "gru_layer_backward(Tensor input, Tensor h0, Tensor w_ih, Tensor w_hh, Tensor output, Tensor reserve, Tensor? grad_output, Tensor? grad_h_n, bool reverse, int needs_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)"};

TensorList gru_layer_grad(const GradCtx& c, const TensorList& go) {
  const auto& n = c.needs;
  const int64_t mask = (n[0] ? 1 : 0) | (n[1] ? 2 : 0) | (n[2] ? 4 : 0) | (n[3] ? 8 : 0) |
                       (n[4] ? 16 : 0) | (n[5] ? 32 : 0);
  TensorList g = dispatch(op_gru_layer_backward,
                          {c.in[0], c.in[1], c.in[2], c.in[3], c.out[0], c.out[2], go[0], go[1]},
                          {attr<bool>(c.attrs, 0), mask});
  TensorList r(6);
  for (int k = 0; k < 6; ++k)
    if (n[k]) r[k] = g[k];
  return r;
}
DerivativeRegistrar d_gru_layer{op_gru_layer, gru_layer_grad, 0b1111, 0b101};

// ==== Elman RNN ==================================================================================
// inputs {x, h0, w_ih, w_hh, b_ih?, b_hh?}; attrs {reverse, relu}; outputs {y, h_n}
SpecList rnn_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  Dtype dt = check_dtypes(op.name, in);
  auto d = layer_dims(op.name, in[0], in[2], 1);
  check_shape(op.name, "weight_ih", in[2], {d.H, d.I});
  check_shape(op.name, "weight_hh", in[3], {d.H, d.H});
  check_shape(op.name, "bias_ih", in[4], {d.H});
  check_shape(op.name, "bias_hh", in[5], {d.H});
  check_shape(op.name, "h0", in[1], {d.B, d.H});
  return {{{d.T, d.B, d.H}, dt}, {{d.B, d.H}, dt}};
}

template <class T>
void rnn_forward(const TensorList& in_, bool reverse, bool relu, TensorList& out) {
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

void rnn_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  if (in[0].dtype() == kFloat64)
    rnn_forward<double>(in, attr<bool>(a, 0), attr<bool>(a, 1), out);
  else
    rnn_forward<float>(in, attr<bool>(a, 0), attr<bool>(a, 1), out);
}
OpDef op_rnn_layer{"rnn_layer", 0, rnn_meta, {rnn_kernel, nullptr}};
OpRegistrar reg_rnn_layer{op_rnn_layer, "rnn_layer(Tensor input, Tensor h0, Tensor w_ih, Tensor w_hh, Tensor? b_ih, Tensor? b_hh, bool reverse, bool relu) -> (Tensor, Tensor)"};

// inputs {x, h0, w_ih, w_hh, y, dy, dh_n}; attrs {reverse, relu, mask}; outputs {dx, dh0, dw_ih,
// dw_hh, db}
SpecList rnn_back_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  auto d = layer_dims(op.name, in[0], in[2], 1);
  Dtype dt = in[0].dtype();
  check_shape(op.name, "grad_output", in[5], {d.T, d.B, d.H});
  check_shape(op.name, "grad_h_n", in[6], {d.B, d.H});
  const int64_t m = attr<int64_t>(a, 2);
  return {{maybe(m & 1, {d.T, d.B, d.I}), dt},
          {maybe(m & 2, {d.B, d.H}), dt},
          {maybe(m & 4, {d.H, d.I}), dt},
          {maybe(m & 8, {d.H, d.H}), dt},
          {maybe(m & 16, {d.H}), dt}};
}

template <class T>
void rnn_backward(const TensorList& in_, bool reverse, bool relu, int64_t mask, TensorList& out) {
  TensorList in;
  for (const Tensor& t : in_) in.push_back(contig(t));
  const int64_t T_ = in[0].size(0), B = in[0].size(1), I = in[0].size(2), H = in[2].size(0);
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

void rnn_back_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  bool rev = attr<bool>(a, 0), relu = attr<bool>(a, 1);
  int64_t mask = attr<int64_t>(a, 2);
  if (in[0].dtype() == kFloat64)
    rnn_backward<double>(in, rev, relu, mask, out);
  else
    rnn_backward<float>(in, rev, relu, mask, out);
}
OpDef op_rnn_layer_backward{"rnn_layer_backward", 0, rnn_back_meta, {rnn_back_kernel, nullptr}};
OpRegistrar reg_rnn_layer_backward{op_rnn_layer_backward, "rnn_layer_backward(Tensor input, Tensor h0, Tensor w_ih, Tensor w_hh, Tensor output, Tensor? grad_output, Tensor? grad_h_n, bool reverse, bool relu, int needs_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)"};

TensorList rnn_layer_grad(const GradCtx& c, const TensorList& go) {
  const auto& n = c.needs;
  const int64_t mask =
      (n[0] ? 1 : 0) | (n[1] ? 2 : 0) | (n[2] ? 4 : 0) | (n[3] ? 8 : 0) | (n[4] || n[5] ? 16 : 0);
  TensorList g =
      dispatch(op_rnn_layer_backward, {c.in[0], c.in[1], c.in[2], c.in[3], c.out[0], go[0], go[1]},
               {attr<bool>(c.attrs, 0), attr<bool>(c.attrs, 1), mask});
  TensorList r(6);
  for (int k = 0; k < 4; ++k)
    if (n[k]) r[k] = g[k];
  if (n[4]) r[4] = g[4];
  if (n[5]) r[5] = n[4] ? clone(g[4]) : g[4];
  return r;
}
DerivativeRegistrar d_rnn_layer{op_rnn_layer, rnn_layer_grad, 0b1111, 0b1};

// float16 / bfloat16 run through float32 (as torch's CPU RNNs compute in float32).
bool low_precision(const Tensor& x) { return x.dtype() == kFloat16 || x.dtype() == kBFloat16; }
TensorList run(const OpDef& op, const TensorList& in, Attrs attrs, size_t n_out) {
  if (!low_precision(in[0])) return dispatch(op, in, std::move(attrs));
  TensorList up;
  for (const Tensor& t : in)
    up.push_back(t.defined() && t.dtype() == in[0].dtype() ? to_dtype(t, kFloat32) : t);
  TensorList r = dispatch(op, up, std::move(attrs));
  for (size_t k = 0; k < n_out; ++k) r[k] = to_dtype(r[k], in[0].dtype());
  return r;
}

}  // namespace

namespace nn {

std::tuple<Tensor, Tensor, Tensor> lstm_layer(const Tensor& x, const Tensor& h0, const Tensor& c0,
                                              const Tensor& w_ih, const Tensor& w_hh,
                                              const Tensor& b_ih, const Tensor& b_hh,
                                              const Tensor& w_hr, bool reverse) {
  TensorList r = run(op_lstm_layer, {x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr}, {reverse}, 3);
  return {r[0], r[1], r[2]};
}
std::tuple<Tensor, Tensor> gru_layer(const Tensor& x, const Tensor& h0, const Tensor& w_ih,
                                     const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh,
                                     bool reverse) {
  TensorList r = run(op_gru_layer, {x, h0, w_ih, w_hh, b_ih, b_hh}, {reverse}, 2);
  return {r[0], r[1]};
}
std::tuple<Tensor, Tensor> rnn_layer(const Tensor& x, const Tensor& h0, const Tensor& w_ih,
                                     const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh,
                                     bool relu, bool reverse) {
  TensorList r = run(op_rnn_layer, {x, h0, w_ih, w_hh, b_ih, b_hh}, {reverse, relu}, 2);
  return {r[0], r[1]};
}

}  // namespace nn
}  // namespace kiln
