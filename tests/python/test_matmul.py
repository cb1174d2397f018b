"""Matmul family vs torch: every matmul broadcasting case, dtypes, strided operands, errors."""
import pytest
import torch

import kiln
from helpers import check, kiln_threads, make, to_kiln, to_torch

SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
          ((2, 3), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 2)), ((3,), (5, 3, 4)),
          ((5, 2, 3), (3,)), ((0, 3), (3, 4)), ((2, 0), (0, 4)), ((1, 5), (5, 1)), ((2, 1, 3, 4), (1, 6, 4, 2))]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128", "float16", "bfloat16", "int64",
                                   "int32", "uint8", "bool"])
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_matmul_broadcasting(sa, sb, dtype):
    a, b = make(sa, dtype, low=-2, high=2), make(sb, dtype, low=-2, high=2, seed=1)
    rtol = 1e-2 if dtype in ("float16", "bfloat16") else 1e-5
    check(lambda m, x, y: m.matmul(x, y), a, b, rtol=rtol, atol=1e-2 if dtype in ("float16", "bfloat16") else None,
          msg=f"{sa} {sb}")


def test_matmul_strided_operands():
    a, b = make((6, 8), "float32"), make((10, 6), "float32", seed=1)
    check(lambda m, x, y: x.t() @ y.t(), a, b, rtol=1e-5)
    check(lambda m, x, y: x[::2, 1:] @ y[1:8, ::2], a, b[:, :], rtol=1e-5)
    check(lambda m, x, y: m.mm(x[:, ::2], y[::2, :6][:4]), a, b, rtol=1e-5)


def test_matmul_errors():
    check(lambda m, x, y: m.matmul(x, y), make((2, 3), "float32"), make((4, 5), "float32"))
    check(lambda m, x, y: m.matmul(x, y), make((2, 3), "float32"), make((3, 4), "float64"))
    check(lambda m, x, y: m.matmul(x, y), make((), "float32"), make((3,), "float32"))
    check(lambda m, x, y: m.mm(x, y), make((2, 3, 1), "float32"), make((3, 4), "float32"))
    check(lambda m, x, y: m.bmm(x, y), make((2, 2, 3), "float32"), make((3, 3, 4), "float32"))
    check(lambda m, x, y: m.dot(x, y), make((3,), "float32"), make((4,), "float32"))
    check(lambda m, x, y: m.mv(x, y), make((2, 3), "float32"), make((4,), "float32"))


def test_family():
    a, b, c = make((3, 4), "float32"), make((4, 5), "float32", seed=1), make((3, 5), "float32", seed=2)
    check(lambda m, x, y: m.mm(x, y), a, b, rtol=1e-5)
    check(lambda m, x, y, z: m.addmm(z, x, y), a, b, c, rtol=1e-5)
    check(lambda m, x, y, z: m.addmm(z, x, y, beta=0.5, alpha=2), a, b, c, rtol=1e-5)
    check(lambda m, x, y, z: m.addmm(z[0], x, y, beta=0, alpha=2), a, b, c * float("nan"), rtol=1e-5)
    A, B, C = make((2, 3, 4), "float32"), make((2, 4, 5), "float32", seed=1), make((2, 3, 5), "float32", seed=2)
    check(lambda m, x, y: m.bmm(x, y), A, B, rtol=1e-5)
    check(lambda m, x, y, z: m.baddbmm(z, x, y, beta=2, alpha=0.5), A, B, C, rtol=1e-5)
    check(lambda m, x, y, z: m.addbmm(z, x, y), A, B, c, rtol=1e-5)
    v = make((4,), "float32", seed=3)
    check(lambda m, x, y: m.mv(x, y), a, v, rtol=1e-5)
    check(lambda m, x, y, z: m.addmv(z, x, y, alpha=3), a, v, make((3,), "float32"), rtol=1e-5)
    check(lambda m, x, y: m.dot(x, y), v, v, rtol=1e-5)
    z = make((4,), "complex64")
    check(lambda m, x, y: m.vdot(x, y), z, z * 2, rtol=1e-5)
    check(lambda m, x, y: m.outer(x, y), v, make((3,), "float32"), rtol=1e-5)
    check(lambda m, x, y: m.inner(x, y), a, make((2, 4), "float32"), rtol=1e-5)
    check(lambda m, x, y: m.tensordot(x, y, dims=1), a, b, rtol=1e-5)
    check(lambda m, x, y: m.tensordot(x, y, dims=([0], [1])), make((3, 4, 2), "float32"), make((5, 3), "float32"),
          rtol=1e-5)
    check(lambda m, x, y: m.kron(x, y), make((2, 3), "float32"), make((3, 2), "float32"), rtol=1e-5)
    check(lambda m, x, y: m.kron(x, y), make((2,), "int64"), make((3, 2), "int64"))


def both_raise_runtime(fn, targs, match):
    """fn(torch, *targs) and fn(kiln, *kiln copies) both raise RuntimeError itself, saying `match`."""
    for m, args in ((torch, targs), (kiln, [to_kiln(a) for a in targs])):
        with pytest.raises(RuntimeError, match=match) as e:
            fn(m, *args)
        assert type(e.value) is RuntimeError, f"{m.__name__} raised {type(e.value).__name__}({e.value})"


def test_tensordot_int_dims():
    a, b, c = make((2, 3), "float32"), make((3, 5), "float32", seed=1), make((2, 3), "float32", seed=2)
    check(lambda m, x, y: m.tensordot(x, y, dims=0), a, b, rtol=1e-5)  # the outer product
    check(lambda m, x, y: m.tensordot(x, y, dims=2), a, c, rtol=1e-5)  # every dim contracted
    for dims in (-1, 3, 2**40):  # kiln built a 2**40-long dim list before
        both_raise_runtime(lambda m, x, y: m.tensordot(x, y, dims=dims), (a, b), "tensordot expects dims")


def test_einsum_operand_count():
    v = make((2,), "float32")
    both_raise_runtime(lambda m, x: m.einsum("i,i->", x), (v,), r"einsum\(\): fewer operands were provided")
    both_raise_runtime(lambda m, x: m.einsum("i->", x, x), (v,), r"einsum\(\): more operands were provided")


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("ij->ji", [(3, 4)]), ("i,i->", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("i...->...", [(3, 4, 5)]), ("ijk->", [(2, 3, 4)]),
])
def test_einsum(eq, shapes):
    ops = [make(s, "float32", seed=i) for i, s in enumerate(shapes)]
    check(lambda m, *xs: m.einsum(eq, *xs), *ops, rtol=1e-5, atol=1e-5, msg=eq)


# ---- decode shapes: F.linear / matmul on 1 to 4 rows (the matrix-vector paths, issue 10) ----------

DECODE_X = [(17,), (1, 17), (2, 17), (3, 1, 17), (4, 17), (5, 17)]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("K", [1, 3, 17, 64, 65, 1000])
@pytest.mark.parametrize("xshape", DECODE_X)
def test_decode_linear_rows(xshape, K, dtype):
    """x (..., K) @ W^T + b for the decode shapes, W (N, K) as F.linear holds it, against torch; also a
    transposed W (its j contiguous), a strided x and no bias."""
    xshape = xshape[:-1] + (K,)
    tol = dict(rtol=1e-2, atol=2e-2) if dtype != "float32" else dict(rtol=1e-5, atol=1e-5)
    x, w, b = make(xshape, dtype, -1, 1), make((70, K), dtype, -1, 1, seed=1), make((70,), dtype, -1, 1, seed=2)
    check(lambda m, x, w, b: m.nn.functional.linear(x, w, b), x, w, b, msg=f"{xshape}", **tol)
    check(lambda m, x, w: m.nn.functional.linear(x, w), x, w, msg=f"{xshape} no bias", **tol)
    wt = make((K, 70), dtype, -1, 1, seed=3)
    check(lambda m, x, w: m.matmul(x, w), x, wt, msg=f"{xshape} @ (K, N)", **tol)
    xs = make(xshape[:-1] + (2 * K,), dtype, -1, 1, seed=4)[..., ::2]
    check(lambda m, x, w, b: m.nn.functional.linear(x, w, b), xs, w, b, msg=f"{xshape} strided x", **tol)
    check(lambda m, w, x: m.matmul(w, x.reshape(-1, K).t()), w, x, msg=f"W @ x^T {xshape}", **tol)


@pytest.mark.parametrize("dtype,rows", [("float16", 2), ("float16", 3), ("float16", 4), ("bfloat16", 2),
                                        ("bfloat16", 4), ("bfloat16", 8)])
def test_decode_rows_match_one_row(dtype, rows):
    """Up to 4 rows run the one-row kernels, so each row has the bits it has alone; with vdpbf16ps
    bfloat16 keeps them for any number of rows (one chain per output; not on AMX tiles, decision 45).
    (float16 past 4 rows sums in the packed path's order, and so does bfloat16 on the float32 panels,
    decisions 67 and 70: test_gemm.cpp.)"""
    K, N = 1000, 300
    x, w, b = (to_kiln(make(s, dtype, -1, 1, seed=i)) for i, s in enumerate(((rows, K), (N, K), (N,))))
    y = kiln.nn.functional.linear(x, w, b)
    same = [bool(kiln.equal(y[i], kiln.nn.functional.linear(x[i:i + 1], w, b)[0])) for i in range(rows)]
    if rows <= 4:
        assert all(same), same
    elif dtype == "bfloat16" and kiln.cpu_bf16_dot():
        with open("/proc/cpuinfo") as f:
            amx = " amx_bf16" in f.read()
        assert amx or all(same), same


# ---- bfloat16 / float16 with an added term: one rounding, as torch (_fused_baddbmm) ---------------

def _rounded_once(dtype, terms):
    """Sum of float64 terms rounded to float32, then to dtype: a product summed exactly in float32
    and rounded once (what torch's addmm gives here: measured 100% on these shapes)."""
    return sum(terms).to(torch.float32).to(dtype)


def _on_two_threads(m, fn):
    if m is not kiln:
        return fn()
    with kiln_threads(2):
        return fn()


def _agreement(k, ref):
    """Fraction of kiln's elements equal to ref's, and the largest distance in units of ref's ulp
    after 1e-4 of slack (the float32 sums' own error, which shows where a result cancels to near 0)."""
    got = to_torch(k).to(torch.float64)
    r = ref.to(torch.float64)
    ulp = torch.nextafter(ref.abs(), torch.tensor(float("inf"), dtype=ref.dtype)).to(torch.float64) - r.abs()
    return (got == r).double().mean().item(), (((got - r).abs() - 1e-4).clamp(min=0) / ulp).max().item()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_lowp_added_term_rounds_once(dtype):
    """addmm, baddbmm, addbmm and F.linear with a bias in bfloat16 / float16: beta * c + alpha * (A @ B)
    from the float32 sums, rounded once (mm then add rounded twice: 70-75% of elements agreed). Checked
    against float64 math rounded once (ISA-independent: float32 sums in another order can move an
    element by one ulp), and against torch within one ulp; NaN in c with beta = 0 is ignored."""
    f64 = torch.float64
    a, b, c = make((64, 256), dtype, -2, 2), make((256, 48), dtype, -2, 2, seed=1), make((64, 48), dtype, -8, 8, seed=2)
    acc = a.to(f64) @ b.to(f64)
    bias = make((48,), dtype, -8, 8, seed=3)
    cases = [("addmm", lambda m, c, a, b: m.addmm(c, a, b), (c, a, b), [acc, c.to(f64)]),
             ("addmm bias", lambda m, c, a, b: m.addmm(c, a, b), (bias, a, b), [acc, bias.to(f64)]),
             ("addmm beta alpha", lambda m, c, a, b: m.addmm(c, a, b, beta=0.5, alpha=2), (c, a, b),
              [(2 * acc).to(torch.float32).to(f64), (0.5 * c.to(f64)).to(torch.float32).to(f64)]),
             ("addmm beta 0", lambda m, c, a, b: m.addmm(c, a, b, beta=0, alpha=3), (c * float("nan"), a, b),
              [(3 * acc).to(torch.float32).to(f64)]),
             ("addmm b^T", lambda m, c, a, b: m.addmm(c, a, b.t().contiguous().t()), (c, a, b), [acc, c.to(f64)])]
    A, B = make((3, 32, 100), dtype, -2, 2, seed=4), make((3, 100, 24), dtype, -2, 2, seed=5)
    C = make((3, 32, 24), dtype, -8, 8, seed=6)
    accb = A.to(f64) @ B.to(f64)
    cases.append(("baddbmm", lambda m, c, a, b: m.baddbmm(c, a, b), (C, A, B), [accb, C.to(f64)]))
    cases.append(("baddbmm broadcast c", lambda m, c, a, b: m.baddbmm(c, a, b), (C[0, 0], A, B), [accb, C[0, 0].to(f64)]))
    cases.append(("baddbmm c (B, 1, N)", lambda m, c, a, b: m.baddbmm(c, a, b), (C[:, :1], A, B), [accb, C[:, :1].to(f64)]))
    # big enough for the threads to share one packed B (the epilogue runs inside the product's region)
    A2, B2, c2 = make((512, 256), dtype, -2, 2, seed=22), make((256, 64), dtype, -2, 2, seed=23), make((64,), dtype, -8, 8, seed=24)
    cases.append(("addmm 512 x 256 x 64, two threads", lambda m, c, a, b: _on_two_threads(m, lambda: m.addmm(c, a, b)),
                  (c2, A2, B2), [A2.to(f64) @ B2.to(f64), c2.to(f64)]))
    W = make((48, 256), dtype, -2, 2, seed=7)
    for shape in [(256,), (1, 256), (5, 256), (2, 7, 256), (1, 1, 256), (2, 3, 4, 256)]:
        x = make(shape, dtype, -2, 2, seed=8)
        cases.append((f"linear {shape}", lambda m, x, w, b: m.nn.functional.linear(x, w, b), (x, W, bias),
                      [x.to(f64) @ W.to(f64).t(), bias.to(f64)]))
    for name, fn, args, terms in cases:
        ref = _rounded_once(dtype, terms)
        k = fn(kiln, *(to_kiln(t) for t in args))
        t = fn(torch, *args)
        assert k.shape == tuple(t.shape) and k.dtype == to_kiln(t).dtype, name
        same, ulps = _agreement(k, ref)
        assert same >= 0.98 and ulps <= 1, f"{name}: {same:.3f} of elements as rounded once, {ulps} ulp at most"
        same_t, ulps_t = _agreement(k, t)
        assert same_t >= 0.97 and ulps_t <= 1, f"{name}: {same_t:.3f} as torch's, {ulps_t} ulp at most"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_lowp_added_term_torch_orders(dtype):
    """Where torch rounds more than once, so does kiln: addbmm adds one batch's product at a time into
    the result (rounded each time), and F.linear on a non-contiguous input of rank 3 runs matmul, then
    adds the bias. Gradients of addmm / baddbmm match torch's."""
    f64, f32 = torch.float64, torch.float32
    A, B = make((3, 16, 80), dtype, -2, 2), make((3, 80, 12), dtype, -2, 2, seed=1)
    c = make((16, 12), dtype, -8, 8, seed=2)
    r = c
    for i in range(3):  # torch: result.addmm_(batch1[i], batch2[i], beta if i == 0 else 1, alpha)
        r = _rounded_once(dtype, [(0.5 * (A[i].to(f64) @ B[i].to(f64))).to(f32).to(f64),
                                  (2 * r.to(f64)).to(f32).to(f64) if i == 0 else r.to(f64)])
    k = kiln.addbmm(*(to_kiln(t) for t in (c, A, B)), beta=2, alpha=0.5)
    same, ulps = _agreement(k, r)
    assert same >= 0.98 and ulps <= 1, f"addbmm: {same:.3f}, {ulps} ulp"
    assert _agreement(k, torch.addbmm(c, A, B, beta=2, alpha=0.5))[0] >= 0.97
    x = make((7, 2, 80), dtype, -2, 2, seed=3).transpose(0, 1)
    W, bias = make((12, 80), dtype, -2, 2, seed=4), make((12,), dtype, -8, 8, seed=5)
    twice = ((x.to(f64) @ W.to(f64).t()).to(f32).to(dtype).to(f64) + bias.to(f64)).to(f32).to(dtype)
    k = kiln.nn.functional.linear(*(to_kiln(t) for t in (x, W, bias)))
    same, ulps = _agreement(k, twice)
    assert same >= 0.98 and ulps <= 1, f"linear, non-contiguous x: {same:.3f}, {ulps} ulp"
    # a bias of shape (1, N) is fused at any rank (a 1-D input then gives (N,)); (1, 1) is not
    for xs, bs, fused in (((80,), (1, 12), True), ((2, 3, 5, 80), (1, 12), True), ((2, 3, 80), (1, 1), False)):
        x, b = make(xs, dtype, -2, 2, seed=8), make(bs, dtype, -8, 8, seed=9)
        p = x.to(f64) @ W.to(f64).t()
        want = _rounded_once(dtype, [p, b.to(f64)]) if fused else \
            (p.to(f32).to(dtype).to(f64) + b.to(f64)).to(f32).to(dtype)
        t = torch.nn.functional.linear(x, W, b)
        k = kiln.nn.functional.linear(*(to_kiln(v) for v in (x, W, b)))
        assert tuple(k.shape) == tuple(t.shape) == tuple(want.reshape(t.shape).shape), (xs, bs)
        same, ulps = _agreement(k, want.reshape(t.shape))
        assert same >= 0.98 and ulps <= 1, f"linear {xs} bias {bs}: {same:.3f}, {ulps} ulp"
    # gradients (beta, alpha scale them as torch's)
    ta, tb, tc = (t.clone().requires_grad_(True) for t in (A, B, make((3, 16, 12), dtype, -8, 8, seed=6)))
    torch.baddbmm(tc, ta, tb, beta=0.5, alpha=2).sum().backward()
    ka, kb, kc = (to_kiln(t.detach()).requires_grad_(True) for t in (ta, tb, tc))
    kiln.baddbmm(kc, ka, kb, beta=0.5, alpha=2).sum().backward()
    for kt, tt in ((ka, ta), (kb, tb), (kc, tc)):
        assert _agreement(kt.grad, tt.grad)[1] <= 1
    ta, tb, tc = (t.clone().requires_grad_(True) for t in (A[0], B[0], make((16, 12), dtype, -8, 8, seed=10)))
    torch.addmm(tc, ta, tb, beta=0.5, alpha=2).sum().backward()
    ka, kb, kc = (to_kiln(t.detach()).requires_grad_(True) for t in (ta, tb, tc))
    kiln.addmm(kc, ka, kb, beta=0.5, alpha=2).sum().backward()
    for kt, tt in ((ka, ta), (kb, tb), (kc, tc)):
        assert _agreement(kt.grad, tt.grad)[1] <= 1
    x2, W2 = make((5, 80), dtype, -2, 2, seed=7).requires_grad_(True), W.clone().requires_grad_(True)
    b2 = bias.clone().requires_grad_(True)
    torch.nn.functional.linear(x2, W2, b2).sum().backward()
    kx, kw, kb2 = (to_kiln(t.detach()).requires_grad_(True) for t in (x2, W2, b2))
    kiln.nn.functional.linear(kx, kw, kb2).sum().backward()
    for kt, tt in ((kx, x2), (kw, W2), (kb2, b2)):
        assert _agreement(kt.grad, tt.grad)[1] <= 1


@pytest.mark.parametrize("shape", [(64, 64, 64), (96, 45, 131), (4096, 64, 64)])
def test_small_float32_products_on_kilns_gemm(shape):
    """Small float32 products (up to 2^24 multiply-adds, K at most 4 min(M, N)) run on kiln's packed GEMM
    (decision 75): close to a float64 product, and a block of rows or columns computed alone (still a
    small product) gives the same bits as inside the whole product, on one and two threads (OpenBLAS's SGEMM
    fails these equalities: the check was run against the build before the routing). The base table keeps
    OpenBLAS (its GEMM is plain C++): there only the float64 comparison applies."""
    on_kiln = kiln.cpu_isa() != "base"
    M, K, N = shape
    a, b = make((M, K), "float32", low=-1, high=1), make((K, N), "float32", low=-1, high=1, seed=1)
    ka, kb = to_kiln(a), to_kiln(b)
    ref = a.double() @ b.double()
    outs = []
    for threads in (1, 2):
        prev = kiln.get_num_threads()
        kiln.set_num_threads(threads)
        try:
            whole = torch.from_dlpack(kiln.mm(ka, kb))
            rows = torch.from_dlpack(kiln.mm(ka[5:37], kb))
            cols = torch.from_dlpack(kiln.mm(ka, kb[:, 3:35]))
        finally:
            kiln.set_num_threads(prev)
        assert ((whole.double() - ref).abs() <= 1e-5 * K).all()
        assert ((rows.double() - ref[5:37]).abs() <= 1e-5 * K).all()
        assert ((cols.double() - ref[:, 3:35]).abs() <= 1e-5 * K).all()
        if on_kiln:
            assert torch.equal(rows, whole[5:37]) and torch.equal(cols, whole[:, 3:35])
        outs.append(whole)
    if on_kiln:
        assert torch.equal(outs[0], outs[1])
