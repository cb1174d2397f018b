// kiln::func::vmap from C++ (the Python suite compares kiln.func.vmap with torch.func.vmap): batched
// dot products and matrix-vector products against closed forms, per-example gradients of a
// quadratic (2 x per example), a shared input, out_dims and the per-example fallback against closed
// forms, and its errors.
#include <gtest/gtest.h>

#include "kiln/kiln.h"

using namespace kiln;

namespace {
double max_abs_diff(const Tensor& a, const Tensor& b) { return max(abs(sub(a, b))).item<double>(); }
}  // namespace

TEST(Vmap, DotAndMatvecClosedForms) {
  // rows of arange: x_b = [3b, 3b+1, 3b+2], y = [1, 1, 1]: x_b . y = 9b + 3
  Tensor x = reshape(arange(Scalar(12), TensorOptions(kFloat64)), {4, 3});
  Tensor y = ones({3}, kFloat64);
  TensorList r = func::vmap([](const TensorList& in) -> TensorList { return {sum(mul(in[0], in[1]))}; }, {x, y},
                            {0, std::nullopt});
  ASSERT_EQ(r[0].sizes(), (Shape{4}));
  for (int64_t b = 0; b < 4; ++b) EXPECT_DOUBLE_EQ(select(r[0], 0, b).item<double>(), 9.0 * b + 3);
  // a shared matrix times batched vectors through matmul (traced as bmm): A x_b with A = 2 I
  Tensor A = mul(eye(3, std::nullopt, kFloat64), Scalar(2));
  TensorList m = func::vmap([](const TensorList& in) -> TensorList { return {matmul(in[0], in[1])}; }, {A, x},
                            {std::nullopt, 0});
  EXPECT_LT(max_abs_diff(m[0], mul(x, Scalar(2))), 1e-15);
  EXPECT_EQ(func::last_vmap_stats().loops, 0);  // every op through a rule
}

TEST(Vmap, PerExampleGradients) {
  // d/dx sum(x^2) = 2 x, per example
  Tensor x = randn({5, 4}, kFloat64);
  TensorList g = func::vmap(
      [](const TensorList& in) -> TensorList {
        Tensor leaf = in[0].detach();
        leaf.requires_grad_(true);
        Tensor loss = sum(mul(leaf, leaf));
        return {grad({loss}, {leaf})[0]};
      },
      {x}, {0});
  EXPECT_LT(max_abs_diff(g[0], mul(x, Scalar(2))), 1e-14);
}

TEST(Vmap, OutDimsAndFallback) {
  // x[b, i, j] = 10 b + 5 i + j
  Tensor x = reshape(arange(Scalar(30), TensorOptions(kFloat32)), {3, 2, 5});
  // out_dims: the batch dim goes last, so out[i, j, b] = -(10 b + 5 i + j)
  TensorList r = func::vmap([](const TensorList& in) -> TensorList { return {neg(in[0])}; }, {x}, {0}, {-1});
  EXPECT_EQ(r[0].sizes(), (Shape{2, 5, 3}));
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 5; ++j)
        EXPECT_EQ(select(select(select(r[0], 0, i), 0, j), 0, b).item<float>(), -(10.0f * b + 5 * i + j));
  // an op without a rule (median over all elements) runs once per example and is still right: the
  // lower median of 10 b + {0, ..., 9} is 10 b + 4
  TensorList med = func::vmap([](const TensorList& in) -> TensorList { return {median(in[0])}; }, {x}, {0});
  for (int64_t b = 0; b < 3; ++b) EXPECT_EQ(select(med[0], 0, b).item<float>(), 10.0f * b + 4);
  EXPECT_GE(func::last_vmap_stats().loops, 1);
}

TEST(Vmap, Errors) {
  auto f = [](const TensorList& in) -> TensorList { return {add(in[0], in[1])}; };
  EXPECT_THROW(func::vmap(f, {ones({3, 2}), ones({4, 2})}, {0, 0}), Error);          // batch sizes differ
  EXPECT_THROW(func::vmap(f, {ones({3, 2}), ones({3, 2})}, {std::nullopt, std::nullopt}), Error);  // nothing mapped
  EXPECT_THROW(func::vmap(f, {ones({3, 2}), ones({3, 2})}, {5, 0}), Error);          // in_dim out of range
  auto rnd = [](const TensorList& in) -> TensorList { return {add(in[0], randn({2}))}; };
  EXPECT_THROW(func::vmap(rnd, {ones({3, 2})}, {0}), Error);  // randomness "error"
  TensorList diff = func::vmap(rnd, {zeros({3, 2})}, {0}, {0}, func::Randomness::Different);
  EXPECT_FALSE(equal(select(diff[0], 0, 0), select(diff[0], 0, 1)));
  TensorList same = func::vmap(rnd, {zeros({3, 2})}, {0}, {0}, func::Randomness::Same);
  EXPECT_TRUE(equal(select(same[0], 0, 0), select(same[0], 0, 1)));
}
