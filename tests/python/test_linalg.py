"""kiln.linalg beyond one op per sample (op_db_linalg.py holds the per-op conformance): LinAlgError and
the info codes of the _ex forms on singular inputs, invariants (P L U = A, A inv(A) = I, L L^H = A)
at sizes where LAPACK blocks and the batch is spread over threads, errors for bad dtypes and
shapes, NaN input, and second derivatives against torch."""
import math

import pytest
import torch

import kiln
from helpers import kiln_threads, to_kiln, to_torch

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
    """k (a kiln tensor, or a torch copy of one) against torch's t."""
    k = k if isinstance(k, torch.Tensor) else to_torch(k)
    t = t.resolve_conj()
    assert torch.allclose(k, t, rtol=TOL[dtype], atol=TOL[dtype]), (k, t)


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
@pytest.mark.parametrize("pos", [(0, 0), (1, 1), (2, 2), (1, 0), (2, 1)])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_of_nan_raises(dtype, pos, upper):
    """A NaN pivot is not positive-definite (MKL's and reference LAPACK's potrf; OpenBLAS's takes it)."""
    a = well(3, dtype)
    a = a @ a.mH
    a[pos] = a[pos[::-1]] = float("nan")
    _, info_t = torch.linalg.cholesky_ex(a, upper=upper)
    _, info_k = kiln.linalg.cholesky_ex(to_kiln(a), upper=upper)
    assert to_torch(info_k).tolist() == info_t.tolist() > 0
    with pytest.raises(kiln.linalg.LinAlgError, match=f"leading minor of order {info_t.item()} "):
        kiln.linalg.cholesky(to_kiln(a), upper=upper)


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


LOWP_CALLS = {  # torch raises NotImplementedError ("lu_cpu" not implemented for 'Half') or RuntimeError for these
    "det": lambda m, a: m.linalg.det(a), "solve": lambda m, a: m.linalg.solve(a, a),
    "solve_ex": lambda m, a: m.linalg.solve_ex(a, a[..., 0]), "lu_factor": lambda m, a: m.linalg.lu_factor(a),
    "lu": lambda m, a: m.linalg.lu(a), "cholesky": lambda m, a: m.linalg.cholesky(a),
    "cholesky_ex": lambda m, a: m.linalg.cholesky_ex(a), "qr": lambda m, a: m.linalg.qr(a),
    "geqrf": lambda m, a: m.geqrf(a), "eigh": lambda m, a: m.linalg.eigh(a),
    "eigvalsh": lambda m, a: m.linalg.eigvalsh(a), "eig": lambda m, a: m.linalg.eig(a),
    "svd": lambda m, a: m.linalg.svd(a), "svdvals": lambda m, a: m.linalg.svdvals(a),
    "solve_triangular": lambda m, a: m.linalg.solve_triangular(a, a, upper=True),
    "householder_product": lambda m, a: m.linalg.householder_product(a, a[..., 0]),
    "cholesky_solve": lambda m, a: m.cholesky_solve(a, a), "cholesky_inverse": lambda m, a: m.cholesky_inverse(a),
    "inv": lambda m, a: m.linalg.inv(a), "slogdet": lambda m, a: m.linalg.slogdet(a),
    "lstsq": lambda m, a: m.linalg.lstsq(a, a), "pinv": lambda m, a: m.linalg.pinv(a),
}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("fn", list(LOWP_CALLS))
def test_half_precision_raises_torch_class(fn, dtype):
    a = torch.eye(3).to(getattr(torch, dtype))
    with pytest.raises(RuntimeError) as et:
        LOWP_CALLS[fn](torch, a)
    with pytest.raises(RuntimeError) as ek:
        LOWP_CALLS[fn](kiln, to_kiln(a))
    assert type(ek.value).__name__ == type(et.value).__name__, (et.value, ek.value)
    if type(et.value) is NotImplementedError:  # the same kernel and dtype named
        assert str(et.value) in str(ek.value), (et.value, ek.value)


@pytest.mark.parametrize("case", ["rows", "driver", "dtype", "vector-rows"])
def test_lstsq_argument_errors(case):
    """Checked before LAPACK runs: lstsq is a dynamic-shape op, whose meta checks run only in a trace."""
    call = {"rows": lambda m: m.linalg.lstsq(m.ones(3, 2), m.ones(4, 1)),
            "driver": lambda m: m.linalg.lstsq(m.ones(3, 2), m.ones(3, 1), driver="gelsx"),
            "dtype": lambda m: m.linalg.lstsq(m.ones(3, 2), m.ones(3, 1, dtype=m.float64)),
            "vector-rows": lambda m: m.linalg.lstsq(m.ones(2, 3, 2), m.ones(2, 4))}[case]
    with pytest.raises(RuntimeError) as et:
        call(torch)
    with pytest.raises(RuntimeError) as ek:
        call(kiln)
    assert type(ek.value) is type(et.value) is RuntimeError, (et.value, ek.value)
    for drv in ("gels", "gelsy", "gelsd", "gelss"):  # each driver named in torch's list runs
        close(kiln.linalg.lstsq(kiln.eye(3, 2), kiln.ones(3, 1), driver=drv).solution,
              torch.linalg.lstsq(torch.eye(3, 2), torch.ones(3, 1), driver=drv).solution, "float32")


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


@pytest.mark.parametrize("dtype", DTYPES)
def test_lstsq_gelsy_nan_and_zero_pivot(dtype):
    """gelsy as LAPACK's: NaN in A gives NaN out (xlange's NaN norm, no zero answer), and at rcond = 0
    an exactly zero pivot is accepted and divided by (torch: [nan, inf], rank 2; torch 2.13's MKL
    rejects an all-NaN A with an internal assert, so the NaN case is checked on its own)."""
    td = getattr(torch, dtype)
    for a in (torch.full((3, 2), float("nan"), dtype=td), torch.tensor([[float("nan"), 0], [float("nan"), 0]], dtype=td)):
        res = kiln.linalg.lstsq(to_kiln(a), to_kiln(torch.ones(a.shape[0], 1, dtype=td)))
        assert torch.isnan(to_torch(res.solution)).any()
    a, b = torch.tensor([[1.0, 0], [0, 0]], dtype=td), torch.ones(2, 1, dtype=td)
    res, t = kiln.linalg.lstsq(to_kiln(a), to_kiln(b), rcond=0.0), torch.linalg.lstsq(a, b, rcond=0.0)
    assert res.rank.item() == t.rank.item() == 2
    x, xt = to_torch(res.solution), t.solution
    assert torch.equal(torch.isnan(x), torch.isnan(xt)) and torch.equal(torch.isinf(x), torch.isinf(xt))


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


# ---- tiny matrices (n <= 8): kiln's own kernels, vectorised across the batch -------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8])
def test_tiny_batches_match_torch(n, dtype):
    """37 matrices: whole vector blocks and a scalar remainder on every ISA; matrix 9 is singular (a
    zero row), so one lane of a block takes the scalar fallback and reports LAPACK's info."""
    a = well(n, dtype, (37,), seed=11)
    a[9, n - 1] = 0
    b = rand((37, n, 2), dtype, seed=12)
    ka, kb = to_kiln(a), to_kiln(b)
    ok = torch.ones(37, dtype=torch.bool)
    ok[9] = False
    close(kiln.linalg.det(ka), torch.linalg.det(a), dtype)
    s_k, l_k = kiln.linalg.slogdet(ka)
    s_t, l_t = torch.linalg.slogdet(a)
    close(to_torch(s_k)[ok], s_t[ok], dtype)
    close(to_torch(l_k)[ok], l_t[ok], dtype)
    inv_k, info_k = kiln.linalg.inv_ex(ka)
    inv_t, info_t = torch.linalg.inv_ex(a)
    assert to_torch(info_k).tolist() == info_t.tolist()
    close(to_torch(inv_k)[ok], inv_t[ok], dtype)
    x_k, sinfo_k = kiln.linalg.solve_ex(ka, kb)
    x_t, sinfo_t = torch.linalg.solve_ex(a, b)
    assert to_torch(sinfo_k).tolist() == sinfo_t.tolist()
    close(to_torch(x_k)[ok], x_t[ok], dtype)
    for rhs in (b[..., :1], b[..., 0]):  # one right-hand side, as a matrix and as a vector
        x1_k = to_torch(kiln.linalg.solve_ex(ka, to_kiln(rhs))[0])
        close(x1_k[ok], torch.linalg.solve_ex(a, rhs)[0][ok], dtype)
    LU_k, piv_k, finfo_k = kiln.linalg.lu_factor_ex(ka)
    LU_t, piv_t, finfo_t = torch.linalg.lu_factor_ex(a)
    assert to_torch(piv_k).tolist() == piv_t.tolist() and to_torch(finfo_k).tolist() == finfo_t.tolist()
    close(LU_k, LU_t, dtype)
    assert torch.isnan(to_torch(inv_k)[9]).all()  # a singular matrix's inverse is NaN, never stale memory


# ---- extreme values: entries near the dtype's range limits keep their accuracy ----------------------------------
@pytest.mark.parametrize("dtype,scale", [("float32", 1e30), ("float32", 1e-30), ("float64", 1e300),
                                         ("float64", 1e-300), ("complex64", 1e30), ("complex128", 1e-300)])
def test_svd_and_pinv_at_the_range_limits(dtype, scale):
    base = rand((5, 3), dtype, seed=21).to(torch.complex128 if "complex" in dtype else torch.float64)
    s_ref = torch.linalg.svdvals(base)  # the singular values scale with the matrix, exactly
    a = (base * scale).to(getattr(torch, dtype))
    s = to_torch(kiln.linalg.svdvals(to_kiln(a))).to(torch.float64)
    assert torch.isfinite(s).all() and s.abs().max() > 0
    assert torch.allclose(s / scale, s_ref, rtol=1e-5 if dtype in ("float32", "complex64") else 1e-12)
    U, S, Vh = kiln.linalg.svd(to_kiln(a), full_matrices=False)
    rec = to_torch(U) @ torch.diag_embed(to_torch(S).to(to_torch(U).dtype)) @ to_torch(Vh)
    err = ((rec - a).abs().max() / a.abs().max()).item()
    assert err < (1e-5 if dtype in ("float32", "complex64") else 1e-12), err


def test_zero_identity_and_rank_deficient():
    z = torch.zeros(4, 3, dtype=torch.float64)
    assert to_torch(kiln.linalg.svdvals(to_kiln(z))).abs().max() == 0
    assert to_torch(kiln.linalg.pinv(to_kiln(z))).abs().max() == 0
    assert kiln.linalg.matrix_rank(to_kiln(z)).item() == 0
    eye = torch.eye(4, dtype=torch.float64)
    close(kiln.linalg.pinv(to_kiln(eye)), eye, "float64")
    a = rand((6, 2), "float64", seed=3)
    r2 = a @ a.T  # rank 2
    assert kiln.linalg.matrix_rank(to_kiln(r2)).item() == 2
    close(kiln.linalg.pinv(to_kiln(r2)), torch.linalg.pinv(r2), "float64")
    x = kiln.linalg.lstsq(to_kiln(r2), to_kiln(torch.ones(6, 1, dtype=torch.float64))).solution
    close(x, torch.linalg.lstsq(r2, torch.ones(6, 1, dtype=torch.float64)).solution, "float64")


@pytest.mark.parametrize("fn", ["svd", "svdvals", "eigh", "pinv"])
def test_nan_input_raises_instead_of_hanging(fn):
    a = torch.full((3, 3), float("nan"), dtype=torch.float64)
    with pytest.raises(torch.linalg.LinAlgError):
        getattr(torch.linalg, fn)(a)
    with pytest.raises(kiln.linalg.LinAlgError):
        getattr(kiln.linalg, fn)(to_kiln(a))


@pytest.mark.parametrize("fn", ["svd", "eig"])
def test_phase_dependent_loss_raises_as_torch(fn):
    """A loss that reads a complex vector's phase has no gradient: torch's svd and eig backward raise,
    and so do kiln's (torch's eigh does not check, nor does kiln's)."""
    a = well(3, "complex128", seed=5)

    def run(m, A):
        out = getattr(m.linalg, fn)(A)
        V = out[0] if fn == "svd" else out[1]
        return V[..., 0, 0].real  # depends on the first vector's phase

    ta = a.clone().requires_grad_()
    with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):
        run(torch, ta).backward()
    ka = to_kiln(a).requires_grad_()
    with pytest.raises(RuntimeError, match="e\\^\\{i phi\\}"):
        run(kiln, ka).backward()


def test_solve_vector_rhs_that_is_a_view():
    # a vector right-hand side that is a view at a storage offset (b[1]) is read from its own elements
    # (the kernel once re-viewed it from the start of the storage)
    torch.manual_seed(3)
    a = torch.randn(2, 3, 3, dtype=torch.float64) + 3 * torch.eye(3, dtype=torch.float64)
    b = torch.randn(2, 3, dtype=torch.float64)
    ka, kb = to_kiln(a), to_kiln(b)
    torch.testing.assert_close(to_torch(kiln.linalg.solve(ka[1], kb[1])), torch.linalg.solve(a[1], b[1]))


def _cofactors(t):
    """The matrix of cofactors (d det / dA) from minors: the reference for singular matrices."""
    n = t.shape[-1]
    C = torch.zeros_like(t)
    for i in range(n):
        for j in range(n):
            rows = [r for r in range(n) if r != i]
            cols = [c for c in range(n) if c != j]
            M = t[..., rows, :][..., :, cols]
            C[..., i, j] = (-1) ** (i + j) * (torch.linalg.det(M) if n > 1 else 1.0)
    return C


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_det_gradient_of_singular_matrices_is_the_cofactor_matrix(dtype):
    # d det / dA is the cofactor matrix everywhere; for an exactly singular A kiln takes it from the SVD
    # (torch 2.13 returns zeros for a rank n-1 matrix here, which is not the derivative)
    mats = torch.tensor([[[1.0, 2.0, 0.0], [2.0, 4.0, 0.0], [0.0, 0.0, 3.0]],    # rank 2
                         [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0]],   # invertible
                         [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],    # rank 1: zero cofactors
                         [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]], dtype=dtype)
    if dtype.is_complex:
        mats = mats * (1 + 0.5j)
    k = to_kiln(mats).requires_grad_()
    kiln.linalg.det(k).real.sum().backward() if dtype.is_complex else kiln.linalg.det(k).sum().backward()
    expect = _cofactors(mats).conj()
    torch.testing.assert_close(to_torch(k.grad), expect, rtol=1e-9, atol=1e-9)


# ---- float32 / float64 QR on kiln's own Householder kernels (up to 200 KiB of matrix) and past them --------
QR_SHAPES = [(1, 1), (1, 6), (6, 1), (2, 2), (3, 7), (7, 3), (17, 17), (64, 64), (100, 30), (30, 100), (160, 160),
             (224, 224), (1000, 36), (300, 300)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", QR_SHAPES)
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_real_matches_torch(shape, mode, dtype):
    a = rand(shape, dtype, seed=shape[0] * 1000 + shape[1])
    Qk, Rk = kiln.linalg.qr(to_kiln(a), mode=mode)
    Qt, Rt = torch.linalg.qr(a, mode=mode)
    Rk = to_torch(Rk)
    assert Rk.shape == Rt.shape and Rk.dtype == Rt.dtype
    eps = 1e-5 if dtype == "float32" else 1e-13
    tol = 2 * eps * max(shape)
    assert torch.allclose(Rk, Rt, rtol=tol, atol=tol), (Rk - Rt).abs().max()
    assert torch.equal(Rk, Rk.triu())
    if mode == "r":
        assert Qk.numel() == 0
        return
    Qk = to_torch(Qk)
    assert Qk.shape == Qt.shape
    assert torch.allclose(Qk, Qt, rtol=tol, atol=tol), (Qk - Qt).abs().max()  # LAPACK's signs
    eye = torch.eye(Qk.shape[1], dtype=Qk.dtype)
    assert (Qk.T @ Qk - eye).abs().max() < eps * max(shape) ** 0.5
    assert ((Qk @ Rk) - a).abs().max() < eps * max(shape) ** 0.5 * a.abs().max()
    # LAPACK's conventions, against the float64 reference (tighter than against MKL's result)
    Qr, Rr = (torch.from_numpy(t.real) for t in _householder_qr_ref(a.numpy(), complete=mode == "complete"))
    assert (Qk.double() - Qr).abs().max() < 20 * eps * max(shape) ** 0.5, (Qk.double() - Qr).abs().max()
    assert (Rk.double() - Rr).abs().max() < 20 * eps * max(shape) ** 0.5 * Rr.abs().max()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_qr_real_special_columns_and_scales(dtype):
    """Zero columns (tau = 0: the reflector is the identity and is not applied), a column already
    reduced, entries near the range limits (float32's norms summed in double, float64's scaled by a
    power of two), subnormal entries (1 / (alpha - beta) is then no float), a batch spread over
    threads."""
    a = rand((12, 8), dtype, seed=5)
    a[:, 2] = 0
    a[1:, 0] = 0  # column 0 already reduced: x = 0, tau = 0 even with alpha < 0
    a[0, 0] = -3
    f32 = dtype == "float32"
    big, small, sub = (1e30, 1e-30, 1e-40) if f32 else (1e300, 1e-300, 1e-310)
    cases = [a, a * small, a * big, rand((12, 8), dtype, seed=6) * (1e-38 if f32 else 1e-307),
             rand((12, 8), dtype, seed=6) * sub, torch.zeros(5, 5, dtype=a.dtype), rand((9, 33, 20), dtype, seed=7)]
    if not f32:  # beta deep in the subnormals: rescaled (xlarfg), or H would be far from orthogonal
        q = to_torch(kiln.linalg.qr(to_kiln(rand((12, 8), dtype, seed=8) * 1e-320)).Q)
        assert (q.T @ q - torch.eye(8, dtype=q.dtype)).abs().max() < 1e-13
    for x in cases:
        Qk, Rk = (to_torch(t) for t in kiln.linalg.qr(to_kiln(x)))
        Qt, Rt = torch.linalg.qr(x)
        scale = x.abs().max().item() or 1.0
        tol = (1e-4 if scale < 1e-37 else 1e-5) if f32 else (1e-8 if scale < 1e-306 else 1e-12)  # (subnormal R)
        assert torch.isfinite(Qk).all() and torch.isfinite(Rk).all()
        assert ((Rk - Rt).abs().max() / scale).item() < tol
        assert (Qk - Qt).abs().max().item() < tol
        assert ((Qk @ Rk - x).abs().max() / scale).item() < tol


def _householder_qr_ref(a, complete=False):
    """Q and R with LAPACK's conventions (xgeqr2's reflectors: beta = -sign(Re alpha) ||(alpha, x)||,
    real; xung2r's Q), in complex128 with numpy: the reference for complex QR, where torch's MKL
    changes its phase convention with the size (complex R diagonals from n ~ 100 on Zen 4)."""
    import numpy as np
    a = np.array(a, dtype=np.complex128)
    m, n = a.shape
    k = min(m, n)
    vs, taus = [], []
    for i in range(k):
        alpha, x = a[i, i], a[i + 1:, i]
        xnorm = np.linalg.norm(x)
        v = np.zeros(m - i, dtype=np.complex128)
        v[0] = 1
        if xnorm == 0 and alpha.imag == 0:
            tau = 0
        else:
            beta = -np.copysign(np.hypot(abs(alpha), xnorm), alpha.real)
            tau = complex((beta - alpha.real) / beta, -alpha.imag / beta)
            v[1:] = x / (alpha - beta)
            a[i, i], a[i + 1:, i] = beta, 0
            a[i:, i + 1:] -= np.conj(tau) * np.outer(v, v.conj() @ a[i:, i + 1:])
        vs.append(v)
        taus.append(tau)
    qc = m if complete else k
    q = np.eye(m, qc, dtype=np.complex128)
    for i in reversed(range(k)):
        q[i:, :] -= taus[i] * np.outer(vs[i], vs[i].conj() @ q[i:, :])
    return q, np.triu(a[:qc, :])


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("shape", [(1, 1), (1, 6), (6, 1), (3, 7), (7, 3), (17, 17), (64, 64), (100, 30), (30, 100),
                                   (112, 112), (160, 160), (200, 40)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_complex_lapack_conventions(shape, mode, dtype):
    import numpy as np
    a = rand(shape, dtype, seed=shape[0] * 7 + shape[1])
    Qk, Rk = (to_torch(t).numpy() for t in kiln.linalg.qr(to_kiln(a), mode=mode))
    Qr, Rr = _householder_qr_ref(a.numpy(), complete=mode == "complete")
    tol = (2e-5 if dtype == "complex64" else 1e-13) * max(shape)
    assert Qk.shape == Qr.shape and Rk.shape == Rr.shape
    assert np.abs(Rk - Rr).max() < tol * np.abs(Rr).max(), np.abs(Rk - Rr).max()
    assert np.abs(Qk - Qr).max() < tol, np.abs(Qk - Qr).max()
    assert np.abs(np.diag(Rk).imag).max() == 0  # real diagonal, as LAPACK's


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("shape,k", [((64, 64), 1), ((100, 30), 3), ((112, 112), 2), ((1, 1), 1), ((7, 1), 2)])
def test_lstsq_gelsy_full_rank_complex(shape, k, dtype):
    import numpy as np
    a, b = rand(shape, dtype, seed=shape[0] + 2), rand((shape[0], k), dtype, seed=4)
    rk = kiln.linalg.lstsq(to_kiln(a), to_kiln(b))
    want = np.linalg.lstsq(a.numpy().astype(np.complex128), b.numpy().astype(np.complex128), rcond=None)[0]
    x = to_torch(rk.solution).numpy()
    assert rk.rank.item() == shape[1]
    tol = 1e-3 if dtype == "complex64" else 1e-10
    assert np.abs(x - want).max() < tol * np.abs(want).max(), np.abs(x - want).max()


# ---- lstsq (gelsy) on float32 / float64 matrices of full column rank: the table's QR, R x = Q^T b --------
def _with_cond(m, n, cond, seed):
    g = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(m, n, generator=g, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    s = torch.logspace(0, -torch.log10(torch.tensor(float(cond))).item(), n, dtype=torch.float64)
    return ((u * s) @ v.T).float()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,k", [((64, 64), 1), ((64, 64), 5), ((100, 30), 3), ((160, 160), 1), ((224, 224), 2),
                                     ((300, 30), 1), ((1, 1), 1), ((7, 1), 2)])
def test_lstsq_gelsy_full_rank_real(shape, k, dtype):
    a = rand(shape, dtype, seed=shape[0] + shape[1])
    b = rand((shape[0], k), dtype, seed=3)
    rk, rt = kiln.linalg.lstsq(to_kiln(a), to_kiln(b)), torch.linalg.lstsq(a, b)
    x, xt = to_torch(rk.solution), rt.solution
    tol = 1e-3 if dtype == "float32" else 1e-10
    assert torch.allclose(x, xt, rtol=tol, atol=tol * xt.abs().max().item()), (x - xt).abs().max()
    assert rk.rank.item() == rt.rank.item() == shape[1]
    # the normal equations: A^T (A x - b) = 0 (in double)
    ad, bd = a.double(), b.double()
    assert (ad.T @ (ad @ x.double() - bd)).abs().max() < 1e-3 * ad.abs().max() ** 2 * bd.abs().max()


def _with_gap(m, n, r, seed):
    """m x n, n - r singular values 1e-9 below r of 1: rank r for any method at float32's rcond."""
    g = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(m, n, generator=g, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    s = torch.tensor([1.0] * r + [1e-9] * (n - r), dtype=torch.float64)
    return ((u * s) @ v.T).float()


@pytest.mark.parametrize("case", ["rank-deficient", "gap", "conditioned", "rcond-zero", "zero", "batched-mixed",
                                  "wide"])
def test_lstsq_gelsy_rank_decisions_float32(case):
    """gelsy's rank decisions (kiln's xgeqp3 and xlaic1's estimates). Against float64 references, not
    torch: torch 2.13's MKL gelsy gives rank 5 for a 40 x 12 matrix with one repeated column on Zen 4
    (its singular values: 11.3 ... 3.6, 8e-7)."""
    b = rand((40, 2), "float32", seed=9)
    rcond, rank, rtol = None, 12, 1e-6
    if case == "rank-deficient":
        a = rand((40, 12), "float32", seed=1)
        a[:, 5] = a[:, 2]
        rank = 11
    elif case == "gap":
        a, rank = _with_gap(40, 12, 6, seed=2), 6
    elif case == "conditioned":
        a = _with_cond(40, 12, 1e3, seed=3)
    elif case == "rcond-zero":  # every nonzero pivot accepted (b in A's range: the error grows as cond, not cond^2)
        a, rcond, rtol = _with_cond(40, 12, 1e4, seed=4), 0.0, 0.0
        b = a @ rand((12, 2), "float32", seed=10)
    elif case == "zero":
        a, rank = torch.zeros(40, 12), 0
    elif case == "batched-mixed":
        a = torch.stack([rand((40, 12), "float32", seed=5), _with_gap(40, 12, 7, seed=6)])
        b, rank = rand((2, 40, 2), "float32", seed=7), torch.tensor([12, 7])
    else:
        a, b = rand((12, 40), "float32", seed=8), rand((12, 2), "float32", seed=9)
    rk = kiln.linalg.lstsq(to_kiln(a), to_kiln(b), rcond=rcond)
    assert torch.equal(to_torch(rk.rank), torch.as_tensor(rank).expand(a.shape[:-2])), rk.rank
    want = torch.linalg.pinv(a.double(), rtol=rtol) @ b.double()
    x = to_torch(rk.solution).double()
    tol = 2e-3 * max(want.abs().max().item(), 1e-30)
    assert (x - want).abs().max().item() <= tol, (x - want).abs().max()


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_qr_complex_special_columns_and_scales(dtype):
    """As the real test above, against the complex128 reference; a column that is real and already
    reduced keeps tau = 0, one with a complex alpha alone (x = 0) still gets a reflector."""
    import numpy as np
    a = rand((12, 8), dtype, seed=5)
    a[:, 2] = 0
    a[1:, 0] = 0
    a[0, 0] = -3  # real: tau = 0
    a[1:, 1] = 0
    a[0, 1] = 0  # (after column 0's reflector, which is the identity: row 1 of column 1 is its alpha)
    a[1, 1] = 2 + 1j  # complex alpha, x = 0: tau != 0 makes it real
    c64 = dtype == "complex64"
    # powers of two: Q is the same and R scales exactly, so the reference runs on x scaled back (the
    # numpy reference itself would over- or underflow)
    exps = (100, -100, -133) if c64 else (996, -996, -1030, -1062)  # (2^-1062: beta deep in the subnormals)
    for e, x in [(0, a)] + [(e, a * math.ldexp(1.0, e)) for e in exps] + [(0, torch.zeros(5, 5, dtype=a.dtype))]:
        Qk, Rk = (to_torch(t).numpy() for t in kiln.linalg.qr(to_kiln(x)))
        def ldexp(z, k):  # (2.0 ** 1030 is no float)
            z = z.astype(np.complex128)
            return np.ldexp(z.real, k) + 1j * np.ldexp(z.imag, k)
        Qr, Rr = _householder_qr_ref(ldexp(x.numpy(), -e))
        tol = (1e-4 if e < -126 else 1e-5) if c64 else (1e-3 if e < -1050 else 1e-8 if e < -1022 else 1e-12)
        assert np.isfinite(Qk).all() and np.isfinite(Rk).all()
        assert np.abs(Qk.conj().T @ Qk - np.eye(Qk.shape[1])).max() < (1e-5 if c64 else 1e-13)  # Q stays unitary
        assert np.abs(ldexp(Rk, -e) - Rr).max() / (np.abs(Rr).max() or 1.0) < tol
        assert np.abs(Qk - Qr).max() < tol


# ---- eigh: small matrices on kiln's tridiagonal reduction (decision 59), larger ones on LAPACK ------------
def _hermitian_from(a, uplo):
    """The Hermitian matrix eigh reads from a (uplo's triangle, the diagonal's real part), in 128 bits."""
    a = a.to(torch.complex128 if a.is_complex() else torch.float64)
    t = torch.tril(a, -1) if uplo == "L" else torch.triu(a, 1)
    return t + t.mH + torch.diag_embed(a.diagonal(dim1=-2, dim2=-1).real.to(a.dtype))


def _check_eigh(a, uplo, dtype, tol):
    """kiln's eigh of a against torch's eigenvalues and a float64 reference's, and by the invariants
    (A V = V diag(L), V^H V = I); eigvalsh against the same values."""
    h = _hermitian_from(a, uplo)
    ref = torch.linalg.eigvalsh(h)  # float64 / complex128: the ISA-independent reference
    scale = max(ref.abs().max().item(), 1e-300)
    L, V = kiln.linalg.eigh(to_kiln(a), UPLO=uplo)
    L, V = to_torch(L), to_torch(V)
    assert L.dtype == ref.to(L.dtype).dtype and V.dtype == a.dtype
    n = a.shape[-1]
    eps = torch.finfo(a.dtype).eps
    assert (L.double() - ref).abs().max() <= tol * n * eps * scale
    assert (L.double() - torch.linalg.eigvalsh(a, UPLO=uplo).double()).abs().max() <= tol * n * eps * scale
    Vd = V.to(h.dtype)
    assert (h @ Vd - Vd * L.double()).abs().max() <= tol * n * eps * scale
    assert (Vd.mH @ Vd - torch.eye(n, dtype=h.dtype)).abs().max() <= tol * n * eps
    lv = to_torch(kiln.linalg.eigvalsh(to_kiln(a), UPLO=uplo))
    assert (lv.double() - ref).abs().max() <= tol * n * eps * scale


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 3, 17, 64, 100, 161, 260])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_sizes_match_torch_and_invariants(n, uplo, dtype):
    a = rand((n, n), dtype, seed=n)
    a[..., :, :] = a + a.mH if n % 2 else a  # symmetric or not: only uplo's triangle is read
    _check_eigh(a, uplo, dtype, tol=4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_structured_and_batched(dtype):
    td = getattr(torch, dtype)
    cases = [torch.zeros(5, 5, dtype=td), torch.eye(6, dtype=td), torch.diag(torch.arange(7.0)).to(td),
             torch.diag(torch.tensor([3.0, -1.0, 3.0, 2.0, -1.0])).to(td),  # repeated, unsorted diagonal
             torch.ones(9, 9, dtype=td),  # rank one
             rand((4, 30, 30), dtype, seed=2)]  # batched, spread over threads
    tri = torch.diag(torch.full((20,), 2.0)) - torch.diag(torch.ones(19), 1) - torch.diag(torch.ones(19), -1)
    cases.append(tri.to(td))  # already tridiagonal: every reflector has tau = 0 (a phase in the complex case)
    for a in cases:
        if a.dim() == 3:
            L, V = kiln.linalg.eigh(to_kiln(a))
            for b in range(a.shape[0]):
                _check_eigh(a[b], "L", dtype, tol=4)
                single = to_torch(kiln.linalg.eigh(to_kiln(a[b].clone()))[0])
                assert torch.allclose(to_torch(L)[b], single, rtol=0, atol=50 * torch.finfo(a.dtype).eps * 30)
        else:
            _check_eigh(a, "L", dtype, tol=4)
            _check_eigh(a, "U", dtype, tol=4)


@pytest.mark.parametrize("dtype,scale", [("float32", 1e-30), ("float32", 1e30), ("float32", 1e-42),
                                         ("float64", 1e-300), ("float64", 1e300), ("float64", 1e-310),
                                         ("complex64", 1e-30), ("complex64", 1e30), ("complex128", 1e-300),
                                         ("complex128", 1e300)])
@pytest.mark.parametrize("n", [12, 70, 300])  # (300: xsytrd / xhetrd's path)
def test_eigh_scaled_to_the_range_limits(n, dtype, scale):
    """xsyevd's scaling: a matrix whose largest element is far from 1 is scaled first; the
    eigenvalues come back at the input's scale, not over- or underflowed."""
    base = rand((n, n), dtype, seed=4)
    a = (base + base.mH) * (scale / 4)  # (the largest element is about scale)
    h = _hermitian_from(a, "L")
    ref = torch.linalg.eigvalsh(h)
    L, V = kiln.linalg.eigh(to_kiln(a))
    L, V = to_torch(L).double(), to_torch(V).to(h.dtype)
    assert torch.isfinite(L).all() and torch.isfinite(V).all()
    eps = torch.finfo(a.dtype).eps
    big = ref.abs().max()
    tiny = scale < 1e-37 if a.real.dtype == torch.float32 else scale < 1e-307  # subnormal input: digits lost
    tol = (1e3 if tiny else 4) * n * eps
    assert (L - ref).abs().max() <= tol * big
    assert (V.mH @ V - torch.eye(n, dtype=h.dtype)).abs().max() <= (1e3 if tiny else 4) * n * eps
    if not tiny:
        assert ((h / big) @ V - V * (L / big)).abs().max() <= tol


@pytest.mark.parametrize("n", [6, 200])  # (200: xhetrd's path)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_ignores_the_other_triangle_and_the_diagonals_imaginary_part(uplo, n):
    a = rand((n, n), "complex128", seed=5)
    b = a.clone()
    other = torch.triu(torch.ones(n, n, dtype=torch.bool), 1) if uplo == "L" else torch.tril(
        torch.ones(n, n, dtype=torch.bool), -1)
    b[other] = complex("nan+nanj")
    b.diagonal().imag.fill_(1e300)
    c = a.clone()
    c[other] = 1e300  # (nor scaled by it)
    for x in (a, b, c):
        L, V = kiln.linalg.eigh(to_kiln(x), UPLO=uplo)
        tL = torch.linalg.eigh(a, UPLO=uplo).eigenvalues
        assert torch.allclose(to_torch(L), tL, rtol=1e-12, atol=1e-12)
        assert torch.isfinite(to_torch(V)).all()
    a[other] = float("nan")
    with pytest.raises(kiln.linalg.LinAlgError):  # ... but uplo's triangle is
        kiln.linalg.eigh(to_kiln(a), UPLO="U" if uplo == "L" else "L")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [40, 150])
def test_pinv_hermitian_matches_torch(n, dtype):
    """An indefinite Hermitian matrix with known eigenvalues (1 to 5 in size, both signs)."""
    q = torch.linalg.qr(rand((n, n), dtype, seed=6).to(torch.complex128 if "complex" in dtype else torch.float64)).Q
    d = torch.tensor([(1 + k % 5) * (-1) ** k for k in range(n)], dtype=q.real.dtype)
    h64 = (q * d.to(q.dtype)) @ q.mH
    h = h64.to(getattr(torch, dtype))
    k = to_torch(kiln.linalg.pinv(to_kiln(h), hermitian=True))
    ref = (q / d.to(q.dtype)) @ q.mH
    eps = torch.finfo(h.dtype).eps
    assert (k.to(ref.dtype) - ref).abs().max() <= 50 * n * eps
    close(k, torch.linalg.pinv(h, hermitian=True), dtype)


def _with_gap_dt(m, n, r, dtype, seed, small=1e-9):
    """m x n in dtype: r singular values in [1, 2], the rest of size small (below the default rcond:
    rank r)."""
    g = torch.Generator().manual_seed(seed)
    cd = torch.complex128 if "complex" in dtype else torch.float64
    u, _ = torch.linalg.qr(torch.randn(m, max(m, n), generator=g, dtype=cd)[:, :min(m, n)])
    v, _ = torch.linalg.qr(torch.randn(n, min(m, n), generator=g, dtype=cd))
    k = min(m, n)
    s = torch.cat([1 + torch.rand(min(r, k), generator=g, dtype=torch.float64),
                   torch.full((k - min(r, k),), small, dtype=torch.float64)])
    return ((u * s.to(cd)) @ v.mH).to(getattr(torch, dtype))


def _check_min_norm(res, a, b, rank, dtype, rtol):
    """lstsq's rank, and its solution against the minimum-norm one of the float64 / complex128
    pseudo-inverse (singular values below rtol dropped); returns the solution and the tolerance."""
    assert res.rank.item() == rank
    cd = torch.complex128 if a.is_complex() else torch.float64
    want = torch.linalg.pinv(a.to(cd), rtol=rtol) @ b.to(cd)
    x = to_torch(res.solution).to(cd)
    tol = (2e-3 if dtype in ("float32", "complex64") else 1e-9) * want.abs().max().item()
    assert (x - want).abs().max().item() <= tol, (x - want).abs().max()
    return x, tol


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,r", [((300, 300), 300), ((300, 300), 70), ((300, 300), 210), ((400, 170), 170),
                                     ((400, 170), 150), ((170, 400), 170), ((170, 400), 100), ((129, 129), 129),
                                     ((520, 300), 300), ((300, 520), 290), ((700, 600), 600)])
def test_lstsq_gelsy_blocked_pivoted_qr(shape, r, dtype, threads):
    """Sizes where kiln's xgeqp3 runs blocks of xlaqps before xlaqp2 (more than 128 columns), with the
    rank falling inside a block or in the unblocked tail, tall and wide, and on two threads (one
    matrix from 256 columns: each step's trailing columns split between them): the rank and the
    minimum-norm solution of the rank-r problem against a float64 reference."""
    m, n = shape
    a = _with_gap_dt(m, n, r, dtype, seed=m + n + r, small=1e-9 if dtype in ("float32", "complex64") else 1e-20)
    b = rand((m, 2), dtype, seed=r)
    with kiln_threads(threads):
        res = kiln.linalg.lstsq(to_kiln(a), to_kiln(b))
    x, tol = _check_min_norm(res, a, b, r, dtype, rtol=1e-4)
    if r == min(m, n) and m >= n:  # full column rank: torch (MKL's gelsy) has the same unique solution
        xt = torch.linalg.lstsq(a, b).solution
        assert (x - xt.to(x.dtype)).abs().max().item() <= tol


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case,shape,rank", [("tiny-first-column", (300, 300), 299),
                                             ("tiny-first-column", (40, 40), 39),
                                             ("repeated-column", (300, 300), 299),
                                             ("repeated-column", (520, 300), 299),
                                             ("repeated-column", (300, 520), 300)])
def test_lstsq_gelsy_unpivoted_first_then_pivoted(case, shape, rank, dtype, threads):
    """gelsy factors A without pivots first and keeps that R when every leading block passes the rank
    test; a block that fails (at column 0, or at column 250: inside the blocked QR's fourth panel)
    sends A to the pivoted QR, so the rank is LAPACK's (300 x 520: the unpivoted R's leading 300 x 300
    block is singular, A has full row rank). torch 2.13 (MKL's gelsy decides on the unpivoted R) says
    rank 1 for the tiny-first-column matrix."""
    m, n = shape
    a = rand(shape, dtype, seed=m + n + 1)
    if case == "tiny-first-column":
        a[:, 0] *= 1e-20 if dtype in ("float32", "complex64") else 1e-30
    else:
        a[:, 250] = a[:, 100]
    b = rand((m, 2), dtype, seed=m + 2)
    with kiln_threads(threads):
        res = kiln.linalg.lstsq(to_kiln(a), to_kiln(b))
    _check_min_norm(res, a, b, rank, dtype, rtol=1e-9)


@pytest.mark.parametrize("dtype,scale", [("float32", 1e-33), ("float32", 1e33), ("float64", 1e-300),
                                         ("float64", 1e300), ("complex64", 1e-33), ("complex128", 1e300)])
@pytest.mark.parametrize("which", ["A", "B"])
def test_lstsq_gelsy_scaled_to_the_range_limits(which, dtype, scale):
    """xgelsy's scaling of A and B into [smlnum, bignum] and back: the solution of (s A) x = b is
    x / s, of A x = s b is s x, without over- or underflow in between."""
    a = rand((50, 20), dtype, seed=11)
    b = rand((50, 3), dtype, seed=12)
    wide = torch.complex128 if a.is_complex() else torch.float64  # (the reference: the unscaled problem in 64 bits)
    ref = torch.linalg.lstsq(a.to(wide), b.to(wide)).solution
    if which == "A":
        res = kiln.linalg.lstsq(to_kiln(a * scale), to_kiln(b))
        want = ref / scale
    else:
        res = kiln.linalg.lstsq(to_kiln(a), to_kiln(b * scale))
        want = ref * scale
    assert res.rank.item() == 20
    x = to_torch(res.solution).to(want.dtype)
    assert torch.isfinite(x).all()
    tol = 1e-4 if dtype in ("float32", "complex64") else 1e-10
    assert ((x - want).abs().max() / want.abs().max()).item() <= tol


# ---- one large matrix on two threads: the blocked LU and Cholesky in a held team (decision 60) ---------------
@pytest.fixture
def two_threads():
    with kiln_threads(2):
        yield


@pytest.mark.parametrize("dtype", DTYPES)
def test_blocked_lu_on_two_threads(dtype, two_threads):
    tol = 2e-3 if dtype in ("float32", "complex64") else 1e-10
    for shape in [(600, 600), (700, 520), (520, 700)]:
        a = rand(shape, dtype, seed=sum(shape))
        LU, piv = (to_torch(t) for t in kiln.linalg.lu_factor(to_kiln(a)))
        P, L, U = torch.lu_unpack(LU, piv)
        assert (P @ L @ U - a).abs().max() <= tol * a.abs().max()
        if shape[0] == shape[1]:
            tLU, tpiv = torch.linalg.lu_factor(a)
            if torch.equal(piv.long(), tpiv.long()):  # (float32 can pick another of two near-equal pivots)
                assert (LU - tLU).abs().max() <= tol * 100
            b = rand((shape[0], 3), dtype, seed=1)
            x = to_torch(kiln.linalg.solve(to_kiln(a), to_kiln(b)))
            assert (a @ x - b).abs().max() <= tol * 100
            inv = to_torch(kiln.linalg.inv(to_kiln(a)))
            assert (inv @ a - torch.eye(shape[0], dtype=a.dtype)).abs().max() <= tol * 100
            sk, lk = (to_torch(t) for t in kiln.linalg.slogdet(to_kiln(a)))
            st, lt = torch.linalg.slogdet(a)
            assert abs(lk.item() - lt.item()) <= tol * abs(lt.item()) and abs(sk.item() - st.item()) <= 1e-3
    a = rand((600, 600), dtype, seed=3)
    a[:, 530] = 0  # U[530, 530] is exactly zero: info names it, as LAPACK's
    info = kiln.linalg.lu_factor_ex(to_kiln(a)).info.item()
    assert info == torch.linalg.lu_factor_ex(a).info.item() == 531
    with pytest.raises(kiln.linalg.LinAlgError):
        kiln.linalg.inv(to_kiln(a))


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [192, 257, 511])
def test_inv_of_one_matrix_on_the_pool(n, dtype, threads):
    """One matrix below 512 on two and three threads: the blocked LU, then xgetri split over the team
    (inv(U) by columns, the product with inv(L) by rows, P's columns last), against torch, against
    kiln on one thread (LAPACK's xgetri), and A inv(A) = I; a singular one gets torch's info."""
    a = rand((n, n), dtype, seed=n) + n * torch.eye(n, dtype=getattr(torch, dtype))
    a = a[torch.randperm(n, generator=torch.Generator().manual_seed(n))]  # pivots far from the diagonal
    with kiln_threads(threads):
        inv2 = to_torch(kiln.linalg.inv(to_kiln(a)))
    with kiln_threads(1):
        inv1 = to_torch(kiln.linalg.inv(to_kiln(a)))
    want = torch.linalg.inv(a)
    tol = (5e-5 if dtype in ("float32", "complex64") else 1e-13) * want.abs().max().item()
    assert (inv2 - want).abs().max().item() <= tol, (inv2 - want).abs().max()
    assert (inv2 - inv1).abs().max().item() <= tol
    eye = torch.eye(n, dtype=a.dtype)
    assert (a @ inv2 - eye).abs().max().item() <= (1e-5 if dtype in ("float32", "complex64") else 1e-13)
    bad = a.clone()
    bad[:, n // 2] = 0
    with kiln_threads(threads):
        info = kiln.linalg.inv_ex(to_kiln(bad)).info.item()
    assert info == torch.linalg.inv_ex(bad).info.item() > 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_blocked_cholesky_on_two_threads(dtype, upper, two_threads):
    n = 600
    g = rand((n, n), dtype, seed=4)
    a = g @ g.mH / n + torch.eye(n, dtype=g.dtype)
    k = to_torch(kiln.linalg.cholesky(to_kiln(a), upper=upper))
    t = torch.linalg.cholesky(a, upper=upper)
    tol = 1e-4 if dtype in ("float32", "complex64") else 1e-11
    assert (k - t).abs().max() <= tol * t.abs().max()
    assert (torch.triu(k, 1) if not upper else torch.tril(k, -1)).abs().max() == 0
    bad = a.clone()
    bad[560, 560] = -1e6  # the leading minor of order 561 is not positive-definite
    assert kiln.linalg.cholesky_ex(to_kiln(bad)).info.item() == torch.linalg.cholesky_ex(bad).info.item() == 561


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(600, 300), (300, 600), (520, 520)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_blocked_qr_on_two_threads(shape, mode, dtype, two_threads):
    """xgeqrf / xorgqr blocked over the threads with a look-ahead: Q R = A, Q orthonormal, R against
    torch's up to the sign (phase) of each row."""
    a = rand(shape, dtype, seed=sum(shape))
    Q, R = (to_torch(t) for t in kiln.linalg.qr(to_kiln(a), mode=mode))
    tol = 1e-4 if dtype in ("float32", "complex64") else 1e-11
    assert (Q @ R - a).abs().max() <= tol * a.abs().max()
    assert (Q.mH @ Q - torch.eye(Q.shape[1], dtype=a.dtype)).abs().max() <= tol
    tR = torch.linalg.qr(a, mode=mode).R
    k = min(shape)
    assert (R[:k].abs() - tR[:k].abs()).abs().max() <= tol * 10 * tR.abs().max()
    assert torch.triu(R).equal(R)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_of_one_large_matrix_on_two_threads(dtype, uplo, two_threads):
    """One matrix on the pool: the back-transformation split by columns over the threads (uplo L:
    block reflectors shared by the threads; U: xunmtr, each thread with its own copy)."""
    a = rand((400, 400), dtype, seed=7)  # (from 512 KiB)
    _check_eigh(a, uplo, dtype, tol=4)
    L2, V2 = (to_torch(t) for t in kiln.linalg.eigh(to_kiln(a), UPLO=uplo))
    with kiln_threads(1):
        L1, V1 = (to_torch(t) for t in kiln.linalg.eigh(to_kiln(a), UPLO=uplo))
    assert torch.equal(L1, L2)  # the same reduction and tridiagonal solver; products of other widths
    assert (V1 - V2).abs().max() <= 300 * torch.finfo(a.dtype).eps
    for _ in range(5):  # run to run the same bits (no thread writes what another reads)
        L3, V3 = (to_torch(t) for t in kiln.linalg.eigh(to_kiln(a), UPLO=uplo))
        assert torch.equal(L2, L3) and torch.equal(V2, V3)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(300, 300), (400, 300), (300, 480)])
@pytest.mark.parametrize("full", [False, True])
def test_svd_of_one_large_matrix_on_two_threads(dtype, shape, full, two_threads):
    """xgesdd's steps by hand on the pool (under 5/3 aspect): torch's values, an orthonormal
    factorisation, and the vectors one thread's xgesdd gives, to rounding."""
    a = rand(shape, dtype, seed=sum(shape))
    U, S, Vh = (to_torch(t) for t in kiln.linalg.svd(to_kiln(a), full_matrices=full))
    k, eps = min(shape), torch.finfo(a.dtype).eps
    ref = torch.linalg.svdvals(a.to(torch.complex128 if a.is_complex() else torch.float64))
    assert (S.double() - ref).abs().max() <= 20 * k * eps * ref.max()
    assert ((U[:, :k] * S.to(a.dtype)) @ Vh[:k] - a).abs().max() <= 20 * k * eps * ref.max()
    assert U.shape == (shape[0], shape[0] if full else k) and Vh.shape == (shape[1] if full else k, shape[1])
    assert (U.mH @ U - torch.eye(U.shape[1], dtype=a.dtype)).abs().max() <= 20 * k * eps
    assert (Vh @ Vh.mH - torch.eye(Vh.shape[0], dtype=a.dtype)).abs().max() <= 20 * k * eps
    with kiln_threads(1):
        U1, S1, Vh1 = (to_torch(t) for t in kiln.linalg.svd(to_kiln(a), full_matrices=full))
    assert (S - S1).abs().max() <= 20 * k * eps * ref.max()
    assert (U[:, :k] - U1[:, :k]).abs().max() <= 1e3 * k * eps and (Vh[:k] - Vh1[:k]).abs().max() <= 1e3 * k * eps
    big = a * (1e140 if a.real.dtype == torch.float64 else 1e17)  # (beyond xgesdd's bignum: xgesdd's own path)
    Sb = to_torch(kiln.linalg.svd(to_kiln(big), full_matrices=full)[1]).double()
    assert (Sb / (1e140 if a.real.dtype == torch.float64 else 1e17) - ref).abs().max() <= 20 * k * eps * ref.max()
