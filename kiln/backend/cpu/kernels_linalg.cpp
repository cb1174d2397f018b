// Tiny matrices (n <= 8) across a batch, one matrix per vector lane (compiled once per ISA; kernel
// table entries tiny_linalg_f32 / _f64, run by the kernels in linalg.cpp): LU with partial pivoting,
// the inverse and small solves, branch-free (the pivot row is chosen and swapped in with selects).
// Every step is the scalar code's (linalg_tiny.h) in the same order and without contraction, so
// lanes, the scalar remainder and every ISA's table give the same bits. A lane that meets a zero
// pivot is redone by the scalar code, which follows LAPACK there.
#include <cstring>
#include <limits>

#include "kiln/backend/cpu/isa_util.h"
#include "kiln/backend/cpu/linalg_tiny.h"
#include "kiln/backend/cpu/vec.h"

// Block::load / store are forced inline (an out-of-line 8 x 8 transpose cost a quarter of a 4 x 4
// solve); GCC then loses the bound count <= N * N that every caller keeps and warns about their
// buffer loops (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Waggressive-loop-optimizations"
#endif

namespace kiln::cpu::KILN_ISA {
namespace {

template <class V, int N>
struct Block {
  using T = typename V::T;
  static constexpr int L = V::N;
  V a[N * N];
  V p[N];   // the pivot row of each step (as a T)
  V rd[N];  // 1 / U's diagonal

  // L consecutive row-major blocks of `count` values from src (stride apart): lane l of dst[e] holds
  // element e of block l. 8 x 8 register transposes where the vector type has them.
  // room: at least 8 values readable (writable) from each block's start, so blocks of fewer than 8
  // values (a right-hand side) still go through the transposes: the surplus lanes are ignored on
  // loading, and on storing are overwritten by the next block's values (stores run in order).
  [[gnu::always_inline]] static void load(const T* src, int64_t stride, int count, V* dst, bool room = false) {
    int e0 = 0;
    if constexpr (requires(V* r) { V::transpose8(r); }) {
      if (count < 8 && room) {
        V r[8];
        for (int l = 0; l < 8; ++l) r[l] = V::load(src + l * stride);
        V::transpose8(r);
        for (int j = 0; j < count; ++j) dst[j] = r[j];
        return;
      }
      for (; e0 + 8 <= count; e0 += 8) {
        V r[8];
        for (int l = 0; l < 8; ++l) r[l] = V::load(src + l * stride + e0);
        V::transpose8(r);
        for (int j = 0; j < 8; ++j) dst[e0 + j] = r[j];
      }
    }
    if (e0 == count) return;
    alignas(64) T tmp[N * N * L];
    for (int l = 0; l < L; ++l)
      for (int e = e0; e < count; ++e) tmp[e * L + l] = src[l * stride + e];
    for (int e = e0; e < count; ++e) dst[e] = V::load(tmp + e * L);
  }
  [[gnu::always_inline]] static void store(const V* src, int count, T* dst, int64_t stride, bool room = false) {
    int e0 = 0;
    if constexpr (requires(V* r) { V::transpose8(r); }) {
      if (count < 8 && room && stride == count) {
        V r[8];
        for (int j = 0; j < 8; ++j) r[j] = j < count ? src[j] : V::set1(T(0));
        V::transpose8(r);
        for (int l = 0; l < 8; ++l) r[l].store(dst + l * stride);
        return;
      }
      for (; e0 + 8 <= count; e0 += 8) {
        V r[8];
        for (int j = 0; j < 8; ++j) r[j] = src[e0 + j];
        V::transpose8(r);
        for (int l = 0; l < 8; ++l) r[l].store(dst + l * stride + e0);
      }
    }
    if (e0 == count) return;
    alignas(64) T tmp[N * N * L];
    for (int e = e0; e < count; ++e) src[e].store(tmp + e * L);
    for (int l = 0; l < L; ++l)
      for (int e = e0; e < count; ++e) dst[l * stride + e] = tmp[e * L + l];
  }

  // Swaps x[k] and x[i] in the lanes whose pivot of step k is row i.
  static void swap_rows(V* rk, V* ri, int len, V pk, int i) {
    const V d = (pk - V::set1(T(i))).abs(), half = V::set1(T(0.5));
    for (int j = 0; j < len; ++j) {
      V xk = rk[j], xi = ri[j];
      rk[j] = V::select_lt(d, half, xi, xk);
      ri[j] = V::select_lt(d, half, xk, xi);
    }
  }

  // full_rows: the row swaps also reach the columns already eliminated (L's part), as LAPACK's; a
  // determinant alone does without.
  void factor(bool full_rows = true) {
    const V one = V::set1(T(1));
    for (int k = 0; k < N; ++k) {
      V best = a[k * N + k].abs(), pk = V::set1(T(k));
      for (int i = k + 1; i < N; ++i) {  // the first largest |a_ik|, as LAPACK's i?amax
        V v = a[i * N + k].abs();
        pk = V::select_lt(best, v, V::set1(T(i)), pk);
        best = V::select_lt(best, v, v, best);
      }
      p[k] = pk;
      const int from = full_rows ? 0 : k;
      for (int i = k + 1; i < N; ++i) swap_rows(a + k * N + from, a + i * N + from, N - from, pk, i);
      rd[k] = one / a[k * N + k];
      for (int i = k + 1; i < N; ++i) {
        V l = a[i * N + k] * rd[k];
        a[i * N + k] = l;
        for (int j = k + 1; j < N; ++j) a[i * N + j] = a[i * N + j] - l * a[k * N + j];
      }
    }
  }

  // x (N vectors, one right-hand side) := A^-1 x
  void solve(V* x) const {
    for (int k = 0; k < N; ++k)
      for (int i = k + 1; i < N; ++i) swap_rows(x + k, x + i, 1, p[k], i);
    for (int i = 0; i < N; ++i) {
      V s = x[i];
      for (int c = 0; c < i; ++c) s = s - a[i * N + c] * x[c];
      x[i] = s;
    }
    for (int i = N - 1; i >= 0; --i) {
      V s = x[i];
      for (int c = i + 1; c < N; ++c) s = s - a[i * N + c] * x[c];
      x[i] = s * rd[i];
    }
  }
};

// The 2 x 2 minors of a 4 x 4 matrix's top rows (s) and bottom rows (c), in the order the cofactor
// formulas read them (pairs of columns (0,1) (0,2) (0,3) (1,2) (1,3) (2,3)):
// det = s0 c5 - s1 c4 + s2 c3 + s3 c2 - s4 c1 + s5 c0.
template <class V>
struct Minors4 {
  V s[6], c[6];
  explicit Minors4(const V* a) {
    auto m = [&](int i, int j) { return a[i * 4 + j]; };
    const int pairs[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
    for (int p = 0; p < 6; ++p) {
      const int x = pairs[p][0], y = pairs[p][1];
      s[p] = m(0, x) * m(1, y) - m(1, x) * m(0, y);
      c[p] = m(2, x) * m(3, y) - m(3, x) * m(2, y);
    }
  }
};

// The determinant of N <= 4 matrices in closed form (cofactors of 2 x 2 minors): no pivoting, no
// selects, a handful of products per lane. Accurate like the LU's product for the well-scaled
// matrices graphics and geometry batch; a determinant only (inverses and solves keep the LU).
template <class V, int N>
[[gnu::always_inline]] inline V det_closed(const V* a) {
  auto m = [&](int i, int j) { return a[i * N + j]; };
  if constexpr (N == 1) {
    return m(0, 0);
  } else if constexpr (N == 2) {
    return m(0, 0) * m(1, 1) - m(0, 1) * m(1, 0);
  } else if constexpr (N == 3) {
    return m(0, 0) * (m(1, 1) * m(2, 2) - m(1, 2) * m(2, 1)) - m(0, 1) * (m(1, 0) * m(2, 2) - m(1, 2) * m(2, 0)) +
           m(0, 2) * (m(1, 0) * m(2, 1) - m(1, 1) * m(2, 0));
  } else {
    const Minors4<V> q(a);
    const V &s0 = q.s[0], &s1 = q.s[1], &s2 = q.s[2], &s3 = q.s[3], &s4 = q.s[4], &s5 = q.s[5];
    const V &c0 = q.c[0], &c1 = q.c[1], &c2 = q.c[2], &c3 = q.c[3], &c4 = q.c[4], &c5 = q.c[5];
    return s0 * c5 - s1 * c4 + s2 * c3 + s3 * c2 - s4 * c1 + s5 * c0;
  }
}
// The inverse of N <= 4 matrices in closed form: the adjugate over the determinant (the same 2 x 2
// minors for N = 4). out[i * N + j]; the caller handles det == 0.
template <class V, int N>
[[gnu::always_inline]] inline void inv_closed(const V* a, V det, V* out) {
  auto m = [&](int i, int j) { return a[i * N + j]; };
  const V r = V::set1(1) / det;
  if constexpr (N == 1) {
    out[0] = r;
  } else if constexpr (N == 2) {
    out[0] = m(1, 1) * r, out[1] = (V::set1(0) - m(0, 1)) * r;
    out[2] = (V::set1(0) - m(1, 0)) * r, out[3] = m(0, 0) * r;
  } else if constexpr (N == 3) {
    out[0] = (m(1, 1) * m(2, 2) - m(1, 2) * m(2, 1)) * r;
    out[1] = (m(0, 2) * m(2, 1) - m(0, 1) * m(2, 2)) * r;
    out[2] = (m(0, 1) * m(1, 2) - m(0, 2) * m(1, 1)) * r;
    out[3] = (m(1, 2) * m(2, 0) - m(1, 0) * m(2, 2)) * r;
    out[4] = (m(0, 0) * m(2, 2) - m(0, 2) * m(2, 0)) * r;
    out[5] = (m(0, 2) * m(1, 0) - m(0, 0) * m(1, 2)) * r;
    out[6] = (m(1, 0) * m(2, 1) - m(1, 1) * m(2, 0)) * r;
    out[7] = (m(0, 1) * m(2, 0) - m(0, 0) * m(2, 1)) * r;
    out[8] = (m(0, 0) * m(1, 1) - m(0, 1) * m(1, 0)) * r;
  } else {
    const Minors4<V> q(a);
    const V &s0 = q.s[0], &s1 = q.s[1], &s2 = q.s[2], &s3 = q.s[3], &s4 = q.s[4], &s5 = q.s[5];
    const V &c0 = q.c[0], &c1 = q.c[1], &c2 = q.c[2], &c3 = q.c[3], &c4 = q.c[4], &c5 = q.c[5];
    out[0] = (m(1, 1) * c5 - m(1, 2) * c4 + m(1, 3) * c3) * r;
    out[1] = (m(0, 2) * c4 - m(0, 1) * c5 - m(0, 3) * c3) * r;
    out[2] = (m(3, 1) * s5 - m(3, 2) * s4 + m(3, 3) * s3) * r;
    out[3] = (m(2, 2) * s4 - m(2, 1) * s5 - m(2, 3) * s3) * r;
    out[4] = (m(1, 2) * c2 - m(1, 0) * c5 - m(1, 3) * c1) * r;
    out[5] = (m(0, 0) * c5 - m(0, 2) * c2 + m(0, 3) * c1) * r;
    out[6] = (m(3, 2) * s2 - m(3, 0) * s5 - m(3, 3) * s1) * r;
    out[7] = (m(2, 0) * s5 - m(2, 2) * s2 + m(2, 3) * s1) * r;
    out[8] = (m(1, 0) * c4 - m(1, 1) * c2 + m(1, 3) * c0) * r;
    out[9] = (m(0, 1) * c2 - m(0, 0) * c4 - m(0, 3) * c0) * r;
    out[10] = (m(3, 0) * s4 - m(3, 1) * s2 + m(3, 3) * s0) * r;
    out[11] = (m(2, 1) * s2 - m(2, 0) * s4 - m(2, 3) * s0) * r;
    out[12] = (m(1, 1) * c1 - m(1, 0) * c3 - m(1, 2) * c0) * r;
    out[13] = (m(0, 0) * c3 - m(0, 1) * c1 + m(0, 2) * c0) * r;
    out[14] = (m(3, 1) * s1 - m(3, 0) * s3 - m(3, 2) * s0) * r;
    out[15] = (m(2, 0) * s3 - m(2, 1) * s1 + m(2, 2) * s0) * r;
  }
}

// One lane of the closed forms, for the remainder (the same expressions, so the same bits).
template <class T>
struct Lane {
  T v;
  static Lane set1(T x) { return {x}; }
  Lane operator*(Lane o) const { return {v * o.v}; }
  Lane operator-(Lane o) const { return {v - o.v}; }
  Lane operator+(Lane o) const { return {v + o.v}; }
  Lane operator/(Lane o) const { return {v / o.v}; }
};

template <class T, int N>
T det_closed_scalar(const T* a) {
  Lane<T> m[N * N];
  for (int i = 0; i < N * N; ++i) m[i] = {a[i]};
  return det_closed<Lane<T>, N>(m).v;
}

template <class V, int N>
void batch(int64_t count, const typename V::T* a, typename V::T* lu, int32_t* piv, int32_t* info, typename V::T* det,
           typename V::T* inv, const typename V::T* b, typename V::T* x, int64_t k) {
  using T = typename V::T;
  using B = Block<V, N>;
  constexpr int L = V::N;
  constexpr int64_t M = int64_t(N) * N;
  auto scalar = [&](int64_t m) {
    tiny::one<T, N>(a + m * M, lu ? lu + m * M : nullptr, piv ? piv + m * N : nullptr, info + m,
                    det ? det + m : nullptr, inv ? inv + m * M : nullptr, b ? b + m * N * k : nullptr,
                    x ? x + m * N * k : nullptr, k);
  };
  int64_t s = 0;
  B blk;
  if constexpr (N <= 4) {
    if (det && !lu && !piv && !inv && !b) {  // a determinant alone: the closed form, one pass
      for (; s + L <= count; s += L) {
        B::load(a + s * M, M, N * N, blk.a);
        det_closed<V, N>(blk.a).store(det + s);
      }
      for (; s < count; ++s) det[s] = det_closed_scalar<T, N>(a + s * M);
      for (int64_t m = 0; m < count; ++m) info[m] = 0;  // not computed on this path
      return;
    }
    if ((inv || b) && !lu && !piv && !det) {  // inverses and solves: the adjugate, one pass
      auto finish = [&](int64_t m, const T* inverse) {  // one matrix's outputs from its inverse
        info[m] = 0;
        if (inv) std::memcpy(inv + m * M, inverse, sizeof(T) * M);
        if (b)
          for (int i = 0; i < N; ++i)
            for (int64_t c = 0; c < k; ++c) {
              T acc = T(0);
              for (int j = 0; j < N; ++j) acc = acc + inverse[i * N + j] * b[m * N * k + j * k + c];
              x[m * N * k + i * k + c] = acc;
            }
      };
      auto scalar_one = [&](int64_t m) {
        Lane<T> am[N * N], out[N * N];
        for (int i = 0; i < N * N; ++i) am[i] = {a[m * M + i]};
        const Lane<T> d = det_closed<Lane<T>, N>(am);
        if (d.v == T(0)) return scalar(m);  // singular: the LU says where (info), as LAPACK's
        inv_closed<Lane<T>, N>(am, d, out);
        T o[N * N];
        for (int i = 0; i < N * N; ++i) o[i] = out[i].v;
        finish(m, o);
      };
      for (; s + L <= count; s += L) {
        B::load(a + s * M, M, N * N, blk.a);
        const V d = det_closed<V, N>(blk.a);
        V out[N * N];
        inv_closed<V, N>(blk.a, d, out);
        alignas(64) T dd[L];
        d.store(dd);
        if (!b || k == 1) {  // the inverse, and x = A^-1 b lane-wise (the scalar finish's sums)
          if (inv) B::store(out, N * N, inv + s * M, M);
          if (b) {
            V bv[N], xv[N];
            const bool room = (s + L - 1) * N + 8 <= count * N;  // 8 values from the last block's start
            B::load(b + s * N, N, N, bv, room);
            for (int i = 0; i < N; ++i) {
              V acc = V::set1(T(0));
              for (int j = 0; j < N; ++j) acc = acc + out[i * N + j] * bv[j];
              xv[i] = acc;
            }
            B::store(xv, N, x + s * N, N, room);
          }
          for (int l = 0; l < L; ++l) info[s + l] = 0;
        } else {
          alignas(64) T o[N * N * L];
          B::store(out, N * N, o, M);  // matrix l at o + l * M
          for (int l = 0; l < L; ++l) finish(s + l, o + l * M);
        }
        for (int l = 0; l < L; ++l)
          if (dd[l] == T(0)) scalar(s + l);
      }
      for (; s < count; ++s) scalar_one(s);
      return;
    }
  }
  for (; s + L <= count; s += L) {
    B::load(a + s * M, M, N * N, blk.a);
    blk.factor(lu || inv || b);
    // a lane with a zero pivot is redone by the scalar code (LAPACK's conventions there)
    V zero = V::set1(T(0)), one = V::set1(T(1)), flag = zero;
    alignas(64) T bad[L];
    for (int i = 0; i < N; ++i) {  // |u_ii| == 0 exactly: not (0 < |u_ii|)
      V d = blk.a[i * N + i].abs();
      flag = V::select_lt(zero, d, flag, one);
    }
    flag.store(bad);
    if (lu) B::store(blk.a, N * N, lu + s * M, M);
    if (piv) {
      alignas(64) T pt[N * L];
      for (int i = 0; i < N; ++i) blk.p[i].store(pt + i * L);
      for (int l = 0; l < L; ++l)
        for (int i = 0; i < N; ++i) piv[(s + l) * N + i] = int32_t(pt[i * L + l]) + 1;
    }
    for (int l = 0; l < L; ++l) info[s + l] = 0;
    if (det) {  // the product of U's diagonal, negated for each row swap
      V d = one, half = V::set1(T(0.5)), minus = V::set1(T(-1));
      for (int i = 0; i < N; ++i) {
        d = d * blk.a[i * N + i];
        d = V::select_lt((blk.p[i] - V::set1(T(i))).abs(), half, d, d * minus);
      }
      d.store(det + s);
    }
    if (inv) {
      V cols[N * N];  // column j of the inverse, in cols[i * N + j]
      for (int j = 0; j < N; ++j) {
        V e[N];
        for (int i = 0; i < N; ++i) e[i] = V::set1(T(i == j ? 1 : 0));
        blk.solve(e);
        for (int i = 0; i < N; ++i) cols[i * N + j] = e[i];
      }
      B::store(cols, N * N, inv + s * M, M);
    }
    if (b) {
      if (k == 1) {  // one right-hand side: lane l's column is b's matrix l
        V col[N];
        B::load(b + s * N, N, N, col);
        blk.solve(col);
        B::store(col, N, x + s * N, N);
      } else {
        for (int64_t c = 0; c < k; ++c) {
          V col[N];
          alignas(64) T tmp[N * L];
          for (int l = 0; l < L; ++l)
            for (int i = 0; i < N; ++i) tmp[i * L + l] = b[(s + l) * N * k + i * k + c];
          for (int i = 0; i < N; ++i) col[i] = V::load(tmp + i * L);
          blk.solve(col);
          for (int i = 0; i < N; ++i) col[i].store(tmp + i * L);
          for (int l = 0; l < L; ++l)
            for (int i = 0; i < N; ++i) x[(s + l) * N * k + i * k + c] = tmp[i * L + l];
        }
      }
    }
    for (int l = 0; l < L; ++l)
      if (bad[l] != T(0)) scalar(s + l);
  }
  for (; s < count; ++s) scalar(s);
}

template <class V>
void tiny_linalg(int64_t n, int64_t count, const typename V::T* a, typename V::T* lu, int32_t* piv, int32_t* info,
                 typename V::T* det, typename V::T* inv, const typename V::T* b, typename V::T* x, int64_t k) {
  tiny::with_n(n, [&]<int N>() { batch<V, N>(count, a, lu, piv, info, det, inv, b, x, k); });
}

}  // namespace

#if defined(__AVX2__)
using VecTinyF = VecF8;  // 8 lanes in the AVX-512 table too: the 8 x 8 transposes
#else
using VecTinyF = VecF;
#endif

void fill_linalg(KernelTable& t) {
  t.tiny_linalg_f32 = &tiny_linalg<VecTinyF>;
  t.tiny_linalg_f64 = &tiny_linalg<VecD>;
}

}  // namespace kiln::cpu::KILN_ISA
