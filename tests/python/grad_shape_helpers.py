"""Gradient conformance helpers for test_grad_shape / test_grad_index / test_grad_sort: the same
function run on torch and kiln leaves (layout kept: strides and offset), compared by the gradients
torch.autograd.grad and kiln.autograd.grad return for the same random grad_outputs."""
import torch

import kiln
from helpers import assert_same, to_kiln


def _tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def leaf(t, requires=True):
    """t as a torch leaf with t's layout (strides, offset), requiring grad when floating."""
    t = t.detach()
    if requires and (t.is_floating_point() or t.is_complex()):
        t.requires_grad_()
    return t


def kleaf(t):
    """The kiln copy of torch tensor t (same layout), requiring grad when t does."""
    k = to_kiln(t.detach())
    if t.requires_grad:
        k.requires_grad_()
    return k


def _convert(a):
    if isinstance(a, torch.Tensor):
        return kleaf(a)
    if isinstance(a, (list, tuple)) and a and all(isinstance(x, torch.Tensor) for x in a):
        return type(a)(kleaf(x) for x in a)
    return a


def _leaves(args, cls):
    for a in args:
        if isinstance(a, cls):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (x for x in a if isinstance(x, cls))


def random_like(t, gen):
    if t.is_complex():
        return torch.complex(torch.randn(t.shape, dtype=torch.float64, generator=gen),
                             torch.randn(t.shape, dtype=torch.float64, generator=gen)).to(t.dtype)
    return torch.randn(t.shape, dtype=torch.float64, generator=gen).to(t.dtype)


def _is_zero_or_none(k):
    return k is None or k.numel() == 0 or not bool(kiln.any(k != 0).item())


def _run(fn, targs):
    kargs = [_convert(a) for a in targs]
    tin = [t for t in _leaves(targs, torch.Tensor) if t.requires_grad]
    kin = [k for t, k in zip(_leaves(targs, torch.Tensor), _leaves(kargs, kiln.Tensor)) if t.requires_grad]
    touts = [o for o in _tuple(fn(torch, *targs)) if isinstance(o, torch.Tensor) and o.requires_grad]
    kouts = [o for o in _tuple(fn(kiln, *kargs)) if isinstance(o, kiln.Tensor) and o.requires_grad]
    assert len(kouts) == len(touts), f"{len(kouts)} kiln outputs require grad, torch {len(touts)}"
    return tin, kin, touts, kouts


def _compare(kg, tg, rtol, atol, msg, what):
    for i, (k, t) in enumerate(zip(kg, tg)):
        if t is None:
            assert _is_zero_or_none(k), f"{msg}: input {i}: torch has no {what}"
            continue
        assert k is not None, f"{msg}: input {i}: kiln has no {what}, torch {t}"
        assert_same(k.detach(), t.detach(), rtol, atol, msg=f"{msg}: {what} of input {i}")


def compare_grads(fn, *targs, seed=0, rtol=1e-7, atol=1e-7, check_forward=True, msg=""):
    """fn(lib, *args) on torch args and on their kiln copies: forward values and the gradients of
    every differentiable output with respect to every leaf that requires grad must agree."""
    tin, kin, touts, kouts = _run(fn, targs)
    if check_forward:
        for k, t in zip(kouts, touts):
            assert_same(k.detach(), t.detach(), rtol, atol, msg=msg)
    gen = torch.Generator().manual_seed(seed)
    gos = [random_like(o, gen) for o in touts]
    tg = torch.autograd.grad(touts, tin, gos, allow_unused=True)
    kg = kiln.autograd.grad(kouts, kin, [to_kiln(g) for g in gos], allow_unused=True)
    _compare(kg, tg, rtol, atol, msg, "gradient")
    return kg


def compare_gradgrads(fn, *targs, seed=0, rtol=1e-7, atol=1e-7, msg=""):
    """Second order: the gradient of <first gradients, v> (create_graph=True) on both sides."""
    tin, kin, touts, kouts = _run(fn, targs)
    gen = torch.Generator().manual_seed(seed)
    gos = [random_like(o, gen) for o in touts]
    tg = torch.autograd.grad(touts, tin, gos, create_graph=True, allow_unused=True)
    kg = kiln.autograd.grad(kouts, kin, [to_kiln(g) for g in gos], create_graph=True, allow_unused=True)
    pairs = [(t, k) for t, k in zip(tg, kg) if t is not None and t.requires_grad]
    if not pairs:  # first gradients independent of the inputs
        return
    for _, k in pairs:
        assert k is not None and k.requires_grad, f"{msg}: kiln's first gradient is not differentiable"
    vs = [random_like(t, gen) for t, _ in pairs]
    t2 = torch.autograd.grad([t for t, _ in pairs], tin, vs, allow_unused=True)
    k2 = kiln.autograd.grad([k for _, k in pairs], kin, [to_kiln(v) for v in vs], allow_unused=True)
    _compare(k2, t2, rtol, atol, msg, "second-order gradient")


def rand(*shape, seed=0, dtype=torch.float64, low=-2.0, high=2.0):
    """Random values without ties (unless a test builds them)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)


def kgradcheck(fn, *targs, gradgrad=False):
    """kiln.autograd.gradcheck (and gradgradcheck) of fn(kiln, ...) on kiln copies of float64 args."""
    kargs = [_convert(a) for a in targs]
    f = lambda *a: fn(kiln, *a)  # noqa: E731
    assert kiln.autograd.gradcheck(f, tuple(kargs))
    if gradgrad:
        assert kiln.autograd.gradgradcheck(f, tuple(kargs))
