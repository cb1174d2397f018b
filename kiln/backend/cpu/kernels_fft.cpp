// The steps around the complex transform when a real transform of even length N = 2M runs as a
// complex one of length M (fft.cpp's half_r2c / half_c2r, which state the arithmetic). Plain loops
// that the compiler vectorises for each ISA. Unlike the GEMM and layer-norm entries, these differ in
// the last bits between tables: for AVX2, GCC's vectoriser recognises the interleaved re / im pairs
// as complex arithmetic and builds them from vaddsubps, which groups the sums otherwise.
#include "kiln/backend/cpu/isa_util.h"

namespace kiln::cpu::KILN_ISA {
namespace {

// X[k] (k in [0, M], os complex elements apart) from Z = z[0, M) (contiguous); w[k] = w^k.
template <class R, bool kUnit>
void r2c_post_loop(const R* __restrict z, const R* __restrict w, int64_t M, R* __restrict X, int64_t os) {
  const int64_t s = kUnit ? 2 : 2 * os;
  X[0] = z[0] + z[1], X[1] = 0;
  X[M * s] = z[0] - z[1], X[M * s + 1] = 0;
  for (int64_t k = 1; k < M; ++k) {
    const R ar = z[2 * k], ai = z[2 * k + 1], br = z[2 * (M - k)], bi = -z[2 * (M - k) + 1];
    const R er = (ar + br) * R(0.5), ei = (ai + bi) * R(0.5);
    const R orr = (ai - bi) * R(0.5), oi = (br - ar) * R(0.5);  // Zo = -i (a - b) / 2
    const R wr = w[2 * k], wi = w[2 * k + 1];
    X[k * s] = er + (wr * orr - wi * oi);
    X[k * s + 1] = ei + (wr * oi + wi * orr);
  }
}
template <class R>
void r2c_post(const R* z, const R* w, int64_t M, R* X, int64_t os) {
  if (os == 1) r2c_post_loop<R, true>(z, w, M, X, 1);
  else r2c_post_loop<R, false>(z, w, M, X, os);
}

// Z = z[0, M) (contiguous) from X[k] (k in [0, M], is complex elements apart).
template <class R, bool kUnit>
void c2r_pre_loop(const R* __restrict X, int64_t is, const R* __restrict w, int64_t M, R* __restrict z) {
  const int64_t s = kUnit ? 2 : 2 * is;
  const R x0 = X[0], xm = X[M * s];
  z[0] = x0 + xm, z[1] = x0 - xm;
  for (int64_t k = 1; k < M; ++k) {
    const R ar = X[k * s], ai = X[k * s + 1], br = X[(M - k) * s], bi = -X[(M - k) * s + 1];
    const R er = ar + br, ei = ai + bi, dr = ar - br, di = ai - bi;
    const R wr = w[2 * k], wi = -w[2 * k + 1];  // conj(w^k)
    const R orr = wr * dr - wi * di, oi = wr * di + wi * dr;
    z[2 * k] = er - oi;  // E + i O
    z[2 * k + 1] = ei + orr;
  }
}
template <class R>
void c2r_pre(const R* X, int64_t is, const R* w, int64_t M, R* z) {
  if (is == 1) c2r_pre_loop<R, true>(X, 1, w, M, z);
  else c2r_pre_loop<R, false>(X, is, w, M, z);
}

}  // namespace

void fill_fft(KernelTable& t) {
  t.fft_half_f32 = {&r2c_post<float>, &c2r_pre<float>};
  t.fft_half_f64 = {&r2c_post<double>, &c2r_pre<double>};
}

}  // namespace kiln::cpu::KILN_ISA
