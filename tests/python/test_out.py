"""out= arguments: values, dtype casting rules, resizing, tuple outs, errors — against torch."""
import pytest
import torch

import kiln
from helpers import assert_same, make, to_kiln


CASES = [
    ("sum", lambda m, x, o: m.sum(x, 1, out=o), "float32", (4,)),
    ("sum-f64", lambda m, x, o: m.sum(x, 0, out=o), "float64", (5,)),
    ("mean", lambda m, x, o: m.mean(x, 0, out=o), "float32", (5,)),
    ("amax", lambda m, x, o: m.amax(x, 1, out=o), "float32", (4,)),
    ("cumsum", lambda m, x, o: m.cumsum(x, 1, out=o), "float32", (4, 5)),
    ("matmul", lambda m, x, o: m.matmul(x, x.t(), out=o), "float32", (4, 4)),
    ("cat", lambda m, x, o: m.cat([x, x], 0, out=o), "float32", (8, 5)),
    ("where", lambda m, x, o: m.where(x > 0, x, x * 2, out=o), "float32", (4, 5)),
    ("sum-into-int", lambda m, x, o: m.sum(x, 0, out=o), "int64", (5,)),
    ("cumsum-into-int", lambda m, x, o: m.cumsum(x, 0, out=o), "int64", (4, 5)),
    ("clamp", lambda m, x, o: m.clamp(x, -1, 1, out=o), "float32", (4, 5)),
    ("exp", lambda m, x, o: m.exp(x, out=o), "float32", (4, 5)),
    ("add", lambda m, x, o: m.add(x, 1.5, out=o), "float32", (4, 5)),
    ("resize", lambda m, x, o: m.sum(x, 1, out=o), "float32", (0,)),
    ("cast-up", lambda m, x, o: m.sum(x, 1, out=o), "float64", (4,)),
]


@pytest.mark.parametrize("name,fn,out_dtype,out_shape", CASES, ids=[c[0] for c in CASES])
def test_out(name, fn, out_dtype, out_shape):
    x = make((4, 5), "float32")
    t_out = torch.empty(out_shape, dtype=getattr(torch, out_dtype))
    k_out = kiln.empty(tuple(out_shape), dtype=getattr(kiln, out_dtype))
    tr = fn(torch, x, t_out)
    kr = fn(kiln, to_kiln(x), k_out)
    assert kr is k_out or kr.data_ptr() == k_out.data_ptr()
    assert_same(k_out, t_out, rtol=1e-5, msg=name)
    assert_same(kr, tr, rtol=1e-5, msg=name)


def test_out_errors_and_tuples():
    x = make((4, 5), "float32")
    with pytest.raises(RuntimeError):
        torch.mm(x, x.t(), out=torch.empty(4, 4, dtype=torch.int64))
    with pytest.raises(RuntimeError):
        kiln.mm(to_kiln(x), to_kiln(x).t(), out=kiln.empty(4, 4, dtype=kiln.int64))
    with pytest.raises(RuntimeError):
        torch.exp(x, out=torch.empty(4, 5, dtype=torch.int64))
    with pytest.raises(RuntimeError):
        kiln.exp(to_kiln(x), out=kiln.empty(4, 5, dtype=kiln.int64))
    tv, ti = torch.empty(0), torch.empty(0, dtype=torch.int64)
    kv, ki = kiln.empty(0), kiln.empty(0, dtype=kiln.int64)
    torch.max(x, 1, out=(tv, ti))
    r = kiln.max(to_kiln(x), 1, out=(kv, ki))
    assert_same(kv, tv)
    assert_same(ki, ti)
    assert r.values is kv or r.values.data_ptr() == kv.data_ptr()
    ts, tix = torch.empty(0), torch.empty(0, dtype=torch.int64)
    ks, kix = kiln.empty(0), kiln.empty(0, dtype=kiln.int64)
    torch.sort(x, 1, out=(ts, tix))
    kiln.sort(to_kiln(x), 1, out=(ks, kix))
    assert_same(ks, ts)
    assert_same(kix, tix)
