// kiln::fft and the numeric utilities from C++ (the Python suite compares both with torch): the
// transform of known signals (a delta, a cosine), rfft / irfft and fftn / ifftn round trips, a
// gradient through a real-to-complex transform, and cdist / diff / trapezoid / block_diag values.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/kiln.h"

using namespace kiln;

namespace {
double at(const Tensor& t, int64_t i) { return select(t, 0, i).item<double>(); }
double max_abs_diff(const Tensor& a, const Tensor& b) { return max(abs(sub(a, b))).item<double>(); }
}  // namespace

TEST(Fft, KnownSignals) {
  // a delta transforms to all ones; a cosine at frequency 2 to n/2 at bins 2 and n - 2
  const int64_t n = 16;
  Tensor delta = zeros({n}, kFloat64);
  fill_(select(delta, 0, 0), Scalar(1));
  Tensor d = fft::fft(delta);
  EXPECT_EQ(d.dtype(), kComplex128);
  EXPECT_LT(max_abs_diff(real(d), ones({n}, kFloat64)), 1e-12);
  EXPECT_LT(max(abs(imag(d))).item<double>(), 1e-12);
  Tensor t = arange(Scalar(n), TensorOptions(kFloat64));
  Tensor c = cos(mul(t, Scalar(2 * M_PI * 2 / n)));
  Tensor spec = abs(fft::rfft(c));
  EXPECT_EQ(spec.size(0), n / 2 + 1);
  EXPECT_NEAR(at(spec, 2), n / 2.0, 1e-9);
  EXPECT_NEAR(at(spec, 3), 0.0, 1e-9);
  // norm="forward" divides the forward transform by n
  EXPECT_NEAR(at(abs(fft::rfft(c, std::nullopt, -1, "forward")), 2), 0.5, 1e-12);
}

TEST(Fft, RoundTrips) {
  Tensor x = randn({3, 10}, kFloat64);
  EXPECT_LT(max_abs_diff(fft::irfft(fft::rfft(x), 10), x), 1e-12);
  Tensor y = randn({4, 5, 6}, kFloat32);
  Tensor back = real(fft::ifftn(fft::fftn(y, std::nullopt, Shape{0, 2}), std::nullopt, Shape{0, 2}));
  EXPECT_LT(max_abs_diff(back, y), 1e-5);
  EXPECT_THROW(fft::fft(x, 0), Error);                  // no data points
  EXPECT_THROW(fft::fft(x, std::nullopt, -1, "bogus"), Error);
  EXPECT_THROW(fft::rfft(fft::fft(x)), Error);          // rfft wants a real input
}

TEST(Fft, GradientOfPower) {
  // Parseval: the orthonormal transform keeps the energy, so d/dx sum |fft(x)|^2 = 2 x
  Tensor x = randn({8}, kFloat64).requires_grad_();
  Tensor z = fft::fft(x, std::nullopt, -1, "ortho");
  Tensor energy = sum(mul(abs(z), abs(z)));
  energy.backward();
  EXPECT_LT(max_abs_diff(x.grad(), mul(x.detach(), Scalar(2))), 1e-12);  // |F x|^2 = |x|^2 for unitary F
}

TEST(TensorUtils, Values) {
  Tensor a = randn({4, 3}, kFloat64), b = randn({5, 3}, kFloat64);
  Tensor d = cdist(a, b);
  Tensor manual = sqrt(sum(mul(sub(select(a, 0, 1), select(b, 0, 2)), sub(select(a, 0, 1), select(b, 0, 2)))));
  EXPECT_NEAR(select(select(d, 0, 1), 0, 2).item<double>(), manual.item<double>(), 1e-12);
  Tensor sq = mul(arange(Scalar(5), TensorOptions(kFloat64)), arange(Scalar(5), TensorOptions(kFloat64)));
  Tensor dd = diff(sq, 2);
  EXPECT_LT(max_abs_diff(dd, full({3}, Scalar(2.0), TensorOptions(kFloat64))), 1e-12);
  EXPECT_NEAR(trapezoid(sq).item<double>(), 0.5 + 2.5 + 6.5 + 12.5, 1e-12);
  Tensor bd = block_diag({ones({2, 2}), full({1}, Scalar(3.0))});
  EXPECT_EQ(bd.sizes(), (Shape{3, 3}));
  EXPECT_EQ(select(select(bd, 0, 2), 0, 2).item<double>(), 3.0);
  EXPECT_THROW(cdist(a, randn({5, 4}, kFloat64)), Error);
}

TEST(TensorUtils, WindowsPdistAddrCombinationsUnravel) {
  // symmetric hann of 5: 0, 0.5, 1, 0.5, 0; periodic of 4 is its first four
  Tensor h = hann_window(5, /*periodic=*/false, kFloat64);
  EXPECT_NEAR(select(h, 0, 1).item<double>(), 0.5, 1e-15);
  EXPECT_NEAR(select(h, 0, 2).item<double>(), 1.0, 1e-15);
  EXPECT_LT(max_abs_diff(hann_window(4, true, kFloat64), narrow(h, 0, 0, 4)), 1e-15);
  EXPECT_NEAR(select(bartlett_window(5, false, kFloat64), 0, 1).item<double>(), 0.5, 1e-15);
  EXPECT_NEAR(select(kaiser_window(3, false, 0.0, kFloat64), 0, 0).item<double>(), 1.0, 1e-15);  // beta 0: flat
  EXPECT_THROW(hann_window(-1), Error);
  EXPECT_THROW(blackman_window(4, true, kInt64), Error);

  Tensor pts = reshape(arange(Scalar(6), TensorOptions(kFloat64)), {3, 2});  // (0,1) (2,3) (4,5)
  Tensor pd = pdist(pts);
  EXPECT_EQ(pd.sizes(), (Shape{3}));
  EXPECT_NEAR(select(pd, 0, 2).item<double>(), std::sqrt(8.0), 1e-12);  // rows 1 and 2
  EXPECT_THROW(pdist(pts, -1), Error);

  Tensor v1 = arange(Scalar(1), Scalar(3), Scalar(1), TensorOptions(kFloat64));  // [1, 2]
  Tensor v2 = arange(Scalar(1), Scalar(4), Scalar(1), TensorOptions(kFloat64));  // [1, 2, 3]
  Tensor r = addr(ones({2, 3}, TensorOptions(kFloat64)), v1, v2, 2, 3);
  EXPECT_NEAR(select(select(r, 0, 1), 0, 2).item<double>(), 2 + 3 * 2 * 3, 1e-12);

  Tensor c = combinations(arange(Scalar(4), TensorOptions(kInt64)), 3);
  EXPECT_EQ(c.sizes(), (Shape{4, 3}));
  TensorList rc = unravel_index(full({}, Scalar(7), TensorOptions(kInt64)), {2, 4});
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].item<int64_t>(), 1);
  EXPECT_EQ(rc[1].item<int64_t>(), 3);

  Tensor m = zeros({3, 3});
  fill_diagonal_(m, 4);
  EXPECT_EQ(sum(m).item<double>(), 12.0);
  EXPECT_EQ(sum_to_size(ones({2, 3}), {1, 3}).sizes(), (Shape{1, 3}));
}

TEST(TensorUtils, StftIstftRoundTrip) {
  Tensor x = randn({2, 300}, kFloat64);
  Tensor w = hann_window(64, true, kFloat64);
  Tensor s = stft(x, 64, 16, std::nullopt, w, true, "reflect", false, std::nullopt, true);
  EXPECT_EQ(s.sizes(), (Shape{2, 33, 1 + 300 / 16}));
  Tensor back = istft(s, 64, 16, std::nullopt, w, true, false, std::nullopt, 300);
  EXPECT_LT(max_abs_diff(back, x), 1e-10);
  EXPECT_THROW(stft(x, 64), Error);  // return_complex must be given for a real input
}
