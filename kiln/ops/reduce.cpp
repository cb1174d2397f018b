// Reductions: sum/prod/amax/amin/all/any and their composites (mean, var, std, norms, logsumexp),
// arg-reductions (max/min with indices, argmax, argmin), softmax and the cumulative scans.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kiln/autograd/function.h"
#include "kiln/backend/cpu/kernels.h"
#include "kiln/core/convert.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

using cpu::ReduceOp;

template <class T>  // Tensor or TensorSpec: only the rank is read
std::vector<bool> dim_mask(const T& x, const OptDims& dims, const char* op) {
  int64_t n = x.dim();
  std::vector<bool> m(n, false);
  if (!dims || dims->empty()) {
    std::fill(m.begin(), m.end(), true);
    return m;
  }
  for (int64_t d : *dims) {
    int64_t w = wrap_dim(d, n, op);
    if (n == 0) continue;
    KILN_CHECK(!m[w], Runtime, op, "dim ", w, " appears multiple times in the list of dims");
    m[w] = true;
  }
  return m;
}

SymShape reduced_shape(const TensorSpec& x, const std::vector<bool>& m, bool keepdim) {
  SymShape s;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (!m[i]) s.push_back(x.sizes()[i]);
    else if (keepdim) s.push_back(1);
  }
  return s;
}

// attrs: {dims (Shape), all (bool), keepdim (bool)}; the input is already in the compute dtype.
template <class T>
std::vector<bool> mask_from_attrs(const T& x, const Attrs& a, const char* op) {
  bool all = std::get<bool>(a[1]);
  return dim_mask(x, all ? OptDims{} : OptDims{std::get<Shape>(a[0])}, op);
}

Dtype reduce_out_dtype(ReduceOp r, Dtype in) {
  switch (r) {
    case ReduceOp::All: case ReduceOp::Any: return in == kUInt8 ? kUInt8 : kBool;
    case ReduceOp::SumAbs: case ReduceOp::SumSq: return to_real(in);
    default: return in;
  }
}

SpecList reduce_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  ReduceOp r = static_cast<ReduceOp>(op.code);
  auto m = mask_from_attrs(x, a, op.name);
  if ((r == ReduceOp::Max || r == ReduceOp::Min) && x.numel() == 0) {
    KILN_CHECK(!std::get<bool>(a[1]) || x.dim() == 0, Runtime, op.name, op.name,
               "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim "
               "with the 'dim' argument.");
    for (int64_t i = 0; i < x.dim(); ++i)
      KILN_CHECK(!(m[i] && x.sizes()[i] == 0), Index, op.name, op.name, "(): Expected reduction dim ", i,
                 " to have non-zero size.");
    KILN_CHECK(x.dim() > 0, Runtime, op.name, "Expected reduction dim to be specified for input.numel() == 0");
  }
  return {{reduced_shape(x, m, std::get<bool>(a[2])), reduce_out_dtype(r, x.dtype())}};
}

void reduce_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  ReduceOp r = static_cast<ReduceOp>(op.code);
  int ri = static_cast<int>(r), di = static_cast<int>(x.dtype());
  auto inner = cpu::cpu_kernels().reduce_inner[ri][di];
  auto outer = cpu::cpu_kernels().reduce_outer[ri][di];
  if (!inner) raise_dtype_unsupported(op.name, x.dtype());
  auto m = mask_from_attrs(x, a, op.name);
  int64_t n = x.dim();
  // kept dims first, then reduced dims
  Shape perm, kept_sizes;
  int64_t R = 1, O = 1;
  for (int64_t i = 0; i < n; ++i)
    if (!m[i]) perm.push_back(i), O *= x.sizes()[i];
  for (int64_t i = 0; i < n; ++i)
    if (m[i]) perm.push_back(i), R *= x.sizes()[i];
  char* yp = static_cast<char*>(y.data_ptr());
  if (y.numel() == 0) return;
  if (R == 0 || x.numel() == 0) {  // empty reduction: identity
    Scalar id = (r == ReduceOp::Prod || r == ReduceOp::All) ? Scalar(1)
                : r == ReduceOp::Mean ? Scalar(std::numeric_limits<double>::quiet_NaN()) : Scalar(0);
    fill_(y, id);
    return;
  }
  Tensor xp = permute(x, perm);
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
  if (!xp.is_contiguous()) xp = contiguous(xp);
  const char* xpnt = static_cast<const char*>(xp.data_ptr());
  size_t isz = x.itemsize(), osz = y.itemsize();
  if (O == 1 && R >= 2 * cpu::kGrainSize && nt > 1 && !is_reduced_float(x.dtype()) && r != ReduceOp::Mean &&
      r != ReduceOp::All && r != ReduceOp::Any) {
    // one long row: split it, reduce the partials
    int64_t chunks = std::min<int64_t>(nt, R / cpu::kGrainSize);
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

#define REDUCE_OP(name, code)                                                                  \
  OpDef op_##name{#name, kReduction, reduce_meta, {reduce_kernel, nullptr}, static_cast<int>(ReduceOp::code)}; \
  OpRegistrar reg_##name{op_##name, #name "(Tensor self, int[] dim, bool all_dims, bool keepdim) -> Tensor"};
REDUCE_OP(sum, Sum)
REDUCE_OP(prod, Prod)
REDUCE_OP(amax, Max)
REDUCE_OP(amin, Min)
REDUCE_OP(all, All)
REDUCE_OP(any, Any)
REDUCE_OP(norm_l1, SumAbs)
REDUCE_OP(norm_l2sq, SumSq)
REDUCE_OP(nansum, NanSum)
REDUCE_OP(mean, Mean)
#undef REDUCE_OP

Attrs rattrs(const OptDims& dims, bool keepdim) {
  return {dims.value_or(Shape{}), !dims.has_value() || dims->empty(), keepdim};
}

Dtype sum_dtype(Dtype d) { return is_integral(d, true) ? kInt64 : d; }

int64_t reduced_count(const Tensor& x, const OptDims& dims) {
  auto m = dim_mask(x, dims, "mean");
  int64_t c = 1;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (m[i]) c *= x.sizes()[i];
  return c;
}

// ---- arg reductions: max/min along a dim with indices ----------------------------------------------
SpecList argred_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  int64_t d = std::get<int64_t>(a[0]);
  bool keep = std::get<bool>(a[1]);
  SymShape s;
  if (x.dim() > 0) {
    d = wrap_dim(d, x.dim(), op.name);
    KILN_CHECK(x.sizes()[d] > 0, Index, op.name, op.name, "(): Expected reduction dim ", d,
               " to have non-zero size.");
    s = x.sizes();
    if (keep) s[d] = 1; else s.erase(s.begin() + d);
  } else {
    wrap_dim(d, 0, op.name);
  }
  return {{s, x.dtype()}, {s, kInt64}};
}

void argred_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  const Tensor& x = in[0];
  bool is_max = op.code == 0;
  int64_t d = x.dim() > 0 ? wrap_dim(std::get<int64_t>(a[0]), x.dim(), op.name) : 0;
  Tensor xm = x.dim() > 0 ? contiguous(movedim(x, {d}, {-1})) : reshape(x, {1});
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
OpDef op_max_dim{"max_dim", kReduction, argred_meta, {argred_kernel, nullptr}, 0};
OpRegistrar reg_max_dim{op_max_dim, "max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"};
OpDef op_min_dim{"min_dim", kReduction, argred_meta, {argred_kernel, nullptr}, 1};
OpRegistrar reg_min_dim{op_min_dim, "min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"};

// The float32 exp and sum kernels of the selected ISA, used row by row by softmax.
struct SoftmaxKernels {
  cpu::InnerLoop exp;
  cpu::ReduceInnerFn sum;
};
const SoftmaxKernels& kernels_for_softmax() {
  static const SoftmaxKernels k{
      cpu::cpu_kernels().unary[static_cast<int>(cpu::UnaryOp::Exp)][static_cast<int>(kFloat32)],
      cpu::cpu_kernels().reduce_inner[static_cast<int>(ReduceOp::Sum)][static_cast<int>(kFloat32)]};
  return k;
}

// ---- softmax / log_softmax over one dim: (outer, R, inner) on a contiguous input ----------------
SpecList softmax_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  wrap_dim(std::get<int64_t>(a[0]), x.dim(), op.name);
  KILN_CHECK(is_floating(x.dtype()) && !is_float8(x.dtype()), Runtime, op.name, "not implemented for dtype ",
             dtype_name(x.dtype()));
  return {{x.sizes(), x.dtype()}};
}

void softmax_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  Tensor x = contiguous(in[0]);
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
          for (int64_t r = 0; r < R; ++r) {
            A v = static_cast<A>(row[r]);
            mx = v > mx ? v : mx;
          }
          if (std::isinf(mx) && mx < 0) mx = 0;
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
            for (int64_t r = 0; r < R; ++r) yr[r] = static_cast<T>(buf[r] - ls);
          } else {
            A inv = A(1) / s;
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
OpDef op_softmax{"softmax", 0, softmax_meta, {softmax_kernel, nullptr}, 0};
OpRegistrar reg_softmax{op_softmax, "softmax.int(Tensor self, int dim) -> Tensor"};
OpDef op_log_softmax{"log_softmax", 0, softmax_meta, {softmax_kernel, nullptr}, 1};
OpRegistrar reg_log_softmax{op_log_softmax, "log_softmax.int(Tensor self, int dim) -> Tensor"};

// ---- cumulative scans: code 0 cumsum, 1 cumprod, 2 logcumsumexp, 3 cummax, 4 cummin ----------------
SpecList scan_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  const TensorSpec& x = in[0];
  wrap_dim(std::get<int64_t>(a[0]), x.dim(), op.name);
  if (op.code >= 3) return {{x.sizes(), x.dtype()}, {x.sizes(), kInt64}};
  return {{x.sizes(), x.dtype()}};
}

void scan_kernel(const OpDef& op, const TensorList& in, const Attrs& a, TensorList& out) {
  Tensor x = contiguous(in[0]);
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
OpDef op_cumsum{"cumsum", 0, scan_meta, {scan_kernel, nullptr}, 0};
OpRegistrar reg_cumsum{op_cumsum, "cumsum(Tensor self, int dim) -> Tensor"};
OpDef op_cumprod{"cumprod", 0, scan_meta, {scan_kernel, nullptr}, 1};
OpRegistrar reg_cumprod{op_cumprod, "cumprod(Tensor self, int dim) -> Tensor"};
OpDef op_logcumsumexp{"logcumsumexp", 0, scan_meta, {scan_kernel, nullptr}, 2};
OpRegistrar reg_logcumsumexp{op_logcumsumexp, "logcumsumexp(Tensor self, int dim) -> Tensor"};
OpDef op_cummax{"cummax", 0, scan_meta, {scan_kernel, nullptr}, 3};
OpRegistrar reg_cummax{op_cummax, "cummax(Tensor self, int dim) -> (Tensor values, Tensor indices)"};
OpDef op_cummin{"cummin", 0, scan_meta, {scan_kernel, nullptr}, 4};
OpRegistrar reg_cummin{op_cummin, "cummin(Tensor self, int dim) -> (Tensor values, Tensor indices)"};

Tensor reduce(const OpDef& op, const Tensor& x, const OptDims& dims, bool keepdim) {
  return dispatch1(op, {x}, rattrs(dims, keepdim));
}

}  // namespace

Tensor sum(const Tensor& x, OptDims dims, bool keepdim, std::optional<Dtype> dtype) {
  Dtype d = dtype.value_or(sum_dtype(x.dtype()));
  return reduce(op_sum, to_dtype(x, d), dims, keepdim);
}
Tensor nansum(const Tensor& x, OptDims dims, bool keepdim, std::optional<Dtype> dtype) {
  Dtype d = dtype.value_or(sum_dtype(x.dtype()));
  if (is_integral(d, true)) return sum(x, dims, keepdim, d);
  KILN_CHECK(!is_complex(d), Runtime, "nansum", "nansum does not support complex inputs");
  return reduce(op_nansum, to_dtype(x, d), dims, keepdim);
}
Tensor mean(const Tensor& x, OptDims dims, bool keepdim, std::optional<Dtype> dtype) {
  Dtype d = dtype.value_or(x.dtype());
  KILN_CHECK(is_floating(d) || is_complex(d), Runtime, "mean", "mean(): could not infer output dtype. "
             "Input dtype must be either a floating point or complex dtype. Got: ", dtype_name(d));
  return reduce(op_mean, to_dtype(x, d), dims, keepdim);
}
Tensor nanmean(const Tensor& x, OptDims dims, bool keepdim, std::optional<Dtype> dtype) {
  KILN_CHECK(is_floating(x.dtype()), Runtime, "nanmean", "nanmean(): expected input to have floating point "
             "dtype but got ", dtype_name(x.dtype()));
  Tensor cnt = sum(logical_not(isnan(x)), dims, keepdim);
  return true_divide(nansum(x, dims, keepdim, dtype), cnt).to(dtype.value_or(x.dtype()));
}
Tensor prod(const Tensor& x, std::optional<int64_t> dim, bool keepdim, std::optional<Dtype> dtype) {
  Dtype d = dtype.value_or(sum_dtype(x.dtype()));
  return reduce(op_prod, to_dtype(x, d), dim ? OptDims{Shape{*dim}} : OptDims{}, keepdim);
}
Tensor amax(const Tensor& x, OptDims dims, bool keepdim) { return reduce(op_amax, x, dims, keepdim); }
Tensor amin(const Tensor& x, OptDims dims, bool keepdim) { return reduce(op_amin, x, dims, keepdim); }
Tensor all(const Tensor& x, OptDims dims, bool keepdim) { return reduce(op_all, x, dims, keepdim); }
Tensor any(const Tensor& x, OptDims dims, bool keepdim) { return reduce(op_any, x, dims, keepdim); }
Tensor max(const Tensor& x) {
  KILN_CHECK(x.numel() > 0, Runtime, "max", "max(): Expected reduction dim to be specified for "
             "input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
  return amax(x);
}
Tensor min(const Tensor& x) {
  KILN_CHECK(x.numel() > 0, Runtime, "min", "min(): Expected reduction dim to be specified for "
             "input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
  return amin(x);
}
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  auto r = dispatch(op_max_dim, {x}, {dim, keepdim});
  return {r[0], r[1]};
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  auto r = dispatch(op_min_dim, {x}, {dim, keepdim});
  return {r[0], r[1]};
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  KILN_CHECK(x.dtype() != kBool, Runtime, "argmax", "argmax(): does not support bool input");
  if (!dim) {
    KILN_CHECK(x.numel() > 0, Runtime, "argmax", "argmax(): Expected reduction dim to be specified for "
               "input.numel() == 0.");
    Tensor i = std::get<1>(max(reshape(x, {-1}), 0, false));
    return keepdim ? reshape(i, Shape(x.dim(), 1)) : i;
  }
  return std::get<1>(max(x, *dim, keepdim));
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  KILN_CHECK(x.dtype() != kBool, Runtime, "argmin", "argmin(): does not support bool input");
  if (!dim) {
    KILN_CHECK(x.numel() > 0, Runtime, "argmin", "argmin(): Expected reduction dim to be specified for "
               "input.numel() == 0.");
    Tensor i = std::get<1>(min(reshape(x, {-1}), 0, false));
    return keepdim ? reshape(i, Shape(x.dim(), 1)) : i;
  }
  return std::get<1>(min(x, *dim, keepdim));
}
std::tuple<Tensor, Tensor> aminmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  OptDims d = dim ? OptDims{Shape{*dim}} : OptDims{};
  return {amin(x, d, keepdim), amax(x, d, keepdim)};
}

namespace {
// sqrt for std and the 2-norm: the same forward, but a zero result gets a zero gradient (torch's
// std_backward / norm_backward) instead of g / 0 * 0 = NaN.
struct NormSqrt : autograd::Function<NormSqrt> {
  static std::string name() { return "NormSqrt"; }
  static TensorList forward(autograd::AutogradContext* ctx, const TensorList& in) {
    Tensor y = sqrt(in[0]);
    ctx->save_for_backward({y});
    return {y};
  }
  static TensorList backward(autograd::AutogradContext* ctx, const TensorList& g) {
    Tensor y = ctx->get_saved_variables()[0];
    Tensor r = true_divide(g[0], mul(y, Scalar(2.0)));
    return {where(eq(y, Scalar(0)), zeros_like(r), r)};
  }
};
Tensor norm_sqrt(const Tensor& v) {
  return autograd::function_needs_record({v}) ? NormSqrt::apply({v})[0] : sqrt(v);
}

// var and mean in the compute dtype (float32 for half / bfloat16); callers round once at the end.
std::tuple<Tensor, Tensor> var_mean_acc(const Tensor& x, OptDims dims, double correction, bool keepdim) {
  KILN_CHECK(is_floating(x.dtype()) || is_complex(x.dtype()), Runtime, "var", "std and var only support "
             "floating point and complex dtypes");
  Dtype cd = is_reduced_float(x.dtype()) ? kFloat32 : x.dtype();
  Tensor xf = to_dtype(x, cd);
  int64_t n = reduced_count(x, dims);
  Tensor m = mean(xf, dims, true);
  Tensor dev = sub(xf, m);
  Tensor sq = is_complex(cd) ? reduce(op_norm_l2sq, dev, dims, keepdim) : sum(mul(dev, dev), dims, keepdim);
  double denom = std::max(0.0, static_cast<double>(n) - correction);
  Tensor v = true_divide(sq, Scalar(denom));
  Tensor mo = keepdim ? m : (dims && !dims->empty() ? squeeze(m, *dims) : reshape(m, {}));
  return {v, mo};
}
}  // namespace

std::tuple<Tensor, Tensor> var_mean(const Tensor& x, OptDims dims, double correction, bool keepdim) {
  auto [v, m] = var_mean_acc(x, dims, correction, keepdim);
  return {to_dtype(v, to_real(x.dtype())), to_dtype(m, x.dtype())};
}
Tensor var(const Tensor& x, OptDims dims, double correction, bool keepdim) {
  return std::get<0>(var_mean(x, dims, correction, keepdim));
}
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, OptDims dims, double correction, bool keepdim) {
  auto [v, m] = var_mean_acc(x, dims, correction, keepdim);
  return {to_dtype(norm_sqrt(v), to_real(x.dtype())), to_dtype(m, x.dtype())};
}
Tensor std(const Tensor& x, OptDims dims, double correction, bool keepdim) {
  return std::get<0>(std_mean(x, dims, correction, keepdim));
}

Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim) {
  Tensor xf = is_integral(x.dtype(), true) ? to_dtype(x, default_dtype()) : x;
  if (xf.numel() == 0) return log(sum(exp(xf), dims, keepdim));
  Tensor m = amax(xf, dims, true);
  Tensor mz = where(isinf(m), zeros_like(m), m);
  Tensor r = add(log(sum(exp(sub(xf, mz)), dims, true)), mz);
  return keepdim ? r : (dims.empty() ? reshape(r, {}) : squeeze(r, dims));
}

Tensor vector_norm(const Tensor& x, double ord, OptDims dims, bool keepdim, std::optional<Dtype> dtype) {
  Tensor xf = dtype ? to_dtype(x, *dtype) : x;
  KILN_CHECK(is_floating(xf.dtype()) || is_complex(xf.dtype()), Runtime, "linalg.vector_norm",
             "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ",
             dtype_name(xf.dtype()));
  if (ord == 2) return norm_sqrt(reduce(op_norm_l2sq, xf, dims, keepdim));
  if (ord == 1) return reduce(op_norm_l1, xf, dims, keepdim);
  if (std::isinf(ord)) {
    KILN_CHECK(xf.numel() > 0 || ord > 0, Runtime, "linalg.vector_norm", "linalg.vector_norm cannot compute "
               "the -inf norm on an empty tensor because the operation does not have an identity");
    Tensor a = abs(xf);
    if (xf.numel() == 0) return sum(a, dims, keepdim);
    return ord > 0 ? amax(a, dims, keepdim) : amin(a, dims, keepdim);
  }
  if (ord == 0) return to_dtype(sum(ne(xf, Scalar(0)), dims, keepdim), to_real(xf.dtype()));
  Tensor a = abs(xf);
  return pow(sum(pow(a, Scalar(ord)), dims, keepdim), Scalar(1.0 / ord));
}

Tensor count_nonzero(const Tensor& x, OptDims dims) { return sum(ne(x, Scalar(0)), dims, false); }

Tensor softmax(const Tensor& x, int64_t dim, std::optional<Dtype> dtype) {
  return dispatch1(op_softmax, {dtype ? to_dtype(x, *dtype) : x}, {dim});
}
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<Dtype> dtype) {
  return dispatch1(op_log_softmax, {dtype ? to_dtype(x, *dtype) : x}, {dim});
}
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<Dtype> dtype) {
  return dispatch1(op_cumsum, {to_dtype(x, dtype.value_or(sum_dtype(x.dtype())))}, {dim});
}
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<Dtype> dtype) {
  return dispatch1(op_cumprod, {to_dtype(x, dtype.value_or(sum_dtype(x.dtype())))}, {dim});
}
Tensor logcumsumexp(const Tensor& x, int64_t dim) {
  KILN_CHECK(is_floating(x.dtype()), Runtime, "logcumsumexp", "not implemented for dtype ", dtype_name(x.dtype()));
  return dispatch1(op_logcumsumexp, {x}, {dim});
}
std::tuple<Tensor, Tensor> cummax(const Tensor& x, int64_t dim) {
  auto r = dispatch(op_cummax, {x}, {dim});
  return {r[0], r[1]};
}
std::tuple<Tensor, Tensor> cummin(const Tensor& x, int64_t dim) {
  auto r = dispatch(op_cummin, {x}, {dim});
  return {r[0], r[1]};
}

Tensor Tensor::sum() const { return kiln::sum(*this); }
Tensor Tensor::mean() const { return kiln::mean(*this); }

}  // namespace kiln
