"""kiln.use_deterministic_algorithms(True): every output of a mixed workload — reductions over long
rows, matrix products and their gradients, convolution weight gradients, normalisation and attention
backward, embedding and scatter gradients, an LSTM, and a few AdamW steps of the quickstart model — is
bitwise identical on 1, 2, 3 and 4 threads (issue 16). The flag's Python API against torch's is in
test_tensor_protocol.py."""
import pytest

import kiln
import kiln.nn.functional as F


def _workload():
    kiln.manual_seed(0)  # the LSTM's initial weights
    g = kiln.Generator().manual_seed(0)
    out = {}
    x = kiln.randn(300_000, generator=g)
    out["sum"], out["mean"], out["var"] = x.sum(), x.mean(), x.var()
    out["norm"] = kiln.linalg.vector_norm(x)
    out["sum_f64"] = x.double().sum()
    out["sum_rows"] = kiln.randn(64, 40_000, generator=g).sum(1)
    a = kiln.randn(257, 1031, generator=g).requires_grad_()
    b = kiln.randn(1031, 129, generator=g).requires_grad_()
    m = a @ b
    (m * m).sum().backward()
    out["mm"], out["mm_ga"], out["mm_gb"] = m, a.grad, b.grad
    bb = kiln.randn(8, 64, 300, generator=g).requires_grad_()
    bm = kiln.bmm(bb, bb.transpose(1, 2))
    bm.sum().backward()
    out["bmm"], out["bmm_g"] = bm, bb.grad
    xi = kiln.randn(8, 16, 24, 24, generator=g)
    w = kiln.randn(32, 16, 3, 3, generator=g).requires_grad_()
    y = F.conv2d(xi, w, padding=1)
    (y * y).sum().backward()
    out["conv"], out["conv_gw"] = y, w.grad
    w1 = kiln.randn(8, 4, 5, generator=g).requires_grad_()
    F.conv1d(kiln.randn(16, 4, 200, generator=g), w1).square().sum().backward()
    out["conv1d_gw"] = w1.grad
    ln_x = kiln.randn(512, 1024, generator=g).requires_grad_()
    ln_w = kiln.ones(1024).requires_grad_()
    F.layer_norm(ln_x, (1024,), ln_w).square().sum().backward()
    out["ln_gx"], out["ln_gw"] = ln_x.grad, ln_w.grad
    bn_x = kiln.randn(64, 32, 16, 16, generator=g).requires_grad_()
    bn_w = kiln.ones(32).requires_grad_()
    F.batch_norm(bn_x, None, None, bn_w, training=True).square().sum().backward()
    out["bn_gx"], out["bn_gw"] = bn_x.grad, bn_w.grad
    emb = kiln.randn(1000, 64, generator=g).requires_grad_()
    idx = kiln.randint(0, 1000, (20_000,), generator=g)
    F.embedding(idx, emb).square().sum().backward()
    out["embedding_g"] = emb.grad
    logits = kiln.randn(4096, 500, generator=g).requires_grad_()
    F.cross_entropy(logits, kiln.randint(0, 500, (4096,), generator=g)).backward()
    out["ce_g"] = logits.grad
    q = kiln.randn(4, 8, 128, 64, generator=g).requires_grad_()
    att = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    att.square().sum().backward()
    out["sdpa"], out["sdpa_g"] = att, q.grad
    lstm = kiln.nn.LSTM(32, 64, batch_first=True)
    seq = kiln.randn(16, 50, 32, generator=g)
    h, _ = lstm(seq)
    h.square().sum().backward()
    out["lstm"], out["lstm_gw"] = h, lstm.weight_ih_l0.grad
    src = kiln.randn(100_000, generator=g).requires_grad_()
    tgt = kiln.zeros(100).index_add(0, kiln.randint(0, 100, (100_000,), generator=g), src)
    tgt.square().sum().backward()
    out["index_add"], out["index_add_g"] = tgt, src.grad
    return out


@pytest.fixture
def deterministic():
    prev = kiln.get_num_threads()
    kiln.use_deterministic_algorithms(True)
    yield
    kiln.use_deterministic_algorithms(False)
    kiln.set_num_threads(prev)


def test_outputs_do_not_depend_on_the_thread_count(deterministic):
    results = {}
    for threads in (1, 2, 3, 4):
        kiln.set_num_threads(threads)
        results[threads] = _workload()
    ref = results[1]
    for threads in (2, 3, 4):
        differ = [k for k, v in results[threads].items() if not bool((v == ref[k]).all())]
        assert not differ, f"{threads} threads: outputs differ from 1 thread: {differ}"


def test_a_training_run_does_not_depend_on_the_thread_count(deterministic):
    """A small transformer language model (embedding, attention, MLP, layer norm, cross entropy) for a
    few AdamW steps: the same parameters, bit for bit, on 1 and 3 threads."""
    def train(threads):
        kiln.set_num_threads(threads)
        kiln.manual_seed(0)
        layer = kiln.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
        emb, head = kiln.nn.Embedding(100, 64), kiln.nn.Linear(64, 100)
        params = list(layer.parameters()) + list(emb.parameters()) + list(head.parameters())
        opt = kiln.optim.AdamW(params, lr=1e-3)
        g = kiln.Generator().manual_seed(1)
        for _ in range(3):
            tok = kiln.randint(0, 100, (16, 65), generator=g)
            logits = head(layer(emb(tok[:, :-1]), is_causal=True,
                                src_mask=kiln.nn.Transformer.generate_square_subsequent_mask(64)))
            loss = F.cross_entropy(logits.reshape(-1, 100), tok[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        return [p.detach().clone() for p in params], loss.detach()
    (p1, l1), (p3, l3) = train(1), train(3)
    assert bool((l1 == l3).all())
    assert all(bool((a == b).all()) for a, b in zip(p1, p3))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.complex64])
def test_linear_algebra_does_not_depend_on_the_thread_count(deterministic, dtype):
    """One matrix large enough for the splits over the pool (blocked LU from 192, QR from 256,
    Cholesky from 512, eigh's back-transformation, svd's path, gelsy's steps): on one thread in this
    mode, so 1 and 2 threads give the same bits."""
    def run(threads):
        kiln.set_num_threads(threads)
        g = kiln.Generator().manual_seed(3)
        a = kiln.randn(600, 600, generator=g).to(dtype)
        spd = a @ a.mH / 600 + kiln.eye(600).to(dtype)
        out = {}
        out["lu"], out["piv"] = kiln.linalg.lu_factor(a)
        out["solve"] = kiln.linalg.solve(a, a[:, :3])
        out["chol"] = kiln.linalg.cholesky(spd)
        out["q"], out["r"] = kiln.linalg.qr(a)
        out["l"], out["v"] = kiln.linalg.eigh(spd)
        out["u"], out["s"], out["vh"] = kiln.linalg.svd(a[:, :500])
        out["x"] = kiln.linalg.lstsq(a, a[:, :2]).solution
        return out
    one, two = run(1), run(2)
    differ = [k for k in one if not bool((one[k] == two[k]).all())]
    assert not differ, f"2 threads: outputs differ from 1 thread: {differ}"
