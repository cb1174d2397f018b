// The fused multi-tensor update behind every kiln optimiser: one pass over each parameter's memory
// doing the whole update (gradient transform, state update, parameter update), vectorised per ISA
// (the CPU kernel table: base / AVX2+FMA / AVX-512, chosen at run time) and threaded over the elements of all the
// parameters of a step together. The per-element arithmetic follows torch's single-tensor path op
// by op in the parameter's dtype (float32/float64); float16/bfloat16 compute in float32.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/core/dtype.h"
#include "kiln/dispatch/op.h"

namespace kiln::optim::detail {

enum class Algo : uint8_t { SGD, Adam, RMSprop, Adagrad };

// Group-wide hyper-parameters (doubles, as torch passes Python floats to its kernels).
struct Hyper {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  double momentum = 0, dampening = 0, alpha = 0;
  bool maximize = false, nesterov = false, amsgrad = false, decoupled = false, centered = false;
  bool use_momentum = false;
};

// One parameter: contiguous memory of n elements of the job's dtype. State slots:
//   SGD: s0 momentum buffer.  Adam: s0 exp_avg, s1 exp_avg_sq, s2 max_exp_avg_sq.
//   RMSprop: s0 square_avg, s1 momentum_buffer, s2 grad_avg.  Adagrad: s0 sum.
struct Segment {
  void* p = nullptr;
  const void* g = nullptr;
  void* s0 = nullptr;
  void* s1 = nullptr;
  void* s2 = nullptr;
  int64_t n = 0;
  double c0 = 0, c1 = 0;  // Adam: -lr / bias_correction1, sqrt(bias_correction2). Adagrad: clr.
  bool fresh = false;     // SGD: the momentum buffer starts as this step's gradient
};

// The same through the op table (op `_fused_optimizer_update`): `tensors` holds five per segment,
// in order: parameter, gradient, state slots 0, 1, 2 (undefined where unused), all contiguous, real
// and of one dtype; the segments' pointers are ignored (taken from the tensors), their n, c0, c1 and
// fresh are passed as the op's attributes. So an optimiser step is one kernel with its buffers and
// hyper-parameters, like every other op.
void fused_update(Algo algo, const Hyper& h, const TensorList& tensors, const std::vector<Segment>& segs);

// What the kernel reads back from the op's attributes: the algorithm and hyper-parameters, and the
// segments' c0, c1 and fresh (their pointers and n come from the tensors).
Hyper hyper_of(const Attrs& a, Algo& algo);
std::vector<Segment> segments_of(const Attrs& a);

// The kernel table the update runs: "avx512", "avx2" or "base" (KILN_CPU_ISA=base/avx2 lowers it).
const char* update_isa();

}  // namespace kiln::optim::detail
