// Process groups on Open MPI: the runtime (init, groups, the watchdog), the communication thread, and
// the collectives. See process_group.h for the model.
#include "kiln/distributed/process_group.h"

#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <climits>
#include <complex>
#include <cstdlib>
#include <map>
#include <sstream>

#include "kiln/autograd/autograd.h"
#include "kiln/core/error.h"
#include "kiln/ops/ops.h"

namespace kiln::distributed {

using Clock = std::chrono::steady_clock;

// ---- the process-wide runtime ----------------------------------------------------------------------
namespace {

struct Runtime {
  std::mutex m;
  bool initialized = false;
  int world_rank = 0, world_size = 1;
  MPI_Comm control = MPI_COMM_NULL;  // the watchdog's queries and replies
  std::vector<ProcessGroupPtr> groups;  // by id (null: not a member, or destroyed)
  ProcessGroupPtr world;
  std::thread watchdog;
  std::mutex wm;
  std::condition_variable wcv;
  bool stop = false;
  std::atomic<bool> faulted{false};  // a group aborted: MPI must not be finalised
  bool atexit_registered = false;
  std::atomic<bool> checks{true};
};
Runtime& rt() {
  static Runtime* r = new Runtime;  // never destroyed: threads may still read it at exit
  return *r;
}

constexpr int kTagQuery = 1, kTagReply = 2;

void mpi_check(int rc, const char* op, const char* call) {
  if (rc == MPI_SUCCESS) [[likely]]
    return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  KILN_FAIL(Runtime, op, call, " failed: ", std::string(msg, len));
}

int count_of(int64_t n, const char* op) {
  KILN_CHECK(n <= INT_MAX, Value, op, n, " elements per rank exceed MPI's int counts (2^31 - 1)");
  return static_cast<int>(n);
}

// ---- dtypes on the wire ------------------------------------------------------------------------------
// Reductions of float16/bfloat16/float8 run in float32; every other dtype travels as itself (the
// 16-bit and 8-bit floats as raw bits when nothing is reduced).
bool reduced_in_float32(Dtype d) {
  return d == kFloat16 || d == kBFloat16 || d == Dtype::Float8_e4m3fn || d == Dtype::Float8_e5m2;
}

MPI_Datatype mpi_type(Dtype d) {
  switch (d) {
    case Dtype::Bool:
    case Dtype::UInt8:
    case Dtype::Float8_e4m3fn:
    case Dtype::Float8_e5m2: return MPI_UINT8_T;
    case Dtype::Int8: return MPI_INT8_T;
    case Dtype::Int16: return MPI_INT16_T;
    case Dtype::UInt16:
    case Dtype::Float16:
    case Dtype::BFloat16: return MPI_UINT16_T;
    case Dtype::Int32: return MPI_INT32_T;
    case Dtype::UInt32: return MPI_UINT32_T;
    case Dtype::Int64: return MPI_INT64_T;
    case Dtype::UInt64: return MPI_UINT64_T;
    case Dtype::Float32: return MPI_FLOAT;
    case Dtype::Float64: return MPI_DOUBLE;
    case Dtype::Complex64: return MPI_C_FLOAT_COMPLEX;
    case Dtype::Complex128: return MPI_C_DOUBLE_COMPLEX;
    default: KILN_FAIL(Type, "distributed", "unsupported dtype ", dtype_name(d));
  }
}

MPI_Op mpi_op(ReduceOp op, Dtype d) {
  if (d == kBool) return (op == ReduceOp::SUM || op == ReduceOp::MAX) ? MPI_MAX : MPI_MIN;  // or / and
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG: return MPI_SUM;
    case ReduceOp::PRODUCT: return MPI_PROD;
    case ReduceOp::MIN: return MPI_MIN;
    case ReduceOp::MAX: return MPI_MAX;
  }
  return MPI_SUM;
}

void check_reduce(const char* op, const Tensor& t, ReduceOp r) {
  KILN_CHECK(t.defined(), Value, op, "expected a tensor");
  KILN_CHECK(t.device().is_cpu(), Value, op, "the mpi backend takes CPU tensors; got one on ", device_str(t.device()));
  if (is_complex(t.dtype()))
    KILN_CHECK(r != ReduceOp::MIN && r != ReduceOp::MAX, Value, op, "ReduceOp.", reduce_op_name(r),
               " is not defined for complex tensors (", dtype_name(t.dtype()), ")");
  if (r == ReduceOp::AVG)
    KILN_CHECK(is_floating(t.dtype()) || is_complex(t.dtype()), Value, op,
               "ReduceOp.AVG needs a floating-point or complex tensor; got ", dtype_name(t.dtype()));
}

void check_tensor(const char* op, const Tensor& t, const char* what = "tensor") {
  KILN_CHECK(t.defined(), Value, op, "expected a ", what);
  KILN_CHECK(t.device().is_cpu(), Value, op, "the mpi backend takes CPU tensors; got one on ", device_str(t.device()));
}

Dtype wire_dtype(Dtype d, bool reduce) { return reduce && reduced_in_float32(d) ? kFloat32 : d; }
// A contiguous buffer for t in its wire dtype (t itself when it already is one).
Tensor wire(const Tensor& t, bool reduce) {
  Dtype w = wire_dtype(t.dtype(), reduce);
  if (w == t.dtype() && t.is_contiguous()) return t;
  return t.to(w, /*copy=*/false).contiguous();
}
bool staged(const Tensor& buf, const Tensor& t) { return buf.impl() != t.impl(); }

// AVG: the sum divided by the group size, in the wire dtype (float32/float64/complex).
void scale(const Tensor& buf, int n) {
  int64_t k = buf.numel();
  switch (buf.dtype()) {
    case kFloat32: { auto* p = static_cast<float*>(buf.data_ptr()); for (int64_t i = 0; i < k; ++i) p[i] /= n; break; }
    case kFloat64: { auto* p = static_cast<double*>(buf.data_ptr()); for (int64_t i = 0; i < k; ++i) p[i] /= n; break; }
    case Dtype::Complex64: { auto* p = static_cast<std::complex<float>*>(buf.data_ptr()); for (int64_t i = 0; i < k; ++i) p[i] /= float(n); break; }
    case Dtype::Complex128: { auto* p = static_cast<std::complex<double>*>(buf.data_ptr()); for (int64_t i = 0; i < k; ++i) p[i] /= double(n); break; }
    default: break;
  }
}

// The flat elements of a contiguous buffer, in pieces MPI's int counts can carry.
template <class F>
void in_chunks(const Tensor& buf, F&& f) {
  constexpr int64_t kMax = int64_t(1) << 30;
  char* p = static_cast<char*>(buf.data_ptr());
  int64_t n = buf.numel(), item = static_cast<int64_t>(buf.itemsize());
  if (n == 0) return f(static_cast<void*>(p), 0);
  for (int64_t i = 0; i < n; i += kMax) f(static_cast<void*>(p + i * item), static_cast<int>(std::min(kMax, n - i)));
}

// ---- the consistency check: every rank's call, compared before any data moves ----------------------
enum Kind : int64_t { kAllReduce = 1, kBroadcast, kReduce, kAllGather, kReduceScatter, kAllToAll, kGather, kScatter, kBarrier };
const char* kind_name(int64_t k) {
  static const char* names[] = {"?", "all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter",
                                "all_to_all", "gather", "scatter", "barrier"};
  return k >= 1 && k <= 9 ? names[k] : "?";
}
struct Sig {
  int64_t kind, dtype, numel, extra;  // extra: the reduce op, or the root
};
std::string sig_str(const Sig& s) {
  std::ostringstream o;
  o << kind_name(s.kind);
  if (s.kind != kBarrier)
    o << " of " << s.numel << " " << dtype_name(static_cast<Dtype>(s.dtype)) << " elements";
  if (s.kind == kAllReduce || s.kind == kReduceScatter) o << ", " << reduce_op_name(static_cast<ReduceOp>(s.extra));
  if (s.kind == kBroadcast || s.kind == kGather || s.kind == kScatter || s.kind == kReduce) o << ", root " << s.extra;
  return o.str();
}
void check_consistent(MPI_Comm comm, const ProcessGroup& g, const Sig& mine, const char* op) {
  if (!rt().checks.load(std::memory_order_relaxed)) return;
  std::vector<Sig> all(g.size());
  mpi_check(MPI_Allgather(&mine, 4, MPI_INT64_T, all.data(), 4, MPI_INT64_T, comm), op, "MPI_Allgather");
  bool same = true;
  for (const Sig& s : all) same &= s.kind == mine.kind && s.dtype == all[0].dtype && s.numel == all[0].numel && s.extra == all[0].extra;
  if (same) return;
  std::ostringstream o;
  o << "the ranks of " << g.describe() << " called different collectives:";
  for (int r = 0; r < g.size(); ++r) o << (r ? ";" : "") << " rank " << g.global_rank(r) << ": " << sig_str(all[r]);
  KILN_FAIL(Runtime, op, o.str());
}

// The watchdog's control messages: a query {nonce, group id}, a reply {nonce, group id, entered}.
struct Pending {
  MPI_Request req;
  std::array<int64_t, 3> buf;
};
std::deque<Pending>& pending_sends() {
  static auto* p = new std::deque<Pending>;
  return *p;
}
void reap_sends() {
  auto& q = pending_sends();
  while (!q.empty()) {
    int done = 0;
    MPI_Test(&q.front().req, &done, MPI_STATUS_IGNORE);
    if (!done) break;
    q.pop_front();
  }
}
void post(std::array<int64_t, 3> msg, int dst, int tag) {
  auto& q = pending_sends();
  q.push_back({MPI_REQUEST_NULL, msg});
  MPI_Isend(q.back().buf.data(), 3, MPI_INT64_T, dst, tag, rt().control, &q.back().req);
}

// Answers other ranks' queries (the watchdog thread only).
void serve_queries() {
  Runtime& r = rt();
  for (;;) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kTagQuery, r.control, &flag, &st);
    if (!flag) break;
    std::array<int64_t, 3> q{};
    MPI_Recv(q.data(), 3, MPI_INT64_T, st.MPI_SOURCE, kTagQuery, r.control, MPI_STATUS_IGNORE);
    int64_t entered = -1;
    {
      std::lock_guard<std::mutex> l(r.m);
      if (q[1] >= 0 && q[1] < static_cast<int64_t>(r.groups.size()) && r.groups[q[1]]) entered = r.groups[q[1]]->entered();
    }
    post({q[0], q[1], entered}, st.MPI_SOURCE, kTagReply);
  }
  reap_sends();
}

// Asks every other member how many collectives it has started on the group; describes the absent.
std::string missing_ranks(const ProcessGroup& g, int64_t seq) {
  static int64_t nonce = 0;
  ++nonce;
  Runtime& r = rt();
  for (int m = 0; m < g.size(); ++m)
    if (m != g.rank()) post({nonce, g.id(), 0}, g.global_rank(m), kTagQuery);
  std::map<int, int64_t> answers;
  auto until = Clock::now() + Millis(std::clamp<int64_t>(g.timeout().count() / 4, 100, 2000));
  while (static_cast<int>(answers.size()) < g.size() - 1 && Clock::now() < until) {
    serve_queries();
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kTagReply, r.control, &flag, &st);
    if (!flag) {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
      continue;
    }
    std::array<int64_t, 3> a{};
    MPI_Recv(a.data(), 3, MPI_INT64_T, st.MPI_SOURCE, kTagReply, r.control, MPI_STATUS_IGNORE);
    if (a[0] == nonce) answers[st.MPI_SOURCE] = a[2];
  }
  std::ostringstream o;
  bool any = false;
  for (int m = 0; m < g.size(); ++m) {
    int gr = g.global_rank(m);
    if (m == g.rank()) continue;
    auto it = answers.find(gr);
    if (it == answers.end()) {
      o << (any ? "; " : "") << "rank " << gr << " did not answer (it may have died or be stuck outside kiln)";
      any = true;
    } else if (it->second < seq) {
      o << (any ? "; " : "") << "rank " << gr << " has not joined it (it has started " << it->second
        << " collectives on this group)";
      any = true;
    }
  }
  if (!any) o << "every rank joined it (are the ranks calling different collectives, or a send without its recv?)";
  return o.str();
}

void watchdog_main() {
  Runtime& r = rt();
  for (;;) {
    {
      std::unique_lock<std::mutex> l(r.wm);
      r.wcv.wait_for(l, Millis(2), [&] { return r.stop; });
      if (r.stop) return;
    }
    serve_queries();
    std::vector<ProcessGroupPtr> gs;
    {
      std::lock_guard<std::mutex> l(r.m);
      gs = r.groups;
    }
    auto now = Clock::now();
    for (auto& g : gs)
      if (g && !g->aborted()) g->watchdog_tick(now);
  }
}

void finalize_at_exit() {
  Runtime& r = rt();
  if (!r.initialized && r.groups.empty()) {
    int fin = 0, ini = 0;
    MPI_Initialized(&ini);
    MPI_Finalized(&fin);
    if (ini && !fin && !r.faulted) MPI_Finalize();
    return;
  }
  destroy_process_group(nullptr);
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin && !r.faulted) MPI_Finalize();
}

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return "SUM";
    case ReduceOp::AVG: return "AVG";
    case ReduceOp::PRODUCT: return "PRODUCT";
    case ReduceOp::MIN: return "MIN";
    case ReduceOp::MAX: return "MAX";
  }
  return "?";
}

ReduceOp reduce_op_from_string(const std::string& s) {
  std::string l;
  for (char c : s) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (l == "sum") return ReduceOp::SUM;
  if (l == "avg") return ReduceOp::AVG;
  if (l == "product" || l == "prod") return ReduceOp::PRODUCT;
  if (l == "min") return ReduceOp::MIN;
  if (l == "max") return ReduceOp::MAX;
  KILN_FAIL(Value, "distributed", "unknown reduce op '", s, "' (sum, avg, product, min, max)");
}

// ---- Work ---------------------------------------------------------------------------------------------
bool Work::is_success() const {
  std::lock_guard<std::mutex> l(m_);
  return done_ && !err_;
}
std::exception_ptr Work::exception() const {
  std::lock_guard<std::mutex> l(m_);
  return err_;
}
void Work::finish(std::exception_ptr err) {
  {
    std::lock_guard<std::mutex> l(m_);
    if (done_.load()) return;
    err_ = err;
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}
bool Work::wait(std::optional<Millis> timeout) {
  // A short yielding spin first: a small collective finishes within tens of microseconds, and sleeping
  // on the condition variable adds a futex wake-up to each. Yielding (not pausing) leaves the core to
  // the communication thread when the two share it (2 ranks on 2 cores: a pause-spin doubled latency).
  for (int i = 0; i < 200 && !done_.load(std::memory_order_acquire); ++i) std::this_thread::yield();
  std::unique_lock<std::mutex> l(m_);
  if (timeout) {
    bool ok = cv_.wait_for(l, *timeout, [&] { return done_.load(); });
    KILN_CHECK(ok, Runtime, op_.c_str(), "Work.wait timed out after ", timeout->count(), " ms");
  } else {
    cv_.wait(l, [&] { return done_.load(); });
  }
  if (err_) std::rethrow_exception(err_);
  return true;
}

// ---- ProcessGroup ---------------------------------------------------------------------------------------
ProcessGroup::ProcessGroup(int id, std::vector<int> ranks, int rank, Millis timeout, void* comm)
    : id_(id), ranks_(std::move(ranks)), rank_(rank), timeout_(timeout), comm_(comm) {
  thread_ = std::thread([this] { loop(); });
}

ProcessGroup::~ProcessGroup() { shutdown(); }

void ProcessGroup::shutdown() {
  {
    std::lock_guard<std::mutex> l(m_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (aborted_) {
    if (thread_.joinable()) thread_.detach();  // it may be blocked in MPI for good
    return;
  }
  if (thread_.joinable()) thread_.join();
  if (comm_) {
    MPI_Comm c = static_cast<MPI_Comm>(comm_);
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Comm_free(&c);
    comm_ = nullptr;
  }
}

int ProcessGroup::global_rank(int r) const {
  KILN_CHECK(r >= 0 && r < size(), Value, "distributed", "rank ", r, " is not in ", describe());
  return ranks_[r];
}
int ProcessGroup::group_rank(int g) const {
  for (int i = 0; i < size(); ++i)
    if (ranks_[i] == g) return i;
  return -1;
}
std::string ProcessGroup::describe() const {
  std::ostringstream o;
  o << "process group " << id_ << " (";
  if (id_ == 0) {
    o << "the world, " << size() << " ranks";
  } else {
    o << "ranks";
    for (size_t i = 0; i < ranks_.size(); ++i) o << (i ? ", " : " ") << ranks_[i];
  }
  o << "; timeout " << timeout_.count() << " ms)";
  return o.str();
}

void ProcessGroup::check_open(const char* op) const {
  if (aborted_.load()) KILN_FAIL(Runtime, op, describe(), " was aborted: ", abort_reason_);
  KILN_CHECK(comm_ != nullptr && !stop_, Runtime, op, describe(), " was destroyed");
}

WorkPtr ProcessGroup::submit(WorkPtr w, std::function<void()> run, bool collective, bool deferred) {
  {
    std::lock_guard<std::mutex> l(m_);
    check_open(w->op().c_str());
    queue_.push_back({w, std::move(run), collective, deferred});
  }
  cv_.notify_one();
  return w;
}

void ProcessGroup::loop() {
  for (;;) {
    Task t;
    bool have = false;
    {
      std::unique_lock<std::mutex> l(m_);
      auto wake = [&] { return stop_ || !queue_.empty(); };
      if (inflight_.empty()) cv_.wait(l, wake);
      else cv_.wait_for(l, std::chrono::microseconds(20), wake);
      if (aborted_) return;
      if (stop_ && queue_.empty() && inflight_.empty()) return;
      if (!queue_.empty()) {
        t = std::move(queue_.front());
        queue_.pop_front();
        have = true;
        running_ = t.work;
        running_collective_ = t.collective;
        started_ = Clock::now();
        if (t.collective) entered_.fetch_add(1);
      }
    }
    if (have) {
      std::exception_ptr err;
      try {
        t.run();
        if (!t.deferred && t.work->epilogue) t.work->epilogue();
      } catch (...) {
        err = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> l(m_);
        running_.reset();
        if (aborted_) return;  // the watchdog failed this work already
      }
      if (!t.deferred || err) {
        t.work->epilogue = nullptr;
        t.work->finish(err);
      }
    }
    poll_inflight();
  }
}

void ProcessGroup::add_inflight(void* request, WorkPtr w, std::function<void(int, int)> done) {
  std::lock_guard<std::mutex> l(m_);
  inflight_.push_back({request, std::move(w), std::move(done), Clock::now()});
}

void ProcessGroup::poll_inflight() {
  std::vector<Inflight> finished;
  {
    std::lock_guard<std::mutex> l(m_);
    for (size_t i = 0; i < inflight_.size();) {
      auto* req = static_cast<MPI_Request*>(inflight_[i].request);
      int done = 0;
      MPI_Status st;
      MPI_Test(req, &done, &st);
      if (!done) {
        ++i;
        continue;
      }
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      Inflight f = std::move(inflight_[i]);
      inflight_.erase(inflight_.begin() + static_cast<std::ptrdiff_t>(i));
      delete req;
      f.request = nullptr;
      auto done_fn = std::move(f.done);
      f.done = [done_fn, src = st.MPI_SOURCE, count](int, int) {
        if (done_fn) done_fn(src, count);
      };
      finished.push_back(std::move(f));
    }
  }
  for (auto& f : finished) {
    std::exception_ptr err;
    try {
      f.done(0, 0);
      if (f.work->epilogue) f.work->epilogue();
    } catch (...) {
      err = std::current_exception();
    }
    f.work->epilogue = nullptr;
    f.work->finish(err);
  }
}

void ProcessGroup::watchdog_tick(Clock::time_point now) {
  WorkPtr w;
  int64_t seq = 0;
  bool collective = false;
  {
    std::lock_guard<std::mutex> l(m_);
    if (running_ && now - started_ >= timeout_) {
      w = running_;
      seq = entered_.load();
      collective = running_collective_;
    } else {
      for (auto& f : inflight_)
        if (now - f.start >= timeout_) {
          w = f.work;
          break;
        }
      if (!w) return;
    }
  }
  std::ostringstream o;
  o << w->op() << " #" << seq << " on " << describe() << " did not finish within " << timeout_.count() << " ms: ";
  if (collective) o << missing_ranks(*this, seq);
  else o << "the peer did not post the matching " << (w->op() == "send" ? "recv" : "send");
  abort(o.str());
}

void ProcessGroup::abort(const std::string& why) {
  std::vector<WorkPtr> fail;
  {
    std::lock_guard<std::mutex> l(m_);
    if (aborted_) return;
    abort_reason_ = why;
    aborted_ = true;
    if (running_) fail.push_back(running_);
    for (auto& t : queue_) fail.push_back(t.work);
    for (auto& f : inflight_) fail.push_back(f.work);  // their requests stay posted: MPI is unusable now
    queue_.clear();
    inflight_.clear();
  }
  rt().faulted = true;
  for (auto& w : fail) {
    try {
      KILN_FAIL(Runtime, w->op().c_str(), why);
    } catch (...) {
      w->finish(std::current_exception());
    }
  }
}

// ---- collectives ------------------------------------------------------------------------------------------
#define KILN_COMM static_cast<MPI_Comm>(comm_)

WorkPtr ProcessGroup::all_reduce(const Tensor& t, ReduceOp op) {
  check_reduce("all_reduce", t, op);
  Tensor buf = wire(t, true);
  auto w = std::make_shared<Work>("all_reduce", std::vector<Tensor>{t});
  Sig sig{kAllReduce, static_cast<int64_t>(t.dtype()), t.numel(), static_cast<int64_t>(op)};
  MPI_Comm comm = KILN_COMM;
  int n = size();
  w->epilogue = [t, buf, op, n] {
    if (op == ReduceOp::AVG) scale(buf, n);
    if (staged(buf, t)) copy_(detach(t), buf);
  };
  return submit(w, [this, buf, sig, op, comm] {
    check_consistent(comm, *this, sig, "all_reduce");
    MPI_Datatype ty = mpi_type(buf.dtype());
    MPI_Op mop = mpi_op(op, buf.dtype());
    in_chunks(buf, [&](void* p, int c) {
      if (c) mpi_check(MPI_Allreduce(MPI_IN_PLACE, p, c, ty, mop, comm), "all_reduce", "MPI_Allreduce");
    });
  }, true);
}

WorkPtr ProcessGroup::broadcast(const Tensor& t, int root) {
  check_tensor("broadcast", t);
  KILN_CHECK(root >= 0 && root < size(), Value, "broadcast", "root ", root, " is not a rank of ", describe());
  Tensor buf = wire(t, false);
  auto w = std::make_shared<Work>("broadcast", std::vector<Tensor>{t});
  if (staged(buf, t) && root != rank_) w->epilogue = [t, buf] { copy_(detach(t), buf); };
  Sig sig{kBroadcast, static_cast<int64_t>(t.dtype()), t.numel(), root};
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, buf, sig, root, comm] {
    check_consistent(comm, *this, sig, "broadcast");
    MPI_Datatype ty = mpi_type(buf.dtype());
    in_chunks(buf, [&](void* p, int c) {
      if (c) mpi_check(MPI_Bcast(p, c, ty, root, comm), "broadcast", "MPI_Bcast");
    });
  }, true);
}

WorkPtr ProcessGroup::reduce(const Tensor& t, int root, ReduceOp op) {
  check_reduce("reduce", t, op);
  KILN_CHECK(root >= 0 && root < size(), Value, "reduce", "root ", root, " is not a rank of ", describe());
  Tensor buf = wire(t, true);
  auto w = std::make_shared<Work>("reduce", std::vector<Tensor>{t});
  int n = size();
  bool is_root = root == rank_;
  if (is_root)
    w->epilogue = [t, buf, op, n] {
      if (op == ReduceOp::AVG) scale(buf, n);
      if (staged(buf, t)) copy_(detach(t), buf);
    };
  Sig sig{kReduce, static_cast<int64_t>(t.dtype()), t.numel(), root * 8 + static_cast<int64_t>(op)};
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, buf, sig, root, op, is_root, comm] {
    check_consistent(comm, *this, sig, "reduce");
    MPI_Datatype ty = mpi_type(buf.dtype());
    MPI_Op mop = mpi_op(op, buf.dtype());
    in_chunks(buf, [&](void* p, int c) {
      if (c)
        mpi_check(MPI_Reduce(is_root ? MPI_IN_PLACE : p, is_root ? p : nullptr, c, ty, mop, root, comm),
                  "reduce", "MPI_Reduce");
    });
  }, true);
}

namespace {
// Checks a list of `n` tensors of `numel` elements and dtype d each.
void check_list(const char* op, const std::vector<Tensor>& ts, size_t n, int64_t numel, Dtype d, const char* what) {
  KILN_CHECK(ts.size() == n, Value, op, "expected ", n, " ", what, " tensors (one per rank), got ", ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    check_tensor(op, ts[i], what);
    KILN_CHECK(ts[i].dtype() == d, Type, op, what, " tensor ", i, " has dtype ", dtype_name(ts[i].dtype()),
               "; expected ", dtype_name(d));
    if (numel >= 0)
      KILN_CHECK(ts[i].numel() == numel, Value, op, what, " tensor ", i, " has ", ts[i].numel(),
                 " elements; expected ", numel);
  }
}
// Copies the pieces of a flat buffer (laid out one after another) into the tensors.
void unpack(const Tensor& flat, const std::vector<Tensor>& outs) {
  int64_t off = 0;
  for (const Tensor& o : outs) {
    int64_t k = o.numel();
    if (k) copy_(detach(o), flat.narrow(0, off, k).view(o.sizes()));
    off += k;
  }
}
Tensor flat_cat(const std::vector<Tensor>& ins, Dtype w) {
  TensorList parts;
  for (const Tensor& t : ins) parts.push_back(t.reshape({t.numel()}).to(w));
  return parts.empty() ? empty({0}, w) : cat(parts, 0).contiguous();
}
}  // namespace

WorkPtr ProcessGroup::all_gather(const std::vector<Tensor>& outputs, const Tensor& input) {
  check_tensor("all_gather", input);
  check_list("all_gather", outputs, size(), input.numel(), input.dtype(), "output");
  Tensor in = wire(input, false);
  Tensor flat = empty({input.numel() * size()}, input.dtype());
  auto w = std::make_shared<Work>("all_gather", outputs);
  w->epilogue = [flat, outputs] { unpack(flat, outputs); };
  Sig sig{kAllGather, static_cast<int64_t>(input.dtype()), input.numel(), 0};
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, in, flat, sig, comm] {
    check_consistent(comm, *this, sig, "all_gather");
    int c = count_of(in.numel(), "all_gather");
    mpi_check(MPI_Allgather(in.data_ptr(), c, mpi_type(in.dtype()), flat.data_ptr(), c, mpi_type(in.dtype()), comm),
              "all_gather", "MPI_Allgather");
  }, true);
}

WorkPtr ProcessGroup::all_gather_into_tensor(const Tensor& output, const Tensor& input) {
  check_tensor("all_gather_into_tensor", input);
  check_tensor("all_gather_into_tensor", output, "output");
  KILN_CHECK(output.dtype() == input.dtype(), Type, "all_gather_into_tensor", "output dtype ",
             dtype_name(output.dtype()), " differs from input dtype ", dtype_name(input.dtype()));
  KILN_CHECK(output.numel() == input.numel() * size(), Value, "all_gather_into_tensor", "output has ",
             output.numel(), " elements; expected world size (", size(), ") times the input's ", input.numel());
  Tensor in = wire(input, false), out = wire(output, false);
  auto w = std::make_shared<Work>("all_gather_into_tensor", std::vector<Tensor>{output});
  if (staged(out, output)) w->epilogue = [out, output] { copy_(detach(output), out); };
  Sig sig{kAllGather, static_cast<int64_t>(input.dtype()), input.numel(), 0};
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, in, out, sig, comm] {
    check_consistent(comm, *this, sig, "all_gather_into_tensor");
    int c = count_of(in.numel(), "all_gather_into_tensor");
    mpi_check(MPI_Allgather(in.data_ptr(), c, mpi_type(in.dtype()), out.data_ptr(), c, mpi_type(in.dtype()), comm),
              "all_gather_into_tensor", "MPI_Allgather");
  }, true);
}

WorkPtr ProcessGroup::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) {
  check_reduce("reduce_scatter", output, op);
  check_list("reduce_scatter", inputs, size(), output.numel(), output.dtype(), "input");
  return reduce_scatter_flat("reduce_scatter", output, flat_cat(inputs, wire_dtype(output.dtype(), true)), op);
}

WorkPtr ProcessGroup::reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op) {
  check_reduce("reduce_scatter_tensor", output, op);
  check_tensor("reduce_scatter_tensor", input);
  KILN_CHECK(output.dtype() == input.dtype(), Type, "reduce_scatter_tensor", "output dtype ",
             dtype_name(output.dtype()), " differs from input dtype ", dtype_name(input.dtype()));
  KILN_CHECK(input.numel() == output.numel() * size(), Value, "reduce_scatter_tensor", "input has ",
             input.numel(), " elements; expected world size (", size(), ") times the output's ", output.numel());
  return reduce_scatter_flat("reduce_scatter_tensor", output, wire(input, true), op);
}

// `send`: every rank's block one after another, contiguous, in the wire dtype.
WorkPtr ProcessGroup::reduce_scatter_flat(const char* name, const Tensor& output, const Tensor& send, ReduceOp op) {
  Tensor out = wire(output, true);
  auto w = std::make_shared<Work>(name, std::vector<Tensor>{output});
  int n = size();
  w->epilogue = [out, output, op, n] {
    if (op == ReduceOp::AVG) scale(out, n);
    if (staged(out, output)) copy_(detach(output), out);
  };
  Sig sig{kReduceScatter, static_cast<int64_t>(output.dtype()), output.numel(), static_cast<int64_t>(op)};
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, send, out, sig, op, comm, name] {
    check_consistent(comm, *this, sig, name);
    int c = count_of(out.numel(), name);
    mpi_check(MPI_Reduce_scatter_block(send.data_ptr(), out.data_ptr(), c, mpi_type(out.dtype()),
                                       mpi_op(op, out.dtype()), comm),
              name, "MPI_Reduce_scatter_block");
  }, true);
}

namespace {
// all_to_all with per-peer element counts; checks (when on) that what each rank sends matches what its
// peer expects.
void alltoallv(MPI_Comm comm, const ProcessGroup& g, const char* op, const Tensor& send, const std::vector<int>& sc,
               const Tensor& recv, const std::vector<int>& rc) {
  int n = g.size();
  std::vector<int> sd(n), rd(n);
  for (int i = 1; i < n; ++i) sd[i] = sd[i - 1] + sc[i - 1], rd[i] = rd[i - 1] + rc[i - 1];
  Sig sig{kAllToAll, static_cast<int64_t>(send.dtype()), 0, 0};
  check_consistent(comm, g, sig, op);
  if (rt().checks.load(std::memory_order_relaxed)) {
    std::vector<int> told(n);
    mpi_check(MPI_Alltoall(sc.data(), 1, MPI_INT, told.data(), 1, MPI_INT, comm), op, "MPI_Alltoall");
    int bad = 0;
    for (int i = 0; i < n; ++i) bad |= told[i] != rc[i];
    int any = 0;
    mpi_check(MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm), op, "MPI_Allreduce");
    if (any) {
      std::ostringstream o;
      o << "split sizes disagree across the ranks of " << g.describe();
      for (int i = 0; i < n; ++i)
        if (told[i] != rc[i])
          o << "; rank " << g.global_rank(i) << " sends " << told[i] << " elements to rank "
            << g.global_rank(g.rank()) << ", which expects " << rc[i];
      KILN_FAIL(Runtime, op, o.str());
    }
  }
  MPI_Datatype ty = mpi_type(send.dtype());
  mpi_check(MPI_Alltoallv(send.data_ptr(), sc.data(), sd.data(), ty, recv.data_ptr(), rc.data(), rd.data(), ty, comm),
            op, "MPI_Alltoallv");
}
}  // namespace

WorkPtr ProcessGroup::all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) {
  KILN_CHECK(!inputs.empty(), Value, "all_to_all", "expected ", size(), " input tensors, got 0");
  Dtype d = inputs[0].dtype();
  check_list("all_to_all", inputs, size(), -1, d, "input");
  check_list("all_to_all", outputs, size(), -1, d, "output");
  std::vector<int> sc(size()), rc(size());
  int64_t rtotal = 0;
  for (int i = 0; i < size(); ++i) {
    sc[i] = count_of(inputs[i].numel(), "all_to_all");
    rc[i] = count_of(outputs[i].numel(), "all_to_all");
    rtotal += rc[i];
  }
  Tensor send = flat_cat(inputs, d), recv = empty({rtotal}, d);
  auto w = std::make_shared<Work>("all_to_all", outputs);
  w->epilogue = [recv, outputs] { unpack(recv, outputs); };
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, send, recv, sc, rc, comm] { alltoallv(comm, *this, "all_to_all", send, sc, recv, rc); }, true);
}

WorkPtr ProcessGroup::all_to_all_single(const Tensor& output, const Tensor& input, const Shape& osplit,
                                        const Shape& isplit) {
  const char* op = "all_to_all_single";
  check_tensor(op, input);
  check_tensor(op, output, "output");
  KILN_CHECK(output.dtype() == input.dtype(), Type, op, "output dtype ", dtype_name(output.dtype()),
             " differs from input dtype ", dtype_name(input.dtype()));
  int n = size();
  auto splits = [&](const Tensor& t, const Shape& s, const char* what) {
    std::vector<int> c(n);
    int64_t rows = t.dim() ? t.size(0) : 1, row = rows ? t.numel() / rows : 0;
    if (s.empty()) {
      KILN_CHECK(rows % n == 0, Value, op, what, " tensor's first dimension (", rows,
                 ") does not divide evenly by the world size (", n, "); pass split sizes");
      for (int i = 0; i < n; ++i) c[i] = count_of(rows / n * row, op);
    } else {
      KILN_CHECK(static_cast<int>(s.size()) == n, Value, op, what, " split sizes have ", s.size(),
                 " entries; expected one per rank (", n, ")");
      int64_t sum = 0;
      for (int i = 0; i < n; ++i) {
        KILN_CHECK(s[i] >= 0, Value, op, what, " split size ", i, " is negative (", s[i], ")");
        sum += s[i];
        c[i] = count_of(s[i] * row, op);
      }
      KILN_CHECK(sum == rows, Value, op, what, " split sizes sum to ", sum, " but the ", what,
                 " tensor has ", rows, " rows");
    }
    return c;
  };
  std::vector<int> sc = splits(input, isplit, "input"), rc = splits(output, osplit, "output");
  Tensor send = wire(input, false), recv = wire(output, false);
  auto w = std::make_shared<Work>(op, std::vector<Tensor>{output});
  if (staged(recv, output)) w->epilogue = [recv, output] { copy_(detach(output), recv); };
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, send, recv, sc, rc, comm, op] { alltoallv(comm, *this, op, send, sc, recv, rc); }, true);
}

WorkPtr ProcessGroup::gather(const std::vector<Tensor>& outputs, const Tensor& input, int root) {
  check_tensor("gather", input);
  KILN_CHECK(root >= 0 && root < size(), Value, "gather", "root ", root, " is not a rank of ", describe());
  bool is_root = root == rank_;
  if (is_root) check_list("gather", outputs, size(), input.numel(), input.dtype(), "output");
  else KILN_CHECK(outputs.empty(), Value, "gather", "gather_list must be given on the destination rank only");
  Tensor in = wire(input, false);
  Tensor flat = is_root ? empty({input.numel() * size()}, input.dtype()) : Tensor();
  auto w = std::make_shared<Work>("gather", outputs);
  if (is_root) w->epilogue = [flat, outputs] { unpack(flat, outputs); };
  Sig sig{kGather, static_cast<int64_t>(input.dtype()), input.numel(), root};
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, in, flat, sig, root, comm] {
    check_consistent(comm, *this, sig, "gather");
    int c = count_of(in.numel(), "gather");
    MPI_Datatype ty = mpi_type(in.dtype());
    mpi_check(MPI_Gather(in.data_ptr(), c, ty, flat.defined() ? flat.data_ptr() : nullptr, c, ty, root, comm),
              "gather", "MPI_Gather");
  }, true);
}

WorkPtr ProcessGroup::scatter(const Tensor& output, const std::vector<Tensor>& inputs, int root) {
  check_tensor("scatter", output, "output");
  KILN_CHECK(root >= 0 && root < size(), Value, "scatter", "root ", root, " is not a rank of ", describe());
  bool is_root = root == rank_;
  if (is_root) check_list("scatter", inputs, size(), output.numel(), output.dtype(), "input");
  else KILN_CHECK(inputs.empty(), Value, "scatter", "scatter_list must be given on the source rank only");
  Tensor send = is_root ? flat_cat(inputs, output.dtype()) : Tensor();
  Tensor out = wire(output, false);
  auto w = std::make_shared<Work>("scatter", std::vector<Tensor>{output});
  if (staged(out, output)) w->epilogue = [out, output] { copy_(detach(output), out); };
  Sig sig{kScatter, static_cast<int64_t>(output.dtype()), output.numel(), root};
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, send, out, sig, root, comm] {
    check_consistent(comm, *this, sig, "scatter");
    int c = count_of(out.numel(), "scatter");
    MPI_Datatype ty = mpi_type(out.dtype());
    mpi_check(MPI_Scatter(send.defined() ? send.data_ptr() : nullptr, c, ty, out.data_ptr(), c, ty, root, comm),
              "scatter", "MPI_Scatter");
  }, true);
}

WorkPtr ProcessGroup::barrier() {
  auto w = std::make_shared<Work>("barrier");
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, comm] {
    check_consistent(comm, *this, Sig{kBarrier, 0, 0, 0}, "barrier");
    mpi_check(MPI_Barrier(comm), "barrier", "MPI_Barrier");
  }, true);
}

// Point to point: the communication thread posts the request and waits for it polling, so that a send
// and a receive issued back to back on two ranks cannot block each other's thread for good (it also
// keeps the group's later operations behind it, in order).
WorkPtr ProcessGroup::send(const Tensor& t, int dst, int tag) {
  check_tensor("send", t);
  KILN_CHECK(dst >= 0 && dst < size() && dst != rank_, Value, "send", "destination rank ", dst,
             " is not another rank of ", describe());
  KILN_CHECK(tag >= 0, Value, "send", "tag must be non-negative, got ", tag);
  Tensor buf = wire(t, false);
  auto w = std::make_shared<Work>("send", std::vector<Tensor>{t});
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, w, buf, dst, tag, comm] {
    auto* r = new MPI_Request;
    int rc = MPI_Isend(buf.data_ptr(), count_of(buf.numel(), "send"), mpi_type(buf.dtype()), dst, tag, comm, r);
    if (rc != MPI_SUCCESS) delete r;
    mpi_check(rc, "send", "MPI_Isend");
    add_inflight(r, w, [buf](int, int) {});  // keeps the buffer alive until MPI is done with it
  }, false, true);
}

WorkPtr ProcessGroup::recv(const Tensor& t, int src, int tag) {
  check_tensor("recv", t);
  KILN_CHECK(src == -1 || (src >= 0 && src < size() && src != rank_), Value, "recv", "source rank ", src,
             " is not another rank of ", describe());
  Tensor buf = wire(t, false);
  auto w = std::make_shared<Work>("recv", std::vector<Tensor>{t});
  w->epilogue = [buf, t] {
    if (staged(buf, t)) copy_(detach(t), buf);
  };
  MPI_Comm comm = KILN_COMM;
  return submit(w, [this, w, buf, src, tag, comm] {
    auto* r = new MPI_Request;
    int rc = MPI_Irecv(buf.data_ptr(), count_of(buf.numel(), "recv"), mpi_type(buf.dtype()),
                       src < 0 ? MPI_ANY_SOURCE : src, tag, comm, r);
    if (rc != MPI_SUCCESS) delete r;
    mpi_check(rc, "recv", "MPI_Irecv");
    add_inflight(r, w, [w, buf](int source, int bytes) {
      int64_t want = buf.numel() * static_cast<int64_t>(buf.itemsize());
      KILN_CHECK(bytes == want, Runtime, "recv", "received ", bytes, " bytes from rank ", source,
                 "; the receiving tensor has ", want);
      w->source = source;
    });
  }, false, true);
}

#undef KILN_COMM

// ---- the runtime's front door ---------------------------------------------------------------------------------
bool is_available() { return true; }

bool is_initialized() {
  std::lock_guard<std::mutex> l(rt().m);
  return rt().initialized;
}

void abort_job(int code) {
  int ini = 0, fin = 0;
  MPI_Initialized(&ini);
  MPI_Finalized(&fin);
  if (ini && !fin) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void set_consistency_checks(bool on) { rt().checks = on; }
bool consistency_checks() { return rt().checks; }

void init_process_group(const InitOptions& o) {
  Runtime& r = rt();
  std::lock_guard<std::mutex> l(r.m);
  KILN_CHECK(!r.initialized, Runtime, "init_process_group", "trying to initialize the default process group twice!");
  KILN_CHECK(o.backend == "mpi" || o.backend == "cpu:mpi", Value, "init_process_group", "backend '", o.backend,
             "' is not available: kiln's process groups run on Open MPI, backend='mpi' (launch with mpirun)");
  KILN_CHECK(o.timeout.count() > 0, Value, "init_process_group", "timeout must be positive, got ",
             o.timeout.count(), " ms");
  int ini = 0, fin = 0;
  MPI_Finalized(&fin);
  KILN_CHECK(!fin, Runtime, "init_process_group", "MPI was finalised in this process; it cannot start again");
  MPI_Initialized(&ini);
  int provided = 0;
  if (!ini) {
    // Open MPI's components resolve libmpi's symbols at load time: make them global even when this
    // library was loaded privately (a Python extension).
    for (const char* lib : {"libmpi.so.40", "libmpi.so"})
      if (dlopen(lib, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD)) break;
    mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "init_process_group", "MPI_Init_thread");
  } else {
    MPI_Query_thread(&provided);
  }
  KILN_CHECK(provided >= MPI_THREAD_MULTIPLE, Runtime, "init_process_group",
             "this MPI library does not provide MPI_THREAD_MULTIPLE (it gave level ", provided, ")");
  MPI_Comm_rank(MPI_COMM_WORLD, &r.world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &r.world_size);
  KILN_CHECK(o.world_size < 0 || o.world_size == r.world_size, Value, "init_process_group", "world_size=",
             o.world_size, " but MPI started ", r.world_size, " processes");
  KILN_CHECK(o.rank < 0 || o.rank == r.world_rank, Value, "init_process_group", "rank=", o.rank,
             " but MPI gave this process rank ", r.world_rank);
  if (const char* e = std::getenv("KILN_DISTRIBUTED_CHECKS")) r.checks = std::string(e) != "0";
  MPI_Comm ctl, wc;
  mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &ctl), "init_process_group", "MPI_Comm_dup");
  mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &wc), "init_process_group", "MPI_Comm_dup");
  MPI_Comm_set_errhandler(ctl, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(wc, MPI_ERRORS_RETURN);
  r.control = ctl;
  std::vector<int> all(r.world_size);
  for (int i = 0; i < r.world_size; ++i) all[i] = i;
  r.groups.clear();
  r.world = std::make_shared<ProcessGroup>(0, all, r.world_rank, o.timeout, wc);
  r.groups.push_back(r.world);
  r.stop = false;
  r.watchdog = std::thread(watchdog_main);
  r.initialized = true;
  if (!r.atexit_registered) {
    std::atexit(finalize_at_exit);
    r.atexit_registered = true;
  }
}

namespace {
Runtime& ready(const char* op) {
  Runtime& r = rt();
  KILN_CHECK(r.initialized, Runtime, op,
             "Default process group has not been initialized, please make sure to call init_process_group.");
  return r;
}
}  // namespace

int get_rank() {
  std::lock_guard<std::mutex> l(rt().m);
  return ready("get_rank").world_rank;
}
int get_world_size() {
  std::lock_guard<std::mutex> l(rt().m);
  return ready("get_world_size").world_size;
}
ProcessGroupPtr world() {
  std::lock_guard<std::mutex> l(rt().m);
  return ready("distributed").world;
}

double bench_raw_allreduce(int64_t bytes, int iters) {
  ready("bench_raw_allreduce");
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  std::vector<float> buf(static_cast<size_t>(std::max<int64_t>(bytes / 4, 1)), 0.0f);
  MPI_Barrier(c);
  double t = MPI_Wtime();
  for (int i = 0; i < iters; ++i)
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(buf.size()), MPI_FLOAT, MPI_SUM, c);
  t = MPI_Wtime() - t;
  MPI_Comm_free(&c);
  return t / iters;
}

ProcessGroupPtr new_group(const std::vector<int>& ranks_in, std::optional<Millis> timeout) {
  Runtime& r = rt();
  std::vector<int> ranks = ranks_in;
  Millis to;
  {
    std::lock_guard<std::mutex> l(r.m);
    ready("new_group");
    if (ranks.empty())
      for (int i = 0; i < r.world_size; ++i) ranks.push_back(i);
    std::vector<bool> seen(r.world_size);
    for (int x : ranks) {
      KILN_CHECK(x >= 0 && x < r.world_size, Value, "new_group", "rank ", x, " is not in the world (size ",
                 r.world_size, ")");
      KILN_CHECK(!seen[x], Value, "new_group", "rank ", x, " is listed twice");
      seen[x] = true;
    }
    to = timeout.value_or(r.world->timeout());
  }
  // Every process calls MPI_Comm_create on the world (members or not), as torch's new_group requires.
  MPI_Group wg, ng;
  MPI_Comm_group(MPI_COMM_WORLD, &wg);
  MPI_Group_incl(wg, static_cast<int>(ranks.size()), ranks.data(), &ng);
  MPI_Comm c = MPI_COMM_NULL;
  int rc = MPI_Comm_create(MPI_COMM_WORLD, ng, &c);
  MPI_Group_free(&ng);
  MPI_Group_free(&wg);
  mpi_check(rc, "new_group", "MPI_Comm_create");
  std::lock_guard<std::mutex> l(r.m);
  int id = static_cast<int>(r.groups.size());
  ProcessGroupPtr g;
  if (c != MPI_COMM_NULL) {
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    int me = 0;
    MPI_Comm_rank(c, &me);
    g = std::make_shared<ProcessGroup>(id, ranks, me, to, c);
  }
  r.groups.push_back(g);
  return g;
}

ProcessGroupPtr group_by_id(int id) {
  std::lock_guard<std::mutex> l(rt().m);
  Runtime& r = ready("distributed");
  KILN_CHECK(id >= 0 && id < static_cast<int>(r.groups.size()) && r.groups[id], Value, "distributed",
             "process group ", id, " does not exist on this rank (destroyed, or this rank is not a member)");
  return r.groups[id];
}

void destroy_process_group(const ProcessGroupPtr& g) {
  Runtime& r = rt();
  if (g) {
    {
      std::lock_guard<std::mutex> l(r.m);
      for (auto& x : r.groups)
        if (x == g) x.reset();
    }
    g->shutdown();
    return;
  }
  std::vector<ProcessGroupPtr> gs;
  {
    std::lock_guard<std::mutex> l(r.m);
    if (!r.initialized) return;
    gs = r.groups;
    r.groups.clear();
    r.world.reset();
    r.initialized = false;
  }
  for (auto& x : gs)
    if (x) x->shutdown();
  {
    std::lock_guard<std::mutex> l(r.wm);
    r.stop = true;
  }
  r.wcv.notify_all();
  if (r.watchdog.joinable()) r.watchdog.join();
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin && !r.faulted && r.control != MPI_COMM_NULL) {
    for (auto& p : pending_sends()) MPI_Request_free(&p.req);
    MPI_Comm_free(&r.control);
  }
  r.control = MPI_COMM_NULL;
}

}  // namespace kiln::distributed
