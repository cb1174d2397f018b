"""tensor_split, hsplit / vsplit / dsplit, split_with_sizes, dstack / column_stack / row_stack and
fliplr / flipud against torch: the pieces' values and shapes, views of the input, and torch's errors."""
import numpy as np
import pytest
import torch

import kiln


def _pair(shape, dtype="float32"):
    a = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    return kiln.from_numpy(a.copy()), torch.from_numpy(a.copy())


def _same_pieces(kp, tp):
    assert len(kp) == len(tp)
    for k, t in zip(kp, tp):
        assert tuple(k.shape) == tuple(t.shape)
        np.testing.assert_array_equal(k.numpy(), t.numpy())


SPLITS = [((10,), 3, 0), ((10,), 1, 0), ((10,), 10, 0), ((10,), 13, 0), ((0,), 3, 0), ((4, 7), 3, 1), ((4, 7), 2, -1),
          ((4, 7), [2, 5], 1), ((10,), [-3, 8], 0), ((10,), [7, 2], 0), ((10,), [], 0), ((10,), [0, 0, 10, 12], 0),
          ((10,), [-20, 20], 0), ((3, 4, 5), (1, 3), 2), ((3, 4, 5), 2, 1)]


@pytest.mark.parametrize("shape,arg,dim", SPLITS)
def test_tensor_split_like_torch(shape, arg, dim):
    k, t = _pair(shape)
    _same_pieces(kiln.tensor_split(k, arg, dim), torch.tensor_split(t, arg, dim))
    _same_pieces(k.tensor_split(arg, dim=dim), t.tensor_split(arg, dim=dim))
    targ = torch.tensor(arg, dtype=torch.int64)  # the tensor form: 0-d sections, 1-d indices
    _same_pieces(kiln.tensor_split(k, kiln.tensor(arg, dtype=kiln.int64), dim), torch.tensor_split(t, targ, dim))


def test_tensor_split_gives_views():
    k = kiln.zeros(6)
    for p in kiln.tensor_split(k, [2, 4]):
        p.fill_(1.0)
    assert k.tolist() == [1.0] * 6
    a, b = kiln.zeros(3, 4).tensor_split(2, dim=1)
    b.fill_(2.0)
    assert a.sum().item() == 0 and b.sum().item() == 12


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_tensor_split_errors_like_torch(lib):
    x = lib.arange(6)
    with pytest.raises(RuntimeError, match="at least a 1-dimensional tensor"):
        lib.tensor_split(lib.tensor(1.0), 2)
    with pytest.raises(RuntimeError, match="number of sections must be larger than 0, got 0"):
        lib.tensor_split(x, 0)
    with pytest.raises(IndexError):
        lib.tensor_split(x, 2, dim=1)
    with pytest.raises(RuntimeError, match="to have dtype of long"):
        lib.tensor_split(x, lib.tensor([1.0]))
    with pytest.raises(RuntimeError, match="zero-dimensional or one-dimensional"):
        lib.tensor_split(x, lib.tensor([[1]]))


XSPLITS = [("hsplit", (6,), 3), ("hsplit", (6,), [1, 4]), ("hsplit", (2, 6), 2), ("hsplit", (2, 6, 3), [5]),
           ("vsplit", (4, 3), 2), ("vsplit", (4, 3), [1, 3]), ("vsplit", (6, 2, 2), 3),
           ("dsplit", (2, 2, 6), 3), ("dsplit", (1, 2, 4, 3), [1])]


@pytest.mark.parametrize("name,shape,arg", XSPLITS)
def test_hsplit_vsplit_dsplit_like_torch(name, shape, arg):
    k, t = _pair(shape)
    _same_pieces(getattr(kiln, name)(k, arg), getattr(torch, name)(t, arg))
    _same_pieces(getattr(k, name)(arg), getattr(t, name)(arg))


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_hsplit_vsplit_dsplit_errors_like_torch(lib):
    for name, shape, need in (("hsplit", (), 1), ("vsplit", (4,), 2), ("dsplit", (4, 4), 3)):
        with pytest.raises(RuntimeError, match=f"torch.{name} requires a tensor with at least {need} dimension"):
            getattr(lib, name)(lib.zeros(shape), 2)
    with pytest.raises(RuntimeError, match="not divisible by the split_size 4"):
        lib.hsplit(lib.zeros(2, 6), 4)
    with pytest.raises(RuntimeError, match="not divisible by the split_size 0"):
        lib.vsplit(lib.zeros(2, 6), 0)


def test_split_with_sizes_like_torch():
    k, t = _pair((5, 6))
    _same_pieces(kiln.split_with_sizes(k, [2, 3, 1], 1), torch.split_with_sizes(t, [2, 3, 1], 1))
    _same_pieces(k.split_with_sizes([4, 1]), t.split_with_sizes([4, 1]))
    _same_pieces(k.split_with_sizes([0, 6], dim=-1), t.split_with_sizes([0, 6], dim=-1))
    for lib, x in ((torch, t), (kiln, k)):
        with pytest.raises(RuntimeError, match="sum exactly to 5"):
            lib.split_with_sizes(x, [2, 2])


STACKS = [[(3,), (3,)], [(), ()], [(2, 3), (2, 1)], [(2, 3, 4), (2, 3, 1)], [(3,), (3, 2)], [(0,), (0,)]]


@pytest.mark.parametrize("shapes", STACKS)
@pytest.mark.parametrize("name", ["dstack", "column_stack", "row_stack"])
def test_stacks_like_torch(name, shapes):
    ks, ts = zip(*[_pair(s) for s in shapes])
    try:
        want = getattr(torch, name)(list(ts))
    except RuntimeError:
        with pytest.raises(RuntimeError):
            getattr(kiln, name)(list(ks))
        return
    got = getattr(kiln, name)(list(ks))
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_stack_errors_like_torch(lib):
    for name in ("dstack", "column_stack"):
        with pytest.raises(RuntimeError, match=f"{name} expects a non-empty TensorList"):
            getattr(lib, name)([])
    with pytest.raises(RuntimeError, match="Input must be >= 2-d."):
        lib.fliplr(lib.zeros(3))
    with pytest.raises(RuntimeError, match="Input must be >= 1-d."):
        lib.flipud(lib.tensor(1.0))


@pytest.mark.parametrize("shape", [(1,), (4,), (3, 4), (2, 3, 4), (0, 3)])
def test_fliplr_flipud_like_torch(shape):
    k, t = _pair(shape, "int64")
    if len(shape) >= 2:
        np.testing.assert_array_equal(kiln.fliplr(k).numpy(), torch.fliplr(t).numpy())
        np.testing.assert_array_equal(k.fliplr().numpy(), t.fliplr().numpy())
    np.testing.assert_array_equal(kiln.flipud(k).numpy(), torch.flipud(t).numpy())
    if len(shape) >= 2:  # a transposed (strided) input
        np.testing.assert_array_equal(k.mT.flipud().numpy(), t.mT.flipud().numpy())
    g = kiln.from_numpy(np.random.default_rng(0).standard_normal(shape)).requires_grad_()
    kiln.flipud(g).mul(kiln.arange(shape[-1], dtype=kiln.float64)).sum().backward()
    tg = torch.from_numpy(g.detach().numpy().copy()).requires_grad_()
    torch.flipud(tg).mul(torch.arange(shape[-1], dtype=torch.float64)).sum().backward()
    np.testing.assert_array_equal(g.grad.numpy(), tg.grad.numpy())
