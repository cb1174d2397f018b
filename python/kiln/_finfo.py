"""kiln.finfo / kiln.iinfo: the numerical limits of kiln's dtypes, with torch's attribute names and
values (finfo of a complex dtype describes its real part)."""
from . import _C

# bits, eps, max, smallest normal (tiny), resolution (10 ** -digits)
_FLOAT = {
    "float16": (16, 2.0 ** -10, 65504.0, 2.0 ** -14, 0.001),
    "bfloat16": (16, 2.0 ** -7, 3.3895313892515355e38, 2.0 ** -126, 0.01),
    "float32": (32, 2.0 ** -23, 3.4028234663852886e38, 2.0 ** -126, 1e-06),
    "float64": (64, 2.0 ** -52, 1.7976931348623157e308, 2.0 ** -1022, 1e-15),
    "float8_e4m3fn": (8, 0.125, 448.0, 2.0 ** -6, 1.0),
    "float8_e5m2": (8, 0.25, 57344.0, 2.0 ** -14, 1.0),
}
_REAL_OF = {"complex64": "float32", "complex128": "float64"}
_INT = {"uint8": (8, 0, 255), "int8": (8, -128, 127), "int16": (16, -2 ** 15, 2 ** 15 - 1),
        "int32": (32, -2 ** 31, 2 ** 31 - 1), "int64": (64, -2 ** 63, 2 ** 63 - 1),
        "uint16": (16, 0, 2 ** 16 - 1), "uint32": (32, 0, 2 ** 32 - 1), "uint64": (64, 0, 2 ** 64 - 1),
        "bool": None}


def _name(dt):
    return str(dt).split(".")[-1]


class finfo:
    """Machine limits of a floating dtype (the default dtype when none is given), as torch.finfo."""

    def __init__(self, type=None):
        if type is None:
            type = _C.get_default_dtype()
        if not isinstance(type, _C.dtype):
            raise TypeError(f"finfo(): argument 'type' (position 1) must be kiln.dtype, not {builtin_type(type).__name__}")
        name = _REAL_OF.get(_name(type), _name(type))
        if name not in _FLOAT:
            raise TypeError("finfo() requires a floating point input type. Use iinfo to handle 'kiln.finfo'")
        self.bits, self.eps, self.max, self.tiny, self.resolution = _FLOAT[name]
        self.min = -self.max
        self.smallest_normal = self.tiny
        self.dtype = name

    def __eq__(self, other):
        return isinstance(other, finfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("finfo", self.dtype))

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Machine limits of an integral dtype, as torch.iinfo."""

    def __init__(self, type):
        if not isinstance(type, _C.dtype):
            raise TypeError(f"iinfo(): argument 'type' (position 1) must be kiln.dtype, not {builtin_type(type).__name__}")
        name = _name(type)
        if _INT.get(name) is None:
            raise TypeError("iinfo() requires an integer input type. Use finfo to handle 'kiln.iinfo'")
        self.bits, self.min, self.max = _INT[name]
        self.dtype = name

    def __eq__(self, other):
        return isinstance(other, iinfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("iinfo", self.dtype))

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


builtin_type = type
