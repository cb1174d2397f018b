// Sorting, selection and searching ops (kiln/ops/sort.cpp).
#include <string>

#include "common.h"
#include "kiln/ops/sort.h"

namespace kiln::py {
namespace {

nb::object none() { return nb::none(); }

// unique / unique_consecutive: a tensor, or a tuple with the requested extras (torch's layout).
nb::object unique_result(const std::tuple<Tensor, Tensor, Tensor>& r, bool inverse, bool counts) {
  if (!inverse && !counts) return nb::cast(std::get<0>(r));
  if (inverse && counts) return nb::make_tuple(std::get<0>(r), std::get<1>(r), std::get<2>(r));
  return nb::make_tuple(std::get<0>(r), inverse ? std::get<1>(r) : std::get<2>(r));
}

std::optional<int64_t> opt_int(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return nb::cast<int64_t>(h);
}

bool opt_bool(nb::handle h, bool dflt) { return h.is_none() ? dflt : nb::cast<bool>(h); }

std::optional<std::string> opt_str(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return nb::cast<std::string>(h);
}

Tensor opt_tensor(nb::handle h) { return h.is_none() ? Tensor() : nb::cast<Tensor>(h); }

[[noreturn]] void type_error(const std::string& msg) { throw nb::type_error(msg.c_str()); }

}  // namespace

void bind_sort(nb::module_& m, nb::class_<Tensor>& cls) {
  // sort, topk, kthvalue, mode, median, nanmedian: from their schemas (expose_registered), with
  // torch's return_types namedtuples (values, indices).
  // ---- sort / argsort / msort -----------------------------------------------------------------------
  auto argsort_fn = [](const Tensor& x, int64_t dim, bool descending, bool stable) {
    return kiln::argsort(x, dim, descending, stable);
  };
  m.def("argsort", argsort_fn, "input"_a, "dim"_a = -1, "descending"_a = false, nb::kw_only(), "stable"_a = false);
  cls.def("argsort", argsort_fn, "dim"_a = -1, "descending"_a = false, nb::kw_only(), "stable"_a = false);
  m.def("msort", [](const Tensor& x) { return kiln::msort(x); }, "input"_a);
  cls.def("msort", [](const Tensor& x) { return kiln::msort(x); });



  // ---- quantile / nanquantile -----------------------------------------------------------------------
  for (int nan = 0; nan < 2; ++nan) {
    const char* name = nan ? "nanquantile" : "quantile";
    auto f = [nan, name](const Tensor& x, nb::handle q, nb::handle dim, bool keepdim,
                         const std::string& interpolation) -> Tensor {
      std::optional<int64_t> d = opt_int(dim);
      if (nb::isinstance<Tensor>(q)) {
        Tensor qt = nb::cast<Tensor>(q);
        return nan ? kiln::nanquantile(x, qt, d, keepdim, interpolation)
                   : kiln::quantile(x, qt, d, keepdim, interpolation);
      }
      if (!(PyFloat_Check(q.ptr()) || PyLong_Check(q.ptr())) || PyBool_Check(q.ptr()))
        type_error(std::string(name) + "(): argument 'q' must be a float or a Tensor, not " +
                   nb::str(q.type()).c_str());
      double qv = nb::cast<double>(q);
      return nan ? kiln::nanquantile(x, qv, d, keepdim, interpolation)
                 : kiln::quantile(x, qv, d, keepdim, interpolation);
    };
    m.def(name, f, "input"_a, "q"_a, "dim"_a.none() = none(), "keepdim"_a = false, nb::kw_only(),
          "interpolation"_a = "linear");
    cls.def(name, f, "q"_a, "dim"_a.none() = none(), "keepdim"_a = false, nb::kw_only(),
            "interpolation"_a = "linear");
  }

  // ---- unique / unique_consecutive ------------------------------------------------------------------
  auto unique_fn = [](const Tensor& x, bool sorted, bool inverse, bool counts, nb::handle dim) {
    return unique_result(kiln::unique(x, sorted, inverse, counts, opt_int(dim)), inverse, counts);
  };
  m.def("unique", unique_fn, "input"_a, "sorted"_a = true, "return_inverse"_a = false, "return_counts"_a = false,
        "dim"_a.none() = none());
  cls.def("unique", unique_fn, "sorted"_a = true, "return_inverse"_a = false, "return_counts"_a = false,
          "dim"_a.none() = none());
  auto ucons_fn = [](const Tensor& x, bool inverse, bool counts, nb::handle dim) {
    return unique_result(kiln::unique_consecutive(x, inverse, counts, opt_int(dim)), inverse, counts);
  };
  m.def("unique_consecutive", ucons_fn, "input"_a, "return_inverse"_a = false, "return_counts"_a = false,
        "dim"_a.none() = none());
  cls.def("unique_consecutive", ucons_fn, "return_inverse"_a = false, "return_counts"_a = false,
          "dim"_a.none() = none());

  // ---- searchsorted / bucketize ---------------------------------------------------------------------
  m.def("searchsorted", [](const Tensor& seq, nb::handle input, bool out_int32, bool right, nb::handle side,
                           nb::handle sorter) -> Tensor {
    Tensor st = opt_tensor(sorter);
    if (nb::isinstance<Tensor>(input))
      return kiln::searchsorted(seq, nb::cast<Tensor>(input), out_int32, right, opt_str(side), st);
    if (!is_number(input))
      type_error(std::string("searchsorted(): argument 'input' must be Tensor or Number, not ") +
                 nb::str(input.type()).c_str());
    return kiln::searchsorted(seq, as_scalar(input), out_int32, right, opt_str(side), st);
  }, "sorted_sequence"_a, "input"_a, nb::kw_only(), "out_int32"_a = false, "right"_a = false,
     "side"_a.none() = none(), "sorter"_a.none() = none());
  m.def("bucketize", [](nb::handle input, const Tensor& boundaries, bool out_int32, bool right) -> Tensor {
    if (nb::isinstance<Tensor>(input)) return kiln::bucketize(nb::cast<Tensor>(input), boundaries, out_int32, right);
    if (!is_number(input))
      type_error(std::string("bucketize(): argument 'input' must be Tensor or Number, not ") +
                 nb::str(input.type()).c_str());
    return kiln::bucketize(as_scalar(input), boundaries, out_int32, right);
  }, "input"_a, "boundaries"_a, nb::kw_only(), "out_int32"_a = false, "right"_a = false);

  // ---- histc / bincount -----------------------------------------------------------------------------
  auto bincount_fn = [](const Tensor& x, nb::handle weights, int64_t minlength) {
    return kiln::bincount(x, opt_tensor(weights), minlength);
  };
  m.def("bincount", bincount_fn, "input"_a, "weights"_a.none() = none(), "minlength"_a = 0);
  cls.def("bincount", bincount_fn, "weights"_a.none() = none(), "minlength"_a = 0);
}

}  // namespace kiln::py
