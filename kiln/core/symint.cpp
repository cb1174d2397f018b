// Symbolic sizes: expressions in a sum-of-products normal form, value ranges, guards (symint.h).
#include "kiln/core/symint.h"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <ostream>
#include <sstream>
#include <unordered_map>

#include "kiln/core/error.h"

namespace kiln {

namespace {
constexpr int64_t kInf = ShapeEnv::kInf;
constexpr uint64_t kTag = 0x8000ull << 48;

enum class Kind : uint8_t { Poly, Symbol, FloorDiv, Mod, Max, Min };
enum Cmp : uint8_t { kEq, kNe, kLt, kLe };  // of `lhs - rhs` against 0

// A product of atoms (ids of non-polynomial nodes, sorted, repeats allowed) times a coefficient.
struct Term {
  int64_t coeff;
  SmallVec<int32_t, 4> atoms;
};

struct Node {
  Kind kind;
  std::vector<Term> terms;  // Poly: the sum, canonical (sorted by atoms, no zero coefficient)
  int64_t a = 0, b = 0;     // FloorDiv / Mod / Max / Min: the operands (SymInt raw values)
  int32_t symbol = -1;      // Symbol: its index
  int64_t lo = -kInf, hi = kInf;
  bool has_hint = true;
  int64_t hint = 0;
};

struct Symbol {
  std::string name;
  int64_t hint, lo, hi;
  bool unbacked;
};

struct GuardRec {  // `lhs cmp rhs` held in the trace
  int64_t lhs, rhs;
  Cmp cmp;
};
const char* cmp_str(Cmp c) { return c == kEq ? " == " : c == kNe ? " != " : c == kLt ? " < " : " <= "; }
bool apply(Cmp c, int64_t x, int64_t y) { return c == kEq ? x == y : c == kNe ? x != y : c == kLt ? x < y : x <= y; }

thread_local ShapeEnv* g_env = nullptr;
thread_local const char* g_where = nullptr;
std::atomic<uint32_t> g_generation{0};

[[noreturn]] void overflow() {
  KILN_FAIL(Runtime, "symint", "integer overflow in a size computation");
}
int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}
int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}
// Range arithmetic saturates at +-kInf (unbounded).
int64_t sat(__int128 v) { return v >= kInf ? kInf : v <= -kInf ? -kInf : static_cast<int64_t>(v); }
int64_t sat_add(int64_t a, int64_t b) {
  if (a == kInf || b == kInf) return (a == -kInf || b == -kInf) ? 0 : kInf;  // never both in practice
  if (a == -kInf || b == -kInf) return -kInf;
  return sat(static_cast<__int128>(a) + b);
}
int64_t sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return sat(static_cast<__int128>(a) * b);
}
std::pair<int64_t, int64_t> range_mul(std::pair<int64_t, int64_t> x, std::pair<int64_t, int64_t> y) {
  int64_t c[4] = {sat_mul(x.first, y.first), sat_mul(x.first, y.second), sat_mul(x.second, y.first),
                  sat_mul(x.second, y.second)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}
int64_t floordiv(int64_t x, int64_t y) {
  KILN_CHECK(y != 0, Runtime, "symint", "division by zero in a size computation");
  int64_t q = x / y;
  return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}
int64_t floormod(int64_t x, int64_t y) { return x - floordiv(x, y) * y; }
}  // namespace

struct ShapeEnv::Impl {
  ShapeEnv* env;
  std::vector<Node> nodes;
  std::vector<Symbol> symbols;
  std::unordered_map<std::string, int32_t> interned;
  std::vector<GuardRec> recs;
  int unbacked = 0;

  SymInt ref(int32_t id) const {
    return SymInt::from_raw(static_cast<int64_t>(kTag | (static_cast<uint64_t>(env->generation()) << 32) |
                                                 static_cast<uint32_t>(id)));
  }
  const Node& node(SymInt s) const { return nodes[static_cast<uint32_t>(s.raw())]; }

  std::vector<Term> terms(SymInt s) const {
    if (!s.is_symbolic()) return s.raw() == 0 ? std::vector<Term>{} : std::vector<Term>{{s.raw(), {}}};
    return node(s).terms;
  }
  std::pair<int64_t, int64_t> range(SymInt s) const {
    if (!s.is_symbolic()) return {s.raw(), s.raw()};
    return {node(s).lo, node(s).hi};
  }
  bool has_hint(SymInt s) const { return !s.is_symbolic() || node(s).has_hint; }
  int64_t hint(SymInt s) const { return s.is_symbolic() ? node(s).hint : s.raw(); }

  int32_t intern(const std::string& key, Node n) {
    auto it = interned.find(key);
    if (it != interned.end()) return it->second;
    KILN_CHECK(nodes.size() < 0x7fffffff, Runtime, "symint", "too many symbolic expressions");
    nodes.push_back(std::move(n));
    const int32_t id = static_cast<int32_t>(nodes.size() - 1);
    interned.emplace(key, id);
    return id;
  }

  // The term-by-term (interval) range of a sum of terms.
  std::pair<int64_t, int64_t> interval(const std::vector<Term>& ts) const {
    std::pair<int64_t, int64_t> r{0, 0};
    for (const Term& t : ts) {
      std::pair<int64_t, int64_t> tr{t.coeff, t.coeff};
      for (int32_t a : t.atoms) tr = range_mul(tr, {nodes[a].lo, nodes[a].hi});
      r = {sat_add(r.first, tr.first), sat_add(r.second, tr.second)};
    }
    return r;
  }
  // Interval arithmetic loses the correlation between terms: 2*b*s - 2*b - 2*s + 2 with b >= 2,
  // s >= 4 is at least 6, but its interval is unbounded. A polynomial that does not decrease in any
  // of its atoms over their ranges (each partial derivative's interval is >= 0; each atom bounded
  // below) is smallest at the atoms' lower bounds; one that does not increase is largest there.
  // That value and which of the two holds (+1 / -1; 0: neither).
  std::pair<int64_t, int> at_lows_if_monotone(const std::vector<Term>& ts) const {
    std::vector<int32_t> atoms;
    for (const Term& t : ts) atoms.insert(atoms.end(), t.atoms.begin(), t.atoms.end());
    std::sort(atoms.begin(), atoms.end());
    atoms.erase(std::unique(atoms.begin(), atoms.end()), atoms.end());
    bool up = true, down = true;
    for (int32_t a : atoms) {
      if (nodes[a].lo < 0) return {0, 0};  // (-kInf included)
      std::vector<Term> d;  // the partial derivative in a
      for (const Term& t : ts) {
        const auto k = std::count(t.atoms.begin(), t.atoms.end(), a);
        if (k == 0) continue;
        Term u{sat_mul(t.coeff, k), t.atoms};
        u.atoms.erase(std::find(u.atoms.begin(), u.atoms.end(), a));
        d.push_back(std::move(u));
      }
      const auto rd = interval(d);
      up = up && rd.first >= 0;
      down = down && rd.second <= 0;
      if (!up && !down) return {0, 0};
    }
    int64_t v = 0;
    for (const Term& t : ts) {
      int64_t p = t.coeff;
      for (int32_t a : t.atoms) p = sat_mul(p, nodes[a].lo);
      v = sat_add(v, p);
    }
    return {v, up ? 1 : -1};
  }

  // The polynomial of canonical terms: a concrete SymInt for a constant, a node otherwise.
  SymInt poly(std::vector<Term> ts) {
    std::sort(ts.begin(), ts.end(), [](const Term& x, const Term& y) {
      return std::lexicographical_compare(x.atoms.begin(), x.atoms.end(), y.atoms.begin(), y.atoms.end());
    });
    std::vector<Term> out;
    for (Term& t : ts) {
      if (!out.empty() && out.back().atoms == t.atoms)
        out.back().coeff = checked_add(out.back().coeff, t.coeff);
      else
        out.push_back(std::move(t));
      if (out.back().coeff == 0) out.pop_back();
    }
    if (out.empty()) return SymInt(0);
    if (out.size() == 1 && out[0].atoms.empty()) return SymInt(out[0].coeff);
    std::string key = "P";
    Node n;
    n.kind = Kind::Poly;
    std::pair<int64_t, int64_t> r{0, 0};
    bool hinted = true;
    int64_t h = 0;
    for (const Term& t : out) {
      key += std::to_string(t.coeff);
      std::pair<int64_t, int64_t> tr{t.coeff, t.coeff};
      int64_t th = t.coeff;
      for (int32_t a : t.atoms) {
        key += "," + std::to_string(a);
        tr = range_mul(tr, {nodes[a].lo, nodes[a].hi});
        hinted = hinted && nodes[a].has_hint;
        if (hinted) th = checked_mul(th, nodes[a].hint);
      }
      key += ";";
      r = {sat_add(r.first, tr.first), sat_add(r.second, tr.second)};
      if (hinted) h = checked_add(h, th);
    }
    if (out.size() > 1) {  // a factor common to every term: its range times the rest's is often tighter
      std::vector<int32_t> common = out[0].atoms;  // (atoms are sorted within a term)
      for (size_t i = 1; i < out.size() && !common.empty(); ++i) {
        std::vector<int32_t> both;
        std::set_intersection(common.begin(), common.end(), out[i].atoms.begin(), out[i].atoms.end(),
                              std::back_inserter(both));
        common = std::move(both);
      }
      if (!common.empty()) {  // e.g. 2*b*s - 2*b = b * (2*s - 2): with b >= 2, s >= 4, at least 12
        std::pair<int64_t, int64_t> rest{0, 0}, fac{1, 1};
        for (const Term& t : out) {
          std::vector<int32_t> left;
          std::set_difference(t.atoms.begin(), t.atoms.end(), common.begin(), common.end(), std::back_inserter(left));
          std::pair<int64_t, int64_t> tr{t.coeff, t.coeff};
          for (int32_t a : left) tr = range_mul(tr, {nodes[a].lo, nodes[a].hi});
          rest = {sat_add(rest.first, tr.first), sat_add(rest.second, tr.second)};
        }
        for (int32_t a : common) fac = range_mul(fac, {nodes[a].lo, nodes[a].hi});
        const auto f = range_mul(fac, rest);
        r = {std::max(r.first, f.first), std::min(r.second, f.second)};
      }
    }
    if (out.size() > 1 && (r.first == -kInf || r.second == kInf)) {
      const auto [v, dir] = at_lows_if_monotone(out);
      if (dir > 0) r.first = std::max(r.first, v);
      if (dir < 0) r.second = std::min(r.second, v);
    }
    if (r.first == r.second) return SymInt(r.first);  // every value in range is one number
    n.terms = std::move(out);
    n.lo = r.first;
    n.hi = r.second;
    n.has_hint = hinted;
    n.hint = hinted ? h : 0;
    return ref(intern(key, std::move(n)));
  }
  SymInt atom(Kind k, int64_t a, int64_t b, int32_t symbol, std::pair<int64_t, int64_t> r, bool hinted,
              int64_t h) {
    std::string key = std::to_string(static_cast<int>(k)) + ":" + std::to_string(a) + ":" +
                      std::to_string(b) + ":" + std::to_string(symbol);
    Node n;
    n.kind = k;
    n.a = a;
    n.b = b;
    n.symbol = symbol;
    n.lo = r.first;
    n.hi = r.second;
    n.has_hint = hinted;
    n.hint = hinted ? h : 0;
    const int32_t id = intern(key, std::move(n));
    return poly({Term{1, {id}}});
  }

  SymInt add(SymInt x, SymInt y) {
    std::vector<Term> t = terms(x);
    for (Term& u : terms(y)) t.push_back(std::move(u));
    return poly(std::move(t));
  }
  SymInt mul(SymInt x, SymInt y) {
    std::vector<Term> t;
    for (const Term& u : terms(x))
      for (const Term& v : terms(y)) {
        Term p{checked_mul(u.coeff, v.coeff), u.atoms};
        for (int32_t a : v.atoms) p.atoms.push_back(a);
        std::sort(p.atoms.begin(), p.atoms.end());
        t.push_back(std::move(p));
      }
    return poly(std::move(t));
  }
  // x / y when y is one term dividing every term of x exactly; nullopt otherwise.
  std::optional<SymInt> exact_div(SymInt x, SymInt y) {
    std::vector<Term> ty = terms(y);
    if (ty.size() != 1) return std::nullopt;
    const Term& d = ty[0];
    std::vector<Term> q;
    for (Term t : terms(x)) {
      if (t.coeff % d.coeff != 0) return std::nullopt;
      for (int32_t a : d.atoms) {
        auto it = std::find(t.atoms.begin(), t.atoms.end(), a);
        if (it == t.atoms.end()) return std::nullopt;
        t.atoms.erase(it);
      }
      t.coeff /= d.coeff;
      q.push_back(std::move(t));
    }
    return poly(std::move(q));
  }
  SymInt div(SymInt x, SymInt y) {
    KILN_CHECK(y.raw() != 0 || y.is_symbolic(), Runtime, "symint", "division by zero in a size computation");
    if (auto q = exact_div(x, y)) return *q;
    auto rx = range(x), ry = range(y);
    std::pair<int64_t, int64_t> r{-kInf, kInf};
    if (rx.first >= 0 && ry.first > 0)
      r = {ry.second == kInf ? 0 : rx.first / ry.second, rx.second == kInf ? kInf : rx.second / ry.first};
    const bool hinted = has_hint(x) && has_hint(y);
    return atom(Kind::FloorDiv, x.raw(), y.raw(), -1, r, hinted, hinted ? floordiv(hint(x), hint(y)) : 0);
  }
  SymInt mod(SymInt x, SymInt y) {
    KILN_CHECK(y.raw() != 0 || y.is_symbolic(), Runtime, "symint", "division by zero in a size computation");
    if (exact_div(x, y)) return SymInt(0);
    auto rx = range(x), ry = range(y);
    std::pair<int64_t, int64_t> r{-kInf, kInf};
    if (rx.first >= 0 && ry.first > 0) r = {0, std::min(ry.second == kInf ? kInf : ry.second - 1, rx.second)};
    const bool hinted = has_hint(x) && has_hint(y);
    return atom(Kind::Mod, x.raw(), y.raw(), -1, r, hinted, hinted ? floormod(hint(x), hint(y)) : 0);
  }
  SymInt minmax(SymInt x, SymInt y, bool is_max) {
    auto d = range(add(x, mul(y, SymInt(-1))));
    if (d.first >= 0) return is_max ? x : y;
    if (d.second <= 0) return is_max ? y : x;
    auto rx = range(x), ry = range(y);
    std::pair<int64_t, int64_t> r = is_max ? std::pair{std::max(rx.first, ry.first), std::max(rx.second, ry.second)}
                                           : std::pair{std::min(rx.first, ry.first), std::min(rx.second, ry.second)};
    const bool hinted = has_hint(x) && has_hint(y);
    const int64_t h = hinted ? (is_max ? std::max(hint(x), hint(y)) : std::min(hint(x), hint(y))) : 0;
    return atom(is_max ? Kind::Max : Kind::Min, x.raw(), y.raw(), -1, r, hinted, h);
  }

  int64_t eval(SymInt s, const std::vector<int64_t>& v) const {
    if (!s.is_symbolic()) return s.raw();
    int64_t sum = 0;
    for (const Term& t : node(s).terms) {
      int64_t p = t.coeff;
      for (int32_t a : t.atoms) p = checked_mul(p, eval_atom(a, v));
      sum = checked_add(sum, p);
    }
    return sum;
  }
  int64_t eval_atom(int32_t id, const std::vector<int64_t>& v) const {
    const Node& n = nodes[id];
    auto A = [&] { return eval(SymInt::from_raw(n.a), v); };
    auto B = [&] { return eval(SymInt::from_raw(n.b), v); };
    switch (n.kind) {
      case Kind::Symbol:
        KILN_CHECK(n.symbol < static_cast<int>(v.size()), Value, "ShapeEnv", "no value given for symbol ",
                   symbols[n.symbol].name);
        return v[n.symbol];
      case Kind::FloorDiv: return floordiv(A(), B());
      case Kind::Mod: return floormod(A(), B());
      case Kind::Max: return std::max(A(), B());
      case Kind::Min: return std::min(A(), B());
      case Kind::Poly: break;
    }
    return 0;
  }

  std::string atom_str(int32_t id) const {
    const Node& n = nodes[id];
    // a sum as an operand of // or % is parenthesised: "((seq - 2)//2)", not "(seq - 2//2)"
    auto operand = [](int64_t raw) {
      std::string x = SymInt::from_raw(raw).str();
      return x.find(' ') != std::string::npos ? "(" + x + ")" : x;
    };
    const std::string a = operand(n.a), b = operand(n.b);
    switch (n.kind) {
      case Kind::Symbol: return symbols[n.symbol].name;
      case Kind::FloorDiv: return "(" + a + "//" + b + ")";
      case Kind::Mod: return "(" + a + "%" + b + ")";
      case Kind::Max: return "max(" + a + ", " + b + ")";
      case Kind::Min: return "min(" + a + ", " + b + ")";
      case Kind::Poly: break;
    }
    return "?";
  }
  std::string str(SymInt s) const {
    if (!s.is_symbolic()) return std::to_string(s.raw());
    const std::vector<Term>& ts = node(s).terms;
    std::string out;
    // constant last: "batch*seq + 1"
    std::vector<const Term*> order;
    for (const Term& t : ts)  // positive terms first, then negative ones, the constant last
      if (!t.atoms.empty() && t.coeff > 0) order.push_back(&t);
    for (const Term& t : ts)
      if (!t.atoms.empty() && t.coeff < 0) order.push_back(&t);
    for (const Term& t : ts)
      if (t.atoms.empty()) order.push_back(&t);
    for (size_t k = 0; k < order.size(); ++k) {
      const Term& t = *order[k];
      int64_t c = t.coeff;
      if (k > 0) {
        out += c < 0 ? " - " : " + ";
        if (c < 0) c = -c;
      } else if (c < 0 && !t.atoms.empty() && c == -1) {
        out += "-";
        c = 1;
      }
      std::string m;
      for (int32_t a : t.atoms) m += (m.empty() ? "" : "*") + atom_str(a);
      if (t.atoms.empty())
        out += std::to_string(c);
      else
        out += (c == 1 ? "" : std::to_string(c) + "*") + m;
    }
    return out;
  }

};

namespace {
ShapeEnv::Impl& env_of(SymInt s) {
  ShapeEnv* e = g_env;
  const uint32_t gen = static_cast<uint32_t>((static_cast<uint64_t>(s.raw()) >> 32) & 0xffff);
  KILN_CHECK(e != nullptr && e->generation() == gen, Runtime, "symint",
             "a symbolic size is used outside the ShapeEnv that made it (",
             e ? "another ShapeEnv is active" : "no ShapeEnv is active on this thread", ")");
  KILN_CHECK(static_cast<uint32_t>(s.raw()) < e->impl().nodes.size(), Runtime, "symint",
             "a symbolic size refers to no expression of the active ShapeEnv");
  return e->impl();
}
ShapeEnv::Impl& env_of(SymInt a, SymInt b) { return env_of(a.is_symbolic() ? a : b); }
}  // namespace

// ---- SymInt ---------------------------------------------------------------------------------------
std::optional<int64_t> SymInt::maybe_int() const {
  if (!is_symbolic()) return v_;
  auto r = env_of(*this).range(*this);
  return r.first == r.second ? std::optional<int64_t>(r.first) : std::nullopt;
}
int64_t SymInt::hint() const {
  if (!is_symbolic()) return v_;
  ShapeEnv::Impl& e = env_of(*this);
  KILN_CHECK(e.has_hint(*this), Runtime, "symint", "the size ", str(),
             " depends on a tensor's data (an unbacked symbol) and has no example value");
  return e.hint(*this);
}
std::optional<int64_t> SymInt::maybe_hint() const {
  if (!is_symbolic()) return v_;
  ShapeEnv::Impl& e = env_of(*this);
  return e.has_hint(*this) ? std::optional<int64_t>(e.hint(*this)) : std::nullopt;
}
std::string where_str(std::source_location w) {
  std::string f = w.file_name();
  const auto k = f.find("kiln/");
  return (k == std::string::npos ? f : f.substr(k)) + ":" + std::to_string(w.line());
}
int64_t SymInt::guard_int(std::source_location where) const {
  if (!is_symbolic()) return v_;
  return guard_int(where_str(where));
}
int64_t SymInt::guard_int(const std::string& where) const {
  if (!is_symbolic()) return v_;
  const int64_t h = hint();
  SymBool b = (*this == SymInt(h));
  if (!b.is_static()) g_env->record(b, where.empty() && g_where ? g_where : where);
  return h;
}
int64_t SymInt::expect_int(const char* op) const {
  KILN_CHECK(!is_symbolic(), Runtime, op, "expected a concrete size, got the symbolic ", str());
  return v_;
}
std::string SymInt::str() const { return is_symbolic() ? env_of(*this).str(*this) : std::to_string(v_); }
std::ostream& operator<<(std::ostream& os, SymInt s) { return os << s.str(); }

SymInt SymInt::operator-() const {
  if (!is_symbolic()) return SymInt(checked_mul(v_, -1));
  return env_of(*this).mul(*this, SymInt(-1));
}
namespace symint_detail {
SymInt add(SymInt a, SymInt b) {
  if (both_concrete(a, b)) return SymInt(checked_add(a.raw(), b.raw()));  // raises on overflow
  return env_of(a, b).add(a, b);
}
SymInt sub(SymInt a, SymInt b) {
  if (both_concrete(a, b)) {
    int64_t r;
    if (__builtin_sub_overflow(a.raw(), b.raw(), &r)) overflow();
    return SymInt(r);
  }
  ShapeEnv::Impl& e = env_of(a, b);
  return e.add(a, e.mul(b, SymInt(-1)));
}
SymInt mul(SymInt a, SymInt b) {
  if (both_concrete(a, b)) return SymInt(checked_mul(a.raw(), b.raw()));
  return env_of(a, b).mul(a, b);
}
SymInt div(SymInt a, SymInt b) {
  if (both_concrete(a, b)) {
    KILN_CHECK(b.raw() != 0, Runtime, "symint", "division by zero in a size computation");
    if (b.raw() == -1) return -a;
    return SymInt(a.raw() / b.raw());
  }
  return env_of(a, b).div(a, b);
}
SymInt mod(SymInt a, SymInt b) {
  if (both_concrete(a, b)) {
    KILN_CHECK(b.raw() != 0, Runtime, "symint", "division by zero in a size computation");
    return SymInt(b.raw() == -1 ? 0 : a.raw() % b.raw());
  }
  return env_of(a, b).mod(a, b);
}
}  // namespace symint_detail
SymInt sym_max(SymInt a, SymInt b) {
  if (!a.is_symbolic() && !b.is_symbolic()) return SymInt(std::max(a.raw(), b.raw()));
  return env_of(a, b).minmax(a, b, true);
}
SymInt sym_min(SymInt a, SymInt b) {
  if (!a.is_symbolic() && !b.is_symbolic()) return SymInt(std::min(a.raw(), b.raw()));
  return env_of(a, b).minmax(a, b, false);
}


struct ShapeEnvAccess {
  static SymBool compare(SymInt x, SymInt y, Cmp c) {
    if (!x.is_symbolic() && !y.is_symbolic()) return SymBool(apply(c, x.raw(), y.raw()));
    ShapeEnv::Impl& e = env_of(x, y);
    const SymInt d = e.add(x, e.mul(y, SymInt(-1)));
    if (!d.is_symbolic()) return SymBool(apply(c, d.raw(), 0));
    auto [lo, hi] = e.range(d);
    // a product against a multiple of it (16*seq vs 16*batch*seq): compare the quotient with 1
    if (lo == -kInf || hi == kInf) {
      auto rx = e.range(x), ry = e.range(y);
      if (rx.first >= 1 && ry.first >= 1) {
        if (auto q = e.exact_div(y, x)) {  // y = q * x, x > 0: x ? y  is  1 ? q
          if (!q->is_symbolic() || e.range(*q).first != -kInf) {
            auto rq = e.range(*q);
            if (c == kLt && rq.first > 1) return SymBool(true);
            if (c == kLe && rq.first >= 1) return SymBool(true);
            if ((c == kEq || c == kNe) && rq.first > 1) return SymBool(c == kNe);
          }
        }
        if (auto q = e.exact_div(x, y)) {  // x = q * y, y > 0: x ? y  is  q ? 1
          auto rq = e.range(*q);
          if ((c == kLt || c == kLe) && rq.first > 1) return SymBool(false);
          if (c == kLe && rq.first >= 1 && rq.second <= 1) return SymBool(true);
          if ((c == kEq || c == kNe) && rq.first > 1) return SymBool(c == kNe);
        }
      }
    }
    switch (c) {
      case kEq: if (lo > 0 || hi < 0) return SymBool(false); break;
      case kNe: if (lo > 0 || hi < 0) return SymBool(true); break;
      case kLt: if (hi < 0) return SymBool(true); if (lo >= 0) return SymBool(false); break;
      case kLe: if (hi <= 0) return SymBool(true); if (lo > 0) return SymBool(false); break;
    }
    SymBool b(false);
    const bool hinted = e.has_hint(d);
    if (hinted) b.value_ = apply(c, e.hint(d), 0);
    b.static_ = false;
    b.cmp_ = static_cast<uint8_t>(c | (hinted ? 0 : 0x80));
    b.gen_ = e.env->generation();
    b.lhs_ = x.raw();
    b.rhs_ = y.raw();
    return b;
  }
  static SymBool negate(const SymBool& b) {
    if (b.static_) return SymBool(!b.value_);
    SymBool n = b;
    n.value_ = !b.value_;
    const Cmp c = static_cast<Cmp>(b.cmp_ & 0x7f);
    const uint8_t flags = b.cmp_ & 0x80;
    if (c == kEq || c == kNe) {
      n.cmp_ = static_cast<uint8_t>((c == kEq ? kNe : kEq) | flags);
    } else {  // !(x < y) is y <= x; !(x <= y) is y < x
      n.cmp_ = static_cast<uint8_t>((c == kLt ? kLe : kLt) | flags);
      std::swap(n.lhs_, n.rhs_);
    }
    return n;
  }
  // The condition that held (b's value true: b itself; false: its negation).
  static GuardRec held(const SymBool& b) {
    const SymBool& h = b.value_ ? b : negate(b);
    return {h.lhs_, h.rhs_, static_cast<Cmp>(h.cmp_ & 0x7f)};
  }
  static bool hinted(const SymBool& b) { return !(b.cmp_ & 0x80); }
};

SymBool symint_detail::cmp(SymInt a, SymInt b, int kind) {
  return ShapeEnvAccess::compare(a, b, static_cast<Cmp>(kind));
}

SymBool SymBool::operator!() const { return ShapeEnvAccess::negate(*this); }
bool SymBool::guard() const { return guard(g_where ? g_where : ""); }
bool SymBool::guard(const std::string& where) const {
  if (static_) return value_;
  ShapeEnv* e = g_env;
  KILN_CHECK(e != nullptr && e->generation() == gen_, Runtime, "symint",
             "a comparison of symbolic sizes is used outside the ShapeEnv that made it");
  e->record(*this, where);
  return value_;
}

// ---- ShapeEnv -------------------------------------------------------------------------------------
ShapeEnv::ShapeEnv() : impl_(std::make_unique<Impl>()) {
  impl_->env = this;
  gen_ = g_generation.fetch_add(1) % 0xffff + 1;
}
ShapeEnv::~ShapeEnv() = default;

SymInt ShapeEnv::create_symbol(const std::string& name, int64_t hint, int64_t min, int64_t max) {
  KILN_CHECK(min <= max, Value, "ShapeEnv", "symbol ", name, ": min ", min, " is above max ", max);
  KILN_CHECK(hint >= min && hint <= max, Value, "ShapeEnv", "symbol ", name, ": the example value ", hint,
             " is outside its range [", min, ", ", max == kInf ? std::string("inf") : std::to_string(max), "]");
  if (min == max) return SymInt(min);
  Impl& e = *impl_;
  e.symbols.push_back({name, hint, min, max, false});
  const int32_t i = static_cast<int32_t>(e.symbols.size() - 1);
  return e.atom(Kind::Symbol, 0, 0, i, {min, max}, true, hint);
}
SymInt ShapeEnv::create_unbacked(int64_t min, int64_t max) {
  Impl& e = *impl_;
  e.symbols.push_back({"u" + std::to_string(e.unbacked++), 0, min, max, true});
  const int32_t i = static_cast<int32_t>(e.symbols.size() - 1);
  return e.atom(Kind::Symbol, 0, 0, i, {min, max}, false, 0);
}
int ShapeEnv::num_symbols() const { return static_cast<int>(impl_->symbols.size()); }
SymInt ShapeEnv::symbol(int i) const {
  Impl& e = *impl_;
  KILN_CHECK(i >= 0 && i < static_cast<int>(e.symbols.size()), Index, "ShapeEnv", "no symbol ", i);
  const Symbol& s = e.symbols[i];
  return e.atom(Kind::Symbol, 0, 0, i, {s.lo, s.hi}, !s.unbacked, s.hint);  // the interned node
}
const std::string& ShapeEnv::symbol_name(int i) const { return impl_->symbols.at(i).name; }

std::pair<int64_t, int64_t> ShapeEnv::range(SymInt s) const {
  if (s.is_symbolic()) {
    ShapeEnvGuard g(const_cast<ShapeEnv&>(*this));
    env_of(s);
  }
  return impl_->range(s);
}
int64_t ShapeEnv::evaluate(SymInt s, const std::vector<int64_t>& values) const {
  ShapeEnvGuard g(const_cast<ShapeEnv&>(*this));
  if (s.is_symbolic()) env_of(s);
  return impl_->eval(s, values);
}
bool ShapeEnv::record(const SymBool& b, const std::string& where) {
  KILN_CHECK(ShapeEnvAccess::hinted(b), Runtime, "symint", "could not decide whether ",
             SymInt::from_raw(b.lhs_).str(), cmp_str(static_cast<Cmp>(b.cmp_ & 0x7f)),
             SymInt::from_raw(b.rhs_).str(),
             ": it depends on a tensor's data (an unbacked size)", where.empty() ? "" : ", in ", where);
  const GuardRec r = ShapeEnvAccess::held(b);
  std::string text = SymInt::from_raw(r.lhs).str() + cmp_str(r.cmp) + SymInt::from_raw(r.rhs).str();
  for (const Guard& g : guards_)
    if (g.text == text) return b.value_;
  const bool spec = r.cmp == kEq && !SymInt::from_raw(r.rhs).is_symbolic() && SymInt::from_raw(r.lhs).is_symbolic();
  guards_.push_back({std::move(text), where, spec});
  impl_->recs.push_back(r);
  return b.value_;
}
std::optional<std::string> ShapeEnv::check(const std::vector<int64_t>& values) const {
  const Impl& e = *impl_;
  KILN_CHECK(values.size() >= e.symbols.size(), Value, "ShapeEnv", "expected ", e.symbols.size(),
             " symbol values, got ", values.size());
  for (size_t i = 0; i < e.symbols.size(); ++i) {
    const Symbol& s = e.symbols[i];
    if (values[i] < s.lo || values[i] > s.hi)
      return s.name + " = " + std::to_string(values[i]) + " is outside its range [" + std::to_string(s.lo) +
             ", " + (s.hi == kInf ? std::string("inf") : std::to_string(s.hi)) + "]";
  }
  ShapeEnvGuard g(const_cast<ShapeEnv&>(*this));
  for (size_t i = 0; i < e.recs.size(); ++i) {
    const GuardRec& r = e.recs[i];
    if (!apply(r.cmp, e.eval(SymInt::from_raw(r.lhs), values), e.eval(SymInt::from_raw(r.rhs), values)))
      return "guard " + guards_[i].text + " fails" + (guards_[i].where.empty() ? "" : " (from " + guards_[i].where + ")");
  }
  return std::nullopt;
}

ShapeEnv::Where::Where(const char* what) : prev(g_where) { g_where = what; }
ShapeEnv::Where::~Where() { g_where = prev; }

ShapeEnvGuard::ShapeEnvGuard(ShapeEnv& env) : prev_(g_env) { g_env = &env; }
ShapeEnvGuard::~ShapeEnvGuard() { g_env = prev_; }
ShapeEnv* active_shape_env() { return g_env; }
ShapeEnv* set_active_shape_env(ShapeEnv* env) {
  ShapeEnv* prev = g_env;
  g_env = env;
  return prev;
}

// ---- shapes ---------------------------------------------------------------------------------------
bool is_symbolic(const SymShape& s) {
  for (SymInt v : s)
    if (v.is_symbolic()) return true;
  return false;
}
SymInt sym_numel(const SymShape& s) {
  SymInt n = 1;
  for (SymInt v : s) n = n * v;
  return n;
}
SymShape sym_contiguous_strides(const SymShape& sizes) {
  SymShape st(sizes.size());
  SymInt acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    st[i] = acc;
    acc = acc * sym_max(sizes[i], 1);  // as contiguous_strides: a size 0 or 1 counts as 1
  }
  return st;
}
std::string sym_str(const SymShape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].str();
  if (s.size() == 1) out += ",";
  return out + ")";
}

}  // namespace kiln
