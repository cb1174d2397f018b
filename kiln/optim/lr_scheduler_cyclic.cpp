// ConstantLR, PolynomialLR, CosineAnnealingWarmRestarts and CyclicLR (torch 2.13's formulas and
// state-dict keys); the other schedulers are in lr_scheduler.cpp.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "kiln/optim/detail/scheduler_util.h"
#include "kiln/optim/lr_scheduler.h"

namespace kiln::optim {

using detail::get;
using detail::per_group;
constexpr double kPi = std::numbers::pi;

// ---- ConstantLR / PolynomialLR -------------------------------------------------------------------
ConstantLR::ConstantLR(Optimizer& opt, double factor, int64_t total_iters, int64_t last_epoch)
    : LRScheduler("ConstantLR", opt), factor_(factor), total_iters_(total_iters) {
  KILN_CHECK(!(factor > 1.0 || factor < 0), Value, "ConstantLR",
             "Constant multiplicative factor expected to be between 0 and 1.");
  init(last_epoch);
}

std::vector<double> ConstantLR::get_lr() {
  std::vector<double> r = group_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : r) lr *= factor_;
  } else if (last_epoch_ == total_iters_) {
    for (double& lr : r) lr *= 1.0 / factor_;
  }
  return r;
}

std::optional<std::vector<double>> ConstantLR::closed_form_lr() {
  std::vector<double> r;
  for (double b : base_lrs_) r.push_back(b * (factor_ + double(last_epoch_ >= total_iters_) * (1 - factor_)));
  return r;
}

void ConstantLR::save_extra(std::vector<std::pair<Value, Value>>& d) const {
  d.emplace_back("factor", factor_);
  d.emplace_back("total_iters", total_iters_);
}

void ConstantLR::load_extra(const Value& d) {
  if (const Value* v = get(d, "factor")) factor_ = v->to_double("factor");
  if (const Value* v = get(d, "total_iters")) total_iters_ = v->to_int("total_iters");
}

PolynomialLR::PolynomialLR(Optimizer& opt, int64_t total_iters, double power, int64_t last_epoch)
    : LRScheduler("PolynomialLR", opt), total_iters_(total_iters), power_(power) {
  init(last_epoch);
}

std::vector<double> PolynomialLR::get_lr() {
  std::vector<double> r = group_lrs();
  if (is_initial_ || last_epoch_ > total_iters_) return r;
  const double T = double(total_iters_), e = double(last_epoch_);
  const double decay = std::pow((1.0 - e / T) / (1.0 - (e - 1) / T), power_);
  for (double& lr : r) lr *= decay;
  return r;
}

std::optional<std::vector<double>> PolynomialLR::closed_form_lr() {
  std::vector<double> r;
  for (double b : base_lrs_)
    r.push_back(b * std::pow(1.0 - double(std::min(total_iters_, last_epoch_)) / double(total_iters_), power_));
  return r;
}

void PolynomialLR::save_extra(std::vector<std::pair<Value, Value>>& d) const {
  d.emplace_back("total_iters", total_iters_);
  d.emplace_back("power", power_);
}

void PolynomialLR::load_extra(const Value& d) {
  if (const Value* v = get(d, "total_iters")) total_iters_ = v->to_int("total_iters");
  if (const Value* v = get(d, "power")) power_ = v->to_double("power");
}

// ---- CosineAnnealingWarmRestarts ------------------------------------------------------------------
CosineAnnealingWarmRestarts::CosineAnnealingWarmRestarts(Optimizer& opt, int64_t T_0, int64_t T_mult,
                                                         double eta_min, int64_t last_epoch)
    : LRScheduler("CosineAnnealingWarmRestarts", opt), T_0_(T_0), T_i_(T_0), T_mult_(T_mult),
      eta_min_(eta_min), T_cur_(double(last_epoch)) {
  KILN_CHECK(T_0 > 0, Value, name_.c_str(), "Expected positive integer T_0, but got ", T_0);
  KILN_CHECK(T_mult >= 1, Value, name_.c_str(), "Expected integer T_mult >= 1, but got ", T_mult);
  init(last_epoch);
}

std::vector<double> CosineAnnealingWarmRestarts::get_lr() {
  std::vector<double> r;
  for (double b : base_lrs_) r.push_back(eta_min_ + (b - eta_min_) * (1 + std::cos(kPi * T_cur_ / double(T_i_))) / 2);
  return r;
}

// torch overrides step() itself (no _step_count change): one step, or a jump to `epoch`.
void CosineAnnealingWarmRestarts::step() {
  if (last_epoch_ < 0) return step_to(0.0);
  last_epoch_ += 1;
  T_cur_ += 1;
  if (T_cur_ >= double(T_i_)) {
    T_cur_ = std::fmod(T_cur_, double(T_i_));
    T_i_ *= T_mult_;
  }
  apply();
}

void CosineAnnealingWarmRestarts::step_to(double epoch) {
  KILN_CHECK(epoch >= 0, Value, name_.c_str(), "Expected non-negative epoch, but got ", epoch);
  if (epoch >= double(T_0_)) {
    if (T_mult_ == 1) {
      T_cur_ = std::fmod(epoch, double(T_0_));
    } else {
      const double m = double(T_mult_);
      int64_t n = static_cast<int64_t>(std::log(epoch / double(T_0_) * (m - 1) + 1) / std::log(m));
      T_cur_ = epoch - double(T_0_) * (std::pow(m, double(n)) - 1) / (m - 1);
      T_i_ = T_0_ * static_cast<int64_t>(std::llround(std::pow(m, double(n))));
    }
  } else {
    T_i_ = T_0_;
    T_cur_ = epoch;
  }
  last_epoch_ = static_cast<int64_t>(std::floor(epoch));
  apply();
}

void CosineAnnealingWarmRestarts::apply() {
  std::vector<double> v = get_lr();
  auto& groups = opt_->param_groups();
  for (size_t i = 0; i < groups.size(); ++i) groups[i].set_lr(v[i]);
  last_lr_ = group_lrs();
}

void CosineAnnealingWarmRestarts::save_extra(std::vector<std::pair<Value, Value>>& d) const {
  d.emplace_back("T_0", T_0_);
  d.emplace_back("T_i", T_i_);
  d.emplace_back("T_mult", T_mult_);
  d.emplace_back("eta_min", eta_min_);
  if (T_cur_ == std::floor(T_cur_)) d.emplace_back("T_cur", static_cast<int64_t>(T_cur_));
  else d.emplace_back("T_cur", T_cur_);
}

void CosineAnnealingWarmRestarts::load_extra(const Value& d) {
  if (const Value* v = get(d, "T_0")) T_0_ = v->to_int("T_0");
  if (const Value* v = get(d, "T_i")) T_i_ = v->to_int("T_i");
  if (const Value* v = get(d, "T_mult")) T_mult_ = v->to_int("T_mult");
  if (const Value* v = get(d, "eta_min")) eta_min_ = v->to_double("eta_min");
  if (const Value* v = get(d, "T_cur")) T_cur_ = v->to_double("T_cur");
}

// ---- CyclicLR -------------------------------------------------------------------------------------------
CyclicLR::CyclicLR(Optimizer& opt, const std::vector<double>& base_lr, const std::vector<double>& max_lr,
                   const CyclicLROptions& o)
    : LRScheduler("CyclicLR", opt), gamma_(o.gamma), mode_(o.mode), scale_mode_(o.scale_mode),
      scale_fn_(o.scale_fn), cycle_momentum_(o.cycle_momentum) {
  const char* op = "CyclicLR";
  auto& groups = opt.param_groups();
  std::vector<double> base = per_group(op, "base_lr", base_lr, groups.size());
  if (o.last_epoch == -1)
    for (size_t i = 0; i < groups.size(); ++i) groups[i].set_lr(base[i]);
  max_lrs_ = per_group(op, "max_lr", max_lr, groups.size());
  const double up = double(o.step_size_up), down = o.step_size_down ? double(*o.step_size_down) : up;
  total_size_ = up + down;
  step_ratio_ = up / total_size_;
  KILN_CHECK(mode_ == "triangular" || mode_ == "triangular2" || mode_ == "exp_range" || scale_fn_, Value, op,
             "mode is invalid and scale_fn is None");
  if (!scale_fn_) scale_mode_ = mode_ == "exp_range" ? "iterations" : "cycle";
  if (cycle_momentum_) {
    const Options& d = opt.defaults();
    KILN_CHECK(d.contains("momentum") || d.contains("betas"), Value, op,
               "optimizer must support momentum or beta1 with `cycle_momentum` option enabled");
    use_beta1_ = d.contains("betas");
    base_momentums_ = per_group(op, "base_momentum", o.base_momentum, groups.size());
    max_momentums_ = per_group(op, "max_momentum", o.max_momentum, groups.size());
    if (o.last_epoch == -1)
      for (size_t i = 0; i < groups.size(); ++i) {
        Options& g = groups[i].options;
        if (use_beta1_) {
          std::vector<Value> betas = g.get("betas").items();
          betas[0] = max_momentums_[i];
          g.set("betas", Value::tuple(std::move(betas)));
        } else {
          g.set("momentum", max_momentums_[i]);
        }
        g.set("max_momentum", max_momentums_[i]);
        g.set("base_momentum", base_momentums_[i]);
      }
  }
  init(o.last_epoch);
  base_lrs_ = base;  // torch sets them after its base initialisation
}

double CyclicLR::scale(double x) const {
  if (scale_fn_) return scale_fn_(x);
  if (mode_ == "triangular") return 1.0;
  if (mode_ == "triangular2") return 1 / std::pow(2.0, x - 1);
  return std::pow(gamma_, x);
}

std::vector<double> CyclicLR::get_lr() {
  const double e = double(last_epoch_);
  const double cycle = std::floor(1 + e / total_size_);
  const double x = 1.0 + e / total_size_ - cycle;
  const double f = x <= step_ratio_ ? x / step_ratio_ : (x - 1) / (step_ratio_ - 1);
  const double s = scale(scale_mode_ == "cycle" ? cycle : e);
  std::vector<double> r;
  for (size_t i = 0; i < base_lrs_.size(); ++i) r.push_back(base_lrs_[i] + (max_lrs_[i] - base_lrs_[i]) * f * s);
  if (cycle_momentum_) {
    auto& groups = opt_->param_groups();
    for (size_t i = 0; i < groups.size(); ++i) {
      double m = max_momentums_[i] - (max_momentums_[i] - base_momentums_[i]) * f * s;
      Options& g = groups[i].options;
      if (use_beta1_) {
        std::vector<Value> betas = g.get("betas").items();
        betas[0] = m;
        g.set("betas", Value::tuple(std::move(betas)));
      } else {
        g.set("momentum", m);
      }
    }
  }
  return r;
}

void CyclicLR::save_extra(std::vector<std::pair<Value, Value>>& d) const {
  d.emplace_back("max_lrs", Value::floats(max_lrs_));
  d.emplace_back("total_size", total_size_);
  d.emplace_back("step_ratio", step_ratio_);
  d.emplace_back("mode", mode_);
  d.emplace_back("gamma", gamma_);
  d.emplace_back("_scale_fn_custom", Value());
  d.emplace_back("scale_mode", scale_mode_);
  d.emplace_back("cycle_momentum", cycle_momentum_);
  if (cycle_momentum_) {
    d.emplace_back("use_beta1", use_beta1_);
    d.emplace_back("base_momentums", Value::floats(base_momentums_));
    d.emplace_back("max_momentums", Value::floats(max_momentums_));
  }
}

void CyclicLR::load_extra(const Value& d) {
  if (const Value* v = get(d, "max_lrs")) max_lrs_ = v->to_doubles("max_lrs");
  if (const Value* v = get(d, "total_size")) total_size_ = v->to_double("total_size");
  if (const Value* v = get(d, "step_ratio")) step_ratio_ = v->to_double("step_ratio");
  if (const Value* v = get(d, "gamma")) gamma_ = v->to_double("gamma");
  if (cycle_momentum_) {
    if (const Value* v = get(d, "base_momentums")) base_momentums_ = v->to_doubles("base_momentums");
    if (const Value* v = get(d, "max_momentums")) max_momentums_ = v->to_doubles("max_momentums");
  }
}

}  // namespace kiln::optim
