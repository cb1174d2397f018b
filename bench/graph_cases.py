"""The same step run eagerly, replayed from a capture (kiln.Graph; issue 17) and through kiln.compile,
one thread, against torch eager and torch.compile(mode="reduce-overhead") (Inductor's generated C++
on this CPU; CUDA graphs do not apply). Median time per step of 7 batches of calls; speed-up =
eager / replay. A training step is forward, backward and AdamW's step: the replay captures all of
it, kiln.compile and torch.compile compile the model (forward and backward) and leave the loss,
backward call and AdamW eager. torch.compile's compile time is not in its column. Arena: the
replay's planned intermediates; eager peak: what one eager step allocates at most above what it
started with (kiln's allocator statistics)."""
import statistics
import sys
import time

import numpy as np
import torch

import kiln
from one_thread import one_thread

HEADER = ["| case | kiln eager | kiln replay | replay speed-up | kiln.compile | torch eager | torch.compile | "
          "replay vs torch eager | replay vs torch.compile | arena / eager peak |",
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]


def _per_call(fn, budget=0.25):
    fn()
    n, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t = time.perf_counter() - t0
        if t > budget / 7:
            break
        n *= 2
    runs = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - t0) / n)
    return statistics.median(runs)


def _copy_weights(km, tm):
    tm.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy()) for k, v in km.state_dict().items()})
    return tm


def _mlp(lib):
    return lib.nn.Sequential(lib.nn.Linear(256, 256), lib.nn.ReLU(), lib.nn.Linear(256, 256), lib.nn.ReLU(),
                             lib.nn.Linear(256, 256))


def _quickstart_models():
    """The quickstart's CharTransformer in kiln, and the same classes run on torch (their source
    executed with kiln's names bound to torch's), with kiln's weights."""
    import importlib.util
    import inspect
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "quickstart.py"
    spec = importlib.util.spec_from_file_location("quickstart_bench", path)
    qs = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = qs  # inspect finds a class's source through its module
    spec.loader.exec_module(qs)
    ns = {"kiln": torch, "nn": torch.nn, "F": torch.nn.functional}
    for cls in (qs.Block, qs.CharTransformer):
        exec(inspect.getsource(cls), ns)
    kiln.manual_seed(0)
    km = qs.CharTransformer(96, 128)
    return km, _copy_weights(km, ns["CharTransformer"](96, 128))


def _cases():
    """(name, kiln step, torch step, no_grad, kiln compiled step, torch compiled step)."""
    rng = np.random.default_rng(0)
    x256 = rng.standard_normal((1, 256), dtype=np.float32)
    out = []

    km = _mlp(kiln)
    tm = _copy_weights(km, _mlp(torch))
    kx, tx = kiln.tensor(x256), torch.from_numpy(x256)
    ckm, ctm = kiln.compile(km), torch.compile(tm, mode="reduce-overhead")
    out.append(("MLP 3x256, batch 1, forward", lambda: km(kx), lambda: tm(tx), True, lambda: ckm(kx),
                lambda: ctm(tx)))

    kl, tl = kiln.nn.LSTM(256, 256, num_layers=2), None
    tl = _copy_weights(kl, torch.nn.LSTM(256, 256, num_layers=2))
    kx1, kh, kc = kiln.tensor(x256.reshape(1, 1, 256)), kiln.zeros(2, 1, 256), kiln.zeros(2, 1, 256)
    tx1, th, tc = torch.from_numpy(x256.reshape(1, 1, 256)), torch.zeros(2, 1, 256), torch.zeros(2, 1, 256)
    ckl, ctl = kiln.compile(kl), torch.compile(tl, mode="reduce-overhead")
    out.append(("LSTM 2x256 decode step (batch 1)", lambda: kl(kx1, (kh, kc)), lambda: tl(tx1, (th, tc)), True,
                lambda: ckl(kx1, (kh, kc)), lambda: ctl(tx1, (th, tc))))

    kb = kiln.nn.TransformerEncoderLayer(256, 4, 512, batch_first=True).eval()
    tb = _copy_weights(kb, torch.nn.TransformerEncoderLayer(256, 4, 512, batch_first=True).eval())
    seq = rng.standard_normal((1, 16, 256), dtype=np.float32)
    ks, ts = kiln.tensor(seq), torch.from_numpy(seq)
    ckb, ctb = kiln.compile(kb), torch.compile(tb, mode="reduce-overhead")
    out.append(("transformer block d=256, batch 1, 16 tokens", lambda: kb(ks), lambda: tb(ts), True,
                lambda: ckb(ks), lambda: ctb(ts)))

    def train(lib, model, x, y, loss_fn, fwd=None):
        opt = lib.optim.AdamW(model.parameters(), lr=1e-3)
        fwd = model if fwd is None else fwd

        def step():
            opt.zero_grad(set_to_none=False)
            loss = loss_fn(fwd(x), y)
            loss.backward()
            opt.step()
        step()  # gradients and optimiser state exist before the capture
        return step

    def mse(lib):
        return lambda out, y: (out - y).pow(2).mean()

    def build_mlp(lib):
        return lib.nn.Sequential(lib.nn.Linear(64, 64), lib.nn.Tanh(), lib.nn.Linear(64, 1))
    xb = rng.standard_normal((8, 64), dtype=np.float32)
    yb = rng.standard_normal((8, 1), dtype=np.float32)
    models = []
    for _ in range(2):  # one pair for the eager and captured steps, one for the compiled ones
        kt = build_mlp(kiln)
        models.append((kt, _copy_weights(kt, build_mlp(torch))))
    (kt, tt), (kt2, tt2) = models
    kxb, kyb, txb, tyb = kiln.tensor(xb), kiln.tensor(yb), torch.from_numpy(xb), torch.from_numpy(yb)
    out.append(("train step MLP 64-64-1, batch 8 (fwd, bwd, AdamW)",
                train(kiln, kt, kxb, kyb, mse(kiln)), train(torch, tt, txb, tyb, mse(torch)), False,
                train(kiln, kt2, kxb, kyb, mse(kiln), kiln.compile(kt2)),
                train(torch, tt2, txb, tyb, mse(torch), torch.compile(tt2, mode="reduce-overhead"))))

    (kq, tq), (kq2, tq2) = _quickstart_models(), _quickstart_models()
    idx = rng.integers(0, 96, (8, 129))
    kin, kout = kiln.tensor(idx[:, :-1]), kiln.tensor(idx[:, 1:])
    tin, tout = torch.from_numpy(idx[:, :-1]), torch.from_numpy(idx[:, 1:])

    def ce(lib):
        return lambda logits, y: lib.nn.functional.cross_entropy(logits.reshape(-1, 96), y.reshape(-1))
    out.append(("quickstart train step (4x192 transformer, batch 8 x 128 tokens)",
                train(kiln, kq, kin, kout, ce(kiln)), train(torch, tq, tin, tout, ce(torch)), False,
                train(kiln, kq2, kin, kout, ce(kiln), kiln.compile(kq2)),
                train(torch, tq2, tin, tout, ce(torch), torch.compile(tq2, mode="reduce-overhead"))))
    return out


def graph_rows():
    us = lambda s: f"{s * 1e6:.1f} us" if s < 1e-2 else f"{s * 1e3:.1f} ms"  # noqa: E731
    kib = lambda b: f"{b / 1024:.0f} KiB" if b < 1 << 20 else f"{b / (1 << 20):.1f} MiB"  # noqa: E731
    rows = []
    with one_thread():
        for name, kfn, tfn, no_grad, kcomp, tcomp in _cases():
            with kiln.no_grad() if no_grad else kiln.enable_grad():
                eager = _per_call(kfn)
                base = kiln.memory_stats()["allocated_bytes.all.current"]
                kiln.reset_peak_memory_stats()
                kfn()
                peak = kiln.memory_stats()["allocated_bytes.all.peak"] - base
                g = kiln.Graph()
                with kiln.graph(g):
                    kfn()
                replay = _per_call(g.replay)
                for _ in range(2):  # the capture, then a replay
                    kcomp()
                compiled = _per_call(kcomp)
            with torch.no_grad() if no_grad else torch.enable_grad():
                teager = _per_call(tfn)
                for _ in range(3):  # Inductor compiles on the first calls
                    tcomp()
                tcompiled = _per_call(tcomp)
            rows.append(f"| graph: {name} | {us(eager)} | {us(replay)} | {eager / replay:.2f}x | {us(compiled)} | "
                        f"{us(teager)} | {us(tcompiled)} | {teager / replay:.2f}x | {tcompiled / replay:.2f}x | "
                        f"{kib(g.arena_bytes)} / {kib(peak)} |")
    return rows


if __name__ == "__main__":
    print("\n".join(HEADER + graph_rows()))
