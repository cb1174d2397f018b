// CPU kernels of the gathering ops: index_select, gather, nonzero, masked_select, flip, tril / triu,
// and advanced indexing (index, index_put_) (their op-table entries, schemas, metas and front ends
// are in kiln/ops/index.cpp), registered by op name.
#include <sstream>
#include <cstring>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

Tensor as_int64_index(const Tensor& idx, const char* op) {
  KILN_CHECK(idx.dtype() == kInt64 || idx.dtype() == kInt32, Index, op, "expected index to be an int64 or "
             "int32 tensor, got ", dtype_name(idx.dtype()));
  return contiguous(to_dtype(idx, kInt64));
}

void index_select_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  Tensor idx = as_int64_index(in[1], "index_select");
  int64_t d = wrap_dim(std::get<int64_t>(a[0]), x.dim(), "index_select");
  int64_t n = x.dim() ? x.sizes()[d] : 1;
  const int64_t* chk = static_cast<const int64_t*>(idx.data_ptr());
  for (int64_t i = 0; i < idx.numel(); ++i) {  // torch: no negative indices; its error type depends on dim
    if (d == 0) KILN_CHECK(chk[i] >= 0 && chk[i] < n, Index, "index_select", "index out of range in self");
    KILN_CHECK(chk[i] >= 0 && chk[i] < n, Runtime, "index_select", "INDICES element is out of DATA bounds, id=",
               chk[i], " axis_dim=", n);
  }
  if (x.dim() == 0) {
    copy_(out[0], x);
    return;
  }
  TensorList ind(d + 1);  // undefined entries keep their whole dim
  ind[d] = reshape(idx, {idx.numel()});
  copy_(out[0], kiln::index(x, ind));
}

void gather_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  Tensor idx = to_dtype(in[1], kInt64);
  Tensor& y = out[0];
  int64_t d = x.dim() ? wrap_dim(std::get<int64_t>(a[0]), x.dim(), "gather") : 0;
  int64_t n = x.dim() ? x.sizes()[d] : 1;
  int64_t xs = x.dim() ? x.strides()[d] : 0;
  // iterate over the index shape; x viewed with the index's shape and stride 0 along d
  Shape xsz = idx.sizes(), xst = x.strides();
  if (x.dim()) xst[d] = 0;
  Tensor xv = x.dim() ? make_view(x, xsz, xst, x.storage_offset()) : x;
  size_t isz = x.itemsize();
  {  // validate first (torch: RuntimeError naming the first bad index; no negative indices)
    Tensor ic = contiguous(idx);
    const int64_t* ip = static_cast<const int64_t*>(ic.data_ptr());
    for (int64_t i = 0; i < ic.numel(); ++i)
      KILN_CHECK(ip[i] >= 0 && ip[i] < n, Runtime, "gather", "index ", ip[i], " is out of bounds for dimension ", d,
                 " with size ", n);
  }
  cpu::for_each(cpu::make_loop({&y, &xv, &idx}, idx.sizes()), [&](char** p, const int64_t* s, int64_t cnt) {
    for (int64_t i = 0; i < cnt; ++i) {
      int64_t k = *reinterpret_cast<const int64_t*>(p[2] + i * s[2]);
      std::memcpy(p[0] + i * s[0], p[1] + i * s[1] + k * xs * static_cast<int64_t>(isz), isz);
    }
  });
}

void nonzero_kernel(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  Tensor m = contiguous(ne(in[0], Scalar(0)));
  const bool* p = static_cast<const bool*>(m.data_ptr());
  int64_t n = m.numel(), nd = m.dim(), cnt = 0;
  for (int64_t i = 0; i < n; ++i) cnt += p[i];
  Tensor y = make_tensor({cnt, nd}, kInt64);
  int64_t* yp = static_cast<int64_t*>(y.data_ptr());
  for (int64_t i = 0, r = 0; i < n; ++i) {
    if (!p[i]) continue;
    int64_t rem = i;
    for (int64_t d = nd - 1; d >= 0; --d) {
      yp[r * nd + d] = rem % m.sizes()[d];
      rem /= m.sizes()[d];
    }
    ++r;
  }
  out = {y};
}

void masked_select_kernel(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  KILN_CHECK(in[1].dtype() == kBool, Runtime, "masked_select", "masked_select: expected BoolTensor for mask");
  auto bt = broadcast_tensors({in[0], in[1]});
  Tensor x = contiguous(bt[0]), m = contiguous(bt[1]);
  const bool* mp = static_cast<const bool*>(m.data_ptr());
  int64_t cnt = 0;
  for (int64_t i = 0; i < m.numel(); ++i) cnt += mp[i];
  Tensor y = make_tensor({cnt}, x.dtype());
  size_t isz = x.itemsize();
  const char* xp = static_cast<const char*>(x.data_ptr());
  char* yp = static_cast<char*>(y.data_ptr());
  for (int64_t i = 0, r = 0; i < m.numel(); ++i)
    if (mp[i]) std::memcpy(yp + (r++) * isz, xp + i * isz, isz);
  out = {y};
}

void flip_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  if (x.numel() == 0) return;  // (an empty tensor's strides are unchecked: no offset arithmetic on them)
  Shape st = x.strides();
  int64_t off = x.storage_offset();
  for (int64_t d0 : std::get<Shape>(a[0])) {  // distinct: flip's meta checked them
    int64_t d = wrap_dim(d0, x.dim(), "flip");
    if (x.sizes()[d] > 0) off += (x.sizes()[d] - 1) * st[d];
    st[d] = -st[d];
  }
  copy_(out[0], make_view(x, x.sizes(), st, off));
}

void tri_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  int64_t k = std::get<int64_t>(a[0]);
  int64_t R = x.sizes()[x.dim() - 2], C = x.sizes()[x.dim() - 1];
  Tensor r = reshape(arange(R), {R, 1}), c = reshape(arange(C), {1, C});
  Tensor keep = op.code == 0 ? le(sub(c, r), Scalar(k)) : ge(sub(c, r), Scalar(k));
  copy_(out[0], where(keep, x, zeros({}, x.dtype())));
}

struct AdvPlan {
  Tensor xp;            // x with the advanced dims moved to the front
  Shape bshape;         // broadcast shape of the index tensors
  Shape rest_sizes, rest_strides;
  Tensor offsets;       // int64, bshape: element offsets into xp for each index combination
  bool consecutive = true;
  int64_t first = 0;    // position of the first advanced dim
};

AdvPlan plan_advanced(const Tensor& x, const TensorList& indices, const char* op) {
  KILN_CHECK(static_cast<int64_t>(indices.size()) <= x.dim(), Index, op, "too many indices for tensor of dimension ",
             x.dim(), " (got ", indices.size(), ")");
  // expand bool masks into long index tensors
  std::vector<std::pair<int64_t, Tensor>> adv;
  int64_t d = 0;
  for (const Tensor& t : indices) {
    if (!t.defined()) {
      ++d;
      continue;
    }
    if (t.dtype() == kBool || t.dtype() == kUInt8) {
      Tensor m = t.dtype() == kBool ? t : ne(t, Scalar(0));
      KILN_CHECK(d + m.dim() <= x.dim(), Index, op, "too many indices for tensor of dimension ", x.dim());
      for (int64_t k = 0; k < m.dim(); ++k)
        KILN_CHECK(m.sizes()[k] == x.sizes()[d + k], Index, op, "The shape of the mask ", m.sizes(), " at index ", k,
                   " does not match the shape of the indexed tensor ", x.sizes(), " at index ", d + k);
      Tensor nz = nonzero(m);
      for (int64_t k = 0; k < m.dim(); ++k) adv.push_back({d + k, contiguous(select(nz, 1, k))});
      d += m.dim();
    } else {
      KILN_CHECK(t.dtype() == kInt64 || t.dtype() == kInt32, Index, op, "tensors used as indices must be long, "
                 "int, byte or bool tensors");
      adv.push_back({d, to_dtype(t, kInt64)});
      ++d;
    }
  }
  AdvPlan p;
  Shape perm;
  std::vector<bool> is_adv(x.dim(), false);
  for (auto& [dim, t] : adv) is_adv[dim] = true;
  for (size_t i = 1; i < adv.size(); ++i)
    if (adv[i].first != adv[i - 1].first + 1) p.consecutive = false;
  p.first = adv.empty() ? 0 : adv[0].first;
  for (auto& [dim, t] : adv) perm.push_back(dim);
  for (int64_t i = 0; i < x.dim(); ++i)
    if (!is_adv[i]) perm.push_back(i), p.rest_sizes.push_back(x.sizes()[i]), p.rest_strides.push_back(x.strides()[i]);
  p.xp = x;
  for (auto& [dim, t] : adv) {
    try {
      p.bshape = broadcast_shapes(p.bshape, t.sizes(), op);
    } catch (const Error&) {  // torch's IndexError, naming every index tensor's shape
      std::ostringstream shapes;
      for (size_t i = 0; i < adv.size(); ++i) {
        shapes << (i ? ", " : "");
        detail::stream_one(shapes, adv[i].second.sizes());
      }
      KILN_FAIL(Index, op, "shape mismatch: indexing tensors could not be broadcast together with shapes ",
                shapes.str());
    }
  }
  Tensor off = zeros(p.bshape, kInt64);
  for (auto& [dim, t] : adv) {
    int64_t n = x.sizes()[dim];
    Tensor it = contiguous(t);
    const int64_t* ip = static_cast<const int64_t*>(it.data_ptr());
    for (int64_t i = 0; i < it.numel(); ++i)
      KILN_CHECK(ip[i] >= -n && ip[i] < n, Index, op, "index ", ip[i], " is out of bounds for dimension ", dim,
                 " with size ", n);
    Tensor w = where(lt(t, Scalar(0)), add(t, Scalar(n)), t);
    off = add(off, mul(w, Scalar(x.strides()[dim])));
  }
  p.offsets = contiguous(expand(off, p.bshape));
  return p;
}

// Shape of the R layout: bshape + rest; strides of x viewed that way (0 on the bshape dims).
Shape r_shape(const AdvPlan& p) {
  Shape s = p.bshape;
  s.insert(s.end(), p.rest_sizes.begin(), p.rest_sizes.end());
  return s;
}

// Final result layout: bshape moved to the first advanced dim when the advanced dims were consecutive.
Shape final_perm(const AdvPlan& p) {
  int64_t nb = static_cast<int64_t>(p.bshape.size()), nr = static_cast<int64_t>(p.rest_sizes.size());
  Shape perm;
  if (!p.consecutive || p.first == 0) {
    for (int64_t i = 0; i < nb + nr; ++i) perm.push_back(i);
    return perm;
  }
  for (int64_t i = 0; i < p.first; ++i) perm.push_back(nb + i);
  for (int64_t i = 0; i < nb; ++i) perm.push_back(i);
  for (int64_t i = p.first; i < nr; ++i) perm.push_back(nb + i);
  return perm;
}

// x and the offsets viewed in the R layout: x with stride 0 on the index dims (the offsets add the
// indexed position), the offsets with stride 0 on the remaining dims.
std::pair<Tensor, Tensor> r_views(const Tensor& x, const AdvPlan& p) {
  Shape rs = r_shape(p);
  Shape x_st(p.bshape.size(), 0);
  x_st.insert(x_st.end(), p.rest_strides.begin(), p.rest_strides.end());
  Shape off_sz = p.bshape, off_st = contiguous_strides(p.bshape);
  for (size_t i = 0; i < p.rest_sizes.size(); ++i) off_sz.push_back(p.rest_sizes[i]), off_st.push_back(0);
  return {make_view(x, rs, x_st, x.storage_offset()), make_view(p.offsets, off_sz, off_st, 0)};
}

void index_kernel(const OpDef&, const TensorList& in, const Attrs&, TensorList& out) {
  const Tensor& x = in[0];
  TensorList idx(in.begin() + 1, in.end());
  AdvPlan p = plan_advanced(x, idx, "index");
  Shape rs = r_shape(p);
  Tensor r = make_tensor(rs, x.dtype());
  auto [src, offv] = r_views(x, p);
  int64_t isz = static_cast<int64_t>(x.itemsize());
  cpu::for_each(cpu::make_loop({&r, &src, &offv}, rs), [&](char** d, const int64_t* s, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(d[0] + i * s[0], d[1] + i * s[1] + *reinterpret_cast<const int64_t*>(d[2] + i * s[2]) * isz, isz);
  });
  out = {contiguous(permute(r, final_perm(p)))};
}

// inputs: x, values, indices...; attrs {accumulate}
void index_put_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  Tensor values = in[1];
  bool acc = std::get<bool>(a[0]);
  TensorList idx(in.begin() + 2, in.end());
  AdvPlan p = plan_advanced(x, idx, "index_put_");
  Shape rs = r_shape(p);
  Shape fperm = final_perm(p);
  Shape final_shape(rs.size());
  for (size_t i = 0; i < fperm.size(); ++i) final_shape[i] = rs[fperm[i]];
  Tensor v = to_dtype(values, x.dtype());
  KILN_CHECK(shape_numel(broadcast_shapes(final_shape, v.sizes(), "index_put_")) == shape_numel(final_shape) &&
                 broadcast_shapes(final_shape, v.sizes(), "index_put_") == final_shape,
             Runtime, "index_put_", "shape mismatch: value tensor of shape ", v.sizes(),
             " cannot be broadcast to indexing result of shape ", final_shape);
  Tensor vf = expand(v, final_shape);
  Shape inv(fperm.size());
  for (size_t i = 0; i < fperm.size(); ++i) inv[fperm[i]] = static_cast<int64_t>(i);
  Tensor vr = permute(vf, inv);  // R layout
  auto [dst, offv] = r_views(x, p);
  int64_t isz = static_cast<int64_t>(x.itemsize());
  // serial: duplicate indices write in order (last wins, or all accumulate)
  cpu::Loop L = cpu::make_loop({&dst, &vr, &offv}, rs);
  if (!acc) {
    cpu::loop_range(L, 0, L.numel, [&](char** d, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(d[0] + i * s[0] + *reinterpret_cast<const int64_t*>(d[2] + i * s[2]) * isz, d[1] + i * s[1], isz);
    });
  } else {
    visit_numeric(x.dtype(), "index_put_", [&]<class T>() {
      cpu::loop_range(L, 0, L.numel, [&](char** d, const int64_t* s, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          T* o = reinterpret_cast<T*>(d[0] + i * s[0] + *reinterpret_cast<const int64_t*>(d[2] + i * s[2]) * isz);
          const T* val = reinterpret_cast<const T*>(d[1] + i * s[1]);
          if constexpr (std::is_same_v<T, bool>) *o = *o || *val;
          else *o = static_cast<T>(static_cast<opmath_t<T>>(*o) + static_cast<opmath_t<T>>(*val));
        }
      });
    });
  }
  x.bump_version();
  out = {x};
}

KernelRegistrar k_index_select{"index_select", DeviceType::CPU, index_select_kernel};
KernelRegistrar k_gather{"gather", DeviceType::CPU, gather_kernel};
KernelRegistrar k_nonzero{"nonzero", DeviceType::CPU, nonzero_kernel};
KernelRegistrar k_masked_select{"masked_select", DeviceType::CPU, masked_select_kernel};
KernelRegistrar k_flip{"flip", DeviceType::CPU, flip_kernel};
KernelRegistrar k_tril{"tril", DeviceType::CPU, tri_kernel};
KernelRegistrar k_triu{"triu", DeviceType::CPU, tri_kernel};
KernelRegistrar k_index{"index", DeviceType::CPU, index_kernel};
KernelRegistrar k_index_put{"index_put_", DeviceType::CPU, index_put_kernel};

}  // namespace
}  // namespace kiln
