// kiln::distributions — torch.distributions in C++: parameterised probability distributions with
// sample / rsample, log_prob, entropy, mean / mode / variance / stddev, cdf / icdf where torch has
// them, argument validation (torch's constraints and messages) and kl_divergence for the common
// pairs. The formulas are torch 2.13's, written with kiln ops, so every result is differentiable in
// the parameters as torch's is. Python's kiln.distributions wraps these classes (decision 40).
//
//   auto p = distributions::Normal(zeros({3}), ones({3}));
//   Tensor x = p.rsample({16});             // (16, 3), differentiable in loc and scale
//   Tensor lp = p.log_prob(x);              // (16, 3)
//   Tensor kl = distributions::kl_divergence(p, distributions::Normal(ones({3}), ones({3})));
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/dispatch/op.h"

namespace kiln::distributions {

// ---- constraints (torch.distributions.constraints): which values a parameter or a sample may take
class Constraint {
 public:
  enum class Kind {
    Real, Boolean, GreaterThan, GreaterThanEq, LessThan, Interval, HalfOpenInterval, IntegerInterval,
    IntegerGreaterThan, Simplex, PositiveDefinite, LowerCholesky, Multinomial, Independent
  };
  Constraint(Kind k, Tensor lower = {}, Tensor upper = {}) : kind_(k), lower_(std::move(lower)), upper_(std::move(upper)) {}
  static Constraint independent(const Constraint& base, int64_t reinterpreted);

  Kind kind() const { return kind_; }
  const Tensor& lower_bound() const { return lower_; }  // undefined where the kind has none
  const Tensor& upper_bound() const { return upper_; }
  const Constraint* base() const { return base_.get(); }  // Independent's
  int64_t reinterpreted_batch_ndims() const { return reinterpreted_; }
  bool is_discrete() const;
  int64_t event_dim() const;
  // bool: whether each event of value satisfies it (the value's shape less event_dim() dims)
  Tensor check(const Tensor& value) const;
  std::string repr() const;  // torch's: "GreaterThan(lower_bound=0.0)"

 private:
  Kind kind_;
  Tensor lower_, upper_;
  std::shared_ptr<const Constraint> base_;
  int64_t reinterpreted_ = 0;
};

namespace constraints {
Constraint real();
Constraint boolean();
Constraint positive();      // GreaterThan(0)
Constraint nonnegative();   // GreaterThanEq(0)
Constraint unit_interval();  // Interval(0, 1)
Constraint simplex();
Constraint nonnegative_integer();  // IntegerGreaterThan(0)
Constraint positive_integer();     // IntegerGreaterThan(1)
Constraint real_vector();          // Independent(Real, 1)
Constraint positive_definite();
Constraint lower_cholesky();
Constraint greater_than(const Tensor& lower);
Constraint greater_than_eq(const Tensor& lower);
Constraint less_than(const Tensor& upper);
Constraint interval(const Tensor& lower, const Tensor& upper);
Constraint half_open_interval(const Tensor& lower, const Tensor& upper);
Constraint integer_interval(int64_t lower, int64_t upper);
Constraint multinomial(int64_t upper);  // nonnegative integer counts summing to at most upper
}  // namespace constraints

// torch's Distribution._validate_args default (__debug__: on); process-wide.
bool default_validate_args();
void set_default_validate_args(bool on);

// ---- the base: batch and event shapes, validation, the common methods
class Distribution {
 public:
  virtual ~Distribution() = default;
  virtual std::string name() const = 0;

  const Shape& batch_shape() const { return batch_shape_; }
  const Shape& event_shape() const { return event_shape_; }
  bool validate_args() const { return validate_; }
  // sample_shape + batch_shape + event_shape
  Shape extended_shape(const Shape& sample_shape = {}) const;

  virtual bool has_rsample() const { return false; }
  virtual bool has_enumerate_support() const { return false; }
  virtual Constraint support() const = 0;
  // (name, constraint) of each parameter it was built from, in torch's order (those validated)
  virtual std::vector<std::pair<std::string, Constraint>> arg_constraints() const = 0;
  // the parameters its repr shows (torch's: those in the instance's __dict__)
  virtual std::vector<std::string> repr_params() const;
  // A parameter or derived tensor by torch's attribute name ("loc", "probs", "scale_tril", ...);
  // undefined when it has none of that name.
  virtual Tensor attribute(const std::string& name) const = 0;

  virtual Tensor mean() const;
  virtual Tensor mode() const;
  virtual Tensor variance() const;
  virtual Tensor stddev() const;  // sqrt(variance())
  virtual Tensor entropy() const;
  Tensor perplexity() const;  // exp(entropy())

  // Draws without a graph (torch: under no_grad); rsample keeps the graph to the parameters.
  virtual Tensor sample(const Shape& sample_shape = {}) const;
  virtual Tensor rsample(const Shape& sample_shape = {}) const;
  virtual Tensor log_prob(const Tensor& value) const = 0;
  virtual Tensor cdf(const Tensor& value) const;
  virtual Tensor icdf(const Tensor& value) const;
  virtual Tensor enumerate_support(bool expand = true) const;
  // The same distribution over a larger batch shape (parameters expanded, not copied).
  virtual std::shared_ptr<Distribution> expand(const Shape& batch_shape) const = 0;

  std::string repr() const;  // torch's: "Normal(loc: 0.0, scale: kiln.Size([2]))"
  // Raises torch's ValueError when value is outside the support (or of the wrong shape).
  void validate_sample(const Tensor& value) const;

 protected:
  // Sets the shapes; when validation is on, checks each parameter named by arg_constraints()
  // (those it was built from) and raises torch's ValueError on the first violation.
  void init(Shape batch_shape, Shape event_shape, std::optional<bool> validate_args);
  Shape expanded_batch(const Shape& batch_shape) const;  // checks the new shape against the old
  Tensor checked(const Tensor& value) const {  // value, validated when validation is on
    if (validate_) validate_sample(value);
    return value;
  }

 private:
  Shape batch_shape_, event_shape_;
  bool validate_ = true;
};

using DistributionPtr = std::shared_ptr<Distribution>;

// The parameters' common broadcast shape; each expanded to it (torch's broadcast_all on tensors).
TensorList broadcast_all(const TensorList& ts);

class Normal : public Distribution {
 public:
  Normal(const Tensor& loc, const Tensor& scale, std::optional<bool> validate_args = std::nullopt);
  static constexpr const char* kName = "Normal";
  std::string name() const override { return kName; }
  bool has_rsample() const override { return true; }
  Constraint support() const override { return constraints::real(); }
  std::vector<std::pair<std::string, Constraint>> arg_constraints() const override;
  Tensor attribute(const std::string& name) const override;
  Tensor mean() const override { return loc_; }
  Tensor mode() const override { return loc_; }
  Tensor stddev() const override { return scale_; }
  Tensor variance() const override;
  Tensor entropy() const override;
  Tensor sample(const Shape& sample_shape = {}) const override;
  Tensor rsample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  Tensor cdf(const Tensor& value) const override;
  Tensor icdf(const Tensor& value) const override;
  std::shared_ptr<Distribution> expand(const Shape& batch_shape) const override;
  const Tensor& loc() const { return loc_; }
  const Tensor& scale() const { return scale_; }

 private:
  Tensor loc_, scale_;
};

// exp(X) for X ~ Normal(loc, scale) (torch: a TransformedDistribution of Normal by ExpTransform)
class LogNormal : public Distribution {
 public:
  LogNormal(const Tensor& loc, const Tensor& scale, std::optional<bool> validate_args = std::nullopt);
  static constexpr const char* kName = "LogNormal";
  std::string name() const override { return kName; }
  std::vector<std::string> repr_params() const override;
  bool has_rsample() const override { return true; }
  Constraint support() const override { return constraints::positive(); }
  std::vector<std::pair<std::string, Constraint>> arg_constraints() const override;
  Tensor attribute(const std::string& name) const override;
  Tensor mean() const override;
  Tensor mode() const override;
  Tensor variance() const override;
  Tensor entropy() const override;
  Tensor sample(const Shape& sample_shape = {}) const override;
  Tensor rsample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  Tensor cdf(const Tensor& value) const override;
  Tensor icdf(const Tensor& value) const override;
  std::shared_ptr<Distribution> expand(const Shape& batch_shape) const override;
  const Normal& base_dist() const { return base_; }

 private:
  Normal base_;
};

class Uniform : public Distribution {
 public:
  Uniform(const Tensor& low, const Tensor& high, std::optional<bool> validate_args = std::nullopt);
  static constexpr const char* kName = "Uniform";
  std::string name() const override { return kName; }
  bool has_rsample() const override { return true; }
  Constraint support() const override { return constraints::interval(low_, high_); }
  std::vector<std::pair<std::string, Constraint>> arg_constraints() const override;
  Tensor attribute(const std::string& name) const override;
  Tensor mean() const override;
  Tensor mode() const override;
  Tensor stddev() const override;
  Tensor variance() const override;
  Tensor entropy() const override;
  Tensor rsample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  Tensor cdf(const Tensor& value) const override;
  Tensor icdf(const Tensor& value) const override;
  std::shared_ptr<Distribution> expand(const Shape& batch_shape) const override;
  const Tensor& low() const { return low_; }
  const Tensor& high() const { return high_; }

 private:
  Tensor low_, high_;
};

// A distribution given by probabilities or by logits, exactly one of them (torch's probs / logits).
struct ProbsOrLogits {
  Tensor probs, logits;
};

class Bernoulli : public Distribution {
 public:
  explicit Bernoulli(const ProbsOrLogits& p, std::optional<bool> validate_args = std::nullopt);
  static constexpr const char* kName = "Bernoulli";
  std::string name() const override { return kName; }
  bool has_enumerate_support() const override { return true; }
  Constraint support() const override { return constraints::boolean(); }
  std::vector<std::pair<std::string, Constraint>> arg_constraints() const override;
  Tensor attribute(const std::string& name) const override;
  Tensor mean() const override { return probs_; }
  Tensor mode() const override;
  Tensor variance() const override;
  Tensor entropy() const override;
  Tensor sample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  Tensor enumerate_support(bool expand = true) const override;
  std::shared_ptr<Distribution> expand(const Shape& batch_shape) const override;
  const Tensor& probs() const { return probs_; }
  const Tensor& logits() const { return logits_; }

 private:
  bool from_logits_;
  Tensor probs_, logits_;
};

class Categorical : public Distribution {
 public:
  explicit Categorical(const ProbsOrLogits& p, std::optional<bool> validate_args = std::nullopt);
  static constexpr const char* kName = "Categorical";
  std::string name() const override { return kName; }
  bool has_enumerate_support() const override { return true; }
  Constraint support() const override { return constraints::integer_interval(0, num_events_ - 1); }
  std::vector<std::pair<std::string, Constraint>> arg_constraints() const override;
  Tensor attribute(const std::string& name) const override;
  Tensor mean() const override;
  Tensor mode() const override;
  Tensor variance() const override;
  Tensor entropy() const override;
  Tensor sample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  Tensor enumerate_support(bool expand = true) const override;
  std::shared_ptr<Distribution> expand(const Shape& batch_shape) const override;
  const Tensor& probs() const { return probs_; }    // normalised
  const Tensor& logits() const { return logits_; }  // normalised (log probabilities)
  int64_t num_events() const { return num_events_; }

 private:
  bool from_logits_;
  Tensor probs_, logits_;
  int64_t num_events_;
};

class Multinomial : public Distribution {
 public:
  Multinomial(int64_t total_count, const ProbsOrLogits& p, std::optional<bool> validate_args = std::nullopt);
  static constexpr const char* kName = "Multinomial";
  std::string name() const override { return kName; }
  std::vector<std::string> repr_params() const override;
  Constraint support() const override { return constraints::multinomial(total_count_); }
  std::vector<std::pair<std::string, Constraint>> arg_constraints() const override;
  Tensor attribute(const std::string& name) const override;
  Tensor mean() const override;
  Tensor variance() const override;
  Tensor entropy() const override;
  Tensor sample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  std::shared_ptr<Distribution> expand(const Shape& batch_shape) const override;
  int64_t total_count() const { return total_count_; }
  const Categorical& categorical() const { return cat_; }

 private:
  int64_t total_count_;
  Categorical cat_;
};

class Exponential : public Distribution {
 public:
  explicit Exponential(const Tensor& rate, std::optional<bool> validate_args = std::nullopt);
  static constexpr const char* kName = "Exponential";
  std::string name() const override { return kName; }
  bool has_rsample() const override { return true; }
  Constraint support() const override { return constraints::nonnegative(); }
  std::vector<std::pair<std::string, Constraint>> arg_constraints() const override;
  Tensor attribute(const std::string& name) const override;
  Tensor mean() const override;
  Tensor mode() const override;
  Tensor stddev() const override;
  Tensor variance() const override;
  Tensor entropy() const override;
  Tensor rsample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  Tensor cdf(const Tensor& value) const override;
  Tensor icdf(const Tensor& value) const override;
  std::shared_ptr<Distribution> expand(const Shape& batch_shape) const override;
  const Tensor& rate() const { return rate_; }

 private:
  Tensor rate_;
};

class Gamma : public Distribution {
 public:
  Gamma(const Tensor& concentration, const Tensor& rate, std::optional<bool> validate_args = std::nullopt);
  static constexpr const char* kName = "Gamma";
  std::string name() const override { return kName; }
  bool has_rsample() const override { return true; }
  Constraint support() const override { return constraints::nonnegative(); }
  std::vector<std::pair<std::string, Constraint>> arg_constraints() const override;
  Tensor attribute(const std::string& name) const override;
  Tensor mean() const override;
  Tensor mode() const override;
  Tensor variance() const override;
  Tensor entropy() const override;
  Tensor rsample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  Tensor cdf(const Tensor& value) const override;
  std::shared_ptr<Distribution> expand(const Shape& batch_shape) const override;
  const Tensor& concentration() const { return concentration_; }
  const Tensor& rate() const { return rate_; }

 private:
  Tensor concentration_, rate_;
};

class Dirichlet : public Distribution {
 public:
  explicit Dirichlet(const Tensor& concentration, std::optional<bool> validate_args = std::nullopt);
  static constexpr const char* kName = "Dirichlet";
  std::string name() const override { return kName; }
  bool has_rsample() const override { return true; }
  Constraint support() const override { return constraints::simplex(); }
  std::vector<std::pair<std::string, Constraint>> arg_constraints() const override;
  Tensor attribute(const std::string& name) const override;
  Tensor mean() const override;
  Tensor mode() const override;
  Tensor variance() const override;
  Tensor entropy() const override;
  Tensor rsample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  std::shared_ptr<Distribution> expand(const Shape& batch_shape) const override;
  const Tensor& concentration() const { return concentration_; }

 private:
  Tensor concentration_;
};

// Beta(c1, c0): the first component of Dirichlet([c1, c0]) (torch's construction)
class Beta : public Distribution {
 public:
  Beta(const Tensor& concentration1, const Tensor& concentration0, std::optional<bool> validate_args = std::nullopt);
  static constexpr const char* kName = "Beta";
  std::string name() const override { return kName; }
  std::vector<std::string> repr_params() const override;
  bool has_rsample() const override { return true; }
  Constraint support() const override { return constraints::unit_interval(); }
  std::vector<std::pair<std::string, Constraint>> arg_constraints() const override;
  Tensor attribute(const std::string& name) const override;
  Tensor mean() const override;
  Tensor mode() const override;
  Tensor variance() const override;
  Tensor entropy() const override { return dirichlet_.entropy(); }
  Tensor rsample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  std::shared_ptr<Distribution> expand(const Shape& batch_shape) const override;
  Tensor concentration1() const;
  Tensor concentration0() const;

 private:
  Dirichlet dirichlet_;
};

class Poisson : public Distribution {
 public:
  explicit Poisson(const Tensor& rate, std::optional<bool> validate_args = std::nullopt);
  static constexpr const char* kName = "Poisson";
  std::string name() const override { return kName; }
  Constraint support() const override { return constraints::nonnegative_integer(); }
  std::vector<std::pair<std::string, Constraint>> arg_constraints() const override;
  Tensor attribute(const std::string& name) const override;
  Tensor mean() const override { return rate_; }
  Tensor mode() const override;
  Tensor variance() const override { return rate_; }
  Tensor sample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  std::shared_ptr<Distribution> expand(const Shape& batch_shape) const override;
  const Tensor& rate() const { return rate_; }

 private:
  Tensor rate_;
};

// Exactly one of covariance_matrix, precision_matrix, scale_tril (torch's arguments).
struct MvnMatrix {
  Tensor covariance_matrix, precision_matrix, scale_tril;
};

class MultivariateNormal : public Distribution {
 public:
  MultivariateNormal(const Tensor& loc, const MvnMatrix& m, std::optional<bool> validate_args = std::nullopt);
  static constexpr const char* kName = "MultivariateNormal";
  std::string name() const override { return kName; }
  std::vector<std::string> repr_params() const override;
  bool has_rsample() const override { return true; }
  Constraint support() const override { return constraints::real_vector(); }
  std::vector<std::pair<std::string, Constraint>> arg_constraints() const override;
  Tensor attribute(const std::string& name) const override;
  Tensor mean() const override { return loc_; }
  Tensor mode() const override { return loc_; }
  Tensor variance() const override;
  Tensor entropy() const override;
  Tensor rsample(const Shape& sample_shape = {}) const override;
  Tensor log_prob(const Tensor& value) const override;
  std::shared_ptr<Distribution> expand(const Shape& batch_shape) const override;
  const Tensor& loc() const { return loc_; }
  Tensor scale_tril() const;
  Tensor covariance_matrix() const;
  Tensor precision_matrix() const;
  const Tensor& unbroadcasted_scale_tril() const { return L_; }

 private:
  MultivariateNormal(const Tensor& loc, const Tensor& L, const std::string& given, const MvnMatrix& m, const Shape& batch);
  Tensor loc_, L_;    // loc expanded to the batch shape; the Cholesky factor, not expanded
  std::string given_;  // which matrix it was built from
  MvnMatrix given_m_;
};

// KL(p || q) for the pairs torch implements among these families; torch's NotImplementedError
// for any other pair.
Tensor kl_divergence(const Distribution& p, const Distribution& q);
bool has_kl(const Distribution& p, const Distribution& q);
// The (p, q) family names kl_divergence implements.
const std::vector<std::pair<std::string, std::string>>& kl_pairs();

}  // namespace kiln::distributions
