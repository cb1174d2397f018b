// Python binding: loss functions (kiln/nn/loss.h), in the C++ argument order; kiln.nn.functional
// wraps them with torch's signatures (legacy size_average / reduce, warnings).
#include <Python.h>

#include <variant>

#include "common.h"
#include "kiln/core/stream.h"
#include "kiln/nn/loss.h"

namespace kiln::py {

namespace {

Tensor opt_t(nb::handle h) { return h.is_none() ? Tensor() : nb::cast<Tensor>(h); }

bool is_int(nb::handle h) { return PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr()); }

// ctc lengths: a tensor, or a tuple / list of ints (torch refuses a bare int).
std::variant<Tensor, Shape> lengths(nb::handle h, const char* arg) {
  if (nb::isinstance<Tensor>(h)) return nb::cast<Tensor>(h);
  if (PyTuple_Check(h.ptr()) || PyList_Check(h.ptr())) {
    Shape s;
    for (nb::handle v : nb::borrow<nb::sequence>(h)) {
      if (!is_int(v))
        throw nb::type_error((std::string("ctc_loss(): argument '") + arg +
                              "' must be tuple of ints or a Tensor, but found element of type " +
                              nb::type_name(v.type()).c_str())
                                 .c_str());
      s.push_back(nb::cast<int64_t>(v));
    }
    return s;
  }
  throw nb::type_error((std::string("ctc_loss(): argument '") + arg +
                        "' must be tuple of ints or a Tensor, not " +
                        nb::type_name(h.type()).c_str())
                           .c_str());
}

}  // namespace

void bind_loss(nb::module_& m) {
  m.def(
      "_cross_entropy",
      [](const Tensor& x, const Tensor& t, nb::handle w, int64_t ignore_index,
         const std::string& reduction, double label_smoothing) {
        Tensor wt = opt_t(w);
        nb::gil_scoped_release g;
        return F::cross_entropy(x, t, wt, ignore_index, reduction, label_smoothing);
      },
      "input"_a, "target"_a, "weight"_a.none() = nb::none(), "ignore_index"_a = -100,
      "reduction"_a = "mean", "label_smoothing"_a = 0.0);
  m.def(
      "_nll_loss",
      [](const Tensor& x, const Tensor& t, nb::handle w, int64_t ignore_index,
         const std::string& reduction) {
        Tensor wt = opt_t(w);
        nb::gil_scoped_release g;
        return F::nll_loss(x, t, wt, ignore_index, reduction);
      },
      "input"_a, "target"_a, "weight"_a.none() = nb::none(), "ignore_index"_a = -100,
      "reduction"_a = "mean");
  m.def(
      "_mse_loss",
      [](const Tensor& x, const Tensor& t, const std::string& reduction, nb::handle w) {
        Tensor wt = opt_t(w);
        nb::gil_scoped_release g;
        return F::mse_loss(x, t, reduction, wt);
      },
      "input"_a, "target"_a, "reduction"_a = "mean", "weight"_a.none() = nb::none());
  m.def(
      "_l1_loss",
      [](const Tensor& x, const Tensor& t, const std::string& reduction, nb::handle w) {
        Tensor wt = opt_t(w);
        nb::gil_scoped_release g;
        return F::l1_loss(x, t, reduction, wt);
      },
      "input"_a, "target"_a, "reduction"_a = "mean", "weight"_a.none() = nb::none());
  m.def(
      "_smooth_l1_loss",
      [](const Tensor& x, const Tensor& t, const std::string& reduction, double beta) {
        nb::gil_scoped_release g;
        return F::smooth_l1_loss(x, t, reduction, beta);
      },
      "input"_a, "target"_a, "reduction"_a = "mean", "beta"_a = 1.0);
  m.def(
      "_huber_loss",
      [](const Tensor& x, const Tensor& t, const std::string& reduction, double delta,
         nb::handle w) {
        Tensor wt = opt_t(w);
        nb::gil_scoped_release g;
        return F::huber_loss(x, t, reduction, delta, wt);
      },
      "input"_a, "target"_a, "reduction"_a = "mean", "delta"_a = 1.0,
      "weight"_a.none() = nb::none());
  m.def(
      "_binary_cross_entropy",
      [](const Tensor& x, const Tensor& t, nb::handle w, const std::string& reduction) {
        Tensor wt = opt_t(w);
        nb::gil_scoped_release g;
        return F::binary_cross_entropy(x, t, wt, reduction);
      },
      "input"_a, "target"_a, "weight"_a.none() = nb::none(), "reduction"_a = "mean");
  m.def(
      "_binary_cross_entropy_with_logits",
      [](const Tensor& x, const Tensor& t, nb::handle w, const std::string& reduction,
         nb::handle pw) {
        Tensor wt = opt_t(w), pwt = opt_t(pw);
        nb::gil_scoped_release g;
        return F::binary_cross_entropy_with_logits(x, t, wt, reduction, pwt);
      },
      "input"_a, "target"_a, "weight"_a.none() = nb::none(), "reduction"_a = "mean",
      "pos_weight"_a.none() = nb::none());
  m.def(
      "_kl_div",
      [](const Tensor& x, const Tensor& t, const std::string& reduction, bool log_target) {
        nb::gil_scoped_release g;
        return F::kl_div(x, t, reduction, log_target);
      },
      "input"_a, "target"_a, "reduction"_a = "mean", "log_target"_a = false);
  m.def(
      "_cosine_embedding_loss",
      [](const Tensor& a, const Tensor& b, const Tensor& t, double margin,
         const std::string& reduction) {
        nb::gil_scoped_release g;
        return F::cosine_embedding_loss(a, b, t, margin, reduction);
      },
      "input1"_a, "input2"_a, "target"_a, "margin"_a = 0.0, "reduction"_a = "mean");
  m.def(
      "_margin_ranking_loss",
      [](const Tensor& a, const Tensor& b, const Tensor& t, double margin,
         const std::string& reduction) {
        nb::gil_scoped_release g;
        return F::margin_ranking_loss(a, b, t, margin, reduction);
      },
      "input1"_a, "input2"_a, "target"_a, "margin"_a = 0.0, "reduction"_a = "mean");
  m.def(
      "_ctc_loss",
      [](const Tensor& lp, const Tensor& t, nb::handle il, nb::handle tl, int64_t blank,
         const std::string& reduction, bool zero_infinity) {
        auto a = lengths(il, "input_lengths"), b = lengths(tl, "target_lengths");
        nb::gil_scoped_release g;
        if (std::holds_alternative<Tensor>(a) && std::holds_alternative<Tensor>(b))
          return F::ctc_loss(lp, t, std::get<Tensor>(a), std::get<Tensor>(b), blank, reduction,
                             zero_infinity);
        auto shape = [](const std::variant<Tensor, Shape>& v) {
          if (auto* s = std::get_if<Shape>(&v)) return *s;
          const Tensor& x = std::get<Tensor>(v);
          KILN_CHECK(is_integral(x.dtype(), false), Runtime, "ctc_loss",
                     "lengths must be integral");
          Tensor c = contiguous(to_dtype(x, kInt64));
          stream_detail::before_host_read();
          const int64_t* p = static_cast<const int64_t*>(c.data_ptr());
          return Shape(p, p + c.numel());
        };
        return F::ctc_loss(lp, t, shape(a), shape(b), blank, reduction, zero_infinity);
      },
      "log_probs"_a, "targets"_a, "input_lengths"_a, "target_lengths"_a, "blank"_a = 0,
      "reduction"_a = "mean", "zero_infinity"_a = false);
  m.def(
      "_poisson_nll_loss",
      [](const Tensor& x, const Tensor& t, bool log_input, bool full, double eps, const std::string& reduction) {
        nb::gil_scoped_release g;
        return F::poisson_nll_loss(x, t, log_input, full, eps, reduction);
      },
      "input"_a, "target"_a, "log_input"_a = true, "full"_a = false, "eps"_a = 1e-8, "reduction"_a = "mean");
  m.def(
      "_gaussian_nll_loss",
      [](const Tensor& x, const Tensor& t, nb::handle var, bool full, double eps, const std::string& reduction) {
        if (nb::isinstance<Tensor>(var)) {
          Tensor v = nb::cast<Tensor>(var);
          nb::gil_scoped_release g;
          return F::gaussian_nll_loss(x, t, v, full, eps, reduction);
        }
        if (!PyFloat_Check(var.ptr()) && !is_int(var))
          throw nb::type_error((std::string("gaussian_nll_loss(): argument 'var' must be Tensor or float, not ") +
                                nb::type_name(var.type()).c_str())
                                   .c_str());
        const double v = nb::cast<double>(var);
        nb::gil_scoped_release g;
        return F::gaussian_nll_loss(x, t, v, full, eps, reduction);
      },
      "input"_a, "target"_a, "var"_a, "full"_a = false, "eps"_a = 1e-6, "reduction"_a = "mean");
  m.def(
      "_hinge_embedding_loss",
      [](const Tensor& x, const Tensor& t, double margin, const std::string& reduction) {
        nb::gil_scoped_release g;
        return F::hinge_embedding_loss(x, t, margin, reduction);
      },
      "input"_a, "target"_a, "margin"_a = 1.0, "reduction"_a = "mean");
  m.def(
      "_soft_margin_loss",
      [](const Tensor& x, const Tensor& t, const std::string& reduction) {
        nb::gil_scoped_release g;
        return F::soft_margin_loss(x, t, reduction);
      },
      "input"_a, "target"_a, "reduction"_a = "mean");
  m.def(
      "_multilabel_soft_margin_loss",
      [](const Tensor& x, const Tensor& t, nb::handle w, const std::string& reduction) {
        Tensor wt = opt_t(w);
        nb::gil_scoped_release g;
        return F::multilabel_soft_margin_loss(x, t, wt, reduction);
      },
      "input"_a, "target"_a, "weight"_a.none() = nb::none(), "reduction"_a = "mean");
  m.def(
      "_multi_margin_loss",
      [](const Tensor& x, const Tensor& t, double p, double margin, nb::handle w, const std::string& reduction) {
        Tensor wt = opt_t(w);
        nb::gil_scoped_release g;
        return F::multi_margin_loss(x, t, p, margin, wt, reduction);
      },
      "input"_a, "target"_a, "p"_a = 1.0, "margin"_a = 1.0, "weight"_a.none() = nb::none(),
      "reduction"_a = "mean");
  m.def(
      "_multilabel_margin_loss",
      [](const Tensor& x, const Tensor& t, const std::string& reduction) {
        nb::gil_scoped_release g;
        return F::multilabel_margin_loss(x, t, reduction);
      },
      "input"_a, "target"_a, "reduction"_a = "mean");
  m.def(
      "_triplet_margin_loss",
      [](const Tensor& a, const Tensor& p, const Tensor& n, double margin, double norm, double eps, bool swap,
         const std::string& reduction) {
        nb::gil_scoped_release g;
        return F::triplet_margin_loss(a, p, n, margin, norm, eps, swap, reduction);
      },
      "anchor"_a, "positive"_a, "negative"_a, "margin"_a = 1.0, "p"_a = 2.0, "eps"_a = 1e-6, "swap"_a = false,
      "reduction"_a = "mean");
  m.def(
      "_triplet_margin_loss_op",
      [](const Tensor& a, const Tensor& p, const Tensor& n, double margin, double norm, double eps, bool swap,
         int64_t reduction) {
        nb::gil_scoped_release g;
        return F::triplet_margin_loss_op(a, p, n, margin, norm, eps, swap, reduction);
      },
      "anchor"_a, "positive"_a, "negative"_a, "margin"_a, "p"_a, "eps"_a, "swap"_a, "reduction"_a);
  // distance_function is a Python callable: it runs with the GIL held, so this one keeps it.
  m.def(
      "_triplet_margin_with_distance_loss",
      [](const Tensor& a, const Tensor& p, const Tensor& n, nb::handle fn, double margin, bool swap,
         const std::string& reduction) {
        F::DistanceFunction dist;
        if (!fn.is_none()) {
          nb::object f = nb::borrow(fn);
          dist = [f](const Tensor& x, const Tensor& y) { return nb::cast<Tensor>(f(x, y)); };
        }
        return F::triplet_margin_with_distance_loss(a, p, n, dist, margin, swap, reduction);
      },
      "anchor"_a, "positive"_a, "negative"_a, "distance_function"_a.none() = nb::none(), "margin"_a = 1.0,
      "swap"_a = false, "reduction"_a = "mean");
}

}  // namespace kiln::py
