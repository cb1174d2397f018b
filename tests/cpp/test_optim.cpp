// kiln::optim from C++: AdamW minimises a small quadratic, SGD with momentum matches the update
// computed by hand, options are read and written through param groups, state dicts round-trip,
// schedulers change the group lr, and bad arguments raise Value-kind errors.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/kiln.h"
#include "kiln/optim/optim.h"

using namespace kiln;

namespace {

Tensor vec(std::vector<double> v, Dtype d = kFloat32) {
  Tensor t = empty({static_cast<int64_t>(v.size())}, d);
  for (size_t i = 0; i < v.size(); ++i)
    select(t, 0, static_cast<int64_t>(i)).copy_(scalar_tensor(v[i]));
  return t;
}

double at(const Tensor& t, int64_t i) { return select(t, 0, i).item<double>(); }

double quadratic_loss(const Tensor& w, const Tensor& target, bool backward) {
  Tensor d = w - target;
  Tensor loss = (d * d).sum();
  if (backward) loss.backward();
  return loss.item<double>();
}

}  // namespace

TEST(Optim, AdamWDecreasesQuadraticLoss) {
  Tensor w = zeros({4}).requires_grad_();
  Tensor target = vec({1, -2, 3, 0.5});
  optim::AdamW opt({w}, optim::AdamWOptions(0.1).weight_decay(0.01).betas({0.9, 0.95}));
  double first = quadratic_loss(w, target, false), last = first;
  for (int i = 0; i < 150; ++i) {
    opt.zero_grad();
    last = quadratic_loss(w, target, true);
    opt.step();
  }
  last = quadratic_loss(w, target, false);
  EXPECT_LT(last, first * 1e-2) << "first " << first << " last " << last;
  const optim::ParamState* st = opt.find_state(w);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->get("step").item<double>(), 150.0);
  EXPECT_TRUE(st->contains("exp_avg") && st->contains("exp_avg_sq"));
}

TEST(Optim, SGDMomentumMatchesHandComputation) {
  Tensor p = vec({1.0, -2.0}, kFloat64).requires_grad_();
  optim::SGD opt({p}, optim::SGDOptions(0.1).momentum(0.9).dampening(0.2).weight_decay(0.05));
  const double g[2] = {0.5, -1.5};
  double ref[2] = {1.0, -2.0}, buf[2] = {0, 0};
  for (int step = 0; step < 4; ++step) {
    set_grad(p, vec({g[0], g[1]}, kFloat64));
    opt.step();
    for (int i = 0; i < 2; ++i) {
      double gi = g[i] + 0.05 * ref[i];                         // weight decay
      buf[i] = step == 0 ? gi : 0.9 * buf[i] + (1 - 0.2) * gi;  // momentum with dampening
      ref[i] -= 0.1 * buf[i];
    }
    EXPECT_NEAR(at(p, 0), ref[0], 1e-12) << "step " << step;
    EXPECT_NEAR(at(p, 1), ref[1], 1e-12) << "step " << step;
  }
  // a parameter without a gradient is skipped
  Tensor q = vec({3.0}, kFloat64).requires_grad_();
  opt.add_param_group(optim::ParamGroup({q}, optim::Options{{"lr", 1.0}}));
  opt.step();
  EXPECT_EQ(at(q, 0), 3.0);
  EXPECT_EQ(opt.param_groups()[1].lr(), 1.0);
  EXPECT_EQ(opt.param_groups()[1].options.get_double("momentum"), 0.9);  // from the defaults
}

TEST(Optim, StateDictRoundTripAndLrAccess) {
  Tensor a = vec({0.5, 1.5, -1.0}).requires_grad_(), b = vec({0.5, 1.5, -1.0}).requires_grad_();
  optim::Adam opa({a}, optim::AdamOptions(0.05).amsgrad(true));
  optim::Adam opb({b}, optim::AdamOptions(0.5));
  for (int i = 0; i < 3; ++i) {
    set_grad(a, vec({0.1 * i, -0.2, 0.3}));
    opa.step();
  }
  b.detach().copy_(a.detach());
  opb.load_state_dict(opa.state_dict());
  EXPECT_EQ(opb.param_groups()[0].lr(), 0.05);
  EXPECT_TRUE(opb.param_groups()[0].options.get_bool("amsgrad"));
  for (int i = 0; i < 3; ++i) {
    for (const Tensor& p : {a, b}) set_grad(p, vec({0.3, 0.1 * i, -0.4}));
    opa.step();
    opb.step();
  }
  EXPECT_TRUE(equal(a.detach(), b.detach()));
  opa.param_groups()[0].set_lr(0.125);
  EXPECT_EQ(opa.state_dict().param_groups[0].options.get_double("lr"), 0.125);
}

TEST(Optim, SchedulersSetGroupLr) {
  Tensor p = zeros({2}).requires_grad_();
  optim::SGD opt({p}, optim::SGDOptions(1.0).momentum(0.9));
  optim::StepLR sched(opt, 2, 0.5);
  std::vector<double> lrs;
  for (int i = 0; i < 5; ++i) {
    lrs.push_back(opt.param_groups()[0].lr());
    opt.step();
    sched.step();
  }
  EXPECT_EQ(lrs, (std::vector<double>{1.0, 1.0, 0.5, 0.5, 0.25}));
  EXPECT_EQ(sched.get_last_lr()[0], 0.25);  // last_epoch 5

  optim::SGD opt2({zeros({1}).requires_grad_()}, optim::SGDOptions(0.1).momentum(0.9));
  optim::OneCycleLROptions oc;
  oc.total_steps = 10;
  optim::OneCycleLR one(opt2, {1.0}, oc);
  EXPECT_NEAR(opt2.param_groups()[0].lr(), 0.04, 1e-12);
  EXPECT_NEAR(opt2.param_groups()[0].options.get_double("momentum"), 0.95, 1e-12);
  for (int i = 0; i < 2; ++i) one.step();  // the peak: pct_start * total_steps - 1 = 2 steps
  EXPECT_NEAR(opt2.param_groups()[0].lr(), 1.0, 1e-9);
  EXPECT_NEAR(opt2.param_groups()[0].options.get_double("momentum"), 0.85, 1e-9);
  for (int i = 0; i < 7; ++i) one.step();  // the end: max_lr / div_factor / final_div_factor
  EXPECT_NEAR(opt2.param_groups()[0].lr(), 0.04 / 1e4, 1e-12);
}

TEST(Optim, ArgumentErrors) {
  Tensor p = zeros({2}).requires_grad_();
  try {
    optim::SGD bad({p}, optim::SGDOptions(-1));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value);
    EXPECT_STREQ(e.what(), "[SGD] Invalid learning rate: -1.0");
  }
  EXPECT_THROW(optim::Adam({p}, optim::AdamOptions().betas({1.0, 0.9})), Error);
  EXPECT_THROW(optim::SGD(TensorList{}, optim::SGDOptions(0.1)), Error);
  EXPECT_THROW(optim::SGD({p * 2}), Error);  // not a leaf
  optim::SGD ok({p});
  EXPECT_THROW(ok.add_param_group(optim::ParamGroup({p})), Error);  // already in a group
  EXPECT_THROW(optim::LinearLR(ok, 0.0), Error);
}

// Rprop and ASGD through their C++ options structs: both minimise the quadratic, keep torch's state
// names, and read back their settings from the group.
TEST(Optim, RpropAndASGDFromOptions) {
  Tensor target = vec({1, -2, 3, 0.5});
  Tensor w = zeros({4}).requires_grad_();
  optim::Rprop rp({w}, optim::RpropOptions(0.05).etaminus(0.4).etaplus(1.3).step_size_max(1.0));
  double first = quadratic_loss(w, target, false);
  for (int i = 0; i < 60; ++i) {
    rp.zero_grad();
    quadratic_loss(w, target, true);
    rp.step();
  }
  EXPECT_LT(quadratic_loss(w, target, false), first * 1e-3);
  const optim::ParamState* st = rp.find_state(w);
  ASSERT_NE(st, nullptr);
  EXPECT_TRUE(st->contains("prev") && st->contains("step_size"));
  EXPECT_LE(max(st->get("step_size")).item<double>(), 1.0);

  Tensor v = zeros({4}).requires_grad_();
  optim::ASGD as({v}, optim::ASGDOptions(0.1).t0(5));
  for (int i = 0; i < 100; ++i) {
    as.zero_grad();
    quadratic_loss(v, target, true);
    as.step();
  }
  EXPECT_LT(quadratic_loss(v, target, false), first * 1e-3);
  const optim::ParamState* sa = as.find_state(v);
  ASSERT_NE(sa, nullptr);
  EXPECT_NEAR(sa->get("mu").item<double>(), 1.0 / 95, 1e-7);  // 1 / max(1, step - t0)
  EXPECT_LT(max(abs(sa->get("ax") - target)).item<double>(), 0.1);  // the average of the iterates since t0
  EXPECT_THROW(optim::Rprop({v}, optim::RpropOptions(0.1).etaminus(1.5)), Error);
}

// Adamax, NAdam and RAdam through their C++ options structs minimise the quadratic.
TEST(Optim, AdamFamilyFromOptions) {
  Tensor target = vec({1, -2, 3, 0.5});
  auto run = [&](auto make) {
    Tensor w = zeros({4}).requires_grad_();
    auto opt = make(w);
    double first = quadratic_loss(w, target, false);
    for (int i = 0; i < 300; ++i) {
      opt.zero_grad();
      quadratic_loss(w, target, true);
      opt.step();
    }
    return quadratic_loss(w, target, false) / first;
  };
  EXPECT_LT(run([](Tensor w) { return optim::Adamax({w}, optim::AdamaxOptions(0.1)); }), 1e-3);
  EXPECT_LT(run([](Tensor w) { return optim::NAdam({w}, optim::NAdamOptions(0.1).decoupled_weight_decay(true)); }),
            1e-3);
  EXPECT_LT(run([](Tensor w) { return optim::RAdam({w}, optim::RAdamOptions(0.1).betas({0.9, 0.99})); }), 1e-3);
  EXPECT_THROW(optim::NAdam({zeros({1}).requires_grad_()}, optim::NAdamOptions(0.1).momentum_decay(-1)), Error);
}

// LBFGS from C++: the closure re-evaluates the loss; strong-Wolfe converges on the quadratic in one step.
TEST(Optim, LBFGSWithClosure) {
  Tensor target = vec({1, -2, 3, 0.5});
  Tensor w = zeros({4}).requires_grad_();
  optim::LBFGS opt({w}, optim::LBFGSOptions(1).line_search_fn("strong_wolfe"));
  auto closure = [&] {
    opt.zero_grad();
    Tensor d = w - target;
    Tensor loss = (d * d).sum();
    loss.backward();
    return loss;
  };
  Tensor first = opt.step(closure);
  EXPECT_NEAR(first.item<double>(), 14.25, 1e-9);  // the loss at the start
  EXPECT_LT(quadratic_loss(w, target, false), 1e-10);
  EXPECT_GE(opt.find_state(w)->get("func_evals").item<double>(), 2.0);
  EXPECT_THROW(opt.step(), Error);  // a closure is required
}

// LBFGS's state dict carries its history: a fresh optimiser loaded from it continues exactly as the
// original does.
TEST(Optim, LBFGSStateDictResumes) {
  Tensor target = vec({1, -2, 3, 0.5});
  auto make_closure = [&](optim::LBFGS& opt, Tensor& w) {
    return [&opt, &w, &target] {
      opt.zero_grad();
      Tensor d = w - target;
      Tensor loss = (d * d * d * d).sum() + (d * d).sum();
      loss.backward();
      return loss;
    };
  };
  Tensor w = zeros({4}, kFloat64).requires_grad_();
  optim::LBFGS opt({w}, optim::LBFGSOptions(0.5).max_iter(3).history_size(2));
  opt.step(make_closure(opt, w));
  opt.step(make_closure(opt, w));
  optim::StateDict sd = opt.state_dict();
  const TensorList* dirs = sd.state.at(0).find_list("old_dirs");
  ASSERT_NE(dirs, nullptr);
  EXPECT_EQ(dirs->size(), 2u);  // history_size
  EXPECT_EQ(sd.state.at(0).find_list("al")->size(), 2u);
  Tensor w2 = w.detach().clone().requires_grad_();
  optim::LBFGS opt2({w2}, optim::LBFGSOptions(0.5).max_iter(3).history_size(2));
  opt2.load_state_dict(sd);
  opt.step(make_closure(opt, w));
  opt2.step(make_closure(opt2, w2));
  for (int64_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(at(w, i), at(w2, i));
}
