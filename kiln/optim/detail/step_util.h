// The step helpers shared by the optimisers' files (optimizers.cpp, optimizers_more.cpp): the step
// counter, the fused-update collector and the hyper-parameters of a group.
#pragma once

#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kiln/optim/detail/fused.h"
#include "kiln/optim/optimizer.h"

namespace kiln::optim::detail {

// The dtype torch gives a new state['step'] (float32 unless the default dtype is float64).
Dtype step_dtype();
// state["step"] += 1 in the step tensor's own dtype; returns the new value.
double bump_step(const char* op, ParamState& st);

// Collects the parameters of one group step as contiguous real segments by dtype, runs the fused
// update, then writes back parameters that were not contiguous.
class Updater {
 public:
  explicit Updater(const char* op) : op_(op) {}
  // p with gradient g and state tensors st[keys] (nullptr key: unused slot).
  void add(const Tensor& p, Tensor g, ParamState* st, std::initializer_list<const char*> keys, Segment seg);
  void run(Algo algo, const Hyper& h);

 private:
  struct Job {  // one fused update per dtype
    std::vector<Segment> segs;
    TensorList tensors;  // five per segment (detail::fused_update)
  };
  const char* op_;
  std::map<Dtype, Job> jobs_;
  std::vector<Tensor> bumped_;
  std::vector<std::pair<Tensor, Tensor>> copy_back_;
};

std::vector<double> betas_of(const char* op, const Options& o);
// The group's hyper-parameters named in `keys` (torch's option names); the others stay 0 / false.
// decoupled_weight_decay may be absent (Adam's groups from before the option existed).
Hyper hyper_of(const char* op, const Options& o, std::initializer_list<const char*> keys);
void fill_missing(Options& o, std::initializer_list<std::pair<std::string, Value>> d);

}  // namespace kiln::optim::detail
