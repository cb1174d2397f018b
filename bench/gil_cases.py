"""How much a second Python thread gets done while kiln (or torch) computes: the interpreter lock must be
released around kernels and during backward. Each row: a thread counting in a loop, its rate while the
main thread runs the op back to back, as a percentage of its rate alone (measured just before and just
after the case; a shared machine's speed drifts, so readings above 100 % occur). Both libraries at
1 thread, so the two Python threads do not share a core."""
import hashlib
import statistics
import threading
import time

import numpy as np
import torch

import kiln

SECONDS = 0.6


class Counter:
    def __init__(self):
        self.n = 0
        self.stop = False
        self.t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop:
            self.n += 1

    def __enter__(self):
        self.t.start()
        time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.stop = True
        self.t.join()


def _rate_during(fn):
    fn()  # warm-up (allocations, first-touch)
    with Counter() as c:
        t0, n0 = time.perf_counter(), c.n
        while time.perf_counter() - t0 < SECONDS:
            fn()
        t1, n1 = time.perf_counter(), c.n
    return (n1 - n0) / (t1 - t0)


def _free_rate():
    with Counter() as c:
        t0, n0 = time.perf_counter(), c.n
        time.sleep(SECONDS)
        return (c.n - n0) / (time.perf_counter() - t0)


def _cases(lib):
    rng = np.random.default_rng(0)
    a = lib.from_numpy(rng.standard_normal((2048, 2048), dtype=np.float32))
    v = lib.from_numpy(rng.standard_normal(1 << 24, dtype=np.float32))
    s = lib.from_numpy(rng.standard_normal(1 << 22, dtype=np.float32))
    w = lib.from_numpy(rng.standard_normal((1024, 1024), dtype=np.float32)).requires_grad_(True)
    x = lib.from_numpy(rng.standard_normal((512, 1024), dtype=np.float32))

    def backward():
        loss = (lib.tanh(x @ w) @ w).sum()
        loss.backward()

    return [
        ("matmul f32 2048^3", lambda: a @ a),
        ("mul f32 16M", lambda: v * v),
        ("sort f32 4M", lambda: lib.sort(s)),
        ("randn f32 20M", lambda: lib.randn(20_000_000)),
        ("backward (512x1024 @ 1024x1024, tanh, twice)", backward),
    ]


def _share(fn):
    """The counter's rate during fn, as a fraction of its free rate measured just before and just after:
    the machine's speed for Python threads drifts (on a 2-vCPU VM it tripled a few seconds into a run),
    so each case is normalised by its own neighbourhood."""
    before = _free_rate()
    during = _rate_during(fn)
    after = _free_rate()
    return during / statistics.mean((before, after))


def gil_rows():
    """Markdown rows: case | kiln % | torch %."""
    kiln.set_num_threads(1)
    torch.set_num_threads(1)
    # every kiln case first, then every torch case, so that neither library's rows run in a process
    # state the other left
    per_lib = []
    for lib in (kiln, torch):
        cases = _cases(lib)
        per_lib.append([(name, _share(fn)) for name, fn in cases])
        del cases
    rows = [f"| GIL: second thread during {name} | 1 | {k * 100:.0f} % | {t * 100:.0f} % |"
            for (name, k), (_, t) in zip(*per_lib)]
    # the machine's ceiling: CPython's own hashing releases the lock for large buffers, so what the
    # counter gets here is what two busy threads on this machine get (shared cores, frequency)
    buf = bytes(64 << 20)
    control = _share(lambda: hashlib.sha256(buf).digest())
    # and for the streaming rows: numpy's own multiply (one thread, the lock released) of the same size
    v = np.random.default_rng(0).standard_normal(1 << 24, dtype=np.float32)
    o = np.empty_like(v)
    np_mul = _share(lambda: np.multiply(v, v, out=o))
    return rows + [f"| GIL control: second thread during hashlib.sha256 of 64 MB (no kiln, no torch; "
                   f"CPython releases the lock) | 1 | {control * 100:.0f} % | - |",
                   f"| GIL control: second thread during numpy.multiply f32 16M (one thread, lock released) "
                   f"| 1 | {np_mul * 100:.0f} % | - |"]


HEADER = ["| case | threads | kiln: counter thread's rate (of its free rate) | torch |", "| --- | --- | ---: | ---: |"]

if __name__ == "__main__":
    print("\n".join(HEADER + gil_rows()))
