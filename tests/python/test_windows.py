"""hann / hamming / blackman / bartlett / kaiser windows against torch 2.13 (values, dtypes, lengths 0 / 1 /
odd / even, periodic and symmetric, errors) and against the textbook formulas in float64."""
import math

import numpy as np
import pytest
import torch

import kiln

LENGTHS = [0, 1, 2, 3, 4, 5, 16, 17, 1000]
DTYPES = ["float32", "float64", "float16", "bfloat16"]
# float32 / float16 / bfloat16 differ from torch only where a cos result differs in its last bit (the
# half types compute cos in float32 and round)
TOL = {"float32": (1e-6, 1e-6), "float64": (1e-13, 1e-14), "float16": (0, 1e-3), "bfloat16": (0, 4e-3)}


def _cmp(k, t, dtype):
    assert str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1] and tuple(k.shape) == tuple(t.shape)
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(k.to(kiln.float64).numpy(), t.double().numpy(), rtol=rtol, atol=atol)


CASES = [("hann_window", ()), ("hamming_window", ()), ("hamming_window", (0.5, 0.4)), ("blackman_window", ()),
         ("bartlett_window", ()), ("kaiser_window", ()), ("kaiser_window", (5.0,))]


@pytest.mark.parametrize("name,extra", CASES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("periodic", [True, False])
def test_windows_like_torch(name, extra, dtype, periodic):
    for n in LENGTHS:
        want = getattr(torch, name)(n, periodic, *extra, dtype=getattr(torch, dtype))
        got = getattr(kiln, name)(n, periodic, *extra, dtype=getattr(kiln, dtype))
        _cmp(got, want, dtype)


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                  "kaiser_window"])
def test_window_defaults_and_errors(name):
    _cmp(getattr(kiln, name)(7), getattr(torch, name)(7), "float32")  # periodic by default
    assert getattr(kiln, name)(5, requires_grad=True).requires_grad
    for args, kw in [((-1,), {}), ((3,), {"dtype": "int64"}), ((3,), {"dtype": "complex64"})]:
        tkw = {k: getattr(torch, v) for k, v in kw.items()}
        kkw = {k: getattr(kiln, v) for k, v in kw.items()}
        with pytest.raises(Exception) as te:
            getattr(torch, name)(*args, **tkw)
        with pytest.raises(type(te.value)):
            getattr(kiln, name)(*args, **kkw)


def test_windows_match_the_formulas_in_float64():
    n = 9
    i = np.arange(n, dtype=np.float64)
    hann = 0.5 - 0.5 * np.cos(2 * math.pi * i / (n - 1))
    blackman = 0.42 - 0.5 * np.cos(2 * math.pi * i / (n - 1)) + 0.08 * np.cos(4 * math.pi * i / (n - 1))
    bartlett = 1 - np.abs(2 * i / (n - 1) - 1)
    kaiser = np.i0(6.0 * np.sqrt(1 - ((i - (n - 1) / 2) / ((n - 1) / 2)) ** 2)) / np.i0(6.0)
    f64 = dict(dtype=kiln.float64)
    np.testing.assert_allclose(kiln.hann_window(n, False, **f64).numpy(), hann, atol=1e-15)
    np.testing.assert_allclose(kiln.blackman_window(n, False, **f64).numpy(), blackman, atol=1e-15)
    np.testing.assert_allclose(kiln.bartlett_window(n, False, **f64).numpy(), bartlett, atol=1e-15)
    np.testing.assert_allclose(kiln.kaiser_window(n, False, 6.0, **f64).numpy(), kaiser, rtol=1e-13)
    np.testing.assert_allclose(kiln.hann_window(n - 1, True, **f64).numpy(), hann[:-1], atol=1e-15)
