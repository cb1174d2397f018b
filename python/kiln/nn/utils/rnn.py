"""kiln.nn.utils.rnn (torch.nn.utils.rnn): pad_sequence, PackedSequence and packing / unpacking. The
work is C++ (kiln::nn::utils::rnn); RNN, LSTM and GRU take a PackedSequence in place of a padded input."""
import collections
import collections.abc
import warnings

from ... import _C

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "unpad_sequence", "pack_sequence", "unpack_sequence"]

_PackedSequenceBase = collections.namedtuple("PackedSequence",
                                             ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


class PackedSequence(_PackedSequenceBase):
    """data: the time-major rows of the sequences (sorted by decreasing length); batch_sizes[t]: how many
    sequences run at step t; sorted_indices / unsorted_indices: the batch permutation (None if sorted)."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is not None:
            if batch_sizes.device.type != "cpu":
                raise ValueError("batch_sizes should always be on CPU. Instances of PackedSequence should never be "
                                 "created manually. They should be instantiated by functions like "
                                 "pack_sequence and pack_padded_sequences in nn.utils.rnn. "
                                 "https://pytorch.org/docs/stable/nn.html#torch.nn.utils.rnn.pack_sequence")
            return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)
        if not isinstance(data, (list, tuple)) or len(data) != 2:
            raise AssertionError("Expected data to be a list or tuple of length 2")
        return super().__new__(cls, data[0], data[1], sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def _with_data(self, data):
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def cpu(self):
        return self

    def double(self):
        return self.to(dtype=_C.float64)

    def float(self):
        return self.to(dtype=_C.float32)

    def half(self):
        return self.to(dtype=_C.float16)

    def long(self):
        return self.to(dtype=_C.int64)

    def int(self):
        return self.to(dtype=_C.int32)

    def short(self):
        return self.to(dtype=_C.int16)

    def char(self):
        return self.to(dtype=_C.int8)

    def byte(self):
        return self.to(dtype=_C.uint8)

    @property
    def is_cuda(self):
        return False

    def is_pinned(self):
        return False


def invert_permutation(permutation):
    if permutation is None:
        return None
    return _C._invert_permutation(permutation)


def _as_lengths(lengths):
    if isinstance(lengths, _C.Tensor):
        return lengths.to(_C.int64)
    return _C.tensor(list(lengths), dtype=_C.int64)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a padded batch ((T, B, *), or (B, T, *) with batch_first) of sequences of the given lengths."""
    data, batch_sizes, sorted_indices, unsorted_indices = _C._pack_padded_sequence(
        input, _as_lengths(lengths), batch_first, enforce_sorted)
    return PackedSequence(data, batch_sizes, sorted_indices, unsorted_indices)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse of pack_padded_sequence: (padded, lengths)."""
    return _C._pad_packed_sequence(sequence.data, sequence.batch_sizes, sequence.sorted_indices,
                                   sequence.unsorted_indices, batch_first, float(padding_value), total_length)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """(T_max, B, *) — or (B, T_max, *) — filled with padding_value and the sequences (C++:
    kiln::nn::utils::rnn::pad_sequence)."""
    if isinstance(sequences, _C.Tensor):
        sequences = sequences.unbind(0)
    if not isinstance(sequences, collections.abc.Iterable):
        raise RuntimeError("pad_sequence: Expected iterable for input sequences, but got arg of type: "
                           f"{type(sequences)}")
    return _C.pad_sequence(list(sequences), batch_first, float(padding_value), padding_side)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[:int(n)] for seq, n in zip(padded_sequences, lengths)]


def pack_sequence(sequences, enforce_sorted=True):
    lengths = _C.tensor([v.size(0) for v in sequences], dtype=_C.int64)
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
