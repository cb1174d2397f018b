// SGD, Adam/AdamW, RMSprop, Adagrad, Rprop, ASGD, Adamax, NAdam, RAdam (LBFGS: lbfgs.cpp): defaults and argument checks as torch 2.13's constructors,
// lazy state as torch's _init_group, and the step through the fused kernel (detail/fused.h).
#include "kiln/optim/optimizers.h"

#include <cmath>
#include <map>
#include <string_view>

#include "kiln/autograd/autograd.h"
#include "kiln/ops/ops.h"
#include "kiln/optim/detail/fused.h"
#include "kiln/optim/detail/options_util.h"

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


Dtype step_dtype() { return default_dtype() == kFloat64 ? kFloat64 : kFloat32; }

// state["step"] += 1 in the step tensor's own dtype; returns the new value.
double bump_step(const char* op, ParamState& st) {
  const Tensor* found = st.find("step");
  if (!found || !found->defined()) {
    st.set("step", zeros({}, step_dtype()));
    found = st.find("step");
  }
  const Tensor& t = *found;
  KILN_CHECK(t.numel() == 1, Runtime, op, "state 'step' must have one element");
  double v;
  if (t.dtype() == kFloat32) {
    float* p = static_cast<float*>(t.data_ptr());
    *p += 1.0f;
    v = *p;
  } else if (t.dtype() == kFloat64) {
    double* p = static_cast<double*>(t.data_ptr());
    *p += 1.0;
    v = *p;
  } else {
    v = t.item<double>() + 1;
    fill_(t, v);
  }
  t.bump_version();
  return v;
}

// Collects the parameters of one group step as contiguous real segments by dtype, runs the fused
// update, then writes back parameters that were not contiguous.
class Updater {
 public:
  explicit Updater(const char* op) : op_(op) {}

  // p with gradient g and state tensors st[keys] (nullptr key: unused slot).
  void add(const Tensor& p, Tensor g, ParamState* st, std::initializer_list<const char*> keys,
           Segment seg) {
    Dtype dt = p.dtype();
    KILN_CHECK(
        dt == kFloat32 || dt == kFloat64 || dt == kFloat16 || dt == kBFloat16 || is_complex(dt),
        Type, op_, "parameters of dtype ", dtype_name(dt), " are not supported");
    KILN_CHECK(g.sizes() == p.sizes(), Runtime, op_, "gradient of shape ", g.sizes(),
               " does not match its parameter's shape ", p.sizes());
    if (g.dtype() != dt) g = to_dtype(g, dt);
    Tensor work = p.is_contiguous() ? p : contiguous(p);
    if (!p.is_contiguous()) copy_back_.emplace_back(p, work);
    g = contiguous(g);
    Tensor slots[3];
    int k = 0;
    for (const char* key : keys) {
      if (key) {
        Tensor t = st->get(key);
        KILN_CHECK(t.defined(), Runtime, op_, "state '", key, "' is missing");
        KILN_CHECK(t.sizes() == p.sizes(), Runtime, op_, "state '", key, "' has shape ", t.sizes(),
                   " but its parameter has shape ", p.sizes());
        if (t.dtype() != dt || !t.is_contiguous()) {
          t = contiguous(to_dtype(t, dt, /*copy=*/true));
          st->set(key, t);
        }
        slots[k] = t;
        bumped_.push_back(t);
      }
      ++k;
    }
    if (is_complex(dt)) {
      work = view_as_real(work);
      g = view_as_real(g);
      for (Tensor& t : slots)
        if (t.defined()) t = view_as_real(t);
      dt = work.dtype();
    }
    seg.n = work.numel();
    Job& job = jobs_[dt];
    job.segs.push_back(seg);
    for (const Tensor& t : {work, g, slots[0], slots[1], slots[2]}) job.tensors.push_back(t);
    bumped_.push_back(p);
  }

  void run(Algo algo, const Hyper& h) {
    for (const auto& [dt, job] : jobs_) detail::fused_update(algo, h, job.tensors, job.segs);
    for (auto& [p, work] : copy_back_) copy_(p, work);
    for (const Tensor& t : bumped_) t.bump_version();
  }

 private:
  struct Job {  // one fused update per dtype
    std::vector<Segment> segs;
    TensorList tensors;  // five per segment (detail::fused_update)
  };
  const char* op_;
  std::map<Dtype, Job> jobs_;
  std::vector<Tensor> bumped_;
  std::vector<std::pair<Tensor, Tensor>> copy_back_;
};

std::vector<double> betas_of(const char* op, const Options& o) {
  std::vector<double> b = o.get("betas").to_doubles("betas");
  KILN_CHECK(b.size() == 2, Value, op, "betas must have two elements");
  return b;
}

// The group's hyper-parameters named in `keys` (torch's option names); the others stay 0 / false.
// decoupled_weight_decay may be absent (Adam's groups from before the option existed).
Hyper hyper_of(const char* op, const Options& o, std::initializer_list<const char*> keys) {
  static const std::pair<const char*, double Hyper::*> numbers[] = {
      {"lr", &Hyper::lr},       {"eps", &Hyper::eps},           {"weight_decay", &Hyper::weight_decay},
      {"alpha", &Hyper::alpha}, {"momentum", &Hyper::momentum}, {"dampening", &Hyper::dampening}};
  static const std::pair<const char*, bool Hyper::*> flags[] = {
      {"maximize", &Hyper::maximize}, {"nesterov", &Hyper::nesterov}, {"amsgrad", &Hyper::amsgrad},
      {"centered", &Hyper::centered}};
  Hyper h;
  for (std::string_view key : keys) {
    if (key == "betas") {
      std::vector<double> b = betas_of(op, o);
      h.beta1 = b[0], h.beta2 = b[1];
    } else if (key == "decoupled_weight_decay") {
      const Value* v = o.find("decoupled_weight_decay");
      h.decoupled = v && v->to_bool();
    }
    for (const auto& [name, field] : numbers)
      if (key == name) h.*field = o.get_double(name);
    for (const auto& [name, field] : flags)
      if (key == name) h.*field = o.get_bool(name);
  }
  return h;
}

void fill_missing(Options& o, std::initializer_list<std::pair<std::string, Value>> d) {
  for (const auto& [k, v] : d) o.setdefault(k, v);
}

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
