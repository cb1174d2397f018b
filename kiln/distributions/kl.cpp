// kl_divergence: torch 2.13's registered pairs among kiln's families, with its formulas.
#include <cmath>
#include <functional>
#include <limits>
#include <typeindex>
#include <unordered_map>

#include "kiln/distributions/distributions.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/ops.h"

namespace kiln::distributions {
namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kEulerGamma = 0.57721566490153286060;

Tensor inf_where(const Tensor& mask, const Tensor& v) {
  return where(mask, full_like(v, Scalar(kInf)), v);
}
Tensor x_log_x(const Tensor& t) { return xlogy(t, t); }  // 0 at 0, as torch's
Tensor infinite_like(const Tensor& t) { return full_like(t, Scalar(kInf)); }

Tensor normal_normal(const Normal& p, const Normal& q) {
  Tensor var_ratio = pow(div(p.scale(), q.scale()), Scalar(2));
  Tensor t1 = pow(div(sub(p.loc(), q.loc()), q.scale()), Scalar(2));
  return mul(sub(sub(add(var_ratio, t1), Scalar(1)), log(var_ratio)), Scalar(0.5));
}
Tensor bernoulli_bernoulli(const Bernoulli& p, const Bernoulli& q) {
  Tensor t1 = mul(p.probs(), sub(softplus(neg(q.logits())), softplus(neg(p.logits()))));
  t1 = inf_where(eq(q.probs(), Scalar(0)), t1);
  t1 = where(eq(p.probs(), Scalar(0)), zeros_like(t1), t1);
  Tensor t2 = mul(rsub(p.probs(), Scalar(1)), sub(softplus(q.logits()), softplus(p.logits())));
  t2 = inf_where(eq(q.probs(), Scalar(1)), t2);
  t2 = where(eq(p.probs(), Scalar(1)), zeros_like(t2), t2);
  return add(t1, t2);
}
Tensor categorical_categorical(const Categorical& p, const Categorical& q) {
  Tensor t = mul(p.probs(), sub(p.logits(), q.logits()));
  t = inf_where(expand_as(eq(q.probs(), Scalar(0)), t), t);
  t = where(expand_as(eq(p.probs(), Scalar(0)), t), zeros_like(t), t);
  return sum(t, Shape{-1});
}
Tensor uniform_uniform(const Uniform& p, const Uniform& q) {
  Tensor r = log(div(sub(q.high(), q.low()), sub(p.high(), p.low())));
  return inf_where(logical_or(gt(q.low(), p.low()), lt(q.high(), p.high())), r);
}
Tensor exponential_exponential(const Exponential& p, const Exponential& q) {
  Tensor ratio = div(q.rate(), p.rate());
  return sub(add(neg(log(ratio)), ratio), Scalar(1));
}
Tensor gamma_gamma(const Gamma& p, const Gamma& q) {
  Tensor t1 = mul(q.concentration(), log(div(p.rate(), q.rate())));
  Tensor t2 = sub(lgamma(q.concentration()), lgamma(p.concentration()));
  Tensor t3 = mul(sub(p.concentration(), q.concentration()), digamma(p.concentration()));
  Tensor t4 = mul(sub(q.rate(), p.rate()), div(p.concentration(), p.rate()));
  return add(add(add(t1, t2), t3), t4);
}
Tensor beta_beta(const Beta& p, const Beta& q) {
  Tensor p1 = p.concentration1(), p0 = p.concentration0(), q1 = q.concentration1(), q0 = q.concentration0();
  Tensor sp = add(p1, p0), sq = add(q1, q0);
  Tensor t1 = add(add(lgamma(q1), lgamma(q0)), lgamma(sp));
  Tensor t2 = add(add(lgamma(p1), lgamma(p0)), lgamma(sq));
  Tensor t3 = mul(sub(p1, q1), digamma(p1));
  Tensor t4 = mul(sub(p0, q0), digamma(p0));
  Tensor t5 = mul(sub(sq, sp), digamma(sp));
  return add(add(add(sub(t1, t2), t3), t4), t5);
}
Tensor dirichlet_dirichlet(const Dirichlet& p, const Dirichlet& q) {
  const Tensor &pc = p.concentration(), &qc = q.concentration();
  Tensor sp = sum(pc, Shape{-1}), sq = sum(qc, Shape{-1});
  Tensor t1 = sub(lgamma(sp), lgamma(sq));
  Tensor t2 = sum(sub(lgamma(pc), lgamma(qc)), Shape{-1});
  Tensor t3 = sub(pc, qc);
  Tensor t4 = sub(digamma(pc), unsqueeze(digamma(sp), -1));
  return add(sub(t1, t2), sum(mul(t3, t4), Shape{-1}));
}
Tensor poisson_poisson(const Poisson& p, const Poisson& q) {
  return sub(mul(p.rate(), sub(log(p.rate()), log(q.rate()))), sub(p.rate(), q.rate()));
}
Tensor mvn_mvn(const MultivariateNormal& p, const MultivariateNormal& q) {
  KILN_CHECK(p.event_shape() == q.event_shape(), Value, "kl_divergence",
             "KL-divergence between two Multivariate Normals with different event shapes cannot be computed");
  const Tensor &Lp = p.unbroadcasted_scale_tril(), &Lq = q.unbroadcasted_scale_tril();
  Tensor half_term1 = sub(sum(log(diagonal(Lq, 0, -2, -1)), Shape{-1}), sum(log(diagonal(Lp, 0, -2, -1)), Shape{-1}));
  Shape bq(Lq.sizes().begin(), Lq.sizes().end() - 2), bp(Lp.sizes().begin(), Lp.sizes().end() - 2);
  Shape combined = broadcast_shapes(bq, bp);
  const int64_t n = p.event_shape()[0];
  Shape ms = combined;
  ms.push_back(n), ms.push_back(n);
  Tensor X = linalg::solve_triangular(kiln::expand(Lq, ms), kiln::expand(Lp, ms), false);
  Tensor term2 = sum(pow(X, Scalar(2)), Shape{-2, -1});  // trace(X X^T)
  // Mahalanobis of q.loc - p.loc under Lq
  Tensor diff = sub(q.loc(), p.loc());
  Shape batch = broadcast_shapes(bq, Shape(diff.sizes().begin(), diff.sizes().end() - 1));
  Shape lb = batch, xb = batch;
  lb.push_back(n), lb.push_back(n), xb.push_back(n);
  Tensor sol = squeeze(linalg::solve_triangular(kiln::expand(Lq, lb), unsqueeze(kiln::expand(diff, xb), -1), false), Shape{-1});
  Tensor term3 = sum(pow(sol, Scalar(2)), Shape{-1});
  return add(half_term1, mul(sub(add(term2, term3), Scalar(static_cast<double>(n))), Scalar(0.5)));
}

// ---- pairs across families
Tensor bernoulli_poisson(const Bernoulli& p, const Poisson& q) {
  return sub(neg(p.entropy()), sub(mul(p.probs(), log(q.rate())), q.rate()));
}
Tensor beta_exponential(const Beta& p, const Exponential& q) {
  Tensor c1 = p.concentration1(), c0 = p.concentration0();
  return add(sub(neg(p.entropy()), log(q.rate())), mul(q.rate(), div(c1, add(c1, c0))));
}
Tensor beta_gamma(const Beta& p, const Gamma& q) {
  Tensor c1 = p.concentration1(), c0 = p.concentration0();
  Tensor t1 = neg(p.entropy());
  Tensor t2 = sub(lgamma(q.concentration()), mul(q.concentration(), log(q.rate())));
  Tensor t3 = mul(sub(q.concentration(), Scalar(1)), sub(digamma(c1), digamma(add(c1, c0))));
  Tensor t4 = div(mul(q.rate(), c1), add(c1, c0));
  return add(sub(add(t1, t2), t3), t4);
}
Tensor beta_normal(const Beta& p, const Normal& q) {
  Tensor c1 = p.concentration1(), c0 = p.concentration0();
  Tensor E = div(c1, add(c1, c0));
  Tensor var = pow(q.scale(), Scalar(2));
  Tensor t1 = neg(p.entropy());
  Tensor t2 = mul(log(mul(var, Scalar(2 * M_PI))), Scalar(0.5));
  Tensor t3 = mul(add(div(mul(E, rsub(E, Scalar(1))), add(add(c1, c0), Scalar(1))), pow(E, Scalar(2))), Scalar(0.5));
  Tensor t4 = mul(q.loc(), E);
  Tensor t5 = mul(pow(q.loc(), Scalar(2)), Scalar(0.5));
  return add(add(t1, t2), div(add(sub(t3, t4), t5), var));
}
Tensor beta_uniform(const Beta& p, const Uniform& q) {
  Tensor r = add(neg(p.entropy()), log(sub(q.high(), q.low())));
  return inf_where(logical_or(gt(q.low(), Scalar(0)), lt(q.high(), Scalar(1))), r);
}
Tensor exponential_gamma(const Exponential& p, const Gamma& q) {
  Tensor ratio = div(q.rate(), p.rate());
  Tensor t1 = mul(neg(q.concentration()), log(ratio));
  return sub(add(add(add(t1, ratio), lgamma(q.concentration())), mul(q.concentration(), Scalar(kEulerGamma))),
             Scalar(1 + kEulerGamma));
}
Tensor exponential_normal(const Exponential& p, const Normal& q) {
  Tensor var = pow(q.scale(), Scalar(2));
  Tensor rate_sqr = pow(p.rate(), Scalar(2));
  Tensor t1 = mul(log(mul(mul(rate_sqr, var), Scalar(2 * M_PI))), Scalar(0.5));
  Tensor t2 = reciprocal(rate_sqr);
  Tensor t3 = div(q.loc(), p.rate());
  Tensor t4 = mul(pow(q.loc(), Scalar(2)), Scalar(0.5));
  return add(sub(t1, Scalar(1)), div(add(sub(t2, t3), t4), var));
}
Tensor gamma_exponential(const Gamma& p, const Exponential& q) {
  return add(sub(neg(p.entropy()), log(q.rate())), div(mul(q.rate(), p.concentration()), p.rate()));
}
Tensor gamma_normal(const Gamma& p, const Normal& q) {
  Tensor var = pow(q.scale(), Scalar(2));
  Tensor beta_sqr = pow(p.rate(), Scalar(2));
  const Tensor& c = p.concentration();
  Tensor t1 = sub(sub(mul(log(mul(mul(beta_sqr, var), Scalar(2 * M_PI))), Scalar(0.5)), c), lgamma(c));
  Tensor t2 = div(mul(add(pow(c, Scalar(2)), c), Scalar(0.5)), beta_sqr);
  Tensor t3 = div(mul(q.loc(), c), p.rate());
  Tensor t4 = mul(pow(q.loc(), Scalar(2)), Scalar(0.5));
  return add(add(t1, mul(sub(c, Scalar(1)), digamma(c))), div(add(sub(t2, t3), t4), var));
}
Tensor uniform_beta(const Uniform& p, const Beta& q) {
  Tensor common = sub(p.high(), p.low());
  Tensor t1 = log(common);
  Tensor t2 = div(mul(sub(q.concentration1(), Scalar(1)), sub(sub(x_log_x(p.high()), x_log_x(p.low())), common)), common);
  Tensor t3 = div(mul(sub(q.concentration0(), Scalar(1)),
                      add(sub(x_log_x(rsub(p.high(), Scalar(1))), x_log_x(rsub(p.low(), Scalar(1)))), common)),
                  common);
  Tensor t4 = sub(add(lgamma(q.concentration1()), lgamma(q.concentration0())),
                  lgamma(add(q.concentration1(), q.concentration0())));
  Tensor r = sub(sub(add(t3, t4), t1), t2);
  return inf_where(logical_or(gt(p.high(), Scalar(1)), lt(p.low(), Scalar(0))), r);
}
Tensor uniform_exponential(const Uniform& p, const Exponential& q) {
  Tensor r = sub(true_divide(mul(q.rate(), add(p.high(), p.low())), Scalar(2.0)), log(mul(sub(p.high(), p.low()), q.rate())));
  return inf_where(lt(p.low(), Scalar(0)), r);
}
Tensor uniform_gamma(const Uniform& p, const Gamma& q) {
  Tensor common = sub(p.high(), p.low());
  Tensor t1 = log(common);
  Tensor t2 = sub(lgamma(q.concentration()), mul(q.concentration(), log(q.rate())));
  Tensor t3 = div(mul(rsub(q.concentration(), Scalar(1)), sub(sub(x_log_x(p.high()), x_log_x(p.low())), common)), common);
  Tensor t4 = true_divide(mul(q.rate(), add(p.high(), p.low())), Scalar(2.0));
  return inf_where(lt(p.low(), Scalar(0)), add(add(add(neg(t1), t2), t3), t4));
}
Tensor uniform_normal(const Uniform& p, const Normal& q) {
  Tensor common = sub(p.high(), p.low());
  Tensor t1 = log(div(mul(q.scale(), Scalar(std::sqrt(2 * M_PI))), common));
  Tensor t2 = true_divide(pow(common, Scalar(2)), Scalar(12.0));
  Tensor t3 = pow(true_divide(sub(add(p.high(), p.low()), mul(q.loc(), Scalar(2))), Scalar(2.0)), Scalar(2));
  return add(t1, div(mul(add(t2, t3), Scalar(0.5)), pow(q.scale(), Scalar(2))));
}

using KlFn = std::function<Tensor(const Distribution&, const Distribution&)>;
struct PairHash {
  size_t operator()(const std::pair<std::type_index, std::type_index>& k) const {
    return k.first.hash_code() * 31 + k.second.hash_code();
  }
};
using Map = std::unordered_map<std::pair<std::type_index, std::type_index>, KlFn, PairHash>;
struct Table {
  Map fns;
  std::vector<std::pair<std::string, std::string>> names;
};

template <class P, class Q>
void add_pair(Table& t, Tensor (*f)(const P&, const Q&)) {
  t.fns[{typeid(P), typeid(Q)}] = [f](const Distribution& p, const Distribution& q) {
    return f(static_cast<const P&>(p), static_cast<const Q&>(q));
  };
  t.names.emplace_back(P::kName, Q::kName);
}
// support mismatch: KL is infinite (p puts mass where q has none)
template <class P, class Q>
void add_infinite(Table& t) {
  t.fns[{typeid(P), typeid(Q)}] = [](const Distribution& p, const Distribution&) {
    // torch's _infinite_like of p's first parameter
    return infinite_like(p.attribute(p.arg_constraints().front().first));
  };
  t.names.emplace_back(P::kName, Q::kName);
}

const Table& table() {
  static const Table t = [] {
    Table t;
    add_pair(t, normal_normal);
    add_pair(t, bernoulli_bernoulli);
    add_pair(t, categorical_categorical);
    add_pair(t, uniform_uniform);
    add_pair(t, exponential_exponential);
    add_pair(t, gamma_gamma);
    add_pair(t, beta_beta);
    add_pair(t, dirichlet_dirichlet);
    add_pair(t, poisson_poisson);
    add_pair(t, mvn_mvn);
    add_pair(t, +[](const LogNormal& p, const LogNormal& q) { return normal_normal(p.base_dist(), q.base_dist()); });
    add_pair(t, bernoulli_poisson);
    add_pair(t, beta_exponential);
    add_pair(t, beta_gamma);
    add_pair(t, beta_normal);
    add_pair(t, beta_uniform);
    add_pair(t, exponential_gamma);
    add_pair(t, exponential_normal);
    add_pair(t, gamma_exponential);
    add_pair(t, gamma_normal);
    add_pair(t, uniform_beta);
    add_pair(t, uniform_exponential);
    add_pair(t, uniform_gamma);
    add_pair(t, uniform_normal);
    add_infinite<Exponential, Uniform>(t);
    add_infinite<Exponential, Beta>(t);
    add_infinite<Gamma, Uniform>(t);
    add_infinite<Gamma, Beta>(t);
    add_infinite<Normal, Uniform>(t);
    add_infinite<Normal, Gamma>(t);
    add_infinite<Normal, Exponential>(t);
    add_infinite<Normal, Beta>(t);
    add_infinite<Poisson, Bernoulli>(t);
    return t;
  }();
  return t;
}

}  // namespace

bool has_kl(const Distribution& p, const Distribution& q) {
  return table().fns.count({typeid(p), typeid(q)}) > 0;
}

const std::vector<std::pair<std::string, std::string>>& kl_pairs() { return table().names; }

Tensor kl_divergence(const Distribution& p, const Distribution& q) {
  auto it = table().fns.find({typeid(p), typeid(q)});
  KILN_CHECK(it != table().fns.end(), NotImplemented, "kl_divergence", "No KL(p || q) is implemented for p type ",
             p.name(), " and q type ", q.name());
  return it->second(p, q);
}

}  // namespace kiln::distributions
