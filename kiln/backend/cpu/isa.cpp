#include <cstdlib>
#include <cstring>

#include "kiln/backend/cpu/kernels.h"

namespace kiln::cpu {

#define KILN_DECLARE_ISA(ns)                   \
  namespace ns {                               \
  void fill_unary(KernelTable&);               \
  void fill_binary(KernelTable&);              \
  void fill_reduce(KernelTable&);              \
  void fill_copy(KernelTable&);                \
  void fill_gemm(KernelTable&);                \
  }
KILN_DECLARE_ISA(base)
#ifndef KILN_BASE_ISA_ONLY
KILN_DECLARE_ISA(avx2)
KILN_DECLARE_ISA(avx512)
#endif

namespace {
template <void (*U)(KernelTable&), void (*B)(KernelTable&), void (*R)(KernelTable&),
          void (*C)(KernelTable&), void (*G)(KernelTable&)>
KernelTable* build(const char* name) {
  auto* t = new KernelTable();
  t->isa = name;
  U(*t);
  B(*t);
  R(*t);
  C(*t);
  G(*t);
  return t;
}

const KernelTable* pick() {
  __builtin_cpu_init();
  const char* force = std::getenv("KILN_CPU_ISA");
  bool has512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  bool has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
              __builtin_cpu_supports("bmi2");
  if (force && std::strcmp(force, "base") == 0) has512 = has2 = false;
  if (force && std::strcmp(force, "avx2") == 0) has512 = false;
#ifdef KILN_BASE_ISA_ONLY
  has512 = has2 = false;
#else
  if (has512)
    return build<avx512::fill_unary, avx512::fill_binary, avx512::fill_reduce, avx512::fill_copy,
                 avx512::fill_gemm>("avx512");
  if (has2)
    return build<avx2::fill_unary, avx2::fill_binary, avx2::fill_reduce, avx2::fill_copy, avx2::fill_gemm>(
        "avx2");
#endif
  (void)has512;
  (void)has2;
  return build<base::fill_unary, base::fill_binary, base::fill_reduce, base::fill_copy, base::fill_gemm>(
      "base");
}
}  // namespace

const KernelTable& cpu_kernels() {
  static const KernelTable* t = pick();
  return *t;
}

const char* cpu_isa() { return cpu_kernels().isa; }

}  // namespace kiln::cpu
