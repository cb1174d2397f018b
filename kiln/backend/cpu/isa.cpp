#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/core/error.h"

namespace kiln::cpu {

#define KILN_DECLARE_ISA(ns)                   \
  namespace ns {                               \
  void fill_unary(KernelTable&);               \
  void fill_binary(KernelTable&);              \
  void fill_reduce(KernelTable&);              \
  void fill_copy(KernelTable&);                \
  void fill_gemm(KernelTable&);                \
  void fill_random(KernelTable&);              \
  }
KILN_DECLARE_ISA(base)
#ifndef KILN_BASE_ISA_ONLY
KILN_DECLARE_ISA(avx2)
KILN_DECLARE_ISA(avx512)
#endif

namespace {
template <void (*U)(KernelTable&), void (*B)(KernelTable&), void (*R)(KernelTable&),
          void (*C)(KernelTable&), void (*G)(KernelTable&), void (*X)(KernelTable&)>
KernelTable* build(const char* name) {
  auto* t = new KernelTable();
  t->isa = name;
  U(*t);
  B(*t);
  R(*t);
  C(*t);
  G(*t);
  X(*t);
  return t;
}

const KernelTable* build_table(Isa isa) {
#ifndef KILN_BASE_ISA_ONLY
  if (isa == Isa::Avx512)
    return build<avx512::fill_unary, avx512::fill_binary, avx512::fill_reduce, avx512::fill_copy,
                 avx512::fill_gemm, avx512::fill_random>("avx512");
  if (isa == Isa::Avx2)
    return build<avx2::fill_unary, avx2::fill_binary, avx2::fill_reduce, avx2::fill_copy, avx2::fill_gemm,
                 avx2::fill_random>("avx2");
#endif
  (void)isa;
  return build<base::fill_unary, base::fill_binary, base::fill_reduce, base::fill_copy, base::fill_gemm,
               base::fill_random>("base");
}

Isa best_isa() {
  __builtin_cpu_init();
  Isa best = Isa::Base;
#ifndef KILN_BASE_ISA_ONLY
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    best = Isa::Avx512;
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2"))
    best = Isa::Avx2;
#endif
  return best;
}

Isa pick_isa() {
  const Isa best = best_isa();
  const char* force = std::getenv("KILN_CPU_ISA");
  if (!force || !*force) return best;
  Isa want;
  if (std::strcmp(force, "base") == 0) want = Isa::Base;
  else if (std::strcmp(force, "avx2") == 0) want = Isa::Avx2;
  else if (std::strcmp(force, "avx512") == 0) want = Isa::Avx512;
  else {
    std::fprintf(stderr, "kiln: ignoring KILN_CPU_ISA=%s (expected base, avx2 or avx512)\n", force);
    return best;
  }
  return want < best ? want : best;
}
}  // namespace

Isa selected_isa() {
  static const Isa isa = pick_isa();
  return isa;
}

const KernelTable& cpu_kernels() {
  static const KernelTable* t = build_table(selected_isa());
  return *t;
}

const char* cpu_isa() { return cpu_kernels().isa; }

bool isa_supported(Isa isa) { return isa <= best_isa(); }

const KernelTable& kernel_table_for(Isa isa) {
  KILN_CHECK(isa_supported(isa), Runtime, "kernel_table_for", "this CPU cannot run ISA ", static_cast<int>(isa));
  if (isa == selected_isa()) return cpu_kernels();
  static const KernelTable* tables[3] = {};
  static std::once_flag once[3];
  const int i = static_cast<int>(isa);
  std::call_once(once[i], [&] { tables[i] = build_table(isa); });
  return *tables[i];
}

}  // namespace kiln::cpu
