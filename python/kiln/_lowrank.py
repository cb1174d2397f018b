"""torch.svd_lowrank and torch.pca_lowrank: the randomized range finder with subspace iterations
(Halko, Martinsson, Tropp 2009, algorithms 4.4 and 5.1), as torch computes them: q random directions
(kiln's generator, so the values of a rank-deficient remainder differ from torch's), niter power
iterations re-orthonormalised by QR, then the SVD of the small projected matrix. M (svd_lowrank) is
subtracted without forming A - M; pca_lowrank centres the columns."""
from importlib import import_module as _import_module

_k = _import_module(__package__)

__all__ = ["svd_lowrank", "pca_lowrank"]


def _floating(A):
    return A.dtype if (A.is_floating_point() or A.is_complex()) else _k.float32


def _basis(A, q, niter, M):
    """Q (m x q, orthonormal columns) with Q Q^H (A - M) close to A - M."""
    R = _k.randn(A.shape[-1], q, dtype=_floating(A))

    def times(X):  # (A - M) @ X
        Y = _k.matmul(A, X)
        return Y if M is None else Y - _k.matmul(M, X)

    def times_h(X):  # (A - M)^H @ X
        Y = _k.matmul(A.mH, X)
        return Y if M is None else Y - _k.matmul(M.mH, X)
    Q = _k.linalg.qr(times(R)).Q
    for _ in range(niter):
        Q = _k.linalg.qr(times_h(Q)).Q
        Q = _k.linalg.qr(times(Q)).Q
    return Q


def _svd_lowrank(A, q, niter, M):
    q = 6 if q is None else q
    niter = 2 if niter is None else niter
    m, n = A.shape[-2:]
    if M is not None:
        M = M.broadcast_to(A.shape)
    wide = m < n
    if wide:  # (the algorithm wants a tall matrix)
        A = A.mH
        M = None if M is None else M.mH
    Q = _basis(A, q, niter, M)
    B = _k.matmul(Q.mH, A)
    if M is not None:
        B = B - _k.matmul(Q.mH, M)
    U, S, Vh = _k.linalg.svd(B, full_matrices=False)
    U, V = _k.matmul(Q, U), Vh.mH
    return (V, S, U) if wide else (U, S, V)


def svd_lowrank(A, q=6, niter=2, M=None):
    """U (.., m, q), S (.., q), V (.., n, q) with A - M close to U diag(S) V^H."""
    return _svd_lowrank(A, q, niter, M)


def pca_lowrank(A, q=None, center=True, niter=2):
    """svd_lowrank of A with its columns centred (center=True); q defaults to min(6, m, n)."""
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not (q >= 0 and q <= min(m, n)):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}")
    if not niter >= 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if not center:
        return _svd_lowrank(A, q, niter, None)
    return _svd_lowrank(A - A.mean(dim=(-2,), keepdim=True), q, niter, None)
