#include "kiln/core/accelerator.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

namespace kiln::accelerator {
namespace {
// The CUDA driver API entry points the probe uses (cuda.h's signatures; CUresult and CUdevice are ints).
using InitFn = int (*)(unsigned);
using IntOutFn = int (*)(int*);
using DeviceGetFn = int (*)(int*, int);
using NameFn = int (*)(char*, int, int);
using AttrFn = int (*)(int*, int, int);
using ErrorNameFn = int (*)(int, const char**);
constexpr int kNoDevice = 100;                 // CUDA_ERROR_NO_DEVICE
constexpr int kCapabilityMajor = 75, kCapabilityMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_*

struct Library {
  void* h = nullptr;
  explicit Library(const std::string& name) : h(dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (h) dlclose(h);
  }
  template <class F>
  F sym(const char* name) const {
    return reinterpret_cast<F>(dlsym(h, name));
  }
};

// CUDA_VISIBLE_DEVICES hides every GPU when it is set and lists nothing usable: empty, or starting
// with an invalid entry such as -1 (the driver stops at the first invalid entry).
bool visible_devices_hide_all(std::string* value) {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!v) return false;
  *value = v;
  std::string first(v, 0, std::string(v).find(','));
  while (!first.empty() && first.front() == ' ') first.erase(first.begin());
  if (first.empty()) return true;
  if (first.rfind("GPU-", 0) == 0 || first.rfind("MIG-", 0) == 0) return false;
  char* end = nullptr;
  const long n = std::strtol(first.c_str(), &end, 10);
  return end == first.c_str() || n < 0;
}
}  // namespace

std::string cuda_version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

Diagnosis diagnose(const Probe& probe) {
  Diagnosis d;
  std::string lib_name = probe.driver_library;
  if (lib_name.empty()) {
    const char* env = std::getenv("KILN_CUDA_DRIVER_LIBRARY");
    lib_name = env && *env ? env : "libcuda.so.1";
  }
  const bool built = probe.runtime_version > 0;
  const std::string unbuilt = "kiln was built without CUDA (a CPU-only build)";

  Library lib(lib_name);
  if (!lib.h) {
    const char* err = dlerror();
    d.reason = built ? "the CUDA driver is missing: " + lib_name + " could not be loaded (" +
                           (err ? err : "not found") + "); install the NVIDIA driver"
                     : unbuilt;
    return d;
  }
  const auto init = lib.sym<InitFn>("cuInit");
  const auto get_version = lib.sym<IntOutFn>("cuDriverGetVersion");
  const auto get_count = lib.sym<IntOutFn>("cuDeviceGetCount");
  const auto get_device = lib.sym<DeviceGetFn>("cuDeviceGet");
  const auto get_name = lib.sym<NameFn>("cuDeviceGetName");
  const auto get_attr = lib.sym<AttrFn>("cuDeviceGetAttribute");
  const auto error_name = lib.sym<ErrorNameFn>("cuGetErrorName");
  if (!init || !get_version || !get_count || !get_device || !get_name || !get_attr) {
    d.reason = built ? lib_name + " is not a usable CUDA driver (it lacks the driver API's entry points)" : unbuilt;
    return d;
  }
  if (get_version(&d.driver_version) != 0) d.driver_version = 0;
  const std::string driver = "CUDA driver " + cuda_version_string(d.driver_version);
  if (built && d.driver_version < probe.runtime_version) {
    d.reason = "the CUDA driver is too old: it supports CUDA up to " + cuda_version_string(d.driver_version) +
               ", and kiln was built with the CUDA " + cuda_version_string(probe.runtime_version) +
               " runtime; install a driver for CUDA " + cuda_version_string(probe.runtime_version) + " or newer";
    return d;
  }
  int count = 0;
  const int rc = init(0);
  if (rc == 0 && get_count(&count) != 0) count = 0;
  std::string visible;
  if (rc == kNoDevice || (rc == 0 && count == 0)) {
    if (visible_devices_hide_all(&visible))
      d.reason = "no GPU is visible: CUDA_VISIBLE_DEVICES='" + visible + "' hides every device from the " + driver;
    else
      d.reason = "the " + driver + " is installed but finds no GPU";
    if (!built) d.reason = unbuilt + "; and " + d.reason;
    return d;
  }
  if (rc != 0) {
    const char* name = nullptr;
    if (error_name) error_name(rc, &name);
    d.reason = "the " + driver + " failed to start: cuInit returned " + std::to_string(rc) +
               (name ? std::string(" (") + name + ")" : std::string());
    if (!built) d.reason = unbuilt + "; and " + d.reason;
    return d;
  }
  std::string too_old;
  for (int i = 0; i < count; ++i) {
    int dev = 0, major = 0, minor = 0;
    char name[256] = {0};
    if (get_device(&dev, i) != 0) continue;
    get_name(name, sizeof(name) - 1, dev);
    get_attr(&major, kCapabilityMajor, dev);
    get_attr(&minor, kCapabilityMinor, dev);
    const std::string cc = std::to_string(major) + "." + std::to_string(minor);
    d.devices.push_back(std::string(name) + " (compute capability " + cc + ")");
    if (major * 10 + minor >= probe.min_capability) {
      ++d.device_count;
    } else if (too_old.empty()) {
      too_old = "GPU " + std::to_string(i) + " (" + name + ") has compute capability " + cc;
    }
  }
  const std::string min_cc = std::to_string(probe.min_capability / 10) + "." + std::to_string(probe.min_capability % 10);
  if (!built) {
    d.device_count = 0;
    std::string list;
    for (size_t i = 0; i < d.devices.size(); ++i) list += (i ? ", " : "") + d.devices[i];
    d.reason = unbuilt + "; this machine has the " + driver + " and " + std::to_string(count) +
               (count == 1 ? " GPU" : " GPUs") + (list.empty() ? "" : " (" + list + ")") +
               ", which a CUDA build of kiln would use";
    return d;
  }
  if (d.device_count == 0) {
    d.reason = too_old + ", below the minimum " + min_cc + " that kiln's CUDA kernels are built for";
    return d;
  }
  d.available = true;
  return d;
}

// A CPU build answers without probing: only its explanation looks at the driver.
bool is_available() { return KILN_CUDA_RUNTIME_VERSION > 0 && diagnose().available; }
int device_count() { return KILN_CUDA_RUNTIME_VERSION > 0 ? diagnose().device_count : 0; }

std::string explain() {
  const Diagnosis d = diagnose();
  if (!d.available) return d.reason;
  std::string s = "CUDA is available: " + std::to_string(d.device_count) + " usable device(s), CUDA driver " +
                  cuda_version_string(d.driver_version) + ": ";
  for (size_t i = 0; i < d.devices.size(); ++i) s += (i ? ", " : "") + d.devices[i];
  return s;
}

}  // namespace kiln::accelerator
