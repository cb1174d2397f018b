// LBFGS: torch's two-loop recursion and strong-Wolfe line search (torch/optim/lbfgs.py), with the step
// driven by the closure.
#include <cmath>
#include <optional>

#include "kiln/autograd/autograd.h"
#include "kiln/core/stream.h"
#include "kiln/dispatch/graph.h"
#include "kiln/ops/ops.h"
#include "kiln/optim/detail/options_util.h"
#include "kiln/optim/optimizers.h"

namespace kiln::optim {

using detail::check_nonneg;
using detail::merge;
using detail::single_group;

// ---- LBFGS ----------------------------------------------------------------------------------------------
Options lbfgs_defaults(const Options& given) {
  const char* op = "LBFGS";
  Options o = merge(op,
                    {{"lr", 1},
                     {"max_iter", 20},
                     {"max_eval", Value()},
                     {"tolerance_grad", 1e-7},
                     {"tolerance_change", 1e-9},
                     {"history_size", 100},
                     {"line_search_fn", Value()}},
                    given);
  check_nonneg(op, o, "lr", "learning rate");
  if (o.get("max_eval").kind() == Value::Kind::None)
    o.set("max_eval", o.get("max_iter").to_int("max_iter") * 5 / 4);
  const Value& ls = o.get("line_search_fn");
  KILN_CHECK(ls.kind() == Value::Kind::None || ls.kind() == Value::Kind::Str, Type, op,
             "line_search_fn must be None or 'strong_wolfe'");
  return o;
}

LBFGS::LBFGS(const TensorList& params, const LBFGSOptions& o) : LBFGS(single_group(params), o.to_options()) {}
LBFGS::LBFGS(std::vector<ParamGroup> groups, const Options& defaults) : Optimizer("LBFGS", lbfgs_defaults(defaults)) {
  init_groups(std::move(groups));
  KILN_CHECK(groups_.size() == 1, Value, "LBFGS", "LBFGS doesn't support per-parameter options (parameter groups)");
}

void LBFGS::step_group(ParamGroup&) {
  KILN_FAIL(Runtime, "LBFGS", "LBFGS.step() needs a closure that re-evaluates the model and returns the loss");
}

// The gradients of every parameter, flat and concatenated (zeros for a parameter without one).
Tensor LBFGS::flat_grad() const {
  TensorList views;
  for (const Tensor& p : groups_[0].params) {
    Tensor g = grad(p);
    Tensor v = g.defined() ? g.reshape({g.numel()}) : zeros({p.numel()}, p.dtype());
    if (is_complex(v.dtype())) v = view_as_real(v).reshape({2 * v.numel()});
    views.push_back(v);
  }
  return cat(views, 0);
}

void LBFGS::add_grad(double t, const Tensor& d) {
  int64_t off = 0;
  for (const Tensor& p0 : groups_[0].params) {
    Tensor p = is_complex(p0.dtype()) ? view_as_real(p0) : p0;
    int64_t n = p.numel();
    add_(p, d.narrow(0, off, n).view(p.sizes()), Scalar(t));
    off += n;
  }
}

double LBFGS::directional_evaluate(const LossClosure& closure, const TensorList& x, double t, const Tensor& d,
                                   Tensor& g) {
  add_grad(t, d);
  double loss;
  {
    EnableGradGuard enable;
    loss = closure().item<double>();
  }
  g = flat_grad();
  for (size_t i = 0; i < x.size(); ++i) copy_(groups_[0].params[i], x[i]);
  return loss;
}

namespace {
double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2,
                         std::optional<std::pair<double, double>> bounds = std::nullopt) {
  auto [lo, hi] = bounds ? *bounds : (x1 <= x2 ? std::pair{x1, x2} : std::pair{x2, x1});
  const double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
  const double d2_square = d1 * d1 - g1 * g2;
  if (d2_square >= 0) {
    const double d2 = std::sqrt(d2_square);
    const double m = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
                              : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
    return std::min(std::max(m, lo), hi);
  }
  return (lo + hi) / 2.0;
}
}  // namespace

Tensor LBFGS::step(const LossClosure& closure) {
  const char* op = "LBFGS";
  KILN_CHECK(closure != nullptr, Runtime, op, "LBFGS.step() needs a closure that re-evaluates the model and returns the loss");
  KILN_CHECK(!graph_capturing(), Runtime, op, "LBFGS.step() cannot be captured in a graph: its line search "
             "branches on the loss's value");
  NoGradGuard no_grad;
  // as Optimizer::step: run here, after all queued work
  stream_detail::before_host_read();
  StreamGuard here{default_stream()};
  const Options& o = groups_[0].options;
  const double lr = o.get_double("lr"), tol_grad = o.get_double("tolerance_grad");
  const double tol_change = o.get_double("tolerance_change");
  const int64_t max_iter = o.get("max_iter").to_int("max_iter"), max_eval = o.get("max_eval").to_int("max_eval");
  const size_t history = static_cast<size_t>(o.get("history_size").to_int("history_size"));
  const Value& ls = o.get("line_search_fn");
  const bool wolfe = ls.kind() == Value::Kind::Str;
  if (wolfe) KILN_CHECK(ls.str_value("line_search_fn") == "strong_wolfe", Runtime, op, "only 'strong_wolfe' is supported");
  auto eval = [&] {
    EnableGradGuard enable;
    return closure();
  };
  auto absmax = [](const Tensor& t) { return max(abs(t)).item<double>(); };
  auto dotd = [](const Tensor& a, const Tensor& b) { return dot(a, b).item<double>(); };

  restore_state();
  Tensor orig_loss = eval();
  double loss = orig_loss.item<double>();
  int64_t current_evals = 1;
  ++func_evals_;
  Tensor g = flat_grad();
  if (absmax(g) <= tol_grad) {
    save_state(history);
    return orig_loss;
  }

  int64_t n_iter = 0;
  while (n_iter < max_iter) {
    ++n_iter;
    ++n_iter_;
    if (n_iter_ == 1) {
      d_ = neg(g);
      old_dirs_.clear(), old_stps_.clear(), ro_.clear();
      H_diag_ = 1;
    } else {
      Tensor y = sub(g, prev_flat_grad_);
      Tensor s = mul(d_, scalar_tensor(t_, Dtype::Undefined, true));
      const double ys = dotd(y, s);
      if (ys > 1e-10) {
        if (old_dirs_.size() == history) {
          old_dirs_.erase(old_dirs_.begin()), old_stps_.erase(old_stps_.begin()), ro_.erase(ro_.begin());
        }
        old_dirs_.push_back(y), old_stps_.push_back(s), ro_.push_back(1.0 / ys);
        H_diag_ = ys / dotd(y, y);
      }
      const size_t k = old_dirs_.size();
      std::vector<double>& al = al_;
      al.assign(k, 0.0);
      Tensor q = neg(g);
      for (size_t i = k; i-- > 0;) {
        al[i] = dotd(old_stps_[i], q) * ro_[i];
        add_(q, old_dirs_[i], Scalar(-al[i]));
      }
      Tensor r = mul(q, scalar_tensor(H_diag_, Dtype::Undefined, true));
      for (size_t i = 0; i < k; ++i) {
        const double be = dotd(old_dirs_[i], r) * ro_[i];
        add_(r, old_stps_[i], Scalar(al[i] - be));
      }
      d_ = r;
    }
    prev_flat_grad_ = prev_flat_grad_.defined() ? copy_(prev_flat_grad_, g), prev_flat_grad_ : clone(g);
    prev_loss_ = loss;
    t_ = n_iter_ == 1 ? std::min(1.0, 1.0 / sum(abs(g)).item<double>()) * lr : lr;
    const double gtd = dotd(g, d_);
    if (gtd > -tol_change) break;

    int64_t evals = 0;
    bool opt_cond = false;
    if (wolfe) {
      TensorList x;
      for (const Tensor& p : groups_[0].params) x.push_back(clone(p));
      // torch's _strong_wolfe
      const double c1 = 1e-4, c2 = 0.9, max_ls = double(max_eval - current_evals);
      const double d_norm = absmax(d_);
      double t = t_, f = loss;
      Tensor g0 = g.clone(), g_new;
      double f_new = directional_evaluate(closure, x, t, d_, g_new);
      evals = 1;
      double gtd_new = dotd(g_new, d_);
      double t_prev = 0, f_prev = f, gtd_prev = gtd;
      Tensor g_prev = g0;
      bool done = false;
      int64_t ls_iter = 0;
      std::vector<double> br, br_f, br_gtd;
      std::vector<Tensor> br_g;
      while (ls_iter < max_ls) {
        if (f_new > f + c1 * t * gtd || (ls_iter > 1 && f_new >= f_prev)) {
          br = {t_prev, t}, br_f = {f_prev, f_new}, br_g = {g_prev, g_new.clone()}, br_gtd = {gtd_prev, gtd_new};
          break;
        }
        if (std::abs(gtd_new) <= -c2 * gtd) {
          br = {t}, br_f = {f_new}, br_g = {g_new};
          done = true;
          break;
        }
        if (gtd_new >= 0) {
          br = {t_prev, t}, br_f = {f_prev, f_new}, br_g = {g_prev, g_new.clone()}, br_gtd = {gtd_prev, gtd_new};
          break;
        }
        const double min_step = t + 0.01 * (t - t_prev), max_step = t * 10, tmp = t;
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, std::pair{min_step, max_step});
        t_prev = tmp, f_prev = f_new, g_prev = g_new.clone(), gtd_prev = gtd_new;
        f_new = directional_evaluate(closure, x, t, d_, g_new);
        ++evals;
        gtd_new = dotd(g_new, d_);
        ++ls_iter;
      }
      if (ls_iter == max_ls) br = {0, t}, br_f = {f, f_new}, br_g = {g0, g_new}, br_gtd = {gtd, gtd_new};
      bool insuf = false;
      size_t lo = br_f.front() <= br_f.back() ? 0 : 1, hi = 1 - lo;
      while (!done && ls_iter < max_ls) {
        if (std::abs(br[1] - br[0]) * d_norm < tol_change) break;
        t = cubic_interpolate(br[0], br_f[0], br_gtd[0], br[1], br_f[1], br_gtd[1]);
        const double bmax = std::max(br[0], br[1]), bmin = std::min(br[0], br[1]), eps = 0.1 * (bmax - bmin);
        if (std::min(bmax - t, t - bmin) < eps) {
          if (insuf || t >= bmax || t <= bmin) {
            t = std::abs(t - bmax) < std::abs(t - bmin) ? bmax - eps : bmin + eps;
            insuf = false;
          } else {
            insuf = true;
          }
        } else {
          insuf = false;
        }
        f_new = directional_evaluate(closure, x, t, d_, g_new);
        ++evals;
        gtd_new = dotd(g_new, d_);
        ++ls_iter;
        if (f_new > f + c1 * t * gtd || f_new >= br_f[lo]) {
          br[hi] = t, br_f[hi] = f_new, br_g[hi] = g_new.clone(), br_gtd[hi] = gtd_new;
          lo = br_f[0] <= br_f[1] ? 0 : 1, hi = 1 - lo;
        } else {
          if (std::abs(gtd_new) <= -c2 * gtd) done = true;
          else if (gtd_new * (br[hi] - br[lo]) >= 0)
            br[hi] = br[lo], br_f[hi] = br_f[lo], br_g[hi] = br_g[lo], br_gtd[hi] = br_gtd[lo];
          br[lo] = t, br_f[lo] = f_new, br_g[lo] = g_new.clone(), br_gtd[lo] = gtd_new;
        }
      }
      t_ = br[lo], loss = br_f[lo], g = br_g[lo];
      add_grad(t_, d_);
      opt_cond = absmax(g) <= tol_grad;
    } else {
      add_grad(t_, d_);
      if (n_iter != max_iter) {
        loss = eval().item<double>();
        g = flat_grad();
        opt_cond = absmax(g) <= tol_grad;
        evals = 1;
      }
    }
    current_evals += evals;
    func_evals_ += evals;
    if (n_iter == max_iter || current_evals >= max_eval || opt_cond) break;
    if (absmax(mul(d_, scalar_tensor(t_, Dtype::Undefined, true))) <= tol_change) break;
    if (std::abs(loss - prev_loss_) < tol_change) break;
  }
  save_state(history);
  return orig_loss;
}

// torch keeps its whole state on the first parameter: the counters, the last direction, step, gradient
// and loss, and the history lists (`al` is its scratch list, history_size long); state_dict() and
// load_state_dict() carry it, so a loaded optimiser resumes where the saved one stopped.
void LBFGS::save_state(size_t history) {
  ParamState& st = state_[groups_[0].params[0].impl()];
  st.set("func_evals", scalar_tensor(Scalar(func_evals_), kInt64));
  st.set("n_iter", scalar_tensor(Scalar(n_iter_), kInt64));
  if (n_iter_ == 0) return;
  const Dtype dt = groups_[0].params[0].dtype();
  st.set("d", d_);
  st.set("t", scalar_tensor(t_, kFloat64));
  st.set_list("old_dirs", old_dirs_);
  st.set_list("old_stps", old_stps_);
  TensorList ro, al(history);
  for (size_t i = 0; i < ro_.size(); ++i) ro.push_back(scalar_tensor(ro_[i], dt));
  for (size_t i = 0; i < al_.size() && i < history; ++i) al[i] = scalar_tensor(al_[i], dt);
  st.set_list("ro", std::move(ro));
  st.set_list("al", std::move(al));
  st.set("H_diag", scalar_tensor(H_diag_, dt));
  st.set("prev_flat_grad", prev_flat_grad_);
  st.set("prev_loss", scalar_tensor(prev_loss_, kFloat64));
}

void LBFGS::restore_state() {
  const ParamState* st = find_state(groups_[0].params[0]);
  old_dirs_.clear(), old_stps_.clear(), ro_.clear(), al_.clear();
  d_ = prev_flat_grad_ = Tensor();
  func_evals_ = n_iter_ = 0, t_ = 0, H_diag_ = 1, prev_loss_ = 0;
  if (!st) return;
  auto number = [&](const char* key, double dflt) {
    const Tensor* t = st->find(key);
    return t && t->defined() ? t->item<double>() : dflt;
  };
  auto list = [&](const char* key) {
    const TensorList* l = st->find_list(key);
    return l ? *l : TensorList();
  };
  func_evals_ = static_cast<int64_t>(number("func_evals", 0));
  n_iter_ = static_cast<int64_t>(number("n_iter", 0));
  t_ = number("t", 0), H_diag_ = number("H_diag", 1), prev_loss_ = number("prev_loss", 0);
  d_ = st->get("d"), prev_flat_grad_ = st->get("prev_flat_grad");
  old_dirs_ = list("old_dirs"), old_stps_ = list("old_stps");
  for (const Tensor& r : list("ro")) ro_.push_back(r.item<double>());
  KILN_CHECK(old_dirs_.size() == old_stps_.size() && old_dirs_.size() == ro_.size(), Value, "LBFGS",
             "loaded state has history lists of different lengths: old_dirs ", old_dirs_.size(),
             ", old_stps ", old_stps_.size(), ", ro ", ro_.size());
}

}  // namespace kiln::optim
