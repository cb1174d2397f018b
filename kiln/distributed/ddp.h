// Data-parallel training: torch's DistributedDataParallel. The Reducer keeps the parameters' gradients
// in buckets (in reverse parameter order, about bucket_cap_mb each, one dtype per bucket); a hook on
// each parameter, run by the autograd engine right after the gradient was accumulated, marks it ready,
// and a bucket whose parameters are all ready starts its all_reduce (AVG) on the group's communication
// thread at once, so communication overlaps the rest of backward. Buckets start in index order on every
// rank (collectives must match). The last one to finish writes the averaged gradients back.
//
// C++: wrap any module with DistributedDataParallel<M>; Python: kiln.nn.parallel.DistributedDataParallel.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "kiln/distributed/process_group.h"
#include "kiln/nn/module.h"

namespace kiln::distributed {

struct DDPOptions {
  double bucket_cap_mb = 25;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
  bool static_graph = false;
  bool broadcast_buffers = true;
};

class Reducer {
 public:
  // params: the parameters that require grad, in module order.
  Reducer(TensorList params, ProcessGroupPtr group, DDPOptions options = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // After each forward that will be followed by backward (grad mode on, syncing): checks that the
  // previous backward reduced every bucket, and with find_unused_parameters marks the parameters the
  // outputs do not reach as ready.
  void prepare_for_backward(const TensorList& outputs);
  // no_sync(): while false, backward accumulates gradients locally and communicates nothing.
  void set_require_sync(bool on) { require_sync_ = on; }
  bool require_sync() const { return require_sync_; }
  // Broadcasts tensors from rank 0 of the group (parameters and buffers at construction; buffers
  // before each forward when broadcast_buffers).
  void broadcast_from_rank0(const TensorList& ts);
  const ProcessGroupPtr& group() const { return group_; }
  // The parameter indices of each bucket (for tests and diagnostics).
  std::vector<std::vector<size_t>> bucket_indices() const;
  // Seconds this process waited for communication at the end of the last backward (the part that did
  // not overlap with computation).
  double last_wait_seconds() const { return last_wait_; }

 private:
  struct Bucket {
    std::vector<size_t> params;
    std::vector<int64_t> offsets;  // element offset of each parameter in `flat`
    Tensor flat;
    size_t pending = 0;
    WorkPtr work;
  };
  void on_ready(size_t i);
  void launch_ready_buckets();
  void finish();
  void reset_step();

  TensorList params_;
  ProcessGroupPtr group_;
  DDPOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // param -> bucket
  std::vector<int> hook_ids_;
  std::vector<bool> ready_;
  std::vector<uint8_t> used_;  // find_unused_parameters: the parameters this rank's graph reached
  size_t next_bucket_ = 0;
  bool expect_ = false;            // a synced backward is under way
  bool backward_started_ = false;  // a gradient arrived since prepare_for_backward
  bool require_sync_ = true;
  double last_wait_ = 0;
};

// torch.nn.parallel.DistributedDataParallel for a C++ module M (any forward signature).
template <class M>
class DistributedDataParallel {
 public:
  explicit DistributedDataParallel(std::shared_ptr<M> module, DDPOptions options = {}, ProcessGroupPtr group = nullptr)
      : module_(std::move(module)), options_(options) {
    if (!group) group = world();
    TensorList params;
    for (const Tensor& p : module_->parameters())
      if (kiln::requires_grad(p)) params.push_back(p);
    reducer_ = std::make_unique<Reducer>(params, group, options);
    TensorList all = module_->parameters();
    for (const Tensor& b : module_->buffers()) all.push_back(b);
    reducer_->broadcast_from_rank0(all);
  }
  template <class... A>
  auto forward(A&&... args) {
    if (options_.broadcast_buffers) reducer_->broadcast_from_rank0(module_->buffers());
    auto out = module_->forward(std::forward<A>(args)...);
    if (kiln::grad_mode_enabled() && reducer_->require_sync()) reducer_->prepare_for_backward(tensors_of(out));
    return out;
  }
  template <class... A>
  auto operator()(A&&... args) { return forward(std::forward<A>(args)...); }
  M& module() { return *module_; }
  const std::shared_ptr<M>& module_ptr() { return module_; }
  Reducer& reducer() { return *reducer_; }

  // RAII: gradients accumulate locally while it lives (torch's `with ddp.no_sync():`).
  class NoSync {
   public:
    explicit NoSync(Reducer& r) : r_(r), prev_(r.require_sync()) { r_.set_require_sync(false); }
    ~NoSync() { r_.set_require_sync(prev_); }
   private:
    Reducer& r_;
    bool prev_;
  };
  NoSync no_sync() { return NoSync(*reducer_); }

 private:
  static TensorList tensors_of(const Tensor& t) { return {t}; }
  template <class T>
  static TensorList tensors_of(const std::vector<T>& v) {
    TensorList r;
    for (const auto& x : v) r.push_back(x);
    return r;
  }
  template <class... T>
  static TensorList tensors_of(const std::tuple<T...>& t) {
    TensorList r;
    std::apply([&](const auto&... x) { (add(r, x), ...); }, t);
    return r;
  }
  template <class A, class B>
  static TensorList tensors_of(const std::pair<A, B>& p) {
    TensorList r;
    add(r, p.first), add(r, p.second);
    return r;
  }
  static void add(TensorList& r, const Tensor& t) { r.push_back(t); }
  template <class T>
  static void add(TensorList& r, const T& x) {
    for (const Tensor& t : tensors_of(x)) r.push_back(t);
  }

  std::shared_ptr<M> module_;
  DDPOptions options_;
  std::unique_ptr<Reducer> reducer_;
};

}  // namespace kiln::distributed
