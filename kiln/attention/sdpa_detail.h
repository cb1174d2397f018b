// What the SDPA table ops (kiln/attention/sdpa.cpp: entries, schemas, metas, derivative, front
// ends) and their CPU kernels (kiln/backend/cpu/attention.cpp) share: the call's geometry,
// validated as torch validates it, the compute dtype and the backward's mask-gradient flag.
#pragma once

#include <cstdint>

#include "kiln/dispatch/op.h"

namespace kiln::sdpa {

// Forward errors carry the public name: `[scaled_dot_product_attention] ...`.
inline constexpr const char* kFwdName = "scaled_dot_product_attention";

// Shapes of one call, validated as torch validates them. The output's batch dims are `batch`
// (flattened: BH); q heads use k head h / gk and v head h / gv under GQA.
// I: int64_t (the kernels) or SymInt (the meta functions).
template <class I>
struct GeomT {
  SmallVec<I, 6> batch;
  I BH = 1, L = 0, S = 0, E = 0, Ev = 0;
  I gk = 1, gv = 1;
  bool gqa = false;
  bool causal = false;
  double dropout_p = 0.0;  // > 0: dropout on
  double scale = 1.0;      // effective softmax scale
};
using Geom = GeomT<int64_t>;

// attrs: {dropout_p (double), is_causal (bool), scale (double | none), enable_gqa (bool)[,
// mask_grad]}
Geom make_geom(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
               const Tensor& mask, const Attrs& attrs);
GeomT<SymInt> make_geom(const char* op, const TensorSpec& q, const TensorSpec& k, const TensorSpec& v,
                        const TensorSpec& mask, const Attrs& attrs);

// float32 and float64 compute in their own type, float16 / bfloat16 in float32.
inline Dtype compute_dtype(Dtype d) { return d == kFloat64 ? kFloat64 : kFloat32; }

// The backward's inputs {grad_out, q, k, v, out, logsumexp, rng_state, mask?, grad_logsumexp?}:
// true when it returns the mask's gradient (asked for, and the mask is float).
template <class L>
bool wants_mask_grad(const L& in, const Attrs& a) {
  return a.size() > 4 && attr<bool>(a, 4) && in[7].defined() && in[7].dtype() != kBool;
}

}  // namespace kiln::sdpa
