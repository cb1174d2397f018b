"""The same step run eagerly and replayed from a capture (kiln.Graph; issue 17), one thread,
against torch eager. Median time per step of 7 batches of calls; speed-up =
eager / replay. The training step is forward, backward and AdamW's step. torch.compile(mode=
"reduce-overhead") is not measured here yet."""
import statistics
import time

import numpy as np
import torch

import kiln
from one_thread import one_thread

HEADER = ["| case | kiln eager | kiln replay | replay speed-up | torch eager | replay vs torch |",
          "| --- | ---: | ---: | ---: | ---: | ---: |"]


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


def _cases():
    rng = np.random.default_rng(0)
    x256 = rng.standard_normal((1, 256), dtype=np.float32)
    out = []

    km = _mlp(kiln)
    tm = _copy_weights(km, _mlp(torch))
    kx, tx = kiln.tensor(x256), torch.from_numpy(x256)
    out.append(("MLP 3x256, batch 1, forward", lambda: km(kx), lambda: tm(tx), True))

    kl, tl = kiln.nn.LSTM(256, 256, num_layers=2), None
    tl = _copy_weights(kl, torch.nn.LSTM(256, 256, num_layers=2))
    kx1, kh, kc = kiln.tensor(x256.reshape(1, 1, 256)), kiln.zeros(2, 1, 256), kiln.zeros(2, 1, 256)
    tx1, th, tc = torch.from_numpy(x256.reshape(1, 1, 256)), torch.zeros(2, 1, 256), torch.zeros(2, 1, 256)
    out.append(("LSTM 2x256 decode step (batch 1)", lambda: kl(kx1, (kh, kc)), lambda: tl(tx1, (th, tc)), True))

    kb = kiln.nn.TransformerEncoderLayer(256, 4, 512, batch_first=True).eval()
    tb = _copy_weights(kb, torch.nn.TransformerEncoderLayer(256, 4, 512, batch_first=True).eval())
    seq = rng.standard_normal((1, 16, 256), dtype=np.float32)
    ks, ts = kiln.tensor(seq), torch.from_numpy(seq)
    out.append(("transformer block d=256, batch 1, 16 tokens", lambda: kb(ks), lambda: tb(ts), True))

    def train(lib, model, x, y):
        opt = lib.optim.AdamW(model.parameters(), lr=1e-3)

        def step():
            opt.zero_grad(set_to_none=False)
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
        step()  # gradients and optimiser state exist before the capture
        return step
    kt = kiln.nn.Sequential(kiln.nn.Linear(64, 64), kiln.nn.Tanh(), kiln.nn.Linear(64, 1))
    tt = _copy_weights(kt, torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1)))
    xb = rng.standard_normal((8, 64), dtype=np.float32)
    yb = rng.standard_normal((8, 1), dtype=np.float32)
    out.append(("train step MLP 64-64-1, batch 8 (fwd, bwd, AdamW)",
                train(kiln, kt, kiln.tensor(xb), kiln.tensor(yb)),
                train(torch, tt, torch.from_numpy(xb), torch.from_numpy(yb)), False))
    return out


def graph_rows():
    us = lambda s: f"{s * 1e6:.1f} us"  # noqa: E731
    rows = []
    with one_thread():
        for name, kfn, tfn, no_grad in _cases():
            with kiln.no_grad() if no_grad else kiln.enable_grad():
                eager = _per_call(kfn)
                g = kiln.Graph()
                with kiln.graph(g):
                    kfn()
            replay = _per_call(g.replay)
            with torch.no_grad() if no_grad else torch.enable_grad():
                teager = _per_call(tfn)
            rows.append(f"| graph: {name} | {us(eager)} | {us(replay)} | {eager / replay:.2f}x | {us(teager)} | "
                        f"{teager / replay:.2f}x |")
    return rows


if __name__ == "__main__":
    print("\n".join(HEADER + graph_rows()))
