"""nn.AdaptiveLogSoftmaxWithLoss against torch 2.13: the same weights, then forward (output and
loss), gradients of the input and of every parameter, log_prob, predict (its three branches), the
constructor's and forward's errors, state_dict names and repr."""
import pytest
import torch

import kiln
from helpers import assert_same, to_kiln, to_torch


def _pair(in_features, n_classes, cutoffs, dtype=torch.float32, seed=0, **kw):
    torch.manual_seed(seed)
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(in_features, n_classes, cutoffs, dtype=dtype, **kw)
    km = kiln.nn.AdaptiveLogSoftmaxWithLoss(in_features, n_classes, cutoffs, dtype=getattr(kiln, str(dtype)[6:]), **kw)
    km.load_state_dict({k: to_kiln(v) for k, v in tm.state_dict().items()})
    return tm, km


def _targets(n, n_classes, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, n_classes, (n,), generator=g)


def _grads(module):
    return {k: p.grad for k, p in module.named_parameters()}


@pytest.mark.parametrize("in_features,n_classes,cutoffs,kw", [
    (16, 20, [5, 10], {}),
    (16, 20, [5, 10], {"head_bias": True}),
    (12, 30, [3, 9, 20], {"div_value": 2.0}),
    (10, 40, [4, 8, 16], {"div_value": 3.0}),  # the last cluster's hidden size: 10 // 27 = 0
    (8, 6, [1], {}),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_forward_backward_match_torch(in_features, n_classes, cutoffs, kw, dtype):
    tm, km = _pair(in_features, n_classes, cutoffs, dtype, **kw)
    assert list(km.state_dict()) == list(tm.state_dict())
    x = torch.randn(37, in_features, dtype=dtype, generator=torch.Generator().manual_seed(2))
    target = _targets(37, n_classes)
    target[3] = n_classes - 1  # (every cluster, and the last class, reached)
    target[4] = cutoffs[0]
    tx, kx = x.clone().requires_grad_(), to_kiln(x).requires_grad_()
    tout = tm(tx, target)
    kout = km(kx, to_kiln(target))
    assert type(kout).__name__ == "_ASMoutput" and kout._fields == ("output", "loss")
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-13)
    assert_same(kout.output, tout.output.detach(), **tol)
    assert_same(kout.loss, tout.loss.detach(), **tol)
    tout.loss.backward()
    kout.loss.backward()
    assert_same(kx.grad, tx.grad, **tol)
    kg, tg = _grads(km), _grads(tm)
    assert list(kg) == list(tg)
    for k in tg:
        assert_same(kg[k], tg[k], msg=k, **tol)
    assert_same(km.log_prob(to_kiln(x)), tm.log_prob(x).detach(), **tol)
    assert_same(km.predict(to_kiln(x)), tm.predict(x))


def test_unbatched_and_single_row_clusters():
    tm, km = _pair(16, 20, [5, 10])
    x = torch.randn(16, generator=torch.Generator().manual_seed(3))
    for t in (0, 7, 19):  # shortlist, first and last cluster; a 0-dim target
        tout, kout = tm(x, torch.tensor(t)), km(to_kiln(x), kiln.tensor(t))
        assert kout.output.shape == () and kout.loss.shape == ()
        assert_same(kout.output, tout.output.detach(), rtol=1e-5, atol=1e-6)
        assert_same(kout.loss, tout.loss.detach(), rtol=1e-5, atol=1e-6)
    xb = torch.randn(3, 16, generator=torch.Generator().manual_seed(4))
    target = torch.tensor([1, 7, 15])  # one row in each cluster (torch squeezes those indices to 0-dim)
    assert_same(km(to_kiln(xb), to_kiln(target)).output, tm(xb, target).output.detach(), rtol=1e-5, atol=1e-6)


def test_empty_batch():
    tm, km = _pair(16, 20, [5, 10])
    x, target = torch.zeros(0, 16), torch.zeros(0, dtype=torch.long)
    tout, kout = tm(x, target), km(to_kiln(x), to_kiln(target))
    assert kout.output.shape == (0,)
    assert torch.isnan(tout.loss) and bool(kiln.isnan(kout.loss))


def test_predict_branches():
    """predict: every head argmax in the shortlist; none; some (their rows get the full
    distribution's argmax). Head weights are set to force each case."""
    tm, km = _pair(6, 12, [4, 8])
    x = torch.randn(9, 6, generator=torch.Generator().manual_seed(5))
    for bias in ([5.0, 0, 0, 0, -5, -5], [-5.0, -5, -5, -5, 5, 5], None):
        with torch.no_grad():
            if bias is None:  # mixed: column 0 of x decides
                w = torch.zeros(6, 6)
                w[0, 0], w[4, 0] = 3.0, -3.0
                tm.head.weight.copy_(w)
            else:
                tm.head.weight.zero_()
                tm.head.weight[:, 1] = torch.tensor(bias)
                x[:, 1] = 1.0
        km.load_state_dict({k: to_kiln(v) for k, v in tm.state_dict().items()})
        tp = tm.predict(x)
        assert_same(km.predict(to_kiln(x)), tp)
        assert_same(km.log_prob(to_kiln(x)), tm.log_prob(x).detach(), rtol=1e-5, atol=1e-6)
    assert 0 < int((tm.head(x).argmax(1) >= 4).sum()) < 9  # (the last case was mixed)


def test_modes_repr_and_containers():
    tm, km = _pair(16, 20, [5, 10], head_bias=True)
    assert repr(km).replace("kiln.", "torch.") == repr(tm)
    assert (km.in_features, km.n_classes, km.cutoffs, km.div_value, km.head_bias) == \
        (tm.in_features, tm.n_classes, tm.cutoffs, tm.div_value, tm.head_bias)
    assert (km.shortlist_size, km.n_clusters, km.head_size) == (tm.shortlist_size, tm.n_clusters, tm.head_size)
    i2h, h2o = km.tail[1]
    assert tuple(i2h.weight.shape) == tuple(tm.tail[1][0].weight.shape)
    assert tuple(h2o.weight.shape) == tuple(tm.tail[1][1].weight.shape)
    # a parameter replaced from Python is the one the module computes with
    with kiln.no_grad():
        km.tail[0][1].weight.zero_()
    with torch.no_grad():
        tm.tail[0][1].weight.zero_()
    x, target = torch.randn(5, 16), torch.tensor([6, 7, 8, 9, 0])
    assert_same(km(to_kiln(x), to_kiln(target)).loss, tm(x, target).loss.detach(), rtol=1e-5, atol=1e-6)
    km.reset_parameters()
    assert float(km.tail[0][1].weight.abs().sum()) > 0


def test_errors():
    for bad in ([], [5, 3], [0, 4], [5, 20], [5, 19, 19], [2.5]):
        with pytest.raises(ValueError) as te:
            torch.nn.AdaptiveLogSoftmaxWithLoss(8, 20, bad)
        with pytest.raises(ValueError) as ke:
            kiln.nn.AdaptiveLogSoftmaxWithLoss(8, 20, bad)
        assert str(ke.value) == str(te.value), bad
    tm, km = _pair(8, 20, [5, 10])
    x = torch.randn(4, 8)
    cases = [
        (x, torch.tensor([0, 1, 2, 20]), "Target values should be in [0, 19], but values in range [0, 20] were found."),
        (x, torch.tensor([-1, 1, 2, 3]), "but values in range [-1, 3] were found."),
        (x, torch.tensor([0, 1, 2]), "Input and target should have the same size in the batch dimension."),
        (x, torch.zeros(4, 2, dtype=torch.long), "0D or 1D target tensor expected, multi-target not supported"),
        (x.unsqueeze(-1), torch.tensor([0, 1, 2, 3]), "1D target tensor expects 2D input tensors"),
        (x, torch.tensor(1), "0D target tensor expects 1D input tensors"),
    ]
    for xi, ti, msg in cases:
        with pytest.raises(RuntimeError) as te:
            tm(xi, ti)
        with pytest.raises(RuntimeError) as ke:
            km(to_kiln(xi), to_kiln(ti))
        assert msg in str(te.value) and msg in str(ke.value), (msg, str(ke.value))


def test_bfloat16_forward():
    """bfloat16 weights and input: as torch, within bfloat16's precision (the products round the
    same way; log_softmax's sums may not)."""
    tm, km = _pair(16, 20, [5, 10], dtype=torch.bfloat16)
    x = torch.randn(11, 16).to(torch.bfloat16)
    target = _targets(11, 20)
    tout, kout = tm(x, target), km(to_kiln(x), to_kiln(target))
    assert kout.output.dtype == kiln.bfloat16
    assert_same(kout.output, tout.output.detach(), rtol=2e-2, atol=2e-2)
    assert to_torch(kout.loss).dtype == torch.bfloat16


def test_review_findings():
    """head and tail are real Linear layers; div_value's errors and the size in messages are torch's."""
    tm, km = _pair(8, 20, [5, 10])
    assert isinstance(km.head, kiln.nn.Linear) and km.head.out_features == tm.head.out_features
    assert isinstance(km.tail[0][1], kiln.nn.Linear) and km.tail[0][1].in_features == tm.tail[0][1].in_features
    assert repr(km.tail[1][0]) == repr(tm.tail[1][0])
    for dv, exc in ((0.0, ZeroDivisionError), (float("nan"), ValueError)):
        with pytest.raises(exc) as te:
            torch.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [5, 10], div_value=dv)
        with pytest.raises(exc) as ke:
            kiln.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [5, 10], div_value=dv)
        assert str(ke.value) == str(te.value)
    x = torch.randn(4, 8, 1)
    with pytest.raises(RuntimeError) as te:
        tm(x, torch.tensor([0, 1, 2, 3]))
    with pytest.raises(RuntimeError) as ke:
        km(to_kiln(x), kiln.tensor([0, 1, 2, 3]))
    assert str(te.value) in str(ke.value)
