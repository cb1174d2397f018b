#include "kiln/optim/value.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "kiln/core/error.h"

namespace kiln::optim {

Value Value::list(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::List;
  v.items_ = std::move(items);
  return v;
}

Value Value::tuple(std::vector<Value> items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::Tuple;
  return v;
}

Value Value::floats(const std::vector<double>& xs, bool as_tuple) {
  std::vector<Value> items(xs.begin(), xs.end());
  return as_tuple ? tuple(std::move(items)) : list(std::move(items));
}

Value Value::ints(const std::vector<int64_t>& xs) {
  std::vector<Value> items(xs.begin(), xs.end());
  return list(std::move(items));
}

Value Value::dict(std::vector<std::pair<Value, Value>> items) {
  Value v;
  v.kind_ = Kind::Dict;
  v.entries_ = std::move(items);
  return v;
}

double Value::to_double(const char* what) const {
  switch (kind_) {
    case Kind::Bool:
    case Kind::Int:
      return static_cast<double>(i_);
    case Kind::Float:
      return d_;
    default:
      KILN_FAIL(Type, "optim", what, " must be a number, but got ", repr());
  }
}

int64_t Value::to_int(const char* what) const {
  KILN_CHECK(kind_ == Kind::Int || kind_ == Kind::Bool, Type, "optim", what,
             " must be an integer, but got ", repr());
  return i_;
}

bool Value::to_bool(const char* what) const {
  switch (kind_) {
    case Kind::None:
      return false;
    case Kind::Bool:
    case Kind::Int:
      return i_ != 0;
    case Kind::Float:
      return d_ != 0;
    case Kind::Str:
      return !s_.empty();
    case Kind::List:
    case Kind::Tuple:
      return !items_.empty();
    case Kind::Dict:
      return !entries_.empty();
  }
  KILN_FAIL(Type, "optim", what, " has no truth value");
}

const std::string& Value::str_value(const char* what) const {
  KILN_CHECK(kind_ == Kind::Str, Type, "optim", what, " must be a string, but got ", repr());
  return s_;
}

std::vector<double> Value::to_doubles(const char* what) const {
  KILN_CHECK(kind_ == Kind::List || kind_ == Kind::Tuple, Type, "optim", what,
             " must be a sequence of numbers, but got ", repr());
  std::vector<double> r;
  for (const Value& v : items_) r.push_back(v.to_double(what));
  return r;
}

std::vector<int64_t> Value::to_ints(const char* what) const {
  KILN_CHECK(kind_ == Kind::List || kind_ == Kind::Tuple, Type, "optim", what,
             " must be a sequence of integers, but got ", repr());
  std::vector<int64_t> r;
  for (const Value& v : items_) r.push_back(v.to_int(what));
  return r;
}

const Value* Value::find(const std::string& key) const {
  if (kind_ != Kind::Dict) return nullptr;
  for (const auto& [k, v] : entries_)
    if (k.kind_ == Kind::Str && k.s_ == key) return &v;
  return nullptr;
}

const Value& Value::at(const std::string& key) const {
  const Value* v = find(key);
  KILN_CHECK(v != nullptr, Index, "optim", "missing key '", key, "'");
  return *v;
}

std::string py_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form, then laid out the way Python's repr does.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  int exp = std::atoi(sci.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  } else if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else {
    size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return neg ? "-" + out : out;
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return i_ ? "True" : "False";
    case Kind::Int:
      return std::to_string(i_);
    case Kind::Float:
      return py_float_repr(d_);
    case Kind::Str:
      return "'" + s_ + "'";
    case Kind::List:
    case Kind::Tuple: {
      std::string s = kind_ == Kind::List ? "[" : "(";
      for (size_t i = 0; i < items_.size(); ++i) s += (i ? ", " : "") + items_[i].repr();
      if (kind_ == Kind::Tuple && items_.size() == 1) s += ",";
      return s + (kind_ == Kind::List ? "]" : ")");
    }
    case Kind::Dict: {
      std::string s = "{";
      for (size_t i = 0; i < entries_.size(); ++i)
        s += (i ? ", " : "") + entries_[i].first.repr() + ": " + entries_[i].second.repr();
      return s + "}";
    }
  }
  return "?";
}

bool Value::operator==(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::Float || o.kind_ == Kind::Float) return to_double() == o.to_double();
    return i_ == o.i_;
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::None:
      return true;
    case Kind::Str:
      return s_ == o.s_;
    case Kind::List:
    case Kind::Tuple:
      return items_ == o.items_;
    case Kind::Dict:
      return entries_ == o.entries_;
    default:
      return false;
  }
}

const Value* Options::find(const std::string& key) const {
  for (const auto& [k, v] : items_)
    if (k == key) return &v;
  return nullptr;
}

Value* Options::find(const std::string& key) {
  for (auto& [k, v] : items_)
    if (k == key) return &v;
  return nullptr;
}

const Value& Options::get(const std::string& key) const {
  const Value* v = find(key);
  KILN_CHECK(v != nullptr, Index, "optim", "param group has no option '", key, "'");
  return *v;
}

Options& Options::set(const std::string& key, Value v) {
  if (Value* cur = find(key)) {
    *cur = std::move(v);
  } else {
    items_.emplace_back(key, std::move(v));
  }
  return *this;
}

const Value& Options::setdefault(const std::string& key, const Value& v) {
  if (const Value* cur = find(key)) return *cur;
  items_.emplace_back(key, v);
  return items_.back().second;
}

bool Options::erase(const std::string& key) {
  for (auto it = items_.begin(); it != items_.end(); ++it) {
    if (it->first == key) {
      items_.erase(it);
      return true;
    }
  }
  return false;
}

}  // namespace kiln::optim
