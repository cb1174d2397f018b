"""kiln's op database, OpInfo style (DESIGN.md sections 2 and 9): one entry per public path into the
op table, holding how to call the op on kiln and on torch, its sample inputs per dtype (built once,
in torch, from seeded generators; kiln gets bit-identical copies with the same strides through
helpers.to_kiln), the dtypes to test, value domains, tolerances, and what the op supports (gradients,
out=, an in-place method, the meta device). test_op_db.py drives every cross-cutting check from it:
forward vs torch, gradients vs torch and kiln's gradcheck, out= and in-place variants, meta vs real,
and coverage (every registered op is covered by an entry that is seen to reach it).

Conventions:
- `OpInfo.sample_inputs(dtype, grad=False)` yields `Sample`s whose args hold torch tensors (and plain
  Python values, dtypes, slices); `grad=True` asks for float64/complex128 samples for the gradient
  tests: no special values, no empty tensors, inputs kept `away` from the op's kinks.
- `covers` names the registered op-table entries an entry exercises (by default its own name);
  test_op_db checks, with the capture layer, that running the entry's samples (and their backward)
  dispatches every one of them.
- `skips` / `xfails` are `Known` records: which test ("forward", "grad", "gradcheck", "out",
  "inplace", "meta", or "*"), which dtypes (empty: all), which samples (their `Sample.desc`s;
  empty: all) and the one-line reason. An xfail is strict at sample level: a matching
  sample that passes fails the test, and so does an xfail that matches no sample.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch

import kiln
from grad_conformance import domain as grad_domain
from helpers import ALL_DTYPES, COMPLEX_DTYPES, FLOAT_DTYPES, INT_DTYPES, layouts, make, tdt, to_torch

ALL = tuple(ALL_DTYPES)
FLOATS = tuple(FLOAT_DTYPES)  # float16 bfloat16 float32 float64
INTS = tuple(INT_DTYPES)
COMPLEX = tuple(COMPLEX_DTYPES)
FLOAT8 = ("float8_e4m3fn", "float8_e5m2")
F32_64 = ("float32", "float64")
# a broad set for the structural ops (indexing, shapes, sorting): every kind of dtype once
STRUCT = ("bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64", "complex64")
REAL_STRUCT = ("bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64")
REDUCED = ("float16", "bfloat16")
NUMERIC = ("uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
TESTS = ("forward", "grad", "gradcheck", "out", "inplace", "method", "meta", "*")


# ---- records ---------------------------------------------------------------------------------------
@dataclass
class Sample:
    """One call: op(*args, **kwargs). Tensors are torch tensors; the tests make the kiln copies."""
    args: tuple
    kwargs: dict = field(default_factory=dict)
    desc: str = ""
    grad_idx: tuple | None = None  # which flattened tensor leaves require grad (None: every float one)
    ref: str | None = None         # overrides OpInfo.ref for this sample
    tol: tuple | None = None       # (rtol, atol) for this sample, overriding the OpInfo's
    meta: bool = True              # False: output shape depends on the data (bool-mask indexing...)


@dataclass(frozen=True)
class Known:
    """A known skip or expected failure: test, dtypes (empty: all), samples (their descs; empty: all),
    and the one-line reason."""
    test: str
    reason: str
    dtypes: tuple = ()
    samples: tuple = ()

    def __post_init__(self):
        assert self.test in TESTS, self.test
        assert self.reason, "every skip and xfail states its reason"
        assert isinstance(self.dtypes, tuple) and isinstance(self.samples, tuple)

    @property
    def sample(self):
        return bool(self.samples)

    def matches(self, test, dtype, desc=None):
        if self.test not in (test, "*"):
            return False
        if self.dtypes and dtype not in self.dtypes:
            return False
        return desc is None or not self.samples or desc in self.samples


def _resolve(mod, path):
    """`add` -> mod.add, `nn.functional.gelu` -> mod.nn.functional.gelu, `Tensor.flip` -> a method call."""
    if path.startswith("Tensor."):
        meth = path[len("Tensor."):]

        def method(self, *args, **kwargs):
            return getattr(self, meth)(*args, **kwargs)

        method.__name__ = meth
        return method
    obj = mod
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _resolve_or_missing(mod, path):
    """_resolve, or a stand-in that raises where kiln lacks the function (a registered op whose binding
    is still to come): its tests then fail with that message instead of the whole database."""
    try:
        return _resolve(mod, path)
    except AttributeError as e:
        err = str(e)

        def missing(*args, **kwargs):
            raise AttributeError(f"kiln has no {path}: {err}")
        return missing


@dataclass
class OpInfo:
    name: str                                  # public name: `add`, `nn.functional.gelu`, `Tensor.flip`
    sample_fn: Callable                        # (opinfo, dtype, grad) -> iterable of Sample
    variant: str = ""                          # distinguishes entries of one public name (`trunc`)
    kiln_fn: Callable | None = None            # default: resolved from name in kiln
    torch_fn: Callable | None = None           # default: resolved from name in torch
    covers: tuple = ()                         # registered op names (default: (name,))
    dtypes: tuple = ALL
    grad_dtypes: tuple = ("float64",)
    domain: Any = None                         # (low, high) of the inputs, or one pair per input
    grad_domain: Any = None                    # the same for the gradient samples (default: domain)
    kinks: tuple = ()                          # points the gradient samples keep away from
    tol: dict = field(default_factory=dict)    # dtype -> (rtol, atol); default helpers.TOL
    grad_tol: tuple | None = None              # (rtol, atol) of the gradient comparison
    exact: bool = False                        # compare bit for bit (integers, bools are always exact)
    ref: str | None = None                     # "float64": torch's answer depends on its ISA
    ref_dtypes: tuple = ()                     # with ref: only for these dtypes (empty: all)
    supports_grad: bool = True
    supports_gradgrad: bool = False            # also compare second derivatives with torch
    gradcheck: bool = False                    # also run kiln's gradcheck (finite differences)
    supports_out: bool = False
    inplace_variant: str | None = None         # method name, e.g. "exp_"
    method: bool = True                        # x.name(*rest) is name(x, *rest) (where torch has the method)
    factory: bool = False                      # a creation op: the meta test passes device="meta"
    nondeterministic: bool = False             # random: compare shapes and dtypes, then check_values
    check_values: Callable | None = None       # (kiln result, sample) -> None, asserts properties
    meta: bool = True                          # False: cannot run on the meta device (meta_reason)
    meta_reason: str = ""
    skips: tuple = ()
    xfails: tuple = ()
    extra: dict = field(default_factory=dict)  # family parameters for the sample function

    def __post_init__(self):
        if self.kiln_fn is None:
            self.kiln_fn = _resolve_or_missing(kiln, self.name)
        if self.torch_fn is None:
            self.torch_fn = _resolve(torch, self.name)
        if not self.covers:
            self.covers = (self.name,)
        if not self.meta:
            assert self.meta_reason, f"{self.id}: meta=False needs a reason"
        for k in self.skips + self.xfails:
            assert isinstance(k, Known), k

    @property
    def id(self):
        return f"{self.name}.{self.variant}" if self.variant else self.name

    def fn(self, m):
        return self.kiln_fn if m is kiln else self.torch_fn

    def call(self, m, *args, **kwargs):
        return self.fn(m)(*args, **kwargs)

    def sample_inputs(self, dtype, grad=False) -> Iterable[Sample]:
        return self.sample_fn(self, dtype, grad)

    def skip_for(self, test, dtype, desc=None):
        for k in self.skips:
            if k.matches(test, dtype, desc) or (test == "method" and k.matches("forward", dtype, desc)):
                return k
        return None

    def xfail_for(self, test, dtype, desc):
        for k in self.xfails:
            if k.matches(test, dtype, desc) or (test == "method" and k.matches("forward", dtype, desc)):
                return k  # the method is a second door into the forward: the forward's known bugs show there too
        return None

    def ref_for(self, dtype, sample):
        """The reference for a sample: the sample's own, else the entry's (for its ref_dtypes)."""
        if sample.ref is not None:
            return sample.ref
        if self.ref and (not self.ref_dtypes or dtype in self.ref_dtypes):
            return self.ref
        return None

    def tolerance(self, dtype):
        return self.tol.get(dtype, (None, None))

    def __repr__(self):
        return f"OpInfo({self.id})"


# ---- building inputs -------------------------------------------------------------------------------
def _seed(*parts):
    """A stable seed from the sample's identity (Python's hash of str is salted per process)."""
    h = 0
    for p in parts:
        for c in str(p):
            h = (h * 131 + ord(c)) % 1_000_003
    return h


def T(shape, dtype, low=-5.0, high=5.0, seed=0, special=False):
    return make(tuple(shape), dtype, low=low, high=high, seed=seed, special=special)


def G(shape, dtype="float64", low=-3.0, high=3.0, away=(), seed=0):
    """A gradient-test input: float64 (or complex128) values in [low, high], kept off the kinks."""
    return grad_domain(tuple(shape), low, high, seed=seed, away=away, dtype=tdt(dtype))


def distinct(shape, dtype, seed=0, low=None):
    """Values without ties (a shuffled range), for ops whose returned indices are ambiguous on ties."""
    n = math.prod(shape)
    g = torch.Generator().manual_seed(seed)
    lo = 0 if dtype in ("uint8", "uint16", "uint32", "uint64", "bool") else -(n // 2)
    if low is not None:
        lo = low
    if dtype == "bool":
        return torch.randperm(n, generator=g).reshape(shape).lt(n // 2)
    vals = (torch.randperm(n, generator=g) + lo).to(torch.float64)
    if dtype in FLOATS or dtype in COMPLEX:
        vals = vals * 0.5 + 0.25
    return vals.reshape(shape).to(tdt(dtype))


def idx(values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


def rand_index(shape, high, seed=0, dtype=torch.int64):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, high, tuple(shape), generator=g, dtype=torch.int64).to(dtype)


def perm_rows(rows, n, k, seed=0):
    """(rows, k) distinct indices in [0, n) per row: a scatter target without duplicates."""
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randperm(n, generator=g)[:k] for _ in range(rows)])


def bool_mask(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(tuple(shape), generator=g) > 0.5


def _pair_domain(op):
    d = op.domain
    if d is None:
        return (-5.0, 5.0), (-5.0, 5.0)
    if isinstance(d[0], (tuple, list)):
        return tuple(d[0]), tuple(d[1])
    return tuple(d), tuple(d)


def _grad_pair(op):
    """((low, high, kinks) of a, (low, high, kinks) of b) for the gradient samples."""
    gd = op.grad_domain
    if gd is None:
        (al, ah), (bl, bh) = _pair_domain(op)
        return (al, ah, op.kinks), (bl, bh, op.kinks)
    if isinstance(gd[0], (tuple, list)):
        return tuple(gd[0]), tuple(gd[1])
    return (gd[0], gd[1], op.kinks), (gd[0], gd[1], op.kinks)


# ---- families: unary elementwise -------------------------------------------------------------------
def unary_samples(op, dtype, grad):
    lo, hi = op.domain or (-4.0, 4.0)
    kwargs = op.extra.get("kwargs", [{}])
    if grad:
        glo, ghi = op.grad_domain or (lo, hi)

        def x(shape, seed):
            return G(shape, dtype, glo, ghi, op.kinks, seed)
        cases = [("contig", x((3, 4), 1)), ("transposed", x((5, 3), 2).t()),
                 ("sliced", x((4, 6), 3)[::2, 1::2]), ("0-dim", x((), 4))]
        if dtype in COMPLEX:
            cases = cases[:2]
        for label, t in cases:
            yield Sample((t,), dict(kwargs[0]), desc=label)
        for i, kw in enumerate(kwargs[1:]):
            yield Sample((x((3, 4), 10 + i),), dict(kw), desc=f"kwargs{kw}")
        return
    for label, t in layouts((5, 7), dtype, low=lo, high=hi, seed=_seed(op.id, dtype)):
        yield Sample((t,), dict(kwargs[0]), desc=label)
    yield Sample((T((), dtype, lo, hi, seed=3),), dict(kwargs[0]), desc="0-dim")
    yield Sample((T((0, 3), dtype, seed=4),), dict(kwargs[0]), desc="empty")
    for i, kw in enumerate(kwargs[1:]):
        yield Sample((T((4, 6), dtype, lo, hi, seed=20 + i),), dict(kw), desc=f"kwargs{kw}")
    if dtype in FLOATS:
        yield Sample((T((4, 8), dtype, special=True, seed=5),), dict(kwargs[0]), desc="special",
                     ref=op.extra.get("special_ref", "float64"))


def _has_method(cls, name):
    return name is not None and hasattr(cls, name)


def unary(name, domain=None, grad=None, kinks=(), cgrad=False, loose=None, variant="", covers=(),
          kwargs=None, inplace="auto", out=None, fname=None, **kw):
    """An elementwise one-input entry. grad: (low, high) of the gradient samples, or False."""
    path = fname or name
    tol = dict(kw.pop("tol", {}))
    if loose is not None:
        tol.setdefault("float32", (loose, 1e-5))
        tol.setdefault("complex64", (loose, 1e-5))
        tol.setdefault("float64", (1e-9, 1e-7))
        tol.setdefault("complex128", (1e-9, 1e-7))
    short = path.split(".")[-1]
    if inplace == "auto":
        cand = short + "_"
        inplace = cand if _has_method(torch.Tensor, cand) and not kwargs and not variant else None
    if out is None:
        out = not path.startswith("nn.functional.") and not kwargs and not variant
    extra = dict(kw.pop("extra", {}))
    if kwargs:
        extra["kwargs"] = kwargs
    return OpInfo(path, unary_samples, variant=variant, covers=covers or (name,), domain=domain,
                  grad_domain=grad if grad else None, kinks=kinks, supports_grad=grad is not False,
                  grad_dtypes=("float64", "complex128") if cgrad else ("float64",), tol=tol,
                  inplace_variant=inplace, supports_out=out, extra=extra, **kw)


INT_KINKS = tuple(i - 4.0 for i in range(9))
HALF_KINKS = tuple(i + 0.5 for i in INT_KINKS)

UNARY_OPS = [
    unary("neg", grad=(-3, 3), cgrad=True),
    unary("abs", grad=(-3, 3), kinks=(0,), cgrad=True),
    unary("sign", grad=(-3, 3), kinks=(0,)),
    unary("sgn", grad=(-3, 3), kinks=(0,), cgrad=True),
    unary("reciprocal", grad=(-3, 3), kinks=(0,), cgrad=True),
    unary("sqrt", domain=(0, 10), grad=(0.2, 4), cgrad=True),
    unary("rsqrt", domain=(0.01, 10), grad=(0.2, 4), cgrad=True),
    unary("square", grad=(-3, 3), cgrad=True),
    unary("exp", grad=(-2, 2), cgrad=True, gradcheck=True, supports_gradgrad=True),
    unary("exp2", grad=(-2, 2), loose=1e-5),
    unary("expm1", grad=(-2, 2), cgrad=True, loose=1e-5),
    unary("log", domain=(0.01, 10), grad=(0.2, 4), cgrad=True, supports_gradgrad=True),
    unary("log2", domain=(0.01, 10), grad=(0.2, 4), cgrad=True),
    unary("log10", domain=(0.01, 10), grad=(0.2, 4), cgrad=True),
    unary("log1p", domain=(-0.9, 10), grad=(-0.8, 3), cgrad=True),
    unary("sin", grad=(-3, 3), cgrad=True, gradcheck=True),
    unary("cos", grad=(-3, 3), cgrad=True),
    unary("tan", domain=(-1.2, 1.2), grad=(-1.2, 1.2), cgrad=True, loose=1e-4),
    unary("asin", domain=(-1, 1), grad=(-0.9, 0.9), cgrad=True),
    unary("acos", domain=(-1, 1), grad=(-0.9, 0.9), cgrad=True),
    unary("atan", grad=(-3, 3), cgrad=True),
    unary("sinh", domain=(-2, 2), grad=(-2, 2), cgrad=True, loose=1e-5),
    unary("cosh", domain=(-2, 2), grad=(-2, 2), cgrad=True, loose=1e-5),
    unary("tanh", domain=(-2, 2), grad=(-2, 2), cgrad=True, loose=1e-5, supports_gradgrad=True),
    unary("asinh", grad=(-3, 3), cgrad=True, loose=1e-5),
    unary("acosh", domain=(1, 6), grad=(1.2, 4), cgrad=True, loose=1e-5),
    unary("atanh", domain=(-0.99, 0.99), grad=(-0.9, 0.9), cgrad=True, loose=1e-5),
    unary("sigmoid", grad=(-4, 4), cgrad=True, loose=1e-5, supports_gradgrad=True),
    unary("erf", domain=(-2, 2), grad=(-2, 2)),
    unary("erfc", domain=(-2, 2), grad=(-2, 2)),
    unary("erfinv", domain=(-0.999, 0.999), grad=(-0.9, 0.9), loose=1e-5),
    unary("lgamma", domain=(0.1, 10), grad=(-3.5, 5), kinks=INT_KINKS, loose=1e-4),
    # digamma's derivative is polygamma(1, x): the backward dispatches the polygamma table op
    unary("digamma", domain=(0.1, 10), grad=(-3.5, 5), kinks=INT_KINKS, loose=1e-4,
          covers=("digamma", "polygamma"), supports_gradgrad=True),
    unary("floor", grad=(-3, 3), kinks=INT_KINKS),
    unary("ceil", grad=(-3, 3), kinks=INT_KINKS),
    unary("trunc", grad=(-3, 3), kinks=INT_KINKS),
    unary("frac", grad=(-3, 3), kinks=INT_KINKS),
    unary("round", grad=(-3, 3), kinks=HALF_KINKS),
    unary("round", variant="decimals", covers=("round_decimals",), domain=(-500, 500), grad=(-3, 3),
          kwargs=[{"decimals": 1}, {"decimals": 0}, {"decimals": 2}, {"decimals": -1}, {"decimals": -2}],
          out=True, inplace="round_"),
    unary("bitwise_not", grad=False),
    unary("logical_not", grad=False),
    unary("isnan", grad=False),
    unary("isinf", grad=False),
    unary("isfinite", grad=False),
    unary("isposinf", grad=False),
    unary("isneginf", grad=False),
    unary("signbit", grad=False),
    unary("relu", grad=(-3, 3), kinks=(0,)),
    unary("angle", grad=(-2, 2), kinks=(0,), cgrad=True),
    unary("conj_physical", grad=(-3, 3), cgrad=True),
    unary("logit", grad=(0.05, 0.95), domain=(0.01, 0.99), loose=1e-5,
          kwargs=[{}, {"eps": 0.1}, {"eps": 0.2}], out=True, inplace="logit_",
          # torch computes float16/bfloat16 logit in the reduced type (0.4 ulp off); kiln in float32
          ref="float64", ref_dtypes=REDUCED),
    unary("nan_to_num", grad=(-3, 3),
          kwargs=[{}, {"nan": 1.0, "posinf": 2.0, "neginf": -3.0}, {"nan": -1.5}], out=True, inplace="nan_to_num_",
          extra={"special_ref": None}),  # +-inf become the dtype's own extremes: no float64 reference
    # clamp with number bounds: clamp, clamp_min, clamp_max table ops
    unary("clamp", grad=(-3, 3), kinks=(-1, 1.5), kwargs=[{"min": -1.0, "max": 1.5}, {"min": 0, "max": 2}],
          out=True, inplace="clamp_"),
    unary("clamp", variant="min", covers=("clamp_min",), grad=(-3, 3), kinks=(-0.5,), kwargs=[{"min": -0.5}],
          out=True, inplace="clamp_"),
    unary("clamp", variant="max", covers=("clamp_max",), grad=(-3, 3), kinks=(0.5,), kwargs=[{"max": 0.5}],
          out=True, inplace="clamp_"),
    # activations: torch.nn.functional's path on both sides
    unary("relu6", fname="nn.functional.relu6", grad=(-2, 8), kinks=(0, 6)),
    unary("silu", fname="nn.functional.silu", grad=(-4, 4), loose=1e-5),
    unary("mish", fname="nn.functional.mish", grad=(-4, 4), loose=1e-5),
    unary("hardsigmoid", fname="nn.functional.hardsigmoid", grad=(-5, 5), kinks=(-3, 3)),
    unary("hardswish", fname="nn.functional.hardswish", grad=(-5, 5), kinks=(-3, 3)),
    unary("logsigmoid", fname="nn.functional.logsigmoid", grad=(-4, 4), loose=1e-5),
    # float64 reference: torch's float32/bfloat16 GELU is oneDNN's, whose answer depends on its ISA
    unary("gelu", fname="nn.functional.gelu", grad=(-4, 4), loose=1e-5, ref="float64",
          covers=("gelu", "gelu_backward"), gradcheck=True, supports_gradgrad=True),
    unary("gelu", fname="nn.functional.gelu", variant="tanh", grad=(-4, 4), loose=1e-5, ref="float64",
          kwargs=[{"approximate": "tanh"}], covers=("gelu_tanh", "gelu_tanh_backward"), supports_gradgrad=True),
    unary("elu", fname="nn.functional.elu", grad=(-3, 3), kinks=(0,), loose=1e-5,
          kwargs=[{}, {"alpha": 0.5}, {"alpha": 0.7}]),
    unary("elu", fname="nn.functional.selu", grad=(-3, 3), kinks=(0,), loose=1e-5),  # selu and celu are elu
    unary("elu", fname="nn.functional.celu", grad=(-3, 3), kinks=(0,), loose=1e-5,
          kwargs=[{}, {"alpha": 2.0}, {"alpha": 1.3}]),
    unary("softplus", fname="nn.functional.softplus", domain=(-30, 30), grad=(-3, 3), kinks=(0.5,), loose=1e-5,
          kwargs=[{}, {"beta": 2.0, "threshold": 5.0}, {"beta": 2.0, "threshold": 1.0}]),
    unary("hardtanh", fname="nn.functional.hardtanh", grad=(-3, 3), kinks=(-0.5, 1.0),
          kwargs=[{}, {"min_val": -2.0, "max_val": 3.0}, {"min_val": -0.5, "max_val": 1.0}]),
    unary("leaky_relu", fname="nn.functional.leaky_relu", grad=(-3, 3), kinks=(0,),
          kwargs=[{}, {"negative_slope": 0.2}]),
    unary("threshold", fname="nn.functional.threshold", grad=(-3, 3), kinks=(0.3,),
          kwargs=[{"threshold": 0.3, "value": -2.0}, {"threshold": 0.5, "value": -7.0}]),
]


# ---- families: binary elementwise ------------------------------------------------------------------
def binary_samples(op, dtype, grad):
    kw = dict(op.extra.get("kwargs", {}))
    if grad:
        (al, ah, ak), (bl, bh, bk) = _grad_pair(op)

        def pair(sa, sb, seed):
            return G(sa, dtype, al, ah, ak, seed), G(sb, dtype, bl, bh, bk, seed + 50)
        cases = [("same", (3, 4), (3, 4)), ("0-dim", (), ())]
        if not op.extra.get("same_shape"):
            cases += [("broadcast", (2, 1, 4), (3, 1)), ("bcast-0dim", (3, 4), ()), ("bcast-left", (4,), (2, 3, 4))]
        if dtype in COMPLEX:
            cases = cases[:1]
        for i, (label, sa, sb) in enumerate(cases):
            a, b = pair(sa, sb, i)
            yield Sample((a, b), kw, desc=label)
        if dtype in COMPLEX:
            return
        a, b = pair((4, 3), (3, 4), 7)
        yield Sample((a.t(), b.t().contiguous().t()), kw, desc="transposed")
        a, b = pair((3, 8), (4, 3), 8)
        yield Sample((a[:, ::2], b.t()), kw, desc="strided")
        if not op.extra.get("same_shape"):
            a, b = pair((3, 4), (4,), 9)
            yield Sample((a, b), kw, desc="grad-a-only", grad_idx=(0,))
            yield Sample((a, b), kw, desc="grad-b-only", grad_idx=(1,))
        return
    (al, ah), (bl, bh) = _pair_domain(op)
    if dtype in ("uint8", "uint16", "uint32", "uint64", "bool"):
        al, bl = max(al, 0), max(bl, 0)
    s = _seed(op.id, dtype)
    for i, (label, sa, sb) in enumerate([("same", (4, 5), (4, 5)), ("broadcast", (4, 1), (1, 5)),
                                         ("bcast-left", (3, 4, 5), (5,)), ("0-dim-a", (), (4,)),
                                         ("empty", (0, 3), (3,))]):
        yield Sample((T(sa, dtype, al, ah, s + i), T(sb, dtype, bl, bh, s + 10 + i)), kw, desc=label)
    a, b = T((6, 5), dtype, al, ah, s + 20), T((5, 6), dtype, bl, bh, s + 21)
    yield Sample((a[::2], b.t()[::2]), kw, desc="strided")
    if op.extra.get("scalars", True):
        a = T((3, 4), dtype, al, ah, s + 30)
        for v in op.extra.get("scalar_values", (2, 2.5)):
            yield Sample((a, v), kw, desc=f"scalar-rhs-{v!r}")
        if op.extra.get("scalar_lhs", True):
            yield Sample((3, T((3, 4), dtype, bl, bh, s + 31)), kw, desc="scalar-lhs-3")
    if op.extra.get("promote", True):
        other = "float32" if dtype != "float32" else "int64"
        yield Sample((T((3, 4), dtype, al, ah, s + 40), T((4,), other, bl, bh, s + 41)), kw, desc=f"promote-{other}")
    if dtype in FLOATS:
        ref = op.extra.get("special_ref", "float64")
        yield Sample((T((4, 8), dtype, special=True, seed=s + 50), T((4, 8), dtype, bl, bh, seed=s + 51)), kw,
                     desc="special-a", ref=ref)
        yield Sample((T((4, 8), dtype, al, ah, seed=s + 52), T((4, 8), dtype, special=True, seed=s + 53)), kw,
                     desc="special-b", ref=ref)


def binary(name, domain=None, grad=None, kinks=(), cgrad=False, loose=None, variant="", covers=(),
           kwargs=None, inplace="auto", out=True, fname=None, same_shape=False, scalars=True, scalar_lhs=True,
           **kw):
    path = fname or name
    tol = dict(kw.pop("tol", {}))
    if loose is not None:
        tol.setdefault("float32", (loose, 1e-5))
        tol.setdefault("complex64", (loose, 1e-5))
    short = path.split(".")[-1]
    if inplace == "auto":
        cand = short + "_"
        inplace = cand if _has_method(torch.Tensor, cand) else None
    extra = dict(kw.pop("extra", {}))
    extra.update(same_shape=same_shape, scalars=scalars, scalar_lhs=scalar_lhs)
    if kwargs:
        extra["kwargs"] = kwargs
    return OpInfo(path, binary_samples, variant=variant, covers=covers or (name,), domain=domain,
                  grad_domain=grad if grad else None, kinks=kinks, supports_grad=grad is not False,
                  grad_dtypes=("float64", "complex128") if cgrad else ("float64",), tol=tol,
                  inplace_variant=inplace, supports_out=out, extra=extra, **kw)


R3 = (-3, 3, ())
POS = (0.3, 3, ())
NZ = (-3, 3, (0,))
NONZERO_RHS = ((-5, 5), (1, 5))
SHIFT = ((-5, 5), (0, 6))

BINARY_OPS = [
    binary("add", grad=(R3, R3), cgrad=True, gradcheck=True),
    # torch rounds alpha * b to float16/bfloat16 before adding; kiln adds in float32 (closer to exact)
    binary("add", variant="alpha", grad=(R3, R3), cgrad=True, kwargs={"alpha": 2.5}, inplace="add_",
           extra={"promote": False}, ref="float64", ref_dtypes=REDUCED),
    binary("add", variant="int_alpha", grad=(R3, R3), kwargs={"alpha": 3}, inplace="add_", extra={"promote": False},
           ref="float64", ref_dtypes=REDUCED),
    binary("sub", grad=(R3, R3), cgrad=True),
    binary("sub", variant="alpha", grad=(R3, R3), kwargs={"alpha": -1.5}, inplace="sub_", extra={"promote": False},
           ref="float64", ref_dtypes=REDUCED),
    binary("mul", grad=(R3, R3), cgrad=True, gradcheck=True, supports_gradgrad=True),
    binary("div", covers=("true_divide",), domain=NONZERO_RHS, grad=(R3, NZ), cgrad=True, supports_gradgrad=True),
    binary("true_divide", domain=NONZERO_RHS, grad=(R3, NZ)),
    binary("div", variant="trunc", covers=("div_trunc",), domain=NONZERO_RHS, grad=(R3, NZ),
           kwargs={"rounding_mode": "trunc"}, inplace="div_"),
    binary("div", variant="floor", covers=("floor_divide",), domain=NONZERO_RHS, grad=(R3, NZ),
           kwargs={"rounding_mode": "floor"}, inplace="div_"),
    binary("floor_divide", domain=NONZERO_RHS, grad=False),
    binary("remainder", domain=NONZERO_RHS, grad=(R3, (0.7, 1.3, ()))),
    binary("fmod", domain=NONZERO_RHS, grad=(R3, (-1.3, -0.7, ()))),
    binary("pow", domain=((0, 3), (0, 3)), grad=(POS, R3), cgrad=True, loose=1e-5, supports_gradgrad=True),
    binary("atan2", grad=(R3, R3), loose=1e-5, supports_gradgrad=True),
    binary("maximum", grad=(R3, R3)),
    binary("minimum", grad=(R3, R3)),
    binary("fmax", grad=(R3, R3)),
    binary("fmin", grad=(R3, R3)),
    binary("hypot", grad=(R3, R3), loose=1e-5),
    binary("copysign", grad=(NZ, NZ)),
    binary("nextafter", grad=(R3, R3), extra={"special_ref": None}),  # the next float of the dtype itself
    binary("bitwise_and", grad=False),
    binary("bitwise_or", grad=False),
    binary("bitwise_xor", grad=False),
    binary("bitwise_left_shift", domain=SHIFT, grad=False),
    binary("bitwise_right_shift", domain=SHIFT, grad=False),
    binary("logical_and", grad=False),
    binary("logical_or", grad=False),
    binary("logical_xor", grad=False),
    binary("eq", grad=False),
    binary("ne", grad=False),
    binary("lt", grad=False),
    binary("le", grad=False),
    binary("gt", grad=False),
    binary("ge", grad=False),
    binary("xlogy", grad=(R3, POS), loose=1e-5),
    binary("logaddexp", grad=(R3, R3), loose=1e-5),
    binary("logaddexp2", grad=(R3, R3), loose=1e-5),
    binary("gcd", grad=False),
    binary("lcm", grad=False),
    # clamp with tensor bounds: clamp_min_tensor / clamp_max_tensor
    binary("clamp", variant="min_tensor", covers=("clamp_min_tensor",), grad=(R3, R3), inplace=None, scalars=False,
           kiln_fn=lambda a, b, **kw: kiln.clamp(a, min=b, **kw), extra={"promote": False},
           torch_fn=lambda a, b, **kw: torch.clamp(a, min=b, **kw)),
    binary("clamp", variant="max_tensor", covers=("clamp_max_tensor",), grad=(R3, R3), inplace=None, scalars=False,
           kiln_fn=lambda a, b, **kw: kiln.clamp(a, max=b, **kw), extra={"promote": False},
           torch_fn=lambda a, b, **kw: torch.clamp(a, max=b, **kw)),
    binary("polar", domain=((0, 5), (-5, 5)), grad=(POS, R3), same_shape=True, loose=1e-5, inplace=None),
    binary("complex", grad=(R3, R3), same_shape=True, inplace=None),
]


# ---- families: reductions and scans ------------------------------------------------------------------
def reduction_samples(op, dtype, grad):
    """Full and per-dim reductions of contiguous, permuted and sliced inputs; 0-dim, empty, special."""
    for s in _reduction_samples(op, dtype, grad):
        if not op.extra.get("full_only") or "full" in s.desc:
            yield s


def _reduction_samples(op, dtype, grad):
    tuple_dims = op.extra.get("tuple_dims", True)
    dim_kw = op.extra.get("dim_kw", "dim")
    s = _seed(op.id, dtype)
    x = T((3, 4, 5), dtype, seed=s, low=op.extra.get("low", -5), high=op.extra.get("high", 5))
    if grad:
        x = G((3, 4, 5), dtype, seed=s, away=op.kinks)
    full_ok = op.extra.get("full", True)

    def S(t, desc, **kw):
        return Sample((t,), {**op.extra.get("kwargs", {}), **kw}, desc=desc)
    if full_ok:
        yield S(x, "full")
    yield S(x, "dim1", **{dim_kw: 1})
    yield S(x, "dim-1-keepdim", **{dim_kw: -1, "keepdim": True})
    if tuple_dims:
        yield S(x, "dims(0,2)", **{dim_kw: (0, 2)})
    yield S(x.permute(1, 2, 0), "permuted-dim0", **{dim_kw: 0})
    yield S(x[::2, :, 1::2], "sliced-dim2", **{dim_kw: 2})
    if full_ok:
        yield S(x[::2, :, 1::2], "sliced-full")
    if grad:
        yield S(x[0, 0, 0], "0-dim-dim0", **{dim_kw: 0})
        return
    yield S(T((), dtype, seed=s + 1), "0-dim-dim0", **{dim_kw: 0})
    if full_ok:
        yield S(T((), dtype, seed=s + 1), "0-dim-full")
    e = T((0, 4), dtype, seed=s + 2)
    yield S(e, "empty-dim0", **{dim_kw: 0})
    yield S(e, "empty-dim1", **{dim_kw: 1})
    if full_ok:
        yield S(e, "empty-full")
    for out_dt in op.extra.get("dtype_kw", ()):
        yield S(x, f"dtype={out_dt}", **{dim_kw: 1, "dtype": tdt(out_dt)})
    if dtype in FLOATS:
        sp = T((4, 8), dtype, special=True, seed=s + 3)
        if full_ok:
            yield S(sp, "special-full")
        yield S(sp, "special-dim1", **{dim_kw: 1})


def _red_tol(extra=None):
    """torch's default tolerances, with a looser float32 one (another summation order moves the last
    bits) and float16's widened as test_reduce does."""
    t = {"float16": (2e-3, 1e-5), "float32": (1e-5, 1e-5), "complex64": (1e-5, 1e-5)}
    t.update(extra or {})
    return t


def reduction(name, variant="", covers=(), dtypes=ALL, out=True, grad=True, tol=None, **extra):
    kw = {k: extra.pop(k) for k in list(extra) if k in ("kinks", "gradcheck", "supports_gradgrad", "skips",
                                                         "xfails", "kiln_fn", "torch_fn", "ref", "ref_dtypes")}
    return OpInfo(name, reduction_samples, variant=variant, covers=covers or (name,), dtypes=dtypes,
                  supports_out=out, supports_grad=grad, tol=_red_tol(tol), extra=extra, **kw)


HALF_ACC = {"float16": (2e-3, 0.1), "bfloat16": (1.6e-2, 0.1)}  # torch sums nan* in the reduced type

REDUCTION_OPS = [
    reduction("sum", dtype_kw=("float64", "int64"), gradcheck=True),
    reduction("nansum", dtype_kw=("float64",), tol=HALF_ACC),
    reduction("mean", dtype_kw=("float64",), supports_gradgrad=True),
    reduction("prod", tuple_dims=False, dtype_kw=("float64", "int64"), low=-2, high=2),
    reduction("amax"),
    reduction("amin"),
    reduction("all", grad=False),
    reduction("any", grad=False),
    reduction("linalg.vector_norm", variant="l1", covers=("norm_l1",), kwargs={"ord": 1},
              dtypes=FLOATS + COMPLEX + ("int64",), kinks=(0,)),
    reduction("linalg.vector_norm", variant="l2", covers=("norm_l2sq",), dtypes=FLOATS + COMPLEX + ("int64",),
              kinks=(0,)),
    reduction("max", variant="dim", covers=("max_dim",), full=False, tuple_dims=False),
    reduction("min", variant="dim", covers=("min_dim",), full=False, tuple_dims=False),
    reduction("max", variant="full", covers=("amax",), full_only=True),
    reduction("min", variant="full", covers=("amin",), full_only=True),
]


def dim_samples(op, dtype, grad):
    """Ops taking one `dim` (softmax, scans): each dim of a 3-D input, strided, 0-dim, empty, special."""
    s = _seed(op.id, dtype)
    low, high = op.extra.get("low", -5), op.extra.get("high", 5)
    x = G((3, 4, 5), dtype, low=max(low, -3), high=min(high, 3), seed=s) if grad else \
        T((3, 4, 5), dtype, low=low, high=high, seed=s)
    kw = op.extra.get("kwargs", {})
    for d in (0, 1, -1):
        yield Sample((x,), {"dim": d, **kw}, desc=f"dim{d}")
    yield Sample((x.permute(2, 0, 1),), {"dim": 1, **kw}, desc="permuted")
    yield Sample((x[:, ::2, 1:],), {"dim": 2, **kw}, desc="sliced")
    if grad:
        yield Sample((x[0, 0, 0],), {"dim": 0, **kw}, desc="0-dim")
        return
    yield Sample((T((), dtype, seed=s + 1),), {"dim": 0, **kw}, desc="0-dim")
    yield Sample((T((0, 3), dtype, seed=s + 2),), {"dim": 0, **kw}, desc="empty")
    for out_dt in op.extra.get("dtype_kw", ()):
        yield Sample((x,), {"dim": 1, "dtype": tdt(out_dt), **kw}, desc=f"dtype={out_dt}")
    if dtype in FLOATS:
        yield Sample((T((4, 8), dtype, special=True, seed=s + 3),), {"dim": 1, **kw}, desc="special")


def dim_op(name, dtypes, variant="", covers=(), out=True, grad=True, tol=None, **extra):
    kw = {k: extra.pop(k) for k in list(extra) if k in ("gradcheck", "supports_gradgrad", "skips", "xfails",
                                                         "kiln_fn", "torch_fn", "ref", "ref_dtypes",
                                                         "inplace_variant")}
    return OpInfo(name, dim_samples, variant=variant, covers=covers or (name,), dtypes=dtypes, supports_out=out,
                  supports_grad=grad, tol=_red_tol(tol), extra=extra, **kw)


SCAN_OPS = [
    dim_op("nn.functional.softmax", FLOATS + ("int64",), covers=("softmax",), out=False, dtype_kw=("float64",),
           gradcheck=True, supports_gradgrad=True),
    # torch's float16/bfloat16 log_softmax is a few ulps off the exact value; kiln's is within one
    dim_op("nn.functional.log_softmax", FLOATS + ("int64",), covers=("log_softmax",), out=False,
           dtype_kw=("float64",), supports_gradgrad=True, ref="float64", ref_dtypes=REDUCED),
    dim_op("cumsum", ALL, dtype_kw=("float64", "int64"), inplace_variant="cumsum_", gradcheck=True),
    dim_op("cumprod", ALL, dtype_kw=("float64",), low=-2, high=2, inplace_variant="cumprod_"),
    dim_op("logcumsumexp", FLOATS + COMPLEX + ("int64",)),
    dim_op("cummax", REAL_STRUCT + ("int8", "int16")),
    dim_op("cummin", REAL_STRUCT + ("int8", "int16")),
]


# ---- helpers for hand-written entries ------------------------------------------------------------------
def S(*args, desc="", **kwargs):
    return Sample(tuple(args), kwargs, desc=desc)


def entry(name, gen, **kw):
    """An entry whose samples come from gen(dtype, grad) -> list of Sample. Grad mode drops samples
    marked nograd (descs containing 'empty', 'special' or 'nograd')."""
    def sample_fn(op, dtype, grad):
        for s in gen(dtype, grad):
            if grad and any(w in s.desc for w in ("empty", "special", "nograd", "error")):
                continue
            yield s
    kw.setdefault("dtypes", STRUCT)
    return OpInfo(name, sample_fn, **kw)


def X(shape, dtype, grad, seed=0, low=-5, high=5, **kw):
    """The data input of a structural op: float64 leaf-to-be in grad mode, else `make`."""
    if grad:
        return G(shape, dtype, low=max(low, -3), high=min(high, 3), seed=seed, **kw)
    return T(shape, dtype, low, high, seed)


# ---- shapes and views ------------------------------------------------------------------------------------
def _to_samples(dtype, grad):
    if grad:
        x = G((3, 4), dtype, seed=1)
        return [S(x, torch.float32, desc="to-float32"), S(x, torch.complex128, desc="to-complex128"),
                S(x.t(), torch.float64, desc="same-dtype")]
    # values in [0, 100]: in range for every integer type (out-of-range float -> int is undefined)
    x = T((3, 5), dtype, low=0, high=100, seed=2)
    out = [S(x, tdt(d), desc=f"to-{d}") for d in ALL]
    out.append(S(x.t(), tdt("float64"), desc="transposed-to-float64"))
    out.append(S(T((4, 6), dtype, low=0, high=100, seed=3)[::2, 1::2], tdt("int32"), desc="sliced-to-int32"))
    if dtype in FLOATS:
        sp = T((4, 8), dtype, special=True, seed=4)
        out += [S(sp, tdt(d), desc=f"special-to-{d}") for d in FLOATS + COMPLEX + FLOAT8]
    return out


def _cat_samples(dtype, grad):
    a, b, c = X((2, 3), dtype, grad, 1), X((4, 3), dtype, grad, 2), X((2, 5), dtype, grad, 3)
    out = [S([a, b], desc="dim0"), S([a, c], 1, desc="dim1"), S([a, b.t().contiguous().t(), a], desc="strided"),
           S([a], desc="one"), S((a, a.t().t()), dim=-2, desc="tuple-neg-dim")]
    if not grad:
        out += [S([a, T((0, 3), dtype)], desc="with-empty"), S([a, T((0,), dtype)], desc="legacy-empty-1d"),
                S([a, T((2, 3), "float32" if dtype != "float32" else "int64", seed=4)], desc="promote"),
                S([a, c], desc="error-shape"), S([], desc="error-empty-list")]
    return out


def _view_samples(dtype, grad):
    x = X((3, 4, 5), dtype, grad, 1)
    out = [S(x, (12, 5), desc="merge"), S(x, (-1,), desc="flat"), S(x, (3, 2, 2, 5), desc="split"),
           S(x[:, 1:3], (3, 10), desc="slice-view"), S(x[0, 0, 0], (1, 1), desc="0-dim-up")]
    if not grad:
        out += [S(x.transpose(0, 2), (-1,), desc="error-non-viewable"), S(x, (7, -1), desc="error-numel"),
                S(T((0, 4), dtype), (4, 0), desc="empty")]
    return out


def _reshape_samples(dtype, grad):
    x = X((3, 4, 5), dtype, grad, 1)
    return [S(x, (12, 5), desc="view"), S(x.transpose(0, 2), (-1,), desc="copy-transposed"),
            S(x[:, ::2], (6, 5), desc="copy-sliced"), S(x.permute(2, 0, 1), (5, 12), desc="copy-permuted")]


def _view_dtype_samples(dtype, grad):
    x = T((4, 8), dtype, seed=1)
    size = torch.empty((), dtype=tdt(dtype)).element_size()
    out = []
    for d in ALL:
        out.append(S(x, tdt(d), desc=f"as-{d}"))
    out.append(S(x[:, :4], tdt("int8" if size == 1 else "float16" if size == 2 else "int32"), desc="sliced-same-size"))
    out.append(S(x.t(), tdt("uint8"), desc="transposed-narrower"))
    return out


def _as_strided_samples(dtype, grad):
    x = X((4, 6), dtype, grad, 1)
    return [S(x, (3, 3), (6, 2), desc="sub"), S(x, (2, 2), (1, 6), 3, desc="offset-transposed"),
            S(x, (4, 3), (0, 1), desc="stride0"), S(x.t(), (2, 5), (1, 4), desc="of-transposed"),
            S(x[1:], (2, 2), (6, 1), 1, desc="of-offset-view")]


def _permute_samples(dtype, grad):
    x = X((2, 3, 4), dtype, grad, 1)
    out = [S(x, (2, 0, 1), desc="rotate"), S(x, (0, 1, 2), desc="identity"), S(x.t() if x.dim() == 2 else x[:, ::2],
                                                                                 (1, 2, 0), desc="strided"),
           S(x, (-1, 0, 1), desc="negative"), S(x[0, 0, 0], (), desc="0-dim")]
    if not grad:
        out += [S(x, (0, 0, 1), desc="error-repeated"), S(x, (0, 1), desc="error-length")]
    return out


def _expand_samples(dtype, grad):
    x = X((3, 1), dtype, grad, 1)
    out = [S(x, 3, 4, desc="col"), S(x, 2, 3, 5, desc="new-dims"), S(x, -1, 2, desc="minus-one"),
           S(x[0, 0], 4, desc="0-dim")]
    if not grad:
        out += [S(x, 4, 4, desc="error-size"), S(T((2, 0), dtype), 3, 2, 0, desc="empty")]
    return out


def _getitem_slice_samples(dtype, grad):
    x = X((5, 6), dtype, grad, 1)
    return [S(x, (slice(None, None, 2),), desc="step"), S(x, (slice(1, 3),), desc="range"),
            S(x, (slice(None), slice(1, -1, 2)), desc="inner-step"), S(x.t(), (slice(4, None),), desc="transposed"),
            S(x, (slice(-3, None), Ellipsis), desc="negative-start"), S(x, (slice(10, 20),), desc="empty-beyond")]


def _getitem_select_samples(dtype, grad):
    x = X((4, 5, 3), dtype, grad, 1)
    out = [S(x, (1,), desc="first-dim"), S(x, (slice(None), -1), desc="neg"), S(x, (Ellipsis, 2), desc="ellipsis"),
           S(x, (0, 1, 2), desc="to-0-dim"), S(x, (None, 1), desc="newaxis")]
    if not grad:
        out.append(S(x, (7,), desc="error-out-of-range"))
    return out


def _select_samples(dtype, grad):
    x = X((4, 5, 3), dtype, grad, 1)
    out = [S(x, 0, 1, desc="dim0"), S(x, 1, -1, desc="neg-index"), S(x, -1, 2, desc="neg-dim"),
           S(x.transpose(0, 2), 0, 1, desc="transposed")]
    if not grad:
        out += [S(x, 0, 4, desc="error-index"), S(x, 3, 0, desc="error-dim")]
    return out


def _narrow_samples(dtype, grad):
    x = X((5, 6), dtype, grad, 1)
    return [S(x, 0, 1, 3, desc="dim0"), S(x, 1, -3, 2, desc="neg-start"), S(x.t(), 1, 0, 5, desc="transposed")]


def _unsqueeze_samples(dtype, grad):
    x = X((3, 4), dtype, grad, 1)
    out = [S(x, 0, desc="front"), S(x, -1, desc="back"), S(x.t(), 1, desc="transposed"), S(x[0, 0], 0, desc="0-dim")]
    if not grad:
        out.append(S(x, 3, desc="error-dim"))
    return out


def _squeeze_samples(dtype, grad):
    x = X((3, 1, 4, 1), dtype, grad, 1)
    out = [S(x, desc="all"), S(x, 1, desc="dim"), S(x, (1, 3), desc="dims"), S(x, 0, desc="not-one"),
           S(x, -1, desc="neg"), S(x[0, 0, 0, 0], desc="0-dim"), S(x.transpose(0, 2), desc="transposed")]
    return out


def _diagonal_samples(dtype, grad):
    x = X((3, 4, 5), dtype, grad, 1)
    return [S(x, desc="default"), S(x, 1, desc="offset1"), S(x, -1, 1, 2, desc="neg-offset"),
            S(x, 0, 2, 0, desc="dims-2-0"), S(x.transpose(0, 1), 2, desc="transposed"),
            S(x, 10, desc="empty-offset")]


def _unfold_samples(dtype, grad):
    x = X((4, 7), dtype, grad, 1)
    out = [S(x, 1, 3, 2, desc="dim1"), S(x, 0, 2, 1, desc="dim0"), S(x.t(), 0, 7, 7, desc="whole"),
           S(x[0, 0], 0, 1, 1, desc="0-dim")]
    if not grad:
        out.append(S(x, 1, 8, 1, desc="error-size"))
    return out


def _view_as_real_samples(dtype, grad):
    x = X((3, 4), dtype, grad, 1)
    out = [S(x, desc="contig"), S(x.t(), desc="transposed"), S(x[0, 0], desc="0-dim")]
    return out


def _view_as_complex_samples(dtype, grad):
    x = X((3, 4, 2), dtype, grad, 1)
    out = [S(x, desc="contig"), S(X((2, 2), dtype, grad, 2), desc="pair")]
    if not grad:
        out += [S(x.transpose(0, 1), desc="strided-ok"), S(X((3, 3), dtype, grad, 3), desc="error-last-dim")]
    return out


def _copy_samples(dtype, grad):
    dst = X((3, 4), dtype, grad, 1)
    out = [S(dst, X((3, 4), dtype, grad, 2), desc="same"), S(dst, X((4,), dtype, grad, 3), desc="broadcast"),
           S(dst.t(), X((4, 3), dtype, grad, 4), desc="into-transposed"),
           S(dst, X((4, 3), dtype, grad, 5).t(), desc="from-transposed")]
    if not grad:
        out += [S(dst, T((3, 4), "int64" if dtype != "int64" else "float32", seed=6), desc="cast"),
                S(dst, T((5,), dtype, seed=7), desc="error-shape")]
    return out


def _copy_(dst, src):
    return dst.clone().copy_(src)


def _where_samples(dtype, grad):
    c = bool_mask((4, 5), 1)
    a, b = X((4, 5), dtype, grad, 2), X((1, 5), dtype, grad, 3)
    out = [S(c, a, b, desc="broadcast"), S(c[:, :1], a, b, desc="cond-broadcast"),
           S(c.t(), a.t(), X((4,), dtype, grad, 4), desc="transposed")]
    if not grad:
        out += [S(c, a, 0.5, desc="scalar-other"), S(c, 2, a, desc="scalar-self"),
                S(c.int(), a, b, desc="error-cond-not-bool"),
                S(c, a, T((1, 5), "float64" if dtype != "float64" else "int32", seed=5), desc="promote")]
    return out


SHAPE_OPS = [
    entry("Tensor.to", _to_samples, covers=("to",), dtypes=ALL, exact=True, grad_dtypes=("float64",),
          grad_tol=(1e-6, 1e-6)),
    entry("cat", _cat_samples, dtypes=ALL, supports_out=True),
    entry("Tensor.view", _view_samples, covers=("view",), dtypes=ALL),
    entry("reshape", _reshape_samples, covers=("view", "to"), dtypes=STRUCT),
    entry("Tensor.view", _view_dtype_samples, variant="dtype", covers=("view_dtype",), dtypes=ALL,
          supports_grad=False),
    entry("as_strided", _as_strided_samples, dtypes=STRUCT),
    entry("permute", _permute_samples, dtypes=STRUCT),
    entry("Tensor.expand", _expand_samples, covers=("expand",), dtypes=STRUCT),
    entry("Tensor.__getitem__", _getitem_slice_samples, variant="slice", covers=("slice",), dtypes=STRUCT),
    entry("Tensor.__getitem__", _getitem_select_samples, variant="select", covers=("select",), dtypes=STRUCT),
    entry("select", _select_samples, dtypes=STRUCT),
    entry("narrow", _narrow_samples, covers=("slice",), dtypes=STRUCT),
    entry("unsqueeze", _unsqueeze_samples, dtypes=STRUCT),
    entry("squeeze", _squeeze_samples, dtypes=STRUCT),
    entry("diagonal", _diagonal_samples, dtypes=STRUCT),
    entry("Tensor.unfold", _unfold_samples, covers=("unfold",), dtypes=STRUCT),
    entry("view_as_real", _view_as_real_samples, dtypes=COMPLEX + ("float32",), grad_dtypes=("complex128",)),
    entry("view_as_complex", _view_as_complex_samples, dtypes=F32_64 + ("float16", "int64")),
    entry("Tensor.copy_", _copy_samples, covers=("copy_",), kiln_fn=_copy_, torch_fn=_copy_, dtypes=STRUCT),
    entry("where", _where_samples, dtypes=STRUCT, supports_out=True, method=False),  # x.where(c, y) is where(c, x, y)
]


# ---- indexing ----------------------------------------------------------------------------------------------
def _index_select_samples(dtype, grad):
    x = X((4, 5), dtype, grad, 1)
    out = [S(x, 0, idx([0, 2, 3, 2]), desc="dim0-dups"), S(x, 1, idx([4, 0]), desc="dim1"),
           S(x.t(), -1, idx([1, 3], torch.int32), desc="transposed-int32"), S(x, 0, idx(2), desc="0-dim-index"),
           S(x[0, 0], 0, idx([0]), desc="0-dim-self")]
    if not grad:
        out += [S(x[0, 0], 0, idx([0, 0]), desc="error-0-dim-self-2-values"), S(x, 0, idx([], torch.int64), desc="empty-index"), S(x, 0, idx([4]), desc="error-out-of-range"),
                S(x, 0, idx([0.0], torch.float32), desc="error-float-index")]
    return out


def _gather_samples(dtype, grad):
    x = X((3, 4), dtype, grad, 1)
    out = [S(x, 1, rand_index((3, 2), 4, 2), desc="dim1"), S(x, 0, rand_index((2, 4), 3, 3), desc="dim0"),
           S(x.t(), 0, rand_index((4, 3), 4, 4), desc="transposed"),
           S(x, -1, rand_index((2, 3), 4, 5), desc="smaller-index"),
           S(x, 1, rand_index((4, 2), 4, 6).t()[:3], desc="strided-index")]
    if not grad:
        out += [S(x, 1, idx([[4]]), desc="error-out-of-range"), S(x, 1, rand_index((3, 0), 4), desc="empty-index")]
    return out


def _nonzero_samples(dtype, grad):
    x = T((4, 5), dtype, low=-1, high=1, seed=1)
    return [S(x, desc="2-d"), S(x.t(), desc="transposed"), S(T((), dtype, low=1, high=2, seed=2), desc="0-dim"),
            S(T((0, 3), dtype), desc="empty"), S(T((2, 3, 2), dtype, low=-1, high=1, seed=3), desc="3-d"),
            S(x, as_tuple=True, desc="as_tuple")]


def _masked_select_samples(dtype, grad):
    x = X((4, 5), dtype, grad, 1)
    out = [S(x, bool_mask((4, 5), 2), desc="same"), S(x, bool_mask((5,), 3), desc="broadcast-mask"),
           S(x.t(), bool_mask((5, 4), 4), desc="transposed"), S(x[:1], bool_mask((3, 5), 5), desc="broadcast-self")]
    if not grad:
        out += [S(x, bool_mask((4, 5), 6).int(), desc="error-int-mask")]
    return out


def _flip_samples(dtype, grad):
    x = X((3, 4, 2), dtype, grad, 1)
    out = [S(x, (0,), desc="dim0"), S(x, (0, 2), desc="dims"), S(x, (-1,), desc="neg"), S(x.transpose(0, 1), (1,),
                                                                                              desc="transposed"),
           S(x, (), desc="none")]
    if not grad:
        out.append(S(x, (0, 0), desc="error-repeated"))
    return out


def _tri_samples(dtype, grad):
    x = X((4, 5), dtype, grad, 1)
    out = [S(x, desc="default"), S(x, 1, desc="k1"), S(x, -2, desc="k-2"), S(x.t(), desc="transposed"),
           S(X((2, 3, 4), dtype, grad, 2), 1, desc="batched"), S(x, 10, desc="k-beyond")]
    if not grad:
        out.append(S(X((4,), dtype, grad, 3), desc="error-1d"))
    return out


def _getitem_index_samples(dtype, grad):
    x = X((4, 5), dtype, grad, 1)
    out = [S(x, (idx([0, 2, 2]),), desc="rows-dups"), S(x, (slice(None), idx([4, 0])), desc="cols"),
           S(x, (idx([0, 3]), idx([1, 4])), desc="pairs"), S(x, (idx([[0], [3]]), idx([1, 4])), desc="broadcast-pairs"),
           S(x.t(), (idx([1, -1]),), desc="transposed-neg"), S(x, (idx(2),), desc="0-dim-index"),
           S(x, (None, idx([1, 2])), desc="newaxis")]
    mask = bool_mask((4, 5), 2)
    out.append(Sample((x, (mask,)), desc="bool-mask", meta=False))
    out.append(Sample((x, (bool_mask((4,), 3),)), desc="bool-rows", meta=False))
    if not grad:
        out += [S(x, (idx([4]),), desc="error-out-of-range")]
    return out


def _getitem(x, key):
    return x[key]


def _setitem(x, key, v):
    y = x.clone()
    y[key] = v
    return y


def _setitem_samples(dtype, grad):
    x = X((4, 5), dtype, grad, 1)
    out = [S(x, (idx([0, 2]),), X((5,), dtype, grad, 2), desc="rows-bcast-values"),
           S(x, (idx([0, 3]), idx([1, 4])), X((2,), dtype, grad, 3), desc="pairs"),
           S(x, (slice(None), idx([4, 0])), X((4, 2), dtype, grad, 4), desc="cols"),
           S(x.t(), (idx([1]),), X((1, 4), dtype, grad, 5), desc="transposed")]
    out.append(Sample((x, (bool_mask((4, 5), 6),), X((), dtype, grad, 7)), desc="bool-mask"))
    if not grad:
        out += [S(x, (idx([0]),), 1.5 if dtype not in ("bool",) else True, desc="number"),
                S(x, (idx([0]),), T((5,), "float64" if dtype != "float64" else "int64", seed=8), desc="cast-values"),
                S(x, (idx([9]),), X((5,), dtype, grad, 9), desc="error-out-of-range")]
    return out


def _index_put_samples(dtype, grad):
    x = X((4, 5), dtype, grad, 1)
    i0, i1 = idx([0, 3, -1, 0]), idx([1, 1, 4, 1])
    return [S(x, (i0, i1), X((4,), dtype, grad, 2), desc="dups"),
            S(x, (i0,), X((5,), dtype, grad, 3), desc="rows"),
            S(x, (i0, i1), X((4,), dtype, grad, 4), accumulate=True, desc="accumulate"),
            S(x.t(), (idx([1, 1]),), X((4,), dtype, grad, 5), accumulate=True, desc="accumulate-transposed")]


def _scatter_samples(dtype, grad):
    x, src = X((4, 5), dtype, grad, 1), X((6, 5), dtype, grad, 2)
    # unique targets per column: which duplicate wins is up to the kernel (torch documents it undefined)
    i0 = torch.stack([torch.randperm(4, generator=torch.Generator().manual_seed(c))[:3] for c in range(5)], 1)
    i1, i2 = perm_rows(4, 5, 3, 3), perm_rows(2, 5, 4, 4).t().contiguous()
    if grad:  # torch's gradient of src has the index's shape: src must have it too
        out = [S(x, 0, i0, src[:3], desc="dim0"), S(x, 1, i1, src[:4, :3], desc="dim1"),
               S(x.t(), 0, i2, src.t()[:4, :2], desc="transposed")]
        return out
    out = [S(x, 0, i0, src, desc="dim0"), S(x, 1, i1, src[:4], desc="dim1"),
           S(x.t(), 0, i2, src.t(), desc="transposed")]
    if not grad:
        out += [S(x, 0, i0, src, reduce="add", desc="reduce-add"), S(x, 0, i0, src, reduce="multiply",
                                                                    desc="reduce-multiply"),
                S(x, 0, idx([[5]]), src, desc="error-out-of-range")]
    return out


def _scatter_value_samples(dtype, grad):
    x = X((4, 5), dtype, grad, 1)
    i0 = rand_index((3, 5), 4, 2)
    val = True if dtype == "bool" else 2
    out = [S(x, 0, i0, value=val, desc="dim0"), S(x, 1, rand_index((4, 2), 5, 3), value=val, desc="dim1"),
           S(x.t(), 0, rand_index((2, 4), 5, 4), value=val, desc="transposed")]
    if not grad:
        out += [S(x, 0, i0, value=-1.5, desc="float-value"), S(x, 0, i0, value=2, reduce="add", desc="reduce-add")]
    return out


def _scatter_add_samples(dtype, grad):
    x, src = X((4, 5), dtype, grad, 1), X((7, 6), dtype, grad, 2)
    out = [S(x, 0, rand_index((7, 5), 4, 3), src[:, :5], desc="dim0-dups"),
           S(x, 1, rand_index((4, 6), 5, 4), src[:4], desc="dim1-dups"),
           S(x.t(), 1, rand_index((5, 3), 4, 5), src[:5, :3] if grad else src[:5], desc="transposed")]
    return out


def _scatter_reduce_samples(dtype, grad):
    x, src = X((5, 4), dtype, grad, 1, low=-3, high=3), X((8, 4), dtype, grad, 2, low=-3, high=3)
    out = []
    for r in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            # gradient samples: no duplicate targets (torch's amax/amin/prod gradients on ties are its own)
            i = perm_rows(4, 5, 4, 3).t() if grad else rand_index((8, 4), 3, 3)
            out.append(S(x, 0, i, src[:i.shape[0]], r, include_self=inc, desc=f"{r}-self{inc}"))
    return out


def _index_add_samples(dtype, grad):
    x, src = X((4, 5), dtype, grad, 1), X((3, 5), dtype, grad, 2)
    out = [S(x, 0, idx([0, 2, 0]), src, desc="dim0-dups"), S(x, 1, idx([4, 1]), X((4, 2), dtype, grad, 3),
                                                               desc="dim1"),
           S(x, 0, idx([1, 2, 3]), src, alpha=2, desc="alpha"), S(x.t(), 0, idx([3]), X((1, 4), dtype, grad, 4),
                                                                  desc="transposed")]
    if not grad:
        out.append(S(x, 0, idx([7]), src[:1], desc="error-out-of-range"))
    return out


def _index_copy_samples(dtype, grad):
    x, src = X((4, 5), dtype, grad, 1), X((3, 5), dtype, grad, 2)
    return [S(x, 0, idx([0, 2, 3]), src, desc="dim0"), S(x, 1, idx([4, 1]), X((4, 2), dtype, grad, 3), desc="dim1"),
            S(x.t(), 0, idx([3]), X((1, 4), dtype, grad, 4), desc="transposed")]


def _index_fill_samples(dtype, grad):
    x = X((4, 5), dtype, grad, 1)
    v = True if dtype == "bool" else -2
    return [S(x, 0, idx([0, 2]), v, desc="dim0"), S(x, 1, idx([4, 4]), v, desc="dim1-dups"),
            S(x.t(), 0, idx([3]), v, desc="transposed"), S(x, 0, idx([1]), 1.5, desc="float-value")]


def _masked_scatter_samples(dtype, grad):
    x, src = X((4, 5), dtype, grad, 1), X((25,), dtype, grad, 2)
    return [S(x, bool_mask((4, 5), 3), src, desc="same"), S(x, bool_mask((5,), 4), src.view(5, 5), desc="bcast-mask"),
            S(x.t(), bool_mask((5, 4), 5), src, desc="transposed")]


def _take_samples(dtype, grad):
    x = X((4, 5), dtype, grad, 1)
    out = [S(x, rand_index((3, 2), 20, 2), desc="2-d-index"), S(x.t(), idx([0, 19, -1]), desc="transposed-neg"),
           S(x, idx(7), desc="0-dim-index")]
    if not grad:
        out.append(S(x, idx([20]), desc="error-out-of-range"))
    return out


def _put_samples(dtype, grad):
    x = X((4, 5), dtype, grad, 1)
    out = [S(x, idx([0, 7, 19]), X((3,), dtype, grad, 2), desc="unique"),
           S(x, idx([1, 1, -1]), X((3,), dtype, grad, 3), accumulate=True, desc="accumulate-dups")]
    return out


def _take_along_dim_samples(dtype, grad):
    x = X((3, 4), dtype, grad, 1)
    return [S(x, rand_index((3, 2), 4, 2), 1, desc="dim1"), S(x, rand_index((1, 4), 3, 3), 0, desc="bcast-dim0"),
            S(x, rand_index((5,), 12, 4), desc="flat"), S(x.t(), rand_index((4, 3), 3, 5), -1, desc="transposed")]


def _searchsorted_samples(dtype, grad):
    seq = torch.sort(T((8,), dtype, seed=1)).values
    vals = T((3, 4), dtype, seed=2)
    nd = torch.sort(T((3, 6), dtype, seed=3), dim=-1).values
    unsorted = T((6,), dtype, seed=4)
    return [S(seq, vals, desc="1-d"), S(seq, vals, right=True, desc="right"), S(seq, vals, side="right", desc="side"),
            S(nd, T((3, 2), dtype, seed=5), desc="n-d"), S(seq, vals, out_int32=True, desc="int32"),
            S(unsorted, vals, sorter=torch.argsort(unsorted), desc="sorter"), S(seq, 1, desc="scalar-value")]


def _bucketize_samples(dtype, grad):
    b = torch.sort(T((6,), dtype, seed=1)).values
    v = T((3, 4), dtype, seed=2)
    return [S(v, b, desc="default"), S(v, b, right=True, desc="right"), S(v, b, out_int32=True, desc="int32")]


def _histc_samples(dtype, grad):
    x = T((50,), dtype, seed=1)
    return [S(x, desc="default"), S(x, bins=7, min=-3, max=3, desc="range"), S(x.view(5, 10).t(), bins=4,
                                                                                 desc="transposed"),
            S(T((0,), dtype), bins=3, desc="empty")]


def _bincount_samples(dtype, grad):
    x = T((20,), dtype, low=0, high=9, seed=1)
    w = T((20,), "float64", seed=2)
    return [S(x, desc="default"), S(x, minlength=15, desc="minlength"), S(x, w, desc="weights"),
            S(T((0,), dtype), desc="empty"), S(T((0,), dtype), minlength=3, desc="empty-minlength")]


def _roll_samples(dtype, grad):
    x = X((4, 5), dtype, grad, 1)
    return [S(x, 1, desc="flat"), S(x, -7, desc="flat-neg"), S(x, (1, -2), (0, 1), desc="dims"),
            S(x.t(), 2, 0, desc="transposed"), S(x, 3, -1, desc="neg-dim")]


def _repeat_samples(dtype, grad):
    x = X((2, 3), dtype, grad, 1)
    out = [S(x, 2, 1, desc="rows"), S(x, 1, 2, 3, desc="new-dim"), S(x.t(), 2, 2, desc="transposed"),
           S(x[0, 0], 3, desc="0-dim")]
    if not grad:
        out += [S(x, 2, desc="error-too-few"), S(x, 0, 2, desc="zero")]
    return out


def _repeat_interleave_samples(dtype, grad):
    return [Sample((idx([1, 2, 0, 3]),), desc="counts", meta=False),
            Sample((idx([2, 2], torch.int32),), desc="int32", meta=False),
            S(idx([1, 2, 0, 3]), output_size=6, desc="output_size"), Sample((idx([], torch.int64),), desc="empty"),
            Sample((idx([1, -1]),), desc="error-negative", meta=False)]


def _repeat_interleave_self_samples(dtype, grad):
    x = X((3, 4), dtype, grad, 1)
    return [S(x, 2, desc="flat"), S(x, 2, 0, desc="dim0"), Sample((x, idx([1, 0, 2]), 0), desc="tensor-dim0",
                                                                     meta=False),
            S(x.t(), idx([1, 0, 2]), 1, output_size=3, desc="tensor-output_size")]


def _diag_samples(dtype, grad):
    v, m = X((4,), dtype, grad, 1), X((3, 5), dtype, grad, 2)
    out = [S(v, desc="vec"), S(v, 1, desc="vec-k1"), S(v, -2, desc="vec-k-2"), S(m, desc="mat"),
           S(m, 2, desc="mat-k2"), S(m.t(), -1, desc="mat-transposed")]
    if not grad:
        out.append(S(X((2, 2, 2), dtype, grad, 3), desc="error-3d"))
    return out


def _trace_samples(dtype, grad):
    m = X((3, 5), dtype, grad, 1)
    out = [S(m, desc="wide"), S(X((4, 2), dtype, grad, 2), desc="tall"), S(m.t(), desc="transposed"),
           S(X((0, 3), dtype, grad, 3), desc="empty")]
    if not grad:
        out += [S(X((4,), dtype, grad, 4), desc="error-1d"), S(X((2, 2, 2), dtype, grad, 5), desc="error-3d")]
    return out


def _diag_embed_samples(dtype, grad):
    x = X((2, 3), dtype, grad, 1)
    return [S(x, desc="default"), S(x, 1, desc="offset"), S(x, -1, 0, 2, desc="dims"), S(x.t(), 0, 1, 0,
                                                                                      desc="transposed")]


def _pad_const_samples(dtype, grad):
    x = X((2, 3, 4), dtype, grad, 1)
    return [S(x, (1, 2), desc="last"), S(x, (1, 1, 0, 2), value=3.0 if dtype != "bool" else 1, desc="value"),
            S(x, (-1, 1), desc="negative"), S(x.transpose(0, 2), (0, 0, 1, 0, 2, 1), desc="transposed-3")]


def _pad_mode_samples(dtype, grad):
    x = X((2, 3, 5), dtype, grad, 1)
    x4 = X((1, 2, 4, 5), dtype, grad, 2)
    out = []
    for mode in ("reflect", "replicate", "circular"):
        out += [S(x, (2, 1), mode=mode, desc=f"{mode}-1d"), S(x4, (1, 2, 2, 1), mode=mode, desc=f"{mode}-2d"),
                S(x.transpose(1, 2), (1, 1), mode=mode, desc=f"{mode}-transposed")]
    return out


def _embedding_samples(dtype, grad):
    w = X((6, 4), dtype, grad, 1)
    i = rand_index((3, 2), 6, 2)
    out = [S(i, w, desc="2-d"), S(idx([5, 0, 5]), w.t().contiguous().t(), desc="strided-weight"),
           S(i, w, padding_idx=1, desc="padding_idx"), S(idx(3), w, desc="0-dim")]
    if not grad:
        out.append(S(idx([6]), w, desc="error-out-of-range"))
    return out


INDEX_OPS = [
    entry("index_select", _index_select_samples, supports_out=True, gradcheck=True),
    entry("gather", _gather_samples, supports_out=True),
    entry("nonzero", _nonzero_samples, supports_grad=False, meta=False, meta_reason="output shape depends on data"),
    entry("masked_select", _masked_select_samples, supports_out=True, meta=False,
          meta_reason="output shape depends on data"),
    entry("flip", _flip_samples),
    entry("tril", _tri_samples, supports_out=True, inplace_variant="tril_"),
    entry("triu", _tri_samples, supports_out=True, inplace_variant="triu_"),
    entry("Tensor.__getitem__", _getitem_index_samples, variant="index", covers=("index",), kiln_fn=_getitem,
          torch_fn=_getitem, gradcheck=True),
    entry("Tensor.__setitem__", _setitem_samples, covers=("index_put_",), kiln_fn=_setitem, torch_fn=_setitem),
    entry("index_put", _index_put_samples, covers=("index_put_",), inplace_variant="index_put_"),
    entry("scatter", _scatter_samples, inplace_variant="scatter_"),
    entry("scatter", _scatter_value_samples, variant="value", covers=("scatter.value",), inplace_variant="scatter_"),
    entry("scatter_add", _scatter_add_samples, inplace_variant="scatter_add_"),
    entry("scatter_reduce", _scatter_reduce_samples, dtypes=NUMERIC, inplace_variant="scatter_reduce_"),
    entry("index_add", _index_add_samples, inplace_variant="index_add_"),
    entry("index_copy", _index_copy_samples, inplace_variant="index_copy_"),
    entry("index_fill", _index_fill_samples, inplace_variant="index_fill_"),
    entry("masked_scatter", _masked_scatter_samples, inplace_variant="masked_scatter_"),
    entry("take", _take_samples, supports_out=True),
    entry("Tensor.put", _put_samples, covers=("put",), inplace_variant="put_"),
    entry("take_along_dim", _take_along_dim_samples),
    entry("searchsorted", _searchsorted_samples, dtypes=NUMERIC, supports_grad=False, supports_out=True),
    entry("bucketize", _bucketize_samples, covers=("searchsorted",), dtypes=NUMERIC, supports_grad=False,
          supports_out=True),
    entry("histc", _histc_samples, dtypes=NUMERIC, supports_grad=False, supports_out=True),
    entry("bincount", _bincount_samples, dtypes=("uint8", "int8", "int16", "int32", "int64", "float32", "bool"),
          supports_grad=False, meta=False, meta_reason="output length is the largest value + 1"),
    entry("roll", _roll_samples),
    entry("Tensor.repeat", _repeat_samples, covers=("repeat",)),
    entry("repeat_interleave", _repeat_interleave_samples, dtypes=("int64",), supports_grad=False, method=False),
    entry("repeat_interleave", _repeat_interleave_self_samples, variant="self", covers=("repeat_interleave",)),
    entry("diag", _diag_samples, supports_out=True),
    entry("trace", _trace_samples),
    entry("diag_embed", _diag_embed_samples),
    entry("nn.functional.pad", _pad_const_samples, variant="constant", covers=("constant_pad_nd",)),
    entry("nn.functional.pad", _pad_mode_samples, covers=("pad",), dtypes=FLOATS + ("complex64", "int64", "bool")),
    entry("nn.functional.embedding", _embedding_samples, covers=("embedding", "index_add"), dtypes=FLOATS + ("int64",)),
]


# ---- sorting and order statistics ---------------------------------------------------------------------------
def V(shape, dtype, grad, seed=0):
    """Tie-free values for ops that return indices (which of two equal elements comes first is up to
    the algorithm for the unstable ones); gradient samples too (a tie makes the gradient ambiguous)."""
    return distinct(shape, dtype, seed)


def _sort_samples(dtype, grad):
    x = V((4, 6), dtype, grad, 1)
    out = [S(x, desc="last"), S(x, 0, desc="dim0"), S(x, descending=True, desc="descending"),
           S(x.t(), -1, desc="transposed"), S(x[0, 0], desc="0-dim"), S(x, dim=1, stable=True, desc="stable")]
    if not grad:
        ties = T((3, 8), dtype, low=-2, high=2, seed=2)
        out += [S(ties, stable=True, desc="stable-ties"),
                S(ties, descending=True, stable=True, desc="stable-desc-ties"),
                S(T((0, 3), dtype), desc="empty")]
        if dtype in FLOATS:
            out.append(S(T((4, 8), dtype, special=True, seed=3), stable=True, desc="special-stable"))
    return out


def _argsort_samples(dtype, grad):
    x = V((4, 6), dtype, grad, 1)
    return [S(x, desc="last"), S(x, 0, desc="dim0"), S(x, descending=True, desc="descending"),
            S(T((3, 8), dtype, low=-2, high=2, seed=2), stable=True, desc="stable-ties")]


def _topk_samples(dtype, grad):
    x = V((4, 7), dtype, grad, 1)
    out = [S(x, 3, desc="k3"), S(x, 2, 0, desc="dim0"), S(x, 3, largest=False, desc="smallest"),
           S(x.t(), 2, -1, desc="transposed"), S(x, 7, desc="k-all"), S(x, 0, desc="k0")]
    if not grad:
        out.append(S(x, 8, desc="error-k"))
    return out


def _kthvalue_samples(dtype, grad):
    x = V((4, 7), dtype, grad, 1)
    out = [S(x, 3, desc="k3"), S(x, 2, 0, desc="dim0"), S(x, 1, keepdim=True, desc="keepdim"),
           S(x.t(), 4, -1, desc="transposed")]
    if not grad:
        out.append(S(x, 8, desc="error-k"))
    return out


def _median_samples(dtype, grad):
    x = V((4, 7), dtype, grad, 1)
    out = [S(x, desc="full"), S(x, 1, desc="dim1"), S(x, 0, keepdim=True, desc="dim0-keepdim"),
           S(x.t(), -1, desc="transposed"), S(V((4, 6), dtype, grad, 2), 1, desc="even")]
    if not grad and dtype in FLOATS:
        out += [S(T((4, 8), dtype, special=True, seed=3), 1, desc="special-dim"),
                S(T((4, 8), dtype, special=True, seed=3), desc="special-full")]
    return out


def _mode_samples(dtype, grad):
    x = T((4, 9), dtype, low=-2, high=2, seed=1)
    return [S(x, desc="last"), S(x, 0, desc="dim0"), S(x.t(), 0, keepdim=True, desc="transposed-keepdim")]


def _quantile_samples(dtype, grad):
    x = X((4, 7), dtype, grad, 1, low=-40, high=40)
    q = torch.tensor([0.0, 0.125, 0.5, 0.9, 1.0], dtype=tdt(dtype) if dtype in FLOATS else torch.float32)
    out = [S(x, 0.3, desc="full"), S(x, 0.5, 1, desc="dim1"), S(x, q, 0, keepdim=True, desc="tensor-q"),
           S(x.t(), 0.25, -1, desc="transposed")]
    for interp in ("lower", "higher", "nearest", "midpoint"):
        out.append(S(x, 0.4, 1, interpolation=interp, desc=interp))
    if not grad:
        out.append(S(x, 1.5, desc="error-q"))
        out.append(S(T((4, 8), dtype, special=True, seed=2), 0.5, 1, desc="special"))
    return out


def _unique_samples(dtype, grad):
    x = T((5, 6), dtype, low=-3, high=3, seed=1)
    out = []
    for inv in (False, True):
        for cnt in (False, True):
            out.append(Sample((x,), {"return_inverse": inv, "return_counts": cnt}, desc=f"inv{inv}-cnt{cnt}",
                              meta=False))
    out += [Sample((x,), {"dim": 1, "return_inverse": True}, desc="dim1", meta=False),
            Sample((x.t(),), {"sorted": True}, desc="transposed", meta=False),
            Sample((T((0,), dtype),), desc="empty", meta=False)]
    return out


def _unique_consecutive_samples(dtype, grad):
    x = T((24,), dtype, low=-1, high=1, seed=1)
    return [Sample((x,), desc="plain", meta=False),
            Sample((x,), {"return_inverse": True, "return_counts": True}, desc="inv-cnt", meta=False),
            Sample((x.view(4, 6),), {"dim": 0, "return_counts": True}, desc="dim0", meta=False)]


SORT_OPS = [
    entry("sort", _sort_samples, dtypes=REAL_STRUCT + ("int8", "int16"), supports_out=True),
    entry("argsort", _argsort_samples, covers=("sort",), dtypes=REAL_STRUCT, supports_grad=False),
    entry("msort", lambda dt, g: [S(V((5, 3), dt, g, 1), desc="2-d")], covers=("sort",), dtypes=REAL_STRUCT),
    entry("topk", _topk_samples, dtypes=NUMERIC, supports_out=True),
    entry("kthvalue", _kthvalue_samples, dtypes=NUMERIC, supports_out=True),
    entry("median", _median_samples, covers=("median", "median_dim"), dtypes=NUMERIC, supports_out=True),
    entry("nanmedian", _median_samples, covers=("nanmedian", "nanmedian_dim"), dtypes=NUMERIC, supports_out=True),
    entry("mode", _mode_samples, dtypes=REAL_STRUCT, supports_grad=False, supports_out=True),
    entry("quantile", _quantile_samples, dtypes=F32_64 + ("float16", "int64"), supports_out=True,
          tol={"float32": (1e-6, 1e-6), "float64": (1e-12, 1e-12)}),
    entry("nanquantile", _quantile_samples, dtypes=F32_64 + ("int64",), supports_out=True,
          tol={"float32": (1e-6, 1e-6), "float64": (1e-12, 1e-12)}),
    entry("unique", _unique_samples, dtypes=REAL_STRUCT, supports_grad=False, meta=False,
          meta_reason="output length depends on data"),
    entry("unique_consecutive", _unique_consecutive_samples, dtypes=REAL_STRUCT, supports_grad=False, meta=False,
          meta_reason="output length depends on data"),
]


# ---- matmul ---------------------------------------------------------------------------------------------------
MATMUL_TOL = {"float32": (1e-5, 1e-5), "bfloat16": (1.6e-2, 1e-2), "float16": (2e-3, 1e-3)}
MM_DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "int64")


def _bmm_samples(dtype, grad):
    a, b = X((2, 3, 4), dtype, grad, 1, low=-2, high=2), X((2, 4, 5), dtype, grad, 2, low=-2, high=2)
    out = [S(a, b, desc="plain"), S(a.transpose(1, 2).contiguous().transpose(1, 2), b, desc="transposed-a"),
           S(a, X((2, 5, 4), dtype, grad, 3, low=-2, high=2).transpose(1, 2), desc="transposed-b")]
    if not grad:
        out += [S(T((0, 3, 4), dtype), T((0, 4, 2), dtype), desc="empty-batch"),
                S(T((2, 3, 0), dtype), T((2, 0, 2), dtype), desc="empty-k"), S(a, a, desc="error-shapes")]
    return out


def _matmul_samples(dtype, grad):
    def M(*shape, seed):
        return X(shape, dtype, grad, seed, low=-2, high=2)
    out = [S(M(3, 4, seed=1), M(4, 5, seed=2), desc="mm"), S(M(4, seed=3), M(4, 2, seed=4), desc="vec-mat"),
           S(M(3, 4, seed=5), M(4, seed=6), desc="mat-vec"), S(M(4, seed=7), M(4, seed=8), desc="dot"),
           S(M(2, 3, 4, seed=9), M(4, 2, seed=10), desc="batched-mat"),
           S(M(2, 1, 3, 4, seed=11), M(3, 4, 5, seed=12), desc="broadcast-batch"),
           S(M(4, 3, seed=13).t(), M(5, 4, seed=14).t(), desc="transposed")]
    if not grad:
        out.append(S(M(3, 4, seed=15), M(3, 4, seed=16), desc="error-shapes"))
    return out


def _mm_samples(dtype, grad):
    a, b = X((3, 4), dtype, grad, 1, low=-2, high=2), X((4, 5), dtype, grad, 2, low=-2, high=2)
    return [S(a, b, desc="plain"), S(a.t().contiguous().t(), b.t().contiguous().t(), desc="col-major"),
            S(a[:, ::2], b[::2], desc="strided")]


def _linear_samples(dtype, grad):
    x, w, b = X((2, 3, 4), dtype, grad, 1, low=-2, high=2), X((5, 4), dtype, grad, 2, low=-2, high=2), \
        X((5,), dtype, grad, 3)
    return [S(x, w, desc="no-bias"), S(x, w, b, desc="bias"), S(x[0, 0], w, b, desc="1-d")]


MATMUL_OPS = [
    entry("bmm", _bmm_samples, dtypes=MM_DTYPES, tol=MATMUL_TOL, supports_out=True, gradcheck=True),
    entry("matmul", _matmul_samples, covers=("bmm",), dtypes=MM_DTYPES, tol=MATMUL_TOL, supports_out=True),
    entry("mm", _mm_samples, covers=("bmm",), dtypes=MM_DTYPES, tol=MATMUL_TOL, supports_out=True),
    entry("nn.functional.linear", _linear_samples, covers=("bmm",), dtypes=FLOATS, tol=MATMUL_TOL),
]


# ---- nn: convolution, pooling, normalisation, losses, attention, recurrent layers ---------------------------------
NN_TOL = {"float32": (1e-5, 1e-5), "bfloat16": (1.6e-2, 1e-2), "float16": (2e-3, 1e-3), "float64": (1e-7, 1e-7)}
NN_DTYPES = ("float32", "float64", "bfloat16")


def _conv1d_samples(dtype, grad):
    x, w, b = X((2, 3, 8), dtype, grad, 1, low=-1, high=1), X((4, 3, 3), dtype, grad, 2, low=-1, high=1), \
        X((4,), dtype, grad, 3, low=-1, high=1)
    return [S(x, w, b, desc="bias"), S(x, w, stride=2, padding=1, dilation=2, desc="strided"),
            S(x, w, padding="same", desc="same"),
            S(x.transpose(0, 1).contiguous().transpose(0, 1), w, b, desc="strided-input")]


def _conv2d_samples(dtype, grad):
    x, w = X((1, 4, 5, 6), dtype, grad, 4, low=-1, high=1), X((6, 2, 2, 3), dtype, grad, 5, low=-1, high=1)
    return [S(x, w, X((6,), dtype, grad, 6), padding=(1, 0), groups=2, desc="groups"),
            S(x.transpose(2, 3), w, stride=(2, 1), groups=2, desc="transposed-input"),
            S(x[0], w[:, :1].repeat(1, 4, 1, 1), desc="unbatched")]


def _conv_t_samples(dtype, grad):
    x, w = X((2, 3, 6), dtype, grad, 1, low=-1, high=1), X((3, 2, 3), dtype, grad, 2, low=-1, high=1)
    return [S(x, w, desc="plain"),
            S(x, w, X((2,), dtype, grad, 3), stride=2, padding=1, output_padding=1, desc="strided"),
            S(x, X((3, 1, 2), dtype, grad, 4), groups=3, desc="groups")]


def _pool1d_samples(dtype, grad):
    x = X((2, 3, 9), dtype, grad, 1) if not grad else distinct((2, 3, 9), dtype, 1)
    return [S(x, 2, desc="k2"), S(x, 3, stride=2, padding=1, desc="pad"), S(x.transpose(0, 1), 3, ceil_mode=True,
                                                                               desc="ceil-transposed")]


def _pool2d_samples(dtype, grad):
    x = X((1, 2, 6, 7), dtype, grad, 1) if not grad else distinct((1, 2, 6, 7), dtype, 1)
    return [S(x, 2, desc="k2"), S(x, (3, 2), stride=(2, 1), padding=1, desc="pad"),
            S(x, 3, stride=2, ceil_mode=True, desc="ceil"), S(x[0], 2, desc="unbatched")]


def _maxpool_dil_samples(dtype, grad):
    x = X((1, 2, 7, 7), dtype, grad, 1) if not grad else distinct((1, 2, 7, 7), dtype, 1)
    return [S(x, 2, dilation=2, desc="dilation"), S(x, 3, return_indices=True, desc="indices")]


def _avgpool2d_samples(dtype, grad):
    x = X((1, 2, 6, 7), dtype, grad, 1)
    return [S(x, 2, desc="k2"), S(x, 3, stride=2, padding=1, count_include_pad=False, desc="no-pad-count"),
            S(x, 3, stride=2, ceil_mode=True, desc="ceil"), S(x, 2, divisor_override=3, desc="divisor")]


def _adaptive_samples(dtype, grad):
    x1, x2 = X((2, 3, 10), dtype, grad, 1), X((1, 2, 7, 9), dtype, grad, 2)
    return [S(x1, 4, desc="1d"), S(x1, 10, desc="1d-identity")], [S(x2, (3, 4), desc="2d"), S(x2, 1, desc="2d-global")]


def _conv3d_samples(dtype, grad):
    x, w = X((1, 2, 4, 5, 6), dtype, grad, 1, low=-1, high=1), X((3, 2, 2, 3, 2), dtype, grad, 2, low=-1, high=1)
    return [S(x, w, desc="plain"), S(x, w, X((3,), dtype, grad, 3), stride=(1, 2, 1), padding=1, desc="strided"),
            S(x, X((4, 1, 1, 2, 2), dtype, grad, 4), groups=2, dilation=2, desc="groups-dilated")]


def _conv_t_nd_samples(n):
    def gen(dtype, grad):
        sp = (4, 5, 3)[:n]
        x, w = X((2, 2, *sp), dtype, grad, 1, low=-1, high=1), X((2, 3, *(2,) * n), dtype, grad, 2, low=-1, high=1)
        return [S(x, w, desc="plain"),
                S(x, w, X((3,), dtype, grad, 3), stride=2, padding=1, output_padding=1, desc="strided"),
                S(x, X((2, 1, *(3,) * n), dtype, grad, 4), groups=2, dilation=2, desc="groups-dilated")]
    return gen


def _pool3d_samples(dtype, grad):
    x = X((1, 2, 5, 6, 4), dtype, grad, 1) if not grad else distinct((1, 2, 5, 6, 4), dtype, 1)
    return [S(x, 2, desc="k2"), S(x, (3, 2, 2), stride=(2, 1, 2), padding=1, desc="pad"),
            S(x, 3, stride=2, ceil_mode=True, desc="ceil"), S(x[0], 2, desc="unbatched")]


def _avgpool3d_samples(dtype, grad):
    x = X((1, 2, 5, 6, 4), dtype, grad, 1)
    return [S(x, 2, desc="k2"), S(x, 3, stride=2, padding=1, count_include_pad=False, desc="no-pad-count"),
            S(x, 3, stride=2, ceil_mode=True, desc="ceil"), S(x, 2, divisor_override=3, desc="divisor")]


def _adaptive3d_samples(dtype, grad):
    x = X((1, 2, 5, 7, 6), dtype, grad, 1)
    return [S(x, (2, 3, 4), desc="3d"), S(x, 1, desc="3d-global")]


def _adaptive_max_samples(n):
    def gen(dtype, grad):
        shape = (2, 3, 5, 7, 9)[: 2 + n]
        x = X(shape, dtype, grad, 1) if not grad else distinct(shape, dtype, 1)
        return [S(x, 3, desc=f"{n}d"), S(x, 1, desc=f"{n}d-global"), S(x, 4, return_indices=True, desc="indices")]
    return gen


def _unfold_samples(dtype, grad):
    x = X((2, 3, 6, 7), dtype, grad, 1)
    return [S(x, 2, desc="k2"), S(x, (2, 3), dilation=(2, 1), padding=1, stride=(1, 2), desc="all"),
            S(x[0], 3, desc="unbatched")]


def _fold_samples(dtype, grad):
    c = X((2, 12, 30), dtype, grad, 1)
    return [S(c, (6, 7), 2, desc="k2"), S(X((2, 18, 12), dtype, grad, 2), (6, 7), (3, 2), padding=1, stride=2,
                                          desc="strided")]


def _layer_norm_samples(dtype, grad):
    x = X((2, 3, 5), dtype, grad, 1)
    w, b = X((5,), dtype, grad, 2), X((5,), dtype, grad, 3)
    return [S(x, (5,), desc="no-affine"), S(x, (5,), w, b, desc="affine"), S(x, (3, 5), desc="two-dims"),
            S(x.transpose(0, 1), (5,), w, desc="transposed-weight-only"), S(x, (5,), eps=1e-2, desc="eps")]


def _ce_samples(dtype, grad):
    x = X((4, 5), dtype, grad, 1)
    t = idx([0, 4, 2, 1])
    w = X((5,), dtype, grad, 2, low=0.5, high=2)
    probs = torch.softmax(X((4, 5), dtype, grad, 3), -1) if dtype != "bfloat16" else \
        torch.softmax(X((4, 5), "float32", grad, 3), -1).to(torch.bfloat16)
    out = [S(x, t, desc="mean"), S(x, t, reduction="sum", desc="sum"), S(x, t, reduction="none", desc="none"),
           Sample((x, t, w), desc="weight", grad_idx=(0,)), S(x, idx([0, -100, 2, -100]), desc="ignore_index"),
           S(x, t, label_smoothing=0.1, desc="smoothing"), S(X((2, 5, 3), dtype, grad, 4), idx([[0, 1, 4], [2, 2, 3]]),
                                                              desc="k-dim"),
           Sample((x, probs), desc="probabilities", grad_idx=(0,))]
    if not grad:
        out.append(S(x, idx([5, 0, 0, 0]), desc="error-out-of-range"))
    return out


def _nll_samples(dtype, grad):
    x = X((4, 5), dtype, grad, 1)
    t = idx([0, 4, 2, 1])
    w = X((5,), dtype, grad, 2, low=0.5, high=2)
    return [S(x, t, desc="mean"), S(x, t, reduction="sum", desc="sum"), S(x, t, reduction="none", desc="none"),
            Sample((x, t, w), desc="weight", grad_idx=(0,)), S(x, idx([0, 1, 1, 1]), ignore_index=1, desc="ignore"),
            S(X((2, 5, 3), dtype, grad, 4), idx([[0, 1, 4], [2, 2, 3]]), desc="k-dim")]


def _bce_samples(dtype, grad):
    p = X((3, 4), dtype, grad, 1, low=0.05, high=0.95)
    t = X((3, 4), dtype, grad, 2, low=0, high=1)
    w = X((4,), dtype, grad, 3, low=0.5, high=2)
    return [Sample((p, t), desc="mean", grad_idx=(0,)), Sample((p, t), {"reduction": "none"}, desc="none",
                                                                grad_idx=(0,)),
            Sample((p, t, w), {"reduction": "sum"}, desc="weight-sum", grad_idx=(0,))]


def _log_probs(shape, dtype, grad, seed):
    return torch.log_softmax(X(shape, "float64" if grad else "float32", grad, seed), -1).to(tdt(dtype))


def _ctc_samples(dtype, grad):
    lp = _log_probs((7, 3, 5), dtype, grad, 1)
    tg = rand_index((3, 4), 4, 2) + 1
    return [S(lp, tg, (7, 6, 5), (4, 2, 3), desc="mean"),
            S(lp, tg, (7, 7, 7), (4, 4, 1), reduction="sum", desc="sum"),
            S(lp, tg, (7, 6, 5), (4, 2, 3), reduction="none", zero_infinity=True, desc="none-zero_inf"),
            S(lp, torch.cat([tg[0, :4], tg[1, :2], tg[2, :3]]), (7, 6, 5), (4, 2, 3), desc="concatenated"),
            S(lp, tg - 1, (7, 7, 7), (3, 3, 3), blank=4, desc="blank4")]


def _sdpa_samples(dtype, grad):
    def M(*shape, seed):
        return X(shape, dtype, grad, seed, low=-1, high=1)
    q, k, v = M(2, 3, 4, 8, seed=1), M(2, 3, 6, 8, seed=2), M(2, 3, 6, 8, seed=3)
    mask = M(4, 6, seed=4)
    return [S(q, k, v, desc="plain"), S(q, k, v, is_causal=True, desc="causal"),
            Sample((q, k, v, bool_mask((4, 6), 5)), desc="bool-mask"), Sample((q, k, v, mask), desc="float-mask"),
            S(q, k, v, scale=0.3, desc="scale"), S(q.transpose(1, 2).contiguous().transpose(1, 2), k, v,
                                                   desc="strided-q"),
            S(M(2, 4, 4, 8, seed=6), M(2, 2, 6, 8, seed=7), M(2, 2, 6, 8, seed=8), enable_gqa=True, desc="gqa")]


def _interp_samples(dtype, grad):
    x1, x2 = X((2, 3, 5), dtype, grad, 1), X((1, 2, 4, 5), dtype, grad, 2)
    near = [S(x1, scale_factor=2, desc="n1d-x2"), S(x1, size=7, desc="n1d-size"),
            S(x2, size=(6, 3), desc="n2d-size"), S(x2.transpose(2, 3), scale_factor=1.5, desc="n2d-transposed")]
    lin = [S(x1, scale_factor=2, mode="linear", desc="linear"),
           S(x1, size=8, mode="linear", align_corners=True, desc="linear-align"),
           S(x2, size=(7, 3), mode="bilinear", desc="bilinear"),
           S(x2, scale_factor=(1.5, 2), mode="bilinear", align_corners=True, desc="bilinear-align")]
    return near, lin


def _interp_more_samples(dtype, grad):
    x2, x3 = X((1, 2, 4, 5), dtype, grad, 2), X((1, 2, 3, 4, 5), dtype, grad, 3)
    exact = [S(x2, scale_factor=1.5, mode="nearest-exact", desc="exact-2d"),
             S(x3, size=(4, 6, 3), mode="nearest-exact", desc="exact-3d"), S(x3, scale_factor=2, desc="nearest-3d")]
    cubic = [S(x2, scale_factor=1.5, mode="bicubic", desc="bicubic"),
             S(x2, size=(7, 3), mode="bicubic", align_corners=True, desc="bicubic-align"),
             S(x3, scale_factor=1.5, mode="trilinear", desc="trilinear"),
             S(x3, size=(2, 3, 7), mode="area", desc="area-3d")]
    return exact, cubic


def _rnn_samples(kind):
    chunks = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}[kind]

    def gen(dtype, grad):
        def M(*shape, seed):
            return X(shape, dtype, grad, seed, low=-0.8, high=0.8)
        H, I = 3, 2
        x, h0, c0 = M(4, 2, I, seed=1), M(2, H, seed=2), M(2, H, seed=3)
        w = [M(chunks * H, I, seed=4), M(chunks * H, H, seed=5), M(chunks * H, seed=6), M(chunks * H, seed=7)]
        states = (h0, c0) if kind == "lstm" else (h0,)
        return [S(x, *states, *w, False, desc="forward"), S(x, *states, *w, True, desc="reverse"),
                S(x.transpose(0, 1).contiguous().transpose(0, 1), *states, w[0], w[1], None, None, False,
                  desc="no-bias-strided")]
    return gen


def _torch_rnn(kind):
    fn = {"lstm": torch.lstm, "gru": torch.gru, "rnn_tanh": torch.rnn_tanh, "rnn_relu": torch.rnn_relu}[kind]

    def run(x, *rest):
        if kind == "lstm":
            h0, c0, rest = rest[0], rest[1], rest[2:]
            hx = (h0[None], c0[None])
        else:
            hx, rest = rest[0][None], rest[1:]
        w_ih, w_hh, b_ih, b_hh, reverse = rest
        params = [w_ih, w_hh] + ([b_ih, b_hh] if b_ih is not None else [])
        xs = x.flip(0) if reverse else x
        res = fn(xs, hx, params, b_ih is not None, 1, 0.0, False, False, False)
        y = res[0].flip(0) if reverse else res[0]
        return (y,) + tuple(h[0] for h in res[1:])
    return run


def _kiln_rnn(kind):
    def run(x, *rest):
        if kind == "lstm":
            h0, c0, w_ih, w_hh, b_ih, b_hh, reverse = rest
            return tuple(kiln._C._nn.lstm_layer(x, h0, c0, w_ih, w_hh, b_ih, b_hh, None, reverse))
        h0, w_ih, w_hh, b_ih, b_hh, reverse = rest
        if kind == "gru":
            return tuple(kiln._C._nn.gru_layer(x, h0, w_ih, w_hh, b_ih, b_hh, reverse))
        return tuple(kiln._C._nn.rnn_layer(x, h0, w_ih, w_hh, b_ih, b_hh, kind == "rnn_relu", reverse))
    return run


_adaptive1, _adaptive2 = (lambda dt, g: _adaptive_samples(dt, g)[0]), (lambda dt, g: _adaptive_samples(dt, g)[1])
_near, _lin = (lambda dt, g: _interp_samples(dt, g)[0]), (lambda dt, g: _interp_samples(dt, g)[1])
_exact, _cubic = (lambda dt, g: _interp_more_samples(dt, g)[0]), (lambda dt, g: _interp_more_samples(dt, g)[1])

NN_OPS = [
    entry("nn.functional.conv1d", _conv1d_samples, covers=("convolution", "convolution_backward_weight"),
          dtypes=NN_DTYPES, tol=NN_TOL, gradcheck=True),
    entry("nn.functional.conv2d", _conv2d_samples, covers=("convolution", "convolution_backward_weight"),
          dtypes=NN_DTYPES, tol=NN_TOL),
    entry("nn.functional.conv_transpose1d", _conv_t_samples, covers=("convolution", "convolution_backward_weight"),
          dtypes=NN_DTYPES, tol=NN_TOL),
    entry("nn.functional.max_pool1d", _pool1d_samples, covers=("max_pool", "max_pool_backward"), dtypes=NN_DTYPES),
    entry("nn.functional.max_pool2d", _pool2d_samples, covers=("max_pool", "max_pool_backward"),
          dtypes=NN_DTYPES + ("int64",)),
    entry("nn.functional.max_pool2d", _maxpool_dil_samples, variant="dilation", covers=("max_pool",),
          dtypes=NN_DTYPES),
    entry("nn.functional.avg_pool1d", _pool1d_samples, covers=("avg_pool", "avg_pool_backward"), dtypes=NN_DTYPES,
          tol=NN_TOL),
    entry("nn.functional.avg_pool2d", _avgpool2d_samples, covers=("avg_pool", "avg_pool_backward"), dtypes=NN_DTYPES,
          tol=NN_TOL),
    entry("nn.functional.adaptive_avg_pool1d", _adaptive1, covers=("adaptive_avg_pool", "adaptive_avg_pool_backward"),
          dtypes=NN_DTYPES, tol=NN_TOL),
    entry("nn.functional.adaptive_avg_pool2d", _adaptive2, covers=("adaptive_avg_pool", "adaptive_avg_pool_backward"),
          dtypes=NN_DTYPES, tol=NN_TOL),
    entry("nn.functional.conv3d", _conv3d_samples, covers=("convolution", "convolution_backward_weight"),
          dtypes=NN_DTYPES, tol=NN_TOL),
    entry("nn.functional.conv_transpose2d", _conv_t_nd_samples(2), covers=("convolution", "convolution_backward_weight"),
          dtypes=NN_DTYPES, tol=NN_TOL),
    # bfloat16 against float64: without AVX-512 torch's bfloat16 conv_transpose3d is not oneDNN's but
    # slow_conv_transpose3d, which adds the columns into the bfloat16 output (rounding on each add: on
    # Zen 3, 11 of 2016 groups-dilated elements off by up to 0.03); kiln sums in float32, rounds once
    entry("nn.functional.conv_transpose3d", _conv_t_nd_samples(3), covers=("convolution", "convolution_backward_weight"),
          dtypes=NN_DTYPES, tol=NN_TOL, ref="float64", ref_dtypes=("bfloat16",)),
    entry("nn.functional.max_pool3d", _pool3d_samples, covers=("max_pool", "max_pool_backward"), dtypes=NN_DTYPES),
    entry("nn.functional.avg_pool3d", _avgpool3d_samples, covers=("avg_pool", "avg_pool_backward"),
          dtypes=F32_64, tol=NN_TOL),
    entry("nn.functional.adaptive_avg_pool3d", _adaptive3d_samples,
          covers=("adaptive_avg_pool", "adaptive_avg_pool_backward"), dtypes=NN_DTYPES, tol=NN_TOL),
    entry("nn.functional.adaptive_max_pool1d", _adaptive_max_samples(1), covers=("adaptive_max_pool", "max_pool_backward"),
          dtypes=NN_DTYPES),
    entry("nn.functional.adaptive_max_pool2d", _adaptive_max_samples(2), covers=("adaptive_max_pool", "max_pool_backward"),
          dtypes=NN_DTYPES),
    entry("nn.functional.adaptive_max_pool3d", _adaptive_max_samples(3), covers=("adaptive_max_pool", "max_pool_backward"),
          dtypes=NN_DTYPES),
    entry("nn.functional.unfold", _unfold_samples, covers=("im2col",), dtypes=NN_DTYPES, tol=NN_TOL),
    entry("nn.functional.fold", _fold_samples, covers=("col2im",), dtypes=NN_DTYPES, tol=NN_TOL),
    entry("nn.functional.layer_norm", _layer_norm_samples, covers=("native_layer_norm", "native_layer_norm_backward"),
          dtypes=NN_DTYPES + ("float16",), tol=NN_TOL, gradcheck=True),
    entry("nn.functional.cross_entropy", _ce_samples, covers=("cross_entropy_loss", "cross_entropy_loss_backward"),
          dtypes=NN_DTYPES, tol=NN_TOL),
    entry("nn.functional.nll_loss", _nll_samples, covers=("nll_loss", "nll_loss_backward"), dtypes=NN_DTYPES,
          tol=NN_TOL),
    entry("nn.functional.binary_cross_entropy", _bce_samples, covers=("binary_cross_entropy",), dtypes=NN_DTYPES,
          tol=NN_TOL),
    entry("nn.functional.ctc_loss", _ctc_samples, covers=("ctc_loss", "ctc_loss_backward"), dtypes=F32_64,
          tol={"float32": (1e-5, 1e-5)}),
    entry("nn.functional.scaled_dot_product_attention", _sdpa_samples, covers=("_sdpa_flash", "_sdpa_flash_backward"),
          dtypes=NN_DTYPES, tol=NN_TOL),
    entry("nn.functional.interpolate", _near, variant="nearest",
          covers=("upsample_nearest", "upsample_nearest_backward"), dtypes=NN_DTYPES + ("uint8",), tol=NN_TOL),
    entry("nn.functional.interpolate", _exact, variant="nearest-exact",
          covers=("upsample_nearest_exact", "upsample_nearest_exact_backward", "upsample_nearest"), dtypes=NN_DTYPES,
          tol=NN_TOL),
    entry("nn.functional.interpolate", _cubic, variant="bicubic",
          covers=("upsample_bicubic2d", "upsample_bicubic2d_backward", "upsample_linear"), dtypes=F32_64, tol=NN_TOL),
    entry("nn.functional.interpolate", _lin, variant="linear", covers=("upsample_linear", "upsample_linear_backward"),
          dtypes=NN_DTYPES, tol=NN_TOL),
]
for _kind, _covers in [("lstm", ("lstm_layer", "lstm_layer_backward")), ("gru", ("gru_layer", "gru_layer_backward")),
                       ("rnn_tanh", ("rnn_layer", "rnn_layer_backward")),
                       ("rnn_relu", ("rnn_layer", "rnn_layer_backward"))]:
    NN_OPS.append(entry(f"_nn.{_kind}_layer", _rnn_samples(_kind), kiln_fn=_kiln_rnn(_kind), torch_fn=_torch_rnn(_kind),
                        covers=_covers, dtypes=F32_64, tol={"float32": (1e-5, 1e-5), "float64": (1e-10, 1e-10)}))
del _kind, _covers


# ---- creation ----------------------------------------------------------------------------------------------
def _creation(fn_name):
    def call(m, *args, **kwargs):
        return getattr(m, fn_name)(*args, **kwargs)
    return (lambda *a, **k: call(kiln, *a, **k)), (lambda *a, **k: call(torch, *a, **k))


def _full_samples(dtype, grad):
    v = {"bool": True}.get(dtype, 1 if dtype in INTS else 2.5)
    d = tdt(dtype)
    return [S((2, 3), v, dtype=d, desc="full"), S((0, 2), v, dtype=d, desc="empty"), S((), v, dtype=d, desc="0-dim"),
            S((4,), 7, desc="int-infers-int64") if dtype == "int64" else S((4,), v, dtype=d, desc="1-d")]


def _zeros_ones_samples(dtype, grad):
    d = tdt(dtype)
    return [S(2, 3, dtype=d, desc="varargs"), S((4,), dtype=d, desc="tuple"), S((), dtype=d, desc="0-dim")]


def _empty_samples(dtype, grad):
    d = tdt(dtype)
    return [S(2, 3, dtype=d, desc="varargs"), S((0, 4), dtype=d, desc="empty")]


def _arange_samples(dtype, grad):
    d = tdt(dtype)
    if dtype in INTS:
        return [S(10, dtype=d, desc="end"), S(2, 11, 3, dtype=d, desc="step"), S(0, dtype=d, desc="empty"),
                # float bounds truncate to int64 first; the size counts in them for int64 only
                S(1, 4, 1.5, dtype=d, desc="float-step"), S(-1.5, 3, 1, dtype=d, desc="float-start"),
                S(1, 3.7, 1, dtype=d, desc="float-end"), S(1, 2.5, 0.5, dtype=d, desc="step-truncates-to-zero")]
    return [S(5, dtype=d, desc="end"), S(-1, 1, 0.25, dtype=d, desc="float-step"), S(3, -2, -0.5, dtype=d,
                                                                                     desc="negative-step"),
            S(0, 10, -1, dtype=d, desc="error-step")]


def _linspace_samples(dtype, grad):
    d = tdt(dtype)
    out = [S(-1, 1, 7, dtype=d, desc="sym"), S(0, 10, 5, dtype=d, desc="ints"), S(3, 5, 1, dtype=d, desc="one"),
           S(5, -5, 11, dtype=d, desc="descending"), S(0, 1, 0, dtype=d, desc="zero-steps")]
    return out


def _logspace_samples(dtype, grad):
    d = tdt(dtype)
    return [S(0, 3, 4, dtype=d, desc="base10"), S(0, 3, 4, base=2.0, dtype=d, desc="base2"),
            S(-1, 1, 5, dtype=d, desc="negative")]


def _eye_samples(dtype, grad):
    d = tdt(dtype)
    return [S(3, dtype=d, desc="square"), S(2, 4, dtype=d, desc="rect"), S(0, dtype=d, desc="empty")]


def _random_entry(name, gen, checks, **kw):
    kw.setdefault("dtypes", F32_64)
    kw.setdefault("factory", name in ("rand", "randn", "randint", "randperm"))
    return entry(name, gen, covers=("random_fill_",), nondeterministic=True, check_values=checks,
                 supports_grad=False, **kw)


def _k2t(k):
    return to_torch(k).double()


def _in_unit(res, s):
    t = _k2t(res)
    assert bool(((t >= 0) & (t < 1)).all()), "rand outside [0, 1)"


def _normalish(res, s):
    t = _k2t(res)
    if t.numel() >= 1000:
        assert abs(t.mean().item()) < 0.1 and abs(t.std().item() - 1) < 0.1, (t.mean().item(), t.std().item())


def _randint_check(res, s):
    t = _k2t(res)
    lo, hi = (0, s.args[0]) if len(s.args) == 2 else s.args[:2]
    assert bool(((t >= lo) & (t < hi)).all()), "randint outside [low, high)"


def _perm_check(res, s):
    t = _k2t(res)
    assert torch.equal(torch.sort(t).values, torch.arange(s.args[0], dtype=torch.float64)), "not a permutation"


def _bernoulli_check(res, s):
    t = _k2t(res)
    assert bool(((t == 0) | (t == 1)).all())


def _dropout_check(res, s):
    x, p = s.args[0], s.kwargs.get("p", 0.5)
    t = to_torch(res).double()
    kept = t != 0
    assert torch.allclose(t[kept], (x.double() / (1 - p))[kept], rtol=1e-3), "kept values not scaled by 1/(1-p)"


def _uniform_check(res, s):
    t = _k2t(res)
    lo, hi = s.args[1], s.args[2]
    assert bool(((t >= lo) & (t <= hi)).all()), "uniform_ outside [from, to]"


def _uniform_(x, lo, hi):
    return x.clone().uniform_(lo, hi)


def _normal_(x, mean, std):
    return x.clone().normal_(mean, std)


_rand_k, _rand_t = _creation("rand")
_randn_k, _randn_t = _creation("randn")
_randint_k, _randint_t = _creation("randint")
_randperm_k, _randperm_t = _creation("randperm")

CREATION_OPS = [
    entry("full", _full_samples, factory=True, dtypes=ALL, exact=True, supports_grad=False, supports_out=True),
    entry("zeros", _zeros_ones_samples, factory=True, covers=("full",), dtypes=ALL, exact=True, supports_grad=False,
          supports_out=True),
    entry("ones", _zeros_ones_samples, factory=True, covers=("full",), dtypes=ALL, exact=True, supports_grad=False,
          supports_out=True),
    entry("empty", _empty_samples, factory=True, dtypes=ALL, nondeterministic=True, supports_grad=False),
    entry("arange", _arange_samples, factory=True, dtypes=NUMERIC, exact=True, supports_grad=False, supports_out=True),
    # float64 reference: torch's linspace depends on its ISA (test_tensor.test_linspace)
    entry("linspace", _linspace_samples, factory=True, dtypes=FLOATS + ("int64",), ref="float64", supports_grad=False,
          supports_out=True, tol={"float32": (0, 2.4e-7 * 10), "float64": (0, 4.5e-16 * 10)}),
    entry("logspace", _logspace_samples, factory=True, dtypes=FLOATS + ("int64",), supports_grad=False,
          supports_out=True,
          tol={"float32": (1e-6, 1e-6)}),
    entry("eye", _eye_samples, factory=True, dtypes=ALL, exact=True, supports_grad=False, supports_out=True),
    _random_entry("rand", lambda dt, g: [S(200, dtype=tdt(dt), desc="1-d"), S(2, 3, dtype=tdt(dt), desc="2-d")],
                  _in_unit, kiln_fn=_rand_k, torch_fn=_rand_t, dtypes=FLOATS),
    _random_entry("randn", lambda dt, g: [S(4000, dtype=tdt(dt), desc="1-d"), S((2, 3), dtype=tdt(dt), desc="tuple")],
                  _normalish, kiln_fn=_randn_k, torch_fn=_randn_t, dtypes=FLOATS),
    _random_entry("randint", lambda dt, g: [S(5, (300,), dtype=tdt(dt), desc="high"),
                                            S(-3, 4, (2, 50), dtype=tdt(dt), desc="low-high")],
                  _randint_check, kiln_fn=_randint_k, torch_fn=_randint_t, dtypes=("int64", "int32", "float32")),
    _random_entry("randperm", lambda dt, g: [S(20, dtype=tdt(dt), desc="n20"), S(0, dtype=tdt(dt), desc="empty")],
                  _perm_check, kiln_fn=_randperm_k, torch_fn=_randperm_t, dtypes=("int64", "float32")),
    _random_entry("Tensor.uniform_", lambda dt, g: [S(T((50,), dt), -2.0, 3.0, desc="range")], _uniform_check,
                  kiln_fn=_uniform_, torch_fn=_uniform_),
    _random_entry("Tensor.normal_", lambda dt, g: [S(T((4000,), dt), 0.0, 1.0, desc="standard")], _normalish,
                  kiln_fn=_normal_, torch_fn=_normal_),
    _random_entry("bernoulli", lambda dt, g: [S(T((100,), dt, low=0, high=1), desc="probs")], _bernoulli_check),
    _random_entry("nn.functional.dropout", lambda dt, g: [S(T((200,), dt), p=0.3, desc="p0.3"),
                                                          S(T((4, 5), dt), desc="default")], _dropout_check),
]


# ---- the optimiser update ------------------------------------------------------------------------------------------
def _optim(cls_name, **hyper):
    def run(m, params, grads, steps=2):
        ps = [p.detach().clone().requires_grad_() for p in params]
        opt = getattr(m.optim, cls_name)(ps, **hyper)
        for _ in range(steps):
            for p, g in zip(ps, grads):
                p.grad = g.clone()
            opt.step()
        return [p.detach() for p in ps]
    return (lambda ps, gs: run(kiln, ps, gs)), (lambda ps, gs: run(torch, ps, gs))


def _optim_samples(dtype, grad):
    shapes = [(7,), (3, 5)]
    params = [T(s, dtype, seed=i) for i, s in enumerate(shapes)]
    grads = [T(s, dtype, seed=10 + i) for i, s in enumerate(shapes)]
    return [S(params, grads, desc="two-params"),
            S([T((4, 3), dtype, seed=3).t()], [T((3, 4), dtype, seed=4)], desc="strided-param")]


OPTIM_TOL = {"float32": (2e-5, 1e-6), "float64": (1e-10, 1e-12), "bfloat16": (2e-2, 1e-2)}
OPTIM_OPS = []
for _name, _hyper in [("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
                      ("Adam", dict(lr=0.01)), ("AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
                      ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)), ("Adagrad", dict(lr=0.1))]:
    _k, _t = _optim(_name, **_hyper)
    OPTIM_OPS.append(entry(f"optim.{_name}", _optim_samples, variant="-".join(f"{a}{b}" for a, b in _hyper.items()),
                           kiln_fn=_k, torch_fn=_t, covers=("_fused_optimizer_update",), dtypes=F32_64,
                           supports_grad=False, tol=OPTIM_TOL))
del _name, _hyper, _k, _t


# ---- bit-exact entries -------------------------------------------------------------------------------------------
# Ops that move, select or compare values, or whose result is exactly representable, must match
# torch bit for bit (a tolerance would hide a one-ulp nextafter or an off-by-one floor).
EXACT = {"neg", "abs", "sign", "floor", "ceil", "trunc", "round", "frac", "relu", "conj_physical",
         "clamp", "clamp.min", "clamp.max", "nn.functional.relu6", "nn.functional.hardtanh", "nn.functional.threshold",
         "maximum", "minimum", "fmax", "fmin", "copysign", "nextafter", "clamp.min_tensor", "clamp.max_tensor",
         "amax", "amin", "max.dim", "min.dim", "max.full", "min.full", "cummax", "cummin"}
_ACCUMULATE = {"index_add", "scatter_add", "scatter_reduce", "index_put", "Tensor.put", "nn.functional.embedding",
               "bincount", "histc", "searchsorted", "bucketize", "quantile", "nanquantile"}
for _op in SHAPE_OPS + INDEX_OPS + SORT_OPS:
    if _op.id not in _ACCUMULATE:
        EXACT.add(_op.id)
for _op in UNARY_OPS + BINARY_OPS + REDUCTION_OPS + SCAN_OPS + SHAPE_OPS + INDEX_OPS + SORT_OPS:
    if _op.id in EXACT:
        _op.exact = True
del _op


# ---- the database ----------------------------------------------------------------------------------------
from op_db_linalg import LINALG_OPS  # noqa: E402 (its entries use the builders above)
from op_db_lowp import LOWP_OPS  # noqa: E402
from op_db_flex import FLEX_OPS  # noqa: E402
from op_db_fft import FFT_OPS  # noqa: E402
from op_db_special import SPECIAL_OPS  # noqa: E402
from op_db_distributions import DISTRIBUTION_OPS  # noqa: E402

op_db = (UNARY_OPS + BINARY_OPS + REDUCTION_OPS + SCAN_OPS + SHAPE_OPS + INDEX_OPS + SORT_OPS + MATMUL_OPS + NN_OPS
         + CREATION_OPS + OPTIM_OPS + LINALG_OPS + LOWP_OPS + FLEX_OPS + FFT_OPS + SPECIAL_OPS
         + DISTRIBUTION_OPS)


# ---- known kiln bugs and gaps ----------------------------------------------------------------------------------
# Found by this database against torch 2.13. Each is a strict xfail (the test fails once kiln is fixed,
# so the entry must then go) unless it is a skip: a segfault, a dtype kiln does not have, or an op kiln
# implements where torch raises.
ABS_COMPLEX_INPLACE = "abs_ on a complex tensor runs (writing |z| into the complex self) where torch raises"
CLAMP_INPLACE_CAST = "clamp_ with float bounds on an integer tensor writes where torch raises (Float can't be cast)"
NEXTAFTER_HALF = "nextafter on float16/bfloat16 steps by a float32 ulp: the result rounds back to the input (inf: inf)"
HARDTANH_UINT8 = "hardtanh on uint8 with a negative min_val raises where torch 2.13 clamps"
THRESHOLD_INT = "threshold is not implemented for signed integer dtypes (torch computes it)"
FLOAT8_SCALAR_MUL = "3 * x for a float8 x raises NotImplementedError; torch 2.13 computes it"
CLAMP_TENSOR_BOOL = "clamp with tensor bounds is not implemented for bool (torch computes it)"
NANSUM_COMPLEX_DTYPE = "nansum of a complex tensor with dtype= returns a result; torch raises (as kiln does without it)"
EMPTY_NO_KERNEL = ("an empty input raises NotImplementedError for a dtype without a kernel; torch returns the empty "
                   "result")
SOFTMAX_0DIM_GRADGRAD = "the gradient of softmax/log_softmax of a 0-dim input is not differentiable (double backward)"
LOGCUMSUMEXP_COMPLEX = "logcumsumexp is not implemented for complex dtypes (torch computes it)"
SETITEM_CASTS = "x[int index] = values of another dtype casts the values; torch raises (dtypes must match)"
META_READS_DATA = ("meta reads the index/target values (data_ptr: NotImplementedError) although the output shape "
                   "does not depend on them")
COMPLEX32 = "torch's result is complex32, which is not a kiln dtype (DESIGN.md section 3)"
KILN_MORE_UINT = "kiln implements this for uint16/32/64, where torch 2.13 raises NotImplementedError"


def no_out(name):
    return f"kiln's {name} takes no out= (torch's does)"


def no_method(name):
    return f"kiln.Tensor has no {name} method (torch has it)"


def no_float8(name):
    return f"no float8 kernel for {name}; torch 2.13 computes it (for some layouts, and 0-dim and empty inputs)"


KNOWN_XFAILS = [  # (test, entry id, reason, dtypes (empty: all), samples (empty: all))
    ("inplace", "abs", ABS_COMPLEX_INPLACE, ("complex64", "complex128"), ("contig", "transposed", "sliced", "0-dim", "empty")),
    ("inplace", "clamp", CLAMP_INPLACE_CAST,
     ("uint8", "int8", "int16", "int32", "int64"),
     ("contig", "transposed", "sliced", "0-dim", "empty")),
    ("inplace", "clamp.max", CLAMP_INPLACE_CAST, ("uint8", "int8", "int16", "int32", "int64"),
     ("contig", "transposed", "sliced", "0-dim", "empty")),
    ("inplace", "clamp.min", CLAMP_INPLACE_CAST, ("uint8", "int8", "int16", "int32", "int64"),
     ("contig", "transposed", "sliced", "0-dim", "empty")),
    ("forward", "clamp.max_tensor", CLAMP_TENSOR_BOOL, ("bool",), ()),
    ("out", "clamp.max_tensor", CLAMP_TENSOR_BOOL, ("bool",), ()),
    ("forward", "clamp.min_tensor", CLAMP_TENSOR_BOOL, ("bool",), ()),
    ("out", "clamp.min_tensor", CLAMP_TENSOR_BOOL, ("bool",), ()),
    ("forward", "amax", EMPTY_NO_KERNEL,
     ("uint16", "uint32", "uint64", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2"),
     ("empty-dim1",)),
    ("out", "amax", EMPTY_NO_KERNEL,
     ("uint16", "uint32", "uint64", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2"),
     ("empty-dim1",)),
    ("forward", "amin", EMPTY_NO_KERNEL,
     ("uint16", "uint32", "uint64", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2"),
     ("empty-dim1",)),
    ("out", "amin", EMPTY_NO_KERNEL,
     ("uint16", "uint32", "uint64", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2"),
     ("empty-dim1",)),
    ("forward", "nn.functional.log_softmax", EMPTY_NO_KERNEL, ("int64",), ("empty",)),
    ("forward", "nn.functional.softmax", EMPTY_NO_KERNEL, ("int64",), ("empty",)),
    ("forward", "mul", FLOAT8_SCALAR_MUL, ("float8_e4m3fn", "float8_e5m2"), ("scalar-lhs-3",)),
    ("out", "mul", FLOAT8_SCALAR_MUL, ("float8_e4m3fn", "float8_e5m2"), ("scalar-lhs-3",)),
    ("forward", "nn.functional.hardtanh", HARDTANH_UINT8, ("uint8",), ("kwargs{'min_val': -0.5, 'max_val': 1.0}",)),
    ("forward", "logcumsumexp", LOGCUMSUMEXP_COMPLEX, ("complex64", "complex128"), ()),
    ("out", "logcumsumexp", LOGCUMSUMEXP_COMPLEX, ("complex64", "complex128"), ()),
    ("meta", "nn.functional.ctc_loss", META_READS_DATA, (), ()),
    ("forward", "nansum", NANSUM_COMPLEX_DTYPE, ("complex64", "complex128"), ("dtype=float64",)),
    ("forward", "nextafter", NEXTAFTER_HALF,
     ("float16", "bfloat16"),
     ("same", "broadcast", "bcast-left", "0-dim-a", "strided", "special-a", "special-b")),
    ("inplace", "nextafter", NEXTAFTER_HALF,
     ("float16", "bfloat16"),
     ("same", "bcast-left", "strided", "special-a", "special-b")),
    ("out", "nextafter", NEXTAFTER_HALF,
     ("float16", "bfloat16"),
     ("same", "broadcast", "bcast-left", "0-dim-a", "strided", "special-a", "special-b")),
    ("forward", "Tensor.__setitem__", SETITEM_CASTS, (), ("cast-values",)),
    ("grad", "nn.functional.log_softmax", SOFTMAX_0DIM_GRADGRAD, (), ("0-dim",)),
    ("grad", "nn.functional.softmax", SOFTMAX_0DIM_GRADGRAD, (), ("0-dim",)),
    ("forward", "nn.functional.threshold", THRESHOLD_INT, ("int8", "int16", "int32", "int64"), ()),
    ("forward", "cumprod", no_float8("cumprod"), ("float8_e4m3fn", "float8_e5m2"), ("0-dim",)),
    ("out", "cumprod", no_float8("cumprod"), ("float8_e4m3fn", "float8_e5m2"), ("0-dim",)),
    ("forward", "cumsum", no_float8("cumsum"), ("float8_e4m3fn", "float8_e5m2"), ("0-dim",)),
    ("out", "cumsum", no_float8("cumsum"), ("float8_e4m3fn", "float8_e5m2"), ("0-dim",)),
    ("forward", "max.dim", no_float8("max"), ("float8_e4m3fn", "float8_e5m2"), ("0-dim-dim0", "empty-dim1")),
    ("out", "max.dim", no_float8("max"), ("float8_e4m3fn", "float8_e5m2"), ("0-dim-dim0", "empty-dim1")),
    ("forward", "min.dim", no_float8("min"), ("float8_e4m3fn", "float8_e5m2"), ("0-dim-dim0", "empty-dim1")),
    ("out", "min.dim", no_float8("min"), ("float8_e4m3fn", "float8_e5m2"), ("0-dim-dim0", "empty-dim1")),
    ("forward", "nansum", no_float8("nansum"),
     ("float8_e4m3fn", "float8_e5m2"),
     ("empty-dim0", "empty-dim1", "empty-full")),
    ("out", "nansum", no_float8("nansum"),
     ("float8_e4m3fn", "float8_e5m2"),
     ("empty-dim0", "empty-dim1", "empty-full")),
    ("forward", "prod", no_float8("prod"),
     ("float8_e4m3fn", "float8_e5m2"),
     ("empty-dim0", "empty-dim1", "empty-full")),
    ("out", "prod", no_float8("prod"), ("float8_e4m3fn", "float8_e5m2"), ("empty-dim0", "empty-dim1", "empty-full")),
    ("forward", "sum", no_float8("sum"),
     ("float8_e4m3fn", "float8_e5m2"),
     ("dims(0,2)", "sliced-full", "empty-dim0", "empty-dim1", "empty-full")),
    ("out", "sum", no_float8("sum"),
     ("float8_e4m3fn", "float8_e5m2"),
     ("dims(0,2)", "sliced-full", "empty-dim0", "empty-dim1", "empty-full")),
]
KNOWN_SKIPS = [  # (test, entry id, reason, dtypes (empty: all), samples (empty: all))
    ("*", "complex", COMPLEX32, ("float16",), ()),
    ("*", "view_as_complex", COMPLEX32, ("float16",), ()),
    ("forward", "eye", KILN_MORE_UINT, ("uint16", "uint32", "uint64"), ()),
    ("inplace", "cumsum", KILN_MORE_UINT, ("uint16", "uint32", "uint64"), ()),
    ("inplace", "cumprod", KILN_MORE_UINT, ("uint16", "uint32", "uint64"), ()),
    ("forward", "max.dim", KILN_MORE_UINT, ("uint16", "uint32", "uint64"),
     ("dim1", "dim-1-keepdim", "permuted-dim0", "sliced-dim2")),
    ("forward", "min.dim", KILN_MORE_UINT, ("uint16", "uint32", "uint64"),
     ("dim1", "dim-1-keepdim", "permuted-dim0", "sliced-dim2")),
]


def _apply_known():
    by_id = {op.id: op for op in op_db}
    for table, attr in ((KNOWN_XFAILS, "xfails"), (KNOWN_SKIPS, "skips")):
        for test, opid, reason, dtypes, samples in table:
            op = by_id[opid]
            setattr(op, attr, getattr(op, attr) + (Known(test, reason, tuple(dtypes), tuple(samples)),))


_apply_known()
