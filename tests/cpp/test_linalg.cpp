// kiln::linalg from C++ (the API a libtorch user reaches for): results by invariant, LinAlg errors
// for singular input, gradients through a solve. Conformance against torch is tests/python/op_db_linalg.py.
#include <gtest/gtest.h>

#include "kiln/kiln.h"

using namespace kiln;

namespace {
Tensor rnd(const Shape& s, Dtype d) {
  if (!is_complex(d)) return randn(s, TensorOptions(d));
  return complex(randn(s, TensorOptions(to_real(d))), randn(s, TensorOptions(to_real(d))));
}
Tensor well(int64_t n, Dtype d) { return add(rnd({n, n}, d), mul(eye(n, std::nullopt, TensorOptions(d)), Scalar(n))); }
double max_abs(const Tensor& t) { return amax(abs(t)).to(kFloat64).item<double>(); }
}  // namespace

TEST(Linalg, SolveInverseDeterminant) {
  manual_seed(0);
  for (Dtype d : {kFloat64, kComplex128}) {
    Tensor A = well(5, d), B = rnd({5, 2}, d);
    EXPECT_LT(max_abs(sub(matmul(A, linalg::solve(A, B)), B)), 1e-12);
    EXPECT_LT(max_abs(sub(matmul(A, linalg::inv(A)), eye(5, std::nullopt, TensorOptions(d)))), 1e-12);
    auto [P, L, U] = linalg::lu(A);
    EXPECT_LT(max_abs(sub(matmul(P, matmul(L, U)), A)), 1e-12);
    auto [sign, logabs] = linalg::slogdet(A);
    EXPECT_LT(max_abs(sub(mul(sign, exp(logabs)), linalg::det(A))), 1e-9);
  }
}

TEST(Linalg, SingularInputRaisesLinAlgError) {
  Tensor A = zeros({2, 3, 3}, TensorOptions(kFloat64));
  A.select(0, 0).copy_(eye(3, std::nullopt, TensorOptions(kFloat64)));
  try {
    linalg::inv(A);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::LinAlg);
    EXPECT_NE(std::string(e.what()).find("(Batch element 1)"), std::string::npos) << e.what();
  }
  auto [Y, info] = linalg::inv_ex(A);
  EXPECT_EQ(info.select(0, 0).item<int32_t>(), 0);
  EXPECT_GT(info.select(0, 1).item<int32_t>(), 0);
}

TEST(Linalg, GradientOfSolveIsTheAdjointSolve) {
  manual_seed(1);
  Tensor A = well(4, kFloat64).requires_grad_(true), B = randn({4, 3}, TensorOptions(kFloat64)).requires_grad_(true);
  Tensor X = linalg::solve(A, B);
  Tensor G = randn({4, 3}, TensorOptions(kFloat64));
  sum(mul(X, G)).backward();
  // gB = A^-T G, gA = -gB X^T
  Tensor gB = linalg::solve(mT(A.detach()), G);
  EXPECT_LT(max_abs(sub(B.grad(), gB)), 1e-12);
  EXPECT_LT(max_abs(add(A.grad(), matmul(gB, mT(X.detach())))), 1e-12);
}
