// Type promotion across tensors, 0-dim tensors and Python numbers, and broadcasting.
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

Dtype promote_skip(Dtype a, Dtype b) {
  if (a == Dtype::Undefined) return b;
  if (b == Dtype::Undefined) return a;
  return promote_types(a, b);
}

Dtype combine_categories(Dtype higher, Dtype lower) {
  if (higher != Dtype::Undefined && is_complex(higher)) return higher;
  if (lower != Dtype::Undefined && is_complex(lower)) {
    if (higher != Dtype::Undefined && is_floating(higher)) return higher == kFloat64 ? kComplex128 : kComplex64;
    return lower;
  }
  if (higher != Dtype::Undefined && is_floating(higher)) return higher;
  if (higher == kBool || (lower != Dtype::Undefined && is_floating(lower))) return promote_skip(higher, lower);
  if (higher != Dtype::Undefined) return higher;
  return lower;
}

}  // namespace

namespace {
template <class T>  // Tensor or TensorSpec: the same rule for kernels' and meta functions' callers
Dtype result_type_of(const T* const* ts, size_t n) {
  Dtype dim = Dtype::Undefined, zero = Dtype::Undefined, wrapped = Dtype::Undefined;
  for (size_t i = 0; i < n; ++i) {
    const T& t = *ts[i];
    if (!t.defined()) continue;
    Dtype d = t.dtype();
    if (t.is_wrapped_number()) {
      if (is_floating(d)) d = default_dtype();
      else if (is_complex(d)) d = default_complex_dtype();
      wrapped = promote_skip(wrapped, d);
    } else if (t.dim() == 0) {
      zero = promote_skip(zero, d);
    } else {
      dim = promote_skip(dim, d);
    }
  }
  return combine_categories(dim, combine_categories(zero, wrapped));
}
}  // namespace

Dtype result_type(const TensorList& ts) {
  SmallVec<const Tensor*, 8> p;
  for (const Tensor& t : ts) p.push_back(&t);
  return result_type_of(p.data(), p.size());
}

Dtype result_type(const Tensor& a, const Tensor& b) {
  const Tensor* p[2] = {&a, &b};
  return result_type_of(p, 2);
}

Dtype result_type(const SpecList& ts) {
  SmallVec<const TensorSpec*, 8> p;
  for (const TensorSpec& t : ts) p.push_back(&t);
  return result_type_of(p.data(), p.size());
}

Dtype result_type(const TensorSpec& a, const TensorSpec& b) {
  // two tensors of one dtype (the common call): that dtype. Two Python numbers of one dtype promote
  // (float64 numbers give the default dtype), so wrapped ones take the general path.
  if (a.dtype() == b.dtype() && !a.is_wrapped_number() && !b.is_wrapped_number()) [[likely]] return a.dtype();
  const TensorSpec* p[2] = {&a, &b};
  return result_type_of(p, 2);
}

SymShape broadcast_shapes(const SymShape& a, const SymShape& b, const char* op) {
  if (a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(SymInt)) == 0) [[likely]]
    return a;  // the same sizes (or the same expressions)
  size_t n = std::max(a.size(), b.size());
  SymShape out(n);
  for (size_t i = 0; i < n; ++i) {
    SymInt da = i < n - a.size() ? SymInt(1) : a[i - (n - a.size())];
    SymInt db = i < n - b.size() ? SymInt(1) : b[i - (n - b.size())];
    if (da.raw() == db.raw()) [[likely]] {  // the same value or the same expression
      out[i] = da;
      continue;
    }
    if (!db.is_symbolic() && db.raw() == 1) {  // a literal 1 (or a padded dim): no question to ask
      out[i] = da;
      continue;
    }
    if (!da.is_symbolic() && da.raw() == 1) {
      out[i] = db;
      continue;
    }
    const bool a1 = bool(da == 1);
    KILN_CHECK(a1 || bool(db == 1) || bool(da == db), Runtime, op, "The size of tensor a (", da,
               ") must match the size of tensor b (", db, ") at non-singleton dimension ", i);
    out[i] = a1 ? db : da;
  }
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_CHECK(da == db || da == 1 || db == 1, Runtime, op, "The size of tensor a (", da,
               ") must match the size of tensor b (", db, ") at non-singleton dimension ", i);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace kiln
