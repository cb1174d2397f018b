"""Recurrent layers (RNN, LSTM, GRU and their cells), computed by kiln's C++ modules (kiln/nn/rnn.cpp)
with torch.nn's constructor signatures, parameter names and forward signatures."""
import numbers
import warnings

from .. import _C
from .module import _CppModule

_cnn = _C._nn

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


class RNNBase(_CppModule):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of "
                             "an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero "
                          "dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=2)
        for name, value, kind in (("bias", bias, bool), ("batch_first", batch_first, bool),
                                  ("input_size", input_size, int), ("hidden_size", hidden_size, int)):
            if not isinstance(value, kind):
                raise TypeError(f"{name} should be of type {kind.__name__}, got: {type(value).__name__}")
        self._bind(_cnn.RNNBase(mode, input_size, hidden_size, num_layers, bias, batch_first,
                                float(dropout), bool(bidirectional), proj_size, dtype))
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        self._all_weights = self._cpp._all_weights()
        self._flat_weights_names = [n for names in self._all_weights for n in names]

    @property
    def all_weights(self):
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    @property
    def _flat_weights(self):
        return [getattr(self, name) for name in self._flat_weights_names]

    def flatten_parameters(self):
        """A no-op on CPU (as in torch)."""

    def reset_parameters(self):
        self._cpp.reset_parameters()

    def _run(self, input, hx, cx):
        from .utils.rnn import PackedSequence
        if not isinstance(input, PackedSequence):
            return self._cpp.run(input, hx, cx)
        perm, back = input.sorted_indices, input.unsorted_indices
        permute = (lambda t, idx: t if t is None or idx is None else t.index_select(1, idx))  # noqa: E731
        data, h, c = self._cpp.run_packed(input.data, input.batch_sizes, permute(hx, perm), permute(cx, perm))
        return input._with_data(data), permute(h, back), permute(c, back)

    def forward(self, input, hx=None):
        out, h, _ = self._run(input, hx, None)
        return out, h


class RNN(RNNBase):
    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input, hx=None):
        out, h, c = self._run(input, None, None) if hx is None else self._run(input, hx[0], hx[1])
        return out, (h, c)


class GRU(RNNBase):
    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


class RNNCellBase(_CppModule):
    def _init(self, cpp, input_size, hidden_size, bias):
        self._bind(cpp)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias

    def reset_parameters(self):
        self._cpp.reset_parameters()

    def forward(self, input, hx=None):
        return self._cpp.forward(input, hx)


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__()
        self._init(_cnn.RNNCell(input_size, hidden_size, bias, nonlinearity, dtype), input_size,
                   hidden_size, bias)
        self.nonlinearity = nonlinearity


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        self._init(_cnn.LSTMCell(input_size, hidden_size, bias, dtype), input_size, hidden_size, bias)


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        self._init(_cnn.GRUCell(input_size, hidden_size, bias, dtype), input_size, hidden_size, bias)
