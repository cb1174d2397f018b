// Which vector instruction set kiln's CPU kernels use. Chosen once per process: the best of base
// (SSE2), avx2 (AVX2 + FMA + BMI2) and avx512 (AVX-512 F/BW/VL/DQ) that the CPU runs, or a lower one
// named by KILN_CPU_ISA (base | avx2 | avx512; a value the CPU cannot run falls back to the best it
// can, an unknown value is reported on stderr and ignored). Every per-ISA code path reads this.
#pragma once

namespace kiln::cpu {

enum class Isa : int { Base = 0, Avx2 = 1, Avx512 = 2 };

Isa selected_isa();
// "avx512", "avx2" or "base".
const char* cpu_isa();
// Whether this CPU (and this build) can run the kernels of `isa`.
bool isa_supported(Isa isa);
// Whether this CPU (and build) has the AVX512-BF16 GEMM (vdpbf16ps), and whether the selected table
// uses it: the avx512 table multiplies bfloat16 with it where the CPU has the instructions.
bool bf16_dot_supported();
bool bf16_dot();
// Whether this CPU (and build, and kernel) has the AMX-BF16 GEMM (tdpbf16ps tiles), and whether the
// selected table uses it: the avx512 table's bfloat16 and float8 products run on the tiles where the
// CPU has them, the kernel grants the process the tile state, and KILN_AMX is not 0 in the
// environment (decision 45).
bool amx_supported();
bool amx();

}  // namespace kiln::cpu
