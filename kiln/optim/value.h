// Option values of optimisers and schedulers: a small Python-like value (None, bool, int, float,
// str, list, tuple, dict) so that param groups and state dicts keep torch's layout and types
// ("weight_decay": 0 stays an int, "betas" a tuple) on both sides of the binding.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace kiln::optim {

class Value {
 public:
  enum class Kind : uint8_t { None, Bool, Int, Float, Str, List, Tuple, Dict };

  Value() = default;
  Value(bool b) : kind_(Kind::Bool), i_(b) {}
  Value(int v) : kind_(Kind::Int), i_(v) {}
  Value(int64_t v) : kind_(Kind::Int), i_(v) {}
  Value(double v) : kind_(Kind::Float), d_(v) {}
  Value(const char* s) : kind_(Kind::Str), s_(s) {}
  Value(std::string s) : kind_(Kind::Str), s_(std::move(s)) {}

  static Value list(std::vector<Value> items = {});
  static Value tuple(std::vector<Value> items);
  static Value floats(const std::vector<double>& xs, bool as_tuple = false);
  static Value ints(const std::vector<int64_t>& xs);
  // A dict; keys are Values too (str, or int as in a Counter).
  static Value dict(std::vector<std::pair<Value, Value>> items = {});

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_number() const {
    return kind_ == Kind::Bool || kind_ == Kind::Int || kind_ == Kind::Float;
  }

  // Conversions; raise TypeError-kind errors naming `what` when the kind does not fit.
  double to_double(const char* what = "value") const;
  int64_t to_int(const char* what = "value") const;
  bool to_bool(const char* what = "value") const;  // Python truthiness of numbers and None
  const std::string& str_value(const char* what = "value") const;
  std::vector<double> to_doubles(const char* what = "value") const;  // list/tuple of numbers
  std::vector<int64_t> to_ints(const char* what = "value") const;

  // list/tuple elements and dict entries.
  const std::vector<Value>& items() const { return items_; }
  std::vector<Value>& items() { return items_; }
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  std::vector<std::pair<Value, Value>>& entries() { return entries_; }
  // Dict lookup by string key; null when missing (or not a dict).
  const Value* find(const std::string& key) const;
  const Value& at(const std::string& key) const;  // raises IndexError-kind when missing

  // Python's str(): 1e-05, 0.1, 1.0, -1, True, None, (0.9, 0.999), [1, 2], {'a': 1}.
  std::string repr() const;

  bool operator==(const Value& o) const;

 private:
  Kind kind_ = Kind::None;
  int64_t i_ = 0;
  double d_ = 0;
  std::string s_;
  std::vector<Value> items_;
  std::vector<std::pair<Value, Value>> entries_;
};

// Python's repr of a float (shortest round-trip digits, scientific below 1e-4 and from 1e16).
std::string py_float_repr(double v);

// An ordered name -> Value map: the options of a param group (torch's group dict without "params"),
// an optimiser's defaults, a scheduler's state.
class Options {
 public:
  Options() = default;
  Options(std::initializer_list<std::pair<std::string, Value>> items) : items_(items) {}

  bool contains(const std::string& key) const { return find(key) != nullptr; }
  const Value* find(const std::string& key) const;
  Value* find(const std::string& key);
  const Value& get(const std::string& key) const;  // raises IndexError-kind when missing
  Options& set(const std::string& key, Value v);   // replaces in place or appends
  const Value& setdefault(const std::string& key, const Value& v);
  bool erase(const std::string& key);

  double get_double(const std::string& key) const { return get(key).to_double(key.c_str()); }
  bool get_bool(const std::string& key) const { return get(key).to_bool(key.c_str()); }

  size_t size() const { return items_.size(); }
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }
  bool operator==(const Options& o) const { return items_ == o.items_; }

 private:
  std::vector<std::pair<std::string, Value>> items_;
};

}  // namespace kiln::optim
