// Memory formats (torch.contiguous_format, channels_last, channels_last_3d, preserve_format): which
// stride order a dense tensor has, and copies into one. kiln's kernels take any strides, so these only
// decide layouts; an op's output is contiguous whatever its inputs' format (docs/porting-from-torch.md).
#include <numeric>

#include "kiln/ops/ops.h"

namespace kiln {
namespace {

// The dims from fastest- to slowest-varying for a format (channels: dim 1).
Shape order_of(MemoryFormat f, int64_t ndim) {
  if (f == MemoryFormat::ChannelsLast) return {1, 3, 2, 0};
  if (f == MemoryFormat::ChannelsLast3d) return {1, 4, 3, 2, 0};
  Shape o(ndim);
  std::iota(o.rbegin(), o.rend(), 0);
  return o;
}

void check_rank(const char* op, const Tensor& t, MemoryFormat f) {
  KILN_CHECK(f != MemoryFormat::ChannelsLast || t.dim() == 4, Runtime, op,
             "required rank 4 tensor to use channels_last format");
  KILN_CHECK(f != MemoryFormat::ChannelsLast3d || t.dim() == 5, Runtime, op,
             "required rank 5 tensor to use channels_last_3d format");
}

}  // namespace

bool is_contiguous(const Tensor& t, MemoryFormat f) {
  if (f == MemoryFormat::Contiguous || f == MemoryFormat::Preserve) return t.is_contiguous();
  if ((f == MemoryFormat::ChannelsLast && t.dim() != 4) || (f == MemoryFormat::ChannelsLast3d && t.dim() != 5))
    return false;
  int64_t expected = 1;  // torch's compute_channels_last_contiguous: size-1 dims match any stride
  for (int64_t d : order_of(f, t.dim())) {
    if (t.size(d) == 1) continue;
    if (t.strides()[d] != expected) return false;
    expected *= t.size(d);
  }
  return true;
}

MemoryFormat suggest_memory_format(const Tensor& t) {
  if (t.dim() == 4 && !t.is_contiguous() && is_contiguous(t, MemoryFormat::ChannelsLast))
    return MemoryFormat::ChannelsLast;
  if (t.dim() == 5 && !t.is_contiguous() && is_contiguous(t, MemoryFormat::ChannelsLast3d))
    return MemoryFormat::ChannelsLast3d;
  return MemoryFormat::Contiguous;
}

// The permutations that put the channels last and back.
static Shape to_last(MemoryFormat f) { return f == MemoryFormat::ChannelsLast3d ? Shape{0, 2, 3, 4, 1} : Shape{0, 2, 3, 1}; }
static Shape from_last(MemoryFormat f) { return f == MemoryFormat::ChannelsLast3d ? Shape{0, 4, 1, 2, 3} : Shape{0, 3, 1, 2}; }

Tensor contiguous(const Tensor& t, MemoryFormat f) {
  if (f == MemoryFormat::Preserve) f = suggest_memory_format(t);
  check_rank("contiguous", t, f);
  if (is_contiguous(t, f)) return t;
  if (f == MemoryFormat::Contiguous) return contiguous(t);
  // a copy with the channels innermost, seen through the inverse permutation (differentiable)
  return permute(contiguous(permute(t, to_last(f))), from_last(f));
}

Tensor to_memory_format(const Tensor& t, MemoryFormat f) {
  if (f == MemoryFormat::Preserve || suggest_memory_format(t) == f) return t;  // torch's to_will_alias
  return clone(t, f);
}

Tensor clone(const Tensor& t, MemoryFormat f) {
  if (f == MemoryFormat::Preserve) f = suggest_memory_format(t);
  check_rank("clone", t, f);
  auto fresh = [](const Tensor& x) {  // always a new, contiguous buffer
    Tensor c = x.is_contiguous() ? clone(x) : contiguous(x);
    return c.is_contiguous() ? c : contiguous(c);
  };
  if (f == MemoryFormat::Contiguous) return fresh(t);
  return permute(fresh(permute(t, to_last(f))), from_last(f));
}

}  // namespace kiln
