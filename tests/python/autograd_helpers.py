"""Harness for the autograd tests: the same code runs on torch and on kiln, results are compared."""
import torch

import kiln
from helpers import assert_same, make, to_kiln


def _plain(r):
    """Comparable form: tensors detached, nested sequences kept."""
    if isinstance(r, (tuple, list)):
        return type(r)(_plain(x) for x in r)
    if isinstance(r, (torch.Tensor, kiln.Tensor)):
        return r.detach()
    return r


def both(fn, *datas, exc=None, rtol=None, atol=None, msg=""):
    """Runs fn(torch, *torch_copies) and fn(kiln, *kiln_copies) (same values and layout). With `exc`
    None both must return the same (tensors, None, numbers, strings, nested); otherwise both must
    raise the same exception type, with `exc` in kiln's message ("" for any)."""
    tres = kres = texc = kexc = None
    try:
        tres = fn(torch, *[d.clone() if d.is_contiguous() else d.detach() for d in datas])
    except Exception as e:  # noqa: BLE001
        texc = e
    try:
        kres = fn(kiln, *[to_kiln(d) for d in datas])
    except Exception as e:  # noqa: BLE001
        kexc = e
    if texc is not None:
        if exc is None:
            raise AssertionError(f"{msg}: torch raised {type(texc).__name__}: {texc}") from texc
        assert kexc is not None, f"{msg}: torch raised {type(texc).__name__}({texc}), kiln returned {kres}"
        assert type(kexc) is type(texc) or (isinstance(kexc, RuntimeError) and isinstance(texc, RuntimeError)), \
            f"{msg}: torch raised {type(texc).__name__}({texc}), kiln {type(kexc).__name__}({kexc})"
        if exc is not None:
            assert exc in str(kexc), f"{msg}: {exc!r} not in kiln's message {kexc}"
        return None
    if kexc is not None:
        raise AssertionError(f"{msg}: kiln raised {type(kexc).__name__}: {kexc}; torch gave {tres}") from kexc
    assert exc is None, f"{msg}: expected an error {exc!r}, both returned"
    _same(_plain(kres), _plain(tres), rtol, atol, msg)
    return kres


def _same(k, t, rtol, atol, msg):
    if isinstance(t, (tuple, list)):
        assert isinstance(k, (tuple, list)) and len(k) == len(t), f"{msg}: {k} vs {t}"
        for a, b in zip(k, t):
            _same(a, b, rtol, atol, msg)
    elif t is None:
        assert k is None, f"{msg}: kiln gave {k}, torch None"
    elif isinstance(t, torch.Tensor):
        assert k is not None, f"{msg}: kiln gave None, torch {t}"
        assert_same(k, t, rtol, atol, msg=msg)
    else:
        assert k == t, f"{msg}: kiln {k!r} vs torch {t!r}"


def R(*shape, seed=0, dtype="float64"):
    return make(shape, dtype, low=-2.0, high=2.0, seed=seed)


def P(*shape, seed=0, dtype="float64"):  # positive
    return make(shape, dtype, low=0.5, high=2.0, seed=seed)


def name(t):
    return None if t.grad_fn is None else t.grad_fn.name().split("::")[-1]
