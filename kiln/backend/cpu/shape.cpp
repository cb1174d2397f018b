// CPU kernels of the shape-building ops: roll, repeat, repeat_interleave, diag, diag_embed, constant
// and reflect / replicate / circular padding, embedding (their op-table entries, schemas, metas and
// front ends are in kiln/ops/shape.cpp), registered by op name. Most are one gather through index
// maps (gather_maps).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kiln/backend/cpu/parallel.h"
#include "kiln/core/visit.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"

namespace kiln {

using shape_detail::check_scalar_fits;
using shape_detail::not_implemented;
using shape_detail::torch_type_name;

namespace {

constexpr int64_t kFill = INT64_MIN;  // map entry: write the fill value
constexpr int kMaxGatherDims = 64;

using Maps = std::vector<std::vector<int64_t>>;

template <size_t N>
struct Elem {
  unsigned char b[N];
};

template <class E>
void gather_rows(const Tensor& x, const Tensor& y, const Maps& off, const void* fillp) {
  int64_t nd = y.dim();
  const Shape& ys = y.sizes();
  int64_t last = ys[nd - 1];
  int64_t rows = y.numel() / last;
  E* yp = static_cast<E*>(y.data_ptr());
  const E* xp = static_cast<const E*>(x.data_ptr());
  E fv{};
  if (fillp) std::memcpy(&fv, fillp, sizeof(E));
  const int64_t* lo = off[nd - 1].data();
  cpu::parallel_for(rows, std::max<int64_t>(1, cpu::kGrainSize / std::max<int64_t>(last, 1)), [&](int64_t b, int64_t e) {
    int64_t c[kMaxGatherDims];
    int64_t r = b;
    for (int64_t d = nd - 2; d >= 0; --d) {
      c[d] = r % ys[d];
      r /= ys[d];
    }
    for (int64_t row = b; row < e; ++row) {
      int64_t base = 0;
      bool fill = false;
      for (int64_t d = 0; d < nd - 1; ++d) {
        int64_t v = off[d][c[d]];
        if (v == kFill) fill = true;
        else base += v;
      }
      E* o = yp + row * last;
      if (fill) {
        for (int64_t i = 0; i < last; ++i) o[i] = fv;
      } else {
        for (int64_t i = 0; i < last; ++i) o[i] = lo[i] == kFill ? fv : xp[base + lo[i]];
      }
      for (int64_t d = nd - 2; d >= 0; --d) {
        if (++c[d] < ys[d]) break;
        c[d] = 0;
      }
    }
  });
}

// y (contiguous, same rank as x): y[j0, j1, ...] = x[maps[0][j0], maps[1][j1], ...], or the fill value (x's
// dtype, may be null for zero) where any map entry is kFill.
void gather_maps(const Tensor& x, const Tensor& y, const Maps& maps, const Tensor& fill = Tensor()) {
  if (y.numel() == 0) return;
  int64_t isz = static_cast<int64_t>(y.itemsize());
  const void* fp = fill.defined() ? fill.data_ptr() : nullptr;
  if (y.dim() == 0) {
    std::memcpy(y.data_ptr(), x.data_ptr(), isz);
    return;
  }
  KILN_CHECK(y.dim() <= kMaxGatherDims, Runtime, "gather", "tensors with more than ", kMaxGatherDims,
             " dimensions are not supported");
  Maps off(y.dim());
  for (int64_t d = 0; d < y.dim(); ++d) {
    off[d].resize(maps[d].size());
    for (size_t j = 0; j < maps[d].size(); ++j) off[d][j] = maps[d][j] == kFill ? kFill : maps[d][j] * x.strides()[d];
  }
  switch (isz) {
    case 1: gather_rows<Elem<1>>(x, y, off, fp); break;
    case 2: gather_rows<Elem<2>>(x, y, off, fp); break;
    case 4: gather_rows<Elem<4>>(x, y, off, fp); break;
    case 8: gather_rows<Elem<8>>(x, y, off, fp); break;
    default: gather_rows<Elem<16>>(x, y, off, fp); break;
  }
}

std::vector<int64_t> identity_map(int64_t n) {
  std::vector<int64_t> m(n);
  for (int64_t i = 0; i < n; ++i) m[i] = i;
  return m;
}

int64_t pos_mod(int64_t a, int64_t n) {
  int64_t r = a % n;
  return r < 0 ? r + n : r;
}

void roll_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  const Tensor& y = out[0];
  const Shape &shifts = attr<Shape>(a, 0), &dims = attr<Shape>(a, 1);
  if (x.numel() == 0) return;
  if (dims.empty()) {  // flattened
    int64_t n = x.numel();
    Tensor xf = reshape(contiguous(x), {n});
    Tensor yf = make_view(y, {n}, {1}, y.storage_offset());
    Maps m(1, std::vector<int64_t>(n));
    int64_t s = pos_mod(shifts[0], n);
    for (int64_t j = 0; j < n; ++j) m[0][j] = pos_mod(j - s, n);
    gather_maps(xf, yf, m);
    return;
  }
  Shape total(x.dim(), 0);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], x.dim(), "roll");
    total[d] = pos_mod(total[d] + pos_mod(shifts[i], x.sizes()[d]), x.sizes()[d]);
  }
  Maps m(x.dim());
  for (int64_t d = 0; d < x.dim(); ++d) {
    int64_t n = x.sizes()[d];
    m[d].resize(n);
    for (int64_t j = 0; j < n; ++j) m[d][j] = pos_mod(j - total[d], n);
  }
  gather_maps(x, y, m);
}

void repeat_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  const Tensor& y = out[0];
  if (y.numel() == 0) return;
  const Shape& r = attr<Shape>(a, 0);
  int64_t lead = static_cast<int64_t>(r.size()) - x.dim();
  Shape xs(lead, 1), xst(lead, 0);
  xs.insert(xs.end(), x.sizes().begin(), x.sizes().end());
  xst.insert(xst.end(), x.strides().begin(), x.strides().end());
  Tensor xv = make_view(x, xs, xst, x.storage_offset());
  Maps m(xs.size());
  for (size_t d = 0; d < xs.size(); ++d) {
    m[d].resize(y.sizes()[d]);
    for (int64_t j = 0; j < y.sizes()[d]; ++j) m[d][j] = j % xs[d];
  }
  gather_maps(xv, y, m);
}

// attrs {output_size (int64, or monostate for none)}
void repeat_interleave_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& r = in[0];
  if (r.dtype() != kInt32 && r.dtype() != kInt64) not_implemented(op.name, "repeat_interleave_cpu", r.dtype());
  KILN_CHECK(r.dim() == 1, Runtime, op.name, "repeat_interleave only accept 1D vector as repeat");
  if (r.sizes()[0] == 0) {
    out = {make_tensor({0}, r.dtype())};
    return;
  }
  Tensor rc = contiguous(to_dtype(r, kInt64));
  const int64_t* rp = static_cast<const int64_t*>(rc.data_ptr());
  int64_t n = rc.numel();
  std::vector<int64_t> cum(n);
  int64_t acc = 0;
  bool negative = false;
  for (int64_t i = 0; i < n; ++i) {
    acc += rp[i];
    cum[i] = acc;
    negative = negative || rp[i] < 0;
  }
  bool has_size = std::holds_alternative<int64_t>(a[0]);
  int64_t total = has_size ? std::get<int64_t>(a[0]) : cum[n - 1];
  if (!has_size) KILN_CHECK(!negative, Runtime, op.name, "repeats can not be negative");
  KILN_CHECK(total >= 0, Runtime, op.name, "Trying to create tensor with negative dimension ", total, ": [", total, "]");
  KILN_CHECK(total == cum[n - 1], Runtime, op.name, "allocated size does not match required size");
  KILN_CHECK(!negative, Runtime, op.name, "repeats can not be negative");
  Tensor y = make_tensor({total}, r.dtype());
  visit_integral(r.dtype(), op.name, [&]<class T>() {
    T* yp = static_cast<T*>(y.data_ptr());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = cum[i] - rp[i]; j < cum[i]; ++j) yp[j] = static_cast<T>(i);
  });
  out = {y};
}

void diag_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  const Tensor& y = out[0];
  int64_t k = attr<int64_t>(a, 0);
  if (x.dim() == 1) {
    std::memset(y.data_ptr(), 0, y.nbytes());
    int64_t m = x.sizes()[0];
    if (m == 0) return;
    int64_t n = y.sizes()[0];
    int64_t off = k >= 0 ? k : -k * n;
    copy_(make_view(y, {m}, {n + 1}, y.storage_offset() + off), x);
    return;
  }
  if (y.numel() == 0) return;
  int64_t s0 = x.strides()[0], s1 = x.strides()[1];
  int64_t off = x.storage_offset() + (k >= 0 ? k * s1 : -k * s0);
  copy_(y, make_view(x, {y.numel()}, {s0 + s1}, off));
}

void diag_embed_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  const Tensor& y = out[0];
  std::memset(y.data_ptr(), 0, y.nbytes());
  if (y.numel() == 0) return;
  int64_t nd = x.dim() + 1;
  int64_t d1 = wrap_dim(attr<int64_t>(a, 1), nd, op.name), d2 = wrap_dim(attr<int64_t>(a, 2), nd, op.name);
  copy_(diagonal(y, attr<int64_t>(a, 0), d1, d2), x);
}

void constant_pad_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  const Tensor& y = out[0];
  const Shape& pad = attr<Shape>(a, 0);
  const Scalar& v = attr<Scalar>(a, 1);
  bool any_positive = false;
  for (int64_t p : pad) any_positive = any_positive || p > 0;
  if (any_positive) check_scalar_fits(v, x.dtype(), op.name);
  if (y.numel() == 0) return;
  int64_t lp = static_cast<int64_t>(pad.size()) / 2;
  Maps m(x.dim());
  for (int64_t d = 0; d < x.dim(); ++d) m[d] = identity_map(x.sizes()[d]);
  for (int64_t i = 0; i < lp; ++i) {
    int64_t d = x.dim() - 1 - i, n = x.sizes()[d], pl = pad[2 * i];
    m[d].assign(y.sizes()[d], kFill);
    for (int64_t j = 0; j < y.sizes()[d]; ++j)
      if (j - pl >= 0 && j - pl < n) m[d][j] = j - pl;
  }
  Tensor fill = scalar_tensor(v, x.dtype());
  gather_maps(x, y, m, fill);
}

std::vector<int64_t> pad_map(const std::string& mode, int64_t n, int64_t pl, int64_t pr) {
  int64_t out = n + pl + pr;
  std::vector<int64_t> m(std::max<int64_t>(out, 0), kFill);
  int64_t offset = std::max<int64_t>(0, -pl) - std::max<int64_t>(0, pl);
  if (mode == "reflect") {
    for (int64_t j = 0; j < out; ++j) {
      int64_t i = j < pl ? pl * 2 - j : (j < n + pl ? j : (n + pl - 1) * 2 - j);
      m[j] = i + offset;
    }
  } else if (mode == "replicate") {
    for (int64_t j = 0; j < out; ++j) m[j] = std::min(std::max(pl, j), n + pl - 1) + offset;
  } else {  // circular, as torch builds it: copy the core, then the left pad, then the right pad
    int64_t olo = std::max<int64_t>(pl, 0), ohi = out - std::max<int64_t>(pr, 0), ilo = std::max<int64_t>(-pl, 0);
    for (int64_t j = olo; j < ohi; ++j) m[j] = j - olo + ilo;
    if (pl > 0)
      for (int64_t j = 0; j < pl; ++j) m[j] = m[out - pl - std::max<int64_t>(pr, 0) + j];
    if (pr > 0)
      for (int64_t j = 0; j < pr; ++j) m[out - pr + j] = m[olo + j];
  }
  return m;
}

void nonconst_pad_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  const Tensor& y = out[0];
  const Shape& pad = attr<Shape>(a, 0);
  const std::string& mode = attr<std::string>(a, 1);
  Dtype dt = x.dtype();  // one the meta let through
  if (y.numel() == 0) return;
  int64_t k = static_cast<int64_t>(pad.size()) / 2;
  Maps m(x.dim());
  for (int64_t d = 0; d < x.dim(); ++d) m[d] = identity_map(x.sizes()[d]);
  for (int64_t i = 0; i < k; ++i) {
    int64_t d = x.dim() - 1 - i;
    m[d] = pad_map(mode, x.sizes()[d], pad[2 * i], pad[2 * i + 1]);
  }
  Tensor zero = zeros({}, dt);
  gather_maps(x, y, m, zero);
}

void embedding_kernel(const OpDef& op, const TensorList& in, const Attrs&, TensorList& out) {
  const Tensor &w = in[0], &idx = in[1];
  const Tensor& y = out[0];
  Tensor ii = contiguous(to_dtype(idx, kInt64));
  const int64_t* ip = static_cast<const int64_t*>(ii.data_ptr());
  int64_t N = w.sizes()[0], D = w.sizes()[1];
  for (int64_t i = 0; i < ii.numel(); ++i)
    KILN_CHECK(ip[i] >= 0 && ip[i] < N, Index, op.name, "index out of range in self");
  if (y.numel() == 0) return;
  Tensor wc = contiguous(w);
  size_t row = static_cast<size_t>(D) * w.itemsize();
  const char* wp = static_cast<const char*>(wc.data_ptr());
  char* yp = static_cast<char*>(y.data_ptr());
  for (int64_t i = 0; i < ii.numel(); ++i) std::memcpy(yp + i * row, wp + ip[i] * row, row);
}

KernelRegistrar k_roll{"roll", DeviceType::CPU, roll_kernel};
KernelRegistrar k_repeat{"repeat", DeviceType::CPU, repeat_kernel};
KernelRegistrar k_repeat_interleave{"repeat_interleave", DeviceType::CPU, repeat_interleave_kernel};
KernelRegistrar k_diag{"diag", DeviceType::CPU, diag_kernel};
KernelRegistrar k_diag_embed{"diag_embed", DeviceType::CPU, diag_embed_kernel};
KernelRegistrar k_constant_pad{"constant_pad_nd", DeviceType::CPU, constant_pad_kernel};
KernelRegistrar k_pad{"pad", DeviceType::CPU, nonconst_pad_kernel};
KernelRegistrar k_embedding{"embedding", DeviceType::CPU, embedding_kernel};

}  // namespace
}  // namespace kiln
