// The fused optimiser update's plain data: the algorithm, the group's hyper-parameters and one
// parameter's segment. Read by the op's front end (fused.h) and by the CPU kernels
// (backend/cpu/optim.cpp, kernels_optim.cpp), which include nothing of the op table.
#pragma once

#include <cstdint>

namespace kiln::optim::detail {

enum class Algo : uint8_t { SGD, Adam, RMSprop, Adagrad, Rprop, ASGD, Adamax, NAdam, RAdam };

// Group-wide hyper-parameters (doubles, as torch passes Python floats to its kernels). Rprop reads
// beta1/beta2 as etaminus/etaplus and momentum/dampening as step_size_min/step_size_max; ASGD reads
// alpha as lambd.
struct Hyper {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  double momentum = 0, dampening = 0, alpha = 0;
  bool maximize = false, nesterov = false, amsgrad = false, decoupled = false, centered = false;
  bool use_momentum = false;
};

// One parameter: contiguous memory of n elements of the job's dtype. State slots:
//   SGD: s0 momentum buffer.  Adam: s0 exp_avg, s1 exp_avg_sq, s2 max_exp_avg_sq.
//   RMSprop: s0 square_avg, s1 momentum_buffer, s2 grad_avg.  Adagrad: s0 sum.
//   Rprop: s0 prev, s1 step_size.  ASGD: s0 ax (c0 eta, c1 mu).
//   Adamax: s0 exp_avg, s1 exp_inf (c0 lr / bias_correction1).
//   NAdam: s0 exp_avg, s1 exp_avg_sq (c0 bias_correction2, c1 the gradient's and c2 the average's coefficient).
//   RAdam: s0 exp_avg, s1 exp_avg_sq (c0 bias_correction1, c1 sqrt(bias_correction2), c2 rect or -1).
struct Segment {
  void* p = nullptr;
  const void* g = nullptr;
  void* s0 = nullptr;
  void* s1 = nullptr;
  void* s2 = nullptr;
  int64_t n = 0;
  double c0 = 0, c1 = 0, c2 = 0;  // Adam: -lr / bias_correction1, sqrt(bias_correction2). Adagrad: clr.
  bool fresh = false;     // SGD: the momentum buffer starts as this step's gradient
};

}  // namespace kiln::optim::detail
