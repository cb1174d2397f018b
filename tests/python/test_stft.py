"""torch.stft / torch.istft against torch 2.13: shapes, values, windows shorter than n_fft, centre padding
modes, one- and two-sided, normalisation, batches, complex input, round trips, gradients and errors."""
import warnings

import numpy as np
import pytest
import torch

import kiln


def _k(t):
    return kiln.from_numpy(t.detach().contiguous().numpy().copy())


def _check(k, t, tol):
    assert str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (k.dtype, t.dtype)
    assert tuple(k.shape) == tuple(t.shape), (tuple(k.shape), tuple(t.shape))
    np.testing.assert_allclose(k.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def rnd(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


CASES = [
    dict(n_fft=16),
    dict(n_fft=16, hop_length=5, win_length=10, window="hann"),
    dict(n_fft=15, hop_length=3, window="hamming"),
    dict(n_fft=16, center=False),
    dict(n_fft=16, pad_mode="constant", normalized=True),
    dict(n_fft=16, pad_mode="replicate", window="hann"),
    dict(n_fft=16, onesided=False, window="hann"),
    dict(n_fft=8, hop_length=8, window="hann"),
    dict(n_fft=16, win_length=8),  # no window: a rectangle of win_length centred in n_fft
    dict(n_fft=16, win_length=8, hop_length=4, window="hann", center=False, align_to_window=True),
    dict(n_fft=16, win_length=8, hop_length=4, center=False, align_to_window=False, window="hamming"),
]


def _args(lib, case, dtype):
    kw = dict(case)
    w = kw.pop("window", None)
    if w is not None:
        n = kw.get("win_length", kw["n_fft"])
        kw["window"] = getattr(lib, f"{w}_window")(n, dtype=getattr(lib, dtype))
    return kw


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(100,), (3, 64)])
def test_stft_like_torch(case, dtype, shape):
    x = rnd(*shape, dtype=getattr(torch, dtype))
    tol = 1e-4 if dtype == "float32" else 1e-10
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.stft(x, return_complex=True, **_args(torch, case, dtype))
        wreal = torch.stft(x, return_complex=False, **_args(torch, case, dtype))
    got = kiln.stft(_k(x), return_complex=True, **_args(kiln, case, dtype))
    _check(got, want, tol)
    _check(_k(x).stft(return_complex=False, **_args(kiln, case, dtype)), wreal, tol)
    # and back (where torch's inverse exists: the NOLA condition holds)
    if "align_to_window" in case:
        return
    kw = _args(torch, case, dtype)
    kw.pop("pad_mode", None)
    kkw = _args(kiln, case, dtype)
    kkw.pop("pad_mode", None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            back_t = torch.istft(want, length=shape[-1], **kw)
    except RuntimeError:
        with pytest.raises(RuntimeError, match="window overlap add min"):
            kiln.istft(got, length=shape[-1], **kkw)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        back_k = kiln.istft(got, length=shape[-1], **kkw)
    _check(back_k, back_t, tol)


def test_stft_complex_input_and_gradient():
    z = torch.complex(rnd(80), rnd(80, seed=1))
    w = torch.hann_window(16)
    _check(kiln.stft(_k(z), 16, window=_k(w)), torch.stft(z, 16, window=w), 1e-4)
    _check(kiln.stft(_k(z), 16, window=_k(w), return_complex=False), torch.stft(z, 16, window=w, return_complex=False),
           1e-4)
    x = rnd(64)
    xt = x.clone().requires_grad_(True)
    torch.stft(xt, 16, window=w, return_complex=True).abs().sum().backward()
    xk = _k(x).requires_grad_(True)
    kiln.stft(xk, 16, window=_k(w), return_complex=True).abs().sum().backward()
    _check(xk.grad, xt.grad, 1e-4)


def test_istft_like_torch():
    x = rnd(2, 200)
    w = torch.hann_window(32)
    s = torch.stft(x, 32, hop_length=8, window=w, return_complex=True)
    for kw in [dict(), dict(length=190), dict(length=230), dict(normalized=True)]:
        _check(kiln.istft(_k(s), 32, hop_length=8, window=_k(w), **kw),
               torch.istft(s, 32, hop_length=8, window=w, **kw), 1e-5)
    two = torch.stft(x, 32, hop_length=8, window=w, onesided=False, return_complex=True)
    _check(kiln.istft(_k(two), 32, hop_length=8, window=_k(w)), torch.istft(two, 32, hop_length=8, window=w), 1e-5)
    _check(kiln.istft(_k(two), 32, hop_length=8, window=_k(w), return_complex=True),
           torch.istft(two, 32, hop_length=8, window=w, return_complex=True), 1e-5)
    # center=False, a window shorter than n_fft with and without a window tensor, a complex window, an
    # integer window
    sn = torch.stft(x, 32, hop_length=8, window=torch.hamming_window(32), center=False, return_complex=True)
    _check(kiln.istft(_k(sn), 32, hop_length=8, window=_k(torch.hamming_window(32)), center=False),
           torch.istft(sn, 32, hop_length=8, window=torch.hamming_window(32), center=False), 1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check(kiln.istft(_k(s), 32, hop_length=8, win_length=16), torch.istft(s, 32, hop_length=8, win_length=16),
               1e-5)
        cw = torch.hann_window(32) * (1 + 0.3j)
        _check(kiln.istft(_k(two), 32, hop_length=8, window=_k(cw), return_complex=True),
               torch.istft(two, 32, hop_length=8, window=cw, return_complex=True), 1e-5)
        iw = torch.ones(32, dtype=torch.int64)
        _check(kiln.istft(_k(s), 32, hop_length=8, window=_k(iw)), torch.istft(s, 32, hop_length=8, window=iw), 1e-5)
    # the round trip restores the signal
    np.testing.assert_allclose(kiln.istft(_k(s), 32, hop_length=8, window=_k(w), length=200).numpy(), x.numpy(),
                               atol=1e-5)
    st = s.clone().requires_grad_(True)
    torch.istft(st, 32, hop_length=8, window=w).pow(2).sum().backward()
    sk = _k(s).requires_grad_(True)
    kiln.istft(sk, 32, hop_length=8, window=_k(w)).pow(2).sum().backward()
    _check(sk.grad, st.grad, 1e-4)


def test_stft_istft_errors():
    x = rnd(100)
    cases = [
        (lambda L, x: L.stft(x, 16), x),  # return_complex required for real input
        (lambda L, x: L.stft(x, 16, return_complex=True), rnd(2, 2, 25)),
        (lambda L, x: L.stft(x, 200, return_complex=True), x),  # reflect padding too long
        (lambda L, x: L.stft(x, 200, center=False, return_complex=True), x),
        (lambda L, x: L.stft(x, 16, hop_length=0, return_complex=True), x),
        (lambda L, x: L.stft(x, 16, win_length=20, return_complex=True), x),
        (lambda L, x: L.stft(x, 16, window=L.ones(15), return_complex=True), x),
        (lambda L, x: L.stft(x, 16, return_complex=True), x.long()),
        (lambda L, x: L.stft(x, 16, return_complex=True), x.half()),
        (lambda L, x: L.stft(x, 16, onesided=True, return_complex=True), x.to(torch.complex64)),
        (lambda L, x: L.stft(x, 16, return_complex=True, align_to_window=False), x),  # needs center=False
        (lambda L, x: L.istft(x, 16, window=L.ones(16)), torch.zeros(9, 0, dtype=torch.complex64)),  # empty
        (lambda L, x: L.istft(x, 16, window=L.ones(16)), torch.zeros(0, 9, 5, dtype=torch.complex64)),
        (lambda L, x: L.istft(x, 16), x),  # real input
        (lambda L, x: L.istft(x, 15), torch.stft(x, 16, return_complex=True, window=torch.ones(16))),
        (lambda L, x: L.istft(x, 16, hop_length=20), torch.stft(x, 16, return_complex=True, window=torch.ones(16))),
        (lambda L, x: L.istft(x, 16, window=L.zeros(16)), torch.stft(x, 16, return_complex=True,
                                                                      window=torch.ones(16))),
    ]
    for fn, arg in cases:
        with pytest.raises(Exception) as e:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fn(torch, arg)
        with pytest.raises(type(e.value)) as k:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fn(kiln, _k(arg))
        assert "[col2im]" not in str(k.value) and "[unfold]" not in str(k.value)  # kiln's own words, not a part's


def test_stft_warns_once_without_a_window():
    kiln._stft_warned.clear()
    x = _k(rnd(64))
    with pytest.warns(UserWarning, match="A window was not provided"):
        kiln.stft(x, 16, return_complex=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kiln.stft(x, 16, return_complex=True)  # once per process, as torch's TORCH_WARN_ONCE
    with pytest.warns(UserWarning, match="return_complex=False is deprecated"):
        x.stft(16, window=kiln.ones(16), return_complex=False)


def test_istft_warns_for_a_long_length():
    kiln._stft_warned.discard("istft-length")
    x, w = rnd(100), torch.hann_window(16)
    s = torch.stft(x, 16, window=w, return_complex=True)
    with pytest.warns(UserWarning, match="shorter than the length parameter"):
        y = kiln.istft(_k(s), 16, window=_k(w), length=150)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check(y, torch.istft(s, 16, window=w, length=150), 1e-5)  # zeros after the signal
