// Automatic mixed precision (torch.autocast / torch.amp): inside an autocast region, ops run in the
// precision torch's CPU op lists give them.
//
//   - lower precision (the region's dtype, bfloat16 or float16): matrix products and convolutions
//     (mm, bmm, matmul, linear, addmm, baddbmm, addbmm, conv*, conv_transpose*, prelu,
//     scaled_dot_product_attention, RNN/LSTM layers, flex attention);
//   - float32: losses, linear algebra, products and 3-d pooling, reflection/replication padding;
//   - promote (the widest floating input): cat, stack, index_copy.
//
// Eligible arguments are floating tensors other than float64; they are cast on the way in, and the
// cast is an ordinary op, recorded by autograd. Other ops run in their inputs' dtypes. Table ops get
// their policy in dispatch(); a composite front end whose torch op is on a list (linear, the
// losses) declares it with KILN_AUTOCAST. Inside an autocast'd op and in backward, autocast is off,
// as in torch. Lower-precision casts of float32 leaf parameters are cached for the outermost region
// (cache_enabled), so a weight is cast once per forward pass.
#pragma once

#include <optional>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln::amp {

enum class CastPolicy : uint8_t {
  kLowerPrecision,  // to the region's dtype
  kFp32,            // to float32
  kPromote,         // to the widest floating argument
  kOpaque,          // no casts, and the body runs without autocast (torch ops with kernels of their own)
};

// torch.is_autocast_enabled / set_autocast_enabled / get_autocast_dtype / set_autocast_dtype, per
// device type, for the calling thread. The CPU's dtype defaults to bfloat16; it takes bfloat16 or
// float16 (ValueError-class error otherwise).
bool is_autocast_enabled(DeviceType device = DeviceType::CPU);
void set_autocast_enabled(DeviceType device, bool enabled);
Dtype get_autocast_dtype(DeviceType device = DeviceType::CPU);
void set_autocast_dtype(DeviceType device, Dtype dtype);
bool is_autocast_cache_enabled();
void set_autocast_cache_enabled(bool enabled);
// Nesting of autocast regions; leaving the outermost one clears the cast cache.
int increment_nesting();
int decrement_nesting();
void clear_cache();
// Whether autocast applies to the calling thread's ops at this moment (on for the CPU and not inside
// an autocast'd op).
bool active();

// RAII: an autocast region, torch.autocast(device, dtype, enabled, cache_enabled). On leaving, the
// previous state returns.
class Autocast {
 public:
  explicit Autocast(DeviceType device = DeviceType::CPU, std::optional<Dtype> dtype = std::nullopt,
                    bool enabled = true, std::optional<bool> cache_enabled = std::nullopt);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  DeviceType device_;
  bool prev_enabled_, prev_cache_;
  Dtype prev_dtype_;
};

// RAII: autocast off for a scope (what an autocast'd op's body and backward run under).
class Suspend {
 public:
  Suspend();
  ~Suspend();
  Suspend(const Suspend&) = delete;
  Suspend& operator=(const Suspend&) = delete;
};

// The dtype a policy casts the given tensors to (Undefined: no cast).
Dtype target_dtype(CastPolicy policy, const std::vector<const Tensor*>& tensors);
// One argument cast to `to` when eligible (floating, not float64, of another dtype); the cache is
// consulted for lower-precision casts of float32 leaves that require grad.
Tensor cast(const Tensor& t, Dtype to);

namespace detail {
inline void collect(std::vector<const Tensor*>& v, const Tensor& t) { v.push_back(&t); }
inline void collect(std::vector<const Tensor*>& v, const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) v.push_back(&t);
}
template <class T>
void collect(std::vector<const Tensor*>&, const T&) {}
inline Tensor pass(const Tensor& t, Dtype to) { return cast(t, to); }
inline std::vector<Tensor> pass(const std::vector<Tensor>& ts, Dtype to) {
  std::vector<Tensor> r;
  r.reserve(ts.size());
  for (const Tensor& t : ts) r.push_back(cast(t, to));
  return r;
}
template <class T>
const T& pass(const T& v, Dtype) {
  return v;
}
}  // namespace detail

// Runs f on the arguments cast by the policy, with autocast off: what an autocast'd composite op
// does. Non-tensor arguments pass unchanged.
template <class F, class... A>
auto autocast_call(CastPolicy policy, F&& f, const A&... args) {
  std::vector<const Tensor*> ts;
  (detail::collect(ts, args), ...);
  Dtype to = target_dtype(policy, ts);
  Suspend off;
  return f(detail::pass(args, to)...);
}

}  // namespace kiln::amp

// The first line of a composite front end whose torch op is on an autocast list:
//   Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
//     KILN_AUTOCAST(kLowerPrecision, linear, x, w, b);
#define KILN_AUTOCAST(policy, fn, ...)                                                         \
  if (::kiln::amp::active()) [[unlikely]]                                                      \
  return ::kiln::amp::autocast_call(                                                           \
      ::kiln::amp::CastPolicy::policy, [&](const auto&... kiln_a_) { return fn(kiln_a_...); }, \
      __VA_ARGS__)
