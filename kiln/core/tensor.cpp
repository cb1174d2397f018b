#include "kiln/core/tensor.h"

#include "kiln/core/read_hook.h"
#include "kiln/core/stream.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kiln/core/allocator.h"
#include "kiln/core/visit.h"

namespace kiln {

namespace {
void device_free(void* data, size_t nbytes, void* ctx) {
  static_cast<const DeviceAllocator*>(ctx)->free(data, nbytes);
}
}  // namespace

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (device.type == DeviceType::CPU) {  // the common case, without the table
    data_ = cpu_allocate(nbytes), free_fn_ = nullptr, ctx_ = nullptr;
    return;
  }
  const DeviceAllocator& a = device_allocator(static_cast<int>(device.type), device_type_name(device.type));
  data_ = a.allocate(nbytes), free_fn_ = device_free, ctx_ = const_cast<DeviceAllocator*>(&a);
}

Storage::Storage(void* data, size_t nbytes, Device device, FreeFn free_fn, void* ctx)
    : data_(data), nbytes_(nbytes), device_(device), free_fn_(free_fn), ctx_(ctx) {}

Storage::~Storage() {
  if (free_fn_) {
    free_fn_(data_, nbytes_, ctx_);
  } else if (!ctx_) {
    cpu_free(data_, nbytes_);
  }
  // free_fn_ == nullptr && ctx_ != nullptr: borrowed memory, nothing to do.
}

void Storage::share_memory() {
  if (is_shared() || device_.type != DeviceType::CPU) return;  // torch: a no-op off the CPU
  const size_t n = std::max<size_t>(nbytes_, 1);
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  KILN_CHECK(p != MAP_FAILED, Runtime, "share_memory_", "unable to map ", n, " bytes of shared memory: ",
             std::strerror(errno));
  if (nbytes_) std::memcpy(p, data_, nbytes_);
  if (free_fn_) free_fn_(data_, nbytes_, ctx_);
  else if (!ctx_) cpu_free(data_, nbytes_);
  data_ = p;
  free_fn_ = [](void* d, size_t bytes, void*) { munmap(d, std::max<size_t>(bytes, 1)); };
  ctx_ = nullptr;
  set_resizable(false);
  shared_.store(true, std::memory_order_relaxed);
}

Shape contiguous_strides(const Shape& sizes) {
  // wrapping arithmetic: sizes whose strides overflow are refused by the caller's checks (numel,
  // storage size), which run on the sizes themselves
  Shape st(sizes.size());
  uint64_t s = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    st[i] = static_cast<int64_t>(s);
    s *= sizes[i] > 1 ? static_cast<uint64_t>(sizes[i]) : 1;
  }
  return st;
}

int64_t shape_numel(const Shape& sizes) {
  // torch's safe_compute_numel: every product checked in uint64 (a zero later on included), the
  // result at most INT64_MAX. A negative size (a shape not yet inferred) multiplies unchecked.
  uint64_t n = 1;
  bool overflow = false;
  for (int64_t s : sizes) {
    if (s < 0) [[unlikely]] {
      uint64_t r = 1;  // (wrapping)
      for (int64_t v : sizes) r *= static_cast<uint64_t>(v);
      return static_cast<int64_t>(r);
    }
    overflow |= __builtin_mul_overflow(n, static_cast<uint64_t>(s), &n);
  }
  KILN_CHECK(!overflow && n <= static_cast<uint64_t>(INT64_MAX), Runtime, "numel", "integer multiplication overflow");
  return static_cast<int64_t>(n);
}

namespace {
std::string sizes_text(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}
}  // namespace

size_t storage_bytes_for(const Shape& sizes, size_t itemsize) {
  // torch's order: the sizes first to last (an overflow before a later zero still counts), then the
  // item size
  uint64_t n = 1;
  bool overflow = false;
  for (int64_t s : sizes) overflow |= __builtin_mul_overflow(n, static_cast<uint64_t>(s), &n);
  overflow |= __builtin_mul_overflow(n, static_cast<uint64_t>(itemsize), &n);
  // torch refuses sizes whose byte count does not fit an int64
  KILN_CHECK(!overflow && n <= static_cast<uint64_t>(INT64_MAX), Runtime, "empty",
             "Storage size calculation overflowed with sizes=", sizes_text(sizes));
  return static_cast<size_t>(n);
}

size_t storage_bytes_for(const Shape& sizes, const Shape& strides, int64_t offset, size_t itemsize) {
  KILN_CHECK(offset >= 0, Runtime, "as_strided", "Tensor: invalid storage offset ", offset);
  // the last reachable element + 1, in elements; 0 for an empty tensor. Negative strides (kiln's own
  // reversed views) reach below the offset: that reach must stay within it.
  uint64_t last = 0, below = 0;
  bool overflow = false, empty = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) empty = true;
    if (sizes[i] <= 1) continue;
    uint64_t t;
    const uint64_t mag = strides[i] < 0 ? 0 - static_cast<uint64_t>(strides[i]) : static_cast<uint64_t>(strides[i]);
    overflow |= __builtin_mul_overflow(static_cast<uint64_t>(sizes[i] - 1), mag, &t);
    overflow |= __builtin_add_overflow(strides[i] < 0 ? below : last, t, strides[i] < 0 ? &below : &last);
  }
  if (empty) return 0;
  KILN_CHECK(!overflow && below <= static_cast<uint64_t>(offset), Runtime, "as_strided",
             "Storage size calculation overflowed with sizes=", sizes_text(sizes), " and strides=", sizes_text(strides));
  uint64_t bytes;
  overflow |= __builtin_add_overflow(last, static_cast<uint64_t>(offset) + 1, &last);
  overflow |= __builtin_mul_overflow(last, static_cast<uint64_t>(itemsize), &bytes);
  KILN_CHECK(!overflow && bytes <= static_cast<uint64_t>(INT64_MAX), Runtime, "as_strided",
             "Storage size calculation overflowed with sizes=", sizes_text(sizes), " and strides=", sizes_text(strides));
  return static_cast<size_t>(bytes);
}

void TensorImpl::refresh() {
  numel = shape_numel(sizes);
  contiguous = true;
  if (numel == 0) return;
  int64_t expected = 1;  // <= numel: no overflow
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) {
      contiguous = false;
      break;
    }
    expected *= sizes[i];
  }
}

namespace {
Tensor make_contiguous(std::shared_ptr<TensorImpl> impl, Dtype dtype, Device device) {
  // one pass for the strides, the element and byte counts and the checks
  const Shape& sizes = impl->sizes;
  impl->strides.resize(sizes.size());
  uint64_t stride = 1, count = 1, bytes = itemsize(dtype);
  bool bad = false;
  for (size_t i = sizes.size(); i-- > 0;) {
    const int64_t s = sizes[i];
    impl->strides[i] = static_cast<int64_t>(stride);
    stride *= s > 1 ? static_cast<uint64_t>(s) : 1;  // <= the element count
    count *= static_cast<uint64_t>(s);                // <= the byte count
    bad |= s <= 0;  // a negative size raises; a zero one takes the checked path below
    bad |= __builtin_mul_overflow(bytes, static_cast<uint64_t>(s), &bytes);
  }
  if (bad || bytes > static_cast<uint64_t>(INT64_MAX)) [[unlikely]] {  // raises, in torch's words
    for (int64_t s : sizes)
      KILN_CHECK(s >= 0, Runtime, "empty", "trying to create tensor with negative dimension ", s, ": ",
                 sizes);
    // with a zero size the byte count is 0, but torch still refuses sizes whose product overflows
    // before the zero, and strides that overflow
    storage_bytes_for(sizes, itemsize(dtype));
    int64_t st = 1;
    for (size_t i = sizes.size(); i-- > 1;)
      KILN_CHECK(!__builtin_mul_overflow(st, std::max<int64_t>(sizes[i], 1), &st), Runtime, "empty",
                 "Stride calculation overflowed");
  }
  impl->dtype = dtype;
  impl->numel = static_cast<int64_t>(count);
  impl->contiguous = true;
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(bytes), device);
  return Tensor(std::move(impl));
}
}  // namespace

Tensor make_tensor(const Shape& sizes, Dtype dtype, Device device) {
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = sizes;
  return make_contiguous(std::move(impl), dtype, device);
}

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  impl->refresh();
  check_in_storage(*impl);
  return Tensor(std::move(impl));
}

void check_in_storage(const TensorImpl& t) {
  const size_t need = storage_bytes_for(t.sizes, t.strides, t.offset, itemsize(t.dtype));
  const size_t have = t.storage ? t.storage->nbytes() : 0;
  if (need <= have) [[likely]]
    return;
  KILN_FAIL(Runtime, "as_strided", "setStorage: sizes ", sizes_text(t.sizes), ", strides ", sizes_text(t.strides),
            ", storage offset ", t.offset, ", and itemsize ", itemsize(t.dtype), " requiring a storage size of ", need,
            " are out of bounds for storage of size ", have);
}

Tensor scalar_tensor(const Scalar& s, Dtype dtype, bool wrapped) {
  if (dtype == Dtype::Undefined) dtype = s.natural_dtype();
  Tensor t = make_tensor({}, dtype);
  visit_all(dtype, "scalar_tensor", [&]<class T>() { *static_cast<T*>(t.data_ptr()) = s.to<T>(); });
  t.impl()->wrapped_number = wrapped;
  return t;
}

Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, Dtype dtype,
                 Storage::FreeFn free_fn, void* ctx, size_t nbytes) {
  auto impl = std::make_shared<TensorImpl>();
  const Shape st = strides.empty() && !sizes.empty() ? contiguous_strides(sizes) : strides;
  // the memory's extent when not given: what the sizes and strides reach (views of it are checked
  // against it)
  if (nbytes == 0) nbytes = storage_bytes_for(sizes, st, 0, itemsize(dtype));
  // free_fn == nullptr with a non-null ctx marks borrowed memory that is never freed by kiln.
  impl->storage = std::make_shared<Storage>(data, nbytes, kCPU, free_fn,
                                            free_fn ? ctx : reinterpret_cast<void*>(1));
  impl->sizes = sizes;
  impl->strides = st;
  impl->dtype = dtype;
  impl->refresh();
  return Tensor(std::move(impl));
}

int64_t wrap_dim(int64_t d, int64_t ndim, const char* op) {
  int64_t n = ndim == 0 ? 1 : ndim;  // 0-dim tensors accept dim 0 and -1
  KILN_CHECK(d >= -n && d < n, Index, op, "Dimension out of range (expected to be in range of [", -n,
             ", ", n - 1, "], but got ", d, ")");
  return d < 0 ? d + n : d;
}

Tensor make_tensor(const SymShape& sizes, Dtype dtype, Device device) {
  if (!is_symbolic(sizes)) [[likely]] {
    auto impl = std::make_shared<TensorImpl>();
    impl->sizes.assign_bits(sizes.data(), sizes.size());
    return make_contiguous(std::move(impl), dtype, device);
  }
  KILN_CHECK(device.is_meta(), Runtime, "empty", "a tensor with symbolic sizes ", sym_str(sizes),
             " can only be a meta tensor, not on ", device_str(device));
  Shape hints;
  for (SymInt v : sizes) {
    KILN_CHECK(bool(v >= 0), Runtime, "empty", "trying to create tensor with negative dimension ", v.str());
    // an unbacked size has no example value: the smallest it can be
    hints.push_back(v.maybe_hint().value_or(std::max<int64_t>(active_shape_env()->range(v).first, 0)));
  }
  Tensor t = make_tensor(hints, dtype, device);
  auto g = std::make_shared<SymGeometry>();
  g->sizes = sizes;
  g->strides = sym_contiguous_strides(sizes);
  t.impl()->sym = std::move(g);
  return t;
}

SymShape Tensor::sym_sizes() const {
  if (impl_->sym) return impl_->sym->sizes;
  return SymShape(impl_->sizes.begin(), impl_->sizes.end());
}
SymShape Tensor::sym_strides() const {
  if (impl_->sym) return impl_->sym->strides;
  return SymShape(impl_->strides.begin(), impl_->strides.end());
}
void Tensor::specialize(Where w) const {
  const std::string where = where_str(w);
  const SymGeometry& g = *impl_->sym;
  for (SymInt v : g.sizes) v.guard_int(where);
  for (SymInt v : g.strides) v.guard_int(where);
  g.offset.guard_int(where);
}

bool has_sizes(const Tensor& t, const SymShape& want) {
  if (t.dim() != static_cast<int64_t>(want.size())) return false;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (!bool(t.sym_size(d) == want[static_cast<size_t>(d)])) return false;
  return true;
}

SymInt Tensor::sym_size(int64_t d) const {
  if (!impl_->sym) return size(d);
  return dim() == 0 ? SymInt(1) : impl_->sym->sizes[wrap_dim(d, dim(), "size")];
}
SymInt Tensor::sym_numel() const { return impl_->sym ? kiln::sym_numel(impl_->sym->sizes) : SymInt(impl_->numel); }

int64_t Tensor::size(int64_t d, Where w) const {
  if (dim() == 0) return 1;
  const int64_t k = wrap_dim(d, dim(), "size");
  if (impl_->sym) [[unlikely]] {  // pins this dimension only
    impl_->sym->sizes[k].guard_int(where_str(w));
  }
  return impl_->sizes[k];
}
int64_t Tensor::stride(int64_t d, Where w) const {
  if (impl_->sym) [[unlikely]] specialize(w);
  return dim() == 0 ? 1 : impl_->strides[wrap_dim(d, dim(), "stride")];
}

const char* device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::CUDA: return "cuda";
    case DeviceType::Meta: return "meta";
  }
  return "?";
}

std::string device_str(Device d) {
  std::string s = device_type_name(d.type);
  if (d.index >= 0) s += ":" + std::to_string(d.index);
  return s;
}

std::ostream& operator<<(std::ostream& os, Device d) { return os << device_str(d); }

Device parse_device(std::string_view s) {
  std::string_view type = s, index;
  if (size_t c = s.find(':'); c != std::string_view::npos) type = s.substr(0, c), index = s.substr(c + 1);
  Device d;
  if (type == "cpu") d.type = DeviceType::CPU;
  else if (type == "cuda") d.type = DeviceType::CUDA;
  else if (type == "meta") d.type = DeviceType::Meta;
  else
    KILN_CHECK(false, Runtime, "device", "Expected one of cpu, cuda, meta device type at start of device string: ",
               std::string(s));
  if (s.size() > type.size()) {
    bool digits = !index.empty() && index.size() < 10;
    for (char c : index) digits = digits && c >= '0' && c <= '9';
    KILN_CHECK(digits && (index.size() == 1 || index[0] != '0'), Runtime, "device", "Invalid device string: '",
               std::string(s), "'");
    d.index = std::stoi(std::string(index));
  }
  return d;
}

void Tensor::check_has_data() const {
  KILN_CHECK(!is_meta(), NotImplemented, "data_ptr", "a meta tensor has no data (shape ", sizes(),
             ", dtype ", dtype_name(dtype()), "); this step needs the values");
}

namespace detail {
thread_local void (*item_read_hook)(const Tensor& t) = nullptr;
}  // namespace detail

Scalar Tensor::item() const {
  if (detail::item_read_hook) [[unlikely]] detail::item_read_hook(*this);
  // a Python number made a tensor is a constant no queued kernel writes
  if (!impl_->wrapped_number) stream_detail::before_host_read();
  KILN_CHECK(!is_meta() || numel() != 1, Runtime, "item", "Tensor.item() cannot be called on meta tensors");
  KILN_CHECK(numel() == 1, Runtime, "item",
             "a Tensor with ", numel(), " elements cannot be converted to Scalar");
  return visit_all(dtype(), "item", [&]<class T>() -> Scalar {
    T v = *static_cast<const T*>(data_ptr());
    return Scalar(v);
  });
}

}  // namespace kiln
