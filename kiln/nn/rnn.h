// Recurrent layers: RNN (tanh / relu), LSTM (optional projection), GRU and their cells, with
// torch.nn's constructor arguments, parameter names and shapes, initialisation, gate order (LSTM
// i, f, g, o; GRU r, z, n) and forward signatures.
//
// Each layer runs one fused table op per layer and direction over the whole sequence
// (rnn_kernels.cpp): the input projection of all steps is one GEMM, each step one GEMM plus one
// pointwise pass, and the backward is one fused op (weight gradients as GEMMs over the stacked
// sequence). Double backward through these ops is not implemented.
#pragma once

#include <string>
#include <tuple>
#include <vector>

#include "kiln/nn/module.h"
#include "kiln/nn/utils.h"

namespace kiln::nn {

// ---- one layer, one direction, the whole sequence -----------------------------------------------
// x (T, B, I); h0 (B, R), c0 (B, H); w_ih (4H, I), w_hh (4H, R), b_ih / b_hh (4H) or undefined;
// w_hr (R, H) for a projection (R = proj_size) or undefined (R = H). reverse: runs t = T-1 .. 0.
// Returns y (T, B, R), h_n (B, R), c_n (B, H). float32 / float64.
std::tuple<Tensor, Tensor, Tensor> lstm_layer(const Tensor& x, const Tensor& h0, const Tensor& c0,
                                              const Tensor& w_ih, const Tensor& w_hh,
                                              const Tensor& b_ih, const Tensor& b_hh,
                                              const Tensor& w_hr, bool reverse = false);
// GRU: w_ih (3H, I), w_hh (3H, H); n = tanh(W_in x + b_in + r * (W_hn h + b_hn)). Returns y, h_n.
std::tuple<Tensor, Tensor> gru_layer(const Tensor& x, const Tensor& h0, const Tensor& w_ih,
                                     const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh,
                                     bool reverse = false);
// Elman RNN: h = act(W_ih x + b_ih + W_hh h + b_hh), act = tanh or relu. Returns y, h_n.
std::tuple<Tensor, Tensor> rnn_layer(const Tensor& x, const Tensor& h0, const Tensor& w_ih,
                                     const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh,
                                     bool relu = false, bool reverse = false);

// ---- cells (torch's rnn_tanh_cell, rnn_relu_cell, lstm_cell, gru_cell): x (B, I), h (B, H) ----
Tensor rnn_tanh_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih = {}, const Tensor& b_hh = {});
Tensor rnn_relu_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih = {}, const Tensor& b_hh = {});
std::tuple<Tensor, Tensor> lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c,
                                     const Tensor& w_ih, const Tensor& w_hh,
                                     const Tensor& b_ih = {}, const Tensor& b_hh = {});
Tensor gru_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih = {}, const Tensor& b_hh = {});

// ---- modules ------------------------------------------------------------------------------------
// torch.nn.RNNBase: mode "RNN_TANH", "RNN_RELU", "LSTM" or "GRU". Parameters per layer and
// direction: weight_ih_l{k}[_reverse], weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k} (when bias),
// weight_hr_l{k} (LSTM with proj_size > 0); all uniform(-1/sqrt(hidden), 1/sqrt(hidden)).
class RNNBase : public Module {
 public:
  RNNBase(std::string mode, int64_t input_size, int64_t hidden_size, int64_t num_layers = 1,
          bool bias = true, bool batch_first = false, double dropout = 0.0,
          bool bidirectional = false, int64_t proj_size = 0, Dtype dtype = Dtype::Undefined);
  void reset_parameters();
  std::string extra_repr() const override;
  // The parameter names of each layer / direction, in registration order (torch's _all_weights).
  const std::vector<std::vector<std::string>>& all_weight_names() const { return names_; }

  // input (T, B, I) / (B, T, I) with batch_first / (T, I) unbatched; hx (L*D, B, R) or undefined
  // (zeros); cx (L*D, B, H) for LSTM. Returns output, h_n, c_n (c_n undefined unless LSTM).
  std::tuple<Tensor, Tensor, Tensor> run(const Tensor& input, const Tensor& hx, const Tensor& cx);
  // The same over a packed batch (utils::rnn::PackedSequence's data and batch_sizes, already in
  // sorted order): hx (L*D, batch_sizes[0], R) or undefined. Returns the output's data, h_n, c_n.
  std::tuple<Tensor, Tensor, Tensor> run_packed(const Tensor& data, const Tensor& batch_sizes,
                                                const Tensor& hx, const Tensor& cx);
  // A PackedSequence in the caller's batch order: hx / cx are permuted into the sorted order and
  // h_n / c_n back (torch's permute_hidden).
  std::tuple<utils::rnn::PackedSequence, Tensor, Tensor> run(const utils::rnn::PackedSequence& input,
                                                             const Tensor& hx, const Tensor& cx);

  std::string mode;
  int64_t input_size, hidden_size, num_layers, proj_size;
  bool bias, batch_first, bidirectional;
  double dropout;

 private:
  // One layer / direction over (T, B, I): (y, h_n, c_n; c_n undefined unless LSTM).
  std::tuple<Tensor, Tensor, Tensor> layer(int64_t l, int64_t d, const Tensor& seq, const Tensor& h0,
                                           const Tensor& c0);
  std::vector<std::vector<std::string>> names_;
};

class RNN : public RNNBase {
 public:
  RNN(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1,
      const std::string& nonlinearity = "tanh", bool bias = true, bool batch_first = false,
      double dropout = 0.0, bool bidirectional = false, Dtype dtype = Dtype::Undefined);
  // Returns (output, h_n).
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = {});
  std::tuple<utils::rnn::PackedSequence, Tensor> forward(const utils::rnn::PackedSequence& input,
                                                         const Tensor& hx = {});
  std::string nonlinearity;
};

class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true,
       bool batch_first = false, double dropout = 0.0, bool bidirectional = false,
       int64_t proj_size = 0, Dtype dtype = Dtype::Undefined);
  // Returns (output, (h_n, c_n)); hx and cx are given together or not at all.
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> forward(const Tensor& input, const Tensor& hx = {},
                                                         const Tensor& cx = {});
  std::tuple<utils::rnn::PackedSequence, std::tuple<Tensor, Tensor>> forward(
      const utils::rnn::PackedSequence& input, const Tensor& hx = {}, const Tensor& cx = {});
};

class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true,
      bool batch_first = false, double dropout = 0.0, bool bidirectional = false,
      Dtype dtype = Dtype::Undefined);
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = {});
  std::tuple<utils::rnn::PackedSequence, Tensor> forward(const utils::rnn::PackedSequence& input,
                                                         const Tensor& hx = {});
};

// torch.nn.RNNCellBase: weight_ih (chunks*H, I), weight_hh (chunks*H, H), bias_ih, bias_hh (None
// when bias=False, as torch registers them).
class RNNCellBase : public Module {
 public:
  RNNCellBase(std::string name, int64_t input_size, int64_t hidden_size, bool bias, int64_t chunks,
              Dtype dtype);
  void reset_parameters();
  std::string extra_repr() const override;
  int64_t input_size, hidden_size;
  bool bias;

 protected:
  // Batches an unbatched (I) input / (H) state and checks dims as torch's cell forward does.
  bool prepare(Tensor& x, Tensor& h, Tensor* c) const;
};

class RNNCell : public RNNCellBase {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, bool bias = true,
          const std::string& nonlinearity = "tanh", Dtype dtype = Dtype::Undefined);
  Tensor forward(const Tensor& input, const Tensor& hx = {});
  std::string extra_repr() const override;
  std::string nonlinearity;
};

class LSTMCell : public RNNCellBase {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true,
           Dtype dtype = Dtype::Undefined);
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = {},
                                     const Tensor& cx = {});
};

class GRUCell : public RNNCellBase {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true,
          Dtype dtype = Dtype::Undefined);
  Tensor forward(const Tensor& input, const Tensor& hx = {});
};

}  // namespace kiln::nn
