// The low-precision and mixture-of-experts API from C++ (issue 10): _scaled_mm with its derivative,
// _grouped_mm, nn::MixtureOfExperts and nn::Float8Linear, each against the same computation written
// with plain float32 ops (the Python suite compares them with torch).
#include <gtest/gtest.h>

#include <functional>

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

// nn::functional::scaled_mm / grouped_mm / quantize_float8: the C++ forms of torch.nn.functional's.
ErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no error";
  return ErrorKind::Assertion;
}

TEST(Lowp, FunctionalScaledMmRecipesAndErrors) {
  namespace F = nn::functional;
  manual_seed(3);
  Tensor x = randn({6, 32}), w = randn({5, 32});
  auto [a, sa] = quantize_float8(x, kFloat8_e4m3fn, true);   // (6, 32), (6, 1)
  auto [bt, sbt] = quantize_float8(w, kFloat8_e4m3fn, true);  // (5, 32), (5, 1)
  Tensor b = t(bt), sb = t(sbt);                              // (32, 5), (1, 5)
  Tensor row = F::scaled_mm(a, b, sa, F::ScalingType::RowWise, sb, F::ScalingType::RowWise);
  EXPECT_EQ(row.dtype(), kBFloat16);
  EXPECT_TRUE(equal(row, _scaled_mm(a, b, sa, sb, Tensor(), Tensor(), kBFloat16)));
  EXPECT_LT(max_diff(row, mm(x, t(w))), 0.25f);  // float8 rounding of x and w
  EXPECT_LT(max_diff(dequantize_float8(a, sa), x), 0.07f * amax(abs(x)).item<float>());
  auto [at, sat] = quantize_float8(x);  // tensor-wise: one scale, shape ()
  F::ScaledMMOptions o;
  o.output_dtype = kFloat32, o.bias = ones({5});
  Tensor tw = F::scaled_mm(at, b, reshape(sat, {1, 1, 1}), F::ScalingType::TensorWise, ones({1}),
                           F::ScalingType::TensorWise, o);  // one element of any rank
  EXPECT_TRUE(equal(tw, _scaled_mm(at, b, sat, ones({}), ones({5}), Tensor(), kFloat32)));
  // torch's error classes: swizzles (both given, one a swizzle), shapes, bias size, recipes
  auto rw = [&](const F::ScaledMMOptions& opt) {
    return [&, opt] { F::scaled_mm(a, b, sa, F::ScalingType::RowWise, sb, F::ScalingType::RowWise, opt); };
  };
  F::ScaledMMOptions sw;
  sw.swizzle_a = F::SwizzleType::NO_SWIZZLE, sw.swizzle_b = F::SwizzleType::SWIZZLE_32_4_4;
  EXPECT_EQ(kind_of(rw(sw)), ErrorKind::Value);
  sw.swizzle_b.reset();
  EXPECT_NO_THROW(rw(sw)());
  F::ScaledMMOptions bad_bias;
  bad_bias.bias = ones({4});
  EXPECT_EQ(kind_of(rw(bad_bias)), ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { F::scaled_mm(a, b, sa, F::ScalingType::RowWise, sb, F::ScalingType::TensorWise); }),
            ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { F::scaled_mm(a, t(a), sa, F::ScalingType::RowWise, sb, F::ScalingType::RowWise); }),
            ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { F::scaled_mm(a, b, ones({}), F::ScalingType::RowWise, ones({}), F::ScalingType::RowWise); }),
            ErrorKind::Index);
  // K = 0: zeros, the bias not added (torch's scaled_mm; _scaled_mm adds it)
  F::ScaledMMOptions k0;
  k0.bias = ones({5});
  Tensor z = F::scaled_mm(narrow(a, 1, 0, 0), narrow(b, 0, 0, 0), ones({}), F::ScalingType::TensorWise, ones({}),
                          F::ScalingType::TensorWise, k0);
  EXPECT_TRUE(equal(z, zeros({6, 5}, kBFloat16)));
  // grouped_mm: _grouped_mm under torch's functional name
  int32_t ends[2] = {2, 6};
  Tensor ga = randn({6, 8}), gb = randn({2, 8, 3}), offs = clone(from_blob(ends, {2}, {1}, kInt32));
  EXPECT_TRUE(equal(F::grouped_mm(ga, gb, offs), _grouped_mm(ga, gb, offs)));
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
