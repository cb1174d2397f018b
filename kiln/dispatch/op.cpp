#include "kiln/dispatch/op.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "kiln/core/allocator.h"
#include "kiln/core/stream.h"
#include "kiln/core/visit.h"
#include "kiln/dispatch/recorded.h"
#include "kiln/dispatch/schema.h"
#include "kiln/ops/ops.h"

namespace kiln {

TensorSpec TensorSpec::of(const Tensor& t) {
  if (!t.defined()) return TensorSpec();
  TensorSpec s;
  s.fill(t);
  return s;
}
void TensorSpec::fill(const Tensor& t) {
  const TensorImpl& i = *t.impl();
  if (i.sym) [[unlikely]]
    sizes_ = i.sym->sizes;
  else
    sizes_.assign_bits(i.sizes.data(), i.sizes.size());
  dtype_ = i.dtype;
  device_ = i.storage->device();
  wrapped_ = i.wrapped_number;
}
SymInt TensorSpec::size(int64_t d) const { return dim() == 0 ? SymInt(1) : sizes_[wrap_dim(d, dim(), "size")]; }
SymInt unbacked_size(const char* op, int64_t min, int64_t max) {
  ShapeEnv* env = active_shape_env();
  KILN_CHECK(env != nullptr, NotImplemented, op,
             "the shape of its output depends on the input's data, which meta tensors do not have (in a "
             "trace, under a ShapeEnv, it is a data-dependent size symbol)");
  return env->create_unbacked(min, max);
}

SpecList specs_of(const TensorList& ts) {
  SpecList s;
  s.reserve(ts.size());
  for (const Tensor& t : ts) {
    TensorSpec& e = s.emplace_back();
    if (t.defined()) e.fill(t);
  }
  return s;
}
Shape TensorSpec::concrete_sizes(const char* op) const {
  Shape s(sizes_.size());
  for (size_t i = 0; i < s.size(); ++i) s[i] = sizes_[i].is_symbolic() ? sizes_[i].guard_int(std::string(op)) : sizes_[i].raw();
  return s;
}

namespace {
std::vector<OpDef*>& registry() {
  static std::vector<OpDef*> r;
  return r;
}
AutogradLayerFn g_autograd_layer = nullptr;
bool (*g_needs_grad)(const TensorList&) = nullptr;
AutocastLayerFn g_autocast_layer = nullptr;
KernelRegionHooks g_region_hooks;
// What every call reads of its thread, in one trivially constructed block: a function finds it with one
// TLS address computation. (libkiln is dlopen'ed from Python, where its thread-locals live in dynamic TLS
// and each distinct one costs a TLS-descriptor call: five of them in dispatch() were ~3 % of a Python add.)
struct DispatchTls {
  const OpDef* kernel = nullptr;   // the kernel this thread runs, if any
  CaptureLayer* capture = nullptr;
  size_t n_modes = 0;              // tls_modes.size(), read without the vector
  bool inference = false;
  bool autocast = false;           // kiln/amp keeps it
  detail::StreamQueue* stream = nullptr;  // the current stream (kiln/core/stream.h); null: the default
};
thread_local DispatchTls tls;
// tls's address, computed once per call: the empty asm hides where it came from, so the compiler keeps it
// in a register across calls instead of recomputing it (a TLS-descriptor call each time) after every call.
inline DispatchTls& this_thread_tls() {
  DispatchTls* p = &tls;
  asm("" : "+r"(p));
  return *p;
}
thread_local std::vector<std::shared_ptr<DispatchMode>> tls_modes;  // read only when tls.n_modes > 0

// Marks the thread as inside op's kernel for a scope (nested dispatch goes straight to kernels).
struct KernelMark {
  DispatchTls& t;
  const OpDef* outer;
  explicit KernelMark(const OpDef& op) : t(this_thread_tls()), outer(t.kernel) { t.kernel = &op; }
  ~KernelMark() { t.kernel = outer; }
};

// Runs a kernel inside its mark, then shows it to the capture layer.
void run_kernel(KernelFn kernel, const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                TensorList& outputs) {
  KernelMark mark(op);
  kernel(op, inputs, attrs, outputs);
  if (mark.t.capture && !mark.outer) [[unlikely]] mark.t.capture->on_kernel(op, kernel, inputs, attrs, outputs);
}

// A kernel issued on a non-default stream is queued with snapshots of its tensors (recorded.h): the
// caller may change a tensor object before the kernel runs (an out= resized by a later call,
// `.data =`, resize_); the kernel still reads and writes the memory it was issued on, and holds it.
void queue_kernel(detail::StreamQueue* q, KernelFn kernel, const OpDef& op, const TensorList& inputs,
                  const Attrs& attrs, const TensorList& outputs) {
  SnapshotMap seen;
  TensorList in = snapshot_tensors(inputs, seen);
  TensorList out = snapshot_tensors(outputs, seen);
  stream_detail::enqueue_on(q, [kernel, &op, ins = std::move(in), attrs, outs = std::move(out)]() mutable {
    stream_detail::InteropSlot slot;
    run_kernel(kernel, op, ins, attrs, outs);
  });
}

// Elements a kernel touches, from its inputs and output specs (counted until the threshold).
bool long_kernel(const OpDef& op, const TensorList& inputs, const SpecList* specs) {
  if (!g_region_hooks.begin || (op.tags & kView)) return false;
  int64_t n = 0;
  for (const Tensor& t : inputs)
    if (t.defined() && (n += t.numel()) >= kKernelRegionElems) return true;
  if (specs)
    for (const TensorSpec& s : *specs) {
      double m = 1;  // (an empty output's other sizes may be huge: counted in double, no overflow)
      for (SymInt d : s.sizes()) m *= d.is_symbolic() ? 1.0 : static_cast<double>(d.raw());
      if (static_cast<double>(n) + m >= static_cast<double>(kKernelRegionElems)) return true;
      n += static_cast<int64_t>(m);
    }
  return false;
}
}  // namespace

void set_kernel_region_hooks(KernelRegionHooks hooks) { g_region_hooks = hooks; }
void set_capture_layer(CaptureLayer* layer) { tls.capture = layer; }
CaptureLayer* capture_layer() { return tls.capture; }
bool in_kernel() { return tls.kernel != nullptr; }
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

namespace {
struct PendingKernel {
  const char* op;
  DeviceType device;
  KernelFn fn;
  DtypeSupportFn supports;
};
std::vector<PendingKernel>& pending_kernels() {
  static std::vector<PendingKernel> p;
  return p;
}
void install(OpDef& op, DeviceType device, KernelFn fn, DtypeSupportFn supports) {
  KernelFn& slot = op.kernels[static_cast<int>(device)];
  KILN_CHECK(slot == nullptr || slot == fn, Runtime, "register_kernel", "two ", device_type_name(device),
             " kernels for op '", op.name, "'");
  slot = fn;
  if (supports) op.supports[static_cast<int>(device)] = supports;
}
}  // namespace

void register_op(OpDef* op) {
  registry().push_back(op);
  auto& pending = pending_kernels();
  for (size_t i = 0; i < pending.size();)
    if (std::string_view(pending[i].op) == op->name) {
      install(*op, pending[i].device, pending[i].fn, pending[i].supports);
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
}

void register_kernel(const char* op, DeviceType device, KernelFn fn, DtypeSupportFn supports) {
  for (OpDef* o : registry())
    if (std::string_view(o->name) == op) return install(*o, device, fn, supports);
  pending_kernels().push_back({op, device, fn, supports});
}

bool dtype_supported(const OpDef& op, Device device, Dtype d) {
  // the meta device answers as the CPU backend does: a meta run raises where a real one would
  const DeviceType t = device.type == DeviceType::Meta ? DeviceType::CPU : device.type;
  const DtypeSupportFn fn = op.supports[static_cast<int>(t)];
  return !fn || fn(op, d);
}

void check_dtype_supported(const OpDef& op, Device device, Dtype d) {
  if (!dtype_supported(op, device, d)) [[unlikely]] raise_dtype_unsupported(op.name, d);
}

std::vector<std::string> unresolved_kernels() {
  std::vector<std::string> r;
  for (const PendingKernel& k : pending_kernels()) r.emplace_back(k.op);
  return r;
}

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
// A suite-wide check of every call (the schema check, the meta check): on from the environment or
// by a setter, the problems it found kept once each (at most 200) and printed to stderr at exit.
struct CallCheck {
  const char* label;
  std::atomic<bool> on;
  std::mutex mu;
  std::set<std::string> problems;
  CallCheck(const char* l, const char* env) : label(l), on(std::getenv(env) != nullptr) {}
  ~CallCheck() {
    for (const std::string& p : problems) std::fprintf(stderr, "kiln %s: %s\n", label, p.c_str());
  }
  void add(std::string problem) {
    std::lock_guard<std::mutex> g(mu);
    if (problems.size() < 200) problems.insert(std::move(problem));
  }
  std::vector<std::string> list() {
    std::lock_guard<std::mutex> g(mu);
    return std::vector<std::string>(problems.begin(), problems.end());
  }
};
using SchemaCheck = CallCheck;
using MetaCheck = CallCheck;
// KILN_CHECK_SCHEMA=1: every dispatch() call is checked against its op's schema.
SchemaCheck& schema_check() {
  static SchemaCheck c{"schema", "KILN_CHECK_SCHEMA"};
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
  if (!why.empty()) c.add(std::string(op.name) + ": " + why);
}
}  // namespace

void set_schema_check(bool on) { schema_check().on = on; }
std::vector<std::string> schema_problems() { return schema_check().list(); }

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

void push_mode(std::shared_ptr<DispatchMode> mode) {
  tls_modes.push_back(std::move(mode));
  tls.n_modes = tls_modes.size();
}
std::shared_ptr<DispatchMode> pop_mode() {
  KILN_CHECK(!tls_modes.empty(), Runtime, "pop_mode", "no mode to pop");
  auto m = std::move(tls_modes.back());
  tls_modes.pop_back();
  tls.n_modes = tls_modes.size();
  return m;
}
size_t mode_stack_size() { return tls_modes.size(); }
bool& inference_mode_tls() { return tls.inference; }
void set_autocast_layer(AutocastLayerFn fn) { g_autocast_layer = fn; }
bool& autocast_on_tls() { return tls.autocast; }

void set_autograd_layer(AutogradLayerFn fn, bool (*needs_grad)(const TensorList&)) {
  g_autograd_layer = fn;
  g_needs_grad = needs_grad;
}

static bool same_sizes(const Tensor& o, const SymShape& s) {
  const size_t n = s.size();
  if (o.impl()->sym) [[unlikely]] {
    const SymShape& os = o.impl()->sym->sizes;
    if (os.size() != n) return false;
    for (size_t i = 0; i < n; ++i)
      if (!bool(os[i] == s[i])) return false;
    return true;
  }
  const Shape& os = o.sizes();
  if (os.size() != n) return false;
  for (size_t i = 0; i < n; ++i)
    if (s[i].is_symbolic() ? !bool(s[i] == os[i]) : s[i].raw() != os[i]) return false;
  return true;
}

static void check_out(const OpDef& op, const TensorSpec& spec, Tensor& o, bool inplace) {
  KILN_CHECK(o.defined(), Runtime, op.name, "out tensor is undefined");
  const bool resize = !same_sizes(o, spec.sizes());
  if (resize)
    KILN_CHECK(!inplace, Runtime, op.name, "output with shape ", o.sym_sizes(),
               " doesn't match the broadcast shape ", spec.sizes());
  // the dtype before any resize: a refused out= is left as it was (torch's order)
  if (op.tags & kOutExactDtype)
    KILN_CHECK(o.dtype() == spec.dtype(), Runtime, op.name, "Expected out tensor to have dtype ",
               dtype_name(spec.dtype()), ", but got ", dtype_name(o.dtype()), " instead");
  KILN_CHECK(can_cast(spec.dtype(), o.dtype()), Runtime, op.name, "result type ",
             dtype_name(spec.dtype()), " can't be cast to the desired output type ", dtype_name(o.dtype()));
  if (resize) {  // out=: resize (torch warns for a non-empty out; we resize the same way)
    KILN_CHECK(o.is_contiguous() || o.numel() == 0, Runtime, op.name,
               "cannot resize a non-contiguous out tensor of shape ", o.sizes(), " to ", spec.sizes());
    Tensor fresh = make_tensor(spec.sizes(), o.dtype(), o.device());
    *o.impl() = *fresh.impl();
  }
}

namespace {
[[noreturn]] void device_mismatch(const OpDef& op, DeviceType a, DeviceType b) {
  KILN_CHECK(false, Runtime, op.name, "Expected all tensors to be on the same device, but found at least two devices, ",
             device_type_name(a), " and ", device_type_name(b), "!");
  __builtin_unreachable();
}

// The device a call runs on (see dispatch_kernel in op.h).
Device call_device(const OpDef& op, const TensorList& inputs, const Attrs& attrs, const TensorList* out) {
  if (op.tags & kCrossDevice) [[unlikely]]  // the destination's: the out tensor, or copy_'s self
    return out && !out->empty() ? (*out)[0].device() : inputs[0].device();
  const Tensor* first = nullptr;
  bool scalars_only = true;
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    if (!first) first = &t;
    const DeviceType ty = t.impl()->storage->device().type;
    const bool cpu_scalar = ty == DeviceType::CPU && t.dim() == 0;
    if (scalars_only && !cpu_scalar) {
      first = &t, scalars_only = false;
    } else if (!cpu_scalar && ty != first->device().type) [[unlikely]] {
      device_mismatch(op, first->device().type, ty);
    }
  }
  if (first && !scalars_only) return first->device();
  if (out && !out->empty() && (*out)[0].defined()) return (*out)[0].device();
  if (first) return first->device();
  if (op.tags & kCreation)
    for (const Attr& a : attrs)
      if (const Device* d = std::get_if<Device>(&a)) return *d;
  return kCPU;
}

// What dispatch_kernel does on the meta device: meta only, outputs without data.
TensorList meta_device_call(const OpDef& op, const TensorList& inputs, const Attrs& attrs, TensorList* out,
                            bool inplace) {
  if (out)
    for (const Tensor& o : *out)
      if (o.defined() && !o.is_meta()) device_mismatch(op, DeviceType::Meta, o.device().type);
  ShapeEnv::Where where(op.name);  // a guard recorded by the meta names the op
  KernelFn own = op.kernels[static_cast<int>(DeviceType::Meta)];
  if (own || (op.tags & kView)) {  // an op's own meta kernel (copy_); a view is sizes, strides and an
    TensorList result;             // offset over the same (empty) storage, made by its CPU kernel
    run_kernel(own ? own : op.kernels[static_cast<int>(DeviceType::CPU)], op, inputs, attrs, result);
    return result;
  }
  KILN_CHECK(op.meta != nullptr, NotImplemented, op.name,
             "the shape of its output depends on the input's data, which meta tensors do not have");
  SpecList specs = op.meta(op, specs_of(inputs), attrs);
  if (!out) {
    TensorList result;
    for (const TensorSpec& s : specs) result.push_back(make_tensor(s.sizes(), s.dtype(), kMeta));
    return result;
  }
  KILN_CHECK(out->size() == specs.size(), Runtime, op.name, "expected ", specs.size(), " out tensors, got ",
             out->size());
  for (size_t i = 0; i < specs.size(); ++i) check_out(op, specs[i], (*out)[i], inplace);
  for (Tensor& o : *out) o.bump_version();
  return *out;
}
}  // namespace

Tensor meta_twin(const Tensor& t) {
  if (!t.defined()) return t;
  auto impl = std::make_shared<TensorImpl>(*t.impl());
  impl->autograd = nullptr;
  impl->storage = std::make_shared<Storage>(t.storage()->nbytes(), kMeta);
  return Tensor(std::move(impl));
}

namespace {
// KILN_CHECK_META=1 (or set_meta_check): every top-level CPU call is run again on meta twins of its
// inputs (same sizes, strides, offset, dtype; no data), and the meta results' sizes and dtypes (a
// view's strides and offset too) are compared with what the kernel produced.
MetaCheck& meta_check() {
  static MetaCheck c{"meta", "KILN_CHECK_META"};
  return c;
}
std::string spec_str(const Tensor& t) {
  std::ostringstream os;
  detail::stream_one(os, t.sizes());
  os << " " << dtype_name(t.dtype());
  return os.str();
}
void compare_with_meta(MetaCheck& c, const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                       const TensorList* out, bool inplace, const TensorList& real) {
  if (op.tags & kDynamicShape) return;  // its meta names the data's size only in a trace
  std::string why;
  try {
    TensorList twins;
    for (const Tensor& t : inputs) twins.push_back(meta_twin(t));
    const bool to_out = out && !(op.tags & kCrossDevice);
    TensorList out_twins;
    if (to_out)
      for (const Tensor& t : *out) out_twins.push_back(meta_twin(t));
    TensorList got = meta_device_call(op, twins, attrs, to_out ? &out_twins : nullptr, inplace);
    if (got.size() != real.size()) {
      why = "meta gives " + std::to_string(got.size()) + " outputs, the kernel " + std::to_string(real.size());
    } else {
      for (size_t i = 0; i < got.size() && why.empty(); ++i) {
        if (got[i].defined() != real[i].defined()) {
          why = "output " + std::to_string(i) + ": defined in one of meta and the kernel only";
        } else if (got[i].defined() && (got[i].sizes() != real[i].sizes() || got[i].dtype() != real[i].dtype())) {
          why = "output " + std::to_string(i) + ": meta " + spec_str(got[i]) + ", kernel " + spec_str(real[i]);
        } else if (got[i].defined() && (op.tags & kView) &&
                   (got[i].strides() != real[i].strides() || got[i].storage_offset() != real[i].storage_offset())) {
          why = "output " + std::to_string(i) + ": the view's strides or offset differ on meta";
        }
      }
    }
  } catch (const Error& e) {
    why = std::string("meta raised: ") + e.what();
  }
  if (why.empty()) return;
  std::ostringstream call;
  call << op.name << "(";
  for (size_t i = 0; i < inputs.size(); ++i)
    call << (i ? ", " : "") << (inputs[i].defined() ? spec_str(inputs[i]) : std::string("None"));
  call << "): " << why;
  c.add(call.str());
}
}  // namespace

void set_meta_check(bool on) { meta_check().on = on; }
std::vector<std::string> meta_problems() { return meta_check().list(); }

static TensorList dispatch_kernel_on(const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                                     TensorList* out, bool inplace, Device dev);

TensorList dispatch_kernel(const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                           TensorList* out, bool inplace) {
  const Device dev = call_device(op, inputs, attrs, out);
  static MetaCheck& checking = meta_check();
  if (checking.on.load(std::memory_order_relaxed) && dev.type == DeviceType::CPU && !tls.kernel) [[unlikely]] {
    // the meta run sees the inputs as they were (an in-place kernel may resize nothing, but out= may)
    TensorList before;
    for (const Tensor& t : inputs) before.push_back(meta_twin(t));
    TensorList before_out;
    if (out)
      for (const Tensor& t : *out) before_out.push_back(meta_twin(t));
    TensorList r = dispatch_kernel_on(op, inputs, attrs, out, inplace, dev);
    compare_with_meta(checking, op, before, attrs, out ? &before_out : nullptr, inplace, r);
    return r;
  }
  return dispatch_kernel_on(op, inputs, attrs, out, inplace, dev);
}

void check_no_internal_overlap(const char* op, const Tensor& t) {
  if (t.numel() == 0) return;  // (numpy gives an empty array zero strides: nothing is written)
  for (int64_t d = 0; d < t.dim(); ++d)
    KILN_CHECK(!(t.sizes()[d] > 1 && t.strides()[d] == 0), Runtime, op,
               "unsupported operation: more than one element of the written-to tensor refers to a single "
               "memory location. Please clone() the tensor before performing the operation.");
}

// Whether t's elements fill a block of memory without gaps or repeats in some order of its
// dimensions (torch's is_non_overlapping_and_dense: contiguous, transposed, permuted).
static bool non_overlapping_and_dense(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of the dimensions longer than 1
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.sizes()[d] != 1) dims.push_back({t.strides()[d], t.sizes()[d]});
  std::sort(dims.begin(), dims.end());
  int64_t expect = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expect) return false;
    expect *= size;
  }
  return true;
}

// torch's assert_no_partial_overlap between a written-to tensor and an input: the same memory in the
// same layout is allowed (x.add_(x), add(x, 1, out=x)); memory that only partly coincides, or the
// same block in another layout (x.copy_(x.t())), is refused; layouts that do not fill their block
// densely are not judged (torch's "too hard").
void check_no_partial_overlap(const char* op, const Tensor& o, const Tensor& t) {
  if (!t.defined() || t.impl()->storage.get() != o.impl()->storage.get()) return;
  if (t.numel() == 0 || o.numel() == 0 || !non_overlapping_and_dense(t) || !non_overlapping_and_dense(o)) return;
  const int64_t ob = o.storage_offset() * static_cast<int64_t>(o.itemsize()), oe = ob + o.numel() * static_cast<int64_t>(o.itemsize());
  const int64_t tb = t.storage_offset() * static_cast<int64_t>(t.itemsize()), te = tb + t.numel() * static_cast<int64_t>(t.itemsize());
  const bool same = ob == tb && oe == te && o.strides() == t.strides();
  KILN_CHECK(same || oe <= tb || te <= ob, Runtime, op,
             "unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
             "single memory location. Please clone() the tensor before performing the operation.");
}

static TensorList dispatch_kernel_on(const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                                     TensorList* out, bool inplace, Device dev) {
  if (dev.type != DeviceType::CPU) [[unlikely]] {
    if (dev.type == DeviceType::Meta) return meta_device_call(op, inputs, attrs, out, inplace);
  }
  if (op.tags & kCrossDevice) [[unlikely]]
    for (const Tensor& t : inputs)
      KILN_CHECK(!t.defined() || t.device().type == dev.type, NotImplemented, op.name,
                 t.is_meta() ? "Cannot copy out of meta tensor; no data!" : "no copy between these devices");
  KernelFn kernel = op.kernels[static_cast<int>(dev.type)];
  if (!kernel) [[unlikely]] {
    device_allocator(static_cast<int>(dev.type), device_type_name(dev.type));  // raises: no such backend
    KILN_FAIL(NotImplemented, op.name, "no kernel for device '", device_str(dev), "'");
  }
  if (out && !(op.tags & kCrossDevice))  // (copy_ checks its own tensors: creation.cpp)
    for (const Tensor& o : *out) {
      if (!o.defined()) continue;
      if (o.device().type != dev.type) [[unlikely]] device_mismatch(op, dev.type, o.device().type);
      if (op.tags & (kPointwise | kRandom)) check_no_internal_overlap(op.name, o);
      for (const Tensor& t : inputs) check_no_partial_overlap(op.name, o, t);
    }
  TensorList result;
  detail::StreamQueue* stream = tls.kernel ? nullptr : tls.stream;
  if (stream && ((op.tags & kRandom) || tls.capture)) [[unlikely]] {
    // the generator is the process's: a random kernel runs here, in issue order, after the stream's
    // work; so does every kernel while a capture layer records (it observes kernels on this thread)
    stream_detail::drain(stream);
    stream = nullptr;
  }
  if (!op.meta || (op.tags & (kView | kDynamicShape))) {  // view / dynamic-shape ops make their own outputs
    // on a stream, a view reads no data and runs here; an op whose output depends on data waits for
    // every stream's queued work first, then runs here too
    if (stream && !(op.tags & kView)) [[unlikely]] stream_detail::wait_all_slow();
    {
      KernelRegion region(long_kernel(op, inputs, nullptr));
      run_kernel(kernel, op, inputs, attrs, result);
    }
    if (out) {
      KILN_CHECK(out->size() == result.size(), Runtime, op.name, "wrong number of out tensors");
      for (size_t i = 0; i < result.size(); ++i) {
        TensorSpec spec = TensorSpec::of(result[i]);
        check_out(op, spec, (*out)[i], inplace);
        copy_((*out)[i], result[i]);
      }
      return *out;
    }
    return result;
  }
  SpecList specs = op.meta(op, specs_of(inputs), attrs);
  KernelRegion region(long_kernel(op, inputs, &specs));
  if (!out) {
    result.reserve(specs.size());
    for (const TensorSpec& s : specs) result.push_back(make_tensor(s.sizes(), s.dtype(), dev));
    if (stream) [[unlikely]]
      queue_kernel(stream, kernel, op, inputs, attrs, result);
    else
      run_kernel(kernel, op, inputs, attrs, result);
    return result;
  }
  KILN_CHECK(out->size() == specs.size(), Runtime, op.name, "expected ", specs.size(),
             " out tensors, got ", out->size());
  bool direct = true;
  for (size_t i = 0; i < specs.size(); ++i) {
    check_out(op, specs[i], (*out)[i], inplace);
    Tensor& o = (*out)[i];
    if (o.dtype() != specs[i].dtype() || !o.is_contiguous()) direct = false;
  }
  if (direct) {
    if (stream) [[unlikely]]
      queue_kernel(stream, kernel, op, inputs, attrs, *out);
    else
      run_kernel(kernel, op, inputs, attrs, *out);
  } else {
    for (const TensorSpec& s : specs) result.push_back(make_tensor(s.sizes(), s.dtype(), dev));
    if (stream) [[unlikely]]
      queue_kernel(stream, kernel, op, inputs, attrs, result);  // copy_ below waits for it (no meta)
    else
      run_kernel(kernel, op, inputs, attrs, result);
    for (size_t i = 0; i < specs.size(); ++i) copy_((*out)[i], result[i]);
  }
  for (Tensor& o : *out) o.bump_version();
  return *out;
}

void stream_detail::set_dispatch_stream(detail::StreamQueue* q) { tls.stream = q; }

TensorList snapshot_tensors(const TensorList& ts, SnapshotMap& seen) {
  TensorList out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) {
    if (!t.defined()) {
      out.push_back(t);
      continue;
    }
    const TensorImpl* src = t.impl();
    Tensor copy;
    for (const auto& [impl, snap] : seen)
      if (impl == src) copy = snap;
    if (!copy.defined()) {
      auto impl = std::make_shared<TensorImpl>();
      impl->storage = src->storage;
      impl->sizes = src->sizes;
      impl->strides = src->strides;
      impl->offset = src->offset;
      impl->numel = src->numel;
      impl->dtype = src->dtype;
      impl->contiguous = src->contiguous;
      impl->wrapped_number = src->wrapped_number;
      copy = Tensor(std::move(impl));
      seen.push_back({src, copy});
    }
    out.push_back(copy);
  }
  return out;
}

void run_kept_kernel(KernelFn kernel, const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                     TensorList& outputs) {
  KernelMark mark(op);
  kernel(op, inputs, attrs, outputs);
}

TensorList dispatch(const OpDef& op, const TensorList& inputs, const Attrs& attrs, TensorList* out, bool inplace) {
  static SchemaCheck& checking = schema_check();
  if (checking.on.load(std::memory_order_relaxed)) [[unlikely]] check_call(checking, op, inputs, attrs);
  DispatchTls& t = this_thread_tls();
  if (t.kernel) [[unlikely]]  // a kernel's own step: beneath every layer (op.h)
    return dispatch_kernel(op, inputs, attrs, out, inplace);
  if (t.autocast) [[unlikely]]
    return g_autocast_layer(op, inputs, attrs, out, inplace);
  if (t.n_modes) [[unlikely]] {
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
  if (t.inference && !out) [[unlikely]]
    for (Tensor& t : r)
      if (t.defined()) t.impl()->inference = true;
  return r;
}

Tensor dispatch1(const OpDef& op, const TensorList& inputs, const Attrs& attrs) {
  return std::move(dispatch(op, inputs, attrs)[0]);
}

const Tensor& dispatch_inplace(const OpDef& op, const Tensor& self, const TensorList& inputs, const Attrs& attrs) {
  TensorList out{self};
  dispatch(op, inputs, attrs, &out, true);
  return self;
}

const Tensor& dispatch_out(const OpDef& op, const Tensor& o, const TensorList& inputs, const Attrs& attrs) {
  TensorList out{o};
  dispatch(op, inputs, attrs, &out, false);
  return o;
}

}  // namespace kiln
