"""Overlap of independent work (kiln and torch at one thread per stream). Prefetch: a batch
is prepared (12 pointwise ops over 4M float32 elements) while the model runs on the default stream
(20 float32 matmuls of 512^2) - sequentially, then with the preparation issued on a side stream first
and joined with wait_stream. Two chains: two independent chains of pointwise ops (40 x mul, exp, tanh
over 256K elements) one after the other, then each on its own stream. torch 2.13's CPU streams run
work at once, so its stream time is its sequential time. Median of 5 runs; speed-up = sequential /
streams (ideal: 2.0 for equal halves on two free cores)."""
import statistics
import time

import numpy as np
import torch

import kiln
from one_thread import one_thread

HEADER = ["| case | kiln sequential | kiln streams | kiln speed-up | torch sequential | torch streams "
          "| torch speed-up |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]


def _timed(fn, runs=5):
    fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def _prefetch(lib, stream_ctx):
    rng = np.random.default_rng(0)
    raw = lib.from_numpy(rng.integers(0, 255, 1 << 22, dtype=np.uint8))
    w = lib.from_numpy(rng.standard_normal((512, 512), dtype=np.float32) * 0.05)
    x0 = lib.from_numpy(rng.standard_normal((512, 512), dtype=np.float32))

    def prepare():
        x = raw.float().mul(1 / 255).sub(0.5).mul(2.0)
        x = x.sub(x.mean()).div(x.std() + 1e-5)  # reads on the host would wait: kept as tensors
        for _ in range(3):
            x = x.tanh().mul(1.5).add(0.1)
        return x

    def model():
        y = x0
        for _ in range(20):
            y = (y @ w).tanh()
        return y

    def sequential():
        prepare()
        model()

    side = lib.Stream()

    def streams():
        with stream_ctx(side):
            batch = prepare()
        y = model()
        (torch.cpu if lib is torch else kiln).current_stream().wait_stream(side)
        side.synchronize()
        return batch, y

    return _timed(sequential), _timed(streams)


def _two_chains(lib, stream_ctx):
    rng = np.random.default_rng(0)
    xs = [lib.from_numpy(rng.standard_normal(1 << 18, dtype=np.float32) * 0.05) for _ in range(4)]

    def chain(a, b):
        for _ in range(40):
            a = (a * b).exp().tanh()
        return a

    def sequential():
        chain(xs[0], xs[1])
        chain(xs[2], xs[3])

    s1, s2 = lib.Stream(), lib.Stream()

    def streams():
        with stream_ctx(s1):
            chain(xs[0], xs[1])
        with stream_ctx(s2):
            chain(xs[2], xs[3])
        s1.synchronize()
        s2.synchronize()

    return _timed(sequential), _timed(streams)


def stream_rows():
    ms = lambda s: f"{s * 1e3:.1f} ms"  # noqa: E731
    rows = []
    with one_thread():
        for name, case in (("prefetch: prepare 4M on a side stream, 20 matmul 512^2 on the default", _prefetch),
                           ("two chains x 40 (mul, exp, tanh) f32 256K, one stream each", _two_chains)):
            ks, kp = case(kiln, kiln.stream)
            ts, tp = case(torch, lambda s: s)
            rows.append(f"| streams: {name} | {ms(ks)} | {ms(kp)} | {ks / kp:.2f}x | {ms(ts)} | {ms(tp)} | "
                        f"{ts / tp:.2f}x |")
    return rows


if __name__ == "__main__":
    print("\n".join(HEADER + stream_rows()))
