"""The interpreter lock is released while kiln computes: around every kernel above a small size and
while the autograd engine runs (Python hooks and Functions take it back). A second Python thread
counting in a loop must make progress during one long call; with the lock held it makes none."""
import threading
import time

import pytest

import kiln
from helpers import kiln_threads


@pytest.fixture
def one_thread():
    with kiln_threads(1):
        yield


def _progress_during(fn):
    fn()  # warm-up
    state = {"n": 0, "stop": False}

    def spin():
        while not state["stop"]:
            state["n"] += 1

    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.02)
    n0 = state["n"]
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.2:
        fn()
    n1 = state["n"]
    state["stop"] = True
    t.join()
    return n1 - n0


def _backward_fn():
    w = kiln.randn(768, 768, requires_grad=True)
    x = kiln.randn(512, 768)

    def run():
        (kiln.tanh(x @ w) @ w).sum().backward()
    return run


CASES = {
    "matmul": lambda: (lambda a: lambda: a @ a)(kiln.randn(1024, 1024)),
    "pointwise": lambda: (lambda v: lambda: v * v)(kiln.randn(1 << 22)),
    "sort": lambda: (lambda s: lambda: kiln.sort(s))(kiln.randn(1 << 20)),
    "randn": lambda: lambda: kiln.randn(1 << 22),
    "backward": _backward_fn,
}


@pytest.mark.parametrize("name", list(CASES))
def test_other_threads_run_during_kernels(name, one_thread):
    # free, the counter thread makes millions of steps in 0.2 s; held, it would make almost none
    assert _progress_during(CASES[name]()) > 2000


def test_python_hook_runs_during_backward_with_lock_released():
    # the engine runs without the lock; a Python hook takes it back and may use Python freely
    seen = []
    x = kiln.randn(300, 300, requires_grad=True)
    y = (x @ x).sum()
    x.register_hook(lambda g: seen.append(threading.get_ident()) or g * 2)
    y.backward()
    assert seen == [threading.get_ident()]
    ones = kiln.ones(300, 300)  # d sum(x @ x) / dx = 1 x^T + x^T 1, doubled by the hook
    assert kiln.allclose(x.grad, 2 * (ones @ x.t() + x.t() @ ones), rtol=1e-4, atol=1e-3)
