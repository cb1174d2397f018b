// The op table and the single dispatch point (DESIGN.md §1–2).
//
// Every operator is one OpDef: torch's name, tags, a meta function (output dtypes and shapes from
// input shapes alone), one kernel per device type, and a derivative slot that autograd fills.
// Every call goes through dispatch(): modes (tracing, capture) -> autograd -> meta -> kernel.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln {

// The lists one op call passes around, inline up to a few entries (no heap allocation for them).
using TensorList = SmallVec<Tensor, 4>;

// Non-tensor arguments, positional, in torch's argument order.
using Attr = std::variant<std::monostate, bool, int64_t, double, Scalar, Shape, Dtype, std::string,
                          std::vector<double>, Device>;
using Attrs = SmallVec<Attr, 4>;

// What a meta function sees of a tensor, and returns: sizes (symbolic in a trace), dtype, device. Never
// data. Its accessors have Tensor's names, so meta code reads like kernel code.
struct TensorSpec {
  SymShape sizes_;
  Dtype dtype_ = Dtype::Undefined;  // Undefined: an absent optional tensor
  Device device_ = kCPU;
  bool wrapped_ = false;  // a Python number (promotion category)

  TensorSpec() noexcept {}  // user-provided: a value-initialised spec is not zeroed first (see TensorImpl)
  TensorSpec(std::initializer_list<SymInt> s, Dtype d, Device dev = kCPU) : sizes_(s), dtype_(d), device_(dev) {}
  TensorSpec(SymShape s, Dtype d, Device dev = kCPU) : sizes_(std::move(s)), dtype_(d), device_(dev) {}
  TensorSpec(const Shape& s, Dtype d, Device dev = kCPU) : dtype_(d), device_(dev) { sizes_.assign_bits(s.data(), s.size()); }
  static TensorSpec of(const Tensor& t);
  void fill(const Tensor& t);  // becomes t's spec (t defined)

  bool defined() const { return dtype_ != Dtype::Undefined; }
  const SymShape& sizes() const { return sizes_; }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  SymInt size(int64_t d) const;  // d may be negative
  SymInt numel() const { return sym_numel(sizes_); }
  Dtype dtype() const { return dtype_; }
  Dtype scalar_type() const { return dtype_; }
  Device device() const { return device_; }
  bool is_meta() const { return device_.is_meta(); }
  bool is_wrapped_number() const { return wrapped_; }
  bool is_floating_point() const { return is_floating(dtype_); }
  bool is_complex() const { return kiln::is_complex(dtype_); }
  // The sizes as plain integers, for allocating or where only numbers make sense; a symbolic size is
  // specialised (a guard, from `op`).
  Shape concrete_sizes(const char* op) const;
  // The sizes as an integer list, bit for bit (symbolic entries stay symbolic): what a shape argument
  // of a creation/view op or a shape attribute takes (backward code passes an input's shape on so).
  Shape raw_sizes() const {
    Shape r;
    r.assign_bits(sizes_.data(), sizes_.size());
    return r;
  }
};
using SpecList = SmallVec<TensorSpec, 2>;
SpecList specs_of(const SmallVec<Tensor, 4>& ts);

enum OpTag : uint32_t {
  kPointwise = 1 << 0,
  kReduction = 1 << 1,
  kView = 1 << 2,          // kernel returns views of an input; no allocation by dispatch
  kDynamicShape = 1 << 3,  // output shape depends on data; kernel allocates its outputs
  kRandom = 1 << 4,
  kNondeterministic = 1 << 5,
  kCreation = 1 << 6,      // no tensor inputs
  kInplaceable = 1 << 7,   // has a torch in-place variant `name_`
  kCrossDevice = 1 << 8,   // copies: the input may be on another device than the output
  kOutExactDtype = 1 << 9, // out= tensors must have exactly meta's dtypes (torch's mm, argmax, sort, ...),
                           // where other ops cast into any dtype the result can be cast to
  kDtypeFromOut = 1 << 10, // out= without dtype= computes in out's dtype (torch's sum, prod, cumsum, ...)
};

// The public forms torch gives an op (native_functions.yaml's `variants:`): a function
// (kiln.<name>), a method (Tensor.<name>), an in-place method (Tensor.<name>_). A host-language
// binding makes each from the op's schema, under the schema's name; ops of one name are torch's
// overloads, tried in registration order. 0: the op is reached only through a front end of its own.
enum OpVariant : uint8_t { kFunctionVariant = 1, kMethodVariant = 2, kInplaceVariant = 4 };

struct OpDef;
struct Schema;
// meta: output specs from inputs' specs (sizes, dtypes; never data), in SymInts so that it runs on
// symbolic sizes too.
using MetaFn = SpecList (*)(const OpDef& op, const SpecList& in, const Attrs& attrs);
// kernel: writes `out` (pre-allocated from meta, contiguous, of the meta dtype) or, for kView /
// kDynamicShape ops, fills `out` itself.
using KernelFn = void (*)(const OpDef& op, const TensorList& in, const Attrs& attrs, TensorList& out);
// What a derivative sees (kiln/autograd fills it): the inputs and outputs its OpDef's save masks name
// (others are undefined), every input's shape and dtype, and which inputs need a gradient.
struct GradCtx {
  const OpDef& op;
  const Attrs& attrs;
  const TensorList& in;
  const TensorList& out;
  const SpecList& in_specs;
  const std::vector<bool>& needs;  // needs[i]: input i needs a gradient
};
// Which compute dtypes a backend's kernel for the op handles (declared with the kernel, see
// register_kernel); the metas ask it (check_dtype_supported), so a call on meta tensors raises where
// the real run would.
using DtypeSupportFn = bool (*)(const OpDef& op, Dtype compute_dtype);
// derivative: the inputs' gradients (one per input; undefined = none) from the outputs' gradients,
// written with kiln ops so that double backward works. grad_out has one entry per output; those of
// differentiable outputs are always defined (zeros when no gradient flowed). A returned gradient
// may keep the broadcast shape and the compute dtype: the engine sums it back to the input's shape
// and casts it to the input's dtype, once, for every op.
using DerivativeFn = TensorList (*)(const GradCtx& ctx, const TensorList& grad_out);

struct OpDef {
  const char* name;
  uint32_t tags;
  MetaFn meta;
  KernelFn kernels[kNumDeviceTypes];
  int code = 0;  // family-specific selector (e.g. which unary function), lets ops share a kernel
  DerivativeFn derivative = nullptr;
  uint32_t save_in = 0;   // bit i: input i is saved for backward
  uint32_t save_out = 0;  // bit i: output i is saved for backward
  // The op's signature in torch's schema language (dispatch/schema.h): its arguments in call order,
  // with names, types, defaults and keyword-only markers. Set by its OpRegistrar.
  const char* schema = nullptr;
  mutable std::atomic<const Schema*> parsed_schema{nullptr};  // op_schema's cache
  // The dtype set each device's kernel handles (null: every dtype the meta lets through); set by
  // register_kernel.
  DtypeSupportFn supports[kNumDeviceTypes] = {};
  uint8_t variants = 0;      // OpVariant bits; set by its OpRegistrar
  uint32_t number_args = 0;  // bit i: tensor argument i also takes a Python number (torch's Scalar overloads)
};

// The parsed schema of an op (parsed once, on first use); null when the op has none. A malformed
// schema raises here, naming the text.
const Schema* op_schema(const OpDef& op);
// Checking every dispatch() call against its op's schema (also on with KILN_CHECK_SCHEMA=1 in the
// environment); the calls that did not fit, one line per op and reason (printed at exit too).
void set_schema_check(bool on);
std::vector<std::string> schema_problems();
// Checking every top-level CPU call against its op's meta run on data-less twins of its inputs (also
// on with KILN_CHECK_META=1): sizes and dtypes, and a view's strides; the calls that differ.
void set_meta_check(bool on);
std::vector<std::string> meta_problems();

// Registry: every OpDef registers itself once at load time.
void register_op(OpDef* op);
const std::vector<OpDef*>& registered_ops();
const OpDef* find_op(std::string_view name);

struct OpRegistrar {
  explicit OpRegistrar(OpDef& op, const char* schema = nullptr, uint8_t variants = 0, uint32_t number_args = 0) {
    if (schema) op.schema = schema;
    if (variants) op.variants = variants, op.number_args = number_args;
    register_op(&op);
  }
};
// The same declaration for an op whose OpRegistrar a list macro wrote (unary_list.h's families).
struct OpVariants {
  OpVariants(OpDef& op, uint8_t variants, uint32_t number_args = 0) {
    op.variants = variants;
    op.number_args = number_args;
  }
};
// The usual variant sets.
inline constexpr uint8_t kFunctionAndMethod = kFunctionVariant | kMethodVariant;
inline constexpr uint8_t kAllVariants = kFunctionVariant | kMethodVariant | kInplaceVariant;

// A backend's kernel for an op, registered from kiln/backend/<device>/<family>.cpp by the op's name,
// so an op's file names no backend: whichever of the op and its kernel is registered second
// completes the pair (load order does not matter). unresolved_kernels() lists kernels whose op
// never registered (a misspelt name); the test suite checks that it is empty.
// `supports`, where given, declares the compute dtypes the kernel handles (the rest raise
// "not implemented for" from the meta, on every device including meta).
void register_kernel(const char* op, DeviceType device, KernelFn fn, DtypeSupportFn supports = nullptr);
std::vector<std::string> unresolved_kernels();
struct KernelRegistrar {
  KernelRegistrar(const char* op, DeviceType device, KernelFn fn, DtypeSupportFn supports = nullptr) {
    register_kernel(op, device, fn, supports);
  }
};
// Whether the op's kernel for the device (the CPU's for the meta device) handles the compute dtype;
// the check raises torch's RuntimeError ("... not implemented for 'Bool'") when it does not.
bool dtype_supported(const OpDef& op, Device device, Dtype d);
void check_dtype_supported(const OpDef& op, Device device, Dtype d);

// Declares an op's derivative beside its registration:
//   DerivativeRegistrar d_mul{op_mul, mul_backward, /*save_in=*/0b11, /*save_out=*/0};
struct DerivativeRegistrar {
  DerivativeRegistrar(OpDef& op, DerivativeFn fn, uint32_t save_in, uint32_t save_out) {
    op.derivative = fn;
    op.save_in = save_in;
    op.save_out = save_out;
  }
};
// The same by op name, for derivatives kept in a family's `*_grad.cpp` beside its kernels (the OpDef
// lives in the kernel file's anonymous namespace). Resolved once, before the first backward record.
struct DerivativeByName {
  DerivativeByName(const char* op, DerivativeFn fn, uint32_t save_in, uint32_t save_out);
};
void resolve_derivatives();

// The dispatch point. `out`: given for in-place (`inplace` = true) and out= calls; results are
// written into it (cast to its dtype where torch allows).
// The lists are taken by reference: nothing below keeps or changes them, so a call moves no tensor.
TensorList dispatch(const OpDef& op, const TensorList& inputs, const Attrs& attrs = {}, TensorList* out = nullptr,
                    bool inplace = false);
Tensor dispatch1(const OpDef& op, const TensorList& inputs, const Attrs& attrs = {});
// In-place: writes into self, returns self.
const Tensor& dispatch_inplace(const OpDef& op, const Tensor& self, const TensorList& inputs, const Attrs& attrs = {});
// out=: writes into out (resized when empty), returns out.
const Tensor& dispatch_out(const OpDef& op, const Tensor& out, const TensorList& inputs, const Attrs& attrs = {});

// A data-less twin of t on the meta device: the same sizes, strides, offset, dtype and wrapped-number
// flag, no autograd history.
Tensor meta_twin(const Tensor& t);

// Runs meta and the device kernel only (below modes and autograd). The device is the inputs' (a
// 0-dim CPU tensor goes with any device, as in torch), a creation op's `Device` attribute, or for a
// kCrossDevice op its output's. On the meta device only meta runs (view ops make their views, which
// read no data); an op whose output shape depends on data, without a meta, raises NotImplementedError.
TensorList dispatch_kernel(const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                           TensorList* out, bool inplace);

// The layers of dispatch(), outermost first:
//   0. autocast (kiln/amp), while a region is on: casts inputs by the op's policy;
//   1. modes (export tracing, fake/meta modes): a thread-local stack of DispatchMode; while a mode
//      handles a call it is popped, so dispatch() from inside handle() reaches the layer below;
//   2. autograd (set_autograd_layer): records a Node when grad mode is on and an input requires grad;
//   3. meta and the kernel (dispatch_kernel), observed by the capture layer (innermost).
// A kernel that uses another op for a step of its own (a dtype conversion, a copy) calls dispatch()
// too; such a call goes straight to dispatch_kernel, beneath every layer and unobserved: it is part
// of the outer kernel, so what the layers see is a flat sequence of top-level kernels.
class DispatchMode {
 public:
  virtual ~DispatchMode() = default;
  virtual TensorList handle(const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                            TensorList* out, bool inplace) = 0;
};
void push_mode(std::shared_ptr<DispatchMode> mode);
std::shared_ptr<DispatchMode> pop_mode();
size_t mode_stack_size();

// RAII: pushes a mode for a scope.
struct ModeGuard {
  explicit ModeGuard(std::shared_ptr<DispatchMode> m) { push_mode(std::move(m)); }
  ~ModeGuard() { pop_mode(); }
};

// The capture layer: observes every top-level kernel after it ran, with the resolved kernel and the
// real buffers it read and wrote (inputs and outputs: the outputs the kernel wrote, which for an
// in-place or out= call whose target has another dtype or layout are temporaries, copied into the
// target by a copy_ kernel that is observed next). Thread-local; nullptr detaches.
class CaptureLayer {
 public:
  virtual ~CaptureLayer() = default;
  virtual void on_kernel(const OpDef& op, KernelFn kernel, const TensorList& inputs, const Attrs& attrs,
                         const TensorList& outputs) = 0;
};
void set_capture_layer(CaptureLayer* layer);
CaptureLayer* capture_layer();
// True while the calling thread runs a kernel.
bool in_kernel();

// Autograd layer hook: installed by kiln/autograd. Called when grad mode is on and an input
// requires grad.
using AutogradLayerFn = TensorList (*)(const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                                       TensorList* out, bool inplace);
void set_autograd_layer(AutogradLayerFn fn, bool (*needs_grad)(const TensorList&));
// Autocast layer hook: installed by kiln/amp. While autocast_on_tls() is set (kiln/amp keeps it: autocast
// on for the CPU and not inside an autocast'd op), dispatch() hands every call to it first; it casts
// the inputs by the op's policy and calls dispatch() again with itself off.
using AutocastLayerFn = TensorList (*)(const OpDef& op, const TensorList& inputs, const Attrs& attrs,
                                       TensorList* out, bool inplace);
void set_autocast_layer(AutocastLayerFn fn);
bool& autocast_on_tls();
// Inference mode flag (thread-local): outputs made while it is set are marked as inference tensors.
bool& inference_mode_tls();

// Called around every kernel that touches at least kKernelRegionElems elements (inputs and outputs
// together; view ops excluded), by the thread that dispatched it. A host-language binding sets them:
// Python's releases the interpreter lock for the kernel (`begin` returns what `end` restores), so
// other Python threads run while kiln computes. Kernels never call back into the host language.
struct KernelRegionHooks {
  void* (*begin)() = nullptr;
  void (*end)(void* token) = nullptr;
};
inline constexpr int64_t kKernelRegionElems = 1 << 14;
void set_kernel_region_hooks(KernelRegionHooks hooks);
const KernelRegionHooks& kernel_region_hooks();
// RAII: runs the hooks for a scope when `on` (dispatch uses it around kernels).
class KernelRegion {
 public:
  explicit KernelRegion(bool on) {
    const KernelRegionHooks& h = kernel_region_hooks();
    if (on && h.begin) end_ = h.end, token_ = h.begin();
  }
  ~KernelRegion() {
    if (end_) end_(token_);
  }
  KernelRegion(const KernelRegion&) = delete;
  KernelRegion& operator=(const KernelRegion&) = delete;

 private:
  void (*end_)(void*) = nullptr;
  void* token_ = nullptr;
};

// torch's assert_no_internal_overlap for a tensor an op writes: one whose elements share memory (an
// expanded view: a stride of 0 over a size above 1) raises RuntimeError. dispatch checks the outputs
// of pointwise, random and copy ops; fill_ and the index ops accept such a tensor, as torch's do.
void check_no_internal_overlap(const char* op, const Tensor& t);
// torch's assert_no_partial_overlap: a written-to tensor and an input share memory only as the same
// block in the same layout (x.add_(x)); else RuntimeError (x.copy_(x.t()), x[1:].copy_(x[:-1])).
void check_no_partial_overlap(const char* op, const Tensor& o, const Tensor& t);

// Attribute accessors with clear errors.
template <class T>
const T& attr(const Attrs& a, size_t i) {
  return std::get<T>(a[i]);
}
// An integer-list attribute as sizes: its entries are SymInts bit for bit (symbolic in a trace).
inline SymShape attr_sym_shape(const Attrs& a, size_t i) {
  const Shape& s = std::get<Shape>(a[i]);
  SymShape r;
  r.assign_bits(s.data(), s.size());
  return r;
}
// Sizes into an integer list (an attribute of the next op), bit for bit: symbolic entries stay symbolic.
inline Shape raw_shape(const SymShape& s) {
  Shape r;
  r.assign_bits(s.data(), s.size());
  return r;
}
// A data-dependent output size (nonzero's count) for a meta function: a fresh unbacked symbol of the
// active ShapeEnv, in [min, max]. Without a trace there is nothing to name it with: NotImplementedError,
// as torch's meta tensors raise for such ops.
SymInt unbacked_size(const char* op, int64_t min = 0, int64_t max = ShapeEnv::kInf);

inline bool has_symbolic(const Shape& s) {
  for (int64_t v : s)
    if (SymInt::from_raw(v).is_symbolic()) return true;
  return false;
}
inline SymShape to_sym(const Shape& s) {
  SymShape r;
  r.assign_bits(s.data(), s.size());
  return r;
}

}  // namespace kiln
