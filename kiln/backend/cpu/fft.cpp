// The FFT kernels (torch's _fft_c2c, _fft_r2c, _fft_c2r; the ops and the public functions are in
// kiln/ops/fft.cpp) on FFTW 3: one guru plan per call over the transformed dims, every other dim a
// batch ("howmany") dim, both with the tensors' own strides, so strided inputs need no copy (c2r,
// which FFTW lets overwrite its input, works on a contiguous scratch copy). Plans are made with
// FFTW_ESTIMATE (no timing runs, the same plan every time, so results do not vary between runs) under
// one lock: FFTW's planner is not thread-safe, its execution is. Batches of more than one transform
// run in parallel slices, one plan per slice.
#include <fftw3.h>

#include <cmath>
#include <complex>
#include <mutex>
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
  if (x.dtype() == kComplex64) {
    run<float>(Kind::C2C, g, i, o, 8, 8, sign);
    scale<float>(out[0], norm, g.signal);
  } else {
    run<double>(Kind::C2C, g, i, o, 16, 16, sign);
    scale<double>(out[0], norm, g.signal);
  }
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
  Tensor x = readable(in[0]);
  Geometry g = geometry(x, out[0], dims, Kind::R2C);
  char *i = static_cast<char*>(x.data_ptr()), *o = static_cast<char*>(out[0].data_ptr());
  if (single) run<float>(Kind::R2C, g, i, o, 4, 8, 0), scale<float>(out[0], norm, g.signal);
  else run<double>(Kind::R2C, g, i, o, 8, 16, 0), scale<double>(out[0], norm, g.signal);
}

// attrs: {dim, normalization, last_dim_size}; FFTW overwrites a c2r input, so it reads a copy
void c2r_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  if (out[0].numel() == 0) return;
  const Shape& dims = attr<Shape>(a, 0);
  const int norm = static_cast<int>(attr<int64_t>(a, 1));
  Tensor x = make_tensor(in[0].sizes(), in[0].dtype());
  cast_copy(x, in[0]);
  Geometry g = geometry(x, out[0], dims, Kind::C2R);
  char *i = static_cast<char*>(x.data_ptr()), *o = static_cast<char*>(out[0].data_ptr());
  if (x.dtype() == kComplex64) run<float>(Kind::C2R, g, i, o, 8, 4, 0), scale<float>(out[0], norm, g.signal);
  else run<double>(Kind::C2R, g, i, o, 16, 8, 0), scale<double>(out[0], norm, g.signal);
}

KernelRegistrar k_fft_c2c{"_fft_c2c", DeviceType::CPU, c2c_kernel};
KernelRegistrar k_fft_r2c{"_fft_r2c", DeviceType::CPU, r2c_kernel};
KernelRegistrar k_fft_c2r{"_fft_c2r", DeviceType::CPU, c2r_kernel};

}  // namespace
}  // namespace kiln::cpu
