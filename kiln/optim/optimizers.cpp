// SGD, Adam/AdamW, RMSprop, Adagrad (Rprop, ASGD, Adamax, NAdam, RAdam: optimizers_more.cpp; LBFGS:
// lbfgs.cpp): defaults and argument checks as torch 2.13's constructors,
// lazy state as torch's _init_group, and the step through the fused kernel (detail/fused.h).
#include "kiln/optim/optimizers.h"

#include <cmath>
#include <map>
#include <string_view>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/ops.h"
#include "kiln/optim/detail/fused.h"
#include "kiln/optim/detail/options_util.h"
#include "kiln/optim/detail/step_util.h"

namespace kiln::optim {
namespace detail {

// Fills `base` (torch's defaults, in torch's order) with the given values; unknown names raise.
Options merge(const char* op, Options base, const Options& given) {
  for (const auto& [k, v] : given.items()) {
    KILN_CHECK(base.contains(k), Type, op, "__init__() got an unexpected keyword argument '", k,
               "'");
    base.set(k, v);
  }
  return base;
}

// torch: `if not 0.0 <= x: raise ValueError(f"Invalid {what}: {x}")` (NaN fails too).
void check_nonneg(const char* op, const Options& o, const char* key, const char* what) {
  const Value& v = o.get(key);
  KILN_CHECK(0.0 <= v.to_double(key), Value, op, "Invalid ", what, ": ", v.repr());
}

void check_flags(const char* op, const Options& o) {
  bool fused = o.contains("fused") && o.get("fused").to_bool();
  bool foreach = o.contains("foreach") && o.get("foreach").to_bool();
  bool differentiable = o.get("differentiable").to_bool();
  KILN_CHECK(!(fused && differentiable), Runtime, op, "`fused` does not support `differentiable`");
  KILN_CHECK(!(fused && foreach), Runtime, op, "`fused` and `foreach` cannot be `True` together.");
  KILN_CHECK(!differentiable, NotImplemented, op, "differentiable=True is not supported by kiln");
}

std::vector<ParamGroup> single_group(const TensorList& params) {
  std::vector<ParamGroup> g;
  if (!params.empty()) g.emplace_back(params);
  return g;
}

}  // namespace detail

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

// ---- typed options -> option maps
// ------------------------------------------------------------------
Options SGDOptions::to_options() const {
  return sgd_defaults({{"lr", lr_},
                       {"momentum", momentum_},
                       {"dampening", dampening_},
                       {"weight_decay", weight_decay_},
                       {"nesterov", nesterov_},
                       {"maximize", maximize_}});
}

Options AdamOptions::to_options() const {
  return adam_defaults({{"lr", lr_},
                        {"betas", Value::floats({std::get<0>(betas_), std::get<1>(betas_)}, true)},
                        {"eps", eps_},
                        {"weight_decay", weight_decay_},
                        {"amsgrad", amsgrad_},
                        {"maximize", maximize_}},
                       false);
}

Options AdamWOptions::to_options() const {
  return adam_defaults({{"lr", lr_},
                        {"betas", Value::floats({std::get<0>(betas_), std::get<1>(betas_)}, true)},
                        {"eps", eps_},
                        {"weight_decay", weight_decay_},
                        {"amsgrad", amsgrad_},
                        {"maximize", maximize_}},
                       true);
}

Options RpropOptions::to_options() const {
  return rprop_defaults({{"lr", lr_},
                         {"etas", Value::tuple({etaminus_, etaplus_})},
                         {"step_sizes", Value::tuple({step_size_min_, step_size_max_})},
                         {"maximize", maximize_}});
}

Options ASGDOptions::to_options() const {
  return asgd_defaults({{"lr", lr_},
                        {"lambd", lambd_},
                        {"alpha", alpha_},
                        {"t0", t0_},
                        {"weight_decay", weight_decay_},
                        {"maximize", maximize_}});
}

Options AdamaxOptions::to_options() const {
  return adamax_defaults({{"lr", lr_},
                          {"betas", Value::floats(betas_, true)},
                          {"eps", eps_},
                          {"weight_decay", weight_decay_},
                          {"maximize", maximize_}});
}

Options NAdamOptions::to_options() const {
  return nadam_defaults({{"lr", lr_},
                         {"betas", Value::floats(betas_, true)},
                         {"eps", eps_},
                         {"weight_decay", weight_decay_},
                         {"momentum_decay", momentum_decay_},
                         {"decoupled_weight_decay", decoupled_weight_decay_},
                         {"maximize", maximize_}});
}

Options RAdamOptions::to_options() const {
  return radam_defaults({{"lr", lr_},
                         {"betas", Value::floats(betas_, true)},
                         {"eps", eps_},
                         {"weight_decay", weight_decay_},
                         {"decoupled_weight_decay", decoupled_weight_decay_},
                         {"maximize", maximize_}});
}

Options LBFGSOptions::to_options() const {
  Options o{{"lr", lr_},
            {"max_iter", max_iter_},
            {"tolerance_grad", tolerance_grad_},
            {"tolerance_change", tolerance_change_},
            {"history_size", history_size_}};
  if (max_eval_) o.set("max_eval", *max_eval_);
  if (line_search_fn_) o.set("line_search_fn", *line_search_fn_);
  return lbfgs_defaults(o);
}

Options RMSpropOptions::to_options() const {
  return rmsprop_defaults({{"lr", lr_},
                           {"alpha", alpha_},
                           {"eps", eps_},
                           {"weight_decay", weight_decay_},
                           {"momentum", momentum_},
                           {"centered", centered_},
                           {"maximize", maximize_}});
}

Options AdagradOptions::to_options() const {
  return adagrad_defaults({{"lr", lr_},
                           {"lr_decay", lr_decay_},
                           {"weight_decay", weight_decay_},
                           {"initial_accumulator_value", initial_accumulator_value_},
                           {"eps", eps_},
                           {"maximize", maximize_}});
}

// ---- SGD
// -------------------------------------------------------------------------------------------
Options sgd_defaults(const Options& given) {
  const char* op = "SGD";
  Options o = merge(op,
                    {{"lr", 1e-3},
                     {"momentum", 0},
                     {"dampening", 0},
                     {"weight_decay", 0},
                     {"nesterov", false},
                     {"maximize", false},
                     {"foreach", Value()},
                     {"differentiable", false},
                     {"fused", Value()}},
                    given);
  const Value &lr = o.get("lr"), &mom = o.get("momentum"), &wd = o.get("weight_decay");
  KILN_CHECK(!(lr.to_double("lr") < 0.0), Value, op, "Invalid learning rate: ", lr.repr());
  KILN_CHECK(!(mom.to_double("momentum") < 0.0), Value, op, "Invalid momentum value: ", mom.repr());
  KILN_CHECK(!(wd.to_double("weight_decay") < 0.0), Value, op,
             "Invalid weight_decay value: ", wd.repr());
  KILN_CHECK(!o.get_bool("nesterov") || (mom.to_double() > 0 && o.get_double("dampening") == 0),
             Value, op, "Nesterov momentum requires a momentum and zero dampening");
  check_flags(op, o);
  return o;
}

SGD::SGD(const TensorList& params, const SGDOptions& o)
    : SGD(single_group(params), o.to_options()) {}
SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& o)
    : SGD(std::move(groups), o.to_options()) {}
SGD::SGD(std::vector<ParamGroup> groups, const Options& defaults)
    : Optimizer("SGD", sgd_defaults(defaults)) {
  init_groups(std::move(groups));
}

void SGD::step_group(ParamGroup& group) {
  const Options& o = group.options;
  Hyper h = hyper_of(name_.c_str(), o, {"lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize"});
  h.use_momentum = h.momentum != 0;
  Updater up(name_.c_str());
  for (const Tensor& p : group.params) {
    Tensor g = grad(p);
    if (!g.defined()) continue;
    Segment s;
    if (!h.use_momentum) {
      up.add(p, g, nullptr, {}, s);
      continue;
    }
    ParamState& st = state_[p.impl()];
    if (!st.get("momentum_buffer").defined()) {
      st.set("momentum_buffer", empty_like(p));
      s.fresh = true;
    }
    up.add(p, g, &st, {"momentum_buffer"}, s);
  }
  up.run(Algo::SGD, h);
}

void SGD::fix_loaded_group(Options& o) const {
  fill_missing(o, {{"nesterov", false},
                   {"maximize", false},
                   {"foreach", Value()},
                   {"differentiable", false},
                   {"fused", false}});
}

// ---- Adam / AdamW
// ----------------------------------------------------------------------------------
Options adam_defaults(const Options& given, bool adamw) {
  const char* op = adamw ? "AdamW" : "Adam";
  Options base{{"lr", 1e-3},
               {"betas", Value::floats({0.9, 0.999}, true)},
               {"eps", 1e-8},
               {"weight_decay", adamw ? Value(1e-2) : Value(0)},
               {"amsgrad", false},
               {"maximize", false},
               {"foreach", Value()},
               {"capturable", false},
               {"differentiable", false},
               {"fused", Value()},
               {"decoupled_weight_decay", adamw}};
  Options o = merge(op, std::move(base), given);
  if (adamw) o.set("decoupled_weight_decay", true);
  if (o.get("betas").kind() == Value::Kind::List)  // torch keeps betas as a tuple
    o.set("betas", Value::tuple(o.get("betas").items()));
  check_nonneg(op, o, "lr", "learning rate");
  check_nonneg(op, o, "eps", "epsilon value");
  const Value& betas = o.get("betas");
  KILN_CHECK((betas.kind() == Value::Kind::Tuple || betas.kind() == Value::Kind::List) &&
                 betas.items().size() == 2,
             Value, op, "betas must be a pair of floats, but got ", betas.repr());
  for (int i = 0; i < 2; ++i) {
    const Value& b = betas.items()[i];
    double x = b.to_double("betas");
    KILN_CHECK(0.0 <= x && x < 1.0, Value, op, "Invalid beta parameter at index ", i, ": ",
               b.repr());
  }
  check_nonneg(op, o, "weight_decay", "weight_decay value");
  KILN_CHECK(betas.items()[0].kind() == Value::Kind::Float &&
                 betas.items()[1].kind() == Value::Kind::Float,
             Value, op, "betas must be either both floats or both Tensors");
  check_flags(op, o);
  return o;
}

Adam::Adam(const TensorList& params, const AdamOptions& o)
    : Adam(single_group(params), o.to_options()) {}
Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& o)
    : Adam(std::move(groups), o.to_options()) {}
Adam::Adam(std::vector<ParamGroup> groups, const Options& defaults)
    : Adam("Adam", std::move(groups), adam_defaults(defaults, false)) {}
Adam::Adam(std::string name, std::vector<ParamGroup> groups, Options defaults)
    : Optimizer(std::move(name), std::move(defaults)) {
  init_groups(std::move(groups));
}

void Adam::step_group(ParamGroup& group) {
  const char* op = name_.c_str();
  const Options& o = group.options;
  const Hyper h = hyper_of(
      op, o, {"lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "decoupled_weight_decay"});
  Updater up(op);
  for (const Tensor& p : group.params) {
    Tensor g = grad(p);
    if (!g.defined()) continue;
    ParamState& st = state_[p.impl()];
    if (st.empty()) {
      st.set("step", zeros({}, step_dtype()));
      st.set("exp_avg", zeros_like(p));
      st.set("exp_avg_sq", zeros_like(p));
      if (h.amsgrad) st.set("max_exp_avg_sq", zeros_like(p));
    }
    if (h.amsgrad && !st.get("max_exp_avg_sq").defined()) st.set("max_exp_avg_sq", zeros_like(p));
    double step = bump_step(op, st);
    double bc1 = 1 - std::pow(h.beta1, step);
    double bc2 = 1 - std::pow(h.beta2, step);
    Segment s;
    s.c0 = -(h.lr / bc1);
    s.c1 = std::pow(bc2, 0.5);
    up.add(p, g, &st, {"exp_avg", "exp_avg_sq", h.amsgrad ? "max_exp_avg_sq" : nullptr}, s);
  }
  up.run(Algo::Adam, h);
}

void Adam::fix_loaded_group(Options& o) const {
  fill_missing(o, {{"amsgrad", false},
                   {"maximize", false},
                   {"foreach", Value()},
                   {"capturable", false},
                   {"differentiable", false},
                   {"decoupled_weight_decay", false},
                   {"fused", Value()}});
}

AdamW::AdamW(const TensorList& params, const AdamWOptions& o)
    : AdamW(single_group(params), o.to_options()) {}
AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& o)
    : AdamW(std::move(groups), o.to_options()) {}
AdamW::AdamW(std::vector<ParamGroup> groups, const Options& defaults)
    : Adam("AdamW", std::move(groups), adam_defaults(defaults, true)) {}

void AdamW::fix_loaded_group(Options& o) const {
  Adam::fix_loaded_group(o);
  o.set("decoupled_weight_decay", true);
}

// ---- RMSprop
// ---------------------------------------------------------------------------------------
Options rmsprop_defaults(const Options& given) {
  const char* op = "RMSprop";
  Options o = merge(op,
                    {{"lr", 1e-2},
                     {"momentum", 0},
                     {"alpha", 0.99},
                     {"eps", 1e-8},
                     {"centered", false},
                     {"weight_decay", 0},
                     {"capturable", false},
                     {"foreach", Value()},
                     {"maximize", false},
                     {"differentiable", false}},
                    given);
  check_nonneg(op, o, "lr", "learning rate");
  check_nonneg(op, o, "eps", "epsilon value");
  check_nonneg(op, o, "momentum", "momentum value");
  check_nonneg(op, o, "weight_decay", "weight_decay value");
  check_nonneg(op, o, "alpha", "alpha value");
  check_flags(op, o);
  return o;
}

RMSprop::RMSprop(const TensorList& params, const RMSpropOptions& o)
    : RMSprop(single_group(params), o.to_options()) {}
RMSprop::RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& o)
    : RMSprop(std::move(groups), o.to_options()) {}
RMSprop::RMSprop(std::vector<ParamGroup> groups, const Options& defaults)
    : Optimizer("RMSprop", rmsprop_defaults(defaults)) {
  init_groups(std::move(groups));
}

void RMSprop::step_group(ParamGroup& group) {
  const Options& o = group.options;
  Hyper h = hyper_of(name_.c_str(), o, {"lr", "alpha", "eps", "weight_decay", "momentum", "centered", "maximize"});
  h.use_momentum = h.momentum > 0;
  Updater up(name_.c_str());
  for (const Tensor& p : group.params) {
    Tensor g = grad(p);
    if (!g.defined()) continue;
    ParamState& st = state_[p.impl()];
    if (st.empty()) {
      st.set("step", zeros({}, step_dtype()));
      st.set("square_avg", zeros_like(p));
    }
    if (h.use_momentum && !st.get("momentum_buffer").defined())
      st.set("momentum_buffer", zeros_like(p));
    if (h.centered && !st.get("grad_avg").defined()) st.set("grad_avg", zeros_like(p));
    bump_step(name_.c_str(), st);
    up.add(p, g, &st,
           {"square_avg", h.use_momentum ? "momentum_buffer" : nullptr,
            h.centered ? "grad_avg" : nullptr},
           Segment());
  }
  up.run(Algo::RMSprop, h);
}

void RMSprop::fix_loaded_group(Options& o) const {
  fill_missing(o, {{"momentum", 0},
                   {"centered", false},
                   {"foreach", Value()},
                   {"maximize", false},
                   {"differentiable", false},
                   {"capturable", false}});
}

// ---- Adagrad
// ---------------------------------------------------------------------------------------
Options adagrad_defaults(const Options& given) {
  const char* op = "Adagrad";
  Options o = merge(op,
                    {{"lr", 1e-2},
                     {"lr_decay", 0},
                     {"eps", 1e-10},
                     {"weight_decay", 0},
                     {"initial_accumulator_value", 0},
                     {"foreach", Value()},
                     {"maximize", false},
                     {"differentiable", false},
                     {"fused", Value()}},
                    given);
  check_nonneg(op, o, "lr", "learning rate");
  check_nonneg(op, o, "lr_decay", "lr_decay value");
  check_nonneg(op, o, "weight_decay", "weight_decay value");
  check_nonneg(op, o, "initial_accumulator_value", "initial_accumulator_value value");
  check_nonneg(op, o, "eps", "epsilon value");
  check_flags(op, o);
  return o;
}

namespace {
void adagrad_init_state(ParamState& st, const Tensor& p, double init) {
  st.set("step", zeros({}, step_dtype()));
  Scalar v = is_complex(p.dtype()) ? Scalar(std::complex<double>(init, init)) : Scalar(init);
  st.set("sum", full_like(p, v));
}
}  // namespace

Adagrad::Adagrad(const TensorList& params, const AdagradOptions& o)
    : Adagrad(single_group(params), o.to_options()) {}
Adagrad::Adagrad(std::vector<ParamGroup> groups, const AdagradOptions& o)
    : Adagrad(std::move(groups), o.to_options()) {}
Adagrad::Adagrad(std::vector<ParamGroup> groups, const Options& defaults)
    : Optimizer("Adagrad", adagrad_defaults(defaults)) {
  init_groups(std::move(groups));
  // torch creates the state of the constructor's parameters eagerly (later groups: lazily).
  NoGradGuard no_grad;
  double init = defaults_.get_double("initial_accumulator_value");
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params) adagrad_init_state(state_[p.impl()], p, init);
}

void Adagrad::group_added(ParamGroup&) {}

void Adagrad::step_group(ParamGroup& group) {
  const Options& o = group.options;
  const Hyper h = hyper_of(name_.c_str(), o, {"lr", "eps", "weight_decay", "maximize"});
  const double lr_decay = o.get_double("lr_decay");
  Updater up(name_.c_str());
  for (const Tensor& p : group.params) {
    Tensor g = grad(p);
    if (!g.defined()) continue;
    ParamState& st = state_[p.impl()];
    if (st.empty()) adagrad_init_state(st, p, o.get_double("initial_accumulator_value"));
    double step = bump_step(name_.c_str(), st);
    Segment s;
    s.c0 = h.lr / (1 + (step - 1) * lr_decay);
    up.add(p, g, &st, {"sum"}, s);
  }
  up.run(Algo::Adagrad, h);
}

void Adagrad::fix_loaded_group(Options& o) const {
  fill_missing(
      o,
      {{"foreach", Value()}, {"maximize", false}, {"differentiable", false}, {"fused", Value()}});
}

}  // namespace kiln::optim
