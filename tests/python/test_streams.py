"""Streams and events on the CPU (issue 18): a non-default stream is an ordered queue run by its
own worker; events and wait_stream order work across streams; record_stream keeps memory from
being reused early. Work is ordered in these tests with gates (a task that holds a stream's worker
until the test opens it), never with timing. Values are compared with torch running the same ops
(torch's CPU streams run everything at once, so its results are the ordered ones)."""
import multiprocessing as mp
import threading

import numpy as np
import pytest
import torch

import kiln

_C = kiln._C


class Gate:
    def __init__(self, stream):
        self.g = _C._stream_gate(stream)

    def __enter__(self):
        return self.g

    def __exit__(self, *exc):
        self.g.open()


def test_api_like_torch_stream():
    s, t = kiln.Stream(), torch.Stream()
    assert (s.device_type, s.device_index) == (t.device_type, t.device_index) == (0, -1)
    assert str(s.device) == str(t.device) == "cpu"
    assert s.query() and t.query()
    assert kiln.current_stream() == kiln.default_stream() and kiln.current_stream().stream_id == 0
    assert s.stream_id > 0 and kiln.Stream().stream_id != s.stream_id
    assert s == s and s != kiln.Stream() and len({s, s}) == 1
    assert kiln.Stream(priority=-1).priority == -1
    assert repr(s).startswith("kiln.Stream device_type=cpu, device_index=-1, stream_id=")
    with pytest.raises(ValueError, match="kiln's streams and events run on the CPU"):
        kiln.Stream(device="cuda")
    with pytest.raises(TypeError):
        kiln.stream(3)


def test_stream_context_is_per_thread_and_nests():
    a, b = kiln.Stream(), kiln.Stream()
    with kiln.stream(a):
        assert kiln.current_stream() == a
        with kiln.stream(b):
            assert kiln.current_stream() == b
            seen = []
            th = threading.Thread(target=lambda: seen.append(kiln.current_stream()))
            th.start()
            th.join()
            assert seen[0] == kiln.default_stream()
        assert kiln.current_stream() == a
        with kiln.stream(None):
            assert kiln.current_stream() == a
    assert kiln.current_stream() == kiln.default_stream()
    with a:  # torch.Stream is a context manager too
        assert kiln.current_stream() == a
    assert kiln.current_stream() == kiln.default_stream()


def chain(lib, x):
    y = x.clone()
    for i in range(50):
        y.mul_(1.01).add_(i * 0.1)
    z = lib.cat([y, y.sin()]) @ lib.ones(8, 3)
    w = z.softmax(0).cumsum(1)
    out = lib.empty(10)
    lib.sum(w, 1, out=out)  # out=
    return w, y.sum(0), out


def test_ordered_queue_matches_torch():
    xs = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    want = chain(torch, torch.from_numpy(xs))
    s = kiln.Stream()
    with kiln.stream(s):
        got = chain(kiln, kiln.tensor(xs))
    s.synchronize()
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)


def test_work_is_queued_not_run_and_query_says_so():
    s = kiln.Stream()
    x = kiln.ones(4)
    with Gate(s):
        with kiln.stream(s):
            x.add_(1)
            y = x * 3
        assert not s.query()
        assert y.shape == (4,) and y.dtype == kiln.float32  # sizes and dtype are known at once
        assert _C._streams_pending() >= 2
    s.synchronize()
    assert s.query()
    assert y.tolist() == [6.0] * 4


def test_shape_errors_are_raised_at_issue():
    s = kiln.Stream()
    with kiln.stream(s), pytest.raises(RuntimeError, match="must match the size"):
        kiln.ones(3) + kiln.ones(4)


def test_kernel_error_is_raised_by_synchronize_then_cleared():
    s = kiln.Stream()
    x = kiln.arange(5.0)
    idx = kiln.tensor([0, 7])
    with kiln.stream(s):
        y = kiln.index_select(x, 0, idx)  # the bound is checked by the kernel, on the worker
    del y
    with pytest.raises(IndexError) as got:
        s.synchronize()
    with pytest.raises(IndexError) as want:
        torch.index_select(torch.arange(5.0), 0, torch.tensor([0, 7]))
    assert str(want.value).split(":")[0] in str(got.value)
    s.synchronize()  # reported once
    with kiln.stream(s):
        z = x + 1
    assert z.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_event_orders_two_streams():
    s1, s2 = kiln.Stream(), kiln.Stream()
    a = kiln.zeros(6)
    e = kiln.Event()
    with Gate(s1):
        with kiln.stream(s1):
            a.fill_(5)
        e.record(s1)
        assert not e.query()
        s2.wait_event(e)
        with kiln.stream(s2):
            b = a * 2
        assert not s2.query()  # waiting for s1, which waits for the gate
    s2.synchronize()
    assert e.query()
    assert b.tolist() == [10.0] * 6


def test_wait_stream_and_event_wait():
    s1, s2 = kiln.Stream(), kiln.Stream()
    a = kiln.zeros(3)
    with Gate(s1):
        with kiln.stream(s1):
            a.add_(2)
        s2.wait_stream(s1)
        with kiln.stream(s2):
            b = a + 1
    s2.synchronize()
    assert b.tolist() == [3.0] * 3
    e = s1.record_event()
    e.wait()  # the default stream: the caller waits
    assert e.query()


def test_event_timing_and_errors_like_torch():
    s = kiln.Stream()
    e1, e2 = kiln.Event(enable_timing=True), kiln.Event(enable_timing=True)
    x = kiln.randn(200, 200)
    with kiln.stream(s):
        e1.record()
        for _ in range(5):
            x = x @ x.tanh()
        e2.record()
    e2.synchronize()
    assert e1.elapsed_time(e2) >= 0.0
    for a, b in [(kiln.Event(), kiln.Event()), (kiln.Event(enable_timing=True), kiln.Event(enable_timing=True))]:
        ta, tb = torch.Event(enable_timing=a.enable_timing), torch.Event(enable_timing=b.enable_timing)
        with pytest.raises(ValueError) as want:
            ta.elapsed_time(tb)
        with pytest.raises(ValueError) as got:
            a.elapsed_time(b)
        assert str(got.value).endswith(str(want.value))
    assert kiln.Event().query()  # never recorded: nothing to wait for
    kiln.Event().synchronize()


def test_host_reads_wait_for_queued_work():
    s = kiln.Stream()
    x = kiln.zeros(4)
    reads = (lambda t: t.tolist(), lambda t: t.numpy().tolist(), lambda t: [t[i].item() for i in range(4)],
             lambda t: [float(v) for v in t])
    for k, read in enumerate(reads, start=1):
        with Gate(s) as g:
            with kiln.stream(s):
                x.add_(1)
                y = x * 2
            opener = threading.Timer(0.05, g.open)
            opener.start()
            got = read(y)  # waits for the gate, then the queue
            opener.join()
        assert got == [2.0 * k] * 4
    assert x.tolist() == [4.0] * 4


def test_data_dependent_op_on_a_stream():
    s = kiln.Stream()
    xs = np.array([[0.0, 1.5, -2.0], [3.0, 0.0, 4.0]], dtype=np.float32)
    with kiln.stream(s):
        x = kiln.tensor(xs)
        nz = (x * 2 > 0).nonzero()
        sel = kiln.masked_select(x, x > 0)
    assert nz.tolist() == torch.nonzero(torch.from_numpy(xs) * 2 > 0).tolist()
    assert sel.tolist() == [1.5, 3.0, 4.0]


def test_random_ops_draw_in_issue_order():
    def draws():
        return [kiln.rand(5), kiln.randn(3), kiln.empty(4).uniform_(), kiln.randint(0, 10, (6,))]
    kiln.manual_seed(7)
    want = [t.tolist() for t in draws()]
    s = kiln.Stream()
    kiln.manual_seed(7)
    with kiln.stream(s):
        got = draws()
    assert [t.tolist() for t in got] == want


def test_autograd_on_a_stream():
    xs = np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32)
    ws = np.random.default_rng(2).standard_normal((5, 3)).astype(np.float32)
    tw = torch.tensor(ws, requires_grad=True)
    (torch.from_numpy(xs) @ tw).tanh().pow(2).sum().backward()
    s = kiln.Stream()
    for backward_inside in (True, False):
        w = kiln.tensor(ws, requires_grad=True)
        with kiln.stream(s):
            loss = (kiln.tensor(xs) @ w).tanh().pow(2).sum()
            if backward_inside:
                loss.backward()
        if not backward_inside:
            loss.backward()  # on the default stream: waits for the forward queued on s
        s.synchronize()
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_optimizer_step_on_a_stream():
    kiln.manual_seed(0)
    lin = kiln.nn.Linear(6, 2)
    ref = kiln.nn.Linear(6, 2)
    ref.load_state_dict(lin.state_dict())
    x = kiln.randn(8, 6)
    for model, stream in ((ref, None), (lin, kiln.Stream())):
        opt = kiln.optim.AdamW(model.parameters(), lr=0.1)
        with kiln.stream(stream):
            for _ in range(3):
                opt.zero_grad()
                model(x).pow(2).mean().backward()
                opt.step()
        if stream is not None:
            stream.synchronize()
    for a, b in zip(lin.parameters(), ref.parameters()):
        assert a.tolist() == b.tolist()


def test_record_stream_memory_not_reused_early():
    s = kiln.Stream()
    for use_record_stream in (True, False):
        x = kiln.full((1 << 16,), 1.0)
        old = _C._data_ptr_nowait(x)
        with Gate(s):
            with kiln.stream(s):
                y = x * 2
            if use_record_stream:
                x.record_stream(s)
            del x
            # the caching allocator would hand the freed block to the next tensor of the size
            fresh = [kiln.full((1 << 16,), -7.0) for _ in range(4)]
            assert all(_C._data_ptr_nowait(f) != old for f in fresh)
        s.synchronize()
        assert y.min().item() == 2.0 and y.max().item() == 2.0  # no sentinel leaked in
        assert all(f.min().item() == -7.0 for f in fresh)


def test_deleting_a_stream_finishes_its_work():
    x = kiln.arange(6.0)
    s = kiln.Stream()
    with kiln.stream(s):
        y = (x + 1).cumsum(0)
    del s
    assert y.tolist() == [1.0, 3.0, 6.0, 10.0, 15.0, 21.0]


def _child(q):
    s = kiln.Stream()
    with kiln.stream(s):
        y = kiln.arange(4.0) * 3
    s.synchronize()
    q.put(y.tolist())


def test_stream_in_forked_child():
    s = kiln.Stream()
    with kiln.stream(s):
        (kiln.ones(3) + 1).tolist()  # the parent's worker has started
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    got = q.get(timeout=60)
    p.join(60)
    assert got == [0.0, 3.0, 6.0, 9.0] and p.exitcode == 0


def test_cpu_module_like_torch():
    assert kiln.cpu.is_available() is torch.cpu.is_available() is True
    assert kiln.cpu.device_count() == torch.cpu.device_count() == 1
    assert kiln.cpu.current_stream() == kiln.default_stream()
    s = kiln.cpu.Stream()
    with kiln.cpu.stream(s):
        y = kiln.ones(2) * 5
    kiln.cpu.synchronize()
    assert s.query() and y.tolist() == [5.0, 5.0]


# --- what a queued kernel holds, and where its errors go ---------------------------------------------

def test_queued_kernel_keeps_the_memory_it_was_issued_on():
    s = kiln.Stream()
    a, b = kiln.full((4,), 2.0), kiln.full((4,), 3.0)
    y = kiln.empty(4)
    with Gate(s):
        with kiln.stream(s):
            kiln.add(a, b, out=y)
            z = y.sum()
            kiln.mul(kiln.ones(2, 3), 7.0, out=y)  # resizes y (a new buffer) before the add has run
            w = kiln.empty(4)
            kiln.mul(a, 10.0, out=w)
        old = w
        w.data = kiln.zeros(4)  # the queued mul still writes the memory it was issued on
    s.synchronize()
    assert z.item() == 20.0
    assert y.shape == (2, 3) and y.tolist() == [[7.0] * 3] * 2
    assert w.tolist() == [0.0] * 4 and old is w


def test_kernel_error_reaches_the_next_host_read():
    s = kiln.Stream()
    with kiln.stream(s):
        y = kiln.index_select(kiln.arange(5.0), 0, kiln.tensor([9]))
    with pytest.raises(IndexError):
        y.tolist()
    assert kiln.arange(3.0).tolist() == [0.0, 1.0, 2.0]  # raised once


def test_backward_on_a_stream_then_step_on_the_default():
    kiln.manual_seed(0)
    lin, ref = kiln.nn.Linear(5, 3), kiln.nn.Linear(5, 3)
    ref.load_state_dict(lin.state_dict())
    x = kiln.randn(16, 5)
    s = kiln.Stream()
    for model, stream in ((ref, None), (lin, s)):
        opt = kiln.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
        for _ in range(3):
            opt.zero_grad()
            with kiln.stream(stream):
                model(x).pow(2).sum().backward()
            opt.step()  # on the default stream: waits for the gradients queued on s
    for a, b in zip(lin.parameters(), ref.parameters()):
        assert a.tolist() == b.tolist()


def test_streams_waiting_on_each_other_can_be_dropped():
    a, b = kiln.Stream(), kiln.Stream()
    x = kiln.ones(3)
    with kiln.stream(a):
        y = x * 2
    a.wait_stream(b)
    e = a.record_event()
    b.wait_event(e)
    with kiln.stream(b):
        z = y + 1
    del a, b, e  # no join: the queues drain on their own
    assert z.tolist() == [3.0] * 3


def _forked_child(q):
    try:
        # the parent's queued work is not run here; the child's own work runs on a fresh worker
        v = kiln.arange(3.0).sum().item()
        s = kiln.Stream()
        with kiln.stream(s):
            y = kiln.arange(3.0) * 2
        q.put((v, y.tolist()))
    except BaseException as e:  # noqa: BLE001
        q.put(repr(e))


def test_fork_with_work_queued_does_not_hang_the_child():
    s = kiln.Stream()
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    with Gate(s):
        with kiln.stream(s):
            y = kiln.ones(4) * 5
        p = ctx.Process(target=_forked_child, args=(q,))
        p.start()
        got = q.get(timeout=60)
        p.join(60)
    assert got == (3.0, [0.0, 2.0, 4.0]) and p.exitcode == 0
    assert y.tolist() == [5.0] * 4
