"""torch.nn's lazy modules against torch 2.13: what they infer from the first input, what they become,
their placeholders' state and errors, loading a checkpoint before the first call, and the outputs
once both hold the same weights."""
import pytest
import torch

import kiln
from helpers import assert_same, to_kiln

CASES = [
    ("LazyLinear", (4,), {}, (2, 3)),
    ("LazyLinear", (4,), {"bias": False}, (2, 5, 3)),
    ("LazyConv1d", (5, 3), {}, (2, 3, 9)),
    ("LazyConv1d", (4, 3), {"groups": 2, "padding": 1}, (2, 6, 9)),
    ("LazyConv2d", (5, 3), {"stride": 2}, (3, 6, 6)),  # unbatched: in_channels = shape[0]
    ("LazyConv2d", (4, 3, 1, 1, 2), {}, (2, 3, 7, 7)),  # dilation positionally
    ("LazyConv3d", (2, 2), {"bias": False}, (1, 3, 4, 4, 4)),
    ("LazyConvTranspose1d", (2, 3), {}, (1, 4, 5)),
    ("LazyConvTranspose2d", (3, 3), {"stride": 2, "output_padding": 1}, (2, 4, 5, 5)),
    ("LazyConvTranspose3d", (2, 2), {}, (1, 3, 3, 3, 3)),
    ("LazyBatchNorm1d", (), {}, (4, 7)),
    ("LazyBatchNorm2d", (), {"momentum": 0.3}, (4, 3, 5, 5)),
    ("LazyBatchNorm3d", (), {"affine": False}, (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", (), {}, (2, 3, 8)),  # (torch's defaults here: affine and running stats on)
    ("LazyInstanceNorm2d", (), {"affine": False}, (2, 3, 4, 4)),
    ("LazyInstanceNorm3d", (), {"affine": False, "track_running_stats": False}, (2, 3, 2, 3, 4)),
]


@pytest.mark.parametrize("name,args,kw,shape", CASES)
def test_first_call_infers_and_becomes_the_layer(name, args, kw, shape):
    tm, km = getattr(torch.nn, name)(*args, **kw), getattr(kiln.nn, name)(*args, **kw)
    assert km.has_uninitialized_params() == tm.has_uninitialized_params()
    assert list(km.state_dict()) == list(tm.state_dict())
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    tm(x)
    km(to_kiln(x))
    assert type(km).__name__ == type(tm).__name__ and type(km) is getattr(kiln.nn, type(tm).__name__)
    for attr in ("in_features", "in_channels", "num_features"):
        if attr == "num_features" and getattr(tm, attr, None) == 0:  # (torch infers nothing without placeholders)
            assert km.num_features == shape[1]
        elif hasattr(tm, attr):
            assert getattr(km, attr) == getattr(tm, attr), attr
    ts, ks = tm.state_dict(), km.state_dict()
    assert list(ks) == list(ts)
    for k in ts:
        assert tuple(ks[k].shape) == tuple(ts[k].shape), k
    # the same weights: the same outputs (running statistics included)
    km.load_state_dict({k: to_kiln(v) for k, v in ts.items()})
    x2 = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    assert_same(km(to_kiln(x2)), tm(x2).detach(), rtol=1e-5, atol=1e-5)
    for k, v in tm.state_dict().items():
        assert_same(km.state_dict()[k], v, rtol=1e-5, atol=1e-6, msg=k)


def test_placeholders():
    tm, km = torch.nn.LazyLinear(4), kiln.nn.LazyLinear(4)
    for m in (tm, km):
        with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter"):
            m.weight.shape
    assert isinstance(km.weight, kiln.nn.UninitializedParameter)
    assert isinstance(km.weight, kiln.nn.Parameter) and km.weight.requires_grad
    assert repr(km) == repr(tm)
    assert km.bias is not None and kiln.nn.LazyLinear(4, bias=False).bias is None
    assert torch.nn.LazyLinear(4, bias=False).bias is None


def test_load_before_first_call():
    tl = torch.nn.Linear(3, 4)
    tm, km = torch.nn.LazyLinear(4), kiln.nn.LazyLinear(4)
    tm.load_state_dict(tl.state_dict())
    km.load_state_dict({k: to_kiln(v) for k, v in tl.state_dict().items()})
    assert tuple(km.weight.shape) == (4, 3)
    x = torch.randn(2, 3)
    assert_same(km(to_kiln(x)), tm(x).detach(), rtol=1e-6, atol=1e-6)
    tc = torch.nn.Conv2d(6, 4, 3, groups=2)
    kc = kiln.nn.LazyConv2d(4, 3, groups=2)
    kc.load_state_dict({k: to_kiln(v) for k, v in tc.state_dict().items()})
    assert kc.in_channels == 6
    xc = torch.randn(1, 6, 5, 5)
    assert_same(kc(to_kiln(xc)), tc(xc).detach(), rtol=1e-5, atol=1e-5)


def test_hooks_mode_and_containers_survive():
    seen = []
    km = kiln.nn.LazyLinear(2)
    km.register_forward_hook(lambda m, i, o: seen.append(tuple(o.shape)))
    km.eval()
    km(kiln.randn(5, 3))
    assert seen == [(5, 2)] and not km.training
    net = kiln.nn.Sequential(kiln.nn.LazyConv2d(4, 3), kiln.nn.LazyBatchNorm2d(), kiln.nn.ReLU(),
                             kiln.nn.Flatten(), kiln.nn.LazyLinear(3))
    tnet = torch.nn.Sequential(torch.nn.LazyConv2d(4, 3), torch.nn.LazyBatchNorm2d(), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.LazyLinear(3))
    x = torch.randn(2, 2, 6, 6)
    tnet(x)
    net(to_kiln(x))
    assert repr(net) == repr(tnet).replace("torch.", "kiln.")
    net.load_state_dict({k: to_kiln(v) for k, v in tnet.state_dict().items()})
    assert_same(net(to_kiln(x)), tnet(x).detach(), rtol=1e-5, atol=1e-5)
    opt = kiln.optim.SGD(net.parameters(), lr=0.1)  # (real parameters now)
    net(to_kiln(x)).sum().backward()
    opt.step()


def test_copies_of_placeholders():
    import copy
    import pickle
    for m in (kiln.nn.LazyLinear(4), kiln.nn.LazyBatchNorm2d()):
        for c in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
            assert type(c) is type(m) and c.has_uninitialized_params()
            assert isinstance(c.weight, kiln.nn.UninitializedParameter)
    lin = kiln.nn.LazyLinear(4)
    lin(kiln.randn(2, 3))
    x = kiln.randn(2, 3)
    for c in (copy.deepcopy(lin), pickle.loads(pickle.dumps(lin))):
        assert type(c) is kiln.nn.Linear and bool(kiln.equal(c(x), lin(x)))


def test_review_findings():
    """An optimiser made before the first call trains the layer; a parent loads a checkpoint into its
    lazy children; .double() before the first call builds a float64 layer; user attributes survive;
    forward pre-hooks see the built layer; the reprs before the first call are torch's."""
    x = torch.randn(4, 3)
    for lib, X in ((torch, x), (kiln, to_kiln(x))):
        m = lib.nn.LazyLinear(2)
        opt = lib.optim.SGD(m.parameters(), lr=1.0)
        m.tag = "kept"
        seen = []
        m.register_forward_pre_hook(lambda mod, i: seen.append(tuple(mod.weight.shape)))
        y = m(X)
        w0 = m.weight.detach().clone()
        y.sum().backward()
        opt.step()
        assert not bool(lib.equal(w0, m.weight.detach())) and m.tag == "kept" and seen == [(2, 3)]
    src = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Conv1d(4, 2, 1))
    k = kiln.nn.Sequential(kiln.nn.LazyLinear(4), kiln.nn.LazyConv1d(2, 1))
    k.load_state_dict({n: to_kiln(v) for n, v in src.state_dict().items()})
    assert type(k[0]) is kiln.nn.Linear and tuple(k[1].weight.shape) == (2, 4, 1)
    d = kiln.nn.LazyLinear(4).double()
    assert d(kiln.randn(2, 3, dtype=kiln.float64)).dtype == kiln.float64
    b = kiln.nn.LazyBatchNorm1d().double()
    b(kiln.randn(4, 3, dtype=kiln.float64))
    assert b.running_mean.dtype == kiln.float64
    for name, args, kw in (("LazyConv2d", (4, 3), dict(stride=2, padding=1)), ("LazyConv1d", (4, 3), {}),
                           ("LazyConvTranspose2d", (4, 3), dict(output_padding=1, stride=2, groups=2, bias=False,
                                                                dilation=2)),
                           ("LazyConv2d", (4, 3), dict(padding="same", padding_mode="reflect")),
                           ("LazyBatchNorm1d", (), {}), ("LazyInstanceNorm2d", (), dict(affine=False))):
        assert repr(getattr(kiln.nn, name)(*args, **kw)) == repr(getattr(torch.nn, name)(*args, **kw)), name
