#include "kiln/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kiln/core/error.h"
#include "kiln/optim/detail/scheduler_util.h"

namespace kiln::optim {
namespace {

constexpr double kPi = std::numbers::pi;

// Python's % and // on ints (the result of % has the divisor's sign).
int64_t py_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
int64_t py_floordiv(int64_t a, int64_t b) { return (a - py_mod(a, b)) / b; }

// Resets a flag when the scope ends, exceptions included.
struct FlagScope {
  bool& flag;
  explicit FlagScope(bool& f) : flag(f) { flag = true; }
  ~FlagScope() { flag = false; }
};

using detail::get;
using detail::per_group;

}  // namespace

// ---- base
// ------------------------------------------------------------------------------------------
std::vector<double> LRScheduler::group_lrs() const {
  std::vector<double> r;
  for (const ParamGroup& g : opt_->param_groups()) r.push_back(g.lr());
  return r;
}

void LRScheduler::init(int64_t last_epoch) {
  auto& groups = opt_->param_groups();
  if (last_epoch == -1) {
    for (ParamGroup& g : groups) g.options.setdefault("initial_lr", g.options.get("lr"));
  } else {
    for (size_t i = 0; i < groups.size(); ++i)
      KILN_CHECK(groups[i].options.contains("initial_lr"), Index, name_.c_str(),
                 "param 'initial_lr' is not specified in param_groups[", i,
                 "] when resuming scheduler with last_epoch >= 0.");
  }
  base_lrs_.clear();
  for (const ParamGroup& g : groups) base_lrs_.push_back(g.options.get_double("initial_lr"));
  last_epoch_ = last_epoch;
  initial_step();
}

void LRScheduler::initial_step() {
  step_count_ = 0;
  FlagScope initial(is_initial_);
  step();
}

void LRScheduler::step() {
  ++step_count_;
  update_lr(std::nullopt);
}

void LRScheduler::step(int64_t epoch) {
  ++step_count_;
  update_lr(epoch);
}

void LRScheduler::update_lr(std::optional<int64_t> epoch) {
  std::vector<double> values;
  if (!epoch) {
    ++last_epoch_;
    values = get_lr();
  } else {
    last_epoch_ = *epoch;
    std::optional<std::vector<double>> closed = closed_form_lr();
    values = closed ? *closed : get_lr();
  }
  auto& groups = opt_->param_groups();
  KILN_CHECK(values.size() == groups.size(), Value, name_.c_str(), "got ", values.size(),
             " learning rates for ", groups.size(), " param groups");
  for (size_t i = 0; i < groups.size(); ++i) groups[i].set_lr(values[i]);
  last_lr_ = group_lrs();
}

Value LRScheduler::state_dict() const {
  std::vector<std::pair<Value, Value>> d;
  save_extra(d);
  d.emplace_back("base_lrs", Value::floats(base_lrs_));
  d.emplace_back("last_epoch", last_epoch_);
  d.emplace_back("_step_count", step_count_);
  d.emplace_back("_is_initial", false);
  d.emplace_back("_get_lr_called_within_step", false);
  d.emplace_back("_last_lr", Value::floats(last_lr_));
  return Value::dict(std::move(d));
}

void LRScheduler::load_state_dict(const Value& sd) {
  if (const Value* v = get(sd, "base_lrs")) base_lrs_ = v->to_doubles("base_lrs");
  if (const Value* v = get(sd, "last_epoch")) last_epoch_ = v->to_int("last_epoch");
  if (const Value* v = get(sd, "_step_count")) step_count_ = v->to_int("_step_count");
  if (const Value* v = get(sd, "_last_lr")) last_lr_ = v->to_doubles("_last_lr");
  load_extra(sd);
}

// ---- StepLR
// ----------------------------------------------------------------------------------------
StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma, int64_t last_epoch)
    : LRScheduler("StepLR", opt), step_size_(step_size), gamma_(gamma) {
  KILN_CHECK(step_size != 0, Value, "StepLR", "step_size must not be 0");
  init(last_epoch);
}

std::vector<double> StepLR::get_lr() {
  if (last_epoch_ == 0 || py_mod(last_epoch_, step_size_) != 0) return group_lrs();
  std::vector<double> r = group_lrs();
  for (double& lr : r) lr *= gamma_;
  return r;
}

std::optional<std::vector<double>> StepLR::closed_form_lr() {
  std::vector<double> r;
  for (double b : base_lrs_)
    r.push_back(b * std::pow(gamma_, double(py_floordiv(last_epoch_, step_size_))));
  return r;
}

void StepLR::save_extra(std::vector<std::pair<Value, Value>>& d) const {
  d.emplace_back("step_size", step_size_);
  d.emplace_back("gamma", gamma_);
}

void StepLR::load_extra(const Value& d) {
  if (const Value* v = get(d, "step_size")) step_size_ = v->to_int("step_size");
  if (const Value* v = get(d, "gamma")) gamma_ = v->to_double("gamma");
}

// ---- MultiStepLR
// -----------------------------------------------------------------------------------
MultiStepLR::MultiStepLR(Optimizer& opt, const std::vector<int64_t>& milestones, double gamma,
                         int64_t last_epoch)
    : LRScheduler("MultiStepLR", opt), gamma_(gamma) {
  for (int64_t m : milestones)
    if (milestones_[m]++ == 0) milestone_order_.push_back(m);
  init(last_epoch);
}

std::vector<double> MultiStepLR::get_lr() {
  std::vector<double> r = group_lrs();
  auto it = milestones_.find(last_epoch_);
  if (it == milestones_.end()) return r;
  for (double& lr : r) lr *= std::pow(gamma_, double(it->second));
  return r;
}

std::optional<std::vector<double>> MultiStepLR::closed_form_lr() {
  int64_t passed = 0;  // bisect_right over the sorted milestones (with multiplicity)
  for (const auto& [m, count] : milestones_)
    if (m <= last_epoch_) passed += count;
  std::vector<double> r;
  for (double b : base_lrs_) r.push_back(b * std::pow(gamma_, double(passed)));
  return r;
}

void MultiStepLR::save_extra(std::vector<std::pair<Value, Value>>& d) const {
  // torch's Counter lists its keys by descending count, then first-seen order.
  std::vector<int64_t> order = milestone_order_;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return milestones_.at(a) > milestones_.at(b); });
  std::vector<std::pair<Value, Value>> counter;
  for (int64_t m : order) counter.emplace_back(Value(m), Value(milestones_.at(m)));
  d.emplace_back("milestones", Value::dict(std::move(counter)));
  d.emplace_back("gamma", gamma_);
}

void MultiStepLR::load_extra(const Value& d) {
  if (const Value* v = get(d, "milestones")) {
    milestones_.clear();
    milestone_order_.clear();
    if (v->kind() == Value::Kind::Dict) {
      for (const auto& [k, c] : v->entries()) {
        milestones_[k.to_int("milestone")] += c.to_int("milestone count");
        milestone_order_.push_back(k.to_int());
      }
    } else {
      for (int64_t m : v->to_ints("milestones"))
        if (milestones_[m]++ == 0) milestone_order_.push_back(m);
    }
  }
  if (const Value* v = get(d, "gamma")) gamma_ = v->to_double("gamma");
}

// ---- ExponentialLR
// ---------------------------------------------------------------------------------
ExponentialLR::ExponentialLR(Optimizer& opt, double gamma, int64_t last_epoch)
    : LRScheduler("ExponentialLR", opt), gamma_(gamma) {
  init(last_epoch);
}

std::vector<double> ExponentialLR::get_lr() {
  std::vector<double> r = group_lrs();
  if (is_initial_) return r;
  for (double& lr : r) lr *= gamma_;
  return r;
}

std::optional<std::vector<double>> ExponentialLR::closed_form_lr() {
  std::vector<double> r;
  for (double b : base_lrs_) r.push_back(b * std::pow(gamma_, double(last_epoch_)));
  return r;
}

void ExponentialLR::save_extra(std::vector<std::pair<Value, Value>>& d) const {
  d.emplace_back("gamma", gamma_);
}

void ExponentialLR::load_extra(const Value& d) {
  if (const Value* v = get(d, "gamma")) gamma_ = v->to_double("gamma");
}

// ---- CosineAnnealingLR
// -----------------------------------------------------------------------------
CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min,
                                     int64_t last_epoch)
    : LRScheduler("CosineAnnealingLR", opt), T_max_(T_max), eta_min_(eta_min) {
  KILN_CHECK(T_max != 0, Value, "CosineAnnealingLR", "T_max must not be 0");
  init(last_epoch);
}

std::vector<double> CosineAnnealingLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (is_initial_) return lrs;
  const double T = double(T_max_), e = double(last_epoch_);
  std::vector<double> r;
  for (size_t i = 0; i < lrs.size(); ++i) {
    double base = base_lrs_[i], lr = lrs[i];
    if (step_count_ == 1 && last_epoch_ > 0) {
      r.push_back(eta_min_ + (base - eta_min_) * (1 + std::cos(e * kPi / T)) / 2);
    } else if (py_mod(last_epoch_ - 1 - T_max_, 2 * T_max_) == 0) {
      r.push_back(lr + (base - eta_min_) * (1 - std::cos(kPi / T)) / 2);
    } else {
      r.push_back((1 + std::cos(kPi * e / T)) / (1 + std::cos(kPi * (e - 1) / T)) *
                      (lr - eta_min_) +
                  eta_min_);
    }
  }
  return r;
}

std::optional<std::vector<double>> CosineAnnealingLR::closed_form_lr() {
  std::vector<double> r;
  for (double b : base_lrs_)
    r.push_back(eta_min_ +
                (b - eta_min_) * (1 + std::cos(kPi * double(last_epoch_) / double(T_max_))) / 2);
  return r;
}

void CosineAnnealingLR::save_extra(std::vector<std::pair<Value, Value>>& d) const {
  d.emplace_back("T_max", T_max_);
  d.emplace_back("eta_min", eta_min_);
}

void CosineAnnealingLR::load_extra(const Value& d) {
  if (const Value* v = get(d, "T_max")) T_max_ = v->to_int("T_max");
  if (const Value* v = get(d, "eta_min")) eta_min_ = v->to_double("eta_min");
}

// ---- LinearLR
// --------------------------------------------------------------------------------------
LinearLR::LinearLR(Optimizer& opt, double start_factor, double end_factor, int64_t total_iters,
                   int64_t last_epoch)
    : LRScheduler("LinearLR", opt),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  KILN_CHECK(
      !(start_factor > 1.0 || start_factor <= 0), Value, "LinearLR",
      "Starting multiplicative factor expected to be greater than 0 and less or equal to 1.");
  KILN_CHECK(!(end_factor > 1.0 || end_factor < 0), Value, "LinearLR",
             "Ending multiplicative factor expected to be between 0 and 1.");
  init(last_epoch);
}

std::vector<double> LinearLR::get_lr() {
  std::vector<double> r = group_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : r) lr *= start_factor_;
    return r;
  }
  if (is_initial_ || last_epoch_ > total_iters_) return r;
  const double d = end_factor_ - start_factor_;
  for (double& lr : r)
    lr *= 1.0 + d / (double(total_iters_) * start_factor_ + double(last_epoch_ - 1) * d);
  return r;
}

std::optional<std::vector<double>> LinearLR::closed_form_lr() {
  std::vector<double> r;
  const double d = end_factor_ - start_factor_;
  for (double b : base_lrs_)
    r.push_back(b * (start_factor_ +
                     d * double(std::min(total_iters_, last_epoch_)) / double(total_iters_)));
  return r;
}

void LinearLR::save_extra(std::vector<std::pair<Value, Value>>& d) const {
  d.emplace_back("start_factor", start_factor_);
  d.emplace_back("end_factor", end_factor_);
  d.emplace_back("total_iters", total_iters_);
}

void LinearLR::load_extra(const Value& d) {
  if (const Value* v = get(d, "start_factor")) start_factor_ = v->to_double("start_factor");
  if (const Value* v = get(d, "end_factor")) end_factor_ = v->to_double("end_factor");
  if (const Value* v = get(d, "total_iters")) total_iters_ = v->to_int("total_iters");
}

// ---- LambdaLR
// --------------------------------------------------------------------------------------
LambdaLR::LambdaLR(Optimizer& opt, std::vector<Lambda> lr_lambdas, int64_t last_epoch)
    : LRScheduler("LambdaLR", opt), lambdas_(std::move(lr_lambdas)) {
  size_t n = opt.param_groups().size();
  if (lambdas_.size() == 1 && n != 1) lambdas_.assign(n, lambdas_[0]);
  KILN_CHECK(lambdas_.size() == n, Value, "LambdaLR", "Expected ", n, " lr_lambdas, but got ",
             lambdas_.size());
  for (const Lambda& f : lambdas_)
    KILN_CHECK(bool(f), Type, "LambdaLR", "lr_lambda must be callable");
  init(last_epoch);
}

std::vector<double> LambdaLR::get_lr() {
  std::vector<double> r;
  for (size_t i = 0; i < base_lrs_.size(); ++i)
    r.push_back(base_lrs_[i] * lambdas_[i](last_epoch_));
  return r;
}

void LambdaLR::save_extra(std::vector<std::pair<Value, Value>>& d) const {
  d.emplace_back("lr_lambdas", Value::list(std::vector<Value>(lambdas_.size())));
}

// ---- SequentialLR
// ----------------------------------------------------------------------------------
SequentialLR::SequentialLR(Optimizer& opt, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones, int64_t last_epoch)
    : LRScheduler("SequentialLR", opt),
      schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  const char* op = "SequentialLR";
  KILN_CHECK(!schedulers_.empty(), Value, op,
             "SequentialLR expects at least one scheduler, but got no scheduler.");
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    LRScheduler* s = schedulers_[i].get();
    KILN_CHECK(s != nullptr, Type, op, "SequentialLR at index ", i,
               " should have `optimizer` as its attribute.");
    KILN_CHECK(dynamic_cast<ReduceLROnPlateau*>(s) == nullptr, Value, op,
               "SequentialLR does not support `ReduceLROnPlateau` scheduler as it requires "
               "additional kwargs to be "
               "specified when calling `step`, but got one at index ",
               i, " in the given schedulers sequence.");
    KILN_CHECK(
        &s->optimizer() == &opt, Value, op,
        "SequentialLR expects all schedulers to belong to the same optimizer, but got scheduler ",
        s->name(), " at index ", i, " has ", s->optimizer().name(), ", which is different from ",
        opt.name(), ".");
  }
  KILN_CHECK(milestones_.size() + 1 == schedulers_.size(), Value, op,
             "Sequential Schedulers expects number of schedulers provided to be one more than the "
             "number of "
             "milestone points, but got number of schedulers ",
             schedulers_.size(), " and the number of milestones to be equal to ",
             milestones_.size());
  last_epoch_ = last_epoch + 1;
  for (ParamGroup& g : opt.param_groups()) g.set_lr(g.options.get_double("initial_lr"));
  recursive_undo(this);
  size_t idx =
      std::upper_bound(milestones_.begin(), milestones_.end(), int64_t(0)) - milestones_.begin();
  schedulers_[idx]->initial_step();
  last_lr_ = schedulers_[idx]->get_last_lr();
}

void SequentialLR::recursive_undo(LRScheduler* s) {
  if (auto* seq = dynamic_cast<SequentialLR*>(s)) {
    for (auto& child : seq->schedulers_) recursive_undo(child.get());
  } else {
    s->last_epoch_ -= 1;
  }
}

void SequentialLR::step() {
  ++last_epoch_;
  size_t idx =
      std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin();
  LRScheduler& s = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == last_epoch_) {
    s.update_lr(0);
  } else {
    s.step();
  }
  last_lr_ = s.get_last_lr();
}

void SequentialLR::step(int64_t) {
  KILN_FAIL(Type, "SequentialLR", "step() takes no epoch argument");
}

Value SequentialLR::state_dict() const {
  std::vector<Value> children;
  for (const auto& s : schedulers_) children.push_back(s->state_dict());
  return Value::dict({{"_milestones", Value::ints(milestones_)},
                      {"last_epoch", last_epoch_},
                      {"_last_lr", Value::floats(last_lr_)},
                      {"_schedulers", Value::list(std::move(children))}});
}

void SequentialLR::load_state_dict(const Value& sd) {
  if (const Value* v = get(sd, "_milestones")) milestones_ = v->to_ints("_milestones");
  if (const Value* v = get(sd, "last_epoch")) last_epoch_ = v->to_int("last_epoch");
  if (const Value* v = get(sd, "_last_lr")) last_lr_ = v->to_doubles("_last_lr");
  if (const Value* v = get(sd, "_schedulers")) {
    KILN_CHECK(v->items().size() == schedulers_.size(), Value, "SequentialLR",
               "expected state for ", schedulers_.size(), " schedulers, got ", v->items().size());
    for (size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_state_dict(v->items()[i]);
  }
}

// ---- OneCycleLR
// ------------------------------------------------------------------------------------
OneCycleLR::OneCycleLR(Optimizer& opt, const std::vector<double>& max_lr,
                       const OneCycleLROptions& o)
    : LRScheduler("OneCycleLR", opt),
      anneal_(o.anneal_strategy),
      cycle_momentum_(o.cycle_momentum) {
  const char* op = "OneCycleLR";
  if (o.total_steps) {
    KILN_CHECK(*o.total_steps > 0, Value, op, "Expected positive integer total_steps, but got ",
               *o.total_steps);
    total_steps_ = *o.total_steps;
  } else if (o.epochs && o.steps_per_epoch) {
    KILN_CHECK(*o.epochs > 0, Value, op, "Expected positive integer epochs, but got ", *o.epochs);
    KILN_CHECK(*o.steps_per_epoch > 0, Value, op,
               "Expected positive integer steps_per_epoch, but got ", *o.steps_per_epoch);
    total_steps_ = *o.epochs * *o.steps_per_epoch;
  } else {
    KILN_FAIL(Value, op, "You must define either total_steps OR (epochs AND steps_per_epoch)");
  }
  const double T = double(total_steps_), pct = o.pct_start;
  if (o.three_phase) {
    phases_ = {{pct * T - 1, false, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
               {2 * pct * T - 2, false, "max_lr", "initial_lr", "base_momentum", "max_momentum"},
               {T - 1, true, "initial_lr", "min_lr", "max_momentum", "max_momentum"}};
  } else {
    phases_ = {{pct * T - 1, false, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
               {T - 1, true, "max_lr", "min_lr", "base_momentum", "max_momentum"}};
  }
  KILN_CHECK(!(pct < 0 || pct > 1), Value, op, "Expected float between 0 and 1 pct_start, but got ",
             py_float_repr(pct));
  KILN_CHECK(anneal_ == "cos" || anneal_ == "linear", Value, op,
             "anneal_strategy must be one of 'cos' or 'linear', instead got ", anneal_);
  auto& groups = opt.param_groups();
  std::vector<double> max_lrs = per_group(op, "max_lr", max_lr, groups.size());
  if (o.last_epoch == -1) {
    for (size_t i = 0; i < groups.size(); ++i) {
      Options& g = groups[i].options;
      g.set("initial_lr", max_lrs[i] / o.div_factor);
      g.set("max_lr", max_lrs[i]);
      g.set("min_lr", g.get_double("initial_lr") / o.final_div_factor);
    }
  }
  if (cycle_momentum_) {
    const Options& d = opt.defaults();
    KILN_CHECK(d.contains("momentum") || d.contains("betas"), Value, op,
               "optimizer must support momentum or beta1 with `cycle_momentum` option enabled");
    use_beta1_ = d.contains("betas");
    std::vector<double> maxm = per_group(op, "max_momentum", o.max_momentum, groups.size());
    std::vector<double> basem = per_group(op, "base_momentum", o.base_momentum, groups.size());
    if (o.last_epoch == -1) {
      for (size_t i = 0; i < groups.size(); ++i) {
        Options& g = groups[i].options;
        if (use_beta1_) {
          std::vector<Value> betas = g.get("betas").items();
          KILN_CHECK(!betas.empty(), Value, op, "betas must not be empty");
          betas[0] = maxm[i];
          g.set("betas", Value::tuple(std::move(betas)));
        } else {
          g.set("momentum", maxm[i]);
        }
        g.set("max_momentum", maxm[i]);
        g.set("base_momentum", basem[i]);
      }
    }
  }
  init(o.last_epoch);
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (anneal_ == "cos") {
    double cos_out = std::cos(kPi * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
  }
  return (end - start) * pct + start;
}

std::vector<double> OneCycleLR::get_lr() {
  const int64_t step_num = last_epoch_;
  KILN_CHECK(step_num <= total_steps_, Value, "OneCycleLR", "Tried to step ", step_num,
             " times. The specified number of total steps is ", total_steps_);
  std::vector<double> lrs;
  for (ParamGroup& group : opt_->param_groups()) {
    Options& g = group.options;
    double start_step = 0, lr = 0, momentum = 0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& ph = phases_[i];
      if (double(step_num) <= ph.end_step || i + 1 == phases_.size()) {
        double pct = (double(step_num) - start_step) / (ph.end_step - start_step);
        lr = anneal(g.get_double(ph.start_lr), g.get_double(ph.end_lr), pct);
        if (cycle_momentum_)
          momentum = anneal(g.get_double(ph.start_momentum), g.get_double(ph.end_momentum), pct);
        break;
      }
      start_step = ph.end_step;
    }
    lrs.push_back(lr);
    if (cycle_momentum_) {
      if (use_beta1_) {
        std::vector<Value> betas = g.get("betas").items();
        betas[0] = momentum;
        g.set("betas", Value::tuple(std::move(betas)));
      } else {
        g.set("momentum", momentum);
      }
    }
  }
  return lrs;
}

void OneCycleLR::save_extra(std::vector<std::pair<Value, Value>>& d) const {
  std::vector<Value> phases;
  for (const Phase& p : phases_) {
    Value end = p.end_step_is_int ? Value(int64_t(p.end_step)) : Value(p.end_step);
    phases.push_back(Value::dict({{"end_step", end},
                                  {"start_lr", p.start_lr},
                                  {"end_lr", p.end_lr},
                                  {"start_momentum", p.start_momentum},
                                  {"end_momentum", p.end_momentum}}));
  }
  d.emplace_back("total_steps", total_steps_);
  d.emplace_back("_schedule_phases", Value::list(std::move(phases)));
  d.emplace_back("_anneal_func_type", anneal_);
  d.emplace_back("cycle_momentum", cycle_momentum_);
  if (cycle_momentum_) d.emplace_back("use_beta1", use_beta1_);
}

void OneCycleLR::load_extra(const Value& d) {
  if (const Value* v = get(d, "total_steps")) total_steps_ = v->to_int("total_steps");
  if (const Value* v = get(d, "_anneal_func_type")) anneal_ = v->str_value("_anneal_func_type");
  if (const Value* v = get(d, "cycle_momentum")) cycle_momentum_ = v->to_bool();
  if (const Value* v = get(d, "use_beta1")) use_beta1_ = v->to_bool();
  if (const Value* v = get(d, "_schedule_phases")) {
    std::vector<Phase> phases;
    for (const Value& p : v->items()) {
      const Value& end = p.at("end_step");
      phases.push_back({end.to_double("end_step"), end.kind() == Value::Kind::Int,
                        p.at("start_lr").str_value(), p.at("end_lr").str_value(),
                        p.at("start_momentum").str_value(), p.at("end_momentum").str_value()});
    }
    phases_ = std::move(phases);
  }
}

// ---- ReduceLROnPlateau
// -----------------------------------------------------------------------------
ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& opt, const ReduceLROnPlateauOptions& o)
    : LRScheduler("ReduceLROnPlateau", opt),
      factor_(o.factor),
      threshold_(o.threshold),
      eps_(o.eps),
      patience_(o.patience),
      cooldown_(o.cooldown),
      mode_(o.mode),
      threshold_mode_(o.threshold_mode) {
  const char* op = "ReduceLROnPlateau";
  KILN_CHECK(factor_ < 1.0, Value, op, "Factor should be < 1.0.");
  size_t n = opt.param_groups().size();
  if (!o.min_lrs.empty()) {
    KILN_CHECK(o.min_lrs.size() == n, Value, op, "expected ", n, " min_lrs, got ",
               o.min_lrs.size());
    min_lrs_ = o.min_lrs;
  } else {
    default_min_lr_ = o.min_lr;
    min_lrs_.assign(n, o.min_lr);
  }
  last_epoch_ = 0;
  last_lr_ = group_lrs();
  check_modes();
  mode_worse_ = mode_ == "min" ? INFINITY : -INFINITY;
  best_ = mode_worse_;
}

void ReduceLROnPlateau::check_modes() const {
  KILN_CHECK(mode_ == "min" || mode_ == "max", Value, "ReduceLROnPlateau", "mode ", mode_,
             " is unknown!");
  KILN_CHECK(threshold_mode_ == "rel" || threshold_mode_ == "abs", Value, "ReduceLROnPlateau",
             "threshold mode ", threshold_mode_, " is unknown!");
}

bool ReduceLROnPlateau::is_better(double a, double best) const {
  if (mode_ == "min" && threshold_mode_ == "rel") return a < best * (1.0 - threshold_);
  if (mode_ == "min") return a < best - threshold_;
  if (threshold_mode_ == "rel") return a > best * (threshold_ + 1.0);
  return a > best + threshold_;
}

void ReduceLROnPlateau::step() {
  KILN_FAIL(Type, "ReduceLROnPlateau", "step() missing 1 required positional argument: 'metrics'");
}

void ReduceLROnPlateau::step(double metric) { step(metric, last_epoch_ + 1); }

void ReduceLROnPlateau::step(double metric, int64_t epoch) {
  last_epoch_ = epoch;
  if (is_better(metric, best_)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    num_bad_epochs_ += 1;
  }
  if (cooldown_counter_ > 0) {
    cooldown_counter_ -= 1;
    num_bad_epochs_ = 0;
  }
  if (num_bad_epochs_ > patience_) {
    reduce_lr();
    cooldown_counter_ = cooldown_;
    num_bad_epochs_ = 0;
  }
  last_lr_ = group_lrs();
}

void ReduceLROnPlateau::reduce_lr() {
  auto& groups = opt_->param_groups();
  if (groups.size() != min_lrs_.size()) {
    KILN_CHECK(default_min_lr_.has_value(), Runtime, "ReduceLROnPlateau",
               "The number of param groups in the "
               "`optimizer` (",
               groups.size(), ") differs from when `ReduceLROnPlateau` was initialized (",
               min_lrs_.size(),
               "), usually due to a new param group being added to the optimizer. Please modify "
               "the `min_lrs` field to match the length of the `optimizer` param groups.");
    min_lrs_.assign(groups.size(), *default_min_lr_);
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    double old_lr = groups[i].lr();
    double new_lr = std::max(old_lr * factor_, min_lrs_[i]);
    if (old_lr - new_lr > eps_) groups[i].set_lr(new_lr);
  }
}

Value ReduceLROnPlateau::state_dict() const {
  return Value::dict({{"factor", factor_},
                      {"default_min_lr", default_min_lr_ ? Value(*default_min_lr_) : Value()},
                      {"min_lrs", Value::floats(min_lrs_)},
                      {"patience", patience_},
                      {"cooldown", cooldown_},
                      {"eps", eps_},
                      {"last_epoch", last_epoch_},
                      {"_last_lr", Value::floats(last_lr_)},
                      {"mode_worse", mode_worse_},
                      {"mode", mode_},
                      {"threshold", threshold_},
                      {"threshold_mode", threshold_mode_},
                      {"best", best_},
                      {"cooldown_counter", cooldown_counter_},
                      {"num_bad_epochs", num_bad_epochs_}});
}

void ReduceLROnPlateau::load_state_dict(const Value& sd) {
  if (const Value* v = get(sd, "factor")) factor_ = v->to_double("factor");
  if (const Value* v = get(sd, "default_min_lr"))
    default_min_lr_ =
        v->is_none() ? std::nullopt : std::optional<double>(v->to_double("default_min_lr"));
  if (const Value* v = get(sd, "min_lrs")) min_lrs_ = v->to_doubles("min_lrs");
  if (const Value* v = get(sd, "patience")) patience_ = v->to_int("patience");
  if (const Value* v = get(sd, "cooldown")) cooldown_ = v->to_int("cooldown");
  if (const Value* v = get(sd, "eps")) eps_ = v->to_double("eps");
  if (const Value* v = get(sd, "last_epoch")) last_epoch_ = v->to_int("last_epoch");
  if (const Value* v = get(sd, "_last_lr")) last_lr_ = v->to_doubles("_last_lr");
  if (const Value* v = get(sd, "mode")) mode_ = v->str_value("mode");
  if (const Value* v = get(sd, "threshold")) threshold_ = v->to_double("threshold");
  if (const Value* v = get(sd, "threshold_mode")) threshold_mode_ = v->str_value("threshold_mode");
  if (const Value* v = get(sd, "best")) best_ = v->to_double("best");
  if (const Value* v = get(sd, "cooldown_counter"))
    cooldown_counter_ = v->to_int("cooldown_counter");
  if (const Value* v = get(sd, "num_bad_epochs")) num_bad_epochs_ = v->to_int("num_bad_epochs");
  check_modes();
  mode_worse_ = mode_ == "min" ? INFINITY : -INFINITY;
}

}  // namespace kiln::optim
