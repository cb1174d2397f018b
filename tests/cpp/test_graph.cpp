// Graph capture and replay (kiln/dispatch/graph.h): replay recomputes on the captured memory, random
// ops draw fresh numbers, the rules raise during capture.
#include <gtest/gtest.h>

#include "kiln/autograd/graphed.h"
#include "kiln/dispatch/graph.h"
#include "kiln/kiln.h"

using namespace kiln;

namespace {
std::vector<float> values(const Tensor& t) {
  Tensor c = contiguous(t);
  const float* p = static_cast<const float*>(c.data_ptr());
  return std::vector<float>(p, p + c.numel());
}
}  // namespace

TEST(Graph, ReplayRecomputesOnStaticTensors) {
  Tensor x = zeros({3});
  Tensor w = full({3}, Scalar(2.0));
  Tensor y;
  Graph g;
  {
    GraphCapture capture(g);
    y = relu(add(mul(x, w), Scalar(1.0)));
  }
  EXPECT_GT(g.num_kernels(), 0u);
  copy_(x, full({3}, Scalar(4.0)));
  g.replay();
  EXPECT_EQ(values(y), std::vector<float>(3, 9.0f));
  copy_(x, full({3}, Scalar(-4.0)));
  g.replay();
  EXPECT_EQ(values(y), std::vector<float>(3, 0.0f));
  g.reset();
  EXPECT_THROW(g.replay(), Error);
}

TEST(Graph, RandomOpsDrawFreshNumbers) {
  Graph g;
  Tensor r;
  {
    GraphCapture capture(g);
    r = rand({4});
  }
  const uint64_t before = default_generator().offset();
  g.replay();
  const auto a = values(r);
  g.replay();
  EXPECT_NE(values(r), a);
  EXPECT_EQ(default_generator().offset(), before + 8);  // each replay reserves what the eager op did
}

TEST(Graph, RulesRaise) {
  Tensor x = ones({2});
  Graph g;
  g.capture_begin();
  EXPECT_THROW(sum(x).item(), Error);
  Graph other;
  EXPECT_THROW(other.capture_begin(), Error);
  EXPECT_THROW(g.capture_end(), Error);  // the refused read (caught above) fails the capture
  EXPECT_EQ(g.num_kernels(), 0u);
  EXPECT_EQ(sum(x).item().to_double(), 2.0);  // fine again after the capture
}

// make_graphed_callable (kiln/autograd/graphed.h): a Linear's forward and backward replayed behind
// one autograd node; gradients checked against the closed forms for loss = sum(y), y = x W^T + b:
// dW[i][j] = sum_b x[b][j], db[i] = B, dx[b][j] = sum_i W[i][j].
TEST(Graph, GraphedCallableTrainsALinear) {
  manual_seed(3);
  nn::Linear lin(4, 3);
  Tensor sample = zeros({2, 4}).requires_grad_();
  GraphedCallable g = make_graphed_callable(
      [&](const TensorList& a) { return TensorList{lin.forward(a[0])}; }, {sample});
  ASSERT_EQ(g.parameters().size(), 2u);  // the weight and bias, found in the autograd graph
  EXPECT_GT(g.forward_graph().num_kernels(), 0u);
  EXPECT_GT(g.backward_graph().num_kernels(), 0u);
  for (int step = 0; step < 3; ++step) {
    Tensor x = randn({2, 4}).requires_grad_();
    const std::vector<float> xv = values(x);
    const std::vector<float> w = values(lin.weight());
    const std::vector<float> b = values(lin.bias());
    set_grad(lin.weight(), Tensor());
    set_grad(lin.bias(), Tensor());
    Tensor y = g({x})[0];
    const std::vector<float> yv = values(y);
    for (int r = 0; r < 2; ++r)
      for (int i = 0; i < 3; ++i) {
        float want = b[i];
        for (int j = 0; j < 4; ++j) want += xv[r * 4 + j] * w[i * 4 + j];
        EXPECT_NEAR(yv[r * 3 + i], want, 1e-5f);
      }
    sum(y).backward();
    const std::vector<float> dw = values(lin.weight().grad()), db = values(lin.bias().grad()),
                             dx = values(x.grad());
    for (int i = 0; i < 3; ++i) {
      EXPECT_FLOAT_EQ(db[i], 2.0f);
      for (int j = 0; j < 4; ++j) EXPECT_NEAR(dw[i * 4 + j], xv[j] + xv[4 + j], 1e-5f);
    }
    for (int r = 0; r < 2; ++r)
      for (int j = 0; j < 4; ++j) EXPECT_NEAR(dx[r * 4 + j], w[j] + w[4 + j] + w[8 + j], 1e-5f);
    NoGradGuard no_grad;
    sub_(lin.weight(), mul(lin.weight().grad(), Scalar(0.1)));  // an SGD step in place
  }
  // rules: shapes must match the sample; a second forward before the first backward is refused
  EXPECT_THROW(g({zeros({5, 4})}), Error);
  Tensor first = g({ones({2, 4})})[0];
  g({zeros({2, 4})});
  EXPECT_THROW(sum(first).backward(), Error);
}
