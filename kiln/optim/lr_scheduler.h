// Learning-rate schedulers with torch 2.13's formulas: the chainable form step() uses (each lr from
// the group's current lr), the closed form step(epoch) uses where torch has one, last_epoch,
// get_last_lr() and state dicts with torch's keys. They change the optimiser's group options ("lr",
// and for OneCycleLR "momentum" or "betas"[0]) in place, so they also work on kiln.optim from
// Python.
//
//   kiln::optim::StepLR sched(opt, /*step_size=*/30, /*gamma=*/0.1);
//   for (...) { opt.step(); sched.step(); }
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  const std::string& name() const { return name_; }
  // One step of the schedule (chainable form).
  virtual void step();
  // torch's deprecated step(epoch): sets last_epoch and uses the closed form where there is one.
  virtual void step(int64_t epoch);
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  int64_t last_epoch() const { return last_epoch_; }
  void set_last_epoch(int64_t e) { last_epoch_ = e; }
  Optimizer& optimizer() const { return *opt_; }

  // A dict with torch's keys ("base_lrs", "last_epoch", "_step_count", "_last_lr", the scheduler's
  // own settings ...). load_state_dict takes such a dict; keys it lacks keep their values.
  virtual Value state_dict() const;
  virtual void load_state_dict(const Value& sd);

 protected:
  LRScheduler(std::string name, Optimizer& opt) : name_(std::move(name)), opt_(&opt) {}
  // torch's LRScheduler.__init__: "initial_lr" in every group, base_lrs, last_epoch, initial step.
  // Called at the end of each derived constructor (get_lr is virtual).
  void init(int64_t last_epoch);
  void initial_step();
  void update_lr(std::optional<int64_t> epoch);
  // The next lrs (torch's get_lr), and the closed form (torch's _get_closed_form_lr) if any.
  virtual std::vector<double> get_lr() = 0;
  virtual std::optional<std::vector<double>> closed_form_lr() { return std::nullopt; }
  // The scheduler's own state entries (before the common ones) and their loading.
  virtual void save_extra(std::vector<std::pair<Value, Value>>&) const {}
  virtual void load_extra(const Value&) {}
  std::vector<double> group_lrs() const;

  std::string name_;
  Optimizer* opt_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
  bool is_initial_ = false;
  std::vector<double> last_lr_;

  friend class SequentialLR;
};

class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1, int64_t last_epoch = -1);

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() override;
  void save_extra(std::vector<std::pair<Value, Value>>& d) const override;
  void load_extra(const Value& d) override;
  int64_t step_size_;
  double gamma_;
};

class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& opt, const std::vector<int64_t>& milestones, double gamma = 0.1,
              int64_t last_epoch = -1);

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() override;
  void save_extra(std::vector<std::pair<Value, Value>>& d) const override;
  void load_extra(const Value& d) override;
  std::map<int64_t, int64_t> milestones_;  // milestone -> multiplicity (torch's Counter)
  std::vector<int64_t> milestone_order_;   // first-seen order, for the state dict
  double gamma_;
};

class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& opt, double gamma, int64_t last_epoch = -1);

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() override;
  void save_extra(std::vector<std::pair<Value, Value>>& d) const override;
  void load_extra(const Value& d) override;
  double gamma_;
};

class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min = 0.0, int64_t last_epoch = -1);

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() override;
  void save_extra(std::vector<std::pair<Value, Value>>& d) const override;
  void load_extra(const Value& d) override;
  int64_t T_max_;
  double eta_min_;
};

class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& opt, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5, int64_t last_epoch = -1);

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() override;
  void save_extra(std::vector<std::pair<Value, Value>>& d) const override;
  void load_extra(const Value& d) override;
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

// lr = base_lr * factor until total_iters, then base_lr.
class ConstantLR : public LRScheduler {
 public:
  ConstantLR(Optimizer& opt, double factor = 1.0 / 3, int64_t total_iters = 5, int64_t last_epoch = -1);

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() override;
  void save_extra(std::vector<std::pair<Value, Value>>& d) const override;
  void load_extra(const Value& d) override;
  double factor_;
  int64_t total_iters_;
};

// lr = base_lr * (1 - min(t, total_iters) / total_iters) ** power.
class PolynomialLR : public LRScheduler {
 public:
  PolynomialLR(Optimizer& opt, int64_t total_iters = 5, double power = 1.0, int64_t last_epoch = -1);

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() override;
  void save_extra(std::vector<std::pair<Value, Value>>& d) const override;
  void load_extra(const Value& d) override;
  int64_t total_iters_;
  double power_;
};

// SGDR: cosine annealing restarted every T_i steps, T_i growing by T_mult. step(epoch) takes
// fractional epochs (torch's `step(epoch + i / iters)`).
class CosineAnnealingWarmRestarts : public LRScheduler {
 public:
  CosineAnnealingWarmRestarts(Optimizer& opt, int64_t T_0, int64_t T_mult = 1, double eta_min = 0.0,
                              int64_t last_epoch = -1);
  void step() override;
  void step(int64_t epoch) override { step_to(static_cast<double>(epoch)); }
  void step_to(double epoch);

 protected:
  std::vector<double> get_lr() override;
  void save_extra(std::vector<std::pair<Value, Value>>& d) const override;
  void load_extra(const Value& d) override;
  void apply();
  int64_t T_0_, T_i_, T_mult_;
  double eta_min_, T_cur_;
};

struct CyclicLROptions {
  int64_t step_size_up = 2000;
  std::optional<int64_t> step_size_down;  // step_size_up when not given
  std::string mode = "triangular";        // "triangular2", "exp_range"
  double gamma = 1.0;
  // A custom scale function (x -> factor) replaces the mode's; scale_mode "cycle" or "iterations".
  std::function<double(double)> scale_fn;
  std::string scale_mode = "cycle";
  bool cycle_momentum = true;
  std::vector<double> base_momentum{0.8};  // one value, or one per group
  std::vector<double> max_momentum{0.9};
  int64_t last_epoch = -1;
};

// Cyclical learning rates (Smith 2017): lr between base_lr and max_lr over cycles of
// step_size_up + step_size_down steps; momentum (SGD) or betas[0] (Adam family) cycles inversely.
class CyclicLR : public LRScheduler {
 public:
  CyclicLR(Optimizer& opt, const std::vector<double>& base_lr, const std::vector<double>& max_lr,
           const CyclicLROptions& o = {});

 protected:
  std::vector<double> get_lr() override;
  void save_extra(std::vector<std::pair<Value, Value>>& d) const override;
  void load_extra(const Value& d) override;
  double scale(double x) const;
  std::vector<double> max_lrs_, first_base_lrs_, base_momentums_, max_momentums_;
  double total_size_, step_ratio_, gamma_;
  std::string mode_, scale_mode_;
  std::function<double(double)> scale_fn_;
  bool cycle_momentum_, use_beta1_ = false;
};

// lr = base_lr * lambda(epoch), one function per group (a single one is used for every group).
class LambdaLR : public LRScheduler {
 public:
  using Lambda = std::function<double(int64_t)>;
  LambdaLR(Optimizer& opt, std::vector<Lambda> lr_lambdas, int64_t last_epoch = -1);

 protected:
  std::vector<double> get_lr() override;
  void save_extra(std::vector<std::pair<Value, Value>>& d) const override;
  std::vector<Lambda> lambdas_;
};

// Runs schedulers one after another, switching at the milestones.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& opt, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones, int64_t last_epoch = -1);
  void step() override;
  void step(int64_t epoch) override;
  Value state_dict() const override;
  void load_state_dict(const Value& sd) override;
  const std::vector<std::shared_ptr<LRScheduler>>& schedulers() const { return schedulers_; }

 protected:
  std::vector<double> get_lr() override { return group_lrs(); }
  void recursive_undo(LRScheduler* s);
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

struct OneCycleLROptions {
  std::optional<int64_t> total_steps, epochs, steps_per_epoch;
  double pct_start = 0.3;
  std::string anneal_strategy = "cos";  // or "linear"
  bool cycle_momentum = true;
  std::vector<double> base_momentum = {0.85};  // one value, or one per group
  std::vector<double> max_momentum = {0.95};
  double div_factor = 25.0, final_div_factor = 1e4;
  bool three_phase = false;
  int64_t last_epoch = -1;
};

// The 1cycle policy; cycles SGD's "momentum" or Adam's betas[0] inversely to the lr.
class OneCycleLR : public LRScheduler {
 public:
  // max_lr: one value, or one per group.
  OneCycleLR(Optimizer& opt, const std::vector<double>& max_lr, const OneCycleLROptions& o = {});

 protected:
  struct Phase {
    double end_step;
    bool end_step_is_int;
    std::string start_lr, end_lr, start_momentum, end_momentum;
  };
  std::vector<double> get_lr() override;
  void save_extra(std::vector<std::pair<Value, Value>>& d) const override;
  void load_extra(const Value& d) override;
  double anneal(double start, double end, double pct) const;
  int64_t total_steps_;
  std::vector<Phase> phases_;
  std::string anneal_;
  bool cycle_momentum_, use_beta1_ = false;
};

struct ReduceLROnPlateauOptions {
  std::string mode = "min";  // or "max"
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  std::string threshold_mode = "rel";  // or "abs"
  int64_t cooldown = 0;
  double min_lr = 0;            // for every group, unless min_lrs is given
  std::vector<double> min_lrs;  // one per group
  double eps = 1e-8;
};

// Lowers the lr by `factor` once the metric has not improved for `patience` steps.
class ReduceLROnPlateau : public LRScheduler {
 public:
  ReduceLROnPlateau(Optimizer& opt, const ReduceLROnPlateauOptions& o = {});
  void step(double metric);
  void step(double metric, int64_t epoch);
  void step() override;  // raises: a metric is required
  Value state_dict() const override;
  void load_state_dict(const Value& sd) override;
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  double best() const { return best_; }

 protected:
  std::vector<double> get_lr() override { return group_lrs(); }
  void check_modes() const;
  bool is_better(double a, double best) const;
  void reduce_lr();
  double factor_, threshold_, eps_, best_, mode_worse_;
  std::optional<double> default_min_lr_;
  std::vector<double> min_lrs_;
  int64_t patience_, cooldown_, cooldown_counter_ = 0, num_bad_epochs_ = 0;
  std::string mode_, threshold_mode_;
};

}  // namespace kiln::optim
