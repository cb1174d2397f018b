// Python binding: attention (scaled_dot_product_attention and its fused table ops).
#include "common.h"
#include "kiln/attention/sdpa.h"

namespace kiln::py {

namespace {
Tensor opt(const std::optional<Tensor>& t) { return t ? *t : Tensor(); }
nb::object tensor_or_none(const Tensor& t) { return t.defined() ? nb::cast(t) : nb::none(); }
}  // namespace

void bind_attention(nb::module_& m) {
  // scaled_dot_product_attention: from its composite's schema (kiln/attention/sdpa.cpp)

  // (out, logsumexp, rng_state)
  m.def(
      "_sdpa_flash",
      [](const Tensor& q, const Tensor& k, const Tensor& v, std::optional<Tensor> mask,
         double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa) {
        nb::gil_scoped_release nogil;
        return sdpa_flash(q, k, v, opt(mask), dropout_p, is_causal, scale, enable_gqa);
      },
      "query"_a, "key"_a, "value"_a, "attn_mask"_a.none() = nb::none(), "dropout_p"_a = 0.0,
      "is_causal"_a = false, nb::kw_only(), "scale"_a.none() = nb::none(), "enable_gqa"_a = false);

  // (grad_query, grad_key, grad_value, grad_attn_mask or None)
  m.def(
      "_sdpa_flash_backward",
      [](const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
         const Tensor& out, const Tensor& lse, const Tensor& rng, std::optional<Tensor> mask,
         double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa,
         bool mask_grad, std::optional<Tensor> grad_lse) {
        std::tuple<Tensor, Tensor, Tensor, Tensor> r;
        {
          nb::gil_scoped_release nogil;
          r = sdpa_flash_backward(grad_out, q, k, v, out, lse, rng, opt(mask), dropout_p, is_causal,
                                  scale, enable_gqa, mask_grad, opt(grad_lse));
        }
        return nb::make_tuple(std::get<0>(r), std::get<1>(r), std::get<2>(r),
                              tensor_or_none(std::get<3>(r)));
      },
      "grad_out"_a, "query"_a, "key"_a, "value"_a, "out"_a, "logsumexp"_a, "rng_state"_a,
      "attn_mask"_a.none() = nb::none(), "dropout_p"_a = 0.0, "is_causal"_a = false, nb::kw_only(),
      "scale"_a.none() = nb::none(), "enable_gqa"_a = false, "mask_grad"_a = false,
      "grad_logsumexp"_a.none() = nb::none());
}

}  // namespace kiln::py
