#include "kiln/dispatch/op.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "kiln/dispatch/schema.h"
#include "kiln/ops/ops.h"

namespace kiln {

namespace {
std::vector<OpDef*>& registry() {
  static std::vector<OpDef*> r;
  return r;
}
thread_local std::vector<std::shared_ptr<DispatchMode>> tls_modes;
AutogradLayerFn g_autograd_layer = nullptr;
bool (*g_needs_grad)(const TensorList&) = nullptr;
thread_local bool tls_inference = false;
KernelRegionHooks g_region_hooks;
thread_local const OpDef* tls_kernel = nullptr;  // the kernel this thread runs, if any
thread_local CaptureLayer* tls_capture = nullptr;

// Runs a kernel: marks the thread as inside it (nested dispatch goes straight to kernels), then shows
// it to the capture layer.
void run_kernel(KernelFn kernel, const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                TensorList& outputs) {
  const OpDef* outer = tls_kernel;
  tls_kernel = &op;
  struct Restore {
    const OpDef* o;
    ~Restore() { tls_kernel = o; }
  } restore{outer};
  kernel(op, inputs, attrs, outputs);
  if (tls_capture && !outer) [[unlikely]] tls_capture->on_kernel(op, kernel, inputs, attrs, outputs);
}

// Elements a kernel touches, from its inputs and output specs (counted until the threshold).
bool long_kernel(const OpDef& op, const TensorList& inputs, const SpecList* specs) {
  if (!g_region_hooks.begin || (op.tags & kView)) return false;
  int64_t n = 0;
  for (const Tensor& t : inputs)
    if (t.defined() && (n += t.numel()) >= kKernelRegionElems) return true;
  if (specs)
    for (const TensorSpec& s : *specs) {
      int64_t m = 1;
      for (int64_t d : s.sizes) m *= d;
      if ((n += m) >= kKernelRegionElems) return true;
    }
  return false;
}
}  // namespace

void set_kernel_region_hooks(KernelRegionHooks hooks) { g_region_hooks = hooks; }
void set_capture_layer(CaptureLayer* layer) { tls_capture = layer; }
CaptureLayer* capture_layer() { return tls_capture; }
bool in_kernel() { return tls_kernel != nullptr; }
const KernelRegionHooks& kernel_region_hooks() { return g_region_hooks; }

struct PendingDerivative {
  const char* op;
  DerivativeFn fn;
  uint32_t save_in, save_out;
};
std::vector<PendingDerivative>& pending_derivatives() {
  static std::vector<PendingDerivative> p;
  return p;
}

void register_op(OpDef* op) { registry().push_back(op); }

const Schema* op_schema(const OpDef& op) {
  if (!op.schema) return nullptr;
  if (const Schema* s = op.parsed_schema.load(std::memory_order_acquire)) return s;
  static std::mutex mu;
  std::lock_guard<std::mutex> g(mu);
  if (const Schema* s = op.parsed_schema.load(std::memory_order_relaxed)) return s;
  const Schema* s = new Schema(parse_schema(op.schema));  // lives as long as the op table
  op.parsed_schema.store(s, std::memory_order_release);
  return s;
}

namespace {
// KILN_CHECK_SCHEMA=1: every dispatch() call is checked against its op's schema; the ones that do
// not fit (or whose op has none) are printed to stderr at exit, one line per op and reason.
struct SchemaCheck {
  std::atomic<bool> on{std::getenv("KILN_CHECK_SCHEMA") != nullptr};
  std::mutex mu;
  std::set<std::string> problems;
  ~SchemaCheck() {
    for (const std::string& p : problems) std::fprintf(stderr, "kiln schema: %s\n", p.c_str());
  }
};
SchemaCheck& schema_check() {
  static SchemaCheck c;
  return c;
}
void check_call(SchemaCheck& c, const OpDef& op, const TensorList& inputs, const Attrs& attrs) {
  std::string why;
  try {
    const Schema* s = op_schema(op);
    if (s) {
      why = schema_mismatch(*s, inputs, attrs);
    } else {  // what the call looked like, to write the schema from
      why = "no schema; called with " + std::to_string(inputs.size()) + " tensors (";
      for (const Tensor& t : inputs) why += t.defined() ? "T" : "-";
      why += "), attrs (";
      for (size_t i = 0; i < attrs.size(); ++i) why += std::string(i ? ", " : "") + attr_type_name(attrs[i]);
      why += ")";
    }
  } catch (const Error& e) {
    why = e.what();
  }
  if (why.empty()) return;
  std::lock_guard<std::mutex> g(c.mu);
  c.problems.insert(std::string(op.name) + ": " + why);
}
}  // namespace

void set_schema_check(bool on) { schema_check().on = on; }
std::vector<std::string> schema_problems() {
  SchemaCheck& c = schema_check();
  std::lock_guard<std::mutex> g(c.mu);
  return std::vector<std::string>(c.problems.begin(), c.problems.end());
}

DerivativeByName::DerivativeByName(const char* op, DerivativeFn fn, uint32_t save_in, uint32_t save_out) {
  pending_derivatives().push_back({op, fn, save_in, save_out});
}

void resolve_derivatives() {
  for (const PendingDerivative& p : pending_derivatives()) {
    OpDef* op = nullptr;
    for (OpDef* o : registry())
      if (std::string_view(o->name) == p.op) op = o;
    KILN_CHECK(op, Runtime, "resolve_derivatives", "derivative for unknown op '", p.op, "'");
    op->derivative = p.fn;
    op->save_in = p.save_in;
    op->save_out = p.save_out;
  }
  pending_derivatives().clear();
}
const std::vector<OpDef*>& registered_ops() { return registry(); }
const OpDef* find_op(std::string_view name) {
  for (OpDef* op : registry())
    if (name == op->name) return op;
  return nullptr;
}

void push_mode(std::shared_ptr<DispatchMode> mode) { tls_modes.push_back(std::move(mode)); }
std::shared_ptr<DispatchMode> pop_mode() {
  KILN_CHECK(!tls_modes.empty(), Runtime, "pop_mode", "no mode to pop");
  auto m = std::move(tls_modes.back());
  tls_modes.pop_back();
  return m;
}
size_t mode_stack_size() { return tls_modes.size(); }
bool& inference_mode_tls() { return tls_inference; }

void set_autograd_layer(AutogradLayerFn fn, bool (*needs_grad)(const TensorList&)) {
  g_autograd_layer = fn;
  g_needs_grad = needs_grad;
}

static void check_out(const OpDef& op, const TensorSpec& spec, Tensor& o, bool inplace) {
  KILN_CHECK(o.defined(), Runtime, op.name, "out tensor is undefined");
  if (o.sizes() != spec.sizes) {
    KILN_CHECK(!inplace, Runtime, op.name, "output with shape ", o.sizes(),
               " doesn't match the broadcast shape ", spec.sizes);
    // out=: resize (torch warns for a non-empty out; we resize the same way)
    KILN_CHECK(o.is_contiguous() || o.numel() == 0, Runtime, op.name,
               "cannot resize a non-contiguous out tensor of shape ", o.sizes(), " to ", spec.sizes);
    Tensor fresh = make_tensor(spec.sizes, o.dtype(), o.device());
    *o.impl() = *fresh.impl();
  }
  KILN_CHECK(can_cast(spec.dtype, o.dtype()), Runtime, op.name, "result type ",
             dtype_name(spec.dtype), " can't be cast to the desired output type ", dtype_name(o.dtype()));
}

TensorList dispatch_kernel(const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                           TensorList* out, bool inplace) {
  Device dev = kCPU;
  for (const Tensor& t : inputs)
    if (t.defined()) {
      dev = t.device();
      break;
    }
  KernelFn kernel = op.kernels[static_cast<int>(dev.type)];
  KILN_CHECK(kernel != nullptr, NotImplemented, op.name, "no kernel for this device");
  TensorList result;
  if (!op.meta) {  // view / dynamic-shape ops make their own outputs
    {
      KernelRegion region(long_kernel(op, inputs, nullptr));
      run_kernel(kernel, op, inputs, attrs, result);
    }
    if (out) {
      KILN_CHECK(out->size() == result.size(), Runtime, op.name, "wrong number of out tensors");
      for (size_t i = 0; i < result.size(); ++i) {
        TensorSpec spec{result[i].sizes(), result[i].dtype()};
        check_out(op, spec, (*out)[i], inplace);
        copy_((*out)[i], result[i]);
      }
      return *out;
    }
    return result;
  }
  SpecList specs = op.meta(op, inputs, attrs);
  KernelRegion region(long_kernel(op, inputs, &specs));
  if (!out) {
    result.reserve(specs.size());
    for (const TensorSpec& s : specs) result.push_back(make_tensor(s.sizes, s.dtype, dev));
    run_kernel(kernel, op, inputs, attrs, result);
    return result;
  }
  KILN_CHECK(out->size() == specs.size(), Runtime, op.name, "expected ", specs.size(),
             " out tensors, got ", out->size());
  bool direct = true;
  for (size_t i = 0; i < specs.size(); ++i) {
    check_out(op, specs[i], (*out)[i], inplace);
    Tensor& o = (*out)[i];
    if (o.dtype() != specs[i].dtype || !o.is_contiguous()) direct = false;
  }
  if (direct) {
    run_kernel(kernel, op, inputs, attrs, *out);
  } else {
    for (const TensorSpec& s : specs) result.push_back(make_tensor(s.sizes, s.dtype, dev));
    run_kernel(kernel, op, inputs, attrs, result);
    for (size_t i = 0; i < specs.size(); ++i) copy_((*out)[i], result[i]);
  }
  for (Tensor& o : *out) o.bump_version();
  return *out;
}

TensorList dispatch(const OpDef& op, TensorList inputs, Attrs attrs, TensorList* out, bool inplace) {
  static SchemaCheck& checking = schema_check();
  if (checking.on.load(std::memory_order_relaxed)) [[unlikely]] check_call(checking, op, inputs, attrs);
  if (tls_kernel) [[unlikely]]  // a kernel's own step: beneath every layer (op.h)
    return dispatch_kernel(op, inputs, attrs, out, inplace);
  if (!tls_modes.empty()) [[unlikely]] {
    auto mode = pop_mode();
    struct Repush {
      std::shared_ptr<DispatchMode>& m;
      ~Repush() { push_mode(m); }
    } repush{mode};
    return mode->handle(op, inputs, attrs, out, inplace);
  }
  if (g_autograd_layer && (g_needs_grad(inputs) || (out && g_needs_grad(*out)))) [[unlikely]]
    return g_autograd_layer(op, inputs, attrs, out, inplace);
  TensorList r = dispatch_kernel(op, inputs, attrs, out, inplace);
  if (tls_inference && !out) [[unlikely]]
    for (Tensor& t : r)
      if (t.defined()) t.impl()->inference = true;
  return r;
}

Tensor dispatch1(const OpDef& op, TensorList inputs, Attrs attrs) {
  return std::move(dispatch(op, std::move(inputs), std::move(attrs))[0]);
}

const Tensor& dispatch_inplace(const OpDef& op, const Tensor& self, TensorList inputs, Attrs attrs) {
  TensorList out{self};
  dispatch(op, std::move(inputs), std::move(attrs), &out, true);
  return self;
}

const Tensor& dispatch_out(const OpDef& op, const Tensor& o, TensorList inputs, Attrs attrs) {
  TensorList out{o};
  dispatch(op, std::move(inputs), std::move(attrs), &out, false);
  return o;
}

}  // namespace kiln
