"""Distributed rows of `make bench`, run under `mpirun -np 2` by bench.py (rank 0 prints markdown rows).

1. all_reduce of float32 from 1 KB to 256 MB: kiln's dist.all_reduce (default: with the cross-rank
   consistency check; and with it off) against a plain C loop over MPI_Allreduce in the same processes
   (kiln::distributed::bench_raw_allreduce). busbw = algbw * 2(n-1)/n, algbw = bytes / time.
2. The quickstart model under DDP (each rank half the batch, 1 thread each): step time, and backward
   with and without communication (no_sync), which shows how much of the all_reduce is hidden.

    mpirun -np 2 python bench/dist_cases.py [--quick]
    python bench/dist_cases.py --single [--quick]    (the 1-rank row: the same model, whole batch, 2 threads)
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import kiln  # noqa: E402
import kiln.distributed as dist  # noqa: E402


def fmt_t(s):
    return f"{s * 1e6:.1f} µs" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def iters_for(nbytes):
    return max(3, min(2000, int(2e8 / max(nbytes, 1)) // 8))


def kiln_seconds(t, iters):
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    return (time.perf_counter() - t0) / iters


def allreduce_rows(quick):
    n = dist.get_world_size()
    sizes = [1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 22, 1 << 24] + ([] if quick else [1 << 26, 1 << 28])
    rows = []
    for nbytes in sizes:
        it = iters_for(nbytes)
        t = kiln.zeros(nbytes // 4)
        raw, kl, kl_nc = [], [], []
        for _ in range(3 if quick else 5):  # interleaved repeats, medians
            raw.append(kiln._C._dist_bench_raw_allreduce(nbytes, it))
            kiln._C._dist_set_checks(True)
            kl.append(kiln_seconds(t, it))
            kiln._C._dist_set_checks(False)
            kl_nc.append(kiln_seconds(t, it))
        kiln._C._dist_set_checks(True)
        r, k, kn = statistics.median(raw), statistics.median(kl), statistics.median(kl_nc)
        bus = lambda s: nbytes / s * 2 * (n - 1) / n / 1e9  # noqa: E731
        size = f"{nbytes >> 20} MB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KB"
        rows.append(f"| all_reduce f32 {size} | {n} ranks | {fmt_t(r)} | {fmt_t(k)} | {fmt_t(kn)} | "
                    f"{bus(r):.2f} / {bus(k):.2f} / {bus(kn):.2f} | {r / k:.2f} | {r / kn:.2f} |")
        del t
    return rows


def single_row(quick):
    """One process, the whole batch, as many threads as the 2 ranks have together."""
    import quickstart as q
    threads = os.cpu_count() or 1
    kiln.set_num_threads(threads)
    batch, context = 16, 128
    kiln.manual_seed(0)
    data = q.CharData(q.load_corpus())
    model = q.CharTransformer(len(data.chars), context)
    opt = kiln.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        x, y = data.batch("train", batch, context)
        t0 = time.perf_counter()
        loss = q.loss_fn(model, x, y)
        opt.zero_grad()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        return time.perf_counter() - t0, t2 - t1

    for _ in range(2):
        step()
    runs = [step() for _ in range(4 if quick else 10)]
    st = statistics.median(s for s, _ in runs)
    bw = statistics.median(b for _, b in runs)
    return (f"| quickstart, no DDP (batch {batch}x{context}) | 1 process x {threads} threads, {batch} seq | "
            f"step {fmt_t(st)} | backward {fmt_t(bw)} |")


def ddp_rows(quick):
    import quickstart as q
    n, rank = dist.get_world_size(), dist.get_rank()
    kiln.set_num_threads(1)
    batch, context = 16, 128
    kiln.manual_seed(0)
    data = q.CharData(q.load_corpus())
    model = q.CharTransformer(len(data.chars), context)
    ddp = kiln.nn.parallel.DistributedDataParallel(model)
    opt = kiln.optim.AdamW(model.parameters(), lr=1e-3)
    kiln.manual_seed(1 + rank)

    def step(sync):
        x, y = data.batch("train", batch // n, context)
        t0 = time.perf_counter()
        if sync:
            loss = q.loss_fn(ddp, x, y)
        else:
            with ddp.no_sync():
                loss = q.loss_fn(ddp, x, y)
        t1 = time.perf_counter()
        opt.zero_grad()
        if sync:
            loss.backward()
        else:
            with ddp.no_sync():
                loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        return t3 - t0, t2 - t1

    for _ in range(2):
        step(True)
    reps = 4 if quick else 10
    synced = [step(True) for _ in range(reps)]
    local = [step(False) for _ in range(reps)]
    dist.barrier()
    st = statistics.median(s for s, _ in synced)
    bw = statistics.median(b for _, b in synced)
    bl = statistics.median(b for _, b in local)
    wait = ddp.reducer.last_wait_seconds()
    nparam = sum(p.numel() for p in model.parameters())
    return [f"| DDP quickstart ({nparam / 1e6:.2f} M params, batch {batch}x{context}) | {n} ranks x 1 thread, "
            f"{batch // n} seq/rank | step {fmt_t(st)} | backward {fmt_t(bw)} with all_reduce, {fmt_t(bl)} without "
            f"(no_sync); last wait after backward {fmt_t(wait)} |"]


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    if "--single" in sys.argv:
        print(single_row(quick), flush=True)
        sys.exit(0)
    dist.init_process_group("mpi")
    rows = allreduce_rows(quick)
    rows += ddp_rows(quick)
    if dist.get_rank() == 0:
        for r in rows:
            print(r, flush=True)
    dist.destroy_process_group()
