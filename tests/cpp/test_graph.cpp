// Graph capture and replay (kiln/dispatch/graph.h): replay recomputes on the captured memory, random
// ops draw fresh numbers, the rules raise during capture.
#include <gtest/gtest.h>

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
  g.capture_end();
  EXPECT_EQ(sum(x).item().to_double(), 2.0);  // fine again after the capture
}
