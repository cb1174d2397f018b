"""safetensors checkpoints (the format of huggingface/safetensors), written and read by kiln's C++ core.

save_file(tensors, path, metadata=None)    write a dict of str -> Tensor (and str -> str metadata)
load_file(path) -> dict                    tensors are zero-copy views into a private mapping of the file
save(tensors, metadata=None) -> bytes      the same format in memory
load(data) -> dict                         from bytes (or any buffer); tensors own copies of their data
safe_open(path)                            metadata()/keys()/get_tensor() access, as safetensors.safe_open
"""
import errno
import os

from . import _C

__all__ = ["save_file", "load_file", "save", "load", "load_metadata", "safe_open", "save_model", "load_model"]


def _path(path):
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    return path


def _load_file(path):
    path = _path(path)
    if not os.path.exists(path):  # torch's loader raises FileNotFoundError here; keep the type
        raise FileNotFoundError(errno.ENOENT, f"[safetensors] no such file: '{path}'", path)
    return _C._safetensors_load_file(path)


def save_file(tensors, filename, metadata=None):
    """Writes `tensors` (a mapping of str to Tensor) to `filename` in the safetensors format.

    Non-contiguous tensors are written contiguously; tensors sharing memory are each written in full.
    The file is written beside the target and renamed over it, so tensors loaded from the old file
    stay valid."""
    _C._safetensors_save_file(dict(tensors), _path(filename), None if metadata is None else dict(metadata))


def load_file(filename, device="cpu"):
    """Reads a safetensors file into a dict of str -> Tensor (copy-on-write views of the mapped file)."""
    if str(device) != "cpu":
        raise ValueError(f"[safetensors] only device='cpu' is supported, got {device!r}")
    return _load_file(filename)[0]


def load_metadata(filename):
    """The file's __metadata__ as a dict of str -> str (empty when it has none)."""
    return _load_file(filename)[1]


def save(tensors, metadata=None):
    """The safetensors encoding of `tensors` as bytes."""
    return _C._safetensors_save(dict(tensors), None if metadata is None else dict(metadata))


def load(data):
    """Reads tensors from safetensors bytes (bytes, bytearray or any buffer)."""
    if not isinstance(data, bytes):
        data = bytes(data)
    return _C._safetensors_load(data)[0]


class safe_open:  # noqa: N801 (safetensors' name)
    """`with kiln.io.safe_open(path) as f: f.keys(), f.metadata(), f.get_tensor(name)`.

    The file is mapped once; tensors are views into the mapping (nothing is read until used)."""

    def __init__(self, filename, framework="kiln", device="cpu"):
        if str(device) != "cpu":
            raise ValueError(f"[safetensors] only device='cpu' is supported, got {device!r}")
        self._tensors, self._metadata = _load_file(filename)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._tensors = {}
        return False

    def keys(self):
        return list(self._tensors)

    def metadata(self):
        return dict(self._metadata) if self._metadata else None

    def get_tensor(self, name):
        try:
            return self._tensors[name]
        except KeyError:
            raise KeyError(f"[safetensors] no tensor named '{name}'") from None


def save_model(model, filename, metadata=None):
    """Writes model.state_dict() to a safetensors file (safetensors.torch.save_model's role). Tensors
    that share memory (tied weights) are written once per name, as kiln's save_file does."""
    save_file(dict(model.state_dict()), filename, metadata)


def load_model(model, filename, strict=True):
    """Loads a safetensors file into model (load_state_dict); returns (missing, unexpected) keys."""
    result = model.load_state_dict(load_file(filename), strict=strict)
    return result.missing_keys, result.unexpected_keys
