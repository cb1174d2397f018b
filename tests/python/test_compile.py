"""kiln.compile (issue 17, first part): capture per input signature, replay on a hit, eager where a
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


def test_training_call_runs_eagerly_with_autograd():
    kiln.manual_seed(1)
    m = kiln.nn.Linear(4, 1)
    cm = kiln.compile(m)
    x = kiln.tensor(rand(3, 4))
    with pytest.warns(UserWarning, match="autograd through a replay"):
        loss = cm(x).sum()
    loss.backward()
    assert m.weight.grad is not None
    np.testing.assert_allclose(m.weight.grad.numpy(), x.sum(0, keepdim=True).numpy(), rtol=1e-6)


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
