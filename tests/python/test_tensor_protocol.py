"""Tensor protocol and utility APIs against torch on the same data.

Compared with torch (torch names, arguments, defaults, exception classes):
- Tensor.new_zeros / new_ones / new_empty / new_full / new_tensor (size forms, dtype= / requires_grad=);
- the legacy constructors (kiln.Tensor, kiln.FloatTensor ... kiln.BFloat16Tensor) and Tensor.type();
- untyped_storage() / storage() / share_memory_() / is_shared();
- as_subclass, Tensor subclasses, and __torch_function__ / __kiln_function__ dispatch (also on non-Tensor
  classes), each kiln check mirrored by the same check on torch;
- where(cond), clamp_min / clamp_max (function, method, in-place, Tensor bound, gradients);
- block_diag, cartesian_prod, tril_indices / triu_indices, cdist, cov, corrcoef, diff, trapezoid,
  cumulative_trapezoid: values, dtypes, shapes, gradients of a weighted sum, and torch's errors;
- finfo / iinfo, kiln.Size, kiln.testing.assert_close (raises exactly when torch's does),
  set_printoptions (repr equals torch's with 'torch' -> 'kiln'), kiln.backends and the
  deterministic-algorithms switches.

Values must match in dtype and shape exactly, integers and bools exactly, floats within torch.testing's
tolerances (rtol=1e-5 / atol=1e-6 for float32 results that pass through sums or matrix products, whose
summation order differs between the two libraries).
"""
import math
import warnings

import pytest
import torch

import kiln
from helpers import dname, kdt, make, tdt, to_kiln, to_kiln_tree, to_torch

F32 = dict(rtol=1e-5, atol=1e-6)
F64 = dict(rtol=1e-9, atol=1e-10)


def tol(dt):
    name = dt if isinstance(dt, str) else dname(dt)
    return {"float32": F32, "float64": F64}.get(name, {})


def lib_t(lib, t):
    """t itself for torch, its kiln copy (same strides) for kiln."""
    return t if lib is torch else to_kiln(t)


conv = to_kiln_tree  # torch tensors (in lists, tuples, dicts) -> kiln copies; dtypes -> kiln


def same(k, t, rtol=None, atol=None):
    """kiln result vs torch result: Tensor type, dtype, shape exactly; values (NaN == NaN)."""
    if isinstance(t, (tuple, list)):
        assert isinstance(k, (tuple, list)) and len(k) == len(t), f"{k!r} vs {t!r}"
        for a, b in zip(k, t):
            same(a, b, rtol, atol)
        return
    assert isinstance(k, kiln.Tensor), f"expected a kiln.Tensor, got {type(k)}"
    assert dname(k.dtype) == dname(t.dtype), f"dtype {k.dtype} != {t.dtype}"
    assert tuple(k.shape) == tuple(t.shape), f"shape {tuple(k.shape)} != {tuple(t.shape)}"
    got = to_torch(k.detach())
    t = t.detach()
    if t.dtype.is_floating_point or t.dtype.is_complex:
        if rtol is None:
            torch.testing.assert_close(got, t, equal_nan=True)
        else:
            torch.testing.assert_close(got, t, rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert torch.equal(got, t), f"values differ\nkiln  {got}\ntorch {t}"


def both(fn, *targs, **tol_kw):
    """fn(torch, *targs) vs fn(kiln, *kiln copies): same results."""
    tres = fn(torch, *targs)
    kres = fn(kiln, *[conv(a) for a in targs])
    same(kres, tres, **tol_kw)
    return kres, tres


def both_raise(exc, fn, *targs):
    """torch raises exc (exactly that class), and so does kiln on the kiln copies."""
    with pytest.raises(exc) as te:
        fn(torch, *targs)
    assert type(te.value) is exc, f"torch raised {type(te.value).__name__}, the test expects {exc.__name__}"
    with pytest.raises(exc) as ke:
        fn(kiln, *[conv(a) for a in targs])
    assert type(ke.value) is exc, f"kiln raised {type(ke.value).__name__}({ke.value}); torch raises {exc.__name__}"


def grads(lib, fn, inputs, wseed=11):
    """fn's output and the gradients of sum(out * w) (w fixed random) with respect to each floating input."""
    args, leaves = [], []
    for a in inputs:
        if isinstance(a, torch.Tensor):
            v = lib_t(lib, a.detach().clone())
            if a.dtype.is_floating_point:
                v.requires_grad_()
                leaves.append(v)
            args.append(v)
        else:
            args.append(a)
    out = fn(lib, *args)
    w = lib_t(lib, make(tuple(out.shape), dname(out.dtype), low=-1.0, high=1.0, seed=wseed))
    (out * w).sum().backward()
    return out.detach(), [x.grad for x in leaves]


def check_grads(fn, *inputs, **tol_kw):
    kout, kg = grads(kiln, fn, inputs)
    tout, tg = grads(torch, fn, inputs)
    same(kout, tout, **tol_kw)
    assert len(kg) == len(tg)
    for a, b in zip(kg, tg):
        assert b is not None
        assert a is not None, "kiln gave no gradient where torch gives one"
        same(a, b, **tol_kw)


def rand(shape, dt="float64", seed=0, low=-2.0, high=2.0):
    return make(shape, dt, low=low, high=high, seed=seed)


# ---------------------------------------------------------------------------------------------------
# 1. new_zeros / new_ones / new_empty / new_full / new_tensor
# ---------------------------------------------------------------------------------------------------
SIZE_FORMS = [((2, 3),), ([2, 3],), (2, 3), (4,), ((),), ((0, 4),)]


@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
@pytest.mark.parametrize("size", SIZE_FORMS, ids=repr)
def test_new_zeros_ones_empty(dt, size):
    t = make((3, 2), dt).t()  # non-contiguous self: the result is still a fresh contiguous tensor
    k = to_kiln(t)
    for name in ("new_zeros", "new_ones"):
        same(getattr(k, name)(*size), getattr(t, name)(*size))
    ke, te = k.new_empty(*size), t.new_empty(*size)
    assert dname(ke.dtype) == dname(te.dtype) == dt
    assert tuple(ke.shape) == tuple(te.shape)
    assert isinstance(ke.shape, kiln.Size)


def test_new_size_as_size_object():
    t = rand((2,))
    same(to_kiln(t).new_zeros(kiln.Size([3, 1])), t.new_zeros(torch.Size([3, 1])))
    same(to_kiln(t).new_ones(kiln.Size([])), t.new_ones(torch.Size([])))


@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_new_dtype_override_and_requires_grad(dt):
    t = make((2,), dt)
    k = to_kiln(t)
    for name in ("new_zeros", "new_ones"):
        same(getattr(k, name)(2, 3, dtype=kiln.int32), getattr(t, name)(2, 3, dtype=torch.int32))
        same(getattr(k, name)((2,), dtype=kiln.float64), getattr(t, name)((2,), dtype=torch.float64))
    assert dname(k.new_empty((2,), dtype=kiln.float16).dtype) == dname(t.new_empty((2,), dtype=torch.float16).dtype)
    same(k.new_full((2, 2), 7, dtype=kiln.int16), t.new_full((2, 2), 7, dtype=torch.int16))
    same(k.new_tensor([1, 2], dtype=kiln.float64), t.new_tensor([1, 2], dtype=torch.float64))
    for name, args in (("new_zeros", ((2,),)), ("new_ones", (2,)), ("new_empty", ((2,),)),
                       ("new_full", ((2,), 1.5)), ("new_tensor", ([1.0, 2.0],))):
        tr = getattr(t, name)(*args, dtype=torch.float32, requires_grad=True)
        kr = getattr(k, name)(*args, dtype=kiln.float32, requires_grad=True)
        assert kr.requires_grad is tr.requires_grad is True
        assert kr.is_leaf is tr.is_leaf is True
        kr2, tr2 = getattr(k, name)(*args), getattr(t, name)(*args)
        assert kr2.requires_grad is tr2.requires_grad is False


def test_new_requires_grad_on_integer_dtype_raises():
    both_raise(RuntimeError, lambda m, x: x.new_zeros(2, requires_grad=True), torch.tensor([1, 2]))
    both_raise(RuntimeError, lambda m, x: x.new_tensor([1, 2], requires_grad=True), torch.tensor([1, 2]))


@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_new_full(dt):
    t = make((2, 2), dt)
    k = to_kiln(t)
    same(k.new_full((2, 3), 3), t.new_full((2, 3), 3))
    same(k.new_full([4], -2.5), t.new_full([4], -2.5))        # int64 self: 2.5 truncated like torch
    same(k.new_full((), 1), t.new_full((), 1))
    same(k.new_full((0, 2), 1), t.new_full((0, 2), 1))
    b = torch.tensor([True])
    same(to_kiln(b).new_full((2,), 5), b.new_full((2,), 5))


@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_new_tensor(dt):
    t = make((3,), dt)
    k = to_kiln(t)
    same(k.new_tensor([1, 2]), t.new_tensor([1, 2]))                  # self's dtype, not the data's
    same(k.new_tensor([[1.5, 2.0], [3.0, -4.25]]), t.new_tensor([[1.5, 2.0], [3.0, -4.25]]))
    same(k.new_tensor(3), t.new_tensor(3))                            # 0-dim
    same(k.new_tensor([]), t.new_tensor([]))
    src = torch.tensor([1.0, 2.0])
    ksrc = to_kiln(src)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tc, kc = t.new_tensor(src), k.new_tensor(ksrc)
    src[0] = 9
    ksrc[0] = 9
    same(kc, tc)                                                       # a copy, not a view of the source


def test_new_errors():
    x = torch.ones(2)
    both_raise(RuntimeError, lambda m, x: x.new_zeros(-1), x)
    both_raise(RuntimeError, lambda m, x: x.new_ones((2, -3)), x)
    both_raise(TypeError, lambda m, x: x.new_full(2, 3), x)          # size must be a sequence
    both_raise(TypeError, lambda m, x: x.new_full((2,)), x)          # fill_value is required
    both_raise(TypeError, lambda m, x: x.new_zeros(2.5), x)
    both_raise(TypeError, lambda m, x: x.new_zeros((2,), (3,)), x)


# ---------------------------------------------------------------------------------------------------
# 2. legacy constructors and Tensor.type()
# ---------------------------------------------------------------------------------------------------
def test_legacy_tensor_constructor():
    same(kiln.Tensor([1, 2]), torch.Tensor([1, 2]))                   # float32 even for int data
    same(kiln.Tensor([[1, 2], [3, 4.5]]), torch.Tensor([[1, 2], [3, 4.5]]))
    same(kiln.Tensor((1, 2)), torch.Tensor((1, 2)))
    same(kiln.Tensor([]), torch.Tensor([]))
    same(kiln.Tensor(), torch.Tensor())                               # (0,)
    same(kiln.Tensor(0), torch.Tensor(0))
    for k, t in ((kiln.Tensor(2, 3), torch.Tensor(2, 3)),
                 (kiln.Tensor(kiln.Size([2, 3])), torch.Tensor(torch.Size([2, 3])))):
        assert tuple(k.shape) == tuple(t.shape) == (2, 3)
        assert dname(k.dtype) == dname(t.dtype) == "float32"
    assert type(kiln.Tensor([1.0])) is kiln.Tensor and type(torch.Tensor([1.0])) is torch.Tensor
    for lib in (torch, kiln):
        with pytest.raises(TypeError):
            lib.Tensor(2.5)


LEGACY = ["FloatTensor", "DoubleTensor", "LongTensor", "IntTensor", "ShortTensor", "ByteTensor", "CharTensor",
          "BoolTensor", "HalfTensor", "BFloat16Tensor"]


@pytest.mark.parametrize("name", LEGACY)
def test_legacy_typed_constructors(name):
    T, K = getattr(torch, name), getattr(kiln, name)
    same(K([1, 0, 2]), T([1, 0, 2]))
    same(K([[1, 0], [2, 3]]), T([[1, 0], [2, 3]]))
    same(K(), T())
    for k, t in ((K(2, 3), T(2, 3)), (K(kiln.Size([4])), T(torch.Size([4]))), (K(0), T(0))):
        assert tuple(k.shape) == tuple(t.shape)
        assert dname(k.dtype) == dname(t.dtype)
    k, t = K([1, 2]), T([1, 2])
    assert isinstance(k, kiln.Tensor) and isinstance(t, torch.Tensor)
    assert type(k) is kiln.Tensor and type(t) is torch.Tensor
    assert k.type() == t.type().replace("torch.", "kiln.") == "kiln." + name


def test_legacy_data_conversion():
    same(kiln.LongTensor([1.7, -1.7]), torch.LongTensor([1.7, -1.7]))   # truncated, no error
    same(kiln.BoolTensor([0, 2, 0.5]), torch.BoolTensor([0, 2, 0.5]))
    assert isinstance(kiln.FloatTensor([1.0]), kiln.Tensor) and isinstance(torch.FloatTensor([1.0]), torch.Tensor)


def test_legacy_isinstance_by_dtype():
    # torch's legacy classes test the dtype: isinstance(torch.ones(2), torch.FloatTensor) is True
    for shape_dt, name in (("float32", "FloatTensor"), ("float64", "DoubleTensor"), ("int64", "LongTensor")):
        t = make((2,), shape_dt)
        k = to_kiln(t)
        for other in ("FloatTensor", "DoubleTensor", "LongTensor"):
            assert isinstance(k, getattr(kiln, other)) == isinstance(t, getattr(torch, other)) == (other == name)


TYPE_DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
               "complex64", "complex128"]


@pytest.mark.parametrize("dt", TYPE_DTYPES)
def test_type_string(dt):
    t = make((2,), dt)
    assert to_kiln(t).type() == t.type().replace("torch.", "kiln.")
    assert to_kiln(t[0]).type() == t[0].type().replace("torch.", "kiln.")   # 0-dim


def test_type_conversion():
    t = torch.arange(6.0).reshape(2, 3).t() * 1.25
    k = to_kiln(t)
    same(k.type(kiln.float64), t.type(torch.float64))
    same(k.type(kiln.int64), t.type(torch.int64))
    same(k.type("kiln.DoubleTensor"), t.type("torch.DoubleTensor"))
    same(k.type("torch.DoubleTensor"), t.type("torch.DoubleTensor"))   # torch's spelling is accepted too
    same(k.type("kiln.LongTensor"), t.type("torch.LongTensor"))
    same(k.type(kiln.DoubleTensor), t.type(torch.DoubleTensor))
    same(k.type(kiln.HalfTensor), t.type(torch.HalfTensor))
    # the same type: self itself
    assert t.type(torch.float32) is t and k.type(kiln.float32) is k
    assert t.type("torch.FloatTensor") is t and k.type("kiln.FloatTensor") is k


def test_type_invalid_string():
    both_raise(ValueError, lambda m, x: x.type("foo"), torch.ones(2))
    both_raise(ValueError, lambda m, x: x.type("FloatTensorz"), torch.ones(2))


# ---------------------------------------------------------------------------------------------------
# 3. storages, share_memory_
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_untyped_storage_shared_by_views(dt):
    res = {}
    for lib in (torch, kiln):
        x = lib_t(lib, make((3, 4), dt))
        v = x.t()[1:]
        s, sv = x.untyped_storage(), v.untyped_storage()
        assert sv.data_ptr() == s.data_ptr()
        assert sv.nbytes() == s.nbytes() and sv.size() == s.size() and len(s) == s.nbytes()
        res[lib] = (s.nbytes(), s.size(), v.data_ptr() - x.data_ptr(), v.storage_offset())
    assert res[kiln] == res[torch]


def test_untyped_storage_sizes():
    long3 = torch.ones(3, dtype=torch.int64)
    for t, k in ((torch.empty(0), to_kiln(torch.empty(0))), (torch.tensor(5.0), to_kiln(torch.tensor(5.0))),
                 (long3[1:], to_kiln(long3)[1:]),
                 (torch.ones(2, 3, dtype=torch.float16), to_kiln(torch.ones(2, 3, dtype=torch.float16)))):
        assert k.untyped_storage().nbytes() == t.untyped_storage().nbytes()
        assert k.untyped_storage().size() == t.untyped_storage().size()


@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_typed_storage(dt):
    t = make((3, 4), dt)
    k = to_kiln(t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts, tvs = t.storage(), t.t()[1:].storage()
    ks, kvs = k.storage(), k.t()[1:].storage()
    assert ks.size() == ts.size() == 12 and len(ks) == len(ts)
    assert kvs.size() == tvs.size() == 12                                   # a view sees the whole storage
    assert dname(ks.dtype) == dname(ts.dtype) == dt
    assert ks.tolist() == ts.tolist()
    assert kvs.tolist() == tvs.tolist()


def test_share_memory():
    t = torch.arange(4.0)
    k = to_kiln(t)
    assert k.is_shared() is t.is_shared() is False
    tr, kr = t.share_memory_(), k.share_memory_()
    assert tr is t and kr is k
    assert k.is_shared() is t.is_shared() is True
    same(k, t)


# ---------------------------------------------------------------------------------------------------
# 4. as_subclass, subclasses, __torch_function__ / __kiln_function__
# ---------------------------------------------------------------------------------------------------
def _plain_subclass(lib):
    return type("MyT", (lib.Tensor,), {})


def test_as_subclass_shares_data():
    base = torch.arange(4.0)
    for lib in (torch, kiln):
        MyT = _plain_subclass(lib)
        x = lib_t(lib, base.clone())
        y = x.as_subclass(MyT)
        assert type(y) is MyT and isinstance(y, lib.Tensor)
        assert y.data_ptr() == x.data_ptr()
        y.mul_(3)                                       # an in-place write shows through x
        assert type(x) is lib.Tensor
        z = y.as_subclass(lib.Tensor)
        assert type(z) is lib.Tensor
    t = torch.arange(4.0)
    k = to_kiln(t)
    _ = t.as_subclass(_plain_subclass(torch)).mul_(3), k.as_subclass(_plain_subclass(kiln)).mul_(3)
    same(k, t)


def test_as_subclass_non_tensor_class_raises():
    both_raise(TypeError, lambda m, x: x.as_subclass(int), torch.ones(2))


def test_subclass_results_keep_the_subclass():
    base = rand((2, 3), "float32")
    names = {}
    for lib in (torch, kiln):
        MyT = _plain_subclass(lib)
        y = lib_t(lib, base).as_subclass(MyT)
        res = {"y + 1": y + 1, "add(y, y)": lib.add(y, y), "y.sum()": y.sum(), "y * 2": y * 2,
               "y.t()": y.t(), "y.clone()": y.clone(), "y.exp()": y.exp(), "ones + y": lib.ones(3) + y}
        names[lib] = {n: type(r).__name__ for n, r in res.items()}
        assert all(type(r) is MyT for r in res.values()), names[lib]
        if lib is kiln:
            same(res["y + 1"].as_subclass(kiln.Tensor), base + 1)
            same(res["y.sum()"].as_subclass(kiln.Tensor), base.sum(), **F32)
    assert names[kiln] == names[torch]


def _hooked_subclass(lib, hook, calls):
    def handler(cls, func, types, args=(), kwargs=None):
        calls.append((func.__name__, types, args, kwargs))
        return ("handled", func.__name__)
    return type("Hooked", (lib.Tensor,), {hook: classmethod(handler)})


@pytest.mark.parametrize("hook", ["__torch_function__", "__kiln_function__"])
def test_subclass_function_hook_intercepts(hook):
    results = {}
    for lib in (torch, kiln):
        calls = []
        H = _hooked_subclass(lib, "__torch_function__" if lib is torch else hook, calls)
        y = lib_t(lib, torch.ones(3)).as_subclass(H)
        r1 = lib.add(y, 1)
        assert len(calls) == 1
        name, types, args, kwargs = calls[-1]
        assert H in types and args[0] is y and args[1] == 1 and len(args) == 2 and not kwargs
        r2 = y.mul(2)
        assert len(calls) == 2
        name2, types2, args2, kwargs2 = calls[-1]
        assert H in types2 and args2[0] is y and args2[1] == 2 and not kwargs2
        r3 = lib.add(y, 1, alpha=2)
        assert calls[-1][3] == {"alpha": 2}
        results[lib] = (r1, r2, r3, name, name2)
    assert results[kiln] == results[torch] == (("handled", "add"), ("handled", "mul"), ("handled", "add"), "add", "mul")


def _forwarding_subclass(lib, calls):
    class Fwd(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            calls.append(func.__name__)
            return super().__torch_function__(func, types, args, kwargs or {})
    return Fwd


def test_subclass_torch_function_forwards_to_default():
    base = rand((3,), "float32")
    out = {}
    for lib in (torch, kiln):
        calls = []
        Fwd = _forwarding_subclass(lib, calls)
        y = lib_t(lib, base).as_subclass(Fwd)
        r = lib.add(y, 1, alpha=2)
        assert calls[0] == "add" and type(r) is Fwd
        calls.clear()
        m = y.mul(2)
        assert calls[0] == "mul" and type(m) is Fwd
        out[lib] = (r, m)
    same(out[kiln][0].as_subclass(kiln.Tensor), out[torch][0].as_subclass(torch.Tensor))
    same(out[kiln][1].as_subclass(kiln.Tensor), out[torch][1].as_subclass(torch.Tensor))


@pytest.mark.parametrize("hook", ["__torch_function__", "__kiln_function__"])
def test_subclass_hook_not_implemented_raises_type_error(hook):
    def handler(cls, func, types, args=(), kwargs=None):
        return NotImplemented
    for lib in (torch, kiln):
        NI = type("NI", (lib.Tensor,), {("__torch_function__" if lib is torch else hook): classmethod(handler)})
        y = lib_t(lib, torch.ones(2)).as_subclass(NI)
        with pytest.raises(TypeError):
            lib.add(y, 1)
        with pytest.raises(TypeError):
            y.mul(2)


def test_non_tensor_class_with_torch_function_is_dispatched():
    for lib in (torch, kiln):
        calls = []

        class Dummy:
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                calls.append((func.__name__, types, args, kwargs))
                return "dummy:" + func.__name__

        d = Dummy()
        assert lib.add(d, 1) == "dummy:add"
        assert calls[-1][0] == "add" and Dummy in calls[-1][1] and calls[-1][2][0] is d and calls[-1][2][1] == 1
        assert lib.add(lib.ones(1), d) == "dummy:add"                # in any argument position
        assert calls[-1][2][1] is d

        class NotImpl:
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return NotImplemented

        with pytest.raises(TypeError):
            lib.add(NotImpl(), 1)
        with pytest.raises(TypeError):
            lib.add(object(), 1)


# ---------------------------------------------------------------------------------------------------
# 5. where(cond)
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cond", [
    torch.tensor([[True, False], [False, True]]),
    torch.tensor([0.0, 1.5, 0.0, -2.0]),
    torch.tensor([[0, 1, 3], [2, 0, 0]]).t(),           # non-contiguous int
    torch.tensor(True), torch.tensor(0.0),              # 0-dim
    torch.zeros(0, 3), torch.zeros(2, 0, dtype=torch.bool),
    make((3, 4, 5), "int64", -1, 1)[:, ::2],             # sliced 3-d
], ids=lambda c: f"{dname(c.dtype)}{tuple(c.shape)}")
def test_where_one_argument(cond):
    kres, tres = both(lambda m, c: m.where(c), cond)
    assert isinstance(kres, tuple) and isinstance(tres, tuple)


# ---------------------------------------------------------------------------------------------------
# 6. clamp_min / clamp_max
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_clamp_min_max_values(dt):
    x = make((4, 5), dt, -3, 3)
    for xs in (x, x.t(), x[::2, 1:], x[0, 0], x[:0]):
        both(lambda m, a: m.clamp_min(a, 0.5), xs)
        both(lambda m, a: m.clamp_max(a, 1), xs)
        both(lambda m, a: a.clamp_min(-1), xs)
        both(lambda m, a: a.clamp_max(-1.5), xs)                  # int64 with a float bound: promotes like torch
        b = make(tuple(xs.shape), dt, -2, 2, seed=5)
        both(lambda m, a, b: m.clamp_min(a, b), xs, b)
        both(lambda m, a, b: m.clamp_max(a, b), xs, b)
        both(lambda m, a, b: a.clamp_max(b), xs, b)
    both(lambda m, a, b: m.clamp_min(a, b), x, make((5,), dt, -2, 2, seed=6))        # broadcast bound
    both(lambda m, a, b: m.clamp_min(a, b), x, torch.tensor(1.5))                    # 0-dim float bound


def test_clamp_min_max_nan_and_bool():
    x = torch.tensor([1.0, float("nan"), 3.0])
    both(lambda m, a: m.clamp_min(a, 2.0), x)
    both(lambda m, a: m.clamp_max(a, float("nan")), x)
    both(lambda m, a: m.clamp_min(a, 0), torch.tensor([True, False]))


@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_clamp_min_max_inplace(dt):
    x = make((3, 4), dt, -3, 3)
    for op, bound in (("clamp_min_", 1), ("clamp_max_", -1)):
        t, k = x.clone().t(), to_kiln(x.clone()).t()
        tr, kr = getattr(t, op)(bound), getattr(k, op)(bound)
        assert tr is t and kr is k
        same(k, t)
        b = make((4, 3), dt, -2, 2, seed=3)
        t2, k2 = x.clone().t(), to_kiln(x.clone()).t()
        getattr(t2, op)(b)
        getattr(k2, op)(to_kiln(b))
        same(k2, t2)
    # int64 in place with a float bound: the float result cannot be cast back
    both_raise(RuntimeError, lambda m, a: a.clamp_min_(2.5), torch.tensor([1, 5, -3]))
    both_raise(RuntimeError, lambda m, a, b: a.clamp_min_(b), torch.tensor([1, 5, -3]), torch.tensor([0.0, 2.0, 3.0]))


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_clamp_min_max_grads(dt):
    x = torch.tensor([[-1.0, 0.2, 0.5, 2.0], [0.7, 0.5, -0.3, 1.0]], dtype=tdt(dt))   # ties at the bound
    b = torch.tensor([[0.0, 0.2, 1.0, 1.0], [0.5, 0.6, -0.3, 0.0]], dtype=tdt(dt))
    check_grads(lambda m, a: m.clamp_min(a, 0.5), x)
    check_grads(lambda m, a: m.clamp_max(a, 0.5), x)
    check_grads(lambda m, a: a.clamp_min(0.5), x.t())
    check_grads(lambda m, a, c: m.clamp_min(a, c), x, b)
    check_grads(lambda m, a, c: m.clamp_max(a, c), x, b)
    check_grads(lambda m, a, c: m.clamp_min(a, c), x, b[0])


# ---------------------------------------------------------------------------------------------------
# 7. block_diag, cartesian_prod, tril/triu_indices, cdist, cov, corrcoef, diff, trapezoid
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_block_diag(dt):
    a0, a1, a2 = make((), dt, seed=1), make((3,), dt, seed=2), make((2, 3), dt, seed=3)
    both(lambda m, *ts: m.block_diag(*ts), a0, a1, a2)
    both(lambda m, *ts: m.block_diag(*ts), a2.t(), a0)                         # non-contiguous
    both(lambda m, *ts: m.block_diag(*ts), make((3, 4), dt)[::2, 1:])
    both(lambda m, *ts: m.block_diag(*ts), a1)
    both(lambda m, *ts: m.block_diag(*ts), torch.zeros(0, 2, dtype=tdt(dt)), a2)  # empty inputs
    both(lambda m, *ts: m.block_diag(*ts), torch.zeros(2, 0, dtype=tdt(dt)), a0)
    both(lambda m, *ts: m.block_diag(*ts), torch.zeros(0, dtype=tdt(dt)))
    both(lambda m: m.block_diag())


def test_block_diag_dtype_promotion():
    both(lambda m, *ts: m.block_diag(*ts), torch.tensor([1, 2]), torch.ones(1, 2, dtype=torch.float64))
    both(lambda m, *ts: m.block_diag(*ts), torch.tensor([1, 2], dtype=torch.int32), torch.tensor([True]))
    both(lambda m, *ts: m.block_diag(*ts), torch.tensor([3], dtype=torch.int8), torch.tensor([200], dtype=torch.uint8))
    # 0-dim inputs weigh less than dimensioned ones of the same category (result_type rules)
    both(lambda m, *ts: m.block_diag(*ts), torch.tensor(3, dtype=torch.int8), torch.tensor([200], dtype=torch.uint8))
    both(lambda m, *ts: m.block_diag(*ts), torch.tensor(3.5, dtype=torch.float64), torch.tensor([2.0]))
    both(lambda m, *ts: m.block_diag(*ts), torch.tensor(3.5, dtype=torch.float64), torch.tensor([2], dtype=torch.int32))
    both(lambda m, *ts: m.block_diag(*ts), torch.ones(1), torch.ones(1, dtype=torch.int64), torch.tensor(True))
    both(lambda m, *ts: m.block_diag(*ts), torch.ones(1, dtype=torch.float16), torch.ones(1, dtype=torch.bfloat16))


def test_block_diag_errors_and_grads():
    both_raise(RuntimeError, lambda m, a: m.block_diag(a), torch.ones(2, 2, 2))
    both_raise(RuntimeError, lambda m, a, b: m.block_diag(a, b), torch.ones(2), torch.ones(2, 2, 2))
    check_grads(lambda m, a, b, c: m.block_diag(a, b, c), rand((2, 2)), rand((3,), seed=1), rand((), seed=2))
    check_grads(lambda m, a, b: m.block_diag(a, b), rand((3, 2)).t(), rand((1, 4), seed=1))
    check_grads(lambda m, a, b: m.block_diag(a, b), rand((2, 2), "float32"), rand((3,), "float32", seed=1))


@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_cartesian_prod(dt):
    a, b, c = make((3,), dt, seed=1), make((2,), dt, seed=2), make((4,), dt, seed=3)
    both(lambda m, *ts: m.cartesian_prod(*ts), a)
    both(lambda m, *ts: m.cartesian_prod(*ts), a, b)
    both(lambda m, *ts: m.cartesian_prod(*ts), a, b, c)
    both(lambda m, *ts: m.cartesian_prod(*ts), make((6,), dt)[::2], b)          # strided input
    both(lambda m, *ts: m.cartesian_prod(*ts), a, torch.zeros(0, dtype=tdt(dt)))
    if dt != "int64":
        check_grads(lambda m, x, y: m.cartesian_prod(x, y), a, b, **tol(dt))


def test_cartesian_prod_errors():
    both_raise(RuntimeError, lambda m, a: m.cartesian_prod(a), torch.ones(2, 2))
    both_raise(RuntimeError, lambda m, a, b: m.cartesian_prod(a, b), torch.ones(2), torch.ones(2, 2))
    both_raise(RuntimeError, lambda m, a: m.cartesian_prod(a), torch.tensor(1.0))
    both_raise(RuntimeError, lambda m, a, b: m.cartesian_prod(a, b), torch.tensor([1, 2]), torch.tensor([4.0]))
    both_raise(RuntimeError, lambda m: m.cartesian_prod())


@pytest.mark.parametrize("fn", ["tril_indices", "triu_indices"])
@pytest.mark.parametrize("rc", [(3, 3), (3, 4), (4, 3), (1, 5), (0, 3), (3, 0), (5, 5)])
@pytest.mark.parametrize("offset", [0, 1, 2, -1, -2, -10, 10])
def test_tril_triu_indices(fn, rc, offset):
    both(lambda m: getattr(m, fn)(*rc, offset))
    both(lambda m: getattr(m, fn)(rc[0], rc[1], offset=offset))


@pytest.mark.parametrize("fn", ["tril_indices", "triu_indices"])
def test_tril_triu_indices_dtype_and_errors(fn):
    both(lambda m: getattr(m, fn)(3, 4))
    both(lambda m: getattr(m, fn)(3, 4, 1, dtype=m.int32))
    both(lambda m: getattr(m, fn)(4, 3, -1, dtype=m.int64))
    both_raise(RuntimeError, lambda m: getattr(m, fn)(-1, 3))
    both_raise(RuntimeError, lambda m: getattr(m, fn)(3, -1))
    both_raise(NotImplementedError, lambda m: getattr(m, fn)(3, 3, dtype=m.float32))
    both_raise(NotImplementedError, lambda m: getattr(m, fn)(3, 3, dtype=m.int16))
    both_raise(NotImplementedError, lambda m: getattr(m, fn)(3, 3, dtype=m.bool))
    both_raise(TypeError, lambda m: getattr(m, fn)(3.5, 3))
    both_raise(TypeError, lambda m: getattr(m, fn)(3))


@pytest.mark.parametrize("fn,args,raises", [
    # more pairs than a storage can hold: torch's RuntimeError at once (kiln counts before it allocates)
    ("tril_indices", (2**31, 2**31), True), ("triu_indices", (2**31, 2**31), True),
    ("tril_indices", (2**62, 1), True), ("triu_indices", (1, 2**62), True),
    ("triu_indices", (2**31, 2**31, -2**62), True),
    # huge rows, columns or offsets that leave few pairs: the same small result (no walk over empty rows)
    ("triu_indices", (2**62, 2), False), ("tril_indices", (1, 2**62), False), ("triu_indices", (2**62, 1), False),
    ("tril_indices", (2**31, 2**31, -2**62), False), ("tril_indices", (3, 3, 2**62), False),
    ("triu_indices", (3, 3, -2**62), False), ("tril_indices", (2**63 - 1, 3, -2**63 + 5), False),
])
def test_tril_triu_indices_huge(fn, args, raises):
    if raises:
        both_raise(RuntimeError, lambda m: getattr(m, fn)(*args))
    else:
        both(lambda m: getattr(m, fn)(*args))


P_VALUES = [0.0, 1.0, 2.0, 3.0, math.inf, 0.5]


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("p", P_VALUES)
def test_cdist_values(dt, p):
    a, b = rand((5, 4), dt, seed=1), rand((6, 4), dt, seed=2)
    both(lambda m, x, y: m.cdist(x, y, p=p), a, b, **tol(dt))
    both(lambda m, x, y: m.cdist(x, y, p), a, b, **tol(dt))                       # p positional
    both(lambda m, x, y: m.cdist(x, y, p=p), rand((4, 5), dt, seed=3).t(), b, **tol(dt))   # non-contiguous
    both(lambda m, x, y: m.cdist(x, y, p=p), rand((2, 3, 4), dt, seed=4), rand((2, 5, 4), dt, seed=5), **tol(dt))
    both(lambda m, x, y: m.cdist(x, y, p=p), rand((2, 1, 3, 4), dt, seed=4), rand((4, 5, 4), dt, seed=5), **tol(dt))
    both(lambda m, x, y: m.cdist(x, y, p=p), rand((0, 4), dt), b)
    both(lambda m, x, y: m.cdist(x, y, p=p), rand((3, 0), dt), rand((5, 0), dt))


@pytest.mark.parametrize("mode", [None, "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                                  "donot_use_mm_for_euclid_dist"])
def test_cdist_compute_modes(mode):
    kw = {} if mode is None else {"compute_mode": mode}
    # > 25 rows: the "if necessary" mode takes the matrix-product path; float64 keeps its rounding small
    a, b = rand((30, 5), seed=1), rand((27, 5), seed=2)
    both(lambda m, x, y: m.cdist(x, y, **kw), a, b, rtol=1e-7, atol=1e-7)
    both(lambda m, x, y: m.cdist(x, y, p=1.0, **kw), a, b, **F64)                 # modes only matter for p=2
    both(lambda m, x, y: m.cdist(x, y, **kw), rand((2, 3, 5), seed=3), rand((2, 4, 5), seed=4), rtol=1e-7, atol=1e-7)
    both(lambda m, x, y: m.cdist(x, y, **kw), rand((4, 5), "float32", seed=3), rand((3, 5), "float32", seed=4),
         rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0])
def test_cdist_grads(p):
    check_grads(lambda m, x, y: m.cdist(x, y, p=p), rand((4, 3), seed=1), rand((5, 3), seed=2), rtol=1e-7, atol=1e-8)
    check_grads(lambda m, x, y: m.cdist(x, y, p=p), rand((2, 3, 4), seed=3), rand((2, 2, 4), seed=4),
                rtol=1e-7, atol=1e-8)
    check_grads(lambda m, x, y: m.cdist(x, y, p=p, compute_mode="donot_use_mm_for_euclid_dist"),
                rand((3, 4), "float32", seed=5), rand((2, 4), "float32", seed=6), rtol=1e-4, atol=1e-5)


def test_cdist_errors():
    a = rand((3, 4))
    both_raise(RuntimeError, lambda m, x, y: m.cdist(x, y), a, rand((5, 3)))           # last dims differ
    both_raise(RuntimeError, lambda m, x, y: m.cdist(x, y, p=-1.0), a, a)
    both_raise(ValueError, lambda m, x, y: m.cdist(x, y, compute_mode="foo"), a, a)
    both_raise(RuntimeError, lambda m, x, y: m.cdist(x, y), rand((4,)), rand((4,)))
    both_raise(RuntimeError, lambda m, x, y: m.cdist(x, y), torch.ones(3, 4, dtype=torch.int64),
               torch.ones(3, 4, dtype=torch.int64))
    both_raise(RuntimeError, lambda m, x, y: m.cdist(x, y), rand((3, 4), "float32"), a)  # mixed dtypes
    both_raise(RuntimeError, lambda m, x, y: m.cdist(x, y), rand((2, 3, 4)), rand((3, 5, 4)))


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_cov_values(dt):
    x = rand((3, 6), dt, seed=1)
    fw = torch.tensor([1, 2, 1, 3, 0, 2])
    aw = torch.rand(6, generator=torch.Generator().manual_seed(2)).to(tdt(dt)) + 0.1
    for xs in (x, rand((6, 3), dt, seed=1).t(), x[:, ::2]):
        for corr in (0, 1, 2):
            both(lambda m, a: m.cov(a, correction=corr), xs, **tol(dt))
        n = xs.shape[1]
        both(lambda m, a, f: m.cov(a, fweights=f), xs, fw[:n], **tol(dt))
        both(lambda m, a, w: m.cov(a, aweights=w), xs, aw[:n], **tol(dt))
        both(lambda m, a, f, w: m.cov(a, correction=0, fweights=f, aweights=w), xs, fw[:n], aw[:n], **tol(dt))
    both(lambda m, a: m.cov(a), rand((5,), dt), **tol(dt))                               # 1-d input
    both(lambda m, a: m.cov(a), rand((1, 5), dt), **tol(dt))
    both(lambda m, a: m.cov(a), torch.tensor([[1, 2, 4], [3, 1, 2]]), **F32)          # int64 -> float32
    both(lambda m, a: m.cov(a), torch.tensor([[1, 2, 4], [3, 1, 2]], dtype=torch.int32), **F32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                                                 # degrees of freedom <= 0
        both(lambda m, a: m.cov(a), torch.tensor([[1.0], [2.0]], dtype=tdt(dt)))          # nan
        both(lambda m, a: m.cov(a, correction=5), torch.tensor([[1.0, 2.0], [2.0, 5.0]], dtype=tdt(dt)))  # inf
        both(lambda m, a: m.cov(a), torch.zeros(2, 0, dtype=tdt(dt)))
        both(lambda m, a: m.cov(a), torch.zeros(0, 3, dtype=tdt(dt)))


def test_cov_errors():
    x = rand((3, 4))
    both_raise(RuntimeError, lambda m, a: m.cov(a), torch.ones(2, 2, 2))
    both_raise(RuntimeError, lambda m, a: m.cov(a), torch.tensor([[True, False], [False, False]]))
    both_raise(RuntimeError, lambda m, a, f: m.cov(a, fweights=f), x, torch.tensor([1.0, 1, 1, 1]))
    both_raise(RuntimeError, lambda m, a, f: m.cov(a, fweights=f), x, torch.tensor([1, -1, 1, 1]))
    both_raise(RuntimeError, lambda m, a, f: m.cov(a, fweights=f), x, torch.tensor([1, 1, 1]))
    both_raise(RuntimeError, lambda m, a, f: m.cov(a, fweights=f), x, torch.tensor([[1, 1, 1, 1]]))
    both_raise(RuntimeError, lambda m, a, w: m.cov(a, aweights=w), x, torch.tensor([1, 1, 1, 1]))
    f64 = dict(dtype=torch.float64)
    both_raise(RuntimeError, lambda m, a, w: m.cov(a, aweights=w), x, torch.tensor([1.0, -1.0, 1.0, 1.0], **f64))
    both_raise(RuntimeError, lambda m, a, w: m.cov(a, aweights=w), x, torch.tensor([1.0, 1.0, 1.0], **f64))


def test_cov_corrcoef_grads():
    x = rand((3, 5), seed=1)
    aw = torch.rand(5, dtype=torch.float64, generator=torch.Generator().manual_seed(3)) + 0.1
    fw = torch.tensor([1, 2, 1, 1, 3])
    check_grads(lambda m, a: m.cov(a), x, **F64)
    check_grads(lambda m, a: m.cov(a, correction=0), x.t().contiguous().t(), **F64)
    check_grads(lambda m, a, w, f: m.cov(a, aweights=w, fweights=f), x, aw, fw, **F64)   # grads for x and aweights
    check_grads(lambda m, a: m.cov(a), rand((6,), seed=2), **F64)
    check_grads(lambda m, a: m.corrcoef(a), x, **F64)
    check_grads(lambda m, a: m.cov(a, correction=2), rand((2, 5), "float32", seed=4), **F32)


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_corrcoef_values(dt):
    x = rand((4, 7), dt, seed=1)
    both(lambda m, a: m.corrcoef(a), x, **tol(dt))
    both(lambda m, a: m.corrcoef(a), rand((7, 4), dt, seed=2).t(), **tol(dt))
    both(lambda m, a: m.corrcoef(a), rand((7,), dt, seed=3), **tol(dt))
    # a constant row: nan
    both(lambda m, a: m.corrcoef(a), torch.tensor([[1.0, 2, 4], [3, 3, 3]], dtype=tdt(dt)), **tol(dt))
    both(lambda m, a: m.corrcoef(a), torch.tensor([1, 2, 4]), **F32)                 # int -> float32
    both(lambda m, a: m.corrcoef(a), torch.tensor([[1, 2, 4], [3, 1, 2]]), **F32)
    both_raise(RuntimeError, lambda m, a: m.corrcoef(a), torch.ones(2, 2, 2))


@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_diff_values(dt):
    x = make((3, 5), dt, -4, 4, seed=1)
    for xs in (x, make((5, 3), dt, -4, 4, seed=2).t(), x[:, ::2]):
        both(lambda m, a: m.diff(a), xs)
        both(lambda m, a: a.diff(n=2), xs)
        both(lambda m, a: m.diff(a, dim=0), xs)
        both(lambda m, a: m.diff(a, n=2, dim=-2), xs)
        both(lambda m, a: m.diff(a, n=0), xs)
        both(lambda m, a: m.diff(a, n=7), xs)                                     # n >= size: empty along dim
    pre, app = make((3, 2), dt, seed=3), make((3, 1), dt, seed=4)
    both(lambda m, a, p, q: m.diff(a, prepend=p, append=q), x, pre, app)
    both(lambda m, a, p: m.diff(a, n=3, prepend=p), x, pre)
    both(lambda m, a, q: m.diff(a, dim=0, append=q), x, make((2, 5), dt, seed=5))
    both(lambda m, a: m.diff(a), make((6,), dt))
    both(lambda m, a: m.diff(a), torch.zeros(0, dtype=tdt(dt)))


def test_diff_bool_and_promotion():
    both(lambda m, a: m.diff(a), torch.tensor([True, False, False, True]))            # logical_xor
    both(lambda m, a: m.diff(a, n=2), torch.tensor([[True, False, True], [True, True, False]]))
    both(lambda m, a: m.diff(a), torch.tensor([1, 4, 9], dtype=torch.uint8))
    both(lambda m, a, p: m.diff(a, prepend=p), torch.tensor([1.0, 2.0]), torch.tensor([5, 6]))
    both(lambda m, a, p: m.diff(a, prepend=p), torch.tensor([1, 2]), torch.tensor([5.5]))


def test_diff_errors():
    x = rand((3, 4))
    both_raise(RuntimeError, lambda m, a: m.diff(a), torch.tensor(3.0))
    both_raise(RuntimeError, lambda m, a: m.diff(a, n=-1), x)
    both_raise(IndexError, lambda m, a: m.diff(a, dim=2), x)
    both_raise(RuntimeError, lambda m, a, p: m.diff(a, prepend=p), x, torch.tensor(0.0))
    both_raise(RuntimeError, lambda m, a, p: m.diff(a, dim=1, prepend=p), x, torch.zeros(2, 1, dtype=torch.float64))


def test_diff_grads():
    x = rand((3, 5), seed=1)
    check_grads(lambda m, a: m.diff(a), x, **F64)
    check_grads(lambda m, a: m.diff(a, n=2, dim=0), x.t(), **F64)
    check_grads(lambda m, a, p, q: m.diff(a, n=2, prepend=p, append=q), x, rand((3, 2), seed=2), rand((3, 1), seed=3),
                **F64)
    check_grads(lambda m, a: m.diff(a, n=3), rand((7,), "float32"), **F32)


@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_trapezoid_values(dt):
    y = make((3, 5), dt, -4, 4, seed=1)
    xs1 = torch.tensor([0.0, 1, 3, 6, 6.5], dtype=torch.float64 if dt == "float64" else torch.float32)
    xsame = torch.sort(rand((3, 5), "float64" if dt == "float64" else "float32", seed=2), dim=-1).values
    for fn in ("trapezoid", "cumulative_trapezoid"):
        for ys in (y, make((5, 3), dt, -4, 4, seed=3).t(), y[:, ::2]):
            both(lambda m, a: getattr(m, fn)(a), ys, **F32)
            both(lambda m, a: getattr(m, fn)(a, dx=0.5), ys, **F32)
            both(lambda m, a: getattr(m, fn)(a, dx=2, dim=0), ys, **F32)
        both(lambda m, a, x: getattr(m, fn)(a, x), y, xs1, **F32)                     # x positional
        both(lambda m, a, x: getattr(m, fn)(a, x=x), y, xs1, **F32)
        both(lambda m, a, x: getattr(m, fn)(a, x=x), y, xsame, **F32)                 # same-shape x
        both(lambda m, a, x: getattr(m, fn)(a, x=x, dim=0), y, xs1[:3], **F32)
        both(lambda m, a, x: getattr(m, fn)(a, x=x), y, torch.tensor([0, 1, 3, 6, 7]), **F32)   # integer x
        both(lambda m, a: getattr(m, fn)(a), make((1,), dt), **F32)
        both(lambda m, a: getattr(m, fn)(a), torch.zeros(0, dtype=tdt(dt)))
        both(lambda m, a: getattr(m, fn)(a), torch.zeros(2, 0, dtype=tdt(dt)))


def test_trapezoid_errors():
    y = rand((3, 5))
    for fn in ("trapezoid", "cumulative_trapezoid"):
        both_raise(RuntimeError, lambda m, a, x: getattr(m, fn)(a, x=x), y,
                   torch.tensor([0.0, 1, 2], dtype=torch.float64))
        both_raise(RuntimeError, lambda m, a: getattr(m, fn)(a), torch.tensor([True, False]))
        both_raise(IndexError, lambda m, a: getattr(m, fn)(a, dim=2), y)
        both_raise(IndexError, lambda m, a: getattr(m, fn)(a), torch.tensor(3.0))
    both_raise(TypeError, lambda m, a, x: m.trapezoid(a, x=x, dx=1.0), y, torch.arange(5.0, dtype=torch.float64))


def test_trapezoid_grads():
    y = rand((3, 5), seed=1)
    x1 = torch.tensor([0.0, 1.0, 2.5, 3.0, 5.0], dtype=torch.float64)
    xsame = torch.sort(rand((3, 5), seed=2), dim=-1).values
    for fn in ("trapezoid", "cumulative_trapezoid"):
        check_grads(lambda m, a: getattr(m, fn)(a), y, **F64)
        check_grads(lambda m, a: getattr(m, fn)(a, dx=0.5, dim=0), y.t(), **F64)
        check_grads(lambda m, a, x: getattr(m, fn)(a, x), y, x1, **F64)                # grads for y and x
        check_grads(lambda m, a, x: getattr(m, fn)(a, x=x), y, xsame, **F64)
        check_grads(lambda m, a, x: getattr(m, fn)(a, x=x), rand((3, 5), "float32"), x1.float(), **F32)


# ---------------------------------------------------------------------------------------------------
# 8. finfo / iinfo
# ---------------------------------------------------------------------------------------------------
FINFO_ATTRS = ["bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"]


@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32", "float64", "complex64", "complex128", "float8_e4m3fn",
                                "float8_e5m2"])
def test_finfo(dt):
    kf, tf = kiln.finfo(kdt(dt)), torch.finfo(tdt(dt))
    for a in FINFO_ATTRS:
        assert getattr(kf, a) == getattr(tf, a), f"{dt}.{a}: {getattr(kf, a)!r} != {getattr(tf, a)!r}"
        assert type(getattr(kf, a)) is type(getattr(tf, a)), a


def test_finfo_default():
    kf, tf = kiln.finfo(), torch.finfo()
    for a in FINFO_ATTRS:
        assert getattr(kf, a) == getattr(tf, a), a
    assert kf.dtype == "float32"


@pytest.mark.parametrize("dt", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo(dt):
    ki, ti = kiln.iinfo(kdt(dt)), torch.iinfo(tdt(dt))
    for a in ("bits", "min", "max", "dtype"):
        assert getattr(ki, a) == getattr(ti, a), a
        assert type(getattr(ki, a)) is type(getattr(ti, a)), a


def test_finfo_iinfo_errors():
    for lib in (torch, kiln):
        for bad in (lambda: lib.iinfo(lib.float32), lambda: lib.iinfo(lib.bool), lambda: lib.finfo(lib.int64),
                    lambda: lib.finfo(lib.bool), lambda: lib.finfo("float32")):
            with pytest.raises(TypeError):
                bad()


# ---------------------------------------------------------------------------------------------------
# 9. kiln.Size
# ---------------------------------------------------------------------------------------------------
def test_size():
    t = torch.ones(2, 3)
    k = to_kiln(t)
    for lib, x in ((torch, t), (kiln, k)):
        s = x.shape
        assert type(s) is lib.Size and isinstance(s, tuple)
        assert type(x.size()) is lib.Size and x.size() == s and x.size(1) == 3
        assert s == (2, 3) and (2, 3) == s and s == lib.Size([2, 3]) and s != (2, 4) and s != [2, 3]
        assert hash(s) == hash((2, 3)) and len(s) == 2 and list(s) == [2, 3] and type(s[0]) is int
        assert type(s[1:]) is lib.Size and s[1:] == (3,)
        assert type(s + (4,)) is lib.Size and s + (4,) == (2, 3, 4)
        assert lib.Size([2, 3]).numel() == 6 and lib.Size([]).numel() == 1 and lib.Size([2, 0]).numel() == 0
        assert lib.Size((2, 3)) == (2, 3) and lib.Size() == ()
        assert lib.Size([lib.tensor(3)]) == (3,)
        with pytest.raises(TypeError):
            lib.Size([2.5])
        with pytest.raises(TypeError):
            lib.Size(["a"])
    for args in ([2, 3], [], [5], [0, 1, 2]):
        assert repr(kiln.Size(args)) == repr(torch.Size(args)).replace("torch", "kiln")
        assert str(kiln.Size(args)) == str(torch.Size(args)).replace("torch", "kiln")
    assert repr(kiln.Size([2, 3])) == "kiln.Size([2, 3])"


# ---------------------------------------------------------------------------------------------------
# 10. kiln.testing.assert_close
# ---------------------------------------------------------------------------------------------------
_x = torch.tensor([1.0, 2.0, 3.0])
_nan = torch.tensor([float("nan"), 1.0])
CLOSE_CASES = [
    ("equal", _x, _x.clone(), {}),
    ("within default tol", _x, _x + 1e-7, {}),
    ("beyond default tol", _x, _x + 1e-3, {}),
    ("rtol", _x, _x + 1e-3, dict(rtol=1e-3, atol=0.0)),
    ("atol partly", _x, _x + 1e-3, dict(rtol=0.0, atol=1e-3)),
    ("atol tight", _x, _x + 1e-3, dict(rtol=0.0, atol=1e-4)),
    ("only rtol", _x, _x, dict(rtol=1e-3)),
    ("dtype", _x, _x.double(), {}),
    ("dtype unchecked", _x, _x.double(), dict(check_dtype=False)),
    ("shape", _x, _x[:2], {}),
    ("shape 2", _x, _x.reshape(3, 1), {}),
    ("nan", _nan, _nan.clone(), {}),
    ("equal_nan", _nan, _nan.clone(), dict(equal_nan=True)),
    ("inf", torch.tensor([math.inf]), torch.tensor([math.inf]), {}),
    ("inf sign", torch.tensor([math.inf]), torch.tensor([-math.inf]), {}),
    ("int equal", torch.tensor([1, 2]), torch.tensor([1, 2]), {}),
    ("int differ", torch.tensor([1, 2]), torch.tensor([1, 3]), {}),
    ("bool differ", torch.tensor([True, False]), torch.tensor([True, True]), {}),
    ("0-dim", torch.tensor(1.5), torch.tensor(1.5), {}),
    ("empty", torch.empty(0), torch.empty(0), {}),
    ("non-contiguous", torch.ones(2, 3).t(), torch.ones(3, 2), {}),
    ("float64 tight", _x.double(), _x.double() + 1e-9, {}),
    ("requires_grad", torch.tensor([1.0, 2.0]).requires_grad_(), torch.tensor([1.0, 2.0]), {}),
    ("py float", 1.0, 1.0 + 1e-9, {}),
    ("py float far", 1.0, 1.1, {}),
    ("py int", 1, 1, {}),
    ("py int differ", 1, 2, {}),
    ("py int vs float", 1, 1.0, {}),
    ("nested equal", [_x, {"a": _x, "b": (_x[:2], 2.0)}],
     [_x.clone(), {"a": _x.clone(), "b": (_x[:2].clone(), 2.0)}], {}),
    ("nested differ", [_x, {"a": _x}], [_x.clone(), {"a": _x + 1}], {}),
    ("dict keys", {"a": _x}, {"b": _x}, {}),
    ("seq length", [_x], [_x, _x], {}),
    ("tensor vs list", _x, [1.0, 2.0, 3.0], {}),
    ("tensor vs str", _x, "a", {}),
    ("tensor vs float", torch.tensor(1.0), 1.0, {}),
]


@pytest.mark.parametrize("case", CLOSE_CASES, ids=[c[0] for c in CLOSE_CASES])
def test_assert_close_agrees_with_torch(case):
    _, actual, expected, kw = case
    texc = kexc = None
    try:
        torch.testing.assert_close(actual, expected, **kw)
    except Exception as e:  # noqa: BLE001
        texc = e
    try:
        kiln.testing.assert_close(conv(actual), conv(expected), **kw)
    except Exception as e:  # noqa: BLE001
        kexc = e
    if texc is None:
        assert kexc is None, f"torch passes, kiln raised {type(kexc).__name__}: {kexc}"
    else:
        assert kexc is not None, f"torch raised {type(texc).__name__}({texc}); kiln passed"
        assert type(kexc) is type(texc), f"torch raised {type(texc).__name__}, kiln {type(kexc).__name__}: {kexc}"
        assert str(kexc).strip(), "kiln raised without a message"


def test_assert_close_msg():
    for lib in (torch, kiln):
        with pytest.raises(AssertionError, match="custom message"):
            lib.testing.assert_close(lib.ones(2), lib.zeros(2), msg="custom message")


# ---------------------------------------------------------------------------------------------------
# 11. set_printoptions
# ---------------------------------------------------------------------------------------------------
@pytest.fixture
def default_printoptions():
    torch.set_printoptions(profile="default")
    kiln.set_printoptions(profile="default")
    yield
    torch.set_printoptions(profile="default")
    kiln.set_printoptions(profile="default")


PRINT_TENSORS = [
    torch.tensor([1.123456789, 2.5, -3.25]),
    torch.arange(30.0).reshape(5, 6) * 1.5,
    torch.tensor([1e-5, 1e5, 3.0]),
    torch.arange(2000.0),
    torch.arange(1200),
    torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64),
    torch.arange(10),
    torch.tensor(3.14159),
    torch.zeros(0, 3),
    torch.tensor([True, False, True]),
    torch.arange(24.0).reshape(2, 3, 4) / 7,
    torch.arange(12.0),
]
PRINT_OPTIONS = [
    dict(precision=2), dict(precision=6), dict(threshold=5), dict(threshold=5, edgeitems=1),
    dict(edgeitems=2, threshold=10),
    dict(linewidth=20), dict(linewidth=200), dict(sci_mode=True), dict(sci_mode=False), dict(profile="short"),
    dict(profile="full"), dict(profile="default"), dict(precision=3, sci_mode=False, linewidth=40),
]


def assert_reprs_match():
    for t in PRINT_TENSORS:
        assert repr(to_kiln(t)) == repr(t).replace("torch", "kiln"), f"\nkiln:\n{to_kiln(t)!r}\ntorch:\n{t!r}"


@pytest.mark.parametrize("opts", PRINT_OPTIONS, ids=repr)
def test_set_printoptions(opts, default_printoptions):
    torch.set_printoptions(**opts)
    kiln.set_printoptions(**opts)
    assert_reprs_match()


def test_set_printoptions_accumulate_and_reset(default_printoptions):
    for opts in (dict(precision=2), dict(threshold=5), dict(sci_mode=True)):   # each call keeps the earlier ones
        torch.set_printoptions(**opts)
        kiln.set_printoptions(**opts)
        assert_reprs_match()
    torch.set_printoptions(profile="default")
    kiln.set_printoptions(profile="default")
    assert_reprs_match()
    assert repr(to_kiln(PRINT_TENSORS[0])) == "tensor([ 1.1235,  2.5000, -3.2500])"


# ---------------------------------------------------------------------------------------------------
# 12. backends and deterministic algorithms
# ---------------------------------------------------------------------------------------------------
def test_backends():
    torch_caps = {"DEFAULT", "VSX", "Z VECTOR", "NO AVX", "AVX2", "AVX512", "SVE256"}   # torch.backends.cpu docstring
    assert torch.backends.cpu.get_cpu_capability() in torch_caps
    cap = kiln.backends.cpu.get_cpu_capability()
    assert isinstance(cap, str) and cap in torch_caps
    for lib in (torch, kiln):
        assert type(lib.backends.mkldnn.is_available()) is bool
        assert type(lib.backends.openmp.is_available()) is bool


def test_deterministic_algorithms_round_trip():
    def state(lib):
        return lib.are_deterministic_algorithms_enabled(), lib.is_deterministic_algorithms_warn_only_enabled()

    seen = {}
    for lib in (torch, kiln):
        states = []
        try:
            states.append(state(lib))
            lib.use_deterministic_algorithms(True)
            states.append(state(lib))
            lib.use_deterministic_algorithms(True, warn_only=True)
            states.append(state(lib))
            lib.use_deterministic_algorithms(False, warn_only=True)
            states.append(state(lib))
            lib.use_deterministic_algorithms(False)
            states.append(state(lib))
            for bad in (lambda: lib.use_deterministic_algorithms("yes"), lambda: lib.use_deterministic_algorithms(1),
                        lambda: lib.use_deterministic_algorithms(True, warn_only=1)):
                with pytest.raises(TypeError):
                    bad()
            states.append(state(lib))
        finally:
            lib.use_deterministic_algorithms(False)
        seen[lib] = states
    assert seen[kiln] == seen[torch]
    assert seen[torch][:5] == [(False, False), (True, False), (True, True), (False, True), (False, False)]


def test_shared_memory_is_seen_across_fork():
    """share_memory_(): a forked child's writes reach the parent, as torch's shared storage does (and an
    unshared tensor's do not)."""
    import os
    for lib in (torch, kiln):
        shared, private = lib.zeros(4).share_memory_(), lib.zeros(4)
        pid = os.fork()
        if pid == 0:  # the child: write, leave without running the parent's cleanup
            shared[1] = 5.0
            private[1] = 5.0
            os._exit(0)
        os.waitpid(pid, 0)
        assert shared.is_shared() and shared[1].item() == 5.0, lib.__name__
        assert private[1].item() == 0.0, lib.__name__


# ---------------------------------------------------------------------------------------------------
# heaviside, isin, vander, diagflat, atleast_1d/2d/3d
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_heaviside_values_and_errors(dt):
    x = torch.tensor([-2, 0, 3, 0, -1]).to(tdt(dt))
    v = torch.tensor([7, 8, 9, 10, 11]).to(tdt(dt))
    both(lambda m, a, b: m.heaviside(a, b), x, v)
    both(lambda m, a, b: a.heaviside(b), x.reshape(5, 1), v[:1])           # method, broadcast values
    both(lambda m, a, b: m.heaviside(a, b), x[::2], v[::2])                 # strided
    both_raise(RuntimeError, lambda m, a, b: m.heaviside(a, b), x, v.to(torch.float16))  # dtypes differ


@pytest.mark.parametrize("dt", ["int64", "float32", "float64"])
def test_isin(dt):
    e = make((4, 5), dt, -5, 5, seed=1)
    t = make((7,), dt, -5, 5, seed=2)
    both(lambda m, a, b: m.isin(a, b), e, t)
    both(lambda m, a, b: m.isin(a, b, invert=True), e, t)
    both(lambda m, a, b: m.isin(a, b, assume_unique=True), e[0].unique(), t.unique())
    both(lambda m, a, b: m.isin(a, b), e.t(), t.reshape(7, 1))             # any shapes
    both(lambda m, a, b: m.isin(a, b), e, t[:0])                            # nothing to find
    both(lambda m, a: m.isin(a, 2), e)                                      # a scalar test element
    both(lambda m, b: m.isin(2, b), t)                                      # a scalar element
    both(lambda m, a, b: m.isin(a, b), e, t.to(torch.float64))              # promotion


@pytest.mark.parametrize("dt", ["int64", "float32", "float64"])
def test_vander(dt):
    x = make((4,), dt, -3, 3, seed=3)
    for kw in ({}, dict(N=2), dict(N=6), dict(N=0), dict(increasing=True), dict(N=3, increasing=True)):
        both(lambda m, a, kw=kw: m.vander(a, **kw), x, **F32)
    both(lambda m, a: m.vander(a), x[::2], **F32)
    both_raise(RuntimeError, lambda m, a: m.vander(a), x.reshape(2, 2))
    both_raise(RuntimeError, lambda m, a: m.vander(a, N=-1), x)


def test_diagflat_and_atleast():
    x = make((2, 3), "float32", seed=4)
    for off in (0, 1, -2):
        both(lambda m, a, off=off: m.diagflat(a, off), x)
        both(lambda m, a, off=off: a.diagflat(off), x[0])
    for t in (torch.tensor(1.5), torch.ones(3), torch.ones(2, 3), torch.ones(2, 3, 4), torch.ones(0)):
        for name in ("atleast_1d", "atleast_2d", "atleast_3d"):
            both(lambda m, a, name=name: getattr(m, name)(a), t)
    for name in ("atleast_1d", "atleast_2d", "atleast_3d"):
        both(lambda m, a, b, name=name: getattr(m, name)(a, b), torch.tensor(2.0), torch.ones(3))
        both(lambda m, a, b, name=name: getattr(m, name)([a, b]), torch.tensor(2.0), torch.ones(2, 2))
