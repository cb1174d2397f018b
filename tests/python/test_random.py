"""Random ops: torch's API and dtype rules, reproducibility per seed, independence from the thread
count, and distribution moments (values cannot match torch's generator bit for bit)."""
import math

import pytest
import torch

import kiln


def _moments(t):
    x = torch.from_numpy(t.to(kiln.float64).numpy().copy())
    return x.mean().item(), x.std().item()


def test_seed_reproducible_and_thread_invariant():
    old = kiln.get_num_threads()
    try:
        out = []
        for n in (1, 2):
            kiln.set_num_threads(n)
            kiln.manual_seed(1234)
            out.append((kiln.rand(300000), kiln.randn(1000), kiln.randint(0, 100, (5000,)), kiln.randperm(1000)))
        for a, b in zip(*out):
            assert kiln.equal(a, b)
    finally:
        kiln.set_num_threads(old)
    kiln.manual_seed(1)
    a = kiln.rand(10)
    b = kiln.rand(10)
    assert not kiln.equal(a, b)  # the stream advances


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_rand_randn(dtype):
    dt = getattr(kiln, dtype)
    kiln.manual_seed(0)
    u = kiln.rand(200000, dtype=dt)
    assert u.dtype is dt and u.shape == (200000,)
    assert kiln.all(u >= 0).item() and kiln.all(u < 1).item()
    m, s = _moments(u)
    assert abs(m - 0.5) < 0.01 and abs(s - math.sqrt(1 / 12)) < 0.01
    n = kiln.randn(200000, dtype=dt)
    m, s = _moments(n)
    assert abs(m) < 0.01 and abs(s - 1) < 0.02
    assert kiln.rand(2, 3).shape == (2, 3) and kiln.randn((4,)).shape == (4,)


def test_random_dtype_errors_match_torch():
    for fn in ("rand", "randn"):
        with pytest.raises(RuntimeError):
            getattr(torch, fn)(3, dtype=torch.int64)
        with pytest.raises(RuntimeError):
            getattr(kiln, fn)(3, dtype=kiln.int64)
    with pytest.raises(RuntimeError):
        torch.randint(5, 5, (3,))
    with pytest.raises(RuntimeError):
        kiln.randint(5, 5, (3,))


def test_randint_randperm():
    kiln.manual_seed(3)
    r = kiln.randint(-5, 7, (100000,))
    assert r.dtype is kiln.int64
    assert r.min().item() == -5 and r.max().item() == 6
    assert abs(_moments(r)[0] - 0.5) < 0.05
    assert kiln.randint(10, (3, 4)).shape == (3, 4)
    assert kiln.randint(0, 3, (5,), dtype=kiln.int8).dtype is kiln.int8
    p = kiln.randperm(5000)
    assert sorted(p.tolist()) == list(range(5000))
    assert p.tolist() != list(range(5000))


def test_inplace_distributions():
    kiln.manual_seed(7)
    n = 200000
    x = kiln.empty(n, dtype=kiln.float64)
    m, s = _moments(x.uniform_(-2, 4))
    assert abs(m - 1) < 0.02 and abs(s - 6 / math.sqrt(12)) < 0.02
    m, s = _moments(x.normal_(3, 2))
    assert abs(m - 3) < 0.02 and abs(s - 2) < 0.02
    m, s = _moments(x.exponential_(2.0))
    assert abs(m - 0.5) < 0.01 and abs(s - 0.5) < 0.01
    m, _ = _moments(x.log_normal_(0.0, 0.5))
    assert abs(m - math.exp(0.125)) < 0.01
    g = x.geometric_(0.25)
    assert g.min().item() >= 1
    assert abs(_moments(g)[0] - 4) < 0.05
    c = x.cauchy_(1.0, 2.0)
    med = torch.from_numpy(c.numpy().copy()).median().item()
    assert abs(med - 1.0) < 0.05
    with pytest.raises(RuntimeError):
        x.normal_(0, -1)
    with pytest.raises(RuntimeError):
        x.exponential_(-1)


def test_bernoulli_multinomial():
    kiln.manual_seed(11)
    p = kiln.full((100000,), 0.3)
    b = kiln.bernoulli(p)
    assert b.dtype is kiln.float32
    assert abs(b.mean().item() - 0.3) < 0.01
    probs = kiln.tensor([0.1, 0.0, 0.6, 0.3])
    s = kiln.multinomial(probs, 50000, replacement=True)
    counts = torch.bincount(torch.from_numpy(s.numpy().copy()), minlength=4).double() / 50000
    assert counts[1] == 0 and abs(counts[2] - 0.6) < 0.01 and abs(counts[0] - 0.1) < 0.01
    w = kiln.multinomial(kiln.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0]]), 2)
    assert w.shape == (2, 2)
    assert sorted(w[1].tolist()) == [1, 2]
    for bad in ([1.0, -1.0], [float("nan"), 1.0]):
        with pytest.raises(RuntimeError):
            torch.multinomial(torch.tensor(bad), 1)
        with pytest.raises(RuntimeError):
            kiln.multinomial(kiln.tensor(bad), 1)
    with pytest.raises(RuntimeError):
        kiln.multinomial(kiln.tensor([1.0, 1.0]), 3)
