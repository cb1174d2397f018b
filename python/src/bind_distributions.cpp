// Python binding: kiln._C._distributions, the C++ families of kiln/distributions (wrapped with
// torch's Python classes by python/kiln/distributions). Shapes come back as tuples; the Python
// layer turns them into kiln.Size.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>

#include "common.h"
#include "kiln/distributions/distributions.h"

namespace kiln::py {

namespace dist = kiln::distributions;

namespace {
Tensor opt_tensor(nb::handle h) { return h.is_none() ? Tensor() : nb::cast<Tensor>(h); }
std::optional<bool> opt_bool(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return nb::cast<bool>(h);
}
Shape sample_shape(nb::handle h) { return h.is_none() ? Shape{} : as_shape(h); }
}  // namespace

void bind_distributions(nb::module_& m) {
  nb::module_ dm = m.def_submodule("_distributions", "kiln::distributions (wrapped by kiln.distributions)");

  using K = dist::Constraint::Kind;
  nb::class_<dist::Constraint>(dm, "Constraint")
      .def("check", &dist::Constraint::check, "value"_a)
      .def("__repr__", &dist::Constraint::repr)
      .def_prop_ro("is_discrete", &dist::Constraint::is_discrete)
      .def_prop_ro("event_dim", &dist::Constraint::event_dim)
      .def_prop_ro("kind", [](const dist::Constraint& c) { return static_cast<int>(c.kind()); })
      .def_prop_ro("lower_bound", [](const dist::Constraint& c) -> nb::object {
        return c.lower_bound().defined() ? nb::cast(c.lower_bound()) : nb::none();
      })
      .def_prop_ro("upper_bound", [](const dist::Constraint& c) -> nb::object {
        return c.upper_bound().defined() ? nb::cast(c.upper_bound()) : nb::none();
      })
      .def_prop_ro("base_constraint", [](const dist::Constraint& c) -> nb::object {
        return c.base() ? nb::cast(*c.base()) : nb::none();
      })
      .def_prop_ro("reinterpreted_batch_ndims", &dist::Constraint::reinterpreted_batch_ndims);
  dm.def("constraint", [](int kind, nb::handle lower, nb::handle upper) {
    return dist::Constraint(static_cast<K>(kind), opt_tensor(lower), opt_tensor(upper));
  }, "kind"_a, "lower"_a = nb::none(), "upper"_a = nb::none());
  dm.def("independent", &dist::Constraint::independent, "base"_a, "reinterpreted_batch_ndims"_a);
  nb::dict kinds;
  const char* names[] = {"Real", "Boolean", "GreaterThan", "GreaterThanEq", "LessThan", "Interval",
                         "HalfOpenInterval", "IntegerInterval", "IntegerGreaterThan", "Simplex",
                         "PositiveDefinite", "LowerCholesky", "Multinomial", "Independent"};
  for (int i = 0; i < 14; ++i) kinds[names[i]] = i;
  dm.attr("kinds") = kinds;

  dm.def("default_validate_args", &dist::default_validate_args);
  dm.def("set_default_validate_args", &dist::set_default_validate_args, "value"_a);

  nb::class_<dist::Distribution>(dm, "Distribution")
      .def_prop_ro("name", &dist::Distribution::name)
      .def_prop_ro("batch_shape", [](const dist::Distribution& d) { return shape_tuple(d.batch_shape()); })
      .def_prop_ro("event_shape", [](const dist::Distribution& d) { return shape_tuple(d.event_shape()); })
      .def_prop_ro("validate_args", &dist::Distribution::validate_args)
      .def_prop_ro("has_rsample", &dist::Distribution::has_rsample)
      .def_prop_ro("has_enumerate_support", &dist::Distribution::has_enumerate_support)
      .def("support", &dist::Distribution::support)
      .def("attribute", [](const dist::Distribution& d, const std::string& n) -> nb::object {
        Tensor t = d.attribute(n);
        return t.defined() ? nb::cast(t) : nb::none();
      })
      .def("mean", &dist::Distribution::mean)
      .def("mode", &dist::Distribution::mode)
      .def("variance", &dist::Distribution::variance)
      .def("stddev", &dist::Distribution::stddev)
      .def("entropy", &dist::Distribution::entropy)
      .def("perplexity", &dist::Distribution::perplexity)
      .def("sample", [](const dist::Distribution& d, nb::handle s) { return d.sample(sample_shape(s)); },
           "sample_shape"_a = nb::none())
      .def("rsample", [](const dist::Distribution& d, nb::handle s) { return d.rsample(sample_shape(s)); },
           "sample_shape"_a = nb::none())
      .def("log_prob", &dist::Distribution::log_prob, "value"_a)
      .def("cdf", &dist::Distribution::cdf, "value"_a)
      .def("icdf", &dist::Distribution::icdf, "value"_a)
      .def("enumerate_support", &dist::Distribution::enumerate_support, "expand"_a = true)
      .def("expand", [](const dist::Distribution& d, nb::handle s) { return d.expand(as_shape(s)); }, "batch_shape"_a)
      .def("validate_sample", &dist::Distribution::validate_sample, "value"_a)
      .def("__repr__", &dist::Distribution::repr);

  nb::class_<dist::Normal, dist::Distribution>(dm, "Normal")
      .def("__init__", [](dist::Normal* self, const Tensor& loc, const Tensor& scale, nb::handle v) {
        new (self) dist::Normal(loc, scale, opt_bool(v));
      }, "loc"_a, "scale"_a, "validate_args"_a = nb::none());
  nb::class_<dist::LogNormal, dist::Distribution>(dm, "LogNormal")
      .def("__init__", [](dist::LogNormal* self, const Tensor& loc, const Tensor& scale, nb::handle v) {
        new (self) dist::LogNormal(loc, scale, opt_bool(v));
      }, "loc"_a, "scale"_a, "validate_args"_a = nb::none());
  nb::class_<dist::Uniform, dist::Distribution>(dm, "Uniform")
      .def("__init__", [](dist::Uniform* self, const Tensor& low, const Tensor& high, nb::handle v) {
        new (self) dist::Uniform(low, high, opt_bool(v));
      }, "low"_a, "high"_a, "validate_args"_a = nb::none());
  nb::class_<dist::Bernoulli, dist::Distribution>(dm, "Bernoulli")
      .def("__init__", [](dist::Bernoulli* self, nb::handle probs, nb::handle logits, nb::handle v) {
        new (self) dist::Bernoulli(dist::ProbsOrLogits{opt_tensor(probs), opt_tensor(logits)}, opt_bool(v));
      }, "probs"_a = nb::none(), "logits"_a = nb::none(), "validate_args"_a = nb::none());
  nb::class_<dist::Categorical, dist::Distribution>(dm, "Categorical")
      .def("__init__", [](dist::Categorical* self, nb::handle probs, nb::handle logits, nb::handle v) {
        new (self) dist::Categorical(dist::ProbsOrLogits{opt_tensor(probs), opt_tensor(logits)}, opt_bool(v));
      }, "probs"_a = nb::none(), "logits"_a = nb::none(), "validate_args"_a = nb::none());
  nb::class_<dist::Multinomial, dist::Distribution>(dm, "Multinomial")
      .def("__init__", [](dist::Multinomial* self, int64_t n, nb::handle probs, nb::handle logits, nb::handle v) {
        new (self) dist::Multinomial(n, dist::ProbsOrLogits{opt_tensor(probs), opt_tensor(logits)}, opt_bool(v));
      }, "total_count"_a, "probs"_a = nb::none(), "logits"_a = nb::none(), "validate_args"_a = nb::none());
  nb::class_<dist::Exponential, dist::Distribution>(dm, "Exponential")
      .def("__init__", [](dist::Exponential* self, const Tensor& rate, nb::handle v) {
        new (self) dist::Exponential(rate, opt_bool(v));
      }, "rate"_a, "validate_args"_a = nb::none());
  nb::class_<dist::Gamma, dist::Distribution>(dm, "Gamma")
      .def("__init__", [](dist::Gamma* self, const Tensor& c, const Tensor& rate, nb::handle v) {
        new (self) dist::Gamma(c, rate, opt_bool(v));
      }, "concentration"_a, "rate"_a, "validate_args"_a = nb::none());
  nb::class_<dist::Dirichlet, dist::Distribution>(dm, "Dirichlet")
      .def("__init__", [](dist::Dirichlet* self, const Tensor& c, nb::handle v) {
        new (self) dist::Dirichlet(c, opt_bool(v));
      }, "concentration"_a, "validate_args"_a = nb::none());
  nb::class_<dist::Beta, dist::Distribution>(dm, "Beta")
      .def("__init__", [](dist::Beta* self, const Tensor& c1, const Tensor& c0, nb::handle v) {
        new (self) dist::Beta(c1, c0, opt_bool(v));
      }, "concentration1"_a, "concentration0"_a, "validate_args"_a = nb::none());
  nb::class_<dist::Poisson, dist::Distribution>(dm, "Poisson")
      .def("__init__", [](dist::Poisson* self, const Tensor& rate, nb::handle v) {
        new (self) dist::Poisson(rate, opt_bool(v));
      }, "rate"_a, "validate_args"_a = nb::none());
  nb::class_<dist::MultivariateNormal, dist::Distribution>(dm, "MultivariateNormal")
      .def("__init__", [](dist::MultivariateNormal* self, const Tensor& loc, nb::handle cov, nb::handle prec,
                          nb::handle tril, nb::handle v) {
        new (self) dist::MultivariateNormal(loc, dist::MvnMatrix{opt_tensor(cov), opt_tensor(prec), opt_tensor(tril)},
                                            opt_bool(v));
      }, "loc"_a, "covariance_matrix"_a = nb::none(), "precision_matrix"_a = nb::none(), "scale_tril"_a = nb::none(),
           "validate_args"_a = nb::none());

  dm.def("kl_divergence", &dist::kl_divergence, "p"_a, "q"_a);
  dm.def("has_kl", &dist::has_kl, "p"_a, "q"_a);
  dm.def("kl_pairs", &dist::kl_pairs);
}

}  // namespace kiln::py
