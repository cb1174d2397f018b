#include "kiln/distributed/ddp.h"

#include <chrono>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "kiln/autograd/nodes.h"
#include "kiln/core/error.h"

namespace kiln::distributed {

Reducer::Reducer(TensorList params, ProcessGroupPtr group, DDPOptions options)
    : params_(std::move(params)), group_(std::move(group)), options_(options) {
  KILN_CHECK(group_ != nullptr, Value, "DistributedDataParallel", "no process group (call init_process_group first)");
  KILN_CHECK(options_.bucket_cap_mb > 0, Value, "DistributedDataParallel", "bucket_cap_mb must be positive, got ",
             options_.bucket_cap_mb);
  size_t n = params_.size();
  for (size_t i = 0; i < n; ++i) {
    const Tensor& p = params_[i];
    KILN_CHECK(p.defined() && kiln::requires_grad(p) && is_leaf(p), Value, "DistributedDataParallel",
               "parameter ", i, " is not a leaf tensor that requires grad");
    KILN_CHECK(p.device().is_cpu(), Value, "DistributedDataParallel", "parameter ", i, " is on ",
               device_str(p.device()), "; the mpi backend takes CPU tensors");
  }
  // Buckets in reverse parameter order (the order backward produces gradients), one dtype each.
  const double cap = options_.bucket_cap_mb * 1024 * 1024;
  bucket_of_.assign(n, 0);
  std::vector<std::vector<size_t>> groups;
  std::vector<double> bytes;
  std::vector<Dtype> dts;
  for (size_t k = n; k-- > 0;) {
    const Tensor& p = params_[k];
    double b = static_cast<double>(p.nbytes());
    if (groups.empty() || dts.back() != p.dtype() || bytes.back() + b > cap)
      groups.emplace_back(), bytes.push_back(0), dts.push_back(p.dtype());
    size_t at = groups.size() - 1;
    groups[at].push_back(k);
    bytes[at] += b;
  }
  for (size_t j = 0; j < groups.size(); ++j) {
    Bucket bk;
    bk.params = groups[j];
    int64_t off = 0;
    for (size_t i : bk.params) {
      bk.offsets.push_back(off);
      off += params_[i].numel();
      bucket_of_[i] = j;
    }
    bk.flat = zeros({off}, dts[j]);
    buckets_.push_back(std::move(bk));
  }
  ready_.assign(n, false);
  used_.assign(n, 0);
  for (size_t i = 0; i < n; ++i)
    hook_ids_.push_back(register_post_accumulate_grad_hook(params_[i], [this, i](const Tensor&) { on_ready(i); }));
}

Reducer::~Reducer() {
  for (size_t i = 0; i < params_.size(); ++i) remove_hook(params_[i], hook_ids_[i]);
  for (auto& b : buckets_)
    if (b.work) try { b.work->wait(); } catch (...) {}
}

std::vector<std::vector<size_t>> Reducer::bucket_indices() const {
  std::vector<std::vector<size_t>> r;
  for (const auto& b : buckets_) r.push_back(b.params);
  return r;
}

void Reducer::broadcast_from_rank0(const TensorList& ts) {
  std::vector<WorkPtr> ws;
  for (const Tensor& t : ts)
    if (t.defined()) ws.push_back(group_->broadcast(detach(t), 0));
  for (auto& w : ws) w->wait();
}

void Reducer::reset_step() {
  backward_started_ = false;
  std::fill(ready_.begin(), ready_.end(), false);
  std::fill(used_.begin(), used_.end(), 0);
  for (auto& b : buckets_) b.pending = b.params.size(), b.work.reset();
  next_bucket_ = 0;
}

namespace {
// The slot of parameter i in its bucket, shaped as the parameter.
Tensor slot_of(const Tensor& flat, int64_t off, const Tensor& p) { return flat.narrow(0, off, p.numel()).view(p.sizes()); }
}  // namespace

void Reducer::prepare_for_backward(const TensorList& outputs) {
  // A forward without a backward after it (evaluation under grad mode) is fine; a backward that left
  // parameters without gradients is torch's error.
  if (expect_ && backward_started_) {
    std::ostringstream o;
    o << "Expected to have finished reduction in the prior iteration before starting a new one. This error "
         "indicates that your module has parameters that were not used in producing loss. You can enable "
         "unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
         "`DistributedDataParallel`, and by making sure all `forward` function outputs participate in "
         "calculating loss. Parameter indices which did not receive grad for rank "
      << get_rank() << ":";
    for (size_t i = 0; i < ready_.size(); ++i)
      if (!ready_[i]) o << " " << i;
    expect_ = false;
    reset_step();
    KILN_FAIL(Runtime, "DistributedDataParallel", o.str());
  }
  reset_step();
  expect_ = true;
  if (!options_.find_unused_parameters) return;
  // The parameters the outputs' graph reaches; the others are ready now, with a zero contribution.
  std::unordered_map<const TensorImpl*, size_t> index;
  for (size_t i = 0; i < params_.size(); ++i) index[params_[i].impl()] = i;
  std::vector<bool> reached(params_.size());
  std::vector<Node*> stack;
  std::unordered_set<Node*> seen;
  for (const Tensor& t : outputs) {
    if (!t.defined()) continue;
    if (auto it = index.find(t.impl()); it != index.end()) reached[it->second] = true;
    if (auto fn = grad_fn(t)) stack.push_back(fn.get());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (auto* acc = dynamic_cast<AccumulateGrad*>(n)) {
      if (auto it = index.find(acc->leaf.get()); it != index.end()) reached[it->second] = true;
    }
    for (const Edge& e : n->next_edges)
      if (e.fn) stack.push_back(e.fn.get());
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (reached[i]) continue;
    Bucket& b = buckets_[bucket_of_[i]];
    size_t k = std::find(b.params.begin(), b.params.end(), i) - b.params.begin();
    zero_(b.flat.narrow(0, b.offsets[k], params_[i].numel()));
    ready_[i] = true;
    --b.pending;
  }
  launch_ready_buckets();
}

void Reducer::on_ready(size_t i) {
  if (!require_sync_ || !expect_ || ready_[i]) return;
  backward_started_ = true;
  ready_[i] = true;
  used_[i] = 1;
  Bucket& b = buckets_[bucket_of_[i]];
  size_t k = std::find(b.params.begin(), b.params.end(), i) - b.params.begin();
  const Tensor& p = params_[i];
  Tensor slot = slot_of(b.flat, b.offsets[k], p);
  Tensor g = kiln::grad(p);
  if (!g.defined()) {
    zero_(slot);
  } else if (g.data_ptr() != slot.data_ptr()) {
    copy_(slot, detach(g));
    if (options_.gradient_as_bucket_view && !kiln::requires_grad(g)) set_grad(p, slot);
  }
  if (--b.pending == 0) launch_ready_buckets();
}

void Reducer::launch_ready_buckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    Bucket& b = buckets_[next_bucket_++];
    b.work = group_->all_reduce(b.flat, ReduceOp::AVG);
  }
  if (next_bucket_ == buckets_.size() && expect_) finish();
}

void Reducer::finish() {
  expect_ = false;
  auto t0 = std::chrono::steady_clock::now();
  for (auto& b : buckets_) b.work->wait();
  std::vector<uint8_t> used_anywhere(params_.size(), 1);
  if (options_.find_unused_parameters) {
    Tensor u = empty({static_cast<int64_t>(params_.size())}, kUInt8);
    std::copy(used_.begin(), used_.end(), static_cast<uint8_t*>(u.data_ptr()));
    group_->all_reduce(u, ReduceOp::MAX)->wait();
    std::copy_n(static_cast<uint8_t*>(u.data_ptr()), params_.size(), used_anywhere.begin());
  }
  last_wait_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t j = 0; j < buckets_.size(); ++j) {
    Bucket& b = buckets_[j];
    for (size_t k = 0; k < b.params.size(); ++k) {
      size_t i = b.params[k];
      if (!used_anywhere[i]) continue;  // no rank's loss reached it: its gradient stays as it was
      const Tensor& p = params_[i];
      Tensor slot = slot_of(b.flat, b.offsets[k], p);
      Tensor g = kiln::grad(p);
      if (g.defined() && g.data_ptr() == slot.data_ptr()) continue;  // the gradient is the bucket's view
      if (options_.gradient_as_bucket_view) set_grad(p, slot);
      else if (g.defined() && !kiln::requires_grad(g)) copy_(detach(g), slot);
      else set_grad(p, slot.clone());
    }
  }
}

}  // namespace kiln::distributed
