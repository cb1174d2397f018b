"""MultiheadAttention and the Transformer layers, computed by kiln's C++ modules (kiln/nn/attention.cpp,
kiln/nn/transformer.cpp), with torch.nn's constructor signatures, submodule names and forward arguments.

A Python `activation` callable (a function or a Module) is called from the C++ layer; a Module given as
activation is registered as the submodule `activation`, as torch does."""
from .. import _C
from . import functional as F
from .containers import ModuleList
from .module import Module, _CppModule

_cnn = _C._nn

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerDecoder", "Transformer"]


def _from_cpp(cls, cpp, *args):
    """A Python wrapper of class cls around an existing C++ layer (a child or a clone)."""
    m = cls.__new__(cls)
    Module.__init__(m)
    m._setup(cpp, *args)
    return m


def _activation_arg(activation):
    """What the C++ layer takes: "relu" / "gelu" (also for F.relu / F.gelu, computed in C++), or a callable."""
    if isinstance(activation, str):
        return activation
    if activation is F.relu:
        return "relu"
    if activation is F.gelu:
        return "gelu"
    return activation


def _generate_square_subsequent_mask(sz, device=None, dtype=None):
    """(sz, sz) float mask: -inf above the diagonal, 0 elsewhere (torch's causal mask)."""
    return _C.generate_square_subsequent_mask(sz, dtype)


class MultiheadAttention(_CppModule):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        self._setup(_cnn.MultiheadAttention(embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn, kdim,
                                            vdim, batch_first, dtype))

    def _setup(self, cpp):
        self._bind(cpp)
        for name in ("embed_dim", "kdim", "vdim", "num_heads", "head_dim", "dropout", "batch_first",
                     "add_zero_attn", "_qkv_same_embed_dim"):
            object.__setattr__(self, name, getattr(cpp, name))

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        return self._cpp.forward(query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights,
                                 is_causal)

    def _reset_parameters(self):
        self._cpp.reset_parameters()


class _TransformerLayer(_CppModule):
    _attn = ("self_attn",)

    def _setup(self, cpp, activation):
        self._bind(cpp)
        for name in self._attn:
            self._modules[name] = _from_cpp(MultiheadAttention, self._modules[name]._cpp)
        self.norm_first = cpp.norm_first
        if isinstance(activation, str):
            activation = F.relu if activation == "relu" else F.gelu
        self.activation = activation  # a Module becomes the submodule `activation` (after dropout2), as torch
        self.activation_relu_or_gelu = 1 if activation is F.relu else 2 if activation is F.gelu else 0


class TransformerEncoderLayer(_TransformerLayer):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        cpp = _cnn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, _activation_arg(activation),
                                           layer_norm_eps, batch_first, norm_first, bias, dtype)
        self._setup(cpp, activation)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        return self._cpp.forward(src, src_mask, src_key_padding_mask, is_causal)

    def __deepcopy__(self, memo):
        return _from_cpp(TransformerEncoderLayer, self._cpp.clone(), self.activation)


class TransformerDecoderLayer(_TransformerLayer):
    _attn = ("self_attn", "multihead_attn")

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        cpp = _cnn.TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, _activation_arg(activation),
                                           layer_norm_eps, batch_first, norm_first, bias, dtype)
        self._setup(cpp, activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        return self._cpp.forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                                 tgt_is_causal, memory_is_causal)


def _norm_args(norm):
    """The C++ stack takes a LayerNorm / RMSNorm computed in C++, or any module called from C++."""
    if norm is None:
        return None, None
    inner = norm.__dict__.get("_cpp")
    if inner is not None and type(inner).__name__ in ("LayerNorm", "RMSNorm"):
        return inner, None
    return None, norm


class TransformerEncoder(_CppModule):
    """num_layers copies of encoder_layer (a kiln TransformerEncoderLayer) and an optional final norm.
    enable_nested_tensor is accepted and ignored: kiln has no nested tensors, so positions masked by
    src_key_padding_mask are computed like the others (torch's nested fast path zeroes them in eval)."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        if not isinstance(encoder_layer, TransformerEncoderLayer):
            raise TypeError(f"TransformerEncoder: encoder_layer must be a kiln.nn.TransformerEncoderLayer, got "
                            f"{type(encoder_layer).__name__}")
        cpp_norm, norm_fn = _norm_args(norm)
        self._bind(_cnn.TransformerEncoder(encoder_layer._cpp, num_layers, cpp_norm, enable_nested_tensor,
                                           mask_check, norm_fn))
        self._modules["layers"] = ModuleList(
            [_from_cpp(TransformerEncoderLayer, c, encoder_layer.activation) for c in self._cpp._layers()])
        if norm is not None:
            self._modules["norm"] = norm
        else:
            self.norm = None
        self.num_layers, self.enable_nested_tensor, self.mask_check = num_layers, enable_nested_tensor, mask_check
        self.use_nested_tensor = False

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        return self._cpp.forward(src, mask, src_key_padding_mask, is_causal)


class TransformerDecoder(_CppModule):
    """num_layers copies of decoder_layer (a kiln TransformerDecoderLayer) and an optional final norm."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        if not isinstance(decoder_layer, TransformerDecoderLayer):
            raise TypeError(f"TransformerDecoder: decoder_layer must be a kiln.nn.TransformerDecoderLayer, got "
                            f"{type(decoder_layer).__name__}")
        cpp_norm, norm_fn = _norm_args(norm)
        self._bind(_cnn.TransformerDecoder(decoder_layer._cpp, num_layers, cpp_norm, norm_fn))
        self._modules["layers"] = ModuleList(
            [_from_cpp(TransformerDecoderLayer, c, decoder_layer.activation) for c in self._cpp._layers()])
        if norm is not None:
            self._modules["norm"] = norm
        else:
            self.norm = None
        self.num_layers = num_layers

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        return self._cpp.forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                                 tgt_is_causal, memory_is_causal)


class Transformer(Module):
    """torch.nn.Transformer: a TransformerEncoder and a TransformerDecoder (each with a final LayerNorm,
    or custom_encoder / custom_decoder); parameters of more than one dim xavier-uniform initialised. The
    layers compute in C++ (kiln::nn::Transformer is the same model for C++ users)."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation=F.relu, custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        from .layers import LayerNorm
        from .init import xavier_uniform_
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, bias, dtype=dtype)
            self.encoder = TransformerEncoder(layer, num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, bias, dtype=dtype)
            self.decoder = TransformerDecoder(layer, num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        for p in self.parameters():
            if p.dim() > 1:
                xavier_uniform_(p)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        if src.dim() == 3 and src.size(0 if self.batch_first else 1) != tgt.size(0 if self.batch_first else 1):
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        return _generate_square_subsequent_mask(sz, device, dtype)
