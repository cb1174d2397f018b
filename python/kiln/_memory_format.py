"""torch.memory_format for kiln: contiguous_format, preserve_format, channels_last, channels_last_3d,
and the memory_format arguments of Tensor.to / contiguous / clone / is_contiguous and Module.to. The
layouts are C++'s (kiln/ops/memory_format.cpp); kiln's ops take any layout and return contiguous
results."""
from . import _C


class memory_format:
    def __init__(self, name, code):
        self._name, self._code = name, code

    def __repr__(self):
        return f"kiln.{self._name}"

    def __reduce__(self):
        return self._name


contiguous_format = memory_format("contiguous_format", 0)
preserve_format = memory_format("preserve_format", 1)
channels_last = memory_format("channels_last", 2)
channels_last_3d = memory_format("channels_last_3d", 3)


def _code(fmt, what):
    if not isinstance(fmt, memory_format):
        raise TypeError(f"{what}(): argument 'memory_format' must be torch.memory_format, not {type(fmt).__name__}")
    return fmt._code


def _install(Tensor):
    plain_contiguous, plain_is_contiguous, plain_clone, plain_to = (
        Tensor.contiguous, Tensor.is_contiguous, Tensor.clone, Tensor.to)

    def contiguous(self, memory_format=contiguous_format):
        if memory_format is contiguous_format:
            return plain_contiguous(self)
        return _C._to_format(self, _code(memory_format, "contiguous"))

    def is_contiguous(self, memory_format=contiguous_format):
        if memory_format is contiguous_format:
            return plain_is_contiguous(self)
        return _C._is_contiguous_format(self, _code(memory_format, "is_contiguous"))

    def clone(self, *, memory_format=preserve_format):
        return _C._clone_format(self, _code(memory_format, "clone"))

    def to(self, *args, memory_format=preserve_format, **kwargs):
        r = plain_to(self, *args, **kwargs)
        if memory_format is preserve_format:
            return r
        return _C._to_memory_format(r, _code(memory_format, "to"))

    Tensor.contiguous, Tensor.is_contiguous, Tensor.clone, Tensor.to = contiguous, is_contiguous, clone, to


def clone(input, *, memory_format=preserve_format):
    return _C._clone_format(input, _code(memory_format, "clone"))
