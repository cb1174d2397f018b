"""nn.TransformerDecoder and nn.Transformer vs torch with the same weights: outputs and gradients for
post-norm and pre-norm, batch_first both ways, causal masks given or detected, key padding masks,
unbatched inputs, custom encoder/decoder, reprs and parameter names; the C++ clone of a decoder layer
keeps weights and activation."""
import pytest
import torch

import kiln
from helpers import assert_same, to_kiln


def load(km, tm):
    km.load_state_dict({k: to_kiln(v.detach()) for k, v in tm.state_dict().items()})


def rand(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_matches_torch(norm_first, batch_first):
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=16, dropout=0.0,
              batch_first=batch_first, norm_first=norm_first)
    torch.manual_seed(0)
    tm = torch.nn.Transformer(**kw).double()
    km = kiln.nn.Transformer(**kw, dtype=kiln.float64)
    assert [n for n, _ in km.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert repr(km) == repr(tm)
    load(km, tm)
    S, T, B = 5, 4, 3
    src, tgt = rand(B, S, 8, seed=1), rand(B, T, 8, seed=2)
    if not batch_first:
        src, tgt = src.transpose(0, 1).contiguous(), tgt.transpose(0, 1).contiguous()
    tgt_mask = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
    kpm = torch.tensor([[False] * S, [False] * (S - 2) + [True] * 2, [False] * S])
    out = {}
    for lib, m in ((torch, tm), (kiln, km)):
        conv = (lambda t: t) if lib is torch else to_kiln  # noqa: E731
        s, t = conv(src).clone().requires_grad_(), conv(tgt).clone().requires_grad_()
        y = m(s, t, tgt_mask=conv(tgt_mask), src_key_padding_mask=conv(kpm), memory_key_padding_mask=conv(kpm))
        y.square().sum().backward()
        out[lib] = (y.detach(), s.grad, t.grad, dict(m.named_parameters())["decoder.layers.1.linear1.weight"].grad)
    for k, t in zip(out[kiln], out[torch]):
        assert_same(k, t, rtol=1e-9, atol=1e-9)


def test_decoder_alone_and_unbatched():
    torch.manual_seed(1)
    tl = torch.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, activation="gelu").double()
    tm = torch.nn.TransformerDecoder(tl, 3, norm=torch.nn.LayerNorm(8).double())
    kl = kiln.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, activation="gelu", dtype=kiln.float64)
    km = kiln.nn.TransformerDecoder(kl, 3, norm=kiln.nn.LayerNorm(8, dtype=kiln.float64))
    assert repr(km) == repr(tm)
    load(km, tm)
    tgt, mem = rand(4, 8, seed=1), rand(6, 8, seed=2)  # unbatched
    mask = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64)
    for kw in (dict(), dict(tgt_mask=mask), dict(tgt_mask=mask, tgt_is_causal=True)):
        kkw = {k: (to_kiln(v) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
        assert_same(km(to_kiln(tgt), to_kiln(mem), **kkw), tm(tgt, mem, **kw).detach(), rtol=1e-9, atol=1e-9)


def test_custom_parts_and_errors():
    enc = kiln.nn.TransformerEncoder(kiln.nn.TransformerEncoderLayer(8, 2, 16), 1)
    m = kiln.nn.Transformer(d_model=8, nhead=2, custom_encoder=enc, num_decoder_layers=1, dim_feedforward=16)
    assert m.encoder is enc and len(m.decoder.layers) == 1
    for lib in (torch, kiln):
        t = lib.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16)
        with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
            t(lib.zeros(5, 2, 8), lib.zeros(4, 3, 8))
        with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal to d_model"):
            t(lib.zeros(5, 2, 8), lib.zeros(4, 2, 6))
    mask = kiln.nn.Transformer.generate_square_subsequent_mask(3)
    assert mask.tolist() == torch.nn.Transformer.generate_square_subsequent_mask(3).tolist()


def test_init_is_xavier():
    kiln.manual_seed(0)
    m = kiln.nn.Transformer(d_model=64, nhead=4, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=256)
    w = m.encoder.layers[0].linear1.weight
    bound = (6 / (64 + 256)) ** 0.5
    assert float(w.abs().max()) <= bound and float(w.abs().max()) > 0.9 * bound
