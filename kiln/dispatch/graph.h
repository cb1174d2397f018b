// Graph capture and replay on the CPU (torch.cuda.graph's API; issue 17).
//
// capture_begin() attaches the graph to the calling thread's capture layer (op.h): from then on every
// op runs normally through dispatch (results during capture are correct) and the graph records each
// top-level kernel with snapshots of the tensors it read and wrote (recorded.h) and its attributes;
// view kernels are not recorded (a recorded view already aliases the right memory). replay() runs the
// recorded kernels again, in order, on the same memory: no dispatch, no shape inference, no
// allocation, no autograd bookkeeping (and, from Python, without the interpreter lock). Inputs are
// static: copy_ new data into the tensors the capture read; outputs are static: each replay
// overwrites the tensors the capture made. Random kernels draw from the generator at replay, so
// each replay draws fresh numbers, bitwise equal to the eager step at the same generator state.
//
// Rules, raised during capture with RuntimeError: no host read of tensor data (item(), tolist(), a
// data-dependent branch); no op whose output size depends on data (nonzero, masked_select, ...); no
// second capture on the same thread. The graph holds the tensors its kernels touched; the
// intermediates move into one arena planned by liveness at capture_end.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

namespace kiln {

class Tensor;

namespace detail {
struct GraphImpl;
struct GraphPoolState;
}

// A memory pool graphs may share (torch's graph_pool_handle()): the graphs captured into one pool
// plan their intermediates into the same arena, so together they hold what the largest needs. Their
// replays must not run at the same time (torch's rule for shared pools).
class GraphPool {
 public:
  static GraphPool create();
  bool defined() const { return s_ != nullptr; }
  bool operator==(const GraphPool& o) const { return s_ == o.s_; }
  const std::shared_ptr<detail::GraphPoolState>& state() const { return s_; }

 private:
  std::shared_ptr<detail::GraphPoolState> s_;
};

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;

  // lenient: a broken rule (a host read, a data-dependent size) does not raise where it happens;
  // the op runs as eagerly and capture_end raises instead (kiln.compile: a call that cannot be
  // captured still completes, once).
  void capture_begin(const GraphPool& pool = {}, bool lenient = false);
  GraphPool pool() const;  // the pool its arena comes from (one of its own unless given)
  void capture_end();
  void replay();
  void reset();  // forgets the recording (and lets go of its tensors)
  bool capturing() const;
  size_t num_kernels() const;
  // The memory plan made at capture_end: the intermediates (buffers only the recording uses, each
  // fully written before it is read) share one arena by their live spans.
  size_t arena_bytes() const;
  size_t planned_buffers() const;
  // Whether a recorded kernel reads memory of t's storage.
  bool reads(const Tensor& t) const;

 private:
  std::unique_ptr<detail::GraphImpl> impl_;
};

// Whether a graph captures on the calling thread.
bool graph_capturing();
// Host work a replay must repeat in its place among the kernels (an optimiser's fused update, which
// reads and writes parameter memory itself): while a graph captures on this thread, runs `fn` now
// (host reads allowed, its kernels not recorded one by one) and records it; otherwise just runs it.
void graph_host_step(const std::function<void()>& fn);

// RAII: capture_begin in the constructor, capture_end in the destructor (on an exception the
// half-made recording is reset instead).
class GraphCapture {
 public:
  explicit GraphCapture(Graph& g, const GraphPool& pool = {});
  ~GraphCapture() noexcept(false);
  GraphCapture(const GraphCapture&) = delete;
  GraphCapture& operator=(const GraphCapture&) = delete;

 private:
  Graph& g_;
  int uncaught_;
};

}  // namespace kiln
