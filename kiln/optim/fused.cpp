// The fused optimiser update as a table op (`_fused_optimizer_update`): its schema, its attributes
// and the front end the optimisers call (detail/fused.h). The CPU kernel is in
// kiln/backend/cpu/optim.cpp, its per-ISA loops in kiln/backend/cpu/kernels_optim.cpp.
#include "kiln/optim/detail/fused.h"

namespace kiln::optim::detail {
namespace {

// attrs: {algo, flags, hyper-parameters (8), c0, c1, fresh, c2 per segment}
enum : int64_t { kMaximize = 1, kNesterov = 2, kAmsgrad = 4, kDecoupled = 8, kCentered = 16, kMomentum = 32 };

SpecList update_meta(const OpDef&, const SpecList&, const Attrs&) { return {}; }

OpDef op_update{"_fused_optimizer_update", 0, update_meta, {}};
OpRegistrar reg_update{op_update,
                       "_fused_optimizer_update(Tensor[] tensors, int algo, int flags, float[] hyper, float[] c0, "
                       "float[] c1, int[] fresh, float[] c2=[]) -> ()"};

}  // namespace

Hyper hyper_of(const Attrs& a, Algo& algo) {
  algo = static_cast<Algo>(attr<int64_t>(a, 0));
  const int64_t f = attr<int64_t>(a, 1);
  const std::vector<double>& hv = attr<std::vector<double>>(a, 2);
  Hyper h;
  h.lr = hv[0], h.beta1 = hv[1], h.beta2 = hv[2], h.eps = hv[3], h.weight_decay = hv[4];
  h.momentum = hv[5], h.dampening = hv[6], h.alpha = hv[7];
  h.maximize = f & kMaximize, h.nesterov = f & kNesterov, h.amsgrad = f & kAmsgrad;
  h.decoupled = f & kDecoupled, h.centered = f & kCentered, h.use_momentum = f & kMomentum;
  return h;
}

std::vector<Segment> segments_of(const Attrs& a) {
  const std::vector<double>& c0 = attr<std::vector<double>>(a, 3);
  const std::vector<double>& c1 = attr<std::vector<double>>(a, 4);
  const Shape& fresh = attr<Shape>(a, 5);
  std::vector<double> none;
  const std::vector<double>& c2 = a.size() > 6 ? attr<std::vector<double>>(a, 6) : none;
  std::vector<Segment> segs(c0.size());
  for (size_t k = 0; k < segs.size(); ++k) {
    segs[k].c0 = c0[k], segs[k].c1 = c1[k], segs[k].fresh = fresh[k] != 0;
    if (k < c2.size()) segs[k].c2 = c2[k];
  }
  return segs;
}

void fused_update(Algo algo, const Hyper& h, const TensorList& tensors, const std::vector<Segment>& segs) {
  const int64_t f = (h.maximize ? kMaximize : 0) | (h.nesterov ? kNesterov : 0) | (h.amsgrad ? kAmsgrad : 0) |
                    (h.decoupled ? kDecoupled : 0) | (h.centered ? kCentered : 0) |
                    (h.use_momentum ? kMomentum : 0);
  std::vector<double> c0, c1, c2;
  Shape fresh;
  for (const Segment& s : segs) c0.push_back(s.c0), c1.push_back(s.c1), c2.push_back(s.c2), fresh.push_back(s.fresh);
  dispatch(op_update, tensors,
           {static_cast<int64_t>(algo), f,
            std::vector<double>{h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.momentum, h.dampening, h.alpha},
            std::move(c0), std::move(c1), std::move(fresh), std::move(c2)});
}

}  // namespace kiln::optim::detail
