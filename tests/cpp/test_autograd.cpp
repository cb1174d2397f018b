// Autograd from C++: grad-mode guards, backward of small expressions against hand-computed values,
// custom Functions (kiln/autograd/function.h), saved-tensor version checks, in-place ops on views,
// deep graphs.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kiln/autograd/function.h"
#include "kiln/kiln.h"

using namespace kiln;

namespace {

Tensor vec(const std::vector<double>& v, bool requires_grad = false) {
  Tensor t = make_tensor({static_cast<int64_t>(v.size())}, kFloat64);
  for (size_t i = 0; i < v.size(); ++i) t.data_ptr<double>()[i] = v[i];
  if (requires_grad) t.requires_grad_();
  return t;
}

std::vector<double> values(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

void expect_near(const Tensor& t, const std::vector<double>& want) {
  ASSERT_TRUE(t.defined());
  std::vector<double> got = values(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-12 * (1 + std::abs(want[i]))) << i;
}

// f(x, y) = x * y * k (k a non-tensor argument), saving both inputs.
struct MulScale : autograd::Function<MulScale> {
  static TensorList forward(autograd::AutogradContext* ctx, const TensorList& in, double k) {
    ctx->save_for_backward({in[0], in[1]});
    ctx->saved_data["k"] = k;
    EXPECT_FALSE(grad_mode_enabled());  // forward runs without recording
    return {mul(mul(in[0], in[1]), Scalar(k))};
  }
  static TensorList backward(autograd::AutogradContext* ctx, const TensorList& g) {
    TensorList s = ctx->get_saved_variables();
    double k = std::get<double>(ctx->saved_data["k"]);
    Tensor gx = ctx->needs_input_grad(0) ? mul(mul(g[0], s[1]), Scalar(k)) : Tensor();
    Tensor gy = ctx->needs_input_grad(1) ? mul(mul(g[0], s[0]), Scalar(k)) : Tensor();
    return {gx, gy};
  }
};

// Two outputs: exp(x) (saved as an output) and argmax-like integer indices (non-differentiable).
struct ExpAndIndex : autograd::Function<ExpAndIndex> {
  static const char* name() { return "ExpAndIndex"; }
  static TensorList forward(autograd::AutogradContext* ctx, const TensorList& in) {
    Tensor e = exp(in[0]);
    Tensor i = argmax(in[0]);
    Tensor mask = to_dtype(gt(in[0], Scalar(0)), kFloat64);
    ctx->mark_non_differentiable({i, mask});
    ctx->save_for_backward({e});
    return {e, i, mask};
  }
  static TensorList backward(autograd::AutogradContext* ctx, const TensorList& g) {
    return {mul(g[0], ctx->get_saved_variables()[0])};
  }
};

}  // namespace

TEST(Autograd, GuardsNest) {
  EXPECT_TRUE(grad_mode_enabled());
  Tensor x = vec({1, 2}, true);
  {
    NoGradGuard ng;
    EXPECT_FALSE(grad_mode_enabled());
    EXPECT_FALSE(mul(x, x).requires_grad());
    {
      EnableGradGuard eg;
      EXPECT_TRUE(mul(x, x).requires_grad());
    }
    EXPECT_FALSE(grad_mode_enabled());
  }
  EXPECT_TRUE(grad_mode_enabled());
  Tensor t;
  {
    InferenceMode im;
    EXPECT_TRUE(inference_mode_enabled());
    EXPECT_FALSE(grad_mode_enabled());
    t = mul(x, x);
    EXPECT_FALSE(t.requires_grad());
    {
      InferenceMode off(false);
      EXPECT_FALSE(inference_mode_enabled());
    }
  }
  EXPECT_TRUE(grad_mode_enabled());
  EXPECT_FALSE(inference_mode_enabled());
  EXPECT_TRUE(t.impl()->inference);
  // an inference tensor may not be saved for backward, nor updated in place outside inference mode
  EXPECT_THROW(mul(t, x).sum().backward(), Error);
  EXPECT_THROW(add_(t, ones_like(t)), Error);
}

TEST(Autograd, BackwardHandComputed) {
  // y = sum(x * x * w + exp(x)): dy/dx = 2 x w + exp(x), dy/dw = x^2
  Tensor x = vec({1, 2, 3}, true), w = vec({0.5, -1, 2}, true);
  Tensor y = add(mul(mul(x, x), w), exp(x)).sum();
  EXPECT_FALSE(y.is_leaf());
  EXPECT_EQ(y.grad_fn()->name(), "SumBackward0");
  y.backward();
  expect_near(x.grad(), {1 + std::exp(1.0), -4 + std::exp(2.0), 12 + std::exp(3.0)});
  expect_near(w.grad(), {1, 4, 9});
  // broadcasting: b (shape [1]) receives the sum; a second backward accumulates
  Tensor b = vec({0.25}, true);
  Tensor z = mul(add(x, b), Scalar(3.0)).sum();
  z.backward(Tensor(), true);
  z.backward();
  expect_near(b.grad(), {18});
  // kiln::grad: returned, not accumulated
  Tensor u = mul(x, w).sum();
  TensorList g = grad({u}, {w});
  expect_near(g[0], {1, 2, 3});
  expect_near(w.grad(), {1, 4, 9});
}

TEST(Autograd, DoubleBackward) {
  // d/dx sum(x^3) = 3x^2, d2 = 6x
  Tensor x = vec({1, -2, 0.5}, true);
  Tensor y = mul(mul(x, x), x).sum();
  TensorList g = grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true);
  expect_near(g[0], {3, 12, 0.75});
  ASSERT_TRUE(g[0].requires_grad());
  TensorList gg = grad({g[0].sum()}, {x});
  expect_near(gg[0], {6, -12, 3});
}

TEST(Autograd, HooksAndRetainGrad) {
  Tensor x = vec({1, 2}, true);
  Tensor y = mul(x, Scalar(3.0));
  y.retain_grad();
  int id = register_hook(y, [](const Tensor& g) { return mul(g, Scalar(2.0)); });
  register_hook(x, [](const Tensor& g) { return add(g, Scalar(1.0)); });
  mul(y, y).sum().backward();
  expect_near(y.grad(), {12, 24});  // the hook ran before the gradient was retained
  expect_near(x.grad(), {37, 73});  // 2 * 2y * 3 + 1
  remove_hook(y, id);
  set_grad(x, Tensor());
  Tensor y2 = mul(x, Scalar(3.0));
  y2.sum().backward();
  expect_near(x.grad(), {4, 4});
}

TEST(Autograd, CustomFunction) {
  Tensor x = vec({1, 2, 3}, true), y = vec({4, 5, 6});
  TensorList out = MulScale::apply({x, y}, 2.0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].requires_grad());
  EXPECT_EQ(out[0].grad_fn()->name(), "MulScaleBackward");
  // used twice: on its own output
  Tensor z = MulScale::apply({out[0], x}, 0.5)[0];  // z = x^2 y
  z.sum().backward();
  expect_near(x.grad(), {8, 20, 36});  // 2 x y
  EXPECT_FALSE(y.grad().defined());
  // no graph without an input that requires grad, or under NoGradGuard
  EXPECT_FALSE(MulScale::apply({y, y}, 1.0)[0].requires_grad());
  {
    NoGradGuard ng;
    EXPECT_FALSE(MulScale::apply({x, y}, 1.0)[0].requires_grad());
  }
  // several outputs, non-differentiable ones, a saved output
  Tensor a = vec({0.5, -1, 2}, true);
  TensorList r = ExpAndIndex::apply({a});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0].requires_grad());
  EXPECT_FALSE(r[1].requires_grad());
  EXPECT_FALSE(r[2].requires_grad());
  EXPECT_EQ(r[0].grad_fn()->name(), "ExpAndIndexBackward");
  r[0].sum().backward();
  expect_near(a.grad(), {std::exp(0.5), std::exp(-1.0), std::exp(2.0)});
  // saved tensors are freed after backward: a second backward fails
  Tensor s = ExpAndIndex::apply({a})[0].sum();
  s.backward();
  EXPECT_THROW(s.backward(), Error);
}

TEST(Autograd, VersionCounterError) {
  Tensor x = vec({1, 2, 3}, true);
  Tensor y = exp(x);
  add_(y, ones_like(y));  // exp saved its output
  try {
    y.sum().backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find("modified by an inplace operation"), std::string::npos)
        << e.what();
  }
  // in place on a leaf that requires grad
  EXPECT_THROW(mul_(x, Scalar(2.0)), Error);
}

TEST(Autograd, InplaceOnView) {
  // y = x * 1; y[0] *= 2 (through a view) -> d sum(y) / dx = [2, 1, 1]
  Tensor x = vec({1, 2, 3}, true);
  Tensor y = mul(x, Scalar(1.0));
  Tensor v = select(y, 0, 0);
  mul_(v, Scalar(2.0));
  EXPECT_EQ(y.grad_fn()->name(), "CopySlices");
  y.sum().backward();
  expect_near(x.grad(), {2, 1, 1});
  expect_near(y.detach(), {2, 2, 3});
  // a view of a leaf may not be modified in place
  EXPECT_THROW(mul_(select(x, 0, 1), Scalar(2.0)), Error);
}

TEST(Autograd, LongChain) {
  Tensor x = vec({1, 2}, true);
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = mul(y, Scalar(1.0));
  y.sum().backward(Tensor(), /*retain_graph=*/true);  // no recursion in the engine
  expect_near(x.grad(), {1, 1});
  y = Tensor();  // nor in freeing the 100k nodes (their saved tensors still held)
  SUCCEED();
}

TEST(Autograd, SavedTensorsFreed) {
  const int64_t n = 1 << 16;
  int64_t start = memory_stats().allocated_bytes;
  {
    Tensor x = rand({n}, kFloat64).requires_grad_();
    Tensor y = exp(exp(x)).sum();  // the inner exp's output lives only in the graph
    int64_t before = memory_stats().allocated_bytes;
    y.backward();
    int64_t after = memory_stats().allocated_bytes;
    // freed: the two saved exp outputs; allocated: x.grad
    EXPECT_LE(after - before, -8 * n + 1024);
  }
  EXPECT_LE(memory_stats().allocated_bytes, start + 1024);
}
