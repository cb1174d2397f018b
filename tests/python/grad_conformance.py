"""Gradient conformance helpers: the same function run on torch and kiln leaves, gradients compared
(kiln.autograd.grad vs torch.autograd.grad with the same random grad_outputs), plus kiln's own
gradcheck / gradgradcheck against finite differences."""
import torch

import kiln
from helpers import assert_same, to_kiln


def domain(shape, low=-3.0, high=3.0, seed=0, away=(), gap=0.15, dtype=torch.float64):
    """Uniform values in [low, high] pushed at least `gap` away from each point in `away` (kinks)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.empty(shape, dtype=torch.float64).uniform_(low, high, generator=g)
    for k in away:
        d = x - k
        x = torch.where(d.abs() < gap, k + gap * torch.where(d < 0, -1.0, 1.0).to(x.dtype), x)
    if dtype.is_complex:
        y = domain(shape, low, high, seed + 101, away, gap)
        return torch.complex(x, y).to(dtype)
    return x.to(dtype)


def _rand_like(t, gen):
    if t.dtype.is_complex:
        return torch.randn(t.shape, dtype=t.dtype, generator=gen)
    return torch.randn(t.shape, dtype=torch.float64, generator=gen).to(t.dtype)


def _is_diff(t):
    return isinstance(t, torch.Tensor) and (t.dtype.is_floating_point or t.dtype.is_complex)


def _leaves(inputs, grad_idx):
    tin, kin, diff = [], [], []
    for i, a in enumerate(inputs):
        if isinstance(a, torch.Tensor):
            ka, ta = to_kiln(a), a.detach()
            if (grad_idx is None and _is_diff(a)) or (grad_idx is not None and i in grad_idx):
                ta.requires_grad_()
                ka.requires_grad_()
                diff.append(i)
            tin.append(ta)
            kin.append(ka)
        else:
            tin.append(a)
            kin.append(a)
    return tin, kin, diff


def _as_list(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def compare_grads(fn, *inputs, grad_idx=None, rtol=None, atol=None, seed=0, check_forward=True,
                  double=False, msg=""):
    """fn(m, *args) for m in (torch, kiln). Tensor args of a floating/complex dtype (or those listed in
    grad_idx) become leaves that require grad. Compares the forward, the gradients for one random
    grad_output per differentiable output and, with double=True, the gradients of those gradients
    (create_graph=True, a second random projection)."""
    tin, kin, diff = _leaves(inputs, grad_idx)
    tout = _as_list(fn(torch, *tin))
    kout = _as_list(fn(kiln, *kin))
    assert len(tout) == len(kout), msg
    pairs = [(t, k) for t, k in zip(tout, kout) if isinstance(t, torch.Tensor) and t.requires_grad]
    assert pairs, f"{msg}: torch output does not require grad"
    for t, k in pairs:
        assert isinstance(k, kiln.Tensor) and k.requires_grad, f"{msg}: kiln output does not require grad"
        if check_forward:
            assert_same(k.detach(), t.detach(), rtol=rtol, atol=atol, msg=f"{msg} forward")
    gen = torch.Generator().manual_seed(seed)
    tgo = [_rand_like(t, gen) for t, _ in pairs]
    kgo = [to_kiln(g) for g in tgo]
    tx = [tin[i] for i in diff]
    kx = [kin[i] for i in diff]
    tg = torch.autograd.grad([t for t, _ in pairs], tx, tgo, allow_unused=True, create_graph=double)
    kg = kiln.autograd.grad([k for _, k in pairs], kx, kgo, allow_unused=True, create_graph=double)
    for j, (a, b) in enumerate(zip(tg, kg)):
        if a is None and b is None:
            continue
        a = torch.zeros_like(tx[j]) if a is None else a
        b = kiln.zeros_like(kx[j]) if b is None else b
        assert_same(b.detach(), a.detach(), rtol=rtol, atol=atol, msg=f"{msg} grad of input {diff[j]}")
    if double:
        tg2 = [(a, b) for a, b in zip(tg, kg) if a is not None and a.requires_grad]
        if not tg2:
            return
        for _, b in tg2:
            assert b is not None and b.requires_grad, f"{msg}: kiln gradient is not differentiable"
        tv = [_rand_like(a, gen) for a, _ in tg2]
        kv = [to_kiln(v) for v in tv]
        tgg = torch.autograd.grad([a for a, _ in tg2], tx, tv, allow_unused=True)
        kgg = kiln.autograd.grad([b for _, b in tg2], kx, kv, allow_unused=True)
        for j, (a, b) in enumerate(zip(tgg, kgg)):
            a = torch.zeros_like(tx[j]) if a is None else a
            b = kiln.zeros_like(kx[j]) if b is None else b
            assert_same(b, a, rtol=rtol, atol=atol, msg=f"{msg} double grad of input {diff[j]}")


def kiln_gradcheck(fn, *inputs, grad_idx=None, second=False, atol=1e-5, rtol=1e-3):
    """kiln.autograd.gradcheck (and gradgradcheck when second) of fn(kiln, *args) on float64/complex128
    copies of the torch inputs."""
    _, kin, _ = _leaves(inputs, grad_idx)
    f = lambda *xs: fn(kiln, *xs)  # noqa: E731
    assert kiln.autograd.gradcheck(f, tuple(kin), atol=atol, rtol=rtol)
    if second:
        assert kiln.autograd.gradgradcheck(f, tuple(kin), atol=atol, rtol=rtol)
