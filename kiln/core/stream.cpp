#include "kiln/core/stream.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/core/tensor.h"
#include "kiln/core/threads.h"
#include "kiln/dispatch/op.h"

namespace kiln {
namespace detail {

// One stream's queue and its worker. The worker thread holds the queue too, so whichever of the two
// lets go last frees it; a Stream's last handle stops the worker once the queue has drained.
struct StreamQueue {
  int64_t id = 0;
  int priority = 0;
  std::mutex mu;
  std::condition_variable cv;       // the worker waits for work, callers for progress
  std::deque<std::function<void()>> tasks;
  uint64_t enqueued = 0;            // tickets handed out
  std::atomic<uint64_t> done{0};    // tickets run
  std::exception_ptr error;         // the first kernel error since the last synchronize
  bool stop = false;
  bool worker_idle = false;  // the worker waits for work: an enqueue must wake it
  int waiters = 0;           // callers waiting for progress: the worker must wake them
  std::weak_ptr<StreamQueue> self;  // the worker's handle is made from it
  std::thread worker;
  pid_t worker_pid = 0;

  void run(const std::shared_ptr<StreamQueue>& self);
  void wait_for(uint64_t ticket) {
    if (done.load(std::memory_order_acquire) >= ticket) return;
    KernelRegion region(true);  // a host-language lock (Python's) is let go while this thread waits
    std::unique_lock<std::mutex> lock(mu);
    ++waiters;
    cv.wait(lock, [&] { return done.load(std::memory_order_acquire) >= ticket; });
    --waiters;
  }
  void rethrow_error() {
    std::exception_ptr e;
    {
      std::lock_guard<std::mutex> lock(mu);
      std::swap(e, error);
    }
    if (e) std::rethrow_exception(e);
  }
};

struct EventState {
  int64_t id = 0;
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

}  // namespace detail

namespace stream_detail {
std::atomic<int64_t> g_pending{0};
}

namespace {
using detail::EventState;
using detail::StreamQueue;

std::mutex g_registry_mu;
std::vector<std::weak_ptr<StreamQueue>> g_registry;  // every live stream, for synchronize_streams
std::atomic<int64_t> g_next_stream_id{1}, g_next_event_id{1};

thread_local Stream tls_current;
// Set on a stream's worker: what it runs reads what its queue made before (a kernel's own item() of a
// scalar operand must not wait for the queue it is part of).
thread_local bool tls_worker = false;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<std::shared_ptr<StreamQueue>> live_streams() {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  std::vector<std::shared_ptr<StreamQueue>> out;
  size_t keep = 0;
  for (auto& w : g_registry)
    if (auto q = w.lock()) {
      out.push_back(q);
      g_registry[keep++] = w;
    }
  g_registry.resize(keep);
  return out;
}

// The handle Stream keeps: when the last one goes, the worker is told to stop after the queue drains,
// and joined (unless this is the worker itself letting go, through a task that held the stream).
struct QueueOwner {
  std::shared_ptr<StreamQueue> q;
};
}  // namespace

void detail::StreamQueue::run(const std::shared_ptr<StreamQueue>& self) {
  (void)self;  // keeps the queue alive for the worker's lifetime
  tls_worker = true;
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu);
      worker_idle = true;
      cv.wait(lock, [&] { return stop || !tasks.empty(); });
      worker_idle = false;
      if (tasks.empty()) return;  // stopped and drained
      task = std::move(tasks.front());
      tasks.pop_front();
    }
    try {
      task();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
    }
    task = nullptr;  // the task's tensors are let go before the ticket counts as done
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu);
      done.fetch_add(1, std::memory_order_release);
      wake = waiters > 0;
    }
    stream_detail::g_pending.fetch_sub(1, std::memory_order_relaxed);
    if (wake) cv.notify_all();
  }
}

namespace stream_detail {
// How far an issuing thread may run ahead of a stream's worker (CUDA's launch queue is of this
// order): every queued kernel holds its tensors, so an unbounded queue would hold unbounded memory.
constexpr uint64_t kMaxQueued = 1024;

uint64_t enqueue_on(StreamQueue* q, std::function<void()> fn) {
  q->rethrow_error();  // an earlier kernel's error is reported at the next call, as CUDA's
  if (!tls_worker) {
    uint64_t queued;
    {
      std::lock_guard<std::mutex> lock(q->mu);
      queued = q->enqueued;
    }
    if (queued >= kMaxQueued) q->wait_for(queued + 1 - kMaxQueued);
  }
  uint64_t ticket;
  bool wake;
  {
    std::lock_guard<std::mutex> lock(q->mu);
    if (q->worker_pid != getpid()) {
      // first use, or a forked child (the parent's worker was not copied): start a worker
      if (q->worker.joinable()) new std::thread(std::move(q->worker));  // the parent's: never joined here
      mark_interop_started();
      q->worker = std::thread([q, self = q->self.lock()] { q->run(self); });
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

namespace {
std::mutex g_slot_mu;
std::condition_variable g_slot_cv;
int g_slots_used = 0;
}  // namespace

InteropSlot::InteropSlot() {
  const int limit = get_num_interop_threads();
  std::unique_lock<std::mutex> lock(g_slot_mu);
  g_slot_cv.wait(lock, [&] { return g_slots_used < limit; });
  ++g_slots_used;
}

InteropSlot::~InteropSlot() {
  {
    std::lock_guard<std::mutex> lock(g_slot_mu);
    --g_slots_used;
  }
  g_slot_cv.notify_one();
}

void drain(StreamQueue* q) {
  uint64_t t;
  {
    std::lock_guard<std::mutex> lock(q->mu);
    t = q->enqueued;
  }
  q->wait_for(t);
}

void wait_all_slow() {
  if (tls_worker) return;
  for (auto& q : live_streams()) {
    uint64_t t;
    {
      std::lock_guard<std::mutex> lock(q->mu);
      t = q->enqueued;
    }
    q->wait_for(t);
  }
}

void wait_other_streams() {
  if (g_pending.load(std::memory_order_relaxed) == 0) return;
  StreamQueue* mine = tls_current.queue().get();
  for (auto& q : live_streams()) {
    if (q.get() == mine) continue;
    uint64_t t;
    {
      std::lock_guard<std::mutex> lock(q->mu);
      t = q->enqueued;
    }
    q->wait_for(t);
  }
}
}  // namespace stream_detail

Stream Stream::create(int priority) {
  auto q = std::shared_ptr<StreamQueue>(new StreamQueue, [](StreamQueue* p) { delete p; });
  q->id = g_next_stream_id.fetch_add(1);
  q->priority = priority;
  q->self = q;
  {
    std::lock_guard<std::mutex> lock(g_registry_mu);
    g_registry.push_back(q);
  }
  // The worker's handle and the user's are the same shared_ptr; the worker is stopped by the user's
  // last Stream going away: a second control block does that (owner), deleting nothing but the
  // worker's life.
  auto owner = std::shared_ptr<StreamQueue>(q.get(), [keep = q](StreamQueue* p) {
    std::thread worker;
    {
      std::lock_guard<std::mutex> lock(p->mu);
      p->stop = true;
      if (p->worker_pid == getpid()) worker = std::move(p->worker);
    }
    p->cv.notify_all();
    if (worker.joinable()) {
      if (worker.get_id() == std::this_thread::get_id())
        worker.detach();  // the worker itself let go of the last handle (a task held the stream)
      else
        worker.join();
    }
    (void)keep;
  });
  Stream s;
  s.q_ = owner;
  return s;
}

int64_t Stream::id() const { return q_ ? q_->id : 0; }
int Stream::priority() const { return q_ ? q_->priority : 0; }

bool Stream::query() const {
  if (!q_) return true;
  std::lock_guard<std::mutex> lock(q_->mu);
  return q_->done.load(std::memory_order_acquire) >= q_->enqueued;
}

void Stream::synchronize() const {
  if (!q_) return;
  uint64_t t;
  {
    std::lock_guard<std::mutex> lock(q_->mu);
    t = q_->enqueued;
  }
  q_->wait_for(t);
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

Event::Event(bool enable_timing) : e_(std::make_shared<EventState>()) {
  e_->id = g_next_event_id.fetch_add(1);
  e_->timing = enable_timing;
}

void Event::record(const Stream& s) {
  // a new state: waits already queued on the old one keep waiting for the old point
  auto n = std::make_shared<EventState>();
  n->id = e_->id;
  n->timing = e_->timing;
  n->recorded = true;
  if (s.is_default()) {
    if (n->timing) n->time_ns = now_ns();
    e_ = n;
    return;
  }
  StreamQueue* q = s.queue().get();
  n->stream = s.queue();
  std::weak_ptr<EventState> w = n;
  n->ticket = stream_detail::enqueue_on(q, [w]() {
    if (auto st = w.lock())
      if (st->timing) st->time_ns = now_ns();
  });
  e_ = n;
}

void Event::wait(const Stream& s) const {
  if (!e_->recorded) return;
  if (s.is_default()) {
    e_->wait();
    return;
  }
  if (e_->stream == s.queue()) return;  // the same queue runs in order
  std::shared_ptr<EventState> st = e_;
  stream_detail::enqueue_on(s.queue().get(), [st]() { st->wait(); });
}

bool Event::query() const { return !e_->recorded || e_->reached(); }
void Event::synchronize() const {
  if (!e_->recorded) return;
  e_->wait();
}

double Event::elapsed_time(const Event& end) const {
  KILN_CHECK(e_->timing && end.e_->timing, Value, "elapsed_time",
             "Both events must be created with argument 'enable_timing=True'.");
  KILN_CHECK(e_->recorded && end.e_->recorded, Value, "elapsed_time",
             "Both events must be recorded before calculating elapsed time.");
  KILN_CHECK(e_->reached() && end.e_->reached(), Value, "elapsed_time",
             "Both events must be completed before calculating elapsed time.");
  return static_cast<double>(end.e_->time_ns.load() - e_->time_ns.load()) / 1e6;
}

bool Event::enable_timing() const { return e_->timing; }
bool Event::recorded() const { return e_->recorded; }
int64_t Event::id() const { return e_->id; }

void record_stream(const Tensor& t, const Stream& s) {
  if (s.is_default() || !t.defined()) return;
  std::shared_ptr<Storage> keep = t.storage();
  s.enqueue([keep]() {});  // the storage is let go when the work queued before this has run
}

void synchronize_streams() {
  stream_detail::wait_all_slow();
  for (auto& q : live_streams()) q->rethrow_error();
}

}  // namespace kiln
