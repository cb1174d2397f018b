"""op_db entries of the linear-algebra ops (kiln.linalg and torch's top-level forms): the LU family,
solves, inverse, determinants, Cholesky. Inputs are well conditioned (diagonally dominant, or
M M^H + n I for the positive-definite ones) so that results are unique and comparable with torch's;
singular inputs, the info codes, invariants and errors are tested in test_linalg.py."""
import torch

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
    _e("linalg.det", _square_samples, ("_linalg_det",), method=False, gradcheck=True),
    _e("det", _square_samples, ("_linalg_det",)),
    _e("linalg.slogdet", _square_samples, ("_linalg_slogdet",), method=False),
    _e("slogdet", _square_samples, ("_linalg_slogdet",)),
    _e("logdet", _logdet_samples, ("_linalg_slogdet",)),
    _e("linalg.inv", _square_samples, ("linalg_inv_ex",), method=False, gradcheck=True),
    _e("linalg.inv_ex", _square_samples, ("linalg_inv_ex",), method=False),
    _e("inverse", _square_samples, ("linalg_inv_ex",)),
    _e("linalg.solve", _solve_samples, ("_linalg_solve_ex",), method=False, gradcheck=True),
    _e("linalg.solve_ex", _solve_samples, ("_linalg_solve_ex",), method=False),
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
