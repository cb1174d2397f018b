// SGD, Adam, AdamW, RMSprop and Adagrad with torch 2.13's update rules, defaults and argument
// errors. Each takes its options either as a typed struct (libtorch style, chainable setters) or as
// an Options map (what the Python binding passes, keeping Python's int/float distinction).
// The updates run through one fused, vectorised, multi-threaded kernel (detail/fused.h).
#pragma once

#include <tuple>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

using Betas = std::tuple<double, double>;

// A chainable option: `opts.lr(0.1)` sets, `opts.lr()` reads.
#define KILN_OPTIM_ARG(T, name)              \
 public:                                     \
  auto name(const T& v) -> decltype(*this) { \
    name##_ = v;                             \
    return *this;                            \
  }                                          \
  const T& name() const { return name##_; }  \
                                             \
 private:                                    \
  T name##_

struct SGDOptions {
  SGDOptions(double lr = 1e-3) : lr_(lr) {}
  Options to_options() const;
  KILN_OPTIM_ARG(double, lr);
  KILN_OPTIM_ARG(double, momentum) = 0;
  KILN_OPTIM_ARG(double, dampening) = 0;
  KILN_OPTIM_ARG(double, weight_decay) = 0;
  KILN_OPTIM_ARG(bool, nesterov) = false;
  KILN_OPTIM_ARG(bool, maximize) = false;
};

struct AdamOptions {
  AdamOptions(double lr = 1e-3) : lr_(lr) {}
  Options to_options() const;
  KILN_OPTIM_ARG(double, lr);
  KILN_OPTIM_ARG(Betas, betas) = { 0.9, 0.999 };
  KILN_OPTIM_ARG(double, eps) = 1e-8;
  KILN_OPTIM_ARG(double, weight_decay) = 0;
  KILN_OPTIM_ARG(bool, amsgrad) = false;
  KILN_OPTIM_ARG(bool, maximize) = false;
};

struct AdamWOptions {
  AdamWOptions(double lr = 1e-3) : lr_(lr) {}
  Options to_options() const;
  KILN_OPTIM_ARG(double, lr);
  KILN_OPTIM_ARG(Betas, betas) = { 0.9, 0.999 };
  KILN_OPTIM_ARG(double, eps) = 1e-8;
  KILN_OPTIM_ARG(double, weight_decay) = 1e-2;
  KILN_OPTIM_ARG(bool, amsgrad) = false;
  KILN_OPTIM_ARG(bool, maximize) = false;
};

struct RMSpropOptions {
  RMSpropOptions(double lr = 1e-2) : lr_(lr) {}
  Options to_options() const;
  KILN_OPTIM_ARG(double, lr);
  KILN_OPTIM_ARG(double, alpha) = 0.99;
  KILN_OPTIM_ARG(double, eps) = 1e-8;
  KILN_OPTIM_ARG(double, weight_decay) = 0;
  KILN_OPTIM_ARG(double, momentum) = 0;
  KILN_OPTIM_ARG(bool, centered) = false;
  KILN_OPTIM_ARG(bool, maximize) = false;
};

struct AdagradOptions {
  AdagradOptions(double lr = 1e-2) : lr_(lr) {}
  Options to_options() const;
  KILN_OPTIM_ARG(double, lr);
  KILN_OPTIM_ARG(double, lr_decay) = 0;
  KILN_OPTIM_ARG(double, weight_decay) = 0;
  KILN_OPTIM_ARG(double, initial_accumulator_value) = 0;
  KILN_OPTIM_ARG(double, eps) = 1e-10;
  KILN_OPTIM_ARG(bool, maximize) = false;
};

struct RpropOptions {
  RpropOptions(double lr = 1e-2) : lr_(lr) {}
  Options to_options() const;
  KILN_OPTIM_ARG(double, lr);
  KILN_OPTIM_ARG(double, etaminus) = 0.5;  // torch's etas=(etaminus, etaplus)
  KILN_OPTIM_ARG(double, etaplus) = 1.2;
  KILN_OPTIM_ARG(double, step_size_min) = 1e-6;  // torch's step_sizes=(min, max)
  KILN_OPTIM_ARG(double, step_size_max) = 50;
  KILN_OPTIM_ARG(bool, maximize) = false;
};

struct ASGDOptions {
  ASGDOptions(double lr = 1e-2) : lr_(lr) {}
  Options to_options() const;
  KILN_OPTIM_ARG(double, lr);
  KILN_OPTIM_ARG(double, lambd) = 1e-4;
  KILN_OPTIM_ARG(double, alpha) = 0.75;
  KILN_OPTIM_ARG(double, t0) = 1e6;
  KILN_OPTIM_ARG(double, weight_decay) = 0;
  KILN_OPTIM_ARG(bool, maximize) = false;
};

// Adamax, NAdam and RAdam (momentum_decay: NAdam only; decoupled_weight_decay: NAdam and RAdam).
struct AdamaxOptions {
  AdamaxOptions(double lr = 2e-3) : lr_(lr) {}
  Options to_options() const;
  KILN_OPTIM_ARG(double, lr);
  KILN_OPTIM_ARG(std::vector<double>, betas) = {0.9, 0.999};
  KILN_OPTIM_ARG(double, eps) = 1e-8;
  KILN_OPTIM_ARG(double, weight_decay) = 0;
  KILN_OPTIM_ARG(bool, maximize) = false;
};

struct NAdamOptions {
  NAdamOptions(double lr = 2e-3) : lr_(lr) {}
  Options to_options() const;
  KILN_OPTIM_ARG(double, lr);
  KILN_OPTIM_ARG(std::vector<double>, betas) = {0.9, 0.999};
  KILN_OPTIM_ARG(double, eps) = 1e-8;
  KILN_OPTIM_ARG(double, weight_decay) = 0;
  KILN_OPTIM_ARG(double, momentum_decay) = 4e-3;
  KILN_OPTIM_ARG(bool, decoupled_weight_decay) = false;
  KILN_OPTIM_ARG(bool, maximize) = false;
};

struct RAdamOptions {
  RAdamOptions(double lr = 1e-3) : lr_(lr) {}
  Options to_options() const;
  KILN_OPTIM_ARG(double, lr);
  KILN_OPTIM_ARG(std::vector<double>, betas) = {0.9, 0.999};
  KILN_OPTIM_ARG(double, eps) = 1e-8;
  KILN_OPTIM_ARG(double, weight_decay) = 0;
  KILN_OPTIM_ARG(bool, decoupled_weight_decay) = false;
  KILN_OPTIM_ARG(bool, maximize) = false;
};

struct LBFGSOptions {
  LBFGSOptions(double lr = 1) : lr_(lr) {}
  Options to_options() const;
  KILN_OPTIM_ARG(double, lr);
  KILN_OPTIM_ARG(int64_t, max_iter) = 20;
  KILN_OPTIM_ARG(std::optional<int64_t>, max_eval);  // max_iter * 5 / 4 when not given
  KILN_OPTIM_ARG(double, tolerance_grad) = 1e-7;
  KILN_OPTIM_ARG(double, tolerance_change) = 1e-9;
  KILN_OPTIM_ARG(int64_t, history_size) = 100;
  KILN_OPTIM_ARG(std::optional<std::string>, line_search_fn);  // "strong_wolfe" or none
};

#undef KILN_OPTIM_ARG

// The full defaults map of each optimiser, in torch's key order, from the values given (missing
// keys take torch's defaults). Validates like torch's constructors.
Options sgd_defaults(const Options& given);
Options adam_defaults(const Options& given, bool adamw);
Options rmsprop_defaults(const Options& given);
Options adagrad_defaults(const Options& given);
Options rprop_defaults(const Options& given);
Options asgd_defaults(const Options& given);
Options adamax_defaults(const Options& given);
Options nadam_defaults(const Options& given);
Options radam_defaults(const Options& given);
Options lbfgs_defaults(const Options& given);

class SGD : public Optimizer {
 public:
  SGD(const TensorList& params, const SGDOptions& o = {});
  SGD(std::vector<ParamGroup> groups, const SGDOptions& o = {});
  SGD(std::vector<ParamGroup> groups, const Options& defaults);

 protected:
  void step_group(ParamGroup& group) override;
  void fix_loaded_group(Options& o) const override;
};

class Adam : public Optimizer {
 public:
  Adam(const TensorList& params, const AdamOptions& o = {});
  Adam(std::vector<ParamGroup> groups, const AdamOptions& o = {});
  Adam(std::vector<ParamGroup> groups, const Options& defaults);

 protected:
  Adam(std::string name, std::vector<ParamGroup> groups, Options defaults);
  void step_group(ParamGroup& group) override;
  void fix_loaded_group(Options& o) const override;
};

// Adam with decoupled weight decay (p *= 1 - lr * weight_decay), weight_decay 1e-2 by default.
class AdamW : public Adam {
 public:
  AdamW(const TensorList& params, const AdamWOptions& o = {});
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& o = {});
  AdamW(std::vector<ParamGroup> groups, const Options& defaults);

 protected:
  void fix_loaded_group(Options& o) const override;
};

class RMSprop : public Optimizer {
 public:
  RMSprop(const TensorList& params, const RMSpropOptions& o = {});
  RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& o = {});
  RMSprop(std::vector<ParamGroup> groups, const Options& defaults);

 protected:
  void step_group(ParamGroup& group) override;
  void fix_loaded_group(Options& o) const override;
};

class Adagrad : public Optimizer {
 public:
  Adagrad(const TensorList& params, const AdagradOptions& o = {});
  Adagrad(std::vector<ParamGroup> groups, const AdagradOptions& o = {});
  Adagrad(std::vector<ParamGroup> groups, const Options& defaults);

 protected:
  void step_group(ParamGroup& group) override;
  void group_added(ParamGroup& group) override;
  void fix_loaded_group(Options& o) const override;
};

// Resilient backpropagation: per-element step sizes grown by etaplus while the gradient keeps its
// sign and cut by etaminus when it flips (that step is skipped).
class Rprop : public Optimizer {
 public:
  Rprop(const TensorList& params, const RpropOptions& o = {});
  Rprop(std::vector<ParamGroup> groups, const RpropOptions& o = {});
  Rprop(std::vector<ParamGroup> groups, const Options& defaults);

 protected:
  void step_group(ParamGroup& group) override;
  void fix_loaded_group(Options& o) const override;
};

// Averaged SGD (Polyak-Ruppert): SGD with a decaying step eta and a running average `ax` of the
// parameters from step t0 on.
class ASGD : public Optimizer {
 public:
  ASGD(const TensorList& params, const ASGDOptions& o = {});
  ASGD(std::vector<ParamGroup> groups, const ASGDOptions& o = {});
  ASGD(std::vector<ParamGroup> groups, const Options& defaults);

 protected:
  void step_group(ParamGroup& group) override;
  void fix_loaded_group(Options& o) const override;
};

// Adam with the infinity norm (Kingma & Ba, section 7).
class Adamax : public Optimizer {
 public:
  Adamax(const TensorList& params, const AdamaxOptions& o = {});
  Adamax(std::vector<ParamGroup> groups, const AdamaxOptions& o = {});
  Adamax(std::vector<ParamGroup> groups, const Options& defaults);

 protected:
  void step_group(ParamGroup& group) override;
  void fix_loaded_group(Options& o) const override;
};

// Adam with Nesterov momentum (Dozat 2016), torch's momentum_decay schedule.
class NAdam : public Optimizer {
 public:
  NAdam(const TensorList& params, const NAdamOptions& o = {});
  NAdam(std::vector<ParamGroup> groups, const NAdamOptions& o = {});
  NAdam(std::vector<ParamGroup> groups, const Options& defaults);

 protected:
  void step_group(ParamGroup& group) override;
  void fix_loaded_group(Options& o) const override;
};

// Rectified Adam (Liu et al. 2019): SGD with momentum until the variance estimate is tractable.
class RAdam : public Optimizer {
 public:
  RAdam(const TensorList& params, const RAdamOptions& o = {});
  RAdam(std::vector<ParamGroup> groups, const RAdamOptions& o = {});
  RAdam(std::vector<ParamGroup> groups, const Options& defaults);

 protected:
  void step_group(ParamGroup& group) override;
  void fix_loaded_group(Options& o) const override;
};

// L-BFGS (torch's algorithm, its strong-Wolfe line search included): one group, and step() needs the
// closure, which it calls up to max_eval times. Its state (history of directions and steps, the last
// direction, step and gradient) lives on the first parameter as in torch, the history lists included,
// so state_dict() / load_state_dict() resume a run.
class LBFGS : public Optimizer {
 public:
  LBFGS(const TensorList& params, const LBFGSOptions& o = {});
  LBFGS(std::vector<ParamGroup> groups, const Options& defaults);
  Tensor step(const LossClosure& closure = nullptr) override;

 protected:
  void step_group(ParamGroup& group) override;
  Tensor flat_grad() const;
  void add_grad(double t, const Tensor& d);
  double directional_evaluate(const LossClosure& closure, const TensorList& x, double t, const Tensor& d,
                              Tensor& g);
  std::vector<Tensor> old_dirs_, old_stps_;
  void save_state(size_t history);
  void restore_state();
  std::vector<double> ro_, al_;
  Tensor d_, prev_flat_grad_;
  double t_ = 0, H_diag_ = 1, prev_loss_ = 0;
  int64_t func_evals_ = 0, n_iter_ = 0;
};

}  // namespace kiln::optim
