// Testing hook for the capture layer (kiln/dispatch/op.h): records every top-level kernel a thread
// runs, with its buffers and attributes, and replays the list on the same buffers. The user-facing
// graph feature builds on the same layer; this class exists to prove the capture point is right.
#include "common.h"

namespace kiln::py {
namespace {

class Recorder : public CaptureLayer {
 public:
  struct Rec {
    const OpDef* op;
    KernelFn kernel;
    TensorList in;
    Attrs attrs;
    TensorList out;
  };

  ~Recorder() override { stop(); }

  void on_kernel(const OpDef& op, KernelFn kernel, const TensorList& inputs, const Attrs& attrs,
                 const TensorList& outputs) override {
    recs_.push_back({&op, kernel, inputs, attrs, outputs});
  }

  void start() {
    KILN_CHECK(!capture_layer(), Runtime, "_KernelRecorder", "a capture layer is already attached");
    set_capture_layer(this);
  }
  void stop() {
    if (capture_layer() == this) set_capture_layer(nullptr);
  }

  // Every recorded kernel again, in order, on the recorded buffers. View kernels only make
  // metadata (the recorded views alias the right memory already); kernels that make their own
  // outputs (dynamic shapes) write fresh tensors, whose values go into the recorded ones.
  void replay() {
    KILN_CHECK(capture_layer() != this, Runtime, "_KernelRecorder", "stop recording before replaying");
    for (Rec& r : recs_) {
      if (r.op->tags & kView) continue;
      if (r.op->meta) {
        r.kernel(*r.op, r.in, r.attrs, r.out);
        continue;
      }
      TensorList fresh;
      r.kernel(*r.op, r.in, r.attrs, fresh);
      for (size_t i = 0; i < fresh.size() && i < r.out.size(); ++i)
        if (fresh[i].defined() && !fresh[i].is_same(r.out[i]) && fresh[i].storage() != r.out[i].storage())
          copy_(r.out[i], fresh[i]);
    }
  }

  // (op name, input buffer ids, output buffer ids) per record; a buffer id is its storage's address.
  nb::list records() const {
    auto ids = [](const TensorList& ts) {
      nb::list l;
      for (const Tensor& t : ts) l.append(t.defined() ? nb::cast(reinterpret_cast<uintptr_t>(t.storage().get())) : nb::none());
      return l;
    };
    nb::list out;
    for (const Rec& r : recs_) out.append(nb::make_tuple(std::string(r.op->name), ids(r.in), ids(r.out)));
    return out;
  }
  size_t size() const { return recs_.size(); }

 private:
  std::vector<Rec> recs_;
};

}  // namespace

void bind_capture(nb::module_& m) {
  nb::class_<Recorder>(m, "_KernelRecorder")
      .def(nb::init<>())
      .def("start", &Recorder::start)
      .def("stop", &Recorder::stop)
      .def("replay", [](Recorder& r) {
        nb::gil_scoped_release nogil;
        r.replay();
      })
      .def("records", &Recorder::records)
      .def("__len__", &Recorder::size);
}

}  // namespace kiln::py
