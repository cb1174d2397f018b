"""torch's tensor protocol on kiln.Tensor: kiln.Size, the legacy constructors (kiln.Tensor(2, 3),
kiln.FloatTensor([...])) and .type(), new_tensor, storages, set_printoptions, and the subclass /
__kiln_function__ protocol (torch's __torch_function__, whose name kiln honours too).

The computation behind each lives in C++ (bind_protocol.cpp); this is the Python glue."""
import contextlib
import math
import warnings

from . import _C
from ._C import Tensor


# ---- kiln.Size -------------------------------------------------------------------------------------
class Size(tuple):
    """The type of Tensor.shape and Tensor.size(): a tuple of ints (torch.Size)."""

    def __new__(cls, sizes=()):
        out = []
        for s in sizes:
            if isinstance(s, int) or type(s).__name__ == "SymInt":
                out.append(s)
            elif hasattr(s, "__index__") and not isinstance(s, float):
                out.append(s.__index__())
            else:
                raise TypeError(f"kiln.Size() takes an iterable of 'int' (item {len(out)} is '{type(s).__name__}')")
        return super().__new__(cls, out)

    def numel(self):
        return math.prod(self)

    def __getitem__(self, i):
        r = super().__getitem__(i)
        return Size(r) if isinstance(i, slice) else r

    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple(self) + tuple(other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple(other) + tuple(self))

    def __mul__(self, n):
        return Size(tuple(self) * n)

    __rmul__ = __mul__

    def __repr__(self):
        return f"kiln.Size({list(self)})"

    def __reduce__(self):
        return (Size, (tuple(self),))


Size.__module__ = "kiln"


_C._set_size_type(Size)


# ---- legacy constructors and .type() -------------------------------------------------------------
_LEGACY = {"FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
           "BFloat16Tensor": "bfloat16", "ByteTensor": "uint8", "CharTensor": "int8", "ShortTensor": "int16",
           "IntTensor": "int32", "LongTensor": "int64", "BoolTensor": "bool",
           "ComplexFloatTensor": "complex64", "ComplexDoubleTensor": "complex128"}
_LEGACY_OF = {v: k for k, v in _LEGACY.items()}


def _dtype_name(dt):
    return str(dt).split(".")[-1]


def _is_size(args):
    return all(isinstance(a, int) and not isinstance(a, bool) for a in args)


def _legacy_new(*args, dtype=None, device=None):
    """torch's legacy constructor: no arguments (an empty tensor), sizes (uninitialised), a Size, a
    sequence of data, or a tensor of the same dtype (an alias)."""
    dtype = dtype or _C.get_default_dtype()
    if len(args) == 0:
        t = _C.empty([0], dtype=dtype)
    elif _is_size(args):
        t = _C.empty(list(args), dtype=dtype)
    elif len(args) == 1 and isinstance(args[0], Size):
        t = _C.empty(list(args[0]), dtype=dtype)
    elif len(args) == 1 and isinstance(args[0], Tensor):
        if args[0].dtype != dtype:
            raise TypeError(f"expected {_dtype_name(dtype)} (got {_dtype_name(args[0].dtype)})")
        return args[0]
    elif len(args) == 1 and not isinstance(args[0], (int, float, complex, bool)):
        t = _C.tensor(args[0], dtype=dtype)
    else:
        raise TypeError(f"new(): invalid arguments: got {tuple(type(a).__name__ for a in args)}")
    return t if device is None else t.to(device)


class _LegacyMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and _dtype_name(obj.dtype) == cls._dtype_name

    def __call__(cls, *args, **kwargs):
        if "dtype" in kwargs:
            raise TypeError(f"{cls.__name__}() got an unexpected keyword argument 'dtype'")
        return _legacy_new(*args, dtype=getattr(_C, cls._dtype_name), **kwargs)


def _legacy_class(name, dtype_name):
    return _LegacyMeta(name, (), {"_dtype_name": dtype_name, "__module__": "kiln",
                                  "dtype": getattr(_C, dtype_name),
                                  "__doc__": f"torch's legacy {name} constructor: kiln.{dtype_name} tensors."})


LEGACY_CLASSES = {name: _legacy_class(name, dt) for name, dt in _LEGACY.items()}


def _type(self, dtype=None, non_blocking=False, **kwargs):
    """Tensor.type(): the type string ('kiln.FloatTensor') without an argument; else the tensor cast to
    the dtype, given as a dtype, a legacy class or its name ('kiln.DoubleTensor' or 'torch.DoubleTensor')."""
    if dtype is None:
        return "kiln." + _LEGACY_OF.get(_dtype_name(self.dtype), "Tensor")
    if isinstance(dtype, str):
        name = dtype.split(".")[-1]
        if name not in _LEGACY or dtype.split(".")[0] not in ("kiln", "torch"):
            raise ValueError(f"invalid type: '{dtype}'")
        dtype = getattr(_C, _LEGACY[name])
    elif isinstance(dtype, _LegacyMeta):
        dtype = dtype.dtype
    return self if dtype == self.dtype else self.to(dtype)


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    if isinstance(data, Tensor):
        warnings.warn("To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
                      "sourceTensor.detach().clone().requires_grad_(True), rather than tensor.new_tensor(sourceTensor).",
                      UserWarning, stacklevel=2)
        t = data.detach().clone().to(dtype or self.dtype)
    else:
        t = _C.tensor(data, dtype=dtype or self.dtype)
    if device is not None:
        t = t.to(device)
    return t.requires_grad_() if requires_grad else t


# ---- storages ---------------------------------------------------------------------------------------
class _Storage:
    """What both storage views share: the tensor whose storage it is (which keeps the memory alive)."""

    def __init__(self, tensor):
        self._t = tensor

    def nbytes(self):
        return self._t._storage_nbytes()

    def data_ptr(self):
        return self._t._storage_data_ptr()

    @property
    def device(self):
        return self._t.device

    def is_shared(self):
        return self._t.is_shared()

    def share_memory_(self):
        self._t.share_memory_()
        return self

    def _elements(self):  # the whole storage as a 1-d tensor of the tensor's dtype
        return self._t.detach().as_strided((self._t._storage_nbytes() // self._t.element_size(),), (1,), 0)

    def _values(self):
        return self._elements()

    def tolist(self):
        return self._values().tolist()

    def __getitem__(self, i):
        r = self._values()[i]
        return r.item() if isinstance(i, int) else r.tolist()


class UntypedStorage(_Storage):
    """The bytes under a tensor and its views (torch.UntypedStorage): nbytes, data_ptr, byte values."""

    def size(self):
        return self.nbytes()

    __len__ = size

    def element_size(self):
        return 1

    def _values(self):
        return self._elements().view(_C.uint8)

    def __repr__(self):
        return f" {self.tolist()}\n[kiln.storage.UntypedStorage(device={self.device}) of size {self.nbytes()}]"


class TypedStorage(_Storage):
    """The elements under a tensor and its views (torch.TypedStorage, what Tensor.storage() returns)."""

    def __init__(self, tensor):
        super().__init__(tensor)
        self.dtype = tensor.dtype

    def untyped(self):
        return UntypedStorage(self._t)

    def size(self):
        return self.nbytes() // self._t.element_size()

    __len__ = size

    def element_size(self):
        return self._t.element_size()

    def __repr__(self):
        return f" {self.tolist()}\n[kiln.storage.TypedStorage(dtype={self.dtype}, device={self.device}) of size {self.size()}]"


# ---- print options ----------------------------------------------------------------------------------
_PROFILES = {"default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
             "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
             "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """torch.set_printoptions: a profile ('default', 'short', 'full') first, then the named options;
    sci_mode None lets the values choose."""
    o = _C._get_printoptions()
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"Invalid profile: {profile}")  # torch ignores it silently; kiln names it
        o.update(_PROFILES[profile])
    for k, v in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                 ("linewidth", linewidth)):
        if v is not None:
            o[k] = v
    o["sci_mode"] = sci_mode
    _C._set_printoptions(int(o["precision"]), float(o["threshold"]), int(o["edgeitems"]), int(o["linewidth"]),
                         o["sci_mode"])


def get_printoptions():
    return dict(_C._get_printoptions())


# ---- the function protocol ---------------------------------------------------------------------------
@contextlib.contextmanager
def _disabled():
    prev = _C._set_function_disabled(True)
    try:
        yield
    finally:
        _C._set_function_disabled(prev)


class DisableKilnFunctionSubclass:
    """Inside it, ops ignore Tensor subclasses' __kiln_function__ (torch.DisableTorchFunctionSubclass)."""

    def __enter__(self):
        self._prev = _C._set_function_disabled(True)

    def __exit__(self, *exc):
        _C._set_function_disabled(self._prev)


def _disabled_function_impl(func, types, args=(), kwargs=None):
    """Set as a subclass's __kiln_function__ (or __torch_function__) to opt out: its instances behave
    as plain tensors (nn.Parameter does this)."""
    return func(*args, **(kwargs or {}))


def _handler_of(tp):
    for klass in tp.__mro__:
        for name in ("__kiln_function__", "__torch_function__"):
            if name in klass.__dict__:
                return getattr(tp, name)
    return None


def _dispatch(func, overloaded, args, kwargs):
    """torch's handle_torch_function: subclasses before their parents, then left to right; the first
    handler that does not return NotImplemented wins."""
    ordered = []
    for o in overloaded:
        t = type(o)
        pos = len(ordered)
        for i, p in enumerate(ordered):
            if issubclass(t, type(p)):
                pos = i
                break
        ordered.insert(pos, o)
    types = tuple(type(o) for o in ordered)
    for o in ordered:
        r = _handler_of(type(o))(func, types, args, kwargs)
        if r is not NotImplemented:
            return r
    raise TypeError(f"no implementation found for '{getattr(func, '__name__', func)}' on types that implement "
                    f"__kiln_function__: {list(types)}")


def _convert(ret, cls):
    if isinstance(ret, Tensor) and not isinstance(ret, cls):
        return ret.as_subclass(cls)
    if isinstance(ret, (tuple, list)) and not hasattr(ret, "_fields"):
        return type(ret)(_convert(r, cls) for r in ret)
    return ret


def _default_function(cls, func, types, args=(), kwargs=None):
    """Tensor's own __kiln_function__: runs the op on the plain tensors and returns instances of the
    subclass, as torch.Tensor.__torch_function__ does."""
    if kwargs is None:
        kwargs = {}
    if not all(issubclass(cls, t) for t in types):
        return NotImplemented
    with _disabled():
        return _convert(func(*args, **kwargs), cls)


def _make_subclass(cls, data, require_grad=False):
    t = data.detach().as_subclass(cls)
    return t.requires_grad_() if require_grad else t


_PROTOCOL_DUNDERS = {"__getitem__", "__setitem__", "__neg__", "__abs__", "__invert__", "__pos__"}


def wrap_methods():
    """The methods bound by hand (C++) or written in Python check their arguments for the protocol
    too, as the schema-bound ones do: each is put behind a kiln._C._ProtocolMethod. Runs once, after
    kiln/__init__.py has installed every method."""
    for name, v in list(vars(Tensor).items()):
        if type(v).__name__ not in ("nb_method", "nb_func", "function"):
            continue
        if name.startswith("_") and name not in _PROTOCOL_DUNDERS:
            continue
        if name in ("as_subclass", "share_memory_", "is_shared"):
            continue
        setattr(Tensor, name, _C._protocol_method(v))


def install(ns):
    """Puts the protocol on kiln.Tensor and the public names into the kiln namespace `ns`."""
    Tensor.type = _type
    Tensor.new_tensor = _new_tensor
    Tensor.untyped_storage = lambda self: UntypedStorage(self)

    def storage(self):
        warnings.warn("TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be "
                      "the only storage class.", UserWarning, stacklevel=2)
        return TypedStorage(self)
    Tensor.storage = storage
    Tensor.__kiln_function__ = classmethod(_default_function)
    Tensor.__torch_function__ = classmethod(_default_function)
    Tensor._make_subclass = staticmethod(_make_subclass)
    _C._set_function_handler(_dispatch, _disabled_function_impl)
    ns.update(LEGACY_CLASSES)
    ns.update(Size=Size, set_printoptions=set_printoptions, get_printoptions=get_printoptions,
              UntypedStorage=UntypedStorage, TypedStorage=TypedStorage,
              DisableKilnFunctionSubclass=DisableKilnFunctionSubclass,
              DisableTorchFunctionSubclass=DisableKilnFunctionSubclass)

