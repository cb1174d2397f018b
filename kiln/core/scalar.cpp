#include "kiln/core/scalar.h"

namespace kiln {

Dtype Scalar::wrapped_dtype() const {
  switch (tag_) {
    case Tag::Bool: return kBool;
    case Tag::Int: return kInt64;
    case Tag::UInt: return kUInt64;
    case Tag::Double: return default_dtype();
    default: return default_complex_dtype();
  }
}

Dtype Scalar::natural_dtype() const {
  switch (tag_) {
    case Tag::Bool: return kBool;
    case Tag::Int: return kInt64;
    case Tag::UInt: return kUInt64;
    case Tag::Double: return kFloat64;
    default: return kComplex128;
  }
}

Scalar Scalar::operator-() const {
  switch (tag_) {
    case Tag::Bool: case Tag::Int: return Scalar(-i_);
    case Tag::UInt: return Scalar(-static_cast<double>(u_));
    case Tag::Double: return Scalar(-d_);
    default: return Scalar(-c_);
  }
}

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  switch (s.tag()) {
    case Scalar::Tag::Bool: return os << (s.to<bool>() ? "True" : "False");
    case Scalar::Tag::Int: return os << s.to<int64_t>();
    case Scalar::Tag::UInt: return os << s.to<uint64_t>();
    case Scalar::Tag::Double: return os << s.to_double();
    default: return os << s.to_complex();
  }
}

}  // namespace kiln
