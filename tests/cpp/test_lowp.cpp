// The low-precision and mixture-of-experts API from C++ (issue 10): _scaled_mm with its derivative,
// _grouped_mm, nn::MixtureOfExperts and nn::Float8Linear, each against the same computation written
// with plain float32 ops (the Python suite compares them with torch).
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "kiln/nn/nn.h"

using namespace kiln;

namespace {

float max_diff(const Tensor& a, const Tensor& b) {
  return amax(abs(sub(to_dtype(a, kFloat32), to_dtype(b, kFloat32)))).item<float>();
}

TEST(Lowp, ScaledMmRowwiseWithBiasAndGradient) {
  manual_seed(1);
  Tensor a = to_dtype(randn({9, 40}), kFloat8_e4m3fn), b = to_dtype(randn({40, 7}), kFloat8_e5m2);
  Tensor sa = add(rand({9, 1}), Scalar(0.5)), sb = add(rand({1, 7}), Scalar(0.5)), bias = randn({7});
  a.requires_grad_(true), b.requires_grad_(true);
  Tensor y = _scaled_mm(a, b, sa, sb, bias, Tensor(), kFloat32);
  Tensor a32 = to_dtype(a.detach(), kFloat32), b32 = to_dtype(b.detach(), kFloat32);
  Tensor want = add(mul(mul(mm(a32, b32), sa), sb), bias);
  EXPECT_LT(max_diff(y, want), 1e-4f);
  sum(y).backward();
  Tensor g = ones({9, 7});
  EXPECT_LT(max_diff(a.grad(), mul(mm(mul(g, sb), t(b32)), sa)), 1e-4f);
  EXPECT_EQ(a.grad().dtype(), kFloat32);  // kept wide, not rounded to float8
  EXPECT_THROW(_scaled_mm(a.detach(), b.detach(), ones({9}), ones({7})), Error);
}

TEST(Lowp, GroupedMmLayoutsAgainstLoops) {
  manual_seed(2);
  Tensor x = randn({10, 6}), w = randn({3, 6, 5});
  int32_t ends[] = {2, 2, 8};
  Tensor offs = clone(from_blob(ends, {3}, {1}, kInt32));
  Tensor y = _grouped_mm(x, w, offs);
  EXPECT_LT(max_diff(slice(y, 0, 0, 2), mm(slice(x, 0, 0, 2), select(w, 0, 0))), 1e-5f);
  EXPECT_LT(max_diff(slice(y, 0, 2, 8), mm(slice(x, 0, 2, 8), select(w, 0, 2))), 1e-5f);
  EXPECT_EQ(amax(abs(slice(y, 0, 8, 10))).item<float>(), 0.0f);  // past offs[-1]
  Tensor a3 = randn({3, 4, 6}), b3 = randn({3, 6, 5});
  EXPECT_LT(max_diff(_grouped_mm(a3, b3), bmm(a3, b3)), 1e-5f);
}

TEST(Lowp, MixtureOfExpertsMatchesDenseWhenEveryExpertIsChosen) {
  // with top_k == num_experts every token visits every expert: out = sum_e p_e * expert_e(x)
  manual_seed(3);
  nn::MixtureOfExperts moe(8, 12, 3, 3);
  Tensor x = randn({5, 8});
  Tensor p = softmax(matmul(x, t(moe.param("router"))), -1);
  Tensor want = zeros({5, 8});
  for (int64_t e = 0; e < 3; ++e) {
    Tensor h = silu(matmul(x, select(moe.param("w1"), 0, e)));
    want = add(want, mul(matmul(h, select(moe.param("w2"), 0, e)), slice(p, 1, e, e + 1)));
  }
  EXPECT_LT(max_diff(moe.forward(x), want), 1e-5f);
}

TEST(Lowp, Float8LinearCloseToLinearAndFreezes) {
  manual_seed(4);
  nn::Float8Linear f(32, 16);
  Tensor x = randn({4, 32});
  Tensor y = f.forward(x), ref = F::linear(x, f.param("weight"), f.param("bias"));
  EXPECT_LT(max_diff(y, ref), 0.1f * amax(abs(ref)).item<float>());
  f.freeze();
  EXPECT_TRUE(f.frozen());
  EXPECT_EQ(f.buffer("weight_f8").dtype(), kFloat8_e4m3fn);
  EXPECT_EQ(max_diff(f.forward(x), y), 0.0f);
}

}  // namespace
