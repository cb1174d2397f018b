// The distribution families (distributions.h), torch 2.13's formulas written with kiln ops.
#include "kiln/distributions/distributions.h"

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/core/finfo.h"
#include "kiln/nn/loss.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/random_dist.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/special.h"

namespace kiln::distributions {

namespace {
using Params = std::vector<std::pair<std::string, Constraint>>;


Shape shape_of(const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end()); }
Shape drop_last(const Tensor& t, size_t n) { return Shape(t.sizes().begin(), t.sizes().end() - n); }
Shape concat(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
TensorOptions opts(const Tensor& t) { return TensorOptions(t.dtype()).device(t.device()); }

// torch's clamp_probs: into [eps, 1 - eps]
Tensor clamp_probs(const Tensor& p) {
  double eps = finfo_eps(p.dtype());
  return clamp(p, Scalar(eps), Scalar(1 - eps));
}
Tensor probs_to_logits(const Tensor& p, bool binary) {
  Tensor c = clamp_probs(p);
  return binary ? sub(log(c), log1p(neg(c))) : log(c);
}
void one_of(const ProbsOrLogits& p) {
  KILN_CHECK(p.probs.defined() != p.logits.defined(), Value, "distributions",
             "Either `probs` or `logits` must be specified, but not both.");
}
}  // namespace

// ---- Normal
Normal::Normal(const Tensor& loc, const Tensor& scale, std::optional<bool> v) {
  TensorList b = broadcast_all({loc, scale});
  loc_ = b[0], scale_ = b[1];
  init(shape_of(loc_), {}, v);
}
Params Normal::arg_constraints() const { return {{"loc", constraints::real()}, {"scale", constraints::positive()}}; }
Tensor Normal::attribute(const std::string& n) const { return n == "loc" ? loc_ : n == "scale" ? scale_ : Tensor(); }
Tensor Normal::variance() const { return pow(scale_, Scalar(2)); }
Tensor Normal::entropy() const { return add(log(scale_), Scalar(0.5 + 0.5 * std::log(2 * M_PI))); }
Tensor Normal::sample(const Shape& s) const {
  NoGradGuard ng;
  Shape e = extended_shape(s);
  return normal(kiln::expand(loc_, e), kiln::expand(scale_, e));
}
Tensor Normal::rsample(const Shape& s) const {
  Tensor eps = randn(extended_shape(s), opts(loc_));
  return add(loc_, mul(eps, scale_));
}
Tensor Normal::log_prob(const Tensor& value) const {
  checked(value);
  Tensor var = pow(scale_, Scalar(2));
  Tensor d = sub(value, loc_);
  return sub(sub(div(neg(mul(d, d)), mul(var, Scalar(2))), log(scale_)), Scalar(std::log(std::sqrt(2 * M_PI))));
}
Tensor Normal::cdf(const Tensor& value) const {
  checked(value);
  return mul(add(erf(mul(mul(sub(value, loc_), reciprocal(scale_)), Scalar(1 / std::sqrt(2.0)))), Scalar(1)), Scalar(0.5));
}
Tensor Normal::icdf(const Tensor& value) const {
  return add(loc_, mul(mul(scale_, erfinv(sub(mul(value, Scalar(2)), Scalar(1)))), Scalar(std::sqrt(2.0))));
}
DistributionPtr Normal::expand(const Shape& b) const {
  Shape s = expanded_batch(b);
  return std::make_shared<Normal>(kiln::expand(loc_, s), kiln::expand(scale_, s), false);
}

// ---- LogNormal
LogNormal::LogNormal(const Tensor& loc, const Tensor& scale, std::optional<bool> v) : base_(loc, scale, v) {
  init(base_.batch_shape(), {}, v);  // (the base has raised already for an invalid parameter)
}
Params LogNormal::arg_constraints() const { return base_.arg_constraints(); }
std::vector<std::string> LogNormal::repr_params() const { return {}; }  // torch's: loc, scale are properties
Tensor LogNormal::attribute(const std::string& n) const { return base_.attribute(n); }
Tensor LogNormal::mean() const { return exp(add(base_.loc(), true_divide(pow(base_.scale(), Scalar(2)), Scalar(2.0)))); }
Tensor LogNormal::mode() const { return exp(sub(base_.loc(), pow(base_.scale(), Scalar(2)))); }
Tensor LogNormal::variance() const {
  Tensor s2 = pow(base_.scale(), Scalar(2));
  return mul(expm1(s2), exp(add(mul(base_.loc(), Scalar(2)), s2)));
}
Tensor LogNormal::entropy() const { return add(base_.entropy(), base_.loc()); }
Tensor LogNormal::sample(const Shape& s) const {
  NoGradGuard ng;
  return exp(base_.sample(s));
}
Tensor LogNormal::rsample(const Shape& s) const { return exp(base_.rsample(s)); }
Tensor LogNormal::log_prob(const Tensor& value) const {
  checked(value);
  Tensor x = log(value);  // the inverse transform; log|d exp(x)/dx| = x
  Normal n(base_.loc(), base_.scale(), false);
  return sub(n.log_prob(x), x);
}
Tensor LogNormal::cdf(const Tensor& value) const {
  checked(value);
  return Normal(base_.loc(), base_.scale(), false).cdf(log(value));
}
Tensor LogNormal::icdf(const Tensor& value) const { return exp(base_.icdf(value)); }
DistributionPtr LogNormal::expand(const Shape& b) const {
  Shape s = expanded_batch(b);
  return std::make_shared<LogNormal>(kiln::expand(base_.loc(), s), kiln::expand(base_.scale(), s), false);
}

// ---- Uniform
Uniform::Uniform(const Tensor& low, const Tensor& high, std::optional<bool> v) {
  TensorList b = broadcast_all({low, high});
  low_ = b[0], high_ = b[1];
  init(shape_of(low_), {}, v);
}
Params Uniform::arg_constraints() const {
  return {{"low", constraints::less_than(high_)}, {"high", constraints::greater_than(low_)}};
}
Tensor Uniform::attribute(const std::string& n) const { return n == "low" ? low_ : n == "high" ? high_ : Tensor(); }
Tensor Uniform::mean() const { return true_divide(add(high_, low_), Scalar(2.0)); }
Tensor Uniform::mode() const { return mul(high_, Scalar(std::nan(""))); }
Tensor Uniform::stddev() const { return true_divide(sub(high_, low_), Scalar(std::sqrt(12.0))); }
Tensor Uniform::variance() const { return true_divide(pow(sub(high_, low_), Scalar(2)), Scalar(12.0)); }
Tensor Uniform::entropy() const { return log(sub(high_, low_)); }
Tensor Uniform::rsample(const Shape& s) const {
  Tensor r = rand(extended_shape(s), opts(low_));
  return add(low_, mul(r, sub(high_, low_)));
}
Tensor Uniform::log_prob(const Tensor& value) const {
  checked(value);
  Tensor lb = to_dtype(le(low_, value), low_.dtype());
  Tensor ub = to_dtype(gt(high_, value), low_.dtype());
  return sub(log(mul(lb, ub)), log(sub(high_, low_)));
}
Tensor Uniform::cdf(const Tensor& value) const {
  checked(value);
  return clamp(div(sub(value, low_), sub(high_, low_)), Scalar(0), Scalar(1));
}
Tensor Uniform::icdf(const Tensor& value) const { return add(mul(value, sub(high_, low_)), low_); }
DistributionPtr Uniform::expand(const Shape& b) const {
  Shape s = expanded_batch(b);
  return std::make_shared<Uniform>(kiln::expand(low_, s), kiln::expand(high_, s), false);
}

// ---- Bernoulli
Bernoulli::Bernoulli(const ProbsOrLogits& p, std::optional<bool> v) {
  one_of(p);
  from_logits_ = p.logits.defined();
  if (from_logits_) {
    logits_ = p.logits;
    probs_ = sigmoid(logits_);
  } else {
    probs_ = p.probs;
    logits_ = probs_to_logits(probs_, true);
  }
  init(shape_of(from_logits_ ? logits_ : probs_), {}, v);
}
Params Bernoulli::arg_constraints() const {
  if (from_logits_) return {{"logits", constraints::real()}};
  return {{"probs", constraints::unit_interval()}};
}
Tensor Bernoulli::attribute(const std::string& n) const { return n == "probs" ? probs_ : n == "logits" ? logits_ : Tensor(); }
Tensor Bernoulli::mode() const {
  Tensor m = to_dtype(ge(probs_, Scalar(0.5)), probs_.dtype());
  return where(eq(probs_, Scalar(0.5)), full_like(m, Scalar(std::nan(""))), m);
}
Tensor Bernoulli::variance() const { return mul(probs_, rsub(probs_, Scalar(1))); }
Tensor Bernoulli::entropy() const { return nn::functional::binary_cross_entropy_with_logits(logits_, probs_, {}, "none"); }
Tensor Bernoulli::sample(const Shape& s) const {
  NoGradGuard ng;
  return bernoulli(kiln::expand(probs_, extended_shape(s)));
}
Tensor Bernoulli::log_prob(const Tensor& value) const {
  checked(value);
  TensorList b = broadcast_all({logits_, value});
  return neg(nn::functional::binary_cross_entropy_with_logits(b[0], b[1], {}, "none"));
}
Tensor Bernoulli::enumerate_support(bool expand_it) const {
  Shape s{-1};
  for (size_t i = 0; i < batch_shape().size(); ++i) s.push_back(1);
  Tensor values = view(arange(Scalar(2), opts(probs_)), s);
  if (expand_it) values = kiln::expand(values, concat({2}, batch_shape()));
  return values;
}
DistributionPtr Bernoulli::expand(const Shape& b) const {
  Shape s = expanded_batch(b);
  ProbsOrLogits p;
  (from_logits_ ? p.logits : p.probs) = kiln::expand(from_logits_ ? logits_ : probs_, s);
  return std::make_shared<Bernoulli>(p, false);
}

// ---- Categorical
Categorical::Categorical(const ProbsOrLogits& p, std::optional<bool> v) {
  one_of(p);
  from_logits_ = p.logits.defined();
  const Tensor& given = from_logits_ ? p.logits : p.probs;
  KILN_CHECK(given.dim() >= 1, Value, "Categorical", "`", from_logits_ ? "logits" : "probs",
             "` parameter must be at least one-dimensional.");
  if (from_logits_) {
    logits_ = sub(p.logits, logsumexp(p.logits, Shape{-1}, true));
    probs_ = softmax(logits_, -1);
  } else {
    probs_ = div(p.probs, sum(p.probs, Shape{-1}, true));
    logits_ = probs_to_logits(probs_, false);
  }
  num_events_ = given.sizes().back();
  init(drop_last(given, 1), {}, v);
}
Params Categorical::arg_constraints() const {
  if (from_logits_) return {{"logits", constraints::real_vector()}};
  return {{"probs", constraints::simplex()}};
}
Tensor Categorical::attribute(const std::string& n) const {
  return n == "probs" ? probs_ : n == "logits" ? logits_ : Tensor();
}
Tensor Categorical::mean() const { return full(extended_shape(), Scalar(std::nan("")), opts(probs_)); }
Tensor Categorical::mode() const { return argmax(probs_, -1); }
Tensor Categorical::variance() const { return full(extended_shape(), Scalar(std::nan("")), opts(probs_)); }
Tensor Categorical::entropy() const {
  Tensor l = clamp(logits_, Scalar(finfo_min(logits_.dtype())), std::nullopt);
  return neg(sum(mul(l, probs_), Shape{-1}));
}
Tensor Categorical::sample(const Shape& s) const {
  NoGradGuard ng;
  int64_t n = 1;
  for (int64_t x : s) n *= x;
  Tensor p2 = reshape(probs_, {-1, num_events_});
  Tensor draws = n == 0 ? empty({0, p2.sizes()[0]}, kInt64) : mT(multinomial(p2, n, true));
  return reshape(draws, extended_shape(s));
}
Tensor Categorical::log_prob(const Tensor& value) const {
  checked(value);
  Tensor v = unsqueeze(to_dtype(value, kInt64), -1);
  TensorList b = broadcast_tensors({v, logits_});
  Tensor idx = narrow(b[0], -1, 0, 1);
  return squeeze(gather(b[1], -1, idx), Shape{-1});
}
Tensor Categorical::enumerate_support(bool expand_it) const {
  Shape s{-1};
  for (size_t i = 0; i < batch_shape().size(); ++i) s.push_back(1);
  Tensor values = view(arange(Scalar(num_events_), TensorOptions(kInt64).device(probs_.device())), s);
  if (expand_it) values = kiln::expand(values, concat({num_events_}, batch_shape()));
  return values;
}
DistributionPtr Categorical::expand(const Shape& b) const {
  Shape s = concat(expanded_batch(b), {num_events_});
  ProbsOrLogits p;
  (from_logits_ ? p.logits : p.probs) = kiln::expand(from_logits_ ? logits_ : probs_, s);
  return std::make_shared<Categorical>(p, false);
}

// ---- Multinomial
Multinomial::Multinomial(int64_t total_count, const ProbsOrLogits& p, std::optional<bool> v)
    : total_count_(total_count), cat_(p, v) {
  init(cat_.batch_shape(), {cat_.num_events()}, v);
}
Params Multinomial::arg_constraints() const { return {}; }  // the categorical validates them
std::vector<std::string> Multinomial::repr_params() const { return {}; }  // torch's: lazy properties, not shown
Tensor Multinomial::attribute(const std::string& n) const {
  if (n == "total_count") return scalar_tensor(Scalar(total_count_));
  return cat_.attribute(n);
}
Tensor Multinomial::mean() const { return mul(cat_.probs(), Scalar(total_count_)); }
Tensor Multinomial::variance() const { return mul(mul(cat_.probs(), rsub(cat_.probs(), Scalar(1))), Scalar(total_count_)); }
Tensor Multinomial::sample(const Shape& s) const {
  NoGradGuard ng;
  Tensor draws = cat_.sample(concat({total_count_}, s));  // (n, *s, *batch)
  Shape perm;
  for (int64_t i = 1; i < draws.dim(); ++i) perm.push_back(i);
  perm.push_back(0);
  draws = permute(draws, perm);  // (*s, *batch, n)
  Tensor counts = zeros(extended_shape(s), TensorOptions(draws.dtype()));
  counts = scatter_add(counts, -1, draws, ones_like(draws));
  return to_dtype(counts, cat_.probs().dtype());
}
Tensor Multinomial::log_prob(const Tensor& value) const {
  checked(value);
  TensorList b = broadcast_all({cat_.logits(), value});
  Tensor logits = b[0], v = b[1];
  Tensor log_fact_n = lgamma(add(sum(v, Shape{-1}), Scalar(1)));
  Tensor log_fact_xs = sum(lgamma(add(v, Scalar(1))), Shape{-1});
  logits = where(logical_and(eq(v, Scalar(0)), isneginf(logits)), zeros_like(logits), logits);
  Tensor log_powers = sum(mul(logits, v), Shape{-1});
  return add(sub(log_fact_n, log_fact_xs), log_powers);
}
Tensor Multinomial::entropy() const {
  // n H(categorical) - log n! + sum_k sum_{x >= 1} P(x_k = x) log x! (x_k ~ Binomial(n, p_k))
  const Tensor& p = cat_.probs();
  const double n = static_cast<double>(total_count_);
  Tensor term1 = sub(mul(cat_.entropy(), Scalar(n)), Scalar(std::lgamma(n + 1)));
  if (total_count_ == 0) return term1;
  Shape s{-1};
  for (int64_t i = 0; i < p.dim(); ++i) s.push_back(1);
  Tensor k = view(arange(Scalar(1), Scalar(total_count_ + 1), Scalar(1), opts(p)), s);
  Tensor logits = probs_to_logits(p, true);
  // Binomial log pmf in torch's logits form
  Tensor log_fact = sub(sub(full({}, Scalar(std::lgamma(n + 1)), opts(p)), lgamma(add(k, Scalar(1)))),
                        lgamma(add(rsub(k, Scalar(n)), Scalar(1))));
  Tensor normalize = add(mul(clamp(logits, Scalar(0), std::nullopt), Scalar(n)),
                         mul(log1p(exp(neg(abs(logits)))), Scalar(n)));
  Tensor log_pmf = sub(add(mul(k, logits), log_fact), normalize);
  Tensor weights = lgamma(add(k, Scalar(1)));
  Tensor term2 = sum(mul(exp(log_pmf), weights), Shape{0, -1});
  return add(term1, term2);
}
DistributionPtr Multinomial::expand(const Shape& b) const {
  Shape s = concat(expanded_batch(b), {cat_.num_events()});
  ProbsOrLogits p;
  p.probs = kiln::expand(cat_.probs(), s);
  return std::make_shared<Multinomial>(total_count_, p, false);
}

// ---- Exponential
Exponential::Exponential(const Tensor& rate, std::optional<bool> v) : rate_(rate) { init(shape_of(rate_), {}, v); }
Params Exponential::arg_constraints() const { return {{"rate", constraints::positive()}}; }
Tensor Exponential::attribute(const std::string& n) const { return n == "rate" ? rate_ : Tensor(); }
Tensor Exponential::mean() const { return reciprocal(rate_); }
Tensor Exponential::mode() const { return zeros_like(rate_); }
Tensor Exponential::stddev() const { return reciprocal(rate_); }
Tensor Exponential::variance() const { return pow(rate_, Scalar(-2)); }
Tensor Exponential::entropy() const { return rsub(log(rate_), Scalar(1)); }
Tensor Exponential::rsample(const Shape& s) const {
  Tensor e = empty(extended_shape(s), opts(rate_));
  exponential_(e);
  return div(e, rate_);
}
Tensor Exponential::log_prob(const Tensor& value) const {
  checked(value);
  return sub(log(rate_), mul(rate_, value));
}
Tensor Exponential::cdf(const Tensor& value) const {
  checked(value);
  return rsub(exp(mul(neg(rate_), value)), Scalar(1));
}
Tensor Exponential::icdf(const Tensor& value) const { return div(neg(log1p(neg(value))), rate_); }
DistributionPtr Exponential::expand(const Shape& b) const {
  return std::make_shared<Exponential>(kiln::expand(rate_, expanded_batch(b)), false);
}

// ---- Gamma
Gamma::Gamma(const Tensor& concentration, const Tensor& rate, std::optional<bool> v) {
  TensorList b = broadcast_all({concentration, rate});
  concentration_ = b[0], rate_ = b[1];
  init(shape_of(concentration_), {}, v);
}
Params Gamma::arg_constraints() const {
  return {{"concentration", constraints::positive()}, {"rate", constraints::positive()}};
}
Tensor Gamma::attribute(const std::string& n) const {
  return n == "concentration" ? concentration_ : n == "rate" ? rate_ : Tensor();
}
Tensor Gamma::mean() const { return div(concentration_, rate_); }
Tensor Gamma::mode() const { return clamp(div(sub(concentration_, Scalar(1)), rate_), Scalar(0), std::nullopt); }
Tensor Gamma::variance() const { return div(concentration_, pow(rate_, Scalar(2))); }
Tensor Gamma::entropy() const {
  return add(add(sub(concentration_, log(rate_)), lgamma(concentration_)),
             mul(rsub(concentration_, Scalar(1)), digamma(concentration_)));
}
Tensor Gamma::rsample(const Shape& s) const {
  Shape e = extended_shape(s);
  Tensor value = div(standard_gamma(kiln::expand(concentration_, e)), kiln::expand(rate_, e));
  // torch clamps the draw's value (not its gradient) to the dtype's tiny
  Tensor d = value.detach();
  return add(value, sub(clamp(d, Scalar(finfo_tiny(d.dtype())), std::nullopt), d));
}
Tensor Gamma::log_prob(const Tensor& value) const {
  checked(value);
  Tensor v = to_dtype(value, rate_.dtype());  // (torch casts the value to the rate's dtype)
  return sub(sub(add(xlogy(concentration_, rate_), xlogy(sub(concentration_, Scalar(1)), v)), mul(rate_, v)),
             lgamma(concentration_));
}
Tensor Gamma::cdf(const Tensor& value) const {
  checked(value);
  return igamma(concentration_, mul(rate_, value));
}
DistributionPtr Gamma::expand(const Shape& b) const {
  Shape s = expanded_batch(b);
  return std::make_shared<Gamma>(kiln::expand(concentration_, s), kiln::expand(rate_, s), false);
}

// ---- Dirichlet
Dirichlet::Dirichlet(const Tensor& concentration, std::optional<bool> v) : concentration_(concentration) {
  KILN_CHECK(concentration.dim() >= 1, Value, "Dirichlet", "`concentration` parameter must be at least one-dimensional.");
  init(drop_last(concentration_, 1), {concentration_.sizes().back()}, v);
}
Params Dirichlet::arg_constraints() const {
  return {{"concentration", Constraint::independent(constraints::positive(), 1)}};
}
Tensor Dirichlet::attribute(const std::string& n) const { return n == "concentration" ? concentration_ : Tensor(); }
Tensor Dirichlet::mean() const { return div(concentration_, sum(concentration_, Shape{-1}, true)); }
Tensor Dirichlet::mode() const {
  Tensor cm1 = clamp(sub(concentration_, Scalar(1)), Scalar(0), std::nullopt);
  Tensor mode = div(cm1, sum(cm1, Shape{-1}, true));
  // where every concentration is below 1 the density peaks at a vertex: torch picks the argmax
  Tensor mask = unsqueeze(all(lt(concentration_, Scalar(1)), Shape{-1}), -1);
  Tensor vertex = to_dtype(one_hot(argmax(mode, -1), concentration_.sizes().back()), mode.dtype());
  return where(mask, vertex, mode);
}
Tensor Dirichlet::variance() const {
  Tensor c0 = sum(concentration_, Shape{-1}, true);
  return div(mul(concentration_, sub(c0, concentration_)), mul(pow(c0, Scalar(2)), add(c0, Scalar(1))));
}
Tensor Dirichlet::entropy() const {
  const double k = static_cast<double>(concentration_.sizes().back());
  Tensor a0 = sum(concentration_, Shape{-1});
  return sub(sub(sub(sum(lgamma(concentration_), Shape{-1}), lgamma(a0)), mul(rsub(a0, Scalar(k)), digamma(a0))),
             sum(mul(sub(concentration_, Scalar(1)), digamma(concentration_)), Shape{-1}));
}
Tensor Dirichlet::rsample(const Shape& s) const { return sample_dirichlet(kiln::expand(concentration_, extended_shape(s))); }
Tensor Dirichlet::log_prob(const Tensor& value) const {
  checked(value);
  return sub(add(sum(xlogy(sub(concentration_, Scalar(1)), value), Shape{-1}), lgamma(sum(concentration_, Shape{-1}))),
             sum(lgamma(concentration_), Shape{-1}));
}
DistributionPtr Dirichlet::expand(const Shape& b) const {
  return std::make_shared<Dirichlet>(kiln::expand(concentration_, concat(expanded_batch(b), event_shape())), false);
}

// ---- Beta
Beta::Beta(const Tensor& c1, const Tensor& c0, std::optional<bool> v)
    : dirichlet_([&] {
        TensorList b = broadcast_all({c1, c0});
        return stack({b[0], b[1]}, -1);
      }(), v) {
  init(dirichlet_.batch_shape(), {}, v);
}
Params Beta::arg_constraints() const {
  return {{"concentration1", constraints::positive()}, {"concentration0", constraints::positive()}};
}
std::vector<std::string> Beta::repr_params() const { return {}; }  // torch's: properties, not shown
Tensor Beta::attribute(const std::string& n) const {
  return n == "concentration1" ? concentration1() : n == "concentration0" ? concentration0() : Tensor();
}
Tensor Beta::concentration1() const { return select(dirichlet_.concentration(), -1, 0); }
Tensor Beta::concentration0() const { return select(dirichlet_.concentration(), -1, 1); }
Tensor Beta::mean() const { Tensor c1 = concentration1(); return div(c1, add(c1, concentration0())); }
Tensor Beta::mode() const { return select(dirichlet_.mode(), -1, 0); }
Tensor Beta::variance() const {
  Tensor c1 = concentration1(), c0 = concentration0();
  Tensor total = add(c1, c0);
  return div(mul(c1, c0), mul(pow(total, Scalar(2)), add(total, Scalar(1))));
}
Tensor Beta::rsample(const Shape& s) const { return select(dirichlet_.rsample(s), -1, 0); }
Tensor Beta::log_prob(const Tensor& value) const {
  checked(value);
  Tensor ht = stack({value, rsub(value, Scalar(1))}, -1);
  return Dirichlet(dirichlet_.concentration(), false).log_prob(ht);
}
DistributionPtr Beta::expand(const Shape& b) const {
  Shape s = expanded_batch(b);
  return std::make_shared<Beta>(kiln::expand(concentration1(), s), kiln::expand(concentration0(), s), false);
}

// ---- Poisson
Poisson::Poisson(const Tensor& rate, std::optional<bool> v) : rate_(rate) { init(shape_of(rate_), {}, v); }
Params Poisson::arg_constraints() const { return {{"rate", constraints::nonnegative()}}; }
Tensor Poisson::attribute(const std::string& n) const { return n == "rate" ? rate_ : Tensor(); }
Tensor Poisson::mode() const { return floor(rate_); }
Tensor Poisson::sample(const Shape& s) const {
  NoGradGuard ng;
  return poisson(kiln::expand(rate_, extended_shape(s)));
}
Tensor Poisson::log_prob(const Tensor& value) const {
  checked(value);
  TensorList b = broadcast_all({rate_, value});
  return sub(sub(xlogy(b[1], b[0]), b[0]), lgamma(add(b[1], Scalar(1))));
}
DistributionPtr Poisson::expand(const Shape& b) const {
  return std::make_shared<Poisson>(kiln::expand(rate_, expanded_batch(b)), false);
}

// ---- MultivariateNormal
namespace {
// torch's _precision_to_scale_tril: L with L L^T = P^-1, through the flipped Cholesky of P
Tensor precision_to_scale_tril(const Tensor& P) {
  Tensor Lf = linalg::cholesky(flip(P, {-2, -1}));
  Tensor L_inv = transpose(flip(Lf, {-2, -1}), -2, -1);
  Tensor Id = eye(P.sizes().back(), std::nullopt, opts(P));
  return linalg::solve_triangular(L_inv, Id, false);
}
// sum of squares of L^-1 x over the event (x: (..., n); L: (..., n, n), broadcast)
Tensor batch_mahalanobis(const Tensor& L, const Tensor& x) {
  Shape batch = broadcast_shapes(drop_last(L, 2), drop_last(x, 1));
  const int64_t n = x.sizes().back();
  Tensor Lb = kiln::expand(L, concat(batch, {n, n}));
  Tensor xb = kiln::expand(x, concat(batch, {n}));
  Tensor sol = squeeze(linalg::solve_triangular(Lb, unsqueeze(xb, -1), false), Shape{-1});
  return sum(pow(sol, Scalar(2)), Shape{-1});
}
}  // namespace

MultivariateNormal::MultivariateNormal(const Tensor& loc, const MvnMatrix& m, std::optional<bool> v) {
  KILN_CHECK(loc.dim() >= 1, Value, "MultivariateNormal", "loc must be at least one-dimensional.");
  const int given = m.covariance_matrix.defined() + m.precision_matrix.defined() + m.scale_tril.defined();
  KILN_CHECK(given == 1, Value, "MultivariateNormal",
             "Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.");
  const Tensor& M = m.scale_tril.defined() ? m.scale_tril : m.covariance_matrix.defined() ? m.covariance_matrix
                                                                                          : m.precision_matrix;
  given_ = m.scale_tril.defined() ? "scale_tril" : m.covariance_matrix.defined() ? "covariance_matrix" : "precision_matrix";
  KILN_CHECK(M.dim() >= 2, Value, "MultivariateNormal", given_,
             given_ == "scale_tril" ? " matrix must be at least two-dimensional, with optional leading batch dimensions"
                                    : " must be at least two-dimensional, with optional leading batch dimensions");
  Shape batch = broadcast_shapes(drop_last(M, 2), drop_last(loc, 1), "MultivariateNormal");
  const int64_t n = loc.sizes().back();
  given_m_.scale_tril = m.scale_tril.defined() ? kiln::expand(m.scale_tril, concat(batch, {-1, -1})) : Tensor();
  given_m_.covariance_matrix = m.covariance_matrix.defined() ? kiln::expand(m.covariance_matrix, concat(batch, {-1, -1})) : Tensor();
  given_m_.precision_matrix = m.precision_matrix.defined() ? kiln::expand(m.precision_matrix, concat(batch, {-1, -1})) : Tensor();
  loc_ = kiln::expand(loc, concat(batch, {-1}));
  init(batch, {n}, v);  // validates the given matrix before it is factored
  if (m.scale_tril.defined()) L_ = m.scale_tril;
  else if (m.covariance_matrix.defined()) L_ = linalg::cholesky(m.covariance_matrix);
  else L_ = precision_to_scale_tril(m.precision_matrix);
}
Params MultivariateNormal::arg_constraints() const {
  Params p{{"loc", constraints::real_vector()}};
  if (given_ == "scale_tril") p.push_back({"scale_tril", constraints::lower_cholesky()});
  else p.push_back({given_, constraints::positive_definite()});
  return p;
}
Tensor MultivariateNormal::scale_tril() const { return kiln::expand(L_, concat(batch_shape(), concat(event_shape(), event_shape()))); }
Tensor MultivariateNormal::covariance_matrix() const {
  if (given_m_.covariance_matrix.defined()) return given_m_.covariance_matrix;
  return kiln::expand(matmul(L_, mT(L_)), concat(batch_shape(), concat(event_shape(), event_shape())));
}
Tensor MultivariateNormal::precision_matrix() const {
  if (given_m_.precision_matrix.defined()) return given_m_.precision_matrix;
  return kiln::expand(cholesky_inverse(L_), concat(batch_shape(), concat(event_shape(), event_shape())));
}
Tensor MultivariateNormal::attribute(const std::string& n) const {
  if (n == "loc") return loc_;
  if (n == "scale_tril") return given_ == n ? given_m_.scale_tril : scale_tril();
  if (n == "_unbroadcasted_scale_tril") return L_;
  if (n == "covariance_matrix") return covariance_matrix();
  if (n == "precision_matrix") return precision_matrix();
  return Tensor();
}
std::vector<std::string> MultivariateNormal::repr_params() const { return {"loc", given_}; }
Tensor MultivariateNormal::variance() const { return kiln::expand(sum(pow(L_, Scalar(2)), Shape{-1}), concat(batch_shape(), event_shape())); }
Tensor MultivariateNormal::entropy() const {
  const double n = static_cast<double>(event_shape()[0]);
  Tensor half_log_det = sum(log(diagonal(L_, 0, -2, -1)), Shape{-1});
  Tensor H = add(half_log_det, Scalar(0.5 * n * (1.0 + std::log(2 * M_PI))));
  return batch_shape().empty() ? H : kiln::expand(H, batch_shape());
}
Tensor MultivariateNormal::rsample(const Shape& s) const {
  Tensor eps = randn(extended_shape(s), opts(loc_));
  return add(loc_, squeeze(matmul(L_, unsqueeze(eps, -1)), Shape{-1}));
}
Tensor MultivariateNormal::log_prob(const Tensor& value) const {
  checked(value);
  const double n = static_cast<double>(event_shape()[0]);
  Tensor M = batch_mahalanobis(L_, sub(value, loc_));
  Tensor half_log_det = sum(log(diagonal(L_, 0, -2, -1)), Shape{-1});
  return sub(mul(add(M, Scalar(n * std::log(2 * M_PI))), Scalar(-0.5)), half_log_det);
}
DistributionPtr MultivariateNormal::expand(const Shape& b) const {
  Shape s = expanded_batch(b);
  Shape ms = concat(s, concat(event_shape(), event_shape()));
  MvnMatrix m;
  if (given_ == "scale_tril") m.scale_tril = kiln::expand(L_, ms);
  else if (given_ == "covariance_matrix") m.covariance_matrix = kiln::expand(given_m_.covariance_matrix, ms);
  else m.precision_matrix = kiln::expand(given_m_.precision_matrix, ms);
  return std::make_shared<MultivariateNormal>(kiln::expand(loc_, concat(s, event_shape())), m, false);
}

}  // namespace kiln::distributions
