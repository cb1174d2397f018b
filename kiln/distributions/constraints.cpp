// Constraints and the Distribution base: shapes, validation with torch's messages, the defaults
// of the common methods (kiln/distributions/distributions.h).
#include <atomic>
#include <sstream>

#include "kiln/autograd/autograd.h"
#include "kiln/distributions/distributions.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/ops.h"
#include "kiln/optim/value.h"

namespace kiln::distributions {

namespace {
using K = Constraint::Kind;

Tensor num(double v) { return scalar_tensor(Scalar(v), kFloat32); }

// A bound as torch's f-string shows it: a number for a one-element 0-dim tensor, else the repr.
std::string bound_str(const Tensor& t) {
  if (t.dim() == 0) {
    if (is_floating(t.dtype())) return optim::py_float_repr(t.item<double>());
    return std::to_string(t.item<int64_t>());
  }
  return repr(t);
}

Tensor all_last(const Tensor& b, int64_t n) {  // all() over the last n dims
  Tensor r = b;
  for (int64_t i = 0; i < n; ++i) r = all(r, Shape{-1});
  return r;
}
}  // namespace

Constraint Constraint::independent(const Constraint& base, int64_t reinterpreted) {
  Constraint c(K::Independent);
  c.base_ = std::make_shared<const Constraint>(base);
  c.reinterpreted_ = reinterpreted;
  return c;
}

bool Constraint::is_discrete() const {
  switch (kind_) {
    case K::Boolean: case K::IntegerInterval: case K::IntegerGreaterThan: case K::Multinomial: return true;
    case K::Independent: return base_->is_discrete();
    default: return false;
  }
}

int64_t Constraint::event_dim() const {
  switch (kind_) {
    case K::Simplex: case K::Multinomial: return 1;
    case K::PositiveDefinite: case K::LowerCholesky: return 2;
    case K::Independent: return base_->event_dim() + reinterpreted_;
    default: return 0;
  }
}

Tensor Constraint::check(const Tensor& v) const {
  switch (kind_) {
    case K::Real: return eq(v, v);  // not NaN
    case K::Boolean: return logical_or(eq(v, Scalar(0)), eq(v, Scalar(1)));
    case K::GreaterThan: return gt(v, lower_);
    case K::GreaterThanEq: return ge(v, lower_);
    case K::LessThan: return lt(v, upper_);
    case K::Interval: return logical_and(ge(v, lower_), le(v, upper_));
    case K::HalfOpenInterval: return logical_and(ge(v, lower_), lt(v, upper_));
    case K::IntegerInterval:
      return logical_and(eq(remainder(v, Scalar(1)), Scalar(0)), logical_and(ge(v, lower_), le(v, upper_)));
    case K::IntegerGreaterThan: return logical_and(eq(remainder(v, Scalar(1)), Scalar(0)), ge(v, lower_));
    case K::Simplex:
      return logical_and(all(ge(v, Scalar(0)), Shape{-1}), lt(abs(sub(sum(v, Shape{-1}), Scalar(1))), Scalar(1e-6)));
    case K::Multinomial:
      return logical_and(all(ge(v, Scalar(0)), Shape{-1}), le(sum(v, Shape{-1}), upper_));
    case K::LowerCholesky: {
      Tensor lower_tri = all_last(eq(tril(v), v), 2);
      Tensor pos_diag = all(gt(diagonal(v, 0, -2, -1), Scalar(0)), Shape{-1});
      return logical_and(lower_tri, pos_diag);
    }
    case K::PositiveDefinite: {  // symmetric, and a Cholesky factor exists (torch's test)
      Tensor sym = all_last(isclose(v, mT(v), 1e-5, 1e-6), 2);
      if (!all(sym).item<bool>()) return sym;
      return eq(std::get<1>(linalg::cholesky_ex(v)), Scalar(0));
    }
    case K::Independent: return all_last(base_->check(v), reinterpreted_);
  }
  return {};
}

std::string Constraint::repr() const {
  switch (kind_) {
    case K::Real: return "Real()";
    case K::Boolean: return "Boolean()";
    case K::GreaterThan: return "GreaterThan(lower_bound=" + bound_str(lower_) + ")";
    case K::GreaterThanEq: return "GreaterThanEq(lower_bound=" + bound_str(lower_) + ")";
    case K::LessThan: return "LessThan(upper_bound=" + bound_str(upper_) + ")";
    case K::Interval: return "Interval(lower_bound=" + bound_str(lower_) + ", upper_bound=" + bound_str(upper_) + ")";
    case K::HalfOpenInterval:
      return "HalfOpenInterval(lower_bound=" + bound_str(lower_) + ", upper_bound=" + bound_str(upper_) + ")";
    case K::IntegerInterval:
      return "IntegerInterval(lower_bound=" + bound_str(lower_) + ", upper_bound=" + bound_str(upper_) + ")";
    case K::IntegerGreaterThan: return "IntegerGreaterThan(lower_bound=" + bound_str(lower_) + ")";
    case K::Simplex: return "Simplex()";
    case K::Multinomial: return "Multinomial()";
    case K::PositiveDefinite: return "PositiveDefinite()";
    case K::LowerCholesky: return "LowerCholesky()";
    case K::Independent: return "IndependentConstraint(" + base_->repr() + ", " + std::to_string(reinterpreted_) + ")";
  }
  return "";
}

namespace constraints {
Constraint real() { return Constraint(K::Real); }
Constraint boolean() { return Constraint(K::Boolean); }
Constraint positive() { return Constraint(K::GreaterThan, num(0)); }
Constraint nonnegative() { return Constraint(K::GreaterThanEq, num(0)); }
Constraint unit_interval() { return Constraint(K::Interval, num(0), num(1)); }
Constraint simplex() { return Constraint(K::Simplex); }
Constraint nonnegative_integer() { return Constraint(K::IntegerGreaterThan, scalar_tensor(Scalar(int64_t{0}))); }
Constraint positive_integer() { return Constraint(K::IntegerGreaterThan, scalar_tensor(Scalar(int64_t{1}))); }
Constraint real_vector() { return Constraint::independent(real(), 1); }
Constraint positive_definite() { return Constraint(K::PositiveDefinite); }
Constraint lower_cholesky() { return Constraint(K::LowerCholesky); }
Constraint greater_than(const Tensor& lower) { return Constraint(K::GreaterThan, lower); }
Constraint greater_than_eq(const Tensor& lower) { return Constraint(K::GreaterThanEq, lower); }
Constraint less_than(const Tensor& upper) { return Constraint(K::LessThan, Tensor(), upper); }
Constraint interval(const Tensor& lower, const Tensor& upper) { return Constraint(K::Interval, lower, upper); }
Constraint half_open_interval(const Tensor& lower, const Tensor& upper) {
  return Constraint(K::HalfOpenInterval, lower, upper);
}
Constraint integer_interval(int64_t lower, int64_t upper) {
  return Constraint(K::IntegerInterval, scalar_tensor(Scalar(lower)), scalar_tensor(Scalar(upper)));
}
Constraint multinomial(int64_t upper) { return Constraint(K::Multinomial, Tensor(), scalar_tensor(Scalar(upper))); }
}  // namespace constraints

// ---- the base
namespace {
std::atomic<bool> g_validate{true};

std::string size_str(const Shape& s) {
  std::ostringstream os;
  os << "kiln.Size([";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "])";
  return os.str();
}
std::string shape_tuple(const Shape& s) {  // Python's tuple: (2,), (2, 3), ()
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  if (s.size() == 1) os << ",";
  os << ")";
  return os.str();
}
}  // namespace

bool default_validate_args() { return g_validate.load(); }
void set_default_validate_args(bool on) { g_validate.store(on); }

void Distribution::init(Shape batch_shape, Shape event_shape, std::optional<bool> validate_args) {
  batch_shape_ = std::move(batch_shape);
  event_shape_ = std::move(event_shape);
  validate_ = validate_args.value_or(default_validate_args());
  if (!validate_) return;
  for (const auto& [pname, c] : arg_constraints()) {
    Tensor v = attribute(pname);
    if (!v.defined()) continue;
    NoGradGuard ng;
    Tensor ok = c.check(v);
    if (!all(ok).item<bool>())
      KILN_CHECK(false, Value, name().c_str(), "Expected parameter ", pname, " (Tensor of shape ", shape_tuple(v.sizes()),
                 ") of distribution ", repr(), " to satisfy the constraint ", c.repr(),
                 ", but found invalid values:\n", kiln::repr(v));
  }
}

Shape Distribution::extended_shape(const Shape& sample_shape) const {
  Shape s = sample_shape;
  s.insert(s.end(), batch_shape_.begin(), batch_shape_.end());
  s.insert(s.end(), event_shape_.begin(), event_shape_.end());
  return s;
}

Shape Distribution::expanded_batch(const Shape& batch_shape) const {
  broadcast_shapes(batch_shape_, batch_shape, "expand");
  return batch_shape;
}

void Distribution::validate_sample(const Tensor& value) const {
  const int64_t ev = static_cast<int64_t>(event_shape_.size());
  KILN_CHECK(value.dim() >= ev, Value, name().c_str(), "The right-most size of value must match event_shape: ",
             size_str(value.sizes()), " vs ", size_str(event_shape_), ".");
  for (int64_t i = 0; i < ev; ++i)
    KILN_CHECK(value.sizes()[value.dim() - ev + i] == event_shape_[i], Value, name().c_str(),
               "The right-most size of value must match event_shape: ", size_str(value.sizes()), " vs ",
               size_str(event_shape_), ".");
  // the value's batch part must broadcast with the batch shape (torch's check)
  Shape vb(value.sizes().begin(), value.sizes().end() - ev);
  const size_t n = std::min(vb.size(), batch_shape_.size());
  for (size_t i = 1; i <= n; ++i) {
    int64_t a = vb[vb.size() - i], b = batch_shape_[batch_shape_.size() - i];
    KILN_CHECK(a == 1 || b == 1 || a == b, Value, name().c_str(), "Value is not broadcastable with batch_shape+event_shape: ",
               size_str(value.sizes()), " vs ", size_str(extended_shape()), ".");
  }
  NoGradGuard ng;
  Constraint s = support();
  if (!all(s.check(value)).item<bool>())
    KILN_CHECK(false, Value, name().c_str(), "Expected value argument (Tensor of shape ", shape_tuple(value.sizes()),
               ") to be within the support (", s.repr(), ") of the distribution ", repr(),
               ", but found invalid values:\n", kiln::repr(value));
}

std::string Distribution::repr() const {
  std::string r = name() + "(";
  bool first = true;
  for (const std::string& pname : repr_params()) {
    Tensor v = attribute(pname);
    if (!v.defined()) continue;
    r += (first ? "" : ", ") + pname + ": ";
    first = false;
    if (v.numel() == 1) {
      NoGradGuard ng;
      r += is_floating(v.dtype()) ? optim::py_float_repr(v.item<double>()) : std::to_string(v.item<int64_t>());
    } else {
      r += size_str(v.sizes());
    }
  }
  return r + ")";
}

namespace {
[[noreturn]] void not_implemented(const Distribution& d, const char* what) {
  KILN_CHECK(false, NotImplemented, d.name().c_str(), d.name(), " does not implement ", what);
  throw 0;  // unreachable
}
}  // namespace

std::vector<std::string> Distribution::repr_params() const {
  std::vector<std::string> r;
  for (const auto& pc : arg_constraints()) r.push_back(pc.first);
  return r;
}

Tensor Distribution::mean() const { not_implemented(*this, "mean"); }
Tensor Distribution::mode() const { not_implemented(*this, "mode"); }
Tensor Distribution::variance() const { not_implemented(*this, "variance"); }
Tensor Distribution::stddev() const { return sqrt(variance()); }
Tensor Distribution::entropy() const { not_implemented(*this, "entropy"); }
Tensor Distribution::perplexity() const { return exp(entropy()); }
Tensor Distribution::cdf(const Tensor&) const { not_implemented(*this, "cdf"); }
Tensor Distribution::icdf(const Tensor&) const { not_implemented(*this, "icdf"); }
Tensor Distribution::enumerate_support(bool) const { not_implemented(*this, "enumerate_support"); }
Tensor Distribution::rsample(const Shape&) const { not_implemented(*this, "rsample"); }
Tensor Distribution::sample(const Shape& sample_shape) const {
  NoGradGuard ng;
  return rsample(sample_shape);
}

TensorList broadcast_all(const TensorList& ts) { return broadcast_tensors(ts); }

}  // namespace kiln::distributions
