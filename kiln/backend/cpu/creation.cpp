// CPU kernels of the creation ops (full, empty, arange, linspace/logspace, eye) and the copies
// (copy_, to, cat); their op-table entries, schemas, metas and front ends are in kiln/ops/creation.cpp
// and kiln/ops/elementwise.cpp (copy_). Registered by op name. No kernel here calls dispatch: views of
// the output are made with make_view and every copy is the cast loop itself.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/core/convert.h"
#include "kiln/core/visit.h"
#include "kiln/ops/ops.h"

namespace kiln {

namespace {
// buf (jn rows of kB elements of E bytes: src's runs along its contiguous dimension) -> row i of the
// transposed block (jn elements), E bytes per element.
template <int E>
void column_of(const char* buf, int64_t i, int64_t jn, int64_t kB, char* row) {
  struct El {
    char b[E];
  };
  const El* in = reinterpret_cast<const El*>(buf);
  El* out = reinterpret_cast<El*>(row);
  for (int64_t j = 0; j < jn; ++j) out[j] = in[j * kB + i];
}

// A copy whose output runs along a dimension the source strides through (x.t().contiguous(), a
// permute's copy) goes by 16 x 16 blocks: the block's source runs (16 elements along the source's
// contiguous dimension, for each of 16 output columns) are read whole into a buffer, then each
// output row of the block is converted from it in one run. Element by element every source read
// missed the cache from about 1K x 1K up, and with power-of-two row lengths all the rows of a
// tile fall in one L1 set, so tiles must read each line once (Zen 4, float32 transposed: 1024^2
// 3.5 ms and 4096^2 131 ms before; torch 0.6 and 52). False: not that case.
bool blocked_transposed_copy(const Tensor& dst, const Tensor& src, cpu::CastFn fn) {
  const int nd = static_cast<int>(dst.dim());
  if (nd < 2 || src.dim() != dst.dim() || src.sizes() != dst.sizes()) return false;
  const Shape& n = dst.sizes();
  const Shape &ds = dst.strides(), &ss = src.strides();
  const int b = nd - 1;  // the output's contiguous dimension
  int a = -1;            // the source's
  for (int d = 0; d < nd && a < 0; ++d)
    if (ss[d] == 1 && n[d] > 1) a = d;
  constexpr int64_t kB = 16;
  const int64_t ed = itemsize(dst.dtype()), es = itemsize(src.dtype());
  if (a < 0 || a == b || ds[b] != 1 || n[a] < kB || n[b] < kB || std::abs(ss[b]) < kB) return false;
  if (es != 1 && es != 2 && es != 4 && es != 8 && es != 16) return false;
  std::vector<int> rest;
  int64_t outer = 1;
  for (int d = 0; d < nd; ++d)
    if (d != a && d != b) rest.push_back(d), outer *= n[d];
  char* dp = static_cast<char*>(dst.data_ptr());
  const char* sp = static_cast<const char*>(src.data_ptr());
  const int64_t ta = (n[a] + kB - 1) / kB;
  const bool same = dst.dtype() == src.dtype();
  auto column = es == 1 ? &column_of<1> : es == 2 ? &column_of<2> : es == 4 ? &column_of<4> : es == 8 ? &column_of<8>
                                                                                                    : &column_of<16>;
  // same dtype, 2, 4 or 8 bytes: the block transposed in registers (the table's transpose_dense;
  // 1024^2 float32 on Zen 3, one thread: 1.22 ms by the element loop, torch 0.89)
  const auto tile = same && (es == 2 || es == 4 || es == 8) ? cpu::cpu_kernels().transpose_dense : nullptr;
  cpu::parallel_for(outer * ta, std::max<int64_t>(1, (int64_t{1} << 15) / (kB * n[b])), [&](int64_t w0, int64_t w1) {
    alignas(64) char buf[kB * kB * 16], row[kB * 16];
    for (int64_t w = w0; w < w1; ++w) {
      int64_t o = w / ta, od = 0, os = 0;
      for (int r = static_cast<int>(rest.size()) - 1; r >= 0; --r) {  // the other dimensions' index
        const int d = rest[r];
        od += (o % n[d]) * ds[d], os += (o % n[d]) * ss[d], o /= n[d];
      }
      const int64_t i0 = (w % ta) * kB, in = std::min(kB, n[a] - i0);
      for (int64_t j0 = 0; j0 < n[b]; j0 += kB) {
        const int64_t jn = std::min(kB, n[b] - j0);
        for (int64_t j = 0; j < jn; ++j)  // source run j: elements i0.. of output column j0 + j
          std::memcpy(buf + j * kB * es, sp + (os + i0 + (j0 + j) * ss[b]) * es, static_cast<size_t>(in * es));
        if (tile) {  // buf (jn x in, rows kB apart) transposed into the output block (in x jn)
          tile(buf, jn, in, kB, dp + (od + i0 * ds[a] + j0) * ed, ds[a], es);
          continue;
        }
        for (int64_t i = 0; i < in; ++i) {
          char* out = dp + (od + (i0 + i) * ds[a] + j0) * ed;
          if (same) {  // straight into the output row
            column(buf, i, jn, kB, out);
          } else {
            column(buf, i, jn, kB, row);
            fn(out, row, jn, ed, es);
          }
        }
      }
    }
  });
  return true;
}
}  // namespace

void cpu::cast_copy(const Tensor& dst, const Tensor& src) {
  CastFn fn = cpu_kernels().cast[static_cast<int>(src.dtype())][static_cast<int>(dst.dtype())];
  if (dst.numel() >= 4096 && blocked_transposed_copy(dst, src, fn)) return;
  for_each(make_loop({&dst, &src}, dst.sizes()),
           [&](char** d, const int64_t* s, int64_t n) { fn(d[0], d[1], n, s[0], s[1]); });
}

Tensor cpu::converted(const Tensor& x, Dtype d) {
  Tensor t = make_tensor(x.sizes(), d);
  cast_copy(t, x);
  return t;
}
Tensor cpu::contiguous_of(const Tensor& x) { return x.is_contiguous() ? x : converted(x, x.dtype()); }
void cpu::fill(const Tensor& t, const Scalar& v) { cast_copy(t, scalar_tensor(v, t.dtype())); }

namespace {

using cpu::cast_copy;

// attrs {size, fill_value, dtype, device}
void full_kernel(const OpDef&, const TensorList&, const Attrs& a, TensorList& out) {
  cpu::fill(out[0], std::get<Scalar>(a[1]));
}
void empty_kernel(const OpDef&, const TensorList&, const Attrs&, TensorList&) {}

// attrs {start, end, step, dtype, device}: values start + i * step, in int64 for integer dtypes
void arange_kernel(const OpDef&, const TensorList&, const Attrs& a, TensorList& out) {
  const Scalar &start = std::get<Scalar>(a[0]), &step = std::get<Scalar>(a[2]);
  Tensor& y = out[0];
  int64_t n = y.numel();
  visit_real(y.dtype(), "arange", [&]<class T>() {
    T* p = static_cast<T*>(y.data_ptr());
    if constexpr (std::is_integral_v<T>) {  // start and step truncated to int64 (torch's), wrapping
      const uint64_t s = static_cast<uint64_t>(start.to_int()), st = static_cast<uint64_t>(step.to_int());
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<int64_t>(s + static_cast<uint64_t>(i) * st));
      return;
    }
    double s = start.to_double(), st = step.to_double();
    for (int64_t i = 0; i < n; ++i) p[i] = convert<T>(s + static_cast<double>(i) * st);
  });
}

// attrs {start, end, steps, base, dtype, device}; logspace raises base to the linspace values
void linspace_kernel(const OpDef& op, const TensorList&, const Attrs& a, TensorList& out) {
  Tensor& y = out[0];
  int64_t steps = y.numel();
  double base = std::get<double>(a[3]);
  bool log = op.name[1] == 'o';
  visit_numeric(y.dtype(), op.name, [&]<class T>() {
    T* p = static_cast<T*>(y.data_ptr());
    using S = std::conditional_t<std::is_same_v<T, float>, float, double>;
    if constexpr (is_complex_v<T>) {
      auto s = std::get<Scalar>(a[0]).to_complex(), e = std::get<Scalar>(a[1]).to_complex();
      auto st = steps > 1 ? (e - s) / static_cast<double>(steps - 1) : std::complex<double>(0);
      for (int64_t i = 0; i < steps; ++i) p[i] = convert<T>(s + st * static_cast<double>(i));
    } else {
      S s = static_cast<S>(std::get<Scalar>(a[0]).to_double()), e = static_cast<S>(std::get<Scalar>(a[1]).to_double());
      S st = steps > 1 ? (e - s) / static_cast<S>(steps - 1) : S(0);
      int64_t half = steps / 2;
      for (int64_t i = 0; i < steps; ++i) {
        // fused multiply-add, from both ends, as torch's vectorised kernel computes it
        S v = steps == 1 ? s
              : i < half ? std::fma(st, static_cast<S>(i), s)
                         : std::fma(-st, static_cast<S>(steps - i - 1), e);
        if (log) v = static_cast<S>(std::pow(static_cast<S>(base), v));
        p[i] = convert<T>(v);
      }
    }
  });
}

void eye_kernel(const OpDef&, const TensorList&, const Attrs&, TensorList& out) {
  Tensor& y = out[0];
  cpu::fill(y, Scalar(0));
  int64_t n = std::min(y.sizes()[0], y.sizes()[1]);
  if (n > 0) cpu::fill(make_view(y, {n}, {y.strides()[0] + y.strides()[1]}, y.storage_offset()), Scalar(1));
}

// to(dtype) / clone: a contiguous converted copy
void to_kernel(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) { cast_copy(out[0], in[0]); }

// cat(tensors, dim): each input into its slice of the output (legacy: 1-D empty inputs are skipped)
void cat_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  Tensor& y = out[0];
  if (y.dim() == 1 && y.numel() == 0) return;
  int64_t dim = wrap_dim(std::get<int64_t>(a[0]), y.dim(), "cat");
  int64_t off = 0;
  for (const Tensor& t : in) {
    if (t.dim() == 1 && t.numel() == 0) continue;
    int64_t n = t.sizes()[dim];
    if (n > 0) {
      Shape sizes = y.sizes();
      sizes[dim] = n;
      cast_copy(make_view(y, sizes, y.strides(), y.storage_offset() + off * y.strides()[dim]), t);
    }
    off += n;
  }
}

// copy_(self, src): in place, src broadcast to self's shape, any dtypes
void copy_kernel(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  const Tensor& dst = in[0];
  const Tensor& src = in[1];
  check_no_internal_overlap("copy_", dst);
  check_no_partial_overlap("copy_", dst, src);
  KILN_CHECK(shape_numel(broadcast_shapes(dst.sizes(), src.sizes(), "copy_")) == dst.numel(), Runtime,
             "copy_", "output with shape ", dst.sizes(), " doesn't match the broadcast shape ",
             broadcast_shapes(dst.sizes(), src.sizes()));
  cast_copy(dst, src);
  dst.bump_version();
  out = {dst};
}

KernelRegistrar k_full{"full", DeviceType::CPU, full_kernel};
KernelRegistrar k_empty{"empty", DeviceType::CPU, empty_kernel};
KernelRegistrar k_arange{"arange", DeviceType::CPU, arange_kernel};
KernelRegistrar k_linspace{"linspace", DeviceType::CPU, linspace_kernel};
KernelRegistrar k_logspace{"logspace", DeviceType::CPU, linspace_kernel};
KernelRegistrar k_eye{"eye", DeviceType::CPU, eye_kernel};
KernelRegistrar k_to{"to", DeviceType::CPU, to_kernel};
KernelRegistrar k_cat{"cat", DeviceType::CPU, cat_kernel};
KernelRegistrar k_copy{"copy_", DeviceType::CPU, copy_kernel};

}  // namespace
}  // namespace kiln
