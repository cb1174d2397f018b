// Issue 15's layers from C++: a packed LSTM equals the same LSTM run on each sequence alone; pack /
// pad round-trip; Conv3d, ConvTranspose2d (output_size), MaxPool3d, AdaptiveMaxPool2d, Fold / Unfold
// and Transformer build, run and report torch's shapes. (Values against torch: tests/python.)
#include <gtest/gtest.h>

#include "kiln/kiln.h"

using namespace kiln;
namespace R = kiln::nn::utils::rnn;

TEST(NnExtras, PackedLstmEqualsPerSequenceRuns) {
  manual_seed(0);
  nn::LSTM lstm(3, 4, /*num_layers=*/2, true, false, 0.0, /*bidirectional=*/true);
  Tensor a = randn({5, 3}), b = randn({2, 3}), c = randn({4, 3});
  R::PackedSequence p = R::pack_sequence({a, b, c}, /*enforce_sorted=*/false);
  auto [out, hc] = lstm.forward(p);
  auto [padded, lengths] = R::pad_packed_sequence(out);
  EXPECT_EQ(padded.sizes(), (Shape{5, 3, 8}));
  EXPECT_EQ(lengths.to(kInt64).sum().item<int64_t>(), 11);
  const Tensor seqs[] = {a, b, c};
  for (int64_t i = 0; i < 3; ++i) {
    auto [y, hci] = lstm.forward(unsqueeze(seqs[i], 1));
    int64_t n = seqs[i].size(0);
    EXPECT_TRUE(allclose(narrow(select(padded, 1, i), 0, 0, n), squeeze(y, Shape{1}), 1e-5, 1e-6));
    EXPECT_TRUE(allclose(select(std::get<0>(hc), 1, i), select(std::get<0>(hci), 1, 0), 1e-5, 1e-6));
    EXPECT_TRUE(allclose(select(std::get<1>(hc), 1, i), select(std::get<1>(hci), 1, 0), 1e-5, 1e-6));
  }
  auto back = R::unpack_sequence(p);
  EXPECT_TRUE(equal(back[1], b));
}

TEST(NnExtras, NewLayersRun) {
  Tensor vol = randn({2, 3, 6, 7, 8});
  EXPECT_EQ(nn::Conv3d(3, 4, {3}, {2}, 1).forward(vol).sizes(), (Shape{2, 4, 3, 4, 4}));
  EXPECT_EQ(nn::MaxPool3d(2).forward(vol).sizes(), (Shape{2, 3, 3, 3, 4}));
  EXPECT_EQ(nn::AvgPool3d(2).forward(vol).sizes(), (Shape{2, 3, 3, 3, 4}));
  EXPECT_EQ(nn::AdaptiveAvgPool3d(2).forward(vol).sizes(), (Shape{2, 3, 2, 2, 2}));
  Tensor img = randn({2, 3, 5, 6});
  auto [m, idx] = nn::AdaptiveMaxPool2d(std::vector<std::optional<int64_t>>{3, std::nullopt}, true)
                      .forward_with_indices(img);
  EXPECT_EQ(m.sizes(), (Shape{2, 3, 3, 6}));
  EXPECT_EQ(idx.dtype(), kInt64);
  nn::ConvTranspose2d up(3, 2, {3}, {2}, {1});
  EXPECT_EQ(up.forward(img, Shape{10, 12}).sizes(), (Shape{2, 2, 10, 12}));
  Tensor cols = nn::Unfold(2).forward(img);
  EXPECT_EQ(cols.sizes(), (Shape{2, 12, 20}));
  EXPECT_EQ(nn::Fold({5, 6}, 2).forward(cols).sizes(), img.sizes());
  nn::Transformer t(8, 2, 1, 1, 16, 0.0);
  EXPECT_EQ(t.forward(randn({5, 2, 8}), randn({4, 2, 8}), {},
                      nn::Transformer::generate_square_subsequent_mask(4))
                .sizes(),
            (Shape{4, 2, 8}));
  EXPECT_THROW(t.forward(randn({5, 2, 8}), randn({4, 3, 8})), Error);
}

TEST(NnExtras, SequentialModuleListAndActivationClasses) {
  manual_seed(0);
  nn::Sequential net(std::make_shared<nn::Linear>(4, 16), std::make_shared<nn::GELU>("tanh"),
                     std::make_shared<nn::Linear>(16, 1));
  EXPECT_EQ(net.size(), 3u);
  EXPECT_EQ(net.named_parameters().size(), 4u);
  EXPECT_EQ(net.named_parameters().items()[0].first, "0.weight");
  EXPECT_TRUE(net.at<nn::Linear>(2) != nullptr);
  EXPECT_EQ(net[1]->repr(), "GELU(approximate='tanh')");
  // a few optimiser steps fit y = sum(x)
  optim::Adam opt(net.parameters(), optim::AdamOptions(1e-2));
  Tensor x = randn({64, 4}), y = sum(x, Shape{1}, true);
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    opt.zero_grad();
    Tensor loss = nn::functional::mse_loss(net.forward(x), y);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, 0.1 * first);

  nn::ModuleList list(std::make_shared<nn::ReLU>(), std::make_shared<nn::LeakyReLU>(0.2),
                      std::make_shared<nn::Softmax>(1));
  EXPECT_EQ(list.size(), 3u);
  EXPECT_EQ(list[1]->repr(), "LeakyReLU(negative_slope=0.2)");
  EXPECT_EQ(list[2]->repr(), "Softmax(dim=1)");
  Tensor s = list.at<nn::Softmax>(2)->forward(randn({2, 5}));
  EXPECT_TRUE(allclose(sum(s, Shape{1}), ones({2})));
  EXPECT_EQ(nn::ELU(0.5, true).repr(), "ELU(alpha=0.5, inplace=True)");
}

TEST(NnExtras, HoldersAndLossModules) {
  manual_seed(0);
  nn::ModuleHolder<nn::Linear> fc(4, 3);
  nn::ModuleHolder<nn::ReLU> act;
  nn::Sequential net(fc, act);
  EXPECT_EQ(net.size(), 2u);
  Tensor x = randn({5, 4});
  EXPECT_TRUE(equal(net.forward(x), relu(fc(x))));
  EXPECT_EQ(fc->weight().sizes(), (Shape{3, 4}));
  Tensor target = remainder(arange(5), Scalar(3));
  nn::CrossEntropyLoss ce(ones({3}), -100, "mean", 0.1);
  EXPECT_TRUE(allclose(ce.forward(fc(x), target),
                       nn::functional::cross_entropy(fc(x), target, ones({3}), -100, "mean", 0.1)));
  EXPECT_EQ(ce.named_buffers().size(), 1u);
  EXPECT_EQ(nn::MSELoss("sum").forward(x, zeros_like(x)).item<double>(), (x * x).sum().item<double>());
  EXPECT_EQ(nn::MSELoss().repr(), "MSELoss()");
  nn::ModuleList list(fc, std::make_shared<nn::Tanh>());
  EXPECT_EQ(list.named_parameters().size(), 2u);
}

// The padding modules, channel dropout, BatchNorm3d and the shrink / GLU activations from C++ (values
// against torch: tests/python/test_pad_dropout_modules.py, test_shrink_glu.py).
namespace {
Tensor vec(std::vector<float> v) {
  return clone(from_blob(v.data(), Shape{static_cast<int64_t>(v.size())}, Shape{1}, kFloat32));
}
float at(const Tensor& t, int64_t i, int64_t j, int64_t k) {
  return select(select(select(t, 0, i), 0, j), 0, k).item<float>();
}
}  // namespace

TEST(NnExtras, PaddingDropoutNdBatchNorm3dAndShrinkModules) {
  Tensor x = reshape(arange(Scalar(6), TensorOptions(kFloat32)), {1, 2, 3});  // [[0 1 2] [3 4 5]]
  EXPECT_EQ(nn::ZeroPad2d(1).forward(x).sizes(), (Shape{1, 4, 5}));
  Tensor r = nn::ReflectionPad1d({2, 1}).forward(x);  // rows [2 1 0 1 2 1], [5 4 3 4 5 4]
  EXPECT_EQ(r.sizes(), (Shape{1, 2, 6}));
  EXPECT_EQ(at(r, 0, 0, 0), 2.0f);
  EXPECT_EQ(at(r, 0, 1, 5), 4.0f);
  Tensor rep = nn::ReplicationPad1d({1, 2}).forward(x);
  EXPECT_EQ(at(rep, 0, 1, 5), 5.0f);
  Tensor c = nn::ConstantPad1d(1, 3.5).forward(x);
  EXPECT_EQ(at(c, 0, 0, 0), 3.5f);
  EXPECT_EQ(nn::CircularPad1d(1).forward(x).sizes(), (Shape{1, 2, 5}));
  EXPECT_THROW(nn::CircularPad2d(1).forward(x.reshape({6})), Error);
  EXPECT_EQ(nn::ZeroPad2d({1, 2, 3, 4}).repr(), "ZeroPad2d((1, 2, 3, 4))");
  EXPECT_EQ(nn::ZeroPad1d{2}.padding, (Shape{2, 2}));  // one int for every side, braces or not
  EXPECT_EQ(nn::ConstantPad2d(1, 2.5).repr(), "ConstantPad2d(padding=(1, 1, 1, 1), value=2.5)");

  manual_seed(3);
  nn::Dropout2d drop(0.5);
  Tensor ones_in = ones({8, 16, 3, 3});
  Tensor y = drop.forward(ones_in);
  Tensor per_channel = amax(y, Shape{2, 3});  // a channel is all 0 or all 2
  EXPECT_TRUE(equal(per_channel, amin(y, Shape{2, 3})));
  EXPECT_TRUE(all(logical_or(eq(per_channel, Scalar(0)), eq(per_channel, Scalar(2)))).item<bool>());
  drop.eval();
  EXPECT_TRUE(equal(drop.forward(ones_in), ones_in));
  EXPECT_EQ(nn::Dropout1d(0.5).forward(ones({4, 7})).sizes(), (Shape{4, 7}));  // unbatched (C, L)
  EXPECT_EQ(nn::Dropout3d(0.25).repr(), "Dropout3d(p=0.25, inplace=False)");

  nn::BatchNorm3d bn(2);
  Tensor v = randn({3, 2, 2, 2, 2});
  Tensor z = bn.forward(v);
  EXPECT_TRUE(allclose(mean(z, Shape{0, 2, 3, 4}), zeros({2}), 1e-5, 1e-5));
  EXPECT_THROW(bn.forward(randn({3, 2, 2})), Error);

  Tensor s = vec({-1.0f, -0.25f, 0.25f, 2.0f});
  EXPECT_TRUE(equal(nn::Hardshrink(0.5).forward(s), vec({-1.0f, 0.0f, 0.0f, 2.0f})));
  EXPECT_TRUE(equal(nn::Softshrink(0.5).forward(s), vec({-0.5f, 0.0f, 0.0f, 1.5f})));
  EXPECT_EQ(nn::GLU(0).forward(s).sizes(), (Shape{2}));
}

TEST(NnExtras, MarginAndLikelihoodLossModules) {
  // torch's documented examples and values worked by hand
  Tensor x = reshape(vec({0.1f, 0.2f, 0.4f, 0.8f}), {1, 4});
  Tensor cls = full({1}, Scalar(3), kInt64);
  EXPECT_NEAR(nn::MultiMarginLoss().forward(x, cls).item<double>(), (0.3 + 0.4 + 0.6) / 4, 1e-6);
  Tensor labels = reshape(to_dtype(vec({3.0f, 0.0f, -1.0f, 1.0f}), kInt64), {1, 4});
  EXPECT_NEAR(nn::MultiLabelMarginLoss().forward(x, labels).item<double>(), 0.85, 1e-6);
  EXPECT_THROW(nn::MultiMarginLoss(3), Error);
  EXPECT_THROW(F::multi_margin_loss(x, full({1}, Scalar(4), kInt64)), Error);  // target out of range

  EXPECT_NEAR(nn::HingeEmbeddingLoss().forward(vec({0.5f, 2.0f}), vec({1.0f, -1.0f})).item<double>(), 0.25, 1e-7);
  EXPECT_NEAR(nn::SoftMarginLoss().forward(vec({0.0f}), vec({1.0f})).item<double>(), std::log(2.0), 1e-7);
  EXPECT_NEAR(nn::PoissonNLLLoss().forward(vec({0.0f}), vec({1.0f})).item<double>(), 1.0, 1e-7);
  Tensor e = full({3}, Scalar(std::exp(1.0)));
  EXPECT_NEAR(nn::GaussianNLLLoss().forward(e, e, e).item<double>(), 0.5, 1e-6);
  EXPECT_NEAR(nn::GaussianNLLLoss().forward(e, e, std::exp(1.0)).item<double>(), 0.5, 1e-6);
  EXPECT_THROW(nn::GaussianNLLLoss().forward(e, e, -1.0), Error);
  EXPECT_NEAR(nn::MultiLabelSoftMarginLoss().forward(vec({0.0f, 0.0f}), vec({1.0f, 0.0f})).item<double>(),
              std::log(2.0), 1e-7);

  Tensor a = reshape(vec({0.0f, 0.0f, 3.0f, 4.0f}), {2, 2});
  EXPECT_NEAR(nn::TripletMarginLoss(1.0, 2.0, 0.0).forward(a, a, a).item<double>(), 1.0, 1e-6);
  int calls = 0;
  nn::TripletMarginWithDistanceLoss l1([&](const Tensor& u, const Tensor& v) {
    ++calls;
    return sum(abs(sub(u, v)), Shape{1});
  }, 0.5, /*swap=*/true);
  Tensor far = add(a, Scalar(1));  // L1 distance 2 from a
  EXPECT_NEAR(l1.forward(a, a, far).item<double>(), 0.0, 1e-7);
  EXPECT_EQ(calls, 3);
  EXPECT_THROW(nn::TripletMarginLoss(0.0), Error);
  EXPECT_THROW(nn::TripletMarginWithDistanceLoss({}, -1.0), Error);
}

TEST(NnExtras, UnpoolLpPoolShuffleAlphaDropoutRReLUModules) {
  Tensor x = reshape(arange(Scalar(16), TensorOptions(kFloat32)), {1, 1, 4, 4});
  auto [pooled, idx] = max_pool2d_with_indices(x, {2, 2});
  nn::MaxUnpool2d unpool(2);
  Tensor back = unpool.forward(pooled, idx);
  EXPECT_EQ(back.sizes(), (Shape{1, 1, 4, 4}));
  EXPECT_EQ(sum(back).item<double>(), 5.0 + 7 + 13 + 15);  // the maxima, in place; zeros elsewhere
  EXPECT_EQ(at(reshape(back, {1, 1, 16}), 0, 0, 15), 15.0f);
  EXPECT_EQ(unpool.repr(), "MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))");
  EXPECT_EQ(nn::MaxUnpool2d(2).forward(pooled, idx, {5, 5}).sizes(), (Shape{1, 1, 5, 5}));
  EXPECT_THROW(unpool.forward(pooled, mul(idx, Scalar(100))), Error);  // index past the plane

  // LPPool with p = 1: the window sums of |x| (all positive here)
  Tensor lp = nn::LPPool2d(1.0, 2).forward(x);
  EXPECT_NEAR(at(reshape(lp, {1, 1, 4}), 0, 0, 0), 0.0f + 1 + 4 + 5, 1e-4);
  EXPECT_EQ(nn::LPPool1d(2.0, 3, 2).repr(), "LPPool1d(norm_type=2, kernel_size=3, stride=2, ceil_mode=False)");

  Tensor c = reshape(arange(Scalar(6), TensorOptions(kFloat32)), {1, 6, 1});
  EXPECT_TRUE(equal(reshape(nn::ChannelShuffle(3).forward(c), {6}), vec({0, 2, 4, 1, 3, 5})));

  nn::AlphaDropout ad(0.2);
  ad.eval();
  EXPECT_TRUE(equal(ad.forward(c), c));
  EXPECT_EQ(ad.repr(), "AlphaDropout(p=0.2, inplace=False)");
  EXPECT_THROW(nn::FeatureAlphaDropout(1.5), Error);

  nn::RReLU rr;
  rr.eval();
  EXPECT_NEAR(rr.forward(vec({-24.0f})).item<double>(), -24.0 * (1.0 / 8 + 1.0 / 3) / 2, 1e-5);
  rr.train();
  const double y = rr.forward(vec({-1.0f})).item<double>();
  EXPECT_TRUE(y <= -0.125 + 1e-6 && y >= -1.0 / 3 - 1e-6);
  EXPECT_EQ(rr.repr(), "RReLU(lower=0.125, upper=0.3333333333333333)");

  EXPECT_EQ(nn::UpsamplingNearest2d(std::nullopt, std::vector<double>{2.0}).forward(x).sizes(), (Shape{1, 1, 8, 8}));
  EXPECT_EQ(nn::UpsamplingBilinear2d(nn::IntOrTuple(Shape{3, 5})).forward(x).sizes(), (Shape{1, 1, 3, 5}));
  EXPECT_EQ(nn::UpsamplingNearest2d(std::nullopt, std::vector<double>{2.0}).repr(),
            "UpsamplingNearest2d(scale_factor=2.0, mode='nearest')");
}

// AdaptiveLogSoftmaxWithLoss from C++ (values against torch: tests/python/test_adaptive.py): the
// full log-distribution sums to one per row, each target's output is its entry there, the loss is
// the outputs' negative mean, predict is its argmax, the gradient reaches every layer, and bad
// cutoffs or targets raise torch's error classes.
TEST(NnExtras, AdaptiveLogSoftmaxWithLoss) {
  auto longs = [](std::vector<int64_t> v) {
    return from_blob(v.data(), {static_cast<int64_t>(v.size())}, {1}, kInt64).clone();
  };
  auto kind_of = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::Assertion;  // (nothing raised)
  };
  manual_seed(0);
  nn::AdaptiveLogSoftmaxWithLoss asm_(12, 30, {4, 10, 20}, 2.0, true);
  EXPECT_EQ(asm_.named_parameters().size(), 8u);  // head weight and bias, two per cluster
  EXPECT_EQ(asm_.cutoffs, (std::vector<int64_t>{4, 10, 20, 30}));
  EXPECT_EQ(asm_.tail->at<nn::Sequential>(2)->at<nn::Linear>(0)->out_features, 1);  // 12 // 2^3
  Tensor x = randn({9, 12}, TensorOptions(kFloat64)).requires_grad_();
  asm_.to(kFloat64);
  Tensor target = longs({0, 3, 4, 9, 10, 19, 20, 29, 5});
  auto [out, loss] = asm_.forward(x, target);
  Tensor lp = asm_.log_prob(x);
  EXPECT_EQ(lp.sizes(), (Shape{9, 30}));
  EXPECT_TRUE(allclose(logsumexp(lp, Shape{1}), zeros({9}, TensorOptions(kFloat64)), 1e-12, 1e-12));
  EXPECT_TRUE(allclose(out, squeeze(gather(lp, 1, unsqueeze(target, 1)), Shape{1}), 1e-12, 1e-12));
  EXPECT_TRUE(allclose(loss, neg(mean(out)), 1e-12, 1e-12));
  EXPECT_TRUE(equal(asm_.predict(x), argmax(lp, 1)));
  loss.backward();
  for (auto& [name, p] : asm_.named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
  EXPECT_TRUE(x.grad().defined());
  EXPECT_EQ(kind_of([] { nn::AdaptiveLogSoftmaxWithLoss(8, 20, {5, 5}); }), ErrorKind::Value);
  EXPECT_EQ(kind_of([] { nn::AdaptiveLogSoftmaxWithLoss(8, 20, {}); }), ErrorKind::Value);
  EXPECT_EQ(kind_of([&] { asm_.forward(x, longs({0, 1, 2, 3, 4, 5, 6, 7, 30})); }), ErrorKind::Runtime);
}

// FractionalMaxPool2d / 3d from C++ (values against torch: tests/python/test_fractional_pool.py): the
// output holds the input's values at the returned indices, every window lies inside the input, the
// gradient reaches the picked elements only, and bad ratios raise ValueError.
TEST(NnExtras, FractionalMaxPool) {
  manual_seed(0);
  nn::FractionalMaxPool2d pool(3, nn::IntOrTuple{4, 5}, std::nullopt, true);
  Tensor x = randn({2, 3, 7, 9}).requires_grad_();
  auto [y, idx] = pool.forward_with_indices(x);
  EXPECT_EQ(y.sizes(), (Shape{2, 3, 4, 5}));
  EXPECT_TRUE(equal(y, reshape(gather(flatten(x, 2), 2, flatten(idx, 2)), y.sizes())));
  EXPECT_TRUE(all(logical_and(ge(idx, Scalar(0)), lt(idx, Scalar(63)))).item<bool>());
  sum(y).backward();
  EXPECT_LE(count_nonzero(x.grad()).item<int64_t>(), 2 * 3 * 4 * 5);
  nn::FractionalMaxPool3d pool3(2, std::nullopt, std::vector<double>{0.5});
  EXPECT_EQ(pool3.forward(randn({1, 2, 6, 8, 10})).sizes(), (Shape{1, 2, 3, 4, 5}));
  auto kind_of = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::Assertion;
  };
  EXPECT_EQ(kind_of([] { nn::FractionalMaxPool2d(2, std::nullopt, std::vector<double>{1.5}); }), ErrorKind::Value);
  EXPECT_EQ(kind_of([] { nn::FractionalMaxPool2d(2, std::nullopt); }), ErrorKind::Value);
  EXPECT_EQ(kind_of([] { nn::functional::fractional_max_pool2d(randn({1, 1, 5, 5}), {3, 3}, {4, 4}); }),
            ErrorKind::Runtime);
}
