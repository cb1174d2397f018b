// Internals of the recurrent ops' CPU kernels (rnn.cpp): the fused pointwise pass of one time step,
// forward and backward, for LSTM, GRU and the Elman RNN. Every step function
// handles the hidden units [j0, j1) of all B rows, so threads split the hidden dimension and
// accumulate their own slice of the bias gradient. The functions are the kernel table's
// (kernels_rnn.cpp, per ISA).
#pragma once

#include <cstdint>

namespace kiln::cpu::rnn {

// LSTM forward: gates (B, 4H) hold x W_ih^T + h W_hh^T and become the activations i, f, g, o;
// c = f * c_prev + i * g; h = o * tanh(c).
template <class T>
struct LstmStep {
  T* gates;
  const T* bias;  // (4H): b_ih + b_hh
  const T* c_prev;
  T* c;
  T* h;  // (B, H)
  int64_t B, H;
};

// LSTM backward: dh (+ dh_add) is the gradient of h; dc carries the cell gradient between steps
// (in: from step t+1, out: to step t-1); dgates gets the pre-activation gradients, dbias += them.
template <class T>
struct LstmBackStep {
  const T* dh;
  const T* dh_add;  // may be null
  const T* gates;   // activations
  const T* c;
  const T* c_prev;
  T* dc;
  T* dgates;
  T* dbias;
  int64_t B, H;
};

// GRU forward: row b of `res` (B, 4H) holds x W_ih^T in its first 3H columns and gets r, z, n and
// hn = h W_hn^T + b_hn; gh (B, 3H) = h_prev W_hh^T. h = n + z * (h_prev - n).
template <class T>
struct GruStep {
  T* res;
  const T* gh;
  const T* b_ih;
  const T* b_hh;
  const T* h_prev;
  T* h;
  int64_t B, H;
};

// GRU backward: the gradient of h is dy + carry; carry becomes dh * z (the GEMM with W_hh adds the
// rest). dgx / dgh (B, 3H): gradients of x W_ih^T + b_ih and h W_hh^T + b_hh.
template <class T>
struct GruBackStep {
  const T* dy;
  T* carry;
  const T* res;
  const T* h_prev;
  T* dgx;
  T* dgh;
  T* db_ih;
  T* db_hh;
  int64_t B, H;
};

// Elman RNN forward: a (B, H) = act(a + bias) in place.
template <class T>
struct RnnStep {
  T* a;
  const T* bias;
  int64_t B, H;
  bool relu;
};

// Elman RNN backward: da = (dy + carry) * act'(y); db += da.
template <class T>
struct RnnBackStep {
  const T* dy;
  const T* carry;
  const T* y;
  T* da;
  T* db;
  int64_t B, H;
  bool relu;
};

// LSTM without projection, float32, H % 16 == 0, on a table with 8-lane vectors (avx2, avx512):
// the per-step GEMM with W_hh runs inside the pointwise pass, on weights packed once per call
// (rnn.cpp's lstm_pack_fwd / lstm_pack_bwd, 4H * H floats each: forward panels per block of n units
// (the table's lstm_fused_units: 8, 16 on AVX-512), per k, the n weights of gates i, f, g, o; backward panels per block of 16 units, per k in [0, 4H),
// the 16 weights W_hh[k, units]).
// One forward step for unit blocks [u0, u1) (n units each): gates = xproj (in `gates`) + bias +
// h_prev W_hh^T, then the LstmStep update.
// With x given, the input projection runs in the step too (K over x's I columns with W_ih's panels,
// then over h_prev's H with W_hh's) and `gates` holds no projection on entry; h_prev null: a zero
// state (the recurrent product skipped: exactly zero when W_hh is finite).
struct LstmFusedFwd {
  const float* h_prev;  // (B, H), or null
  const float* wp;      // lstm_pack_fwd of W_hh
  float* gates;
  const float* bias;
  const float* c_prev;
  float* c;
  float* h;
  int64_t B, H;
  const float* x = nullptr;    // (B, I): this step's inputs, when the input projection is fused in
  const float* wxp = nullptr;  // lstm_pack_fwd of W_ih (4H x I)
  int64_t I = 0;
  // run the unit blocks last to first: odd steps do, so a step starts on the panels the step before
  // ended on, still in L2 where all of them do not fit (W_hh of an LSTM 256 is 1 MiB)
  bool backwards = false;
  // keep the activated gates in `gates` (for the backward); an inference call (lstm_layer's
  // train=False) does not, and with the input projection fused in has no gates buffer at all
  bool store_gates = true;
};
// One backward step for unit blocks [u0, u1) (16 units each): dh = dy + dh_add (if given) +
// dg_next W_hh (if given), then the LstmBackStep update.
struct LstmFusedBwd {
  const float* dg_next;  // (B, 4H) gate gradients of the step processed before, or null
  const float* wp;       // lstm_pack_bwd
  const float* dy;
  const float* dh_add;
  const float* gates;
  const float* c;
  const float* c_prev;
  float* dc;
  float* dg;
  float* dbias;
  int64_t B, H;
  bool backwards = false;  // as LstmFusedFwd's
};

// The step functions of one dtype (a kernel table's rnn_f32 / rnn_f64).
template <class T>
struct RnnStepFns {
  void (*lstm)(const LstmStep<T>&, int64_t j0, int64_t j1) = nullptr;
  void (*lstm_back)(const LstmBackStep<T>&, int64_t j0, int64_t j1) = nullptr;
  void (*gru)(const GruStep<T>&, int64_t j0, int64_t j1) = nullptr;
  void (*gru_back)(const GruBackStep<T>&, int64_t j0, int64_t j1) = nullptr;
  void (*rnn)(const RnnStep<T>&, int64_t j0, int64_t j1) = nullptr;
  void (*rnn_back)(const RnnBackStep<T>&, int64_t j0, int64_t j1) = nullptr;
};
using LstmFusedFwdFn = void (*)(const LstmFusedFwd&, int64_t u0, int64_t u1);
using LstmFusedBwdFn = void (*)(const LstmFusedBwd&, int64_t u0, int64_t u1);

}  // namespace kiln::cpu::rnn
