// The kiln._C extension: dtype objects, Tensor, ops, interop, errors.
#include <Python.h>

#include "common.h"
#include "kiln/core/accelerator.h"
#include "kiln/core/threads.h"
#include "kiln/core/warning.h"
#include "kiln/dispatch/schema.h"

namespace kiln::py {
namespace {
// torch.linalg.LinAlgError: a RuntimeError raised for singular and non-positive-definite inputs.
PyObject* g_linalg_error = nullptr;
// torch.OutOfMemoryError: what torch code catches (RuntimeError) and what Python code catches
// (MemoryError) at once.
PyObject* g_oom_error = nullptr;

PyObject* exc_for(ErrorKind k) {
  switch (k) {
    case ErrorKind::LinAlg: return g_linalg_error ? g_linalg_error : PyExc_RuntimeError;
    case ErrorKind::Value: return PyExc_ValueError;
    case ErrorKind::Index: return PyExc_IndexError;
    case ErrorKind::Type: return PyExc_TypeError;
    case ErrorKind::NotImplemented: return PyExc_NotImplementedError;
    case ErrorKind::OutOfMemory: return g_oom_error ? g_oom_error : PyExc_MemoryError;
    case ErrorKind::Assertion: return PyExc_AssertionError;
    default: return PyExc_RuntimeError;
  }
}
}  // namespace

void set_python_error(const std::exception_ptr& p) {
  try {
    std::rethrow_exception(p);
  } catch (const kiln::Error& e) {
    PyErr_SetString(exc_for(e.kind()), e.what());
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const nb::builtin_exception& e) {
    PyObject* type = PyExc_RuntimeError;
    switch (e.type()) {
      case nb::exception_type::stop_iteration: type = PyExc_StopIteration; break;
      case nb::exception_type::index_error: type = PyExc_IndexError; break;
      case nb::exception_type::key_error: type = PyExc_KeyError; break;
      case nb::exception_type::value_error: type = PyExc_ValueError; break;
      case nb::exception_type::type_error: type = PyExc_TypeError; break;
      case nb::exception_type::buffer_error: type = PyExc_BufferError; break;
      case nb::exception_type::import_error: type = PyExc_ImportError; break;
      case nb::exception_type::attribute_error: type = PyExc_AttributeError; break;
      default: break;
    }
    PyErr_SetString(type, e.what());
  } catch (const std::bad_cast&) {
    PyErr_SetString(PyExc_TypeError, "an argument has the wrong type");
  } catch (const std::bad_alloc&) {
    PyErr_SetString(g_oom_error ? g_oom_error : PyExc_MemoryError, "out of memory");
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown error");
  }
}
}  // namespace kiln::py

namespace kiln::py {
void bind_stream(nb::module_& m, nb::class_<Tensor>& tensor_cls);  // bind_stream.cpp
void bind_graph(nb::module_& m);                                     // bind_graph.cpp
}

NB_MODULE(_C, m) {
  using namespace kiln;
  using namespace kiln::py;
  g_linalg_error = PyErr_NewException("kiln.linalg.LinAlgError", PyExc_RuntimeError, nullptr);
  m.attr("_LinAlgError") = nb::handle(g_linalg_error);
  g_oom_error = PyErr_NewException("kiln.OutOfMemoryError",
                                   nb::make_tuple(nb::handle(PyExc_RuntimeError), nb::handle(PyExc_MemoryError)).release().ptr(),
                                   nullptr);
  m.attr("OutOfMemoryError") = nb::handle(g_oom_error);
  // Every kernel above a small size runs without the interpreter lock (op.h: KernelRegionHooks);
  // a thread that does not hold it (the autograd engine's caller released it) is left alone.
  set_kernel_region_hooks({[]() -> void* { return PyGILState_Check() ? PyEval_SaveThread() : nullptr; },
                           [](void* t) {
                             if (t) PyEval_RestoreThread(static_cast<PyThreadState*>(t));
                           }});
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const kiln::Error& e) {
      PyErr_SetString(exc_for(e.kind()), e.what());
    } catch (const std::bad_cast&) {  // a failed argument conversion: never "std::bad_cast" as text
      PyErr_SetString(PyExc_TypeError, "an argument has the wrong type");
    } catch (const std::bad_alloc&) {
      PyErr_SetString(g_oom_error, "out of memory");
    }
  });
  nb::set_leak_warnings(false);  // module-lifetime singletons (dtype objects) are intentional
  bind_dtype(m);
  bind_device(m);
  bind_symint(m);
  nb::class_<Tensor> cls(m, "Tensor");
  bind_tensor(m, cls);
  bind_schema(m, cls);
  expose_registered(m, cls);  // before the hand-written bindings: a name bound twice fails at import
  bind_ops(m, cls);
  bind_protocol(m, cls);
  bind_interop(m, cls);
  bind_sort(m, cls);
  bind_shape(m, cls);
  bind_autograd(m, cls);
  bind_io(m);
  bind_amp(m);
  bind_nn(m);
  bind_optim(m);
  bind_distributions(m);
  bind_func(m);
  bind_attention(m);
  bind_conv(m);
  bind_capture(m);
  bind_stream(m, cls);
  bind_graph(m);
  bind_loss(m);
  bind_rnn(m);
  bind_layers(m);
  bind_export(m);
#ifdef KILN_HAVE_DISTRIBUTED
  bind_distributed(m);
#endif
  m.attr("_has_distributed") =
#ifdef KILN_HAVE_DISTRIBUTED
      true;
#else
      false;
#endif

  // torch's argument checks: an int (RuntimeError otherwise) that fits a C int (ValueError otherwise)
  static auto c_int_arg = [](nb::handle n, const char* op) {
    KILN_CHECK(PyIndex_Check(n.ptr()) && !PyBool_Check(n.ptr()), Runtime, op, op, " expects an int, but got ",
               nb::type_name(n.type()).c_str());
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(nb::int_(n).ptr(), &overflow);
    KILN_CHECK(!overflow && v >= INT_MIN && v <= INT_MAX, Value, op, "Overflow when unpacking long: ",
               nb::repr(n).c_str(), " does not fit a C int");
    return static_cast<int>(v);
  };
  m.def("set_num_threads", [](nb::handle n) { kiln::set_num_threads(c_int_arg(n, "set_num_threads")); }, "num"_a);
  m.def("get_num_threads", &kiln::get_num_threads);
  m.def("set_num_interop_threads", [](nb::handle n) {
    kiln::set_num_interop_threads(c_int_arg(n, "set_num_interop_threads"));
  }, "num"_a);
  m.def("get_num_interop_threads", &kiln::get_num_interop_threads);
  m.def("_default_num_threads", &kiln::default_num_threads);
  m.def("_accelerator_is_available", &kiln::accelerator::is_available);
  m.def("_accelerator_device_count", &kiln::accelerator::device_count);
  m.def("_accelerator_explain", &kiln::accelerator::explain);
  m.def("_accelerator_built_cuda_version", []() { return KILN_CUDA_RUNTIME_VERSION; });
  // The probe with a chosen runtime version and driver library: how the tests simulate a CUDA
  // build on a machine with a stub driver.
  m.def("_accelerator_diagnose", [](int runtime_version, const std::string& driver_library, int min_capability) {
    kiln::accelerator::Probe p;
    p.runtime_version = runtime_version;
    p.driver_library = driver_library;
    p.min_capability = min_capability;
    const auto d = kiln::accelerator::diagnose(p);
    nb::dict r;
    r["available"] = d.available;
    r["device_count"] = d.device_count;
    r["driver_version"] = d.driver_version;
    r["devices"] = d.devices;
    r["reason"] = d.reason;
    return r;
  }, "runtime_version"_a, "driver_library"_a = "", "min_capability"_a = 70);
  m.def("_openmp_runtimes", &kiln::openmp_runtimes);
  m.def("_check_openmp_runtimes", &kiln::check_openmp_runtimes);
  m.def("_cgroup_cpu_limit", &kiln::threads_detail::cgroup_cpu_limit, "root"_a);
  m.def("_threads_for", &kiln::threads_detail::threads_for);
  m.def("_parse_thread_env", [](const std::string& v) { return kiln::threads_detail::parse_thread_env(v.c_str()); });
  m.def("_openmp_runtime_kind", &kiln::threads_detail::openmp_runtime_kind);
  // C++ warnings become Python warnings (the caller may not hold the interpreter lock: a kernel
  // region released it). With warnings turned into errors the error cannot travel back through
  // C++, so it is reported as unraisable instead of being lost.
  kiln::set_warning_handler([](kiln::WarningKind kind, const std::string& msg) {
    PyGILState_STATE st = PyGILState_Ensure();
    if (PyErr_WarnEx(kind == kiln::WarningKind::Runtime ? PyExc_RuntimeWarning : PyExc_UserWarning,
                     msg.c_str(), 1) != 0)
      PyErr_WriteUnraisable(nullptr);
    PyGILState_Release(st);
  });
  m.def("memory_stats", []() {
    MemoryStats s = kiln::memory_stats();
    nb::dict d;
    d["allocated_bytes.all.current"] = s.allocated_bytes;
    d["allocated_bytes.all.peak"] = s.peak_allocated_bytes;
    d["reserved_bytes.all.current"] = s.reserved_bytes;
    d["allocation.all.allocated"] = s.num_allocs;
    d["allocation.all.freed"] = s.num_frees;
    d["allocation.all.current"] = s.num_allocs - s.num_frees;
    d["cache_hits"] = s.cache_hits;
    return d;
  });
  m.def("reset_peak_memory_stats", &kiln::reset_peak_memory_stats);
  m.def("empty_cache", &kiln::empty_cache);
  m.def("cpu_isa", &kiln::cpu::cpu_isa);
  // whether the selected table multiplies bfloat16 with the AVX512-BF16 instructions (vdpbf16ps)
  m.def("cpu_bf16_dot", &kiln::cpu::bf16_dot);
  m.def("cpu_amx", &kiln::cpu::amx);
  // op schemas (dispatch/schema.h): the text, and the parsed form as (name, overload, args, returns)
  // with args as (name, type, default or None, kwarg_only)
  m.def("_op_schema", [](const std::string& name) -> nb::object {
    const OpDef* op = find_op(name);
    if (!op) throw nb::value_error(("no op named " + name).c_str());
    const Schema* s = op_schema(*op);
    if (!s) return nb::none();
    nb::list args;
    for (const SchemaArg& a : s->args)
      args.append(nb::make_tuple(a.name, a.type, a.default_ ? nb::cast(*a.default_) : nb::none(), a.kwarg_only));
    return nb::make_tuple(s->name, s->overload, args, nb::cast(s->returns), s->str());
  });
  m.def("_parse_schema", [](const std::string& text) { return parse_schema(text).str(); });
  m.def("_set_schema_check", &set_schema_check);
  m.def("_schema_problems", &schema_problems);
  m.def("_unresolved_kernels", &unresolved_kernels);
  m.def("_set_meta_check", &set_meta_check);
  m.def("_meta_problems", &meta_problems);
  m.def("registered_ops", []() {
    std::vector<std::string> names;
    for (const OpDef* op : registered_ops()) names.emplace_back(op->name);
    return names;
  });
}
