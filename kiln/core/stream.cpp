#include "kiln/core/stream.h"

#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/core/tensor.h"
#include "kiln/core/threads.h"
#include "kiln/dispatch/op.h"

namespace kiln {
namespace detail {

// One stream's queue and its worker. The worker holds the queue (its `self`), so the queue outlives
// the last Stream handle until the worker has drained it; the handle's deleter only tells the worker
// to stop and detaches it (joining could wait for a queue whose tasks need the Python lock, or for
// another stream that waits on this one).
struct StreamQueue {
  int64_t id = 0;
  int priority = 0;
  std::mutex mu;
  std::condition_variable cv;       // the worker waits for work, callers for progress
  std::deque<std::function<void()>> tasks;
  uint64_t enqueued = 0;            // tickets handed out
  std::atomic<uint64_t> done{0};    // tickets run
  std::exception_ptr error;         // the first kernel error since it was last raised
  bool stop = false;
  bool worker_idle = false;         // the worker waits for work: an enqueue must wake it
  int waiters = 0;                  // callers waiting for progress: the worker must wake them
  bool has_worker = false;
  pid_t worker_pid = 0;             // the process that started it (a forked child starts its own)
  std::weak_ptr<StreamQueue> self;  // the worker's handle is made from it

  void run(std::shared_ptr<StreamQueue> keep);
  void wait_for(uint64_t ticket);
  void rethrow_error() {
    std::exception_ptr e;
    {
      std::lock_guard<std::mutex> lock(mu);
      std::swap(e, error);
    }
    if (e) {
      stream_detail::g_errors.fetch_sub(1, std::memory_order_relaxed);
      std::rethrow_exception(e);
    }
  }
  uint64_t last_ticket() {
    std::lock_guard<std::mutex> lock(mu);
    return enqueued;
  }
};

struct EventState {
  bool timing = false;
  bool recorded = false;
  std::shared_ptr<StreamQueue> stream;  // where it was recorded (null: the default stream)
  uint64_t ticket = 0;
  std::atomic<int64_t> time_ns{0};      // when it was reached (timing events)
  bool reached() const { return !stream || stream->done.load(std::memory_order_acquire) >= ticket; }
  void wait() const {
    if (stream) stream->wait_for(ticket);
  }
};

// What an Event handle points at: the state of its last record(), replaced by the next (so a wait
// queued earlier keeps waiting for the earlier point). Threads may record and wait at once: the
// pointer is read and replaced under the lock, and used through a copy.
struct EventHandle {
  int64_t id = 0;
  bool timing = false;
  std::mutex mu;
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
  std::shared_ptr<EventState> get() {
    std::lock_guard<std::mutex> lock(mu);
    return state;
  }
  void set(std::shared_ptr<EventState> s) {
    std::lock_guard<std::mutex> lock(mu);
    state = std::move(s);
  }
};

}  // namespace detail

namespace stream_detail {
std::atomic<int64_t> g_pending{0};
std::atomic<int> g_forbidding{0};
std::atomic<int> g_errors{0};
}

namespace {
using detail::EventHandle;
using detail::EventState;
using detail::StreamQueue;

// Process-wide state, never destroyed: workers may still run while static destructors do.
struct Globals {
  std::mutex registry_mu;
  std::vector<std::weak_ptr<StreamQueue>> registry;  // every live stream, for synchronize_streams
  std::mutex slot_mu;
  std::condition_variable slot_cv;
  int slots_used = 0;
};
Globals& globals() {
  static Globals* g = new Globals();
  return *g;
}
std::atomic<int64_t> g_next_stream_id{1}, g_next_event_id{1};

thread_local Stream tls_current;
// The queue whose worker this thread is (null elsewhere): what it runs reads what its queue made
// before, so a kernel's own item() of a scalar operand must not wait for the queue it is part of.
thread_local StreamQueue* tls_worker_queue = nullptr;
thread_local const char* tls_forbid_reads = nullptr;  // stream_detail::forbid_host_reads
thread_local uint64_t tls_refused_reads = 0;           // stream_detail::refused_host_reads
thread_local bool tls_lenient_reads = false;           // forbid_host_reads(who, lenient)

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<std::shared_ptr<StreamQueue>> live_streams() {
  Globals& g = globals();
  std::lock_guard<std::mutex> lock(g.registry_mu);
  std::vector<std::shared_ptr<StreamQueue>> out;
  size_t keep = 0;
  for (auto& w : g.registry)
    if (auto q = w.lock()) {
      out.push_back(q);
      g.registry[keep++] = w;
    }
  g.registry.resize(keep);
  return out;
}

// In a forked child no worker of the parent exists and any lock may have been copied held: every
// queue forgets the parent's work (it does not run in the child) and its locks are made anew.
void after_fork_in_child() {
  Globals& g = globals();
  new (&g.registry_mu) std::mutex();
  new (&g.slot_mu) std::mutex();
  new (&g.slot_cv) std::condition_variable();
  g.slots_used = 0;
  for (auto& w : g.registry)
    if (auto q = w.lock()) {
      new (&q->mu) std::mutex();
      new (&q->cv) std::condition_variable();
      q->tasks.clear();
      q->done.store(q->enqueued);
      q->worker_idle = false;
      q->waiters = 0;
      q->has_worker = false;
    }
  stream_detail::g_pending.store(0);
}

void wait_all(bool raise) {
  if (tls_worker_queue) return;
  auto streams = live_streams();
  for (auto& q : streams) q->wait_for(q->last_ticket());
  if (raise)
    for (auto& q : streams) q->rethrow_error();
}

void register_process_hooks() {
  static bool once = [] {
    pthread_atfork(nullptr, nullptr, &after_fork_in_child);
    // a C++ program's queues run out before static destruction (the Python module waits earlier,
    // while the interpreter is alive: kiln/_stream.py)
    std::atexit([] { wait_all(false); });
    return true;
  }();
  (void)once;
}
}  // namespace

void detail::StreamQueue::wait_for(uint64_t ticket) {
  if (done.load(std::memory_order_acquire) >= ticket) return;
  KILN_CHECK(tls_worker_queue != this, Runtime, "synchronize",
             "a task running on a stream's worker waited for that same stream: it would never finish");
  KernelRegion region(true);  // a host-language lock (Python's) is let go while this thread waits
  std::unique_lock<std::mutex> lock(mu);
  ++waiters;
  cv.wait(lock, [&] { return done.load(std::memory_order_acquire) >= ticket; });
  --waiters;
}

void detail::StreamQueue::run(std::shared_ptr<StreamQueue> keep) {
  tls_worker_queue = this;
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu);
      worker_idle = true;
      cv.wait(lock, [&] { return stop || !tasks.empty(); });
      worker_idle = false;
      if (tasks.empty()) break;  // stopped and drained
      task = std::move(tasks.front());
      tasks.pop_front();
    }
    try {
      task();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) {
        error = std::current_exception();
        stream_detail::g_errors.fetch_add(1, std::memory_order_relaxed);
      }
    }
    task = nullptr;  // the task's tensors are let go before the ticket counts as done
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu);
      done.fetch_add(1, std::memory_order_release);
      wake = waiters > 0;
    }
    stream_detail::g_pending.fetch_sub(1, std::memory_order_release);
    if (wake) cv.notify_all();
  }
  tls_worker_queue = nullptr;
  keep.reset();  // may free the queue
}

namespace stream_detail {
// How far an issuing thread may run ahead of a stream's worker (CUDA's launch queue is of this
// order): every queued kernel holds its tensors, so an unbounded queue would hold unbounded memory.
constexpr uint64_t kMaxQueued = 1024;

uint64_t enqueue_on(StreamQueue* q, std::function<void()> fn) {
  q->rethrow_error();  // an earlier kernel's error is reported at the next call, as CUDA's
  if (!tls_worker_queue) {
    const uint64_t queued = q->last_ticket();
    if (queued >= kMaxQueued) q->wait_for(queued + 1 - kMaxQueued);
  }
  uint64_t ticket;
  bool wake;
  {
    std::lock_guard<std::mutex> lock(q->mu);
    if (!q->has_worker || q->worker_pid != getpid()) {
      mark_interop_started();
      std::thread([q, keep = q->self.lock()]() mutable { q->run(std::move(keep)); }).detach();
      q->has_worker = true;
      q->worker_pid = getpid();
    }
    q->tasks.push_back(std::move(fn));
    ticket = ++q->enqueued;
    g_pending.fetch_add(1, std::memory_order_relaxed);
    wake = q->worker_idle;
  }
  if (wake) q->cv.notify_all();
  return ticket;
}

InteropSlot::InteropSlot() {
  const int limit = get_num_interop_threads();
  Globals& g = globals();
  std::unique_lock<std::mutex> lock(g.slot_mu);
  g.slot_cv.wait(lock, [&] { return g.slots_used < limit; });
  ++g.slots_used;
}

InteropSlot::~InteropSlot() {
  Globals& g = globals();
  {
    std::lock_guard<std::mutex> lock(g.slot_mu);
    --g.slots_used;
  }
  g.slot_cv.notify_one();
}

void drain(StreamQueue* q) { q->wait_for(q->last_ticket()); }

void wait_all_slow() {
  // a kernel reading a scalar operand reads it again at every replay: only reads outside kernels are
  // frozen into a recording
  if (tls_forbid_reads && !in_kernel()) {
    ++tls_refused_reads;  // the capture fails even if the caller catches this (graph.cpp)
    if (!tls_lenient_reads)
      KILN_FAIL(Runtime, "graph capture",
              "a tensor's data cannot be read on the host (item(), tolist(), numpy(), printing, a "
              "data-dependent branch) while ", tls_forbid_reads, " captures: the value would be frozen into "
              "the recording. Read it before or after the capture, or keep it a tensor");
  }
  wait_all(true);
}

uint64_t refused_host_reads() { return tls_refused_reads; }

void forbid_host_reads(const char* who, bool lenient) {
  if (!tls_forbid_reads && who) g_forbidding.fetch_add(1);
  if (tls_forbid_reads && !who) g_forbidding.fetch_sub(1);
  tls_forbid_reads = who;
  tls_lenient_reads = who && lenient;
}

void wait_other_streams() {
  if (tls_worker_queue || g_pending.load(std::memory_order_acquire) == 0) return;
  StreamQueue* mine = tls_current.queue().get();
  for (auto& q : live_streams())
    if (q.get() != mine) q->wait_for(q->last_ticket());
}
}  // namespace stream_detail

Stream Stream::create(int priority) {
  register_process_hooks();
  auto q = std::make_shared<StreamQueue>();
  q->id = g_next_stream_id.fetch_add(1);
  q->priority = priority;
  q->self = q;
  {
    Globals& g = globals();
    std::lock_guard<std::mutex> lock(g.registry_mu);
    g.registry.push_back(q);
  }
  // The handles users hold share a second control block (pointing at the same queue, keeping it
  // alive): when the last goes, the worker is told to stop once the queue has drained.
  Stream s;
  s.q_ = std::shared_ptr<StreamQueue>(q.get(), [keep = q](StreamQueue* p) {
    {
      std::lock_guard<std::mutex> lock(p->mu);
      p->stop = true;
    }
    p->cv.notify_all();
  });
  return s;
}

int64_t Stream::id() const { return q_ ? q_->id : 0; }
int Stream::priority() const { return q_ ? q_->priority : 0; }

bool Stream::query() const {
  if (!q_) return true;
  return q_->done.load(std::memory_order_acquire) >= q_->last_ticket();
}

void Stream::synchronize() const {
  if (!q_) return;
  q_->wait_for(q_->last_ticket());
  q_->rethrow_error();
}

void Stream::enqueue(std::function<void()> fn) const {
  if (!q_) {
    fn();
    return;
  }
  stream_detail::enqueue_on(q_.get(), std::move(fn));
}

void Stream::wait_event(const Event& e) const { e.wait(*this); }

void Stream::wait_stream(const Stream& other) const {
  if (other.is_default() || other == *this) return;  // the default stream's work is done already
  Event e;
  e.record(other);
  e.wait(*this);
}

Event Stream::record_event() const {
  Event e;
  e.record(*this);
  return e;
}

Stream default_stream() { return Stream(); }
Stream current_stream() { return tls_current; }
void set_current_stream(const Stream& s) {
  tls_current = s;
  stream_detail::set_dispatch_stream(s.queue().get());
}

Event::Event(bool enable_timing) : e_(std::make_shared<EventHandle>()) {
  e_->id = g_next_event_id.fetch_add(1);
  e_->timing = enable_timing;
}

void Event::record(const Stream& s) {
  auto n = std::make_shared<EventState>();
  n->timing = e_->timing;
  n->recorded = true;
  if (s.is_default()) {
    if (n->timing) n->time_ns = now_ns();
    e_->set(std::move(n));
    return;
  }
  n->stream = s.queue();
  std::weak_ptr<EventState> w = n;
  n->ticket = stream_detail::enqueue_on(s.queue().get(), [w]() {
    if (auto st = w.lock())
      if (st->timing) st->time_ns = now_ns();
  });
  e_->set(std::move(n));
}

void Event::wait(const Stream& s) const {
  std::shared_ptr<EventState> st = e_->get();
  if (!st->recorded) return;
  if (s.is_default()) {
    st->wait();
    return;
  }
  if (st->stream == s.queue()) return;  // the same queue runs in order
  stream_detail::enqueue_on(s.queue().get(), [st]() { st->wait(); });
}

bool Event::query() const {
  std::shared_ptr<EventState> st = e_->get();
  return !st->recorded || st->reached();
}

void Event::synchronize() const {
  std::shared_ptr<EventState> st = e_->get();
  if (st->recorded) st->wait();
}

double Event::elapsed_time(const Event& end) const {
  std::shared_ptr<EventState> a = e_->get(), b = end.e_->get();
  KILN_CHECK(e_->timing && end.e_->timing, Value, "elapsed_time",
             "Both events must be created with argument 'enable_timing=True'.");
  KILN_CHECK(a->recorded && b->recorded, Value, "elapsed_time",
             "Both events must be recorded before calculating elapsed time.");
  KILN_CHECK(a->reached() && b->reached(), Value, "elapsed_time",
             "Both events must be completed before calculating elapsed time.");
  return static_cast<double>(b->time_ns.load() - a->time_ns.load()) / 1e6;
}

bool Event::enable_timing() const { return e_->timing; }
bool Event::recorded() const { return e_->get()->recorded; }
int64_t Event::id() const { return e_->id; }

void record_stream(const Tensor& t, const Stream& s) {
  if (s.is_default() || !t.defined()) return;
  std::shared_ptr<Storage> keep = t.storage();
  s.enqueue([keep]() {});  // the storage is let go when the work queued before this has run
}

void synchronize_streams() { wait_all(true); }

}  // namespace kiln
