// The FFT kernels (torch's _fft_c2c, _fft_r2c, _fft_c2r; the ops and the public functions are in
// kiln/ops/fft.cpp) on FFTW 3. In general one guru plan per call over the transformed dims, every
// other dim a batch ("howmany") dim, both with the tensors' own strides, so strided inputs need no
// copy (c2r, which FFTW lets overwrite its input, works on a contiguous scratch copy); the common
// layouts go row by row and column block by column block through kept plans instead (below). Plans
// are made with FFTW_ESTIMATE (no timing runs, the same plan every time, so results do not vary
// between runs) under one lock: FFTW's planner is not thread-safe, its execution is. Batches of more
// than one transform run in parallel slices, one plan per slice. Real transforms of even length along the last
// transformed dim run as complex ones of half the length (half_r2c, half_c2r): FFTW's own r2c and
// c2r took 2.5x the time of that complex transform. The other dims of n-dim transforms, and one-dim
// complex ones along a strided dim, run column block by column block (column_blocks).
#include <fftw3.h>

#include <cmath>
#include <complex>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/dispatch/op.h"

namespace kiln::cpu {
namespace {

std::mutex g_planner;

// FFTW's double and single precision APIs behind one name
template <class R>
struct Fftw;
template <>
struct Fftw<double> {
  using Plan = fftw_plan;
  using Complex = fftw_complex;
  static Plan c2c(int r, const fftw_iodim64* d, int hr, const fftw_iodim64* hd, void* in, void* out, int sign) {
    return fftw_plan_guru64_dft(r, d, hr, hd, static_cast<Complex*>(in), static_cast<Complex*>(out), sign,
                                FFTW_ESTIMATE);
  }
  static Plan r2c(int r, const fftw_iodim64* d, int hr, const fftw_iodim64* hd, void* in, void* out) {
    return fftw_plan_guru64_dft_r2c(r, d, hr, hd, static_cast<double*>(in), static_cast<Complex*>(out),
                                    FFTW_ESTIMATE);
  }
  static Plan c2r(int r, const fftw_iodim64* d, int hr, const fftw_iodim64* hd, void* in, void* out) {
    return fftw_plan_guru64_dft_c2r(r, d, hr, hd, static_cast<Complex*>(in), static_cast<double*>(out),
                                    FFTW_ESTIMATE | FFTW_DESTROY_INPUT);
  }
  static void execute(Plan p) { fftw_execute(p); }
  static void execute_dft(Plan p, double* in, double* out) {
    fftw_execute_dft(p, reinterpret_cast<Complex*>(in), reinterpret_cast<Complex*>(out));
  }
  static int alignment_of(double* p) { return fftw_alignment_of(p); }
  static void destroy(Plan p) { fftw_destroy_plan(p); }
};
template <>
struct Fftw<float> {
  using Plan = fftwf_plan;
  using Complex = fftwf_complex;
  static Plan c2c(int r, const fftw_iodim64* d, int hr, const fftw_iodim64* hd, void* in, void* out, int sign) {
    return fftwf_plan_guru64_dft(r, d, hr, hd, static_cast<Complex*>(in), static_cast<Complex*>(out), sign,
                                 FFTW_ESTIMATE);
  }
  static Plan r2c(int r, const fftw_iodim64* d, int hr, const fftw_iodim64* hd, void* in, void* out) {
    return fftwf_plan_guru64_dft_r2c(r, d, hr, hd, static_cast<float*>(in), static_cast<Complex*>(out),
                                     FFTW_ESTIMATE);
  }
  static Plan c2r(int r, const fftw_iodim64* d, int hr, const fftw_iodim64* hd, void* in, void* out) {
    return fftwf_plan_guru64_dft_c2r(r, d, hr, hd, static_cast<Complex*>(in), static_cast<float*>(out),
                                     FFTW_ESTIMATE | FFTW_DESTROY_INPUT);
  }
  static void execute(Plan p) { fftwf_execute(p); }
  static void execute_dft(Plan p, float* in, float* out) {
    fftwf_execute_dft(p, reinterpret_cast<Complex*>(in), reinterpret_cast<Complex*>(out));
  }
  static int alignment_of(float* p) { return fftwf_alignment_of(p); }
  static void destroy(Plan p) { fftwf_destroy_plan(p); }
};

enum class Kind { C2C, R2C, C2R };

// The geometry of one call: the transformed dims (logical sizes: the real side's for r2c / c2r) and
// the batch dims, with input and output strides in elements of each side's type.
struct Geometry {
  std::vector<fftw_iodim64> dims, batch;
  int64_t signal = 1;  // product of the transformed logical sizes (the normalisation's n)
};

Geometry geometry(const Tensor& in, const Tensor& out, const Shape& tdims, Kind kind) {
  Geometry g;
  std::vector<bool> transformed(static_cast<size_t>(in.dim()), false);
  for (size_t i = 0; i < tdims.size(); ++i) {
    const int64_t d = tdims[i];
    transformed[d] = true;
    // the real side's size: r2c's input, c2r's output; c2c either
    const int64_t n = kind == Kind::C2R ? out.size(d) : in.size(d);
    g.dims.push_back({n, in.stride(d), out.stride(d)});
    g.signal *= n;
  }
  for (int64_t d = 0; d < in.dim(); ++d)
    if (!transformed[d] && out.size(d) != 1) g.batch.push_back({out.size(d), in.stride(d), out.stride(d)});
  return g;
}

// One plan per parallel slice of the outermost batch dim (each slice its own pointers), executed and
// destroyed; plans are made and destroyed under the planner lock.
template <class R>
void run(Kind kind, Geometry g, char* in, char* out, int64_t in_item, int64_t out_item, int sign) {
  using F = Fftw<R>;
  auto plan_and_run = [&](const std::vector<fftw_iodim64>& batch, char* i, char* o) {
    typename F::Plan p;
    {
      std::lock_guard<std::mutex> lock(g_planner);
      const int r = static_cast<int>(g.dims.size()), hr = static_cast<int>(batch.size());
      p = kind == Kind::C2C   ? F::c2c(r, g.dims.data(), hr, batch.data(), i, o, sign)
          : kind == Kind::R2C ? F::r2c(r, g.dims.data(), hr, batch.data(), i, o)
                              : F::c2r(r, g.dims.data(), hr, batch.data(), i, o);
    }
    KILN_CHECK(p != nullptr, Runtime, "fft", "FFTW could not plan the transform");
    F::execute(p);
    std::lock_guard<std::mutex> lock(g_planner);
    F::destroy(p);
  };
  if (g.batch.empty() || g.batch[0].n < 2 || g.signal * g.batch[0].n < 32768) {
    plan_and_run(g.batch, in, out);
    return;
  }
  // the largest batch dim is split across the threads
  size_t big = 0;
  for (size_t i = 1; i < g.batch.size(); ++i)
    if (g.batch[i].n > g.batch[big].n) big = i;
  const fftw_iodim64 split = g.batch[big];
  parallel_for(split.n, 1, [&](int64_t s, int64_t e) {
    std::vector<fftw_iodim64> batch = g.batch;
    batch[big].n = e - s;
    plan_and_run(batch, in + s * split.is * in_item, out + s * split.os * out_item);
  });
}

// ---- real transforms of even length N as complex ones of length M = N / 2 --------------------
// Forward: z[n] = x[2n] + i x[2n+1] (the real array read as complex), Z = DFT_M(z); then, with
// Z[M] = Z[0] and w = exp(-2 pi i / N), Ze = (Z[k] + conj(Z[M-k])) / 2, Zo = -i (Z[k] -
// conj(Z[M-k])) / 2: X[k] = Ze + w^k Zo for k in [1, M), X[0] = Re Z[0] + Im Z[0], X[M] = Re Z[0] -
// Im Z[0]. Backward (FFTW's unnormalised c2r: N x[n] = sum over the Hermitian spectrum): with the
// imaginary parts of X[0] and X[M] dropped (as FFTW and torch do), E = X[k] + conj(X[M-k]),
// O = (X[k] - conj(X[M-k])) conj(w^k), Z[k] = E + i O; the unnormalised inverse DFT_M of Z gives
// N (x[2n] + i x[2n+1]). Row by row: Z passes through a one-row scratch that stays in L1 (a whole
// batch's Z went out to L3 and back), and the steps around the complex transform are the kernel
// table's (kernels_fft.cpp: vectorised per ISA; on SSE2 they took longer than the transform).

// w^k for k in [0, N/2) (interleaved re, im), computed in long double and rounded once; one table
// per N, kept.
template <class R>
const R* twiddles(int64_t N) {
  static std::mutex mu;
  static std::map<int64_t, std::unique_ptr<std::vector<R>>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& t = cache[N];
  if (!t) {
    t = std::make_unique<std::vector<R>>(static_cast<size_t>(N));
    const long double step = -2.0L * 3.14159265358979323846264338327950288L / static_cast<long double>(N);
    for (int64_t k = 0; k < N / 2; ++k) {
      (*t)[2 * k] = static_cast<R>(std::cos(step * k));
      (*t)[2 * k + 1] = static_cast<R>(std::sin(step * k));
    }
  }
  return t->data();
}

// The offsets (in elements of the input or the output side) of every row: each combination of
// the dims' indices.
std::vector<int64_t> row_offsets(const std::vector<fftw_iodim64>& dims, bool out_side) {
  std::vector<int64_t> offs{0};
  for (const fftw_iodim64& d : dims) {
    std::vector<int64_t> next;
    next.reserve(offs.size() * static_cast<size_t>(d.n));
    for (int64_t o : offs)
      for (int64_t i = 0; i < d.n; ++i) next.push_back(o + i * (out_side ? d.os : d.is));
    offs.swap(next);
  }
  return offs;
}

// Whether the real side (r2c's input, c2r's output) can be read as complex: the halved dim of even
// length N >= 8 and stride 1, every other stride even.
bool halvable(const Geometry& g, bool input_side) {
  const fftw_iodim64& last = g.dims.back();
  if (last.n % 2 != 0 || last.n < 8 || (input_side ? last.is : last.os) != 1) return false;
  for (size_t i = 0; i < g.batch.size() + g.dims.size() - 1; ++i) {
    const fftw_iodim64& d = i < g.batch.size() ? g.batch[i] : g.dims[i - g.batch.size()];
    if ((input_side ? d.is : d.os) % 2 != 0) return false;
  }
  return true;
}

// The rows of the halved dim: the batch dims and the other transformed dims.
std::vector<fftw_iodim64> rows_of(const Geometry& g) {
  std::vector<fftw_iodim64> rows = g.batch;
  rows.insert(rows.end(), g.dims.begin(), g.dims.end() - 1);
  return rows;
}

// DFT_M of one contiguous row, from in to out (R pairs), through FFTW's new-array execute, which
// may run one plan on many threads at once. The plans (one per length, direction and alignment pair
// of the arrays: FFTW's condition for reusing a plan) are made once and kept for the process, so a
// call plans nothing after the first of its kind (planning, even from FFTW's wisdom, took about as
// long as a 4096-point transform).
template <class R>
class RowDft {
 public:
  RowDft(int64_t M, int sign) : M_(M), sign_(sign) {}
  void operator()(R* in, R* out) {
    KILN_CHECK(in != out, Runtime, "fft", "internal: a row transform in place");  // (the plans are out of place)
    const int ai = Fftw<R>::alignment_of(in), ao = Fftw<R>::alignment_of(out);
    if (!last_ || last_ai_ != ai || last_ao_ != ao) last_ = plan(ai, ao, in, out), last_ai_ = ai, last_ao_ = ao;
    Fftw<R>::execute_dft(last_, in, out);
  }

 private:
  typename Fftw<R>::Plan plan(int ai, int ao, R* in, R* out) {
    // under g_planner; never destroyed (a static map would be, at exit, and leave the plans unreachable)
    static auto* cache = new std::map<std::tuple<int64_t, int, int, int>, typename Fftw<R>::Plan>();
    std::lock_guard<std::mutex> lock(g_planner);
    auto& p = (*cache)[{M_, sign_, ai, ao}];
    if (!p) {
      const fftw_iodim64 d{M_, 1, 1};
      p = Fftw<R>::c2c(1, &d, 0, nullptr, in, out, sign_);  // (FFTW_ESTIMATE leaves the arrays alone)
      KILN_CHECK(p != nullptr, Runtime, "fft", "FFTW could not plan the transform");
    }
    return p;
  }
  int64_t M_;
  int sign_;
  typename Fftw<R>::Plan last_ = nullptr;
  int last_ai_ = 0, last_ao_ = 0;
};

// Rows per thread: at least this many complex elements (64 rows of 512 ran slower on two threads
// than on one: the second thread's wake-up; run's batch split uses the same bound).
constexpr int64_t kRowsGrain = 32768;

// body(dft, z, in_offset, out_offset) for every row of the last transformed dim (offsets in each
// side's elements), in parallel: dft runs DFT_M (sign) through kept plans, z is a scratch row of M
// complex.
template <class R, class F>
void each_row(const Geometry& g, int64_t M, int sign, F&& body) {
  const std::vector<fftw_iodim64> rows = rows_of(g);
  const std::vector<int64_t> in_offs = row_offsets(rows, false), out_offs = row_offsets(rows, true);
  parallel_for(static_cast<int64_t>(in_offs.size()), std::max<int64_t>(1, kRowsGrain / M), [&](int64_t s, int64_t e) {
    RowDft<R> dft(M, sign);
    const Tensor scratch = make_tensor({2 * M}, sizeof(R) == 4 ? kFloat32 : kFloat64);  // (64-byte aligned)
    R* z = static_cast<R*>(scratch.data_ptr());
    for (int64_t r = s; r < e; ++r) body(dft, z, in_offs[r], out_offs[r]);
  });
}

// A c2c whose last transformed dim is contiguous on both sides (n >= 16): that dim row by row
// through RowDft's kept plans (instead of a batch plan per call and thread: made under the planner's
// lock, those held two threads to the speed of one at 64 x 1024), for every combination of the batch
// dims and the other transformed dims; then the other dims column block by column block
// (other_dims_c2c, below).
// Shorter rows stay with FFTW's plans, where a call per row would cost more than the row's
// transform; so does an output on the input (the kept plans are out of place).
bool rows_c2c_ok(const Geometry& g, const char* in, const char* out) {
  return g.dims.back().is == 1 && g.dims.back().os == 1 && g.dims.back().n >= 16 && in != out;
}
template <class R>
void rows_c2c(const Geometry& g, R* in, R* out, int sign) {
  each_row<R>(g, g.dims.back().n, sign,
              [&](RowDft<R>& dft, R*, int64_t io, int64_t oo) { dft(in + 2 * io, out + 2 * oo); });
}

template <class R>
const KernelTable::FftHalf<R>& half_fns() {
  if constexpr (sizeof(R) == 4) return cpu_kernels().fft_half_f32;
  else return cpu_kernels().fft_half_f64;
}

// r2c: x real (halvable on its input side), X complex; both in R units.
template <class R>
void half_r2c(const Geometry& g, R* x, R* X) {
  const int64_t M = g.dims.back().n / 2, os = g.dims.back().os;
  const R* w = twiddles<R>(2 * M);
  const auto& half = half_fns<R>();
  each_row<R>(g, M, FFTW_FORWARD, [&](RowDft<R>& dft, R* z, int64_t io, int64_t oo) {
    dft(x + io, z);
    half.r2c_post(z, w, M, X + 2 * oo, os);
  });
}

// c2r: X complex, x real (halvable on its output side); both in R units.
template <class R>
void half_c2r(const Geometry& g, const R* X, R* x) {
  const int64_t M = g.dims.back().n / 2, is = g.dims.back().is;
  const R* w = twiddles<R>(2 * M);
  const auto& half = half_fns<R>();
  each_row<R>(g, M, FFTW_BACKWARD, [&](RowDft<R>& dft, R* z, int64_t io, int64_t oo) {
    half.c2r_pre(X + 2 * io, is, w, M, z);
    dft(z, x + oo);
  });
}

// ---- the other dims of an n-dim transform, column block by column block ------------------------
// Besides the last (the halved one of a real transform), each transformed dim of an n-dim c2c or r2c
// (after the last) or c2r (before it) is a c2c in place on the complex array, along its columns: n
// points `st` complex apart, for every row offset (the other dims' combinations) and each of `cols`
// columns (the last dim's elements or bins, `cst` apart). kColBlock columns at a time are copied
// into contiguous rows of a scratch block, run through RowDft's kept plans, and copied back. (One
// FFTW plan for all the columns, in place, went through the array a column at a time, out of cache:
// 16 x 512 x 512 r2c took 16.8 ms against FFTW's own n-dim r2c's 12.5; plans over blocks of 16
// columns in place were no faster.) Columns of 2 to 15 points keep FFTW's plans, as short rows do
// (rows_c2c_ok), and so do columns longer than kColMaxN: their block is out of cache anyway, and the
// scratch would grow with them.
constexpr int64_t kColBlock = 16, kColMaxN = 1 << 14;

// Whether the transformed dims but the last may run in column blocks.
bool columns_ok(const Geometry& g) {
  for (size_t k = 0; k + 1 < g.dims.size(); ++k)
    if (g.dims[k].n > kColMaxN || (g.dims[k].n > 1 && g.dims[k].n < 16)) return false;
  return true;
}

// One column transform per column: n points, `sti` complex apart in `in` and `sto` in `out` (in
// place when they are the same array with the same strides and offsets), at row offsets ioffs[r] /
// ooffs[r] and `cols` columns csi / cso apart.
template <class R>
void column_blocks(const std::complex<R>* in, int64_t sti, int64_t csi, const std::vector<int64_t>& ioffs,
                   std::complex<R>* out, int64_t sto, int64_t cso, const std::vector<int64_t>& ooffs, int64_t n,
                   int64_t cols, int sign) {
  using C = std::complex<R>;
  const int64_t blocks = (cols + kColBlock - 1) / kColBlock;
  // the copies as the table's transposes in registers (complex64, adjacent columns)
  const auto tile = sizeof(C) == 8 ? cpu_kernels().transpose_dense : nullptr;
  const auto gather = csi == 1 ? tile : nullptr, scatter = cso == 1 ? tile : nullptr;
  parallel_for(static_cast<int64_t>(ioffs.size()) * blocks, std::max<int64_t>(1, kRowsGrain / (n * kColBlock)),
               [&](int64_t s, int64_t e) {
                 RowDft<R> dft(n, sign);
                 // up to kColBlock rows of n, ld apart (n rounded up to 64 bytes, plus 64: rows a
                 // multiple of 4 KiB apart would share L1's sets, and the copies touch all of them at
                 // once; an even ld keeps every row's alignment, so RowDft keeps its plan), then their
                 // transforms
                 const int64_t per_line = 64 / static_cast<int64_t>(sizeof(C)), wmax = std::min(kColBlock, cols);
                 const int64_t ld = (n + per_line - 1) / per_line * per_line + per_line;
                 const Tensor scratch = make_tensor({4 * wmax * ld}, sizeof(R) == 4 ? kFloat32 : kFloat64);
                 C* z = static_cast<C*>(scratch.data_ptr());
                 C* y = z + wmax * ld;
                 for (int64_t t = s; t < e; ++t) {
                   const int64_t c0 = t % blocks * kColBlock, w = std::min(kColBlock, cols - c0);
                   const C* src = in + ioffs[t / blocks] + c0 * csi;
                   C* dst = out + ooffs[t / blocks] + c0 * cso;
                   if (gather) gather(src, n, w, sti, z, ld, sizeof(C));
                   else
                     for (int64_t r = 0; r < n; ++r)
                       for (int64_t c = 0; c < w; ++c) z[c * ld + r] = src[r * sti + c * csi];
                   for (int64_t c = 0; c < w; ++c)
                     dft(reinterpret_cast<R*>(z + c * ld), reinterpret_cast<R*>(y + c * ld));
                   if (scatter) scatter(y, w, n, ld, dst, sto, sizeof(C));
                   else
                     for (int64_t r = 0; r < n; ++r)
                       for (int64_t c = 0; c < w; ++c) dst[r * sto + c * cso] = y[c * ld + r];
                 }
               });
}

// The transformed dims but the last, as c2c in place on `a` (complex, R pairs): out_side picks the
// strides (the output's for c2c and r2c, the input's for c2r), `cols` the last dim's size.
template <class R>
void other_dims_c2c(const Geometry& g, bool out_side, R* a, int64_t cols, int sign) {
  auto* ac = reinterpret_cast<std::complex<R>*>(a);
  const int64_t cst = out_side ? g.dims.back().os : g.dims.back().is;
  for (size_t k = 0; k + 1 < g.dims.size(); ++k) {
    const fftw_iodim64& d = g.dims[k];
    if (d.n < 2) continue;
    std::vector<fftw_iodim64> rows = g.batch;
    for (size_t j = 0; j + 1 < g.dims.size(); ++j)
      if (j != k) rows.push_back(g.dims[j]);
    const std::vector<int64_t> offs = row_offsets(rows, out_side);
    const int64_t st = out_side ? d.os : d.is;
    column_blocks<R>(ac, st, cst, offs, ac, st, cst, offs, d.n, cols, sign);
  }
}

// f(h, in, out) over the batch: once for the whole of g when it has no batch dims, or when one
// batch entry's transform is larger than kSliceBytes; otherwise once per batch entry, in parallel,
// h without batch dims, so that the entry's passes (rows, then columns) find it in L2. ie / oe: R
// per element on each side (2 complex, 1 real). (fft2 c64 16 x 256 x 256 on two threads: 3.3 ->
// 1.8 ms.)
constexpr int64_t kSliceBytes = 512 << 10;
template <class R, class F>
void by_slices(const Geometry& g, R* in, int64_t ie, R* out, int64_t oe, F&& f) {
  if (g.dims.size() < 2 || g.batch.empty() || g.signal * 2 * static_cast<int64_t>(sizeof(R)) > kSliceBytes) {
    f(g, in, out);
    return;
  }
  Geometry h = g;
  h.batch.clear();
  const std::vector<int64_t> io = row_offsets(g.batch, false), oo = row_offsets(g.batch, true);
  parallel_for(static_cast<int64_t>(io.size()), std::max<int64_t>(1, kRowsGrain / g.signal), [&](int64_t s, int64_t e) {
    for (int64_t b = s; b < e; ++b) f(h, in + ie * io[b], out + oe * oo[b]);
  });
}

// A one-dim c2c along a strided dim (16 to kColMaxN points) with a batch dim contiguous on both
// sides: that batch dim's elements are the columns (FFTW's plan for it went through the array a
// column at a time).
int columns_c2c_at(const Geometry& g, const char* in, const char* out) {
  if (g.dims.size() != 1 || g.dims[0].n < 16 || g.dims[0].n > kColMaxN || in == out) return -1;
  for (size_t b = 0; b < g.batch.size(); ++b)
    if (g.batch[b].is == 1 && g.batch[b].os == 1) return static_cast<int>(b);
  return -1;
}
template <class R>
void columns_c2c(const Geometry& g, int cb, R* in, R* out, int sign) {
  std::vector<fftw_iodim64> rows = g.batch;
  rows.erase(rows.begin() + cb);
  const fftw_iodim64 &d = g.dims[0], &c = g.batch[static_cast<size_t>(cb)];
  column_blocks<R>(reinterpret_cast<std::complex<R>*>(in), d.is, 1, row_offsets(rows, false),
                   reinterpret_cast<std::complex<R>*>(out), d.os, 1, row_offsets(rows, true), d.n, c.n, sign);
}

template <class R>
void scale(Tensor& out, int normalization, int64_t n) {
  if (normalization == 0 || n == 0) return;
  const R f = normalization == 1 ? static_cast<R>(1.0 / std::sqrt(static_cast<double>(n)))
                                 : static_cast<R>(1.0 / static_cast<double>(n));
  R* p = static_cast<R*>(out.data_ptr());
  const int64_t m = out.numel() * (is_complex(out.dtype()) ? 2 : 1);
  parallel_for(m, 1 << 15, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) p[i] *= f;
  });
}

// Strides FFTW can read directly: positive (a broadcast or negative stride is copied first).
Tensor readable(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) <= 0 && t.size(d) > 1) return contiguous_of(t);
  return t;
}

// A c2c in R precision, normalised.
template <class R>
void c2c(const Geometry& g, char* i, char* o, int sign, Tensor& out, int norm) {
  if (rows_c2c_ok(g, i, o) && columns_ok(g)) {
    by_slices<R>(g, reinterpret_cast<R*>(i), 2, reinterpret_cast<R*>(o), 2, [&](const Geometry& h, R* si, R* so) {
      rows_c2c(h, si, so, sign);
      other_dims_c2c(h, true, so, h.dims.back().n, sign);
    });
  } else if (const int cb = columns_c2c_at(g, i, o); cb >= 0) {
    columns_c2c(g, cb, reinterpret_cast<R*>(i), reinterpret_cast<R*>(o), sign);
  } else {
    run<R>(Kind::C2C, g, i, o, 2 * sizeof(R), 2 * sizeof(R), sign);
  }
  scale<R>(out, norm, g.signal);
}

// attrs: {dim, normalization, forward}
void c2c_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  if (out[0].numel() == 0) return;
  Tensor x = readable(in[0]);
  const Shape& dims = attr<Shape>(a, 0);
  const int norm = static_cast<int>(attr<int64_t>(a, 1));
  const int sign = attr<bool>(a, 2) ? FFTW_FORWARD : FFTW_BACKWARD;
  Geometry g = geometry(x, out[0], dims, Kind::C2C);
  char* i = static_cast<char*>(x.data_ptr());
  char* o = static_cast<char*>(out[0].data_ptr());
  if (x.dtype() == kComplex64) c2c<float>(g, i, o, sign, out[0], norm);
  else c2c<double>(g, i, o, sign, out[0], norm);
}

// A one-sided r2c, in R precision (x readable).
template <class R>
void r2c_onesided(const Tensor& x, Tensor& out, const Shape& dims, int norm) {
  const Geometry g = geometry(x, out, dims, Kind::R2C);
  R* i = static_cast<R*>(x.data_ptr());
  R* o = static_cast<R*>(out.data_ptr());
  // the halved dim as a complex transform of half its length, then any other dims column block by
  // column block on the output
  if (halvable(g, true) && columns_ok(g)) {
    by_slices<R>(g, i, 1, o, 2, [&](const Geometry& h, R* si, R* so) {
      half_r2c(h, si, so);
      other_dims_c2c(h, true, so, h.dims.back().n / 2 + 1, FFTW_FORWARD);
    });
  } else {
    run<R>(Kind::R2C, g, reinterpret_cast<char*>(i), reinterpret_cast<char*>(o), sizeof(R), 2 * sizeof(R), 0);
  }
  scale<R>(out, norm, g.signal);
}

// c2r in R precision. FFTW overwrites a c2r input, so it reads a copy; so does the half-length path
// with more than one dim (the other dims run first, in place on the copy, column block by column
// block); with one it reads the input as it is.
template <class R>
void c2r(const Tensor& in, Tensor& out, const Shape& dims, int norm) {
  R* o = static_cast<R*>(out.data_ptr());
  if (dims.size() == 1) {
    const Tensor x = readable(in);
    const Geometry g = geometry(x, out, dims, Kind::C2R);
    if (halvable(g, false)) {
      half_c2r(g, static_cast<const R*>(x.data_ptr()), o);
      scale<R>(out, norm, g.signal);
      return;
    }
  }
  Tensor x = make_tensor(in.sizes(), in.dtype());
  cast_copy(x, in);
  const Geometry g = geometry(x, out, dims, Kind::C2R);
  char* i = static_cast<char*>(x.data_ptr());
  if (halvable(g, false) && columns_ok(g)) {
    by_slices<R>(g, reinterpret_cast<R*>(i), 2, o, 1, [&](const Geometry& h, R* si, R* so) {
      other_dims_c2c(h, false, si, x.size(dims.back()), FFTW_BACKWARD);
      half_c2r(h, si, so);
    });
  } else {
    run<R>(Kind::C2R, g, i, reinterpret_cast<char*>(o), 2 * sizeof(R), sizeof(R), 0);
  }
  scale<R>(out, norm, g.signal);
}

// attrs: {dim, normalization, onesided}; a two-sided transform of real input runs as c2c of its
// complex copy
void r2c_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  if (out[0].numel() == 0) return;
  const Shape& dims = attr<Shape>(a, 0);
  const int norm = static_cast<int>(attr<int64_t>(a, 1));
  const bool onesided = attr<bool>(a, 2);
  const bool single = in[0].dtype() == kFloat32;
  if (!onesided) {
    Tensor xc = make_tensor(in[0].sizes(), single ? kComplex64 : kComplex128);
    cast_copy(xc, in[0]);
    Geometry g = geometry(xc, out[0], dims, Kind::C2C);
    char *i = static_cast<char*>(xc.data_ptr()), *o = static_cast<char*>(out[0].data_ptr());
    if (single) run<float>(Kind::C2C, g, i, o, 8, 8, FFTW_FORWARD), scale<float>(out[0], norm, g.signal);
    else run<double>(Kind::C2C, g, i, o, 16, 16, FFTW_FORWARD), scale<double>(out[0], norm, g.signal);
    return;
  }
  if (single) r2c_onesided<float>(readable(in[0]), out[0], dims, norm);
  else r2c_onesided<double>(readable(in[0]), out[0], dims, norm);
}

// attrs: {dim, normalization, last_dim_size}
void c2r_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  if (out[0].numel() == 0) return;
  const Shape& dims = attr<Shape>(a, 0);
  const int norm = static_cast<int>(attr<int64_t>(a, 1));
  if (in[0].dtype() == kComplex64) c2r<float>(in[0], out[0], dims, norm);
  else c2r<double>(in[0], out[0], dims, norm);
}

KernelRegistrar k_fft_c2c{"_fft_c2c", DeviceType::CPU, c2c_kernel};
KernelRegistrar k_fft_r2c{"_fft_r2c", DeviceType::CPU, r2c_kernel};
KernelRegistrar k_fft_c2r{"_fft_c2r", DeviceType::CPU, c2r_kernel};

}  // namespace
}  // namespace kiln::cpu
