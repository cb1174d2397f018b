// Random ops on the counter-based generator (Philox; the fills are kernels_random.cpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "kiln/core/convert.h"
#include "kiln/core/finfo.h"
#include "kiln/core/warning.h"
#include "kiln/core/generator.h"
#include "kiln/func/vmap.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/sort.h"
#include "kiln/core/stream.h"

namespace kiln {

thread_local void (*detail::reserve_hook)(Generator*, uint64_t, uint64_t, uint64_t) = nullptr;

Generator& default_generator() {
  static Generator* g = new Generator();
  return *g;
}
void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

namespace {

constexpr int kUniform = static_cast<int>(RandomDist::Uniform), kNormal = static_cast<int>(RandomDist::Normal),
              kExponential = static_cast<int>(RandomDist::Exponential),
              kLogNormal = static_cast<int>(RandomDist::LogNormal), kGeometric = static_cast<int>(RandomDist::Geometric),
              kCauchy = static_cast<int>(RandomDist::Cauchy), kRandint = static_cast<int>(RandomDist::Randint),
              kFromTo = static_cast<int>(RandomDist::FromTo);

// The table op every random function reduces to: fills its input (in place) with draws of one
// distribution. attrs {dist, p0, p1, key, first counter}: the generator's state is reserved by the
// front end and passed in, so the kernel is a pure function of its attributes (a recorded call
// replays the same numbers); which counters an element uses: kernels.h, RandomFn.
SpecList random_meta(const OpDef&, const SpecList& in, const Attrs&) { return {{in[0].sizes(), in[0].dtype()}}; }

OpDef op_random_fill{"random_fill_", kRandom, random_meta, {}};  // kernel: backend/cpu/random.cpp
OpRegistrar reg_random_fill{op_random_fill,
                              "random_fill_(Tensor(a!) self, int dist, float p0, float p1, int key, int first, int lo=0, "
                              "int hi=0) -> Tensor(a!)"};
// The values do not depend on the tensor's old ones: no gradient flows through (zeros, as torch).
TensorList random_backward(const GradCtx&, const TensorList& g) { return {zeros_like(g[0])}; }
DerivativeRegistrar d_random_fill{op_random_fill, random_backward, 0, 0};

// lo / hi: FromTo's integer bounds (the other distributions read p0 / p1)
void random_fill(const Tensor& t, int dist, double p0, double p1, Generator* gen, int64_t lo = 0, int64_t hi = 0) {
  Generator& g = gen ? *gen : default_generator();
  auto [key, start] = g.reserve(static_cast<uint64_t>(t.numel()));
  dispatch_inplace(op_random_fill, t, {t},
                   {static_cast<int64_t>(dist), p0, p1, static_cast<int64_t>(key), static_cast<int64_t>(start), lo, hi});
}

// rand / randn's tensor: floating or complex (torch draws a complex tensor's real and imaginary parts
// as two elements of its real dtype)
Tensor float_tensor(const Shape& size, TensorOptions o, const char* op) {
  Dtype d = o.dtype_or_default();
  KILN_CHECK((is_floating(d) && !is_float8(d)) || is_complex(d), NotImplemented, op, op,
             " expects a floating point or complex dtype, got ", dtype_name(d));
  return make_tensor(size, d, o.device_);
}

// A complex tensor's parts as a real tensor (view_as_real), others as they are: what uniform and
// normal draws fill.
Tensor parts_of(const Tensor& t) { return is_complex(t.dtype()) ? view_as_real(t) : t; }

// The fills of a continuous distribution refuse integral and bool tensors, as torch's: NotImplementedError
// (its uniform_, normal_ and log_normal_ kernels lack those dtypes) or RuntimeError (cauchy_, exponential_).
// Only uniform_ and normal_ take a complex tensor (complex_ok): log_normal_ raises NotImplementedError
// there, cauchy_ and exponential_ RuntimeError, as torch's.
void check_continuous(const Tensor& t, const char* op, bool not_implemented, bool complex_ok = false) {
  const Dtype d = t.dtype();
  if (is_complex(d) && !complex_ok) {
    if (not_implemented) raise_dtype_unsupported(op, d);
  } else if (!is_integral(d, true)) {
    return;
  }
  if (not_implemented)
    KILN_FAIL(NotImplemented, op, op, " expects a floating point tensor, got ", dtype_name(d));
  KILN_FAIL(Runtime, op, op, " draws from a continuous probability distribution: dtype must be a floating point "
            "but you specified ", dtype_name(d));
}

// bernoulli_'s tensor (torch's bernoulli_scalar / bernoulli_tensor kernels): bool, integral or floating
void check_bernoulli_self(const Tensor& t, const char* op) {
  const Dtype d = t.dtype();
  if (is_complex(d) || is_float8(d)) raise_dtype_unsupported(op, d);
}

}  // namespace

Tensor rand(const Shape& size, TensorOptions o, Generator* g) {
  Tensor t = float_tensor(size, o, "rand");
  random_fill(parts_of(t), kUniform, 0.0, 1.0, g);
  return t;
}
// complex: each part N(0, 1/2), so that E|z|^2 = 1 (torch's)
Tensor randn(const Shape& size, TensorOptions o, Generator* g) {
  Tensor t = float_tensor(size, o, "randn");
  random_fill(parts_of(t), kNormal, 0.0, is_complex(t.dtype()) ? std::sqrt(0.5) : 1.0, g);
  return t;
}
Tensor randint(int64_t low, int64_t high, const Shape& size, TensorOptions o, Generator* g) {
  KILN_CHECK(high > low, Runtime, "randint", "random_ expects 'from' to be less than 'to', but got from=", low,
             " >= to=", high);
  Tensor t = make_tensor(size, o.dtype_ == Dtype::Undefined ? kInt64 : o.dtype_, o.device_);
  random_fill(t, kRandint, static_cast<double>(low), static_cast<double>(high), g);
  return t;
}
Tensor randperm(int64_t n, TensorOptions o, Generator* g) {
  KILN_CHECK(n >= 0, Runtime, "randperm", "n must be non-negative, got", n);
  if (o.device_.type != DeviceType::CPU)  // meta (or a device without a backend, which raises there)
    return empty({n}, TensorOptions(o.dtype_ == Dtype::Undefined ? kInt64 : o.dtype_).device(o.device_));
  // random keys, then a stable argsort: a permutation that depends only on the seed, made of
  // kernels (a graph capture records both, so each replay draws a fresh permutation)
  Tensor keys = make_tensor({n}, kInt64);
  random_fill(keys, kRandint, 0.0, 9.0e15, g);
  Tensor out = argsort(keys, 0, false, true);
  return o.dtype_ == Dtype::Undefined || o.dtype_ == kInt64 ? out : to_dtype(out, o.dtype_);
}

// complex: each part uniform on [from, to)
// ---- Tensor.random_ (torch's random_from_to): its bounds are moved to integers the floating dtype
// holds (update_from / update_to), then checked against the dtype's range.
namespace {
int digits_of(Dtype d) { return 1 - std::ilogb(finfo_eps(d)); }  // (float32 24, float64 53, float16 11, bfloat16 8)

// v rounded to the floating dtype d and back, as torch's static_cast<int64_t>(static_cast<scalar_t>(v))
// does on x86-64 (int64 -> float, then float -> float16 / bfloat16: two roundings; a value past
// int64's range reads as INT64_MIN there).
int64_t through_dtype(Dtype d, int64_t v) {
  double r = d == kFloat64 ? static_cast<double>(v) : static_cast<double>(static_cast<float>(v));
  if (d == kFloat16) r = static_cast<float>(Half(static_cast<float>(r)));
  if (d == kBFloat16) r = static_cast<float>(BFloat16(static_cast<float>(r)));
  return r >= 9223372036854775808.0 || r < -9223372036854775808.0 ? INT64_MIN : static_cast<int64_t>(r);
}
int64_t update_from(Dtype d, int64_t from) {  // the lowest integer >= from that d holds (about)
  if (from == INT64_MAX) return from;
  const int64_t up = through_dtype(d, from + 1);
  if (up < from) {
    int64_t f = from + 1 < 0 ? -(from + 1) : from + 1;
    int n = 0;
    while (f >>= 1) ++n;
    from = up + (int64_t(1) << (n - digits_of(d) + 1));
  }
  return from;
}
int64_t update_to(Dtype d, int64_t to) {  // one past the highest integer < to that d holds (about)
  const int64_t down = through_dtype(d, to - 1);
  if (down >= to) {
    int64_t t = to - 1 < 0 ? -(to - 1) : to - 1;
    int n = 0;
    while (t >>= 1) ++n;
    to = down - (int64_t(1) << (n - digits_of(d) + 1));
  }
  return to;
}
int64_t integral_max(Dtype d) {
  switch (d) {
    case kBool: return 1;
    case kUInt8: return 255;
    case kInt8: return 127;
    case kInt16: return 32767;
    case kInt32: return 2147483647;
    case kUInt16: return 65535;
    case kUInt32: return 4294967295;
    default: return INT64_MAX;  // (int64; uint64's values up to it)
  }
}
int64_t integral_min(Dtype d) {
  switch (d) {
    case kBool: case kUInt8: case kUInt16: case kUInt32: case kUInt64: return 0;
    case kInt8: return -128;
    case kInt16: return -32768;
    case kInt32: return -2147483647 - 1;
    default: return INT64_MIN;
  }
}
// torch's check_from_to_in_range: both ends within the dtype's range; a floating dtype warns past
// +-2^digits, where not every integer is held
void check_random_bounds(Dtype d, int64_t from, int64_t to_inc) {
  const char* op = "random_";
  if (is_floating(d)) {
    const double max = -finfo_min(d);
    KILN_CHECK(double(from) >= -max && double(from) <= max, Runtime, op, "from is out of bounds for ", dtype_name(d));
    KILN_CHECK(double(to_inc) >= -max && double(to_inc) <= max, Runtime, op, "to - 1 is out of bounds for ",
               dtype_name(d));
    const int digits = digits_of(d);
    const int64_t lim = int64_t(1) << digits;
    for (auto [v, name] : {std::pair{from, "from"}, std::pair{to_inc, "to - 1"}})
      if (v < -lim || v > lim)
        warn(WarningKind::User, std::string(name) + " is out of bounds [-(2^" + std::to_string(digits) + "), 2^" +
                                    std::to_string(digits) + "]. Due to precision limitations " + std::string(dtype_name(d)) +
                                    " can support discrete uniform distribution only within this range.");
    return;
  }
  KILN_CHECK(from >= integral_min(d) && from <= integral_max(d), Runtime, op, "from is out of bounds for ",
             dtype_name(d));
  KILN_CHECK(to_inc >= integral_min(d) && to_inc <= integral_max(d), Runtime, op, "to - 1 is out of bounds for ",
             dtype_name(d));
}
}  // namespace

const Tensor& random_(const Tensor& t, int64_t from, std::optional<int64_t> to, Generator* g) {
  const char* op = "random_";
  const Dtype d = t.dtype();
  if (is_float8(d)) raise_dtype_unsupported(op, d);
  KILN_CHECK(!is_complex(d), Runtime, op, "random_ handles only integral, floating-point and boolean types, got ",
             dtype_name(d));
  const bool fp = is_floating(d);
  int64_t to_inc = 0;  // [from, to_inc]
  if (to) {
    int64_t hi = *to;
    KILN_CHECK(from < hi, Runtime, op, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", hi);
    if (fp) {
      from = update_from(d, from), hi = update_to(d, hi);
      KILN_CHECK(from < hi, Runtime, op, "random_ expects 'from' casted to dtype to be less than 'to' casted to dtype, "
                 "but got from=", from, " >= to=", hi);
    }
    to_inc = hi - 1;
    check_random_bounds(d, from, to_inc);
  } else if (from != INT64_MIN) {
    // (uint64: its maximum read as int64, -1, which the bounds refuse, as torch's)
    to_inc = fp ? int64_t(1) << digits_of(d) : d == kUInt64 ? -1 : integral_max(d);
    if (fp) {
      from = update_from(d, from);
      KILN_CHECK(from < to_inc, Runtime, op, "random_ expects 'from' casted to dtype to be less than or equal to "
                 "'to_inc' casted to dtype, but got from=", from, " > to_inc=", to_inc);
    }
    check_random_bounds(d, from, to_inc);
  } else {  // from INT64_MIN and no to: every int64 value (the span 2^64), for the dtypes torch takes
    if (d == kInt8 || d == kInt16 || d == kInt32 || d == kUInt8)
      KILN_FAIL(Runtime, op, "random_full_64_bits_range_kernel_cpu handles only int64, double, float and bfloat16");
    if (d != kInt64 && d != kFloat32 && d != kFloat64 && d != kBFloat16) raise_dtype_unsupported(op, d);
    to_inc = INT64_MAX;
  }
  if (t.numel() == 0) return t;
  random_fill(t, kFromTo, static_cast<double>(from), static_cast<double>(to_inc), g, from, to_inc);
  return t;
}
const Tensor& random_(const Tensor& t, Generator* g) {
  const Dtype d = t.dtype();
  if (is_complex(d) || is_float8(d) || d == kUInt16 || d == kUInt32 || d == kUInt64) raise_dtype_unsupported("random_", d);
  return random_(t, 0, std::nullopt, g);
}

const Tensor& uniform_(const Tensor& t, double from, double to, Generator* g) {
  check_continuous(t, "uniform_", true, true);
  KILN_CHECK(from <= to, Runtime, "uniform_", "uniform_ expects to return a [from, to) range, but found from=", from,
             " > to=", to);
  random_fill(parts_of(t), kUniform, from, to, g);
  return t;
}
// complex: each part N(mean, std^2 / 2) (torch's: the mean on both parts)
const Tensor& normal_(const Tensor& t, double mean, double std, Generator* g) {
  check_continuous(t, "normal_", true, true);
  KILN_CHECK(std >= 0, Runtime, "normal_", "normal expects std >= 0.0, but found std ", std);
  random_fill(parts_of(t), kNormal, mean, is_complex(t.dtype()) ? std * std::sqrt(0.5) : std, g);
  return t;
}
const Tensor& exponential_(const Tensor& t, double lambd, Generator* g) {
  check_continuous(t, "exponential_", false);
  KILN_CHECK(lambd > 0, Runtime, "exponential_", "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  random_fill(t, kExponential, lambd, 0, g);
  return t;
}
const Tensor& log_normal_(const Tensor& t, double mean, double std, Generator* g) {
  check_continuous(t, "log_normal_", true);
  KILN_CHECK(std > 0, Runtime, "log_normal_", "log_normal_ expects std > 0.0, but found std=", std);
  random_fill(t, kLogNormal, mean, std, g);
  return t;
}
const Tensor& geometric_(const Tensor& t, double p, Generator* g) {
  if (is_complex(t.dtype())) raise_dtype_unsupported("geometric_", t.dtype());
  KILN_CHECK(p > 0 && p < 1, Runtime, "geometric_", "geometric_ expects p to be in (0, 1), but got p=", p);
  random_fill(t, kGeometric, p, 0, g);
  return t;
}
const Tensor& cauchy_(const Tensor& t, double median, double sigma, Generator* g) {
  check_continuous(t, "cauchy_", false);
  KILN_CHECK(sigma > 0, Runtime, "cauchy_", "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  random_fill(t, kCauchy, median, sigma, g);
  return t;
}
Tensor bernoulli(const Tensor& p, Generator* g) {
  KILN_CHECK(is_floating(p.dtype()), Runtime, "bernoulli", "bernoulli expects a floating point tensor of "
             "probabilities, got ", dtype_name(p.dtype()));
  if (!p.is_meta() && p.numel() > 0)
    KILN_CHECK(all(ge(p, Scalar(0))).item<bool>() && all(le(p, Scalar(1))).item<bool>(), Runtime, "bernoulli",
               "Expected p_in >= 0 && p_in <= 1 to be true, but got false (every probability must be in [0, 1])");
  Tensor u = make_tensor(p.sizes(), kFloat64, p.device());
  random_fill(u, kUniform, 0.0, 1.0, g);
  return to_dtype(lt(u, to_dtype(p, kFloat64)), p.dtype());
}
Tensor bernoulli(const Tensor& self, double p, Generator* g) {
  KILN_CHECK(p >= 0 && p <= 1, Runtime, "bernoulli_", "bernoulli_ expects p to be in [0, 1], but got p=", p);
  check_bernoulli_self(self, "bernoulli_");
  Tensor u = make_tensor(self.sizes(), kFloat64, self.device());
  random_fill(u, kUniform, 0.0, 1.0, g);
  return to_dtype(lt(u, Scalar(p)), self.dtype());
}
const Tensor& bernoulli_(const Tensor& self, double p, Generator* g) { return copy_(self, bernoulli(self, p, g)); }
const Tensor& bernoulli_(const Tensor& self, const Tensor& p, Generator* g) {
  check_bernoulli_self(self, "bernoulli_");
  return copy_(self, bernoulli(expand(p, self.sizes()), g));
}
Tensor multinomial(const Tensor& probs, int64_t n, bool replacement, Generator* g) {
  KILN_CHECK(probs.dim() == 1 || probs.dim() == 2, Runtime, "multinomial", "prob_dist must be 1 or 2 dim");
  KILN_CHECK(is_floating(probs.dtype()), Runtime, "multinomial", "multinomial only supports floating-point "
             "dtypes for input, got: ", dtype_name(probs.dtype()));
  Tensor P = contiguous(to_dtype(probs.dim() == 1 ? unsqueeze(probs, 0) : probs, kFloat64));
  func::check_data_read(P, "multinomial's probabilities");  // (computed outside the ops: vmap cannot batch it)
  int64_t rows = P.sizes()[0], cats = P.sizes()[1];
  KILN_CHECK(n > 0, Runtime, "multinomial", "cannot sample n_sample <= 0 samples");
  KILN_CHECK(replacement || n <= cats, Runtime, "multinomial", "cannot sample n_sample > prob_dist.size(-1) "
             "samples without replacement");
  if (probs.is_meta()) return empty(probs.dim() == 1 ? Shape{n} : Shape{rows, n}, TensorOptions(kInt64).device(kMeta));
  Tensor out = make_tensor({rows, n}, kInt64);
  Tensor u = make_tensor({rows, n}, kFloat64);
  random_fill(u, kUniform, 0.0, 1.0, g);
  stream_detail::before_host_read();
  const double* pp = static_cast<const double*>(P.data_ptr());
  const double* up = static_cast<const double*>(u.data_ptr());
  int64_t* op = static_cast<int64_t*>(out.data_ptr());
  std::vector<double> cum(static_cast<size_t>(cats));
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = pp + r * cats;
    bool ok = true;
    for (int64_t c = 0; c < cats; ++c) ok &= std::isfinite(row[c]) && row[c] >= 0;
    KILN_CHECK(ok, Runtime, "multinomial", "probability tensor contains either `inf`, `nan` or element < 0");
    if (replacement) {  // one cumulative sum, then a binary search a draw
      double total = 0;
      int64_t last = 0;  // the last category of positive weight
      for (int64_t c = 0; c < cats; ++c) {
        total += row[c];
        cum[c] = total;
        last = row[c] > 0 ? c : last;
      }
      KILN_CHECK(total > 0, Runtime, "multinomial", "invalid multinomial distribution (sum of probabilities <= 0)");
      for (int64_t s = 0; s < n; ++s) {
        // upper_bound (the first c with cum[c] > target) by halving a window [lo, lo + len) that
        // holds it, stepping by a mask: GCC made a branch of a ternary, mispredicted half the time
        const double target = up[r * n + s] * total;
        const double* cp = cum.data();
        int64_t lo = 0, len = cats;
        while (len > 1) {
          const int64_t half = len / 2;
          lo += half & -static_cast<int64_t>(cp[lo + half - 1] <= target);
          len -= half;
        }
        const int64_t pick = lo + static_cast<int64_t>(cp[lo] <= target);
        op[r * n + s] = pick < cats ? pick : last;  // (cum[pick] > target: its weight is positive)
      }
      continue;
    }
    std::vector<double> w(row, row + cats);
    for (int64_t s = 0; s < n; ++s) {
      double total = 0;
      for (double x : w) total += x;
      KILN_CHECK(total > 0, Runtime, "multinomial", "invalid multinomial distribution (sum of probabilities <= 0)");
      double target = up[r * n + s] * total, acc = 0;
      int64_t pick = cats - 1;
      for (int64_t c = 0; c < cats; ++c) {
        acc += w[c];
        if (target < acc && w[c] > 0) { pick = c; break; }
      }
      while (w[pick] <= 0 && pick > 0) --pick;
      op[r * n + s] = pick;
      w[pick] = 0;
    }
  }
  return probs.dim() == 1 ? reshape(out, {n}) : out;
}


// ---- composites with torch's schemas (ops/composite.h): their public forms come from these -------
namespace {
#define KILN_RANDOM_KW "*, Generator? generator=None, ScalarType? dtype=None, Device? device=None, bool requires_grad=False"
// the keyword tail from attribute i on: generator, dtype, device, requires_grad
TensorOptions options_from(const Attrs& a, size_t i) { return options_attr(a, i + 1); }
TensorList finished(const Tensor& t, const Attrs& a, size_t i) { return factory_result(t, a, i + 3); }
Composite c_rand{"rand(SymInt[] size, " KILN_RANDOM_KW ") -> Tensor",
                 [](const TensorList&, const Attrs& a) -> TensorList {
                   return finished(rand(attr<Shape>(a, 0), options_from(a, 1), generator_attr(a, 1)), a, 1);
                 },
                 kFunctionVariant};
Composite c_randn{"randn(SymInt[] size, " KILN_RANDOM_KW ") -> Tensor",
                  [](const TensorList&, const Attrs& a) -> TensorList {
                    return finished(randn(attr<Shape>(a, 0), options_from(a, 1), generator_attr(a, 1)), a, 1);
                  },
                  kFunctionVariant};
// randint(high, size) and randint(low, high, size)
Composite c_randint{"randint(SymInt high, SymInt[] size, " KILN_RANDOM_KW ") -> Tensor",
                    [](const TensorList&, const Attrs& a) -> TensorList {
                      return finished(randint(0, attr<int64_t>(a, 0), attr<Shape>(a, 1), options_from(a, 2),
                                              generator_attr(a, 2)), a, 2);
                    },
                    kFunctionVariant};
Composite c_randint_low{"randint.low(SymInt low, SymInt high, SymInt[] size, " KILN_RANDOM_KW ") -> Tensor",
                        [](const TensorList&, const Attrs& a) -> TensorList {
                          return finished(randint(attr<int64_t>(a, 0), attr<int64_t>(a, 1), attr<Shape>(a, 2),
                                                  options_from(a, 3), generator_attr(a, 3)), a, 3);
                        },
                        kFunctionVariant};
Composite c_randperm{"randperm(SymInt n, " KILN_RANDOM_KW ") -> Tensor",
                     [](const TensorList&, const Attrs& a) -> TensorList {
                       return finished(randperm(attr<int64_t>(a, 0), options_from(a, 1), generator_attr(a, 1)), a, 1);
                     },
                     kFunctionVariant};
Composite c_normal_ff{"normal.float_float(float mean, float std, SymInt[] size, " KILN_RANDOM_KW ") -> Tensor",
                   [](const TensorList&, const Attrs& a) -> TensorList {
                     Tensor t = empty(attr<Shape>(a, 2), options_from(a, 3));
                     normal_(t, attr<double>(a, 0), attr<double>(a, 1), generator_attr(a, 3));
                     return finished(t, a, 3);
                   },
                   kFunctionVariant};
#undef KILN_RANDOM_KW
// out= without dtype=: drawn in out's dtype, as torch's
CompositeTags t_rand{c_rand, kDtypeFromOut}, t_randn{c_randn, kDtypeFromOut}, t_randint{c_randint, kDtypeFromOut},
    t_randint_low{c_randint_low, kDtypeFromOut}, t_randperm{c_randperm, kDtypeFromOut},
    t_normal_ff{c_normal_ff, kDtypeFromOut};
Composite c_rand_like{"rand_like(Tensor self, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor",
                      [](const TensorList& in, const Attrs& a) -> TensorList {
                        return factory_result(rand(in[0].sizes(), like_options_attr(in[0], a, 0)), a, 2);
                      },
                      kFunctionVariant};
Composite c_randn_like{"randn_like(Tensor self, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor",
                       [](const TensorList& in, const Attrs& a) -> TensorList {
                         return factory_result(randn(in[0].sizes(), like_options_attr(in[0], a, 0)), a, 2);
                       },
                       kFunctionVariant};
// The in-place fills (Tensor.uniform_, ...): in place only, as torch has them
#define KILN_FILL(name, schema_args, call)                                                                   \
  Composite c_##name{#name "(Tensor self, " schema_args ", *, Generator? generator=None) -> Tensor",             \
                     [](const TensorList& in, const Attrs& a) -> TensorList {                                   \
                       Tensor t = empty_like(in[0]);                                                            \
                       const Tensor& x = t;                                                                     \
                       (void)x;                                                                                 \
                       return {call};                                                                           \
                     },                                                                                         \
                     kInplaceVariant, 0,                                                                        \
                     [](const TensorList& in, const Attrs& a) -> TensorList {                                   \
                       const Tensor& x = in[0];                                                                 \
                       return {call};                                                                           \
                     }};
KILN_FILL(uniform, "float from=0, float to=1", uniform_(x, attr<double>(a, 0), attr<double>(a, 1), generator_attr(a, 2)))
KILN_FILL(normal, "float mean=0, float std=1", normal_(x, attr<double>(a, 0), attr<double>(a, 1), generator_attr(a, 2)))
KILN_FILL(log_normal, "float mean=1, float std=2",
          log_normal_(x, attr<double>(a, 0), attr<double>(a, 1), generator_attr(a, 2)))
KILN_FILL(cauchy, "float median=0, float sigma=1", cauchy_(x, attr<double>(a, 0), attr<double>(a, 1), generator_attr(a, 2)))
KILN_FILL(exponential, "float lambd=1", exponential_(x, attr<double>(a, 0), generator_attr(a, 1)))
KILN_FILL(geometric, "float p", geometric_(x, attr<double>(a, 0), generator_attr(a, 1)))
#undef KILN_FILL
// Tensor.random_(), random_(to), random_(from, to): in place only, as torch has it
#define KILN_RANDOM_FILL(name, schema_args, call)                                                            \
  Composite c_##name{schema_args, [](const TensorList& in, const Attrs& a) -> TensorList {                   \
                       Tensor t = empty_like(in[0]);                                                        \
                       const Tensor& x = t;                                                                 \
                       return {call};                                                                       \
                     },                                                                                     \
                     kInplaceVariant, 0, [](const TensorList& in, const Attrs& a) -> TensorList {           \
                       const Tensor& x = in[0];                                                             \
                       return {call};                                                                       \
                     }};
KILN_RANDOM_FILL(random, "random(Tensor self, *, Generator? generator=None) -> Tensor", random_(x, generator_attr(a, 0)))
KILN_RANDOM_FILL(random_to, "random.to(Tensor self, int to, *, Generator? generator=None) -> Tensor",
                 random_(x, 0, attr<int64_t>(a, 0), generator_attr(a, 1)))
KILN_RANDOM_FILL(random_from, "random.from(Tensor self, int from, int? to, *, Generator? generator=None) -> Tensor",
                 random_(x, attr<int64_t>(a, 0), std::holds_alternative<int64_t>(a[1]) ? std::optional<int64_t>(
                     attr<int64_t>(a, 1)) : std::nullopt, generator_attr(a, 2)))
#undef KILN_RANDOM_FILL
Composite c_bernoulli{"bernoulli(Tensor self, *, Generator? generator=None) -> Tensor",
                      [](const TensorList& in, const Attrs& a) -> TensorList {
                        return {bernoulli(in[0], generator_attr(a, 0))};
                      },
                      kFunctionAndMethod};
// bernoulli(self, p) and Tensor.bernoulli_(p=0.5) / bernoulli_(Tensor p): self's shape and dtype, each
// element 1 with probability p (p broadcast to self's shape)
Composite c_bernoulli_p{"bernoulli.p(Tensor self, float p, *, Generator? generator=None) -> Tensor",
                        [](const TensorList& in, const Attrs& a) -> TensorList {
                          return {bernoulli(in[0], attr<double>(a, 0), generator_attr(a, 1))};
                        },
                        kFunctionAndMethod};
Composite c_bernoulli_float{"bernoulli.float(Tensor self, float p=0.5, *, Generator? generator=None) -> Tensor",
                            [](const TensorList& in, const Attrs& a) -> TensorList {
                              return {bernoulli(in[0], attr<double>(a, 0), generator_attr(a, 1))};
                            },
                            kInplaceVariant, 0,
                            [](const TensorList& in, const Attrs& a) -> TensorList {
                              return {bernoulli_(in[0], attr<double>(a, 0), generator_attr(a, 1))};
                            }};
Composite c_bernoulli_tensor{"bernoulli.Tensor(Tensor self, Tensor p, *, Generator? generator=None) -> Tensor",
                             [](const TensorList& in, const Attrs& a) -> TensorList {
                               return {to_dtype(bernoulli(expand(in[1], in[0].sizes()), generator_attr(a, 0)),
                                                in[0].dtype())};
                             },
                             kInplaceVariant, 0,
                             [](const TensorList& in, const Attrs& a) -> TensorList {
                               return {bernoulli_(in[0], in[1], generator_attr(a, 0))};
                             }};
Composite c_multinomial{"multinomial(Tensor self, int num_samples, bool replacement=False, *, Generator? generator=None) -> Tensor",
                        [](const TensorList& in, const Attrs& a) -> TensorList {
                          return {multinomial(in[0], attr<int64_t>(a, 0), attr<bool>(a, 1), generator_attr(a, 2))};
                        },
                        kFunctionAndMethod};
}  // namespace

}  // namespace kiln
