// Helpers shared by the shape and scatter families (declared in shape.h).
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>
#include "kiln/core/convert.h"
#include "kiln/core/visit.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"

namespace kiln {

// ---- shared helpers (declared in shape.h) -----------------------------------------------------------
namespace shape_detail {

const char* torch_type_name(Dtype d) {
  switch (d) {
    case kBool: return "Bool";
    case kUInt8: return "Byte";
    case kInt8: return "Char";
    case kInt16: return "Short";
    case kUInt16: return "UInt16";
    case kInt32: return "Int";
    case kUInt32: return "UInt32";
    case kInt64: return "Long";
    case kUInt64: return "UInt64";
    case kFloat16: return "Half";
    case kBFloat16: return "BFloat16";
    case kFloat32: return "Float";
    case kFloat64: return "Double";
    case kComplex64: return "ComplexFloat";
    case kComplex128: return "ComplexDouble";
    case kFloat8_e4m3fn: return "Float8_e4m3fn";
    case kFloat8_e5m2: return "Float8_e5m2";
    default: return "Undefined";
  }
}

void not_implemented(const char* op, const char* kernel, Dtype d) {
  KILN_FAIL(NotImplemented, op, "\"", kernel, "\" not implemented for '", torch_type_name(d), "'");
}

namespace {
const char* c10_type_name(Dtype d) {  // as c10 names the type in overflow messages
  switch (d) {
    case kUInt8: return "uint8_t";
    case kInt8: return "int8_t";
    case kInt16: return "int16_t";
    case kUInt16: return "uint16_t";
    case kInt32: return "int";
    case kUInt32: return "uint32_t";
    case kInt64: return "int64_t";
    case kUInt64: return "uint64_t";
    case kFloat16: return "c10::Half";
    case kBFloat16: return "c10::BFloat16";
    case kFloat32: return "float";
    case kFloat64: return "double";
    case kComplex64: return "c10::complex<float>";
    case kComplex128: return "c10::complex<double>";
    case kFloat8_e4m3fn: return "c10::Float8_e4m3fn";
    case kFloat8_e5m2: return "c10::Float8_e5m2";
    default: return "bool";
  }
}
// (largest finite value, has infinity) of a floating dtype
std::pair<double, bool> float_limits(Dtype d) {
  switch (d) {
    case kFloat16: return {65504.0, true};
    case kBFloat16: return {3.38953138925153547590470800371487866880e+38, true};
    case kFloat32: case kComplex64: return {static_cast<double>(std::numeric_limits<float>::max()), true};
    case kFloat8_e4m3fn: return {448.0, false};
    case kFloat8_e5m2: return {57344.0, true};
    default: return {std::numeric_limits<double>::max(), true};
  }
}
bool float_overflows(double f, Dtype d) {
  auto [mx, has_inf] = float_limits(d);
  if (has_inf && std::isinf(f)) return false;
  if (std::isnan(f)) return false;
  return f < -mx || f > mx;
}
}  // namespace

void check_scalar_fits(const Scalar& v, Dtype d, const char* op) {
  if (d == kBool) return;
  bool bad = false;
  if (v.is_complex() && !is_complex(d) && v.to_complex().imag() != 0) bad = true;
  if (!bad && is_integral(d, false)) {
    if (v.is_bool()) return;
    if (v.tag() == Scalar::Tag::UInt) {
      bad = d != kUInt64;
    } else if (v.tag() == Scalar::Tag::Int) {
      int64_t i = v.to<int64_t>();
      bad = visit_integral(d, op, [&]<class T>() {
        using L = std::numeric_limits<T>;
        if constexpr (!L::is_signed) {
          if (i < 0) return static_cast<uint64_t>(0) - static_cast<uint64_t>(i) > static_cast<uint64_t>(L::max());
          return static_cast<uint64_t>(i) > static_cast<uint64_t>(L::max());
        } else {
          return i < static_cast<int64_t>(L::lowest()) || i > static_cast<int64_t>(L::max());
        }
      });
    } else {
      double f = v.is_complex() ? v.to_complex().real() : v.to_double();
      bad = std::isnan(f) || visit_integral(d, op, [&]<class T>() {
        using L = std::numeric_limits<T>;
        return f < static_cast<double>(L::lowest()) || f > static_cast<double>(L::max());
      });
    }
  } else if (!bad) {
    if (v.is_complex()) {
      auto c = v.to_complex();
      bad = float_overflows(c.real(), d) || (is_complex(d) && float_overflows(c.imag(), d));
    } else if (!v.is_bool()) {
      bad = float_overflows(v.to_double(), d);
    }
  }
  KILN_CHECK(!bad, Runtime, op, "value cannot be converted to type ", c10_type_name(d), " without overflow");
}

}  // namespace shape_detail

}  // namespace kiln
