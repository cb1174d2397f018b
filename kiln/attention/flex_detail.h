// What the FlexAttention table ops (kiln/attention/flex.cpp) and their CPU kernels
// (kiln/backend/cpu/flex_attention.cpp) share: the attributes' order and the call's geometry,
// validated as torch validates it.
#pragma once

#include "kiln/dispatch/op.h"

namespace kiln::flex {

inline constexpr const char* kName = "flex_attention";

// Inputs: {q, k, v, kv_num_blocks?, kv_indices?, full_kv_num_blocks?, full_kv_indices?, buffers...}
// (the backward: {grad_out, grad_lse?, q, k, v, out, lse, the four block tensors, buffers...}).
// attrs: {scale, enable_gqa, q_block, kv_block, score_mod id, mask_mod id, n_score_buffers}
// (the backward: + {buffer_grads (int[]: 1 where a score buffer wants its gradient)}).
enum AttrIdx : int { kScale, kGqa, kQBlock, kKvBlock, kScoreMod, kMaskMod, kNScoreBuffers, kBufferGrads };
inline constexpr int kBlockInputs = 4;

// I: int64_t (kernels) or SymInt (metas).
template <class I>
struct GeomT {
  I B = 0, Hq = 0, L = 0, E = 0;  // query (B, Hq, L, E)
  I Bk = 0, Hkv = 0, S = 0, Ev = 0;  // key (Bk, Hkv, S, E), value (Bk, Hkv, S, Ev)
};

template <class T, class I = std::decay_t<decltype(std::declval<T>().sizes()[0])>>
GeomT<I> geometry(const char* op, const T& q, const T& k, const T& v, bool gqa) {
  KILN_CHECK(q.defined() && k.defined() && v.defined(), Runtime, op, "query, key and value must be tensors");
  KILN_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, NotImplemented, op,
             "NYI: query, key, and value must be 4D tensors, got ", q.sizes(), ", ", k.sizes(), " and ",
             v.sizes());
  const Dtype d = q.dtype();
  KILN_CHECK(k.dtype() == d && v.dtype() == d, Value, op,
             "Expected query, key, and value to have the same dtype, but got query.dtype: ", dtype_name(d),
             " key.dtype: ", dtype_name(k.dtype()), " and value.dtype: ", dtype_name(v.dtype()), " instead.");
  KILN_CHECK(d == kFloat32 || d == kFloat64 || d == kFloat16 || d == kBFloat16, Value, op,
             "Expected query, key and value of a floating point dtype, but got ", dtype_name(d));
  GeomT<I> g;
  g.B = q.size(0), g.Hq = q.size(1), g.L = q.size(2), g.E = q.size(3);
  g.Bk = k.size(0), g.Hkv = k.size(1), g.S = k.size(2), g.Ev = v.size(3);
  KILN_CHECK(bool(k.size(3) == g.E), Value, op,
             "Expect query and key/value to have the same embedding dimension but got E=", g.E,
             " and E=", k.size(3), ".");
  KILN_CHECK(bool(v.size(0) == g.Bk) && bool(v.size(1) == g.Hkv) && bool(v.size(2) == g.S), Value, op,
             "key and value must agree in batch, heads and length, got key ", k.sizes(), " and value ",
             v.sizes());
  if (!gqa)
    KILN_CHECK(bool(g.Hq == g.Hkv), Value, op,
               "Expect query and key/value to have the same number of heads but got Hq=", g.Hq,
               " and Hkv=", g.Hkv, ". Try setting enable_gqa=True for GQA.");
  else
    KILN_CHECK(bool(g.Hkv > 0) && bool(g.Hq % g.Hkv == 0), Value, op,
               "Expect number of query heads to be a multiple of kv heads for GQA but got Hq=", g.Hq,
               " and Hkv=", g.Hkv, ".");
  KILN_CHECK(bool(g.Bk == g.B) || bool(g.Bk == 1), Runtime, op, "Bq and Bkv must broadcast. Got Bq=", g.B,
             " and Bkv=", g.Bk);
  return g;
}

inline Dtype compute_dtype(Dtype d) { return d == kFloat64 ? kFloat64 : kFloat32; }

}  // namespace kiln::flex
