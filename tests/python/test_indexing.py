"""Python indexing vs torch: ints, slices with steps, None, Ellipsis, bools, integer tensors and
lists, bool masks, mixed basic/advanced (where advanced dims land), setitem, and errors."""
import pytest
import torch

import kiln
from helpers import assert_same, check, make, to_kiln

IDX = [
    ("int", lambda t: t[1]),
    ("neg-int", lambda t: t[-1]),
    ("int-int", lambda t: t[1, 2]),
    ("slice", lambda t: t[1:3]),
    ("slice-step", lambda t: t[::2, 1::3]),
    ("slice-neg", lambda t: t[-3:-1]),
    ("slice-big", lambda t: t[2:100]),
    ("slice-empty", lambda t: t[3:1]),
    ("none", lambda t: t[None]),
    ("none-mid", lambda t: t[:, None, 1]),
    ("ellipsis", lambda t: t[..., 1]),
    ("ellipsis-mid", lambda t: t[0, ..., 2]),
    ("true", lambda t: t[True]),
    ("false", lambda t: t[False]),
    ("list", lambda t: t[[0, 2, 3]]),
    ("list-neg", lambda t: t[[-1, 0]]),
    ("tensor", lambda t: t[t.new_tensor([1, 0]).long() if hasattr(t, "new_tensor") else None]),
    ("two-adv", lambda t: t[[0, 2], [1, 3]]),
    ("adv-broadcast", lambda t: t[[[0], [2]], [1, 3]]),
    ("adv-slice", lambda t: t[[0, 2], 1:3]),
    ("slice-adv", lambda t: t[1:3, [0, 2]]),
    ("adv-split", lambda t: t[[0, 1], :, [1, 2]]),
    ("adv-int", lambda t: t[[0, 2], 1]),
    ("mask", lambda t: t[t > 0]),
    ("mask-row", lambda t: t[(t > 0)[:, 0, 0]]),
    ("mask-2d", lambda t: t[(t > 0)[:, :, 0]]),
    ("empty-list", lambda t: t[[]]),
    ("two-ellipsis", lambda t: t[..., 0, ...]),
]


def _idx(m, t, fn):
    if fn is IDX[16][1]:  # integer tensor index built in the right library
        return t[m.tensor([1, 0])]
    return fn(t)


@pytest.mark.parametrize("name,fn", IDX, ids=[i[0] for i in IDX])
@pytest.mark.parametrize("layout", ["contig", "permuted"])
def test_getitem(name, fn, layout):
    x = make((4, 5, 6), "float32") if layout == "contig" else make((6, 4, 5), "float32").permute(1, 2, 0)
    check(lambda m, t: _idx(m, t, fn), x, exact=True, msg=name)


@pytest.mark.parametrize("dtype", ["bool", "int64", "bfloat16", "complex64", "uint8"])
def test_getitem_dtypes(dtype):
    x = make((4, 5), dtype)
    check(lambda m, t: t[[0, 3], 1:], x, exact=True)
    check(lambda m, t: t[t != 0] if dtype != "bool" else t[t], x, exact=True)


def test_getitem_views_share_storage():
    k = kiln.arange(24.0).view(4, 6)
    v = k[1:, ::2]
    assert v.untyped_storage_ptr() == k.untyped_storage_ptr()
    v[0, 0] = -5
    assert k[1, 0].item() == -5
    c = k[[0, 1]]
    assert c.untyped_storage_ptr() != k.untyped_storage_ptr()


ERRORS = [
    ("oob", lambda t: t[4]),
    ("oob-neg", lambda t: t[-5]),
    ("too-many", lambda t: t[0, 0, 0, 0]),
    ("adv-oob", lambda t: t[[0, 9]]),
    ("mask-shape", lambda t: t[torch.ones(3, dtype=torch.bool) if isinstance(t, torch.Tensor) else kiln.ones(3, dtype=kiln.bool)]),
    ("float-index", lambda t: t[1.5]),
    ("neg-step", lambda t: t[::-1]),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_getitem_errors(name, fn):
    x = make((4, 5, 6), "float32")
    kx = to_kiln(x)
    try:
        fn(x)
    except Exception as te:  # noqa: BLE001
        with pytest.raises(Exception) as ke:
            fn(kx)
        assert isinstance(ke.value, type(te)) or (isinstance(te, (IndexError, RuntimeError)) and isinstance(
            ke.value, (IndexError, RuntimeError))), (name, te, ke.value)
        assert type(ke.value) is type(te) or name in ("neg-step",), (name, type(te), type(ke.value))
        return
    pytest.fail("torch did not raise")


SET = [
    ("int", lambda t, v: t.__setitem__(1, v)),
    ("slice", lambda t, v: t.__setitem__((slice(None), slice(1, 3)), v)),
    ("step", lambda t, v: t.__setitem__((slice(None, None, 2),), v)),
    ("list", lambda t, v: t.__setitem__([0, 2], v)),
    ("mask", lambda t, v: t.__setitem__(t > 0, v)),
    ("two-adv", lambda t, v: t.__setitem__(([0, 1], [2, 3]), v)),
    ("ellipsis", lambda t, v: t.__setitem__((Ellipsis, 0), v)),
]


@pytest.mark.parametrize("name,fn", SET, ids=[s[0] for s in SET])
@pytest.mark.parametrize("value", [7.5, -1, "tensor"])
def test_setitem(name, fn, value):
    x = make((4, 5), "float32")
    k = to_kiln(x)
    tv = torch.tensor(3.25) if value == "tensor" else value
    kv = kiln.tensor(3.25) if value == "tensor" else value
    fn(x, tv)
    fn(k, kv)
    assert_same(k, x, exact=True, msg=name)


def test_setitem_broadcast_and_cast():
    x = torch.zeros(3, 4, dtype=torch.int32)
    k = kiln.zeros(3, 4, dtype=kiln.int32)
    x[:, 1:3] = torch.tensor([5.7, -2.2])
    k[:, 1:3] = kiln.tensor([5.7, -2.2])
    assert_same(k, x)
    x[[0, 2]] = torch.arange(4, dtype=torch.int32)
    k[[0, 2]] = kiln.arange(4, dtype=kiln.int32)
    assert_same(k, x)
    with pytest.raises(RuntimeError):
        k[:, 1:3] = kiln.ones(3)
    with pytest.raises(IndexError):
        k[[5]] = 1


def test_iteration_and_len():
    x = make((3, 2), "int64")
    assert [to_kiln(x)[i].tolist() for i in range(len(to_kiln(x)))] == [r.tolist() for r in x]
    assert [r.tolist() for r in to_kiln(x)] == [r.tolist() for r in x]
    with pytest.raises(TypeError):
        len(kiln.tensor(3))


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "bfloat16", "complex64"])
def test_index_ops(dtype):
    x = make((4, 5), dtype)
    idx = torch.tensor([3, 0, 0, -1])
    check(lambda m, t, i: m.index_select(t, 1, i), x, idx, exact=True)
    check(lambda m, t, i: m.index_select(t, 0, i), x, idx, exact=True)
    check(lambda m, t, i: m.index_select(t, 0, i), x, torch.tensor([4]))
    g = torch.tensor([[0, 1], [2, 2], [4, 0], [1, 1]])
    check(lambda m, t, i: m.gather(t, 1, i), x, g, exact=True)
    check(lambda m, t, i: m.gather(t, 0, i), x, g[:, :1] % 4, exact=True)
    check(lambda m, t, i: m.gather(t, 1, i), x, g + 10)
    check(lambda m, t, i: m.gather(t, 1, i), x, g.int())
    check(lambda m, t: m.nonzero(t), x, exact=True)
    check(lambda m, t: m.nonzero(t, as_tuple=True), x, exact=True)
    check(lambda m, t: m.argwhere(t), x, exact=True)
    check(lambda m, t: m.masked_select(t, t != 0), x, exact=True)
    check(lambda m, t: m.masked_select(t, (t != 0)[0]), x, exact=True)
    check(lambda m, t: m.masked_fill(t, t != 0, 1), x, exact=True)
    check(lambda m, t: m.flip(t, (0,)), x, exact=True)
    check(lambda m, t: m.flip(t, (0, 1)), x, exact=True)
    check(lambda m, t: m.flip(t.t(), (-1,)), x, exact=True)
    for k in (-2, 0, 1, 7):
        check(lambda m, t: m.tril(t, k), x, exact=True)
        check(lambda m, t: m.triu(t, k), x, exact=True)
    check(lambda m, t: m.tril(t), make((5,), dtype))
    check(lambda m, t: m.nonzero(t), make((), dtype), exact=True)
