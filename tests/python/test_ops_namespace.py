"""kiln.ops: every table op called through its schema (python/src/bind_schema.cpp), compared with the
public functions and with torch.ops.aten where the op is torch's."""
import pytest
import torch

import kiln

from helpers import assert_same, to_kiln


def test_every_registered_op_has_a_handle():
    names = kiln.registered_ops()
    assert sorted(dir(kiln.ops)) == sorted(names)
    for n in names:
        op = getattr(kiln.ops, n)
        assert op.name == n and "(" in op.schema and "->" in op.schema
    assert kiln.ops.add is kiln.ops.add  # cached


CASES = [
    ("add", lambda m, a, b: (a, b), {"alpha": 2}, lambda a, b: torch.ops.aten.add.Tensor(a, b, alpha=2)),
    ("mul", lambda m, a, b: (a, b), {}, lambda a, b: torch.ops.aten.mul.Tensor(a, b)),
    ("atan2", lambda m, a, b: (a, b), {}, lambda a, b: torch.ops.aten.atan2(a, b)),
    ("where", lambda m, a, b: (a > 0, a, b), {}, lambda a, b: torch.ops.aten.where.self(a > 0, a, b)),
    ("cat", lambda m, a, b: ([a, b],), {"dim": 1}, lambda a, b: torch.ops.aten.cat([a, b], 1)),
    ("tanh", lambda m, a, b: (a,), {}, lambda a, b: torch.ops.aten.tanh(a)),
    ("full", lambda m, a, b: ([2, 3], 1.5, m.float64), {}, lambda a, b: torch.full([2, 3], 1.5, dtype=torch.float64)),
]


@pytest.mark.parametrize("name,args,kw,ref", CASES, ids=[c[0] for c in CASES])
def test_calls_match_torch(name, args, kw, ref):
    ta, tb = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    ka, kb = to_kiln(ta), to_kiln(tb)
    got = getattr(kiln.ops, name)(*args(kiln, ka, kb), **kw)
    assert_same(got, ref(ta, tb))


def test_out_autograd_and_meta_go_through_the_door():
    a, b = kiln.tensor([1.0, 2.0]), kiln.tensor([3.0, -1.0])
    o = kiln.empty(0)
    assert kiln.ops.atan2(a, b, out=o) is o
    assert_same(o, torch.atan2(torch.tensor([1.0, 2.0]), torch.tensor([3.0, -1.0])))
    x = kiln.tensor([1.0, 3.0], requires_grad=True)
    kiln.ops.mul(x, x).sum().backward()
    assert x.grad.tolist() == [2.0, 6.0]
    m = kiln.ops.add(kiln.empty(2, 3, device="meta"), kiln.empty(3, device="meta"))
    assert m.is_meta and tuple(m.shape) == (2, 3)
    assert kiln.ops.full([4], 0, kiln.int32, device="meta").is_meta


def test_argument_errors_as_python_calls():
    a = kiln.ones(2)
    with pytest.raises(TypeError, match="missing required argument 'other'"):
        kiln.ops.add(a)
    with pytest.raises(TypeError, match="positional"):
        kiln.ops.add(a, a, 2)  # alpha is keyword-only
    with pytest.raises(TypeError, match="unexpected keyword argument 'beta'"):
        kiln.ops.add(a, a, beta=1)
    with pytest.raises(TypeError, match="given by name and position"):
        kiln.ops.add(a, a, other=a)
    with pytest.raises(TypeError, match="tuple of Tensors"):
        kiln.ops.cat(a)
    with pytest.raises(AttributeError):
        kiln.ops.no_such_op


def test_backend_kernels_all_found_their_ops():
    # kernels registered by op name from kiln/backend/cpu/ (register_kernel): none is left without its op
    assert kiln._C._unresolved_kernels() == []
    x = kiln.zeros(3)
    assert kiln.ops.scatter_add(x, 0, kiln.tensor([0, 0, 2]), kiln.ones(3)).tolist() == [2.0, 0.0, 1.0]
