"""kiln.func benchmarks for `make bench` (issue 16): per-sample gradients of a small MLP with
vmap(grad(loss)) through kiln.func and torch.func on identical weights and data, and a vmapped
attention-like score (batched matmul + softmax). Time only."""
import numpy as np
import torch

import kiln


def func_cases(Case, quick):
    rng = np.random.default_rng(0)
    B, din, dh, dout = 64, 32, 64, 10
    w1, w2 = (rng.standard_normal((dh, din)) * 0.1).astype(np.float32), (rng.standard_normal((dout, dh)) * 0.1).astype(np.float32)
    x = rng.standard_normal((B, din)).astype(np.float32)
    y = np.eye(dout, dtype=np.float32)[rng.integers(0, dout, B)]  # one-hot targets
    q = rng.standard_normal((B, 16, 32)).astype(np.float32)
    k = rng.standard_normal((B, 16, 32)).astype(np.float32)

    def per_sample_grads():
        kp = {"w1": kiln.from_numpy(w1.copy()), "w2": kiln.from_numpy(w2.copy())}
        tp = {"w1": torch.from_numpy(w1.copy()), "w2": torch.from_numpy(w2.copy())}
        kx, tx = kiln.from_numpy(x.copy()), torch.from_numpy(x.copy())
        ky, ty = kiln.from_numpy(y.copy()), torch.from_numpy(y.copy())

        def loss(lib):
            def f(p, xi, yi):
                h = lib.relu(p["w1"] @ xi)
                logits = p["w2"] @ h
                return -(lib.log_softmax(logits, -1) * yi).sum()
            return f
        kf = kiln.func.vmap(kiln.func.grad(loss(kiln)), in_dims=(None, 0, 0))
        tf = torch.func.vmap(torch.func.grad(loss(torch)), in_dims=(None, 0, 0))
        return (lambda: kf(kp, kx, ky)), (lambda: tf(tp, tx, ty))

    def scores():
        kq, kk = kiln.from_numpy(q.copy()), kiln.from_numpy(k.copy())
        tq, tk = torch.from_numpy(q.copy()), torch.from_numpy(k.copy())
        kf = kiln.func.vmap(lambda a, b: kiln.softmax(a @ b.T, -1))
        tf = torch.func.vmap(lambda a, b: torch.softmax(a @ b.T, -1))
        return (lambda: kf(kq, kk)), (lambda: tf(tq, tk))

    wc = (rng.standard_normal((8, 3, 3, 3)) * 0.2).astype(np.float32)
    xc = rng.standard_normal((32, 3, 16, 16)).astype(np.float32)

    def per_sample_cnn_grads():
        kw, tw = kiln.from_numpy(wc.copy()), torch.from_numpy(wc.copy())
        kx, tx = kiln.from_numpy(xc.copy()), torch.from_numpy(xc.copy())

        def loss(lib, F):
            return lambda w, xi: F.relu(F.conv2d(xi.unsqueeze(0), w, padding=1)).mean()
        kf = kiln.func.vmap(kiln.func.grad(loss(kiln, kiln.nn.functional)), in_dims=(None, 0))
        tf = torch.func.vmap(torch.func.grad(loss(torch, torch.nn.functional)), in_dims=(None, 0))
        return (lambda: kf(kw, kx)), (lambda: tf(tw, tx))

    return [Case(f"vmap(grad) MLP {din}-{dh}-{dout} B={B}", per_sample_grads),
            Case("vmap(grad) conv 3-8 3x3 16x16 B=32", per_sample_cnn_grads),
            Case("vmap softmax(q k^T) 64x16x32", scores)]
