"""torch.svd_lowrank / torch.pca_lowrank against torch 2.13. The random directions come from each
library's own generator, so the factors are compared where they are determined: on matrices of rank
at most q both reconstruct the matrix, and the singular values (and the subspaces U U^H, V V^H) agree
with torch's and with an exact SVD; shapes, dtypes, the mean M, centring and the errors as torch."""
import pytest
import torch

import kiln
from helpers import assert_same, to_kiln, to_torch


def _low_rank(shape, rank, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    *batch, m, n = shape
    a = torch.randn(*batch, m, rank, generator=g, dtype=torch.float64)
    b = torch.randn(*batch, rank, n, generator=g, dtype=torch.float64)
    return (a @ b).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.complex128])
@pytest.mark.parametrize("shape,rank,q", [((30, 20), 5, 6), ((20, 30), 5, 6), ((3, 25, 12), 3, 4), ((16, 16), 6, 6)])
def test_svd_lowrank(dtype, shape, rank, q):
    if dtype.is_complex:  # (real and imaginary parts of rank q / 2 each: rank at most q)
        A = torch.complex(_low_rank(shape, q // 2, torch.float64, seed=3), _low_rank(shape, q // 2, torch.float64,
                                                                                      seed=4))
    else:
        A = _low_rank(shape, rank, torch.float64, seed=1).to(dtype)
    tol = dict(rtol=1e-9, atol=1e-9) if dtype != torch.float32 else dict(rtol=2e-4, atol=2e-4)
    tU, tS, tV = torch.svd_lowrank(A, q=q)
    kU, kS, kV = kiln.svd_lowrank(to_kiln(A), q=q)
    for k, t in ((kU, tU), (kS, tS), (kV, tV)):
        assert tuple(k.shape) == tuple(t.shape) and to_torch(k).dtype == t.dtype
    kU, kS, kV = to_torch(kU), to_torch(kS), to_torch(kV)
    scale = A.abs().max()
    assert_same(to_kiln((kU * kS.unsqueeze(-2).to(kU.dtype)) @ kV.mH / scale), A / scale, **tol)
    assert_same(to_kiln(kS / scale), tS / scale, **tol)  # (a rank <= q matrix: the exact singular values)
    exact = torch.linalg.svdvals(A)[..., :q]
    assert_same(to_kiln(kS / scale), exact / scale, **tol)


def test_svd_lowrank_with_mean_and_pca():
    A = _low_rank((40, 10), 4, torch.float64, seed=5) + 3.0
    Mrow = A.mean(dim=-2, keepdim=True)
    for kw in (dict(q=5), dict(q=5, niter=0), dict(q=5, niter=4)):
        tU, tS, tV = torch.svd_lowrank(A, M=Mrow, **kw)
        kU, kS, kV = kiln.svd_lowrank(to_kiln(A), M=to_kiln(Mrow), **kw)
        assert_same(kS, tS, rtol=1e-9, atol=1e-9)
        assert_same(to_kiln(to_torch(kU) @ torch.diag(to_torch(kS)) @ to_torch(kV).T), A - Mrow, rtol=1e-9, atol=1e-9)
    for kw in (dict(), dict(q=4), dict(center=False, q=5), dict(q=4, niter=1)):
        tU, tS, tV = torch.pca_lowrank(A, **kw)
        kU, kS, kV = kiln.pca_lowrank(to_kiln(A), **kw)
        assert tuple(kU.shape) == tuple(tU.shape) and tuple(kV.shape) == tuple(tV.shape)
        assert_same(kS, tS, rtol=1e-8, atol=1e-8)
        # the principal directions agree up to sign: the projectors V V^T do
        assert_same(to_kiln(to_torch(kV[:, :4]) @ to_torch(kV[:, :4]).T), tV[:, :4] @ tV[:, :4].T,
                    rtol=1e-8, atol=1e-8)
    assert to_torch(kiln.svd_lowrank(to_kiln(A.float()), q=3)[0]).dtype == torch.float32


def test_errors():
    A = torch.randn(30, 20)
    for kw in (dict(q=25), dict(q=-1), dict(niter=-1)):
        with pytest.raises(ValueError) as te:
            torch.pca_lowrank(A, **kw)
        with pytest.raises(ValueError) as ke:
            kiln.pca_lowrank(to_kiln(A), **kw)
        assert str(ke.value) == str(te.value)
