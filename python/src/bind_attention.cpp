// Python binding: attention (scaled_dot_product_attention and its fused table ops).
#include "common.h"
#include "kiln/attention/flex.h"
#include "kiln/attention/sdpa.h"

namespace kiln::py {

namespace {
Tensor opt(const std::optional<Tensor>& t) { return t ? *t : Tensor(); }
nb::object tensor_or_none(const Tensor& t) { return t.defined() ? nb::cast(t) : nb::none(); }

// A Python mask_mod as a C++ one (called with the interpreter lock held).
MaskMod mask_mod_of(nb::object f) {
  return [f = std::move(f)](const Tensor& b, const Tensor& h, const Tensor& q, const Tensor& kv) {
    nb::object r = f(b, h, q, kv);
    return nb::cast<Tensor>(r);
  };
}
}  // namespace

void bind_attention(nb::module_& m) {
  // FlexAttention (kiln/attention/flex.h): tracing a modifier -> (program id, captured tensors, text)
  m.def(
      "_flex_trace",
      [](nb::object fn, int n_args, nb::handle dt) {
        const Dtype score_dtype = as_dtype(dt);
        flex::Tracer t(n_args, score_dtype);
        const TensorList& a = t.args();
        nb::object r = n_args == 5 ? fn(a[0], a[1], a[2], a[3], a[4]) : fn(a[0], a[1], a[2], a[3]);
        KILN_CHECK(nb::isinstance<Tensor>(r), Type, "flex_attention", n_args == 5 ? "score_mod" : "mask_mod",
                   " must return a tensor");
        flex::Traced tr = t.finish(nb::cast<Tensor>(r));
        nb::list bufs;
        for (const Tensor& b : tr.buffers) bufs.append(nb::cast(b));
        return nb::make_tuple(tr.id, bufs, flex::program(tr.id)->text);
      },
      "fn"_a, "n_args"_a, "score_dtype"_a);
  m.def(
      "_flex_create_block_mask",
      [](nb::object mask_mod, std::optional<int64_t> B, std::optional<int64_t> H, int64_t q_len, int64_t kv_len,
         int64_t qb, int64_t kb) {
        BlockMask bm = create_block_mask(mask_mod_of(std::move(mask_mod)), B, H, q_len, kv_len, qb, kb);
        return nb::make_tuple(bm.kv_num_blocks, bm.kv_indices, bm.full_kv_num_blocks, bm.full_kv_indices);
      },
      "mask_mod"_a, "B"_a.none(), "H"_a.none(), "Q_LEN"_a, "KV_LEN"_a, "Q_BLOCK"_a, "KV_BLOCK"_a);
  m.def(
      "_flex_create_mask",
      [](nb::object mask_mod, std::optional<int64_t> B, std::optional<int64_t> H, int64_t q_len, int64_t kv_len) {
        return create_mask(mask_mod_of(std::move(mask_mod)), B, H, q_len, kv_len);
      },
      "mask_mod"_a, "B"_a.none(), "H"_a.none(), "Q_LEN"_a, "KV_LEN"_a);
  m.def("_flex_dense_to_ordered", [](const Tensor& d) {
    auto [n, i] = dense_to_ordered(d);
    return nb::make_tuple(n, i);
  });
  m.def("_flex_ordered_to_dense", [](const Tensor& n, const Tensor& i, int64_t c) { return ordered_to_dense(n, i, c); });
  m.def("_flex_transpose_ordered", [](const Tensor& n, const Tensor& i) {
    auto [a, b] = transpose_ordered(n, i);
    return nb::make_tuple(a, b);
  });
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
