"""nn.utils.parametrize and nn.utils.parametrizations vs torch: weight_norm (values, gradients, the
originals' names and shapes, dim variants), spectral_norm (with torch's u / v buffers copied in: the
normalised weight, power-iteration updates in training, gradients; dim for transposed convolutions),
orthogonal (matrix_exp / cayley / householder: the square case against torch, non-square ones
orthonormal, assignment through right_inverse); custom parametrizations, caching, removal, and
torch's errors; a C++-computed layer (Conv2d, LSTM-free) sees the parametrized tensor."""
import pytest
import torch
import torch.nn.utils.parametrizations as TP
import torch.nn.utils.parametrize as TPZ

import kiln
import kiln.nn.utils.parametrizations as KP
import kiln.nn.utils.parametrize as KPZ
from helpers import assert_same, to_kiln

LIB = {torch: (TP, TPZ), kiln: (KP, KPZ)}


def pair(make):
    torch.manual_seed(0)
    tm = make(torch).double()
    km = make(kiln).to(kiln.float64)
    km.load_state_dict({k: to_kiln(v.detach()) for k, v in tm.state_dict().items()})
    return tm, km


def grads(m, x, lib):
    m.zero_grad()
    y = m(x if lib is torch else to_kiln(x))
    y.square().sum().backward()
    return y.detach(), {n: p.grad for n, p in m.named_parameters()}


@pytest.mark.parametrize("dim", [0, 1, None, -1])
def test_weight_norm(dim):
    tm, km = pair(lambda lib: lib.nn.Linear(5, 4))
    TP.weight_norm(tm, dim=dim)
    KP.weight_norm(km, dim=dim)
    assert [n for n, _ in km.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert type(km).__name__ == type(tm).__name__ == "ParametrizedLinear"
    x = torch.randn(3, 5, dtype=torch.float64)
    (ky, kg), (ty, tg) = grads(km, x, kiln), grads(tm, x, torch)
    assert_same(ky, ty, rtol=1e-10, atol=1e-10)
    for n in tg:
        assert_same(kg[n], tg[n], rtol=1e-9, atol=1e-9)
    assert_same(km.weight.detach(), tm.weight.detach(), rtol=1e-12, atol=1e-12)


def test_spectral_norm_with_torchs_vectors():
    for make in (lambda lib: lib.nn.Linear(6, 4), lambda lib: lib.nn.Conv2d(3, 5, 3),
                 lambda lib: lib.nn.ConvTranspose2d(3, 5, 3)):
        tm, km = pair(make)
        TP.spectral_norm(tm)
        KP.spectral_norm(km)
        assert km.parametrizations.weight[0].dim == tm.parametrizations.weight[0].dim
        for b in ("_u", "_v"):
            getattr(km.parametrizations.weight[0], b).copy_(to_kiln(getattr(tm.parametrizations.weight[0], b)))
        shape = (2, 6) if isinstance(tm, torch.nn.Linear) else (1, 3, 6, 6)
        x = torch.randn(*shape, dtype=torch.float64)
        for _ in range(2):  # training: each forward advances the power iteration
            (ky, kg), (ty, tg) = grads(km, x, kiln), grads(tm, x, torch)
            assert_same(ky, ty, rtol=1e-9, atol=1e-9)
            for n in tg:
                assert_same(kg[n], tg[n], rtol=1e-8, atol=1e-8)
        km.eval(), tm.eval()
        assert_same(km.weight.detach(), tm.weight.detach(), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("orth_map", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_square_matches_torch(orth_map):
    tm, km = pair(lambda lib: lib.nn.Linear(4, 4))
    TP.orthogonal(tm, orthogonal_map=orth_map)
    KP.orthogonal(km, orthogonal_map=orth_map)
    assert_same(km.weight.detach(), tm.weight.detach(), rtol=1e-9, atol=1e-9)
    x = torch.randn(3, 4, dtype=torch.float64)
    (ky, kg), (ty, tg) = grads(km, x, kiln), grads(tm, x, torch)
    assert_same(ky, ty, rtol=1e-9, atol=1e-9)
    for n in tg:
        assert_same(kg[n], tg[n], rtol=1e-8, atol=1e-8)
    # assignment goes through right_inverse and stays orthogonal
    q, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64))
    tm.weight, km.weight = q, to_kiln(q)
    assert_same(km.weight.detach(), tm.weight.detach(), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("orth_map,shape", [("householder", (6, 3)), ("matrix_exp", (3, 6)), ("cayley", (6, 3))])
def test_orthogonal_rectangular(orth_map, shape):
    m = kiln.nn.Linear(shape[1], shape[0], dtype=kiln.float64)
    KP.orthogonal(m, orthogonal_map=orth_map)
    w = m.weight
    gram = w.T @ w if shape[0] > shape[1] else w @ w.T
    assert kiln.allclose(gram, kiln.eye(min(shape), dtype=kiln.float64), atol=1e-10)


def test_custom_parametrization_cache_and_remove():
    class Symmetric(kiln.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

    calls = []

    class Counting(kiln.nn.Module):
        def forward(self, X):
            calls.append(1)
            return X

    m = kiln.nn.Linear(3, 3)
    KPZ.register_parametrization(m, "weight", Symmetric())
    KPZ.register_parametrization(m, "weight", Counting())
    assert KPZ.is_parametrized(m) and KPZ.is_parametrized(m, "weight") and not KPZ.is_parametrized(m, "bias")
    assert kiln.equal(m.weight, m.weight.T)
    calls.clear()
    with KPZ.cached():
        m.weight, m.weight
    assert len(calls) == 1
    assert KPZ.type_before_parametrizations(m) is kiln.nn.Linear
    w = m.weight.detach().clone()
    KPZ.remove_parametrizations(m, "weight")
    assert type(m) is kiln.nn.Linear and isinstance(m.weight, kiln.nn.Parameter) and kiln.equal(m.weight, w)
    # forward of a C++ layer uses the parametrized weight
    conv = kiln.nn.Conv2d(2, 2, 1, bias=False)
    KPZ.register_parametrization(conv, "weight", _Zero())
    assert float(conv(kiln.randn(1, 2, 3, 3)).abs().sum()) == 0.0


class _Zero(kiln.nn.Module):
    def forward(self, X):
        return X * 0


def test_errors_as_torch():
    for lib in (torch, kiln):
        P, PZ = LIB[lib]
        m = lib.nn.Linear(3, 3)
        with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element"):
            PZ.register_parametrization(m, "nope", lib.nn.Identity())
        with pytest.raises(ValueError, match="Expected a matrix or batch of matrices"):
            P.orthogonal(m, "bias")
        with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
            P.orthogonal(m, orthogonal_map="qr")
        with pytest.raises(ValueError, match="has no parameter or buffer with name"):
            P.spectral_norm(m, "nope")
        with pytest.raises(ValueError, match="Expected n_power_iterations to be positive"):
            P.spectral_norm(m, n_power_iterations=0)
        with pytest.raises(ValueError, match="does not have a parametrization on"):
            PZ.remove_parametrizations(m, "weight")

        class Shrink(lib.nn.Module):
            def forward(self, X):
                return X[:2]
        with pytest.raises(ValueError, match="may not change the shape of the tensor"):
            PZ.register_parametrization(m, "weight", Shrink())
