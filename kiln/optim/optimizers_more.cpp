// Rprop, ASGD, Adamax, NAdam, RAdam: defaults and argument checks as torch 2.13's constructors, lazy
// state as torch's _init_group, and the step through the fused kernel (detail/fused.h).
#include <cmath>
#include <string_view>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/ops.h"
#include "kiln/optim/detail/fused.h"
#include "kiln/optim/detail/options_util.h"
#include "kiln/optim/detail/step_util.h"
#include "kiln/optim/optimizers.h"

namespace kiln::optim {
namespace {

using detail::Algo;
using detail::check_flags;
using detail::check_nonneg;
using detail::merge;
using detail::single_group;
using detail::Hyper;
using detail::Segment;
using detail::Updater;
using detail::betas_of;
using detail::bump_step;
using detail::fill_missing;
using detail::hyper_of;
using detail::step_dtype;

}  // namespace

// ---- Rprop ---------------------------------------------------------------------------------------------
Options rprop_defaults(const Options& given) {
  const char* op = "Rprop";
  Options o = merge(op,
                    {{"lr", 1e-2},
                     {"etas", Value::tuple({0.5, 1.2})},
                     {"step_sizes", Value::tuple({1e-6, 50.0})},
                     {"foreach", Value()},
                     {"maximize", false},
                     {"differentiable", false},
                     {"capturable", false}},
                    given);
  check_nonneg(op, o, "lr", "learning rate");
  std::vector<Value> etas = o.get("etas").items();
  KILN_CHECK(etas.size() == 2, Value, op, "etas must be a pair (etaminus, etaplus)");
  std::vector<Value> sizes = o.get("step_sizes").items();
  KILN_CHECK(sizes.size() == 2, Value, op, "step_sizes must be a pair (min, max)");
  const double em = etas[0].to_double("etas"), ep = etas[1].to_double("etas");
  KILN_CHECK(0.0 < em && em < 1.0 && 1.0 < ep, Value, op, "Invalid eta values: ", etas[0].repr(), ", ",
             etas[1].repr());
  check_flags(op, o);
  return o;
}

Rprop::Rprop(const TensorList& params, const RpropOptions& o) : Rprop(single_group(params), o.to_options()) {}
Rprop::Rprop(std::vector<ParamGroup> groups, const RpropOptions& o) : Rprop(std::move(groups), o.to_options()) {}
Rprop::Rprop(std::vector<ParamGroup> groups, const Options& defaults) : Optimizer("Rprop", rprop_defaults(defaults)) {
  init_groups(std::move(groups));
}

void Rprop::step_group(ParamGroup& group) {
  const Options& o = group.options;
  Hyper h = hyper_of(name_.c_str(), o, {"lr", "maximize"});
  std::vector<Value> etas = o.get("etas").items(), sizes = o.get("step_sizes").items();
  h.beta1 = etas[0].to_double("etas"), h.beta2 = etas[1].to_double("etas");
  h.momentum = sizes[0].to_double("step_sizes"), h.dampening = sizes[1].to_double("step_sizes");
  Updater up(name_.c_str());
  for (const Tensor& p : group.params) {
    Tensor g = grad(p);
    if (!g.defined()) continue;
    ParamState& st = state_[p.impl()];
    if (st.empty()) {
      st.set("step", zeros({}, step_dtype()));
      st.set("prev", zeros_like(p));
      Scalar v = is_complex(p.dtype()) ? Scalar(std::complex<double>(h.lr, h.lr)) : Scalar(h.lr);
      st.set("step_size", full_like(p, v));
    }
    bump_step(name_.c_str(), st);
    up.add(p, g, &st, {"prev", "step_size"}, Segment());
  }
  up.run(Algo::Rprop, h);
}

void Rprop::fix_loaded_group(Options& o) const {
  fill_missing(o, {{"foreach", Value()}, {"maximize", false}, {"differentiable", false}, {"capturable", false}});
}

// ---- ASGD ----------------------------------------------------------------------------------------------
Options asgd_defaults(const Options& given) {
  const char* op = "ASGD";
  Options o = merge(op,
                    {{"lr", 1e-2},
                     {"lambd", 1e-4},
                     {"alpha", 0.75},
                     {"t0", 1e6},
                     {"weight_decay", 0},
                     {"foreach", Value()},
                     {"maximize", false},
                     {"differentiable", false},
                     {"capturable", false}},
                    given);
  check_nonneg(op, o, "lr", "learning rate");
  check_nonneg(op, o, "weight_decay", "weight_decay value");
  check_flags(op, o);
  return o;
}

ASGD::ASGD(const TensorList& params, const ASGDOptions& o) : ASGD(single_group(params), o.to_options()) {}
ASGD::ASGD(std::vector<ParamGroup> groups, const ASGDOptions& o) : ASGD(std::move(groups), o.to_options()) {}
ASGD::ASGD(std::vector<ParamGroup> groups, const Options& defaults) : Optimizer("ASGD", asgd_defaults(defaults)) {
  init_groups(std::move(groups));
}

void ASGD::step_group(ParamGroup& group) {
  const Options& o = group.options;
  Hyper h = hyper_of(name_.c_str(), o, {"lr", "weight_decay", "maximize"});
  const double lambd = o.get_double("lambd"), alpha = o.get_double("alpha"), t0 = o.get_double("t0");
  h.alpha = lambd;
  Updater up(name_.c_str());
  // eta and mu (torch keeps them as 0-dim tensors of the scalar dtype) move after the update
  std::vector<std::pair<Tensor, Tensor>> scalars;
  std::vector<double> steps;
  for (const Tensor& p : group.params) {
    Tensor g = grad(p);
    if (!g.defined()) continue;
    ParamState& st = state_[p.impl()];
    if (st.empty()) {
      st.set("step", zeros({}, step_dtype()));
      st.set("eta", full({}, Scalar(h.lr), step_dtype()));
      st.set("mu", ones({}, step_dtype()));
      st.set("ax", zeros_like(p));
    }
    steps.push_back(bump_step(name_.c_str(), st));
    Segment s;
    s.c0 = st.get("eta").item<double>();
    s.c1 = st.get("mu").item<double>();
    scalars.emplace_back(st.get("eta"), st.get("mu"));
    up.add(p, g, &st, {"ax"}, s);
  }
  up.run(Algo::ASGD, h);
  for (size_t i = 0; i < scalars.size(); ++i) {
    fill_(scalars[i].first, Scalar(h.lr / std::pow(1 + lambd * h.lr * steps[i], alpha)));
    fill_(scalars[i].second, Scalar(1 / std::max(1.0, steps[i] - t0)));
  }
}

void ASGD::fix_loaded_group(Options& o) const {
  fill_missing(o, {{"foreach", Value()}, {"maximize", false}, {"differentiable", false}, {"capturable", false}});
}

// ---- Adamax, NAdam, RAdam -----------------------------------------------------------------------------
namespace {
// torch's checks for the Adam family: lr, eps, each beta in [0, 1), weight_decay (and the extra keys).
Options adam_family_defaults(const char* op, Options base, const Options& given,
                             std::initializer_list<const char*> nonneg_extra = {}) {
  Options o = merge(op, std::move(base), given);
  if (o.get("betas").kind() == Value::Kind::List) o.set("betas", Value::tuple(o.get("betas").items()));
  check_nonneg(op, o, "lr", "learning rate");
  check_nonneg(op, o, "eps", "epsilon value");
  const Value& betas = o.get("betas");
  KILN_CHECK((betas.kind() == Value::Kind::Tuple || betas.kind() == Value::Kind::List) && betas.items().size() == 2,
             Value, op, "betas must be a pair of floats, but got ", betas.repr());
  for (int i = 0; i < 2; ++i) {
    double x = betas.items()[i].to_double("betas");
    KILN_CHECK(0.0 <= x && x < 1.0, Value, op, "Invalid beta parameter at index ", i, ": ", betas.items()[i].repr());
  }
  check_nonneg(op, o, "weight_decay", "weight_decay value");
  for (const char* k : nonneg_extra) check_nonneg(op, o, k, (std::string(k) + " value").c_str());
  check_flags(op, o);
  return o;
}

// A 0-dim state scalar times x, rounded as torch's in-place mul_ of a tensor of the step dtype does.
double scaled_state(const Tensor& t, double x) {
  double v = t.item<double>();
  if (t.dtype() == kFloat32) return static_cast<double>(static_cast<float>(v) * static_cast<float>(x));
  return v * x;
}
}  // namespace

Options adamax_defaults(const Options& given) {
  return adam_family_defaults("Adamax",
                              {{"lr", 2e-3},
                               {"betas", Value::floats({0.9, 0.999}, true)},
                               {"eps", 1e-8},
                               {"weight_decay", 0},
                               {"foreach", Value()},
                               {"maximize", false},
                               {"differentiable", false},
                               {"capturable", false}},
                              given);
}

Options nadam_defaults(const Options& given) {
  return adam_family_defaults("NAdam",
                              {{"lr", 2e-3},
                               {"betas", Value::floats({0.9, 0.999}, true)},
                               {"eps", 1e-8},
                               {"weight_decay", 0},
                               {"momentum_decay", 4e-3},
                               {"decoupled_weight_decay", false},
                               {"maximize", false},
                               {"foreach", Value()},
                               {"capturable", false},
                               {"differentiable", false}},
                              given, {"momentum_decay"});
}

Options radam_defaults(const Options& given) {
  return adam_family_defaults("RAdam",
                              {{"lr", 1e-3},
                               {"betas", Value::floats({0.9, 0.999}, true)},
                               {"eps", 1e-8},
                               {"weight_decay", 0},
                               {"maximize", false},
                               {"foreach", Value()},
                               {"capturable", false},
                               {"decoupled_weight_decay", false},
                               {"differentiable", false}},
                              given);
}

#define KILN_OPTIM_CTORS(N, defaults_fn)                                                                     \
  N::N(const TensorList& params, const N##Options& o) : N(single_group(params), o.to_options()) {}          \
  N::N(std::vector<ParamGroup> groups, const N##Options& o) : N(std::move(groups), o.to_options()) {}       \
  N::N(std::vector<ParamGroup> groups, const Options& defaults) : Optimizer(#N, defaults_fn(defaults)) {     \
    init_groups(std::move(groups));                                                                         \
  }
KILN_OPTIM_CTORS(Adamax, adamax_defaults)
KILN_OPTIM_CTORS(NAdam, nadam_defaults)
KILN_OPTIM_CTORS(RAdam, radam_defaults)
#undef KILN_OPTIM_CTORS

void Adamax::step_group(ParamGroup& group) {
  Hyper h = hyper_of(name_.c_str(), group.options, {"lr", "betas", "eps", "weight_decay", "maximize"});
  Updater up(name_.c_str());
  for (const Tensor& p : group.params) {
    Tensor g = grad(p);
    if (!g.defined()) continue;
    ParamState& st = state_[p.impl()];
    if (st.empty()) {
      st.set("step", zeros({}, step_dtype()));
      st.set("exp_avg", zeros_like(p));
      st.set("exp_inf", zeros_like(p));
    }
    double step = bump_step(name_.c_str(), st);
    Segment s;
    s.c0 = h.lr / (1 - std::pow(h.beta1, step));
    up.add(p, g, &st, {"exp_avg", "exp_inf"}, s);
  }
  up.run(Algo::Adamax, h);
}

void NAdam::step_group(ParamGroup& group) {
  const Options& o = group.options;
  Hyper h = hyper_of(name_.c_str(), o, {"lr", "betas", "eps", "weight_decay", "maximize", "decoupled_weight_decay"});
  const double md = o.get_double("momentum_decay");
  Updater up(name_.c_str());
  for (const Tensor& p : group.params) {
    Tensor g = grad(p);
    if (!g.defined()) continue;
    ParamState& st = state_[p.impl()];
    if (st.empty()) {
      st.set("step", zeros({}, step_dtype()));
      st.set("mu_product", ones({}, step_dtype()));
      st.set("exp_avg", zeros_like(p));
      st.set("exp_avg_sq", zeros_like(p));
    }
    double step = bump_step(name_.c_str(), st);
    const double mu = h.beta1 * (1.0 - 0.5 * std::pow(0.96, step * md));
    const double mu_next = h.beta1 * (1.0 - 0.5 * std::pow(0.96, (step + 1) * md));
    const Tensor& mp = st.get("mu_product");
    const double mu_product = scaled_state(mp, mu);
    fill_(mp, mu_product);
    mp.bump_version();
    Segment s;
    s.c0 = 1 - std::pow(h.beta2, step);
    s.c1 = -h.lr * (1.0 - mu) / (1.0 - mu_product);
    s.c2 = (-h.lr * mu_next) / (1.0 - mu_product * mu_next);
    up.add(p, g, &st, {"exp_avg", "exp_avg_sq"}, s);
  }
  up.run(Algo::NAdam, h);
}

void RAdam::step_group(ParamGroup& group) {
  Hyper h = hyper_of(name_.c_str(), group.options,
                     {"lr", "betas", "eps", "weight_decay", "maximize", "decoupled_weight_decay"});
  Updater up(name_.c_str());
  for (const Tensor& p : group.params) {
    Tensor g = grad(p);
    if (!g.defined()) continue;
    ParamState& st = state_[p.impl()];
    if (st.empty()) {
      st.set("step", zeros({}, step_dtype()));
      st.set("exp_avg", zeros_like(p));
      st.set("exp_avg_sq", zeros_like(p));
    }
    double step = bump_step(name_.c_str(), st);
    const double bc1 = 1 - std::pow(h.beta1, step), bc2 = 1 - std::pow(h.beta2, step);
    const double rho_inf = 2 / (1 - h.beta2) - 1;
    const double rho_t = rho_inf - 2 * step * std::pow(h.beta2, step) / bc2;
    Segment s;
    s.c0 = bc1;
    s.c1 = std::pow(bc2, 0.5);
    s.c2 = rho_t > 5.0 ? std::pow((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t), 0.5)
                       : -1.0;
    up.add(p, g, &st, {"exp_avg", "exp_avg_sq"}, s);
  }
  up.run(Algo::RAdam, h);
}

void Adamax::fix_loaded_group(Options& o) const {
  fill_missing(o, {{"foreach", Value()}, {"maximize", false}, {"differentiable", false}, {"capturable", false}});
}
void NAdam::fix_loaded_group(Options& o) const {
  fill_missing(o, {{"decoupled_weight_decay", false}, {"maximize", false}, {"foreach", Value()},
                   {"capturable", false}, {"differentiable", false}});
}
void RAdam::fix_loaded_group(Options& o) const {
  fill_missing(o, {{"maximize", false}, {"foreach", Value()}, {"capturable", false},
                   {"decoupled_weight_decay", false}, {"differentiable", false}});
}

}  // namespace kiln::optim
