#include "kiln/dispatch/graph.h"

#include <algorithm>
#include <exception>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/core/generator.h"
#include "kiln/core/live_span.h"
#include "kiln/core/stream.h"
#include "kiln/dispatch/recorded.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace detail {

// The generator counters reserved on the capturing thread outside kernels (a kernel that reserves
// its own, as SDPA's dropout does, reserves again at each replay by itself).
struct Reservation {
  Generator* gen;
  uint64_t n, key, start;
};
thread_local std::vector<Reservation> tls_reservations;
void log_reservation(Generator* g, uint64_t n, uint64_t key, uint64_t start) {
  if (!in_kernel()) tls_reservations.push_back({g, n, key, start});
}

struct GraphPoolState {
  std::shared_ptr<Storage> arena;  // the largest arena planned into the pool so far
};

struct GraphImpl final : CaptureLayer {
  struct Random {
    Generator* gen;
    uint64_t n;
    size_t key_attr;  // attrs[key_attr] is the key, attrs[key_attr + 1] the first counter
  };
  struct Rec {
    const OpDef* op;
    KernelFn kernel;
    TensorList in;
    Attrs attrs;
    TensorList out;
    bool own_outputs;  // the kernel makes its outputs (copy_): replay copies them into the recorded ones
    std::vector<Random> random;
    std::function<void()> host;  // set: a host step (graph_host_step) instead of a kernel
  };
  std::vector<Rec> recs;
  // The user's tensors the recording reads or writes, with the storage each had at capture: a
  // replay raises if one was given other memory since (.data =, set_, resize_), as the recording
  // would keep using the old memory. Tensors that died are not followed.
  struct Origin {
    std::weak_ptr<TensorImpl> impl;
    const Storage* storage;
  };
  std::vector<Origin> origins;
  std::unordered_set<const TensorImpl*> origin_seen;
  std::shared_ptr<Storage> arena;  // the planned intermediates' memory (plan_memory)
  GraphPool pool;
  size_t arena_bytes = 0, planned = 0;
  bool capturing = false;
  bool captured = false;
  bool lenient = false;  // a broken rule fails the capture at its end, without raising on the spot
  uint64_t refused_at_begin = 0;  // stream_detail::refused_host_reads() when the capture began
  std::string failure;  // a rule broken during capture: capture_end raises it

  void on_kernel(const OpDef& op, KernelFn kernel, const TensorList& inputs, const Attrs& attrs,
                 const TensorList& outputs) override {
    // (views too: a view kernel's input is often the user's tensor, as a matmul's weight)
    for (const TensorList* ts : {&inputs, &outputs})
      for (const Tensor& t : *ts)
        if (t.defined() && t.storage() && origin_seen.insert(t.impl()).second)
          origins.push_back({t.impl_ptr(), t.storage().get()});
    if (op.tags & kView) return;
    if (op.tags & kDynamicShape) {
      if (failure.empty())
        failure = std::string("'") + op.name +
                  "' makes an output whose size depends on the data, which a replay could not follow";
      if (lenient) return;
      KILN_FAIL(Runtime, "graph capture", "'", op.name, "' cannot be captured: its output size depends on the ",
                "data (a replay would keep the captured size). Run it before or after the capture");
    }
    SnapshotMap seen;
    TensorList in = snapshot_tensors(inputs, seen);
    TensorList out = snapshot_tensors(outputs, seen);
    Rec r{&op, kernel, std::move(in), attrs, std::move(out), op.meta == nullptr, {}};
    if (op.tags & kRandom) {
      // the counters its front end reserved travel as an adjacent (key, first) pair of attributes
      for (const Reservation& res : tls_reservations)
        for (size_t i = 0; i + 1 < attrs.size(); ++i) {
          const int64_t* k = std::get_if<int64_t>(&attrs[i]);
          const int64_t* f = std::get_if<int64_t>(&attrs[i + 1]);
          if (k && f && static_cast<uint64_t>(*k) == res.key && static_cast<uint64_t>(*f) == res.start) {
            r.random.push_back({res.gen, res.n, i});
            break;
          }
        }
      tls_reservations.clear();
    }
    recs.push_back(std::move(r));
  }

  // The memory plan. An intermediate is a storage only the recording references (no user tensor, no
  // autograd node, no optimiser) whose first use is a kernel writing all of it (so no value carries
  // from one replay to the next). Each is live from its first to its last kernel; intermediates whose
  // spans do not overlap share arena memory (largest first, each at the lowest offset free over its
  // span), as eager's allocator reuses freed blocks. The snapshots are re-pointed at the arena and
  // the capture's own buffers go back to the allocator.
  void plan_memory() {
    struct Use {
      std::shared_ptr<Storage> s;
      std::unordered_set<const TensorImpl*> impls;
      size_t first = SIZE_MAX, last = 0;
      bool full_write_first = false;
    };
    std::unordered_map<const Storage*, Use> uses;
    for (size_t i = 0; i < recs.size(); ++i) {
      const Rec& r = recs[i];
      if (r.host) continue;
      auto note = [&](const Tensor& t, bool write) {
        if (!t.defined() || !t.storage() || t.storage()->nbytes() == 0) return;
        Use& u = uses[t.storage().get()];
        if (!u.s) u.s = t.storage();
        u.impls.insert(t.impl());
        if (u.first == SIZE_MAX) {
          u.first = i;
          bool in_place = false;
          for (const Tensor& x : r.in)
            if (x.defined() && x.storage() == t.storage()) in_place = true;
          u.full_write_first = write && !in_place && t.storage_offset() == 0 && t.is_contiguous() &&
                               static_cast<size_t>(t.numel()) * t.itemsize() >= t.storage()->nbytes();
        }
        u.last = i;
      };
      for (const Tensor& t : r.in) note(t, false);
      for (const Tensor& t : r.out) note(t, true);
    }
    std::vector<const Storage*> keys;
    std::vector<LiveSpan> items;
    for (auto& [key, u] : uses)
      // held: the map's copy plus one per snapshot; anything more is someone else's
      if (u.full_write_first && u.s->device().type == DeviceType::CPU &&
          u.s.use_count() == static_cast<long>(u.impls.size()) + 1) {
        items.push_back({static_cast<int64_t>((u.s->nbytes() + 63) / 64 * 64), static_cast<int64_t>(u.first),
                         static_cast<int64_t>(u.last), keys.size()});
        keys.push_back(key);
      }
    const size_t total = static_cast<size_t>(place_live_spans(items));
    if (items.empty()) return;
    // in the pool's arena when it is large enough (the graphs of a pool replay one at a time);
    // otherwise a larger one, which becomes the pool's
    GraphPoolState& ps = *pool.state();
    if (!ps.arena || ps.arena->nbytes() < total) ps.arena = std::make_shared<Storage>(total, Device{DeviceType::CPU, -1});
    arena = ps.arena;
    arena_bytes = total;
    planned = items.size();
    char* base = static_cast<char*>(arena->data());
    for (const LiveSpan& it : items) {
      Use& u = uses[keys[it.id]];
      // borrowed memory (free_fn null, ctx non-null): the arena, which the graph holds, owns it
      auto moved = std::make_shared<Storage>(base + it.offset, u.s->nbytes(), u.s->device(), nullptr, arena.get());
      for (const TensorImpl* impl : u.impls) const_cast<TensorImpl*>(impl)->storage = moved;
    }
  }

  void check_origins() const {
    for (const Origin& o : origins)
      if (std::shared_ptr<TensorImpl> p = o.impl.lock(); p && p->storage.get() != o.storage)
        KILN_FAIL(Runtime, "replay", "a tensor the graph reads or writes (shape ", p->sizes,
                  ") was given other memory after the capture (.data =, set_(), resize_()): the recording "
                  "still uses the old memory. Put new values into captured tensors with copy_() or another "
                  "in-place op, or capture again");
  }

  void replay() {
    check_origins();
    for (Rec& r : recs) {
      if (r.host) {
        r.host();
        continue;
      }
      for (const Random& rnd : r.random) {  // fresh counters, as the eager op would reserve now
        auto [key, start] = rnd.gen->reserve(rnd.n);
        r.attrs[rnd.key_attr] = static_cast<int64_t>(key);
        r.attrs[rnd.key_attr + 1] = static_cast<int64_t>(start);
      }
      if (!r.own_outputs) {
        run_kept_kernel(r.kernel, *r.op, r.in, r.attrs, r.out);
      } else {
        TensorList fresh;
        run_kept_kernel(r.kernel, *r.op, r.in, r.attrs, fresh);
        for (size_t i = 0; i < fresh.size() && i < r.out.size(); ++i)
          if (fresh[i].defined() && r.out[i].defined() && fresh[i].storage() != r.out[i].storage())
            copy_(r.out[i], fresh[i]);
      }
      for (Tensor& o : r.out)
        if (o.defined()) o.bump_version();
    }
  }
};

}  // namespace detail

Graph::Graph() : impl_(std::make_unique<detail::GraphImpl>()) {}
Graph::~Graph() {
  if (impl_ && impl_->capturing && capture_layer() == impl_.get()) {
    set_capture_layer(nullptr);
    stream_detail::forbid_host_reads(nullptr);
    kiln::detail::reserve_hook = nullptr;
  }
}
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;

GraphPool GraphPool::create() {
  GraphPool p;
  p.s_ = std::make_shared<detail::GraphPoolState>();
  return p;
}

GraphPool Graph::pool() const { return impl_->pool; }

void Graph::capture_begin(const GraphPool& pool, bool lenient) {
  KILN_CHECK(!impl_->capturing, Runtime, "capture_begin", "this graph is already capturing");
  KILN_CHECK(!impl_->captured, Runtime, "capture_begin",
             "this graph holds a capture already: call reset() before capturing again");
  KILN_CHECK(!capture_layer(), Runtime, "capture_begin",
             "another capture is active on this thread (graphs do not nest)");
  impl_->recs.clear();
  impl_->origins.clear();
  impl_->origin_seen.clear();
  impl_->failure.clear();
  impl_->pool = pool.defined() ? pool : GraphPool::create();
  impl_->capturing = true;
  impl_->lenient = lenient;
  impl_->refused_at_begin = stream_detail::refused_host_reads();
  set_capture_layer(impl_.get());
  stream_detail::forbid_host_reads("a graph", lenient);
  detail::tls_reservations.clear();
  kiln::detail::reserve_hook = &detail::log_reservation;
}

void Graph::capture_end() {
  KILN_CHECK(impl_->capturing, Runtime, "capture_end", "capture_end() without capture_begin()");
  KILN_CHECK(capture_layer() == impl_.get(), Runtime, "capture_end",
             "capture_end() must be called on the thread that called capture_begin()");
  set_capture_layer(nullptr);
  stream_detail::forbid_host_reads(nullptr);
  kiln::detail::reserve_hook = nullptr;
  impl_->capturing = false;
  if (impl_->failure.empty() && stream_detail::refused_host_reads() != impl_->refused_at_begin)
    impl_->failure = impl_->lenient
                         ? "it reads tensor data on the host (item(), tolist(), numpy(), printing, a "
                           "data-dependent branch): a replay would repeat the value read at capture"
                         : "a host read of tensor data was refused during it (caught, but the recording would "
                           "replay a value made without it)";
  if (!impl_->failure.empty()) {
    std::string why = impl_->failure;
    reset();
    KILN_FAIL(Runtime, "capture_end", "the capture failed and was discarded: ", why);
  }
  impl_->captured = true;
  impl_->plan_memory();
  impl_->origin_seen.clear();
  // the memory each tensor has now is the one the recording ends with (an out= tensor resized by
  // a later op in the capture moved during it)
  std::erase_if(impl_->origins, [](detail::GraphImpl::Origin& o) {
    std::shared_ptr<TensorImpl> p = o.impl.lock();
    if (p) o.storage = p->storage.get();
    return !p;
  });
}

void Graph::replay() {
  KILN_CHECK(!impl_->capturing, Runtime, "replay", "replay() during capture: call capture_end() first");
  KILN_CHECK(impl_->captured, Runtime, "replay", "replay() before a capture: nothing was recorded");
  stream_detail::before_host_read();  // work queued on streams before the replay comes first
  impl_->replay();
}

void Graph::reset() {
  KILN_CHECK(!impl_->capturing, Runtime, "reset", "reset() during capture: call capture_end() first");
  impl_->recs.clear();
  impl_->recs.shrink_to_fit();
  impl_->origins.clear();
  impl_->origin_seen.clear();
  impl_->arena.reset();
  impl_->arena_bytes = impl_->planned = 0;
  impl_->failure.clear();
  impl_->captured = false;
}

bool Graph::capturing() const { return impl_->capturing; }

bool graph_capturing() { return dynamic_cast<detail::GraphImpl*>(capture_layer()) != nullptr; }

void graph_host_step(const std::function<void()>& fn) {
  auto* g = dynamic_cast<detail::GraphImpl*>(capture_layer());
  if (!g) {
    fn();
    return;
  }
  // run it now as eager code would: no capture layer, host reads allowed, reservations not logged
  set_capture_layer(nullptr);
  stream_detail::forbid_host_reads(nullptr);
  kiln::detail::reserve_hook = nullptr;
  struct Restore {
    detail::GraphImpl* g;
    ~Restore() {
      set_capture_layer(g);
      stream_detail::forbid_host_reads("a graph", g->lenient);
      kiln::detail::reserve_hook = &detail::log_reservation;
    }
  } restore{g};
  fn();
  detail::GraphImpl::Rec r{};
  r.host = fn;
  g->recs.push_back(std::move(r));
}
size_t Graph::num_kernels() const { return impl_->recs.size(); }
size_t Graph::arena_bytes() const { return impl_->arena_bytes; }
size_t Graph::planned_buffers() const { return impl_->planned; }
bool Graph::reads(const Tensor& t) const {
  if (!t.defined() || !t.storage()) return false;
  const void* d = t.storage()->data();
  for (const auto& r : impl_->recs)
    for (const Tensor& x : r.in)
      if (x.defined() && x.storage() && x.storage()->data() == d) return true;
  return false;
}

GraphCapture::GraphCapture(Graph& g, const GraphPool& pool) : g_(g), uncaught_(std::uncaught_exceptions()) {
  g_.capture_begin(pool);
}
GraphCapture::~GraphCapture() noexcept(false) {
  if (std::uncaught_exceptions() > uncaught_) {
    // unwinding: detach and discard without raising again
    try {
      g_.capture_end();
    } catch (...) {
    }
    g_.reset();
    return;
  }
  g_.capture_end();  // may raise (a broken rule): C++ lets it propagate from this destructor
}

}  // namespace kiln
