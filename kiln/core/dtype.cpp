#include "kiln/core/dtype.h"

#include "kiln/core/error.h"
#include "kiln/core/visit.h"

namespace kiln {

std::string_view dtype_name(Dtype d) {
  static constexpr std::string_view names[] = {
      "bool",    "uint8",    "int8",    "int16",     "uint16",     "int32",
      "uint32",  "int64",    "uint64",  "float16",   "bfloat16",   "float32",
      "float64", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2", "undefined"};
  return names[static_cast<int>(d)];
}

std::ostream& operator<<(std::ostream& os, Dtype d) { return os << "kiln." << dtype_name(d); }

void raise_dtype_unsupported(const char* op, Dtype d) {
  KILN_FAIL(NotImplemented, op, "not implemented for dtype ", dtype_name(d));
}

Dtype to_complex(Dtype d) {
  switch (d) {
    case kFloat64: return kComplex128;
    case kComplex64: case kComplex128: return d;
    default: return kComplex64;
  }
}

Dtype to_real(Dtype d) {
  if (d == kComplex64) return kFloat32;
  if (d == kComplex128) return kFloat64;
  return d;
}

namespace {
int int_rank(Dtype d) {  // signed ranks; uint8 is special-cased
  switch (d) {
    case kInt8: return 1;
    case kInt16: return 2;
    case kInt32: return 3;
    case kInt64: return 4;
    default: return 0;
  }
}
int float_rank(Dtype d) {
  switch (d) {
    case kFloat16: case kBFloat16: return 1;
    case kFloat32: return 2;
    case kFloat64: return 3;
    default: return 0;
  }
}
}  // namespace

Dtype promote_types(Dtype a, Dtype b) {
  if (a == b) return a;
  if (is_float8(a) || is_float8(b))
    KILN_FAIL(Runtime, "promote_types", "promotion for Float8 types is not supported, attempted to promote ",
              dtype_name(a), " and ", dtype_name(b));
  if (is_barebones_unsigned(a) || is_barebones_unsigned(b)) {
    if (is_floating(a)) return a;
    if (is_floating(b)) return b;
    KILN_FAIL(Runtime, "promote_types", "promotion for uint16, uint32, uint64 types is not supported, ",
              "attempted to promote ", dtype_name(a), " and ", dtype_name(b));
  }
  if (a == kBool) return b;
  if (b == kBool) return a;
  if (is_complex(a) || is_complex(b)) {
    // complex wins; its precision is the larger of the two value precisions.
    bool wide = a == kComplex128 || b == kComplex128 || a == kFloat64 || b == kFloat64;
    return wide ? kComplex128 : kComplex64;
  }
  if (is_floating(a) || is_floating(b)) {
    if (!is_floating(b)) return a;
    if (!is_floating(a)) return b;
    int ra = float_rank(a), rb = float_rank(b);
    if (ra == rb) return kFloat32;  // float16 with bfloat16
    return ra > rb ? a : b;
  }
  // both integral, signed or uint8
  if (a == kUInt8 || b == kUInt8) {
    Dtype other = a == kUInt8 ? b : a;
    return other == kInt8 ? kInt16 : other;
  }
  return int_rank(a) > int_rank(b) ? a : b;
}

bool can_cast(Dtype from, Dtype to) {
  // torch.can_cast: no complex -> non-complex, no float -> integral, no non-bool -> bool.
  if (is_complex(from) && !is_complex(to)) return false;
  if (is_floating(from) && is_integral(to, true)) return false;
  if (from != kBool && to == kBool) return false;
  return true;
}

namespace {
Dtype g_default_dtype = kFloat32;
}
Dtype default_dtype() { return g_default_dtype; }
void set_default_dtype(Dtype d) {
  KILN_CHECK(d == kFloat32 || d == kFloat64 || d == kFloat16 || d == kBFloat16, Type,
             "set_default_dtype", "only floating-point types are supported as the default type, got ",
             dtype_name(d));
  g_default_dtype = d;
}

}  // namespace kiln
