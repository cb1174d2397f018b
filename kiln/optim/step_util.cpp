// The optimisers' shared step helpers (detail/step_util.h).
#include "kiln/optim/detail/step_util.h"

#include <string_view>

#include "kiln/ops/ops.h"

namespace kiln::optim::detail {

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

void Updater::add(const Tensor& p, Tensor g, ParamState* st, std::initializer_list<const char*> keys,
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

void Updater::run(Algo algo, const Hyper& h) {
  for (const auto& [dt, job] : jobs_) detail::fused_update(algo, h, job.tensors, job.segs);
  for (auto& [p, work] : copy_back_) copy_(p, work);
  for (const Tensor& t : bumped_) t.bump_version();
}

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

}  // namespace kiln::optim::detail
