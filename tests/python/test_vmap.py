"""kiln.func.vmap vs torch.func.vmap on identical inputs: pointwise broadcasting between batched and
unbatched arguments, reductions and dim-taking ops, views, matmul in every rank combination, nn
functionals, in_dims / out_dims pytrees, per-sample gradients (vmap(grad), vmap(jacrev), nested vmap,
grad through vmap), chunk_size, randomness, in-place semantics, torch's errors, and that common
functions go through the batching rules rather than the per-example loop (kiln._C._vmap_stats())."""
import pytest
import torch
import torch.func as tf

import kiln
import kiln.func as kf
from helpers import dname, to_kiln, to_kiln_tree, to_torch

TOLS = {"float32": (1e-5, 1e-5), "float64": (1e-10, 1e-10)}


def _same(k, t, rtol=None, atol=None, path="out"):
    """kiln result vs torch result: same structure (tuples, lists, dicts), dtypes, shapes, values."""
    if isinstance(t, (tuple, list)):
        assert isinstance(k, (tuple, list)) and isinstance(k, list) == isinstance(t, list), \
            f"{path}: expected a {type(t).__name__}, got {type(k).__name__}"
        assert len(k) == len(t), f"{path}: {len(k)} entries, torch has {len(t)}"
        for i, (a, b) in enumerate(zip(k, t)):
            _same(a, b, rtol, atol, f"{path}[{i}]")
        return
    if isinstance(t, dict):
        assert isinstance(k, dict) and list(k) == list(t), f"{path}: keys {list(k) if isinstance(k, dict) else k}"
        for key in t:
            _same(k[key], t[key], rtol, atol, f"{path}[{key!r}]")
        return
    if not isinstance(t, torch.Tensor):
        assert k == t, f"{path}: {k!r} != {t!r}"
        return
    assert isinstance(k, kiln.Tensor), f"{path}: expected a Tensor, got {type(k).__name__}"
    assert dname(k.dtype) == dname(t.dtype), f"{path}: dtype {k.dtype} != {t.dtype}"
    assert tuple(k.shape) == tuple(t.shape), f"{path}: shape {tuple(k.shape)} != {tuple(t.shape)}"
    got = to_torch(k.detach())
    t = t.detach()
    if t.dtype.is_floating_point:
        r, a = TOLS.get(dname(t.dtype), (1e-5, 1e-5))
        torch.testing.assert_close(got, t, rtol=rtol if rtol is not None else r,
                                   atol=atol if atol is not None else a, equal_nan=True, msg=lambda m: f"{path}: {m}")
    else:
        assert torch.equal(got, t), f"{path}: values differ\nkiln  {got}\ntorch {t}"


def _both(make, *targs, in_dims=0, out_dims=0, rtol=None, atol=None, **vkw):
    """vmap(make(lib), in_dims, out_dims, **vkw) on torch inputs and on their kiln copies."""
    t = tf.vmap(make(torch), in_dims, out_dims, **vkw)(*targs)
    k = kf.vmap(make(kiln), in_dims, out_dims, **vkw)(*to_kiln_tree(targs))
    _same(k, t, rtol, atol)
    return k, t


def _raises_like_torch(make, *targs, vm_args=(), vm_kw=None, match=None):
    """Both raise (at vmap() or at the call), kiln an exception of torch's class; kiln's message has `match`."""
    vm_kw = vm_kw or {}
    texc = kexc = None
    try:
        tf.vmap(make(torch), *vm_args, **vm_kw)(*targs)
    except Exception as e:  # noqa: BLE001
        texc = e
    try:
        kf.vmap(make(kiln), *vm_args, **vm_kw)(*to_kiln_tree(targs))
    except Exception as e:  # noqa: BLE001
        kexc = e
    assert texc is not None, "torch did not raise"
    assert kexc is not None, f"kiln did not raise; torch raised {type(texc).__name__}: {texc}"
    assert type(kexc) is type(texc), \
        f"kiln raised {type(kexc).__name__}: {kexc}\ntorch raised {type(texc).__name__}: {texc}"
    if match is not None:
        assert match in str(kexc), f"{match!r} not in kiln's message: {kexc}"


def _stats():
    rules, loops, looped = kiln._C._vmap_stats()
    return rules, loops, list(looped)


def rnd(*shape, dtype=torch.float32, seed=0, low=-2.0, high=2.0):
    g = torch.Generator().manual_seed(seed)
    return torch.empty(shape, dtype=torch.float64).uniform_(low, high, generator=g).to(dtype)


B = 4


# ---------------------------------------------------------------------------------------------------
# pointwise, broadcasting between batched and unbatched arguments


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name,make", [
    ("sin", lambda lib: lambda x: x.sin()),
    ("exp_tanh", lambda lib: lambda x: lib.tanh(x.exp() * 0.1)),
    ("relu", lambda lib: lambda x: lib.nn.functional.relu(x)),
    ("sigmoid_abs_neg", lambda lib: lambda x: -lib.sigmoid(x).abs()),
    ("scalars", lambda lib: lambda x: 3.0 - x * 2.5 + 1),
    ("pow", lambda lib: lambda x: x ** 2 + 2 ** x),
    ("rdiv", lambda lib: lambda x: 1.0 / (x.abs() + 1)),
    ("clamp", lambda lib: lambda x: x.clamp(min=-0.5, max=0.7)),
    ("clamp_min", lambda lib: lambda x: lib.clamp(x, min=0.1)),
    ("where_scalar", lambda lib: lambda x: lib.where(x > 0, x, 0.0)),
    ("compare", lambda lib: lambda x: (x > 0.3) | (x < -1)),
    ("to_int", lambda lib: lambda x: (x * 3).to(lib.int64)),
])
def test_unary_pointwise(name, make, dtype):
    _both(make, rnd(B, 3, 5, dtype=dtype))


@pytest.mark.parametrize("name,xs,ys,in_dims", [
    ("both", (B, 3, 5), (B, 3, 5), (0, 0)),
    ("x_batched_y_shared", (B, 3, 5), (5,), (0, None)),
    ("x_shared_y_batched", (3, 5), (B, 5), (None, 0)),
    ("lower_rank_batched", (B, 3, 5), (B, 5), (0, 0)),
    ("lower_rank_batched_first", (B, 5), (B, 3, 5), (0, 0)),
    ("in_dim_1", (3, B, 5), (B, 5), (1, 0)),
    ("negative_in_dims", (3, 5, B), (B, 1, 5), (-1, 0)),
    ("negative_in_dims_2", (3, B, 5), (5, B), (-2, -1)),
    ("size1_broadcast", (B, 1, 5), (B, 3, 1), (0, 0)),
    ("shared_higher_rank", (B, 5), (2, 3, 5), (0, None)),
])
@pytest.mark.parametrize("op", ["add", "mul_sub", "div", "maximum", "atan2", "where"])
def test_binary_broadcasting(name, xs, ys, in_dims, op):
    x, y = rnd(*xs, seed=1), rnd(*ys, seed=2)
    makes = {
        "add": lambda lib: lambda a, b: a + b,
        "mul_sub": lambda lib: lambda a, b: a * b - b,
        "div": lambda lib: lambda a, b: a / (b.abs() + 0.5),
        "maximum": lambda lib: lambda a, b: lib.maximum(a, b),
        "atan2": lambda lib: lambda a, b: lib.atan2(a, b),
        "where": lambda lib: lambda a, b: lib.where(a > b, a * 2, b),
    }
    _both(makes[op], x, y, in_dims=in_dims)


def test_zero_dim_examples():
    x, y, v = rnd(B, seed=1), rnd(B, seed=2), rnd(3, seed=3)
    _both(lambda lib: lambda a: a.sin() * 2 + 1, x)
    _both(lambda lib: lambda a, b: a * b, x, y)
    _both(lambda lib: lambda a, b: a * b, x, v, in_dims=(0, None))          # (), (3,) -> (3,)
    _both(lambda lib: lambda a, b: b - a, x, rnd(B, 2, 3), in_dims=(0, 0))  # (), (2, 3)
    _both(lambda lib: lambda a: a.unsqueeze(0).expand(3) * v.shape[0], x)
    _both(lambda lib: lambda a: lib.stack([a, a * 2]), x)
    _both(lambda lib: lambda a: a.sum(), x)
    _both(lambda lib: lambda a: a.reshape(1, 1), x)


def test_mixed_dtypes_and_integers():
    xi = torch.arange(B * 3, dtype=torch.int64).reshape(B, 3) - 5
    xf = rnd(B, 3, dtype=torch.float64)
    _both(lambda lib: lambda a: a * 2 + 1, xi)
    _both(lambda lib: lambda a, b: a + b, xi, xf)                     # promotion to float64
    _both(lambda lib: lambda a, b: a * b, xi, rnd(3), in_dims=(0, None))
    _both(lambda lib: lambda a: a // 2, xi)
    _both(lambda lib: lambda a: a.sum(), xi)


# ---------------------------------------------------------------------------------------------------
# reductions and dim-taking ops

X3 = rnd(B, 3, 4, 5, seed=7)


@pytest.mark.parametrize("name,make", [
    ("sum_all", lambda lib: lambda x: x.sum()),
    ("sum_dims", lambda lib: lambda x: x.sum(dim=(0, 2))),
    ("sum_neg_keep", lambda lib: lambda x: x.sum(-1, keepdim=True)),
    ("sum_list", lambda lib: lambda x: x.sum(dim=[-1, 0])),
    ("mean_all", lambda lib: lambda x: x.mean()),
    ("mean_dim", lambda lib: lambda x: x.mean(dim=[1])),
    ("mean_keep", lambda lib: lambda x: x.mean(dim=(-2, -1), keepdim=True)),
    ("amax", lambda lib: lambda x: x.amax(dim=(-1, -2))),
    ("amax_all", lambda lib: lambda x: x.amax()),
    ("amin", lambda lib: lambda x: x.amin(dim=1, keepdim=True)),
    ("prod_dim", lambda lib: lambda x: x.prod(dim=1)),
    ("prod_all", lambda lib: lambda x: (x * 0.5 + 1).prod()),
    ("var", lambda lib: lambda x: x.var(dim=-1)),
    ("std_all", lambda lib: lambda x: x.std()),
    ("norm", lambda lib: lambda x: lib.linalg.vector_norm(x, dim=-1)),
    ("logsumexp", lambda lib: lambda x: lib.logsumexp(x, dim=1)),
    ("any_all", lambda lib: lambda x: ((x > 1.5).any(dim=-1), (x > -3).all())),
    ("softmax", lambda lib: lambda x: lib.softmax(x, dim=-1)),
    ("softmax0", lambda lib: lambda x: lib.softmax(x, dim=0)),
    ("log_softmax", lambda lib: lambda x: lib.nn.functional.log_softmax(x, dim=1)),
    ("cumsum", lambda lib: lambda x: x.cumsum(dim=1)),
    ("cumsum_neg", lambda lib: lambda x: lib.cumsum(x, dim=-1)),
    ("cumprod", lambda lib: lambda x: x.cumprod(0)),
    ("sort", lambda lib: lambda x: tuple(x.sort(dim=-1))),
    ("sort_desc0", lambda lib: lambda x: tuple(lib.sort(x, dim=0, descending=True))),
    ("topk", lambda lib: lambda x: tuple(x.topk(2, dim=-1))),
    ("topk_dim1_smallest", lambda lib: lambda x: tuple(x.topk(3, dim=1, largest=False))),
    ("max_dim", lambda lib: lambda x: tuple(x.max(dim=1))),
    ("min_dim_keep", lambda lib: lambda x: tuple(x.min(dim=-1, keepdim=True))),
    ("max_all", lambda lib: lambda x: x.max()),
    ("argmax", lambda lib: lambda x: x.argmax(dim=-1)),
    ("argmax_all", lambda lib: lambda x: x.argmax()),
    ("flip_roll", lambda lib: lambda x: x.flip(-1) + x.roll(1, dims=0)),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_reductions_and_dim_ops(name, make, dtype):
    x = X3.to(dtype)
    _both(make, x)
    _both(make, x.movedim(0, 2), in_dims=2)  # the batch in the middle of a non-contiguous input


def test_sort_returns_torch_structure():
    k = kf.vmap(lambda x: x.sort())(to_kiln(X3))
    t = tf.vmap(lambda x: x.sort())(X3)
    assert hasattr(k, "values") and hasattr(k, "indices")
    _same(k.values, t.values)
    _same(k.indices, t.indices)


@pytest.mark.parametrize("name,make,in_dims", [
    ("cat_batched_shared", lambda lib: lambda a, b: lib.cat([a, b], dim=0), (0, None)),
    ("cat_shared_batched_neg", lambda lib: lambda a, b: lib.cat([b, a], dim=-1), (0, None)),
    ("cat_both", lambda lib: lambda a, b: lib.cat([a, b, a], dim=1), (0, 0)),
    ("stack_batched_shared", lambda lib: lambda a, b: lib.stack([a, b[:3, :4]]), (0, None)),
    ("stack_neg", lambda lib: lambda a, b: lib.stack([a, b[:3, :4]], dim=-1), (0, None)),
    ("stack_both", lambda lib: lambda a, b: lib.stack([b[:3, :4], a], dim=1), (0, 0)),
])
def test_cat_stack(name, make, in_dims):
    a = rnd(B, 3, 4, seed=1)
    b = rnd(B, 3, 4, seed=2) if in_dims[1] == 0 else rnd(3, 4, seed=2)
    if "cat" in name and in_dims == (0, None):
        b = rnd(2, 4, seed=2) if "neg" not in name else rnd(3, 2, seed=2)
    _both(make, a, b, in_dims=in_dims)


@pytest.mark.parametrize("name,make", [
    ("index0", lambda lib: lambda x: x[0]),
    ("index_neg", lambda lib: lambda x: x[-1]),
    ("slice", lambda lib: lambda x: x[:, 1:3]),
    ("slice_step", lambda lib: lambda x: x[::2, :, 1::2]),
    ("ellipsis", lambda lib: lambda x: x[..., -1]),
    ("none", lambda lib: lambda x: x[None, :, None]),
    ("mixed", lambda lib: lambda x: x[1, :, 2:]),
    ("select_narrow", lambda lib: lambda x: x.select(1, 2).narrow(0, 1, 2)),
    ("adv_index", lambda lib: lambda x: x[lib.tensor([2, 0, 2])]),
    ("transpose", lambda lib: lambda x: x.transpose(0, 2)),
    ("transpose_neg", lambda lib: lambda x: x.transpose(-1, -2)),
    ("mT", lambda lib: lambda x: x.mT),
    ("permute", lambda lib: lambda x: x.permute(2, 0, 1)),
    ("permute_neg", lambda lib: lambda x: x.permute(-1, -3, -2)),
    ("reshape", lambda lib: lambda x: x.reshape(-1)),
    ("reshape2", lambda lib: lambda x: x.reshape(4, -1)),
    ("view", lambda lib: lambda x: x.view(3, 20)),
    ("view_after_transpose", lambda lib: lambda x: x.transpose(0, 1).reshape(4, 15)),
    ("flatten", lambda lib: lambda x: x.flatten()),
    ("flatten_range", lambda lib: lambda x: x.flatten(1)),
    ("unsqueeze", lambda lib: lambda x: x.unsqueeze(0)),
    ("unsqueeze_neg", lambda lib: lambda x: x.unsqueeze(-1)),
    ("squeeze_all", lambda lib: lambda x: x[:, :1, None, :1].squeeze()),
    ("squeeze_dim", lambda lib: lambda x: x[:, :1].squeeze(1)),
    ("squeeze_neg", lambda lib: lambda x: x[..., :1].squeeze(-1)),
    ("expand", lambda lib: lambda x: x[:1].expand(6, 4, 5)),
    ("expand_new_dims", lambda lib: lambda x: x[0, 0].expand(2, 3, 5)),
    ("expand_minus1", lambda lib: lambda x: x[:, :1].expand(-1, 4, -1)),
    ("repeat", lambda lib: lambda x: x.repeat(2, 1, 3)),
    ("repeat_more_dims", lambda lib: lambda x: x[0].repeat(2, 2, 1)),
    ("diagonal", lambda lib: lambda x: x[0].diagonal()),
    ("diagonal_offset", lambda lib: lambda x: x.diagonal(offset=1, dim1=-1, dim2=-2)),
    ("diag_embed", lambda lib: lambda x: lib.diag_embed(x[0])),
    ("tril", lambda lib: lambda x: x.tril()),
    ("triu", lambda lib: lambda x: lib.triu(x[0], 1)),
    ("contiguous_clone", lambda lib: lambda x: x.transpose(0, 1).contiguous().clone()),
    ("movedim", lambda lib: lambda x: lib.movedim(x, 0, -1)),
    ("chunk", lambda lib: lambda x: tuple(x.chunk(2, dim=-1))),
    ("split", lambda lib: lambda x: tuple(x.split([1, 2], dim=0))),
    ("unbind", lambda lib: lambda x: tuple(x.unbind(1))),
    ("gather", lambda lib: lambda x: x.gather(2, lib.tensor([[[0, 4]] * 4] * 3))),
    ("index_select", lambda lib: lambda x: x.index_select(-1, lib.tensor([4, 0]))),
    ("pad", lambda lib: lambda x: lib.nn.functional.pad(x, (1, 2))),
])
def test_views_and_indexing(name, make):
    _both(make, X3)
    _both(make, X3.movedim(0, -1), in_dims=-1)


def test_batched_index_tensors():
    x, idx = rnd(B, 5), torch.tensor([[0, 4], [1, 1], [3, 2], [4, 0]])
    _both(lambda lib: lambda a, i: a[i], x, idx)
    _both(lambda lib: lambda a, i: a.gather(0, i), x, idx)
    _both(lambda lib: lambda a, i: a[i], rnd(5, 3), idx, in_dims=(None, 0))
    _both(lambda lib: lambda a, i: a[i], x, idx - 5)  # negative indices
    _both(lambda lib: lambda a, i: a.index_select(0, i), x, idx)
    _both(lambda lib: lambda a, i: lib.take(a, i), x, idx)
    _both(lambda lib: lambda a, i: lib.take_along_dim(a, i, dim=0), x, idx[0], in_dims=(0, None))
    _both(lambda lib: lambda a, i: lib.zeros(5).scatter(0, i, a[:2]), x, idx)
    _both(lambda lib: lambda a, i: a.scatter_add(0, i, a[:2]), x, idx)
    _both(lambda lib: lambda a, i: a.index_add(0, i, a[:2]), x, idx)
    _both(lambda lib: lambda a, i: a.index_copy(0, i, a[:2] * 3), x, torch.tensor([[1, 4], [0, 3], [3, 2], [4, 1]]))
    _both(lambda lib: lambda a, m: a.masked_fill(m, 0.5), x, x > 0)


def test_take_along_dim_batched_indices():
    x, idx = torch.arange(20.0).reshape(4, 5), torch.tensor([[0, 4], [1, 1], [3, 2], [4, 0]])
    _both(lambda lib: lambda a, i: lib.take_along_dim(a, i, dim=0), x, idx)


@pytest.mark.parametrize("xs,ys", [
    ((4,), (4,)),              # dot
    ((3, 4), (4,)),            # matrix-vector
    ((4,), (4, 5)),            # vector-matrix
    ((3, 4), (4, 5)),          # matrix-matrix
    ((2, 3, 4), (2, 4, 5)),    # batched matmul
    ((2, 3, 4), (4, 5)),       # broadcast rhs
    ((3, 4), (2, 4, 5)),       # broadcast lhs
    ((4,), (2, 4, 5)),         # vector @ batched
    ((2, 3, 4), (4,)),         # batched @ vector
    ((2, 1, 3, 4), (5, 4, 2)),  # broadcast batch dims
])
@pytest.mark.parametrize("in_dims", [(0, 0), (0, None), (None, 0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matmul_rank_combinations(xs, ys, in_dims, dtype):
    x = rnd(*(((B,) if in_dims[0] == 0 else ()) + xs), dtype=dtype, seed=1)
    y = rnd(*(((B,) if in_dims[1] == 0 else ()) + ys), dtype=dtype, seed=2)
    _both(lambda lib: lambda a, b: a @ b, x, y, in_dims=in_dims)
    _both(lambda lib: lambda a, b: lib.matmul(a, b), x, y, in_dims=in_dims)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("in_dims", [(0, None, None), (0, 0, 0), (None, 0, None), (None, None, 0), (1, None, 0),
                                     (None, 1, 0)])
def test_lowp_linear_addmm_baddbmm_batch_rule(dtype, in_dims):
    """bfloat16 / float16 linear with a bias, addmm and baddbmm go through _fused_baddbmm's rule (no
    per-example loop), each example with the bits it has alone (and torch's values)."""
    def inp(shape, d, seed):
        return rnd(*shape, dtype=dtype, seed=seed) if d is None else rnd(*(shape[:d] + (B,) + shape[d:]), dtype=dtype, seed=seed)
    x, w, b = inp((5, 16), in_dims[0], 1), inp((8, 16), in_dims[1], 2), inp((8,), in_dims[2], 3)
    kiln._C._vmap_stats()  # (reset)
    k, _ = _both(lambda lib: lambda x, w, b: lib.nn.functional.linear(x, w, b), x, w, b, in_dims=in_dims,
                 rtol=1e-2, atol=1e-2)
    _, loops, looped = _stats()
    assert "_fused_baddbmm" not in looped, looped
    for i in range(B):
        pick = [v.select(d, i) if d is not None else v for v, d in zip((x, w, b), in_dims)]
        assert kiln.equal(k[i], kiln.nn.functional.linear(*(to_kiln(v) for v in pick)))
    c, bb = inp((5, 8), in_dims[2], 4), inp((3, 5, 16), in_dims[0], 5)
    _both(lambda lib: lambda c, a, m: lib.addmm(c, a, m.t(), beta=0.5, alpha=2), c, x, w,
          in_dims=(in_dims[2], in_dims[0], in_dims[1]), rtol=1e-2, atol=1e-2)
    _both(lambda lib: lambda c, a, m: lib.baddbmm(c, a, m.t().expand(3, 16, 8)), c, bb, w,
          in_dims=(in_dims[2], in_dims[0], in_dims[1]), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("in_dims", [(0, 0), (0, None), (None, 0), (1, 0)])
def test_explicit_matmul_ops(in_dims):
    def inp(shape, d, seed):
        if d is None:
            return rnd(*shape, seed=seed)
        return rnd(*(shape[:d] + (B,) + shape[d:]), seed=seed)
    if in_dims == (1, 0):
        _both(lambda lib: lambda a, b: lib.mm(a, b), inp((3, 4), 1, 1), inp((4, 5), 0, 2), in_dims=in_dims)
        return
    _both(lambda lib: lambda a, b: lib.dot(a, b), inp((4,), in_dims[0], 1), inp((4,), in_dims[1], 2), in_dims=in_dims)
    _both(lambda lib: lambda a, b: lib.mv(a, b), inp((3, 4), in_dims[0], 1), inp((4,), in_dims[1], 2), in_dims=in_dims)
    _both(lambda lib: lambda a, b: lib.mm(a, b), inp((3, 4), in_dims[0], 1), inp((4, 5), in_dims[1], 2),
          in_dims=in_dims)
    _both(lambda lib: lambda a, b: lib.bmm(a, b), inp((2, 3, 4), in_dims[0], 1), inp((2, 4, 5), in_dims[1], 2),
          in_dims=in_dims)
    _both(lambda lib: lambda a, b: lib.einsum("ij,jk->ik", a, b), inp((3, 4), in_dims[0], 1),
          inp((4, 5), in_dims[1], 2), in_dims=in_dims)


# ---------------------------------------------------------------------------------------------------
# nn functionals


def F(lib):
    return lib.nn.functional


def test_linear():
    x, w, b = rnd(B, 3, 4, seed=1), rnd(5, 4, seed=2), rnd(5, seed=3)
    _both(lambda lib: lambda x, w, b: F(lib).linear(x, w, b), x, w, b, in_dims=(0, None, None))
    _both(lambda lib: lambda x, w: F(lib).linear(x, w), rnd(B, 4), w, in_dims=(0, None))
    _both(lambda lib: lambda x, w, b: F(lib).linear(x, w, b), x[0], rnd(B, 5, 4), rnd(B, 5), in_dims=(None, 0, 0))
    _both(lambda lib: lambda x, w, b: F(lib).linear(x, w, b), x, rnd(B, 5, 4), b, in_dims=(0, 0, None))


def test_layer_norm():
    x, w, b = rnd(B, 3, 6, seed=1), rnd(6, seed=2), rnd(6, seed=3)
    _both(lambda lib: lambda x, w, b: F(lib).layer_norm(x, (6,), w, b), x, w, b, in_dims=(0, None, None))
    _both(lambda lib: lambda x: F(lib).layer_norm(x, (3, 6)), x)
    _both(lambda lib: lambda x, w, b: F(lib).layer_norm(x, (6,), w, b), x, rnd(B, 6), b, in_dims=(0, 0, None))
    _both(lambda lib: lambda x, w, b: F(lib).layer_norm(x, (6,), w, b), x[0], rnd(B, 6), rnd(B, 6),
          in_dims=(None, 0, 0))


def test_embedding():
    w = rnd(10, 3, seed=1)
    idx = torch.tensor([[1, 9, 0], [3, 3, 3], [0, 0, 7], [5, 2, 8]])
    _both(lambda lib: lambda i, w: F(lib).embedding(i, w), idx, w, in_dims=(0, None))
    _both(lambda lib: lambda i, w: F(lib).embedding(i, w), idx[:, 0], w, in_dims=(0, None))  # 0-dim indices
    _both(lambda lib: lambda i, w: F(lib).embedding(i, w), idx[0], rnd(B, 10, 3), in_dims=(None, 0))
    _both(lambda lib: lambda i, w: F(lib).embedding(i, w), idx, rnd(B, 10, 3), in_dims=(0, 0))


def test_cross_entropy_and_losses():
    logits, target = rnd(B, 3, 5, seed=1), torch.tensor([[0, 4, 2], [1, 1, 1], [3, 0, 4], [2, 2, 0]])
    _both(lambda lib: lambda a, t: F(lib).cross_entropy(a, t), logits, target)
    _both(lambda lib: lambda a, t: F(lib).cross_entropy(a, t, reduction="none"), logits, target)
    _both(lambda lib: lambda a, t: F(lib).cross_entropy(a, t), logits[:, 0], target[:, 0])  # (C,) and ()
    _both(lambda lib: lambda a, t: F(lib).cross_entropy(a, t), logits, target[0], in_dims=(0, None))
    _both(lambda lib: lambda a, t: F(lib).nll_loss(F(lib).log_softmax(a, -1), t), logits, target)
    _both(lambda lib: lambda a, t: F(lib).mse_loss(a, t), logits, rnd(B, 3, 5, seed=2))
    _both(lambda lib: lambda a, t: F(lib).mse_loss(a, t, reduction="sum"), logits, rnd(3, 5), in_dims=(0, None))


def test_conv2d_and_pool():
    x, w, b = rnd(B, 1, 2, 7, 7, seed=1), rnd(3, 2, 3, 3, seed=2), rnd(3, seed=3)
    _both(lambda lib: lambda x, w, b: F(lib).conv2d(x, w, b, padding=1), x, w, b, in_dims=(0, None, None))
    _both(lambda lib: lambda x, w: F(lib).conv2d(x, w, stride=2), x[0], rnd(B, 3, 2, 3, 3), in_dims=(None, 0))
    _both(lambda lib: lambda x: F(lib).max_pool2d(x, 2), x)
    _both(lambda lib: lambda x: F(lib).avg_pool2d(x, 2), x)


def test_activations_and_dropout_eval():
    x = rnd(B, 3, 5)
    _both(lambda lib: lambda x: F(lib).gelu(x) + F(lib).silu(x) + F(lib).softplus(x), x)
    _both(lambda lib: lambda x: F(lib).leaky_relu(x, 0.1) * F(lib).elu(x), x)
    _both(lambda lib: lambda x: F(lib).dropout(x, 0.5, training=False), x)
    _both(lambda lib: lambda x: F(lib).normalize(x, dim=-1), x)


@pytest.mark.parametrize("name,make,args,in_dims", [
    ("det_inv_solve", lambda lib: lambda a, b: (lib.linalg.det(a), lib.linalg.inv(a), lib.linalg.solve(a, b)),
     lambda: (rnd(B, 3, 3, dtype=torch.float64) + 3 * torch.eye(3, dtype=torch.float64),
              rnd(B, 3, dtype=torch.float64)),
     0),
    ("cdist", lambda lib: lambda a, b: lib.cdist(a, b), lambda: (rnd(B, 3, 2), rnd(5, 2)), (0, None)),
    ("group_norm", lambda lib: lambda a: F(lib).group_norm(a, 2), lambda: (rnd(B, 2, 4, 3),), 0),
    ("batch_norm_eval", lambda lib: lambda a, m, v: F(lib).batch_norm(a, m, v),
     lambda: (rnd(B, 2, 3), rnd(3), rnd(3) + 3), (0, None, None)),
    ("rms_norm", lambda lib: lambda a: F(lib).rms_norm(a, (6,)), lambda: (rnd(B, 2, 6),), 0),
    ("pad_reflect", lambda lib: lambda a: F(lib).pad(a, (1, 1, 2, 0), mode="reflect"),
     lambda: (rnd(B, 1, 2, 5, 5),), 0),
    ("pools", lambda lib: lambda a: (F(lib).adaptive_avg_pool2d(a, (3, 2)),
                                     *F(lib).max_pool2d(a, 2, return_indices=True)),
     lambda: (rnd(B, 1, 2, 6, 6),), 0),
    ("interpolate", lambda lib: lambda a: F(lib).interpolate(a, size=(4, 5), mode="bilinear"),
     lambda: (rnd(B, 1, 2, 3, 3),), 0),
    ("grid_sample", lambda lib: lambda a, g: F(lib).grid_sample(a, g, align_corners=False),
     lambda: (rnd(B, 1, 2, 5, 5), rnd(B, 1, 3, 3, 2, low=-1, high=1)), 0),
    ("unfold_fold", lambda lib: lambda a: F(lib).fold(F(lib).unfold(a, 2), (4, 4), 2),
     lambda: (rnd(B, 1, 2, 4, 4),), 0),
    ("losses", lambda lib: lambda a, t: (F(lib).binary_cross_entropy_with_logits(a, t), F(lib).smooth_l1_loss(a, t),
                                         F(lib).kl_div(a.log_softmax(-1), t, reduction="batchmean")),
     lambda: (rnd(B, 2, 5), rnd(B, 2, 5, low=0, high=1)), 0),
    ("nll_weight_ignore", lambda lib: lambda a, t, w: F(lib).nll_loss(a, t, weight=w, ignore_index=1),
     lambda: (rnd(B, 3, 5), torch.tensor([[0, 1, 2], [1, 1, 4], [3, 1, 0], [2, 2, 2]]), rnd(5, low=0.1, high=1)),
     (0, 0, None)),
    ("ce_soft_smooth", lambda lib: lambda a, t: (F(lib).cross_entropy(a, t.softmax(-1)),
                                                 F(lib).cross_entropy(a, t.argmax(-1), label_smoothing=0.1)),
     lambda: (rnd(B, 3, 5), rnd(B, 3, 5, seed=9)), 0),
    ("cosine_similarity", lambda lib: lambda a, b: F(lib).cosine_similarity(a, b, dim=-1),
     lambda: (rnd(B, 2, 5), rnd(2, 5)), (0, None)),
    ("searchsorted", lambda lib: lambda s, v: (lib.searchsorted(s, v), lib.bucketize(v, s)),
     lambda: (rnd(B, 5).sort(-1).values, rnd(B, 3, seed=4)), 0),
    ("sort_family", lambda lib: lambda a: (a.argsort(-1), *a.kthvalue(2), *a.cummax(0), a.median(), *a.median(0)),
     lambda: (rnd(B, 3, 5),), 0),
    ("complex_fft", lambda lib: lambda a: lib.view_as_real(lib.fft.fft(a)), lambda: (rnd(B, 6),), 0),
    ("einsum_outer_kron", lambda lib: lambda a, b: (lib.einsum("i,j->ij", a, b), lib.outer(a, b), lib.kron(a, b)),
     lambda: (rnd(B, 3), rnd(B, 2)), 0),
    ("factories", lambda lib: lambda a: a * lib.arange(5) + lib.linspace(0, 1, 5) + lib.eye(5)[1] + lib.full((5,), 2.0),
     lambda: (rnd(B, 5),), 0),
    ("meshgrid", lambda lib: lambda a: a + lib.meshgrid(lib.arange(5.0), lib.arange(3.0), indexing="ij")[0][:, 2],
     lambda: (rnd(B, 5),), 0),
    ("tile_unfold_diff", lambda lib: lambda a: (a.tile(2, 1), a.unfold(0, 2, 1), lib.diff(a), a.repeat_interleave(2)),
     lambda: (rnd(B, 5),), 0),
])
def test_more_ops(name, make, args, in_dims):
    _both(make, *args(), in_dims=in_dims)


# values that do not depend on the batch are the traced ones (a front end may fill them outside the ops)
def test_triu_tril_indices_inside():
    x = rnd(B, 5)
    _both(lambda lib: lambda a: a + lib.triu_indices(5, 5)[1][:5], x)
    _both(lambda lib: lambda a: a + lib.tril_indices(5, 5)[1][:5], x)


def test_multinomial_batched_probs():
    # kiln's multinomial draws outside the op table, so vmap cannot batch it: with batched probabilities it
    # raises (a known gap; torch batches it) rather than reusing the first example's draws
    t = torch.func.vmap(lambda p: torch.multinomial(p, 1), randomness="different")(torch.eye(4))
    assert t.flatten().tolist() == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="vmap"):
        kf.vmap(lambda p: kiln.multinomial(p, 1), randomness="different")(kiln.eye(4))


def test_one_hot_batched_indices():
    _both(lambda lib: lambda i: F(lib).one_hot(i, 6), torch.tensor([[1, 5], [0, 0], [3, 2], [4, 1]]))


def test_ctc_loss_mean():
    lp = torch.randn(B, 5, 1, 4, generator=torch.Generator().manual_seed(0)).log_softmax(-1)
    t = torch.tensor([[[1, 2]], [[3, 3]], [[2, 1]], [[1, 1]]])
    il, tl = torch.tensor([5]), torch.tensor([2])
    _both(lambda lib: lambda a, b, il, tl: F(lib).ctc_loss(a, b, il, tl, reduction="sum"), lp, t, il, tl,
          in_dims=(0, 0, None, None))
    _both(lambda lib: lambda a, b, il, tl: F(lib).ctc_loss(a, b, il, tl), lp, t, il, tl, in_dims=(0, 0, None, None))


# attention with dropout_p=0 draws nothing: the default randomness='error' lets it through (torch too)
def test_sdpa_default_randomness():
    q, k, v = rnd(B, 2, 3, 4, seed=1), rnd(B, 2, 5, 4, seed=2), rnd(B, 2, 5, 4, seed=3)
    _both(lambda lib: lambda q, k, v: F(lib).scaled_dot_product_attention(q, k, v), q, k, v)


def test_sdpa_values():
    q, k, v = rnd(B, 2, 3, 4, seed=1), rnd(B, 2, 5, 4, seed=2), rnd(B, 2, 5, 4, seed=3)
    _both(lambda lib: lambda q, k, v: F(lib).scaled_dot_product_attention(q, k, v), q, k, v, randomness="same")
    _both(lambda lib: lambda q, k, v: F(lib).scaled_dot_product_attention(q, k[:, :3], v[:, :3], is_causal=True),
          q, k, v, randomness="different")


# ---------------------------------------------------------------------------------------------------
# in_dims / out_dims structures, non-tensor arguments, returned structures


def test_out_dims():
    x = rnd(B, 3, 5)
    _both(lambda lib: lambda a: a * 2, x, out_dims=1)
    _both(lambda lib: lambda a: a * 2, x, out_dims=2)
    _both(lambda lib: lambda a: a * 2, x, out_dims=-1)
    _both(lambda lib: lambda a: a * 2, x, out_dims=-3)
    _both(lambda lib: lambda a: (a.sum(0), a.t()), x, out_dims=(1, -1))
    _both(lambda lib: lambda a: (a * 2, a.sum()), x, out_dims=(2, 0))


def test_out_dims_none_for_unbatched_output():
    x, w = rnd(B, 3), rnd(3)
    k, t = _both(lambda lib: lambda a, w: (a * w, w * 2), x, w, in_dims=(0, None), out_dims=(0, None))
    assert tuple(k[1].shape) == (3,)
    _both(lambda lib: lambda a, w: (a * w, lib.ones(2)), x, w, in_dims=(0, None), out_dims=(0, None))
    # an unbatched output with an out_dim is expanded over the batch (torch itself fails for out_dim != 0 here)
    _both(lambda lib: lambda a: (a, lib.zeros(2, 3)), x)
    k = kf.vmap(lambda a, w: (a * w, w * 2), in_dims=(0, None), out_dims=(0, 1))(to_kiln(x), to_kiln(w))
    _same(k[1], (w * 2)[:, None].expand(3, B))


def test_in_dims_pytrees():
    x, y, z, w = rnd(B, 3, seed=1), rnd(3, seed=2), rnd(3, B, seed=3), rnd(3, seed=4)

    def make(lib):
        def f(pair, d, scale):
            a, b = pair
            return a * b + d["z"] * scale - d["w"]
        return f
    _both(make, (x, y), {"z": z, "w": w}, 2.0, in_dims=((0, None), {"z": 1, "w": None}, None))
    _both(make, [x, x], {"z": z.t(), "w": rnd(B, 3)}, 2.0, in_dims=(0, 0, None))  # an int covers a subtree
    _both(make, [x, y], {"z": z, "w": rnd(B, 3)}, 3, in_dims=([0, None], {"z": 1, "w": 0}, None))
    _both(make, (x, y), {"z": z.t(), "w": w}, -1.5, in_dims=((-2, None), {"z": 0, "w": None}, None))


def test_non_tensor_args_and_kwargs():
    x = rnd(B, 3)

    def make(lib):
        def f(a, n, mode, eps=0.0, *, shift):
            out = a * n + eps + shift
            return out.sum() if mode == "sum" else out
        return f
    t = tf.vmap(make(torch), in_dims=(0, None, None, None))(x, 3, "sum", 0.5, shift=1.0)
    k = kf.vmap(make(kiln), in_dims=(0, None, None, None))(to_kiln(x), 3, "sum", 0.5, shift=1.0)
    _same(k, t)
    # keyword arguments are passed unmapped, tensors too
    t = tf.vmap(lambda a, *, w: a * w)(x, w=torch.arange(3.0))
    k = kf.vmap(lambda a, *, w: a * w)(to_kiln(x), w=kiln.arange(3.0))
    _same(k, t)
    _both(lambda lib: lambda a, n: a[:n], x, None, in_dims=(0, None))  # None as an argument value


def test_returned_structures():
    x = rnd(B, 3)
    _both(lambda lib: lambda a: {"s": a.sum(), "d": a * 2}, x)
    _both(lambda lib: lambda a: (a, (a.sum(), [a * 3, a.exp()])), x)
    _both(lambda lib: lambda a: [a.max(), a.min()], x)
    _both(lambda lib: lambda a: {"s": a.sum(), "d": (a * 2, a)}, x, out_dims={"s": 0, "d": (1, 0)})


def test_identity_and_input_passthrough():
    x = rnd(B, 3)
    _both(lambda lib: lambda a: a, x)
    _both(lambda lib: lambda a: a, x, out_dims=1)
    _both(lambda lib: lambda a: a, x.t(), in_dims=1)
    _both(lambda lib: lambda a, b: b, x, rnd(2), in_dims=(0, None))  # an unbatched output gets expanded


# ---------------------------------------------------------------------------------------------------
# per-sample gradients, jacobians, nesting, grad through vmap


def _mlp_pair(dtype=torch.float64, act="tanh"):
    torch.manual_seed(0)
    tact = torch.nn.Tanh() if act == "tanh" else torch.nn.ReLU()
    kact = kiln.nn.Tanh() if act == "tanh" else kiln.nn.ReLU()
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), tact, torch.nn.Linear(8, 3)).to(dtype)
    km = kiln.nn.Sequential(kiln.nn.Linear(4, 8), kact, kiln.nn.Linear(8, 3)).to(kiln.float64 if dtype == torch.float64
                                                                                 else kiln.float32)
    km.load_state_dict({k: to_kiln(v.detach()) for k, v in tm.state_dict().items()})
    pt = {k: v.detach() for k, v in tm.named_parameters()}
    pk = {k: to_kiln(v) for k, v in pt.items()}
    return tm, km, pt, pk


@pytest.mark.parametrize("loss_kind", ["mse", "cross_entropy"])
@pytest.mark.parametrize("act", ["tanh", "relu"])
def test_per_sample_grads_mlp(loss_kind, act):
    tm, km, pt, pk = _mlp_pair(act=act)
    x = rnd(6, 4, dtype=torch.float64, seed=1)
    y = rnd(6, 3, dtype=torch.float64, seed=2) if loss_kind == "mse" else torch.tensor([0, 2, 1, 1, 0, 2])

    def make(lib, fm, model):
        def loss(params, xi, yi):
            out = fm.functional_call(model, params, (xi.unsqueeze(0),))
            if loss_kind == "mse":
                return F(lib).mse_loss(out, yi.unsqueeze(0))
            return F(lib).cross_entropy(out, yi.unsqueeze(0))
        return loss
    gt = tf.vmap(tf.grad(make(torch, tf, tm)), in_dims=(None, 0, 0))(pt, x, y)
    gk = kf.vmap(kf.grad(make(kiln, kf, km)), in_dims=(None, 0, 0))(pk, to_kiln(x), to_kiln(y))
    _same(gk, gt)
    # also with the loss value (grad_and_value) and the gradient w.r.t. the input
    gt = tf.vmap(tf.grad_and_value(make(torch, tf, tm), argnums=(0, 1)), in_dims=(None, 0, 0))(pt, x, y)
    gk = kf.vmap(kf.grad_and_value(make(kiln, kf, km), argnums=(0, 1)), in_dims=(None, 0, 0))(pk, to_kiln(x),
                                                                                                to_kiln(y))
    _same(gk, gt)


def test_per_sample_grads_float32_functional():
    w1, b1, w2 = rnd(8, 4, seed=1), rnd(8, seed=2), rnd(3, 8, seed=3)
    x, y = rnd(5, 4, seed=4), rnd(5, 3, seed=5)

    def make(lib):
        def loss(p, xi, yi):
            h = F(lib).relu(F(lib).linear(xi, p["w1"], p["b1"]))
            return ((h @ p["w2"].t() - yi) ** 2).sum()
        return (tf if lib is torch else kf).grad(loss)
    _both(make, {"w1": w1, "b1": b1, "w2": w2}, x, y, in_dims=(None, 0, 0), rtol=1e-5, atol=1e-5)


def test_vmap_jacrev():
    x = rnd(B, 3, dtype=torch.float64)

    def make(lib):
        jac = tf.jacrev if lib is torch else kf.jacrev
        return jac(lambda a: a.sin() * a.sum())
    _both(make, x)

    def make2(lib):
        jac = tf.jacrev if lib is torch else kf.jacrev
        return jac(lambda a, w: lib.tanh(w @ a), argnums=(0, 1))
    _both(make2, x, rnd(2, 3, dtype=torch.float64), in_dims=(0, None))


def test_vmap_hessian_and_jvp():
    x = rnd(B, 3, dtype=torch.float64)
    _both(lambda lib: (tf if lib is torch else kf).hessian(lambda a: (a.sin() * a).sum()), x)
    _both(lambda lib: lambda a, t: (tf if lib is torch else kf).jvp(lambda u: u.exp() * u, (a,), (t,)),
          x, rnd(B, 3, dtype=torch.float64, seed=3))


def test_nested_vmap():
    x, y = rnd(B, 3, 5, seed=1), rnd(B, 5, seed=2)

    def make(lib):
        vm = tf.vmap if lib is torch else kf.vmap
        return vm(lambda a, b: (a * b).sum(), in_dims=(0, None))
    _both(make, x, y, in_dims=(0, 0))      # x over (B, 3), y over B
    _both(make, x, y[0], in_dims=(0, None))
    _both(make, x[0], y, in_dims=(None, 0))

    def make2(lib):
        vm = tf.vmap if lib is torch else kf.vmap
        return vm(vm(lambda a: lib.softmax(a, 0) @ a), in_dims=1)
    _both(make2, rnd(B, 3, 5, 2, seed=4), in_dims=2)  # three levels: 5 x 3 x 4 examples of shape (2,)

    def make3(lib):
        vm = tf.vmap if lib is torch else kf.vmap
        return vm(lambda a, b: a @ b, in_dims=(None, 1), out_dims=1)
    _both(make3, x, rnd(B, 5, 2, seed=3), in_dims=(0, 0), out_dims=-1)


def test_nested_vmap_of_grad():
    x = rnd(B, 3, 2, dtype=torch.float64)

    def make(lib):
        vm = tf.vmap if lib is torch else kf.vmap
        g = tf.grad if lib is torch else kf.grad
        return vm(g(lambda a: (a.sin() ** 2).sum()))
    _both(make, x)


def test_grad_through_vmap():
    w = rnd(3, dtype=torch.float64, seed=1)
    x = rnd(B, 3, dtype=torch.float64, seed=2)

    def make(lib):
        vm = tf.vmap if lib is torch else kf.vmap
        g = tf.grad if lib is torch else kf.grad
        return g(lambda w, x: vm(lambda xi: (lib.tanh(xi * w) @ w).exp(), in_dims=0)(x).sum())
    t = make(torch)(w, x)
    k = make(kiln)(to_kiln(w), to_kiln(x))
    _same(k, t)
    # the same through the autograd engine: backward() reaches the unbatched leaf
    wt = w.clone().requires_grad_()
    tf.vmap(lambda xi: (xi * wt).sin().sum())(x).pow(2).sum().backward()
    wk = to_kiln(w).requires_grad_()
    kf.vmap(lambda xi: (xi * wk).sin().sum())(to_kiln(x)).pow(2).sum().backward()
    _same(wk.grad, wt.grad)


def test_grad_through_vmap_of_batched_input():
    x = rnd(B, 3, dtype=torch.float64, seed=2)
    xt = x.clone().requires_grad_()
    (tf.vmap(lambda a: torch.softmax(a, dim=-1) * a)(xt) ** 2).sum().backward()
    xk = to_kiln(x).requires_grad_()
    (kf.vmap(lambda a: kiln.softmax(a, dim=-1) * a)(xk) ** 2).sum().backward()
    _same(xk.grad, xt.grad)


# ---------------------------------------------------------------------------------------------------
# chunk_size


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 5, 100])
def test_chunk_size_matches(chunk_size):
    x, w = rnd(5, 3, 4, seed=1), rnd(4, 2, seed=2)

    def make(lib):
        return lambda a, w: (lib.softmax(a @ w, -1), a.sum(), w * 2)
    for od in [(0, 0, None), (1, 0, None), (-1, 0, 0)]:
        full = kf.vmap(make(kiln), in_dims=(0, None), out_dims=od)(to_kiln(x), to_kiln(w))
        chunked = kf.vmap(make(kiln), in_dims=(0, None), out_dims=od, chunk_size=chunk_size)(to_kiln(x), to_kiln(w))
        for a, b in zip(chunked, full):
            assert tuple(a.shape) == tuple(b.shape)
            assert torch.equal(to_torch(a), to_torch(b))
        if None not in od:  # torch's chunked vmap fails on out_dims=None (torch.cat(dim=None))
            _both(make, x, w, in_dims=(0, None), out_dims=od, chunk_size=chunk_size)
    _both(make, x, w, in_dims=(0, None), out_dims=(0, 0, None))


def test_chunk_size_per_sample_grads():
    tm, km, pt, pk = _mlp_pair()
    x, y = rnd(7, 4, dtype=torch.float64, seed=1), rnd(7, 3, dtype=torch.float64, seed=2)

    def make(fm, model):
        return fm.grad(lambda p, xi, yi: ((fm.functional_call(model, p, (xi,)) - yi) ** 2).sum())
    gt = tf.vmap(make(tf, tm), in_dims=(None, 0, 0), chunk_size=3)(pt, x, y)
    gk = kf.vmap(make(kf, km), in_dims=(None, 0, 0), chunk_size=3)(pk, to_kiln(x), to_kiln(y))
    _same(gk, gt)


# ---------------------------------------------------------------------------------------------------
# randomness


def test_randomness_error():
    x = rnd(B, 3)
    _raises_like_torch(lambda lib: lambda a: a + lib.randn(3), x, match="randomness")
    _raises_like_torch(lambda lib: lambda a: lib.rand_like(a), x)
    _raises_like_torch(lambda lib: lambda a: F(lib).dropout(a, 0.5, training=True), x)


@pytest.mark.parametrize("make_rand", [
    lambda lib: lambda a: a * 0 + lib.randn(3),
    lambda lib: lambda a: lib.randn(2, 3) + a.sum() * 0,
    lambda lib: lambda a: lib.rand_like(a),
    lambda lib: lambda a: lib.randn_like(a) + lib.rand(3),
])
@pytest.mark.parametrize("randomness", ["same", "different"])
def test_randomness_same_different(make_rand, randomness):
    x = rnd(B, 3)
    t = tf.vmap(make_rand(torch), randomness=randomness)(x)
    k = kf.vmap(make_rand(kiln), randomness=randomness)(to_kiln(x))
    assert tuple(k.shape) == tuple(t.shape)
    assert k.dtype == kiln.float32
    kt = to_torch(k)
    assert torch.isfinite(kt).all()
    rows = [kt[i] for i in range(B)]
    if randomness == "same":
        for r in rows[1:]:
            assert torch.equal(r, rows[0])
    else:
        for i in range(B):
            for j in range(i + 1, B):
                assert not torch.equal(rows[i], rows[j])
    # two calls give fresh draws
    k2 = kf.vmap(make_rand(kiln), randomness=randomness)(to_kiln(x))
    assert not torch.equal(to_torch(k2), kt)


@pytest.mark.parametrize("randomness", ["same", "different"])
def test_randomness_dropout(randomness):
    x = torch.ones(B, 64)
    k = to_torch(kf.vmap(lambda a: F(kiln).dropout(a, 0.5, training=True), randomness=randomness)(to_kiln(x)))
    t = tf.vmap(lambda a: F(torch).dropout(a, 0.5, training=True), randomness=randomness)(x)
    assert k.shape == t.shape
    assert set(k.unique().tolist()) <= {0.0, 2.0}
    same_rows = all(torch.equal(k[i], k[0]) for i in range(1, B))
    assert same_rows == (randomness == "same")


def test_randomness_chunked_different():
    x = rnd(6, 3)
    k = to_torch(kf.vmap(lambda a: a * 0 + kiln.randn(3), randomness="different", chunk_size=2)(to_kiln(x)))
    assert len({tuple(r.tolist()) for r in k}) == 6


# ---------------------------------------------------------------------------------------------------
# in-place ops


def test_inplace_on_batched_input_writes_through():
    x = rnd(B, 3)
    xt, xk = x.clone(), to_kiln(x)
    t = tf.vmap(lambda a: a.add_(1))(xt)
    k = kf.vmap(lambda a: a.add_(1))(xk)
    _same(k, t)
    _same(xk, xt)
    # in place with an unbatched other, through a view, and on a non-leading batch dim
    w = rnd(3, seed=5)
    xt, xk = x.clone(), to_kiln(x)
    tf.vmap(lambda a, w: a.mul_(w), in_dims=(0, None))(xt, w)
    kf.vmap(lambda a, w: a.mul_(w), in_dims=(0, None))(xk, to_kiln(w))
    _same(xk, xt)
    xt, xk = x.t().clone(), to_kiln(x.t().clone())
    tf.vmap(lambda a: a[1:].zero_(), in_dims=1)(xt)
    kf.vmap(lambda a: a[1:].zero_(), in_dims=1)(xk)
    _same(xk, xt)


def test_inplace_into_fresh_tensor_inside():
    x = rnd(B, 3)

    def make(lib):
        def f(a):
            out = a.clone()
            out[0] = 5.0
            out.mul_(a)
            return out
        return f
    _both(make, x)


def test_inplace_batched_into_captured_unbatched_raises():
    x = rnd(B, 3)
    bt, bk = torch.zeros(3), kiln.zeros(3)
    with pytest.raises(RuntimeError):
        tf.vmap(lambda a: bt.add_(a))(x)
    with pytest.raises(RuntimeError, match="vmap"):
        kf.vmap(lambda a: bk.add_(a))(to_kiln(x))
    with pytest.raises(RuntimeError):
        tf.vmap(lambda a: bt.mul_(a))(x)
    # a tensor the function makes itself becomes batched when a batched value is written into it (kiln
    # is more permissive here: torch raises); one captured from outside raises as in torch (above)
    _same(kf.vmap(lambda a: kiln.ones(3).mul_(a))(to_kiln(x)), x, None, None, "ones(3).mul_(a)")


# copy_ / setitem of a batched value: into a tensor captured from outside, or into a view of one the
# function made (o[0] = ...), it raises as in torch; into a whole tensor the function made itself, kiln
# makes that tensor batched (more permissive than torch, which raises)
def test_copy_batched_into_unbatched_raises():
    x = rnd(B, 3)

    def setitem(lib):
        def f(a):
            o = lib.zeros(3)
            o[0] = a[1]
            return o
        return f
    _raises_like_torch(setitem, x)
    captured_t, captured_k = torch.zeros(3), kiln.zeros(3)
    with pytest.raises(RuntimeError):
        tf.vmap(lambda a: captured_t.copy_(a))(x)
    with pytest.raises(RuntimeError, match="vmap"):
        kf.vmap(lambda a: captured_k.copy_(a))(to_kiln(x))
    _same(kf.vmap(lambda a: kiln.zeros(3).copy_(a))(to_kiln(x)), x, None, None, "zeros(3).copy_(a)")


# the error comes at the traced write, before anything is written (as torch's)
def test_inplace_into_captured_leaves_it_untouched():
    x = rnd(B, 3)
    bk = kiln.zeros(3)
    with pytest.raises(RuntimeError):
        kf.vmap(lambda a: bk.add_(a))(to_kiln(x))
    assert torch.equal(to_torch(bk), torch.zeros(3))


# ---------------------------------------------------------------------------------------------------
# errors


def test_error_mismatched_batch_sizes():
    _raises_like_torch(lambda lib: lambda a, b: a + b, rnd(3, 2), rnd(4, 2), match="same size")
    _raises_like_torch(lambda lib: lambda a, b: a + b, rnd(3, 2), rnd(2, 4), vm_args=((0, 0),))


def test_error_in_dim_out_of_range():
    _raises_like_torch(lambda lib: lambda a: a, rnd(3, 2), vm_args=(2,), match="in_dim")
    _raises_like_torch(lambda lib: lambda a: a, rnd(3, 2), vm_args=(-3,), match="in_dim")
    _raises_like_torch(lambda lib: lambda a, b: a, rnd(3, 2), rnd(3), vm_args=((0, 1),), match="in_dim")


def test_error_in_dim_for_zero_dim_tensor():
    _raises_like_torch(lambda lib: lambda a: a * 2, torch.tensor(3.0), match="in_dim")


def test_error_in_dims_structure_mismatch():
    x = rnd(3, 2)
    _raises_like_torch(lambda lib: lambda a, b: a + b, x, x, vm_args=((0,),), match="in_dims")
    _raises_like_torch(lambda lib: lambda a: a, x, vm_args=((0, 0),), match="in_dims")
    _raises_like_torch(lambda lib: lambda a: a, x, vm_args=(((0, 0),),), match="in_dims")
    _raises_like_torch(lambda lib: lambda p: p[0] + p[1], (x, x), vm_args=(((0, 0, 0),),), match="in_dims")
    _raises_like_torch(lambda lib: lambda a: a, x, vm_args=("a",), match="in_dims")
    _raises_like_torch(lambda lib: lambda a: a, x, vm_args=(1.5,), match="in_dims")


def test_error_in_dims_structure_keys_and_containers():
    x = rnd(3, 2)
    _raises_like_torch(lambda lib: lambda d: d["a"], {"a": x}, vm_args=(({"b": 0},),), match="in_dims")
    _raises_like_torch(lambda lib: lambda p: p[0], (x, x), vm_args=(([0, None],),), match="in_dims")
    _raises_like_torch(lambda lib: lambda p: p[0], [x, x], vm_args=(((0, 0),),), match="in_dims")


def test_error_non_tensor_mapped():
    x = rnd(3, 2)
    _raises_like_torch(lambda lib: lambda a, n: a * n, x, 3, vm_args=((0, 0),), match="non-Tensor")
    _raises_like_torch(lambda lib: lambda a: a, 3.0, match="non-Tensor")
    _raises_like_torch(lambda lib: lambda a: a[0], [x, 1], match="non-Tensor")


def test_error_no_mapped_input():
    x = rnd(3, 2)
    _raises_like_torch(lambda lib: lambda a: a, x, vm_args=((None,),), match="in_dim")
    _raises_like_torch(lambda lib: lambda a, b: a, x, x, vm_args=((None, None),))
    _raises_like_torch(lambda lib: lambda: lib.ones(2))


def test_error_function_returns_non_tensor():
    x = rnd(3, 2)
    _raises_like_torch(lambda lib: lambda a: 3.0, x, match="must only return Tensors")
    _raises_like_torch(lambda lib: lambda a: (a, 1), x, match="must only return Tensors")
    _raises_like_torch(lambda lib: lambda a: None, x)
    _raises_like_torch(lambda lib: lambda a: {"a": a, "b": "s"}, x)


def test_error_invalid_randomness_and_chunk_size():
    for bad in ("bad", "Same", ""):
        for m in (tf, kf):
            with pytest.raises(RuntimeError, match="randomness"):
                m.vmap(lambda a: a, randomness=bad)
    for bad in (0, -1):
        for m in (tf, kf):
            with pytest.raises(ValueError, match="chunk_size"):
                m.vmap(lambda a: a, chunk_size=bad)


def test_error_out_dims():
    x = rnd(3, 2)
    _raises_like_torch(lambda lib: lambda a: a * 2, x, vm_kw={"out_dims": None})        # batched output, None
    _raises_like_torch(lambda lib: lambda a: (a, a), x, vm_kw={"out_dims": (0, 1, 0)}, match="out_dims")
    _raises_like_torch(lambda lib: lambda a: (a, a), x, vm_kw={"out_dims": (0,)}, match="out_dims")
    _raises_like_torch(lambda lib: lambda a: a, x, vm_kw={"out_dims": "a"}, match="out_dims")


def test_error_out_dim_out_of_range_class():
    _raises_like_torch(lambda lib: lambda a: a * 2, rnd(3, 2), vm_kw={"out_dims": 2})


def test_error_out_dim_out_of_range_raises():
    for m in (tf, kf):
        with pytest.raises((IndexError, ValueError)):
            m.vmap(lambda a: a * 2, out_dims=2)(rnd(3, 2) if m is tf else to_kiln(rnd(3, 2)))


def test_error_data_dependent_shape():
    x = torch.tensor([[1.0, -1.0, 2.0], [1.0, 2.0, 3.0], [-1.0, -2.0, 0.5]])
    _raises_like_torch(lambda lib: lambda a: a.nonzero(), x - 0.5)


@pytest.mark.parametrize("name,make", [
    ("if_sum", lambda lib: lambda a: a * 2 if a.sum() > 0 else -a),
    ("if_all", lambda lib: lambda a: a * 2 if (a > 0).all() else a),
    ("item", lambda lib: lambda a: a * a.sum().item()),
    ("float", lambda lib: lambda a: a * float(a.sum())),
    ("int", lambda lib: lambda a: a * int(a[0])),
    ("tolist", lambda lib: lambda a: a * a.tolist()[0]),
    ("numpy", lambda lib: lambda a: lib.from_numpy(a.numpy() * 2)),
    ("derived_value", lambda lib: lambda a: a if (a.exp() * 2 - 1).amax() > 3 else a + 1),
])
def test_error_data_dependent_python(name, make):
    """Reading a mapped value's data in Python raises RuntimeError (kiln would otherwise fix the first example's
    value for the whole batch)."""
    x = torch.tensor([[1.0, 2.0], [-3.0, -1.0], [0.5, 0.5]])
    _raises_like_torch(make, x)
    with pytest.raises(RuntimeError, match="vmap"):
        kf.vmap(make(kiln))(to_kiln(x))


def test_data_reads_of_unmapped_values_are_fine():
    x, s = rnd(B, 3), torch.tensor(2.5)
    _both(lambda lib: lambda a, s: a * s.item(), x, s, in_dims=(0, None))
    _both(lambda lib: lambda a, s: a * 2 if s > 0 else a, x, s, in_dims=(0, None))
    _both(lambda lib: lambda a, s: a * float(s.exp() + 1), x, s, in_dims=(0, None))
    _both(lambda lib: lambda a, i: a[i], x, torch.tensor(2), in_dims=(0, None))
    _both(lambda lib: lambda a: a[: a.shape[0] // 2] * len(a), x)


def test_index_with_batched_zero_dim_tensor():
    x, i = rnd(B, 5), torch.tensor([1, 4, 0, 2])
    _both(lambda lib: lambda a, i: a[i], x, i)
    _both(lambda lib: lambda a, i: a[i, None], x, i)


def test_empty_batch():
    _both(lambda lib: lambda a: a * 2 + 1, torch.zeros(0, 3))
    _both(lambda lib: lambda a, w: a @ w, torch.zeros(0, 3), torch.ones(3, 2), in_dims=(0, None))


# ---------------------------------------------------------------------------------------------------
# the batching rules, not the per-example loop, for common functions


@pytest.mark.parametrize("name,make,args,in_dims", [
    ("linear_relu_sum", lambda: lambda x, w, b: F(kiln).relu(F(kiln).linear(x, w, b)).sum(),
     lambda: (rnd(B, 3, 4), rnd(5, 4), rnd(5)), (0, None, None)),
    ("softmax", lambda: lambda x: kiln.softmax(x, -1), lambda: (rnd(B, 3, 4),), 0),
    ("log_softmax", lambda: lambda x: F(kiln).log_softmax(x, 0), lambda: (rnd(B, 3, 4),), 0),
    ("reductions", lambda: lambda x: x.sum(-1) + x.mean(0).sum() + x.amax(dim=(0, 1)), lambda: (rnd(B, 3, 4),), 0),
    ("views", lambda: lambda x: x.transpose(0, 1).reshape(-1)[None].expand(2, 12).flatten(), lambda: (rnd(B, 3, 4),),
     0),
    ("mm_both", lambda: lambda a, b: a @ b, lambda: (rnd(B, 3, 4), rnd(B, 4, 5)), 0),
    ("mm_shared", lambda: lambda a, b: a @ b, lambda: (rnd(B, 3, 4), rnd(4, 5)), (0, None)),
    ("mv", lambda: lambda a, b: a @ b, lambda: (rnd(B, 3, 4), rnd(B, 4)), 0),
    ("layer_norm", lambda: lambda x, w, b: F(kiln).layer_norm(x, (4,), w, b), lambda: (rnd(B, 3, 4), rnd(4), rnd(4)),
     (0, None, None)),
    ("embedding", lambda: lambda i, w: F(kiln).embedding(i, w), lambda: (torch.tensor([[1, 2], [0, 0], [3, 1], [2, 2]]),
                                                                         rnd(4, 3)), (0, None)),
    ("cat_stack_where", lambda: lambda x, y: kiln.where(x > 0, x, y) + kiln.cat([x, y]).sum() + kiln.stack([y, x])[1],
     lambda: (rnd(B, 3), rnd(3)), (0, None)),
])
def test_rule_path_no_loop(name, make, args, in_dims):
    kf.vmap(make(), in_dims=in_dims)(*to_kiln_tree(args()))
    rules, loops, looped = _stats()
    assert rules > 0
    assert loops == 0, f"{name}: ops through the per-example loop: {looped}"


def test_rule_path_mlp_forward_and_per_sample_grad():
    tm, km, pt, pk = _mlp_pair(act="relu")
    x, y = to_kiln(rnd(6, 4, dtype=torch.float64, seed=1)), to_kiln(rnd(6, 3, dtype=torch.float64, seed=2))
    kf.vmap(lambda p, xi: kf.functional_call(km, p, (xi,)), in_dims=(None, 0))(pk, x)
    rules, loops, looped = _stats()
    assert rules > 0 and loops == 0, f"MLP forward looped: {looped}"
    kf.vmap(lambda xi: km(xi))(x)
    rules, loops, looped = _stats()
    assert rules > 0 and loops == 0, f"module call looped: {looped}"

    def loss(p, xi, yi):
        return F(kiln).mse_loss(kf.functional_call(km, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))
    kf.vmap(kf.grad(loss), in_dims=(None, 0, 0))(pk, x, y)
    rules, loops, looped = _stats()
    assert rules > 0 and loops == 0, f"per-sample grad looped: {looped}"

    def loss2(p, xi, yi):
        return ((kf.functional_call(km, p, (xi,)) - yi) ** 2).sum()
    kf.vmap(kf.grad(loss2), in_dims=(None, 0, 0))(pk, x, y)
    rules, loops, looped = _stats()
    assert rules > 0 and loops == 0, f"per-sample grad (sum of squares) looped: {looped}"


def test_stats_report_loop_fallback():
    """an op without a rule goes through the loop and is named (conv2d with per-example weights here),
    with the right values."""
    x, w = rnd(B, 1, 2, 5, 5), rnd(B, 3, 2, 3, 3)
    _both(lambda lib: lambda x, w: F(lib).conv2d(x, w), x, w, in_dims=(0, 0))
    rules, loops, looped = _stats()
    assert loops >= 1 and looped, (rules, loops, looped)


def test_review_regressions():
    # cases a review found wrong, each against torch (or the per-example answer where torch raises)
    x = rnd(2, 3)
    kx = to_kiln(x)

    def later_write(lib):  # a tensor read, then written: the read sees the value before the write
        def f(a):
            z = lib.zeros(3)
            y = a * z
            z.add_(1)
            return y
        return f
    _same(kf.vmap(later_write(kiln))(kx), tf.vmap(later_write(torch))(x))

    def fill(lib):  # an unbatched source copied into a batched tensor broadcasts like torch's
        def f(a, c):
            y = a.clone()
            y[:] = c
            return y
        return f
    a, c = torch.zeros(2, 3, 3), torch.tensor([1.0, 2.0, 3.0])
    _same(kf.vmap(fill(kiln), in_dims=(0, None))(to_kiln(a), to_kiln(c)), tf.vmap(fill(torch), in_dims=(0, None))(a, c))
    # binary_cross_entropy with a shared input: the broadcast shape
    p = torch.rand(3) * 0.8 + 0.1
    t = torch.rand(4, 3)
    _same(kf.vmap(lambda q, u: F(kiln).binary_cross_entropy(q, u, reduction="none"), in_dims=(None, 0))(to_kiln(p), to_kiln(t)),
          tf.vmap(lambda q, u: F(torch).binary_cross_entropy(q, u, reduction="none"), in_dims=(None, 0))(p, t))
    # a C++ front end reading a mapped value (prod's gradient branches on a zero): torch's vmap error
    with pytest.raises(RuntimeError, match="vmap"):
        kf.vmap(kf.grad(lambda v: v.prod()))(kiln.tensor([[1.0, 2, 3], [0, 2, 3]]))
    # a draw under randomness="different" differs per example: reading it in Python raises
    with pytest.raises(RuntimeError, match="vmap"):
        kf.vmap(lambda v: v * float(kiln.rand(())), randomness="different")(kx)
    # 0-dim examples with dim 0 / -1
    _same(kf.vmap(lambda v: v.softmax(0))(kiln.tensor([1.0, 2.0, 3.0])),
          tf.vmap(lambda v: v.softmax(0))(torch.tensor([1.0, 2.0, 3.0])))
    # chunks under randomness="same" draw the same numbers
    r = kf.vmap(lambda v: v + kiln.rand(3), randomness="same", chunk_size=2)(kiln.zeros(4, 3))
    assert bool((r == r[0]).all())


def test_conv_pool_rules_and_per_sample_cnn_gradients():
    # convolutions and pools over batched inputs with shared weights fold the batch into N, and the
    # per-example weight gradient folds it into the channels (groups B g): no per-example loop
    torch.manual_seed(0)
    w, b = torch.randn(4, 3, 3, 3, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    kw, kb = to_kiln(w), to_kiln(b)
    for x in (torch.randn(5, 2, 3, 8, 8, dtype=torch.float64), torch.randn(5, 3, 8, 8, dtype=torch.float64)):
        _same(kf.vmap(lambda a: F(kiln).conv2d(a, kw, kb, padding=1))(to_kiln(x)),
              tf.vmap(lambda a: F(torch).conv2d(a, w, b, padding=1))(x))
        assert kiln._C._vmap_stats()[1] == 0
        _same(kf.vmap(lambda a: F(kiln).max_pool2d(a, 2))(to_kiln(x)), tf.vmap(lambda a: F(torch).max_pool2d(a, 2))(x))
        _same(kf.vmap(lambda a: F(kiln).avg_pool2d(a, 2))(to_kiln(x)), tf.vmap(lambda a: F(torch).avg_pool2d(a, 2))(x))

    def loss(lib):
        def f(p, xi, yi):
            h = F(lib).relu(F(lib).conv2d(xi.unsqueeze(0), p["w"], p["b"], padding=1, stride=2, groups=1))
            return (h.mean() - yi) ** 2
        return f
    x = torch.randn(6, 3, 9, 9, dtype=torch.float64)
    y = torch.randn(6, dtype=torch.float64)
    tg = tf.vmap(tf.grad(loss(torch)), in_dims=(None, 0, 0))({"w": w, "b": b}, x, y)
    kg = kf.vmap(kf.grad(loss(kiln)), in_dims=(None, 0, 0))({"w": kw, "b": kb}, to_kiln(x), to_kiln(y))
    for name in tg:
        _same(kg[name], tg[name])
    assert kiln._C._vmap_stats()[1] == 0, kiln._C._vmap_stats()
    # grouped convolution weights: the per-example gradient keeps the groups
    wg = torch.randn(4, 1, 3, 3, dtype=torch.float64)

    def gloss(lib):
        return lambda p, xi: F(lib).conv2d(xi.unsqueeze(0), p, groups=2).square().sum()
    x2 = torch.randn(3, 2, 6, 6, dtype=torch.float64)
    _same(kf.vmap(kf.grad(gloss(kiln)), in_dims=(None, 0))(to_kiln(wg), to_kiln(x2)),
          tf.vmap(tf.grad(gloss(torch)), in_dims=(None, 0))(wg, x2))
