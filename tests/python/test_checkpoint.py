"""kiln.utils.checkpoint and kiln.autograd.graph's saved-tensor hooks vs torch: gradients of
checkpointed functions equal those without checkpointing (both variants, kwargs, non-tensor
arguments, inputs that do not require grad, dropout with preserved RNG state, autocast inside),
activations are really dropped (a pack hook sees only slots), checkpoint_sequential, torch's warnings
and errors; saved_tensors_hooks see every saved tensor and can replace it."""
import warnings

import pytest
import torch

import kiln
import kiln.utils.checkpoint as kcp
import torch.utils.checkpoint as tcp
from helpers import assert_same, to_kiln


def block(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(6, 8), lib.nn.GELU(), lib.nn.Linear(8, 6), lib.nn.Tanh())


def _grads(lib, cp, use_reentrant, with_dropout=False):
    lib.manual_seed(0)
    m = block(lib)
    if lib is kiln:
        m.load_state_dict({k: to_kiln(v) for k, v in block(torch).state_dict().items()})
    x = lib.ones(3, 6) * 0.3
    x.requires_grad_(True)

    def f(a, scale, *, shift=0.0):
        y = m(a) * scale + shift
        return lib.nn.functional.dropout(y, 0.5, training=with_dropout)
    if cp is None:
        y = f(x, 2.0, shift=1.0) if not use_reentrant else f(x, 2.0)
    elif use_reentrant:
        y = cp.checkpoint(f, x, 2.0, use_reentrant=True)
    else:
        y = cp.checkpoint(f, x, 2.0, use_reentrant=False, shift=1.0)
    y.square().sum().backward()
    return [x.grad] + [p.grad for p in m.parameters()]


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_same_gradients_as_without(use_reentrant):
    for lib, cp in ((kiln, kcp), (torch, tcp)):
        plain, ck = _grads(lib, None, use_reentrant), _grads(lib, cp, use_reentrant)
        for a, b in zip(plain, ck):
            assert lib.allclose(a, b, atol=1e-6)
    # and kiln's equal torch's
    for k, t in zip(_grads(kiln, kcp, use_reentrant), _grads(torch, tcp, use_reentrant)):
        assert_same(k, t, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_dropout_replays_the_same_mask(use_reentrant):
    plain = _grads(kiln, None, use_reentrant, with_dropout=True)
    ck = _grads(kiln, kcp, use_reentrant, with_dropout=True)
    for a, b in zip(plain, ck):
        assert kiln.allclose(a, b, atol=1e-6)


def test_activations_are_dropped():
    m = block(kiln)
    x = kiln.randn(4, 6, requires_grad=True)
    seen = []

    def pack(t):
        seen.append(t)
        return t
    with kiln.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        kcp.checkpoint(m, x, use_reentrant=False).sum().backward()
    # the outer hooks never see the block's intermediates: the checkpoint's own hooks are innermost
    assert seen == []
    g = x.grad.clone()
    x.grad = None
    m(x).sum().backward()
    assert kiln.allclose(g, x.grad, atol=1e-6)


def test_input_without_grad_and_autocast():
    m = block(kiln)
    x = kiln.randn(4, 6)  # only the parameters need gradients
    with kiln.autocast("cpu"):
        y = kcp.checkpoint(m, x, use_reentrant=False)
    y.float().sum().backward()
    g = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    with kiln.autocast("cpu"):
        y2 = m(x)
    y2.float().sum().backward()
    for a, p in zip(g, m.parameters()):
        assert kiln.allclose(a, p.grad, atol=1e-6)


def test_checkpoint_sequential():
    for use_reentrant in (False, True):
        m = kiln.nn.Sequential(*[kiln.nn.Linear(5, 5) for _ in range(4)])
        x = kiln.randn(2, 5, requires_grad=True)
        kcp.checkpoint_sequential(m, 2, x, use_reentrant=use_reentrant).sum().backward()
        g = x.grad.clone()
        x.grad = None
        m(x).sum().backward()
        assert kiln.allclose(g, x.grad, atol=1e-6)


def test_warnings_and_errors_as_torch():
    for lib, cp in ((kiln, kcp), (torch, tcp)):
        x = lib.ones(2, requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            cp.checkpoint(lambda a: a * 2, x)
        assert any("use_reentrant parameter should be passed explicitly" in str(m.message) for m in w)
        with pytest.raises(ValueError, match="Unexpected keyword arguments: k"):
            cp.checkpoint(lambda a, k=1: a * k, x, use_reentrant=True, k=2)
        with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
            cp.checkpoint(lambda a: a, x, use_reentrant=True, debug=True)


def test_saved_tensors_hooks_match_torch():
    res = {}
    for lib in (torch, kiln):
        x = (lib.ones(3) * 2).requires_grad_()
        packed = []

        def pack(t):
            packed.append(tuple(t.shape))
            return t * 0 + 10  # backward sees a different value
        with lib.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = (x * x).sum()
        y.backward()
        res[lib] = (packed, x.grad.tolist())
    assert res[kiln] == res[torch]
    for lib in (torch, kiln):
        with lib.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
            with pytest.raises(RuntimeError, match="no hooks here"):
                with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                    pass
        x = lib.ones(2, requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: 3):
            y = (x * x).sum()
        with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor"):
            y.backward()


def test_rng_state_round_trip():
    s = kiln.get_rng_state()
    a = kiln.rand(4)
    kiln.set_rng_state(s)
    assert kiln.equal(a, kiln.rand(4))
    g = kiln.Generator().manual_seed(3)
    st = g.get_state()
    b = kiln.rand(3, generator=g)
    g.set_state(st)
    assert kiln.equal(b, kiln.rand(3, generator=g))
    assert kiln.default_generator.initial_seed() == kiln.initial_seed()
