"""kiln.func vs torch.func: grad / grad_and_value (argnums, has_aux, nesting), vjp, jvp, jacrev, jacfwd,
hessian and functional_call give torch's values and structures on the same float64 functions."""
import pytest
import torch
import torch.func as tf

import kiln
import kiln.func as kf
from helpers import to_kiln, to_kiln_tree, to_torch


def _same(k, t):
    if isinstance(t, tuple):
        assert isinstance(k, tuple) and len(k) == len(t)
        for a, b in zip(k, t):
            _same(a, b)
        return
    if not isinstance(t, torch.Tensor):
        assert k == t
        return
    assert isinstance(k, kiln.Tensor) and tuple(k.shape) == tuple(t.shape)
    torch.testing.assert_close(to_torch(k.detach()), t.detach(), rtol=1e-10, atol=1e-12)


def _both(make, *targs, **kw):
    t = make(torch, tf)(*targs, **kw)
    k = make(kiln, kf)(*to_kiln_tree(targs), **kw)
    _same(k, t)
    return k, t


X = torch.linspace(-1, 2, 5, dtype=torch.float64)
Y = torch.linspace(0.5, 1.5, 5, dtype=torch.float64)


def f(lib):
    return lambda x, y: (lib.sin(x) * y + x * x).sum()


def test_grad_argnums_has_aux_and_nesting():
    _both(lambda lib, m: m.grad(f(lib)), X, Y)
    _both(lambda lib, m: m.grad(f(lib), argnums=1), X, Y)
    _both(lambda lib, m: m.grad(f(lib), argnums=(0, 1)), X, Y)
    _both(lambda lib, m: m.grad_and_value(f(lib)), X, Y)
    _both(lambda lib, m: m.grad(lambda x: ((x ** 3).sum(), x.sum()), has_aux=True), X)
    _both(lambda lib, m: m.grad_and_value(lambda x: ((x ** 3).sum(), x * 2), has_aux=True), X)
    s = torch.tensor(0.7, dtype=torch.float64)
    _both(lambda lib, m: m.grad(m.grad(lambda x: lib.sin(x) * x ** 3)), s)          # second derivative
    _both(lambda lib, m: m.grad(m.grad(m.grad(lambda x: lib.exp(x) * x))), s)       # third
    for lib, m in ((torch, tf), (kiln, kf)):
        with pytest.raises(RuntimeError):  # a non-scalar output
            m.grad(lambda x: x * 2)(to_kiln(X) if lib is kiln else X)


def test_vjp_and_jvp():
    def run_vjp(lib, m):
        def go(x, y, v):
            out, fn = m.vjp(lambda a, b: lib.sin(a) * b, x, y)
            return out, fn(v)
        return go
    _both(run_vjp, X, Y, torch.ones(5, dtype=torch.float64) * 0.3)

    def run_jvp(lib, m):
        return lambda x, t: m.jvp(lambda a: lib.exp(a) * a, (x,), (t,))
    _both(run_jvp, X, Y)

    def run_jvp2(lib, m):
        return lambda x, y, t, u: m.jvp(lambda a, b: (a * b, a + b), (x, y), (t, u))
    _both(run_jvp2, X, Y, Y, X)


def test_jacobians_and_hessian():
    g = lambda lib: lambda x, y: lib.sin(x)[:, None] * y[None, :] + x.sum()  # noqa: E731
    _both(lambda lib, m: m.jacrev(g(lib)), X[:3], Y[:4])
    _both(lambda lib, m: m.jacrev(g(lib), argnums=(0, 1)), X[:3], Y[:4])
    _both(lambda lib, m: m.jacfwd(g(lib), argnums=1), X[:3], Y[:4])
    _both(lambda lib, m: m.jacrev(lambda x: (x * 2, x.sum())), X)
    _both(lambda lib, m: m.hessian(f(lib)), X, Y)
    _both(lambda lib, m: m.hessian(f(lib), argnums=1), X, Y)


def test_functional_call():
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2)).double()
    km = kiln.nn.Sequential(kiln.nn.Linear(4, 3), kiln.nn.Tanh(), kiln.nn.Linear(3, 2)).double()
    km.load_state_dict({k: to_kiln(v) for k, v in tm.state_dict().items()})
    params_t = {k: v.detach() * 0.5 for k, v in tm.named_parameters()}
    params_k = {k: to_kiln(v) for k, v in params_t.items()}
    x = torch.randn(5, 4, dtype=torch.float64)
    out_t = tf.functional_call(tm, params_t, (x,))
    out_k = kf.functional_call(km, params_k, (to_kiln(x),))
    _same(out_k, out_t)
    # the module's own parameters are back afterwards
    _same(km(to_kiln(x)), tm(x))
    # gradients with respect to the passed parameters (the usual torch.func pattern)
    gt = tf.grad(lambda p: tf.functional_call(tm, p, (x,)).square().sum())(params_t)
    gk = kf.grad(lambda p: kf.functional_call(km, p, (to_kiln(x),)).square().sum())(params_k)
    assert set(gk) == set(gt)
    for name in gt:
        _same(gk[name], gt[name])
    with pytest.raises(RuntimeError):
        kf.functional_call(km, {"0.weight": params_k["0.weight"]}, (to_kiln(x),), strict=True)


def test_pytree_outputs_and_primals():
    # dict / list outputs of jacrev and vjp, dict primals of vjp: the structures come back as torch's
    x = torch.randn(3, dtype=torch.float64)
    kx = to_kiln(x)
    jt = tf.jacrev(lambda v: {"a": v.sin(), "b": [v * 2, v.sum()]})(x)
    jk = kf.jacrev(lambda v: {"a": v.sin(), "b": [v * 2, v.sum()]})(kx)
    assert isinstance(jk, dict) and isinstance(jk["b"], list)
    _same(jk["a"], jt["a"])
    _same(jk["b"][0], jt["b"][0])
    _same(jk["b"][1], jt["b"][1])
    ot, ft = tf.vjp(lambda v: [v.sin(), v * 2], x)
    ok, fk = kf.vjp(lambda v: [v.sin(), v * 2], kx)
    assert isinstance(ok, list) and len(ok) == 2
    _same(ok[0], ot[0])
    ct = [torch.ones(3, dtype=torch.float64), torch.full((3,), 2.0, dtype=torch.float64)]
    _same(fk([to_kiln(c) for c in ct])[0], ft(ct)[0])
    dt = {"a": x, "b": x * 3}
    _, ft = tf.vjp(lambda d: d["a"] * d["b"], dt)
    _, fk = kf.vjp(lambda d: d["a"] * d["b"], {"a": kx, "b": kx * 3})
    gt, gk = ft(torch.ones(3, dtype=torch.float64))[0], fk(kiln.ones(3, dtype=kiln.float64))[0]
    assert set(gk) == set(gt)
    for key in gt:
        _same(gk[key], gt[key])
    # a cotangent structure unlike the output's is torch's RuntimeError
    with pytest.raises(RuntimeError):
        ft((torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)))
    with pytest.raises(RuntimeError):
        fk((kiln.ones(3, dtype=kiln.float64), kiln.ones(3, dtype=kiln.float64)))
