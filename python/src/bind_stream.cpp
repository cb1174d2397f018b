// kiln.Stream, kiln.Event, current/default stream and Tensor.record_stream (kiln/core/stream.h).
#include <future>

#include "common.h"
#include "kiln/core/stream.h"

namespace kiln::py {
namespace {
thread_local std::vector<Stream> tls_entered;  // streams made current by `with stream:`, to restore

void check_cpu(nb::handle device, const char* what) {
  if (device.is_none()) return;
  const Device d = as_device(device);
  KILN_CHECK(d.type == DeviceType::CPU, Value, what, what, " on device '", device_str(d),
             "': kiln's streams and events run on the CPU (", device_str(d), " has no backend in this build)");
}
}  // namespace

void bind_stream(nb::module_& m, nb::class_<Tensor>& tensor_cls) {
  nb::class_<Stream>(m, "Stream")
      .def("__init__", [](Stream* self, nb::handle device, int priority) {
        check_cpu(device, "Stream");
        new (self) Stream(Stream::create(priority));
      }, "device"_a.none() = nb::none(), nb::kw_only(), "priority"_a = 0)
      .def_prop_ro("stream_id", &Stream::id)
      .def_prop_ro("priority", &Stream::priority)
      .def_prop_ro("device_type", [](const Stream&) { return 0; })  // torch: the DeviceType number
      .def_prop_ro("device_index", [](const Stream&) { return -1; })
      .def_prop_ro("device", [](const Stream&) { return Device{DeviceType::CPU, -1}; })
      .def("query", &Stream::query)
      .def("synchronize", &Stream::synchronize, nb::call_guard<nb::gil_scoped_release>())
      .def("wait_event", &Stream::wait_event, "event"_a, nb::call_guard<nb::gil_scoped_release>())
      .def("wait_stream", &Stream::wait_stream, "stream"_a, nb::call_guard<nb::gil_scoped_release>())
      .def("record_event", [](const Stream& s, std::optional<Event> e) {
        Event ev = e ? *e : Event();
        ev.record(s);
        return ev;
      }, "event"_a.none() = nb::none())
      .def("is_capturing", [](const Stream&) { return false; })
      .def("native_handle", &Stream::id)
      .def("__eq__", [](const Stream& a, nb::handle b) {
        return nb::isinstance<Stream>(b) && a == nb::cast<const Stream&>(b);
      })
      .def("__hash__", [](const Stream& s) { return nb::hash(nb::int_(s.id())); })
      .def("__repr__", [](const Stream& s) {
        return "kiln.Stream device_type=cpu, device_index=-1, stream_id=" + std::to_string(s.id());
      })
      .def("__enter__", [](nb::handle self) {
        // torch.Stream as a context manager: current until exit
        tls_entered.push_back(current_stream());
        set_current_stream(nb::cast<const Stream&>(self));
        return self;
      })
      .def("__exit__", [](const Stream&, nb::args) {
        if (!tls_entered.empty()) {
          set_current_stream(tls_entered.back());
          tls_entered.pop_back();
        }
        return false;
      });

  nb::class_<Event>(m, "Event")
      .def("__init__", [](Event* self, nb::handle device, bool enable_timing, bool, bool interprocess) {
        check_cpu(device, "Event");
        KILN_CHECK(!interprocess, Value, "Event", "interprocess events are not available on the CPU");
        new (self) Event(enable_timing);
      }, "device"_a.none() = nb::none(), nb::kw_only(), "enable_timing"_a = false, "blocking"_a = false,
         "interprocess"_a = false)
      .def("record", [](Event& e, std::optional<Stream> s) { e.record(s ? *s : current_stream()); },
           "stream"_a.none() = nb::none())
      .def("wait", [](const Event& e, std::optional<Stream> s) { e.wait(s ? *s : current_stream()); },
           "stream"_a.none() = nb::none(), nb::call_guard<nb::gil_scoped_release>())
      .def("query", &Event::query)
      .def("synchronize", &Event::synchronize, nb::call_guard<nb::gil_scoped_release>())
      .def("elapsed_time", &Event::elapsed_time, "end_event"_a)
      .def_prop_ro("event_id", &Event::id)
      .def_prop_ro("enable_timing", &Event::enable_timing)
      .def_prop_ro("device", [](const Event&) { return Device{DeviceType::CPU, -1}; })
      .def("__repr__", [](const Event& e) {
        return "kiln.Event device_type=cpu, device_index=-1, event_id=" + std::to_string(e.id()) +
               (e.enable_timing() ? ", enable_timing=True" : "");
      });

  m.def("current_stream", [](nb::handle device) {
    check_cpu(device, "current_stream");
    return current_stream();
  }, "device"_a.none() = nb::none());
  m.def("default_stream", [](nb::handle device) {
    check_cpu(device, "default_stream");
    return default_stream();
  }, "device"_a.none() = nb::none());
  m.def("set_stream", [](const Stream& s) { set_current_stream(s); }, "stream"_a);
  m.def("_synchronize_streams", &synchronize_streams, nb::call_guard<nb::gil_scoped_release>());
  m.def("_streams_pending", []() { return stream_detail::g_pending.load(); });
  // Test hooks: a gate queued on a stream holds its worker until opened (so tests order work without
  // timing), and a data pointer read without waiting for queued work.
  struct Gate {
    std::shared_ptr<std::promise<void>> p = std::make_shared<std::promise<void>>();
    bool opened = false;
    void open() {
      if (!opened) p->set_value();
      opened = true;
    }
  };
  nb::class_<Gate>(m, "_StreamGate").def("open", &Gate::open);
  m.def("_stream_gate", [](const Stream& s) {
    Gate g;
    std::shared_future<void> f = g.p->get_future().share();
    s.enqueue([f]() { f.wait(); });
    return g;
  });
  m.def("_data_ptr_nowait", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); });
  tensor_cls.def("record_stream", [](const Tensor& t, const Stream& s) { record_stream(t, s); }, "stream"_a);
}
}  // namespace kiln::py
