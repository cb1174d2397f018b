// Python binding: recurrent modules (kiln._C._nn.RNNBase and the cells, wrapped by kiln/nn/rnn.py),
// torch's cell functions (kiln.lstm_cell, gru_cell, rnn_tanh_cell, rnn_relu_cell) and the layer
// ops (kiln._C._nn.lstm_layer, gru_layer, rnn_layer).
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "common.h"
#include "kiln/nn/rnn.h"

namespace kiln::py {
namespace {

Tensor opt_t(nb::handle h) { return h.is_none() ? Tensor() : nb::cast<Tensor>(h); }
nb::object opt_obj(const Tensor& t) { return t.defined() ? nb::cast(t) : nb::none(); }
Dtype dt(nb::handle h) { return as_opt_dtype(h).value_or(Dtype::Undefined); }

// An LSTM state argument: None or a pair (h, c).
std::pair<Tensor, Tensor> state_pair(nb::handle hx, const char* op) {
  if (hx.is_none()) return {};
  KILN_CHECK(nb::isinstance<nb::tuple>(hx) || nb::isinstance<nb::list>(hx), Type, op,
             "hx must be a tuple (h_0, c_0)");
  nb::sequence s = nb::borrow<nb::sequence>(hx);
  KILN_CHECK(nb::len(s) == 2, Runtime, op, "hx must hold two tensors (h_0, c_0), got ", nb::len(s));
  return {nb::cast<Tensor>(s[0]), nb::cast<Tensor>(s[1])};
}

}  // namespace

void bind_rnn(nb::module_& m) {
  // torch.nn.utils.rnn's packing (python/kiln/nn/utils/rnn.py wraps them in PackedSequence)
  m.def(
      "_pack_padded_sequence",
      [](const Tensor& input, const Tensor& lengths, bool batch_first, bool enforce_sorted) {
        auto p = nn::utils::rnn::pack_padded_sequence(input, lengths, batch_first, enforce_sorted);
        return nb::make_tuple(p.data, p.batch_sizes, opt_obj(p.sorted_indices), opt_obj(p.unsorted_indices));
      },
      "input"_a, "lengths"_a, "batch_first"_a, "enforce_sorted"_a);
  m.def(
      "_pad_packed_sequence",
      [](const Tensor& data, const Tensor& batch_sizes, nb::handle sorted, nb::handle unsorted, bool batch_first,
         double padding_value, std::optional<int64_t> total_length) {
        auto [p, l] = nn::utils::rnn::pad_packed_sequence({data, batch_sizes, opt_t(sorted), opt_t(unsorted)},
                                                          batch_first, padding_value, total_length);
        return nb::make_tuple(p, l);
      },
      "data"_a, "batch_sizes"_a, "sorted_indices"_a.none(), "unsorted_indices"_a.none(), "batch_first"_a,
      "padding_value"_a, "total_length"_a.none());
  m.def("_invert_permutation", &nn::utils::rnn::invert_permutation);
  using namespace kiln::nn;
  nb::module_ nnm = nb::borrow<nb::module_>(m.attr("_nn"));

  nb::class_<RNNBase, Module>(nnm, "RNNBase")
      .def(
          "__init__",
          [](RNNBase* self, const std::string& mode, int64_t in, int64_t hidden, int64_t layers,
             bool bias, bool batch_first, double dropout, bool bidirectional, int64_t proj,
             nb::handle dtype) {
            new (self) RNNBase(mode, in, hidden, layers, bias, batch_first, dropout, bidirectional,
                               proj, dt(dtype));
          },
          "mode"_a, "input_size"_a, "hidden_size"_a, "num_layers"_a = 1, "bias"_a = true,
          "batch_first"_a = false, "dropout"_a = 0.0, "bidirectional"_a = false, "proj_size"_a = 0,
          "dtype"_a.none() = nb::none())
      // (output, h_n, c_n or None)
      .def(
          "run",
          [](RNNBase& r, const Tensor& x, nb::handle hx, nb::handle cx) {
            auto [o, h, c] = r.run(x, opt_t(hx), opt_t(cx));
            return nb::make_tuple(o, h, opt_obj(c));
          },
          "input"_a, "hx"_a.none() = nb::none(), "cx"_a.none() = nb::none())
      .def(
          "run_packed",
          [](RNNBase& r, const Tensor& data, const Tensor& batch_sizes, nb::handle hx, nb::handle cx) {
            auto [o, h, c] = r.run_packed(data, batch_sizes, opt_t(hx), opt_t(cx));
            return nb::make_tuple(o, h, opt_obj(c));
          },
          "data"_a, "batch_sizes"_a, "hx"_a.none() = nb::none(), "cx"_a.none() = nb::none())
      .def("reset_parameters", &RNNBase::reset_parameters)
      .def("_all_weights", &RNNBase::all_weight_names);

  nb::class_<RNNCellBase, Module>(nnm, "RNNCellBase")
      .def("reset_parameters", &RNNCellBase::reset_parameters);
  nb::class_<RNNCell, RNNCellBase>(nnm, "RNNCell")
      .def(
          "__init__",
          [](RNNCell* self, int64_t in, int64_t hidden, bool bias, const std::string& nl,
             nb::handle dtype) { new (self) RNNCell(in, hidden, bias, nl, dt(dtype)); },
          "input_size"_a, "hidden_size"_a, "bias"_a = true, "nonlinearity"_a = "tanh",
          "dtype"_a.none() = nb::none())
      .def(
          "forward",
          [](RNNCell& c, const Tensor& x, nb::handle hx) { return c.forward(x, opt_t(hx)); },
          "input"_a, "hx"_a.none() = nb::none());
  nb::class_<LSTMCell, RNNCellBase>(nnm, "LSTMCell")
      .def(
          "__init__",
          [](LSTMCell* self, int64_t in, int64_t hidden, bool bias, nb::handle dtype) {
            new (self) LSTMCell(in, hidden, bias, dt(dtype));
          },
          "input_size"_a, "hidden_size"_a, "bias"_a = true, "dtype"_a.none() = nb::none())
      .def(
          "forward",
          [](LSTMCell& c, const Tensor& x, nb::handle hx) {
            auto [h, cc] = state_pair(hx, "LSTMCell");
            return c.forward(x, h, cc);
          },
          "input"_a, "hx"_a.none() = nb::none());
  nb::class_<GRUCell, RNNCellBase>(nnm, "GRUCell")
      .def(
          "__init__",
          [](GRUCell* self, int64_t in, int64_t hidden, bool bias, nb::handle dtype) {
            new (self) GRUCell(in, hidden, bias, dt(dtype));
          },
          "input_size"_a, "hidden_size"_a, "bias"_a = true, "dtype"_a.none() = nb::none())
      .def(
          "forward",
          [](GRUCell& c, const Tensor& x, nb::handle hx) { return c.forward(x, opt_t(hx)); },
          "input"_a, "hx"_a.none() = nb::none());

  // one layer, one direction, the whole (T, B, I) sequence
  nnm.def(
      "lstm_layer",
      [](const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih,
         const Tensor& w_hh, nb::handle b_ih, nb::handle b_hh, nb::handle w_hr, bool reverse) {
        return lstm_layer(x, h0, c0, w_ih, w_hh, opt_t(b_ih), opt_t(b_hh), opt_t(w_hr), reverse);
      },
      "input"_a, "h0"_a, "c0"_a, "w_ih"_a, "w_hh"_a, "b_ih"_a.none() = nb::none(),
      "b_hh"_a.none() = nb::none(), "w_hr"_a.none() = nb::none(), "reverse"_a = false);
  nnm.def(
      "gru_layer",
      [](const Tensor& x, const Tensor& h0, const Tensor& w_ih, const Tensor& w_hh, nb::handle b_ih,
         nb::handle b_hh,
         bool reverse) { return gru_layer(x, h0, w_ih, w_hh, opt_t(b_ih), opt_t(b_hh), reverse); },
      "input"_a, "h0"_a, "w_ih"_a, "w_hh"_a, "b_ih"_a.none() = nb::none(),
      "b_hh"_a.none() = nb::none(), "reverse"_a = false);
  nnm.def(
      "rnn_layer",
      [](const Tensor& x, const Tensor& h0, const Tensor& w_ih, const Tensor& w_hh, nb::handle b_ih,
         nb::handle b_hh, bool relu, bool reverse) {
        return rnn_layer(x, h0, w_ih, w_hh, opt_t(b_ih), opt_t(b_hh), relu, reverse);
      },
      "input"_a, "h0"_a, "w_ih"_a, "w_hh"_a, "b_ih"_a.none() = nb::none(),
      "b_hh"_a.none() = nb::none(), "relu"_a = false, "reverse"_a = false);

  // torch.lstm_cell & co.: batched (B, I) inputs
  // lstm_cell, gru_cell, rnn_tanh_cell, rnn_relu_cell: from their composites' schemas (kiln/nn/rnn.cpp)
}

}  // namespace kiln::py
