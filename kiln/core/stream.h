// Streams and events on the CPU (torch.Stream / torch.Event, with CUDA streams' semantics).
//
// The default stream is the calling thread: ops issued on it run synchronously, as they always have.
// A stream made with Stream::create() is an ordered work queue with a worker thread of its own. While
// it is the thread's current stream (StreamGuard; Python: `with kiln.stream(s)`), dispatch checks each
// op, sizes and allocates its outputs on the calling thread (so shape and dtype errors are raised
// there, at once), and queues the kernel; the worker runs the queue in order. Independent streams
// therefore overlap, with each other and with the default stream.
//
// As with CUDA streams, work on different streams is ordered only by events (Event::record / wait,
// Stream::wait_stream) or by synchronize(). What kiln adds, so that a missing synchronisation cannot
// make a crash: every queued kernel holds its tensors (their memory is not reused until it ran); a
// host read of tensor data (item, tolist, numpy, repr, data_ptr, DLPack) and an op whose output size
// depends on data (nonzero, ...) wait for all queued work first; backward waits for other streams'.
// A kernel error raised on a worker is kept and raised by the stream's next synchronize() (or the next
// op issued on it), as CUDA reports asynchronous errors.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

namespace kiln {

class Tensor;
class Event;
namespace detail {
struct StreamQueue;
struct EventHandle;
}  // namespace detail

class Stream {
 public:
  Stream() = default;  // the default stream
  static Stream create(int priority = 0);

  bool is_default() const { return !q_; }
  int64_t id() const;  // 0 for the default stream
  int priority() const;
  // Whether all work queued so far has run.
  bool query() const;
  // Waits for the work queued so far; raises the first kernel error the worker met since the last call.
  void synchronize() const;
  // Work queued on this stream after the call waits for the event (the default stream: the caller waits).
  void wait_event(const Event& e) const;
  // ... for the work queued on `other` so far.
  void wait_stream(const Stream& other) const;
  Event record_event() const;
  // Queues fn after the work queued so far (the default stream: runs it now).
  void enqueue(std::function<void()> fn) const;

  bool operator==(const Stream& o) const { return q_ == o.q_; }
  bool operator!=(const Stream& o) const { return q_ != o.q_; }
  const std::shared_ptr<detail::StreamQueue>& queue() const { return q_; }

 private:
  std::shared_ptr<detail::StreamQueue> q_;
};

Stream default_stream();
Stream current_stream();  // the calling thread's
void set_current_stream(const Stream& s);

// RAII: makes s current for a scope.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& s) : prev_(current_stream()) { set_current_stream(s); }
  ~StreamGuard() { set_current_stream(prev_); }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream prev_;
};

class Event {
 public:
  explicit Event(bool enable_timing = false);
  // Marks the point after the work queued on s so far.
  void record(const Stream& s = current_stream());
  // Makes s wait for that point (the default stream: the caller waits).
  void wait(const Stream& s = current_stream()) const;
  bool query() const;  // reached (true for an event never recorded, as torch's)
  void synchronize() const;
  // Milliseconds from this event to `end`; both recorded with timing, both reached (ValueError otherwise).
  double elapsed_time(const Event& end) const;
  bool enable_timing() const;
  bool recorded() const;
  int64_t id() const;

 private:
  std::shared_ptr<detail::EventHandle> e_;  // copies of an Event share it, as torch's Python objects do
};

// Keeps t's memory from being reused until the work queued on s so far has run (torch's
// Tensor.record_stream). Queued kiln ops hold their tensors already; this covers uses kiln cannot see.
void record_stream(const Tensor& t, const Stream& s);
// Waits for the work queued on every stream.
void synchronize_streams();

namespace stream_detail {
extern std::atomic<int64_t> g_pending;  // kernels queued on non-default streams, not yet run
extern std::atomic<int> g_forbidding;   // threads on which host reads raise (graph capture)
extern std::atomic<int> g_errors;       // kernel errors kept by workers, not yet raised
void wait_all_slow();
// While set on a thread (a graph captures there), a host read of tensor data raises RuntimeError
// naming `who`: its value would be frozen into the recording. Null clears it.
// lenient: the read happens (and is counted, so the capture fails at its end) instead of raising.
void forbid_host_reads(const char* who, bool lenient = false);
// How many host reads were refused on this thread so far (a capture that saw one fails).
uint64_t refused_host_reads();
// Called before the host reads tensor data.
// On a stream's worker it returns at once (the worker reads what its queue made before). A kernel
// error a worker kept is raised here, as CUDA raises asynchronous errors at the next synchronisation.
inline void before_host_read() {
  if (g_pending.load(std::memory_order_acquire) > 0 || g_forbidding.load(std::memory_order_relaxed) > 0 ||
      g_errors.load(std::memory_order_relaxed) > 0) [[unlikely]]
    wait_all_slow();
}
// Waits for every stream but the calling thread's current one (backward's entry).
void wait_other_streams();
// dispatch's side (kiln/dispatch/op.cpp): the current stream's queue is kept in dispatch's
// thread-local block (null: the default stream); ops queue their kernels with enqueue_on.
void set_dispatch_stream(detail::StreamQueue* q);
void drain(detail::StreamQueue* q);
// Held by a stream's worker while it runs a kernel: at most get_num_interop_threads() streams run
// kernels at the same time (waits for events hold none, so a cross-stream wait cannot starve).
struct InteropSlot {
  InteropSlot();
  ~InteropSlot();
  InteropSlot(const InteropSlot&) = delete;
  InteropSlot& operator=(const InteropSlot&) = delete;
};  // waits for the work queued on q so far
uint64_t enqueue_on(detail::StreamQueue* q, std::function<void()> fn);  // returns the task's ticket
}  // namespace stream_detail

}  // namespace kiln
