// CPU kernels of the reductions (sum, prod, amax, amin, all, any, the norms' sums, nansum, mean), the
// arg-reductions (max/min along a dim), softmax / log_softmax and the cumulative scans; their entries,
// schemas, metas and front ends are in kiln/ops/reduce.cpp. Registered by op name. No kernel here
// calls an op: permuted inputs are views made with make_view, contiguous copies come from the cast loop.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kiln/backend/cpu/kernels.h"
#include "kiln/core/convert.h"
#include "kiln/core/deterministic.h"
#include "kiln/core/visit.h"
#include "kiln/ops/reduce_detail.h"

namespace kiln {
namespace {

using namespace reduce_detail;
// deterministic mode: a long row is reduced in pieces of this length whatever the thread count
constexpr int64_t kDeterministicPiece = int64_t(1) << 16;

using cpu::contiguous_of;
// the view of x with its dims in the order perm
Tensor permuted(const Tensor& x, const Shape& perm) {
  Shape sizes, strides;
  for (int64_t p : perm) sizes.push_back(x.sizes()[p]), strides.push_back(x.strides()[p]);
  return make_view(x, sizes, strides, x.storage_offset());
}
// the view of x with dim d moved last
Tensor moved_last(const Tensor& x, int64_t d) {
  Shape perm;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != d) perm.push_back(i);
  perm.push_back(d);
  return permuted(x, perm);
}

// A dim of x that repeats one value (stride 0, size > 1: expand's).
bool expanded_dim(const Tensor& x, int64_t i) { return x.sizes()[i] > 1 && x.strides()[i] == 0; }
// `small` (contiguous, its expanded dims of size 1) seen with `sizes`: those dims broadcast again.
Tensor broadcast_back(const Tensor& small, const Shape& sizes) {
  Shape st = contiguous_strides(small.sizes());
  for (size_t i = 0; i < sizes.size(); ++i)
    if (small.sizes()[i] != sizes[i]) st[i] = 0;
  return make_view(small, sizes, st, small.storage_offset());
}

// Expanded dims (stride 0, size > 1) of x: read once, never materialised (issue 14: a sum over
// ones(1).expand(2**31 + 8, 2) used to copy 17 GB). A reduced one holds the same values `size` times:
// the idempotent reductions (amax, amin, all, any) and mean (its count drops with it) ignore it, the
// sums are scaled by it afterwards; a kept one gives the same result all along it, computed once and
// broadcast into y. Returns false (nothing done) where that does not apply: prod, count, no such dim.
bool reduce_expanded(ReduceOp r, const Tensor& y, const Tensor& x, const std::vector<bool>& m, const char* op) {
  const bool sum_like = r == ReduceOp::Sum || r == ReduceOp::NanSum || r == ReduceOp::SumAbs || r == ReduceOp::SumSq;
  if (!sum_like && r != ReduceOp::Max && r != ReduceOp::Min && r != ReduceOp::All && r != ReduceOp::Any &&
      r != ReduceOp::Mean)
    return false;
  bool any = false;
  for (int64_t i = 0; i < x.dim(); ++i) any = any || expanded_dim(x, i);
  if (!any) return false;
  Shape xs, xst, kept, small_kept;
  std::vector<bool> m2;
  int64_t times = 1;  // how often each value of a reduced row is repeated
  for (int64_t i = 0; i < x.dim(); ++i) {
    const bool expanded = expanded_dim(x, i);
    if (m[i] && expanded) {
      times *= x.sizes()[i];
      continue;
    }
    xs.push_back(expanded ? 1 : x.sizes()[i]);
    xst.push_back(x.strides()[i]);
    m2.push_back(m[i]);
    if (!m[i]) kept.push_back(x.sizes()[i]), small_kept.push_back(xs.back());
  }
  Tensor xsmall = make_view(x, xs, xst, x.storage_offset());
  Tensor yflat = make_view(y, kept, contiguous_strides(kept), y.storage_offset());
  if (small_kept == kept) {
    cpu::reduce_into(r, yflat, xsmall, m2, op);
  } else {
    Tensor ysmall = make_tensor(small_kept, y.dtype());
    cpu::reduce_into(r, ysmall, xsmall, m2, op);
    cpu::cast_copy(yflat, broadcast_back(ysmall, kept));
  }
  if (sum_like && times > 1) {
    visit_all(y.dtype(), op, [&]<class T>() {
      T* p = static_cast<T*>(y.data_ptr());
      for (int64_t i = 0; i < y.numel(); ++i) {
        if constexpr (std::is_same_v<T, bool>) {
        } else if constexpr (std::is_integral_v<T>) {  // wraps as the repeated addition does
          using U = std::make_unsigned_t<T>;
          p[i] = static_cast<T>(static_cast<U>(static_cast<U>(p[i]) * static_cast<U>(times)));
        } else if constexpr (is_complex_v<T>) {
          p[i] = p[i] * static_cast<typename T::value_type>(times);
        } else {
          p[i] = convert<T>(convert<double>(p[i]) * static_cast<double>(times));
        }
      }
    });
  }
  return true;
}

}  // namespace

void cpu::reduce_into(ReduceOp r, const Tensor& y, const Tensor& x, const std::vector<bool>& m, const char* op) {
  int ri = static_cast<int>(r), di = static_cast<int>(x.dtype());
  auto inner = cpu::cpu_kernels().reduce_inner[ri][di];
  auto outer = cpu::cpu_kernels().reduce_outer[ri][di];
  if (!inner) raise_dtype_unsupported(op, x.dtype());
  if (y.numel() > 0 && x.numel() > 0 && reduce_expanded(r, y, x, m, op)) return;
  int64_t n = x.dim();
  char* yp = static_cast<char*>(y.data_ptr());
  if (y.numel() == 0) return;
  if (x.numel() == 0) {  // empty reduction: identity
    Scalar id = (r == ReduceOp::Prod || r == ReduceOp::All) ? Scalar(1)
                : r == ReduceOp::Mean ? Scalar(std::numeric_limits<double>::quiet_NaN()) : Scalar(0);
    cpu::fill(y, id);
    return;
  }
  // kept dims first, then reduced dims (products of x's sizes: no overflow, x is not empty)
  Shape perm;
  int64_t R = 1, O = 1;
  for (int64_t i = 0; i < n; ++i)
    if (!m[i]) perm.push_back(i), O *= x.sizes()[i];
  for (int64_t i = 0; i < n; ++i)
    if (m[i]) perm.push_back(i), R *= x.sizes()[i];
  Tensor xp = permuted(x, perm);
  int nt = get_num_threads();
  if (!xp.is_contiguous() && x.is_contiguous()) {
    // reduced dims a contiguous block [lo, hi] followed by kept dims: (O, R, J) "outer" reduction
    int64_t lo = -1, hi = -1;
    for (int64_t i = 0; i < n; ++i)
      if (m[i]) { if (lo < 0) lo = i; hi = i; }
    bool block = true;
    for (int64_t i = lo; i <= hi; ++i) block = block && m[i];
    if (block) {
      int64_t Oo = 1, J = 1;
      for (int64_t i = 0; i < lo; ++i) Oo *= x.sizes()[i];
      for (int64_t i = hi + 1; i < n; ++i) J *= x.sizes()[i];
      const char* xpnt = static_cast<const char*>(x.data_ptr());
      size_t isz = x.itemsize(), osz = y.itemsize();
      if (Oo >= nt || J < 64) {
        cpu::parallel_for(Oo, std::max<int64_t>(1, cpu::kGrainSize / std::max<int64_t>(R * J, 1)), [&](int64_t b, int64_t e) {
          outer(yp + b * J * osz, xpnt + b * R * J * isz, e - b, R, J, J);
        });
      } else {
        cpu::parallel_for(J, std::max<int64_t>(64, cpu::kGrainSize / std::max<int64_t>(R * Oo, 1)), [&](int64_t b, int64_t e) {
          outer(yp + b * osz, xpnt + b * isz, Oo, R, e - b, J);
        });
      }
      return;
    }
  }
  xp = contiguous_of(xp);
  const char* xpnt = static_cast<const char*>(xp.data_ptr());
  size_t isz = x.itemsize(), osz = y.itemsize();
  const bool det = are_deterministic_algorithms_enabled();
  if (O == 1 && R >= 2 * cpu::kGrainSize && (nt > 1 || det) && !is_reduced_float(x.dtype()) &&
      r != ReduceOp::Mean && r != ReduceOp::All && r != ReduceOp::Any) {
    // one long row: split it, reduce the partials. Deterministic mode splits it the same way on any
    // number of threads (fixed-length pieces), so the rounding does not depend on the thread count.
    int64_t chunks = det ? (R + kDeterministicPiece - 1) / kDeterministicPiece : std::min<int64_t>(nt, R / cpu::kGrainSize);
    int64_t len = (R + chunks - 1) / chunks;
    Tensor partial = make_tensor({chunks}, y.dtype());
    char* pp = static_cast<char*>(partial.data_ptr());
    cpu::parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        int64_t s = c * len, l = std::min(len, R - s);
        inner(pp + c * osz, xpnt + s * isz, 1, l);
      }
    });
    // combine partials with the same reduction (All/Any partials are bool: reduce them as bool)
    ReduceOp comb = (r == ReduceOp::SumAbs || r == ReduceOp::SumSq || r == ReduceOp::NanSum) ? ReduceOp::Sum : r;
    auto fin = cpu::cpu_kernels().reduce_inner[static_cast<int>(comb)][static_cast<int>(partial.dtype())];
    fin(yp, pp, 1, chunks);
    return;
  }
  cpu::parallel_for(O, std::max<int64_t>(1, cpu::kGrainSize / R), [&](int64_t b, int64_t e) {
    inner(yp + b * osz, xpnt + b * R * isz, e - b, R);
  });
}

namespace {

// x converted to d, its expanded dims (stride 0) kept expanded: only the distinct values are converted.
Tensor converted_keeping_expanded(const Tensor& x, Dtype d) {
  Shape small = x.sizes();
  bool any = false;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (expanded_dim(x, i)) small[i] = 1, any = true;
  if (!any) return cpu::converted(x, d);
  return broadcast_back(cpu::converted(make_view(x, small, x.strides(), x.storage_offset()), d), x.sizes());
}

void reduce_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  ReduceOp r = static_cast<ReduceOp>(op.code);
  Tensor x = in[0];
  if (a.size() > 2) {  // sum, nansum, mean: computed in their output dtype (dtype= or the default)
    const Dtype cd = out[0].dtype();
    if (x.dtype() != cd) x = converted_keeping_expanded(x, cd);
    if (r == ReduceOp::NanSum && is_integral(cd, true)) r = ReduceOp::Sum;  // no NaN in integers
  }
  cpu::reduce_into(r, out[0], x, mask_from_attrs(op, in[0], a), op.name);
}

void argred_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  bool is_max = op.code == 0;
  int64_t d = x.dim() > 0 ? wrap_dim(std::get<int64_t>(a[0]), x.dim(), op.name) : 0;
  Tensor xm = x.dim() > 0 ? contiguous_of(moved_last(x, d)) : make_view(x, {1}, {1}, x.storage_offset());
  int64_t R = xm.dim() > 0 ? xm.sizes().back() : 1;
  int64_t M = R ? xm.numel() / R : 0;
  Tensor vals = out[0], idx = out[1];
  visit_real(x.dtype(), op.name, [&]<class T>() {
    using M_ = opmath_t<T>;
    const T* p = static_cast<const T*>(xm.data_ptr());
    T* vp = static_cast<T*>(vals.data_ptr());
    int64_t* ip = static_cast<int64_t*>(idx.data_ptr());
    cpu::parallel_for(M, std::max<int64_t>(1, cpu::kGrainSize / std::max<int64_t>(R, 1)), [&](int64_t b, int64_t e) {
      for (int64_t m = b; m < e; ++m) {
        const T* row = p + m * R;
        int64_t best = 0;
        M_ bv = static_cast<M_>(row[0]);
        for (int64_t r = 1; r < R; ++r) {
          M_ v = static_cast<M_>(row[r]);
          if constexpr (std::is_floating_point_v<M_>) {
            if (std::isnan(bv)) break;
            if (std::isnan(v)) { bv = v; best = r; break; }
          }
          if (is_max ? v > bv : v < bv) { bv = v; best = r; }
        }
        vp[m] = row[best];
        ip[m] = best;
      }
    });
  });
}
// The float32 kernels of the selected ISA that softmax runs row by row: exp, the row sum and max, and
// x - s / x * s with a scalar s.
struct SoftmaxKernels {
  cpu::InnerLoop exp;
  cpu::ReduceInnerFn sum, max;
  cpu::InnerLoop sub, mul;
};
const SoftmaxKernels& kernels_for_softmax() {
  const auto& t = cpu::cpu_kernels();
  constexpr int f = static_cast<int>(kFloat32);
  static const SoftmaxKernels k{t.unary[static_cast<int>(cpu::UnaryOp::Exp)][f],
                                t.reduce_inner[static_cast<int>(ReduceOp::Sum)][f],
                                t.reduce_inner[static_cast<int>(ReduceOp::Max)][f],
                                t.binary[static_cast<int>(BinaryOp::Sub)][f], t.binary[static_cast<int>(BinaryOp::Mul)][f]};
  return k;
}
// dst[r] := a[r] op s for r < n (the ISA's binary loop with a broadcast second operand; alpha 1).
inline void with_scalar(cpu::InnerLoop op, float* dst, const float* a, float s, int64_t n) {
  char* d[3] = {reinterpret_cast<char*>(dst), reinterpret_cast<char*>(const_cast<float*>(a)), reinterpret_cast<char*>(&s)};
  const int64_t st[3] = {sizeof(float), sizeof(float), 0};
  cpu::KParams kp;
  kp.d[0] = 1, kp.i[0] = 1;
  op(d, st, n, &kp);
}

void softmax_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  Tensor x = in[0].dtype() != out[0].dtype() ? cpu::converted(in[0], out[0].dtype()) : contiguous_of(in[0]);  // dtype=
  Tensor& y = out[0];
  bool log = op.code == 1;
  int64_t d = wrap_dim(std::get<int64_t>(a[0]), x.dim(), op.name);
  int64_t O = 1, R = x.dim() ? x.sizes()[d] : 1, J = 1;
  for (int64_t i = 0; i < d; ++i) O *= x.sizes()[i];
  for (int64_t i = d + 1; i < x.dim(); ++i) J *= x.sizes()[i];
  if (x.numel() == 0) return;
  visit_floating(x.dtype(), op.name, [&]<class T>() {
    using A = opmath_t<T>;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* yp = static_cast<T*>(y.data_ptr());
    if (J == 1) {
      // last dim: rows are contiguous. float rows run through the ISA kernels (vector exp, cascaded
      // sum); the arithmetic around them is plain loops the compiler vectorises.
      const auto& K = kernels_for_softmax();
      cpu::parallel_for(O, std::max<int64_t>(1, cpu::kGrainSize / R), [&](int64_t b, int64_t e) {
        std::vector<A> buf(R), ex(log ? R : 0);
        for (int64_t o = b; o < e; ++o) {
          const T* row = xp + o * R;
          T* yr = yp + o * R;
          A mx = -std::numeric_limits<A>::infinity();
          if constexpr (std::is_same_v<T, float>) {  // the ISA's max (a NaN makes the row NaN either way)
            K.max(reinterpret_cast<char*>(&mx), reinterpret_cast<const char*>(row), 1, R);
          } else {
            for (int64_t r = 0; r < R; ++r) {
              A v = static_cast<A>(row[r]);
              mx = v > mx ? v : mx;
            }
          }
          if (std::isinf(mx) && mx < 0) mx = 0;
          if constexpr (std::is_same_v<T, float>) with_scalar(K.sub, buf.data(), row, mx, R);
          else
            for (int64_t r = 0; r < R; ++r) buf[r] = static_cast<A>(row[r]) - mx;
          A s;
          if constexpr (std::is_same_v<A, float>) {
            float* dst = log ? ex.data() : buf.data();
            char* d[2] = {reinterpret_cast<char*>(dst), reinterpret_cast<char*>(buf.data())};
            int64_t st[2] = {sizeof(float), sizeof(float)};
            cpu::KParams kp;
            K.exp(d, st, R, &kp);
            K.sum(reinterpret_cast<char*>(&s), reinterpret_cast<const char*>(dst), 1, R);
          } else {
            s = 0;
            for (int64_t r = 0; r < R; ++r) {
              A ev = std::exp(buf[r]);
              if (!log) buf[r] = ev;
              s += ev;
            }
          }
          if (log) {
            A ls = std::log(s);
            if constexpr (std::is_same_v<T, float>) with_scalar(K.sub, yr, buf.data(), ls, R);
            else
              for (int64_t r = 0; r < R; ++r) yr[r] = static_cast<T>(buf[r] - ls);
          } else {
            A inv = A(1) / s;
            if constexpr (std::is_same_v<T, float>) with_scalar(K.mul, yr, buf.data(), inv, R);
            else
              for (int64_t r = 0; r < R; ++r) yr[r] = static_cast<T>(buf[r] * inv);
          }
        }
      });
    } else {
      cpu::parallel_for(O * J, std::max<int64_t>(1, cpu::kGrainSize / R), [&](int64_t b, int64_t e) {
        // process (o, j-range) column blocks
        const auto& K = kernels_for_softmax();
        std::vector<A> mx, s, tmp;
        int64_t i = b;
        while (i < e) {
          int64_t o = i / J, j0 = i % J, jc = std::min(J - j0, e - i);
          mx.assign(jc, -std::numeric_limits<A>::infinity());
          s.assign(jc, A(0));
          const T* base = xp + o * R * J + j0;
          T* ybase = yp + o * R * J + j0;
          for (int64_t r = 0; r < R; ++r)
            for (int64_t j = 0; j < jc; ++j) mx[j] = std::max(mx[j], static_cast<A>(base[r * J + j]));
          for (int64_t j = 0; j < jc; ++j)
            if (std::isinf(mx[j]) && mx[j] < 0) mx[j] = 0;
          tmp.resize(jc);
          // exp of a row slice: the ISA's vector exp for float, std::exp otherwise
          auto exp_row = [&](A* v) {
            if constexpr (std::is_same_v<A, float>) {
              char* d[2] = {reinterpret_cast<char*>(v), reinterpret_cast<char*>(v)};
              int64_t st[2] = {sizeof(float), sizeof(float)};
              cpu::KParams kp;
              K.exp(d, st, jc, &kp);
            } else {
              for (int64_t j = 0; j < jc; ++j) v[j] = std::exp(v[j]);
            }
          };
          for (int64_t r = 0; r < R; ++r) {
            for (int64_t j = 0; j < jc; ++j) tmp[j] = static_cast<A>(base[r * J + j]) - mx[j];
            exp_row(tmp.data());
            for (int64_t j = 0; j < jc; ++j) s[j] += tmp[j];
          }
          for (int64_t j = 0; j < jc; ++j) s[j] = log ? std::log(s[j]) : A(1) / s[j];
          for (int64_t r = 0; r < R; ++r) {
            for (int64_t j = 0; j < jc; ++j) tmp[j] = static_cast<A>(base[r * J + j]) - mx[j];
            if (log) {
              for (int64_t j = 0; j < jc; ++j) ybase[r * J + j] = static_cast<T>(tmp[j] - s[j]);
            } else {
              exp_row(tmp.data());
              for (int64_t j = 0; j < jc; ++j) ybase[r * J + j] = static_cast<T>(tmp[j] * s[j]);
            }
          }
          i += jc;
        }
      });
    }
  });
}
void scan_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  // cumsum/cumprod compute in their output dtype (dtype= or the default)
  Tensor x = op.code <= 1 && in[0].dtype() != out[0].dtype() ? cpu::converted(in[0], out[0].dtype())
                                                              : contiguous_of(in[0]);
  int64_t d = x.dim() ? wrap_dim(std::get<int64_t>(a[0]), x.dim(), op.name) : 0;
  int64_t O = 1, R = x.dim() ? x.sizes()[d] : 1, J = 1;
  for (int64_t i = 0; i < d; ++i) O *= x.sizes()[i];
  for (int64_t i = d + 1; i < x.dim(); ++i) J *= x.sizes()[i];
  if (x.numel() == 0) return;
  int code = op.code;
  visit_numeric(x.dtype(), op.name, [&]<class T>() {
    using A = opmath_t<T>;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* yp = static_cast<T*>(out[0].data_ptr());
    int64_t* ip = code >= 3 ? static_cast<int64_t*>(out[1].data_ptr()) : nullptr;
    for (int64_t o = 0; o < O; ++o)
      for (int64_t j = 0; j < J; ++j) {
        const T* p = xp + o * R * J + j;
        T* q = yp + o * R * J + j;
        if (code == 0 || code == 1) {
          if constexpr (std::is_same_v<T, bool>) {
            raise_dtype_unsupported(op.name, kBool);
          } else {
            A acc = code == 0 ? A(0) : A(1);
            for (int64_t r = 0; r < R; ++r) {
              acc = code == 0 ? static_cast<A>(acc + static_cast<A>(p[r * J])) : static_cast<A>(acc * static_cast<A>(p[r * J]));
              q[r * J] = static_cast<T>(acc);
            }
          }
        } else if constexpr (is_float_v<T>) {
          if (code == 2) {
            A acc = -std::numeric_limits<A>::infinity();
            for (int64_t r = 0; r < R; ++r) {
              A v = static_cast<A>(p[r * J]);
              A mx = std::max(acc, v), mn = std::min(acc, v);
              if (std::isnan(v) || std::isnan(acc)) acc = std::numeric_limits<A>::quiet_NaN();
              else if (std::isinf(mx) && mx == mn) acc = mx;
              else acc = mx + std::log1p(std::exp(mn - mx));
              q[r * J] = static_cast<T>(acc);
            }
            continue;
          }
        }
        if constexpr (!is_complex_v<T>) {
          if (code >= 3) {
            A best = static_cast<A>(p[0]);
            int64_t bi = 0;
            for (int64_t r = 0; r < R; ++r) {
              A v = static_cast<A>(p[r * J]);
              bool take;
              if constexpr (std::is_floating_point_v<A>) {
                take = std::isnan(v) || (!std::isnan(best) && (code == 3 ? v >= best : v <= best));
              } else {
                take = code == 3 ? v >= best : v <= best;
              }
              if (take) { best = v; bi = r; }
              q[r * J] = static_cast<T>(best);
              ip[o * R * J + j + r * J] = bi;
            }
          }
        }
      }
  });
}
#define K_REDUCE(name, code) KernelRegistrar k_##name{#name, DeviceType::CPU, reduce_kernel};
KILN_REDUCE_OPS(K_REDUCE)
KILN_REDUCE_OPT_OPS(K_REDUCE)
#define K_REDUCE_DTYPE(name, code, schema_name, tags) K_REDUCE(name, code)
KILN_REDUCE_DTYPE_OPS(K_REDUCE_DTYPE)
#undef K_REDUCE_DTYPE
#undef K_REDUCE
KernelRegistrar k_max_dim{"max_dim", DeviceType::CPU, argred_kernel};

// trace: the diagonal as a strided view, summed in the output dtype; torch's dtype set
void trace_kernel(const OpDef& op, const TensorList& in, const Attrs&, TensorList& out) {
  const Tensor& x = in[0];
  const int64_t k = std::min(x.sizes()[0], x.sizes()[1]);
  Tensor d = make_view(x, {k}, {x.strides()[0] + x.strides()[1]}, x.storage_offset());
  if (d.dtype() != out[0].dtype()) d = cpu::converted(d, out[0].dtype());
  cpu::reduce_into(ReduceOp::Sum, out[0], d, {true}, op.name);
}
bool trace_supports(const OpDef&, Dtype d) { return d != kBool && !is_barebones_unsigned(d) && !is_float8(d); }
KernelRegistrar k_trace{"trace", DeviceType::CPU, trace_kernel, trace_supports};
KernelRegistrar k_min_dim{"min_dim", DeviceType::CPU, argred_kernel};
KernelRegistrar k_softmax{"softmax", DeviceType::CPU, softmax_kernel};
KernelRegistrar k_log_softmax{"log_softmax", DeviceType::CPU, softmax_kernel};
KernelRegistrar k_cumsum{"cumsum", DeviceType::CPU, scan_kernel};
KernelRegistrar k_cumprod{"cumprod", DeviceType::CPU, scan_kernel};
KernelRegistrar k_logcumsumexp{"logcumsumexp", DeviceType::CPU, scan_kernel};
KernelRegistrar k_cummax{"cummax", DeviceType::CPU, scan_kernel};
KernelRegistrar k_cummin{"cummin", DeviceType::CPU, scan_kernel};

}  // namespace
}  // namespace kiln
