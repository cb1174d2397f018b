// SmallVec<T, N>: a std::vector with room for N elements inside the object, so the short lists an op
// call passes around (shapes, strides, its tensors and attributes) cost no heap allocation. It grows
// onto the heap past N. The API is std::vector's (the parts kiln uses), and it converts to and from
// std::vector<T> implicitly, so code written against either works with both.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln {

template <class T, size_t N>
class SmallVec {
 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  SmallVec() noexcept : data_(inline_data()) {}
  explicit SmallVec(size_t n) : SmallVec() { resize(n); }
  SmallVec(size_t n, const T& v) : SmallVec() { assign(n, v); }
  SmallVec(std::initializer_list<T> il) : SmallVec() { append(il.begin(), il.end()); }
  template <class It, class = std::enable_if_t<!std::is_integral_v<It>>>
  SmallVec(It first, It last) : SmallVec() { append(first, last); }
  SmallVec(const std::vector<T>& v) : SmallVec() { append(v.begin(), v.end()); }  // NOLINT: implicit
  SmallVec(const SmallVec& o) : SmallVec() { append(o.begin(), o.end()); }
  SmallVec(SmallVec&& o) noexcept(std::is_nothrow_move_constructible_v<T>) : SmallVec() { take(std::move(o)); }
  ~SmallVec() {
    destroy(begin(), end());
    if (!is_inline()) ::operator delete(data_);
  }

  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &o) {
      clear();
      if (!is_inline()) ::operator delete(data_), data_ = inline_data(), cap_ = N;
      take(std::move(o));
    }
    return *this;
  }
  SmallVec& operator=(std::initializer_list<T> il) {
    assign(il.begin(), il.end());
    return *this;
  }
  SmallVec& operator=(const std::vector<T>& v) {
    assign(v.begin(), v.end());
    return *this;
  }
  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }  // NOLINT: implicit
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }

  // ---- access ----
  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_t capacity() const noexcept { return cap_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& front() { return data_[0]; }
  const T& front() const { return data_[0]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }
  iterator begin() noexcept { return data_; }
  iterator end() noexcept { return data_ + size_; }
  const_iterator begin() const noexcept { return data_; }
  const_iterator end() const noexcept { return data_ + size_; }
  const_iterator cbegin() const noexcept { return data_; }
  const_iterator cend() const noexcept { return data_ + size_; }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }

  // ---- modifiers ----
  void reserve(size_t n) {
    if (n > cap_) grow_to(n);
  }
  void clear() noexcept {
    destroy(begin(), end());
    size_ = 0;
  }
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  template <class... A>
  T& emplace_back(A&&... a) {
    if (size_ == cap_) {
      T tmp(std::forward<A>(a)...);  // `a` may refer into this vector
      grow_to(cap_ * 2);
      new (data_ + size_) T(std::move(tmp));
    } else {
      new (data_ + size_) T(std::forward<A>(a)...);
    }
    return data_[size_++];
  }
  void pop_back() { data_[--size_].~T(); }
  // Replaces the contents with n elements copied bit for bit from another trivially copyable type of
  // the same size (int64_t sizes into SymInts and back).
  template <class U>
  void assign_bits(const U* src, size_t n) {
    static_assert(sizeof(U) == sizeof(T) && std::is_trivially_copyable_v<U> && std::is_trivially_copyable_v<T>);
    size_ = 0;  // T is trivially destructible
    if (n > cap_) grow_to(n);
    for (size_t i = 0; i < n; ++i) std::memcpy(static_cast<void*>(data_ + i), src + i, sizeof(T));
    size_ = n;
  }
  void resize(size_t n) {
    if (n < size_) {
      destroy(begin() + n, end());
    } else {
      reserve(n);
      for (size_t i = size_; i < n; ++i) new (data_ + i) T();
    }
    size_ = n;
  }
  void resize(size_t n, const T& v) {
    if (n < size_) {
      destroy(begin() + n, end());
    } else {
      T tmp(v);
      reserve(n);
      for (size_t i = size_; i < n; ++i) new (data_ + i) T(tmp);
    }
    size_ = n;
  }
  void assign(size_t n, const T& v) {
    T tmp(v);
    clear();
    resize(n, tmp);
  }
  template <class It, class = std::enable_if_t<!std::is_integral_v<It>>>
  void assign(It first, It last) {
    SmallVec tmp;  // the range may alias this vector
    tmp.append(first, last);
    *this = std::move(tmp);
  }
  void assign(std::initializer_list<T> il) { assign(il.begin(), il.end()); }

  iterator insert(const_iterator pos, const T& v) { return insert(pos, size_t(1), v); }
  iterator insert(const_iterator pos, T&& v) {
    const size_t i = static_cast<size_t>(pos - begin());
    T tmp(std::move(v));
    emplace_back(std::move(tmp));
    std::rotate(begin() + i, end() - 1, end());
    return begin() + i;
  }
  iterator insert(const_iterator pos, size_t n, const T& v) {
    const size_t i = static_cast<size_t>(pos - begin());
    T tmp(v);
    reserve(size_ + n);
    for (size_t k = 0; k < n; ++k) new (data_ + size_ + k) T(tmp);
    size_ += n;
    std::rotate(begin() + i, end() - n, end());
    return begin() + i;
  }
  template <class It, class = std::enable_if_t<!std::is_integral_v<It>>>
  iterator insert(const_iterator pos, It first, It last) {
    const size_t i = static_cast<size_t>(pos - begin());
    SmallVec tmp;
    tmp.append(first, last);
    const size_t n = tmp.size();
    reserve(size_ + n);
    for (size_t k = 0; k < n; ++k) new (data_ + size_ + k) T(std::move(tmp[k]));
    size_ += n;
    std::rotate(begin() + i, end() - n, end());
    return begin() + i;
  }
  iterator insert(const_iterator pos, std::initializer_list<T> il) { return insert(pos, il.begin(), il.end()); }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    iterator f = begin() + (first - begin()), l = begin() + (last - begin());
    iterator e = std::move(l, end(), f);
    destroy(e, end());
    size_ -= static_cast<size_t>(l - f);
    return f;
  }
  void swap(SmallVec& o) {
    SmallVec t(std::move(o));
    o = std::move(*this);
    *this = std::move(t);
  }

  friend bool operator==(const SmallVec& a, const SmallVec& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator==(const SmallVec& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator<(const SmallVec& a, const SmallVec& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  T* inline_data() noexcept { return std::launder(reinterpret_cast<T*>(buf_)); }
  bool is_inline() const noexcept { return data_ == reinterpret_cast<const T*>(buf_); }
  static void destroy(T* f, T* l) noexcept {
    if constexpr (!std::is_trivially_destructible_v<T>)
      for (; f != l; ++f) f->~T();
  }
  template <class It>
  void append(It first, It last) {
    if constexpr (std::is_base_of_v<std::forward_iterator_tag, typename std::iterator_traits<It>::iterator_category>)
      reserve(size_ + static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) emplace_back(*first);
  }
  void grow_to(size_t n) {
    n = std::max<size_t>(n, 2 * N);
    T* p = static_cast<T*>(::operator new(n * sizeof(T)));
    if constexpr (std::is_trivially_copyable_v<T>) {
      if (size_) std::memcpy(static_cast<void*>(p), data_, size_ * sizeof(T));
    } else {
      for (size_t i = 0; i < size_; ++i) new (p + i) T(std::move(data_[i]));
      destroy(begin(), end());
    }
    if (!is_inline()) ::operator delete(data_);
    data_ = p;
    cap_ = n;
  }
  void take(SmallVec&& o) {  // *this is empty and inline
    if (o.is_inline()) {
      for (size_t i = 0; i < o.size_; ++i) new (data_ + i) T(std::move(o.data_[i]));
      size_ = o.size_;
      o.clear();
    } else {
      data_ = o.data_, size_ = o.size_, cap_ = o.cap_;
      o.data_ = o.inline_data(), o.size_ = 0, o.cap_ = N;
    }
  }

  T* data_;
  size_t size_ = 0;
  size_t cap_ = N;
  alignas(T) unsigned char buf_[N * sizeof(T)];
};

}  // namespace kiln
