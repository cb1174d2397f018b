// TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder.
#include "kiln/nn/transformer.h"

#include <cmath>

#include "kiln/autograd/autograd.h"
#include "kiln/nn/init.h"
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

namespace {
// A clone's parameter values, requires_grad flags and mode, from its source.
void copy_state(const Module& from, Module& to) {
  NamedTensors src = from.named_parameters(), dst = to.named_parameters();
  KILN_CHECK(src.size() == dst.size(), Runtime, from.name().c_str(), "clone: parameter lists differ");
  NoGradGuard ng;
  for (size_t i = 0; i < src.size(); ++i) {
    copy_(dst.items()[i].second, src.items()[i].second);
    set_requires_grad(dst.items()[i].second, requires_grad(src.items()[i].second));
  }
  to.train(from.is_training());
}
}  // namespace

std::shared_ptr<TransformerEncoderLayer> TransformerEncoderLayer::clone() const {
  auto c = std::make_shared<TransformerEncoderLayer>(
      d_model, nhead, dim_feedforward, dropout_p, "relu", layer_norm_eps, batch_first, norm_first,
      bias, self_attn->out_proj->weight().dtype());
  c->set_activation(activation_, activation_name_);
  copy_state(*this, *c);
  return c;
}

// ---- TransformerDecoderLayer --------------------------------------------------------------------
TransformerDecoderLayer::TransformerDecoderLayer(int64_t d, int64_t h, int64_t ff, double p,
                                                 const std::string& activation, double eps,
                                                 bool batch_first, bool norm_first, bool bias,
                                                 Dtype dtype)
    : Module("TransformerDecoderLayer"),
      d_model(d),
      nhead(h),
      dim_feedforward(ff),
      dropout_p(p),
      layer_norm_eps(eps),
      batch_first(batch_first),
      norm_first(norm_first),
      bias(bias) {
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

std::shared_ptr<TransformerDecoderLayer> TransformerDecoderLayer::clone() const {
  auto c = std::make_shared<TransformerDecoderLayer>(
      d_model, nhead, dim_feedforward, dropout_p, "relu", layer_norm_eps, batch_first, norm_first,
      bias, self_attn->out_proj->weight().dtype());
  c->set_activation(activation_, activation_name_);
  copy_state(*this, *c);
  return c;
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

// ---- TransformerEncoder / TransformerDecoder ------------------------------------------------------
namespace {
// The stack's final norm: registered as child "norm"; computed by norm_fn when given, else by the
// LayerNorm / RMSNorm it is.
ActivationFn final_norm(Module& stack, const std::shared_ptr<Module>& norm, ActivationFn norm_fn,
                        const char* who) {
  if (!norm) return norm_fn;
  if (!norm_fn) {
    if (auto ln = std::dynamic_pointer_cast<LayerNorm>(norm)) {
      norm_fn = [ln](const Tensor& x) { return ln->forward(x); };
    } else if (auto rn = std::dynamic_pointer_cast<RMSNorm>(norm)) {
      norm_fn = [rn](const Tensor& x) { return rn->forward(x); };
    } else {
      KILN_FAIL(Type, who, "norm must be a LayerNorm or RMSNorm (or come with norm_fn), got ",
                norm->name());
    }
  }
  stack.register_module("norm", norm);
  return norm_fn;
}
// num_layers clones of `layer` as the stack's children "layers"."0", ...
template <class L>
std::vector<std::shared_ptr<L>> clone_layers(Module& stack, const std::shared_ptr<L>& layer, int64_t n,
                                             const char* who) {
  KILN_CHECK(layer, Value, who, "the layer must be a ", who, "Layer");
  KILN_CHECK(n >= 0, Value, who, "num_layers must be non-negative, got ", n);
  auto list = stack.register_module("layers", std::make_shared<Module>("ModuleList"));
  std::vector<std::shared_ptr<L>> layers;
  for (int64_t i = 0; i < n; ++i) layers.push_back(list->register_module(std::to_string(i), layer->clone()));
  return layers;
}
// torch's _detect_is_causal_mask: an explicit flag wins; else a mask equal to the square causal mask
bool detect_causal(const Tensor& mask, std::optional<bool> is_causal, int64_t sz) {
  if (is_causal) return *is_causal;
  if (!mask.defined() || mask.sizes() != Shape{sz, sz}) return false;
  return equal(mask, generate_square_subsequent_mask(sz, mask.dtype()));
}
}  // namespace

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
  layers_ = clone_layers(*this, layer, n, "TransformerEncoder");
  norm_fn_ = final_norm(*this, norm, std::move(norm_fn_), "TransformerEncoder");
}

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask_in, const Tensor& kpm_in,
                                   std::optional<bool> is_causal) {
  Tensor kpm = F::canonical_mask(kpm_in, "src_key_padding_mask", src.dtype());
  Tensor mask = F::canonical_mask(mask_in, "mask", src.dtype());
  bool causal = is_causal.value_or(false);
  if (!layers_.empty()) {
    bool bf = layers_[0]->self_attn->batch_first;
    causal = detect_causal(mask, is_causal, src.dim() == 2 ? src.size(0) : src.size(bf ? 1 : 0));
  }
  Tensor out = src;
  for (auto& layer : layers_) out = layer->forward(out, mask, kpm, causal);
  return norm_fn_ ? norm_fn_(out) : out;
}

TransformerDecoder::TransformerDecoder(const std::shared_ptr<TransformerDecoderLayer>& layer,
                                       int64_t n, std::shared_ptr<Module> norm_in,
                                       ActivationFn norm_fn)
    : Module("TransformerDecoder"), norm(std::move(norm_in)), num_layers(n) {
  layers_ = clone_layers(*this, layer, n, "TransformerDecoder");
  norm_fn_ = final_norm(*this, norm, std::move(norm_fn), "TransformerDecoder");
}

Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                   const Tensor& memory_mask, const Tensor& tgt_kpm,
                                   const Tensor& memory_kpm, std::optional<bool> tgt_is_causal,
                                   bool memory_is_causal) {
  bool causal = tgt_is_causal.value_or(false);
  if (!layers_.empty()) {  // torch's _get_seq_len, then _detect_is_causal_mask
    bool bf = layers_[0]->self_attn->batch_first;
    causal = detect_causal(tgt_mask, tgt_is_causal, tgt.dim() == 2 ? tgt.size(0) : tgt.size(bf ? 1 : 0));
  }
  Tensor out = tgt;
  for (auto& layer : layers_)
    out = layer->forward(out, memory, tgt_mask, memory_mask, tgt_kpm, memory_kpm, causal, memory_is_causal);
  return norm_fn_ ? norm_fn_(out) : out;
}

// ---- Transformer ----------------------------------------------------------------------------------
Transformer::Transformer(int64_t d, int64_t h, int64_t ne, int64_t nd, int64_t ff, double p,
                         const std::string& activation, double eps, bool batch_first,
                         bool norm_first, bool bias, Dtype dtype)
    : Module("Transformer"), d_model(d), nhead(h), batch_first(batch_first) {
  auto enc_layer = std::make_shared<TransformerEncoderLayer>(d, h, ff, p, activation, eps, batch_first,
                                                             norm_first, bias, dtype);
  auto dec_layer = std::make_shared<TransformerDecoderLayer>(d, h, ff, p, activation, eps, batch_first,
                                                             norm_first, bias, dtype);
  encoder = register_module("encoder", std::make_shared<TransformerEncoder>(
                                           enc_layer, ne, std::make_shared<LayerNorm>(Shape{d}, eps, true, bias, dtype)));
  decoder = register_module("decoder", std::make_shared<TransformerDecoder>(
                                           dec_layer, nd, std::make_shared<LayerNorm>(Shape{d}, eps, true, bias, dtype)));
  NoGradGuard no_grad;
  for (Tensor& w : parameters())
    if (w.dim() > 1) init::xavier_uniform_(w);
}

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask,
                            const Tensor& tgt_mask, const Tensor& memory_mask, const Tensor& src_kpm,
                            const Tensor& tgt_kpm, const Tensor& memory_kpm,
                            std::optional<bool> src_is_causal, std::optional<bool> tgt_is_causal,
                            bool memory_is_causal) {
  const char* op = "Transformer";
  if (src.dim() == 3)
    KILN_CHECK(src.size(batch_first ? 0 : 1) == tgt.size(batch_first ? 0 : 1), Runtime, op,
               "the batch number of src and tgt must be equal");
  KILN_CHECK(src.size(-1) == d_model && tgt.size(-1) == d_model, Runtime, op,
             "the feature number of src and tgt must be equal to d_model");
  Tensor memory = encoder->forward(src, src_mask, src_kpm, src_is_causal);
  return decoder->forward(tgt, memory, tgt_mask, memory_mask, tgt_kpm, memory_kpm, tgt_is_causal,
                          memory_is_causal);
}

}  // namespace kiln::nn
