"""kiln.save / kiln.load: torch's checkpoint format (torch.save's zip), read safely.

The file is torch's: a zip of stored members `archive/data.pkl` (a protocol-2 pickle whose tensors are
`torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)` calls over
persistent storage ids), one `archive/data/<key>` member per storage (its bytes, little-endian, 64-byte
aligned), `archive/byteorder` and `archive/version`. So torch.load reads what kiln.save writes (with
torch's default weights_only=True), and kiln.load reads torch.save's files.

kiln.load defaults to weights_only=True, as torch 2.6+: the unpickler accepts only tensors, storages,
parameters, OrderedDict, Counter, and Python's containers and scalars; any other global (os.system, a class)
raises pickle.UnpicklingError before anything runs. weights_only=False unpickles anything Python can
(only for files you trust).
"""
import collections
import io
import os
import pickle
import struct
import zipfile
import zlib

from . import _C
from ._C import Tensor

__all__ = ["save", "load"]


# ---- pickle and copy.deepcopy of tensors (Tensor.__reduce_ex__ / __deepcopy__) ----------------------------
def _from_pickle(data, dtype, shape, requires_grad, param=False):
    t = _C._tensor_from_storage_bytes(data, getattr(_C, dtype)).reshape(tuple(shape))
    if param:
        from .nn.parameter import Parameter
        return Parameter(t, requires_grad=requires_grad)
    return t.requires_grad_(True) if requires_grad else t


def _tensor_reduce_ex(self, proto):
    from .nn.parameter import Parameter
    if self.device.type != "cpu":
        raise RuntimeError(f"only CPU tensors can be pickled (got one on {self.device})")
    if self.requires_grad and not self.is_leaf:
        raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                           "protocol at the moment.  If you were attempting to deepcopy a module, this may be "
                           "because of a torch.nn.utils.weight_norm usage, see "
                           "https://github.com/pytorch/pytorch/pull/103001")
    c = self.detach().contiguous()
    return (_from_pickle, (_C._storage_bytes(c), str(self.dtype).split(".")[-1], tuple(self.shape),
                           bool(self.requires_grad), isinstance(self, Parameter)))


def _tensor_deepcopy(self, memo):
    if id(self) in memo:
        return memo[id(self)]
    if self.requires_grad and not self.is_leaf:
        _tensor_reduce_ex(self, 2)  # raises torch's error
    from .nn.parameter import Parameter
    data = self.detach().clone()
    new = Parameter(data, requires_grad=self.requires_grad) if isinstance(self, Parameter) else \
        (data.requires_grad_(True) if self.requires_grad else data)
    if self.grad is not None:
        new.grad = _tensor_deepcopy(self.grad, memo)
    memo[id(self)] = new
    return new


Tensor.__reduce_ex__ = _tensor_reduce_ex
Tensor.__deepcopy__ = _tensor_deepcopy

_STORAGE_DTYPE = {  # torch's legacy storage classes
    "DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
    "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16", "CharStorage": "int8",
    "ByteStorage": "uint8", "BoolStorage": "bool", "ComplexDoubleStorage": "complex128",
    "ComplexFloatStorage": "complex64",
}
_DTYPE_STORAGE = {v: k for k, v in _STORAGE_DTYPE.items()}
# dtypes without a legacy storage class: saved as UntypedStorage + the dtype (torch's _rebuild_tensor_v3)
_V3_DTYPES = {"uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2"}


# ---- writing ------------------------------------------------------------------------------------------
class _Storages:
    """Storages met while pickling, by identity of their data, each saved once."""

    def __init__(self):
        self.keys = {}  # (data_ptr, nbytes) -> key
        self.data = []  # (key, tensor viewing the whole storage as bytes)


class _Pickler(pickle._Pickler):
    """Python's pickler, with kiln tensors written as torch writes its tensors (the GLOBAL opcodes are
    written directly: torch need not be importable)."""

    def __init__(self, f, storages, weights_only_types):
        super().__init__(f, protocol=2)
        self.storages = storages

    def _global(self, module, name):
        self.write(pickle.GLOBAL + f"{module}\n{name}\n".encode())

    def _ordered_dict(self):
        self._global("collections", "OrderedDict")
        self.write(pickle.EMPTY_TUPLE + pickle.REDUCE)

    def save(self, obj, save_persistent_id=True):
        if isinstance(obj, Tensor):
            return self._save_tensor(obj)
        return super().save(obj, save_persistent_id)

    def _save_tensor(self, t):
        from .nn.parameter import Parameter
        if t.device.type != "cpu":
            raise RuntimeError(f"kiln.save: only CPU tensors can be saved (got one on {t.device})")
        dt = str(t.dtype).split(".")[-1]
        param = isinstance(t, Parameter)
        if param:
            self._global("torch._utils", "_rebuild_parameter")
            self.write(pickle.MARK)
        v3 = dt in _V3_DTYPES
        self._global("torch._utils", "_rebuild_tensor_v3" if v3 else "_rebuild_tensor_v2")
        self.write(pickle.MARK)
        # the persistent storage id: ('storage', <storage class>, key, 'cpu', numel)
        base, offset = _C._storage_view(t)  # a 1-D tensor over the whole storage, and t's offset in it
        ident = (base.data_ptr(), base.numel(), dt)
        key = self.storages.keys.get(ident)
        if key is None:
            key = str(len(self.storages.keys))
            self.storages.keys[ident] = key
            self.storages.data.append((key, base))
        self.write(pickle.MARK)
        super().save("storage")
        self._global("torch.storage", "UntypedStorage") if v3 else self._global("torch", _DTYPE_STORAGE[dt])
        super().save(key)
        super().save("cpu")
        super().save(base.numel() * base.element_size() if v3 else base.numel())
        self.write(pickle.TUPLE + pickle.BINPERSID)
        super().save(offset)
        super().save(tuple(t.shape))
        super().save(tuple(t.stride()))
        super().save(bool(t.requires_grad) and not param)
        self._ordered_dict()
        if v3:
            self._global("torch", dt)
        self.write(pickle.TUPLE + pickle.REDUCE)
        if param:
            super().save(bool(t.requires_grad))
            self._ordered_dict()
            self.write(pickle.TUPLE + pickle.REDUCE)


def _aligned_member(zf, name, data, align=64):
    """Writes a stored member whose data starts at a multiple of `align` (padding in the extra field,
    as torch's writer does), so the file can be mapped and its tensors used in place."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    offset = zf.fp.tell() + 30 + len(name.encode())
    pad = (-(offset + 4)) % align
    info.extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad  # "FB", torch's padding record
    zf.writestr(info, data)


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True):
    """torch.save: writes obj (tensors, state dicts, optimiser states, nested containers) to a path or a
    binary file object, in torch's zip format."""
    if pickle_module is not None or not _use_new_zipfile_serialization:
        raise ValueError("kiln.save writes torch's zip format with its own pickler; pickle_module and the "
                         "legacy format are not available")
    storages = _Storages()
    buf = io.BytesIO()
    p = _Pickler(buf, storages, None)
    p.dump(obj)
    own = isinstance(f, (str, bytes, os.PathLike))
    if own:
        parent = os.path.dirname(os.path.abspath(os.fsdecode(f)))
        if not os.path.isdir(parent):  # torch's writer checks it before writing anything
            raise RuntimeError(f"Parent directory {parent} does not exist.")
    fp = open(f, "wb") if own else f
    try:
        with zipfile.ZipFile(fp, "w", zipfile.ZIP_STORED) as zf:
            _aligned_member(zf, "archive/data.pkl", buf.getvalue())
            _aligned_member(zf, "archive/byteorder", b"little")
            for key, base in storages.data:
                _aligned_member(zf, f"archive/data/{key}", _C._storage_bytes(base))
            _aligned_member(zf, "archive/version", b"3\n")
            _aligned_member(zf, "archive/.data/serialization_id", b"0" * 40)
    finally:
        if own:
            fp.close()


# ---- reading --------------------------------------------------------------------------------------------
def _rebuild_tensor(storage, offset, size, stride, requires_grad=False, hooks=None, dtype=None):
    data, dt = storage
    if dtype is not None:  # v3: an untyped storage and the dtype
        dt = dtype
    t = _C._tensor_from_storage_bytes(data, getattr(_C, dt)).as_strided(tuple(size), tuple(stride), int(offset))
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_parameter(data, requires_grad, hooks=None, *_):
    from .nn.parameter import Parameter
    return Parameter(data, requires_grad=requires_grad)


class _DtypeName(str):
    pass


_SAFE_BUILTINS = {("builtins", n) for n in ("set", "frozenset", "complex", "slice", "range", "bytearray")}


class _Unpickler(pickle.Unpickler):
    def __init__(self, f, read_record, weights_only):
        super().__init__(f)
        self._read = read_record
        self._weights_only = weights_only
        self._cache = {}

    def find_class(self, module, name):
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor_v3"):
            return _rebuild_tensor
        if module == "torch._utils" and name == "_rebuild_parameter":
            return _rebuild_parameter
        if module == "torch" and name in _STORAGE_DTYPE:
            return _DtypeName(_STORAGE_DTYPE[name])
        if (module, name) == ("torch.storage", "UntypedStorage"):
            return _DtypeName("uint8")
        if module == "torch" and name in _V3_DTYPES | set(_DTYPE_STORAGE.values()):
            return _DtypeName(name)
        if (module, name) == ("torch", "Size"):
            return tuple
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) == ("collections", "Counter"):  # on torch's weights_only list too
            return collections.Counter
        if (module, name) in _SAFE_BUILTINS:
            return getattr(__import__("builtins"), name)
        if self._weights_only:
            raise pickle.UnpicklingError(
                f"Weights only load failed: unsupported global {module}.{name} (kiln.load with weights_only=True "
                "accepts tensors, parameters, OrderedDict and Python containers and scalars; pass "
                "weights_only=False only for a file you trust)")
        if module.startswith("torch"):
            raise pickle.UnpicklingError(f"kiln.load: the file refers to {module}.{name}, which kiln does not have")
        return super().find_class(module, name)

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], _DtypeName)
                and isinstance(pid[2], str) and isinstance(pid[4], int)):
            raise pickle.UnpicklingError(f"kiln.load: unsupported persistent id {pid!r}")
        key = pid[2]
        if key not in self._cache:
            self._cache[key] = self._read(key)
        return (self._cache[key], str(pid[1]))


_ZIP_MAGIC = b"PK\x03\x04"  # a zip's first local header: what torch.load takes for its zip format
_LEGACY_MAGIC = 0x1950a86a20f9469cfc6c  # the first pickle of a pre-1.6 (legacy format) torch.save file


class CorruptCheckpointError(OSError, RuntimeError):
    """A zip checkpoint that cannot be read (cut short, or a record's header or data damaged). torch raises
    RuntimeError (PytorchStreamReader ...) for these, or OSError where its reader seeks before the start of
    a short file cut at the tail; this class is both."""


def _no_records(key):
    raise pickle.UnpicklingError(f"kiln.load: storage record {key} outside a zip checkpoint")


def _not_zip(fp, weights_only):
    """torch.load's path for a file that is not a zip: it reads the legacy format, whose first pickle is a
    magic number. kiln does not read that format, but raises what torch raises for a file that is neither:
    EOFError for an empty file, pickle.UnpicklingError for bytes that are no pickle (or refer to a global
    weights_only refuses), RuntimeError else."""
    try:
        magic = _Unpickler(fp, _no_records, weights_only).load()
    except EOFError:
        raise EOFError("kiln.load: the file is empty (or ends before its first record)") from None
    except Exception as e:
        raise pickle.UnpicklingError("kiln.load: not a torch zip checkpoint, nor a pickle it reads: "
                                     f"{type(e).__name__}: {e}") from None
    if magic == _LEGACY_MAGIC:
        raise RuntimeError("kiln.load: not a torch zip checkpoint: files in torch's legacy format (torch.save "
                           "before 1.6, or _use_new_zipfile_serialization=False) are not read")
    raise RuntimeError("Invalid magic number; corrupt file? (kiln.load: not a torch zip checkpoint)")


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **pickle_load_args):
    """torch.load: reads a file torch.save or kiln.save wrote (a path or a binary file object)."""
    if map_location not in (None, "cpu") and str(map_location) != "cpu":
        raise RuntimeError(f"kiln.load: map_location={map_location!r}; kiln loads onto the CPU")
    own = isinstance(f, (str, bytes, os.PathLike))
    fp = open(f, "rb") if own else f
    try:
        start = fp.tell()
        is_zip = fp.read(4) == _ZIP_MAGIC
        fp.seek(start)
        if not is_zip:
            _not_zip(fp, weights_only)
        try:
            zf = zipfile.ZipFile(fp)
        except zipfile.BadZipFile as e:
            raise CorruptCheckpointError(f"kiln.load: the zip checkpoint is cut short or damaged: {e}") from None
        with zf:
            names = zf.namelist()
            pkl = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
            if len(pkl) != 1:
                raise RuntimeError("kiln.load: the archive has no (or several) <name>/data.pkl records")
            prefix = pkl[0][:-len("data.pkl")]

            def member(name):
                try:
                    return zf.read(name)
                except (zipfile.BadZipFile, zlib.error, EOFError) as e:
                    raise CorruptCheckpointError(f"kiln.load: failed reading record {name}: {e}") from None

            byteorder = member(prefix + "byteorder") if prefix + "byteorder" in names else b"little"
            if byteorder != b"little":
                raise RuntimeError(f"kiln.load: byte order {byteorder!r} is not supported")

            def read(key):
                name = f"{prefix}data/{key}"
                if name not in names:
                    raise RuntimeError(f"kiln.load: storage record {name} is missing")
                return member(name)

            data = member(pkl[0])
            try:
                return _Unpickler(io.BytesIO(data), read, weights_only).load()
            except (pickle.UnpicklingError, RuntimeError):
                raise
            except Exception as e:  # a malformed pickle: never a crash, one error class
                raise pickle.UnpicklingError(f"kiln.load: malformed checkpoint: {type(e).__name__}: {e}") from None
    finally:
        if own:
            fp.close()
