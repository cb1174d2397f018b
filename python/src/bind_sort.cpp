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



}  // namespace

void bind_sort(nb::module_& m, nb::class_<Tensor>& cls) {
  // sort, topk, kthvalue, mode, median, nanmedian: from their schemas (expose_registered), with
  // torch's return_types namedtuples (values, indices); argsort, msort, quantile, nanquantile,
  // searchsorted, bucketize, bincount: from their composites' schemas (kiln/ops/sort.cpp).
  // unique and unique_consecutive return one tensor or a tuple, by their flags (Python-level in torch).
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
}

}  // namespace kiln::py
