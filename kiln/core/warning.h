// Warnings from kiln's C++ (torch's TORCH_WARN): one handler for the process. The default writes
// "kiln warning: ..." to stderr; the Python binding installs one that raises a Python warning
// (category UserWarning, or RuntimeWarning where the text is about the process's resources).
#pragma once

#include <string>

namespace kiln {
enum class WarningKind { User, Runtime };
using WarningHandler = void (*)(WarningKind kind, const std::string& message);
// Sets the handler (nullptr: the default) and returns the previous one.
WarningHandler set_warning_handler(WarningHandler h);
void warn(WarningKind kind, const std::string& message);
}  // namespace kiln
