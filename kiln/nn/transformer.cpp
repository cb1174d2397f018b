// TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder.
#include "kiln/nn/transformer.h"

#include <cmath>

#include "kiln/nn/layer_util.h"

namespace kiln::nn {

Tensor generate_square_subsequent_mask(int64_t sz, Dtype dtype) {
  return triu(full({sz, sz}, -INFINITY, layer_util::opts(dtype)), 1);
}

ActivationFn activation_by_name(const std::string& name) {
  if (name == "relu") return [](const Tensor& x) { return relu(x); };
  if (name == "gelu") return [](const Tensor& x) { return gelu(x); };
  KILN_FAIL(Runtime, "Transformer", "activation should be relu/gelu, not ", name);
}

// ---- TransformerEncoderLayer --------------------------------------------------------------------
TransformerEncoderLayer::TransformerEncoderLayer(int64_t d, int64_t h, int64_t ff, double p,
                                                 const std::string& activation, double eps,
                                                 bool batch_first, bool norm_first, bool bias,
                                                 Dtype dtype)
    : Module("TransformerEncoderLayer"),
      d_model(d),
      nhead(h),
      dim_feedforward(ff),
      dropout_p(p),
      layer_norm_eps(eps),
      batch_first(batch_first),
      norm_first(norm_first),
      bias(bias) {
  self_attn = register_module(
      "self_attn", std::make_shared<MultiheadAttention>(d, h, p, bias, false, false, std::nullopt,
                                                        std::nullopt, batch_first, dtype));
  linear1 = register_module("linear1", std::make_shared<Linear>(d, ff, bias, dtype));
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
  linear2 = register_module("linear2", std::make_shared<Linear>(ff, d, bias, dtype));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{d}, eps, true, bias, dtype));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{d}, eps, true, bias, dtype));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(p));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(p));
  activation_ = activation_by_name(activation);
  activation_name_ = activation;
}

void TransformerEncoderLayer::set_activation(ActivationFn fn, std::string name) {
  activation_ = std::move(fn);
  activation_name_ = std::move(name);
}

Tensor TransformerEncoderLayer::sa_block(const Tensor& x, const Tensor& mask, const Tensor& kpm,
                                         bool is_causal) {
  auto [out, w] = self_attn->forward(x, x, x, kpm, /*need_weights=*/false, mask, true, is_causal);
  return dropout1->forward(out);
}

Tensor TransformerEncoderLayer::ff_block(const Tensor& x) {
  return dropout2->forward(linear2->forward(dropout->forward(activation_(linear1->forward(x)))));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask,
                                        const Tensor& kpm_in, bool is_causal) {
  Tensor kpm = F::canonical_mask(kpm_in, "src_key_padding_mask", src.dtype());
  Tensor mask = F::canonical_mask(src_mask, "src_mask", src.dtype());
  Tensor x = src;
  if (norm_first) {
    x = add(x, sa_block(norm1->forward(x), mask, kpm, is_causal));
    return add(x, ff_block(norm2->forward(x)));
  }
  x = norm1->forward(add(x, sa_block(x, mask, kpm, is_causal)));
  return norm2->forward(add(x, ff_block(x)));
}

std::shared_ptr<TransformerEncoderLayer> TransformerEncoderLayer::clone() const {
  auto c = std::make_shared<TransformerEncoderLayer>(
      d_model, nhead, dim_feedforward, dropout_p, "relu", layer_norm_eps, batch_first, norm_first,
      bias, self_attn->out_proj->weight().dtype());
  c->set_activation(activation_, activation_name_);
  NamedTensors src = named_parameters(), dst = c->named_parameters();
  KILN_CHECK(src.size() == dst.size(), Runtime, "TransformerEncoderLayer",
             "clone: parameter lists differ");
  NoGradGuard ng;
  for (size_t i = 0; i < src.size(); ++i) {
    copy_(dst.items()[i].second, src.items()[i].second);
    set_requires_grad(dst.items()[i].second, requires_grad(src.items()[i].second));
  }
  c->train(is_training());
  return c;
}

// ---- TransformerDecoderLayer --------------------------------------------------------------------
TransformerDecoderLayer::TransformerDecoderLayer(int64_t d, int64_t h, int64_t ff, double p,
                                                 const std::string& activation, double eps,
                                                 bool batch_first, bool norm_first, bool bias,
                                                 Dtype dtype)
    : Module("TransformerDecoderLayer"), norm_first(norm_first) {
  auto mha = [&] {
    return std::make_shared<MultiheadAttention>(d, h, p, bias, false, false, std::nullopt,
                                                std::nullopt, batch_first, dtype);
  };
  self_attn = register_module("self_attn", mha());
  multihead_attn = register_module("multihead_attn", mha());
  linear1 = register_module("linear1", std::make_shared<Linear>(d, ff, bias, dtype));
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
  linear2 = register_module("linear2", std::make_shared<Linear>(ff, d, bias, dtype));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{d}, eps, true, bias, dtype));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{d}, eps, true, bias, dtype));
  norm3 = register_module("norm3", std::make_shared<LayerNorm>(Shape{d}, eps, true, bias, dtype));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(p));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(p));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(p));
  activation_ = activation_by_name(activation);
  activation_name_ = activation;
}

void TransformerDecoderLayer::set_activation(ActivationFn fn, std::string name) {
  activation_ = std::move(fn);
  activation_name_ = std::move(name);
}

Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory,
                                        const Tensor& tgt_mask, const Tensor& memory_mask,
                                        const Tensor& tgt_kpm, const Tensor& memory_kpm,
                                        bool tgt_is_causal, bool memory_is_causal) {
  auto sa = [&](const Tensor& x) {
    return dropout1->forward(
        std::get<0>(self_attn->forward(x, x, x, tgt_kpm, false, tgt_mask, true, tgt_is_causal)));
  };
  auto mha = [&](const Tensor& x) {
    return dropout2->forward(std::get<0>(multihead_attn->forward(
        x, memory, memory, memory_kpm, false, memory_mask, true, memory_is_causal)));
  };
  auto ff = [&](const Tensor& x) {
    return dropout3->forward(linear2->forward(dropout->forward(activation_(linear1->forward(x)))));
  };
  Tensor x = tgt;
  if (norm_first) {
    x = add(x, sa(norm1->forward(x)));
    x = add(x, mha(norm2->forward(x)));
    return add(x, ff(norm3->forward(x)));
  }
  x = norm1->forward(add(x, sa(x)));
  x = norm2->forward(add(x, mha(x)));
  return norm3->forward(add(x, ff(x)));
}

// ---- TransformerEncoder -------------------------------------------------------------------------
TransformerEncoder::TransformerEncoder(const std::shared_ptr<TransformerEncoderLayer>& layer,
                                       int64_t n, std::shared_ptr<Module> norm_in,
                                       bool enable_nested_tensor, bool mask_check,
                                       ActivationFn norm_fn)
    : Module("TransformerEncoder"),
      norm(std::move(norm_in)),
      num_layers(n),
      enable_nested_tensor(enable_nested_tensor),
      mask_check(mask_check),
      norm_fn_(std::move(norm_fn)) {
  KILN_CHECK(layer, Value, "TransformerEncoder", "encoder_layer must be a TransformerEncoderLayer");
  KILN_CHECK(n >= 0, Value, "TransformerEncoder", "num_layers must be non-negative, got ", n);
  auto list = register_module("layers", std::make_shared<Module>("ModuleList"));
  for (int64_t i = 0; i < n; ++i)
    layers_.push_back(list->register_module(std::to_string(i), layer->clone()));
  if (norm) {
    if (!norm_fn_) {
      if (auto ln = std::dynamic_pointer_cast<LayerNorm>(norm)) {
        norm_fn_ = [ln](const Tensor& x) { return ln->forward(x); };
      } else if (auto rn = std::dynamic_pointer_cast<RMSNorm>(norm)) {
        norm_fn_ = [rn](const Tensor& x) { return rn->forward(x); };
      } else {
        KILN_FAIL(Type, "TransformerEncoder",
                  "norm must be a LayerNorm or RMSNorm (or come with norm_fn), got ", norm->name());
      }
    }
    register_module("norm", norm);
  }
}

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask_in, const Tensor& kpm_in,
                                   std::optional<bool> is_causal) {
  Tensor kpm = F::canonical_mask(kpm_in, "src_key_padding_mask", src.dtype());
  Tensor mask = F::canonical_mask(mask_in, "mask", src.dtype());
  bool causal = is_causal.value_or(false);
  if (!is_causal && mask.defined() && !layers_.empty()) {  // torch's _detect_is_causal_mask
    bool bf = layers_[0]->self_attn->batch_first;
    int64_t sz = src.dim() == 2 ? src.size(0) : src.size(bf ? 1 : 0);
    if (mask.sizes() == Shape{sz, sz})
      causal = equal(mask, generate_square_subsequent_mask(sz, mask.dtype()));
  }
  Tensor out = src;
  for (auto& layer : layers_) out = layer->forward(out, mask, kpm, causal);
  return norm_fn_ ? norm_fn_(out) : out;
}

}  // namespace kiln::nn
