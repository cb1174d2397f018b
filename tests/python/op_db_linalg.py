"""op_db entries of the linear-algebra ops (kiln.linalg and torch's top-level forms): the LU family,
solves, inverse, determinants, Cholesky. Inputs are well conditioned (diagonally dominant, or
M M^H + n I for the positive-definite ones) so that results are unique and comparable with torch's;
singular inputs, the info codes, invariants and errors are tested in test_linalg.py."""
import torch

import kiln

from op_db import S, T, G, entry

LINALG = ("float32", "float64", "complex64", "complex128")
LTOL = {"float32": (1e-4, 1e-5), "complex64": (1e-4, 1e-5), "float64": (1e-10, 1e-12), "complex128": (1e-10, 1e-12)}
GRAD = ("float64", "complex128")


def _raw(shape, dtype, grad, seed, low=-1.0, high=1.0):
    return G(shape, dtype, low=low, high=high, seed=seed) if grad else T(shape, dtype, low, high, seed)


def M(*shape, dtype, grad, seed=0):
    """Diagonally dominant (so non-singular and well conditioned) square matrices."""
    x = _raw(shape, dtype, grad, seed)
    return x + shape[-1] * torch.eye(shape[-1], dtype=x.dtype)


def R(*shape, dtype, grad, seed=0):
    """Plain values in [-1, 1]: right-hand sides, rectangular inputs."""
    return _raw(shape, dtype, grad, seed)


def SPD(*shape, dtype, grad, seed=0):
    """Hermitian positive-definite: X X^H + n I."""
    x = _raw(shape, dtype, grad, seed)
    return x @ x.mH + shape[-1] * torch.eye(shape[-1], dtype=x.dtype)


def TRI(*shape, dtype, grad, seed=0, upper=True):
    a = M(*shape, dtype=dtype, grad=grad, seed=seed)
    return a.triu() if upper else a.tril()


def _negate_column(a):
    return a * torch.tensor([1.0, -1.0, 1.0], dtype=a.dtype)


def _square_samples(dtype, grad):
    out = [S(M(3, 3, dtype=dtype, grad=grad, seed=1), desc="3x3"),
           S(M(2, 4, 4, dtype=dtype, grad=grad, seed=2), desc="batched"),
           S(M(5, 5, dtype=dtype, grad=grad, seed=3).mT, desc="transposed"),
           S(M(1, 1, dtype=dtype, grad=grad, seed=4), desc="1x1"),
           S(_negate_column(M(2, 1, 3, 3, dtype=dtype, grad=grad, seed=5)), desc="negative-det")]
    if not grad:
        out += [S(T((0, 0), dtype), desc="empty-0x0"), S(T((0, 3, 3), dtype), desc="empty-batch"),
                S(R(3, 4, dtype=dtype, grad=False, seed=6), desc="error-not-square")]
    return out


def _logdet_samples(dtype, grad):
    out = [S(SPD(3, 3, dtype=dtype, grad=grad, seed=1), desc="spd"),
           S(SPD(2, 4, 4, dtype=dtype, grad=grad, seed=2), desc="batched")]
    if not grad:
        a = M(3, 3, dtype=dtype, grad=False, seed=3)
        out.append(S(torch.cat([-a[:1], a[1:]]), desc="negative-det"))
    return out


def _solve_samples(dtype, grad):
    out = [S(M(3, 3, dtype=dtype, grad=grad, seed=1), R(3, 2, dtype=dtype, grad=grad, seed=2), desc="matrix"),
           S(M(3, 3, dtype=dtype, grad=grad, seed=3), R(3, dtype=dtype, grad=grad, seed=4), desc="vector"),
           S(M(2, 3, 3, dtype=dtype, grad=grad, seed=5), R(2, 3, dtype=dtype, grad=grad, seed=6), desc="batched-vector"),
           S(M(2, 3, 3, dtype=dtype, grad=grad, seed=7), R(3, 4, dtype=dtype, grad=grad, seed=8), desc="broadcast-B"),
           S(M(1, 3, 3, dtype=dtype, grad=grad, seed=9), R(2, 3, 2, dtype=dtype, grad=grad, seed=10), desc="broadcast-A"),
           S(M(3, 3, dtype=dtype, grad=grad, seed=11), R(2, 3, dtype=dtype, grad=grad, seed=12), left=False, desc="right"),
           S(M(4, 4, dtype=dtype, grad=grad, seed=13).mT, R(4, 3, dtype=dtype, grad=grad, seed=14).mT.mT, desc="strided")]
    if not grad:
        out += [S(T((0, 3, 3), dtype), T((0, 3, 2), dtype), desc="empty-batch"),
                S(T((3, 3), dtype), T((3, 0), dtype), desc="empty-rhs"),
                S(M(3, 3, dtype=dtype, grad=False), R(4, 2, dtype=dtype, grad=False), desc="error-shapes")]
    return out


def _lu_factor_samples(dtype, grad):
    out = [S(M(4, 4, dtype=dtype, grad=grad, seed=1), desc="square"),
           S(R(2, 3, 3, dtype=dtype, grad=grad, seed=2), desc="batched"),
           S(R(5, 3, dtype=dtype, grad=grad, seed=3), desc="tall"),
           S(R(3, 5, dtype=dtype, grad=grad, seed=4), desc="wide"),
           S(R(4, 4, dtype=dtype, grad=grad, seed=5).mT, desc="transposed")]
    if not grad:
        out += [S(T((0, 3, 3), dtype), desc="empty-batch"), S(T((3, 0), dtype), desc="empty-cols")]
    return out


def _factored(dtype, grad, *shape, seed):
    """(LU, pivots) of a well-conditioned matrix, from torch (the LU input of lu_solve / lu_unpack)."""
    a = M(*shape, dtype=dtype, grad=False, seed=seed) if shape[-1] == shape[-2] else R(*shape, dtype=dtype,
                                                                                      grad=False, seed=seed)
    return torch.linalg.lu_factor(a)


def _lu_solve_samples(dtype, grad):
    LU, piv = _factored(dtype, grad, 3, 3, seed=1)
    LUb, pivb = _factored(dtype, grad, 2, 3, 3, seed=2)
    b = R(3, 2, dtype=dtype, grad=grad, seed=3)
    return [S(LU, piv, b, desc="left"), S(LU, piv, b, adjoint=True, desc="adjoint"),
            S(LU, piv, b.mT, left=False, desc="right"), S(LU, piv, b.mT, left=False, adjoint=True, desc="right-adjoint"),
            S(LUb, pivb, R(4, 1, 3, 2, dtype=dtype, grad=grad, seed=4), desc="broadcast")]


def _lu_unpack_samples(dtype, grad):
    out = []
    for shape, d in (((4, 4), "square"), ((2, 3, 3), "batched"), ((5, 3), "tall"), ((3, 5), "wide")):
        LU, piv = _factored(dtype, grad, *shape, seed=len(d))
        out.append(S(LU, piv, desc=d))
    LU, piv = _factored(dtype, grad, 3, 3, seed=9)
    if not grad:
        out += [S(LU, piv, False, True, desc="pivots-only"), S(LU, piv, True, False, desc="data-only")]
    return out


def _cholesky_samples(dtype, grad):
    out = [S(SPD(3, 3, dtype=dtype, grad=grad, seed=1), desc="3x3"),
           S(SPD(2, 4, 4, dtype=dtype, grad=grad, seed=2), desc="batched"),
           S(SPD(3, 3, dtype=dtype, grad=grad, seed=3), upper=True, desc="upper")]
    if not grad:
        out += [S(T((0, 3, 3), dtype), desc="empty-batch")]
    return out


def _cholesky_legacy_samples(dtype, grad):
    return [S(SPD(3, 3, dtype=dtype, grad=grad, seed=1), desc="lower"),
            S(SPD(2, 4, 4, dtype=dtype, grad=grad, seed=2), True, desc="upper")]


def _cholesky_solve_samples(dtype, grad):
    L = torch.linalg.cholesky(SPD(3, 3, dtype=dtype, grad=False, seed=1))
    b = R(3, 2, dtype=dtype, grad=grad, seed=2)
    return [S(b, L, desc="lower"), S(b, L.mH.resolve_conj().contiguous(), True, desc="upper"),
            S(R(2, 3, 1, dtype=dtype, grad=grad, seed=3), L, desc="broadcast")]


def _cholesky_inverse_samples(dtype, grad):
    L = torch.linalg.cholesky(SPD(2, 3, 3, dtype=dtype, grad=False, seed=1))
    return [S(L[0], desc="lower"), S(L.mH.resolve_conj().contiguous(), True, desc="upper-batched")]


def _solve_triangular_samples(dtype, grad):
    U = TRI(3, 3, dtype=dtype, grad=grad, seed=1)
    Lo = TRI(2, 3, 3, dtype=dtype, grad=grad, seed=2, upper=False)
    b = R(3, 2, dtype=dtype, grad=grad, seed=3)
    return [S(U, b, upper=True, desc="upper"), S(Lo, b, upper=False, desc="lower-broadcast"),
            S(U, b.mT, upper=True, left=False, desc="right"),
            S(U, b, upper=True, unitriangular=True, desc="unit"),
            S(Lo.mT, b, upper=True, desc="transposed-A")]


def _triangular_solve_samples(dtype, grad):
    U = TRI(3, 3, dtype=dtype, grad=grad, seed=1)
    b = R(3, 2, dtype=dtype, grad=grad, seed=3)
    return [S(b, U, desc="upper"), S(b, U.mT, False, desc="lower"), S(b, U, True, True, desc="transpose"),
            S(R(2, 3, 2, dtype=dtype, grad=grad, seed=4), U, True, False, True, desc="unit-broadcast")]


def _e(name, gen, covers, grad=True, **kw):
    kw.setdefault("dtypes", LINALG)
    kw.setdefault("tol", LTOL)
    return entry(name, gen, covers=covers, supports_grad=grad, grad_dtypes=GRAD, **kw)


LINALG_OPS = [
    _e("linalg.det", _square_samples, ("linalg_det",), method=False, gradcheck=True),
    _e("det", _square_samples, ("linalg_det",)),
    _e("linalg.slogdet", _square_samples, ("_linalg_slogdet",), method=False),
    _e("slogdet", _square_samples, ("_linalg_slogdet",)),
    _e("logdet", _logdet_samples, ("_linalg_slogdet",)),
    _e("linalg.inv", _square_samples, ("linalg_inv_ex",), method=False, gradcheck=True),
    _e("linalg.inv_ex", _square_samples, ("linalg_inv_ex",), method=False),
    _e("inverse", _square_samples, ("linalg_inv_ex",)),
    _e("linalg.solve", _solve_samples, ("linalg_solve_ex",), method=False, gradcheck=True),
    _e("linalg.solve_ex", _solve_samples, ("linalg_solve_ex",), method=False),
    _e("linalg.lu_factor", _lu_factor_samples, ("linalg_lu_factor_ex",), method=False),
    _e("linalg.lu_factor_ex", _lu_factor_samples, ("linalg_lu_factor_ex",), method=False),
    _e("linalg.lu", _lu_factor_samples, ("linalg_lu_factor_ex", "lu_unpack"), method=False),
    _e("linalg.lu_solve", _lu_solve_samples, ("linalg_lu_solve",), method=False),
    _e("lu_unpack", _lu_unpack_samples, ("lu_unpack",), method=False),
    _e("linalg.cholesky", _cholesky_samples, ("linalg_cholesky_ex",), method=False),
    _e("linalg.cholesky_ex", _cholesky_samples, ("linalg_cholesky_ex",), method=False),
    _e("cholesky", _cholesky_legacy_samples, ("linalg_cholesky_ex",)),
    _e("cholesky_solve", _cholesky_solve_samples, ("cholesky_solve",)),
    _e("cholesky_inverse", _cholesky_inverse_samples, ("cholesky_inverse",)),
    _e("linalg.solve_triangular", _solve_triangular_samples, ("linalg_solve_triangular",), method=False,
       gradcheck=True),
    _e("triangular_solve", _triangular_solve_samples, ("linalg_solve_triangular",)),
]


# ---- the decompositions: their vectors are unique up to a phase per column, which the wrappers fix
# (first component real and positive) so that values and gradients compare --------------------------------
def _fix_cols(V):
    p = V[..., :1, :]
    return V * (p.conj() / p.abs())


def _eigh_fn(m):
    def run(A, *args, **kw):
        L, V = m.linalg.eigh(A, *args, **kw)
        return L, _fix_cols(V)
    return run


def _eig_fn(m):
    def run(A):
        L, V = m.linalg.eig(A)
        return L, _fix_cols(V)
    return run


def _svd_fn(m, full=False):
    def run(A):
        U, S, Vh = m.linalg.svd(A, full_matrices=full)
        k = S.shape[-1]
        p = U[..., :1, :k]
        d = p.conj() / p.abs()
        return U[..., :k] * d, S, Vh[..., :k, :] * d.mT.conj()
    return run


def _legacy_svd_fn(m):
    def run(A, some=True):
        U, S, V = m.svd(A, some=some)
        k = S.shape[-1]
        p = U[..., :1, :k]
        d = p.conj() / p.abs()
        return U[..., :k] * d, S, V[..., :k] * d
    return run


def _qr_samples(dtype, grad):
    out = [S(R(5, 3, dtype=dtype, grad=grad, seed=1), desc="tall"),
           S(R(3, 5, dtype=dtype, grad=grad, seed=2), desc="wide"),
           S(R(2, 4, 4, dtype=dtype, grad=grad, seed=3), desc="batched"),
           S(R(4, 3, dtype=dtype, grad=grad, seed=4).mT, desc="transposed"),
           S(R(3, 5, dtype=dtype, grad=grad, seed=5), mode="complete", desc="complete-wide")]
    if not grad:
        out += [S(R(5, 3, dtype=dtype, grad=False, seed=6), mode="complete", desc="complete-tall"),
                S(R(5, 3, dtype=dtype, grad=False, seed=7), mode="r", desc="r"),
                S(T((0, 3, 3), dtype), desc="empty-batch"), S(T((3, 0), dtype), mode="complete", desc="empty-cols")]
    return out


def _eigh_samples(dtype, grad):
    out = [S(SPD(4, 4, dtype=dtype, grad=grad, seed=1), desc="spd"),
           S(SPD(2, 3, 3, dtype=dtype, grad=grad, seed=2) - 3, desc="batched-indefinite"),
           S(SPD(4, 4, dtype=dtype, grad=grad, seed=3), "U", desc="upper")]
    if not grad:
        out += [S(T((0, 3, 3), dtype), desc="empty-batch")]
    return out


def _eig_samples(dtype, grad):
    return [S(R(4, 4, dtype=dtype, grad=grad, seed=1) + torch.diag(torch.arange(4.0)).to(
                R(1, dtype=dtype, grad=grad).dtype), desc="spread"),
            S(R(2, 3, 3, dtype=dtype, grad=grad, seed=2), desc="batched")]


def _svd_samples(dtype, grad):
    out = [S(R(5, 3, dtype=dtype, grad=grad, seed=1), desc="tall"),
           S(R(3, 5, dtype=dtype, grad=grad, seed=2), desc="wide"),
           S(R(2, 4, 4, dtype=dtype, grad=grad, seed=3), desc="batched"),
           S(R(4, 3, dtype=dtype, grad=grad, seed=4).mT, desc="transposed")]
    return out


def _svdvals_samples(dtype, grad):
    out = _svd_samples(dtype, grad)
    if not grad:
        out += [S(T((0, 3, 3), dtype), desc="empty-batch"), S(T((3, 0), dtype), desc="empty-cols"),
                S(torch.zeros(3, 3, dtype=getattr(torch, dtype)), desc="zero")]
    return out


def _lstsq_samples(dtype, grad):
    a, b = R(5, 3, dtype=dtype, grad=grad, seed=1), R(5, 2, dtype=dtype, grad=grad, seed=2)
    out = [S(a, b, desc="tall"), S(a, b, driver="gelsd", desc="gelsd"), S(a, b, driver="gelss", desc="gelss"),
           S(a, b, driver="gels", desc="gels"),
           S(R(2, 3, 5, dtype=dtype, grad=grad, seed=3), R(2, 3, 2, dtype=dtype, grad=grad, seed=4), desc="wide-batched"),
           S(R(2, 5, 3, dtype=dtype, grad=grad, seed=5), R(1, 5, 2, dtype=dtype, grad=grad, seed=6), desc="broadcast")]
    if not grad:
        out.append(S(a, b[:, 0], desc="vector"))
    return out


def _matrix_exp_samples(dtype, grad):
    out = [S(R(3, 3, dtype=dtype, grad=grad, seed=1), desc="small-norm"),
           S(R(2, 4, 4, dtype=dtype, grad=grad, seed=2) * 3, desc="scaled")]
    if not grad:
        out += [S(T((0, 3, 3), dtype), desc="empty-batch"), S(R(6, 6, dtype=dtype, grad=False, seed=3) * 20, desc="large")]
    return out


def _pinv_samples(dtype, grad):
    out = [S(R(5, 3, dtype=dtype, grad=grad, seed=1), desc="tall"), S(R(3, 5, dtype=dtype, grad=grad, seed=2), desc="wide"),
           S(SPD(4, 4, dtype=dtype, grad=grad, seed=3), hermitian=True, desc="hermitian")]
    if not grad:
        a = R(4, 2, dtype=dtype, grad=False, seed=4)
        out += [S(a @ a.mH, desc="rank-deficient"), S(R(3, 3, dtype=dtype, grad=False, seed=5), atol=0.5, desc="atol"),
                S(T((0, 3, 2), dtype), desc="empty-batch")]
    return out


def _rank_samples(dtype, grad):
    a = R(5, 2, dtype=dtype, grad=False, seed=1)
    return [S(a @ a.mH, desc="rank-2"), S(R(2, 4, 3, dtype=dtype, grad=False, seed=2), desc="batched"),
            S(SPD(3, 3, dtype=dtype, grad=False, seed=3), hermitian=True, desc="hermitian"),
            S(R(4, 4, dtype=dtype, grad=False, seed=4), atol=1.0, rtol=0.0, desc="atol")]


def _matrix_norm_samples(dtype, grad):
    a = R(3, 4, dtype=dtype, grad=grad, seed=1)
    out = [S(a, desc="fro"), S(a, "nuc", desc="nuc"), S(a, 2, desc="2"), S(a, -2, desc="-2"), S(a, 1, desc="1"),
           S(a, float("inf"), desc="inf"), S(R(2, 3, 3, dtype=dtype, grad=grad, seed=2), -1, (0, 2), True, desc="dims-keepdim")]
    return out


def _norm_samples(dtype, grad):
    a = R(3, 4, dtype=dtype, grad=grad, seed=1)
    return [S(a, desc="default"), S(a, 2, desc="matrix-2"), S(a, "fro", desc="fro"), S(a, 3, dim=1, desc="vector-dim"),
            S(R(2, 3, 4, dtype=dtype, grad=grad, seed=2), dim=(1, 2), desc="matrix-dims")]


def _cond_samples(dtype, grad):
    a = M(3, 3, dtype=dtype, grad=grad, seed=1)
    return [S(a, desc="default"), S(a, -2, desc="-2"), S(a, "fro", desc="fro-nograd"), S(a, 1, desc="1-nograd"),
            S(R(5, 3, dtype=dtype, grad=grad, seed=2), desc="rectangular")]


def _matrix_power_samples(dtype, grad):
    a = M(3, 3, dtype=dtype, grad=grad, seed=1) / 3
    return [S(a, 0, desc="0"), S(a, 1, desc="1"), S(a, 5, desc="5"), S(a, -2, desc="-2"),
            S(M(2, 3, 3, dtype=dtype, grad=grad, seed=2) / 3, 3, desc="batched")]


def _cross_samples(dtype, grad):
    return [S(R(4, 3, dtype=dtype, grad=grad, seed=1), R(4, 3, dtype=dtype, grad=grad, seed=2), desc="rows"),
            S(R(3, 2, dtype=dtype, grad=grad, seed=3), R(3, 1, dtype=dtype, grad=grad, seed=4), dim=0, desc="dim0-broadcast")]


def _vecdot_samples(dtype, grad):
    return [S(R(4, 3, dtype=dtype, grad=grad, seed=1), R(4, 3, dtype=dtype, grad=grad, seed=2), desc="last"),
            S(R(3, 5, dtype=dtype, grad=grad, seed=3), R(3, 1, dtype=dtype, grad=grad, seed=4), dim=0, desc="dim0")]


def _multi_dot_samples(dtype, grad):
    ms = [R(2, 5, dtype=dtype, grad=grad, seed=1), R(5, 3, dtype=dtype, grad=grad, seed=2),
          R(3, 7, dtype=dtype, grad=grad, seed=3)]
    return [S(ms, desc="three"), S([R(5, dtype=dtype, grad=grad, seed=4)] + ms[1:] + [R(7, dtype=dtype, grad=grad, seed=5)],
                                   desc="vector-ends")]


def _vander_samples(dtype, grad):
    return [S(R(4, dtype=dtype, grad=grad, seed=1), desc="square"), S(R(2, 3, dtype=dtype, grad=grad, seed=2), N=5, desc="N")]


def _tensorinv_samples(dtype, grad):
    return [S(M(6, 6, dtype=dtype, grad=grad, seed=1).reshape(2, 3, 6), ind=2, desc="ind2"),
            S(M(4, 4, dtype=dtype, grad=grad, seed=2).reshape(4, 2, 2), ind=1, desc="ind1")]


def _tensorsolve_samples(dtype, grad):
    a = M(6, 6, dtype=dtype, grad=grad, seed=1).reshape(2, 3, 6)
    return [S(a, R(2, 3, dtype=dtype, grad=grad, seed=2), desc="plain"),
            S(a.permute(2, 0, 1), R(2, 3, dtype=dtype, grad=grad, seed=3), dims=(0,), desc="dims")]


def _householder_samples(dtype, grad):
    a, tau = torch.geqrf(R(5, 3, dtype=dtype, grad=False, seed=1))
    b, taub = torch.geqrf(R(2, 4, 4, dtype=dtype, grad=False, seed=4))
    out = [S(a, tau, desc="tall"), S(a[..., :2], tau[:2], desc="fewer"), S(b, taub, desc="batched-square"),
           S(a, tau[:2], desc="fewer-reflectors")]
    return out


def _ormqr_samples(dtype, grad):
    a, tau = torch.geqrf(R(4, 4, dtype=dtype, grad=False, seed=1))
    c = R(4, 3, dtype=dtype, grad=False, seed=2)
    return [S(a, tau, c, desc="left"), S(a, tau, c, True, True, desc="left-transpose"),
            S(a, tau, c.mT.contiguous(), False, False, desc="right")]


LINALG_OPS += [
    _e("linalg.qr", _qr_samples, ("linalg_qr",), method=False),
    _e("qr", lambda dt, g: [S(R(5, 3, dtype=dt, grad=g, seed=1), desc="some"),
                            S(R(3, 5, dtype=dt, grad=g, seed=2), False, desc="complete-wide")], ("linalg_qr",)),
    _e("geqrf", lambda dt, g: [S(R(5, 3, dtype=dt, grad=False, seed=1), desc="tall"),
                               S(R(2, 3, 4, dtype=dt, grad=False, seed=2), desc="wide-batched")], ("geqrf",), grad=False),
    _e("linalg.householder_product", _householder_samples, ("linalg_householder_product",), method=False,
       gradcheck=True),
    _e("orgqr", _householder_samples, ("linalg_householder_product",)),
    _e("ormqr", _ormqr_samples, ("ormqr",), grad=False),
    _e("linalg.eigh", _eigh_samples, ("_linalg_eigh",), kiln_fn=_eigh_fn(kiln), torch_fn=_eigh_fn(torch), method=False),
    _e("linalg.eigvalsh", _eigh_samples, ("_linalg_eigh",), method=False),
    _e("linalg.eig", _eig_samples, ("linalg_eig",), kiln_fn=_eig_fn(kiln), torch_fn=_eig_fn(torch), method=False),
    _e("linalg.eigvals", _eig_samples, ("linalg_eig",), method=False),
    _e("linalg.svd", _svd_samples, ("_linalg_svd",), kiln_fn=_svd_fn(kiln), torch_fn=_svd_fn(torch), method=False),
    _e("linalg.svd", _svd_samples, ("_linalg_svd",), variant="full", kiln_fn=_svd_fn(kiln, True),
       torch_fn=_svd_fn(torch, True), method=False),
    _e("svd", _svd_samples, ("_linalg_svd",), kiln_fn=_legacy_svd_fn(kiln), torch_fn=_legacy_svd_fn(torch), method=False),
    _e("linalg.svdvals", _svdvals_samples, ("_linalg_svd",), method=False),
    _e("linalg.lstsq", _lstsq_samples, ("_linalg_lstsq",), method=False,
       meta=False, meta_reason="whether residuals exist depends on the ranks (data)"),
    _e("linalg.matrix_exp", _matrix_exp_samples, ("linalg_matrix_exp",), method=False, supports_gradgrad=True),
    _e("matrix_exp", _matrix_exp_samples, ("linalg_matrix_exp",)),
    _e("linalg.pinv", _pinv_samples, ("_linalg_pinv",), method=False),
    _e("pinverse", lambda dt, g: _pinv_samples(dt, g)[:2], ("_linalg_pinv",)),
    _e("linalg.matrix_rank", _rank_samples, ("_linalg_svd", "_linalg_eigh"), grad=False, method=False),
    _e("linalg.matrix_norm", _matrix_norm_samples, ("_linalg_svd",), method=False),
    _e("linalg.norm", _norm_samples, ("_linalg_svd",), method=False),
    _e("linalg.cond", _cond_samples, ("_linalg_svd", "linalg_inv_ex"), method=False),
    _e("linalg.matrix_power", _matrix_power_samples, ("linalg_inv_ex",), method=False),
    _e("matrix_power", _matrix_power_samples, ("linalg_inv_ex",)),
    _e("linalg.cross", _cross_samples, ("mul", "sub", "cat"), method=False),
    _e("linalg.vecdot", _vecdot_samples, ("mul", "sum"), method=False),
    _e("linalg.multi_dot", _multi_dot_samples, ("bmm",), method=False),
    _e("linalg.vander", _vander_samples, ("cumprod", "cat"), method=False),
    _e("linalg.tensorinv", _tensorinv_samples, ("linalg_inv_ex",), method=False),
    _e("linalg.tensorsolve", _tensorsolve_samples, ("linalg_solve_ex",), method=False),
]
