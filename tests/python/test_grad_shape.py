"""Gradients of the view / shape ops and of composites built from table ops, against torch."""
import pytest
import torch

import kiln
from grad_shape_helpers import compare_grads, compare_gradgrads, kgradcheck, kleaf, leaf, rand


def F(lib):
    return torch.nn.functional if lib is torch else kiln.nn.functional


def noncontig(*shape, seed=0):
    """A transposed (non-contiguous) leaf of `shape`."""
    return leaf(rand(*reversed(shape), seed=seed).permute(*reversed(range(len(shape)))))


# ---- views -------------------------------------------------------------------------------------------
VIEW_CASES = [
    ("view", lambda L, x: x.view(6, 2), (3, 4)),
    ("reshape_noncontig", lambda L, x: x.reshape(-1), "nc34"),
    ("unsqueeze", lambda L, x: x.unsqueeze(-1) * 2, (3, 4)),
    ("squeeze", lambda L, x: x.squeeze(1), (3, 1, 4)),
    ("squeeze_all", lambda L, x: x.squeeze(), (1, 3, 1)),
    ("expand", lambda L, x: x.expand(2, 3, 4), (3, 1)),
    ("expand_0dim", lambda L, x: x.expand(2, 3), ()),
    ("permute", lambda L, x: x.permute(2, 0, 1), (2, 3, 4)),
    ("permute_neg", lambda L, x: x.permute(-1, 0, -2), (2, 3, 4)),
    ("transpose", lambda L, x: x.transpose(-1, 0), "nc34"),
    ("slice", lambda L, x: x[1:3], (4, 3)),
    ("slice_step", lambda L, x: x[:, 1::2], (3, 6)),
    ("slice_step_noncontig", lambda L, x: x[::3, ::2], "nc34"),
    ("slice_empty", lambda L, x: x[2:2], (4, 3)),
    ("narrow_neg", lambda L, x: L.narrow(x, -1, 1, 2), (3, 4)),
    ("select", lambda L, x: x.select(1, -1), (3, 4)),
    ("select_idx", lambda L, x: x[2], (3, 4)),
    ("movedim", lambda L, x: L.movedim(x, 0, -1), (2, 3, 4)),
    ("unbind", lambda L, x: L.unbind(x, 1), (2, 3)),
    ("split", lambda L, x: L.split(x, 2, -1), (2, 5)),
    ("chunk", lambda L, x: L.chunk(x, 3, 0), (5, 2)),
    ("diagonal", lambda L, x: L.diagonal(x), (3, 4)),
    ("diagonal_pos", lambda L, x: L.diagonal(x, 1), (3, 4)),
    ("diagonal_neg", lambda L, x: L.diagonal(x, -2), (4, 3)),
    ("diagonal_3d", lambda L, x: L.diagonal(x, 1, 2, 0), (3, 2, 4)),
    ("diagonal_negdims", lambda L, x: L.diagonal(x, -1, -1, -2), (2, 3, 4)),
    ("diagonal_empty", lambda L, x: L.diagonal(x, 5), (3, 4)),
    ("diagonal_noncontig", lambda L, x: L.diagonal(x, 1), "nc34"),
    ("unfold", lambda L, x: x.unfold(1, 2, 1), (3, 5)),
    ("unfold_step", lambda L, x: x.unfold(-1, 3, 2), (2, 8)),
    ("unfold_gap", lambda L, x: x.unfold(0, 2, 3), (7, 2)),
    ("unfold_0dim", lambda L, x: x.unfold(0, 1, 1), ()),
    ("unfold_noncontig", lambda L, x: x.unfold(0, 2, 1), "nc34"),
    ("as_strided", lambda L, x: L.as_strided(x, (2, 2), (1, 2), 1), (3, 4)),
    ("as_strided_overlap", lambda L, x: L.as_strided(x, (3, 3), (1, 1)), (3, 4)),
    ("as_strided_bcast", lambda L, x: L.as_strided(x, (2, 3), (0, 1), 2), (12,)),
    ("as_strided_noncontig", lambda L, x: L.as_strided(x, (2, 2), (2, 1)), "nc34"),
    ("as_strided_empty", lambda L, x: L.as_strided(x, (0, 2), (1, 1)), (3,)),
    ("view_as_real", lambda L, x: L.view_as_real(L.view_as_complex(x)) * 3, (3, 2)),
    ("real_imag", lambda L, x: L.view_as_complex(x).imag * 2 + L.view_as_complex(x).real, (4, 2)),
    ("flatten", lambda L, x: x.flatten(), "nc34"),
    ("unflatten", lambda L, x: L.unflatten(x, 1, (2, 2)), (3, 4)),
    ("t", lambda L, x: x.t() * 2, (3, 4)),
]


def _input(spec, seed=0):
    if spec == "nc34":
        return noncontig(3, 4, seed=seed)
    return leaf(rand(*spec, seed=seed))


@pytest.mark.parametrize("name,fn,spec", VIEW_CASES, ids=[c[0] for c in VIEW_CASES])
def test_view_grads(name, fn, spec):
    compare_grads(fn, _input(spec), msg=name)


def test_as_strided_overlapping_input():
    # an input whose elements share memory (expanded): the gradient is shared among them
    base = leaf(rand(1, 4).expand(3, 4))
    compare_grads(lambda L, x: L.as_strided(x, (2, 3), (1, 1), 0), base)
    compare_grads(lambda L, x: L.as_strided(x, (4,), (1,)) * L.arange(4, dtype=L.float64), base)


def test_as_strided_of_views():
    # the input's own geometry (offset, strides) decides where its gradient is read back
    b = leaf(rand(3, 4))
    compare_grads(lambda L, b: L.as_strided(b[1:], (2, 2), (1, 4), 5), b)
    compare_grads(lambda L, b: L.as_strided(b.t(), (3,), (5,), 0), b)
    compare_grads(lambda L, b: L.as_strided(b[:, 1:] * 1, (2, 2), (1, 1), 1), b)
    compare_grads(lambda L, b: L.as_strided(b.expand(2, 3, 4), (2, 3), (0, 1), 2), b)


def test_view_dtype_is_a_constant():
    # torch: view(dtype) never requires grad; the other path's gradient is unchanged
    x = leaf(rand(3, 4))
    compare_grads(lambda L, x: x.view(L.float64) * 2 + x, x, check_forward=False)
    compare_grads(lambda L, x: x.view(L.int64).to(L.float64) * 0 + x * 3, x)


def test_view_dtype_complex_constant():
    x = leaf(rand(3, 4))
    compare_grads(lambda L, x: (x.view(L.complex64).abs() * 0).to(L.float64).sum() + x.sum(), x,
                  check_forward=False)


def test_cat_and_stack():
    a, b, c = leaf(rand(2, 3, seed=1)), noncontig(4, 3, seed=2), leaf(rand(1, 3, seed=3))
    compare_grads(lambda L, a, b, c: L.cat([a, b, c]), a, b, c)
    compare_grads(lambda L, a, b, c: L.cat([a.t(), b.t(), c.t()], -1), a, b, c)
    e = leaf(torch.empty(0, dtype=torch.float64))  # legacy empty input, skipped by cat
    compare_grads(lambda L, a, e: L.cat([a, e, a], 0), a, e)
    compare_grads(lambda L, a, b: L.stack([a, b[:2]], 1), a, b)
    compare_grads(lambda L, a, b: L.hstack([a, a * 2]), a, b[:1])


def test_cat_no_grad_input():
    a = leaf(rand(2, 3, seed=1))
    b = leaf(rand(2, 3, seed=2), requires=False)
    compare_grads(lambda L, a, b: L.cat([b, a, b], 1), a, b)


def test_to_dtype():
    x = leaf(rand(3, 4))
    compare_grads(lambda L, x: x.to(L.float32).to(L.float64) * 2, x, rtol=1e-6, atol=1e-6)
    compare_grads(lambda L, x: (x.to(L.complex128) * (1 + 2j)).abs(), x)
    z = leaf(torch.complex(rand(3, seed=1), rand(3, seed=2)))
    compare_grads(lambda L, z: z.to(L.complex64).to(L.complex128) * z, z, rtol=1e-5, atol=1e-5)
    compare_grads(lambda L, x: x.to(L.bfloat16), x, rtol=1e-2, atol=1e-2)


@pytest.mark.filterwarnings("ignore")
def test_to_real_discards_imaginary():
    z = leaf(torch.complex(rand(3, seed=1), rand(3, seed=2)))
    compare_grads(lambda L, z: z.to(L.float64) * 2, z)


# ---- shape ops -----------------------------------------------------------------------------------------
SHAPE_CASES = [
    ("repeat", lambda L, x: x.repeat(2, 3), (2, 3)),
    ("repeat_lead", lambda L, x: x.repeat(2, 1, 2), (3, 2)),
    ("repeat_zero", lambda L, x: x.repeat(0, 2), (2, 3)),
    ("repeat_0dim", lambda L, x: x.repeat(3), ()),
    ("repeat_noncontig", lambda L, x: x.repeat(1, 2), "nc34"),
    ("tile", lambda L, x: L.tile(x, (2,)), (2, 3)),
    ("repeat_interleave_int", lambda L, x: L.repeat_interleave(x, 2, 1), (2, 3)),
    ("repeat_interleave_flat", lambda L, x: L.repeat_interleave(x, 3), (2, 2)),
    ("repeat_interleave_tensor", lambda L, x: L.repeat_interleave(x, L.tensor([1, 0, 3]), 0), (3, 2)),
    ("repeat_interleave_tensor_neg", lambda L, x: L.repeat_interleave(x, L.tensor([2, 1, 0, 1]), -1), "nc34"),
    ("diag_1d", lambda L, x: L.diag(x), (4,)),
    ("diag_1d_k", lambda L, x: L.diag(x, 2), (3,)),
    ("diag_1d_negk", lambda L, x: L.diag(x, -1), (3,)),
    ("diag_2d", lambda L, x: L.diag(x), (3, 4)),
    ("diag_2d_k", lambda L, x: L.diag(x, 1), (4, 3)),
    ("diag_2d_negk", lambda L, x: L.diag(x, -2), (4, 3)),
    ("diag_2d_noncontig", lambda L, x: L.diag(x, -1), "nc34"),
    ("diag_embed", lambda L, x: L.diag_embed(x), (2, 3)),
    ("diag_embed_offset", lambda L, x: L.diag_embed(x, 1, 0, 2), (2, 3)),
    ("diag_embed_negoffset", lambda L, x: L.diag_embed(x, -2, -1, 0), (2, 3)),
    ("roll", lambda L, x: L.roll(x, (1, -2), (0, 1)), (3, 4)),
    ("roll_flat", lambda L, x: L.roll(x, 5), "nc34"),
    ("flip", lambda L, x: L.flip(x, (0, -1)), "nc34"),
    ("rot90", lambda L, x: L.rot90(x, 1, (0, 1)), (3, 4)),
    ("tril", lambda L, x: L.tril(x, -1), (3, 4)),
    ("triu", lambda L, x: L.triu(x, 1), "nc34"),
    ("pad_constant", lambda L, x: F(L).pad(x, (1, 2, 0, 1), value=3.0), (2, 3)),
    ("pad_constant_crop", lambda L, x: F(L).pad(x, (-1, 2, 1, -1)), (3, 4)),
    ("pad_reflect_1d", lambda L, x: F(L).pad(x, (2, 1), mode="reflect"), (2, 4)),
    ("pad_reflect_2d", lambda L, x: F(L).pad(x, (1, 2, 2, 1), mode="reflect"), (1, 3, 4)),
    ("pad_reflect_noncontig", lambda L, x: F(L).pad(x, (1, 1), mode="reflect"), "nc34"),
    ("pad_replicate_1d", lambda L, x: F(L).pad(x, (3, 1), mode="replicate"), (1, 2, 3)),
    ("pad_replicate_2d", lambda L, x: F(L).pad(x, (2, 0, 1, 3), mode="replicate"), (2, 2, 3)),
    ("pad_replicate_3d", lambda L, x: F(L).pad(x, (1, 1, 1, 0, 0, 1), mode="replicate"), (1, 2, 2, 2)),
    ("pad_circular_1d", lambda L, x: F(L).pad(x, (2, 3), mode="circular"), (2, 4)),
    ("pad_circular_2d", lambda L, x: F(L).pad(x, (1, 2, 2, 1), mode="circular"), (1, 3, 3)),
    ("pad_circular_neg", lambda L, x: F(L).pad(x, (-1, 2), mode="circular"), (2, 4)),
]


@pytest.mark.parametrize("name,fn,spec", SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_shape_grads(name, fn, spec):
    compare_grads(fn, _input(spec), msg=name)


def test_pad_empty_batch():
    x = leaf(rand(0, 2, 3))
    compare_grads(lambda L, x: F(L).pad(x, (1, 1), mode="reflect"), x)
    compare_grads(lambda L, x: F(L).pad(x, (1, 1), mode="replicate"), x)


def test_embedding_grads():
    w = leaf(rand(5, 3))
    idx = torch.tensor([[0, 2, 2], [4, 0, 2]])
    compare_grads(lambda L, w, i: F(L).embedding(i, w), w, idx)
    compare_grads(lambda L, w, i: F(L).embedding(i, w, padding_idx=2), w, idx)
    compare_grads(lambda L, w, i: F(L).embedding(i, w, padding_idx=-1, scale_grad_by_freq=True), w, idx)


# ---- composites: built from table ops, differentiated for free --------------------------------------
def test_matmul_broadcast_batch():
    a, b = leaf(rand(2, 1, 3, 4, seed=1)), leaf(rand(3, 4, 2, seed=2))
    compare_grads(lambda L, a, b: L.matmul(a, b), a, b)
    v = leaf(rand(4, seed=3))
    compare_grads(lambda L, a, v: L.matmul(a, v), a, v)
    compare_grads(lambda L, b, v: L.matmul(v, b), b, v)
    compare_grads(lambda L, v: L.matmul(v, v), v)
    m = noncontig(3, 4, seed=4)
    compare_grads(lambda L, m, b: m @ b, m, b)


def test_matmul_family():
    a, b, c = leaf(rand(3, 4, seed=1)), leaf(rand(4, 2, seed=2)), leaf(rand(3, 2, seed=3))
    compare_grads(lambda L, c, a, b: L.addmm(c, a, b, beta=0.5, alpha=-2.0), c, a, b)
    compare_grads(lambda L, c, a, b: L.addmm(c[0], a, b), c, a, b)
    v, w = leaf(rand(4, seed=4)), leaf(rand(3, seed=5))
    compare_grads(lambda L, a, v: L.mv(a, v), a, v)
    compare_grads(lambda L, v, w: L.outer(v, w), v, w)
    compare_grads(lambda L, v: L.dot(v, v * 2), v)
    compare_grads(lambda L, w, a, v: L.addmv(w, a, v, beta=2.0), w, a, v)
    x, y, z = leaf(rand(2, 3, 4, seed=6)), leaf(rand(2, 4, 2, seed=7)), leaf(rand(2, 3, 2, seed=8))
    compare_grads(lambda L, z, x, y: L.baddbmm(z, x, y, alpha=0.5), z, x, y)
    compare_grads(lambda L, c, x, y: L.addbmm(c, x, y), c, x, y)


def test_einsum_tensordot_kron():
    a, b = leaf(rand(2, 3, 4, seed=1)), leaf(rand(4, 3, seed=2))
    compare_grads(lambda L, a, b: L.einsum("bij,jk->bik", a, b), a, b)
    compare_grads(lambda L, a, b: L.einsum("bij,ji->b", a, b), a, b)
    compare_grads(lambda L, a: L.einsum("bii->b", a[:, :, :3]), a)
    compare_grads(lambda L, a, b: L.tensordot(a, b, ([1, 2], [1, 0])), a, b)
    c, d = leaf(rand(2, 2, seed=3)), leaf(rand(2, 3, seed=4))  # torch fails on a non-contiguous d
    compare_grads(lambda L, c, d: L.kron(c, d), c, d)


def test_reduction_composites():
    x = noncontig(3, 4)
    compare_grads(lambda L, x: L.var(x, 1), x)
    compare_grads(lambda L, x: L.var(x, (0, 1), correction=0, keepdim=True), x)
    compare_grads(lambda L, x: L.std(x, -1), x)
    compare_grads(lambda L, x: L.var_mean(x, 0), x)
    compare_grads(lambda L, x: L.logsumexp(x, 1), x)
    compare_grads(lambda L, x: L.logsumexp(x, (0, 1), keepdim=True), x)


def test_lerp():
    a, b, w = leaf(rand(3, 4, seed=1)), leaf(rand(4, seed=2)), leaf(rand(3, 1, seed=3))
    compare_grads(lambda L, a, b, w: L.lerp(a, b, w), a, b, w)
    compare_grads(lambda L, a, b: L.lerp(a, b, 0.3), a, b)


# ---- gradcheck / gradgradcheck ----------------------------------------------------------------------
GRADCHECK = [
    (lambda L, x: L.as_strided(x, (2, 2), (1, 1), 1), (2, 3), True),
    (lambda L, x: L.diagonal(x, -1), (3, 2), True),
    (lambda L, x: x.unfold(1, 2, 1), (2, 3), True),
    (lambda L, x: x.repeat(2, 1, 2), (2, 2), True),
    (lambda L, x: L.diag(x, 1), (3,), True),
    (lambda L, x: L.diag(x, -1), (3, 2), False),
    (lambda L, x: L.diag_embed(x, 1), (2, 2), True),
    (lambda L, x: F(L).pad(x, (2, 1), mode="reflect"), (1, 3), True),
    (lambda L, x: F(L).pad(x, (1, 1, 1, 0), mode="replicate"), (1, 2, 2), False),
    (lambda L, x: F(L).pad(x, (1, 2), mode="circular"), (1, 3), False),
    (lambda L, x: L.cat([x, x * x], -1), (2, 2), True),
    (lambda L, x: L.matmul(x, x.transpose(-1, -2)), (2, 2, 2), True),
    (lambda L, x: L.logsumexp(x * x, 0), (3, 2), True),
]


@pytest.mark.parametrize("k", range(len(GRADCHECK)))
def test_gradcheck(k):
    fn, shape, gg = GRADCHECK[k]
    kgradcheck(fn, leaf(rand(*shape, seed=k)), gradgrad=gg)


def test_double_backward_vs_torch():
    x = leaf(rand(3, 4))
    compare_gradgrads(lambda L, x: L.diagonal(x * x, 1), x)
    compare_gradgrads(lambda L, x: (x * x).unfold(1, 2, 1), x)
    compare_gradgrads(lambda L, x: L.as_strided(x * x, (2, 2), (1, 2), 1), x)
    compare_gradgrads(lambda L, x: F(L).pad((x * x).unsqueeze(0), (1, 2), mode="reflect"), x)
    compare_gradgrads(lambda L, x: (x * x).repeat(2, 1), x)
    compare_gradgrads(lambda L, x: L.var(x, 1) * L.mean(x, 1), x)


def test_double_backward_through_saved_outputs():
    # exp / softmax save their output; its history must survive into create_graph=True backward
    x = leaf(rand(3, 4))
    compare_gradgrads(lambda L, x: L.logsumexp(x, 1), x)
    compare_gradgrads(lambda L, x: L.var(x, 1) * L.logsumexp(x, 1), x)


COMPLEX_CASES = [
    ("as_strided", lambda L, z: L.as_strided(z, (2, 2), (1, 2), 1)),
    ("diagonal", lambda L, z: L.diagonal(z, 1)),
    ("unfold", lambda L, z: z.unfold(0, 2, 1)),
    ("repeat", lambda L, z: z.repeat(2, 1)),
    ("diag_embed", lambda L, z: L.diag_embed(z, -1)),
    ("pad_reflect", lambda L, z: F(L).pad(z.unsqueeze(0), (1, 2), mode="reflect")),
    ("cat", lambda L, z: L.cat([z, z * 1j], 0)),
    ("view_as_real", lambda L, z: L.view_as_real(z) * 2),
]


@pytest.mark.parametrize("name,fn", COMPLEX_CASES, ids=[c[0] for c in COMPLEX_CASES])
def test_complex_grads(name, fn):
    z = leaf(torch.complex(rand(4, 3, seed=1), rand(4, 3, seed=2)))
    compare_grads(fn, z, msg=name)


# ---- errors ------------------------------------------------------------------------------------------
def test_view_dtype_output_has_no_gradient():
    # torch: the output does not require grad; kiln: it carries no gradient to x
    x = rand(2, 2).requires_grad_()
    with pytest.raises(RuntimeError):
        torch.autograd.grad(x.view(torch.float64).sum(), x)
    kx = kleaf(x)
    y = kx.view(kiln.float64).sum()
    try:
        g = kiln.autograd.grad(y, kx, allow_unused=True)[0]
    except RuntimeError:
        return
    assert g is None or not bool(kiln.any(g != 0).item())


def test_backward_twice_without_retain():
    for L, x in ((torch, rand(3, 4).requires_grad_()), (kiln, kleaf(rand(3, 4).requires_grad_()))):
        y = L.diagonal(x * x).sum()
        y.backward()
        with pytest.raises(RuntimeError):
            y.backward()
