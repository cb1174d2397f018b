"""kiln._grouped_mm / kiln.nn.functional.grouped_mm beyond the op database (op_db_lowp.py compares them
with torch 2.13 where torch's CPU kernel runs): what torch's CPU kernel refuses or leaves undefined
(strides that are not multiples of 16 bytes, bias, rows past offs[-1], a zero-stride upstream
gradient), the derivative in every layout, bit-identity with plain per-group products, thread-count
invariance, offset errors, and the mixture-of-experts layer against a per-expert loop of plain ops."""
import numpy as np
import pytest
import torch

import kiln
import kiln.nn.functional as KF
from helpers import to_kiln, to_torch

LAYOUTS = ("2Dx3D", "3Dx2D", "2Dx2D", "3Dx3D")


@pytest.fixture(autouse=True)
def _seeded():
    """Every test draws the same inputs on every run (scales, upstream gradients, bias)."""
    torch.manual_seed(0)
    kiln.manual_seed(0)


def _case(layout, dtype=torch.float32, seed=0, ragged=True):
    """Operands with odd sizes and strides (views of padded buffers), offs with an empty group and,
    for the cut layouts, an end before the extent."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g).to(dtype)  # noqa: E731
    E, M, K, N = 3, 7, 13, 11
    if layout == "2Dx3D":
        a, b = r(23, K + 3)[:, 1:K + 1], r(E, N, K).transpose(1, 2)
        offs = [5, 5, 19] if ragged else [5, 5, 23]
    elif layout == "3Dx2D":
        a, b = r(E, M, K + 2)[:, :, :K], r(K, 29)[:, 1:]
        offs = [9, 9, 25] if ragged else [9, 9, 28]
    elif layout == "2Dx2D":
        a, b = r(30, M).t(), r(30, N + 1)[:, :N]
        offs = [4, 4, 21] if ragged else [4, 4, 30]
    else:
        a, b, offs = r(E, M, K), r(E, K, N), None
    return a, b, (torch.tensor(offs, dtype=torch.int32) if offs is not None else None)


def _loop(layout, a, b, offs, bias=None):
    """The same product as a loop of plain ops, in float64 (zeros past the last offset)."""
    a, b = a.double(), b.double()
    if layout == "3Dx3D":
        out = a @ b
        return out + bias.double()[:, None, :] if bias is not None else out
    ends = offs.tolist()
    starts = [0] + ends[:-1]
    if layout == "2Dx3D":
        out = torch.zeros(a.shape[0], b.shape[2], dtype=torch.float64)
        for g, (s, e) in enumerate(zip(starts, ends)):
            out[s:e] = a[s:e] @ b[g] + (bias.double()[g] if bias is not None else 0)
    elif layout == "3Dx2D":
        out = torch.zeros(a.shape[1], b.shape[1], dtype=torch.float64)
        for g, (s, e) in enumerate(zip(starts, ends)):
            out[:, s:e] = a[g] @ b[:, s:e] + (bias.double()[s:e] if bias is not None else 0)
    else:
        out = torch.stack([a[:, s:e] @ b[s:e] for s, e in zip(starts, ends)])
        if bias is not None:
            out = out + bias.double()[:, None, :]
    return out


def _k(t):
    return None if t is None else to_kiln(t)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_any_strides_and_rows_past_offs(layout, dtype):
    a, b, offs = _case(layout, dtype)
    got = to_torch(kiln._grouped_mm(_k(a), _k(b), offs=_k(offs))).double()
    want = _loop(layout, a, b, offs)
    tol = {torch.float32: 1e-5, torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}[dtype]
    assert got.shape == want.shape
    assert torch.allclose(got, want, rtol=2 * tol, atol=2 * tol * want.abs().max().item())
    if layout == "2Dx3D":
        assert (got[19:] == 0).all()
    if layout == "3Dx2D":
        assert (got[:, 25:] == 0).all()


@pytest.mark.parametrize("layout", LAYOUTS[:3])
def test_rows_equal_plain_products(layout):
    """Each group's block is bit for bit what kiln's own matmul gives for that group alone."""
    a, b, offs = _case(layout, torch.bfloat16, seed=3)
    ka, kb = to_kiln(a), to_kiln(b)
    got = to_torch(kiln._grouped_mm(ka, kb, offs=to_kiln(offs)))
    ends = offs.tolist()
    for g, (s, e) in enumerate(zip([0] + ends[:-1], ends)):
        if layout == "2Dx3D":
            want, blk = kiln.matmul(ka[s:e], kb[g]), got[s:e]
        elif layout == "3Dx2D":
            want, blk = kiln.matmul(ka[g], kb[:, s:e]), got[:, s:e]
        else:
            want, blk = kiln.matmul(ka[:, s:e], kb[s:e]), got[g]
        assert torch.equal(to_torch(want).view(torch.int16), blk.contiguous().view(torch.int16))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_bias(layout):
    a, b, offs = _case(layout, seed=5)
    G = 3
    n = b.shape[-1]
    bias = torch.randn(n) if layout == "3Dx2D" else torch.randn(G, n)
    got = to_torch(KF.grouped_mm(_k(a), _k(b), offs=_k(offs), bias=_k(bias))).double()
    want = _loop(layout, a, b, offs, bias)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="bias must have shape"):
        kiln._grouped_mm(_k(a), _k(b), offs=_k(offs), bias=kiln.zeros(n + 1))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_lowp_bias_rounds_once(layout, dtype):
    """float16 / bfloat16 with a bias: the products summed in float32, the bias added there and one
    rounding, as kiln's addmm / baddbmm (and torch's) round; rows / columns past offs[-1] stay zero.
    Against the float64 loop rounded once (float32 sums in another order may move an element by one
    unit in the last place)."""
    a, b, offs = _case(layout, dtype=dtype, seed=11)
    n = b.shape[-1]
    bias = (torch.randn(n) if layout == "3Dx2D" else torch.randn(3, n)).to(dtype) * 8
    got = to_torch(KF.grouped_mm(_k(a), _k(b), offs=_k(offs), bias=_k(bias))).double()
    want = _loop(layout, a, b, offs, bias).to(torch.float32).to(dtype).double()
    ulp = torch.nextafter(want.abs().to(dtype), torch.tensor(float("inf"), dtype=dtype)).double() - want.abs()
    assert (got == want).double().mean().item() >= 0.97
    assert bool(((got - want).abs() <= ulp + 1e-4).all())


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("with_bias", [False, True])
def test_backward_against_loop(layout, with_bias):
    a, b, offs = _case(layout, seed=7)
    n = b.shape[-1]
    bias = (torch.randn(n) if layout == "3Dx2D" else torch.randn(3, n)) if with_bias else None
    ka, kb = to_kiln(a).requires_grad_(), to_kiln(b).requires_grad_()
    kbias = to_kiln(bias).requires_grad_() if with_bias else None
    y = kiln._grouped_mm(ka, kb, offs=_k(offs), bias=kbias)
    up = torch.randn(tuple(y.shape))
    (y * to_kiln(up)).sum().backward()
    ta, tb = a.double().requires_grad_(), b.double().requires_grad_()
    tbias = bias.double().requires_grad_() if with_bias else None
    (_loop(layout, ta, tb, offs, tbias) * up.double()).sum().backward()
    pairs = [(ka.grad, ta.grad), (kb.grad, tb.grad)] + ([(kbias.grad, tbias.grad)] if with_bias else [])
    for got, want in pairs:
        assert tuple(got.shape) == tuple(want.shape)
        assert torch.allclose(to_torch(got).double(), want, rtol=1e-5, atol=1e-5)


def test_sum_backward_zero_stride_gradient():
    """torch 2.13's CPU kernel fails here (its upstream gradient has strides (0, 0))."""
    a, b, offs = _case("2Dx3D", seed=9)
    ka, kb = to_kiln(a).requires_grad_(), to_kiln(b).requires_grad_()
    kiln._grouped_mm(ka, kb, offs=_k(offs)).sum().backward()
    ta, tb = a.double().requires_grad_(), b.double().requires_grad_()
    _loop("2Dx3D", ta, tb, offs).sum().backward()
    assert torch.allclose(to_torch(ka.grad).double(), ta.grad, rtol=1e-5, atol=1e-5)
    assert torch.allclose(to_torch(kb.grad).double(), tb.grad, rtol=1e-5, atol=1e-5)
    assert (to_torch(ka.grad)[19:] == 0).all()


def test_thread_count_invariant():
    g = torch.Generator().manual_seed(11)
    a = torch.randn(300, 96, generator=g).to(torch.bfloat16)
    b = torch.randn(6, 96, 80, generator=g).to(torch.bfloat16)
    offs = torch.tensor([10, 60, 60, 200, 250, 300], dtype=torch.int32)
    old = kiln.get_num_threads()
    try:
        kiln.set_num_threads(1)
        one = to_torch(kiln._grouped_mm(to_kiln(a), to_kiln(b), offs=to_kiln(offs)))
        kiln.set_num_threads(2)
        two = to_torch(kiln._grouped_mm(to_kiln(a), to_kiln(b), offs=to_kiln(offs)))
    finally:
        kiln.set_num_threads(old)
    assert torch.equal(one.view(torch.int16), two.view(torch.int16))


@pytest.mark.parametrize("ends,msg", [([5, 3, 19], "non-decreasing"), ([5, 5, 40], "within"), ([-1, 5, 19], "within")])
def test_offset_errors(ends, msg):
    a, b, _ = _case("2Dx3D")
    with pytest.raises(RuntimeError, match=msg):
        kiln._grouped_mm(_k(a), _k(b), offs=kiln.tensor(ends, dtype=kiln.int32))


def test_mixture_of_experts_matches_per_expert_loop():
    kiln.manual_seed(0)
    moe = kiln.nn.MixtureOfExperts(dim=16, hidden=24, num_experts=5, top_k=2)
    x = kiln.randn(3, 7, 16, requires_grad=True)
    y = moe(x)
    assert tuple(y.shape) == (3, 7, 16)
    # the same layer as a loop over experts, in float64 with torch
    p = {n: to_torch(t.detach()).double().requires_grad_() for n, t in moe.named_parameters()}
    tx = to_torch(x.detach()).double().requires_grad_()
    tok = tx.reshape(-1, 16)
    probs = torch.softmax(tok @ p["router"].t(), -1)
    w, e = torch.topk(probs, 2, -1)
    w = w / w.sum(-1, keepdim=True)
    want = torch.zeros_like(tok)
    for ex in range(5):
        for slot in range(2):
            rows = (e[:, slot] == ex).nonzero().flatten()
            h = torch.nn.functional.silu(tok[rows] @ p["w1"][ex]) @ p["w2"][ex]
            want = want.index_add(0, rows, h * w[rows, slot:slot + 1])
    want = want.reshape(3, 7, 16)
    assert torch.allclose(to_torch(y.detach()).double(), want, rtol=1e-5, atol=1e-6)
    up = torch.randn(3, 7, 16)
    (y * to_kiln(up)).sum().backward()
    (want * up.double()).sum().backward()
    assert torch.allclose(to_torch(x.grad).double(), tx.grad, rtol=1e-4, atol=1e-5)
    for n, t in moe.named_parameters():
        assert torch.allclose(to_torch(t.grad).double(), p[n].grad, rtol=1e-4, atol=1e-5), n
    assert "num_experts=5" in repr(moe)
    with pytest.raises(ValueError):
        kiln.nn.MixtureOfExperts(8, 8, 2, top_k=3)
    assert np.isfinite(y.detach().numpy()).all()
