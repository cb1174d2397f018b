// The number of threads kiln's kernels use (torch.set_num_threads / get_num_threads); the pool
// itself is the CPU backend's (backend/cpu/parallel.h). And which vector ISA its CPU kernels run.
#pragma once

namespace kiln {
void set_num_threads(int n);
int get_num_threads();

namespace cpu {
// "avx512", "avx2" or "base": the CPU kernel table in use (backend/cpu/isa.h).
const char* cpu_isa();
// Whether that table multiplies bfloat16 with the AVX512-BF16 instructions (backend/cpu/isa.h).
bool bf16_dot();
// Whether it multiplies them on AMX tiles (backend/cpu/isa.h).
bool amx();
}  // namespace cpu
}  // namespace kiln
