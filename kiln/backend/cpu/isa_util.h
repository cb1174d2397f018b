// Helpers for the per-ISA kernel files: iterate over dtypes and op codes at compile time.
#pragma once

#include <type_traits>
#include <utility>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/core/visit.h"

#ifndef KILN_ISA
#error "KILN_ISA must name the ISA namespace (base, avx2, avx512)"
#endif
// Like vec.h and math.h, its contents live in the ISA's namespace (no inline code shared between tables).

namespace kiln::cpu::KILN_ISA {

// Integer +, - and * wrap (two's complement), as torch's results do, instead of overflowing: done in
// Wrap<M>, at least unsigned int (a narrower type would be promoted to int, and overflow).
template <class M>
inline constexpr bool kWraps = std::is_integral_v<M> && !std::is_same_v<M, bool>;
template <class M>
using Wrap = std::conditional_t<(sizeof(M) < sizeof(unsigned)), unsigned,
                                std::make_unsigned_t<std::conditional_t<kWraps<M>, M, int>>>;

template <class F>
void for_each_type(F&& f) {
  f.template operator()<bool>();
  f.template operator()<uint8_t>();
  f.template operator()<int8_t>();
  f.template operator()<int16_t>();
  f.template operator()<uint16_t>();
  f.template operator()<int32_t>();
  f.template operator()<uint32_t>();
  f.template operator()<int64_t>();
  f.template operator()<uint64_t>();
  f.template operator()<Half>();
  f.template operator()<BFloat16>();
  f.template operator()<float>();
  f.template operator()<double>();
  f.template operator()<complex64>();
  f.template operator()<complex128>();
}

template <class F, int... I>
void for_each_code_impl(F&& f, std::integer_sequence<int, I...>) {
  (f.template operator()<I>(), ...);
}
template <int N, class F>
void for_each_code(F&& f) {
  for_each_code_impl(f, std::make_integer_sequence<int, N>{});
}

template <class T> inline constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <class T> struct RealOf { using type = T; };
template <class T> struct RealOf<std::complex<T>> { using type = T; };
template <class T> using real_of_t = typename RealOf<T>::type;

}  // namespace kiln::cpu::KILN_ISA
