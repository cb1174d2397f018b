// The recurrent table ops: lstm_layer, gru_layer and rnn_layer run one layer in one direction over
// a whole (T, B, I) sequence; each derivative calls a fused backward op (lstm_layer_backward, ...),
// which has no derivative itself (double backward through an RNN raises NotImplemented). Here: the
// schemas, metas, derivatives and front ends; the CPU kernels are in kiln/backend/cpu/rnn.cpp (see
// there for the layout of the byte "reserve" output that the backward reads).
#include "kiln/autograd/autograd.h"
#include "kiln/autograd/function.h"
#include "kiln/nn/rnn.h"
#include "kiln/nn/rnn_detail.h"

namespace kiln {
namespace {

using namespace rnn_detail;

// the reserve holds the kernel's compute type: float32 for float16 / bfloat16 layers
SymInt bytes(Dtype d, SymInt n) {
  return n * static_cast<int64_t>(itemsize(d == kFloat64 ? d : kFloat32));
}
SymShape maybe(bool on, SymShape s) { return on ? s : SymShape{0}; }

// ==== LSTM =======================================================================================
// inputs {x, h0, c0, w_ih, w_hh, b_ih?, b_hh?, w_hr?}; attrs {reverse, train}; outputs {y, h_n,
// c_n, reserve}. train=False (as _cudnn_rnn's train): the call will not be differentiated, the
// reserve is empty and the kernel keeps no gates (the front end passes it when autograd will not
// record the call: under no_grad, in the runtime, for inputs that do not require grad).
SpecList lstm_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  Dtype dt = check_dtypes(op.name, in);
  auto d = lstm_dims(op.name, in);
  const bool train = a.size() < 2 || attr<bool>(a, 1);
  SymInt n = train ? d.T * d.B * (5 * d.H + (in[7].defined() ? d.H : 0)) : SymInt(0);
  return {{{d.T, d.B, d.R}, dt}, {{d.B, d.R}, dt}, {{d.B, d.H}, dt}, {{bytes(dt, n)}, kUInt8}};
}

OpDef op_lstm_layer{"lstm_layer", 0, lstm_meta, {}};
OpRegistrar reg_lstm_layer{op_lstm_layer, "lstm_layer(Tensor input, Tensor h0, Tensor c0, Tensor w_ih, Tensor w_hh, Tensor? b_ih, Tensor? b_hh, Tensor? w_hr, bool reverse, bool train=True) -> (Tensor, Tensor, Tensor, Tensor)"};

// inputs {x, h0, c0, w_ih, w_hh, w_hr?, y, reserve, dy, dh_n, dc_n}; attrs {reverse, mask}
// outputs {dx, dh0, dc0, dw_ih, dw_hh, db, dw_hr}; mask bit k: output k is wanted (else shape {0})
SpecList lstm_back_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  auto d = lstm_dims(op.name, SpecList{in[0], in[1], in[2], in[3], in[4], {}, {}, in[5]});
  Dtype dt = in[0].dtype();
  check_shape(op.name, "output", in[6], {d.T, d.B, d.R});
  // the reserve a call with train=True returns (the kernel reads all of it)
  const SymInt n = bytes(dt, d.T * d.B * (5 * d.H + (in[5].defined() ? d.H : 0)));
  KILN_CHECK(in[7].defined() && in[7].dtype() == kUInt8 && in[7].dim() == 1, Runtime, op.name,
             "reserve should be the uint8 vector lstm_layer returned");
  KILN_CHECK(!(in[7].sizes()[0] == 0) || n == 0, Runtime, op.name,
             "the reserve is empty: the forward call was made with train=False and kept nothing for a backward");
  check_shape(op.name, "reserve", in[7], {n});
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

OpDef op_lstm_layer_backward{"lstm_layer_backward", 0, lstm_back_meta, {}};
OpRegistrar reg_lstm_layer_backward{op_lstm_layer_backward, "lstm_layer_backward(Tensor input, Tensor h0, Tensor c0, Tensor w_ih, Tensor w_hh, Tensor? w_hr, Tensor output, Tensor reserve, Tensor? grad_output, Tensor? grad_h_n, Tensor? grad_c_n, bool reverse, int needs_mask) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)"};

TensorList lstm_layer_grad(const GradCtx& c, const TensorList& go) {
  KILN_CHECK(c.attrs.size() < 2 || attr<bool>(c.attrs, 1), Runtime, "lstm_layer",
             "backward of a call made with train=False (it kept nothing for the backward); pass "
             "train=True for a call that autograd differentiates");
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
SpecList gru_meta(const OpDef& op, const SpecList& in, const Attrs&) {
  Dtype dt = check_dtypes(op.name, in);
  auto d = gru_dims(op.name, in);
  return {{{d.T, d.B, d.H}, dt}, {{d.B, d.H}, dt}, {{bytes(dt, d.T * d.B * 4 * d.H)}, kUInt8}};
}

OpDef op_gru_layer{"gru_layer", 0, gru_meta, {}};
OpRegistrar reg_gru_layer{op_gru_layer, "gru_layer(Tensor input, Tensor h0, Tensor w_ih, Tensor w_hh, Tensor? b_ih, Tensor? b_hh, bool reverse) -> (Tensor, Tensor, Tensor)"};

// inputs {x, h0, w_ih, w_hh, y, reserve, dy, dh_n}; attrs {reverse, mask}
// outputs {dx, dh0, dw_ih, dw_hh, db_ih, db_hh}
SpecList gru_back_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  auto d = gru_dims(op.name, SpecList{in[0], in[1], in[2], in[3]});
  Dtype dt = in[0].dtype();
  check_shape(op.name, "output", in[4], {d.T, d.B, d.H});
  KILN_CHECK(in[5].defined() && in[5].dtype() == kUInt8 && in[5].dim() == 1, Runtime, op.name,
             "reserve should be the uint8 vector gru_layer returned");
  check_shape(op.name, "reserve", in[5], {bytes(dt, d.T * d.B * 4 * d.H)});
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

OpDef op_gru_layer_backward{"gru_layer_backward", 0, gru_back_meta, {}};
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

OpDef op_rnn_layer{"rnn_layer", 0, rnn_meta, {}};
OpRegistrar reg_rnn_layer{op_rnn_layer, "rnn_layer(Tensor input, Tensor h0, Tensor w_ih, Tensor w_hh, Tensor? b_ih, Tensor? b_hh, bool reverse, bool relu) -> (Tensor, Tensor)"};

// inputs {x, h0, w_ih, w_hh, y, dy, dh_n}; attrs {reverse, relu, mask}; outputs {dx, dh0, dw_ih,
// dw_hh, db}
SpecList rnn_back_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  auto d = layer_dims(op.name, in[0], in[2], 1);
  Dtype dt = in[0].dtype();
  check_shape(op.name, "weight_ih", in[2], {d.H, d.I});
  check_shape(op.name, "weight_hh", in[3], {d.H, d.H});
  check_shape(op.name, "h0", in[1], {d.B, d.H});
  check_shape(op.name, "output", in[4], {d.T, d.B, d.H});
  check_shape(op.name, "grad_output", in[5], {d.T, d.B, d.H});
  check_shape(op.name, "grad_h_n", in[6], {d.B, d.H});
  const int64_t m = attr<int64_t>(a, 2);
  return {{maybe(m & 1, {d.T, d.B, d.I}), dt},
          {maybe(m & 2, {d.B, d.H}), dt},
          {maybe(m & 4, {d.H, d.I}), dt},
          {maybe(m & 8, {d.H, d.H}), dt},
          {maybe(m & 16, {d.H}), dt}};
}

OpDef op_rnn_layer_backward{"rnn_layer_backward", 0, rnn_back_meta, {}};
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
  TensorList in{x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr};
  const bool train = autograd::function_needs_record(in);
  TensorList r = run(op_lstm_layer, std::move(in), {reverse, train}, 3);
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
