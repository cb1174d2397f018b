// kiln.accelerator (torch.accelerator, with 2.15's explanation): whether an accelerator is usable,
// and when it is not, why, in words. The CUDA driver is probed with dlopen (libcuda.so.1), so a CPU
// build links nothing of CUDA and can still say what a CUDA build would find on this machine.
#pragma once

#include <string>
#include <vector>

#ifndef KILN_CUDA_RUNTIME_VERSION
#define KILN_CUDA_RUNTIME_VERSION 0  // the CUDA runtime kiln was built with (12040 = 12.4); 0: none
#endif

namespace kiln::accelerator {

// What is probed. The defaults are this build's: its CUDA runtime version, the driver library
// ($KILN_CUDA_DRIVER_LIBRARY, else libcuda.so.1), and the oldest GPU generation kiln supports.
struct Probe {
  int runtime_version = KILN_CUDA_RUNTIME_VERSION;
  std::string driver_library;  // empty: the default above
  int min_capability = 70;     // major * 10 + minor: 7.0 (Volta)
};

struct Diagnosis {
  bool available = false;
  int device_count = 0;              // usable devices
  int driver_version = 0;            // 0: no driver found
  std::vector<std::string> devices;  // every device the driver sees: "NVIDIA H200 (compute capability 9.0)"
  std::string reason;                // why none is usable, a sentence; empty when available
};

Diagnosis diagnose(const Probe& probe = {});

// torch.accelerator's module, for this build.
bool is_available();
int device_count();
// The reason no accelerator is usable, or a description of the one that is.
std::string explain();
// "12.4" for 12040.
std::string cuda_version_string(int version);

}  // namespace kiln::accelerator
