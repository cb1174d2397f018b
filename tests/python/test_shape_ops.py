"""Shape and scatter-style ops against torch on the same data.

scatter / scatter_add / scatter_reduce, index_add / index_copy / index_fill, masked_scatter, take /
take_along_dim / put, index_put, roll, rot90, repeat / tile, repeat_interleave, diag / diag_embed, meshgrid,
and nn.functional pad / one_hot / embedding.

Every case runs the same function on torch and on kiln copies of the inputs (same strides). Results must
match in shape and dtype, exactly for integers, bools and pure data movement, within torch.testing's
tolerances for floating-point arithmetic. When torch raises, kiln must raise exactly the same exception type
(NotImplementedError is not accepted for RuntimeError and vice versa).
"""
import warnings

import pytest
import torch
import torch.nn.functional as TF

import kiln
import kiln.nn.functional as KF
from helpers import ALL_DTYPES, assert_same, make, run_both, to_kiln, to_torch

warnings.filterwarnings("ignore", message=".*scatter.*deprecated.*")
warnings.filterwarnings("ignore", message=".*meshgrid.*indexing.*")

# dtypes torch's CPU kernels for these ops are compiled for (others raise NotImplementedError)
STD = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
       "complex64", "complex128"]
SOME = ["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64", "complex64"]
L = torch.long


def conv(a):
    if isinstance(a, torch.Tensor):
        return to_kiln(a)
    if isinstance(a, (list, tuple)) and a and all(isinstance(x, torch.Tensor) for x in a):
        return type(a)(to_kiln(x) for x in a)
    return a


def chk(fn, *targs, exact=False, rtol=None, atol=None, msg=""):
    """fn(torch, *targs) vs fn(kiln, *kiln copies): same values, or exactly the same exception type."""
    kargs = [conv(a) for a in targs]
    kres, tres, texc, kexc = run_both(fn, targs, kargs)
    if texc is not None:
        assert kexc is not None, f"{msg}: torch raised {type(texc).__name__}({texc}) but kiln returned {kres}"
        assert type(kexc) is type(texc), \
            f"{msg}: torch raised {type(texc).__name__}({texc}), kiln raised {type(kexc).__name__}({kexc})"
        return None
    if kexc is not None:
        raise AssertionError(f"{msg}: kiln raised {type(kexc).__name__}: {kexc}; torch gave {tres}") from kexc
    assert_same(kres, tres, rtol, atol, exact, msg=msg)
    return kres


def rnd_index(shape, high, seed=0, low=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, max(high, low + 1), shape, generator=g, dtype=L)


def layout(t, kind):
    """t (contiguous) re-laid as transposed / sliced storage with the same values."""
    if kind == "contig" or t.dim() < 2:
        return t
    if kind == "transposed":
        return t.transpose(0, 1).contiguous().transpose(0, 1)
    big = torch.zeros((t.shape[0] * 2,) + tuple(t.shape[1:-1]) + (t.shape[-1] + 1,), dtype=t.dtype)
    big[::2, ..., 1:] = t
    return big[::2, ..., 1:]


# ============================================================================================================
# scatter family
# ============================================================================================================

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("lay", ["contig", "transposed", "sliced"])
def test_scatter_src(dtype, dim, lay):
    x = layout(make((4, 5), dtype, seed=1), lay)
    src = layout(make((6, 5), dtype, seed=2), lay)
    d = dim % 2
    shape = (6, 3) if d == 0 else (3, 5)
    idx = layout(rnd_index(shape, x.shape[d], seed=3), lay)  # duplicates: last write wins
    chk(lambda m, x, i, s: m.scatter(x, dim, i, s), x, idx, src, exact=True)
    chk(lambda m, x, i, s: x.scatter(dim, i, s), x, idx, src, exact=True)
    chk(lambda m, x, i, s: m.scatter(x, dim, i, src=s), x, idx, src, exact=True)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("value", [0, 1, -2, 2.5, True])
def test_scatter_value(dtype, value):
    x = make((4, 5), dtype, seed=4)
    idx = rnd_index((3, 5), 4, seed=5)
    chk(lambda m, x, i: m.scatter(x, 0, i, value), x, idx, exact=True)
    chk(lambda m, x, i: x.scatter(1, i[:, :4], value=value), x, idx, exact=True)


@pytest.mark.parametrize("dtype", STD)
@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_legacy_reduce(dtype, reduce):
    x = make((4, 5), dtype, seed=6, low=-2, high=2)
    src = make((6, 5), dtype, seed=7, low=-2, high=2)
    idx = rnd_index((6, 5), 4, seed=8)
    chk(lambda m, x, i, s: m.scatter(x, 0, i, s, reduce=reduce), x, idx, src)
    chk(lambda m, x, i: m.scatter(x, 1, i[:4, :3], 2, reduce=reduce), x, idx)
    chk(lambda m, x, i: m.scatter(x, 1, i[:4, :3], 1.5, reduce=reduce), x, idx)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_add(dtype, dim):
    x = make((4, 5), dtype, seed=9)
    src = make((7, 6), dtype, seed=10)
    shape = (7, 5) if dim == 0 else (4, 6)
    idx = rnd_index(shape, x.shape[dim], seed=11)
    chk(lambda m, x, i, s: m.scatter_add(x, dim, i, s), x, idx, src)
    chk(lambda m, x, i, s: x.scatter_add(dim, i, s), x, idx, src)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(dtype, reduce, include_self):
    x = make((5, 4), dtype, seed=12, low=-3, high=3)
    src = make((8, 4), dtype, seed=13, low=-3, high=3)
    idx = rnd_index((8, 4), 3, seed=14)  # rows 3, 4 of x never written: they keep x
    chk(lambda m, x, i, s: m.scatter_reduce(x, 0, i, s, reduce, include_self=include_self), x, idx, src)
    chk(lambda m, x, i, s: x.scatter_reduce(-1, i[:5, :3] % 4, s[:5], reduce=reduce, include_self=include_self),
        x, idx, src)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_nan_and_integer_mean(reduce):
    nan = float("nan")
    x = torch.tensor([nan, 1.0, 2.0, -1.0])
    src = torch.tensor([3.0, nan, -4.0, 5.0, 0.5])
    idx = torch.tensor([1, 1, 0, 2, 2])
    for inc in (True, False):
        chk(lambda m, x, i, s: m.scatter_reduce(x, 0, i, s, reduce, include_self=inc), x, idx, src)
    xi = torch.tensor([10, -7, 3, 9], dtype=torch.int32)
    si = torch.tensor([1, 2, -3, 7, -8], dtype=torch.int32)
    for inc in (True, False):
        chk(lambda m, x, i, s: m.scatter_reduce(x, 0, i, s, reduce, include_self=inc), xi, idx, si)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_scatter_half_accumulates_in_float(dtype):
    n = 3000
    z = torch.zeros(1, dtype=getattr(torch, dtype))
    i = torch.zeros(n, dtype=L)
    s = torch.ones(n, dtype=z.dtype)
    p = torch.full((n,), 1.001, dtype=z.dtype)
    chk(lambda m, z, i, s: m.scatter_add(z, 0, i, s), z, i, s, exact=True)
    chk(lambda m, z, i, s: m.scatter(z, 0, i, s, reduce="add"), z, i, s, exact=True)
    chk(lambda m, z, i: m.scatter(z, 0, i, 1.0, reduce="add"), z, i, exact=True)
    chk(lambda m, z, i, s: m.scatter_reduce(z + 1, 0, i, s, "prod"), z, i, p, exact=True)
    chk(lambda m, z, i, s: m.scatter_reduce(z, 0, i, s, "sum", include_self=False), z, i, s, exact=True)
    chk(lambda m, z, i, s: m.scatter_reduce(z, 0, i, s * 3, "mean"), z, i, s, exact=True)


@pytest.mark.parametrize("dtype", SOME)
def test_scatter_inplace(dtype):
    x = make((5, 4), dtype, seed=15).t()  # non-contiguous self
    src = make((6, 5), dtype, seed=16)
    idx = rnd_index((3, 5), 4, seed=17)
    chk(lambda m, x, i, s: (x.scatter_(0, i, s), x)[1], x, idx, src, exact=True)
    chk(lambda m, x, i: (x.scatter_(1, i[:, :2], 1), x)[1], x, idx, exact=True)
    chk(lambda m, x, i, s: (x.scatter_(0, i, s, reduce="add"), x)[1], x, idx, src)
    chk(lambda m, x, i, s: (x.scatter_add_(0, i, s), x)[1], x, idx, src)
    if dtype != "bool":
        chk(lambda m, x, i, s: (x.scatter_reduce_(0, i, s, "mean", include_self=False), x)[1], x, idx, src)
    chk(lambda m, x, i, s: x.scatter_add_(0, i, s), x, idx, src)  # returns self's values


SCATTER_EDGE = {
    "0dim_all": (lambda m, x: m.scatter(m.tensor(1.0), 0, m.tensor(0), m.tensor(5.0)), ()),
    "0dim_self_1d_idx": (lambda m, x: m.scatter(m.tensor(1.0), 0, m.tensor([0]), m.tensor([5.0])), ()),
    "1d_self_0dim_idx": (lambda m, x: m.scatter(m.zeros(3), 0, m.tensor(1), m.tensor(5.0)), ()),
    "0dim_add": (lambda m, x: m.scatter_add(m.tensor(1.0), -1, m.tensor([0, 0]), m.tensor([2.0, 3.0])), ()),
    "empty_idx": (lambda m, x: m.scatter(x, 0, m.zeros(0, 2, dtype=m.int64), x), True),
    "empty_idx_float_dtype": (lambda m, x: m.scatter(x, 0, m.zeros(0, dtype=m.float32), x), True),
    "empty_self": (lambda m, x: m.scatter_add(m.zeros(0, 3), 1, m.zeros(0, 2, dtype=m.int64), m.zeros(0, 3)), ()),
    "idx_int32": (lambda m, x: m.scatter_add(x, 1, m.tensor([[0, 0, 2]], dtype=m.int32), x), True),
    "idx_int32_reduce": (lambda m, x: m.scatter_reduce(x, 1, m.tensor([[0, 0, 2]], dtype=m.int32), x, "amax"),
                         True),
    "idx_longer_than_self_on_dim": (lambda m, x: m.scatter(x, 0, m.tensor([[0], [1], [0], [2]]),
                                                           m.ones(4, 1)), True),
    "neg_dim": (lambda m, x: m.scatter(x, -2, m.tensor([[2, 1]]), 9.0), True),
    "bool_value_into_float": (lambda m, x: m.scatter(x, 0, m.tensor([[1]]), True), True),
    "complex_value_real_part": (lambda m, x: m.scatter(x, 0, m.tensor([[1]]), 2 + 0j), True),
    "uint8_wraps_negative": (lambda m, x: m.scatter(m.zeros(3, dtype=m.uint8), 0, m.tensor([1]), -1), ()),
    "int_value_truncates": (lambda m, x: m.scatter(m.zeros(3, dtype=m.int64), 0, m.tensor([1]), 3.7), ()),
    "inf_nan_value": (lambda m, x: m.scatter(m.zeros(3), 0, m.tensor([1, 2]), float("inf")), ()),
    # errors
    "oob": (lambda m, x: m.scatter(x, 0, m.tensor([[3]]), 1.0), True),
    "negative_index": (lambda m, x: m.scatter(x, 0, m.tensor([[-1]]), 1.0), True),
    "oob_add": (lambda m, x: m.scatter_add(x, 1, m.tensor([[4]]), x), True),
    "oob_reduce": (lambda m, x: m.scatter_reduce(x, 1, m.tensor([[0, 9]]), x, "sum"), True),
    "oob_0dim": (lambda m, x: m.scatter(m.tensor(1.0), 0, m.tensor(1), m.tensor(5.0)), ()),
    "idx_bigger_than_src": (lambda m, x: m.scatter(x, 0, m.zeros(2, 2, dtype=m.int64), m.ones(1, 2)), True),
    "idx_bigger_than_self": (lambda m, x: m.scatter(x, 0, m.zeros(2, 5, dtype=m.int64), m.ones(2, 5)), True),
    "ndim_mismatch": (lambda m, x: m.scatter(x, 0, m.zeros(2, dtype=m.int64), m.ones(2)), True),
    "src_ndim_mismatch": (lambda m, x: m.scatter(x, 0, m.zeros(2, 2, dtype=m.int64), m.ones(4)), True),
    "src_0dim": (lambda m, x: m.scatter(x, 0, m.zeros(2, 2, dtype=m.int64), m.tensor(1.0)), True),
    "src_dtype": (lambda m, x: m.scatter(x, 0, m.zeros(1, 1, dtype=m.int64), m.ones(1, 1, dtype=m.float64)), True),
    "add_dtype": (lambda m, x: m.scatter_add(x, 0, m.zeros(1, 1, dtype=m.int64), m.ones(1, 1, dtype=m.int64)), True),
    "idx_int16": (lambda m, x: m.scatter(x, 0, m.zeros(1, 1, dtype=m.int16), 1.0), True),
    "idx_float": (lambda m, x: m.scatter_add(x, 0, m.zeros(1, 1), x), True),
    "dim_oob": (lambda m, x: m.scatter(x, 2, m.zeros(1, 1, dtype=m.int64), 1.0), True),
    "bad_legacy_reduce": (lambda m, x: m.scatter(x, 0, m.zeros(1, 1, dtype=m.int64), x, reduce="mean"), True),
    "bad_reduce": (lambda m, x: m.scatter_reduce(x, 0, m.zeros(1, 1, dtype=m.int64), x, "add"), True),
    "value_overflow_int8": (lambda m, x: m.scatter(m.zeros(2, dtype=m.int8), 0, m.tensor([0]), 200), ()),
    "value_overflow_half": (lambda m, x: m.scatter(m.zeros(2, dtype=m.float16), 0, m.tensor([0]), 70000.0), ()),
    "value_complex_into_int": (lambda m, x: m.scatter(m.zeros(2, dtype=m.int64), 0, m.tensor([0]), 1j), ()),
    "value_nan_into_int": (lambda m, x: m.scatter(m.zeros(2, dtype=m.int64), 0, m.tensor([0]), float("nan")), ()),
    "mean_bool": (lambda m, x: m.scatter_reduce(m.zeros(2, dtype=m.bool), 0, m.tensor([0]),
                                                m.ones(1, dtype=m.bool), "mean"), ()),
    "amax_complex": (lambda m, x: m.scatter_reduce(m.zeros(2, dtype=m.complex64), 0, m.tensor([0]),
                                                   m.ones(1, dtype=m.complex64), "amax"), ()),
    "inplace_oob_untouched": (lambda m, x: (x.scatter_(0, m.tensor([[0, 5]]), 1.0), x), True),
}


@pytest.mark.parametrize("case", list(SCATTER_EDGE))
def test_scatter_edge_and_errors(case):
    fn, needs_x = SCATTER_EDGE[case]
    x = make((3, 4), "float32", seed=18)
    chk(lambda m, x: fn(m, x), x, exact=True, msg=case)


def test_scatter_oob_writes_nothing():
    x = kiln.zeros(3, 4)
    with pytest.raises(RuntimeError):
        x.scatter_(1, kiln.tensor([[0, 1, 2, 7]]), kiln.ones(1, 4))
    assert x.sum().item() == 0
    with pytest.raises(IndexError):
        x.index_copy_(0, kiln.tensor([0, 3]), kiln.ones(2, 4))
    with pytest.raises(IndexError):
        x.put_(kiln.tensor([0, 12]), kiln.ones(2))
    with pytest.raises(IndexError):
        x.index_put_((kiln.tensor([0, 3]),), kiln.ones(4))
    with pytest.raises(IndexError):
        x.index_fill_(1, kiln.tensor([0, -5]), 1.0)
    assert x.sum().item() == 0


# ============================================================================================================
# index_add / index_copy / index_fill
# ============================================================================================================

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("lay", ["contig", "transposed"])
def test_index_add(dtype, dim, lay):
    x = layout(make((4, 5), dtype, seed=20), lay)
    d = dim % 2
    n = 7
    ss = [4, 5]
    ss[d] = n
    src = layout(make(tuple(ss), dtype, seed=21), lay)
    idx = rnd_index((n,), x.shape[d], seed=22)  # duplicates accumulate
    chk(lambda m, x, i, s: m.index_add(x, dim, i, s), x, idx, src)
    chk(lambda m, x, i, s: x.index_add(dim, i.int(), s), x, idx, src)
    if dtype not in ("bool",):
        chk(lambda m, x, i, s: m.index_add(x, dim, i, s, alpha=2), x, idx, src)
    chk(lambda m, x, i, s: (x.index_add_(dim, i, s), x)[1], x, idx, src)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_index_add_accumulation_paths(dtype):
    dt = getattr(torch, dtype)
    n = 3000
    i = torch.zeros(n, dtype=L)
    cases = [
        lambda m, i: m.index_add(m.zeros(1, dtype=getattr(m, dtype)), 0, i, m.ones(n, dtype=getattr(m, dtype))),
        lambda m, i: m.index_add(m.zeros(1, 3, dtype=getattr(m, dtype)), 0, i, m.ones(n, 3, dtype=getattr(m, dtype))),
        lambda m, i: m.index_add(m.zeros(3, 1, dtype=getattr(m, dtype)), 1, i, m.ones(3, n, dtype=getattr(m, dtype))),
        lambda m, i: m.index_add(m.zeros(2, 1, 2, dtype=getattr(m, dtype)), 1, i,
                                 m.ones(2, n, 2, dtype=getattr(m, dtype))),
        lambda m, i: m.index_add(m.zeros(1, 3, dtype=getattr(m, dtype)), 0, i, m.ones(n, 3, dtype=getattr(m, dtype)),
                                 alpha=2),
        lambda m, i: m.index_add(m.zeros(1, 3, dtype=getattr(m, dtype)), 0, i.int(),
                                 m.ones(n, 3, dtype=getattr(m, dtype))),
    ]
    del dt
    for k, f in enumerate(cases):
        chk(f, i, exact=True, msg=f"case {k}")


@pytest.mark.parametrize("alpha", [2, -1, 0.5, 2.5, True, 1j])
@pytest.mark.parametrize("dtype", ["bool", "int64", "float32", "complex64"])
def test_index_add_alpha(alpha, dtype):
    x = make((3, 4), dtype, seed=23)
    src = make((3, 2), dtype, seed=24)
    chk(lambda m, x, s: m.index_add(x, 1, m.tensor([3, 0]), s, alpha=alpha), x, src)
    chk(lambda m, x, s: m.index_add(x[0], 0, m.tensor([3, 3]), s[0], alpha=alpha), x, src)


INDEX_ADD_ERRORS = {
    "oob_2d_dim0": lambda m: m.index_add(m.zeros(2, 3), 0, m.tensor([2]), m.ones(1, 3)),
    "neg_2d_dim0": lambda m: m.index_add(m.zeros(2, 3), 0, m.tensor([-1]), m.ones(1, 3)),
    "oob_1d": lambda m: m.index_add(m.zeros(3), 0, m.tensor([3]), m.ones(1)),
    "neg_1d": lambda m: m.index_add(m.zeros(3), 0, m.tensor([-1]), m.ones(1)),
    "oob_3d_mid": lambda m: m.index_add(m.zeros(3, 2, 2), 1, m.tensor([3]), m.ones(3, 1, 2)),
    "oob_3d_last": lambda m: m.index_add(m.zeros(3, 2, 2), 2, m.tensor([2]), m.ones(3, 2, 1)),
    "oob_int32": lambda m: m.index_add(m.zeros(2, 3), 0, m.tensor([2], dtype=m.int32), m.ones(1, 3)),
    "oob_alpha": lambda m: m.index_add(m.zeros(2, 3), 0, m.tensor([2]), m.ones(1, 3), alpha=2),
    "idx_2d": lambda m: m.index_add(m.zeros(2, 3), 0, m.tensor([[1, 1]]), m.ones(2, 3)),
    "idx_int8": lambda m: m.index_add(m.zeros(2, 3), 0, m.tensor([1], dtype=m.int8), m.ones(1, 3)),
    "num_mismatch": lambda m: m.index_add(m.zeros(2, 3), 0, m.tensor([1]), m.ones(2, 3)),
    "shape_mismatch": lambda m: m.index_add(m.zeros(2, 3), 0, m.tensor([1, 1]), m.ones(2, 2)),
    "dim_vs_src": lambda m: m.index_add(m.zeros(2, 3), 1, m.tensor([1, 1]), m.ones(2)),
    "dtype": lambda m: m.index_add(m.zeros(2, 3), 0, m.tensor([1]), m.ones(1, 3, dtype=m.float64)),
    "0dim_ok": lambda m: m.index_add(m.tensor(1.0), 0, m.tensor(0), m.tensor(2.0)),
    "0dim_self_1d_src": lambda m: m.index_add(m.tensor(1.0), 0, m.tensor([0, 0]), m.tensor([1.0, 2.0])),
    "0dim_src": lambda m: m.index_add(m.zeros(3), 0, m.tensor([1]), m.tensor(2.0)),
    "0dim_src_2idx": lambda m: m.index_add(m.zeros(3), 0, m.tensor([1, 2]), m.tensor(2.0)),
    "ndim": lambda m: m.index_add(m.zeros(2, 3), 0, m.tensor([1, 1]), m.zeros(2, 3, 1)),
    "dim_oob": lambda m: m.index_add(m.zeros(2, 3), 2, m.tensor([1]), m.zeros(2, 1)),
    "alpha_complex_on_float": lambda m: m.index_add(m.zeros(2, 3), 0, m.tensor([1]), m.ones(1, 3), alpha=1j),
    "uint16": lambda m: m.index_add(m.zeros(2, dtype=m.uint16), 0, m.tensor([1]), m.ones(1, dtype=m.uint16)),
    "empty_index": lambda m: m.index_add(m.ones(2, 3), 1, m.zeros(0, dtype=m.int64), m.ones(2, 0)),
}


@pytest.mark.parametrize("case", list(INDEX_ADD_ERRORS))
def test_index_add_edge_and_errors(case):
    chk(lambda m: INDEX_ADD_ERRORS[case](m), msg=case)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_copy(dtype, dim):
    x = make((4, 5), dtype, seed=25).t()
    d = dim % 2
    ss = [5, 4]
    ss[d] = 3
    src = make(tuple(ss), dtype, seed=26)
    idx = torch.tensor([3, 0, 3]) if x.shape[d] > 3 else torch.tensor([1, 0, 1])  # duplicate: last wins
    chk(lambda m, x, i, s: m.index_copy(x, dim, i, s), x, idx, src, exact=True)
    chk(lambda m, x, i, s: x.index_copy(dim, i, s), x, idx, src, exact=True)
    chk(lambda m, x, i, s: (x.index_copy_(dim, i, s), x)[1], x, idx, src, exact=True)


INDEX_COPY_CASES = {
    "0dim_src": lambda m: m.index_copy(m.zeros(3), 0, m.tensor([1]), m.tensor(2.0)),
    "0dim_src_0dim_idx": lambda m: m.index_copy(m.zeros(3), 0, m.tensor(2), m.tensor(2.0)),
    "0dim_self": lambda m: m.index_copy(m.tensor(0.0), 0, m.tensor([0]), m.tensor([2.0])),
    "0dim_src_2idx": lambda m: m.index_copy(m.zeros(3), 0, m.tensor([1, 2]), m.tensor(2.0)),
    "dim_mismatch": lambda m: m.index_copy(m.zeros(2, 3), 0, m.tensor([1]), m.zeros(3)),
    "slice_mismatch": lambda m: m.index_copy(m.zeros(2, 3), 0, m.tensor([1]), m.zeros(1, 2)),
    "num_mismatch": lambda m: m.index_copy(m.zeros(2, 3), 0, m.tensor([1, 0]), m.zeros(1, 3)),
    "idx_2d": lambda m: m.index_copy(m.zeros(2, 3), 0, m.tensor([[1]]), m.zeros(1, 3)),
    "dtype": lambda m: m.index_copy(m.zeros(2, 3), 0, m.tensor([1]), m.zeros(1, 3, dtype=m.int64)),
    "idx_int32": lambda m: m.index_copy(m.zeros(2, 3), 0, m.tensor([1], dtype=m.int32), m.zeros(1, 3)),
    "oob": lambda m: m.index_copy(m.zeros(2, 3), 0, m.tensor([2]), m.ones(1, 3)),
    "neg": lambda m: m.index_copy(m.zeros(2, 3), 1, m.tensor([-1]), m.ones(2, 1)),
    "dim_oob": lambda m: m.index_copy(m.zeros(2, 3), -3, m.tensor([0]), m.ones(2, 1)),
    "empty": lambda m: m.index_copy(m.ones(2, 3), 1, m.zeros(0, dtype=m.int64), m.ones(2, 0)),
}


@pytest.mark.parametrize("case", list(INDEX_COPY_CASES))
def test_index_copy_edge_and_errors(case):
    chk(lambda m: INDEX_COPY_CASES[case](m), exact=True, msg=case)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -2])
@pytest.mark.parametrize("value", [3, -1.5, True])
def test_index_fill(dtype, dim, value):
    x = make((3, 4), dtype, seed=27).t()
    idx = torch.tensor([1, -1, 1])  # negative indices count from the end
    chk(lambda m, x, i: m.index_fill(x, dim, i, value), x, idx, exact=True)
    chk(lambda m, x, i: x.index_fill(dim, i, value), x, idx, exact=True)
    chk(lambda m, x, i: (x.index_fill_(dim, i, value), x)[1], x, idx, exact=True)


INDEX_FILL_CASES = {
    "tensor_value": lambda m: m.index_fill(m.zeros(2, 3), 1, m.tensor([2]), m.tensor(3.5)),
    "tensor_value_other_dtype": lambda m: m.index_fill(m.zeros(2, 3, dtype=m.int64), 1, m.tensor([2]), m.tensor(3.5)),
    "tensor_value_1d": lambda m: m.index_fill(m.zeros(2), 0, m.tensor([0]), m.tensor([3.0])),
    "idx_0dim": lambda m: m.index_fill(m.zeros(2), 0, m.tensor(1), 1),
    "idx_2d": lambda m: m.index_fill(m.zeros(2), 0, m.tensor([[0]]), 1),
    "idx_int32": lambda m: m.index_fill(m.zeros(2), 0, m.tensor([0], dtype=m.int32), 1),
    "0dim_self": lambda m: m.index_fill(m.tensor(0.0), 0, m.tensor([0]), 1),
    "0dim_self_neg": lambda m: m.index_fill(m.tensor(0.0), -1, m.tensor([-1]), 1),
    "0dim_self_oob": lambda m: m.index_fill(m.tensor(0.0), 0, m.tensor([1]), 1),
    "oob": lambda m: m.index_fill(m.zeros(2, 3), 0, m.tensor([2]), 7),
    "oob_neg": lambda m: m.index_fill(m.zeros(2, 3), 0, m.tensor([-3]), 7),
    "dim_oob": lambda m: m.index_fill(m.zeros(2, 3), 2, m.tensor([0]), 7),
    "complex_into_float": lambda m: m.index_fill(m.zeros(2), 0, m.tensor([0]), 1 + 0j),
    "complex_into_complex": lambda m: m.index_fill(m.zeros(2, dtype=m.complex64), 0, m.tensor([0]), 1 + 2j),
    "overflow_int8": lambda m: m.index_fill(m.zeros(2, dtype=m.int8), 0, m.tensor([0]), 200),
    "uint8_negative_wraps": lambda m: m.index_fill(m.zeros(2, dtype=m.uint8), 0, m.tensor([0]), -1),
    "overflow_float": lambda m: m.index_fill(m.zeros(2), 0, m.tensor([0]), 1e300),
    "inf_ok": lambda m: m.index_fill(m.zeros(2, dtype=m.float16), 0, m.tensor([0]), float("-inf")),
    "empty_idx": lambda m: m.index_fill(m.ones(2, 3), 1, m.zeros(0, dtype=m.int64), 0),
}


@pytest.mark.parametrize("case", list(INDEX_FILL_CASES))
def test_index_fill_edge_and_errors(case):
    chk(lambda m: INDEX_FILL_CASES[case](m), exact=True, msg=case)


# ============================================================================================================
# masked_scatter / take / take_along_dim / put
# ============================================================================================================

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("lay", ["contig", "transposed"])
def test_masked_scatter(dtype, lay):
    x = layout(make((4, 5), dtype, seed=30), lay)
    mask = layout(make((4, 5), "bool", seed=31), lay)
    src = make((4, 6), dtype, seed=32)  # read in flattened order
    chk(lambda m, x, k, s: m.masked_scatter(x, k, s), x, mask, src, exact=True)
    chk(lambda m, x, k, s: x.masked_scatter(k, s), x, mask, src, exact=True)
    chk(lambda m, x, k, s: (x.masked_scatter_(k, s), x)[1], x, mask, src, exact=True)


MASKED_SCATTER_CASES = {
    "bcast_mask": lambda m: m.masked_scatter(m.zeros(2, 3), m.tensor([True, False, True]), m.arange(10.0)),
    "bcast_self": lambda m: m.masked_scatter(m.zeros(3), m.tensor([[True, False, True], [True, True, True]]),
                                             m.arange(10.0)),
    "inplace_bcast_mask": lambda m: m.zeros(2, 3).masked_scatter_(m.tensor([True, False, True]), m.arange(6.0)),
    "inplace_bcast_self_err": lambda m: m.zeros(3).masked_scatter_(m.tensor([[True, False, True]] * 2),
                                                                  m.arange(10.0)),
    "0dim": lambda m: m.masked_scatter(m.tensor(1.0), m.tensor(True), m.tensor([5.0, 6.0])),
    "0dim_mask": lambda m: m.masked_scatter(m.zeros(2, 3), m.tensor(True), m.arange(6.0) + 10),
    "empty": lambda m: m.masked_scatter(m.zeros(0), m.zeros(0, dtype=m.bool), m.tensor([1.0])),
    "no_true_empty_src": lambda m: m.masked_scatter(m.ones(2, 3), m.zeros(2, 3, dtype=m.bool), m.zeros(0)),
    "src_2d": lambda m: m.masked_scatter(m.zeros(2, 3), m.ones(2, 3, dtype=m.bool), m.arange(10.0).reshape(2, 5)),
    "src_short": lambda m: m.masked_scatter(m.zeros(2, 3), m.ones(2, 3, dtype=m.bool), m.arange(5.0)),
    "dtype": lambda m: m.masked_scatter(m.zeros(2, 3), m.ones(2, 3, dtype=m.bool), m.arange(6)),
    "mask_uint8": lambda m: m.masked_scatter(m.zeros(2, 3), m.ones(2, 3, dtype=m.uint8), m.arange(6.0)),
    "bad_bcast": lambda m: m.masked_scatter(m.zeros(2, 3), m.tensor([True, False]), m.arange(6.0)),
    "uint32": lambda m: m.masked_scatter(m.zeros(2, dtype=m.uint32), m.ones(2, dtype=m.bool),
                                         m.ones(2, dtype=m.uint32)),
}


@pytest.mark.parametrize("case", list(MASKED_SCATTER_CASES))
def test_masked_scatter_edge_and_errors(case):
    chk(lambda m: MASKED_SCATTER_CASES[case](m), exact=True, msg=case)


def test_masked_scatter_short_source_writes_nothing():
    x = kiln.zeros(2, 3)
    with pytest.raises(RuntimeError):
        x.masked_scatter_(kiln.ones(2, 3, dtype=kiln.bool), kiln.ones(5))
    assert x.sum().item() == 0


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("lay", ["contig", "transposed", "sliced"])
def test_take(dtype, lay):
    x = layout(make((4, 5), dtype, seed=33), lay)
    idx = rnd_index((3, 4), 20, seed=34, low=-20)  # negative indices count from the end
    chk(lambda m, x, i: m.take(x, i), x, idx, exact=True)
    chk(lambda m, x, i: x.take(i.t()), x, idx, exact=True)


TAKE_CASES = {
    "0dim_idx": lambda m: m.take(m.arange(6.0).reshape(2, 3), m.tensor(4)),
    "0dim_self": lambda m: m.take(m.tensor(3.0), m.tensor([0, -1, 0])),
    "empty_idx": lambda m: m.take(m.arange(6.0), m.zeros(0, 2, dtype=m.int64)),
    "empty_src": lambda m: m.take(m.zeros(0), m.tensor([0])),
    "empty_src_empty_idx": lambda m: m.take(m.zeros(0), m.zeros(0, dtype=m.int64)),
    "oob": lambda m: m.take(m.arange(6.0), m.tensor([6])),
    "oob_neg": lambda m: m.take(m.arange(6.0), m.tensor([-7])),
    "idx_int32": lambda m: m.take(m.arange(6.0), m.tensor([0], dtype=m.int32)),
}


@pytest.mark.parametrize("case", list(TAKE_CASES))
def test_take_edge_and_errors(case):
    chk(lambda m: TAKE_CASES[case](m), exact=True, msg=case)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1, None])
def test_take_along_dim(dtype, dim):
    x = make((4, 5), dtype, seed=35)
    if dim is None:
        idx = rnd_index((3, 3), 20, seed=36)
    else:
        shape = (6, 5) if dim == 0 else (4, 7)
        idx = rnd_index(shape, 12, seed=36, low=-12)  # torch 2.13 takes these modulo the size
    chk(lambda m, x, i: m.take_along_dim(x, i, dim), x, idx, exact=True)
    chk(lambda m, x, i: x.take_along_dim(i, dim=dim), x, idx, exact=True)


TAD_CASES = {
    "bcast": lambda m: m.take_along_dim(m.arange(6.0).reshape(2, 3), m.tensor([[1], [0]]), 1),
    "bcast_both": lambda m: m.take_along_dim(m.arange(6.0).reshape(1, 2, 3), m.tensor([[[1]], [[0]]]), 2),
    "bcast_self_transposed": lambda m: m.take_along_dim(m.arange(6.0).reshape(3, 2).t(), m.tensor([[2, 0, 1]]), 0),
    "ndim_mismatch": lambda m: m.take_along_dim(m.zeros(2, 3), m.tensor([1, 0]), 1),
    "bad_bcast": lambda m: m.take_along_dim(m.zeros(2, 3), m.tensor([[1], [0], [0]]), 1),
    "idx_int32": lambda m: m.take_along_dim(m.zeros(2, 3), m.tensor([[1]], dtype=m.int32), 1),
    "0dim": lambda m: m.take_along_dim(m.tensor(5.0), m.tensor(0), 0),
    "0dim_none": lambda m: m.take_along_dim(m.tensor(5.0), m.tensor(0)),
    "0dim_none_1d": lambda m: m.take_along_dim(m.tensor(5.0), m.tensor([0, 0])),
    "dim_oob": lambda m: m.take_along_dim(m.zeros(2, 3), m.zeros(2, 3, dtype=m.int64), 2),
    "size0_dim": lambda m: m.take_along_dim(m.zeros(0, 3), m.zeros(1, 3, dtype=m.int64), 0),
    "size0_empty_idx": lambda m: m.take_along_dim(m.zeros(0, 3), m.zeros(0, 3, dtype=m.int64), 0),
    "none_oob": lambda m: m.take_along_dim(m.arange(6.0), m.tensor([6])),
    "none_neg": lambda m: m.take_along_dim(m.arange(6.0), m.tensor([-1])),
    "none_int32": lambda m: m.take_along_dim(m.arange(6.0), m.tensor([1, 2], dtype=m.int32)),
    "none_float_idx": lambda m: m.take_along_dim(m.arange(6.0), m.tensor([1.0])),
    "none_noncontig": lambda m: m.take_along_dim(m.arange(6.0).reshape(2, 3).t(), m.tensor([1, 2])),
}


@pytest.mark.parametrize("case", list(TAD_CASES))
def test_take_along_dim_edge_and_errors(case):
    chk(lambda m: TAD_CASES[case](m), exact=True, msg=case)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("accumulate", [False, True])
def test_put(dtype, accumulate):
    x = make((4, 5), dtype, seed=37).t()  # linear indices follow the logical (row-major) order
    idx = rnd_index((2, 3), 20, seed=38, low=-20)
    src = make((6,), dtype, seed=39)
    chk(lambda m, x, i, s: m.put(x, i, s, accumulate), x, idx, src, exact=not accumulate)
    chk(lambda m, x, i, s: x.put(i, s, accumulate=accumulate), x, idx, src, exact=not accumulate)
    chk(lambda m, x, i, s: (x.put_(i, s.reshape(3, 2), accumulate), x)[1], x, idx, src, exact=not accumulate)


PUT_CASES = {
    "dup_last_wins": lambda m: m.put(m.zeros(3), m.tensor([0, 0, -1]), m.tensor([1.0, 2.0, 3.0])),
    "dup_acc": lambda m: m.put(m.zeros(3), m.tensor([0, 0, -1]), m.tensor([1.0, 2.0, 3.0]), True),
    "half_acc_rounds_each_step": lambda m: m.zeros(1, dtype=m.float16).put_(
        m.zeros(3000, dtype=m.int64), m.ones(3000, dtype=m.float16), accumulate=True),
    "numel_mismatch": lambda m: m.put(m.zeros(3), m.tensor([0, 1]), m.tensor([1.0, 2.0, 3.0])),
    "dtype": lambda m: m.put(m.zeros(3), m.tensor([0]), m.tensor([1])),
    "idx_int32": lambda m: m.put(m.zeros(3), m.tensor([0], dtype=m.int32), m.tensor([1.0])),
    "oob": lambda m: m.put(m.zeros(3), m.tensor([3]), m.tensor([1.0])),
    "oob_neg": lambda m: m.put(m.zeros(3), m.tensor([-4]), m.tensor([1.0])),
    "empty_self": lambda m: m.zeros(0).put_(m.tensor([0]), m.tensor([9.0])),
    "empty_idx": lambda m: m.put(m.ones(3), m.zeros(0, dtype=m.int64), m.zeros(0)),
    "0dim": lambda m: m.put(m.tensor(1.0), m.tensor(0), m.tensor(5.0)),
}


@pytest.mark.parametrize("case", list(PUT_CASES))
def test_put_edge_and_errors(case):
    chk(lambda m: PUT_CASES[case](m), exact=True, msg=case)


# ============================================================================================================
# index_put
# ============================================================================================================

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(dtype, accumulate):
    x = make((4, 5), dtype, seed=40)
    i0 = torch.tensor([0, 3, -1])
    i1 = torch.tensor([1, 1, 4])
    v = make((3,), dtype, seed=41)
    exact = not accumulate
    chk(lambda m, x, a, b, v: m.index_put(x, (a, b), v, accumulate), x, i0, i1, v, exact=exact)
    chk(lambda m, x, a, b, v: x.index_put([a, b], v, accumulate=accumulate), x, i0, i1, v, exact=exact)
    chk(lambda m, x, a, v: (x.index_put_((a,), v[:1], accumulate), x)[1], x, i0, v, exact=exact)
    if not dtype.startswith("float8"):  # torch's float8 accumulate rounds every step
        chk(lambda m, x, a, v: (x.index_put_((a, a[:1] + 1), v, accumulate), x)[1], x, i0, v, exact=exact)


INDEX_PUT_CASES = {
    "bool_mask": lambda m: m.index_put(m.arange(6.0).reshape(2, 3), (m.arange(6).reshape(2, 3) > 2,),
                                       m.tensor(9.0)),
    "bool_mask_other_dtype_value": lambda m: m.index_put(m.arange(6.0).reshape(2, 3),
                                                         (m.arange(6).reshape(2, 3) > 2,), m.tensor(7)),
    "bool_mask_values": lambda m: m.index_put(m.arange(6.0).reshape(2, 3), (m.arange(6).reshape(2, 3) > 2,),
                                              m.tensor([7.0, 8.0, 9.0])),
    "bool_mask_rows": lambda m: m.index_put(m.arange(6.0).reshape(2, 3), (m.tensor([False, True]),),
                                            m.tensor([7.0, 8.0, 9.0])),
    "mask_overflow": lambda m: m.index_put(m.zeros(2, 3, dtype=m.int8), (m.ones(2, 3, dtype=m.bool),),
                                           m.tensor(300)),
    "mask_complex_into_float": lambda m: m.index_put(m.zeros(2, 3), (m.ones(2, 3, dtype=m.bool),), m.tensor(1 + 1j)),
    "mask_uint8": lambda m: m.index_put(m.zeros(2, 3), (m.tensor([1, 0], dtype=m.uint8),), m.tensor(1.0)),
    "mask_shape": lambda m: m.index_put(m.zeros(2, 3), (m.tensor([True, False, True]),), m.tensor(1.0)),
    "0dim_idx": lambda m: m.index_put(m.zeros(2, 3), (m.tensor(1),), m.tensor(7.0)),
    "int32_idx": lambda m: m.index_put(m.zeros(2, 3), (m.tensor([1], dtype=m.int32),), m.tensor(1.0)),
    "bcast_values": lambda m: m.index_put(m.zeros(3, 4), (m.tensor([0, 2]),), m.tensor([1.0, 2.0, 3.0, 4.0])),
    "acc_dup": lambda m: m.index_put(m.zeros(3), (m.tensor([0, 0, 2]),), m.tensor(1.0), accumulate=True),
    "dtype": lambda m: m.index_put(m.zeros(2, 3), (m.tensor([0]),), m.tensor([1, 2, 3])),
    "dtype_f64": lambda m: m.index_put(m.zeros(2, 3), (m.tensor([0]),), m.tensor([1.0, 2.0, 3.0],
                                                                             dtype=m.float64)),
    "bad_shape": lambda m: m.index_put(m.zeros(2, 3), (m.tensor([0, 0]),), m.ones(3, 3)),
    "float_idx": lambda m: m.index_put(m.zeros(2, 3), (m.tensor([0.0]),), m.tensor(1.0)),
    "int8_idx": lambda m: m.index_put(m.zeros(2, 3), (m.tensor([0], dtype=m.int8),), m.tensor(1.0)),
    "too_many": lambda m: m.index_put(m.zeros(2, 3), (m.tensor([0]),) * 3, m.tensor(1.0)),
    "empty_tuple": lambda m: m.index_put(m.zeros(2, 3), (), m.tensor(1.0)),
    "oob": lambda m: m.index_put(m.zeros(2, 3), (m.tensor([2]),), m.tensor(1.0)),
    "neg": lambda m: m.index_put(m.zeros(2, 3), (m.tensor([-2]),), m.tensor(1.0)),
    "not_tuple": lambda m: m.index_put(m.zeros(2, 3), m.tensor([0]), m.tensor(1.0)),
    "inplace_not_tuple": lambda m: m.zeros(2, 3).index_put_(m.tensor([0]), m.tensor(1.0)),
    "none_entry": lambda m: m.index_put(m.zeros(2, 3), (None, m.tensor([0])), m.tensor(1.0)),
    "number_values": lambda m: m.index_put(m.zeros(2, 3), (m.tensor([0]),), 1.0),
    "uint16": lambda m: m.index_put(m.zeros(2, dtype=m.uint16), (m.tensor([0]),), m.ones(1, dtype=m.uint16)),
    "uint16_mask": lambda m: m.index_put(m.zeros(2, dtype=m.uint16), (m.tensor([True, False]),),
                                         m.tensor(1, dtype=m.uint16)),
}


@pytest.mark.parametrize("case", list(INDEX_PUT_CASES))
def test_index_put_edge_and_errors(case):
    chk(lambda m: INDEX_PUT_CASES[case](m), exact=True, msg=case)


# ============================================================================================================
# roll / rot90 / repeat / tile / repeat_interleave
# ============================================================================================================

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("lay", ["contig", "transposed", "sliced"])
@pytest.mark.parametrize("args", [(1, None), (-7, None), ((2,), None), (1, 0), (-1, 1), ((1, -2), (0, 1)),
                                  ((3, 1), (-1, -1)), (100, 1), ((1, 1), (0, 0))])
def test_roll(dtype, lay, args):
    x = layout(make((3, 4), dtype, seed=50), lay)
    shifts, dims = args
    chk(lambda m, x: m.roll(x, shifts, dims), x, exact=True)
    chk(lambda m, x: x.roll(shifts, dims=dims), x, exact=True)


ROLL_CASES = {
    "3d": lambda m: m.roll(m.arange(24).reshape(2, 3, 4), (1, 2, -1), (0, 1, 2)),
    "0dim": lambda m: m.roll(m.tensor(3.0), 1),
    "0dim_dim": lambda m: m.roll(m.tensor(3.0), 1, 0),
    "empty": lambda m: m.roll(m.zeros(0, 3), 1, 0),
    "empty_bad_dim": lambda m: m.roll(m.zeros(0, 3), 1, 5),
    "empty_dims_tuple": lambda m: m.roll(m.arange(6).reshape(2, 3), 1, ()),
    "no_shifts": lambda m: m.roll(m.arange(6), ()),
    "flat_two_shifts": lambda m: m.roll(m.arange(6), (1, 2)),
    "mismatch": lambda m: m.roll(m.arange(6).reshape(2, 3), (1, 2), 0),
    "mismatch2": lambda m: m.roll(m.arange(6).reshape(2, 3), 1, (0, 1)),
    "dim_oob": lambda m: m.roll(m.arange(6).reshape(2, 3), 1, 2),
    "dim_oob_multi": lambda m: m.roll(m.arange(6).reshape(2, 3), (1, 1), (0, -3)),
}


@pytest.mark.parametrize("case", list(ROLL_CASES))
def test_roll_edge_and_errors(case):
    chk(lambda m: ROLL_CASES[case](m), exact=True, msg=case)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("k", [-1, 0, 1, 2, 3, 4, 7])
@pytest.mark.parametrize("lay", ["contig", "transposed", "sliced"])
def test_rot90(dtype, k, lay):
    x = layout(make((3, 4), dtype, seed=51), lay)
    chk(lambda m, x: m.rot90(x, k), x, exact=True)
    chk(lambda m, x: x.rot90(k, [1, 0]), x, exact=True)


ROT90_CASES = {
    "3d": lambda m: m.rot90(m.arange(24).reshape(2, 3, 4), 1, (0, 2)),
    "3d_neg": lambda m: m.rot90(m.arange(24).reshape(2, 3, 4), 3, (-1, -2)),
    "1d": lambda m: m.rot90(m.arange(3.0)),
    "three_dims": lambda m: m.rot90(m.zeros(2, 3), 1, (0, 1, 1)),
    "same": lambda m: m.rot90(m.zeros(2, 3), 1, (1, 1)),
    "same_after_wrap": lambda m: m.rot90(m.zeros(2, 3), 1, (1, -1)),
    "oob": lambda m: m.rot90(m.zeros(2, 3), 1, (0, 2)),
    "oob_neg": lambda m: m.rot90(m.zeros(2, 3), 1, (0, -3)),
    "uint16_3d_outer": lambda m: m.rot90(m.arange(24).reshape(2, 3, 4).to(m.uint16), 1, (1, 0)),
    "uint16_3d_inner": lambda m: m.rot90(m.arange(24).reshape(2, 3, 4).to(m.uint16), 1, (1, 2)),
    "uint32_size1": lambda m: m.rot90(m.arange(3).reshape(3, 1).to(m.uint32), 1),
    "empty": lambda m: m.rot90(m.zeros(0, 3), 1),
}


@pytest.mark.parametrize("case", list(ROT90_CASES))
def test_rot90_edge_and_errors(case):
    chk(lambda m: ROT90_CASES[case](m), exact=True, msg=case)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("reps", [(2, 1), (1, 3), (2, 2, 2), (0, 2), (3, 1, 1, 1)])
def test_repeat(dtype, reps):
    x = make((2, 3), dtype, seed=52).t()
    chk(lambda m, x: x.repeat(*reps), x, exact=True)
    chk(lambda m, x: x.repeat(reps), x, exact=True)
    chk(lambda m, x: x.repeat(list(reps)), x, exact=True)


REPEAT_CASES = {
    "fewer": lambda m: m.zeros(2, 3).repeat(2),
    "negative": lambda m: m.zeros(2, 3).repeat(2, -1),
    "none": lambda m: m.zeros(2, 3).repeat(),
    "0dim": lambda m: m.tensor(3.0).repeat(2, 2),
    "0dim_empty": lambda m: m.tensor(3.0).repeat(()),
    "empty": lambda m: m.zeros(0, 3).repeat(2, 2),
    "expanded": lambda m: m.arange(3.0).expand(2, 3).repeat(2, 1),
}


@pytest.mark.parametrize("case", list(REPEAT_CASES))
def test_repeat_edge_and_errors(case):
    chk(lambda m: REPEAT_CASES[case](m), exact=True, msg=case)


@pytest.mark.parametrize("dtype", ["bool", "int16", "float32", "complex128", "float8_e5m2", "uint64"])
@pytest.mark.parametrize("dims", [(2,), (2, 1), (1, 2, 2), (), (0,)])
def test_tile(dtype, dims):
    x = make((2, 3), dtype, seed=53)
    chk(lambda m, x: m.tile(x, dims), x, exact=True)
    chk(lambda m, x: x.tile(dims), x, exact=True)
    if dims:
        chk(lambda m, x: x.tile(*dims), x, exact=True)


TILE_CASES = {
    "negative": lambda m: m.tile(m.zeros(2, 3), (-2,)),
    "int_arg": lambda m: m.tile(m.zeros(2, 3), 2),
    "0dim": lambda m: m.tile(m.tensor(1.0), (2, 3)),
}


@pytest.mark.parametrize("case", list(TILE_CASES))
def test_tile_edge_and_errors(case):
    chk(lambda m: TILE_CASES[case](m), exact=True, msg=case)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_repeat_interleave(dtype, dim):
    x = make((3, 4), dtype, seed=54).t()
    chk(lambda m, x: m.repeat_interleave(x, 2, dim), x, exact=True)
    chk(lambda m, x: x.repeat_interleave(3, dim=dim), x, exact=True)
    n = x.numel() if dim is None else x.shape[dim]
    reps = rnd_index((n,), 3, seed=55)
    chk(lambda m, x, r: m.repeat_interleave(x, r, dim), x, reps, exact=True)
    chk(lambda m, x, r: x.repeat_interleave(r.int(), dim, output_size=int(reps.sum())), x, reps, exact=True)


RI_CASES = {
    "int_neg": lambda m: m.repeat_interleave(m.zeros(2, 3), -1),
    "int_zero": lambda m: m.repeat_interleave(m.zeros(2, 3), 0, 0),
    "tensor_1": lambda m: m.repeat_interleave(m.arange(6.0).reshape(2, 3), m.tensor([2]), 1),
    "tensor_0dim": lambda m: m.repeat_interleave(m.arange(6.0).reshape(2, 3), m.tensor(2), 1),
    "tensor_bad_len": lambda m: m.repeat_interleave(m.arange(6.0).reshape(2, 3), m.tensor([1, 2]), 1),
    "tensor_bad_len_flat": lambda m: m.repeat_interleave(m.arange(6.0).reshape(2, 3), m.tensor([1, 2])),
    "tensor_neg": lambda m: m.repeat_interleave(m.arange(6.0).reshape(2, 3), m.tensor([1, -2]), 0),
    "tensor_2d": lambda m: m.repeat_interleave(m.arange(6.0).reshape(2, 3), m.tensor([[1, 2]]), 0),
    "tensor_float": lambda m: m.repeat_interleave(m.arange(6.0).reshape(2, 3), m.tensor([1.0, 2.0]), 0),
    "self_form": lambda m: m.repeat_interleave(m.tensor([2, 0, 3])),
    "self_form_int32": lambda m: m.repeat_interleave(m.tensor([2, 0, 3], dtype=m.int32)),
    "self_form_0dim": lambda m: m.repeat_interleave(m.tensor(3)),
    "self_form_0dim_float": lambda m: m.repeat_interleave(m.tensor(3.0)),
    "self_form_2d": lambda m: m.repeat_interleave(m.tensor([[3]])),
    "self_form_neg": lambda m: m.repeat_interleave(m.tensor([3, -1])),
    "self_form_empty": lambda m: m.repeat_interleave(m.zeros(0, dtype=m.int64)),
    "self_form_output_size": lambda m: m.repeat_interleave(m.tensor([1, 2]), output_size=3),
    "self_form_bad_output_size": lambda m: m.repeat_interleave(m.tensor([1, 2]), output_size=5),
    "output_size_ok": lambda m: m.repeat_interleave(m.arange(6.0).reshape(2, 3), m.tensor([1, 2]), 0,
                                                    output_size=3),
    "output_size_bad": lambda m: m.repeat_interleave(m.arange(6.0).reshape(2, 3), m.tensor([1, 2]), 0,
                                                     output_size=4),
    "output_size_int_bad": lambda m: m.repeat_interleave(m.arange(6.0).reshape(2, 3), 2, 0, output_size=3),
    "output_size_int_ok": lambda m: m.repeat_interleave(m.arange(6.0).reshape(2, 3), 2, 0, output_size=4),
    "0dim_x": lambda m: m.repeat_interleave(m.tensor(5.0), 3),
    "0dim_x_dim": lambda m: m.repeat_interleave(m.tensor(5.0), 3, 0),
    "dim_oob": lambda m: m.repeat_interleave(m.zeros(2, 3), 3, 2),
    "empty_x": lambda m: m.repeat_interleave(m.zeros(0, 3), m.zeros(0, dtype=m.int64), 0),
    "empty_x_int": lambda m: m.repeat_interleave(m.zeros(0, 3), 2, 0),
    "kw": lambda m: m.arange(6.0).reshape(2, 3).repeat_interleave(repeats=2, dim=0, output_size=4),
}


@pytest.mark.parametrize("case", list(RI_CASES))
def test_repeat_interleave_edge_and_errors(case):
    chk(lambda m: RI_CASES[case](m), exact=True, msg=case)


# ============================================================================================================
# diag / diag_embed / meshgrid
# ============================================================================================================

@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("k", [0, 1, -2, 5, -5])
def test_diag(dtype, k):
    v = make((4,), dtype, seed=60)
    chk(lambda m, v: m.diag(v, k), v, exact=True)
    chk(lambda m, v: v.diag(k), v, exact=True)
    for lay in ("contig", "transposed", "sliced"):
        x = layout(make((3, 5), dtype, seed=61), lay)
        chk(lambda m, x: m.diag(x, k), x, exact=True)
        chk(lambda m, x: m.diag(x, diagonal=k), x, exact=True)


DIAG_CASES = {
    "3d": lambda m: m.diag(m.zeros(2, 2, 2)),
    "0d": lambda m: m.diag(m.tensor(2.0)),
    "empty_1d": lambda m: m.diag(m.zeros(0), 1),
    "empty_2d": lambda m: m.diag(m.zeros(0, 3), -1),
    "strided_1d": lambda m: m.diag(m.arange(8.0)[::3], -1),
}


@pytest.mark.parametrize("case", list(DIAG_CASES))
def test_diag_edge_and_errors(case):
    chk(lambda m: DIAG_CASES[case](m), exact=True, msg=case)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("args", [(0, -2, -1), (1, -2, -1), (-1, 0, 2), (2, 2, 0), (0, 1, 0)])
def test_diag_embed(dtype, args):
    x = make((2, 3), dtype, seed=62).t()
    chk(lambda m, x: m.diag_embed(x, *args), x, exact=True)
    chk(lambda m, x: x.diag_embed(offset=args[0], dim1=args[1], dim2=args[2]), x, exact=True)


DIAG_EMBED_CASES = {
    "1d": lambda m: m.diag_embed(m.arange(3.0)),
    "1d_offset": lambda m: m.diag_embed(m.arange(3.0), -2),
    "3d": lambda m: m.diag_embed(m.arange(24.0).reshape(2, 3, 4), 1, 1, 3),
    "0d": lambda m: m.diag_embed(m.tensor(2.0)),
    "same": lambda m: m.diag_embed(m.zeros(2, 3), 0, 1, 1),
    "same_neg": lambda m: m.diag_embed(m.zeros(2, 3), 0, 2, -1),
    "oob": lambda m: m.diag_embed(m.zeros(2, 3), 0, 0, 3),
    "empty": lambda m: m.diag_embed(m.zeros(0, 3)),
    "empty_last": lambda m: m.diag_embed(m.zeros(2, 0), 2),
}


@pytest.mark.parametrize("case", list(DIAG_EMBED_CASES))
def test_diag_embed_edge_and_errors(case):
    chk(lambda m: DIAG_EMBED_CASES[case](m), exact=True, msg=case)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("indexing", ["ij", "xy"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_meshgrid(dtype, indexing, n):
    ts = [make((k + 2,), dtype, seed=63 + k) for k in range(n)]
    ts[0] = make((6,), dtype, seed=70)[::2]  # strided input
    chk(lambda m, *ts: m.meshgrid(*ts, indexing=indexing), *ts, exact=True)
    chk(lambda m, *ts: m.meshgrid(list(ts), indexing=indexing), *ts, exact=True)
    chk(lambda m, *ts: m.meshgrid(tuple(ts), indexing=indexing), *ts, exact=True)


MESHGRID_CASES = {
    "default_ij": lambda m: m.meshgrid(m.arange(2), m.arange(3)),
    "0d": lambda m: m.meshgrid(m.tensor(1.0), m.arange(3.0), indexing="ij"),
    "0d_xy": lambda m: m.meshgrid(m.tensor(1.0), m.arange(3.0), indexing="xy"),
    "empty_input": lambda m: m.meshgrid(m.zeros(0), m.arange(3.0), indexing="xy"),
    "dtype": lambda m: m.meshgrid(m.zeros(2), m.zeros(3, dtype=m.float64), indexing="ij"),
    "2d": lambda m: m.meshgrid(m.zeros(2, 2), m.zeros(3), indexing="ij"),
    "none": lambda m: m.meshgrid([], indexing="ij"),
    "bad_indexing": lambda m: m.meshgrid(m.zeros(2), indexing="foo"),
}


@pytest.mark.parametrize("case", list(MESHGRID_CASES))
def test_meshgrid_edge_and_errors(case):
    chk(lambda m: MESHGRID_CASES[case](m), exact=True, msg=case)


def test_meshgrid_returns_views():
    a, b = kiln.arange(2.0), kiln.arange(3.0)
    ga, gb = kiln.meshgrid(a, b, indexing="ij")
    ta, tb = torch.meshgrid(torch.arange(2.0), torch.arange(3.0), indexing="ij")
    assert isinstance(ga, kiln.Tensor) and tuple(ga.stride()) == tuple(ta.stride())
    assert tuple(gb.stride()) == tuple(tb.stride())
    assert isinstance(kiln.meshgrid(a, b, indexing="xy"), tuple)


# ============================================================================================================
# nn.functional: pad / one_hot / embedding
# ============================================================================================================

def F(m):
    return TF if m is torch else KF


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("pad", [(1, 1), (0, 2, 1, 0), (-1, 2), (2, -1, -1, 1), (1, 1, 1, 1, 1, 1), (-2, -2),
                                 (0, 0), ()])
def test_pad_constant(dtype, pad):
    x = make((2, 3, 4), dtype, seed=80).transpose(0, 2)  # (4, 3, 2), non-contiguous
    chk(lambda m, x: F(m).pad(x, pad), x, exact=True)
    chk(lambda m, x: F(m).pad(x, list(pad), "constant", 1), x, exact=True)
    chk(lambda m, x: F(m).pad(x, pad, value=-2.5), x, exact=True)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("case", [((3, 5), (1, 2)), ((2, 3, 5), (2, 1)), ((3, 4, 5), (1, 2, 3, 0)),
                                  ((2, 3, 4, 5), (0, 1, 2, 1)), ((2, 3, 4, 5), (1, 1, 1, 2, 1, 0)),
                                  ((1, 2, 3, 4, 5), (2, 0, 1, 1, 0, 2)), ((2, 3, 5), (-1, 2)),
                                  ((2, 3, 5), (2, -2)), ((3, 4, 5), (-1, -1, 1, -2))])
def test_pad_modes(mode, dtype, case):
    shape, pad = case
    x = make(shape, dtype, seed=81)
    chk(lambda m, x: F(m).pad(x, pad, mode=mode), x, exact=True)
    if len(shape) >= 3:
        xt = make(shape[::-1], dtype, seed=82).permute(*range(len(shape) - 1, -1, -1))
        chk(lambda m, x: F(m).pad(x, pad, mode), xt, exact=True)


PAD_CASES = {
    "odd": lambda m: F(m).pad(m.zeros(2, 3), (1,)),
    "too_long": lambda m: F(m).pad(m.zeros(2, 3), (1, 1, 1, 1, 1, 1)),
    "neg_too_much": lambda m: F(m).pad(m.zeros(2, 3), (-3, -1)),
    "neg_to_zero": lambda m: F(m).pad(m.zeros(2, 3), (-2, -1)),
    "int_value_truncates": lambda m: F(m).pad(m.arange(6).reshape(2, 3), (1, 1), value=2.5),
    "int8_overflow": lambda m: F(m).pad(m.zeros(2, 3, dtype=m.int8), (1, 1), value=300),
    "int8_overflow_only_crop": lambda m: F(m).pad(m.zeros(2, 3, dtype=m.int8), (-1, 0), value=300),
    "half_overflow": lambda m: F(m).pad(m.zeros(2, 3, dtype=m.float16), (1, 1), value=1e6),
    "bool_value": lambda m: F(m).pad(m.zeros(2, 3, dtype=m.bool), (1, 1), value=2),
    "nan_value": lambda m: F(m).pad(m.zeros(2, 3), (1, 1), value=float("nan")),
    "0dim": lambda m: F(m).pad(m.tensor(1.0), ()),
    "0dim_pad": lambda m: F(m).pad(m.tensor(1.0), (1, 1)),
    "empty_input": lambda m: F(m).pad(m.zeros(0, 3), (1, 1)),
    "empty_input_dim0": lambda m: F(m).pad(m.zeros(0, 3), (1, 1, 1, 1)),
    "bad_mode": lambda m: F(m).pad(m.zeros(2, 3, 4), (1, 1), mode="foo"),
    "complex_value": lambda m: F(m).pad(m.zeros(2, 3), (1, 1), value=1j),
    "reflect_1d_input": lambda m: F(m).pad(m.arange(4.0), (1, 1), mode="reflect"),
    "reflect_4d_1dpad": lambda m: F(m).pad(m.zeros(1, 2, 3, 4), (1, 1), mode="reflect"),
    "replicate_2d_2dpad": lambda m: F(m).pad(m.zeros(3, 4), (1, 1, 1, 1), mode="replicate"),
    "circular_6d": lambda m: F(m).pad(m.zeros(1, 1, 1, 2, 3, 4), (1, 1, 1, 1, 1, 1), mode="circular"),
    "reflect_4pads_5d": lambda m: F(m).pad(m.zeros(1, 1, 2, 3, 4), (1, 1, 1, 1, 1, 1, 1, 1), mode="reflect"),
    "reflect_value": lambda m: F(m).pad(m.zeros(2, 3, 4), (1, 1), mode="reflect", value=1.0),
    "reflect_value0": lambda m: F(m).pad(m.arange(24.0).reshape(2, 3, 4), (1, 1), mode="reflect", value=0.0),
    "reflect_too_big": lambda m: F(m).pad(m.zeros(2, 3, 4), (4, 0), mode="reflect"),
    "reflect_max": lambda m: F(m).pad(m.arange(24.0).reshape(2, 3, 4), (3, 3), mode="reflect"),
    "reflect_neg_too_much": lambda m: F(m).pad(m.zeros(2, 3, 4), (-3, -2), mode="reflect"),
    "reflect_neg_to_zero": lambda m: F(m).pad(m.zeros(2, 3, 4), (-2, -2), mode="reflect"),
    "reflect_empty_batch": lambda m: F(m).pad(m.zeros(0, 3, 4), (1, 1), mode="reflect"),
    "reflect_empty_channel": lambda m: F(m).pad(m.zeros(2, 0, 4), (1, 1), mode="reflect"),
    "reflect_unbatched_empty": lambda m: F(m).pad(m.zeros(0, 4), (1, 1), mode="reflect"),
    "reflect_bool": lambda m: F(m).pad(m.zeros(2, 3, 4, dtype=m.bool), (1, 1), mode="reflect"),
    "replicate_big": lambda m: F(m).pad(m.arange(24.0).reshape(2, 3, 4), (5, 7), mode="replicate"),
    "replicate_empty_dim": lambda m: F(m).pad(m.zeros(2, 3, 0), (1, 1), mode="replicate"),
    "replicate_neg_to_zero": lambda m: F(m).pad(m.zeros(2, 3, 4), (-2, -2), mode="replicate"),
    "replicate_uint32": lambda m: F(m).pad(m.zeros(2, 3, 4, dtype=m.uint32), (1, 1), mode="replicate"),
    "circular_max": lambda m: F(m).pad(m.arange(24.0).reshape(2, 3, 4), (4, 4), mode="circular"),
    "circular_too_big": lambda m: F(m).pad(m.zeros(2, 3, 4), (5, 0), mode="circular"),
    "circular_neg_too_much": lambda m: F(m).pad(m.zeros(2, 3, 4), (-3, -2), mode="circular"),
    "circular_neg_to_zero": lambda m: F(m).pad(m.zeros(2, 3, 4), (-2, -2), mode="circular"),
    "circular_empty_channel": lambda m: F(m).pad(m.zeros(2, 0, 4), (1, 1), mode="circular"),
    "circular_empty_dim": lambda m: F(m).pad(m.zeros(2, 3, 0), (1, 1), mode="circular"),
    "circular_empty_dim_nopad": lambda m: F(m).pad(m.zeros(2, 3, 0), (0, 0), mode="circular"),
    "circular_overlap": lambda m: F(m).pad(m.arange(12.0).reshape(1, 3, 4), (2, 1, 3, -1), mode="circular"),
    "circular_bool": lambda m: F(m).pad(m.ones(1, 2, 3, dtype=m.bool), (1, 2), mode="circular"),
}


@pytest.mark.parametrize("case", list(PAD_CASES))
def test_pad_edge_and_errors(case):
    chk(lambda m: PAD_CASES[case](m), exact=True, msg=case)


@pytest.mark.parametrize("shape", [(), (5,), (2, 3), (0,), (2, 0, 3)])
@pytest.mark.parametrize("num_classes", [-1, 6, 9])
def test_one_hot(shape, num_classes):
    x = rnd_index(shape, 6, seed=90)
    chk(lambda m, x: F(m).one_hot(x, num_classes), x, exact=True)
    chk(lambda m, x: F(m).one_hot(x.t() if x.dim() == 2 else x, num_classes=num_classes), x, exact=True)


ONE_HOT_CASES = {
    "negative": lambda m: F(m).one_hot(m.tensor([-1, 0]), 3),
    "too_big": lambda m: F(m).one_hot(m.tensor([3]), 3),
    "zero_classes": lambda m: F(m).one_hot(m.tensor([0]), 0),
    "minus_two": lambda m: F(m).one_hot(m.tensor([0]), -2),
    "empty_infer": lambda m: F(m).one_hot(m.zeros(0, dtype=m.int64)),
    "empty_zero": lambda m: F(m).one_hot(m.zeros(0, dtype=m.int64), 0),
    "int32": lambda m: F(m).one_hot(m.tensor([0], dtype=m.int32), 3),
    "float": lambda m: F(m).one_hot(m.tensor([0.0]), 3),
}


@pytest.mark.parametrize("case", list(ONE_HOT_CASES))
def test_one_hot_edge_and_errors(case):
    chk(lambda m: ONE_HOT_CASES[case](m), exact=True, msg=case)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("idx_dtype", ["int64", "int32"])
@pytest.mark.parametrize("shape", [(), (4,), (2, 3), (0,)])
def test_embedding(dtype, idx_dtype, shape):
    w = make((6, 3), dtype, seed=91)
    idx = rnd_index(shape, 6, seed=92).to(getattr(torch, idx_dtype))
    chk(lambda m, i, w: F(m).embedding(i, w), idx, w, exact=True)
    chk(lambda m, i, w: F(m).embedding(i, w, padding_idx=2), idx, w, exact=True)
    chk(lambda m, i, w: F(m).embedding(i, w.t().contiguous().t(), padding_idx=-1), idx, w, exact=True)
    chk(lambda m, i, w: m.embedding(w, i), idx, w, exact=True)


EMB_CASES = {
    "oob": lambda m: F(m).embedding(m.tensor([6]), m.zeros(6, 2)),
    "neg": lambda m: F(m).embedding(m.tensor([-1]), m.zeros(6, 2)),
    "w_1d": lambda m: F(m).embedding(m.tensor([1]), m.arange(3.0)),
    "w_3d": lambda m: F(m).embedding(m.tensor([1]), m.zeros(2, 2, 2)),
    "float_idx": lambda m: F(m).embedding(m.tensor([1.0]), m.zeros(2, 2)),
    "int16_idx": lambda m: F(m).embedding(m.tensor([1], dtype=m.int16), m.zeros(2, 2)),
    "pad_oob": lambda m: F(m).embedding(m.tensor([1]), m.zeros(2, 2), padding_idx=2),
    "pad_oob_neg": lambda m: F(m).embedding(m.tensor([1]), m.zeros(2, 2), padding_idx=-3),
    "empty_weight": lambda m: F(m).embedding(m.zeros(0, dtype=m.int64), m.zeros(0, 4)),
    "zero_width": lambda m: F(m).embedding(m.tensor([1, 0]), m.zeros(2, 0)),
}


@pytest.mark.parametrize("case", list(EMB_CASES))
def test_embedding_edge_and_errors(case):
    chk(lambda m: EMB_CASES[case](m), exact=True, msg=case)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0])
def test_embedding_max_norm(dtype, norm_type):
    w = make((5, 3), dtype, seed=93)
    idx = torch.tensor([[0, 2, 0], [4, 2, 2]])

    def f(m, i, w):
        out = F(m).embedding(i, w, max_norm=1.5, norm_type=norm_type)
        return out, w  # the referenced rows of weight are renormalised in place

    chk(f, idx, w)


EMB_RENORM_CASES = {
    "int_weight": lambda m: F(m).embedding(m.tensor([0]), m.ones(2, 2, dtype=m.int64), max_norm=1.0),
    "oob": lambda m: F(m).embedding(m.tensor([5]), m.ones(2, 2), max_norm=1.0),
    "int32_idx": lambda m: F(m).embedding(m.tensor([0], dtype=m.int32), m.ones(2, 2) * 3, max_norm=1.0),
    "below_max": lambda m: F(m).embedding(m.tensor([0, 1]), m.ones(2, 2) * 0.1, max_norm=1.0),
}


@pytest.mark.parametrize("case", list(EMB_RENORM_CASES))
def test_embedding_renorm_edge_and_errors(case):
    chk(lambda m: EMB_RENORM_CASES[case](m), msg=case)


def test_embedding_renorm_oob_leaves_weight():
    w = kiln.ones(2, 2) * 3
    with pytest.raises(IndexError):
        KF.embedding(kiln.tensor([0, 5]), w, max_norm=1.0)
    assert w.sum().item() == 12.0


# ============================================================================================================
# registration and large inputs (parallel gather path)
# ============================================================================================================

def test_ops_registered():
    names = set(kiln._C.registered_ops())
    for n in ["scatter", "scatter.value", "scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill",
              "masked_scatter", "take", "take_along_dim", "put", "roll", "repeat", "repeat_interleave", "diag",
              "diag_embed", "constant_pad_nd", "pad", "embedding"]:
        assert n in names, n


def test_large_inputs():
    x = make((64, 300, 7), "float32", seed=95)
    chk(lambda m, x: m.roll(x, (5, -3), (1, 2)), x, exact=True)
    chk(lambda m, x: x.repeat(2, 1, 3), x, exact=True)
    chk(lambda m, x: F(m).pad(x, (3, 2, 1, 4), mode="reflect"), x, exact=True)
    chk(lambda m, x: F(m).pad(x, (3, 2, 1, 4), value=1.0), x, exact=True)
    idx = rnd_index((64, 300, 7), 300, seed=96)
    chk(lambda m, x, i: m.scatter_add(m.zeros(64, 300, 7), 1, i, x), x, idx)
    chk(lambda m, x, i: m.take_along_dim(x, i, 1), x, idx, exact=True)


OVERLAP_CASES = {
    "scatter_": lambda m, e: e.scatter_(0, m.tensor([[0, 1, 0]]), m.ones(1, 3)),
    "scatter_value": lambda m, e: e.scatter_(0, m.tensor([[0, 1, 0]]), 2.0),
    "scatter_add_": lambda m, e: e.scatter_add_(0, m.tensor([[0, 1, 0]]), m.ones(1, 3)),
    "scatter_reduce_": lambda m, e: e.scatter_reduce_(0, m.tensor([[0, 1, 0]]), m.ones(1, 3), "sum"),
    "index_add_": lambda m, e: e.index_add_(0, m.tensor([0]), m.ones(1, 3)),
    "index_copy_": lambda m, e: e.index_copy_(0, m.tensor([0]), m.ones(1, 3)),
    "index_fill_": lambda m, e: e.index_fill_(0, m.tensor([0]), 1.0),
    "masked_scatter_": lambda m, e: e.masked_scatter_(m.ones(2, 3, dtype=m.bool), m.arange(6.0)),
    "put_": lambda m, e: e.put_(m.tensor([0]), m.ones(1)),
    "index_put_": lambda m, e: e.index_put_((m.tensor([0]),), m.ones(3)),
}


@pytest.mark.parametrize("case", list(OVERLAP_CASES))
def test_inplace_on_broadcast_self(case):
    chk(lambda m: (lambda e: (OVERLAP_CASES[case](m, e), e)[1])(m.zeros(1, 3).expand(2, 3)), exact=True, msg=case)
