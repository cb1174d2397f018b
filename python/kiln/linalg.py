"""kiln.linalg: norms now; the decompositions arrive with the linalg issue."""
from . import _C


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    return _C._vector_norm(x, float(ord), dim, keepdim, dtype=dtype)
