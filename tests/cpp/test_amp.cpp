// kiln::amp from C++: an Autocast region runs matrix products in bfloat16 and losses in float32,
// restores the previous state on leaving (also through an exception), backward runs outside it, and
// GradScaler skips the step on an inf gradient, backs the scale off and grows it again. (Values and
// the op lists are checked against torch in tests/python/test_amp.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/kiln.h"

using namespace kiln;

TEST(Amp, RegionCastsByPolicyAndRestores) {
  Tensor a = randn({3, 4}), b = randn({4, 2});
  EXPECT_FALSE(amp::is_autocast_enabled());
  {
    amp::Autocast region(DeviceType::CPU, kBFloat16);
    EXPECT_TRUE(amp::is_autocast_enabled());
    Tensor y = matmul(a, b);
    EXPECT_EQ(y.dtype(), kBFloat16);
    EXPECT_EQ(nn::functional::mse_loss(y, zeros_like(y)).dtype(), kFloat32);
    EXPECT_EQ(cat({y, randn({3, 2})}).dtype(), kFloat32);
    EXPECT_EQ(mm(a.to(kFloat64), b.to(kFloat64)).dtype(), kFloat64);
    {
      amp::Autocast off(DeviceType::CPU, std::nullopt, false);
      EXPECT_EQ(matmul(a, b).dtype(), kFloat32);
    }
    EXPECT_EQ(matmul(a, b).dtype(), kBFloat16);
  }
  EXPECT_FALSE(amp::is_autocast_enabled());
  EXPECT_EQ(matmul(a, b).dtype(), kFloat32);
  try {
    amp::Autocast region;
    mm(a, a);  // (3x4) @ (3x4): raises inside the region
    FAIL();
  } catch (const Error&) {
  }
  EXPECT_FALSE(amp::is_autocast_enabled());
  EXPECT_THROW(amp::set_autocast_dtype(DeviceType::CPU, kFloat32), Error);
}

TEST(Amp, GradientsReachFloat32Leaves) {
  nn::Linear lin(4, 3);
  Tensor x = randn({2, 4});
  Tensor loss;
  {
    amp::Autocast region;
    Tensor y = lin.forward(x);
    EXPECT_EQ(y.dtype(), kBFloat16);
    loss = nn::functional::mse_loss(y, zeros({2, 3}));
  }
  loss.backward();
  EXPECT_EQ(lin.weight().grad().dtype(), kFloat32);
  EXPECT_EQ(lin.bias().grad().dtype(), kFloat32);
  EXPECT_GT(abs(lin.weight().grad()).sum().item<double>(), 0.0);
}

TEST(Amp, GradScalerSkipsInfStepsAndAdjustsTheScale) {
  Tensor p = ones({2}).requires_grad_();
  optim::SGD opt({p}, optim::SGDOptions(0.5));
  amp::GradScaler scaler({/*init_scale=*/8.0, /*growth_factor=*/2.0, /*backoff_factor=*/0.5,
                          /*growth_interval=*/2});
  auto iteration = [&](double g) {
    opt.zero_grad();
    scaler.scale(mul(p, scalar_tensor(g)).sum()).backward();
    scaler.step(opt);
    scaler.update();
  };
  iteration(1.0);  // clean: p -= 0.5 * 1
  EXPECT_DOUBLE_EQ(p.detach().select(0, 0).item<double>(), 0.5);
  EXPECT_EQ(scaler.get_scale(), 8.0);
  EXPECT_EQ(scaler.growth_tracker(), 1);
  iteration(std::numeric_limits<double>::infinity());  // skipped, scale halves
  EXPECT_DOUBLE_EQ(p.detach().select(0, 0).item<double>(), 0.5);
  EXPECT_EQ(scaler.get_scale(), 4.0);
  iteration(1.0);
  iteration(1.0);  // second clean step in a row: the scale doubles
  EXPECT_EQ(scaler.get_scale(), 8.0);
  EXPECT_DOUBLE_EQ(p.detach().select(0, 0).item<double>(), -0.5);
  opt.zero_grad();
  scaler.scale(p.sum()).backward();
  scaler.unscale_(opt);
  EXPECT_THROW(scaler.unscale_(opt), Error);
  EXPECT_DOUBLE_EQ(p.grad().select(0, 0).item<double>(), 1.0);  // unscaled
}
