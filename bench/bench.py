"""kiln vs torch benchmark runner (`make bench`).

Both libraries run in this one process on the same input data (made with numpy, then converted with
`from_numpy`, separate buffers per library) and the same thread count. Each case is warmed up, then
kiln and torch samples alternate (order flipped every repeat) and the median per-call time is kept.

    python3 bench/bench.py [--quick] [--filter SUBSTR] [--threads 1,2] [--markdown PATH]

ratio = torch time / kiln time: above 1 means kiln is faster.
"""
import argparse
import gc
import importlib
import os
import platform
import shutil
import statistics
import sys
import time

# torch ships its own OpenMP runtime, so this process holds two thread pools. Busy-waiting workers of
# one pool steal the cores the other needs (10x slow-downs at 2 threads on a 2-core machine), so both
# libraries are measured with passive waiting: the same setting for both, set before either loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# numpy's own OpenBLAS (it makes some inputs) keeps its pthread workers spinning for a while after
# each product, on the cores the cases are then timed on: it runs on one thread. kiln gives its
# OpenBLAS the case's count itself.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kiln  # noqa: E402

DTYPES = {"f32": (kiln.float32, torch.float32, 4), "f16": (kiln.float16, torch.float16, 2),
          "bf16": (kiln.bfloat16, torch.bfloat16, 2)}
SAMPLE_S = 2e-3  # each timed sample runs the op enough times to take at least this long
MAX_REPEATS = 200
SLOW_S = 2.0  # one call slower than this is timed once (its warm-up call) instead of median-of-3


class Case:
    """One benchmark: `setup()` returns (kiln_fn, torch_fn), no-argument callables on the same data;
    `work` is FLOPs or bytes per call, `unit` its rate unit (None: time only)."""

    def __init__(self, name, setup, work=None, unit=None, note=None):
        self.name, self.setup, self.work, self.unit, self.note = name, setup, work, unit, note


def inputs(shapes, tag, seed=0):
    """Same random data for both libraries, converted to the case dtype after from_numpy."""
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    kd, td, _ = DTYPES[tag]
    ks = [kiln.from_numpy(a.copy()).to(kd) for a in arrs]
    ts = [torch.from_numpy(a.copy()).to(td) for a in arrs]
    return ks, ts


def make_setup(shapes, tag, kfn, tfn):
    def setup():
        (ks, ts) = inputs(shapes, tag)
        return (lambda: kfn(*ks)), (lambda: tfn(*ts))
    return setup


def human(n):
    for div, suf in ((1 << 20, "M"), (1 << 10, "K")):
        if n >= div and n % div == 0:
            return f"{n // div}{suf}"
    return str(n)


def build_cases(quick):
    cases = []
    sizes = [1 << 10, 1 << 20] if quick else [1 << 10, 1 << 20, 1 << 24]
    pointwise = [("add", kiln.add, torch.add, 2), ("mul", kiln.mul, torch.mul, 2),
                 ("exp", kiln.exp, torch.exp, 1), ("gelu", kiln.gelu, torch.nn.functional.gelu, 1)]
    for name, kf, tf, nin in pointwise:
        for tag in ("f32", "bf16"):
            for n in sizes:
                nbytes = (nin + 1) * n * DTYPES[tag][2]
                cases.append(Case(f"{name} {tag} {human(n)}",
                                  make_setup([(n,)] * nin, tag, kf, tf), nbytes, "GB/s"))
    rows = 1024 if quick else 4096
    shape = (rows, rows)
    for dim in (-1, 0):
        reds = [("sum", lambda x, d=dim: kiln.sum(x, dim=d), lambda x, d=dim: torch.sum(x, dim=d), False),
                ("amax", lambda x, d=dim: kiln.amax(x, dim=d), lambda x, d=dim: torch.amax(x, dim=d), False),
                ("softmax", lambda x, d=dim: kiln.softmax(x, dim=d),
                 lambda x, d=dim: torch.softmax(x, dim=d), True)]
        for name, kf, tf, full_out in reds:
            nbytes = rows * rows * 4 + (rows * rows * 4 if full_out else rows * 4)
            cases.append(Case(f"{name} f32 {rows}x{rows} dim={dim}",
                              make_setup([shape], "f32", kf, tf), nbytes, "GB/s"))
    for tag in ("f32", "bf16"):  # a transposed copy: x.t().contiguous()
        cases.append(Case(f"transpose copy {tag} {rows}x{rows} (x.t().contiguous())",
                          make_setup([shape], tag, lambda x: x.t().contiguous(), lambda x: x.t().contiguous()),
                          2 * rows * rows * DTYPES[tag][2], "GB/s"))
    n = 1 << 20  # dtype conversions (x.to(dtype)): float16 on F16C, bfloat16 by shifts
    for src, dst in (("f32", "f16"), ("f16", "f32"), ("f32", "bf16"), ("bf16", "f32")):
        kd, td = DTYPES[dst][0], DTYPES[dst][1]
        cases.append(Case(f"cast {src}->{dst} {human(n)}",
                          make_setup([(n,)], src, lambda x, kd=kd: x.to(kd), lambda x, td=td: x.to(td)),
                          n * (DTYPES[src][2] + DTYPES[dst][2]), "GB/s"))
    from gemm_cases import gemm_cases
    cases += gemm_cases(Case, quick)
    n = 1 << 20 if quick else 20_000_000
    cases.append(Case(f"randn f32 {human(n) if quick else '20M'}",
                      lambda n=n: ((lambda: kiln.randn(n)), (lambda: torch.randn(n))), 4 * n, "GB/s"))
    cases.append(Case("overhead: add f32 1-elem (time/call)",
                      make_setup([(1,), (1,)], "f32", kiln.add, torch.add)))
    from train_cases import train_cases
    cases += train_cases(Case, quick)
    from linalg_cases import linalg_cases
    cases += linalg_cases(Case, quick)
    from flex_cases import flex_cases
    cases += flex_cases(Case, quick)
    from export_cases import export_cases
    cases += export_cases(Case, quick)
    from fft_cases import fft_cases
    cases += fft_cases(Case, quick)
    from distributions_cases import distributions_cases
    cases += distributions_cases(Case, quick)
    from func_cases import func_cases
    cases += func_cases(Case, quick)
    return cases


def sample(fn, inner):
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def calibrate(fn):
    """Warm up, then return (seconds per call, calls per timed sample). A call slower than SLOW_S
    returns (its time, 0): that one warm-up call is the whole measurement."""
    first = sample(fn, 1)
    if first > SLOW_S:
        return first, 0
    n = 1
    while True:
        dt = sample(fn, n) * n
        if dt >= SAMPLE_S or n >= 1 << 16:
            return dt / n, max(1, int(np.ceil(SAMPLE_S * n / max(dt, 1e-9))))
        n *= 4


def measure(kfn, tfn, kcal, tcal, budget):
    """Median per-call seconds for kiln and torch, samples interleaved (order flipped every repeat).
    Returns (kiln_s, torch_s, kiln_single, torch_single)."""
    (kt, kin), (tt, tin) = kcal, tcal
    ks, ts = ([] if kin else [kt]), ([] if tin else [tt])
    live = [(f, n, out) for f, n, out in ((kfn, kin, ks), (tfn, tin, ts)) if n]
    slowest = max([kt * kin, tt * tin])
    repeats = int(min(MAX_REPEATS, max(3, budget / slowest))) if live else 0
    gc.disable()
    try:
        for i in range(repeats):
            for f, n, out in (live if i % 2 == 0 else live[::-1]):
                out.append(sample(f, n))
    finally:
        gc.enable()
    return statistics.median(ks), statistics.median(ts), not kin, not tin


def fmt_time(s):
    if s < 1e-3:
        return f"{s * 1e6:.2f} us"
    if s < 1:
        return f"{s * 1e3:.3f} ms"
    return f"{s:.3f} s"


def fmt_rate(case, s):
    if case.work is None:
        return "-"
    return f"{case.work / s / 1e9:.1f} {case.unit}"


def short_error(e):
    text = f"{type(e).__name__}: {e}".replace("|", "/").replace("\n", " ")
    return text if len(text) <= 140 else text[:137] + "..."


def run_case(case, threads, budget):
    """One markdown row; an exception from either library is shown in the row instead."""
    kiln.set_num_threads(threads)
    torch.set_num_threads(threads)
    try:
        kfn, tfn = case.setup()
    except Exception as e:  # noqa: BLE001 - a failed case must not stop the run
        return [case.name, str(threads), "setup failed: " + short_error(e), "", "", "", ""]
    cals, errors = [], []
    for lib, fn in (("kiln", kfn), ("torch", tfn)):
        try:
            cals.append(calibrate(fn))  # also the warm-up, and the first error check
        except Exception as e:  # noqa: BLE001
            errors.append(f"{lib} failed: {short_error(e)}")
    if errors:
        return [case.name, str(threads), "; ".join(errors), "", "", "", ""]
    try:
        k, t, k1, t1 = measure(kfn, tfn, *cals, budget)
    except Exception as e:  # noqa: BLE001
        return [case.name, str(threads), "failed while timing: " + short_error(e), "", "", "", ""]
    krate = fmt_rate(case, k)
    if case.note is not None:
        try:
            krate = (krate + "; " if krate != "-" else "") + case.note()
        except Exception as e:  # noqa: BLE001
            krate += "; note failed: " + short_error(e)
    return [case.name, str(threads), fmt_time(k) + "*" * k1, fmt_time(t) + "*" * t1, f"{t / k:.2f}",
            krate, fmt_rate(case, t)]


def cpu_name():
    """The CPU's model name and family/model numbers (from /proc/cpuinfo), else the machine type."""
    try:
        info = dict(line.split(":", 1) for line in open("/proc/cpuinfo").read().split("\n\n")[0].splitlines()
                    if ":" in line)
        info = {k.strip(): v.strip() for k, v in info.items()}
        return f"{info['model name']} (family {info['cpu family']} model {info['model']})"
    except (OSError, KeyError, ValueError):
        return platform.machine()


HEADER = ["case", "threads", "kiln", "torch", "ratio (torch/kiln)", "kiln rate", "torch rate"]


def md_row(cells):
    return "| " + " | ".join(cells) + " |"


def distributed_section(quick):
    """bench/dist_cases.py: under mpirun -np 2 (TCP on loopback, as the tests), then the 1-rank row."""
    import subprocess  # noqa: E402
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_base_warn_component_unused="0")
    q = ["--quick"] if quick else []
    section = ["", "Distributed (bench/dist_cases.py; Open MPI, 2 ranks on this machine, TCP over loopback): "
               "all_reduce against a plain C loop over MPI_Allreduce in the same processes; busbw = "
               "algbw * 2(n-1)/n in GB/s (raw / kiln / kiln without the consistency check); ratio = raw time / "
               "kiln time (> 1: kiln faster).", "",
               "| case | ranks | raw MPI | kiln | kiln, checks off | busbw GB/s | ratio | ratio, checks off |",
               "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for line in section:
        print(line, flush=True)
    cmd = ["mpirun", "-np", "2", "--oversubscribe", "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo",
           "--mca", "oob_tcp_if_include", "lo", sys.executable, os.path.join(here, "dist_cases.py")] + q
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    single = subprocess.run([sys.executable, os.path.join(here, "dist_cases.py"), "--single"] + q,
                            capture_output=True, text=True, env=env, timeout=1800)
    rows = [r for r in out.stdout.splitlines() if r.startswith("| all_reduce")]
    if out.returncode != 0:
        rows.append(f"| distributed bench failed (exit {out.returncode}) | | | | | | | |")
    rows += ["", "| DDP step | layout | step | backward |", "| --- | --- | --- | --- |"]
    rows += [r for r in out.stdout.splitlines() if r.startswith("| DDP")]
    rows += [r for r in single.stdout.splitlines() if r.startswith("|")]
    for line in rows:
        print(line, flush=True)
    return section + rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer and smaller cases, short timing budget")
    ap.add_argument("--filter", default="", help="only cases whose name contains this substring")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--markdown", metavar="PATH", help="also write the table to this file")
    ap.add_argument("--budget", type=float, default=None,
                    help="target seconds of timing per case per library (default 0.3, quick 0.05)")
    args = ap.parse_args()
    threads = [int(x) for x in args.threads.split(",") if x.strip()]
    budget = args.budget if args.budget is not None else (0.05 if args.quick else 0.3)
    cases = [c for c in build_cases(args.quick) if args.filter in c.name]
    gil = not args.filter or "gil" in args.filter.lower()  # the GIL section (bench/gil_cases.py)
    streams = not args.filter or "stream" in args.filter.lower()  # bench/stream_cases.py
    graphs = not args.filter or "graph" in args.filter.lower()  # bench/graph_cases.py
    distributed = not args.filter or "dist" in args.filter  # bench/dist_cases.py under mpirun
    if not cases and not gil and not distributed and not streams and not graphs:
        sys.exit(f"no case matches --filter {args.filter!r}")

    preamble = [
        f"kiln {kiln.__version__} vs torch {torch.__version__}, numpy {np.__version__}, "
        f"Python {platform.python_version()}, {cpu_name()}, {os.cpu_count()} CPUs, kiln kernels: "
        f"{kiln._C.cpu_isa()}{' + AVX512-BF16 GEMM' if kiln._C.cpu_bf16_dot() else ''}"
        f"{' + AMX-BF16 tiles' if kiln._C.cpu_amx() else ''}"
        + f", load average {os.getloadavg()[0]:.2f} at start" + (", --quick" if args.quick else ""),
        "",
        "Median time per call; ratio = torch time / kiln time (> 1 means kiln is faster). "
        "Rates: GFLOP/s for matmul, GB/s (bytes read + written) for pointwise ops and reductions. "
        f"* = a single call (slower than {SLOW_S:g} s), not a median.",
        "",
    ]
    lines = preamble + [md_row(HEADER), md_row(["---"] * 2 + ["---:"] * 5)]
    for line in lines:
        print(line, flush=True)
    for threads_n in threads:
        for case in cases:
            line = md_row(run_case(case, threads_n, budget))
            print(line, flush=True)
            lines.append(line)
    cpp = os.path.join(os.environ.get("KILN_BUILD", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build")),
                       "kiln_bench_overhead")
    if (not args.filter or "overhead" in args.filter) and os.path.exists(cpp):
        import subprocess  # noqa: E402
        section = ["", "C++ per-op overhead (bench/cpp/overhead.cpp, 1 thread): median time of one call on "
                   "tiny tensors through kiln's C++ API.", "", "| case | threads | kiln (C++) |", "| --- | --- | ---: |"]
        out = subprocess.run([cpp], capture_output=True, text=True, check=True).stdout
        section += [f"| overhead (C++): {name} | 1 | {float(ns):.0f} ns |"
                    for name, ns in (line.split("\t") for line in out.strip().splitlines())]
        for line in section:
            print(line, flush=True)
        lines += section
    if distributed and kiln.distributed.is_available() and shutil.which("mpirun"):
        section = distributed_section(args.quick)
        lines += section
    # the sections with tables of their own: (switch, title, module, its rows function)
    for on, title, module, rows_fn in ((gil, "Interpreter lock", "gil_cases", "gil_rows"),
                                        (streams, "Streams", "stream_cases", "stream_rows"),
                                        (graphs, "Graphs", "graph_cases", "graph_rows")):
        if not on:
            continue
        mod = importlib.import_module(module)
        section = ["", f"{title}: " + mod.__doc__.replace("\n", " ").strip(), ""] + mod.HEADER
        for line in section:
            print(line, flush=True)
        rows = getattr(mod, rows_fn)()
        for line in rows:
            print(line, flush=True)
        lines += section + rows
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
