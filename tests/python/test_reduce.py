"""Reductions, scans and softmax vs torch: dims as int/tuple/None, keepdim, dtype=, every dtype,
strided inputs, empty and 0-dim inputs, NaN propagation, float accuracy on long sums."""
import pytest
import torch

import kiln
from helpers import ALL_DTYPES, check, make, to_kiln, assert_same

def _rtol(dtype, tight=1e-5):
    """Reduced floats: torch's default tolerance (a different summation order moves the last bit)."""
    return 2e-3 if dtype == "float16" else (None if dtype == "bfloat16" else tight)


DIMS = [None, 0, 1, -1, (0, 1), (0, 2), (2, 0)]
RED = ["sum", "nansum", "mean", "nanmean", "amax", "amin", "all", "any"]


def _inputs(dtype):
    return [("contig", make((3, 4, 5), dtype)),
            ("permuted", make((5, 3, 4), dtype).permute(1, 2, 0)),
            ("sliced", make((6, 4, 10), dtype)[::2, :, 1::2])]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", RED)
def test_reductions(name, dtype):
    if name == "sum" and dtype.startswith("float8"):
        pytest.skip("torch 2.13 sums float8 only for some reduction layouts; kiln does not sum float8")
    atol = None
    if name in ("nansum", "nanmean") and dtype in ("float16", "bfloat16"):
        atol = 0.1  # torch accumulates nansum in the reduced type itself; kiln in float32
    for label, x in _inputs(dtype):
        for dim in DIMS:
            for keep in (False, True):
                kw = {} if dim is None else {"dim": dim, "keepdim": keep}
                if dim is None and keep:
                    continue
                check(lambda m, t: getattr(m, name)(t, **kw), x, rtol=_rtol(dtype), atol=atol,
                      msg=f"{name} {dtype} {label} {kw}")


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "prod", "nansum"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_reductions_special_values(name, dtype):
    x = make((4, 8), dtype, special=True)
    for dim in (None, 0, 1):
        kw = {} if dim is None else {"dim": dim}
        check(lambda m, t: getattr(m, name)(t, **kw), x, msg=f"{name} {kw}")


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "amax", "all", "any", "nansum"])
def test_reductions_empty_and_scalar(name):
    for x in [make((0, 3), "float32"), make((), "float32"), make((2, 0), "float32")]:
        for kw in [{}, {"dim": 0}, {"dim": -1}, {"dim": 0, "keepdim": True}]:
            check(lambda m, t: getattr(m, name)(t, **kw), x, msg=f"{name} {tuple(x.shape)} {kw}")


@pytest.mark.parametrize("dtype", ["int32", "float32", "bool", "uint8", "float16"])
def test_sum_dtype_arg(dtype):
    x = make((3, 4), dtype)
    for out in ("float64", "int64", "float32"):
        check(lambda m, t: m.sum(t, dim=1, dtype=getattr(m, out)), x, msg=out)
        check(lambda m, t: m.mean(t, dtype=getattr(m, out)), x, msg=out)


def test_sum_accuracy_long():
    x = torch.full((10_000_000,), 0.1, dtype=torch.float32)
    k = kiln.full((10_000_000,), 0.1)
    exact = 0.1 * 10_000_000
    assert abs(kiln.sum(k).item() - exact) / exact < 1e-6
    assert abs(torch.sum(x).item() - exact) / exact < 1e-6
    y = make((4096, 1000), "float32")
    check(lambda m, t: m.sum(t, 0), y, rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool", "float16", "bfloat16", "uint8"])
def test_prod(dtype):
    x = make((3, 5), dtype, low=-2, high=2)
    check(lambda m, t: m.prod(t), x, rtol=_rtol(dtype))
    check(lambda m, t: m.prod(t, 1), x, rtol=_rtol(dtype))
    check(lambda m, t: m.prod(t, 0, keepdim=True), x, rtol=_rtol(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool", "bfloat16", "uint8", "int8"])
def test_max_min_arg(dtype):
    x = make((4, 6), dtype, low=-3, high=3)  # small range: ties, first index wins
    for name in ("max", "min"):
        check(lambda m, t: getattr(m, name)(t), x)
        for d in (0, 1, -1):
            check(lambda m, t: tuple(getattr(m, name)(t, d)), x, msg=f"{name} {d}")
            check(lambda m, t: tuple(getattr(m, name)(t, d, keepdim=True)), x)
    for name in ("argmax", "argmin"):
        check(lambda m, t: getattr(m, name)(t), x)
        check(lambda m, t: getattr(m, name)(t, 1), x)
        check(lambda m, t: getattr(m, name)(t, 0, keepdim=True), x)
    check(lambda m, t: tuple(m.aminmax(t)), x)
    check(lambda m, t: tuple(m.aminmax(t, dim=1)), x)
    check(lambda m, t, u: m.max(t, u), x, make((4, 6), dtype, seed=7))


def test_max_nan_and_errors():
    x = torch.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, float("nan")]])
    check(lambda m, t: tuple(m.max(t, 1)), x)
    check(lambda m, t: m.argmax(t, 1), x)
    check(lambda m, t: m.amax(t, 1), x)
    check(lambda m, t: m.max(t), make((0,), "float32"))
    check(lambda m, t: tuple(m.max(t, 1)), make((2, 0), "float32"))
    check(lambda m, t: m.amax(t, 1), make((2, 0), "float32"))
    check(lambda m, t: m.sum(t, 3), make((2, 3), "float32"))
    check(lambda m, t: m.sum(t, (0, 0)), make((2, 3), "float32"))
    check(lambda m, t: m.mean(t), make((2, 3), "int64"))


@pytest.mark.parametrize("correction", [0, 1, 2])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "complex64"])
def test_var_std(correction, dtype):
    x = make((5, 7), dtype)
    for name in ("var", "std"):
        for kw in [{}, {"dim": 0}, {"dim": (0, 1)}, {"dim": 1, "keepdim": True}]:
            check(lambda m, t: getattr(m, name)(t, correction=correction, **kw), x, rtol=_rtol(dtype, 1e-4),
                  msg=f"{name} {kw}")
    check(lambda m, t: tuple(m.var_mean(t, 1, correction=correction)), x, rtol=_rtol(dtype, 1e-4))
    check(lambda m, t: tuple(m.std_mean(t, 0, correction=correction)), x, rtol=_rtol(dtype, 1e-4))
    check(lambda m, t: m.var(t, 1, unbiased=False), x, rtol=_rtol(dtype, 1e-4))


def test_logsumexp_norm_count():
    x = make((4, 6), "float32", special=False)
    check(lambda m, t: m.logsumexp(t, 1), x, rtol=1e-5)
    check(lambda m, t: m.logsumexp(t, (0, 1), keepdim=True), x, rtol=1e-5)
    big = torch.tensor([[1000.0, 1000.0], [-float("inf"), -float("inf")], [float("inf"), 1.0]])
    check(lambda m, t: m.logsumexp(t, 1), big)
    check(lambda m, t: m.logsumexp(t, 1), make((3, 4), "int64"))
    for p in (2, 1, float("inf"), float("-inf"), 0, 3.0, 0.5):
        check(lambda m, t: m.linalg.vector_norm(t, p), x, rtol=1e-5, msg=f"ord {p}")
        check(lambda m, t: m.linalg.vector_norm(t, p, dim=1, keepdim=True), x, rtol=1e-5, msg=f"ord {p}")
    check(lambda m, t: m.norm(t), x, rtol=1e-5)
    check(lambda m, t: m.linalg.vector_norm(t), make((3, 4), "complex64"), rtol=1e-5)
    check(lambda m, t: m.count_nonzero(t), make((5, 6), "int64", low=-1, high=1))
    check(lambda m, t: m.count_nonzero(t, 0), make((5, 6), "int64", low=-1, high=1))


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16", "int64"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax(dtype, dim):
    x = make((5, 7), dtype, low=-20, high=20)
    check(lambda m, t: m.softmax(t, dim), x, rtol=_rtol(dtype))
    # torch rounds max + log(sum) to the reduced type before subtracting; kiln rounds once. The
    # difference is absolute (a few 1e-3 for inputs of magnitude 20), so compare with an atol.
    check(lambda m, t: m.log_softmax(t, dim), x, rtol=_rtol(dtype),
          atol=2e-2 if dtype in ("float16", "bfloat16") else None)
    check(lambda m, t: m.nn.functional.softmax(t, dim=dim, dtype=m.float64), x)
    check(lambda m, t: m.softmax(t, dim), make((3, 4), dtype).t(), rtol=_rtol(dtype))


def test_softmax_special():
    x = torch.tensor([[float("-inf"), float("-inf")], [float("inf"), 1.0], [float("nan"), 1.0], [1e30, -1e30]])
    check(lambda m, t: m.softmax(t, 1), x)
    check(lambda m, t: m.log_softmax(t, 1), x)
    check(lambda m, t: m.softmax(t, 0), make((0, 3), "float32"))
    # rows long enough for the vector kernels' bodies and tails (max, shift, exp, sum, scale)
    for n in (17, 1000):
        rows = [[float("nan"), 1.0, 2.0], [float("inf"), 1.0, 2.0], [float("-inf")] * 3, [-0.0, 0.0, -1.0],
                [float("inf"), float("inf"), 1.0], [float("-inf"), 0.0, 1.0], [1e30, -1e30, 0.0]]
        x = torch.tensor([(r * n)[:n] for r in rows])
        check(lambda m, t: m.softmax(t, 1), x)
        check(lambda m, t: m.log_softmax(t, 1), x)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "bool", "bfloat16", "uint8"])
def test_scans(dtype):
    x = make((4, 5), dtype, low=-2, high=2)
    for d in (0, 1, -1):
        check(lambda m, t: m.cumsum(t, d), x, rtol=_rtol(dtype))
        check(lambda m, t: m.cumprod(t, d), x, rtol=_rtol(dtype))
        check(lambda m, t: tuple(m.cummax(t, d)), x)
        check(lambda m, t: tuple(m.cummin(t, d)), x)
        check(lambda m, t: m.cumsum(t, d, dtype=m.float64), x)
    if dtype in ("float32", "float64", "bfloat16"):
        check(lambda m, t: m.logcumsumexp(t, 1), x, rtol=_rtol(dtype, 1e-4))
    check(lambda m, t: m.cumsum(t, 0), make((), dtype))
    check(lambda m, t: tuple(m.cummax(t, 0)), torch.tensor([1.0, float("nan"), 3.0, 0.0]))
