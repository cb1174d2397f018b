#include "kiln/core/warning.h"

#include <atomic>
#include <cstdio>

namespace kiln {
namespace {
void default_handler(WarningKind, const std::string& message) {
  std::fprintf(stderr, "kiln warning: %s\n", message.c_str());
}
std::atomic<WarningHandler> g_handler{&default_handler};
}  // namespace

WarningHandler set_warning_handler(WarningHandler h) {
  return g_handler.exchange(h ? h : &default_handler);
}

void warn(WarningKind kind, const std::string& message) { g_handler.load()(kind, message); }
}  // namespace kiln
