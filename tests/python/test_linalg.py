"""kiln.linalg beyond one op per sample (op_db_linalg.py holds the per-op conformance): LinAlgError and
the info codes of the _ex forms on singular inputs, invariants (P L U = A, A inv(A) = I, L L^H = A)
at sizes where LAPACK blocks and the batch is spread over threads, errors for bad dtypes and
shapes, NaN input, and second derivatives against torch."""
import pytest
import torch

import kiln
from helpers import to_kiln, to_torch

DTYPES = ["float32", "float64", "complex64", "complex128"]
TOL = {"float32": 1e-4, "complex64": 1e-4, "float64": 1e-10, "complex128": 1e-10}


def rand(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, dtype=getattr(torch, dtype), generator=g)


def well(n, dtype, batch=(), seed=0):
    return rand(batch + (n, n), dtype, seed) + n * torch.eye(n, dtype=getattr(torch, dtype))


def singular(dtype):
    """Batch of 3: invertible, singular (a zero row, so U[2,2] == 0 exactly), invertible."""
    a = well(3, dtype, (3,), seed=1)
    a[1, 2] = 0
    return a


def close(k, t, dtype):
    t = t.resolve_conj()
    assert torch.allclose(to_torch(k), t, rtol=TOL[dtype], atol=TOL[dtype]), (to_torch(k), t)


# ---- LinAlgError and the info codes ----------------------------------------------------------------------
def test_linalg_error_is_a_runtime_error():
    assert issubclass(kiln.linalg.LinAlgError, RuntimeError)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fn", ["inv", "solve", "lu_factor"])
def test_singular_raises_linalg_error_naming_the_batch_element(fn, dtype):
    a = singular(dtype)
    args = (a, rand((3, 3, 2), dtype)) if fn == "solve" else (a,)
    # torch's lu_factor raises a plain RuntimeError, its inv and solve a LinAlgError
    exc_t = RuntimeError if fn == "lu_factor" else torch.linalg.LinAlgError
    exc_k = RuntimeError if fn == "lu_factor" else kiln.linalg.LinAlgError
    with pytest.raises(exc_t) as et:
        getattr(torch.linalg, fn)(*args)
    with pytest.raises(exc_k, match=r"\(Batch element 1\)") as ek:
        getattr(kiln.linalg, fn)(*[to_kiln(x) for x in args])
    assert isinstance(et.value, torch.linalg.LinAlgError) == isinstance(ek.value, kiln.linalg.LinAlgError)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_of_indefinite_raises(dtype):
    a = well(3, dtype)
    a[2, 2] = -50
    a = (a + a.mH) / 2
    with pytest.raises(torch.linalg.LinAlgError):
        torch.linalg.cholesky(a)
    with pytest.raises(kiln.linalg.LinAlgError, match="leading minor of order 3"):
        kiln.linalg.cholesky(to_kiln(a))
    _, info_t = torch.linalg.cholesky_ex(a)
    _, info_k = kiln.linalg.cholesky_ex(to_kiln(a))
    assert to_torch(info_k).tolist() == info_t.tolist() == 3


@pytest.mark.parametrize("dtype", DTYPES)
def test_ex_forms_return_torch_info_codes(dtype):
    a = singular(dtype)
    ka = to_kiln(a)
    assert to_torch(kiln.linalg.inv_ex(ka)[1]).tolist() == torch.linalg.inv_ex(a)[1].tolist()
    assert to_torch(kiln.linalg.lu_factor_ex(ka)[2]).tolist() == torch.linalg.lu_factor_ex(a)[2].tolist()
    b = rand((3, 3, 1), dtype)
    assert to_torch(kiln.linalg.solve_ex(ka, to_kiln(b))[1]).tolist() == torch.linalg.solve_ex(a, b)[1].tolist()
    info = to_torch(kiln.linalg.inv_ex(ka)[1])
    assert info.dtype == torch.int32 and info.tolist()[0] == 0 and info.tolist()[1] > 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_singular_det_and_slogdet(dtype):
    a = singular(dtype)
    ka = to_kiln(a)
    close(kiln.linalg.det(ka), torch.linalg.det(a), dtype)
    s_k, l_k = kiln.linalg.slogdet(ka)
    s_t, l_t = torch.linalg.slogdet(a)
    assert to_torch(s_k)[1].abs().item() == 0 and to_torch(l_k)[1].item() == float("-inf")
    close(s_k[0], s_t[0], dtype)
    close(l_k[0], l_t[0], dtype)


# ---- invariants at sizes where LAPACK blocks, and batches spread over threads ------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(70, 70), (90, 40), (40, 90), (64, 8, 8)])
def test_lu_reconstructs(dtype, shape):
    a = rand(shape, dtype, seed=3)
    P, L, U = kiln.linalg.lu(to_kiln(a))
    close(P @ L @ U, a, dtype)
    LU_t, piv_t = torch.linalg.lu_factor(a)
    LU_k, piv_k = kiln.linalg.lu_factor(to_kiln(a))
    assert to_torch(piv_k).tolist() == piv_t.tolist()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [(), (200,)])
def test_inverse_solve_cholesky_invariants(dtype, batch):
    n = 80 if not batch else 6
    a = well(n, dtype, batch, seed=4)
    ka = to_kiln(a)
    eye = torch.eye(n, dtype=a.dtype).expand_as(a)
    close(ka @ kiln.linalg.inv(ka), eye, dtype)
    b = rand(batch + (n, 3), dtype, seed=5)
    close(ka @ kiln.linalg.solve(ka, to_kiln(b)), b, dtype)
    h = a @ a.mH
    L = kiln.linalg.cholesky(to_kiln(h))
    close(L @ L.mH, h, dtype)
    close(kiln.linalg.det(ka), torch.linalg.det(a), dtype) if n < 10 else None


# ---- errors ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["int64", "float16", "bfloat16"])
@pytest.mark.parametrize("fn", ["inv", "det", "slogdet", "cholesky", "lu_factor"])
def test_unsupported_dtype_raises_as_torch(fn, dtype):
    a = torch.ones(3, 3).to(getattr(torch, dtype))
    with pytest.raises(RuntimeError):
        getattr(torch.linalg, fn)(a)
    with pytest.raises(RuntimeError, match=fn if fn != "lu_factor" else "lu_factor"):
        getattr(kiln.linalg, fn)(to_kiln(a))


def test_shape_errors():
    with pytest.raises(RuntimeError, match="square"):
        kiln.linalg.inv(kiln.ones(3, 4))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        kiln.linalg.det(kiln.ones(3))
    with pytest.raises(RuntimeError, match="Incompatible shapes"):
        kiln.linalg.solve(kiln.eye(3), kiln.ones(4, 2))
    with pytest.raises(RuntimeError, match="same dtype"):
        kiln.linalg.solve(kiln.eye(3), kiln.ones(3, 2, dtype=kiln.float64))
    with pytest.raises(RuntimeError, match="without pivoting"):
        kiln.linalg.lu_factor(kiln.eye(3), pivot=False)
    with pytest.raises(RuntimeError, match="int32"):
        kiln.linalg.lu_solve(kiln.eye(3), kiln.ones(3, dtype=kiln.int64), kiln.ones(3, 1))


def test_nan_input_returns():
    a = torch.full((4, 4), float("nan"), dtype=torch.float64)
    assert torch.isnan(to_torch(kiln.linalg.inv_ex(to_kiln(a))[0])).any()
    assert torch.isnan(to_torch(kiln.linalg.det(to_kiln(a)))).all()


def test_cpp_names_match_torch_return_types():
    r = kiln.linalg.lu_factor(kiln.eye(3))
    assert r._fields == ("LU", "pivots")
    r = kiln.linalg.slogdet(kiln.eye(3))
    assert r._fields == ("sign", "logabsdet")
    assert not hasattr(kiln, "linalg_det")  # torch.linalg's functions live in kiln.linalg only


# ---- second derivatives ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("fn", ["inv", "det", "solve", "cholesky", "slogdet"])
def test_double_backward_matches_torch(fn, dtype):
    n = 3
    a = well(n, dtype, seed=7)
    if fn == "cholesky":
        a = a @ a.mH
    b = rand((n, 2), dtype, seed=8)

    def run(m, A):
        f = getattr(m.linalg, fn)
        out = f(A, b if m is torch else to_kiln(b)) if fn == "solve" else f(A)
        out = out[1] if fn == "slogdet" else out
        s = (out * out.conj()).real.sum() if out.is_complex() else (out * out).sum()
        (g,) = (torch if m is torch else kiln).autograd.grad(s, A, create_graph=True)
        gg = (g * g.conj()).real.sum() if g.is_complex() else (g * g).sum()
        return (torch if m is torch else kiln).autograd.grad(gg, A)[0]

    t = run(torch, a.clone().requires_grad_())
    k = run(kiln, to_kiln(a).requires_grad_())
    assert torch.allclose(to_torch(k), t, rtol=1e-7, atol=1e-8), (to_torch(k), t)
