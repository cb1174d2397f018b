// CPU kernel tables. Each family's inner loops are compiled once per ISA (base, AVX2, AVX-512)
// from the same source; cpu_kernels() returns the table for the best ISA this machine runs.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <vector>

#include "kiln/core/generator.h"
#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/loop.h"
#include "kiln/backend/cpu/rnn_step.h"
#include "kiln/core/dtype.h"
#include "kiln/ops/reduce_detail.h"
#include "kiln/ops/unary_list.h"
#include "kiln/optim/detail/update.h"

namespace kiln::cpu {

using kiln::BinaryOp;  // ops/unary_list.h: the ops' codes, which the op table carries
using kiln::UnaryOp;

using kiln::ReduceOp;  // ops/reduce_detail.h

// Scalar parameters of an op (alpha, slopes, bounds), in the compute type's precision.
struct KParams {
  double d[4] = {0, 0, 0, 0};
  int64_t i[4] = {0, 0, 0, 0};
  double c_im[4] = {0, 0, 0, 0};  // imaginary parts, for complex alpha
};

// Inner loops: data[0] = output, data[1..] = inputs (all already of the loop's dtypes).
// Unary and binary tables are indexed by the compute dtype of the inputs.
// Reduce: contiguous rows. reduce_inner: out[o] = reduce(in[o*R .. o*R+R)) for o in [0, M).
// reduce_outer: out[o, j] = reduce_r in[o, r, j], inner extent J contiguous.
using ReduceInnerFn = void (*)(char* out, const char* in, int64_t M, int64_t R);
using ReduceOuterFn = void (*)(char* out, const char* in, int64_t O, int64_t R, int64_t Jc, int64_t J);
using CastFn = void (*)(char* out, const char* in, int64_t n, int64_t os, int64_t is);

// One GEMM per batch: C[b] = A[b] @ B[b] for b in [0, batch), A (M, K), B (K, N), C (M, N), all of
// the table's dtype. Strides are in elements and may be anything (transposed views, leading dims,
// 0 for broadcast batches); C must not overlap A or B. Float32 accumulation, one rounding per
// result; parallel over batches / output tiles (never over K), so the result does not depend on
// the thread count. K == 0 writes zeros.
struct GemmArgs {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  const void* a = nullptr;
  int64_t a_bs = 0, a_rs = 0, a_cs = 0;
  const void* b = nullptr;
  int64_t b_bs = 0, b_rs = 0, b_cs = 0;
  void* c = nullptr;
  int64_t c_bs = 0, c_rs = 0, c_cs = 0;
  // Optional, batch 1 only: called with disjoint row ranges [i0, i1) covering C's rows once each is
  // final, from whichever thread finished it (the float8 product's scales, bias and rounding;
  // _fused_baddbmm's beta * c + alpha * acc and rounding). Where the product splits C by rows (B
  // shared between the threads, or row parts) that is inside its own region, right after the rows'
  // last column block; otherwise in a pass over the rows after it.
  void (*row_epilogue)(void* ctx, int64_t i0, int64_t i1) = nullptr;
  void* epilogue_ctx = nullptr;
  // Sets row_epilogue to call f(i0, i1); f must outlive the product.
  template <class F>
  void set_row_epilogue(F& f) {
    row_epilogue = [](void* ctx, int64_t i0, int64_t i1) { (*static_cast<F*>(ctx))(i0, i1); };
    epilogue_ctx = const_cast<void*>(static_cast<const void*>(&f));
  }
};
using LowpGemmFn = void (*)(const GemmArgs&);
// Several independent products (batch 1 each, any sizes, strides and K) in one parallel loop over
// (product, column block) work items: the grouped matmul of mixture-of-experts layers.
using GroupedGemmFn = void (*)(const GemmArgs* items, int64_t count);
// s (bq x bk, contiguous): scores before the (positive) scale, -inf where masked; mx, l: the rows'
// running max (scaled) and sum. Updates them, writes alpha[i] = exp(old max - new max) and the
// probabilities exp(scale * s - max): into s, or (pb given, bq x bk) rounded to bfloat16 into pb (s is
// then scratch); returns whether any alpha != 1.
using AttnSoftmaxFn = bool (*)(float* s, int64_t bq, int64_t bk, float scale, float* mx, float* l, float* alpha,
                               BFloat16* pb);

// Random fills (kernels_random.cpp): writes elements [begin, end) of a fill of `out` (pointing at
// element 0, contiguous) with draws of one distribution; element i depends only on the generator
// key, the fill's first Philox counter and i (so not on threads or ISA beyond stated ulps).
using kiln::RandomDist;  // core/generator.h
struct RandomArgs {
  double p0 = 0, p1 = 0;  // the distribution's two parameters (from/to, mean/std, p, lambda, ...)
  uint64_t key = 0, first = 0;
  int64_t lo = 0, hi = 0;  // FromTo's integers [lo, hi] (exact where p0 / p1 would round)
};
using RandomFn = void (*)(void* out, int64_t begin, int64_t end, const RandomArgs& args);

// Layer norm over rows of N contiguous values (kernels_norm.cpp), float32 / float64. Forward: rows
// [r0, r1) give y, mean and rstd (w, b may be null). Backward: rows [r0, r1) give dx and add their
// dw, db into acc (2 * N values: dw then db); dxh is N values of scratch.
struct LayerNormArgs {
  const void *x = nullptr, *w = nullptr, *b = nullptr;
  void *y = nullptr, *mean = nullptr, *rstd = nullptr;
  int64_t N = 0;
  double eps = 0;
};
struct LayerNormBackwardArgs {
  const void *g = nullptr, *x = nullptr, *mean = nullptr, *rstd = nullptr, *w = nullptr;
  void* dx = nullptr;
  int64_t N = 0;
};
using LayerNormFn = void (*)(const LayerNormArgs&, int64_t r0, int64_t r1);
using LayerNormBackwardFn = void (*)(const LayerNormBackwardArgs&, int64_t r0, int64_t r1, void* acc, void* dxh);

// The fused optimiser update (kernels_optim.cpp) of elements [b, e) of one segment, for float32,
// float64 and (through float32 blocks) float16 / bfloat16.
using OptimUpdateFn = void (*)(optim::detail::Algo, const optim::detail::Hyper&, const optim::detail::Segment&,
                               int64_t b, int64_t e);

// Tiny matrices (n <= 8) across a batch (kernels_linalg.cpp): for `count` contiguous n x n matrices a,
// their LU with partial pivoting (LAPACK's factors and pivots, row-major, into lu / piv where not
// null) and getrf's info; the determinant into det, the inverse into inv and the solution of
// A X = B for the n x k blocks b into x, each where not null.
template <class T>
using TinyLinalgFn = void (*)(int64_t n, int64_t count, const T* a, T* lu, int32_t* piv, int32_t* info, T* det,
                              T* inv, const T* b, T* x, int64_t k);

// Thread t's share of a kernel that T threads run at once (cpu::run_spmd): sync() returns when all T
// have called it; flags: T ints the threads share (T > 1). T = 1: the kernel alone (sync() does
// nothing, flags may be null).
struct SpmdShare {
  int t = 0, T = 1;
  void (*barrier)(void* ctx) = nullptr;
  void* ctx = nullptr;
  int* flags = nullptr;
  void sync() const {
    if (T > 1) barrier(ctx);
  }
  // This thread's part [b, e) of [lo, hi).
  int64_t begin(int64_t lo, int64_t hi) const { return lo + (hi - lo) * t / T; }
  int64_t end(int64_t lo, int64_t hi) const { return lo + (hi - lo) * (t + 1) / T; }
};

struct KernelTable {
  const char* isa = "";
  InnerLoop unary[static_cast<int>(UnaryOp::Count)][kNumDtypes] = {};
  InnerLoop binary[static_cast<int>(BinaryOp::Count)][kNumDtypes] = {};
  ReduceInnerFn reduce_inner[static_cast<int>(ReduceOp::Count)][kNumDtypes] = {};
  ReduceOuterFn reduce_outer[static_cast<int>(ReduceOp::Count)][kNumDtypes] = {};
  CastFn cast[kNumDtypes][kNumDtypes] = {};  // [from][to]
  // Packed GEMM (kernels_gemm.cpp) for float16, bfloat16, float8_e4m3fn, float8_e5m2 (and float32,
  // which bmm sends to OpenBLAS instead); null for other dtypes.
  LowpGemmFn gemm_lowp[kNumDtypes] = {};
  // The same GEMM for float8 operands of either format ([A is e5m2][B is e5m2]) into a float32 C: the
  // scaled float8 products (_scaled_mm) apply their scales to it.
  LowpGemmFn gemm_f8[2][2] = {};
  // bfloat16 A and B into a float32 C (AMX tiles where the CPU has them): FlexAttention's bfloat16 tiles
  // and _fused_baddbmm; float16 A and B into a float32 C: _fused_baddbmm. Each gives the float32 sums
  // that gemm_lowp rounds for the same dtype.
  LowpGemmFn gemm_bf16_f32 = nullptr;
  LowpGemmFn gemm_f16_f32 = nullptr;
  // FlexAttention's online-softmax step of a float32 tile of unscaled scores (kernels_attention.cpp).
  AttnSoftmaxFn attn_softmax = nullptr;
  // FlexAttention's bfloat16 forward products on AMX (attention_amx.h; null without AMX): K^T and V
  // packed once per call, then s = Q K^T and acc += P V per tile. Every size a multiple of 32.
  void (*attn_pack_kt)(const BFloat16* k, int64_t S, int64_t E, uint32_t* dst) = nullptr;  // S*E/2 words
  void (*attn_pack_v)(const BFloat16* v, int64_t S, int64_t Ev, uint32_t* dst) = nullptr;  // S*Ev/2 words
  void (*attn_qk)(const BFloat16* q, int64_t bq, int64_t E, const uint32_t* kt, int64_t j0, int64_t bk,
                  float* s) = nullptr;
  void (*attn_pv)(const BFloat16* p, int64_t bq, int64_t bk, const uint32_t* vp, int64_t j0, int64_t Ev,
                  float* acc) = nullptr;
  // ... and its float32 tile products with AVX-512 or AVX2 (kernels_attention.cpp; null on the base
  // table): K^T (or V^T) packed in 32-key panels ([S/32][E][32]) and s = Q K^T from it (bq a multiple
  // of 8, bk, j0 and S of 32);
  // C (m x n) += alpha * op(A) B with B row-major, read in place, op(A) = A (m x k) or, when ta, A^T for
  // an A of k x m; m a multiple of 8, n of 32.
  void (*attn_pack_kt_f32)(const float* k, int64_t S, int64_t E, float* dst) = nullptr;
  void (*attn_qk_f32)(const float* q, int64_t bq, int64_t E, const float* kt, int64_t j0, int64_t bk,
                      float* s) = nullptr;
  void (*attn_mm_f32)(bool ta, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                      const float* b, int64_t ldb, float* c, int64_t ldc) = nullptr;
  // ... its backward's row steps: p (bq x bk) := exp(p * scale - lse[row]) (rows of lse -inf: 0), and
  // ds := p * (ds - d[row]); and s (rows ld apart) := -inf where the mask bytes m (rows ldm apart) are 0.
  void (*attn_bwd_p)(float* p, int64_t bq, int64_t bk, float scale, const float* lse) = nullptr;
  void (*attn_bwd_ds)(const float* p, float* ds, int64_t bq, int64_t bk, const float* d) = nullptr;
  void (*attn_mask)(float* s, int64_t ld, const uint8_t* m, int64_t ldm, int64_t bq, int64_t bk) = nullptr;
  GroupedGemmFn gemm_grouped[kNumDtypes] = {};  // float32, float16, bfloat16
  // The same for float16 / bfloat16 items into float32 C (grouped_mm's bias, added before rounding).
  GroupedGemmFn gemm_grouped_f32[kNumDtypes] = {};
  // float32 products from a B packed once (blas.h's kiln_sgemm_prepacked): the words a K x N B takes,
  // its packing (element (k, n) at b[k * b_rs + n * b_cs]), and C = A @ B from it (GemmArgs's A and C;
  // b unused) with gemm_lowp[kFloat32]'s bits.
  int64_t (*sgemm_packed_b_words)(int64_t K, int64_t N) = nullptr;
  void (*sgemm_pack_b)(int64_t K, int64_t N, const float* b, int64_t b_rs, int64_t b_cs, float* dst) = nullptr;
  void (*sgemm_prepacked)(const GemmArgs& g, const float* bp) = nullptr;
  RandomFn random[static_cast<int>(RandomDist::Count)][kNumDtypes] = {};
  LayerNormFn layer_norm[kNumDtypes] = {};  // float32, float64
  LayerNormBackwardFn layer_norm_backward[kNumDtypes] = {};
  OptimUpdateFn optim_update[kNumDtypes] = {};
  // dst (C x R, leading dimension ldd) := src (R x C, leading dimension lds)^T for elements of esize 2,
  // 4 or 8 bytes, bits kept (AVX2 and AVX-512 tables: tiles transposed in registers; null on base). The
  // row- / column-major copies around LAPACK (linalg_util.h).
  void (*transpose_dense)(const void* src, int64_t R, int64_t C, int64_t lds, void* dst, int64_t ldd,
                          int64_t esize) = nullptr;
  TinyLinalgFn<float> tiny_linalg_f32 = nullptr;
  TinyLinalgFn<double> tiny_linalg_f64 = nullptr;
  // Householder QR of small matrices, column-major (kernels_householder.cpp; null on base): LAPACK's
  // xgeqr2 (a := R and the reflectors, tau: min(m, n)), xorg2r / xung2r (a := Q's first n columns
  // from k reflectors) and xorm2r / xunm2r (C (m x nc) := Q^T C or Q^H C (orm2r_t), Q C (orm2r_n) for
  // Q from k reflectors; a restored).
  template <class T>
  struct Householder {
    void (*geqr2)(int64_t m, int64_t n, T* a, int64_t lda, T* tau) = nullptr;
    void (*org2r)(int64_t m, int64_t n, int64_t k, T* a, int64_t lda, const T* tau) = nullptr;
    void (*orm2r_t)(int64_t m, int64_t nc, int64_t k, T* a, int64_t lda, const T* tau, T* c, int64_t ldc) = nullptr;
    void (*orm2r_n)(int64_t m, int64_t nc, int64_t k, T* a, int64_t lda, const T* tau, T* c, int64_t ldc) = nullptr;
    // xsytd2 / xhetd2 ('L') for eigh, on a full Hermitian a (both triangles read): d, e (n - 1), tau (n - 1).
    using Real = decltype(std::abs(T{}));
    void (*sytd2)(int64_t n, T* a, int64_t lda, Real* d, Real* e, T* tau) = nullptr;
    // QR with column pivoting for lstsq's gelsy (xgeqp3 is the caller's loop): xlaqp2 (qp2) and xlaqps
    // (qps: up to nb steps, the trailing update A -= V F^H left to the caller, a partial norm to
    // recompute flagged by vn2 = -1; returns the steps; work: nb + nb n elements) on columns 0 .. n-1
    // of a, all m rows, the reflectors from row offset; jpvt, vn1, vn2 swapped along with the columns.
    // Run by sh.T threads at once (all with the same arguments), each step's work on the trailing
    // columns is split between them by columns; the results do not depend on the thread count.
    void (*qp2)(int64_t m, int64_t n, int64_t offset, T* a, int64_t lda, int64_t* jpvt, T* tau, Real* vn1,
                Real* vn2, const SpmdShare& sh) = nullptr;
    int64_t (*qps)(int64_t m, int64_t n, int64_t offset, int64_t nb, T* a, int64_t lda, int64_t* jpvt, T* tau,
                   Real* vn1, Real* vn2, T* f, int64_t ldf, T* work, const SpmdShare& sh) = nullptr;
  };
  Householder<float> householder_f32;
  Householder<double> householder_f64;
  Householder<complex64> householder_c64;
  Householder<complex128> householder_c128;
  // The recurrent steps (kernels_rnn.cpp, rnn_step.h); the fused LSTM steps are null on base.
  rnn::RnnStepFns<float> rnn_f32;
  rnn::RnnStepFns<double> rnn_f64;
  rnn::LstmFusedFwdFn lstm_fused_fwd = nullptr;
  int64_t lstm_fused_units = 8;  // units per block of lstm_fused_fwd's panels (rnn.cpp's lstm_pack_fwd)
  rnn::LstmFusedBwdFn lstm_fused_bwd = nullptr;
  // A real transform of even length 2M as a complex one of length M (fft.cpp, kernels_fft.cpp): the
  // spectrum X[0, M] (os complex elements apart) from Z = z[0, M), the transform of the row read as
  // complex (contiguous); and z (contiguous) from X (is apart) for the inverse. w: w^k = exp(-pi i
  // k / M), k in [0, M).
  template <class R>
  struct FftHalf {
    void (*r2c_post)(const R* z, const R* w, int64_t M, R* X, int64_t os) = nullptr;
    void (*c2r_pre)(const R* X, int64_t is, const R* w, int64_t M, R* z) = nullptr;
  };
  FftHalf<float> fft_half_f32;
  FftHalf<double> fft_half_f64;
};

const KernelTable& cpu_kernels();  // the table of selected_isa() (isa.h)
// For kernels that need a conversion or a copy of their own without calling an op
// (backend/cpu/creation.cpp): dst := src, broadcast, any two dtypes (the cast loop copy_ runs); a
// contiguous copy of x in dtype d (a scratch buffer); x itself when contiguous, else such a copy;
// every element of t := v.
void cast_copy(const Tensor& dst, const Tensor& src);
Tensor converted(const Tensor& x, Dtype d);
Tensor contiguous_of(const Tensor& x);
void fill(const Tensor& t, const Scalar& v);
// y := the reduction r of x over the dims where m is true (y: the kept dims, contiguous, of the
// reduction's output dtype); the kernel of sum, amax, ... (reduce.cpp), for kernels that need one.
void reduce_into(ReduceOp r, const Tensor& y, const Tensor& x, const std::vector<bool>& m, const char* op);
// The selected table's exp, row max and row sum for T (float / double), for kernels that run them on
// blocks of their own (attention's score tiles, cross entropy's rows).
template <class T>
struct RowFns {
  InnerLoop exp = cpu_kernels().unary[static_cast<int>(UnaryOp::Exp)][static_cast<int>(dtype_of<T>())];
  ReduceInnerFn max = cpu_kernels().reduce_inner[static_cast<int>(ReduceOp::Max)][static_cast<int>(dtype_of<T>())];
  ReduceInnerFn sum = cpu_kernels().reduce_inner[static_cast<int>(ReduceOp::Sum)][static_cast<int>(dtype_of<T>())];
  void exp_inplace(T* x, int64_t n) const {  // x[0, n) := exp(x)
    char* data[2] = {reinterpret_cast<char*>(x), reinterpret_cast<char*>(x)};
    int64_t st[2] = {sizeof(T), sizeof(T)};
    KParams p;
    exp(data, st, n, &p);
  }
  // out[r] = max / sum of row r of the (rows, cols) block x
  void row_max(T* out, const T* x, int64_t rows, int64_t cols) const {
    max(reinterpret_cast<char*>(out), reinterpret_cast<const char*>(x), rows, cols);
  }
  void row_sum(T* out, const T* x, int64_t rows, int64_t cols) const {
    sum(reinterpret_cast<char*>(out), reinterpret_cast<const char*>(x), rows, cols);
  }
};

// The table of another ISA the CPU runs (isa_supported), for tests that compare tables.
const KernelTable& kernel_table_for(Isa isa);

}  // namespace kiln::cpu
