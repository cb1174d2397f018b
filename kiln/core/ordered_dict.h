// kiln::OrderedDict: a dict that keeps insertion order (Python's dict, libtorch's torch::OrderedDict).
// TensorDict (string -> Tensor) is the one type that Module::state_dict(), load_state_dict(),
// save_file() and load_file() give and take, so a checkpoint round trip needs no conversion.
//
// It reads like both of the types it replaces: a map (operator[] inserting, at, find, count, emplace,
// erase) and a vector of (key, value) pairs (iteration with structured bindings, push_back,
// emplace_back, front, back). Assigning to an existing key keeps the key's place, as Python's dict.
#pragma once

#include <initializer_list>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/core/error.h"

namespace kiln {

template <class K, class V>
class OrderedDict {
 public:
  using key_type = K;
  using mapped_type = V;
  using value_type = std::pair<K, V>;
  using Items = std::vector<value_type>;
  using iterator = typename Items::iterator;
  using const_iterator = typename Items::const_iterator;

  OrderedDict() = default;
  OrderedDict(std::initializer_list<value_type> init) {
    for (const auto& kv : init) insert(kv.first, kv.second);
  }

  // Adds at the end, or replaces the value of a key already present (in its place).
  V& insert(K key, V value) {
    auto it = index_.find(key);
    if (it != index_.end()) return items_[it->second].second = std::move(value);
    index_.emplace(key, items_.size());
    items_.emplace_back(std::move(key), std::move(value));
    return items_.back().second;
  }
  // std::map's emplace: a key already present is left alone (second = false).
  std::pair<iterator, bool> emplace(K key, V value) {
    auto it = index_.find(key);
    if (it != index_.end()) return {items_.begin() + static_cast<std::ptrdiff_t>(it->second), false};
    insert(std::move(key), std::move(value));
    return {items_.end() - 1, true};
  }
  void push_back(value_type kv) { insert(std::move(kv.first), std::move(kv.second)); }
  template <class A, class B>
  value_type& emplace_back(A&& key, B&& value) {
    V& v = insert(K(std::forward<A>(key)), V(std::forward<B>(value)));
    return *find_item(v);
  }

  V& operator[](const K& key) {
    auto it = index_.find(key);
    return it == index_.end() ? insert(key, V{}) : items_[it->second].second;
  }
  V& at(const K& key) { return items_[position(key)].second; }
  const V& at(const K& key) const { return items_[position(key)].second; }
  iterator find(const K& key) {
    auto it = index_.find(key);
    return it == index_.end() ? items_.end() : items_.begin() + static_cast<std::ptrdiff_t>(it->second);
  }
  const_iterator find(const K& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? items_.end() : items_.begin() + static_cast<std::ptrdiff_t>(it->second);
  }
  size_t count(const K& key) const { return index_.count(key); }
  bool contains(const K& key) const { return index_.count(key) != 0; }
  size_t erase(const K& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return 0;
    items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(it->second));
    reindex();
    return 1;
  }
  void clear() { items_.clear(), index_.clear(); }

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  iterator begin() { return items_.begin(); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }
  value_type& front() { return items_.front(); }
  value_type& back() { return items_.back(); }
  const value_type& front() const { return items_.front(); }
  const value_type& back() const { return items_.back(); }
  const Items& items() const { return items_; }
  std::vector<K> keys() const {
    std::vector<K> r;
    for (const auto& kv : items_) r.push_back(kv.first);
    return r;
  }
  std::vector<V> values() const {
    std::vector<V> r;
    for (const auto& kv : items_) r.push_back(kv.second);
    return r;
  }

 private:
  size_t position(const K& key) const {
    auto it = index_.find(key);
    if (it == index_.end()) {
      if constexpr (std::is_convertible_v<K, std::string>) KILN_FAIL(Index, "OrderedDict", "key '", key, "' not found");
      else KILN_FAIL(Index, "OrderedDict", "key not found");
    }
    return it->second;
  }
  value_type* find_item(const V& v) {
    for (auto& kv : items_)
      if (&kv.second == &v) return &kv;
    return nullptr;
  }
  void reindex() {
    index_.clear();
    for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
  }

  Items items_;
  std::unordered_map<K, size_t> index_;
};

class Tensor;
// The state-dict type: parameter and buffer names to tensors, in registration order.
using TensorDict = OrderedDict<std::string, Tensor>;

}  // namespace kiln
