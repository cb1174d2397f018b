// Helpers shared by the layer files (norm_layers, conv_layers, attention, transformer): torch's
// int-or-tuple arguments, Python-style repr text, and the AssertionError torch raises for some
// argument mistakes.
#pragma once

#include "kiln/optim/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/core/tensor.h"

namespace kiln::nn {

// torch raises AssertionError (not ValueError) for some checks (MultiheadAttention shapes,
// EmbeddingBag's padding_idx); the Python binding maps this subclass to AssertionError.
class AssertionFailure : public Error {
 public:
  explicit AssertionFailure(const std::string& msg) : Error(ErrorKind::Value, msg) {}
};

#define KILN_NN_ASSERT(cond, op, ...)                     \
  do {                                                    \
    if (!(cond)) [[unlikely]] {                           \
      std::ostringstream kiln_os_;                        \
      kiln_os_ << '[' << op << "] ";                      \
      ::kiln::detail::stream_all(kiln_os_, __VA_ARGS__);  \
      throw ::kiln::nn::AssertionFailure(kiln_os_.str()); \
    }                                                     \
  } while (0)

namespace layer_util {

// Python's repr of a float (0.0001, 1e-05, 2.0): the one implementation in kiln/optim/value.h.
inline std::string pyfloat(double v) { return optim::py_float_repr(v); }
inline std::string pybool(bool b) { return b ? "True" : "False"; }
// Python's repr of a tuple of ints: (3,) or (2, 3).
inline std::string tuple_str(const Shape& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}
// A 1-D tensor holding v (T must have dtype d's element size: int64_t, double, uint8_t for bool).
template <class T>
Tensor vector_tensor(const std::vector<T>& v, Dtype d) {
  Tensor t = make_tensor({static_cast<int64_t>(v.size())}, d);
  std::copy(v.begin(), v.end(), static_cast<T*>(t.data_ptr()));
  return t;
}
inline TensorOptions opts(Dtype d) {
  return TensorOptions(d == Dtype::Undefined ? default_dtype() : d);
}
// torch's _single / _pair: one value repeated to n, or n values kept (other lengths raise).
inline Shape expand_arg(const Shape& v, size_t n, const char* op, const char* arg) {
  if (v.size() == n) return v;
  KILN_CHECK(v.size() == 1, Runtime, op, arg, " must be an int or a tuple of ", n, " ints, got ",
             v.size(), " values");
  return Shape(n, v[0]);
}

}  // namespace layer_util

// An int-or-tuple constructor argument as torch keeps it (pooling layers print it back as given):
// the values and whether the user passed a single int.
struct IntOrTuple {
  Shape values;
  bool scalar = false;
  IntOrTuple() = default;
  IntOrTuple(int64_t v) : values{v}, scalar(true) {}  // NOLINT: implicit, as torch's arguments
  IntOrTuple(Shape v) : values(std::move(v)) {}       // NOLINT
  IntOrTuple(std::initializer_list<int64_t> v) : values(v) {}
  Shape expand(size_t n, const char* op, const char* arg) const {
    return layer_util::expand_arg(values, n, op, arg);
  }
  std::string repr() const {
    return scalar && !values.empty() ? std::to_string(values[0]) : layer_util::tuple_str(values);
  }
};

}  // namespace kiln::nn
