// libFuzzer target (issue 14): tensors built from a byte description (dtype, sizes, strides, storage
// offset, raw storage bytes), then viewed and read through the view family. kiln must either raise
// kiln::Error or give a tensor whose every element lies inside its storage; anything else (a signal,
// an ASan/UBSan report, another C++ exception escaping, a view accepted although it leaves its
// storage) is a finding. Build: `make fuzz` (clang with -fsanitize=fuzzer,address,undefined).
//
// Input layout: dtype byte, ndim byte, (size, stride) integers per dim, the offset integer, then per
// follow-up op a selector byte and its integers; the bytes left over are the storage.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "kiln/kiln.h"

using namespace kiln;
using kiln_fuzz::Input;

namespace {

using i128 = __int128;
constexpr i128 kHuge = i128(1) << 100;  // "does not fit" before any sum could overflow

// Independently of kiln: whether every element of a (sizes, strides, offset) view lies in `n` elements.
bool fits(const Shape& sizes, const Shape& strides, int64_t offset, int64_t n) {
  i128 lo = offset, hi = offset;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0) return false;
    if (sizes[i] == 0) return offset >= 0;  // nothing is read
    const i128 reach = i128(sizes[i] - 1) * strides[i];
    (reach < 0 ? lo : hi) += reach;
    if (lo < -kHuge || hi > kHuge) return false;
  }
  return lo >= 0 && hi < n;
}

// The bytes `sizes` need contiguously, or -1 where torch refuses them: the sizes' product overflows
// uint64 (first to last, an overflow before a zero included), times the item size passes INT64_MAX,
// or a contiguous stride overflows int64.
i128 bytes_for(const Shape& sizes, size_t itemsize) {
  uint64_t n = 1;
  bool bad = false;
  for (int64_t s : sizes) bad |= s < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(s), &n);
  bad |= __builtin_mul_overflow(n, static_cast<uint64_t>(itemsize), &n) || n > uint64_t(INT64_MAX);
  int64_t st = 1;
  for (size_t i = sizes.size(); i-- > 1;) bad |= __builtin_mul_overflow(st, std::max<int64_t>(sizes[i], 1), &st);
  return bad ? -1 : i128(n);
}

constexpr i128 kCap = i128(1) << 24;  // no fuzz input may make a real allocation beyond 16 MiB

Shape read_shape(Input& in, int max_ndim) {
  Shape s(in.byte() % (max_ndim + 1));
  for (auto& v : s) v = in.integer();
  return s;
}

void free_buffer(void* p, size_t, void*) { std::free(p); }

// Reads every element (ASan sees an out-of-storage read), when that is a bounded amount of work.
void touch(const Tensor& t) {
  if (bytes_for(t.sizes(), t.itemsize()) > kCap) return;
  Tensor c = contiguous(t);
  if (c.numel() != t.numel()) __builtin_trap();
  volatile uint8_t sink = 0;
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  for (size_t i = 0; i < static_cast<size_t>(c.numel()) * c.itemsize(); ++i) sink ^= p[i];
  (void)sink;
}

void follow_up(Input& in, const Tensor& v) {
  const int nd = static_cast<int>(v.dim());
  // a view may hold far more elements than its storage (stride 0): the ops whose result is as large
  // as their input (a real allocation) run on the small ones only; the views run on every one
  const bool small = bytes_for(v.sizes(), 8) >= 0 && bytes_for(v.sizes(), 8) <= kCap;
  const int op = in.byte() % 12;
  if (!small && (op <= 2 || op == 9 || op == 11)) return;
  switch (op) {
    case 0: touch(to_dtype(v, kFloat64)); break;
    case 1: touch(sum(v)); break;
    case 2: {
      Shape dims(nd);
      for (int i = 0; i < nd; ++i) dims[i] = i;
      touch(flip(v, dims));
      break;
    }
    case 3: {
      const int64_t d = in.integer(), start = in.integer(), len = in.integer();
      touch(narrow(v, d, start, len));
      break;
    }
    case 4: {
      const int64_t d = in.integer(), idx = in.integer();
      touch(select(v, d, idx));
      break;
    }
    case 5: {
      const int64_t d = in.integer(), size = in.integer(), step = in.integer();
      touch(unfold(v, d, size, step));
      break;
    }
    case 6: {
      const int64_t off = in.integer(), d1 = in.integer(), d2 = in.integer();
      touch(diagonal(v, off, d1, d2));
      break;
    }
    case 7: touch(view(v, read_shape(in, 5))); break;
    case 8: touch(expand(v, read_shape(in, 5))); break;
    case 9: {
      Tensor index = empty({in.byte() % 5}, kInt64);
      for (int64_t i = 0; i < index.numel(); ++i) index.data_ptr<int64_t>()[i] = in.integer();
      const int64_t d = in.integer();
      Shape out = v.sizes();  // the result's sizes, when d is a dim: bounded like the rest
      if (nd > 0 && d >= -nd && d < nd) out[d < 0 ? d + nd : d] = index.numel();
      if (bytes_for(out, 8) < 0 || bytes_for(out, 8) > kCap) break;
      touch(index_select(v, d, index));
      break;
    }
    case 10: {
      // A fresh tensor of fuzzed sizes: made when small, refused (without allocating) when its byte
      // count overflows; sizes that fit but are large are left alone (a real allocation).
      const Shape s = read_shape(in, 6);
      const i128 b = bytes_for(s, v.itemsize());
      if (b >= 0 && b <= kCap) {
        touch(empty(s, TensorOptions(v.dtype())));
      } else if (b < 0) {
        bool raised = false;
        try {
          (void)empty(s, TensorOptions(v.dtype()));
        } catch (const Error&) {
          raised = true;
        }
        if (!raised) __builtin_trap();  // a tensor whose size overflowed was made
      }
      break;
    }
    default: touch(reshape(v, read_shape(in, 5))); break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const auto dtype = static_cast<Dtype>(in.byte() % kNumDtypes);
  const int ndim = in.byte() % 7;
  Shape sizes(ndim), strides(ndim);
  for (int i = 0; i < ndim; ++i) {
    sizes[i] = in.integer();
    strides[i] = in.integer();
  }
  const int64_t offset = in.integer();
  const int n_ops = in.byte() % 4;
  std::vector<uint8_t> ops(in.rest(), in.rest() + std::min<size_t>(in.left(), 48));
  for (size_t i = 0; i < ops.size(); ++i) in.byte();

  // The storage: the bytes left, whole elements only (bool bytes made 0/1, as a bool must be).
  const size_t item = itemsize(dtype);
  const int64_t n = static_cast<int64_t>(in.left() / item);
  void* buf = std::malloc(std::max<size_t>(n * item, 1));
  std::memcpy(buf, in.rest(), n * item);
  if (dtype == kBool)
    for (int64_t i = 0; i < n; ++i) static_cast<uint8_t*>(buf)[i] &= 1;
  Tensor base = from_blob(buf, {n}, {1}, dtype, free_buffer, nullptr, n * item);

  Tensor v;
  try {
    v = as_strided(base, sizes, strides, offset);
  } catch (const Error&) {
    return 0;
  }
  if (v.numel() > 0 && !fits(sizes, strides, offset, n)) __builtin_trap();  // a view leaving storage
  Input ops_in(ops.data(), ops.size());
  try {
    touch(v);
  } catch (const Error&) {
  }
  for (int i = 0; i < n_ops; ++i) {
    try {
      follow_up(ops_in, v);
    } catch (const Error&) {
    }
  }
  return 0;
}
