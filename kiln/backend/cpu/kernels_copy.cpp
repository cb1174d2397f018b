// Dtype-converting copy loops (compiled once per ISA).
#include <cstring>

#include "kiln/backend/cpu/isa_util.h"
#include "kiln/core/convert.h"

namespace kiln::cpu::KILN_ISA {
namespace {

template <class F, class T>
void cast_loop(char* out, const char* in, int64_t n, int64_t os, int64_t is) {
  if (os == sizeof(T) && is == sizeof(F)) {
    if constexpr (std::is_same_v<F, T>) {
      std::memcpy(out, in, static_cast<size_t>(n) * sizeof(T));
    } else {
      T* __restrict o = reinterpret_cast<T*>(out);
      const F* __restrict x = reinterpret_cast<const F*>(in);
      for (int64_t i = 0; i < n; ++i) o[i] = convert<T>(x[i]);
    }
  } else if (is == 0) {
    T v = convert<T>(*reinterpret_cast<const F*>(in));
    for (int64_t i = 0; i < n; ++i, out += os) *reinterpret_cast<T*>(out) = v;
  } else {
    for (int64_t i = 0; i < n; ++i, out += os, in += is)
      *reinterpret_cast<T*>(out) = convert<T>(*reinterpret_cast<const F*>(in));
  }
}

template <class F>
void for_all(F&& f) {
  for_each_type(f);
  f.template operator()<Float8_e4m3fn>();
  f.template operator()<Float8_e5m2>();
}

}  // namespace

void fill_copy(KernelTable& t) {
  for_all([&]<class F>() {
    for_all([&]<class T>() {
      t.cast[static_cast<int>(dtype_of<F>())][static_cast<int>(dtype_of<T>())] = &cast_loop<F, T>;
    });
  });
}

}  // namespace kiln::cpu::KILN_ISA
