"""kiln.linalg: torch.linalg's names. The functions are made from the ops' schemas (kiln/ops/linalg.cpp);
this module gives them their torch.linalg names."""
from . import _C

LinAlgError = _C._LinAlgError

lu_factor = _C.linalg_lu_factor
lu_factor_ex = _C.linalg_lu_factor_ex
lu = _C.linalg_lu
lu_solve = _C.linalg_lu_solve
solve = _C.linalg_solve
solve_ex = _C.linalg_solve_ex
solve_triangular = _C.linalg_solve_triangular
inv = _C.linalg_inv
inv_ex = _C.linalg_inv_ex
det = _C.linalg_det
slogdet = _C.linalg_slogdet
cholesky = _C.linalg_cholesky
cholesky_ex = _C.linalg_cholesky_ex


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    return _C._vector_norm(x, float(ord), dim, keepdim, dtype=dtype)
