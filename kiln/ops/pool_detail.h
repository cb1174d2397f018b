// What the pooling ops' metas (kiln/ops/pool.cpp) and their CPU kernels (kiln/backend/cpu/pool.cpp)
// share: the window in 3-d form, torch's output-size rules, average pooling's arguments and the
// adaptive pooling bounds.
#pragma once

#include <algorithm>

#include "kiln/ops/nn_detail.h"
#include "kiln/ops/nn_ops.h"

namespace kiln::pool_detail {

using namespace nn_detail;

struct Window {  // kernel, stride, padding, dilation in 3-d form
  int64_t kD = 1, kH = 1, kW = 1, sD = 1, sH = 1, sW = 1, pD = 0, pH = 0, pW = 0, dD = 1, dH = 1, dW = 1;
};

inline Window window(const Shape& k, const Shape& s, const Shape& p, const Shape& d) {
  return {dhw(k, 0, 1), dhw(k, 1, 1), dhw(k, 2, 1), dhw(s, 0, 1), dhw(s, 1, 1), dhw(s, 2, 1),
          dhw(p, 0, 0), dhw(p, 1, 0), dhw(p, 2, 0), dhw(d, 0, 1), dhw(d, 1, 1), dhw(d, 2, 1)};
}

// torch's pooling_output_shape, with its checks (the input size a SymInt: the metas run on it).
inline SymInt pool_out(const char* op, SymInt in, int64_t k, int64_t pad, int64_t s, int64_t d,
                 bool ceil) {
  KILN_CHECK(s != 0, Runtime, op, "stride should not be zero");
  KILN_CHECK(pad >= 0, Runtime, op, "pad must be non-negative, but got pad: ", pad);
  KILN_CHECK(pad <= ((k - 1) * d + 1) / 2, Runtime, op,
             "pad should be at most half of effective kernel size, but got "
             "pad=",
             pad, ", kernel_size=", k, " and dilation=", d);
  SymInt num = in + 2 * pad - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  SymInt q = num / s;
  if (!num.is_symbolic() && (num.raw() % s != 0) && ((num.raw() < 0) != (s < 0))) q = q - 1;  // floor division
  SymInt out = q + 1;
  if (ceil && bool((out - 1) * s >= in + pad)) out = out - 1;
  return out;
}

// Checks a pooling call (torch's pool2d_shape_check) and returns the output shape.
inline SymShape pool_shape(const char* op, const SymShape& xs, const Shape& k, const Shape& s, const Shape& p,
                 const Shape& d, bool ceil) {
  int64_t nsp = static_cast<int64_t>(k.size()), nd = static_cast<int64_t>(xs.size());
  KILN_CHECK(nsp >= 1 && nsp <= 3 && nd == nsp + 2 && s.size() == k.size() &&
                 p.size() == k.size() && d.size() == k.size(),
             Runtime, op, "expected a batched input with ", nsp,
             " spatial dims and one kernel, stride, padding "
             "and dilation value per spatial dim, got input of size ",
             xs);
  SymShape out{xs[0], xs[1]};
  for (int64_t i = 0; i < nsp; ++i)
    out.push_back(pool_out(op, xs[i + 2], k[i], p[i], s[i], d[i], ceil));
  Window w = window(k, s, p, d);
  KILN_CHECK(w.kD > 0 && w.kH > 0 && w.kW > 0, Runtime, op,
             "kernel size should be greater than zero, but got ", nsp == 3 ? "kT: " : "", nsp == 3 ? std::to_string(w.kD) + " " : "",
             "kH: ", w.kH, " kW: ", w.kW);
  KILN_CHECK(w.sD > 0 && w.sH > 0 && w.sW > 0, Runtime, op,
             "stride should be greater than zero, but got ", nsp == 3 ? "dT: " : "", nsp == 3 ? std::to_string(w.sD) + " " : "",
             "dH: ", w.sH, " dW: ", w.sW);
  KILN_CHECK(w.dD > 0 && w.dH > 0 && w.dW > 0, Runtime, op,
             "dilation should be greater than zero, but got ", nsp == 3 ? "dilationT: " : "",
             nsp == 3 ? std::to_string(w.dD) + " " : "", "dilationH: ", w.dH, " dilationW: ", w.dW);
  bool nonempty = true;
  for (int64_t i = 1; i < nd; ++i) nonempty = nonempty && bool(xs[i] != 0);
  KILN_CHECK(nonempty, Runtime, op, "Expected ", nd - 1, "D or ", nd,
             "D (batch mode) tensor with optional 0 dim batch size for input, but got:", xs);
  KILN_CHECK(w.kW / 2 >= w.pW && w.kH / 2 >= w.pH && w.kD / 2 >= w.pD, Runtime, op,
             "pad should be smaller than or equal to half of "
             "kernel size, but got padW = ",
             w.pW, ", padH = ", w.pH, ", kW = ", w.kW, ", kH = ", w.kH);
  bool positive = true;
  for (int64_t i = 2; i < nd; ++i) positive = positive && bool(out[i] >= 1);
  std::string ins = xs[1].str(), outs = ins;
  for (int64_t i = 2; i < nd; ++i)
    ins += "x" + xs[i].str(), outs += "x" + out[i].str();
  KILN_CHECK(positive, Runtime, op, "Given input size: (", ins, "). Calculated output size: (",
             outs, "). Output size is too small");
  return out;
}

// (0 = none)}; avg_pool_backward: {grad} -> grad_input, attrs {input_size, then avg_pool's} -----
struct AvgArgs {
  Shape k, s, p;
  bool ceil, include_pad;
  int64_t divisor;
};

inline AvgArgs avg_args(const Attrs& a, size_t o) {
  return {attr<Shape>(a, o),    attr<Shape>(a, o + 1), attr<Shape>(a, o + 2),
          attr<bool>(a, o + 3), attr<bool>(a, o + 4),  attr<int64_t>(a, o + 5)};
}

inline SymShape avg_shape(const SymShape& xs, const AvgArgs& c) {
  return pool_shape("avg_pool", xs, c.k, c.s, c.p, Shape(c.k.size(), 1), c.ceil);
}

inline int64_t start_index(int64_t a, int64_t b, int64_t c) {
  return (a / b) * c + ((a % b) * c) / b;
}

inline int64_t end_index(int64_t a, int64_t b, int64_t c) { return 1 + ((a + 1) * c - 1) / b; }

}  // namespace kiln::pool_detail
