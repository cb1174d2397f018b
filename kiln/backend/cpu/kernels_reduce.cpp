// Reduction inner loops (compiled once per ISA). Sums are cascaded (blocks with independent
// accumulators, combined pairwise) so float error grows like log(n), as PyTorch's do.
#include <cmath>
#include <vector>

#include "kiln/backend/cpu/isa_util.h"
#include "kiln/backend/cpu/vec.h"

namespace kiln::cpu::KILN_ISA {
namespace {

using R = ReduceOp;

template <R OP, class T>
constexpr bool supported() {
  // torch 2.13: float8 all/any only; uint16/32/64 have no max/min/prod
  if constexpr (std::is_same_v<T, Float8_e4m3fn> || std::is_same_v<T, Float8_e5m2>)
    return OP == R::All || OP == R::Any;
  if constexpr (std::is_same_v<T, uint16_t> || std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t>)
    if (OP == R::Max || OP == R::Min || OP == R::Prod) return false;
  constexpr bool b = std::is_same_v<T, bool>, i = is_int_v<T>, f = is_float_v<T>, c = is_complex_v<T>;
  switch (OP) {
    case R::Sum: case R::Prod: return i || f || c;
    case R::Max: case R::Min: return b || i || f;
    case R::All: case R::Any: return true;
    case R::SumAbs: case R::SumSq: return f || c;
    case R::NanSum: return f;
    case R::Mean: return f || c;
    default: return false;
  }
}

// out type: All/Any -> bool (uint8 for uint8, as torch); SumAbs/SumSq of complex -> real.
template <R OP, class T>
using out_t = std::conditional_t<
    (OP == R::All || OP == R::Any), std::conditional_t<std::is_same_v<T, uint8_t>, uint8_t, bool>,
    std::conditional_t<(OP == R::SumAbs || OP == R::SumSq), real_of_t<T>, T>>;
template <R OP, class T>
using acc_t = std::conditional_t<
    (OP == R::All || OP == R::Any), bool,
    std::conditional_t<(OP == R::SumAbs || OP == R::SumSq), opmath_t<real_of_t<T>>, opmath_t<T>>>;

template <R OP, class A>
constexpr A identity() {
  if constexpr (OP == R::Prod || OP == R::All) return A(1);
  else if constexpr (OP == R::Max) {
    if constexpr (std::is_floating_point_v<A>) return -std::numeric_limits<A>::infinity();
    else return std::numeric_limits<A>::lowest();
  } else if constexpr (OP == R::Min) {
    if constexpr (std::is_floating_point_v<A>) return std::numeric_limits<A>::infinity();
    else return std::numeric_limits<A>::max();
  } else return A(0);
}

template <R OP, class A, class T>
inline A map(T x) {
  if constexpr (OP == R::SumAbs) return static_cast<A>(std::abs(static_cast<opmath_t<T>>(x)));
  else if constexpr (OP == R::SumSq) {
    if constexpr (is_complex_v<T>) return static_cast<A>(std::norm(x));
    else { A v = static_cast<A>(x); return v * v; }
  } else if constexpr (OP == R::NanSum) {
    A v = static_cast<A>(x);
    return std::isnan(v) ? A(0) : v;
  } else if constexpr (OP == R::All || OP == R::Any) {
    if constexpr (is_complex_v<T>) return A(x != T(0));
    else return A(static_cast<opmath_t<T>>(x) != opmath_t<T>(0));
  } else return static_cast<A>(x);
}

template <R OP, class A>
inline A combine(A a, A b) {
  if constexpr (kWraps<A> && (OP == R::Prod || OP == R::Sum || OP == R::NanSum)) {
    // integer sums and products wrap (isa_util.h), as torch's do, instead of overflowing
    return static_cast<A>(OP == R::Prod ? Wrap<A>(a) * Wrap<A>(b) : Wrap<A>(a) + Wrap<A>(b));
  } else if constexpr (OP == R::Prod) return a * b;
  else if constexpr (OP == R::Max || OP == R::Min) {
    if constexpr (std::is_floating_point_v<A>) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<A>::quiet_NaN();
    }
    if constexpr (OP == R::Max) return a > b ? a : b;
    else return a < b ? a : b;
  } else if constexpr (OP == R::All) return A(a && b);
  else if constexpr (OP == R::Any) return A(a || b);
  else return static_cast<A>(a + b);
}

constexpr int kLanes = 16;
constexpr int64_t kBlock = 4096;

// Reduction of a contiguous run of n elements: kLanes accumulators over blocks of kBlock, blocks
// combined pairwise, so a float sum's error grows with log(n), not n.
template <R OP, class T, class A>
A reduce_run(const T* x, int64_t n) {
  if constexpr ((OP == R::Max || OP == R::Min) && std::is_same_v<A, float>) {
    // float max/min: vector max with a separate NaN mask (NaN wins, as in torch)
    VecF acc = VecF::set1(identity<OP, A>()), acc2 = acc, nanm = VecF::set1(0.0f);
    int64_t i = 0;
    for (; i + 2 * VecF::N <= n; i += 2 * VecF::N) {
      VecF a = load_as_float(x + i), b = load_as_float(x + i + VecF::N);
      nanm = nanm.or_bits(a.nan_mask()).or_bits(b.nan_mask());
      if constexpr (OP == R::Max) acc = VecF::max(a, acc), acc2 = VecF::max(b, acc2);
      else acc = VecF::min(a, acc), acc2 = VecF::min(b, acc2);
    }
    float lanes[VecF::N], lanes2[VecF::N];
    acc.store(lanes);
    acc2.store(lanes2);
    float r = identity<OP, A>();
    bool any_nan = nanm.any_bits();
    for (int l = 0; l < VecF::N; ++l) {
      r = (OP == R::Max ? lanes[l] > r : lanes[l] < r) ? lanes[l] : r;
      r = (OP == R::Max ? lanes2[l] > r : lanes2[l] < r) ? lanes2[l] : r;
    }
    for (; i < n; ++i) {
      float v = static_cast<float>(x[i]);
      any_nan |= v != v;
      r = (OP == R::Max ? v > r : v < r) ? v : r;
    }
    return any_nan ? std::numeric_limits<A>::quiet_NaN() : r;
  } else if constexpr ((OP == R::Max || OP == R::Min) && std::is_floating_point_v<A>) {
    // max/min need no pairwise tree: branch-free lanes (vectorised) plus a NaN flag
    A acc[kLanes], nan[kLanes];  // nan[l] becomes NaN once lane l has seen one (a blend, vectorised)
    for (int l = 0; l < kLanes; ++l) acc[l] = identity<OP, A>(), nan[l] = A(0);
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        A v = static_cast<A>(x[i + l]);
        nan[l] = v != v ? v : nan[l];
        acc[l] = (OP == R::Max ? v > acc[l] : v < acc[l]) ? v : acc[l];
      }
    A r = identity<OP, A>();
    bool any_nan = false;
    for (; i < n; ++i) {
      A v = static_cast<A>(x[i]);
      any_nan |= v != v;
      r = (OP == R::Max ? v > r : v < r) ? v : r;
    }
    for (int l = 0; l < kLanes; ++l) {
      any_nan |= nan[l] != nan[l];
      r = (OP == R::Max ? acc[l] > r : acc[l] < r) ? acc[l] : r;
    }
    return any_nan ? std::numeric_limits<A>::quiet_NaN() : r;
  }
  if (n > kBlock) {  // pairwise over blocks
    int64_t half = (n / 2 + kLanes - 1) / kLanes * kLanes;
    return combine<OP>(reduce_run<OP, T, A>(x, half), reduce_run<OP, T, A>(x + half, n - half));
  }
  // two levels of lane accumulators: 8 steps into `part`, then `part` folds into `acc`, so no
  // accumulator takes more than ~40 additions inside a block
  A acc[kLanes], part[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = identity<OP, A>();
  int64_t i = 0;
  constexpr int64_t kChunk = 8 * kLanes;
  for (; i + kChunk <= n; i += kChunk) {
    for (int l = 0; l < kLanes; ++l) part[l] = identity<OP, A>();
    for (int64_t k = 0; k < kChunk; k += kLanes)
      for (int l = 0; l < kLanes; ++l) part[l] = combine<OP>(part[l], map<OP, A>(x[i + k + l]));
    for (int l = 0; l < kLanes; ++l) acc[l] = combine<OP>(acc[l], part[l]);
  }
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] = combine<OP>(acc[l], map<OP, A>(x[i + l]));
  A r = identity<OP, A>();
  for (; i < n; ++i) r = combine<OP>(r, map<OP, A>(x[i]));
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] = combine<OP>(acc[l], acc[l + w]);
  return combine<OP>(acc[0], r);
}

// Mean reduces like Sum, then divides in the accumulation type (one rounding for half/bfloat16).
template <R OP>
constexpr R run_op() { return OP == R::Mean ? R::Sum : OP; }

template <R OP, class A>
inline A finish(A v, int64_t n) {
  if constexpr (OP == R::Mean) return v / static_cast<typename RealOf<A>::type>(n);
  else return v;
}

template <R OP, class T>
void inner(char* out, const char* in, int64_t M, int64_t Rn) {
  using O = out_t<OP, T>;
  using A = acc_t<OP, T>;
  const T* x = reinterpret_cast<const T*>(in);
  O* o = reinterpret_cast<O*>(out);
  for (int64_t m = 0; m < M; ++m)
    o[m] = static_cast<O>(finish<OP>(reduce_run<run_op<OP>(), T, A>(x + m * Rn, Rn), Rn));
}

// out[o, j] = reduce_r in[o, r, j] for j < Jc; rows are J apart. Up to 1024 columns at a time, so
// that a row of up to 4 KiB of float32 is read whole and in order (256 at a time read a quarter of
// every 4 KiB row before the next: float32 sum over dim 0 of 1024 x 1024, one thread on Zen 3,
// 135-171 -> 84-119 us; 2048 x 2048 918-943 -> 522-680 us). Each column's order of additions does
// not depend on the block's width: the same bits.
template <R OP_, class T>
void outer(char* out, const char* in, int64_t O_, int64_t Rn, int64_t Jc, int64_t J) {
  constexpr R OP = run_op<OP_>();
  using O = out_t<OP_, T>;
  using A = acc_t<OP, T>;
  constexpr int64_t kRows = 16, kCols = 1024;  // rows summed into part; 16 parts into mid; mids into total
  A total[kCols], mid[kCols], part[kCols];
  for (int64_t o = 0; o < O_; ++o) {
    const T* x = reinterpret_cast<const T*>(in) + o * Rn * J;
    O* y = reinterpret_cast<O*>(out) + o * J;
    for (int64_t j0 = 0; j0 < Jc; j0 += kCols) {
      int64_t jc = Jc - j0 < kCols ? Jc - j0 : kCols;
      for (int64_t j = 0; j < jc; ++j) total[j] = mid[j] = identity<OP, A>();
      int64_t parts = 0;
      for (int64_t r0 = 0; r0 < Rn; r0 += kRows) {
        int64_t rc = Rn - r0 < kRows ? Rn - r0 : kRows;
        for (int64_t j = 0; j < jc; ++j) part[j] = identity<OP, A>();
        for (int64_t r = 0; r < rc; ++r) {
          const T* row = x + (r0 + r) * J + j0;
          for (int64_t j = 0; j < jc; ++j) part[j] = combine<OP>(part[j], map<OP, A>(row[j]));
        }
        for (int64_t j = 0; j < jc; ++j) mid[j] = combine<OP>(mid[j], part[j]);
        if (++parts == 16) {
          for (int64_t j = 0; j < jc; ++j) total[j] = combine<OP>(total[j], mid[j]), mid[j] = identity<OP, A>();
          parts = 0;
        }
      }
      for (int64_t j = 0; j < jc; ++j) y[j0 + j] = static_cast<O>(finish<OP_>(combine<OP>(total[j], mid[j]), Rn));
    }
  }
}

}  // namespace

void fill_reduce(KernelTable& t) {
  for_each_code<static_cast<int>(R::Count)>([&]<int I>() {
    constexpr R OP = static_cast<R>(I);
    auto set = [&]<class T>() {
      if constexpr (supported<OP, T>()) {
        t.reduce_inner[I][static_cast<int>(dtype_of<T>())] = &inner<OP, T>;
        t.reduce_outer[I][static_cast<int>(dtype_of<T>())] = &outer<OP, T>;
      }
    };
    for_each_type(set);
    set.template operator()<Float8_e4m3fn>();
    set.template operator()<Float8_e5m2>();
  });
}

}  // namespace kiln::cpu::KILN_ISA
