// Transformer layers (torch.nn.TransformerEncoderLayer, TransformerDecoderLayer,
// TransformerEncoder) composed of kiln's MultiheadAttention, Linear, LayerNorm and Dropout modules:
// torch 2.13's arguments, submodule names and order, mask handling and post-/pre-norm (norm_first)
// blocks.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/nn/attention.h"
#include "kiln/nn/layers.h"

namespace kiln::nn {

using ActivationFn = std::function<Tensor(const Tensor&)>;

// torch's Transformer.generate_square_subsequent_mask: (sz, sz), -inf above the diagonal, 0
// elsewhere.
Tensor generate_square_subsequent_mask(int64_t sz, Dtype dtype = Dtype::Undefined);

// "relu" or "gelu" (RuntimeError otherwise, as torch).
ActivationFn activation_by_name(const std::string& name);

// Submodules (torch's names and order): self_attn, linear1, dropout, linear2, norm1, norm2,
// dropout1, dropout2. Post-norm: x = norm1(x + sa(x)); x = norm2(x + ff(x)); norm_first:
// x = x + sa(norm1(x)); x = x + ff(norm2(x)). The attention runs with need_weights=False (fused
// SDPA).
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048,
                          double dropout = 0.1, const std::string& activation = "relu",
                          double layer_norm_eps = 1e-5, bool batch_first = false,
                          bool norm_first = false, bool bias = true,
                          Dtype dtype = Dtype::Undefined);
  // Replaces the activation by any function (torch accepts a callable); name "" = custom.
  void set_activation(ActivationFn fn, std::string name = "");
  const std::string& activation_name() const { return activation_name_; }
  Tensor forward(const Tensor& src, const Tensor& src_mask = {},
                 const Tensor& src_key_padding_mask = {}, bool is_causal = false);
  // A deep copy: same configuration, parameter values, requires_grad flags, mode and activation.
  std::shared_ptr<TransformerEncoderLayer> clone() const;

  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;
  std::shared_ptr<LayerNorm> norm1, norm2;
  int64_t d_model, nhead, dim_feedforward;
  double dropout_p, layer_norm_eps;
  bool batch_first, norm_first, bias;

 private:
  Tensor sa_block(const Tensor& x, const Tensor& mask, const Tensor& kpm, bool is_causal);
  Tensor ff_block(const Tensor& x);
  ActivationFn activation_;
  std::string activation_name_;
};

// Submodules: self_attn, multihead_attn, linear1, dropout, linear2, norm1, norm2, norm3, dropout1,
// dropout2, dropout3. Self-attention block, then attention over `memory`, then the feed-forward
// block.
class TransformerDecoderLayer : public Module {
 public:
  TransformerDecoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048,
                          double dropout = 0.1, const std::string& activation = "relu",
                          double layer_norm_eps = 1e-5, bool batch_first = false,
                          bool norm_first = false, bool bias = true,
                          Dtype dtype = Dtype::Undefined);
  void set_activation(ActivationFn fn, std::string name = "");
  const std::string& activation_name() const { return activation_name_; }
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {},
                 const Tensor& memory_mask = {}, const Tensor& tgt_key_padding_mask = {},
                 const Tensor& memory_key_padding_mask = {}, bool tgt_is_causal = false,
                 bool memory_is_causal = false);

  // A deep copy: same configuration, parameter values, requires_grad flags, mode and activation.
  std::shared_ptr<TransformerDecoderLayer> clone() const;

  std::shared_ptr<MultiheadAttention> self_attn, multihead_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2, dropout3;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
  int64_t d_model, nhead, dim_feedforward;
  double dropout_p, layer_norm_eps;
  bool batch_first, norm_first, bias;

 private:
  ActivationFn activation_;
  std::string activation_name_;
};

// num_layers deep copies of encoder_layer (child "layers": "0", "1", ...) and an optional final
// norm (child "norm"; a LayerNorm or RMSNorm, or any module with norm_fn as its forward).
// enable_nested_tensor and mask_check are accepted for torch compatibility (kiln has no nested
// tensors, so padded positions are computed like the others).
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const std::shared_ptr<TransformerEncoderLayer>& encoder_layer,
                     int64_t num_layers, std::shared_ptr<Module> norm = nullptr,
                     bool enable_nested_tensor = true, bool mask_check = true,
                     ActivationFn norm_fn = {});
  // is_causal nullopt: detected by comparing mask with the square causal mask (torch's rule).
  Tensor forward(const Tensor& src, const Tensor& mask = {},
                 const Tensor& src_key_padding_mask = {},
                 std::optional<bool> is_causal = std::nullopt);
  const std::vector<std::shared_ptr<TransformerEncoderLayer>>& layers() const { return layers_; }
  std::shared_ptr<Module> norm;
  int64_t num_layers;
  bool enable_nested_tensor, mask_check;

 private:
  std::vector<std::shared_ptr<TransformerEncoderLayer>> layers_;
  ActivationFn norm_fn_;
};

// num_layers deep copies of decoder_layer (children "layers"."0", ...) and an optional final norm,
// as TransformerEncoder.
class TransformerDecoder : public Module {
 public:
  TransformerDecoder(const std::shared_ptr<TransformerDecoderLayer>& decoder_layer,
                     int64_t num_layers, std::shared_ptr<Module> norm = nullptr,
                     ActivationFn norm_fn = {});
  // tgt_is_causal nullopt: detected from tgt_mask (torch's _detect_is_causal_mask).
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {},
                 const Tensor& memory_mask = {}, const Tensor& tgt_key_padding_mask = {},
                 const Tensor& memory_key_padding_mask = {},
                 std::optional<bool> tgt_is_causal = std::nullopt, bool memory_is_causal = false);
  const std::vector<std::shared_ptr<TransformerDecoderLayer>>& layers() const { return layers_; }
  std::shared_ptr<Module> norm;
  int64_t num_layers;

 private:
  std::vector<std::shared_ptr<TransformerDecoderLayer>> layers_;
  ActivationFn norm_fn_;
};

// torch.nn.Transformer: a TransformerEncoder and a TransformerDecoder, each with a final LayerNorm;
// parameters of more than one dim are xavier-uniform initialised (torch's _reset_parameters).
class Transformer : public Module {
 public:
  Transformer(int64_t d_model = 512, int64_t nhead = 8, int64_t num_encoder_layers = 6,
              int64_t num_decoder_layers = 6, int64_t dim_feedforward = 2048, double dropout = 0.1,
              const std::string& activation = "relu", double layer_norm_eps = 1e-5,
              bool batch_first = false, bool norm_first = false, bool bias = true,
              Dtype dtype = Dtype::Undefined);
  Tensor forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask = {},
                 const Tensor& tgt_mask = {}, const Tensor& memory_mask = {},
                 const Tensor& src_key_padding_mask = {}, const Tensor& tgt_key_padding_mask = {},
                 const Tensor& memory_key_padding_mask = {},
                 std::optional<bool> src_is_causal = std::nullopt,
                 std::optional<bool> tgt_is_causal = std::nullopt, bool memory_is_causal = false);
  static Tensor generate_square_subsequent_mask(int64_t sz, Dtype dtype = Dtype::Undefined) {
    return nn::generate_square_subsequent_mask(sz, dtype);
  }
  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<TransformerDecoder> decoder;
  int64_t d_model, nhead;
  bool batch_first;
};

}  // namespace kiln::nn
