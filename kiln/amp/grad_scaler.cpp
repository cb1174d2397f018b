// GradScaler and its two ops, written with kiln ops so that they run on any device.
#include "kiln/amp/grad_scaler.h"

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/ops.h"

namespace kiln::amp {

void amp_foreach_non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                               const Tensor& inv_scale) {
  const char* op = "_amp_foreach_non_finite_check_and_unscale_";
  KILN_CHECK(inv_scale.numel() == 1 && inv_scale.dtype() == kFloat32, Runtime, op,
             "inv_scale must be a 1-element float tensor.");
  KILN_CHECK(found_inf.numel() == 1 && found_inf.dtype() == kFloat32, Runtime, op,
             "found_inf must be a 1-element float tensor.");
  NoGradGuard no_grad;
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    KILN_CHECK(is_floating(g.dtype()), Runtime, op, "expected floating-point gradients, got ",
               dtype_name(g.dtype()));
    if (!all(isfinite(g)).item<bool>()) fill_(found_inf, 1.0);
    mul_(g, inv_scale);
  }
}

const Tensor& amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                                double growth_factor, double backoff_factor, int64_t growth_interval) {
  const char* op = "_amp_update_scale_";
  KILN_CHECK(scale.numel() == 1 && scale.dtype() == kFloat32, Runtime, op,
             "current_scale must be a 1-element float tensor.");
  KILN_CHECK(growth_tracker.numel() == 1 && growth_tracker.dtype() == kInt32, Runtime, op,
             "growth_tracker must be a 1-element int tensor.");
  KILN_CHECK(found_inf.numel() == 1 && found_inf.dtype() == kFloat32, Runtime, op,
             "found_inf must be a 1-element float tensor.");
  NoGradGuard no_grad;
  if (found_inf.item<float>() != 0.0f) {
    fill_(scale, static_cast<double>(scale.item<float>() * static_cast<float>(backoff_factor)));
    fill_(growth_tracker, 0);
    return scale;
  }
  int64_t successful = growth_tracker.item<int32_t>() + 1;
  if (successful == growth_interval) {
    float grown = static_cast<float>(scale.item<float>() * growth_factor);
    if (std::isfinite(grown)) fill_(scale, static_cast<double>(grown));
    fill_(growth_tracker, 0);
  } else {
    fill_(growth_tracker, successful);
  }
  return scale;
}

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  const char* op = "GradScaler";
  KILN_CHECK(options_.growth_factor > 1.0, Value, op, "The growth factor must be > 1.0.");
  KILN_CHECK(options_.backoff_factor < 1.0, Value, op, "The backoff factor must be < 1.0.");
}

void GradScaler::lazy_init() {
  if (scale_.defined()) return;
  scale_ = full({}, options_.init_scale, TensorOptions(kFloat32));
  growth_tracker_ = full({}, 0, TensorOptions(kInt32));
}

Tensor GradScaler::scale(const Tensor& outputs) {
  if (!options_.enabled) return outputs;
  lazy_init();
  return mul(outputs, scale_.to(outputs.device()));
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  const char* op = "unscale_";
  PerOptimizer& st = state_of(optimizer);
  KILN_CHECK(st.stage != Stage::kUnscaled, Runtime, op,
             "unscale_() has already been called on this optimizer since the last update().");
  KILN_CHECK(st.stage != Stage::kStepped, Runtime, op, "unscale_() is being called after step().");
  KILN_CHECK(scale_.defined(), Runtime, op,
             "Attempted unscale_ but _scale is None.  This may indicate your script did not use "
             "scaler.scale(loss or outputs) earlier in the iteration.");
  Tensor inv_scale = reciprocal(scale_.to(kFloat64)).to(kFloat32);
  st.found_inf = full({}, 0.0, TensorOptions(kFloat32));
  std::vector<Tensor> grads;
  for (const optim::ParamGroup& g : optimizer.param_groups())
    for (const Tensor& p : g.params) {
      Tensor gr = p.grad();
      if (!gr.defined()) continue;
      KILN_CHECK(gr.dtype() != kFloat16, Value, op, "Attempting to unscale FP16 gradients.");
      grads.push_back(gr);
    }
  amp_foreach_non_finite_check_and_unscale_(grads, st.found_inf, inv_scale);
  st.stage = Stage::kUnscaled;
}

Tensor GradScaler::step(optim::Optimizer& optimizer) {
  if (!options_.enabled) return optimizer.step();
  KILN_CHECK(scale_.defined(), Runtime, "step",
             "Attempted step but _scale is None.  This may indicate your script did not use "
             "scaler.scale(loss or outputs) earlier in the iteration.");
  PerOptimizer& st = state_of(optimizer);
  KILN_CHECK(st.stage != Stage::kStepped, Runtime, "step",
             "step() has already been called since the last update().");
  if (st.stage == Stage::kReady) unscale_(optimizer);
  Tensor r;
  if (state_of(optimizer).found_inf.item<float>() == 0.0f) r = optimizer.step();
  state_of(optimizer).stage = Stage::kStepped;
  return r;
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!options_.enabled) return;
  KILN_CHECK(scale_.defined(), Runtime, "update",
             "Attempted update but _scale is None.  This may indicate your script did not use "
             "scaler.scale(loss or outputs) earlier in the iteration.");
  if (new_scale) {
    NoGradGuard no_grad;
    fill_(scale_, *new_scale);
  } else {
    Tensor found;
    for (auto& [o, st] : per_optimizer_)
      if (st.found_inf.defined()) found = found.defined() ? add(found, st.found_inf) : st.found_inf;
    KILN_CHECK(found.defined(), Assertion, "update", "No inf checks were recorded prior to update.");
    amp_update_scale_(scale_, growth_tracker_, found, options_.growth_factor, options_.backoff_factor,
                      options_.growth_interval);
  }
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!options_.enabled) return 1.0;
  return scale_.defined() ? static_cast<double>(scale_.item<float>()) : options_.init_scale;
}

int64_t GradScaler::growth_tracker() const {
  return growth_tracker_.defined() ? growth_tracker_.item<int32_t>() : 0;
}

}  // namespace kiln::amp
