// Python binding: kiln.optim.lr_scheduler, the C++ schedulers of kiln/optim/lr_scheduler.h with
// torch's Python signatures. A scheduler keeps its optimizer alive; SequentialLR its schedulers.
#include <nanobind/stl/function.h>
#include <nanobind/stl/shared_ptr.h>

#include "optim_common.h"

namespace kiln::py {

using namespace kiln::optim;

namespace {

constexpr const char* kEpochDeprecation =
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where "
    "possible. Please "
    "use `scheduler.step()` to step the scheduler. During the deprecation, if epoch is different "
    "from None, the "
    "closed form is used instead of the new chainable form, where available. Please open an issue "
    "if you are "
    "unable to replicate your use case: https://github.com/pytorch/pytorch/issues/new/choose.";

void warn_epoch() {
  if (PyErr_WarnEx(PyExc_UserWarning, kEpochDeprecation, 1) != 0) throw nb::python_error();
}

// torch raises KeyError when resuming (last_epoch >= 0) without "initial_lr" in the groups.
void check_resume(Optimizer& opt, int64_t last_epoch) {
  if (last_epoch == -1) return;
  for (size_t i = 0; i < opt.param_groups().size(); ++i) {
    if (!opt.param_groups()[i].options.contains("initial_lr"))
      throw nb::key_error(("param 'initial_lr' is not specified in param_groups[" +
                           std::to_string(i) + "] when resuming scheduler with last_epoch >= 0.")
                              .c_str());
  }
}

// A float, or a list/tuple with one value per group (torch's _format_param).
std::vector<double> per_group(const char* name, nb::handle v, const Optimizer& opt) {
  size_t n = opt.param_groups().size();
  if (PyList_Check(v.ptr()) || PyTuple_Check(v.ptr())) {
    std::vector<double> r;
    for (nb::handle x : v) r.push_back(nb::cast<double>(nb::float_(x)));
    if (r.size() != n)
      throw nb::value_error((std::string(name) +
                             " must have the same length as optimizer.param_groups. " + name +
                             " has " + std::to_string(r.size()) + " values, param_groups has " +
                             std::to_string(n) + ".")
                                .c_str());
    return r;
  }
  return std::vector<double>(n, nb::cast<double>(nb::float_(v)));
}

std::vector<int64_t> int_list(nb::handle v) {
  std::vector<int64_t> r;
  for (nb::handle x : v) r.push_back(nb::cast<int64_t>(x));
  return r;
}

std::optional<int64_t> opt_int(nb::handle v) {
  if (v.is_none()) return std::nullopt;
  return nb::cast<int64_t>(v);
}

nb::object state_dict_py(const LRScheduler& s) {
  nb::object d = to_py(s.state_dict());
  if (nb::borrow<nb::dict>(d).contains(
          "milestones"))  // torch keeps MultiStepLR's milestones in a Counter
    d["milestones"] = nb::module_::import_("collections").attr("Counter")(d["milestones"]);
  return d;
}

LambdaLR::Lambda wrap_lambda(nb::handle f) {
  if (!PyCallable_Check(f.ptr()))
    throw nb::type_error(("lr_lambda should be a function, but got " +
                          nb::cast<std::string>(nb::str(f.type().attr("__name__"))))
                             .c_str());
  nb::object fn = nb::borrow(f);
  return [fn](int64_t epoch) -> double {
    nb::gil_scoped_acquire gil;
    return nb::cast<double>(nb::float_(fn(epoch)));
  };
}

}  // namespace

void bind_lr_scheduler(nb::module_& om) {
  nb::module_ lm = om.def_submodule("lr_scheduler", "kiln.optim.lr_scheduler");

  nb::class_<LRScheduler>(lm, "LRScheduler", nb::dynamic_attr())
      .def(
          "step",
          [](LRScheduler& s, nb::handle epoch) {
            if (epoch.is_none()) {
              s.step();
            } else {
              warn_epoch();
              s.step(nb::cast<int64_t>(epoch));
            }
          },
          "epoch"_a = nb::none())
      .def("get_last_lr", &LRScheduler::get_last_lr)
      .def_prop_rw("last_epoch", &LRScheduler::last_epoch, &LRScheduler::set_last_epoch)
      .def_prop_ro("base_lrs", &LRScheduler::base_lrs)
      .def_prop_ro(
          "optimizer", [](LRScheduler& s) { return &s.optimizer(); }, nb::rv_policy::reference)
      .def("state_dict", &state_dict_py)
      .def(
          "load_state_dict",
          [](LRScheduler& s, nb::handle d) { s.load_state_dict(to_value(d, "state_dict")); },
          "state_dict"_a)
      // Settings and counters read like torch's attributes (sched.gamma, sched.num_bad_epochs ...).
      .def("__getattr__", [](nb::handle self, const std::string& name) -> nb::object {
        if (name.size() < 2 || name.substr(0, 2) != "__") {
          nb::dict d = nb::borrow<nb::dict>(state_dict_py(nb::cast<LRScheduler&>(self)));
          if (d.contains(name.c_str())) return d[name.c_str()];
        }
        throw nb::attribute_error(("'" + nb::cast<std::string>(self.type().attr("__name__")) +
                                   "' object has no attribute '" + name + "'")
                                      .c_str());
      });

  nb::class_<StepLR, LRScheduler>(lm, "StepLR")
      .def(
          "__init__",
          [](StepLR* self, Optimizer& opt, int64_t step_size, double gamma, int64_t last_epoch) {
            if (step_size == 0) {  // torch's class: its step() computes last_epoch % step_size
              PyErr_SetString(PyExc_ZeroDivisionError, "[StepLR] integer modulo by zero: step_size must not be 0");
              throw nb::python_error();
            }
            check_resume(opt, last_epoch);
            new (self) StepLR(opt, step_size, gamma, last_epoch);
          },
          "optimizer"_a, "step_size"_a, "gamma"_a = 0.1, "last_epoch"_a = -1,
          nb::keep_alive<1, 2>());

  nb::class_<MultiStepLR, LRScheduler>(lm, "MultiStepLR")
      .def(
          "__init__",
          [](MultiStepLR* self, Optimizer& opt, nb::handle milestones, double gamma,
             int64_t last_epoch) {
            check_resume(opt, last_epoch);
            new (self) MultiStepLR(opt, int_list(milestones), gamma, last_epoch);
          },
          "optimizer"_a, "milestones"_a, "gamma"_a = 0.1, "last_epoch"_a = -1,
          nb::keep_alive<1, 2>());

  nb::class_<ExponentialLR, LRScheduler>(lm, "ExponentialLR")
      .def(
          "__init__",
          [](ExponentialLR* self, Optimizer& opt, double gamma, int64_t last_epoch) {
            check_resume(opt, last_epoch);
            new (self) ExponentialLR(opt, gamma, last_epoch);
          },
          "optimizer"_a, "gamma"_a, "last_epoch"_a = -1, nb::keep_alive<1, 2>());

  nb::class_<CosineAnnealingLR, LRScheduler>(lm, "CosineAnnealingLR")
      .def(
          "__init__",
          [](CosineAnnealingLR* self, Optimizer& opt, int64_t T_max, double eta_min,
             int64_t last_epoch) {
            check_resume(opt, last_epoch);
            new (self) CosineAnnealingLR(opt, T_max, eta_min, last_epoch);
          },
          "optimizer"_a, "T_max"_a, "eta_min"_a = 0.0, "last_epoch"_a = -1, nb::keep_alive<1, 2>());

  nb::class_<LinearLR, LRScheduler>(lm, "LinearLR")
      .def(
          "__init__",
          [](LinearLR* self, Optimizer& opt, double start_factor, double end_factor,
             int64_t total_iters, int64_t last_epoch) {
            check_resume(opt, last_epoch);
            new (self) LinearLR(opt, start_factor, end_factor, total_iters, last_epoch);
          },
          "optimizer"_a, "start_factor"_a = 1.0 / 3, "end_factor"_a = 1.0, "total_iters"_a = 5,
          "last_epoch"_a = -1, nb::keep_alive<1, 2>());

  nb::class_<ConstantLR, LRScheduler>(lm, "ConstantLR")
      .def(
          "__init__",
          [](ConstantLR* self, Optimizer& opt, double factor, int64_t total_iters, int64_t last_epoch) {
            check_resume(opt, last_epoch);
            new (self) ConstantLR(opt, factor, total_iters, last_epoch);
          },
          "optimizer"_a, "factor"_a = 1.0 / 3, "total_iters"_a = 5, "last_epoch"_a = -1, nb::keep_alive<1, 2>());

  nb::class_<PolynomialLR, LRScheduler>(lm, "PolynomialLR")
      .def(
          "__init__",
          [](PolynomialLR* self, Optimizer& opt, int64_t total_iters, double power, int64_t last_epoch) {
            check_resume(opt, last_epoch);
            new (self) PolynomialLR(opt, total_iters, power, last_epoch);
          },
          "optimizer"_a, "total_iters"_a = 5, "power"_a = 1.0, "last_epoch"_a = -1, nb::keep_alive<1, 2>());

  nb::class_<CosineAnnealingWarmRestarts, LRScheduler>(lm, "CosineAnnealingWarmRestarts")
      .def(
          "__init__",
          [](CosineAnnealingWarmRestarts* self, Optimizer& opt, nb::handle T_0, nb::handle T_mult, double eta_min,
             int64_t last_epoch) {
            auto int_arg = [](nb::handle v, const char* what, int64_t min) {
              if (!PyLong_Check(v.ptr()) || PyBool_Check(v.ptr()) || nb::cast<int64_t>(v) < min)
                throw nb::value_error(("Expected " + std::string(what) + ", but got " +
                                       nb::cast<std::string>(nb::repr(v))).c_str());
              return nb::cast<int64_t>(v);
            };
            int64_t t0 = int_arg(T_0, "positive integer T_0", 1), tm = int_arg(T_mult, "integer T_mult >= 1", 1);
            check_resume(opt, last_epoch);
            new (self) CosineAnnealingWarmRestarts(opt, t0, tm, eta_min, last_epoch);
          },
          "optimizer"_a, "T_0"_a, "T_mult"_a = 1, "eta_min"_a = 0.0, "last_epoch"_a = -1, nb::keep_alive<1, 2>())
      // step(epoch) takes fractional epochs here, without the deprecation warning (torch's own override)
      .def(
          "step",
          [](CosineAnnealingWarmRestarts& s, nb::handle epoch) {
            if (epoch.is_none()) s.step();
            else s.step_to(nb::cast<double>(nb::float_(epoch)));
          },
          "epoch"_a = nb::none());

  nb::class_<CyclicLR, LRScheduler>(lm, "CyclicLR")
      .def(
          "__init__",
          [](CyclicLR* self, Optimizer& opt, nb::handle base_lr, nb::handle max_lr, int64_t step_size_up,
             std::optional<int64_t> step_size_down, const std::string& mode, double gamma, nb::handle scale_fn,
             const std::string& scale_mode, bool cycle_momentum, nb::handle base_momentum,
             nb::handle max_momentum, int64_t last_epoch) {
            CyclicLROptions o;
            o.step_size_up = step_size_up;
            o.step_size_down = step_size_down;
            o.mode = mode;
            o.gamma = gamma;
            if (!scale_fn.is_none()) {
              auto fn = std::make_shared<nb::object>(nb::borrow(scale_fn));
              o.scale_fn = [fn](double x) {
                nb::gil_scoped_acquire gil;
                return nb::cast<double>(nb::float_((*fn)(x)));
              };
            }
            o.scale_mode = scale_mode;
            o.cycle_momentum = cycle_momentum;
            if (cycle_momentum) {
              o.base_momentum = per_group("base_momentum", base_momentum, opt);
              o.max_momentum = per_group("max_momentum", max_momentum, opt);
            }
            o.last_epoch = last_epoch;
            std::vector<double> b = per_group("base_lr", base_lr, opt), m = per_group("max_lr", max_lr, opt);
            check_resume(opt, last_epoch);
            new (self) CyclicLR(opt, b, m, o);
          },
          "optimizer"_a, "base_lr"_a, "max_lr"_a, "step_size_up"_a = 2000, "step_size_down"_a = nb::none(),
          "mode"_a = "triangular", "gamma"_a = 1.0, "scale_fn"_a = nb::none(), "scale_mode"_a = "cycle",
          "cycle_momentum"_a = true, "base_momentum"_a = 0.8, "max_momentum"_a = 0.9, "last_epoch"_a = -1,
          nb::keep_alive<1, 2>());

  nb::class_<LambdaLR, LRScheduler>(lm, "LambdaLR")
      .def(
          "__init__",
          [](LambdaLR* self, Optimizer& opt, nb::handle lr_lambda, int64_t last_epoch) {
            std::vector<LambdaLR::Lambda> fns;
            if (PyList_Check(lr_lambda.ptr()) || PyTuple_Check(lr_lambda.ptr())) {
              size_t n = opt.param_groups().size();
              if (nb::len(lr_lambda) != n)
                throw nb::value_error(("Expected " + std::to_string(n) + " lr_lambdas, but got " +
                                       std::to_string(nb::len(lr_lambda)))
                                          .c_str());
              for (nb::handle f : lr_lambda) fns.push_back(wrap_lambda(f));
            } else {
              fns.push_back(wrap_lambda(lr_lambda));
            }
            check_resume(opt, last_epoch);
            new (self) LambdaLR(opt, std::move(fns), last_epoch);
          },
          "optimizer"_a, "lr_lambda"_a, "last_epoch"_a = -1, nb::keep_alive<1, 2>());

  nb::class_<SequentialLR, LRScheduler>(lm, "SequentialLR")
      .def(
          "__init__",
          [](SequentialLR* self, Optimizer& opt, nb::handle schedulers, nb::handle milestones,
             int64_t last_epoch) {
            std::vector<std::shared_ptr<LRScheduler>> s;
            size_t i = 0;
            for (nb::handle x : schedulers) {
              if (!nb::isinstance<LRScheduler>(x))
                throw nb::type_error(("SequentialLR at index " + std::to_string(i) +
                                      " should have `optimizer` as its attribute.")
                                         .c_str());
              s.push_back(nb::cast<std::shared_ptr<LRScheduler>>(x));
              ++i;
            }
            new (self) SequentialLR(opt, std::move(s), int_list(milestones), last_epoch);
          },
          "optimizer"_a, "schedulers"_a, "milestones"_a, "last_epoch"_a = -1,
          nb::keep_alive<1, 2>())
      .def("step", [](SequentialLR& s) { s.step(); });

  nb::class_<OneCycleLR, LRScheduler>(lm, "OneCycleLR")
      .def(
          "__init__",
          [](OneCycleLR* self, Optimizer& opt, nb::handle max_lr, nb::handle total_steps,
             nb::handle epochs, nb::handle steps_per_epoch, double pct_start,
             const std::string& anneal_strategy, bool cycle_momentum, nb::handle base_momentum,
             nb::handle max_momentum, double div_factor, double final_div_factor, bool three_phase,
             int64_t last_epoch) {
            OneCycleLROptions o;
            o.total_steps = opt_int(total_steps);
            o.epochs = opt_int(epochs);
            o.steps_per_epoch = opt_int(steps_per_epoch);
            o.pct_start = pct_start;
            o.anneal_strategy = anneal_strategy;
            o.cycle_momentum = cycle_momentum;
            if (cycle_momentum) {
              o.base_momentum = per_group("base_momentum", base_momentum, opt);
              o.max_momentum = per_group("max_momentum", max_momentum, opt);
            }
            o.div_factor = div_factor;
            o.final_div_factor = final_div_factor;
            o.three_phase = three_phase;
            o.last_epoch = last_epoch;
            std::vector<double> lrs = per_group("max_lr", max_lr, opt);
            check_resume(opt, last_epoch);
            new (self) OneCycleLR(opt, lrs, o);
          },
          "optimizer"_a, "max_lr"_a, "total_steps"_a = nb::none(), "epochs"_a = nb::none(),
          "steps_per_epoch"_a = nb::none(), "pct_start"_a = 0.3, "anneal_strategy"_a = "cos",
          "cycle_momentum"_a = true, "base_momentum"_a = 0.85, "max_momentum"_a = 0.95,
          "div_factor"_a = 25.0, "final_div_factor"_a = 1e4, "three_phase"_a = false,
          "last_epoch"_a = -1, nb::keep_alive<1, 2>());

  nb::class_<ReduceLROnPlateau, LRScheduler>(lm, "ReduceLROnPlateau")
      .def(
          "__init__",
          [](ReduceLROnPlateau* self, Optimizer& opt, const std::string& mode, double factor,
             int64_t patience, double threshold, const std::string& threshold_mode,
             int64_t cooldown, nb::handle min_lr, double eps) {
            ReduceLROnPlateauOptions o;
            o.mode = mode;
            o.factor = factor;
            o.patience = patience;
            o.threshold = threshold;
            o.threshold_mode = threshold_mode;
            o.cooldown = cooldown;
            if (PyList_Check(min_lr.ptr()) || PyTuple_Check(min_lr.ptr())) {
              size_t n = opt.param_groups().size();
              if (nb::len(min_lr) != n)
                throw nb::value_error(("expected " + std::to_string(n) + " min_lrs, got " +
                                       std::to_string(nb::len(min_lr)))
                                          .c_str());
              for (nb::handle x : min_lr) o.min_lrs.push_back(nb::cast<double>(nb::float_(x)));
            } else {
              o.min_lr = nb::cast<double>(nb::float_(min_lr));
            }
            o.eps = eps;
            new (self) ReduceLROnPlateau(opt, o);
          },
          "optimizer"_a, "mode"_a = "min", "factor"_a = 0.1, "patience"_a = 10,
          "threshold"_a = 1e-4, "threshold_mode"_a = "rel", "cooldown"_a = 0, "min_lr"_a = 0,
          "eps"_a = 1e-8, nb::keep_alive<1, 2>())
      .def(
          "step",
          [](ReduceLROnPlateau& s, nb::handle metrics, nb::handle epoch) {
            double m = nb::cast<double>(nb::float_(metrics));
            if (epoch.is_none()) {
              s.step(m);
            } else {
              warn_epoch();
              s.step(m, nb::cast<int64_t>(epoch));
            }
          },
          "metrics"_a, "epoch"_a = nb::none())
      .def_prop_ro("in_cooldown", [](const ReduceLROnPlateau& s) {
        return nb::cast<int64_t>(to_py(s.state_dict().at("cooldown_counter"))) > 0;
      });
}

}  // namespace kiln::py
