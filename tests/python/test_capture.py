"""The capture layer (innermost in dispatch) sees a training step as a flat list of kernels with their
buffers and attributes: replaying the list on the same buffers reproduces the step bit for bit
(DESIGN.md section 1; the proof that the capture point is right for graph capture and replay)."""

import numpy as np

import kiln
from helpers import load_quickstart
import kiln.nn.functional as F


def _quickstart():
    return load_quickstart()


def _bits(t):
    return t.detach().contiguous().numpy().copy()


def test_quickstart_step_replays_bit_for_bit():
    qs = _quickstart()
    kiln.manual_seed(0)
    vocab, context, batch = 40, 32, 4
    model = qs.CharTransformer(vocab, context, d_model=48, n_layers=2, n_heads=4, dropout=0.1)
    opt = kiln.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    g = kiln.Generator().manual_seed(1)
    x = kiln.randint(0, vocab, (batch, context), generator=g)
    y = kiln.randint(0, vocab, (batch, context), generator=g)
    params = list(model.parameters())

    # a first step outside the recording creates the optimiser state; then the state to return to
    loss = qs.loss_fn(model, x, y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    with kiln.no_grad():
        start_params = [p.clone() for p in params]
        start_state = {id(p): {k: v.clone() for k, v in opt.state[p].items()} for p in params}

    rec = kiln._C._KernelRecorder()
    rec.start()
    try:
        loss = qs.loss_fn(model, x, y)
        loss.backward()
        opt.step()
    finally:
        rec.stop()
    loss_1 = _bits(loss)
    params_1 = [_bits(p) for p in params]
    grads_1 = [_bits(p.grad) for p in params]

    records = rec.records()
    names = [r[0] for r in records]
    assert len(rec) == len(records) > 100
    # forward, backward and the optimiser update, each a table kernel; no kernel appears twice in
    # a row for one call (no nested dispatch: a kernel's helper ops are not recorded)
    for op in ("native_layer_norm", "_sdpa_flash", "cross_entropy_loss", "gelu", "embedding",
               "_sdpa_flash_backward", "native_layer_norm_backward", "gelu_backward", "random_fill_",
               "_fused_optimizer_update"):
        assert op in names, op
    assert names[-1] == "_fused_optimizer_update"
    for name, ins, outs in records:  # every buffer a kernel touches is a real one
        assert all(i is None or i > 0 for i in ins) and all(o is None or o > 0 for o in outs), name

    # back to the start (outside any recording), then the recorded kernels again
    with kiln.no_grad():
        for p, s in zip(params, start_params):
            p.copy_(s)
        for p in params:
            for k, v in start_state[id(p)].items():
                opt.state[p][k].copy_(v)
        for p in params:
            p.grad.zero_()
    assert not np.array_equal(_bits(params[0]), params_1[0])
    rec.replay()
    assert np.array_equal(_bits(loss), loss_1)
    for p, want_p, want_g in zip(params, params_1, grads_1):
        assert np.array_equal(_bits(p), want_p)
        assert np.array_equal(_bits(p.grad), want_g)


def test_nested_dispatch_is_not_recorded():
    # a kernel that converts its operands (int + float) runs the conversion as part of itself
    a = kiln.arange(6).view(2, 3)
    b = kiln.randn(2, 3)
    rec = kiln._C._KernelRecorder()
    rec.start()
    try:
        c = a + b
    finally:
        rec.stop()
    assert [r[0] for r in rec.records()] == ["add"]
    want = _bits(c)
    c.zero_()
    rec.replay()
    assert np.array_equal(_bits(c), want)


def test_recorder_refuses_a_second_layer():
    r1, r2 = kiln._C._KernelRecorder(), kiln._C._KernelRecorder()
    r1.start()
    try:
        try:
            r2.start()
            raise AssertionError("a second capture layer was attached")
        except RuntimeError as e:
            assert "already attached" in str(e)
    finally:
        r1.stop()
    out = F.relu(kiln.randn(3))  # detached: nothing recorded
    assert len(r1) == 0 and out.shape == (3,)
