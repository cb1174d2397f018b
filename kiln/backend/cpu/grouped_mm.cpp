// CPU kernel of _grouped_mm (its layouts, checks and derivative: kiln/ops/grouped_mm.cpp). The offsets
// are read here and every group becomes one product of the packed GEMM's grouped entry, which runs
// them all in one parallel loop over (group, column block) work items; rows or columns past the last
// offset become a product with K = 0, which writes zeros. With a bias, float16 / bfloat16 products
// are summed into float32, the bias added there and the result rounded once (as _fused_baddbmm and
// torch's addmm do).
#include <vector>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/core/visit.h"

namespace kiln {
namespace {

void grouped_mm_kernel(const OpDef& op, const TensorList& in, const Attrs&, TensorList& out) {
  const Tensor &a = in[0], &b = in[1];
  const Tensor offs = in.size() > 2 ? in[2] : Tensor(), bias = in.size() > 3 ? in[3] : Tensor();
  Tensor& c = out[0];
  if (c.numel() == 0) return;
  const int64_t es = static_cast<int64_t>(itemsize(a.dtype()));
  auto at = [&](const Tensor& t, int64_t elems) {
    return static_cast<const char*>(t.data_ptr()) + elems * es;
  };
  // float16 / bfloat16 with a bias: the products into float32, the bias added there, one rounding
  const bool wide = bias.defined() && (a.dtype() == kBFloat16 || a.dtype() == kFloat16);
  Tensor acc = wide ? make_tensor(c.sizes(), kFloat32) : c;
  char* cp = static_cast<char*>(acc.data_ptr());
  const int64_t ces = static_cast<int64_t>(itemsize(acc.dtype()));
  const auto &as = a.strides(), &bs = b.strides(), &cs = acc.strides();
  const auto &asz = a.sizes(), &bsz = b.sizes();
  // the offsets (cumulative group ends), read once for the products and the bias
  const Tensor o = offs.defined() ? cpu::contiguous_of(offs) : Tensor();
  const int32_t* ends = o.defined() ? static_cast<const int32_t*>(o.data_ptr()) : nullptr;
  const int64_t G = o.defined() ? o.numel() : 0, last = G ? ends[G - 1] : 0;
  std::vector<cpu::GemmArgs> items;
  auto add = [&](int64_t M, int64_t N, int64_t K, const char* ap, int64_t a_rs, int64_t a_cs, const char* bp, int64_t b_rs,
                 int64_t b_cs, char* op_, int64_t c_rs, int64_t c_cs) {
    cpu::GemmArgs g;
    g.M = M, g.N = N, g.K = K;
    g.a = ap, g.a_rs = a_rs, g.a_cs = a_cs, g.b = bp, g.b_rs = b_rs, g.b_cs = b_cs;
    g.c = op_, g.c_rs = c_rs, g.c_cs = c_cs;
    items.push_back(g);
  };
  if (!offs.defined()) {  // 3D x 3D
    for (int64_t g = 0; g < asz[0]; ++g)
      add(asz[1], bsz[2], asz[2], at(a, g * as[0]), as[1], as[2], at(b, g * bs[0]), bs[1], bs[2], cp + g * cs[0] * ces,
          cs[1], cs[2]);
  } else {
    // the dimension the offsets cut: A's rows (2D x 3D), B's columns (3D x 2D), K (2D x 2D)
    const int64_t extent = a.dim() == 2 && b.dim() == 3 ? asz[0] : a.dim() == 3 ? bsz[1] : asz[1];
    int64_t prev = 0;
    for (int64_t g = 0; g < G; ++g) {
      KILN_CHECK(ends[g] >= prev && ends[g] <= extent, Runtime, op.name, "offs must be non-decreasing and within [0, ",
                 extent, "], got offs[", g, "] = ", ends[g], (g ? " after " : ""), (g ? std::to_string(prev) : ""));
      const int64_t s = prev, e = ends[g];
      prev = e;
      if (a.dim() == 2 && b.dim() == 3)
        add(e - s, bsz[2], asz[1], at(a, s * as[0]), as[0], as[1], at(b, g * bs[0]), bs[1], bs[2], cp + s * cs[0] * ces,
            cs[0], cs[1]);
      else if (a.dim() == 3)
        add(asz[1], e - s, asz[2], at(a, g * as[0]), as[1], as[2], at(b, s * bs[1]), bs[0], bs[1], cp + s * cs[1] * ces,
            cs[0], cs[1]);
      else
        add(asz[0], bsz[1], e - s, at(a, s * as[1]), as[0], as[1], at(b, s * bs[0]), bs[0], bs[1], cp + g * cs[0] * ces,
            cs[1], cs[2]);
    }
    if (prev < extent) {  // past the last group: zeros (a product with K = 0)
      if (a.dim() == 2 && b.dim() == 3)
        add(extent - prev, bsz[2], 0, nullptr, 0, 0, nullptr, 0, 0, cp + prev * cs[0] * ces, cs[0], cs[1]);
      else if (a.dim() == 3)
        add(asz[1], extent - prev, 0, nullptr, 0, 0, nullptr, 0, 0, cp + prev * cs[1] * ces, cs[0], cs[1]);
    }
  }
  const auto& kt = cpu::cpu_kernels();
  (wide ? kt.gemm_grouped_f32 : kt.gemm_grouped)[static_cast<int>(a.dtype())](items.data(),
                                                                           static_cast<int64_t>(items.size()));

  if (bias.defined()) {
    Tensor bf = cpu::converted(bias, kFloat32);
    const float* bv = static_cast<const float*>(bf.data_ptr());
    const int64_t N = c.sizes().back(), rows = c.numel() / N;
    // the bias row of each output row: the group of a 2D x 3D row, the batch of a 3-D output, else 0
    std::vector<int64_t> row_group(static_cast<size_t>(rows), 0);
    if (c.dim() == 3) {
      for (int64_t r = 0; r < rows; ++r) row_group[r] = r / c.sizes()[1];
    } else if (a.dim() == 2 && b.dim() == 3) {
      for (int64_t g = 0, s = 0; g < G; s = ends[g], ++g)
        for (int64_t r = s; r < ends[g]; ++r) row_group[r] = g;
      for (int64_t r = last; r < rows; ++r) row_group[r] = -1;  // past offs: zeros stay
    }
    const bool per_column = c.dim() == 2 && a.dim() == 3;  // 3D x 2D: bias (N,), none past the last group
    const int64_t cols = per_column ? last : N;
    float* p = static_cast<float*>(acc.data_ptr());  // (float32: C itself)
    const cpu::CastFn round = wide ? kt.cast[static_cast<int>(kFloat32)][static_cast<int>(c.dtype())] : nullptr;
    char* dst = static_cast<char*>(c.data_ptr());
    const int64_t osz = static_cast<int64_t>(itemsize(c.dtype()));
    cpu::parallel_for(rows, std::max<int64_t>(1, cpu::kGrainSize / N), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        if (row_group[r] >= 0) {
          const float* br = per_column ? bv : bv + row_group[r] * N;
          for (int64_t j = 0; j < cols; ++j) p[r * N + j] = p[r * N + j] + br[j];
        }
        if (round) round(dst + r * N * osz, reinterpret_cast<const char*>(p + r * N), N, osz, sizeof(float));
      }
    });
  }
}
KernelRegistrar k_grouped_mm{"_grouped_mm", DeviceType::CPU, grouped_mm_kernel};

}  // namespace
}  // namespace kiln
