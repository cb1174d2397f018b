// The kernel tables of every ISA this CPU runs, compared with exact values and with each other.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kiln/backend/cpu/kernels.h"

namespace {

using kiln::cpu::Isa;

std::vector<Isa> runnable() {
  std::vector<Isa> v;
  for (Isa i : {Isa::Base, Isa::Avx2, Isa::Avx512})
    if (kiln::cpu::isa_supported(i)) v.push_back(i);
  return v;
}

int64_t ordered(float f) {
  int32_t i;
  std::memcpy(&i, &f, 4);
  return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : i;
}

void run_exp(const kiln::cpu::KernelTable& t, const std::vector<float>& x, std::vector<float>& y) {
  auto fn = t.unary[static_cast<int>(kiln::cpu::UnaryOp::Exp)][static_cast<int>(kiln::Dtype::Float32)];
  ASSERT_NE(fn, nullptr);
  y.resize(x.size());
  char* data[2] = {reinterpret_cast<char*>(y.data()), reinterpret_cast<char*>(const_cast<float*>(x.data()))};
  const int64_t st[2] = {4, 4};
  kiln::cpu::KParams p;
  fn(data, st, static_cast<int64_t>(x.size()), &p);
}

// Every 61st float of [-104, 89] (the whole range where exp is neither 0 nor inf), and every float
// near the ends: within 1 ulp of the correctly rounded value, on each table.
TEST(Isa, ExpWithinOneUlpOnEveryTable) {
  std::vector<float> x;
  auto add_range = [&](uint32_t lo, uint32_t hi, uint32_t step) {
    for (uint64_t u = lo; u <= hi; u += step) {
      uint32_t b = static_cast<uint32_t>(u);
      float f;
      std::memcpy(&f, &b, 4);
      x.push_back(f);
    }
  };
  add_range(0x00000000u, 0x42B20000u, 61);  // +0 .. 89
  add_range(0x80000000u, 0xC2D00000u, 61);  // -0 .. -104
  add_range(0x42B17000u, 0x42B20000u, 1);   // overflow edge
  add_range(0xC2CE0000u, 0xC2D00000u, 1);   // subnormal results
  for (Isa isa : runnable()) {
    std::vector<float> y;
    run_exp(kiln::cpu::kernel_table_for(isa), x, y);
    int64_t worst = 0;
    float at = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      float exact = static_cast<float>(std::exp(static_cast<double>(x[i])));
      int64_t d = std::llabs(ordered(y[i]) - ordered(exact));
      if (d > worst) worst = d, at = x[i];
    }
    EXPECT_LE(worst, 1) << "ISA " << static_cast<int>(isa) << " at x = " << at;
  }
}

TEST(Isa, ExpSpecialValuesOnEveryTable) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {inf, -inf, std::nanf(""), 0.0f, -0.0f, 89.0f, -105.0f, 1e30f, -1e30f};
  x.resize(40, 1.0f);  // full vectors and a tail
  for (Isa isa : runnable()) {
    std::vector<float> y;
    run_exp(kiln::cpu::kernel_table_for(isa), x, y);
    EXPECT_EQ(y[0], inf);
    EXPECT_EQ(y[1], 0.0f);
    EXPECT_TRUE(std::isnan(y[2]));
    EXPECT_EQ(y[3], 1.0f);
    EXPECT_EQ(y[4], 1.0f);
    EXPECT_EQ(y[5], inf);
    EXPECT_EQ(y[6], 0.0f);
    EXPECT_EQ(y[7], inf);
    EXPECT_EQ(y[8], 0.0f);
  }
}

}  // namespace

// FlexAttention's fused softmax step (attn_softmax) on every table, against the step in double: tiles
// whose rows are and are not a multiple of 16 wide, rows fully masked (l stays 0, P all 0), rows whose
// running max does not move (alpha exactly 1), in place and rounded to bfloat16.
TEST(Isa, AttentionSoftmaxStepOnEveryTable) {
  const float ninf = -std::numeric_limits<float>::infinity();
  uint32_t seed = 12345;
  auto uni = [&] {  // in [-1, 1)
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<int32_t>(seed)) / 2147483648.0f;
  };
  for (Isa isa : runnable()) {
    const auto& t = kiln::cpu::kernel_table_for(isa);
    ASSERT_NE(t.attn_softmax, nullptr) << static_cast<int>(isa);
    for (int64_t bq : {1, 5, 16, 19})
      for (int64_t bk : {16, 48, 37})
        for (bool round : {false, true}) {
          const float scale = 0.125f;
          std::vector<float> s(bq * bk), mx(bq), l(bq), alpha(bq);
          for (auto& x : s) x = 8.0f * uni();
          for (int64_t i = 0; i < bq; ++i) {
            for (int64_t j = 0; j < bk; ++j)
              if ((i + j) % 7 == 0) s[i * bk + j] = ninf;  // masked scores
            mx[i] = i % 3 == 0 ? ninf : 2.0f;              // a first tile, or a max already above this tile's
            l[i] = i % 3 == 0 ? 0.0f : 3.0f;
          }
          if (bq > 1)
            for (int64_t j = 0; j < bk; ++j) s[bk + j] = ninf, mx[1] = ninf, l[1] = 0.0f;  // row 1: all masked
          const std::vector<float> s0 = s, mx0 = mx, l0 = l;
          std::vector<kiln::BFloat16> pb(round ? bq * bk : 0);
          const bool rescale = t.attn_softmax(s.data(), bq, bk, scale, mx.data(), l.data(), alpha.data(),
                                              round ? pb.data() : nullptr);
          bool any = false;
          for (int64_t i = 0; i < bq; ++i) {
            float m = ninf;
            for (int64_t j = 0; j < bk; ++j) m = std::max(m, s0[i * bk + j]);
            const float mn = std::max(mx0[i], m * scale);
            const double mu = mn == ninf ? 0.0 : mn;
            const double a = std::exp(static_cast<double>(mx0[i]) - mu);
            any |= static_cast<float>(a) != 1.0f;
            EXPECT_EQ(mx[i], mn) << "row " << i;
            EXPECT_NEAR(alpha[i], a, 1e-6 * a + 1e-37) << "row " << i;
            double sum = 0;
            for (int64_t j = 0; j < bk; ++j) {
              const double p = std::exp(static_cast<double>(s0[i * bk + j]) * scale - mu);
              sum += p;
              const float got = round ? static_cast<float>(pb[i * bk + j]) : s[i * bk + j];
              EXPECT_NEAR(got, p, (round ? 4e-3 : 1e-6) * p + 1e-37) << "row " << i << " col " << j;
            }
            EXPECT_NEAR(l[i], l0[i] * a + sum, 1e-5 * (l0[i] * a + sum) + 1e-37) << "row " << i;
            if (mx0[i] == ninf && m == ninf) EXPECT_EQ(l[i], 0.0f) << "fully masked row " << i;
          }
          EXPECT_EQ(rescale, any);
        }
  }
}

// FlexAttention's float32 tile products (AVX-512 and AVX2 tables): K^T packed in 32-key panels (E a
// multiple of 16 and not: the register transpose and its column tail), s = Q K^T from it at an offset
// j0, and C += alpha op(A) B with and without A transposed, alpha 1 (onto C) and not, k past a 128
// slice, against sums in double; rows 8 to 40 (AVX2's 6-row tiles and each remainder they leave).
TEST(Isa, AttentionFloat32TileProducts) {
  uint32_t seed = 777;
  auto uni = [&] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<int32_t>(seed)) / 2147483648.0f;
  };
  int tables = 0;
  for (Isa isa : runnable()) {
    const auto& t = kiln::cpu::kernel_table_for(isa);
    if (!t.attn_pack_kt_f32) continue;
    ++tables;
    ASSERT_NE(t.attn_qk_f32, nullptr);
    ASSERT_NE(t.attn_mm_f32, nullptr);
    for (int64_t E : {64, 40, 8})
      for (int64_t bq : {8, 16, 24, 40}) {
        const int64_t S = 96, j0 = 32, bk = 64;
        // (s with a sentinel row past bq: a row tile must not run past the last row)
        std::vector<float> k(S * E), kt(S * E), q(bq * E), s((bq + 1) * bk, 7.0f);
        for (auto& x : k) x = uni();
        for (auto& x : q) x = uni();
        t.attn_pack_kt_f32(k.data(), S, E, kt.data());
        for (int64_t n = 0; n < S; ++n)
          for (int64_t e = 0; e < E; ++e)
            ASSERT_EQ(kt[(n / 32) * 32 * E + e * 32 + n % 32], k[n * E + e]) << "E " << E << " key " << n;
        t.attn_qk_f32(q.data(), bq, E, kt.data(), j0, bk, s.data());
        for (int64_t i = 0; i < bq; ++i)
          for (int64_t j = 0; j < bk; ++j) {
            double want = 0;
            for (int64_t e = 0; e < E; ++e) want += double(q[i * E + e]) * k[(j0 + j) * E + e];
            EXPECT_NEAR(s[i * bk + j], want, 1e-5 * E) << "E " << E << " bq " << bq << " (" << i << ", " << j << ")";
          }
        for (int64_t j = 0; j < bk; ++j) EXPECT_EQ(s[bq * bk + j], 7.0f) << "past bq " << bq;
      }
    for (bool ta : {false, true})
      for (float alpha : {1.0f, 0.125f})
        for (int64_t kk : {24, 200})
          for (int64_t m : {8, 16, 40}) {
            const int64_t n = 64, lda = ta ? m + 3 : kk + 5, ldb = n + 7, ldc = n + 1;
            // (c with a sentinel row past m)
            std::vector<float> a((ta ? kk : m) * lda), b(kk * ldb), c((m + 1) * ldc);
            for (auto& x : a) x = uni();
            for (auto& x : b) x = uni();
            for (auto& x : c) x = uni();
            const std::vector<float> c0 = c;
            t.attn_mm_f32(ta, m, n, kk, alpha, a.data(), lda, b.data(), ldb, c.data(), ldc);
            for (int64_t i = 0; i <= m; ++i)
              for (int64_t j = 0; j < ldc; ++j) {
                if (i == m || j >= n) {
                  EXPECT_EQ(c[i * ldc + j], c0[i * ldc + j]) << "past m or n, m " << m;
                  continue;
                }
                double sum = 0;
                for (int64_t p = 0; p < kk; ++p) sum += double(ta ? a[p * lda + i] : a[i * lda + p]) * b[p * ldb + j];
                EXPECT_NEAR(c[i * ldc + j], c0[i * ldc + j] + alpha * sum, 1e-5 * kk)
                    << "ta " << ta << " alpha " << alpha << " k " << kk << " m " << m << " (" << i << ", " << j << ")";
              }
          }
  }
  if (kiln::cpu::isa_supported(Isa::Avx2)) EXPECT_GT(tables, 0);
}

// FlexAttention's float32 backward row steps and mask application (AVX-512 and AVX2 tables): rows
// whose lse is -inf give zeros, masked scores (-inf) give 0, exponents below -87.33 give 0 (above
// it, the value), NaN stays NaN, widths with and without a tail past the vectors; dS = P (dP - D);
// the mask on a tile whose rows are further apart than its width, leaving the rest alone.
TEST(Isa, AttentionBackwardRowStepsAndMask) {
  const float ninf = -std::numeric_limits<float>::infinity();
  uint32_t seed = 4242;
  auto uni = [&] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<int32_t>(seed)) / 2147483648.0f;
  };
  int tables = 0;
  for (Isa isa : runnable()) {
    const auto& t = kiln::cpu::kernel_table_for(isa);
    if (!t.attn_bwd_p) continue;
    ++tables;
    ASSERT_NE(t.attn_bwd_ds, nullptr);
    ASSERT_NE(t.attn_mask, nullptr);
    for (int64_t bk : {16, 37, 5}) {
      const int64_t bq = 4;
      const float scale = 0.25f;
      std::vector<float> s(bq * bk), lse = {1.5f, ninf, -0.5f, 2.0f};
      for (auto& x : s) x = 4.0f * uni();
      s[0] = ninf, s[2 * bk + bk - 1] = ninf;
      // exponents (x * scale - lse[3]) of -87.32 (kept), -87.335 and -100 (0), and NaN
      s[3 * bk] = 4.0f * (2.0f - 87.32f), s[3 * bk + 1] = 4.0f * (2.0f - 87.335f);
      s[3 * bk + 2] = 4.0f * (2.0f - 100.0f), s[3 * bk + 3] = std::numeric_limits<float>::quiet_NaN();
      const std::vector<float> s0 = s;
      t.attn_bwd_p(s.data(), bq, bk, scale, lse.data());
      for (int64_t i = 0; i < bq; ++i)
        for (int64_t j = 0; j < bk; ++j) {
          const float x = s0[i * bk + j];
          if (std::isnan(x)) {
            EXPECT_TRUE(std::isnan(s[i * bk + j])) << "bk " << bk << " (" << i << ", " << j << ")";
            continue;
          }
          const double e = double(x) * scale - lse[i];
          const double want = lse[i] == ninf || x == ninf || e < -87.33 ? 0.0 : std::exp(e);
          // (the exponent is rounded to float first: 0.5 ulp of |e| relative)
          if (want == 0.0)
            EXPECT_EQ(s[i * bk + j], 0.0f) << "bk " << bk << " (" << i << ", " << j << ")";
          else
            EXPECT_NEAR(s[i * bk + j], want, (1e-6 + 6e-8 * std::abs(e)) * want)
                << "bk " << bk << " (" << i << ", " << j << ")";
        }
      EXPECT_GT(s[3 * bk], 0.0f) << "exp(-87.32)";
      EXPECT_EQ(s[3 * bk + 1], 0.0f) << "exp(-87.335)";
      std::vector<float> ds(bq * bk), d = {0.5f, -1.0f, 0.0f, 2.0f};
      for (auto& x : ds) x = uni();
      const std::vector<float> ds0 = ds;
      t.attn_bwd_ds(s.data(), ds.data(), bq, bk, d.data());
      for (int64_t i = 0; i < bq; ++i)
        for (int64_t j = 0; j < bk; ++j)
          if (!std::isnan(s[i * bk + j]))
            EXPECT_FLOAT_EQ(ds[i * bk + j], s[i * bk + j] * (ds0[i * bk + j] - d[i])) << "(" << i << ", " << j << ")";
      const int64_t ld = bk + 3, ldm = bk + 1;
      std::vector<float> tile(bq * ld);
      std::vector<uint8_t> m(bq * ldm);
      for (auto& x : tile) x = uni();
      for (size_t i = 0; i < m.size(); ++i) m[i] = (i * 7 + 3) % 5 != 0;
      const std::vector<float> tile0 = tile;
      t.attn_mask(tile.data(), ld, m.data(), ldm, bq, bk);
      for (int64_t i = 0; i < bq; ++i)
        for (int64_t j = 0; j < ld; ++j) {
          const bool masked = j < bk && !m[i * ldm + j];
          EXPECT_EQ(tile[i * ld + j], masked ? ninf : tile0[i * ld + j]) << "(" << i << ", " << j << ")";
        }
    }
  }
  if (kiln::cpu::isa_supported(Isa::Avx2)) EXPECT_GT(tables, 0);
}

// The real FFT's steps around its half-length complex transform (kernels_fft.cpp), on every table:
// each output the stated arithmetic (done in long double) to within a few float roundings; unit and
// strided spectra, M odd and even (the middle bin of the pairs), and the inverse step undoing the
// forward one (2 z back). (The tables do not give the same bits: GCC's complex-arithmetic patterns
// for AVX2 regroup the sums, -ffp-contract=off or not.)
TEST(Isa, FftHalfStepsOnEveryTable) {
  uint32_t seed = 4242;
  auto uni = [&] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<int32_t>(seed)) / 2147483648.0f;
  };
  const long double pi = 3.14159265358979323846264338327950288L;
  for (int64_t M : {4, 5, 64, 1023}) {
    const int64_t N = 2 * M;
    std::vector<float> z(2 * M), w(2 * M);
    for (auto& v : z) v = uni();
    for (int64_t k = 0; k < M; ++k) {
      const long double a = -2.0L * pi * k / N;
      w[2 * k] = static_cast<float>(std::cos(a)), w[2 * k + 1] = static_cast<float>(std::sin(a));
    }
    for (Isa isa : runnable()) {
      const auto& t = kiln::cpu::kernel_table_for(isa);
      ASSERT_NE(t.fft_half_f32.r2c_post, nullptr);
      for (int64_t st : {1, 3}) {
        std::vector<float> X(2 * (M + 1) * st, 9.0f), back(2 * M);
        t.fft_half_f32.r2c_post(z.data(), w.data(), M, X.data(), st);
        t.fft_half_f32.c2r_pre(X.data(), st, w.data(), M, back.data());
        // X[k] = (Z[k] + conj Z[M-k]) / 2 - i w^k (Z[k] - conj Z[M-k]) / 2, Z[M] = Z[0]
        for (int64_t k = 0; k <= M; ++k) {
          const long double ar = z[2 * (k % M)], ai = z[2 * (k % M) + 1], br = z[2 * ((M - k) % M)],
                            bi = -z[2 * ((M - k) % M) + 1];
          const long double c = std::cos(-2.0L * pi * k / N), s = std::sin(-2.0L * pi * k / N);
          const long double orr = (ai - bi) / 2, oi = (br - ar) / 2;
          const double xr = static_cast<double>((ar + br) / 2 + c * orr - s * oi);
          const double xi = static_cast<double>((ai + bi) / 2 + c * oi + s * orr);
          EXPECT_NEAR(X[2 * k * st], xr, 1e-6) << t.isa << " M " << M << " stride " << st << " k " << k;
          EXPECT_NEAR(X[2 * k * st + 1], xi, 1e-6) << t.isa << " M " << M << " stride " << st << " k " << k;
        }
        for (int64_t i = 0; i < 2 * M; ++i)
          EXPECT_NEAR(back[i], 2.0 * z[i], 4e-6) << t.isa << " M " << M << " stride " << st << " i " << i;
      }
    }
  }
}
