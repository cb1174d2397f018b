"""poisson_nll_loss, gaussian_nll_loss, hinge_embedding_loss, soft_margin_loss, multilabel_soft_margin_loss,
multi_margin_loss, multilabel_margin_loss, triplet_margin_loss and triplet_margin_with_distance_loss (and their
nn modules) against torch 2.13: values, dtypes, shapes, gradients, error classes; every reduction, broadcast,
0-dim, empty, NaN / inf, strided inputs."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import kiln
import kiln.nn.functional as KF

REDUCTIONS = ["none", "mean", "sum"]


def _k(t):
    """kiln copy of a torch tensor (same dtype, values exact; strides of a transposed view kept)."""
    if t.dtype in (torch.float16, torch.bfloat16):
        return kiln.from_numpy(t.detach().double().numpy()).to(getattr(kiln, str(t.dtype).split(".")[-1]))
    if not t.is_contiguous() and t.dim() == 2:
        return _k(t.t().contiguous()).t()
    return kiln.from_numpy(t.detach().contiguous().numpy().copy())


def _conv(a):
    return _k(a) if isinstance(a, torch.Tensor) else a


def _check(k, t, rtol, atol):
    assert str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (k.dtype, t.dtype)
    assert tuple(k.shape) == tuple(t.shape), (tuple(k.shape), tuple(t.shape))
    exact = t.dtype in (torch.int64, torch.complex64, torch.complex128)
    a = k.detach().numpy() if exact else k.detach().to(kiln.float64).numpy()
    b = t.detach().numpy() if exact else t.detach().double().numpy()
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)


def _tol(dtype):
    return {torch.float64: (1e-11, 1e-12), torch.float32: (2e-5, 2e-6)}.get(dtype, (2e-2, 2e-3))


def same(name, *args, grad=(), rtol=None, atol=None, **kw):
    """Runs F.name on torch tensors and on their kiln copies; compares results (and the gradients of
    the positional tensors whose indices are in `grad`), or the exception classes."""
    targs = [a.detach().clone().requires_grad_(i in grad) if isinstance(a, torch.Tensor) else a
             for i, a in enumerate(args)]
    kargs = [_conv(a) for a in args]
    for i in grad:
        kargs[i].requires_grad_(True)
    kkw = {n: _conv(v) for n, v in kw.items()}
    try:
        want = getattr(TF, name)(*targs, **kw)
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e)):
            getattr(KF, name)(*kargs, **kkw)
        return None
    got = getattr(KF, name)(*kargs, **kkw)
    r, a = _tol(want.dtype)
    _check(got, want, rtol or r, atol or a)
    if grad:
        gt = torch.linspace(-1, 2, want.numel()).reshape(want.shape).to(want.dtype)
        want.backward(gt)
        got.backward(_k(gt))
        for i in grad:
            r, a = _tol(targs[i].dtype)
            _check(kargs[i].grad, targs[i].grad, rtol or r, atol or a)
    return got


def rnd(*shape, dtype=torch.float32, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)


SPECIAL = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30, 3.0, -2.5])


# ---- poisson_nll_loss --------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_input", [True, False])
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_poisson_nll_loss(reduction, log_input, full, dtype):
    x = rnd(4, 5, dtype=dtype)
    if not log_input:
        x = x.abs() + 0.1
    t = torch.poisson(torch.full((4, 5), 2.0, dtype=dtype), generator=torch.Generator().manual_seed(1))
    same("poisson_nll_loss", x, t, log_input, full, reduction=reduction, grad=(0, 1))
    same("poisson_nll_loss", x, t[0], log_input, full, reduction=reduction, eps=1e-3, grad=(0,))  # broadcast
    same("poisson_nll_loss", x.t(), t.t(), log_input=log_input, full=full, reduction=reduction)  # strided


def test_poisson_nll_loss_special_and_dtypes():
    x = SPECIAL.clone()
    t = torch.tensor([0.0, 1.0, 2.0, 3.0, 0.5, 7.0, float("nan"), 4.0])
    for full in (False, True):
        for log_input in (True, False):
            same("poisson_nll_loss", x, t, log_input, full, reduction="none")
    same("poisson_nll_loss", rnd(3, 4, dtype=torch.float16), torch.ones(3, 4))  # promotes to float32
    same("poisson_nll_loss", torch.arange(6).reshape(2, 3), torch.ones(2, 3, dtype=torch.int64), reduction="sum")
    same("poisson_nll_loss", torch.ones(0, 3), torch.ones(0, 3))  # mean of nothing: nan
    same("poisson_nll_loss", torch.tensor(1.5), torch.tensor(2.0), full=True)
    same("poisson_nll_loss", rnd(2, 4), torch.ones(3, 4))  # broadcast error
    same("poisson_nll_loss", rnd(2, 4), torch.ones(2, 4), reduction="bad")


def test_poisson_nll_loss_legacy_reduction():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same("poisson_nll_loss", rnd(3, 4), torch.ones(3, 4), size_average=False)
        same("poisson_nll_loss", rnd(3, 4), torch.ones(3, 4), reduce=False)


# ---- gaussian_nll_loss ----------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("var_shape", [(4, 3), (4,), (4, 1), (1, 3)])
def test_gaussian_nll_loss(reduction, full, var_shape):
    x, t = rnd(4, 3, seed=1), rnd(4, 3, seed=2)
    var = rnd(*var_shape, seed=3).abs() + 0.05
    same("gaussian_nll_loss", x, t, var, full=full, reduction=reduction, grad=(0, 1, 2))
    # float32 log(var) inside a float64 result: float32's last ulp shows (kiln's log and torch's differ there)
    same("gaussian_nll_loss", x.double(), t, var, full=full, reduction=reduction, grad=(0, 2), rtol=1e-6)


def test_gaussian_nll_loss_clamped_variance_gradient():
    # var below eps is clamped for the value; its gradient passes as if unclamped (torch's no_grad clamp_)
    x, t = rnd(6, seed=1), rnd(6, seed=2)
    var = torch.tensor([0.0, 1e-9, 1e-7, 1e-6, 0.5, 2.0])
    same("gaussian_nll_loss", x, t, var, grad=(0, 1, 2), reduction="none", rtol=1e-5, atol=1e-3)
    same("gaussian_nll_loss", x, t, var, eps=1e-3, grad=(2,), reduction="sum", rtol=1e-5)


def test_gaussian_nll_loss_scalar_var_and_errors():
    x, t = rnd(2, 4), rnd(2, 4, seed=1)
    same("gaussian_nll_loss", x, t, 0.7)
    same("gaussian_nll_loss", x, t, 0.0, full=True)
    same("gaussian_nll_loss", x, t, -1.0)  # ValueError
    same("gaussian_nll_loss", x, t, torch.tensor([[1.0, -1, 1, 1], [1, 1, 1, 1]]))  # ValueError
    same("gaussian_nll_loss", x, t, torch.ones(3, 1))  # ValueError: incorrect size
    same("gaussian_nll_loss", x, t, torch.ones(1, 1))  # two sizes differ: ValueError
    same("gaussian_nll_loss", x, t, torch.ones(2, 4), reduction="bad")
    same("gaussian_nll_loss", x, t, torch.ones(2, 4, dtype=torch.int64))  # clamp_ of an int var: RuntimeError
    same("gaussian_nll_loss", x, torch.ones(1, 4), torch.ones(2, 4))  # target broadcasts
    same("gaussian_nll_loss", x, t, torch.ones(2, 4, dtype=torch.float64))
    same("gaussian_nll_loss", rnd(0, 4), rnd(0, 4), torch.ones(0, 4))
    # an int var: torch's Python layer fails on torch.any(bool); kiln reads it as the float
    np.testing.assert_allclose(KF.gaussian_nll_loss(_k(x), _k(t), 2).item(),
                               TF.gaussian_nll_loss(x, t, 2.0).item(), rtol=1e-6)
    with pytest.raises(TypeError):
        KF.gaussian_nll_loss(_k(x), _k(t), "a")


# ---- hinge_embedding_loss / soft_margin_loss ---------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_hinge_embedding_loss(reduction, dtype):
    x = torch.cat([rnd(10, dtype=dtype), SPECIAL.to(dtype)])
    t = torch.tensor([1, -1, 1, -1, 0, 2, 1, -1, -1, 1] + [1, -1] * 4, dtype=torch.float32)
    for margin in (1.0, 0.3, -0.5, 1.1):
        same("hinge_embedding_loss", x, t, margin, reduction=reduction, grad=(0,) if dtype.itemsize > 2 else ())
    same("hinge_embedding_loss", x[:6], t[:6].to(torch.int64), reduction=reduction)
    same("hinge_embedding_loss", rnd(3, 4, dtype=dtype), torch.tensor([1.0, -1, -1, 1]), reduction=reduction)


def test_hinge_embedding_loss_dtypes_and_errors():
    t = torch.tensor([1, -1, 1, -1])
    same("hinge_embedding_loss", torch.tensor([3, -2, 0, 5]), t, 1.7, reduction="sum")  # margin cast to int64
    same("hinge_embedding_loss", torch.tensor([3, -2, 0, 5]), t)  # mean of int64: RuntimeError
    same("hinge_embedding_loss", rnd(4), torch.ones(3, 4, dtype=torch.float64))  # broadcast, float32 out
    same("hinge_embedding_loss", rnd(2, 4), torch.ones(3, 4))
    same("hinge_embedding_loss", rnd(4, dtype=torch.complex64), t)  # NotImplementedError
    same("hinge_embedding_loss", rnd(4), t, reduction="bad")
    same("hinge_embedding_loss", rnd(0, 4), torch.ones(0, 4))
    same("hinge_embedding_loss", torch.tensor(0.4), torch.tensor(-1.0))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_soft_margin_loss(reduction, dtype):
    x = torch.cat([rnd(10, dtype=dtype, scale=3), SPECIAL.to(dtype), torch.tensor([80.0, -80.0]).to(dtype)])
    t = torch.tensor([1.0, -1.0] * 10)
    g = (0,) if dtype.itemsize > 2 else ()
    same("soft_margin_loss", x, t, reduction=reduction, grad=g)
    same("soft_margin_loss", rnd(3, 4, dtype=dtype), torch.tensor([1.0, -1, -1, 1]), reduction=reduction, grad=g)
    same("soft_margin_loss", rnd(4, 3, dtype=dtype).t(), torch.ones(3, 4), reduction=reduction)


def test_soft_margin_loss_dtypes_and_errors():
    same("soft_margin_loss", rnd(4), torch.ones(3, 4))  # output shape is input's: RuntimeError
    same("soft_margin_loss", rnd(3, 4), torch.ones(2, 4))
    same("soft_margin_loss", rnd(3, 4), torch.ones(3, 4, dtype=torch.float64))  # float32 out
    same("soft_margin_loss", rnd(3, 4, dtype=torch.float64), torch.ones(3, 4), grad=(0,))
    same("soft_margin_loss", rnd(3, 4), torch.ones(3, 4, dtype=torch.int64))
    same("soft_margin_loss", rnd(3, 4), torch.ones(3, 4, dtype=torch.complex64))  # can't cast
    same("soft_margin_loss", torch.ones(3, 4, dtype=torch.int64), torch.ones(3, 4, dtype=torch.int64))
    same("soft_margin_loss", torch.ones(3, 4, dtype=torch.bool), torch.ones(3, 4, dtype=torch.bool))
    same("soft_margin_loss", rnd(3, 4, dtype=torch.complex128), torch.ones(3, 4), reduction="none")
    same("soft_margin_loss", rnd(0, 4), torch.ones(0, 4))
    # far tails: torch's log1p(exp(z)) keeps the tiny losses that log(1 + exp(z)) rounds to 0
    for dt in (torch.float32, torch.float64):
        same("soft_margin_loss", torch.tensor([30.0, 40.0, 60.0, -30.0], dtype=dt), torch.ones(4), reduction="none",
             rtol=1e-6 if dt == torch.float32 else 1e-13, atol=0, grad=(0,))
    same("soft_margin_loss", rnd(3), torch.ones(3), reduction="bad")


# ---- multilabel_soft_margin_loss --------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(5,), (3, 5), (2, 3, 5)])
@pytest.mark.parametrize("weighted", [False, True])
def test_multilabel_soft_margin_loss(reduction, shape, weighted):
    x = rnd(*shape, scale=3)
    t = (rnd(*shape, seed=4) > 0).float()
    w = rnd(shape[-1], seed=5).abs() if weighted else None
    same("multilabel_soft_margin_loss", x, t, w, reduction=reduction, grad=(0, 1, 2) if weighted else (0, 1))


def test_multilabel_soft_margin_loss_dtypes_and_errors():
    same("multilabel_soft_margin_loss", rnd(2, 4), torch.ones(2, 4, dtype=torch.int64))
    same("multilabel_soft_margin_loss", rnd(2, 4), torch.ones(2, 4, dtype=torch.float64))
    same("multilabel_soft_margin_loss", rnd(2, 4, dtype=torch.float16), torch.ones(2, 4))
    same("multilabel_soft_margin_loss", rnd(2, 4), torch.ones(4))
    same("multilabel_soft_margin_loss", rnd(2, 0), torch.ones(2, 0))
    same("multilabel_soft_margin_loss", torch.cat([SPECIAL, SPECIAL]).reshape(2, 8), torch.ones(2, 8))
    same("multilabel_soft_margin_loss", rnd(2, 4), torch.ones(2, 4), reduction="bad")  # "is not valid"
    same("multilabel_soft_margin_loss", torch.tensor(1.0), torch.tensor(1.0), reduction="none")  # IndexError
    same("multilabel_soft_margin_loss", torch.ones(2, 4, dtype=torch.int64), torch.ones(2, 4))


# ---- multi_margin_loss ----------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_multi_margin_loss(reduction, p, weighted, dtype):
    x = rnd(7, 5, dtype=dtype)
    t = torch.tensor([0, 4, 2, 2, 1, 3, 0])
    w = rnd(5, seed=6, dtype=dtype).abs() if weighted else None
    for margin in (1.0, 0.25, 3.0):
        same("multi_margin_loss", x, t, p, margin, w, reduction=reduction, grad=(0,))
    same("multi_margin_loss", x.t().contiguous().t(), t, p=p, weight=w, reduction=reduction)  # column-major
    same("multi_margin_loss", x[0], t[:1], p=p, weight=w, reduction=reduction, grad=(0,))  # (C,), (1,)
    same("multi_margin_loss", x[0], t[0], p=p, weight=w, reduction=reduction, grad=(0,))  # (C,), ()
    same("multi_margin_loss", x[0, 0], torch.tensor(0), p=p, reduction=reduction, grad=(0,))  # 0-dim


def test_multi_margin_loss_special_values():
    x = torch.stack([SPECIAL[:5], torch.tensor([1.0, 2, 3, 4, 5]), torch.tensor([0.0, float("nan"), 1, 2, 3])])
    same("multi_margin_loss", x, torch.tensor([1, 3, 0]), reduction="none")
    same("multi_margin_loss", x, torch.tensor([3, 0, 2]), reduction="none")
    # an inf / NaN class weight on a row whose hinges are all <= 0 adds nothing, as torch's z > 0 test
    same("multi_margin_loss", torch.tensor([[5.0, 0, 0], [0, 5, 0]]), torch.tensor([0, 0]),
         weight=torch.tensor([float("inf"), 1, float("nan")]), reduction="none")
    # no listed target at all, with inf / NaN inputs: 0, as torch's loop adds nothing
    same("multilabel_margin_loss", torch.tensor([[float("inf"), 0, float("nan")]]), torch.tensor([[-1, 0, 1]]),
         reduction="none", grad=(0,))
    same("multilabel_margin_loss", torch.tensor(float("nan")), torch.tensor(-1), reduction="none")
    same("multilabel_margin_loss", x, torch.tensor([[1, 0, -1, 0, 0], [3, 1, -1, 0, 0], [0, 2, 4, 1, -1]]),
         reduction="none")


def test_multi_margin_loss_errors():
    x = rnd(3, 4)
    same("multi_margin_loss", x, torch.tensor([0, 1, 4]))  # target out of range
    same("multi_margin_loss", x, torch.tensor([0, 1, -1]))
    same("multi_margin_loss", x, torch.tensor([0, 1]))
    same("multi_margin_loss", x, torch.tensor([[0, 1, 2]]))
    same("multi_margin_loss", x, torch.tensor([0, 1, 2], dtype=torch.int32))
    same("multi_margin_loss", x, torch.tensor([0.0, 1, 2]))
    same("multi_margin_loss", rnd(2, 3, 4), torch.tensor([0, 1]))
    same("multi_margin_loss", rnd(3, 0), torch.zeros(3, dtype=torch.int64))
    same("multi_margin_loss", rnd(0), torch.tensor([0]))
    same("multi_margin_loss", x, torch.tensor([0, 1, 2]), p=3)
    same("multi_margin_loss", x, torch.tensor([0, 1, 2]), weight=torch.ones(3))
    same("multi_margin_loss", x, torch.tensor([0, 1, 2]), weight=torch.ones(1, 4))
    same("multi_margin_loss", x, torch.tensor([0, 1, 2]), weight=torch.ones(4, dtype=torch.float64))
    same("multi_margin_loss", x, torch.tensor([0, 1, 2]), reduction="bad")
    for dt in (torch.float16, torch.bfloat16, torch.int64, torch.complex64):
        same("multi_margin_loss", x.to(dt), torch.tensor([0, 1, 2]))  # NotImplementedError
    same("multi_margin_loss", torch.randn(()), torch.tensor(1))
    # torch's order: the shape checks, then an empty batch returns, then the dtypes
    same("multi_margin_loss", rnd(2, 3, dtype=torch.float16), torch.zeros(3, dtype=torch.int64))
    same("multi_margin_loss", rnd(0, 3), torch.zeros(0, dtype=torch.int32), reduction="none")
    same("multi_margin_loss", rnd(0, 3, dtype=torch.float16), torch.zeros(0, dtype=torch.int64), reduction="none")
    # (0, C): torch leaves 'mean' / 'sum' uninitialised; kiln returns the mean / sum of nothing
    same("multi_margin_loss", rnd(0, 4), torch.zeros(0, dtype=torch.int64), reduction="none")
    k = KF.multi_margin_loss(_k(rnd(0, 4)), _k(torch.zeros(0, dtype=torch.int64)))
    assert k.shape == () and np.isnan(k.item())
    assert KF.multi_margin_loss(_k(rnd(0, 4)), _k(torch.zeros(0, dtype=torch.int64)), reduction="sum").item() == 0


def test_multi_margin_loss_p_float_and_autocast():
    x, t = rnd(3, 4), torch.tensor([0, 1, 2])
    same("multi_margin_loss", x, t, p=2.0)
    with torch.autocast("cpu", dtype=torch.bfloat16), kiln.autocast("cpu", dtype=kiln.bfloat16):
        same("multi_margin_loss", x.bfloat16(), t)  # float32 under autocast, as torch
        same("multilabel_margin_loss", x.bfloat16(), torch.tensor([[0, -1, 0, 0]] * 3))
        same("soft_margin_loss", x.bfloat16(), torch.ones(3, 4))


# ---- multilabel_margin_loss -----------------------------------------------------------------------
def _ml_targets(n, c, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.randint(0, c, (n, c), generator=g)
    stop = torch.randint(0, c + 1, (n,), generator=g)
    for i in range(n):
        if stop[i] < c:
            t[i, stop[i]] = -1  # the list ends here; what follows is ignored (including other -1s)
    return t


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_multilabel_margin_loss(reduction, dtype):
    x = rnd(9, 6, dtype=dtype, scale=0.7)
    t = _ml_targets(9, 6, 3)
    t[0] = torch.tensor([2, 2, 5, -1, 1, 1])  # duplicates count twice, as torch's loop
    t[1] = -1  # no targets
    t[2] = torch.arange(6)  # every class a target: nothing to compare against
    same("multilabel_margin_loss", x, t, reduction=reduction, grad=(0,))
    same("multilabel_margin_loss", x.t().contiguous().t(), t, reduction=reduction)
    same("multilabel_margin_loss", x[3], t[3], reduction=reduction, grad=(0,))  # 1-D: 0-dim result
    same("multilabel_margin_loss", x[:1], t[:1], reduction=reduction, grad=(0,))
    same("multilabel_margin_loss", x[0, 0], torch.tensor(0), reduction=reduction)
    same("multilabel_margin_loss", x[0, 0], torch.tensor(-1), reduction=reduction)


def test_multilabel_margin_loss_errors():
    x = rnd(3, 4)
    same("multilabel_margin_loss", x, torch.tensor([[0, 1, -1, 4]] * 3))
    same("multilabel_margin_loss", x, torch.tensor([[0, 1, -2, 3]] * 3))
    same("multilabel_margin_loss", x, torch.tensor([[0, 1, -1]] * 3))
    same("multilabel_margin_loss", rnd(4), torch.zeros(3, dtype=torch.int64))
    same("multilabel_margin_loss", rnd(4), torch.zeros(1, 4, dtype=torch.int64))
    same("multilabel_margin_loss", rnd(2, 3, 4), torch.zeros(2, 3, 4, dtype=torch.int64))
    same("multilabel_margin_loss", rnd(3, 0), torch.zeros(3, 0, dtype=torch.int64))
    same("multilabel_margin_loss", x, torch.zeros(3, 4, dtype=torch.int64), reduction="bad")
    for dt in (torch.float16, torch.bfloat16, torch.int64):
        same("multilabel_margin_loss", x.to(dt), torch.zeros(3, 4, dtype=torch.int64))
    same("multilabel_margin_loss", rnd(0, 4), torch.zeros(0, 4, dtype=torch.int64), reduction="none")
    same("multilabel_margin_loss", x, torch.zeros(3, 4, dtype=torch.int32))
    # torch's order: the shape checks, then an empty batch returns, then the dtypes
    same("multilabel_margin_loss", rnd(3, 4, dtype=torch.float16), torch.zeros(3, 3, dtype=torch.int64))
    same("multilabel_margin_loss", rnd(0, 4, dtype=torch.float16), torch.zeros(0, 4, dtype=torch.int32),
         reduction="none")


# ---- triplet_margin_loss / triplet_margin_with_distance_loss ---------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.5])
@pytest.mark.parametrize("swap", [False, True])
def test_triplet_margin_loss(reduction, p, swap):
    a, pos, neg = rnd(6, 5), rnd(6, 5, seed=1), rnd(6, 5, seed=2)
    for margin in (1.0, 0.1, 4.0):
        same("triplet_margin_loss", a, pos, neg, margin, p, swap=swap, reduction=reduction, grad=(0, 1, 2))
    same("triplet_margin_loss", a[0], pos[0], neg[0], p=p, swap=swap, reduction=reduction, grad=(0,))
    same("triplet_margin_loss", rnd(2, 3, 5), rnd(2, 3, 5, seed=1), rnd(2, 3, 5, seed=2), p=p, swap=swap,
         reduction=reduction, grad=(0, 1))
    same("triplet_margin_loss", a.double(), pos, neg, p=p, swap=swap, eps=1e-3, reduction=reduction)


def test_triplet_margin_loss_errors_and_dtypes():
    a = rnd(2, 4)
    same("triplet_margin_loss", a, a, rnd(4))
    same("triplet_margin_loss", a, a, a, margin=0)
    same("triplet_margin_loss", a, a, a, margin=-1.0)
    same("triplet_margin_loss", a, a, a, margin=float("nan"))  # torch tests margin <= 0: NaN passes
    same("triplet_margin_loss", a, rnd(3, 4), a)
    same("triplet_margin_loss", a, a, a, reduction="bad")
    same("triplet_margin_loss", torch.ones(2, 4, dtype=torch.int64), torch.zeros(2, 4, dtype=torch.int64),
         torch.ones(2, 4, dtype=torch.int64))
    same("triplet_margin_loss", rnd(4, dtype=torch.float16), rnd(4, seed=1, dtype=torch.float16),
         rnd(4, seed=2, dtype=torch.float16))
    same("triplet_margin_loss", rnd(0, 4), rnd(0, 4), rnd(0, 4), reduction="none")


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("swap", [False, True])
def test_triplet_margin_with_distance_loss(reduction, swap):
    a, pos, neg = rnd(6, 5), rnd(6, 5, seed=1), rnd(6, 5, seed=2)
    same("triplet_margin_with_distance_loss", a, pos, neg, swap=swap, reduction=reduction, grad=(0, 1, 2))

    def cos_dist(lib):
        return lambda x, y: 1.0 - lib.nn.functional.cosine_similarity(x, y)

    want = TF.triplet_margin_with_distance_loss(a, pos, neg, distance_function=cos_dist(torch), margin=0.3,
                                                swap=swap, reduction=reduction)
    got = KF.triplet_margin_with_distance_loss(_k(a), _k(pos), _k(neg), distance_function=cos_dist(kiln),
                                               margin=0.3, swap=swap, reduction=reduction)
    _check(got, want, 2e-5, 2e-6)


def test_triplet_margin_with_distance_loss_errors():
    a = rnd(2, 4)
    same("triplet_margin_with_distance_loss", a, a, a, margin=0.0)
    same("triplet_margin_with_distance_loss", a, a, a, reduction="bad")
    same("triplet_margin_with_distance_loss", a, a, rnd(4))

    def boom(x, y):
        raise KeyError("from the distance function")

    with pytest.raises(KeyError):
        KF.triplet_margin_with_distance_loss(_k(a), _k(a), _k(a), distance_function=boom)
    with pytest.raises(TypeError):
        KF.triplet_margin_with_distance_loss(_k(a), _k(a), _k(a), distance_function=lambda x, y: 3)


# ---- modules -------------------------------------------------------------------------------------------
def _mod(name, ctor_kw, *inputs, rtol=2e-5):
    tm = getattr(torch.nn, name)(**ctor_kw)
    km = getattr(kiln.nn, name)(**{k: _conv(v) for k, v in ctor_kw.items()})
    _check(km(*[_conv(i) for i in inputs]), tm(*inputs), rtol, 2e-6)


def test_loss_modules_like_torch():
    x, y = rnd(4, 5), rnd(4, 5, seed=1)
    tgt = torch.tensor([0, 4, 2, 1])
    pm = torch.tensor([1.0, -1, 1, -1, 1])
    _mod("PoissonNLLLoss", dict(log_input=False, full=True, eps=1e-3), x.abs(), y.abs() * 3)
    _mod("GaussianNLLLoss", dict(full=True, eps=1e-4, reduction="sum"), x, y, y.abs())
    _mod("GaussianNLLLoss", dict(), x, y, 0.5)
    _mod("HingeEmbeddingLoss", dict(margin=0.5), x, pm)
    _mod("SoftMarginLoss", dict(reduction="none"), x, pm)
    _mod("MultiLabelSoftMarginLoss", dict(weight=y[0].abs()), x, (y > 0).float())
    _mod("MultiMarginLoss", dict(p=2, margin=0.5, weight=y[0].abs()), x, tgt)
    _mod("MultiLabelMarginLoss", dict(), x, _ml_targets(4, 5, 1))
    _mod("TripletMarginLoss", dict(margin=0.5, p=1.0, swap=True), x, y, rnd(4, 5, seed=2))
    _mod("TripletMarginWithDistanceLoss", dict(margin=0.5), x, y, rnd(4, 5, seed=2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _mod("NLLLoss2d", dict(), torch.log_softmax(rnd(2, 3, 4, 4), 1), torch.zeros(2, 4, 4, dtype=torch.int64))
        _mod("HingeEmbeddingLoss", dict(size_average=False), x, pm)
    with pytest.warns(FutureWarning, match="NLLLoss2d"):
        kiln.nn.NLLLoss2d()
    assert isinstance(kiln.nn.TripletMarginWithDistanceLoss().distance_function, kiln.nn.PairwiseDistance)
    assert kiln.nn.MultiMarginLoss(weight=kiln.ones(3)).weight.shape == (3,)  # a buffer, as torch's
    assert "weight" in dict(kiln.nn.MultiLabelSoftMarginLoss(weight=kiln.ones(3)).named_buffers())


@pytest.mark.parametrize("lib", [torch, kiln])
def test_loss_module_constructor_errors(lib):
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        lib.nn.MultiMarginLoss(p=3)
    with pytest.raises(ValueError, match="expected weight to be None or 1D tensor, got 2D"):
        lib.nn.MultiMarginLoss(weight=lib.ones(2, 2))
    with pytest.raises(ValueError, match="expected margin to be greater than 0"):
        lib.nn.TripletMarginLoss(margin=0.0)
    with pytest.raises(ValueError, match="expected margin to be greater than 0"):
        lib.nn.TripletMarginWithDistanceLoss(margin=-1.0)


def test_top_level_loss_ops_take_torch_integer_reduction():
    x, y = rnd(4, 5), rnd(4, 5, seed=1)
    pm = torch.tensor([1.0, -1, 1, -1])
    for red in (0, 1, 2):
        _check(kiln.hinge_embedding_loss(_k(x), _k(pm[:, None]), 0.5, red),
               torch.hinge_embedding_loss(x, pm[:, None], 0.5, red), 2e-5, 2e-6)
        _check(kiln.poisson_nll_loss(_k(x), _k(y.abs()), True, True, 1e-8, red),
               torch.poisson_nll_loss(x, y.abs(), True, True, 1e-8, red), 2e-5, 2e-6)
        _check(kiln.triplet_margin_loss(_k(x), _k(y), _k(x * 2), reduction=red),
               torch.triplet_margin_loss(x, y, x * 2, reduction=red), 2e-5, 2e-6)
        _check(kiln.margin_ranking_loss(_k(x[0]), _k(y[0]), _k(pm.repeat(2)[:5]), 0.1, red),
               torch.margin_ranking_loss(x[0], y[0], pm.repeat(2)[:5], 0.1, red), 2e-5, 2e-6)
        _check(kiln.cosine_embedding_loss(_k(x), _k(y), _k(pm), 0.2, red),
               torch.cosine_embedding_loss(x, y, pm, 0.2, red), 2e-5, 2e-6)
        _check(kiln.kl_div(_k(x), _k(y.abs()), red), torch.kl_div(x, y.abs(), red), 2e-5, 2e-6)
        _check(kiln.kl_div(_k(x), _k(y), red, log_target=True), torch.kl_div(x, y, red, log_target=True), 2e-5, 2e-6)
        _check(kiln.binary_cross_entropy_with_logits(_k(x), _k(y.sigmoid()), None, _k(y[0].abs()), red),
               torch.binary_cross_entropy_with_logits(x, y.sigmoid(), None, y[0].abs(), red), 2e-5, 2e-6)
    lp = torch.log_softmax(rnd(6, 2, 4), -1)
    tg = torch.tensor([[1, 2], [3, 3]])
    _check(kiln.ctc_loss(_k(lp), _k(tg), [6, 5], [2, 2]), torch.ctc_loss(lp, tg, [6, 5], [2, 2]), 2e-5, 2e-6)
    # without a reduction torch's top-level ops do not reduce (its parser reads the schema's Mean as 0)
    _check(kiln.hinge_embedding_loss(_k(x), _k(pm[:, None])), torch.hinge_embedding_loss(x, pm[:, None]), 2e-5, 2e-6)
    _check(kiln.kl_div(_k(x), _k(y)), torch.kl_div(x, y), 2e-5, 2e-6)
    # any int other than 1 and 2 means 'none'; a non-int is a TypeError; the op checks no margin
    for red in (3, -1):
        _check(kiln.hinge_embedding_loss(_k(x), _k(x), 1.0, red), torch.hinge_embedding_loss(x, x, 1.0, red), 0, 0)
    for bad in (1.0, True, "mean"):
        with pytest.raises(TypeError):
            torch.hinge_embedding_loss(x, x, 1.0, bad)
        with pytest.raises(TypeError):
            kiln.hinge_embedding_loss(_k(x), _k(x), 1.0, bad)
    for m in (0.0, -1.0):
        _check(kiln.triplet_margin_loss(_k(x), _k(y), _k(x * 2), m, reduction=1),
               torch.triplet_margin_loss(x, y, x * 2, m, reduction=1), 2e-5, 2e-6)
