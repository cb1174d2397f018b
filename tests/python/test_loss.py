"""Loss functions vs torch: every loss x reduction x option, forward values and the gradients of
every floating input (kiln.autograd.grad vs torch.autograd.grad with the same grad_output), float32
and float64, strided / broadcast / batch-less / spatial / empty inputs, torch's exception types;
kiln.autograd.gradcheck on float64 for each loss, second order for cross_entropy (its fused
cross_entropy_loss_backward op), nll_loss (nll_loss_backward) and mse_loss; ctc_loss_backward is
first order only, like torch's. The loss modules: repr, arguments, buffers, forward."""
import itertools
import warnings

import pytest
import torch
import torch.nn as TN
import torch.nn.functional as TF

import kiln
import kiln.nn.functional as KF
import kiln.nn.loss as KL
from helpers import assert_same, check, make, to_kiln

pytestmark = [pytest.mark.filterwarnings("ignore:Using a target size"),
              pytest.mark.filterwarnings("ignore:reduction. 'mean' divides"),
              pytest.mark.filterwarnings("ignore:size_average and reduce args")]

FN = {torch: TF, kiln: KF}
REDS = ["none", "mean", "sum"]
TOL = {torch.float64: dict(rtol=1e-7, atol=1e-7), torch.float32: dict(rtol=2e-5, atol=2e-5)}


def fn(name, **kw):
    """lib.nn.functional.name with keyword arguments (torch tensors among them copied for kiln)."""
    kkw = {k: to_kiln(v) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    return lambda m, *a: getattr(FN[m], name)(*a, **(kw if m is torch else kkw))


def rand(shape, dtype=torch.float64, low=-2.0, high=2.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)


def targets(shape, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, C, shape, generator=g)


def _kcopy(a):
    if isinstance(a, torch.Tensor):
        k = to_kiln(a.detach())
        return k.requires_grad_() if a.requires_grad else k
    return a


def grads(f, *targs, tol=None, msg=""):
    """f(lib, *args) on torch args and on kiln copies: the output and the gradients of the args that
    require grad (torch leaves made with .requires_grad_()) must agree."""
    kargs = [_kcopy(a) for a in targs]
    tout, kout = f(torch, *targs), f(kiln, *kargs)
    dt = tout.dtype
    tol = tol or TOL.get(dt, dict(rtol=1e-3, atol=1e-3))
    assert_same(kout.detach(), tout.detach(), msg=msg, **tol)
    tin = [a for a in targs if isinstance(a, torch.Tensor) and a.requires_grad]
    kin = [k for a, k in zip(targs, kargs) if isinstance(a, torch.Tensor) and a.requires_grad]
    if not tin:
        return
    go = rand(tout.shape, seed=7).to(dt)
    tg = torch.autograd.grad(tout, tin, go, allow_unused=True)
    kg = kiln.autograd.grad([kout], kin, [to_kiln(go)], allow_unused=True)
    for i, (k, t) in enumerate(zip(kg, tg)):
        if t is None:
            assert k is None or not bool(kiln.any(k != 0).item()), f"{msg}: input {i}"
            continue
        assert k is not None, f"{msg}: no gradient for input {i}"
        assert_same(k, t, msg=f"{msg}: gradient {i}", **tol)


def gradgrads(f, *targs, msg=""):
    """Second order vs torch: the gradient of <first gradients, v> (create_graph=True)."""
    kargs = [_kcopy(a) for a in targs]
    tin = [a for a in targs if isinstance(a, torch.Tensor) and a.requires_grad]
    kin = [k for a, k in zip(targs, kargs) if isinstance(a, torch.Tensor) and a.requires_grad]
    tout, kout = f(torch, *targs), f(kiln, *kargs)
    go = rand(tout.shape, seed=3).requires_grad_()
    kgo = to_kiln(go.detach()).requires_grad_()
    tg = torch.autograd.grad(tout, tin, go, create_graph=True)
    kg = kiln.autograd.grad([kout], kin, [kgo], create_graph=True)
    vs = [rand(t.shape, seed=11 + i) for i, t in enumerate(tg)]
    tl = sum((t * v).sum() for t, v in zip(tg, vs))
    kl = None
    for k, v in zip(kg, vs):
        term = (k * to_kiln(v)).sum()
        kl = term if kl is None else kl + term
    t2 = torch.autograd.grad(tl, tin + [go], allow_unused=True)
    k2 = kiln.autograd.grad([kl], kin + [kgo], allow_unused=True)
    for i, (k, t) in enumerate(zip(k2, t2)):
        if t is None or k is None:  # no dependence: the other side may give zeros instead of None
            assert (k is None or not bool(kiln.any(k != 0).item())) and (t is None or not t.any()), f"{msg}: {i}"
            continue
        assert_same(k, t, msg=f"{msg}: second-order gradient {i}", rtol=1e-7, atol=1e-7)


def gradcheck(f, *args, gradgrad=False):
    kargs = [_kcopy(a) for a in args]
    g = lambda *a: f(kiln, *a)  # noqa: E731
    assert kiln.autograd.gradcheck(g, tuple(kargs))
    if gradgrad:
        assert kiln.autograd.gradgradcheck(g, tuple(kargs))


def leaf(t):
    return t.detach().clone().requires_grad_()


def test_table_ops_registered():
    ops = set(kiln.registered_ops())
    assert {"cross_entropy_loss", "cross_entropy_loss_backward", "nll_loss", "nll_loss_backward",
            "binary_cross_entropy", "ctc_loss", "ctc_loss_backward"} <= ops


# ---- cross_entropy / nll_loss with class indices ----------------------------------------------------
# (input shape, target shape): 2-D, 1-D with a 0-dim target, 3-D, 4-D (nll_loss2d), 5-D
INDEX_SHAPES = [((6, 5), (6,)), ((5,), ()), ((3, 4, 5), (3, 5)), ((2, 3, 4, 2), (2, 4, 2)),
                ((2, 3, 2, 2, 3), (2, 2, 2, 3))]


def _index_case(xs, ts, dtype, ignore, seed=0):
    C = xs[1] if len(xs) > 1 else xs[0]
    x = rand(xs, dtype, seed=seed)
    t = targets(ts, C, seed=seed + 1)
    if ignore and t.numel() > 1:
        t.view(-1)[::3] = -100
    return x, t, C


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("shapes", INDEX_SHAPES, ids=lambda s: str(s[0]))
def test_cross_entropy_index(shapes, dtype):
    xs, ts = shapes
    for ignore, weighted, ls, red in itertools.product([False, True], [False, True], [0.0, 0.25], REDS):
        x, t, C = _index_case(xs, ts, dtype, ignore)
        w = rand((C,), dtype, 0.2, 2.0, seed=5) if weighted else None
        grads(fn("cross_entropy", weight=w, reduction=red, label_smoothing=ls), leaf(x), t,
              msg=f"{xs} ignore={ignore} w={weighted} ls={ls} {red}")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("shapes", INDEX_SHAPES, ids=lambda s: str(s[0]))
def test_nll_loss(shapes, dtype):
    xs, ts = shapes
    for ignore, weighted, red in itertools.product([False, True], [False, True], REDS):
        x, t, C = _index_case(xs, ts, dtype, ignore)
        w = rand((C,), dtype, 0.2, 2.0, seed=5) if weighted else None
        grads(fn("nll_loss", weight=w, reduction=red), leaf(x), t, msg=f"{xs} ignore={ignore} w={weighted} {red}")


def test_cross_entropy_options():
    x, t = rand((8, 6)), targets((8,), 6)
    # a custom ignore_index inside the class range, uint8 targets, label_smoothing = 1
    grads(fn("cross_entropy", ignore_index=2), leaf(x), t)
    grads(fn("nll_loss", ignore_index=2, reduction="sum"), leaf(x), t)
    grads(fn("cross_entropy", reduction="none"), leaf(x), t.to(torch.uint8))
    grads(fn("cross_entropy", label_smoothing=1.0, weight=rand((6,), low=0.5)), leaf(x), t)
    grads(fn("cross_entropy", label_smoothing=-0.5), leaf(x), t)  # torch ignores ls <= 0
    # 1-D input with a one-element 1-D target (forward only: torch's backward rejects it)
    for red in REDS:
        check(fn("cross_entropy", reduction=red), rand((6,)), torch.tensor([3]))
        check(fn("nll_loss", reduction=red), rand((6,)), torch.tensor([3]))
    # zero class weights, and every target ignored ('mean' is 0/0 = nan, gradients zero)
    w = torch.tensor([0.0, 1, 0, 2, 0, 1], dtype=torch.float64)
    grads(fn("cross_entropy", weight=w, label_smoothing=0.1), leaf(x), t)
    for red in REDS:
        grads(fn("cross_entropy", reduction=red, label_smoothing=0.2), leaf(x), torch.full((8,), -100))
        grads(fn("nll_loss", reduction=red, weight=w), leaf(x), torch.full((8,), -100))


def test_cross_entropy_layouts():
    """Strided logits (transposed, sliced, expanded), strided targets, many classes, many positions."""
    x = rand((7, 9))
    t = targets((7,), 9)
    for label, xt in [("transposed", rand((9, 7)).t()), ("sliced", rand((14, 20))[::2, 2::2]),
                      ("expanded", rand((1, 9)).expand(7, 9))]:
        for ls in (0.0, 0.3):
            grads(fn("cross_entropy", label_smoothing=ls, reduction="none"), leaf(xt), t, msg=label)
    grads(fn("cross_entropy"), leaf(x), targets((14,), 9)[::2])
    grads(fn("cross_entropy"), leaf(rand((2, 5, 4)).transpose(1, 2).transpose(1, 2)), targets((2, 4), 5))
    grads(fn("cross_entropy", label_smoothing=0.1), leaf(rand((3, 4, 5)).permute(0, 2, 1)), targets((3, 4), 5))
    # rows longer than a vector, spatial positions spread over several blocks, several threads
    grads(fn("cross_entropy", label_smoothing=0.1), leaf(rand((64, 1000), torch.float32, -8, 8)),
          targets((64,), 1000))
    w = rand((300,), torch.float32, 0.1, 1.0)
    grads(fn("cross_entropy", weight=w, label_smoothing=0.2), leaf(rand((2, 300, 70), torch.float32)),
          targets((2, 70), 300))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cross_entropy_half(dtype):
    x, t = make((6, 10), dtype, -3, 3), targets((6,), 10)
    rtol = 4e-3 if dtype == "float16" else 3e-2  # a few units in the last place: torch rounds the
    for red in REDS:                              # log-softmax to the half type, kiln stays in float32
        check(fn("cross_entropy", reduction=red, label_smoothing=0.1), x, t, rtol=rtol, atol=1e-3)
        check(fn("nll_loss", reduction=red), x, t)


def test_cross_entropy_special_values():
    x = rand((3, 5), seed=4)
    x[0, 0] = float("inf")
    x[1, 1] = float("-inf")
    x[2] = float("-inf")
    t = torch.tensor([0, 1, 2])
    for ls in (0.0, 0.1):
        check(fn("cross_entropy", reduction="none", label_smoothing=ls), x, t)
    check(fn("cross_entropy", reduction="none"), rand((3, 5)), torch.tensor([4, 0, 3]))


def test_cross_entropy_empty():
    for red in REDS:
        for ls in (0.0, 0.2):
            check(fn("cross_entropy", reduction=red, label_smoothing=ls), rand((0, 4)),
                  torch.zeros(0, dtype=torch.long))
        check(fn("nll_loss", reduction=red), rand((0, 4, 3)), torch.zeros((0, 3), dtype=torch.long))
        check(fn("cross_entropy", reduction=red), rand((0, 4)), rand((0, 4)))


def test_cross_entropy_index_errors():
    x = rand((3, 5))
    t = torch.tensor([1, 2, 0])
    w = rand((5,))
    cases = [
        ("out of bounds", (x, torch.tensor([1, 7, 2])), {}),
        ("negative", (x, torch.tensor([1, -1, 2])), {}),
        ("spatial out of bounds", (rand((2, 3, 4)), torch.full((2, 4), 3)), {}),
        ("int32 target", (x, t.int()), {}),
        ("float target", (x, t.double()), {}),
        ("batch", (x, torch.tensor([1, 2, 0, 0])), {}),
        ("0-dim target", (x, torch.tensor(1)), {}),
        ("1-D input 2 targets", (rand((5,)), torch.tensor([1, 2])), {}),
        ("multi-target", (x, t[None].expand(3, 3)), {}),
        ("3-D target shape", (rand((2, 3, 4)), torch.zeros((2, 3), dtype=torch.long)), {}),
        ("4-D target dims", (rand((2, 3, 4, 5)), torch.zeros((2, 4), dtype=torch.long)), {}),
        ("4-D target shape", (rand((2, 3, 4, 5)), torch.zeros((2, 4, 4), dtype=torch.long)), {}),
        ("0-dim input", (rand(()), torch.tensor(1)), {}),
        ("weight size", (x, t), {"weight": rand((4,))}),
        ("weight 2-D", (x, t), {"weight": rand((5, 1))}),
        ("weight dtype", (x, t), {"weight": w.float()}),
        ("reduction", (x, t), {"reduction": "bogus"}),
        ("long input", (t[:, None].expand(3, 5).contiguous(), t), {}),
        ("target is ignore_index out of range", (x, torch.tensor([1, 9, 2])), {"ignore_index": 9}),
    ]
    for name in ("cross_entropy", "nll_loss"):
        for label, args, kw in cases:
            check(fn(name, **kw), *args, msg=f"{name} {label}")
    check(fn("cross_entropy", label_smoothing=1.5), x, t)
    with pytest.raises(IndexError, match=r"^\[cross_entropy\] Target 7 is out of bounds\."):
        KF.cross_entropy(to_kiln(x), to_kiln(torch.tensor([1, 7, 2])))
    # the class weights are not differentiable (torch refuses at the call)
    for name in ("cross_entropy", "nll_loss"):
        with pytest.raises(RuntimeError):
            getattr(TF, name)(x, t, weight=leaf(w))
        with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'weight'"):
            getattr(KF, name)(to_kiln(x), to_kiln(t), weight=to_kiln(w).requires_grad_())


# ---- cross_entropy with class probabilities ---------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("shape", [(6, 5), (5,), (2, 5, 3)], ids=str)
def test_cross_entropy_probs(shape, dtype):
    C = shape[1] if len(shape) > 1 else shape[0]
    for weighted, ls, red in itertools.product([False, True], [0.0, 0.3], REDS):
        x, p = rand(shape, dtype), rand(shape, dtype, 0, 1, seed=2).softmax(-1)
        w = rand((C,), dtype, 0.2, 2.0, seed=5) if weighted else None
        grads(fn("cross_entropy", weight=w, reduction=red, label_smoothing=ls), leaf(x), leaf(p),
              msg=f"{shape} w={weighted} ls={ls} {red}")


def test_cross_entropy_probs_dtypes_and_errors():
    x = rand((4, 5), torch.float32)
    for p in (rand((4, 5), torch.float64, 0, 1), rand((4, 5), torch.float16, 0, 1)):
        check(fn("cross_entropy"), x, p)  # the result type promotes
    check(fn("cross_entropy"), x, rand((4, 5), torch.float64, 0, 1).t().contiguous().t())
    check(fn("cross_entropy"), x, (rand((4, 5)) > 0))  # bool probabilities: RuntimeError
    check(fn("cross_entropy", ignore_index=1), x, rand((4, 5), torch.float32))
    check(fn("cross_entropy", weight=rand((4,), torch.float32)), x, rand((4, 5), torch.float32))
    check(fn("cross_entropy", label_smoothing=1.1), x, rand((4, 5), torch.float32))
    check(fn("cross_entropy"), rand((2, 5, 3)), rand((2, 5, 4)))  # neither probabilities nor indices


# ---- regression losses ---------------------------------------------------------------------------------
ELEMENTWISE = [("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", {"beta": 1.0}),
               ("smooth_l1_loss", {"beta": 0.3}), ("smooth_l1_loss", {"beta": 0.0}), ("huber_loss", {}),
               ("huber_loss", {"delta": 0.4}), ("huber_loss", {"delta": 2.5})]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name,kw", ELEMENTWISE, ids=lambda v: str(v))
def test_elementwise_losses(name, kw, dtype):
    for red in REDS:
        x, y = rand((4, 5), dtype), rand((4, 5), dtype, seed=1)
        grads(fn(name, reduction=red, **kw), leaf(x), leaf(y), msg=f"{red}")
        # broadcast target (torch warns), strided input
        grads(fn(name, reduction=red, **kw), leaf(rand((5, 4), dtype).t()), leaf(rand((5,), dtype, seed=2)))
        grads(fn(name, reduction=red, **kw), leaf(rand((5,), dtype)), leaf(rand((3, 1, 5), dtype, seed=2)))
        if name != "smooth_l1_loss":
            w = rand((4, 5), dtype, 0, 2, seed=3)
            grads(fn(name, reduction=red, weight=w, **kw), leaf(x), leaf(y), msg=f"weight {red}")


def test_elementwise_losses_dtypes_and_errors():
    x32, x64 = rand((3, 4), torch.float32), rand((3, 4), seed=1)
    i64 = targets((3, 4), 4)
    for name, kw in ELEMENTWISE:
        f = fn(name, **kw)
        for a, b in [(x32, x64), (x64, x32), (x32.half(), x32), (x32, i64), (i64, x32), (i64, i64 + 1)]:
            check(f, a, b, msg=f"{name} {a.dtype} {b.dtype}")
        check(f, x32, rand((2, 4), torch.float32), msg=f"{name} bad broadcast")
        check(fn(name, reduction="bogus", **kw), x32, x32)
        check(f, rand((0, 3)), rand((0, 3)), msg=f"{name} empty mean")
        check(fn(name, reduction="sum", **kw), rand((0, 3)), rand((0, 3)), msg=f"{name} empty sum")
        check(f, make((4, 4), "float32", special=True), rand((4, 4), torch.float32), msg=f"{name} nan/inf")
    for name in ("mse_loss", "l1_loss", "huber_loss"):
        check(fn(name, weight=rand((4,))), x64, x64)  # ValueError
        check(fn(name, weight=rand((3, 4)), reduction="bogus"), x64, x64)
    check(fn("smooth_l1_loss", beta=-1.0), x64, x64)
    check(fn("huber_loss", delta=0.0), x64, x64)
    check(fn("huber_loss", delta=-1.0), x64, x64)
    with pytest.warns(UserWarning, match="target size"):
        KF.mse_loss(to_kiln(x64), to_kiln(x64[0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KF.l1_loss(to_kiln(x64), to_kiln(x64))


def test_legacy_reduction_args():
    x, y = rand((3, 4)), rand((3, 4), seed=1)
    t = targets((3,), 4)
    for sa, rd in [(False, None), (None, False), (True, True), (False, True), (None, None)]:
        kw = {"size_average": sa, "reduce": rd}
        for name, args in [("mse_loss", (x, y)), ("l1_loss", (x, y)), ("smooth_l1_loss", (x, y)),
                           ("kl_div", (x, y)), ("cross_entropy", (x, t)), ("nll_loss", (x, t)),
                           ("binary_cross_entropy_with_logits", (x, y.sigmoid())),
                           ("binary_cross_entropy", (x.sigmoid(), y.sigmoid())),
                           ("margin_ranking_loss", (x[0], y[0], y[0].sign())),
                           ("cosine_embedding_loss", (x, y, t.double() * 2 - 3))]:
            check(fn(name, **kw), *args, msg=f"{name} {kw}")
    with pytest.warns(UserWarning, match="reduction='sum'"):
        KF.mse_loss(to_kiln(x), to_kiln(y), size_average=False)


# ---- binary cross entropy --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_binary_cross_entropy(dtype):
    x, y = rand((4, 5), dtype, 0.02, 0.98), rand((4, 5), dtype, 0, 1, seed=1)
    for red in REDS:
        grads(fn("binary_cross_entropy", reduction=red), leaf(x), leaf(y))
        grads(fn("binary_cross_entropy", reduction=red, weight=rand((5,), dtype, 0, 2)), leaf(x), leaf(y))
        grads(fn("binary_cross_entropy", reduction=red, weight=rand((4, 5), dtype, 0, 2)), leaf(x), y)
        grads(fn("binary_cross_entropy", reduction=red), leaf(rand((5, 4), dtype, 0.1, 0.9).t()), leaf(y))
        # exact 0 and 1: torch clamps each log at -100 and its gradient divides by max(x(1-x), 1e-12)
        e = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.5], dtype=dtype)
        grads(fn("binary_cross_entropy", reduction=red), leaf(e), torch.tensor([0.0, 1, 1, 0, 1], dtype=dtype),
              tol=dict(rtol=1e-6, atol=1e-6))


def test_binary_cross_entropy_dtypes_and_errors():
    x, y = rand((3, 4), torch.float32, 0.1, 0.9), rand((3, 4), torch.float32, 0, 1, seed=1)
    f = fn("binary_cross_entropy")
    check(f, x.half(), y.half())
    check(f, x.bfloat16(), y.bfloat16())
    check(f, x, y.double())                         # dtypes must match
    check(f, x.double(), y)
    check(f, (x * 3).long(), (y * 3).long())        # NotImplementedError
    check(f, x, y[0])                               # ValueError: sizes differ
    check(f, x * 3, y)                              # input outside [0, 1]
    check(f, x, y * 3)                              # target outside [0, 1]
    check(f, torch.full((2,), float("nan")), torch.zeros(2))
    check(fn("binary_cross_entropy", weight=rand((4,)).float()), x, y)
    check(fn("binary_cross_entropy", weight=rand((4,))), x, y)   # float64 weight, float32 result
    check(fn("binary_cross_entropy", weight=rand((3,))), x, y)   # not broadcastable
    check(fn("binary_cross_entropy", weight=rand((2, 3, 4))), x, y)
    check(f, rand((0, 3), low=0, high=1), rand((0, 3), low=0, high=1))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_binary_cross_entropy_with_logits(dtype):
    x, y = rand((4, 5), dtype, -4, 4), rand((4, 5), dtype, 0, 1, seed=1)
    f = "binary_cross_entropy_with_logits"
    for red in REDS:
        grads(fn(f, reduction=red), leaf(x), leaf(y))
        grads(fn(f, reduction=red, weight=rand((5,), dtype, 0, 2)), leaf(x), leaf(y))
        grads(fn(f, reduction=red, pos_weight=rand((5,), dtype, 0.5, 3)), leaf(x), leaf(y))
        grads(fn(f, reduction=red, pos_weight=rand((4, 1), dtype, 0.5, 3), weight=rand((4, 5), dtype, 0, 2)),
              leaf(rand((5, 4), dtype).t()), leaf(y))
        # large logits stay finite (the stable form)
        grads(fn(f, reduction=red), leaf(torch.tensor([-200.0, -30, 0, 30, 200], dtype=dtype)),
              torch.tensor([1.0, 0, 0.5, 1, 0], dtype=dtype))


def test_binary_cross_entropy_with_logits_dtypes_and_errors():
    f = fn("binary_cross_entropy_with_logits")
    x, y = rand((3, 4), torch.float32), rand((3, 4), torch.float32, 0, 1)
    for a, b in [(x, y.double()), (x.double(), y), (x.half(), y), (x, (y * 2).long()), ((x * 3).long(), y)]:
        check(f, a, b, msg=f"{a.dtype} {b.dtype}")
    check(f, x, y[0])
    check(fn("binary_cross_entropy_with_logits", pos_weight=rand((3,))), x, y)
    check(fn("binary_cross_entropy_with_logits", weight=rand((2, 3, 4))), x, y)
    check(fn("binary_cross_entropy_with_logits", weight=rand((4,))), x, y)
    check(fn("binary_cross_entropy_with_logits", reduction="x"), x, y)


# ---- kl_div, cosine_embedding_loss, margin_ranking_loss ------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_kl_div(dtype):
    x = rand((4, 5), dtype).log_softmax(-1)
    p = rand((4, 5), dtype, seed=1).softmax(-1)
    p[0, 0] = 0.0  # xlogy(0, 0) = 0
    for red, lt in itertools.product(REDS + ["batchmean"], [False, True]):
        tgt = p.clamp_min(1e-3).log() if lt else p
        grads(fn("kl_div", reduction=red, log_target=lt), leaf(x), leaf(tgt), msg=f"{red} {lt}")
    grads(fn("kl_div", reduction="batchmean"), leaf(rand((), dtype)), leaf(rand((), dtype, 0, 1)))
    grads(fn("kl_div", reduction="none"), leaf(rand((4, 5), dtype)), leaf(rand((5,), dtype, 0, 1)))


def test_kl_div_dtypes_and_errors():
    f = fn("kl_div")
    x, y = rand((3, 4), torch.float32), rand((3, 4), torch.float32, 0, 1)
    for a, b in [(x, y.double()), (x.double(), y), (x.half(), y), (x, (y * 2).long()), ((x * 3).long(), y),
                 (x, y > 0.5), (x, y.to(torch.complex64))]:
        check(f, a, b, msg=f"{a.dtype} {b.dtype}")
    check(fn("kl_div", reduction="bogus"), x, y)
    check(f, x, rand((2, 4)))
    with pytest.warns(UserWarning, match="batchmean"):
        KF.kl_div(to_kiln(x), to_kiln(y))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_cosine_embedding_loss(dtype):
    a, b = rand((5, 4), dtype), rand((5, 4), dtype, seed=1)
    y = torch.tensor([1, -1, 1, -1, 0])
    for red, margin in itertools.product(REDS, [0.0, 0.3, -0.5]):
        grads(fn("cosine_embedding_loss", margin=margin, reduction=red), leaf(a), leaf(b), y)
        grads(fn("cosine_embedding_loss", margin=margin, reduction=red), leaf(a), leaf(rand((4, 5), dtype).t()),
              y.to(dtype))
        grads(fn("cosine_embedding_loss", margin=margin, reduction=red), leaf(a[0]), leaf(b[0]), torch.tensor(-1))
    check(fn("cosine_embedding_loss"), a, torch.zeros_like(a), y)  # zero vector: eps keeps it finite


def test_cosine_embedding_loss_errors():
    a, b = rand((3, 4)), rand((3, 4), seed=1)
    y = torch.tensor([1, -1, 1])
    f = fn("cosine_embedding_loss")
    check(f, a, b, torch.ones(3, 1))
    check(f, a, b, torch.tensor(1))
    check(f, a[0], b[0], y)
    check(f, a, b[:2], y)
    check(f, a, b[:, :3], y)
    check(f, a, b.float(), y)
    check(f, a.long(), b.long(), y)
    check(fn("cosine_embedding_loss", reduction="bogus"), a, b, y)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_margin_ranking_loss(dtype):
    a, b = rand((6,), dtype), rand((6,), dtype, seed=1)
    y = torch.tensor([1.0, -1, 1, 1, -1, -1], dtype=dtype)
    for red, margin in itertools.product(REDS, [0.0, 0.5]):
        grads(fn("margin_ranking_loss", margin=margin, reduction=red), leaf(a), leaf(b), y)
        grads(fn("margin_ranking_loss", margin=margin, reduction=red), leaf(a), leaf(b[:1]), leaf(y))
        grads(fn("margin_ranking_loss", margin=margin, reduction=red), leaf(rand((3, 4), dtype)),
              leaf(rand((4, 3), dtype).t()), y[:4].reshape(1, 4))
    f = fn("margin_ranking_loss")
    check(f, a, b[:3], y)
    check(f, a, b, y[None])
    check(f, a.long(), b.long(), y.long())
    check(f, rand(()), rand((), seed=1), torch.tensor(1.0))
    check(fn("margin_ranking_loss", reduction="bogus"), a, b, y)


# ---- ctc_loss --------------------------------------------------------------------------------------------
def _ctc(T=7, N=3, C=5, S=4, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = rand((T, N, C), dtype, -2, 2, seed=seed)
    tg = torch.randint(1, C, (N, S), generator=g)
    return x, tg


def _ctc_fn(**kw):
    return lambda m, x, *a: FN[m].ctc_loss(FN[m].log_softmax(x, -1), *a, **kw)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_ctc_loss(dtype):
    x, tg = _ctc(dtype=dtype)
    il, tl = torch.tensor([7, 6, 5]), torch.tensor([4, 2, 3])
    cat = torch.cat([tg[i, :tl[i]] for i in range(3)])
    for red, zi in itertools.product(REDS, [False, True]):
        grads(_ctc_fn(reduction=red, zero_infinity=zi), leaf(x), tg, il, tl, msg=f"{red} {zi}")
        grads(_ctc_fn(reduction=red, zero_infinity=zi), leaf(x), cat, il, tl, msg=f"concat {red} {zi}")
        grads(_ctc_fn(reduction=red, zero_infinity=zi), leaf(x), tg, (7, 6, 5), [4, 2, 3], msg=f"lists {red}")
        # unbatched
        grads(_ctc_fn(reduction=red, zero_infinity=zi), leaf(x[:, 0]), tg[0], torch.tensor(7), torch.tensor(4))
    # another blank, repeated labels, empty targets, an impossible alignment (inf; zero_infinity -> 0)
    tg2 = torch.tensor([[0, 0, 1, 1], [2, 2, 2, 0], [3, 1, 3, 1]])
    for zi in (False, True):
        grads(_ctc_fn(blank=4, zero_infinity=zi, reduction="none"), leaf(x), tg2, (7, 7, 3), (4, 3, 0))
        grads(_ctc_fn(zero_infinity=zi, reduction="sum"), leaf(x), tg, (7, 2, 6), (4, 2, 3))
        grads(_ctc_fn(zero_infinity=zi, reduction="none"), leaf(x), tg, (7, 0, 0), (4, 0, 3))
    # strided log_probs, int32 / float targets and lengths
    grads(_ctc_fn(), leaf(rand((3, 7, 5), dtype).transpose(0, 1)), tg.int(), il.int(), tl.short())
    grads(_ctc_fn(), leaf(x), tg.double(), il, tl)
    # raw (not log-softmax) inputs: torch's gradient formula, not the exact derivative
    grads(lambda m, lp, *a: FN[m].ctc_loss(lp, *a), leaf(x), tg, il, tl)


def test_ctc_loss_long_sequences():
    x, tg = _ctc(T=60, N=4, C=20, S=25, dtype=torch.float32, seed=3)
    grads(_ctc_fn(reduction="mean"), leaf(x), tg, (60, 55, 50, 40), (25, 20, 18, 1))


def test_ctc_loss_errors():
    x, tg = _ctc()
    lp = x.log_softmax(-1)
    il, tl = torch.tensor([7, 6, 5]), torch.tensor([4, 2, 3])
    f = fn("ctc_loss")
    cases = [
        ("input length too big", (lp, tg, torch.tensor([8, 6, 5]), tl)),
        ("input length negative", (lp, tg, torch.tensor([-1, 6, 5]), tl)),
        ("target length too big", (lp, tg, il, torch.tensor([5, 2, 3]))),
        ("target length negative", (lp, tg, il, torch.tensor([-1, 2, 3]))),
        ("input_lengths size", (lp, tg, il[:2], tl)),
        ("target_lengths size", (lp, tg, il, tl[:2])),
        ("targets batch", (lp, tg[:2], il, tl)),
        ("concat size", (lp, torch.ones(8, dtype=torch.long), il, tl)),
        ("float lengths", (lp, tg, il.float(), tl)),
        ("float16", (lp.half(), tg, il, tl)),
        ("empty", (lp[:0], tg, torch.zeros(3, dtype=torch.long), torch.zeros(3, dtype=torch.long))),
        ("4-D", (lp[None], tg, il, tl)),
        ("3-D targets", (lp, tg[None], il, tl)),
        ("int lengths", (lp[:, 0], tg[0], 7, 4)),
    ]
    for label, args in cases:
        check(f, *args, msg=label)
    for blank in (5, -1):
        check(fn("ctc_loss", blank=blank), lp, tg, il, tl, msg=f"blank {blank}")
    check(fn("ctc_loss", reduction="x"), lp, tg, il, tl)
    # torch reads out of bounds for a target class >= C; kiln refuses
    bad = tg.clone()
    bad[0, 0] = 7
    with pytest.raises(IndexError, match=r"\[ctc_loss\] target value 7"):
        KF.ctc_loss(to_kiln(lp), to_kiln(bad), to_kiln(il), to_kiln(tl))
    # ctc_loss_backward has no derivative, as torch's
    xt, xk = leaf(x), to_kiln(x).requires_grad_()
    (gt,) = torch.autograd.grad(TF.ctc_loss(xt.log_softmax(-1), tg, il, tl), xt, create_graph=True)
    (gk,) = kiln.autograd.grad([KF.ctc_loss(KF.log_softmax(xk, -1), to_kiln(tg), to_kiln(il), to_kiln(tl))],
                               [xk], create_graph=True)
    with pytest.raises(RuntimeError):
        torch.autograd.grad(gt.sum(), xt)
    with pytest.raises(RuntimeError, match="ctc_loss_backward"):
        kiln.autograd.grad([gk.sum()], [xk])


# ---- gradcheck (float64 finite differences) and second order --------------------------------------------
def test_gradcheck_all_losses():
    x, y = rand((3, 4)), rand((3, 4), seed=1)
    t = targets((3,), 4)
    p = rand((3, 4), low=0, high=1, seed=2).softmax(-1)
    w = rand((4,), low=0.3, high=1.5)
    t_ign = torch.tensor([1, -100, 3])
    cases = [
        (fn("cross_entropy"), (leaf(x), t)),
        (fn("cross_entropy", weight=w, label_smoothing=0.2, reduction="none"), (leaf(x), t_ign)),
        (fn("cross_entropy", label_smoothing=0.1), (leaf(rand((2, 4, 3))), targets((2, 3), 4))),
        (fn("cross_entropy", weight=w, label_smoothing=0.3), (leaf(x), leaf(p))),
        (fn("nll_loss", weight=w), (leaf(x), t_ign)),
        (fn("nll_loss", reduction="none"), (leaf(rand((2, 4, 3))), targets((2, 3), 4))),
        (fn("mse_loss"), (leaf(x), leaf(y))),
        (fn("l1_loss", reduction="sum"), (leaf(x), leaf(y))),
        (fn("smooth_l1_loss", beta=0.5), (leaf(x), leaf(y))),
        (fn("huber_loss", delta=0.7, weight=w.expand(3, 4)), (leaf(x), leaf(y))),
        (fn("binary_cross_entropy", weight=w), (leaf(rand((3, 4), low=0.1, high=0.9)), leaf(rand((3, 4), low=0, high=1)))),
        (fn("binary_cross_entropy_with_logits", weight=w, pos_weight=w + 0.5), (leaf(x), leaf(rand((3, 4), low=0, high=1)))),
        (fn("kl_div", reduction="batchmean"), (leaf(x), leaf(p))),
        (fn("kl_div", log_target=True), (leaf(x), leaf(y))),
        (fn("cosine_embedding_loss", margin=0.2), (leaf(x), leaf(y), torch.tensor([1, -1, -1]))),
        (fn("margin_ranking_loss", margin=0.1), (leaf(x[0]), leaf(y[0]), torch.tensor([1.0, -1, 1, -1]))),
    ]
    for f, args in cases:
        gradcheck(f, *args)
    x, tg = _ctc(T=5, N=2, C=4, S=3)
    gradcheck(_ctc_fn(reduction="mean"), leaf(x), tg, (5, 4), (3, 2))
    gradcheck(_ctc_fn(reduction="none", zero_infinity=True), leaf(x), tg, (5, 2), (3, 2))


def test_cross_entropy_loss_backward_second_order():
    """cross_entropy_loss_backward's derivative (composite of kiln ops and itself) vs torch, and
    kiln.autograd.gradgradcheck; nll_loss_backward's (nll_loss again)."""
    x = rand((4, 5))
    t = torch.tensor([1, -100, 4, 0])
    w = rand((5,), low=0.3, high=1.5)
    for red, ls, weight in itertools.product(REDS, [0.0, 0.2], [None, w]):
        gradgrads(fn("cross_entropy", weight=weight, reduction=red, label_smoothing=ls), leaf(x), t,
                  msg=f"{red} {ls} {weight is None}")
    gradgrads(fn("cross_entropy", label_smoothing=0.1), leaf(rand((2, 5, 3))), targets((2, 3), 5))
    gradgrads(fn("cross_entropy", label_smoothing=0.1, weight=w), leaf(x), leaf(rand((4, 5), low=0, high=1).softmax(-1)))
    for red in REDS:
        gradgrads(fn("nll_loss", weight=w, reduction=red), leaf(x), t)
        gradgrads(fn("mse_loss", reduction=red), leaf(x), leaf(rand((4, 5), seed=1)))
    gradcheck(fn("cross_entropy", weight=w, label_smoothing=0.2), leaf(x), t, gradgrad=True)
    gradcheck(fn("cross_entropy", reduction="none"), leaf(rand((2, 5, 3))), targets((2, 3), 5), gradgrad=True)
    gradcheck(fn("nll_loss", weight=w, reduction="sum"), leaf(x), t, gradgrad=True)
    gradcheck(fn("mse_loss"), leaf(x), leaf(rand((4, 5), seed=1)), gradgrad=True)
    gradcheck(fn("binary_cross_entropy"), leaf(rand((2, 3), low=0.1, high=0.9)),
              leaf(rand((2, 3), low=0, high=1)), gradgrad=True)


# ---- modules ----------------------------------------------------------------------------------------------
MODULES = [
    ("L1Loss", {}), ("MSELoss", {"reduction": "sum"}), ("CrossEntropyLoss", {"label_smoothing": 0.1}),
    ("NLLLoss", {"ignore_index": 1}), ("SmoothL1Loss", {"beta": 0.5}), ("HuberLoss", {"delta": 0.3}),
    ("BCELoss", {}), ("BCEWithLogitsLoss", {}), ("KLDivLoss", {"reduction": "batchmean", "log_target": True}),
    ("CosineEmbeddingLoss", {"margin": 0.2}), ("MarginRankingLoss", {"margin": 0.1}),
    ("CTCLoss", {"blank": 1, "zero_infinity": True}),
]


def _module_inputs(name):
    x, y = rand((3, 4)), rand((3, 4), seed=1)
    if name in ("CrossEntropyLoss", "NLLLoss"):
        return (x, targets((3,), 4))
    if name == "BCELoss":
        return (x.sigmoid(), y.sigmoid())
    if name == "BCEWithLogitsLoss":
        return (x, y.sigmoid())
    if name == "CosineEmbeddingLoss":
        return (x, y, torch.tensor([1, -1, 1]))
    if name == "MarginRankingLoss":
        return (x[0], y[0], torch.tensor([1.0, -1, 1, -1]))
    if name == "CTCLoss":
        lp, tg = _ctc()
        return (lp.log_softmax(-1), tg, torch.tensor([7, 6, 5]), torch.tensor([4, 2, 3]))
    return (x, y)


@pytest.mark.parametrize("name,kw", MODULES, ids=lambda v: str(v))
def test_loss_modules(name, kw):
    tm, km = getattr(TN, name)(**kw), getattr(KL, name)(**kw)
    assert repr(km) == repr(tm)
    assert isinstance(km, kiln.nn.Module)
    for k in list(kw) + ["reduction"]:
        assert getattr(km, k) == getattr(tm, k), k
    assert list(km.state_dict()) == list(tm.state_dict())
    check(lambda m, *a: (tm if m is torch else km)(*a), *_module_inputs(name), msg=name)


def test_loss_modules_weights_and_legacy_args():
    w = rand((4,), low=0.5, high=2)
    x, t = rand((3, 4)), targets((3,), 4)
    for name in ("CrossEntropyLoss", "NLLLoss"):
        tm, km = getattr(TN, name)(weight=w, ignore_index=2), getattr(KL, name)(weight=to_kiln(w), ignore_index=2)
        assert repr(km) == repr(tm) and list(km.state_dict()) == ["weight"]
        assert km.ignore_index == 2
        check(lambda m, *a: (tm if m is torch else km)(*a), x, t, msg=name)
    pw = rand((4,), low=0.5, high=2, seed=4)
    tm = TN.BCEWithLogitsLoss(weight=w, pos_weight=pw)
    km = KL.BCEWithLogitsLoss(weight=to_kiln(w), pos_weight=to_kiln(pw))
    assert sorted(km.state_dict()) == sorted(tm.state_dict()) == ["pos_weight", "weight"]
    y = rand((3, 4), low=0, high=1)
    check(lambda m, *a: (tm if m is torch else km)(*a), x, y)
    tb, kb = TN.BCELoss(weight=w), KL.BCELoss(weight=to_kiln(w))
    check(lambda m, *a: (tb if m is torch else kb)(*a), x.sigmoid(), y)
    for sa, rd in [(False, None), (None, False), (True, None)]:
        with pytest.warns(UserWarning):
            km = KL.MSELoss(size_average=sa, reduce=rd)
        assert km.reduction == TN.MSELoss(size_average=sa, reduce=rd).reduction
    km = KL.CrossEntropyLoss(reduction="sum")
    km.double()
    assert km.reduction == "sum" and km.weight is None
