// kiln::Error: every failure kiln reports. The kind maps to the Python exception torch raises for the
// same mistake; the message starts with the op name in brackets: "[matmul] shapes ... ".
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/core/small_vector.h"

namespace kiln {

// Assertion: torch's AssertionError (a device without a backend: "Torch not compiled with CUDA enabled").
enum class ErrorKind { Value, Index, Type, Runtime, NotImplemented, LinAlg, OutOfMemory, Assertion };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& msg) : std::runtime_error(msg), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {
inline void stream_all(std::ostringstream&) {}
template <class T, class... R>
void stream_all(std::ostringstream& os, const T& t, const R&... r);
template <class V>
void stream_seq(std::ostringstream& os, const V& v) {
  os << '(';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  if (v.size() == 1) os << ',';
  os << ')';
}
template <class T>
void stream_one(std::ostringstream& os, const std::vector<T>& v) { stream_seq(os, v); }
template <class T, size_t N>
void stream_one(std::ostringstream& os, const SmallVec<T, N>& v) { stream_seq(os, v); }
template <class T>
void stream_one(std::ostringstream& os, const T& t) { os << t; }
template <class T, class... R>
void stream_all(std::ostringstream& os, const T& t, const R&... r) {
  stream_one(os, t);
  stream_all(os, r...);
}
template <class... A>
[[noreturn]] void raise(ErrorKind kind, const char* op, const A&... args) {
  std::ostringstream os;
  os << '[' << op << "] ";
  stream_all(os, args...);
  throw Error(kind, os.str());
}
}  // namespace detail

// KILN_CHECK(cond, Kind, "op", message parts...): raise Error of Kind unless cond holds.
#define KILN_CHECK(cond, kind, op, ...) \
  do {                                  \
    if (!(cond)) [[unlikely]]           \
      ::kiln::detail::raise(::kiln::ErrorKind::kind, op, __VA_ARGS__); \
  } while (0)

#define KILN_FAIL(kind, op, ...) ::kiln::detail::raise(::kiln::ErrorKind::kind, op, __VA_ARGS__)

}  // namespace kiln
