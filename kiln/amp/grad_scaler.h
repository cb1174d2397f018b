// Gradient scaling for float16 training (torch.amp.GradScaler): the loss is multiplied by a scale
// so that small gradients survive float16; before the optimiser steps, the gradients are divided by
// it again and checked: a step with an inf or NaN gradient is skipped and the scale backs off;
// growth_interval clean steps in a row grow it. bfloat16 has float32's range and needs none of this.
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include "kiln/core/tensor.h"
#include "kiln/optim/optimizer.h"

namespace kiln::amp {

// torch._amp_foreach_non_finite_check_and_unscale_: each defined gradient is multiplied by inv_scale
// (a one-element float32 tensor) in place; found_inf (one element, float32) becomes 1 when any
// gradient holds an inf or a NaN.
void amp_foreach_non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                               const Tensor& inv_scale);
// torch._amp_update_scale_: on found_inf the scale is multiplied by backoff_factor and the tracker
// reset; otherwise the tracker counts the clean step, and at growth_interval the scale is
// multiplied by growth_factor (when that stays finite) and the tracker reset. Returns scale.
const Tensor& amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                                double growth_factor, double backoff_factor, int64_t growth_interval);

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
};

// torch.amp.GradScaler for C++ optimisers:
//   scaler.scale(loss).backward();
//   scaler.step(opt);    // unscales (unless unscale_ ran), skips the step on inf / NaN
//   scaler.update();
class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});
  // outputs * scale (unchanged when disabled)
  Tensor scale(const Tensor& outputs);
  // Divides the optimiser's gradients by the scale once per step (a second call raises).
  void unscale_(optim::Optimizer& optimizer);
  // optimizer.step() unless a gradient is inf or NaN; returns the step's result (undefined when skipped).
  Tensor step(optim::Optimizer& optimizer);
  // Adjusts the scale after every optimiser of this iteration stepped; new_scale sets it outright.
  void update(std::optional<double> new_scale = std::nullopt);

  bool is_enabled() const { return options_.enabled; }
  double get_scale() const;  // 1.0 when disabled
  double get_growth_factor() const { return options_.growth_factor; }
  double get_backoff_factor() const { return options_.backoff_factor; }
  int64_t get_growth_interval() const { return options_.growth_interval; }
  void set_growth_factor(double v) { options_.growth_factor = v; }
  void set_backoff_factor(double v) { options_.backoff_factor = v; }
  void set_growth_interval(int64_t v) { options_.growth_interval = v; }
  int64_t growth_tracker() const;

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct PerOptimizer {
    Stage stage = Stage::kReady;
    Tensor found_inf;  // one element, float32
  };
  void lazy_init();
  PerOptimizer& state_of(const optim::Optimizer& o) { return per_optimizer_[&o]; }

  GradScalerOptions options_;
  Tensor scale_, growth_tracker_;  // float32 and int32, one element each, made on first scale()
  std::unordered_map<const optim::Optimizer*, PerOptimizer> per_optimizer_;
};

}  // namespace kiln::amp
