"""kiln.profiler vs torch.profiler (CPU): the same workload profiled by both gives the same call counts
for the ops that are one kernel in both (kiln's `kiln::add` is torch's `aten::add`), record_function
ranges enclose their ops, schedules fire on_trace_ready at the same steps, the table has torch's
columns, and the Chrome trace and shapes are well formed."""
import json
import warnings

import pytest
import torch
import torch.profiler as tp

import kiln
import kiln.profiler as kp


def _workload(lib):
    a, b = lib.ones(2, 3), lib.ones(2, 3)
    for _ in range(3):
        lib.add(a, b)
    for _ in range(2):
        lib.relu(a)
    lib.mul(a, b)


def _counts(prof, prefix):
    return {e.key[len(prefix):]: e.count for e in prof.key_averages() if e.key.startswith(prefix)}


def test_call_counts_match_torch():
    with tp.profile(activities=[tp.ProfilerActivity.CPU]) as tprof:
        _workload(torch)
    with kp.profile(activities=[kp.ProfilerActivity.CPU]) as kprof:
        _workload(kiln)
    tc, kc = _counts(tprof, "aten::"), _counts(kprof, "kiln::")
    for op in ("add", "relu", "mul"):
        assert kc[op] == tc[op], (op, kc, tc)
    assert all(e.cpu_time_total >= 0 and e.self_cpu_time_total >= 0 for e in kprof.key_averages())


def test_record_function_encloses_its_ops():
    for lib, mod, prefix in ((torch, tp, "aten::"), (kiln, kp, "kiln::")):
        with mod.profile() as prof:
            with mod.record_function("block"):
                lib.add(lib.ones(4), lib.ones(4))
            lib.mul(lib.ones(4), lib.ones(4))
        avg = {e.key: e for e in prof.key_averages()}
        assert avg["block"].count == 1
        assert avg["block"].cpu_time_total >= avg[prefix + "add"].cpu_time_total
    # kiln: the range's self time excludes its ops, and a decorator works too
    @kp.record_function("decorated")
    def f(x):
        return x * 2
    with kp.profile() as prof:
        with kp.record_function("outer"):
            f(kiln.ones(3))
    ev = {e.name: e for e in prof.events()}
    assert ev["outer"].self_cpu_time_total <= ev["outer"].cpu_time_total
    assert [c.name for c in ev["outer"].cpu_children] == ["kiln::full", "decorated"]  # ones(3), then f
    assert [c.name for c in ev["decorated"].cpu_children] == ["kiln::mul"]


@pytest.mark.parametrize("kw", [dict(wait=1, warmup=1, active=2, repeat=2), dict(wait=0, warmup=1, active=1, repeat=3),
                                dict(wait=2, warmup=1, active=3, repeat=0, skip_first=1)])
def test_schedule_fires_at_torch_steps(kw):
    calls = {}
    for lib, mod in ((torch, tp), (kiln, kp)):
        got = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched = mod.schedule(**kw)
        with mod.profile(schedule=sched, on_trace_ready=lambda p, got=got: got.append(p.step_num)) as prof:
            for _ in range(14):
                lib.add(lib.ones(2), 1)
                prof.step()
        calls[lib] = got
        actions = [sched(i).name for i in range(14)]
        calls[(lib, "actions")] = actions
    assert calls[kiln] == calls[torch]
    assert calls[(kiln, "actions")] == calls[(torch, "actions")]


def test_table_has_torch_columns():
    with tp.profile() as tprof:
        _workload(torch)
    with kp.profile() as kprof:
        _workload(kiln)
    theader = tprof.key_averages().table(sort_by="cpu_time_total", row_limit=5).splitlines()[1].split("  ")
    kheader = kprof.key_averages().table(sort_by="cpu_time_total", row_limit=5).splitlines()[1].split("  ")
    assert [c.strip() for c in kheader if c.strip()] == [c.strip() for c in theader if c.strip()]
    table = kprof.key_averages().table(sort_by="self_cpu_time_total")
    assert "kiln::add" in table and table.rstrip().splitlines()[-1].startswith("Self CPU time total:")
    with pytest.raises(AttributeError):
        kprof.key_averages().table(sort_by="bogus")


def test_shapes_and_chrome_trace(tmp_path):
    with kp.profile(record_shapes=True) as prof:
        kiln.add(kiln.ones(2, 3), kiln.ones(1, 3))
    avg = prof.key_averages(group_by_input_shape=True)
    add = [e for e in avg if e.key == "kiln::add"]
    assert add and add[0].input_shapes == [[2, 3], [1, 3]]
    path = prof.export_chrome_trace(str(tmp_path / "trace.json"))
    trace = json.load(open(path))["traceEvents"]
    names = [e["name"] for e in trace]
    assert "kiln::add" in names
    assert all(e["ph"] == "X" and e["dur"] >= 0 and "ts" in e for e in trace)


def test_backward_ops_and_state():
    x = kiln.ones(3).requires_grad_()
    with kp.profile() as prof:
        (x * x).sum().backward()
    keys = {e.key for e in prof.key_averages()}
    assert {"kiln::mul", "kiln::sum"} <= keys   # forward, and mul again in the backward
    assert _counts(prof, "kiln::")["mul"] >= 2
    assert not kiln._C._profiler_enabled()
    with kp.record_function("outside"):  # no profiler: a no-op
        kiln.ones(1)
    with kp.profile() as outer:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with kp.profile() as inner:  # torch allows nesting too
                kiln.ones(2)
    assert len(inner.events()) == 0 and any(e.key == "kiln::full" or e.key.startswith("kiln::") for e in outer.events())
    with pytest.raises(RuntimeError):
        kp.profile(activities=[kp.ProfilerActivity.CUDA])
