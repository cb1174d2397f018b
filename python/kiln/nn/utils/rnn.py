"""kiln.nn.utils.rnn (torch.nn.utils.rnn): pad_sequence. PackedSequence and pack/unpack are not in kiln yet."""
import collections.abc

from ... import _C

__all__ = ["pad_sequence"]


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """(T_max, B, *) — or (B, T_max, *) — filled with padding_value and the sequences (C++:
    kiln::nn::utils::rnn::pad_sequence)."""
    if isinstance(sequences, _C.Tensor):
        sequences = sequences.unbind(0)
    if not isinstance(sequences, collections.abc.Iterable):
        raise RuntimeError("pad_sequence: Expected iterable for input sequences, but got arg of type: "
                           f"{type(sequences)}")
    return _C.pad_sequence(list(sequences), batch_first, float(padding_value), padding_side)
