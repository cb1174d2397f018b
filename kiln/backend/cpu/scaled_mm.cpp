// CPU kernel of _scaled_mm (its schema, checks and derivative: kiln/ops/scaled_mm.cpp). The float8
// product goes through the packed GEMM's float8 entries (kernels_gemm.cpp: one byte read per
// element; bfloat16 pairs and vdpbf16ps where the CPU has AVX512-BF16) into float32; one pass over
// the output then applies the scales, the bias and scale_result and rounds once to the out dtype.
#include <vector>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

bool rowwise_contiguous(const Tensor& s) {  // (M, 1) or (1, N): the long dimension's stride is 1
  for (int64_t d = 0; d < s.dim(); ++d)
    if (s.sizes()[d] > 1 && s.strides()[d] != 1) return false;
  return true;
}

float scalar_f32(const Tensor& s) { return *static_cast<const float*>(cpu::contiguous_of(s).data_ptr()); }

void scaled_mm_kernel(const OpDef& op, const TensorList& in, const Attrs& attrs, TensorList& out) {
  const Tensor &a = in[0], &b = in[1], &sa = in[2], &sb = in[3];
  const Tensor bias = in.size() > 4 ? in[4] : Tensor(), sr = in.size() > 5 ? in[5] : Tensor();
  const bool tensorwise = sa.numel() == 1 && sb.numel() == 1;
  KILN_CHECK(tensorwise || (rowwise_contiguous(sa) && rowwise_contiguous(sb)), Value, op.name,
             "Invalid scaling configuration: for RowWise scaling, scale_a (", a.sizes()[0], ", 1) and scale_b (1, ",
             b.sizes()[1], ") should both be contiguous. Got scale_a.stride()=", sa.strides(),
             " and scale_b.stride()=", sb.strides());
  if (!tensorwise) {  // torch checks the second stride itself too, even of a dimension of size 1 (not empty)
    KILN_CHECK(sa.numel() == 0 || sa.strides()[1] == 1, Value, op.name, "expected scale_a.stride(1) to be 1, but got ", sa.strides()[1]);
    KILN_CHECK(sb.numel() == 0 || sb.strides()[1] == 1, Value, op.name, "expected scale_b.stride(1) to be 1, but got ", sb.strides()[1]);
  }
  Tensor& c = out[0];
  const int64_t M = a.sizes()[0], K = a.sizes()[1], N = b.sizes()[1];
  if (c.numel() == 0) return;

  // A @ B in float32: into C itself when C is float32 (the output is contiguous)
  const bool in_place = c.dtype() == kFloat32;
  Tensor acc = in_place ? c : make_tensor({M, N}, kFloat32);
  float* p = static_cast<float*>(acc.data_ptr());
  // The epilogue, one pass a row: ((acc * scale_a[i]) * scale_b[j] + bias[j]) * (1 / scale_result),
  // then rounded once into C (the table's cast loop) unless C is the float32 buffer itself. A row's
  // result depends on that row alone, whichever thread runs it.
  const Tensor sa_c = cpu::contiguous_of(sa);  // (held: a copy would die with the expression)
  const float* pa = static_cast<const float*>(sa_c.data_ptr());
  std::vector<float> col(static_cast<size_t>(N)), bv;
  {
    const Tensor sb_c = cpu::contiguous_of(sb);
    const float* pb = static_cast<const float*>(sb_c.data_ptr());
    for (int64_t j = 0; j < N; ++j) col[j] = pb[tensorwise ? 0 : j];
  }
  if (bias.defined()) {
    Tensor bf = cpu::converted(bias, kFloat32);  // N elements (the meta checked), any shape
    const float* q = static_cast<const float*>(bf.data_ptr());
    bv.assign(q, q + N);
  }
  const bool explicit_f8 = std::holds_alternative<Dtype>(attrs[0]) && is_float8(c.dtype());  // out_dtype given
  const float inv = explicit_f8 && sr.defined() ? 1.0f / scalar_f32(sr) : 1.0f;
  const bool apply_inv = explicit_f8 && sr.defined();
  const cpu::CastFn cast = in_place ? nullptr : cpu::cpu_kernels().cast[static_cast<int>(kFloat32)][static_cast<int>(c.dtype())];
  char* dst = static_cast<char*>(c.data_ptr());
  const int64_t osize = static_cast<int64_t>(itemsize(c.dtype()));
  const auto epilogue = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* row = p + i * N;
      const float s_i = pa[tensorwise ? 0 : i];
      for (int64_t j = 0; j < N; ++j) row[j] = row[j] * s_i * col[j];
      if (!bv.empty())
        for (int64_t j = 0; j < N; ++j) row[j] = row[j] + bv[j];
      if (apply_inv)
        for (int64_t j = 0; j < N; ++j) row[j] = row[j] * inv;
      if (cast) cast(dst + i * N * osize, reinterpret_cast<const char*>(row), N, osize, sizeof(float));
    }
  };
  // The product, with the epilogue run on each block of rows as it is finished (GemmArgs::row_epilogue:
  // where the product splits C by rows, inside its region, not in a region of its own; K = 0: zeros).
  cpu::GemmArgs g;
  g.M = M, g.N = N, g.K = K;
  g.a = a.data_ptr(), g.a_rs = a.strides()[0], g.a_cs = a.strides()[1];
  g.b = b.data_ptr(), g.b_rs = b.strides()[0], g.b_cs = b.strides()[1];
  g.c = p, g.c_rs = N, g.c_cs = 1;
  g.set_row_epilogue(epilogue);
  cpu::cpu_kernels().gemm_f8[a.dtype() == kFloat8_e5m2][b.dtype() == kFloat8_e5m2](g);
}
KernelRegistrar k_scaled_mm{"_scaled_mm", DeviceType::CPU, scaled_mm_kernel};

}  // namespace
}  // namespace kiln
