// The number of threads kiln's kernels use (torch.set_num_threads / get_num_threads); the pool
// itself is the CPU backend's (backend/cpu/parallel.h). And which vector ISA its CPU kernels run.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kiln {
// The intra-op count. Until set, it is default_num_threads().
void set_num_threads(int n);
int get_num_threads();
// KILN_NUM_THREADS if set, else OMP_NUM_THREADS, else the CPUs this process may use: its affinity
// mask, capped by the CPU quota of its cgroup (v1 or v2; a quota of 2.5 CPUs gives 2 threads).
int default_num_threads();

// The inter-op count: how many non-default streams run kernels at the same time (kiln/core/stream.h).
// As torch: settable once, and only before the pool has started (RuntimeError otherwise).
void set_num_interop_threads(int n);
int get_num_interop_threads();
// Called by the pool when it starts its first worker; later set_num_interop_threads calls raise.
void mark_interop_started();

// The OpenMP runtimes loaded in this process (paths, one per runtime: libgomp, libiomp5, libomp),
// less a libgomp that LLVM's or Intel's runtime stands in for (it has libgomp's entry points and comes
// first in the global scope, as with LD_PRELOAD=libomp.so.5: libgomp's callers all bind to it).
// More than one means two thread pools competing for the same CPUs; kiln warns once when it sees
// that (check_openmp_runtimes, called at set_num_threads and by the Python module at import).
std::vector<std::string> openmp_runtimes();
void check_openmp_runtimes();

namespace threads_detail {
// The parsing behind default_num_threads, exposed for tests. cgroup_cpu_limit reads
// <root>/proc/self/cgroup and the cgroup files under <root>/sys/fs/cgroup (v2 cpu.max, or v1
// cpu.cfs_quota_us / cpu.cfs_period_us), taking the smallest quota along the cgroup's ancestors;
// nullopt when no quota applies. root is "" for the real system.
std::optional<double> cgroup_cpu_limit(const std::string& root);
std::optional<double> parse_cpu_max(const std::string& text);           // v2: "quota period" | "max period"
std::optional<double> parse_cfs(const std::string& quota, const std::string& period);  // v1
int threads_for(int affinity_cpus, std::optional<double> quota_cpus);
// A thread-count variable's value ("4", "4,2" as OMP_NUM_THREADS's list): its first positive int, or 0.
int parse_thread_env(const char* value);
// Which OpenMP runtime a loaded library is ("libgomp", "libiomp5", "libomp"), or "" for none.
std::string openmp_runtime_kind(const std::string& path);
}  // namespace threads_detail

namespace cpu {
// "avx512", "avx2" or "base": the CPU kernel table in use (backend/cpu/isa.h).
const char* cpu_isa();
// Whether that table multiplies bfloat16 with the AVX512-BF16 instructions (backend/cpu/isa.h).
bool bf16_dot();
// Whether it multiplies them on AMX tiles (backend/cpu/isa.h).
bool amx();
}  // namespace cpu
}  // namespace kiln
