// Python indexing: ints, slices, None, Ellipsis, bools, integer tensors / lists and bool masks,
// with torch's rules for where advanced-index dimensions land.
#include <Python.h>

#include "common.h"

namespace kiln::py {
namespace {

struct Parsed {
  Tensor view;          // after basic indexing
  TensorList adv;       // one entry per dim of view (undefined = not indexed); empty if none
};

bool is_adv(nb::handle h) {
  if (nb::isinstance<Tensor>(h)) {
    const Tensor& t = nb::cast<Tensor&>(h);
    return t.dim() > 0 || t.dtype() == kBool || t.is_meta() || func::is_mapped(t);
  }
  return PyList_Check(h.ptr()) || (nb::hasattr(h, "__array_interface__") && !is_number(h));
}

Tensor adv_tensor(nb::handle h) {
  if (nb::isinstance<Tensor>(h)) return nb::cast<Tensor>(h);
  Tensor t = tensor_from_data(h, std::nullopt);
  if (t.numel() == 0) t = to_dtype(t, kInt64);
  return t;
}

// An integer index; one beyond int64 raises torch's ValueError.
int64_t index_int(PyObject* o) {
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow) throw nb::value_error("Overflow when unpacking long long");
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  return v;
}

Parsed parse(const Tensor& self, nb::handle index) {
  std::vector<nb::handle> items;
  nb::object hold;
  if (PyTuple_Check(index.ptr())) {
    hold = nb::borrow(index);
    for (nb::handle h : nb::borrow<nb::tuple>(index)) items.push_back(h);
  } else {
    items.push_back(index);
  }
  // dims consumed by the index (for Ellipsis)
  int64_t consumed = 0;
  bool has_ellipsis = false;
  for (nb::handle h : items) {
    if (h.is_none() || PyBool_Check(h.ptr())) continue;
    if (h.ptr() == Py_Ellipsis) {  // torch accepts repeated ellipses; only the first one expands
      has_ellipsis = true;
      continue;
    }
    if (nb::isinstance<Tensor>(h) && nb::cast<Tensor&>(h).dtype() == kBool) consumed += nb::cast<Tensor&>(h).dim();
    else ++consumed;
  }
  KILN_CHECK(consumed <= self.dim(), Index, "getitem", "too many indices for tensor of dimension ", self.dim());
  Tensor v = self;
  int64_t dim = 0;
  bool ellipsis_done = false;
  (void)has_ellipsis;
  std::vector<std::pair<int64_t, Tensor>> adv;
  for (nb::handle h : items) {
    PyObject* o = h.ptr();
    if (o == Py_None) {
      v = unsqueeze(v, dim++);
    } else if (o == Py_Ellipsis) {
      if (!ellipsis_done) dim += self.dim() - consumed;
      ellipsis_done = true;
    } else if (PyBool_Check(o)) {
      v = unsqueeze(v, dim);
      if (o == Py_False) v = slice(v, dim, 0, 0, 1);
      ++dim;
    } else if (PyLong_Check(o) || (nb::isinstance<Tensor>(h) && nb::cast<Tensor&>(h).dim() == 0 &&
                                   is_integral(nb::cast<Tensor&>(h).dtype(), false) &&
                                   !nb::cast<Tensor&>(h).is_meta() && !func::is_mapped(nb::cast<Tensor&>(h)))) {
      // a data-less (traced) 0-dim index stays a tensor: advanced indexing, as torch's under a trace;
      // so does one whose value differs per example under vmap
      int64_t i = PyLong_Check(o) ? index_int(o) : nb::cast<Tensor&>(h).item<int64_t>();
      KILN_CHECK(dim < v.dim(), Index, "getitem", "too many indices for tensor of dimension ", self.dim());
      v = select(v, dim, i);
    } else if (PySlice_Check(o)) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(o, &start, &stop, &step) < 0) throw nb::python_error();
      KILN_CHECK(step > 0, Value, "getitem", "step must be greater than zero");
      std::optional<int64_t> s, e;
      PySliceObject* sl = reinterpret_cast<PySliceObject*>(o);
      if (sl->start != Py_None) s = start;
      if (sl->stop != Py_None) e = stop;
      v = slice(v, dim, s, e, step);
      ++dim;
    } else if (is_adv(h)) {
      Tensor t = adv_tensor(h);
      adv.push_back({dim, t});
      dim += t.dtype() == kBool ? t.dim() : 1;
    } else if (PyIndex_Check(o)) {
      v = select(v, dim, index_int(nb::int_(h).ptr()));
    } else if (PyUnicode_Check(o) || PyBytes_Check(o)) {  // torch reads it as data for an index tensor
      throw nb::type_error(("new(): invalid data type '" + std::string(nb::type_name(h.type()).c_str()) + "'").c_str());
    } else {
      throw nb::index_error(("only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                            "Variables are valid indices (got " + std::string(nb::str(h.type()).c_str()) + ")").c_str());
    }
  }
  Parsed p{v, {}};
  if (!adv.empty()) {
    int64_t last = 0;
    for (auto& [d, t] : adv) last = std::max(last, d);
    p.adv.resize(last + 1);
    for (auto& [d, t] : adv) p.adv[d] = t;
  }
  return p;
}

}  // namespace

Tensor getitem(const Tensor& self, nb::handle index) {
  Parsed p = parse(self, index);
  if (p.adv.empty()) return p.view;
  return kiln::index(p.view, p.adv);
}

void setitem(const Tensor& self, nb::handle index, nb::handle value) {
  Parsed p = parse(self, index);
  Tensor v = nb::isinstance<Tensor>(value) ? nb::cast<Tensor>(value)
                                           : (is_number(value) ? scalar_tensor(as_scalar(value), self.dtype())
                                                               : tensor_from_data(value, self.dtype()));
  if (p.adv.empty()) {
    copy_(p.view, v);
    return;
  }
  index_put_(p.view, p.adv, v, false);
}

}  // namespace kiln::py
