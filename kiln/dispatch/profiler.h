// An op-level profiler over the dispatch point (torch.profiler's CPU activity): while it runs on a
// thread, a dispatch mode times every top-level table op that thread dispatches (forward and the
// ops of backward), and named ranges (record_function) nest around them. Events carry steady-clock
// nanoseconds and, when asked, the input shapes. Off, it costs nothing: it is a mode on the stack.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln::profiler {

struct Event {
  std::string name;
  int64_t start_ns = 0, end_ns = 0;
  int depth = 0;                 // ranges open around it (0: top level)
  bool is_range = false;         // a record_function range rather than an op
  std::vector<Shape> shapes;     // the inputs' sizes (record_shapes)
};

// Starts collecting on the calling thread; raises when this thread already profiles.
void start(bool record_shapes = false);
// Stops and returns the events in the order they began.
std::vector<Event> stop();
bool enabled();
// A named range on the profiling thread (no-ops when it does not profile).
void range_push(const std::string& name);
void range_pop();
int64_t now_ns();

}  // namespace kiln::profiler
