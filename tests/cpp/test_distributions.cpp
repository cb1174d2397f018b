// kiln::distributions from C++ (the Python suite compares every family with torch.distributions):
// closed-form values (Normal log density and entropy, a Normal KL, a Gamma CDF), the gamma
// reparameterisation derivative against values computed with mpmath, draws that do not depend on
// the thread count, sample statistics, validation errors and the KL table's refusal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kiln/kiln.h"

using namespace kiln;
namespace D = kiln::distributions;

namespace {
double item(const Tensor& t) { return t.item<double>(); }
Tensor vec(const std::vector<double>& v) {
  Tensor t = empty({static_cast<int64_t>(v.size())}, kFloat64);
  std::copy(v.begin(), v.end(), static_cast<double*>(t.data_ptr()));
  return t;
}
}  // namespace

TEST(Distributions, NormalClosedForms) {
  D::Normal n(zeros({3}, kFloat64), full({3}, Scalar(2.0), kFloat64));
  EXPECT_EQ(n.batch_shape(), (Shape{3}));
  EXPECT_TRUE(n.event_shape().empty());
  // log N(1; 0, 2) = -1/8 - log 2 - log sqrt(2 pi)
  const double expect = -1.0 / 8 - std::log(2.0) - 0.5 * std::log(2 * M_PI);
  EXPECT_NEAR(item(select(n.log_prob(ones({3}, kFloat64)), 0, 0)), expect, 1e-14);
  EXPECT_NEAR(item(select(n.entropy(), 0, 0)), 0.5 + 0.5 * std::log(2 * M_PI) + std::log(2.0), 1e-14);
  EXPECT_NEAR(item(select(n.cdf(zeros({3}, kFloat64)), 0, 0)), 0.5, 1e-15);
  // KL(N(0, 2) || N(1, 1)) = log(1/2) + (4 + 1) / 2 - 1/2
  D::Normal q(ones({3}, kFloat64), ones({3}, kFloat64));
  EXPECT_NEAR(item(select(D::kl_divergence(n, q), 0, 1)), std::log(0.5) + 2.5 - 0.5, 1e-14);
  EXPECT_EQ(n.rsample({4, 2}).sizes(), (Shape{4, 2, 3}));
}

TEST(Distributions, GammaCdfAndReparameterisationDerivative) {
  // Gamma(2, 1) CDF at 1: 1 - 2/e
  D::Gamma g(scalar_tensor(Scalar(2.0), kFloat64), scalar_tensor(Scalar(1.0), kFloat64));
  EXPECT_NEAR(item(g.cdf(scalar_tensor(Scalar(1.0), kFloat64))), 1 - 2 / std::exp(1.0), 1e-14);
  // dx/dalpha at fixed CDF, exact values from mpmath (-(dP/dalpha) / density)
  Tensor a = vec({0.5, 2.0, 20.0, 1000.0, 3.0});
  Tensor x = vec({0.3, 1.5, 25.0, 1010.0, 40.0});
  const double expect[] = {1.0098019459488545, 0.9366390678772174, 1.125050146577857, 1.0051509296765344,
                           2.9347629990088615};
  Tensor d = standard_gamma_grad(a, x);
  for (int64_t i = 0; i < 5; ++i) EXPECT_NEAR(item(select(d, 0, i)) / expect[i], 1.0, 1e-7) << i;
}

TEST(Distributions, DrawsIndependentOfThreads) {
  const int before = get_num_threads();
  Tensor alpha = full({20000}, Scalar(0.7), kFloat64);
  Tensor rate = full({20000}, Scalar(30.0), kFloat64);
  auto draw = [&](int threads) {
    set_num_threads(threads);
    manual_seed(7);
    return std::make_pair(standard_gamma(alpha), poisson(rate));
  };
  auto one = draw(1), two = draw(2);
  set_num_threads(before);
  EXPECT_TRUE(equal(one.first, two.first));
  EXPECT_TRUE(equal(one.second, two.second));
  // and the draws follow the distributions: mean alpha, variance alpha; mean = variance = rate
  EXPECT_NEAR(item(mean(one.first)), 0.7, 0.03);
  EXPECT_NEAR(item(var(one.first)), 0.7, 0.05);
  EXPECT_NEAR(item(mean(one.second)), 30.0, 0.25);
  EXPECT_NEAR(item(var(one.second)), 30.0, 1.5);
}

TEST(Distributions, DirichletAndMultivariateNormal) {
  manual_seed(3);
  D::Dirichlet dir(vec({1.0, 2.0, 3.0}));
  Tensor s = dir.rsample({50000});
  EXPECT_LT(max(abs(sub(sum(s, Shape{-1}), Scalar(1)))).item<double>(), 1e-12);
  Tensor m = mean(s, Shape{0});
  for (int64_t i = 0; i < 3; ++i) EXPECT_NEAR(item(select(m, 0, i)), (i + 1) / 6.0, 0.01);
  // a diagonal MVN, N(0, 1) x N(1, 4): log p(0.3, -0.2) and its entropy in closed form
  Tensor cov = diag(vec({1.0, 4.0}));
  D::MultivariateNormal mvn(vec({0.0, 1.0}), D::MvnMatrix{cov, {}, {}});
  const double log2pi = std::log(2 * M_PI);
  const double lp = -0.5 * 0.3 * 0.3 - 0.5 * log2pi + (-0.5 * (1.2 * 1.2) / 4 - std::log(2.0) - 0.5 * log2pi);
  EXPECT_NEAR(item(mvn.log_prob(vec({0.3, -0.2}))), lp, 1e-12);
  EXPECT_NEAR(item(mvn.entropy()), 1.0 + log2pi + std::log(2.0), 1e-12);  // n/2 (1 + log 2 pi) + log|L|
}

TEST(Distributions, ValidationAndErrors) {
  try {
    D::Normal bad(zeros({2}), to_dtype(vec({1.0, -1.0}), kFloat32));
    FAIL() << "expected a ValueError";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value);
    EXPECT_NE(std::string(e.what()).find("GreaterThan(lower_bound=0.0)"), std::string::npos) << e.what();
  }
  D::Exponential e(ones({2}));
  EXPECT_THROW(e.log_prob(full({2}, Scalar(-1.0))), Error);
  D::Exponential lax(ones({2}), false);
  EXPECT_NO_THROW(lax.log_prob(full({2}, Scalar(-1.0))));
  D::Categorical c(D::ProbsOrLogits{ones({3}), {}});
  try {
    D::kl_divergence(c, e);
    FAIL() << "expected NotImplementedError";
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::NotImplemented);
  }
  EXPECT_THROW(D::Bernoulli(D::ProbsOrLogits{ones({2}), zeros({2})}), Error);
}
