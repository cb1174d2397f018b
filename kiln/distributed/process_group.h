// kiln::distributed — process groups and collectives on Open MPI (torch.distributed's names and
// semantics, backend "mpi"). Built as its own library, libkiln_distributed, so that libkiln itself
// does not depend on MPI.
//
// Ranks come from MPI (launch with `mpirun -np N`). Every process group owns one communication
// thread that runs its operations in the order they were issued, with MPI's own (blocking, tuned)
// collectives; an operation returns a Work at once and the caller waits on it (async_op) or the call
// waits for it. One exception, for latency: a small all_reduce whose caller waits for it at once
// (`blocking`) runs on the calling thread when the group is idle, as point-to-point messages it polls
// (the hand-off to the thread and back cost more than the collective itself). A watchdog thread per process enforces each group's timeout: an operation that does
// not finish in time fails, together with every later one of its group, with an error that names the
// collective, the group and the ranks that never joined it (they are asked over a control
// communicator, which the watchdog serves on every process). A group that timed out is aborted: its
// MPI state is unusable, so the process skips MPI_Finalize at exit and mpirun ends the job.
//
// Ranks passed to a ProcessGroup's methods are ranks *within* the group; the free functions of the
// Python front end take global ranks, as torch's do.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln::distributed {

enum class ReduceOp : uint8_t { SUM, AVG, PRODUCT, MIN, MAX };
const char* reduce_op_name(ReduceOp op);        // "SUM"
ReduceOp reduce_op_from_string(const std::string& s);  // "sum", "avg", ... (functional collectives)

using Millis = std::chrono::milliseconds;
inline constexpr Millis kDefaultTimeout{30 * 60 * 1000};  // torch's default for CPU backends

// The handle of one operation. wait() blocks until it finished and raises its error (a RuntimeError:
// a timeout, a mismatch between ranks, an MPI error); wait(timeout) raises when it has not finished by
// then. result() holds the operation's output tensors (where it has any).
class Work {
 public:
  Work(std::string op, std::vector<Tensor> result = {}) : op_(std::move(op)), result_(std::move(result)) {}
  bool is_completed() const { return done_.load(std::memory_order_acquire); }
  bool is_success() const;
  bool wait(std::optional<Millis> timeout = std::nullopt);
  const std::vector<Tensor>& result() const { return result_; }
  const std::string& op() const { return op_; }
  std::exception_ptr exception() const;

  // For the group: completes the Work (err null: success); runs the completion callbacks.
  void finish(std::exception_ptr err);
  // Runs fn on the communication thread after the data arrived, before the Work completes (copies back
  // into non-contiguous or half-precision outputs).
  std::function<void()> epilogue;
  int source = -1;  // recv: the group rank the message came from

 private:
  std::string op_;
  std::vector<Tensor> result_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::atomic<bool> done_{false};
  std::exception_ptr err_;
};
using WorkPtr = std::shared_ptr<Work>;

class ProcessGroup : public std::enable_shared_from_this<ProcessGroup> {
 public:
  ~ProcessGroup();
  int id() const { return id_; }
  int rank() const { return rank_; }  // this process's rank in the group
  int size() const { return static_cast<int>(ranks_.size()); }
  const std::vector<int>& ranks() const { return ranks_; }  // the members' global ranks
  int global_rank(int group_rank) const;
  int group_rank(int global_rank) const;  // -1: not a member
  Millis timeout() const { return timeout_; }
  std::string describe() const;  // "process group 1 (ranks 0, 2; timeout 2000 ms)"
  bool aborted() const { return aborted_.load(); }

  // Collectives. Tensors are CPU tensors of any dtype (float16/bfloat16/float8 are reduced in float32
  // and rounded once); non-contiguous ones are staged through contiguous copies.
  // blocking: the caller waits for the Work at once, so a small one (at most 64 KB on the wire) may run
  // on the calling thread when the group is idle (else it is queued as usual); either way the caller
  // wait()s, which raises its error.
  WorkPtr all_reduce(const Tensor& t, ReduceOp op = ReduceOp::SUM, bool blocking = false);
  WorkPtr broadcast(const Tensor& t, int root);
  WorkPtr reduce(const Tensor& t, int root, ReduceOp op = ReduceOp::SUM);
  WorkPtr all_gather(const std::vector<Tensor>& outputs, const Tensor& input);
  WorkPtr all_gather_into_tensor(const Tensor& output, const Tensor& input);
  WorkPtr reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op = ReduceOp::SUM);
  WorkPtr reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::SUM);
  WorkPtr all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs);
  // Along dim 0; empty split lists mean equal splits.
  WorkPtr all_to_all_single(const Tensor& output, const Tensor& input, const Shape& output_splits = {},
                            const Shape& input_splits = {});
  WorkPtr gather(const std::vector<Tensor>& outputs, const Tensor& input, int root);  // outputs: root only
  WorkPtr scatter(const Tensor& output, const std::vector<Tensor>& inputs, int root);  // inputs: root only
  WorkPtr barrier();
  WorkPtr send(const Tensor& t, int dst, int tag = 0);
  WorkPtr recv(const Tensor& t, int src, int tag = 0);  // src -1: any source

  // Internal (the runtime and the watchdog).
  struct Impl;
  ProcessGroup(int id, std::vector<int> ranks, int rank, Millis timeout, void* comm, void* check_comm);
  WorkPtr submit(WorkPtr w, std::function<void()> run, bool collective, bool deferred = false);
  void watchdog_tick(std::chrono::steady_clock::time_point now);
  void abort(const std::string& why);
  void shutdown();
  int64_t entered() const { return entered_.load(); }
  void* comm() const { return comm_; }
  void* check_comm() const { return check_comm_; }  // MPI_Comm of the envelopes (collectives.cpp)
  // Scratch for the envelopes: two buffers of `envelope_capacity` bytes. Owned by the group and kept
  // after an abort (a receive may still be posted into it).
  char* envelopes();
  static constexpr size_t kEnvelopeCapacity = (size_t(64) << 10) + 64;
  void check_open(const char* op) const;  // raises when aborted or destroyed

 private:
  void loop();
  WorkPtr reduce_scatter_flat(const char* name, const Tensor& output, const Tensor& send, ReduceOp op);
  // Runs a collective on the calling thread when nothing is queued or running (else submits it).
  WorkPtr run_inline(WorkPtr w, std::function<void()> run);

  int id_;
  std::vector<int> ranks_;
  int rank_;
  Millis timeout_;
  void* comm_;  // MPI_Comm
  void* check_comm_ = nullptr;  // MPI_Comm: a duplicate of comm_ for the envelopes
  char* envelopes_ = nullptr;

  struct Task {
    WorkPtr work;
    std::function<void()> run;
    bool collective;
    bool deferred;  // the run posts a request; the Work completes when it does (poll_inflight)
  };
  // Point-to-point requests posted by the communication thread, completed as it polls them.
  struct Inflight {
    void* request;  // MPI_Request (heap-allocated)
    WorkPtr work;
    std::function<void(int source, int count)> done;
    std::chrono::steady_clock::time_point start;
  };
  std::vector<Inflight> inflight_;
  void poll_inflight();

 public:
  // For send/recv: registers a posted request (called on the communication thread).
  void add_inflight(void* request, WorkPtr w, std::function<void(int, int)> done);

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  WorkPtr running_;
  bool running_collective_ = false;
  bool inline_ = false;  // the running collective runs on its caller's thread: the thread waits
  std::chrono::steady_clock::time_point started_;
  std::atomic<int64_t> entered_{0};  // collectives this process has started on the group
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;
  bool stop_ = false;
  std::thread thread_;
};
using ProcessGroupPtr = std::shared_ptr<ProcessGroup>;

struct InitOptions {
  std::string backend = "mpi";
  Millis timeout = kDefaultTimeout;
  int world_size = -1;  // when given, checked against MPI's
  int rank = -1;
};

// Initialises MPI (MPI_THREAD_MULTIPLE) once and makes the default group; raises RuntimeError when
// already initialised, ValueError for another backend or a rank/world size MPI does not agree with.
void init_process_group(const InitOptions& o = {});
bool is_initialized();
bool is_available();  // MPI is linked in (always true for this library)
int get_rank();        // global rank (raises when not initialised)
int get_world_size();
ProcessGroupPtr world();
// A group of the given global ranks (every process calls it, members or not; non-members get null).
// An empty list is the whole world. timeout: the world's when not given.
ProcessGroupPtr new_group(const std::vector<int>& ranks, std::optional<Millis> timeout = std::nullopt);
// Group by id (the id the table ops carry); raises ValueError for an unknown or destroyed one.
ProcessGroupPtr group_by_id(int id);
// Destroys one group, or all of them and finalises MPI (null). After a timeout MPI is not finalised.
void destroy_process_group(const ProcessGroupPtr& g = nullptr);
// Ends the whole job now (MPI_Abort): what a rank does when it fails outside a collective, so that the
// others do not wait for it until their timeout. kiln.distributed calls it for an uncaught exception.
[[noreturn]] void abort_job(int code);
// The baseline of `make bench`: seconds per call of a plain loop over MPI_Allreduce (float32, SUM, in
// place) of `bytes` bytes on a duplicate of the world communicator, from the calling thread.
double bench_raw_allreduce(int64_t bytes, int iters);
// Whether every collective checks that all ranks passed the same dtype and sizes (an extra tiny
// exchange first; an all_reduce of at most 64 KB is always checked, in the messages that carry it). On
// by default; KILN_DISTRIBUTED_CHECKS=0 in the environment turns it off.
void set_consistency_checks(bool on);
bool consistency_checks();

}  // namespace kiln::distributed
