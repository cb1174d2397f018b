#include "kiln/dispatch/profiler.h"

#include <chrono>
#include <memory>

#include "kiln/dispatch/op.h"

namespace kiln::profiler {
namespace {

class ProfilerMode : public DispatchMode {
 public:
  explicit ProfilerMode(bool shapes) : shapes_(shapes) {}

  TensorList handle(const OpDef& op, const TensorList& inputs, const Attrs& attrs, TensorList* out,
                    bool inplace) override {
    const size_t slot = events_.size();
    events_.push_back({op.name, now_ns(), 0, static_cast<int>(open_.size()), false, {}});
    if (shapes_)
      for (const Tensor& t : inputs) events_[slot].shapes.push_back(t.defined() ? t.sizes() : Shape{});
    TensorList r = dispatch(op, inputs, attrs, out, inplace);  // this mode is off below (op.h)
    events_[slot].end_ns = now_ns();
    return r;
  }

  void push(const std::string& name) {
    open_.push_back(events_.size());
    events_.push_back({name, now_ns(), 0, static_cast<int>(open_.size()) - 1, true, {}});
  }
  void pop() {
    if (open_.empty()) return;
    events_[open_.back()].end_ns = now_ns();
    open_.pop_back();
  }
  std::vector<Event> finish() {
    while (!open_.empty()) pop();
    return std::move(events_);
  }

 private:
  bool shapes_;
  std::vector<Event> events_;
  std::vector<size_t> open_;  // indices of the ranges still open
};

thread_local std::shared_ptr<ProfilerMode> t_mode;

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void start(bool record_shapes) {
  KILN_CHECK(!t_mode, Runtime, "profiler", "the profiler is already running on this thread");
  t_mode = std::make_shared<ProfilerMode>(record_shapes);
  push_mode(t_mode);
}

std::vector<Event> stop() {
  KILN_CHECK(t_mode != nullptr, Runtime, "profiler", "the profiler is not running on this thread");
  // the profiler's mode is the innermost one pushed after it started, unless a mode pushed later is
  // still on the stack (then that one is restored on top)
  std::vector<std::shared_ptr<DispatchMode>> above;
  while (mode_stack_size() > 0) {
    std::shared_ptr<DispatchMode> m = pop_mode();
    if (m == t_mode) break;
    above.push_back(std::move(m));
  }
  for (auto it = above.rbegin(); it != above.rend(); ++it) push_mode(*it);
  std::vector<Event> ev = t_mode->finish();
  t_mode.reset();
  return ev;
}

bool enabled() { return t_mode != nullptr; }
void range_push(const std::string& name) {
  if (t_mode) t_mode->push(name);
}
void range_pop() {
  if (t_mode) t_mode->pop();
}

}  // namespace kiln::profiler
