// Python binding: automatic mixed precision (kiln/amp). The public names (kiln.autocast,
// kiln.amp.GradScaler, kiln.is_autocast_enabled, ...) live in python/kiln/amp; these are the state
// accessors and the two GradScaler ops.
#include "common.h"
#include "kiln/amp/autocast.h"
#include "kiln/amp/grad_scaler.h"

namespace kiln::py {
namespace {

DeviceType device_type(const std::string& s) {
  if (s == "cpu") return DeviceType::CPU;
  if (s == "cuda") return DeviceType::CUDA;
  throw nb::value_error(("unsupported autocast device_type '" + s + "'").c_str());
}

}  // namespace

void bind_amp(nb::module_& m) {
  m.def("_is_autocast_enabled", [](const std::string& d) { return amp::is_autocast_enabled(device_type(d)); });
  m.def("_set_autocast_enabled",
        [](const std::string& d, bool on) { amp::set_autocast_enabled(device_type(d), on); });
  m.def("_get_autocast_dtype",
        [](const std::string& d) { return dtype_object(amp::get_autocast_dtype(device_type(d))); });
  m.def("_set_autocast_dtype", [](const std::string& d, nb::handle dt) {
    amp::set_autocast_dtype(device_type(d), as_dtype(dt));
  });
  m.def("is_autocast_cache_enabled", &amp::is_autocast_cache_enabled);
  m.def("set_autocast_cache_enabled", &amp::set_autocast_cache_enabled);
  m.def("autocast_increment_nesting", &amp::increment_nesting);
  m.def("autocast_decrement_nesting", &amp::decrement_nesting);
  m.def("clear_autocast_cache", &amp::clear_cache);
  m.def("_amp_foreach_non_finite_check_and_unscale_",
        [](const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale) {
          amp::amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale);
        });
  m.def("_amp_update_scale_",
        [](const Tensor& scale, const Tensor& tracker, const Tensor& found_inf, double growth,
           double backoff, int64_t interval) {
          return Tensor(amp::amp_update_scale_(scale, tracker, found_inf, growth, backoff, interval));
        },
        nb::arg("self"), nb::arg("growth_tracker"),
        nb::arg("found_inf"), nb::arg("scale_growth_factor"), nb::arg("scale_backoff_factor"),
        nb::arg("growth_interval"));
}

}  // namespace kiln::py
