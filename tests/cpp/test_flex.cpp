// FlexAttention from C++ (issue 11): C++ callables as score_mod / mask_mod, block masks, the
// gradients of q, k, v and of a captured tensor, against the same attention written with plain ops
// in float64 (the Python suite compares with torch 2.13).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kiln/kiln.h"

using namespace kiln;

namespace {

template <class T>
Tensor tensor_from_vector(std::vector<T> v, const Shape& s) {
  return clone(from_blob(v.data(), s, contiguous_strides(s), dtype_of<T>()));
}

double max_diff(const Tensor& a, const Tensor& b) {
  return amax(abs(sub(to_dtype(a, kFloat64), to_dtype(b, kFloat64)))).item<double>();
}

// softmax(where(mask, score + bias, -inf)) v in float64, fully masked rows zero; bias (H, L, S) or
// undefined.
Tensor reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& keep, const Tensor& bias) {
  Tensor s = mul(matmul(to_dtype(q, kFloat64), transpose(to_dtype(k, kFloat64), -2, -1)),
                 Scalar(1.0 / std::sqrt(static_cast<double>(q.size(-1)))));
  if (bias.defined()) s = add(s, bias);
  s = where(keep, s, full({}, Scalar(-std::numeric_limits<double>::infinity()), kFloat64));
  Tensor p = nan_to_num(softmax(s, -1), 0.0, 0.0, 0.0);
  return matmul(p, to_dtype(v, kFloat64));
}

MaskMod causal() {
  return [](const Tensor&, const Tensor&, const Tensor& q, const Tensor& kv) { return ge(q, kv); };
}

TEST(Flex, BlockMaskOfCausalMatchesItsDefinition) {
  BlockMask bm = create_block_mask(causal(), std::nullopt, std::nullopt, 300, 300, 128, 128);
  // rows of query blocks: the diagonal block partial; below it full, except in the ragged last row
  Tensor want_partial = tensor_from_vector<int32_t>({1, 1, 3}, {1, 1, 3});
  EXPECT_TRUE(equal(bm.kv_num_blocks, want_partial));
  EXPECT_TRUE(equal(bm.full_kv_num_blocks, tensor_from_vector<int32_t>({0, 1, 0}, {1, 1, 3})));
  EXPECT_EQ(bm.q_len, 300);
  EXPECT_NEAR(bm.sparsity(), 100.0 * (1 - 6.0 * 128 * 128 / (300.0 * 300.0)), 1e-9);
  Tensor dense = bm.to_dense();
  EXPECT_EQ(dense.sizes(), Shape({1, 1, 3, 3}));
  EXPECT_EQ(sum(dense).item<int64_t>(), 6);
  Tensor m = create_mask(causal(), 1, 1, 5, 4);
  EXPECT_TRUE(equal(m, ge(arange(5).view({1, 1, 5, 1}), arange(4).view({1, 1, 1, 4}))));
}

TEST(Flex, CausalAlibiForwardAndGradientsAgainstPlainOps) {
  manual_seed(11);
  const int64_t B = 2, H = 2, L = 200, S = 200, E = 16;
  Tensor q = randn({B, H, L, E}), k = randn({B, H, S, E}), v = randn({B, H, S, E});
  Tensor slopes = tensor_from_vector<float>({0.5f, 0.25f}, {2});
  q.requires_grad_(true), k.requires_grad_(true), v.requires_grad_(true), slopes.requires_grad_(true);
  ScoreMod alibi = [&](const Tensor& s, const Tensor&, const Tensor& h, const Tensor& qi, const Tensor& kv) {
    return add(s, mul(index(slopes, {h}), sub(kv, qi)));
  };
  BlockMask bm = create_block_mask(causal(), std::nullopt, std::nullopt, L, S, 64, 64);
  FlexAttentionOutput r = flex_attention(q, k, v, alibi, &bm);
  // the reference, differentiated by autograd in float64
  Tensor qd = to_dtype(q.detach(), kFloat64).requires_grad_(true), kd = to_dtype(k.detach(), kFloat64).requires_grad_(true),
         vd = to_dtype(v.detach(), kFloat64).requires_grad_(true),
         sd = to_dtype(slopes.detach(), kFloat64).requires_grad_(true);
  Tensor qi = arange(L).view({L, 1}), kv = arange(S).view({1, S});
  Tensor bias = mul(sd.view({H, 1, 1}), to_dtype(sub(kv, qi), kFloat64));
  Tensor want = reference(qd, kd, vd, ge(qi, kv), bias);
  EXPECT_LT(max_diff(r.out, want), 1e-5);
  Tensor g = randn({B, H, L, E});
  r.out.backward(g);
  want.backward(to_dtype(g, kFloat64));
  EXPECT_LT(max_diff(q.grad(), qd.grad()), 1e-5);
  EXPECT_LT(max_diff(k.grad(), kd.grad()), 1e-5);
  EXPECT_LT(max_diff(v.grad(), vd.grad()), 1e-5);
  EXPECT_LT(max_diff(slopes.grad(), sd.grad()) / amax(abs(sd.grad())).item<double>(), 1e-5);
}

TEST(Flex, GqaWithoutMaskAndFullyMaskedRows) {
  manual_seed(12);
  Tensor q = randn({1, 4, 70, 8}), k = randn({1, 2, 90, 8}), v = randn({1, 2, 90, 5});
  FlexAttentionOutput r = flex_attention(q, k, v, {}, nullptr, std::nullopt, /*enable_gqa=*/true);
  Tensor kr = repeat_interleave(k, 2, 1), vr = repeat_interleave(v, 2, 1);
  EXPECT_LT(max_diff(r.out, reference(q, kr, vr, ones({70, 90}, kBool), Tensor())), 1e-5);
  // rows 0..9 keep nothing: zeros and lse -inf
  MaskMod late = [](const Tensor&, const Tensor&, const Tensor& qi, const Tensor&) { return ge(qi, 10); };
  BlockMask bm = create_block_mask(late, std::nullopt, std::nullopt, 70, 90, 32, 32);
  FlexAttentionOutput m = flex_attention(q, k, v, {}, &bm, std::nullopt, true);
  EXPECT_EQ(amax(abs(slice(m.out, 2, 0, 10))).item<float>(), 0.0f);
  EXPECT_TRUE(std::isinf(amax(slice(m.lse, 2, 0, 10)).item<float>()));
  EXPECT_THROW(flex_attention(q, k, v), Error);  // Hq != Hkv without enable_gqa
}

}  // namespace
