"""Module-level comparison against torch.nn: same weights (copied by name), same inputs; outputs, input
gradients, parameter gradients and buffers must agree."""
import numpy as np
import pytest
import torch

import kiln

from helpers import to_kiln, to_torch


def sync(km, tm):
    """Copies torch module tm's parameters and buffers into kiln module km (names and order must match)."""
    kp, tp = dict(km.named_parameters()), dict(tm.named_parameters())
    assert list(kp) == list(tp), f"parameter names differ: {list(kp)} vs {list(tp)}"
    kb, tb = dict(km.named_buffers()), dict(tm.named_buffers())
    assert list(kb) == list(tb), f"buffer names differ: {list(kb)} vs {list(tb)}"
    with kiln.no_grad():
        for name, p in kp.items():
            assert tuple(p.shape) == tuple(tp[name].shape), name
            p.copy_(to_kiln(tp[name].detach()))
        for name, b in kb.items():
            b.copy_(to_kiln(tb[name]))


def close(k, t, tol=1e-5, msg=""):
    assert isinstance(k, kiln.Tensor), f"{msg}: expected a kiln Tensor, got {type(k)}"
    assert tuple(k.shape) == tuple(t.shape), f"{msg}: shape {tuple(k.shape)} != {tuple(t.shape)}"
    assert str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], f"{msg}: dtype {k.dtype} != {t.dtype}"
    got = to_torch(k.detach())
    if not t.dtype.is_floating_point:
        assert torch.equal(got, t.detach()), f"{msg}: values differ"
        return
    np.testing.assert_allclose(got.double().numpy(), t.detach().double().numpy(), rtol=tol, atol=tol, err_msg=msg)


def _k(x, grad):
    if isinstance(x, torch.Tensor):
        k = to_kiln(x.detach())
        return k.requires_grad_() if grad and x.is_floating_point() else k
    return x


def _t(x, grad):
    if isinstance(x, torch.Tensor):
        t = x.detach()
        return t.requires_grad_() if grad and x.is_floating_point() else t
    return x


def compare(km, tm, *inputs, tol=1e-5, grad=True, copy=True, out=None, grad_inputs=None, **kwargs):
    """Runs km and tm on the same inputs (kwargs tensors are converted too, without grad) and compares
    the outputs, then the gradients of the inputs and parameters for a random output gradient.
    out: index of the tensor to compare when the modules return tuples (all tensors are compared).
    grad_inputs: which positional inputs get requires_grad (default: all floating ones)."""
    if copy:
        sync(km, tm)
    gi = grad_inputs if grad_inputs is not None else range(len(inputs))
    kin = [_k(x, grad and i in gi) for i, x in enumerate(inputs)]
    tin = [_t(x, grad and i in gi) for i, x in enumerate(inputs)]
    kkw = {n: _k(v, False) for n, v in kwargs.items()}
    tkw = {n: _t(v, False) for n, v in kwargs.items()}
    ky, ty = km(*kin, **kkw), tm(*tin, **tkw)
    if isinstance(ty, tuple):
        assert isinstance(ky, tuple) and len(ky) == len(ty)
        for i, (a, b) in enumerate(zip(ky, ty)):
            if b is None:
                assert a is None, f"output {i}: expected None"
            else:
                close(a, b, tol, f"output {i}")
        ky, ty = ky[out or 0], ty[out or 0]
    else:
        close(ky, ty, tol, "output")
    if not grad or not ty.requires_grad:
        return ky, ty
    g = torch.randn(ty.shape, dtype=ty.dtype, generator=torch.Generator().manual_seed(1))
    ky.backward(to_kiln(g))
    ty.backward(g)
    for i, (a, b) in enumerate(zip(kin, tin)):
        if isinstance(b, torch.Tensor) and b.grad is not None:
            close(a.grad, b.grad, tol, f"grad of input {i}")
    kp, tp = dict(km.named_parameters()), dict(tm.named_parameters())
    for name, p in tp.items():
        if p.grad is None:
            assert kp[name].grad is None or not kp[name].grad.abs().sum().item(), f"grad of {name}: expected None"
        else:
            close(kp[name].grad, p.grad, tol, f"grad of {name}")
    return ky, ty


def raises_like(fn_k, fn_t):
    """fn_t raises; fn_k must raise the same exception type (kiln messages start with '[')."""
    with pytest.raises(Exception) as te:
        fn_t()
    with pytest.raises(type(te.value)) as ke:
        fn_k()
    return ke.value
