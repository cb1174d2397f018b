"""One rank of a multi-process test (tests/python/test_distributed.py starts it under mpirun).

`python dist_worker.py CASE...` runs the cases in order on this rank. Every expected value comes from
torch, computed on this rank from all ranks' inputs (which every rank can make: they are seeded by
rank), so a collective is checked against a single-process computation of the same math. Each case
prints "PASS <case> rank <r>"; a failure raises (the test reads mpirun's output and exit status).
"""
import datetime
import os
import sys
import time

import torch

import kiln
import kiln.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
from helpers import ALL_DTYPES, to_kiln, to_torch  # noqa: E402

R = N = None

INT_LIKE = {"bool", "uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64"}
LOWP = {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"}


def data(rank, dtype, shape=(3, 4), salt=0):
    """Rank's input: small integers (exact in every dtype, so sums and products are exact too)."""
    g = torch.Generator().manual_seed(1000 * rank + 17 * salt + 1)
    if dtype == "bool":
        return torch.randint(0, 2, shape, generator=g).bool()
    lo, hi = (0, 4) if dtype.startswith("uint") or dtype == "uint8" else (-3, 4)
    v = torch.randint(lo, hi, shape, generator=g)
    if dtype.startswith("complex"):
        w = torch.randint(-3, 4, shape, generator=g)
        return torch.complex(v.double(), w.double()).to(getattr(torch, dtype))
    if dtype.startswith("float8"):
        return v.float().to(getattr(torch, dtype))
    return v.to(getattr(torch, dtype))


def reduce_ref(xs, op, dtype):
    """torch: the reduction over ranks, in float32 for the low-precision floats, rounded once."""
    wide = {"float16": torch.float32, "bfloat16": torch.float32, "float8_e4m3fn": torch.float32,
            "float8_e5m2": torch.float32, "uint16": torch.int64, "uint32": torch.int64,
            "uint64": torch.int64}.get(dtype)  # torch's sum/prod/amax skip the wide unsigned types
    s = torch.stack([x.to(wide) if wide else x for x in xs])
    if dtype == "bool":
        s = s.to(torch.uint8)
        r = s.amax(0) if op in ("SUM", "MAX") else s.amin(0)
        return r.bool()
    if op == "SUM":
        r = s.sum(0, dtype=s.dtype)
    elif op == "AVG":
        r = s.sum(0)
        # complex: each part divided (torch's complex / real scalar rounds twice: 1 ulp off with 3 ranks)
        r = torch.complex(r.real / len(xs), r.imag / len(xs)) if r.is_complex() else r / len(xs)
    elif op == "PRODUCT":
        r = s.prod(0, dtype=s.dtype)
    elif op == "MIN":
        r = s.amin(0)
    else:
        r = s.amax(0)
    return r.to(getattr(torch, dtype))


def same(k, t, what):
    kt = to_torch(k)
    assert kt.dtype == t.dtype, f"{what}: dtype {kt.dtype} vs {t.dtype}"
    assert kt.shape == t.shape, f"{what}: shape {tuple(kt.shape)} vs {tuple(t.shape)}"
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16, torch.float16):
        kt, t = kt.float(), t.float()
    assert torch.equal(kt, t), f"{what}: {kt} vs {t}"


def ops_for(dtype):
    if dtype == "bool":
        return ["SUM", "MAX", "MIN", "PRODUCT"]
    if dtype.startswith("complex"):
        return ["SUM", "AVG", "PRODUCT"]
    if dtype in INT_LIKE:
        return ["SUM", "PRODUCT", "MIN", "MAX"]
    return ["SUM", "AVG", "PRODUCT", "MIN", "MAX"]


# ---- cases ------------------------------------------------------------------------------------------------
def case_collectives():
    """Every collective, every dtype, contiguous and strided, against torch's reduction of all ranks'
    inputs."""
    # all_reduce beyond 64 KB on the wire runs MPI's own (the smaller ones travel in the check's
    # envelopes, covered below for every dtype)
    for dt in ("float32", "float64", "int64", "bfloat16", "uint8", "bool"):
        xs = [data(r, dt, shape=(260, 260), salt=5) for r in range(N)]
        for op in ops_for(dt):
            if op == "AVG" and dt in INT_LIKE:
                continue
            k = to_kiln(xs[R])
            dist.all_reduce(k, op=getattr(dist.ReduceOp, op))
            same(k, reduce_ref(xs, op, dt), f"all_reduce {dt} {op} (260, 260)")
    # NaN wins MAX and MIN, and +0 beats -0 in MAX, on every rank alike, small or large, waited at once
    # or asynchronously (then on the group's thread)
    for n, async_op in ((3, False), (3, True), (20000, False), (20000, True)):
        for op in ("MAX", "MIN"):
            x = torch.full((n,), 2.0 + R)
            x[0] = float("nan") if R == N - 1 else 1.0
            x[1] = -0.0 if R % 2 else 0.0
            k = to_kiln(x)
            w = dist.all_reduce(k, op=getattr(dist.ReduceOp, op), async_op=async_op)
            if async_op:
                w.wait()
            got = to_torch(k)
            assert got[0].isnan(), f"{op} n={n}: {got[:3]}"
            if N > 1:
                assert got[1].item() == 0.0 and bool(got[1].signbit()) == (op == "MIN"), f"{op} n={n}: {got[:3]}"
            assert torch.equal(got[2:], torch.full((n - 2,), 2.0 + (N - 1 if op == "MAX" else 0))), f"{op} n={n}"
    # NaNs of different payloads (-NaN is what x86 makes of 0/0): every rank ends with the same bits
    for op in ("SUM", "PRODUCT", "MAX", "MIN"):
        x = torch.full((4,), 1.5)
        x[:2] = float("nan")
        if R % 2:
            x[:2] = -x[:2]
        k = to_kiln(x)
        dist.all_reduce(k, op=getattr(dist.ReduceOp, op))
        bits = to_kiln(to_torch(k).view(torch.int32))
        outs = [kiln.empty(4, dtype=kiln.int32) for _ in range(N)]
        dist.all_gather(outs, bits)
        for r in range(N):
            assert outs[r].tolist() == outs[0].tolist(), f"{op}: rank {r} has {outs[r].tolist()}, rank 0 {outs[0].tolist()}"
    for dt in ALL_DTYPES:
        xs = [data(r, dt) for r in range(N)]
        for op in ops_for(dt):
            for strided in (False, True):
                k = to_kiln(xs[R].t().contiguous()).t() if strided else to_kiln(xs[R])
                if op == "AVG" and dt in INT_LIKE:
                    continue
                dist.all_reduce(k, op=getattr(dist.ReduceOp, op))
                same(k, reduce_ref(xs, op, dt), f"all_reduce {dt} {op} strided={strided}")
        # broadcast from the last rank, into a strided tensor
        k = to_kiln(xs[R].t().contiguous()).t()
        dist.broadcast(k, src=N - 1)
        same(k, xs[N - 1], f"broadcast {dt}")
        # reduce to rank 1 (others keep their input)
        k = to_kiln(xs[R])
        dist.reduce(k, dst=1 % N, op=dist.ReduceOp.SUM)
        same(k, reduce_ref(xs, "SUM", dt) if R == 1 % N else xs[R], f"reduce {dt}")
        # all_gather (list and into one tensor)
        outs = [kiln.empty((3, 4), dtype=getattr(kiln, dt)) for _ in range(N)]
        dist.all_gather(outs, to_kiln(xs[R]))
        for r in range(N):
            same(outs[r], xs[r], f"all_gather {dt} from {r}")
        big = kiln.empty((3 * N, 4), dtype=getattr(kiln, dt))
        dist.all_gather_into_tensor(big, to_kiln(xs[R]))
        same(big, torch.cat(xs), f"all_gather_into_tensor {dt}")
        # reduce_scatter: rank r gets the reduction of everyone's chunk r
        chunks = [[data(r, dt, salt=c) for c in range(N)] for r in range(N)]
        out = kiln.empty((3, 4), dtype=getattr(kiln, dt))
        dist.reduce_scatter(out, [to_kiln(c) for c in chunks[R]])
        same(out, reduce_ref([chunks[r][R] for r in range(N)], "SUM", dt), f"reduce_scatter {dt}")
        full = [torch.cat(chunks[r]) for r in range(N)]
        out = kiln.empty((3, 4), dtype=getattr(kiln, dt))
        dist.reduce_scatter_tensor(out, to_kiln(full[R]))
        same(out, reduce_ref([chunks[r][R] for r in range(N)], "SUM", dt), f"reduce_scatter_tensor {dt}")
        # all_to_all with per-pair sizes: rank r sends (r + d + 1) rows of width 2 to rank d
        send = [data(R, dt, shape=(R + d + 1, 2), salt=d) for d in range(N)]
        recv = [kiln.empty((s + R + 1, 2), dtype=getattr(kiln, dt)) for s in range(N)]
        dist.all_to_all(recv, [to_kiln(x) for x in send])
        for s in range(N):
            same(recv[s], data(s, dt, shape=(s + R + 1, 2), salt=R), f"all_to_all {dt} from {s}")
        # all_to_all_single with uneven splits
        in_split = [R + d + 1 for d in range(N)]
        out_split = [s + R + 1 for s in range(N)]
        inp = torch.cat(send)
        out = kiln.empty((sum(out_split), 2), dtype=getattr(kiln, dt))
        dist.all_to_all_single(out, to_kiln(inp), out_split, in_split)
        same(out, torch.cat([data(s, dt, shape=(s + R + 1, 2), salt=R) for s in range(N)]), f"all_to_all_single {dt}")
        # gather to rank 0 / scatter from rank 0
        gl = [kiln.empty((3, 4), dtype=getattr(kiln, dt)) for _ in range(N)] if R == 0 else None
        dist.gather(to_kiln(xs[R]), gl, dst=0)
        if R == 0:
            for r in range(N):
                same(gl[r], xs[r], f"gather {dt} from {r}")
        out = kiln.empty((3, 4), dtype=getattr(kiln, dt))
        dist.scatter(out, [to_kiln(data(0, dt, salt=5 + r)) for r in range(N)] if R == 0 else None, src=0)
        same(out, data(0, dt, salt=5 + R), f"scatter {dt}")
        # send / recv around a ring, and isend / irecv both ways at once
        nxt, prv = (R + 1) % N, (R - 1) % N
        if R % 2 == 0:
            dist.send(to_kiln(xs[R]), dst=nxt)
            k = kiln.empty((3, 4), dtype=getattr(kiln, dt))
            assert dist.recv(k, src=prv) == prv
        else:
            k = kiln.empty((3, 4), dtype=getattr(kiln, dt))
            assert dist.recv(k, src=prv) == prv
            dist.send(to_kiln(xs[R]), dst=nxt)
        same(k, xs[prv], f"send/recv {dt}")
        big_n = (1 << 16, 8)  # past the eager limit: a blocking pair would deadlock
        k = kiln.empty(big_n, dtype=getattr(kiln, dt))
        ws = [dist.isend(to_kiln(data(R, dt, shape=big_n)), dst=nxt), dist.irecv(k, src=prv)]
        for w in ws:
            w.wait()
        same(k, data(prv, dt, shape=big_n), f"isend/irecv {dt}")
    # 0-dim and empty tensors; async_op
    z = kiln.tensor(float(R + 1))
    w = dist.all_reduce(z, async_op=True)
    assert w.wait() is True and w.is_completed()
    assert z.item() == sum(range(1, N + 1))
    e = kiln.empty((0, 3))
    dist.all_reduce(e)
    assert tuple(e.shape) == (0, 3)
    dist.barrier()


def case_errors():
    """Bad calls raise on every rank before anything moves; mismatched calls across ranks raise
    rather than corrupt."""
    def raises(exc, fn, words):
        try:
            fn()
        except exc as e:
            for w in words:
                assert w in str(e), f"{w!r} not in {e}"
            return
        raise AssertionError(f"{fn} did not raise {exc.__name__}")

    raises(ValueError, lambda: dist.all_reduce(kiln.ones(3, dtype=kiln.int32), op=dist.ReduceOp.AVG),
           ["all_reduce", "AVG", "int32"])
    raises(ValueError, lambda: dist.all_reduce(kiln.ones(3, dtype=kiln.complex64), op=dist.ReduceOp.MAX),
           ["complex"])
    raises(ValueError, lambda: dist.all_gather([kiln.empty(3)], kiln.ones(3)), ["all_gather", f"expected {N}"])
    raises(ValueError, lambda: dist.all_gather_into_tensor(kiln.empty(5), kiln.ones(3)), ["elements"])
    raises(ValueError, lambda: dist.broadcast(kiln.ones(3), src=N + 3), ["not part of"])
    raises(ValueError, lambda: dist.all_to_all_single(kiln.empty(N + 1), kiln.ones(N + 1)), ["divide"])
    # mismatched sizes and dtypes across ranks: every rank raises, and the group still works after
    raises(RuntimeError, lambda: dist.all_reduce(kiln.ones(4 + R)), ["different collectives", "rank 0", "rank 1"])
    raises(RuntimeError, lambda: dist.all_reduce(kiln.ones(4, dtype=kiln.float32 if R else kiln.float64)),
           ["different collectives", "float64"])
    raises(RuntimeError, lambda: (dist.broadcast(kiln.ones(4), src=0) if R == 0 else dist.all_reduce(kiln.ones(4))),
           ["broadcast", "all_reduce"])
    if N > 1:
        # rank 0 expects 2 elements from rank 1, which sends it 1
        raises(RuntimeError, lambda: dist.all_to_all_single(kiln.empty(N + (1 if R == 0 else 0)), kiln.ones(N),
                                                            [1 + (R == 0 and s == 1) for s in range(N)], [1] * N),
               ["split sizes disagree"])
    t = kiln.ones(3)
    dist.all_reduce(t)
    assert t.tolist() == [float(N)] * 3


def case_groups():
    """new_group: members run collectives among themselves; non-members get NON_GROUP_MEMBER."""
    evens = dist.new_group([r for r in range(N) if r % 2 == 0])
    if R % 2 == 0:
        assert dist.get_world_size(evens) == (N + 1) // 2 and dist.get_rank(evens) == R // 2
        t = kiln.tensor([float(R)])
        dist.all_reduce(t, group=evens)
        assert t.item() == sum(r for r in range(N) if r % 2 == 0)
        dist.broadcast(t, src=0, group=evens)  # global rank 0
        k = kiln.tensor([float(R)])
        dist.broadcast(k, group=evens, group_src=len(dist.get_process_group_ranks(evens)) - 1)
        assert k.item() == float(dist.get_process_group_ranks(evens)[-1])
    else:
        assert evens is dist.GroupMember.NON_GROUP_MEMBER
        assert dist.all_reduce(kiln.ones(1), group=evens) is None
    dist.barrier()


def case_grads():
    """Gradients of the differentiable collectives against the same math on all ranks' data in one
    torch process."""
    import kiln.distributed.nn.functional as F
    import kiln.distributed._functional_collectives as fc

    def tdata(r, shape, salt):
        return torch.randn(shape, generator=torch.Generator().manual_seed(r * 31 + salt), dtype=torch.float64)

    def check(name, kfn, tfn, shape, wshape):
        """kfn(x) on this rank, loss = sum(w_r * out); torch: tfn(list of every rank's x) -> every
        rank's out; compare this rank's x.grad."""
        x = to_kiln(tdata(R, shape, 1)).requires_grad_()
        wsh = wshape if callable(wshape) else (lambda r: wshape)
        w = to_kiln(tdata(R, wsh(R), 2))
        (kfn(x) * w).sum().backward()
        txs = [tdata(r, shape, 1).requires_grad_() for r in range(N)]
        touts = tfn(txs)
        sum((o * tdata(r, wsh(r), 2)).sum() for r, o in enumerate(touts)).backward()
        g = to_torch(x.grad)
        want = txs[R].grad if txs[R].grad is not None else torch.zeros_like(txs[R])  # unused on this rank
        assert torch.allclose(g, want, rtol=1e-12, atol=1e-12), f"{name}: {g} vs {want}"

    check("all_reduce sum", lambda x: F.all_reduce(x), lambda xs: [sum(xs)] * N, (3, 2), (3, 2))
    check("all_reduce avg", lambda x: fc.all_reduce(x, "avg"), lambda xs: [sum(xs) / N] * N, (3, 2), (3, 2))
    check("all_gather dim 1", lambda x: fc.all_gather_tensor_autograd(x, 1),
          lambda xs: [torch.cat(xs, 1)] * N, (2, 3), (2, 3 * N))
    check("all_gather list", lambda x: torch_free_stack(F.all_gather(x)),
          lambda xs: [torch.stack(xs)] * N, (2, 3), (N, 2, 3))
    check("reduce_scatter dim 0", lambda x: fc.reduce_scatter_tensor_autograd(x, "sum", 0),
          lambda xs: list(sum(xs).chunk(N, 0)), (2 * N, 3), (2, 3))
    check("reduce_scatter dim 1 avg", lambda x: fc.reduce_scatter_tensor(x, "avg", 1),
          lambda xs: list((sum(xs) / N).chunk(N, 1)), (2, 2 * N), (2, 2))
    # uneven all_to_all_single: rank r sends d + 1 rows to rank d
    ins = [[d + 1 for d in range(N)] for r in range(N)]
    outs = [[r + 1 for _ in range(N)] for r in range(N)]
    check("all_to_all_single", lambda x: fc.all_to_all_single_autograd(x, outs[R], ins[R]),
          lambda xs: [torch.cat([xs[s].split(ins[s])[d] for s in range(N)]) for d in range(N)],
          (sum(ins[0]), 2), lambda r: (N * (r + 1), 2))
    check("broadcast", lambda x: F.broadcast(x, src=N - 1), lambda xs: [xs[N - 1]] * N, (4,), (4,))
    check("reduce", lambda x: F.reduce(x, dst=0), lambda xs: [sum(xs)] + [torch.zeros(4)] * (N - 1), (4,), (4,))
    # all_to_all (list form)
    a = to_kiln(tdata(R, (N, 2), 3)).requires_grad_()
    got = F.all_to_all([kiln.empty(2) for _ in range(N)], list(a.unbind(0)))
    (kiln.stack(list(got)) * to_kiln(tdata(R, (N, 2), 4))).sum().backward()
    txs = [tdata(r, (N, 2), 3).requires_grad_() for r in range(N)]
    sum((torch.stack([txs[s][r] for s in range(N)]) * tdata(r, (N, 2), 4)).sum() for r in range(N)).backward()
    assert torch.allclose(to_torch(a.grad), txs[R].grad), "all_to_all list"
    # MAX has no derivative
    x = kiln.ones(2, requires_grad=True)
    try:
        F.all_reduce(x, op=dist.ReduceOp.MAX).sum().backward()
        raise AssertionError("no error")
    except NotImplementedError as e:
        assert "MAX" in str(e)


def torch_free_stack(ts):
    return kiln.stack(list(ts))


def case_ddp():
    """DDP on N ranks with 1/N of the batch each gives the parameters torch gets on the full batch."""
    from kiln import nn

    def tmodel():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16),
                                   torch.nn.Tanh(), torch.nn.Linear(16, 3))

    def kmodel(tm):
        m = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))
        with kiln.no_grad():
            for kp, tp in zip(m.parameters(), tm.parameters()):
                kp.copy_(to_kiln(tp.detach()))
                if R != 0:
                    kp.add_(1.0)  # DDP's broadcast from rank 0 must undo this
        return m

    g = torch.Generator().manual_seed(7)
    X, Y = torch.randn(8 * N, 6, generator=g), torch.randn(8 * N, 3, generator=g)
    for kw in ({}, {"gradient_as_bucket_view": True}, {"bucket_cap_mb": 0.0005}, {"find_unused_parameters": True}):
        tm = tmodel()
        ddp = nn.parallel.DistributedDataParallel(kmodel(tm), **kw)
        opt = kiln.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
        topt = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
        xs, ys = to_kiln(X.chunk(N)[R]), to_kiln(Y.chunk(N)[R])
        for _ in range(3):
            opt.zero_grad()
            ((ddp(xs) - ys) ** 2).mean().backward()
            opt.step()
            topt.zero_grad()
            ((tm(X) - Y) ** 2).mean().backward()
            topt.step()
        for kp, tp in zip(ddp.module.parameters(), tm.parameters()):
            assert torch.allclose(to_torch(kp), tp.detach(), rtol=1e-5, atol=1e-6), f"ddp {kw}: {to_torch(kp)} vs {tp}"
    # no_sync: two micro-batches accumulated locally, then one synced step == the full batch
    tm = tmodel()
    ddp = nn.parallel.DistributedDataParallel(kmodel(tm))
    half = [to_kiln(c) for c in X.chunk(2 * N)[2 * R:2 * R + 2]], [to_kiln(c) for c in Y.chunk(2 * N)[2 * R:2 * R + 2]]
    with ddp.no_sync():
        (((ddp(half[0][0]) - half[1][0]) ** 2).mean() / 2).backward()
    (((ddp(half[0][1]) - half[1][1]) ** 2).mean() / 2).backward()
    ((tm(X) - Y) ** 2).mean().backward()
    for kp, tp in zip(ddp.module.parameters(), tm.parameters()):
        assert torch.allclose(to_torch(kp.grad), tp.grad, rtol=1e-5, atol=1e-6), "no_sync"
    # a parameter no loss reaches: torch's error at the next forward without find_unused_parameters;
    # with it, the unused parameter's gradient stays None on every rank
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

        def forward(self, x):
            return self.a(x)

    ddp = nn.parallel.DistributedDataParallel(Two())
    ddp(kiln.ones(2, 4))  # a forward without backward (evaluation under grad mode) is fine
    ddp(kiln.ones(2, 4)).sum().backward()
    try:
        ddp(kiln.ones(2, 4))
        raise AssertionError("no error for an unused parameter")
    except RuntimeError as e:
        assert "find_unused_parameters=True" in str(e) and "2 3" in str(e), str(e)
    ddp = nn.parallel.DistributedDataParallel(Two(), find_unused_parameters=True)
    for _ in range(2):
        ddp(kiln.ones(2, 4)).sum().backward()
    assert ddp.module.b.weight.grad is None and ddp.module.a.weight.grad is not None


def case_sampler():
    from kiln.utils.data import DistributedSampler
    seen = []
    for r in range(N):
        seen += list(DistributedSampler(range(10), shuffle=True, seed=3, num_replicas=N, rank=r))
    assert sorted(set(seen)) == list(range(10)) and len(seen) == N * -(-10 // N)
    mine = list(DistributedSampler(range(10), shuffle=False))
    assert mine == list(torch.utils.data.DistributedSampler(range(10), num_replicas=N, rank=R, shuffle=False))


def case_trace():
    """The collectives are table ops: export records them (and its program runs them), and the capture
    layer sees their kernels and replays them."""
    import kiln.distributed._functional_collectives as fc

    class M(kiln.nn.Module):
        def forward(self, x):
            return fc.all_reduce(x * 2, "sum") + 1

    ep = kiln.export.export(M(), (kiln.ones(3),))
    assert "_c10d_all_reduce" in str(ep.graph), str(ep.graph)
    out = ep.module()(kiln.full((3,), float(R)))
    assert out.tolist() == [2.0 * sum(range(N)) + 1] * 3, out.tolist()
    rec = kiln._C._KernelRecorder()
    x = kiln.full((2,), float(R + 1))
    rec.start()
    y = fc.all_reduce(x, "sum")
    rec.stop()
    assert [r[0] for r in rec.records()] == ["_c10d_all_reduce"], rec.records()
    x.fill_(10.0 * (R + 1))
    rec.replay()
    assert y.tolist() == [10.0 * sum(range(1, N + 1))] * 2, y.tolist()


def case_timeout():
    """The last rank skips one all_reduce: the others raise within the timeout (plus the quarter of it
    they spend asking the others), naming it."""
    limit = float(os.environ.get("KILN_TEST_DIST_TIMEOUT", "60"))
    dist.all_reduce(kiln.ones(2))
    if R == N - 1:
        time.sleep(3 * limit)
        return
    t0 = time.time()
    try:
        dist.all_reduce(kiln.ones(2))
        raise AssertionError("no timeout")
    except RuntimeError as e:
        took = time.time() - t0
        msg = str(e)
        assert f"rank {N - 1} has not joined it" in msg and "all_reduce #2" in msg, msg
        for r in range(N - 1):
            assert f"rank {r} has not joined" not in msg, msg
        assert took < 1.25 * limit + 2.0, f"raised after {took:.2f} s: {msg}"
    try:
        dist.broadcast(kiln.ones(2), src=0)
        raise AssertionError("no error after abort")
    except RuntimeError as e:
        assert "was aborted" in str(e)
    print(f"TIMEOUT-RAISED rank {R}", flush=True)
    # The first rank to leave exits without MPI_Finalize (its communicator is aborted) and mpirun then
    # tears the job down, so a rank that raised but was slower to be scheduled (4 ranks on 2 cores) would
    # be killed before printing. The waiting ranks meet in a directory instead of an (aborted) collective.
    meet = os.environ.get("KILN_TEST_DIST_MEET")
    if meet:
        open(os.path.join(meet, f"raised.{R}"), "w").close()
        t1 = time.time()
        while time.time() - t1 < 30 and len([f for f in os.listdir(meet) if f.startswith("raised.")]) < N - 1:
            time.sleep(0.05)


def case_die():
    """The last rank exits in the middle of training; the job must end (mpirun tears it down)."""
    dist.all_reduce(kiln.ones(2))
    if R == N - 1:
        os._exit(3)
    for _ in range(1000):
        dist.all_reduce(kiln.ones(1 << 12))


if __name__ == "__main__":
    timeout = float(os.environ.get("KILN_TEST_DIST_TIMEOUT", "60"))
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=timeout))
    R, N = dist.get_rank(), dist.get_world_size()
    for name in sys.argv[1:]:
        globals()["case_" + name]()
        print(f"PASS {name} rank {R}", flush=True)
    dist.destroy_process_group()
