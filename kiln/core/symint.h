// Symbolic sizes (DESIGN.md §2; docs/decisions.md 20).
//
// A SymInt is a size: a concrete int64, or an expression over named size symbols ("batch", "seq")
// that a ShapeEnv owns. Meta functions compute with SymInts, so a shape-only run (tracing, export)
// keeps a dynamic dimension symbolic: (B, T, C).view(B * T, C) is (B*T, C), not (12, C).
//
// - Arithmetic (+ - * / % max min) builds expressions in a normal form (sums of products), so equal
//   expressions are equal objects: B*T*C == C*(T*B) is decided without a guard.
// - A comparison is decided from the symbols' value ranges where it can be (a size symbol is >= 2, as
//   torch's; broadcasting's `n == 1` is then false for sure). Where it cannot, its answer is the one
//   the example values (hints) give, and using it as a bool records a guard: the condition the traced
//   program assumed, which a runtime must re-check (ShapeEnv::check).
// - guard_int() turns a SymInt into a plain integer: the dimension is specialised to its hint and the
//   guard records who did it (the op, or a source line), so export can say what pinned a dimension.
//
// A SymInt is 8 bytes and trivially copyable: a symbolic value is a tagged index into the expression
// table of the ShapeEnv active on the thread, with that env's generation; a SymInt used after its env
// is gone (or on a thread without it) raises instead of reading freed memory. A ShapeEnv is used by one
// thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/core/small_vector.h"

namespace kiln {

class SymBool;
class ShapeEnv;

class SymInt {
 public:
  constexpr SymInt() : v_(0) {}
  constexpr SymInt(int64_t v) : v_(v) {}  // NOLINT: a size is an int
  template <class I, class = std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, int64_t> &&
                                              !std::is_same_v<I, bool>>>
  constexpr SymInt(I v) : v_(static_cast<int64_t>(v)) {}  // NOLINT
  // The bit pattern, and back: how a SymInt travels through an integer list (an op's shape attribute).
  static constexpr SymInt from_raw(int64_t raw) {
    SymInt s;
    s.v_ = raw;
    return s;
  }
  constexpr int64_t raw() const { return v_; }
  constexpr bool is_symbolic() const { return (static_cast<uint64_t>(v_) >> 48) == 0x8000u; }
  // The value when it is known without a guard (concrete, or an expression whose range is one point).
  std::optional<int64_t> maybe_int() const;
  // The value in the example the env was made from; raises for a data-dependent (unbacked) size.
  int64_t hint() const;
  std::optional<int64_t> maybe_hint() const;  // none for an unbacked size
  // A plain integer: a symbolic value is specialised to its hint, recording the guard `expr == hint`
  // with `where` (the caller's source line unless given).
  int64_t guard_int(std::source_location where = std::source_location::current()) const;
  int64_t guard_int(const std::string& where) const;
  // A plain integer where only a concrete value is possible (a kernel's argument); raises otherwise.
  int64_t expect_int(const char* op) const;
  std::string str() const;

  SymInt operator-() const;
  SymInt& operator+=(SymInt o);
  SymInt& operator-=(SymInt o);
  SymInt& operator*=(SymInt o);
  SymInt& operator/=(SymInt o);

 private:
  int64_t v_;
};

// Arithmetic and comparisons: inline for concrete values (meta functions run them on every call),
// out of line for expressions. On concrete values / and % are C++'s; on symbols they are floor
// division and its remainder (sizes are >= 0, where the two agree). Overflow raises RuntimeError.
namespace symint_detail {
SymInt add(SymInt a, SymInt b);
SymInt sub(SymInt a, SymInt b);
SymInt mul(SymInt a, SymInt b);
SymInt div(SymInt a, SymInt b);
SymInt mod(SymInt a, SymInt b);
SymBool cmp(SymInt a, SymInt b, int kind);  // kind: 0 ==, 1 !=, 2 <, 3 <=
inline bool both_concrete(SymInt a, SymInt b) { return !a.is_symbolic() && !b.is_symbolic(); }
}  // namespace symint_detail
inline SymInt operator+(SymInt a, SymInt b) {
  int64_t r;
  if (symint_detail::both_concrete(a, b) && !__builtin_add_overflow(a.raw(), b.raw(), &r)) [[likely]]
    return SymInt(r);
  return symint_detail::add(a, b);
}
inline SymInt operator-(SymInt a, SymInt b) {
  int64_t r;
  if (symint_detail::both_concrete(a, b) && !__builtin_sub_overflow(a.raw(), b.raw(), &r)) [[likely]]
    return SymInt(r);
  return symint_detail::sub(a, b);
}
inline SymInt operator*(SymInt a, SymInt b) {
  int64_t r;
  if (symint_detail::both_concrete(a, b) && !__builtin_mul_overflow(a.raw(), b.raw(), &r)) [[likely]]
    return SymInt(r);
  return symint_detail::mul(a, b);
}
inline SymInt operator/(SymInt a, SymInt b) {
  if (symint_detail::both_concrete(a, b) && b.raw() > 0) [[likely]] return SymInt(a.raw() / b.raw());
  return symint_detail::div(a, b);
}
inline SymInt operator%(SymInt a, SymInt b) {
  if (symint_detail::both_concrete(a, b) && b.raw() > 0) [[likely]] return SymInt(a.raw() % b.raw());
  return symint_detail::mod(a, b);
}

SymInt sym_max(SymInt a, SymInt b);
SymInt sym_min(SymInt a, SymInt b);
std::ostream& operator<<(std::ostream& os, SymInt s);

// The answer to a comparison of sizes. Static when the ranges decide it; otherwise the hints' answer,
// and turning it into a bool records the guard.
class SymBool {
 public:
  constexpr SymBool(bool b) : value_(b) {}  // NOLINT
  explicit operator bool() const { return guard(); }
  bool guard() const;
  bool guard(const std::string& where) const;  // records with this `where` (a Python line)
  bool is_static() const { return static_; }
  std::optional<bool> maybe_bool() const {
    return is_static() ? std::optional<bool>(value_) : std::nullopt;
  }
  SymBool operator!() const;

 private:
  friend class ShapeEnv;
  friend struct ShapeEnvAccess;
  friend SymBool symint_detail::cmp(SymInt, SymInt, int);
  bool value_;
  bool static_ = true;
  uint8_t cmp_ = 0;  // ShapeEnv's comparison kind; bit 7: no example value (data-dependent)
  uint32_t gen_ = 0;
  int64_t lhs_ = 0, rhs_ = 0;  // the compared values (raw)
};

inline SymInt& SymInt::operator+=(SymInt o) { return *this = *this + o; }
inline SymInt& SymInt::operator-=(SymInt o) { return *this = *this - o; }
inline SymInt& SymInt::operator*=(SymInt o) { return *this = *this * o; }
inline SymInt& SymInt::operator/=(SymInt o) { return *this = *this / o; }

inline SymBool operator==(SymInt a, SymInt b) {
  return symint_detail::both_concrete(a, b) ? SymBool(a.raw() == b.raw()) : symint_detail::cmp(a, b, 0);
}
inline SymBool operator!=(SymInt a, SymInt b) {
  return symint_detail::both_concrete(a, b) ? SymBool(a.raw() != b.raw()) : symint_detail::cmp(a, b, 1);
}
inline SymBool operator<(SymInt a, SymInt b) {
  return symint_detail::both_concrete(a, b) ? SymBool(a.raw() < b.raw()) : symint_detail::cmp(a, b, 2);
}
inline SymBool operator<=(SymInt a, SymInt b) {
  return symint_detail::both_concrete(a, b) ? SymBool(a.raw() <= b.raw()) : symint_detail::cmp(a, b, 3);
}
inline SymBool operator>(SymInt a, SymInt b) { return b < a; }
inline SymBool operator>=(SymInt a, SymInt b) { return b <= a; }

// "kiln/ops/matmul.cpp:164": a source line as guards name it (the path from kiln/ on).
std::string where_str(std::source_location w);

using SymShape = SmallVec<SymInt, 6>;
bool is_symbolic(const SymShape& s);
SymInt sym_numel(const SymShape& s);
SymShape sym_contiguous_strides(const SymShape& sizes);
std::string sym_str(const SymShape& s);  // "(batch, seq, 64)"

// A condition the traced program assumed.
struct Guard {
  std::string text;   // "batch*seq == 12", "seq != 5"
  std::string where;  // the op or source line that asked
  bool specialization = false;  // guard_int pinned a value
};

// The symbols of one trace, their value ranges, the expressions over them and the guards recorded.
class ShapeEnv {
 public:
  static constexpr int64_t kInf = INT64_MAX;
  ShapeEnv();
  ~ShapeEnv();
  ShapeEnv(const ShapeEnv&) = delete;
  ShapeEnv& operator=(const ShapeEnv&) = delete;

  // A size symbol with an example value: range [min, max] (torch's default min is 2: sizes 0 and 1 are
  // special cases the symbol does not cover). Raises ValueError when the hint is outside the range.
  SymInt create_symbol(const std::string& name, int64_t hint, int64_t min = 2, int64_t max = kInf);
  // A data-dependent size (nonzero's count): no hint; a comparison its range cannot decide raises.
  SymInt create_unbacked(int64_t min = 0, int64_t max = kInf);

  int num_symbols() const;
  const std::string& symbol_name(int i) const;
  SymInt symbol(int i) const;  // symbol i itself (creation order)
  const std::vector<Guard>& guards() const { return guards_; }
  // The expression's range over the symbols' ranges: [lo, hi], kInf for unbounded.
  std::pair<int64_t, int64_t> range(SymInt s) const;
  // The expression's value for given values of the symbols (in creation order).
  int64_t evaluate(SymInt s, const std::vector<int64_t>& values) const;
  // Re-checks every range and guard for given symbol values; the first that fails, described, or none.
  std::optional<std::string> check(const std::vector<int64_t>& values) const;

  // Where a guard recorded from a meta function is said to come from (the op's name); set by dispatch.
  struct Where {
    explicit Where(const char* what);
    ~Where();
    const char* prev;
  };

  // internals, used by SymInt and SymBool
  struct Impl;
  Impl& impl() const { return *impl_; }
  uint32_t generation() const { return gen_; }
  bool record(const SymBool& b, const std::string& where);

 private:
  std::unique_ptr<Impl> impl_;
  uint32_t gen_;
  std::vector<Guard> guards_;
};

// Makes `env` the thread's active ShapeEnv for the guard's lifetime (nesting restores the previous).
class ShapeEnvGuard {
 public:
  explicit ShapeEnvGuard(ShapeEnv& env);
  ~ShapeEnvGuard();
  ShapeEnvGuard(const ShapeEnvGuard&) = delete;
  ShapeEnvGuard& operator=(const ShapeEnvGuard&) = delete;

 private:
  ShapeEnv* prev_;
};
ShapeEnv* active_shape_env();
// Makes `env` (or none) the thread's active ShapeEnv; returns the previous one (for front ends whose
// scopes are not C++ blocks: Python's `with`).
ShapeEnv* set_active_shape_env(ShapeEnv* env);

}  // namespace kiln
