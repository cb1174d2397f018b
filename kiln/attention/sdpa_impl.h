// Internals shared by the SDPA front end (sdpa.cpp) and its tiled CPU kernels (sdpa_kernel.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/dispatch/op.h"

namespace kiln::sdpa {

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

// Element offsets of x's trailing-`trail`-dim slices for every flattened index of `batch`: x's
// leading dims align right with batch, size-1 dims broadcast, and the last batch dim (the head dim)
// is divided by `group` (GQA).
std::vector<int64_t> slice_offsets(const Tensor& x, int trail, const Shape& batch, int64_t group);

// Forward: out (BH, L, Ev) and lse (BH, L), both contiguous of the compute dtype (float32 or
// float64, the dtype of every tensor here); mask: additive, compute dtype, any strides; or
// undefined. seed/offset: the Philox draw reserved for dropout.
void forward(const Geom& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
             const Tensor& out, const Tensor& lse, uint64_t seed, uint64_t offset);

// Backward. dO, O: (BH, L, Ev) contiguous; lse, dlse (BH, L) contiguous (dlse may be undefined).
// Writes dq (BH, L, E), dk (BH, S, E), dv (BH, S, Ev) contiguous (the per-q-head gradients; GQA
// and broadcast sums happen in the caller) and, when dmask is defined (a contiguous tensor of the
// mask's own shape), accumulates the mask's gradient into it.
void backward(const Geom& g, const Tensor& dO, const Tensor& q, const Tensor& k, const Tensor& v,
              const Tensor& O, const Tensor& lse, const Tensor& dlse, const Tensor& mask,
              const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dmask,
              uint64_t seed, uint64_t offset);

}  // namespace kiln::sdpa
