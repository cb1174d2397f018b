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
