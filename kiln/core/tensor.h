// Storage, TensorImpl and the Tensor handle.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/dtype.h"
#include "kiln/core/error.h"
#include "kiln/core/scalar.h"
#include "kiln/core/small_vector.h"
#include "kiln/core/symint.h"

namespace kiln {

// Sizes and strides: inline up to 6 dimensions (no heap allocation for them).
using Shape = SmallVec<int64_t, 6>;

// Devices as torch names them. `meta` tensors have sizes, strides and a dtype but no data: every op
// on them runs its meta function only (DESIGN.md §2). `cuda` is a name without a backend yet: creating
// a tensor there raises, naming the missing backend.
enum class DeviceType : int8_t { CPU = 0, CUDA = 1, Meta = 2 };
inline constexpr int kNumDeviceTypes = 3;
struct Device {
  DeviceType type = DeviceType::CPU;
  int index = -1;  // -1: none given ("cpu", "cuda"); torch.device's index None
  bool operator==(const Device&) const = default;
  bool is_meta() const { return type == DeviceType::Meta; }
  bool is_cpu() const { return type == DeviceType::CPU; }
};
inline constexpr Device kCPU{};
inline constexpr Device kMeta{DeviceType::Meta, -1};
const char* device_type_name(DeviceType t);  // "cpu", "cuda", "meta"
std::string device_str(Device d);            // "cpu", "cuda:0", "meta"
// Parses "cpu", "cuda", "cuda:1", "meta" (torch's device strings); raises RuntimeError naming the
// string otherwise, as torch.
Device parse_device(std::string_view s);
std::ostream& operator<<(std::ostream& os, Device d);

// A block of memory shared by a tensor and its views. Owns its memory through `free_fn` (the caching
// allocator for kiln's own storage, a foreign deleter for numpy / DLPack memory). The version counter
// is shared by all views and bumped by in-place ops; autograd checks it.
class Storage {
 public:
  using FreeFn = void (*)(void* data, size_t nbytes, void* ctx);
  Storage(size_t nbytes, Device device);  // allocates
  Storage(void* data, size_t nbytes, Device device, FreeFn free_fn, void* ctx);  // adopts
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint32_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }
  // Memory shared out (numpy, DLPack) or adopted from outside: it may not be replaced under the
  // borrower, so resize_ refuses (torch's "not resizable" storages; once shared out, never again, as in torch).
  bool resizable() const {
    return resizable_.load(std::memory_order_relaxed) && !exported_.load(std::memory_order_relaxed);
  }
  void set_resizable(bool r) { resizable_.store(r, std::memory_order_relaxed); }
  // A borrower of kiln's memory (a numpy array from .numpy(), a DLPack capsule) pins it from
  // add_export() to drop_export(); each export starts a new epoch (what a cache keyed on the version
  // also keys on: the borrower may have written without a version bump).
  void add_export() {
    exported_.store(true, std::memory_order_relaxed);
    export_epoch_.fetch_add(1, std::memory_order_acq_rel);
    exports_.fetch_add(1, std::memory_order_acq_rel);
  }
  uint32_t export_epoch() const { return export_epoch_.load(std::memory_order_acquire); }
  void drop_export() { exports_.fetch_sub(1, std::memory_order_acq_rel); }
  // Whether the bytes may change without kiln bumping the version: memory adopted from outside or
  // shared between processes, or a borrower alive now. Caches keyed on the version (the LSTM's
  // packed weights) trust only storages for which this is false.
  bool may_change_outside() const {
    return !resizable_.load(std::memory_order_relaxed) || exports_.load(std::memory_order_acquire) > 0;
  }
  // torch's share_memory_(): the bytes move into anonymous shared memory (mmap MAP_SHARED), which a
  // fork()ed child (a DataLoader worker) and its parent both see; every view follows, as the storage
  // is theirs. Idempotent; the storage is no longer resizable.
  void share_memory();
  bool is_shared() const { return shared_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> resizable_{true}, shared_{false};
  std::atomic<bool> exported_{false};
  std::atomic<int> exports_{0};
  std::atomic<uint32_t> export_epoch_{0};
  void* data_;
  size_t nbytes_;
  Device device_;
  FreeFn free_fn_;
  void* ctx_;
  std::atomic<uint32_t> version_{0};
};

// The symbolic geometry of a meta tensor made in a trace (a ShapeEnv is active): TensorImpl's sizes,
// strides and offset then hold the example values (hints), and these the expressions.
struct SymGeometry {
  SymShape sizes, strides;
  SymInt offset = 0;
};

struct AutogradMeta;  // defined by kiln/autograd
struct Node;

struct TensorImpl {
  // User-provided, so that make_shared<TensorImpl>() does not zero the whole object before running
  // the member initialisers (value-initialisation of a defaulted constructor does; GCC writes that
  // zeroing as `rep stos`, a third of make_tensor's time on a small tensor).
  TensorImpl() noexcept {}
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;      // in elements
  int64_t offset = 0;  // in elements
  int64_t numel = 0;
  Dtype dtype = kFloat32;
  bool contiguous = true;
  bool wrapped_number = false;  // a Python scalar turned into a 0-dim tensor (promotion category)
  bool inference = false;       // made in inference mode: may not be saved for backward
  std::shared_ptr<AutogradMeta> autograd;
  std::shared_ptr<const SymGeometry> sym;  // symbolic sizes (meta tensors in a trace); null otherwise

  void refresh();  // recompute numel and contiguity after sizes/strides change
};

struct TensorOptions {
  Dtype dtype_ = Dtype::Undefined;  // Undefined: the default dtype
  Device device_ = kCPU;
  bool requires_grad_ = false;
  TensorOptions() = default;
  TensorOptions(Dtype d) : dtype_(d) {}
  TensorOptions dtype(Dtype d) const { auto o = *this; o.dtype_ = d; return o; }
  TensorOptions device(Device d) const { auto o = *this; o.device_ = d; return o; }
  TensorOptions requires_grad(bool r) const { auto o = *this; o.requires_grad_ = r; return o; }
  Dtype dtype_or_default() const { return dtype_ == Dtype::Undefined ? default_dtype() : dtype_; }
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // Plain sizes. For a meta tensor with symbolic sizes (made in a trace) these are the example values,
  // and reading them specialises the symbols to them: the ShapeEnv records the guard with the caller's
  // line. Code that keeps sizes symbolic reads sym_sizes().
  using Where = std::source_location;
  const Shape& sizes(Where w = Where::current()) const {
    if (impl_->sym) [[unlikely]] specialize(w);
    return impl_->sizes;
  }
  const Shape& shape(Where w = Where::current()) const { return sizes(w); }
  const Shape& strides(Where w = Where::current()) const {
    if (impl_->sym) [[unlikely]] specialize(w);
    return impl_->strides;
  }
  int64_t dim() const { return static_cast<int64_t>(impl_->sizes.size()); }
  int64_t size(int64_t d, Where w = Where::current()) const;
  int64_t stride(int64_t d, Where w = Where::current()) const;
  int64_t numel(Where w = Where::current()) const {
    if (impl_->sym) [[unlikely]] specialize(w);
    return impl_->numel;
  }
  Dtype dtype() const { return impl_->dtype; }
  Dtype scalar_type() const { return impl_->dtype; }
  size_t itemsize() const { return kiln::itemsize(impl_->dtype); }
  size_t nbytes() const { return static_cast<size_t>(impl_->numel) * itemsize(); }
  Device device() const { return impl_->storage->device(); }
  bool is_meta() const { return device().type == DeviceType::Meta; }
  bool is_cpu() const { return device().type == DeviceType::CPU; }
  bool is_contiguous() const { return impl_->contiguous; }
  int64_t storage_offset(Where w = Where::current()) const {
    if (impl_->sym) [[unlikely]] specialize(w);
    return impl_->offset;
  }
  const std::shared_ptr<Storage>& storage() const { return impl_->storage; }
  bool is_wrapped_number() const { return impl_->wrapped_number; }
  bool is_floating_point() const { return is_floating(dtype()); }
  bool is_complex() const { return kiln::is_complex(dtype()); }
  // Sizes as SymInts: the symbolic ones of a meta tensor made in a trace, the plain ones otherwise.
  bool has_symbolic_sizes() const { return impl_->sym != nullptr; }
  SymShape sym_sizes() const;
  SymShape sym_strides() const;
  SymInt sym_size(int64_t d) const;
  SymInt sym_numel() const;

  // The first element's address. A meta tensor has none: asking raises (never a null dereference).
  void* data_ptr() const {
    void* d = impl_->storage->data();
    if (d == nullptr) [[unlikely]] check_has_data();
    // in integers: an empty view's offset may lie anywhere (torch allows it), its address is never read
    return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(d) +
                                   static_cast<uint64_t>(impl_->offset) * itemsize());
  }
  template <class T>
  T* data_ptr() const;  // checks the dtype
  template <class T>
  T item() const { return item().to<T>(); }
  Scalar item() const;

  uint32_t version() const { return impl_->storage->version(); }
  void bump_version() const { impl_->storage->bump_version(); }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  long use_count() const { return impl_.use_count(); }

  // Common ops as methods, libtorch style (defined in kiln/ops).
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(Dtype d, bool copy = false) const;
  Tensor to(Device d, bool copy = false) const;
  Tensor cpu() const { return to(kCPU); }
  Tensor& copy_(const Tensor& src);
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;
  Tensor unsqueeze(int64_t d) const;
  Tensor squeeze(int64_t d) const;
  Tensor expand(const Shape& shape) const;
  Tensor select(int64_t d, int64_t i) const;
  Tensor narrow(int64_t d, int64_t start, int64_t length) const;
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor sum() const;
  Tensor mean() const;
  Tensor matmul(const Tensor& o) const;
  Tensor operator-() const;

  // Autograd (defined in kiln/autograd, declared there in full).
  bool requires_grad() const;
  const Tensor& requires_grad_(bool r = true) const;
  Tensor grad() const;
  std::shared_ptr<Node> grad_fn() const;
  bool is_leaf() const;
  Tensor detach() const;
  void retain_grad() const;
  // Accumulates gradients into the leaves; an undefined gradient means 1 for a one-element tensor.
  void backward(const Tensor& gradient = Tensor(), std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;

 private:
  std::shared_ptr<TensorImpl> impl_;
  void check_has_data() const;  // raises NotImplementedError for a tensor without data (meta)
  void specialize(Where w) const;  // pins this tensor's symbolic sizes to their example values
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);  // torch-style repr

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);

// ---- low-level construction (no dispatch) -------------------------------------------------------
Shape contiguous_strides(const Shape& sizes);
int64_t shape_numel(const Shape& sizes);
// Uninitialised contiguous tensor.
Tensor make_tensor(const Shape& sizes, Dtype dtype, Device device = kCPU);
// The same from SymInts: concrete sizes on any device; symbolic ones only on meta (a tensor with hints
// for sizes and the expressions in its SymGeometry).
Tensor make_tensor(const SymShape& sizes, Dtype dtype, Device device);
// A view sharing `base`'s storage.
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset);
// A 0-dim tensor holding `s` (dtype: natural_dtype unless given); wrapped marks a Python number.
Tensor scalar_tensor(const Scalar& s, Dtype dtype = Dtype::Undefined, bool wrapped = false);
// Wraps foreign memory without copying.
Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, Dtype dtype,
                 Storage::FreeFn free_fn = nullptr, void* ctx = nullptr, size_t nbytes = 0);

// Checked size arithmetic (RuntimeError, torch's words, on overflow): the bytes of a contiguous tensor
// of `sizes`; the bytes a strided view must find in its storage (offset + the last reachable element,
// 0 when empty; a negative offset raises). check_in_storage raises when a view leaves its storage.
size_t storage_bytes_for(const Shape& sizes, size_t itemsize);
size_t storage_bytes_for(const Shape& sizes, const Shape& strides, int64_t offset, size_t itemsize);
void check_in_storage(const TensorImpl& t);

// Whether t has sizes `want`, compared as SymInts: in a trace a symbolic size is compared without being
// pinned (a guard is recorded only where the symbols' ranges cannot decide).
bool has_sizes(const Tensor& t, const SymShape& want);

// Normalises a possibly negative dim; raises IndexError-kind "Dimension out of range".
int64_t wrap_dim(int64_t d, int64_t ndim, const char* op);

template <class T>
T* Tensor::data_ptr() const {
  KILN_CHECK(dtype_of<T>() == dtype(), Type, "data_ptr", "expected dtype ",
             dtype_name(dtype_of<T>()), " but tensor has ", dtype_name(dtype()));
  return static_cast<T*>(data_ptr());
}

}  // namespace kiln
