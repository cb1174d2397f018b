// kiln's packed low-precision GEMM (kernels_gemm.cpp): every ISA build this machine runs, against a
// double-precision reference, over odd sizes, K sliced or not, transposed / strided / broadcast
// operands, batches, NaN and infinity, K == 0, and bit-identical results for 1 and 2 threads.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/kiln.h"

namespace kiln::cpu {
namespace base { void fill_gemm(KernelTable&); }
#ifndef KILN_BASE_ISA_ONLY
namespace avx2 { void fill_gemm(KernelTable&); void fill_copy(KernelTable&); }
namespace avx512 { void fill_gemm(KernelTable&); void fill_copy(KernelTable&); }
namespace avx512bf16 { void fill_gemm_bf16(KernelTable&); }
namespace avx512amx { void fill_gemm_amx(KernelTable&); }
#endif
}  // namespace kiln::cpu

using namespace kiln;

namespace {

struct Isa {
  std::string name;
  cpu::KernelTable table;
  bool bf16_dot = false;  // bfloat16 by vdpbf16ps: subnormal inputs and outputs flush to zero
  // packed bfloat16 / float8 products on AMX tiles: within the tolerances, but the tile's own order of
  // additions, so not the other tables' bits, nor those of its own GEMV and tiny paths (gemm_amx.h)
  bool amx = false;
};

const std::vector<Isa>& isas() {
  static std::vector<Isa> v = [] {
    std::vector<Isa> r;
    r.push_back({"base", {}});
    cpu::base::fill_gemm(r.back().table);
#ifndef KILN_BASE_ISA_ONLY
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
      r.push_back({"avx2", {}});
      cpu::avx2::fill_gemm(r.back().table);
      cpu::avx2::fill_copy(r.back().table);  // (for Copy.TransposeDense)
    }
    if (cpu::isa_supported(cpu::Isa::Avx512)) {
      r.push_back({"avx512", {}});
      cpu::avx512::fill_gemm(r.back().table);
      cpu::avx512::fill_copy(r.back().table);
    }
    if (cpu::bf16_dot_supported()) {  // the avx512 table as this CPU runs it
      r.push_back({"avx512bf16", {}, true});
      cpu::avx512::fill_gemm(r.back().table);
      cpu::avx512bf16::fill_gemm_bf16(r.back().table);
    }
    if (cpu::amx_supported()) {  // ... and with AMX tiles
      r.push_back({"avx512amx", {}, true, true});
      cpu::avx512::fill_gemm(r.back().table);
      cpu::avx512bf16::fill_gemm_bf16(r.back().table);
      cpu::avx512amx::fill_gemm_amx(r.back().table);
    }
#endif
    return r;
  }();
  return v;
}

// Scoped thread count.
struct Threads {
  int old;
  explicit Threads(int n) : old(get_num_threads()) { set_num_threads(n); }
  ~Threads() { set_num_threads(old); }
};

template <class T> float f32(T x) { return static_cast<float>(x); }
template <class T> uint32_t bits(T x) {
  if constexpr (std::is_same_v<T, float>) return std::bit_cast<uint32_t>(x);
  else return x.x;
}

// Half an ulp relative (one rounding of the result) and the spacing of the smallest subnormals.
template <class T> double rel_tol() {
  if constexpr (std::is_same_v<T, Half>) return 0x1p-11;
  else if constexpr (std::is_same_v<T, BFloat16>) return 0x1p-8;
  else if constexpr (std::is_same_v<T, Float8_e4m3fn>) return 0x1p-4;
  else if constexpr (std::is_same_v<T, Float8_e5m2>) return 0x1p-3;
  else return 0x1p-24;
}
template <class T> double abs_tol() {
  if constexpr (std::is_same_v<T, Half>) return 0x1p-24;
  else if constexpr (std::is_same_v<T, Float8_e4m3fn>) return 0x1p-9;
  else if constexpr (std::is_same_v<T, Float8_e5m2>) return 0x1p-16;
  else return 1e-38;
}

// A (batch, R, C) operand in a buffer of its own, with a chosen layout.
enum class Layout { RowMajor, ColMajor, PaddedRow, PaddedCol, Broadcast };

template <class T>
struct Operand {
  int64_t B, R, C, bs, rs, cs;
  std::vector<T> buf;
  Operand(int64_t B_, int64_t R_, int64_t C_, Layout l, std::mt19937& rng) : B(B_), R(R_), C(C_) {
    bool col = l == Layout::ColMajor || l == Layout::PaddedCol;
    int64_t pad = (l == Layout::PaddedRow || l == Layout::PaddedCol) ? 3 : 0;
    int64_t ld = (col ? R : C) + pad;
    rs = col ? 1 : ld;
    cs = col ? ld : 1;
    int64_t mat = (col ? C : R) * ld + pad;
    bs = l == Layout::Broadcast ? 0 : mat;
    buf.resize(static_cast<size_t>(l == Layout::Broadcast ? mat : B * mat));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto& x : buf) x = T(u(rng));
  }
  T at(int64_t b, int64_t r, int64_t c) const { return buf[b * bs + r * rs + c * cs]; }
};

// The arguments of one product (batch 1) of two operands into C (M x N, row-major).
template <class A, class B>
cpu::GemmArgs args_of(const A& a, const B& b, void* c) {
  cpu::GemmArgs g;
  g.M = a.R, g.N = b.C, g.K = a.C;
  g.a = a.buf.data(), g.a_rs = a.rs, g.a_cs = a.cs;
  g.b = b.buf.data(), g.b_rs = b.rs, g.b_cs = b.cs;
  g.c = c, g.c_rs = b.C, g.c_cs = 1;
  return g;
}

// C[i][j] of a product in double, and the sum of its terms' magnitudes (what float32 rounds against).
template <class A, class B>
std::pair<double, double> ref_and_mag(const A& a, const B& b, int64_t i, int64_t j) {
  double ref = 0, mag = 0;
  for (int64_t k = 0; k < a.C; ++k) {
    double p = static_cast<double>(f32(a.at(0, i, k))) * f32(b.at(0, k, j));
    ref += p, mag += std::fabs(p);
  }
  return {ref, mag};
}

template <class T>
std::vector<T> run(const cpu::KernelTable& t, const Operand<T>& a, const Operand<T>& b, bool c_colmajor = false) {
  int64_t Bn = a.B, M = a.R, K = a.C, N = b.C;
  std::vector<T> c(static_cast<size_t>(Bn * M * N), T(123.0f));
  cpu::GemmArgs g;
  g.batch = Bn, g.M = M, g.N = N, g.K = K;
  g.a = a.buf.data(), g.a_bs = a.bs, g.a_rs = a.rs, g.a_cs = a.cs;
  g.b = b.buf.data(), g.b_bs = b.bs, g.b_rs = b.rs, g.b_cs = b.cs;
  g.c = c.data(), g.c_bs = M * N;
  g.c_rs = c_colmajor ? 1 : N;
  g.c_cs = c_colmajor ? M : 1;
  t.gemm_lowp[static_cast<int>(dtype_of<T>())](g);
  if (c_colmajor) {  // back to row-major for comparisons
    std::vector<T> r(c.size());
    for (int64_t bi = 0; bi < Bn; ++bi)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) r[(bi * M + i) * N + j] = c[bi * M * N + j * M + i];
    return r;
  }
  return c;
}

template <class T>
void check_against_reference(const Operand<T>& a, const Operand<T>& b, const std::vector<T>& c,
                             const std::string& what) {
  int64_t Bn = a.B, M = a.R, K = a.C, N = b.C;
  int bad = 0;
  for (int64_t bi = 0; bi < Bn; ++bi)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          double p = static_cast<double>(f32(a.at(bi, i, k))) * f32(b.at(bi, k, j));
          ref += p;
          mag += std::fabs(p);
        }
        double got = f32(c[(bi * M + i) * N + j]);
        double tol = rel_tol<T>() * std::fabs(ref) * 1.0001 + abs_tol<T>() + K * 0x1p-23 * mag;
        if (!(std::fabs(got - ref) <= tol) && bad++ < 5)
          ADD_FAILURE() << what << " at [" << bi << "," << i << "," << j << "]: got " << got << ", want " << ref
                        << " (tol " << tol << ")";
      }
}

template <class T>
void sweep_sizes() {
  const int64_t sizes[] = {1, 7, 17, 65, 130};
  const Layout la[] = {Layout::RowMajor, Layout::ColMajor, Layout::PaddedRow, Layout::PaddedCol};
  std::mt19937 rng(1234);
  int case_no = 0;
  for (int64_t M : sizes)
    for (int64_t N : sizes)
      for (int64_t K : sizes) {
        // cycle through the layout pairs so every size sees a few of them
        Layout l_a = la[case_no % 4], l_b = la[(case_no / 4 + case_no) % 4];
        ++case_no;
        Operand<T> a(1, M, K, l_a, rng), b(1, K, N, l_b, rng);
        for (const Isa& isa : isas()) {
          std::string what = isa.name + " " + std::string(dtype_name(dtype_of<T>())) + " M=" + std::to_string(M) +
                             " N=" + std::to_string(N) + " K=" + std::to_string(K) + " layouts " +
                             std::to_string(int(l_a)) + "/" + std::to_string(int(l_b));
          std::vector<T> c = run(isa.table, a, b);
          check_against_reference(a, b, c, what);
          // the scalar (strided-C) epilogue rounds exactly as the vector one
          std::vector<T> ct = run(isa.table, a, b, true);
          for (size_t e = 0; e < c.size(); ++e)
            if (bits(c[e]) != bits(ct[e])) {
              ADD_FAILURE() << what << ": strided C differs at " << e;
              break;
            }
        }
      }
}

}  // namespace

TEST(Gemm, SizesBFloat16) { sweep_sizes<BFloat16>(); }

// bfloat16 operands into a float32 C (FlexAttention's bfloat16 tiles), every table, every layout pair,
// against the double-precision sum: within float32 accumulation error.
TEST(Gemm, BFloat16IntoFloat32) {
  const Layout la[] = {Layout::RowMajor, Layout::ColMajor, Layout::PaddedRow, Layout::PaddedCol};
  std::mt19937 rng(77);
  for (int64_t M : {1, 33, 128})
    for (int64_t N : {5, 64, 130})
      for (int64_t K : {3, 64, 257})
        for (Layout l_a : la)
          for (Layout l_b : {Layout::RowMajor, Layout::ColMajor}) {
            Operand<BFloat16> a(1, M, K, l_a, rng), b(1, K, N, l_b, rng);
            for (const Isa& isa : isas()) {
              ASSERT_NE(isa.table.gemm_bf16_f32, nullptr) << isa.name;
              std::vector<float> c(static_cast<size_t>(M * N), 123.0f);
              isa.table.gemm_bf16_f32(args_of(a, b, c.data()));
              int bad = 0;
              for (int64_t i = 0; i < M; ++i)
                for (int64_t j = 0; j < N; ++j) {
                  auto [ref, mag] = ref_and_mag(a, b, i, j);
                  if (!(std::fabs(c[i * N + j] - ref) <= K * 0x1p-23 * mag + 1e-30) && bad++ < 3)
                    ADD_FAILURE() << isa.name << " M=" << M << " N=" << N << " K=" << K << " layouts "
                                  << int(l_a) << "/" << int(l_b) << " at [" << i << "," << j << "]: got "
                                  << c[i * N + j] << ", want " << ref;
                }
            }
          }
}
TEST(Gemm, SizesFloat16) { sweep_sizes<Half>(); }
TEST(Gemm, SizesFloat8E4M3) { sweep_sizes<Float8_e4m3fn>(); }
TEST(Gemm, SizesFloat8E5M2) { sweep_sizes<Float8_e5m2>(); }
TEST(Gemm, SizesFloat32) { sweep_sizes<float>(); }

// K over several slices (float32 workspace), M over several MC blocks, N over an NC block.
TEST(Gemm, LargeBlocks) {
  std::mt19937 rng(7);
  struct S { int64_t M, N, K; Layout la, lb; };
  const S cases[] = {{33, 47, 300, Layout::RowMajor, Layout::RowMajor},
                     {150, 20, 600, Layout::ColMajor, Layout::RowMajor},
                     {300, 35, 257, Layout::PaddedRow, Layout::PaddedCol},
                     {7, 4100, 513, Layout::RowMajor, Layout::ColMajor}};
  for (const S& s : cases) {
    Operand<BFloat16> a(1, s.M, s.K, s.la, rng), b(1, s.K, s.N, s.lb, rng);
    Operand<Half> ah(1, s.M, s.K, s.la, rng), bh(1, s.K, s.N, s.lb, rng);
    for (const Isa& isa : isas()) {
      std::string what = isa.name + " " + std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K);
      check_against_reference(a, b, run(isa.table, a, b), what + " bf16");
      check_against_reference(ah, bh, run(isa.table, ah, bh), what + " f16");
    }
  }
}

TEST(Gemm, Batches) {
  std::mt19937 rng(11);
  const Layout ls[] = {Layout::RowMajor, Layout::PaddedCol, Layout::Broadcast};
  for (Layout l_a : ls)
    for (Layout l_b : ls) {
      Operand<BFloat16> a(5, 19, 70, l_a, rng), b(5, 70, 23, l_b, rng);
      for (const Isa& isa : isas())
        check_against_reference(a, b, run(isa.table, a, b), isa.name + " batch layouts " +
                                std::to_string(int(l_a)) + "/" + std::to_string(int(l_b)));
    }
}

// Splitting the work between threads never changes a bit: batches, M / N tile splits, K slices.
TEST(Gemm, ThreadCountInvariant) {
  std::mt19937 rng(3);
  struct S { int64_t B, M, N, K; };
  const S cases[] = {{1, 130, 131, 300}, {1, 301, 40, 70}, {3, 65, 97, 513}, {2, 64, 64, 64}, {5, 17, 130, 7}};
  for (const S& s : cases) {
    Operand<BFloat16> a(s.B, s.M, s.K, Layout::RowMajor, rng), b(s.B, s.K, s.N, Layout::PaddedCol, rng);
    Operand<Half> ah(s.B, s.M, s.K, Layout::ColMajor, rng), bh(s.B, s.K, s.N, Layout::RowMajor, rng);
    for (const Isa& isa : isas()) {
      std::vector<BFloat16> c1, c2;
      std::vector<Half> h1, h2;
      {
        Threads t(1);
        c1 = run(isa.table, a, b);
        h1 = run(isa.table, ah, bh);
      }
      {
        Threads t(2);
        c2 = run(isa.table, a, b);
        h2 = run(isa.table, ah, bh);
      }
      ASSERT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(BFloat16)), 0) << isa.name << " bf16 " << s.M;
      ASSERT_EQ(std::memcmp(h1.data(), h2.data(), h1.size() * sizeof(Half)), 0) << isa.name << " f16 " << s.M;
    }
  }
}

// A float32 B packed once (sgemm_pack_b) gives gemm_lowp[kFloat32]'s bits: one or several column
// blocks and K slices, row blocks past MC, a matrix-vector shape, B transposed or not, 1 and 2 threads.
TEST(Gemm, PrepackedMatchesFloat32) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  struct S { int64_t M, N, K; };
  const S cases[] = {{2, 64, 3}, {128, 1024, 256}, {301, 4100, 300}, {7, 33, 513}, {1, 100, 300}, {150, 17, 1}};
  for (const S& s : cases)
    for (const bool bt : {false, true})
      for (const Isa& isa : isas()) {
        if (!isa.table.sgemm_prepacked || !isa.table.gemm_lowp[static_cast<int>(kFloat32)]) continue;
        std::vector<float> a(s.M * s.K), b(s.K * s.N);
        for (float& x : a) x = nd(rng);
        for (float& x : b) x = nd(rng);
        const int64_t b_rs = bt ? 1 : s.N, b_cs = bt ? s.K : 1;  // bt: b holds B^T (N x K, row-major)
        std::vector<float> packed(isa.table.sgemm_packed_b_words(s.K, s.N));
        isa.table.sgemm_pack_b(s.K, s.N, b.data(), b_rs, b_cs, packed.data());
        for (const int threads : {1, 2}) {
          Threads t(threads);
          std::vector<float> c1(s.M * s.N, -1.0f), c2(s.M * s.N, -2.0f);
          cpu::GemmArgs g;
          g.M = s.M, g.N = s.N, g.K = s.K;
          g.a = a.data(), g.a_rs = s.K, g.a_cs = 1;
          g.b = b.data(), g.b_rs = b_rs, g.b_cs = b_cs;
          g.c = c1.data(), g.c_rs = s.N, g.c_cs = 1;
          isa.table.gemm_lowp[static_cast<int>(kFloat32)](g);
          g.b = nullptr, g.c = c2.data();
          isa.table.sgemm_prepacked(g, packed.data());
          ASSERT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)), 0)
              << isa.name << " " << s.M << "x" << s.N << "x" << s.K << " bt " << bt << " threads " << threads;
          double err = 0;  // and the product itself (not just two equal wrong answers)
          for (int64_t i = 0; i < s.M; i += std::max<int64_t>(1, s.M / 5))
            for (int64_t j = 0; j < s.N; j += std::max<int64_t>(1, s.N / 7)) {
              double ref = 0;
              for (int64_t k = 0; k < s.K; ++k) ref += double(a[i * s.K + k]) * b[k * b_rs + j * b_cs];
              err = std::max(err, std::abs(ref - c2[i * s.N + j]) / (1 + std::abs(ref)));
            }
          EXPECT_LT(err, 1e-5 * std::sqrt(double(s.K))) << isa.name << " " << s.M << "x" << s.N << "x" << s.K;
        }
      }
}

// NaN / infinity propagate, NaN results are kiln's canonical NaN for the dtype (bfloat16 0x7fc0,
// float16 sign | 0x7e00), overflow rounds to infinity, and vector and scalar epilogues agree.
TEST(Gemm, NanInfOverflow) {
  std::mt19937 rng(5);
  for (const Isa& isa : isas()) {
    Operand<Half> a(1, 9, 20, Layout::RowMajor, rng), b(1, 20, 33, Layout::RowMajor, rng);
    a.buf[0 * a.rs + 3] = Half::from_bits(0x7e01);                   // NaN with a payload, row 0
    a.buf[1 * a.rs + 4] = Half(std::numeric_limits<float>::infinity());  // row 1: +-inf or NaN
    for (int64_t k = 0; k < 20; ++k) a.buf[2 * a.rs + k] = Half(60000.0f);  // row 2: overflow
    for (int64_t k = 0; k < 20; ++k) b.buf[k * b.rs + 5] = Half(1.0f);
    std::vector<Half> c = run(isa.table, a, b), ct = run(isa.table, a, b, true);
    for (size_t e = 0; e < c.size(); ++e) ASSERT_EQ(c[e].x, ct[e].x) << isa.name << " " << e;
    for (int64_t j = 0; j < 33; ++j) EXPECT_EQ(c[j].x & 0x7fff, 0x7e00) << isa.name << " " << j;
    EXPECT_EQ(c[2 * 33 + 5].x, 0x7c00);
    for (int64_t j = 0; j < 33; ++j) EXPECT_TRUE(std::isinf(f32(c[33 + j])) || std::isnan(f32(c[33 + j])));

    Operand<BFloat16> x(1, 8, 20, Layout::ColMajor, rng), y(1, 20, 17, Layout::RowMajor, rng);
    x.buf[3 * x.rs + 2 * x.cs] = BFloat16::from_bits(0xffc1);  // negative NaN with payload
    std::vector<BFloat16> z = run(isa.table, x, y), zt = run(isa.table, x, y, true);
    for (size_t e = 0; e < z.size(); ++e) ASSERT_EQ(z[e].x, zt[e].x) << isa.name << " " << e;
    for (int64_t j = 0; j < 17; ++j) EXPECT_EQ(z[3 * 17 + j].x, 0x7fc0) << isa.name << " " << j;
  }
}

TEST(Gemm, EmptyK) {
  std::mt19937 rng(9);
  Operand<BFloat16> a(2, 5, 0, Layout::RowMajor, rng), b(2, 0, 6, Layout::RowMajor, rng);
  a.buf.resize(1), b.buf.resize(1);
  for (const Isa& isa : isas()) {
    std::vector<BFloat16> c = run(isa.table, a, b);
    for (auto v : c) EXPECT_EQ(v.x, 0);
  }
  Tensor z = matmul(zeros({4, 0}, kFloat16), zeros({0, 3}, kFloat16));
  EXPECT_EQ(sum(to_dtype(z, kFloat32)).item<float>(), 0.0f);
}

// Through bmm / matmul: transposed and sliced views, broadcast batches; against float32 matmul of
// the same (exactly converted) inputs, rounded once.
TEST(Gemm, MatmulViews) {
  for (Dtype d : {kFloat16, kBFloat16}) {
    Tensor a = to_dtype(randn({70, 45}), d), b = to_dtype(randn({33, 70}), d);
    auto expect_close = [&](const Tensor& got, const Tensor& a32, const Tensor& b32, const char* what) {
      Tensor want = to_dtype(matmul(a32, b32), d);
      Tensor diff = abs(sub(to_dtype(got, kFloat32), to_dtype(want, kFloat32)));
      Tensor lim = add(mul(abs(to_dtype(want, kFloat32)), Scalar(d == kFloat16 ? 2e-3 : 1.6e-2)), Scalar(1e-3));
      EXPECT_TRUE(all(le(diff, lim)).item<bool>()) << what << " " << dtype_name(d);
    };
    Tensor a32 = to_dtype(a, kFloat32), b32 = to_dtype(b, kFloat32);
    expect_close(matmul(t(a), t(b)), t(a32), t(b32), "t/t");
    expect_close(matmul(slice(t(a), 0, 1, 40, 2), slice(t(b), 1, 2, 33, 3)), slice(t(a32), 0, 1, 40, 2),
                 slice(t(b32), 1, 2, 33, 3), "sliced");
    Tensor A = to_dtype(randn({3, 20, 31}), d), B = to_dtype(randn({31, 9}), d);
    expect_close(matmul(A, B), to_dtype(A, kFloat32), to_dtype(B, kFloat32), "folded batch");
    Tensor Bb = to_dtype(randn({1, 31, 9}), d);
    expect_close(matmul(A, expand(Bb, {3, 31, 9})), to_dtype(A, kFloat32), to_dtype(expand(Bb, {3, 31, 9}), kFloat32),
                 "broadcast batch");
    expect_close(bmm(transpose(A, 1, 2), A), transpose(to_dtype(A, kFloat32), 1, 2), to_dtype(A, kFloat32),
                 "bmm transposed");
  }
}

// Every code of each dtype through packing (both operands) and the epilogue: x * 1 rounds back to
// what kiln's scalar conversion gives (x itself, canonical NaN, +0 for -0).
template <class T>
void all_codes() {
  const int n = sizeof(T) == 1 ? 256 : 65536;
  std::vector<T> codes(n), one{T(1.0f)};
  for (int i = 0; i < n; ++i) {
    if constexpr (sizeof(T) == 1) codes[i] = T::from_bits(static_cast<uint8_t>(i));
    else codes[i] = T::from_bits(static_cast<uint16_t>(i));
  }
  for (const Isa& isa : isas()) {
    for (int side = 0; side < 2; ++side) {
      std::vector<T> c(n, T(7.0f));
      cpu::GemmArgs g;
      g.K = 1;
      g.c = c.data();
      if (side == 0) {  // (1 x 1) @ (1 x n)
        g.M = 1, g.N = n, g.a = one.data(), g.a_rs = g.a_cs = 1, g.b = codes.data(), g.b_rs = n, g.b_cs = 1;
        g.c_rs = n, g.c_cs = 1;
      } else {  // (n x 1) @ (1 x 1)
        g.M = n, g.N = 1, g.a = codes.data(), g.a_rs = 1, g.a_cs = n, g.b = one.data(), g.b_rs = g.b_cs = 1;
        g.c_rs = 1, g.c_cs = 1;
      }
      isa.table.gemm_lowp[static_cast<int>(dtype_of<T>())](g);
      int bad = 0;
      for (int i = 0; i < n; ++i) {
        float x = static_cast<float>(codes[i]);
        if (isa.bf16_dot && std::is_same_v<T, BFloat16> && std::fabs(x) < std::numeric_limits<float>::min())
          x = 0.0f;  // vdpbf16ps reads subnormals as zero
        auto want = T(x == 0.0f ? 0.0f : x).x;  // -0 * 1 added to a +0 accumulator is +0, as in BLAS
        if (c[i].x != want && bad++ < 5)
          ADD_FAILURE() << isa.name << " " << dtype_name(dtype_of<T>()) << " side " << side << " code " << i
                        << ": got " << int(c[i].x) << ", want " << int(want);
      }
    }
  }
}

TEST(Gemm, AllCodesRoundTrip) {
  all_codes<Half>();
  all_codes<BFloat16>();
  all_codes<Float8_e4m3fn>();
  all_codes<Float8_e5m2>();
}

// The float16 (and bfloat16, decision 70) matrix-vector product over k-contiguous rows (decision
// 67), written out: 64 lanes (lane k mod 64) below K rounded down to 64, combined as (Z0 + Z1) +
// (Z2 + Z3) over the 16-lane groups, then halves of 8, 4, 2, 1 lanes, then the last K mod 64 terms
// one after another.
template <class T, class U>
float f16_row_dot(const T* x, int64_t xs, const U* r, int64_t rs, int64_t K) {
  const int64_t K64 = K / 64 * 64;
  float lane[64] = {};
  for (int64_t k = 0; k < K64; ++k)
    lane[k % 64] = std::fmaf(static_cast<float>(x[k * xs]), static_cast<float>(r[k * rs]), lane[k % 64]);
  float z[16];
  for (int l = 0; l < 16; ++l) z[l] = (lane[l] + lane[16 + l]) + (lane[32 + l] + lane[48 + l]);
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) z[l] += z[l + w];
  float y = z[0];
  for (int64_t k = K64; k < K; ++k) y = std::fmaf(static_cast<float>(x[k * xs]), static_cast<float>(r[k * rs]), y);
  return y;
}

// Matrix-vector shapes (M == 1 or N == 1) and tiny products take paths of their own that read the
// operands in place; every output must still be bit-identical to the same element of the full
// (packed) product. Except float16 (and bfloat16 and float8 on the float32 panels) with the matrix's
// k contiguous: those sum in 64 lanes (f16_row_dot; the packed path's bits below K = 64).
template <class T>
void gemv_matches_gemm() {
  std::mt19937 rng(21);
  const Layout ls[] = {Layout::RowMajor, Layout::ColMajor, Layout::PaddedRow};
  for (int64_t K : {1, 7, 64, 300, 700})
    for (Layout l_a : ls)
      for (Layout l_b : ls) {
        const int64_t M = 37, N = 83;
        Operand<T> a(1, M, K, l_a, rng), b(1, K, N, l_b, rng);
        for (const Isa& isa : isas()) {
          if (isa.amx && !std::is_same_v<T, Half>) continue;  // (AMX: its own bits; float16 runs the float32 panels)
          // 64 lanes where the matrix has k contiguous: float16 and float8 on every table (decisions 67,
          // 77, 80), bfloat16 on the float32 panels (decision 70)
          const bool lanes = std::is_same_v<T, Half> || std::is_same_v<T, Float8_e4m3fn> ||
                             std::is_same_v<T, Float8_e5m2> || !isa.bf16_dot;
          std::vector<T> full = run(isa.table, a, b);
          auto fn = isa.table.gemm_lowp[static_cast<int>(dtype_of<T>())];
          for (int64_t i : {int64_t(0), M - 1}) {  // row i: (1 x K) @ B
            std::vector<T> row(N);
            cpu::GemmArgs g;
            g.M = 1, g.N = N, g.K = K;
            g.a = a.buf.data() + i * a.rs, g.a_rs = a.rs, g.a_cs = a.cs;
            g.b = b.buf.data(), g.b_rs = b.rs, g.b_cs = b.cs;
            g.c = row.data(), g.c_rs = N, g.c_cs = 1;
            fn(g);
            for (int64_t j = 0; j < N; ++j) {
              T want = full[i * N + j];
              if (lanes && b.rs == 1) want = T(f16_row_dot(&a.buf[i * a.rs], a.cs, &b.buf[j * b.cs], 1, K));
              ASSERT_EQ(bits(row[j]), bits(want)) << isa.name << " row " << i << " K=" << K << " j=" << j;
            }
          }
          for (int64_t R : {2, 3, 4}) {  // R rows (i0..): (R x K) @ B, and A @ (K x R): a few decode steps
            const int64_t i0 = 9, j0 = 40;
            std::vector<T> rows(R * N), cols(M * R);
            cpu::GemmArgs g;
            g.M = R, g.N = N, g.K = K;
            g.a = a.buf.data() + i0 * a.rs, g.a_rs = a.rs, g.a_cs = a.cs;
            g.b = b.buf.data(), g.b_rs = b.rs, g.b_cs = b.cs;
            g.c = rows.data(), g.c_rs = N, g.c_cs = 1;
            fn(g);
            g.M = M, g.N = R;
            g.a = a.buf.data(), g.b = b.buf.data() + j0 * b.cs;
            g.c = cols.data(), g.c_rs = 1, g.c_cs = M;  // (column-major C)
            fn(g);
            for (int64_t r = 0; r < R; ++r) {
              for (int64_t j = 0; j < N; ++j) {
                T want = full[(i0 + r) * N + j];
                if (lanes && b.rs == 1) want = T(f16_row_dot(&a.buf[(i0 + r) * a.rs], a.cs, &b.buf[j * b.cs], 1, K));
                ASSERT_EQ(bits(rows[r * N + j]), bits(want)) << isa.name << " R=" << R << " row " << r << " K=" << K
                                                             << " j=" << j << " layouts " << int(l_a) << "/" << int(l_b);
              }
              for (int64_t i = 0; i < M; ++i) {
                T want = full[i * N + j0 + r];
                if (lanes && a.cs == 1) want = T(f16_row_dot(&b.buf[(j0 + r) * b.cs], b.rs, &a.buf[i * a.rs], 1, K));
                ASSERT_EQ(bits(cols[r * M + i]), bits(want)) << isa.name << " R=" << R << " col " << r << " K=" << K
                                                             << " i=" << i << " layouts " << int(l_a) << "/" << int(l_b);
              }
            }
          }
          if (K <= 7) {  // a 3 x 3 block: tiny products skip packing, same arithmetic
            std::vector<T> blk(9);
            cpu::GemmArgs g;
            g.M = 3, g.N = 3, g.K = K;
            g.a = a.buf.data() + 5 * a.rs, g.a_rs = a.rs, g.a_cs = a.cs;
            g.b = b.buf.data() + 7 * b.cs, g.b_rs = b.rs, g.b_cs = b.cs;
            g.c = blk.data(), g.c_rs = 3, g.c_cs = 1;
            fn(g);
            for (int64_t i = 0; i < 3; ++i)
              for (int64_t j = 0; j < 3; ++j)
                ASSERT_EQ(bits(blk[i * 3 + j]), bits(full[(5 + i) * N + 7 + j])) << isa.name << " block K=" << K;
          }
          for (int64_t j : {int64_t(0), int64_t(40), N - 1}) {  // column j: A @ (K x 1), strided output
            std::vector<T> col(M * 2);
            cpu::GemmArgs g;
            g.M = M, g.N = 1, g.K = K;
            g.a = a.buf.data(), g.a_rs = a.rs, g.a_cs = a.cs;
            g.b = b.buf.data() + j * b.cs, g.b_rs = b.rs, g.b_cs = b.cs;
            g.c = col.data(), g.c_rs = 2, g.c_cs = 1;
            fn(g);
            for (int64_t i = 0; i < M; ++i) {
              T want = full[i * N + j];
              if (lanes && a.cs == 1) want = T(f16_row_dot(&b.buf[j * b.cs], b.rs, &a.buf[i * a.rs], 1, K));
              ASSERT_EQ(bits(col[i * 2]), bits(want)) << isa.name << " col " << j << " K=" << K << " i=" << i;
            }
          }
        }
      }
}

TEST(Gemm, GemvMatchesGemm) {
  gemv_matches_gemm<BFloat16>();
  gemv_matches_gemm<Half>();
  gemv_matches_gemm<Float8_e5m2>();
}

// The float16 rows' 64 lanes on every table (bfloat16's: on every table without vdpbf16ps), at K
// around the lane and slice boundaries, with the vector strided and the rows padded, one to four
// vectors, on one thread and on two (300 outputs from K = 255: the product is split); and large,
// infinite and NaN terms.
template <class T>
void rows_sum_in_64_lanes() {
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  int compared = 0;
  for (int64_t K : {1, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1000, 4097})
    for (int special = 0; special < 2; ++special)
      for (int64_t R : {1, 2, 3, 4}) {
        const int64_t N = K >= 255 ? 300 : 70, ld = K + 5, xs = 3, xld = K * xs + 7;
        std::vector<T> x(R * xld), w(N * ld);
        for (auto& v : x) v = T(u(rng));
        for (auto& v : w) v = T(u(rng));
        if (special) {  // large terms of alternating sign (outputs past float16's range), an inf and a NaN
          for (int64_t k = 0; k < K; ++k) x[k * xs] = T(k % 2 ? -60000.0f : 60000.0f);
          w[3 * ld] = T(std::numeric_limits<float>::infinity());
          w[5 * ld + K - 1] = T(std::numeric_limits<float>::quiet_NaN());
        }
        for (const Isa& isa : isas()) {
          if (std::is_same_v<T, BFloat16> && isa.bf16_dot) continue;  // (vdpbf16ps pairs; AMX too)
          for (int threads : {1, 2}) {
            Threads t(threads);
            std::vector<T> y(R * N, T(7.0f));
            cpu::GemmArgs g;  // (R x K) @ W^T
            g.M = R, g.N = N, g.K = K;
            g.a = x.data(), g.a_rs = xld, g.a_cs = xs;
            g.b = w.data(), g.b_rs = 1, g.b_cs = ld;
            g.c = y.data(), g.c_rs = N, g.c_cs = 1;
            isa.table.gemm_lowp[static_cast<int>(dtype_of<T>())](g);
            for (int64_t r = 0; r < R; ++r)
              for (int64_t j = 0; j < N; ++j, ++compared) {
                const T got = y[r * N + j], want(f16_row_dot(&x[r * xld], xs, &w[j * ld], 1, K));
                if (!(std::isnan(static_cast<float>(got)) && std::isnan(static_cast<float>(want))))
                  ASSERT_EQ(bits(got), bits(want)) << isa.name << " K=" << K << " special " << special << " R=" << R
                                                   << " threads " << threads << " r=" << r << " j=" << j;
              }
          }
        }
      }
  EXPECT_GT(compared, 10000);
}

TEST(Gemm, Float16RowsSumIn64Lanes) { rows_sum_in_64_lanes<Half>(); }
TEST(Gemm, BFloat16RowsSumIn64Lanes) { rows_sum_in_64_lanes<BFloat16>(); }

// Probes of the 64 lanes' order: x = 4096 everywhere and products of 2^24, 1 and -2^24 placed so that
// the right order gives one answer and the likely wrong ones (other pairings at each level of the
// tree, the lanes added one after another, the tail folded into a lane, lanes of 128) another: 2^24
// + 1 rounds back to 2^24 in float32.
TEST(Gemm, Float16LaneOrderProbes) {
  struct Probe {
    const char* what;
    int64_t K;
    std::vector<std::pair<int64_t, float>> terms;  // (k, product)
    float want;
  };
  const float big = 16777216.0f;  // 2^24
  const std::vector<Probe> probes = {
      {"(Z0 + Z1) + (Z2 + Z3), not (Z0 + Z2) + ...", 64, {{0, big}, {16, 1}, {32, -big}}, 0},
      {"(Z0 + Z1) + (Z2 + Z3), not in turn", 64, {{0, big}, {16, 1}, {32, 1}, {48, -big}}, 1},
      {"S[0, 8) + S[8, 16) first", 64, {{0, big}, {8, 1}, {4, -big}}, 0},
      {"then halves of 4", 64, {{0, big}, {4, 1}, {2, -big}}, 0},
      {"then halves of 2", 64, {{0, big}, {2, 1}, {1, -big}}, 0},
      {"the tail after the lanes", 65, {{0, big}, {64, 1}, {1, -big}}, 1},
      {"lanes of 64 (k and k + 64 share one)", 128, {{0, big}, {64, 1}, {1, -big}}, 0},
  };
  for (const Probe& p : probes) {
    std::vector<Half> x(4 * p.K, Half(4096.0f)), w(5 * p.K, Half(0.0f));  // 5 equal rows
    for (int64_t j = 0; j < 5; ++j)
      for (auto [k, prod] : p.terms) w[j * p.K + k] = Half(prod / 4096.0f);  // 4096, 2^-12, -4096: exact
    EXPECT_EQ(f16_row_dot(x.data(), 1, w.data(), 1, p.K), p.want) << "reference: " << p.what;
    for (const Isa& isa : isas())
      for (auto [M, N] : {std::pair<int64_t, int64_t>{1, 1}, {2, 5}, {3, 5}, {4, 5}}) {  // 1 to 4 vectors
        std::vector<Half> y(M * N, Half(7.0f));
        cpu::GemmArgs g;
        g.M = M, g.N = N, g.K = p.K;
        g.a = x.data(), g.a_rs = p.K, g.a_cs = 1;
        g.b = w.data(), g.b_rs = 1, g.b_cs = p.K;
        g.c = y.data(), g.c_rs = N, g.c_cs = 1;
        isa.table.gemm_lowp[static_cast<int>(kFloat16)](g);
        for (int64_t i = 0; i < M * N; ++i)
          EXPECT_EQ(static_cast<float>(y[i]), p.want) << isa.name << ", " << M << " x " << N << ": " << p.what;
      }
  }
}

// With vdpbf16ps the sums are the float32 kernel's, k in order (a pair's even k sits in the high
// half, which the instruction adds first): the avx2 table's bits exactly, for every path (packed,
// GEMV, tiny), layout, K parity and slice count, subnormals aside (none in these inputs); except
// the avx2 table's matrix-vector shapes from K = 64, which sum in 64 lanes (decision 70).
TEST(Gemm, Bf16DotMatchesFloat32Kernel) {
  const Isa* dot = nullptr;
  const Isa* ref = nullptr;
  for (const Isa& i : isas()) {
    if (i.bf16_dot && !i.amx) dot = &i;
    if (i.name == "avx2") ref = &i;
  }
  if (!dot || !ref) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  std::mt19937 rng(31);
  const Layout ls[] = {Layout::RowMajor, Layout::ColMajor, Layout::PaddedRow, Layout::PaddedCol};
  int case_no = 0, compared = 0;
  for (int64_t K : {1, 2, 3, 31, 32, 33, 64, 255, 256, 257, 600})
    for (int64_t M : {1, 5, 14, 15, 33, 130})
      for (int64_t N : {1, 3, 16, 17, 32, 70}) {
        Layout l_a = ls[case_no % 4], l_b = ls[(case_no / 4 + case_no) % 4];
        ++case_no;
        Operand<BFloat16> a(1, M, K, l_a, rng), b(1, K, N, l_b, rng);
        if (K >= 64 && (M <= 4 || N <= 4)) continue;  // (avx2: lanes where the matrix has k contiguous)
        std::vector<BFloat16> c = run(dot->table, a, b), want = run(ref->table, a, b);
        for (size_t e = 0; e < c.size(); ++e, ++compared)
          ASSERT_EQ(c[e].x, want[e].x) << "M=" << M << " N=" << N << " K=" << K << " layouts " << int(l_a) << "/"
                                       << int(l_b) << " at " << e;
      }
  EXPECT_GT(compared, 100000);
}

// The float8 x float8 -> float32 entries (_scaled_mm's product): every pairing of the two formats,
// every path (packed, GEMV, tiny), against the float64 sum; and the same bits from every table.
TEST(Gemm, Float8PairsToFloat32) {
  std::mt19937 rng(41);
  const Layout ls[] = {Layout::RowMajor, Layout::ColMajor, Layout::PaddedRow, Layout::PaddedCol};
  int case_no = 0;
  for (int64_t M : {1, 3, 17, 70})
    for (int64_t N : {1, 5, 33})
      for (int64_t K : {1, 2, 31, 64, 300, 777}) {  // (777: three K slices, a middle one)
        Layout l_a = ls[case_no % 4], l_b = ls[(case_no / 4 + case_no) % 4];
        ++case_no;
        Operand<Float8_e4m3fn> a4(1, M, K, l_a, rng), b4(1, K, N, l_b, rng);
        Operand<Float8_e5m2> a5(1, M, K, l_a, rng), b5(1, K, N, l_b, rng);
        auto check = [&](const auto& a, const auto& b, int ia, int ib) {
          std::vector<std::vector<float>> results;
          for (const Isa& isa : isas()) {
            std::vector<float> c(static_cast<size_t>(M * N), 123.0f);
            ASSERT_NE(isa.table.gemm_f8[ia][ib], nullptr) << isa.name;
            isa.table.gemm_f8[ia][ib](args_of(a, b, c.data()));
            for (int64_t i = 0; i < M; ++i)
              for (int64_t j = 0; j < N; ++j) {
                auto [ref, mag] = ref_and_mag(a, b, i, j);
                ASSERT_LE(std::fabs(c[i * N + j] - ref), K * 0x1p-24 * mag + 1e-30)
                    << isa.name << " pair " << ia << ib << " M=" << M << " N=" << N << " K=" << K;
              }
            // (AMX: its own bits in the packed path, checked above against the sum; the matrix-vector
            // shapes sum a k-contiguous matrix's rows in 64 lanes on every table: decisions 77, 80)
            if (!isa.amx) results.push_back(c);
          }
          for (size_t r = 1; r < results.size(); ++r)
            ASSERT_EQ(std::memcmp(results[0].data(), results[r].data(), results[0].size() * 4), 0)
                << isas()[r].name << " vs base, pair " << ia << ib << " M=" << M << " N=" << N << " K=" << K;
        };
        check(a4, b4, 0, 0);
        check(a4, b5, 0, 1);
        check(a5, b4, 1, 0);
        check(a5, b5, 1, 1);
      }
}

// float8 rows with k contiguous sum in 64 lanes on every table (decisions 77 and 80; the
// float32 result of _scaled_mm's product, so no rounding hides the order): every pairing of the
// formats, random codes over their whole range (subnormals included), K around the lane and slice
// boundaries, one to four vectors as A's rows or as B's columns, one and two threads; rows with a
// NaN (either format) or an inf (e5m2), first and last in the lane-group kernel's groups and sets;
// vectors with an inf or a NaN; and with DAZ set on the calling thread, rows of subnormal codes
// among the others (the AVX2 kernels read float8 subnormals as float32 subnormals, so DAZ must be
// cleared while they run, and restored).
template <class TX, class TW>
void float8_rows_sum_in_64_lanes(int ix, int iw) {
  std::mt19937 rng(31 + 2 * ix + iw);
  auto code = [&](auto tag) {  // a random finite code
    using T = decltype(tag);
    for (;;) {
      const uint8_t b = static_cast<uint8_t>(rng());
      const bool special = std::is_same_v<T, Float8_e4m3fn> ? (b & 0x7f) == 0x7f : (b & 0x7c) == 0x7c;
      if (!special) return T::from_bits(b);
    }
  };
  auto subnormal = [&](auto tag) {  // a random nonzero code with a zero exponent field
    using T = decltype(tag);
    const uint32_t r = static_cast<uint32_t>(rng());
    const uint8_t m = std::is_same_v<T, Float8_e4m3fn> ? 1 + r % 7 : 1 + r % 3;
    return T::from_bits(static_cast<uint8_t>(((r >> 8) & 1) << 7 | m));
  };
  int compared = 0;
  for (int64_t K : {1, 63, 64, 65, 128, 255, 257, 1000})
    for (int mode = 0; mode < 4; ++mode)  // 0: finite codes, 1: NaN / inf rows, 2: DAZ set, 3: NaN / inf in vectors
      for (int64_t R : {1, 2, 3, 4})  // (the one-row kernel; J = 4 rows to a set; J = 2)
        for (bool as_cols : {false, true}) {
          if (mode >= 2 && (K % 64 == 1 || R == 3)) continue;  // (fewer cases)
          const int64_t N = K >= 255 ? 300 : 70, ld = K + 5, xs = 3, xld = K * xs + 7;
          std::vector<TX> x(R * xld);
          std::vector<TW> w(N * ld);
          for (auto& v : x) v = code(TX{});
          for (auto& v : w) v = code(TW{});
          if (mode == 1) {  // (groups of 8 or 16 rows, sets of 1 to 4: rows 0, 6, 20, N - 1, N - 2)
            w[3 * ld + K / 2] = TW::from_bits(0x7f);  // NaN (both formats)
            w[6 * ld] = TW::from_bits(0xff);
            w[20 * ld + K - 1] = TW::from_bits(0x7f);
            w[(N - 1) * ld + K / 3] = TW::from_bits(0xff);
            if (std::is_same_v<TW, Float8_e5m2>) {
              w[5 * ld + K - 1] = TW::from_bits(0x7c);  // inf
              w[(N - 2) * ld] = TW::from_bits(0xfc);
            }
          }
          if (mode == 2)
            for (int64_t j = 0; j < N; j += 3)
              for (int64_t k = 0; k < K; ++k) w[j * ld + k] = subnormal(TW{});
          if (mode == 3) {  // vector 0: inf (e5m2) or NaN; the last: NaN
            x[(K / 3) * xs] = TX::from_bits(std::is_same_v<TX, Float8_e5m2> ? 0x7c : 0x7f);
            if (R > 1) x[(R - 1) * xld] = TX::from_bits(0xff);
          }
          const bool daz = mode == 2;
          std::vector<float> want(R * N);
          for (int64_t r = 0; r < R; ++r)
            for (int64_t j = 0; j < N; ++j) want[r * N + j] = f16_row_dot(&x[r * xld], xs, &w[j * ld], 1, K);
          for (const Isa& isa : isas()) {
            for (int threads : {1, 2}) {
              Threads t(threads);
              std::vector<float> y(R * N, 7.0f);
              cpu::GemmArgs g;
              if (!as_cols) {  // (R x K) @ W^T
                g.M = R, g.N = N, g.K = K;
                g.a = x.data(), g.a_rs = xld, g.a_cs = xs;
                g.b = w.data(), g.b_rs = 1, g.b_cs = ld;
                g.c = y.data(), g.c_rs = N, g.c_cs = 1;
              } else {  // W @ (K x R), C column-major
                g.M = N, g.N = R, g.K = K;
                g.a = w.data(), g.a_rs = ld, g.a_cs = 1;
                g.b = x.data(), g.b_rs = xs, g.b_cs = xld;
                g.c = y.data(), g.c_rs = 1, g.c_cs = N;
              }
#if defined(__x86_64__) || defined(__i386__)
              const unsigned csr = _mm_getcsr();
              if (daz) _mm_setcsr(csr | 0x40);
#endif
              if (!as_cols) isa.table.gemm_f8[ix][iw](g);
              else isa.table.gemm_f8[iw][ix](g);
#if defined(__x86_64__) || defined(__i386__)
              const unsigned after = _mm_getcsr();
              _mm_setcsr(csr);
              // (the control bits; the low six are the sticky exception flags)
              ASSERT_EQ(after & ~0x3fu, (daz ? (csr | 0x40) : csr) & ~0x3fu) << isa.name << " left MXCSR changed";
#endif
              for (int64_t r = 0; r < R; ++r)
                for (int64_t j = 0; j < N; ++j, ++compared) {
                  const float got = y[r * N + j], ref = want[r * N + j];
                  if (!(std::isnan(got) && std::isnan(ref)))
                    ASSERT_EQ(bits(got), bits(ref)) << isa.name << " pair " << ix << iw << " K=" << K << " mode " << mode
                                                     << " R=" << R << " cols " << as_cols << " threads " << threads
                                                     << " r=" << r << " j=" << j;
                }
            }
          }
        }
  EXPECT_GT(compared, 100000);
}

TEST(Gemm, Float8RowsSumIn64Lanes) {
  float8_rows_sum_in_64_lanes<Float8_e4m3fn, Float8_e4m3fn>(0, 0);
  float8_rows_sum_in_64_lanes<Float8_e4m3fn, Float8_e5m2>(0, 1);
  float8_rows_sum_in_64_lanes<Float8_e5m2, Float8_e4m3fn>(1, 0);
  float8_rows_sum_in_64_lanes<Float8_e5m2, Float8_e5m2>(1, 1);
}

// Every float8 code through the packed paths' conversions (row-major and column-major panels, A
// and B): C = A @ B where the codes' operand holds code c at one k of its row / column and zeros
// elsewhere and the other operand is all ones, so C's element is the code's value (inf and NaN
// included; -0 sums to +0).
template <class T>
void float8_codes_packed(int idx) {
  const int64_t n = 256, other = 48, K = 64;
  for (const Isa& isa : isas()) {
    if (!isa.table.gemm_f8[idx][idx]) continue;
    for (int side = 0; side < 2; ++side)
      for (bool col : {false, true}) {
        // codes operand: n x K (side 0: A, rows i) or K x n (side 1: B, columns j); element (i, k)
        std::vector<T> codes(static_cast<size_t>(n * K), T::from_bits(0)), ones(static_cast<size_t>(other * K), T(1.0f));
        auto at = [&](int64_t i, int64_t k) -> T& {  // code i's operand, k along K
          if (side == 0) return codes[col ? k * n + i : i * K + k];
          return codes[col ? i * K + k : k * n + i];
        };
        for (int64_t i = 0; i < n; ++i) at(i, (i * 7) % K) = T::from_bits(static_cast<uint8_t>(i));
        cpu::GemmArgs g;
        std::vector<float> c(static_cast<size_t>(n * other), 123.0f);
        if (side == 0) {
          g.M = n, g.N = other, g.K = K;
          g.a = codes.data(), g.a_rs = col ? 1 : K, g.a_cs = col ? n : 1;
          g.b = ones.data(), g.b_rs = other, g.b_cs = 1;
        } else {
          g.M = other, g.N = n, g.K = K;
          g.a = ones.data(), g.a_rs = K, g.a_cs = 1;
          g.b = codes.data(), g.b_rs = col ? 1 : n, g.b_cs = col ? K : 1;
        }
        g.c = c.data(), g.c_rs = g.N, g.c_cs = 1;
        isa.table.gemm_f8[idx][idx](g);
        int bad = 0;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t o = 0; o < other; ++o) {
            const float got = side == 0 ? c[i * other + o] : c[o * n + i];
            const float want = static_cast<float>(T::from_bits(static_cast<uint8_t>(i)));
            const bool ok = std::isnan(want) ? std::isnan(got)
                                             : std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want + 0.0f);
            if (!ok && bad++ < 5)
              ADD_FAILURE() << isa.name << " " << dtype_name(dtype_of<T>()) << " side " << side << " col " << col
                            << " code " << i << ": got " << got << ", want " << want;
          }
      }
  }
}

TEST(Gemm, Float8AllCodesPacked) {
  float8_codes_packed<Float8_e4m3fn>(0);
  float8_codes_packed<Float8_e5m2>(1);
}

// Large matrix-vector products, split between threads: against the reference, and 1 vs 2 threads.
// (float16 with k-contiguous rows: 64 lanes over 960 of the 1000, then a tail of 40.)
template <class T>
void gemv_large() {
  std::mt19937 rng(23);
  Operand<T> x(2, 1, 1000, Layout::RowMajor, rng), w(2, 1000, 777, Layout::ColMajor, rng);
  Operand<T> w2(2, 1000, 777, Layout::RowMajor, rng);
  for (const Isa& isa : isas()) {
    std::vector<T> c1, c2;
    for (auto* m : {&w, &w2}) {
      {
        Threads t(1);
        c1 = run(isa.table, x, *m);
      }
      {
        Threads t(2);
        c2 = run(isa.table, x, *m);
      }
      check_against_reference(x, *m, c2, isa.name + " gemv");
      ASSERT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * 2), 0) << isa.name;
    }
  }
}
TEST(Gemm, GemvLarge) {
  gemv_large<BFloat16>();
  gemv_large<Half>();
}

// float8 matmul goes through the same kernel (torch 2.13 computes it on CPU the same way: float32
// accumulation, one rounding): against the float64 product rounded once, within one rounding.
TEST(Gemm, MatmulFloat8) {
  for (Dtype d : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    Tensor a = to_dtype(randn({19, 40}), d), b = to_dtype(randn({40, 23}), d);
    Tensor got = to_dtype(matmul(a, t(t(b))), kFloat64);
    Tensor want = to_dtype(matmul(to_dtype(a, kFloat64), to_dtype(b, kFloat64)), kFloat64);
    Tensor diff = abs(sub(got, want));
    Tensor lim = add(mul(abs(want), Scalar(d == kFloat8_e4m3fn ? 0.0625 : 0.125)), Scalar(1e-2));
    EXPECT_TRUE(all(le(diff, lim)).item<bool>()) << dtype_name(d);
    EXPECT_EQ(matmul(a, b).dtype(), d);
  }
}

// The row- / column-major copies around LAPACK and the transposed copies' blocks (transpose_dense):
// every tile and edge shape, 2-, 4- and 8-byte elements, against the element-by-element transpose (bits kept: random bit patterns, NaNs
// among them).
TEST(Copy, TransposeDense) {
  std::mt19937_64 rng(5);
  int checked = 0, tables = 0;
  for (const Isa& isa : isas()) {
    if (isa.name != "avx2" && isa.name != "avx512") continue;
    ++tables;
    const cpu::KernelTable& t = isa.table;
    ASSERT_NE(t.transpose_dense, nullptr) << isa.name;
    for (int64_t esize : {2, 4, 8})
      for (int64_t R : {1, 3, 4, 5, 7, 8, 9, 16, 17, 33, 64})
        for (int64_t C : {1, 2, 4, 6, 8, 11, 16, 24, 31, 64}) {
          std::vector<uint64_t> src(static_cast<size_t>(R * C)), dst(src.size(), 0);
          for (auto& x : src) x = rng();
          if (esize == 2) {
            std::vector<uint16_t> s2(src.size()), d2(src.size(), 0);
            for (size_t i = 0; i < src.size(); ++i) s2[i] = static_cast<uint16_t>(src[i]);
            t.transpose_dense(s2.data(), R, C, C, d2.data(), R, 2);
            for (int64_t i = 0; i < R; ++i)
              for (int64_t j = 0; j < C; ++j) ASSERT_EQ(d2[j * R + i], s2[i * C + j]) << isa.name << " 2 " << R << "x" << C;
          } else if (esize == 4) {
            std::vector<uint32_t> s4(src.size()), d4(src.size(), 0);
            for (size_t i = 0; i < src.size(); ++i) s4[i] = static_cast<uint32_t>(src[i]);
            t.transpose_dense(s4.data(), R, C, C, d4.data(), R, 4);
            for (int64_t i = 0; i < R; ++i)
              for (int64_t j = 0; j < C; ++j) ASSERT_EQ(d4[j * R + i], s4[i * C + j]) << isa.name << " 4 " << R << "x" << C;
          } else {
            t.transpose_dense(src.data(), R, C, C, dst.data(), R, 8);
            for (int64_t i = 0; i < R; ++i)
              for (int64_t j = 0; j < C; ++j) ASSERT_EQ(dst[j * R + i], src[i * C + j]) << isa.name << " 8 " << R << "x" << C;
          }
          ++checked;
        }
  }
  EXPECT_EQ(checked, tables * 3 * 11 * 10);
  // leading dimensions past the row lengths (a block of rows split off for a thread): the padding
  // is not written
  for (const Isa& isa : isas()) {
    if (isa.name != "avx2" && isa.name != "avx512") continue;
    for (int64_t R : {5, 8, 13})
      for (int64_t C : {4, 9, 16}) {
        const int64_t lds = C + 3, ldd = R + 5;
        std::vector<uint64_t> src(static_cast<size_t>(R * lds)), dst(static_cast<size_t>(C * ldd), 7);
        for (auto& x : src) x = rng();
        isa.table.transpose_dense(src.data(), R, C, lds, dst.data(), ldd, 8);
        for (int64_t j = 0; j < C; ++j)
          for (int64_t i = 0; i < ldd; ++i)
            ASSERT_EQ(dst[j * ldd + i], i < R ? src[i * lds + j] : 7u) << isa.name << " " << R << "x" << C;
      }
  }
}
