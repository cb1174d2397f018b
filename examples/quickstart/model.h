// The quickstart's character-level transformer in C++ (examples/quickstart/quickstart.cpp trains it;
// tests/cpp/test_export.cpp exports it). Sizes are read as SymInts (sym_size) so that an export keeps
// the batch and the sequence length dynamic.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/attention/sdpa.h"
#include "kiln/kiln.h"

namespace quickstart {

namespace nn = kiln::nn;
using kiln::Tensor;

struct Block : nn::Module {
  int64_t heads;
  std::shared_ptr<nn::LayerNorm> ln1, ln2;
  std::shared_ptr<nn::Linear> qkv, proj, fc, out;

  Block(int64_t d, int64_t h) : Module("Block"), heads(h) {
    ln1 = register_module("ln1", std::make_shared<nn::LayerNorm>(kiln::Shape{d}));
    qkv = register_module("qkv", std::make_shared<nn::Linear>(d, 3 * d));
    proj = register_module("proj", std::make_shared<nn::Linear>(d, d));
    ln2 = register_module("ln2", std::make_shared<nn::LayerNorm>(kiln::Shape{d}));
    fc = register_module("fc", std::make_shared<nn::Linear>(d, 4 * d));
    out = register_module("out", std::make_shared<nn::Linear>(4 * d, d));
  }

  Tensor forward(const Tensor& x) {
    // the batch and sequence sizes as SymInts: symbolic when the model is exported, so neither is pinned
    const kiln::SymInt B = x.sym_size(0), T = x.sym_size(1);
    const int64_t C = x.size(2);
    kiln::TensorList qkv_ = kiln::split(qkv->forward(ln1->forward(x)), C, 2);
    for (Tensor& t : qkv_) t = kiln::view_symint(t, {B, T, heads, C / heads}).transpose(1, 2);
    Tensor y = kiln::scaled_dot_product_attention(qkv_[0], qkv_[1], qkv_[2], {}, 0.0, /*is_causal=*/true);
    y = kiln::reshape_symint(y.transpose(1, 2), {B, T, C});
    Tensor h = x + proj->forward(y);
    return h + out->forward(kiln::gelu(fc->forward(ln2->forward(h))));
  }
};

struct CharTransformer : nn::Module {
  int64_t context;
  std::shared_ptr<nn::Embedding> tok, pos;
  std::vector<std::shared_ptr<Block>> blocks;
  std::shared_ptr<nn::LayerNorm> ln_f;

  CharTransformer(int64_t vocab, int64_t ctx, int64_t d = 192, int64_t layers = 4, int64_t heads = 6)
      : Module("CharTransformer"), context(ctx) {
    tok = register_module("tok", std::make_shared<nn::Embedding>(vocab, d));
    pos = register_module("pos", std::make_shared<nn::Embedding>(ctx, d));
    auto list = std::make_shared<nn::Module>("ModuleList");
    for (int64_t i = 0; i < layers; ++i)
      blocks.push_back(list->register_module(std::to_string(i), std::make_shared<Block>(d, heads)));
    register_module("blocks", list);
    ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(kiln::Shape{d}));
    for (auto& [name, p] : named_parameters()) {  // GPT-2 style initialisation
      if (p.dim() == 2) nn::init::normal_(p, 0.0, 0.02);
      else if (name.size() > 4 && name.substr(name.size() - 4) == "bias") nn::init::zeros_(p);
    }
  }

  Tensor forward(const Tensor& idx) {
    Tensor x = tok->forward(idx) + pos->forward(kiln::arange_symint(idx.sym_size(1)));
    for (auto& b : blocks) x = b->forward(x);
    return kiln::F::linear(ln_f->forward(x), tok->weight());  // tied output head
  }
};

}  // namespace quickstart
