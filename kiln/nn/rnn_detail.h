// What the recurrent ops' metas (kiln/nn/rnn_ops.cpp) and their CPU kernels
// (kiln/backend/cpu/rnn.cpp) share: the dtype and shape checks and the layer dimensions, written
// over Tensor / TensorSpec lists (the metas compute in SymInts).
#pragma once

#include <type_traits>

#include "kiln/dispatch/op.h"

namespace kiln::rnn_detail {

// L: TensorList (kernels) or SpecList (metas, in SymInts); X its element.
template <class L>
inline Dtype check_dtypes(const char* op, const L& in) {
  Dtype d = in[0].dtype();
  KILN_CHECK(d == kFloat32 || d == kFloat64 || d == kBFloat16 || d == kFloat16, Runtime, op,
             "expected a floating-point input, got ", dtype_name(d));
  for (const auto& t : in)
    if (t.defined())
      KILN_CHECK(t.dtype() == d, Runtime, op, "expected all tensors to have dtype ", dtype_name(d),
                 ", but got ", dtype_name(t.dtype()));
  return d;
}
template <class X>
inline void check_shape(const char* op, const char* what, const X& t,
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

}  // namespace kiln::rnn_detail
