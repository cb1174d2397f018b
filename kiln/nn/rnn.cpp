// Recurrent modules and cells (the table ops they run are in rnn_kernels.cpp).
#include "kiln/nn/rnn.h"

#include <charconv>
#include <cmath>

#include "kiln/nn/functional.h"
#include "kiln/nn/init.h"
#include "kiln/ops/composite.h"

namespace kiln::nn {
namespace {

TensorOptions opts(Dtype d) { return TensorOptions(d == Dtype::Undefined ? default_dtype() : d); }
std::string pyfloat(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}
std::string pylist(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}
std::string pydtype(Dtype d) { return "kiln." + std::string(dtype_name(d)); }
std::string display_name(const std::string& mode) {
  return mode == "RNN_TANH" || mode == "RNN_RELU" ? "RNN" : mode;
}
std::string rnn_mode(const std::string& nl) {
  KILN_CHECK(nl == "tanh" || nl == "relu", Value, "RNN", "Unknown nonlinearity '", nl,
             "'. Select from 'tanh' or 'relu'.");
  return nl == "relu" ? "RNN_RELU" : "RNN_TANH";
}
void init_uniform(Module& m, int64_t hidden) {
  double stdv = hidden > 0 ? 1.0 / std::sqrt(static_cast<double>(hidden)) : 0.0;
  for (auto& [name, p] : m.own_parameters())
    if (p.defined()) init::uniform_(p, -stdv, stdv);
}

}  // namespace

// ---- RNNBase ------------------------------------------------------------------------------------
RNNBase::RNNBase(std::string mode_, int64_t input_size_, int64_t hidden_size_, int64_t num_layers_,
                 bool bias_, bool batch_first_, double dropout_, bool bidirectional_,
                 int64_t proj_size_, Dtype dtype)
    : Module(display_name(mode_)),
      mode(std::move(mode_)),
      input_size(input_size_),
      hidden_size(hidden_size_),
      num_layers(num_layers_),
      proj_size(proj_size_),
      bias(bias_),
      batch_first(batch_first_),
      bidirectional(bidirectional_),
      dropout(dropout_) {
  const char* op = name_.c_str();
  KILN_CHECK(
      dropout >= 0 && dropout <= 1, Value, op,
      "dropout should be a number in range [0, 1] representing the probability of an element "
      "being zeroed");
  KILN_CHECK(input_size > 0, Value, op, "input_size must be greater than zero");
  KILN_CHECK(hidden_size > 0, Value, op, "hidden_size must be greater than zero");
  KILN_CHECK(num_layers > 0, Value, op, "num_layers must be greater than zero");
  KILN_CHECK(proj_size >= 0, Value, op,
             "proj_size should be a positive integer or zero to disable projections");
  KILN_CHECK(proj_size < hidden_size, Value, op, "proj_size has to be smaller than hidden_size");
  int64_t chunks = 0;
  if (mode == "LSTM")
    chunks = 4;
  else if (mode == "GRU")
    chunks = 3;
  else if (mode == "RNN_TANH" || mode == "RNN_RELU")
    chunks = 1;
  KILN_CHECK(chunks > 0, Value, op, "Unrecognized RNN mode: ", mode);
  KILN_CHECK(proj_size == 0 || mode == "LSTM", Value, op,
             "proj_size argument is only supported for LSTM, not RNN or GRU");
  const int64_t dirs = bidirectional ? 2 : 1, real = proj_size > 0 ? proj_size : hidden_size;
  const int64_t gate = chunks * hidden_size;
  for (int64_t l = 0; l < num_layers; ++l)
    for (int64_t d = 0; d < dirs; ++d) {
      std::string sfx = std::to_string(l) + (d == 1 ? "_reverse" : "");
      int64_t in = l == 0 ? input_size : real * dirs;
      std::vector<std::string> names{"weight_ih_l" + sfx, "weight_hh_l" + sfx};
      register_parameter(names[0], empty({gate, in}, opts(dtype)));
      register_parameter(names[1], empty({gate, real}, opts(dtype)));
      if (bias) {
        names.push_back("bias_ih_l" + sfx);
        names.push_back("bias_hh_l" + sfx);
        register_parameter(names[2], empty({gate}, opts(dtype)));
        register_parameter(names[3], empty({gate}, opts(dtype)));
      }
      if (proj_size > 0) {
        names.push_back("weight_hr_l" + sfx);
        register_parameter(names.back(), empty({proj_size, hidden_size}, opts(dtype)));
      }
      names_.push_back(std::move(names));
    }
  reset_parameters();
}

void RNNBase::reset_parameters() { init_uniform(*this, hidden_size); }

std::string RNNBase::extra_repr() const {
  std::string s = std::to_string(input_size) + ", " + std::to_string(hidden_size);
  if (proj_size != 0) s += ", proj_size=" + std::to_string(proj_size);
  if (num_layers != 1) s += ", num_layers=" + std::to_string(num_layers);
  if (!bias) s += ", bias=False";
  if (batch_first) s += ", batch_first=True";
  if (dropout != 0) s += ", dropout=" + pyfloat(dropout);
  if (bidirectional) s += ", bidirectional=True";
  return s;
}

std::tuple<Tensor, Tensor, Tensor> RNNBase::layer(int64_t l, int64_t d, const Tensor& seq,
                                                  const Tensor& h0, const Tensor& c0) {
  const auto& nm = names_[l * (bidirectional ? 2 : 1) + d];
  const Tensor &wih = param(nm[0]), &whh = param(nm[1]);
  Tensor bih = bias ? param(nm[2]) : Tensor(), bhh = bias ? param(nm[3]) : Tensor();
  if (mode == "LSTM")
    return lstm_layer(seq, h0, c0, wih, whh, bih, bhh, proj_size > 0 ? param(nm.back()) : Tensor(), d == 1);
  auto [y, h] = mode == "GRU" ? gru_layer(seq, h0, wih, whh, bih, bhh, d == 1)
                              : rnn_layer(seq, h0, wih, whh, bih, bhh, mode == "RNN_RELU", d == 1);
  return {y, h, Tensor()};
}

// A packed batch runs as one layer call per run of steps with the same batch size: going forward
// the batch shrinks and the rows that dropped out keep their final state; going backward it grows
// and the rows that join start from h0 (each sequence's reverse pass starts at its own last step).
std::tuple<Tensor, Tensor, Tensor> RNNBase::run_packed(const Tensor& data, const Tensor& batch_sizes,
                                                       const Tensor& hx_, const Tensor& cx_) {
  const char* op = name_.c_str();
  const bool lstm = mode == "LSTM";
  KILN_CHECK(data.dim() == 2, Runtime, op, "packed input must have 2 dimensions, got ", data.dim());
  KILN_CHECK(batch_sizes.dim() == 1 && batch_sizes.numel() > 0 && batch_sizes.dtype() == kInt64, Runtime, op,
             "batch_sizes should be a non-empty 1D int64 tensor");
  const Tensor bsc = batch_sizes.contiguous();
  const int64_t* bs = static_cast<const int64_t*>(bsc.data_ptr());
  const int64_t T = bsc.numel(), B = bs[0], dirs = bidirectional ? 2 : 1;
  const int64_t real = proj_size > 0 ? proj_size : hidden_size;
  // runs of equal batch size: (first step, steps, batch, first data row)
  struct Run { int64_t t0, n, b, row; };
  std::vector<Run> runs;
  for (int64_t t = 0, row = 0; t < T; ++t) {
    KILN_CHECK(bs[t] > 0 && bs[t] <= (t ? bs[t - 1] : B), Runtime, op, "batch_sizes must be positive and non-increasing");
    if (runs.empty() || runs.back().b != bs[t]) runs.push_back({t, 0, bs[t], row});
    ++runs.back().n;
    row += bs[t];
  }
  KILN_CHECK(data.size(0) == runs.back().row + runs.back().n * runs.back().b, Runtime, op,
             "packed data has ", data.size(0), " rows, batch_sizes sum to a different count");
  KILN_CHECK(data.size(1) == input_size, Runtime, op, "input.size(-1) must be equal to input_size. Expected ",
             input_size, ", got ", data.size(1));
  Tensor hx = hx_, cx = cx_;
  if (!hx.defined()) {
    hx = zeros({num_layers * dirs, B, lstm ? real : hidden_size}, TensorOptions(data.dtype()));
    if (lstm) cx = zeros({num_layers * dirs, B, hidden_size}, TensorOptions(data.dtype()));
  }
  KILN_CHECK(hx.sizes() == (Shape{num_layers * dirs, B, real}), Runtime, op,
             lstm ? "Expected hidden[0] size " : "Expected hidden size ",
             pylist({num_layers * dirs, B, real}), ", got ", pylist(hx.sizes()));
  if (lstm)
    KILN_CHECK(cx.defined() && cx.sizes() == (Shape{num_layers * dirs, B, hidden_size}), Runtime, op,
               "Expected hidden[1] size ", pylist({num_layers * dirs, B, hidden_size}));
  Tensor seq = data;
  TensorList hn, cn;
  for (int64_t l = 0; l < num_layers; ++l) {
    TensorList ys;
    for (int64_t d = 0; d < dirs; ++d) {
      Tensor h = select(hx, 0, l * dirs + d), c = lstm ? select(cx, 0, l * dirs + d) : Tensor();
      std::vector<Tensor> parts(runs.size());
      for (size_t k = 0; k < runs.size(); ++k) {
        const Run& r = runs[d == 0 ? k : runs.size() - 1 - k];
        Tensor x = reshape(narrow(seq, 0, r.row, r.n * r.b), {r.n, r.b, seq.size(1)});
        auto keep = [&](const Tensor& full, const Tensor& fresh) {
          return r.b == B ? fresh : cat({fresh, narrow(full, 0, r.b, B - r.b)}, 0);
        };
        auto [y, hn_r, cn_r] = layer(l, d, x, narrow(h, 0, 0, r.b), lstm ? narrow(c, 0, 0, r.b) : Tensor());
        h = keep(h, hn_r);
        if (lstm) c = keep(c, cn_r);
        parts[d == 0 ? k : runs.size() - 1 - k] = reshape(y, {r.n * r.b, y.size(2)});
      }
      ys.push_back(parts.size() == 1 ? parts[0] : cat(TensorList(parts.begin(), parts.end()), 0));
      hn.push_back(h);
      if (lstm) cn.push_back(c);
    }
    seq = dirs == 1 ? ys[0] : cat(ys, 1);
    if (dropout > 0 && is_training() && l + 1 < num_layers) seq = F::dropout(seq, dropout, true);
  }
  return {seq, stack(hn, 0), lstm ? stack(cn, 0) : Tensor()};
}

std::tuple<utils::rnn::PackedSequence, Tensor, Tensor> RNNBase::run(const utils::rnn::PackedSequence& in,
                                                                    const Tensor& hx, const Tensor& cx) {
  auto permute = [](const Tensor& t, const Tensor& idx) {
    return t.defined() && idx.defined() ? index_select(t, 1, idx) : t;
  };
  auto [data, h, c] = run_packed(in.data, in.batch_sizes, permute(hx, in.sorted_indices),
                                 permute(cx, in.sorted_indices));
  return {utils::rnn::PackedSequence{data, in.batch_sizes, in.sorted_indices, in.unsorted_indices},
          permute(h, in.unsorted_indices), permute(c, in.unsorted_indices)};
}

std::tuple<Tensor, Tensor, Tensor> RNNBase::run(const Tensor& input, const Tensor& hx_,
                                                const Tensor& cx_) {
  const char* op = name_.c_str();
  const bool lstm = mode == "LSTM";
  KILN_CHECK(input.dim() == 2 || input.dim() == 3, Value, op, name_,
             ": Expected input to be 2D or 3D, got ", input.dim(),
             mode == "GRU" || lstm ? "D instead" : "D tensor instead");
  KILN_CHECK(!lstm || hx_.defined() == cx_.defined(), Runtime, op,
             "LSTM expects both hx and cx, or neither");
  const bool batched = input.dim() == 3;
  const int64_t batch_dim = batch_first ? 0 : 1, dirs = bidirectional ? 2 : 1;
  const int64_t real = proj_size > 0 ? proj_size : hidden_size;
  Tensor x = batched ? input : unsqueeze(input, batch_dim);
  Tensor hx = hx_, cx = cx_;
  if (hx.defined()) {
    const int64_t want = batched ? 3 : 2;
    if (lstm) {
      KILN_CHECK(hx.dim() == want && cx.dim() == want, Runtime, op,
                 batched ? "For batched 3-D input, hx and cx should also be 3-D"
                         : "For unbatched 2-D input, hx and cx should also be 2-D",
                 " but got (", hx.dim(), "-D, ", cx.dim(), "-D) tensors");
    } else {
      KILN_CHECK(hx.dim() == want, Runtime, op,
                 batched ? "For batched 3-D input, hx should also be 3-D"
                         : "For unbatched 2-D input, hx should also be 2-D",
                 " but got ", hx.dim(), "-D tensor");
    }
    if (!batched) {
      hx = unsqueeze(hx, 1);
      if (cx.defined()) cx = unsqueeze(cx, 1);
    }
  }
  const SymInt B = x.sym_size(batch_dim);  // symbolic in an export trace: nothing below pins it
  if (!hx.defined()) {
    hx = zeros(raw_shape({num_layers * dirs, B, lstm ? real : hidden_size}), TensorOptions(x.dtype()));
    if (lstm) cx = zeros(raw_shape({num_layers * dirs, B, hidden_size}), TensorOptions(x.dtype()));
  }
  const Tensor& w0 = param(names_[0][0]);
  KILN_CHECK(x.dtype() == w0.dtype(), Value, op, "RNN input dtype (", pydtype(x.dtype()),
             ") does not match weight dtype (", pydtype(w0.dtype()), "). Convert input: input.to(",
             pydtype(w0.dtype()), "), or convert model: model.to(", pydtype(x.dtype()), ")");
  KILN_CHECK(x.size(-1) == input_size, Runtime, op,
             "input.size(-1) must be equal to input_size. Expected ", input_size, ", got ",
             x.size(-1));
  SymShape hs{num_layers * dirs, B, real};
  KILN_CHECK(has_sizes(hx, hs), Runtime, op, lstm ? "Expected hidden[0] size " : "Expected hidden size ",
             sym_str(hs), ", got ", pylist(hx.sizes()));
  if (lstm) {
    SymShape cs{num_layers * dirs, B, hidden_size};
    KILN_CHECK(has_sizes(cx, cs), Runtime, op, "Expected hidden[1] size ", sym_str(cs), ", got ", pylist(cx.sizes()));
  }
  KILN_CHECK(bool(x.sym_size(batch_first ? 1 : 0) > 0), Runtime, op,
             "Expected sequence length to be larger than 0 in RNN");

  Tensor seq = batch_first ? transpose(x, 0, 1) : x;  // (T, B, I)
  TensorList hn, cn;
  for (int64_t l = 0; l < num_layers; ++l) {
    TensorList ys;
    for (int64_t d = 0; d < dirs; ++d) {
      auto [y, h, c] = layer(l, d, seq, select(hx, 0, l * dirs + d),
                             lstm ? select(cx, 0, l * dirs + d) : Tensor());
      if (lstm) cn.push_back(c);
      ys.push_back(y);
      hn.push_back(h);
    }
    seq = dirs == 1 ? ys[0] : cat(ys, 2);
    if (dropout > 0 && is_training() && l + 1 < num_layers) seq = F::dropout(seq, dropout, true);
  }
  Tensor out = batch_first ? transpose(seq, 0, 1) : seq;
  Tensor h_n = stack(hn, 0), c_n = lstm ? stack(cn, 0) : Tensor();
  if (!batched) {
    out = squeeze(out, Shape{batch_dim});
    h_n = squeeze(h_n, Shape{1});
    if (lstm) c_n = squeeze(c_n, Shape{1});
  }
  return {out, h_n, c_n};
}

RNN::RNN(int64_t input_size, int64_t hidden_size, int64_t num_layers, const std::string& nl,
         bool bias, bool batch_first, double dropout, bool bidirectional, Dtype dtype)
    : RNNBase(rnn_mode(nl), input_size, hidden_size, num_layers, bias, batch_first, dropout,
              bidirectional, 0, dtype),
      nonlinearity(nl) {}
std::tuple<Tensor, Tensor> RNN::forward(const Tensor& input, const Tensor& hx) {
  auto [out, h, c] = run(input, hx, {});
  return {out, h};
}
std::tuple<utils::rnn::PackedSequence, Tensor> RNN::forward(const utils::rnn::PackedSequence& input,
                                                            const Tensor& hx) {
  auto [out, h, c] = run(input, hx, {});
  return {out, h};
}

LSTM::LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias, bool batch_first,
           double dropout, bool bidirectional, int64_t proj_size, Dtype dtype)
    : RNNBase("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
              bidirectional, proj_size, dtype) {}
std::tuple<Tensor, std::tuple<Tensor, Tensor>> LSTM::forward(const Tensor& input, const Tensor& hx,
                                                             const Tensor& cx) {
  auto [out, h, c] = run(input, hx, cx);
  return {out, {h, c}};
}
std::tuple<utils::rnn::PackedSequence, std::tuple<Tensor, Tensor>> LSTM::forward(
    const utils::rnn::PackedSequence& input, const Tensor& hx, const Tensor& cx) {
  auto [out, h, c] = run(input, hx, cx);
  return {out, {h, c}};
}

GRU::GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias, bool batch_first,
         double dropout, bool bidirectional, Dtype dtype)
    : RNNBase("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
              0, dtype) {}
std::tuple<Tensor, Tensor> GRU::forward(const Tensor& input, const Tensor& hx) {
  auto [out, h, c] = run(input, hx, {});
  return {out, h};
}
std::tuple<utils::rnn::PackedSequence, Tensor> GRU::forward(const utils::rnn::PackedSequence& input,
                                                            const Tensor& hx) {
  auto [out, h, c] = run(input, hx, {});
  return {out, h};
}

// ---- cells --------------------------------------------------------------------------------------
namespace {
void check_cell(const char* op, const Tensor& x, const Tensor& h, const Tensor& c,
                const Tensor& w_ih, const Tensor& w_hh) {
  KILN_CHECK(x.dim() == 2, Runtime, op, "input must be 2-D (batch, input_size), got ", x.dim(),
             "-D");
  KILN_CHECK(x.size(1) == w_ih.size(1), Runtime, op, "input has inconsistent input_size: got ",
             x.size(1), " expected ", w_ih.size(1));
  const int64_t H = w_hh.size(1);
  int k = 0;
  for (const Tensor* t : {&h, &c}) {
    if (t->defined()) {
      KILN_CHECK(t->dim() >= 2, Runtime, op, "hidden", k, " must be 2-D, got ", t->dim(), "-D");
      KILN_CHECK(t->size(0) == x.size(0), Runtime, op, "Input batch size ", x.size(0),
                 " doesn't match hidden", k, " batch size ", t->size(0));
      KILN_CHECK(t->size(1) == H, Runtime, op, "hidden", k, " has inconsistent hidden_size: got ",
                 t->size(1), ", expected ", H);
      KILN_CHECK(t->dim() == 2, Runtime, op, "hidden", k, " must be 2-D, got ", t->dim(), "-D");
    }
    ++k;
  }
}
Tensor elman_cell(const char* op, bool relu, const Tensor& x, const Tensor& h, const Tensor& w_ih,
                  const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh) {
  check_cell(op, x, h, {}, w_ih, w_hh);
  return std::get<1>(rnn_layer(unsqueeze(x, 0), h, w_ih, w_hh, b_ih, b_hh, relu));
}
}  // namespace

Tensor rnn_tanh_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih, const Tensor& b_hh) {
  return elman_cell("rnn_tanh_cell", false, x, h, w_ih, w_hh, b_ih, b_hh);
}
Tensor rnn_relu_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih, const Tensor& b_hh) {
  return elman_cell("rnn_relu_cell", true, x, h, w_ih, w_hh, b_ih, b_hh);
}
std::tuple<Tensor, Tensor> lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c,
                                     const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                                     const Tensor& b_hh) {
  check_cell("lstm_cell", x, h, c, w_ih, w_hh);
  auto [y, hn, cn] = lstm_layer(unsqueeze(x, 0), h, c, w_ih, w_hh, b_ih, b_hh, {});
  return {hn, cn};
}
Tensor gru_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih, const Tensor& b_hh) {
  check_cell("gru_cell", x, h, {}, w_ih, w_hh);
  return std::get<1>(gru_layer(unsqueeze(x, 0), h, w_ih, w_hh, b_ih, b_hh));
}

RNNCellBase::RNNCellBase(std::string name, int64_t input_size_, int64_t hidden_size_, bool bias_,
                         int64_t chunks, Dtype dtype)
    : Module(std::move(name)), input_size(input_size_), hidden_size(hidden_size_), bias(bias_) {
  register_parameter("weight_ih", empty({chunks * hidden_size, input_size}, opts(dtype)));
  register_parameter("weight_hh", empty({chunks * hidden_size, hidden_size}, opts(dtype)));
  register_parameter("bias_ih", bias ? empty({chunks * hidden_size}, opts(dtype)) : Tensor());
  register_parameter("bias_hh", bias ? empty({chunks * hidden_size}, opts(dtype)) : Tensor());
  reset_parameters();
}
void RNNCellBase::reset_parameters() { init_uniform(*this, hidden_size); }
std::string RNNCellBase::extra_repr() const {
  std::string s = std::to_string(input_size) + ", " + std::to_string(hidden_size);
  return bias ? s : s + ", bias=False";
}

bool RNNCellBase::prepare(Tensor& x, Tensor& h, Tensor* c) const {
  const char* op = name_.c_str();
  KILN_CHECK(x.dim() == 1 || x.dim() == 2, Value, op, name_,
             ": Expected input to be 1D or 2D, got ", x.dim(), "D instead");
  int k = 0;
  for (Tensor* t : {&h, c}) {
    if (t && t->defined()) {
      if (c) {
        KILN_CHECK(t->dim() == 1 || t->dim() == 2, Value, op, name_, ": Expected hx[", k,
                   "] to be 1D or 2D, got ", t->dim(), "D instead");
      } else {
        KILN_CHECK(t->dim() == 1 || t->dim() == 2, Value, op, name_,
                   ": Expected hidden to be 1D or 2D, got ", t->dim(), "D instead");
      }
    }
    ++k;
  }
  const bool batched = x.dim() == 2;
  if (!batched) x = unsqueeze(x, 0);
  for (Tensor* t : {&h, c}) {
    if (!t) continue;
    if (!t->defined())
      *t = zeros({x.size(0), hidden_size}, TensorOptions(x.dtype()));
    else if (!batched)
      *t = unsqueeze(*t, 0);
  }
  return batched;
}

RNNCell::RNNCell(int64_t input_size, int64_t hidden_size, bool bias, const std::string& nl,
                 Dtype dtype)
    : RNNCellBase("RNNCell", input_size, hidden_size, bias, 1, dtype), nonlinearity(nl) {}
std::string RNNCell::extra_repr() const {
  std::string s = RNNCellBase::extra_repr();
  return nonlinearity == "tanh" ? s : s + ", nonlinearity=" + nonlinearity;
}
Tensor RNNCell::forward(const Tensor& input, const Tensor& hx) {
  Tensor x = input, h = hx;
  bool batched = prepare(x, h, nullptr);
  Tensor r;
  if (nonlinearity == "tanh")
    r = rnn_tanh_cell(x, h, param("weight_ih"), param("weight_hh"), param("bias_ih"),
                      param("bias_hh"));
  else if (nonlinearity == "relu")
    r = rnn_relu_cell(x, h, param("weight_ih"), param("weight_hh"), param("bias_ih"),
                      param("bias_hh"));
  else
    KILN_FAIL(Runtime, "RNNCell", "Unknown nonlinearity: ", nonlinearity);
  return batched ? r : squeeze(r, Shape{0});
}

LSTMCell::LSTMCell(int64_t input_size, int64_t hidden_size, bool bias, Dtype dtype)
    : RNNCellBase("LSTMCell", input_size, hidden_size, bias, 4, dtype) {}
std::tuple<Tensor, Tensor> LSTMCell::forward(const Tensor& input, const Tensor& hx,
                                             const Tensor& cx) {
  KILN_CHECK(hx.defined() == cx.defined(), Runtime, "LSTMCell",
             "expects both hx and cx, or neither");
  Tensor x = input, h = hx, c = cx;
  bool batched = prepare(x, h, &c);
  auto [hn, cn] = lstm_cell(x, h, c, param("weight_ih"), param("weight_hh"), param("bias_ih"),
                            param("bias_hh"));
  if (batched) return {hn, cn};
  return {squeeze(hn, Shape{0}), squeeze(cn, Shape{0})};
}

GRUCell::GRUCell(int64_t input_size, int64_t hidden_size, bool bias, Dtype dtype)
    : RNNCellBase("GRUCell", input_size, hidden_size, bias, 3, dtype) {}
Tensor GRUCell::forward(const Tensor& input, const Tensor& hx) {
  Tensor x = input, h = hx;
  bool batched = prepare(x, h, nullptr);
  Tensor r =
      gru_cell(x, h, param("weight_ih"), param("weight_hh"), param("bias_ih"), param("bias_hh"));
  return batched ? r : squeeze(r, Shape{0});
}


// ---- the cells' composites with torch's schemas (ops/composite.h) --------------------------------
namespace {
#define KILN_CELL(name)                                                                                        \
  Composite c_##name{#name "(Tensor input, Tensor hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, "               \
                     "Tensor? b_hh=None) -> Tensor",                                                             \
                     [](const TensorList& in, const Attrs&) -> TensorList {                                      \
                       return {name(in[0], in[1], in[2], in[3], in[4], in[5])};                                   \
                     },                                                                                          \
                     kFunctionVariant};
KILN_CELL(rnn_tanh_cell)
KILN_CELL(rnn_relu_cell)
KILN_CELL(gru_cell)
#undef KILN_CELL
// hx = (h, c): a tensor list between input and the weights, so its two entries are in[1], in[2]
Composite c_lstm_cell{"lstm_cell(Tensor input, Tensor[] hx, Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, "
                      "Tensor? b_hh=None) -> (Tensor, Tensor)",
                      [](const TensorList& in, const Attrs&) -> TensorList {
                        KILN_CHECK(in.size() == 7, Runtime, "lstm_cell", "hx must hold two tensors (h_0, c_0), got ",
                                   static_cast<int64_t>(in.size()) - 5);
                        auto [h, c] = lstm_cell(in[0], in[1], in[2], in[3], in[4], in[5], in[6]);
                        return {h, c};
                      },
                      kFunctionVariant};
}  // namespace

}  // namespace kiln::nn
