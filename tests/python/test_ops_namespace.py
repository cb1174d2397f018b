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


# ---- public functions and methods made from the schemas (python/src/bind_schema.cpp) -----------------

def test_public_functions_come_from_schemas():
    # kiln.<op>, Tensor.<op> and Tensor.<op>_ of the schema-bound ops are the generic parser's callables
    for name in ["exp", "add", "sub", "mul", "atan2", "gather", "tril", "sort", "median", "round"]:
        assert isinstance(getattr(kiln, name), kiln._C._Op), name
        assert isinstance(kiln.Tensor.__dict__[name], kiln._C._Op), name
    assert isinstance(kiln.Tensor.__dict__["add_"], kiln._C._Op)
    assert "add.Tensor(" in kiln.add.__doc__


def test_schema_functions_match_torch_calls():
    t = torch.randn(3, 4, dtype=torch.float64)
    x = to_kiln(t)
    i = torch.tensor([[0, 2], [1, 0], [3, 3]])
    ki = to_kiln(i)
    assert_same(kiln.gather(x, 1, ki), torch.gather(t, 1, i))
    assert_same(x.gather(dim=1, index=ki), t.gather(dim=1, index=i))
    assert_same(kiln.index_select(x, 0, kiln.tensor([2, 0])), torch.index_select(t, 0, torch.tensor([2, 0])))
    assert_same(x.flip(0, 1), t.flip(0, 1))  # an int list as varargs (torch's rule for a lone int[] argument)
    assert_same(kiln.flip(x, [1]), torch.flip(t, [1]))
    assert_same(kiln.sub(x, 2, alpha=3), torch.sub(t, 2, alpha=3))
    assert_same(kiln.tril(x, diagonal=-1), torch.tril(t, diagonal=-1))
    assert_same(kiln.round(x * 100, decimals=1), torch.round(t * 100, decimals=1))  # the second overload
    assert_same(kiln.round(x), torch.round(t))
    y = x.clone()
    assert y.tril_(1) is y and y.round_(decimals=2) is y  # in-place variants return the same object
    assert_same(y, t.tril(1).round(decimals=2))


def test_named_returns_and_overloads():
    t = torch.randn(4, 5, dtype=torch.float64)
    x = to_kiln(t)
    r, e = kiln.sort(x, 1, descending=True), torch.sort(t, 1, descending=True)
    assert type(r).__name__ == "sort" and type(r).__module__ == "kiln.return_types"
    assert_same(r.values, e.values)
    assert_same(r.indices, e.indices)
    v, idx = x.topk(2)
    assert_same(v, t.topk(2).values)
    assert_same(kiln.median(x), torch.median(t))  # median(Tensor self) -> Tensor
    m, em = kiln.median(x, 1, keepdim=True), torch.median(t, 1, keepdim=True)  # median.dim -> (values, indices)
    assert_same(m.values, em.values)
    assert_same(m.indices, em.indices)
    assert_same(x.nanmedian(dim=0).values, t.nanmedian(dim=0).values)
    vals, inds = kiln.empty(0, dtype=kiln.float64), kiln.empty(0, dtype=kiln.int64)
    out = kiln.cummax(x, 1, out=(vals, inds))
    assert out[0] is vals and out[1] is inds
    assert_same(vals, torch.cummax(t, 1).values)
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        kiln.median(x, "a")
    with pytest.raises(TypeError, match=r"sort\(\): argument 'dim' \(position 2\) must be int, not str"):
        kiln.sort(x, "a")


def test_schema_functions_argument_errors():
    x = kiln.ones(3)
    with pytest.raises(TypeError, match=r"exp\(\): argument 'input' \(position 1\) must be Tensor, not int"):
        kiln.exp(1)
    with pytest.raises(TypeError, match=r"atan2\(\): argument 'other' \(position 2\) must be Tensor, not float"):
        kiln.atan2(x, 2.0)  # torch's atan2 takes no Python number
    with pytest.raises(TypeError, match="unexpected keyword argument 'alpha'"):
        kiln.mul(x, x, alpha=2)
    with pytest.raises(TypeError, match=r"add\(\): argument 'out' must be Tensor, not int"):
        kiln.add(x, x, out=1)
    with pytest.raises(TypeError, match="multiple values for argument 'other'"):
        x.add(x, other=x)
    with pytest.raises(RuntimeError, match="alpha must not be a floating point number"):
        kiln.add(kiln.ones(2, dtype=kiln.int64), 1, alpha=0.5)  # the meta's check, as torch's
    with pytest.raises(RuntimeError, match="Expected both inputs to be Float or Double"):
        kiln.complex(kiln.ones(2, dtype=kiln.int64), kiln.ones(2, dtype=kiln.int64))


def test_schema_callables_edge_cases():
    """Review findings on the generic parser: none of these may crash the interpreter."""
    np = pytest.importorskip("numpy")
    x = kiln.ones(3)
    assert kiln.Tensor.add_(self=x, other=x) is x  # in-place with self by name returns self
    assert x.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        kiln.add(x, **{"\udc80": 1})  # a name that is not valid UTF-8
    with pytest.raises(TypeError, match="cannot create"):
        type(kiln.add)()

    class Holder:
        f = kiln.add  # a function stored on a class does not bind (as builtins)

    assert Holder().f(x, x).tolist() == [4.0, 4.0, 4.0]
    assert isinstance(kiln.Tensor.__dict__["exp"], kiln._C._Op)  # methods: a subclass
    # numpy numbers where torch takes them
    assert kiln.add(x, np.int64(1)).tolist() == [3.0, 3.0, 3.0]
    assert kiln.add(x, x, alpha=np.float32(2)).tolist() == [6.0, 6.0, 6.0]
    assert tuple(kiln.ones(1).expand(np.int64(3)).shape) == (3,)
    with pytest.raises(TypeError, match="must be tuple of ints"):
        kiln.ones(3).flip(b"\x01")
    with pytest.raises(TypeError, match="found element of type bool at pos 0"):
        kiln.ones(3, 2).permute(True, 0)
    with pytest.raises(TypeError, match="found element of type str at pos 1"):
        kiln.ones(3, 2).permute(1, "a")
    v, i = kiln.empty(0), kiln.empty(0, dtype=kiln.int64)
    r = kiln.sort(kiln.tensor([3.0, 1.0]), out=(v, i))  # out= gives the return_types namedtuple
    assert type(r).__name__ == "sort" and r.values is v and r.indices is i


def test_reductions_from_schemas():
    t = torch.tensor([[True, False], [True, True]])
    x = to_kiln(t)
    assert isinstance(kiln.amax, kiln._C._Op) and isinstance(kiln.Tensor.__dict__["all"], kiln._C._Op)
    assert_same(kiln.all(x), torch.all(t))
    assert_same(kiln.all(x, dim=()), torch.all(t, dim=()))  # all.dims over (): nothing reduced, as torch
    assert_same(x.any(dim=1, keepdim=True), t.any(dim=1, keepdim=True))
    f = torch.randn(3, 4, dtype=torch.float64)
    k = to_kiln(f)
    assert_same(kiln.amax(k, dim=()), torch.amax(f, dim=()))  # amax over (): every dim, as torch
    assert_same(k.amin((0, 1), True), f.amin((0, 1), True))
    assert_same(kiln.amax(k, 1, out=kiln.empty(0, dtype=kiln.float64)), torch.amax(f, 1))


def test_composites_come_from_schemas():
    """Composite ops (kiln/ops/composite.h: torch's CompositeImplicitAutograd) are made from their
    schemas like table ops: function, method, in-place method, out= and overloads."""
    for name in ["clamp", "lerp", "matmul", "addmm", "var", "max", "reshape", "where", "cat", "stack"]:
        assert isinstance(getattr(kiln, name), kiln._C._Op), name
    for name in ["clamp", "clamp_", "view", "addmm_", "lerp_", "max", "transpose"]:
        assert isinstance(kiln.Tensor.__dict__[name], kiln._C._Op), name
    assert kiln.ops.lerp.schema.startswith("lerp.Tensor(")  # kiln.ops reaches composites too
    t = torch.randn(3, 4, dtype=torch.float64)
    x = to_kiln(t)
    lo, tlo = kiln.zeros(4, dtype=kiln.float64), torch.zeros(4, dtype=torch.float64)
    assert_same(kiln.clamp(x, min=lo), torch.clamp(t, min=tlo))  # clamp.Tensor
    assert_same(kiln.clamp(x, -0.5, 0.5), torch.clamp(t, -0.5, 0.5))  # clamp (Scalar)
    assert_same(kiln.clip(x, max=0.1), torch.clip(t, max=0.1))
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max' must not be None"):
        kiln.clamp(x)
    y, ty = x.clone(), t.clone()
    assert y.clamp_(0, 1) is y and y.lerp_(x, 0.25) is y and y.addcmul_(x, x, value=2) is y
    assert_same(y, ty.clamp_(0, 1).lerp_(t, 0.25).addcmul_(t, t, value=2))
    assert_same(kiln.lerp(x, x * 2, kiln.tensor(0.3, dtype=kiln.float64)),
                torch.lerp(t, t * 2, torch.tensor(0.3, dtype=torch.float64)))
    assert_same(kiln.div(x, 2, rounding_mode="floor"), torch.div(t, 2, rounding_mode="floor"))
    o = kiln.empty(0, dtype=kiln.float64)
    assert kiln.matmul(x, x.t(), out=o) is o and tuple(o.shape) == (3, 3)  # out= resizes
    assert_same(o, torch.matmul(t, t.t()))
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype"):  # torch's words
        kiln.matmul(x, x.t(), out=kiln.empty(0, dtype=kiln.int64))
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype"):
        torch.matmul(t, t.t(), out=torch.empty(0, dtype=torch.int64))
    w = x.clone().requires_grad_()
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        kiln.mm(w, w.t(), out=kiln.empty(0, dtype=kiln.float64))
    with pytest.raises(RuntimeError, match="output with shape"):
        kiln.ones(4).addcmul_(kiln.ones(3, 4), kiln.ones(3, 4))  # in-place may not broadcast self
    with pytest.raises(RuntimeError, match="output with shape"):
        torch.ones(4).addcmul_(torch.ones(3, 4), torch.ones(3, 4))
    # overloads: var's three, max's three, squeeze's three, where's two
    assert_same(kiln.var(x, 1, True, True), torch.var(t, 1, True, True))
    assert_same(kiln.var(x, dim=0, correction=0), torch.var(t, dim=0, correction=0))
    assert_same(kiln.var(x, False), torch.var(t, False))
    assert_same(kiln.std_mean(x, 1)[1], torch.std_mean(t, 1)[1])
    r, e = kiln.max(x, 1), torch.max(t, 1)
    assert type(r).__name__ == "max" and type(r).__module__ == "kiln.return_types"
    assert_same(r.values, e.values)
    assert_same(r.indices, e.indices)
    assert_same(kiln.max(x), torch.max(t))
    assert_same(x.max(x.flip(0)), t.max(t.flip(0)))
    mm = kiln.aminmax(x, dim=0)
    assert type(mm).__name__ == "aminmax" and mm._fields == ("min", "max")
    assert_same(kiln.ones(1, 3, 1).squeeze((0, 2)), torch.ones(1, 3, 1).squeeze((0, 2)))
    assert tuple(x.view(12).shape) == (12,) and x.view(kiln.int64).dtype == kiln.int64
    tc = t > 0
    for a, b in zip(kiln.where(to_kiln(tc)), torch.where(tc)):
        assert_same(a, b)
    assert_same(kiln.where(to_kiln(tc), 1.0, 2), torch.where(tc, 1.0, 2))
    assert_same(kiln.var(x, dim=None), torch.var(t, dim=None))
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        kiln.var(x, "a")
    assert_same(kiln.scalar_tensor(3), torch.scalar_tensor(3))  # the default dtype, as torch
    assert_same(kiln.scalar_tensor(2, dtype=kiln.int64), torch.scalar_tensor(2, dtype=torch.int64))
    ew, ei = torch.randn(5, 3, dtype=torch.float64), torch.tensor([[1, 4], [0, 1]])
    assert_same(kiln.embedding(to_kiln(ew), to_kiln(ei), padding_idx=1), torch.embedding(ew, ei, padding_idx=1))
    assert_same(kiln.prod(x, 1, out=kiln.empty(0, dtype=kiln.float32)),
                torch.prod(t, 1, out=torch.empty(0, dtype=torch.float32)))  # in out's dtype, as torch


def test_nn_functional_composites_match_torch():
    import torch.nn.functional as TF
    import kiln.nn.functional as KF
    for name in ["conv1d", "conv2d", "conv_transpose1d", "avg_pool2d", "max_pool2d_with_indices", "linear",
                 "layer_norm", "dropout", "batch_norm", "group_norm", "embedding_bag", "lstm_cell", "gru_cell",
                 "rnn_tanh_cell", "scaled_dot_product_attention"]:
        assert isinstance(getattr(kiln._C, name), kiln._C._Op), name
    x = torch.randn(2, 3, 8, 8, dtype=torch.float64)
    w = torch.randn(4, 3, 3, 3, dtype=torch.float64)
    kx, kw = to_kiln(x), to_kiln(w)
    assert_same(KF.conv2d(kx, kw, padding="same"), TF.conv2d(x, w, padding="same"))  # conv2d.padding
    assert_same(KF.conv2d(kx, kw, None, 2, 1), TF.conv2d(x, w, None, 2, 1))  # one int for an int[2]
    assert_same(KF.conv2d(kx, kw, stride=(1, 2), dilation=2), TF.conv2d(x, w, stride=(1, 2), dilation=2))
    with pytest.raises(TypeError, match="invalid combination of arguments"):  # no overload fits, as torch says
        KF.conv2d(kx, kw, stride=(1.5, 1))
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        TF.conv2d(x, w, stride=(1.5, 1))
    assert_same(KF.max_pool2d(kx, 2, stride=None), TF.max_pool2d(x, 2, stride=None))  # None: the kernel size
    y, i = KF.max_pool2d_with_indices(kx, 3, 2, 1)
    ty, ti = TF.max_pool2d_with_indices(x, 3, 2, 1)
    assert_same(y, ty)
    assert_same(i, ti)
    assert_same(KF.avg_pool2d(kx, 2, divisor_override=3), TF.avg_pool2d(x, 2, divisor_override=3))
    b = torch.randn(5, 8, dtype=torch.float64)
    assert_same(KF.linear(kx, to_kiln(b)), TF.linear(x, b))
    assert_same(KF.layer_norm(kx, (8,), eps=1e-3), TF.layer_norm(x, (8,), eps=1e-3))
    assert_same(KF.group_norm(kx, 1, eps=1e-3), TF.group_norm(x, 1, eps=1e-3))
    rm, rv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    krm, krv = to_kiln(rm), to_kiln(rv)
    assert_same(KF.batch_norm(kx, krm, krv, training=True, momentum=0.2),
                TF.batch_norm(x, rm, rv, training=True, momentum=0.2))
    assert_same(krm, rm)  # the running statistics updated in place, as torch's
    with pytest.raises(RuntimeError, match="hx must hold two tensors"):
        kiln.lstm_cell(kiln.ones(1, 2), (kiln.ones(1, 3),), kiln.ones(12, 2), kiln.ones(12, 3))
    k = kx.clone()
    assert KF.dropout(k, 0.5, False).data_ptr() == k.data_ptr()  # eval: the input itself
    r = KF.dropout(k, 0.5, True, True)  # inplace=True: k holds the result
    assert r.data_ptr() == k.data_ptr()
    kept = k.ne(0)
    assert kiln.equal(k[kept], kx[kept] * 2)  # the kept values scaled by 1 / (1 - p)


def test_random_composites_take_a_generator():
    for name in ["rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial"]:
        assert isinstance(getattr(kiln, name), kiln._C._Op), name
    assert isinstance(kiln.Tensor.__dict__["uniform_"], kiln._C._Op)
    g = kiln.Generator().manual_seed(3)
    a = kiln.rand(4, generator=g)
    g.manual_seed(3)
    assert kiln.equal(a, kiln.rand(4, generator=g))  # the same stream from the same seed
    assert kiln.randint(5, (3,)).dtype == kiln.int64 and tuple(kiln.randint(2, 5, (2, 3)).shape) == (2, 3)
    r = kiln.randint(2, 5, (1000,), generator=g)
    assert int(r.min()) >= 2 and int(r.max()) <= 4
    x = kiln.empty(1000)
    assert x.uniform_(2, 3, generator=g) is x and float(x.min()) >= 2 and float(x.max()) < 3
    assert kiln.rand(2, 3, requires_grad=True).requires_grad
    assert kiln.randn(2, dtype=kiln.float64).dtype == kiln.float64
    with pytest.raises(TypeError, match="generator"):
        kiln.rand(3, generator="a")
    with pytest.raises(TypeError, match="generator"):
        torch.rand(3, generator="a")
    o = kiln.empty(0)
    assert kiln.randn(5, out=o) is o and tuple(o.shape) == (5,)
