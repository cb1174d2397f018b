// CPU kernels of the layer-norm ops (the op-table entries, schemas, metas and derivative are in
// kiln/nn/norm.cpp), registered by op name. Rows are split over threads; the row loops are the kernel
// table's (kernels_norm.cpp, per ISA). The backward sums dweight / dbias over rows in fixed 64-row
// blocks, so its results do not depend on the thread count.
#include <algorithm>
#include <vector>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/dispatch/op.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace {

using cpu::contiguous_of;

const void* ptr_or_null(const TensorList& in, size_t i) {
  return in.size() > i && in[i].defined() ? in[i].data_ptr() : nullptr;
}

// inputs {x, weight?, bias?}; attrs {normalized ndim, eps}; outputs {y, mean, rstd}
void layer_norm_kernel(const OpDef&, const TensorList& in_, const Attrs& a, TensorList& out) {
  TensorList in;
  for (const Tensor& t : in_) in.push_back(t.defined() ? contiguous_of(t) : t);
  const Dtype d = in[0].dtype();
  // half inputs arrive as float32 (nn::functional::layer_norm); the rest is torch's NotImplementedError
  if (d != kFloat32 && d != kFloat64) shape_detail::not_implemented("layer_norm", "LayerNormKernelImpl", d);
  const int64_t n = in[0].numel() == 0 ? 0 : out[1].numel();
  cpu::LayerNormArgs args;
  args.x = in[0].data_ptr(), args.w = ptr_or_null(in, 1), args.b = ptr_or_null(in, 2);
  args.y = out[0].data_ptr(), args.mean = out[1].data_ptr(), args.rstd = out[2].data_ptr();
  args.N = n == 0 ? 0 : in[0].numel() / n;
  args.eps = attr<double>(a, 1);
  cpu::LayerNormFn fn = cpu::cpu_kernels().layer_norm[static_cast<int>(d)];
  cpu::parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(args.N, 1)),
                    [&](int64_t r0, int64_t r1) { fn(args, r0, r1); });
}

template <class T>
void sum_blocks(const std::vector<T>& partial, int64_t nblocks, int64_t N, T* dw, T* db) {
  for (int64_t i = 0; i < N; ++i) dw[i] = db[i] = T(0);
  for (int64_t b = 0; b < nblocks; ++b)
    for (int64_t i = 0; i < N; ++i) {
      dw[i] += partial[b * 2 * N + i];
      db[i] += partial[b * 2 * N + N + i];
    }
}

// inputs {grad, x, mean, rstd, weight?}; outputs {dx, dweight, dbias}
template <class T>
void layer_norm_bwd(const TensorList& in, TensorList& out) {
  const int64_t n = in[2].numel(), N = n == 0 ? 0 : in[1].numel() / n;
  cpu::LayerNormBackwardArgs args;
  args.g = in[0].data_ptr(), args.x = in[1].data_ptr(), args.mean = in[2].data_ptr();
  args.rstd = in[3].data_ptr(), args.w = ptr_or_null(in, 4), args.dx = out[0].data_ptr(), args.N = N;
  cpu::LayerNormBackwardFn fn = cpu::cpu_kernels().layer_norm_backward[static_cast<int>(dtype_of<T>())];
  constexpr int64_t kBlock = 64;
  const int64_t nblocks = (n + kBlock - 1) / kBlock;
  std::vector<T> partial(static_cast<size_t>(nblocks * 2 * N), T(0));
  cpu::parallel_for(nblocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> dxh(static_cast<size_t>(N));
    for (int64_t b = b0; b < b1; ++b)
      fn(args, b * kBlock, std::min(n, (b + 1) * kBlock), partial.data() + b * 2 * N, dxh.data());
  });
  sum_blocks(partial, nblocks, N, static_cast<T*>(out[1].data_ptr()), static_cast<T*>(out[2].data_ptr()));
}

void layer_norm_bwd_kernel(const OpDef&, const TensorList& in_, const Attrs&, TensorList& out) {
  TensorList in;
  for (const Tensor& t : in_) in.push_back(t.defined() ? contiguous_of(t) : t);
  if (in[1].dtype() == kFloat64) return layer_norm_bwd<double>(in, out);
  layer_norm_bwd<float>(in, out);
}

KernelRegistrar k_layer_norm{"native_layer_norm", DeviceType::CPU, layer_norm_kernel};
KernelRegistrar k_layer_norm_bwd{"native_layer_norm_backward", DeviceType::CPU, layer_norm_bwd_kernel};

}  // namespace
}  // namespace kiln
