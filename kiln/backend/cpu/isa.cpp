#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/core/error.h"

namespace kiln::cpu {

// The families of each ISA's table: one fill function per per-ISA kernel file (kernels_<family>.cpp).
#define KILN_FAMILIES(X) X(unary) X(binary) X(reduce) X(copy) X(gemm) X(random) X(norm) X(optim) X(rnn) X(linalg) X(householder) X(attention) X(fft)

#define KILN_DECLARE_FILL(family) void fill_##family(KernelTable&);
#define KILN_DECLARE_ISA(ns) \
  namespace ns {             \
  KILN_FAMILIES(KILN_DECLARE_FILL) \
  }
KILN_DECLARE_ISA(base)
#ifndef KILN_BASE_ISA_ONLY
KILN_DECLARE_ISA(avx2)
KILN_DECLARE_ISA(avx512)
namespace avx512bf16 {
void fill_gemm_bf16(KernelTable&);
}
namespace avx512amx {
void fill_gemm_amx(KernelTable&);
}
#endif

namespace {
#define KILN_FILL(family) ns::fill_##family(*t);
#define KILN_BUILD(name_, extra)          \
  [] {                                    \
    auto* t = new KernelTable();          \
    t->isa = #name_;                      \
    namespace ns = name_;                 \
    KILN_FAMILIES(KILN_FILL)              \
    extra;                                \
    return static_cast<const KernelTable*>(t); \
  }()

const KernelTable* build_table(Isa isa) {
#ifndef KILN_BASE_ISA_ONLY
  if (isa == Isa::Avx512)
    return KILN_BUILD(avx512, if (bf16_dot_supported()) avx512bf16::fill_gemm_bf16(*t);
                      if (amx_supported()) avx512amx::fill_gemm_amx(*t));
  if (isa == Isa::Avx2) return KILN_BUILD(avx2, );
#endif
  (void)isa;
  return KILN_BUILD(base, );
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

bool bf16_dot_supported() {
#ifndef KILN_BASE_ISA_ONLY
  __builtin_cpu_init();
  return isa_supported(Isa::Avx512) && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

bool bf16_dot() { return selected_isa() == Isa::Avx512 && bf16_dot_supported(); }

namespace {
bool detect_amx() {
#ifndef KILN_BASE_ISA_ONLY
  if (!bf16_dot_supported()) return false;
  if (const char* e = std::getenv("KILN_AMX"); e && std::strcmp(e, "0") == 0) return false;
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  if (!(d & (1u << 22)) || !(d & (1u << 24))) return false;  // AMX-BF16, AMX-TILE
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return false;  // the OS saves XTILECFG and XTILEDATA
  // Linux hands the tile data state to a process that asks for it (ARCH_REQ_XCOMP_PERM, XTILEDATA)
  return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#else
  return false;
#endif
}
}  // namespace

bool amx_supported() {
  static const bool ok = detect_amx();
  return ok;
}

bool amx() { return selected_isa() == Isa::Avx512 && amx_supported(); }

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
