// CPU kernel of bmm, the table op behind the whole matmul family (its entry, schema, meta, derivative
// and the composites are in kiln/ops/matmul.cpp), registered by op name: float32, float64 and complex
// through OpenBLAS (float32 through kiln's packed GEMM in the runtime: parallel.h's KilnSgemmScope,
// for small products: kiln_sgemm_small, and through its GEMV for 2-4 rows),
// float16 / bfloat16 / float8 through kiln's packed GEMM (kernels_gemm.cpp),
// integers by a plain triple loop. It calls no op (contiguous copies are the cast loop).
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <vector>

#include "kiln/backend/cpu/blas.h"
#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/core/deterministic.h"
#include "kiln/core/visit.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

using cpu::contiguous_of;

// A matrix operand for BLAS: row-major with leading dim, or transposed.
struct Mat {
  Tensor t;
  bool trans = false;
  int64_t ld = 0;
};
Mat blas_operand(const Tensor& x) {  // x: (B, R, C)
  int64_t R = x.sizes()[1], C = x.sizes()[2];
  int64_t sr = x.strides()[1], sc = x.strides()[2];
  if ((sc == 1 || C == 1) && sr >= std::max<int64_t>(C, 1)) return {x, false, sr};
  if ((sr == 1 || R == 1) && sc >= std::max<int64_t>(R, 1)) return {x, true, sc};
  Tensor c = contiguous_of(x);
  return {c, false, std::max<int64_t>(C, 1)};
}

template <class T>
void gemm_blas(const Mat& A, const Mat& B, Tensor& C, int64_t Bn, int64_t M, int64_t N, int64_t K) {
  const T* ap = static_cast<const T*>(A.t.data_ptr());
  const T* bp = static_cast<const T*>(B.t.data_ptr());
  T* cp = static_cast<T*>(C.data_ptr());
  int64_t sa = A.t.strides()[0], sb = B.t.strides()[0];
  auto ta = A.trans ? CblasTrans : CblasNoTrans, tb = B.trans ? CblasTrans : CblasNoTrans;
  if (M * N * K >= 65536) cpu::count_blas_call(std::is_same_v<T, float> && M > 1 && N > 1);
  for (int64_t i = 0; i < Bn; ++i) {
    const T* a = ap + i * sa;
    const T* b = bp + i * sb;
    T* c = cp + i * M * N;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      // matrix-vector shapes go to GEMV: GEMM kernels waste most of their work on a 1-wide panel
      auto gemv = [](CBLAS_TRANSPOSE t, int64_t rows, int64_t cols, const T* m, int64_t ld, const T* x,
                     int64_t incx, T* y) {
        if constexpr (std::is_same_v<T, float>) cblas_sgemv(CblasRowMajor, t, rows, cols, 1.0f, m, ld, x, incx, 0.0f, y, 1);
        else cblas_dgemv(CblasRowMajor, t, rows, cols, 1.0, m, ld, x, incx, 0.0, y, 1);
      };
      if (M == 1) {  // y(N) = B^T a: B is (K, N), row-major unless transposed
        int64_t inca = A.trans ? A.ld : 1;
        if (!B.trans) gemv(CblasTrans, K, N, b, B.ld, a, inca, c);
        else gemv(CblasNoTrans, N, K, b, B.ld, a, inca, c);
        continue;
      }
      if (N == 1) {  // y(M) = A b
        int64_t incb = B.trans ? 1 : B.ld;
        if (!A.trans) gemv(CblasNoTrans, M, K, a, A.ld, b, incb, c);
        else gemv(CblasTrans, K, M, a, A.ld, b, incb, c);
        continue;
      }
    }
    if constexpr (std::is_same_v<T, float>) {
      cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, a, A.ld, b, B.ld, 0.0f, c, N);
    } else if constexpr (std::is_same_v<T, double>) {
      cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, a, A.ld, b, B.ld, 0.0, c, N);
    } else if constexpr (std::is_same_v<T, complex64>) {
      complex64 one(1), zero(0);
      cblas_cgemm(CblasRowMajor, ta, tb, M, N, K, &one, a, A.ld, b, B.ld, &zero, c, N);
    } else {
      complex128 one(1), zero(0);
      cblas_zgemm(CblasRowMajor, ta, tb, M, N, K, &one, a, A.ld, b, B.ld, &zero, c, N);
    }
  }
}

// BLAS takes 32-bit sizes and strides. A product with a size or a stride beyond that (a dot of two
// expanded vectors of 2^31 elements) is computed here instead, reading every operand in place (a
// stride of 0 is a broadcast, never materialised) and adding in k order in T, as one BLAS dot would.
constexpr int64_t kBlasMax = INT32_MAX;
bool beyond_blas(const Tensor& a, const Tensor& b, int64_t M, int64_t N, int64_t K) {
  if (M > kBlasMax || N > kBlasMax || K > kBlasMax) return true;
  for (const Tensor* t : {&a, &b})
    for (int64_t d = 1; d < 3; ++d)
      if (std::abs(t->strides()[d]) > kBlasMax) return true;
  return false;
}

template <class T>
void strided_products(const Tensor& a, const Tensor& b, Tensor& c, int64_t Bn, int64_t M, int64_t N, int64_t K) {
  const T* ap = static_cast<const T*>(a.data_ptr());
  const T* bp = static_cast<const T*>(b.data_ptr());
  T* cp = static_cast<T*>(c.data_ptr());
  const int64_t as0 = a.strides()[0], as1 = a.strides()[1], as2 = a.strides()[2];
  const int64_t bs0 = b.strides()[0], bs1 = b.strides()[1], bs2 = b.strides()[2];
  cpu::parallel_for(Bn * M * N, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t i = r / (M * N), m = (r / N) % M, n = r % N;
      const T* x = ap + i * as0 + m * as1;
      const T* y = bp + i * bs0 + n * bs2;
      T acc(0);
      for (int64_t k = 0; k < K; ++k) acc += x[k * as2] * y[k * bs1];
      cp[r] = acc;
    }
  });
}

}  // namespace

namespace cpu {
void count_blas_call(bool reroutable) {
  if (get_num_threads() <= 1 || in_parallel_region() || are_deterministic_algorithms_enabled()) return;
  if (reroutable) count_region();
  else count_blas_serialised();
}
bool kiln_sgemm_small(int64_t M, int64_t N, int64_t K) {
  if (M <= 1 || N <= 1 || !kiln_sgemm_usable()) return false;
  return double(M) * double(N) * double(K) <= double(int64_t(1) << 24) && K <= 4 * std::min(M, N);
}
bool team_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                int64_t ldb, float* C, int64_t ldc) {
  if (!kiln_sgemm_preferred() && !kiln_sgemm_small(M, N, K)) return false;
  kiln_sgemm(ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
  return true;
}

void kiln_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                int64_t ldb, float* C, int64_t ldc) {
  GemmArgs g;
  g.M = M, g.N = N, g.K = K;
  g.a = A, g.a_rs = ta ? 1 : lda, g.a_cs = ta ? lda : 1;
  g.b = B, g.b_rs = tb ? 1 : ldb, g.b_cs = tb ? ldb : 1;
  g.c = C, g.c_rs = ldc, g.c_cs = 1;
  cpu_kernels().gemm_lowp[static_cast<int>(kFloat32)](g);
}

int64_t kiln_sgemm_packed_words(int64_t K, int64_t N) {
  const auto f = cpu_kernels().sgemm_packed_b_words;
  return f ? f(K, N) : 0;
}
void kiln_sgemm_pack_b(int64_t K, int64_t N, const float* b, int64_t rs, int64_t cs, float* dst) {
  cpu_kernels().sgemm_pack_b(K, N, b, rs, cs, dst);
}
void kiln_sgemm_prepacked(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* bp, float* C,
                          int64_t ldc) {
  GemmArgs g;
  g.M = M, g.N = N, g.K = K;
  g.a = A, g.a_rs = lda, g.a_cs = 1;
  g.c = C, g.c_rs = ldc, g.c_cs = 1;
  cpu_kernels().sgemm_prepacked(g, bp);
}
}  // namespace cpu

namespace {

void bmm_kernel(const OpDef& op, const TensorList& in, const Attrs& attrs, TensorList& out) {
  Tensor a = in[0], b = in[1];
  Tensor& c = out[0];
  int64_t Bn = a.sizes()[0], M = a.sizes()[1], K = a.sizes()[2], N = b.sizes()[2];
  if (c.numel() == 0) return;
  if (K == 0) {
    cpu::fill(c, Scalar(0));
    return;
  }
  Dtype d = a.dtype();
  // in the runtime (parallel.h's KilnSgemmScope), kiln's GEMM, which a team can use, and for a small
  // product everywhere (decision 75; matrix-vector shapes stay with OpenBLAS's GEMV)
  const bool team_f32 =
      d == kFloat32 && M > 1 && N > 1 && (cpu::kiln_sgemm_preferred() || cpu::kiln_sgemm_small(M, N, K));
  // 2 to 4 rows (or columns) against a matrix with k contiguous (a few decode steps through
  // F.linear): kiln's GEMV reads the matrix once for all of them (OpenBLAS's SGEMM: 4-5 GB/s on
  // 14336 x 4096, kiln 16-19, Zen 4 one thread); vector shapes stay with OpenBLAS's SGEMV (level)
  const bool rows_f32 = d == kFloat32 && M > 1 && N > 1 &&
                        ((M <= 4 && b.strides()[1] == 1) || (N <= 4 && a.strides()[2] == 1));
  if (d == kFloat16 || d == kBFloat16 || is_float8(d) || team_f32 || rows_f32) {
    // kiln's packed GEMM reads any strides; float8 matches torch's CPU matmul (float32 accumulation)
    if (c.storage() == a.storage() || c.storage() == b.storage()) {  // out= aliasing an input
      Tensor tmp = make_tensor(c.sizes(), d);
      TensorList o{tmp};
      bmm_kernel(op, in, attrs, o);
      cpu::cast_copy(c, tmp);
      return;
    }
    cpu::GemmArgs g;
    g.batch = Bn, g.M = M, g.N = N, g.K = K;
    g.a = a.data_ptr(), g.a_bs = a.strides()[0], g.a_rs = a.strides()[1], g.a_cs = a.strides()[2];
    g.b = b.data_ptr(), g.b_bs = b.strides()[0], g.b_rs = b.strides()[1], g.b_cs = b.strides()[2];
    g.c = c.data_ptr(), g.c_bs = c.strides()[0], g.c_rs = c.strides()[1], g.c_cs = c.strides()[2];
    cpu::cpu_kernels().gemm_lowp[static_cast<int>(d)](g);
    return;
  }
  if (d == kFloat32 || d == kFloat64 || d == kComplex64 || d == kComplex128) {
    if (beyond_blas(a, b, M, N, K)) [[unlikely]] {
      visit_floating_complex(d, "bmm", [&]<class T>() {
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || is_complex_v<T>)
          strided_products<T>(a, b, c, Bn, M, N, K);
      });
      return;
    }
    Mat A = blas_operand(a), B = blas_operand(b);
    visit_floating_complex(d, "bmm", [&]<class T>() {
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || is_complex_v<T>)
        gemm_blas<T>(A, B, c, Bn, M, N, K);
    });
    return;
  }
  visit_integral(d, "bmm", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      raise_dtype_unsupported("bmm", kBool);
    } else {
      Tensor ac = contiguous_of(a), bc = contiguous_of(b);
      const T* ap = static_cast<const T*>(ac.data_ptr());
      const T* bp = static_cast<const T*>(bc.data_ptr());
      T* cp = static_cast<T*>(c.data_ptr());
      cpu::parallel_for(Bn * M, std::max<int64_t>(1, cpu::kGrainSize / std::max<int64_t>(N * K, 1)), [&](int64_t s, int64_t e) {
        for (int64_t bm = s; bm < e; ++bm) {
          int64_t bi = bm / M, m = bm % M;
          T* crow = cp + bm * N;
          for (int64_t n = 0; n < N; ++n) crow[n] = 0;
          for (int64_t k = 0; k < K; ++k) {
            T av = ap[bi * M * K + m * K + k];
            const T* brow = bp + bi * K * N + k * N;
            for (int64_t n = 0; n < N; ++n) crow[n] = static_cast<T>(crow[n] + av * brow[n]);
          }
        }
      });
    }
  });
}
KernelRegistrar k_bmm{"bmm", DeviceType::CPU, bmm_kernel};

// _fused_baddbmm (bfloat16 / float16; kiln/ops/matmul.cpp): the product's float32 sums, then per row
// (beta * c) + (alpha * acc) in float32 (beta 0: alpha * acc, c not read; a factor of 1 skipped) and
// one rounding, the arithmetic of torch's CPU gemm for these dtypes. A batch of one runs the rows'
// epilogue inside the product (GemmArgs::row_epilogue) while they are in cache.
void fused_baddbmm_kernel(const OpDef&, const TensorList& in, const Attrs& attrs, TensorList& out) {
  const Tensor &c = in[0], &a = in[1], &b = in[2];
  Tensor& o = out[0];
  const int64_t Bn = a.sizes()[0], M = a.sizes()[1], K = a.sizes()[2], N = b.sizes()[2];
  if (o.numel() == 0) return;
  const float beta = static_cast<float>(attr<Scalar>(attrs, 0).to_double());
  const float alpha = static_cast<float>(attr<Scalar>(attrs, 1).to_double());
  Tensor acc = make_tensor({Bn, M, N}, kFloat32);
  float* p = static_cast<float*>(acc.data_ptr());
  const auto& kt = cpu::cpu_kernels();
  const int d = static_cast<int>(o.dtype());
  const cpu::CastFn to_f32 = kt.cast[d][static_cast<int>(kFloat32)], from_f32 = kt.cast[static_cast<int>(kFloat32)][d];
  const int64_t sz = static_cast<int64_t>(itemsize(o.dtype()));
  const char* cp = static_cast<const char*>(c.data_ptr());
  char* op = static_cast<char*>(o.data_ptr());
  // beta * c's row in float32; converted once per batch where c's rows repeat (a bias)
  auto c_row = [&](int64_t bi, int64_t i, float* dst) {
    to_f32(reinterpret_cast<char*>(dst), cp + (bi * c.strides()[0] + i * c.strides()[1]) * sz, N, sizeof(float),
           c.strides()[2] * sz);
    if (beta != 1.0f)
      for (int64_t j = 0; j < N; ++j) dst[j] = beta * dst[j];
  };
  const bool rows_repeat = beta != 0.0f && c.strides()[1] == 0;
  const int64_t cached = rows_repeat ? (c.strides()[0] == 0 ? 1 : Bn) : 0;
  std::vector<float> cache(static_cast<size_t>(cached * N));
  for (int64_t bi = 0; bi < cached; ++bi) c_row(bi, 0, cache.data() + bi * N);
  const auto epilogue = [&](int64_t r0, int64_t r1) {  // rows r0.. of all Bn * M
    std::vector<float> own(beta != 0.0f && !rows_repeat ? static_cast<size_t>(N) : 0);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t bi = r / M, i = r % M;
      float* row = p + r * N;
      if (alpha != 1.0f)
        for (int64_t j = 0; j < N; ++j) row[j] = alpha * row[j];
      if (beta != 0.0f) {
        const float* cr = rows_repeat ? cache.data() + (cached > 1 ? bi : 0) * N : own.data();
        if (!rows_repeat) c_row(bi, i, own.data());
        for (int64_t j = 0; j < N; ++j) row[j] = cr[j] + row[j];
      }
      from_f32(op + (bi * o.strides()[0] + i * o.strides()[1]) * sz, reinterpret_cast<const char*>(row), N,
               o.strides()[2] * sz, sizeof(float));
    }
  };
  cpu::GemmArgs g;
  g.batch = Bn, g.M = M, g.N = N, g.K = K;
  g.a = a.data_ptr(), g.a_bs = a.strides()[0], g.a_rs = a.strides()[1], g.a_cs = a.strides()[2];
  g.b = b.data_ptr(), g.b_bs = b.strides()[0], g.b_rs = b.strides()[1], g.b_cs = b.strides()[2];
  g.c = p, g.c_bs = M * N, g.c_rs = N, g.c_cs = 1;
  if (Bn == 1) {
    g.set_row_epilogue(epilogue);
  }
  (o.dtype() == kBFloat16 ? kt.gemm_bf16_f32 : kt.gemm_f16_f32)(g);
  if (Bn > 1)
    cpu::parallel_for(Bn * M, std::max<int64_t>(1, cpu::kGrainSize / N), epilogue);
}
KernelRegistrar k_fused_baddbmm{"_fused_baddbmm", DeviceType::CPU, fused_baddbmm_kernel};

}  // namespace
}  // namespace kiln
