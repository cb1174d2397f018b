#include "kiln/backend/cpu/parallel.h"

#include <dlfcn.h>
#include <link.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/core/deterministic.h"
#include "kiln/core/error.h"
#include "kiln/core/warning.h"

extern "C" void openblas_set_num_threads(int);

namespace kiln {
namespace {
int g_threads = 0;
// GNU OpenMP does not restart its thread pool in a forked child: a parallel region there waits for
// threads that were not copied. So before fork() the forking thread releases its pool
// (omp_pause_resource_all: the threads exit) and both processes start a fresh one on their next
// parallel region. Where that cannot be done (fork from inside a parallel region), the child runs
// kiln on one thread, which enters no parallel region (kernels and OpenBLAS go serial), and refuses more.
bool g_forked_single = false;
bool g_paused = false;
void before_fork() {
  g_paused = g_threads <= 1 || (!omp_in_parallel() && omp_pause_resource_all(omp_pause_soft) == 0);
}
void after_fork_in_child() {
  if (g_paused) return;  // 0 or 1 thread, or the pool was released: the child starts its own
  g_threads = 1;
  g_forked_single = true;
  omp_set_num_threads(1);
  openblas_set_num_threads(1);
}
struct ForkGuard {
  ForkGuard() { pthread_atfork(&before_fork, nullptr, &after_fork_in_child); }
} fork_guard;
}  // namespace

void set_num_threads(int n) {
  KILN_CHECK(n > 0, Runtime, "set_num_threads", "set_num_threads expects a positive integer, got ", n);
  KILN_CHECK(n == 1 || !g_forked_single, Runtime, "set_num_threads",
             "this process was forked from inside a parallel region of kiln's OpenMP thread pool, "
             "which cannot be restarted after that (GNU OpenMP); kiln runs on one thread here. Fork "
             "outside kiln's kernels, or start workers with the 'spawn' or 'forkserver' method");
  g_threads = n;
  omp_set_num_threads(n);
  cpu::apply_blas_threads();
  check_openmp_runtimes();
}

int get_num_threads() {
  if (g_threads == 0) {
    g_threads = default_num_threads();
    cpu::apply_blas_threads();
  }
  return g_threads;
}

namespace threads_detail {
namespace {
std::optional<std::string> read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
std::optional<double> min_limit(std::optional<double> a, std::optional<double> b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}
// The quota along a cgroup's directory and its ancestors up to the controller's mount point. Inside
// a container the path named in /proc/self/cgroup may not exist under the container's mount (the
// mount is the container's own cgroup): then the mount point itself is read.
template <class Read>
std::optional<double> walk(const std::string& mount, const std::string& rel, Read&& read_limit) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::path(mount) / fs::path(rel).relative_path();
  if (!fs::is_directory(dir, ec)) dir = fs::path(mount);
  std::optional<double> limit;
  // up to the mount point itself: every step is shorter, and the mount is a prefix of each
  for (fs::path d = dir;; d = d.parent_path()) {
    limit = min_limit(limit, read_limit(d.string()));
    if (d.string().size() <= mount.size()) break;
  }
  return limit;
}
}  // namespace

std::optional<double> parse_cpu_max(const std::string& text) {
  std::istringstream in(text);
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return std::nullopt;
  char* end = nullptr;
  const double q = std::strtod(quota.c_str(), &end);
  if (end == quota.c_str() || q <= 0) return std::nullopt;
  return q / period;
}

std::optional<double> parse_cfs(const std::string& quota, const std::string& period) {
  char* e1 = nullptr;
  char* e2 = nullptr;
  const double q = std::strtod(quota.c_str(), &e1), p = std::strtod(period.c_str(), &e2);
  if (e1 == quota.c_str() || e2 == period.c_str() || q <= 0 || p <= 0) return std::nullopt;  // -1: none
  return q / p;
}

int threads_for(int affinity_cpus, std::optional<double> quota_cpus) {
  int n = std::max(affinity_cpus, 1);
  // Rounded down (at least 1): a thread more than the quota is throttled each period, and kiln's
  // parallel loops wait for their slowest thread.
  if (quota_cpus) n = std::min<int>(n, std::max(1, static_cast<int>(std::floor(*quota_cpus + 1e-9))));
  return n;
}

std::optional<double> cgroup_cpu_limit(const std::string& root) {
  const auto self = read_text(root + "/proc/self/cgroup");
  if (!self) return std::nullopt;
  std::optional<double> limit;
  std::istringstream lines(*self);
  std::string line;
  while (std::getline(lines, line)) {
    // "hierarchy-id:controllers:path"; v2's single line is "0::path"
    const auto c1 = line.find(':'), c2 = line.find(':', c1 == std::string::npos ? c1 : c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) continue;
    const std::string id = line.substr(0, c1), controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string rel = line.substr(c2 + 1);
    if (id == "0" && controllers.empty()) {
      limit = min_limit(limit, walk(root + "/sys/fs/cgroup", rel, [](const std::string& d) {
        const auto t = read_text(d + "/cpu.max");
        return t ? parse_cpu_max(*t) : std::nullopt;
      }));
      continue;
    }
    std::istringstream cs(controllers);
    std::string ctl;
    bool cpu = false;
    while (std::getline(cs, ctl, ',')) cpu = cpu || ctl == "cpu";
    if (!cpu) continue;
    for (const char* m : {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpuacct,cpu", "/sys/fs/cgroup/cpu"}) {
      std::error_code ec;
      if (!std::filesystem::is_directory(root + m, ec)) continue;
      limit = min_limit(limit, walk(root + m, rel, [](const std::string& d) -> std::optional<double> {
        const auto q = read_text(d + "/cpu.cfs_quota_us"), p = read_text(d + "/cpu.cfs_period_us");
        return q && p ? parse_cfs(*q, *p) : std::nullopt;
      }));
      break;
    }
  }
  return limit;
}

int parse_thread_env(const char* value) {
  if (!value) return 0;
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  if (end == value || v <= 0 || v > 1 << 20) return 0;
  while (*end == ' ') ++end;
  return *end == '\0' || *end == ',' ? static_cast<int>(v) : 0;
}

std::string openmp_runtime_kind(const std::string& path) {
  const std::string name = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  for (const char* k : {"libgomp", "libiomp5", "libomp"}) {
    const std::string kind = k;
    if (name.compare(0, kind.size(), kind) == 0 && name.size() > kind.size() &&
        (name[kind.size()] == '.' || name[kind.size()] == '-'))
      return kind;
  }
  return "";
}
}  // namespace threads_detail

int default_num_threads() {
  for (const char* var : {"KILN_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* v = std::getenv(var);
    if (!v || !*v) continue;
    if (const int n = threads_detail::parse_thread_env(v)) return n;
    warn(WarningKind::Runtime, std::string(var) + "='" + v +
                                   "' is not a positive integer; kiln ignores it and uses the CPUs it may run on");
  }
  int affinity = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) affinity = CPU_COUNT(&set);
  if (affinity <= 0) affinity = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return threads_detail::threads_for(affinity, threads_detail::cgroup_cpu_limit(""));
}

namespace {
std::mutex g_interop_mu;
int g_interop = 0;  // 0: not set
bool g_interop_set = false, g_interop_started = false;
}  // namespace

void set_num_interop_threads(int n) {
  std::lock_guard<std::mutex> lock(g_interop_mu);
  KILN_CHECK(n > 0, Runtime, "set_num_interop_threads", "set_num_interop_threads expects a positive integer");
  KILN_CHECK(!g_interop_set && !g_interop_started, Runtime, "set_num_interop_threads",
             "Error: cannot set number of interop threads after parallel work has started or "
             "set_num_interop_threads called");
  g_interop = n;
  g_interop_set = true;
}

int get_num_interop_threads() {
  std::lock_guard<std::mutex> lock(g_interop_mu);
  if (g_interop == 0) g_interop = default_num_threads();
  return g_interop;
}

void mark_interop_started() {
  std::lock_guard<std::mutex> lock(g_interop_mu);
  g_interop_started = true;
}

std::vector<std::string> openmp_runtimes() {
  std::vector<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* out = static_cast<std::vector<std::string>*>(data);
        if (info->dlpi_name && *info->dlpi_name &&
            !threads_detail::openmp_runtime_kind(info->dlpi_name).empty())
          out->push_back(info->dlpi_name);
        return 0;
      },
      &names);
  const auto file_of = [](const std::string& n) {
    std::error_code ec;
    const std::string r = std::filesystem::canonical(n, ec).string();
    return ec ? n : r;
  };
  // A libgomp stood in for: LLVM's and Intel's runtimes carry libgomp's entry points, and where one of
  // them comes first in the global scope (LD_PRELOAD, or loaded RTLD_GLOBAL before libgomp's users),
  // every libgomp caller (kiln's GCC build, OpenBLAS, torch) binds to it and libgomp runs nothing.
  // (kiln's own calls bound when it was loaded: it must be bound there too.)
  const auto host_of = [&](void* f) {
    Dl_info info{};
    return f && dladdr(f, &info) && info.dli_fname ? file_of(info.dli_fname) : std::string();
  };
  const std::string gomp_host = host_of(dlvsym(RTLD_DEFAULT, "GOMP_parallel", "GOMP_4.0"));
  const std::string gomp_kind = threads_detail::openmp_runtime_kind(gomp_host);
  const bool gomp_stood_in = (gomp_kind == "libomp" || gomp_kind == "libiomp5") &&
                             host_of(reinterpret_cast<void*>(&omp_in_parallel)) == gomp_host;
  // one entry per file: libiomp5.so is often a link to libomp.so.5
  std::vector<std::string> real, out;
  for (const auto& n : names) {
    const std::string key = file_of(n);
    if (std::find(real.begin(), real.end(), key) != real.end()) continue;
    if (gomp_stood_in && threads_detail::openmp_runtime_kind(n) == "libgomp") continue;
    real.push_back(key);
    out.push_back(n);
  }
  return out;
}

void check_openmp_runtimes() {
  static std::atomic<bool> warned{false};
  if (warned.load()) return;
  const auto rts = openmp_runtimes();
  if (rts.size() < 2 || warned.exchange(true)) return;
  std::string list;
  for (const auto& r : rts) list += (list.empty() ? "" : ", ") + r;
  warn(WarningKind::Runtime,
       std::to_string(rts.size()) + " OpenMP runtimes are loaded in this process (" + list +
           "). Each keeps its own thread pool, so together they run more threads than there are CPUs "
           "and kernels slow down (or, with Intel's runtime, abort). Load one runtime for every library "
           "(e.g. LD_PRELOAD the same libgomp), or give each a share with OMP_NUM_THREADS");
}

namespace cpu {
namespace team_detail {
// A team: its leader (OpenMP thread 0) runs the body and posts jobs; the others spin on `gen` for
// the next job (a pause per poll; sched_yield after a while, to share the CPU politely) and count
// themselves into `done` after each, all of them, whether the job had work for them or not.
struct Team {
  int size = 1;
  alignas(64) std::atomic<uint64_t> gen{0};  // (apart from `done`, which every worker writes)
  std::atomic<bool> quit{false};
  void (*call)(void*, int) = nullptr;
  void* ctx = nullptr;
  int n = 0;
  alignas(64) std::atomic<int> done{0};
};
thread_local Team* t_team = nullptr;
int team_size(const Team& team) { return team.size; }

inline void spin_pause(int64_t& polls) {
  cpu_pause();
  if (++polls > (1 << 16)) sched_yield();
}

void team_run(Team& team, int n, void (*call)(void*, int), void* ctx) {
  team.call = call, team.ctx = ctx, team.n = n;
  team.done.store(0, std::memory_order_relaxed);
  team.gen.fetch_add(1, std::memory_order_release);  // publishes the job
  t_team = nullptr;  // the leader's share is a job like the others': what it calls runs serially
  std::exception_ptr error;
  try {  // (jobs must not throw; if one does, the others still finish before its frame goes)
    call(ctx, 0);
  } catch (...) {
    error = std::current_exception();
  }
  t_team = &team;
  int64_t polls = 0;
  while (team.done.load(std::memory_order_acquire) < team.size - 1) spin_pause(polls);
  if (error) std::rethrow_exception(error);
}
}  // namespace team_detail

bool leads_team() { return team_detail::t_team != nullptr; }

namespace {
thread_local int64_t t_regions = 0, t_serialised = 0;
thread_local bool t_kiln_sgemm = false;
}  // namespace
int64_t regions_opened() { return t_regions; }
void count_region() { ++t_regions; }
int64_t blas_serialised_in_team() { return t_serialised; }
void count_blas_serialised() { ++t_serialised; }
KilnSgemmScope::KilnSgemmScope() : saved_(t_kiln_sgemm) {
  t_kiln_sgemm = kiln_sgemm_usable();
}
bool kiln_sgemm_usable() {
  return !are_deterministic_algorithms_enabled() && std::strcmp(cpu_kernels().isa, "base") != 0;
}
KilnSgemmScope::~KilnSgemmScope() { t_kiln_sgemm = saved_; }
bool kiln_sgemm_preferred() { return t_kiln_sgemm; }

void run_as_team(int threads, const std::function<void()>& body) {
  threads = std::min(threads, get_num_threads());
  if (threads <= 1 || omp_in_parallel() || team_detail::t_team) {
    body();
    return;
  }
  team_detail::Team team;
  std::exception_ptr error;
  JoinSpin join;  // (the workers leave within a microsecond of quit: the leader need not sleep)
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    if (t == 0) {
      team.size = omp_get_num_threads();
      team_detail::t_team = &team;
      try {
        body();
      } catch (...) {
        error = std::current_exception();
      }
      team_detail::t_team = nullptr;
      team.quit.store(true, std::memory_order_release);
      join.wait(team.size - 1);
    } else {
      uint64_t seen = 0;
      int64_t polls = 0;
      for (;;) {
        const uint64_t g = team.gen.load(std::memory_order_acquire);
        if (g != seen) {
          seen = g, polls = 0;
          if (t < team.n) team.call(team.ctx, t);
          team.done.fetch_add(1, std::memory_order_acq_rel);
        } else if (team.quit.load(std::memory_order_acquire)) {
          break;  // the leader posts nothing after quit, and waited for every job before it
        } else {
          team_detail::spin_pause(polls);
        }
      }
      join.arrive();
    }
  }
  if (error) std::rethrow_exception(error);
}

// OpenBLAS's thread count is one process-wide number (and lowering it frees the other threads'
// buffers), so holders on several host threads (kiln's streams) count in: the first sets one thread,
// the last sets kiln's count back. Each holder's own OpenMP count (which openblas_set_num_threads
// also sets, for the calling thread) is restored by itself.
namespace {
std::mutex g_serial_blas_mutex;
int g_serial_blas_holders = 0;
}  // namespace
SerialBlas::SerialBlas(bool on) : on_(on && get_num_threads() > 1 && !omp_in_parallel()) {
  if (!on_) return;
  const std::lock_guard<std::mutex> lock(g_serial_blas_mutex);
  if (g_serial_blas_holders++ == 0) openblas_set_num_threads(1);
  else omp_set_num_threads(1);  // (this thread's count, which OpenBLAS follows)
}
SerialBlas::~SerialBlas() {
  if (!on_) return;
  const std::lock_guard<std::mutex> lock(g_serial_blas_mutex);
  if (--g_serial_blas_holders == 0) apply_blas_threads();
  omp_set_num_threads(std::max(g_threads, 1));
}

bool in_parallel_region() { return omp_in_parallel() && team_detail::t_team == nullptr; }
// OpenBLAS splits a product differently on different thread counts (its bits change): in
// deterministic mode it runs on one thread; kiln's own loops keep their thread-independent splits.
void apply_blas_threads() {
  openblas_set_num_threads(are_deterministic_algorithms_enabled() ? 1 : std::max(g_threads, 1));
}
}  // namespace cpu

}  // namespace kiln
