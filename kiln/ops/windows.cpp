// torch's window functions (hann, hamming, blackman, bartlett, kaiser), as composites of kiln ops
// written in torch's order (an arange in the requested dtype, then one op at a time, each constant
// first rounded to that dtype as torch's scalar arguments are), so that float16 / bfloat16 windows
// round as torch's do.
#include <cmath>
#include <numbers>

#include "kiln/core/format.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/special.h"
#include "kiln/ops/tensor_utils.h"

namespace kiln {

namespace {

// torch's window_function_checks: a floating (or complex) dtype and a non-negative length; a complex
// window longer than 1 fails in arange (NotImplementedError), as torch's.
Dtype window_dtype(const char* op, int64_t n, const TensorOptions& o) {
  const Dtype d = o.dtype_or_default();
  KILN_CHECK((is_floating(d) && !is_float8(d)) || is_complex(d), Runtime, op, op,
             " expects floating point dtypes, got: ", dtype_name(d));
  KILN_CHECK(n >= 0, Runtime, op, op, " requires non-negative window_length, got window_length=", n);
  if (is_complex(d) && n > 1) shape_detail::not_implemented(op, "arange_cpu", d);
  return d;
}

// The common frame: empty for 0, [1] for 1, else f(arange(m)) with m = n (+1 when periodic, the
// last value then dropped).
template <class Fn>
Tensor window(const char* op, int64_t n, bool periodic, const TensorOptions& o, Fn f) {
  const Dtype d = window_dtype(op, n, o);
  TensorOptions opts = o.dtype(d);
  if (n == 0) return empty({0}, opts);
  if (n == 1) return ones({1}, opts);
  const int64_t m = periodic ? n + 1 : n;
  Tensor w = f(arange(Scalar(m), opts), m);
  return periodic ? narrow(w, 0, 0, m - 1) : w;
}

// A constant as torch's in-place ops take it: rounded to the tensor's dtype first.
Tensor k(double v, const Tensor& like) { return full({}, Scalar(v), TensorOptions(like.dtype())); }

}  // namespace

Tensor hamming_window(int64_t n, bool periodic, double alpha, double beta, TensorOptions o) {
  return window("hamming_window", n, periodic, o, [&](const Tensor& i, int64_t m) {
    Tensor c = cos(mul(i, k(std::numbers::pi * 2.0 / static_cast<double>(m - 1), i)));
    return add(mul(c, k(-beta, i)), k(alpha, i));
  });
}

Tensor hann_window(int64_t n, bool periodic, TensorOptions o) {
  window_dtype("hann_window", n, o);  // (its own name in the messages)
  return hamming_window(n, periodic, 0.5, 0.5, o);
}

Tensor blackman_window(int64_t n, bool periodic, TensorOptions o) {
  return window("blackman_window", n, periodic, o, [](const Tensor& i, int64_t m) {
    Tensor x = mul(i, k(std::numbers::pi / static_cast<double>(m - 1), i));
    Tensor a = mul(cos(mul(x, k(4, i))), k(0.08, i));
    Tensor b = mul(cos(mul(x, k(2, i))), k(0.5, i));
    return add(sub(a, b), k(0.42, i));
  });
}

Tensor bartlett_window(int64_t n, bool periodic, TensorOptions o) {
  return window("bartlett_window", n, periodic, o, [](const Tensor& i, int64_t m) {
    Tensor w = mul(i, k(2.0 / static_cast<double>(m - 1), i));
    const int64_t half = ((m - 1) >> 1) + 1;  // the rising half; the rest is 2 - w
    return cat({narrow(w, 0, 0, half), add(neg(narrow(w, 0, half, m - half)), k(2, i))}, 0);
  });
}

Tensor kaiser_window(int64_t n, bool periodic, double beta, TensorOptions o) {
  return window("kaiser_window", n, periodic, o, [&](const Tensor& i, int64_t m) {
    // I0(beta sqrt(|1 - ((i - a) / a)^2|)) / I0(beta), a = (m - 1) / 2, in float32 at least (torch's
    // opmath type), rounded once to the window's dtype
    const Dtype d = i.dtype();
    const Dtype math = d == kFloat64 ? kFloat64 : kFloat32;
    const double a = static_cast<double>(m - 1) / 2.0;
    Tensor r = true_divide(sub(to_dtype(i, math), Scalar(a)), Scalar(a));
    Tensor arg = mul(sqrt(abs(rsub(mul(r, r), Scalar(1)))), Scalar(beta));
    Tensor w = div(i0(arg), i0(full({}, Scalar(beta), TensorOptions(math))));
    return to_dtype(w, d);
  });
}

namespace {

#define KILN_WINDOW_KW "*, ScalarType? dtype=None, Device? device=None, bool requires_grad=False"
Composite c_hann_window{"hann_window(int window_length, bool periodic=True, " KILN_WINDOW_KW ") -> Tensor",
                        [](const TensorList&, const Attrs& a) -> TensorList {
                          return factory_result(hann_window(attr<int64_t>(a, 0), attr<bool>(a, 1), options_attr(a, 2)),
                                                a, 4);
                        },
                        kFunctionVariant};
Composite c_hamming_window{
    "hamming_window(int window_length, bool periodic=True, float alpha=0.54, float beta=0.46, " KILN_WINDOW_KW
    ") -> Tensor",
    [](const TensorList&, const Attrs& a) -> TensorList {
      return factory_result(hamming_window(attr<int64_t>(a, 0), attr<bool>(a, 1), attr<double>(a, 2),
                                           attr<double>(a, 3), options_attr(a, 4)),
                            a, 6);
    },
    kFunctionVariant};
Composite c_blackman_window{"blackman_window(int window_length, bool periodic=True, " KILN_WINDOW_KW ") -> Tensor",
                            [](const TensorList&, const Attrs& a) -> TensorList {
                              return factory_result(
                                  blackman_window(attr<int64_t>(a, 0), attr<bool>(a, 1), options_attr(a, 2)), a, 4);
                            },
                            kFunctionVariant};
Composite c_bartlett_window{"bartlett_window(int window_length, bool periodic=True, " KILN_WINDOW_KW ") -> Tensor",
                            [](const TensorList&, const Attrs& a) -> TensorList {
                              return factory_result(
                                  bartlett_window(attr<int64_t>(a, 0), attr<bool>(a, 1), options_attr(a, 2)), a, 4);
                            },
                            kFunctionVariant};
Composite c_kaiser_window{
    "kaiser_window(int window_length, bool periodic=True, float beta=12.0, " KILN_WINDOW_KW ") -> Tensor",
    [](const TensorList&, const Attrs& a) -> TensorList {
      return factory_result(
          kaiser_window(attr<int64_t>(a, 0), attr<bool>(a, 1), attr<double>(a, 2), options_attr(a, 3)), a, 5);
    },
    kFunctionVariant};
#undef KILN_WINDOW_KW

}  // namespace

}  // namespace kiln
