"""kiln.compile (issue 17): capture per input signature, replay on a hit, eager where a
capture is impossible (said once), never a different result. Checked against torch eager with the
same weights and against kiln's eager call."""
import warnings

import numpy as np
import pytest
import torch

import kiln


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_module_inference_matches_torch_across_calls_and_shapes():
    kiln.manual_seed(0)
    km = kiln.nn.Sequential(kiln.nn.Linear(32, 64), kiln.nn.GELU(), kiln.nn.Linear(64, 8))
    tm = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in km.state_dict().items()})
    cm = kiln.compile(km, mode="reduce-overhead")
    assert cm._orig_mod is km and len(list(cm.parameters())) == 4
    results = []
    with kiln.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback expected
        for i, rows in enumerate([4, 4, 4, 7, 4, 7]):
            x = rand(rows, 32, seed=i)
            y = cm(kiln.tensor(x))
            results.append((y, x))
            with torch.no_grad():
                np.testing.assert_allclose(y.numpy(), tm(torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-6)
            assert kiln.equal(y, km(kiln.tensor(x)))
    assert len(cm._cache) == 2  # one capture per shape
    for y, x in results:  # earlier results were not overwritten by later replays
        assert kiln.equal(y, km(kiln.tensor(x)))


def test_function_with_kwargs_and_tuple_output():
    @kiln.compile
    def f(a, b, *, scale):
        return a * scale + b, (a - b).abs().sum()

    for i in range(3):
        a, b = kiln.tensor(rand(5, seed=i)), kiln.tensor(rand(5, seed=10 + i))
        y, s = f(a, b, scale=2.0)
        assert kiln.equal(y, a * 2.0 + b) and kiln.equal(s, (a - b).abs().sum())
    f(a, b, scale=3.0)
    assert len(f._cache) == 2  # a different scalar is a different signature


def test_uncapturable_call_runs_eagerly_and_says_so_once():
    def f(x):
        if x.sum() > 0:  # a data-dependent branch: a host read
            return x * 2
        return x * -1

    cf = kiln.compile(f)
    with pytest.warns(UserWarning, match="cannot be captured"):
        assert cf(kiln.ones(3)).tolist() == [2.0] * 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cf(-kiln.ones(3)).tolist() == [1.0] * 3  # the right branch, eagerly, no second warning
    with pytest.raises(RuntimeError, match="cannot be read on the host"):
        kiln.compile(f, fullgraph=True)(kiln.ones(3))


def test_training_calls_replay_forward_and_backward_like_torch():
    kiln.manual_seed(1)
    km = kiln.nn.Sequential(kiln.nn.Linear(6, 12), kiln.nn.Tanh(), kiln.nn.Linear(12, 2))
    tm = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 2))
    tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in km.state_dict().items()})
    cm = kiln.compile(km)
    opt, topt = kiln.optim.AdamW(km.parameters(), lr=1e-2), torch.optim.AdamW(tm.parameters(), lr=1e-2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every call is captured or replayed
        for i in range(6):
            x, y = rand(5, 6, seed=i), rand(5, 2, seed=20 + i)
            xk = kiln.tensor(x, requires_grad=(i % 2 == 1))  # two signatures: with and without input grad
            xt = torch.tensor(x, requires_grad=(i % 2 == 1))
            loss = kiln.nn.functional.mse_loss(cm(xk), kiln.tensor(y))
            tloss = torch.nn.functional.mse_loss(tm(xt), torch.from_numpy(y))
            opt.zero_grad()
            topt.zero_grad()
            loss.backward()
            tloss.backward()
            np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
            if i % 2:
                np.testing.assert_allclose(xk.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-6)
            for (name, p), q in zip(km.named_parameters(), tm.parameters()):
                np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
            opt.step()
            topt.step()
    assert len(cm._cache) == 2 and all(e.graph is None for e in cm._cache.values())
    assert len(cm._cache[next(iter(cm._cache))].gc.parameters) == 4


def test_two_forwards_before_one_backward_run_eagerly_and_stay_right():
    kiln.manual_seed(2)
    m = kiln.nn.Linear(4, 3)
    cm = kiln.compile(m)
    a, b = kiln.tensor(rand(2, 4, seed=1)), kiln.tensor(rand(2, 4, seed=2))
    cm(a).sum().backward()  # captured
    m.zero_grad()
    with pytest.warns(UserWarning, match="backward has not run yet"):
        ya = cm(a)
        yb = cm(b)  # ya's backward is pending: eager
    (ya * yb).sum().backward()
    w = m.weight.detach().numpy().astype(np.float64)
    bias = m.bias.detach().numpy().astype(np.float64)
    an, bn = a.numpy().astype(np.float64), b.numpy().astype(np.float64)
    ya_, yb_ = an @ w.T + bias, bn @ w.T + bias
    np.testing.assert_allclose(m.weight.grad.numpy(), yb_.T @ an + ya_.T @ bn, rtol=1e-5)
    np.testing.assert_allclose(m.bias.grad.numpy(), (ya_ + yb_).sum(0), rtol=1e-5)


def test_function_closing_over_a_parameter_gets_its_gradient():
    w = kiln.tensor(rand(3, 3, seed=5), requires_grad=True)
    tw = torch.tensor(w.detach().numpy(), requires_grad=True)
    f = kiln.compile(lambda x: (x @ w).relu())
    for i in range(3):
        x = rand(4, 3, seed=i)
        f(kiln.tensor(x)).sum().backward()
        (torch.from_numpy(x) @ tw).relu().sum().backward()
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-6)
    # a tensor that requires grad and carries history from outside the call cannot be replayed
    v = w * 2
    g = kiln.compile(lambda x: x * v)
    with pytest.warns(UserWarning, match="computed before the call"):
        y = g(kiln.ones(3, 3))
    y.sum().backward()  # eagerly: the gradient reaches w through v
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy() + 2.0, rtol=1e-6)


def test_replaced_parameter_is_recaptured():
    m = kiln.nn.Linear(3, 2)
    cm = kiln.compile(m)
    x = kiln.ones(1, 3)
    cm(x).sum().backward()
    with kiln.no_grad():
        m.weight.data = kiln.full((2, 3), 2.0)
        m.bias.zero_()
    y = cm(x)
    assert y.tolist() == [[6.0, 6.0]]
    m.zero_grad()
    y.sum().backward()
    assert m.weight.grad.tolist() == [[1.0] * 3] * 2


def test_quickstart_model_compiled_gives_eager_losses_over_50_steps():
    from helpers import load_quickstart
    qs = load_quickstart()

    def run(compiled):
        kiln.manual_seed(11)
        model = qs.CharTransformer(vocab=20, context=12, d_model=32, n_layers=2, n_heads=4, dropout=0.1)
        opt = kiln.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
        fwd = kiln.compile(model) if compiled else model
        data = kiln.Generator().manual_seed(3)
        losses = []
        for _ in range(50):
            idx = kiln.randint(0, 20, (4, 13), generator=data)
            x, y = idx[:, :-1], idx[:, 1:]
            logits = fwd(x)
            loss = kiln.nn.functional.cross_entropy(logits.reshape(-1, 20), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, fwd

    eager, _ = run(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled, fwd = run(True)
    assert compiled == eager  # bitwise: replays run eager's kernels on eager's numbers (dropout too)
    assert len(fwd._cache) == 1 and eager[-1] < eager[0]


def test_random_ops_and_recompile_limit():
    f = kiln.compile(lambda x: kiln.nn.functional.dropout(x, 0.5, training=True), recompile_limit=1)
    kiln.manual_seed(3)
    a = f(kiln.ones(64))
    b = f(kiln.ones(64))
    assert not kiln.equal(a, b)  # fresh draws each replay
    kiln.manual_seed(3)
    want_a = kiln.nn.functional.dropout(kiln.ones(64), 0.5, training=True)
    want_b = kiln.nn.functional.dropout(kiln.ones(64), 0.5, training=True)
    assert kiln.equal(a, want_a) and kiln.equal(b, want_b)
    with pytest.warns(UserWarning, match="recompile_limit"):
        f(kiln.ones(8))
    with pytest.raises(RuntimeError, match="Unrecognized mode"):
        kiln.compile(lambda x: x, mode="fast")
    g = lambda x: x + 1  # noqa: E731
    assert kiln.compile(g, disable=True) is g
