// Operators as kiln.<name> functions and Tensor methods, table-driven where the signature is shared.
#include <Python.h>

#include <cstring>

#include <random>

#include "common.h"
#include "kiln/core/stream.h"
#include "kiln/ops/composite.h"

namespace kiln::py {

namespace {

nb::object none() { return nb::none(); }

OptDims dims_arg(nb::handle h) { return as_dims(h); }


}  // namespace

namespace {
// A generator's state as torch hands it out: a uint8 tensor (here 16 bytes: seed, then offset).
Tensor rng_state(const Generator& g) {
  Tensor t = empty({16}, TensorOptions(kUInt8));
  uint64_t v[2] = {g.initial_seed(), g.offset()};
  std::memcpy(t.data_ptr(), v, 16);
  return t;
}
void set_rng_state(Generator& g, const Tensor& st, const char* op) {
  KILN_CHECK(st.dtype() == kUInt8 && st.is_cpu(), Type, op, "RNG state must be a uint8 CPU tensor (from "
             "get_rng_state()), got ", dtype_name(st.dtype()), " on ", device_str(st.device()));
  KILN_CHECK(st.numel() == 16, Runtime, op, "Expected an RNG state of 16 bytes (the seed and offset "
             "get_rng_state() returns) but found the input RNG state size to be ", st.numel());
  uint64_t v[2];
  const Tensor c = st.contiguous();
  stream_detail::before_host_read();
  std::memcpy(v, c.data_ptr(), 16);
  g.manual_seed(v[0]);
  g.set_offset(v[1]);
}
// A seed as torch's Generator.manual_seed takes it: an int in [-2**63, 2**64), a negative one taken modulo 2**64.
uint64_t seed_arg(nb::handle h) {
  KILN_CHECK(PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr()), Runtime, "manual_seed",
             "manual_seed expected a long, but got ", nb::type_name(h.type()).c_str());
  const unsigned long long u = PyLong_AsUnsignedLongLong(h.ptr());
  if (!PyErr_Occurred()) return u;
  PyErr_Clear();  // negative, or at least 2**64
  int overflow = 0;
  const long long s = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
  KILN_CHECK(!overflow, Value, "manual_seed", "Overflow when unpacking long long: a seed must be in "
             "[-2**63, 2**64), got ", nb::repr(h).c_str());
  return static_cast<uint64_t>(s);
}
uint64_t reseed(Generator& g) {
  uint64_t s = std::random_device{}() | (uint64_t(std::random_device{}()) << 32);
  g.manual_seed(s);
  return s;
}

}  // namespace

void bind_ops(nb::module_& m, nb::class_<Tensor>& cls) {
  // ---- elementwise lists ------------------------------------------------------------------------
  // The ops that declare their variants (the unary/binary lists, add, sub, round, the indexing ops,
  // ...) are bound from their schemas by expose_registered (bind_schema.cpp), before this runs.
  // On a real tensor, torch's conj_physical_ returns it untouched (no write, so no version bump or
  // in-place check).
  cls.def("conj_physical_", [](const Tensor& x) { return conj_physical_(x); });

  cls.def("where", [](const Tensor& self, const Tensor& c, nb::handle b) { return where(c, self, as_tensor(b)); });
  // allclose, equal (a bool), real, imag, conj: from their composites' schemas

  // ---- creation -----------------------------------------------------------------------------------
  m.def("tensor", [](nb::handle data, nb::handle dtype, nb::handle device, bool) {
    Tensor t = tensor_from_data(data, as_opt_dtype(dtype));
    auto d = as_opt_device(device);
    return d ? to_device(t, *d) : t;
  }, "data"_a.none(), nb::kw_only(), "dtype"_a.none() = none(), "device"_a.none() = none(), "requires_grad"_a = false);
  m.def("as_tensor", [](nb::handle data, nb::handle dtype, nb::handle device) -> Tensor {
    Tensor t;
    if (nb::isinstance<Tensor>(data)) {
      t = nb::cast<Tensor>(data);
      auto d = as_opt_dtype(dtype);
      if (d) t = to_dtype(t, *d);
    } else {
      t = tensor_from_data(data, as_opt_dtype(dtype));
    }
    auto dev = as_opt_device(device);
    return dev ? to_device(t, *dev) : t;
  }, "data"_a, "dtype"_a.none() = none(), "device"_a.none() = none());

  // ---- conversion / copies ------------------------------------------------------------------------
  // to(dtype), to(device, dtype=None), to(other) and the keywords dtype, device, copy, non_blocking.
  cls.def("to", [](nb::handle self, nb::args args, nb::kwargs kw) -> nb::object {
    const Tensor& t = nb::cast<const Tensor&>(self);
    std::optional<Dtype> d;
    std::optional<Device> dev;
    bool copy = false;
    size_t positional = 0;
    for (nb::handle a : args) {
      if (nb::isinstance<Tensor>(a)) {
        d = nb::cast<Tensor>(a).dtype(), dev = nb::cast<Tensor>(a).device();
      } else if (nb::isinstance<PyDtype>(a)) {
        d = as_dtype(a);
      } else if (positional == 0 && !nb::isinstance<nb::bool_>(a) && !a.is_none()) {
        dev = as_device(a);
      } else if (nb::isinstance<nb::bool_>(a)) {
        if (positional >= 2) copy = nb::cast<bool>(a);  // to(dtype, non_blocking, copy)
      }
      ++positional;
    }
    if (kw.contains("dtype") && !kw["dtype"].is_none()) d = as_dtype(kw["dtype"]);
    if (kw.contains("device") && !kw["device"].is_none()) dev = as_device(kw["device"]);
    if (kw.contains("copy")) copy = nb::cast<bool>(kw["copy"]);
    Tensor r = t;
    bool copied = false;
    if (dev && dev->type != t.device().type) r = to_device(r, *dev), copied = true;
    if (d && *d != r.dtype()) r = to_dtype(r, *d), copied = true;
    if (copy && !copied) return nb::cast(clone(r));
    return copied ? nb::cast(r) : nb::borrow(self);  // no change: the same object, as torch
  });
  cls.def("type", [](const Tensor& t, nb::handle d) { return to_dtype(t, as_dtype(d)); });
  // memory formats (python/kiln/_memory_format.py): 0 contiguous, 1 preserve, 2 channels_last, 3 channels_last_3d
  m.def("_to_format", [](const Tensor& t, int f) { return contiguous(t, static_cast<MemoryFormat>(f)); });
  m.def("_to_memory_format", [](const Tensor& t, int f) { return to_memory_format(t, static_cast<MemoryFormat>(f)); });
  m.def("_clone_format", [](const Tensor& t, int f) { return clone(t, static_cast<MemoryFormat>(f)); });
  m.def("_is_contiguous_format", [](const Tensor& t, int f) { return is_contiguous(t, static_cast<MemoryFormat>(f)); });
  m.def("_suggest_memory_format", [](const Tensor& t) { return static_cast<int>(suggest_memory_format(t)); });

  // ---- views --------------------------------------------------------------------------------------
  m.def("broadcast_tensors", [](nb::args a) {
    TensorList ts;
    for (nb::handle h : a) ts.push_back(nb::cast<Tensor>(h));
    return broadcast_tensors(ts);
  });
  m.def("broadcast_shapes", [](nb::args a) {
    Shape s;
    for (nb::handle h : a) s = broadcast_shapes(s, as_shape(h));
    return shape_tuple(s);
  });
  auto split_fn = [](const Tensor& t, nb::handle s, int64_t d) {
    if (PyLong_Check(s.ptr())) return split(t, nb::cast<int64_t>(s), d);
    return split_with_sizes(t, as_shape(s), d);
  };
  m.def("split", split_fn, "tensor"_a, "split_size_or_sections"_a, "dim"_a = 0);
  cls.def("split", split_fn, "split_size"_a, "dim"_a = 0);

  // ---- reductions ---------------------------------------------------------------------------------
  auto norm_fn = [](const Tensor& x, nb::handle p, nb::handle dim, bool keepdim, nb::handle dtype) {
    double ord = 2;
    if (!p.is_none()) {
      if (PyUnicode_Check(p.ptr())) {
        std::string s = nb::cast<std::string>(p);
        KILN_CHECK(s == "fro", Value, "norm", "norm: unsupported p='", s, "'");
      } else {
        ord = nb::cast<double>(p);
      }
    }
    return vector_norm(x, ord, dims_arg(dim), keepdim, as_opt_dtype(dtype));
  };
  m.def("norm", norm_fn, "input"_a, "p"_a = "fro", "dim"_a.none() = none(), "keepdim"_a = false, "dtype"_a.none() = none());
  cls.def("norm", norm_fn, "p"_a = "fro", "dim"_a.none() = none(), "keepdim"_a = false, "dtype"_a.none() = none());
  m.def("_vector_norm", [](const Tensor& x, double ord, nb::handle dim, bool keepdim, nb::handle dtype) {
    return vector_norm(x, ord, dims_arg(dim), keepdim, as_opt_dtype(dtype));
  }, "x"_a, "ord"_a = 2.0, "dim"_a.none() = none(), "keepdim"_a = false, nb::kw_only(), "dtype"_a.none() = none());
  // softmax, log_softmax: from their schemas (expose_registered)
  // cumsum, cumprod: from their schemas (expose_registered)

  // ---- matmul -------------------------------------------------------------------------------------
  m.def("tensordot", [](const Tensor& a, const Tensor& b, nb::handle dims) {
    if (PyLong_Check(dims.ptr())) return tensordot(a, b, nb::cast<int64_t>(dims));
    nb::sequence s = nb::borrow<nb::sequence>(dims);
    return tensordot(a, b, as_shape(s[0]), as_shape(s[1]));
  }, "a"_a, "b"_a, "dims"_a = 2);
  m.def("einsum", [](const std::string& eq, nb::args ops) {
    TensorList ts;
    if (ops.size() == 1 && !nb::isinstance<Tensor>(ops[0]))
      for (nb::handle h : ops[0]) ts.push_back(nb::cast<Tensor>(h));
    else
      for (nb::handle h : ops) ts.push_back(nb::cast<Tensor>(h));
    return einsum(eq, ts);
  });

  // ---- indexing -----------------------------------------------------------------------------------
  // nonzero(as_tuple=True) is where(condition) (a composite, kiln/ops/elementwise.cpp)
  auto nz = [](const Tensor& x, bool as_tuple) -> nb::object {
    if (!as_tuple) return nb::cast(nonzero(x));
    static const Composite* where_cond = find_composite("where");
    nb::list l;
    for (Tensor& t : call_composite(*where_cond, {x}, {})) l.append(nb::cast(std::move(t)));
    return nb::tuple(l);
  };
  m.def("nonzero", nz, "input"_a, nb::kw_only(), "as_tuple"_a = false);
  cls.def("nonzero", nz, nb::kw_only(), "as_tuple"_a = false);

  // ---- random -------------------------------------------------------------------------------------
  // kiln.Generator: an independent Philox stream (torch.Generator's API); generator=None uses the default.
  nb::class_<Generator>(m, "Generator")
      .def("__init__", [](Generator* self, nb::handle device) {
        const Device d = as_device(device);  // torch's errors for a bad device string
        KILN_CHECK(d.is_cpu(), Runtime, "Generator", "kiln has generators on the CPU only, got device='",
                   device_str(d), "'");
        new (self) Generator();
      }, "device"_a = "cpu")
      .def("manual_seed", [](Generator& g, nb::handle s) -> Generator& {
        g.manual_seed(seed_arg(s));
        return g;
      }, "seed"_a, nb::rv_policy::reference)
      .def("initial_seed", &Generator::initial_seed)
      .def("get_state", &rng_state)
      .def("set_state", [](Generator& g, const Tensor& st) -> Generator& {
        set_rng_state(g, st, "set_state");
        return g;
      }, nb::rv_policy::reference)
      .def("seed", &reseed)
      .def_prop_ro("device", [](const Generator&) { return kCPU; });
  // torch.get_rng_state / set_rng_state / default_generator / initial_seed / seed
  m.attr("default_generator") = nb::cast(&default_generator(), nb::rv_policy::reference);
  m.def("get_rng_state", []() { return rng_state(default_generator()); });
  m.def("set_rng_state", [](const Tensor& st) { set_rng_state(default_generator(), st, "set_rng_state"); },
        "new_state"_a);
  // torch.manual_seed: int(seed) first (a str of digits or a float is taken), then the generator's rules
  m.def("manual_seed", [](nb::handle seed) {
    default_generator().manual_seed(seed_arg(nb::int_(seed)));
    return nb::cast(&default_generator(), nb::rv_policy::reference);
  }, "seed"_a);
  m.def("initial_seed", []() { return default_generator().initial_seed(); });
  m.def("seed", []() { return reseed(default_generator()); });
  // rand, randn, randint, randperm, normal, rand_like, randn_like, the in-place fills (uniform_, ...),
  // bernoulli, multinomial: from their composites' schemas (kiln/ops/random.cpp)
}

}  // namespace kiln::py
