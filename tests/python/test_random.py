"""Random ops: torch's API and dtype rules, reproducibility per seed, independence from the thread
count, and distribution moments (values cannot match torch's generator bit for bit)."""
import math

import numpy as np
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


def _philox(key, counters):
    """Philox-4x32-10 (Salmon et al. 2011) of the 64-bit counters (as words 0 and 1; words 2 and 3
    zero) under a 64-bit key, written out in numpy: the four output words per counter."""
    M0, M1, W0, W1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57), 0x9E3779B9, 0xBB67AE85
    mask = np.uint64(0xFFFFFFFF)
    c = np.asarray(counters, dtype=np.uint64)
    x0, x1 = c & mask, c >> np.uint64(32)
    x2, x3 = np.zeros_like(x0), np.zeros_like(x0)
    k0, k1 = key & 0xFFFFFFFF, key >> 32
    for _ in range(10):
        p0, p1 = M0 * x0, M1 * x2
        x0, x2, x1, x3 = ((p1 >> np.uint64(32)) ^ x1 ^ np.uint64(k0), (p0 >> np.uint64(32)) ^ x3 ^ np.uint64(k1),
                          p1 & mask, p0 & mask)
        k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
    return x0, x1, x2, x3


@pytest.mark.parametrize("offset", [0, 12345, 2**32 - 1, 2**32 - 5, 2**32 - 17, 2**33 - 3, 5 * 2**32 - 9])
def test_rand_is_philox_across_the_counters_carry(offset):
    """kiln's generator against Philox written out: float64 element i = 53 bits of block offset + i
    (words 0 and 1), float32 element 4j + k = the top 24 bits of word k of block offset + j; the
    blocks are computed 8 or 16 at once in vector lanes, also where the counter's low word carries
    inside such a group."""
    seed = 1234
    state = np.frombuffer(np.array([seed, offset], dtype=np.uint64).tobytes(), dtype=np.uint8).copy()
    n = 100
    key = seed  # (the generator's key is its seed)
    w = _philox(key, np.arange(n, dtype=np.uint64) + np.uint64(offset))
    kiln.set_rng_state(kiln.from_numpy(state.copy()))
    d = kiln.rand(n, dtype=kiln.float64).numpy()
    bits53 = ((w[0] << np.uint64(21)) ^ (w[1] >> np.uint64(11))) & np.uint64((1 << 53) - 1)
    np.testing.assert_array_equal(d, bits53.astype(np.float64) / 2.0 ** 53)
    kiln.set_rng_state(kiln.from_numpy(state.copy()))
    f = kiln.rand(4 * n, dtype=kiln.float32).numpy().reshape(n, 4)
    for k in range(4):
        np.testing.assert_array_equal(f[:, k], (w[k] >> np.uint64(8)).astype(np.float32) / np.float32(2.0 ** 24))


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


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_bernoulli_inplace_and_p_like_torch(lib):
    lib.manual_seed(5)
    x = lib.zeros(100000)
    assert x.bernoulli_() is x and abs(x.mean().item() - 0.5) < 0.01  # p=0.5 by default
    assert abs(x.bernoulli_(0.2).mean().item() - 0.2) < 0.01
    assert abs(lib.bernoulli(x, 0.7).mean().item() - 0.7) < 0.01 and abs(x.bernoulli(0.7).mean().item() - 0.7) < 0.01
    i = lib.zeros(1000, dtype=lib.int64).bernoulli_(1.0)  # any real dtype, kept
    assert i.dtype == lib.int64 and i.sum().item() == 1000
    assert lib.zeros(4, 2).bernoulli_(lib.tensor([0.0, 1.0])).tolist() == [[0.0, 1.0]] * 4  # p broadcast
    assert lib.zeros(3).bernoulli_(lib.tensor(1.0)).tolist() == [1.0, 1.0, 1.0]
    g = lib.Generator().manual_seed(9)
    a = lib.zeros(50).bernoulli_(0.5, generator=g)
    g.manual_seed(9)
    assert lib.equal(a, lib.zeros(50).bernoulli_(0.5, generator=g))
    for bad in (-0.5, 1.5, float("nan")):
        with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\]"):
            lib.zeros(3).bernoulli_(bad)
    for bad in (2.0, -1.0, float("nan")):
        with pytest.raises(RuntimeError):
            lib.zeros(3).bernoulli_(lib.full((3,), bad))
        with pytest.raises(RuntimeError):
            lib.bernoulli(lib.full((3,), bad))
    with pytest.raises(RuntimeError):  # p does not broadcast to self's shape
        lib.zeros(3).bernoulli_(lib.full((2, 3), 0.5))
    with pytest.raises(RuntimeError, match="leaf Variable"):
        lib.zeros(3, requires_grad=True).bernoulli_()
    with pytest.raises(NotImplementedError):
        lib.zeros(3, dtype=lib.complex64).bernoulli_()
    with pytest.raises(TypeError):
        lib.zeros(3).bernoulli_("a")


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_fill_argument_and_dtype_checks_like_torch(lib):
    x = lib.zeros(3)
    with pytest.raises(RuntimeError, match="from=2 > to=1"):
        x.uniform_(2, 1)
    assert x.uniform_(1, 1).tolist() == [1.0, 1.0, 1.0]
    for sigma in (-1.0, 0.0, float("nan")):
        with pytest.raises(RuntimeError, match="cauchy_ expects sigma > 0.0"):
            x.cauchy_(0.0, sigma)
    assert x.tolist() == [1.0, 1.0, 1.0]  # none of the refused calls wrote x
    for dt in (lib.int64, lib.bool):
        for fill in ("uniform_", "normal_", "log_normal_"):
            with pytest.raises(NotImplementedError):
                getattr(lib.zeros(3, dtype=dt), fill)()
        for fill in ("cauchy_", "exponential_"):
            with pytest.raises(RuntimeError):
                getattr(lib.zeros(3, dtype=dt), fill)()
        for fn in ("rand", "randn"):
            with pytest.raises(NotImplementedError):
                getattr(lib, fn)(3, dtype=dt)


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_generator_device_seeds_and_states_like_torch(lib):
    assert str(lib.Generator(device="cpu").device) == "cpu" and str(lib.Generator("cpu").device) == "cpu"
    for bad in ("bogus", "meta"):
        with pytest.raises(RuntimeError):
            lib.Generator(device=bad)
    g = lib.Generator()
    assert g.manual_seed(2**64 - 1) is g and g.initial_seed() == 2**64 - 1
    assert g.manual_seed(-1).initial_seed() == 2**64 - 1  # a negative seed is taken modulo 2**64
    assert g.manual_seed(-2**63).initial_seed() == 2**63
    for bad in (2**64, -2**63 - 1):
        with pytest.raises(ValueError):
            g.manual_seed(bad)
        with pytest.raises(ValueError):
            lib.manual_seed(bad)
    for bad in ("3", True, 1.5):
        with pytest.raises(RuntimeError, match="expected a long"):
            g.manual_seed(bad)
    try:  # torch.manual_seed converts with int() first
        assert lib.manual_seed("12").initial_seed() == 12 and lib.manual_seed(1.7).initial_seed() == 1
        with pytest.raises(ValueError):
            lib.manual_seed("abc")
    finally:
        lib.manual_seed(0)
    with pytest.raises(TypeError, match="RNG state must be"):
        g.set_state(lib.zeros(16))
    with pytest.raises(RuntimeError, match="RNG state size to be 3"):
        g.set_state(lib.zeros(3, dtype=lib.uint8))
    with pytest.raises(RuntimeError, match="RNG state size to be 3"):
        lib.set_rng_state(lib.zeros(3, dtype=lib.uint8))
    g.set_state(g.get_state())


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_set_num_threads_argument_errors_like_torch(lib):
    old = lib.get_num_threads()
    for bad, cls in ((0, RuntimeError), (-1, RuntimeError), (1.5, RuntimeError), ("2", RuntimeError),
                     (True, RuntimeError), (2**40, ValueError), (-2**40, ValueError)):
        with pytest.raises(cls):
            lib.set_num_threads(bad)
    assert lib.get_num_threads() == old


def _parts_moments(z):
    """(mean, std) of the real parts and of the imaginary parts of a complex tensor of either library."""
    x = torch.view_as_real(torch.from_numpy(z.numpy().copy()) if not isinstance(z, torch.Tensor) else z).double()
    return [(x[..., i].mean().item(), x[..., i].std().item()) for i in (0, 1)]


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
@pytest.mark.parametrize("dt", ["complex64", "complex128"])
def test_complex_draws_like_torch(lib, dt):
    # torch draws a complex tensor's parts as elements of its real dtype: rand's uniform on [0, 1),
    # randn's N(0, 1/2) (E|z|^2 = 1), normal_(mean, std) N(mean, std^2 / 2) with the mean on both parts,
    # normal(complex mean, std) = mean + std z
    d = getattr(lib, dt)
    lib.manual_seed(1)
    n = 200000
    u = lib.rand(n, dtype=d)
    assert u.dtype == d and u.shape == (n,)
    for m, s in _parts_moments(u):
        assert abs(m - 0.5) < 0.01 and abs(s - math.sqrt(1 / 12)) < 0.01
    assert lib.all(u.real >= 0).item() and lib.all(u.imag < 1).item()
    for z in (lib.randn(n, dtype=d), lib.randn_like(lib.zeros(n, dtype=d)), lib.normal(0.0, 1.0, size=(n,), dtype=d)):
        assert z.dtype == d
        for m, s in _parts_moments(z):
            assert abs(m) < 0.01 and abs(s - math.sqrt(0.5)) < 0.01
    assert lib.rand_like(lib.zeros(2, 3, dtype=d)).shape == (2, 3)
    x = lib.empty(n, dtype=d)
    assert x.normal_(1.0, 2.0) is x
    for m, s in _parts_moments(x):
        assert abs(m - 1) < 0.02 and abs(s - math.sqrt(2)) < 0.02
    (re_lo, re_hi), (im_lo, im_hi) = [(p.min().item(), p.max().item()) for p in (x.uniform_(-1, 3).real, x.imag)]
    assert -1 <= re_lo < -0.99 and 2.99 < re_hi < 3 and -1 <= im_lo < -0.99 and 2.99 < im_hi < 3
    y = lib.normal(lib.full((n,), 1 + 2j, dtype=d), 2.0)
    (m_re, s_re), (m_im, s_im) = _parts_moments(y)
    assert y.dtype == d and abs(m_re - 1) < 0.02 and abs(m_im - 2) < 0.02 and abs(s_re - math.sqrt(2)) < 0.02
    y = lib.normal(lib.zeros(n, dtype=d), lib.full((n,), 2.0))
    assert y.dtype == d and abs(_parts_moments(y)[1][1] - math.sqrt(2)) < 0.02
    # a strided view is filled in place, its base's other elements untouched
    base = lib.zeros(4, 6, dtype=d)
    base.t()[::2].normal_()
    assert (base[:, 0::2] != 0).all().item() and (base[:, 1::2] == 0).all().item()
    z = lib.randn(2, 3, dtype=d, requires_grad=True)
    assert z.requires_grad and z.is_leaf


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_complex_draw_errors_like_torch(lib):
    x = lib.zeros(3, dtype=lib.complex64)
    with pytest.raises(RuntimeError, match="from=3 > to=1"):
        x.uniform_(3, 1)
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        x.normal_(0, -1)
    for fill in ("cauchy_", "exponential_"):
        with pytest.raises(RuntimeError):
            getattr(x, fill)()
    with pytest.raises(NotImplementedError):
        x.log_normal_()
    with pytest.raises(NotImplementedError):
        x.geometric_(0.5)
    for mean, std in ((x, lib.ones(3, dtype=lib.complex64)), (1.0, lib.ones(3, dtype=lib.complex64)),
                      (lib.ones(3), lib.ones(3, dtype=lib.complex64))):
        with pytest.raises(RuntimeError, match="non-complex"):
            lib.normal(mean, std)
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        lib.normal(x, -1.0)
    assert x.tolist() == [0j, 0j, 0j]  # none of the refused calls wrote x


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_random_from_to_like_torch(lib):
    lib.manual_seed(2)
    n = 20000
    # random_(): [0, 2^digits] for floating dtypes, [0, max] for integral ones, {0, 1} for bool
    for dt, hi in (("float32", 2 ** 24), ("float64", 2 ** 53), ("float16", 2 ** 11), ("bfloat16", 2 ** 8),
                   ("int64", 2 ** 63 - 1), ("int32", 2 ** 31 - 1), ("int16", 2 ** 15 - 1), ("int8", 127),
                   ("uint8", 255), ("bool", 1)):
        x = lib.empty(n, dtype=getattr(lib, dt))
        assert x.random_() is x and x.dtype == getattr(lib, dt)
        v = x.to(lib.float64) if dt != "int64" else x
        lo_v, hi_v = v.min().item(), v.max().item()
        assert 0 <= lo_v and hi_v <= hi and hi_v > hi * 0.99 and lo_v < hi * 0.01, (dt, lo_v, hi_v)
        assert (v == v.round()).all().item()
    # random_(to) and random_(from, to): [from, to), every value drawn
    assert sorted(set(lib.empty(n).random_(5).tolist())) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert sorted(set(lib.empty(n, dtype=lib.int8).random_(-3, 4).tolist())) == list(range(-3, 4))
    assert sorted(set(lib.empty(n, dtype=lib.bool).random_(0, 2).tolist())) == [False, True]
    assert set(lib.empty(n, dtype=lib.bool).random_(1, None).tolist()) == {True}
    # random_(from, None): from `from` to the dtype's top, inclusive
    v = lib.empty(n).random_(2 ** 24 - 1, None)
    assert set(v.tolist()) == {2.0 ** 24 - 1, 2.0 ** 24}
    v = lib.empty(n, dtype=lib.uint8).random_(250, None)
    assert sorted(set(v.tolist())) == list(range(250, 256))
    big = lib.empty(n, dtype=lib.int64).random_(-2 ** 63, None)  # every int64 value
    assert big.min().item() < -2 ** 62 and big.max().item() > 2 ** 62
    # a strided view in place, the rest of its base untouched
    base = lib.zeros(4, 6)
    base.t()[::2].random_(1, 3)
    assert set(base[:, 0::2].flatten().tolist()) <= {1.0, 2.0} and (base[:, 1::2] == 0).all().item()
    g = lib.Generator().manual_seed(4)
    a = lib.empty(50).random_(100, generator=g)
    g.manual_seed(4)
    assert lib.equal(a, lib.empty(50).random_(100, generator=g))


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_random_int64_bounds_past_2_53_are_exact(lib):
    lo = 2 ** 60 + 1
    x = lib.empty(5000, dtype=lib.int64).random_(lo, lo + 3)
    assert set(x.tolist()) == {lo, lo + 1, lo + 2}
    top = lib.empty(5000, dtype=lib.int64).random_(2 ** 63 - 4, None)  # up to INT64_MAX, inclusive
    assert set(top.tolist()) == {2 ** 63 - 4, 2 ** 63 - 3, 2 ** 63 - 2, 2 ** 63 - 1}
    assert set(lib.empty(5000, dtype=lib.int64).random_(-2 ** 63, -2 ** 63 + 2).tolist()) == {-2 ** 63, -2 ** 63 + 1}


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_random_full_range_dtypes_like_torch(lib):
    for dt in ("int64", "float32", "float64", "bfloat16"):
        assert lib.empty(100, dtype=getattr(lib, dt)).random_(-2 ** 63, None).dtype == getattr(lib, dt)
    for dt in ("int8", "int16", "int32", "uint8"):
        with pytest.raises(RuntimeError, match="handles only int64, double, float and bfloat16"):
            lib.empty(3, dtype=getattr(lib, dt)).random_(-2 ** 63, None)
    for dt in ("bool", "float16", "uint16"):
        with pytest.raises(NotImplementedError):
            lib.empty(3, dtype=getattr(lib, dt)).random_(-2 ** 63, None)


@pytest.mark.parametrize("lib", [torch, kiln], ids=["torch", "kiln"])
def test_random_from_to_errors_like_torch(lib):
    x = lib.zeros(3)
    for args in ((0, 0), (5, 3), (-1,)):
        with pytest.raises(RuntimeError, match="expects 'from' to be less than 'to'"):
            x.random_(*args)
    with pytest.raises(RuntimeError, match="less than or equal to 'to_inc'"):
        x.random_(2 ** 24 + 1, None)
    for dt, args, name in (("uint8", (-1, 5), "from"), ("int8", (0, 300), "to - 1"), ("bool", (0, 3), "to - 1"),
                           ("float16", (70000,), "to - 1"), ("uint64", (5, None), "to - 1")):
        with pytest.raises(RuntimeError, match=f"{name} is out of bounds for"):
            lib.zeros(3, dtype=getattr(lib, dt)).random_(*args)
    with pytest.raises(RuntimeError, match="from is out of bounds for"):  # checked before the empty return
        lib.zeros(0, dtype=lib.uint8).random_(-1, 5)
    with pytest.warns(UserWarning, match=r"to - 1 is out of bounds \[-\(2\^24\), 2\^24\]"):
        x.random_(0, 2 ** 25)
    with pytest.raises(NotImplementedError):
        lib.zeros(3, dtype=lib.complex64).random_()
    with pytest.raises(RuntimeError, match="only integral, floating-point and boolean"):
        lib.zeros(3, dtype=lib.complex64).random_(0, 3)
    for dt in ("float8_e4m3fn", "uint16", "uint32", "uint64"):
        with pytest.raises(NotImplementedError):
            lib.zeros(3, dtype=getattr(lib, dt)).random_()
    with pytest.raises(RuntimeError, match="leaf Variable"):
        lib.zeros(3, requires_grad=True).random_()
