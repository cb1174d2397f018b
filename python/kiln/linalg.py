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
qr = _C.linalg_qr
householder_product = _C.linalg_householder_product
eigh = _C.linalg_eigh
eigvalsh = _C.linalg_eigvalsh
eig = _C.linalg_eig
eigvals = _C.linalg_eigvals
svd = _C.linalg_svd
svdvals = _C.linalg_svdvals
lstsq = _C.linalg_lstsq
matrix_exp = _C.linalg_matrix_exp
pinv = _C.linalg_pinv
matrix_rank = _C.linalg_matrix_rank
matrix_norm = _C.linalg_matrix_norm
norm = _C.linalg_norm
vector_norm = _C.linalg_vector_norm
cond = _C.linalg_cond
matrix_power = _C.linalg_matrix_power
cross = _C.linalg_cross
vecdot = _C.linalg_vecdot
multi_dot = _C.linalg_multi_dot
diagonal = _C.linalg_diagonal
vander = _C.linalg_vander
tensorinv = _C.linalg_tensorinv
tensorsolve = _C.linalg_tensorsolve

