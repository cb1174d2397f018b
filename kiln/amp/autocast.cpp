// Autocast: the thread's state, the cast cache, and the dispatch layer that applies torch's CPU op
// lists to table ops (composite front ends apply theirs with KILN_AUTOCAST).
#include "kiln/amp/autocast.h"

#include <cstring>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "kiln/autograd/autograd.h"
#include "kiln/dispatch/op.h"

namespace kiln::amp {
namespace {

struct DeviceState {
  bool enabled = false;
  Dtype dtype;
};
struct State {
  DeviceState dev[kNumDeviceTypes] = {{false, Dtype::BFloat16}, {false, Dtype::Float16}, {false, Dtype::BFloat16}};
  bool cache_enabled = true;
  int nesting = 0;
  int suspended = 0;
  // float32 leaf -> its lower-precision cast; the source is held so that its address stays its own
  std::unordered_map<const TensorImpl*, std::pair<Tensor, Tensor>> cache;
};
thread_local State tls;

void sync() { autocast_on_tls() = tls.dev[0].enabled && tls.suspended == 0; }

int idx(DeviceType d) { return static_cast<int>(d); }

bool eligible(const Tensor& t) {
  Dtype d = t.defined() ? t.dtype() : Dtype::Undefined;
  return (d == Dtype::Float32 || d == Dtype::BFloat16 || d == Dtype::Float16) &&
         t.device().type != DeviceType::CUDA;
}

// ---- the table ops' policies ---------------------------------------------------------------------
// By op name; a few depend on the call (3-d pooling, reflection / replication padding).
enum class Rule : uint8_t { kLower, kFp32, kPromote, kPool3d, kPad };

const std::unordered_map<const OpDef*, Rule>& rules() {
  static const auto* table = [] {
    auto* m = new std::unordered_map<const OpDef*, Rule>;
    auto add = [&](std::initializer_list<const char*> names, Rule r) {
      for (const char* n : names)
        if (const OpDef* op = find_op(n)) (*m)[op] = r;
    };
    add({"bmm", "convolution", "rnn_layer", "lstm_layer", "_flex_attention"}, Rule::kLower);
    add({"binary_cross_entropy", "cross_entropy_loss", "nll_loss", "ctc_loss", "prod", "quantile",
         "nanquantile", "trace", "polar", "view_as_complex", "cholesky_inverse", "cholesky_solve",
         "linalg_cholesky_ex", "linalg_inv_ex", "linalg_solve_ex", "linalg_qr", "linalg_eig",
         "_linalg_eigh", "_linalg_svd", "_linalg_lstsq", "linalg_householder_product", "geqrf",
         "ormqr"},
        Rule::kFp32);
    add({"cat", "index_copy"}, Rule::kPromote);
    add({"max_pool", "avg_pool", "adaptive_avg_pool", "adaptive_max_pool"}, Rule::kPool3d);
    add({"pad"}, Rule::kPad);
    return m;
  }();
  return *table;
}

// The policy for one call, or nothing.
std::optional<CastPolicy> policy_of(const OpDef& op, const TensorList& in, const Attrs& attrs) {
  const auto& r = rules();
  auto it = r.find(&op);
  if (it == r.end()) return std::nullopt;
  switch (it->second) {
    case Rule::kLower: return CastPolicy::kLowerPrecision;
    case Rule::kFp32: return CastPolicy::kFp32;
    case Rule::kPromote: return CastPolicy::kPromote;
    case Rule::kPool3d:  // max_pool3d, avg_pool3d, adaptive_{avg,max}_pool3d
      if (!in.empty() && in[0].dim() == 5) return CastPolicy::kFp32;
      return std::nullopt;
    case Rule::kPad: {  // reflection_pad1d/2d, replication_pad1d/2d/3d
      const std::string& mode = std::get<std::string>(attrs[1]);
      size_t n = std::get<Shape>(attrs[0]).size() / 2;
      if ((mode == "reflect" && n <= 2) || (mode == "replicate" && n <= 3)) return CastPolicy::kFp32;
      return std::nullopt;
    }
  }
  return std::nullopt;
}

TensorList autocast_layer(const OpDef& op, const TensorList& in, const Attrs& attrs, TensorList* out,
                          bool inplace) {
  std::optional<CastPolicy> p;
  if (!out && !inplace) p = policy_of(op, in, attrs);  // torch's lists name functional forms only
  if (!p) {
    Suspend off;
    return dispatch(op, in, attrs, out, inplace);
  }
  std::vector<const Tensor*> ts;
  for (const Tensor& t : in) ts.push_back(&t);
  Dtype to = target_dtype(*p, ts);
  Suspend off;
  TensorList cast_in;
  for (const Tensor& t : in) cast_in.push_back(cast(t, to));
  return dispatch(op, cast_in, attrs);
}

struct Install {
  Install() { set_autocast_layer(autocast_layer); }
} install;

}  // namespace

bool is_autocast_enabled(DeviceType device) { return tls.dev[idx(device)].enabled; }
void set_autocast_enabled(DeviceType device, bool enabled) {
  tls.dev[idx(device)].enabled = enabled;
  sync();
}
Dtype get_autocast_dtype(DeviceType device) { return tls.dev[idx(device)].dtype; }
void set_autocast_dtype(DeviceType device, Dtype dtype) {
  KILN_CHECK(device != DeviceType::CPU || dtype == Dtype::BFloat16 || dtype == Dtype::Float16, Value,
             "set_autocast_dtype",
             "CPU autocast only supports torch.bfloat16 and torch.float16, got ", dtype_name(dtype));
  tls.dev[idx(device)].dtype = dtype;
}
bool is_autocast_cache_enabled() { return tls.cache_enabled; }
void set_autocast_cache_enabled(bool enabled) { tls.cache_enabled = enabled; }
int increment_nesting() { return ++tls.nesting; }
int decrement_nesting() { return --tls.nesting; }
void clear_cache() { tls.cache.clear(); }
bool active() { return autocast_on_tls(); }

Autocast::Autocast(DeviceType device, std::optional<Dtype> dtype, bool enabled,
                   std::optional<bool> cache_enabled)
    : device_(device),
      prev_enabled_(is_autocast_enabled(device)),
      prev_cache_(tls.cache_enabled),
      prev_dtype_(get_autocast_dtype(device)) {
  if (dtype) set_autocast_dtype(device, *dtype);
  if (cache_enabled) tls.cache_enabled = *cache_enabled;
  set_autocast_enabled(device, enabled);
  increment_nesting();
}
Autocast::~Autocast() {
  if (decrement_nesting() == 0) clear_cache();
  tls.dev[idx(device_)] = {prev_enabled_, prev_dtype_};
  tls.cache_enabled = prev_cache_;
  sync();
}

Suspend::Suspend() {
  ++tls.suspended;
  sync();
}
Suspend::~Suspend() {
  --tls.suspended;
  sync();
}

Dtype target_dtype(CastPolicy policy, const std::vector<const Tensor*>& tensors) {
  const Dtype lower = tls.dev[0].dtype;
  switch (policy) {
    case CastPolicy::kLowerPrecision: return lower;
    case CastPolicy::kFp32: return Dtype::Float32;
    case CastPolicy::kOpaque: return Dtype::Undefined;
    case CastPolicy::kPromote: {
      // torch's prioritize(): float32 anywhere gives float32; the other 16-bit type raises
      Dtype to = lower;
      for (const Tensor* t : tensors) {
        if (!eligible(*t) || t->dtype() == to) continue;
        KILN_CHECK(t->dtype() == Dtype::Float32 || to == Dtype::Float32, Runtime, "autocast",
                   "Unexpected floating ScalarType in at::autocast::prioritize");
        to = Dtype::Float32;
      }
      return to;
    }
  }
  return Dtype::Undefined;
}

Tensor cast(const Tensor& t, Dtype to) {
  if (to == Dtype::Undefined || !eligible(t) || t.dtype() == to) return t;
  bool cacheable = to == tls.dev[0].dtype && t.dtype() == Dtype::Float32 && tls.cache_enabled &&
                   t.requires_grad() && t.is_leaf() && !is_view(t) && mode_stack_size() == 0;
  if (!cacheable) return t.to(to);
  auto [it, fresh] = tls.cache.try_emplace(t.impl());
  // a nested region of another dtype recasts (torch's cache would hand back the first dtype)
  if (fresh || it->second.second.dtype() != to) it->second = {t, t.to(to)};
  return it->second.second;
}

}  // namespace kiln::amp
