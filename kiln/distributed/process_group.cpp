// Process groups on Open MPI: the runtime (init, groups, the watchdog) and the communication thread;
// the collectives are in collectives.cpp. See process_group.h for the model.
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
#include "kiln/distributed/detail/mpi.h"
#include "kiln/ops/ops.h"
#include "kiln/core/stream.h"

namespace kiln::distributed {

using detail::mpi_check;
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

namespace detail {
void mpi_check(int rc, const char* op, const char* call) {
  if (rc == MPI_SUCCESS) [[likely]]
    return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  KILN_FAIL(Runtime, op, call, " failed: ", std::string(msg, len));
}
}  // namespace detail

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
ProcessGroup::ProcessGroup(int id, std::vector<int> ranks, int rank, Millis timeout, void* comm, void* check_comm)
    : id_(id), ranks_(std::move(ranks)), rank_(rank), timeout_(timeout), comm_(comm), check_comm_(check_comm) {
  thread_ = std::thread([this] { loop(); });
}

char* ProcessGroup::envelopes() {
  if (!envelopes_) envelopes_ = new char[2 * kEnvelopeCapacity];  // only ever touched by the one running op
  return envelopes_;
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
    return;  // and the envelopes stay: a receive may still be posted into them
  }
  if (thread_.joinable()) thread_.join();
  // The watchdog may have aborted the group while we joined (its query of the others takes a while):
  // then a receive may still be posted into the envelopes, and MPI is unusable; keep everything.
  if (aborted_) return;
  int fin = 0;
  MPI_Finalized(&fin);
  for (void** p : {&comm_, &check_comm_})
    if (*p) {
      MPI_Comm c = static_cast<MPI_Comm>(*p);
      if (!fin) MPI_Comm_free(&c);
      *p = nullptr;
    }
  delete[] envelopes_;
  envelopes_ = nullptr;
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
  stream_detail::before_host_read();  // the group's thread reads the buffers: queued work comes first
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
      auto wake = [&] { return !inline_ && (stop_ || !queue_.empty()); };
      if (inflight_.empty()) cv_.wait(l, wake);
      else cv_.wait_for(l, std::chrono::microseconds(20), wake);
      if (aborted_) return;
      if (stop_ && queue_.empty() && inflight_.empty() && !inline_) return;
      if (!queue_.empty() && !inline_) {
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

WorkPtr ProcessGroup::run_inline(WorkPtr w, std::function<void()> run) {
  stream_detail::before_host_read();
  {
    std::lock_guard<std::mutex> l(m_);
    check_open(w->op().c_str());
    if (!queue_.empty() || running_) {  // busy: it goes behind the queued work, in order
      queue_.push_back({w, std::move(run), true, false});
      cv_.notify_one();
      return w;
    }
    running_ = w;
    running_collective_ = true;
    inline_ = true;
    started_ = Clock::now();
    entered_.fetch_add(1);
  }
  std::exception_ptr err;
  try {
    run();
    if (w->epilogue) w->epilogue();
  } catch (...) {
    err = std::current_exception();
  }
  bool queued = false;
  {
    std::lock_guard<std::mutex> l(m_);
    running_.reset();
    inline_ = false;
    queued = !queue_.empty() || stop_;  // the thread waits for the end of an inline one (only then)
  }
  if (queued) cv_.notify_one();
  w->epilogue = nullptr;
  w->finish(err);  // nothing when the watchdog failed it first
  return w;
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
  Clock::time_point since;
  {
    std::lock_guard<std::mutex> l(m_);
    if (running_ && now - started_ >= timeout_) {
      w = running_;
      seq = entered_.load();
      collective = running_collective_;
      since = started_;
    } else {
      for (auto& f : inflight_)
        if (now - f.start >= timeout_) {
          w = f.work;
          since = f.start;
          break;
        }
      if (!w) return;
    }
  }
  std::ostringstream o;
  o << w->op() << " #" << seq << " on " << describe() << " did not finish within " << timeout_.count()
    << " ms (it has waited " << std::chrono::duration_cast<Millis>(now - since).count() << " ms): ";
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

namespace {
// A group's second communicator, for the envelopes (collectives.cpp).
void* dup_for_envelopes(MPI_Comm c, const char* op) {
  MPI_Comm cc = MPI_COMM_NULL;
  mpi_check(MPI_Comm_dup(c, &cc), op, "MPI_Comm_dup");
  MPI_Comm_set_errhandler(cc, MPI_ERRORS_RETURN);
  return cc;
}
}  // namespace

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
  r.world = std::make_shared<ProcessGroup>(0, all, r.world_rank, o.timeout, wc,
                                           dup_for_envelopes(wc, "init_process_group"));
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
  // collective over the members: not under the runtime's lock, which the watchdog needs to serve queries
  void* cc = c != MPI_COMM_NULL ? dup_for_envelopes(c, "new_group") : nullptr;
  std::lock_guard<std::mutex> l(r.m);
  int id = static_cast<int>(r.groups.size());
  ProcessGroupPtr g;
  if (c != MPI_COMM_NULL) {
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    int me = 0;
    MPI_Comm_rank(c, &me);
    g = std::make_shared<ProcessGroup>(id, ranks, me, to, c, cc);
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
