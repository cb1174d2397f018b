"""kiln.distributed on Open MPI: multi-process jobs started with mpirun (TCP on the loopback interface
only, 2, 3 and 4 ranks, oversubscribed), plus the single-process parts (API surface, samplers, hooks).

The ranks' own checks live in dist_worker.py: every collective and dtype against torch's reduction of
all ranks' inputs, gradients of the differentiable collectives against the same math in one torch
process, DDP on N ranks against torch on the full batch. Here: their exit status and output, the
timeout (the others raise in time, naming the rank that never came), and a rank that dies (the job
ends within seconds).
"""
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest
import torch

import kiln
import kiln.distributed as dist

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MPIRUN = shutil.which("mpirun")

# Only a kiln built without MPI skips (pip install on a machine without Open MPI); `make test` installs
# Open MPI, so a missing mpirun beside an MPI build fails the tests that need it.
needs_mpi = pytest.mark.skipif(not dist.is_available(), reason="kiln built without MPI")


def mpirun(np, args, timeout=240, env=None):
    """Runs `args` on np ranks; returns (exit status, output, seconds)."""
    e = dict(os.environ)
    e.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMP_NUM_THREADS": "1",
              "OMP_WAIT_POLICY": "PASSIVE", "PYTHONPATH": f"{ROOT / 'python'}:{e.get('PYTHONPATH', '')}",
              # no stray warnings about the (absent) high-speed networks
              "OMPI_MCA_btl_base_warn_component_unused": "0"})
    e.update(env or {})
    cmd = [MPIRUN, "-np", str(np), "--oversubscribe", "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include",
           "lo", "--mca", "oob_tcp_if_include", "lo"] + [str(a) for a in args]
    assert MPIRUN is not None, "kiln has MPI but there is no mpirun (make deps installs openmpi-bin)"
    t0 = time.time()
    p = subprocess.run(cmd, cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout, time.time() - t0


def worker(np, *cases, **kw):
    return mpirun(np, [sys.executable, HERE / "dist_worker.py", *cases], **kw)


CASES = ["collectives", "errors", "groups", "grads", "ddp", "sampler", "trace"]


@needs_mpi
@pytest.mark.parametrize("np", [2, 3, 4])  # 3: the envelopes' fold for a group that is not a power of two
def test_ranks(np):
    rc, out, _ = worker(np, *CASES)
    assert rc == 0, out[-6000:]
    for c in CASES:
        for r in range(np):
            assert f"PASS {c} rank {r}" in out, f"{c} on rank {r}:\n{out[-4000:]}"


@needs_mpi
@pytest.mark.parametrize("np", [2, 4])
def test_timeout_names_the_missing_rank(np, tmp_path):
    """The last rank skips an all_reduce: every other rank raises RuntimeError within the 4 s timeout
    (plus the query of the others), naming it; the job then ends instead of hanging."""
    rc, out, took = worker(np, "timeout", env={"KILN_TEST_DIST_TIMEOUT": "4", "KILN_TEST_DIST_MEET": str(tmp_path)},
                           timeout=120)
    for r in range(np - 1):
        assert f"TIMEOUT-RAISED rank {r}" in out, out[-4000:]
        assert f"PASS timeout rank {r}" in out, out[-4000:]
    assert took < 60, f"the job took {took:.0f} s to end"


@needs_mpi
def test_rank_that_exits_ends_the_job():
    """A rank exits in the middle of training: mpirun ends the job within seconds and names it."""
    rc, out, took = worker(2, "die", timeout=120)
    assert rc != 0
    assert took < 30, f"the job took {took:.0f} s to end"
    assert "Process name: [[" in out and ",1]" in out and "Exit code:    3" in out, out[-3000:]


@needs_mpi
def test_uncaught_exception_ends_the_job(tmp_path):
    """An exception on one rank ends the job at once (the others would otherwise wait in their next
    collective until the timeout, 60 s here)."""
    script = tmp_path / "crash.py"
    script.write_text(
        "import datetime, kiln, kiln.distributed as dist\n"
        "dist.init_process_group('mpi', timeout=datetime.timedelta(seconds=60))\n"
        "if dist.get_rank() == 1:\n"
        "    raise ValueError('boom on rank 1')\n"
        "dist.all_reduce(kiln.ones(4))\n")
    rc, out, took = mpirun(2, [sys.executable, script], timeout=120)
    assert rc != 0 and "boom on rank 1" in out and "rank 1 failed with an uncaught ValueError" in out, out[-3000:]
    assert took < 30, f"the job took {took:.0f} s to end"


@needs_mpi
def test_cpp_ddp_example():
    exe = ROOT / "build" / "kiln_ddp_example"
    assert exe.exists(), "build/kiln_ddp_example is built with MPI (make build)"
    rc, out, _ = mpirun(2, [exe], timeout=120)
    assert rc == 0, out[-3000:]
    assert "rank 0 of 2: max |DDP - single process on the full batch|" in out
    assert "rank 1 of 2" in out


@needs_mpi
def test_quickstart_ddp():
    rc, out, _ = mpirun(2, [sys.executable, ROOT / "examples" / "quickstart.py", "--ddp", "--steps", "6",
                            "--batch", "8", "--context", "32", "--checkpoint", ROOT / "build" / "qs_ddp.safetensors"],
                        timeout=240)
    assert rc == 0, out[-3000:]
    assert "data-parallel on 2 ranks" in out and "trained 6 steps" in out, out[-3000:]


# ---- single process ------------------------------------------------------------------------------------------
def test_api_surface():
    assert dist.is_available() == bool(kiln._C._has_distributed)
    for name in ["init_process_group", "destroy_process_group", "is_initialized", "get_rank", "get_world_size",
                 "new_group", "barrier", "all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
                 "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "broadcast", "reduce", "gather",
                 "scatter", "send", "recv", "isend", "irecv"]:
        assert callable(getattr(dist, name)) and callable(getattr(torch.distributed, name)), name
    assert [op.name for op in dist.ReduceOp] == ["SUM", "AVG", "PRODUCT", "MIN", "MAX"]
    assert dist.ReduceOp._parse("avg") is dist.ReduceOp.AVG
    with pytest.raises(ValueError):
        dist.ReduceOp._parse("mean")


def test_not_initialized():
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="has not been initialized"):
        dist.get_rank()
    with pytest.raises(ValueError, match="has not been initialized"):
        dist.all_reduce(kiln.ones(2))
    with pytest.raises(ValueError):
        torch.distributed.get_rank()  # the same class torch raises


def test_distributed_sampler_matches_torch():
    from kiln.utils.data import DistributedSampler
    for n, reps, drop in [(10, 3, False), (10, 3, True), (7, 2, False), (2, 4, False)]:
        for r in range(reps):
            k = list(DistributedSampler(range(n), num_replicas=reps, rank=r, shuffle=False, drop_last=drop))
            t = list(torch.utils.data.DistributedSampler(range(n), num_replicas=reps, rank=r, shuffle=False,
                                                         drop_last=drop))
            assert k == t, (n, reps, drop, r)
            assert len(DistributedSampler(range(n), num_replicas=reps, rank=r, drop_last=drop)) == len(t)
    # shuffled: a permutation per epoch shared by the replicas, different between epochs
    s = [DistributedSampler(range(12), num_replicas=3, rank=r, seed=5) for r in range(3)]
    e0 = sum((list(x) for x in s), [])
    assert sorted(e0) == list(range(12))
    for x in s:
        x.set_epoch(1)
    e1 = sum((list(x) for x in s), [])
    assert sorted(e1) == list(range(12)) and e1 != e0
    with pytest.raises(ValueError, match="Invalid rank"):
        DistributedSampler(range(4), num_replicas=2, rank=2)


def test_post_accumulate_grad_hook_matches_torch():
    """The hook DDP starts its buckets from: runs after .grad was accumulated, once per backward."""
    def run(lib):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        seen = []
        h = w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.tolist()))
        (w * 3).sum().backward()
        (w * w).sum().backward()
        h.remove()
        (w * 5).sum().backward()
        return seen, w.grad.tolist()
    assert run(kiln) == run(torch)
    x = kiln.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (x * 2).register_post_accumulate_grad_hook(lambda p: None)
